//! GraphRAG retrieval: a question in, a context pack out: ranked, confidence-filtered snippets
//! with provenance, fitted to a token budget, with no LLM.
//!
//! Pipeline (each stage a function below, in this order):
//! 1. **Seeds**: first the text evidence (the best BM25 hits over nodes and events), then
//!    the entities the question names ([`link`]) weighted by match quality and inverse
//!    frequency, plus the nodes of the best hits.
//! 2. **Expansion**: personalized PageRank by push from the seeds ([`ppr`]), or weighted k-hop
//!    with hop decay, over confidence-weighted edges. Relation, confidence and validity filters
//!    apply during expansion.
//! 3. **Candidates**: passages (reached by the graph or by text), facts (edges between
//!    well-reached nodes), events (text hits), entities.
//! 4. **Fusion**: one score per snippet from its parts (text, graph, confidence, recency,
//!    salience) by [`FusionWeights`]; passages are ranked by the graph mass that reaches them
//!    through the entities and facts that mention them, fused with their own BM25.
//! 5. **Packing**: snippets in rank order while they fit the token budget, counted on the
//!    rendered text by a [`tokens::TokenCounter`]; what did not fit is listed as cut.

pub mod dense;
pub mod link;
pub mod ppr;
mod stages;
pub mod tokens;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ordered_float::OrderedFloat;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::dynamics::consolidate::ReplacedSummaries;
use crate::dynamics::usage::{Item, Tier};
use crate::error::{Error, Result};
use crate::graph::{AdjEntry, TraversalFilter};
use crate::model::{labels, relations, EdgeId, NodeId, Value};
use crate::store::{EdgeCore, GraphRead, NameOf, Store};

use link::QuestionNames;
pub use link::{EntityIndex, Link};
pub use ppr::{personalized_pagerank, PushParams};
use stages::{Scope, Seeds, TextEvidence};
pub use tokens::{ApproxTokens, Cl100kTokens, TokenCounter, Tokenizer};

/// Decades of PPR mass the graph score part spans (see `stages::graph_part`).
const GRAPH_DECADES: f32 = 4.0;

/// What a snippet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnippetKind {
    Fact,
    Passage,
    Event,
    Entity,
}

impl SnippetKind {
    pub fn name(self) -> &'static str {
        match self {
            SnippetKind::Fact => "fact",
            SnippetKind::Passage => "passage",
            SnippetKind::Event => "event",
            SnippetKind::Entity => "entity",
        }
    }
}

impl std::str::FromStr for SnippetKind {
    type Err = Error;
    /// `fact`, `passage`, `event` or `entity`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "fact" => Ok(SnippetKind::Fact),
            "passage" => Ok(SnippetKind::Passage),
            "event" => Ok(SnippetKind::Event),
            "entity" => Ok(SnippetKind::Entity),
            other => Err(Error::InvalidArgument {
                name: "kinds".into(),
                message: format!(
                    "{}: expected fact, passage, event or entity",
                    crate::error::quoted_excerpt(other)
                ),
            }),
        }
    }
}

/// How candidates are ranked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RankingMode {
    /// Graph and text evidence fused by [`FusionWeights`].
    #[default]
    Fused,
    /// BM25 only (the baseline).
    Text,
    /// Graph expansion only.
    Graph,
}

impl std::str::FromStr for RankingMode {
    type Err = Error;
    /// `fused`, `text` or `graph`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "fused" => Ok(RankingMode::Fused),
            "text" => Ok(RankingMode::Text),
            "graph" => Ok(RankingMode::Graph),
            other => Err(Error::InvalidArgument {
                name: "mode".into(),
                message: format!(
                    "{}: expected fused, text or graph",
                    crate::error::quoted_excerpt(other)
                ),
            }),
        }
    }
}

/// How the graph is expanded from the seeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expansion {
    /// Personalized PageRank by push.
    PageRank(PushParams),
    /// Breadth-first to `RetrieveOptions::max_hops`, each hop multiplying the score by `decay`
    /// and by the edge's confidence.
    KHop { decay: f32 },
}

impl Default for Expansion {
    fn default() -> Self {
        Expansion::PageRank(PushParams::default())
    }
}

/// Weights of the score parts (each part is in [0, 1]; the graph part is logarithmic in PPR
/// mass, see [`RetrieveOptions`]).
///
/// - passage: `graph * ppr + text * bm25`
/// - fact: `graph * ppr + confidence * confidence + recency * recency + text * endpoint bm25
///   + salience * salience`
/// - event: `event_text * bm25 + salience * salience + recency * recency`
/// - entity: `graph * ppr + text * bm25 + salience * salience`
///
/// Salience is the event's score, or for a node or edge the highest of the events that assert
/// it (`dynamics::salience`); confidence is decayed to the reading time (`dynamics::decay`).
///
/// The defaults were chosen on the dev splits of MuSiQue and 2WikiMultiHopQA: passage ranking
/// is dominated by the graph (a passage is good because the question's entities lead to it),
/// with BM25 as a tie-breaker; recall was flat for text weights 0.05 to 0.15.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FusionWeights {
    pub text: f32,
    pub graph: f32,
    pub confidence: f32,
    pub recency: f32,
    pub salience: f32,
    /// Events have no graph part: their own text weight.
    pub event_text: f32,
    /// Added to every hot snippet's score: what the agent keeps coming back to wins a close
    /// call, and cannot outrank a clearly better answer.
    pub usage: f32,
}

impl Default for FusionWeights {
    fn default() -> Self {
        FusionWeights {
            text: 0.1,
            graph: 1.0,
            confidence: 0.2,
            recency: 0.1,
            salience: 0.1,
            event_text: 1.0,
            usage: 0.1,
        }
    }
}

