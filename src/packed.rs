//! Columns of small fixed records bit-packed in blocks, read in place from the snapshot's map:
//! the edge cores (endpoints, relation, confidence, salience), each edge's last-seen time and
//! each node's label. Laid out as memory holds them they took 32 of the snapshot's 81 bytes an
//! edge at 1M edges; packed, about 9.
//!
//! Each block of [`BLOCK`] items keeps each field of its items as the difference from the
//! block's least value of that field, in as many bits as the largest difference needs (frame
//! of reference): endpoints take the bits of the node count, a relation the bits of the
//! relation count, a field every item of the block shares (a bulk load's times and salience)
//! none. A block's header, in a section of its own, gives where its bits start, and each
//! field's least value and width; the bits follow item by item, each item's fields together,
//! so that reading an item touches one place. Reading an item is a header lookup and a few
//! shifts, about as cheap as the cache miss it replaces; reading a run of items ([`Run`], an
//! adjacency list) looks the header up once.
//!
//! The adjacency's entries are such a column too: a list is a run of it.
//!
//! One field of an item may be coded ([`Packable::CODED`]: the confidence of the edge cores
//! and of the adjacency entries): written as its value's rank in a [`Codebook`] of the
//! distinct values the columns hold, ascending, which the snapshot's body carries. The
//! benchmark graph's 1,000 confidences then take 10 bits where their `f32` bits took 30 (the
//! exponent's spread across a block), and an agent's handful of confidences fewer; a store
//! with more than [`CODEBOOK_MAX`] distinct values writes them as they are.
//!
//! Nothing is read unchecked: the headers and the bits are [`Section`]s (a CRC-32 per block of
//! the file, checked at first read), a header whose bits would run past the data reads as
//! missing, and every item decoded is checked against the snapshot's bounds
//! ([`Plain::valid`]); what fails reads as missing and is recorded as damage, as in
//! `crate::mapped`.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use crate::mapped::{Damage, Limits, Plain, Section};

/// Items to a block, unless the item says otherwise ([`Packable::BLOCK`]).
pub const BLOCK: usize = 1024;

/// Most fields an item has.
pub const MAX_FIELDS: usize = 5;

/// A fixed record stored packed: at most [`MAX_FIELDS`] unsigned fields.
pub trait Packable: Plain {
    /// How many of the fields it uses.
    const FIELDS: usize;
    /// Items to a block. Fewer give narrower fields where neighbouring items are alike (an
    /// edge's endpoints, times); more give fewer headers to keep in the caches where they are
    /// not (adjacency entries, whose neighbours and edges are all over the graph).
    const BLOCK: usize = BLOCK;
    /// The field a [`Codebook`] codes, if any.
    const CODED: Option<usize> = None;
    fn to_fields(&self) -> [u64; MAX_FIELDS];
    /// The item of these fields; any fields give an item, which [`Plain::valid`] then judges.
    fn from_fields(fields: &[u64; MAX_FIELDS]) -> Self;
}

/// Most values a [`Codebook`] holds: a body of at most half a megabyte. A store with more
/// distinct values writes them uncoded. (The benchmark's 1,000 are an 8 KB table, in the
/// first-level cache; an agent's handful, a line.)
pub const CODEBOOK_MAX: usize = 1 << 16;

/// The distinct values of the coded fields of a snapshot's columns ([`Packable::CODED`]),
/// ascending: a column writes each such field as its value's rank here, and reads the rank
/// back through it. Empty: the fields are written as they are.
#[derive(Debug, Default)]
pub struct Codebook {
    values: Vec<u64>,
    /// Each value's rank, for writing; empty in a codebook read from a snapshot (an open
    /// reads ranks, never looks values up).
    ranks: hashbrown::HashMap<u64, u64, foldhash::fast::FixedState>,
    /// A value was written that the codebook lacks: the column is wrong and not to be kept.
    missed: std::sync::atomic::AtomicBool,
}

impl Codebook {
    /// The codebook of `values` (in any order, repeated), or an empty one (no coding) when
    /// they hold more than [`CODEBOOK_MAX`] distinct values.
    pub fn collect(values: impl Iterator<Item = u64>) -> Codebook {
        let mut seen: hashbrown::HashSet<u64, foldhash::fast::FixedState> = Default::default();
        // Consecutive items often share a value (a bulk load's): one compare, not a hash.
        let mut last = None;
        for v in values {
            if last != Some(v) {
                last = Some(v);
                seen.insert(v);
                if seen.len() > CODEBOOK_MAX {
                    return Codebook::default();
                }
            }
        }
        let mut values: Vec<u64> = seen.into_iter().collect();
        values.sort_unstable();
        let ranks = values
            .iter()
            .enumerate()
            .map(|(rank, v)| (*v, rank as u64))
            .collect();
        Codebook {
            values,
            ranks,
            missed: Default::default(),
        }
    }

