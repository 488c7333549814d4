//! Variable-length records by slot, on the heap or read in place from the snapshot: what the
//! node table keeps each node's record in (one slot a node) and the edge details keep their
//! rows in (one slot per row of 16 edges).
//!
//! Built in memory, every slot is a `Box<[u8]>` of its own. Read from a snapshot, the records
//! of the slots it had lie end to end in its map (offsets, then bytes, as [`MappedRecords`]
//! reads them), those changed since sit in a map on the heap, and the slots past the
//! snapshot's in a vector. So a store opened from a snapshot holds on the heap only what
//! changed after it.

use std::collections::HashMap;

use crate::graph::BuildIdHasher;
use crate::mapped::{Limits, Offset, Offsets, Plain, Section};

/// Where a node's record starts in the snapshot's node records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct RecordOffset(pub u64);

// SAFETY: a `u64`.
unsafe impl Plain for RecordOffset {
    fn valid(&self, limits: &Limits) -> bool {
        self.0 <= limits.record_bytes
    }
    fn ordered(&self) -> Option<u64> {
        Some(self.0)
    }
}

impl Offset for RecordOffset {
    fn at(self) -> u64 {
        self.0
    }
    fn of(at: u64) -> Self {
        RecordOffset(at)
    }
}

/// Where a row of edge details starts in the snapshot's edge details.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct DetailOffset(pub u64);

// SAFETY: a `u64`.
unsafe impl Plain for DetailOffset {
    fn valid(&self, limits: &Limits) -> bool {
        self.0 <= limits.detail_bytes
    }
    fn ordered(&self) -> Option<u64> {
        Some(self.0)
    }
}

impl Offset for DetailOffset {
    fn at(self) -> u64 {
        self.0
    }
    fn of(at: u64) -> Self {
        DetailOffset(at)
    }
}

/// Records of a snapshot, read in place from its map (`crate::mapped`).
#[derive(Clone, Debug)]
pub(crate) struct MappedRecords<O> {
    pub offsets: Offsets<O>,
    pub bytes: Section<u8>,
}

impl<O: Offset> MappedRecords<O> {
    fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Record `i` (below [`MappedRecords::len`]); `None` for an empty slot or one in a
    /// damaged block.
    fn record(&self, i: usize) -> Option<&[u8]> {
        let (start, end) = self.offsets.span(i)?;
        if end <= start {
            return None;
        }
        self.bytes.slice(start as usize..end as usize)
    }

    /// Checks every block now; whether all are sound.
    fn check_all(&self) -> bool {
        self.offsets.check_all() & self.bytes.check_all()
    }
}

/// Records by slot (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Records<O> {
    /// Slots from the base's count up.
    slots: Vec<Option<Box<[u8]>>>,
    base: Option<MappedRecords<O>>,
    /// Records of slots below the base's count that changed since (`None`: removed).
    changed: HashMap<u32, Option<Box<[u8]>>, BuildIdHasher>,
}

impl<O> Default for Records<O> {
    fn default() -> Self {
        Records {
            slots: Vec::new(),
            base: None,
            changed: HashMap::default(),
        }
    }
}

impl<O: Offset> Records<O> {
    /// Records read from a snapshot's map.
    pub(crate) fn mapped(base: MappedRecords<O>) -> Self {
        Records {
            base: Some(base),
            ..Records::default()
        }
    }

    /// Slots whose records are read from the map.
    fn base_len(&self) -> usize {
        self.base.as_ref().map_or(0, MappedRecords::len)
    }

    /// Checks every block of the mapped records now; whether all are sound.
    pub(crate) fn check_mapped(&self) -> bool {
        self.base.as_ref().is_none_or(MappedRecords::check_all)
    }

    /// One past the highest slot that may hold a record.
    pub(crate) fn slot_bound(&self) -> usize {
        self.base_len() + self.slots.len()
    }

    /// The record in slot `i`.
    pub(crate) fn get(&self, i: usize) -> Option<&[u8]> {
        match &self.base {
            Some(base) if i < base.len() => {
                if !self.changed.is_empty() {
                    if let Some(r) = self.changed.get(&(i as u32)) {
                        return r.as_deref();
                    }
                }
                base.record(i)
            }
            _ => self
                .slots
                .get(i - self.base_len())
                .and_then(Option::as_deref),
        }
    }

    /// Puts `record` in slot `i` (`None` empties it).
    pub(crate) fn set(&mut self, i: usize, record: Option<Box<[u8]>>) {
        let base = self.base_len();
        if i < base {
            self.changed.insert(i as u32, record);
            return;
        }
        let i = i - base;
        if self.slots.len() <= i {
            if record.is_none() {
                return;
            }
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = record;
    }

    /// Heap bytes: the slots and the records (without the allocator's rounding).
    pub(crate) fn heap_bytes(&self) -> usize {
        let slot = std::mem::size_of::<Option<Box<[u8]>>>();
        self.slots.capacity() * slot
            + self.slots.iter().flatten().map(|r| r.len()).sum::<usize>()
            // A map slot: the id, the record's pointer and length, a control byte.
            + self.changed.capacity() * (4 + slot + 1)
            + self.changed.values().flatten().map(|r| r.len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(b: u8) -> Option<Box<[u8]>> {
        Some(vec![b; 3].into_boxed_slice())
    }

    #[test]
    fn a_slot_holds_what_was_put_and_an_emptied_one_nothing() {
        let mut r: Records<RecordOffset> = Records::default();
        r.set(4, record(7));
        r.set(1, record(1));
        assert_eq!(r.get(4), Some(&[7u8, 7, 7][..]));
        assert_eq!(r.get(1), Some(&[1u8, 1, 1][..]));
        assert_eq!((r.get(0), r.get(9)), (None, None));
        assert_eq!(r.slot_bound(), 5);
        r.set(4, None);
        assert_eq!(r.get(4), None);
        // Emptying a slot past the end allocates nothing.
        r.set(1000, None);
        assert_eq!(r.slot_bound(), 5);
    }
}
