//! Deleting events and nodes, and compacting the store so that nothing of what was deleted
//! survives on disk. The rules (what a deletion does to edges and nodes) are in
//! [`crate::dynamics::deletion`]; this file applies them to the store's log and indexes,
//! its state (and snapshot) and its full-text index.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{
    dir_size, encode, now_ms, read_manifest, replay_appended, replay_excluding, time_key,
    DeletionTurn, KeptReplay, Store, TextCommits, META_COUNTERS, META_DELETED,
    REBUILD_DOCS_PER_COMMIT,
};
use crate::codec::decode_event;
use crate::dynamics::deletion::{
    self, deletion_draft, names_node, tombstone, DeleteReport, DeleteRequest, Reason,
};
use crate::error::{Error, Result};
use crate::model::{Assertion, Event};
use crate::storage::{BackendKind, StoreLock, Table, WriteBatch, COMPACT_DIR, SLED_OLD};
use crate::text::{event_doc_key, TextDoc};

use super::emerging::PlacesTaken;
use super::remaking::MadeAgain;

/// Operations per batch while copying into the new backend files.
const COPY_BATCH: usize = 20_000;

/// The refusal of a deletion of event `seq`, deleted before, of which nothing is left;
/// `forgotten` when forgetting took it, not a user: the user never deleted it, and is told
/// why nothing of it is left to delete.
fn already_deleted(seq: u64, forgotten: bool) -> Error {
    let why = if forgotten {
        ": forgetting took it, and no live summary holds anything of it"
    } else {
        ""
    };
    Error::InvalidArgument {
        name: "event".into(),
        message: format!("event {seq} is already deleted{why}"),
    }
}

/// The refusal of a deletion of nodes whose every event naming them was deleted before (by
/// forgetting, else the graph would hold them or their key would be unknown), and that no live
/// summary holds anything of: there is nothing of them left to delete.
fn nothing_left_of(keys: &[String]) -> Error {
    let keys: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
    Error::InvalidArgument {
        name: "node".into(),
        message: format!(
            "node {} is already deleted: forgetting took every event naming it, and no live summary holds anything of them",
            keys.join(", ")
        ),
    }
}

/// What a summary was made from (its children, and the summary it replaced), or `None` for
/// an event that is no summary.
///
/// A forgotten summary holds a node or edge it restates only through these: one that
/// restated a node only from events a user deleted since holds nothing of it, since the
/// summary made again in its place was made without them (seed 27: a node's deletion after
/// the deletion of the one event naming it took that summary again, where a store that never
/// forgot refuses the node as not found; and the node read as one forgetting let fade,
/// `Store::faded_among`). A day summary is made from episode summaries, which restate
/// nothing: what holds a node is followed through them ([`Chain`]).
pub(super) fn made_from_events(ev: &Event) -> Option<Vec<u64>> {
    let summary = crate::dynamics::consolidate::Summary::of_event_without_digest(ev)?;
    Some(
        summary
            .children
            .into_iter()
            .chain(summary.supersedes)
            .collect(),
    )
}

/// The events that hold something (a node, an edge) that still counts, read in log order:
/// those that give it themselves, and every summary made from one of them, or from a
/// compaction's tombstone, which no record says the content of.
#[derive(Default)]
pub(super) struct Chain {
    holding: BTreeSet<u64>,
}

impl Chain {
    /// Takes `seq` (with what it was made from, as [`made_from_events`] says, and whether it
    /// is live) and whether it gives the thing itself; returns whether that giving counts: a
    /// live event's does, and any forgotten event's but a summary's; a forgotten summary's
    /// only when the chain reaches one of its sources.
    pub(super) fn take(
        &mut self,
        seq: u64,
        (sources, live): (Option<&[u64]>, bool),
        gives: bool,
        tombstones: &BTreeSet<u64>,
    ) -> bool {
        let chained = sources.is_some_and(|s| {
            (s.iter()).any(|c| self.holding.contains(c) || tombstones.contains(c))
        });
        let counts = gives && (live || sources.is_none() || chained);
        if counts || chained {
            self.holding.insert(seq);
        }
        counts
    }
}

/// A summary in the chain a deletion follows ([`Store::add_summaries_of`]).
pub(super) struct SummaryLink {
    pub(super) seq: u64,
    pub(super) level: crate::dynamics::consolidate::Level,
    ts: i64,
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) children: Vec<u64>,
    /// The summary of the same range it replaced: one made after forgetting thinned its range
    /// folds that one's digest (and what it restated) in, so it is made from what that one
    /// was made from.
    pub(super) supersedes: Option<u64>,
    /// Whether a child (or the summary it replaced) is a tombstone, whose own children no
    /// record says any more.
    pub(super) unknown_child: bool,
    /// The deleted events it was made again without ([`Summary::without`]).
    ///
    /// [`Summary::without`]: crate::dynamics::consolidate::Summary::without
    pub(super) without: Vec<u64>,
}

#[cfg(test)]
impl SummaryLink {
    /// A summary `seq` of `children`, for tests of what reads the chain.
    pub(super) fn of(
        seq: u64,
        level: crate::dynamics::consolidate::Level,
        children: &[u64],
    ) -> Self {
        SummaryLink {
            seq,
            level,
            ts: 0,
            start: 0,
            end: 0,
            children: children.to_vec(),
            supersedes: None,
            unknown_child: false,
            without: Vec::new(),
        }
    }
}

/// The summaries of `chain` (in log order) made from any of `seeds` (seq to world time),
/// directly or through other summaries (their children, or the summary they replaced), live
/// or not: children come before their summaries in
/// the log, so one pass reaches every level. Where a compaction has made a summary's child (or
/// the summary it replaced) a tombstone, whose children no record says, the summary is taken
/// when its range holds a seed's time and it was written after that seed.
fn made_from(chain: &[SummaryLink], seeds: &BTreeMap<u64, i64>) -> BTreeSet<u64> {
    origins_of(chain, seeds).into_keys().collect()
}

/// [`made_from`], each summary with the seeds it was made from. A summary a deletion made
/// again was made without the deleted events it lists (`without`), though the one it
/// replaced and its forgotten children were made from them: a second deletion of one of them
/// finds nothing left to take.
pub(super) fn origins_of(
    chain: &[SummaryLink],
    seeds: &BTreeMap<u64, i64>,
) -> BTreeMap<u64, BTreeSet<u64>> {
    // The seeds by world time, for the summaries a compaction cut off.
    let by_time: BTreeSet<(i64, u64)> = seeds.iter().map(|(s, t)| (*t, *s)).collect();
    let mut origin: BTreeMap<u64, BTreeSet<u64>> =
        seeds.keys().map(|s| (*s, BTreeSet::from([*s]))).collect();
    let mut made = BTreeSet::new();
    for link in chain {
        let mut of = BTreeSet::new();
        for c in link.children.iter().chain(&link.supersedes) {
            if let Some(set) = origin.get(c) {
                of.extend(set.iter().copied());
            }
        }
        // `range` panics on a backward range, which a damaged summary could give.
        if link.unknown_child && link.start <= link.end {
            let in_range = by_time.range((link.start, 0)..=(link.end, u64::MAX));
            of.extend(in_range.map(|(_, s)| *s).filter(|s| *s < link.seq));
        }
        // A summary made again is without the deleted events it lists, whichever way they
        // reach it (its forgotten children were made from them too). Only the store writes
        // the list: an ingested summary with one is refused.
        of.retain(|s| !link.without.contains(s));
        if !of.is_empty() {
            origin.insert(link.seq, of);
            made.insert(link.seq);
        }
    }
    origin.retain(|s, _| made.contains(s));
    origin
}

/// What a compaction did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CompactReport {
    /// Deleted events whose records were replaced by tombstones now.
    pub tombstones_written: usize,
    /// Deleted events in the log in all (tombstones, old and new).
    pub deleted_events: usize,
    /// Size of the store directory before and after, in bytes. After is measured on the
    /// reopened store: redb writes its allocator state as the store closes, a few pages more
    /// in a file compacted in place, which [`Store::files_bytes`] counts once it is closed
    /// (`loci compact` reports that).
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// The live summaries carrying a value only deleted events give ([`Carriers::carrying`]): all
/// of them, and for each seed watched (an event the request names that was deleted before),
/// those carrying a value it gives. Every seed's own set had been kept, one entry per seed and
/// summary: deleting a node 97,758 events name, in a store of 96,755 summaries restating it,
/// held 2 GB and took 8.5 minutes (helper-117).
#[derive(Default)]
struct Carrying {
    all: BTreeSet<u64>,
    of_watched: BTreeMap<u64, BTreeSet<u64>>,
}

impl Carrying {
    fn watching(seeds: impl IntoIterator<Item = u64>) -> Self {
        Carrying {
            all: BTreeSet::new(),
            of_watched: seeds.into_iter().map(|s| (s, BTreeSet::new())).collect(),
        }
    }

    /// Notes that `summary` carries what the seeds `by` (ascending) give; none, when empty.
    fn add(&mut self, summary: u64, by: &[u64]) {
        if by.is_empty() {
            return;
        }
        self.all.insert(summary);
        // Whichever is shorter is walked, the other searched: a request may name thousands
        // of events deleted before.
        if self.of_watched.len() <= by.len() {
            for (seed, carried) in &mut self.of_watched {
                if by.binary_search(seed).is_ok() {
                    carried.insert(summary);
                }
            }
        } else {
            for seed in by {
                if let Some(carried) = self.of_watched.get_mut(seed) {
                    carried.insert(summary);
                }
            }
        }
    }
}

/// The part of `by` (ascending) within `[from, to)`.
fn seeds_within(by: &[u64], from: u64, to: u64) -> &[u64] {
    let start = by.partition_point(|s| *s < from);
    let end = by.partition_point(|s| *s < to).max(start);
    &by[start..end]
}

