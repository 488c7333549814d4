//! The derived in-memory state, persisted: one file (`state.snapshot`) that records the log
//! position it reflects, so that an open reads it and catches up instead of rebuilding the
//! state from the nodes and edges tables (1.9 s at 1M edges).
//!
//! Catching up needs to know which nodes and edges changed after the snapshot. Every commit
//! writes that list to the meta table (`changed/` + its last seq, see [`ChangedIds`]); an open
//! reads the records after the snapshot's seq, and re-reads exactly those nodes and edges from
//! their tables (which always hold the latest state). The records must cover every event after
//! the snapshot without a gap, or the snapshot is not used. A checkpoint writes a new snapshot
//! and prunes the records it covers.
//!
//! A missing, damaged (checksum), other-version or unusable snapshot is never an error: the
//! state is loaded from the tables as before (and `replay --verify` compares whatever was
//! loaded with the replay of the log). The file is read into memory rather than mapped: its
//! contents are copied into owned structures at once, and a mapping of a file that another
//! process truncates would end this one with SIGBUS, which a library must not risk.
//!
//! Layout (little-endian): `LOCISNAP`, snapshot format (u32), store format (u32), projection
//! version (u32), counters (next node u32, next edge u32, last seq u64), the fingerprint of
//! the log record at that seq (u32, see [`log_fingerprint`]), body length (u64), CRC-32 of
//! the body (u32); then the body: relation names, label names, node slots (each a length and
//! the node's record as `store/node_table.rs` keeps it: the salience as f32, then postcard
//! of the rest, its id the slot, its label interned; at most the header's next node id of
//! them), the number of edge slots (at most the header's next edge id), the edge table by
//! packed column (`columns`: from, to, relation + 1 with 0 for a free slot, confidence and
//! salience as their bits, last seen), and the validity bounds of the edges that have one
//! (id u32, from i64, to i64). The adjacency is not stored: it is rebuilt from the edges, in
//! id order.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::columns::{self, Column};
use super::node_table::{self, NodeTable};
use super::{
    ms_since, next_graph_epoch, EdgeCore, EdgeTable, KeyIndex, OpenTimings, State,
    PROJECTION_VERSION, STORE_FORMAT,
};
use crate::error::{Error, Result};
use crate::graph::{Adjacency, IdSet, Interner};
use crate::model::{EdgeId, NodeId};
use crate::projection::Counters;
use crate::storage::{Backend, Table};

/// The snapshot's file name in the store directory.
pub(super) const SNAPSHOT_FILE: &str = "state.snapshot";
const MAGIC: &[u8; 8] = b"LOCISNAP";
/// Version of this file's layout.
/// 2: edges by column with validity bounds apart; no adjacency section (rebuilt from edges).
/// 3: edge columns packed (`columns`); node records without their id, labels interned.
pub const SNAPSHOT_FORMAT: u32 = 3;
const HEADER_LEN: usize = 8 + 4 + 4 + 4 + 4 + 4 + 8 + 4 + 8 + 4;
/// Bytes of one validity entry: edge id, valid from, valid to.
const BOUND_ENTRY: usize = 4 + 8 + 8;
/// The columns of the edge table, in their order in the file.
const EDGE_COLUMNS: [&str; 6] = [
    "from",
    "to",
    "relation",
    "confidence",
    "salience",
    "last seen",
];
/// Meta-table key prefix of the per-commit change records.
pub(super) const CHANGED_PREFIX: &[u8] = b"changed/";

/// What one commit changed in the graph, so that an open can bring a snapshot up to date.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct ChangedIds {
    /// Sequence number of the commit's first event (its key holds the last).
    pub first: u64,
    pub nodes: Vec<u32>,
    pub edges: Vec<u32>,
}

/// The meta-table key of the change record of the commit ending at `last_seq`.
pub(super) fn changed_key(last_seq: u64) -> Vec<u8> {
    let mut k = CHANGED_PREFIX.to_vec();
    k.extend_from_slice(&last_seq.to_be_bytes());
    k
}

/// The path of the snapshot of the store in `dir`.
pub(super) fn path_in(dir: &Path) -> PathBuf {
    dir.join(SNAPSHOT_FILE)
}

/// The CRC-32 of the log record `seq` (0 for none): a snapshot records the one of its last
/// event, so that a snapshot copied from another store with as many events is not taken for
/// this store's.
pub(super) fn log_fingerprint(backend: &dyn Backend, seq: u64) -> Result<u32> {
    Ok(backend
        .get(Table::Log, &seq.to_be_bytes())?
        .map_or(0, |v| crc32fast::hash(&v)))
}

