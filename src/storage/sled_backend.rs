//! The sled backend: all tables share one sled tree, each key prefixed by its table's byte, so
//! that a whole multi-table batch is one `apply_batch` (atomic in sled) followed by a `flush`
//! (durable once it returns).
//!
//! A commit whose flush fails is not undone in sled: the batch stays in its memory, and sled
//! writes it when the database is dropped if the disk has room again. So the failure is
//! recorded beside sled's files ([`FailedCommit`]), and the next writable open of the store
//! takes the batch back (`Store::take_back_failed_commits`): a failed batch writes nothing,
//! where the record could be made (a crash between the failed flush and the record, or a
//! disk without room for an empty file, leaves it unrecorded, as before).

use std::path::{Path, PathBuf};

use super::{Backend, BackendKind, Op, ScanVisitor, Table, WriteBatch};
use crate::error::{Error, Result};

fn err(e: sled::Error) -> Error {
    match e {
        // Its text ends in " backtrace ()", sled's backtrace, empty unless sled was built to
        // take one: said without it, as damage.
        sled::Error::Corruption { at, .. } => {
            let message = match at {
                Some(at) => format!("read corrupted data at file offset {at:?}"),
                None => "read corrupted data".to_string(),
            };
            Error::Backend {
                backend: "sled",
                source: Some(Box::new(crate::storage::DamagedFile(message.clone()))),
                message,
            }
        }
        sled::Error::Io(e) => Error::backend_source("sled", in_the_systems_words(e)),
        e => Error::backend_source("sled", e),
    }
}

/// sled keeps a failed write's error as the text of its debug form (`Os { code: 27, kind:
/// FileTooLarge, message: "File too large" }`), which reached the user (helper-142,
/// helper-144): the system's own words for its code instead, where the code can be told.
fn in_the_systems_words(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error().is_some() {
        return e;
    }
    let text = e.to_string();
    let code = text
        .split_once("code: ")
        .map(|(_, rest)| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|digits| digits.parse::<i32>().ok());
    match code {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => e,
    }
}

fn prefix(table: Table) -> u8 {
    match table {
        Table::Meta => b'm',
        Table::Log => b'l',
        Table::Nodes => b'n',
        Table::Edges => b'e',
        Table::EventTime => b't',
        Table::Idempotency => b'i',
        Table::EventFacet => b'f',
    }
}

fn full_key(table: Table, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(prefix(table));
    k.extend_from_slice(key);
    k
}

/// What begins the name of the file that records a failed commit; the name goes on with
/// [`FailedCommit`]'s numbers, `{durable}-{failed_last}-{last_record}` (the last in hex, 8
/// digits). A name, not content: on a full disk an empty file is likelier to be made than one
/// written to.
const FAILED_COMMIT: &str = "loci-failed-commit-v1-";

/// A commit that failed to reach disk, as the file made in the sled directory when it failed
/// says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FailedCommit {
    /// The log's last event before the failed batch (0 for an empty log).
    pub durable: u64,
    /// The last event the failed batch appended (`durable` when it appended none).
    pub failed_last: u64,
    /// The CRC-32 of the failed batch's last log entry (0 when it appended none): the same
    /// events sent again after a take-back get the same numbers, never the same record (each
    /// holds the time it was appended).
    pub last_record: u32,
}

impl FailedCommit {
    /// Whether the log, whose last entry is `end` (key and value), ends with this failed
    /// batch: sled wrote it after all.
    pub fn ends(&self, end: Option<(&[u8], &[u8])>) -> bool {
        let Some((key, value)) = end else {
            return false;
        };
        self.failed_last > self.durable
            && seq_of_log_key(key) == Some(self.failed_last)
            && crc32fast::hash(value) == self.last_record
    }

    pub(crate) fn file_name(self) -> String {
        format!(
            "{FAILED_COMMIT}{}-{}-{:08x}",
            self.durable, self.failed_last, self.last_record
        )
    }

