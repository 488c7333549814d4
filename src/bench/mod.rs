//! Benchmark workloads shared by `loci bench graph` and the criterion benches: a deterministic
//! scale-free graph (preferential attachment, several relations, random confidences) written as
//! IMPORT events, and the measurements the foundation's speed goals name.

mod context;
mod locomo;
mod routes;
#[cfg(feature = "serve")]
mod serve;
mod world;

pub use context::{run_context_bench, ContextBenchConfig, ContextBenchReport};
pub use locomo::{run_locomo_bench, LocomoReport};
#[cfg(feature = "serve")]
pub use serve::{run_serve_bench, ServeBenchConfig, ServeBenchReport};
pub use world::{run_world_bench, WorldBenchConfig, WorldBenchReport};

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::error::Result;
use crate::graph::TraversalFilter;
use crate::model::{kinds, Assertion, EdgeUpsert, EventDraft, NodeId, NodeUpsert, Props, Value};
use crate::storage::BackendKind;
use crate::store::Store;
use crate::text::SearchFilter;
use crate::world::Rng;

/// Shape of the benchmark graph.
#[derive(Clone, Debug)]
pub struct GraphSpec {
    pub nodes: u32,
    pub edges: u32,
    pub relations: u32,
    pub seed: u64,
}

impl Default for GraphSpec {
    fn default() -> Self {
        GraphSpec {
            nodes: 200_000,
            edges: 1_000_000,
            relations: 8,
            seed: 7,
        }
    }
}

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ra", "ven", "tor", "sil", "an", "dor", "el", "qua", "zin", "bar", "fen",
    "gol", "hu", "ist", "jor", "kel", "mar", "nor", "ost", "pel", "rin",
];

/// A pseudo-word from a Zipf-like vocabulary of about 14k words (some frequent, most rare),
/// so searches see realistic posting-list lengths.
fn word(rng: &mut Rng) -> String {
    // Squaring a uniform number skews toward small ids: frequent words.
    let id = ((rng.unit() * rng.unit()) * 13_824.0) as usize;
    let n = SYLLABLES.len();
    format!(
        "{}{}{}",
        SYLLABLES[id % n],
        SYLLABLES[(id / n) % n],
        SYLLABLES[(id / n / n) % n]
    )
}

/// A short document title of 2 to 5 words.
pub fn short_text(rng: &mut Rng) -> String {
    let words = 2 + rng.below(4);
    (0..words).map(|_| word(rng)).collect::<Vec<_>>().join(" ")
}

fn node_key(i: u32) -> String {
    format!("n{i}")
}

/// The node upserts of the benchmark graph.
pub fn graph_nodes(spec: &GraphSpec) -> Vec<NodeUpsert> {
    graph_nodes_iter(spec).collect()
}

/// [`graph_nodes`], one at a time (a 100M-edge graph's nodes need not be held at once).
pub fn graph_nodes_iter(spec: &GraphSpec) -> impl Iterator<Item = NodeUpsert> {
    let mut rng = Rng::new(spec.seed);
    (0..spec.nodes).map(move |i| NodeUpsert {
        key: node_key(i),
        label: Some(if i % 10 == 0 { "Place" } else { "Entity" }.into()),
        name: Some(short_text(&mut rng)),
        ..Default::default()
    })
}

/// The edge upserts of the benchmark graph: a Barabási–Albert graph ([`BaEdges`]).
pub fn graph_edges(spec: &GraphSpec) -> Vec<EdgeUpsert> {
    BaEdges::new(spec).collect()
}

/// Where [`BaEdges`] is in its construction.
#[derive(Clone, Copy)]
enum BaPhase {
    /// The seed path: node `v` to `v - 1`, for `v` in `1..=m`.
    Seed(u32),
    /// Node `v` attaching to its targets; the next is `targets[i]`.
    Attach(u32, usize),
    /// Edges beyond `n * m`.
    Extra,
}

/// The edges of a Barabási–Albert graph, generated one at a time. Each node after the first
/// `m + 1` (`m` = edges per node, at least 1) links to `m` distinct earlier nodes, each chosen
/// with probability proportional to its degree so far (a uniform pick from the list of every
/// edge endpoint), over all nodes: hubs grow without bound, as in real scale-free graphs (at
/// 200k nodes and 1M edges the largest degree is in the thousands). Edges beyond `n * m` join a
/// uniform node to a degree-proportional one. No self-loops, no duplicate
/// `(from, relation, to)`; relations and confidences are uniform.
///
/// What it keeps is what the picks and the repeat checks read, not the edges: each edge's
/// target and relation (5 bytes an edge while the relations fit a byte), which node made each
/// attached edge as a few breakpoints ([`Makers`]), and the extra phase's edges. The endpoint
/// list the picks draw from is read through [`BaEdges::endpoint`]. The run's peak memory is
/// then the store's: keeping both endpoints and the relation as words was 12 bytes an edge
/// (1.2 GB at 100M edges), and a set of every edge, before that, 16 more.
pub struct BaEdges {
    rng: Rng,
    n: u32,
    want: usize,
    m: usize,
    relations: u64,
    /// Each edge's target, in the order made.
    targets_made: Vec<u32>,
    /// Each edge's relation, in the order made.
    relations_made: RelationsMade,
    /// Which node made each edge of the seed path and the attachments.
    makers: Makers,
    /// Edges the seed path and the attachments made, their `from` ascending (a node's edges
    /// are all made at its step, to distinct targets, so none repeats another); set when the
    /// extra phase starts, `usize::MAX` before.
    attached: usize,
    /// The `from` of each extra edge, in the order made.
    extra_from: Vec<u32>,
    /// The extra phase's edges, which may repeat each other as well as an attached one.
    extra_seen: HashSet<(u32, u32, u32)>,
    targets: Vec<u32>,
    produced: usize,
    stalls: usize,
    phase: BaPhase,
}

/// Each edge's relation in the order made: a byte each while the relations fit one.
enum RelationsMade {
    Byte(Vec<u8>),
    Word(Vec<u32>),
}

impl RelationsMade {
    fn with_capacity(relations: u64, edges: usize) -> Self {
        if relations <= 256 {
            RelationsMade::Byte(Vec::with_capacity(edges))
        } else {
            RelationsMade::Word(Vec::with_capacity(edges))
        }
    }
    /// Appends `rel`, below the generator's relation count (so a byte holds it when the
    /// count is at most 256).
    fn push(&mut self, rel: u32) {
        match self {
            RelationsMade::Byte(v) => v.push(rel as u8),
            RelationsMade::Word(v) => v.push(rel),
        }
    }
    fn get(&self, i: usize) -> u32 {
        match self {
            RelationsMade::Byte(v) => u32::from(v[i]),
            RelationsMade::Word(v) => v[i],
        }
    }
}

/// Which node made each edge of the seed path and the attachments, in a few words rather than
/// a word an edge. A node makes its edges one after another, and nearly every node makes `m`:
/// only the seed path's nodes (one edge each), a node that finds fewer distinct targets, and
/// the last node (cut short at the edge count) do not. So where node `v` starts is, but for
/// those, the last breakpoint `(e0, v0)` before it plus `m` edges a node, and a breakpoint is
/// kept only where a node starts elsewhere.
struct Makers {
    m: usize,
    /// `(first edge, node)` where a node does not start where the last breakpoint puts it;
    /// ascending, nodes strictly (after a node that made no edge, two share a first edge,
    /// and the later one is the maker).
    breaks: Vec<(usize, u32)>,
}

impl Makers {
    fn new(m: usize) -> Self {
        Makers {
            m: m.max(1),
            breaks: Vec::new(),
        }
    }

    /// Node `node` (above every node before it) makes its edges from `first_edge` on, at
    /// most `m` of them.
    fn start(&mut self, node: u32, first_edge: usize) {
        if let Some(&(e0, v0)) = self.breaks.last() {
            if first_edge == e0 + (node - v0) as usize * self.m {
                return;
            }
        }
        self.breaks.push((first_edge, node));
    }

    /// The node that made edge `edge` (one a node started has made).
    fn maker(&self, edge: usize) -> u32 {
        let at = self.breaks.partition_point(|&(e, _)| e <= edge);
        let (e0, v0) = self.breaks[at.saturating_sub(1)];
        v0 + ((edge - e0) / self.m) as u32
    }
}

impl BaEdges {
    pub fn new(spec: &GraphSpec) -> Self {
        let n = spec.nodes.max(2);
        let want = spec.edges as usize;
        let m = ((spec.edges / n).max(1) as usize).min(n as usize - 1);
        let relations = spec.relations.max(1) as u64;
        BaEdges {
            rng: Rng::new(spec.seed ^ 0xED6E),
            n,
            want,
            m,
            relations,
            targets_made: Vec::with_capacity(want),
            relations_made: RelationsMade::with_capacity(relations, want),
            makers: Makers::new(m),
            attached: usize::MAX,
            extra_from: Vec::new(),
            extra_seen: HashSet::new(),
            targets: Vec::new(),
            produced: 0,
            stalls: 0,
            phase: BaPhase::Seed(1),
        }
    }

    /// The `from` of edge `i` (one made).
    fn source_of(&self, i: usize) -> u32 {
        if i < self.attached {
            self.makers.maker(i)
        } else {
            self.extra_from[i - self.attached]
        }
    }

    /// Endpoint `k` of the list of every edge's two endpoints in the order made (edge `i`'s
    /// `from` at `2i`, its `to` at `2i + 1`).
    fn endpoint(&self, k: usize) -> u32 {
        if k.is_multiple_of(2) {
            self.source_of(k / 2)
        } else {
            self.targets_made[k / 2]
        }
    }

