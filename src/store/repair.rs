//! Rebuilding what the store derives from its log: the records beside it in the backend (the
//! time and episodic indexes, the idempotency keys, the counters, the deleted set, the folds),
//! the state's snapshot and the full-text index.
//!
//! The open rebuilds the backend's part in place when the derivation rules change
//! ([`Store::rebuild_derived`]). [`Store::repair`] does all of it on request, for a store
//! whose derived records were damaged (a flipped bit in `data.redb` moves one time-index
//! entry, and its event drops out of every timeline of its time), and into fresh backend
//! files: edits made through a damaged B-tree page land where the damage says, and a
//! repair made so found as many entries wrong each time it ran. Only the log and the meta
//! table are read from the old files; a damaged log record is refused, as by the open, and
//! nothing is changed. The swap is `compact`'s, and as safe against a crash.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::deleting::{fresh_files_dir, swap_in_and_reopen};
use super::{
    deleted_list, read_deleted, replay_log, table_keys, Counters, Folds, LogRecords, State, Store,
    META_COUNTERS, META_DELETED, META_IDS_FLOOR, META_PROJECTION, META_SNAPSHOT_FLOOR,
    PROJECTION_VERSION,
};
use crate::codec::{decode, encode};
use crate::error::{Error, Result};
use crate::storage::{Backend, BackendKind, StoreLock, Table, WriteBatch};

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
    /// The derived table the old files could not be read through (damaged): rebuilt without
    /// a count of what was wrong in it.
    pub unreadable: Vec<String>,
    /// What was not compared after it (a backend that panicked refuses every later read):
    /// rebuilt all the same.
    pub not_compared: Vec<String>,
    /// Whether the store's manifest (`loci.json`), gone or damaged, was written again from
    /// its log's meta table.
    pub manifest_written: bool,
    /// The backend's own files that failed their checksums, which the old files were read
    /// without (sled's `conf` and its snapshot, `snap.*`: it does without both, and writes
    /// them anew).
    pub read_without: Vec<String>,
}

impl RepairReport {
    /// Entries of the backend's derived records that were wrong.
    pub fn entries_fixed(&self) -> usize {
        self.time_entries_fixed + self.facet_entries_fixed + self.idempotency_entries_fixed
    }
}

/// Walks the sorted, duplicate-free key lists `stored` and `expected` together, calling
/// `change(key, in_expected)` for each key in one and not the other; gives how many.
fn differing<A: AsRef<[u8]>, B: AsRef<[u8]>>(
    stored: &[A],
    expected: &[B],
    mut change: impl FnMut(&[u8], bool),
) -> usize {
    let (mut i, mut j, mut changed) = (0, 0, 0);
    loop {
        match (stored.get(i).map(A::as_ref), expected.get(j).map(B::as_ref)) {
            (Some(s), Some(e)) if s == e => {
                i += 1;
                j += 1;
                continue;
            }
            (Some(s), e) if e.is_none_or(|e| s < e) => {
                change(s, false);
                i += 1;
            }
            (_, Some(e)) => {
                change(e, true);
                j += 1;
            }
            (_, None) => return changed,
        }
        changed += 1;
    }
}

/// The stored idempotency keys (`stored`: key -> sequence number, big-endian) against the
/// log's: calls `change(key, Some(seq))` for each key to be (re)written and `change(key, None)`
/// for each to go; gives how many.
fn differing_keys(
    stored: &BTreeMap<Vec<u8>, Vec<u8>>,
    expected: &BTreeMap<String, u64>,
    mut change: impl FnMut(&[u8], Option<u64>),
) -> usize {
    let mut changed = 0;
    for k in stored.keys() {
        if std::str::from_utf8(k).map_or(true, |k| !expected.contains_key(k)) {
            change(k, None);
            changed += 1;
        }
    }
    for (k, seq) in expected {
        if stored.get(k.as_bytes()).map(Vec::as_slice) != Some(&seq.to_be_bytes()[..]) {
            change(k.as_bytes(), Some(*seq));
            changed += 1;
        }
    }
    changed
}

/// Puts key `k` (with no value) into an index table, or deletes it, as `add` says.
fn put_or_delete(batch: &mut WriteBatch, table: Table, k: &[u8], add: bool) {
    if add {
        batch.put(table, k, Vec::new());
    } else {
        batch.delete(table, k);
    }
}

