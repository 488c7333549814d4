//! The in-memory adjacency: every live edge appears in the lists of both its endpoints, so the
//! graph is traversable in both directions. Mapped from the state snapshot at open (or built by
//! the replay of the log) and kept current by the store on every commit.
//!
//! Why not a `petgraph::Graph`: its edges form linked lists threaded through one big array, so a
//! k-hop expansion chases a pointer (and usually a cache miss) per edge. Here each node has one
//! contiguous list of entries that carry what a filter needs (relation, direction,
//! confidence), so an expansion reads each list front to back without touching edge records;
//! the lists sit end to end in one array (CSR), and only those changed since the open live apart.
//! In memory an entry takes 16 bytes; read from the snapshot the array is a packed column
//! (`crate::packed`, about 9 bytes an entry at 1M edges), decoded as a list is read.
//! The petgraph traits are implemented on [`Adjacency`], so petgraph's algorithms (Dijkstra, A*,
//! BFS, ...) run on it directly.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use petgraph::visit::{
    Data, EdgeRef, GraphBase, IntoEdgeReferences, IntoEdges, IntoNeighbors, NodeCount,
    NodeIndexable, Visitable,
};

use crate::lists::{capacity_for, Lists};
use crate::mapped::{Layered, Limits, Offsets, Plain};
use crate::model::{EdgeId, NodeId};
use crate::packed::{self, Packable, Packed, MAX_FIELDS};
use crate::times::LastSeen;

/// Bit of [`AdjEntry::rel_dir`] set when the entry is the incoming side of its edge.
const INCOMING: u32 = 1 << 31;
/// Bit of [`AdjEntry::rel_dir`] set when the edge has a validity bound, so that time filters
/// need to read the edge only for such edges.
const BOUNDED: u32 = 1 << 30;
const FLAGS: u32 = INCOMING | BOUNDED;

/// One side of an edge, stored in the list of the node it leaves from (outgoing) or arrives at
/// (incoming).
#[derive(Copy, Clone, Debug, PartialEq)]
#[repr(C)]
pub struct AdjEntry {
    /// The node at the other end.
    pub node: u32,
    pub edge: u32,
    pub confidence: f32,
    /// Interned relation id in the low 30 bits; [`INCOMING`] and [`BOUNDED`] above.
    rel_dir: u32,
}

// SAFETY: `#[repr(C)]` of four 4-byte integers and floats: no padding, any bits a value.
unsafe impl Plain for AdjEntry {
    /// Read from a snapshot: its node, edge and relation within what the snapshot holds.
    fn valid(&self, limits: &Limits) -> bool {
        self.node < limits.nodes && self.edge < limits.edges && self.relation() < limits.relations
    }
}

/// Packed as the neighbour, the edge, the confidence's bits, and the relation shifted past the
/// two flags (so that a block of one relation and direction packs its flags and relation in
/// few bits, where `rel_dir` as it lies would need 32).
impl Packable for AdjEntry {
    const FIELDS: usize = 4;
    /// Neighbours and edge ids are all over the graph, so a block of 65,536 entries packs
    /// as tightly as one of 1,024, and its 56-byte headers (3,000 at 100M edges, not
    /// 200,000) stay in the caches: a list read meets one cache miss fewer.
    const BLOCK: usize = 1 << 16;
    /// The confidence.
    const CODED: Option<usize> = Some(2);
    fn to_fields(&self) -> [u64; MAX_FIELDS] {
        let flags = u64::from(self.is_incoming()) | u64::from(self.is_bounded()) << 1;
        [
            u64::from(self.node),
            u64::from(self.edge),
            u64::from(self.confidence.to_bits()),
            u64::from(self.relation()) << 2 | flags,
            0,
        ]
    }
    fn from_fields(f: &[u64; MAX_FIELDS]) -> Self {
        let flags =
            if f[3] & 1 != 0 { INCOMING } else { 0 } | if f[3] & 2 != 0 { BOUNDED } else { 0 };
        // Fields wider than their type (a crafted file) come out as ids the bounds refuse.
        let id = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        AdjEntry {
            node: id(f[0]),
            edge: id(f[1]),
            confidence: f32::from_bits(f[2] as u32),
            rel_dir: id(f[3] >> 2).min(!FLAGS) | flags,
        }
    }
}

impl AdjEntry {
    pub fn new(node: NodeId, edge: EdgeId, relation: u32, confidence: f32, incoming: bool) -> Self {
        AdjEntry {
            node: node.0,
            edge: edge.0,
            confidence,
            rel_dir: relation | if incoming { INCOMING } else { 0 },
        }
    }
    pub fn relation(&self) -> u32 {
        self.rel_dir & !FLAGS
    }
    /// The two sides of an edge: the outgoing entry for `from`'s list and the incoming one
    /// for `to`'s, both flagged when the edge has a validity bound.
    fn pair(
        edge: EdgeId,
        from: NodeId,
        to: NodeId,
        relation: u32,
        conf: f32,
        bounded: bool,
    ) -> (Self, Self) {
        let flag = if bounded { BOUNDED } else { 0 };
        let mut out = AdjEntry::new(to, edge, relation, conf, false);
        let mut inc = AdjEntry::new(from, edge, relation, conf, true);
        out.rel_dir |= flag;
        inc.rel_dir |= flag;
        (out, inc)
    }
    /// Whether the edge has a `valid_from` or `valid_to`.
    pub fn is_bounded(&self) -> bool {
        self.rel_dir & BOUNDED != 0
    }
    pub fn is_incoming(&self) -> bool {
        self.rel_dir & INCOMING != 0
    }
    pub fn neighbor(&self) -> NodeId {
        NodeId(self.node)
    }
    pub fn edge_id(&self) -> EdgeId {
        EdgeId(self.edge)
    }
}

/// The entries of one node's list, in list order: a list in memory, or one decoded from the
/// snapshot's packed column as it is read. An entry in a damaged block of the snapshot is left
/// out (and the damage recorded), so a list may yield fewer entries than
/// [`Adjacency::degree`] says it holds.
#[derive(Clone)]
pub struct Entries<'a>(EntriesOf<'a>);

#[derive(Clone)]
enum EntriesOf<'a> {
    Memory(std::slice::Iter<'a, AdjEntry>),
    Mapped(packed::Run<'a, AdjEntry>),
    /// A row of the base array, then what was appended to it since (see
    /// [`Adjacency::grown`]).
    MemoryThen(
        std::slice::Iter<'a, AdjEntry>,
        std::slice::Iter<'a, AdjEntry>,
    ),
    MappedThen(packed::Run<'a, AdjEntry>, std::slice::Iter<'a, AdjEntry>),
}

impl<'a> Entries<'a> {
    fn empty() -> Self {
        Entries(EntriesOf::Memory([].iter()))
    }
    fn memory(list: &'a [AdjEntry]) -> Self {
        Entries(EntriesOf::Memory(list.iter()))
    }
    /// These entries, then `then`'s.
    fn then(self, then: &'a [AdjEntry]) -> Self {
        if then.is_empty() {
            return self;
        }
        Entries(match self.0 {
            EntriesOf::Memory(head) => EntriesOf::MemoryThen(head, then.iter()),
            EntriesOf::Mapped(head) => EntriesOf::MappedThen(head, then.iter()),
            // A base row is read once: never chained twice.
            chained => chained,
        })
    }
}

impl Iterator for Entries<'_> {
    type Item = AdjEntry;
    #[inline(always)]
    fn next(&mut self) -> Option<AdjEntry> {
        match &mut self.0 {
            EntriesOf::Memory(list) => list.next().copied(),
            EntriesOf::Mapped(run) => run.next(),
            EntriesOf::MemoryThen(head, then) => head.next().or_else(|| then.next()).copied(),
            EntriesOf::MappedThen(head, then) => head.next().or_else(|| then.next().copied()),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            EntriesOf::Memory(list) => list.size_hint(),
            EntriesOf::Mapped(run) => run.size_hint(),
            EntriesOf::MemoryThen(head, then) => {
                let n = head.len() + then.len();
                (n, Some(n))
            }
            EntriesOf::MappedThen(head, then) => {
                let (lo, hi) = head.size_hint();
                (lo + then.len(), hi.map(|h| h + then.len()))
            }
        }
    }
    /// A list in memory is counted without a walk.
    fn count(self) -> usize {
        match self.0 {
            EntriesOf::Memory(list) => list.len(),
            EntriesOf::Mapped(run) => run.count(),
            EntriesOf::MemoryThen(head, then) => head.len() + then.len(),
            EntriesOf::MappedThen(head, then) => head.count() + then.len(),
        }
    }
}

/// Which edge directions a traversal follows.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum Direction {
    Outgoing,
    Incoming,
    #[default]
    Both,
}

/// A set of interned ids (relations or labels) as a bitset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IdSet {
    bits: Vec<u64>,
}

