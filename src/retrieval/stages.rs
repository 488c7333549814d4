//! The stages of [`Retriever::retrieve`](super::Retriever::retrieve), in the order they run:
//! text evidence ([`TextEvidence::gather`]) → seeds ([`Seeds::pick`]) → expansion
//! ([`Scope::expand`]) → candidates ([`Scope::candidates`], then events) → ranking
//! ([`rank`]). Packing (rendering and the token budget) stays with the retriever, which owns the
//! store handles it needs.
//!
//! Every map on the ranking path is ordered by node id: float sums and the push order of the
//! seeds depend on iteration order, and a hash map's order changes with each instance, which
//! made identical calls return different scores and ranks.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use ordered_float::OrderedFloat;

use super::{
    fuse, personalized_pagerank, Candidate, EdgeTerms, Expansion, Link, RankingMode,
    RetrieveOptions, ScoreParts, SnippetKind, GRAPH_DECADES,
};
use crate::error::Result;
use crate::graph::{AdjEntry, Direction, TraversalFilter};
use crate::model::{labels, relations, NodeId};
use crate::store::{ExpandOptions, GraphRead, Store};
use crate::text::{Hit, SearchFilter, Target, TextIndex};

use super::dense::PassageVectors;

/// BM25 evidence for a question, each score normalised by the best hit of its search.
pub(super) struct TextEvidence {
    /// Nodes hit, passages and others alike (a node found by both keeps its passage score).
    pub nodes: BTreeMap<NodeId, f32>,
    /// Events hit, in hit order.
    pub events: Vec<(u64, f32)>,
    /// Whether passage scores include sentence similarity.
    pub dense: bool,
}

impl TextEvidence {
    /// BM25 over passages, and separately over everything else, so that entities named like
    /// passages do not crowd passages out. With passage vectors, a passage's score is
    /// `(1 - dense_weight) * BM25 + dense_weight * similarity`, over the union of the BM25 hits
    /// and the nearest passages (each side scaled into [0, 1]).
    pub fn gather(
        store: &Store,
        question: &str,
        opts: &RetrieveOptions,
        dense: Option<&PassageVectors>,
    ) -> Result<Self> {
        let passage_hits = store.search(
            question,
            &SearchFilter {
                labels: vec![labels::PASSAGE.into()],
                ..Default::default()
            },
            opts.text_candidates,
        )?;
        let other_hits = store.search(question, &SearchFilter::default(), opts.text_candidates)?;
        let best = |hits: &[Hit]| {
            hits.iter()
                .map(|h| h.score)
                .fold(0.0f32, f32::max)
                .max(1e-6)
        };
        let (max_passage, max_other) = (best(&passage_hits), best(&other_hits));
        let mut nodes: BTreeMap<NodeId, f32> = BTreeMap::new();
        let mut events: Vec<(u64, f32)> = Vec::new();
        for h in &passage_hits {
            if let Target::Node(n) = h.target {
                nodes.insert(n, h.score / max_passage);
            }
        }
        let dense = dense.filter(|v| opts.dense_weight > 0.0 && !v.is_empty());
        if let Some(vectors) = dense {
            let w = opts.dense_weight;
            let sims = vectors.similarities(question);
            for (n, score) in nodes.iter_mut() {
                *score = (1.0 - w) * *score + w * sims.get(*n).unwrap_or(0.0);
            }
            for (n, sim) in sims.top(opts.text_candidates) {
                nodes.entry(n).or_insert(w * sim);
            }
        }
        for h in &other_hits {
            match h.target {
                Target::Node(n) => {
                    nodes.entry(n).or_insert(h.score / max_other);
                }
                Target::Event(seq) => events.push((seq, h.score / max_other)),
            }
        }
        Ok(TextEvidence {
            nodes,
            events,
            dense: dense.is_some(),
        })
    }
}

