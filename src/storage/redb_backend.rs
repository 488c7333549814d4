//! The redb backend: one redb table per [`Table`], every batch one write transaction committed
//! with `Durability::Immediate` (fsync before `commit` returns).
//!
//! The database is opened in redb's `SingleWriter` mode: one process writes, and any number of
//! other processes may open it read-only at the same time ([`RedbBackend::open_read_only`]) and
//! read its committed state. (The default, `ExclusiveWriter`, would make every reader wait for
//! the writer to exit.)

use std::path::Path;

use redb::{
    ConcurrencyMode, Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, TableHandle,
};

use super::{Backend, BackendKind, Op, ScanVisitor, Table, WriteBatch};
use crate::error::{Error, Result};

type Bytes = &'static [u8];

fn definition(table: Table) -> TableDefinition<'static, Bytes, Bytes> {
    TableDefinition::new(table.name())
}

/// How long an in-place compaction waits for readers in other processes to finish.
pub const READERS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// redb's error as the source of a backend error. A read past the file's end is reported by
/// redb as an I/O error, "failed to fill whole buffer": the message says what it means, a
/// page pointer damaged (helper-112), since that is all a user sees of it.
fn err(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    let past_end = matches!(
        (&e as &dyn std::error::Error).downcast_ref::<redb::StorageError>(),
        Some(redb::StorageError::Io(io)) if io.kind() == std::io::ErrorKind::UnexpectedEof
    );
    let mut error = Error::backend_source("redb", e);
    if let (true, Error::Backend { message, .. }) = (past_end, &mut error) {
        message.push_str(" (a read past the end of the file: a page pointer in it is damaged)");
    }
    error
}

/// An error opening `table`, where one that says the table is of another type is damage:
/// loci opens each table with one type always, so a stored definition that differs is a
/// damaged table tree (one flipped bit gives "meta is of type Table<u64, u64>"), reported as
/// a corrupt store (exit 6) and not an other failure.
fn table_err(table: Table) -> impl Fn(redb::TableError) -> Error {
    move |e| match e {
        redb::TableError::TableTypeMismatch { .. }
        | redb::TableError::TypeDefinitionChanged { .. }
        | redb::TableError::TableIsMultimap(_)
        | redb::TableError::TableIsNotMultimap(_) => Error::Corrupt {
            table: table.name(),
            message: format!("the file's definition of the table is damaged: {e}"),
        },
        e => err(e),
    }
}

/// An open's error, with the system's refusal of this user as its source where it is one:
/// redb's error names no source, and a user refused the file (a store opened for reading by
/// one who may not write it) is told apart by it (`Store::open_for_reading`). Other errors
/// keep redb's as their source, by which damage is told apart (the CLI's exit 6).
fn open_err(e: redb::DatabaseError) -> Error {
    match e {
        redb::DatabaseError::Storage(redb::StorageError::Io(io))
            if crate::error::is_refusal(&io) =>
        {
            Error::Backend {
                backend: "redb",
                message: format!("I/O error: {io}"),
                source: Some(Box::new(io)),
            }
        }
        e => err(e),
    }
}

/// redb's page cache, in bytes. The state holds what graph reads need and the OS caches the
/// file; at 64 MB the cache was a sixth of a 1M-edge bulk load's peak memory, and 16 MB
/// measured no slower (ingest 432-467k edges/s against 404-424k).
const REDB_CACHE_BYTES: usize = 16 << 20;

/// A store's redb database, opened for writing or read-only.
pub struct RedbBackend {
    db: Db,
}

enum Db {
    Write(Database),
    Read(ReadOnlyDatabase),
}

impl Db {
    fn begin_read(&self) -> Result<ReadTransaction> {
        match self {
            Db::Write(db) => db.begin_read().map_err(err),
            Db::Read(db) => db.begin_read().map_err(err),
        }
    }
}

fn builder() -> redb::Builder {
    let mut b = redb::Builder::new();
    // redb's default page cache is 1 GiB, which a long ingest fills: loci keeps what reads
    // need in memory itself, so a small cache bounds ingest memory at little read cost.
    b.set_cache_size(REDB_CACHE_BYTES)
        .set_concurrency_mode(ConcurrencyMode::SingleWriter);
    b
}