impl IdSet {
    pub fn insert(&mut self, id: u32) {
        let word = id as usize / 64;
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= 1 << (id % 64);
    }
    pub fn remove(&mut self, id: u32) {
        if let Some(w) = self.bits.get_mut(id as usize / 64) {
            *w &= !(1 << (id % 64));
        }
    }
    #[inline]
    pub fn contains(&self, id: u32) -> bool {
        self.bits
            .get(id as usize / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// The ids in the set, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, bits)| {
            (0..64u32)
                .filter(move |b| bits & (1 << b) != 0)
                .map(move |b| w as u32 * 64 + b)
        })
    }
}

/// Decay of confidence with world time, resolved for one traversal: the half-life of each
/// interned relation id (`f64::INFINITY`: never decays) and the time the traversal believes at.
/// See `dynamics::decay`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DecayFilter {
    pub now: i64,
    pub half_lives: Vec<f64>,
    /// An edge with a pinned endpoint decays no lower than this (nor above its stored value).
    pub pinned_floor: f32,
}

impl DecayFilter {
    /// The effective confidence of `e`, an entry in the list of node `from`, in `adj`.
    #[inline]
    pub fn effective(&self, from: u32, e: &AdjEntry, adj: &Adjacency) -> f32 {
        let h = self
            .half_lives
            .get(e.relation() as usize)
            .copied()
            .unwrap_or(f64::INFINITY);
        let last_seen = adj.last_seen(e.edge_id());
        if h.is_infinite() || self.now <= last_seen {
            return e.confidence;
        }
        let age = (self.now as f64) - (last_seen as f64);
        let decayed = (e.confidence as f64 * 0.5f64.powf(age / h)) as f32;
        if adj.is_pinned(from) || adj.is_pinned(e.node) {
            decayed.max(e.confidence.min(self.pinned_floor))
        } else {
            decayed
        }
    }
}

/// What a traversal may follow. Filters apply while expanding, so a pruned edge never leads
/// anywhere.
#[derive(Clone, Debug, Default)]
pub struct TraversalFilter {
    /// Edges below this confidence are not followed (effective confidence when `decay` is set).
    pub min_confidence: f32,
    /// Judge `min_confidence` against confidence decayed to `decay.now`.
    pub decay: Option<DecayFilter>,
    /// Never these edges (ids), e.g. those not valid at the traversal's time.
    pub deny_edges: Option<IdSet>,
    /// Only these relations (interned ids), when set.
    pub relations: Option<IdSet>,
    /// Never these relations (interned ids).
    pub deny_relations: Option<IdSet>,
    /// Only into nodes with these labels (interned ids), when set.
    pub labels: Option<IdSet>,
    pub direction: Direction,
}

impl TraversalFilter {
    /// Whether a traversal may follow `e` in `adj`.
    #[inline]
    /// Whether a traversal may follow `e`, an entry in the list of node `from`, in `adj`.
    pub fn admits_entry(&self, from: u32, e: &AdjEntry, adj: &Adjacency) -> bool {
        self.admits(from, e, adj)
    }

    #[inline]
    fn admits(&self, from: u32, e: &AdjEntry, adj: &Adjacency) -> bool {
        if e.confidence < self.min_confidence {
            return false;
        }
        // Decay only lowers confidence, so the stored value is checked first (cheap) and the
        // decayed one only for edges that pass it.
        if self.min_confidence > 0.0 {
            if let Some(d) = &self.decay {
                if d.effective(from, e, adj) < self.min_confidence {
                    return false;
                }
            }
        }
        if let Some(deny) = &self.deny_edges {
            if e.is_bounded() && deny.contains(e.edge) {
                return false;
            }
        }
        match self.direction {
            Direction::Outgoing if e.is_incoming() => return false,
            Direction::Incoming if !e.is_incoming() => return false,
            _ => {}
        }
        if let Some(rels) = &self.relations {
            if !rels.contains(e.relation()) {
                return false;
            }
        }
        if let Some(rels) = &self.deny_relations {
            if rels.contains(e.relation()) {
                return false;
            }
        }
        if let Some(labels) = &self.labels {
            if !labels.contains(adj.labels.get(e.node as usize).unwrap_or(u32::MAX)) {
                return false;
            }
        }
        true
    }
}

/// A node reached by an expansion: how many hops away, and the edge it was first reached by.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Reached {
    pub node: NodeId,
    pub hops: u8,
    pub via: AdjEntry,
    /// The node the `via` edge was followed from.
    pub parent: NodeId,
}

/// String interner for relation and label names (ids are in-memory only; disk keeps names).
#[derive(Clone, Debug, Default)]
pub struct Interner {
    names: Vec<String>,
    /// foldhash: every edge a batch writes interns its relation.
    ids: HashMap<String, u32, foldhash::fast::RandomState>,
}

/// Of `names`, the one `name` (not among them) was most likely meant as: one that differs
/// from it only in case or in whitespace around it, the least in byte order when several do
/// ([`Interner::near_miss`]; the event kinds of `Store::refuse_kind_near_misses`).
pub(crate) fn near_miss_among<'n>(
    name: &str,
    names: impl IntoIterator<Item = &'n str>,
) -> Option<&'n str> {
    let folded = name.trim().to_lowercase();
    names
        .into_iter()
        .filter(|n| n.trim().to_lowercase() == folded)
        .min()
}

impl Interner {
    /// An interner whose ids are the positions of `names`; `None` when a name repeats.
    pub fn from_names(names: Vec<String>) -> Option<Self> {
        let mut ids = HashMap::with_capacity_and_hasher(names.len(), Default::default());
        for (i, n) in names.iter().enumerate() {
            if ids.insert(n.clone(), i as u32).is_some() {
                return None;
            }
        }
        Some(Interner { names, ids })
    }
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
    pub fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
    /// The name of `id`, `None` for an id never given.
    pub fn name_checked(&self, id: u32) -> Option<&str> {
        self.names.get(id as usize).map(String::as_str)
    }
    pub fn len(&self) -> usize {
        self.names.len()
    }
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
    /// The name that `name`, never interned, was most likely meant as: one interned that
    /// differs from it only in case or in whitespace around it (`" OFFERS"`, `offers` for
    /// `OFFERS`), the least in byte order when several do. `None` for a name interned, or
    /// one with no such neighbour.
    pub fn near_miss(&self, name: &str) -> Option<&str> {
        if self.ids.contains_key(name) {
            return None;
        }
        near_miss_among(name, self.names.iter().map(String::as_str))
    }
    /// The set of the ids of `names`; names never interned match nothing.
    pub fn set_of<S: AsRef<str>>(&self, names: &[S]) -> IdSet {
        let mut set = IdSet::default();
        for n in names {
            if let Some(id) = self.get(n.as_ref()) {
                set.insert(id);
            }
        }
        set
    }
}

/// Reusable per-thread traversal state, so an expansion allocates nothing in the steady state.
#[derive(Default)]
struct Scratch {
    /// `stamp[n] == generation` marks `n` as visited in the current traversal.
    stamp: Vec<u32>,
    generation: u32,
    frontier: Vec<u32>,
    next: Vec<u32>,
    /// A part of the list being expanded, decoded (at most [`ROW_CHUNK`] entries).
    row: Vec<AdjEntry>,
}