    /// The codebook of these values, as a snapshot's body gives them; refused unless they are
    /// strictly ascending and at most [`CODEBOOK_MAX`].
    pub fn read(values: Vec<u64>) -> Result<Codebook, String> {
        if values.len() > CODEBOOK_MAX {
            return Err(format!("a codebook of {} values", values.len()));
        }
        if values.windows(2).any(|w| w[0] >= w[1]) {
            return Err("a codebook's values out of order".into());
        }
        Ok(Codebook {
            values,
            ranks: Default::default(),
            missed: Default::default(),
        })
    }

    /// The values, ascending (none when fields are written uncoded).
    pub fn values(&self) -> &[u64] {
        &self.values
    }

    /// The field written for `value`. A value the codebook lacks (or any, in a codebook read
    /// from a snapshot) is written as a rank past its end, which reads as damage, and marks
    /// the codebook ([`Codebook::missed`]).
    #[inline]
    fn encode(&self, value: u64) -> u64 {
        if self.values.is_empty() {
            return value;
        }
        match self.ranks.get(&value) {
            Some(rank) => *rank,
            None => {
                self.missed
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                self.values.len() as u64
            }
        }
    }

    /// [`Codebook::encode`] through `last`, the last value coded and its field: consecutive
    /// items often share a value (a bulk load's), and a column is coded three times over
    /// (planned, checksummed, written), 900M lookups at 100M edges otherwise.
    #[inline]
    fn encode_after(&self, value: u64, last: &mut Option<(u64, u64)>) -> u64 {
        match *last {
            Some((v, field)) if v == value => field,
            _ => {
                let field = self.encode(value);
                *last = Some((value, field));
                field
            }
        }
    }

    /// Whether a value was written that the codebook lacks (a column that would read as
    /// damaged: the snapshot is not to be kept).
    pub fn missed(&self) -> bool {
        self.missed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The value of the field `field`; `None` for a rank past the end. (Readers decode
    /// through [`decode_with`], the values looked up once.)
    #[cfg(test)]
    fn decode(&self, field: u64) -> Option<u64> {
        decode_with(&self.values, field)
    }
}

/// The value of the field `field` by the codebook of `values` (the field itself when there
/// are none); `None` for a rank past the end.
#[inline(always)]
fn decode_with(values: &[u64], field: u64) -> Option<u64> {
    if values.is_empty() {
        return Some(field);
    }
    values.get(usize::try_from(field).ok()?).copied()
}

/// The fields of `item` as written, its coded field coded by `codebook` through `last`
/// ([`Codebook::encode_after`]).
#[inline]
fn written_fields<T: Packable>(
    item: &T,
    codebook: &Codebook,
    last: &mut Option<(u64, u64)>,
) -> [u64; MAX_FIELDS] {
    let mut f = item.to_fields();
    if let Some(k) = T::CODED {
        f[k] = codebook.encode_after(f[k], last);
    }
    f
}

/// The values of the coded field of `items` (none when `T` codes none): what
/// [`Codebook::collect`] is given.
pub fn coded_values<T: Packable>(items: impl Iterator<Item = T>) -> impl Iterator<Item = u64> {
    items.filter_map(|item| T::CODED.map(|k| item.to_fields()[k]))
}

/// The item of the fields `fields` as read, its coded field decoded by the codebook of
/// `values`; `None` where the rank has no value.
#[inline(always)]
fn read_item<T: Packable>(mut fields: [u64; MAX_FIELDS], values: &[u64]) -> Option<T> {
    if let Some(k) = T::CODED {
        fields[k] = decode_with(values, fields[k])?;
    }
    Some(T::from_fields(&fields))
}

/// Where a block's bits start in the data, and each field's least value and width in bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct BlockHeader {
    pub offset: u64,
    pub bases: [u64; MAX_FIELDS],
    pub widths: [u8; 8],
}

// SAFETY: `#[repr(C)]` of six `u64`s and eight bytes: 56 bytes, no padding, any bits a value.
unsafe impl Plain for BlockHeader {
    fn valid(&self, _: &Limits) -> bool {
        self.widths.iter().all(|w| *w <= 64)
    }
    /// Blocks lie in order, so none can overlap another's bits.
    fn ordered(&self) -> Option<u64> {
        Some(self.offset)
    }
}

impl BlockHeader {
    /// Bits of one item: the sum of its fields' widths (at most 8 x 255).
    fn item_bits(&self) -> usize {
        self.widths.iter().map(|w| *w as usize).sum()
    }

    /// The bytes of a block of `items` items with these widths; `None` if that overflows.
    fn data_bytes(&self, items: usize) -> Option<usize> {
        Some(items.checked_mul(self.item_bits())?.div_ceil(8))
    }