/// Where expansion starts: the entities the question names, and the text hits; or, for a
/// question with neither, the ends of the facts whose relation it names.
pub(super) struct Seeds {
    pub links: Vec<Link>,
    /// Seed weight by node, summing to 1 (or empty).
    pub weights: BTreeMap<NodeId, f32>,
    /// The facts the question names by their relation ([`NamedFacts`]).
    pub named: NamedFacts,
}

impl Seeds {
    /// Linked entities share `(1 - text_seed_share) * specificity` of the seed mass by their
    /// link weights (`dense_seed_share` in place of `text_seed_share` when the text scores
    /// include sentence similarity) and the text hits share the rest by their scores; either
    /// side takes all of it when the other is empty. The specificity ([`link_specificity`]) keeps a name that
    /// titles hundreds of nodes from drawing the expansion to all of them: in a conversation
    /// the speaker's name links every turn they said, and "what did Caroline realise after
    /// the race" is about the race.
    pub fn pick(
        links: Vec<Link>,
        live_nodes: usize,
        text: &TextEvidence,
        opts: &RetrieveOptions,
    ) -> Self {
        let link_total: f32 = links.iter().map(|l| l.weight).sum();
        let text_total: f32 = text.nodes.values().sum();
        let text_share = if text.dense {
            opts.dense_seed_share
        } else {
            opts.text_seed_share
        };
        let link_share = if links.is_empty() {
            0.0
        } else if text_total > 0.0 {
            (1.0 - text_share) * link_specificity(&links, live_nodes)
        } else {
            1.0
        };
        let mut weights: BTreeMap<NodeId, f32> = BTreeMap::new();
        for l in &links {
            *weights.entry(l.node).or_default() += link_share * l.weight / link_total.max(1e-6);
        }
        for (n, s) in &text.nodes {
            *weights.entry(*n).or_default() += (1.0 - link_share) * s / text_total.max(1e-6);
        }
        Seeds {
            links,
            weights,
            named: NamedFacts::default(),
        }
    }

    /// Seeds the ends of `named` facts, for a question that has no other seed: they share the
    /// mass equally.
    pub fn add_named(&mut self, named: NamedFacts) {
        debug_assert!(
            self.weights.is_empty(),
            "named facts seed only an unseeded question"
        );
        let ends: BTreeSet<NodeId> = named.edges.iter().flat_map(|f| [f.from, f.to]).collect();
        let each = 1.0 / ends.len().max(1) as f32;
        for n in ends {
            self.weights.insert(n, each);
        }
        self.named = named;
    }

    pub fn nodes(&self) -> BTreeSet<NodeId> {
        self.weights.keys().copied().collect()
    }
}

/// The question's words that may name a relation (its analysed words less those of the names
/// it links), as the term ids some edge knows (sorted).
pub(super) fn relation_terms(
    terms: &EdgeTerms,
    text_index: &TextIndex,
    question: &str,
    links: &[Link],
) -> Result<Vec<u32>> {
    let mut words = text_index.analyze(question)?;
    for l in links {
        let named = text_index.analyze(&l.phrase)?;
        words.retain(|w| !named.contains(w));
    }
    Ok(terms.lookup(&words))
}

/// Facts a question names by their relation alone ("where is home": HOME), taken only when it
/// has no other seed (it names no entity and its words hit no node): with no seed the
/// expansion reaches nothing, and the best text hit answers alone (for "where is home", the
/// event where the first home was chosen, which the move has since ended). Only relations
/// with few facts at once count ([`EdgeTerms::few_edges`]). With `include_ended`, facts that
/// held once count too, as everywhere. A question with seeds keeps them alone:
/// where relations are open phrases with a few edges each (MuSiQue's triples: "published
/// by", "became"), seeding the ends of every such relation a question's words name cost
/// recall@5 0.007 on its dev split.
#[derive(Debug, Default)]
pub(super) struct NamedFacts {
    /// The facts of the relations named that hold at `now` and pass the caller's filters, in
    /// the order [`Scope::named_facts`] takes them.
    pub edges: Vec<NamedFact>,
}

