//! Storage: ordered key-value tables behind one trait, with two backends (redb, the default,
//! and sled). Everything above this module sees only [`Backend`]: atomic multi-table batches,
//! point reads and ordered range scans. The conformance suite in `tests/conformance.rs` runs
//! unchanged against every backend.

mod guard;
mod lock;
mod redb_backend;
mod sled_backend;

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Where a compaction writes the backend's new files, inside the store's directory, before
/// they are moved over the live ones (`Store::compact`).
pub(crate) const COMPACT_DIR: &str = "compact.tmp";
/// Where a sled compaction puts the live directory while it moves the new one in.
pub(crate) const SLED_OLD: &str = "sled.old";

/// Whether a compaction (or a repair, which writes its fresh files alike) is under way in
/// `dir`, or was cut short there: its work directory, or sled's old files, are there.
pub(crate) fn compacting(dir: &Path) -> bool {
    dir.join(COMPACT_DIR).exists() || dir.join(SLED_OLD).exists()
}

/// Opens a file of the store's own for reading, refusing anything but a regular file: a
/// FIFO put in its place would make the open wait for a writer forever (the manifest, the
/// snapshot and the full-text index's files had; helper-111 probe), and a device read on.
/// `O_NONBLOCK` lets the open of a FIFO return, for the check to refuse it; it changes
/// nothing for a regular file's reads.
pub(crate) fn open_regular_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    Ok(file)
}

pub use guard::{DamagedFile, Guarded};
pub(crate) use lock::locked;
pub(crate) use lock::wait_while_held;
pub use lock::{StoreLock, LOCK_FILE};
pub use redb_backend::{RedbBackend, READERS_WAIT};
pub(crate) use sled_backend::conf_is_not_locis as sled_conf_is_not_locis;
pub(crate) use sled_backend::seq_of_log_key;
pub(crate) use sled_backend::snapshot_checksum_fails as sled_snapshot_checksum_fails;
pub use sled_backend::{FailedCommit, SledBackend};

/// The tables of a store. Keys are big-endian integers (so byte order is numeric order) except
/// in [`Table::Meta`], whose keys are names.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Table {
    /// Store metadata: format version, backend, id counters, last sequence number.
    Meta,
    /// The append-only event log: seq (u64) -> Event.
    Log,
    /// Stores before format 3 kept each node's record here; emptied when such a store is
    /// first opened for writing (nodes live in the state and its snapshot). Any other table
    /// use is a backend's, as in the conformance tests.
    Nodes,
    /// As [`Table::Nodes`], for the edges' records.
    Edges,
    /// Derived time index of the log: (ts with its sign bit flipped, seq) -> nothing.
    EventTime,
    /// Derived map of idempotency keys: key (UTF-8) -> seq (u64) of the event that carried it.
    Idempotency,
    /// Derived episodic index: (facet byte `p` place / `a` actor / `k` kind, value length
    /// (u16), value, event-time key) -> nothing, so a timeline of one place, actor or kind
    /// reads only its own events.
    EventFacet,
}

impl Table {
    pub const ALL: [Table; 7] = [
        Table::Meta,
        Table::Log,
        Table::Nodes,
        Table::Edges,
        Table::EventTime,
        Table::Idempotency,
        Table::EventFacet,
    ];

    /// Whether the table holds only what the log derives (`Store::repair` writes it afresh).
    pub fn is_derived(self) -> bool {
        matches!(
            self,
            Table::EventTime | Table::EventFacet | Table::Idempotency
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Table::Meta => "meta",
            Table::Log => "log",
            Table::Nodes => "nodes",
            Table::Edges => "edges",
            Table::EventTime => "event_time",
            Table::Idempotency => "idempotency",
            Table::EventFacet => "event_facet",
        }
    }
}

/// One change inside a [`WriteBatch`], as [`WriteBatch::ops`] gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op<'a> {
    Put(Table, &'a [u8], &'a [u8]),
    Delete(Table, &'a [u8]),
}