/// Every key and value of `table`, in key order.
fn table_entries(backend: &dyn Backend, table: Table) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut out = BTreeMap::new();
    backend.scan(table, &[], None, &mut |k, v| {
        out.insert(k.to_vec(), v.to_vec());
        Ok(true)
    })?;
    Ok(out)
}

/// What a replay of the log derives for the backend's tables.
struct Derived {
    state: State,
    /// Sorted ([`LogRecords::sort`]).
    records: LogRecords,
}

/// The parts of the derived records [`Derived::compare`] reads, in order.
#[derive(Clone, Copy)]
enum Part {
    Times,
    Facets,
    Keys,
    /// The counters, the deleted set and the folds.
    Meta,
}

impl Part {
    const ALL: [Part; 4] = [Part::Times, Part::Facets, Part::Keys, Part::Meta];

    fn name(self) -> &'static str {
        match self {
            Part::Times => Table::EventTime.name(),
            Part::Facets => Table::EventFacet.name(),
            Part::Keys => Table::Idempotency.name(),
            Part::Meta => "meta",
        }
    }
}

impl Derived {
    fn replay(backend: &dyn Backend, dir: &Path) -> Result<Derived> {
        let mut records = LogRecords::default();
        let state = match replay_log(backend, |ev, deleted| records.see(ev, deleted))? {
            Ok(state) => state,
            Err(msg) => {
                return Err(Error::Store {
                    path: dir.to_path_buf(),
                    message: format!("cannot rebuild the derived records from the log: {msg}"),
                })
            }
        };
        records.sort();
        Ok(Derived { state, records })
    }

    /// How `backend`'s derived records differ from these. The first part that cannot be read
    /// (damaged) is listed as unreadable, and what comes after it as not compared.
    fn compare(&self, backend: &dyn Backend) -> RepairReport {
        let mut report = RepairReport {
            events_replayed: self.state.counters.last_seq,
            ..RepairReport::default()
        };
        for (i, part) in Part::ALL.into_iter().enumerate() {
            if let Err(_unreadable) = self.compare_part(backend, part, &mut report) {
                report.unreadable.push(part.name().to_string());
                report.not_compared = Part::ALL[i + 1..]
                    .iter()
                    .map(|p| p.name().to_string())
                    .collect();
                break;
            }
        }
        report
    }

    /// [`Derived::compare`] of one part (`Meta` compared by value as `replay --verify`
    /// compares it: a store with nothing deleted may have no deleted list stored at all).
    fn compare_part(
        &self,
        backend: &dyn Backend,
        part: Part,
        report: &mut RepairReport,
    ) -> Result<()> {
        let records = &self.records;
        let no_change = |_: &[u8], _| {};
        match part {
            Part::Times => {
                report.time_entries_fixed = differing(
                    &table_keys(backend, Table::EventTime)?,
                    &records.times,
                    no_change,
                );
            }
            Part::Facets => {
                report.facet_entries_fixed = differing(
                    &table_keys(backend, Table::EventFacet)?,
                    &records.facets,
                    no_change,
                );
            }
            Part::Keys => {
                report.idempotency_entries_fixed = differing_keys(
                    &table_entries(backend, Table::Idempotency)?,
                    &records.keys,
                    |_, _| {},
                );
            }
            Part::Meta => {
                let stored_counters: Option<Counters> = backend
                    .get(Table::Meta, META_COUNTERS)?
                    .and_then(|v| decode("meta", &v).ok());
                let stored_floor: Option<u64> = match backend.get(Table::Meta, META_IDS_FLOOR)? {
                    Some(v) => decode("meta", &v).ok(),
                    None => Some(0),
                };
                report.meta_fixed = stored_counters != Some(self.state.counters)
                    || stored_floor != Some(records.last_deletion)
                    || read_deleted(backend).ok() != Some(self.state.deleted.clone())
                    || !Folds::read(backend)?
                        .differences("stored", &self.state.folds, "replayed")
                        .is_empty();
            }
        }
        Ok(())
    }

    /// The meta entries derived from the log: counters, the deleted set, the folds, the
    /// rules' version, the snapshot floor and the ids floor (the last deletion).
    fn put_meta(&self, batch: &mut WriteBatch) {
        let state = &self.state;
        match self.records.last_deletion {
            0 => batch.delete(Table::Meta, META_IDS_FLOOR),
            seq => batch.put(Table::Meta, META_IDS_FLOOR, encode(&seq)),
        }
        batch.put(Table::Meta, META_COUNTERS, encode(&state.counters));
        batch.put(Table::Meta, META_DELETED, encode(&deleted_list(state)));
        state.folds.put_all(batch);
        batch.put(Table::Meta, META_PROJECTION, encode(&PROJECTION_VERSION));
        batch.put(
            Table::Meta,
            META_SNAPSHOT_FLOOR,
            encode(&state.counters.last_seq),
        );
    }
}