    /// A degree-proportional node: a uniform pick of an endpoint. There is one whenever an
    /// edge has been made, which the seed path's first edge (1 to 0, `m >= 1` and `n >= 2`)
    /// always is before an attachment or the extra phase picks.
    fn pick_by_degree(&mut self) -> u32 {
        let k = self.rng.below(2 * self.produced as u64) as usize;
        self.endpoint(k)
    }

    fn push(&mut self, from: u32, to: u32) -> Option<EdgeUpsert> {
        let rel = self.rng.below(self.relations) as u32;
        if from == to || self.repeats(from, rel, to) {
            return None;
        }
        if self.produced >= self.attached {
            self.extra_from.push(from);
        }
        self.targets_made.push(to);
        self.relations_made.push(rel);
        self.produced += 1;
        Some(EdgeUpsert {
            from: node_key(from),
            relation: format!("R{rel}"),
            to: node_key(to),
            confidence: Some((self.rng.below(1000) as f32) / 1000.0),
            ..Default::default()
        })
    }

    /// Whether `(from, rel, to)` was made before. Only the extra phase can repeat an edge:
    /// there it is looked for among `from`'s attached edges (a binary search, their `from`
    /// ascending) and the extra edges so far.
    fn repeats(&mut self, from: u32, rel: u32, to: u32) -> bool {
        if !matches!(self.phase, BaPhase::Extra) {
            return false;
        }
        let (mut first, mut hi) = (0, self.attached);
        while first < hi {
            let mid = first + (hi - first) / 2;
            if self.makers.maker(mid) < from {
                first = mid + 1;
            } else {
                hi = mid;
            }
        }
        let attached_before = (first..self.attached)
            .take_while(|&i| self.makers.maker(i) == from)
            .any(|i| self.targets_made[i] == to && self.relations_made.get(i) == rel);
        attached_before || !self.extra_seen.insert((from, rel, to))
    }

    /// Distinct degree-proportional targets for a new node (a bounded number of tries).
    fn choose_targets(&mut self) {
        self.targets.clear();
        let mut tries = 0;
        while self.targets.len() < self.m && tries < 64 * self.m {
            tries += 1;
            let t = self.pick_by_degree();
            if !self.targets.contains(&t) {
                self.targets.push(t);
            }
        }
    }
}

impl Iterator for BaEdges {
    type Item = EdgeUpsert;

    fn next(&mut self) -> Option<EdgeUpsert> {
        loop {
            match self.phase {
                BaPhase::Seed(v) => {
                    if v as usize > self.m {
                        self.phase = BaPhase::Attach(self.m as u32 + 1, 0);
                        continue;
                    }
                    self.phase = BaPhase::Seed(v + 1);
                    if self.produced < self.want {
                        self.makers.start(v, self.produced);
                        if let Some(e) = self.push(v, v - 1) {
                            return Some(e);
                        }
                    }
                }
                BaPhase::Attach(v, i) => {
                    if v >= self.n || (i == 0 && self.produced >= self.want) {
                        self.phase = BaPhase::Extra;
                        self.attached = self.produced;
                        continue;
                    }
                    if i == 0 {
                        self.choose_targets();
                        self.makers.start(v, self.produced);
                    }
                    if i >= self.targets.len() {
                        self.phase = BaPhase::Attach(v + 1, 0);
                        continue;
                    }
                    self.phase = BaPhase::Attach(v, i + 1);
                    if self.produced < self.want {
                        let t = self.targets[i];
                        if let Some(e) = self.push(v, t) {
                            return Some(e);
                        }
                    }
                }
                BaPhase::Extra => {
                    let limit = self.want.saturating_mul(4).max(1_000);
                    if self.produced >= self.want || self.stalls >= limit {
                        return None;
                    }
                    let from = self.rng.below(self.n as u64) as u32;
                    let to = self.pick_by_degree();
                    match self.push(from, to) {
                        Some(e) => return Some(e),
                        None => self.stalls += 1,
                    }
                }
            }
        }
    }
}

/// The largest degree (in plus out) of a list of edges.
pub fn max_degree(edges: &[EdgeUpsert]) -> usize {
    let mut degree: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for e in edges {
        *degree.entry(&e.from).or_default() += 1;
        *degree.entry(&e.to).or_default() += 1;
    }
    degree.into_values().max().unwrap_or(0)
}

/// Wraps assertions into IMPORT events of `per_event` assertions each.
pub fn import_events(assertions: Vec<Assertion>, per_event: usize) -> Vec<EventDraft> {
    let mut out = Vec::new();
    let mut it = assertions.into_iter().peekable();
    while it.peek().is_some() {
        let mut ev = EventDraft::new(0, "bench", kinds::IMPORT);
        ev.payload = Value::Map(Props::from([("source".to_string(), Value::from("bench"))]));
        ev.assertions = it.by_ref().take(per_event).collect();
        out.push(ev);
    }
    out
}

/// Builds the benchmark graph into `store`: nodes in one batch, then edges in batches of
/// `edges_per_batch`. Returns (node seconds, edge seconds).
pub fn build(store: &Store, spec: &GraphSpec, edges_per_batch: usize) -> Result<(f64, f64)> {
    build_graph(store, &BenchGraph::generated(spec), edges_per_batch)
}

/// The nodes and edges of a benchmark graph, generated or read from a file.
pub struct BenchGraph {
    pub nodes: Vec<NodeUpsert>,
    pub edges: Vec<EdgeUpsert>,
}

impl BenchGraph {
    /// The Barabási–Albert graph of `spec` ([`graph_nodes`], [`graph_edges`]).
    pub fn generated(spec: &GraphSpec) -> Self {
        BenchGraph {
            nodes: graph_nodes(spec),
            edges: graph_edges(spec),
        }
    }

    /// The graph of an edge file ([`read_edge_file`]).
    pub fn from_file(path: &Path) -> Result<Self> {
        let (nodes, edges) = read_edge_file(path)?;
        Ok(BenchGraph { nodes, edges })
    }
}

/// Generates the graph of `spec` and ingests it as it goes, `edges_per_batch` edges a batch
/// (nodes in batches as large), never holding the whole graph: memory is bounded by the batch
/// and the generator's endpoint list, so `--edges 100000000` fits. Writes the edges to
/// `write_to` too when given. Returns the seconds of the nodes and of the edges.
pub fn build_generated(
    store: &Store,
    spec: &GraphSpec,
    edges_per_batch: usize,
    write_to: Option<&Path>,
) -> Result<(f64, f64)> {
    use std::io::Write;
    let per_batch = edges_per_batch.max(1);
    let t = Instant::now();
    let mut nodes = graph_nodes_iter(spec).peekable();
    while nodes.peek().is_some() {
        let chunk: Vec<Assertion> = nodes
            .by_ref()
            .take(per_batch)
            .map(Assertion::UpsertNode)
            .collect();
        store.ingest(import_events(chunk, 1024))?;
    }
    let node_s = t.elapsed().as_secs_f64();
    let mut out = match write_to {
        Some(path) => Some((
            path,
            std::io::BufWriter::new(
                std::fs::File::create(path).map_err(|e| crate::Error::io(path, e))?,
            ),
        )),
        None => None,
    };
    let mut edges = BaEdges::new(spec);
    let mut ingest_s = 0.0;
    loop {
        let chunk: Vec<EdgeUpsert> = edges.by_ref().take(per_batch).collect();
        if chunk.is_empty() {
            break;
        }
        if let Some((path, w)) = out.as_mut() {
            for e in &chunk {
                write_edge_line(w, e).map_err(|err| crate::Error::io(*path, err))?;
            }
        }
        ingest_s += ingest_timed(
            store,
            chunk.into_iter().map(Assertion::UpsertEdge).collect(),
        )?;
    }
    if let Some((path, mut w)) = out {
        w.flush().map_err(|e| crate::Error::io(path, e))?;
    }
    Ok((node_s, ingest_s))
}

/// Ingests `assertions` as import events of 1,024 assertions each; returns the seconds the
/// store took. Making the assertions (generating or reading the graph) is not ingest, and is
/// not timed.
fn ingest_timed(store: &Store, assertions: Vec<Assertion>) -> Result<f64> {
    let batch = import_events(assertions, 1024);
    let t = Instant::now();
    store.ingest(batch)?;
    Ok(t.elapsed().as_secs_f64())
}

/// Ingests `graph` (nodes in one batch, then edges in batches of `edges_per_batch`); returns
/// the seconds of each part.
pub fn build_graph(
    store: &Store,
    graph: &BenchGraph,
    edges_per_batch: usize,
) -> Result<(f64, f64)> {
    let t = Instant::now();
    store.ingest(import_events(
        graph
            .nodes
            .iter()
            .cloned()
            .map(Assertion::UpsertNode)
            .collect(),
        1024,
    ))?;
    let node_s = t.elapsed().as_secs_f64();
    let batches: Vec<Vec<EventDraft>> = graph
        .edges
        .chunks(edges_per_batch.max(1))
        .map(|c| import_events(c.iter().cloned().map(Assertion::UpsertEdge).collect(), 1024))
        .collect();
    let t = Instant::now();
    for b in batches {
        store.ingest(b)?;
    }
    Ok((node_s, t.elapsed().as_secs_f64()))
}

/// Median and 95th percentile, in microseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Latency {
    pub p50_us: f64,
    pub p95_us: f64,
}

/// The median and 95th percentile of `samples`: the sample at rank `round((n - 1) * q)` in
/// sorted order (for an even count, the upper of the two middle samples; `bench serve` uses
/// `ceil(n * q)`, which differs from this by at most one rank); zeros when there are none.
fn p50_p95(mut samples: Vec<f64>) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95))
}

