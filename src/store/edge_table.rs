//! The in-memory edge table: a slot per edge id (endpoints, relation, confidence, salience),
//! validity bounds on the side for the few edges that have them.
//!
//! The full [`EdgeCore`] is assembled on read: its `last_seen` lives in the adjacency (decay
//! reads it there during traversals) and its bounds in a map, because almost no edge has one.
//! Storing every core whole cost 56 bytes an edge (an `Option` of 48 bytes, two of the three
//! `i64` fields nearly always unbounded, the third a copy of the adjacency's); the slot is 20,
//! as the snapshot maps it. A table built in this process holds 16 of them a slot and the
//! saliences as runs of ids (`crate::times`): a batch's new edges take their event's
//! salience, so a load holds a run per event, where the saliences took 4 bytes an edge.

use std::collections::BTreeMap;

use super::EdgeCore;
use crate::mapped::{Layered, Limits, Plain};
use crate::model::{EdgeId, NodeId};
use crate::packed::{Packable, Packed, MAX_FIELDS};
use crate::pages::Pages;
use crate::times::RunColumn;

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

/// A slot without its salience: what a table built in this process keeps for each edge id.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Core {
    from: u32,
    to: u32,
    relation: u32,
    confidence: f32,
}

impl Core {
    const FREE: Core = Core {
        from: 0,
        to: 0,
        relation: EMPTY,
        confidence: 0.0,
    };
}

/// The slots: built in this process, or mapped from the snapshot.
#[derive(Clone, Debug)]
enum Slots {
    /// Each slot's core, and its salience's bits as runs (see the module doc).
    Owned {
        /// In pages that never move (`crate::pages`).
        cores: Pages<Core>,
        salience: RunColumn<u32>,
    },
    /// Mapped from the snapshot (`crate::mapped`), with what changed since: a slot in a
    /// damaged block reads as free.
    Mapped(Layered<Slot>),
}

impl Default for Slots {
    fn default() -> Self {
        Slots::Owned {
            cores: Pages::default(),
            salience: RunColumn::default(),
        }
    }
}

impl Slots {
    fn len(&self) -> usize {
        match self {
            Slots::Owned { cores, .. } => cores.len(),
            Slots::Mapped(slots) => slots.len(),
        }
    }

    #[inline]
    fn get(&self, i: usize) -> Option<Slot> {
        match self {
            Slots::Owned { cores, salience } => {
                let c = cores.get(i)?;
                Some(Slot {
                    from: c.from,
                    to: c.to,
                    relation: c.relation,
                    confidence: c.confidence,
                    salience: f32::from_bits(salience.get(i).unwrap_or(0)),
                })
            }
            Slots::Mapped(slots) => slots.get(i),
        }
    }

    /// Whether slot `i` holds a live edge, read without its salience.
    #[inline]
    fn is_live(&self, i: usize) -> bool {
        match self {
            Slots::Owned { cores, .. } => cores.get(i).is_some_and(|c| c.relation != EMPTY),
            Slots::Mapped(slots) => slots.get(i).is_some_and(|s| s.is_live()),
        }
    }

    fn set(&mut self, i: usize, slot: Slot) {
        match self {
            Slots::Owned { cores, salience } => {
                cores.set(
                    i,
                    Core {
                        from: slot.from,
                        to: slot.to,
                        relation: slot.relation,
                        confidence: slot.confidence,
                    },
                    Core::FREE,
                );
                salience.set(i, slot.salience.to_bits());
            }
            Slots::Mapped(slots) => slots.set(i, slot, Slot::FREE),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Slots::Owned { cores, salience } => cores.heap_bytes() + salience.heap_bytes(),
            Slots::Mapped(slots) => slots.heap_bytes(),
        }
    }

    fn check_all(&self) -> bool {
        match self {
            Slots::Owned { .. } => true,
            Slots::Mapped(slots) => slots.check_all(),
        }
    }
}

