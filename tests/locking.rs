//! One writer per store, readers beside it: a second writer is told which process holds the
//! store (exit 5 from the CLI), read-only handles share a redb store with its writer, and a lock
//! left by a dead process never blocks.

use std::path::Path;
use std::process::{Command, Stdio};

use loci::model::{EventDraft, NodeUpsert};
use loci::{Assertion, BackendKind, Error, SearchFilter, Store};

const BIN: &str = env!("CARGO_BIN_EXE_loci");

fn sighting(ts: i64, key: &str) -> EventDraft {
    let mut e = EventDraft::new(ts, "bot", "SIGHTING");
    e.assertions = vec![Assertion::UpsertNode(NodeUpsert {
        key: key.into(),
        label: Some("Item".into()),
        name: Some(key.into()),
        ..Default::default()
    })];
    e
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn a_second_writer_is_told_who_holds_the_store() {
    for kind in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let writer = Store::create(&path, kind).unwrap();
        match Store::open(&path) {
            Err(Error::Locked { holder, .. }) => assert_eq!(holder, Some(std::process::id())),
            Err(e) => panic!("{kind}: expected Locked, got {e}"),
            Ok(_) => panic!("{kind}: a second writer opened"),
        }
        // The holder is this process: another handle of it, which the message says to close
        // (it had named this process's pid as another's).
        let msg = Store::open(&path).err().unwrap().to_string();
        assert!(
            msg.contains(&format!("locked by this process ({})", std::process::id()))
                && msg.contains("close it first"),
            "{msg}"
        );
        drop(writer);
        Store::open(&path).unwrap();
    }
}

/// A lock held by another process whose pid is this process's (another container's, sharing
/// the store) is not said to be held by this process: the pid in the lock file alone had made
/// the message "locked by this process ...; close it first" (the session's review).
#[cfg(unix)]
#[test]
fn a_lock_held_elsewhere_under_this_pid_is_not_said_to_be_held_here() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    drop(Store::create(&path, BackendKind::Redb).unwrap());
    let lock = path.join("lock");
    std::fs::write(&lock, std::process::id().to_string()).unwrap();
    // Another process holds the lock; the file names this one's pid.
    let mut holder = flock_holding(&lock);
    let held = std::time::Instant::now();
    let msg = loop {
        match Store::open(&path) {
            Err(e @ Error::Locked { .. }) => break e.to_string(),
            Ok(s) => {
                drop(s);
                assert!(held.elapsed().as_secs() < 10, "flock never took the lock");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    };
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(
        msg.contains(&format!("locked by process {}", std::process::id()))
            && !msg.contains("this process"),
        "{msg}"
    );
}

#[test]
fn readers_share_a_redb_store_with_its_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let writer = Store::create(&path, BackendKind::Redb).unwrap();
    writer.ingest(vec![sighting(1, "emerald")]).unwrap();
    let reader = Store::open_read_only(&path).unwrap();
    assert!(reader.is_read_only() && !writer.is_read_only());
    assert!(reader.node_by_key("emerald").is_some());
    let hits = reader
        .search("emerald", &SearchFilter::default(), 10)
        .unwrap();
    assert!(!hits.is_empty());
    assert!(matches!(
        reader.ingest(vec![sighting(2, "x")]),
        Err(Error::ReadOnly { .. })
    ));
    // The writer goes on; a reader opened later sees its commit.
    writer.ingest(vec![sighting(2, "diamond")]).unwrap();
    let later = Store::open_for_reading(&path).unwrap();
    assert!(later.is_read_only(), "the writer still holds the store");
    assert!(later.node_by_key("diamond").is_some());
    drop((reader, later, writer));
    let alone = Store::open_for_reading(&path).unwrap();
    assert!(!alone.is_read_only(), "nobody holds it: a writable handle");
}

#[test]
fn a_sled_store_held_by_a_writer_is_locked_for_readers_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let _writer = Store::create(&path, BackendKind::Sled).unwrap();
    match Store::open_for_reading(&path) {
        Err(Error::Locked { holder, .. }) => assert_eq!(holder, Some(std::process::id())),
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("sled cannot share its files"),
    }
}

