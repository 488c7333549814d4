//! The store: the event log and every view derived from it, behind one handle.
//!
//! Write path (one writer at a time): number the drafts, project them against the current state
//! into an overlay (nothing changes yet), commit log records and their index records in one
//! atomic, durable backend batch, then apply the overlay to the in-memory state under the write
//! lock and, at the same time on another core, to the full-text index (which records the log
//! position it reached, and is caught up on the next open if the process dies first). Readers
//! take the read lock, so they see the state before or after a batch, never inside one. The
//! state is the only derived copy of the graph: a checkpoint writes it to the snapshot, and an
//! open maps that and replays the log after it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, RwLock};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::codec::{decode, decode_event, encode, encode_event, peek_event_kind};
use crate::dynamics::deletion;
use crate::dynamics::salience::{words_of, SalienceInputs};
use crate::dynamics::usage::{Item, Pending, Tier, TierCounts, TierPolicy, Usage};
use crate::dynamics::working::{WmOp, WorkingMemory};
use crate::dynamics::{DecayPolicy, SaliencePolicy};
use crate::error::{Error, Result};
use crate::graph::{Adjacency, DecayFilter, Direction, IdSet, Interner, TraversalFilter};
use crate::model::{Assertion, Edge, EdgeId, Event, EventDraft, Node, NodeId};
use crate::projection::{
    project_batch, Counters, Hint, KeyHints, Missing, Overlay, ProjectionBase,
};
use crate::storage::{Backend, BackendKind, StoreLock, Table, WriteBatch};
use crate::text::{node_doc_key, Hit, SearchFilter, TextDoc, TextIndex};

mod deleting;
mod edge_details;
mod edge_table;
mod emerging;
mod failed_commits;
mod folds;
mod key_index;
mod log;
mod node_table;
mod records;
mod remaking;
mod repair;
mod restating;
mod snapshot;
mod summary_index;

use edge_details::EdgeDetails;
use edge_table::EdgeTable;
use folds::Folds;
use key_index::KeyIndex;
use node_table::NodeTable;

pub use deleting::CompactReport;
pub use repair::RepairReport;
pub use snapshot::SNAPSHOT_FORMAT;
pub use summary_index::SummaryEntry;

/// Format of the store directory (manifest and table layout), written by this build.
/// 2: the edges table holds rows of 16 edges, and log records may be compressed (record
/// format 4). A build that reads only format 1 would miss most edges of a row and fail on a
/// compressed record, so the number changes and such a build refuses the store.
/// 3: no table holds nodes or edges: the state is the log's projection, kept in the snapshot
/// and replayed past it. A build of format 2 would load an empty graph from the empty tables,
/// so it must refuse the store.
/// 4: a large log record may keep its event's head apart from its compressed rest (record
/// format 7), which a build of format 3 cannot read: it refuses the store, rather than find
/// the first such record damaged. The derived state is as format 3's (its snapshot is read).
pub const STORE_FORMAT: u32 = 4;
/// The oldest store format whose state a snapshot of this build's holds as this build derives
/// it: a snapshot made for a store of it is read (formats 3 and 4 differ only in how the log
/// compresses a record).
pub(crate) const OLDEST_SNAPSHOT_STORE_FORMAT: u32 = 3;
/// The oldest store format this build opens. An older store is read as it is (its state is
/// replayed from its log; its tables are not read), and marked with this build's format
/// (meta table, then manifest) when it is first opened for writing, before its nodes and
/// edges tables are emptied.
const OLDEST_STORE_FORMAT: u32 = 1;
/// The store's manifest, naming its backend and format.
pub(crate) const MANIFEST: &str = "loci.json";
/// The file a manifest is written to before it is renamed over [`MANIFEST`].
const MANIFEST_TMP: &str = "loci.json.tmp";
/// The directory of the full-text index, in the store's.
pub(crate) const TEXT_DIR: &str = "text";
const META_COUNTERS: &[u8] = b"counters";
const META_FORMAT: &[u8] = b"format";
const META_BACKEND: &[u8] = b"backend";
const META_PROJECTION: &[u8] = b"projection";
/// The sequence numbers of deleted events (derived from the log's deletion events).
const META_DELETED: &[u8] = b"deleted";
/// The log position below which no snapshot can be brought up to date: the last commit that
/// changed the derived state whole (a deletion, which renumbers ids; a rebuild under new
/// derivation rules).
const META_SNAPSHOT_FLOOR: &[u8] = b"snapshot_floor";
/// The last deletion, which gave every node, edge and relation id anew (its sequence number):
/// the text index records the one its node documents' ids are of (`TextIndex::ids_floor`).
const META_IDS_FLOOR: &[u8] = b"ids_floor";
/// [`State::ids_floor`] of a reader whose graph is from before a deletion it did not load: no
/// index's floor equals it.
const IDS_FLOOR_UNKNOWN: u64 = u64::MAX - 1;
/// The ids floor a text index records after a deletion failed to write its node documents
/// again: no graph's equals it, so searches leave its node hits out, and the next open for
/// writing rebuilds it.
const IDS_FLOOR_CUT_SHORT: u64 = u64::MAX - 2;
/// How long a search waits for a deletion in its process to write every node's document
/// again (`Rewriting`); past it, the search finds the nodes written so far, and says so.
const REWRITE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Documents a full rebuild of the text index commits at a time (`Store::rebuild_text`).
const REBUILD_DOCS_PER_COMMIT: usize = 100_000;
/// Documents and node keys past which the full-text index is not caught up in one commit but
/// rebuilt ([`Store::catch_up_text_locked`]): as many as a rebuild holds at a time.
const CATCH_UP_MOST: usize = REBUILD_DOCS_PER_COMMIT;

/// How [`Store::catch_up_text_locked`] brought the full-text index to the log's end.
#[derive(Debug, PartialEq)]
enum TextCaughtUp {
    /// The documents of the events it missed, and of the nodes they touch, in one commit.
    InOneCommit,
    /// Built again from the whole log.
    Rebuilt,
}
/// Changes (ids and events) since the snapshot after which a commit writes a new one, at
/// least; the bar rises with the graph's size (see [`CHECKPOINT_GROWTH`]).
const CHECKPOINT_AFTER: u64 = 65_536;
/// A commit writes a new snapshot once the changes since the last reach this many times the
/// nodes and edges it held: a growing store writes one each time it triples, so the
/// snapshots of a load sum to half its final one, and its heap holds at most twice what the
/// last snapshot maps. Doubling (1) wrote as much again as the final snapshot during the
/// load: a 100M-edge load took 510k edges/s for a peak of 64.9 B/edge, against 648k and 66.6
/// tripling, and 704k and 77.5 with no snapshot before the close (one run each).
const CHECKPOINT_GROWTH: u64 = 2;
/// Changes since the snapshot after which closing a writer writes a new one (below it, the
/// replay on the next open costs about as much as writing the snapshot now).
const CHECKPOINT_ON_CLOSE: u64 = 4_096;
/// Version of the rules that derive nodes and edges from the log (`projection`). A store whose
/// derived state was made by other rules has it replayed from its log when it is opened (a
/// snapshot records the version it was made under).
/// 2: node and edge salience derive from the events that assert them.
/// 3: the episodic index (`event_facet`) exists.
/// 4: a summary raises no node's or edge's salience (it restates them).
/// 5: a pin, unpin or promotion of a node not there makes none.
/// 6: a summary moves no node's `updated` time.
/// 7: the episodic index holds the summary index (`store/summary_index.rs`).
/// 8: a name given that is one of the node's aliases takes it out of them.
pub const PROJECTION_VERSION: u32 = 8;
/// Events per projection chunk when replaying the log.
const REPLAY_CHUNK: usize = 4096;
/// Assertions per projection chunk when replaying the log, at most (past one event's): a
/// bulk load's events carry a thousand each, and 4,096 of them in one overlay held 4M edges
/// at a few hundred bytes each, where live ingest's batches hold 100k.
const REPLAY_ASSERTIONS: usize = 100_000;

/// Whether a replay's `chunk` of events, holding `assertions`, is projected now: the log's
/// events and the extra ones alike.
fn chunk_full(chunk: &[Event], assertions: usize) -> bool {
    chunk.len() == REPLAY_CHUNK || assertions >= REPLAY_ASSERTIONS
}

/// The store directory's `loci.json`: its format and which backend holds its log. A key it
/// does not have is refused: a typo would otherwise be read as nothing, and a later build
/// that adds one raises `format`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    format: u32,
    backend: BackendKind,
}

/// The compact in-memory form of an edge: what filters and traversals need.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EdgeCore {
    pub from: NodeId,
    pub to: NodeId,
    /// Interned relation id (see [`GraphRead::relation_name`]).
    pub relation: u32,
    pub confidence: f32,
    /// `i64::MIN` when unbounded.
    pub valid_from: i64,
    /// `i64::MAX` when unbounded.
    pub valid_to: i64,
    pub last_seen: i64,
    /// The highest salience of the events that asserted the edge.
    pub salience: f32,
}

impl EdgeCore {
    /// Whether the edge has a `valid_from` or a `valid_to`.
    pub fn has_bounds(&self) -> bool {
        self.valid_from != i64::MIN || self.valid_to != i64::MAX
    }
}

/// The derived in-memory state: nodes, compact edges, adjacency and key maps.
#[derive(Default)]
pub(crate) struct State {
    nodes: NodeTable,
    node_keys: KeyIndex,
    /// Edge cores by id. There is no key map `(from, relation, to) -> id`: the adjacency
    /// answers that from the shorter of the two endpoint lists ([`State::edge_id`]), and a map
    /// would cost more memory per edge than the core itself.
    edges: EdgeTable,
    /// What a full edge record holds beyond its core: properties, recorded time, evidence.
    details: EdgeDetails,
    relations: Interner,
    labels: Interner,
    adj: Adjacency,
    counters: Counters,
    /// The latest world time of any event: "now" for decay, unless a reader gives its own.
    latest_ts: Option<i64>,
    /// Events deleted by deletion events (`dynamics::deletion`): out of every view.
    deleted: BTreeSet<u64>,
    /// Working memory and usage (`folds`).
    folds: Folds,
    /// Changes whenever a node or an edge does (see [`Store::graph_epoch`]); unique in the
    /// process, so a state replaced whole (compaction) never repeats an earlier value.
    graph_epoch: u64,
    /// Changes whenever the ids of nodes, edges or relations may have (the state replaced by
    /// a replay: a deletion renumbers them all); what is derived from the ids must not be
    /// used across a change of it (see [`Store::ids_epoch`]).
    ids_epoch: u64,
    /// The last deletion whose ids the graph's are ([`META_IDS_FLOOR`]); a text index of
    /// another gives node hits this graph cannot read (see [`Store::searches_nodes`]).
    ids_floor: u64,
    /// What reads of the sections mapped from the snapshot found, when the state was read
    /// from one (`crate::mapped`).
    mapped_damage: Option<std::sync::Arc<crate::mapped::Damage>>,
}

/// A fresh graph epoch.
fn next_graph_epoch() -> u64 {
    static EPOCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    EPOCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Why a state read from a damaged snapshot is not written into the next one.
const DAMAGED_SNAPSHOT: &str = "the state snapshot this store was opened from is damaged (a block of it fails its checksum or holds ids out of range)";

impl State {
    /// Whether a read has found a block of the snapshot this state is mapped from damaged
    /// (what it held reads as missing).
    fn damage_found(&self) -> bool {
        self.mapped_damage.as_ref().is_some_and(|d| d.found())
    }

    /// Checks every block of the sections mapped from the snapshot, when the state was read
    /// from one: why not, when a block is damaged (it reads as missing, so the state is not
    /// what the snapshot was taken of).
    fn check_mapped(&self) -> std::result::Result<(), String> {
        let Some(damage) = &self.mapped_damage else {
            return Ok(());
        };
        let sound = self.edges.check_mapped()
            & self.details.check_mapped()
            & self.adj.check_mapped()
            & self.node_keys.check_mapped()
            & self.nodes.check_mapped();
        // The live counts came from the body and were kept since; a crafted body could have
        // them wrong under a right checksum.
        let nodes = self.nodes.ids().count();
        let edges = self.edges.ids().count();
        let counts = nodes == self.nodes.live_count()
            && nodes == self.adj.node_count()
            && edges == self.edges.live_count()
            && edges == self.adj.edge_count();
        if !counts {
            damage.record();
        }
        if sound && counts && !damage.found() {
            Ok(())
        } else {
            Err(DAMAGED_SNAPSHOT.into())
        }
    }

    /// Marks the state as one whose ids may all have been given anew (a replay of the log
    /// replaced it): a fresh graph epoch, and the ids epoch with it.
    fn ids_given_anew(&mut self) {
        self.graph_epoch = next_graph_epoch();
        self.ids_epoch = self.graph_epoch;
    }

    /// Takes the graph of `mapped` (read from a snapshot of this same graph) in place of its
    /// own; the counters, deletions, folds and epoch stay: nothing a reader sees changes.
    fn adopt_graph(&mut self, mapped: State) {
        let State {
            nodes,
            node_keys,
            edges,
            details,
            relations,
            labels,
            adj,
            mapped_damage,
            ..
        } = mapped;
        self.nodes = nodes;
        self.node_keys = node_keys;
        self.edges = edges;
        self.details = details;
        self.relations = relations;
        self.labels = labels;
        self.adj = adj;
        self.mapped_damage = mapped_damage;
    }

    fn put_node(&mut self, n: &Node) {
        let label = self.labels.intern(&n.label);
        self.adj.set_node(n.id, label);
        self.adj.set_pinned(n.id, n.pinned);
        if let Some(old) = self.nodes.key(n.id) {
            if old != n.key {
                self.node_keys.remove(&self.nodes, old);
            }
        }
        self.nodes.put(n, &self.labels);
        self.node_keys.insert(&self.nodes, &n.key, n.id);
    }

    /// Changes a live edge in place: its core, its last-seen time and what its adjacency
    /// entries carry. Its endpoints and relation are its identity and stay; should they not
    /// (a bug), it is removed and put back.
    fn update_edge(&mut self, e: &Edge) {
        let same = self.edge_core(e.id).is_some_and(|c| {
            c.from == e.from
                && c.to == e.to
                && self.relations.name_checked(c.relation) == Some(e.relation.as_str())
        });
        if !same {
            self.remove_edge(e.id);
            let sides = self.put_edge(e);
            self.adj.add_sides(&sides);
            return;
        }
        // The core and time in their slots; the sides in place of the ones the lists hold.
        let [(_, side), _] = self.put_edge(e);
        self.adj
            .update_edge(e.id, e.from, e.to, e.confidence, side.is_bounded());
    }

    /// Puts an edge's core in its slot and its last-seen time in place, and gives its two
    /// adjacency entries, which the caller adds with the batch's others.
    fn put_edge(&mut self, e: &Edge) -> [(NodeId, crate::graph::AdjEntry); 2] {
        let relation = self.relations.intern(&e.relation);
        let core = EdgeCore {
            from: e.from,
            to: e.to,
            relation,
            confidence: e.confidence,
            valid_from: e.valid_from.unwrap_or(i64::MIN),
            valid_to: e.valid_to.unwrap_or(i64::MAX),
            last_seen: e.last_seen,
            salience: e.salience,
        };
        let bounded = e.valid_from.is_some() || e.valid_to.is_some();
        self.adj.set_last_seen(e.id, e.last_seen);
        self.edges.put(e.id, &core);
        Adjacency::sides(e.id, e.from, e.to, relation, e.confidence, bounded)
    }

    /// Clears a node slot; its edges must have been removed first.
    fn remove_node(&mut self, id: NodeId) {
        if let Some(key) = self.nodes.key(id) {
            self.node_keys.remove(&self.nodes, key);
            self.nodes.remove(id);
        }
        self.adj.set_pinned(id, false);
        self.adj.remove_node(id);
    }

    fn remove_edge(&mut self, id: EdgeId) {
        if let Some((from, to)) = self.edges.remove(id) {
            self.adj.remove_edge(id, from, to);
        }
    }

    /// Applies a projected batch.
    fn apply(&mut self, ov: &Overlay) {
        for ev in &ov.events {
            self.folds.apply(ev);
        }
        if let Some(t) = ov.events.iter().map(|e| e.ts).max() {
            self.latest_ts = Some(self.latest_ts.map_or(t, |l| l.max(t)));
        }
        // Edges first: a retracted node's edges leave both endpoint lists before the node slot
        // is cleared.
        // A live edge changed in place, one gone removed; then every list grows once with
        // the batch's new edges, in id order (`Adjacency::add_sides`).
        let mut sides = Vec::with_capacity(2 * ov.edges.len());
        for (id, e) in ov.edges.iter() {
            match e {
                Some(e) if self.edges.is_live(id) => self.update_edge(e),
                Some(e) => sides.extend(self.put_edge(e)),
                None => self.remove_edge(id),
            }
        }
        // The lists and the rows of edge details are apart: each takes the batch on a core
        // (a small batch on this one: a wake of the pool costs more than it saves).
        let (adj, details) = (&mut self.adj, &mut self.details);
        let mut add_sides = || adj.add_sides(&sides);
        let mut add_details = || details.apply(ov.edges.iter().map(|(id, e)| (id, e.as_ref())));
        if ov.edges.len() < PARALLEL_FROM {
            add_sides();
            add_details();
        } else {
            rayon::join(add_sides, add_details);
        }
        for (id, n) in ov.nodes.iter() {
            match n {
                Some(n) => self.put_node(n),
                None => self.remove_node(id),
            }
        }
        self.counters = ov.counters;
        if !ov.nodes.is_empty() || !ov.edges.is_empty() {
            self.graph_epoch = next_graph_epoch();
        }
        self.adj.compact_if_fragmented();
    }

    fn node(&self, id: NodeId) -> Option<Node> {
        self.nodes.get(id, &self.labels)
    }

    /// Every live node, decoded, in id order.
    fn all_nodes(&self) -> impl Iterator<Item = Node> + '_ {
        self.nodes.ids().filter_map(|id| self.node(id))
    }

    /// Where the heap bytes of this state go (vectors count their capacity; the allocator's
    /// rounding of each node record is not counted).
    fn heap_bytes(&self) -> StateBytes {
        let nodes = self.nodes.heap_bytes();
        let node_keys = self.node_keys.heap_bytes();
        StateBytes {
            nodes,
            node_keys,
            edges: self.edges.heap_bytes() + self.details.heap_bytes(),
            adjacency: self.adj.heap_bytes(),
        }
    }

    /// Live nodes and edges: what the checkpoint rule weighs changes against.
    fn graph_size(&self) -> u64 {
        (self.adj.node_count() + self.adj.edge_count()) as u64
    }

    /// The live node with key `key`.
    fn node_id(&self, key: &str) -> Option<NodeId> {
        self.node_keys.get(&self.nodes, key)
    }

    /// [`State::node_id`] of each of `keys`, in order, into `found`; the lookups' waits on
    /// memory overlap (`KeyIndex::get_many`).
    fn node_ids(&self, keys: &[&str], found: &mut Vec<Option<NodeId>>) {
        self.node_keys.get_many(&self.nodes, keys, found);
    }

    /// Checks again the mapped blocks a lookup of `key` reads (`KeyIndex::recheck_mapped`):
    /// what finds one damaged records it, so that [`State::damage_found`] says so.
    fn recheck_key(&self, key: &str) {
        self.node_keys.recheck_mapped(&self.nodes, key);
    }

    /// [`State::node_id`] of a key that must exist (a user named it): a miss checks again
    /// the blocks its lookup read ([`State::recheck_key`]), so that damage found there is
    /// recorded rather than the miss passing for the key being unknown.
    fn node_id_named(&self, key: &str) -> Option<NodeId> {
        let found = self.node_id(key);
        if found.is_none() {
            self.recheck_key(key);
        }
        found
    }

    /// The keys of the live nodes named each of `names` (their name, read in place), in one
    /// pass over the nodes: a name another node bears too is no trace of a deleted one in a
    /// text.
    fn keys_named(&self, names: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
        let mut keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        if names.is_empty() {
            return keys;
        }
        for id in self.nodes.ids() {
            if let (Some(name), Some(key)) = (self.nodes.name(id), self.nodes.key(id)) {
                if names.contains(name) {
                    keys.entry(name.to_string())
                        .or_default()
                        .insert(key.to_string());
                }
            }
        }
        keys
    }

    /// The live edge `from -relation-> to`, by node keys.
    fn edge_by_keys(&self, from: &str, relation: &str, to: &str) -> Option<Edge> {
        let base = LiveBase { state: self };
        match (base.node_id(from), base.node_id(to)) {
            (Some(f), Some(t)) => base.edge_id(f, relation, t),
            _ => None,
        }
        .and_then(|id| self.edge(id))
    }

    /// The core of live edge `id`.
    fn edge_core(&self, id: EdgeId) -> Option<EdgeCore> {
        self.edges.get(id, self.adj.last_seen(id))
    }

    /// The full record of live edge `id`: its core and its details. `None` for an edge whose
    /// details are missing too (a damaged block of the snapshot reads as missing).
    fn edge(&self, id: EdgeId) -> Option<Edge> {
        let core = self.edge_core(id)?;
        let Some(details) = self.details.get(id) else {
            // A live edge without its details: what the snapshot held of them is damaged
            // (recorded, so that a batch replays the graph from the log rather than make the
            // edge again).
            if let Some(d) = &self.mapped_damage {
                d.record();
            }
            return None;
        };
        Some(Edge {
            id,
            from: core.from,
            relation: self.relations.name_checked(core.relation)?.to_string(),
            to: core.to,
            props: details.props,
            confidence: core.confidence,
            valid_from: (core.valid_from != i64::MIN).then_some(core.valid_from),
            valid_to: (core.valid_to != i64::MAX).then_some(core.valid_to),
            recorded: details.recorded,
            last_seen: core.last_seen,
            evidence: details.evidence,
            salience: core.salience,
        })
    }

    /// Every live edge's full record, in id order.
    fn all_edges(&self) -> impl Iterator<Item = Edge> + '_ {
        self.edges.ids().filter_map(|id| self.edge(id))
    }

    /// The live edge `from -relation-> to`, if any.
    fn edge_id(&self, from: NodeId, relation: u32, to: NodeId) -> Option<EdgeId> {
        self.adj.find_edge(from, relation, to)
    }

    /// [`State::edge_id`] of a relation by name (none for a name never interned).
    fn edge_id_named(&self, from: NodeId, relation: &str, to: NodeId) -> Option<EdgeId> {
        self.edge_id(from, self.relations.get(relation)?, to)
    }
}

/// Whether a checkpoint moves the state onto the snapshot it writes (not when the store is
/// closing).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Adopt {
    Yes,
    No,
}

/// How the graph part of an opened state was loaded.
struct Loaded {
    source: StateSource,
    /// Changes the next open would catch up on.
    since_snapshot: u64,
    /// Nodes and edges of the snapshot read (see [`Store::snapshot_size`]); 0 for none.
    snapshot_size: u64,
    /// The log replayed to fewer node or edge ids than the meta table's counters say were
    /// given out (see [`Store::replay_whole_log`]): the counters and the text index are
    /// the log's to take.
    fewer_ids: bool,
}

/// How long each stage of the open took, in milliseconds (see [`Stats::open_ms`]), so that a
/// slow open says where its time went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OpenTimings {
    /// Opening the backend and checking its meta table.
    pub backend: f64,
    /// Reading the snapshot's header and body and checking its checksum, then mapping its
    /// sections (0 without one).
    pub snapshot_read: f64,
    /// Checking the snapshot's node records, copying them into the node table and deriving
    /// the key index, labels and pins.
    pub snapshot_nodes: f64,
    /// Of `snapshot_read`, reading the body's counts and mapping the sections: the edge
    /// slots and the adjacency (checked block by block as they are read, later).
    pub snapshot_edges: f64,
    /// The whole in-memory state: the stages above and the replay of the log past the
    /// snapshot (or of the whole log, without one), folds and the deleted set.
    pub state: f64,
    /// Opening the full-text index and bringing it up to the log.
    pub text: f64,
    /// The whole open.
    pub total: f64,
}

/// Milliseconds since `t`.
fn ms_since(t: std::time::Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The nodes `state` gives the keys of each draft's assertions (see [`KeyHints`]), looked up
/// on every core: one key lookup per edge end, each a cache miss into the node records, was
/// most of both the salience scoring and the projection of a bulk load.
fn key_hints(state: &State, drafts: &[EventDraft]) -> KeyHints {
    let lists: Vec<&[Assertion]> = drafts.iter().map(|d| d.assertions.as_slice()).collect();
    key_hints_of(state, &lists)
}

/// [`key_hints`] of each list of assertions (a draft's or a logged event's).
fn key_hints_of(state: &State, lists: &[&[Assertion]]) -> KeyHints {
    let hints_of = |assertions: &&[Assertion]| {
        // Every key of the list looked up at once, so that the lookups' waits on memory
        // overlap (`KeyIndex::get_many`); each assertion's ends are then its keys' ids.
        let end_keys: Vec<[Option<&str>; 2]> = assertions
            .iter()
            .map(|a| match a {
                Assertion::UpsertNode(up) => [Some(up.key.as_str()), None],
                Assertion::UpsertEdge(e) => [Some(e.from.as_str()), Some(e.to.as_str())],
                Assertion::RetractNode { .. } | Assertion::RetractEdge { .. } => [None, None],
            })
            .collect();
        let keys: Vec<&str> = end_keys.iter().flatten().flatten().copied().collect();
        let mut ids = Vec::with_capacity(keys.len());
        state.node_ids(&keys, &mut ids);
        let mut ids = ids.into_iter();
        let ends: Vec<[Option<NodeId>; 2]> = end_keys
            .iter()
            .map(|pair| pair.map(|key| key.and_then(|_| ids.next().flatten())))
            .collect();
        edge_hints(state, assertions, &ends)
    };
    // A small batch on this core: a wake of the pool costs more than it saves (a replay that
    // stops before each of many summaries applies many small chunks).
    if lists.iter().map(|l| l.len()).sum::<usize>() < PARALLEL_FROM {
        lists.iter().map(hints_of).collect()
    } else {
        lists.par_iter().map(hints_of).collect()
    }
}

/// The fewest edges (or assertions) a batch has for its work to be shared among cores.
const PARALLEL_FROM: usize = 256;

/// The [`Hint`]s of `assertions`, whose ends `state` gives as `ends`. The edge between two
/// known ends is looked up in the shorter of their lists, and those lookups would each wait
/// on memory two or three times (both lengths, then the list): the lengths are fetched
/// ahead two steps of [`EDGES_AHEAD`] edges before, the shorter list's start one step.
fn edge_hints(state: &State, assertions: &[Assertion], ends: &[[Option<NodeId>; 2]]) -> Vec<Hint> {
    let both = |j: usize| match (assertions.get(j), ends.get(j)) {
        (Some(Assertion::UpsertEdge(_)), Some([Some(from), Some(to)])) => Some((*from, *to)),
        _ => None,
    };
    let mut hints = Vec::with_capacity(assertions.len());
    for k in 0..assertions.len() + 2 * EDGES_AHEAD {
        if let Some((from, to)) = both(k) {
            state.adj.prefetch_degree(from);
            state.adj.prefetch_degree(to);
        }
        if let Some((from, to)) = k.checked_sub(EDGES_AHEAD).and_then(both) {
            state.adj.prefetch_entries(state.adj.shorter_list(from, to));
        }
        let Some(j) = k
            .checked_sub(2 * EDGES_AHEAD)
            .filter(|&j| j < assertions.len())
        else {
            continue;
        };
        hints.push(match &assertions[j] {
            Assertion::UpsertEdge(e) => edge_hint(state, e, ends[j]),
            _ => Hint {
                ends: ends[j],
                edge: None,
            },
        });
    }
    hints
}

/// Edges ahead of the lookup each step of [`edge_hints`] fetches.
const EDGES_AHEAD: usize = 8;

/// The [`Hint`] of an edge upsert whose ends `state` gives as `ends`: those, and the edge
/// between them when both are in `state`.
fn edge_hint(state: &State, e: &crate::model::EdgeUpsert, ends: [Option<NodeId>; 2]) -> Hint {
    let edge = match ends {
        [Some(from), Some(to)] => state.edge_id_named(from, &e.relation, to),
        _ => None,
    };
    Hint { ends, edge }
}

/// Differences between the adjacency of `live` and of `replayed`: every field an entry holds
/// (a traversal reads the relation and the validity flag from it, not from the edge), each
/// node's label (label filters read it from the adjacency, not from the node's record) and
/// whether it is pinned (tiers and decay floors read the adjacency's set of pins).
/// Relation and label ids are compared by name: each state interns its own.
fn compare_adjacency(report: &mut VerifyReport, live: &State, replayed: &State) {
    // A live id's replayed id, by name; `u32::MAX` for a name the replay never interned.
    let same_id = |from: &crate::graph::Interner, to: &crate::graph::Interner| -> Vec<u32> {
        (0..from.len() as u32)
            .map(|id| to.get(from.name(id)).unwrap_or(u32::MAX))
            .collect()
    };
    let (relation_ids, label_ids) = (
        same_id(&live.relations, &replayed.relations),
        same_id(&live.labels, &replayed.labels),
    );
    let in_replayed = |ids: &[u32], id: u32| ids.get(id as usize).copied().unwrap_or(u32::MAX);
    let bound = live.adj.node_bound().max(replayed.adj.node_bound());
    for n in 0..bound as u32 {
        let node = NodeId(n);
        let entries = |s: &State, relation: &dyn Fn(u32) -> u32| {
            let mut v: Vec<(u32, u32, bool, bool, u32, u32)> = s
                .adj
                .entries(node)
                .map(|e| {
                    (
                        e.edge,
                        e.node,
                        e.is_incoming(),
                        e.is_bounded(),
                        relation(e.relation()),
                        e.confidence.to_bits(),
                    )
                })
                .collect();
            v.sort_unstable();
            v
        };
        if entries(live, &|r| in_replayed(&relation_ids, r)) != entries(replayed, &|r| r) {
            report.differ(format!("adjacency of node {node} differs"));
        }
        let pinned = |s: &State| s.adj.is_pinned(n) && s.nodes.key_bytes(node).is_some();
        if pinned(live) != pinned(replayed) {
            report.differ(format!(
                "node {node} in the adjacency's pins: live {}, replayed {}",
                pinned(live),
                pinned(replayed)
            ));
        }
        let live_label = live.adj.label_of(node).map(|l| in_replayed(&label_ids, l));
        let replayed_label = replayed.adj.label_of(node);
        if live_label != replayed_label {
            report.differ(format!(
                "label of node {node} in the adjacency: live {:?}, replayed {:?}",
                live.adj
                    .label_of(node)
                    .and_then(|l| live.labels.name_checked(l)),
                replayed_label.map(|l| replayed.labels.name(l))
            ));
        }
    }
}

/// Where an open got the derived in-memory state from (see [`Store::checkpoint`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "from")]
#[non_exhaustive]
pub enum StateSource {
    /// Replayed from the whole log (no usable snapshot).
    #[default]
    Log,
    /// The snapshot taken after event `seq`, with the events after it replayed: `caught_up`
    /// changes (node and edge ids, and events).
    Snapshot { seq: u64, caught_up: u64 },
}

/// The state seen by the projection.
struct LiveBase<'a> {
    state: &'a State,
}

impl ProjectionBase for LiveBase<'_> {
    fn node_id(&self, key: &str) -> Option<NodeId> {
        self.state.node_id(key)
    }
    fn recheck_key(&self, key: &str) {
        self.state.recheck_key(key);
    }
    fn node(&self, id: NodeId) -> Option<Node> {
        self.state.node(id)
    }
    fn edge_id(&self, from: NodeId, relation: &str, to: NodeId) -> Option<EdgeId> {
        self.state.edge_id_named(from, relation, to)
    }
    fn edge(&self, id: EdgeId) -> Result<Option<Edge>> {
        Ok(self.state.edge(id))
    }
    fn incident_edges(&self, node: NodeId) -> Vec<EdgeId> {
        self.state.adj.entries(node).map(|e| e.edge_id()).collect()
    }
    fn counters(&self) -> Counters {
        self.state.counters
    }
}

/// The furthest world time from 0 an event may have: the difference of any two fits an
/// `i64` (ages, decay), and `i64`'s ends stay the marks of open validity. Nanoseconds since
/// 1970 reach it in 2043; seconds, milliseconds and microseconds never do.
pub const MAX_ABS_TS: i64 = 1 << 61;

