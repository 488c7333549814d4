//! The in-memory edge table: one 20-byte slot per edge id (endpoints, relation, confidence,
//! salience), validity bounds on the side for the few edges that have them.
//!
//! The full [`EdgeCore`] is assembled on read: its `last_seen` lives in the adjacency (decay
//! reads it there during traversals) and its bounds in a map, because almost no edge has one.
//! Storing every core whole cost 56 bytes an edge (an `Option` of 48 bytes, two of the three
//! `i64` fields nearly always unbounded, the third a copy of the adjacency's); the slot is 20.

use std::collections::BTreeMap;

use super::EdgeCore;
use crate::model::{EdgeId, NodeId};

/// One edge id's slot; `relation == EMPTY` marks a free slot (relation ids are below 2^30).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Slot {
    from: u32,
    to: u32,
    relation: u32,
    confidence: f32,
    salience: f32,
}

const EMPTY: u32 = u32::MAX;

impl Slot {
    const FREE: Slot = Slot {
        from: 0,
        to: 0,
        relation: EMPTY,
        confidence: 0.0,
        salience: 0.0,
    };
    fn is_live(&self) -> bool {
        self.relation != EMPTY
    }
}

/// Edge cores by id (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct EdgeTable {
    slots: Vec<Slot>,
    /// `(valid_from, valid_to)` of the live edges with either bound (`i64::MIN` / `i64::MAX`
    /// for the open side).
    bounds: BTreeMap<EdgeId, (i64, i64)>,
    live: usize,
}

impl EdgeTable {
    /// One past the highest edge id with a slot.
    pub(crate) fn slot_bound(&self) -> usize {
        self.slots.len()
    }

    /// Live edges.
    pub(crate) fn live_count(&self) -> usize {
        self.live
    }

