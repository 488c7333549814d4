//! Versioned record encoding. Every stored value is one format byte followed by its encoding;
//! a reader refuses a version it does not know instead of misreading it.
//!
//! - Format 7 (written by this build for log records of at least [`COMPRESS_FROM`] bytes when
//!   compression saves an eighth): `[7][crc32 of the rest][head length u32][head][tail length
//!   u32][zstd frame of the tail]`, the body being format 5's, cut after the event's kind: the
//!   head (sequence number to kind) is kept as it is, the rest compressed. The log is the one
//!   table that cannot be rebuilt and grows for ever; a bulk load's events of a thousand edges
//!   each shrink 2.7-fold. A pass that reads only each event's kind (a replay's first, looking
//!   for deletions) reads the head, where format 6 had it expand every record whole.
//! - Format 6: `[6][crc32 of the rest][body length u32][zstd frame of the body]` over a
//!   format-5 body. Still read; never written.
//! - Format 5 (written by this build): `[5][crc32 of the body, little-endian][postcard body]`;
//!   an edge upsert may say when its fact was last seen (a summary restates each fact as of its
//!   events, not as of its own time).
//! - Format 4: format 6's layout over a format-3 body. Still read; never written.
//! - Format 3: format 5's layout; edge upserts without `last_seen`. Still read; never written.
//! - Format 2: the same layout; edges without salience (read as 0.5).
//!   The checksum is what turns a flipped byte inside a record into a [`Error::Corrupt`]
//!   instead of a plausible but wrong value: redb checksums its pages only in some paths, and a
//!   byte-flip trial showed decodable-but-wrong log records without it.
//! - Format 1 (stores written before idempotency keys): `[1][postcard body]`, no checksum, and
//!   events without an idempotency key. Still read; never written.
//!
//! Stores of format 2 kept edge records (rows of 16 under a format byte of their own, `0x80`)
//! and node records in tables; since format 3 no table holds either (the log's events are
//! their only record, and the snapshot their derived state), so only events and the meta
//! table's values are read and written here.

use std::borrow::Cow;
use std::cell::RefCell;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{
    Anchor, Assertion, EdgeUpsert, Event, NodeUpsert, PayloadSkipped, PayloadWithoutDigest, Props,
    Value,
};

/// Version byte of every record this build writes. Bump it (and keep a reader for the old one)
/// when a persisted type changes shape; 6 and 7 are taken (compressed format-5 bodies:
/// [`FORMAT_COMPRESSED`]), so the next shape is 8, and a compressed form of it needs a number
/// of its own.
pub const RECORD_FORMAT: u8 = FORMAT_EDGES_LAST_SEEN;

/// Checksummed records whose edges carry their salience, edge upserts without `last_seen`.
const FORMAT_EDGES_WITH_SALIENCE: u8 = 3;

/// A format-3 body compressed with zstd.
const FORMAT_COMPRESSED_3: u8 = 4;

/// Checksummed records whose edge upserts may carry `last_seen`: the shape of this build's
/// records.
const FORMAT_EDGES_LAST_SEEN: u8 = 5;

/// A format-5 body compressed with zstd whole. Still read; never written.
const FORMAT_COMPRESSED_WHOLE: u8 = 6;

/// A format-5 body compressed with zstd but for its head, kept apart (see the module's
/// documentation): what this build writes for a large log record.
pub const FORMAT_COMPRESSED: u8 = 7;

/// The smallest body a log record is compressed from: below it, zstd's frame and the length
/// take back most of what it saves, and reading one event would pay a decompression for little.
pub const COMPRESS_FROM: usize = 512;

/// The largest body a record is compressed from, and so the most a compressed record may
/// claim to expand to: a damaged length cannot make a read allocate more than this.
const COMPRESS_UP_TO: usize = 256 << 20;

/// zstd's level for log records: its fastest standard level. Level 3 saved 3% more at
/// twice the time.
const COMPRESSION_LEVEL: i32 = 1;

thread_local! {
    // A context per thread: creating one per record costs more than compressing a small one.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// `body` compressed, or `None` when zstd fails (the record is then written plain).
fn compress(body: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            *c = zstd::bulk::Compressor::new(COMPRESSION_LEVEL).ok();
        }
        c.as_mut()?.compress(body).ok()
    })
}

/// A compressed body expanded to exactly `len` bytes.
fn decompress(table: &'static str, frame: &[u8], len: usize) -> Result<Vec<u8>> {
    decompress_after(table, &[], frame, len)
}

/// `prefix` followed by `frame` expanded to exactly `len` bytes.
fn decompress_after(
    table: &'static str,
    prefix: &[u8],
    frame: &[u8],
    len: usize,
) -> Result<Vec<u8>> {
    let corrupt = |message: String| Error::Corrupt { table, message };
    DECOMPRESSOR.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_none() {
            *d = Some(zstd::bulk::Decompressor::new().map_err(|e| corrupt(e.to_string()))?);
        }
        let Some(d) = d.as_mut() else {
            return Err(corrupt("no zstd context".into()));
        };
        // The frame says what it expands to; a length that disagrees is refused before
        // anything is allocated for it.
        if zstd::zstd_safe::get_frame_content_size(frame)
            .ok()
            .flatten()
            != Some(len as u64)
        {
            return Err(corrupt(format!(
                "compressed record's frame does not say it expands to its {len} bytes"
            )));
        }
        // Allocated once the frame agrees with the length. zstd writes into the spare
        // capacity after the cursor: after the prefix.
        let start = prefix.len();
        let mut out = Vec::with_capacity(start + len);
        out.extend_from_slice(prefix);
        let mut after = std::io::Cursor::new(out);
        after.set_position(start as u64);
        let n = d
            .decompress_to_buffer(frame, &mut after)
            .map_err(|e| corrupt(format!("compressed record: {e}")))?;
        let out = after.into_inner();
        if n != len || out.len() != start + len {
            return Err(corrupt(format!(
                "compressed record expands to {n} bytes, its header says {len}"
            )));
        }
        Ok(out)
    })
}