/// The [`Latency`] of `samples` in microseconds, by [`p50_p95`]: what every benchmark here
/// reports, and `examples/warm_traversals` too.
pub fn latency(samples: Vec<f64>) -> Latency {
    let (p50_us, p95_us) = p50_p95(samples);
    Latency { p50_us, p95_us }
}

/// Everything `loci bench graph` reports.
#[derive(Clone, Debug, Serialize)]
pub struct GraphReport {
    pub backend: BackendKind,
    pub nodes: usize,
    pub edges: usize,
    pub ingest_nodes_s: f64,
    pub ingest_edges_s: f64,
    pub ingest_edges_per_s: f64,
    /// Closing the store after the load, in the loading process: not in the ingest's time,
    /// since each batch was durable when its ingest returned.
    pub ingest_close_s: f64,
    /// The graph's shape: the largest degree (edges in and out of one node).
    pub max_degree: usize,
    /// Reopening in the process that built the store. For sled this includes waiting for the
    /// dropped database to release its file lock (sled frees it asynchronously); the CLI also
    /// reports the open time of a fresh process.
    pub open_s: f64,
    /// The first queries after the open: the pages of the mapped snapshot they read come from
    /// the page cache or, when the machine had to drop them, from disk.
    pub two_hop_conf_0_5: Latency,
    /// The same starts again, once the first pass has read their pages.
    pub two_hop_conf_0_5_again: Latency,
    pub two_hop_mean_nodes: f64,
    /// 3 hops, unfiltered, counting the nodes reached.
    pub three_hop_count: Latency,
    pub three_hop_mean_nodes: f64,
    /// 3 hops over edges of confidence 0.5 or more (the 2-hop filter), counting.
    pub three_hop_conf_0_5: Latency,
    pub three_hop_conf_0_5_mean_nodes: f64,
    pub search_top10: Latency,
    /// Personalized PageRank by push from one random seed, default parameters (alpha 0.3,
    /// epsilon 1e-4), confidence-weighted.
    pub ppr_one_seed: Latency,
    pub ppr_mean_nodes: f64,
    pub disk_bytes_backend: u64,
    pub disk_bytes_text: u64,
    /// The state snapshot the open read (`store/snapshot.rs`).
    pub disk_bytes_snapshot: u64,
    /// Where the snapshot's bytes go: each mapped section's bytes, by name.
    pub disk_bytes_snapshot_sections: std::collections::BTreeMap<String, u64>,
    /// Where the open got the state from (the snapshot, or the replay of the log).
    pub open_state_source: crate::StateSource,
    /// The in-process open by stage, in milliseconds.
    pub open_ms: crate::OpenTimings,
    pub disk_bytes_per_edge: f64,
    /// The store's files, the full-text index and the snapshot, per edge.
    pub disk_bytes_per_edge_total: f64,
    /// The store directory's allocated blocks per edge (what `du` says): below the total of
    /// the files' lengths where redb's file is sparse.
    pub disk_bytes_per_edge_allocated: f64,
    /// The adjacency lists' bytes after the open, per edge: those on the heap and the
    /// snapshot's sections of them, which the open maps.
    pub adjacency_bytes_per_edge: f64,
    /// The in-memory state's heap bytes by part, per edge (`Stats::state_bytes`), after the
    /// open.
    pub state_bytes_per_edge: std::collections::BTreeMap<String, f64>,
    /// The same at the end of the load, before its store closes: a bulk load into a new store
    /// builds its state on the heap, and this is most of its peak.
    pub ingest_state_bytes_per_edge: std::collections::BTreeMap<String, f64>,
    /// The anonymous resident set (the heap as the allocator holds it) at the end of the
    /// load, before its store closes, per edge: the load's state as memory (with the
    /// generator's graph and what the load's writes left with the allocator) rather than as
    /// the capacities `ingest_state_bytes_per_edge` counts.
    pub ingest_end_rss_anon_bytes_per_edge: f64,
    /// Where the backend's bytes go, by table (`entries`: keys and values; `overhead`: page
    /// metadata and fragmentation where the backend reports them).
    pub disk_bytes_by_table: std::collections::BTreeMap<String, crate::storage::TableBytes>,
    /// The backend's file bytes no table accounts for (free pages, region headers).
    pub disk_bytes_unaccounted: u64,
    /// Pages of mapped files resident after the traversals (before the searches): the mapped
    /// snapshot's sections the queries touched, the binary's own pages and any index file.
    pub rss_file_after_traversals_bytes: u64,
    /// The largest resident set of the whole run (generation, ingest, open, queries).
    pub peak_rss_bytes: u64,
    pub peak_rss_bytes_per_edge: f64,
    /// The largest resident set up to the end of the ingest (generation and ingest), per
    /// edge: the reopen after it comes on top of the heap the closed store left with the
    /// allocator, which a process that only opens the store does not carry.
    pub peak_rss_ingest_bytes_per_edge: f64,
}

/// Times `f` over `samples` calls, in microseconds each.
fn sample(samples: usize, mut f: impl FnMut(usize)) -> Latency {
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        let t = Instant::now();
        f(i);
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    latency(out)
}

/// The C floor's start nodes (`benches/floor/khop.c`, `measure`), which the peers'
/// benchmark (`benches/peers/peers.py`) asks from too: node `n<k>` for each `k` of its
/// pseudo-random sequence over `nodes` ids (the store's node count), whatever id the store
/// gave that node, so that loci, the floor and the peers traverse from the same nodes and
/// must reach as many. `None` when a node so named is missing (a graph of other names, or ids
/// with gaps): the caller picks its own.
pub fn floor_starts(store: &Store, nodes: u64, n: usize) -> Option<Vec<NodeId>> {
    let g = store.graph();
    if nodes == 0 {
        return None;
    }
    let mut rng: u64 = 0x5eed;
    (0..n)
        .map(|_| {
            rng = rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            g.node_id(&node_key(((rng >> 33) % nodes) as u32))
        })
        .collect()
}

/// Random start nodes for traversal benchmarks.
pub fn random_starts(spec: &GraphSpec, n: usize) -> Vec<NodeId> {
    let mut rng = Rng::new(spec.seed ^ 0x5eed);
    (0..n)
        .map(|_| NodeId(rng.below(spec.nodes as u64) as u32))
        .collect()
}

/// Query strings for search benchmarks: one or two words of the node vocabulary.
pub fn search_queries(spec: &GraphSpec, n: usize) -> Vec<String> {
    let mut rng = Rng::new(spec.seed ^ 0xabc);
    (0..n)
        .map(|_| {
            if rng.chance(0.5) {
                word(&mut rng)
            } else {
                format!("{} {}", word(&mut rng), word(&mut rng))
            }
        })
        .collect()
}

/// The traversals' timings over a benchmark graph, and what they reached.
struct Traversals {
    max_degree: usize,
    two_hop: Latency,
    two_hop_again: Latency,
    two_hop_mean_nodes: f64,
    three_hop: Latency,
    three_hop_mean_nodes: f64,
    three_hop_filtered: Latency,
    three_hop_filtered_mean_nodes: f64,
    ppr: Latency,
    ppr_mean_nodes: f64,
}

/// Times 2-hop (confidence at least 0.5, then the same starts again), 3-hop counts (all
/// edges, and filtered), and PPR from one seed, from `starts`.
fn time_traversals(store: &Store, starts: &[NodeId]) -> Traversals {
    let g = store.graph();
    let max_degree = g
        .nodes()
        .map(|n| g.adjacency().degree(n.id))
        .max()
        .unwrap_or(0);
    let conf = TraversalFilter {
        min_confidence: 0.5,
        ..Default::default()
    };
    let all = TraversalFilter::default();
    let mut reached2 = 0usize;
    let two_hop = sample(starts.len(), |i| {
        reached2 += g.adjacency().khop(starts[i], 2, &conf).len();
    });
    let two_hop_again = sample(starts.len(), |i| {
        std::hint::black_box(g.adjacency().khop(starts[i], 2, &conf).len());
    });
    let mut reached3 = 0usize;
    let three_hop = sample(2_000, |i| {
        reached3 += g.adjacency().khop_count(starts[i], 3, &all);
    });
    let mut reached3_conf = 0usize;
    let three_hop_filtered = sample(2_000, |i| {
        reached3_conf += g.adjacency().khop_count(starts[i], 3, &conf);
    });
    let params = crate::retrieval::PushParams::default();
    let mut ppr_nodes = 0usize;
    let ppr = sample(2_000, |i| {
        ppr_nodes += crate::retrieval::personalized_pagerank(
            g.adjacency(),
            &[(starts[i], 1.0)],
            params,
            &all,
            |_, e| e.confidence.max(1e-3),
        )
        .len();
    });
    Traversals {
        max_degree,
        two_hop,
        two_hop_again,
        two_hop_mean_nodes: reached2 as f64 / starts.len() as f64,
        three_hop,
        three_hop_mean_nodes: reached3 as f64 / 2_000.0,
        three_hop_filtered,
        three_hop_filtered_mean_nodes: reached3_conf as f64 / 2_000.0,
        ppr,
        ppr_mean_nodes: ppr_nodes as f64 / 2_000.0,
    }
}