/// Options of [`Retriever::retrieve`]. New options may be added in any release, so build them
/// from [`Default`] with the `with_*` methods (or assign fields), not a struct literal:
///
/// ```
/// use loci::retrieval::{RetrieveOptions, Tokenizer};
/// let opts = RetrieveOptions::default()
///     .with_k(5)
///     .with_budget(800)
///     .with_token_counter(Tokenizer::Cl100kBase)
///     .with_min_confidence(0.5);
/// assert_eq!((opts.k, opts.budget), (5, Some(800)));
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
#[non_exhaustive]
#[serde(default)]
pub struct RetrieveOptions {
    /// Snippets to return at most.
    pub k: usize,
    /// Token budget of the rendered snippets; `None` is unlimited.
    pub budget: Option<usize>,
    /// Edges below this confidence are neither expanded nor returned.
    pub min_confidence: f32,
    /// Only these relations (empty: all).
    pub relations: Vec<String>,
    /// Never these relations.
    pub deny_relations: Vec<String>,
    /// Only nodes with these labels as passage/entity snippets or fact endpoints (empty: all).
    pub labels: Vec<String>,
    pub deny_labels: Vec<String>,
    /// Which kinds of snippets to return (empty: all).
    pub kinds: Vec<SnippetKind>,
    /// World-time window for events and facts (by last_seen), inclusive.
    pub time: Option<(i64, i64)>,
    /// Validity is judged at this world time (default: the latest event time).
    pub as_of: Option<i64>,
    /// Also use edges whose validity ended before `as_of`.
    pub include_ended: bool,
    /// Hops for k-hop expansion and for explanation paths.
    pub max_hops: u8,
    pub mode: RankingMode,
    pub expansion: Expansion,
    pub weights: FusionWeights,
    /// BM25 hits considered as candidates and seeds.
    pub text_candidates: usize,
    /// Share of the seed mass given to BM25 hits (the rest to linked entities).
    pub text_seed_share: f32,
    /// World-time half-life of recency.
    pub recency_half_life: f64,
    /// How much an edge whose relation name or mention context shares words with the question
    /// (other than the entities it names) is favoured during expansion: its weight is
    /// multiplied by `1 + relation_boost * shared words`. This is how "the *composer* of
    /// Billy Elliot" follows "music *composed* by Stephen Warbeck" rather than the other
    /// thirty names in that passage.
    pub relation_boost: f32,
    /// How the budget counts tokens.
    pub token_counter: Tokenizer,
    /// Judge and rank facts by their stored confidence, without decay (see
    /// `dynamics::decay`); by default confidence is decayed to `as_of` (or the latest event
    /// time).
    pub raw_confidence: bool,
    /// Record what the pack returned as uses (`dynamics::usage`; flushed in batches as
    /// `USAGE` events). Benchmarks turn it off, so that one question's answer does not change
    /// the next one's ranking.
    pub record_usage: bool,
    /// Share of a passage's text score that comes from its sentence vector when the retriever
    /// has an encoder ([`Retriever::with_encoder`]); the rest is its BM25 score. Without an
    /// encoder, BM25 alone.
    pub dense_weight: f32,
    /// Share of the seed mass given to text hits when they include sentence similarity (in
    /// place of `text_seed_share`): that evidence is better, so it may steer more of the
    /// expansion. 0.3 was chosen on LoCoMo dev (recall@10 0.707 at 0.1, 0.719 at 0.3, 0.718
    /// at 0.5).
    pub dense_seed_share: f32,
}

impl Default for RetrieveOptions {
    fn default() -> Self {
        RetrieveOptions {
            k: 10,
            budget: None,
            min_confidence: 0.0,
            relations: Vec::new(),
            deny_relations: Vec::new(),
            labels: Vec::new(),
            deny_labels: Vec::new(),
            kinds: Vec::new(),
            time: None,
            as_of: None,
            include_ended: false,
            max_hops: 3,
            mode: RankingMode::Fused,
            expansion: Expansion::default(),
            weights: FusionWeights::default(),
            text_candidates: 50,
            text_seed_share: 0.1,
            recency_half_life: 24_000.0 * 7.0,
            relation_boost: 1.0,
            token_counter: Tokenizer::Approx,
            raw_confidence: false,
            record_usage: true,
            dense_weight: 0.5,
            dense_seed_share: 0.3,
        }
    }
}

impl RetrieveOptions {
    pub fn with_k(mut self, k: usize) -> Self {
        self.k = k;
        self
    }
    pub fn with_budget(mut self, tokens: usize) -> Self {
        self.budget = Some(tokens);
        self
    }
    pub fn with_token_counter(mut self, counter: Tokenizer) -> Self {
        self.token_counter = counter;
        self
    }
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
    pub fn with_kinds(mut self, kinds: impl IntoIterator<Item = SnippetKind>) -> Self {
        self.kinds = kinds.into_iter().collect();
        self
    }
    pub fn with_time(mut self, from: i64, to: i64) -> Self {
        self.time = Some((from, to));
        self
    }
    pub fn with_as_of(mut self, t: i64) -> Self {
        self.as_of = Some(t);
        self
    }
    pub fn with_include_ended(mut self, include: bool) -> Self {
        self.include_ended = include;
        self
    }
    pub fn with_max_hops(mut self, hops: u8) -> Self {
        self.max_hops = hops;
        self
    }
    pub fn with_mode(mut self, mode: RankingMode) -> Self {
        self.mode = mode;
        self
    }
    pub fn with_record_usage(mut self, record: bool) -> Self {
        self.record_usage = record;
        self
    }

    pub fn with_raw_confidence(mut self, raw: bool) -> Self {
        self.raw_confidence = raw;
        self
    }

    /// Sets an option by name (for command lines and configuration files): `mode`
    /// (fused, text, graph) and the numbers `k`,
    /// `min_confidence`, `max_hops`, `alpha`, `epsilon`, `hop_decay` (switches to k-hop
    /// expansion), `text_weight`, `graph_weight`, `confidence_weight`, `recency_weight`,
    /// `salience_weight`, `event_text_weight`, `text_candidates`, `text_seed_share`,
    /// `relation_boost`.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let bad = |m: String| Error::InvalidArgument {
            name: name.to_string(),
            message: m,
        };
        if name == "mode" {
            self.mode = match value {
                "fused" => RankingMode::Fused,
                "text" => RankingMode::Text,
                "graph" => RankingMode::Graph,
                _ => return Err(bad(format!("{value:?}: expected fused, text or graph"))),
            };
            return Ok(());
        }
        let num: f32 = value
            .parse()
            .map_err(|_| bad(format!("{value:?} is not a number")))?;
        if !num.is_finite() || num < 0.0 {
            return Err(bad(format!("{value} must be a finite number >= 0")));
        }
        let push = |o: &mut RetrieveOptions| match o.expansion {
            Expansion::PageRank(p) => p,
            Expansion::KHop { .. } => PushParams::default(),
        };
        match name {
            "k" => self.k = num as usize,
            "min_confidence" if num <= 1.0 => self.min_confidence = num,
            "max_hops" => self.max_hops = num as u8,
            "alpha" if num > 0.0 && num < 1.0 => {
                let p = push(self);
                self.expansion = Expansion::PageRank(PushParams { alpha: num, ..p });
            }
            "epsilon" if num > 0.0 => {
                let p = push(self);
                self.expansion = Expansion::PageRank(PushParams { epsilon: num, ..p });
            }
            "hop_decay" if num <= 1.0 => self.expansion = Expansion::KHop { decay: num },
            "text_weight" => self.weights.text = num,
            "graph_weight" => self.weights.graph = num,
            "confidence_weight" => self.weights.confidence = num,
            "recency_weight" => self.weights.recency = num,
            "salience_weight" => self.weights.salience = num,
            "event_text_weight" => self.weights.event_text = num,
            "text_candidates" => self.text_candidates = num as usize,
            "text_seed_share" if num <= 1.0 => self.text_seed_share = num,
            "relation_boost" => self.relation_boost = num,
            "dense_weight" if num <= 1.0 => self.dense_weight = num,
            "dense_seed_share" if num <= 1.0 => self.dense_seed_share = num,
            "min_confidence" | "alpha" | "epsilon" | "hop_decay" | "text_seed_share"
            | "dense_weight" | "dense_seed_share" => {
                return Err(bad(format!("{value} is out of range")))
            }
            _ => return Err(bad("unknown option".into())),
        }
        Ok(())
    }
}

