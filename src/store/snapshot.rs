//! The derived in-memory state, persisted: one file (`state.snapshot`) that records the log
//! position it reflects, so that an open maps it and replays only the log's events after that
//! position, instead of replaying the whole log.
//!
//! No table of the store holds nodes or edges (since store format 3): the log is their only
//! record, and this file the only copy of the state derived from it. Catching up runs the
//! events after the snapshot through the same projection live ingest ran, onto the mapped
//! state, so the result is the state at the log's end.
//!
//! A missing, damaged (checksum), other-version or unusable snapshot is never an error: the
//! state is replayed from the whole log (and `replay --verify` compares whatever was loaded
//! with the replay of the log).
//!
//! The file has two parts. The header and body are read into memory and checked whole at the
//! open: the names, counts, pinned nodes, validity bounds, and the table of the mapped
//! sections with a CRC-32 per block. The sections that follow are mapped, not read: the edge
//! slots, last-seen times, the adjacency's rows laid end to end (offsets, then entries), the
//! node records the same way, each node's label and the key table, little-endian, each
//! starting on a page: the offsets, records and key table as their items lie in memory, the
//! rest as packed columns (`crate::packed`). They are checked block by block at their first
//! read (`crate::mapped`), so an open reads no node and no edge, and a page costs memory only
//! once read; all are checked again once a checkpoint's write has read them, before the new
//! file is put in place (the file may have changed under the map since a block's first
//! read). Damage found there reads as missing; the store reports it (`verify`), replays its
//! graph from the log before it writes a batch that met it (whose lookups may have missed),
//! and its next checkpoint or close removes the snapshot instead of writing the damaged
//! state, so the open after replays the state from the log.
//!
//! A new snapshot is a new file renamed over the old one, never a write into a mapped file;
//! a process that mapped the old one keeps reading it (the disk space is freed when it
//! closes). What a map cannot guard against is another program truncating the file while a
//! store has it open, which faults the process (SIGBUS); tantivy maps the text index's files
//! the same way.
//!
//! Layout (little-endian): `LOCISNAP`, snapshot format (u32), store format (u32), projection
//! version (u32), counters (next node u32, next edge u32, last seq u64), the fingerprint of
//! the log record at that seq (u32, see [`log_fingerprint`]), body length (u64), CRC-32 of
//! the body (u32); then the body: relation names, label names, the number of node slots (at
//! most the header's next node id), the live nodes, the pinned node ids, the number of edge
//! slots (at most the header's next edge id), the live edges, the number of adjacency entries
//! (u64, at most twice the edge slots), the confidence codebook (a u32 count, at most
//! `packed::CODEBOOK_MAX`, then the `f32` bits of each distinct confidence as a u64,
//! ascending; none when there were more), whether the offsets are narrow (u32: 1 when every
//! offset fits 32 bits and the offset sections hold u32s, 0 for u64s), the validity bounds
//! of the edges that have one (id u32, from i64, to i64), and for each of the fifteen
//! sections its items (u64) and the CRC-32 of each of its blocks. Then, each from the next
//! multiple of 4096 bytes: the edge slots as a packed column (`crate::packed`: its block
//! headers, then its bits; per slot the endpoints, the relation one up with 0 for a free
//! slot, the confidence's rank in the codebook (its bits when the codebook is empty), the
//! bits of the salience), the last-seen times as a packed column (an i64 with its sign bit
//! flipped), the adjacency's offsets (narrow or wide, one per node slot and one more, in
//! entries) and entries as a packed column (neighbour, edge, the confidence's rank as in the
//! edge slots, the relation shifted past the direction and bounded flags), the node records'
//! offsets (the same way; equal offsets for an empty slot) and bytes (each record as
//! `store/node_table.rs` keeps it: the salience as f32, then postcard of the rest, its label
//! interned, its update time as the difference from its creation), each node slot's label
//! as a packed column (one up, 0 for an empty slot), the key table (u32 node ids, `u32::MAX`
//! for an empty slot: `key_index::key_slots`), the rows of edge details as the node records
//! are laid out (`store/edge_details.rs`), and the key table's hash bytes (one a slot). The
//! file ends on a multiple of 4096.

use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::edge_details::ROW_EDGES;
use super::edge_table::Slot;
use super::key_index::{self, KeySlot, MappedKeys};
use super::node_table::NodeTable;
use super::records::{DetailOffset, MappedRecords, RecordOffset};
use super::{
    ms_since, next_graph_epoch, EdgeCore, EdgeDetails, EdgeTable, KeyIndex, OpenTimings, State,
    OLDEST_SNAPSHOT_STORE_FORMAT, PROJECTION_VERSION, STORE_FORMAT,
};
use crate::error::{Error, Result};
use crate::graph::{AdjEntry, Adjacency, IdSet, Interner};
use crate::mapped::{self, BlockCrcs, Damage, Layered, Limits, Offsets, Plain, Section};
use crate::model::{EdgeId, NodeId};
use crate::packed::{self, BlockHeader, Codebook, Packed};
use crate::projection::Counters;
use crate::storage::Backend;

/// The snapshot's file name in the store directory.
pub(super) const SNAPSHOT_FILE: &str = "state.snapshot";
/// The file a snapshot is written to before it is renamed over [`SNAPSHOT_FILE`].
pub(super) const SNAPSHOT_TMP_FILE: &str = "state.snapshot.tmp";
const MAGIC: &[u8; 8] = b"LOCISNAP";
/// Version of this file's layout.
/// 2: edges by column with validity bounds apart; no adjacency section (rebuilt from edges).
/// 3: edge columns packed (`columns`); node records without their id, labels interned.
/// 4: edge slots, last-seen times and the adjacency in mapped sections after the body, each
///    block with its CRC-32 in the body (`crate::mapped`); no packed columns.
/// 5: the node records, their labels and the key table mapped too; the pinned ids in the body.
/// 6: the edges' details (properties, recorded time, evidence) mapped too, in rows of 16 edges:
///    the snapshot holds the whole derived graph, which no table of the store holds any more.
/// 7: the edge slots, last-seen times and node labels bit-packed in blocks (`crate::packed`).
/// 8: an edge's details like the one before's take one byte (`store/edge_details.rs`).
/// 9: the adjacency's entries a packed column too; packed columns keep each item's fields
///    together; the body gives the number of adjacency entries.
/// 10: the confidences of the edge cores and the entries coded by their rank in a codebook
///    the body carries (`packed::Codebook`); offsets four bytes each where all fit; the key
///    table two thirds full, any length, with a hash byte a slot in a section of its own; a
///    node record's update time as its difference from its creation; edges like the one
///    before that end a row of edge details left out.
pub const SNAPSHOT_FORMAT: u32 = 10;
const HEADER_LEN: usize = 8 + 4 + 4 + 4 + 4 + 4 + 8 + 4 + 8 + 4;
/// Bytes of one validity entry: edge id, valid from, valid to.
const BOUND_ENTRY: usize = 4 + 8 + 8;
/// Meta-table key prefix of the per-commit change records that stores of format 2 and
/// before kept (the ids each commit changed, which an open re-read from the nodes and edges
/// tables); removed when such a store is first opened for writing.
pub(super) const CHANGED_PREFIX: &[u8] = b"changed/";

