//! The in-memory edge table: one 20-byte slot per edge id (endpoints, relation, confidence,
//! salience), validity bounds on the side for the few edges that have them.
//!
//! The full [`EdgeCore`] is assembled on read: its `last_seen` lives in the adjacency (decay
//! reads it there during traversals) and its bounds in a map, because almost no edge has one.
//! Storing every core whole cost 56 bytes an edge (an `Option` of 48 bytes, two of the three
//! `i64` fields nearly always unbounded, the third a copy of the adjacency's); the slot is 20.

use std::collections::BTreeMap;

use super::EdgeCore;
use crate::mapped::{Layered, Limits, Plain};
use crate::model::{EdgeId, NodeId};
use crate::packed::{Packable, Packed, MAX_FIELDS};

/// One edge id's slot; `relation == EMPTY` marks a free slot (relation ids are below 2^30).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub(crate) struct Slot {
    from: u32,
    to: u32,
    relation: u32,
    confidence: f32,
    salience: f32,
}

const EMPTY: u32 = u32::MAX;

// SAFETY: `#[repr(C)]` of five 4-byte integers and floats: no padding, any bits a value.
unsafe impl Plain for Slot {
    /// Read from a snapshot: free, or joining nodes by a relation the snapshot holds.
    fn valid(&self, limits: &Limits) -> bool {
        !self.is_live()
            || (self.from < limits.nodes
                && self.to < limits.nodes
                && self.relation < limits.relations)
    }
}

/// Packed in the snapshot (`crate::packed`): the endpoints, the relation one up (0 for a free
/// slot, whose other fields are 0), and the bits of the confidence and salience.
impl Packable for Slot {
    const FIELDS: usize = 5;
    /// The confidence.
    const CODED: Option<usize> = Some(3);
    fn to_fields(&self) -> [u64; MAX_FIELDS] {
        if !self.is_live() {
            return [0; MAX_FIELDS];
        }
        [
            u64::from(self.from),
            u64::from(self.to),
            u64::from(self.relation) + 1,
            u64::from(self.confidence.to_bits()),
            u64::from(self.salience.to_bits()),
        ]
    }
    fn from_fields(f: &[u64; MAX_FIELDS]) -> Self {
        // Fields past 32 bits (a crafted file) come out as ids the bounds check refuses.
        let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX - 1);
        if f[2] == 0 {
            return Slot::FREE;
        }
        Slot {
            from: narrow(f[0]),
            to: narrow(f[1]),
            relation: narrow(f[2] - 1),
            confidence: f32::from_bits(f[3] as u32),
            salience: f32::from_bits(f[4] as u32),
        }
    }
}

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
    /// Built in memory, or mapped from the snapshot (`crate::mapped`): a slot in a damaged
    /// block reads as free.
    slots: Layered<Slot>,
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

    /// Whether slot `id` holds a live edge.
    pub(crate) fn is_live(&self, id: EdgeId) -> bool {
        self.slot(id.0 as usize).is_live()
    }

    /// Puts a core in slot `id` (its `last_seen` is not kept here; see the module doc).
    pub(crate) fn put(&mut self, id: EdgeId, core: &EdgeCore) {
        let i = id.0 as usize;
        if !self.slot(i).is_live() {
            self.live += 1;
        }
        let slot = Slot {
            from: core.from.0,
            to: core.to.0,
            relation: core.relation,
            confidence: core.confidence,
            salience: core.salience,
        };
        self.slots.set(i, slot, Slot::FREE);
        if core.has_bounds() {
            self.bounds.insert(id, (core.valid_from, core.valid_to));
        } else {
            self.bounds.remove(&id);
        }
    }

    /// Frees slot `id`, giving back the endpoints of the edge it held.
    pub(crate) fn remove(&mut self, id: EdgeId) -> Option<(NodeId, NodeId)> {
        let i = id.0 as usize;
        let slot = self.slot(i);
        if !slot.is_live() {
            return None;
        }
        let ends = (NodeId(slot.from), NodeId(slot.to));
        self.slots.set(i, Slot::FREE, Slot::FREE);
        // Counts read from a snapshot's body are not proof against a crafted file.
        self.live = self.live.saturating_sub(1);
        self.bounds.remove(&id);
        Some(ends)
    }

    /// The core of edge `id`, with `last_seen` as given, if the edge is live.
    pub(crate) fn get(&self, id: EdgeId, last_seen: i64) -> Option<EdgeCore> {
        let s = Some(self.slot(id.0 as usize)).filter(Slot::is_live)?;
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
        (0..self.slots.len())
            .filter(|i| self.slot(*i).is_live())
            .map(|i| EdgeId(i as u32))
    }

    /// Slot `i` (free past the end, or in a damaged block of a map).
    #[inline]
    pub(crate) fn slot(&self, i: usize) -> Slot {
        self.slots.get(i).unwrap_or(Slot::FREE)
    }

    /// The table read from a snapshot: its slots mapped, `live` of them live, and the
    /// validity bounds of those that have one.
    pub(crate) fn mapped(
        slots: Packed<Slot>,
        live: usize,
        bounds: BTreeMap<EdgeId, (i64, i64)>,
    ) -> Self {
        EdgeTable {
            slots: Layered::mapped(slots),
            bounds,
            live,
        }
    }

    /// Checks every block read from a map now; whether all are sound.
    pub(crate) fn check_mapped(&self) -> bool {
        self.slots.check_all()
    }

    /// The live edges with a validity bound, in id order.
    pub(crate) fn bounded(&self) -> impl Iterator<Item = EdgeId> + '_ {
        self.bounds.keys().copied()
    }

    /// Bytes on the heap: the slots, and the bounds map at about 64 bytes an entry (a B-tree
    /// node's share per key and value).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.heap_bytes() + self.bounds.len() * 64
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
}