impl Store {
    /// Rewrites what the backend derives from the log (the time and episodic indexes, the
    /// idempotency keys, the counters, the deleted set and the folds) by a replay under this
    /// build's rules, in one atomic batch that changes only the entries that differ, and
    /// records the rules' version. The graph itself is replayed by the open (a snapshot made
    /// under other rules is not used). Node and edge ids and the counters come out as
    /// before, since they are assigned by the same replay.
    pub(super) fn rebuild_derived(backend: &dyn Backend, dir: &Path) -> Result<()> {
        let derived = Derived::replay(backend, dir)?;
        let records = &derived.records;
        let mut batch = WriteBatch::default();
        differing(
            &table_keys(backend, Table::EventTime)?,
            &records.times,
            |k, add| put_or_delete(&mut batch, Table::EventTime, k, add),
        );
        differing(
            &table_keys(backend, Table::EventFacet)?,
            &records.facets,
            |k, add| put_or_delete(&mut batch, Table::EventFacet, k, add),
        );
        differing_keys(
            &table_entries(backend, Table::Idempotency)?,
            &records.keys,
            |k, seq| match seq {
                Some(seq) => batch.put(Table::Idempotency, k, seq.to_be_bytes().to_vec()),
                None => batch.delete(Table::Idempotency, k),
            },
        );
        derived.put_meta(&mut batch);
        backend.commit(batch)
    }

    /// Rebuilds everything derived from the log: fresh backend files with the log and meta
    /// table copied and every derived record written from a replay of the log (the report
    /// counts what the old files had wrong), swapped in as `compact` swaps; then the state,
    /// replayed from the log by the reopen in place of its snapshot, and the full-text
    /// index, rebuilt from the log. Consumes the handle and returns the reopened store; the
    /// writer lock is held throughout. What `replay --verify` compares comes out equal,
    /// unless the log itself is damaged: that is refused, and nothing is changed.
    pub fn repair(self) -> Result<(Store, RepairReport)> {
        self.writable()?;
        self.flush_usage()?;
        let dir = self.dir.clone();
        let kind = self.backend.kind();
        let written = {
            let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            write_fresh_files(&*self.backend, kind, &dir)
        };
        let report = written?;
        // Closing the handle releases the backend's files and the text index; the lock is
        // kept, so no other process opens the store before the reopen.
        let mut this = self;
        let lock = this.lock.take();
        drop(this);
        Ok((swap_in_and_reopen(&dir, kind, lock, "the repair")?, report))
    }

    /// [`Store::repair`] of the store at `dir`, which it does not open first: an open reads
    /// records derived from the log (the counters, the deleted set, the folds), and one of
    /// them damaged stopped every open, though repair writes each of them afresh from the
    /// log. The writer lock is taken as an open takes it, and held throughout. A manifest
    /// gone or damaged is written again from the meta table of the files read
    /// ([`RepairReport::manifest_written`]).
    pub fn repair_at(dir: impl AsRef<Path>) -> Result<(Store, RepairReport)> {
        let dir = dir.as_ref();
        // Only a manifest that does not read is written again: any other failure to open
        // (a lock held) is said as it is.
        let (kind, lock, unread) = match super::read_manifest(dir) {
            Ok(_) => {
                let (manifest, lock) = Store::take_for_writing(dir, StoreLock::acquire)?;
                (manifest.backend, lock, None)
            }
            Err(unread) => {
                let (kind, lock, unread) = take_without_manifest(dir, unread)?;
                (kind, lock, Some(unread))
            }
        };
        let old = OldFiles::open(dir, kind)?;
        // What the manifest says, from the meta table of the files read: where it does not
        // say it, the manifest's own error stands.
        let manifest = match unread {
            Some(unread) => match recorded_manifest(old.backend(), kind)? {
                Some(manifest) => Some(manifest),
                // Files of no event and no format: a creation killed before it wrote them
                // (helper-151: the manifest's advice, which led here, was given again).
                None if old.backend().last(Table::Log)?.is_none() => {
                    return Err(Error::NotAStore {
                        path: dir.to_path_buf(),
                        reason: format!(
                            "no readable {} and its log holds no event and no format (a creation cut short); create the store again with `loci init`",
                            super::MANIFEST
                        ),
                    })
                }
                None => return Err(unread),
            },
            None => None,
        };
        let report = write_fresh_files(old.backend(), kind, dir)?;
        // The copy goes before the swap: a kill during the reopen, which rebuilds the text
        // index, had left a copy of the whole log behind for good (helper-151).
        let read_without = old.close();
        if let Some(manifest) = &manifest {
            super::write_manifest(dir, manifest)?;
            tracing::info!(
                format = manifest.format,
                backend = kind.name(),
                "the store's manifest was gone or damaged: written again from its log's meta table"
            );
        }
        let report = RepairReport {
            manifest_written: manifest.is_some(),
            read_without,
            ..report
        };
        let store = swap_in_and_reopen(dir, kind, Some(lock), "the repair")?;
        Ok((store, report))
    }
}