/// The path of the snapshot of the store in `dir`.
pub(super) fn path_in(dir: &Path) -> PathBuf {
    dir.join(SNAPSHOT_FILE)
}

/// The temporary file a snapshot is written to before it is renamed over [`path_in`].
fn tmp_path_in(dir: &Path) -> PathBuf {
    dir.join(SNAPSHOT_TMP_FILE)
}

/// The CRC-32 of the log record `seq` (0 for none): a snapshot records the one of its last
/// event, so that a snapshot copied from another store with as many events is not taken for
/// this store's.
pub(super) fn log_fingerprint(backend: &dyn Backend, seq: u64) -> Result<u32> {
    Ok(super::log::get(backend, seq)?.map_or(0, |v| crc32fast::hash(&v)))
}

/// Byte boundary each mapped section starts on: a page, so that with the map starting on
/// one every section is aligned for its items.
const SECTION_ALIGN: u64 = 4096;
/// How many mapped sections a snapshot has.
const N: usize = 15;
/// The mapped sections, in their order in the file.
const SECTIONS: [&str; N] = [
    "edge core blocks",
    "edge cores",
    "last seen blocks",
    "last seen",
    "adjacency offsets",
    "adjacency entry blocks",
    "adjacency entries",
    "node record offsets",
    "node records",
    "node label blocks",
    "node labels",
    "key table",
    "edge detail offsets",
    "edge details",
    "key table hash bytes",
];
const CORE_BLOCKS: usize = 0;
const CORES: usize = 1;
const SEEN_BLOCKS: usize = 2;
const SEEN: usize = 3;
const ADJACENCY_OFFSETS: usize = 4;
const ENTRY_BLOCKS: usize = 5;
const ENTRIES: usize = 6;
const RECORD_OFFSETS: usize = 7;
const RECORDS: usize = 8;
const LABEL_BLOCKS: usize = 9;
const LABELS: usize = 10;
const KEY_TABLE: usize = 11;
const DETAIL_OFFSETS: usize = 12;
const DETAILS: usize = 13;
const KEY_TAGS: usize = 14;
/// Bytes of a packed column's block header.
const BLOCK_HEADER: u64 = std::mem::size_of::<BlockHeader>() as u64;
/// Bytes of an item of each section, the offsets' as wide ones.
const ITEM_BYTES: [u64; N] = [
    BLOCK_HEADER,
    1,
    BLOCK_HEADER,
    1,
    8,
    BLOCK_HEADER,
    1,
    8,
    1,
    BLOCK_HEADER,
    1,
    4,
    8,
    1,
    1,
];
/// The sections of offsets, which a snapshot writes narrow (4 bytes) when every offset fits.
const OFFSET_SECTIONS: [usize; 3] = [ADJACENCY_OFFSETS, RECORD_OFFSETS, DETAIL_OFFSETS];

/// Bytes of an item of section `k`, with offsets narrow or not.
fn item_bytes(k: usize, narrow: bool) -> u64 {
    if narrow && OFFSET_SECTIONS.contains(&k) {
        4
    } else {
        ITEM_BYTES[k]
    }
}

/// `at` rounded up to a section boundary.
fn align_up(at: u64) -> Option<u64> {
    Some(at.checked_add(SECTION_ALIGN - 1)? / SECTION_ALIGN * SECTION_ALIGN)
}

/// Where each section starts, and where the file ends, after a body of `body_len` bytes, for
/// sections of `items` items; `None` when a count is too large to lay out.
fn layout(body_len: u64, items: &[u64; N], narrow: bool) -> Option<([u64; N], u64)> {
    let mut at = align_up((HEADER_LEN as u64).checked_add(body_len)?)?;
    let mut starts = [0; N];
    for k in 0..SECTIONS.len() {
        starts[k] = at;
        at = align_up(at.checked_add(items[k].checked_mul(item_bytes(k, narrow))?)?)?;
    }
    Some((starts, at))
}

/// Feeds `items` items given by `item` to `sink` as their bytes, a few thousand at a time.
fn feed_items<T: Plain>(
    items: usize,
    mut item: impl FnMut(usize) -> T,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut chunk = Vec::with_capacity(4096);
    for i in 0..items {
        chunk.push(item(i));
        if chunk.len() == chunk.capacity() {
            sink(mapped::bytes_of(&chunk))?;
            chunk.clear();
        }
    }
    if !chunk.is_empty() {
        sink(mapped::bytes_of(&chunk))?;
    }
    Ok(())
}

/// What the mapped sections of a snapshot of `state` hold: the edge slots and last-seen times
/// of the `edge_slots` edge ids; the adjacency of the `node_rows` node ids as rows laid end
/// to end (their offsets, then their entries: every list as it reads now, whether it still
/// lies in the array it was built in or moved out since); the node records the same way; each
/// node's interned label; the key table (`key_index::key_slots`); and the rows of edge
/// details the same way as the node records, one per 16 edge slots.
struct SectionSource<'a> {
    state: &'a State,
    edge_slots: usize,
    node_rows: usize,
    key_slots: Vec<KeySlot>,
    /// The hash byte of each slot's key.
    key_tags: Vec<u8>,
    /// The block headers and data bytes of the packed columns: edge cores, last-seen times,
    /// adjacency entries (and how many), node labels.
    cores: (Vec<BlockHeader>, u64),
    entries: (Vec<BlockHeader>, u64, u64),
    seen: (Vec<BlockHeader>, u64),
    labels: (Vec<BlockHeader>, u64),
    /// The confidences of the edge cores and the entries, which those columns code.
    confidences: Codebook,
    /// What the other columns are written through: no coding.
    uncoded: Codebook,
    /// Whether the offsets are written in four bytes (every one fits in 32 bits).
    narrow_offsets: bool,
}

/// The items of the packed columns of `state`, by index: its edge slots, each edge's
/// last-seen time, each node's label (`u32::MAX` for an empty slot).
#[allow(clippy::type_complexity)]
fn column_items(
    state: &State,
) -> (
    impl Fn(usize) -> Slot + '_,
    impl Fn(usize) -> i64 + '_,
    impl Fn(usize) -> u32 + '_,
) {
    (
        |i| state.edges.slot(i),
        |i| state.adj.last_seen(EdgeId(i as u32)),
        |n| state.adj.label_of(NodeId(n as u32)).unwrap_or(u32::MAX),
    )
}

/// Rows of edge details that `edge_slots` edge slots take.
fn detail_rows(edge_slots: usize) -> usize {
    edge_slots.div_ceil(ROW_EDGES)
}

