//! The event log as the backend holds it: each event's record (`codec::encode_event`) under
//! its sequence number, or, when longer than [`CHUNK`] bytes, cut into chunks under the
//! sequence number and each chunk's number. Every read and write of the `log` table goes
//! through here.
//!
//! Why chunks: redb gives a value of more than half a page a run of pages of its own, rounded
//! up to a power of two, so a bulk load's records of a thousand edges (10 to 19 kB once
//! compressed) took 16 or 32 kB each: 8.7 MB of overhead on 13.8 MB of records at 1M edges.
//! Chunks of 1,000 bytes fill redb's 4 KiB leaves four at a time with their 12-byte keys (7%
//! overhead on records of 6 to 19 kB, where chunks of 512, 1,024 or 2,030 bytes left 13, 30
//! and 89%: a fifth chunk just does not fit). An agent's event, a few hundred bytes, is one
//! value as before.
//!
//! Keys: the sequence number (8 bytes, big-endian) for a whole record; the sequence number
//! then the chunk's number (4 bytes, big-endian, from 0) for a chunk, so a record's chunks
//! lie together and in order, after any whole record of a lower sequence number and before
//! the next. Stores of format 2 and before hold whole records only, which read as they are.

use crate::error::{Error, Result};
use crate::model::Event;
use crate::storage::{Backend, Table, WriteBatch};

/// The longest record kept whole, and the length of each chunk of a longer one.
pub(crate) const CHUNK: usize = 1_000;

const TABLE: Table = Table::Log;

fn corrupt(message: String) -> Error {
    Error::Corrupt {
        table: TABLE.name(),
        message,
    }
}

/// Names event `seq` in a damaged record's error from the `log` table, so the user can tell
/// which record to restore (the storage guard adds the file).
pub(crate) fn at_event(seq: u64) -> impl FnOnce(Error) -> Error {
    move |e| match e {
        Error::Corrupt { table, message } if table == TABLE.name() => Error::Corrupt {
            table,
            message: format!("event {seq}: {message}"),
        },
        e => e,
    }
}

/// Refuses `ev`, decoded from the record under `seq`, when it is another event: a record's
/// key is damaged. Both a read by number and a pass over the log ask it.
pub(crate) fn is_the_record_of(seq: u64, ev: Event) -> Result<Event> {
    if ev.seq != seq {
        return Err(corrupt(format!(
            "its record is event {}'s: a record's key is damaged",
            ev.seq
        )));
    }
    Ok(ev)
}

/// The key of a chunk.
fn chunk_key(seq: u64, chunk: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(12);
    k.extend_from_slice(&seq.to_be_bytes());
    k.extend_from_slice(&chunk.to_be_bytes());
    k
}

/// Puts the record `bytes` of event `seq` into `batch`.
pub(crate) fn put(batch: &mut WriteBatch, seq: u64, bytes: Vec<u8>) {
    if bytes.len() <= CHUNK {
        batch.put(TABLE, seq.to_be_bytes(), bytes);
        return;
    }
    for (i, part) in bytes.chunks(CHUNK).enumerate() {
        // A record is at most a few hundred megabytes: fewer chunks than u32 counts.
        batch.put(TABLE, chunk_key(seq, i as u32), part.to_vec());
    }
}

/// Assembles records from the entries of the table, in key order.
#[derive(Default)]
struct Assembler {
    seq: u64,
    next_chunk: u32,
    bytes: Vec<u8>,
}

