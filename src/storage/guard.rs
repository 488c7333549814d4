//! A panic barrier around a backend. redb and sled can panic (index out of bounds, failed
//! asserts, unwraps) on files damaged by a bad disk or a stray write instead of returning an
//! error. loci runs inside its caller's process, so such a panic would kill the agent. Every
//! call into a backend goes through [`Guarded`], which turns a panic into a typed error that
//! names the file (through [`crate::boundary`]), and refuses all later calls: after a panic
//! the library's in-memory state (locks, caches, half-updated pages) is unknown, so calling it
//! again could panic again or return wrong data.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Backend, BackendKind, ScanVisitor, Table, WriteBatch};
use crate::boundary;
use crate::error::{Error, Result};

/// The source of an [`Error::Backend`] whose backend found its file damaged: it panicked on
/// it (the backends' panics seen so far were all on damaged files), or said so (sled's
/// corruption error). `loci` exits 6 for it, as for [`Error::Corrupt`]. Its text is words the
/// error's message already holds, so that printing an error with its causes says them once.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
#[non_exhaustive]
pub struct DamagedFile(pub String);

/// What a panic on a file is said to mean, in its message and its [`DamagedFile`].
const PROBABLY_DAMAGED: &str = "the file is probably damaged";

/// Runs `f`, turning a panic into [`Error::Backend`] that names `path`. Used for opening, where
/// there is no handle yet to disable.
pub(crate) fn open_guarded<T>(
    kind: BackendKind,
    path: &Path,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match boundary::catch(f) {
        Ok(Err(Error::Backend {
            backend,
            message,
            source,
        })) => Err(Error::Backend {
            backend,
            message: format!("{}: open: {message}", path.display()),
            source,
        }),
        Ok(r) => r,
        Err(p) => Err(Error::Backend {
            backend: kind.name(),
            source: Some(Box::new(DamagedFile(PROBABLY_DAMAGED.into()))),
            message: format!(
                "{} panicked while opening {} ({PROBABLY_DAMAGED}): {}",
                kind.name(),
                path.display(),
                p
            ),
        }),
    }
}

/// A backend whose panics become errors; see the module documentation.
pub struct Guarded {
    /// `None` only during drop.
    inner: Option<Box<dyn Backend>>,
    kind: BackendKind,
    path: PathBuf,
    poisoned: AtomicBool,
}

impl Guarded {
    pub fn new(inner: Box<dyn Backend>, path: PathBuf) -> Self {
        Guarded {
            kind: inner.kind(),
            inner: Some(inner),
            path,
            poisoned: AtomicBool::new(false),
        }
    }

    fn call<T>(
        &self,
        what: &str,
        table: Option<Table>,
        f: impl FnOnce(&dyn Backend) -> Result<T>,
    ) -> Result<T> {
        let inner = match &self.inner {
            Some(inner) if !self.poisoned.load(Ordering::SeqCst) => inner,
            _ => {
                return Err(Error::Backend {
                    backend: self.kind.name(),
                    source: None,
                    message: format!(
                        "{} is disabled after an earlier panic inside {} (damaged file?); \
                         reopen the store",
                        self.path.display(),
                        self.kind.name()
                    ),
                })
            }
        };
        match boundary::catch(|| f(&**inner)) {
            // The backends' own errors do not say which file they concern.
            Ok(Err(Error::Backend {
                backend,
                message,
                source,
            })) => Err(Error::Backend {
                backend,
                message: format!("{}: {what}: {message}", self.path.display()),
                source,
            }),
            // Nor does a damaged record found in what they read (a checksum, a decoding).
            Ok(Err(e @ Error::Corrupt { table, .. }))
                if Table::ALL.iter().any(|t| t.name() == table) =>
            {
                Err(super::corrupt_in_file(e, &self.path))
            }
            Ok(r) => r,
            Err(p) => {
                self.poisoned.store(true, Ordering::SeqCst);
                let mut message = format!(
                    "{} panicked in {what} on {} ({PROBABLY_DAMAGED}): {}",
                    self.kind.name(),
                    self.path.display(),
                    p
                );
                // What is derived from the log can be written again from it.
                if table.is_some_and(Table::is_derived) {
                    message.push_str(
                        "; the table is derived from the log: `loci repair` writes it afresh",
                    );
                }
                Err(match table {
                    Some(t) => Error::Corrupt {
                        table: t.name(),
                        message,
                    },
                    None => Error::Backend {
                        backend: self.kind.name(),
                        source: Some(Box::new(DamagedFile(PROBABLY_DAMAGED.into()))),
                        message,
                    },
                })
            }
        }
    }
}

impl Backend for Guarded {
    fn kind(&self) -> BackendKind {
        self.kind
    }
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.call("get", Some(table), |b| b.get(table, key))
    }
    fn scan(
        &self,
        table: Table,
        start: &[u8],
        end: Option<&[u8]>,
        visit: &mut ScanVisitor<'_>,
    ) -> Result<()> {
        // The visitor is loci's code (a replay runs the projection in it): a panic there is
        // a bug of loci's, to be printed as one, not a damaged file's.
        let mut visit_outside = |k: &[u8], v: &[u8]| boundary::outside(|| visit(k, v));
        self.call("scan", Some(table), |b| {
            b.scan(table, start, end, &mut visit_outside)
        })
    }
    fn last(&self, table: Table) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.call("last", Some(table), |b| b.last(table))
    }
    fn commit(&self, batch: WriteBatch) -> Result<()> {
        self.call("commit", None, |b| b.commit(batch))
    }
    fn table_bytes(&self, table: Table) -> Result<super::TableBytes> {
        self.call("table_bytes", Some(table), |b| b.table_bytes(table))
    }
    fn usable(&self) -> Result<()> {
        self.call("usable", None, |b| b.usable())
    }
    fn pinned_view(&self) -> Result<Option<Box<dyn Backend>>> {
        let view = self.call("pinned_view", None, |b| b.pinned_view())?;
        Ok(view.map(|v| Box::new(Guarded::new(v, self.path.clone())) as Box<dyn Backend>))
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            if self.poisoned.load(Ordering::SeqCst) {
                // Its destructor may flush or check invariants that the panic left broken;
                // leaking the handle (and its file lock, until the process exits) is safer than
                // running it.
                std::mem::forget(inner);
            } else {
                // A destructor that panics (e.g. flushing to a damaged file) must not take the
                // caller down either.
                let _ = boundary::catch(move || drop(inner));
            }
        }
    }
}
