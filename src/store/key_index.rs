//! The node key index: key -> node id, holding only ids.
//!
//! A `HashMap<String, NodeId>` kept a second copy of every key (24 bytes of `String` plus the
//! key's own allocation, about 65 bytes a node with the table's slack); this table holds a
//! 4-byte id per slot and reads the key from the node record it points at
//! (`NodeTable::key_bytes`), so the node records are the only copy.
//!
//! A store opened from a snapshot reads the keys the snapshot had from the snapshot's own
//! table, mapped ([`KeySlots`]: open addressing by [`stable_hash`], linear probing, half
//! full at most), and keeps only the keys put since on the heap. A probe of the mapped table
//! takes an id only if that node's record, as the node table holds it now, has the key: a
//! node removed or changed since is passed over without the table being written.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use hashbrown::HashTable;

use super::node_table::NodeTable;
use crate::mapped::{Limits, Plain, Section};
use crate::model::NodeId;

/// One slot of a snapshot's key table: a node id, or [`KeySlot::EMPTY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct KeySlot(pub u32);

impl KeySlot {
    pub(crate) const EMPTY: KeySlot = KeySlot(u32::MAX);
}

// SAFETY: a `u32`.
unsafe impl Plain for KeySlot {
    fn valid(&self, limits: &Limits) -> bool {
        *self == KeySlot::EMPTY || self.0 < limits.nodes
    }
}

/// The hash that lays out a snapshot's key table. Fixed for good (the table on disk is laid
/// out by it; a snapshot format records it), unlike the process-seeded hash of the heap
/// table: 8 bytes at a time, each multiplied in, then murmur3's finaliser.
pub(crate) fn stable_hash(key: &[u8]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64 ^ key.len() as u64;
    for chunk in key.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^= h >> 32;
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

/// The slots of a key table for the keys of `nodes` (a power of two, at least twice the
/// keys): what a snapshot writes. Later keys win over earlier ones (as the heap table's
/// inserts do).
pub(crate) fn key_slots(nodes: &NodeTable) -> Vec<KeySlot> {
    let n = (nodes.live_count() * 2).max(1).next_power_of_two();
    let mask = n - 1;
    let mut slots = vec![KeySlot::EMPTY; n];
    for id in nodes.ids() {
        let key = key_of(nodes, id.0);
        let mut i = stable_hash(key) as usize & mask;
        loop {
            let slot = &mut slots[i];
            if *slot == KeySlot::EMPTY || key_of(nodes, slot.0) == key {
                *slot = KeySlot(id.0);
                break;
            }
            i = (i + 1) & mask;
        }
    }
    slots
}

/// Node ids by key; every id in it must have a live record in the nodes it is given. Keys are
/// hashed by foldhash, seeded per process: every ingested edge looks up both its endpoints'
/// keys, and SipHash was a twentieth of a bulk load.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyIndex {
    table: HashTable<u32>,
    hasher: RandomState,
    /// The snapshot's key table, when the store was opened from one (see the module doc).
    mapped: Option<Section<KeySlot>>,
}

fn key_of(nodes: &NodeTable, id: u32) -> &[u8] {
    // An id in the table always has its record (see the type doc); "" keeps a broken caller
    // from panicking, at the cost of a lookup miss.
    nodes.key_bytes(NodeId(id)).unwrap_or_default()
}

impl KeyIndex {
    /// The index of a store opened from a snapshot: the snapshot's key table, a power of two
    /// of slots (refused otherwise).
    pub(crate) fn mapped(slots: Section<KeySlot>) -> Result<Self, String> {
        if !slots.len().is_power_of_two() {
            return Err(format!("a key table of {} slots", slots.len()));
        }
        Ok(KeyIndex {
            mapped: Some(slots),
            ..KeyIndex::default()
        })
    }

    /// The node the snapshot's table gives `key`, if that node still has it.
    fn get_mapped(&self, nodes: &NodeTable, key: &str) -> Option<NodeId> {
        let slots = self.mapped.as_ref()?;
        let mask = slots.len() - 1;
        let mut i = stable_hash(key.as_bytes()) as usize & mask;
        // At most a lap: a damaged table may have no empty slot.
        for _ in 0..slots.len() {
            let slot = slots.get(i)?;
            if slot == KeySlot::EMPTY {
                return None;
            }
            if key_of(nodes, slot.0) == key.as_bytes() {
                return Some(NodeId(slot.0));
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// Checks every block of the mapped table; whether all are sound.
    pub(crate) fn check_mapped(&self) -> bool {
        self.mapped.as_ref().is_none_or(Section::check_all)
    }

    /// Of the key's bytes, as [`key_of`] gives them for the rehash of a growing table.
    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key.as_bytes())
    }

    pub(crate) fn get(&self, nodes: &NodeTable, key: &str) -> Option<NodeId> {
        if !self.table.is_empty() || self.mapped.is_none() {
            let found = self
                .table
                .find(self.hash(key), |&id| key_of(nodes, id) == key.as_bytes());
            if let Some(&id) = found {
                return Some(NodeId(id));
            }
        }
        self.get_mapped(nodes, key)
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
        let in_map = self.get_mapped(nodes, key);
        if in_map == Some(id) {
            // The snapshot's table already says so.
            return true;
        }
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, id.0, |&i| hasher.hash_one(key_of(nodes, i)));
        in_map.is_none()
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

    /// The keys that lead to a node of `nodes` (with a mapped table, a pass over the nodes).
    pub(crate) fn len(&self, nodes: &NodeTable) -> usize {
        if self.mapped.is_none() {
            return self.table.len();
        }
        nodes
            .ids()
            .filter(|id| {
                let key = std::str::from_utf8(key_of(nodes, id.0)).unwrap_or_default();
                self.get(nodes, key) == Some(*id)
            })
            .count()
    }

    /// Heap bytes: a 4-byte id and a control byte per slot.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.table.capacity() * 5
    }
}
