//! Arrays read in place from a memory map of the state snapshot, and the vectors built on
//! them.
//!
//! An open maps the snapshot's large sections (the adjacency, the edge slots, last-seen times,
//! node labels) instead of reading and rebuilding them: the open costs no pass over the edges,
//! and the pages cost memory only once a read touches them, as page cache the kernel can take
//! back.
//!
//! Nothing is read from the file unchecked. A section is cut into blocks of about 64 KiB, each
//! with a CRC-32 kept in the snapshot's checksummed body. The first read of a block checks its
//! CRC and every value in it (ids within the bounds the body gives; a packed column's items,
//! whose values are bits, are checked as they are decoded: `crate::packed`), and remembers the
//! result in a bit. A block that fails reads as missing (`None`), never as wrong data or a panic; the
//! section records the damage, and the store reports it and stops using the snapshot (see
//! `store/snapshot.rs`). Checking at first touch rather than at the open is what keeps an open
//! of a 100M-edge store from reading all 6 GB of it. A checkpoint (once its write has read
//! them) and `verify` check every block again, those read before included
//! (`Section::check_all`): the file can change under the map after a block's first read, and
//! a checkpoint would put what it read into the next snapshot under checksums of its own.
//!
//! [`Layered`] is a vector over a packed column of the map (`crate::packed`): reads fall
//! through to the mapped base, writes go to a map (for an index inside the base) or a tail
//! (past it), so a store that changes after an open holds only what changed.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::packed::{Packable, Packed};
use crate::pages::Pages;

/// Bytes of file per checked block (the last block of a section may be shorter).
pub const BLOCK_BYTES: usize = 64 * 1024;

/// What a value read from a mapped section must lie within to be used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Node ids below this.
    pub nodes: u32,
    /// Edge ids below this.
    pub edges: u32,
    /// Interned relation ids below this.
    pub relations: u32,
    /// Interned label ids below this.
    pub labels: u32,
    /// Adjacency offsets at most this.
    pub entries: u64,
    /// Node record offsets at most this.
    pub record_bytes: u64,
    /// Edge detail offsets at most this.
    pub detail_bytes: u64,
}

/// A value that can be read from a mapped file as it lies: every bit pattern is a value,
/// there are no padding bytes, its alignment is at most 8 (a section starts on a page), and
/// its bytes are its little-endian encoding.
///
/// # Safety
/// An implementor must be `#[repr(C)]` (or a primitive) of fields that are integers or
/// floats, without padding.
pub unsafe trait Plain: Copy + Send + Sync + 'static {
    /// Whether a value read from a file is one the state could hold.
    fn valid(&self, limits: &Limits) -> bool;

    /// For offsets, which must never decrease along a section (rows that went back would
    /// overlap, and a copy of each would be the whole array): the value to compare.
    fn ordered(&self) -> Option<u64> {
        None
    }
}

unsafe impl Plain for u64 {
    /// An adjacency offset.
    fn valid(&self, limits: &Limits) -> bool {
        *self <= limits.entries
    }
    fn ordered(&self) -> Option<u64> {
        Some(*self)
    }
}

unsafe impl Plain for i64 {
    /// A time: any value is one.
    fn valid(&self, _: &Limits) -> bool {
        true
    }
}

unsafe impl Plain for u8 {
    /// A byte of a node record: records are checked as they are read.
    fn valid(&self, _: &Limits) -> bool {
        true
    }
}

unsafe impl Plain for u32 {
    /// A node's interned label, or `u32::MAX` for an empty slot.
    fn valid(&self, limits: &Limits) -> bool {
        *self == u32::MAX || *self < limits.labels
    }
}

/// An offset into rows or records laid end to end: one per slot and one more, so that slot
/// `i` is what lies between the `i`th and the next (nothing when they are equal). Each kind
/// checks its offsets against the length of what it indexes ([`Plain::valid`]).
pub trait Offset: Plain {
    fn at(self) -> u64;
    /// The offset `at` (what a narrow offset stands for).
    fn of(at: u64) -> Self;
}

/// An adjacency offset, in entries.
impl Offset for u64 {
    fn at(self) -> u64 {
        self
    }
    fn of(at: u64) -> Self {
        at
    }
}