impl Scratch {
    fn begin(&mut self, nodes: usize) {
        if self.stamp.len() < nodes {
            // Made anew, zeroed by the allocator, not grown: a large zeroed allocation takes
            // pages only as an expansion touches them (grown, all 80 MB at 20M nodes were).
            // With room to grow: a graph that gains a node between questions would make it
            // anew each time.
            self.stamp = vec![0; nodes + nodes / 4];
            self.generation = 0;
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: old stamps could collide with the new generation.
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        self.frontier.clear();
        self.next.clear();
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Where an expansion is: the generation its stamps mark, and the hop it takes.
#[derive(Clone, Copy)]
struct Hop {
    gen: u32,
    hop: u8,
    /// The last hop: the nodes reached are not expanded.
    last: bool,
}

/// Entries of a list an expansion decodes at a time (4 KiB of them, in the first-level cache).
const ROW_CHUNK: usize = 256;

/// Nodes from which an expansion reads ahead of its tests ([`touch_stamps`]): 4 MiB of visit
/// stamps, past a core's second-level cache on the machine this was measured on (1 MiB). With
/// fewer, the stamps are in cache, and the reads ahead and the copy of each list cost more
/// than they save: at 1M edges (200k nodes), three alternating runs of each build, 2-hop p50
/// 2.62-2.73 µs with them against 2.18-2.46, 3-hop filtered 27-28 against 22-23. At 10M edges
/// (2M nodes) 3-hop unfiltered took 164-170 µs against 215-236, the rest within noise.
const READ_AHEAD_NODES: usize = 1 << 20;

/// Reads the visit stamp of each entry's node before an expansion tests any of them. Where the
/// stamps outgrow the cache (a word a node: 80 MB at 20M nodes), each is a miss; these loads,
/// independent of each other and of the decoding, are in flight together, where the test of
/// each entry waited on its own miss behind the decoding of the entries before it. Over the
/// 100M-edge benchmark graph, warm, alternating runs: 2-hop p50 6.0-6.2 µs against 9.8-10.3,
/// 3-hop filtered 62-63 against 122-126. The C floor's plain loop gains nothing so (it was
/// slower with the same reads): its test of an entry is a few instructions, not a decoding.
fn touch_stamps(stamp: &[u32], row: &[AdjEntry]) {
    let mut touched = 0u32;
    for e in row {
        touched ^= stamp.get(e.node as usize).copied().unwrap_or(0);
    }
    std::hint::black_box(touched);
}

/// Adjacency lists of all nodes, plus each node's interned label.
///
/// The lists as built at open sit end to end in one array (compressed sparse rows): node `n`'s
/// entries are `base[offsets[n]..offsets[n + 1]]`. Entries appended to an old node's list
/// afterwards go to `grown` (read after its row, which stays where it is); a list changed in
/// place moves out to `moved` (a map, since such changes after an open touch few old nodes);
/// a node created after the base has its list in `tail` (a list per node, as every node of a
/// store built in this process has). One array instead of a vector per node saves the
/// 24-byte vector header and an allocation per node, and an open fills it with two passes
/// over the edges.
#[derive(Clone, Debug, Default)]
pub struct Adjacency {
    /// The lists as last laid end to end: built in memory, or mapped from the snapshot.
    base: Csr,
    /// Lists of nodes below the base's bound that changed since it was built.
    moved: HashMap<u32, Vec<AdjEntry>, BuildIdHasher>,
    /// Entries copied from `base` into `moved` since the array was built: memory held twice
    /// (the rows stay in `base`), which [`Adjacency::compact_if_fragmented`] bounds.
    copied: usize,
    /// Entries appended since the base was built to the rows of base nodes that have not
    /// moved, by node: such a row reads as its part of the base, then this. A load that
    /// takes each snapshot as its base appends to most nodes' rows; copying each row it
    /// touches out of the base (as a change in place must) had held most of the graph twice.
    grown: Lists,
    /// Lists of nodes from the base's bound up, by `node - base_nodes`: a pointer and a
    /// length each (`crate::lists`), where a vector's header was 24 bytes a node.
    tail: Lists,
    /// World time each edge was last seen, by edge id, for decay (0 when never set).
    last_seen: LastSeen,
    /// Pinned nodes, whose edges decay no lower than a floor.
    pinned: IdSet,
    /// Interned label per node; `u32::MAX` for a retracted or never-created slot. Its length
    /// is the node bound.
    labels: Layered<u32>,
    live_nodes: usize,
    live_edges: usize,
}

/// Hashes node ids for [`Adjacency::moved`]: ids are dense integers the store assigns, never
/// chosen by a caller, so a multiplicative hash spreads them well and needs no defence
/// against flooding (SipHash would cost a traversal more than the lookup it guards).
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;

/// Lists laid end to end (compressed sparse rows): node `n`'s entries are
/// `entries[offsets[n]..offsets[n + 1]]`, for the nodes below `offsets.len() - 1`.
#[derive(Clone, Debug)]
pub(crate) enum Csr {
    /// Built by this process.
    Owned {
        offsets: Vec<u64>,
        entries: Vec<AdjEntry>,
    },
    /// Read in place from the snapshot (`crate::mapped`), the entries a packed column
    /// (`crate::packed`): a row whose offsets lie in a damaged block reads as empty, and an
    /// entry in one is left out.
    Mapped {
        offsets: Offsets<u64>,
        entries: Packed<AdjEntry>,
    },
}

impl Default for Csr {
    fn default() -> Self {
        Csr::Owned {
            offsets: Vec::new(),
            entries: Vec::new(),
        }
    }
}

impl Csr {
    /// Nodes the rows cover.
    fn nodes(&self) -> usize {
        match self {
            Csr::Owned { offsets, .. } => offsets.len(),
            Csr::Mapped { offsets, .. } => offsets.len(),
        }
        .saturating_sub(1)
    }

    /// Entries in all rows.
    pub(crate) fn len(&self) -> usize {
        match self {
            Csr::Owned { entries, .. } => entries.len(),
            Csr::Mapped { entries, .. } => entries.len(),
        }
    }

    /// Row `i` (below [`Csr::nodes`]).
    #[inline]
    fn row(&self, i: usize) -> Entries<'_> {
        match self {
            Csr::Owned { offsets, entries } => {
                Entries::memory(&entries[offsets[i] as usize..offsets[i + 1] as usize])
            }
            Csr::Mapped { offsets, entries } => {
                let Some((start, end)) = offsets.span(i) else {
                    return Entries::empty();
                };
                match entries.run(start as usize..end as usize) {
                    Some(run) => Entries(EntriesOf::Mapped(run)),
                    None => {
                        // Offsets sound at their first read that now span past the entries
                        // (changed under the map since): the row reads as empty, and the
                        // store is told, as for a damaged block.
                        offsets.record_damage();
                        Entries::empty()
                    }
                }
            }
        }
    }

    /// Fetches ahead the offsets of row `i`.
    #[inline]
    fn prefetch_offsets(&self, i: usize) {
        match self {
            Csr::Owned { offsets, .. } => {
                if let Some(o) = offsets.get(i) {
                    crate::mapped::prefetch_read(o);
                }
            }
            Csr::Mapped { offsets, .. } => offsets.prefetch(i),
        }
    }

    /// Fetches ahead where row `i`'s entries begin (its offsets fetched before).
    #[inline]
    fn prefetch_row(&self, i: usize) {
        match self {
            Csr::Owned { offsets, entries } => {
                if let Some(e) = offsets.get(i).and_then(|&o| entries.get(o as usize)) {
                    crate::mapped::prefetch_read(e);
                }
            }
            Csr::Mapped { offsets, entries } => {
                if let Some((start, _)) = offsets.span(i) {
                    entries.prefetch(start as usize);
                }
            }
        }
    }

    /// The length of row `i` (below [`Csr::nodes`]), read from the offsets alone.
    #[inline]
    fn row_len(&self, i: usize) -> usize {
        match self {
            Csr::Owned { offsets, .. } => (offsets[i + 1] - offsets[i]) as usize,
            Csr::Mapped { offsets, .. } => offsets
                .span(i)
                .map_or(0, |(start, end)| end.saturating_sub(start) as usize),
        }
    }

    /// Row `i` to change in place, when the rows are in memory.
    fn row_mut(&mut self, i: usize) -> Option<&mut [AdjEntry]> {
        match self {
            Csr::Owned { offsets, entries } => {
                Some(&mut entries[offsets[i] as usize..offsets[i + 1] as usize])
            }
            Csr::Mapped { .. } => None,
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Csr::Owned { offsets, entries } => {
                offsets.capacity() * 8 + entries.capacity() * std::mem::size_of::<AdjEntry>()
            }
            Csr::Mapped { .. } => 0,
        }
    }

    /// Checks every mapped block now; whether all are sound.
    fn check_all(&self) -> bool {
        match self {
            Csr::Owned { .. } => true,
            Csr::Mapped { offsets, entries } => offsets.check_all() & entries.check_all(),
        }
    }
}

/// Makes room in a list moved out of the base array for `more` entries, sized as the lists
/// made in this process are ([`capacity_for`]): exactly up to 64 entries, then growing by
/// half. (Growing by half throughout had left a sixth of each short list empty;
/// doubling, a third.)
fn reserve_entries(list: &mut Vec<AdjEntry>, more: usize) {
    let need = list.len().saturating_add(more);
    if need > list.capacity() {
        list.reserve_exact(capacity_for(need) - list.len());
    }
}

/// A node's list to change: one moved out of the base array, or one made in this process.
enum ListMut<'a> {
    Moved(&'a mut Vec<AdjEntry>),
    Made(&'a mut Lists, usize),
}

impl<'a> ListMut<'a> {
    /// Appends `entries`, growing the list once for all of them.
    fn append(self, entries: impl ExactSizeIterator<Item = AdjEntry>) {
        match self {
            ListMut::Moved(list) => {
                reserve_entries(list, entries.len());
                list.extend(entries);
            }
            ListMut::Made(lists, i) => lists.append(i, entries),
        }
    }

    /// Removes the entry of edge `edge`, keeping the others' order; whether there was one.
    fn remove_edge(self, edge: EdgeId) -> bool {
        match self {
            ListMut::Moved(list) => match list.iter().position(|e| e.edge == edge.0) {
                Some(at) => {
                    list.remove(at);
                    true
                }
                None => false,
            },
            ListMut::Made(lists, i) => {
                let at = lists
                    .get(i)
                    .and_then(|l| l.iter().position(|e| e.edge == edge.0));
                at.and_then(|at| lists.remove(i, at)).is_some()
            }
        }
    }

    /// Empties the list, giving back what it held.
    fn clear(self) {
        match self {
            ListMut::Moved(list) => *list = Vec::new(),
            ListMut::Made(lists, i) => lists.clear(i),
        }
    }

    fn into_slice(self) -> &'a mut [AdjEntry] {
        match self {
            ListMut::Moved(list) => list,
            ListMut::Made(lists, i) => lists.get_mut(i).unwrap_or_default(),
        }
    }
}

impl Adjacency {
    /// The adjacency read from a snapshot: the rows and last-seen times mapped, each node's
    /// interned label (`u32::MAX` for an empty slot; one per row), the pinned nodes and how
    /// many edges are live.
    pub(crate) fn mapped(
        offsets: Offsets<u64>,
        entries: Packed<AdjEntry>,
        last_seen: Layered<i64>,
        labels: Layered<u32>,
        pinned: IdSet,
        live_nodes: usize,
        live_edges: usize,
    ) -> Self {
        Adjacency {
            live_nodes,
            labels,
            base: Csr::Mapped { offsets, entries },
            last_seen: LastSeen::Vector(last_seen),
            pinned,
            live_edges,
            ..Adjacency::default()
        }
    }

    /// Checks every block read from a map now; whether all are sound.
    pub(crate) fn check_mapped(&self) -> bool {
        self.base.check_all() & self.last_seen.check_all() & self.labels.check_all()
    }

    /// Nodes the base array covers.
    fn base_nodes(&self) -> usize {
        self.base.nodes()
    }

    /// Lays every list end to end again in one array, so that the lists that moved out since
    /// the last build (see [`Adjacency`]) stop costing a vector each. Entries keep their order.
    pub fn compact(&mut self) {
        if self.moved.is_empty()
            && self.grown.is_empty()
            && self.tail.is_empty()
            && self.base_nodes() == self.labels.len()
        {
            return;
        }
        let bound = self.labels.len();
        let mut offsets = Vec::with_capacity(bound + 1);
        offsets.push(0u64);
        let mut total = 0u64;
        for n in 0..bound as u32 {
            total += self.entries(NodeId(n)).count() as u64;
            offsets.push(total);
        }
        let mut entries = Vec::with_capacity(total as usize);
        for n in 0..bound as u32 {
            entries.extend(self.entries(NodeId(n)));
        }
        self.base = Csr::Owned { offsets, entries };
        self.moved = HashMap::default();
        self.grown = Lists::default();
        self.tail = Lists::default();
        self.copied = 0;
    }

    /// Compacts once the rows copied out of the array since it was built exceed half of it,
    /// so that a store written to for months after an open holds its rows at most one and a
    /// half times over. Each compaction costs a pass over the entries, paid for by the writes
    /// that copied as many.
    pub fn compact_if_fragmented(&mut self) {
        if self.copied > self.base.len() / 2 + 4096 {
            self.compact();
        }
    }

    /// The list of `node` to change, moved out of the base array first if it is there.
    fn list_mut(&mut self, node: NodeId) -> ListMut<'_> {
        let i = node.0 as usize;
        let base_nodes = self.base_nodes();
        if i >= base_nodes {
            let t = i - base_nodes;
            self.tail.grow_to(t + 1);
            return ListMut::Made(&mut self.tail, t);
        }
        let (base, copied, grown) = (&self.base, &mut self.copied, &mut self.grown);
        ListMut::Moved(self.moved.entry(node.0).or_insert_with(|| {
            let appended = grown.list_len(i).unwrap_or(0);
            // Sized from the offsets: a decoded row's length is not known before it is read,
            // and a vector grown by doubling would hold up to twice the row.
            let mut row = Vec::with_capacity(base.row_len(i) + appended);
            row.extend(base.row(i));
            *copied += row.len();
            row.extend_from_slice(grown.get(i).unwrap_or_default());
            grown.clear(i);
            row
        }))
    }

    /// The list of `node` to append to: a row of the base array that has not moved takes
    /// its new entries in [`Adjacency::grown`], and stays where it is.
    fn list_to_append(&mut self, node: NodeId) -> ListMut<'_> {
        let i = node.0 as usize;
        if i < self.base_nodes() && !self.moved.contains_key(&node.0) {
            self.grown.grow_to(i + 1);
            return ListMut::Made(&mut self.grown, i);
        }
        self.list_mut(node)
    }

