//! A full-text index damaged in place: a byte of a segment file changed while the file keeps
//! its length and modification time (a disk's bit rot, a stray write that restores the time).
//! An open checks a file's checksum only the first time it meets the file as it is (a full
//! check read the whole index at every open), so such damage is first met by a search, where
//! tantivy panics on it (index out of bounds, failed asserts in its decoders). loci runs inside
//! its caller's process: a search must fail with a typed error instead, the next open must
//! check every file and rebuild the index from the log, and `verify` must find the damage even
//! where the damaged bytes still decode (as wrong hits).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;

use loci::bench::import_events;
use loci::model::{Assertion, NodeUpsert};
use loci::text::TextIndex;
use loci::world::Rng;
use loci::{BackendKind, Error, SearchFilter, Store};

const BIN: &str = env!("CARGO_BIN_EXE_loci");

/// The fixture's vocabulary: small enough that every posting list is searched after each
/// flip, and with 4,500 names of three words the common words' lists span tantivy's blocks of
/// 128 documents and their skip data, as a real index's do, and the files span several of
/// the blocks loci checks (a block an open reads, as the one with a file's footer, is checked
/// by the open).
const WORDS: [&str; 30] = [
    "alder", "birch", "cedar", "dogwood", "elm", "fir", "ginkgo", "hazel", "ironwood", "juniper",
    "katsura", "larch", "maple", "nutmeg", "oak", "pine", "quince", "rowan", "spruce", "teak",
    "umbrella", "viburnum", "willow", "xylosma", "yew", "zelkova", "aspen", "beech", "chestnut",
    "date",
];

/// A store of 4,500 nodes whose names are three words of [`WORDS`], the first ones most often:
/// enough that each kind of segment file spans two of the blocks loci checks (the field norms,
/// a byte a document, the fewest), so damage can lie outside the block an open reads.
fn build(dir: &Path) {
    let store = Store::create(dir, BackendKind::Redb).unwrap();
    let mut rng = Rng::new(12);
    let nodes: Vec<Assertion> = (0..4500)
        .map(|i| {
            let name: Vec<&str> = (0..3)
                .map(|_| WORDS[(rng.below(30) * rng.below(30) / 30) as usize])
                .collect();
            Assertion::UpsertNode(NodeUpsert {
                key: format!("n{i}"),
                label: Some("Entity".into()),
                name: Some(name.join(" ")),
                ..Default::default()
            })
        })
        .collect();
    store.ingest(import_events(nodes, 1024)).unwrap();
    drop(store);
    // The second open finds the segment files and records them as checked: from here on an
    // open passes over them while their length and time stay as they are.
    drop(Store::open(dir).unwrap());
    assert!(dir.join("text").join("loci-checked").exists());
}

/// A fresh [`build`] in a temporary directory (kept while the first value lives).
fn built() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    build(&dir);
    (tmp, dir)
}

/// Every word's hits in order, as comparable text (targets, not scores: a document added
/// shifts every BM25 score a little).
fn search_all(search: impl Fn(&str) -> loci::Result<Vec<loci::Hit>>) -> loci::Result<String> {
    let mut out = String::new();
    for w in WORDS {
        for h in search(w)? {
            out.push_str(&format!("{w} {:?}\n", h.target));
        }
    }
    Ok(out)
}

fn store_hits(store: &Store) -> loci::Result<String> {
    search_all(|w| store.search(w, &SearchFilter::default(), 20))
}

/// The index's segment files that searches read, largest first.
fn segment_files(text: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(text)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| extensions.contains(&e))
        })
        .collect();
    files.sort_by_key(|p| {
        (
            std::cmp::Reverse(std::fs::metadata(p).unwrap().len()),
            p.clone(),
        )
    });
    files
}

/// A file's bytes changed in place, its length and modification time kept.
struct Flip {
    path: PathBuf,
    original: Vec<u8>,
    modified: std::time::SystemTime,
}

