//! Damaged store files: a small store (both backends) is copied, bytes of a backend file in the
//! copy are flipped, zeroed or cut off, and the copy is opened and read (stats, log, search,
//! neighbours, a query, verify). Every call must return a value or a typed error: never panic
//! or abort (loci runs inside its caller's process). And when open and verify both succeed, every
//! read must equal the original's: damage may be refused, never served as data.
//!
//! The default run does a modest number of trials per backend; `LOCI_CORRUPT_TRIALS=1000` (or
//! the ignored `*_many` tests) does more, and `LOCI_CORRUPT_SEED` replays a run.

use std::collections::HashMap;

use serde_json::json;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;

use loci::model::NodeId;
use loci::world::{self, Rng, WorldConfig};
use loci::{BackendKind, Error, ExpandOptions, SearchFilter, Store};

const BIN: &str = env!("CARGO_BIN_EXE_loci");

fn build(kind: BackendKind, dir: &Path) {
    let w = world::generate(&WorldConfig {
        seed: 42,
        scale: 1,
        days: 4,
    });
    let store = Store::create(dir, kind).unwrap();
    // Several commits, so the files hold several versions and free space.
    let mut events = w.events;
    while !events.is_empty() {
        let rest = events.split_off(events.len().min(40));
        store.ingest(events).unwrap();
        events = rest;
    }
}

impl std::fmt::Debug for Reads {
    // Only sizes: a full dump of the log drowns the one field that differs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "counts {:?}, {} log entries, {} hits, {} neighbours, {} rows",
            self.counts,
            self.log.len(),
            self.search.len(),
            self.neighbors.len(),
            self.query.len()
        )
    }
}

fn assert_same(got: &Reads, expected: &Reads, what: &str) {
    assert_eq!(got.counts, expected.counts, "{what}: counts");
    assert!(got.log == expected.log, "{what}: log differs");
    assert_eq!(got.search, expected.search, "{what}: search");
    assert!(
        got.neighbors == expected.neighbors,
        "{what}: neighbours differ"
    );
    assert_eq!(got.query, expected.query, "{what}: query rows");
}

/// Everything a reader can see, as comparable text.
#[derive(PartialEq)]
struct Reads {
    counts: (u64, usize, usize, u64),
    log: Vec<String>,
    search: Vec<String>,
    neighbors: Vec<String>,
    query: Vec<String>,
}

fn reads(store: &Store) -> Result<Reads, String> {
    let s = store.stats();
    let mut log = Vec::new();
    store
        .scan_log(0, |e| {
            log.push(format!("{e:?}"));
            Ok(true)
        })
        .map_err(|e| e.to_string())?;
    // Every hit, as a set: ties in BM25 order depend on the segment layout, which a rebuild
    // changes.
    let mut search: Vec<String> = store
        .search("emerald village", &SearchFilter::default(), 10_000)
        .map_err(|e| e.to_string())?
        .iter()
        .map(|h| format!("{:?}", h.target))
        .collect();
    search.sort();
    let neighbors = if s.nodes > 0 {
        store
            .neighbors(NodeId(0), 2, &ExpandOptions::default())
            .iter()
            .map(|n| format!("{n:?}"))
            .collect()
    } else {
        Vec::new()
    };
    let query = loci::query::run(
        store,
        "MATCH (p:Place) RETURN p.key AS k ORDER BY k",
        &HashMap::new(),
    )
    .map_err(|e| e.to_string())?
    .rows
    .iter()
    .map(|r| format!("{r:?}"))
    .collect();
    Ok(Reads {
        counts: (s.events, s.nodes, s.edges, s.text_docs),
        log,
        search,
        neighbors,
        query,
    })
}

fn backend_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        if std::fs::metadata(path)
            .map(|m| m.len() > 0)
            .unwrap_or(false)
        {
            out.push(path.to_path_buf());
        }
    } else if let Ok(rd) = std::fs::read_dir(path) {
        let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for e in entries {
            backend_files(&e, out);
        }
    }
}

