//! The changes of one batch to the nodes or to the edges, keyed by id ([`Changes`]).
//!
//! A batch gives its new nodes and edges the ids after the last one given out, one after the
//! other: a bulk batch is mostly such ids. They are held in a row by id, the few changes to
//! older ids in an ordered map. A `BTreeMap` of every change, filled in id order, kept its
//! leaves about half full: a batch of 100,000 new edges took 275 bytes each, the largest part
//! of a 1M-edge load's peak.

use std::collections::BTreeMap;
use std::fmt;

use crate::model::{EdgeId, NodeId};

/// An id given out in order, so that a batch's new ones form a run.
pub(crate) trait RunId: Copy + Ord + fmt::Debug {
    fn index(self) -> u32;
    fn at(index: u32) -> Self;
}

impl RunId for NodeId {
    fn index(self) -> u32 {
        self.0
    }
    fn at(index: u32) -> Self {
        NodeId(index)
    }
}

impl RunId for EdgeId {
    fn index(self) -> u32 {
        self.0
    }
    fn at(index: u32) -> Self {
        EdgeId(index)
    }
}

/// Slots a chunk of the run holds: the run grows a chunk at a time, never copying what it
/// holds, and leaves at most one chunk's slots unused (a `Vec` grown by doubling left up to
/// half its slots unused, and copied every slot at each doubling).
const CHUNK: usize = 1024;

/// Changes by id: `Some(v)` is the value after the batch, `None` a removal.
pub(crate) struct Changes<K, V> {
    /// The first id of the run.
    run_from: u32,
    /// The changes to `run_from`, `run_from + 1`, ... in order, `CHUNK` a chunk.
    run: Vec<Vec<Option<V>>>,
    run_len: u32,
    /// The changes to any other id (never one the run holds).
    others: BTreeMap<K, Option<V>>,
}

impl<K: RunId, V> Changes<K, V> {
    /// No changes; the run starts at `run_from`, the first id the batch may give out.
    pub(crate) fn new(run_from: u32) -> Self {
        Changes {
            run_from,
            run: Vec::new(),
            run_len: 0,
            others: BTreeMap::new(),
        }
    }

    /// The position of `id` in the run, if the run holds it.
    fn in_run(&self, id: K) -> Option<usize> {
        let i = id.index().checked_sub(self.run_from)?;
        (i < self.run_len).then_some(i as usize)
    }

    pub(crate) fn get(&self, id: &K) -> Option<&Option<V>> {
        match self.in_run(*id) {
            Some(i) => self.run.get(i / CHUNK)?.get(i % CHUNK),
            None => self.others.get(id),
        }
    }

    pub(crate) fn insert(&mut self, id: K, change: Option<V>) {
        // Every chunk but the last is full and `run_len` counts the slots pushed, so a
        // position in the run always has its slot.
        let in_run = self
            .in_run(id)
            .and_then(|i| self.run.get_mut(i / CHUNK)?.get_mut(i % CHUNK));
        if let Some(slot) = in_run {
            *slot = change;
            return;
        }
        let next = self.run_from.checked_add(self.run_len);
        if next == Some(id.index()) && !self.others.contains_key(&id) {
            if self.run.last().is_none_or(|c| c.len() == CHUNK) {
                // The first chunk grows as it fills (to `CHUNK` at most, capacities doubling
                // from 4): a batch of one event makes one or two ids, not a thousand.
                let capacity = if self.run.is_empty() { 0 } else { CHUNK };
                self.run.push(Vec::with_capacity(capacity));
            }
            if let Some(chunk) = self.run.last_mut() {
                chunk.push(change);
                self.run_len += 1;
                return;
            }
        }
        self.others.insert(id, change);
    }

    pub(crate) fn len(&self) -> usize {
        self.run_len as usize + self.others.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every change, in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, &Option<V>)> {
        let run = self
            .run
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, v)| (K::at(self.run_from + i as u32), v));
        Merged {
            a: self.others.iter().map(|(k, v)| (*k, v)).peekable(),
            b: run.peekable(),
        }
    }

    /// Every change's value, in id order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Option<V>> {
        self.iter().map(|(_, v)| v)
    }
}

impl<K: RunId, V> Default for Changes<K, V> {
    fn default() -> Self {
        Changes::new(0)
    }
}

