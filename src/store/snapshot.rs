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
//! the body (u32); then the body: relation names, label names, node slots
//! (postcard records), edge cores (fixed 45-byte slots) and the adjacency lists (their lengths,
//! then 16-byte entries), each list in its live order.

use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{
    next_graph_epoch, EdgeCore, EdgeTable, KeyIndex, State, PROJECTION_VERSION, STORE_FORMAT,
};
use crate::error::{Error, Result};
use crate::graph::{AdjEntry, Adjacency, IdSet, Interner};
use crate::model::{EdgeId, Node, NodeId};
use crate::projection::Counters;
use crate::storage::{Backend, Table};

/// The snapshot's file name in the store directory.
pub(super) const SNAPSHOT_FILE: &str = "state.snapshot";
const MAGIC: &[u8; 8] = b"LOCISNAP";
/// Version of this file's layout.
pub const SNAPSHOT_FORMAT: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 4 + 4 + 4 + 4 + 8 + 4 + 8 + 4;
const EDGE_SLOT: usize = 1 + 4 + 4 + 4 + 4 + 8 + 8 + 8 + 4;
const ADJ_ENTRY: usize = 16;
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

    let encoded: Vec<Option<Vec<u8>>> = state
        .nodes
        .par_iter()
        .map(|n| {
            n.as_ref()
                .map(|n| postcard::to_allocvec(n).unwrap_or_default())
        })
        .collect();
    // All of it at once: growing by doubling would hold two copies for a moment.
    let node_bytes: usize = encoded
        .iter()
        .map(|n| 4 + n.as_ref().map_or(0, Vec::len))
        .sum();
    let adj_bytes = 4 + state.adj.node_bound() * 4 + state.adj.edge_count() * 2 * ADJ_ENTRY;
    let edge_slots = state.edges.slot_bound();
    body.reserve(4 + node_bytes + 4 + edge_slots * EDGE_SLOT + adj_bytes);
    put_u32(&mut body, encoded.len() as u32);
    for n in &encoded {
        match n {
            Some(bytes) => {
                put_u32(&mut body, bytes.len() as u32);
                body.extend_from_slice(bytes);
            }
            None => put_u32(&mut body, u32::MAX),
        }
    }

    put_u32(&mut body, edge_slots as u32);
    for id in 0..edge_slots as u32 {
        match state.edge_core(EdgeId(id)) {
            Some(c) => {
                body.push(1);
                put_u32(&mut body, c.from.0);
                put_u32(&mut body, c.to.0);
                put_u32(&mut body, c.relation);
                put_u32(&mut body, c.confidence.to_bits());
                put_u64(&mut body, c.valid_from as u64);
                put_u64(&mut body, c.valid_to as u64);
                put_u64(&mut body, c.last_seen as u64);
                put_u32(&mut body, c.salience.to_bits());
            }
            None => body.extend_from_slice(&[0; EDGE_SLOT]),
        }
    }

    let bound = state.adj.node_bound();
    put_u32(&mut body, bound as u32);
    for n in 0..bound as u32 {
        put_u32(&mut body, state.adj.entries(NodeId(n)).len() as u32);
    }
    for n in 0..bound as u32 {
        for e in state.adj.entries(NodeId(n)) {
            let (node, edge, confidence, rel_dir) = e.to_raw();
            put_u32(&mut body, node);
            put_u32(&mut body, edge);
            put_u32(&mut body, confidence);
            put_u32(&mut body, rel_dir);
        }
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
pub(super) fn write(dir: &Path, bytes: &[u8]) -> Result<()> {
    let path = path_in(dir);
    let tmp = dir.join(format!("{SNAPSHOT_FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| Error::io(&tmp, e))?;
    f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
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
pub(super) fn read(dir: &Path) -> std::result::Result<Option<(Header, State)>, Unusable> {
    let path = path_in(dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    decode(&bytes).map(Some)
}

/// Decodes a snapshot, checking everything an index is later taken from, so that no damaged
/// or crafted file can make a traversal index out of bounds.
fn decode(bytes: &[u8]) -> std::result::Result<(Header, State), Unusable> {
    let mut r = Reader { bytes, at: 0 };
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

    let slots = r.count(4, "node slots")?;
    let mut records: Vec<Option<&[u8]>> = Vec::with_capacity(slots);
    for _ in 0..slots {
        match r.u32()? {
            u32::MAX => records.push(None),
            n => records.push(Some(r.take(n as usize)?)),
        }
    }
    let nodes: Vec<Option<Node>> = records
        .par_iter()
        .enumerate()
        .map(|(i, rec)| match rec {
            None => Ok(None),
            Some(b) => match postcard::from_bytes::<Node>(b) {
                Ok(n) if n.id.0 as usize == i => Ok(Some(n)),
                Ok(n) => Err(format!("node slot {i} holds node {}", n.id)),
                Err(e) => Err(format!("node slot {i}: {e}")),
            },
        })
        .collect::<std::result::Result<_, _>>()?;

    let edge_slots = r.count(EDGE_SLOT, "edge slots")?;
    let raw = r.take(edge_slots * EDGE_SLOT)?;
    // Liveness as bitsets: small enough to stay in cache, where the records are not.
    let mut live_nodes = IdSet::default();
    for (i, n) in nodes.iter().enumerate() {
        if n.is_some() {
            live_nodes.insert(i as u32);
        }
    }
    let node_live = |id: u32| live_nodes.contains(id);
    let (edges, last_seen) = decode_edges(raw, &node_live, relations.len())?;

    let bound = r.count(4, "adjacency lists")?;
    let mut lengths = Vec::with_capacity(bound);
    let mut total = 0usize;
    for _ in 0..bound {
        let n = r.u32()? as usize;
        total = total.saturating_add(n);
        lengths.push(n);
    }
    let live_edges = edges.live_count();
    if total != live_edges * 2 {
        return Err(format!(
            "adjacency has {total} entries for {live_edges} edges"
        ));
    }
    let raw = r.take(total * ADJ_ENTRY)?;
    if !r.rest().is_empty() {
        return Err("bytes after the adjacency".into());
    }
    let mut live_edges = IdSet::default();
    for id in edges.ids() {
        live_edges.insert(id.0);
    }
    let mut starts = Vec::with_capacity(bound + 1);
    let mut at = 0;
    for len in &lengths {
        starts.push(at);
        at += len * ADJ_ENTRY;
    }
    starts.push(at);
    // Each entry must name a live node, a live edge and a known relation, so no traversal
    // indexes out of bounds. That an entry matches its edge's endpoints is `verify`'s to
    // check: reading each edge here would cost a cache miss per entry (a fifth of the open).
    let lists: Vec<Vec<AdjEntry>> = starts
        .par_windows(2)
        .enumerate()
        .map(|(n, w)| {
            // Sized exactly: collecting into a `Result` loses the length hint, and the lists
            // grown by doubling held 40% more than their entries (13 bytes an edge at 1M).
            let mut list = Vec::with_capacity((w[1] - w[0]) / ADJ_ENTRY);
            for s in raw[w[0]..w[1]].chunks_exact(ADJ_ENTRY) {
                let u = |o: usize| u32::from_le_bytes([s[o], s[o + 1], s[o + 2], s[o + 3]]);
                let e = AdjEntry::from_raw(u(0), u(4), u(8), u(12));
                if !(node_live(e.node)
                    && live_edges.contains(e.edge)
                    && (e.relation() as usize) < relations.len())
                {
                    return Err(format!(
                        "adjacency of node {n} holds an entry of no live edge"
                    ));
                }
                list.push(e);
            }
            Ok(list)
        })
        .collect::<std::result::Result<_, _>>()?;

    let header = Header { counters, log };
    Ok((
        header,
        assemble(nodes, edges, last_seen, relations, labels, lists)?,
    ))
}

/// The edge slots: straight into the edge table and the last-seen times, without a vector of
/// whole cores in between (56 bytes an edge, a fifth of the open's peak at 1M edges).
fn decode_edges(
    raw: &[u8],
    node_live: &dyn Fn(u32) -> bool,
    relations: usize,
) -> std::result::Result<(EdgeTable, Vec<i64>), Unusable> {
    let slots = raw.len() / EDGE_SLOT;
    let mut edges = EdgeTable::with_slots(slots);
    let mut last_seen = vec![0; slots];
    for (i, s) in raw.chunks_exact(EDGE_SLOT).enumerate() {
        if s[0] == 0 {
            continue;
        }
        let u32_at = |o: usize| u32::from_le_bytes([s[o], s[o + 1], s[o + 2], s[o + 3]]);
        let i64_at = |o: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&s[o..o + 8]);
            i64::from_le_bytes(b)
        };
        let core = EdgeCore {
            from: NodeId(u32_at(1)),
            to: NodeId(u32_at(5)),
            relation: u32_at(9),
            confidence: f32::from_bits(u32_at(13)),
            valid_from: i64_at(17),
            valid_to: i64_at(25),
            last_seen: i64_at(33),
            salience: f32::from_bits(u32_at(41)),
        };
        if !node_live(core.from.0) || !node_live(core.to.0) || core.relation as usize >= relations {
            return Err(format!(
                "edge slot {i} refers to a missing node or relation"
            ));
        }
        last_seen[i] = core.last_seen;
        edges.put(EdgeId(i as u32), &core);
    }
    Ok((edges, last_seen))
}

/// The state from its decoded parts: key maps, label and pin marks, validity bounds and
/// last-seen times derive from the nodes and edges.
fn assemble(
    nodes: Vec<Option<Node>>,
    edges: EdgeTable,
    last_seen: Vec<i64>,
    relations: Interner,
    labels: Interner,
    lists: Vec<Vec<AdjEntry>>,
) -> std::result::Result<State, Unusable> {
    let bound = lists.len().max(nodes.len());
    let mut node_keys = KeyIndex::with_capacity(nodes.len());
    let mut label_of = vec![u32::MAX; bound];
    let mut pinned = IdSet::default();
    for n in nodes.iter().flatten() {
        if !node_keys.insert(&nodes, &n.key, n.id) {
            return Err(format!("two nodes have the key {:?}", n.key));
        }
        label_of[n.id.0 as usize] = labels
            .get(&n.label)
            .ok_or_else(|| format!("node {}: label {:?} is not interned", n.id, n.label))?;
        if n.pinned {
            pinned.insert(n.id.0);
        }
    }
    let adj = Adjacency::from_parts(lists, label_of, pinned, last_seen);
    Ok(State {
        nodes,
        node_keys,
        edges,
        full_edges: None,
        relations,
        labels,
        adj,
        graph_epoch: next_graph_epoch(),
        ..State::default()
    })
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
