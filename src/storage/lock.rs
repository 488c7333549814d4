//! The store directory's writer lock: one process writes a store at a time, and a second one is
//! told which process holds it instead of meeting a backend's raw "already open".
//!
//! The lock is an OS advisory lock on `DIR/lock` (`flock` on Unix), held for the life of the
//! writing [`crate::Store`], with the holder's pid written inside for the message. The OS drops
//! the lock when the process ends however it ends, so a file left behind by a killed process
//! never blocks anyone: only the lock, not the file's existence, means "held".
//!
//! A reading command takes the lock too when it is free (to repair the text index, flush the
//! uses it recorded, write a snapshot), and marks it so (`PID reading`): a writer waits for
//! such a holder, which is done in a moment, where it gives a writer's lock half a second.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Name of the lock file inside a store directory.
pub const LOCK_FILE: &str = "lock";

/// How long a writer waits for a lock a reading command holds before it is refused: a read
/// is over in a moment, unless it must first replay a large log without a snapshot.
const READER_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// What the lock file says of a reading holder, after its pid.
const READING_MARK: &str = "reading";

/// A held writer lock; released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
    path: PathBuf,
    /// The lock file's canonical path, as [`HELD_HERE`] lists it while this lock is held.
    held_as: Option<PathBuf>,
}

/// The lock files this process holds, by their canonical paths: a second handle refused the
/// lock is told that this process holds it, which the pid in the file cannot tell apart from
/// another container's process of the same pid.
static HELD_HERE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn held_here_list() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    HELD_HERE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a handle of this process holds the writer lock of `dir`.
fn held_here(dir: &Path) -> bool {
    std::fs::canonicalize(dir.join(LOCK_FILE))
        .map(|p| held_here_list().contains(&p))
        .unwrap_or(false)
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        if let Some(p) = &self.held_as {
            let mut held = held_here_list();
            if let Some(i) = held.iter().position(|h| h == p) {
                held.swap_remove(i);
            }
        }
    }
}

/// The refusal of the writer lock of `dir`, held by `holder` (the pid its file records) or by
/// a handle of this process.
pub(crate) fn locked(dir: &Path, holder: Option<u32>) -> Error {
    Error::Locked {
        path: dir.to_path_buf(),
        holder,
        here: held_here(dir),
    }
}

impl StoreLock {
    /// Takes the writer lock of the store in `dir`, waiting at most about half a second (see
    /// below): `Error::Locked` names the process that holds it.
    ///
    /// A lock a reading command of another process holds ([`StoreLock::acquire_if_free`]) is waited for up to a
    /// minute.
    pub fn acquire(dir: &Path) -> Result<StoreLock> {
        Self::take(dir, 256)
    }

    /// Takes the writer lock only if it is free now: for a reader, which goes on read-only
    /// beside a writer rather than wait the half second a writer would. The lock is marked as
    /// a reader's, which a writer waits for.
    pub fn acquire_if_free(dir: &Path) -> Result<StoreLock> {
        Self::take(dir, 0)
    }