/// Refuses a caller's drafts at a world time past [`MAX_ABS_TS`]: one event at `i64::MAX` had
/// been taken, and as the store's "now" it aged every fact to nothing. (The store's own
/// drafts may pass it: a summary's time is the start of its day or week, which for an event
/// near the range's start lies before it, within ±2^62; `docs/design.md`.) An edge's
/// `valid_from` and `valid_to` are held to the same range, but for `i64::MIN` as a start and
/// `i64::MAX` as an end, the marks of an open bound.
fn refuse_times_out_of_range(drafts: &[EventDraft]) -> Result<()> {
    for (i, d) in drafts.iter().enumerate() {
        if let Some(message) = time_out_of_range(d.ts) {
            return Err(Error::InvalidEvent {
                event: i,
                assertion: None,
                field: "ts".into(),
                message,
            });
        }
        // An edge's validity bounds are world times too: near i64's ends, arithmetic on them
        // in a query read as null. The start's end and the end's end are the marks of an
        // open bound, as the state keeps one. Checked here, not in the projection, so that a
        // log written before the check still replays.
        for (j, a) in d.assertions.iter().enumerate() {
            let Assertion::UpsertEdge(up) = a else {
                continue;
            };
            let bounds = [
                ("valid_from", up.valid_from, i64::MIN),
                ("valid_to", up.valid_to, i64::MAX),
            ];
            for (field, t, open) in bounds {
                if let Some(message) = t.filter(|&t| t != open).and_then(time_out_of_range) {
                    return Err(Error::InvalidEvent {
                        event: i,
                        assertion: Some(j),
                        field: field.into(),
                        message,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Refuses drafts that no caller may append, whatever the store holds: the kinds only the
/// store writes, world times past the bounds, blank actors. [`Store::ingest`] and its dry run
/// [`Store::check`] both ask this first, so a file the dry run passes is not refused for its
/// shape when ingested.
///
/// Each check stops at the first event it refuses; the batch's refusal is the earliest
/// event's, whichever check refused it, so that a file's error names its first bad line.
fn refuse_drafts(drafts: &[EventDraft]) -> Result<()> {
    let refusals = [
        refuse_reserved_kinds(drafts),
        refuse_times_out_of_range(drafts),
        refuse_blank_actors(drafts),
        refuse_nul_in_keys(drafts),
    ];
    // `min_by_key` keeps the first of equals: one event's refusals in the order above.
    match refusals
        .into_iter()
        .filter_map(Result::err)
        .min_by_key(refused_event)
    {
        Some(refusal) => Err(refusal),
        None => Ok(()),
    }
}

/// The batch position of the event an error refuses (0 for an error of no one event).
fn refused_event(e: &Error) -> usize {
    match e {
        Error::InvalidEvent { event, .. } => *event,
        _ => 0,
    }
}

/// Refuses a node label that is the planner's name for the log's events (`MATCH (e:Event)`
/// matches events, never nodes): a node given it could never be matched by its label.
/// Checked here, not in the projection, so that a log written before the check still replays.
fn refuse_the_event_label(event: usize, assertion: usize, label: &str) -> Result<()> {
    if label != crate::query::plan::EVENT_LABEL {
        return Ok(());
    }
    Err(Error::InvalidEvent {
        event,
        assertion: Some(assertion),
        field: "label".into(),
        message: format!(
            "{label:?} is the query language's label of the log's events (`MATCH (e:{label})` matches events, never nodes): give the node another label"
        ),
    })
}

/// Refuses drafts naming a node by a key that holds a NUL character (as an actor, a place,
/// or in an assertion): no command line can carry one, so `loci delete --node`, the way to
/// take a person's data, could never name that node. The same for the names a command line or
/// a query names things by: an event's kind (`--kind`), a label (`--label`), a relation
/// (`--relation`) and a property's name (`n.prop`). Checked here, not in the projection, so
/// that a log written before the check still replays.
///
/// It runs on every ingested key, bulk loads included, so it allocates nothing.
fn refuse_nul_in_keys(drafts: &[EventDraft]) -> Result<()> {
    use crate::model::{Assertion, EdgeUpsert, NodeUpsert};
    for (i, d) in drafts.iter().enumerate() {
        let check = |assertion: Option<usize>, field: &str, key: &str| {
            match key.contains('\0') {
            false => Ok(()),
            true => Err(Error::InvalidEvent {
                event: i,
                assertion,
                field: field.into(),
                message: format!(
                    "{key:?} holds a NUL character, which no command line or query can carry (`loci delete --node`, `--label`, `--relation`, `--kind`, `n.prop` could never name it)"
                ),
            }),
        }
        };
        let props = |j: usize, props: &crate::model::Props| {
            props
                .keys()
                .try_for_each(|name| check(Some(j), "props", name))
        };
        check(None, "actor", &d.actor)?;
        check(None, "kind", &d.kind)?;
        if let Some(place) = &d.place {
            check(None, "place", place)?;
        }
        for (j, a) in d.assertions.iter().enumerate() {
            match a {
                Assertion::UpsertNode(NodeUpsert {
                    key,
                    label,
                    props: p,
                    ..
                }) => {
                    check(Some(j), "key", key)?;
                    if let Some(label) = label {
                        check(Some(j), "label", label)?;
                        refuse_the_event_label(i, j, label)?;
                    }
                    props(j, p)?;
                }
                Assertion::RetractNode { key } => check(Some(j), "key", key)?,
                Assertion::UpsertEdge(EdgeUpsert {
                    from,
                    relation,
                    to,
                    props: p,
                    ..
                }) => {
                    check(Some(j), "from", from)?;
                    check(Some(j), "relation", relation)?;
                    check(Some(j), "to", to)?;
                    props(j, p)?;
                }
                Assertion::RetractEdge { from, relation, to } => {
                    check(Some(j), "from", from)?;
                    check(Some(j), "relation", relation)?;
                    check(Some(j), "to", to)?;
                }
            }
        }
    }
    Ok(())
}

/// Refuses drafts whose actor is blank but not empty (only spaces, control or invisible
/// characters): an empty actor is an event by no one in particular (the field is optional),
/// and a blank one reads as that while being another key. Checked here, not in the
/// projection, so that a log written before the check still replays.
fn refuse_blank_actors(drafts: &[EventDraft]) -> Result<()> {
    match drafts
        .iter()
        .position(|d| !d.actor.is_empty() && crate::text::is_blank(&d.actor))
    {
        Some(i) => Err(Error::InvalidEvent {
            event: i,
            assertion: None,
            field: "actor".into(),
            message: format!(
                "blank actor {:?}: name who the event is by (the agent, a user, a tool), or leave it out",
                drafts[i].actor
            ),
        }),
        None => Ok(()),
    }
}

/// What a world time past [`MAX_ABS_TS`] is told, or `None` for one within it.
pub fn time_out_of_range(ts: i64) -> Option<String> {
    (ts.unsigned_abs() > MAX_ABS_TS as u64)
        .then(|| format!("{ts} is out of range: world times are within ±2^61 ({MAX_ABS_TS})"))
}

/// The start of the idempotency keys only the store gives its events.
pub const STORE_KEY_PREFIX: &str = "loci:";

/// Refuses drafts of a kind only the store writes (deletions, tombstones), summaries that do
/// not read as one ([`crate::dynamics::consolidate::summary_payload_fault`]), and keys under
/// [`STORE_KEY_PREFIX`].
fn refuse_reserved_kinds(drafts: &[EventDraft]) -> Result<()> {
    let summaries = drafts
        .iter()
        .enumerate()
        .filter(|(_, d)| d.kind == crate::dynamics::consolidate::SUMMARY);
    for (i, d) in summaries {
        // The events a summary is made again without are the deletion's to list: one given
        // from outside would hide itself from the deletion of those events.
        let without =
            matches!(&d.payload, crate::model::Value::Map(m) if m.contains_key("without"));
        let fault = crate::dynamics::consolidate::summary_payload_fault(&d.payload).or_else(|| {
            without.then(|| {
                (
                    "payload.without",
                    "only a deletion lists the events a summary is without".to_string(),
                )
            })
        });
        if let Some((field, message)) = fault {
            return Err(Error::InvalidEvent {
                event: i,
                assertion: None,
                field: field.into(),
                message,
            });
        }
    }
    // Keys under `loci:` are the store's own (a saved context's, `loci:context:turn:N`): a
    // caller's would make a save skip a number.
    if let Some(i) = drafts.iter().position(|d| {
        d.idempotency_key
            .as_deref()
            .is_some_and(|k| k.starts_with(STORE_KEY_PREFIX))
    }) {
        return Err(Error::InvalidEvent {
            event: i,
            assertion: None,
            field: "idempotency_key".into(),
            message: format!(
                "keys starting with {STORE_KEY_PREFIX:?} are the store's own; give another"
            ),
        });
    }
    match drafts
        .iter()
        .position(|d| deletion::STORE_WRITTEN_KINDS.contains(&d.kind.as_str()))
    {
        Some(i) => Err(Error::InvalidEvent {
            event: i,
            assertion: None,
            field: "kind".into(),
            message: format!(
                "{:?} is a kind only the store writes (deletions through `loci delete`, pins through `loci pin`, uses by reads)",
                drafts[i].kind
            ),
        }),
        None => Ok(()),
    }
}

/// A derived record of the meta table, or its default when the store has none yet (a store
/// made before the record existed, where the default is what its log implies).
fn read_meta<T: serde::de::DeserializeOwned + Default>(
    backend: &dyn Backend,
    key: &[u8],
) -> Result<T> {
    Ok(backend
        .get(Table::Meta, key)?
        .map(|v| decode_meta(key, &v))
        .transpose()?
        .unwrap_or_default())
}

/// The meta record under `key`, decoded; damage names the record (the counters, the deleted
/// set and the folds are derived from the log, and `loci repair` writes them afresh).
fn decode_meta<T: serde::de::DeserializeOwned>(key: &[u8], bytes: &[u8]) -> Result<T> {
    decode("meta", bytes).map_err(|e| match e {
        Error::Corrupt { table, message } => Error::Corrupt {
            table,
            message: format!("record {:?}: {message}", String::from_utf8_lossy(key)),
        },
        e => e,
    })
}

/// The deleted set of the meta table.
fn read_deleted(backend: &dyn Backend) -> Result<BTreeSet<u64>> {
    Ok(read_meta::<Vec<u64>>(backend, META_DELETED)?
        .into_iter()
        .collect())
}

/// The deleted set as stored in the meta table.
fn deleted_list(state: &State) -> Vec<u64> {
    state.deleted.iter().copied().collect()
}

/// The world time of an `event_time` key.
fn time_of_key(k: &[u8]) -> Option<i64> {
    let ts: [u8; 8] = k.get(..8)?.try_into().ok()?;
    Some((u64::from_be_bytes(ts) ^ (1 << 63)) as i64)
}

/// Every key of `table`, in order.
fn table_keys(backend: &dyn Backend, table: Table) -> Result<Vec<Vec<u8>>> {
    let mut keys = Vec::new();
    backend.scan(table, &[], None, &mut |k, _| {
        keys.push(k.to_vec());
        Ok(true)
    })?;
    Ok(keys)
}

/// Decodes a log record (`codec::decode_event`, or a part of it).
type DecodeEvent = fn(&'static str, &[u8]) -> Result<Event>;

/// The `(ts, seq)` of an `event_time` key (the last 16 bytes of an `event_facet` one).
fn time_entry(k: &[u8]) -> Option<(i64, u64)> {
    let seq: [u8; 8] = k.get(8..16)?.try_into().ok()?;
    Some((time_of_key(k)?, u64::from_be_bytes(seq)))
}

fn time_key(ts: i64, seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    // Flipping the sign bit makes big-endian byte order equal numeric order for i64.
    k[..8].copy_from_slice(&((ts as u64) ^ (1 << 63)).to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// An event's records in a batch: the log record (`bytes`, its encoding), its time-index and
/// episodic-index entries, and its idempotency key. Every path that appends to the log writes
/// them through here, so the derived indexes cannot miss an event.
fn put_event_records(batch: &mut WriteBatch, e: &Event, bytes: Vec<u8>) {
    log::put(batch, e.seq, bytes);
    batch.put(Table::EventTime, time_key(e.ts, e.seq), Vec::new());
    for k in facet_keys(e) {
        batch.put(Table::EventFacet, k, Vec::new());
    }
    if let Some(key) = &e.idempotency_key {
        batch.put(
            Table::Idempotency,
            key.as_bytes(),
            e.seq.to_be_bytes().to_vec(),
        );
    }
}

/// A facet of events the episodic index keys them by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Facet {
    Place,
    Actor,
    Kind,
}

impl Facet {
    fn byte(self) -> u8 {
        match self {
            Facet::Place => b'p',
            Facet::Actor => b'a',
            Facet::Kind => b'k',
        }
    }
}

/// What a refusal of a node forgetting let fade says of it ([`Store::faded_among`]).
const FADED: &str = "forgetting let it fade (the events that made it were forgotten)";

/// Event kinds [`Store::refuse_kind_near_misses`] reads at most: a log of more kinds than
/// this is not one a person names them in.
const MAX_KINDS_LISTED: usize = 10_000;

/// The prefix of a facet value's keys in `event_facet`.
fn facet_prefix(facet: Facet, value: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(3 + value.len() + 16);
    k.push(facet.byte());
    // Values are at most 1,024 bytes (keys, kinds): the length always fits.
    k.extend_from_slice(&(value.len().min(u16::MAX as usize) as u16).to_be_bytes());
    k.extend_from_slice(value.as_bytes());
    k
}

/// The facet byte and the value of an `event_facet` key, as [`facet_prefix`] lays them out;
/// `None` for a key too short for what it says.
fn facet_value(key: &[u8]) -> Option<(u8, &[u8])> {
    let len = u16::from_be_bytes([*key.get(1)?, *key.get(2)?]) as usize;
    Some((*key.first()?, key.get(3..3 + len)?))
}

/// The episodic index keys of an event: its place, actor and kind, each with its time key,
/// and a summary's entries in the summary index ([`summary_index`]).
fn facet_keys(ev: &Event) -> Vec<Vec<u8>> {
    let time = time_key(ev.ts, ev.seq);
    let mut keys = Vec::with_capacity(3);
    let mut add = |facet: Facet, value: &str| {
        let mut k = facet_prefix(facet, value);
        k.extend_from_slice(&time);
        keys.push(k);
    };
    if let Some(p) = &ev.place {
        add(Facet::Place, p);
    }
    add(Facet::Actor, &ev.actor);
    add(Facet::Kind, &ev.kind);
    keys.extend(summary_index::keys(ev));
    keys
}

impl Overlay {
    /// The backend records of this batch: its log records with their index entries, and the
    /// counters. The nodes and edges it derives are not written: they are the projection of
    /// the log, held in the state and its snapshot, and an open replays the log past the
    /// snapshot.
    fn write_batch(&self) -> WriteBatch {
        let mut batch = WriteBatch::default();
        let encoded: Vec<Vec<u8>> = self.events.par_iter().map(encode_event).collect();
        for (e, bytes) in self.events.iter().zip(encoded) {
            put_event_records(&mut batch, e, bytes);
        }
        batch.put(Table::Meta, META_COUNTERS, encode(&self.counters));
        batch
    }

    /// How much this batch adds to the catch-up of the snapshot: its ids, and its events
    /// (a catch-up replays each). Weighed by its ids and itself alone, a consolidation's
    /// batches (many summaries, few new ids) reached no checkpoint, and every open after one
    /// replayed its summaries from the log: 157k of them, 2.5 s a command.
    fn change_weight(&self) -> u64 {
        (self.nodes.len() + self.edges.len() + self.events.len().max(1)) as u64
    }

    /// The full-text documents of this batch, made as the index takes them: its events',
    /// then its live nodes', in order.
    fn text_docs(&self) -> impl Iterator<Item = TextDoc> + '_ {
        let events = ParChunks::new(self.events.iter(), TextDoc::for_event);
        let nodes = ParChunks::new(self.nodes.values().flatten(), |n: &Node| {
            Some(TextDoc::for_node(n))
        });
        events.chain(nodes)
    }

    /// The full-text documents this batch removes (of its retracted nodes), given the state
    /// before it.
    fn text_deletes(&self, before: &State) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.is_none())
            .filter_map(|(id, _)| before.node(id))
            .map(|old| node_doc_key(&old.key))
            .collect()
    }
}

/// Maps `items` a chunk at a time, each chunk on every core, and yields the results in order:
/// the parallel speed of mapping all of them at once (a bulk load's 200,000 node documents
/// took a quarter of a second on one core) while holding one chunk's results, where a whole
/// batch's documents were a fifth of its peak memory.
struct ParChunks<I, F, T> {
    items: I,
    map: F,
    ready: std::vec::IntoIter<T>,
}

/// Items mapped at a time by [`ParChunks`].
const PAR_CHUNK: usize = 4096;

impl<I, F, T> ParChunks<I, F, T> {
    fn new(items: I, map: F) -> Self {
        ParChunks {
            items,
            map,
            ready: Vec::new().into_iter(),
        }
    }
}

impl<I, F, T> Iterator for ParChunks<I, F, T>
where
    I: Iterator,
    I::Item: Send,
    F: Fn(I::Item) -> Option<T> + Sync,
    T: Send,
{
    type Item = T;

    fn next(&mut self) -> Option<T> {
        loop {
            if let Some(t) = self.ready.next() {
                return Some(t);
            }
            let chunk: Vec<I::Item> = self.items.by_ref().take(PAR_CHUNK).collect();
            if chunk.is_empty() {
                return None;
            }
            let map = &self.map;
            let mapped: Vec<T> = chunk.into_par_iter().filter_map(map).collect();
            self.ready = mapped.into_iter();
        }
    }
}

/// The graph as it was after some event, read in place from the state its replay built
/// ([`Store::past`]): each node and edge decoded as it is read, where [`PastState`] holds a
/// copy of each (at 100M edges, more memory than the machine had). Serialises as
/// [`PastState`] does, record by record.
pub struct Past {
    state: State,
}

impl Past {
    /// The last event replayed (the requested one, or the log's end if it is shorter).
    pub fn seq(&self) -> u64 {
        self.state.counters.last_seq
    }
    pub fn latest_ts(&self) -> Option<i64> {
        self.state.latest_ts
    }
    pub fn node_count(&self) -> usize {
        self.state.nodes.live_count()
    }
    pub fn edge_count(&self) -> usize {
        self.state.edges.live_count()
    }
    /// Every node, in id order.
    pub fn nodes(&self) -> impl Iterator<Item = Node> + '_ {
        self.state.all_nodes()
    }
    /// Every edge's full record, in id order.
    pub fn edges(&self) -> impl Iterator<Item = Edge> + '_ {
        self.state.all_edges()
    }
}

impl Serialize for Past {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        /// A sequence written from an iterator made when it is written.
        struct Each<F>(F);
        impl<F: Fn() -> I, I: Iterator<Item = T>, T: Serialize> Serialize for Each<F> {
            fn serialize<S: serde::Serializer>(
                &self,
                serializer: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                serializer.collect_seq((self.0)())
            }
        }
        let mut out = serializer.serialize_struct("PastState", 4)?;
        out.serialize_field("seq", &self.seq())?;
        out.serialize_field("latest_ts", &self.latest_ts())?;
        out.serialize_field("nodes", &Each(|| self.nodes()))?;
        out.serialize_field("edges", &Each(|| self.edges()))?;
        out.end()
    }
}

/// The graph as it was after some event ([`Store::state_at`]): nodes and full edges by id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PastState {
    /// The last event replayed (the requested one, or the log's end if it is shorter).
    pub seq: u64,
    pub latest_ts: Option<i64>,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// What one committed batch did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    /// Sequence numbers of the batch's events (`first_seq..=last_seq`); empty batch: 0, 0.
    pub first_seq: u64,
    pub last_seq: u64,
    pub events: usize,
    pub nodes_upserted: usize,
    pub nodes_removed: usize,
    pub edges_upserted: usize,
    pub edges_removed: usize,
    /// Drafts skipped because the store already held their idempotency key (or an earlier
    /// draft of the same batch carried it).
    pub skipped: usize,
    /// Of those skipped, the drafts that repeated an earlier draft of the same batch.
    #[serde(default)]
    pub repeated: usize,
    /// Of those skipped, the drafts whose key an event since deleted or forgotten holds: a key
    /// outlives its event, so a retry does not bring the event back.
    #[serde(default)]
    pub skipped_deleted: usize,
}

/// Where the drafts kept by [`Store::drop_applied`] stood in the caller's batch, so that an
/// error about a kept draft names the caller's position.
#[derive(Default)]
struct Positions {
    kept: Vec<usize>,
    skipped: usize,
    /// Of `skipped`, those that repeated an earlier draft of the batch.
    repeated: usize,
    /// Of `skipped`, those whose key a deleted event holds.
    deleted: usize,
}

impl Positions {
    fn original(&self, err: Error) -> Error {
        match err {
            Error::InvalidEvent {
                event,
                assertion,
                field,
                message,
            } => Error::InvalidEvent {
                event: self.kept.get(event).copied().unwrap_or(event),
                assertion,
                field,
                message,
            },
            other => other,
        }
    }
}

impl Commit {
    /// The report of a projected, non-empty batch.
    fn of(overlay: &Overlay, positions: &Positions) -> Commit {
        // One pass over each map, counting the removals: four passes over a bulk batch's
        // hundred thousand edges, a tree walk each, were 3% of its ingest.
        let nodes_removed = overlay.nodes.values().filter(|n| n.is_none()).count();
        let edges_removed = overlay.edges.values().filter(|e| e.is_none()).count();
        Commit {
            first_seq: overlay.events.first().map_or(0, |e| e.seq),
            last_seq: overlay.counters.last_seq,
            events: overlay.events.len(),
            nodes_upserted: overlay.nodes.len() - nodes_removed,
            nodes_removed,
            edges_upserted: overlay.edges.len() - edges_removed,
            edges_removed,
            ..Commit::skipped(positions)
        }
    }

    /// The report of a batch every draft of which was skipped.
    fn skipped(positions: &Positions) -> Commit {
        Commit {
            skipped: positions.skipped,
            repeated: positions.repeated,
            skipped_deleted: positions.deleted,
            ..Commit::default()
        }
    }
}

/// Options of a neighbourhood expansion by names (resolved against the store's interners).
/// Build from [`Default`] with the `with_*` methods; new options may be added.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ExpandOptions {
    pub min_confidence: f32,
    /// Only these relations, when not empty.
    pub relations: Vec<String>,
    /// Never these relations.
    pub deny_relations: Vec<String>,
    /// Only into nodes with these labels, when not empty.
    pub labels: Vec<String>,
    pub direction: Direction,
    /// The world time confidence is judged at (default: the latest event time).
    pub now: Option<i64>,
    /// Filter by stored confidence, without decay.
    pub raw_confidence: bool,
    /// Also follow edges whose validity has ended (or not begun) at `now`.
    pub include_ended: bool,
}

impl ExpandOptions {
    pub fn with_min_confidence(mut self, min: f32) -> Self {
        self.min_confidence = min;
        self
    }
    pub fn with_relations(
        mut self,
        relations: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.relations = relations.into_iter().map(Into::into).collect();
        self
    }
    pub fn with_deny_relations(
        mut self,
        relations: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.deny_relations = relations.into_iter().map(Into::into).collect();
        self
    }
    pub fn with_labels(mut self, labels: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.labels = labels.into_iter().map(Into::into).collect();
        self
    }
    pub fn with_direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }
    pub fn with_now(mut self, now: i64) -> Self {
        self.now = Some(now);
        self
    }
    pub fn with_raw_confidence(mut self, raw: bool) -> Self {
        self.raw_confidence = raw;
        self
    }
    pub fn with_include_ended(mut self, include: bool) -> Self {
        self.include_ended = include;
        self
    }
}

/// A node reached by [`Store::neighbors`], with the edge it was reached by.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Neighbor {
    pub node: NodeId,
    pub key: String,
    pub name: String,
    pub label: String,
    pub hops: u8,
    pub edge: EdgeId,
    pub relation: String,
    /// The edge's effective confidence at the expansion's `now` (see `dynamics::decay`).
    pub confidence: f32,
    /// The confidence as stored, before decay.
    pub stored_confidence: f32,
    /// True when the edge points at the node it was followed from.
    pub incoming: bool,
    /// The node the edge was followed from.
    pub parent: NodeId,
}

/// Sizes and counts of a store.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stats {
    pub backend: BackendKind,
    /// Records in the log (deleted ones included, as tombstones or not).
    pub events: u64,
    /// Events deleted or forgotten: out of every view.
    #[serde(default)]
    pub events_deleted: u64,
    pub nodes: usize,
    pub edges: usize,
    pub relations: usize,
    pub labels: usize,
    pub text_docs: u64,
    pub text_indexed_seq: u64,
    pub disk_bytes_backend: u64,
    pub disk_bytes_text: u64,
    /// Heap bytes of the adjacency lists (an exact count of the traversal structure).
    pub adjacency_bytes: usize,
    /// Where the in-memory state's heap bytes go.
    #[serde(default)]
    pub state_bytes: StateBytes,
    /// The full-text index was damaged when the store was opened and has been rebuilt from
    /// the log.
    pub text_rebuilt: bool,
    /// Hot and warm nodes, edges and events (`dynamics::usage`).
    #[serde(default)]
    pub tiers: TierCounts,
    /// Bytes of the state snapshot file (0 when there is none).
    #[serde(default)]
    pub disk_bytes_snapshot: u64,
    /// Where the snapshot's bytes go: each mapped section's bytes, by name, in file order
    /// (the header, body and padding are the rest of `disk_bytes_snapshot`).
    #[serde(default)]
    pub disk_bytes_snapshot_sections: Vec<(String, u64)>,
    /// What the whole store directory takes on disk, in allocated blocks: less than the sum
    /// of the files' lengths where a file is sparse (redb grows its file ahead of its pages).
    #[serde(default)]
    pub disk_bytes_allocated: u64,
    /// Where the open got the in-memory state from.
    #[serde(default)]
    pub state_source: StateSource,
    /// How long the open of this handle took, by stage.
    #[serde(default)]
    pub open_ms: OpenTimings,
    /// A read has found the mapped snapshot damaged ([`Store::snapshot_damage_found`]):
    /// answers since may be short until the next write replays the graph from the log. A
    /// server's clients see it here, where the command line exits as corrupt.
    #[serde(default)]
    pub snapshot_damage_found: bool,
}

/// Heap bytes of the in-memory state by part (see [`Stats::state_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StateBytes {
    /// Node records: their 16-byte slots and encoded bytes (`store/node_table.rs`).
    pub nodes: usize,
    /// The key -> node id map.
    pub node_keys: usize,
    /// Edge cores, validity bounds and details (properties, recorded time, evidence).
    pub edges: usize,
    /// Adjacency lists, node labels and each edge's last-seen time.
    pub adjacency: usize,
}

impl StateBytes {
    pub fn total(&self) -> usize {
        self.nodes + self.node_keys + self.edges + self.adjacency
    }
}

/// The outcome of [`Store::verify`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VerifyReport {
    pub events_replayed: u64,
    pub nodes: usize,
    pub edges: usize,
    pub text_docs: usize,
    pub idempotency_keys: usize,
    /// Events deleted by deletion events (out of every view).
    #[serde(default)]
    pub events_deleted: usize,
    /// Every difference found between the replayed views and the live ones (at most 100).
    pub differences: Vec<String>,
    /// Differences beyond the first 100.
    pub more_differences: usize,
    /// The open of the store this report was made on found the full-text index damaged (or
    /// unreadable) and rebuilt it from the log: the index compared is the rebuilt one.
    #[serde(default)]
    pub text_rebuilt_at_open: bool,
    /// Events of the log a scan reads but a lookup by number does not find: damage in the log's
    /// own index (one of the differences says which), which `repair` mends by writing the
    /// files anew from a scan.
    #[serde(default)]
    pub log_events_not_found: u64,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.differences.is_empty()
    }
    fn differ(&mut self, msg: String) {
        if self.differences.len() < 100 {
            self.differences.push(msg);
        } else {
            self.more_differences += 1;
        }
    }
}

thread_local! {
    /// Reads of a store's state this thread holds now (see `Store::read_state`).
    static READS_HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A held read of the live state; counts itself in `READS_HELD` while it lives.
pub(crate) struct StateRead<'a>(parking_lot::RwLockReadGuard<'a, State>);

impl std::ops::Deref for StateRead<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

impl Drop for StateRead<'_> {
    fn drop(&mut self) {
        READS_HELD.set(READS_HELD.get().saturating_sub(1));
    }
}

/// A consistent read view of the graph (holds the read lock while alive).
pub struct GraphRead<'a> {
    state: StateRead<'a>,
    decay: Arc<DecayPolicy>,
    tiers: &'a TierPolicy,
    /// The store's uses not yet flushed, which count as flushed ones ([`GraphRead::usage`]).
    pending: &'a Mutex<Pending>,
}

impl GraphRead<'_> {
    /// The usage item of a node (`dynamics::usage`).
    pub fn node_item(&self, id: NodeId) -> Option<Item> {
        self.node_key(id).map(|k| Item::Node(k.to_string()))
    }

    /// The usage item of an edge: `(from key, relation, to key)`.
    pub fn edge_item(&self, id: EdgeId) -> Option<Item> {
        let core = self.edge_core(id)?;
        Some(Item::Edge(
            self.node_key(core.from)?.to_string(),
            self.relation_name(core.relation).to_string(),
            self.node_key(core.to)?.to_string(),
        ))
    }

    /// An item's recorded usage: the flushed uses, and those waiting in memory (a server
    /// flushes them in batches; a read after them ranks as it would once they are flushed:
    /// helper-114).
    pub fn usage(&self, item: &Item) -> Option<Usage> {
        let flushed = self.state.folds.usage.get(item);
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .added_to(item, flushed)
    }

    /// Whether a node is hot at world time `now`: pinned, or used often and recently.
    pub fn node_tier(&self, id: NodeId, now: i64) -> Tier {
        match self.node_key(id) {
            Some(_) if self.is_pinned(id) => Tier::Hot,
            Some(key) => self
                .tiers
                .tier(self.usage(&Item::Node(key.to_string())), now),
            None => Tier::Warm,
        }
    }

    /// Whether an edge is hot at `now`: it touches a pinned node, or is used often and
    /// recently.
    pub fn edge_tier(&self, id: EdgeId, now: i64) -> Tier {
        let Some(core) = self.edge_core(id) else {
            return Tier::Warm;
        };
        if self.is_pinned(core.from) || self.is_pinned(core.to) {
            return Tier::Hot;
        }
        match self.edge_item(id) {
            Some(item) => self.tiers.tier(self.usage(&item), now),
            None => Tier::Warm,
        }
    }

    /// Hot and warm nodes, edges and events at world time `now`. Only pinned nodes, the
    /// edges at them and used items can be hot, so those are counted and the rest is warm:
    /// this runs on every `stats` and metrics scrape, and must not walk every edge (it did,
    /// cloning three strings per edge: a third of `loci stats` on a 1M-edge store).
    pub fn tier_counts(&self, now: i64) -> TierCounts {
        let mut c = TierCounts::default();
        let mut hot_edges: BTreeSet<EdgeId> = BTreeSet::new();
        let mut hot_nodes = 0usize;
        for id in self.pinned_ids() {
            hot_nodes += 1;
            hot_edges.extend(self.state.adj.entries(id).map(|e| e.edge_id()));
        }
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let recorded = self.state.folds.usage.iter().map(|(item, _)| item);
        let waiting_only =
            (pending.items()).filter(|item| self.state.folds.usage.get(item).is_none());
        for item in recorded.chain(waiting_only) {
            let usage = pending.added_to(item, self.state.folds.usage.get(item));
            let hot = self.tiers.tier(usage, now) == Tier::Hot;
            match item {
                Item::Node(key) => {
                    let live = self.node_id(key);
                    if hot && live.is_some_and(|id| !self.is_pinned(id)) {
                        hot_nodes += 1;
                    }
                }
                Item::Edge(from, relation, to) => {
                    let id = match (
                        self.node_id(from),
                        self.relation_id(relation),
                        self.node_id(to),
                    ) {
                        (Some(f), Some(r), Some(t)) => self.state.edge_id(f, r, t),
                        _ => None,
                    };
                    if let (true, Some(id)) = (hot, id) {
                        hot_edges.insert(id);
                    }
                }
                Item::Event(seq) => {
                    if hot && !self.state.deleted.contains(seq) {
                        c.hot_events += 1;
                    }
                }
            }
        }
        c.hot_nodes = hot_nodes as u64;
        c.warm_nodes = self.state.adj.node_count().saturating_sub(hot_nodes) as u64;
        c.hot_edges = hot_edges.len() as u64;
        c.warm_edges = self.state.adj.edge_count().saturating_sub(hot_edges.len()) as u64;
        let held = self.state.counters.last_seq - self.state.deleted.len() as u64;
        c.warm_events = held.saturating_sub(c.hot_events);
        c
    }

    /// Whether an event is hot at `now`: used often and recently.
    pub fn event_tier(&self, seq: u64, now: i64) -> Tier {
        self.tiers.tier(self.usage(&Item::Event(seq)), now)
    }

    /// The latest world time of any event (`None` for an empty log): the default "now".
    pub fn latest_event_time(&self) -> Option<i64> {
        self.state.latest_ts
    }

    /// The decay policy this view judges confidence by.
    pub fn decay_policy(&self) -> &DecayPolicy {
        &self.decay
    }

    /// The decay policy resolved for a traversal believing at `now`.
    pub fn decay_filter(&self, now: i64) -> DecayFilter {
        let names: Vec<&str> = (0..self.state.relations.len() as u32)
            .map(|id| self.state.relations.name(id))
            .collect();
        self.decay.resolve(now, &names)
    }

    /// The edges whose validity does not hold at world time `now` (ended, or not yet begun).
    pub fn invalid_edges_at(&self, now: i64) -> IdSet {
        let mut set = IdSet::default();
        for id in self.state.edges.bounded() {
            if let Some(c) = self.edge_core(id) {
                if !(c.valid_from <= now && now < c.valid_to) {
                    set.insert(id.0);
                }
            }
        }
        set
    }

    /// The effective confidence of edge `id` at world time `now` (default: the latest event
    /// time), or `None` when there is no such live edge.
    pub fn effective_confidence(&self, id: EdgeId, now: Option<i64>) -> Option<f32> {
        let c = self.edge_core(id)?;
        let now = now.or(self.state.latest_ts).unwrap_or(c.last_seen);
        let relation = self.state.relations.name(c.relation);
        let pinned = self.state.adj.is_pinned(c.from.0) || self.state.adj.is_pinned(c.to.0);
        Some(if pinned {
            self.decay
                .effective_pinned(relation, c.confidence, c.last_seen, now)
        } else {
            self.decay
                .effective(relation, c.confidence, c.last_seen, now)
        })
    }

    pub fn adjacency(&self) -> &Adjacency {
        &self.state.adj
    }
    /// Node `id`, decoded from its record (see `store/node_table.rs`).
    pub fn node(&self, id: NodeId) -> Option<Node> {
        self.state.node(id)
    }
    /// Whether live node `id` bears the name form `form` ([`crate::text::bears_name_form`]):
    /// what a name lookup in the full-text index keeps of the nodes it gives.
    pub fn bears_name_form(&self, id: NodeId, form: &str) -> bool {
        self.node(id)
            .is_some_and(|node| crate::text::bears_name_form(&node, form))
    }
    /// The live node ids, in order (no decode: filter by `node_label`, `is_pinned` or
    /// `node_key` first, then decode what passes).
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.state.nodes.ids()
    }
    /// Whether node `id` is live and pinned, from the adjacency.
    pub fn is_pinned(&self, id: NodeId) -> bool {
        self.state.adj.is_pinned(id.0) && self.state.nodes.key_bytes(id).is_some()
    }
    /// The live pinned nodes' ids, in order.
    pub fn pinned_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        // From the set of pins, not a walk over every node: `stats` counts tiers from it,
        // and a walk read every node record of a store opened from its snapshot (seconds
        // at 100M edges, from disk).
        self.state
            .adj
            .pinned_nodes()
            .filter(|id| self.state.nodes.record(id.0 as usize).is_some())
    }
    /// The key of node `id`, read in place (no decode of the node).
    pub fn node_key(&self, id: NodeId) -> Option<&str> {
        self.state.nodes.key(id)
    }
    /// The name of node `id`, read in place.
    pub fn node_name(&self, id: NodeId) -> Option<&str> {
        self.state.nodes.name(id)
    }
    /// The label of node `id`, from the adjacency.
    pub fn node_label(&self, id: NodeId) -> Option<&str> {
        let label = self.state.adj.label_of(id)?;
        self.state.labels.name_checked(label)
    }
    /// The salience of node `id`, read in place.
    pub fn node_salience(&self, id: NodeId) -> Option<f32> {
        self.state.nodes.salience(id)
    }
    pub fn node_id(&self, key: &str) -> Option<NodeId> {
        self.state.node_id(key)
    }
    /// [`State::node_id`] of a key a user named, whose miss checks again the mapped blocks
    /// its lookup read ([`Store::require_node`]): damage found there is recorded
    /// ([`Store::snapshot_damage_found`]) rather than the miss passing for the key being
    /// unknown.
    pub fn node_id_named(&self, key: &str) -> Option<NodeId> {
        self.state.node_id_named(key)
    }
    pub fn edge_core(&self, id: EdgeId) -> Option<EdgeCore> {
        self.state.edge_core(id)
    }
    /// The interned id of a relation name, if any edge ever used it.
    pub fn relation_id(&self, name: &str) -> Option<u32> {
        self.state.relations.get(name)
    }
    /// The interned id of a label name, if any node ever had it.
    pub fn label_id(&self, name: &str) -> Option<u32> {
        self.state.labels.get(name)
    }
    /// Refuses a filter that names a relation (`of` [`NameOf::Relation`]) or a label no edge
    /// or node of the store ever had, where one it had differs only in case or surrounding
    /// whitespace ([`Interner::near_miss`]): such a filter matches nothing, silently, where
    /// the caller surely meant the name it resembles. A name unlike any stays allowed (it
    /// matches nothing until an edge or node has it), as in Cypher. `field` is the name the
    /// caller gave the filter under.
    pub fn refuse_near_misses(
        &self,
        field: &str,
        of: NameOf,
        names: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<()> {
        let (interner, what) = match of {
            NameOf::Relation => (&self.state.relations, "no edge has relation"),
            NameOf::Label => (&self.state.labels, "no node has label"),
        };
        for name in names {
            let name = name.as_ref();
            if let Some(meant) = interner.near_miss(name) {
                return Err(Error::InvalidArgument {
                    name: field.into(),
                    message: format!(
                        "{what} {name:?}; did you mean {meant:?}? (names are matched exactly)"
                    ),
                });
            }
        }
        Ok(())
    }
    /// The name of an interned relation id, if it exists.
    pub fn relation_name_checked(&self, id: u32) -> Option<&str> {
        (id < self.state.relations.len() as u32).then(|| self.state.relations.name(id))
    }
    pub fn relation_name(&self, id: u32) -> &str {
        self.state.relations.name(id)
    }
    pub fn label_name(&self, id: u32) -> &str {
        self.state.labels.name(id)
    }
    /// All live nodes, in id order.
    pub fn nodes(&self) -> impl Iterator<Item = Node> + '_ {
        self.state.all_nodes()
    }
    /// The live edges from or to `node`, in id order, each once, read from its adjacency list
    /// (which is in id order; a self loop sits in it twice, as it leaves and as it arrives).
    pub fn edges_of(&self, node: NodeId) -> impl Iterator<Item = EdgeId> + '_ {
        let mut last = None;
        self.state.adj.entries(node).filter_map(move |e| {
            let id = e.edge_id();
            (last.replace(id) != Some(id)).then_some(id)
        })
    }
    /// All live edges (compact form) with their ids, in id order.
    pub fn edges(&self) -> impl Iterator<Item = (EdgeId, EdgeCore)> + '_ {
        self.state
            .edges
            .ids()
            .filter_map(|id| Some((id, self.state.edge_core(id)?)))
    }
    /// Resolves option names into a traversal filter.
    pub fn filter(&self, opts: &ExpandOptions) -> TraversalFilter {
        let now = opts.now.or(self.state.latest_ts);
        TraversalFilter {
            min_confidence: opts.min_confidence,
            decay: match now {
                Some(now) if !opts.raw_confidence => Some(self.decay_filter(now)),
                _ => None,
            },
            deny_edges: match now {
                Some(now) if !opts.include_ended => Some(self.invalid_edges_at(now)),
                _ => None,
            },
            relations: (!opts.relations.is_empty())
                .then(|| self.state.relations.set_of(&opts.relations)),
            deny_relations: (!opts.deny_relations.is_empty())
                .then(|| self.state.relations.set_of(&opts.deny_relations)),
            labels: (!opts.labels.is_empty()).then(|| self.state.labels.set_of(&opts.labels)),
            direction: opts.direction,
        }
    }
}