/// Builds, reopens and measures a benchmark store in `dir`.
pub fn run_graph_bench(
    dir: &Path,
    backend: BackendKind,
    spec: &GraphSpec,
    build: impl FnOnce(&Store) -> Result<(f64, f64)>,
) -> Result<GraphReport> {
    let (ingest_nodes_s, ingest_edges_s, ingest_state, ingest_end_anon, ingest_close_s) = {
        let store = Store::create(dir, backend)?;
        let (nodes_s, edges_s) = build(&store)?;
        let anon = rss_anon_and_file_bytes().0;
        let state = store.stats().state_bytes;
        // Every batch was durable when its ingest returned; the close that follows is a
        // cost the loading process still pays before it can exit (the text index checks
        // the files the load wrote), so it is reported beside the ingest, not in it.
        let t = Instant::now();
        drop(store);
        (nodes_s, edges_s, state, anon, t.elapsed().as_secs_f64())
    };
    let peak_ingest = peak_rss_bytes();
    let t = Instant::now();
    let store = Store::open(dir)?;
    let open_s = t.elapsed().as_secs_f64();
    let stats = store.stats();
    // The nodes the store holds: a graph read from a file has as many as it names.
    let spec = &GraphSpec {
        nodes: u32::try_from(stats.nodes).unwrap_or(u32::MAX),
        ..spec.clone()
    };
    // The floor's starts where the graph names its nodes as the floor reads them (every graph
    // this bench generates, and the files it writes): the reach must then be the floor's.
    let starts = floor_starts(&store, stats.nodes as u64, 20_000)
        .unwrap_or_else(|| random_starts(spec, 20_000));
    let walks = time_traversals(&store, &starts);
    let rss_file_after_traversals_bytes = rss_anon_and_file_bytes().1;
    let queries = search_queries(spec, 5_000);
    let filter = SearchFilter::default();
    // A search that fails is not a fast search: the run stops with the first error.
    let mut search_error = None;
    let search = sample(queries.len(), |i| {
        if let Err(e) = store.search(&queries[i], &filter, 10) {
            search_error.get_or_insert(e);
        }
    });
    if let Some(e) = search_error {
        return Err(e);
    }
    let edges = stats.edges.max(1) as f64;
    let by_table: std::collections::BTreeMap<String, crate::storage::TableBytes> = store
        .disk_bytes_by_table()?
        .into_iter()
        .map(|(t, b)| (t.to_string(), b))
        .collect();
    Ok(GraphReport {
        backend,
        nodes: stats.nodes,
        edges: stats.edges,
        ingest_nodes_s,
        ingest_edges_s,
        ingest_edges_per_s: stats.edges as f64 / ingest_edges_s,
        ingest_close_s,
        max_degree: walks.max_degree,
        open_s,
        two_hop_conf_0_5: walks.two_hop,
        two_hop_conf_0_5_again: walks.two_hop_again,
        two_hop_mean_nodes: walks.two_hop_mean_nodes,
        three_hop_count: walks.three_hop,
        three_hop_mean_nodes: walks.three_hop_mean_nodes,
        three_hop_conf_0_5: walks.three_hop_filtered,
        three_hop_conf_0_5_mean_nodes: walks.three_hop_filtered_mean_nodes,
        search_top10: search,
        ppr_one_seed: walks.ppr,
        ppr_mean_nodes: walks.ppr_mean_nodes,
        disk_bytes_backend: stats.disk_bytes_backend,
        disk_bytes_text: stats.disk_bytes_text,
        disk_bytes_snapshot: stats.disk_bytes_snapshot,
        disk_bytes_snapshot_sections: stats.disk_bytes_snapshot_sections.iter().cloned().collect(),
        open_state_source: stats.state_source,
        open_ms: stats.open_ms,
        disk_bytes_per_edge: stats.disk_bytes_backend as f64 / edges,
        disk_bytes_per_edge_allocated: stats.disk_bytes_allocated as f64 / edges,
        disk_bytes_per_edge_total: (stats.disk_bytes_backend
            + stats.disk_bytes_text
            + stats.disk_bytes_snapshot) as f64
            / edges,
        disk_bytes_unaccounted: stats.disk_bytes_backend.saturating_sub(
            by_table
                .values()
                .map(|b| b.entries + b.overhead.unwrap_or(0))
                .sum(),
        ),
        disk_bytes_by_table: by_table,
        rss_file_after_traversals_bytes,
        peak_rss_bytes: peak_rss_bytes(),
        peak_rss_bytes_per_edge: peak_rss_bytes() as f64 / edges,
        peak_rss_ingest_bytes_per_edge: peak_ingest as f64 / edges,
        adjacency_bytes_per_edge: (stats.adjacency_bytes as u64
            + stats
                .disk_bytes_snapshot_sections
                .iter()
                .filter(|(name, _)| name.starts_with("adjacency"))
                .map(|(_, bytes)| bytes)
                .sum::<u64>()) as f64
            / edges,
        state_bytes_per_edge: per_edge_by_part(&stats.state_bytes, edges),
        ingest_state_bytes_per_edge: per_edge_by_part(&ingest_state, edges),
        ingest_end_rss_anon_bytes_per_edge: ingest_end_anon as f64 / edges,
    })
}

/// `bytes` by part and in all, each per edge.
fn per_edge_by_part(
    bytes: &crate::StateBytes,
    edges: f64,
) -> std::collections::BTreeMap<String, f64> {
    [
        ("nodes", bytes.nodes),
        ("node_keys", bytes.node_keys),
        ("edges", bytes.edges),
        ("adjacency", bytes.adjacency),
        ("total", bytes.total()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v as f64 / edges))
    .collect()
}

/// Resident set size of this process, in bytes (Linux; 0 elsewhere).
pub fn rss_bytes() -> u64 {
    status_kb("VmRSS:")
}

/// Of the resident set, the anonymous memory (the heap and its kind, which only the process
/// can give back) and the pages of mapped files (the mapped snapshot among them: page cache,
/// which the kernel takes back under pressure and reads again from the file), in bytes
/// (Linux; 0 elsewhere).
pub fn rss_anon_and_file_bytes() -> (u64, u64) {
    (status_kb("RssAnon:"), status_kb("RssFile:"))
}

/// The largest resident set size this process has had, in bytes (Linux; 0 elsewhere).
pub fn peak_rss_bytes() -> u64 {
    status_kb("VmHWM:")
}

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// A graph from a file of `src dst relation confidence` lines (whitespace-separated; `#`
/// starts a comment line), so the exact graph given to another system can be given to loci.
/// Node keys are the ids as written; a repeated `(src, relation, dst)` keeps its last line.
/// Holds the whole graph: [`build_from_file`] loads a file of any size.
pub fn read_edge_file(path: &Path) -> Result<(Vec<NodeUpsert>, Vec<EdgeUpsert>)> {
    let mut nodes: Vec<NodeUpsert> = Vec::new();
    let mut known: HashSet<String> = HashSet::new();
    let mut edges = Vec::new();
    for edge in EdgeLines::open(path)? {
        let edge = edge?;
        for id in [&edge.from, &edge.to] {
            if known.insert(id.clone()) {
                nodes.push(file_node(id));
            }
        }
        edges.push(edge);
    }
    Ok((nodes, edges))
}

/// The node an edge file's id stands for.
fn file_node(id: &str) -> NodeUpsert {
    NodeUpsert {
        key: id.to_string(),
        label: Some("Entity".into()),
        name: Some(id.to_string()),
        ..Default::default()
    }
}

/// The edges of an edge file, read a line at a time; a line that is not an edge is an error
/// naming its line and field.
struct EdgeLines {
    path: std::path::PathBuf,
    lines: std::io::Lines<std::io::BufReader<std::fs::File>>,
    line: usize,
}

impl EdgeLines {
    fn open(path: &Path) -> Result<Self> {
        use std::io::BufRead;
        let file = std::fs::File::open(path).map_err(|e| crate::Error::io(path, e))?;
        Ok(EdgeLines {
            path: path.to_path_buf(),
            lines: std::io::BufReader::new(file).lines(),
            line: 0,
        })
    }

    fn bad(&self, field: &str, message: String) -> crate::Error {
        crate::Error::Input {
            file: self.path.display().to_string(),
            line: self.line,
            field: field.into(),
            message,
        }
    }

    fn edge(&self, text: &str) -> Result<EdgeUpsert> {
        let parts: Vec<&str> = text.split_whitespace().collect();
        let [src, dst, relation, confidence] = parts[..] else {
            return Err(self.bad(
                "line",
                format!(
                    "expected `src dst relation confidence`, found {} fields",
                    parts.len()
                ),
            ));
        };
        // What the store would refuse for the whole batch, refused here for its line.
        for (field, value, max) in [
            ("src", src, crate::model::MAX_KEY_BYTES),
            ("dst", dst, crate::model::MAX_KEY_BYTES),
            ("relation", relation, crate::model::MAX_LABEL_BYTES),
        ] {
            if value.len() > max {
                return Err(self.bad(field, format!("{} bytes long; at most {max}", value.len())));
            }
        }
        let confidence: f32 = confidence
            .parse()
            .ok()
            .filter(|c: &f32| (0.0..=1.0).contains(c))
            // -0 is 0 (so that it is not shown as -0).
            .map(|c| c + 0.0)
            .ok_or_else(|| {
                self.bad(
                    "confidence",
                    format!("{confidence:?}: expected a number in [0, 1]"),
                )
            })?;
        Ok(EdgeUpsert {
            from: src.to_string(),
            relation: relation.to_string(),
            to: dst.to_string(),
            confidence: Some(confidence),
            ..Default::default()
        })
    }
}

impl Iterator for EdgeLines {
    type Item = Result<EdgeUpsert>;
    fn next(&mut self) -> Option<Result<EdgeUpsert>> {
        loop {
            let line = self.lines.next()?;
            self.line += 1;
            let line = match line {
                Ok(l) => l,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Some(Err(self.bad("line", "not UTF-8".into())))
                }
                Err(e) => return Some(Err(crate::Error::io(&self.path, e))),
            };
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            return Some(self.edge(t));
        }
    }
}