    /// Makes room for node ids below `bound`.
    pub fn reserve_nodes(&mut self, bound: usize) {
        self.labels.grow(bound, u32::MAX);
    }

    pub fn set_node(&mut self, node: NodeId, label: u32) {
        self.reserve_nodes(node.0 as usize + 1);
        let i = node.0 as usize;
        if self.labels.get(i) == Some(u32::MAX) {
            self.live_nodes += 1;
        }
        self.labels.set(i, label, u32::MAX);
    }

    /// Removes a node slot; its edges must have been removed first.
    pub fn remove_node(&mut self, node: NodeId) {
        let i = node.0 as usize;
        if let Some(l) = self.labels.get(i) {
            if l != u32::MAX {
                self.live_nodes = self.live_nodes.saturating_sub(1);
            }
            self.labels.set(i, u32::MAX, u32::MAX);
            self.list_mut(node).clear();
        }
    }

    pub fn contains_node(&self, node: NodeId) -> bool {
        self.labels
            .get(node.0 as usize)
            .is_some_and(|l| l != u32::MAX)
    }

    pub fn label_of(&self, node: NodeId) -> Option<u32> {
        self.labels.get(node.0 as usize).filter(|l| *l != u32::MAX)
    }

    /// Adds both sides of an edge.
    pub fn add_edge(&mut self, edge: EdgeId, from: NodeId, to: NodeId, relation: u32, conf: f32) {
        self.add_edge_with_bounds(edge, from, to, relation, conf, false);
    }

    /// Adds both sides of an edge, marking whether it has a validity bound.
    pub fn add_edge_with_bounds(
        &mut self,
        edge: EdgeId,
        from: NodeId,
        to: NodeId,
        relation: u32,
        conf: f32,
        bounded: bool,
    ) {
        self.reserve_nodes(from.0.max(to.0) as usize + 1);
        let (out, inc) = AdjEntry::pair(edge, from, to, relation, conf, bounded);
        self.list_to_append(from).append(std::iter::once(out));
        self.list_to_append(to).append(std::iter::once(inc));
        self.live_edges += 1;
    }

    /// Adds the sides of many edges at once: each edge's outgoing entry under its `from` and
    /// its incoming one under its `to` (what [`AdjEntry`] pairs as [`Adjacency::add_edge`]
    /// makes them). Each list is grown once, and the lists are visited in node order rather
    /// than at random: a bulk batch's two pushes per edge into millions of lists were the
    /// part of a commit that grew with the graph (a cache miss for the list's header and one
    /// for its end, each). A list takes its entries in the order given.
    ///
    /// The store gives new edges in increasing id order, ids are never reused, a removal
    /// keeps the order and a change is made in place, so every list is in the order of its
    /// edge ids however the state was built: live batch by batch, from a snapshot, or by a
    /// replay in other chunks. A traversal, which takes the first path it meets to a node
    /// (and reports its parent and edge), then answers the same whichever way the store was
    /// opened.
    pub fn add_sides(&mut self, sides: &[(NodeId, AdjEntry)]) {
        let Some(bound) = sides.iter().map(|(n, _)| n.0).max() else {
            return;
        };
        self.reserve_nodes(bound as usize + 1);
        self.live_edges += sides.len() / 2;
        // Each side's node and position as one word, sorted: entries of one list keep the
        // order given (the position breaks the tie). A bulk batch's 200,000 sides so take 4 ms
        // where a stable sort of the 20-byte sides took 10 (on the 2-core machine these were
        // measured on). A position fits the word's low half within a chunk of `u32::MAX`
        // sides, and chunks taken in turn append to each list in the order given too.
        for chunk in sides.chunks(u32::MAX as usize) {
            let mut order: Vec<u64> = (0..u32::MAX)
                .zip(chunk)
                .map(|(i, (n, _))| u64::from(n.0) << 32 | u64::from(i))
                .collect();
            order.sort_unstable();
            for run in order.chunk_by(|a, b| a >> 32 == b >> 32) {
                let node = NodeId((run[0] >> 32) as u32);
                self.list_to_append(node)
                    .append(run.iter().map(|&w| chunk[(w as u32) as usize].1));
            }
        }
    }

    /// The two sides of an edge, as [`Adjacency::add_sides`] takes them.
    pub fn sides(
        edge: EdgeId,
        from: NodeId,
        to: NodeId,
        relation: u32,
        conf: f32,
        bounded: bool,
    ) -> [(NodeId, AdjEntry); 2] {
        let (out, inc) = AdjEntry::pair(edge, from, to, relation, conf, bounded);
        [(from, out), (to, inc)]
    }

    /// Removes both sides of an edge.
    pub fn remove_edge(&mut self, edge: EdgeId, from: NodeId, to: NodeId) {
        let mut removed = false;
        for n in [from, to] {
            if !self.entries(n).any(|e| e.edge == edge.0) {
                continue;
            }
            // Not a swap with the last: a list stays in the order of its edge ids (see
            // [`Adjacency::add_sides`]).
            removed |= self.list_mut(n).remove_edge(edge);
        }
        if removed {
            self.live_edges = self.live_edges.saturating_sub(1);
        }
    }

