//! What an edge record holds beyond the core the graph keeps (`edge_table.rs`): its
//! properties, when its first event was recorded, and the events that support it. With the
//! core they make the full [`Edge`] that `Store::edge` gives and the projection merges a new
//! assertion into.
//!
//! The details of 16 consecutive edge ids are one record (a row) in [`Records`]: on the heap
//! as built, or in place in the snapshot's map. A row is coded so that what edges of one event
//! share costs almost nothing: each edge's recorded time and first supporting event are written
//! as the difference from the edge before it in the row, and an edge like the one before (no
//! properties, the same recorded time, that edge's first event alone: a bulk load's edges of
//! one event) takes one byte, and those that end a row take none. Changing an edge rewrites
//! its row.
//!
//! Row layout: a `u16` (little-endian) with bit `i` set when the row holds the edge at offset
//! `i`; then for each such edge in order a head (varint): 0 for an edge like the one before
//! (the first like an edge recorded at 0 with event 0), else one more than the length of its
//! properties' postcard encoding, then that encoding; the recorded time as a zigzag varint of
//! its difference from the previous edge's (from 0); the number of supporting events (varint);
//! and each event's sequence number as a zigzag varint of its difference from the one before
//! it, the first from the previous edge's first (from 0). The heads of edges like the one
//! before that end the row are left out: an edge the row's bytes end before is like the one
//! before it (a bulk load's row of 16 takes 13 bytes where it took 28). A row that does not
//! read exactly so reads as no row.

use std::sync::Arc;

use super::records::{DetailOffset, MappedRecords, Records};
use crate::codec::put_varint;
use crate::mapped::Damage;
use crate::model::{Edge, EdgeId, Props};

/// Consecutive edge ids to a row.
pub(crate) const ROW_EDGES: usize = 16;

/// The details of one edge (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Details {
    pub props: Props,
    pub recorded: i64,
    pub evidence: Vec<u64>,
}

/// The details of one edge, borrowed from wherever they are.
#[derive(Clone, Copy)]
struct DetailsRef<'a> {
    props: &'a Props,
    recorded: i64,
    evidence: &'a [u64],
}

impl Details {
    fn as_ref(&self) -> DetailsRef<'_> {
        DetailsRef {
            props: &self.props,
            recorded: self.recorded,
            evidence: &self.evidence,
        }
    }
}