/// What a name a caller filters by names ([`GraphRead::refuse_near_misses`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameOf {
    Relation,
    Label,
}

/// What a pin is and which nodes it is for ([`Store::pin_nodes`]).
pub(crate) struct PinOf<'a> {
    /// The event's kind (`PIN`, `UNPIN`, `PROMOTE`).
    pub kind: &'a str,
    pub pinned: bool,
    /// What a key names, in the refusal of one that names none ("node", "journal entry").
    pub what: &'a str,
    /// Whether the pin is for this node (a promotion is for journal entries only).
    pub admits: fn(&Node) -> bool,
}

/// What [`Store::pin_nodes`] did: the keys whose pin it changed, in the order given, and those
/// it left out because they were already as asked.
#[derive(Debug, Default)]
pub(crate) struct Pinned {
    /// The event's commit; empty when nothing was left to change.
    pub commit: Commit,
    pub changed: Vec<String>,
    pub unchanged: Vec<String>,
}

/// A turn at deleting ([`Store::deletion_turn`]), held until dropped.
pub(crate) struct DeletionTurn<'s>(#[allow(dead_code)] std::sync::MutexGuard<'s, ()>);

/// An open loci store.
pub struct Store {
    dir: PathBuf,
    backend: Box<dyn Backend>,
    state: parking_lot::RwLock<State>,
    text: TextIndex,
    writer: Mutex<()>,
    /// Held by a context build that saves its turn, from its read of the last saved turn to
    /// its own save ([`Store::hold_context_saves`]).
    context_saves: Mutex<()>,
    /// Held by a deletion, and by a forgetting from its choice of events to its deletion
    /// ([`Store::deletion_turn`]).
    deletions: Mutex<()>,
    text_rebuilt: bool,
    decay: RwLock<Arc<DecayPolicy>>,
    salience: RwLock<Arc<SaliencePolicy>>,
    /// The writer lock; `None` for a read-only handle.
    lock: Option<StoreLock>,
    /// Uses recorded by reads and not yet flushed as a `USAGE` event (`dynamics::usage`).
    usage_pending: Mutex<Pending>,
    tiers: TierPolicy,
    /// The log position of the snapshot on disk (`u64::MAX`: none usable).
    snapshot_seq: std::sync::atomic::AtomicU64,
    /// Changes since that snapshot (ids and events): what the next open would catch up on.
    since_snapshot: std::sync::atomic::AtomicU64,
    /// Nodes and edges the state held when that snapshot was written (or, opened from one,
    /// those it holds less what it caught up on): a commit writes the next snapshot once
    /// [`CHECKPOINT_GROWTH`] times as many changes came since.
    snapshot_size: std::sync::atomic::AtomicU64,
    state_source: StateSource,
    open_timings: OpenTimings,
    /// Set once [`Store::finish`] has run, so that a drop after [`Store::close_at_exit`]
    /// does not run it again over the emptied state.
    finished: bool,
    /// A read-only store kept apart from its index's ids ([`Store::open_read_only`]) says so
    /// at its first search, where node hits are left out, not at its open: a command that
    /// never searches has nothing to be warned of.
    warn_of_node_hits_left_out: std::sync::atomic::AtomicBool,
    /// Set while a deletion writes every node's document again under the ids it gave.
    rewriting: Rewriting,
    /// The log position before which no commit tries to bring a full-text index that is
    /// behind up to date again, and the rebuilds that failed in a row: each failure doubles
    /// the wait, so a want of space that lasts does not make every commit a whole rebuild.
    text_retry: std::sync::Mutex<(u64, u32)>,
    /// What was last read of the summaries ([`crate::dynamics::consolidate::live_summaries`],
    /// [`crate::dynamics::consolidate::placed_summaries`],
    /// [`crate::dynamics::consolidate::replaced_summaries`]).
    live_summaries: crate::dynamics::consolidate::LiveSummaryCache,
}

/// Whether a deletion in this process is writing every node's document again
/// (`Store::delete_in_commits`). Its new graph is live from the start, and its documents come
/// in commits; a search meanwhile found some of the nodes it kept, or none. A search waits
/// for it instead ([`REWRITE_WAIT`] at most), so that a deletion is one step to readers.
#[derive(Default)]
struct Rewriting {
    busy: Mutex<bool>,
    done: std::sync::Condvar,
}

/// Marks a rewrite under way for as long as it lives (`Rewriting::begin`).
struct RewriteUnderWay<'a>(&'a Rewriting);

impl Rewriting {
    fn begin(&self) -> RewriteUnderWay<'_> {
        *self.busy.lock().unwrap_or_else(|e| e.into_inner()) = true;
        RewriteUnderWay(self)
    }

    /// Whether a rewrite is under way.
    fn under_way(&self) -> bool {
        *self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until no rewrite is under way, `limit` at most; whether none is.
    fn wait(&self, limit: std::time::Duration) -> bool {
        let busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        if !*busy {
            return true;
        }
        let (busy, _) = self
            .done
            .wait_timeout_while(busy, limit, |busy| *busy)
            .unwrap_or_else(|e| e.into_inner());
        !*busy
    }
}

impl Drop for RewriteUnderWay<'_> {
    fn drop(&mut self) {
        *self.0.busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.0.done.notify_all();
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if !self.finished {
            self.finish();
        }
    }
}

impl Store {
    /// What closing a store does before its parts are dropped: flushes the uses reads
    /// recorded (a failure is logged: uses are a hint, and the store's contents are durable
    /// already) and writes a snapshot when enough changed since the last.
    fn finish(&mut self) {
        self.finished = true;
        if let Err(e) = self.flush_usage() {
            tracing::warn!(error = %e, "recorded uses could not be flushed; they are lost");
        }
        let damaged = self.snapshot_damage_found();
        if self.lock.is_some()
            && (damaged || self.since_snapshot.load(Relaxed) >= CHECKPOINT_ON_CLOSE)
        {
            // A damaged snapshot goes (the checkpoint removes it), however little changed.
            // The state is dropped next: it does not move onto the file it writes.
            if let Err(e) = self.checkpoint_as(Adopt::No) {
                tracing::warn!(error = %e, "the state snapshot could not be written; the next open replays the log past the last one");
            }
        }
    }
}

/// Reads and checks the manifest of the store in `dir`.
fn read_manifest(dir: &Path) -> Result<Manifest> {
    let manifest_path = dir.join(MANIFEST);
    // Said as `init` says it, where reading the manifest said "Not a directory (os error 20)".
    if dir.is_file() {
        return Err(Error::NotAStore {
            path: dir.to_path_buf(),
            reason: "it is a file, not a directory; a store is a directory".into(),
        });
    }
    let raw = match manifest_bytes(&manifest_path) {
        Ok(raw) => raw,
        Err(e) => {
            use std::io::ErrorKind;
            // A store this user may not read is not a missing one (whose advice is `loci
            // init`), nor is a name the file system cannot take (which `init` cannot make
            // either).
            if crate::error::is_refusal(&e)
                || matches!(
                    e.kind(),
                    ErrorKind::InvalidFilename | ErrorKind::NotADirectory
                )
            {
                return Err(Error::io(&manifest_path, e));
            }
            let logs: Vec<_> = BackendKind::present_in(dir).collect();
            let log = logs.first().cloned();
            // A store being made: `init` holds the writer lock while it makes the log, and
            // writes the manifest last. A command that came between them waits for the
            // lock as a writer does, and reads the manifest again; one the creation still
            // holds is told the store is locked (helper-150: it was told the new store was
            // damaged, and to repair it).
            // The lock is waited for, not taken: a read-only open writes nothing.
            if e.kind() == ErrorKind::NotFound && log.is_some() {
                crate::storage::wait_while_held(dir)?;
                if let Ok(raw) = manifest_bytes(&manifest_path) {
                    return parse_manifest(dir, &raw);
                }
            }
            if let [(_, a), (_, b)] = logs.as_slice() {
                return Err(Error::Store {
                    path: dir.to_path_buf(),
                    message: format!(
                        "no readable {MANIFEST} ({e}), and both backends' files are here ({} and {}): which are the store's is not known; move away the others, then {MANIFEST_REMEDY}",
                        a.display(),
                        b.display()
                    ),
                });
            }
            return Err(manifest_not_read(dir, &e, log));
        }
    };
    parse_manifest(dir, &raw)
}

/// Why the manifest of the store in `dir` was not read (`e`), where `log` is the backend
/// file there, if any.
fn manifest_not_read(dir: &Path, e: &std::io::Error, log: Option<(BackendKind, PathBuf)>) -> Error {
    // A log without its manifest is a damaged store, not none: `loci init` there would not
    // help (it refuses to start a store over a log).
    match log {
        Some((BackendKind::Redb, log)) if unfinished_redb(dir, &log) => Error::NotAStore {
            path: dir.to_path_buf(),
            reason: format!(
                "no readable {MANIFEST} ({e}), and {} is a redb file redb never finished making (a creation cut short); create the store again with `loci init`",
                log.display()
            ),
        },
        Some((BackendKind::Sled, log)) if unfinished_sled(dir, &log) => Error::NotAStore {
            path: dir.to_path_buf(),
            reason: format!(
                "no readable {MANIFEST} ({e}), and {} holds no log (a creation cut short); create the store again with `loci init`",
                log.display()
            ),
        },
        Some((_, log)) => Error::Store {
            path: dir.to_path_buf(),
            message: format!(
                "no readable {MANIFEST} ({e}), but {} is a store's log: {}{MANIFEST_REMEDY}",
                log.display(),
                // A directory or a FIFO in its place is the user's to move: repair writes
                // no file over another's.
                if e.kind() == std::io::ErrorKind::NotFound {
                    ""
                } else {
                    "move loci.json away (it is no file loci can write over); then "
                }
            ),
        },
        None => Error::NotAStore {
            path: dir.to_path_buf(),
            reason: format!("no readable {MANIFEST} ({e}); create one with `loci init`"),
        },
    }
}

/// The manifest of the store in `dir` from its bytes `raw`, checked.
fn parse_manifest(dir: &Path, raw: &[u8]) -> Result<Manifest> {
    let store_err = |message: String| Error::Store {
        path: dir.to_path_buf(),
        message,
    };
    // The format first: a later build's manifest, with keys this one does not know, is told
    // to be of a later format, not to have an unknown key.
    #[derive(Deserialize)]
    struct Format {
        format: u32,
    }
    let format = serde_json::from_slice::<Format>(raw).map(|f| f.format);
    if let Ok(format) = format.as_ref().copied() {
        if !(OLDEST_STORE_FORMAT..=STORE_FORMAT).contains(&format) {
            return Err(store_err(format!(
                "store format {format} but this build reads formats {OLDEST_STORE_FORMAT} to {STORE_FORMAT}"
            )));
        }
    }
    serde_json::from_slice(raw).map_err(|e| {
        store_err(match BackendKind::present_in(dir).count() {
            1 if rewritable(raw) => format!("{MANIFEST} is damaged ({e}): {MANIFEST_REMEDY}"),
            2 if rewritable(raw) => format!(
                "{MANIFEST} is damaged ({e}), and both backends' files are here: which are the store's is not known; move away the others, then {MANIFEST_REMEDY}"
            ),
            _ => format!("{MANIFEST}: {e}"),
        })
    })
}

/// Whether a manifest's bytes that do not read as one may be written again by `loci repair`
/// from the log's meta table, which records all a manifest says: any but one of a format this
/// build does not read (a later build's, which may say more than this build knows).
fn rewritable(raw: &[u8]) -> bool {
    let format = serde_json::from_slice::<serde_json::Value>(raw)
        .ok()
        .and_then(|v| v.get("format").and_then(serde_json::Value::as_u64));
    format.is_none_or(|f| (u64::from(OLDEST_STORE_FORMAT)..=u64::from(STORE_FORMAT)).contains(&f))
}

/// What to do about a manifest gone or damaged beside a log: it says only what the log's meta
/// table says too (helper-148: the advice had been a backup, or serde's words alone).
const MANIFEST_REMEDY: &str =
    "`loci repair` writes it again from what the log's meta table records (its format and backend)";

/// The manifest's bytes, from a regular file only ([`crate::storage::open_regular_file`]).
fn manifest_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut raw = Vec::new();
    crate::storage::open_regular_file(path)?.read_to_end(&mut raw)?;
    Ok(raw)
}

/// What a file manager or a file system puts in a directory of its own accord: no file of the
/// user's, and taken with the directory.
const SYSTEM_LITTER: &[&str] = &[".DS_Store", "Thumbs.db", "desktop.ini", "lost+found"];

/// Why no store is made in `dir`: a store is there ([`Error::AlreadyExists`]), it is a file,
/// or it holds other files ([`refuse_other_files`]).
fn refuse_to_create_in(dir: &Path) -> Result<()> {
    if dir.join(MANIFEST).exists() {
        // One that does not read is said as the open says it (damage, with what mends it):
        // "a loci store already exists here" had hidden it (helper-150).
        read_manifest(dir)?;
        return Err(Error::AlreadyExists {
            path: dir.to_path_buf(),
        });
    }
    // Said so: the system's word for it is "File exists".
    if dir.exists() && !dir.is_dir() {
        return Err(Error::InvalidArgument {
            name: "store".into(),
            message: format!(
                "{}: is a file, not a directory; a store is a directory",
                dir.display()
            ),
        });
    }
    refuse_other_files(dir)
}

/// Refuses to make a store in a directory of other files: `loci init --store ~` had put a
/// store's files among a user's without a word. A directory with a backend's files is left to
/// [`Store::create`]'s own checks (a store that lost its manifest, or a creation cut short),
/// and one a creation cut short left only its lock in is taken. A store's other files without
/// a log (its log moved away) are said to be what is left of a store.
fn refuse_other_files(dir: &Path) -> Result<()> {
    if !dir.exists() || BackendKind::present_in(dir).next().is_some() {
        return Ok(());
    }
    let refused = |message: String| Error::InvalidArgument {
        name: "store".into(),
        message: format!("{}: {message}", crate::error::shown_path(dir)),
    };
    // One that cannot be listed could hold anything: a store is not made among files unseen.
    let entries = std::fs::read_dir(dir).map_err(|e| {
        refused(format!(
            "cannot be listed to check that it holds nothing else ({e}); give an empty or new directory"
        ))
    })?;
    let mut others: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != crate::storage::LOCK_FILE && !SYSTEM_LITTER.contains(&name.as_str()))
        .collect();
    // The first by name, so that the message is the same on every run.
    others.sort();
    let Some(first) = others.first() else {
        return Ok(());
    };
    let more = match others.len() - 1 {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let store_files = [
        TEXT_DIR,
        MANIFEST_TMP,
        snapshot::SNAPSHOT_FILE,
        snapshot::SNAPSHOT_TMP_FILE,
        crate::storage::COMPACT_DIR,
        crate::storage::SLED_OLD,
    ];
    let held = format!("{}{more}", crate::error::quoted_excerpt(first));
    Err(refused(
        if others.iter().all(|o| store_files.contains(&o.as_str())) {
            format!(
                "holds what is left of a store ({held}) but no log: a new store is not made over it (remove them, or give an empty or new directory)"
            )
        } else {
            format!("is not empty and holds no loci store (it holds {held}); give an empty or new directory")
        },
    ))
}

/// The bytes of a redb file as redb makes it, at most, before it writes the magic number (a
/// new file is 1,056,768 bytes).
const UNFINISHED_REDB_MAX_BYTES: u64 = 2 << 20;

/// Removes the redb file at `path` (of a store directory without a manifest) when redb never
/// finished making it ([`unfinished_redb`]): a creation killed before it wrote its magic
/// number (`loci init` killed) left such a file, which redb refuses to open ("Not a redb
/// database"), and the directory could be used again only by hand.
fn take_over_unfinished_redb(dir: &Path, path: &Path) -> Result<()> {
    if !unfinished_redb(dir, path) {
        return Ok(());
    }
    tracing::warn!(
        path = %path.display(),
        "a redb file redb never finished making (no magic number), from a creation cut short: made again"
    );
    std::fs::remove_file(path).map_err(|e| Error::io(path, e))
}

/// Whether the store directory `dir` holds only sled's directory `path` (beside the lock),
/// with no log in it or an empty one: what an `init` killed before sled wrote anything
/// leaves (helper-151: told that repair writes the manifest again, and then by repair that
/// the log is gone). A store that has a snapshot or a text index beside it lost its log.
fn unfinished_sled(dir: &Path, path: &Path) -> bool {
    let no_log = match std::fs::metadata(path.join("db")) {
        Ok(m) => m.is_file() && m.len() == 0,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let name = path.file_name();
    no_log
        && entries.filter_map(|e| e.ok()).all(|e| {
            let n = e.file_name();
            Some(n.as_os_str()) == name
                || n == crate::storage::LOCK_FILE
                || SYSTEM_LITTER.iter().any(|l| n == *l)
        })
}

/// Whether the redb file at `path` in store directory `dir` is one redb never finished making:
/// redb writes a new file's header with its magic number zeroed, and the magic number last,
/// once the rest is on disk, so a file whose first bytes are zeros holds no data. Only in a
/// directory that holds nothing else but the lock (no manifest, no text index, no snapshot),
/// and no larger than a new file: a store's file damaged at its start is never taken for one.
fn unfinished_redb(dir: &Path, path: &Path) -> bool {
    use std::io::Read;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() || meta.len() > UNFINISHED_REDB_MAX_BYTES {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let name = path.file_name();
    let only_it = entries.filter_map(|e| e.ok()).all(|e| {
        let n = e.file_name();
        Some(n.as_os_str()) == name
            || n == crate::storage::LOCK_FILE
            || SYSTEM_LITTER.iter().any(|l| n == *l)
    });
    if !only_it {
        return false;
    }
    // A file shorter than the magic number is all of it unwritten; a read that fails is not
    // known to be.
    let mut first = Vec::with_capacity(REDB_MAGIC_BYTES);
    let read = std::fs::File::open(path)
        .and_then(|f| f.take(REDB_MAGIC_BYTES as u64).read_to_end(&mut first));
    read.is_ok() && first.iter().all(|b| *b == 0)
}

/// The length of redb's magic number, the first bytes of its file.
const REDB_MAGIC_BYTES: usize = 9;

/// Writes the manifest atomically (a temporary file, then a rename over the old one).
fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(manifest).map_err(|e| Error::Store {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let tmp = dir.join(MANIFEST_TMP);
    let path = dir.join(MANIFEST);
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
}

/// [`Store::applied_key`] read from `backend` (the store's, or a view of it).
fn applied_key_in(backend: &dyn Backend, key: &str) -> Result<Option<u64>> {
    backend
        .get(Table::Idempotency, key.as_bytes())?
        .map(|v| {
            <[u8; 8]>::try_from(v.as_slice())
                .map(u64::from_be_bytes)
                .map_err(|_| Error::Corrupt {
                    table: Table::Idempotency.name(),
                    message: format!("value of {} bytes, expected 8", v.len()),
                })
        })
        .transpose()
}

/// A log position the meta table keeps under `key`, 0 before any.
fn meta_seq(backend: &dyn Backend, key: &[u8]) -> Result<u64> {
    Ok(backend
        .get(Table::Meta, key)?
        .map(|v| decode_meta(key, &v))
        .transpose()?
        .unwrap_or(0))
}

/// Opens the text index read-only while another process may be writing it. The writer deletes
/// segment files once a merge has replaced them, so an open that read the previous list of
/// segments can find one gone: it is tried again with the new list. (Once open, the segments
/// are mapped, and a later deletion does not affect them.)
fn open_text_beside_writer(dir: &Path) -> Result<(TextIndex, u64)> {
    const ATTEMPTS: u32 = 20;
    let mut attempt = 0;
    loop {
        match TextIndex::open_read_only(dir) {
            Err(e @ Error::Text { .. }) if attempt + 1 < ATTEMPTS => {
                attempt += 1;
                tracing::debug!(error = %e, attempt, "text index changed while opening; again");
                std::thread::sleep(std::time::Duration::from_millis(5 * attempt as u64));
            }
            other => return other,
        }
    }
}

/// A policy from its file in the store directory, or the default when there is none.
fn read_policy<P: Default>(path: &Path, read: impl FnOnce(&Path) -> Result<P>) -> Result<P> {
    if path.exists() {
        read(path)
    } else {
        Ok(P::default())
    }
}

/// The store's salience policy file, when it has one (see [`Store::set_salience_policy`]).
const SALIENCE_FILE: &str = "salience.json";

/// The store's decay policy file, when it has one (see [`Store::set_decay_policy`]).
const DECAY_FILE: &str = "decay.json";

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Writes `value` as pretty JSON to `path` through a temporary file and a rename, so a reader
/// never sees half a file.
fn write_json_atomically(path: &Path, value: &impl Serialize) -> Result<()> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| Error::InvalidArgument {
        name: path.display().to_string(),
        message: e.to_string(),
    })?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, json).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

impl Store {
    /// The bytes of the store's files in `dir` (their lengths, as [`CompactReport`] counts
    /// them), for a figure taken once a store is closed.
    pub fn files_bytes(dir: &Path) -> u64 {
        dir_size(dir)
    }
}

/// The length of the file at `path`, or of every file under the directory, links not
/// followed (a link back up the tree would loop until the stack ran out).
fn dir_size(path: &Path) -> u64 {
    walk_files(path, &|m| m.len())
}

/// What the files at or under `path` take on disk: allocated blocks, which a sparse file
/// (redb grows its file ahead of use) has fewer of than its length says.
fn dir_allocated(path: &Path) -> u64 {
    #[cfg(unix)]
    let blocks = |m: &std::fs::Metadata| std::os::unix::fs::MetadataExt::blocks(m) * 512;
    #[cfg(not(unix))]
    let blocks = |m: &std::fs::Metadata| m.len();
    walk_files(path, &blocks)
}

/// `size` summed over the regular files at or under `path`. A store directory is flat or one
/// level deep; the depth bound only guards against a directory someone nested on purpose.
fn walk_files(path: &Path, size: &dyn Fn(&std::fs::Metadata) -> u64) -> u64 {
    fn walk(path: &Path, size: &dyn Fn(&std::fs::Metadata) -> u64, depth: u32) -> u64 {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_file() => size(&m),
            Ok(m) if m.is_dir() && depth < 16 => std::fs::read_dir(path)
                .map(|rd| rd.flatten().map(|e| walk(&e.path(), size, depth + 1)).sum())
                .unwrap_or(0),
            _ => 0,
        }
    }
    walk(path, size, 0)
}

impl Store {
    /// Creates a new store in `dir` with the given backend. `dir` is made when missing; an
    /// existing one must be empty (or hold only what a creation cut short left), and a store
    /// there, or other files, are [`Error::AlreadyExists`] and [`Error::InvalidArgument`].
    pub fn create(dir: impl AsRef<Path>, backend: BackendKind) -> Result<Store> {
        let dir = dir.as_ref();
        // Before the lock too: taking it makes its file, which a directory of other files is
        // not given.
        refuse_to_create_in(dir)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lock = StoreLock::acquire(dir)?;
        Self::create_locked(dir, backend, lock)
    }

    /// [`Store::create`] once its writer `lock` is held: the directory is checked again, as
    /// another process may have made a store in it between the first check and the lock (two
    /// `init`s racing: the second had called the first's log a store's without its manifest).
    fn create_locked(dir: &Path, backend: BackendKind, lock: StoreLock) -> Result<Store> {
        refuse_to_create_in(dir)?;
        // A log left without its manifest (lost, or deleted) is a store's: a new manifest
        // beside it would present its events as none, and the next ingest would write over
        // them. A log of no events (a creation cut short) is taken over.
        let log_is_here = |path: &Path| {
            Error::Store {
            path: dir.to_path_buf(),
            message: format!(
                "{} holds a store's log but there is no {MANIFEST}: a new store is not made over it (`loci repair` writes {MANIFEST} again from the log; or move the directory away)",
                path.display()
            ),
        }
        };
        // Whichever backend the new store takes: the file is no store's.
        take_over_unfinished_redb(dir, &BackendKind::Redb.path_in(dir))?;
        if let Some((_, other)) = BackendKind::present_in(dir).find(|(k, _)| *k != backend) {
            return Err(log_is_here(&other));
        }
        let b = backend.open(dir)?;
        if b.last(Table::Log)?.is_some() {
            return Err(log_is_here(&backend.path_in(dir)));
        }
        let mut batch = WriteBatch::default();
        batch.put(Table::Meta, META_FORMAT, encode(&STORE_FORMAT));
        batch.put(Table::Meta, META_BACKEND, encode(&backend));
        batch.put(Table::Meta, META_PROJECTION, encode(&PROJECTION_VERSION));
        batch.put(Table::Meta, META_COUNTERS, encode(&Counters::default()));
        b.commit(batch)?;
        drop(b);
        // The manifest is written last and atomically (rename), so a directory with a manifest
        // always has initialised tables behind it.
        write_manifest(
            dir,
            &Manifest {
                format: STORE_FORMAT,
                backend,
            },
        )?;
        let manifest = read_manifest(dir)?;
        Self::open_with(dir.to_path_buf(), manifest, Some(lock))
    }