/// Facts a question may name by their relations, at most: their ends are its seeds.
const NAMED_FACTS_MAX: usize = 64;

/// One fact of [`NamedFacts`].
#[derive(Clone, Copy, Debug)]
pub(super) struct NamedFact {
    pub edge: crate::model::EdgeId,
    pub relation: u32,
    pub from: NodeId,
    pub to: NodeId,
}

impl NamedFacts {
    /// Whether `edge` is one of them.
    pub fn contains(&self, edge: crate::model::EdgeId) -> bool {
        self.edges.iter().any(|f| f.edge == edge)
    }

    /// The relation of the named fact `n` is an end of (the first, by relation id).
    pub fn relation_of(&self, n: NodeId) -> Option<u32> {
        self.edges
            .iter()
            .find(|f| f.from == n || f.to == n)
            .map(|f| f.relation)
    }
}

/// How much the question's links narrow the graph, in (0, 1]: the best phrase's
/// `ln(1 + N / (1 + m)) / ln(1 + N / 2)` for a phrase naming `m` of the graph's `N` nodes, so
/// a name of one node scores 1 and a speaker's name on 213 of 478 nodes 0.21. (Normalising by
/// `ln(1 + N)` instead lowered every link's share in small graphs too: on LoCoMo dev recall@10
/// 0.685 against 0.676, but 2Wiki dev recall@5 fell from 0.917 to 0.887.)
fn link_specificity(links: &[Link], node_count: usize) -> f32 {
    let n = node_count.max(1) as f32;
    links
        .iter()
        .map(|l| (1.0 + n / (1.0 + l.shared_by as f32)).ln() / (1.0 + n / 2.0).ln())
        .fold(0.0f32, f32::max)
        .clamp(0.0, 1.0)
}

/// What the graph stages judge with: one read of the graph, the traversal filter resolved at
/// `now`, and the caller's options.
pub(super) struct Scope<'g, 'o> {
    pub g: GraphRead<'g>,
    opts: &'o RetrieveOptions,
    filter: TraversalFilter,
    now: i64,
}

impl<'g, 'o> Scope<'g, 'o> {
    pub fn new(g: GraphRead<'g>, opts: &'o RetrieveOptions, now: i64) -> Self {
        let filter = g.filter(
            &ExpandOptions::default()
                .with_min_confidence(opts.min_confidence)
                .with_relations(opts.relations.iter().cloned())
                .with_deny_relations(opts.deny_relations.iter().cloned())
                .with_direction(Direction::Both)
                .with_now(now)
                .with_raw_confidence(opts.raw_confidence)
                .with_include_ended(opts.include_ended),
        );
        Scope {
            g,
            opts,
            filter,
            now,
        }
    }

    /// An edge's confidence as every use sees it (expansion weights, the fact's score part, its
    /// text): decayed to `now`, as the filter judges it.
    fn confidence_of(&self, from: u32, e: &AdjEntry) -> f32 {
        match &self.filter.decay {
            Some(d) => d.effective(from, e, self.g.adjacency()),
            None => e.confidence,
        }
    }

    fn label_ok(&self, n: NodeId) -> bool {
        let Some(label) = self.g.node_label(n) else {
            return false;
        };
        (self.opts.labels.is_empty() || self.opts.labels.iter().any(|l| l == label))
            && !self.opts.deny_labels.iter().any(|l| l == label)
    }

    /// Whether the edge holds at `now` (always, when ended facts are asked for).
    fn edge_ok(&self, e: &AdjEntry) -> bool {
        if self.opts.include_ended || !e.is_bounded() {
            return true;
        }
        self.g
            .edge_core(e.edge_id())
            .is_some_and(|c| c.valid_from <= self.now && self.now < c.valid_to)
    }

    fn is_passage(&self, n: NodeId) -> bool {
        self.g.node_label(n) == Some(labels::PASSAGE)
    }