fn snapshot_files(path: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    backend_files(path, &mut files);
    files
        .into_iter()
        .map(|f| {
            let bytes = std::fs::read(&f).unwrap_or_default();
            (f, bytes)
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// Damages one backend file of the store in `dir`; returns what was done.
fn damage(kind: BackendKind, dir: &Path, rng: &mut Rng) -> String {
    let mut files = Vec::new();
    backend_files(&kind.path_in(dir), &mut files);
    let file = rng.pick(&files).clone();
    let mut bytes = std::fs::read(&file).unwrap();
    let len = bytes.len();
    let what = match rng.below(4) {
        0 => {
            let n = 1 + rng.below(8) as usize;
            for _ in 0..n {
                let i = rng.below(len as u64) as usize;
                bytes[i] ^= 1 << rng.below(8);
            }
            format!("{n} bit flips")
        }
        1 => {
            let i = rng.below(len as u64) as usize;
            bytes[i] ^= 0xff;
            format!("byte {i} inverted")
        }
        2 => {
            let at = rng.below(len as u64) as usize;
            bytes.truncate(at);
            format!("truncated to {at}")
        }
        _ => {
            let start = rng.below(len as u64) as usize & !4095;
            let end = (start + 4096).min(len);
            bytes[start..end].fill(0);
            format!("page at {start} zeroed")
        }
    };
    std::fs::write(&file, bytes).unwrap();
    format!("{}: {what}", file.strip_prefix(dir).unwrap().display())
}

#[derive(Default, Debug)]
struct Tally {
    open_errors: usize,
    /// Opens that failed but changed the backend's files (redb repairs, sled recovers).
    failed_open_wrote: usize,
    read_errors: usize,
    verify_differs: usize,
    verified_equal: usize,
    panics: Vec<String>,
    wrong_answers: Vec<String>,
    other_errors: Vec<String>,
}

fn typed(e: &Error) -> bool {
    matches!(
        e,
        Error::Corrupt { .. }
            | Error::Backend { .. }
            | Error::Store { .. }
            | Error::NotAStore { .. }
            | Error::Io { .. }
            | Error::Text { .. }
    )
}

fn trials(kind: BackendKind, default_trials: usize) -> Tally {
    let n: usize = std::env::var("LOCI_CORRUPT_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_trials);
    let seed: u64 = std::env::var("LOCI_CORRUPT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let mut rng = Rng::new(seed ^ kind as u64);
    let tmp = tempfile::tempdir().unwrap();
    let original = tmp.path().join("original");
    build(kind, &original);
    let expected = {
        let store = Store::open(&original).unwrap();
        assert!(store.verify().unwrap().ok());
        reads(&store).unwrap()
    };
    let mut tally = Tally::default();
    for trial in 0..n {
        let dir = tmp.path().join(format!("trial{trial}"));
        copy_dir(&original, &dir);
        let what = damage(kind, &dir, &mut rng);
        let damaged = snapshot_files(&kind.path_in(&dir));
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
            let store = match Store::open(&dir) {
                Ok(s) => s,
                Err(e) if typed(&e) => {
                    tally.open_errors += 1;
                    if snapshot_files(&kind.path_in(&dir)) != damaged {
                        tally.failed_open_wrote += 1;
                    }
                    return Ok(());
                }
                Err(e) => return Err(format!("untyped open error: {e}")),
            };
            let got = reads(&store);
            match store.verify() {
                Ok(report) if report.ok() => match got {
                    Ok(got) if got == expected => tally.verified_equal += 1,
                    Ok(got) => {
                        let mut diff = Vec::new();
                        if got.log != expected.log {
                            let i = (0..got.log.len().min(expected.log.len()))
                                .find(|&i| got.log[i] != expected.log[i]);
                            diff.push(format!(
                                "log (first at {i:?}: {:?} vs {:?})",
                                i.map(|i| &got.log[i]),
                                i.map(|i| &expected.log[i])
                            ));
                        }
                        if got.search != expected.search {
                            diff.push("search".into());
                        }
                        if got.neighbors != expected.neighbors {
                            diff.push("neighbours".into());
                        }
                        if got.query != expected.query {
                            diff.push("query".into());
                        }
                        return Err(format!(
                            "verify passed but reads differ: {got:?} vs {expected:?}: {}",
                            diff.join("; ")
                        ));
                    }
                    // An error is no wrong answer.
                    Err(_) => tally.read_errors += 1,
                },
                Ok(_) => tally.verify_differs += 1,
                Err(e) if typed(&e) => tally.read_errors += 1,
                Err(e) => return Err(format!("untyped verify error: {e}")),
            }
            Ok(())
        }));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(wrong)) => tally
                .wrong_answers
                .push(format!("trial {trial} ({what}): {wrong}")),
            Err(_) => tally.panics.push(format!("trial {trial}: {what}")),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!("{kind}: {n} trials, seed {seed}: {tally:#?}");
    tally
}

fn check(kind: BackendKind, default_trials: usize) {
    let t = trials(kind, default_trials);
    assert!(
        t.panics.is_empty(),
        "{kind}: panics escaped: {:#?}",
        t.panics
    );
    assert!(
        t.wrong_answers.is_empty(),
        "{kind}: wrong answers: {:#?}",
        t.wrong_answers
    );
    assert!(t.other_errors.is_empty());
}

#[test]
fn corrupt_redb_store_never_panics_or_lies() {
    check(BackendKind::Redb, 60);
}

#[test]
fn corrupt_sled_store_never_panics_or_lies() {
    check(BackendKind::Sled, 60);
}

/// Before records carried a CRC (format 2), 3 of 1,000 redb trials at seed 7 served a damaged
/// log record that verify could not see (docs/design.md, "Damaged files"); now 0 of 1,000.
#[test]
#[ignore = "1,000 trials per backend; run with --ignored"]
fn corrupt_store_many() {
    for kind in BackendKind::ALL {
        check(kind, 1000);
    }
}

/// Through the binary, to catch aborts (which `catch_unwind` cannot): `loci stats` on damaged
/// copies must exit with a status, never by a signal.
#[test]
fn corrupt_store_never_aborts_the_binary() {
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    for kind in BackendKind::ALL {
        let original = tmp.path().join(format!("original-{kind}"));
        build(kind, &original);
        let mut rng = Rng::new(11 ^ kind as u64);
        for trial in 0..8 {
            let dir = tmp.path().join(format!("{kind}-{trial}"));
            copy_dir(&original, &dir);
            let what = damage(kind, &dir, &mut rng);
            for args in [&["stats"][..], &["replay", "--verify"][..]] {
                let out = Command::new(BIN)
                    .args(args)
                    .arg("--store")
                    .arg(&dir)
                    .output()
                    .unwrap();
                assert!(
                    out.status.signal().is_none(),
                    "{kind} trial {trial} ({what}): loci {args:?} died by signal {:?}:\n{}",
                    out.status.signal(),
                    String::from_utf8_lossy(&out.stderr)
                );
                // A panic escaping to main would exit with 101.
                assert_ne!(
                    out.status.code(),
                    Some(101),
                    "{kind} trial {trial} ({what}): loci {args:?} panicked:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                // One the library caught is its error's to report, not printed as a crash.
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(
                    !stderr.contains("panicked at"),
                    "{kind} trial {trial} ({what}): loci {args:?} printed a caught panic:\n{stderr}"
                );
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

fn small_store(kind: BackendKind, dir: &Path) -> Reads {
    build(kind, dir);
    let store = Store::open(dir).unwrap();
    assert!(!store.stats().text_rebuilt);
    reads(&store).unwrap()
}

/// The full-text index is derived from the log: a damaged segment file must not make the store
/// unusable (before: every command failed until `text/` was deleted by hand); it is rebuilt,
/// and the store says so. A segment file gone is damage too: it had been passed over, so that
/// every search then failed as "a fault of tantivy or loci, not damage" and nothing rebuilt it.
fn damaged_text_segment_is_rebuilt_from_log(kind: BackendKind) {
    let tmp = tempfile::tempdir().unwrap();
    let original = tmp.path().join("original");
    let expected = small_store(kind, &original);
    let mut segments = Vec::new();
    backend_files(&original.join("text"), &mut segments);
    segments.retain(|p| {
        let name = p.file_name().unwrap().to_string_lossy();
        !name.starts_with('.') && name.ends_with(".idx")
            || name.ends_with(".store")
            || name.ends_with(".term")
            || name.ends_with(".fast")
            || name.ends_with(".pos")
    });
    assert!(!segments.is_empty());
    for (i, seg) in segments.iter().enumerate() {
        for how in ["changed", "cut", "gone"] {
            let dir = tmp.path().join(format!("t{i}-{how}"));
            copy_dir(&original, &dir);
            let target = dir.join(seg.strip_prefix(&original).unwrap());
            let mut bytes = std::fs::read(&target).unwrap();
            match how {
                "changed" => {
                    let mid = bytes.len() / 2;
                    bytes[mid] ^= 0x55;
                }
                "cut" => bytes.truncate(bytes.len() / 2),
                _ => {}
            }
            if how == "gone" {
                std::fs::remove_file(&target).unwrap();
            } else {
                std::fs::write(&target, bytes).unwrap();
            }
            let store = Store::open(&dir)
                .unwrap_or_else(|e| panic!("{}: open failed: {e}", target.display()));
            assert!(store.stats().text_rebuilt, "{}", target.display());
            assert_same(
                &reads(&store).unwrap(),
                &expected,
                &target.display().to_string(),
            );
            let report = store.verify().unwrap();
            assert!(report.ok(), "{:#?}", report.differences);
            drop(store);
            // Rebuilt once: the next open finds a sound index.
            assert!(!Store::open(&dir).unwrap().stats().text_rebuilt);
        }
    }
}

/// An open checks a text file's checksum only the first time it meets the file as it is
/// (`text/loci-checked` lists what was checked, by length and modification time): a file
/// damaged in place after an earlier open checked it is checked again, and the index rebuilt.
#[test]
fn a_text_file_damaged_after_an_open_checked_it_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let expected = small_store(BackendKind::Redb, &dir);
    drop(Store::open(&dir).unwrap());
    assert!(dir.join("text").join("loci-checked").exists());
    let mut files = Vec::new();
    backend_files(&dir.join("text"), &mut files);
    let target = files
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "store"))
        .expect("a store file");
    let mut bytes = std::fs::read(&target).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&target, bytes).unwrap();
    let store = Store::open(&dir).unwrap();
    assert!(store.stats().text_rebuilt);
    assert_same(&reads(&store).unwrap(), &expected, "after the damage");
    drop(store);
    assert!(!Store::open(&dir).unwrap().stats().text_rebuilt);
}

#[test]
fn damaged_text_segment_is_rebuilt_from_log_redb() {
    damaged_text_segment_is_rebuilt_from_log(BackendKind::Redb);
}

#[test]
fn damaged_text_segment_is_rebuilt_from_log_sled() {
    damaged_text_segment_is_rebuilt_from_log(BackendKind::Sled);
}

/// A second live document for a target that already has one (what a delete by key leaves
/// behind when tantivy dropped the over-long key term) collapses with the first in a
/// per-target comparison; verify must count documents to see it.
#[test]
fn verify_detects_extra_text_document() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    small_store(BackendKind::Redb, &dir);
    {
        let index = tantivy::Index::open_in_dir(dir.join("text")).unwrap();
        index.tokenizers().register(
            "loci_en",
            tantivy::tokenizer::TextAnalyzer::from(tantivy::tokenizer::SimpleTokenizer::default()),
        );
        let schema = index.schema();
        let field = |n: &str| schema.get_field(n).unwrap();
        let payload = index.load_metas().unwrap().payload.unwrap();
        let reader = index.reader().unwrap();
        let searcher = reader.searcher();
        let seg = &searcher.segment_readers()[0];
        let doc = seg.doc_ids_alive().next().unwrap();
        let r = seg.fast_fields().u64("ref").unwrap().first(doc).unwrap();
        let d = seg.fast_fields().u64("digest").unwrap().first(doc).unwrap();
        let mut writer: tantivy::IndexWriter = index.writer(15_000_000).unwrap();
        let mut ghost = tantivy::TantivyDocument::default();
        ghost.add_text(field("key"), "ghost-of-a-long-key");
        ghost.add_u64(field("ref"), r);
        ghost.add_u64(field("digest"), d);
        writer.add_document(ghost).unwrap();
        let mut prepared = writer.prepare_commit().unwrap();
        prepared.set_payload(&payload);
        prepared.commit().unwrap();
    }
    let store = Store::open(&dir).unwrap();
    let report = store.verify().unwrap();
    assert!(
        report
            .differences
            .iter()
            .any(|d| d.contains("live documents")),
        "verify missed the extra document: {:#?}",
        report.differences
    );
}

/// A backend that panics on its first read, as redb does on some damaged pages.
struct PanicsOnce(std::sync::atomic::AtomicBool);

impl loci::Backend for PanicsOnce {
    fn kind(&self) -> BackendKind {
        BackendKind::Redb
    }
    fn get(&self, _: loci::storage::Table, _: &[u8]) -> loci::Result<Option<Vec<u8>>> {
        if !self.0.swap(true, std::sync::atomic::Ordering::SeqCst) {
            panic!("index out of bounds in a damaged page");
        }
        Ok(Some(b"would be read from a half-updated handle".to_vec()))
    }
    fn scan(
        &self,
        _: loci::storage::Table,
        _: &[u8],
        _: Option<&[u8]>,
        _: &mut loci::storage::ScanVisitor<'_>,
    ) -> loci::Result<()> {
        Ok(())
    }
    fn last(&self, _: loci::storage::Table) -> loci::Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(None)
    }
    fn commit(&self, _: loci::storage::WriteBatch) -> loci::Result<()> {
        Ok(())
    }
}

/// After a panic inside the backend, the handle's state is unknown: the guard reports the
/// panic as a typed error naming the file, and refuses every later call.
#[test]
fn guarded_backend_stays_disabled_after_panic() {
    use loci::storage::{Guarded, Table, WriteBatch};
    use loci::Backend;
    let g = Guarded::new(
        Box::new(PanicsOnce(Default::default())),
        PathBuf::from("/somewhere/data.redb"),
    );
    match g.get(Table::Log, b"k") {
        Err(Error::Corrupt { table, message }) => {
            assert_eq!(table, "log");
            assert!(message.contains("/somewhere/data.redb"), "{message}");
            assert!(message.contains("index out of bounds"), "{message}");
        }
        other => panic!("expected a corrupt error, got {other:?}"),
    }
    assert!(matches!(
        g.get(Table::Log, b"k"),
        Err(Error::Backend { .. })
    ));
    assert!(matches!(g.last(Table::Log), Err(Error::Backend { .. })));
    assert!(matches!(
        g.commit(WriteBatch::default()),
        Err(Error::Backend { .. })
    ));
    assert!(matches!(
        g.scan(Table::Log, b"", None, &mut |_, _| Ok(true)),
        Err(Error::Backend { .. })
    ));
}

/// Errors from redb, sled and tantivy keep the dependency's error as their source, so a caller
/// can inspect it (not only read a flattened string).
#[test]
fn backend_and_index_errors_keep_their_sources() {
    use std::error::Error as _;
    for kind in BackendKind::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        drop(Store::create(&dir, kind).unwrap());
        let data = kind.path_in(&dir);
        if data.is_dir() {
            for f in std::fs::read_dir(&data).unwrap().flatten() {
                if f.path().is_file() {
                    std::fs::write(f.path(), vec![0xAB; 4096]).unwrap();
                }
            }
        } else {
            std::fs::write(&data, vec![0xAB; 4096]).unwrap();
        }
        match Store::open(&dir) {
            Err(e @ Error::Backend { .. }) => {
                assert!(e.source().is_some(), "{kind}: {e} has no source");
                assert!(e.to_string().contains(&data.display().to_string()), "{e}");
            }
            Err(e) => println!("{kind}: other typed error {e}"),
            Ok(_) => panic!("{kind}: a garbage file opened"),
        }
    }
    let missing = tempfile::tempdir().unwrap().path().join("no-index");
    let e = loci::text::TextIndex::open_read_only(&missing)
        .err()
        .unwrap();
    assert!(matches!(e, Error::Text { .. }), "{e}");
    assert!(e.source().is_some(), "{e}");
}