/// Loads the graph of an edge file ([`read_edge_file`]'s format) into `store` as it reads
/// it, never holding the whole graph, so that the file of 100M edges given to another system
/// loads as the generated graph does (holding it, with every batch made before the first was
/// ingested, peaked at 451 B/edge at 10M edges where this peaks at 114). The first pass
/// makes the nodes in the order they first appear, `edges_per_batch` a batch, each id looked
/// up in the store first so that none is made twice; the second ingests the edges in batches
/// as large. A line that is not an edge stops the load, naming its line and field, with what
/// came before it loaded. Returns the seconds of the nodes and of the edges: the store's part,
/// not the reading and parsing of the file.
pub fn build_from_file(store: &Store, path: &Path, edges_per_batch: usize) -> Result<(f64, f64)> {
    let mut node_s = 0.0;
    let mut batches = edge_batches(path, edges_per_batch)?.peekable();
    if batches.peek().is_none() {
        return Err(crate::Error::Input {
            file: path.display().to_string(),
            line: 0,
            field: "file".into(),
            message: "holds no edges".into(),
        });
    }
    for chunk in batches {
        let chunk = chunk?;
        let mut new: HashSet<&str> = HashSet::new();
        let mut nodes = Vec::new();
        {
            let g = store.graph();
            for e in &chunk {
                for id in [e.from.as_str(), e.to.as_str()] {
                    if g.node_id(id).is_none() && new.insert(id) {
                        nodes.push(Assertion::UpsertNode(file_node(id)));
                    }
                }
            }
        }
        if !nodes.is_empty() {
            node_s += ingest_timed(store, nodes)?;
        }
    }
    let mut edge_s = 0.0;
    for chunk in edge_batches(path, edges_per_batch)? {
        edge_s += ingest_timed(
            store,
            chunk?.into_iter().map(Assertion::UpsertEdge).collect(),
        )?;
    }
    Ok((node_s, edge_s))
}

/// The edges of the file at `path` in batches of `per_batch` (at least 1); a batch with a
/// line that is not an edge is that line's error.
fn edge_batches(
    path: &Path,
    per_batch: usize,
) -> Result<impl Iterator<Item = Result<Vec<EdgeUpsert>>>> {
    let per_batch = per_batch.max(1);
    let mut lines = EdgeLines::open(path)?.peekable();
    Ok(std::iter::from_fn(move || {
        lines.peek()?;
        Some(lines.by_ref().take(per_batch).collect())
    }))
}

/// One edge as a `src dst relation confidence` line.
fn write_edge_line(w: &mut impl std::io::Write, e: &EdgeUpsert) -> std::io::Result<()> {
    writeln!(
        w,
        "{} {} {} {}",
        e.from,
        e.to,
        e.relation,
        e.confidence.unwrap_or(1.0)
    )
}

/// Writes edges as `src dst relation confidence` lines (what [`read_edge_file`] reads).
pub fn write_edge_file(path: &Path, edges: &[EdgeUpsert]) -> Result<()> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(|e| crate::Error::io(path, e))?;
    let mut w = std::io::BufWriter::new(file);
    for e in edges {
        write_edge_line(&mut w, e).map_err(|err| crate::Error::io(path, err))?;
    }
    w.flush().map_err(|e| crate::Error::io(path, e))
}

// --- retrieval benchmark ---------------------------------------------------------------------

/// A benchmark question: its text and the passages that support its answer.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Question {
    pub id: String,
    pub question: String,
    pub gold_ids: Vec<String>,
}

/// Reads a questions file (`{"id", "question", "gold_ids", ...}` per line).
pub fn read_questions(path: &Path) -> Result<Vec<Question>> {
    let text = std::fs::read_to_string(path).map_err(|e| crate::Error::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<Question>(l).map_err(|e| crate::Error::Input {
                file: path.display().to_string(),
                line: i + 1,
                field: "json".into(),
                message: e.to_string(),
            })
        })
        .collect()
}

/// Recall and latency of one ranking over a question set.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RecallMetrics {
    #[serde(rename = "recall@2")]
    pub recall_2: f64,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "all_recall@5")]
    pub all_recall_5: f64,
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

/// Accumulates per-question rankings into [`RecallMetrics`].
#[derive(Default)]
pub struct RecallAccumulator {
    r2: f64,
    r5: f64,
    all5: f64,
    r10: f64,
    n: usize,
    latencies_ms: Vec<f64>,
}

impl RecallAccumulator {
    /// Adds one question. A question without gold passages has nothing to recall and is not
    /// counted (counting it would make recall 0 and "all found" 1 at once).
    pub fn add(&mut self, ranked: &[String], gold: &[String], latency_ms: f64) {
        if gold.is_empty() {
            return;
        }
        let hits = |k: usize| {
            gold.iter()
                .filter(|g| ranked.iter().take(k).any(|r| r == *g))
                .count()
        };
        let g = gold.len().max(1) as f64;
        self.r2 += hits(2) as f64 / g;
        self.r5 += hits(5) as f64 / g;
        self.r10 += hits(10) as f64 / g;
        if hits(5) == gold.len() {
            self.all5 += 1.0;
        }
        self.n += 1;
        self.latencies_ms.push(latency_ms);
    }

    pub fn finish(self) -> RecallMetrics {
        let n = self.n.max(1) as f64;
        let (p50_ms, p95_ms) = p50_p95(self.latencies_ms);
        RecallMetrics {
            recall_2: self.r2 / n,
            recall_5: self.r5 / n,
            all_recall_5: self.all5 / n,
            recall_10: self.r10 / n,
            p50_ms,
            p95_ms,
        }
    }
}

/// What `loci bench retrieval` reports.
#[derive(Clone, Debug, Serialize)]
pub struct RetrievalReport {
    pub n: usize,
    pub loci: RecallMetrics,
    pub bm25: RecallMetrics,
    pub build_s: f64,
    pub passages: usize,
    pub nodes: usize,
    pub edges: usize,
}

/// BM25 over the passages alone, the baseline of `bench retrieval`. The store's own index also
/// holds every extracted entity and every event (tens of thousands of small documents on a
/// corpus of a few thousand passages), which skews IDF and the average document length, so a
/// label filter over it is not the BM25 a passage retriever would run. This index holds exactly
/// the passages' indexed text, analysed as the store analyses it.
pub struct PassageBm25 {
    reader: tantivy::IndexReader,
    text: tantivy::schema::Field,
    analyzer: std::sync::Mutex<tantivy::tokenizer::TextAnalyzer>,
    /// Passage keys by the `ord` fast field.
    keys: Vec<String>,
}

impl PassageBm25 {
    /// Indexes, in memory, every passage node of `store`.
    pub fn build(store: &Store) -> Result<Self> {
        use crate::text::{analysed_text_options, ANALYZER};
        use tantivy::schema::NumericOptions;
        let terr = |e: tantivy::TantivyError| crate::error::Error::text_source(e);
        let mut b = tantivy::schema::Schema::builder();
        let text = b.add_text_field("text", analysed_text_options());
        let ord = b.add_u64_field("ord", NumericOptions::default().set_fast());
        let index = tantivy::Index::create_in_ram(b.build());
        index
            .tokenizers()
            .register(ANALYZER, crate::text::analyzer());
        // One indexing thread: one segment, documents in node order, so ties in score break the
        // same way on every run.
        let mut writer: tantivy::IndexWriter =
            index.writer_with_num_threads(1, 50_000_000).map_err(terr)?;
        let mut keys = Vec::new();
        let g = store.graph();
        for n in g
            .nodes()
            .filter(|n| n.label == crate::model::labels::PASSAGE)
        {
            let mut doc = tantivy::TantivyDocument::default();
            doc.add_text(text, &crate::text::TextDoc::for_node(&n).text);
            doc.add_u64(ord, keys.len() as u64);
            writer.add_document(doc).map_err(terr)?;
            keys.push(n.key.clone());
        }
        drop(g);
        writer.commit().map_err(terr)?;
        let reader = index.reader().map_err(terr)?;
        Ok(PassageBm25 {
            reader,
            text,
            analyzer: std::sync::Mutex::new(crate::text::analyzer()),
            keys,
        })
    }

    /// The `limit` best passages for `question` as (key, BM25 score) (any analysed term may
    /// match, as in `Store::search`), best first; ties in score keep tantivy's document order.
    pub fn search(&self, question: &str, limit: usize) -> Result<Vec<(String, f32)>> {
        let terr = |e: tantivy::TantivyError| crate::error::Error::text_source(e);
        let mut terms = Vec::new();
        {
            let mut a = self.analyzer.lock().unwrap_or_else(|e| e.into_inner());
            let mut stream = a.token_stream(question);
            while let Some(t) = stream.next() {
                terms.push(t.text.clone());
            }
        }
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let query = crate::text::any_term_query(self.text, &terms);
        let searcher = self.reader.searcher();
        let top = searcher
            .search(
                &query,
                &tantivy::collector::TopDocs::with_limit(limit).order_by_score(),
            )
            .map_err(terr)?;
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let col = searcher.segment_readers()[addr.segment_ord as usize]
                .fast_fields()
                .u64("ord")
                .map_err(terr)?;
            if let Some(key) = col
                .first(addr.doc_id)
                .and_then(|o| self.keys.get(o as usize))
            {
                out.push((key.clone(), score));
            }
        }
        Ok(out)
    }
}

/// The timed top 5 followed by what the deeper ranking adds after it (the deeper ranking's first
/// five are the same passages: candidates are ranked before they are cut to k).
fn extend_ranking(mut top5: Vec<String>, top10: Vec<String>) -> Vec<String> {
    for key in top10 {
        if top5.len() >= 10 {
            break;
        }
        if !top5.contains(&key) {
            top5.push(key);
        }
    }
    top5
}

