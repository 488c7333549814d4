//! The in-memory adjacency: every live edge appears in the lists of both its endpoints, so the
//! graph is traversable in both directions. Built at open from the edges table and kept current
//! by the store on every commit.
//!
//! Why not a `petgraph::Graph`: its edges form linked lists threaded through one big array, so a
//! k-hop expansion chases a pointer (and usually a cache miss) per edge. Here each node owns one
//! contiguous list of 16-byte entries that carry what a filter needs (relation, direction,
//! confidence), so an expansion reads each list front to back without touching edge records.
//! The petgraph traits are implemented on [`Adjacency`], so petgraph's algorithms (Dijkstra, A*,
//! BFS, ...) run on it directly.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use petgraph::visit::{
    Data, EdgeRef, GraphBase, IntoEdgeReferences, IntoEdges, IntoNeighbors, NodeCount,
    NodeIndexable, Visitable,
};

use crate::model::{EdgeId, NodeId};

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
            if !labels.contains(adj.labels[e.node as usize]) {
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
    ids: HashMap<String, u32>,
}

impl Interner {
    /// An interner whose ids are the positions of `names`; `None` when a name repeats.
    pub fn from_names(names: Vec<String>) -> Option<Self> {
        let mut ids = HashMap::with_capacity(names.len());
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
    pub fn len(&self) -> usize {
        self.names.len()
    }
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
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
}

impl Scratch {
    fn begin(&mut self, nodes: usize) {
        if self.stamp.len() < nodes {
            self.stamp.resize(nodes, 0);
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

/// Adjacency lists of all nodes, plus each node's interned label.
#[derive(Clone, Debug, Default)]
pub struct Adjacency {
    lists: Vec<Vec<AdjEntry>>,
    /// World time each edge was last seen, by edge id, for decay (0 when never set).
    last_seen: Vec<i64>,
    /// Pinned nodes, whose edges decay no lower than a floor.
    pinned: IdSet,
    /// Interned label per node; `u32::MAX` for a retracted or never-created slot.
    labels: Vec<u32>,
    live_nodes: usize,
    live_edges: usize,
}

impl Adjacency {
    /// The adjacency of a whole graph at once: each node's interned label (`u32::MAX` for an
    /// empty slot), the pinned nodes, the last-seen time of each edge, and the live edges as
    /// `(edge, from, to, relation, confidence, bounded)` in id order, whose endpoints must be
    /// below `labels.len()`. Lists are sized exactly (degrees are counted first) and hold
    /// their entries in edge id order, as adding the edges one by one in that order would.
    pub(crate) fn from_edges<I>(
        labels: Vec<u32>,
        pinned: IdSet,
        last_seen: Vec<i64>,
        edges: I,
    ) -> Self
    where
        I: Iterator<Item = (EdgeId, NodeId, NodeId, u32, f32, bool)> + Clone,
    {
        let bound = labels.len();
        let mut degree = vec![0u32; bound];
        for (_, from, to, ..) in edges.clone() {
            degree[from.0 as usize] += 1;
            degree[to.0 as usize] += 1;
        }
        let mut lists: Vec<Vec<AdjEntry>> = degree
            .iter()
            .map(|d| Vec::with_capacity(*d as usize))
            .collect();
        drop(degree);
        let mut live_edges = 0;
        for (edge, from, to, relation, conf, bounded) in edges {
            let (out, inc) = AdjEntry::pair(edge, from, to, relation, conf, bounded);
            lists[from.0 as usize].push(out);
            lists[to.0 as usize].push(inc);
            live_edges += 1;
        }
        let live_nodes = labels.iter().filter(|l| **l != u32::MAX).count();
        Adjacency {
            lists,
            last_seen,
            pinned,
            labels,
            live_nodes,
            live_edges,
        }
    }

    /// Makes room for node ids below `bound`.
    pub fn reserve_nodes(&mut self, bound: usize) {
        if self.lists.len() < bound {
            self.lists.resize_with(bound, Vec::new);
            self.labels.resize(bound, u32::MAX);
        }
    }

    pub fn set_node(&mut self, node: NodeId, label: u32) {
        self.reserve_nodes(node.0 as usize + 1);
        if self.labels[node.0 as usize] == u32::MAX {
            self.live_nodes += 1;
        }
        self.labels[node.0 as usize] = label;
    }

    /// Removes a node slot; its edges must have been removed first.
    pub fn remove_node(&mut self, node: NodeId) {
        if let Some(l) = self.labels.get_mut(node.0 as usize) {
            if *l != u32::MAX {
                self.live_nodes -= 1;
            }
            *l = u32::MAX;
            self.lists[node.0 as usize] = Vec::new();
        }
    }

    pub fn contains_node(&self, node: NodeId) -> bool {
        self.labels
            .get(node.0 as usize)
            .is_some_and(|l| *l != u32::MAX)
    }

    pub fn label_of(&self, node: NodeId) -> Option<u32> {
        self.labels
            .get(node.0 as usize)
            .copied()
            .filter(|l| *l != u32::MAX)
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
        self.lists[from.0 as usize].push(out);
        self.lists[to.0 as usize].push(inc);
        self.live_edges += 1;
    }

    /// Removes both sides of an edge.
    pub fn remove_edge(&mut self, edge: EdgeId, from: NodeId, to: NodeId) {
        let mut removed = false;
        for n in [from, to] {
            if let Some(list) = self.lists.get_mut(n.0 as usize) {
                if let Some(i) = list.iter().position(|e| e.edge == edge.0) {
                    // Order within a list carries no meaning, so swap_remove is fine.
                    list.swap_remove(i);
                    removed = true;
                }
            }
        }
        if removed {
            self.live_edges -= 1;
        }
    }

    /// Updates the confidence stored on both sides of an edge.
    pub fn set_confidence(&mut self, edge: EdgeId, from: NodeId, to: NodeId, conf: f32) {
        for n in [from, to] {
            if let Some(list) = self.lists.get_mut(n.0 as usize) {
                list.iter_mut()
                    .filter(|e| e.edge == edge.0)
                    .for_each(|e| e.confidence = conf);
            }
        }
    }

    /// The live edge `from -relation-> to`, if any, found in the shorter of the two endpoint
    /// lists (an edge between a hub and a leaf costs the leaf's list, not the hub's).
    pub fn find_edge(&self, from: NodeId, relation: u32, to: NodeId) -> Option<EdgeId> {
        let (list, other, incoming) = if self.entries(to).len() < self.entries(from).len() {
            (self.entries(to), from, true)
        } else {
            (self.entries(from), to, false)
        };
        list.iter()
            .find(|e| e.node == other.0 && e.relation() == relation && e.is_incoming() == incoming)
            .map(AdjEntry::edge_id)
    }

    /// The entries of a node (outgoing and incoming).
    pub fn entries(&self, node: NodeId) -> &[AdjEntry] {
        self.lists
            .get(node.0 as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Upper bound of node ids.
    pub fn node_bound(&self) -> usize {
        self.lists.len()
    }
    pub fn node_count(&self) -> usize {
        self.live_nodes
    }
    pub fn edge_count(&self) -> usize {
        self.live_edges
    }

    /// Heap bytes held by the adjacency (lists and labels), for memory reports.
    pub fn heap_bytes(&self) -> usize {
        self.lists.capacity() * std::mem::size_of::<Vec<AdjEntry>>()
            + self
                .lists
                .iter()
                .map(|l| l.capacity() * std::mem::size_of::<AdjEntry>())
                .sum::<usize>()
            + self.labels.capacity() * 4
            + self.last_seen.capacity() * 8
    }

    /// Records when edge `edge` was last seen (the store calls this for every edge it puts).
    pub fn set_last_seen(&mut self, edge: EdgeId, ts: i64) {
        let i = edge.0 as usize;
        if self.last_seen.len() <= i {
            self.last_seen.resize(i + 1, 0);
        }
        self.last_seen[i] = ts;
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

    /// When edge `edge` was last seen (0 when never recorded).
    #[inline]
    pub fn last_seen(&self, edge: EdgeId) -> i64 {
        self.last_seen.get(edge.0 as usize).copied().unwrap_or(0)
    }

    /// Breadth-first expansion up to `depth` hops from `start`, calling `visit` once for every
    /// distinct node reached (not `start` itself), nearest first.
    pub fn expand_with(
        &self,
        start: NodeId,
        depth: u8,
        filter: &TraversalFilter,
        mut visit: impl FnMut(Reached),
    ) {
        if !self.contains_node(start) || depth == 0 {
            return;
        }
        SCRATCH.with(|cell| {
            let mut s = cell.borrow_mut();
            let s = &mut *s;
            s.begin(self.lists.len());
            let gen = s.generation;
            s.stamp[start.0 as usize] = gen;
            s.frontier.push(start.0);
            for hop in 1..=depth {
                let last = hop == depth;
                for i in 0..s.frontier.len() {
                    let from = s.frontier[i];
                    for e in &self.lists[from as usize] {
                        let stamp = &mut s.stamp[e.node as usize];
                        if *stamp == gen || !filter.admits(from, e, self) {
                            continue;
                        }
                        *stamp = gen;
                        if !last {
                            s.next.push(e.node);
                        }
                        visit(Reached {
                            node: NodeId(e.node),
                            hops: hop,
                            via: *e,
                            parent: NodeId(from),
                        });
                    }
                }
                std::mem::swap(&mut s.frontier, &mut s.next);
                s.next.clear();
                if s.frontier.is_empty() {
                    break;
                }
            }
        });
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

/// An adjacency entry seen from one of its endpoints, for petgraph.
#[derive(Copy, Clone, Debug)]
pub struct AdjEdgeRef<'a> {
    source: NodeId,
    entry: &'a AdjEntry,
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
        self.entry
    }
    fn id(&self) -> EdgeId {
        EdgeId(self.entry.edge)
    }
}

impl<'a> IntoNeighbors for &'a Adjacency {
    type Neighbors = Box<dyn Iterator<Item = NodeId> + 'a>;
    fn neighbors(self, a: NodeId) -> Self::Neighbors {
        Box::new(self.entries(a).iter().map(|e| NodeId(e.node)))
    }
}

impl<'a> IntoEdgeReferences for &'a Adjacency {
    type EdgeRef = AdjEdgeRef<'a>;
    type EdgeReferences = Box<dyn Iterator<Item = AdjEdgeRef<'a>> + 'a>;
    /// Every edge once, from its source.
    fn edge_references(self) -> Self::EdgeReferences {
        Box::new(self.lists.iter().enumerate().flat_map(|(n, list)| {
            list.iter()
                .filter(|e| !e.is_incoming())
                .map(move |entry| AdjEdgeRef {
                    source: NodeId(n as u32),
                    entry,
                })
        }))
    }
}

impl<'a> IntoEdges for &'a Adjacency {
    type Edges = Box<dyn Iterator<Item = AdjEdgeRef<'a>> + 'a>;
    fn edges(self, a: NodeId) -> Self::Edges {
        Box::new(
            self.entries(a)
                .iter()
                .map(move |entry| AdjEdgeRef { source: a, entry }),
        )
    }
}

impl NodeIndexable for Adjacency {
    fn node_bound(&self) -> usize {
        self.lists.len()
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
}
