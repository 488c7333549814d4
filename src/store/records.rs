//! Variable-length records by slot, on the heap or read in place from the snapshot: what the
//! node table keeps each node's record in (one slot a node) and the edge details keep their
//! rows in (one slot per row of 16 edges).
//!
//! Built in memory, the records lie end to end in pages ([`Arena`]). Read from a snapshot, the
//! records of the slots it had lie end to end in its map (offsets, then bytes, as
//! [`MappedRecords`] reads them), those changed since sit in a map on the heap, and the slots
//! past the snapshot's in an arena. So a store opened from a snapshot holds on the heap only
//! what changed after it.

use std::collections::HashMap;

use crate::codec::{put_varint, take_bytes};
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

    /// Fetches ahead the offsets of record `i` ([`Section::prefetch`]).
    #[inline]
    fn prefetch_offsets(&self, i: usize) {
        self.offsets.prefetch(i);
    }

    /// Fetches ahead the first bytes of record `i`, reading its offset (fetched ahead
    /// before, for this to gain anything).
    #[inline]
    fn prefetch_record(&self, i: usize) {
        if let Some(start) = self.offsets.get(i) {
            self.bytes.prefetch(start as usize);
        }
    }

    /// Checks again the blocks record `i` is read from: its two offsets, then the bytes
    /// between them; whether they are sound.
    fn recheck(&self, i: usize) -> bool {
        if !self.offsets.recheck(i..i + 2) {
            return false;
        }
        self.offsets
            .span(i)
            .is_none_or(|(start, end)| self.bytes.recheck(start as usize..end as usize))
    }
}

/// A step of [`Records::prefetch`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Prefetch {
    /// The slot's offsets.
    Offsets,
    /// The record's first bytes, where the offsets (fetched before) say it starts.
    Record,
}

/// Records by slot (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Records<O> {
    /// Slots from the base's count up.
    slots: Arena,
    base: Option<MappedRecords<O>>,
    /// Records of slots below the base's count that changed since (`None`: removed).
    changed: HashMap<u32, Option<Box<[u8]>>, BuildIdHasher>,
}

impl<O> Default for Records<O> {
    fn default() -> Self {
        Records {
            slots: Arena::default(),
            base: None,
            changed: HashMap::default(),
        }
    }
}

/// Bytes of a page of an [`Arena`] once it holds a quarter megabyte. Not more: mimalloc
/// serves a block over 128 KiB as a large object, and pages of a megabyte left a 1M-edge
/// load 20-30 MB more resident (peak 285-296 B/edge against 241-258 with these).
const PAGE: usize = 64 << 10;

/// Bytes of its first pages: an arena's pages grow with it, a quarter of what it holds at a
/// time, so that a small store does not hold a whole page for a few records.
const FIRST_PAGE: usize = 4 << 10;

/// A record longer than this takes a page of its own, so that a page wastes at most this at
/// its end.
const OWN_PAGE: usize = PAGE / 8;

/// An [`Arena`] slot without a record.
const NO_RECORD: u64 = u64::MAX;

/// Variable-length records by slot, end to end in pages of up to [`PAGE`] bytes, each record its
/// length (a varint) then its bytes. A slot is where its record starts, a `u64`: the page in
/// the high half, the offset in the low. A box per record had taken a 16-byte slot and the
/// allocator's rounding of each record: 12 bytes more a node of the benchmark graph, 2.4 an
/// edge of it. Pages are never grown, so filling one copies nothing.
///
/// A record replaced or removed leaves its bytes in its page: once such bytes are a third
/// of all, and at least a page, the records are written anew into fresh pages
/// ([`Arena::compact`]), which bounds the waste at half of what is live.
#[derive(Clone, Debug, Default)]
struct Arena {
    slots: Vec<u64>,
    pages: Vec<Vec<u8>>,
    /// The page being filled: records of at most [`OWN_PAGE`] bytes go to it.
    open: Option<usize>,
    /// Bytes in pages that no slot points to.
    dead: usize,
    /// Bytes in pages.
    used: usize,
}

impl Arena {
    fn len(&self) -> usize {
        self.slots.len()
    }