/// The backend files a repair reads: the store's own, or, for a sled store whose own
/// snapshot or conf stops every open, a copy of them without those
/// ([`open_sled_without_damaged_files`]), removed when this is dropped. A failed commit sled
/// wrote after all is taken back from them.
struct OldFiles {
    // Dropped in this order: sled holds the copy's files open until its handle goes.
    backend: Box<dyn Backend>,
    copy: ScratchCopy,
    read_without: Vec<String>,
}

/// A directory of scratch files, removed when this is dropped (a kill leaves it: the next
/// open for writing removes it, [`remove_stray_copies`]).
struct ScratchCopy(Option<std::path::PathBuf>);

impl Drop for ScratchCopy {
    fn drop(&mut self) {
        if let Some(copy) = self.0.take() {
            let _ = std::fs::remove_dir_all(copy);
        }
    }
}

impl OldFiles {
    fn open(dir: &Path, kind: BackendKind) -> Result<OldFiles> {
        let old = match kind.open_existing(dir, false) {
            Err(e) if kind == BackendKind::Sled && e.reports_damage() => {
                let (backend, read_without, copy) = open_sled_without_damaged_files(dir, e)?;
                OldFiles {
                    backend,
                    copy: ScratchCopy(Some(copy)),
                    read_without,
                }
            }
            opened => OldFiles {
                backend: opened?,
                copy: ScratchCopy(None),
                read_without: Vec::new(),
            },
        };
        if kind == BackendKind::Sled {
            // From the copy's records when it is read: the store's own go with its files at
            // the swap. Taken from the store's directory while the batch was taken back
            // from the copy, a repair killed before the swap left the store's log ending
            // with the failed batch and nothing that said so: it was served as committed
            // (helper-151).
            let records_in = old.copy.0.as_deref().unwrap_or(dir);
            Store::take_back_failed_commits(&*old.backend, records_in, false)?;
        }
        Ok(old)
    }

    fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    /// Closes the files and removes the copy; gives the files the copy left out.
    fn close(self) -> Vec<String> {
        let OldFiles {
            backend,
            copy,
            read_without,
        } = self;
        drop(backend);
        drop(copy);
        read_without
    }
}

/// Removes what a repair killed part way left of its copy of sled's files: an open for
/// writing, which a repair's swap is not under way beside, calls it. (`sled-without-snapshot`
/// is the name a build of 7 Dec gave it.)
pub(super) fn remove_stray_copies(dir: &Path) {
    for name in [SLED_COPY, "sled-without-snapshot"] {
        let stray = dir.join(name);
        if stray.is_dir() {
            tracing::warn!(path = %stray.display(), "removing the copy of sled's files a repair cut short left");
            if let Err(e) = std::fs::remove_dir_all(&stray) {
                tracing::warn!(error = %e, "the copy could not be removed");
            }
        }
    }
}