/// Builds a fresh store in `dir` from a passage corpus (and triples, when given), extracts the
/// text graph, and runs every question through loci's ranking and a BM25-only ranking of the
/// same passages. `progress` is called after each question.
pub fn run_retrieval_bench(
    dir: &Path,
    corpus: &Path,
    questions: &Path,
    triples: Option<&Path>,
    opts: &crate::retrieval::RetrieveOptions,
    progress: &dyn Fn(usize, usize),
) -> Result<RetrievalReport> {
    use crate::ingest::{read_file, Format};
    use crate::retrieval::{Retriever, SnippetKind};
    let questions = read_questions(questions)?;
    let t = Instant::now();
    let store = Store::create(dir, BackendKind::Redb)?;
    let passages = read_file(corpus, Some(Format::Passages))?;
    let n_passages = passages.events.len();
    passages.commit(&store)?;
    if let Some(tr) = triples {
        read_file(tr, Some(Format::Triples))?.commit(&store)?;
    }
    store.ingest(crate::extract::extract_mentions(&store)?)?;
    store.ingest(crate::extract::alias_links(&store)?)?;
    let retriever = Retriever::new(&store)?;
    let build_s = t.elapsed().as_secs_f64();
    let baseline = PassageBm25::build(&store)?;

    let mut loci = RecallAccumulator::default();
    let mut bm25 = RecallAccumulator::default();
    // Latency is measured on the top 5 (what recall@5 and the published figures use); the top
    // 10 for recall@10 come from a second, untimed call, since rendering twice as many snippets
    // (with their explanation paths) would inflate the timing.
    // Each question is asked of the same memory: a question's answer must not make the next
    // one's passages hot.
    let opts_at = |k: usize| crate::retrieval::RetrieveOptions {
        k,
        kinds: vec![SnippetKind::Passage],
        record_usage: false,
        ..opts.clone()
    };
    let (at5, at10) = (opts_at(5), opts_at(10));
    let keys = |pack: crate::retrieval::ContextPack| -> Vec<String> {
        pack.snippets.into_iter().map(|s| s.id).collect()
    };
    for (i, q) in questions.iter().enumerate() {
        let t = Instant::now();
        let top5 = keys(retriever.retrieve(&q.question, &at5)?);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let top10 = keys(retriever.retrieve(&q.question, &at10)?);
        loci.add(&extend_ranking(top5, top10), &q.gold_ids, ms);

        let t = Instant::now();
        let top5: Vec<String> = baseline
            .search(&q.question, 5)?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let top10 = baseline
            .search(&q.question, 10)?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        bm25.add(&extend_ranking(top5, top10), &q.gold_ids, ms);
        progress(i + 1, questions.len());
    }
    let stats = store.stats();
    Ok(RetrievalReport {
        n: questions.len(),
        loci: loci.finish(),
        bm25: bm25.finish(),
        build_s,
        passages: n_passages,
        nodes: stats.nodes,
        edges: stats.edges,
    })
}

// --- MetaQA benchmark ------------------------------------------------------------------------

/// The KB relation between a movie and the other kind of a MetaQA question type
/// (`movie_to_director` ...).
fn metaqa_relation(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "director" => "directed_by",
        "writer" => "written_by",
        "actor" => "starred_actors",
        "year" => "release_year",
        "language" => "in_language",
        "genre" => "has_genre",
        "tag" | "tags" => "has_tags",
        "imdbrating" => "has_imdb_rating",
        "imdbvotes" => "has_imdb_votes",
        _ => return None,
    })
}

/// The planner query of a question type: from the topic entity, located by name, along the
/// relation path the type names, to answers other than the topic, the best supported first.
/// An answer's support is the evidence behind it: the supporting events of each path that
/// reaches it, summed over those paths. It matters where the KB merges several same-titled
/// films into one entity: a fact every version holds was observed once per version and ranks
/// above a fact of one version. `movie_to_director_to_movie` becomes
/// `MATCH p = (t {name: $topic})-[:directed_by]->(x1)<-[:directed_by]-(x2) WHERE x2 <> t
/// RETURN x2.name AS answer, sum(size(provenance(p))) AS support ORDER BY support DESC`.
pub fn metaqa_query(qtype: &str) -> Result<String> {
    let kinds: Vec<&str> = qtype.split("_to_").collect();
    let bad = || crate::Error::InvalidArgument {
        name: "qtype".into(),
        message: format!("{qtype:?} is not a MetaQA question type (kind_to_kind...)"),
    };
    if kinds.len() < 2 {
        return Err(bad());
    }
    let mut pattern = String::from("(t {name: $topic})");
    for (i, pair) in kinds.windows(2).enumerate() {
        let step = match (pair[0], pair[1]) {
            ("movie", other) => format!("-[:{}]->", metaqa_relation(other).ok_or_else(bad)?),
            (other, "movie") => format!("<-[:{}]-", metaqa_relation(other).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        pattern.push_str(&format!("{step}(x{})", i + 1));
    }
    let last = kinds.len() - 1;
    // Ties keep the order in which the KB listed the facts.
    Ok(format!(
        "MATCH p = {pattern} WHERE x{last} <> t \
         RETURN x{last}.name AS answer, sum(size(provenance(p))) AS support ORDER BY support DESC"
    ))
}

/// Loads a MetaQA KB (`subject|relation|object` lines) into `store`: one node per distinct
/// entity string (key and name), one edge per distinct triple. Every line is one observation:
/// the KB lists a fact once per film record that holds it (same-titled films share one name), so
/// a repeated line is recorded as further evidence for the edge, in an event of its own, rather
/// than dropped. Returns (entities, lines).
pub fn load_metaqa_kb(store: &Store, kb: &Path) -> Result<(usize, usize)> {
    const PER_EVENT: usize = 1024;
    let text = std::fs::read_to_string(kb).map_err(|e| crate::Error::io(kb, e))?;
    let mut seen: HashSet<&str> = HashSet::new();
    let mut nodes = Vec::new();
    let mut events: Vec<EventDraft> = Vec::new();
    let mut current: Vec<Assertion> = Vec::new();
    let mut in_current: HashSet<(&str, &str, &str)> = HashSet::new();
    let mut lines = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split('|').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.trim().is_empty()) {
            return Err(crate::Error::Input {
                file: kb.display().to_string(),
                line: i + 1,
                field: "triple".into(),
                message: format!("expected subject|relation|object, got {line:?}"),
            });
        }
        lines += 1;
        for e in [parts[0], parts[2]] {
            if seen.insert(e) {
                nodes.push(Assertion::UpsertNode(NodeUpsert {
                    key: e.to_string(),
                    label: Some(crate::model::labels::ENTITY.into()),
                    name: Some(e.to_string()),
                    ..Default::default()
                }));
            }
        }
        // One event supports an edge once, so a line repeated within the batch starts the next.
        let triple = (parts[0], parts[1], parts[2]);
        if current.len() == PER_EVENT || in_current.contains(&triple) {
            events.extend(import_events(std::mem::take(&mut current), PER_EVENT));
            in_current.clear();
        }
        in_current.insert(triple);
        current.push(Assertion::UpsertEdge(EdgeUpsert {
            from: parts[0].to_string(),
            relation: parts[1].to_string(),
            to: parts[2].to_string(),
            ..Default::default()
        }));
    }
    events.extend(import_events(current, PER_EVENT));
    let n = nodes.len();
    let mut all = import_events(nodes, PER_EVENT);
    all.extend(events);
    store.ingest(all)?;
    Ok((n, lines))
}

/// One MetaQA question: text, topic entity (in brackets in the text), answers.
#[derive(Clone, Debug)]
pub struct MetaqaQuestion {
    pub text: String,
    pub topic: String,
    pub answers: Vec<String>,
}

/// Reads `question<TAB>answer|answer...` lines.
pub fn read_metaqa_questions(path: &Path) -> Result<Vec<MetaqaQuestion>> {
    let text = std::fs::read_to_string(path).map_err(|e| crate::Error::io(path, e))?;
    let bad = |i: usize, m: &str| crate::Error::Input {
        file: path.display().to_string(),
        line: i + 1,
        field: "question".into(),
        message: m.to_string(),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let (q, a) = l
                .split_once('\t')
                .ok_or_else(|| bad(i, "expected question<TAB>answers"))?;
            let open = q
                .find('[')
                .ok_or_else(|| bad(i, "no [topic entity] in the question"))?;
            let close = q[open..]
                .find(']')
                .ok_or_else(|| bad(i, "unclosed [topic entity]"))?
                + open;
            Ok(MetaqaQuestion {
                text: q.replace(['[', ']'], ""),
                topic: q[open + 1..close].to_string(),
                answers: a.split('|').map(str::to_string).collect(),
            })
        })
        .collect()
}

/// Hits@1 and F1 of one question's ranked answers against its gold answers: Hits@1 is 1 when
/// the first answer is gold; F1 is that of the answer set (a repeated answer counts once).
pub fn answer_scores(got: &[String], gold: &[String]) -> (f64, f64) {
    let gold: HashSet<&str> = gold.iter().map(String::as_str).collect();
    let got: Vec<&str> = {
        let mut seen = HashSet::new();
        got.iter()
            .map(String::as_str)
            .filter(|a| seen.insert(*a))
            .collect()
    };
    let hit = got.first().is_some_and(|a| gold.contains(a)) as u8 as f64;
    let correct = got.iter().filter(|a| gold.contains(*a)).count() as f64;
    let f1 = if correct == 0.0 {
        0.0
    } else {
        let (p, r) = (correct / got.len() as f64, correct / gold.len() as f64);
        2.0 * p * r / (p + r)
    };
    (hit, f1)
}