/// Encodes a log record: [`encode`], compressed (format 7: its head apart) when its body is
/// large enough and compression saves at least an eighth of it.
pub fn encode_event(event: &Event) -> Vec<u8> {
    let plain = encode(event);
    let body = &plain[5..];
    if !(COMPRESS_FROM..=COMPRESS_UP_TO).contains(&body.len()) {
        return plain;
    }
    let Some(head_len) = head_length(body) else {
        return plain;
    };
    let (head, tail) = body.split_at(head_len);
    match compress(tail) {
        Some(frame) if head.len() + frame.len() + 8 <= body.len() - body.len() / 8 => {
            let mut out = Vec::with_capacity(13 + head.len() + frame.len());
            out.extend_from_slice(&[FORMAT_COMPRESSED, 0, 0, 0, 0]);
            out.extend_from_slice(&(head.len() as u32).to_le_bytes());
            out.extend_from_slice(head);
            out.extend_from_slice(&(tail.len() as u32).to_le_bytes());
            out.extend_from_slice(&frame);
            let crc = crc32fast::hash(&out[5..]);
            out[1..5].copy_from_slice(&crc.to_le_bytes());
            out
        }
        _ => plain,
    }
}

/// A format-7 record's head, which must end where its kind does.
fn event_head<'a>(table: &'static str, head: &'a [u8]) -> Result<EventHead<'a>> {
    postcard_body(table, head)
}

/// The length of an event body's head: its fields from the sequence number to its kind
/// ([`EventHead`]), which format 7 keeps uncompressed.
fn head_length(body: &[u8]) -> Option<usize> {
    let (_, rest) = postcard::take_from_bytes::<EventHead<'_>>(body).ok()?;
    Some(body.len() - rest.len())
}

/// A format-7 record's body under its checksum, cut into its head and its tail's length and
/// frame; checked only for the lengths it says.
fn head_and_frame<'a>(table: &'static str, body: &'a [u8]) -> Result<(&'a [u8], usize, &'a [u8])> {
    let corrupt = |message: &str| Error::Corrupt {
        table,
        message: message.into(),
    };
    let Some((head_len, rest)) = body.split_first_chunk::<4>() else {
        return Err(corrupt("compressed record without its head's length"));
    };
    let head_len = u32::from_le_bytes(*head_len) as usize;
    let Some((head, rest)) = rest.split_at_checked(head_len) else {
        return Err(corrupt("compressed record shorter than the head it says"));
    };
    let Some((tail_len, frame)) = rest.split_first_chunk::<4>() else {
        return Err(corrupt("compressed record without its length"));
    };
    let tail_len = u32::from_le_bytes(*tail_len) as usize;
    let whole = head_len.saturating_add(tail_len);
    if !(COMPRESS_FROM..=COMPRESS_UP_TO).contains(&whole) {
        return Err(Error::Corrupt {
            table,
            message: format!(
                "compressed record claims {whole} bytes, outside {COMPRESS_FROM} to {COMPRESS_UP_TO}"
            ),
        });
    }
    Ok((head, tail_len, frame))
}

/// The oldest record format this build still reads.
const FORMAT_WITHOUT_CHECKSUM: u8 = 1;
/// Checksummed records whose edges carry no salience.
const FORMAT_EDGES_WITHOUT_SALIENCE: u8 = 2;

/// FNV-1a, 64 bits: a stable digest of bytes (the same on every platform and build), for keys
/// and fingerprints that are written to the log or compared across runs.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// Encodes `value` as a versioned, checksummed record.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serialising our own model types into a Vec cannot fail: no type of ours has a
    // serialiser that errors, and a Vec grows as needed.
    let mut out = postcard::to_extend(value, vec![RECORD_FORMAT, 0, 0, 0, 0])
        .expect("postcard encoding into a Vec");
    let crc = crc32fast::hash(&out[5..]);
    out[1..5].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a record's format byte and checksum without decoding it: what a copy of records
/// (a compaction's) needs to know that it copies no damage, at the cost of a CRC.
pub fn check_record(table: &'static str, bytes: &[u8]) -> Result<()> {
    checked_body(table, bytes).map(|_| ())
}

/// The record's format and its body under the checksum, checked; a record of format 1 has no
/// checksum, so its body is taken as it is.
fn checked_body<'a>(table: &'static str, bytes: &'a [u8]) -> Result<(u8, &'a [u8])> {
    let corrupt = |message: String| Error::Corrupt { table, message };
    match bytes.split_first() {
        Some((
            &v @ (FORMAT_EDGES_WITHOUT_SALIENCE
            | FORMAT_EDGES_WITH_SALIENCE
            | FORMAT_COMPRESSED_3
            | FORMAT_EDGES_LAST_SEEN
            | FORMAT_COMPRESSED_WHOLE
            | FORMAT_COMPRESSED),
            rest,
        )) => {
            if rest.len() < 4 {
                return Err(corrupt(format!(
                    "record of {} bytes is shorter than its checksum",
                    bytes.len()
                )));
            }
            let (crc, body) = rest.split_at(4);
            let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
            let actual = crc32fast::hash(body);
            if stored != actual {
                return Err(corrupt(format!(
                    "checksum mismatch (stored {stored:08x}, computed {actual:08x})"
                )));
            }
            Ok((v, body))
        }
        Some((&FORMAT_WITHOUT_CHECKSUM, rest)) => Ok((FORMAT_WITHOUT_CHECKSUM, rest)),
        Some((v, _)) => Err(corrupt(format!(
            "record format {v}, this build reads formats {FORMAT_WITHOUT_CHECKSUM} to {FORMAT_COMPRESSED}"
        ))),
        None => Err(corrupt("empty record".into())),
    }
}