/// Edge cores by id (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct EdgeTable {
    slots: Slots,
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
        self.slots.is_live(id.0 as usize)
    }

    /// Puts a core in slot `id` (its `last_seen` is not kept here; see the module doc).
    pub(crate) fn put(&mut self, id: EdgeId, core: &EdgeCore) {
        let i = id.0 as usize;
        if !self.slots.is_live(i) {
            self.live += 1;
        }
        let slot = Slot {
            from: core.from.0,
            to: core.to.0,
            relation: core.relation,
            confidence: core.confidence,
            salience: core.salience,
        };
        self.slots.set(i, slot);
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
        self.slots.set(i, Slot::FREE);
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
            .filter(|i| self.slots.is_live(*i))
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
            slots: Slots::Mapped(Layered::mapped(slots)),
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

    /// A load's saliences, one an event, take a run an event: a slot is 16 bytes, not 20.
    /// An edge put again with another salience, and a removed one, read back as put.
    #[test]
    fn saliences_shared_by_an_events_edges_take_a_run_each() {
        let mut t = EdgeTable::default();
        for e in 0..100_000u32 {
            let mut c = core(e % 1_000, e % 1_000 + 1, (i64::MIN, i64::MAX));
            c.salience = (e / 10_000) as f32 / 10.0;
            t.put(EdgeId(e), &c);
        }
        let cores = 100_000usize.next_power_of_two() * 16;
        // And a directory entry every 64 ids (`crate::times`).
        assert!(t.heap_bytes() < cores + 16_384, "{} bytes", t.heap_bytes());
        let mut again = core(1, 2, (i64::MIN, i64::MAX));
        again.salience = 0.875;
        t.put(EdgeId(12_345), &again);
        t.remove(EdgeId(99_999));
        assert_eq!(t.get(EdgeId(12_345), 0).map(|c| c.salience), Some(0.875));
        assert_eq!(t.get(EdgeId(12_346), 0).map(|c| c.salience), Some(0.1));
        assert_eq!(t.get(EdgeId(99_998), 0).map(|c| c.salience), Some(0.9));
        assert_eq!(t.get(EdgeId(99_999), 0), None);
        assert_eq!(t.slot(0).salience, 0.0);
        assert_eq!(t.live_count(), 99_999);
    }

    /// A load's growth copies no core already placed (the doubled vector held both copies at
    /// once) and allocates at most twice what it holds.
    #[test]
    fn a_growing_table_moves_no_core_already_placed() {
        let mut t = EdgeTable::default();
        t.put(EdgeId(0), &core(1, 2, (i64::MIN, i64::MAX)));
        let first = match &t.slots {
            Slots::Owned { cores, .. } => cores.get(0).map(|c| c as *const Core),
            Slots::Mapped(_) => None,
        };
        for e in 1..300_000u32 {
            t.put(
                EdgeId(e),
                &core(e % 1_000, e % 1_000 + 1, (i64::MIN, i64::MAX)),
            );
        }
        let now = match &t.slots {
            Slots::Owned { cores, .. } => cores.get(0).map(|c| c as *const Core),
            Slots::Mapped(_) => None,
        };
        assert!(first.is_some());
        assert_eq!(first, now, "slot 0's core moved as the table grew");
        let cores = match &t.slots {
            Slots::Owned { cores, .. } => cores.heap_bytes(),
            Slots::Mapped(_) => 0,
        };
        // The pages, and the list of them.
        let bound = 2 * 300_000 * std::mem::size_of::<Core>() + 4_096;
        assert!(cores <= bound, "{cores} > {bound}");
        assert_eq!(t.get(EdgeId(299_999), 0).map(|c| c.from), Some(NodeId(999)));
        assert_eq!(t.slot_bound(), 300_000);
    }

    /// Slots skipped over read as free, and the table's bound is past the last one set.
    #[test]
    fn slots_skipped_over_read_as_free() {
        let mut t = EdgeTable::default();
        t.put(EdgeId(10), &core(1, 2, (i64::MIN, i64::MAX)));
        t.put(EdgeId(100_000), &core(2, 3, (i64::MIN, i64::MAX)));
        assert!(!t.is_live(EdgeId(5)) && !t.is_live(EdgeId(50_000)));
        assert_eq!(t.slot(50_000), Slot::FREE);
        assert_eq!(t.slot_bound(), 100_001);
        assert_eq!(t.ids().collect::<Vec<_>>(), [EdgeId(10), EdgeId(100_000)]);
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