#[test]
fn a_lock_file_without_a_live_holder_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    drop(Store::create(&path, BackendKind::Redb).unwrap());
    // What a killed writer leaves: the file with its pid, and no lock (the OS released it).
    std::fs::write(path.join("lock"), "999999").unwrap();
    let s = Store::open(&path).unwrap();
    assert_eq!(
        std::fs::read_to_string(path.join("lock")).unwrap(),
        std::process::id().to_string()
    );
    drop(s);
}

/// A redb store under `tmp` holding one sighting, open, and a file of one event line to ingest.
fn a_store_and_a_line_to_ingest(tmp: &Path) -> (Store, std::path::PathBuf, std::path::PathBuf) {
    let path = tmp.join("s");
    let file = tmp.join("e.jsonl");
    std::fs::write(&file, "{\"ts\":5,\"kind\":\"NOTE\",\"payload\":\"ruby\"}\n").unwrap();
    let store = Store::create(&path, BackendKind::Redb).unwrap();
    store.ingest(vec![sighting(1, "emerald")]).unwrap();
    (store, path, file)
}

#[test]
fn the_cli_reads_during_a_write_and_exits_5_for_a_second_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let (writer, path, file) = a_store_and_a_line_to_ingest(tmp.path());
    let out = Command::new(BIN)
        .args(["ingest", "--store", p(&path), p(&file)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("locked by process {}", std::process::id())),
        "{err}"
    );
    // Four readers at once, beside the writer: all answer.
    let readers: Vec<_> = (0..4)
        .map(|_| {
            Command::new(BIN)
                .args(["search", "--store", p(&path), "emerald"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in readers {
        let out = r.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("emerald"));
    }
    drop(writer);
    let out = Command::new(BIN)
        .args(["ingest", "--store", p(&path), p(&file)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// helper-102 (session 46): a reading command takes the writer lock when it is free (to
/// repair the text index, flush recorded uses, write a snapshot), and a writer that came
/// during its read waited half a second and exited 5, where the README says only a second
/// writer is refused. A writer waits for a reader to finish.
#[test]
fn a_writer_waits_for_a_reading_command_that_holds_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, path, file) = a_store_and_a_line_to_ingest(tmp.path());
    drop(store);
    // A reader as a reading command opens: with the writer lock, the store being free.
    let reader = Store::open_for_reading(&path).unwrap();
    assert!(!reader.is_read_only());
    // A writer of this process is refused at once: the reader may be waiting on it.
    let at = std::time::Instant::now();
    assert!(matches!(Store::open(&path), Err(Error::Locked { .. })));
    assert!(at.elapsed() < std::time::Duration::from_secs(5));
    let writer = Command::new(BIN)
        .args(["ingest", "--store", p(&path), p(&file)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Longer than the half second a writer gives a writer's lock.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    drop(reader);
    let out = writer.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // It waited for the reader (not started after it was gone).
    assert!(
        err.contains("waiting for a command reading the store"),
        "{err}"
    );
    assert_eq!(Store::open(&path).unwrap().stats().events, 2);
}

/// helper-102 (session 46): a read command that opened while a compaction swapped the store's
/// files met files of two moments and exited 8, saying the text index must be rebuilt. The
/// store was busy, not damaged: it is told to be locked (exit 5), naming the holder.
#[test]
fn a_read_during_a_compaction_is_told_the_store_is_held() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, path, _) = a_store_and_a_line_to_ingest(tmp.path());
    drop(store);
    // Mid-compaction, as a reader finds it: the work directory there, the text index gone
    // (cleared before it is rebuilt), the lock held by the compacting process.
    std::fs::create_dir(path.join("compact.tmp")).unwrap();
    std::fs::remove_dir_all(path.join("text")).unwrap();
    told_the_store_is_held(&path, &["stats"]);
}

/// helper-115: after the swap, a compaction (or a repair) removes its work directory and then
/// reopens the store, rebuilding the text index for seconds: a read that opened then was told
/// the index must be rebuilt and to open the store for writing (exit 8), while the writer was
/// doing just that. It is told the store is held (exit 5).
#[test]
fn a_read_while_the_writer_rebuilds_the_text_index_is_told_the_store_is_held() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, path, _) = a_store_and_a_line_to_ingest(tmp.path());
    drop(store);
    // After the swap: no work directory, the text index cleared, the lock held.
    std::fs::remove_dir_all(path.join("text")).unwrap();
    std::fs::create_dir(path.join("text")).unwrap();
    told_the_store_is_held(&path, &["search", "anything"]);
}

/// helper-116's review: told "locked" for any index a read-only open could not take, a reader
/// of a newer build beside an older server would be told to wait for good. An index of another
/// layout is refused as such (exit 8), only one being made is the writer at work.
#[test]
fn a_read_beside_a_writer_of_another_index_layout_is_not_told_to_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, path, _) = a_store_and_a_line_to_ingest(tmp.path());
    drop(store);
    let meta = path.join("text").join("meta.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    let mut payload: serde_json::Value =
        serde_json::from_str(json["payload"].as_str().unwrap()).unwrap();
    payload["format"] = serde_json::json!(999);
    json["payload"] = serde_json::Value::String(payload.to_string());
    std::fs::write(&meta, json.to_string()).unwrap();
    let out = run_while_held(&path, &["search", "anything"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert!(err.contains("another layout"), "{err}");
}

/// A read-only open during a stream of commits loads one commit's state, never a mix: in a
/// chain grown one node and one edge per batch, every reader sees exactly one edge fewer than
/// nodes, and every edge's endpoints.
#[test]
fn a_reader_opened_during_commits_sees_one_commit() {
    use loci::model::EdgeUpsert;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let writer = std::sync::Arc::new(Store::create(&path, BackendKind::Redb).unwrap());
    writer.ingest(vec![sighting(0, "k0")]).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let w = {
        let (writer, stop) = (writer.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 1;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 2000 {
                let mut e = sighting(i, &format!("k{i}"));
                e.assertions.push(Assertion::UpsertEdge(EdgeUpsert {
                    from: format!("k{}", i - 1),
                    relation: "NEXT".into(),
                    to: format!("k{i}"),
                    ..Default::default()
                }));
                writer.ingest(vec![e]).unwrap();
                i += 1;
            }
            i
        })
    };
    for _ in 0..100 {
        let r = Store::open_read_only(&path).unwrap();
        let g = r.graph();
        let nodes = g.nodes().count();
        let edges: Vec<_> = g.edges().collect();
        assert_eq!(edges.len() + 1, nodes, "a mixed state");
        for (_, e) in edges {
            assert!(g.node(e.from).is_some() && g.node(e.to).is_some());
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = w.join().unwrap();
    assert!(written > 1, "the writer committed during the reads");
}

/// A reader's open takes longer than the writer's commits are apart (a store of 20k nodes
/// and a writer committing one event at a time): the open reads one pinned view of the
/// committed state. It had read again whenever a commit landed during its read, twenty
/// times, then failed as "locked" (a `loci stats` beside a streaming ingest).
#[test]
fn a_reader_opens_beside_a_writer_that_commits_faster_than_an_open() {
    use loci::model::EdgeUpsert;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let writer = std::sync::Arc::new(Store::create(&path, BackendKind::Redb).unwrap());
    let mut bulk = EventDraft::new(0, "bot", "IMPORT");
    for i in 0..20_000 {
        bulk.assertions.push(Assertion::UpsertNode(NodeUpsert {
            key: format!("n{i}"),
            label: Some("Item".into()),
            name: Some(format!("n{i}")),
            ..Default::default()
        }));
    }
    for i in 1..20_000 {
        bulk.assertions.push(Assertion::UpsertEdge(EdgeUpsert {
            from: format!("n{}", i - 1),
            relation: "NEXT".into(),
            to: format!("n{i}"),
            ..Default::default()
        }));
    }
    writer.ingest(vec![bulk]).unwrap();
    // Commits after the bulk load, so an open also catches up on a tail of the log.
    for i in 0..200 {
        writer
            .ingest(vec![sighting(i + 1, &format!("k{i}"))])
            .unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let w = {
        let (writer, stop) = (writer.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 100_000 {
                writer
                    .ingest(vec![sighting(1_000 + i, &format!("w{i}"))])
                    .unwrap();
                i += 1;
            }
            i
        })
    };
    // Let the writer get going.
    while writer.stats().events < 205 {
        std::thread::yield_now();
    }
    for _ in 0..3 {
        let r = Store::open_read_only(&path).expect("a reader beside a busy writer opens");
        let g = r.graph();
        assert_eq!(g.edges().count(), 19_999, "every edge of the bulk load");
        let stats = r.stats();
        assert_eq!(
            stats.nodes as u64,
            20_000 + stats.events - 1,
            "one node per event after the bulk load, none half-read"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = w.join().unwrap();
    assert!(written > 0, "the writer committed during the opens");
}

/// Runs the CLI as a user who cannot write `store`: this user when it is not root (the store's
/// modes say so); as root, which writes whatever the modes say, the same command as `nobody`
/// through util-linux's `setpriv`, from a copy of the binary that user can reach.
fn loci_as_a_reader(tmp: &Path, args: &[&str]) -> std::process::Output {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        let bin = tmp.join("loci");
        if !bin.exists() {
            std::fs::hard_link(BIN, &bin)
                .or_else(|_| std::fs::copy(BIN, &bin).map(drop))
                .unwrap();
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin);
        c
    } else {
        Command::new(BIN)
    };
    cmd.args(args).env_remove("LOCI_STORE").output().unwrap()
}

/// Takes write permission from everything under `path`, as `chmod -R a-w` does: what the
/// store made readable to others stays so, and nothing more (every file had been made
/// readable, hiding an index file tantivy makes readable by its owner alone).
fn make_read_only(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in walk(path) {
        let mode = std::fs::metadata(&entry).unwrap().permissions().mode();
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode & !0o222)).unwrap();
    }
}

fn walk(path: &Path) -> Vec<std::path::PathBuf> {
    let mut all = vec![path.to_path_buf()];
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            all.extend(walk(&entry.unwrap().path()));
        }
    }
    all
}