    /// The record a file name says; only the names [`FailedCommit::file_name`] makes.
    pub(crate) fn from_file_name(name: &str) -> Option<FailedCommit> {
        let mut numbers = name.strip_prefix(FAILED_COMMIT)?.split('-');
        let failed = FailedCommit {
            durable: numbers.next()?.parse().ok()?,
            failed_last: numbers.next()?.parse().ok()?,
            last_record: u32::from_str_radix(numbers.next()?, 16).ok()?,
        };
        (failed.file_name() == name).then_some(failed)
    }

    /// The failed commits recorded in the sled directory `path` (files only), each with its
    /// file.
    pub fn recorded_in(path: &Path) -> Result<Vec<(FailedCommit, PathBuf)>> {
        let entries = match std::fs::read_dir(path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(path, e)),
        };
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(path, e))?;
            let name = entry.file_name();
            let Some(failed) = name.to_str().and_then(FailedCommit::from_file_name) else {
                continue;
            };
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                found.push((failed, entry.path()));
            }
        }
        found.sort();
        Ok(found)
    }

    /// Records the failure in the sled directory `path`, durably where the system allows.
    /// Best effort: a disk too full even for an empty file leaves the failure unrecorded, as
    /// it was before this record existed; the error says why, for the commit's error to say.
    fn record(self, path: &Path) -> std::io::Result<()> {
        let file = path.join(self.file_name());
        let made = std::fs::File::create(&file)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::File::open(path)?.sync_all());
        if let Err(e) = &made {
            tracing::error!(
                file = %file.display(),
                error = %e,
                "cannot record the failed commit: if sled writes it when the store is closed, \
                 the next open will not take it back"
            );
        }
        made
    }
}

/// The error of a failed commit, `failed`, which could not be recorded (`unrecorded`): said to
/// the caller too, where it had reached only the log (helper-142: a server's 500 did not say
/// it), since only the caller can then check the store's last events once it reopens it.
fn and_unrecorded(failed: Error, unrecorded: std::io::Error) -> Error {
    said_further(failed, |message| {
        format!(
            "{message}; and the failure could not be recorded beside sled's files \
             ({unrecorded}): if sled writes the batch when the store is closed, the next \
             open will not take it back, so check the store's last events when it is \
             opened again"
        )
    })
}

/// A backend error `e` with its message made anew by `more` from the old one, its source
/// kept; any other error as it is.
fn said_further(e: Error, more: impl FnOnce(&str) -> String) -> Error {
    match e {
        Error::Backend {
            backend,
            message,
            source,
        } => Error::Backend {
            backend,
            message: more(&message),
            source,
        },
        other => other,
    }
}

/// The sequence number a log key begins with (`store::log` says the keys' layout).
pub(crate) fn seq_of_log_key(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.get(..8)?.try_into().ok()?))
}

/// A store's sled database.
pub struct SledBackend {
    db: sled::Db,
    path: std::path::PathBuf,
    /// Set when a commit failed. sled applies a batch in memory before `flush` makes it
    /// durable, and cannot take it back: after a failed flush its reads would serve the failed
    /// batch (and a later flush would persist it). The handle refuses everything instead; a
    /// reopen reads what is on disk.
    failed: std::sync::atomic::AtomicBool,
}

/// Bytes that must be free on the file system before sled is opened: a margin for the segment
/// and header writes of recovery, plus twice the snapshot sled may rewrite.
fn required_free_bytes(path: &Path) -> u64 {
    let snapshots: u64 = (snapshot_files(path).iter())
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum();
    4 * 1024 * 1024 + 2 * snapshots
}

/// Free bytes (for an unprivileged user) on the file system holding `path` or, when it does
/// not exist yet, its nearest existing ancestor. `None` when it cannot be told.
#[cfg(unix)]
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let existing = path.ancestors().find(|p| p.exists())?;
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(not(unix))]
fn free_bytes(_: &Path) -> Option<u64> {
    None
}