impl Assembler {
    /// Takes one entry; gives a whole record (its seq and bytes) when the entry is one, or
    /// completes the record the chunks before it began. A record in chunks is complete when
    /// an entry of another seq follows it, or the scan ends ([`Assembler::flush`]).
    fn take(
        &mut self,
        key: &[u8],
        value: &[u8],
        done: &mut dyn FnMut(u64, &[u8]) -> Result<bool>,
    ) -> Result<bool> {
        match key.len() {
            8 => {
                let seq = u64::from_be_bytes(key.try_into().unwrap_or_default());
                if !self.flush(done)? {
                    return Ok(false);
                }
                done(seq, value)
            }
            12 => {
                let seq = u64::from_be_bytes(key[..8].try_into().unwrap_or_default());
                let chunk = u32::from_be_bytes(key[8..].try_into().unwrap_or_default());
                if self.next_chunk > 0 && seq != self.seq && !self.flush(done)? {
                    return Ok(false);
                }
                if chunk != self.next_chunk || (chunk > 0 && seq != self.seq) {
                    return Err(corrupt(format!(
                        "chunk {chunk} of event {seq} where chunk {} was due",
                        self.next_chunk
                    )));
                }
                self.seq = seq;
                self.next_chunk += 1;
                self.bytes.extend_from_slice(value);
                Ok(true)
            }
            n => Err(corrupt(format!("a key of {n} bytes, expected 8 or 12"))),
        }
    }

    /// Gives the record the chunks so far make, if any; `false` when `done` says to stop.
    fn flush(&mut self, done: &mut dyn FnMut(u64, &[u8]) -> Result<bool>) -> Result<bool> {
        if self.next_chunk == 0 {
            return Ok(true);
        }
        self.next_chunk = 0;
        let bytes = std::mem::take(&mut self.bytes);
        let go_on = done(self.seq, &bytes)?;
        // The buffer is kept for the next record's chunks.
        self.bytes = bytes;
        self.bytes.clear();
        Ok(go_on)
    }
}

/// Calls `visit` with each event's sequence number and record, from event `from` on, in log
/// order, until it returns `false`.
pub(crate) fn scan(
    backend: &dyn Backend,
    from: u64,
    visit: &mut dyn FnMut(u64, &[u8]) -> Result<bool>,
) -> Result<()> {
    let mut assembler = Assembler::default();
    let mut stopped = false;
    // Every sequence number is in the log, in order (a deleted event's record stays, or its
    // tombstone): a record out of turn is under a damaged key, which a B-tree leaf keeps in
    // place, so a scan met it between its neighbours and read it as the event it holds.
    let mut due = from.max(1);
    let visit = &mut |seq: u64, bytes: &[u8]| {
        if seq != due {
            return Err(corrupt(format!(
                "event {seq} where event {due} was due: a record's key is damaged"
            )));
        }
        due = seq.saturating_add(1);
        visit(seq, bytes).map_err(at_event(seq))
    };
    backend.scan(TABLE, &from.to_be_bytes(), None, &mut |k, v| {
        let go_on = assembler.take(k, v, visit)?;
        stopped = !go_on;
        Ok(go_on)
    })?;
    if !stopped {
        assembler.flush(visit)?;
    }
    Ok(())
}

/// The record of event `seq`, if the log has one.
pub(crate) fn get(backend: &dyn Backend, seq: u64) -> Result<Option<Vec<u8>>> {
    let mut found = None;
    let mut assembler = Assembler::default();
    let mut keep = |s: u64, bytes: &[u8]| {
        if s == seq {
            found = Some(bytes.to_vec());
        }
        Ok(false)
    };
    let mut stopped = false;
    backend.scan(
        TABLE,
        &seq.to_be_bytes(),
        Some(&seq.saturating_add(1).to_be_bytes()),
        &mut |k, v| {
            let go_on = assembler.take(k, v, &mut keep)?;
            stopped = !go_on;
            Ok(go_on)
        },
    )?;
    if !stopped {
        assembler.flush(&mut keep)?;
    }
    Ok(found)
}

/// The events `1..=last` that a lookup by number does not find: how many, and the first
/// `most` of them. A scan walks the table's leaves in order while a lookup descends by the
/// keys of its branch pages, so a damaged key there hides records from every read of an
/// event by number (the timeline, provenance) while a scan, and so a replay, reads them
/// all (helper-111: `replay --verify` said OK on such a store). On every core, each run of
/// numbers in one read transaction: a transaction per lookup cost 2.8 µs an event.
pub(crate) fn missing_from_lookups(
    backend: &dyn Backend,
    last: u64,
    most: usize,
) -> Result<(u64, Vec<u64>)> {
    use rayon::prelude::*;
    const RUN: u64 = 1 << 16;
    let runs: Vec<(u64, Vec<u64>)> = (0..last.div_ceil(RUN))
        .into_par_iter()
        .map(|run| {
            let view = backend.pinned_view()?;
            let view = view.as_deref().unwrap_or(backend);
            let mut missing = 0;
            let mut first = Vec::new();
            for seq in run * RUN + 1..=((run + 1) * RUN).min(last) {
                if !found_by_lookup(view, seq)? {
                    missing += 1;
                    if first.len() < most {
                        first.push(seq);
                    }
                }
            }
            Ok((missing, first))
        })
        .collect::<Result<_>>()?;
    let missing = runs.iter().map(|(n, _)| n).sum();
    let first = runs.into_iter().flat_map(|(_, f)| f).take(most).collect();
    Ok((missing, first))
}