    /// The first `used` fields of the item at bit `at` of the block whose bits are `bits`;
    /// `None` past their end.
    #[inline]
    fn fields(&self, bits: &[u8], mut at: usize, used: usize) -> Option<[u64; MAX_FIELDS]> {
        let mut fields = [0u64; MAX_FIELDS];
        for (k, field) in fields.iter_mut().enumerate().take(used) {
            let w = self.widths[k];
            *field = self.bases[k].wrapping_add(read_bits(bits, at, w)?);
            at += w as usize;
        }
        Some(fields)
    }
}

/// Items in block `b` of a column of `len` items.
fn items_in(b: usize, len: usize, block: usize) -> usize {
    len.saturating_sub(b * block).min(block)
}

/// Bits set below `width`.
fn mask(width: u8) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// The `width` bits at bit `bit` of `bytes` (least significant first); `None` past its end.
#[inline]
fn read_bits(bytes: &[u8], bit: usize, width: u8) -> Option<u64> {
    if width == 0 {
        return Some(0);
    }
    let first = bit / 8;
    // One unaligned load where eight bytes remain: a width up to 56 lies within them
    // whatever the bit's place in its byte.
    if width <= 56 {
        if let Some(word) = bytes.get(first..first + 8) {
            let mut le = [0u8; 8];
            le.copy_from_slice(word);
            return Some((u64::from_le_bytes(le) >> (bit % 8)) & mask(width));
        }
    }
    let last = (bit + width as usize).div_ceil(8);
    let mut acc = 0u128;
    for (i, b) in bytes.get(first..last)?.iter().enumerate() {
        acc |= u128::from(*b) << (8 * i);
    }
    Some((acc >> (bit % 8)) as u64 & mask(width))
}

/// Appends values of fixed widths as bits, least significant first.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u128,
    bits: u32,
}

impl BitWriter<'_> {
    fn push(&mut self, value: u64, width: u8) {
        if width == 0 {
            return;
        }
        // Fewer than 64 bits wait in `acc`, so a value of up to 64 fits beside them.
        self.acc |= u128::from(value & mask(width)) << self.bits;
        self.bits += u32::from(width);
        if self.bits >= 64 {
            self.out.extend_from_slice(&(self.acc as u64).to_le_bytes());
            self.acc >>= 64;
            self.bits -= 64;
        }
    }
    fn finish(self) {
        let bytes = self.bits.div_ceil(8) as usize;
        self.out
            .extend_from_slice(&(self.acc as u64).to_le_bytes()[..bytes]);
    }
}

/// The least values and widths of the fields of `items` (one block).
fn frame<T: Packable>(
    items: impl Iterator<Item = T>,
    codebook: &Codebook,
) -> ([u64; MAX_FIELDS], [u8; 8]) {
    let mut min = [u64::MAX; MAX_FIELDS];
    let mut max = [0u64; MAX_FIELDS];
    let mut any = false;
    let mut last = None;
    for item in items {
        any = true;
        let f = written_fields(&item, codebook, &mut last);
        for k in 0..T::FIELDS {
            min[k] = min[k].min(f[k]);
            max[k] = max[k].max(f[k]);
        }
    }
    let mut bases = [0u64; MAX_FIELDS];
    let mut widths = [0u8; 8];
    if any {
        for k in 0..T::FIELDS {
            bases[k] = min[k];
            widths[k] = (64 - (max[k] - min[k]).leading_zeros()) as u8;
        }
    }
    (bases, widths)
}

/// The block headers of a column of `len` items given by `item`, and the data bytes they
/// take: the first of the two passes that write a column ([`feed_data`] is the second).
pub fn plan<T: Packable>(
    len: usize,
    item: impl Fn(usize) -> T,
    codebook: &Codebook,
) -> (Vec<BlockHeader>, u64) {
    let (headers, bytes, _) = plan_run((0..len).map(item), codebook);
    (headers, bytes)
}

/// [`plan`] for the items `items` gives in order, and how many it gave.
pub fn plan_run<T: Packable>(
    mut items: impl Iterator<Item = T>,
    codebook: &Codebook,
) -> (Vec<BlockHeader>, u64, u64) {
    let (mut headers, mut offset, mut len) = (Vec::new(), 0u64, 0u64);
    let mut block = Vec::with_capacity(T::BLOCK);
    loop {
        block.clear();
        block.extend(items.by_ref().take(T::BLOCK));
        if block.is_empty() {
            return (headers, offset, len);
        }
        let (bases, widths) = frame(block.iter().copied(), codebook);
        let h = BlockHeader {
            offset,
            bases,
            widths,
        };
        // At most `T::BLOCK` (65,536) items of 5 fields of 64 bits: no overflow.
        offset += h.data_bytes(block.len()).unwrap_or(0) as u64;
        len += block.len() as u64;
        headers.push(h);
    }
}