    /// Opens an existing store for writing: takes the store's writer lock (a second writer gets
    /// [`Error::Locked`] naming the holder's pid), loads the derived graph from storage, and
    /// brings the full-text index up to the log.
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        Self::open_taking(dir.as_ref(), StoreLock::acquire)
    }

    /// [`Store::open`], the writer lock taken by `take`.
    fn open_taking(dir: &Path, take: fn(&Path) -> Result<StoreLock>) -> Result<Store> {
        let (manifest, lock) = Self::take_for_writing(dir, take)?;
        Self::open_with(dir.to_path_buf(), manifest, Some(lock))
    }

    /// What comes before the backend of a store opened for writing is opened: its manifest
    /// read, the writer lock taken by `take`, an interrupted compaction recovered and a
    /// snapshot left half written removed.
    fn take_for_writing(
        dir: &Path,
        take: fn(&Path) -> Result<StoreLock>,
    ) -> Result<(Manifest, StoreLock)> {
        let manifest = read_manifest(dir)?;
        let lock = take(dir)?;
        deleting::recover_compaction(dir, manifest.backend)?;
        snapshot::remove_unfinished(dir);
        repair::remove_stray_copies(dir);
        Ok((manifest, lock))
    }

    /// Opens an existing store for reading only, beside a writer in another process (redb; a
    /// sled store held by a writer is [`Error::Locked`]). Nothing on disk changes: a full-text
    /// index behind the log is used as it is (a writer is mid-batch, or died before indexing;
    /// the next writer catches it up), and what only a writer can repair is an error. The
    /// graph is as of the open; writes return [`Error::ReadOnly`].
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Store> {
        // A deletion gives every id anew and then writes every node's document again, which
        // at scale takes minutes; an open that read the graph on one side of it and the index
        // on the other is made again, a few times, then kept with its node hits left out
        // (which its first search warns of).
        const ATTEMPTS: u32 = 4;
        let dir = dir.as_ref().to_path_buf();
        let mut attempt = 1;
        loop {
            let manifest = read_manifest(&dir)?;
            let store = Self::open_with(dir.clone(), manifest, None)?;
            if store.searches_nodes() {
                return Ok(store);
            }
            if attempt == ATTEMPTS {
                store.warn_of_node_hits_left_out.store(true, Relaxed);
                return Ok(store);
            }
            drop(store);
            std::thread::sleep(std::time::Duration::from_millis(20 << attempt));
            attempt += 1;
        }
    }

    /// For readers: opens for writing when no other process holds the store (so that the
    /// text index can be repaired), read-only when one does, or when this user cannot take
    /// the writer lock at all (a store on a read-only mount, or another user's). A writable
    /// handle marks the lock as a reader's, which a writer of another process waits for up to
    /// a minute ([`StoreLock::acquire`]): hold it for a read, not for a long-lived writer.
    pub fn open_for_reading(dir: impl AsRef<Path>) -> Result<Store> {
        // Beside a live writer the lock is busy for good: a reader does not wait the half
        // second `open` gives a lock about to be let go (it took 0.5 s beside a server), but
        // reads beside it, except from sled, which a writer holds whole: that waits as `open`.
        let dir = dir.as_ref();
        match Self::open_taking(dir, StoreLock::acquire_if_free) {
            Err(Error::Locked { .. }) => match Self::open_read_only(dir) {
                Err(Error::Locked { .. }) => match Self::open(dir) {
                    Err(Error::Locked { .. }) => Self::open_read_only(dir),
                    other => other,
                },
                // Derived by other rules, which only a writer rebuilds: this one, once the
                // holder let go (a writer may have just closed), else the holder's build
                // decides, and the store is busy, not damaged (helper-136: it exited 6).
                Err(Error::OtherRules {
                    found, ours, path, ..
                }) => match Self::open(dir) {
                    Err(Error::Locked { holder, .. }) => Err(Error::OtherRules {
                        path,
                        found,
                        ours,
                        held: true,
                        holder,
                    }),
                    other => other,
                },
                // A compaction swaps the store's files under its writer lock: a read that
                // opened in between met files of two moments, and was told the text index
                // must be rebuilt, or is missing. The store is busy, not damaged. So is one
                // whose writer is rebuilding the index after the swap (helper-115: that read
                // was told to open the store for writing, exit 8).
                Err(e) if crate::storage::compacting(dir) || e.finds_the_index_being_made() => {
                    match StoreLock::holder(dir) {
                        Some(pid) => Err(crate::storage::locked(dir, Some(pid))),
                        None => Err(e),
                    }
                }
                other => other,
            },
            // The system refused this user a write: on the writer lock's file, or, where the
            // lock file is writable but the rest is not, on the backend's. A reading command
            // writes nothing else, so a read-only open can still serve it.
            Err(e) if crate::error::refuses_this_user(&e) => Self::open_read_only(dir),
            // A writable open brings the text index and the snapshot up to the log, which
            // writes; where that fails (a full disk: helper-115, every read exited 8 until
            // there was space; tantivy's error for it names no cause), a read needs none of
            // it, and the views as they are serve it: searches then miss the events past the
            // index's position, which the warnings say.
            Err(e) if matches!(e, Error::Text { .. }) || crate::error::out_of_space(&e) => {
                match Self::open_read_only(dir) {
                    Ok(store) => {
                        tracing::warn!(error = %e, "the store could not be brought up to date (its text index, or its snapshot); reading it as it is, read-only");
                        Ok(store)
                    }
                    Err(_) => Err(e),
                }
            }
            other => other,
        }
    }

    /// Closes the store for a process about to exit: recorded uses are flushed, a snapshot
    /// is written when one is due, and the backend, text index and lock are closed as by a
    /// drop, but the in-memory state is left for the system to take back with the process,
    /// which it does at once, where freeing it record by record took 8 ms at 1M edges (a
    /// tenth of a command-line query's run on such a store). A program that goes on running
    /// drops the store instead.
    pub fn close_at_exit(mut self) {
        self.finish();
        std::mem::forget(std::mem::take(self.state.get_mut()));
    }

    /// Whether this handle refuses writes (see [`Store::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.lock.is_none()
    }

    fn open_with(dir: PathBuf, manifest: Manifest, lock: Option<StoreLock>) -> Result<Store> {
        let started = std::time::Instant::now();
        let mut timings = OpenTimings::default();
        let read_only = lock.is_none();
        let backend = manifest.backend.open_existing(&dir, read_only)?;
        let (mut counters, mut format) = Self::check_meta(&*backend, &dir, read_only)?;
        // After the checks: a store this build refuses is left as it is.
        if manifest.backend == BackendKind::Sled
            && Self::take_back_failed_commits(&*backend, &dir, read_only)?
        {
            (counters, format) = Self::check_meta(&*backend, &dir, read_only)?;
        }
        timings.backend = ms_since(started);
        let t = std::time::Instant::now();
        let (mut state, loaded) =
            Self::load_consistent(&*backend, &dir, counters, read_only, &mut timings)?;
        timings.state = ms_since(t);
        // Read after the counters the graph was loaded as of: a floor past them is a deletion
        // committed since, which the graph does not reflect (only a reader beside a writer
        // can meet one).
        let ids_floor = meta_seq(&*backend, META_IDS_FLOOR)?;
        state.ids_floor = if ids_floor <= state.counters.last_seq {
            ids_floor
        } else {
            IDS_FLOOR_UNKNOWN
        };
        if !read_only {
            // Only once the state is loaded, which for an older store is the replay of its
            // whole log: a log that does not replay leaves the store as it was, tables and
            // all, for the build that made it.
            Self::upgrade_format(&*backend, &dir, format.min(manifest.format))?;
        }
        let t = std::time::Instant::now();
        let counters = state.counters;
        let decay = read_policy(&dir.join(DECAY_FILE), DecayPolicy::from_file)?;
        let salience = read_policy(&dir.join(SALIENCE_FILE), SaliencePolicy::from_file)?;
        let (text, indexed, text_rebuilt) = if read_only {
            let (text, seq) = open_text_beside_writer(&dir.join(TEXT_DIR))?;
            (text, Some(seq), false)
        } else {
            Self::open_text(&dir.join(TEXT_DIR))?
        };
        if let Some(at) = indexed.filter(|&at| !read_only && at > counters.last_seq) {
            // The index is committed after the log it reflects, both durably, and no other
            // process writes beside this one: an index ahead of the log is a log that lost
            // committed events (sled drops every record after a damaged one). Rebuilding the
            // index from what is left would make the loss permanent and unseen; nothing is
            // changed, and the user is told.
            return Err(Error::Corrupt {
                table: Table::Log.name(),
                message: format!(
                    "{}: the log ends at event {}, but the full-text index holds events \
                     through {at}: the log has lost committed events (a damaged file); \
                     loci changed nothing: restore the store from a backup (a log restored \
                     on purpose from an older one: remove {} and the snapshot, and they are \
                     rebuilt from it)",
                    manifest.backend.path_in(&dir).display(),
                    counters.last_seq,
                    dir.join(TEXT_DIR).display()
                ),
            });
        }
        if !read_only {
            // What this process commits is of the ids its graph gives.
            text.set_next_floor(ids_floor);
        }
        let mut store = Store {
            dir,
            backend,
            state: parking_lot::RwLock::new(state),
            text,
            writer: Mutex::new(()),
            context_saves: Mutex::new(()),
            deletions: Mutex::new(()),
            text_rebuilt,
            decay: RwLock::new(Arc::new(decay)),
            salience: RwLock::new(Arc::new(salience)),
            lock,
            usage_pending: Mutex::new(Pending::default()),
            tiers: TierPolicy::default(),
            snapshot_seq: match loaded.source {
                StateSource::Snapshot { seq, .. } => seq,
                StateSource::Log => u64::MAX,
            }
            .into(),
            since_snapshot: loaded.since_snapshot.into(),
            snapshot_size: loaded.snapshot_size.into(),
            state_source: loaded.source,
            open_timings: timings,
            finished: false,
            warn_of_node_hits_left_out: false.into(),
            rewriting: Rewriting::default(),
            text_retry: Default::default(),
            live_summaries: Default::default(),
        };
        let from = indexed.unwrap_or(0);
        if loaded.fewer_ids && !read_only {
            store.take_replayed_counters()?;
        } else if read_only {
            // A reader apart from its index across a deletion is opened again, and says so
            // at its first search if it stays apart (`open_read_only`): not once an attempt
            // here.
            if from != counters.last_seq && store.searches_nodes() {
                tracing::warn!(
                    indexed = from,
                    log = counters.last_seq,
                    "read-only open: the full-text index is at another log position than the graph this reader read (a writer committing, or an index no open could bring up to the log); searches see the index as it is"
                );
            }
        } else if store.text.ids_floor().is_some_and(|f| f != ids_floor) {
            // Node documents of ids from before a deletion, which gave them anew: one that was
            // cut short, or failed to write them (`IDS_FLOOR_CUT_SHORT`).
            tracing::warn!("the full-text index's node documents are of ids a deletion gave anew; rebuilding it from the log");
            store.rebuild_text(REBUILD_DOCS_PER_COMMIT)?;
        } else if indexed.is_none() || from < counters.last_seq {
            tracing::info!(
                from,
                to = counters.last_seq,
                "bringing the full-text index up to the log"
            );
            if let Err(e) = store.catch_up_text(from) {
                // The index is derived: whatever stops it catching up (files a killed writer
                // left half made), it is rebuilt from the log.
                tracing::warn!(error = %e, "full-text catch-up failed; rebuilding the index from the log");
                store.rebuild_text(REBUILD_DOCS_PER_COMMIT)?;
            }
        }
        if !read_only && store.text.ids_floor().is_none() {
            // An index committed by a build before floors were recorded: one commit of
            // nothing records the store's, so that a deletion's searches can tell its old
            // node documents from its new ones.
            let at = store.text.indexed_seq();
            if let Err(e) = store.text.apply(Vec::new(), &[], at, None) {
                tracing::warn!(error = %e, "the full-text index's ids floor could not be recorded");
            }
        }
        store.open_timings.text = ms_since(t);
        store.open_timings.total = ms_since(started);
        tracing::debug!(ms = ?store.open_timings, "store opened");
        Ok(store)
    }

    /// Loads the derived state as of one commit. The load is several reads; beside a writer in
    /// another process (a read-only handle) a commit could land between them and mix two
    /// states, so the counters, which every commit rewrites, are read again afterwards and the
    /// load is repeated until they did not move.
    fn load_consistent(
        backend: &dyn Backend,
        dir: &Path,
        mut counters: Counters,
        read_only: bool,
        timings: &mut OpenTimings,
    ) -> Result<(State, Loaded)> {
        // A reader beside a writer loads from one pinned view of the committed state where
        // the backend has one: a retry loop alone never settled beside a writer committing
        // every few milliseconds (a `stats` beside a streaming ingest failed as "locked").
        if read_only {
            if let Some(view) = backend.pinned_view()? {
                let counters: Counters = match view.get(Table::Meta, META_COUNTERS)? {
                    Some(v) => decode_meta(META_COUNTERS, &v)?,
                    None => counters,
                };
                return Self::load_once(&*view, dir, counters, timings);
            }
        }
        const ATTEMPTS: usize = 20;
        for _ in 0..ATTEMPTS {
            let (state, loaded) = Self::load_once(backend, dir, counters, timings)?;
            if !read_only {
                // The writer lock is ours: nothing else commits.
                return Ok((state, loaded));
            }
            let after: Option<Counters> = backend
                .get(Table::Meta, META_COUNTERS)?
                .map(|v| decode_meta(META_COUNTERS, &v))
                .transpose()?;
            match after {
                Some(a) if a == counters => return Ok((state, loaded)),
                Some(a) => counters = a,
                None => break,
            }
        }
        Err(crate::storage::locked(dir, StoreLock::holder(dir)))
    }

    /// The whole in-memory state read once from `backend` at `counters`: the graph, the folds,
    /// the deleted set and the latest event time.
    fn load_once(
        backend: &dyn Backend,
        dir: &Path,
        counters: Counters,
        timings: &mut OpenTimings,
    ) -> Result<(State, Loaded)> {
        let deleted = read_deleted(backend)?;
        let (mut state, loaded) = Self::load_graph(backend, dir, counters, &deleted, timings)?;
        if !loaded.fewer_ids {
            state.counters = counters;
        }
        state.folds = Folds::read(backend)?;
        state.deleted = deleted;
        state.latest_ts = backend
            .last(Table::EventTime)?
            .and_then(|(k, _)| time_of_key(&k));
        Ok((state, loaded))
    }

    /// Checks the meta table (format, counters) and the derivation rules' version, rebuilding
    /// what the backend derives when it was made by other rules (a writer only). Returns the
    /// counters and the store format the meta table says.
    fn check_meta(backend: &dyn Backend, dir: &Path, read_only: bool) -> Result<(Counters, u32)> {
        let store_err = |message: String| Error::Store {
            path: dir.to_path_buf(),
            message,
        };
        let meta = |key: &[u8]| backend.get(Table::Meta, key);
        let format = meta(META_FORMAT)?
            .map(|v| decode_meta::<u32>(META_FORMAT, &v))
            .transpose()?;
        let format = match format {
            Some(f) if (OLDEST_STORE_FORMAT..=STORE_FORMAT).contains(&f) => f,
            other => {
                return Err(store_err(format!(
                "meta table has format {other:?}, expected {OLDEST_STORE_FORMAT} to {STORE_FORMAT}"
            )))
            }
        };
        let counters: Counters = match meta(META_COUNTERS)? {
            Some(v) => decode_meta(META_COUNTERS, &v)?,
            None => return Err(store_err("meta table has no counters".into())),
        };
        let projection: Option<u32> = meta(META_PROJECTION)?
            .map(|v| decode_meta(META_PROJECTION, &v))
            .transpose()?;
        if projection != Some(PROJECTION_VERSION) {
            if read_only {
                return Err(Error::OtherRules {
                    path: dir.to_path_buf(),
                    found: projection,
                    ours: PROJECTION_VERSION,
                    held: false,
                    holder: None,
                });
            }
            match projection {
                // An older build on a newer build's store: said, since that build rebuilds
                // them again at its next open (helper-136: nothing said so).
                Some(v) if v > PROJECTION_VERSION => tracing::warn!(
                    from = v,
                    to = PROJECTION_VERSION,
                    "the store's nodes and edges were derived by a newer build's rules: rebuilding them from the log under this build's older ones (the newer build rebuilds them again when it next opens the store)"
                ),
                _ => tracing::info!(
                    from = ?projection,
                    to = PROJECTION_VERSION,
                    "derivation rules changed: rebuilding nodes and edges from the log"
                ),
            }
            Self::rebuild_derived(backend, dir)?;
        }
        Ok((counters, format))
    }

    /// Brings a store whose meta table or manifest says an older `format` to this build's,
    /// once its state is loaded: marks it, then empties what older builds kept (also after a
    /// crash part way through, which left it marked). A store of this format costs a lookup
    /// per retired table.
    fn upgrade_format(backend: &dyn Backend, dir: &Path, format: u32) -> Result<()> {
        if format < STORE_FORMAT {
            Self::mark_current_format(backend, dir)?;
        }
        Self::retire_tables(backend)
    }

    /// Marks an older store as this build's format before anything of it is written: the meta
    /// table first (a build of the older format refuses the store from then on), then the
    /// manifest. A crash between the two leaves the manifest older than the meta table, and
    /// the next writable open marks it again.
    fn mark_current_format(backend: &dyn Backend, dir: &Path) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.put(Table::Meta, META_FORMAT, encode(&STORE_FORMAT));
        backend.commit(batch)?;
        let mut manifest = read_manifest(dir)?;
        manifest.format = STORE_FORMAT;
        write_manifest(dir, &manifest)?;
        tracing::info!(to = STORE_FORMAT, "store marked with this build's format");
        Ok(())
    }

    /// Empties what stores before format 3 kept of the derived graph: the nodes and edges
    /// tables and the per-commit change records. Nothing of this build reads them; they are
    /// removed a chunk of keys per commit (a crash part way leaves the rest for the next
    /// writable open), and a store without them costs a lookup per table.
    fn retire_tables(backend: &dyn Backend) -> Result<()> {
        const CHUNK: usize = 100_000;
        // A table and the range of its keys to remove.
        type Range<'a> = (Table, &'a [u8], Option<&'a [u8]>);
        // The first key after every key that starts with the prefix (`/` + 1 is `0`).
        let changed_end = b"changed0";
        let retired: [Range<'_>; 3] = [
            (Table::Nodes, &[], None),
            (Table::Edges, &[], None),
            (Table::Meta, snapshot::CHANGED_PREFIX, Some(changed_end)),
        ];
        for (table, from, to) in retired {
            loop {
                let mut keys = Vec::new();
                backend.scan(table, from, to, &mut |k, _| {
                    keys.push(k.to_vec());
                    Ok(keys.len() < CHUNK)
                })?;
                if keys.is_empty() {
                    break;
                }
                tracing::info!(
                    table = table.name(),
                    keys = keys.len(),
                    "removing what an older store format kept"
                );
                let mut batch = WriteBatch::default();
                for k in keys {
                    batch.delete(table, k);
                }
                backend.commit(batch)?;
            }
        }
        Ok(())
    }

    /// Opens the full-text index; when it cannot be opened (damaged segment, truncated
    /// file, even a panic inside tantivy) it is emptied and reported as rebuilt, since it is
    /// derived from the log and the caller rebuilds it. Without this, one damaged file would
    /// make every command fail until someone deleted `text/` by hand.
    fn open_text(text_dir: &Path) -> Result<(TextIndex, Option<u64>, bool)> {
        // `TextIndex::open` turns tantivy's panics into errors.
        match TextIndex::open(text_dir) {
            Ok((text, indexed)) => Ok((text, indexed, false)),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    dir = %text_dir.display(),
                    "full-text index cannot be opened; rebuilding it from the log"
                );
                crate::text::clear_dir(text_dir)?;
                let (text, _) = TextIndex::open(text_dir)?;
                Ok((text, None, true))
            }
        }
    }

    /// True when [`Store::open`] found the full-text index damaged and rebuilt it from the log.
    pub fn text_rebuilt(&self) -> bool {
        self.text_rebuilt
    }

    /// Where the open got the in-memory state from: the snapshot (and how much it caught up)
    /// or the replay of the whole log.
    pub fn state_source(&self) -> StateSource {
        self.state_source
    }

    /// The graph part of the state (nodes, edges, interners, adjacency) as of `counters`: the
    /// snapshot brought up to date by replaying the log past it when it can be, otherwise the
    /// replay of the whole log. `deleted` is the store's deleted set (the meta table's).
    fn load_graph(
        backend: &dyn Backend,
        dir: &Path,
        counters: Counters,
        deleted: &BTreeSet<u64>,
        timings: &mut OpenTimings,
    ) -> Result<(State, Loaded)> {
        // Why the header was refused, kept apart from damage: a snapshot the store moved past
        // is routine (logged as information), a damaged one is worth a warning.
        let mut stale: Option<String> = None;
        let mut failed: Option<Error> = None;
        let mut fits = |h: &snapshot::Header| match Self::snapshot_fits(backend, h, counters) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => {
                stale = Some(reason.clone());
                Err(reason)
            }
            Err(e) => {
                failed = Some(e);
                Err("the store could not be read to judge the snapshot".into())
            }
        };
        let read = snapshot::read(dir, timings, &mut fits);
        if let Some(e) = failed {
            return Err(e);
        }
        match read {
            Err(_) if stale.is_some() => tracing::info!(
                reason = stale.as_deref().unwrap_or_default(),
                "the state snapshot cannot be brought up to date; replaying the log"
            ),
            Ok(Some((at, state))) => {
                let from = at.counters.last_seq;
                match Self::catch_up_snapshot(backend, state, at.counters, counters, deleted)? {
                    Ok((state, caught_up)) => {
                        let size = state.graph_size();
                        tracing::debug!(
                            snapshot = from,
                            log = counters.last_seq,
                            "state from the snapshot"
                        );
                        return Ok((
                            state,
                            Loaded {
                                source: StateSource::Snapshot {
                                    seq: from,
                                    caught_up,
                                },
                                since_snapshot: caught_up,
                                snapshot_size: size.saturating_sub(caught_up),
                                fewer_ids: false,
                            },
                        ));
                    }
                    Err(reason) => tracing::warn!(
                        reason,
                        "the state snapshot cannot be brought up to date; replaying the log"
                    ),
                }
            }
            Ok(None) => {}
            Err(reason) => {
                tracing::warn!(reason, "the state snapshot is unusable; replaying the log")
            }
        }
        Self::replay_whole_log(backend, counters, deleted)
    }

    /// The graph replayed from the whole log, as an open without a usable snapshot has it.
    fn replay_whole_log(
        backend: &dyn Backend,
        counters: Counters,
        deleted: &BTreeSet<u64>,
    ) -> Result<(State, Loaded)> {
        let state = State {
            ids_epoch: next_graph_epoch(),
            graph_epoch: next_graph_epoch(),
            ..State::default()
        };
        let unreplayable = |message: String| Error::Corrupt {
            table: Table::Log.name(),
            message: format!("the state cannot be replayed from the log: {message}"),
        };
        let (mut state, _) = replay_onto(
            backend,
            state,
            0,
            deleted,
            UNVISITED,
            Vec::new(),
            counters.last_seq,
            &mut NoLookout,
        )?
        .map_err(unreplayable)?;
        let replayed = state.counters;
        // Every event replayed, to fewer ids than were given out: a live state read from a
        // snapshot changed under its map made again a node or an edge its log already had
        // (an upsert's key lookup missed, and a miss of a key that may be new is taken as it
        // is). The log is the truth; the open takes its counters, and its text index (whose
        // documents name the ids given out), from it.
        let within = replayed.last_seq == counters.last_seq
            && replayed.next_node <= counters.next_node
            && replayed.next_edge <= counters.next_edge;
        if !within {
            return Err(unreplayable(format!(
                "the replay reached {replayed:?}, the meta table says {counters:?}"
            )));
        }
        let fewer_ids = replayed != counters;
        if fewer_ids {
            tracing::warn!(
                replayed = ?replayed,
                stored = ?counters,
                "the log replays to fewer nodes or edges than the last process gave ids to (its state was read from a damaged snapshot); the log's state is taken, and its counters and text index with it"
            );
        }
        // The lists grew edge by edge; one array holds them in less (no header or spare
        // capacity per node), as an open from a snapshot does.
        state.adj.compact();
        let size = state.graph_size();
        // What the next open would replay again: the log's events, or the graph's size where
        // that is more (a snapshot counts changes so). By the graph alone, a long log over a
        // small graph (thousands of summaries) stayed under the close's threshold, and every
        // open replayed it whole.
        let replayed_events = state.counters.last_seq;
        Ok((
            state,
            Loaded {
                source: StateSource::Log,
                since_snapshot: size.max(replayed_events),
                snapshot_size: 0,
                fewer_ids,
            },
        ))
    }

    /// Whether a snapshot whose header says `header` can be brought up to `now` by replaying
    /// the log past it: not from before a rewrite, not ahead of the store, and taken after the
    /// event the log holds at its position (another store's snapshot is not).
    fn snapshot_fits(
        backend: &dyn Backend,
        header: &snapshot::Header,
        now: Counters,
    ) -> Result<std::result::Result<(), String>> {
        let at = header.counters;
        let floor = meta_seq(backend, META_SNAPSHOT_FLOOR)?;
        if at.last_seq < floor {
            return Ok(Err(format!(
                "it reflects event {}, before the rewrite at event {floor}",
                at.last_seq
            )));
        }
        if at.last_seq > now.last_seq
            || (at.last_seq == now.last_seq && at != now)
            || at.next_node > now.next_node
            || at.next_edge > now.next_edge
        {
            return Ok(Err(format!("it reflects {at:?}, the store is at {now:?}")));
        }
        if snapshot::log_fingerprint(backend, at.last_seq)? != header.log {
            return Ok(Err(format!(
                "the log's event {} is not the one it was taken after (another store's snapshot?)",
                at.last_seq
            )));
        }
        Ok(Ok(()))
    }

    /// Replays the log's events after the snapshot's last onto its state (taken at `at`), up
    /// to `now`: the same projection live ingest ran. `Ok(Err(reason))` when that cannot
    /// bring it to `now` (the replay fails, or meets a damaged block of the snapshot). Gives
    /// the state and the number of changes caught up.
    fn catch_up_snapshot(
        backend: &dyn Backend,
        mut state: State,
        at: Counters,
        now: Counters,
        deleted: &BTreeSet<u64>,
    ) -> Result<std::result::Result<(State, u64), String>> {
        state.counters = at;
        let from = at.last_seq;
        let (state, weight) = match replay_onto(
            backend,
            state,
            from,
            deleted,
            UNVISITED,
            Vec::new(),
            now.last_seq,
            &mut NoLookout,
        )? {
            Ok(done) => done,
            Err(why) => return Ok(Err(why)),
        };
        if state.counters != now {
            return Ok(Err(format!(
                "the replay reached {:?}, the store is at {now:?}",
                state.counters
            )));
        }
        // A damaged block read while catching up (a key or an edge read as missing would
        // have been made again) would make the state wrong, not only short.
        if state.damage_found() {
            return Ok(Err("a block of it read while catching up is damaged".into()));
        }
        Ok(Ok((state, weight)))
    }

    /// Writes a snapshot of the derived state (see `store/snapshot.rs`), so that the next
    /// open reads it and replays only the log after it. Readers go on meanwhile (the state is
    /// only read); writers wait.
    /// Returns the log position it reflects, or `None` when the snapshot on disk is current.
    /// Closing a writer that changed enough does this, and so does a commit once the changes
    /// since the last snapshot outweigh the graph.
    pub fn checkpoint(&self) -> Result<Option<u64>> {
        self.checkpoint_as(Adopt::Yes)
    }

    /// [`Store::checkpoint`], the state moving onto the snapshot written or not.
    fn checkpoint_as(&self, adopt: Adopt) -> Result<Option<u64>> {
        self.writable()?;
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.checkpoint_locked(adopt)
    }

    /// [`Store::checkpoint`] under the writer lock; the state moves onto the snapshot written
    /// when `adopt` says so.
    fn checkpoint_locked(&self, adopt: Adopt) -> Result<Option<u64>> {
        let started = std::time::Instant::now();
        let (bytes, seq, size) = {
            // Held while the file is written: its sections go from the state to the file
            // without a copy. Readers go on; writers wait for the writer lock anyway.
            let state = self.read_state();
            let seq = state.counters.last_seq;
            let current = self.snapshot_seq.load(Relaxed) == seq;
            // Damage found by a read is acted on even when nothing changed since: written
            // from this state, the next snapshot would keep what reads as missing.
            if state.damage_found() {
                return Err(self.refuse_damaged_snapshot(DAMAGED_SNAPSHOT.into()));
            }
            if current {
                return Ok(None);
            }
            let log = snapshot::log_fingerprint(&*self.backend, seq)?;
            let size = state.graph_size();
            let written = snapshot::write(&self.dir, &state, log);
            // Every block of the map is checked once the write has read them all, those read
            // before included, and only then is the file put in place. The file can change
            // under the map after a block's first read (another program, the disk): a byte
            // changed before the write read it would be in the new file under checksums of
            // its own (a probe flipped bytes while loads wrote: 3 of 6 such runs ended with
            // `verify` finding a node changed or missing). Changed after this check, it is
            // not in the new file. A block the write was first to read and found damaged
            // (read as missing) is found here too; the write may have failed on it.
            if let Err(why) = state.check_mapped() {
                drop(written);
                return Err(self.refuse_damaged_snapshot(why));
            }
            (written?.put_in_place()?, seq, size)
        };
        self.snapshot_seq.store(seq, Relaxed);
        self.snapshot_size.store(size, Relaxed);
        self.since_snapshot.store(0, Relaxed);
        // The state moves onto the snapshot just written, so that its heap holds only what
        // changes after it: a writer open for months, or a bulk load, does not hold its whole
        // graph on the heap. New edges append to the rows in place (`Adjacency::grown`); a
        // load had been 8% slower, and its peak no lower, when each row it touched was copied
        // out of the map.
        if adopt == Adopt::Yes {
            self.adopt_snapshot(seq);
        }
        tracing::debug!(
            seq,
            bytes,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "state snapshot written"
        );
        Ok(Some(seq))
    }

    /// Takes the snapshot just written as the graph's base: the same graph, read in place from
    /// its map, so that the heap keeps only what changes after it. Without this a writer that
    /// runs for months, or a bulk load, holds its whole graph on the heap. The writer lock is
    /// held, so the graph has not changed since the write; a snapshot that cannot be read back
    /// leaves the state as it is, with a warning.
    fn adopt_snapshot(&self, seq: u64) {
        let mut timings = OpenTimings::default();
        let mut fits = |h: &snapshot::Header| {
            if h.counters.last_seq == seq {
                Ok(())
            } else {
                Err(format!(
                    "it reflects event {}, not {seq}",
                    h.counters.last_seq
                ))
            }
        };
        match snapshot::read(&self.dir, &mut timings, &mut fits) {
            Ok(Some((_, mapped))) => self.write_state().adopt_graph(mapped),
            Ok(None) => {
                tracing::warn!("the snapshot just written is gone; the state stays on the heap")
            }
            Err(reason) => tracing::warn!(
                reason,
                "the snapshot just written cannot be read back; the state stays on the heap"
            ),
        }
    }

    /// Removes the snapshot a damaged state was read from (`why`), so that the next open
    /// replays the state from the log, and gives the error of the checkpoint that found it.
    fn refuse_damaged_snapshot(&self, why: String) -> Error {
        self.drop_snapshot();
        Error::Store {
            path: self.dir.clone(),
            message: format!(
                "{why}; the snapshot is removed, and the next open replays the state from the log"
            ),
        }
    }

    /// Forgets the snapshot (after the derived state was rewritten whole): the file goes,
    /// and the next close writes a new one.
    fn drop_snapshot(&self) {
        if let Err(e) = snapshot::remove(&self.dir) {
            tracing::warn!(error = %e, "the outdated state snapshot could not be removed; opens will not use it");
        }
        self.snapshot_seq.store(u64::MAX, Relaxed);
        self.since_snapshot.store(u64::MAX / 2, Relaxed);
    }

    /// Brings the full-text index from log position `from` to the end of the log.
    fn catch_up_text(&self, from: u64) -> Result<()> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.catch_up_text_locked(from, CATCH_UP_MOST).map(|_| ())
    }

    /// [`Store::catch_up_text`] under the writer lock, in one commit where the events past
    /// `from` give at most `most` documents and node keys; past that, by a rebuild, which
    /// commits a bounded number at a time (the review of helper-148's fix: a long backlog's
    /// documents had all been held for one commit).
    fn catch_up_text_locked(&self, from: u64, most: usize) -> Result<TextCaughtUp> {
        // A deletion renumbers nodes and takes events out: only a rebuild is sure to leave
        // nothing of them behind.
        if from == 0 || self.log_has_deletion_after(from)? {
            self.rebuild_text_locked(REBUILD_DOCS_PER_COMMIT)?;
            return Ok(TextCaughtUp::Rebuilt);
        }
        let state = self.read_state();
        let mut docs = Vec::new();
        let mut touched = BTreeSet::new();
        let mut too_many = false;
        self.scan_log(from + 1, |ev| {
            docs.extend(TextDoc::for_event(&ev));
            for a in &ev.assertions {
                match a {
                    Assertion::UpsertNode(u) => touched.insert(u.key.clone()),
                    Assertion::RetractNode { key } => touched.insert(key.clone()),
                    _ => false,
                };
            }
            too_many = docs.len() + touched.len() > most;
            Ok(!too_many)
        })?;
        if too_many {
            drop((docs, touched));
            self.rebuild_text_locked(REBUILD_DOCS_PER_COMMIT)?;
            return Ok(TextCaughtUp::Rebuilt);
        }
        let mut deletes = Vec::new();
        for key in touched {
            match state.node_id(&key).and_then(|id| state.node(id)) {
                Some(n) => docs.push(TextDoc::for_node(&n)),
                None => deletes.push(node_doc_key(&key)),
            }
        }
        self.text
            .apply(docs, &deletes, state.counters.last_seq, None)?;
        Ok(TextCaughtUp::InOneCommit)
    }

    /// Builds the full-text index again from the log and the live nodes: emptied (so callers
    /// need not empty it first), then every event's document and every node's, committed
    /// `per_commit` documents at a time. Holding
    /// them all for one commit took more than this machine's 24 GB at 100M edges (20M node
    /// documents, and a set of every node's key), and the process was killed. The commits
    /// before the last record position 0, so a rebuild cut short is made again whole by the
    /// next open; the last records the log's end.
    fn rebuild_text(&self, per_commit: usize) -> Result<()> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.rebuild_text_locked(per_commit)
    }

    /// Stores the counters of the state replayed from the log in place of those the meta
    /// table says, and rebuilds the text index from the log: the state had been replayed to
    /// fewer ids than a process before gave out (see [`Store::replay_whole_log`]). Those ids
    /// are given again; no document of the index may still name one.
    fn take_replayed_counters(&mut self) -> Result<()> {
        let counters = self.read_state().counters;
        self.store_counters_and_rebuild_text(counters)?;
        self.text_rebuilt = true;
        Ok(())
    }

    /// Stores `counters` in the meta table and rebuilds the text index from the log (see
    /// [`Store::take_replayed_counters`]); under the writer lock.
    fn store_counters_and_rebuild_text(&self, counters: Counters) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.put(Table::Meta, META_COUNTERS, encode(&counters));
        self.backend.commit(batch)?;
        self.rebuild_text_locked(REBUILD_DOCS_PER_COMMIT)
    }

    /// [`Store::rebuild_text`] under the writer lock.
    fn rebuild_text_locked(&self, per_commit: usize) -> Result<()> {
        let state = self.read_state();
        // Every node's document is written under the graph's ids: the floor the index records
        // is the graph's, whatever a deletion cut short had left (`IDS_FLOOR_CUT_SHORT`,
        // which kept node hits out until the next open rebuilt it all again).
        if state.ids_floor != IDS_FLOOR_UNKNOWN {
            self.text.set_next_floor(state.ids_floor);
        }
        self.text.clear()?;
        let mut commits = TextCommits::new(&self.text, per_commit, 0, Vec::new());
        self.scan_log(1, |ev| {
            if let Some(doc) = TextDoc::for_event(&ev) {
                commits.push(doc)?;
            }
            Ok(true)
        })?;
        commits.push_nodes(&state)?;
        commits.finish(state.counters.last_seq)?;
        // Searches refused since one met damage are answered again.
        self.text.clear_damage();
        Ok(())
    }

    /// Whether a deletion event follows log position `from`.
    fn log_has_deletion_after(&self, from: u64) -> Result<bool> {
        let mut found = false;
        log::scan(&*self.backend, from + 1, &mut |_, v| {
            found = peek_event_kind(Table::Log.name(), v)?.1 == deletion::DELETE;
            Ok(!found)
        })?;
        Ok(found)
    }

    /// A read of the live state. A thread that already holds one (a planner query reading
    /// events while it holds the graph) takes the next one recursively: a plain read would
    /// queue behind a writer waiting for the first to end, and neither would ever move.
    fn read_state(&self) -> StateRead<'_> {
        let guard = if READS_HELD.get() > 0 {
            self.state.read_recursive()
        } else {
            self.state.read()
        };
        READS_HELD.set(READS_HELD.get() + 1);
        StateRead(guard)
    }

    /// The write lock of the live state, for applying a committed batch.
    /// Where the backend's bytes go, table by table (see [`crate::Backend::table_bytes`]; for
    /// sled this reads every table).
    pub fn disk_bytes_by_table(&self) -> Result<Vec<(&'static str, crate::storage::TableBytes)>> {
        crate::storage::Table::ALL
            .iter()
            .map(|t| Ok((t.name(), self.backend.table_bytes(*t)?)))
            .collect()
    }

    /// A number that changes whenever a node or an edge of the graph does, and only then:
    /// what is derived from the graph alone (the retrieval dictionary) stays valid while it
    /// stays the same, however many events without assertions are appended.
    pub fn graph_epoch(&self) -> u64 {
        self.read_state().graph_epoch
    }

    /// A number that changes whenever the ids of nodes, edges or relations may have: a
    /// deletion, or a replay of the graph from the log, gives them anew. What holds ids (the
    /// retrieval dictionary) may lag [`Store::graph_epoch`] within the same ids epoch, never
    /// across one.
    pub fn ids_epoch(&self) -> u64 {
        self.read_state().ids_epoch
    }

    fn write_state(&self) -> parking_lot::RwLockWriteGuard<'_, State> {
        // A thread waiting to write while it holds a read of its own would wait forever.
        debug_assert_eq!(
            READS_HELD.get(),
            0,
            "writing the store's state while this thread holds a read of it"
        );
        self.state.write()
    }

    /// `Err(ReadOnly)` for a read-only handle.
    fn writable(&self) -> Result<()> {
        match self.lock {
            Some(_) => Ok(()),
            None => Err(Error::ReadOnly {
                path: self.dir.clone(),
            }),
        }
    }

    /// The directory of the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn backend_kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// Appends `drafts` to the log as one atomic, durable batch and updates every derived view.
    /// An invalid draft fails the whole batch ([`Error::InvalidEvent`] names it) and changes
    /// nothing.
    ///
    /// A draft with an [`EventDraft::idempotency_key`] the store already holds is skipped and
    /// counted in [`Commit::skipped`], so an agent can retry a batch whose acknowledgement it
    /// lost. A key reused for *different* content is an error, not a skip: it means two
    /// distinct events were given one key, and dropping either would lose it silently. Keys
    /// starting with [`STORE_KEY_PREFIX`] (`loci:`) are the store's own (a saved context's
    /// `loci:context:turn:N`) and refused in a caller's draft.
    pub fn ingest(&self, drafts: Vec<EventDraft>) -> Result<Commit> {
        self.ingest_if(drafts, || Ok(()))
    }

    /// [`Store::ingest`], with `check` run under the writer lock just before the batch is
    /// applied, so that what it judged is what the batch changes; when it refuses, nothing is
    /// written.
    fn ingest_if(
        &self,
        drafts: Vec<EventDraft>,
        check: impl FnOnce() -> Result<()>,
    ) -> Result<Commit> {
        self.writable()?;
        if drafts.is_empty() {
            return Ok(Commit::default());
        }
        if let Err(refusal) = refuse_drafts(&drafts) {
            return Err(self.first_refusal(&drafts, refusal));
        }
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        check()?;
        self.ingest_locked(drafts)
    }

    /// Ingests the drafts that `build` makes, given the sequence number the first of them will
    /// get, as one batch: nothing else can append between the numbering and the commit, so
    /// drafts can refer to each other by number (a summary to its children). `build` must not
    /// return drafts that carry an idempotency key, which could be skipped and shift the
    /// numbering.
    pub(crate) fn ingest_with(
        &self,
        build: impl FnOnce(u64) -> Result<Vec<EventDraft>>,
    ) -> Result<Commit> {
        self.writable()?;
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let first = self.read_state().counters.last_seq + 1;
        let drafts = build(first)?;
        if drafts.iter().any(|d| d.idempotency_key.is_some()) {
            return Err(Error::InvalidArgument {
                name: "drafts".into(),
                message: "numbered drafts cannot carry idempotency keys".into(),
            });
        }
        refuse_reserved_kinds(&drafts)?;
        if drafts.is_empty() {
            return Ok(Commit::default());
        }
        self.ingest_locked(drafts)
    }

    /// Puts the graph replayed from the whole log in place of one read from a damaged
    /// snapshot (the writer lock held); the counters, deletions and folds stay (they are not
    /// read from the snapshot). Readers see the graph as the log has it from here on. A
    /// writable store removes the snapshot, so the next open does not map it again; the
    /// replay does not read it either way (a file that could not be removed would be mapped
    /// again, damage and all).
    fn replay_damaged_graph(&self) -> Result<()> {
        tracing::warn!(
            "the state snapshot this store was opened from is damaged; replaying the graph from the log"
        );
        if self.writable().is_ok() {
            self.drop_snapshot();
        }
        let (counters, deleted) = {
            let state = self.read_state();
            (state.counters, state.deleted.clone())
        };
        let (graph, loaded) = Self::replay_whole_log(&*self.backend, counters, &deleted)?;
        let replayed = graph.counters;
        // Ids given anew have every node's document written again below: searches wait for
        // it, as beside a deletion.
        let _rewrite =
            (loaded.fewer_ids && self.writable().is_ok()).then(|| self.rewriting.begin());
        let mut state = self.write_state();
        state.adopt_graph(graph);
        state.ids_given_anew();
        if loaded.fewer_ids {
            // The damaged state made again what the log had: its ids go back to the log's,
            // in memory, in the meta table and in the text index (under the writer lock,
            // which every caller holds).
            state.counters = replayed;
            drop(state);
            if self.writable().is_ok() {
                self.store_counters_and_rebuild_text(replayed)?;
            }
        }
        Ok(())
    }

    /// Whether a read has found damage in the mapped snapshot the graph is read from: what
    /// the damaged block held read as missing, so an answer given since may be short. It
    /// stays so until a write replays the graph from the log (or the store is reopened
    /// without that snapshot); `replay --verify` says what differs.
    pub fn snapshot_damage_found(&self) -> bool {
        self.read_state().damage_found()
    }

    /// The live node with key `key`, or [`Error::NotFound`]. A miss first checks again the
    /// mapped blocks its lookup read: a block of the snapshot changed after its first read
    /// (the file changed under the map) is then found, and the answer is
    /// [`Error::Corrupt`], not that the key is unknown ([`Store::snapshot_damage_found`]
    /// says so from then on, and the next write replays the graph from the log; a read does
    /// not, as a replay can take minutes). For a key asked for by a user;
    /// [`Store::node_by_key`] is the lookup for keys that may well be new (a miss there
    /// costs nothing more).
    pub fn require_node(&self, key: &str) -> Result<Node> {
        let state = self.read_state();
        if let Some(node) = state.node_id(key).and_then(|id| state.node(id)) {
            return Ok(node);
        }
        state.recheck_key(key);
        if state.damage_found() {
            return Err(Error::Corrupt {
                table: "state snapshot",
                message: format!("looking up node {key:?}: {DAMAGED_SNAPSHOT}"),
            });
        }
        Err(Error::NotFound(format!("node {key:?}")))
    }

    /// Replays the graph from the log in place of one read from a snapshot found damaged
    /// ([`Store::snapshot_damage_found`]), as the next write would, under the writer lock;
    /// gives whether it did. For a long-running holder of a writable store (a server) that
    /// may write nothing for a while: until then every read may meet the damage. A read-only
    /// handle cannot ([`Error::ReadOnly`]).
    pub fn replay_if_damaged(&self) -> Result<bool> {
        self.writable()?;
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if !self.snapshot_damage_found() {
            return Ok(false);
        }
        self.replay_damaged_graph()?;
        Ok(true)
    }

    /// Replays the graph from the log for a batch that met damage (see
    /// [`Store::project_on_sound_graph`]), at most once a batch: a graph that reads as
    /// damaged after its replay refuses the batch.
    fn replay_for_batch(&self, replayed: &mut bool) -> Result<()> {
        if std::mem::replace(replayed, true) {
            return Err(Error::Corrupt {
                table: "snapshot",
                message:
                    "the graph replayed from the log reads as damaged too; nothing was written"
                        .into(),
            });
        }
        self.replay_damaged_graph()
    }

    /// The batch's drafts, scored and projected onto a graph without known damage (the
    /// writer lock held), and what `finish` makes of the projection (the log records, the
    /// text documents' deletions) on the same graph.
    ///
    /// A damaged block of the mapped snapshot reads as missing, so a key or an edge the
    /// batch looks up may seem absent: the batch would add a second copy, or refuse an edge
    /// between nodes that exist. So damage found before the batch is acted on first, by
    /// replaying the graph from the log, and damage found while the batch is scored,
    /// projected or finished has the graph replayed and that stage run again, once. Nothing
    /// is copied for it: the drafts are scored in place (the scores the damaged graph gave
    /// are cleared) and the events projected by reference.
    fn project_on_sound_graph<T>(
        &self,
        mut drafts: Vec<EventDraft>,
        positions: &Positions,
        mut finish: impl FnMut(&State, &Overlay) -> Result<T>,
    ) -> Result<(Overlay, T)> {
        let mut replayed = false;
        if self.snapshot_damage_found() {
            self.replay_for_batch(&mut replayed)?;
        }
        let unscored: Vec<usize> = (0..drafts.len())
            .filter(|&i| drafts[i].salience.is_none())
            .collect();
        let (first, mut hints) = loop {
            let state = self.read_state();
            let hints = key_hints(&state, &drafts);
            let scored = self.score_salience(&state, &mut drafts, &hints);
            if !state.damage_found() {
                scored?;
                break (state.counters.last_seq + 1, hints);
            }
            drop(state);
            unscored.iter().for_each(|&i| drafts[i].salience = None);
            self.replay_for_batch(&mut replayed)?;
        };
        let faded = self.faded_of_retractions(&drafts)?;
        let now = now_ms();
        let mut events: Vec<Event> = drafts
            .into_iter()
            .enumerate()
            .map(|(i, d)| Event::from_draft(first + i as u64, now, d))
            .collect();
        loop {
            let state = self.read_state();
            let projected = project_batch(
                &LiveBase { state: &state },
                &events,
                0,
                Missing::Refuse,
                &hints,
                &faded,
            );
            if !state.damage_found() {
                let mut overlay = match projected {
                    Ok(overlay) => overlay,
                    Err(refusal) => {
                        // `why_unknown` reads the state again.
                        drop(state);
                        return Err(positions.original(self.why_unknown(&events, refusal)));
                    }
                };
                overlay.events = std::mem::take(&mut events);
                let finished = finish(&state, &overlay);
                if !state.damage_found() {
                    return Ok((overlay, finished?));
                }
                events = std::mem::take(&mut overlay.events);
            }
            drop(state);
            self.replay_for_batch(&mut replayed)?;
            let lists: Vec<&[Assertion]> = events.iter().map(|e| e.assertions.as_slice()).collect();
            hints = key_hints_of(&self.read_state(), &lists);
        }
    }

    /// The nodes and edges the retractions of `drafts` name that the graph no longer holds
    /// because forgetting let them fade: every event upserting them is one forgetting took (a
    /// stale offer, a person nothing linked any more). An agent cannot know what its memory let
    /// fade, and such a retraction is done already ([`project_batch`] skips it). Empty, after
    /// one pass over the drafts' assertions, unless a retraction names something the graph
    /// lacks; then the forgotten events' records are read (session 43: a late note retracting
    /// a faded person was refused whole, with the upsert beside it).
    fn faded_of_retractions(&self, drafts: &[EventDraft]) -> Result<HashSet<String>> {
        use crate::dynamics::deletion::{edge_subject, node_subject};
        let mut wanted = HashMap::new();
        {
            let state = self.read_state();
            if state.deleted.is_empty() {
                return Ok(HashSet::new());
            }
            for a in drafts.iter().flat_map(|d| &d.assertions) {
                match a {
                    Assertion::RetractNode { key } if state.node_id(key).is_none() => {
                        wanted.insert(node_subject(key), vec![key.clone()]);
                    }
                    Assertion::RetractEdge { from, relation, to }
                        if state.edge_by_keys(from, relation, to).is_none() =>
                    {
                        let ends = vec![from.clone(), to.clone()];
                        wanted.insert(edge_subject(from, relation, to), ends);
                        for end in [from, to] {
                            if state.node_id(end).is_none() {
                                wanted.insert(node_subject(end), vec![end.clone()]);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        self.faded_among(wanted)
    }

    /// Whether forgetting let the node `key` fade ([`Store::faded_among`]).
    fn node_faded(&self, key: &str) -> Result<bool> {
        let subject = crate::dynamics::deletion::node_subject(key);
        let wanted = HashMap::from([(subject.clone(), vec![key.to_string()])]);
        Ok(self.faded_among(wanted)?.contains(&subject))
    }

    /// Of `wanted` (node and edge subjects, as [`crate::dynamics::deletion`] names them, each
    /// with the keys of the nodes it rests on), those that forgetting let fade: an event
    /// forgetting took upserted it, and no live event retracted it (or a node it rests on)
    /// since, which would have ended it whatever forgetting did. Read from the log's records, so
    /// only on the way to a refusal or a retraction of something the graph lacks.
    fn faded_among(&self, mut wanted: HashMap<String, Vec<String>>) -> Result<HashSet<String>> {
        use crate::dynamics::deletion::{edge_subject, subject_upserted};
        if wanted.is_empty() {
            return Ok(HashSet::new());
        }
        let deleted = self.read_state().deleted.clone();
        // Nothing forgotten, nothing faded: a typo's refusal reads nothing more.
        if deleted.is_empty() {
            return Ok(HashSet::new());
        }
        let by_user = self.user_deleted()?;
        // Of each subject, the last forgotten event that upserted it, a summary only as far
        // as what it was made from holds the subject (`deleting::Chain`); and the
        // compaction's tombstones, which no record says the upserts of.
        let mut chains: HashMap<String, deleting::Chain> = (wanted.keys())
            .map(|subject| (subject.clone(), deleting::Chain::default()))
            .collect();
        let mut upserted: HashMap<String, u64> = HashMap::new();
        let mut tombstones = BTreeSet::new();
        for &seq in deleted.iter().filter(|s| !by_user.contains(s)) {
            let Some(ev) = self.raw_event(seq)? else {
                continue;
            };
            if ev.kind == deletion::TOMBSTONE {
                tombstones.insert(seq);
                continue;
            }
            let sources = deleting::made_from_events(&ev);
            let gives: HashSet<String> =
                ev.assertions.iter().filter_map(subject_upserted).collect();
            for (subject, chain) in &mut chains {
                let made = (sources.as_deref(), false);
                if chain.take(seq, made, gives.contains(subject), &tombstones) {
                    upserted.insert(subject.clone(), seq);
                }
            }
        }
        wanted.retain(|subject, _| upserted.contains_key(subject));
        let Some(from) = upserted.values().min() else {
            return Ok(HashSet::new());
        };
        log::scan(&*self.backend, from.saturating_add(1), &mut |seq, v| {
            if deleted.contains(&seq) {
                return Ok(true);
            }
            let ev = decode_event(Table::Log.name(), v)?;
            for a in &ev.assertions {
                wanted.retain(|subject, ends| {
                    let ended = match a {
                        Assertion::RetractNode { key } => ends.contains(key),
                        Assertion::RetractEdge { from, relation, to } => {
                            *subject == edge_subject(from, relation, to)
                        }
                        _ => false,
                    };
                    !(ended && upserted.get(subject).is_some_and(|u| *u < seq))
                });
            }
            Ok(!wanted.is_empty())
        })?;
        Ok(wanted.into_keys().collect())
    }

    /// `refusal` of `events`, saying why when it is of a node forgetting let fade: the agent
    /// used a key its memory once held and cannot know it faded, and is told how to name the
    /// node again (the store makes no node from a bare key: that would take a typo).
    #[cold]
    fn why_unknown(&self, events: &[Event], refusal: Error) -> Error {
        let Error::InvalidEvent {
            event,
            assertion,
            field,
            message,
        } = &refusal
        else {
            return refusal;
        };
        let Some(ev) = events.get(*event) else {
            return refusal;
        };
        let key = match (assertion.and_then(|a| ev.assertions.get(a)), field.as_str()) {
            (_, "place") => ev.place.as_deref(),
            (Some(Assertion::UpsertEdge(up)), "from") => Some(up.from.as_str()),
            (Some(Assertion::UpsertEdge(up)), "to") => Some(up.to.as_str()),
            // A retraction of what faded is taken as done (`faded_of_retractions`).
            _ => None,
        };
        let Some(key) = key.filter(|k| *message == crate::projection::unknown_node(k)) else {
            return refusal;
        };
        // The batch itself retracted it (helper-96: that was said to have faded).
        let before = (events[..*event].iter().flat_map(|e| e.assertions.iter()))
            .chain(ev.assertions.iter().take(assertion.unwrap_or(usize::MAX)));
        if before
            .into_iter()
            .any(|a| matches!(a, Assertion::RetractNode { key: k } if k == key))
        {
            return refusal;
        }
        match self.node_faded(key) {
            Ok(true) => Error::InvalidEvent {
                event: *event,
                assertion: *assertion,
                field: field.clone(),
                message: format!(
                    "{message}: {FADED}; upsert it in this event or an earlier one of the batch \
                     to name it again"
                ),
            },
            // The records could not be read: the refusal stands as it was.
            _ => refusal,
        }
    }

    /// [`Store::ingest`] under the writer lock.
    fn ingest_locked(&self, drafts: Vec<EventDraft>) -> Result<Commit> {
        let (drafts, positions) = self.drop_applied(drafts)?;
        if drafts.is_empty() {
            return Ok(Commit::skipped(&positions));
        }
        let (mut overlay, (batch, text_deletes, new_nodes_from)) =
            self.project_on_sound_graph(drafts, &positions, |state, overlay| {
                // Nodes with ids from here on are new, and have no document when every earlier
                // batch reached the index (a failed update leaves it behind until the next
                // open).
                let new_nodes_from = (self.text.indexed_seq() == state.counters.last_seq)
                    .then_some(NodeId(state.counters.next_node));
                let mut batch = overlay.write_batch();
                state.folds.put_changes(&overlay.events, &mut batch);
                Ok((batch, overlay.text_deletes(state), new_nodes_from))
            })?;
        overlay.shed_inputs();
        self.backend.commit(batch)?;
        let commit = Commit::of(&overlay, &positions);
        // The write below runs on a pool thread, where the check in `write_state` cannot see
        // this one's reads.
        debug_assert_eq!(
            READS_HELD.get(),
            0,
            "committing to the store while this thread holds a read of it"
        );
        // The state and the full-text index take the batch at once, on two cores: neither
        // reads the other, and each was a fifth to a third of a bulk batch's time. A reader
        // may see the index a batch ahead of the graph for that while, as it could see it a
        // batch behind before; a hit on a node the graph does not hold yet reads as missing.
        let text_from = self.text.indexed_seq();
        let behind = text_from.saturating_add(1) < commit.first_seq;
        // A search that met damage in the index leaves it refusing every search: rebuilt by
        // this commit, as an update refused for damage is.
        let met_damage = self.text.is_damaged();
        let retry_from = self.text_retry.lock().map_or(0, |r| r.0);
        let indexed = if behind || met_damage {
            // The state first: what the index is brought to reads it.
            self.write_state().apply(&overlay);
            if commit.first_seq < retry_from {
                // A rebuild failed a short while ago: the index stays behind for now.
                Ok(())
            } else if met_damage {
                Err(Error::text("a search met damage in the index"))
            } else {
                // An earlier batch did not reach the index: read back from the log with this
                // one. Its documents had been left out for good, the next batch recording a
                // position past them (helper-148).
                self.catch_up_text_locked(text_from, CATCH_UP_MOST)
                    .map(|_| ())
            }
        } else {
            let ((), indexed) = rayon::join(
                || self.write_state().apply(&overlay),
                || {
                    self.text.apply(
                        overlay.text_docs(),
                        &text_deletes,
                        commit.last_seq,
                        new_nodes_from,
                    )
                },
            );
            indexed
        };
        let since = self
            .since_snapshot
            .fetch_add(overlay.change_weight(), Relaxed)
            + overlay.change_weight();
        // The batch is durable whatever happens now; a failed index update is caught up from
        // the log by the next commit (or the next open), so it is reported but does not fail
        // this one. One refused for damage is rebuilt now: a server runs for months, and every
        // update after would fail the same way.
        if let Err(e) = indexed {
            // Refused for damage, or failed again where the last commit had failed: what
            // fails at every commit is not a moment's want of space.
            if e.reports_damage() || behind || met_damage {
                tracing::warn!(error = %e, "the full-text index failed again or is damaged; rebuilding it from the log");
                // Searches meanwhile wait for it, or say they read an index being written.
                let rebuilt = {
                    let _rewrite = self.rewriting.begin();
                    self.rebuild_text_locked(REBUILD_DOCS_PER_COMMIT)
                };
                if let Ok(mut retry) = self.text_retry.lock() {
                    *retry = match &rebuilt {
                        Ok(()) => (0, 0),
                        Err(e) => {
                            let failures = retry.1.saturating_add(1);
                            let wait = 100u64 << failures.min(20);
                            tracing::warn!(error = %e, "the full-text index could not be rebuilt; a commit tries again {wait} events on");
                            (commit.last_seq.saturating_add(wait), failures)
                        }
                    };
                }
            } else {
                tracing::warn!(error = %e, "full-text update failed; the next commit catches it up from the log");
            }
        }
        let grown_enough = CHECKPOINT_GROWTH.saturating_mul(self.snapshot_size.load(Relaxed));
        if since >= CHECKPOINT_AFTER.max(grown_enough) {
            // The batch is committed; a snapshot that cannot be written is retried later.
            if let Err(e) = self.checkpoint_locked(Adopt::Yes) {
                // Retried after as many changes again, not on every commit. (A checkpoint
                // refused for damage has forgotten the snapshot: the next batch replays the
                // graph first, and forgets it again.)
                self.since_snapshot.store(0, Relaxed);
                tracing::warn!(error = %e, "the state snapshot could not be written");
            }
        }
        Ok(commit)
    }

    /// `refusal` of a draft by [`refuse_drafts`], or the refusal of an earlier draft by the
    /// projection, which checks what the drafts assert against the graph (an empty key, an
    /// edge to no node) and runs after them: a dry run of the drafts before the refused one
    /// finds it. Its file's error then names the first bad line, where it had named a later
    /// one and, once that was fixed, the earlier (helper-147). Only a refused batch pays it.
    fn first_refusal(&self, drafts: &[EventDraft], refusal: Error) -> Error {
        let before = refused_event(&refusal).min(drafts.len());
        if before == 0 {
            return refusal;
        }
        match self.check(drafts[..before].to_vec()) {
            Err(earlier @ Error::InvalidEvent { .. }) => earlier,
            _ => refusal,
        }
    }

    /// Checks `drafts` as [`Store::ingest`] would, and reports what it would commit, without
    /// writing anything: a dry run for an input file.
    pub fn check(&self, drafts: Vec<EventDraft>) -> Result<Commit> {
        if drafts.is_empty() {
            return Ok(Commit::default());
        }
        if let Err(refusal) = refuse_drafts(&drafts) {
            return Err(self.first_refusal(&drafts, refusal));
        }
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let (drafts, positions) = self.drop_applied(drafts)?;
        if drafts.is_empty() {
            return Ok(Commit::skipped(&positions));
        }
        let (overlay, ()) = self.project_on_sound_graph(drafts, &positions, |_, _| Ok(()))?;
        Ok(Commit::of(&overlay, &positions))
    }

    /// Gives every draft without a salience the score of the store's policy
    /// (`dynamics::salience`), judged against `state` and the text index as they are before
    /// the batch plus the batch's earlier drafts (their texts, and the node documents their
    /// assertions make, change or take), so a file scores the same however it is split into
    /// batches.
    fn score_salience(
        &self,
        state: &State,
        drafts: &mut [EventDraft],
        hints: &KeyHints,
    ) -> Result<()> {
        let policy = self.salience_policy();
        let mut created: HashMap<String, String> = HashMap::new();
        let mut seen_terms: BTreeSet<String> = BTreeSet::new();
        let mut node_words = crate::dynamics::salience::BatchNodeWords::default();
        let analyze = |text: &str| self.text.analyze(text);
        let before = |key: &str| state.node_id(key).and_then(|id| state.node(id));
        // The policy asks only whether any touched label or relation is of a kind, so each is
        // kept once: an import event of a thousand edges touches a handful of labels, and a
        // copy of a label per endpoint was a tenth of the ingest.
        let add_once = |set: &mut Vec<String>, item: &str| {
            if !set.iter().any(|s| s == item) {
                set.push(item.to_string());
            }
        };
        // Novelty counts the terms no earlier event of the store or of the batch has: an
        // event's terms are needed only while a later one of the batch is still to be scored.
        // A batch whose salience is all given (tool calls carry their importance) is never
        // analysed here, which was a fifth of its ingest time.
        let mut scored_after = vec![false; drafts.len()];
        let mut any = false;
        for (i, d) in drafts.iter().enumerate().rev() {
            scored_after[i] = any;
            any |= d.salience.is_none();
        }
        // The labels the state gives the keys of each event's assertions (a node's; an edge's
        // two ends), from the nodes the batch's keys were found to name.
        let label = |i: usize, j: usize, end: usize| {
            hints
                .get(i)
                .and_then(|h| h.get(j))
                .and_then(|h| h.ends[end])
                .and_then(|id| state.adj.label_of(id))
                .map(|l| state.labels.name(l))
        };
        let touch = |known: Option<&str>,
                     key: &str,
                     created: &HashMap<String, String>,
                     touched: &mut Vec<String>| {
            if let Some(l) = known.or_else(|| created.get(key).map(String::as_str)) {
                add_once(touched, l);
            }
        };
        for (i, d) in drafts.iter_mut().enumerate() {
            if d.salience.is_some() && !scored_after[i] {
                continue;
            }
            let mut new_labels = Vec::new();
            let mut touched = Vec::new();
            let mut rels = Vec::new();
            for (j, a) in d.assertions.iter().enumerate() {
                let (first, second) = (label(i, j, 0), label(i, j, 1));
                match a {
                    Assertion::UpsertNode(up) => {
                        match first.or_else(|| created.get(&up.key).map(String::as_str)) {
                            Some(l) => add_once(&mut touched, up.label.as_deref().unwrap_or(l)),
                            None => {
                                let l = up
                                    .label
                                    .clone()
                                    .unwrap_or_else(|| crate::model::labels::ENTITY.to_string());
                                created.insert(up.key.clone(), l.clone());
                                new_labels.push(l.clone());
                                add_once(&mut touched, &l);
                            }
                        }
                    }
                    Assertion::UpsertEdge(e) => {
                        add_once(&mut rels, &e.relation);
                        touch(first, &e.from, &created, &mut touched);
                        touch(second, &e.to, &created, &mut touched);
                    }
                    Assertion::RetractNode { .. } | Assertion::RetractEdge { .. } => {}
                }
            }
            let text = d.text();
            let terms = self.text.analyze(&text)?;
            if d.salience.is_none() {
                let mut unseen = 0;
                let in_batch = |t: &&String| seen_terms.contains(*t) || node_words.holds(t);
                for t in terms.iter().filter(|t| !in_batch(t)) {
                    match self.text.doc_freq(t) {
                        // What stays in the index of its count once the batch's node
                        // documents replace their old ones.
                        Ok(n) if n > node_words.replaced(t) => {}
                        Ok(_) => unseen += 1,
                        // A failed full-text index (derived, rebuilt at the next open) must
                        // not stop the log, the source of truth, from being written: the
                        // words it cannot count count as seen, and the event keeps the
                        // salience it was given.
                        Err(e) => {
                            tracing::warn!(error = %e, "salience: the full-text index cannot count words; they count as seen");
                            break;
                        }
                    }
                }
                let words = words_of(&text);
                let inputs = SalienceInputs {
                    kind: &d.kind,
                    words: &words,
                    unseen_share: if terms.is_empty() {
                        0.0
                    } else {
                        unseen as f32 / terms.len() as f32
                    },
                    new_node_labels: new_labels.iter().map(String::as_str).collect(),
                    touched_labels: touched.iter().map(String::as_str).collect(),
                    relations: rels.iter().map(String::as_str).collect(),
                };
                d.salience = Some(policy.score(&inputs));
            }
            seen_terms.extend(terms);
            if scored_after[i] {
                for a in &d.assertions {
                    node_words.take(a, &before, &analyze)?;
                }
            }
        }
        Ok(())
    }

    /// The policy that scores the salience of events ingested without one (the default, or the
    /// store's `salience.json`).
    pub fn salience_policy(&self) -> Arc<SaliencePolicy> {
        self.salience
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the salience policy and saves it in the store directory (`salience.json`).
    /// It scores events ingested from now on; the scores of logged events never change.
    pub fn set_salience_policy(&self, policy: SaliencePolicy) -> Result<()> {
        self.writable()?;
        policy.validate()?;
        write_json_atomically(&self.dir.join(SALIENCE_FILE), &policy)?;
        *self.salience.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
        Ok(())
    }

    /// Pins (or unpins) the nodes with these keys, as one event (kind `PIN` or `UNPIN`, at the
    /// latest event time so it does not move "now"): a pinned node's edges decay no lower than
    /// the decay policy's floor. A key the store does not hold is [`Error::NotFound`], and no
    /// key at all [`Error::InvalidArgument`]; either way nothing is written. Nodes already
    /// pinned (or unpinned) are left out of the event; if that leaves none, nothing is
    /// written and the commit is empty.
    pub fn pin(&self, keys: &[&str], pinned: bool) -> Result<Commit> {
        let of = PinOf {
            kind: if pinned {
                crate::model::kinds::PIN
            } else {
                crate::model::kinds::UNPIN
            },
            pinned,
            what: "node",
            admits: |_| true,
        };
        Ok(self.pin_nodes(keys, &of)?.commit)
    }

    /// Pins (or unpins, as `of` says) the nodes with these keys, as one event of `of`'s kind
    /// ([`Store::pin`], and `journal::promote`, which pins journal entries). A key naming no
    /// node `of` admits is [`Error::NotFound`] (as `of.what`), and no key at all
    /// [`Error::InvalidArgument`]; either way nothing is written.
    pub(crate) fn pin_nodes(&self, keys: &[&str], of: &PinOf<'_>) -> Result<Pinned> {
        self.writable()?;
        // An event that pins nothing would only clutter the log (and the timeline).
        if keys.is_empty() {
            return Err(Error::InvalidArgument {
                name: "keys".into(),
                message: "no key given: name the nodes to pin or unpin".into(),
            });
        }
        // Refused as a caller's argument, as `delete --node` and `neighbors` refuse one: an
        // empty key had been "not found" (helper-147), another exit code for the same mistake.
        // (Only empty: a store may hold a key of spaces, which no ingest refused.)
        if keys.iter().any(|k| k.is_empty()) {
            return Err(Error::InvalidArgument {
                name: "key".into(),
                message: "is empty: no node has an empty key".into(),
            });
        }
        // Under the writer lock from the check to the commit: a key retracted in between
        // would have the pin's upsert make a new node of it.
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // A miss checks the blocks its lookup read again (`require_node`).
        let admitted = |k: &str| self.require_node(k).is_ok_and(|n| (of.admits)(&n));
        let find_missing = || keys.iter().find(|k| !admitted(k));
        let mut missing = find_missing();
        if missing.is_some() && self.snapshot_damage_found() {
            // The key may be one a damaged block of the snapshot hid.
            self.replay_damaged_graph()?;
            missing = find_missing();
        }
        if let Some(missing) = missing {
            if let Err(e @ Error::Corrupt { .. }) = self.require_node(missing) {
                return Err(e);
            }
            // An unpin is an upsert, which would make the node again; a pin of a node
            // retracted since stays in the log until its events go.
            // Of a node the graph lacks (one there that `of` does not admit did not fade).
            let faded = match self.require_node(missing) {
                Err(Error::NotFound(_)) => self.node_faded(missing)?,
                _ => false,
            };
            let faded_hint = format!(": {FADED}; upsert it again first");
            let hint = if faded {
                faded_hint.as_str()
            } else if of.pinned {
                ""
            } else {
                " (a node retracted since keeps its pin in the log until `loci delete --node` takes its events)"
            };
            return Err(Error::NotFound(format!("{} {missing:?}{hint}", of.what)));
        }
        // A node already as asked is left out; none left, nothing is written (each such
        // run had logged an event and said it changed a node). A key given twice is one node.
        let mut done = Pinned::default();
        let mut named = HashSet::new();
        for k in keys.iter().filter(|k| named.insert(**k)) {
            if self.require_node(k).is_ok_and(|n| n.pinned != of.pinned) {
                done.changed.push(k.to_string());
            } else {
                done.unchanged.push(k.to_string());
            }
        }
        if done.changed.is_empty() {
            return Ok(done);
        }
        let ts = self.latest_event_time()?.unwrap_or(0);
        let mut draft = EventDraft::new(ts, "user", of.kind);
        draft.assertions = done
            .changed
            .iter()
            .map(|k| {
                Assertion::UpsertNode(crate::model::NodeUpsert {
                    key: k.clone(),
                    pinned: Some(of.pinned),
                    ..Default::default()
                })
            })
            .collect();
        done.commit = self.ingest_locked(vec![draft])?;
        Ok(done)
    }

    /// Splits off the drafts whose idempotency key was already applied (by the store or by an
    /// earlier draft of the batch). Called under the writer lock, so no other batch can apply
    /// a key between this check and the commit.
    fn drop_applied(&self, drafts: Vec<EventDraft>) -> Result<(Vec<EventDraft>, Positions)> {
        // Keys are looked up in one read of the backend, not one each: a read transaction a
        // key had nearly doubled the ingest of a tool-call log, every call of which is keyed.
        let view = if drafts.iter().any(|d| d.idempotency_key.is_some()) {
            self.backend.pinned_view()?
        } else {
            None
        };
        let reads: &dyn Backend = view.as_deref().unwrap_or(&*self.backend);
        let mut kept = Vec::with_capacity(drafts.len());
        let mut positions = Positions::default();
        let mut in_batch: HashMap<String, usize> = HashMap::new();
        for (i, draft) in drafts.into_iter().enumerate() {
            let Some(key) = draft.idempotency_key.clone() else {
                positions.kept.push(i);
                kept.push(draft);
                continue;
            };
            let conflict = |message: String| Error::InvalidEvent {
                event: i,
                assertion: None,
                field: "idempotency_key".into(),
                message,
            };
            if let Some(&j) = in_batch.get(&key) {
                let earlier: &EventDraft = &kept[j];
                if *earlier != draft {
                    return Err(conflict(format!(
                        "key {key:?} is also given to event {} of the batch, with other content",
                        positions.kept[j] + 1
                    )));
                }
                positions.skipped += 1;
                positions.repeated += 1;
                continue;
            }
            if let Some(seq) = applied_key_in(reads, &key)? {
                if self.read_state().deleted.contains(&seq) {
                    // Applied, then deleted: a retry must not bring it back.
                    positions.skipped += 1;
                    positions.deleted += 1;
                    continue;
                }
                let stored = self.raw_event_decoded(reads, seq, decode_event)?;
                let stored = stored.ok_or_else(|| Error::Corrupt {
                    table: Table::Idempotency.name(),
                    message: format!("key {key:?} points at event {seq}, which the log lacks"),
                })?;
                // A draft without a salience was scored at ingest: its retry matches whatever
                // score the stored event got.
                let mut again = draft;
                again.salience = again.salience.or(Some(stored.salience));
                if Event::from_draft(stored.seq, stored.recorded_at, again) != stored {
                    return Err(conflict(format!(
                        "key {key:?} was already used by the log's event {seq}, with other content"
                    )));
                }
                positions.skipped += 1;
                continue;
            }
            in_batch.insert(key, kept.len());
            positions.kept.push(i);
            kept.push(draft);
        }
        Ok((kept, positions))
    }

    /// The sequence number of the event that carried idempotency `key`, if any.
    pub fn applied_key(&self, key: &str) -> Result<Option<u64>> {
        applied_key_in(&*self.backend, key)
    }

    /// A consistent read view of the graph.
    pub fn graph(&self) -> GraphRead<'_> {
        GraphRead {
            state: self.read_state(),
            decay: self.decay_policy(),
            tiers: &self.tiers,
            pending: &self.usage_pending,
        }
    }

    /// The policy by which edge confidence decays on read (the default, or the store's
    /// `decay.json`).
    pub fn decay_policy(&self) -> Arc<DecayPolicy> {
        self.decay.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the decay policy and saves it in the store directory (`decay.json`), so later
    /// opens use it too. A policy is a way of reading, not a change of memory: it is not an
    /// event, and replay does not depend on it.
    pub fn set_decay_policy(&self, policy: DecayPolicy) -> Result<()> {
        self.writable()?;
        policy.validate()?;
        write_json_atomically(&self.dir.join(DECAY_FILE), &policy)?;
        *self.decay.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
        Ok(())
    }

    pub fn node(&self, id: NodeId) -> Option<Node> {
        self.read_state().node(id)
    }

    /// The live node with key `key`. A miss is taken as it is: for a key a user asked for,
    /// [`Store::require_node`] checks the blocks the lookup read again.
    pub fn node_by_key(&self, key: &str) -> Option<Node> {
        let state = self.read_state();
        state.node_id(key).and_then(|id| state.node(id))
    }

    /// The full edge record: its core and its details (properties, evidence), both held in
    /// the state. (A `Result` because it once read storage, and may again.)
    pub fn edge(&self, id: EdgeId) -> Result<Option<Edge>> {
        Ok(self.read_state().edge(id))
    }

    /// The live edge `from -relation-> to`, by node keys.
    pub fn edge_between(&self, from: &str, relation: &str, to: &str) -> Result<Option<Edge>> {
        Ok(self.read_state().edge_by_keys(from, relation, to))
    }

    /// The event with sequence number `seq`; `None` when the log has none or it was deleted.
    pub fn event(&self, seq: u64) -> Result<Option<Event>> {
        self.event_decoded(seq, decode_event)
    }

    /// [`Store::event`] read up to its payload, and that without its `digest` entry (its
    /// assertions and idempotency key left empty), for a reader of what a summary says.
    pub fn event_up_to_payload_without_digest(&self, seq: u64) -> Result<Option<Event>> {
        self.event_decoded(seq, crate::codec::decode_event_up_to_payload_without_digest)
    }

    /// Whether [`Store::event`] finds event `seq` (the log holds every number up to its last,
    /// and it is not deleted), without reading its record: `check` asks it of every child of
    /// every summary, and reading each had been most of its time.
    pub fn holds_event(&self, seq: u64) -> bool {
        let state = self.read_state();
        (1..=state.counters.last_seq).contains(&seq) && !state.deleted.contains(&seq)
    }

    /// The event `seq` read with `decode`; `None` when the log has none or it was deleted.
    fn event_decoded(&self, seq: u64, decode: DecodeEvent) -> Result<Option<Event>> {
        if self.read_state().deleted.contains(&seq) {
            return Ok(None);
        }
        self.raw_event_decoded(&*self.backend, seq, decode)
    }

    /// The log record at `seq`, deleted or not. The log holds every sequence number up to its
    /// last (a deleted event's record stays, or its tombstone): one it lacks, or a record that
    /// names another event, is a damaged key, found here rather than read as no event.
    fn raw_event(&self, seq: u64) -> Result<Option<Event>> {
        self.raw_event_decoded(&*self.backend, seq, decode_event)
    }

    /// [`Store::raw_event`] read from `backend` (the store's, or a view of it) with `decode`.
    fn raw_event_decoded(
        &self,
        backend: &dyn Backend,
        seq: u64,
        decode: DecodeEvent,
    ) -> Result<Option<Event>> {
        let file = || self.backend.kind().path_in(&self.dir);
        // Decoded past the storage guard, which names the file of a scan's.
        let damaged = |message: String| {
            crate::storage::corrupt_in_file(
                Error::Corrupt {
                    table: Table::Log.name(),
                    message,
                },
                &file(),
            )
        };
        let last = self.read_state().counters.last_seq;
        let Some(v) = log::get(backend, seq)? else {
            return if (1..=last).contains(&seq) {
                Err(damaged(format!(
                    "event {seq} has no record, though the log runs to event {last}: a \
                     record's key is damaged"
                )))
            } else {
                Ok(None)
            };
        };
        let ev = decode(Table::Log.name(), &v)
            .and_then(|ev| log::is_the_record_of(seq, ev))
            .map_err(log::at_event(seq))
            .map_err(|e| crate::storage::corrupt_in_file(e, &file()))?;
        Ok(Some(ev))
    }

    /// Calls `visit` with each event from sequence `from` on, in log order, until it returns
    /// `false`. Deleted events are left out.
    pub fn scan_log(&self, from: u64, visit: impl FnMut(Event) -> Result<bool>) -> Result<()> {
        self.scan_log_decoded(from, decode_event, visit)
    }

    /// [`Store::scan_log`], each event read whole but for its payload's digest entry
    /// ([`crate::codec::decode_event_without_digest`]): for a pass that reads what events
    /// assert and what summaries say, not what they restate.
    pub fn scan_log_without_digests(
        &self,
        from: u64,
        visit: impl FnMut(Event) -> Result<bool>,
    ) -> Result<()> {
        self.scan_log_decoded(from, crate::codec::decode_event_without_digest, visit)
    }

    /// Refuses a record whose body is another event's, as [`Store::event`] refuses it when
    /// it reads one by number (a number missing is found by [`log::scan`], and one past the
    /// last record by the open): a forgetting reads its candidates in such a pass, where it
    /// had read each by number (helper-130).
    fn scan_log_decoded(
        &self,
        from: u64,
        decode: DecodeEvent,
        mut visit: impl FnMut(Event) -> Result<bool>,
    ) -> Result<()> {
        let deleted = self.read_state().deleted.clone();
        log::scan(&*self.backend, from, &mut |seq, v| {
            if deleted.contains(&seq) {
                return Ok(true);
            }
            visit(log::is_the_record_of(seq, decode(Table::Log.name(), v)?)?)
        })
    }

    /// [`Store::scan_log`] with deleted events too (their records stay in the log until
    /// [`Store::compact`] makes them tombstones): for audits and benchmarks of forgetting.
    pub fn scan_log_with_deleted(
        &self,
        from: u64,
        visit: impl FnMut(Event) -> Result<bool>,
    ) -> Result<()> {
        self.scan_log_where(from, |_| true, visit)
    }

    /// [`Store::scan_log_with_deleted`] of the events `wanted` names: the others' records are
    /// passed unread.
    pub(crate) fn scan_log_where(
        &self,
        from: u64,
        wanted: impl Fn(u64) -> bool,
        mut visit: impl FnMut(Event) -> Result<bool>,
    ) -> Result<()> {
        log::scan(&*self.backend, from, &mut |seq, v| {
            if !wanted(seq) {
                return Ok(true);
            }
            visit(decode_event(Table::Log.name(), v)?)
        })
    }

    /// Events with the given place, actor or kind whose world time lies in `[from, to]`, in
    /// time order, from the episodic index (only those events are read).
    pub fn events_with(&self, facet: Facet, value: &str, from: i64, to: i64) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        self.visit_events_with(facet, value, from, to, decode_event, &mut |e| out.push(e))?;
        Ok(out)
    }

    /// [`Store::events_with`], each event read up to its payload, and that without its
    /// `digest` entry: its assertions and idempotency key are left empty
    /// ([`crate::codec::decode_event_up_to_payload_without_digest`]), for a reader of what
    /// summaries say (their digests and assertions restate every fact of their period).
    /// Each is given to `each` as it is read, for a reader that keeps less than the event:
    /// every summary's event held at once beside what was made of them had been the peak of
    /// a forgetting (170 MB of 290 MB at 115k events).
    pub fn each_event_with_up_to_payload_without_digest(
        &self,
        facet: Facet,
        value: &str,
        from: i64,
        to: i64,
        each: &mut dyn FnMut(Event),
    ) -> Result<()> {
        self.visit_events_with(
            facet,
            value,
            from,
            to,
            crate::codec::decode_event_up_to_payload_without_digest,
            each,
        )
    }

    fn visit_events_with(
        &self,
        facet: Facet,
        value: &str,
        from: i64,
        to: i64,
        decode: DecodeEvent,
        each: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let entries = self.facet_entries(facet, value, from, to)?;
        self.visit_events_of_index(Table::EventFacet, entries, decode, each)
    }

    /// The `(ts, seq)` entries of the episodic index for `facet` = `value` in `[from, to]`,
    /// in time order, deleted events among them.
    fn facet_entries(
        &self,
        facet: Facet,
        value: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, u64)>> {
        let mut entries = Vec::new();
        self.visit_facet_entries_while(facet, value, from, to, &mut |entry| {
            entries.push(entry);
            true
        })?;
        Ok(entries)
    }

    /// Each `(ts, seq)` entry of the episodic index for `facet` = `value` in `[from, to]`, in
    /// time order, to `visit`, until it returns `false` (as [`Store::visit_event_times_while`]
    /// does for the time index).
    fn visit_facet_entries_while(
        &self,
        facet: Facet,
        value: &str,
        from: i64,
        to: i64,
        visit: &mut dyn FnMut((i64, u64)) -> bool,
    ) -> Result<()> {
        let prefix = facet_prefix(facet, value);
        let mut start = prefix.clone();
        start.extend_from_slice(&time_key(from, 0));
        let mut end = prefix.clone();
        end.extend_from_slice(&time_key(to, u64::MAX));
        self.backend
            .scan(Table::EventFacet, &start, None, &mut |k, _| {
                if k > end.as_slice() || !k.starts_with(&prefix) {
                    return Ok(false);
                }
                let entry = k.get(k.len().saturating_sub(16)..).and_then(time_entry);
                Ok(entry.is_none_or(&mut *visit))
            })
    }

    /// The `(ts, seq)` entries of the live events whose world time lies in `[from, to]`, and
    /// whose place, actor or kind is the one given when `facet` is, in time order (ties by
    /// sequence): the keys of the time or episodic index alone, nothing decoded. For a
    /// reader that needs the records of a few of them, or one at a time: a planner query
    /// over every summary of a long history had held each of them at once (3.8 GB at 566k).
    /// They are read while `keep_going` says so (asked every 1,024 entries): a caller with a
    /// time limit stops there, with the entries read so far.
    pub fn event_entries(
        &self,
        facet: Option<(Facet, &str)>,
        from: i64,
        to: i64,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<Vec<(i64, u64)>> {
        let mut entries = Vec::new();
        let mut collect = |entry| {
            entries.push(entry);
            !entries.len().is_multiple_of(1024) || keep_going()
        };
        match facet {
            Some((facet, value)) => {
                self.visit_facet_entries_while(facet, value, from, to, &mut collect)?
            }
            None => self.visit_event_times_while(from, to, &mut collect)?,
        }
        let state = self.read_state();
        entries.retain(|(_, seq)| !state.deleted.contains(seq));
        // No record is read to find an entry naming none: its number is past the log's last.
        let last = state.counters.last_seq;
        if let Some(&(ts, seq)) = entries.iter().find(|(_, seq)| *seq > last) {
            let table = if facet.is_some() {
                Table::EventFacet
            } else {
                Table::EventTime
            };
            return Err(self.entry_past_the_log(table, ts, seq));
        }
        Ok(entries)
    }

    /// An index entry (at world time `ts`) naming event `seq`, which the log does not hold: a
    /// number a flipped bit made.
    fn entry_past_the_log(&self, table: Table, ts: i64, seq: u64) -> Error {
        Error::Corrupt {
            table: table.name(),
            message: format!(
                "{}: its entry at world time {ts} names event {seq}, past the log's last ({}): \
                 the index is damaged; `loci repair` rebuilds it from the log",
                self.backend.kind().path_in(&self.dir).display(),
                self.last_seq()
            ),
        }
    }

    /// Whether an event of the log has kind `kind`: one seek in the episodic index.
    fn has_event_kind(&self, kind: &str) -> Result<bool> {
        let prefix = facet_prefix(Facet::Kind, kind);
        let mut found = false;
        self.backend
            .scan(Table::EventFacet, &prefix, None, &mut |k, _| {
                found = k.starts_with(&prefix);
                Ok(false)
            })?;
        Ok(found)
    }

    /// The event kinds of the log, shorter first and then in byte order (as the episodic
    /// index's keys are, whose kind comes after its length), at most `limit` of them: one
    /// seek per kind (a kind's keys are skipped past at once).
    pub fn event_kinds(&self, limit: usize) -> Result<Vec<String>> {
        self.facet_values(Facet::Kind, limit)
    }

    /// The values of `facet` the log's events have, ordered as [`Store::event_kinds`] orders
    /// kinds, at most `limit` of them.
    fn facet_values(&self, facet: Facet, limit: usize) -> Result<Vec<String>> {
        let mut values = Vec::new();
        let mut start = vec![facet.byte()];
        while values.len() < limit {
            let mut next = None;
            self.backend
                .scan(Table::EventFacet, &start, None, &mut |k, _| {
                    next = (facet_value(k))
                        .filter(|(byte, _)| *byte == facet.byte())
                        .map(|(_, v)| String::from_utf8_lossy(v).into_owned());
                    Ok(false)
                })?;
            let Some(value) = next else {
                break;
            };
            // Past every time key of this value: 16 bytes, none above all 0xFF.
            start = facet_prefix(facet, &value);
            start.extend_from_slice(&[0xFF; 17]);
            values.push(value);
        }
        Ok(values)
    }

    /// The values of `facet` the log's events have ([`Store::event_kinds`]' order), `None`
    /// past `max_values` of them.
    pub fn facet_values_at_most(
        &self,
        facet: Facet,
        max_values: usize,
    ) -> Result<Option<Vec<String>>> {
        let values = self.facet_values(facet, max_values.saturating_add(1))?;
        Ok((values.len() <= max_values).then_some(values))
    }

    /// Each `(ts, seq)` entry of the episodic index for each of `values` of `facet` in
    /// `[from, to]`, with the value's place among `values`, to `visit` until it returns
    /// `false`: one seek per value, no record decoded. For a planner scan that reads no more
    /// of its events than their kind or actor: a count of the events of each kind had read
    /// and decoded every record, 20 us each, past the query's time limit at 980k events.
    pub fn visit_entries_of_values(
        &self,
        facet: Facet,
        values: &[String],
        (from, to): (i64, i64),
        visit: &mut dyn FnMut(usize, (i64, u64)) -> bool,
    ) -> Result<()> {
        let mut going = true;
        for (at, value) in values.iter().enumerate() {
            self.visit_facet_entries_while(facet, value, from, to, &mut |entry| {
                going = visit(at, entry);
                going
            })?;
            if !going {
                break;
            }
        }
        Ok(())
    }

    /// Refuses a filter's event kind that no event of the log has where one it has differs
    /// only in case or surrounding whitespace (as [`GraphRead::refuse_near_misses`] does for
    /// labels and relations): such a filter matches nothing, silently. Returns the kinds given
    /// that no event has, for the caller to note. `field` is the name the caller gave the
    /// filter under.
    pub fn refuse_kind_near_misses<'k>(
        &self,
        field: &str,
        given: impl IntoIterator<Item = &'k str>,
    ) -> Result<Vec<&'k str>> {
        let mut unknown = Vec::new();
        let mut kinds: Option<Vec<String>> = None;
        for kind in given {
            // A kind the log has is one seek; the kinds are listed only on a miss.
            if self.has_event_kind(kind)? {
                continue;
            }
            let known = match &kinds {
                Some(k) => k,
                None => kinds.insert(self.event_kinds(MAX_KINDS_LISTED)?),
            };
            if let Some(meant) =
                crate::graph::near_miss_among(kind, known.iter().map(String::as_str))
            {
                return Err(Error::InvalidArgument {
                    name: field.into(),
                    message: format!(
                        "no event has kind {kind:?}; did you mean {meant:?}? (kinds are matched exactly)"
                    ),
                });
            }
            unknown.push(kind);
        }
        Ok(unknown)
    }

    /// The sequence numbers of the events with the given place, actor or kind, ascending,
    /// from the episodic index's keys alone (nothing decoded).
    pub fn seqs_with(&self, facet: Facet, value: &str) -> Result<Vec<u64>> {
        let prefix = facet_prefix(facet, value);
        let mut seqs = Vec::new();
        self.backend
            .scan(Table::EventFacet, &prefix, None, &mut |k, _| {
                if !k.starts_with(&prefix) {
                    return Ok(false);
                }
                seqs.extend(
                    k.get(k.len().saturating_sub(16)..)
                        .and_then(time_entry)
                        .map(|(_, s)| s),
                );
                Ok(true)
            })?;
        seqs.sort_unstable();
        Ok(seqs)
    }

    /// Events whose world time lies in `[from, to]`, in time order (ties by sequence).
    pub fn events_between(&self, from: i64, to: i64) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        self.each_event(None, from, to, &mut |e| out.push(e))?;
        Ok(out)
    }

    /// [`Store::events_between`], or [`Store::events_with`] when `facet` is given, each event
    /// given to `each` as it is read: for a reader that keeps less than the events (a
    /// timeline of all time had held every record of the log beside its entries).
    pub fn each_event(
        &self,
        facet: Option<(Facet, &str)>,
        from: i64,
        to: i64,
        each: &mut dyn FnMut(Event),
    ) -> Result<()> {
        match facet {
            Some((facet, value)) => {
                self.visit_events_with(facet, value, from, to, decode_event, each)
            }
            None => {
                let entries = self.event_times(from, to)?;
                self.visit_events_of_index(Table::EventTime, entries, decode_event, each)
            }
        }
    }

    /// The events an index's `(ts, seq)` entries name, each checked to be of its entry's time:
    /// a damaged entry (a flipped bit in its key) that names its event at another time is
    /// [`Error::Corrupt`], not a timeline with an event out of place. (One moved out of the
    /// range read is not seen here: `replay --verify` finds it.)
    fn events_of_index(
        &self,
        table: Table,
        entries: Vec<(i64, u64)>,
        decode: DecodeEvent,
    ) -> Result<Vec<Event>> {
        let mut out = Vec::with_capacity(entries.len());
        self.visit_events_of_index(table, entries, decode, &mut |e| out.push(e))?;
        Ok(out)
    }

    /// [`Store::events_of_index`], each event given to `each` as it is read.
    fn visit_events_of_index(
        &self,
        table: Table,
        entries: Vec<(i64, u64)>,
        decode: DecodeEvent,
        each: &mut dyn FnMut(Event),
    ) -> Result<()> {
        self.visit_events_of_index_while(table, entries, decode, &mut |ev| {
            each(ev);
            Ok(true)
        })
    }

    /// The events of the time index's `entries` (of [`Store::latest_event_times`]), each
    /// checked as [`Store::events_of_index`] checks them and given to `each` as it is read,
    /// until it returns `false`: for a writer of each as it comes (`loci timeline --limit`
    /// of a million had held every record, and a tree of them, before its first line: 6 GB
    /// at 980k events, a closed pipe noticed at the end; helper-120).
    pub fn each_event_of_time_entries(
        &self,
        entries: Vec<(i64, u64)>,
        each: &mut dyn FnMut(Event) -> Result<bool>,
    ) -> Result<()> {
        self.visit_events_of_index_while(Table::EventTime, entries, decode_event, each)
    }

    /// [`Store::visit_events_of_index`] until `each` returns `false`.
    fn visit_events_of_index_while(
        &self,
        table: Table,
        entries: Vec<(i64, u64)>,
        decode: DecodeEvent,
        each: &mut dyn FnMut(Event) -> Result<bool>,
    ) -> Result<()> {
        // Every read in one transaction where the backend has a view: each read of its own
        // began and ended one, most of the time of reading a long store's summaries.
        let view = match entries.len() {
            0 | 1 => None,
            _ => self.backend.pinned_view()?,
        };
        let backend = view.as_deref().unwrap_or(&*self.backend);
        for (ts, seq) in entries {
            if self.read_state().deleted.contains(&seq) {
                continue;
            }
            // The log holds every sequence number to its last: an entry naming none names a
            // number a flipped bit made (one read as no event had left a timeline short).
            let Some(ev) = self.raw_event_decoded(backend, seq, decode)? else {
                return Err(self.entry_past_the_log(table, ts, seq));
            };
            if ev.ts != ts {
                return Err(Error::Corrupt {
                    table: table.name(),
                    message: format!(
                        "{}: its entry for event {seq} says world time {ts}, the event says \
                         {}: the index is damaged; `loci repair` rebuilds it from the log",
                        self.backend.kind().path_in(&self.dir).display(),
                        ev.ts
                    ),
                });
            }
            if !each(ev)? {
                break;
            }
        }
        Ok(())
    }

    /// The event an entry `(ts, seq)` of index `index` (the time index, or the episodic one)
    /// names, checked as [`Store::events_of_index`] checks each: `None` when it was deleted,
    /// [`Error::Corrupt`] when the log has no such event or holds it at another time. For a
    /// reader of [`Store::event_entries`] that reads records one at a time, as it needs them.
    pub fn event_of_entry(&self, index: Table, entry: (i64, u64)) -> Result<Option<Event>> {
        let mut read = None;
        self.visit_events_of_index(index, vec![entry], decode_event, &mut |ev| read = Some(ev))?;
        Ok(read)
    }

    /// Events the store holds: log records not deleted (forgetting's budget counts these).
    /// Whether the store's handle still serves, and if not why (see [`Backend::usable`]):
    /// only a new open mends a handle that refuses.
    pub fn usable(&self) -> Result<()> {
        self.backend.usable()
    }

    /// The sequence number of the log's last record (0 for an empty log).
    pub fn last_seq(&self) -> u64 {
        self.read_state().counters.last_seq
    }

    /// The live summaries last read, kept for every reader of this handle.
    pub(crate) fn live_summary_cache(&self) -> &crate::dynamics::consolidate::LiveSummaryCache {
        &self.live_summaries
    }

    /// Deleted events (out of every view).
    pub fn deleted_count(&self) -> usize {
        self.read_state().deleted.len()
    }

    pub fn events_held(&self) -> u64 {
        let state = self.read_state();
        state
            .counters
            .last_seq
            .saturating_sub(state.deleted.len() as u64)
    }

    /// Bytes of the store directory (backend files, full-text index, policies).
    pub fn disk_bytes(&self) -> u64 {
        dir_size(&self.dir)
    }

    /// What the store directory's files take on disk: their allocated blocks, fewer than
    /// their length says where a file is sparse (redb grows its file ahead of use).
    pub fn disk_bytes_allocated(&self) -> u64 {
        dir_allocated(&self.dir)
    }

    /// The events of one kind, in log order, deleted ones left out: those the episodic index
    /// lists under the kind, read in one view. (Each record's kind had been peeked at in a
    /// pass over the whole log, which expands every compressed record: 4.8 s at 980k events
    /// for `emerge` to find no sighting, 2 s of `journal list`'s.) A record of another kind
    /// than its entry says is [`Error::Corrupt`], naming the index.
    pub fn events_of_kind(&self, kind: &str) -> Result<Vec<Event>> {
        let mut entries = self.facet_entries(Facet::Kind, kind, i64::MIN, i64::MAX)?;
        entries.sort_unstable_by_key(|&(_, seq)| seq);
        let mut out = Vec::with_capacity(entries.len());
        let mut misplaced = None;
        self.visit_events_of_index(Table::EventFacet, entries, decode_event, &mut |ev| {
            if ev.kind == kind {
                out.push(ev);
            } else {
                misplaced.get_or_insert((ev.seq, ev.kind));
            }
        })?;
        match misplaced {
            Some((seq, found)) => Err(self.entry_of_another_kind(kind, seq, &found)),
            None => Ok(out),
        }
    }

    /// [`Store::events_of_kind`] from the newest, read one at a time until `visit` returns
    /// `false`: for a reader that wants the latest it can use (the newest saved context a
    /// turn is numbered after), not every one.
    pub fn each_event_of_kind_newest_first(
        &self,
        kind: &str,
        visit: &mut dyn FnMut(Event) -> bool,
    ) -> Result<()> {
        let mut entries = self.facet_entries(Facet::Kind, kind, i64::MIN, i64::MAX)?;
        entries.sort_unstable_by_key(|&(_, seq)| std::cmp::Reverse(seq));
        for entry in entries {
            let Some(ev) = self.event_of_entry(Table::EventFacet, entry)? else {
                continue; // deleted
            };
            if ev.kind != kind {
                return Err(self.entry_of_another_kind(kind, ev.seq, &ev.kind));
            }
            if !visit(ev) {
                break;
            }
        }
        Ok(())
    }

    /// The episodic index's entry for kind `kind` naming event `seq`, of kind `found`: a
    /// damaged index.
    fn entry_of_another_kind(&self, kind: &str, seq: u64, found: &str) -> Error {
        Error::Corrupt {
            table: Table::EventFacet.name(),
            message: format!(
                "{}: its entry for kind {kind:?} names event {seq}, of kind {found:?}: the \
                 index is damaged; `loci repair` rebuilds it from the log",
                self.backend.kind().path_in(&self.dir).display(),
            ),
        }
    }

    /// The last `limit` of [`Store::event_times`] (the latest events of the range), and how
    /// many the range holds: a timeline of a 100M-event store holds `limit` entries, not
    /// every one of the range. A summary a later one of its period replaced is left out, as
    /// a search leaves it ([`Store::search`]): the later one says all it says.
    pub fn latest_event_times(
        &self,
        from: i64,
        to: i64,
        limit: usize,
    ) -> Result<(Vec<(i64, u64)>, usize)> {
        let replaced = crate::dynamics::consolidate::replaced_summaries(self)?;
        let mut last = std::collections::VecDeque::with_capacity(limit.min(1 << 16));
        let mut total = 0usize;
        self.visit_event_times(from, to, |entry| {
            if replaced.contains(entry.1) {
                return;
            }
            total += 1;
            if limit > 0 {
                if last.len() == limit {
                    last.pop_front();
                }
                last.push_back(entry);
            }
        })?;
        Ok((last.into(), total))
    }

    /// The events of [`Store::latest_event_times`], oldest first, with the count of the
    /// range's events.
    pub fn latest_events(&self, from: i64, to: i64, limit: usize) -> Result<(Vec<Event>, usize)> {
        let (times, total) = self.latest_event_times(from, to, limit)?;
        Ok((
            self.events_of_index(Table::EventTime, times, decode_event)?,
            total,
        ))
    }

    /// `(ts, seq)` of the events whose world time lies in `[from, to]`, in time order, from
    /// the time index alone (nothing decoded). Deleted events are not in it.
    pub fn event_times(&self, from: i64, to: i64) -> Result<Vec<(i64, u64)>> {
        let mut out = Vec::new();
        self.visit_event_times(from, to, |entry| out.push(entry))?;
        Ok(out)
    }

    /// Each `(ts, seq)` entry of the time index in `[from, to]`, in time order, to `visit`.
    fn visit_event_times(
        &self,
        from: i64,
        to: i64,
        mut visit: impl FnMut((i64, u64)),
    ) -> Result<()> {
        self.visit_event_times_while(from, to, &mut |entry| {
            visit(entry);
            true
        })
    }

    /// [`Store::visit_event_times`] until `visit` returns `false`.
    fn visit_event_times_while(
        &self,
        from: i64,
        to: i64,
        visit: &mut dyn FnMut((i64, u64)) -> bool,
    ) -> Result<()> {
        let end = time_key(to, u64::MAX);
        self.backend
            .scan(Table::EventTime, &time_key(from, 0), None, &mut |k, _| {
                if k > end.as_slice() {
                    return Ok(false);
                }
                Ok(time_entry(k).is_none_or(&mut *visit))
            })
    }

    /// The graph as it was right after event `seq`: the replay of the log up to it. Events
    /// deleted since (at any position in the log) stay out, so a deletion is never undone by
    /// looking back; a compacted log replays its tombstones as nothing.
    ///
    /// A copy of every node and edge: [`Store::past`] reads them in place.
    pub fn state_at(&self, seq: u64) -> Result<PastState> {
        let past = self.past(seq)?;
        Ok(PastState {
            seq: past.seq(),
            latest_ts: past.latest_ts(),
            nodes: past.nodes().collect(),
            edges: past.edges().collect(),
        })
    }

    /// The graph as it was right after event `seq`, as [`Store::state_at`] gives it, held as
    /// its replay built it and read record by record.
    pub fn past(&self, seq: u64) -> Result<Past> {
        let deleted = deleted_in_log(&*self.backend)?;
        let state = replay_excluding(&*self.backend, deleted, UNVISITED, Vec::new(), seq)?
            .map_err(|message| Error::Store {
                path: self.dir.clone(),
                message,
            })?;
        Ok(Past { state })
    }

    /// Records that a read returned `items` (`dynamics::usage`). Nothing is written now: the
    /// uses wait in memory and are flushed as one `USAGE` event when the store is dropped, by
    /// [`Store::flush_usage`], or by this call once enough is waiting or the first waiting use
    /// is [`FLUSH_INTERVAL`](crate::dynamics::usage::FLUSH_INTERVAL) old. A read-only handle
    /// records nothing. Must not be called while holding a [`GraphRead`] of this store (a
    /// flush takes the write lock).
    pub fn record_use(&self, items: impl IntoIterator<Item = Item>) {
        if self.is_read_only() {
            return;
        }
        let now = self.read_state().latest_ts.unwrap_or(0);
        let due = {
            let mut pending = self.usage_pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.add(items, now);
            pending.due()
        };
        if due {
            if let Err(e) = self.flush_usage() {
                tracing::warn!(error = %e, "recorded uses could not be flushed; kept for later");
            }
        }
    }

    /// [`Store::flush_usage`] when the first waiting use is at least `age` old: for a process
    /// that holds the store through idle time (the server), whose uses would otherwise wait
    /// for the next recorded read, and be lost to a kill meanwhile.
    pub fn flush_usage_older_than(&self, age: std::time::Duration) -> Result<Option<Commit>> {
        let waited = (self.usage_pending.lock())
            .unwrap_or_else(|e| e.into_inner())
            .waited(age);
        if waited {
            self.flush_usage()
        } else {
            Ok(None)
        }
    }

    /// Writes the waiting uses as one `USAGE` event carrying each item's new running totals,
    /// dated at the latest event time. Returns its commit, or `None` when nothing was waiting
    /// (or the handle is read-only). On failure the uses are kept for the next flush.
    pub fn flush_usage(&self) -> Result<Option<Commit>> {
        if self.is_read_only() {
            return Ok(None);
        }
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let pending =
            std::mem::take(&mut *self.usage_pending.lock().unwrap_or_else(|e| e.into_inner()));
        let draft = {
            let state = self.read_state();
            state
                .folds
                .usage
                .flush_draft(&pending, state.latest_ts.unwrap_or(0))
        };
        let Some(draft) = draft else {
            return Ok(None);
        };
        match self.ingest_locked(vec![draft]) {
            Ok(commit) => Ok(Some(commit)),
            Err(e) => {
                self.usage_pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .merge(pending);
                Err(e)
            }
        }
    }

    /// Serialises the builds that save a context: a turn is numbered after the last saved
    /// one, which a build reads before it assembles and saves. (Saving takes a writer, and one
    /// process at a time holds a store's writer lock, so a lock in the process is enough.)
    pub(crate) fn hold_context_saves(&self) -> std::sync::MutexGuard<'_, ()> {
        self.context_saves.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A turn at deleting: deletions and forgettings take theirs one at a time. A forgetting
    /// chooses its events from the log as it reads it, then deletes them: a deletion that
    /// committed between the two had it name an event deleted since, and it was refused ("event
    /// N is already deleted", to a caller who named none). Ingests do not wait for it: they
    /// add events, and a forgetting deletes only events it read.
    pub(crate) fn deletion_turn(&self) -> DeletionTurn<'_> {
        DeletionTurn(self.deletions.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Appends one record of the store's own (a saved context), which ingest would refuse.
    pub(crate) fn append_bookkeeping(&self, draft: EventDraft) -> Result<Commit> {
        self.writable()?;
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.ingest_locked(vec![draft])
    }

    /// Uses recorded and not yet flushed (items).
    pub fn usage_pending(&self) -> usize {
        self.usage_pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// The working memory now (`dynamics::working`).
    pub fn working_memory(&self) -> WorkingMemory {
        self.read_state().folds.wm.clone()
    }

    /// Changes the working memory by one `WM` event by `actor`, at world time `ts` (default:
    /// the latest event's, so that it does not move "now"). A change that would find nothing
    /// to change or overfill it ([`WorkingMemory::check_change`]) is refused, and nothing is
    /// written. Its text is written as held: trimmed and composed ([`WmOp::tidied`]).
    pub fn change_working_memory(&self, op: &WmOp, actor: &str, ts: Option<i64>) -> Result<Commit> {
        let op = &op.tidied();
        op.validate()?;
        let ts = match ts {
            Some(t) => t,
            None => self.latest_event_time()?.unwrap_or(0),
        };
        self.ingest_if(vec![op.draft(ts, actor)], || {
            self.read_state().folds.wm.check_change(op, ts)
        })
    }

    /// World time of the latest event (by `ts`), the store's notion of "now".
    pub fn latest_event_time(&self) -> Result<Option<i64>> {
        Ok(self.read_state().latest_ts)
    }

    /// Full-text search over the nodes and events this handle's graph holds (the index can be
    /// ahead of a reader opened beside a writer), less the summaries a later summary of their
    /// period replaced ([`crate::dynamics::consolidate::ReplacedSummaries`]); a `text` with no
    /// word (a symbol that is not a pictograph, stopwords only) finds the nodes of that name
    /// ([`TextIndex::search_within`]).
    pub fn search(&self, text: &str, filter: &SearchFilter, limit: usize) -> Result<Vec<Hit>> {
        use crate::dynamics::consolidate::{replaced_summaries, SUMMARY};
        // A summary a later one of its period replaced repeats what that one says: a search
        // finds the later one alone, as retrieval does. Read before the graph is taken, as
        // it reads the state itself.
        let summaries = match filter.admits_event_kind(SUMMARY) {
            true => Some(replaced_summaries(self)?),
            false => None,
        };
        let replaced = |seq| summaries.as_ref().is_some_and(|s| s.contains(seq));
        let g = self.graph_for_search();
        let (last_seq, next_node) = (g.state.counters.last_seq, g.state.counters.next_node);
        // An index at the graph's position holds no node the graph does not: then the bounds
        // suffice, and no hit reads the graph's pages (a store opened from its snapshot reads
        // its node labels from the file, cold at a first search).
        let in_step = self.text.indexed_seq() == last_seq;
        let ids_apart = self.ids_apart(&g.state);
        if ids_apart && self.warn_of_node_hits_left_out.swap(false, Relaxed) {
            tracing::warn!(
                store = %self.dir.display(),
                "a deletion is being written, or was cut short (the next open for writing repairs it): the full-text index's node ids are not this reader's, and its searches leave node hits out"
            );
        }
        let holds = |target| match target {
            crate::text::Target::Node(n) => {
                !ids_apart && n.0 < next_node && (in_step || g.adjacency().contains_node(n))
            }
            crate::text::Target::Event(seq) => seq <= last_seq && !replaced(seq),
        };
        let bears = |n, form: &str| g.bears_name_form(n, form);
        let scope = crate::text::Scope {
            holds: &holds,
            bears: &bears,
        };
        self.text.search_within(text, filter, limit, &scope)
    }

    /// The nodes of `g` under each of `forms` in the full-text index's name field (see
    /// [`TextIndex::nodes_under_name_terms`]): none while the index's node ids are not the
    /// graph's (a deletion writing every node's document again), none the graph does not hold.
    /// Take `g` with [`Store::graph_for_search`].
    pub(crate) fn nodes_under_name_terms(
        &self,
        g: &GraphRead<'_>,
        forms: &[String],
    ) -> Result<crate::text::TermHits> {
        let mut found = self.text.nodes_under_name_terms(forms)?;
        let apart = self.ids_apart(&g.state);
        for nodes in &mut found.nodes {
            nodes.retain(|n| !apart && g.adjacency().contains_node(*n));
        }
        Ok(found)
    }

    /// The graph for a read that searches, taken while no deletion in this process writes
    /// every node's full-text document again (`Rewriting`; [`REWRITE_WAIT`] at most), so that
    /// what the search finds is of the graph it reads. The flag is read again under the read:
    /// a deletion that began between the wait and the read would have this read queue behind
    /// its write and see its new graph beside half its documents. A thread that already holds
    /// a read of the state does not wait, as the deletion may be waiting for that read.
    pub(crate) fn graph_for_search(&self) -> GraphRead<'_> {
        if READS_HELD.get() > 0 {
            return self.graph();
        }
        let deadline = std::time::Instant::now() + REWRITE_WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if !self.rewriting.wait(left) {
                tracing::warn!(
                    "a deletion has been writing every node's full-text document again for {}s; this search finds the nodes written so far",
                    REWRITE_WAIT.as_secs()
                );
                return self.graph();
            }
            let g = self.graph();
            if !self.rewriting.under_way() {
                return g;
            }
        }
    }

    /// Whether searches can give node hits: not while the text index's node documents are
    /// of ids from the other side of a deletion than the graph's. A deletion gives every id
    /// anew and then writes every node's document again. A search in its process waits for
    /// that ([`Store::graph_for_search`]), and past the wait gives event hits only until the
    /// first commit of them (where it had named other nodes); so does a read-only store that
    /// opened while one was being written (see [`Store::open_read_only`]).
    pub fn searches_nodes(&self) -> bool {
        !self.ids_apart(&self.read_state())
    }

    /// Runs `read`, a read that takes ids from one call and looks them up in another (a
    /// search's hits, then their nodes), again while a deletion gave every id anew in between
    /// ([`Store::ids_epoch`]): its lookups would have named other nodes. A few times; a read
    /// that a deletion keeps overtaking is returned as the last attempt made it, with a
    /// warning.
    pub fn with_stable_ids<T>(&self, mut read: impl FnMut() -> Result<T>) -> Result<T> {
        const ATTEMPTS: u32 = 4;
        let mut attempt = 1;
        loop {
            let before = self.ids_epoch();
            let out = read();
            if self.ids_epoch() == before {
                return out;
            }
            // Failed or not, a read a deletion overtook is made again: what it failed on
            // (a node or an edge not found) may be an id given anew.
            if attempt == ATTEMPTS {
                tracing::warn!("deletions gave every id anew during each of {ATTEMPTS} attempts at a read; its last is returned");
                return out;
            }
            attempt += 1;
        }
    }

    fn ids_apart(&self, state: &State) -> bool {
        self.text.ids_floor().is_some_and(|f| f != state.ids_floor)
    }

    /// The full-text index (for analysis of query text, document counts).
    pub fn text_index(&self) -> &TextIndex {
        &self.text
    }

    /// Nodes within `depth` hops of `start`, nearest first, following only edges `opts` admits.
    pub fn neighbors(&self, start: NodeId, depth: u8, opts: &ExpandOptions) -> Vec<Neighbor> {
        let g = self.graph();
        let filter = g.filter(opts);
        let mut out = Vec::new();
        g.adjacency().expand_with(start, depth, &filter, |r| {
            if let Some(n) = g.node(r.node) {
                out.push(Neighbor {
                    node: r.node,
                    key: n.key.clone(),
                    name: n.name.clone(),
                    label: n.label.clone(),
                    hops: r.hops,
                    edge: r.via.edge_id(),
                    relation: g.relation_name(r.via.relation()).to_string(),
                    confidence: g
                        .effective_confidence(r.via.edge_id(), opts.now)
                        .filter(|_| !opts.raw_confidence)
                        .unwrap_or(r.via.confidence),
                    stored_confidence: r.via.confidence,
                    incoming: r.via.is_incoming(),
                    parent: r.parent,
                });
            }
        });
        out
    }

    pub fn stats(&self) -> Stats {
        let g = self.graph();
        let state = &g.state;
        let backend_path = match self.backend.kind() {
            BackendKind::Redb => self.dir.join("data.redb"),
            BackendKind::Sled => self.dir.join("sled"),
        };
        Stats {
            backend: self.backend.kind(),
            events: state.counters.last_seq,
            events_deleted: state.deleted.len() as u64,
            nodes: state.adj.node_count(),
            edges: state.adj.edge_count(),
            relations: state.relations.len(),
            labels: state.labels.len(),
            text_docs: self.text.num_docs(),
            text_indexed_seq: self.text.indexed_seq(),
            disk_bytes_backend: dir_size(&backend_path),
            disk_bytes_text: dir_size(&self.dir.join(TEXT_DIR)),
            adjacency_bytes: state.adj.heap_bytes(),
            state_bytes: state.heap_bytes(),
            text_rebuilt: self.text_rebuilt,
            snapshot_damage_found: state.damage_found(),
            tiers: g.tier_counts(state.latest_ts.unwrap_or(0)),
            disk_bytes_snapshot: dir_size(&snapshot::path_in(&self.dir)),
            disk_bytes_snapshot_sections: snapshot::section_bytes(&self.dir)
                .into_iter()
                .map(|(name, bytes)| (name.to_string(), bytes))
                .collect(),
            disk_bytes_allocated: self.disk_bytes_allocated(),
            state_source: self.state_source,
            open_ms: self.open_timings,
        }
    }

    /// Replays the whole log into fresh views and compares them with the live ones: stored
    /// nodes and edges, counters, the in-memory graph and adjacency, the time index and the
    /// full-text index. Writers wait while it runs.
    ///
    /// It holds the replayed state and, beside it, only what is per event (time, episodic and
    /// idempotency keys, stored and expected) or a digest per text document: records are
    /// compared one at a time, as the replay gives them, with the
    /// live one of the same id. (A copy of every node and edge of both sides took more than
    /// 24 GB at 100M edges, and the kernel killed the process.)
    pub fn verify(&self) -> Result<VerifyReport> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut report = VerifyReport {
            text_rebuilt_at_open: self.text_rebuilt,
            ..Default::default()
        };
        if let Err(why) = self.read_state().check_mapped() {
            report.differ(why);
        }
        let mut expected = LogExpectations::default();
        let replayed = match replay_log(&*self.backend, |ev, deleted| expected.see(ev, deleted))? {
            Ok(state) => state,
            Err(msg) => {
                report.differ(msg);
                return Ok(report);
            }
        };
        report.events_replayed = replayed.counters.last_seq;
        report.events_deleted = replayed.deleted.len();
        self.verify_log_lookups(&mut report, replayed.counters.last_seq)?;
        self.verify_stored_records(&mut report, &replayed, &mut expected)?;
        self.verify_live_views(&mut report, &replayed, &mut expected.text);
        let last_seq = replayed.counters.last_seq;
        // The text comparison needs only the digests: the replayed state goes first.
        drop(replayed);
        self.verify_text(&mut report, expected.text, last_seq)?;
        Ok(report)
    }

    /// Each event of the log looked up by its number, as every read of one event is: the
    /// replay read them by a scan, which a damaged key in a branch page does not stop
    /// ([`log::missing_from_lookups`]).
    fn verify_log_lookups(&self, report: &mut VerifyReport, last_seq: u64) -> Result<()> {
        let (missing, first) = log::missing_from_lookups(&*self.backend, last_seq, 5)?;
        report.log_events_not_found = missing;
        if missing > 0 {
            report.differ(format!(
                "log: {missing} event{} a scan reads but a lookup by number does not find \
                 (first {first:?}): a key of the log's index in {} is damaged, and \
                 every read of them fails; `loci repair` writes the files anew from a scan of \
                 the log, which reads them",
                if missing == 1 { "" } else { "s" },
                self.backend.kind().path_in(&self.dir).display()
            ));
        }
        Ok(())
    }

    /// The records the store keeps beside the log (counters, deletions, folds, the time and
    /// episodic indexes, idempotency keys) against what the replay gives.
    fn verify_stored_records(
        &self,
        report: &mut VerifyReport,
        replayed: &State,
        expected: &mut LogExpectations,
    ) -> Result<()> {
        let stored_counters: Option<Counters> = self
            .backend
            .get(Table::Meta, META_COUNTERS)?
            .map(|v| decode_meta(META_COUNTERS, &v))
            .transpose()?;
        if stored_counters != Some(replayed.counters) {
            report.differ(format!(
                "counters: stored {stored_counters:?}, replayed {:?}",
                replayed.counters
            ));
        }
        let stored_deleted = read_deleted(&*self.backend)?;
        if stored_deleted != replayed.deleted {
            report.differ(format!(
                "deleted events: stored {} ({:?}...), the log's deletion events give {}",
                stored_deleted.len(),
                stored_deleted.iter().take(5).collect::<Vec<_>>(),
                replayed.deleted.len()
            ));
        }
        for difference in
            Folds::read(&*self.backend)?.differences("stored", &replayed.folds, "replayed")
        {
            report.differ(difference);
        }

        let expected = &mut expected.records;
        // The ids floor is the last deletion's number (none stored: no deletion): one past the
        // log's end made every open for writing rebuild the text index and searches lose
        // their node hits, with nothing else to show it.
        let stored_floor = meta_seq(&*self.backend, META_IDS_FLOOR)?;
        if stored_floor != expected.last_deletion {
            report.differ(format!(
                "ids floor: stored {stored_floor}, the log's last deletion is {}",
                expected.last_deletion
            ));
        }
        expected.sort();
        let stored_times = table_keys(&*self.backend, Table::EventTime)?;
        if stored_times.len() != expected.times.len()
            || stored_times
                .iter()
                .zip(&expected.times)
                .any(|(a, b)| a.as_slice() != b.as_slice())
        {
            report.differ(format!(
                "event time index: {} entries stored, {} expected (or keys differ)",
                stored_times.len(),
                expected.times.len()
            ));
        }

        let stored_facets = table_keys(&*self.backend, Table::EventFacet)?;
        if stored_facets != expected.facets {
            report.differ(format!(
                "episodic index: {} entries stored, {} expected (or keys differ)",
                stored_facets.len(),
                expected.facets.len()
            ));
        }

        for (key, first, again) in std::mem::take(&mut expected.duplicate_keys) {
            report.differ(format!(
                "idempotency key {key:?} carried by events {first} and {again}"
            ));
        }
        let mut stored_keys = BTreeMap::new();
        self.backend
            .scan(Table::Idempotency, &[], None, &mut |k, v| {
                stored_keys.insert(String::from_utf8_lossy(k).into_owned(), v.to_vec());
                Ok(true)
            })?;
        for (key, seq) in &expected.keys {
            match stored_keys.get(key) {
                Some(v) if v.as_slice() == seq.to_be_bytes() => {}
                Some(v) => report.differ(format!(
                    "idempotency key {key:?}: stored {v:?}, the log says event {seq}"
                )),
                None => report.differ(format!(
                    "idempotency key {key:?} of event {seq} missing from its table"
                )),
            }
        }
        for key in stored_keys
            .keys()
            .filter(|k| !expected.keys.contains_key(*k))
        {
            report.differ(format!(
                "idempotency key {key:?} is stored, but no event carries it"
            ));
        }
        report.idempotency_keys = expected.keys.len();
        Ok(())
    }

    /// The live in-memory views against the replayed ones: folds, deletions, counters, nodes,
    /// the key map's size, edges and the adjacency. Adds each replayed node's text document to `expected_text`.
    fn verify_live_views(
        &self,
        report: &mut VerifyReport,
        replayed: &State,
        expected_text: &mut Vec<(u64, u64)>,
    ) {
        let live = self.read_state();
        for difference in live.folds.differences("live", &replayed.folds, "replayed") {
            report.differ(difference);
        }
        if live.deleted != replayed.deleted {
            report.differ(format!(
                "live view has {} deleted events, replay {}",
                live.deleted.len(),
                replayed.deleted.len()
            ));
        }
        if live.counters != replayed.counters {
            report.differ(format!(
                "live counters {:?}, replayed {:?}",
                live.counters, replayed.counters
            ));
        }
        // The nodes and edges have no table of their own: the log is their only record, so
        // the replay is compared with the live state, whichever way the open loaded it.
        report.nodes = compare_nodes(report, &live, replayed, expected_text);
        let (live_keys, replayed_keys) = (
            live.node_keys.len(&live.nodes),
            replayed.node_keys.len(&replayed.nodes),
        );
        if live_keys != replayed_keys {
            report.differ(format!(
                "live key map has {live_keys} keys, replayed {replayed_keys}"
            ));
        }
        report.edges = compare_edges(report, &live, replayed);
        compare_adjacency(report, &live, replayed);
    }

    /// The full-text index against what the replay expects, (target, digest) pairs: every
    /// file against its checksum (damage that still decodes serves wrong hits, and nothing
    /// short of reading every byte finds it), then each document's digest.
    fn verify_text(
        &self,
        report: &mut VerifyReport,
        mut expected: Vec<(u64, u64)>,
        last_seq: u64,
    ) -> Result<()> {
        // Targets are unique (a node's id; an event's sequence number, tagged), so sorting
        // is all the walk below needs.
        expected.sort_unstable();
        report.text_docs = expected.len();
        let damaged = self.text.damaged_files()?;
        for file in &damaged {
            report.differ(format!(
                "full-text index file {} is damaged (its checksum does not match); the next open rebuilds the index from the log",
                file.display()
            ));
        }
        if !damaged.is_empty() {
            // Read from damaged files, the documents would only repeat it.
            return Ok(());
        }
        let actual = match self.text.digests() {
            Ok(digests) => digests,
            Err(e) => {
                report.differ(format!("full-text documents do not read: {e}"));
                return Ok(());
            }
        };
        if self.text.indexed_seq() != last_seq {
            report.differ(format!(
                "full-text index is at seq {}, log at {last_seq}",
                self.text.indexed_seq(),
            ));
        }
        compare_digests(report, &actual, &expected);
        // Two documents for one target (a stale copy that a delete by key missed, e.g. a key
        // longer than tantivy's term limit) are named above; the live count also counts a
        // document without a target or digest, which the digests leave out.
        let live_docs = self.text.num_docs();
        if live_docs != expected.len() as u64 {
            report.differ(format!(
                "full-text index has {live_docs} live documents, replay expects {}",
                expected.len()
            ));
        }
        Ok(())
    }
}

/// What the backend's derived records hold of the log, gathered as a replay passes each
/// event: the time and episodic index keys of each event not deleted, and each idempotency key
/// with the first event to carry it (a later one is skipped as a repeat when ingested, so two
/// in the log are damage, listed). `replay --verify` compares them with the tables, and
/// `Store::repair` writes them.
#[derive(Default)]
struct LogRecords {
    times: Vec<[u8; 16]>,
    facets: Vec<Vec<u8>>,
    keys: BTreeMap<String, u64>,
    /// (key, first event, repeating event).
    duplicate_keys: Vec<(String, u64, u64)>,
    /// The last deletion event (0: none), which gave every id anew: the ids floor.
    last_deletion: u64,
}

impl LogRecords {
    fn see(&mut self, ev: &Event, deleted: bool) {
        if ev.kind == deletion::DELETE {
            self.last_deletion = self.last_deletion.max(ev.seq);
        }
        if !deleted {
            self.times.push(time_key(ev.ts, ev.seq));
            self.facets.extend(facet_keys(ev));
        }
        if let Some(key) = &ev.idempotency_key {
            match self.keys.entry(key.clone()) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(ev.seq);
                }
                std::collections::btree_map::Entry::Occupied(first) => {
                    self.duplicate_keys
                        .push((key.clone(), *first.get(), ev.seq));
                }
            }
        }
    }

    /// The index keys in the order the tables hold them, each once.
    fn sort(&mut self) {
        self.times.sort_unstable();
        self.facets.sort_unstable();
        self.facets.dedup();
    }
}