/// Planner-mode figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PlannerMetrics {
    #[serde(rename = "hits@1")]
    pub hits_1: f64,
    pub f1: f64,
    /// Over the questions `--answerable` names; `None` (null) without that file.
    #[serde(rename = "hits@1_answerable")]
    pub hits_1_answerable: Option<f64>,
    pub f1_answerable: Option<f64>,
    pub n_answerable: Option<usize>,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

/// Retrieval-mode figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MetaqaRetrievalMetrics {
    /// `None` (null) when no question ran in retrieval mode (`--retrieval-limit 0`).
    #[serde(rename = "answer_recall@10")]
    pub answer_recall_10: Option<f64>,
    pub p50_ms: f64,
    /// Questions run in retrieval mode (all, unless limited).
    pub n: usize,
}

/// What `loci bench metaqa` reports.
#[derive(Clone, Debug, Serialize)]
pub struct MetaqaReport {
    pub n: usize,
    pub planner: PlannerMetrics,
    pub retrieval: MetaqaRetrievalMetrics,
    pub load_s: f64,
    pub entities: usize,
    pub triples: usize,
}

/// The questions an `--answerable` file names: one 0-based line number of the questions file
/// (of `questions` lines) a line, blank lines aside. Any other line is refused, naming it: one
/// dropped unread had made a wrong file read as no question answerable.
fn read_answerable(path: &Path, questions: usize) -> Result<HashSet<usize>> {
    let text = std::fs::read_to_string(path).map_err(|e| crate::Error::io(path, e))?;
    let mut out = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim().trim_start_matches('\u{feff}');
        if line.is_empty() {
            continue;
        }
        match line.parse::<usize>() {
            Ok(q) if q < questions => {
                out.insert(q);
            }
            _ => {
                return Err(crate::Error::Input {
                    file: path.display().to_string(),
                    line: i + 1,
                    field: "answerable".into(),
                    message: format!(
                        "expected the 0-based line number of a question (0 to {}), found {}",
                        questions.saturating_sub(1),
                        crate::error::quoted_excerpt(line)
                    ),
                })
            }
        }
    }
    Ok(out)
}