/// The live summaries that carry a value a user's deletion takes: for each of the deleted
/// events (the seeds), those written after it that restate a value it gives
/// ([`deletion::values_given`]), or whose text holds a name it gives, which nothing else
/// gives (no live event, nor a forgotten one logged before the summary). A summary restates the values the
/// graph holds as it is written, so one written after the event (an earlier day summarised
/// late, or a later day) carried them, and a deleted password stayed on the node,
/// searchable. A value is given elsewhere when a live event outside the seeds gives it, or a
/// live summary written before the first seed giving it restates it (it had it from an
/// earlier event, forgotten since): without that, deleting an event that repeated a place's
/// name took every later summary naming the place. A node or an edge is carried the same way
/// counting only what gave it since its last retraction before the summary
/// ([`Carriers::subject_seeds_carried`]): a summary made again after a node was retracted and
/// a deleted event made it again restated the node, which the deletion left. And an edge
/// that is not the seeds' own but has an end a seed upserts is carried by a later summary
/// restating it when every assertion of it met that end made only by seeds
/// ([`Carriers::edges_carried`]): replay without them skips the assertion.
///
/// The same reading finds, for the summaries made again without the seeds
/// ([`Carriers::seed_only`]), which of the nodes and edges the seeds upsert
/// ([`deletion::subjects_given`]) and of their values forgotten events gave too.
pub(super) struct Carriers {
    /// Each value (or subject) the seeds give.
    values: Vec<SeedGiven>,
    /// The index in `values` of each value's text.
    index: std::collections::HashMap<String, usize>,
    /// Summaries found restating a value (by its index in `values`): a live event later in
    /// the log may turn out to give it too.
    found: Vec<(u64, usize)>,
    given_elsewhere: BTreeSet<usize>,
    /// The live events outside the seeds giving a node or edge (by its index), raw ones and
    /// summaries logged before the first seed: where a later summary restating it had it
    /// from.
    subject_given_at: BTreeMap<usize, Vec<u64>>,
    /// The live events retracting a node or edge (by its index): what gave it before one no
    /// longer does.
    retracted_at: BTreeMap<usize, Vec<u64>>,
    /// Deleted events outside the seeds giving a value, by its index: their seq and world
    /// time.
    given_by_deleted: BTreeMap<usize, Vec<(u64, i64)>>,
    /// The events users deleted (not forgetting): none of them gives anything any more.
    user_deleted: BTreeSet<u64>,
    /// The names the events the user deletes give, by the index of their value's text, with
    /// the key of the node they name.
    names: Vec<(usize, String, String)>,
    /// The edges outside the seeds' own with an end a seed upserts, by their subject text:
    /// who asserted them and which live summaries restated them ([`Carriers::edges_carried`]).
    end_edges: BTreeMap<String, EdgeTrace>,
    /// The nodes the seeds upsert, by key: the index of each as a subject. The log's every
    /// edge assertion and retraction is looked up here, by key, not by a subject's text.
    node_at: std::collections::HashMap<String, usize>,
    /// The edges the seeds upsert, by the key of each end: the indexes of their subjects,
    /// which a retraction of that node retracts too.
    edges_at: std::collections::HashMap<String, Vec<usize>>,
    /// What the seeds retract, each with the seeds retracting it: edges by subject text,
    /// nodes (with every edge at them) by key.
    retracted_edges: BTreeMap<String, Vec<u64>>,
    retracted_nodes: BTreeMap<String, Vec<u64>>,
    /// The events outside the seeds (live, or forgotten) that asserted what a seed logged
    /// after them retracts ([`Carriers::ended_by_seeds`]).
    ended: Vec<Ended>,
}

/// An assertion of an event outside the seeds (live, or forgotten) that a seed's retraction
/// ended.
pub(super) struct Ended {
    /// The event's number and world time.
    pub(super) seq: u64,
    pub(super) ts: i64,
    /// The first seed after it retracting what it asserted.
    pub(super) retraction: u64,
    /// Each node or edge it upserted that a seed retracts after it
    /// ([`deletion::subject_upserted`]), with the first such seed.
    pub(super) subjects: Vec<(String, u64)>,
}

/// What the log says of an edge that is not the seeds' own but has an end a seed upserts
/// ([`Carriers::edges_carried`]).
#[derive(Default)]
struct EdgeTrace {
    /// The indexes (in `values`) of the ends a seed upserts, as subjects.
    ends: Vec<usize>,
    /// The events outside the seeds asserting it (live, or forgotten), in log order.
    givers: Vec<u64>,
    /// The live summaries restating it, in log order.
    restated_by: Vec<u64>,
    /// The events outside the seeds retracting it (live, or deleted: one a user deleted is
    /// left out later).
    retracted: Vec<u64>,
}

/// A value (or subject) the seeds of a deletion give ([`Carriers`]).
struct SeedGiven {
    /// Every seed giving it, in log order.
    by: Vec<u64>,
    /// Whether an event the user deletes gives it, not only a summary among the seeds (which
    /// restated it from others).
    by_raw_seed: bool,
    /// Whether it is a node or an edge ([`deletion::subjects_given`]), not a value.
    subject: bool,
}

impl Carriers {
    /// The values `seeds` give, or `None` when they give none (then nothing carries any).
    fn of_seeds(store: &Store, seeds: &BTreeMap<u64, i64>) -> Result<Option<Carriers>> {
        use crate::dynamics::consolidate::SUMMARY;
        let mut carriers = Carriers {
            values: Vec::new(),
            index: Default::default(),
            found: Vec::new(),
            given_elsewhere: BTreeSet::new(),
            subject_given_at: BTreeMap::new(),
            retracted_at: BTreeMap::new(),
            given_by_deleted: BTreeMap::new(),
            user_deleted: BTreeSet::new(),
            names: Vec::new(),
            end_edges: BTreeMap::new(),
            node_at: Default::default(),
            edges_at: Default::default(),
            retracted_edges: BTreeMap::new(),
            retracted_nodes: BTreeMap::new(),
            ended: Vec::new(),
        };
        for seq in seeds.keys() {
            let Some(ev) = store.raw_event(*seq)? else {
                continue;
            };
            let raw = ev.kind != SUMMARY;
            // A summary among the seeds restated its nodes and edges from other events.
            let subjects = if raw {
                deletion::subjects_given(&ev)
            } else {
                Vec::new()
            };
            let given = deletion::values_given(&ev).into_iter().map(|v| (v, false));
            for (v, subject) in given.chain(subjects.into_iter().map(|s| (s, true))) {
                let next = carriers.values.len();
                let i = *carriers.index.entry(v).or_insert(next);
                if i == next {
                    carriers.values.push(SeedGiven {
                        by: Vec::new(),
                        by_raw_seed: false,
                        subject,
                    });
                }
                let given = &mut carriers.values[i];
                given.by_raw_seed |= raw;
                if given.by.last() != Some(seq) {
                    given.by.push(*seq);
                }
            }
            if raw {
                carriers.note_retractions(&ev);
                carriers.index_subjects_by_key(&ev);
                let names = deletion::names_given(&ev);
                for (key, value, name) in names.into_iter().filter(|(_, _, n)| !n.trim().is_empty())
                {
                    if let Some(&i) = carriers.index.get(&value) {
                        carriers.names.push((i, name, key));
                    }
                }
            }
        }
        // A name another node bears too is no trace of the seeds' in a text.
        let names: BTreeSet<String> = carriers.names.iter().map(|(_, n, _)| n.clone()).collect();
        let bearers = store.read_state().keys_named(&names);
        carriers.names.retain(|(_, name, key)| {
            bearers
                .get(name)
                .is_none_or(|keys| keys.iter().all(|k| k == key))
        });
        carriers.names.sort();
        carriers.names.dedup();
        let retracts = !carriers.retracted_edges.is_empty() || !carriers.retracted_nodes.is_empty();
        Ok((!carriers.values.is_empty() || retracts).then_some(carriers))
    }

    /// Files what seed `ev` retracts ([`Carriers::retracted_edges`], `retracted_nodes`).
    fn note_retractions(&mut self, ev: &Event) {
        for a in &ev.assertions {
            let (map, subject) = match a {
                Assertion::RetractEdge { from, relation, to } => (
                    &mut self.retracted_edges,
                    deletion::edge_subject(from, relation, to),
                ),
                Assertion::RetractNode { key } => (&mut self.retracted_nodes, key.clone()),
                _ => continue,
            };
            let by = map.entry(subject).or_default();
            if by.last() != Some(&ev.seq) {
                by.push(ev.seq);
            }
        }
    }

    /// The first seed logged after event `ev` (outside the seeds) that retracts what
    /// assertion `a` of it upserts, if any.
    fn retraction_after(&self, ev: &Event, a: &Assertion) -> Option<u64> {
        // Each list is in log order (the seeds are read so).
        let after = |by: Option<&Vec<u64>>| by.into_iter().flatten().copied().find(|r| *r > ev.seq);
        match a {
            Assertion::UpsertNode(up) => after(self.retracted_nodes.get(&up.key)),
            Assertion::UpsertEdge(up) => {
                // The subject text only when a seed retracts an edge: this runs for every
                // event of the log.
                let edge = (!self.retracted_edges.is_empty())
                    .then(|| deletion::edge_subject(&up.from, &up.relation, &up.to))
                    .and_then(|subject| after(self.retracted_edges.get(&subject)));
                [
                    edge,
                    after(self.retracted_nodes.get(&up.from)),
                    after(self.retracted_nodes.get(&up.to)),
                ]
                .into_iter()
                .flatten()
                .min()
            }
            _ => None,
        }
    }