impl Flip {
    fn new(path: &Path, at: usize, mask: u8) -> Flip {
        let original = std::fs::read(path).unwrap();
        let modified = std::fs::metadata(path).unwrap().modified().unwrap();
        let mut bytes = original.clone();
        bytes[at] ^= mask;
        let flip = Flip {
            path: path.to_path_buf(),
            original,
            modified,
        };
        flip.write(&bytes);
        flip
    }

    fn write(&self, bytes: &[u8]) {
        std::fs::write(&self.path, bytes).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&self.path)
            .unwrap()
            .set_modified(self.modified)
            .unwrap();
    }

    fn undo(self) {
        self.write(&self.original);
    }
}

/// The error a search gives on damage: the full-text index's, saying the index is damaged,
/// with a source that says so to a program (the command line's exit 6).
fn is_damage(e: &Error) -> bool {
    matches!(e, Error::Text { source: Some(s), .. }
        if matches!(s.downcast_ref::<tantivy::TantivyError>(), Some(tantivy::TantivyError::DataCorruption(_))))
        && e.to_string().contains("damaged")
}

/// Bytes all through the files a search reads (postings, terms, fast fields, field norms),
/// each changed in place: opening the index and searching every word returns hits or an
/// error, never a panic; an error says the index is damaged; and a handle that met damage
/// refuses every later search, since what tantivy holds after a panic is unknown.
#[test]
fn a_text_file_damaged_in_place_fails_searches_and_never_panics() {
    let (_tmp, dir) = built();
    let text = dir.join("text");
    let flips_per_file: usize = std::env::var("LOCI_TEXT_FLIPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let (mut trials, mut failed) = (0, 0);
    for file in segment_files(&text, &["idx", "term", "fast", "fieldnorm"]) {
        let len = std::fs::metadata(&file).unwrap().len() as usize;
        for k in 0..flips_per_file {
            // Spread over the whole file, odd steps so they meet every kind of byte.
            let at = (k * len / flips_per_file + k % 7) % len;
            let flip = Flip::new(&file, at, 0xA5);
            let what = format!("{} byte {at}", file.display());
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let Ok((index, _)) = TextIndex::open_read_only(&text) else {
                    return None;
                };
                let search = |w: &str| index.search(w, &SearchFilter::default(), 20);
                match search_all(search) {
                    Ok(_) => Some(Ok(())),
                    Err(e) => Some(Err((e, search(WORDS[0]).is_err()))),
                }
            }));
            flip.undo();
            trials += 1;
            match outcome {
                Err(_) => panic!("{what}: a search panicked"),
                Ok(Some(Err((e, refused_after)))) => {
                    failed += 1;
                    assert!(is_damage(&e), "{what}: {e}");
                    assert!(
                        refused_after,
                        "{what}: a search after the damage was served"
                    );
                }
                Ok(_) => {}
            }
        }
    }
    // Without searches that met damage this test would prove nothing.
    assert!(
        failed * 10 >= trials,
        "{failed} of {trials} flips failed a search"
    );
}

/// Changes `WORDS`' postings in place until a search of the opened store fails, and returns
/// the change (to undo) and the word whose search failed.
fn damage_until_a_search_fails(dir: &Path) -> (Flip, &'static str) {
    // A store whose search met damage has its next open check every file; the list of checked
    // files is put back as it was, so that the next open passes over the damaged file again.
    let checked = dir.join("text").join("loci-checked");
    let listed = std::fs::read(&checked).unwrap();
    let idx = segment_files(&dir.join("text"), &["idx"]).remove(0);
    let len = std::fs::metadata(&idx).unwrap().len() as usize;
    // Coarse strides first: most of the file's bytes (its posting blocks) still decode when
    // changed, and a scan of every 13th byte from the start opened the store 1,261 times
    // before it met one that fails (30 s of a debug build's tests); this order, 20 times.
    let strides = [13 * 64, 13 * 8, 13];
    let offsets = strides.iter().enumerate().flat_map(|(i, &stride)| {
        (0..len)
            .step_by(stride)
            .filter(move |at| i == 0 || at % strides[i - 1] != 0)
    });
    for at in offsets {
        let flip = Flip::new(&idx, at, 0xA5);
        let store = Store::open(dir).unwrap();
        let failed = WORDS
            .into_iter()
            .find(|w| store.search(w, &SearchFilter::default(), 20).is_err());
        drop(store);
        std::fs::write(&checked, &listed).unwrap();
        match failed {
            Some(word) => return (flip, word),
            None => flip.undo(),
        }
    }
    panic!("no change to {} failed a search", idx.display());
}