/// Runs the MetaQA benchmark in a fresh store in `dir`. `retrieval_limit` caps the questions
/// run in retrieval mode (every question when `None`).
pub fn run_metaqa_bench(
    dir: &Path,
    kb: &Path,
    questions: &Path,
    qtypes: &Path,
    answerable: Option<&Path>,
    retrieval_limit: Option<usize>,
    progress: &dyn Fn(usize, usize),
) -> Result<MetaqaReport> {
    let qs = read_metaqa_questions(questions)?;
    let types: Vec<String> = std::fs::read_to_string(qtypes)
        .map_err(|e| crate::Error::io(qtypes, e))?
        .lines()
        .map(|l| l.trim().to_string())
        .collect();
    if types.len() < qs.len() {
        return Err(crate::Error::Input {
            file: qtypes.display().to_string(),
            line: types.len() + 1,
            field: "qtype".into(),
            message: format!("{} question types for {} questions", types.len(), qs.len()),
        });
    }
    let answerable = answerable
        .map(|p| read_answerable(p, qs.len()))
        .transpose()?;
    let t = Instant::now();
    let store = Store::create(dir, BackendKind::Redb)?;
    let (entities, triples) = load_metaqa_kb(&store, kb)?;
    let load_s = t.elapsed().as_secs_f64();

    let mut prepared: HashMap<String, crate::query::Prepared> = HashMap::new();
    let (mut hits, mut f1, mut hits_a, mut f1_a, mut n_a) = (0.0, 0.0, 0.0, 0.0, 0usize);
    let mut lat = Vec::with_capacity(qs.len());
    let retrieval_n = retrieval_limit.unwrap_or(qs.len()).min(qs.len());
    let total = qs.len() + retrieval_n;
    for (i, q) in qs.iter().enumerate() {
        let qtype = &types[i];
        if !prepared.contains_key(qtype) {
            let text = metaqa_query(qtype)?;
            let p = crate::query::prepare(&text, crate::query::Limits::default()).map_err(|e| {
                crate::Error::InvalidArgument {
                    name: "qtype".into(),
                    message: e.to_string(),
                }
            })?;
            prepared.insert(qtype.clone(), p);
        }
        let params =
            HashMap::from([("topic".to_string(), crate::query::Val::Str(q.topic.clone()))]);
        let t = Instant::now();
        let result = prepared[qtype]
            .run_without_recording(&store, &params)
            .map_err(|e| crate::Error::InvalidArgument {
                name: "query".into(),
                message: e.to_string(),
            })?;
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        let got: Vec<String> = result
            .rows
            .iter()
            .filter_map(|r| r[0].as_str().map(str::to_string))
            .collect();
        let (h, f) = answer_scores(&got, &q.answers);
        hits += h;
        f1 += f;
        if answerable.as_ref().is_some_and(|a| a.contains(&i)) {
            hits_a += h;
            f1_a += f;
            n_a += 1;
        }
        if i % 256 == 0 {
            progress(i + 1, total);
        }
    }
    let n = qs.len().max(1) as f64;

    // Retrieval mode: the question text alone.
    let retriever = crate::retrieval::Retriever::new(&store)?;
    let opts = crate::retrieval::RetrieveOptions {
        k: 20,
        kinds: vec![
            crate::retrieval::SnippetKind::Entity,
            crate::retrieval::SnippetKind::Fact,
        ],
        record_usage: false,
        ..Default::default()
    };
    let mut recall = 0.0;
    let mut rlat = Vec::with_capacity(retrieval_n);
    for (i, q) in qs.iter().take(retrieval_n).enumerate() {
        let t = Instant::now();
        let pack = retriever.retrieve(&q.text, &opts)?;
        rlat.push(t.elapsed().as_secs_f64() * 1e3);
        let mut names: Vec<String> = Vec::new();
        let add = |name: String, names: &mut Vec<String>| {
            if name != q.topic && !names.contains(&name) {
                names.push(name);
            }
        };
        for s in &pack.snippets {
            match s.kind {
                crate::retrieval::SnippetKind::Entity => add(s.id.clone(), &mut names),
                _ => {
                    for e in &s.provenance.edges {
                        if let Some(edge) = store.edge(*e)? {
                            for n in [edge.from, edge.to] {
                                if let Some(node) = store.node(n) {
                                    add(node.key, &mut names);
                                }
                            }
                        }
                    }
                }
            }
        }
        names.truncate(10);
        let found = q.answers.iter().filter(|a| names.contains(a)).count() as f64;
        recall += found / q.answers.len().max(1) as f64;
        if i % 256 == 0 {
            progress(qs.len() + i + 1, total);
        }
    }
    let na = n_a.max(1) as f64;
    let (p50_ms, p95_ms) = p50_p95(lat);
    // Null where nothing was measured: no file, or a file naming no question.
    let of_answerable = |sum: f64| answerable.as_ref().filter(|_| n_a > 0).map(|_| sum / na);
    Ok(MetaqaReport {
        n: qs.len(),
        planner: PlannerMetrics {
            hits_1: hits / n,
            f1: f1 / n,
            hits_1_answerable: of_answerable(hits_a),
            f1_answerable: of_answerable(f1_a),
            n_answerable: answerable.as_ref().map(|_| n_a),
            p50_ms,
            p95_ms,
        },
        retrieval: MetaqaRetrievalMetrics {
            answer_recall_10: (retrieval_n > 0).then(|| recall / retrieval_n as f64),
            p50_ms: p50_p95(rlat).0,
            n: retrieval_n,
        },
        load_s,
        entities,
        triples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|x| x.to_string()).collect()
    }

    /// The edges of `spec`'s graph, checked to be as many as it asks, without self-loops and
    /// without a repeated `(from, relation, to)`.
    fn distinct_edges(spec: &GraphSpec) -> Vec<EdgeUpsert> {
        let edges = graph_edges(spec);
        assert_eq!(edges.len(), spec.edges as usize);
        let mut seen = HashSet::new();
        for e in &edges {
            assert_ne!(e.from, e.to);
            assert!(seen.insert((e.from.clone(), e.relation.clone(), e.to.clone())));
        }
        edges
    }

    #[test]
    fn the_benchmark_graph_is_scale_free_with_unbounded_hubs() {
        let spec = GraphSpec {
            nodes: 20_000,
            edges: 100_000,
            relations: 8,
            seed: 7,
        };
        let edges = distinct_edges(&spec);
        // Barabási–Albert with m = 5 over 20k nodes: the largest hub has hundreds of edges
        // (about m * sqrt(n) = 700); a capped generator stays near 100.
        let max = max_degree(&edges);
        assert!((300..3_000).contains(&max), "max degree {max}");
        // Deterministic.
        assert_eq!(graph_edges(&spec), edges);
        // An edge file gives back exactly the graph written.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        write_edge_file(&path, &edges).unwrap();
        let (nodes, read) = read_edge_file(&path).unwrap();
        assert_eq!(read, edges);
        assert_eq!(nodes.len(), 20_000);
        std::fs::write(&path, "a b R 0.5\n# note\nb c R 1.5\n").unwrap();
        let e = read_edge_file(&path).unwrap_err().to_string();
        assert!(e.contains("g.txt:3: confidence"), "{e}");
    }

    /// FNV-1a of the lines of `spec`'s edges (checked distinct), in the order made.
    fn graph_digest(spec: &GraphSpec) -> u64 {
        let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
        for e in &distinct_edges(spec) {
            let line = format!("{} {} {} {:?}\n", e.from, e.relation, e.to, e.confidence);
            for b in line.bytes() {
                digest = (digest ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
            }
        }
        digest
    }

    /// The generator makes the same graph from build to build, so that figures of two builds
    /// are of one graph. The first spec has an extra phase (edges beyond `n * m`) of 1,500
    /// edges over two relations, which meets repeats of attached and of extra edges; its
    /// digest is that of the graph the generator made when it kept a set of every edge. The
    /// others were taken when it kept every edge's two endpoints and relation as made: one
    /// edge a node; more relations than a byte holds; an extra phase that stalls on repeats;
    /// one a third of whose edges are extra, over three relations.
    #[test]
    fn the_benchmark_graph_is_the_same_from_build_to_build() {
        let spec = |nodes, edges, relations, seed| GraphSpec {
            nodes,
            edges,
            relations,
            seed,
        };
        assert_eq!(
            graph_digest(&spec(2_000, 13_500, 2, 11)),
            1_068_101_879_822_155_039
        );
        for (s, want) in [
            (spec(30_000, 30_000, 8, 7), 5_623_870_660_092_577_100),
            (spec(60, 1_500, 300, 3), 1_890_506_873_323_228_680),
            (spec(12, 100, 1, 5), 511_923_510_842_296_257),
            (spec(300, 30_000, 3, 3), 18_184_458_626_643_196_142),
        ] {
            assert_eq!(graph_digest(&s), want, "{}", s.edges);
        }
    }

    proptest::proptest! {
        /// Whatever number of edges (none up to `m`) each node makes, one after another, the
        /// breakpoints name each edge's maker as a list of every edge's maker does.
        #[test]
        fn makers_name_the_node_that_made_each_edge(
            m in 1usize..6,
            counts in proptest::collection::vec(0usize..=6, 0..80),
            first in 1u32..4,
        ) {
            let mut makers = Makers::new(m);
            let mut each = Vec::new();
            for (j, c) in counts.iter().enumerate() {
                let node = first + j as u32;
                makers.start(node, each.len());
                each.extend(std::iter::repeat_n(node, (*c).min(m)));
            }
            for (i, v) in each.iter().enumerate() {
                proptest::prop_assert_eq!(makers.maker(i), *v, "edge {}", i);
            }
            // Breakpoints only where a node does not make `m`.
            let short = counts.iter().filter(|c| **c < m).count();
            proptest::prop_assert!(makers.breaks.len() <= 2 * short + 1);
        }
    }

    /// The graph of the edge-file tests: 500 nodes, 3,000 edges.
    const SMALL_FILE_GRAPH: GraphSpec = GraphSpec {
        nodes: 500,
        edges: 3_000,
        relations: 3,
        seed: 5,
    };

    /// A file loaded a batch at a time gives the store the graph that loading it whole
    /// gives: the same node keys under the same ids, the same edges (a repeated edge keeps
    /// its last line's confidence), whatever the batch size.
    #[test]
    fn an_edge_file_loads_a_batch_at_a_time_as_it_loads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        let mut edges = graph_edges(&SMALL_FILE_GRAPH);
        let mut again = edges[10].clone();
        again.confidence = Some(0.125);
        edges.push(again);
        write_edge_file(&path, &edges).unwrap();
        let whole = Store::create(dir.path().join("whole"), BackendKind::Redb).unwrap();
        build_graph(&whole, &BenchGraph::from_file(&path).unwrap(), 1_000).unwrap();
        let graph = |s: &Store| {
            let g = s.graph();
            let nodes: Vec<(NodeId, String)> = g.nodes().map(|n| (n.id, n.key)).collect();
            let edges: Vec<_> = g
                .edges()
                .map(|(id, c)| (id, c.from, c.to, c.relation, c.confidence.to_bits()))
                .collect();
            (nodes, edges)
        };
        let want = graph(&whole);
        assert_eq!(want.0.len(), 500);
        for per_batch in [97, 100_000] {
            let name = format!("batches of {per_batch}");
            let s = Store::create(dir.path().join(&name), BackendKind::Redb).unwrap();
            build_from_file(&s, &path, per_batch).unwrap();
            assert!(graph(&s) == want, "{name}");
        }
    }

    /// loci's traversals start where the C floor's and the peers' do (`benches/floor/khop.c`,
    /// `benches/peers/peers.py`): node `n<k>` for each `k` of the floor's sequence, whatever
    /// id the store gave that node, so the three must reach as many nodes. The first five
    /// over 500 nodes are what the floor's generator gives (computed from its formula apart).
    #[test]
    fn traversals_start_at_the_nodes_the_c_floor_starts_at() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        // Reversed, so that the store numbers the nodes in another order than their names.
        let mut edges = graph_edges(&SMALL_FILE_GRAPH);
        edges.reverse();
        write_edge_file(&path, &edges).unwrap();
        let store = Store::create(dir.path().join("s"), BackendKind::Redb).unwrap();
        build_from_file(&store, &path, 1_000).unwrap();
        let nodes = store.stats().nodes as u64;
        let starts = floor_starts(&store, nodes, 5).expect("every n<k> is in the graph");
        let g = store.graph();
        let keys: Vec<String> = starts.iter().map(|&id| g.node(id).unwrap().key).collect();
        assert_eq!(keys, ["n174", "n191", "n80", "n379", "n148"]);
        assert_ne!(starts[0], NodeId(174), "the store numbered n174 otherwise");
        drop(g);
        // A graph of other names has no floor starts: the bench picks its own.
        let other = Store::create(dir.path().join("other"), BackendKind::Redb).unwrap();
        other
            .ingest(import_events(
                vec![
                    Assertion::UpsertNode(file_node("alice")),
                    Assertion::UpsertNode(file_node("bob")),
                ],
                1024,
            ))
            .unwrap();
        assert_eq!(floor_starts(&other, 2, 5), None);
    }

    /// Each fault of an edge file is named by its line and field, as a bad input: bytes
    /// that are not UTF-8, and a key or relation longer than the store takes.
    #[test]
    fn an_edge_files_faults_are_named_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        let long = "k".repeat(crate::model::MAX_KEY_BYTES + 1);
        let relation = "R".repeat(crate::model::MAX_LABEL_BYTES + 1);
        for (text, expected) in [
            (b"a b R 0.5\nb \xff R 0.5\n".to_vec(), "g.txt:2: line"),
            (
                format!("a b R 0.5\n\n{long} b R 0.5\n").into_bytes(),
                "g.txt:3: src",
            ),
            (format!("a {long} R 0.5\n").into_bytes(), "g.txt:1: dst"),
            (
                format!("a b {relation} 0.5\n").into_bytes(),
                "g.txt:1: relation",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = read_edge_file(&path).unwrap_err();
            assert!(matches!(e, crate::Error::Input { .. }), "{e:?}");
            assert!(e.to_string().contains(expected), "{e}");
        }
        // A negative zero is zero.
        std::fs::write(&path, "a b R -0\n").unwrap();
        let (_, edges) = read_edge_file(&path).unwrap();
        assert!(edges[0].confidence.unwrap().is_sign_positive());
    }

    #[test]
    fn recall_counts_partial_hits_at_each_cutoff() {
        let mut acc = RecallAccumulator::default();
        // Gold a, b, c found at ranks 1, 3 and 6.
        acc.add(
            &ids(&["a", "x", "b", "y", "z", "c"]),
            &ids(&["a", "b", "c"]),
            4.0,
        );
        // A perfect single-passage question.
        acc.add(&ids(&["q"]), &ids(&["q"]), 2.0);
        // Nothing to recall: not counted.
        acc.add(&ids(&["q"]), &[], 100.0);
        // A complete miss.
        acc.add(&ids(&["x", "y"]), &ids(&["m", "n"]), 6.0);
        let m = acc.finish();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(
            close(m.recall_2, (1.0 / 3.0 + 1.0 + 0.0) / 3.0),
            "{}",
            m.recall_2
        );
        assert!(
            close(m.recall_5, (2.0 / 3.0 + 1.0 + 0.0) / 3.0),
            "{}",
            m.recall_5
        );
        assert!(
            close(m.recall_10, (1.0 + 1.0 + 0.0) / 3.0),
            "{}",
            m.recall_10
        );
        assert!(close(m.all_recall_5, 1.0 / 3.0), "{}", m.all_recall_5);
        // Nearest-rank percentiles of 2, 4, 6 ms.
        assert_eq!((m.p50_ms, m.p95_ms), (4.0, 6.0));
    }

    #[test]
    fn answer_scores_on_imperfect_answers() {
        let gold = ids(&["a", "b"]);
        assert_eq!(answer_scores(&ids(&["a", "b"]), &gold), (1.0, 1.0));
        // Right answer second: no hit; precision 1/2, recall 1/2.
        let (h, f) = answer_scores(&ids(&["x", "a"]), &gold);
        assert_eq!(h, 0.0);
        assert!((f - 0.5).abs() < 1e-12, "{f}");
        // One of two gold answers, first: a hit; precision 1, recall 1/2, F1 2/3.
        let (h, f) = answer_scores(&ids(&["a"]), &gold);
        assert_eq!(h, 1.0);
        assert!((f - 2.0 / 3.0).abs() < 1e-12, "{f}");
        // A repeated answer counts once.
        let (_, f) = answer_scores(&ids(&["a", "a", "a"]), &gold);
        assert!((f - 2.0 / 3.0).abs() < 1e-12, "{f}");
        assert_eq!(answer_scores(&[], &gold), (0.0, 0.0));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        assert_eq!(p50_p95(vec![5.0, 1.0, 3.0, 2.0, 4.0]), (3.0, 5.0));
        assert_eq!(p50_p95(Vec::new()), (0.0, 0.0));
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(p50_p95(hundred), (51.0, 95.0));
    }
}