/// Feeds the data of the column `headers` was planned for, block by block, to `sink`: the
/// items `items` gives, the same as the plan was given.
pub fn feed_data<T: Packable>(
    headers: &[BlockHeader],
    mut items: impl Iterator<Item = T>,
    codebook: &Codebook,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut out = Vec::new();
    let mut last = None;
    for h in headers {
        out.clear();
        let mut w = BitWriter {
            out: &mut out,
            acc: 0,
            bits: 0,
        };
        for item in items.by_ref().take(T::BLOCK) {
            let fields = written_fields(&item, codebook, &mut last);
            for ((f, base), width) in fields.iter().zip(h.bases).zip(h.widths).take(T::FIELDS) {
                w.push(f.wrapping_sub(base), width);
            }
        }
        w.finish();
        sink(&out)?;
    }
    Ok(())
}

/// A packed column read in place (see the module doc).
pub struct Packed<T> {
    headers: Section<BlockHeader>,
    data: Section<u8>,
    len: usize,
    limits: Limits,
    damage: Arc<Damage>,
    codebook: Arc<Codebook>,
    _items: PhantomData<T>,
}

impl<T> Clone for Packed<T> {
    fn clone(&self) -> Self {
        Packed {
            headers: self.headers.clone(),
            data: self.data.clone(),
            len: self.len,
            limits: self.limits,
            damage: self.damage.clone(),
            codebook: self.codebook.clone(),
            _items: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packed({} items, {:?})", self.len, self.headers)
    }
}

impl<T: Packable> Packed<T> {
    /// The column of `len` items whose block headers and bits are these sections, its coded
    /// field read through `codebook`; refused when there is not one header per block.
    pub fn new(
        headers: Section<BlockHeader>,
        data: Section<u8>,
        len: usize,
        limits: Limits,
        damage: Arc<Damage>,
        codebook: Arc<Codebook>,
    ) -> Result<Self, String> {
        if headers.len() != len.div_ceil(T::BLOCK) {
            return Err(format!(
                "{} block headers for {len} packed items",
                headers.len()
            ));
        }
        Ok(Packed {
            headers,
            data,
            len,
            limits,
            damage,
            codebook,
            _items: PhantomData,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The header of block `b` and the bits of its items `items` (indices within the block),
    /// with 16 bytes more where the block has them (so that its last item reads in one load
    /// per field), and the bit of the block they start at: only the file's blocks under
    /// those bits are checked, not all of a large block's. `None` in a damaged block, or
    /// when its header points past the data (recorded as damage).
    fn block_part(&self, b: usize, items: Range<usize>) -> Option<(&BlockHeader, &[u8], usize)> {
        let h = self.headers.get_ref(b)?;
        let n = items_in(b, self.len, T::BLOCK);
        let whole = usize::try_from(h.offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(h.data_bytes(n)?)?))
            .filter(|r| r.end <= self.data.len() && items.start <= items.end && items.end <= n);
        let Some(whole) = whole else {
            self.damage.record();
            return None;
        };
        // Within the block's bits (at most 65,536 items of at most 512 bits): no overflow.
        let w = h.item_bits();
        let first = items.start * w / 8;
        let last = (items.end * w)
            .div_ceil(8)
            .saturating_add(16)
            .min(whole.len());
        Some((
            h,
            self.data.slice(whole.start + first..whole.start + last)?,
            first * 8,
        ))
    }

    /// Item `i`; `None` past the end, or where the file is damaged (recorded).
    #[inline]
    pub fn get(&self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        let j = i % T::BLOCK;
        let (h, bits, first_bit) = self.block_part(i / T::BLOCK, j..j + 1)?;
        self.item(h, bits, j * h.item_bits() - first_bit)
    }

    /// The item at bit `at` of a block with header `h` and bits `bits`, checked against the
    /// bounds; `None` (the damage recorded) where its bits pass theirs or it is out of
    /// bounds.
    #[inline]
    fn item(&self, h: &BlockHeader, bits: &[u8], at: usize) -> Option<T> {
        let item = h
            .fields(bits, at, T::FIELDS)
            .and_then(|f| read_item::<T>(f, &self.codebook.values));
        let Some(item) = item.filter(|i| i.valid(&self.limits)) else {
            self.damage.record();
            return None;
        };
        Some(item)
    }

    /// Items `range`, read in order with each block's header looked up once; `None` when
    /// the range passes the end. An item in a damaged block, or out of bounds, is left out
    /// (and the damage recorded), so a run may yield fewer items than the range holds.
    pub fn run(&self, range: Range<usize>) -> Option<Run<'_, T>> {
        if range.start > range.end || range.end > self.len {
            return None;
        }
        Some(Run {
            column: self,
            next: range.start,
            end: range.end,
            frame: None,
        })
    }

    /// Fetches ahead the header of the block item `i` lies in (what a read of it reads first).
    #[inline]
    pub fn prefetch(&self, i: usize) {
        self.headers.prefetch(i / T::BLOCK);
    }

    /// Checks every block and item now; whether all are sound.
    pub fn check_all(&self) -> bool {
        let sections = self.headers.check_all() & self.data.check_all();
        sections && (0..self.len).all(|i| self.get(i).is_some())
    }
}

/// Items of a [`Packed`] column read in order (see [`Packed::run`]).
pub struct Run<'a, T> {
    column: &'a Packed<T>,
    next: usize,
    end: usize,
    /// The part of the block `next` lies in that the run reads, once looked up.
    frame: Option<Frame<'a>>,
}

/// What a [`Run`] keeps of the block it reads: the bits of the items it reads there.
#[derive(Clone, Copy)]
struct Frame<'a> {
    block: usize,
    /// The items of the block whose bits `bits` holds end before this one.
    items_end: usize,
    header: &'a BlockHeader,
    bits: &'a [u8],
    /// The bit of the block that `bits` starts at.
    first_bit: usize,
    item_bits: usize,
    /// Every field at most 56 bits wide, so that one unaligned 8-byte load holds it.
    narrow: bool,
    /// The column's codebook's values, looked up once.
    codes: &'a [u64],
}