    /// The events outside the seeds, live or forgotten (not by a user), that asserted what a
    /// seed logged after them retracts. With the seed deleted, what they asserted lives again,
    /// and a summary of their period written after the retraction (made again after it)
    /// restated none of it, so it is taken and made again from the events it covers: a
    /// forgotten event's assertion only summaries hold, and a live one's may not apply where
    /// it stands (an end its forgotten note made, which a summary made again later restates).
    pub(super) fn ended_by_seeds(&self) -> impl Iterator<Item = &Ended> {
        (self.ended.iter()).filter(|e| !self.user_deleted.contains(&e.seq))
    }

    /// Whether a user's deletion (not forgetting) listed event `seq`.
    pub(super) fn deleted_by_user(&self, seq: u64) -> bool {
        self.user_deleted.contains(&seq)
    }

    /// Files the nodes and edges seed `ev` upserts (their subjects indexed already) under
    /// their keys ([`Carriers::node_at`], [`Carriers::edges_at`]).
    fn index_subjects_by_key(&mut self, ev: &Event) {
        for a in &ev.assertions {
            match a {
                Assertion::UpsertNode(up) => {
                    if let Some(&i) = self.index.get(&deletion::node_subject(&up.key)) {
                        self.node_at.insert(up.key.clone(), i);
                    }
                }
                Assertion::UpsertEdge(up) => {
                    let subject = deletion::edge_subject(&up.from, &up.relation, &up.to);
                    if let Some(&i) = self.index.get(&subject) {
                        for end in [&up.from, &up.to] {
                            let at = self.edges_at.entry(end.clone()).or_default();
                            if !at.contains(&i) {
                                at.push(i);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// What of `ev` is looked for: the values it gives and the nodes and edges it upserts,
    /// less those it retracts after upserting them ([`Undone`]).
    fn given(ev: &Event) -> impl Iterator<Item = String> {
        let undone = Undone::of(ev);
        let subjects = (ev.assertions.iter().enumerate())
            .filter(|(j, a)| !undone.later(*j, a))
            .filter_map(|(_, a)| deletion::subject_upserted(a))
            .collect::<Vec<_>>();
        deletion::values_given(ev).into_iter().chain(subjects)
    }

    /// Takes the next live event of the log outside the seeds.
    fn see(&mut self, ev: &Event) {
        if deletion::reason_of(ev) == Some(Reason::Delete) {
            self.user_deleted.extend(deletion::deleted_by(ev));
        }
        let summary = ev.kind == crate::dynamics::consolidate::SUMMARY;
        // A pin makes no node in a replay without the seeds: it gives no node of theirs.
        let pin = crate::projection::PIN_KINDS.contains(&ev.kind.as_str());
        for value in Self::given(ev) {
            let Some(&i) = self.index.get(&value) else {
                continue;
            };
            if pin && self.values[i].subject {
                continue;
            }
            let first = self.values[i].by[0];
            if summary && ev.seq > first {
                self.found.push((ev.seq, i));
            } else {
                self.given_elsewhere.insert(i);
                if self.values[i].subject {
                    self.subject_given_at.entry(i).or_default().push(ev.seq);
                }
            }
        }
        for i in self.retracted_by(ev) {
            self.retracted_at.entry(i).or_default().push(ev.seq);
        }
        if !summary {
            self.note_ended(ev, false);
        }
        self.trace_end_edges(ev, summary);
        // A summary's text names a node as it was named when it was written, whether or not
        // it restates the node: one naming it by a name a seed gave carries that name.
        if summary && !self.names.is_empty() {
            let text = ev.text();
            for (i, name, _) in &self.names {
                if ev.seq > self.values[*i].by[0] && text.contains(name.as_str()) {
                    self.found.push((ev.seq, *i));
                }
            }
        }
    }

    /// Takes the next deleted event of the log outside the seeds (a summarised kind).
    fn see_deleted(&mut self, ev: &Event) {
        for value in Self::given(ev) {
            if let Some(&i) = self.index.get(&value) {
                self.given_by_deleted
                    .entry(i)
                    .or_default()
                    .push((ev.seq, ev.ts));
            }
        }
        // A forgotten event a user did not delete asserts as a live one does (it comes back
        // into what summaries are made again from); one a user deleted is left out later.
        self.trace_end_edges(ev, false);
        self.note_ended(ev, true);
    }

    /// Files what of event `ev` (outside the seeds, raw) a seed logged after it retracts
    /// ([`Carriers::ended_by_seeds`]); and, for a `forgotten` one, each edge it asserted at a
    /// node a seed logged before it had retracted: replay skipped it for want of that end
    /// (session 43, seed 25: a forgotten note's `bot HOME n4`, after a retraction of `n4` and a
    /// deleted note that had made it again), and with the seed deleted it applies, but no
    /// summary over it restated it.
    fn note_ended(&mut self, ev: &Event, forgotten: bool) {
        // Most deletions retract nothing: then no event of the log is looked at.
        if self.retracted_edges.is_empty() && self.retracted_nodes.is_empty() {
            return;
        }
        let before = |a: &Assertion| match (forgotten, a) {
            (true, Assertion::UpsertEdge(up)) => [&up.from, &up.to]
                .into_iter()
                .filter_map(|key| self.retracted_nodes.get(key.as_str()))
                .flat_map(|by| by.iter().copied().rfind(|r| *r < ev.seq))
                .max(),
            _ => None,
        };
        let subjects: Vec<(String, u64)> = (ev.assertions.iter())
            .filter_map(|a| {
                let retraction = self.retraction_after(ev, a).or_else(|| before(a))?;
                Some((deletion::subject_upserted(a)?, retraction))
            })
            .collect();
        if let Some(retraction) = subjects.iter().map(|(_, r)| *r).min() {
            self.ended.push(Ended {
                seq: ev.seq,
                ts: ev.ts,
                retraction,
                subjects,
            });
        }
    }

    /// Records what `ev` (outside the seeds; a live `summary`, or not) says of the edges with
    /// an end a seed upserts: it asserts, restates or retracts them.
    fn trace_end_edges(&mut self, ev: &Event, summary: bool) {
        let undone = Undone::of(ev);
        for (j, a) in ev.assertions.iter().enumerate() {
            let (from, relation, to, retracts) = match a {
                Assertion::UpsertEdge(up) => (&up.from, &up.relation, &up.to, false),
                Assertion::RetractEdge { from, relation, to } => (from, relation, to, true),
                _ => continue,
            };
            let ends: Vec<usize> = [from, to]
                .into_iter()
                .filter_map(|key| self.node_at.get(key).copied())
                .collect();
            let subject = deletion::edge_subject(from, relation, to);
            if ends.is_empty() || self.index.contains_key(&subject) {
                continue;
            }
            let trace = self.end_edges.entry(subject).or_default();
            trace.ends = ends;
            match (retracts, summary) {
                (true, _) => trace.retracted.push(ev.seq),
                (false, true) => trace.restated_by.push(ev.seq),
                (false, false) if !undone.later(j, a) => trace.givers.push(ev.seq),
                (false, false) => {}
            }
        }
    }

    /// For each seed, the live summaries restating an edge (not the seeds' own) that every
    /// assertion of it since its last retraction met with an end only seeds had made: replay
    /// without the seeds skips those assertions (the end is not there yet), so what the
    /// summary restated is the seeds' doing. A kept note's belief in a person only a deleted
    /// note had made (a later note made them again) lived on in the week's summary.
    fn edges_carried(&self, carrying: &mut Carrying) {
        for trace in self.end_edges.values() {
            for &summary in &trace.restated_by {
                let retracted = (trace.retracted.iter())
                    .chain(
                        trace
                            .ends
                            .iter()
                            .flat_map(|i| self.retracted_at.get(i).into_iter().flatten()),
                    )
                    .filter(|r| **r < summary && !self.user_deleted.contains(r))
                    .max()
                    .copied()
                    .unwrap_or(0);
                // A giver logged with the retraction came after it in that event (one before it
                // is not a giver: `Undone`).
                let effective = (trace.givers.iter())
                    .filter(|g| **g >= retracted && **g < summary && !self.user_deleted.contains(g))
                    .any(|&g| trace.ends.iter().all(|&i| self.made_without_seeds(i, g)));
                if effective {
                    continue;
                }
                for &i in &trace.ends {
                    carrying.add(summary, seeds_within(&self.values[i].by, 0, summary));
                }
            }
        }
    }

    /// Whether node `i` (a subject the seeds give) was there at `at` by an event outside the
    /// seeds: a live one, or a forgotten one a user did not delete, since its last retraction
    /// (`at` itself too: an event may make a node and then an edge to it, or retract a node,
    /// make it again and assert an edge to it).
    fn made_without_seeds(&self, i: usize, at: u64) -> bool {
        let since = self.last_retraction(i, at.saturating_add(1));
        self.given_outside_seeds(i, |seq| seq >= since && seq <= at)
    }

    /// The last live retraction of node or edge `i` logged before `before` (0 when none).
    fn last_retraction(&self, i: usize, before: u64) -> u64 {
        (self.retracted_at.get(&i).into_iter().flatten())
            .filter(|r| **r < before)
            .max()
            .copied()
            .unwrap_or(0)
    }

    /// Whether an event outside the seeds logged at a sequence `within` accepts gave node or
    /// edge `i`: a live one (raw, or a summary logged before the first seed), or a forgotten
    /// one no user deleted.
    fn given_outside_seeds(&self, i: usize, within: impl Fn(u64) -> bool) -> bool {
        (self.subject_given_at.get(&i).into_iter().flatten()).any(|g| within(*g))
            || self.forgotten_giver(i, &within, |_| true)
    }

    /// The nodes and edges among the seeds' (by index) that `ev` retracts: a node's edges go
    /// with it.
    fn retracted_by(&self, ev: &Event) -> Vec<usize> {
        let mut out = Vec::new();
        for a in &ev.assertions {
            match a {
                Assertion::RetractNode { key } => {
                    out.extend(self.node_at.get(key));
                    out.extend(self.edges_at.get(key).into_iter().flatten());
                }
                Assertion::RetractEdge { from, relation, to } => {
                    out.extend(self.index.get(&deletion::edge_subject(from, relation, to)));
                }
                _ => {}
            }
        }
        out
    }

    /// The seeds whose node or edge `i` summary `summary` carries: those giving it after its
    /// last retraction before the summary, when nothing else did since (no live event, no
    /// live summary before them, no forgotten event a user did not delete). A summary
    /// restates the nodes and edges the graph holds as it is written, so one written after a
    /// node was retracted and a deleted event made it again (a summary made again, at the end
    /// of the log) kept the node after that event's deletion.
    fn subject_seeds_carried(
        &self,
        i: usize,
        summary: u64,
        found_at: &std::collections::HashMap<usize, Vec<u64>>,
    ) -> &[u64] {
        let since = self.last_retraction(i, summary);
        // What the retracting event made after its retraction counts (`Undone`).
        let within = |seq: u64| seq >= since && seq < summary;
        let seeds = seeds_within(&self.values[i].by, since, summary);
        let Some(&first) = seeds.first() else {
            return &[];
        };
        // A summary found restating it in `[since, first)`.
        let summary_before = found_at
            .get(&i)
            .is_some_and(|at| !seeds_within(at, since, first).is_empty());
        if summary_before || self.given_outside_seeds(i, within) {
            &[]
        } else {
            seeds
        }
    }

    /// The summaries carrying a value only the seeds give, with those of each of `watched`.
    fn carrying(&self, watched: impl IntoIterator<Item = u64>) -> Carrying {
        let mut carrying = Carrying::watching(watched);
        self.edges_carried(&mut carrying);
        // Where each value was found restated, ascending (`found` is in log order).
        let mut found_at: std::collections::HashMap<usize, Vec<u64>> = Default::default();
        for &(summary, i) in &self.found {
            found_at.entry(i).or_default().push(summary);
        }
        for &(summary, i) in &self.found {
            if self.values[i].subject {
                carrying.add(summary, self.subject_seeds_carried(i, summary, &found_at));
                continue;
            }
            // A forgotten event a user did not delete, logged before the summary, gives the
            // value as a live one does: a summary made again restates it from there.
            let forgotten_giver = self.forgotten_giver(i, |seq| seq < summary, |_| true);
            if self.given_elsewhere.contains(&i) || self.values[i].subject || forgotten_giver {
                continue;
            }
            // Every seed giving it before the summary was written may be what it carries.
            carrying.add(summary, seeds_within(&self.values[i].by, 0, summary));
        }
        carrying
    }

    /// Whether `value` (a value's or a subject's text) is one a deleted event gave and no event
    /// left gives: no live event outside the seeds, and no forgotten one (not deleted by a
    /// user) among those a summary over `range` written at `before` was made from (in its
    /// range, logged before it).
    pub(super) fn seed_only(&self, value: &str, range: (i64, i64), before: u64) -> bool {
        self.index
            .get(value)
            .is_some_and(|&i| self.seed_only_at(i, range, before))
    }

    /// The names ([`deletion::names_given`]) that are [`Carriers::seed_only`] for a summary
    /// over `range` written at `before`.
    pub(super) fn seed_only_names(&self, range: (i64, i64), before: u64) -> Vec<String> {
        self.names
            .iter()
            .filter(|(i, _, _)| self.seed_only_at(*i, range, before))
            .map(|(_, name, _)| name.clone())
            .collect()
    }

    fn seed_only_at(&self, i: usize, range: (i64, i64), before: u64) -> bool {
        let in_range = |ts: i64| (range.0..=range.1).contains(&ts);
        self.values[i].by_raw_seed
            && !self.given_elsewhere.contains(&i)
            && !self.forgotten_giver(i, |seq| seq < before, in_range)
    }

    /// Whether a forgotten event no user deleted, logged at a sequence `logged` accepts and at
    /// a world time `at` accepts, gives value `i`.
    fn forgotten_giver(
        &self,
        i: usize,
        logged: impl Fn(u64) -> bool,
        at: impl Fn(i64) -> bool,
    ) -> bool {
        self.given_by_deleted.get(&i).is_some_and(|by| {
            by.iter()
                .any(|&(seq, ts)| logged(seq) && at(ts) && !self.user_deleted.contains(&seq))
        })
    }
}

/// Where the retractions of one event fall among its assertions. An event's assertions apply
/// in their order, so a node or an edge it upserts and then retracts is not given by it, and
/// one it retracts and then upserts is there after it: a note that retracted a person and made
/// them again was read as leaving them retracted, and every later summary restating a belief
/// in them was taken by the deletion of an earlier note that had made them too. A giver and a
/// retraction of the same event therefore compare as the giver coming after (`>=`).
struct Undone<'e> {
    /// Each node key retracted, with the index of its last retraction.
    nodes: std::collections::HashMap<&'e str, usize>,
    /// Each edge retracted, by its keys, with the index of its last retraction.
    edges: std::collections::HashMap<(&'e str, &'e str, &'e str), usize>,
}

impl<'e> Undone<'e> {
    fn of(ev: &'e Event) -> Self {
        let mut undone = Undone {
            nodes: Default::default(),
            edges: Default::default(),
        };
        for (j, a) in ev.assertions.iter().enumerate() {
            match a {
                Assertion::RetractNode { key } => {
                    undone.nodes.insert(key, j);
                }
                Assertion::RetractEdge { from, relation, to } => {
                    undone.edges.insert((from, relation, to), j);
                }
                _ => {}
            }
        }
        undone
    }

    /// Whether an assertion after the `j`-th, `a`, retracts what `a` upserts (an edge goes
    /// with either end).
    fn later(&self, j: usize, a: &Assertion) -> bool {
        let after = |at: Option<&usize>| at.is_some_and(|&r| r > j);
        match a {
            Assertion::UpsertNode(up) => after(self.nodes.get(up.key.as_str())),
            Assertion::UpsertEdge(up) => {
                let keys = (up.from.as_str(), up.relation.as_str(), up.to.as_str());
                after(self.edges.get(&keys))
                    || after(self.nodes.get(up.from.as_str()))
                    || after(self.nodes.get(up.to.as_str()))
            }
            _ => false,
        }
    }
}

/// The summaries of `chain` written after a retraction among `targets` (not one deleted
/// before) over the time of an event whose assertion it ended ([`Carriers::ended_by_seeds`]):
/// the store lost a belief a forgotten note gave when the user deleted the retraction that
/// had ended it, since the week's summary holding the note had been made again after the
/// retraction, without the belief; and one a live note gave whose end rested on a summary
/// made again after the note.
fn summaries_after_retraction(
    chain: &[SummaryLink],
    carriers: &Carriers,
    targets: &BTreeMap<u64, i64>,
) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for ended in carriers.ended_by_seeds() {
        if !targets.contains_key(&ended.retraction) {
            continue;
        }
        let over =
            |l: &&SummaryLink| l.seq > ended.retraction && l.start <= ended.ts && ended.ts <= l.end;
        out.extend(chain.iter().filter(over).map(|l| l.seq));
    }
    out
}

/// What [`Store::add_summaries_of`] read to find the summaries a deletion takes, which
/// [`Store::summaries_made_again`] makes again from.
pub(super) struct Taken {
    pub(super) chain: Vec<SummaryLink>,
    pub(super) carriers: Option<Carriers>,
    /// The last graph the deletion replayed, for its next replay without the same events.
    pub(super) replay: KeptReplay,
}

impl Store {
    /// Deletes events and nodes, as one deletion event: every listed event, and every event
    /// that names a listed node, leaves every view (search, retrieval, queries, timelines), and
    /// the graph becomes what the log without them projects (see
    /// [`crate::dynamics::deletion`]). The log keeps their records until [`Store::compact`].
    /// Unknown, already deleted or bookkeeping events, and unknown node keys, are errors, and
    /// then nothing is written.
    ///
    /// The cost is a replay of the log (seconds per million events): a deletion is rare.
    pub fn delete(&self, request: &DeleteRequest) -> Result<DeleteReport> {
        // No node has a blank key (the projection refuses one), yet events without an actor
        // or a place name `""`: a blank key took them all.
        if let Some(key) = request.nodes.iter().find(|k| k.trim().is_empty()) {
            return Err(Error::InvalidArgument {
                name: "nodes".into(),
                message: format!("{key:?} is blank, and no node has a blank key"),
            });
        }
        // Uses waiting in memory go to the log first, where the deletion takes those naming
        // what it deletes with the rest of their records: flushed after it, they named a node
        // it had taken (helper-116's review). A read-only handle has none.
        self.flush_usage()?;
        self.delete_for(request, Reason::Delete)
    }

    pub(crate) fn delete_for(
        &self,
        request: &DeleteRequest,
        reason: Reason,
    ) -> Result<DeleteReport> {
        self.delete_in_turn(&self.deletion_turn(), request, reason)
    }

    /// [`Store::delete_for`] in a turn at deleting the caller holds (a forgetting holds its
    /// own from its choice of events).
    pub(crate) fn delete_in_turn(
        &self,
        turn: &DeletionTurn<'_>,
        request: &DeleteRequest,
        reason: Reason,
    ) -> Result<DeleteReport> {
        self.delete_in_commits(turn, request, reason, REBUILD_DOCS_PER_COMMIT)
    }

    /// [`Store::delete_in_turn`], writing the nodes' text documents again `per_commit` at a
    /// time.
    pub(super) fn delete_in_commits(
        &self,
        _turn: &DeletionTurn<'_>,
        request: &DeleteRequest,
        reason: Reason,
        per_commit: usize,
    ) -> Result<DeleteReport> {
        self.writable()?;
        if request.is_empty() {
            return Err(Error::InvalidArgument {
                name: "delete".into(),
                message: "nothing to delete: give event sequence numbers or node keys".into(),
            });
        }
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let widened;
        let request = match reason {
            Reason::Delete => {
                widened = self.with_the_gist_of_named_summaries(request)?;
                &widened
            }
            Reason::Forget => request,
        };
        let (mut targets, mut gone) = match self.deletion_targets(request, reason) {
            // A key missed because a block of the snapshot changed after its first read (the
            // miss checked its blocks again and found it): asked again of the graph replayed
            // from the log, as a batch naming it would be.
            Err(Error::NotFound(_)) if self.snapshot_damage_found() => {
                self.replay_damaged_graph()?;
                self.deletion_targets(request, reason)?
            }
            targets => targets?,
        };
        // Before the summaries: one restating a place a `PLACES` event taken gave is taken too.
        let places = match reason {
            Reason::Delete => self.take_places_of(&mut targets, &mut gone)?,
            Reason::Forget => None,
        };
        let taken = match reason {
            Reason::Delete => Some(self.add_summaries_of(&mut targets, &gone, &request.events)?),
            Reason::Forget => None,
        };
        if targets.is_empty() {
            return Err(nothing_left_of(&request.nodes));
        }
        let before = self.read_state();
        let mut deleted = before.deleted.clone();
        deleted.extend(targets.keys().copied());
        let seq = before.counters.last_seq + 1;
        let target_set: BTreeSet<u64> = targets.keys().copied().collect();
        let event = self.deletion_event(&before, &target_set, (reason, &gone), request)?;
        // Moved, not copied: a forgetting's lists every event it deletes (800,000 of them).
        let event_ts = event.ts;
        let mut written = vec![event];
        written.extend(self.usage_recorded_again(&before, &targets, request, seq + 1)?);
        let MadeAgain {
            events: made_again,
            replaced,
            live_edges,
        } = match &taken {
            Some(taken) => {
                let next = seq + written.len() as u64;
                self.summaries_made_again(&before, &targets, &gone, request, taken, next)?
            }
            None => MadeAgain::default(),
        };
        // Moved, not copied: the report keeps their numbers alone.
        let summaries_made_again: Vec<u64> = made_again.iter().map(|e| e.seq).collect();
        written.extend(made_again);
        // The graph an earlier replay of the deletion left, when it left out the same events.
        let kept = (taken.as_ref())
            .and_then(|t| t.replay.take(&deleted))
            .filter(|state| state.counters.last_seq == before.counters.last_seq);
        let replay_failed = |msg| Error::Store {
            path: self.dir.clone(),
            message: format!("cannot apply the deletion: {msg}"),
        };
        let mut replayed = match kept {
            Some(state) => replay_appended(&*self.backend, state, written.iter().cloned())?,
            None => replay_excluding(
                &*self.backend,
                deleted.clone(),
                super::UNVISITED,
                written.iter().cloned(),
                u64::MAX,
            )?,
        }
        .map_err(replay_failed)?;
        // A live event's edge at a node only a taken summary made before it was skipped
        // there (a later summary may still make the edge, without that event's support): the
        // last summary made again restates it (`remaking::live_edges_at`).
        let skipped: Vec<Assertion> = (live_edges.iter())
            .filter(
                |(up, support)| match replayed.edge_by_keys(&up.from, &up.relation, &up.to) {
                    Some(e) => !support.iter().all(|s| e.evidence.contains(s)),
                    None => {
                        replayed.node_id(&up.from).is_some() && replayed.node_id(&up.to).is_some()
                    }
                },
            )
            .map(|(up, _)| Assertion::UpsertEdge(up.clone()))
            .collect();
        if let (false, Some(last)) = (skipped.is_empty(), written.last_mut()) {
            last.assertions.extend(skipped);
            replayed = replay_excluding(
                &*self.backend,
                deleted.clone(),
                super::UNVISITED,
                written.iter().cloned(),
                u64::MAX,
            )?
            .map_err(replay_failed)?;
        }
        // The places made again come last, onto what the rest left (`emerging`).
        let mut places_made_again = None;
        if let Some(p) = &places {
            let at = (seq + written.len() as u64, event_ts);
            let now: BTreeSet<u64> = targets.keys().chain(gone.keys()).copied().collect();
            let again = self.places_made_again(p, (&before, &replayed), &now, request, at)?;
            if let Some(ev) = again {
                places_made_again = Some(ev.seq);
                replayed = replay_appended(&*self.backend, replayed, vec![ev.clone()])?
                    .map_err(replay_failed)?;
                written.push(ev);
            }
        }

        let mut report = DeleteReport {
            seq,
            deleted: target_set.iter().copied().collect(),
            summaries_made_again,
            summaries_not_made_again: self.gists_gone(&taken, &target_set, &replaced)?,
            places_made_again,
            deleted_before: gone.keys().copied().collect(),
            ..DeleteReport::default()
        };
        let mut batch = WriteBatch::default();
        for ev in &written {
            super::put_event_records(&mut batch, ev, encode(ev));
        }
        let mut kept = BTreeSet::new();
        for (s, ts) in &targets {
            batch.delete(Table::EventTime, time_key(*ts, *s));
            if let Some(ev) = self.raw_event(*s)? {
                for k in super::facet_keys(&ev) {
                    batch.delete(Table::EventFacet, k);
                }
                // A summary or the places made again restate what they kept: no news to the
                // user.
                if !replaced.contains(s) && !places.as_ref().is_some_and(|p| p.takes(*s)) {
                    kept.extend(nodes_still_asserted(&ev, &replayed));
                }
            }
        }
        // A pin event names every node it pins: taken for one of them, it unpins the rest.
        report.nodes_unpinned = kept
            .iter()
            .filter(|key| {
                let pinned = |st: &super::State| {
                    st.node_id(key)
                        .and_then(|id| st.node(id))
                        .is_some_and(|n| n.pinned)
                };
                pinned(&before) && !pinned(&replayed)
            })
            .cloned()
            .collect();
        let mut pinned_removed: Vec<String> = (before.adj.pinned_nodes())
            .filter_map(|id| before.nodes.key(id))
            .filter(|key| {
                replayed.node_id(key).is_none() && !request.nodes.iter().any(|k| k == key)
            })
            .map(str::to_string)
            .collect();
        pinned_removed.sort();
        report.pinned_nodes_removed = pinned_removed;
        report.nodes_kept = kept.len();
        report.nodes_kept_keys = kept.into_iter().take(deletion::NODES_KEPT_LISTED).collect();
        report.edges_weakened = edges_weakened(
            &before,
            &replayed,
            &targets,
            &replaced,
            &report.summaries_made_again,
            (places.as_ref(), places_made_again),
        );
        batch.put(Table::Meta, META_COUNTERS, encode(&replayed.counters));
        batch.put(
            Table::Meta,
            META_DELETED,
            encode(&super::deleted_list(&replayed)),
        );
        replayed.folds.put_all(&mut batch);

        // Node documents all go, and the live ones come back (`reindex_after_deletion`).
        let text_deletes: Vec<String> = target_set.iter().map(|s| event_doc_key(*s)).collect();
        for key in before.nodes.ids().filter_map(|id| before.nodes.key(id)) {
            if replayed.node_id(key).is_none() {
                report.nodes_removed += 1;
            }
        }
        let edges_before = before.edges.live_count();
        let edges_after = replayed.edges.live_count();
        report.edges_removed = edges_before.saturating_sub(edges_after);
        drop(before);

        // Every id may have changed: no earlier snapshot can be brought past this commit.
        batch.put(Table::Meta, super::META_SNAPSHOT_FLOOR, encode(&seq));
        batch.put(Table::Meta, super::META_IDS_FLOOR, encode(&seq));
        self.backend.commit(batch)?;
        self.adopt_after_deletion(&written, replayed, text_deletes, per_commit);
        Ok(report)
    }

    /// The `USAGE` event (numbered `seq`, after the deletion's) that records again the running
    /// totals a node deletion takes from other items: it takes every `USAGE` record naming the
    /// node, and the totals such a record carried for the items read beside it fell back to
    /// an older record's, or to none, where no later record named them. `None` when nothing
    /// falls back (always for a deletion of events alone: a `USAGE` record a user names goes
    /// whole).
    fn usage_recorded_again(
        &self,
        before: &super::State,
        targets: &BTreeMap<u64, i64>,
        request: &DeleteRequest,
        seq: u64,
    ) -> Result<Option<Event>> {
        use crate::dynamics::usage::{entries, record_draft, UsageLedger, USAGE};
        if request.nodes.is_empty() {
            return Ok(None);
        }
        let mut taken = Vec::new();
        let mut after = UsageLedger::default();
        for s in self.seqs_with(super::Facet::Kind, USAGE)? {
            let Some(ev) = self.raw_event(s)? else {
                continue;
            };
            if !targets.contains_key(&s) {
                after.apply(&ev);
            } else if !request.events.contains(&s) {
                taken.extend(entries(&ev).into_iter().map(|(item, _)| item));
            }
        }
        let deleted_with = |item: &crate::dynamics::usage::Item| {
            request.nodes.iter().any(|k| item.names_node(k))
                || matches!(item, crate::dynamics::usage::Item::Event(s) if targets.contains_key(s))
        };
        let again: BTreeMap<_, _> = taken
            .into_iter()
            .filter(|item| !deleted_with(item))
            .filter_map(|item| {
                let total = before.folds.usage.get(&item)?;
                (after.get(&item) != Some(total)).then_some((item, total))
            })
            .collect();
        if again.is_empty() {
            return Ok(None);
        }
        let draft = record_draft(again.into_iter(), before.latest_ts.unwrap_or(0));
        Ok(Some(Event::from_draft(seq, now_ms(), draft)))
    }

    /// The deletion event for `targets`: it lists them, and what the earlier deletions among
    /// them deleted, with the node keys the request named.
    fn deletion_event(
        &self,
        before: &super::State,
        targets: &BTreeSet<u64>,
        (reason, gone): (Reason, &BTreeMap<u64, i64>),
        request: &DeleteRequest,
    ) -> Result<Event> {
        // A forgetting that deletes earlier forgettings lists what they deleted, so that the
        // log's deletions stay the same while their records do not pile up. A user's lists
        // the forgotten events it names as well: no later deletion takes them for events only
        // forgetting took, whose values a summary made again may keep.
        let mut listed = targets.clone();
        listed.extend(gone.keys());
        for seq in targets {
            if let Some(ev) = self.raw_event(*seq)? {
                listed.extend(deletion::deleted_by(&ev));
            }
        }
        let draft = deletion_draft(
            before.latest_ts.unwrap_or(0),
            reason,
            &listed,
            &request.nodes,
        );
        Ok(Event::from_draft(
            before.counters.last_seq + 1,
            now_ms(),
            draft,
        ))
    }

    /// Makes the state `replayed` after the deletion whose events are `written` (committed;
    /// the deletion's first) the live one: its node documents are written again under the ids
    /// the replay gave, and a snapshot of it taken.
    /// Failures here leave the log right and are repaired later, so they are logged, not
    /// returned.
    fn adopt_after_deletion(
        &self,
        written: &[Event],
        replayed: super::State,
        text_deletes: Vec<String>,
        per_commit: usize,
    ) {
        let seq = written[0].seq;
        // The documents written from here on name the ids the replay gave; until the first
        // commit of them, searches leave node hits out (`Store::searches_nodes`).
        self.text.set_next_floor(seq);
        self.drop_snapshot();
        let mut state = replayed;
        state.ids_given_anew();
        state.ids_floor = seq;
        // Searches wait from before the new graph is live until its documents are written.
        let rewrite = self.rewriting.begin();
        *self.write_state() = state;
        if let Err(e) = self.reindex_after_deletion(written, text_deletes, per_commit) {
            // Node documents of the old ids may be left; later commits must not vouch for
            // them with this deletion's floor.
            tracing::warn!(error = %e, "full-text update after the deletion failed; rebuilding the index from the log");
            if let Err(e) = self.rebuild_text_locked(per_commit) {
                self.text.set_next_floor(super::IDS_FLOOR_CUT_SHORT);
                tracing::warn!(error = %e, "the full-text index could not be rebuilt; its node hits are left out until the next open for writing rebuilds it");
            }
        }
        drop(rewrite);
        // The state is the log's projection again; without a snapshot of it, the next open
        // would replay the whole log.
        if let Err(e) = self.checkpoint_locked(super::Adopt::Yes) {
            tracing::warn!(error = %e, "the state snapshot could not be written after the deletion; the next open replays the log");
        }
    }

    /// The full-text changes of the deletion whose events (`written`: its own, then the usage
    /// record and the summaries made again it wrote) are committed and whose state is now the
    /// live one: the deleted events' documents (`deletes`) go, those of `written` come, and
    /// every node's is
    /// written again, since the replay renumbered them: all deleted by their tag at once, then
    /// added `per_commit` at a time. Each added with a delete by key, in one commit, took a
    /// 100M-edge store (20M node documents) past 24 GB. The commits before the last keep the
    /// index's position before the deletion, so that a deletion cut short leaves a deletion
    /// after the index's position, which the next open answers with a rebuild. Meanwhile a
    /// search in this process waits (`Store::graph_for_search`); one in another process
    /// finds the nodes written so far.
    fn reindex_after_deletion(
        &self,
        written: &[Event],
        deletes: Vec<String>,
        per_commit: usize,
    ) -> Result<()> {
        let state = self.read_state();
        let position_before = self.text.indexed_seq();
        // An index behind the log before the deletion (an update that failed) misses events
        // this would not add: the caller rebuilds it from the log instead.
        if let Some(first) = written.first() {
            if position_before.saturating_add(1) < first.seq {
                return Err(Error::text(format!(
                    "the index is at event {position_before}, behind the log before the deletion (event {})",
                    first.seq
                )));
            }
        }
        // The index holds no node document after this: each is added as new.
        self.text.delete_node_documents()?;
        let mut commits = TextCommits::new(&self.text, per_commit, position_before, deletes);
        for doc in written.iter().filter_map(TextDoc::for_event) {
            commits.push(doc)?;
        }
        commits.push_nodes(&state)?;
        commits.finish(state.counters.last_seq)
    }

    /// `request` with the forgotten events that the live summaries it names alone hold: a
    /// user deleting a summary deletes its text and the gist it kept of those, as deleting
    /// them would (the summaries made from it are made again without them, a later summary
    /// restating what only they gave is taken), and nothing else of its period. Its events
    /// left stay, and the next consolidation summarises them again.
    ///
    /// They are reached through the summaries' children and the summaries they replaced,
    /// forgotten summaries on the way included, not through a live summary (it holds its
    /// own), less the events a summary on the way is without; not a user's deletion's events,
    /// nor a tombstone (what it gave is no longer known).
    fn with_the_gist_of_named_summaries(&self, request: &DeleteRequest) -> Result<DeleteRequest> {
        use crate::dynamics::consolidate::{Summary, SUMMARY};
        if request.events.is_empty() {
            return Ok(request.clone());
        }
        // Held while the summaries are read: this thread holds the writer lock, so no commit
        // waits on it; the set is not copied (a store that forgets holds many).
        let state = self.read_state();
        let deleted = &state.deleted;
        let mut stack: Vec<(u64, bool)> = (request.events.iter())
            .filter(|s| !deleted.contains(s))
            .map(|s| (*s, true))
            .collect();
        let (mut seen, mut held, mut without) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        while let Some((seq, named)) = stack.pop() {
            if !seen.insert(seq) || (!named && !deleted.contains(&seq)) {
                continue;
            }
            let Some(ev) = self.raw_event(seq)? else {
                continue;
            };
            if ev.kind == SUMMARY {
                if let Some(s) = Summary::of_event(&ev) {
                    without.extend(s.without);
                    stack.extend(
                        s.children
                            .into_iter()
                            .chain(s.supersedes)
                            .map(|c| (c, false)),
                    );
                }
            } else if !named && ev.kind != deletion::TOMBSTONE {
                held.insert(seq);
            }
        }
        drop(state);
        if held.is_empty() {
            return Ok(request.clone());
        }
        let by_user = self.user_deleted()?;
        let mut widened = request.clone();
        widened.events.extend(held.into_iter().filter(|s| {
            !without.contains(s) && !by_user.contains(s) && !request.events.contains(s)
        }));
        Ok(widened)
    }

    /// Of the summaries a deletion takes (`targets`, along `taken`'s chain), the live ones no
    /// summary made again replaces, ascending: their gist is gone. A summary a newer one of its
    /// period had replaced before (it is taken too) is not: that one's gist stands, or is its
    /// own entry (helper-116's review).
    fn gists_gone(
        &self,
        taken: &Option<Taken>,
        targets: &BTreeSet<u64>,
        replaced: &BTreeSet<u64>,
    ) -> Result<Vec<u64>> {
        let not_replaced: BTreeSet<u64> = (taken.iter().flat_map(|t| &t.chain))
            .map(|link| link.seq)
            .filter(|s| targets.contains(s) && !replaced.contains(s))
            .collect();
        if not_replaced.is_empty() {
            return Ok(Vec::new());
        }
        let placed = crate::dynamics::consolidate::placed_summaries(self)?;
        let live: BTreeSet<u64> = placed.live.iter().map(|p| p.seq).collect();
        Ok(not_replaced.intersection(&live).copied().collect())
    }

    /// Adds to `targets` every live summary made from one of them or from one of `gone`
    /// (events already deleted whose text the request wants out), directly or through other
    /// summaries: a summary's text is made from its children's, so what a user deletes must
    /// not live on in it. (Forgetting, by contrast, keeps summaries: they are the gist.) The
    /// chain runs through forgotten summaries too (see [`made_from`]). An event of `named`
    /// (the request's own) that is among `gone` and that no live summary was made from
    /// leaves nothing to delete, and is refused. The deletion makes the summaries it takes
    /// again without what it deletes ([`Store::summaries_made_again`]) from what this read.
    fn add_summaries_of(
        &self,
        targets: &mut BTreeMap<u64, i64>,
        gone: &BTreeMap<u64, i64>,
        named: &[u64],
    ) -> Result<Taken> {
        let mut seeds = targets.clone();
        seeds.extend(gone);
        let (chain, carriers) = self.summary_chain_and_carriers(&seeds)?;
        // Which summaries carry what an event named here, deleted before, gave: it is refused
        // when none does (below).
        let watched = gone.keys().copied().filter(|seq| named.contains(seq));
        let carrying = carriers
            .as_ref()
            .map(|c| c.carrying(watched))
            .unwrap_or_default();
        let Carrying {
            all: mut carried,
            of_watched,
        } = carrying;
        let made = made_from(&chain, &seeds);
        if let Some(c) = &carriers {
            carried.extend(summaries_after_retraction(&chain, c, targets));
        }
        // What the seeds made other events give, which later summaries restated.
        let summaries: BTreeSet<u64> = chain.iter().map(|link| link.seq).collect();
        let taken_already: BTreeSet<u64> = made.union(&carried).copied().collect();
        let replay = KeptReplay::default();
        let restating =
            self.summaries_restating_otherwise(&seeds, &taken_already, &summaries, &replay)?;
        let state = self.read_state();
        let live = |seq: &u64| !state.deleted.contains(seq);
        for (seq, ts) in gone.iter().filter(|(seq, _)| named.contains(seq)) {
            let made = made_from(&chain, &BTreeMap::from([(*seq, *ts)]));
            let carried = (of_watched.get(seq)).is_some_and(|c| c.iter().any(live));
            if !made.iter().any(live) && !carried && restating.is_empty() {
                let forgotten = !self.user_deleted()?.contains(seq);
                return Err(already_deleted(*seq, forgotten));
            }
        }
        carried.extend(restating);
        // A summary made from one that carried a value merged its digest (a week's of its
        // days'): it goes too.
        let carried_seeds: BTreeMap<u64, i64> = chain
            .iter()
            .filter(|link| carried.contains(&link.seq) && live(&link.seq))
            .map(|link| (link.seq, link.ts))
            .collect();
        carried.extend(made_from(&chain, &carried_seeds));
        targets.extend(
            chain
                .iter()
                .filter(|link| {
                    (made.contains(&link.seq) || carried.contains(&link.seq)) && live(&link.seq)
                })
                .map(|link| (link.seq, link.ts)),
        );
        Ok(Taken {
            chain,
            carriers,
            replay,
        })
    }

    /// Every summary the log holds a record of, live or deleted, in log order, with whether a
    /// child of it is a tombstone; and what the events outside `seeds` (the events a user
    /// deletes) give of what the seeds give ([`Carriers`]). One reading of the log finds both.
    fn summary_chain_and_carriers(
        &self,
        seeds: &BTreeMap<u64, i64>,
    ) -> Result<(Vec<SummaryLink>, Option<Carriers>)> {
        use crate::dynamics::consolidate::{summarised, Summary, SUMMARY};
        let mut carriers = Carriers::of_seeds(self, seeds)?;
        let deleted = self.read_state().deleted.clone();
        let mut tombstones = BTreeSet::new();
        let mut chain: Vec<SummaryLink> = Vec::new();
        super::log::scan(&*self.backend, 1, &mut |seq, v| {
            let (_, kind) = crate::codec::peek_event_kind(Table::Log.name(), v)?;
            if kind == deletion::TOMBSTONE {
                tombstones.insert(seq);
            }
            // Only live events outside the seeds can give a value elsewhere or carry it; a
            // forgotten one may have given it to a summary made again.
            let outside = carriers.is_some() && !seeds.contains_key(&seq);
            let carrier = outside && !deleted.contains(&seq);
            let forgotten = outside && deleted.contains(&seq) && kind != deletion::TOMBSTONE;
            if kind != SUMMARY && !carrier && !forgotten {
                return Ok(true);
            }
            // What is read of an event is its assertions, a summary's links, and a live
            // summary's text, digest and all (every string a search finds in it, which may
            // name a node: helper-146) or a live deletion's list. Building the payloads of the
            // forgotten events was most of this pass.
            let log = Table::Log.name();
            let ev = if carrier && (kind == SUMMARY || kind == deletion::DELETE) {
                decode_event(log, v)?
            } else if kind == SUMMARY {
                crate::codec::decode_event_without_digest(log, v)?
            } else {
                crate::codec::decode_event_without_payload(log, v)?
            };
            if forgotten {
                if let (true, Some(c)) = (summarised(&ev), carriers.as_mut()) {
                    c.see_deleted(&ev);
                }
            }
            if ev.kind == SUMMARY {
                if let Some(s) = Summary::of_event_without_digest(&ev) {
                    chain.push(SummaryLink {
                        seq,
                        level: s.level,
                        ts: ev.ts,
                        start: s.start,
                        end: s.end,
                        unknown_child: false,
                        supersedes: s.supersedes,
                        children: s.children,
                        without: s.without,
                    });
                }
            }
            if let (true, Some(c)) = (carrier, carriers.as_mut()) {
                c.see(&ev);
            }
            Ok(true)
        })?;
        for link in &mut chain {
            // The summary it replaced, a tombstone, hid its events as a tombstone child does.
            link.unknown_child = (link.children.iter())
                .chain(&link.supersedes)
                .any(|c| tombstones.contains(c));
        }
        Ok((chain, carriers))
    }

    /// The events a request deletes, with their world times; and, for a user's deletion, the
    /// events it names that are already deleted (forgotten, most often), whose summaries it
    /// must take (see [`Store::add_summaries_of`]).
    #[allow(clippy::type_complexity)]
    fn deletion_targets(
        &self,
        request: &DeleteRequest,
        reason: Reason,
    ) -> Result<(BTreeMap<u64, i64>, BTreeMap<u64, i64>)> {
        let state = self.read_state();
        let mut targets = BTreeMap::new();
        let mut gone = BTreeMap::new();
        // What a user's deletion took is gone with its gist (a summary of it was made again
        // without it, in its place): nothing of it is left to take, and a summary made again
        // in place of one named again is not the one named (helper-92: naming a taken summary
        // again took those made again in its place; after forgetting, each time anew).
        let names_deleted = request.events.iter().any(|s| state.deleted.contains(s));
        let by_user = match reason {
            Reason::Delete if names_deleted || !request.nodes.is_empty() => self.user_deleted()?,
            _ => BTreeSet::new(),
        };
        for &seq in &request.events {
            if state.deleted.contains(&seq) {
                if reason != Reason::Delete || by_user.contains(&seq) {
                    return Err(already_deleted(seq, false));
                }
                if let Some(ev) = self.raw_event(seq)? {
                    gone.insert(seq, ev.ts);
                }
                continue;
            }
            let ev = self
                .raw_event(seq)?
                .ok_or_else(|| Error::NotFound(format!("event {seq}")))?;
            let superseded_forgetting =
                reason == Reason::Forget && deletion::reason_of(&ev) == Some(Reason::Forget);
            if deletion::RESERVED_KINDS.contains(&ev.kind.as_str()) && !superseded_forgetting {
                return Err(Error::InvalidArgument {
                    name: "event".into(),
                    message: format!(
                        "event {seq} is a {} record, which cannot be deleted",
                        ev.kind
                    ),
                });
            }
            targets.insert(seq, ev.ts);
        }
        // A key the graph does not hold may still be named by events (a node retracted since:
        // its events are what a deletion for a person's data must take); one that no event
        // names is refused, so that a typo deletes nothing. (A miss in the graph checks its
        // blocks again, which the caller's replay of a damaged graph relies on.)
        let mut unnamed: Vec<&String> = request
            .nodes
            .iter()
            .filter(|k| state.node_id_named(k).is_none())
            .collect();
        // A forgotten event lives on in the summaries made from it: one naming a key the
        // graph lacks makes the key a person's data to delete, and the deletion takes its
        // gist; a user-deleted one does not: nothing of it is left. Whether a summary holds
        // it is found after ([`nothing_left_of`]).
        if !request.nodes.is_empty() {
            // Per requested node, the events holding it that count (`Chain`); and the
            // compaction's tombstones, which no record says the naming of.
            let mut chains: Vec<Chain> = request.nodes.iter().map(|_| Chain::default()).collect();
            let mut tombstones = BTreeSet::new();
            super::log::scan(&*self.backend, 1, &mut |seq, v| {
                let was_deleted = state.deleted.contains(&seq);
                // A forgotten event naming the node lives on in its summaries: a user's
                // deletion takes them. (Another deletion passes deleted events by, and every
                // deletion those a user deleted.)
                if was_deleted && (reason != Reason::Delete || by_user.contains(&seq)) {
                    return Ok(true);
                }
                let ev = decode_event(Table::Log.name(), v)?;
                if ev.kind == deletion::TOMBSTONE {
                    tombstones.insert(seq);
                }
                if deletion::RESERVED_KINDS.contains(&ev.kind.as_str()) {
                    return Ok(true);
                }
                let sources = made_from_events(&ev);
                let mut named = false;
                for (key, chain) in request.nodes.iter().zip(&mut chains) {
                    let names = names_node(&ev, key);
                    let made = (sources.as_deref(), !was_deleted);
                    if chain.take(seq, made, names, &tombstones) {
                        named = true;
                        unnamed.retain(|k| *k != key);
                    }
                }
                if named {
                    if was_deleted {
                        gone.insert(ev.seq, ev.ts);
                    } else {
                        targets.insert(ev.seq, ev.ts);
                    }
                }
                Ok(true)
            })?;
        }
        if let Some(missing) = unnamed.first() {
            return Err(Error::NotFound(format!("node {missing:?}")));
        }
        Ok((targets, gone))
    }

    /// Physically removes what deletions took out: rewrites the backend's files with every
    /// deleted event replaced by a tombstone (its sequence number, times and idempotency key),
    /// and rebuilds the full-text index from the log, so no file of the store holds the deleted
    /// text any more. The state is unchanged (replay of the compacted log gives the same
    /// views). Consumes the handle and returns the reopened store; the writer lock is held
    /// throughout. An interrupted compaction is finished or undone on the next open.
    ///
    /// When there is nothing to strip (every deleted event is a tombstone already) and the
    /// backend is redb, the file is compacted in place instead: the log, the snapshot and the
    /// full-text index stay as they are, and only the free pages go (a bulk load leaves about
    /// a third of the file free). At 1M edges: 0.6 s against 6.6 s for the rewrite. Readers in
    /// other processes hold the file while they read: it waits up to
    /// [`READERS_WAIT`](crate::storage::READERS_WAIT) for a moment none does, then is
    /// [`Error::Locked`].
    pub fn compact(self) -> Result<(Store, CompactReport)> {
        self.writable()?;
        self.flush_usage()?;
        let kind = self.backend.kind();
        let dir = self.dir.clone();
        if kind == BackendKind::Redb && !self.has_text_to_strip()? {
            return self.compact_in_place();
        }
        let tmp = fresh_files_dir(&dir)?;
        let mut report = CompactReport {
            bytes_before: dir_size(&dir),
            ..CompactReport::default()
        };
        // A failure part way leaves the store as it was; its half-written copy goes with it,
        // as a repair's does (it had stayed until the next open).
        if let Err(e) = self.write_compacted(kind, &tmp, &mut report) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        // Closing the handle releases the backend's files and the text index; the writer lock
        // is kept, so no other process opens the store between the swap and the reopen. (Uses
        // were flushed above, and a handle without its lock flushes nothing when dropped.)
        let mut this = self;
        let lock = this.lock.take();
        drop(this);
        // The snapshot may hold what deleted events had derived (one written before the
        // deletion, left by a crash): it goes too, and is written afresh from the reopened state.
        let store = swap_in_and_reopen(&dir, kind, lock, "compaction")?;
        report.bytes_after = dir_size(&dir);
        Ok((store, report))
    }
}

impl Store {
    /// Copies every table into fresh backend files in `tmp`, each deleted event's record as
    /// its tombstone, under the writer lock.
    fn write_compacted(
        &self,
        kind: BackendKind,
        tmp: &Path,
        report: &mut CompactReport,
    ) -> Result<()> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let deleted = self.read_state().deleted.clone();
        report.deleted_events = deleted.len();
        let fresh = kind.open(tmp)?;
        for table in Table::ALL {
            let mut batch = WriteBatch::default();
            let mut failed = None;
            let mut flush = |batch: &mut WriteBatch| {
                if batch.len() >= COPY_BATCH {
                    if let Err(e) = fresh.commit(std::mem::take(batch)) {
                        failed = Some(e);
                        return false;
                    }
                }
                true
            };
            if table == Table::Log {
                // Record by record, each deleted one as its tombstone.
                super::log::scan(&*self.backend, 0, &mut |seq, v| {
                    // A damaged record copied as it is would be met by the reopen's replay,
                    // after the snapshot that answers reads without it has gone.
                    crate::codec::check_record(Table::Log.name(), v)?;
                    let mut value = v.to_vec();
                    if deleted.contains(&seq) {
                        let ev = decode_event(Table::Log.name(), v)?;
                        if ev.kind != deletion::TOMBSTONE {
                            value = encode(&tombstone(&ev));
                            report.tombstones_written += 1;
                        }
                    }
                    super::log::put(&mut batch, seq, value);
                    Ok(flush(&mut batch))
                })?;
            } else {
                self.backend.scan(table, &[], None, &mut |k, v| {
                    batch.put(table, k, v.to_vec());
                    Ok(flush(&mut batch))
                })?;
            }
            if let Some(e) = failed {
                return Err(e);
            }
            fresh.commit(batch)?;
        }
        Ok(())
    }

    /// Whether a deleted event still has its record (not yet a tombstone).
    fn has_text_to_strip(&self) -> Result<bool> {
        let deleted = self.read_state().deleted.clone();
        for seq in deleted {
            // Read as any one record is, so damage names its file and event.
            if self
                .raw_event(seq)?
                .is_some_and(|ev| ev.kind != deletion::TOMBSTONE)
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// [`Store::compact`] when nothing is to be stripped: the redb file gives back its free
    /// pages; the writer lock is held throughout, as in the rewrite.
    fn compact_in_place(self) -> Result<(Store, CompactReport)> {
        let dir = self.dir.clone();
        let bytes_before = dir_size(&dir);
        let deleted_events = self.read_state().deleted.len();
        let mut this = self;
        let lock = this.lock.take();
        drop(this);
        crate::storage::RedbBackend::compact_file(&BackendKind::Redb.path_in(&dir))?;
        let manifest = read_manifest(&dir)?;
        let store = Store::open_with(dir.clone(), manifest, lock)?;
        let report = CompactReport {
            bytes_before,
            bytes_after: dir_size(&dir),
            deleted_events,
            ..CompactReport::default()
        };
        Ok((store, report))
    }
}

/// The edges a deleted event (one of `targets`) supported in `before` that the rest of the
/// log still asserts in `after`, less those that lost only summaries the summaries made again
/// (`made_seqs`) `replaced`, and that one of those supports. Ids are renumbered by the replay, so an
/// edge is found again by its ends' keys and its relation.
fn edges_weakened(
    before: &super::State,
    after: &super::State,
    targets: &BTreeMap<u64, i64>,
    replaced: &BTreeSet<u64>,
    made_seqs: &[u64],
    places: (Option<&PlacesTaken>, Option<u64>),
) -> usize {
    // Support moved from the `PLACES` events taken to the one made again is not lost either.
    let (places_taken, places_again) = places;
    let replaced = |s: &u64| replaced.contains(s) || places_taken.is_some_and(|p| p.takes(*s));
    // The summaries made again, by number (their events gone into the deletion's write).
    let made_seqs: BTreeSet<u64> = made_seqs.iter().copied().collect();
    let made = |s: &u64| made_seqs.contains(s) || places_again == Some(*s);
    let mut weakened = 0;
    for id in before.edges.ids() {
        let Some(e) = before.edge(id) else { continue };
        if !e.evidence.iter().any(|s| targets.contains_key(s)) {
            continue;
        }
        let ends = (before.nodes.key(e.from), before.nodes.key(e.to));
        let still = match ends {
            (Some(f), Some(t)) => match (after.node_id(f), after.node_id(t)) {
                (Some(f), Some(t)) => after
                    .relations
                    .get(&e.relation)
                    .and_then(|r| after.edge_id(f, r, t))
                    .and_then(|id| after.edge(id)),
                _ => None,
            },
            _ => None,
        };
        let Some(still) = still else { continue };
        // Support moved from summaries taken to those made again is not lost.
        let lost_only_replaced = e
            .evidence
            .iter()
            .filter(|s| targets.contains_key(s))
            .all(replaced);
        let restated_again = still.evidence.iter().any(made);
        if !(lost_only_replaced && restated_again) {
            weakened += 1;
        }
    }
    weakened
}

/// The keys of the nodes `event` upserts that `after` (the graph without the deleted events)
/// still holds.
fn nodes_still_asserted<'a>(
    event: &'a Event,
    after: &'a super::State,
) -> impl Iterator<Item = String> + 'a {
    event.assertions.iter().filter_map(move |a| match a {
        Assertion::UpsertNode(up) if after.node_id(&up.key).is_some() => Some(up.key.clone()),
        _ => None,
    })
}

/// Moves the compacted backend files from `tmp` over the live ones. redb's single file is
/// replaced by one rename; sled's directory goes aside first (`sled.old`), which
/// [`recover_compaction`] puts back if the process dies before the new one is in place.
pub(super) fn swap_in_compacted(kind: BackendKind, dir: &Path, tmp: &Path) -> Result<()> {
    let live = kind.path_in(dir);
    let fresh = kind.path_in(tmp);
    match kind {
        BackendKind::Redb => {
            crate::storage::RedbBackend::compact_file(&fresh)?;
            std::fs::rename(&fresh, &live).map_err(|e| Error::io(&live, e))?
        }
        BackendKind::Sled => {
            let old = dir.join(SLED_OLD);
            std::fs::rename(&live, &old).map_err(|e| Error::io(&live, e))?;
            std::fs::rename(&fresh, &live).map_err(|e| Error::io(&live, e))?;
            std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
        }
    }
    sync_dir(dir);
    Ok(())
}

/// After the swap: the full-text index may hold deleted text in its segments (a deleted
/// document stays in its segment until a merge), so it is removed and rebuilt from the log on
/// open; then the work directory goes, which marks the compaction done.
pub(super) fn finish_compaction(dir: &Path) -> Result<()> {
    crate::text::clear_dir(&dir.join(super::TEXT_DIR))?;
    let tmp = dir.join(COMPACT_DIR);
    std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    sync_dir(dir);
    Ok(())
}

/// The directory fresh backend files are written into (by a compaction or a repair), emptied
/// of what an earlier attempt left.
pub(super) fn fresh_files_dir(dir: &Path) -> Result<PathBuf> {
    let tmp = dir.join(COMPACT_DIR);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    Ok(tmp)
}

/// Puts the fresh files of [`fresh_files_dir`] in place of the store's (with the recovery
/// from a crash of [`recover_compaction`]) and reopens the store without its snapshot, so the
/// state is replayed from the log, then snapshots it. `lock` is the writer lock the closed
/// handle held, so no other process opened the store in between; `after` names the rewrite
/// in a warning.
pub(super) fn swap_in_and_reopen(
    dir: &Path,
    kind: BackendKind,
    lock: Option<StoreLock>,
    after: &str,
) -> Result<Store> {
    super::snapshot::remove(dir)?;
    swap_in_compacted(kind, dir, &dir.join(COMPACT_DIR))?;
    finish_compaction(dir)?;
    let manifest = read_manifest(dir)?;
    let store = Store::open_with(dir.to_path_buf(), manifest, lock)?;
    if let Err(e) = store.checkpoint() {
        tracing::warn!(error = %e, "the state snapshot could not be written after {after}");
    }
    Ok(store)
}

/// Finishes or undoes a compaction that a crash interrupted (called by a writer's open):
/// before the swap, the work directory is dropped and the old files stay; after it, the text
/// index is rebuilt as [`finish_compaction`] would have.
pub(super) fn recover_compaction(dir: &Path, kind: BackendKind) -> Result<()> {
    let tmp = dir.join(COMPACT_DIR);
    let old = dir.join(SLED_OLD);
    if kind == BackendKind::Sled && old.exists() {
        let live = kind.path_in(dir);
        if live.exists() {
            // The swap completed; only the old copy's removal did not.
            std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
        } else {
            std::fs::rename(&old, &live).map_err(|e| Error::io(&live, e))?;
        }
    }
    if !tmp.exists() {
        return Ok(());
    }
    if kind.path_in(&tmp).exists() && kind.path_in(dir).exists() {
        // Compaction and repair write their fresh files alike: either may have been cut short.
        tracing::warn!("an interrupted compaction or repair is dropped; the store is as before it");
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    } else {
        tracing::warn!(
            "finishing an interrupted compaction or repair: its fresh files are in place, and the text index is rebuilt"
        );
        finish_compaction(dir)?;
    }
    Ok(())
}

/// Makes renames inside `dir` durable where the platform allows (best effort: a failure
/// leaves the old name, which the next open handles).
fn sync_dir(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.sync_all();
    }
}