/// A store whose backend files are gone (`data.redb`, `sled/`) is refused as damaged, naming
/// what is missing, and nothing is written: an open had made an empty database in their place
/// and then said "meta table has format None".
#[test]
fn a_store_without_its_backend_files_is_refused_and_left_as_it_is() {
    for kind in [BackendKind::Redb, BackendKind::Sled] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        small_store(kind, &dir);
        let data = kind.path_in(&dir);
        if data.is_dir() {
            std::fs::remove_dir_all(&data).unwrap();
        } else {
            std::fs::remove_file(&data).unwrap();
        }
        // And sled's directory there but empty: sled would make a new database in it.
        let empty_sled_dir = tmp.path().join("e");
        if kind == BackendKind::Sled {
            small_store(kind, &empty_sled_dir);
            let sled_dir = kind.path_in(&empty_sled_dir);
            std::fs::remove_dir_all(&sled_dir).unwrap();
            std::fs::create_dir(&sled_dir).unwrap();
            let e = Store::open(&empty_sled_dir)
                .err()
                .expect("refused")
                .to_string();
            assert!(e.contains("missing"), "{e}");
            assert!(!sled_dir.join("db").exists(), "sled made a database");
        }
        for read_only in [false, true] {
            let opened = if read_only {
                Store::open_read_only(&dir)
            } else {
                Store::open(&dir)
            };
            let e = opened.err().expect("refused");
            let text = e.to_string();
            assert!(
                matches!(e, Error::Store { .. })
                    && text.contains(&*data.file_name().unwrap().to_string_lossy())
                    && text.contains("missing"),
                "{kind:?}: {text}"
            );
            assert!(!data.exists(), "{kind:?}: {} was made", data.display());
        }
    }
}

/// Found by the session 24 probe: a manifest naming the other backend (`"backend": "sled"` on
/// a redb store) was told "DIR/sled/db is missing: the store's log is gone", though the log
/// was there. The refusal says the files are the other backend's, and where to mend it.
#[test]
fn a_manifest_naming_the_other_backend_says_so() {
    for kind in BackendKind::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        small_store(kind, &dir);
        let manifest = dir.join("loci.json");
        let text = std::fs::read_to_string(&manifest).unwrap();
        let other = if kind == BackendKind::Redb {
            "sled"
        } else {
            "redb"
        };
        let ours = if kind == BackendKind::Redb {
            "redb"
        } else {
            "sled"
        };
        std::fs::write(&manifest, text.replace(ours, other)).unwrap();
        let e = Store::open(&dir).err().expect("refused").to_string();
        assert!(
            e.contains(&format!("the files here are a {ours} store's"))
                && e.contains("loci.json")
                && !e.contains("the store's log is gone"),
            "{kind:?}: {e}"
        );
        std::fs::write(&manifest, text).unwrap();
        Store::open(&dir).unwrap();
    }
}

/// A manifest damaged (one byte zeroed: helper-148) or gone says only the store's format and
/// backend, which its log's meta table holds too: the refusal said to restore it from a
/// backup, or gave serde's words alone. It says that `loci repair` writes it again, and repair
/// does, from the meta table, where one backend's log is there; the store is then whole.
#[test]
fn a_damaged_or_missing_manifest_is_written_again_by_repair() {
    for kind in BackendKind::ALL {
        for gone in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            let expected = small_store(kind, &dir);
            let manifest = dir.join("loci.json");
            let good = std::fs::read(&manifest).unwrap();
            if gone {
                std::fs::remove_file(&manifest).unwrap();
            } else {
                let mut bytes = good.clone();
                bytes[4] = 0;
                std::fs::write(&manifest, bytes).unwrap();
            }
            let what = format!("{kind:?}, gone {gone}");
            let e = Store::open(&dir).err().expect("refused").to_string();
            assert!(
                e.contains("loci.json") && e.contains("loci repair"),
                "{what}: {e}"
            );
            let (store, report) = Store::repair_at(&dir).unwrap();
            assert!(report.manifest_written, "{what}");
            assert_same(&reads(&store).unwrap(), &expected, &what);
            assert!(store.verify().unwrap().ok(), "{what}");
            drop(store);
            assert_eq!(std::fs::read(&manifest).unwrap(), good, "{what}");
            // A whole store's repair writes no manifest.
            let (_, report) = Store::repair_at(&dir).unwrap();
            assert!(!report.manifest_written, "{what}");
        }
    }
}

/// A manifest that is no file, that is damaged under an `init`, or that lacks a key
/// (helper-150): a directory in its place was told to be written again by repair, which then
/// refused with the same advice; `init` over a damaged one said only "a loci store already
/// exists here"; one of a right format without its backend named no remedy.
#[test]
fn every_manifest_refusal_names_what_mends_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    small_store(BackendKind::Redb, &dir);
    let manifest = dir.join("loci.json");
    let good = std::fs::read(&manifest).unwrap();
    // A directory in its place: moved away first, then written again.
    std::fs::remove_file(&manifest).unwrap();
    std::fs::create_dir(&manifest).unwrap();
    for e in [
        Store::open(&dir).err().expect("refused").to_string(),
        Store::repair_at(&dir).err().expect("refused").to_string(),
    ] {
        assert!(e.contains("move loci.json away"), "{e}");
    }
    std::fs::remove_dir(&manifest).unwrap();
    Store::repair_at(&dir).unwrap();
    assert_eq!(std::fs::read(&manifest).unwrap(), good);
    // Damaged, under an init: said as damage, not as a store there.
    let mut damaged = good.clone();
    damaged[4] = 0;
    std::fs::write(&manifest, &damaged).unwrap();
    let e = Store::create(&dir, BackendKind::Redb)
        .err()
        .expect("refused");
    assert!(!matches!(e, Error::AlreadyExists { .. }), "{e}");
    assert!(e.to_string().contains("loci repair"), "{e}");
    assert_eq!(std::fs::read(&manifest).unwrap(), damaged);
    // Of this build's format, without its backend.
    std::fs::write(&manifest, r#"{"format": 4}"#).unwrap();
    let e = Store::open(&dir).err().expect("refused").to_string();
    assert!(e.contains("backend") && e.contains("loci repair"), "{e}");
    let (_, report) = Store::repair_at(&dir).unwrap();
    assert!(report.manifest_written);
    assert_eq!(std::fs::read(&manifest).unwrap(), good);
}