/// A store of `kind` holding one sighting of "emerald", made where files are readable by
/// others (the usual umask, whatever CI's is), then made read-only; in a directory anyone
/// may enter.
fn a_read_only_store(kind: BackendKind) -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: umask has no preconditions and cannot fail.
    unsafe { libc::umask(0o022) };
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, kind).unwrap();
    store.ingest(vec![sighting(10, "emerald")]).unwrap();
    drop(store);
    make_read_only(&path);
    (dir, path)
}

#[test]
fn a_store_this_user_cannot_write_is_read_without_its_writer_lock() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = a_read_only_store(BackendKind::Redb);
    let stats = loci_as_a_reader(dir.path(), &["stats", "--store", p(&path)]);
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let search = loci_as_a_reader(dir.path(), &["search", "emerald", "--store", p(&path)]);
    let out = String::from_utf8_lossy(&search.stdout);
    assert!(
        search.status.success() && out.contains("emerald"),
        "{out}{}",
        String::from_utf8_lossy(&search.stderr)
    );
    // Where the lock file is writable but the rest is not, the backend's refusal is met
    // after the lock is taken: the command still reads.
    std::fs::set_permissions(path.join("lock"), std::fs::Permissions::from_mode(0o666)).unwrap();
    let stats = loci_as_a_reader(dir.path(), &["stats", "--store", p(&path)]);
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    std::fs::set_permissions(path.join("lock"), std::fs::Permissions::from_mode(0o444)).unwrap();
    // A command that writes is refused, naming the file it could not write, and saying that
    // it needs to write and what still works: the refusal alone read as a broken store.
    let pin = loci_as_a_reader(dir.path(), &["pin", "emerald", "--store", p(&path)]);
    assert_eq!(pin.status.code(), Some(8));
    let err = String::from_utf8_lossy(&pin.stderr);
    assert!(
        err.contains("lock")
            && err.contains("Permission denied")
            && err.contains("this command opens the store for writing")
            && err.contains("search"),
        "{err}"
    );
    make_writable(&path);
}

