//! Personalized PageRank by local push (Andersen, Chung and Lang 2006), over the adjacency with
//! confidence-weighted transitions. Work is bounded by `1 / (epsilon * alpha)` edge visits,
//! whatever the graph's size, so the cost depends on the neighbourhood of the seeds.
//!
//! Filters (relation, label, direction, minimum confidence) apply during the push: a pruned
//! edge carries no mass, and a node's out-weight counts only admitted edges.

use std::cell::RefCell;

use crate::graph::{AdjEntry, Adjacency, TraversalFilter};
use crate::model::NodeId;

/// Push parameters.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PushParams {
    /// Teleport (restart) probability: the share of a node's residual it keeps.
    pub alpha: f32,
    /// Residual threshold per unit of weighted degree; smaller is more exact and slower.
    pub epsilon: f32,
}

impl Default for PushParams {
    fn default() -> Self {
        // alpha 0.3 reaches the second and third hop that multi-hop questions need; on the dev
        // splits recall was flat between 0.3 and 0.5 on MuSiQue and best at 0.3 on 2Wiki.
        PushParams {
            alpha: 0.3,
            epsilon: 1e-4,
        }
    }
}

#[derive(Default)]
struct Scratch {
    estimate: Vec<f32>,
    residual: Vec<f32>,
    stamp: Vec<u32>,
    generation: u32,
    touched: Vec<u32>,
    queue: Vec<u32>,
    queued: Vec<bool>,
    /// The admitted entries of the node being pushed, with their weights: a list read from
    /// the snapshot is decoded as it is read, so it is read once, not once to sum the weights
    /// and again to spread the mass.
    pushes: Vec<(u32, f32)>,
}