/// A manifest gone beside both backends' files (a stray empty `sled/` beside a redb store), or
/// beside a sled directory a killed `init` left without a log (helper-151): each was told that
/// repair writes the manifest again, and repair refused, with the same advice or that the
/// log was gone. Each is said as it is: the other backend's files to move away, or a
/// creation to make again.
#[test]
fn a_missing_manifest_beside_both_backends_or_no_log_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    small_store(BackendKind::Redb, &dir);
    std::fs::remove_file(dir.join("loci.json")).unwrap();
    std::fs::create_dir(dir.join("sled")).unwrap();
    for e in [
        Store::open(&dir).err().expect("refused").to_string(),
        Store::repair_at(&dir).err().expect("refused").to_string(),
    ] {
        assert!(
            e.contains("both backends") && e.contains("move away"),
            "{e}"
        );
    }
    std::fs::remove_dir(dir.join("sled")).unwrap();
    assert!(Store::repair_at(&dir).unwrap().1.manifest_written);
    // An init killed before sled wrote a log: made again by init.
    let killed = tmp.path().join("k");
    std::fs::create_dir_all(killed.join("sled")).unwrap();
    let e = Store::open(&killed).err().expect("refused");
    assert!(matches!(e, Error::NotAStore { .. }), "{e}");
    assert!(e.to_string().contains("loci init"), "{e}");
    let e = Store::repair_at(&killed)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("loci init"), "{e}");
    Store::create(&killed, BackendKind::Sled).unwrap();
}

/// What repair does not write a manifest for: one of a later format (a later build's store),
/// or a directory with both backends' logs (which is the store's is not known). It refuses,
/// as the open does, and leaves the manifest as it was.
#[test]
fn repair_writes_no_manifest_it_cannot_read_from_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    small_store(BackendKind::Redb, &dir);
    let manifest = dir.join("loci.json");
    let later = serde_json::json!({"format": 999, "backend": "redb"}).to_string();
    std::fs::write(&manifest, &later).unwrap();
    let e = Store::repair_at(&dir).err().expect("refused").to_string();
    assert!(e.contains("store format 999"), "{e}");
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), later);
    // The other backend's log beside this one: which is the store's is not known.
    std::fs::remove_file(&manifest).unwrap();
    let other = tmp.path().join("other");
    small_store(BackendKind::Sled, &other);
    copy_dir(&other.join("sled"), &dir.join("sled"));
    let e = Store::repair_at(&dir).err().expect("refused").to_string();
    assert!(e.contains("loci.json"), "{e}");
    assert!(!manifest.exists());
}

/// A FIFO in place of the manifest is refused, naming it, where the open of every command
/// waited for a writer forever (helper-111 probe).
#[test]
fn a_fifo_in_place_of_the_manifest_is_refused_not_waited_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    small_store(BackendKind::Redb, &dir);
    let manifest = dir.join("loci.json");
    std::fs::remove_file(&manifest).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&manifest).status();
    assert!(made.is_ok_and(|s| s.success()));
    let (tx, rx) = std::sync::mpsc::channel();
    let opened = dir.clone();
    std::thread::spawn(move || {
        let _ = tx.send(Store::open(&opened).err().map(|e| e.to_string()));
    });
    let e = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the open returned")
        .expect("refused");
    assert!(
        e.contains("loci.json") && e.contains("not a regular file"),
        "{e}"
    );
}

/// A manifest with a key it does not have (a hand edit's typo, or a later build's field) was
/// read without a word; it is refused, naming the file and the key, as other damage to it is.
#[test]
fn a_manifest_with_an_unknown_key_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    small_store(BackendKind::Redb, &dir);
    let manifest = dir.join("loci.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let odd = text.replacen('{', "{\"backened\": \"sled\", ", 1);
    std::fs::write(&manifest, &odd).unwrap();
    let e = Store::open(&dir).err().expect("refused").to_string();
    assert!(
        e.contains("loci.json") && e.contains("unknown field `backened`"),
        "{odd}: {e}"
    );
    // What it holds is all the meta table's: repair writes it again (helper-150: the
    // refusal had named no remedy).
    assert!(e.contains("loci repair"), "{e}");
    let (_, report) = Store::repair_at(&dir).unwrap();
    assert!(report.manifest_written);
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), text);
    // A later build's manifest, with a key of its own, is told to be of a later format.
    let later = serde_json::json!({"format": 999, "backend": "redb", "shards": 4}).to_string();
    std::fs::write(&manifest, later).unwrap();
    let e = Store::open(&dir).err().expect("refused").to_string();
    assert!(e.contains("store format 999 but this build reads"), "{e}");
    std::fs::write(&manifest, text).unwrap();
    Store::open(&dir).unwrap();
}

/// sled's `conf` file damaged is damage (exit 6, naming the file): sled reads it as a database
/// of a version before 0.29, which a loci store never is, and it had been a failure (exit 8)
/// that said so.
#[test]
fn a_damaged_sled_conf_is_reported_as_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    small_store(BackendKind::Sled, &dir);
    // Not UTF-8 before its last four bytes (its checksum): what sled reads as a conf of
    // before 0.29.
    std::fs::write(
        dir.join("sled").join("conf"),
        b"segment_size: \xff\xfe\x80 garbage\n0000",
    )
    .unwrap();
    let e = Store::open(&dir).err().expect("refused");
    assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
    assert!(e.to_string().contains("conf"), "{e}");
    let out = Command::new(BIN)
        .args(["stats", "--store"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A segment file gone from a store no writer holds is damage to a read-only open too, named
/// as such: it had been taken for a file a writer merged away, tried again for a second, and
/// then reported as "a writer replaced it" with no writer there.
#[test]
fn a_segment_file_gone_is_damage_to_a_read_only_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    small_store(BackendKind::Redb, &dir);
    let mut files = Vec::new();
    backend_files(&dir.join("text"), &mut files);
    let gone = files
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "pos"))
        .expect("a positions file");
    std::fs::remove_file(&gone).unwrap();
    let e = Store::open_read_only(&dir)
        .err()
        .expect("refused")
        .to_string();
    assert!(!e.contains("went away"), "{e}");
    assert!(
        e.contains(&*gone.file_name().unwrap().to_string_lossy()),
        "{e}"
    );
    // A writer's open rebuilds it.
    assert!(Store::open(&dir).unwrap().stats().text_rebuilt);
}

/// Flips a byte of event `seq`'s log record in the store at `path` (closed): its checksum no
/// longer matches.
fn flip_a_byte_of_log_record(kind: BackendKind, path: &Path, seq: u64) {
    use loci::storage::{Table, WriteBatch};
    let backend = kind.open(path).unwrap();
    let key = seq.to_be_bytes();
    let mut record = backend.get(Table::Log, &key).unwrap().unwrap();
    let last = record.len() - 1;
    record[last] ^= 0x55;
    let mut batch = WriteBatch::default();
    batch.put(Table::Log, key, record);
    backend.commit(batch).unwrap();
}

/// Found by the session 24 probe: a log record whose checksum failed was reported as
/// "corrupt record in table log: checksum mismatch (...)", naming neither the file nor the
/// record, so the user could not tell what to restore. The error names both, on either
/// backend.
#[test]
fn a_damaged_log_record_is_named_by_its_file_and_event() {
    for kind in BackendKind::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s");
        let store = Store::create(&path, kind).unwrap();
        store.ingest(five_sightings()).unwrap();
        drop(store);
        // Event 3's record, one byte of its body flipped: the checksum no longer matches.
        flip_a_byte_of_log_record(kind, &path, 3);
        let file = kind.path_in(&path);
        let names_it = |said: String| {
            assert!(
                said.contains(&file.display().to_string()) && said.contains("event 3"),
                "{kind:?}: {said}"
            );
        };
        // With its snapshot: the open reads the log too, or the record read by itself does.
        match Store::open(&path) {
            Ok(store) => names_it(store.event(3).unwrap_err().to_string()),
            Err(e) => names_it(e.to_string()),
        }
        // Without its snapshot the store replays its log to open.
        remove_snapshots(&path);
        let err = match Store::open(&path) {
            Err(e) => e,
            Ok(s) => s.verify().map(|r| panic!("{kind:?}: {r:?}")).unwrap_err(),
        };
        names_it(err.to_string());
        assert!(typed(&err), "{kind:?}: {err:?}");
    }
}

/// Found by the session 24 probe: one flipped bit early in a sled store's log made sled drop
/// every record after it, and loci opened what was left, an empty store, with exit 0; it
/// rebuilt the full-text index (which had held every event) from the empty log, and
/// `replay --verify` said OK, so the loss went unseen and was made permanent. The committed
/// index is written after the log it reflects, so an index ahead of the log is a log that
/// lost committed events: the open is refused, naming the file, and the index kept.
#[test]
fn a_log_behind_its_full_text_index_is_refused_not_taken_as_the_store() {
    for kind in BackendKind::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s");
        let store = Store::create(&path, kind).unwrap();
        drop(store);
        // The log as it was before anything was ingested: what sled leaves of a damaged one.
        let data = kind.path_in(&path);
        let empty = tmp.path().join("empty");
        copy_dir_or_file(&data, &empty);
        let store = Store::open(&path).unwrap();
        store.ingest(five_sightings()).unwrap();
        drop(store);
        if data.is_dir() {
            std::fs::remove_dir_all(&data).unwrap();
        } else {
            std::fs::remove_file(&data).unwrap();
        }
        copy_dir_or_file(&empty, &data);
        remove_snapshots(&path);
        let err = Store::open(&path).err().expect("refused");
        let said = err.to_string();
        assert!(
            matches!(err, Error::Corrupt { .. })
                && said.contains(&data.display().to_string())
                && said.contains("lost"),
            "{kind:?}: {said}"
        );
        // Refused again: the index was not rebuilt from the short log.
        assert!(Store::open(&path).is_err(), "{kind:?}");
    }
}