impl<'a> From<&'a Edge> for DetailsRef<'a> {
    fn from(e: &'a Edge) -> Self {
        DetailsRef {
            props: &e.props,
            recorded: e.recorded,
            evidence: &e.evidence,
        }
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A varint of at most 64 bits at the start of `r`, which moves past it.
fn take_varint(r: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = r.split_first()?;
        *r = rest;
        let bits = u64::from(b & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        v |= bits << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The row of `entries` (offsets below [`ROW_EDGES`], increasing); `None` when it has none.
fn encode_row<'a>(entries: impl IntoIterator<Item = (usize, DetailsRef<'a>)>) -> Option<Box<[u8]>> {
    let mut out = vec![0u8; 2];
    let mut mask = 0u16;
    let (mut recorded, mut first) = (0i64, 0u64);
    // Where the last edge unlike the one before it ends: the heads after it are left out.
    let mut written = out.len();
    for (offset, d) in entries {
        mask |= 1 << offset;
        if d.props.is_empty() && d.recorded == recorded && d.evidence == [first] {
            // Like the one before: one byte, or none at the row's end.
            out.push(0);
            continue;
        }
        if d.props.is_empty() {
            out.push(1);
        } else {
            // Our own types serialise into a Vec without error (as in `codec::encode`).
            let props = postcard::to_allocvec(d.props).unwrap_or_default();
            put_varint(&mut out, props.len() as u64 + 1);
            out.extend_from_slice(&props);
        }
        put_varint(&mut out, zigzag(d.recorded.wrapping_sub(recorded)));
        recorded = d.recorded;
        put_varint(&mut out, d.evidence.len() as u64);
        let mut prev = first;
        for &seq in d.evidence {
            put_varint(&mut out, zigzag(seq.wrapping_sub(prev) as i64));
            prev = seq;
        }
        if let Some(&f) = d.evidence.first() {
            first = f;
        }
        written = out.len();
    }
    if mask == 0 {
        return None;
    }
    out.truncate(written);
    out[..2].copy_from_slice(&mask.to_le_bytes());
    Some(out.into_boxed_slice())
}

/// Reads a row, calling `each` with every entry's offset and a reader of its details; `each`
/// returns false to stop. `None` when the row is malformed (up to where it stopped).
fn read_row(
    mut r: &[u8],
    mut each: impl FnMut(usize, &mut dyn FnMut() -> Option<Details>) -> bool,
) -> Option<()> {
    let mask = u16::from_le_bytes([*r.first()?, *r.get(1)?]);
    r = &r[2..];
    let (mut recorded, mut first) = (0i64, 0u64);
    for offset in 0..ROW_EDGES {
        if mask & (1 << offset) == 0 {
            continue;
        }
        // The row's bytes ended: the edges left are like the one before.
        let head = if r.is_empty() {
            0
        } else {
            take_varint(&mut r)?
        };
        let (props, mut evidence) = if head == 0 {
            // Like the one before: no properties, its recorded time, its first event alone.
            (&[][..], vec![first])
        } else {
            // Props are decoded only when asked for; the rest is read anyway for the deltas.
            let props_len = usize::try_from(head - 1).ok()?;
            let props = r.get(..props_len)?;
            r = r.get(props_len..)?;
            recorded = recorded.wrapping_add(unzigzag(take_varint(&mut r)?));
            let n = usize::try_from(take_varint(&mut r)?).ok()?;
            // Each sequence number takes a byte at least: a count past the rest is damage,
            // not an allocation to make.
            if n > r.len() {
                return None;
            }
            let mut evidence = Vec::with_capacity(n);
            let mut prev = first;
            for _ in 0..n {
                prev = prev.wrapping_add(unzigzag(take_varint(&mut r)?) as u64);
                evidence.push(prev);
            }
            (props, evidence)
        };
        if let Some(&f) = evidence.first() {
            first = f;
        }
        let mut details = || {
            let props: Props = if props.is_empty() {
                Props::new()
            } else {
                postcard::from_bytes(props).ok()?
            };
            Some(Details {
                props,
                recorded,
                evidence: std::mem::take(&mut evidence),
            })
        };
        if !each(offset, &mut details) {
            return Some(());
        }
    }
    r.is_empty().then_some(())
}

/// Every entry of a row, by offset; `None` when the row is malformed.
fn decode_row(row: &[u8]) -> Option<Vec<(usize, Details)>> {
    let mut out = Vec::new();
    let mut bad = false;
    read_row(row, |offset, details| match details() {
        Some(d) => {
            out.push((offset, d));
            true
        }
        None => {
            bad = true;
            false
        }
    })?;
    (!bad).then_some(out)
}

/// The entry at `offset` of a row, if it has one; `None` when the row is malformed (up to
/// that entry, or the entry itself).
fn find_in_row(row: &[u8], offset: usize) -> Option<Option<Details>> {
    let mut found = None;
    let mut bad = false;
    read_row(row, |o, details| {
        if o == offset {
            found = details();
            bad = found.is_none();
            return false;
        }
        o < offset
    })?;
    (!bad).then_some(found)
}

/// Edge details by edge id, a row of [`ROW_EDGES`] ids per record (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct EdgeDetails {
    rows: Records<DetailOffset>,
    /// Where a row that does not read is recorded, when the rows were read from a map: the
    /// store then replays its graph from the log before it writes a batch (which would lose
    /// the other edges of the row) and stops using the snapshot, as for a damaged block.
    damage: Option<Arc<Damage>>,
}

impl EdgeDetails {
    /// The details read from a snapshot's map, whose damage is recorded in `damage`.
    pub(crate) fn mapped(base: MappedRecords<DetailOffset>, damage: Arc<Damage>) -> Self {
        EdgeDetails {
            rows: Records::mapped(base),
            damage: Some(damage),
        }
    }

    /// Records that a row does not read.
    fn damaged(&self, row: usize) {
        tracing::warn!(row, "a row of edge details does not read");
        if let Some(d) = &self.damage {
            d.record();
        }
    }

    /// Checks every block of the mapped rows now; whether all are sound.
    pub(crate) fn check_mapped(&self) -> bool {
        self.rows.check_mapped()
    }