impl RedbBackend {
    /// Opens or creates the database file at `path` and makes sure every table exists, so that
    /// readers never meet a missing table.
    pub fn open(path: &Path) -> Result<Self> {
        let db = builder().create(path).map_err(open_err)?;
        Self::from_database(db)
    }

    /// Rewrites the database file at `path` (its store's writer lock held) into as few pages
    /// as its contents need: redb's own compaction. A fresh copy made by many batches leaves
    /// pages partly used, and a compaction that grew the store would surprise its user.
    ///
    /// A reader in another process (a read-only open beside the writer) holds a read
    /// transaction, and redb compacts no file a transaction is open on: that waits up to
    /// [`READERS_WAIT`] for the readers to finish, then is [`Error::Locked`] (helper-115: four
    /// compactions in eight beside a loop of `search` and `stats` had exited 8 with redb's
    /// "A transaction is still in progress").
    pub fn compact_file(path: &Path) -> Result<()> {
        let mut db = builder().create(path).map_err(err)?;
        let mut waited = std::time::Instant::now();
        loop {
            match db.compact() {
                // Each pass that got on is a new start for the wait.
                Ok(true) => waited = std::time::Instant::now(),
                Ok(false) => return Ok(()),
                Err(redb::CompactionError::TransactionInProgress)
                    if waited.elapsed() < READERS_WAIT =>
                {
                    // Between two reading commands' transactions there are a few
                    // milliseconds: a short wait finds one.
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(redb::CompactionError::TransactionInProgress) => {
                    tracing::warn!(
                        file = %path.display(),
                        "a reader in another process held the store through the compaction's wait"
                    );
                    let store = path.parent().unwrap_or(path).to_path_buf();
                    return Err(Error::Locked {
                        path: store,
                        holder: None,
                        here: false,
                    });
                }
                Err(e) => return Err(err(e)),
            }
        }
    }

    /// Opens an existing database read-only, beside a writer in another process if there is
    /// one. Commits refuse; reads see the state committed when each read began.
    pub fn open_read_only(path: &Path) -> Result<Self> {
        let db = builder().open_read_only(path).map_err(err)?;
        Ok(RedbBackend { db: Db::Read(db) })
    }

    /// Wraps an already opened database (used by failure-injection tests with their own
    /// storage backend).
    pub fn from_database(db: Database) -> Result<Self> {
        // An existing store already has every table: do not write on open (a write that then
        // fails, e.g. on a full disk, is a risk the open has no need for).
        let names: Vec<String> = {
            let read = db.begin_read().map_err(err)?;
            let names = read
                .list_tables()
                .map_err(err)?
                .map(|t| t.name().to_string())
                .collect();
            names
        };
        if Table::ALL
            .iter()
            .all(|t| names.iter().any(|n| n == t.name()))
        {
            return Ok(RedbBackend { db: Db::Write(db) });
        }
        let txn = db.begin_write().map_err(err)?;
        for table in Table::ALL {
            txn.open_table(definition(table))
                .map_err(table_err(table))?;
        }
        txn.commit().map_err(err)?;
        Ok(RedbBackend { db: Db::Write(db) })
    }
}

impl Backend for RedbBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Redb
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        get_in(&self.db.begin_read()?, table, key)
    }

    fn scan(
        &self,
        table: Table,
        start: &[u8],
        end: Option<&[u8]>,
        visit: &mut ScanVisitor<'_>,
    ) -> Result<()> {
        scan_in(&self.db.begin_read()?, table, start, end, visit)
    }

    fn table_bytes(&self, table: Table) -> Result<super::TableBytes> {
        table_bytes_in(&self.db.begin_read()?, table)
    }

    fn last(&self, table: Table) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        last_in(&self.db.begin_read()?, table)
    }

    fn pinned_view(&self) -> Result<Option<Box<dyn Backend>>> {
        let txn = self.db.begin_read()?;
        Ok(Some(Box::new(RedbView {
            txn: std::sync::Mutex::new(txn),
        })))
    }

    fn commit(&self, batch: WriteBatch) -> Result<()> {
        let Db::Write(db) = &self.db else {
            return Err(Error::backend("redb", "the database is open read-only"));
        };
        let txn = db.begin_write().map_err(err)?;
        {
            // Open each table once per batch; ops are grouped by table in first-use order.
            let mut tables = Vec::with_capacity(Table::ALL.len());
            for table in Table::ALL {
                tables.push(
                    txn.open_table(definition(table))
                        .map_err(table_err(table))?,
                );
            }
            let index = |t: Table| Table::ALL.iter().position(|x| *x == t).unwrap_or(0);
            for op in batch.ops() {
                match op {
                    Op::Put(t, k, v) => {
                        tables[index(t)].insert(k, v).map_err(err)?;
                    }
                    Op::Delete(t, k) => {
                        tables[index(t)].remove(k).map_err(err)?;
                    }
                }
            }
        }
        // Durability::Immediate is redb's default: commit returns after the fsync.
        txn.commit().map_err(err)
    }
}