/// The parts of a snippet's score, each in [0, 1].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoreParts {
    pub text: f32,
    pub graph: f32,
    pub confidence: f32,
    pub recency: f32,
    pub salience: f32,
    /// 1 for a hot item (pinned, or used often and recently; `dynamics::usage`), else 0.
    #[serde(default)]
    pub usage: f32,
}

/// What a snippet rests on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SnippetProvenance {
    pub edges: Vec<EdgeId>,
    /// Event sequence numbers.
    pub events: Vec<u64>,
    /// Passage keys.
    pub passages: Vec<String>,
    /// A fact's edge by what outlasts a deletion, read with it: a deletion or forgetting
    /// gives every edge id anew, and a record of `e28` then named another fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact: Option<FactKey>,
}

/// An edge by its ends' keys and its relation, which no deletion gives anew.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FactKey {
    pub from: String,
    pub relation: String,
    pub to: String,
}

/// One ranked piece of context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snippet {
    pub kind: SnippetKind,
    /// Passage or node key, `e<id>` for a fact, `event:<seq>` for an event.
    pub id: String,
    /// The text as it will be sent.
    pub text: String,
    pub score: f32,
    pub parts: ScoreParts,
    pub provenance: SnippetProvenance,
    /// Why it ranked: seeds, text and graph evidence, a path from a seed.
    pub why: Vec<String>,
    pub tokens: usize,
}

/// A snippet left out because it did not fit the budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cut {
    pub id: String,
    pub kind: SnippetKind,
    pub score: f32,
    pub tokens: usize,
}

/// The answer to a retrieval call.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ContextPack {
    pub question: String,
    pub snippets: Vec<Snippet>,
    pub budget: Option<usize>,
    pub tokens_used: usize,
    pub token_counter: Tokenizer,
    /// Ranked snippets (within the first k) that did not fit the budget.
    pub cut: Vec<Cut>,
    /// The seeds linked in the question.
    pub seeds: Vec<SeedReport>,
    /// Time taken; left out of the JSON form, so the same store and question give the same
    /// bytes.
    #[serde(skip)]
    pub elapsed_us: u64,
}

