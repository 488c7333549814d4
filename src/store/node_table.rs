//! The in-memory node table: each live node as one encoded record, its key first.
//!
//! A `Node` held whole took 184 bytes a slot (three `String`s, the aliases, properties and
//! anchor that almost no node has, times) plus an allocation for each of its key, label and
//! name: 218 bytes a node on the 1M-edge benchmark graph, more than the node's edges' share
//! of the adjacency. Here a node is its [`NodeRecord`] encoding (postcard, the label as its
//! interned id, the id implied by the slot): a 16-byte slot and one allocation of about 50
//! bytes. The snapshot stores the same bytes, so writing it copies them, and a store opened
//! from it reads them in place from its map (the records changed since sit on the heap).
//!
//! A node is decoded when it is read ([`NodeTable::get`], about a microsecond). What is read
//! of many nodes at a time is not decoded (`GraphRead::node_ids` and `pinned_ids` give ids
//! to filter before a decode): traversals filter on the label and pin the
//! adjacency holds, and a record starts with the salience (four bytes), then the key, the
//! label id and the name, which [`NodeTable::salience`], [`NodeTable::key`] and [`NodeTable::name`] read
//! in place (retrieval scores hundreds of nodes a question; decoding each whole had
//! made it 2.7 times slower).

use serde::{Deserialize, Serialize};

use super::records::{MappedRecords, Prefetch, RecordOffset, Records};
use crate::codec::{take_bytes, take_varint};
use crate::graph::Interner;
use crate::model::{Anchor, Node, NodeId, Props};

/// A node as stored: its id is its slot, its label the interned id.
#[derive(Serialize)]
struct NodeRecordRef<'a> {
    key: &'a str,
    label: u32,
    name: &'a str,
    aliases: &'a [String],
    props: &'a Props,
    anchor: &'a Option<Anchor>,
    pinned: bool,
    created: i64,
    /// The update time less the creation time: one byte for a node never updated, where the
    /// time itself took six (a sixth of a benchmark node's record).
    updated_since_created: i64,
}

/// [`NodeRecordRef`] read back.
#[derive(Deserialize)]
struct NodeRecord {
    key: String,
    label: u32,
    name: String,
    aliases: Vec<String>,
    props: Props,
    anchor: Option<Anchor>,
    pinned: bool,
    created: i64,
    updated_since_created: i64,
}

/// The record of `n`. Every live node's label is interned (`State::put_node` does it
/// first); were one not, the record would say `u32::MAX` and read back as no node.
pub(super) fn encode(n: &Node, labels: &Interner) -> Vec<u8> {
    // Every field named, so that a field added to `Node` does not compile until it is stored.
    let Node {
        id: _,
        key,
        label,
        name,
        aliases,
        props,
        anchor,
        salience,
        pinned,
        created,
        updated,
    } = n;
    let record = NodeRecordRef {
        key,
        label: labels.get(label).unwrap_or(u32::MAX),
        name,
        aliases,
        props,
        anchor,
        pinned: *pinned,
        created: *created,
        // Wrapping both ways: any two times round-trip.
        updated_since_created: updated.wrapping_sub(*created),
    };
    let mut bytes = salience.to_le_bytes().to_vec();
    // Serializing fails only when a `Value` cannot be written, which postcard has no such
    // case for; a record of the salience alone then reads back as no node.
    if let Ok(rest) = postcard::to_extend(&record, Vec::with_capacity(32)) {
        bytes.extend_from_slice(&rest);
    }
    bytes
}

/// The bytes of the salience at the start of a record, before its postcard part.
const SALIENCE: usize = 4;

/// Node records by id (see the module doc), in [`Records`] with one slot per node id.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeTable {
    records: Records<RecordOffset>,
    live: usize,
}

impl NodeTable {
    /// The table read from a snapshot: its records mapped, `live` of them live.
    pub(super) fn mapped(base: MappedRecords<RecordOffset>, live: usize) -> Self {
        NodeTable {
            records: Records::mapped(base),
            live,
        }
    }

    /// Checks every block of the mapped records now; whether all are sound. (A record itself
    /// is checked as it is read: every reader of a record is bounds-checked, and a decode
    /// checks its label.)
    pub(super) fn check_mapped(&self) -> bool {
        self.records.check_mapped()
    }

    /// Fetches ahead what reading the key of node `id` reads in the map (see
    /// [`Records::prefetch`]).
    #[inline]
    pub(super) fn prefetch(&self, id: u32, step: Prefetch) {
        self.records.prefetch(id as usize, step);
    }

    /// Checks again the mapped blocks the record of node `id` is read from; whether they are
    /// sound.
    pub(super) fn recheck_mapped(&self, id: NodeId) -> bool {
        self.records.recheck_mapped(id.0 as usize)
    }

    pub(crate) fn slot_bound(&self) -> usize {
        self.records.slot_bound()
    }

    pub(crate) fn live_count(&self) -> usize {
        self.live
    }