/// The record's body, checked (and expanded, for a compressed record), and the format of
/// its shape.
fn body<'a>(table: &'static str, bytes: &'a [u8]) -> Result<(u8, Cow<'a, [u8]>)> {
    let (v, body) = checked_body(table, bytes)?;
    expanded(table, v, body)
}

/// The body of a record of format `v` whose checksum was checked ([`checked_body`]),
/// expanded when compressed, and the format of its shape.
fn expanded<'a>(table: &'static str, v: u8, body: &'a [u8]) -> Result<(u8, Cow<'a, [u8]>)> {
    let corrupt = |message: String| Error::Corrupt { table, message };
    // A plain record (format 1 among them) is its body; a compressed one is expanded.
    let shape = match v {
        FORMAT_COMPRESSED_3 => FORMAT_EDGES_WITH_SALIENCE,
        FORMAT_COMPRESSED_WHOLE => FORMAT_EDGES_LAST_SEEN,
        FORMAT_COMPRESSED => {
            let (head, tail_len, frame) = head_and_frame(table, body)?;
            // The head read as a peek reads it: the two agree on every record.
            event_head(table, head)?;
            let out = decompress_after(table, head, frame, tail_len)?;
            return Ok((FORMAT_EDGES_LAST_SEEN, Cow::Owned(out)));
        }
        plain => return Ok((plain, Cow::Borrowed(body))),
    };
    let Some((len, frame)) = body.split_first_chunk::<4>() else {
        return Err(corrupt("compressed record without its length".into()));
    };
    let len = u32::from_le_bytes(*len) as usize;
    if !(COMPRESS_FROM..=COMPRESS_UP_TO).contains(&len) {
        return Err(corrupt(format!(
            "compressed record claims {len} bytes, outside {COMPRESS_FROM} to {COMPRESS_UP_TO}"
        )));
    }
    Ok((shape, Cow::Owned(decompress(table, frame, len)?)))
}

fn postcard_body<'a, T: Deserialize<'a>>(table: &'static str, body: &'a [u8]) -> Result<T> {
    // postcard ignores trailing bytes; a record with some is not one this build wrote.
    let (value, rest) = postcard::take_from_bytes(body).map_err(|e| Error::Corrupt {
        table,
        message: e.to_string(),
    })?;
    if !rest.is_empty() {
        return Err(Error::Corrupt {
            table,
            message: format!("{} unexpected bytes after the record", rest.len()),
        });
    }
    Ok(value)
}

/// Decodes a versioned record of a type whose shape did not change between formats, naming
/// `table` in the error. Events have their own reader, [`decode_event`].
pub fn decode<T: DeserializeOwned>(table: &'static str, bytes: &[u8]) -> Result<T> {
    let (_, body) = body(table, bytes)?;
    postcard_body(table, &body)
}

/// An event as format 1 stored it: no idempotency key.
#[derive(Deserialize)]
struct EventFormat1 {
    seq: u64,
    recorded_at: i64,
    ts: i64,
    actor: String,
    place: Option<String>,
    anchor: Option<Anchor>,
    kind: String,
    payload: Value,
    salience: f32,
    evidence: Vec<String>,
    assertions: Vec<AssertionFormat3>,
}

/// An event as formats 2 to 4 stored it: edge upserts without `last_seen`.
#[derive(Deserialize)]
struct EventFormat3 {
    seq: u64,
    recorded_at: i64,
    ts: i64,
    actor: String,
    place: Option<String>,
    anchor: Option<Anchor>,
    kind: String,
    payload: Value,
    salience: f32,
    evidence: Vec<String>,
    assertions: Vec<AssertionFormat3>,
    idempotency_key: Option<String>,
}

/// [`Assertion`] as formats 1 to 4 stored it (the same variants, in the same order).
#[derive(Deserialize)]
enum AssertionFormat3 {
    UpsertNode(NodeUpsert),
    UpsertEdge(EdgeUpsertFormat3),
    RetractNode {
        key: String,
    },
    RetractEdge {
        from: String,
        relation: String,
        to: String,
    },
}

/// [`EdgeUpsert`] before `last_seen`.
#[derive(Deserialize)]
struct EdgeUpsertFormat3 {
    from: String,
    relation: String,
    to: String,
    confidence: Option<f32>,
    props: Props,
    valid_from: Option<i64>,
    valid_to: Option<i64>,
}

impl From<AssertionFormat3> for Assertion {
    fn from(a: AssertionFormat3) -> Self {
        match a {
            AssertionFormat3::UpsertNode(n) => Assertion::UpsertNode(n),
            AssertionFormat3::UpsertEdge(e) => Assertion::UpsertEdge(EdgeUpsert {
                from: e.from,
                relation: e.relation,
                to: e.to,
                confidence: e.confidence,
                props: e.props,
                valid_from: e.valid_from,
                valid_to: e.valid_to,
                last_seen: None,
            }),
            AssertionFormat3::RetractNode { key } => Assertion::RetractNode { key },
            AssertionFormat3::RetractEdge { from, relation, to } => {
                Assertion::RetractEdge { from, relation, to }
            }
        }
    }
}

impl From<EventFormat3> for Event {
    fn from(e: EventFormat3) -> Self {
        Event {
            seq: e.seq,
            recorded_at: e.recorded_at,
            ts: e.ts,
            actor: e.actor,
            place: e.place,
            anchor: e.anchor,
            kind: e.kind,
            payload: e.payload,
            salience: e.salience,
            evidence: e.evidence,
            assertions: e.assertions.into_iter().map(Assertion::from).collect(),
            idempotency_key: e.idempotency_key,
        }
    }
}