    /// Puts a core in slot `id` (its `last_seen` is not kept here; see the module doc).
    pub(crate) fn put(&mut self, id: EdgeId, core: &EdgeCore) {
        let i = id.0 as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, Slot::FREE);
        }
        if !self.slots[i].is_live() {
            self.live += 1;
        }
        self.slots[i] = Slot {
            from: core.from.0,
            to: core.to.0,
            relation: core.relation,
            confidence: core.confidence,
            salience: core.salience,
        };
        if core.has_bounds() {
            self.bounds.insert(id, (core.valid_from, core.valid_to));
        } else {
            self.bounds.remove(&id);
        }
    }

    /// Frees slot `id`, giving back the endpoints of the edge it held.
    pub(crate) fn remove(&mut self, id: EdgeId) -> Option<(NodeId, NodeId)> {
        let slot = self.slots.get_mut(id.0 as usize)?;
        if !slot.is_live() {
            return None;
        }
        let ends = (NodeId(slot.from), NodeId(slot.to));
        *slot = Slot::FREE;
        self.live -= 1;
        self.bounds.remove(&id);
        Some(ends)
    }

    /// The core of edge `id`, with `last_seen` as given, if the edge is live.
    pub(crate) fn get(&self, id: EdgeId, last_seen: i64) -> Option<EdgeCore> {
        let s = self.slots.get(id.0 as usize).filter(|s| s.is_live())?;
        let (valid_from, valid_to) = self
            .bounds
            .get(&id)
            .copied()
            .unwrap_or((i64::MIN, i64::MAX));
        Some(EdgeCore {
            from: NodeId(s.from),
            to: NodeId(s.to),
            relation: s.relation,
            confidence: s.confidence,
            valid_from,
            valid_to,
            last_seen,
            salience: s.salience,
        })
    }

    /// The ids of the live edges, in id order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = EdgeId> + Clone + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_live())
            .map(|(i, _)| EdgeId(i as u32))
    }

    /// A table of `slots` ids filled on every core: `slot(i)` gives the `(from, to, relation,
    /// confidence, salience)` of id `i`, `None` for a free id, or why the id cannot be used
    /// (the first such id's reason is returned). No bounds: they are put after.
    pub(crate) fn from_slots<F>(slots: usize, slot: F) -> Result<Self, String>
    where
        F: Fn(usize) -> Result<Option<(NodeId, NodeId, u32, f32, f32)>, String> + Sync,
    {
        use rayon::prelude::*;
        let first_error = std::sync::Mutex::new(None::<(usize, String)>);
        let mut filled = Vec::new();
        (0..slots)
            .into_par_iter()
            .map(|i| match slot(i) {
                Ok(Some((from, to, relation, confidence, salience))) => Slot {
                    from: from.0,
                    to: to.0,
                    relation,
                    confidence,
                    salience,
                },
                Ok(None) => Slot::FREE,
                Err(why) => {
                    let mut first = first_error.lock().unwrap_or_else(|p| p.into_inner());
                    if first.as_ref().is_none_or(|(j, _)| i < *j) {
                        *first = Some((i, why));
                    }
                    Slot::FREE
                }
            })
            .collect_into_vec(&mut filled);
        if let Some((_, why)) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(why);
        }
        let live = filled.par_iter().filter(|s| s.is_live()).count();
        Ok(EdgeTable {
            slots: filled,
            bounds: BTreeMap::new(),
            live,
        })
    }

    /// The live edges as `(edge, from, to, relation, confidence, bounded)`, in id order,
    /// read straight from the slots: what building an adjacency needs, without assembling a
    /// whole core per edge (several passes over every edge at an open).
    pub(crate) fn live_ends(
        &self,
    ) -> impl Iterator<Item = (EdgeId, NodeId, NodeId, u32, f32, bool)> + Clone + Send + Sync + '_
    {
        let any_bounds = !self.bounds.is_empty();
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_live())
            .map(move |(i, s)| {
                let id = EdgeId(i as u32);
                (
                    id,
                    NodeId(s.from),
                    NodeId(s.to),
                    s.relation,
                    s.confidence,
                    any_bounds && self.bounds.contains_key(&id),
                )
            })
    }

    /// The live edges with a validity bound, in id order.
    pub(crate) fn bounded(&self) -> impl Iterator<Item = EdgeId> + '_ {
        self.bounds.keys().copied()
    }

    /// Bytes on the heap: the slots, and the bounds map at about 64 bytes an entry (a B-tree
    /// node's share per key and value).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>() + self.bounds.len() * 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(from: u32, to: u32, bounds: (i64, i64)) -> EdgeCore {
        EdgeCore {
            from: NodeId(from),
            to: NodeId(to),
            relation: 3,
            confidence: 0.75,
            valid_from: bounds.0,
            valid_to: bounds.1,
            last_seen: 0,
            salience: 0.25,
        }
    }

    #[test]
    fn a_slot_gives_back_the_core_it_was_given_with_its_bounds() {
        let mut t = EdgeTable::default();
        let open = core(1, 2, (i64::MIN, i64::MAX));
        let ended = core(2, 1, (i64::MIN, 40));
        t.put(EdgeId(4), &open);
        t.put(EdgeId(0), &ended);
        assert_eq!(t.get(EdgeId(4), 0), Some(open));
        assert_eq!(t.get(EdgeId(0), 0), Some(ended));
        assert_eq!(t.get(EdgeId(2), 0), None);
        assert_eq!(t.live_count(), 2);
        assert_eq!(t.ids().collect::<Vec<_>>(), vec![EdgeId(0), EdgeId(4)]);
        assert_eq!(t.bounded().collect::<Vec<_>>(), vec![EdgeId(0)]);
        let flags: Vec<_> = t.live_ends().map(|e| (e.0, e.5)).collect();
        assert_eq!(flags, vec![(EdgeId(0), true), (EdgeId(4), false)]);
        // Re-putting without bounds clears them; removing frees the slot and its bounds.
        t.put(EdgeId(0), &open);
        assert_eq!(t.bounded().count(), 0);
        t.put(EdgeId(4), &ended);
        assert_eq!(t.remove(EdgeId(4)), Some((NodeId(2), NodeId(1))));
        assert_eq!(t.remove(EdgeId(4)), None);
        assert_eq!(t.live_count(), 1);
        assert_eq!(t.bounded().count(), 0);
        assert!(t.get(EdgeId(4), 0).is_none() && t.get(EdgeId(0), 0).is_some());
    }

    #[test]
    fn a_table_filled_on_every_core_reads_as_one_filled_by_puts() {
        let ends = |i: usize| (NodeId(i as u32 % 7), NodeId(i as u32 % 5), 1, 0.5, 0.25);
        let n = 50_000;
        let t = EdgeTable::from_slots(n, |i| Ok((i % 3 != 0).then(|| ends(i)))).unwrap();
        let mut by_puts = EdgeTable::default();
        for i in (0..n).filter(|i| i % 3 != 0) {
            let (from, to, ..) = ends(i);
            let mut c = core(from.0, to.0, (i64::MIN, i64::MAX));
            (c.relation, c.confidence, c.salience) = (1, 0.5, 0.25);
            by_puts.put(EdgeId(i as u32), &c);
        }
        assert_eq!(t.live_count(), by_puts.live_count());
        assert!(t.ids().eq(by_puts.ids()));
        assert!((0..n as u32).all(|i| t.get(EdgeId(i), 0) == by_puts.get(EdgeId(i), 0)));
        let from_cores: Vec<_> = by_puts
            .ids()
            .map(|id| {
                let c = by_puts.get(id, 0).unwrap();
                (id, c.from, c.to, c.relation, c.confidence, c.has_bounds())
            })
            .collect();
        assert_eq!(t.live_ends().collect::<Vec<_>>(), from_cores);
        // Of several unusable ids, the lowest is reported, whichever core met it first.
        let bad = EdgeTable::from_slots(n, |i| match i {
            40_000 | 777 | 30_001 => Err(format!("slot {i}")),
            _ => Ok(None),
        });
        assert_eq!(bad.err().as_deref(), Some("slot 777"));
    }
}