fn copy_dir_or_file(from: &Path, to: &Path) {
    if from.is_dir() {
        copy_dir(from, to);
    } else {
        std::fs::copy(from, to).unwrap();
    }
}

/// Removes the store's snapshot files, so that an open replays its log.
fn remove_snapshots(path: &Path) {
    for f in std::fs::read_dir(path).unwrap() {
        let f = f.unwrap().path();
        if f.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("state.snapshot"))
        {
            std::fs::remove_file(f).unwrap();
        }
    }
}

fn five_sightings() -> Vec<loci::EventDraft> {
    (1..=5)
        .map(|t| loci::EventDraft::new(t, "bot", "SEEN"))
        .collect()
}

/// Flips the bits `mask` of byte `at` in the key of the time index's middle entry, as damage
/// would; gives the key it had.
fn flip_in_a_time_index_key(kind: BackendKind, dir: &Path, at: usize, mask: u8) -> Vec<u8> {
    use loci::storage::{Table, WriteBatch};
    let backend = kind.open(dir).unwrap();
    let mut keys = Vec::new();
    backend
        .scan(Table::EventTime, &[], None, &mut |k, _| {
            keys.push(k.to_vec());
            Ok(true)
        })
        .unwrap();
    let key = keys[keys.len() / 2].clone();
    let mut moved = key.clone();
    moved[at] ^= mask;
    let mut batch = WriteBatch::default();
    batch.delete(Table::EventTime, key.clone());
    batch.put(Table::EventTime, moved, Vec::new());
    backend.commit(batch).unwrap();
    key
}

/// Moves one entry of the time index to another time, as a flipped bit in its key would: the
/// event it names drops out of the timeline of its own time.
fn misplace_a_time_index_entry(kind: BackendKind, dir: &Path) -> (i64, u64) {
    let key = flip_in_a_time_index_key(kind, dir, 5, 0x41);
    let ts = (u64::from_be_bytes(key[..8].try_into().unwrap()) ^ (1 << 63)) as i64;
    let seq = u64::from_be_bytes(key[8..16].try_into().unwrap());
    (ts, seq)
}

#[test]
fn a_damaged_time_index_is_found_by_verify_and_rebuilt_from_the_log_by_repair() {
    // A flipped bit in `data.redb`'s time index made a timeline short by one event, exit 0;
    // `replay --verify` said MISMATCH and nothing rebuilt the index (session 26 probe).
    for kind in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        small_store(kind, dir.path());
        let whole = |store: &Store| {
            store
                .events_between(i64::MIN, i64::MAX)
                .map(|evs| evs.iter().map(|e| e.seq).collect::<Vec<_>>())
        };
        let before = whole(&Store::open(dir.path()).unwrap()).unwrap();
        let (ts, seq) = misplace_a_time_index_entry(kind, dir.path());

        let store = Store::open(dir.path()).unwrap();
        let near = store.events_between(ts, ts).unwrap();
        assert!(near.iter().all(|e| e.seq != seq), "{kind}: the entry moved");
        // A read that meets the moved entry finds the event it names at another time.
        let e = whole(&store).unwrap_err();
        assert!(
            matches!(e, Error::Corrupt { table, .. } if table == "event_time"),
            "{kind}: {e:?}"
        );
        assert!(e.to_string().contains("loci repair"), "{e}");
        assert!(
            store.verify().map_or(true, |r| !r.ok()),
            "{kind}: verify finds it"
        );

        let (store, report) = store.repair().unwrap();
        assert_eq!(report.time_entries_fixed, 2, "{kind}: {report:?}");
        assert_eq!(whole(&store).unwrap(), before, "{kind}");
        assert!(store
            .events_between(ts, ts)
            .unwrap()
            .iter()
            .any(|e| e.seq == seq));
        let verified = store.verify().unwrap();
        assert!(verified.ok(), "{kind}: {:#?}", verified.differences);
        // A store with nothing wrong is repaired to itself.
        let (store, report) = store.repair().unwrap();
        assert_eq!(report.entries_fixed(), 0, "{kind}: {report:?}");
        assert!(!report.meta_fixed, "{kind}: {report:?}");
        assert_eq!(whole(&store).unwrap(), before, "{kind}");
    }
}

/// A time index entry whose sequence number a flipped bit moved past the log's end names no
/// event: a read that meets it is `Corrupt`, naming the index, where a timeline had listed 48
/// of 49 events with exit 0 and nothing on stderr (helper-111 probe).
#[test]
fn a_time_index_entry_naming_no_event_is_corrupt_not_passed_over() {
    for kind in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        small_store(kind, dir.path());
        // The sequence number's top byte.
        flip_in_a_time_index_key(kind, dir.path(), 8, 0x80);
        let store = Store::open(dir.path()).unwrap();
        let corrupt_time_index = |e: &Error| {
            matches!(e, Error::Corrupt { table, .. } if *table == "event_time")
                && e.to_string().contains("loci repair")
        };
        let e = store.events_between(i64::MIN, i64::MAX).unwrap_err();
        assert!(corrupt_time_index(&e), "{kind}: {e:?}");
        let e = store.latest_events(i64::MIN, i64::MAX, 1000).unwrap_err();
        assert!(corrupt_time_index(&e), "{kind}: {e:?}");
        // A planner query's scan of every event reads the index, not the records, and meets
        // the entry without a read of its own.
        let e = loci::query::run(
            &store,
            "MATCH (e:Event) RETURN count(e) AS n",
            &HashMap::new(),
        )
        .unwrap_err();
        assert!(
            matches!(&e, loci::query::QueryError::Store(e) if corrupt_time_index(e)),
            "{kind}: {e:?}"
        );
        let (store, _) = store.repair().unwrap();
        let (events, total) = store.latest_events(i64::MIN, i64::MAX, 1000).unwrap();
        assert_eq!(events.len(), total, "{kind}");
        assert!(store.verify().unwrap().ok(), "{kind}");
    }
}

/// A time index entry whose sequence number a flipped bit made another event's: a planner
/// query's event scan reads the index's keys alone (a row's number and time are its entry's),
/// and a row that reads the event's record (its kind) finds it at another time than its
/// entry says, which is `Corrupt`, where the row had been
/// answered with the other event (helper-119's review: the scan no longer read records).
#[test]
fn a_planner_row_of_a_time_index_entry_naming_another_event_is_corrupt() {
    for kind in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        small_store(kind, dir.path());
        let store = Store::open(dir.path()).unwrap();
        let times = |store: &Store| {
            loci::query::run(
                store,
                "MATCH (e:Event) RETURN e.seq AS seq, e.ts AS ts, e.kind AS kind",
                &HashMap::new(),
            )
        };
        let before = times(&store).unwrap();
        drop(store);
        // The sequence number's lowest bit: its neighbour's number, an event of the log.
        let key = flip_in_a_time_index_key(kind, dir.path(), 15, 0x01);
        let ts = (u64::from_be_bytes(key[..8].try_into().unwrap()) ^ (1 << 63)) as i64;
        let seq = u64::from_be_bytes(key[8..16].try_into().unwrap());
        let store = Store::open(dir.path()).unwrap();
        let other = store
            .event(seq ^ 1)
            .unwrap()
            .expect("the neighbour is an event");
        assert_ne!(other.ts, ts, "{kind}: the neighbour is at another time");
        let e = times(&store).unwrap_err();
        assert!(
            matches!(&e, loci::query::QueryError::Store(Error::Corrupt { table, .. })
                if *table == "event_time"),
            "{kind}: {e:?}"
        );
        assert!(e.to_string().contains("loci repair"), "{e}");
        let (store, _) = store.repair().unwrap();
        assert_eq!(times(&store).unwrap().rows, before.rows, "{kind}");
    }
}