    /// Updates the confidence stored on both sides of an edge, in place (a list in the base
    /// array stays there: its length does not change).
    pub fn set_confidence(&mut self, edge: EdgeId, from: NodeId, to: NodeId, conf: f32) {
        self.change_sides(edge, from, to, |e| e.confidence = conf);
    }

    /// Updates what both sides of a live edge carry that an assertion can change: its
    /// confidence, and whether it has a validity bound. In place: a list keeps its order, and
    /// one in the base array stays there unless the array is mapped (read-only).
    pub fn update_edge(
        &mut self,
        edge: EdgeId,
        from: NodeId,
        to: NodeId,
        conf: f32,
        bounded: bool,
    ) {
        self.change_sides(edge, from, to, |e| {
            e.confidence = conf;
            if bounded {
                e.rel_dir |= BOUNDED;
            } else {
                e.rel_dir &= !BOUNDED;
            }
        });
    }

    /// Applies `change` to both sides of an edge, in place.
    fn change_sides(
        &mut self,
        edge: EdgeId,
        from: NodeId,
        to: NodeId,
        change: impl Fn(&mut AdjEntry),
    ) {
        for n in [from, to] {
            let i = n.0 as usize;
            let base_nodes = self.base_nodes();
            let list: &mut [AdjEntry] = if i >= base_nodes {
                match self.tail.get_mut(i - base_nodes) {
                    Some(l) => l,
                    None => continue,
                }
            } else if self.moved.contains_key(&n.0) || self.base.row_mut(i).is_none() {
                // A mapped row is read-only: it moves out to change.
                if !self.entries(n).any(|e| e.edge == edge.0) {
                    continue;
                }
                self.list_mut(n).into_slice()
            } else {
                // An owned row changes in place, and so does what was appended to it.
                if let Some(appended) = self.grown.get_mut(i) {
                    appended
                        .iter_mut()
                        .filter(|e| e.edge == edge.0)
                        .for_each(&change);
                }
                match self.base.row_mut(i) {
                    Some(l) => l,
                    None => continue,
                }
            };
            list.iter_mut()
                .filter(|e| e.edge == edge.0)
                .for_each(&change);
        }
    }

    /// The live edge `from -relation-> to`, if any, found in the shorter of the two endpoint
    /// lists (an edge between a hub and a leaf costs the leaf's list, not the hub's).
    pub fn find_edge(&self, from: NodeId, relation: u32, to: NodeId) -> Option<EdgeId> {
        let (list, other, incoming) = if self.reads_list_of_to(from, to) {
            (self.entries(to), from, true)
        } else {
            (self.entries(from), to, false)
        };
        list.into_iter()
            .find(|e| e.node == other.0 && e.relation() == relation && e.is_incoming() == incoming)
            .map(|e| e.edge_id())
    }

    /// The entries of a node (outgoing and incoming), in the order of their edge ids.
    #[inline]
    pub fn entries(&self, node: NodeId) -> Entries<'_> {
        let i = node.0 as usize;
        let base_nodes = self.base_nodes();
        if i >= base_nodes {
            return self
                .tail
                .get(i - base_nodes)
                .map_or_else(Entries::empty, Entries::memory);
        }
        if !self.moved.is_empty() {
            if let Some(l) = self.moved.get(&node.0) {
                return Entries::memory(l);
            }
        }
        let row = self.base.row(i);
        match self.grown.get(i) {
            Some(appended) => row.then(appended),
            None => row,
        }
    }

    /// Fetches ahead what [`Adjacency::degree`] of `node` reads: a step of a batch's edge
    /// lookups, which would otherwise wait on memory one after the other (see
    /// `store::key_hints_of`).
    #[inline]
    pub fn prefetch_degree(&self, node: NodeId) {
        let i = node.0 as usize;
        let base_nodes = self.base_nodes();
        if i >= base_nodes {
            self.tail.prefetch_len(i - base_nodes);
            return;
        }
        self.base.prefetch_offsets(i);
        self.grown.prefetch_len(i);
    }

    /// Fetches ahead the first entries [`Adjacency::entries`] of `node` reads (after
    /// [`Adjacency::prefetch_degree`], whose reads this one makes).
    #[inline]
    pub fn prefetch_entries(&self, node: NodeId) {
        let i = node.0 as usize;
        let base_nodes = self.base_nodes();
        if i >= base_nodes {
            self.tail.prefetch_list(i - base_nodes);
            return;
        }
        self.base.prefetch_row(i);
        self.grown.prefetch_list(i);
    }

    /// Whether [`Adjacency::find_edge`] reads the list of `to`, the shorter, rather than
    /// that of `from`.
    #[inline]
    fn reads_list_of_to(&self, from: NodeId, to: NodeId) -> bool {
        self.degree(to) < self.degree(from)
    }

    /// The node of the two whose list [`Adjacency::find_edge`] reads: the shorter.
    #[inline]
    pub fn shorter_list(&self, from: NodeId, to: NodeId) -> NodeId {
        if self.reads_list_of_to(from, to) {
            to
        } else {
            from
        }
    }

    /// How many entries (outgoing and incoming) the list of `node` holds, read without the
    /// list: a PageRank push asks it of every neighbour it reaches, and a list read from the
    /// snapshot costs a check of its block where its length costs none.
    #[inline]
    pub fn degree(&self, node: NodeId) -> usize {
        let i = node.0 as usize;
        let base_nodes = self.base_nodes();
        if i >= base_nodes {
            return self.tail.list_len(i - base_nodes).unwrap_or(0);
        }
        if !self.moved.is_empty() {
            if let Some(l) = self.moved.get(&node.0) {
                return l.len();
            }
        }
        self.base.row_len(i) + self.grown.list_len(i).unwrap_or(0)
    }

    /// Upper bound of node ids.
    pub fn node_bound(&self) -> usize {
        self.labels.len()
    }
    pub fn node_count(&self) -> usize {
        self.live_nodes
    }
    pub fn edge_count(&self) -> usize {
        self.live_edges
    }

    /// Heap bytes held by the adjacency (lists and labels), for memory reports.
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<AdjEntry>();
        let list = std::mem::size_of::<Vec<AdjEntry>>();
        self.base.heap_bytes()
            // A map slot: the id, the list header and a control byte.
            + self.moved.capacity() * (4 + list + 1)
            + self.moved.values().map(|l| l.capacity() * entry).sum::<usize>()
            + self.grown.heap_bytes()
            + self.tail.heap_bytes()
            + self.labels.heap_bytes()
            + self.last_seen.heap_bytes()
    }

    /// Records when edge `edge` was last seen (the store calls this for every edge it puts).
    pub fn set_last_seen(&mut self, edge: EdgeId, ts: i64) {
        self.last_seen.set(edge.0 as usize, ts);
    }

    /// Marks node `node` pinned or not.
    pub fn set_pinned(&mut self, node: NodeId, pinned: bool) {
        if pinned {
            self.pinned.insert(node.0);
        } else {
            self.pinned.remove(node.0);
        }
    }

    #[inline]
    pub fn is_pinned(&self, node: u32) -> bool {
        self.pinned.contains(node)
    }

    /// The pinned nodes, in id order.
    pub fn pinned_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.pinned.iter().map(NodeId)
    }

    /// When edge `edge` was last seen (0 when never recorded).
    #[inline]
    pub fn last_seen(&self, edge: EdgeId) -> i64 {
        self.last_seen.get(edge.0 as usize).unwrap_or(0)
    }

    /// Breadth-first expansion up to `depth` hops from `start`, calling `visit` once for every
    /// distinct node reached (not `start` itself), nearest first.
    pub fn expand_with(
        &self,
        start: NodeId,
        depth: u8,
        filter: &TraversalFilter,
        visit: impl FnMut(Reached),
    ) {
        let read_ahead = self.labels.len() >= READ_AHEAD_NODES;
        self.expand(start, depth, filter, read_ahead, visit);
    }

    /// [`Adjacency::expand_with`], reading ahead of its tests or not (see
    /// [`READ_AHEAD_NODES`]); what it reaches is the same either way.
    fn expand(
        &self,
        start: NodeId,
        depth: u8,
        filter: &TraversalFilter,
        read_ahead: bool,
        mut visit: impl FnMut(Reached),
    ) {
        if !self.contains_node(start) || depth == 0 {
            return;
        }
        SCRATCH.with(|cell| {
            let mut s = cell.borrow_mut();
            let s = &mut *s;
            s.begin(self.labels.len());
            let gen = s.generation;
            s.stamp[start.0 as usize] = gen;
            s.frontier.push(start.0);
            let mut row = std::mem::take(&mut s.row);
            for hop in 1..=depth {
                let last = hop == depth;
                let at = Hop { gen, hop, last };
                if read_ahead {
                    self.touch_lists(&s.frontier);
                }
                for i in 0..s.frontier.len() {
                    let from = s.frontier[i];
                    let mut entries = self.entries(NodeId(from));
                    if !read_ahead {
                        for e in entries {
                            self.reach(s, at, filter, from, e, &mut visit);
                        }
                        continue;
                    }
                    loop {
                        row.clear();
                        row.extend(entries.by_ref().take(ROW_CHUNK));
                        if row.is_empty() {
                            break;
                        }
                        touch_stamps(&s.stamp, &row);
                        for &e in &row {
                            self.reach(s, at, filter, from, e, &mut visit);
                        }
                    }
                }
                std::mem::swap(&mut s.frontier, &mut s.next);
                s.next.clear();
                if s.frontier.is_empty() {
                    break;
                }
            }
            s.row = row;
        });
    }

    /// One entry of a list an expansion reads: its node is reached, unless it was before or
    /// the filter refuses the entry.
    #[inline(always)]
    fn reach(
        &self,
        s: &mut Scratch,
        at: Hop,
        filter: &TraversalFilter,
        from: u32,
        e: AdjEntry,
        visit: &mut impl FnMut(Reached),
    ) {
        let stamp = &mut s.stamp[e.node as usize];
        if *stamp == at.gen || !filter.admits(from, &e, self) {
            return;
        }
        *stamp = at.gen;
        if !at.last {
            s.next.push(e.node);
        }
        visit(Reached {
            node: NodeId(e.node),
            hops: at.hop,
            via: e,
            parent: NodeId(from),
        });
    }

    /// Reads the length of each of `nodes`' lists, for its memory: where a node's list starts
    /// is a cache miss of its own, and these loads, independent of each other, are in flight
    /// together, where an expansion meets each in turn behind the last list's work.
    fn touch_lists(&self, nodes: &[u32]) {
        let mut lens = 0usize;
        for &n in nodes {
            lens ^= self.degree(NodeId(n));
        }
        std::hint::black_box(lens);
    }

    /// The distinct nodes within `depth` hops of `start` (not `start`), nearest first.
    pub fn khop(&self, start: NodeId, depth: u8, filter: &TraversalFilter) -> Vec<NodeId> {
        let mut out = Vec::new();
        self.expand_with(start, depth, filter, |r| out.push(r.node));
        out
    }

    /// How many distinct nodes lie within `depth` hops of `start` (not counting `start`).
    pub fn khop_count(&self, start: NodeId, depth: u8, filter: &TraversalFilter) -> usize {
        let mut n = 0;
        self.expand_with(start, depth, filter, |_| n += 1);
        n
    }
}

