//! The node key index: key -> node id, holding only ids.
//!
//! A `HashMap<String, NodeId>` kept a second copy of every key (24 bytes of `String` plus the
//! key's own allocation, about 65 bytes a node with the table's slack); this table holds a
//! 4-byte id per slot and reads the key from the node record it points at
//! (`NodeTable::key_bytes`), so the node records are the only copy.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use hashbrown::HashTable;

use super::node_table::NodeTable;
use crate::model::NodeId;

/// Node ids by key; every id in it must have a live record in the nodes it is given. Keys are
/// hashed by foldhash, seeded per process: every ingested edge looks up both its endpoints'
/// keys, and SipHash was a twentieth of a bulk load.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyIndex {
    table: HashTable<u32>,
    hasher: RandomState,
}

fn key_of(nodes: &NodeTable, id: u32) -> &[u8] {
    // An id in the table always has its record (see the type doc); "" keeps a broken caller
    // from panicking, at the cost of a lookup miss.
    nodes.key_bytes(NodeId(id)).unwrap_or_default()
}

impl KeyIndex {
    pub(crate) fn with_capacity(n: usize) -> Self {
        KeyIndex {
            table: HashTable::with_capacity(n),
            hasher: RandomState::default(),
        }
    }

    /// Of the key's bytes, as [`key_of`] gives them for the rehash of a growing table.
    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key.as_bytes())
    }

    pub(crate) fn get(&self, nodes: &NodeTable, key: &str) -> Option<NodeId> {
        self.table
            .find(self.hash(key), |&id| key_of(nodes, id) == key.as_bytes())
            .map(|&id| NodeId(id))
    }

    /// Points `key` at `id`; `false` when the key already pointed at another node (it now
    /// points at `id`). The records of the ids already in the table must be in `nodes`.
    pub(crate) fn insert(&mut self, nodes: &NodeTable, key: &str, id: NodeId) -> bool {
        let hash = self.hash(key);
        if let Some(slot) = self
            .table
            .find_mut(hash, |&i| key_of(nodes, i) == key.as_bytes())
        {
            let fresh = *slot == id.0;
            *slot = id.0;
            return fresh;
        }
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, id.0, |&i| hasher.hash_one(key_of(nodes, i)));
        true
    }

    /// Drops `key`, whose node record must still be in `nodes`.
    pub(crate) fn remove(&mut self, nodes: &NodeTable, key: &str) {
        if let Ok(entry) = self
            .table
            .find_entry(self.hash(key), |&i| key_of(nodes, i) == key.as_bytes())
        {
            entry.remove();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Heap bytes: a 4-byte id and a control byte per slot.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.table.capacity() * 5
    }
}