fn get_in(txn: &ReadTransaction, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let t = txn
        .open_table(definition(table))
        .map_err(table_err(table))?;
    Ok(t.get(key).map_err(err)?.map(|v| v.value().to_vec()))
}

fn scan_in(
    txn: &ReadTransaction,
    table: Table,
    start: &[u8],
    end: Option<&[u8]>,
    visit: &mut ScanVisitor<'_>,
) -> Result<()> {
    let t = txn
        .open_table(definition(table))
        .map_err(table_err(table))?;
    let iter = match end {
        Some(end) => t.range::<&[u8]>(start..end),
        None => t.range::<&[u8]>(start..),
    }
    .map_err(err)?;
    for entry in iter {
        let (k, v) = entry.map_err(err)?;
        if !visit(k.value(), v.value())? {
            break;
        }
    }
    Ok(())
}

fn table_bytes_in(txn: &ReadTransaction, table: Table) -> Result<super::TableBytes> {
    use redb::ReadableTableMetadata;
    let t = txn
        .open_table(definition(table))
        .map_err(table_err(table))?;
    let s = t.stats().map_err(err)?;
    Ok(super::TableBytes {
        entries: s.stored_bytes(),
        overhead: Some(s.metadata_bytes() + s.fragmented_bytes()),
    })
}

fn last_in(txn: &ReadTransaction, table: Table) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let t = txn
        .open_table(definition(table))
        .map_err(table_err(table))?;
    let last = t
        .last()
        .map_err(err)?
        .map(|(k, v)| (k.value().to_vec(), v.value().to_vec()));
    Ok(last)
}

/// One read transaction held open: every read sees the state committed when it began
/// ([`Backend::pinned_view`]). The mutex makes the view shareable between threads; reads
/// through it take turns, which a one-time load does not mind.
struct RedbView {
    txn: std::sync::Mutex<ReadTransaction>,
}

impl RedbView {
    fn with<T>(&self, f: impl FnOnce(&ReadTransaction) -> Result<T>) -> Result<T> {
        let txn = self.txn.lock().unwrap_or_else(|p| p.into_inner());
        f(&txn)
    }
}

impl Backend for RedbView {
    fn kind(&self) -> BackendKind {
        BackendKind::Redb
    }
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with(|t| get_in(t, table, key))
    }
    fn scan(
        &self,
        table: Table,
        start: &[u8],
        end: Option<&[u8]>,
        visit: &mut ScanVisitor<'_>,
    ) -> Result<()> {
        self.with(|t| scan_in(t, table, start, end, visit))
    }
    fn last(&self, table: Table) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.with(|t| last_in(t, table))
    }
    fn table_bytes(&self, table: Table) -> Result<super::TableBytes> {
        self.with(|t| table_bytes_in(t, table))
    }
    fn commit(&self, _batch: WriteBatch) -> Result<()> {
        Err(Error::backend("redb", "a pinned view is read-only"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// helper-112: a damaged page pointer read past the file's end, and the error said only
    /// "I/O error: failed to fill whole buffer".
    #[test]
    fn a_read_past_the_end_of_the_file_says_a_page_pointer_is_damaged() {
        let past_end = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        let said = err(redb::StorageError::Io(past_end)).to_string();
        assert!(said.contains("a page pointer in it is damaged"), "{said}");
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let said = err(redb::StorageError::Io(denied)).to_string();
        assert!(!said.contains("damaged"), "{said}");
    }
}