/// The store at `dir` whose manifest did not read (`unread`), for a repair that writes it
/// again: its backend, told by the one backend's log there, and its writer lock, with what
/// an open for writing recovers first. `unread` is returned when the manifest is not one to
/// write again: one of a later format (a later build's), or a directory with both backends'
/// logs or the unfinished file of a creation cut short; and given back otherwise, for when
/// the meta table does not say what the manifest would.
fn take_without_manifest(dir: &Path, unread: Error) -> Result<(BackendKind, StoreLock, Error)> {
    let rewritable = match super::manifest_bytes(&dir.join(super::MANIFEST)) {
        Ok(raw) => super::rewritable(&raw),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    let logs: Vec<_> = BackendKind::present_in(dir).collect();
    let [(kind, log)] = logs.as_slice() else {
        return Err(unread);
    };
    if !rewritable
        || (*kind == BackendKind::Redb && super::unfinished_redb(dir, log))
        || (*kind == BackendKind::Sled && super::unfinished_sled(dir, log))
    {
        return Err(unread);
    }
    let lock = StoreLock::acquire(dir)?;
    super::deleting::recover_compaction(dir, *kind)?;
    super::snapshot::remove_unfinished(dir);
    remove_stray_copies(dir);
    Ok((*kind, lock, unread))
}

/// The manifest the meta table of `backend`'s files records, when it names `kind` and a
/// format this build reads.
fn recorded_manifest(backend: &dyn Backend, kind: BackendKind) -> Result<Option<super::Manifest>> {
    let read = |key: &[u8]| backend.get(Table::Meta, key);
    let format: Option<u32> = read(super::META_FORMAT)?
        .map(|v| decode(Table::Meta.name(), &v))
        .transpose()?;
    let recorded: Option<BackendKind> = read(super::META_BACKEND)?
        .map(|v| decode(Table::Meta.name(), &v))
        .transpose()?;
    Ok(match (format, recorded) {
        (Some(format), Some(backend))
            if backend == kind
                && (super::OLDEST_STORE_FORMAT..=super::STORE_FORMAT).contains(&format) =>
        {
            Some(super::Manifest { format, backend })
        }
        _ => None,
    })
}

/// The sled store at `dir`, which would not open (`damage`), read without the files of
/// sled's own that fail their checksums, its snapshot and its `conf`, when one does (and only
/// then: damage elsewhere is `damage`). A damaged `snap.*` (sled's page table as of a point of
/// its log) or `conf` (its settings, loci's always sled's defaults) had stopped every open,
/// the repair's too, where the log was whole (helper-148). sled, opened without them, reads
/// its log whole and writes the conf anew, and writes while it does (it mends the log's
/// tail): so it opens a copy of its files, less those, in [`SLED_COPY`] beside them, and the
/// store's own files are not touched before the repair's swap. The copy is refused when its
/// log ends before the event the store's state snapshot reflects: sled's recovery passed
/// over records. Gives the files left out, as [`RepairReport::read_without`] says them, and
/// the copy's directory, to be removed once the repair is done.
fn open_sled_without_damaged_files(
    dir: &Path,
    damage: Error,
) -> Result<(Box<dyn Backend>, Vec<String>, std::path::PathBuf)> {
    let sled_dir = BackendKind::Sled.path_in(dir);
    let leave_out = LeftOut {
        snapshot: crate::storage::sled_snapshot_checksum_fails(&sled_dir),
        conf: crate::storage::sled_conf_is_not_locis(&sled_dir),
    };
    if !leave_out.snapshot && !leave_out.conf {
        return Err(damage);
    }
    let copy = dir.join(SLED_COPY);
    let opened = copy_leaving_out(&sled_dir, &BackendKind::Sled.path_in(&copy), &leave_out)
        .and_then(|()| BackendKind::Sled.open_existing(&copy, false))
        .and_then(|backend| {
            let counters: Option<Counters> = backend
                .get(Table::Meta, META_COUNTERS)?
                .map(|v| decode(Table::Meta.name(), &v))
                .transpose()?;
            let log_end = counters.map_or(0, |c| c.last_seq);
            match super::snapshot::reflected_seq(dir) {
                Some(reflected) if reflected > log_end => Err(Error::Store {
                    path: dir.to_path_buf(),
                    message: format!(
                        "sled's own files are damaged, and its log read without them ends at \
                         event {log_end}, where the store's state snapshot reflects event \
                         {reflected}: records went with them; the store needs its files from \
                         a backup (nothing was changed)"
                    ),
                }),
                _ => Ok(backend),
            }
        });
    match opened {
        Ok(backend) => {
            let names = leave_out.names();
            tracing::warn!(
                files = names.join(", "),
                "sled's own files fail their checksums: its log is read whole, from a copy of \
                 its files without them"
            );
            Ok((backend, names, copy))
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&copy);
            // The copy's own failure (no room for it, or to open it) is said as it is;
            // sled's finding the copy damaged is the damage found first.
            Err(if e.reports_damage() { damage } else { e })
        }
    }
}