/// An offset `O` in four bytes: what a snapshot writes where every offset of its sections
/// fits (entries, node record bytes and edge detail bytes each below 4 GiB), half the eight
/// bytes of a wide one.
#[repr(transparent)]
pub struct Narrow<O>(u32, PhantomData<O>);

impl<O> Clone for Narrow<O> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<O> Copy for Narrow<O> {}

impl<O> Narrow<O> {
    pub fn new(at: u32) -> Self {
        Narrow(at, PhantomData)
    }
}

// SAFETY: a `u32` (the marker takes no bytes).
unsafe impl<O: Offset> Plain for Narrow<O> {
    fn valid(&self, limits: &Limits) -> bool {
        O::of(u64::from(self.0)).valid(limits)
    }
    fn ordered(&self) -> Option<u64> {
        Some(u64::from(self.0))
    }
}

/// Asks the processor to fetch the cache line holding `item`. A hint: it reads nothing the
/// program sees, and cannot fault.
#[inline(always)]
pub fn prefetch_read<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; `item` is a valid reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((item as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

/// A section of offsets `O`, narrow or wide as the snapshot wrote them.
pub enum Offsets<O> {
    Narrow(Section<Narrow<O>>),
    Wide(Section<O>),
}

impl<O> Clone for Offsets<O> {
    fn clone(&self) -> Self {
        match self {
            Offsets::Narrow(s) => Offsets::Narrow(s.clone()),
            Offsets::Wide(s) => Offsets::Wide(s.clone()),
        }
    }
}

impl<O> std::fmt::Debug for Offsets<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Offsets::Narrow(s) => write!(f, "Narrow({s:?})"),
            Offsets::Wide(s) => write!(f, "Wide({s:?})"),
        }
    }
}