impl<K: RunId, V: fmt::Debug> fmt::Debug for Changes<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Equal when they hold the same changes, however each holds them.
impl<K: RunId, V: PartialEq> PartialEq for Changes<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

/// Two iterators in key order merged into one (no key is in both).
struct Merged<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<K: Ord, V, A, B> Iterator for Merged<A, B>
where
    A: Iterator<Item = (K, V)>,
    B: Iterator<Item = (K, V)>,
{
    type Item = (K, V);

    fn next(&mut self) -> Option<(K, V)> {
        match (self.a.peek(), self.b.peek()) {
            (Some((ka, _)), Some((kb, _))) if ka < kb => self.a.next(),
            (Some(_), None) => self.a.next(),
            _ => self.b.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever ids are changed, and in whatever order, the changes read as an ordered
        /// map of the same changes reads: the run is only a way to hold them.
        #[test]
        fn changes_read_as_an_ordered_map_of_them(
            run_from in 0u32..50,
            ops in proptest::collection::vec((0u32..3000, any::<Option<u16>>()), 0..3000),
        ) {
            let mut changes: Changes<EdgeId, u16> = Changes::new(run_from);
            let mut map: BTreeMap<EdgeId, Option<u16>> = BTreeMap::new();
            // Mostly the next id of a run, as a batch gives them out; sometimes any id.
            let mut next = run_from;
            for (any_id, v) in ops {
                let id = if any_id % 7 == 0 {
                    EdgeId(any_id)
                } else {
                    next += 1;
                    EdgeId(next - 1)
                };
                changes.insert(id, v);
                map.insert(id, v);
            }
            prop_assert_eq!(changes.len(), map.len());
            prop_assert_eq!(changes.is_empty(), map.is_empty());
            let read: Vec<(EdgeId, Option<u16>)> = changes.iter().map(|(k, v)| (k, *v)).collect();
            let want: Vec<(EdgeId, Option<u16>)> = map.iter().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(read, want);
            for id in 0..3100 {
                prop_assert_eq!(changes.get(&EdgeId(id)), map.get(&EdgeId(id)));
            }
        }
    }

    /// The run reaches the last id there is: no id past it is made, and none wraps.
    #[test]
    fn a_run_ends_at_the_last_id() {
        let mut changes: Changes<EdgeId, u32> = Changes::new(u32::MAX - 2);
        for i in (u32::MAX - 2)..=u32::MAX {
            changes.insert(EdgeId(i), Some(i));
        }
        assert_eq!(changes.run_len, 3);
        let ids: Vec<u32> = changes.iter().map(|(k, _)| k.0).collect();
        assert_eq!(ids, [u32::MAX - 2, u32::MAX - 1, u32::MAX]);
        changes.insert(EdgeId(0), None);
        assert_eq!(changes.get(&EdgeId(0)), Some(&None));
        assert_eq!(changes.iter().next(), Some((EdgeId(0), &None)));
    }

    /// A batch's overlay starts its runs at the ids the batch gives out first, so a bulk
    /// batch's new nodes and edges are held in them.
    #[test]
    fn an_overlay_holds_its_new_ids_in_runs() {
        let counters = crate::projection::Counters {
            next_node: 40,
            next_edge: 700,
            last_seq: 3,
        };
        let mut overlay = crate::projection::Overlay::new(counters);
        for i in 0..3 {
            overlay.nodes.insert(NodeId(40 + i), None);
            overlay.edges.insert(EdgeId(700 + i), None);
        }
        assert!(overlay.nodes.others.is_empty() && overlay.edges.others.is_empty());
        assert_eq!((overlay.nodes.run_len, overlay.edges.run_len), (3, 3));
    }

    /// A batch's new ids in order are held in the run, not in the map.
    #[test]
    fn new_ids_in_order_are_held_in_the_run() {
        let mut changes: Changes<NodeId, u32> = Changes::new(10);
        changes.insert(NodeId(3), Some(3));
        for i in 10..3000 {
            changes.insert(NodeId(i), Some(i));
        }
        changes.insert(NodeId(12), None);
        assert_eq!(changes.others.len(), 1);
        assert_eq!(changes.run_len, 2990);
        assert_eq!(changes.run.len(), 3);
        assert_eq!(changes.get(&NodeId(12)), Some(&None));
        assert_eq!(changes.get(&NodeId(2999)), Some(&Some(2999)));
        assert_eq!(changes.get(&NodeId(3000)), None);
    }
}