impl SectionSource<'_> {
    /// The items of each section.
    fn items(&self) -> [u64; N] {
        let rows = 0..self.node_rows;
        let record_bytes: u64 = rows
            .map(|n| self.state.nodes.record(n).map_or(0, <[u8]>::len) as u64)
            .sum();
        let details = detail_rows(self.edge_slots);
        let detail_bytes: u64 = (0..details)
            .map(|r| self.state.details.row(r).map_or(0, <[u8]>::len) as u64)
            .sum();
        let nodes = self.node_rows as u64;
        let blocks = |p: &(Vec<BlockHeader>, u64)| p.0.len() as u64;
        [
            blocks(&self.cores),
            self.cores.1,
            blocks(&self.seen),
            self.seen.1,
            nodes + 1,
            self.entries.0.len() as u64,
            self.entries.1,
            nodes + 1,
            record_bytes,
            blocks(&self.labels),
            self.labels.1,
            self.key_slots.len() as u64,
            details as u64 + 1,
            detail_bytes,
            self.key_tags.len() as u64,
        ]
    }

    /// Feeds the bytes of section `k` to `sink`, in order.
    fn feed(
        &self,
        k: usize,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let (state, rows) = (self.state, self.node_rows);
        let row = |n: usize| state.adj.entries(NodeId(n as u32));
        let record = |n: usize| state.nodes.record(n).unwrap_or_default();
        let details = detail_rows(self.edge_slots);
        let detail = |r: usize| state.details.row(r).unwrap_or_default();
        let (slot, seen, label) = column_items(state);
        // The offsets of `rows` lists of the lengths `len` gives, and one past the last: four
        // bytes each where every offset fits (`narrow_offsets` says so), else eight.
        let narrow = self.narrow_offsets;
        let offsets = |rows: usize,
                       len: &dyn Fn(usize) -> usize,
                       sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>| {
            let mut at = 0u64;
            let mut next = move |n: usize| {
                let offset = at;
                if n < rows {
                    at += len(n) as u64;
                }
                offset
            };
            if narrow {
                // `narrow_offsets` was judged on the totals the offsets end at; one past 32
                // bits would be a snapshot the open refuses, so it is not written.
                let mut past = false;
                let fed = feed_items(
                    rows + 1,
                    |n| {
                        u32::try_from(next(n)).unwrap_or_else(|_| {
                            past = true;
                            u32::MAX
                        })
                    },
                    sink,
                );
                if past {
                    return Err(std::io::Error::other("an offset past 32 bits"));
                }
                fed
            } else {
                feed_items(rows + 1, next, sink)
            }
        };
        match k {
            CORE_BLOCKS => sink(mapped::bytes_of(&self.cores.0)),
            CORES => {
                let slots = (0..self.edge_slots).map(slot);
                packed::feed_data(&self.cores.0, slots, &self.confidences, sink)
            }
            SEEN_BLOCKS => sink(mapped::bytes_of(&self.seen.0)),
            SEEN => {
                let times = (0..self.edge_slots).map(seen);
                packed::feed_data(&self.seen.0, times, &self.uncoded, sink)
            }
            // From the offsets the state holds, not by decoding each list: a checkpoint
            // checks every mapped block once the write has read them (`State::check_mapped`)
            // and puts nothing in place from a damaged state, so a file whose lists did not
            // all read whole is dropped.
            ADJACENCY_OFFSETS => offsets(rows, &|n| state.adj.degree(NodeId(n as u32)), sink),
            ENTRY_BLOCKS => sink(mapped::bytes_of(&self.entries.0)),
            ENTRIES => {
                let entries = (0..rows).flat_map(row);
                packed::feed_data(&self.entries.0, entries, &self.confidences, sink)
            }
            RECORD_OFFSETS => offsets(rows, &|n| record(n).len(), sink),
            RECORDS => (0..rows).try_for_each(|n| sink(record(n))),
            LABEL_BLOCKS => sink(mapped::bytes_of(&self.labels.0)),
            LABELS => {
                let labels = (0..rows).map(label);
                packed::feed_data(&self.labels.0, labels, &self.uncoded, sink)
            }
            KEY_TABLE => sink(mapped::bytes_of(&self.key_slots)),
            DETAIL_OFFSETS => offsets(details, &|r| detail(r).len(), sink),
            KEY_TAGS => sink(&self.key_tags),
            // DETAILS.
            _ => (0..details).try_for_each(|r| sink(detail(r))),
        }
    }
}

/// A hasher of the blocks of section `k`.
fn block_crcs_for(k: usize, narrow: bool) -> BlockCrcs {
    BlockCrcs::for_items_of(item_bytes(k, narrow) as usize)
}

/// Blocks of section `k` with `items` items.
fn blocks_of(k: usize, items: usize, narrow: bool) -> usize {
    items.div_ceil(mapped::items_per_block(item_bytes(k, narrow) as usize))
}

/// Begins the head of a snapshot of the graph part of `state` (nodes, edge slots, interners,
/// adjacency): room for the header, then the body up to the sections' table, which
/// [`seal_head`] adds with the header once the sections are written (their blocks' CRCs are
/// taken as they are). The sections are written by [`write()`] straight from the state.
fn begin_head(state: &State, sections: &SectionSource<'_>) -> Vec<u8> {
    let mut body = vec![0; HEADER_LEN];
    let strings = |body: &mut Vec<u8>, interner: &Interner| {
        put_u32(body, interner.len() as u32);
        for id in 0..interner.len() as u32 {
            let name = interner.name(id).as_bytes();
            put_u32(body, name.len() as u32);
            body.extend_from_slice(name);
        }
    };
    strings(&mut body, &state.relations);
    strings(&mut body, &state.labels);

    put_u32(&mut body, sections.node_rows as u32);
    put_u32(&mut body, state.nodes.live_count() as u32);
    let pinned: Vec<u32> = state
        .nodes
        .ids()
        .filter(|id| state.adj.is_pinned(id.0))
        .map(|id| id.0)
        .collect();
    put_u32(&mut body, pinned.len() as u32);
    pinned.iter().for_each(|id| put_u32(&mut body, *id));

    put_u32(&mut body, sections.edge_slots as u32);
    put_u32(&mut body, state.edges.live_count() as u32);
    put_u64(&mut body, sections.entries.2);
    let confidences = sections.confidences.values();
    put_u32(&mut body, confidences.len() as u32);
    confidences.iter().for_each(|v| put_u64(&mut body, *v));
    put_u32(&mut body, u32::from(sections.narrow_offsets));
    let bounded: Vec<(EdgeId, EdgeCore)> = state
        .edges
        .bounded()
        .filter_map(|id| Some((id, state.edge_core(id)?)))
        .collect();
    put_u32(&mut body, bounded.len() as u32);
    for (id, c) in &bounded {
        put_u32(&mut body, id.0);
        put_u64(&mut body, c.valid_from as u64);
        put_u64(&mut body, c.valid_to as u64);
    }
    body
}

/// Bytes the sections' table takes: each section's item count, then a CRC for each of its
/// `blocks`.
fn table_len(blocks: &[usize]) -> usize {
    blocks.iter().map(|b| 8 + 4 * b).sum()
}