impl Frame<'_> {
    /// Where item `j` of the block starts in `bits`.
    #[inline(always)]
    fn at(&self, j: usize) -> Option<usize> {
        (j * self.item_bits).checked_sub(self.first_bit)
    }

    /// The first `used` fields of item `j` where the fields are narrow and the loads stay
    /// inside the bits: per field an unaligned 8-byte load, a shift and a mask, with one
    /// bounds check for the item (`BlockHeader::fields`, which checks each field and takes any
    /// width, measured 10% slower on a 3-hop count); `None` elsewhere.
    #[inline(always)]
    fn narrow_fields(&self, j: usize, used: usize) -> Option<[u64; MAX_FIELDS]> {
        let at = self.at(j)?;
        // The last field's load starts within the item's bits, and reads 8 bytes on.
        if self.narrow && at / 8 + self.item_bits / 8 + 9 <= self.bits.len() {
            let mut fields = [0u64; MAX_FIELDS];
            let mut bit = at;
            for (k, field) in fields.iter_mut().enumerate().take(used) {
                let w = self.header.widths[k];
                let mut le = [0u8; 8];
                le.copy_from_slice(&self.bits[bit / 8..bit / 8 + 8]);
                let v = (u64::from_le_bytes(le) >> (bit % 8)) & ((1u64 << w) - 1);
                *field = self.header.bases[k].wrapping_add(v);
                bit += w as usize;
            }
            return Some(fields);
        }
        None
    }
}

impl<T> Clone for Run<'_, T> {
    fn clone(&self) -> Self {
        Run {
            column: self.column,
            next: self.next,
            end: self.end,
            frame: self.frame,
        }
    }
}

impl<T: Packable> Iterator for Run<'_, T> {
    type Item = T;

    /// Inlined where an item of the block already looked up is one load per field away
    /// (nearly every item of a list); the rest out of line.
    #[inline(always)]
    fn next(&mut self) -> Option<T> {
        if self.next < self.end {
            if let Some(frame) = &self.frame {
                let j = self.next - frame.block * T::BLOCK;
                if j < frame.items_end {
                    let fields = frame.narrow_fields(j, T::FIELDS);
                    if let Some(item) = fields.and_then(|f| read_item::<T>(f, frame.codes)) {
                        // Out of bounds: left to the path that records the damage.
                        if item.valid(&self.column.limits) {
                            self.next += 1;
                            return Some(item);
                        }
                    }
                }
            }
        }
        self.next_looked_up()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.end - self.next))
    }
}

impl<T: Packable> Run<'_, T> {
    /// The next item, looking its block up first where it is not the last one's.
    #[inline(never)]
    fn next_looked_up(&mut self) -> Option<T> {
        while self.next < self.end {
            let (i, b) = (self.next, self.next / T::BLOCK);
            let (j, block_end) = (i % T::BLOCK, self.end.min((b + 1) * T::BLOCK));
            self.next += 1;
            if self
                .frame
                .as_ref()
                .is_none_or(|f| f.block != b || j >= f.items_end)
            {
                let items = j..block_end - b * T::BLOCK;
                match self.column.block_part(b, items.clone()) {
                    Some((header, bits, first_bit)) => {
                        self.frame = Some(Frame {
                            block: b,
                            items_end: items.end,
                            header,
                            bits,
                            first_bit,
                            item_bits: header.item_bits(),
                            narrow: header.widths.iter().all(|w| *w <= 56),
                            codes: &self.column.codebook.values,
                        })
                    }
                    None => {
                        // A damaged block: its items read as missing.
                        self.next = block_end;
                        continue;
                    }
                }
            }
            let Some(frame) = &self.frame else { continue };
            let item = frame
                .at(j)
                .and_then(|at| self.column.item(frame.header, frame.bits, at));
            if item.is_some() {
                return item;
            }
        }
        None
    }
}