/// Whether a lookup of event `seq` finds its record's first key (whole, or its first chunk):
/// nothing past it is read.
fn found_by_lookup(backend: &dyn Backend, seq: u64) -> Result<bool> {
    let key = seq.to_be_bytes();
    let mut found = false;
    backend.scan(
        TABLE,
        &key,
        Some(&seq.saturating_add(1).to_be_bytes()),
        &mut |k, _| {
            found = k.starts_with(&key);
            Ok(false)
        },
    )?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::BackendKind;

    /// Records of every length around the chunk size, whole and in chunks, read back in
    /// order by a scan and one by one, from any starting point.
    #[test]
    fn records_read_back_whole_and_in_chunks() {
        for kind in [BackendKind::Redb, BackendKind::Sled] {
            let dir = tempfile::tempdir().unwrap();
            let backend = kind.open(dir.path()).unwrap();
            let lengths = [
                0,
                1,
                CHUNK - 1,
                CHUNK,
                CHUNK + 1,
                3 * CHUNK,
                3 * CHUNK + 7,
                20,
            ];
            let records: Vec<Vec<u8>> = lengths
                .iter()
                .enumerate()
                .map(|(i, n)| (0..*n).map(|j| (i * 31 + j) as u8).collect())
                .collect();
            let mut batch = WriteBatch::default();
            for (i, r) in records.iter().enumerate() {
                put(&mut batch, i as u64 + 1, r.clone());
            }
            backend.commit(batch).unwrap();
            for from in 1..=records.len() as u64 {
                let mut seen = Vec::new();
                scan(&*backend, from, &mut |seq, bytes| {
                    seen.push((seq, bytes.to_vec()));
                    Ok(true)
                })
                .unwrap();
                let want: Vec<(u64, Vec<u8>)> = records
                    .iter()
                    .enumerate()
                    .skip(from as usize - 1)
                    .map(|(i, r)| (i as u64 + 1, r.clone()))
                    .collect();
                assert_eq!(seen, want, "{kind:?} from {from}");
            }
            for (i, r) in records.iter().enumerate() {
                assert_eq!(get(&*backend, i as u64 + 1).unwrap().as_ref(), Some(r));
            }
            assert_eq!(get(&*backend, 99).unwrap(), None);
            // A scan told to stop after a record in chunks stops there.
            let mut seen = 0;
            scan(&*backend, 1, &mut |seq, _| {
                seen += 1;
                Ok(seq < 6)
            })
            .unwrap();
            assert_eq!(seen, 6);
        }
    }

    /// A missing or repeated chunk, or a key of another width, is an error, never a record
    /// made of the wrong pieces.
    #[test]
    fn chunks_out_of_order_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let backend = BackendKind::Redb.open(dir.path()).unwrap();
        let mut batch = WriteBatch::default();
        batch.put(TABLE, chunk_key(1, 0), vec![1; CHUNK]);
        batch.put(TABLE, chunk_key(1, 2), vec![1; 5]);
        batch.put(TABLE, chunk_key(2, 1), vec![2; 5]);
        batch.put(TABLE, vec![0; 5], vec![3]);
        backend.commit(batch).unwrap();
        let err = get(&*backend, 1).unwrap_err().to_string();
        assert!(err.contains("chunk 2 of event 1"), "{err}");
        assert!(get(&*backend, 2).is_err());
        assert!(scan(&*backend, 0, &mut |_, _| Ok(true)).is_err());
    }
}
