//! Dense evidence: passages ranked by the cosine of their sentence vector with the question's
//! ([`crate::embed::SentenceEncoder`]), fused with BM25 in [`super::stages::TextEvidence`].
//! BM25 finds the turn that shares the question's words; the encoder finds the one that says
//! the same thing in others ("where did she move from" and "my home country, Sweden").
//!
//! The vectors are a view derived from the passages' text like the full-text index, built
//! when a retriever is given an encoder ([`super::Retriever::with_encoder`]); passages added to
//! the store after that have no vector until the next one is built (they are still found by
//! BM25 and the graph).

use std::sync::Arc;

use ordered_float::OrderedFloat;

use crate::embed::SentenceEncoder;
use crate::model::{labels, Node, NodeId, Value};
use crate::store::Store;

/// The sentence vectors of a store's passages.
pub struct PassageVectors {
    encoder: Arc<SentenceEncoder>,
    nodes: Vec<NodeId>,
    /// `nodes.len() x dim`, row by row.
    vectors: Vec<f32>,
}

impl std::fmt::Debug for PassageVectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassageVectors")
            .field("passages", &self.nodes.len())
            .field("encoder", &self.encoder)
            .finish()
    }
}

/// What a passage's vector is made from: its time, its title (a turn's speaker) and its text,
/// as a reader would see them together.
pub fn passage_text(n: &Node) -> String {
    let prop = |k: &str| match n.props.get(k) {
        Some(Value::Str(s)) => s.as_str(),
        _ => "",
    };
    let mut out = String::new();
    for part in [prop("time"), n.name.as_str()] {
        if !part.is_empty() {
            out.push_str(part);
            out.push_str(": ");
        }
    }
    out.push_str(prop("text"));
    out
}

impl PassageVectors {
    /// Embeds every passage of `store` (on every core).
    pub fn build(store: &Store, encoder: Arc<SentenceEncoder>) -> Self {
        let (nodes, texts): (Vec<NodeId>, Vec<String>) = {
            let g = store.graph();
            g.node_ids()
                .filter(|id| g.node_label(*id) == Some(labels::PASSAGE))
                .filter_map(|id| g.node(id))
                .map(|n| (n.id, passage_text(&n)))
                .unzip()
        };
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = encoder.embed_all(&refs).concat();
        PassageVectors {
            encoder,
            nodes,
            vectors,
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// How similar each passage is to `question`, scaled into [0, 1] over all passages (the
    /// least similar 0, the most 1). Scaling over the whole set rather than the nearest few
    /// keeps a question that matches nothing well from promoting its best weak match to 1
    /// against a strong BM25 hit.
    pub fn similarities(&self, question: &str) -> Similarities<'_> {
        if self.nodes.is_empty() {
            return Similarities {
                nodes: &self.nodes,
                scaled: Vec::new(),
            };
        }
        let q = self.encoder.embed(question);
        let sims: Vec<f32> = self
            .vectors
            .chunks_exact(q.len())
            .map(|v| crate::embed::cosine(&q, v))
            .collect();
        let (lo, hi) = sims
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), s| {
                (lo.min(*s), hi.max(*s))
            });
        let span = (hi - lo).max(1e-6);
        Similarities {
            nodes: &self.nodes,
            scaled: sims.iter().map(|s| (s - lo) / span).collect(),
        }
    }
}

/// Every passage's scaled similarity to one question (see [`PassageVectors::similarities`]).
pub struct Similarities<'v> {
    /// In node id order (the order the graph lists nodes in).
    nodes: &'v [NodeId],
    scaled: Vec<f32>,
}

impl Similarities<'_> {
    /// The similarity of passage `node`, if it has a vector.
    pub fn get(&self, node: NodeId) -> Option<f32> {
        let i = self.nodes.binary_search(&node).ok()?;
        self.scaled.get(i).copied()
    }

    /// The `k` most similar passages, best first, ties by node id. Runs for every question
    /// over every passage, so the first `k` are selected before they are sorted.
    pub fn top(&self, k: usize) -> Vec<(NodeId, f32)> {
        let mut ranked: Vec<(NodeId, f32)> = self
            .nodes
            .iter()
            .copied()
            .zip(self.scaled.iter().copied())
            .collect();
        let key = |(n, s): &(NodeId, f32)| (std::cmp::Reverse(OrderedFloat(*s)), *n);
        if k == 0 {
            return Vec::new();
        }
        if k < ranked.len() {
            ranked.select_nth_unstable_by_key(k - 1, key);
            ranked.truncate(k);
        }
        ranked.sort_by_key(key);
        ranked
    }
}