impl<O: Offset> Offsets<O> {
    pub fn len(&self) -> usize {
        match self {
            Offsets::Narrow(s) => s.len(),
            Offsets::Wide(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offset `i`; `None` past the end or in a damaged block.
    pub fn get(&self, i: usize) -> Option<u64> {
        match self {
            Offsets::Narrow(s) => s.get(i).map(|o| u64::from(o.0)),
            Offsets::Wide(s) => s.get(i).map(O::at),
        }
    }

    /// Offsets `i` and `i + 1`, where slot `i` starts and ends; `None` past the end or in a
    /// damaged block.
    #[inline]
    pub fn span(&self, i: usize) -> Option<(u64, u64)> {
        match self {
            Offsets::Narrow(s) => match s.slice(i..i + 2)? {
                [start, end] => Some((u64::from(start.0), u64::from(end.0))),
                _ => None,
            },
            Offsets::Wide(s) => match s.slice(i..i + 2)? {
                [start, end] => Some((start.at(), end.at())),
                _ => None,
            },
        }
    }

    /// Checks every block now; whether all are sound.
    pub fn check_all(&self) -> bool {
        match self {
            Offsets::Narrow(s) => s.check_all(),
            Offsets::Wide(s) => s.check_all(),
        }
    }

    /// [`Section::record_damage`].
    pub fn record_damage(&self) {
        match self {
            Offsets::Narrow(s) => s.record_damage(),
            Offsets::Wide(s) => s.record_damage(),
        }
    }

    /// [`Section::prefetch`] of offset `i`.
    #[inline]
    pub fn prefetch(&self, i: usize) {
        match self {
            Offsets::Narrow(s) => s.prefetch(i),
            Offsets::Wide(s) => s.prefetch(i),
        }
    }

    /// Checks again the blocks holding offsets `range` ([`Section::recheck`]).
    pub fn recheck(&self, range: Range<usize>) -> bool {
        match self {
            Offsets::Narrow(s) => s.recheck(range),
            Offsets::Wide(s) => s.recheck(range),
        }
    }
}

/// The bytes of `items` as they are laid out in memory (and in a section of the file).
pub fn bytes_of<T: Plain>(items: &[T]) -> &[u8] {
    // SAFETY: `Plain` types have no padding, so every byte of the slice is initialised.
    unsafe { std::slice::from_raw_parts(items.as_ptr().cast(), std::mem::size_of_val(items)) }
}

/// Items of a section per checked block.
pub fn per_block<T>() -> usize {
    items_per_block(std::mem::size_of::<T>())
}

/// Items of `item_bytes` bytes each per checked block: a block holds whole items, so it may
/// be a little short of [`BLOCK_BYTES`].
pub fn items_per_block(item_bytes: usize) -> usize {
    (BLOCK_BYTES / item_bytes.max(1)).max(1)
}

/// The CRC-32 of each block of a section of `T`, fed its bytes in pieces of any size.
pub struct BlockCrcs {
    block: usize,
    filled: usize,
    hasher: crc32fast::Hasher,
    crcs: Vec<u32>,
}

impl BlockCrcs {
    pub fn new<T: Plain>() -> Self {
        Self::for_items_of(std::mem::size_of::<T>())
    }

    /// The hasher of a section whose items take `item_bytes` bytes each.
    pub fn for_items_of(item_bytes: usize) -> Self {
        BlockCrcs {
            block: items_per_block(item_bytes) * item_bytes.max(1),
            filled: 0,
            hasher: crc32fast::Hasher::new(),
            crcs: Vec::new(),
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let take = (self.block - self.filled).min(bytes.len());
            self.hasher.update(&bytes[..take]);
            self.filled += take;
            bytes = &bytes[take..];
            if self.filled == self.block {
                self.crcs.push(std::mem::take(&mut self.hasher).finalize());
                self.filled = 0;
            }
        }
    }

    pub fn finish(mut self) -> Vec<u32> {
        if self.filled > 0 {
            self.crcs.push(self.hasher.finalize());
        }
        self.crcs
    }
}

/// The CRC-32 of each block of `items`, as a section of them is checked.
pub fn block_crcs<T: Plain>(items: impl Iterator<Item = T>) -> Vec<u32> {
    let mut crcs = BlockCrcs::new::<T>();
    for item in items {
        crcs.push(bytes_of(std::slice::from_ref(&item)));
    }
    crcs.finish()
}

/// The state of every block of one mapped file's sections that reads have found damaged,
/// shared by the sections of one snapshot; and, while the open reads them, that a block's
/// first check asks for the block whole.
#[derive(Debug, Default)]
pub struct Damage {
    found: AtomicBool,
    /// Set while the open reads the map without read-ahead (`store/snapshot.rs`): a block's
    /// first check then asks the system for its 64 KiB at once ([`Section::will_need`]).
    /// Unset after, so that a traversal's faults read ahead as the system does: asked for
    /// 64 KiB at a time, a cold 100M-edge store's first 2-hop pass took 20 µs against 12-18.
    whole_blocks: AtomicBool,
}

impl Damage {
    pub fn found(&self) -> bool {
        self.found.load(Relaxed)
    }

    /// Records damage found outside a block's check (counts that disagree with the blocks).
    pub fn record(&self) {
        self.found.store(true, Relaxed);
    }

    /// Whether a block's first check asks for the block whole (see the field).
    pub fn ask_for_whole_blocks(&self, on: bool) {
        self.whole_blocks.store(on, Relaxed);
    }
}

struct Inner<T> {
    map: Arc<memmap2::Mmap>,
    /// Byte offset of the first item in the map.
    start: usize,
    len: usize,
    crcs: Box<[u32]>,
    /// A bit per block: checked and sound.
    sound: Box<[AtomicU64]>,
    /// A bit per block: checked and damaged (so a damaged block is not checked again on
    /// every read).
    bad: Box<[AtomicU64]>,
    limits: Limits,
    damage: Arc<Damage>,
    what: &'static str,
    _items: PhantomData<T>,
}

/// A read-only array of `T` lying in a memory map, checked block by block at first read
/// (see the module doc). Clones share the map and what has been checked.
pub struct Section<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Section<T> {
    fn clone(&self) -> Self {
        Section {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> std::fmt::Debug for Section<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Section({}, {} items)", self.inner.what, self.inner.len)
    }
}

impl<T: Plain> Section<T> {
    /// The `len` items at byte `start` of `map`, with one CRC per block. Refused (with why)
    /// when they do not lie inside the map, are not aligned for `T`, the number of CRCs is
    /// not the number of blocks, or this machine is not little-endian.
    pub fn new(
        map: Arc<memmap2::Mmap>,
        start: usize,
        len: usize,
        crcs: Vec<u32>,
        limits: Limits,
        damage: Arc<Damage>,
        what: &'static str,
    ) -> Result<Self, String> {
        if cfg!(target_endian = "big") {
            return Err("mapped sections are little-endian; this machine is not".into());
        }
        let size = std::mem::size_of::<T>();
        len.checked_mul(size)
            .and_then(|b| b.checked_add(start))
            .filter(|e| *e <= map.len())
            .ok_or_else(|| format!("{what}: {len} items at byte {start} pass the file's end"))?;
        if !(map.as_ptr() as usize + start).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(format!("{what}: byte {start} is not aligned"));
        }
        let blocks = len.div_ceil(per_block::<T>());
        if crcs.len() != blocks {
            return Err(format!(
                "{what}: {} block checksums for {blocks} blocks",
                crcs.len()
            ));
        }
        let words = || {
            (0..blocks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect()
        };
        Ok(Section {
            inner: Arc::new(Inner {
                map,
                start,
                len,
                crcs: crcs.into(),
                sound: words(),
                bad: words(),
                limits,
                damage,
                what,
                _items: PhantomData,
            }),
        })
    }

    pub fn len(&self) -> usize {
        self.inner.len
    }

    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// Every item, unchecked.
    fn raw(&self) -> &[T] {
        let i = &self.inner;
        // SAFETY: `new` checked that the items lie inside the map and are aligned; `Plain`
        // makes any bytes a value; the map is read-only and lives as long as `inner`.
        unsafe { std::slice::from_raw_parts(i.map.as_ptr().add(i.start).cast(), i.len) }
    }

    /// Whether block `b` is sound, checking it on its first read.
    #[inline]
    fn block_sound(&self, b: usize) -> bool {
        let bit = 1u64 << (b % 64);
        if self.inner.sound[b / 64].load(Relaxed) & bit != 0 {
            return true;
        }
        self.check_block(b)
    }

    #[cold]
    fn check_block(&self, b: usize) -> bool {
        let i = &self.inner;
        let bit = 1u64 << (b % 64);
        if i.bad[b / 64].load(Relaxed) & bit != 0 {
            // Set here too, in this thread's order: a writer that reads `found` after a lookup
            // that missed must see it.
            i.damage.found.store(true, Relaxed);
            return false;
        }
        let per = per_block::<T>();
        if i.damage.whole_blocks.load(Relaxed) {
            self.will_need(b..b + 1);
        }
        let items = &self.raw()[b * per..((b + 1) * per).min(i.len)];
        // An ordered section must not go back, within the block or from the last item of the
        // block before (whose own check covers its inside).
        let before = b.checked_sub(1).map(|p| self.raw()[(p + 1) * per - 1]);
        let ordered = items.first().and_then(Plain::ordered).is_none()
            || before
                .iter()
                .chain(items)
                .map(|v| v.ordered().unwrap_or(0))
                .try_fold(0u64, |last, v| (v >= last).then_some(v))
                .is_some();
        let sound = crc32fast::hash(bytes_of(items)) == i.crcs[b]
            && items.iter().all(|v| v.valid(&i.limits))
            && ordered;
        if sound {
            i.sound[b / 64].fetch_or(bit, Relaxed);
            // A check of every block (`check_all`) may have found the block changed since
            // this one read it, and marked it bad in between: bad wins.
            if i.bad[b / 64].load(Relaxed) & bit != 0 {
                i.sound[b / 64].fetch_and(!bit, Relaxed);
                i.damage.found.store(true, Relaxed);
                return false;
            }
        } else {
            // Bad first: a read that sees the block still sound meanwhile reads it as the
            // check before this one found it, as any read before this check did.
            i.bad[b / 64].fetch_or(bit, Relaxed);
            i.sound[b / 64].fetch_and(!bit, Relaxed);
            if !i.damage.found.swap(true, Relaxed) {
                tracing::error!(
                    section = i.what,
                    block = b,
                    "the state snapshot is damaged: a block of it fails its checksum or holds ids out of range; what it holds reads as missing, and the store stops using the snapshot"
                );
            }
        }
        sound
    }

    /// Item `i`, or `None` past the end or in a damaged block.
    #[inline]
    pub fn get(&self, i: usize) -> Option<T> {
        if i >= self.inner.len || !self.block_sound(i / per_block::<T>()) {
            return None;
        }
        Some(self.raw()[i])
    }

    /// Item `i` where it lies, or `None` past the end or in a damaged block.
    #[inline]
    pub fn get_ref(&self, i: usize) -> Option<&T> {
        if i >= self.inner.len || !self.block_sound(i / per_block::<T>()) {
            return None;
        }
        Some(&self.raw()[i])
    }

    /// Records damage the section's checks cannot see: items that read well one by one and
    /// together say what cannot be (a row's offsets past the entries' end).
    pub fn record_damage(&self) {
        self.inner.damage.record();
    }

    /// Asks the processor to fetch the cache line of item `i` ahead of a read of it (nothing
    /// past the end; no check: the read checks). For lookups that would otherwise wait on
    /// memory one after the other ([`crate::store`]'s batched key lookups).
    #[inline]
    pub fn prefetch(&self, i: usize) {
        if let Some(item) = self.raw().get(i) {
            prefetch_read(item);
        }
    }

    /// Items `range`, or `None` when it is not inside the section or touches a damaged block.
    #[inline]
    pub fn slice(&self, range: Range<usize>) -> Option<&[T]> {
        if range.start > range.end || range.end > self.inner.len {
            return None;
        }
        if range.start < range.end {
            let per = per_block::<T>();
            for b in range.start / per..=(range.end - 1) / per {
                if !self.block_sound(b) {
                    return None;
                }
            }
        }
        Some(&self.raw()[range])
    }

    /// Checks every block now, those found sound at an earlier read included (each damaged
    /// one is marked, not only the first); whether all are sound. A block is otherwise
    /// checked once, and the file can change under the map after that (another program, the
    /// disk): a checkpoint writes what it reads into the next snapshot with checksums of its
    /// own, and `verify` vouches for the state, so both check again here first.
    pub fn check_all(&self) -> bool {
        self.recheck(0..self.inner.len)
    }

    /// Checks again, as [`Section::check_all`] does, the blocks that hold items `range` (the
    /// part inside the section); whether all are sound. For a read that found nothing where
    /// something was expected: it may have read a block changed since its first check.
    pub fn recheck(&self, range: Range<usize>) -> bool {
        let end = range.end.min(self.inner.len);
        if range.start >= end {
            return true;
        }
        let per = per_block::<T>();
        // A pass over many blocks (a checkpoint, `verify`) asks for a window of them ahead,
        // so that reading overlaps checking, also where the map reads no more than asked
        // (during the open, see `will_need`).
        const AHEAD: usize = 16;
        (range.start / per..=(end - 1) / per)
            .inspect(|b| {
                if b % AHEAD == 0 {
                    self.will_need(*b..b + AHEAD);
                }
            })
            .filter(|b| !self.check_block(*b))
            .count()
            == 0
    }

    /// Asks the system to read `blocks` of the section from the file now, as one request.
    /// While the open reads the snapshot, its map is advised for random reads
    /// (`store/snapshot.rs`), so a first read of a block would otherwise fault it in a page
    /// at a time; the system's own read-ahead around a fault was worse there: on a disk set
    /// to read 8 MB ahead, each block checked at the open read up to 4 MB.
    fn will_need(&self, blocks: Range<usize>) {
        #[cfg(unix)]
        {
            let i = &self.inner;
            let size = std::mem::size_of::<T>();
            let per = per_block::<T>();
            let first = (blocks.start * per).min(i.len);
            let end = (blocks.end * per).min(i.len);
            if end > first {
                // Advice only: if the system refuses it, the reads fault the pages in.
                let _ = i.map.advise_range(
                    memmap2::Advice::WillNeed,
                    i.start + first * size,
                    (end - first) * size,
                );
            }
        }
        #[cfg(not(unix))]
        let _ = blocks;
    }
}

/// A vector whose first part may be a packed column of the map ([`Packed`]): reads of an
/// unchanged index read the map; a write to an index inside it goes to a map of changes, past
/// it to a tail, in pages that never move (`crate::pages`: a load appends to it by the million
/// once it takes each snapshot as its base). Built in memory (`Owned`), it is a plain vector.
#[derive(Clone, Debug)]
pub enum Layered<T> {
    Owned(Vec<T>),
    Mapped {
        base: Packed<T>,
        changed: HashMap<u32, T, crate::graph::BuildIdHasher>,
        tail: Pages<T>,
    },
}

impl<T> Default for Layered<T> {
    fn default() -> Self {
        Layered::Owned(Vec::new())
    }
}

impl<T: Packable> Layered<T> {
    pub fn mapped(base: Packed<T>) -> Self {
        Layered::Mapped {
            base,
            changed: HashMap::default(),
            tail: Pages::default(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Layered::Owned(v) => v.len(),
            Layered::Mapped { base, tail, .. } => base.len() + tail.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Item `i`; `None` past the end or where the map is damaged.
    #[inline]
    pub fn get(&self, i: usize) -> Option<T> {
        match self {
            Layered::Owned(v) => v.get(i).copied(),
            Layered::Mapped {
                base,
                changed,
                tail,
            } => {
                if i >= base.len() {
                    return tail.get(i - base.len()).copied();
                }
                if !changed.is_empty() {
                    if let Some(v) = changed.get(&(i as u32)) {
                        return Some(*v);
                    }
                }
                base.get(i)
            }
        }
    }

    /// Sets item `i`, first growing the vector to hold it with `fill`.
    pub fn set(&mut self, i: usize, value: T, fill: T) {
        match self {
            Layered::Owned(v) => {
                if v.len() <= i {
                    v.resize(i + 1, fill);
                }
                v[i] = value;
            }
            Layered::Mapped {
                base,
                changed,
                tail,
            } => {
                if i < base.len() {
                    changed.insert(i as u32, value);
                } else {
                    tail.set(i - base.len(), value, fill);
                }
            }
        }
    }

    /// Grows the vector to `len` items of `fill` (never shrinks it).
    pub fn grow(&mut self, len: usize, fill: T) {
        let have = self.len();
        if have < len {
            match self {
                Layered::Owned(v) => v.resize(len, fill),
                Layered::Mapped { tail, base, .. } => tail.grow(len - base.len(), fill),
            }
        }
    }

    /// Heap bytes held (the map is not on the heap).
    pub fn heap_bytes(&self) -> usize {
        let size = std::mem::size_of::<T>();
        match self {
            Layered::Owned(v) => v.capacity() * size,
            Layered::Mapped { changed, tail, .. } => {
                // A map slot: the key, the value and a control byte.
                changed.capacity() * (4 + size + 1) + tail.heap_bytes()
            }
        }
    }

    /// Checks every mapped block now; whether all are sound.
    pub fn check_all(&self) -> bool {
        match self {
            Layered::Owned(_) => true,
            Layered::Mapped { base, .. } => base.check_all(),
        }
    }
}

/// A map of a temporary file holding `bytes`, for tests of what reads a map.
#[cfg(test)]
pub(crate) fn map_of(bytes: &[u8]) -> Arc<memmap2::Mmap> {
    use std::io::Write;
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(bytes).unwrap();
    // SAFETY: the temporary file is the test's alone.
    Arc::new(unsafe { memmap2::Mmap::map(&f) }.unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map of a file holding `items` at byte 4096 (a page in).
    fn mapped<T: Plain>(items: &[T], damage: impl FnOnce(&mut Vec<u8>)) -> Arc<memmap2::Mmap> {
        let mut bytes = vec![0u8; 4096];
        bytes.extend_from_slice(bytes_of(items));
        damage(&mut bytes);
        map_of(&bytes)
    }

    fn limits() -> Limits {
        Limits {
            entries: 1_000_000,
            ..Limits::default()
        }
    }

    /// A section of `items` mapped from a file (a page in), with its right checksums, and the
    /// damage it records.
    fn intact<T: Plain>(items: &[T]) -> (Section<T>, Arc<Damage>) {
        let crcs = block_crcs(items.iter().copied());
        let damage = Arc::new(Damage::default());
        let s = Section::new(
            mapped(items, |_| ()),
            4096,
            items.len(),
            crcs,
            limits(),
            damage.clone(),
            "t",
        )
        .unwrap();
        (s, damage)
    }

    #[test]
    fn a_section_reads_what_was_written_and_checks_its_blocks() {
        let items: Vec<u64> = (0..20_000).collect();
        assert_eq!(
            block_crcs(items.iter().copied()).len(),
            20_000usize.div_ceil(per_block::<u64>())
        );
        let (s, damage) = intact(&items);
        assert_eq!(s.get(12_345), Some(12_345));
        assert_eq!(s.get(20_000), None);
        assert_eq!(s.slice(8190..8194), Some(&items[8190..8194]));
        assert_eq!(s.slice(Range { start: 5, end: 4 }), None);
        assert_eq!(s.slice(19_999..20_001), None);
        assert!(s.check_all() && !damage.found());
    }

    #[test]
    fn a_damaged_block_reads_as_missing_and_the_others_still_read() {
        let items: Vec<u64> = (0..20_000).collect();
        let crcs = block_crcs(items.iter().copied());
        let damage = Arc::new(Damage::default());
        // One byte of the second block changed.
        let at = 4096 + per_block::<u64>() * 8 + 3;
        let map = mapped(&items, |b| b[at] ^= 0x40);
        let s = Section::<u64>::new(map, 4096, items.len(), crcs, limits(), damage.clone(), "t")
            .unwrap();
        assert_eq!(s.get(1), Some(1));
        assert!(!damage.found());
        assert_eq!(s.get(per_block::<u64>() + 5), None);
        assert!(damage.found());
        assert_eq!(s.slice(0..per_block::<u64>() + 1), None);
        let third = 2 * per_block::<u64>() + 5;
        assert_eq!(s.get(third), Some(third as u64));
        assert!(!s.check_all());
    }

    #[test]
    fn values_out_of_range_fail_their_block_even_under_a_right_checksum() {
        let (s, _) = intact(&[1u64, 2, 5_000_000]);
        assert_eq!(s.get(0), None);
    }

    /// Offsets that go back (crafted under right checksums) would let rows overlap, and a
    /// copy of each row be the whole array: the block fails, within itself or against the
    /// last offset of the block before.
    #[test]
    fn offsets_that_go_back_fail_their_block() {
        let check = |items: Vec<u64>| {
            let (s, _) = intact(&items);
            (0..items.len().div_ceil(per_block::<u64>()))
                .map(|b| s.get(b * per_block::<u64>()).is_some())
                .collect::<Vec<_>>()
        };
        assert_eq!(check(vec![0, 5, 5, 8]), [true]);
        assert_eq!(check(vec![0, 5, 3, 8]), [false]);
        let per = per_block::<u64>();
        let mut across: Vec<u64> = (0..2 * per as u64).collect();
        across[per] = 1;
        assert_eq!(check(across), [true, false]);
    }

    #[test]
    fn a_section_past_the_end_of_its_file_or_with_missing_checksums_is_refused() {
        let items: Vec<u64> = (0..10).collect();
        let damage = Arc::new(Damage::default());
        let map = mapped(&items, |b| b.truncate(4096 + 40));
        let crcs = block_crcs(items.iter().copied());
        let past = Section::<u64>::new(map.clone(), 4096, 10, crcs, limits(), damage.clone(), "t");
        assert!(past.unwrap_err().contains("pass the file's end"));
        let none = Section::<u64>::new(map.clone(), 4096, 5, vec![], limits(), damage.clone(), "t");
        assert!(none.unwrap_err().contains("block checksums"));
        let odd = Section::<u64>::new(map, 4097, 1, vec![0], limits(), damage, "t");
        assert!(odd.unwrap_err().contains("aligned"));
    }

    #[test]
    fn a_layered_vector_reads_its_writes_over_the_map() {
        let items: Vec<i64> = (0..100).map(|i| i * 10).collect();
        let column = crate::packed::mapped_column(&items, limits(), Arc::default());
        let mut v = Layered::mapped(column);
        let mut plain = Layered::Owned(items.clone());
        for l in [&mut v, &mut plain] {
            l.set(7, -1, 0);
            l.set(104, 5, 0);
            l.grow(110, 3);
        }
        for i in 0..112 {
            assert_eq!(v.get(i), plain.get(i), "index {i}");
        }
        assert_eq!(v.len(), 110);
        assert_eq!(v.get(7), Some(-1));
        assert_eq!(v.get(102), Some(0));
        assert_eq!(v.get(8), Some(80));
    }
}