/// Changes applied all together or not at all by [`Backend::commit`], in the order given.
///
/// The keys are held one after another in one buffer, each change by where its key ends;
/// a put's value is held as given (moved in, not copied: an ingest's batch is mostly its
/// events' records). A forgetting of 800,000 events deletes about 3.2 million index keys in
/// one batch, and each had been an allocation of its own in a 56-byte entry, about 110
/// bytes a key: 360 MB of the deletion's 494 MB peak.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteBatch {
    keys: Vec<u8>,
    ops: Vec<OpAt>,
    /// The puts' values, in the order of the puts.
    values: Vec<Vec<u8>>,
}

/// Where a change's key ends in [`WriteBatch::keys`] (it starts where the one before ends),
/// its table, and whether it puts (its value the next of [`WriteBatch::values`]) or deletes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct OpAt {
    key_end: usize,
    table: Table,
    put: bool,
}

impl WriteBatch {
    pub fn put(&mut self, table: Table, key: impl AsRef<[u8]>, value: Vec<u8>) {
        self.push(table, key.as_ref(), true);
        self.values.push(value);
    }
    pub fn delete(&mut self, table: Table, key: impl AsRef<[u8]>) {
        self.push(table, key.as_ref(), false);
    }
    fn push(&mut self, table: Table, key: &[u8], put: bool) {
        self.keys.extend_from_slice(key);
        self.ops.push(OpAt {
            key_end: self.keys.len(),
            table,
            put,
        });
    }
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// The changes, in the order they were given.
    pub fn ops(&self) -> impl Iterator<Item = Op<'_>> + '_ {
        let mut values = self.values.iter();
        let mut key_start = 0;
        self.ops.iter().map(move |op| {
            let key = self.keys.get(key_start..op.key_end).unwrap_or_default();
            key_start = op.key_end;
            match op.put {
                // Every put pushed its value (none is for a put that cannot be).
                true => Op::Put(op.table, key, values.next().map_or(&[], Vec::as_slice)),
                false => Op::Delete(op.table, key),
            }
        })
    }
}

/// A backend that is `inner` but for scans `intercept` answers (damage made to order, for
/// tests): `intercept(table, start)` gives a scan's result in place of `inner`'s, or `None` to
/// let `inner` scan.
#[cfg(test)]
pub(crate) struct InterceptedScans<F> {
    pub(crate) inner: Box<dyn Backend>,
    pub(crate) intercept: F,
}

#[cfg(test)]
impl<F> Backend for InterceptedScans<F>
where
    F: Fn(Table, &[u8]) -> Option<Result<()>> + Send + Sync,
{
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(table, key)
    }
    fn scan(
        &self,
        table: Table,
        start: &[u8],
        end: Option<&[u8]>,
        visit: &mut ScanVisitor<'_>,
    ) -> Result<()> {
        match (self.intercept)(table, start) {
            Some(answer) => answer,
            None => self.inner.scan(table, start, end, visit),
        }
    }
    fn last(&self, table: Table) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.inner.last(table)
    }
    fn commit(&self, batch: WriteBatch) -> Result<()> {
        self.inner.commit(batch)
    }
}

/// Visitor called by [`Backend::scan`] with each key and value; returning `false` stops.
pub type ScanVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<bool> + 'a;