    /// Expands the seeds over the graph: personalized PageRank, or weighted k-hop. An edge
    /// weighs its confidence, raised by `relation_boost` for every word it shares with the
    /// question's relation words (its words less those of the names it links).
    pub fn expand(
        &self,
        terms: &EdgeTerms,
        query_terms: &[u32],
        seeds: &Seeds,
    ) -> BTreeMap<NodeId, f32> {
        if self.opts.mode == RankingMode::Text {
            return BTreeMap::new();
        }
        let seed_list: Vec<(NodeId, f32)> = seeds.weights.iter().map(|(n, w)| (*n, *w)).collect();
        let boost = self.opts.relation_boost;
        let weight = |from: u32, e: &AdjEntry| -> f32 {
            if !self.edge_ok(e) {
                return 0.0;
            }
            let base = self.confidence_of(from, e).max(1e-3);
            let shared = terms.overlap(e, query_terms);
            base * (1.0 + boost * shared as f32)
        };
        let adj = self.g.adjacency();
        match self.opts.expansion {
            Expansion::PageRank(params) => {
                personalized_pagerank(adj, &seed_list, params, &self.filter, weight)
                    .into_iter()
                    .collect()
            }
            Expansion::KHop { decay } => {
                let mut scores: BTreeMap<NodeId, f32> = BTreeMap::new();
                for (seed, w) in &seed_list {
                    *scores.entry(*seed).or_default() += w;
                    let mut reach: HashMap<NodeId, f32> = HashMap::from([(*seed, *w)]);
                    adj.expand_with(*seed, self.opts.max_hops, &self.filter, |r| {
                        if !self.edge_ok(&r.via) {
                            return;
                        }
                        let parent = reach.get(&r.parent).copied().unwrap_or(0.0);
                        let s = parent * decay * self.confidence_of(r.parent.0, &r.via);
                        reach.insert(r.node, s);
                        *scores.entry(r.node).or_default() += s;
                    });
                }
                scores
            }
        }
    }

    /// The facts of the relations `query_terms` name that hold now and pass the filters
    /// (see [`NamedFacts`]): the relations whose names match more words first, then those
    /// with fewer edges, each's newest facts first, [`NAMED_FACTS_MAX`] in all.
    pub fn named_facts(&self, terms: &EdgeTerms, query_terms: &[u32]) -> NamedFacts {
        let mut out = NamedFacts::default();
        if self.opts.mode == RankingMode::Text {
            return out;
        }
        let mut relations = terms.named_relations(query_terms);
        relations.sort_by_key(|&r| {
            (
                Reverse(terms.relation_words(r)),
                terms.few_edges(&self.g, r).len(),
                r,
            )
        });
        let adj = self.g.adjacency();
        for relation in relations {
            for &edge in terms.few_edges(&self.g, relation).iter().rev() {
                if out.edges.len() == NAMED_FACTS_MAX {
                    return out;
                }
                let Some(core) = self.g.edge_core(edge).filter(|c| c.relation == relation) else {
                    continue;
                };
                // The filters judge adjacency entries: the fact's own, read from the shorter
                // of its ends' lists (a hub's holds many thousands). The scope's filter reads
                // both ends alike: it has no label test (`label_ok` is below) and goes both
                // ways.
                let end = adj.shorter_list(core.from, core.to);
                let incoming = end != core.from;
                let Some(entry) = adj
                    .entries(end)
                    .find(|e| e.edge_id() == edge && e.is_incoming() == incoming)
                else {
                    continue;
                };
                if self.filter.admits_entry(end.0, &entry, adj)
                    && self.edge_ok(&entry)
                    && self.in_window(core.last_seen)
                    && self.label_ok(core.from)
                    && self.label_ok(core.to)
                {
                    out.edges.push(NamedFact {
                        edge,
                        relation,
                        from: core.from,
                        to: core.to,
                    });
                }
            }
        }
        out
    }

