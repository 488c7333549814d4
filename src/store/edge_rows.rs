//! The edges table: every edge's full record, in rows of [`ROW_IDS`] consecutive ids under the
//! first id of the row (`codec::encode_edge_row`).
//!
//! A record of its own per edge was a B-tree insert per edge: 0.7 µs each, a third of a bulk
//! load's time, plus 4 bytes of key and about 9 of page overhead per edge. A row is one insert
//! for 16 edges. Changing one edge rewrites its row (under a kilobyte for plain edges).
//! Why 16 and not more: redb gives a value of more than half a page a leaf of its own, and
//! rows of 64 plain edges (2.2 kB) left a third of the table's pages empty; rows of 16
//! (about 560 bytes) fill them, and load as fast (at 1M edges, 512-538k edges/s against
//! 498-521k with 64, and 384-414k one record per edge, in one sitting).
//!
//! Stores written before rows hold one record per edge under its own id. They are read as
//! they are; a row written over ids that still have such records folds them in and deletes
//! their keys, so a range of ids is held either by one row or by records of their own, never
//! both.

use crate::codec::{decode_edge, decode_edge_body, edge_body, edge_row, encode_edge_row};
use crate::error::{Error, Result};
use crate::model::{Edge, EdgeId};
use crate::storage::{Backend, ScanVisitor, Table, WriteBatch};

/// Consecutive edge ids to a row (a power of two).
pub(crate) const ROW_IDS: u32 = 16;

const TABLE: Table = Table::Edges;

/// The first id of the row that holds `id`.
fn row_base(id: u32) -> u32 {
    id & !(ROW_IDS - 1)
}

fn key(id: u32) -> Vec<u8> {
    id.to_be_bytes().to_vec()
}

fn corrupt(message: String) -> Error {
    Error::Corrupt {
        table: TABLE.name(),
        message,
    }
}

/// The id a key of the table names.
fn key_id(key: &[u8]) -> Result<u32> {
    <[u8; 4]>::try_from(key)
        .map(u32::from_be_bytes)
        .map_err(|_| corrupt(format!("a key of {} bytes, expected 4", key.len())))
}

/// Decodes the body at `offset` of the row at `base`, checking it is the edge that belongs
/// there.
fn decode_in_row(base: u32, offset: u8, body: &[u8]) -> Result<Edge> {
    let edge = decode_edge_body(TABLE.name(), body)?;
    let want = base.checked_add(u32::from(offset));
    if offset as u32 >= ROW_IDS || Some(edge.id.0) != want {
        return Err(corrupt(format!(
            "edge {} at offset {offset} of the row at {base}",
            edge.id.0
        )));
    }
    Ok(edge)
}

/// The edges one entry of the table holds: a row's, or the one edge of a record written
/// before rows.
pub(crate) fn decode_entry(key: &[u8], value: &[u8]) -> Result<Vec<Edge>> {
    let id = key_id(key)?;
    match edge_row(TABLE.name(), value)? {
        // A row anywhere else is one no lookup would find.
        Some(_) if row_base(id) != id => Err(corrupt(format!("a row under the key {id}"))),
        Some(records) => records
            .iter()
            .map(|(offset, body)| decode_in_row(id, *offset, body))
            .collect(),
        None => {
            let edge = decode_edge(TABLE.name(), value)?;
            if edge.id.0 != id {
                return Err(corrupt(format!("edge {} under the key {id}", edge.id.0)));
            }
            Ok(vec![edge])
        }
    }
}

/// The full record of an edge.
pub(crate) fn read_edge(backend: &dyn Backend, id: EdgeId) -> Result<Option<Edge>> {
    let base = row_base(id.0);
    if let Some(value) = backend.get(TABLE, &key(base))? {
        if let Some(records) = edge_row(TABLE.name(), &value)? {
            let offset = (id.0 - base) as u8;
            return records
                .iter()
                .find(|(o, _)| *o == offset)
                .map(|(_, body)| decode_in_row(base, offset, body))
                .transpose();
        }
        if id.0 == base {
            return decode_entry(&key(base), &value).map(|mut edges| edges.pop());
        }
    } else if id.0 == base {
        return Ok(None);
    }
    // A store written before rows: the edge's own record.
    match backend.get(TABLE, &key(id.0))? {
        Some(value) => decode_entry(&key(id.0), &value).map(|mut edges| edges.pop()),
        None => Ok(None),
    }
}

/// The records of the row at `base` as stored, by offset, folding in records written before
/// rows (whose keys, other than the row's own, go in `batch`'s deletes).
fn stored_row(
    backend: &dyn Backend,
    base: u32,
    batch: &mut WriteBatch,
) -> Result<Vec<(u8, Vec<u8>)>> {
    let mut records: Vec<(u8, Vec<u8>)> = Vec::new();
    let end = base.checked_add(ROW_IDS).map(key);
    let row_key = key(base);
    backend.scan(TABLE, &row_key, end.as_deref(), &mut |k, v| {
        // Each entry is decoded, whether the row or a record of its own, so that the row
        // rewritten with this batch's changes carries no body that would not read. A row
        // under any key but the row's own is refused by `decode_entry`.
        // `decode_entry` checks each id against its key, which the scan keeps in the row's
        // range: the offset is below `ROW_IDS`.
        for edge in decode_entry(k, v)? {
            records.push(((edge.id.0 - base) as u8, edge_body(&edge)));
        }
        if k != row_key.as_slice() {
            batch.delete(TABLE, k.to_vec());
        }
        Ok(true)
    })?;
    records.sort_by_key(|(o, _)| *o);
    records.dedup_by_key(|(o, _)| *o);
    Ok(records)
}

