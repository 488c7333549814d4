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