    /// Stores `n` in its slot, replacing what was there.
    pub(super) fn put(&mut self, n: &Node, labels: &Interner) {
        let i = n.id.0 as usize;
        if self.record(i).is_none() {
            self.live += 1;
        }
        self.records.set(i, Some(encode(n, labels).as_slice()));
    }

    /// Frees slot `id`.
    pub(super) fn remove(&mut self, id: NodeId) {
        let i = id.0 as usize;
        if self.record(i).is_none() {
            return;
        }
        // Counts read from a snapshot's body are not proof against a crafted file.
        self.live = self.live.saturating_sub(1);
        self.records.set(i, None);
    }

    /// The record of node `id`, as the snapshot stores it.
    pub(super) fn record(&self, id: usize) -> Option<&[u8]> {
        self.records.get(id)
    }

    /// Node `id`, decoded.
    pub(crate) fn get(&self, id: NodeId, labels: &Interner) -> Option<Node> {
        let salience = self.salience(id)?;
        let r: NodeRecord =
            postcard::from_bytes(self.record(id.0 as usize)?.get(SALIENCE..)?).ok()?;
        if r.label as usize >= labels.len() {
            return None;
        }
        Some(Node {
            id,
            key: r.key,
            label: labels.name(r.label).to_string(),
            name: r.name,
            aliases: r.aliases,
            props: r.props,
            anchor: r.anchor,
            salience,
            pinned: r.pinned,
            created: r.created,
            updated: r.created.wrapping_add(r.updated_since_created),
        })
    }

    /// The key of node `id`, read from its record without decoding the rest.
    pub(crate) fn key(&self, id: NodeId) -> Option<&str> {
        std::str::from_utf8(self.key_bytes(id)?).ok()
    }

    /// The bytes of the key of node `id`, from its record. The key index compares these (no
    /// UTF-8 check on every probe of every ingested edge's endpoints).
    pub(crate) fn key_bytes(&self, id: NodeId) -> Option<&[u8]> {
        let mut r = self.record(id.0 as usize)?.get(SALIENCE..)?;
        take_bytes(&mut r)
    }

    /// The name of node `id`, from its record (after the key and the label id).
    pub(crate) fn name(&self, id: NodeId) -> Option<&str> {
        let mut r = self.record(id.0 as usize)?.get(SALIENCE..)?;
        take_bytes(&mut r)?;
        take_varint(&mut r)?;
        std::str::from_utf8(take_bytes(&mut r)?).ok()
    }

    /// The salience of node `id`: the record's first four bytes.
    pub(crate) fn salience(&self, id: NodeId) -> Option<f32> {
        let b = self.record(id.0 as usize)?.get(..SALIENCE)?;
        Some(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The live ids, in order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.slot_bound())
            .filter(|i| self.record(*i).is_some())
            .map(|i| NodeId(i as u32))
    }

    /// Heap bytes: the slots and the records (without the allocator's rounding).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.records.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;

    fn node(id: u32, key: &str) -> Node {
        let mut props = Props::new();
        props.insert("colour".into(), Value::from("red"));
        Node {
            id: NodeId(id),
            key: key.into(),
            label: "Place".into(),
            name: "the place".into(),
            aliases: vec!["there".into()],
            props,
            anchor: Some(Anchor {
                cx: -3,
                cz: 4,
                block: Some([1, 2, 3]),
            }),
            salience: 0.25,
            pinned: true,
            created: -5,
            updated: i64::MAX,
        }
    }

    /// A node never updated spends a byte on its update time, not the time's six.
    #[test]
    fn a_node_never_updated_spends_one_byte_on_its_update_time() {
        let mut labels = Interner::default();
        labels.intern("Place");
        let at = |created: i64, updated: i64| {
            let n = Node {
                created,
                updated,
                ..node(1, "n1")
            };
            encode(&n, &labels).len()
        };
        let t = 1_764_000_000_000;
        assert_eq!(at(t, t + 60_000) - at(t, t), 2);
        // A time far from the creation takes its six bytes.
        assert_eq!(at(t, 0) - at(t, t), 5);
    }

    #[test]
    fn a_node_reads_back_whole_and_its_key_without_a_decode() {
        let mut labels = Interner::default();
        labels.intern("Place");
        let mut t = NodeTable::default();
        let long = "k".repeat(300);
        for (id, key) in [(0, "home"), (5, long.as_str()), (6, " é🙂 ")] {
            let n = node(id, key);
            t.put(&n, &labels);
            assert_eq!(t.get(NodeId(id), &labels), Some(n));
            assert_eq!(t.key(NodeId(id)), Some(key));
            assert_eq!(t.name(NodeId(id)), Some("the place"));
            assert_eq!(t.salience(NodeId(id)), Some(0.25));
        }
        assert_eq!(t.live_count(), 3);
        assert_eq!(t.get(NodeId(1), &labels), None);
        t.remove(NodeId(5));
        assert_eq!((t.key(NodeId(5)), t.live_count()), (None, 2));
        assert_eq!(t.ids().collect::<Vec<_>>(), [NodeId(0), NodeId(6)]);
    }
}