/// Ends a head [`begin_head`] began: the sections' table (each one's items, then the CRC of
/// each of its blocks, whose number follows from the items), then the header over the room
/// left for it (`log` is the [`log_fingerprint`] of the state's last event).
fn seal_head(
    mut body: Vec<u8>,
    state: &State,
    log: u32,
    items: &[u64; N],
    crcs: &[Vec<u32>],
) -> Vec<u8> {
    for (n, crcs) in items.iter().zip(crcs) {
        put_u64(&mut body, *n);
        crcs.iter().for_each(|c| put_u32(&mut body, *c));
    }

    let c = state.counters;
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(MAGIC);
    put_u32(&mut header, SNAPSHOT_FORMAT);
    put_u32(&mut header, STORE_FORMAT);
    put_u32(&mut header, PROJECTION_VERSION);
    put_u32(&mut header, c.next_node);
    put_u32(&mut header, c.next_edge);
    put_u64(&mut header, c.last_seq);
    put_u32(&mut header, log);
    put_u64(&mut header, (body.len() - HEADER_LEN) as u64);
    put_u32(&mut header, crc32fast::hash(&body[HEADER_LEN..]));
    body[..HEADER_LEN].copy_from_slice(&header);
    body
}

/// Writes a snapshot of `state` for the store in `dir` (`log` is the [`log_fingerprint`] of
/// its last event) to a temporary file, synced: [`Unplaced::put_in_place`] renames it over
/// the previous one and syncs the directory, so a crash leaves the old or the new snapshot,
/// never half of one. In between the caller checks what the write read (the blocks of the
/// map the state reads: `State::check_mapped`). The sections go from the state to the file a
/// few thousand items at a time: a copy of them in memory would be the adjacency's size
/// again. Each block's CRC is taken as it goes by, and the head that holds them written over
/// the file's start last.
///
/// The previous file is replaced, never written to: a store that maps it (this process or a
/// reader) keeps reading the file it mapped.
///
/// A write that fails (a full disk, a directory in the snapshot's place), or whose file is
/// dropped unplaced, removes its temporary file: it would otherwise stay, the state's size,
/// after every attempt.
pub(super) fn write(dir: &Path, state: &State, log: u32) -> Result<Unplaced> {
    #[cfg(test)]
    if let Some(change) = AT_WRITE_START.with(|hook| hook.borrow_mut().take()) {
        change();
    }
    if cfg!(target_endian = "big") {
        // The sections are the items as memory holds them; a big-endian file would pass
        // every check on a little-endian machine with its floats and times swapped.
        return Err(Error::Store {
            path: dir.to_path_buf(),
            message: "state snapshots are written on little-endian machines only".into(),
        });
    }
    let started = Instant::now();
    let (sections, items) = plan_sections(state);
    check_writable(dir, &sections)?;
    let planned = started.elapsed();
    // Made before the file, so that an error or a panic past here removes it.
    let mut unplaced = Unplaced {
        tmp: tmp_path_in(dir),
        path: path_in(dir),
        dir: dir.to_path_buf(),
        len: 0,
        placed: false,
    };
    let tmp = unplaced.tmp.clone();
    let (len, written, synced) =
        write_file(&tmp, state, log, &sections, &items, started).map_err(|e| Error::io(&tmp, e))?;
    unplaced.len = len;
    tracing::debug!(
        len,
        planned_ms = planned.as_secs_f64() * 1e3,
        written_ms = written.as_secs_f64() * 1e3,
        synced_ms = synced.as_secs_f64() * 1e3,
        "snapshot file written"
    );
    Ok(unplaced)
}

/// Plans every section of `state`: the confidences' codebook, the key table, each packed
/// column's block headers, and the offsets' width; and counts each section's items.
fn plan_sections(state: &State) -> (SectionSource<'_>, [u64; N]) {
    let (edge_slots, node_rows) = (state.edges.slot_bound(), state.nodes.slot_bound());
    let (slot, seen, label) = column_items(state);
    let entries = || (0..node_rows).flat_map(|n| state.adj.entries(NodeId(n as u32)));
    // Each plan is a pass over a column, most of them read from the last snapshot's map; a
    // load writes a snapshot each time it triples, under its writer lock, so they go on both
    // cores in pairs of about equal work.
    let (confidences, (key_slots, key_tags)) = rayon::join(
        || {
            Codebook::collect(
                packed::coded_values((0..edge_slots).map(&slot))
                    .chain(packed::coded_values(entries())),
            )
        },
        || key_index::key_slots(&state.nodes),
    );
    let uncoded = Codebook::default();
    let ((cores, (seen, labels)), entries) = rayon::join(
        || {
            (
                packed::plan(edge_slots, &slot, &confidences),
                (
                    packed::plan(edge_slots, seen, &uncoded),
                    packed::plan(node_rows, label, &uncoded),
                ),
            )
        },
        || packed::plan_run(entries(), &confidences),
    );
    let mut sections = SectionSource {
        state,
        edge_slots,
        node_rows,
        key_slots,
        key_tags,
        cores,
        entries,
        seen,
        labels,
        confidences,
        uncoded,
        narrow_offsets: false,
    };
    // Counted once (a pass over every node record's and edge-detail row's length): what the
    // offsets' width is judged on, and the body's table of sections.
    let items = sections.items();
    let most = u64::from(u32::MAX);
    sections.narrow_offsets =
        sections.entries.2 <= most && items[RECORDS] <= most && items[DETAILS] <= most;
    (sections, items)
}

/// Refuses to write what an open would refuse (`read_body`) or read back as damage.
fn check_writable(dir: &Path, sections: &SectionSource<'_>) -> Result<()> {
    let refuse = |message: String| Error::Store {
        path: dir.to_path_buf(),
        message,
    };
    // Such a snapshot would be replaced by a replay of the whole log at every open,
    // unnoticed.
    if sections.entries.2 > 2 * sections.edge_slots as u64 {
        return Err(refuse(format!(
            "the adjacency holds {} entries for {} edge slots; no snapshot written",
            sections.entries.2, sections.edge_slots
        )));
    }
    // Every confidence was collected from the same items the columns are written from; one
    // missing would read back as damage.
    if sections.confidences.missed() {
        return Err(refuse(
            "a confidence missing from the snapshot's codebook; no snapshot written".into(),
        ));
    }
    Ok(())
}

