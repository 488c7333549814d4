//! The node key index: key -> node id, holding only ids.
//!
//! A `HashMap<String, NodeId>` kept a second copy of every key (24 bytes of `String` plus the
//! key's own allocation, about 65 bytes a node with the table's slack); this table holds a
//! 4-byte id per slot and reads the key from the node record it points at
//! (`NodeTable::key_bytes`), so the node records are the only copy.
//!
//! A store opened from a snapshot reads the keys the snapshot had from the snapshot's own
//! table, mapped (open addressing by [`stable_hash`], linear probing, two thirds full at
//! most, beside each slot a byte of its key's hash), and keeps only the keys put since on the
//! heap. A probe reads a node's record only where the slot's hash byte is the key's: a key
//! not in the table passes five slots on average at two thirds full, and one in 256 of them
//! costs a record read. A probe of the mapped table
//! takes an id only if that node's record, as the node table holds it now, has the key: a
//! node removed or changed since is passed over without the table being written.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;

use hashbrown::HashTable;

use super::node_table::NodeTable;
use super::records::Prefetch;
use crate::codec::stable_hash;
use crate::mapped::{per_block, Limits, Plain, Section};
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

/// The slot a key of hash `hash` starts its probe at, in a table of `len` slots: the hash
/// scaled to the table (any length, not only a power of two).
fn home(hash: u64, len: usize) -> usize {
    ((u128::from(hash) * len as u128) >> 64) as usize
}

/// The slot after `i` in a table of `len` slots, round to the first.
fn next_slot(i: usize, len: usize) -> usize {
    if i + 1 >= len {
        0
    } else {
        i + 1
    }
}

/// The slots of a key table for the keys of `nodes` (half as many again as the keys, and one
/// more: two thirds full at most) and each slot's hash byte: what a snapshot writes. Half
/// full, as a power of two, the slots took 2.1 B an edge of the 1M-edge benchmark's 60; now
/// the slots and their bytes take 1.5. At two thirds a found key passes two slots on average
/// where it passed 1.3, and a key not there five where it passed 1.8, but a passed slot costs
/// a record read only when its hash byte is the key's. Later keys win over earlier ones (as
/// the heap table's inserts do).
pub(crate) fn key_slots(nodes: &NodeTable) -> (Vec<KeySlot>, Vec<u8>) {
    // Counted, not taken from `live_count`: a count read from a crafted snapshot could be
    // short, and a full table would leave the probe below nowhere to stop.
    let ids: Vec<NodeId> = nodes.ids().collect();
    let n = ids.len() + ids.len() / 2 + 1;
    let mut slots = vec![KeySlot::EMPTY; n];
    let mut tags = vec![0u8; n];
    for id in ids {
        let key = key_of(nodes, id.0);
        let hash = stable_hash(key.unwrap_or_default());
        let mut i = home(hash, n);
        for _ in 0..n {
            let slot = &mut slots[i];
            if *slot == KeySlot::EMPTY || key_of(nodes, slot.0) == key {
                *slot = KeySlot(id.0);
                tags[i] = hash_tag(hash);
                break;
            }
            i = next_slot(i, n);
        }
    }
    (slots, tags)
}

/// Node ids by key; every id in it must have a live record in the nodes it is given. Keys are
/// hashed by foldhash, seeded per process: every ingested edge looks up both its endpoints'
/// keys, and SipHash was a twentieth of a bulk load.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyIndex {
    table: HashTable<u32>,
    hasher: RandomState,
    /// The snapshot's key table, when the store was opened from one (see the module doc).
    mapped: Option<MappedKeys>,
}

/// A snapshot's key table: the slots, and the hash byte ([`hash_tag`]) of each slot's key.
#[derive(Clone, Debug)]
pub(crate) struct MappedKeys {
    pub slots: Section<KeySlot>,
    pub tags: Section<u8>,
}

/// How many keys ahead each step of [`KeyIndex::get_many`]'s pipeline fetches: enough
/// misses in flight to cover memory's latency, few enough that what was fetched is still
/// in the cache when it is read.
const AHEAD: usize = 8;

/// The byte of a key's hash its slot keeps: the low byte, where the slot the probe starts
/// at comes from the high bits ([`home`]).
fn hash_tag(hash: u64) -> u8 {
    hash as u8
}

