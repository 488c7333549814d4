//! A sled store on a full disk (a small tmpfs; needs root, hence ignored by default: run with
//! `cargo test --test disk_full -- --ignored` as root). Before: ingest until the disk is full,
//! then `loci stats` while it is still full, and the store never opened again ("Read corrupted
//! data") in some runs, because sled writes while it opens. Now such an open is refused without
//! writing a byte, and the store opens and verifies once there is space again.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use loci::ingest::EventLine;
use loci::world::{self, WorldConfig};

const BIN: &str = env!("CARGO_BIN_EXE_loci");

fn loci(args: &[&str], store: &Path, extra: &[&Path]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--store")
        .arg(store)
        .args(extra)
        .output()
        .unwrap()
}

fn files(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
}

fn mount(dir: &Path, opts: &str) -> bool {
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
        .arg(dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Unmounts even when an assertion fails.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
#[ignore = "needs root: mounts small tmpfs file systems"]
fn sled_open_on_a_full_disk_writes_nothing_and_the_store_survives() {
    let tmp = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for seed in 0..12 {
        let path = tmp.path().join(format!("w{seed}.jsonl"));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for e in world::generate(&WorldConfig {
            seed: 100 + seed,
            scale: 40,
            days: 10,
        })
        .events
        {
            writeln!(f, "{}", EventLine::from(e).to_json_line()).unwrap();
        }
        inputs.push(path);
    }
    let inputs: Vec<&Path> = inputs.iter().map(|p| p.as_path()).collect();
    let mut refused = 0;
    for size_kb in (6000..10000).step_by(500) {
        let mnt = tmp.path().join(format!("mnt{size_kb}"));
        std::fs::create_dir_all(&mnt).unwrap();
        assert!(
            mount(&mnt, &format!("size={size_kb}k")),
            "mount failed (not root?)"
        );
        let _unmount = Unmount(mnt.clone());
        let store = mnt.join("s");
        assert!(loci(&["init", "--backend", "sled"], &store, &[])
            .status
            .success());
        // Fill the disk.
        let out = loci(&["ingest", "--commit-every", "50"], &store, &inputs);
        assert!(
            !out.status.success(),
            "{size_kb}k: the disk did not fill up"
        );

        let mut before = BTreeMap::new();
        files(&store.join("sled"), &mut before);
        let out = loci(&["stats"], &store, &[]);
        if !out.status.success() {
            refused += 1;
            let mut after = BTreeMap::new();
            files(&store.join("sled"), &mut after);
            assert!(
                before == after,
                "{size_kb}k: a failed open wrote to sled's files"
            );
        }

        assert!(mount(&mnt, "remount,size=64m"));
        for args in [&["stats"][..], &["replay", "--verify"][..]] {
            let out = loci(args, &store, &[]);
            assert!(
                out.status.success(),
                "{size_kb}k: loci {args:?} after freeing space:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    assert!(refused > 0, "no open met a full disk");
}

/// helper-115: an ingest that filled the disk stopped where it said; then every reading command
/// (`stats`, `timeline`, `search`) exited 8 while the disk stayed full, since opening the store
/// brings its text index up to the log, which writes. A read is served by the views as they
/// are, and what the ingest reported committed is there.
#[test]
#[ignore = "needs root: mounts a small tmpfs file system"]
fn reads_on_a_full_disk_are_served_from_the_views_as_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
    ];
    for i in 0..100_000usize {
        let (n, word) = (i % 5000, words[i % words.len()]);
        let edge = match i {
            0 => String::new(),
            _ => format!(
                r#",{{"op":"edge","from":"n{n}","relation":"NEAR","to":"n{}","confidence":0.5}}"#,
                (i * 7) % i.min(5000)
            ),
        };
        writeln!(
            f,
            r#"{{"ts":{},"kind":"OBSERVATION","actor":"bot","payload":"saw {word} {} number {i}","idempotency_key":"k{i}","assert":[{{"op":"node","key":"n{n}","label":"Thing","name":"Thing {word} {n}"}}{edge}]}}"#,
            i * 60,
            words[(i * 3) % words.len()],
        )
        .unwrap();
    }
    drop(f);
    // Where the disk fills (in the log's commit, the text index's, the snapshot's) depends on
    // its size: with this input, 18 MB filled it in the text index's commit, which then lagged.
    for size_mb in 16..=20 {
        let mnt = tmp.path().join(format!("mnt{size_mb}"));
        std::fs::create_dir_all(&mnt).unwrap();
        assert!(
            mount(&mnt, &format!("size={size_mb}m")),
            "mount failed (not root?)"
        );
        let _unmount = Unmount(mnt.clone());
        let store = mnt.join("s");
        assert!(loci(&["init"], &store, &[]).status.success());
        let out = loci(&["ingest", "--commit-every", "5000"], &store, &[&input]);
        assert!(
            !out.status.success(),
            "{size_mb} MB: the disk did not fill up"
        );
        for args in [
            &["stats"][..],
            &["timeline", "--limit", "2"],
            &["search", "alpha"],
        ] {
            let out = loci(args, &store, &[]);
            assert!(
                out.status.success(),
                "{size_mb} MB: loci {args:?} on a full disk:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(mount(&mnt, "remount,size=300m"));
        let out = loci(&["replay", "--verify"], &store, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