/// What verification gathers from each event as the replay passes it: the text document of
/// each event not deleted, and the derived records ([`LogRecords`]).
#[derive(Default)]
struct LogExpectations {
    /// (target, digest) of each text document; events' here, nodes' added after the replay.
    text: Vec<(u64, u64)>,
    records: LogRecords,
}

impl LogExpectations {
    fn see(&mut self, ev: &Event, deleted: bool) {
        if !deleted {
            if let Some(doc) = TextDoc::for_event(ev) {
                self.text
                    .push((TextIndex::target_ref(doc.target), doc.digest()));
            }
        }
        self.records.see(ev, deleted);
    }
}

/// Each replayed node against the live node of its id, then each live node the replay lacks;
/// pushes each replayed node's text document onto `expected_text`. Gives the replayed count.
fn compare_nodes(
    report: &mut VerifyReport,
    live: &State,
    replayed: &State,
    expected_text: &mut Vec<(u64, u64)>,
) -> usize {
    let mut count = 0;
    for n in replayed.all_nodes() {
        count += 1;
        let doc = TextDoc::for_node(&n);
        expected_text.push((TextIndex::target_ref(doc.target), doc.digest()));
        match live.node(n.id) {
            Some(a) if a == n => {}
            Some(a) => report.differ(format!("live node {}: is {a:?}, replay gives {n:?}", n.id)),
            None => report.differ(format!("live node {}: missing, replay gives {n:?}", n.id)),
        }
    }
    for id in live.nodes.ids() {
        if replayed.nodes.key_bytes(id).is_none() && live.node(id).is_some() {
            report.differ(format!("live node {id}: present, but replay removes it"));
        }
    }
    // A replayed record that does not decode is left out above; the replay made it, so it is
    // a defect of the encoding, not damage.
    let replayed_records = replayed.nodes.live_count();
    if count != replayed_records {
        report.differ(format!(
            "the replay holds {replayed_records} node records, of which {count} decode"
        ));
    }
    count
}