/// An event scan whose query reads no more of its events than their kind and actor takes
/// them from the episodic index: a damaged record is not read (a count per kind over 980k
/// events had read every record, past the time limit), where a query that reads another
/// field of it meets the damage.
#[test]
fn a_scan_of_kinds_and_actors_reads_no_record() {
    for kind in BackendKind::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s");
        let store = Store::create(&path, kind).unwrap();
        store.ingest(five_sightings()).unwrap();
        // With a snapshot, the open replays no record.
        store.checkpoint().unwrap();
        drop(store);
        flip_a_byte_of_log_record(kind, &path, 3);
        let store = Store::open(&path).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let run = |q: &str| loci::query::run(&store, q, &HashMap::new());
        let counts = run("MATCH (e:Event) RETURN e.actor AS a, e.kind AS k, count(e) AS n")
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(
            counts.rows,
            vec![vec![json!("bot"), json!("SEEN"), json!(5)]],
            "{kind}"
        );
        let fixed = run("MATCH (e:Event {kind: 'SEEN'}) RETURN e.kind AS k, e.actor AS a")
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(fixed.rows.len(), 5, "{kind}");
        let e = run("MATCH (e:Event) RETURN e.kind AS k, count(e.recorded_at) AS n").unwrap_err();
        assert!(e.to_string().contains("event 3"), "{kind}: {e}");
    }
}

/// [`small_store`] in `dir`, consolidated; the store, closed once dropped.
fn consolidated_small_store(kind: BackendKind, dir: &Path) -> Store {
    use loci::dynamics::consolidate::{self, ConsolidateOptions, RuleSummarizer};
    small_store(kind, dir);
    let store = Store::open(dir).unwrap();
    consolidate::consolidate(&store, &RuleSummarizer, &ConsolidateOptions::default()).unwrap();
    store
}

/// The summary index's entry of the newest day summary: `[b's', level, start, seq, end]`, 1
/// a day.
fn newest_day_summary_entry(backend: &dyn loci::storage::Backend) -> Vec<u8> {
    let mut days = Vec::new();
    backend
        .scan(loci::storage::Table::EventFacet, b"s", None, &mut |k, _| {
            if k.first() != Some(&b's') {
                return Ok(false);
            }
            if k.get(1) == Some(&1) {
                days.push(k.to_vec());
            }
            Ok(true)
        })
        .unwrap();
    days.pop().expect("a day summary")
}

/// A flipped bit in a summary index key's level (a day placed as an episode) is `Corrupt`
/// when the memory cover reads the summary it places, where the context had shown the day as
/// an episode, dropped two episodes and exited 0 (helper-111 probe).
#[test]
fn a_summary_index_entry_at_another_level_than_its_summary_is_corrupt() {
    use loci::storage::{Table, WriteBatch};
    for kind in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        consolidated_small_store(kind, dir.path());
        {
            let backend = kind.open(dir.path()).unwrap();
            let key = newest_day_summary_entry(&*backend);
            let mut moved = key.clone();
            moved[1] = 0;
            let mut batch = WriteBatch::default();
            batch.delete(Table::EventFacet, key);
            batch.put(Table::EventFacet, moved, Vec::new());
            backend.commit(batch).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let e =
            loci::context::build_context(&store, &loci::context::ContextOptions::with_budget(4000))
                .unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { table, .. } if *table == "event_facet")
                && e.to_string().contains("loci repair"),
            "{kind}: {e:?}"
        );
        let (store, _) = store.repair().unwrap();
        loci::context::build_context(&store, &loci::context::ContextOptions::with_budget(4000))
            .unwrap();
    }
}

/// helper-127's review: `check` reads each live summary as its pass over the log meets it,
/// and met a summary under two index keys (a damaged copy beside its own) once, by the key
/// that sorted first: a day's copy placed as a week passed unseen where each placement had
/// been read and the copy's found `Corrupt`. Every placement of the number is checked.
#[test]
fn a_summary_under_two_index_keys_is_corrupt_to_the_health_check() {
    use loci::dynamics::health::{self, HealthOptions};
    use loci::storage::{Table, WriteBatch};
    for kind in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        health::check(
            &consolidated_small_store(kind, dir.path()),
            &HealthOptions::default(),
        )
        .unwrap();
        {
            let backend = kind.open(dir.path()).unwrap();
            let mut copy = newest_day_summary_entry(&*backend);
            // A week's level: it sorts after the day's own entry.
            copy[1] = 2;
            let mut batch = WriteBatch::default();
            batch.put(Table::EventFacet, copy, Vec::new());
            backend.commit(batch).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let e = health::check(&store, &HealthOptions::default()).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { table, .. } if *table == "event_facet"),
            "{kind}: {e:?}"
        );
    }
}

/// Moves one log record to another key, as a flipped bit in its key would.
fn misplace_a_log_record(kind: BackendKind, dir: &Path, seq: u64) {
    use loci::storage::{Table, WriteBatch};
    let backend = kind.open(dir).unwrap();
    let key = seq.to_be_bytes().to_vec();
    let value = backend.get(Table::Log, &key).unwrap().unwrap();
    let mut moved = key.clone();
    moved[5] ^= 0x41;
    let mut batch = WriteBatch::default();
    batch.delete(Table::Log, key);
    batch.put(Table::Log, moved, value);
    backend.commit(batch).unwrap();
}

#[test]
fn a_log_record_under_a_damaged_key_is_found_not_passed_over() {
    // A flipped bit in a log record's key hid the event from every timeline and search, while
    // `replay --verify` said OK and `repair` found nothing (session 27 probe).
    for kind in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        small_store(kind, dir.path());
        Store::open(dir.path()).unwrap().checkpoint().unwrap();
        let seq = 20;
        misplace_a_log_record(kind, dir.path(), seq);
        // Opened from its snapshot, the store reads the log only where asked.
        let store = Store::open(dir.path()).unwrap();
        let e = store.event(seq).unwrap_err();
        assert!(
            matches!(e, Error::Corrupt { table, .. } if table == "log"),
            "{kind}: {e:?}"
        );
        assert!(
            e.to_string().contains(&format!("event {seq}")),
            "{kind}: {e}"
        );
        let e = store.events_between(i64::MIN, i64::MAX).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{kind}: {e:?}");
        assert!(
            store.verify().map_or(true, |r| !r.ok()),
            "{kind}: verify finds it"
        );
        drop(store);
        // Without a snapshot the open replays the log, and stops at the gap.
        std::fs::remove_file(dir.path().join("state.snapshot")).unwrap();
        let e = Store::open(dir.path()).err().unwrap();
        assert!(
            matches!(e, Error::Corrupt { table, .. } if table == "log"),
            "{kind}: {e:?}"
        );
    }
}

/// helper-130's review (session 57): a forgetting reads its candidates in its one pass over
/// the log, where it had read each by number, and a read by number refuses a record whose
/// body is another event's, where the pass took it as the event its body names. The pass
/// refuses it now, so a forgetting stops there as it did.
#[test]
fn a_pass_over_the_log_refuses_what_a_read_by_number_refuses() {
    use loci::storage::{Table, WriteBatch};
    for kind in BackendKind::ALL {
        // Two records' bodies swapped: each key in its turn, each body another event's.
        let dir = tempfile::tempdir().unwrap();
        small_store(kind, dir.path());
        Store::open(dir.path()).unwrap().checkpoint().unwrap();
        {
            let backend = kind.open(dir.path()).unwrap();
            let get = |s: u64| backend.get(Table::Log, &s.to_be_bytes()).unwrap().unwrap();
            let (twenty, twenty_one) = (get(20), get(21));
            let mut batch = WriteBatch::default();
            batch.put(Table::Log, 20u64.to_be_bytes(), twenty_one);
            batch.put(Table::Log, 21u64.to_be_bytes(), twenty);
            backend.commit(batch).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let e = store.scan_log(1, |_| Ok(true)).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { table, .. } if *table == "log"),
            "{kind}: {e:?}"
        );
        assert!(e.to_string().contains("event 20"), "{kind}: {e}");
        let e = loci::dynamics::forget::forget(
            &store,
            &loci::dynamics::forget::ForgetOptions::with_budget(1),
        )
        .unwrap_err();
        assert!(matches!(&e, Error::Corrupt { .. }), "{kind}: {e:?}");
    }
}

#[test]
fn a_flipped_bit_in_a_log_key_of_a_redb_leaf_is_found_by_every_read() {
    // The probe's own damage: the key flipped in place, its leaf left as it was, so a scan
    // meets the record between its neighbours (and read it as the event it holds) while a
    // lookup by its number misses it.
    let dir = tempfile::tempdir().unwrap();
    small_store(BackendKind::Redb, dir.path());
    let seq = 20u64;
    let file = dir.path().join("data.redb");
    let mut bytes = std::fs::read(&file).unwrap();
    let run: Vec<u8> = (seq - 1..=seq + 1).flat_map(|s| s.to_be_bytes()).collect();
    let at = bytes
        .windows(run.len())
        .position(|w| w == run.as_slice())
        .expect("keys 19, 20 and 21 lie together in a leaf");
    bytes[at + 8 + 5] ^= 0x41;
    std::fs::write(&file, bytes).unwrap();
    let e = Store::open(dir.path())
        .err()
        .expect("the open replays the log");
    assert!(
        matches!(e, Error::Corrupt { table, .. } if table == "log"),
        "{e:?}"
    );
    assert!(e.to_string().contains("key is damaged"), "{e}");
}