    /// Passages, facts and entities worth ranking, each with its score parts and fused score.
    pub fn candidates(
        &self,
        text: &TextEvidence,
        graph_scores: &BTreeMap<NodeId, f32>,
        named: &NamedFacts,
    ) -> Vec<Candidate> {
        let wants = |k: SnippetKind| self.opts.kinds.is_empty() || self.opts.kinds.contains(&k);
        let max_of = |pred: &dyn Fn(NodeId) -> bool| {
            graph_scores
                .iter()
                .filter(|(n, _)| pred(**n))
                .map(|(_, s)| *s)
                .fold(0.0f32, f32::max)
                .max(1e-12)
        };
        let max_passage = max_of(&|n| self.is_passage(n));
        let max_entity = max_of(&|n| !self.is_passage(n));
        let mut out = Vec::new();
        if wants(SnippetKind::Passage) {
            out.extend(self.passage_candidates(text, graph_scores, max_passage));
        }
        let mut top_nodes: Vec<(NodeId, f32)> = graph_scores
            .iter()
            .filter(|(n, _)| !self.is_passage(**n))
            .map(|(n, s)| (*n, *s))
            .collect();
        top_nodes.sort_by_key(|&(n, s)| (Reverse(OrderedFloat(s)), n));
        top_nodes.truncate(self.opts.k.max(10) * 3);
        if wants(SnippetKind::Fact) {
            out.extend(self.fact_candidates(text, graph_scores, &top_nodes, max_entity, named));
        }
        if wants(SnippetKind::Entity) {
            out.extend(self.entity_candidates(text, &top_nodes, max_entity));
        }
        out
    }

    /// Passages reached by text or by the graph, scored by both.
    fn passage_candidates(
        &self,
        text: &TextEvidence,
        graph_scores: &BTreeMap<NodeId, f32>,
        max_passage: f32,
    ) -> Vec<Candidate> {
        let mut passages: BTreeSet<NodeId> = BTreeSet::new();
        passages.extend(text.nodes.keys().copied().filter(|n| self.is_passage(*n)));
        passages.extend(graph_scores.keys().copied().filter(|n| self.is_passage(*n)));
        passages
            .into_iter()
            .filter(|n| self.label_ok(*n))
            .map(|n| {
                let parts = ScoreParts {
                    text: text.nodes.get(&n).copied().unwrap_or(0.0),
                    graph: graph_part(graph_scores.get(&n).copied().unwrap_or(0.0), max_passage),
                    salience: self.g.node_salience(n).unwrap_or(0.0),
                    ..Default::default()
                };
                self.candidate(SnippetKind::Passage, Some(n), None, parts)
            })
            .collect()
    }

    /// Facts: the edges of the best-reached entities to other reached entities (mentions and
    /// passages aside), scored by the mean reach of their ends. A fact of a relation the
    /// question names ([`NamedFacts`]) takes a text part of 1, as the best text hit would:
    /// the question's words are its relation's.
    fn fact_candidates(
        &self,
        text: &TextEvidence,
        graph_scores: &BTreeMap<NodeId, f32>,
        top_nodes: &[(NodeId, f32)],
        max_entity: f32,
        named: &NamedFacts,
    ) -> Vec<Candidate> {
        let mut out = Vec::new();
        let mut seen_edges = HashSet::new();
        let mentions = self.g.relation_id(relations::MENTIONS);
        let adj = self.g.adjacency();
        for (n, _) in top_nodes {
            for e in adj.entries(*n) {
                if Some(e.relation()) == mentions
                    || !self.filter.admits_entry(n.0, &e, adj)
                    || !self.edge_ok(&e)
                    || !seen_edges.insert(e.edge)
                    || self.is_passage(e.neighbor())
                {
                    continue;
                }
                let (Some(a), Some(b)) = (graph_scores.get(n), graph_scores.get(&e.neighbor()))
                else {
                    continue;
                };
                let Some(core) = self.g.edge_core(e.edge_id()) else {
                    continue;
                };
                if !self.in_window(core.last_seen)
                    || !self.label_ok(core.from)
                    || !self.label_ok(core.to)
                {
                    continue;
                }
                let text_of = |n: NodeId| text.nodes.get(&n).copied().unwrap_or(0.0);
                let named_part = if named.contains(e.edge_id()) {
                    1.0
                } else {
                    0.0
                };
                let parts = ScoreParts {
                    graph: graph_part((a + b) / 2.0, max_entity),
                    confidence: self.confidence_of(n.0, &e),
                    recency: self.recency(core.last_seen),
                    text: text_of(core.from).max(text_of(core.to)).max(named_part),
                    salience: core.salience,
                    usage: 0.0,
                };
                out.push(self.candidate(SnippetKind::Fact, None, Some(e.edge_id()), parts));
            }
        }
        out
    }

