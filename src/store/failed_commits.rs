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
use crate::storage::{seq_of_log_key, Backend, BackendKind, FailedCommit, Table, WriteBatch};

impl Store {
    /// Takes back the failed commits recorded beside the sled files of the store at `dir`,
    /// whose backend is `backend`, and says whether it changed the store: where the log ends
    /// with a failed batch's last entry ([`FailedCommit::ends`]), the events after the last
    /// one durable before it go, and what the backend derives from the log is rebuilt (also
    /// where the counters say another end than the log: a crash after the removal); then the
    /// records go. A log that ends anywhere else is left as it is: the failed batch never
    /// reached disk (the common case), or the log moved on since, by a build that does not
    /// read these records (the same events sent again are other records). A log that ends
    /// before an event a failed commit found durable lost committed events: refused, nothing
    /// changed. A crash part way leaves the records, and the next open goes on. A reader is
    /// refused only where the log ends with a failed batch, which it would serve.
    pub(super) fn take_back_failed_commits(
        backend: &dyn Backend,
        dir: &Path,
        read_only: bool,
    ) -> Result<bool> {
        let sled = BackendKind::Sled.path_in(dir);
        let recorded = FailedCommit::recorded_in(&sled)?;
        if recorded.is_empty() {
            return Ok(false);
        }
        let end = backend.last(Table::Log)?;
        let end = end.as_ref().map(|(k, v)| (k.as_slice(), v.as_slice()));
        let last = end.and_then(|(k, _)| seq_of_log_key(k)).unwrap_or(0);
        // Only a batch that appended says its `durable` was: a failed take-back's own removal
        // records the failed batch's end as durable.
        let lost = (recorded.iter())
            .filter(|(f, _)| f.failed_last > f.durable && f.durable > last)
            .map(|(f, _)| f.durable)
            .max();
        if let Some(durable) = lost {
            return Err(Error::Corrupt {
                table: Table::Log.name(),
                message: format!(
                    "{}: the log ends at event {last}, but a commit that failed later found \
                     events through {durable} durable: the log has lost committed events (a \
                     damaged file); loci changed nothing: restore the store from a backup",
                    sled.display()
                ),
            });
        }
        // Two records of one batch cannot both be right: the later durable event cuts less.
        let failed = (recorded.iter())
            .filter(|(f, _)| f.ends(end))
            .map(|(f, _)| *f)
            .max_by_key(|f| f.durable);
        if read_only {
            return match failed {
                Some(f) => Err(Error::Store {
                    path: dir.to_path_buf(),
                    message: format!(
                        "the log ends with events {}..={} of a commit that failed to reach \
                         disk, which sled wrote afterwards: the store must be opened for \
                         writing once (any write command, or `loci repair`) to take them back \
                         before it is read",
                        f.durable + 1,
                        f.failed_last
                    ),
                }),
                // What is on disk is what was committed; the records are a writer's to clear.
                None => Ok(false),
            };
        }
        let mut end_now = last;
        if let Some(f) = failed {
            tracing::warn!(
                durable = f.durable,
                failed_last = f.failed_last,
                "taking back the events of a commit that failed but that sled wrote afterwards"
            );
            remove_log_after(backend, f.durable)?;
            end_now = f.durable;
        }
        let counted = (backend.get(Table::Meta, super::META_COUNTERS)?)
            .map(|v| super::decode_meta::<crate::projection::Counters>(super::META_COUNTERS, &v))
            .transpose()?
            .map(|c| c.last_seq);
        let rebuilt = failed.is_some() || counted.is_some_and(|c| c != end_now);
        if rebuilt {
            Self::rebuild_derived(backend, dir)?;
        }
        // Before the records go, so that a crash after a removal still comes here. Only as far
        // as a failed batch after the log's end explains: an index further ahead is a log that
        // lost committed events, which the open refuses.
        let explained = (recorded.iter())
            .filter(|(f, _)| f.failed_last > f.durable && f.durable == end_now)
            .map(|(f, _)| f.failed_last)
            .max();
        if let Some(failed_last) = explained {
            text_index_within(dir, end_now, failed_last)?;
        }
        for (_, file) in &recorded {
            match std::fs::remove_file(file) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(file, e)),
            }
        }
        if let Ok(d) = std::fs::File::open(&sled) {
            // Best effort: a record back after a crash finds the log no longer ending with its
            // batch (the same events sent again are other records), and goes again.
            let _ = d.sync_all();
        }
        Ok(rebuilt)
    }
}