/// Where [`open_sled_without_damaged_files`] copies sled's files to, in the store directory.
const SLED_COPY: &str = "sled-copy-for-repair";

/// Which of sled's own files a copy of them leaves out.
struct LeftOut {
    /// Its snapshot (`snap.*`).
    snapshot: bool,
    /// Its `conf`.
    conf: bool,
}

impl LeftOut {
    /// The files left out, as the repair's report names them.
    fn names(&self) -> Vec<String> {
        [(self.conf, "conf"), (self.snapshot, "snap.*")]
            .into_iter()
            .filter(|(left, _)| *left)
            .map(|(_, name)| name.to_string())
            .collect()
    }
}

/// Copies sled's directory `from` to `to`, but for the files `leave_out` names.
fn copy_leaving_out(from: &Path, to: &Path, leave_out: &LeftOut) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    if to.exists() {
        std::fs::remove_dir_all(to).map_err(io(to))?;
    }
    std::fs::create_dir_all(to).map_err(io(to))?;
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let name = entry.file_name();
        let path = entry.path();
        let named = name.to_string_lossy();
        if leave_out.snapshot && named.starts_with("snap.") || leave_out.conf && named == "conf" {
            continue;
        }
        // Followed: a link to a file elsewhere is copied as the file it names.
        let file_type = std::fs::metadata(&path).map_err(io(&path))?.file_type();
        if file_type.is_dir() {
            // sled's `blobs` directory holds neither.
            let nothing = LeftOut {
                snapshot: false,
                conf: false,
            };
            copy_leaving_out(&path, &to.join(&name), &nothing)?;
        } else if file_type.is_file() {
            // The copy's path: it is the copy that a full disk stops.
            let target = to.join(&name);
            std::fs::copy(&path, &target).map_err(io(&target))?;
        } else {
            // A FIFO would hold the copy for ever (helper-151), a device read on.
            return Err(Error::Store {
                path: path.clone(),
                message: "not a regular file, in sled's directory of files: move it away".into(),
            });
        }
    }
    Ok(())
}

/// Writes the repaired backend files into the compaction directory ([`write_repaired`]); on
/// a failure removes them, and the store stays as it was.
fn write_fresh_files(old: &dyn Backend, kind: BackendKind, dir: &Path) -> Result<RepairReport> {
    let tmp = fresh_files_dir(dir)?;
    let written = kind
        .open(&tmp)
        .and_then(|fresh| write_repaired(old, &*fresh, dir));
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    written
}

/// Rows per commit into the fresh files.
const COPY_BATCH: usize = 20_000;