impl ContextPack {
    /// The snippets' texts joined as they would be sent.
    pub fn render(&self) -> String {
        self.snippets
            .iter()
            .map(|s| s.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A seed, as reported in a pack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedReport {
    pub key: String,
    pub name: String,
    pub source: String,
    pub weight: f32,
}

/// The retrieval engine over a store. Build it once and reuse it for many questions: it holds
/// the entity dictionary and edge terms, and rebuilds them itself when the store has moved on
/// since they were built (a stale dictionary would silently never link names ingested later).
pub struct Retriever<'s> {
    store: &'s Store,
    cache: RetrieverCache,
    /// Sentence vectors of the passages, when the retriever was given an encoder.
    dense: Option<Arc<dense::PassageVectors>>,
}

/// What retrievers derive from a store (the entity dictionary), shared between retrievers of
/// one store: a server keeps one and hands it to the retriever of each request, so that the
/// dictionary is built once per change of the store, by one thread, not once per request.
#[derive(Clone, Default)]
pub struct RetrieverCache(Arc<CacheSlot>);

#[derive(Default)]
struct CacheSlot {
    derived: RwLock<Option<Arc<Derived>>>,
    /// Held while rebuilding, so that many readers seeing a stale dictionary at once wait for
    /// one rebuild instead of each making its own.
    rebuilding: std::sync::Mutex<()>,
    /// How long a dictionary may lag the store (see [`RetrieverCache::with_max_staleness`]).
    max_staleness: std::time::Duration,
}

impl RetrieverCache {
    /// A cache whose dictionary may lag the store by up to `lag` (default: never): a server
    /// taking appends between questions rebuilds it at most once per `lag`, on one request's
    /// thread, while the other requests go on with the previous one. What lags is the linking
    /// of names first ingested within `lag`, and the facts a question can name by their
    /// relation alone; the graph, the text index and the snippets are always current, and a
    /// deletion (which gives every id anew) is never lagged over.
    pub fn with_max_staleness(lag: std::time::Duration) -> Self {
        RetrieverCache(Arc::new(CacheSlot {
            max_staleness: lag,
            ..Default::default()
        }))
    }

    /// Whether a stale dictionary may still be used: it was built within the lag, from the
    /// ids the store has now (a deletion gives every id anew: a dictionary of before it would
    /// name other nodes, edges and relations).
    fn may_lag(&self, d: &Derived, ids_epoch: u64) -> bool {
        !self.0.max_staleness.is_zero()
            && d.made.elapsed() < self.0.max_staleness
            && d.ids_epoch == ids_epoch
    }

    fn get(&self) -> Option<Arc<Derived>> {
        // A poisoned lock only means another thread panicked while holding it; the Arc inside
        // is always a complete build, so it is still safe to use.
        self.0
            .derived
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn put(&self, fresh: &Arc<Derived>) {
        let mut slot = self.0.derived.write().unwrap_or_else(|e| e.into_inner());
        // Ids epochs only grow; a deletion's state is newer at the same log position (its
        // documents are written before the index's position moves).
        let newer =
            |d: &Arc<Derived>| (d.ids_epoch, d.built_at) < (fresh.ids_epoch, fresh.built_at);
        if slot.as_ref().is_none_or(newer) {
            *slot = Some(fresh.clone());
        }
    }
}

/// Live nodes up to which retrievers link names by a dictionary in memory, built at the first
/// question after each change of the graph; past it, each question looks its spans up in the
/// full-text index. The dictionary costs about 200 bytes and 1.7 µs a node at each rebuild
/// (20M nodes: 3.9 GB, and 35 s of a first answer's 42); the index about 0.1 ms a question
/// (MuSiQue's dev split, 23.5k nodes: p50 0.77-0.82 ms against 0.67-0.70, links the same).
/// An agent that writes between questions rebuilds the dictionary each time: past 100k nodes
/// that costs more than the index would.
const DICTIONARY_MAX_NODES: usize = 100_000;

/// What the engine derives from one store state.
struct Derived {
    /// The name dictionary, for a graph of at most [`DICTIONARY_MAX_NODES`] nodes; a larger
    /// one links through the full-text index ([`link::QuestionNames`]).
    index: Option<EntityIndex>,
    terms: EdgeTerms,
    built_at: u64,
    /// The graph it was built from (`Store::graph_epoch`).
    graph_epoch: u64,
    /// The ids it holds are of this epoch (`Store::ids_epoch`).
    ids_epoch: u64,
    /// When it was built (for a cache that may lag).
    made: Instant,
}

impl Derived {
    fn build(store: &Store) -> Result<Self> {
        // Read the position first: a batch landing during the build leaves `built_at` behind
        // what was read, which costs one more rebuild, never a missed batch.
        let built_at = applied_seq(store);
        let graph_epoch = store.graph_epoch();
        let ids_epoch = store.ids_epoch();
        let g = store.graph();
        let index =
            (g.adjacency().node_count() <= DICTIONARY_MAX_NODES).then(|| EntityIndex::build(&g));
        drop(g);
        Ok(Derived {
            index,
            terms: EdgeTerms::build(store)?,
            built_at,
            graph_epoch,
            ids_epoch,
            made: Instant::now(),
        })
    }
}

/// The last event sequence number whose changes are in both the graph and the text index
/// (the index is committed after the graph is updated). An atomic read: cheap enough to check
/// on every call, unlike `Store::stats`, which measures the disk.
fn applied_seq(store: &Store) -> u64 {
    store.text_index().indexed_seq()
}

/// Facts a relation may hold at once (edges whose validity has no end) and still seed a
/// question that names it and has no other seed (`stages::NamedFacts`): a relation with more
/// (a mention, a villager's offers in a large world) names a kind of link, not an answer, and
/// its ends would spread the seed mass over much of the graph. Ended facts do not count: a
/// home for each move is still one home at a time.
const NAMED_RELATION_MAX_OPEN: usize = 64;

/// Edges, ended ones included, kept of a relation to seed from (each is checked against the
/// time asked about, so an ended one can answer as of its time); one with more is not kept.
const NAMED_RELATION_MAX_EDGES: usize = 1024;

/// The analysed words of every relation name and of every mention context, as term ids, so
/// that expansion can weigh an edge by what it shares with the question; and the edges of the
/// relations that have few, so that a question naming one can start from its facts.
#[derive(Default)]
struct EdgeTerms {
    ids: HashMap<String, u32>,
    by_relation: Vec<Vec<u32>>,
    /// Indexed by edge id; empty for edges without a context.
    by_edge: Vec<Box<[u32]>>,
    /// The edges of the relations with few. Finding them reads every edge, which took 4 s at
    /// 100M edges, and only a question with no other seed needs them: they are found with the
    /// mentions' contexts when the graph has mentions, else by the first question that needs
    /// them ([`EdgeTerms::few_edges`]).
    few: OnceLock<FewEdges>,
}

/// The edges of the relations with few ([`NAMED_RELATION_MAX_OPEN`],
/// [`NAMED_RELATION_MAX_EDGES`]), by relation then id; relation `r`'s are
/// `edges[at[r]..at[r + 1]]` (none for a commoner relation).
#[derive(Default)]
struct FewEdges {
    edges: Vec<EdgeId>,
    at: Vec<usize>,
}

impl FewEdges {
    /// The few edges of each of the first `relations` relations among `edges` (every live
    /// edge, in id order), showing each edge to `each` as it passes.
    fn collect(
        relations: usize,
        edges: impl Iterator<Item = (EdgeId, EdgeCore)>,
        mut each: impl FnMut(EdgeId, &EdgeCore),
    ) -> Self {
        // By relation: its facts without an end so far, and its edges while it has few.
        let mut few: Vec<(usize, Option<Vec<EdgeId>>)> = vec![(0, Some(Vec::new())); relations];
        for (id, e) in edges {
            each(id, &e);
            if let Some((open, slot)) = few.get_mut(e.relation as usize) {
                *open += usize::from(e.valid_to == i64::MAX);
                match slot {
                    Some(ids)
                        if *open <= NAMED_RELATION_MAX_OPEN
                            && ids.len() < NAMED_RELATION_MAX_EDGES =>
                    {
                        ids.push(id)
                    }
                    _ => *slot = None,
                }
            }
        }
        let mut out = FewEdges {
            edges: Vec::new(),
            at: vec![0],
        };
        for (_, ids) in few {
            out.edges.extend(ids.unwrap_or_default());
            out.at.push(out.edges.len());
        }
        out
    }

    /// Relation `rel`'s edges, if it has few enough to seed from (else none), by id.
    fn of(&self, rel: u32) -> &[EdgeId] {
        let rel = rel as usize;
        match (self.at.get(rel), self.at.get(rel + 1)) {
            (Some(&a), Some(&b)) => self.edges.get(a..b).unwrap_or_default(),
            _ => &[],
        }
    }
}

impl EdgeTerms {
    fn build(store: &Store) -> Result<Self> {
        let text = store.text_index();
        let mut t = EdgeTerms::default();
        let g = store.graph();
        let intern = |words: Vec<String>, ids: &mut HashMap<String, u32>| -> Vec<u32> {
            let mut v: Vec<u32> = words
                .into_iter()
                .map(|w| {
                    let next = ids.len() as u32;
                    *ids.entry(w).or_insert(next)
                })
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let mut rel = 0;
        while let Some(name) = g.relation_name_checked(rel) {
            let words = text.analyze(&name.replace('_', " "))?;
            t.by_relation.push(intern(words, &mut t.ids));
            rel += 1;
        }
        let mut with_context: Vec<EdgeId> = Vec::new();
        if let Some(mentions) = g.relation_id(relations::MENTIONS) {
            let few = FewEdges::collect(rel as usize, g.edges(), |id, e| {
                if e.relation == mentions {
                    with_context.push(id);
                }
            });
            t.few = OnceLock::from(few);
        }
        drop(g);
        for id in with_context {
            let Some(edge) = store.edge(id)? else {
                continue;
            };
            let Some(ctx) = edge.props.get("context").and_then(Value::as_str) else {
                continue;
            };
            let words = text.analyze(ctx)?;
            let idx = id.0 as usize;
            if t.by_edge.len() <= idx {
                t.by_edge.resize(idx + 1, Box::default());
            }
            t.by_edge[idx] = intern(words, &mut t.ids).into_boxed_slice();
        }
        Ok(t)
    }

    /// Term ids of `words` that some edge knows (sorted).
    fn lookup(&self, words: &[String]) -> Vec<u32> {
        let mut v: Vec<u32> = words
            .iter()
            .filter_map(|w| self.ids.get(w).copied())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The relations whose every word is in `query` (sorted term ids), by id.
    fn named_relations(&self, query: &[u32]) -> Vec<u32> {
        (0u32..)
            .zip(&self.by_relation)
            .filter(|(_, words)| {
                !words.is_empty() && words.iter().all(|w| query.binary_search(w).is_ok())
            })
            .map(|(rel, _)| rel)
            .collect()
    }

    /// The edges of relation `rel` when it has few enough to seed from (else none), by id;
    /// found in `g` if no question needed them before.
    fn few_edges(&self, g: &GraphRead<'_>, rel: u32) -> &[EdgeId] {
        self.few
            .get_or_init(|| FewEdges::collect(self.by_relation.len(), g.edges(), |_, _| {}))
            .of(rel)
    }

    /// How many words relation `rel`'s name has.
    fn relation_words(&self, rel: u32) -> usize {
        self.by_relation.get(rel as usize).map_or(0, Vec::len)
    }

    /// How many of `query` (sorted term ids) the edge's relation and context share.
    #[inline]
    fn overlap(&self, e: &AdjEntry, query: &[u32]) -> usize {
        if query.is_empty() {
            return 0;
        }
        let count = |terms: &[u32]| {
            terms
                .iter()
                .filter(|t| query.binary_search(t).is_ok())
                .count()
        };
        let rel = self
            .by_relation
            .get(e.relation() as usize)
            .map_or(0, |r| count(r));
        let ctx = self.by_edge.get(e.edge as usize).map_or(0, |c| count(c));
        rel + ctx
    }
}

struct Candidate {
    kind: SnippetKind,
    node: Option<NodeId>,
    edge: Option<EdgeId>,
    event: Option<u64>,
    parts: ScoreParts,
    score: f32,
}

fn fuse(kind: SnippetKind, p: &ScoreParts, w: &FusionWeights, mode: RankingMode) -> f32 {
    match mode {
        RankingMode::Text => p.text,
        RankingMode::Graph => p.graph,
        RankingMode::Fused => {
            w.usage * p.usage
                + match kind {
                    SnippetKind::Passage => {
                        w.text * p.text + w.graph * p.graph + w.salience * p.salience
                    }
                    SnippetKind::Fact => {
                        w.graph * p.graph
                            + w.confidence * p.confidence
                            + w.recency * p.recency
                            + w.text * p.text
                            + w.salience * p.salience
                    }
                    SnippetKind::Event => {
                        w.event_text * p.text + w.salience * p.salience + w.recency * p.recency
                    }
                    SnippetKind::Entity => {
                        w.graph * p.graph + w.text * p.text + w.salience * p.salience
                    }
                }
        }
    }
}

/// What a pack returned, as usage items: its nodes (passages, entities), facts, events, and
/// every event and passage a snippet cites.
fn used_items(g: &GraphRead<'_>, snippets: &[Snippet]) -> Vec<Item> {
    let mut items = Vec::new();
    for s in snippets {
        match s.kind {
            SnippetKind::Passage | SnippetKind::Entity => items.push(Item::Node(s.id.clone())),
            SnippetKind::Fact | SnippetKind::Event => {}
        }
        items.extend(s.provenance.edges.iter().filter_map(|e| g.edge_item(*e)));
        items.extend(s.provenance.events.iter().map(|seq| Item::Event(*seq)));
        items.extend(s.provenance.passages.iter().cloned().map(Item::Node));
    }
    items
}

/// A node's or edge's properties as `key: value` parts (strings bare, the rest as JSON), all but
/// `text`, in key order.
pub(crate) fn prop_parts(props: &crate::model::Props) -> Vec<String> {
    props
        .iter()
        .filter(|(k, _)| k.as_str() != "text")
        .map(|(k, v)| match v {
            Value::Str(s) => format!("{k}: {s}"),
            other => format!("{k}: {}", serde_json::to_string(other).unwrap_or_default()),
        })
        .collect()
}

fn describe_props(props: &crate::model::Props) -> String {
    let parts = prop_parts(props);
    if parts.is_empty() {
        String::new()
    } else {
        format!(" {{{}}}", parts.join(", "))
    }
}

/// Refuses a relation both asked for and `denied` (the filter named `field`): denied, it
/// leaves nothing of what was asked, which is a slip, not a question (`--relation OFFERS
/// --deny-relation OFFERS` had found no fact, without a word).
pub fn refuse_asked_and_denied(asked: &[String], denied: &[String], field: &str) -> Result<()> {
    match denied.iter().find(|r| asked.contains(r)) {
        Some(both) => Err(Error::InvalidArgument {
            name: field.into(),
            message: format!("{both:?} is also asked for: a relation is asked for or denied"),
        }),
        None => Ok(()),
    }
}

/// Refuses options no retrieval can honour.
fn check_options(opts: &RetrieveOptions) -> Result<()> {
    if opts.k == 0 {
        return Err(Error::InvalidArgument {
            name: "k".into(),
            message: "must be at least 1".into(),
        });
    }
    // A blank relation name matches no edge: as a filter it left only entity snippets.
    for (name, list) in [
        ("relations", &opts.relations),
        ("deny_relations", &opts.deny_relations),
    ] {
        crate::text::refuse_any_blank(list.iter().map(String::as_str), name)?;
    }
    refuse_asked_and_denied(&opts.relations, &opts.deny_relations, "deny_relations")?;
    if !(0.0..=1.0).contains(&opts.min_confidence) {
        return Err(Error::InvalidArgument {
            name: "min_confidence".into(),
            // A number past f32's range in a request reaches here as infinity.
            message: match opts.min_confidence {
                v if v.is_infinite() => format!(
                    "a number {} (past f32's range) is outside [0, 1]",
                    if v < 0.0 {
                        "below -3.4e38"
                    } else {
                        "above 3.4e38"
                    }
                ),
                v => format!("{v} is outside [0, 1]"),
            },
        });
    }
    // World times are bounded as an event's `ts` is: `as_of` at i64::MIN had judged every
    // fact fresh, and ages past the range overflow the arithmetic of decay and recency.
    let times = opts.as_of.map(|t| ("as_of", t)).into_iter().chain(
        opts.time
            .into_iter()
            .flat_map(|(from, to)| [("time", from), ("time", to)]),
    );
    for (name, t) in times {
        if let Some(message) = crate::store::time_out_of_range(t) {
            return Err(Error::InvalidArgument {
                name: name.into(),
                message,
            });
        }
    }
    Ok(())
}

/// A snippet's id, its text, and the node it is anchored at (for its seed and path).
type Rendered = (String, String, Option<NodeId>);

impl<'s> Retriever<'s> {
    /// The store it retrieves from.
    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// Builds the engine (the entity dictionary) for the store's current state.
    pub fn new(store: &'s Store) -> Result<Self> {
        Self::with_cache(store, RetrieverCache::default())
    }

    /// A retriever that shares `cache` (built here if empty or stale) with other retrievers of
    /// the same store.
    pub fn with_cache(store: &'s Store, cache: RetrieverCache) -> Result<Self> {
        let r = Retriever {
            store,
            cache,
            dense: None,
        };
        r.current()?;
        Ok(r)
    }

    /// This retriever with dense evidence: the store's passages embedded by `encoder` now
    /// (see [`dense`]), each question embedded as it comes, and a passage's text score made
    /// of its BM25 and its similarity by [`RetrieveOptions::dense_weight`].
    pub fn with_encoder(self, encoder: Arc<crate::embed::SentenceEncoder>) -> Self {
        let vectors = dense::PassageVectors::build(self.store, encoder);
        self.with_passage_vectors(Arc::new(vectors))
    }

    /// This retriever with passage vectors already built (shared between retrievers of one
    /// store, as the cache is).
    pub fn with_passage_vectors(mut self, vectors: Arc<dense::PassageVectors>) -> Self {
        self.dense = Some(vectors);
        self
    }

    /// The cache this retriever fills, to hand to the next one.
    pub fn cache(&self) -> RetrieverCache {
        self.cache.clone()
    }

    /// The log position the engine's dictionary was last built at.
    pub fn built_at(&self) -> u64 {
        self.cache.get().map_or(0, |d| d.built_at)
    }

    fn snapshot(&self) -> Result<Arc<Derived>> {
        match self.cache.get() {
            Some(d) => Ok(d),
            None => self.current(),
        }
    }

    /// The derived state for the store as it is now, rebuilt first if the store has applied
    /// events since the last build.
    fn current(&self) -> Result<Arc<Derived>> {
        // Only the graph matters to the dictionary: events that change no node or edge (notes,
        // observations, uses) leave it valid. Never one of other ids: a deletion gives every
        // id anew, and leaves the index's position where it was until it has written every
        // node's document again.
        let ids_epoch = self.store.ids_epoch();
        let current = |d: &Derived| {
            d.ids_epoch == ids_epoch
                && (d.built_at == applied_seq(self.store)
                    || d.graph_epoch == self.store.graph_epoch())
        };
        let cached = self.cache.get();
        if let Some(d) = &cached {
            if current(d) || self.cache.may_lag(d, ids_epoch) {
                return Ok(d.clone());
            }
        }
        let _one_at_a_time = match (self.cache.0.rebuilding.try_lock(), cached) {
            (Ok(guard), _) => guard,
            // Someone is rebuilding: a cache that may lag goes on with what it has.
            (Err(_), Some(d))
                if !self.cache.0.max_staleness.is_zero() && d.ids_epoch == ids_epoch =>
            {
                return Ok(d)
            }
            (Err(_), _) => self
                .cache
                .0
                .rebuilding
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        };
        // Another thread may have rebuilt it while this one waited.
        if let Some(d) = self.cache.get().filter(|d| current(d)) {
            return Ok(d);
        }
        let fresh = Arc::new(Derived::build(self.store)?);
        self.cache.put(&fresh);
        Ok(fresh)
    }

    /// The entities linked in `question` (with the dictionary of the last build if a rebuild
    /// fails).
    pub fn link(&self, question: &str) -> Vec<Link> {
        match self.current().or_else(|_| self.snapshot()) {
            Ok(d) => match self.link_with(&d, question) {
                Ok((links, _)) => links,
                Err(e) => {
                    tracing::warn!(error = %e, "the question's names could not be looked up in the full-text index; nothing linked");
                    Vec::new()
                }
            },
            Err(_) => Vec::new(),
        }
    }

    /// The entities `question` names, and the live nodes they were linked among: by the
    /// dictionary when `derived` holds one, else through the full-text index.
    fn link_with(&self, derived: &Derived, question: &str) -> Result<(Vec<Link>, usize)> {
        if let Some(index) = &derived.index {
            return Ok((index.link(question), index.node_count()));
        }
        let g = self.store.graph_for_search();
        let names = QuestionNames::look_up(&g, question, |forms| {
            self.store.nodes_under_name_terms(&g, forms)
        })?;
        Ok((names.link(), names.node_count()))
    }

    /// Refuses relation and label filters that only a slip of case or whitespace keeps from
    /// naming the store's ([`GraphRead::refuse_near_misses`]).
    fn refuse_near_misses(&self, opts: &RetrieveOptions) -> Result<()> {
        let g = self.store.graph();
        g.refuse_near_misses("relations", NameOf::Relation, &opts.relations)?;
        g.refuse_near_misses("deny_relations", NameOf::Relation, &opts.deny_relations)?;
        g.refuse_near_misses("labels", NameOf::Label, &opts.labels)
    }

    /// Retrieves a context pack for `question`: text evidence → seeds → expansion →
    /// candidates → ranking → packing (the stages are in [`stages`]).
    pub fn retrieve(&self, question: &str, opts: &RetrieveOptions) -> Result<ContextPack> {
        let started = Instant::now();
        crate::text::refuse_blank(question, "question")?;
        check_options(opts)?;
        self.refuse_near_misses(opts)?;
        // The stages take ids from the graph and read them back after it (events, rendering):
        // a deletion in between gives every id anew, and the pack is made again.
        let (mut pack, used) = self
            .store
            .with_stable_ids(|| self.retrieve_once(question, opts))?;
        if opts.record_usage {
            self.store.record_use(used);
        }
        pack.elapsed_us = started.elapsed().as_micros() as u64;
        Ok(pack)
    }

    /// [`Retriever::retrieve`] over the ids of one graph, if no deletion came between its
    /// stages; with the items the pack holds, to record as used.
    fn retrieve_once(
        &self,
        question: &str,
        opts: &RetrieveOptions,
    ) -> Result<(ContextPack, Vec<Item>)> {
        let derived = self.current()?;
        let now = match opts.as_of {
            Some(t) => t,
            None => self.store.latest_event_time()?.unwrap_or(0),
        };
        let text = TextEvidence::gather(self.store, question, opts, self.dense.as_deref())?;
        let (links, live_nodes) = self.link_with(&derived, question)?;
        let mut seeds = Seeds::pick(links, live_nodes, &text, opts);
        let relation_terms = stages::relation_terms(
            &derived.terms,
            self.store.text_index(),
            question,
            &seeds.links,
        )?;
        let scope = Scope::new(self.store.graph(), opts, now);
        if seeds.weights.is_empty() {
            seeds.add_named(scope.named_facts(&derived.terms, &relation_terms));
        }
        let graph_scores = scope.expand(&derived.terms, &relation_terms, &seeds);
        let mut candidates = scope.candidates(&text, &graph_scores, &seeds.named);
        // Events are read from the store, outside the graph read.
        drop(scope);
        if opts.kinds.is_empty() || opts.kinds.contains(&SnippetKind::Event) {
            candidates.extend(self.event_candidates(&text, now, opts)?);
        }
        self.prefer_hot(&mut candidates, now, opts);
        stages::rank(&mut candidates, opts.k);
        self.pack(question, candidates, &seeds, &text, opts)
    }

    /// Events the text search hit, within the time window.
    fn event_candidates(
        &self,
        text: &TextEvidence,
        now: i64,
        opts: &RetrieveOptions,
    ) -> Result<Vec<Candidate>> {
        let mut out = Vec::new();
        // The text search left out the summaries a later one replaced (`Store::search`).
        for (seq, score) in &text.events {
            let Some(ev) = self.store.event(*seq)? else {
                continue;
            };
            if !stages::in_window(ev.ts, opts) {
                continue;
            }
            let parts = ScoreParts {
                text: *score,
                salience: ev.salience,
                recency: stages::recency(now, ev.ts, opts),
                ..Default::default()
            };
            out.push(Candidate {
                kind: SnippetKind::Event,
                node: None,
                edge: None,
                event: Some(*seq),
                score: fuse(SnippetKind::Event, &parts, &opts.weights, opts.mode),
                parts,
            });
        }
        Ok(out)
    }

    /// Renders the ranked candidates in order while they fit the token budget (the rest are
    /// listed as cut) and reports the linked seeds; with the items the pack returned, for the
    /// caller to record as used.
    fn pack(
        &self,
        question: &str,
        candidates: Vec<Candidate>,
        seeds: &Seeds,
        text: &TextEvidence,
        opts: &RetrieveOptions,
    ) -> Result<(ContextPack, Vec<Item>)> {
        let counter = opts.token_counter.counter();
        let seed_set = seeds.nodes();
        // Read once for the pack, and only for a pack with a fact: a fact's provenance leaves
        // out the summaries a later one replaced.
        let summaries = match candidates.iter().any(|c| c.kind == SnippetKind::Fact) {
            true => Some(crate::dynamics::consolidate::replaced_summaries(
                self.store,
            )?),
            false => None,
        };
        let none = ReplacedSummaries::default();
        let replaced = summaries.as_deref().unwrap_or(&none);
        let mut snippets = Vec::new();
        let mut cut = Vec::new();
        let mut used = 0usize;
        for c in candidates {
            let mut s = self.render(&c, seeds, (&text.nodes, &seed_set), replaced, opts)?;
            s.tokens = counter.count(&s.text);
            match opts.budget {
                Some(b) if used + s.tokens > b => cut.push(Cut {
                    id: s.id,
                    kind: s.kind,
                    score: s.score,
                    tokens: s.tokens,
                }),
                _ => {
                    used += s.tokens;
                    snippets.push(s);
                }
            }
        }
        let g = self.store.graph();
        let mut seeds_report: Vec<SeedReport> = seeds
            .links
            .iter()
            .filter_map(|l| {
                // Key and name read in place: a speaker's name links every turn they said.
                Some(SeedReport {
                    key: g.node_key(l.node)?.to_string(),
                    name: g.node_name(l.node)?.to_string(),
                    source: format!("named in question as {:?}", l.phrase),
                    weight: seeds.weights.get(&l.node).copied().unwrap_or(0.0),
                })
            })
            .collect();
        seeds_report.extend(seeds.weights.iter().filter_map(|(n, w)| {
            let relation = g.relation_name_checked(seeds.named.relation_of(*n)?)?;
            Some(SeedReport {
                key: g.node_key(*n)?.to_string(),
                name: g.node_name(*n)?.to_string(),
                source: format!("an end of a fact whose relation the question names ({relation})"),
                weight: *w,
            })
        }));
        seeds_report.sort_by(|a, b| {
            OrderedFloat(b.weight)
                .cmp(&OrderedFloat(a.weight))
                .then_with(|| a.key.cmp(&b.key))
        });
        let used_items = used_items(&g, &snippets);
        drop(g);
        let pack = ContextPack {
            question: question.to_string(),
            snippets,
            budget: opts.budget,
            tokens_used: used,
            token_counter: opts.token_counter,
            cut,
            seeds: seeds_report,
            elapsed_us: 0,
        };
        Ok((pack, used_items))
    }

    /// Marks hot candidates (`dynamics::usage`) and scores them again with the usage weight.
    fn prefer_hot(&self, candidates: &mut [Candidate], now: i64, opts: &RetrieveOptions) {
        let g = self.store.graph();
        for c in candidates.iter_mut() {
            let tier = match (c.node, c.edge, c.event) {
                (Some(n), _, _) => g.node_tier(n, now),
                (_, Some(e), _) => g.edge_tier(e, now),
                (_, _, Some(seq)) => g.event_tier(seq, now),
                _ => Tier::Warm,
            };
            if tier == Tier::Hot {
                c.parts.usage = 1.0;
                c.score = fuse(c.kind, &c.parts, &opts.weights, opts.mode);
            }
        }
    }

    /// A candidate as a snippet: its text, what it rests on, and why it was chosen.
    fn render(
        &self,
        c: &Candidate,
        seeds: &Seeds,
        (text_node, seed_nodes): (&BTreeMap<NodeId, f32>, &BTreeSet<NodeId>),
        replaced: &ReplacedSummaries,
        opts: &RetrieveOptions,
    ) -> Result<Snippet> {
        let mut provenance = SnippetProvenance::default();
        let (id, text, anchor) = match c.kind {
            SnippetKind::Passage | SnippetKind::Entity => self.render_node(c, &mut provenance)?,
            SnippetKind::Fact => self.render_fact(c, replaced, &mut provenance)?,
            SnippetKind::Event => self.render_event(c, &mut provenance)?,
        };
        let why = self.why_chosen(c, anchor, seeds, text_node, seed_nodes, opts);
        let text = crate::text::one_line(&text).into_owned();
        Ok(Snippet {
            kind: c.kind,
            id,
            text,
            score: c.score,
            parts: c.parts,
            provenance,
            why,
            tokens: 0,
        })
    }

    /// A passage (its title and text) or an entity ([`Self::describe_entity`]): its id, text
    /// and the node it stands for.
    fn render_node(&self, c: &Candidate, provenance: &mut SnippetProvenance) -> Result<Rendered> {
        let n = c
            .node
            .and_then(|n| self.store.node(n))
            .ok_or_else(|| Error::NotFound("node".into()))?;
        let text = if c.kind == SnippetKind::Passage {
            provenance.passages.push(n.key.clone());
            let body = n.props.get("text").and_then(Value::as_str).unwrap_or("");
            format!("{}: {}", n.name, body)
        } else {
            self.describe_entity(&n)
        };
        Ok((n.key.clone(), text, Some(n.id)))
    }

    /// A fact as a sentence with its confidence (and what it was when last seen, if it has
    /// decayed), when it was last seen and its validity; it rests on its edge, its latest three
    /// events and the passages they cite. Anchored at its source.
    fn render_fact(
        &self,
        c: &Candidate,
        replaced: &ReplacedSummaries,
        provenance: &mut SnippetProvenance,
    ) -> Result<Rendered> {
        let e = c
            .edge
            .and_then(|e| self.store.edge(e).transpose())
            .transpose()?
            .ok_or_else(|| Error::NotFound("edge".into()))?;
        let name = |n: NodeId| {
            self.store
                .node(n)
                .map(|x| x.name)
                .unwrap_or_else(|| n.to_string())
        };
        let validity = match (e.valid_from, e.valid_to) {
            (None, None) => String::new(),
            (f, t) => format!(
                ", valid {}..{}",
                f.map(|x| x.to_string()).unwrap_or_default(),
                t.map(|x| x.to_string()).unwrap_or_default()
            ),
        };
        // World time 0 is what imported facts carry (a corpus has no world clock):
        // "last seen 0" would tell the reader nothing.
        let seen = if e.last_seen == 0 {
            String::new()
        } else {
            format!(", last seen t={}", e.last_seen)
        };
        // A decayed fact says what it was believed at when last seen, so the reader can
        // tell "doubtful" from "old".
        let decayed = if (c.parts.confidence - e.confidence).abs() >= 0.005 {
            format!(", {:.2} when last seen", e.confidence)
        } else {
            String::new()
        };
        let text = format!(
            "{} {} {}{} (confidence {:.2}{decayed}{seen}{validity})",
            name(e.from),
            e.relation,
            name(e.to),
            describe_props(&e.props),
            c.parts.confidence,
        );
        provenance.edges.push(e.id);
        if let (Some(from), Some(to)) = (self.store.node(e.from), self.store.node(e.to)) {
            provenance.fact = Some(FactKey {
                from: from.key,
                relation: e.relation.clone(),
                to: to.key,
            });
        }
        // A summary a later one of its period replaced is left out, as search and the
        // timeline leave it: the later one restates what it did (a fact had named both).
        let evidence = e.evidence.iter().rev();
        for seq in evidence.filter(|s| !replaced.contains(**s)).take(3) {
            provenance.events.push(*seq);
            if let Some(ev) = self.store.event(*seq)? {
                for p in ev.evidence {
                    if self
                        .store
                        .node_by_key(&p)
                        .is_some_and(|n| n.label == labels::PASSAGE)
                        && !provenance.passages.contains(&p)
                    {
                        provenance.passages.push(p);
                    }
                }
            }
        }
        Ok((e.id.to_string(), text, Some(e.from)))
    }

    /// An event as a line: its time, kind, actor, place and the text of its payload.
    fn render_event(&self, c: &Candidate, provenance: &mut SnippetProvenance) -> Result<Rendered> {
        let seq = c.event.unwrap_or(0);
        let ev = self
            .store
            .event(seq)?
            .ok_or_else(|| Error::NotFound(format!("event {seq}")))?;
        provenance.events.push(seq);
        let place = ev
            .place
            .as_deref()
            .map(|p| format!(" at {p}"))
            .unwrap_or_default();
        let mut body = String::new();
        ev.payload.collect_text(&mut body);
        Ok((
            format!("event:{seq}"),
            format!("[t={}] {} by {}{place}: {body}", ev.ts, ev.kind, ev.actor),
            None,
        ))
    }

    /// Why a candidate anchored at `anchor` was chosen: the seed it is (a phrase of the
    /// question, a text hit, an end of a fact whose relation the question names), its text and
    /// graph parts, and the path from a seed.
    fn why_chosen(
        &self,
        c: &Candidate,
        anchor: Option<NodeId>,
        seeds: &Seeds,
        text_node: &BTreeMap<NodeId, f32>,
        seed_nodes: &BTreeSet<NodeId>,
        opts: &RetrieveOptions,
    ) -> Vec<String> {
        let mut why = Vec::new();
        // Whether the text part is the question naming the fact's relation, not BM25.
        let relation_named =
            c.kind == SnippetKind::Fact && c.edge.is_some_and(|e| seeds.named.contains(e));
        if let Some(n) = anchor {
            if let Some(l) = seeds.links.iter().find(|l| l.node == n) {
                why.push(format!(
                    "seed: question names {:?} (quality {:.2}, idf {:.2})",
                    l.phrase, l.quality, l.idf
                ));
            } else if seed_nodes.contains(&n) && text_node.contains_key(&n) {
                why.push("seed: text hit".into());
            } else if let Some(rel) = seeds.named.relation_of(n) {
                let rel = self
                    .store
                    .graph()
                    .relation_name_checked(rel)
                    .map(str::to_string);
                if let Some(rel) = rel {
                    why.push(format!(
                        "seed: an end of a fact whose relation the question names ({rel})"
                    ));
                }
            }
        }
        if relation_named {
            why.push("text: the question names its relation".into());
        } else if c.parts.text > 0.0 {
            why.push(format!("text: BM25 {:.2} of the best hit", c.parts.text));
        }
        if c.parts.graph > 0.0 {
            why.push(format!(
                "graph: {:.3} of the best-reached score",
                c.parts.graph
            ));
        }
        if let Some(n) = anchor {
            if !seed_nodes.contains(&n) {
                if let Some(path) = self.explain_path(n, seed_nodes, opts.max_hops.max(1)) {
                    why.push(format!("path: {path}"));
                }
            }
        }
        why
    }

    /// An entity as a line of context: name, label, properties, and its most confident facts,
    /// since a name alone ("fletcher villager (NPC)") answers nothing.
    fn describe_entity(&self, n: &crate::model::Node) -> String {
        const FACTS: usize = 3;
        let g = self.store.graph();
        let mut facts: Vec<(OrderedFloat<f32>, u32, String)> = g
            .adjacency()
            .entries(n.id)
            .filter_map(|a| {
                let other = g.node_name(NodeId(a.node))?;
                let rel = g.relation_name(a.relation());
                let text = if a.is_incoming() {
                    format!("{other} {rel} it")
                } else {
                    format!("{rel} {other}")
                };
                Some((OrderedFloat(a.confidence), a.edge, text))
            })
            .collect();
        // Most confident first; ties by edge id, so the line is the same on every call.
        facts.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        let mut text = format!("{} ({}){}", n.name, n.label, describe_props(&n.props));
        if !facts.is_empty() {
            let shown: Vec<&str> = facts.iter().take(FACTS).map(|f| f.2.as_str()).collect();
            text.push_str(": ");
            text.push_str(&shown.join("; "));
            if facts.len() > FACTS {
                text.push_str(&format!("; {} more", facts.len() - FACTS));
            }
        }
        text
    }

    /// The shortest path from any seed to `target`, rendered with names and relations.
    fn explain_path(
        &self,
        target: NodeId,
        seeds: &BTreeSet<NodeId>,
        max_hops: u8,
    ) -> Option<String> {
        let g = self.store.graph();
        let mut parent: HashMap<NodeId, (NodeId, AdjEntry)> = HashMap::new();
        let mut found = None;
        g.adjacency()
            .expand_with(target, max_hops, &TraversalFilter::default(), |r| {
                if found.is_some() {
                    return;
                }
                parent.insert(r.node, (r.parent, r.via));
                if seeds.contains(&r.node) {
                    found = Some(r.node);
                }
            });
        let mut at = found?;
        let name = |n: NodeId, g: &GraphRead<'_>| g.node_name(n).unwrap_or_default().to_string();
        // Walk back from the seed to the target; entries are seen from the parent's side.
        let mut out = name(at, &g);
        while at != target {
            let (p, via) = parent.get(&at)?;
            let rel = g.relation_name(via.relation());
            // `via` leads from p to at; it is incoming at p when the edge points at p.
            if via.is_incoming() {
                out.push_str(&format!(" -{rel}-> "));
            } else {
                out.push_str(&format!(" <-{rel}- "));
            }
            out.push_str(&name(*p, &g));
            at = *p;
        }
        Some(out)
    }
}