    /// The best-reached entities themselves.
    fn entity_candidates(
        &self,
        text: &TextEvidence,
        top_nodes: &[(NodeId, f32)],
        max_entity: f32,
    ) -> Vec<Candidate> {
        top_nodes
            .iter()
            .filter(|(n, _)| self.label_ok(*n))
            .map(|(n, s)| {
                let parts = ScoreParts {
                    graph: graph_part(*s, max_entity),
                    text: text.nodes.get(n).copied().unwrap_or(0.0),
                    salience: self.g.node_salience(*n).unwrap_or(0.0),
                    ..Default::default()
                };
                self.candidate(SnippetKind::Entity, Some(*n), None, parts)
            })
            .collect()
    }

    fn candidate(
        &self,
        kind: SnippetKind,
        node: Option<NodeId>,
        edge: Option<crate::model::EdgeId>,
        parts: ScoreParts,
    ) -> Candidate {
        Candidate {
            kind,
            node,
            edge,
            event: None,
            score: fuse(kind, &parts, &self.opts.weights, self.opts.mode),
            parts,
        }
    }

    fn recency(&self, t: i64) -> f32 {
        recency(self.now, t, self.opts)
    }

    fn in_window(&self, t: i64) -> bool {
        in_window(t, self.opts)
    }
}

/// PPR mass is heavy-tailed: relative to the best-reached node most candidates hold 1% or less,
/// which a linear scale would crush below any text score. The graph part is therefore
/// logarithmic: 1 for the best, minus 1/GRAPH_DECADES per factor of ten below.
fn graph_part(score: f32, max: f32) -> f32 {
    if score <= 0.0 {
        0.0
    } else {
        (1.0 + (score / max).log10() / GRAPH_DECADES).clamp(0.0, 1.0)
    }
}

/// Recency in (0, 1]: halves every `recency_half_life` of world time before `now`.
pub(super) fn recency(now: i64, t: i64, opts: &RetrieveOptions) -> f32 {
    // In f64: world times at the ends of i64 must not overflow a subtraction.
    let age = (now as f64 - t as f64).max(0.0);
    (0.5f64).powf(age / opts.recency_half_life) as f32
}

/// Whether world time `t` is in the caller's time window (always, without one).
pub(super) fn in_window(t: i64, opts: &RetrieveOptions) -> bool {
    opts.time.is_none_or(|(a, b)| a <= t && t <= b)
}

/// Orders candidates best first and keeps the first `k`. Non-positive scores are dropped. Equal
/// scores are common (every entity one hop from a lone seed); the tie is broken by what the
/// candidate is, so the order never depends on how candidates were gathered.
pub(super) fn rank(candidates: &mut Vec<Candidate>, k: usize) {
    candidates.retain(|c| c.score > 0.0);
    candidates.sort_by_key(|c| {
        (
            Reverse(OrderedFloat(c.score)),
            c.kind as u8,
            c.node,
            c.edge,
            c.event,
        )
    });
    candidates.truncate(k);
}