/// A store whose search meets damage says so and refuses later searches; its next commit
/// rebuilds the index from the log, and searches are answered again with the same hits (a
/// server had refused them until a restart: helper-148).
#[test]
fn a_search_that_meets_damage_fails_and_the_next_commit_rebuilds_the_index() {
    let (_tmp, dir) = built();
    let expected = store_hits(&Store::open(&dir).unwrap()).unwrap();
    let (_damage, word) = damage_until_a_search_fails(&dir);
    let store = Store::open(&dir).unwrap();
    assert!(!store.stats().text_rebuilt, "the open passed over the file");
    let e = store
        .search(word, &SearchFilter::default(), 20)
        .unwrap_err();
    assert!(is_damage(&e), "{e}");
    let again = store.search(WORDS[1], &SearchFilter::default(), 20);
    assert!(again.as_ref().is_err_and(is_damage), "{again:?}");
    // The log, the source of truth, still takes writes: an event's salience counts its
    // words as seen where the index cannot count them.
    let mut event = loci::EventDraft::new(0, "bot", "OBSERVATION");
    event.payload = loci::Value::from("xenolith sighted near the quarry");
    store.ingest(vec![event]).unwrap();
    assert_eq!(store_hits(&store).unwrap(), expected);
    assert!(store.verify().unwrap().ok());
    drop(store);
    let store = Store::open(&dir).unwrap();
    assert!(!store.stats().text_rebuilt, "the commit rebuilt it");
    assert_eq!(store_hits(&store).unwrap(), expected);
}

/// Damage that still decodes is served as wrong hits, and nothing short of reading every byte
/// finds it: `verify` checks every file of the index against its checksum, reports the damaged
/// one, and has the next open rebuild the index.
#[test]
fn verify_finds_a_text_file_damaged_in_place() {
    let (_tmp, dir) = built();
    let expected = store_hits(&Store::open(&dir).unwrap()).unwrap();
    for ext in ["idx", "term", "store", "fast", "fieldnorm"] {
        let file = segment_files(&dir.join("text"), &[ext]).remove(0);
        let len = std::fs::metadata(&file).unwrap().len() as usize;
        let _kept = Flip::new(&file, len / 3, 0x01);
        let store = Store::open(&dir).unwrap();
        assert!(!store.stats().text_rebuilt, "the open passed over {ext}");
        let report = store.verify().unwrap();
        assert!(!report.ok(), "{ext}: verify found nothing");
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            report
                .differences
                .iter()
                .any(|d| d.contains(&name) && d.contains("checksum")),
            "{ext}: {:#?}",
            report.differences
        );
        drop(store);
        let store = Store::open(&dir).unwrap();
        assert!(store.stats().text_rebuilt, "{ext}");
        assert_eq!(store_hits(&store).unwrap(), expected, "{ext}");
        assert!(store.verify().unwrap().ok(), "{ext}");
        drop(store);
        // Records the rebuilt index's files as checked, for the next file's damage.
        assert!(!Store::open(&dir).unwrap().stats().text_rebuilt, "{ext}");
    }
}