// --- petgraph integration -------------------------------------------------------------------
//
// petgraph's algorithms see the adjacency as a directed multigraph in which every edge can be
// walked both ways: `neighbors`/`edges` of a node yield its outgoing and incoming entries, with
// `source` the node itself and `target` the other end.

impl GraphBase for Adjacency {
    type NodeId = NodeId;
    type EdgeId = EdgeId;
}

impl Data for Adjacency {
    type NodeWeight = ();
    type EdgeWeight = AdjEntry;
}

/// An adjacency entry seen from one of its endpoints, for petgraph: a copy of the entry (a
/// list read from the snapshot is decoded, not borrowed), tied to the adjacency it came from.
#[derive(Copy, Clone, Debug)]
pub struct AdjEdgeRef<'a> {
    source: NodeId,
    entry: AdjEntry,
    _of: std::marker::PhantomData<&'a Adjacency>,
}

impl<'a> EdgeRef for AdjEdgeRef<'a> {
    type NodeId = NodeId;
    type EdgeId = EdgeId;
    type Weight = AdjEntry;
    fn source(&self) -> NodeId {
        self.source
    }
    fn target(&self) -> NodeId {
        NodeId(self.entry.node)
    }
    fn weight(&self) -> &AdjEntry {
        &self.entry
    }
    fn id(&self) -> EdgeId {
        EdgeId(self.entry.edge)
    }
}

impl<'a> IntoNeighbors for &'a Adjacency {
    type Neighbors = Box<dyn Iterator<Item = NodeId> + 'a>;
    fn neighbors(self, a: NodeId) -> Self::Neighbors {
        Box::new(self.entries(a).map(|e| NodeId(e.node)))
    }
}

impl<'a> IntoEdgeReferences for &'a Adjacency {
    type EdgeRef = AdjEdgeRef<'a>;
    type EdgeReferences = Box<dyn Iterator<Item = AdjEdgeRef<'a>> + 'a>;
    /// Every edge once, from its source.
    fn edge_references(self) -> Self::EdgeReferences {
        Box::new((0..self.node_bound() as u32).flat_map(move |n| {
            self.entries(NodeId(n))
                .filter(|e| !e.is_incoming())
                .map(move |entry| AdjEdgeRef {
                    source: NodeId(n),
                    entry,
                    _of: std::marker::PhantomData,
                })
        }))
    }
}

impl<'a> IntoEdges for &'a Adjacency {
    type Edges = Box<dyn Iterator<Item = AdjEdgeRef<'a>> + 'a>;
    fn edges(self, a: NodeId) -> Self::Edges {
        Box::new(self.entries(a).map(move |entry| AdjEdgeRef {
            source: a,
            entry,
            _of: std::marker::PhantomData,
        }))
    }
}

impl NodeIndexable for Adjacency {
    fn node_bound(&self) -> usize {
        self.labels.len()
    }
    fn to_index(&self, a: NodeId) -> usize {
        a.0 as usize
    }
    fn from_index(&self, i: usize) -> NodeId {
        NodeId(i as u32)
    }
}

impl NodeCount for Adjacency {
    fn node_count(&self) -> usize {
        self.live_nodes
    }
}