/// Each replayed edge against the live edge of its id, then the live count. Gives the replayed
/// count.
fn compare_edges(report: &mut VerifyReport, live: &State, replayed: &State) -> usize {
    let mut count = 0;
    for e in replayed.all_edges() {
        count += 1;
        let live_edge = live.edge(e.id);
        if live_edge.as_ref() != Some(&e) {
            report.differ(format!("live edge {}: {live_edge:?}, replayed {e:?}", e.id));
        }
    }
    let live_count = live.edges.live_count();
    if live_count != count {
        report.differ(format!(
            "live graph has {live_count} edges, replayed {count}"
        ));
    }
    count
}

/// The index's (target, digest) pairs against the expected ones, both sorted by target, in
/// one merged walk.
fn compare_digests(report: &mut VerifyReport, actual: &[(u64, u64)], expected: &[(u64, u64)]) {
    let (mut a, mut e) = (actual.iter().peekable(), expected.iter().peekable());
    let mut previous = None;
    loop {
        match (a.peek().copied(), e.peek().copied()) {
            (None, None) => break,
            (Some(&(target, digest)), Some(&(wanted, wanted_digest))) if target == wanted => {
                if digest != wanted_digest {
                    report.differ(format!("full-text document {target:#x} has other content"));
                }
                previous = Some(target);
                a.next();
                e.next();
            }
            (Some(&(target, _)), Some(&(wanted, _))) if wanted < target => {
                report.differ(format!("full-text document {wanted:#x} missing"));
                e.next();
            }
            (None, Some(&(wanted, _))) => {
                report.differ(format!("full-text document {wanted:#x} missing"));
                e.next();
            }
            (Some(&(target, _)), _) => {
                if previous == Some(target) {
                    report.differ(format!("full-text document {target:#x} is indexed twice"));
                } else {
                    report.differ(format!("full-text document {target:#x} should not exist"));
                }
                a.next();
            }
        }
    }
}