/// Writes into `fresh` the log and meta table of `old` and every derived record as a replay
/// of the log gives it; counts what `old`'s derived records had wrong, where they can be
/// read.
fn write_repaired(old: &dyn Backend, fresh: &dyn Backend, dir: &Path) -> Result<RepairReport> {
    let derived = Derived::replay(old, dir)?;
    let mut batch = WriteBatch::default();
    let flush = |batch: &mut WriteBatch, at_end: bool| -> Result<()> {
        if at_end || batch.len() >= COPY_BATCH {
            fresh.commit(std::mem::take(batch))?;
        }
        Ok(())
    };
    for table in [Table::Meta, Table::Log] {
        // Raw entries, a long record's chunks as they are.
        let mut failed = None;
        old.scan(table, &[], None, &mut |k, v| {
            batch.put(table, k, v.to_vec());
            if let Err(e) = flush(&mut batch, false) {
                failed = Some(e);
                return Ok(false);
            }
            Ok(true)
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    derived.put_meta(&mut batch);
    let records = &derived.records;
    for k in &records.times {
        batch.put(Table::EventTime, k, Vec::new());
        flush(&mut batch, false)?;
    }
    for k in &records.facets {
        batch.put(Table::EventFacet, k.clone(), Vec::new());
        flush(&mut batch, false)?;
    }
    for (k, seq) in &records.keys {
        batch.put(Table::Idempotency, k.as_bytes(), seq.to_be_bytes().to_vec());
        flush(&mut batch, false)?;
    }
    flush(&mut batch, true)?;
    // Last: a damaged derived table can make the backend panic, after which the storage
    // guard refuses every call, and the fresh files hold all they need by now.
    Ok(derived.compare(old))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventDraft;
    use crate::storage::{BackendKind, FailedCommit, Guarded};

    #[test]
    fn a_derived_table_that_panics_when_read_is_written_afresh_and_named_unreadable() {
        // Counting what such a table had wrong came first, and the panic it raised made the
        // storage guard refuse the copy of the log that followed (session 27 probe).
        let dir = tempfile::tempdir().unwrap();
        let world = crate::world::generate(&crate::world::WorldConfig {
            seed: 3,
            scale: 1,
            days: 2,
        });
        Store::create(dir.path(), BackendKind::Redb)
            .unwrap()
            .ingest(world.events)
            .unwrap();
        let path = BackendKind::Redb.path_in(dir.path());
        let old = Guarded::new(
            // Its scans of the episodic index panic, as redb's do over some damaged pages.
            Box::new(crate::storage::InterceptedScans {
                inner: BackendKind::Redb.open(dir.path()).unwrap(),
                intercept: |table: Table, _: &[u8]| {
                    assert!(
                        table != Table::EventFacet,
                        "internal error: entered unreachable code"
                    );
                    None
                },
            }),
            path,
        );
        let fresh_dir = tempfile::tempdir().unwrap();
        let fresh = BackendKind::Redb.open(fresh_dir.path()).unwrap();
        let report = write_repaired(&old, &*fresh, dir.path()).unwrap();
        assert_eq!(report.unreadable, ["event_facet"], "{report:?}");
        assert_eq!(report.not_compared, ["idempotency", "meta"], "{report:?}");
        let expected = Derived::replay(&*fresh, dir.path()).unwrap().records;
        assert_eq!(
            table_keys(&*fresh, Table::EventFacet).unwrap(),
            expected.facets
        );
        let times: Vec<Vec<u8>> = expected.times.iter().map(|t| t.to_vec()).collect();
        assert_eq!(table_keys(&*fresh, Table::EventTime).unwrap(), times);
        assert!(!expected.facets.is_empty());
    }

    /// A sled store whose conf fails its checksum and whose log ends with a failed commit
    /// sled wrote after all (its record beside sled's files): the repair reads a copy of the
    /// files, and took the batch back from the copy but the record from the store's own
    /// directory, so a repair killed before its swap left the store's log ending with the
    /// batch and nothing that said so: it was then served as committed (helper-151, 8 kills
    /// in 10). The copy's record goes; the store's stays until the swap replaces its files.
    #[test]
    fn a_failed_commits_record_stays_with_the_store_until_the_swap() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let store = Store::create(&dir, BackendKind::Sled).unwrap();
        store
            .ingest(vec![EventDraft::new(1, "bot", "SEEN")])
            .unwrap();
        let failed = store
            .ingest(vec![EventDraft::new(2, "bot", "SEEN")])
            .unwrap();
        drop(store);
        let sled = BackendKind::Sled.path_in(&dir);
        let last_record = {
            let backend = BackendKind::Sled.open_existing(&dir, false).unwrap();
            let (_, value) = backend.last(Table::Log).unwrap().unwrap();
            crc32fast::hash(&value)
        };
        let record = FailedCommit {
            durable: failed.first_seq - 1,
            failed_last: failed.last_seq,
            last_record,
        };
        std::fs::write(sled.join(record.file_name()), b"").unwrap();
        let conf = sled.join("conf");
        let mut damaged = std::fs::read(&conf).unwrap();
        damaged[5] = b'X';
        std::fs::write(&conf, damaged).unwrap();
        // As a repair reads them, up to its swap.
        let old = OldFiles::open(&dir, BackendKind::Sled).unwrap();
        assert_eq!(old.read_without, ["conf"]);
        let end = old.backend().last(Table::Log).unwrap().unwrap().0;
        assert_eq!(crate::storage::seq_of_log_key(&end), Some(record.durable));
        assert!(
            sled.join(record.file_name()).exists(),
            "the store's own record was taken before the swap"
        );
        let copy = old.copy.0.clone().unwrap();
        assert!(FailedCommit::recorded_in(&BackendKind::Sled.path_in(&copy))
            .unwrap()
            .is_empty());
        drop(old);
        assert!(!copy.exists());
        // The repair whole: the batch taken back, and the record gone with the old files.
        let (store, _) = Store::repair_at(&dir).unwrap();
        assert_eq!(store.stats().events, record.durable);
        assert!(!sled.join(record.file_name()).exists());
    }
}