impl SledBackend {
    /// Opens (creating when missing) the sled database in `path`.
    ///
    /// sled 0.34 writes while it opens (recovery rewrites the tail of its log and may write a
    /// new snapshot), and a write that fails for lack of space leaves the files unreadable
    /// ("Read corrupted data") for good. So this refuses to open with little free space, before
    /// sled touches anything: a full disk then costs a retry, not the store.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(odd) = not_a_regular_file(path) {
            return Err(Error::Corrupt {
                table: "sled",
                message: format!(
                    "{}: not a regular file, where sled keeps one of its own (it would wait on \
                     a FIFO for ever): move it away; `loci repair` then reads the store without \
                     it where it is sled's conf or snapshot, which sled can do without",
                    odd.display()
                ),
            });
        }
        if let Some(free) = free_bytes(path) {
            let needed = required_free_bytes(path);
            if free < needed {
                return Err(Error::Backend {
                    backend: "sled",
                    source: None,
                    // The guard around every backend prefixes the path.
                    message: format!(
                        "only {free} bytes free on its file system, {needed} needed: sled \
                         writes while opening and a write that fails for lack of space leaves \
                         its files unreadable, so the store is not opened; free some space and \
                         retry (nothing was written)"
                    ),
                });
            }
        }
        // Every commit flushes, so sled's periodic background flusher adds nothing; worse, its
        // thread keeps the database (and its file lock) alive after the handle is dropped, so
        // the same process could not reopen the store.
        let config = sled::Config::new().path(path).flush_every_ms(None);
        // sled frees a dropped database (and its file lock) through deferred, epoch-based
        // reclamation, so a reopen right after a drop in the same process can find the lock
        // still held. Retry for a short while before reporting a lock held by someone else.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        loop {
            match config.open() {
                Ok(db) => {
                    return Ok(SledBackend {
                        db,
                        path: path.to_path_buf(),
                        failed: Default::default(),
                    })
                }
                Err(e)
                    if e.to_string().contains("could not acquire lock")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                // sled takes a `conf` it cannot read for one of a version before 0.29, and
                // refuses one of other settings ("please change it back"); a loci store was
                // never made by such a build, nor with other settings, so it is damage.
                Err(sled::Error::Unsupported(why))
                    if why.contains("earlier than 0.29") || conf_is_not_locis(path) =>
                {
                    return Err(Error::Corrupt {
                        table: "sled/conf",
                        message: format!(
                            "{}: sled cannot read its conf file ({why}): the file is damaged; \
                             `loci repair` reads the store without it, and sled writes it anew",
                            path.display()
                        ),
                    })
                }
                // sled opens its files for writing whatever the handle is for, so a user who
                // may not write them cannot read the store either: say so, where sled's words
                // are only the OS's.
                Err(sled::Error::Io(e)) if crate::error::is_refusal(&e) => {
                    return Err(Error::Backend {
                        backend: "sled",
                        message: format!(
                            "cannot open its files for writing ({e}): sled opens them so even to \
                             read, so a sled store is readable only by a user who may write it \
                             (a redb store is read without writing)"
                        ),
                        source: Some(Box::new(e)),
                    });
                }
                // Said with what to do: sled can do without its own snapshot, not its log.
                Err(e @ sled::Error::Corruption { .. }) => {
                    return Err(said_further(err(e), |message| {
                        format!("{message}: {DAMAGED_AT_OPEN}")
                    }));
                }
                Err(e) => return Err(err(e)),
            }
        }
    }
}

/// What to do about damage sled finds while opening.
const DAMAGED_AT_OPEN: &str = "its files are damaged; where sled's own snapshot (its `snap.*` \
     files) fails its checksum, or its `conf` is not the one loci's settings make, `loci \
     repair` reads sled's log whole without them, from a copy (sled can do without both); \
     damage in the log itself (`db`) needs the store from a backup";