/// An ordered, transactional key-value store.
///
/// Contract (checked by the conformance suite):
/// - `commit` is atomic: after a crash either every op of the batch is visible or none is;
///   when it returns `Ok` the batch is durable.
/// - A concurrent reader never sees part of a batch in a single `get` or `scan`.
/// - `scan` visits keys in ascending byte order.
pub trait Backend: Send + Sync {
    fn kind(&self) -> BackendKind;
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Visits the entries of `table` whose keys are `>= start` and `< end` (no end: to the end
    /// of the table), in key order, until `visit` returns `false`.
    fn scan(
        &self,
        table: Table,
        start: &[u8],
        end: Option<&[u8]>,
        visit: &mut ScanVisitor<'_>,
    ) -> Result<()>;
    /// The entry with the largest key.
    fn last(&self, table: Table) -> Result<Option<(Vec<u8>, Vec<u8>)>>;
    fn commit(&self, batch: WriteBatch) -> Result<()>;
    /// A read-only view of the state committed now, which later commits do not change: for a
    /// reader that must see every table at one moment while a writer in another process goes
    /// on committing (a read-only open). `None` where the backend has no such view (sled);
    /// such a reader reads again until no commit landed during its read.
    fn pinned_view(&self) -> Result<Option<Box<dyn Backend>>> {
        Ok(None)
    }
    /// Whether the handle still serves calls, and if not why: sled's after a failed commit,
    /// and the guard's after a panic inside the backend, refuse every call until the store is
    /// opened again (what a server's `/health` says).
    fn usable(&self) -> Result<()> {
        Ok(())
    }
    /// What `table` takes: the bytes of its keys and values, and the backend's own bytes for
    /// it (pages' metadata and fragmentation) where the backend says. The default counts the
    /// entries by a scan (a full read of the table) and knows no overhead.
    fn table_bytes(&self, table: Table) -> Result<TableBytes> {
        let mut entries = 0u64;
        self.scan(table, &[], None, &mut |k, v| {
            entries += (k.len() + v.len()) as u64;
            Ok(true)
        })?;
        Ok(TableBytes {
            entries,
            overhead: None,
        })
    }
}

/// Where a table's bytes go ([`Backend::table_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TableBytes {
    /// Keys and values as stored.
    pub entries: u64,
    /// Page metadata and fragmentation, when the backend reports them.
    pub overhead: Option<u64>,
}

/// Which backend a store uses; recorded in the store when it is created.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// redb: stable file format, crash-safe copy-on-write B-trees. The default.
    #[default]
    Redb,
    /// sled: log-structured embedded store.
    Sled,
}

