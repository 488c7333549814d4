//! Rebuilding what the store derives from its log: the records beside it in the backend (the
//! time and episodic indexes, the idempotency keys, the counters, the deleted set, the folds),
//! the state's snapshot and the full-text index.
//!
//! The open does the backend's part when the derivation rules change
//! ([`Store::rebuild_derived`]); [`Store::repair`] does all of it on request, for a store
//! whose derived records were damaged (a flipped bit in `data.redb` moves one time-index
//! entry, and its event drops out of every timeline of its time). Only the log is read: a
//! damaged log record is refused, as by the open, and nothing is written.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{
    deleted_list, facet_keys, read_deleted, read_manifest, replay_log, time_key, Counters, Store,
    META_COUNTERS, META_DELETED, META_PROJECTION, META_SNAPSHOT_FLOOR, PROJECTION_VERSION,
};
use crate::codec::{decode, encode};
use crate::error::{Error, Result};
use crate::storage::{Backend, Table, WriteBatch};

/// What [`Store::repair`] found and rewrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RepairReport {
    /// Log records replayed.
    pub events_replayed: u64,
    /// Time-index entries removed or added (a misplaced entry counts twice: where it was,
    /// where it belongs).
    pub time_entries_fixed: usize,
    /// Episodic-index entries removed or added.
    pub facet_entries_fixed: usize,
    /// Idempotency keys removed, added or pointed at another event.
    pub idempotency_entries_fixed: usize,
    /// Whether the counters, the deleted set or the folds differed from the replay's.
    pub meta_fixed: bool,
}

impl RepairReport {
    /// Entries of the backend's derived records that were wrong.
    pub fn entries_fixed(&self) -> usize {
        self.time_entries_fixed + self.facet_entries_fixed + self.idempotency_entries_fixed
    }
}

/// Adds to `batch` what turns the keys of `table` (`stored`) into `expected`, both sorted and
/// without duplicates; gives how many keys change.
fn rewrite_keys(
    table: Table,
    stored: &[Vec<u8>],
    expected: &[Vec<u8>],
    batch: &mut WriteBatch,
) -> usize {
    let (mut i, mut j, mut changed) = (0, 0, 0);
    while i < stored.len() || j < expected.len() {
        match (stored.get(i), expected.get(j)) {
            (Some(s), Some(e)) if s == e => {
                i += 1;
                j += 1;
            }
            (Some(s), e) if e.is_none_or(|e| s < e) => {
                batch.delete(table, s.clone());
                i += 1;
                changed += 1;
            }
            (_, Some(e)) => {
                batch.put(table, e.clone(), Vec::new());
                j += 1;
                changed += 1;
            }
            (_, None) => break,
        }
    }
    changed
}

/// Every key and value of `table`, in key order.
fn table_entries(backend: &dyn Backend, table: Table) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    backend.scan(table, &[], None, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        Ok(true)
    })?;
    Ok(out)
}