    /// Takes the lock, trying again after 2, 4, ... ms up to waits of `patience_ms` (0: a
    /// reader's, marked so), or for [`READER_PATIENCE`] while a reader holds it.
    fn take(dir: &Path, patience_ms: u64) -> Result<StoreLock> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        // A lock can outlive its holder's release for a moment: a child process forked by any
        // thread of the holder shares the lock's file description until it execs. So a busy
        // lock is tried again for about half a second before it is reported.
        let started = std::time::Instant::now();
        let mut wait_ms = 2;
        let mut told = false;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if wait_ms <= patience_ms => {
                    std::thread::sleep(std::time::Duration::from_millis(wait_ms));
                    wait_ms *= 2;
                }
                Err(TryLockError::WouldBlock) => {
                    let (holder, reading) = read_holder(&mut file);
                    // A reader of this process may be waiting on this very call.
                    let wait = reading && patience_ms > 0 && !held_here(dir);
                    if !wait || started.elapsed() >= READER_PATIENCE {
                        return Err(locked(dir, holder));
                    }
                    if !told {
                        told = true;
                        tracing::warn!(
                            holder = holder.map_or_else(|| "?".to_string(), |p| p.to_string()),
                            "waiting for a command reading the store to finish (up to {} s)",
                            READER_PATIENCE.as_secs()
                        );
                    }
                    std::thread::sleep(std::time::Duration::from_millis(patience_ms));
                }
                Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
            }
        }
        // The pid is only for messages: a failure to write it does not undo the lock.
        let pid = match patience_ms {
            0 => format!("{} {READING_MARK}", std::process::id()),
            _ => std::process::id().to_string(),
        };
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(pid.as_bytes()))
            .and_then(|()| file.flush());
        if let Err(e) = written {
            tracing::debug!(error = %e, "could not record the lock holder's pid");
        }
        let held_as = std::fs::canonicalize(&path).ok();
        if let Some(p) = &held_as {
            held_here_list().push(p.clone());
        }
        Ok(StoreLock {
            _file: file,
            path,
            held_as,
        })
    }

    /// The process holding the writer lock of `dir`, if one does (`None` also when the holder
    /// did not record its pid).
    pub fn holder(dir: &Path) -> Option<u32> {
        let mut file = File::open(dir.join(LOCK_FILE)).ok()?;
        match file.try_lock_shared() {
            // Nobody holds it exclusively.
            Ok(()) => {
                let _ = file.unlock();
                None
            }
            Err(_) => read_holder(&mut file).0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The pid the lock file records, and whether it marks a reading holder.
/// Waits, as a writer's [`StoreLock::acquire`] would (about half a second), while another
/// holds the writer lock of `dir`, without taking it or writing anything (a read-only open
/// must not): `Ok` once it is free or when there is no lock file (no writer ever made one),
/// [`Error::Locked`] while it is still held.
pub(crate) fn wait_while_held(dir: &Path) -> Result<()> {
    let path = dir.join(LOCK_FILE);
    let mut file = match File::open(&path) {
        Ok(file) => file,
        Err(_) => return Ok(()),
    };
    let mut wait_ms = 2;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) if wait_ms <= 256 => {
                std::thread::sleep(std::time::Duration::from_millis(wait_ms));
                wait_ms *= 2;
            }
            Err(TryLockError::WouldBlock) => return Err(locked(dir, read_holder(&mut file).0)),
            // A lock this file system does not give says nothing of a writer.
            Err(TryLockError::Error(_)) => return Ok(()),
        }
    }
}

fn read_holder(file: &mut File) -> (Option<u32>, bool) {
    let mut text = String::new();
    let read = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.take(32).read_to_string(&mut text));
    if read.is_err() {
        return (None, false);
    }
    let mut words = text.split_whitespace();
    let pid = words.next().and_then(|w| w.parse().ok());
    (pid, words.next() == Some(READING_MARK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_told_the_holder_and_a_dropped_lock_frees_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let first = StoreLock::acquire(dir.path()).unwrap();
        match StoreLock::acquire(dir.path()) {
            Err(Error::Locked { holder, .. }) => assert_eq!(holder, Some(std::process::id())),
            other => panic!("expected Locked, got {other:?}"),
        }
        assert_eq!(StoreLock::holder(dir.path()), Some(std::process::id()));
        drop(first);
        assert_eq!(StoreLock::holder(dir.path()), None);
        // The file is still there; only the lock meant "held".
        assert!(dir.path().join(LOCK_FILE).exists());
        StoreLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn the_lock_is_taken_if_free_or_refused_naming_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = StoreLock::acquire_if_free(dir.path()).unwrap();
        match StoreLock::acquire_if_free(dir.path()) {
            Err(Error::Locked { holder, .. }) => assert_eq!(holder, Some(std::process::id())),
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(first);
        StoreLock::acquire_if_free(dir.path()).unwrap();
    }
}