    /// The record in slot `i`.
    fn get(&self, i: usize) -> Option<&[u8]> {
        let at = *self.slots.get(i)?;
        if at == NO_RECORD {
            return None;
        }
        let page = self.pages.get((at >> 32) as usize)?;
        let mut r = page.get(at as u32 as usize..)?;
        take_bytes(&mut r)
    }

    /// Puts `record` in slot `i` (`None` empties it).
    fn set(&mut self, i: usize, record: Option<&[u8]>) {
        if self.slots.len() <= i {
            if record.is_none() {
                return;
            }
            self.slots.resize(i + 1, NO_RECORD);
        }
        if let Some(old) = self.get(i) {
            self.dead += framed_len(old.len());
        }
        self.slots[i] = match record {
            Some(r) => self.append(r),
            None => NO_RECORD,
        };
        if self.dead >= PAGE && self.dead * 3 >= self.used {
            self.compact();
        }
    }

    /// Writes `record` at the end of the open page (a new one when it does not fit) or in a
    /// page of its own; where it starts.
    fn append(&mut self, record: &[u8]) -> u64 {
        let need = framed_len(record.len());
        let page = if need > OWN_PAGE {
            self.pages.push(Vec::with_capacity(need));
            self.pages.len() - 1
        } else {
            match self.open {
                Some(p) if self.pages[p].capacity() - self.pages[p].len() >= need => p,
                _ => {
                    let size = (self.used / 4).clamp(FIRST_PAGE, PAGE).max(need);
                    self.pages.push(Vec::with_capacity(size));
                    self.open = Some(self.pages.len() - 1);
                    self.pages.len() - 1
                }
            }
        };
        let bytes = &mut self.pages[page];
        // A page's offsets are below `PAGE`, or 0 for a page of its own.
        let offset = bytes.len() as u64;
        put_varint(bytes, record.len() as u64);
        bytes.extend_from_slice(record);
        self.used += need;
        (page as u64) << 32 | offset
    }

    /// Writes the live records anew into fresh pages, in slot order.
    fn compact(&mut self) {
        let mut fresh = Arena {
            slots: Vec::with_capacity(self.slots.len()),
            ..Arena::default()
        };
        for i in 0..self.slots.len() {
            let at = match self.get(i) {
                Some(r) => fresh.append(r),
                None => NO_RECORD,
            };
            fresh.slots.push(at);
        }
        *self = fresh;
    }

    /// Heap bytes: the slots and the pages.
    fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<u64>()
            + self.pages.iter().map(Vec::capacity).sum::<usize>()
            + self.pages.capacity() * std::mem::size_of::<Vec<u8>>()
    }
}