/// Writes the rows of `changes` (edge id, its new body from [`edge_body`], or `None` when the
/// edge is gone), in increasing id order, into `batch`. Rows from `fresh_from` on hold
/// nothing yet (the ids a batch gives out), so only the rows below it are read and merged.
pub(crate) fn put_changes(
    backend: &dyn Backend,
    changes: Vec<(EdgeId, Option<Vec<u8>>)>,
    fresh_from: u32,
    batch: &mut WriteBatch,
) -> Result<()> {
    let mut changes = changes.into_iter().peekable();
    while let Some((first, _)) = changes.peek() {
        let base = row_base(first.0);
        let mut records = if base < fresh_from {
            stored_row(backend, base, batch)?
        } else {
            Vec::new()
        };
        while let Some((id, body)) = changes.next_if(|(id, _)| row_base(id.0) == base) {
            let offset = (id.0 - base) as u8;
            let at = records.binary_search_by_key(&offset, |(o, _)| *o);
            match (at, body) {
                (Ok(i), Some(body)) => records[i].1 = body,
                (Err(i), Some(body)) => records.insert(i, (offset, body)),
                (Ok(i), None) => {
                    records.remove(i);
                }
                (Err(_), None) => {}
            }
        }
        if records.is_empty() {
            batch.delete(TABLE, key(base));
        } else {
            let row = encode_edge_row(records.iter().map(|(o, b)| (*o, b.as_slice())));
            batch.put(TABLE, key(base), row);
        }
    }
    Ok(())
}

/// Writes every edge of `edges`, in increasing id order, as rows into `batch`, for a table
/// whose every key `batch` deletes first.
pub(crate) fn put_all<'a>(edges: impl IntoIterator<Item = &'a Edge>, batch: &mut WriteBatch) {
    let mut edges = edges.into_iter().peekable();
    while let Some(first) = edges.peek() {
        let base = row_base(first.id.0);
        let mut bodies = Vec::new();
        while let Some(edge) = edges.next_if(|e| row_base(e.id.0) == base) {
            bodies.push(((edge.id.0 - base) as u8, edge_body(edge)));
        }
        let row = encode_edge_row(bodies.iter().map(|(o, b)| (*o, b.as_slice())));
        batch.put(TABLE, key(base), row);
    }
}

/// Every edge of the table, in id order, an entry's edges at a time; `visit` returns false to
/// stop.
pub(crate) fn scan_entries(backend: &dyn Backend, visit: &mut ScanVisitor<'_>) -> Result<()> {
    backend.scan(TABLE, &[], None, visit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NodeId, Props};

    fn edge(id: u32) -> Edge {
        Edge {
            id: EdgeId(id),
            from: NodeId(0),
            relation: "NEXT".into(),
            to: NodeId(1),
            props: Props::new(),
            confidence: 0.5,
            valid_from: None,
            valid_to: None,
            recorded: 1,
            last_seen: 2,
            evidence: vec![1],
            salience: 0.5,
        }
    }

    fn row_of(base: u32, ids: &[u32]) -> Vec<u8> {
        let bodies: Vec<(u8, Vec<u8>)> = ids
            .iter()
            .map(|id| ((id - base) as u8, edge_body(&edge(*id))))
            .collect();
        encode_edge_row(bodies.iter().map(|(o, b)| (*o, b.as_slice())))
    }

    #[test]
    fn an_entry_reads_as_its_edges_only_where_a_lookup_finds_them() {
        let got = decode_entry(&key(16), &row_of(16, &[17, 20])).unwrap();
        assert_eq!(got, vec![edge(17), edge(20)]);
        // A row under a key that is not a row's first id, an edge at the wrong offset, a
        // record of its own under another id, and a key of another width are all refused.
        assert!(decode_entry(&key(17), &row_of(17, &[17])).is_err());
        assert!(decode_entry(&key(32), &row_of(16, &[17])).is_err());
        assert!(decode_entry(&key(4), &crate::codec::encode(&edge(5))).is_err());
        assert!(decode_entry(&[0, 0, 16], &row_of(16, &[17])).is_err());
        assert_eq!(
            decode_entry(&key(5), &crate::codec::encode(&edge(5))).unwrap(),
            vec![edge(5)]
        );
        // The last row of the id space.
        let last = u32::MAX - 1;
        let base = row_base(last);
        assert_eq!(
            decode_entry(&key(base), &row_of(base, &[last])).unwrap(),
            vec![edge(last)]
        );
    }
}
