//! Packed columns of 64-bit words, the snapshot's encoding of the edge table.
//!
//! A column of the edge table seldom needs its full width: node ids fit in three bytes below
//! 16M nodes, a store has a few relations, confidences take a few distinct values, the
//! salience is often one value throughout and last-seen times sit in a narrow range. Each
//! column is therefore written either as a frame of reference (its least value, then every
//! value minus it in the fewest whole bytes that hold the largest difference, zero bytes when
//! all are equal) or, when that is narrower, as a dictionary (the distinct values, sorted, then
//! each value's index in one or two bytes). The choice is made per column, per snapshot, from
//! the values alone, so the same state always gives the same bytes.
//!
//! Every value sits at a fixed offset, so a column is encoded and decoded on every core, and
//! read at random without a pass first. At 1M edges this halves the edges' part of the
//! snapshot, and the snapshot's read from disk is most of a cold open.
//!
//! Layout: kind (u8: 0 frame of reference, 1 dictionary); for kind 0, base (u64) and width
//! (u8, 0 to 8); for kind 1, the number of values (u32), the values (u64 each) and the width
//! of an index (u8, 1 or 2); then `n * width` bytes, little-endian.

use std::collections::HashSet;

use rayon::prelude::*;

/// The most distinct values a dictionary holds: its indices are at most two bytes.
const MAX_DICTIONARY: usize = 1 << 16;

const FRAME_OF_REFERENCE: u8 = 0;
const DICTIONARY: u8 = 1;

/// Appends the column of the `n` values `value(0..n)` to `out`. A `None` (a free slot, whose
/// value nobody reads) is written as whatever is cheapest.
pub(super) fn put(out: &mut Vec<u8>, n: usize, value: impl Fn(usize) -> Option<u64> + Sync) {
    let (min, max) = (0..n)
        .into_par_iter()
        .filter_map(&value)
        .fold(
            || (u64::MAX, u64::MIN),
            |(lo, hi), v| (lo.min(v), hi.max(v)),
        )
        .reduce(
            || (u64::MAX, u64::MIN),
            |(a, b), (c, d)| (a.min(c), b.max(d)),
        );
    let (base, span) = if min > max { (0, 0) } else { (min, max - min) };
    let frame_width = bytes_for(span);
    let dictionary = if frame_width > 1 {
        // Taken when the whole of it, values and indices, is smaller.
        distinct(n, &value)
            .filter(|d| 4 + 8 * d.len() + 1 + n * index_width(d.len()) < 9 + n * frame_width)
    } else {
        None
    };
    match dictionary {
        Some(values) => {
            let width = index_width(values.len());
            out.push(DICTIONARY);
            out.extend_from_slice(&(values.len() as u32).to_le_bytes());
            for v in &values {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.push(width as u8);
            fill(out, n, width, |i| {
                value(i).map_or(0, |v| values.binary_search(&v).unwrap_or(0) as u64)
            });
        }
        None => {
            out.push(FRAME_OF_REFERENCE);
            out.extend_from_slice(&base.to_le_bytes());
            out.push(frame_width as u8);
            fill(out, n, frame_width, |i| value(i).map_or(0, |v| v - base));
        }
    }
}

/// Appends `n` words of `width` bytes each, `word(i)` the `i`-th, filled on every core.
fn fill(out: &mut Vec<u8>, n: usize, width: usize, word: impl Fn(usize) -> u64 + Sync) {
    if width == 0 {
        return;
    }
    let start = out.len();
    out.resize(start + n * width, 0);
    out[start..]
        .par_chunks_mut(width)
        .enumerate()
        .for_each(|(i, bytes)| bytes.copy_from_slice(&word(i).to_le_bytes()[..width]));
}

/// The distinct values of the column, sorted, or `None` when there are more than a
/// dictionary holds (found without collecting them all).
fn distinct(n: usize, value: &(impl Fn(usize) -> Option<u64> + Sync)) -> Option<Vec<u64>> {
    let set = (0..n)
        .into_par_iter()
        .filter_map(value)
        .try_fold(HashSet::new, |mut set, v| {
            set.insert(v);
            (set.len() <= MAX_DICTIONARY).then_some(set)
        })
        .try_reduce(HashSet::new, |mut a, b| {
            a.extend(b);
            (a.len() <= MAX_DICTIONARY).then_some(a)
        })?;
    let mut values: Vec<u64> = set.into_iter().collect();
    values.sort_unstable();
    Some(values)
}

/// The fewest bytes that hold `v`.
fn bytes_for(v: u64) -> usize {
    (64 - v.leading_zeros() as usize).div_ceil(8)
}

/// The bytes of an index into a dictionary of `len` values.
fn index_width(len: usize) -> usize {
    if len <= 1 << 8 {
        1
    } else {
        2
    }
}

/// A column read back: the value of any row, at random.
pub(super) struct Column<'a> {
    base: u64,
    width: usize,
    /// The low `width` bytes set.
    mask: u64,
    dictionary: Vec<u64>,
    data: &'a [u8],
}