/// The command line: a search that meets damage exits 6 (the store is damaged) with one error
/// line, and prints no panic message or backtrace, though tantivy panicked under it.
#[test]
fn a_search_on_a_damaged_text_index_exits_6_and_prints_no_panic() {
    let (_tmp, dir) = built();
    let (_damage, word) = damage_until_a_search_fails(&dir);
    let out = Command::new(BIN)
        .args(["search", "--store"])
        .arg(&dir)
        .arg(word)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("damaged"), "{stderr}");
    assert!(
        !stderr.contains("panicked at") && !stderr.contains("backtrace"),
        "{stderr}"
    );
}

/// The hits of an open of the store at `dir` with a FIFO put in place of `file`, in a thread
/// of its own: a minute without an answer is an open that waits on the FIFO for a writer.
fn hits_with_a_fifo_at(dir: &Path, file: &Path) -> loci::Result<String> {
    std::fs::remove_file(file).unwrap();
    let made = Command::new("mkfifo").arg(file).status().unwrap();
    assert!(made.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let opened = dir.to_path_buf();
    std::thread::spawn(move || {
        let hits = Store::open(&opened).map(|s| store_hits(&s).unwrap());
        let _ = tx.send(hits);
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the open waited on a FIFO at {}", file.display()))
}

/// The list of checked files replaced by a FIFO (or anything not a regular file): an open
/// reads it as empty and checks every file, where reading it waited for a writer forever.
#[test]
fn a_fifo_in_place_of_the_checked_list_does_not_hang_the_open() {
    let (_tmp, dir) = built();
    let expected = store_hits(&Store::open(&dir).unwrap()).unwrap();
    let list = dir.join("text").join("loci-checked");
    assert_eq!(hits_with_a_fifo_at(&dir, &list).unwrap(), expected);
}

/// A `meta.json` that no longer reads as JSON is damage: the open rebuilds the index and says
/// so (`text_rebuilt`, and a warning), where it had taken it for an index of another layout
/// and rebuilt it unseen, at the INFO level (helper-111 probe). A read-only open refuses it.
#[test]
fn a_damaged_meta_json_is_rebuilt_as_damage_and_said() {
    let (_tmp, dir) = built();
    let expected = store_hits(&Store::open(&dir).unwrap()).unwrap();
    let meta = dir.join("text").join("meta.json");
    let mut bytes = std::fs::read(&meta).unwrap();
    bytes[0] = b'#';
    std::fs::write(&meta, &bytes).unwrap();
    let e = Store::open_read_only(&dir)
        .err()
        .expect("a reader refuses it");
    assert!(e.to_string().contains("damaged"), "{e}");
    let store = Store::open(&dir).unwrap();
    assert!(store.text_rebuilt());
    assert_eq!(store_hits(&store).unwrap(), expected);
}

/// A FIFO in place of one of tantivy's files (its `meta.json`, its list of managed files, a
/// segment file): the open returns and the index is rebuilt as for other damage, where each
/// had made every command wait for a writer forever (helper-111 probe).
#[test]
fn a_fifo_in_place_of_an_index_file_does_not_hang_the_open() {
    for name in ["meta.json", ".managed.json", "a segment"] {
        let (_tmp, dir) = built();
        let expected = store_hits(&Store::open(&dir).unwrap()).unwrap();
        let text = dir.join("text");
        let file = match name {
            "a segment" => segment_files(&text, &["idx"]).remove(0),
            _ => text.join(name),
        };
        assert_eq!(
            hits_with_a_fifo_at(&dir, &file).unwrap(),
            expected,
            "{name}"
        );
    }
}

/// A segment the process itself wrote (its commits; in a long-running writer, its merges too)
/// is checked block by block like one an open listed: its block checksums are taken as
/// tantivy writes it, so damage made in place afterwards fails the read at the block check,
/// before tantivy decodes it (where it could loop forever).
#[test]
fn a_segment_this_process_wrote_is_checked_at_its_first_read() {
    use std::os::unix::fs::FileExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    build(&dir);
    // The open passes over the listed files; the ingest below writes new segments.
    let store = Store::open(&dir).unwrap();
    let nodes: Vec<Assertion> = (0..3000)
        .map(|i| {
            Assertion::UpsertNode(NodeUpsert {
                key: format!("m{i}"),
                name: Some(format!("{} {}", WORDS[i % 30], WORDS[(i / 30) % 30])),
                ..Default::default()
            })
        })
        .collect();
    store.ingest(import_events(nodes, 1024)).unwrap();
    let listed = std::fs::read(dir.join("text").join("loci-checked")).unwrap();
    let written: Vec<PathBuf> = segment_files(&dir.join("text"), &["idx"])
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            !listed.windows(name.len()).any(|w| w == name.as_bytes())
        })
        .collect();
    assert!(!written.is_empty(), "the ingest wrote a segment");
    // Changed in place, not rewritten: a file truncated under a live map faults its reader.
    // Every new one: a merge may have written one beside the commit's.
    for path in &written {
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        // A byte of every 4 KiB but the last, whose footer the segment's open read (and
        // checked): searches read blocks no read has checked yet.
        let len = file.metadata().unwrap().len();
        for at in (100..len.saturating_sub(4096)).step_by(4096) {
            let mut byte = [0u8];
            file.read_exact_at(&mut byte, at).unwrap();
            file.write_all_at(&[byte[0] ^ 0xA5], at).unwrap();
        }
    }
    let failed: Vec<Error> = WORDS
        .iter()
        .filter_map(|w| store.search(w, &SearchFilter::default(), 20).err())
        .collect();
    let e = failed.first().expect("a search read the changed block");
    assert!(is_damage(e), "{e}");
    let said = format!("{e}: {:?}", std::error::Error::source(e));
    assert!(said.contains("does not match its checksum"), "{said}");
}

/// Damage an open meets (a file whose check fails) is repaired at that open; a
/// `replay --verify` that opened the store says so, beside its OK, since the live state it
/// compares is the repaired one.
#[test]
fn verify_says_when_its_open_rebuilt_the_index() {
    let (_tmp, dir) = built();
    let idx = segment_files(&dir.join("text"), &["idx"]).remove(0);
    let mut bytes = std::fs::read(&idx).unwrap();
    bytes[10] ^= 0xA5;
    std::fs::write(&idx, bytes).unwrap();
    let out = Command::new(BIN)
        .args(["replay", "--verify", "--store"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("rebuilt"), "{stdout}");
    let json = Command::new(BIN)
        .args(["replay", "--verify", "--json", "--store"])
        .arg(&dir)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        report["text_rebuilt_at_open"], false,
        "the rebuilt index is sound"
    );
}

/// A writer that closes leaves the index files it wrote recorded as checked, so the first open
/// after a bulk load reads none of them whole: at 100M edges that open checked the load's 654
/// MB and took 2.5 s of a 1 s goal (session 25).
#[test]
fn a_closing_writer_leaves_the_files_it_wrote_recorded_as_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let store = Store::create(&dir, BackendKind::Redb).unwrap();
    let nodes: Vec<Assertion> = (0..3000)
        .map(|i| {
            Assertion::UpsertNode(NodeUpsert {
                key: format!("n{i}"),
                label: Some("Entity".into()),
                name: Some(format!(
                    "{} {}",
                    WORDS[i % WORDS.len()],
                    WORDS[i * 7 % WORDS.len()]
                )),
                ..Default::default()
            })
        })
        .collect();
    store.ingest(import_events(nodes, 512)).unwrap();
    drop(store);
    let list = std::fs::read(dir.join("text").join("loci-checked")).unwrap_or_default();
    let list = String::from_utf8_lossy(&list);
    let files = segment_files(&dir.join("text"), &["idx", "store", "term", "fast"]);
    assert!(!files.is_empty());
    for f in files {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(list.contains(name), "{name} is not recorded as checked");
    }
}