    /// The row that holds the details of the edge ids `r * 16 .. r * 16 + 16`, as coded.
    pub(crate) fn row(&self, r: usize) -> Option<&[u8]> {
        self.rows.get(r)
    }

    /// The details of edge `id`; `None` when it has none (no such edge, or a row that does
    /// not read).
    pub(crate) fn get(&self, id: EdgeId) -> Option<Details> {
        let i = id.0 as usize;
        let row = i / ROW_EDGES;
        match find_in_row(self.rows.get(row)?, i % ROW_EDGES) {
            Some(found) => found,
            None => {
                self.damaged(row);
                None
            }
        }
    }

    /// Applies a batch's changes, in increasing id order: `Some` puts an edge's details,
    /// `None` removes them. Each row the batch touches is read once and written once; a row
    /// of ids new to the store is only written.
    pub(crate) fn apply<'a>(
        &mut self,
        changes: impl IntoIterator<Item = (EdgeId, Option<&'a Edge>)>,
    ) {
        let mut changes = changes.into_iter().peekable();
        while let Some(&(first, _)) = changes.peek() {
            let row = first.0 as usize / ROW_EDGES;
            let mut kept: Vec<(usize, Details)> = match self.rows.get(row) {
                Some(bytes) => decode_row(bytes).unwrap_or_else(|| {
                    self.damaged(row);
                    Vec::new()
                }),
                None => Vec::new(),
            };
            let mut new: Vec<(usize, &Edge)> = Vec::new();
            while let Some((id, edge)) = changes.next_if(|(id, _)| id.0 as usize / ROW_EDGES == row)
            {
                let offset = id.0 as usize % ROW_EDGES;
                kept.retain(|(o, _)| *o != offset);
                new.retain(|(o, _)| *o != offset);
                if let Some(e) = edge {
                    new.push((offset, e));
                }
            }
            let mut entries: Vec<(usize, DetailsRef<'_>)> = kept
                .iter()
                .map(|(o, d)| (*o, d.as_ref()))
                .chain(new.iter().map(|(o, e)| (*o, DetailsRef::from(*e))))
                .collect();
            entries.sort_by_key(|(o, _)| *o);
            self.rows.set(row, encode_row(entries).as_deref());
        }
    }

    /// Heap bytes of the rows (without the allocator's rounding).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.rows.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NodeId, Value};

    fn edge(id: u32, recorded: i64, evidence: Vec<u64>) -> Edge {
        Edge {
            id: EdgeId(id),
            from: NodeId(0),
            relation: "NEXT".into(),
            to: NodeId(1),
            props: Props::new(),
            confidence: 0.5,
            valid_from: None,
            valid_to: None,
            recorded,
            last_seen: 2,
            evidence,
            salience: 0.5,
        }
    }

    fn details(e: &Edge) -> Details {
        Details {
            props: e.props.clone(),
            recorded: e.recorded,
            evidence: e.evidence.clone(),
        }
    }

    #[test]
    fn details_read_back_as_put_and_removed_ones_are_gone() {
        let mut with_props = edge(17, -5, vec![u64::MAX, 3, 9]);
        with_props
            .props
            .insert("context".into(), Value::from("by the river é🙂"));
        let edges = [
            edge(0, 1_700_000_000_000, vec![42]),
            edge(1, 1_700_000_000_000, vec![42]),
            edge(15, i64::MIN, vec![]),
            with_props.clone(),
            edge(31, i64::MAX, vec![1, 2, 3]),
        ];
        let mut t = EdgeDetails::default();
        t.apply(edges.iter().map(|e| (e.id, Some(e))));
        for e in &edges {
            assert_eq!(t.get(e.id), Some(details(e)), "edge {}", e.id.0);
        }
        assert_eq!(t.get(EdgeId(2)), None);
        assert_eq!(t.get(EdgeId(100)), None);
        // Plain edges of one event share almost everything: 4 bytes each past the first.
        let row = t.row(0).unwrap();
        let first_two = encode_row(
            edges[..2]
                .iter()
                .map(|e| (e.id.0 as usize, DetailsRef::from(e))),
        );
        // The mask; the first edge's head (no props), its time (6 bytes), one event and its
        // seq; then nothing for an edge like the one before that ends the row.
        assert_eq!(first_two.unwrap().len(), 2 + (1 + 6 + 1 + 1));
        assert!(row.len() < 40, "{}", row.len());
        // A change rewrites the row with the others kept; a removal empties a slot, and an
        // emptied row goes.
        let changed = edge(1, 5, vec![42, 43]);
        t.apply([(EdgeId(1), Some(&changed)), (EdgeId(15), None)]);
        assert_eq!(t.get(EdgeId(1)), Some(details(&changed)));
        assert_eq!(t.get(EdgeId(0)), Some(details(&edges[0])));
        assert_eq!(t.get(EdgeId(15)), None);
        t.apply([(EdgeId(17), None), (EdgeId(31), None)]);
        assert_eq!(t.row(1), None);
        assert_eq!(t.get(EdgeId(17)), None);
    }

    /// A bulk load's row (16 edges of one event, recorded together) is the first edge's
    /// bytes alone; edges like the one before in the middle of a row still take their byte.
    #[test]
    fn edges_like_the_one_before_that_end_a_row_take_no_bytes() {
        let t = 1_700_000_000_000;
        let bulk: Vec<Edge> = (0..16).map(|i| edge(i, t, vec![42])).collect();
        let row = encode_row(bulk.iter().map(|e| (e.id.0 as usize, DetailsRef::from(e)))).unwrap();
        assert_eq!(row.len(), 2 + (1 + 6 + 1 + 1));
        let back = decode_row(&row).unwrap();
        assert_eq!(back.len(), 16);
        assert!(back
            .iter()
            .zip(&bulk)
            .all(|((o, d), e)| *o == e.id.0 as usize && *d == details(e)));
        assert_eq!(find_in_row(&row, 15), Some(Some(details(&bulk[15]))));

        let mixed = [
            edge(0, t, vec![42]),
            edge(1, t, vec![42]),
            edge(2, t + 1, vec![43]),
            edge(5, t + 1, vec![43]),
            edge(9, t + 1, vec![43]),
        ];
        let row = encode_row(mixed.iter().map(|e| (e.id.0 as usize, DetailsRef::from(e)))).unwrap();
        // The mask, the first edge, a byte for the second, the third (its time one ms on,
        // its event one on), nothing for the last two.
        assert_eq!(row.len(), 2 + 9 + 1 + (1 + 1 + 1 + 1));
        let back = decode_row(&row).unwrap();
        let want: Vec<(usize, Details)> = mixed
            .iter()
            .map(|e| (e.id.0 as usize, details(e)))
            .collect();
        assert_eq!(back, want);
    }

    #[test]
    fn a_row_that_does_not_read_exactly_is_no_row() {
        let e = edge(3, 10, vec![5, 6]);
        let row = encode_row([(3, DetailsRef::from(&e))]).unwrap();
        assert_eq!(find_in_row(&row, 3), Some(Some(details(&e))));
        assert_eq!(find_in_row(&row, 4), Some(None));
        // Cut short within the mask or the edge, or with a byte more, it reads as nothing;
        // cut after the mask, as an edge like the row's start (recorded at 0, event 0).
        for cut in (0..row.len()).filter(|c| *c != 2) {
            assert_eq!(decode_row(&row[..cut]), None, "cut at {cut}");
        }
        let start = Details {
            evidence: vec![0],
            ..Details::default()
        };
        assert_eq!(decode_row(&row[..2]), Some(vec![(3, start)]));
        let mut longer = row.to_vec();
        longer.push(0);
        assert_eq!(decode_row(&longer), None);
        // A count of events past the rest is refused without allocating it.
        let mut huge = vec![0b1000, 0, 0, 0];
        put_varint(&mut huge, u64::MAX);
        assert_eq!(decode_row(&huge), None);
        // Every flipped bit reads as another row or none, never a panic.
        for i in 0..row.len() * 8 {
            let mut bad = row.to_vec();
            bad[i / 8] ^= 1 << (i % 8);
            let _ = decode_row(&bad);
            let _ = find_in_row(&bad, 3);
        }
    }

    #[test]
    fn varints_take_at_most_64_bits() {
        for v in [0, 1, 127, 128, u64::MAX / 3, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut r = out.as_slice();
            assert_eq!(take_varint(&mut r), Some(v));
            assert!(r.is_empty());
        }
        let mut too_long: &[u8] = &[0xff; 11];
        assert_eq!(take_varint(&mut too_long), None);
        let mut overflow: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(take_varint(&mut overflow), None);
        for v in [0, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
