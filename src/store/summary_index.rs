//! The summary index: where each summary of the log lies (its level, range and sequence
//! number) and which events a day summary names as its children, read without decoding a
//! summary.
//!
//! Which summaries a later one replaced (what a search, a timeline and retrieval leave out,
//! `crate::dynamics::consolidate::live`) follows from those alone. Read from the log, they
//! cost every summary decoded: the first search of a store of 115k events consolidated into
//! 157k summaries took 7.6 s and 380 MB, and a consolidation with nothing to do 72 s. From
//! this index they are a scan of keys.
//!
//! Its entries are keys of the episodic index's table (`event_facet`) under facet bytes of
//! their own, made by [`super::facet_keys`] with an event's other facet keys: every path that
//! appends an event, deletes one, verifies the indexes or rebuilds them handles them as it
//! handles those, and none can miss one.
//!
//! Layout: a summary is `[b's', level (0 episode, 1 day, 2 week), start, seq, end]`, each
//! child a day summary names `[b'c', the day's seq, the child's seq]`; times as the time
//! index keys them (sign bit flipped, big-endian), sequence numbers big-endian. Only a day's
//! children are kept: no reader asks for a week's or an episode's.

use std::collections::BTreeMap;

use super::{time_of_key, Store, Table};
use crate::dynamics::consolidate::{summary_head, Level, SUMMARY};
use crate::error::Result;
use crate::model::Event;

/// The facet byte of a summary's entry.
const SUMMARY_BYTE: u8 = b's';
/// The facet byte of a day summary's child.
const CHILD_BYTE: u8 = b'c';

/// Where a summary lies, as the summary index holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummaryEntry {
    pub seq: u64,
    pub level: Level,
    pub start: i64,
    pub end: i64,
}

fn level_byte(level: Level) -> u8 {
    match level {
        Level::Episode => 0,
        Level::Day => 1,
        Level::Week => 2,
    }
}

fn level_of_byte(b: u8) -> Option<Level> {
    match b {
        0 => Some(Level::Episode),
        1 => Some(Level::Day),
        2 => Some(Level::Week),
        _ => None,
    }
}

/// A time as the time index keys it: byte order is numeric order.
fn time_bytes(ts: i64) -> [u8; 8] {
    ((ts as u64) ^ (1 << 63)).to_be_bytes()
}

/// The summary index's keys of `ev`: none unless it is a summary that reads as one.
pub(super) fn keys(ev: &Event) -> Vec<Vec<u8>> {
    if ev.kind != SUMMARY {
        return Vec::new();
    }
    let Some(head) = summary_head(&ev.payload) else {
        return Vec::new();
    };
    let mut entry = Vec::with_capacity(26);
    entry.push(SUMMARY_BYTE);
    entry.push(level_byte(head.level));
    entry.extend_from_slice(&time_bytes(head.start));
    entry.extend_from_slice(&ev.seq.to_be_bytes());
    entry.extend_from_slice(&time_bytes(head.end));
    let mut keys = vec![entry];
    if head.level == Level::Day {
        for child in head.children {
            let mut k = Vec::with_capacity(17);
            k.push(CHILD_BYTE);
            k.extend_from_slice(&ev.seq.to_be_bytes());
            k.extend_from_slice(&child.to_be_bytes());
            keys.push(k);
        }
    }
    keys
}

fn seq_at(k: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(k.get(at..at + 8)?.try_into().ok()?))
}

fn entry_of_key(k: &[u8]) -> Option<SummaryEntry> {
    Some(SummaryEntry {
        level: level_of_byte(*k.get(1)?)?,
        start: time_of_key(k.get(2..10)?)?,
        seq: seq_at(k, 10)?,
        end: time_of_key(k.get(18..26)?)?,
    })
}

fn corrupt(store: &Store, what: &str) -> crate::error::Error {
    crate::error::Error::Corrupt {
        table: Table::EventFacet.name(),
        message: format!(
            "{}: a summary index key is {what}: the index is damaged; `loci repair` rebuilds it from the log",
            store.backend.kind().path_in(&store.dir).display()
        ),
    }
}

impl Store {
    /// The error of a summary index entry that places summary `seq` otherwise than the
    /// summary says it lies (`placed`, `says`: level, start and end).
    pub(crate) fn misplaced_summary(
        &self,
        seq: u64,
        placed: (Level, i64, i64),
        says: (Level, i64, i64),
    ) -> crate::error::Error {
        corrupt(
            self,
            &format!(
                "for summary {seq} at {placed:?} (level, start, end), and the summary says \
                 {says:?}"
            ),
        )
    }

    /// Every summary of the log (deleted ones left out), by level, then start, then sequence
    /// number: read from the summary index, no summary decoded.
    pub fn summary_entries(&self) -> Result<Vec<SummaryEntry>> {
        let mut out = Vec::new();
        self.backend.scan(
            Table::EventFacet,
            &[SUMMARY_BYTE],
            Some(&[SUMMARY_BYTE + 1]),
            &mut |k, _| {
                out.push(entry_of_key(k).ok_or_else(|| corrupt(self, "too short or of no level"))?);
                Ok(true)
            },
        )?;
        let state = self.read_state();
        let last = state.counters.last_seq;
        // The index can be ahead of a reader opened beside a writer: what its log position
        // does not hold is not yet the reader's.
        out.retain(|e| e.seq <= last && !state.deleted.contains(&e.seq));
        Ok(out)
    }

    /// The children each day summary of the log names, by the day's sequence number: read
    /// from the summary index.
    pub fn day_summary_children(&self) -> Result<BTreeMap<u64, Vec<u64>>> {
        let mut out: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        self.backend.scan(
            Table::EventFacet,
            &[CHILD_BYTE],
            Some(&[CHILD_BYTE + 1]),
            &mut |k, _| {
                let (Some(day), Some(child)) = (seq_at(k, 1), seq_at(k, 9)) else {
                    return Err(corrupt(self, "too short for a day and its child"));
                };
                out.entry(day).or_default().push(child);
                Ok(true)
            },
        )?;
        Ok(out)
    }

    /// For each `(day, child)` of `pairs` (sorted), whether day summary `day` names `child`
    /// as one of its children: one scan of the days' children, from the first day asked to
    /// the last, not a lookup for each.
    pub(crate) fn named_by_their_days(&self, pairs: &[(u64, u64)]) -> Result<Vec<bool>> {
        let mut named = vec![false; pairs.len()];
        let (Some(first), Some(last)) = (pairs.first(), pairs.last()) else {
            return Ok(named);
        };
        let key_of = |day: u64| {
            let mut k = vec![CHILD_BYTE];
            k.extend_from_slice(&day.to_be_bytes());
            k
        };
        let end = match last.0.checked_add(1) {
            Some(after) => key_of(after),
            None => vec![CHILD_BYTE + 1],
        };
        let mut at = 0usize;
        self.backend.scan(
            Table::EventFacet,
            &key_of(first.0),
            Some(&end),
            &mut |k, _| {
                let (Some(day), Some(child)) = (seq_at(k, 1), seq_at(k, 9)) else {
                    return Err(corrupt(self, "too short for a day and its child"));
                };
                while pairs.get(at).is_some_and(|p| *p < (day, child)) {
                    at += 1;
                }
                if pairs.get(at) == Some(&(day, child)) {
                    named[at] = true;
                    at += 1;
                }
                Ok(at < pairs.len())
            },
        )?;
        Ok(named)
    }
}