/// Writes the snapshot to `tmp` and syncs it: room for the head, the sections each on its
/// page, then the head over the start. Gives the file's length and the times, since
/// `started`, at which it was written and synced.
fn write_file(
    tmp: &Path,
    state: &State,
    log: u32,
    sections: &SectionSource<'_>,
    items: &[u64; N],
    started: Instant,
) -> std::io::Result<(u64, std::time::Duration, std::time::Duration)> {
    // The head holds each block's CRC, known once the block is written: the file begins
    // with room for the head, written over at the end. (The CRCs had taken a pass of their
    // own, encoding every section once more: a quarter of a 10M-edge snapshot's time.)
    let blocks: Vec<usize> = (0..SECTIONS.len())
        .map(|k| blocks_of(k, items[k] as usize, sections.narrow_offsets))
        .collect();
    let head = begin_head(state, sections);
    let head_len = head.len() + table_len(&blocks);
    let file = std::fs::File::create(tmp)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    out.write_all(&vec![0; head_len])?;
    let mut at = head_len as u64;
    let mut crcs = Vec::with_capacity(SECTIONS.len());
    let pad = |out: &mut std::io::BufWriter<std::fs::File>, at: &mut u64| {
        let to = align_up(*at).unwrap_or(*at);
        let zeros = [0u8; SECTION_ALIGN as usize];
        out.write_all(&zeros[..(to - *at) as usize])?;
        *at = to;
        Ok::<_, std::io::Error>(())
    };
    for k in 0..SECTIONS.len() {
        pad(&mut out, &mut at)?;
        let mut blocks = block_crcs_for(k, sections.narrow_offsets);
        sections.feed(k, &mut |b| {
            at += b.len() as u64;
            blocks.push(b);
            out.write_all(b)
        })?;
        crcs.push(blocks.finish());
    }
    pad(&mut out, &mut at)?;
    // A section fed other than its items said would have its blocks elsewhere than the
    // head says (an open reads as many CRCs as the items imply): nothing is written.
    if let Some(k) = (0..SECTIONS.len()).find(|&k| crcs[k].len() != blocks[k]) {
        return Err(std::io::Error::other(format!(
            "section {k} of the snapshot came to {} blocks, not the {} its items imply",
            crcs[k].len(),
            blocks[k]
        )));
    }
    let head = seal_head(head, state, log, items, &crcs);
    if head.len() != head_len {
        return Err(std::io::Error::other(format!(
            "the snapshot's head took {} bytes, not the {head_len} its sections were placed after",
            head.len()
        )));
    }
    let mut file = out.into_inner().map_err(|e| e.into_error())?;
    file.seek(std::io::SeekFrom::Start(0))?;
    file.write_all(&head)?;
    let written = started.elapsed();
    file.sync_all()?;
    Ok((at, written, started.elapsed()))
}

/// A snapshot written and synced under its temporary name, not yet in place. Dropped, it is
/// removed.
#[must_use = "a snapshot not put in place is removed when dropped"]
pub(super) struct Unplaced {
    tmp: PathBuf,
    path: PathBuf,
    dir: PathBuf,
    len: u64,
    placed: bool,
}

impl Unplaced {
    /// Renames the file over the store's snapshot and syncs the directory; gives its length.
    pub(super) fn put_in_place(mut self) -> Result<u64> {
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::io(&self.tmp, e))?;
        self.placed = true;
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(self.len)
    }
}

impl Drop for Unplaced {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Run at the start of this thread's next [`write`]: a change a test makes to the file
    /// under the map before the write reads it.
    pub(super) static AT_WRITE_START: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { std::cell::RefCell::new(None) };
}

/// Removes the temporary file of a snapshot write that did not finish (the process died in
/// it), if any: it is never read, and it holds up to a snapshot's size. Only the writer's
/// open calls this; a reader's could remove a file another process is writing.
pub(super) fn remove_unfinished(dir: &Path) {
    let tmp = tmp_path_in(dir);
    match std::fs::remove_file(&tmp) {
        Ok(()) => tracing::info!(path = %tmp.display(), "removed a snapshot left half written"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(path = %tmp.display(), error = %e, "a snapshot left half written could not be removed")
        }
    }
}