/// Empties the full-text index of the store at `dir` where it holds events after `end`, the
/// log's end, through `failed_last` at most, for the open to make it again from the log: a
/// build that does not read the
/// records of failed commits, opening the store after sled wrote a failed batch, indexed the
/// batch's text, and the open after the take-back refused the store as one whose log had lost
/// committed events (helper-144). Where the index cannot be read, the open rebuilds it anyway.
fn text_index_within(dir: &Path, end: u64, failed_last: u64) -> Result<()> {
    let text_dir = dir.join(super::TEXT_DIR);
    let indexed = match crate::text::TextIndex::open(&text_dir) {
        Ok((_, indexed)) => indexed,
        Err(_) => return Ok(()),
    };
    if indexed.is_some_and(|at| at > end && at <= failed_last) {
        tracing::warn!(
            indexed = indexed.unwrap_or_default(),
            end,
            "the full-text index holds a failed batch's events: made again from the log"
        );
        crate::text::clear_dir(&text_dir)?;
    }
    Ok(())
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

    /// A sled store of a small world's events, closed: its directories, its log's last event
    /// and its counts.
    fn a_sled_store_of_a_small_world() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        u64,
        crate::store::Stats,
    ) {
        let (tmp, dir, events) = a_small_world();
        let store = Store::create(&dir, BackendKind::Sled).unwrap();
        store.ingest(events).unwrap();
        (tmp, dir, store.last_seq(), store.stats())
    }

    /// Records `failed` in the store at `dir`, whose open must then refuse it, saying `said`.
    /// Returns the record's path.
    fn recorded_then_refused(dir: &Path, failed: FailedCommit, said: &str) -> std::path::PathBuf {
        let record = BackendKind::Sled.path_in(dir).join(failed.file_name());
        std::fs::File::create(&record).unwrap();
        let refused = Store::open(dir).err().map(|e| e.to_string());
        assert!(
            refused.as_deref().is_some_and(|e| e.contains(said)),
            "{refused:?}"
        );
        record
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

    /// Opens the store at `dir` for writing, which must find its log ending at `last` and
    /// consistent, and `record` gone.
    fn opens_as_it_was(dir: &Path, last: u64, record: &Path) -> Store {
        let store = Store::open(dir).unwrap();
        assert_eq!(store.last_seq(), last);
        assert!(store.verify().unwrap().ok());
        assert!(!record.exists(), "the record stays");
        store
    }

    /// The record a commit that failed after event `durable` would leave, had it appended what
    /// the log of `store` now ends with.
    fn record_of_the_log_end(store: &Store, durable: u64) -> std::path::PathBuf {
        let (_, last_entry) = store.backend.last(Table::Log).unwrap().unwrap();
        let failed = FailedCommit {
            durable,
            failed_last: store.last_seq(),
            last_record: crc32fast::hash(&last_entry),
        };
        BackendKind::Sled
            .path_in(&store.dir)
            .join(failed.file_name())
    }

    /// A sled store with the first half of a small world committed, then the second half
    /// committed for real and the store put back as a commit of it that failed, and that sled
    /// wrote afterwards, leaves it: the full-text index (unless `indexed`: a build that does
    /// not read the records opened it since) and the snapshot as before the batch, and the
    /// backend's record of the failure. Returns the directories, the two halves, the counts
    /// before the batch and its record.
    #[allow(clippy::type_complexity)]
    fn a_failed_batch_on_disk(
        indexed: bool,
    ) -> (
        tempfile::TempDir,
        std::path::PathBuf,
        (Vec<crate::model::EventDraft>, Vec<crate::model::EventDraft>),
        crate::store::Stats,
        std::path::PathBuf,
    ) {
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
        assert!(store.last_seq() > durable);
        let record = record_of_the_log_end(&store, durable);
        drop(store);
        if !indexed {
            std::fs::remove_dir_all(dir.join(super::super::TEXT_DIR)).unwrap();
            copy_dir(&aside.join("text"), &dir.join(super::super::TEXT_DIR));
        }
        let _ = std::fs::remove_file(&snapshot);
        if had_snapshot {
            std::fs::copy(aside.join("snapshot"), &snapshot).unwrap();
        }
        std::fs::File::create(&record).unwrap();
        (tmp, dir, (kept.to_vec(), failed.to_vec()), before, record)
    }

    /// sled wrote a batch whose flush had failed once the disk had room again, when the failed
    /// handle was dropped: the next open served it as committed (the flaky `sled_failure`
    /// test).
    #[test]
    fn a_failed_batch_sled_wrote_afterwards_is_taken_back_at_the_next_open() {
        let (_tmp, dir, (_, failed), before, record) = a_failed_batch_on_disk(false);
        // A reader may not serve it, nor take it back.
        let refused = Store::open_read_only(&dir).err().map(|e| e.to_string());
        let said = format!("the log ends with events {}..=", before.events + 1);
        assert!(
            refused.as_deref().is_some_and(|e| e.contains(&said)),
            "{refused:?}"
        );

        let store = Store::open(&dir).unwrap();
        let after = store.stats();
        assert_eq!(
            (after.events, after.nodes, after.edges),
            (before.events, before.nodes, before.edges)
        );
        assert_eq!(store.last_seq(), before.events);
        assert!(store.event(before.events + 1).unwrap().is_none());
        assert!(store.event(before.events).unwrap().is_some());
        assert!(store.verify().unwrap().ok());
        assert!(!record.exists(), "the record of the failure stays");
        // The batch sent again is taken as new: its idempotency keys went with it.
        store.ingest(failed.clone()).unwrap();
        assert_eq!(store.last_seq(), before.events + failed.len() as u64);
        assert!(store.verify().unwrap().ok());
    }

    /// An older build opened the store after sled wrote the failed batch and indexed its
    /// text: the take-back left the index ahead of the log, and the open refused the store as
    /// one whose log had lost committed events, "loci changed nothing" (helper-144).
    #[test]
    fn a_failed_batch_an_older_build_indexed_is_taken_back_with_its_text() {
        let (_tmp, dir, (_, failed), before, record) = a_failed_batch_on_disk(true);
        // `verify` compares the full-text index with the log too.
        let store = opens_as_it_was(&dir, before.events, &record);
        store.ingest(failed).unwrap();
        assert!(store.verify().unwrap().ok());
    }

    /// A full-text index further ahead than a failed batch explains is a log that lost
    /// committed events: left for the open to refuse, not emptied.
    #[test]
    fn an_index_ahead_of_what_a_failed_batch_explains_is_still_refused() {
        let (_tmp, dir, last, _) = a_sled_store_of_a_small_world();
        let lost_from = last - 10;
        {
            let backend = BackendKind::Sled.open_existing(&dir, false).unwrap();
            remove_log_after(&*backend, lost_from).unwrap();
        }
        let explains_two = FailedCommit {
            durable: lost_from,
            failed_last: lost_from + 2,
            last_record: 0,
        };
        let said = format!("the full-text index holds events through {last}");
        recorded_then_refused(&dir, explains_two, &said);
    }

    /// The same events sent again after a take-back get the same numbers: a record of the
    /// failure left behind (its removal lost in a crash, or a build that does not read the
    /// records took the events) must not take the acknowledged ones back (helper-143,
    /// helper-142: the log was cut to the failed commit's `durable`).
    #[test]
    fn a_record_left_behind_does_not_take_back_the_same_events_sent_again() {
        let (_tmp, dir, (_, failed), before, record) = a_failed_batch_on_disk(false);
        let store = Store::open(&dir).unwrap();
        store.ingest(failed.clone()).unwrap();
        let acknowledged = store.last_seq();
        assert_eq!(acknowledged, before.events + failed.len() as u64);
        drop(store);
        std::fs::File::create(&record).unwrap();
        opens_as_it_was(&dir, acknowledged, &record);
    }

    /// The record of a failed commit sled never wrote (the common case: the process ended
    /// without the drop's flush, or the disk stayed full) leaves the log as it is, and goes;
    /// a reader reads the store meanwhile.
    #[test]
    fn a_failed_commit_sled_did_not_write_leaves_the_log_as_it_was() {
        let (_tmp, dir, last, before) = a_sled_store_of_a_small_world();
        let never_written = FailedCommit {
            durable: last,
            failed_last: last + 40,
            last_record: 7,
        };
        let sled = BackendKind::Sled.path_in(&dir);
        let record = sled.join(never_written.file_name());
        std::fs::File::create(&record).unwrap();
        let reader = Store::open_read_only(&dir).unwrap();
        assert_eq!(reader.last_seq(), last);
        drop(reader);
        assert!(record.exists(), "a reader clears no record");
        let store = opens_as_it_was(&dir, last, &record);
        assert_eq!(store.stats().events, before.events);
    }

    /// A log that ends before an event a failed commit found durable lost committed events:
    /// the open refuses, and changes nothing (the record stays for a look).
    #[test]
    fn a_log_shorter_than_a_failed_commit_found_durable_is_refused_unchanged() {
        let (_tmp, dir, last, _) = a_sled_store_of_a_small_world();
        let beyond = FailedCommit {
            durable: last + 5,
            failed_last: last + 9,
            last_record: 1,
        };
        let said = format!("the log ends at event {last}, but a commit that failed later");
        let record = recorded_then_refused(&dir, beyond, &said);
        assert!(record.exists());
        std::fs::remove_file(&record).unwrap();
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.last_seq(), last);
    }

    /// Only the names the backend makes are records: another spelling of the numbers, or a
    /// directory under a record's name, is not one (helper-142: `+49-50` acted as `49-50`,
    /// and a directory stopped every open).
    #[test]
    fn only_the_names_the_backend_makes_are_records_of_failed_commits() {
        let made = FailedCommit {
            durable: 49,
            failed_last: 50,
            last_record: 0xab,
        };
        assert_eq!(made.file_name(), "loci-failed-commit-v1-49-50-000000ab");
        assert_eq!(FailedCommit::from_file_name(&made.file_name()), Some(made));
        for other in [
            "loci-failed-commit-v1-+49-50-000000ab",
            "loci-failed-commit-v1-049-50-000000ab",
            "loci-failed-commit-v1-49-50-ab",
            "loci-failed-commit-v1-49-50",
            "loci-failed-commit-v1-49-50-000000ab-1",
            "loci-failed-commit-v2-49-50-000000ab",
        ] {
            assert_eq!(FailedCommit::from_file_name(other), None, "{other}");
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join(made.file_name())).unwrap();
        assert!(FailedCommit::recorded_in(tmp.path()).unwrap().is_empty());
    }
}