/// Text documents added a bounded number at a time (all at once took more than 24 GB at 100M
/// edges), each as new: the caller has emptied the index, or deleted the documents they
/// replace, so none is deleted by key first (a lookup per document and segment at its
/// commit). Each full commit records `interim` as the index's position, one behind the log,
/// so that a run cut short is rebuilt by the next open; [`TextCommits::finish`] commits the
/// rest at the log's position.
struct TextCommits<'a> {
    text: &'a TextIndex,
    docs: Vec<TextDoc>,
    /// Keys of documents to delete, with the first commit.
    deletes: Vec<String>,
    per_commit: usize,
    interim: u64,
}

impl<'a> TextCommits<'a> {
    fn new(text: &'a TextIndex, per_commit: usize, interim: u64, deletes: Vec<String>) -> Self {
        let per_commit = per_commit.max(1);
        TextCommits {
            text,
            docs: Vec::with_capacity(per_commit.min(REBUILD_DOCS_PER_COMMIT)),
            deletes,
            per_commit,
            interim,
        }
    }

    fn push(&mut self, doc: TextDoc) -> Result<()> {
        self.docs.push(doc);
        if self.docs.len() >= self.per_commit {
            self.commit(self.interim)?;
        }
        Ok(())
    }

    /// Every live node's document of `state`, in id order.
    fn push_nodes(&mut self, state: &State) -> Result<()> {
        for id in state.nodes.ids() {
            if let Some(n) = state.node(id) {
                self.push(TextDoc::for_node(&n))?;
            }
        }
        Ok(())
    }

    fn commit(&mut self, position: u64) -> Result<()> {
        let deletes = std::mem::take(&mut self.deletes);
        self.text
            .apply(self.docs.drain(..), &deletes, position, Some(NodeId(0)))?;
        Ok(())
    }

    /// Commits what is left, recording `position`.
    fn finish(mut self, position: u64) -> Result<()> {
        self.commit(position)
    }
}

/// The events that the log's deletion events delete: the first pass of a replay. Only the
/// kind of each record is decoded, except for deletion events.
fn deleted_in_log(backend: &dyn Backend) -> Result<BTreeSet<u64>> {
    let mut deleted = BTreeSet::new();
    log::scan(backend, 1, &mut |_, v| {
        let (_, kind) = peek_event_kind(Table::Log.name(), v)?;
        if kind == deletion::DELETE {
            deleted.extend(deletion::deleted_by(&decode_event(Table::Log.name(), v)?));
        }
        Ok(true)
    })?;
    Ok(deleted)
}

/// Which events left out of a replay it reads, to show its visitor. An event left out changes
/// nothing, and decoding its record is all it costs; in a store forgetting has thinned that
/// is most of a replay (272,254 of the 272,314 records of the forgotten `cx`, where decoding
/// them was half of a deletion's 7 s).
#[derive(Clone, Copy)]
pub(super) enum LeftOutShown<'a> {
    /// Every one: verification and repair check each record.
    All,
    /// None: the visitor looks at the events replayed, or at nothing.
    None,
    /// Those the function names.
    Those(&'a dyn Fn(u64) -> bool),
}

impl LeftOutShown<'_> {
    /// Whether event `seq`'s record is read, where `left_out` are the events a replay leaves
    /// out: every event replayed, and those left out it shows.
    pub(super) fn reads(self, left_out: &BTreeSet<u64>, seq: u64) -> bool {
        !left_out.contains(&seq)
            || match self {
                LeftOutShown::All => true,
                LeftOutShown::None => false,
                LeftOutShown::Those(wanted) => wanted(seq),
            }
    }
}