#[test]
fn repair_rebuilds_a_damaged_time_index_leaf_in_one_run() {
    // A bit flipped in a time-index key inside its redb leaf: `repair` edited the entries
    // through the damaged leaf, said it fixed them, and verify still found the index wrong,
    // run after run (session 27 probe). It now writes fresh files.
    let dir = tempfile::tempdir().unwrap();
    small_store(BackendKind::Redb, dir.path());
    let store = Store::open(dir.path()).unwrap();
    let times: Vec<(i64, u64)> = store
        .events_between(i64::MIN, i64::MAX)
        .unwrap()
        .iter()
        .map(|e| (e.ts, e.seq))
        .collect();
    let before: Vec<u64> = times.iter().map(|t| t.1).collect();
    drop(store);
    let key = |(ts, seq): (i64, u64)| {
        let mut k = ((ts as u64) ^ (1 << 63)).to_be_bytes().to_vec();
        k.extend_from_slice(&seq.to_be_bytes());
        k
    };
    let i = times.len() / 2;
    let run: Vec<u8> = [times[i - 1], times[i], times[i + 1]]
        .into_iter()
        .flat_map(key)
        .collect();
    let file = dir.path().join("data.redb");
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes
        .windows(run.len())
        .position(|w| w == run.as_slice())
        .expect("three time keys lie together in a leaf");
    bytes[at + 16 + 3] ^= 0x41;
    std::fs::write(&file, bytes).unwrap();

    let store = Store::open(dir.path()).unwrap();
    assert!(!store.verify().unwrap().ok(), "verify finds the damage");
    let (store, report) = store.repair().unwrap();
    assert!(report.time_entries_fixed > 0, "{report:?}");
    let verified = store.verify().unwrap();
    assert!(
        verified.ok(),
        "one repair mends it: {:#?}",
        verified.differences
    );
    let seqs: Vec<u64> = store
        .events_between(i64::MIN, i64::MAX)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, before);
    let (_, again) = store.repair().unwrap();
    assert_eq!(again.entries_fixed(), 0, "{again:?}");
}

/// A closed store at `path` of [`five_sightings`], event `deleted` of them deleted and the
/// state snapshot written.
fn five_sightings_one_deleted(kind: BackendKind, path: &Path, deleted: u64) {
    let store = Store::create(path, kind).unwrap();
    store.ingest(five_sightings()).unwrap();
    store
        .delete(&loci::DeleteRequest::events([deleted]))
        .unwrap();
    store.checkpoint().unwrap();
}

/// A compaction that fails part way (here: a deleted event's record it must make a tombstone
/// of is damaged) had left its half-written `compact.tmp` in the store directory until the next
/// open. The failure is reported, the directory goes, and the store is as it was.
#[test]
fn a_failed_compaction_leaves_no_work_directory() {
    // redb compacts in place when there is no text to strip; with some, both rewrite the log.
    for kind in BackendKind::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s");
        five_sightings_one_deleted(kind, &path, 3);
        flip_a_byte_of_log_record(kind, &path, 3);
        let store = Store::open(&path).unwrap();
        let before = store.last_seq();
        let err = store
            .compact()
            .err()
            .expect("the damaged record fails the compaction");
        assert!(err.to_string().contains("event 3"), "{kind:?}: {err}");
        assert!(
            !path.join("compact.tmp").exists(),
            "{kind:?}: compact.tmp was left after: {err}"
        );
        let store = Store::open(&path).unwrap();
        assert_eq!(store.last_seq(), before, "{kind:?}");
    }
}

/// helper-102 (session 46): `loci init` killed while redb made its file left a file without
/// redb's magic number (which redb writes last, once the rest is on disk) and no manifest;
/// `init` again was refused ("Not a redb database"), and every other command said to restore
/// a manifest from a backup of a store that never was. Such a file holds nothing: a creation
/// takes it over. A file past the size of a new one is never taken: it may be a store's.
#[test]
fn a_creation_cut_short_before_redb_wrote_its_magic_number_is_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made");
    drop(Store::create(&made, BackendKind::Redb).unwrap());
    let new_size = std::fs::metadata(made.join("data.redb")).unwrap().len();
    let cut = |size: u64| {
        let store = dir.path().join(format!("cut-{size}"));
        std::fs::create_dir(&store).unwrap();
        std::fs::write(store.join("lock"), b"").unwrap();
        let mut bytes = vec![0u8; size as usize];
        // Some of the header written, the magic number not.
        bytes[8..16].copy_from_slice(&[0, 4, 0, 0, 0, 16, 0, 0]);
        std::fs::write(store.join("data.redb"), bytes).unwrap();
        store
    };
    let store = cut(1_056_768);
    // Opened, it is told to be made again, not restored from a backup.
    let e = Store::open(&store).err().unwrap().to_string();
    assert!(
        e.contains("never finished") && e.contains("loci init"),
        "{e}"
    );
    let s = Store::create(&store, BackendKind::Redb).unwrap();
    assert_eq!(s.stats().events, 0);
    drop(s);
    assert!(Store::open(&store).is_ok());
    // A sled store made there takes it over too (helper-103: refused, "restore loci.json").
    let store = cut(1_056_769);
    drop(Store::create(&store, BackendKind::Sled).unwrap());
    assert!(!store.join("data.redb").exists());
    // Larger than a new file: not taken over, and refused as before.
    let store = cut(new_size.max(1_056_768) * 4);
    let e = Store::create(&store, BackendKind::Redb).err().unwrap();
    assert!(e.to_string().contains("magic number"), "{e}");
    // Beside a store's other files (its manifest lost, its log damaged at the start): a store,
    // never taken over.
    let store = cut(1_000_000);
    std::fs::create_dir(store.join("text")).unwrap();
    assert!(Store::create(&store, BackendKind::Redb).is_err());
    assert!(store.join("data.redb").exists());
    // First bytes not zero: not a file redb left unfinished.
    let store = cut(1_000_001);
    let mut bytes = std::fs::read(store.join("data.redb")).unwrap();
    bytes[0] = b'x';
    std::fs::write(store.join("data.redb"), bytes).unwrap();
    assert!(Store::create(&store, BackendKind::Redb).is_err());
    assert!(store.join("data.redb").exists());
}

/// helper-102 (session 46): a log record whose checksum failed, of an event no deletion took,
/// was copied into the compacted files as it was; the compaction then removed the state
/// snapshot and swapped the files in, and the reopen, replaying the log, failed on the
/// record: the compaction failed (exit 6), and every read of the store failed after it, where
/// before it every read had been answered from the snapshot. The compaction checks each record
/// it copies and fails before anything of the store is changed.
#[test]
fn a_compaction_over_a_damaged_log_record_fails_before_it_changes_the_store() {
    for kind in BackendKind::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s");
        // A deletion leaves text to strip, so both backends rewrite the log.
        five_sightings_one_deleted(kind, &path, 4);
        flip_a_byte_of_log_record(kind, &path, 2);
        let store = Store::open(&path).unwrap();
        // Every read but the log's, which meets the damaged record.
        let seen = |store: &Store| {
            let s = store.stats();
            let places = loci::query::run(
                store,
                "MATCH (p:Place) RETURN p.key AS k ORDER BY k",
                &HashMap::new(),
            )
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"))
            .rows
            .len();
            (s.events, s.nodes, s.edges, s.text_docs, places)
        };
        let before = seen(&store);
        let err = store
            .compact()
            .err()
            .expect("the damaged record fails the compaction");
        let file = kind.path_in(&path).display().to_string();
        assert!(
            err.to_string().contains("event 2") && err.to_string().contains(&file),
            "{kind:?}: {err}"
        );
        assert!(typed(&err), "{kind:?}: {err:?}");
        assert!(!path.join("compact.tmp").exists(), "{kind:?}");
        // The store reads as it did: its snapshot is still there.
        let store = Store::open(&path).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(seen(&store), before, "{kind:?}");
    }
}

/// sled's own snapshot (`sled/snap.*`: its page table as of a point of its log) damaged:
/// every open failed saying only "read corrupted data", and `loci repair` failed the same
/// way, though sled reads its log whole without it (helper-148). The open says what to do,
/// and `repair`, finding the snapshot's own checksum fails, reads the log whole from a copy
/// of sled's files without it: the store reads as it did.
#[test]
fn a_damaged_sled_snapshot_is_set_aside_by_repair() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let expected = small_store(BackendKind::Sled, &dir);
    let snapshots: Vec<PathBuf> = std::fs::read_dir(dir.join("sled"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("snap."))
        .map(|e| e.path())
        .collect();
    assert!(!snapshots.is_empty(), "sled wrote no snapshot");
    for s in &snapshots {
        let mut bytes = std::fs::read(s).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0xff;
        std::fs::write(s, bytes).unwrap();
    }
    let e = Store::open(&dir)
        .err()
        .expect("the damaged snapshot is found");
    assert!(e.to_string().contains("loci repair"), "{e}");
    let (store, report) = Store::repair_at(&dir).unwrap();
    assert_eq!(report.read_without, ["snap.*"], "{report:?}");
    assert_same(&reads(&store).unwrap(), &expected, "after the repair");
    assert!(
        !dir.join("sled-copy-for-repair").exists(),
        "the copy sled read its log from is removed"
    );
    assert!(store.verify().unwrap().ok());
    drop(store);
    let store = Store::open(&dir).unwrap();
    assert_same(&reads(&store).unwrap(), &expected, "opened again");
}