/// The key of node `id` as its record holds it now; `None` for a node without one (removed
/// since the snapshot's table was laid out), which no key matches, not even "".
fn key_of(nodes: &NodeTable, id: u32) -> Option<&[u8]> {
    nodes.key_bytes(NodeId(id))
}

/// Whether node `id` has the key `key` now.
fn has_key(nodes: &NodeTable, id: u32, key: &str) -> bool {
    key_of(nodes, id) == Some(key.as_bytes())
}

impl KeyIndex {
    /// The index of a store opened from a snapshot: the snapshot's key table (refused when it
    /// has no slot, or not one hash byte a slot).
    pub(crate) fn mapped(keys: MappedKeys) -> Result<Self, String> {
        if keys.slots.is_empty() || keys.tags.len() != keys.slots.len() {
            return Err(format!(
                "a key table of {} slots and {} hash bytes",
                keys.slots.len(),
                keys.tags.len()
            ));
        }
        Ok(KeyIndex {
            mapped: Some(keys),
            ..KeyIndex::default()
        })
    }

    /// The node the snapshot's table gives `key`, if that node still has it.
    fn get_mapped(&self, nodes: &NodeTable, key: &str) -> Option<NodeId> {
        self.probe_mapped(nodes, key, stable_hash(key.as_bytes()), false)
            .0
    }

    /// Checks again every mapped block a lookup of `key` reads in the snapshot's table: the
    /// slots and hash bytes of its probe, and the records of the nodes whose hash byte matches;
    /// whether they are sound. For a key that was not found where it had to be: a block read
    /// and found sound before may have changed since (the file changed under the map), and a
    /// lookup that misses must not pass for the key being unknown. A lookup that finds its key
    /// needs no such check, and rechecking every miss would cost a bulk load's every new key.
    pub(crate) fn recheck_mapped(&self, nodes: &NodeTable, key: &str) -> bool {
        self.probe_mapped(nodes, key, stable_hash(key.as_bytes()), true)
            .1
    }

    /// The probe of the snapshot's table for `key`, whose [`stable_hash`] is `hash`: the node
    /// it finds, and whether the blocks it read are sound. With `recheck`, each block is
    /// checked again before it is read (see [`KeyIndex::recheck_mapped`]); without, only as a
    /// read checks it, and lookups take this path with `recheck` a constant false.
    #[inline(always)]
    fn probe_mapped(
        &self,
        nodes: &NodeTable,
        key: &str,
        hash: u64,
        recheck: bool,
    ) -> (Option<NodeId>, bool) {
        let Some(MappedKeys { slots, tags }) = self.mapped.as_ref() else {
            return (None, true);
        };
        let len = slots.len();
        let (tag, mut i) = (hash_tag(hash), home(hash, len));
        let mut sound = true;
        // A probe reads neighbouring slots: each block is checked again once.
        let mut checked: Option<(usize, usize)> = None;
        // At most a lap: a damaged table may have no empty slot.
        for _ in 0..len {
            if recheck {
                let blocks = (i / per_block::<KeySlot>(), i / per_block::<u8>());
                if checked != Some(blocks) {
                    sound &= slots.recheck(i..i + 1) & tags.recheck(i..i + 1);
                    checked = Some(blocks);
                }
            }
            let Some(slot) = slots.get(i) else {
                return (None, false);
            };
            if slot == KeySlot::EMPTY {
                return (None, sound);
            }
            let Some(slot_tag) = tags.get(i) else {
                return (None, false);
            };
            if slot_tag == tag {
                if recheck {
                    sound &= nodes.recheck_mapped(NodeId(slot.0));
                }
                if has_key(nodes, slot.0, key) {
                    return (Some(NodeId(slot.0)), sound);
                }
            }
            i = next_slot(i, len);
        }
        (None, sound)
    }

    /// Checks every block of the mapped table; whether all are sound.
    pub(crate) fn check_mapped(&self) -> bool {
        self.mapped
            .as_ref()
            .is_none_or(|m| m.slots.check_all() & m.tags.check_all())
    }