/// Found by the session 23 probe: `replay --verify` of another user's store (or one on a
/// read-only mount) exited 8 as a command that writes, though checking writes nothing.
#[test]
fn a_store_this_user_cannot_write_can_still_be_verified() {
    let (dir, path) = a_read_only_store(BackendKind::Redb);
    let verify = loci_as_a_reader(dir.path(), &["replay", "--verify", "--store", p(&path)]);
    let out = String::from_utf8_lossy(&verify.stdout);
    assert!(
        verify.status.success() && out.contains("OK: live state equals replay"),
        "{out}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(out.contains("read-only"), "{out}");
    // And in JSON (session 24 probe: the note was in text mode only).
    let verify = loci_as_a_reader(
        dir.path(),
        &["replay", "--verify", "--json", "--store", p(&path)],
    );
    let v: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(v["checked_read_only"], true, "{v}");
    make_writable(&path);
}

#[test]
fn a_sled_store_this_user_cannot_write_says_why_it_cannot_be_read() {
    let (dir, path) = a_read_only_store(BackendKind::Sled);
    let stats = loci_as_a_reader(dir.path(), &["stats", "--store", p(&path)]);
    let err = String::from_utf8_lossy(&stats.stderr);
    assert!(!stats.status.success());
    assert!(
        err.contains("a sled store is readable only by a user who may write it"),
        "{err}"
    );
    make_writable(&path);
}

/// Gives a tree [`make_read_only`] made back to its owner, for the tempdir's removal.
fn make_writable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in walk(path) {
        let mode = if entry.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

#[test]
fn a_store_this_user_may_not_read_is_a_refusal_not_a_missing_store() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = a_read_only_store(BackendKind::Redb);
    // Its directory closed to others: the manifest cannot be read, which had been "not a loci
    // store ...; create one with `loci init`" (exit 4).
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o500)).unwrap();
    let stats = loci_as_a_reader(dir.path(), &["stats", "--store", p(&path)]);
    let err = String::from_utf8_lossy(&stats.stderr);
    assert_eq!(stats.status.code(), Some(8), "{err}");
    assert!(
        err.contains("Permission denied") && !err.contains("loci init"),
        "{err}"
    );
    make_writable(&path);
}

/// A process that holds `lock` with flock(1) for 30 seconds, as another loci would.
/// Checks that `loci ARGS --store path`, run while another process holds the store's lock, is
/// told the store is held (exit 5), naming the holder.
fn told_the_store_is_held(path: &std::path::Path, args: &[&str]) {
    let out = run_while_held(path, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("is locked by process"), "{err}");
}

/// Runs `loci ARGS --store path` while another process holds the store's lock.
fn run_while_held(path: &std::path::Path, args: &[&str]) -> std::process::Output {
    let lock = path.join("lock");
    let mut holder = flock_holding(&lock);
    let held = std::time::Instant::now();
    while loci::storage::StoreLock::holder(path).is_none() {
        std::fs::write(&lock, holder.id().to_string()).ok();
        assert!(held.elapsed().as_secs() < 10, "flock never took the lock");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = Command::new(BIN)
        .args(args)
        .args(["--store", p(path)])
        .output()
        .unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    out
}

fn flock_holding(lock: &std::path::Path) -> std::process::Child {
    Command::new("flock")
        .arg(lock)
        .args(["sleep", "30"])
        .spawn()
        .unwrap()
}