/// A time: its bits with the sign flipped, so that order is kept and a block of close times
/// takes few bits.
impl Packable for i64 {
    const FIELDS: usize = 1;
    fn to_fields(&self) -> [u64; MAX_FIELDS] {
        [(*self as u64) ^ (1 << 63), 0, 0, 0, 0]
    }
    fn from_fields(f: &[u64; MAX_FIELDS]) -> Self {
        (f[0] ^ (1 << 63)) as i64
    }
}

/// A node's interned label, `u32::MAX` (an empty slot) as 0 and the others one up.
impl Packable for u32 {
    const FIELDS: usize = 1;
    fn to_fields(&self) -> [u64; MAX_FIELDS] {
        [u64::from(self.wrapping_add(1)), 0, 0, 0, 0]
    }
    fn from_fields(f: &[u64; MAX_FIELDS]) -> Self {
        (f[0] as u32).wrapping_sub(1)
    }
}

/// `items` packed into a temporary file and mapped, as a snapshot's column: for tests of what
/// reads one.
#[cfg(test)]
pub(crate) fn mapped_column<T: Packable>(
    items: &[T],
    limits: Limits,
    damage: Arc<Damage>,
) -> Packed<T> {
    let codebook = Arc::new(Codebook::collect(coded_values(items.iter().copied())));
    let (headers, _) = plan(items.len(), |i| items[i], &codebook);
    let mut data = Vec::new();
    let _ = feed_data(&headers, items.iter().copied(), &codebook, &mut |b| {
        data.extend_from_slice(b);
        Ok(())
    });
    let mut file = crate::mapped::bytes_of(&headers).to_vec();
    let data_at = file.len().div_ceil(4096).max(1) * 4096;
    file.resize(data_at, 0);
    file.extend_from_slice(&data);
    let map = crate::mapped::map_of(&file);
    let crcs = crate::mapped::block_crcs(headers.iter().copied());
    let h = Section::new(
        map.clone(),
        0,
        headers.len(),
        crcs,
        limits,
        damage.clone(),
        "h",
    );
    let crcs = crate::mapped::block_crcs(data.iter().copied());
    let d = Section::new(map, data_at, data.len(), crcs, limits, damage.clone(), "d");
    Packed::new(
        h.unwrap(),
        d.unwrap(),
        items.len(),
        limits,
        damage,
        codebook,
    )
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapped::{block_crcs, map_of};

    /// The column of `items` packed into a file and mapped, with the damage it records: its
    /// headers as `craft` leaves them (checksums made for what it leaves: a crafted file),
    /// then its bytes after `tamper` (headers at 4096, data at 8192 on).
    fn column<T: Packable>(
        items: &[T],
        limits: Limits,
        craft: impl FnOnce(&mut Vec<BlockHeader>),
        tamper: impl FnOnce(&mut Vec<u8>),
    ) -> (Packed<T>, Arc<Damage>) {
        let codebook = Arc::new(Codebook::default());
        let (mut headers, bytes) = plan(items.len(), |i| items[i], &codebook);
        let mut data = Vec::new();
        feed_data(&headers, items.iter().copied(), &codebook, &mut |b| {
            data.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(data.len() as u64, bytes);
        craft(&mut headers);
        let mut file = vec![0u8; 4096];
        file.extend_from_slice(crate::mapped::bytes_of(&headers));
        let data_at = file.len().div_ceil(4096).max(2) * 4096;
        file.resize(data_at, 0);
        file.extend_from_slice(&data);
        let header_crcs = block_crcs(headers.iter().copied());
        let data_crcs = block_crcs(data.iter().copied());
        tamper(&mut file);
        let map = map_of(&file);
        let damage = Arc::new(Damage::default());
        let h = Section::new(
            map.clone(),
            4096,
            headers.len(),
            header_crcs,
            limits,
            damage.clone(),
            "h",
        )
        .unwrap();
        let d = Section::new(
            map,
            data_at,
            data.len(),
            data_crcs,
            limits,
            damage.clone(),
            "d",
        )
        .unwrap();
        (
            Packed::new(h, d, items.len(), limits, damage.clone(), codebook).unwrap(),
            damage,
        )
    }

    #[test]
    fn a_packed_column_reads_back_every_item_in_few_bits() {
        let times: Vec<i64> = (0..5_000)
            .map(|i| match i % 7 {
                0 => i64::MIN,
                1 => i64::MAX,
                _ => 1_700_000_000_000 + i * 60_000,
            })
            .collect();
        let (col, damage) = column(&times, Limits::default(), |_| (), |_| ());
        for (i, t) in times.iter().enumerate() {
            assert_eq!(col.get(i), Some(*t), "item {i}");
        }
        assert_eq!(col.get(times.len()), None);
        assert!(col.check_all() && !damage.found());
        // A block of equal values takes no bits; close values few.
        let same = vec![0i64; 3_000];
        let none = Codebook::default();
        assert_eq!(plan(same.len(), |i| same[i], &none).1, 0);
        let close: Vec<i64> = (0..1024).map(|i| 1_000_000 + i % 16).collect();
        assert_eq!(plan(close.len(), |i| close[i], &none).1, 1024 * 4 / 8);
        let labels = [u32::MAX, 0, 3, u32::MAX, 2];
        let limits = Limits {
            labels: 4,
            ..Limits::default()
        };
        let (col, _) = column(&labels, limits, |_| (), |_| ());
        assert_eq!(
            (0..5).map(|i| col.get(i).unwrap()).collect::<Vec<_>>(),
            labels
        );
    }

    #[test]
    fn damage_reads_as_missing_never_as_another_value() {
        let labels: Vec<u32> = (0..3_000).map(|i| i % 5).collect();
        let limits = Limits {
            labels: 5,
            ..Limits::default()
        };
        // A flipped data byte fails its block's CRC.
        let (col, damage) = column(&labels, limits, |_| (), |f| f[8192 + 10] ^= 1);
        assert_eq!(col.get(20), None);
        assert!(damage.found());
        // A label out of range under a right checksum (a crafted file) is refused by its
        // check, and the items around it still read.
        let (col, damage) = column(
            &labels,
            Limits {
                labels: 4,
                ..limits
            },
            |_| (),
            |_| (),
        );
        assert_eq!(col.get(4), None);
        assert!(damage.found());
        assert_eq!(col.get(3), Some(3));
        // So is a header whose bits would pass the data's end, and headers that go back.
        let (col, damage) = column(&labels, limits, |h| h[2].offset = 1 << 40, |_| ());
        assert_eq!(col.get(BLOCK + 1), Some(((BLOCK + 1) % 5) as u32));
        assert!(!damage.found());
        assert_eq!(col.get(2 * BLOCK), None);
        assert!(damage.found());
        assert!(!col.check_all());
        let back = |h: &mut Vec<BlockHeader>| {
            h[0].offset = 5;
            h[1].offset = 0;
        };
        let (col, _) = column(&labels, limits, back, |_| ());
        assert_eq!(col.get(0), None);
        // A width past 64 bits is refused with its header.
        let (col, _) = column(&labels, limits, |h| h[0].widths[0] = 65, |_| ());
        assert_eq!(col.get(0), None);
    }

    /// A run reads what item-by-item reads give, across blocks, through narrow fields (one
    /// load each) and wide ones (field by field), and leaves out what a damaged block or an
    /// item out of bounds held, recording it.
    #[test]
    fn a_run_reads_what_get_reads_and_leaves_damage_out() {
        let labels: Vec<u32> = (0..3_000).map(|i| (i * 7) % 1_000).collect();
        let limits = Limits {
            labels: 1_000,
            ..Limits::default()
        };
        let (col, damage) = column(&labels, limits, |_| (), |_| ());
        for range in [
            0..0,
            0..1,
            5..900,
            1000..1030,
            1020..2050,
            0..3000,
            2999..3000,
        ] {
            let run: Vec<u32> = col.run(range.clone()).unwrap().collect();
            assert_eq!(run, labels[range.clone()], "{range:?}");
        }
        assert!(col.run(10..3001).is_none() && !damage.found());
        let times: Vec<i64> = (0..2_500)
            .map(|i| i64::MIN + i * 977)
            .chain([i64::MAX])
            .collect();
        let (wide, _) = column(&times, limits, |_| (), |_| ());
        assert!(wide.run(0..times.len()).unwrap().eq(times.iter().copied()));
        // The second block's header claiming more bits than there are: it reads as missing.
        let (col, damage) = column(&labels, limits, |h| h[1].widths[0] = 64, |_| ());
        let run: Vec<u32> = col.run(0..3000).unwrap().collect();
        assert_eq!(run.len(), 3000 - BLOCK);
        assert_eq!(run[..BLOCK], labels[..BLOCK]);
        assert_eq!(run[BLOCK..], labels[2 * BLOCK..]);
        assert!(damage.found());
        // Labels out of bounds under right checksums: each is left out, the rest read.
        let narrower = Limits {
            labels: 500,
            ..limits
        };
        let (col, damage) = column(&labels, narrower, |_| (), |_| ());
        let run: Vec<u32> = col.run(0..3000).unwrap().collect();
        let within: Vec<u32> = labels.iter().copied().filter(|l| *l < 500).collect();
        assert_eq!(run, within);
        assert!(damage.found());
    }

    /// An item whose second field a codebook codes.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Coded(u32, u32);

    // SAFETY: two `u32`s, no padding.
    unsafe impl Plain for Coded {
        fn valid(&self, _: &Limits) -> bool {
            true
        }
    }

    impl Packable for Coded {
        const FIELDS: usize = 2;
        const CODED: Option<usize> = Some(1);
        fn to_fields(&self) -> [u64; MAX_FIELDS] {
            [u64::from(self.0), u64::from(self.1), 0, 0, 0]
        }
        fn from_fields(f: &[u64; MAX_FIELDS]) -> Self {
            Coded(f[0] as u32, f[1] as u32)
        }
    }

    /// A coded field takes the bits of its rank among the distinct values, reads back as its
    /// value whether read alone or in a run, and a rank past the codebook reads as damage.
    #[test]
    fn a_coded_field_takes_the_bits_of_its_rank_and_reads_back_its_value() {
        let confidence = |k: u32| (k as f32 / 1000.0).to_bits();
        let items: Vec<Coded> = (0..5_000u32)
            .map(|i| Coded(i % 7, confidence(i * 7919 % 1000)))
            .collect();
        let codebook = Codebook::collect(coded_values(items.iter().copied()));
        assert_eq!(codebook.values().len(), 1000);
        assert!(codebook.values().windows(2).all(|w| w[0] < w[1]));
        let none = Codebook::default();
        let (_, coded) = plan(items.len(), |i| items[i], &codebook);
        let (_, raw) = plan(items.len(), |i| items[i], &none);
        // 3 + 10 bits an item where the confidence's bits took 3 + 30.
        assert_eq!(coded, 4 * 1024 * 13 / 8 + (904u64 * 13).div_ceil(8));
        assert!(raw > coded * 2, "{raw} against {coded}");
        assert!(!codebook.missed());

        let column = mapped_column(&items, Limits::default(), Arc::default());
        assert!((0..items.len()).all(|i| column.get(i) == Some(items[i])));
        assert!(column
            .run(0..items.len())
            .unwrap()
            .eq(items.iter().copied()));
        assert!(column.check_all());

        // A rank past the codebook (a crafted file, its checksums right): missing, recorded.
        let short = Arc::new(Codebook::read(codebook.values()[..500].to_vec()).unwrap());
        let damage = Arc::new(Damage::default());
        let cut = Packed::new(
            column.headers.clone(),
            column.data.clone(),
            column.len,
            Limits::default(),
            damage.clone(),
            short,
        )
        .unwrap();
        let within = |c: &Coded| c.1 < confidence(500);
        let run: Vec<Coded> = cut.run(0..items.len()).unwrap().collect();
        assert_eq!(
            run,
            items.iter().copied().filter(within).collect::<Vec<_>>()
        );
        assert!(damage.found());
        let first_out = items.iter().position(|c| !within(c)).unwrap();
        assert_eq!(cut.get(first_out), None);

        // A value the codebook lacks is marked as it is written.
        let one = Codebook::read(vec![u64::from(confidence(3))]).unwrap();
        let _ = plan(items.len(), |i| items[i], &one);
        assert!(one.missed());
    }

    /// More distinct values than a codebook holds leave the field uncoded; a codebook read
    /// from a file is refused out of order or too long.
    #[test]
    fn a_codebook_is_bounded_and_ordered() {
        let many = Codebook::collect(0..=CODEBOOK_MAX as u64);
        assert!(many.values().is_empty());
        assert_eq!(many.encode(123_456), 123_456);
        let most = Codebook::collect((0..CODEBOOK_MAX as u64).rev());
        assert_eq!(most.values().len(), CODEBOOK_MAX);
        assert_eq!(most.encode(7), 7);
        assert!(Codebook::read(vec![1, 1]).is_err());
        assert!(Codebook::read(vec![2, 1]).is_err());
        assert!(Codebook::read((0..=CODEBOOK_MAX as u64).collect()).is_err());
        assert_eq!(Codebook::read(vec![5, 9]).unwrap().decode(1), Some(9));
        assert_eq!(Codebook::read(vec![5, 9]).unwrap().decode(2), None);
    }

    #[test]
    fn bits_read_back_at_any_position_and_width() {
        let mut out = Vec::new();
        let mut w = BitWriter {
            out: &mut out,
            acc: 0,
            bits: 0,
        };
        let values: Vec<(u64, u8)> = (0..200u64)
            .map(|i| {
                let width = (i % 65) as u8;
                (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask(width), width)
            })
            .collect();
        for (v, width) in &values {
            w.push(*v, *width);
        }
        w.finish();
        let mut bit = 0;
        for (v, width) in &values {
            assert_eq!(read_bits(&out, bit, *width), Some(*v));
            bit += *width as usize;
        }
        assert_eq!(read_bits(&out, bit, 64), None);
    }
}