impl Visitable for Adjacency {
    type Map = HashSet<NodeId>;
    fn visit_map(&self) -> HashSet<NodeId> {
        HashSet::new()
    }
    fn reset_map(&self, map: &mut HashSet<NodeId>) {
        map.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lists of `n` nodes (label 0) holding `edges` as `(edge, from, to, relation,
    /// confidence)`, laid end to end as an open lays them.
    fn laid_out(n: u32, edges: impl Iterator<Item = (u32, u32, u32, u32, f32)>) -> Adjacency {
        let mut g = Adjacency::default();
        for i in 0..n {
            g.set_node(NodeId(i), 0);
        }
        for (e, a, b, r, c) in edges {
            g.add_edge(EdgeId(e), NodeId(a), NodeId(b), r, c);
        }
        g.compact();
        g
    }

    /// Each list takes a batch's sides in the order given, whatever the order of the nodes:
    /// a self-loop's outgoing side before its incoming one, and a node's sides in the order
    /// of their edges, as a stable grouping of the batch by node gives them.
    #[test]
    fn a_batch_of_sides_reaches_each_list_in_the_order_given() {
        let mut g = Adjacency::default();
        let mut expected: Vec<Vec<AdjEntry>> = vec![Vec::new(); 50];
        for n in 0..50 {
            g.set_node(NodeId(n), 0);
        }
        let mut edge = 0;
        for batch in 0..4u32 {
            let mut sides = Vec::new();
            for k in 0..300u32 {
                // Scrambled ends, some repeated within the batch, and self-loops.
                let from = (k * 17 + batch * 5) % 50;
                let to = if k % 11 == 0 { from } else { (k * 31 + 7) % 50 };
                let pair = Adjacency::sides(
                    EdgeId(edge),
                    NodeId(from),
                    NodeId(to),
                    k % 3,
                    (k % 10) as f32 / 10.0,
                    k % 7 == 0,
                );
                for (node, entry) in pair {
                    expected[node.0 as usize].push(entry);
                    sides.push((node, entry));
                }
                edge += 1;
            }
            g.add_sides(&sides);
        }
        for n in 0..50u32 {
            let got: Vec<AdjEntry> = g.entries(NodeId(n)).collect();
            assert_eq!(got, expected[n as usize], "node {n}");
        }
        assert_eq!(g.edge_count(), 1_200);
    }

    /// A bulk load's lists, grown a batch at a time, hold what they need while short and at
    /// most half again their entries when long (doubling held up to twice): 1,000 lists of 5
    /// entries, one entry a batch, take capacity 5 each, where growing by half took 6 and
    /// doubling 8.
    #[test]
    fn lists_grown_batch_by_batch_hold_what_they_need_while_short() {
        let mut g = Adjacency::default();
        for i in 0..1_001 {
            g.set_node(NodeId(i), 0);
        }
        let mut edge = 0;
        for _ in 0..5 {
            let mut sides = Vec::new();
            for n in 1..1_001 {
                let [out, inc] =
                    Adjacency::sides(EdgeId(edge), NodeId(n), NodeId(0), 0, 1.0, false);
                sides.push(out);
                sides.push(inc);
                edge += 1;
            }
            g.add_sides(&sides);
        }
        let entry = std::mem::size_of::<AdjEntry>();
        let small: usize = (1..1_001).map(|i| g.tail.capacity(i)).sum();
        assert!((1..1_001).all(|i| g.tail.list_len(i) == Some(5)));
        assert_eq!(small, 1_000 * 5, "{} bytes of entries", small * entry);
        // The hub's list of 5,000, grown by half each batch, not doubled past it.
        assert_eq!(g.tail.list_len(0), Some(5_000));
        assert!(
            g.tail.capacity(0) <= 5_000 * 3 / 2,
            "{}",
            g.tail.capacity(0)
        );
        // A list costs its entries and 12 bytes of header: no vector of 24.
        let lists = 1_001 * 12;
        assert!(g.tail.heap_bytes() <= (small + g.tail.capacity(0)) * entry + 2 * lists);
    }

    /// `g` (laid out) with its lists and last-seen times read from a map of a file, as an
    /// open from a snapshot reads them.
    fn mapped_copy(g: &Adjacency) -> Adjacency {
        use crate::mapped::{
            block_crcs, bytes_of, map_of, Damage, Layered, Limits, Offsets, Section,
        };
        let Csr::Owned { offsets, entries } = &g.base else {
            panic!("not laid out")
        };
        let file = bytes_of(offsets).to_vec();
        let seen: Vec<i64> = (0..64).map(|e| g.last_seen(EdgeId(e))).collect();
        let map = map_of(&file);
        let limits = Limits {
            nodes: g.node_bound() as u32,
            edges: 1 << 20,
            relations: 1 << 20,
            labels: 1,
            entries: entries.len() as u64,
            record_bytes: 0,
            detail_bytes: 0,
        };
        let damage = std::sync::Arc::new(Damage::default());
        fn section<T: crate::mapped::Plain>(
            map: &std::sync::Arc<memmap2::Mmap>,
            start: usize,
            items: &[T],
            limits: Limits,
            damage: &std::sync::Arc<Damage>,
        ) -> Section<T> {
            let crcs = block_crcs(items.iter().copied());
            Section::new(
                map.clone(),
                start,
                items.len(),
                crcs,
                limits,
                damage.clone(),
                "t",
            )
            .unwrap()
        }
        let offsets = Offsets::Wide(section(&map, 0, offsets, limits, &damage));
        let entries = crate::packed::mapped_column(entries, limits, damage.clone());
        let seen = crate::packed::mapped_column(&seen, limits, damage.clone());
        let labels = (0..g.node_bound() as u32)
            .map(|n| g.label_of(NodeId(n)).unwrap_or(u32::MAX))
            .collect();
        Adjacency::mapped(
            offsets,
            entries,
            Layered::mapped(seen),
            Layered::Owned(labels),
            g.pinned.clone(),
            g.node_count(),
            g.edge_count(),
        )
    }

    /// An entry packs into its fields and back with its relation, direction and bounded flag;
    /// a field wider than its type reads as an id out of any bounds.
    #[test]
    fn an_entry_packs_and_unpacks_with_its_flags() {
        for (incoming, bounded) in [(false, false), (true, false), (false, true), (true, true)] {
            let (out, inc) = AdjEntry::pair(
                EdgeId(7),
                NodeId(3),
                NodeId(9),
                (1 << 30) - 1,
                0.25,
                bounded,
            );
            let e = if incoming { inc } else { out };
            let back = AdjEntry::from_fields(&e.to_fields());
            assert_eq!(back, e);
            assert_eq!(
                (back.is_incoming(), back.is_bounded(), back.relation()),
                (incoming, bounded, (1 << 30) - 1)
            );
        }
        let limits = Limits {
            nodes: 10,
            edges: 10,
            relations: 10,
            ..Limits::default()
        };
        let good = AdjEntry::new(NodeId(1), EdgeId(2), 3, 0.5, false).to_fields();
        assert!(AdjEntry::from_fields(&good).valid(&limits));
        for k in 0..4 {
            let mut wide = good;
            wide[k] += 1 << 34;
            let e = AdjEntry::from_fields(&wide);
            assert!(k == 2 || !e.valid(&limits), "field {k}: {e:?}");
        }
    }

    fn chain() -> Adjacency {
        // 0 -a-> 1 -b-> 2 -a-> 3, plus a weak 0 -a-> 4
        let mut g = Adjacency::default();
        for n in 0..5 {
            g.set_node(NodeId(n), 0);
        }
        g.add_edge(EdgeId(0), NodeId(0), NodeId(1), 0, 0.9);
        g.add_edge(EdgeId(1), NodeId(1), NodeId(2), 1, 0.9);
        g.add_edge(EdgeId(2), NodeId(2), NodeId(3), 0, 0.9);
        g.add_edge(EdgeId(3), NodeId(0), NodeId(4), 0, 0.1);
        g
    }

    #[test]
    fn khop_respects_depth_and_filters() {
        let g = chain();
        let all = TraversalFilter::default();
        assert_eq!(g.khop(NodeId(0), 1, &all), vec![NodeId(1), NodeId(4)]);
        assert_eq!(g.khop_count(NodeId(0), 3, &all), 4);
        let strong = TraversalFilter {
            min_confidence: 0.5,
            ..Default::default()
        };
        assert_eq!(g.khop_count(NodeId(0), 3, &strong), 3);
        let mut only_a = IdSet::default();
        only_a.insert(0);
        let rel = TraversalFilter {
            relations: Some(only_a),
            ..Default::default()
        };
        // relation b is pruned during expansion, so 2 and 3 are unreachable
        assert_eq!(g.khop(NodeId(0), 3, &rel), vec![NodeId(1), NodeId(4)]);
        // both directions by default, outgoing only when asked
        assert_eq!(g.khop(NodeId(3), 1, &all), vec![NodeId(2)]);
        let out = TraversalFilter {
            direction: Direction::Outgoing,
            ..Default::default()
        };
        assert!(g.khop(NodeId(3), 1, &out).is_empty());
    }

    #[test]
    fn remove_edge_and_petgraph_dijkstra() {
        let mut g = chain();
        let d = petgraph::algo::dijkstra(&g, NodeId(0), None, |_| 1u32);
        assert_eq!(d[&NodeId(3)], 3);
        g.remove_edge(EdgeId(1), NodeId(1), NodeId(2));
        assert_eq!(g.edge_count(), 3);
        let d = petgraph::algo::dijkstra(&g, NodeId(0), None, |_| 1u32);
        assert!(!d.contains_key(&NodeId(3)));
    }
    #[test]
    fn rows_copied_out_by_writes_are_laid_back_into_one_array() {
        // A chain of 20,000 nodes: 39,998 entries in the array.
        let n = 20_000u32;
        let chain = (1..n).map(|i| (i - 1, i - 1, i, 0, 0.5));
        let mut g = mapped_copy(&laid_out(n, chain));
        // Each change in place to a mapped row copies it out (an edge added is kept after
        // the row, not copied with it); the copies are bounded.
        let mut compactions = 0;
        for i in 0..n {
            g.set_node(NodeId(n + i), 0);
            g.add_edge(EdgeId(n + i), NodeId(i), NodeId(n + i), 1, 0.9);
            if i + 1 < n {
                g.set_confidence(EdgeId(i), NodeId(i), NodeId(i + 1), 0.75);
            }
            let before = g.moved.len();
            g.compact_if_fragmented();
            if before > 0 && g.moved.is_empty() {
                compactions += 1;
            }
            assert!(
                g.copied <= g.base.len() / 2 + 4096 + 2,
                "{} copied",
                g.copied
            );
        }
        assert!(compactions >= 1);
        assert_eq!(g.edge_count(), (n - 1 + n) as usize);
        for i in [0, 1, n / 2, n - 1] {
            let mut got: Vec<u32> = g.entries(NodeId(i)).map(|e| e.node).collect();
            got.sort_unstable();
            let mut want: Vec<u32> = [i.checked_sub(1), (i + 1 < n).then_some(i + 1), Some(n + i)]
                .into_iter()
                .flatten()
                .collect();
            want.sort_unstable();
            assert_eq!(got, want, "node {i}");
        }
        let changed = g
            .entries(NodeId(7))
            .filter(|e| e.confidence == 0.75)
            .count();
        assert_eq!(changed, 2, "edges 6 and 7, each changed once");
    }

    /// An expansion over many nodes decodes a list in parts and reads ahead of its tests
    /// (`touch_stamps`); over few it does not. Either way it must reach what the plain loop
    /// over each list reaches, in the same order, by the same parent and edge, with lists
    /// longer than a part (a hub of hundreds of entries), on lists in memory and mapped from
    /// a file.
    mod an_expansion_is_a_plain_breadth_first_search {
        use super::*;
        use proptest::prelude::*;

        fn plain(
            g: &Adjacency,
            start: NodeId,
            depth: u8,
            filter: &TraversalFilter,
        ) -> Vec<(u32, u8, u32, u32)> {
            let mut out = Vec::new();
            if !g.contains_node(start) || depth == 0 {
                return out;
            }
            let mut seen = vec![false; g.node_bound()];
            seen[start.0 as usize] = true;
            let mut frontier = vec![start.0];
            for hop in 1..=depth {
                let mut next = Vec::new();
                for &from in &frontier {
                    for e in g.entries(NodeId(from)) {
                        if seen[e.node as usize] || !filter.admits(from, &e, g) {
                            continue;
                        }
                        seen[e.node as usize] = true;
                        next.push(e.node);
                        out.push((e.node, hop, e.edge, from));
                    }
                }
                frontier = next;
            }
            out
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]
            #[test]
            fn on_any_graph(
                // Ends below 4 are hubs: one edge in two touches one.
                edges in proptest::collection::vec(
                    (0..4u32, 0..60u32, 0..3u32, 0..3u8, any::<bool>()),
                    0..1500,
                ),
                start in 0..60u32,
                depth in 0..5u8,
                which in 0..3u8,
            ) {
                let g = laid_out(
                    60,
                    edges.iter().enumerate().map(|(i, &(hub, other, r, c, out))| {
                        let (a, b) = if out { (hub, other) } else { (other, hub) };
                        (i as u32, a, b, r, [0.2, 0.5, 0.9][c as usize])
                    }),
                );
                let filter = match which {
                    0 => TraversalFilter::default(),
                    1 => TraversalFilter { min_confidence: 0.5, ..Default::default() },
                    _ => TraversalFilter { direction: Direction::Outgoing, ..Default::default() },
                };
                for g in [g.clone(), mapped_copy(&g)] {
                    for read_ahead in [false, true] {
                        let mut reached = Vec::new();
                        g.expand(NodeId(start), depth, &filter, read_ahead, |r| {
                            reached.push((r.node.0, r.hops, r.via.edge, r.parent.0));
                        });
                        prop_assert_eq!(&reached, &plain(&g, NodeId(start), depth, &filter));
                    }
                }
            }
        }
    }