impl BackendKind {
    pub const ALL: [BackendKind; 2] = [BackendKind::Redb, BackendKind::Sled];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Redb => "redb",
            BackendKind::Sled => "sled",
        }
    }

    /// The file (redb) or directory (sled) holding this backend's data inside `dir`. (A
    /// compaction leaves [`COMPACT_DIR`] and [`SLED_OLD`] beside it while it runs.)
    pub fn path_in(self, dir: &Path) -> std::path::PathBuf {
        match self {
            BackendKind::Redb => dir.join("data.redb"),
            BackendKind::Sled => dir.join("sled"),
        }
    }

    /// The backends whose data (see [`BackendKind::path_in`]) is present in `dir`, with its
    /// path.
    pub fn present_in(dir: &Path) -> impl Iterator<Item = (BackendKind, std::path::PathBuf)> + '_ {
        Self::ALL
            .into_iter()
            .map(move |k| (k, k.path_in(dir)))
            .filter(|(_, path)| path.exists())
    }

    /// Opens (creating when missing) this backend's files inside `dir`. The handle is
    /// [`Guarded`]: a panic inside the backend comes back as an error.
    pub fn open(self, dir: &Path) -> Result<Box<dyn Backend>> {
        self.open_as(dir, false)
    }

    /// Opens this backend's existing files inside `dir` for reading only, beside a writer in
    /// another process where the backend allows it (redb does; sled keeps its files to one
    /// process, so a sled store held by a writer is [`Error::Locked`]).
    pub fn open_read_only(self, dir: &Path) -> Result<Box<dyn Backend>> {
        self.open_as(dir, true)
    }

    /// Opens this backend's files inside the existing store `dir`, for writing or for
    /// reading only; files that are not there are an error, not made anew (an empty
    /// database would stand in for the store's log).
    pub fn open_existing(self, dir: &Path, read_only: bool) -> Result<Box<dyn Backend>> {
        let path = self.path_in(dir);
        // sled's directory holds its log in `db`; a directory without it is a new database.
        let data = match self {
            BackendKind::Redb => path.clone(),
            BackendKind::Sled => path.join("db"),
        };
        if !data.exists() {
            let compacting = compacting(dir);
            let other = Self::present_in(dir).find(|(k, _)| *k != self);
            return Err(Error::Store {
                path: dir.to_path_buf(),
                message: if let (Some((other, other_path)), false) = (other, compacting) {
                    // The manifest, not the log, is what is wrong.
                    format!(
                        "{} is missing, and {} is there: the files here are a {} store's, where \
                         {} names the {} backend; mend its \"backend\"",
                        data.display(),
                        other_path.display(),
                        other.name(),
                        dir.join(crate::store::MANIFEST).display(),
                        self.name()
                    )
                } else if compacting {
                    format!(
                        "{} is missing: a compaction was cut short; a command that writes (e.g. `loci stats` with no other process holding the store) finishes it",
                        data.display()
                    )
                } else {
                    format!(
                        "{} is missing: the store's log is gone (restore it from a backup; loci makes none)",
                        data.display()
                    )
                },
            });
        }
        // The manifest is written after the tables are made (`Store::create`), so a store's log
        // file is never empty; an emptied one opened here would be made a new database, on a
        // reading command too, standing in for the log.
        if std::fs::metadata(&data).is_ok_and(|m| m.is_file() && m.len() == 0) {
            return Err(Error::Store {
                path: dir.to_path_buf(),
                message: format!(
                    "{} is empty (0 bytes): the store's log is gone (restore it from a backup; loci makes none)",
                    data.display()
                ),
            });
        }
        self.open_as(dir, read_only)
    }

    fn open_as(self, dir: &Path, read_only: bool) -> Result<Box<dyn Backend>> {
        let path = self.path_in(dir);
        let inner: Box<dyn Backend> = guard::open_guarded(self, &path, || {
            Ok(match (self, read_only) {
                (BackendKind::Redb, false) => {
                    Box::new(RedbBackend::open(&path)?) as Box<dyn Backend>
                }
                (BackendKind::Redb, true) => Box::new(RedbBackend::open_read_only(&path)?),
                (BackendKind::Sled, _) => Box::new(SledBackend::open(&path)?),
            })
        })
        .map_err(|e| locked_by_another_process(e, dir))?;
        Ok(Box::new(Guarded::new(inner, path)))
    }
}

/// A backend's own "the file is in use" error as [`Error::Locked`], naming the holder when the
/// store's lock file says who it is: the backend's words ("Database already open. Cannot
/// acquire lock.", sled's `WouldBlock`) tell a user neither what to do nor who to ask.
fn locked_by_another_process(e: Error, dir: &Path) -> Error {
    let text = e.to_string();
    let in_use = text.contains("already open")
        || text.contains("could not acquire lock")
        || text.contains("WouldBlock")
        || text.contains("Resource temporarily unavailable");
    if in_use {
        locked(dir, StoreLock::holder(dir))
    } else {
        e
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "redb" => Ok(BackendKind::Redb),
            "sled" => Ok(BackendKind::Sled),
            other => Err(Error::InvalidArgument {
                name: "backend".into(),
                message: format!(
                    "unknown backend {}, expected redb or sled",
                    crate::error::quoted_excerpt(other)
                ),
            }),
        }
    }
}

/// A damaged record's error naming the backend `file` it was read from (the backends' own
/// errors do not say): a [`Error::Corrupt`] gets the file before its message, once (a read
/// nested in a scan's visit may have named it already); any other error is left as it is.
pub(crate) fn corrupt_in_file(e: Error, file: &Path) -> Error {
    match e {
        Error::Corrupt { table, message } => {
            let file = file.display().to_string();
            let message = if message.starts_with(&file) {
                message
            } else {
                format!("{file}: {message}")
            };
            Error::Corrupt { table, message }
        }
        e => e,
    }
}