/// No visitor: a replay that reads no event left out.
pub(super) const UNVISITED: (fn(&Event, bool), LeftOutShown<'static>) =
    (|_, _| {}, LeftOutShown::None);

/// Replays the whole log into a fresh in-memory state, calling `visit` with each event and
/// whether it is deleted. The inner error says why the log cannot be replayed (a gap, an event
/// the projection refuses); the outer one is a storage failure.
fn replay_log(
    backend: &dyn Backend,
    visit: impl FnMut(&Event, bool),
) -> Result<std::result::Result<State, String>> {
    let deleted = deleted_in_log(backend)?;
    replay_excluding(
        backend,
        deleted,
        (visit, LeftOutShown::All),
        Vec::new(),
        u64::MAX,
    )
}

/// Replays the log up to sequence `until`, and then `extra` (events about to be appended),
/// into a fresh state, with the events in `deleted` left out (see `dynamics::deletion` for
/// what that means for the rest); `visit` sees each event read, and whether it is left out.
fn replay_excluding(
    backend: &dyn Backend,
    deleted: BTreeSet<u64>,
    visit: (impl FnMut(&Event, bool), LeftOutShown<'_>),
    extra: impl IntoIterator<Item = Event>,
    until: u64,
) -> Result<std::result::Result<State, String>> {
    let state = State {
        ids_epoch: next_graph_epoch(),
        graph_epoch: next_graph_epoch(),
        ..State::default()
    };
    Ok(replay_onto(
        backend,
        state,
        0,
        &deleted,
        visit,
        extra,
        until,
        &mut NoLookout,
    )?
    .map(|(mut state, _)| {
        state.deleted = deleted;
        state
    }))
}

/// A graph a deletion replayed (its `deleted`: the events it left out), kept for the next
/// replay the deletion needs of the log without the same events. A deletion that makes
/// summaries again replays the log three or four times (restating's probe, remaking's sources
/// and their graph with the taken summaries, its own), and in a store nothing was forgotten
/// from, the probe, the sources and its own leave the same events out: one replay serves the
/// three. At most one graph is kept, and asking for another drops it: a deletion never holds
/// more graphs than one replaying each time would (at 100M edges a graph is gigabytes).
#[derive(Default)]
pub(super) struct KeptReplay(std::cell::Cell<Option<State>>);

impl KeptReplay {
    /// Keeps `state`, the log replayed without `state.deleted`, in place of what was kept.
    pub(super) fn keep(&self, state: State) {
        self.0.set(Some(state));
    }

    /// The graph kept, when it is the log without exactly `excluded`; what was kept goes
    /// either way.
    pub(super) fn take(&self, excluded: &BTreeSet<u64>) -> Option<State> {
        self.0.take().filter(|state| state.deleted == *excluded)
    }
}

/// `state` (the log replayed to its `counters.last_seq` without its `deleted`) with `extra`
/// (events about to be appended) applied: what [`replay_excluding`] of the same events and
/// `extra` gives, without replaying the log again. `extra` is taken an event at a time, and
/// each goes with its chunk: a caller keeping the events passes copies made as they are
/// taken (a deletion making 96,755 summaries again had held a second copy of all of them).
fn replay_appended(
    backend: &dyn Backend,
    mut state: State,
    extra: impl IntoIterator<Item = Event>,
) -> Result<std::result::Result<State, String>> {
    let at = state.counters.last_seq;
    let deleted = std::mem::take(&mut state.deleted);
    let replayed = replay_onto(
        backend,
        state,
        at,
        &deleted,
        UNVISITED,
        extra,
        at,
        &mut NoLookout,
    )?;
    Ok(replayed.map(|(mut state, _)| {
        state.deleted = deleted;
        state
    }))
}

/// Replays the whole log into a fresh state with the events in `excluded` left out, showing
/// `lookout` the state before each event it wants to look before, which it may leave out too.
fn replay_watched(
    backend: &dyn Backend,
    excluded: &BTreeSet<u64>,
    lookout: &mut dyn Lookout,
) -> Result<std::result::Result<State, String>> {
    let state = State {
        ids_epoch: next_graph_epoch(),
        graph_epoch: next_graph_epoch(),
        ..State::default()
    };
    let replayed = replay_onto(
        backend,
        state,
        0,
        excluded,
        UNVISITED,
        Vec::new(),
        u64::MAX,
        lookout,
    )?;
    Ok(replayed.map(|(state, _)| state))
}

/// What looks at the state a replay has reached before an event applies ([`replay_onto`]):
/// how a deletion finds the summaries that restate what the log without its events would not
/// give (`restating`). Replay applies the log a chunk of events at a time; a look with events
/// still queued sees the state without them.
trait Lookout {
    /// How to look at the state before `ev` applies.
    fn wants(&self, ev: &Event) -> Look;
    /// Whether `ev` applies, given the state before it.
    fn admits(&mut self, ev: &Event, state: &State) -> bool;
    /// `ev` (not deleted, admitted) is queued, to be applied with the events after it.
    fn queued(&mut self, ev: &Event);
    /// The events queued are applied.
    fn applied(&mut self);
}

/// How a [`Lookout`] looks before an event.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Look {
    /// Not at all.
    No,
    /// At the state as it is: none of the events queued bears on what it looks at.
    AsItIs,
    /// Once the events queued are applied (applying a chunk costs more than its events do).
    Applied,
}

/// No look: a plain replay.
struct NoLookout;

impl Lookout for NoLookout {
    fn wants(&self, _: &Event) -> Look {
        Look::No
    }

    fn admits(&mut self, _: &Event, _: &State) -> bool {
        true
    }

    fn queued(&mut self, _: &Event) {}

    fn applied(&mut self) {}
}

/// What replay says of `e`, the projection's refusal of `chunk`, a chunk of the log: an event
/// is named as the log's event of its seq, where "event N of the batch" (a caller's batch's
/// wording) counted from where the replay began.
fn refusal_in_the_log(e: Error, chunk: &[Event]) -> String {
    match e {
        Error::InvalidEvent {
            event,
            assertion,
            field,
            message,
        } => {
            let seq = chunk
                .get(event)
                .map_or_else(|| "?".into(), |e| e.seq.to_string());
            let assertion = assertion.map(|a| format!(", assertion {}", a + 1));
            format!(
                "the log's event {seq}{}: {field}: {message}",
                assertion.unwrap_or_default()
            )
        }
        other => other.to_string(),
    }
}

/// Replays the log's events after `after` (which `state` reflects) up to sequence `until`,
/// then `extra`, onto `state`, with the events in `deleted` left out: the one projection that
/// live ingest runs, a chunk of events at a time. An open replays onto its snapshot's state
/// (or onto nothing, when it has none), verification and deletion onto nothing. Gives the
/// state and the changes applied (ids and chunks), or why the log cannot be replayed (a gap,
/// an event the projection refuses). An event of the log `lookout` wants to look before
/// applies only if it admits it.
#[allow(clippy::too_many_arguments)]
fn replay_onto(
    backend: &dyn Backend,
    mut state: State,
    after: u64,
    deleted: &BTreeSet<u64>,
    (mut visit, shown): (impl FnMut(&Event, bool), LeftOutShown<'_>),
    extra: impl IntoIterator<Item = Event>,
    until: u64,
    lookout: &mut dyn Lookout,
) -> Result<std::result::Result<(State, u64), String>> {
    if after < until {
        // A deletion's tests count these (KeptReplay).
        tracing::debug!(after, left_out = deleted.len(), "replaying the log");
    }
    let on_missing = if deleted.is_empty() {
        Missing::Refuse
    } else {
        Missing::Skip
    };
    let mut chunk: Vec<Event> = Vec::with_capacity(REPLAY_CHUNK);
    let mut assertions = 0usize;
    let mut failure = None;
    let mut weight = 0u64;
    // The next event due, and so the last one passed (read, or left out unread).
    let expected_seq = std::cell::Cell::new(after + 1);
    let mut flush = |chunk: &mut Vec<Event>,
                     state: &mut State|
     -> std::result::Result<(), String> {
        let events = std::mem::take(chunk);
        // Events left out unread after the last one read count as replayed.
        let passed = expected_seq.get() - 1;
        let Some(last) = events.last().map(|e| e.seq) else {
            state.counters.last_seq = state.counters.last_seq.max(passed);
            return Ok(());
        };
        let kept: Vec<Event> = events
            .into_iter()
            .filter(|e| !deleted.contains(&e.seq))
            .collect();
        // The node each assertion's keys name, looked up on every core as live ingest does;
        // the projection, which runs in order, then waits on no lookup.
        let hints = {
            let lists: Vec<&[Assertion]> = kept.iter().map(|e| e.assertions.as_slice()).collect();
            key_hints_of(state, &lists)
        };
        let base = LiveBase { state };
        // The overlay holds the events it projected (replay keeps no other copy), once they
        // are known good: a refusal names the event by its seq.
        let mut ov = project_batch(&base, &kept, 0, on_missing, &hints, &Default::default())
            .map_err(|e| refusal_in_the_log(e, &kept))?;
        ov.events = kept;
        weight += ov.change_weight();
        ov.shed_inputs();
        state.apply(&ov);
        state.counters.last_seq = last.max(passed);
        Ok(())
    };
    let mut take =
        |ev: Event, chunk: &mut Vec<Event>, admitted: bool| -> std::result::Result<(), String> {
            let due = expected_seq.get();
            if ev.seq != due {
                return Err(format!("log gap: expected seq {due}, found {}", ev.seq));
            }
            expected_seq.set(due + 1);
            visit(&ev, !admitted || deleted.contains(&ev.seq));
            if admitted {
                chunk.push(ev);
            }
            Ok(())
        };
    if after < until {
        log::scan(backend, after + 1, &mut |seq, v| {
            if seq > until {
                return Ok(false);
            }
            if !shown.reads(deleted, seq) {
                // `log::scan` gave the numbers in order, from `after + 1`: this one is due.
                expected_seq.set(seq + 1);
                return Ok(true);
            }
            let ev = decode_event(Table::Log.name(), v)?;
            assertions += ev.assertions.len();
            let live = !deleted.contains(&ev.seq);
            let look = if live { lookout.wants(&ev) } else { Look::No };
            if look == Look::Applied {
                if let Err(e) = flush(&mut chunk, &mut state) {
                    failure = Some(format!("replay failed: {e}"));
                    return Ok(false);
                }
                lookout.applied();
                assertions = ev.assertions.len();
            }
            let admitted = look == Look::No || lookout.admits(&ev, &state);
            if live && admitted {
                lookout.queued(&ev);
            }
            if let Err(msg) = take(ev, &mut chunk, admitted) {
                failure = Some(msg);
                return Ok(false);
            }
            if chunk_full(&chunk, assertions) {
                assertions = 0;
                if let Err(e) = flush(&mut chunk, &mut state) {
                    failure = Some(format!("replay failed: {e}"));
                    return Ok(false);
                }
                lookout.applied();
            }
            Ok(true)
        })?;
    }
    if failure.is_none() {
        // In chunks as the log's events are: a deletion's summaries made again (96k of a
        // hub's at 272k events) had been projected as one batch, each held twice meanwhile.
        for ev in extra {
            assertions += ev.assertions.len();
            if let Err(msg) = take(ev, &mut chunk, true) {
                failure = Some(msg);
                break;
            }
            if chunk_full(&chunk, assertions) {
                assertions = 0;
                if let Err(e) = flush(&mut chunk, &mut state) {
                    failure = Some(format!("replay failed: {e}"));
                    break;
                }
            }
        }
    }
    if failure.is_none() {
        if let Err(e) = flush(&mut chunk, &mut state) {
            failure = Some(format!("replay failed: {e}"));
        }
    }
    Ok(match failure {
        Some(msg) => Err(msg),
        None => Ok((state, weight)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Assertion, EventDraft, NodeUpsert};

    /// Node `k{i}`, named `name {i:03}`.
    fn named_node(i: usize) -> Assertion {
        Assertion::UpsertNode(NodeUpsert {
            key: format!("k{i}"),
            label: Some("Item".into()),
            name: Some(format!("name {i:03}")),
            ..Default::default()
        })
    }

    /// Two `init`s racing on one new directory (helper-148): the second had checked the
    /// directory before the first made its store, and took the lock after; it then called
    /// the first's log a store's without its manifest ("restore loci.json from a backup",
    /// exit 6), or, of the same backend, made the store again and said "created" too. It is
    /// told the store already exists, and the first's store is left as it is.
    #[test]
    fn a_store_made_while_another_creation_waited_for_the_lock_already_exists() {
        use crate::storage::StoreLock;
        for (first, second) in [
            (BackendKind::Redb, BackendKind::Sled),
            (BackendKind::Sled, BackendKind::Redb),
            (BackendKind::Redb, BackendKind::Redb),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            // The second's checks passed on the empty directory; the first makes its store,
            // writes an event, and lets go of the lock.
            std::fs::create_dir(&dir).unwrap();
            let store = Store::create(&dir, first).unwrap();
            let mut draft = EventDraft::new(1, "bot", "SEEN");
            draft.assertions.push(named_node(1));
            store.ingest(vec![draft]).unwrap();
            drop(store);
            let lock = StoreLock::acquire(&dir).unwrap();
            let e = Store::create_locked(&dir, second, lock)
                .err()
                .expect("refused");
            assert!(
                matches!(e, Error::AlreadyExists { .. }),
                "{first:?} then {second:?}: {e}"
            );
            let store = Store::open(&dir).unwrap();
            assert_eq!(store.backend_kind(), first);
            assert_eq!(store.stats().events, 1);
        }
    }

    /// The full-text index caught up from an earlier position (an update that failed): in one
    /// commit where the events past it give few documents and node keys; by a rebuild, which
    /// commits a bounded number at a time, where they give more (the review of helper-148's
    /// fix: every document of a long backlog had been held for one commit). Either way each
    /// event is found once, and the index matches the log.
    #[test]
    fn a_long_text_backlog_is_rebuilt_not_held_for_one_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::create(tmp.path().join("s"), BackendKind::Redb).unwrap();
        let note = |ts: i64, word: &str| {
            let mut e = EventDraft::new(ts, "bot", "NOTE");
            e.payload = crate::model::Value::from(word);
            e.assertions.push(named_node(ts as usize));
            e
        };
        store.ingest(vec![note(1, "alpha")]).unwrap();
        let words = ["bravo", "charlie", "delta", "echo"];
        let c = store
            .ingest(words.iter().zip(2..).map(|(w, ts)| note(ts, w)).collect())
            .unwrap();
        // Four events' documents and four node keys past event 1.
        for (most, how) in [(8, TextCaughtUp::InOneCommit), (7, TextCaughtUp::Rebuilt)] {
            assert_eq!(store.catch_up_text_locked(1, most).unwrap(), how, "{most}");
            assert_eq!(store.text.indexed_seq(), c.last_seq);
            for (word, seq) in words.iter().zip(c.first_seq..) {
                let hits = store.search(word, &SearchFilter::default(), 10).unwrap();
                let events: Vec<_> = hits
                    .iter()
                    .filter(|h| h.target == crate::text::Target::Event(seq))
                    .collect();
                assert_eq!(events.len(), 1, "{most}: {word}: {hits:?}");
            }
            let report = store.verify().unwrap();
            assert!(report.ok(), "{most}: {:?}", report.differences);
        }
    }

    /// A command that opens a store while `init` is making it (the log made, the manifest
    /// not yet written, the writer lock held) was told the store was damaged and to repair it
    /// (helper-150: exit 6 in 5 of 20 races). It waits for the lock as a writer does, and is
    /// told the store is locked while the creation holds it; once the manifest is written, it
    /// opens.
    #[test]
    fn a_store_being_made_is_locked_not_damaged() {
        use crate::storage::StoreLock;
        for kind in [BackendKind::Redb, BackendKind::Sled] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            drop(Store::create(&dir, kind).unwrap());
            let manifest = std::fs::read(dir.join(MANIFEST)).unwrap();
            std::fs::remove_file(dir.join(MANIFEST)).unwrap();
            let making = StoreLock::acquire(&dir).unwrap();
            for e in [
                Store::open(&dir).err().expect("refused"),
                Store::open_read_only(&dir).err().expect("refused"),
            ] {
                assert!(matches!(e, Error::Locked { .. }), "{kind:?}: {e}");
            }
            // The creation writes its manifest and lets go while the open waits.
            let creation = std::thread::spawn({
                let dir = dir.clone();
                move || {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    std::fs::write(dir.join(MANIFEST), manifest).unwrap();
                    drop(making);
                }
            });
            let opened = Store::open(&dir);
            creation.join().unwrap();
            drop(opened.unwrap());
            // Without a lock held, a log without its manifest is damage, as it was.
            std::fs::remove_file(dir.join(MANIFEST)).unwrap();
            let e = Store::open(&dir).err().expect("refused");
            assert!(matches!(e, Error::Store { .. }), "{kind:?}: {e}");
        }
    }

    /// Mapped a chunk at a time on every core, items come out as a map of them in order
    /// would give them, those mapped to nothing left out, across chunk boundaries.
    #[test]
    fn items_mapped_a_chunk_at_a_time_come_out_in_order() {
        let n = 3 * PAR_CHUNK + 17;
        let mapped: Vec<usize> =
            ParChunks::new(0..n, |i: usize| (!i.is_multiple_of(3)).then_some(i * 2)).collect();
        let want: Vec<usize> = (0..n)
            .filter(|i| !i.is_multiple_of(3))
            .map(|i| i * 2)
            .collect();
        assert_eq!(mapped, want);
        assert_eq!(ParChunks::new(0..0, Some).count(), 0);
    }

    /// The latest events of a range are read one at a time, in time order, until the reader
    /// says stop (`loci timeline` writes each as it comes: a closed pipe ends the reading),
    /// deleted ones passed over, as the whole list gives them.
    #[test]
    fn the_latest_events_are_read_one_at_a_time_until_the_reader_stops() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
        let drafts = (0..10).map(|i| EventDraft::new(100 - i, "bot", "SEEN"));
        store.ingest(drafts.collect()).unwrap();
        store.delete(&crate::DeleteRequest::events([3])).unwrap();
        let (entries, total) = store.latest_event_times(i64::MIN, i64::MAX, 6).unwrap();
        // Nine left, and the deletion (an event of its own).
        assert_eq!((entries.len(), total), (6, 10));
        let (whole, _) = store.latest_events(i64::MIN, i64::MAX, 6).unwrap();
        let mut read = Vec::new();
        store
            .each_event_of_time_entries(entries.clone(), &mut |e| {
                read.push(e.seq);
                Ok(true)
            })
            .unwrap();
        assert_eq!(read, whole.iter().map(|e| e.seq).collect::<Vec<_>>());
        let mut first = Vec::new();
        store
            .each_event_of_time_entries(entries, &mut |e| {
                first.push(e.seq);
                Ok(first.len() < 2)
            })
            .unwrap();
        assert_eq!(first, read[..2]);
    }

    fn ingest_one(store: &Store, ts: i64, assertions: Vec<Assertion>) {
        let mut ev = EventDraft::new(ts, "bot", "SEEN");
        ev.assertions = assertions;
        store.ingest(vec![ev]).unwrap();
    }

    /// An index committed by a build before floors were recorded has none: a deletion's
    /// searches could not tell its old node documents from the new. The writer's open records
    /// the store's floor in it with one commit of nothing.
    #[test]
    fn an_index_from_before_floors_gets_one_at_the_writers_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
            store.text.set_next_floor(u64::MAX);
            ingest_one(&store, 1, (0..5).map(named_node).collect());
            assert_eq!(store.text.ids_floor(), None);
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.text.ids_floor(), Some(0));
        assert!(store.searches_nodes());
    }

    /// A store in `dir` of five named nodes whose index records `IDS_FLOOR_CUT_SHORT`: its
    /// node documents are of other ids than the store's.
    fn store_with_an_index_of_other_ids(dir: &std::path::Path) -> Store {
        let store = Store::create(dir, BackendKind::Redb).unwrap();
        store.text.set_next_floor(IDS_FLOOR_CUT_SHORT);
        ingest_one(&store, 1, (0..5).map(named_node).collect());
        store
    }

    /// An index whose node documents are of other ids than the store's (a deletion that could
    /// not write them again records `IDS_FLOOR_CUT_SHORT`) gives no node hit, and the next
    /// open for writing rebuilds it.
    #[test]
    fn an_index_of_other_ids_is_rebuilt_by_the_writers_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = store_with_an_index_of_other_ids(dir.path());
            assert!(!store.searches_nodes());
            let hits = store.search("name", &SearchFilter::default(), 10).unwrap();
            assert!(hits
                .iter()
                .all(|h| matches!(h.target, crate::text::Target::Event(_))));
        }
        let store = Store::open(dir.path()).unwrap();
        assert!(store.text_rebuilt() || store.text.ids_floor() == Some(0));
        assert!(store.searches_nodes());
        let hits = store.search("name", &SearchFilter::default(), 10).unwrap();
        assert!(hits
            .iter()
            .any(|h| matches!(h.target, crate::text::Target::Node(_))));
    }

    /// An index left of other ids by a deletion (`IDS_FLOOR_CUT_SHORT`) and then rebuilt by
    /// the same process (a later commit that met damage, or caught up a missed batch): the
    /// rebuild wrote every node's document under the graph's ids, but recorded the floor the
    /// deletion had left, so node hits stayed out until the next open rebuilt it all again
    /// (the review of helper-148's fix). It records the graph's floor.
    #[test]
    fn a_rebuild_in_the_process_records_the_graphs_floor_not_a_cut_short_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_an_index_of_other_ids(dir.path());
        assert!(!store.searches_nodes());
        store.rebuild_text(REBUILD_DOCS_PER_COMMIT).unwrap();
        assert_eq!(store.text.ids_floor(), Some(store.read_state().ids_floor));
        assert!(store.searches_nodes());
        // And the commits after it.
        ingest_one(&store, 2, vec![named_node(9)]);
        assert!(store.searches_nodes());
        let hits = store.search("name", &SearchFilter::default(), 10).unwrap();
        assert!(hits
            .iter()
            .any(|h| matches!(h.target, crate::text::Target::Node(_))));
    }

    /// What `run` logs at warning level and above, as the binary's subscriber prints it.
    fn warnings_of(run: impl FnOnce()) -> String {
        logs_of(tracing::Level::WARN, run)
    }

    /// What `run` logs at `level` and above on this thread, as the binary's subscriber prints
    /// it.
    fn logs_of(level: tracing::Level, run: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, run);
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    /// A reader whose index stays of other ids than its graph (a deletion being written, or
    /// cut short) warns that its searches leave node hits out when it first searches, once,
    /// and not at its open: a command that does not search (`stats`, `neighbors` by key) has
    /// nothing to be warned of.
    #[test]
    fn a_reader_apart_from_its_index_warns_at_its_first_search_not_at_its_open() {
        let dir = tempfile::tempdir().unwrap();
        drop(store_with_an_index_of_other_ids(dir.path()));
        let mut reader = None;
        let at_open = warnings_of(|| reader = Some(Store::open_read_only(dir.path()).unwrap()));
        let reader = reader.unwrap();
        assert!(!reader.searches_nodes());
        assert!(!at_open.contains("node hits out"), "{at_open}");
        let at_searches = warnings_of(|| {
            for _ in 0..3 {
                reader.search("name", &SearchFilter::default(), 10).unwrap();
            }
        });
        assert_eq!(
            at_searches.matches("node hits out").count(),
            1,
            "{at_searches}"
        );
    }

    /// A closed store in `dir` of 50 named nodes with a snapshot of them, and where in the
    /// snapshot a byte of node `k17`'s name lies.
    fn named_nodes_with_snapshot(dir: &std::path::Path, kind: BackendKind) -> usize {
        let store = Store::create(dir, kind).unwrap();
        ingest_one(&store, 1, (0..50).map(named_node).collect());
        store.checkpoint().unwrap().unwrap();
        drop(store);
        let bytes = std::fs::read(snapshot::path_in(dir)).unwrap();
        bytes.windows(8).position(|w| w == b"name 017").unwrap() + 1
    }

    /// After a checkpoint refused for damage: no snapshot file is left, and the next open
    /// replays the log, node `k17` whole and `k50`, made after the snapshot, there.
    fn assert_replayed_whole(dir: &std::path::Path, kind: BackendKind) {
        let files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| f.starts_with("state.snapshot"))
            .collect();
        assert!(files.is_empty(), "{kind:?}: {files:?}");
        let store = Store::open(dir).unwrap();
        assert_eq!(store.state_source(), StateSource::Log);
        let name = store.node_by_key("k17").map(|n| n.name);
        assert_eq!(name.as_deref(), Some("name 017"));
        assert!(store.node_by_key("k50").is_some());
        assert!(store.verify().unwrap().ok());
    }

    /// A byte of the mapped snapshot changed while a checkpoint writes the next one (after
    /// the checkpoint's check of every block, before the write reads it) is not carried into
    /// the new snapshot under checksums of its own: the checkpoint checks every block again
    /// once the write has read them, refuses, removes the snapshot and its own file, and the
    /// next open replays the log. (A probe flipped bytes while a load wrote its snapshots.)
    #[test]
    fn a_block_changed_while_a_checkpoint_writes_is_not_carried_into_the_new_snapshot() {
        use std::io::{Seek, SeekFrom, Write};
        for kind in [BackendKind::Redb, BackendKind::Sled] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            let at = named_nodes_with_snapshot(&dir, kind);
            let store = Store::open(&dir).unwrap();
            assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
            let name = store.node_by_key("k17").map(|n| n.name);
            assert_eq!(name.as_deref(), Some("name 017"));
            let path = snapshot::path_in(&dir);
            // In place, as the map sees it.
            let change = move || {
                let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                file.seek(SeekFrom::Start(at as u64)).unwrap();
                file.write_all(b"A").unwrap();
                file.sync_all().unwrap();
            };
            ingest_one(&store, 2, vec![named_node(50)]);
            snapshot::AT_WRITE_START.with(|hook| *hook.borrow_mut() = Some(Box::new(change)));
            let refused = store.checkpoint();
            assert!(refused.is_err(), "{kind:?}: {refused:?}");
            drop(store);
            assert_replayed_whole(&dir, kind);
        }
    }

    /// A block damaged before the open and never read until a checkpoint's write reads it
    /// (the checkpoint no longer checks the blocks before its write): the write reads it as
    /// missing, the check after the write finds it, and nothing is put in place; the next
    /// open replays the log, whole.
    #[test]
    fn a_block_first_read_by_a_checkpoints_write_is_not_written() {
        for kind in [BackendKind::Redb, BackendKind::Sled] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            let at = named_nodes_with_snapshot(&dir, kind);
            let path = snapshot::path_in(&dir);
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[at] = b'A';
            std::fs::write(&path, &bytes).unwrap();
            let store = Store::open(&dir).unwrap();
            assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
            ingest_one(&store, 2, vec![named_node(50)]);
            let refused = store.checkpoint();
            assert!(refused.is_err(), "{kind:?}: {refused:?}");
            drop(store);
            assert_replayed_whole(&dir, kind);
        }
    }

    /// A rebuild of the full-text index commits a bounded number of documents at a time (all
    /// at once took more than 24 GB at 100M edges, and the process was killed): committed ten
    /// at a time, the index holds what it held, verify finds it equal to the log's, and it
    /// records the log's end only when whole.
    #[test]
    fn a_text_rebuild_in_small_commits_gives_the_whole_index() {
        let tmp = tempfile::tempdir().unwrap();
        let store = widget_store(tmp.path());
        let hits = widget_hits;
        let before = hits(&store);
        let docs = store.text.num_docs();
        assert_eq!(docs, 23 + 115);
        store.rebuild_text(10).unwrap();
        assert_eq!(store.text.num_docs(), docs);
        assert_eq!(hits(&store), before);
        assert_eq!(store.text.indexed_seq(), 23);
        assert!(store.verify().unwrap().ok());
    }

    /// A deletion writes every node's document again (the replay renumbers nodes) a bounded
    /// number at a time: all of them in one commit, with a delete by key for each, took a
    /// 100M-edge store past 24 GB, and the process was killed. Ten at a time, the index is the
    /// replay's (verify), the deleted event's nodes are not found and the others are, and the
    /// index records the deletion's position only once whole; a deletion cut short before its
    /// last commit is rebuilt by the next open (a deletion after the index's position).
    #[test]
    fn a_deletion_writes_the_nodes_documents_again_in_small_commits() {
        let tmp = tempfile::tempdir().unwrap();
        let store = widget_store(tmp.path());
        let before = widget_hits(&store);
        let request = crate::DeleteRequest {
            events: vec![4],
            ..Default::default()
        };
        let report = store
            .delete_in_commits(
                &store.deletion_turn(),
                &request,
                crate::dynamics::deletion::Reason::Delete,
                10,
            )
            .unwrap();
        assert_eq!(report.nodes_removed, 5);
        assert_eq!(store.text.indexed_seq(), 24);
        // The event's document and its five nodes' go; the deletion event's comes.
        assert_eq!(store.text.num_docs(), 22 + 110 + 1);
        let after = widget_hits(&store);
        assert_eq!(after.len(), before.len() - 5);
        for gone in 15..20 {
            assert!(store.node_by_key(&format!("n{gone}")).is_none());
        }
        let report = store.verify().unwrap();
        assert!(report.ok(), "{report:?}");
    }

    /// An edge upsert whose ends and edge the base holds, looked up before the batch on every
    /// core, changes that edge, unless the batch itself retracted it or made an end again:
    /// then the edge is a new one. Each case is checked in one event, against the log's replay.
    #[test]
    fn an_edge_the_base_holds_is_found_unless_the_batch_changed_it_first() {
        use crate::model::EdgeUpsert;
        let tmp = tempfile::tempdir().unwrap();
        let store = widget_store(tmp.path());
        let edge = |from: &str, to: &str, confidence: f32| {
            Assertion::UpsertEdge(EdgeUpsert {
                from: from.into(),
                relation: "near".into(),
                to: to.into(),
                confidence: Some(confidence),
                ..Default::default()
            })
        };
        let event = |assertions: Vec<Assertion>| {
            let mut ev = EventDraft::new(100, "bot", "SEEN");
            ev.assertions = assertions;
            store.ingest(vec![ev]).unwrap()
        };
        let id = |from: &str, to: &str| {
            let e = store.edge_between(from, "near", to).unwrap().unwrap();
            (e.id, e.confidence)
        };
        event(vec![edge("n1", "n2", 0.5), edge("n3", "n3", 0.5)]);
        let (first, _) = id("n1", "n2");
        let (looped, _) = id("n3", "n3");
        // Found: the same edge, changed (a self-loop too).
        event(vec![edge("n1", "n2", 0.6), edge("n3", "n3", 0.7)]);
        assert_eq!(id("n1", "n2"), (first, 0.6));
        assert_eq!(id("n3", "n3"), (looped, 0.7));
        // Retracted first: a new edge.
        event(vec![
            Assertion::RetractEdge {
                from: "n1".into(),
                relation: "near".into(),
                to: "n2".into(),
            },
            edge("n1", "n2", 0.8),
        ]);
        let (second, conf) = id("n1", "n2");
        assert!(second != first && conf == 0.8);
        // An end made again: its node and the edge are new.
        let n2 = store.node_by_key("n2").unwrap().id;
        event(vec![
            Assertion::RetractNode { key: "n2".into() },
            Assertion::UpsertNode(NodeUpsert {
                key: "n2".into(),
                ..Default::default()
            }),
            edge("n1", "n2", 0.9),
        ]);
        assert_ne!(store.node_by_key("n2").unwrap().id, n2);
        let (third, conf) = id("n1", "n2");
        assert!(third != second && conf == 0.9);
        let n1 = store.node_by_key("n1").unwrap().id;
        assert_eq!(store.graph().edges_of(n1).count(), 1);
        let report = store.verify().unwrap();
        assert!(report.ok(), "{report:?}");
    }

    /// One assertion over a small key space (five nodes a base holds, a sixth it does not).
    fn hinted_op() -> impl proptest::strategy::Strategy<Value = Assertion> {
        use proptest::prelude::*;
        let key = || (0..6u8).prop_map(|k| format!("k{k}"));
        let relation = || (0..2u8).prop_map(|r| format!("r{r}"));
        prop_oneof![
            key().prop_map(|key| Assertion::UpsertNode(NodeUpsert {
                key,
                ..Default::default()
            })),
            (key(), relation(), key(), 0..4u8).prop_map(|(from, relation, to, c)| {
                Assertion::UpsertEdge(crate::model::EdgeUpsert {
                    from,
                    relation,
                    to,
                    confidence: Some(f32::from(c) / 4.0),
                    ..Default::default()
                })
            }),
            key().prop_map(|key| Assertion::RetractNode { key }),
            (key(), relation(), key()).prop_map(|(from, relation, to)| Assertion::RetractEdge {
                from,
                relation,
                to
            }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// The answers looked up before a batch (`KeyHints`: each key's node, each edge's
        /// edge in the base) change nothing the projection makes of it. A base of five nodes
        /// and edges among them, then a batch of upserts and retractions of nodes and edges
        /// (an end retracted and made again, an edge retracted and upserted, in one event or
        /// across events): the overlay projected with the hints is the one projected
        /// without, or both refuse the batch with the same error, for live ingest's rule on
        /// a missing node and for replay's.
        #[test]
        fn key_hints_change_nothing_a_batch_projects(
            base in proptest::collection::vec(hinted_op(), 0..30),
            batch in proptest::collection::vec(proptest::collection::vec(hinted_op(), 1..10), 1..4),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let store = Store::create(tmp.path().join("s"), BackendKind::Redb).unwrap();
            let mut first = EventDraft::new(0, "bot", "SEEN");
            first.assertions = (0..5)
                .map(|k| Assertion::UpsertNode(NodeUpsert {
                    key: format!("k{k}"),
                    ..Default::default()
                }))
                .collect();
            store.ingest(vec![first]).unwrap();
            for a in base {
                let mut ev = EventDraft::new(1, "bot", "SEEN");
                ev.assertions = vec![a];
                // A refused assertion (an edge to the absent node) leaves the base as it was.
                let _ = store.ingest(vec![ev]);
            }
            let state = store.read_state();
            let events: Vec<Event> = batch
                .into_iter()
                .enumerate()
                .map(|(i, assertions)| {
                    let mut d = EventDraft::new(2, "bot", "SEEN");
                    d.assertions = assertions;
                    d.salience = Some(0.5);
                    Event::from_draft(state.counters.last_seq + 1 + i as u64, 0, d)
                })
                .collect();
            let lists: Vec<&[Assertion]> = events.iter().map(|e| e.assertions.as_slice()).collect();
            let hints = key_hints_of(&state, &lists);
            let base = LiveBase { state: &state };
            for missing in [Missing::Refuse, Missing::Skip] {
                let none = Default::default();
                let with = project_batch(&base, &events, 0, missing, &hints, &none);
                let without = project_batch(&base, &events, 0, missing, &KeyHints::new(), &none);
                match (with, without) {
                    (Ok(a), Ok(b)) => {
                        proptest::prop_assert_eq!(&a.nodes, &b.nodes);
                        proptest::prop_assert_eq!(&a.edges, &b.edges);
                        proptest::prop_assert_eq!(a.counters, b.counters);
                    }
                    (Err(a), Err(b)) => proptest::prop_assert_eq!(a.to_string(), b.to_string()),
                    (a, b) => proptest::prop_assert!(false, "{:?} against {:?}", a.err(), b.err()),
                }
            }
        }
    }

    /// 23 events of 5 nodes each, named "copper widget 0" to "4".
    fn widget_store(dir: &std::path::Path) -> Store {
        let store = Store::create(dir.join("s"), BackendKind::Redb).unwrap();
        let mut drafts = Vec::new();
        for i in 0..23 {
            let mut ev = EventDraft::new(i, "bot", "SEEN");
            ev.assertions = (0..5)
                .map(|j| {
                    Assertion::UpsertNode(NodeUpsert {
                        key: format!("n{}", i * 5 + j),
                        label: Some("Item".into()),
                        name: Some(format!("copper widget {j}")),
                        ..Default::default()
                    })
                })
                .collect();
            drafts.push(ev);
        }
        store.ingest(drafts).unwrap();
        store
    }

    /// The documents a search for "copper widget" finds, by target.
    fn widget_hits(store: &Store) -> Vec<u64> {
        let filter = crate::SearchFilter::default();
        let mut out: Vec<u64> = store
            .search("copper widget", &filter, 500)
            .unwrap()
            .into_iter()
            .map(|h| TextIndex::target_ref(h.target))
            .collect();
        out.sort_unstable();
        out
    }

    /// The merged walk over the index's digests and the replay's names each kind of
    /// difference once, by target: other content, a document missing, one that should not
    /// exist, one indexed twice (the walk replaced maps keyed by target, which folded a second
    /// copy into the first).
    #[test]
    fn text_digests_are_compared_target_by_target() {
        let actual = [(1, 10), (2, 20), (2, 20), (4, 41), (5, 50), (9, 90)];
        let expected = [(1, 10), (2, 20), (3, 30), (4, 40), (9, 90), (11, 110)];
        let mut report = VerifyReport::default();
        compare_digests(&mut report, &actual, &expected);
        assert_eq!(
            report.differences,
            [
                "full-text document 0x2 is indexed twice",
                "full-text document 0x3 missing",
                "full-text document 0x4 has other content",
                "full-text document 0x5 should not exist",
                "full-text document 0xb missing",
            ]
        );
        let mut report = VerifyReport::default();
        compare_digests(&mut report, &expected, &expected);
        assert!(report.ok());
    }

    /// A deletion that makes summaries again in a store nothing was forgotten from replays
    /// the log once: the probe for summaries restating what its events made others give, the
    /// graph the summaries are made again from and its own graph leave the same events out
    /// (`KeptReplay`), where each was a replay of its own. Its graph is the log's.
    #[test]
    fn a_deletion_in_a_store_nothing_was_forgotten_from_replays_the_log_once() {
        use crate::dynamics::consolidate::{self, ConsolidateOptions, ConsolidationPolicy};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
        // A note a day over two weeks, each naming the day's node and the next: every day's
        // summary after the first restates a node the first note made.
        for day in 0..14 {
            let i = day as usize;
            ingest_one(
                &store,
                day * 100 + 10,
                vec![named_node(i % 3), named_node(i % 3 + 1)],
            );
        }
        ingest_one(&store, 2000, vec![named_node(9)]);
        let days =
            ConsolidateOptions::default().with_policy(ConsolidationPolicy::default().with_day(100));
        consolidate::consolidate(&store, &consolidate::RuleSummarizer, &days).unwrap();
        let mut report = None;
        let logs = logs_of(tracing::Level::DEBUG, || {
            report = Some(store.delete(&crate::DeleteRequest::events([1])).unwrap());
        });
        let report = report.unwrap();
        assert!(!report.summaries_made_again.is_empty(), "{report:?}");
        assert_eq!(logs.matches("replaying the log").count(), 1, "{logs}");
        let verified = store.verify().unwrap();
        assert!(verified.ok(), "{:#?}", verified.differences);
    }

    /// A replay reads the record of an event it leaves out only for a visitor shown it: a
    /// store forgetting had thinned to 60 of 272,314 events decoded all of them at each of a
    /// deletion's replays (half its time). The events left out unread count as replayed, the
    /// last one too.
    #[test]
    fn a_replay_reads_no_record_of_an_event_it_leaves_out_unless_its_visitor_is_shown_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
        for ts in 1..=4 {
            ingest_one(&store, ts, vec![named_node(ts as usize)]);
        }
        let left_out = BTreeSet::from([2, 4]);
        let replay = |visit: (fn(&Event, bool), LeftOutShown<'_>)| {
            replay_excluding(
                &*store.backend,
                left_out.clone(),
                visit,
                Vec::new(),
                u64::MAX,
            )
        };
        let whole = replay(UNVISITED).unwrap().unwrap();
        // Records that no longer decode, where events 2 and 4 were.
        let mut batch = WriteBatch::default();
        for seq in [2, 4] {
            log::put(&mut batch, seq, b"not a record".to_vec());
        }
        store.backend.commit(batch).unwrap();

        let unread = replay(UNVISITED).unwrap().unwrap();
        assert_eq!(unread.counters, whole.counters);
        assert_eq!(unread.counters.last_seq, 4);
        let held = |state: &State| -> Vec<bool> {
            (1..=4)
                .map(|i| state.node_id(&format!("k{i}")).is_some())
                .collect()
        };
        assert_eq!(held(&unread), [true, false, true, false]);
        assert_eq!(held(&whole), held(&unread));
        // Shown every event left out, or the last one, the replay reads the damage.
        for (shown, event) in [
            (LeftOutShown::All, "event 2"),
            (LeftOutShown::Those(&|seq| seq == 4), "event 4"),
        ] {
            let Err(e) = replay((|_, _| {}, shown)) else {
                panic!("a damaged record shown to the visitor was read as an event");
            };
            let e = e.to_string();
            assert!(e.contains(event), "{e}");
        }
    }

    /// helper-111: a store where every read of event 1100 failed as damage passed
    /// `replay --verify`, which reads the log by a scan alone. verify looks each event up.
    #[test]
    fn verify_finds_an_event_a_scan_reads_and_a_lookup_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let mut store = Store::create(dir.path(), BackendKind::Redb).unwrap();
        for ts in 1..=3 {
            ingest_one(&store, ts, vec![named_node(ts as usize)]);
        }
        assert!(store.verify().unwrap().differences.is_empty());
        let real = std::mem::replace(
            &mut store.backend,
            BackendKind::Redb.open(elsewhere.path()).unwrap(),
        );
        // Lookups of event 2 find nothing while scans read every record: a damaged key in a
        // branch page of redb's log table.
        store.backend = Box::new(crate::storage::InterceptedScans {
            inner: real,
            intercept: |table: Table, start: &[u8]| {
                (table == Table::Log && start.starts_with(&2u64.to_be_bytes())).then_some(Ok(()))
            },
        });
        let e = store.event(2).unwrap_err().to_string();
        assert!(e.contains("event 2 has no record"), "{e}");
        let report = store.verify().unwrap();
        assert_eq!(report.differences.len(), 1, "{:#?}", report.differences);
        let said = &report.differences[0];
        assert!(said.contains("1 event") && said.contains("[2]"), "{said}");
        assert_eq!(report.log_events_not_found, 1);
    }
}