impl Scratch {
    fn begin(&mut self, n: usize) {
        if self.stamp.len() < n {
            // Made anew, zeroed by the allocator, not grown: the stamps make what they held
            // stale anyway, and a large zeroed allocation takes pages only as a push touches
            // them. Grown, every page was written: 260 MB resident at 20M nodes for a
            // question that reaches a few hundred.
            // With room to grow: a graph that gains a node between questions would make them
            // anew each time.
            let room = n + n / 4;
            self.stamp = vec![0; room];
            self.estimate = vec![0.0; room];
            self.residual = vec![0.0; room];
            self.queued = vec![false; room];
            self.generation = 0;
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        self.touched.clear();
        self.queue.clear();
    }

    #[inline]
    fn touch(&mut self, n: u32) {
        let i = n as usize;
        if self.stamp[i] != self.generation {
            self.stamp[i] = self.generation;
            self.estimate[i] = 0.0;
            self.residual[i] = 0.0;
            self.queued[i] = false;
            self.touched.push(n);
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Approximate personalized PageRank from `seeds` (node, weight; weights are normalised to sum
/// to 1). `weight` maps an admitted entry (and the node whose list holds it) to its transition
/// weight (e.g. its confidence).
/// Returns every node with a positive estimate, in node id order.
pub fn personalized_pagerank(
    adj: &Adjacency,
    seeds: &[(NodeId, f32)],
    params: PushParams,
    filter: &TraversalFilter,
    weight: impl Fn(u32, &AdjEntry) -> f32,
) -> Vec<(NodeId, f32)> {
    let total: f32 = seeds.iter().map(|(_, w)| w.max(0.0)).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let labels_ok = |n: u32| adj.contains_node(NodeId(n));
    SCRATCH.with(|cell| {
        let mut s = cell.borrow_mut();
        let s = &mut *s;
        s.begin(adj.node_bound());
        // A node is pushed once its residual reaches epsilon times its degree (the entry count,
        // which needs no scan), as in the unweighted algorithm; the push itself spreads mass by
        // weight.
        let threshold = |n: u32| params.epsilon * adj.degree(NodeId(n)).max(1) as f32;
        for (n, w) in seeds {
            if *w > 0.0 && labels_ok(n.0) {
                s.touch(n.0);
                s.residual[n.0 as usize] += w / total;
                if !s.queued[n.0 as usize] {
                    s.queued[n.0 as usize] = true;
                    s.queue.push(n.0);
                }
            }
        }
        let mut head = 0;
        while head < s.queue.len() {
            let u = s.queue[head];
            head += 1;
            let ui = u as usize;
            s.queued[ui] = false;
            let r = s.residual[ui];
            let mut out_weight = 0.0f32;
            s.pushes.clear();
            for e in adj.entries(NodeId(u)) {
                if filter.admits_entry(u, &e, adj) {
                    let w = weight(u, &e);
                    out_weight += w;
                    s.pushes.push((e.node, w));
                }
            }
            if out_weight <= 0.0 {
                // A dead end keeps its mass.
                s.estimate[ui] += r;
                s.residual[ui] = 0.0;
                continue;
            }
            s.estimate[ui] += params.alpha * r;
            s.residual[ui] = 0.0;
            let spread = (1.0 - params.alpha) * r / out_weight;
            let pushes = std::mem::take(&mut s.pushes);
            for &(v, w) in &pushes {
                s.touch(v);
                let vi = v as usize;
                s.residual[vi] += spread * w;
                if !s.queued[vi] && s.residual[vi] >= threshold(v) {
                    s.queued[vi] = true;
                    s.queue.push(v);
                }
            }
            s.pushes = pushes;
            // Keep the queue from growing without bound on long runs.
            if head > 4096 && head * 2 > s.queue.len() {
                s.queue.drain(..head);
                head = 0;
            }
        }
        let mut out: Vec<(NodeId, f32)> = s
            .touched
            .iter()
            .filter(|n| s.estimate[**n as usize] > 0.0)
            .map(|n| (NodeId(*n), s.estimate[*n as usize]))
            .collect();
        // Touch order follows the queue; id order gives callers a layout that does not depend
        // on how the seeds were listed.
        out.sort_unstable_by_key(|(n, _)| *n);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::IdSet;
    use crate::model::EdgeId;

    /// A star: 0 in the middle, joined to 1..=4; 4 also joined to 5 by relation 1.
    fn star() -> Adjacency {
        let mut g = Adjacency::default();
        for n in 0..6 {
            g.set_node(NodeId(n), 0);
        }
        for n in 1..=4 {
            g.add_edge(EdgeId(n - 1), NodeId(0), NodeId(n), 0, 1.0);
        }
        g.add_edge(EdgeId(4), NodeId(4), NodeId(5), 1, 1.0);
        g
    }

    fn scores(v: Vec<(NodeId, f32)>) -> Vec<f32> {
        let mut out = vec![0.0; 6];
        for (n, s) in v {
            out[n.0 as usize] = s;
        }
        out
    }

    #[test]
    fn mass_is_conserved_and_centred_on_the_seed() {
        let g = star();
        let params = PushParams {
            alpha: 0.3,
            epsilon: 1e-6,
        };
        let s = scores(personalized_pagerank(
            &g,
            &[(NodeId(0), 1.0)],
            params,
            &TraversalFilter::default(),
            |_, e| e.confidence,
        ));
        let total: f32 = s.iter().sum();
        assert!(total > 0.99 && total <= 1.0001, "{total}");
        assert!(s[0] > s[1] && (s[1] - s[2]).abs() < 1e-4, "{s:?}");
        assert!(
            s[4] > s[1],
            "node 4 has an extra neighbour to pass mass back through"
        );
        assert!(s[5] > 0.0);
    }

    #[test]
    fn filters_and_weights_steer_the_mass() {
        let g = star();
        let params = PushParams::default();
        let mut rel0 = IdSet::default();
        rel0.insert(0);
        let only0 = TraversalFilter {
            relations: Some(rel0),
            ..Default::default()
        };
        let s = scores(personalized_pagerank(
            &g,
            &[(NodeId(0), 1.0)],
            params,
            &only0,
            |_, e| e.confidence,
        ));
        assert_eq!(s[5], 0.0, "relation 1 is pruned during the push");
        let towards_2 = |_: u32, e: &AdjEntry| {
            if e.node == 2 || e.node == 0 {
                10.0
            } else {
                1.0
            }
        };
        let s = scores(personalized_pagerank(
            &g,
            &[(NodeId(0), 1.0)],
            params,
            &TraversalFilter::default(),
            towards_2,
        ));
        assert!(s[2] > 3.0 * s[1], "{s:?}");
        assert!(
            personalized_pagerank(&g, &[], params, &TraversalFilter::default(), |_, _| 1.0)
                .is_empty()
        );
    }
}