/// Encodes the graph part of `state` (nodes, edge cores, interners, adjacency); `log` is the
/// [`log_fingerprint`] of its last event.
pub(super) fn encode(state: &State, log: u32) -> Vec<u8> {
    // One buffer, the header's length and checksum filled in at the end: at 1M edges the file
    // is ~90 MB, and a second copy of it raised the bulk load's peak memory by as much.
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

    let node_slots = state.nodes.slot_bound();
    let record = |i: usize| state.nodes.record(i);
    let node_bytes: usize = (0..node_slots)
        .map(|i| 4 + record(i).map_or(0, <[u8]>::len))
        .sum();
    let edge_slots = state.edges.slot_bound();
    let bounded: Vec<(EdgeId, EdgeCore)> = state
        .edges
        .bounded()
        .filter_map(|id| Some((id, state.edge_core(id)?)))
        .collect();
    // The edge columns' size is known once they are packed; this is what they take at most.
    body.reserve(4 + node_bytes + 4 + edge_slots * 32 + 4 + bounded.len() * BOUND_ENTRY);
    // The records as the node table holds them.
    put_u32(&mut body, node_slots as u32);
    for i in 0..node_slots {
        match record(i) {
            Some(bytes) => {
                put_u32(&mut body, bytes.len() as u32);
                body.extend_from_slice(bytes);
            }
            None => put_u32(&mut body, u32::MAX),
        }
    }

    put_u32(&mut body, edge_slots as u32);
    // Column by column (the cores are looked up once per pass rather than collected: a
    // vector of them would add 56 bytes an edge to the peak).
    let core = |i: usize| state.edge_core(EdgeId(i as u32));
    let column = |body: &mut Vec<u8>, word: &(dyn Fn(&EdgeCore) -> u64 + Sync)| {
        columns::put(body, edge_slots, |i| core(i).as_ref().map(word));
    };
    column(&mut body, &|c| c.from.0.into());
    column(&mut body, &|c| c.to.0.into());
    columns::put(&mut body, edge_slots, |i| {
        Some(core(i).map_or(0, |c| u64::from(c.relation) + 1))
    });
    column(&mut body, &|c| c.confidence.to_bits().into());
    column(&mut body, &|c| c.salience.to_bits().into());
    column(&mut body, &|c| ordered_bits(c.last_seen));
    put_u32(&mut body, bounded.len() as u32);
    for (id, c) in &bounded {
        put_u32(&mut body, id.0);
        put_u64(&mut body, c.valid_from as u64);
        put_u64(&mut body, c.valid_to as u64);
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

/// Writes `bytes` as the snapshot of the store in `dir`: a temporary file, synced, renamed
/// over the previous one, and the directory synced, so a crash leaves the old or the new
/// snapshot, never half of one.
/// A write that fails (a full disk, a directory in the snapshot's place) removes its
/// temporary file: it would otherwise stay, the state's size, after every attempt.
pub(super) fn write(dir: &Path, bytes: &[u8]) -> Result<()> {
    let path = path_in(dir);
    let tmp = dir.join(format!("{SNAPSHOT_FILE}.tmp"));
    let put = || -> Result<()> {
        let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(bytes).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
    };
    if let Err(e) = put() {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes the snapshot of the store in `dir`, if any.
pub(super) fn remove(dir: &Path) -> Result<()> {
    let path = path_in(dir);
    match std::fs::remove_file(&path) {
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

/// Why a snapshot was not used (logged; the state is then loaded from the tables).
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
    let bytes = match read_outside_the_heap(&path, fits) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    timings.snapshot_read = ms_since(t);
    decode(&bytes, timings).map(Some)
}

/// The whole file at `path`, read into an anonymous memory map rather than the heap: the
/// snapshot is a third of the state's size and is dropped as soon as it is decoded, and
/// memory unmapped goes back to the system at once, where an allocator may keep a freed
/// block resident for a while (mimalloc, which the binary uses, holds it a second).
/// Anonymous memory, unlike a map of the file itself, cannot fault if the file is truncated
/// under it. The magic and the body length of the header are checked against the file first,
/// so that a foreign or sparse file of any size costs one small read, not its size in memory.
fn read_outside_the_heap(
    path: &Path,
    fits: &mut dyn FnMut(&Header) -> std::result::Result<(), Unusable>,
) -> std::io::Result<memmap2::MmapMut> {
    use std::io::Read;
    let unusable = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Without O_NONBLOCK, opening a FIFO put where the snapshot goes waits for a writer to
    // come, and so did the store's open; with it the open returns and the check below
    // refuses anything but a regular file (no effect on a regular file's reads).
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let mut file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(unusable("not a regular file".into()));
    }
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
    if Some(len) != body_len.checked_add(HEADER_LEN as u64) {
        return Err(unusable(format!(
            "{len} bytes: a header of {HEADER_LEN} and a body of {body_len}, it says"
        )));
    }
    fits(&fields).map_err(unusable)?;
    let len = usize::try_from(len)
        .map_err(|_| std::io::Error::other("larger than this machine's address space"))?;
    let mut map = memmap2::MmapMut::map_anon(len)?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    map[..HEADER_LEN].copy_from_slice(&header);
    file.read_exact(&mut map[HEADER_LEN..])?;
    Ok(map)
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
    if store != STORE_FORMAT || projection != PROJECTION_VERSION {
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

/// Decodes a snapshot, checking everything an index is later taken from, so that no damaged
/// or crafted file can make a traversal index out of bounds.
fn decode(
    bytes: &[u8],
    timings: &mut OpenTimings,
) -> std::result::Result<(Header, State), Unusable> {
    let t = Instant::now();
    let mut r = Reader { bytes, at: 0 };
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
    timings.snapshot_read += ms_since(t);
    let t = Instant::now();
    let mut r = Reader { bytes: body, at: 0 };
    let relations = r.interner("relation")?;
    let labels = r.interner("label")?;

    let slots = r.count(4, "node slots")?;
    // A node slot past the ids the store has made would be handed out again by the next
    // ingest, over a node the snapshot's edges still join.
    if slots > header.counters.next_node as usize {
        return Err(format!(
            "{slots} node slots, past the {} node ids made",
            header.counters.next_node
        ));
    }
    let mut records: Vec<Option<&[u8]>> = Vec::with_capacity(slots);
    for _ in 0..slots {
        match r.u32()? {
            u32::MAX => records.push(None),
            n => records.push(Some(r.take(n as usize)?)),
        }
    }
    // A column may take no bytes at all, so the file's size does not bound the number of
    // slots; the store's own counter (which the header was judged against) does.
    let edge_slots = r.u32()? as usize;
    if edge_slots > header.counters.next_edge as usize {
        return Err(format!(
            "{edge_slots} edge slots, past the {} edge ids made",
            header.counters.next_edge
        ));
    }
    let mut rest = r.rest();
    let columns = EDGE_COLUMNS.map(|what| {
        let (column, after) = Column::read(rest, edge_slots, what)?;
        rest = after;
        Ok::<_, Unusable>(column)
    });
    let columns = EdgeColumns::new(edge_slots, columns)?;
    let mut r = Reader::new(rest);
    let bounds = r.count(BOUND_ENTRY, "validity bounds")?;
    let bounds = r.take(bounds * BOUND_ENTRY)?;
    if !r.rest().is_empty() {
        return Err("bytes after the edges".into());
    }
    // Liveness as a bitset: small enough to stay in cache, where the records are not.
    let mut live_nodes = IdSet::default();
    for (i, rec) in records.iter().enumerate() {
        if rec.is_some() {
            live_nodes.insert(i as u32);
        }
    }
    timings.snapshot_read += ms_since(t);

    // The nodes' half (records, then the key index, labels and pins) and the edges' half
    // (columns, then the adjacency) need nothing from each other but which slots are live,
    // so they run side by side.
    let (node_half, edge_half) = rayon::join(
        || timed(|| node_half(&records, &labels)),
        || timed(|| edge_half(&columns, bounds, &live_nodes, relations.len(), slots)),
    );
    let ((nodes, (node_keys, label_of, pinned)), nodes_ms) = node_half?;
    let ((edges, adj, adjacency_ms), edges_ms) = edge_half?;
    timings.snapshot_nodes = nodes_ms;
    timings.snapshot_edges = edges_ms;
    timings.snapshot_adjacency = adjacency_ms;
    Ok((
        header,
        State {
            nodes,
            node_keys,
            edges,
            full_edges: None,
            relations,
            labels,
            adj: adj.with_nodes(label_of, pinned),
            graph_epoch: next_graph_epoch(),
            ..State::default()
        },
    ))
}

/// What `f` gives, with the milliseconds it took.
fn timed<T>(
    f: impl FnOnce() -> std::result::Result<T, Unusable>,
) -> std::result::Result<(T, f64), Unusable> {
    let t = Instant::now();
    let out = f()?;
    Ok((out, ms_since(t)))
}

/// The nodes' half of the state: the node table, and what derives from it alone (see
/// [`derive_from_nodes`]).
type NodeHalf = (NodeTable, (KeyIndex, Vec<u32>, IdSet));

fn node_half(
    records: &[Option<&[u8]>],
    labels: &Interner,
) -> std::result::Result<NodeHalf, Unusable> {
    let (nodes, marks) = check_nodes(records, labels)?;
    let derived = derive_from_nodes(&nodes, &marks)?;
    Ok((nodes, derived))
}

/// The edges' half of the state: the edge table, and the adjacency of the `slots` node ids
/// built from it (labels and pins come from the nodes' half), and the milliseconds the
/// adjacency took.
fn edge_half(
    columns: &EdgeColumns<'_>,
    bounds: &[u8],
    live_nodes: &IdSet,
    relations: usize,
    slots: usize,
) -> std::result::Result<(EdgeTable, Adjacency, f64), Unusable> {
    let (edges, last_seen) = decode_edges(columns, bounds, live_nodes, relations)?;
    let t = Instant::now();
    let adj = Adjacency::from_edges(slots, last_seen, edges.live_ends());
    Ok((edges, adj, ms_since(t)))
}

/// The node records, checked on every core and copied into their slots, with each slot's
/// label id and pin (`u32::MAX` for a free slot). When records are damaged, the error names
/// the first of them.
fn check_nodes(
    records: &[Option<&[u8]>],
    labels: &Interner,
) -> std::result::Result<(NodeTable, Vec<(u32, bool)>), Unusable> {
    let first_error: std::sync::Mutex<Option<(usize, Unusable)>> = std::sync::Mutex::new(None);
    let fail = |i: usize, message: String| {
        let mut first = first_error.lock().unwrap_or_else(|p| p.into_inner());
        if first.as_ref().is_none_or(|(j, _)| i < *j) {
            *first = Some((i, message));
        }
        (None, (u32::MAX, false))
    };
    let (mut slots, mut marks) = (Vec::new(), Vec::new());
    // Indexed and collected in place: a collect of Results would gather chunks in a list and
    // copy them all once more (a tenth of the open at 1M edges).
    records
        .par_iter()
        .enumerate()
        .map(|(i, rec)| match rec {
            None => (None, (u32::MAX, false)),
            Some(b) => match node_table::check(b, labels) {
                Ok(c) => (Some(Box::<[u8]>::from(*b)), (c.label, c.pinned)),
                Err(e) => fail(i, format!("node slot {i}: {e}")),
            },
        })
        .unzip_into_vecs(&mut slots, &mut marks);
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some((_, message)) => Err(message),
        None => Ok((NodeTable::from_slots(slots), marks)),
    }
}

/// The edge table's columns as read (see [`EDGE_COLUMNS`]).
struct EdgeColumns<'a> {
    /// Edge slots: the rows of every column.
    rows: usize,
    from: Column<'a>,
    to: Column<'a>,
    relation: Column<'a>,
    confidence: Column<'a>,
    salience: Column<'a>,
    last_seen: Column<'a>,
}

impl<'a> EdgeColumns<'a> {
    fn new(
        rows: usize,
        columns: [std::result::Result<Column<'a>, Unusable>; 6],
    ) -> std::result::Result<Self, Unusable> {
        let [from, to, relation, confidence, salience, last_seen] = columns;
        Ok(EdgeColumns {
            rows,
            from: from?,
            to: to?,
            relation: relation?,
            confidence: confidence?,
            salience: salience?,
            last_seen: last_seen?,
        })
    }
}

/// The edge columns and validity bounds, straight into the edge table and the last-seen
/// times (no vector of whole cores in between: 56 bytes an edge, a fifth of the open's peak
/// at 1M edges). Every live edge must join live nodes by a known relation.
fn decode_edges(
    columns: &EdgeColumns<'_>,
    bounds: &[u8],
    live_nodes: &IdSet,
    relations: usize,
) -> std::result::Result<(EdgeTable, Vec<i64>), Unusable> {
    let slots = columns.rows;
    let i64_at = |b: &[u8], o: usize| {
        let mut w = [0; 8];
        w.copy_from_slice(&b[o..o + 8]);
        i64::from_le_bytes(w)
    };
    let node = |column: &Column<'_>, i: usize| {
        u32::try_from(column.get(i))
            .ok()
            .filter(|id| live_nodes.contains(*id))
    };
    // Both filled on every core: a sequential pass was a third of the edges' half.
    let mut edges = EdgeTable::from_slots(slots, |i| {
        let relation = match columns.relation.get(i) {
            0 => return Ok(None),
            r => r - 1,
        };
        let (Some(from), Some(to)) = (node(&columns.from, i), node(&columns.to, i)) else {
            return Err(format!("edge slot {i} refers to a missing node"));
        };
        if relation >= relations as u64 {
            return Err(format!("edge slot {i} refers to a missing relation"));
        }
        // Bits wider than 32 are not a float; their low half is taken (the checksum makes
        // this a crafted file, and any float is a value the table can hold).
        let float = |column: &Column<'_>| f32::from_bits(column.get(i) as u32);
        Ok(Some((
            NodeId(from),
            NodeId(to),
            relation as u32,
            float(&columns.confidence),
            float(&columns.salience),
        )))
    })?;
    let mut last_seen = Vec::new();
    (0..slots)
        .into_par_iter()
        .map(|i| match columns.relation.get(i) {
            0 => 0,
            _ => from_ordered_bits(columns.last_seen.get(i)),
        })
        .collect_into_vec(&mut last_seen);
    for b in bounds.chunks_exact(BOUND_ENTRY) {
        let id = EdgeId(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let mut core = edges
            .get(id, 0)
            .ok_or_else(|| format!("validity bounds for edge {id}, which is not live"))?;
        core.valid_from = i64_at(b, 4);
        core.valid_to = i64_at(b, 12);
        edges.put(id, &core);
    }
    Ok((edges, last_seen))
}

/// An `i64` as a `u64` of the same order (the sign bit flipped), so that a column of times
/// on both sides of zero still spans a narrow range.
fn ordered_bits(v: i64) -> u64 {
    (v as u64) ^ (1 << 63)
}

fn from_ordered_bits(v: u64) -> i64 {
    (v ^ (1 << 63)) as i64
}

/// What the nodes give the rest of the state: the key index, each slot's interned label
/// (`u32::MAX` for a free slot) and the pinned nodes. `marks` holds each slot's label and pin.
fn derive_from_nodes(
    nodes: &NodeTable,
    marks: &[(u32, bool)],
) -> std::result::Result<(KeyIndex, Vec<u32>, IdSet), Unusable> {
    let mut node_keys = KeyIndex::with_capacity(nodes.live_count());
    let mut pinned = IdSet::default();
    for id in nodes.ids() {
        let key = nodes.key(id).unwrap_or_default();
        if !node_keys.insert(nodes, key, id) {
            return Err(format!("two nodes have the key {key:?}"));
        }
        if marks[id.0 as usize].1 {
            pinned.insert(id.0);
        }
    }
    let label_of = marks.iter().map(|m| m.0).collect();
    Ok((node_keys, label_of, pinned))
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A bounds-checked cursor: every read of a damaged file ends in an error, not a panic.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }
    pub(super) fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], Unusable> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or_else(|| format!("truncated at byte {} (wanted {n} more)", self.at))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    pub(super) fn u8(&mut self) -> std::result::Result<u8, Unusable> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> std::result::Result<u32, Unusable> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(super) fn u64(&mut self) -> std::result::Result<u64, Unusable> {
        let b = self.take(8)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub(super) fn rest(&mut self) -> &'a [u8] {
        let s = &self.bytes[self.at..];
        self.at = self.bytes.len();
        s
    }
    /// A count of items of at least `min_size` bytes each, refused when the rest of the file
    /// cannot hold that many (so a damaged count never makes a huge allocation).
    pub(super) fn count(
        &mut self,
        min_size: usize,
        what: &str,
    ) -> std::result::Result<usize, Unusable> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size) > self.bytes.len() - self.at {
            return Err(format!("{what}: {n} do not fit in the file"));
        }
        Ok(n)
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
    use crate::model::{Node, Props};

    fn state_of(nodes: u32, next_node: u32) -> State {
        let mut state = State::default();
        for i in 0..nodes {
            state.put_node(&Node {
                id: NodeId(i),
                key: format!("n{i}"),
                label: "Place".into(),
                name: String::new(),
                aliases: Vec::new(),
                props: Props::new(),
                anchor: None,
                salience: 0.0,
                pinned: false,
                created: 0,
                updated: 0,
            });
        }
        state.counters.next_node = next_node;
        state
    }

    /// A crafted snapshot (its checksum right) with a node in a slot the store has not handed
    /// out: the next ingest would make a node with that id over it, joined by the snapshot's
    /// edges. Refused.
    #[test]
    fn node_slots_past_the_ids_made_are_refused() {
        let ok = encode(&state_of(3, 3), 0);
        assert!(decode(&ok, &mut OpenTimings::default()).is_ok());
        let crafted = encode(&state_of(3, 2), 0);
        let why = decode(&crafted, &mut OpenTimings::default()).err().unwrap();
        assert!(
            why.contains("3 node slots, past the 2 node ids made"),
            "{why}"
        );
    }
}
