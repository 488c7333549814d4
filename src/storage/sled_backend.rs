//! The sled backend: all tables share one sled tree, each key prefixed by its table's byte, so
//! that a whole multi-table batch is one `apply_batch` (atomic in sled) followed by a `flush`
//! (durable once it returns).

use std::path::Path;

use super::{Backend, BackendKind, Op, ScanVisitor, Table, WriteBatch};
use crate::error::{Error, Result};

fn err(e: impl std::fmt::Display) -> Error {
    Error::Backend {
        backend: "sled",
        message: e.to_string(),
    }
}

fn prefix(table: Table) -> u8 {
    match table {
        Table::Meta => b'm',
        Table::Log => b'l',
        Table::Nodes => b'n',
        Table::Edges => b'e',
        Table::EventTime => b't',
    }
}

fn full_key(table: Table, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(prefix(table));
    k.extend_from_slice(key);
    k
}

/// A store's sled database.
pub struct SledBackend {
    db: sled::Db,
}

impl SledBackend {
    pub fn open(path: &Path) -> Result<Self> {
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
                Ok(db) => return Ok(SledBackend { db }),
                Err(e)
                    if e.to_string().contains("could not acquire lock")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => return Err(err(e)),
            }
        }
    }
}

impl Backend for SledBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Sled
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
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
        let mut iter = self.db.range(vec![prefix(table)]..vec![prefix(table) + 1]);
        match iter.next_back() {
            Some(entry) => {
                let (k, v) = entry.map_err(err)?;
                Ok(Some((k[1..].to_vec(), v.to_vec())))
            }
            None => Ok(None),
        }
    }

    fn commit(&self, batch: WriteBatch) -> Result<()> {
        let mut b = sled::Batch::default();
        for op in batch.ops {
            match op {
                Op::Put(t, k, v) => b.insert(full_key(t, &k), v),
                Op::Delete(t, k) => b.remove(full_key(t, &k)),
            }
        }
        self.db.apply_batch(b).map_err(err)?;
        self.db.flush().map_err(err)?;
        Ok(())
    }
}