/// Whether the snapshot sled would read (the last of its `snap.*` files by name, as sled
/// picks it) fails its own checksum: sled ends each with the body's length (u64) and the
/// CRC32 of the body, both little-endian. A snapshot that passes is not what is damaged.
pub(crate) fn snapshot_checksum_fails(path: &Path) -> bool {
    // One that is no regular file is no snapshot sled can read (a FIFO had held the repair
    // for ever: helper-151).
    let odd = |p: &std::path::PathBuf| std::fs::metadata(p).is_ok_and(|m| !m.is_file());
    if snapshot_files(path).iter().any(odd) {
        return true;
    }
    let Some(last) = (snapshot_files(path).into_iter())
        .rfind(|p| !p.to_string_lossy().ends_with(".in___motion"))
    else {
        return false;
    };
    let mut bytes = Vec::new();
    if let Err(e) = super::open_regular_file(&last)
        .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut bytes))
    {
        return e.kind() == std::io::ErrorKind::InvalidData;
    }
    if bytes.len() <= 12 {
        return true;
    }
    let (body, footer) = bytes.split_at(bytes.len() - 12);
    let stored = u32::from_le_bytes([footer[8], footer[9], footer[10], footer[11]]);
    crc32fast::hash(body) != stored
}

/// What sled writes in its `conf` for loci's settings (sled's defaults, never changed), before
/// the CRC-32 that ends it.
const LOCI_CONF: &[u8] = b"segment_size: 524288\nuse_compression: false\nversion: 0.34\n";

/// Whether sled's `conf` in its directory `path` is not the one loci's settings make: it
/// fails its own checksum (sled ends it with the CRC-32 of what comes before, little-endian),
/// says other settings (sled refuses to open with them), or is no regular file (sled would
/// wait on a FIFO). sled takes a conf of 8 bytes or fewer for none, and writes one not there
/// anew, so neither is.
pub(crate) fn conf_is_not_locis(path: &Path) -> bool {
    let path = path.join("conf");
    if std::fs::symlink_metadata(&path).is_err() {
        return false;
    }
    let mut bytes = Vec::new();
    let read = super::open_regular_file(&path)
        .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut bytes));
    if read.is_err() {
        return true;
    }
    if bytes.len() <= 8 {
        return false;
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    crc32fast::hash(body) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]])
        || body != LOCI_CONF
}

/// The first of the files sled opens in its directory `path` (its `conf`, its log `db`, its
/// snapshot's `snap.*`) that is there but is no regular file: sled would wait on a FIFO for
/// ever (helper-151: every command hung on a `conf` that was one).
fn not_a_regular_file(path: &Path) -> Option<std::path::PathBuf> {
    let entries = std::fs::read_dir(path).ok()?;
    let mut odd: Vec<std::path::PathBuf> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name == "conf" || name == "db" || name.starts_with("snap.")
        })
        // Followed: a link to a file elsewhere is a file sled reads.
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| !m.is_file()))
        .map(|e| e.path())
        .collect();
    odd.sort();
    odd.into_iter().next()
}

/// The files of sled's own snapshot in its directory `path`: its page table as of a point of
/// its log, from which an open reads on. sled reads its log whole without them.
pub(crate) fn snapshot_files(path: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(path)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("snap."))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

impl SledBackend {
    fn serving(&self) -> Result<()> {
        if self.failed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Backend {
                backend: "sled",
                source: None,
                // The guard around every backend prefixes the path.
                message: "an earlier commit failed to reach disk and sled cannot undo it in \
                          memory, so this handle is closed; reopen the store to read what is \
                          durable"
                    .to_string(),
            });
        }
        Ok(())
    }
}

