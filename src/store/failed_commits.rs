//! Taking back, at a writable open, what a sled commit that failed may have left on disk.
//!
//! sled applies a batch in memory before its flush makes it durable, and cannot undo it: when
//! the flush fails (a full disk), the handle refuses everything from then on, but sled still
//! writes the batch when the database is dropped, if the disk has room again by then. The
//! caller was told the batch failed, and may have sent it again. So the sled backend records
//! each failure beside its files ([`FailedCommit`]), and the next writable open removes the
//! failed batch's events from the log where sled wrote them, then rewrites what the backend
//! derives from the log, before anything reads the store.

use std::path::Path;

use super::Store;
use crate::error::{Error, Result};
use crate::storage::{Backend, BackendKind, FailedCommit, Table, WriteBatch};

impl Store {
    /// Takes back the failed commits recorded beside the sled files of the store at `dir`,
    /// whose backend is `backend`: the events after the last one durable before the first
    /// failure, where the log ends with a failed batch's last event (anything else means
    /// the log moved on since, by a build that does not read these records: it is left as it
    /// is, and said); then what the backend derives from the log is rebuilt, and the records
    /// removed. A crash part way leaves the records, and the next open does it all again.
    /// A reader is refused: it could serve the failed batch.
    pub(super) fn take_back_failed_commits(
        backend: &dyn Backend,
        dir: &Path,
        read_only: bool,
    ) -> Result<()> {
        let sled = BackendKind::Sled.path_in(dir);
        let recorded = FailedCommit::recorded_in(&sled)?;
        let Some(durable) = recorded.iter().map(|(f, _)| f.durable).min() else {
            return Ok(());
        };
        if read_only {
            return Err(Error::Store {
                path: dir.to_path_buf(),
                message: format!(
                    "a commit after event {durable} failed to reach disk, and sled may have \
                     written it since: the store must be opened for writing once (any write \
                     command, or `loci repair`) to take it back before it is read"
                ),
            });
        }
        let last = (backend.last(Table::Log)?)
            .and_then(|(k, _)| k.get(..8).and_then(|b| b.try_into().ok()))
            .map(u64::from_be_bytes)
            .unwrap_or(0);
        if last > durable && recorded.iter().any(|(f, _)| f.failed_last == last) {
            tracing::warn!(
                durable,
                failed_last = last,
                "taking back events of a commit that failed but that sled wrote afterwards"
            );
            remove_log_after(backend, durable)?;
        } else if last > durable {
            tracing::warn!(
                durable,
                last,
                "a commit after event {durable} failed, but the log now ends at event {last}, \
                 no failed batch's end: it is left as it is"
            );
        }
        Self::rebuild_derived(backend, dir)?;
        for (_, file) in &recorded {
            match std::fs::remove_file(file) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(file, e)),
            }
        }
        if let Ok(d) = std::fs::File::open(&sled) {
            // Best effort: a record that comes back after a crash is taken again, harmlessly.
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// Removes from the log every record after event `durable`, chunks too, in one commit.
fn remove_log_after(backend: &dyn Backend, durable: u64) -> Result<()> {
    let mut batch = WriteBatch::default();
    let from = durable.saturating_add(1).to_be_bytes();
    backend.scan(Table::Log, &from, None, &mut |k, _| {
        batch.delete(Table::Log, k);
        Ok(true)
    })?;
    backend.commit(batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::{self, WorldConfig};

    /// A temporary directory, the store's place in it, and a small world's events.
    fn a_small_world() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        Vec<crate::model::EventDraft>,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        let w = world::generate(&WorldConfig {
            seed: 5,
            scale: 2,
            days: 2,
        });
        (tmp, dir, w.events)
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap().flatten() {
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }

    /// sled wrote a batch whose flush had failed once the disk had room again, when the failed
    /// handle was dropped: the next open served it as committed (the flaky `sled_failure`
    /// test). Here the batch is committed for real, then the store is put back as a failed
    /// commit leaves it: the full-text index and the snapshot as before the batch, and the
    /// backend's record of the failure.
    #[test]
    fn a_failed_batch_sled_wrote_afterwards_is_taken_back_at_the_next_open() {
        let (tmp, dir, events) = a_small_world();
        let (kept, failed) = events.split_at(events.len() / 2);
        let store = Store::create(&dir, BackendKind::Sled).unwrap();
        store.ingest(kept.to_vec()).unwrap();
        let before = store.stats();
        let durable = store.last_seq();
        drop(store);
        let aside = tmp.path().join("aside");
        copy_dir(&dir.join(super::super::TEXT_DIR), &aside.join("text"));
        let snapshot = dir.join(super::super::snapshot::SNAPSHOT_FILE);
        let had_snapshot = snapshot.exists();
        if had_snapshot {
            std::fs::copy(&snapshot, aside.join("snapshot")).unwrap();
        }

        let store = Store::open(&dir).unwrap();
        store.ingest(failed.to_vec()).unwrap();
        let failed_last = store.last_seq();
        assert!(failed_last > durable);
        drop(store);
        std::fs::remove_dir_all(dir.join(super::super::TEXT_DIR)).unwrap();
        copy_dir(&aside.join("text"), &dir.join(super::super::TEXT_DIR));
        let _ = std::fs::remove_file(&snapshot);
        if had_snapshot {
            std::fs::copy(aside.join("snapshot"), &snapshot).unwrap();
        }
        let sled = BackendKind::Sled.path_in(&dir);
        let record = sled.join(format!("loci-failed-commit-v1-{durable}-{failed_last}"));
        std::fs::File::create(&record).unwrap();

        // A reader may not serve it, nor take it back.
        let refused = Store::open_read_only(&dir).err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains(&format!("a commit after event {durable} failed"))),
            "{refused:?}"
        );

        let store = Store::open(&dir).unwrap();
        let after = store.stats();
        assert_eq!(
            (after.events, after.nodes, after.edges),
            (before.events, before.nodes, before.edges)
        );
        assert_eq!(store.last_seq(), durable);
        assert!(store.event(durable + 1).unwrap().is_none());
        assert!(store.event(durable).unwrap().is_some());
        assert!(store.verify().unwrap().ok());
        assert!(!record.exists(), "the record of the failure stays");
        // The batch sent again is taken as new: its idempotency keys went with it.
        store.ingest(failed.to_vec()).unwrap();
        assert_eq!(store.last_seq(), failed_last);
        assert!(store.verify().unwrap().ok());
    }

    /// The record of a failed commit sled never wrote (the common case: the process ended
    /// without the drop's flush, or the disk stayed full) leaves the log as it is, and goes.
    #[test]
    fn a_failed_commit_sled_did_not_write_leaves_the_log_as_it_was() {
        let (_tmp, dir, events) = a_small_world();
        let store = Store::create(&dir, BackendKind::Sled).unwrap();
        store.ingest(events).unwrap();
        let (before, last) = (store.stats(), store.last_seq());
        drop(store);
        let sled = BackendKind::Sled.path_in(&dir);
        let record = sled.join(format!("loci-failed-commit-v1-{last}-{}", last + 40));
        std::fs::File::create(&record).unwrap();
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.stats().events, before.events);
        assert_eq!(store.last_seq(), last);
        assert!(store.verify().unwrap().ok());
        assert!(!record.exists());
    }
}