/// Bytes a record of `len` bytes takes in a page: its length as a varint, then itself.
fn framed_len(len: usize) -> usize {
    let mut varint = 1;
    let mut v = len >> 7;
    while v > 0 {
        varint += 1;
        v >>= 7;
    }
    varint + len
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

    /// Fetches ahead what a read of slot `i` reads in the map, in two steps: `Offsets` first,
    /// then (once those have come) `Record`. Slots not read from the map are left alone.
    #[inline]
    pub(crate) fn prefetch(&self, i: usize, step: Prefetch) {
        if let Some(base) = &self.base {
            if i < base.len() {
                match step {
                    Prefetch::Offsets => base.prefetch_offsets(i),
                    Prefetch::Record => base.prefetch_record(i),
                }
            }
        }
    }

    /// Checks again the mapped blocks slot `i` is read from, when it is read from the map;
    /// whether they are sound.
    pub(crate) fn recheck_mapped(&self, i: usize) -> bool {
        match &self.base {
            Some(base) if i < base.len() && !self.changed.contains_key(&(i as u32)) => {
                base.recheck(i)
            }
            _ => true,
        }
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
            _ => self.slots.get(i - self.base_len()),
        }
    }

    /// Puts `record` in slot `i` (`None` empties it).
    pub(crate) fn set(&mut self, i: usize, record: Option<&[u8]>) {
        let base = self.base_len();
        if i < base {
            self.changed.insert(i as u32, record.map(Box::from));
            return;
        }
        self.slots.set(i - base, record);
    }

    /// Heap bytes: the slots and the records (without the allocator's rounding of a changed
    /// record).
    pub(crate) fn heap_bytes(&self) -> usize {
        let slot = std::mem::size_of::<Option<Box<[u8]>>>();
        self.slots.heap_bytes()
            // A map slot: the id, the record's pointer and length, a control byte.
            + self.changed.capacity() * (4 + slot + 1)
            + self.changed.values().flatten().map(|r| r.len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_holds_what_was_put_and_an_emptied_one_nothing() {
        let mut r: Records<RecordOffset> = Records::default();
        r.set(4, Some(&[7, 7, 7]));
        r.set(1, Some(&[1, 1, 1]));
        assert_eq!(r.get(4), Some(&[7u8, 7, 7][..]));
        assert_eq!(r.get(1), Some(&[1u8, 1, 1][..]));
        assert_eq!((r.get(0), r.get(9)), (None, None));
        assert_eq!(r.slot_bound(), 5);
        r.set(4, None);
        assert_eq!(r.get(4), None);
        // Emptying a slot past the end allocates nothing.
        r.set(1000, None);
        assert_eq!(r.slot_bound(), 5);
        // An empty record is a record.
        r.set(2, Some(&[]));
        assert_eq!(r.get(2), Some(&[][..]));
    }

    /// Small records share pages, a long one takes a page of its own, and a record put again
    /// and again leaves no more than half of what is live behind.
    #[test]
    fn records_share_pages_and_replaced_ones_are_given_back() {
        let mut a = Arena::default();
        for i in 0..100_000 {
            a.set(i, Some(format!("record {i}").as_bytes()));
        }
        let live: usize = (0..100_000)
            .map(|i| framed_len(a.get(i).unwrap().len()))
            .sum();
        assert_eq!(a.used, live);
        // Pages fill to within a record of their end, and grow with the arena.
        let pages: usize = a.pages.iter().map(Vec::capacity).sum();
        assert!(
            pages <= live + live / 4 + 2 * FIRST_PAGE,
            "{pages} for {live}"
        );
        let (_, full) = a.pages.split_last().unwrap();
        assert!(full.iter().all(|p| p.capacity() - p.len() < 20));
        assert_eq!(a.pages[0].capacity(), FIRST_PAGE);
        // 8 bytes a slot, and the pages: no allocation a record.
        assert_eq!(
            a.heap_bytes(),
            a.slots.capacity() * 8 + pages + a.pages.capacity() * 24
        );
        let long = vec![9u8; 3 * PAGE];
        a.set(7, Some(&long));
        assert_eq!(a.get(7), Some(&long[..]));
        assert_eq!(a.pages.last().unwrap().capacity(), framed_len(long.len()));
        // The open page still takes the small records.
        let pages = a.pages.len();
        a.set(100_000, Some(b"after the long one"));
        assert_eq!(a.pages.len(), pages);
        // Replacing one record a million times keeps the waste bounded.
        for round in 0..1_000_000u32 {
            a.set(5, Some(&round.to_le_bytes()[..]));
        }
        assert_eq!(a.get(5), Some(&999_999u32.to_le_bytes()[..]));
        assert!(a.dead * 2 <= a.used, "dead {} of {}", a.dead, a.used);
        for i in (0..100_000).filter(|i| *i != 5 && *i != 7) {
            assert_eq!(a.get(i), Some(format!("record {i}").as_bytes()));
        }
    }

    proptest::proptest! {
        /// Any run of puts and removals of records of any length reads back as a map of
        /// slot to record does, and the bytes counted as used and dead are those of the pages.
        #[test]
        fn an_arena_reads_as_a_map(
            ops in proptest::collection::vec(
                (0..400usize, proptest::option::of(proptest::collection::vec(0..=255u8, 0..150))),
                0..600,
            ),
        ) {
            let mut a = Arena::default();
            let mut model: HashMap<usize, Vec<u8>> = HashMap::new();
            for (slot, record) in &ops {
                a.set(*slot, record.as_deref());
                match record {
                    Some(r) => model.insert(*slot, r.clone()),
                    None => model.remove(slot),
                };
            }
            for slot in 0..400 {
                proptest::prop_assert_eq!(a.get(slot), model.get(&slot).map(Vec::as_slice));
            }
            let live: usize = model.values().map(|r| framed_len(r.len())).sum();
            proptest::prop_assert_eq!(a.used, live + a.dead);
            proptest::prop_assert_eq!(a.pages.iter().map(Vec::len).sum::<usize>(), a.used);
        }
    }
}