impl Backend for SledBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Sled
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.serving()?;
        Ok(self
            .db
            .get(full_key(table, key))
            .map_err(err)?
            .map(|v| v.to_vec()))
    }

    fn scan(
        &self,
        table: Table,
        start: &[u8],
        end: Option<&[u8]>,
        visit: &mut ScanVisitor<'_>,
    ) -> Result<()> {
        self.serving()?;
        let lo = full_key(table, start);
        let iter = match end {
            Some(end) => self.db.range(lo..full_key(table, end)),
            // The next table's prefix bounds this one.
            None => self.db.range(lo..vec![prefix(table) + 1]),
        };
        for entry in iter {
            let (k, v) = entry.map_err(err)?;
            if !visit(&k[1..], &v)? {
                break;
            }
        }
        Ok(())
    }

    fn last(&self, table: Table) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.serving()?;
        let mut iter = self.db.range(vec![prefix(table)]..vec![prefix(table) + 1]);
        match iter.next_back() {
            Some(entry) => {
                let (k, v) = entry.map_err(err)?;
                Ok(Some((k[1..].to_vec(), v.to_vec())))
            }
            None => Ok(None),
        }
    }

    fn usable(&self) -> Result<()> {
        self.serving()
    }

    fn commit(&self, batch: WriteBatch) -> Result<()> {
        self.serving()?;
        // Every earlier commit reached disk (a failed one closes the handle): the log's end
        // now is durable.
        let durable = (self.last(Table::Log)?)
            .and_then(|(k, _)| seq_of_log_key(&k))
            .unwrap_or(0);
        // The batch's last log entry, as the log would end with it.
        let mut last_entry: Option<(&[u8], &[u8])> = None;
        let mut b = sled::Batch::default();
        for op in batch.ops() {
            match op {
                Op::Put(t, k, v) => {
                    if t == Table::Log && last_entry.is_none_or(|(last, _)| k >= last) {
                        last_entry = Some((k, v));
                    }
                    b.insert(full_key(t, k), v)
                }
                Op::Delete(t, k) => b.remove(full_key(t, k)),
            }
        }
        let result = self
            .db
            .apply_batch(b)
            .and_then(|_| self.db.flush().map(|_| ()));
        let Err(e) = result else {
            return Ok(());
        };
        self.failed.store(true, std::sync::atomic::Ordering::SeqCst);
        let (failed_last, last_record) = match last_entry {
            Some((k, v)) => (seq_of_log_key(k).unwrap_or(0), crc32fast::hash(v)),
            None => (durable, 0),
        };
        let recorded = FailedCommit {
            durable,
            failed_last,
            last_record,
        }
        .record(&self.path);
        Err(match recorded {
            Ok(()) => err(e),
            Err(unrecorded) => and_unrecorded(err(e), unrecorded),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed commit whose record could not be made says so to the caller, not only to the
    /// log (helper-142).
    #[test]
    fn a_failed_commit_that_could_not_be_recorded_says_so() {
        let failed = err(sled::Error::Io(std::io::Error::from_raw_os_error(28)));
        let said = and_unrecorded(failed, std::io::Error::from_raw_os_error(28)).to_string();
        assert!(
            said.contains("could not be recorded beside sled's files (No space left on device")
                && said.contains("will not take it back"),
            "{said}"
        );
    }

    /// A full disk's error read `commit: Os { code: 27, kind: FileTooLarge, message: "File
    /// too large" }` (helper-144): sled keeps the debug form as the error's text.
    #[test]
    fn a_write_error_sled_keeps_as_text_is_said_in_the_systems_words() {
        let kept = std::io::Error::other(
            r#"Os { code: 27, kind: FileTooLarge, message: "File too large" }"#,
        );
        let text = err(sled::Error::Io(kept)).to_string();
        assert!(text.contains("(os error 27)"), "{text}");
        assert!(!text.contains("Os {"), "{text}");
        let plain = std::io::Error::other("no code here");
        assert!(err(sled::Error::Io(plain))
            .to_string()
            .contains("no code here"));
    }

    /// sled's corruption error had been shown whole, ending in " backtrace ()", on a damaged
    /// store (a new user's finding).
    #[test]
    fn a_corruption_error_is_shown_without_sleds_empty_backtrace() {
        let e = err(sled::Error::Corruption { at: None, bt: () });
        let text = e.to_string();
        assert!(text.contains("corrupted data"), "{text}");
        assert!(!text.contains("backtrace"), "{text}");
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert!(source.is_some_and(|s| text.contains(&s)), "{text}");
    }
}