impl Store {
    /// Rewrites what the backend derives from the log (the time and episodic indexes, the
    /// idempotency keys, the counters, the deleted set and the folds) by a replay under this
    /// build's rules, in one atomic batch that changes only the entries that differ, and
    /// records the rules' version. The graph itself is replayed by the open (a snapshot made
    /// under other rules is not used). Node and edge ids and the counters come out as
    /// before, since they are assigned by the same replay.
    pub(super) fn rebuild_derived(backend: &dyn Backend, dir: &Path) -> Result<RepairReport> {
        let mut times = Vec::new();
        let mut facets = Vec::new();
        // The first event to carry a key holds it, as when it was ingested (a later one was
        // skipped as a repeat, or is a tombstone keeping its deleted event's key).
        let mut keys: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let state = match replay_log(backend, |ev, deleted| {
            if !deleted {
                times.push(time_key(ev.ts, ev.seq).to_vec());
                facets.extend(facet_keys(ev));
            }
            if let Some(key) = &ev.idempotency_key {
                keys.entry(key.as_bytes().to_vec())
                    .or_insert_with(|| ev.seq.to_be_bytes().to_vec());
            }
        })? {
            Ok(state) => state,
            Err(msg) => {
                return Err(Error::Store {
                    path: dir.to_path_buf(),
                    message: format!("cannot rebuild the derived records from the log: {msg}"),
                })
            }
        };
        let mut report = RepairReport {
            events_replayed: state.counters.last_seq,
            ..RepairReport::default()
        };
        let mut batch = WriteBatch::default();
        for (table, expected, fixed) in [
            (Table::EventTime, &mut times, &mut report.time_entries_fixed),
            (
                Table::EventFacet,
                &mut facets,
                &mut report.facet_entries_fixed,
            ),
        ] {
            expected.sort_unstable();
            expected.dedup();
            let stored: Vec<Vec<u8>> = table_entries(backend, table)?
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            *fixed = rewrite_keys(table, &stored, expected, &mut batch);
        }
        let stored_keys: BTreeMap<Vec<u8>, Vec<u8>> = table_entries(backend, Table::Idempotency)?
            .into_iter()
            .collect();
        for k in stored_keys.keys().filter(|k| !keys.contains_key(*k)) {
            batch.delete(Table::Idempotency, k.clone());
            report.idempotency_entries_fixed += 1;
        }
        for (k, v) in keys {
            if stored_keys.get(&k) != Some(&v) {
                batch.put(Table::Idempotency, k, v);
                report.idempotency_entries_fixed += 1;
            }
        }
        // Compared as `replay --verify` compares them: by value (a store with nothing
        // deleted may have no deleted list stored at all).
        let stored_counters: Option<Counters> = backend
            .get(Table::Meta, META_COUNTERS)?
            .and_then(|v| decode("meta", &v).ok());
        report.meta_fixed |= stored_counters != Some(state.counters);
        report.meta_fixed |= read_deleted(backend).ok() != Some(state.deleted.clone());
        batch.put(Table::Meta, META_COUNTERS.to_vec(), encode(&state.counters));
        batch.put(
            Table::Meta,
            META_DELETED.to_vec(),
            encode(&deleted_list(&state)),
        );
        report.meta_fixed |= super::Folds::read(backend)
            .map(|f| !f.differences("stored", &state.folds, "replayed").is_empty())
            .unwrap_or(true);
        state.folds.put_all(&mut batch);
        batch.put(
            Table::Meta,
            META_PROJECTION.to_vec(),
            encode(&PROJECTION_VERSION),
        );
        batch.put(
            Table::Meta,
            META_SNAPSHOT_FLOOR.to_vec(),
            encode(&state.counters.last_seq),
        );
        backend.commit(batch)?;
        Ok(report)
    }

    /// Rebuilds everything derived from the log: the backend's derived records (only the
    /// entries that differ are rewritten; the report counts them), then the state, replayed
    /// from the log by the reopen in place of its snapshot, and the full-text index,
    /// rebuilt from the log. Consumes the handle and returns the reopened store; the writer
    /// lock is held throughout. What `replay --verify` compares comes out equal, unless the
    /// log itself is damaged: that is refused, and nothing is written.
    pub fn repair(self) -> Result<(Store, RepairReport)> {
        self.writable()?;
        self.flush_usage()?;
        let dir = self.dir.clone();
        let report = {
            let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            Self::rebuild_derived(&*self.backend, &dir)?
        };
        // Closing the handle releases the backend's files and the text index; the lock is
        // kept, so no other process opens the store before the reopen.
        let mut this = self;
        let lock = this.lock.take();
        drop(this);
        super::snapshot::remove(&dir)?;
        crate::text::clear_dir(&dir.join("text"))?;
        let manifest = read_manifest(&dir)?;
        let store = Store::open_with(dir, manifest, lock)?;
        if let Err(e) = store.checkpoint() {
            tracing::warn!(error = %e, "the state snapshot could not be written after the repair");
        }
        Ok((store, report))
    }
}