/// Decodes a log record of any readable format.
pub fn decode_event(table: &'static str, bytes: &[u8]) -> Result<Event> {
    match body(table, bytes)? {
        (FORMAT_WITHOUT_CHECKSUM, body) => {
            let e: EventFormat1 = postcard_body(table, &body)?;
            Ok(Event::from(EventFormat3 {
                seq: e.seq,
                recorded_at: e.recorded_at,
                ts: e.ts,
                actor: e.actor,
                place: e.place,
                anchor: e.anchor,
                kind: e.kind,
                payload: e.payload,
                salience: e.salience,
                evidence: e.evidence,
                assertions: e.assertions,
                idempotency_key: None,
            }))
        }
        (FORMAT_EDGES_WITHOUT_SALIENCE | FORMAT_EDGES_WITH_SALIENCE, body) => {
            Ok(Event::from(postcard_body::<EventFormat3>(table, &body)?))
        }
        (_, body) => postcard_body(table, &body),
    }
}

/// The fields of a log record up to its payload, every format alike (formats differ only in
/// what follows: the assertions, and from format 2 the idempotency key): what
/// [`decode_event_up_to_payload`] reads, with the payload read as `P`.
#[derive(Deserialize)]
struct EventUpToPayload<P> {
    seq: u64,
    recorded_at: i64,
    ts: i64,
    actor: String,
    place: Option<String>,
    anchor: Option<Anchor>,
    kind: String,
    payload: P,
    salience: f32,
    evidence: Vec<String>,
}

impl<P: Into<Value>> EventUpToPayload<P> {
    /// The event these fields begin, with what follows them.
    fn into_event(self, assertions: Vec<Assertion>, idempotency_key: Option<String>) -> Event {
        Event {
            seq: self.seq,
            recorded_at: self.recorded_at,
            ts: self.ts,
            actor: self.actor,
            place: self.place,
            anchor: self.anchor,
            kind: self.kind,
            payload: self.payload.into(),
            salience: self.salience,
            evidence: self.evidence,
            assertions,
            idempotency_key,
        }
    }
}

/// A log record of any readable format decoded up to its payload: its assertions and
/// idempotency key are left empty. For a reader of what events say, not what they assert: a
/// day summary restates every node and edge its day asserted, and decoding those was most of
/// reading the summaries of a long history (27k of them, for each context).
pub fn decode_event_up_to_payload(table: &'static str, bytes: &[u8]) -> Result<Event> {
    up_to_payload::<Value>(table, bytes)
}

/// [`decode_event_up_to_payload`] with the payload's digest entry (a summary's restatement
/// of its period's facts, which a memory cover does not show) walked past, not kept: building
/// its maps was most of reading a long history's summaries once their assertions were left.
pub fn decode_event_up_to_payload_without_digest(
    table: &'static str,
    bytes: &[u8],
) -> Result<Event> {
    up_to_payload::<PayloadWithoutDigest>(table, bytes)
}

fn up_to_payload<P: DeserializeOwned + Into<Value>>(
    table: &'static str,
    bytes: &[u8],
) -> Result<Event> {
    let (_, body) = body(table, bytes)?;
    let (e, _): (EventUpToPayload<P>, _) =
        postcard::take_from_bytes(&body).map_err(|e| Error::Corrupt {
            table,
            message: e.to_string(),
        })?;
    Ok(e.into_event(Vec::new(), None))
}

/// A log record of any readable format decoded whole but for its payload's digest entry
/// (walked past, as [`decode_event_up_to_payload_without_digest`] does): one decoding serves
/// a reader of what an event asserts and of what a summary says, where the health check had
/// decoded every event whole and then read each live summary again (566k reads at 980k
/// events, each a read transaction of its own).
pub fn decode_event_without_digest(table: &'static str, bytes: &[u8]) -> Result<Event> {
    decode_event_with_payload_as::<PayloadWithoutDigest>(table, bytes)
}

/// A log record of any readable format decoded whole but for its payload, walked past and
/// read as null: for a reader of what an event asserts (a deletion's pass over forgotten
/// events), where building each payload's maps was most of the decoding.
pub fn decode_event_without_payload(table: &'static str, bytes: &[u8]) -> Result<Event> {
    decode_event_with_payload_as::<PayloadSkipped>(table, bytes)
}

/// A log record decoded whole, its payload read as `P`.
fn decode_event_with_payload_as<P: DeserializeOwned + Into<Value>>(
    table: &'static str,
    bytes: &[u8],
) -> Result<Event> {
    let corrupt = |e: postcard::Error| Error::Corrupt {
        table,
        message: e.to_string(),
    };
    let (format, body) = body(table, bytes)?;
    let (e, rest): (EventUpToPayload<P>, _) = postcard::take_from_bytes(&body).map_err(corrupt)?;
    // What follows the evidence is each format's own (its module documentation).
    let (assertions, rest) = match format {
        FORMAT_EDGES_LAST_SEEN => postcard::take_from_bytes::<Vec<Assertion>>(rest),
        _ => postcard::take_from_bytes::<Vec<AssertionFormat3>>(rest)
            .map(|(a, rest)| (a.into_iter().map(Assertion::from).collect(), rest)),
    }
    .map_err(corrupt)?;
    let (idempotency_key, rest) = match format {
        FORMAT_WITHOUT_CHECKSUM => (None, rest),
        _ => postcard::take_from_bytes::<Option<String>>(rest).map_err(corrupt)?,
    };
    if !rest.is_empty() {
        return Err(Error::Corrupt {
            table,
            message: format!("{} unexpected bytes after the record", rest.len()),
        });
    }
    Ok(e.into_event(assertions, idempotency_key))
}

/// The leading fields of an event record, every format alike: enough to find the few events
/// a pass over the log looks for (deletions) without decoding every payload.
#[derive(Deserialize)]
struct EventHead<'a> {
    seq: u64,
    _recorded_at: i64,
    _ts: i64,
    _actor: &'a str,
    #[serde(borrow)]
    _place: Option<&'a str>,
    _anchor: Option<Anchor>,
    kind: &'a str,
}