/// Removes the snapshot of the store in `dir`, if any: whatever is at its path, since every
/// open reads past a path that is not a regular file (a directory there is the store's
/// damage, and a snapshot is written there afresh).
pub(super) fn remove(dir: &Path) -> Result<()> {
    let path = path_in(dir);
    let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
    let removed = if is_dir {
        std::fs::remove_dir_all(&path)
    } else {
        std::fs::remove_file(&path)
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// What a snapshot says of the store it was taken from.
#[derive(Clone, Copy)]
pub(super) struct Header {
    pub counters: Counters,
    /// The [`log_fingerprint`] of its last event.
    pub log: u32,
}

/// Why a snapshot was not used (logged; the state is then replayed from the log).
pub(super) type Unusable = String;

/// Reads the snapshot of the store in `dir`: `Ok(None)` when there is none, `Err(reason)`
/// when it cannot be used. The state it gives has no counters, folds or deletions: those are
/// read from the meta table by the caller.
///
/// `fits` judges the header before the body is read: a snapshot of another store, or one
/// the store has moved past in a way the log cannot catch up, is refused from its first
/// bytes, not after a read and a decode of the whole file.
pub(super) fn read(
    dir: &Path,
    timings: &mut OpenTimings,
    fits: &mut dyn FnMut(&Header) -> std::result::Result<(), Unusable>,
) -> std::result::Result<Option<(Header, State)>, Unusable> {
    let path = path_in(dir);
    let t = Instant::now();
    let (file, head) = match read_head(&path, fits) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    timings.snapshot_read = ms_since(t);
    decode(&head, &file, timings)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The log position the state snapshot of the store in `dir` reflects, from its header
/// alone; `None` when there is none or its header cannot be read.
pub(super) fn reflected_seq(dir: &Path) -> Option<u64> {
    let mut seq = None;
    // Refused from the header, so that the body is never read.
    let _ = read_head(&path_in(dir), &mut |h: &Header| {
        seq = Some(h.counters.last_seq);
        Err("only the header is read".into())
    });
    seq
}

/// The open file at `path` and its header and body, read into an anonymous memory map
/// rather than the heap: the body is dropped as soon as it is decoded, and memory unmapped
/// goes back to the system at once, where an allocator may keep a freed block resident for a
/// while (mimalloc, which the binary uses, holds it a second). The magic and the body length
/// of the header are checked against the file first, so that a foreign or sparse file of any
/// size costs one small read, not its size in memory. The sections after the body are mapped
/// by [`decode`], from the same open file.
fn read_head(
    path: &Path,
    fits: &mut dyn FnMut(&Header) -> std::result::Result<(), Unusable>,
) -> std::io::Result<(std::fs::File, memmap2::MmapMut)> {
    use std::io::Read;
    let unusable = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    let mut file = crate::storage::open_regular_file(path)?;
    let meta = file.metadata()?;
    let len = meta.len();
    let mut header = [0u8; HEADER_LEN];
    if len < HEADER_LEN as u64 {
        return Err(unusable(format!("{len} bytes, shorter than a header")));
    }
    file.read_exact(&mut header)?;
    let (fields, body_len, _) = read_header(&mut Reader {
        bytes: &header,
        at: 0,
    })
    .map_err(unusable)?;
    let head_len = body_len
        .checked_add(HEADER_LEN as u64)
        .filter(|h| *h <= len)
        .ok_or_else(|| {
            unusable(format!(
                "{len} bytes: a header of {HEADER_LEN} and a body of {body_len}, it says"
            ))
        })?;
    fits(&fields).map_err(unusable)?;
    let head_len = usize::try_from(head_len)
        .map_err(|_| std::io::Error::other("larger than this machine's address space"))?;
    let mut map = memmap2::MmapMut::map_anon(head_len)?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    map[..HEADER_LEN].copy_from_slice(&header);
    file.read_exact(&mut map[HEADER_LEN..])?;
    Ok((file, map))
}

/// The header at the start of `r`, checked for the magic and this build's formats: what it
/// says of the store, the body's length and the body's checksum. The open reads it alone
/// first (to refuse a foreign, stale or other-format snapshot before the body) and the decode
/// reads it again at the start of the whole file.
fn read_header(r: &mut Reader<'_>) -> std::result::Result<(Header, u64, u32), Unusable> {
    if r.take(8)? != MAGIC {
        return Err("not a loci snapshot (magic)".into());
    }
    let format = r.u32()?;
    if format != SNAPSHOT_FORMAT {
        return Err(format!(
            "snapshot format {format}, this build reads {SNAPSHOT_FORMAT}"
        ));
    }
    let store = r.u32()?;
    let projection = r.u32()?;
    if !(OLDEST_SNAPSHOT_STORE_FORMAT..=STORE_FORMAT).contains(&store)
        || projection != PROJECTION_VERSION
    {
        return Err(format!(
            "made for store format {store} and derivation rules {projection}, this build uses {STORE_FORMAT} and {PROJECTION_VERSION}"
        ));
    }
    let counters = Counters {
        next_node: r.u32()?,
        next_edge: r.u32()?,
        last_seq: r.u64()?,
    };
    let log = r.u32()?;
    let len = r.u64()?;
    let crc = r.u32()?;
    Ok((Header { counters, log }, len, crc))
}

/// What the body of a snapshot says, checked: the names, counts, pinned nodes, validity
/// bounds (raw), and each section's items and block checksums.
struct Body<'a> {
    header: Header,
    len: u64,
    relations: Interner,
    labels: Interner,
    slots: usize,
    live_nodes: usize,
    pinned: IdSet,
    edge_slots: usize,
    live_edges: usize,
    /// Entries in the adjacency's lists.
    entries: u64,
    /// The confidences the edge cores and the entries code.
    confidences: Codebook,
    /// Whether the offsets are four bytes each.
    narrow_offsets: bool,
    bounds: &'a [u8],
    items: [u64; N],
    crcs: [Vec<u32>; N],
}

/// Reads and checks the header and body at the start of `head`.
fn read_body(head: &[u8]) -> std::result::Result<Body<'_>, Unusable> {
    let mut r = Reader { bytes: head, at: 0 };
    let (header, len, crc) = read_header(&mut r)?;
    let body = r.rest();
    if body.len() as u64 != len {
        return Err(format!(
            "body is {} bytes, the header says {len}",
            body.len()
        ));
    }
    if crc32fast::hash(body) != crc {
        return Err("checksum mismatch".into());
    }
    let mut r = Reader { bytes: body, at: 0 };
    let relations = r.interner("relation")?;
    let labels = r.interner("label")?;
    // The sections' size is not bounded by the body, so the numbers of node and edge slots
    // are bounded by the store's own counters (which the header was judged against). A node
    // slot past the ids made would be handed out again by the next ingest, over a node the
    // snapshot's edges still join.
    let (slots, live_nodes) = r.slots(header.counters.next_node, "node")?;
    let pinned_count = r.count(4, "pinned nodes")?;
    let mut pinned = IdSet::default();
    for _ in 0..pinned_count {
        let id = r.u32()?;
        if id as usize >= slots {
            return Err(format!("pinned node {id}, past the node slots"));
        }
        pinned.insert(id);
    }
    let (edge_slots, live_edges) = r.slots(header.counters.next_edge, "edge")?;
    // Each edge slot has at most its two sides in the lists.
    let entries = r.u64()?;
    if entries > 2 * edge_slots as u64 {
        return Err(format!(
            "{entries} adjacency entries for {edge_slots} edge slots"
        ));
    }
    let codes = r.count(8, "confidences")?;
    let confidences = (0..codes)
        .map(|_| r.u64())
        .collect::<Result<Vec<u64>, _>>()?;
    // Each a confidence's `f32` bits: a wider one would be cut short as it is read.
    if confidences.iter().any(|v| *v > u64::from(u32::MAX)) {
        return Err("a confidence of more than 32 bits".into());
    }
    let confidences = Codebook::read(confidences)?;
    let narrow_offsets = match r.u32()? {
        0 => false,
        1 => true,
        other => return Err(format!("offsets {other} wide")),
    };
    let bounds = r.count(BOUND_ENTRY, "validity bounds")?;
    let bounds = r.take(bounds * BOUND_ENTRY)?;
    let mut items = [0u64; N];
    let mut crcs: [Vec<u32>; N] = Default::default();
    for k in 0..SECTIONS.len() {
        items[k] = r.u64()?;
        let n = usize::try_from(items[k])
            .map_err(|_| format!("{}: {} items", SECTIONS[k], items[k]))?;
        let blocks = blocks_of(k, n, narrow_offsets);
        let raw = r.take(blocks.checked_mul(4).ok_or("too many blocks")?)?;
        crcs[k] = raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
    }
    if !r.rest().is_empty() {
        return Err("bytes after the sections' table".into());
    }
    Ok(Body {
        header,
        len,
        relations,
        labels,
        slots,
        live_nodes,
        pinned,
        edge_slots,
        live_edges,
        entries,
        confidences,
        narrow_offsets,
        bounds,
        items,
        crcs,
    })
}

/// The bytes each mapped section of the snapshot of the store in `dir` takes, by name, in
/// their order in the file: where the snapshot's bytes go. Empty when there is none, or it
/// cannot be read.
pub(super) fn section_bytes(dir: &Path) -> Vec<(&'static str, u64)> {
    let Ok((_, head)) = read_head(&path_in(dir), &mut |_| Ok(())) else {
        return Vec::new();
    };
    match read_body(&head) {
        Ok(body) => SECTIONS
            .iter()
            .enumerate()
            .map(|(k, name)| {
                let size = item_bytes(k, body.narrow_offsets);
                (*name, body.items[k].saturating_mul(size))
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Decodes a snapshot whose header and body are `head` and maps its sections from `file`.
/// Everything an index is later taken from is checked: the body here (its checksum and every
/// count), the sections block by block as they are first read (`crate::mapped`), so that no
/// damaged or crafted file can make a traversal index out of bounds.
fn decode(
    head: &[u8],
    file: &std::fs::File,
    timings: &mut OpenTimings,
) -> std::result::Result<(Header, State), Unusable> {
    let t = Instant::now();
    let mut body = read_body(head)?;
    check_section_counts(&body)?;
    let (map, starts) = map_sections(file, &body)?;
    let opened = Arc::clone(&map);
    let damage = Arc::new(Damage::default());
    damage.ask_for_whole_blocks(true);
    let sections = SectionReader::new(map, starts, &mut body, damage.clone()).read_all(&body)?;
    sections.check_row_ends(&body)?;
    let bounds = validity_bounds(body.bounds, body.edge_slots)?;
    timings.snapshot_read += ms_since(t);
    let state = assemble(body, sections, bounds, damage.clone(), timings);
    // Opened, the map reads ahead again and blocks are no longer asked for alone: a
    // traversal's first pass over a cold store then brings in its neighbours' pages with
    // each fault, as the benchmarks were measured.
    damage.ask_for_whole_blocks(false);
    #[cfg(unix)]
    let _ = opened.advise(memmap2::Advice::Normal);
    state
}

/// Refuses a body whose sections' item counts are not the ones its own counts imply.
fn check_section_counts(body: &Body<'_>) -> std::result::Result<(), Unusable> {
    let items = &body.items;
    let nodes = body.slots as u64;
    let details = detail_rows(body.edge_slots) as u64;
    let blocks = |n: usize| n.div_ceil(packed::BLOCK) as u64;
    let expected = [
        blocks(body.edge_slots),
        items[CORES],
        blocks(body.edge_slots),
        items[SEEN],
        nodes + 1,
        (body.entries as usize).div_ceil(<AdjEntry as packed::Packable>::BLOCK) as u64,
        items[ENTRIES],
        nodes + 1,
        items[RECORDS],
        blocks(body.slots),
        items[LABELS],
        items[KEY_TABLE],
        details + 1,
        items[DETAILS],
        items[KEY_TABLE],
    ];
    if *items != expected {
        return Err(format!(
            "sections of {items:?} items, where the body implies {expected:?}"
        ));
    }
    Ok(())
}

/// Maps `file`, once its length is the one the body and its sections take, and gives each
/// section's byte start.
fn map_sections(
    file: &std::fs::File,
    body: &Body<'_>,
) -> std::result::Result<(Arc<memmap2::Mmap>, [u64; N]), Unusable> {
    let items = &body.items;
    let (starts, end) = layout(body.len, items, body.narrow_offsets)
        .ok_or_else(|| format!("sections of {items:?} items overflow"))?;
    let file_len = file.metadata().map_err(|e| e.to_string())?.len();
    if file_len != end {
        return Err(format!(
            "{file_len} bytes, where the body and its sections take {end}"
        ));
    }
    // SAFETY: the file is a regular file (checked by `read_head`) that loci never writes
    // once renamed into place (a new snapshot is a new file), and every read of the map goes
    // through a checked section. What mapping cannot guard against is another program
    // truncating the file while the store is open, which would fault the process; tantivy
    // maps the text index's files the same way.
    let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| e.to_string())?;
    if map.len() as u64 != end {
        return Err("the file changed while it was opened".into());
    }
    // The open's reads of the map are few and scattered, and each block is asked for whole
    // at its first read (`Section::will_need`). With the system's read-ahead a cold open of
    // a 100M-edge store read 49 MB of the snapshot, on a disk set to read 8 MB ahead, and
    // 1.6 MB without it (snapshot stage 48-51 ms, then 5.3-6.2). `decode` gives the map its
    // read-ahead back once the state is assembled.
    #[cfg(unix)]
    let _ = map.advise(memmap2::Advice::Random);
    let map = Arc::new(map);
    Ok((map, starts))
}

/// The mapped sections, opened (not read) in file order.
struct Sections {
    edge_cores: Packed<Slot>,
    seen: Packed<i64>,
    offsets: Offsets<u64>,
    entries: Packed<AdjEntry>,
    record_offsets: Offsets<RecordOffset>,
    records: Section<u8>,
    label_of: Packed<u32>,
    key_slots: Section<KeySlot>,
    detail_offsets: Offsets<DetailOffset>,
    detail_bytes: Section<u8>,
    key_tags: Section<u8>,
}

impl Sections {
    /// Reads the ends of the rows, a block or two, so that a snapshot whose rows do not cover
    /// what they index is refused rather than read.
    fn check_row_ends(&self, body: &Body<'_>) -> std::result::Result<(), Unusable> {
        let details = detail_rows(body.edge_slots);
        if self.offsets.get(0) != Some(0) || self.offsets.get(body.slots) != Some(body.entries) {
            return Err("the adjacency's offsets do not span its entries".into());
        }
        if self.record_offsets.get(0) != Some(0)
            || self.record_offsets.get(body.slots) != Some(body.items[RECORDS])
        {
            return Err("the node records' offsets do not span them".into());
        }
        if self.detail_offsets.get(0) != Some(0)
            || self.detail_offsets.get(details) != Some(body.items[DETAILS])
        {
            return Err("the edge details' offsets do not span them".into());
        }
        Ok(())
    }
}

/// Opens a snapshot's sections one after another, in the order of [`SECTIONS`], each with its
/// block checksums.
struct SectionReader {
    map: Arc<memmap2::Mmap>,
    starts: [u64; N],
    items: [u64; N],
    crcs: std::array::IntoIter<Vec<u32>, N>,
    next: usize,
    limits: Limits,
    damage: Arc<Damage>,
    /// The confidences the edge cores and the entries code; columns of no coded field read
    /// through `uncoded`.
    confidences: Arc<Codebook>,
    uncoded: Arc<Codebook>,
}

impl SectionReader {
    fn new(
        map: Arc<memmap2::Mmap>,
        starts: [u64; N],
        body: &mut Body<'_>,
        damage: Arc<Damage>,
    ) -> Self {
        SectionReader {
            map,
            starts,
            items: body.items,
            crcs: std::mem::take(&mut body.crcs).into_iter(),
            next: 0,
            limits: Limits {
                nodes: body.slots as u32,
                edges: body.edge_slots as u32,
                relations: body.relations.len() as u32,
                labels: body.labels.len() as u32,
                entries: body.entries,
                record_bytes: body.items[RECORDS],
                detail_bytes: body.items[DETAILS],
            },
            damage,
            confidences: Arc::new(std::mem::take(&mut body.confidences)),
            uncoded: Arc::new(Codebook::default()),
        }
    }

    fn read_all(mut self, body: &Body<'_>) -> std::result::Result<Sections, Unusable> {
        let narrow = body.narrow_offsets;
        let confidences = self.confidences.clone();
        let uncoded = self.uncoded.clone();
        Ok(Sections {
            edge_cores: self.column(body.edge_slots, &confidences)?,
            seen: self.column(body.edge_slots, &uncoded)?,
            offsets: self.offsets(narrow)?,
            entries: self.column(body.entries as usize, &confidences)?,
            record_offsets: self.offsets(narrow)?,
            records: self.section()?,
            label_of: self.column(body.slots, &uncoded)?,
            key_slots: self.section()?,
            detail_offsets: self.offsets(narrow)?,
            detail_bytes: self.section()?,
            key_tags: self.section()?,
        })
    }

    fn section<T: Plain>(&mut self) -> std::result::Result<Section<T>, Unusable> {
        let k = self.next;
        self.next += 1;
        let crcs = self.crcs.next().unwrap_or_default();
        Section::new(
            self.map.clone(),
            self.starts[k] as usize,
            self.items[k] as usize,
            crcs,
            self.limits,
            self.damage.clone(),
            SECTIONS[k],
        )
    }

    /// A packed column of `len` items: its block headers, then its bits, coded by `codebook`.
    fn column<T: packed::Packable>(
        &mut self,
        len: usize,
        codebook: &Arc<Codebook>,
    ) -> std::result::Result<Packed<T>, Unusable> {
        let headers = self.section()?;
        let bits = self.section()?;
        Packed::new(
            headers,
            bits,
            len,
            self.limits,
            self.damage.clone(),
            codebook.clone(),
        )
    }

    /// Offsets, four bytes each or eight as the body says.
    fn offsets<O: mapped::Offset>(
        &mut self,
        narrow: bool,
    ) -> std::result::Result<Offsets<O>, Unusable> {
        Ok(if narrow {
            Offsets::Narrow(self.section()?)
        } else {
            Offsets::Wide(self.section()?)
        })
    }
}

/// The validity bounds of the edges that have them, each refused past the edge slots.
fn validity_bounds(
    bounds: &[u8],
    edge_slots: usize,
) -> std::result::Result<std::collections::BTreeMap<EdgeId, (i64, i64)>, Unusable> {
    let mut bound_map = std::collections::BTreeMap::new();
    for b in bounds.chunks_exact(BOUND_ENTRY) {
        let id = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if id as usize >= edge_slots {
            return Err(format!(
                "validity bounds for edge {id}, past the edge slots"
            ));
        }
        let from = i64::from_le_bytes(b[4..12].try_into().unwrap_or_default());
        let to = i64::from_le_bytes(b[12..20].try_into().unwrap_or_default());
        bound_map.insert(EdgeId(id), (from, to));
    }
    Ok(bound_map)
}

/// The header, and the state over the mapped sections: node and key tables, edges, details,
/// adjacency.
fn assemble(
    body: Body<'_>,
    sections: Sections,
    bounds: std::collections::BTreeMap<EdgeId, (i64, i64)>,
    damage: Arc<Damage>,
    timings: &mut OpenTimings,
) -> std::result::Result<(Header, State), Unusable> {
    let t = Instant::now();
    let node_keys = KeyIndex::mapped(MappedKeys {
        slots: sections.key_slots,
        tags: sections.key_tags,
    })?;
    let nodes = NodeTable::mapped(
        MappedRecords {
            offsets: sections.record_offsets,
            bytes: sections.records,
        },
        body.live_nodes,
    );
    timings.snapshot_nodes = ms_since(t);
    let t = Instant::now();
    let edges = EdgeTable::mapped(sections.edge_cores, body.live_edges, bounds);
    let details = EdgeDetails::mapped(
        MappedRecords {
            offsets: sections.detail_offsets,
            bytes: sections.detail_bytes,
        },
        damage.clone(),
    );
    let adj = Adjacency::mapped(
        sections.offsets,
        sections.entries,
        Layered::mapped(sections.seen),
        Layered::mapped(sections.label_of),
        body.pinned,
        body.live_nodes,
        body.live_edges,
    );
    timings.snapshot_edges = ms_since(t);
    let state = State {
        nodes,
        node_keys,
        edges,
        details,
        relations: body.relations,
        labels: body.labels,
        adj,
        mapped_damage: Some(damage),
        ids_epoch: next_graph_epoch(),
        graph_epoch: next_graph_epoch(),
        ..State::default()
    };
    Ok((body.header, state))
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A bounds-checked cursor: every read of a damaged file ends in an error, not a panic.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], Unusable> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or_else(|| format!("truncated at byte {} (wanted {n} more)", self.at))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> std::result::Result<u32, Unusable> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> std::result::Result<u64, Unusable> {
        let b = self.take(8)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = &self.bytes[self.at..];
        self.at = self.bytes.len();
        s
    }
    /// A count of items of at least `min_size` bytes each, refused when the rest of the file
    /// cannot hold that many (so a damaged count never makes a huge allocation).
    fn count(&mut self, min_size: usize, what: &str) -> std::result::Result<usize, Unusable> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size) > self.bytes.len() - self.at {
            return Err(format!("{what}: {n} do not fit in the file"));
        }
        Ok(n)
    }
    /// A number of `what` slots, at most the `made` ids the store has handed out, then how
    /// many of them are live (at most the slots).
    fn slots(&mut self, made: u32, what: &str) -> std::result::Result<(usize, usize), Unusable> {
        let slots = self.u32()?;
        if slots > made {
            return Err(format!(
                "{slots} {what} slots, past the {made} {what} ids made"
            ));
        }
        let live = self.u32()?;
        if live > slots {
            return Err(format!("{live} live {what}s in {slots} slots"));
        }
        Ok((slots as usize, live as usize))
    }

    fn interner(&mut self, what: &str) -> std::result::Result<Interner, Unusable> {
        let n = self.count(4, what)?;
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            let len = self.u32()? as usize;
            let name = std::str::from_utf8(self.take(len)?)
                .map_err(|_| format!("{what} name is not UTF-8"))?;
            names.push(name.to_string());
        }
        Interner::from_names(names).ok_or_else(|| format!("{what} names repeat"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Node;

    fn state_of(nodes: u32, next_node: u32) -> State {
        let mut state = State::default();
        for i in 0..nodes {
            state.put_node(&Node::bare(i, &format!("n{i}"), "Place"));
        }
        state.counters.next_node = next_node;
        state
    }

    /// The reason an open of `state`'s snapshot (written to a temporary directory) gives,
    /// if it refuses it.
    fn refusal(state: &State) -> Option<Unusable> {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), state, 0).unwrap().put_in_place().unwrap();
        read(dir.path(), &mut OpenTimings::default(), &mut |_| Ok(())).err()
    }

    /// A crafted snapshot (its checksum right) with a node in a slot the store has not handed
    /// out: the next ingest would make a node with that id over it, joined by the snapshot's
    /// edges. Refused.
    #[test]
    fn node_slots_past_the_ids_made_are_refused() {
        assert_eq!(refusal(&state_of(3, 3)), None);
        let why = refusal(&state_of(3, 2)).unwrap();
        assert!(
            why.contains("3 node slots, past the 2 node ids made"),
            "{why}"
        );
    }

    /// The sections start on page boundaries and the file ends on one, wherever the body ends.
    #[test]
    fn sections_are_laid_out_on_page_boundaries() {
        let (starts, end) =
            layout(10, &[3, 100, 3, 0, 2, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1], false).unwrap();
        assert_eq!(
            starts,
            [
                4096, 8192, 12288, 16384, 16384, 20480, 24576, 24576, 24576, 24576, 28672, 28672,
                32768, 36864, 36864
            ]
        );
        assert_eq!(end, 40960);
        // Narrow offsets take four bytes: 2,000 of them one page, not four.
        let mut items = [0; N];
        items[ADJACENCY_OFFSETS] = 2_000;
        let (narrow, _) = layout(0, &items, true).unwrap();
        let (wide, _) = layout(0, &items, false).unwrap();
        assert_eq!(narrow[ENTRY_BLOCKS] - narrow[ADJACENCY_OFFSETS], 8192);
        assert_eq!(wide[ENTRY_BLOCKS] - wide[ADJACENCY_OFFSETS], 16384);
        let mut items = [0; N];
        items[CORE_BLOCKS] = 1000;
        let (starts, end) = layout(5000, &items, false).unwrap();
        assert_eq!(starts[0], 8192);
        assert_eq!(
            starts[1],
            (8192 + 1000 * BLOCK_HEADER).div_ceil(4096) * 4096
        );
        assert_eq!(end % 4096, 0);
        items[CORE_BLOCKS] = u64::MAX / 4;
        assert!(layout(0, &items, false).is_none());
    }
}