    /// A row of the base array that only takes new entries stays where it is: what a batch
    /// appends is held on its own (`Adjacency::grown`), not with a copy of the row. A load
    /// that takes each snapshot as its base appends to most rows, and copying each row it
    /// touched had held most of the graph twice. A change in place still moves the row.
    #[test]
    fn appending_to_the_rows_of_a_base_copies_none_of_them() {
        let built = laid_out(
            1_000,
            (0..20_000u32).map(|e| (e, e % 1_000, (e * 7 + 1) % 1_000, e % 3, 0.5)),
        );
        for mut g in [built.clone(), mapped_copy(&built)] {
            let before = g.heap_bytes();
            let sides: Vec<(NodeId, AdjEntry)> = (20_000..20_500u32)
                .flat_map(|e| {
                    Adjacency::sides(EdgeId(e), NodeId(e % 1_000), NodeId(3), 1, 0.9, false)
                })
                .collect();
            g.add_sides(&sides);
            g.add_edge(EdgeId(20_500), NodeId(3), NodeId(4), 2, 0.25);
            assert!(g.moved.is_empty() && g.copied == 0);
            // The 1,002 entries appended, a header a row, and their rounding up.
            let grew = g.heap_bytes() - before;
            assert!(grew < 1_002 * 16 * 2 + 1_000 * 12 + 4_096, "{grew} bytes");
            // Node 3's row: its 40 entries of the base, then those appended, in id order.
            let ids: Vec<u32> = g.entries(NodeId(3)).map(|e| e.edge).collect();
            // (Edge 20,003 is a loop on node 3: two entries.)
            assert_eq!(ids.len(), 40 + 499 + 2 + 1);
            assert_eq!(g.degree(NodeId(3)), ids.len());
            assert!(ids.windows(2).all(|w| w[0] <= w[1]), "{ids:?}");
            assert_eq!(g.find_edge(NodeId(3), 2, NodeId(4)), Some(EdgeId(20_500)));
            // A change in place moves a mapped row (read-only), its appended entries with it;
            // a row in memory changes where it is.
            g.set_confidence(EdgeId(20_500), NodeId(3), NodeId(4), 0.75);
            let mapped = matches!(g.base, Csr::Mapped { .. });
            assert_eq!(g.moved.len(), if mapped { 2 } else { 0 });
            assert_eq!(
                g.entries(NodeId(3)).map(|e| e.edge).collect::<Vec<_>>(),
                ids
            );
            let changed = g.entries(NodeId(4)).find(|e| e.edge == 20_500);
            assert_eq!(changed.map(|e| e.confidence), Some(0.75));
        }
    }

    /// The lists in one array (from an open or a compaction) and the lists that moved out of
    /// it after writes must read as one adjacency: every sequence of adds, removals,
    /// confidence changes, node removals and compactions gives each node exactly the entries
    /// of its live edges.
    mod one_array_and_moved_lists_read_as_one {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Add(u32, u32, u32),
            Remove(usize),
            Confidence(usize, u8),
            RemoveNode(u32),
            Compact,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (0..12u32, 0..12u32, 0..3u32).prop_map(|(a, b, r)| Op::Add(a, b, r)),
                2 => any::<usize>().prop_map(Op::Remove),
                1 => (any::<usize>(), any::<u8>()).prop_map(|(i, c)| Op::Confidence(i, c)),
                1 => (0..14u32).prop_map(Op::RemoveNode),
                1 => Just(Op::Compact),
            ]
        }

        fn expected(live: &[(u32, u32, u32, u32, f32)], n: u32) -> Vec<(u32, u32, bool, u32)> {
            let mut v: Vec<_> = live
                .iter()
                .flat_map(|&(e, from, to, _, c)| {
                    let mut out = Vec::new();
                    if from == n {
                        out.push((e, to, false, c.to_bits()));
                    }
                    if to == n {
                        out.push((e, from, true, c.to_bits()));
                    }
                    out
                })
                .collect();
            v.sort_unstable();
            v
        }

        fn actual(g: &Adjacency, n: u32) -> Vec<(u32, u32, bool, u32)> {
            let mut v: Vec<_> = g
                .entries(NodeId(n))
                .map(|e| (e.edge, e.node, e.is_incoming(), e.confidence.to_bits()))
                .collect();
            v.sort_unstable();
            v
        }

        proptest! {
            #[test]
            fn after_any_writes(
                initial in proptest::collection::vec((0..10u32, 0..10u32, 0..3u32), 0..30),
                ops in proptest::collection::vec(op(), 0..60),
            ) {
                let mut live: Vec<(u32, u32, u32, u32, f32)> = initial
                    .iter()
                    .enumerate()
                    .map(|(i, &(a, b, r))| (i as u32, a, b, r, 0.5))
                    .collect();
                let built = laid_out(10, live.iter().copied());
                // The same writes on the lists in memory and on the lists mapped from a file.
                let (mut g, mut m) = (built.clone(), mapped_copy(&built));
                let mut nodes: std::collections::BTreeSet<u32> = (0..10).collect();
                let mut next_edge = live.len() as u32;
                for op in ops {
                    match op {
                        Op::Add(a, b, r) => {
                            for n in [a, b] {
                                if nodes.insert(n) {
                                    g.set_node(NodeId(n), 0);
                                    m.set_node(NodeId(n), 0);
                                }
                            }
                            for x in [&mut g, &mut m] {
                                x.add_edge(EdgeId(next_edge), NodeId(a), NodeId(b), r, 0.5);
                            }
                            live.push((next_edge, a, b, r, 0.5));
                            next_edge += 1;
                        }
                        Op::Remove(i) if !live.is_empty() => {
                            let (e, a, b, ..) = live.remove(i % live.len());
                            for x in [&mut g, &mut m] {
                                x.remove_edge(EdgeId(e), NodeId(a), NodeId(b));
                            }
                        }
                        Op::Confidence(i, c) if !live.is_empty() => {
                            let i = i % live.len();
                            let conf = f32::from(c) / 255.0;
                            live[i].4 = conf;
                            let (e, a, b, ..) = live[i];
                            for x in [&mut g, &mut m] {
                                x.set_confidence(EdgeId(e), NodeId(a), NodeId(b), conf);
                            }
                        }
                        Op::RemoveNode(n) if !live.iter().any(|l| l.1 == n || l.2 == n) => {
                            g.remove_node(NodeId(n));
                            m.remove_node(NodeId(n));
                            nodes.remove(&n);
                        }
                        Op::Compact => {
                            g.compact();
                            m.compact();
                        }
                        _ => {}
                    }
                    for x in [&g, &m] {
                        prop_assert_eq!(x.edge_count(), live.len());
                        prop_assert_eq!(x.node_count(), nodes.len());
                        for n in 0..x.node_bound() as u32 + 2 {
                            prop_assert_eq!(actual(x, n), expected(&live, n), "node {}", n);
                            prop_assert_eq!(x.degree(NodeId(n)), x.entries(NodeId(n)).count());
                            // In the order of edge ids (see `Adjacency::add_sides`).
                            let ids: Vec<u32> = x.entries(NodeId(n)).map(|e| e.edge).collect();
                            prop_assert!(ids.windows(2).all(|w| w[0] <= w[1]), "node {} {:?}", n, ids);
                        }
                        for &(e, a, b, r, _) in &live {
                            prop_assert!(x.find_edge(NodeId(a), r, NodeId(b)).is_some(), "edge {}", e);
                        }
                    }
                }
            }
        }
    }
}