impl<'a> Column<'a> {
    /// Reads a column of `n` values from the start of `bytes`; gives it and the bytes after
    /// it, or what is wrong with it.
    pub(super) fn read(bytes: &'a [u8], n: usize, what: &str) -> Result<(Self, &'a [u8]), String> {
        let mut r = super::snapshot::Reader::new(bytes);
        let bad = |why: String| format!("{what} column: {why}");
        let kind = r.u8().map_err(bad)?;
        let (base, dictionary, width) = match kind {
            FRAME_OF_REFERENCE => {
                let base = r.u64().map_err(bad)?;
                let width = r.u8().map_err(bad)? as usize;
                if width > 8 {
                    return Err(bad(format!("{width} bytes a value")));
                }
                (base, Vec::new(), width)
            }
            DICTIONARY => {
                let len = r.count(8, "values").map_err(bad)?;
                if len == 0 || len > MAX_DICTIONARY {
                    return Err(bad(format!("a dictionary of {len} values")));
                }
                let dictionary = (0..len).map(|_| r.u64()).collect::<Result<Vec<_>, _>>();
                let width = r.u8().map_err(bad)? as usize;
                if width != index_width(len) {
                    return Err(bad(format!("{width} bytes an index of {len} values")));
                }
                (0, dictionary.map_err(bad)?, width)
            }
            k => return Err(bad(format!("unknown kind {k}"))),
        };
        let size = n
            .checked_mul(width)
            .ok_or_else(|| bad(format!("{n} values of {width} bytes")))?;
        let data = r.take(size).map_err(bad)?;
        let rest = r.rest();
        let column = Column {
            base,
            width,
            mask: u64::MAX.checked_shr(64 - 8 * width as u32).unwrap_or(0),
            dictionary,
            data,
        };
        if let Some(len) = (!column.dictionary.is_empty()).then_some(column.dictionary.len()) {
            // Checked here, once, so that `get` cannot index out of the dictionary.
            let last = (0..n)
                .into_par_iter()
                .map(|i| column.word(i))
                .max()
                .unwrap_or(0);
            if last as usize >= len {
                return Err(bad(format!("index {last} into {len} values")));
            }
        }
        Ok((column, rest))
    }

    /// The stored word of row `i`.
    #[inline]
    fn word(&self, i: usize) -> u64 {
        let at = i * self.width;
        // One unaligned 8-byte load and a mask wherever 8 bytes remain (all but the last
        // rows): a copy of a variable length per value made the open's edge half two and a
        // half times slower.
        match self.data.get(at..at + 8) {
            Some(b) => {
                let mut w = [0u8; 8];
                w.copy_from_slice(b);
                u64::from_le_bytes(w) & self.mask
            }
            None => {
                let mut w = [0u8; 8];
                w[..self.width].copy_from_slice(&self.data[at..at + self.width]);
                u64::from_le_bytes(w)
            }
        }
    }

    /// The value of row `i` (below the `n` it was read with).
    pub(super) fn get(&self, i: usize) -> u64 {
        if self.dictionary.is_empty() {
            self.base.wrapping_add(self.word(i))
        } else {
            self.dictionary[self.word(i) as usize]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(values: &[Option<u64>]) -> Vec<u8> {
        let mut out = vec![7];
        put(&mut out, values.len(), |i| values[i]);
        out.push(9);
        let (column, rest) = Column::read(&out[1..], values.len(), "test").unwrap();
        assert_eq!(rest, &[9]);
        for (i, v) in values.iter().enumerate() {
            if let Some(v) = v {
                assert_eq!(column.get(i), *v, "row {i}");
            }
        }
        out
    }

    #[test]
    fn a_column_takes_the_fewest_bytes_that_hold_it() {
        // One value throughout: no bytes a row.
        assert_eq!(
            round_trip(&vec![Some(u64::MAX); 1000]).len(),
            1 + 1 + 8 + 1 + 1
        );
        // Node ids below 2^24: three bytes a row.
        let ids: Vec<_> = (0..1000u64).map(|i| Some(i * 16_000)).collect();
        assert_eq!(round_trip(&ids).len(), 2 + 10 + 3000);
        // Many rows, few distinct wide values: a dictionary and one byte a row.
        let few: Vec<_> = (0..1000u64).map(|i| Some((i % 10) << 40)).collect();
        assert_eq!(round_trip(&few).len(), 2 + 1 + 4 + 80 + 1 + 1000);
        // Free rows do not widen the column.
        let mut sparse = vec![None; 1000];
        sparse[3] = Some(1 << 50);
        sparse[900] = Some((1 << 50) + 200);
        assert_eq!(round_trip(&sparse).len(), 2 + 10 + 1000);
    }

    #[test]
    fn a_damaged_column_is_an_error_not_a_panic() {
        let values: Vec<_> = (0..300u64).map(|i| Some((i % 3) << 40)).collect();
        let mut out = Vec::new();
        put(&mut out, values.len(), |i| values[i]);
        assert_eq!(out[0], DICTIONARY);
        // An index past the dictionary.
        let mut bad = out.clone();
        *bad.last_mut().unwrap() = 200;
        assert!(Column::read(&bad, values.len(), "c")
            .err()
            .unwrap()
            .contains("index 200 into 3 values"));
        // Too short, an unknown kind, a width past eight bytes.
        assert!(Column::read(&out[..out.len() - 1], values.len(), "c").is_err());
        assert!(Column::read(&[5], 1, "c").is_err());
        let mut wide = vec![FRAME_OF_REFERENCE];
        wide.extend_from_slice(&0u64.to_le_bytes());
        wide.push(9);
        assert!(Column::read(&wide, 0, "c").is_err());
    }

    proptest! {
        #[test]
        fn any_column_reads_back_as_written(
            values in prop::collection::vec(prop::option::of(prop_oneof![
                any::<u64>(),
                0u64..300,
                (0u64..3).prop_map(|v| v << 60),
            ]), 0..400)
        ) {
            round_trip(&values);
        }

        #[test]
        fn any_bytes_read_as_a_column_or_an_error(
            bytes in prop::collection::vec(any::<u8>(), 0..200), n in 0usize..100
        ) {
            if let Ok((column, _)) = Column::read(&bytes, n, "c") {
                for i in 0..n {
                    column.get(i);
                }
            }
        }
    }
}