/// sled's `conf` (its fixed settings, which loci never changes from sled's defaults) damaged:
/// every open failed, and `loci repair` failed the same way (helper-148), though sled opens
/// without it and writes it anew. The open says what to do, and `repair`, finding the conf's
/// own checksum fails, reads the store from a copy of sled's files without it; the conf is
/// then sled's own again. Both ways it can be damaged: a byte of a key (sled's "corrupted
/// data") and bytes that are not UTF-8 (sled's "a version earlier than 0.29").
#[test]
fn a_damaged_sled_conf_is_written_again_by_repair() {
    let damages: [(usize, &[u8]); 2] = [(5, b"X"), (16, b"\xff\xfe")];
    for (at, bytes) in damages {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let expected = small_store(BackendKind::Sled, &dir);
        let conf = dir.join("sled").join("conf");
        let good = std::fs::read(&conf).unwrap();
        let mut damaged = good.clone();
        damaged[at..at + bytes.len()].copy_from_slice(bytes);
        std::fs::write(&conf, &damaged).unwrap();
        let e = Store::open(&dir).err().expect("the damaged conf is found");
        assert!(e.reports_damage(), "{e:?}");
        assert!(e.to_string().contains("loci repair"), "{e}");
        let (store, report) = Store::repair_at(&dir).unwrap();
        assert_eq!(report.read_without, ["conf"], "{report:?}");
        assert_same(&reads(&store).unwrap(), &expected, "after the repair");
        assert!(store.verify().unwrap().ok());
        drop(store);
        assert_eq!(std::fs::read(&conf).unwrap(), good, "sled's own conf");
        assert!(!dir.join("sled-copy-for-repair").exists());
        let store = Store::open(&dir).unwrap();
        assert_same(&reads(&store).unwrap(), &expected, "opened again");
    }
}

/// CRC-32 (IEEE), as sled ends its `conf` with it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// sled's `conf` under a right checksum but with other settings (helper-151): every command
/// exited 8 with sled's "please change it back to 1048576", which a loci user cannot act on,
/// and repair failed the same way. It is damage (a loci store is never made with other
/// settings), said with what mends it, and repair reads the store without it.
#[test]
fn a_sled_conf_of_other_settings_is_written_again_by_repair() {
    for body in [
        &b"segment_size: 1048576\nuse_compression: false\nversion: 0.34\n"[..],
        b"segment_size: 524288\nuse_compression: true\nversion: 0.34\n",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let expected = small_store(BackendKind::Sled, &dir);
        let conf = dir.join("sled").join("conf");
        let good = std::fs::read(&conf).unwrap();
        let mut other = body.to_vec();
        other.extend_from_slice(&crc32(body).to_le_bytes());
        std::fs::write(&conf, &other).unwrap();
        let e = Store::open(&dir).err().expect("refused");
        assert!(e.reports_damage(), "{e:?}");
        assert!(e.to_string().contains("loci repair"), "{e}");
        let (store, report) = Store::repair_at(&dir).unwrap();
        assert_eq!(report.read_without, ["conf"], "{report:?}");
        assert_same(&reads(&store).unwrap(), &expected, "after the repair");
        drop(store);
        assert_eq!(std::fs::read(&conf).unwrap(), good);
    }
}

/// A FIFO where sled keeps a file of its own (helper-151): every command hung on one as
/// `conf`, and repair hung on one as a snapshot file, holding the writer lock. The open
/// refuses it at once, naming it, and repair reads the store without it (sled can do without
/// its conf and its snapshot); a copy a repair killed part way left is removed by the next
/// open for writing.
#[cfg(unix)]
#[test]
fn a_fifo_among_sleds_files_is_refused_not_waited_on() {
    for which in ["conf", "snap."] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let expected = small_store(BackendKind::Sled, &dir);
        let sled = dir.join("sled");
        let name = (std::fs::read_dir(&sled).unwrap().flatten())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with(which))
            .expect("sled wrote it");
        let name = name.as_str();
        std::fs::remove_file(sled.join(name)).unwrap();
        let made = Command::new("mkfifo").arg(sled.join(name)).status();
        assert!(made.is_ok_and(|s| s.success()));
        let (tx, rx) = std::sync::mpsc::channel();
        let opened = dir.clone();
        std::thread::spawn(move || {
            let refused = Store::open(&opened).err().map(|e| e.to_string());
            let repaired = Store::repair_at(&opened).map(|(_, r)| r.read_without);
            let _ = tx.send((refused, repaired));
        });
        let (refused, repaired) = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("{name}: the open or the repair waited on the FIFO"));
        let refused = refused.expect("refused");
        assert!(
            refused.contains("not a regular file") && refused.contains(name),
            "{refused}"
        );
        let left_out = if name == "conf" { "conf" } else { "snap.*" };
        assert_eq!(repaired.unwrap(), [left_out], "{name}");
        let store = Store::open(&dir).unwrap();
        assert_same(&reads(&store).unwrap(), &expected, name);
    }
    // A link to a file elsewhere is the file sled reads: not refused (helper-152).
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let expected = small_store(BackendKind::Sled, &dir);
    let conf = dir.join("sled").join("conf");
    let elsewhere = tmp.path().join("conf-elsewhere");
    std::fs::rename(&conf, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &conf).unwrap();
    let store = Store::open(&dir).unwrap();
    assert_same(&reads(&store).unwrap(), &expected, "a linked conf");
    drop(store);
    // What a repair killed part way left of its copy goes at the next open for writing.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    small_store(BackendKind::Sled, &dir);
    let stray = dir.join("sled-copy-for-repair").join("sled");
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("db"), b"a copy of the log").unwrap();
    drop(Store::open(&dir).unwrap());
    assert!(!dir.join("sled-copy-for-repair").exists());
}

/// A sled store that lost its manifest and whose conf is damaged as well (helper-151): the
/// refusal said `loci repair` writes the manifest again, and repair failed on the conf,
/// every time. Repair reads the meta table from the copy it reads the log from.
#[test]
fn a_missing_manifest_beside_a_damaged_sled_conf_is_repaired_both() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let expected = small_store(BackendKind::Sled, &dir);
    let manifest = std::fs::read(dir.join("loci.json")).unwrap();
    std::fs::remove_file(dir.join("loci.json")).unwrap();
    let conf = dir.join("sled").join("conf");
    let mut damaged = std::fs::read(&conf).unwrap();
    damaged[5] = b'X';
    std::fs::write(&conf, damaged).unwrap();
    let (store, report) = Store::repair_at(&dir).unwrap();
    assert!(report.manifest_written);
    assert_eq!(report.read_without, ["conf"]);
    assert_same(&reads(&store).unwrap(), &expected, "after the repair");
    drop(store);
    assert_eq!(std::fs::read(dir.join("loci.json")).unwrap(), manifest);
}

/// A text file damaged under an open store (a server's, which runs for months): every later
/// update failed and every search met the damage, and nothing mended it before a restart
/// (helper-148). The next commit now rebuilds the index from the log, and searches are
/// answered again, the new batch's events among them.
#[test]
fn a_text_file_damaged_under_an_open_store_is_rebuilt_by_its_next_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    small_store(BackendKind::Redb, &dir);
    let store = Store::open(&dir).unwrap();
    let mut files = Vec::new();
    backend_files(&dir.join("text"), &mut files);
    for target in files.iter().filter(|p| {
        p.extension()
            .is_some_and(|e| e == "store" || e == "idx" || e == "term")
    }) {
        let mut bytes = std::fs::read(target).unwrap();
        for at in (0..bytes.len()).step_by(97) {
            bytes[at] ^= 0x55;
        }
        std::fs::write(target, bytes).unwrap();
    }
    // Met by a search (refused), or by the commit's update (refused for damage): either way
    // the commit rebuilds the index.
    assert!(store
        .search("emerald", &SearchFilter::default(), 5)
        .is_err());
    let mut e = loci::EventDraft::new(10_000_000, "bot", "NOTE");
    e.payload = loci::model::Value::from("zanzibar quokka");
    let c = store.ingest(vec![e]).unwrap();
    let hits = store
        .search("zanzibar", &SearchFilter::default(), 5)
        .unwrap();
    assert!(
        hits.iter()
            .any(|h| h.target == loci::text::Target::Event(c.first_seq)),
        "{hits:?}"
    );
    assert!(!store
        .search("emerald", &SearchFilter::default(), 5)
        .unwrap()
        .is_empty());
    assert!(store.verify().unwrap().ok());
}