    /// Of the key's bytes, as [`key_of`] gives them for the rehash of a growing table.
    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key.as_bytes())
    }

    pub(crate) fn get(&self, nodes: &NodeTable, key: &str) -> Option<NodeId> {
        self.get_hashed(nodes, key, || stable_hash(key.as_bytes()))
    }

    /// [`KeyIndex::get`], the key's [`stable_hash`] given by `stable` (asked for only when
    /// the snapshot's table is probed).
    #[inline]
    fn get_hashed(
        &self,
        nodes: &NodeTable,
        key: &str,
        stable: impl FnOnce() -> u64,
    ) -> Option<NodeId> {
        if !self.table.is_empty() || self.mapped.is_none() {
            let found = self
                .table
                .find(self.hash(key), |&id| has_key(nodes, id, key));
            if let Some(&id) = found {
                return Some(NodeId(id));
            }
        }
        self.mapped.as_ref()?;
        self.probe_mapped(nodes, key, stable(), false).0
    }

    /// [`KeyIndex::get`] of each of `keys`, in order, into `found` (cleared first). A lookup
    /// in the snapshot's table waits on memory three times over (the key's slot and hash
    /// byte, its node's record offsets, the record's key), and at 100M edges each is a
    /// cache miss: here each step is fetched ahead for the keys further on, in a pipeline
    /// [`AHEAD`] keys a step deep, so that the misses of several lookups overlap.
    pub(crate) fn get_many(
        &self,
        nodes: &NodeTable,
        keys: &[&str],
        found: &mut Vec<Option<NodeId>>,
    ) {
        found.clear();
        let Some(MappedKeys { slots, tags }) = self.mapped.as_ref() else {
            found.extend(keys.iter().map(|k| self.get(nodes, k)));
            return;
        };
        let len = slots.len();
        // Each key's hash, then its home slot's node where the slot's hash byte is the key's
        // (the usual case; a key further along the probe is not fetched ahead), found at the
        // first step that reads the slot and kept for the next.
        let hashes: Vec<u64> = keys.iter().map(|k| stable_hash(k.as_bytes())).collect();
        let mut candidates: Vec<Option<u32>> = Vec::with_capacity(keys.len());
        for i in 0..keys.len() + 3 * AHEAD {
            if let Some(&hash) = hashes.get(i) {
                let at = home(hash, len);
                slots.prefetch(at);
                tags.prefetch(at);
            }
            if let Some(&hash) = i.checked_sub(AHEAD).and_then(|j| hashes.get(j)) {
                let at = home(hash, len);
                let candidate = slots
                    .get(at)
                    .filter(|&slot| slot != KeySlot::EMPTY && tags.get(at) == Some(hash_tag(hash)))
                    .map(|slot| slot.0);
                if let Some(id) = candidate {
                    nodes.prefetch(id, Prefetch::Offsets);
                }
                candidates.push(candidate);
            }
            if let Some(&Some(id)) = i.checked_sub(2 * AHEAD).and_then(|j| candidates.get(j)) {
                nodes.prefetch(id, Prefetch::Record);
            }
            if let Some(j) = i.checked_sub(3 * AHEAD).filter(|&j| j < keys.len()) {
                found.push(self.get_hashed(nodes, keys[j], || hashes[j]));
            }
        }
    }

    /// Points `key` at `id`; `false` when the key already pointed at another node (it now
    /// points at `id`). The records of the ids already in the table must be in `nodes`.
    pub(crate) fn insert(&mut self, nodes: &NodeTable, key: &str, id: NodeId) -> bool {
        let hash = self.hash(key);
        if let Some(slot) = self.table.find_mut(hash, |&i| has_key(nodes, i, key)) {
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
        self.table.insert_unique(hash, id.0, |&i| {
            hasher.hash_one(key_of(nodes, i).unwrap_or_default())
        });
        in_map.is_none()
    }

    /// Drops `key`, whose node record must still be in `nodes`.
    pub(crate) fn remove(&mut self, nodes: &NodeTable, key: &str) {
        if let Ok(entry) = self
            .table
            .find_entry(self.hash(key), |&i| has_key(nodes, i, key))
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
                let key = std::str::from_utf8(key_of(nodes, id.0).unwrap_or_default())
                    .unwrap_or_default();
                self.get(nodes, key) == Some(*id)
            })
            .count()
    }

    /// Heap bytes: a 4-byte id and a control byte per slot.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.table.capacity() * 5
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Interner;
    use crate::mapped::{block_crcs, bytes_of, map_of, Damage};
    use crate::model::Node;

    /// A key table mapped from a file holding `slots` and their hash bytes `tags`.
    fn mapped((slots, tags): (Vec<KeySlot>, Vec<u8>)) -> KeyIndex {
        let limits = Limits {
            nodes: 1 << 20,
            ..Limits::default()
        };
        let damage = std::sync::Arc::new(Damage::default());
        let crcs = block_crcs(slots.iter().copied());
        let slots = Section::new(
            map_of(bytes_of(&slots)),
            0,
            slots.len(),
            crcs,
            limits,
            damage.clone(),
            "t",
        );
        let crcs = block_crcs(tags.iter().copied());
        let tags = Section::new(map_of(&tags), 0, tags.len(), crcs, limits, damage, "h");
        KeyIndex::mapped(MappedKeys {
            slots: slots.unwrap(),
            tags: tags.unwrap(),
        })
        .unwrap()
    }

    /// The snapshot's table is laid out for the nodes it had; lookups find them, and a node
    /// removed since is found by no key, not even "" (its record is gone, which once read as
    /// an empty key).
    #[test]
    fn a_mapped_table_finds_its_keys_and_no_removed_node() {
        let mut labels = Interner::default();
        labels.intern("Place");
        let mut nodes = NodeTable::default();
        for i in 0..50 {
            nodes.put(&Node::bare(i, &format!("k{i}"), "Place"), &labels);
        }
        let index = mapped(key_slots(&nodes));
        for i in 0..50 {
            assert_eq!(index.get(&nodes, &format!("k{i}")), Some(NodeId(i)));
        }
        assert_eq!(index.get(&nodes, "missing"), None);
        // A probe reads a node's record only where the slot's hash byte is the key's: with
        // every byte wrong, no key is found.
        let (slots, tags) = key_slots(&nodes);
        let blind = mapped((slots, tags.iter().map(|t| t.wrapping_add(1)).collect()));
        assert_eq!(blind.get(&nodes, "k7"), None);
        for i in 0..50 {
            nodes.remove(NodeId(i));
        }
        // Every slot of this table names a removed node.
        let full = mapped((vec![KeySlot(3); 8], vec![hash_tag(stable_hash(b"")); 8]));
        assert_eq!(full.get(&nodes, ""), None);
        assert_eq!(index.get(&nodes, ""), None);
        assert_eq!(index.get(&nodes, "k3"), None);
        assert_eq!(index.len(&nodes), 0);
    }

    /// A batch of lookups finds what each lookup alone finds, in order, whatever its length
    /// beside the pipeline's depth: keys of the snapshot's table, keys added since, keys of
    /// nodes removed since, keys never seen, and repeats.
    #[test]
    fn lookups_in_a_batch_find_what_each_lookup_finds() {
        let mut labels = Interner::default();
        labels.intern("Place");
        let mut nodes = NodeTable::default();
        for i in 0..60 {
            nodes.put(&Node::bare(i, &format!("k{i}"), "Place"), &labels);
        }
        let mut index = mapped(key_slots(&nodes));
        for i in 60..70 {
            nodes.put(&Node::bare(i, &format!("k{i}"), "Place"), &labels);
            assert!(index.insert(&nodes, &format!("k{i}"), NodeId(i)));
        }
        for i in (0..70).step_by(9) {
            index.remove(&nodes, &format!("k{i}"));
            nodes.remove(NodeId(i));
        }
        let names: Vec<String> = (0..80)
            .chain([5, 5, 61, 0])
            .map(|i| format!("k{i}"))
            .chain(["".to_string(), "missing".to_string()])
            .collect();
        let keys: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut found = vec![Some(NodeId(999))];
        for n in [0, 1, 2 * AHEAD, 3 * AHEAD + 1, keys.len()] {
            index.get_many(&nodes, &keys[..n], &mut found);
            let one_by_one: Vec<Option<NodeId>> =
                keys[..n].iter().map(|k| index.get(&nodes, k)).collect();
            assert_eq!(found, one_by_one, "{n} keys");
        }
        assert_eq!(found[5], Some(NodeId(5)));
        assert_eq!(found[9], None, "removed");
        assert_eq!(found[65], Some(NodeId(65)), "added since");
        assert_eq!(found[75], None, "never seen");
    }
}