/// The sequence number and kind of a log record, without decoding the rest of it: a record
/// of format 7 is read from its head, and only one of formats 4 and 6 expanded first.
pub fn peek_event_kind(table: &'static str, bytes: &[u8]) -> Result<(u64, String)> {
    let corrupt = |e: postcard::Error| Error::Corrupt {
        table,
        message: e.to_string(),
    };
    let (v, body) = checked_body(table, bytes)?;
    if v == FORMAT_COMPRESSED {
        let (head, _, _) = head_and_frame(table, body)?;
        let fields = event_head(table, head)?;
        return Ok((fields.seq, fields.kind.to_string()));
    }
    let (_, body) = expanded(table, v, body)?;
    let (fields, _): (EventHead<'_>, _) = postcard::take_from_bytes(&body).map_err(corrupt)?;
    Ok((fields.seq, fields.kind.to_string()))
}

/// Appends `v` as a varint (seven bits a byte, low first, as postcard writes lengths).
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A postcard varint at the start of `r`, which moves past it.
pub(crate) fn take_varint(r: &mut &[u8]) -> Option<usize> {
    let (mut v, mut shift) = (0usize, 0u32);
    loop {
        let (&b, rest) = r.split_first()?;
        *r = rest;
        v |= usize::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

/// A postcard string's bytes (its length as a varint, then the bytes) at the start of `r`,
/// which moves past them.
pub(crate) fn take_bytes<'a>(r: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = take_varint(r)?;
    let (bytes, rest) = (r.get(..len)?, r.get(len..)?);
    *r = rest;
    Some(bytes)
}

/// The hash of what an on-disk layout is keyed by: the snapshot's key table lays its slots out
/// by it, and the full-text index keeps it of each name form (`text::name_term`). Fixed for
/// good (a format records it), unlike a process-seeded hash: 8 bytes at a time, each
/// multiplied in, then murmur3's finaliser.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventDraft;
    use std::collections::BTreeMap;

    #[test]
    fn refuses_unknown_version() {
        let mut bytes = encode(&42u64);
        assert_eq!(decode::<u64>("t", &bytes).unwrap(), 42);
        bytes[0] = 9;
        let err = decode::<u64>("t", &bytes).unwrap_err().to_string();
        assert!(err.contains("format 9"), "{err}");
    }

    /// What [`decode_event_up_to_payload`] gives of a record `decode_event` reads as `event`.
    fn up_to_payload(mut event: Event) -> Event {
        event.assertions.clear();
        event.idempotency_key = None;
        event
    }

    #[test]
    fn a_record_read_up_to_its_payload_is_the_whole_read_less_its_assertions() {
        let mut draft = EventDraft::new(7, "loci", "SUMMARY");
        draft.place = Some("village:0:0".into());
        draft.payload = Value::from("Day 3: traded twice");
        draft.evidence = vec!["e1".into()];
        draft.idempotency_key = Some("k".into());
        draft.assertions = (0..50)
            .map(|i| {
                Assertion::UpsertNode(NodeUpsert {
                    key: format!("node:{i}"),
                    name: Some(format!("node {i} with a long enough name to be compressed")),
                    ..Default::default()
                })
            })
            .collect();
        let event = Event::from_draft(3, 1000, draft);
        // Whole and compressed records alike.
        for bytes in [encode(&event), encode_event(&event)] {
            assert_eq!(decode_event("log", &bytes).unwrap(), event);
            assert_eq!(
                decode_event_up_to_payload("log", &bytes).unwrap(),
                up_to_payload(event.clone())
            );
            // A payload without a digest: read without one, the whole event.
            assert_eq!(decode_event_without_digest("log", &bytes).unwrap(), event);
        }
        // Bytes past the record are refused, as a whole read refuses them.
        let mut longer = encode(&event);
        longer.push(0);
        let crc = crc32fast::hash(&longer[5..]);
        longer[1..5].copy_from_slice(&crc.to_le_bytes());
        let err = decode_event_without_digest("log", &longer).unwrap_err();
        assert!(err.to_string().contains("1 unexpected bytes"), "{err}");
    }

    #[test]
    fn a_summary_read_without_its_digest_keeps_every_other_entry_and_field() {
        let nested = |depth: usize| {
            let mut v = Value::from("deepest");
            for _ in 0..depth {
                v = Value::List(vec![v]);
            }
            v
        };
        // A digest of every kind of value, and entries sorted after it that must still be read.
        let digest = Value::Map(BTreeMap::from([
            ("a".to_string(), Value::Null),
            ("b".to_string(), Value::Bool(true)),
            ("c".to_string(), Value::Int(-7)),
            ("d".to_string(), Value::Float(0.25)),
            ("e".to_string(), Value::from("text")),
            ("f".to_string(), nested(100)),
            (
                "g".to_string(),
                Value::Map(BTreeMap::from([("x".into(), Value::Int(1))])),
            ),
        ]));
        let payload = |with_digest: bool| {
            let mut m = BTreeMap::from([
                ("children".to_string(), Value::List(vec![Value::Int(1)])),
                ("end".to_string(), Value::Int(9)),
                ("text".to_string(), Value::from("Day 3")),
            ]);
            if with_digest {
                m.insert("digest".into(), digest.clone());
            }
            Value::Map(m)
        };
        let mut draft = EventDraft::new(7, "loci", "SUMMARY");
        draft.payload = payload(true);
        draft.evidence = vec!["after the payload".into()];
        draft.salience = Some(0.75);
        // What follows the payload, which a read without the digest alone keeps.
        draft.assertions = vec![Assertion::UpsertNode(NodeUpsert {
            key: "node:after".into(),
            pinned: Some(true),
            ..Default::default()
        })];
        draft.idempotency_key = Some("k".into());
        let event = Event::from_draft(3, 1000, draft);
        let mut whole = event.clone();
        whole.payload = payload(false);
        let expected = up_to_payload(whole.clone());
        for bytes in [encode(&event), encode_event(&event)] {
            assert_eq!(
                decode_event_up_to_payload_without_digest("log", &bytes).unwrap(),
                expected
            );
            assert_eq!(decode_event_without_digest("log", &bytes).unwrap(), whole);
            // Without the payload: every other field, what follows the payload too.
            let mut without = event.clone();
            without.payload = Value::Null;
            assert_eq!(
                decode_event_without_payload("log", &bytes).unwrap(),
                without
            );
        }
        // A payload nested past what a stored value may be is refused there too.
        let mut deepest = event.clone();
        deepest.payload = nested(300);
        let err = decode_event_without_payload("log", &encode(&deepest)).unwrap_err();
        assert!(matches!(err, Error::Corrupt { table: "log", .. }), "{err}");
        // A payload that is not a map is read whole.
        let plain = Event::from_draft(4, 1000, EventDraft::new(7, "loci", "SAW"));
        assert_eq!(
            decode_event_up_to_payload_without_digest("log", &encode(&plain)).unwrap(),
            up_to_payload(plain)
        );
        // A digest nested past what a stored value may be is refused, not walked without end.
        let mut deep = event.clone();
        deep.payload = Value::Map(BTreeMap::from([("digest".to_string(), nested(300))]));
        let err = decode_event_up_to_payload_without_digest("log", &encode(&deep)).unwrap_err();
        assert!(matches!(err, Error::Corrupt { table: "log", .. }), "{err}");
        // (postcard keeps no message: a depth within the bound reads.)
        deep.payload = Value::Map(BTreeMap::from([("digest".to_string(), nested(250))]));
        assert!(decode_event_up_to_payload_without_digest("log", &encode(&deep)).is_ok());
    }

    #[test]
    fn checksum_catches_any_flipped_byte_of_a_record() {
        let mut draft = EventDraft::new(7, "steve", "trade");
        draft.payload = Value::from("three emeralds for sixteen sticks");
        let event = Event::from_draft(3, 1000, draft);
        let bytes = encode(&event);
        assert_eq!(decode_event("log", &bytes).unwrap(), event);
        for i in 1..bytes.len() {
            for bit in [0x01u8, 0x80] {
                let mut damaged = bytes.clone();
                damaged[i] ^= bit;
                let err = decode_event("log", &damaged)
                    .expect_err(&format!("byte {i} bit {bit:#x} flipped was accepted"));
                assert!(matches!(err, Error::Corrupt { table: "log", .. }), "{err}");
            }
        }
        // A truncated record or one with bytes appended is refused too.
        assert!(decode_event("log", &bytes[..bytes.len() - 1]).is_err());
        assert!(decode_event("log", &bytes[..3]).is_err());
    }

    #[test]
    fn peeking_an_event_kind_matches_the_full_decode() {
        let mut draft = EventDraft::new(-5, "steve", "DELETE");
        draft.place = Some("home".into());
        draft.payload = Value::from("x");
        let event = Event::from_draft(9, 1000, draft);
        let bytes = encode(&event);
        assert_eq!(
            peek_event_kind("log", &bytes).unwrap(),
            (9, "DELETE".to_string())
        );
        let mut damaged = bytes.clone();
        damaged[7] ^= 1;
        assert!(peek_event_kind("log", &damaged).is_err());
    }

    /// An import event of `n` edge assertions, as a bulk load writes them.
    fn import_event(n: usize) -> Event {
        let mut draft = EventDraft::new(7, "bench", "IMPORT");
        draft.assertions = (0..n)
            .map(|i| {
                Assertion::UpsertEdge(crate::model::EdgeUpsert {
                    from: format!("n{i}"),
                    relation: format!("R{}", i % 8),
                    to: format!("n{}", i * 7 % 1000),
                    confidence: Some((i % 10) as f32 / 10.0),
                    ..Default::default()
                })
            })
            .collect();
        Event::from_draft(12, 1000, draft)
    }

    #[test]
    fn a_large_log_record_is_compressed_and_a_small_one_is_not() {
        let event = import_event(1000);
        let plain = encode(&event);
        let bytes = encode_event(&event);
        assert_eq!(bytes[0], FORMAT_COMPRESSED);
        assert!(
            bytes.len() * 2 < plain.len(),
            "{} compressed bytes of {}",
            bytes.len(),
            plain.len()
        );
        assert_eq!(decode_event("log", &bytes).unwrap(), event);
        assert_eq!(
            peek_event_kind("log", &bytes).unwrap(),
            (12, "IMPORT".to_string())
        );
        let small = import_event(2);
        assert_eq!(encode_event(&small), encode(&small));
    }

    #[test]
    fn a_damaged_compressed_record_is_refused() {
        let bytes = encode_event(&import_event(200));
        assert_eq!(bytes[0], FORMAT_COMPRESSED);
        for i in 1..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x04;
            let err =
                decode_event("log", &damaged).expect_err(&format!("byte {i} flipped was accepted"));
            assert!(matches!(err, Error::Corrupt { table: "log", .. }), "{err}");
        }
        assert!(decode_event("log", &bytes[..bytes.len() - 1]).is_err());
        assert!(decode_event("log", &bytes[..7]).is_err());
        // A length that lies, the head's or the tail's, under a checksum recomputed to match:
        // too short, too long, and more than a record may expand to. Each is refused before
        // or by the expansion, and a peek at the kind refuses the head's.
        let head_len = u32::from_le_bytes(bytes[5..9].try_into().unwrap()) as usize;
        for (at, peeked) in [(5, true), (9 + head_len, false)] {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            for lie in [len - 1, len + 1, u32::MAX] {
                let mut forged = bytes.clone();
                forged[at..at + 4].copy_from_slice(&lie.to_le_bytes());
                let crc = crc32fast::hash(&forged[5..]);
                forged[1..5].copy_from_slice(&crc.to_le_bytes());
                assert!(
                    decode_event("log", &forged).is_err(),
                    "length {lie} at {at} was accepted"
                );
                if peeked {
                    assert!(
                        peek_event_kind("log", &forged).is_err(),
                        "head length {lie} was accepted by a peek"
                    );
                }
            }
        }
    }

    /// A peek at a compressed record's kind reads its head, kept apart, and does not expand
    /// its frame (a replay's first pass, looking for deletions, had expanded every record
    /// whole: a quarter of a deletion's time on a forgotten store). Shown by a frame that
    /// cannot expand, under a right checksum: the peek answers, the full read refuses.
    #[test]
    fn a_peek_at_a_compressed_records_kind_reads_its_head_not_its_frame() {
        let bytes = encode_event(&import_event(300));
        assert_eq!(bytes[0], FORMAT_COMPRESSED);
        let head_len = u32::from_le_bytes(bytes[5..9].try_into().unwrap()) as usize;
        let frame_at = 13 + head_len;
        let mut forged = bytes.clone();
        for b in &mut forged[frame_at..] {
            *b = 0xa5;
        }
        let crc = crc32fast::hash(&forged[5..]);
        forged[1..5].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            peek_event_kind("log", &forged).unwrap(),
            (12, "IMPORT".to_string())
        );
        assert!(decode_event("log", &forged).is_err());
    }

    /// A format-7 record whose head ends elsewhere than after its kind (its head length moved
    /// by one, the rest recompressed to match, under a right checksum) is refused by a full
    /// read as by a peek: the two never disagree on a record (the codec's fuzz target).
    #[test]
    fn a_compressed_record_whose_head_ends_elsewhere_is_refused_by_every_read() {
        let event = import_event(300);
        let body = postcard::to_stdvec(&event).unwrap();
        let head_len = head_length(&body).unwrap();
        for cut in [head_len - 1, head_len + 1] {
            let (head, tail) = body.split_at(cut);
            let frame = compress(tail).unwrap();
            let mut forged = vec![FORMAT_COMPRESSED, 0, 0, 0, 0];
            forged.extend_from_slice(&(head.len() as u32).to_le_bytes());
            forged.extend_from_slice(head);
            forged.extend_from_slice(&(tail.len() as u32).to_le_bytes());
            forged.extend_from_slice(&frame);
            let crc = crc32fast::hash(&forged[5..]);
            forged[1..5].copy_from_slice(&crc.to_le_bytes());
            assert!(decode_event("log", &forged).is_err(), "cut at {cut}");
            assert!(peek_event_kind("log", &forged).is_err(), "cut at {cut}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Damage to a record of any format this build writes (bytes changed, the record cut
        /// short, and the checksum made right again, as a fuzzer makes it): every reader
        /// refuses it or decodes it, none panics, and a full read and a peek at the kind
        /// agree (the record codec's fuzz target, `fuzz/fuzz_targets/record_codec.rs`, runs
        /// the same checks on any bytes).
        #[test]
        fn a_damaged_record_is_refused_or_read_alike_by_every_reader(
            edges in proptest::prop_oneof![proptest::strategy::Just(2usize), proptest::strategy::Just(300)],
            changes in proptest::collection::vec((0usize..4096, proptest::prelude::any::<u8>()), 1..4),
            cut in proptest::option::of(0usize..4096),
            fix_checksum in proptest::prelude::any::<bool>(),
        ) {
            let mut bytes = encode_event(&import_event(edges));
            for (at, b) in changes {
                let at = at % bytes.len();
                bytes[at] = b;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut % (bytes.len() + 1));
            }
            if fix_checksum && bytes.len() > 5 {
                let crc = crc32fast::hash(&bytes[5..]);
                bytes[1..5].copy_from_slice(&crc.to_le_bytes());
            }
            let full = decode_event("log", &bytes);
            let peek = peek_event_kind("log", &bytes);
            let _ = decode_event_up_to_payload("log", &bytes);
            let _ = decode_event_without_digest("log", &bytes);
            let _ = decode_event_without_payload("log", &bytes);
            if let Ok(event) = full {
                let (seq, kind) = peek.expect("a record read whole is read by a peek");
                proptest::prop_assert_eq!((seq, kind), (event.seq, event.kind));
            }
        }
    }

    /// Format 6 (the whole body compressed, as builds before format 7 wrote a large record)
    /// reads as it was written, whole and by a peek at its kind.
    #[test]
    fn reads_format_6_records_compressed_whole() {
        let event = import_event(1000);
        let body = postcard::to_stdvec(&event).unwrap();
        let frame = compress(&body).unwrap();
        let mut packed = vec![FORMAT_COMPRESSED_WHOLE, 0, 0, 0, 0];
        packed.extend_from_slice(&(body.len() as u32).to_le_bytes());
        packed.extend_from_slice(&frame);
        let crc = crc32fast::hash(&packed[5..]);
        packed[1..5].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_event("log", &packed).unwrap(), event);
        assert_eq!(decode_event_without_digest("log", &packed).unwrap(), event);
        assert_eq!(
            decode_event_up_to_payload("log", &packed).unwrap(),
            up_to_payload(event.clone())
        );
        assert_eq!(
            peek_event_kind("log", &packed).unwrap(),
            (12, "IMPORT".to_string())
        );
        // And this build writes the same event as format 7, read back the same.
        let written = encode_event(&event);
        assert_eq!(written[0], FORMAT_COMPRESSED);
        assert_eq!(decode_event("log", &written).unwrap(), event);
        assert_eq!(
            decode_event_up_to_payload("log", &written).unwrap(),
            up_to_payload(event)
        );
    }

    #[test]
    fn reads_format_1_records_written_before_checksums_and_idempotency_keys() {
        // Format 1 bytes as the previous build wrote them: format byte, then postcard.
        let mut draft = EventDraft::new(-5, "alex", "death");
        draft.place = Some("place:cave".into());
        draft.evidence = vec!["obs:1".into()];
        let event = Event::from_draft(9, 123, draft);
        let old = EventFormat1Writer::from(&event);
        let bytes = postcard::to_extend(&old, vec![1u8]).unwrap();
        assert_eq!(decode_event("log", &bytes).unwrap(), event);
        assert_eq!(decode_event_without_digest("log", &bytes).unwrap(), event);
        assert_eq!(
            decode_event_up_to_payload("log", &bytes).unwrap(),
            up_to_payload(event)
        );
        let n = postcard::to_extend(&42u32, vec![1u8]).unwrap();
        assert_eq!(decode::<u32>("meta", &n).unwrap(), 42);
    }

    /// Records of formats 3 and 4 (a large one, compressed), whose edge upserts have no
    /// `last_seen`, read as they were: each upsert without one.
    #[test]
    fn reads_format_3_and_4_records_written_before_edges_said_when_they_were_seen() {
        for n in [2, 1000] {
            let event = import_event(n);
            let old = EventFormat3Writer::from(&event);
            let body = postcard::to_stdvec(&old).unwrap();
            let mut plain = vec![FORMAT_EDGES_WITH_SALIENCE, 0, 0, 0, 0];
            plain.extend_from_slice(&body);
            let crc = crc32fast::hash(&plain[5..]);
            plain[1..5].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(decode_event("log", &plain).unwrap(), event, "format 3");
            assert_eq!(
                decode_event_without_digest("log", &plain).unwrap(),
                event,
                "format 3"
            );
            assert_eq!(
                decode_event_up_to_payload("log", &plain).unwrap(),
                up_to_payload(event.clone()),
                "format 3"
            );
            if n > 2 {
                let frame = compress(&body).unwrap();
                let mut packed = vec![FORMAT_COMPRESSED_3, 0, 0, 0, 0];
                packed.extend_from_slice(&(body.len() as u32).to_le_bytes());
                packed.extend_from_slice(&frame);
                let crc = crc32fast::hash(&packed[5..]);
                packed[1..5].copy_from_slice(&crc.to_le_bytes());
                assert_eq!(decode_event("log", &packed).unwrap(), event, "format 4");
                assert_eq!(
                    decode_event_without_digest("log", &packed).unwrap(),
                    event,
                    "format 4"
                );
                assert_eq!(
                    decode_event_up_to_payload("log", &packed).unwrap(),
                    up_to_payload(event.clone()),
                    "format 4"
                );
            }
        }
        // This build's records say when an edge was seen, and read back as written.
        let mut event = import_event(3);
        if let Assertion::UpsertEdge(up) = &mut event.assertions[1] {
            up.last_seen = Some(-7);
        }
        let bytes = encode_event(&event);
        assert_eq!(bytes[0], RECORD_FORMAT);
        assert_eq!(decode_event("log", &bytes).unwrap(), event);
        assert_eq!(decode_event_without_digest("log", &bytes).unwrap(), event);
    }

    /// The format-3 shape, for writing test records.
    #[derive(Serialize)]
    struct EventFormat3Writer<'a> {
        seq: u64,
        recorded_at: i64,
        ts: i64,
        actor: &'a str,
        place: &'a Option<String>,
        anchor: &'a Option<Anchor>,
        kind: &'a str,
        payload: &'a Value,
        salience: f32,
        evidence: &'a [String],
        assertions: Vec<AssertionFormat3Writer<'a>>,
        idempotency_key: &'a Option<String>,
    }

    #[derive(Serialize)]
    enum AssertionFormat3Writer<'a> {
        UpsertNode(&'a NodeUpsert),
        UpsertEdge {
            from: &'a str,
            relation: &'a str,
            to: &'a str,
            confidence: Option<f32>,
            props: &'a Props,
            valid_from: Option<i64>,
            valid_to: Option<i64>,
        },
    }

    impl<'a> From<&'a Event> for EventFormat3Writer<'a> {
        fn from(e: &'a Event) -> Self {
            let assertions = e
                .assertions
                .iter()
                .map(|a| match a {
                    Assertion::UpsertNode(n) => AssertionFormat3Writer::UpsertNode(n),
                    Assertion::UpsertEdge(u) => AssertionFormat3Writer::UpsertEdge {
                        from: &u.from,
                        relation: &u.relation,
                        to: &u.to,
                        confidence: u.confidence,
                        props: &u.props,
                        valid_from: u.valid_from,
                        valid_to: u.valid_to,
                    },
                    other => panic!("no writer for {other:?}"),
                })
                .collect();
            EventFormat3Writer {
                seq: e.seq,
                recorded_at: e.recorded_at,
                ts: e.ts,
                actor: &e.actor,
                place: &e.place,
                anchor: &e.anchor,
                kind: &e.kind,
                payload: &e.payload,
                salience: e.salience,
                evidence: &e.evidence,
                assertions,
                idempotency_key: &e.idempotency_key,
            }
        }
    }

    /// The format-1 shape, for writing test records.
    #[derive(Serialize)]
    struct EventFormat1Writer<'a> {
        seq: u64,
        recorded_at: i64,
        ts: i64,
        actor: &'a str,
        place: &'a Option<String>,
        anchor: &'a Option<Anchor>,
        kind: &'a str,
        payload: &'a Value,
        salience: f32,
        evidence: &'a [String],
        assertions: &'a [Assertion],
    }

    impl<'a> From<&'a Event> for EventFormat1Writer<'a> {
        fn from(e: &'a Event) -> Self {
            EventFormat1Writer {
                seq: e.seq,
                recorded_at: e.recorded_at,
                ts: e.ts,
                actor: &e.actor,
                place: &e.place,
                anchor: &e.anchor,
                kind: &e.kind,
                payload: &e.payload,
                salience: e.salience,
                evidence: &e.evidence,
                assertions: &e.assertions,
            }
        }
    }
}
