//! Forgetting: keeping the store within a budget of events by evicting those it can best do
//! without, as a deletion event of reason `forget` (so replay reproduces it; see
//! [`crate::dynamics::deletion`]).
//!
//! **What may be evicted.** Only what a summary keeps the gist of: a raw event that is a child
//! of an episode whose day is summarised, an episode summary whose day summary lives, a day
//! summary whose week summary lives, and summaries that a later one superseded. Never a week
//! summary (the top of the hierarchy), an event not yet consolidated (the open day: the agent's
//! most recent experience), bookkeeping (deletions, pins), or an event that asserts a pinned
//! node. Since day and week summaries re-assert the nodes and edges of their events with the
//! values they had, the facts stay when the raw events go; what decays away is the detail.
//!
//! **Which first.** The lowest retention score, then the oldest (by sequence number):
//!
//! `retention = salience * 0.5 ^ (age / half_life) * (1 + uses)`
//!
//! where `age` is world time since the event and `half_life` 7 days by default
//! ([`RetentionPolicy`]). `uses` counts reads of the event; reads are not yet recorded, so it is
//! 0 for every event until usage tiers land.

use std::collections::{BTreeMap, BTreeSet};

use ordered_float::OrderedFloat;
use serde::{Deserialize, Serialize};

use crate::dynamics::consolidate::{Level, Summary, SUMMARY};
use crate::dynamics::decay::DAY;
use crate::dynamics::deletion::{DeleteRequest, Reason, DELETE, TOMBSTONE};
use crate::error::{Error, Result};
use crate::model::{Assertion, Event};
use crate::store::Store;

/// How retention is scored (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionPolicy {
    /// World time after which recency halves an event's retention.
    pub half_life: f64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            half_life: 7.0 * DAY,
        }
    }
}

impl RetentionPolicy {
    /// The retention score of an event at world time `now`.
    pub fn score(&self, event: &Event, now: i64, uses: u32) -> f64 {
        let age = now.saturating_sub(event.ts).max(0) as f64;
        let recency = if self.half_life > 0.0 {
            0.5f64.powf(age / self.half_life)
        } else {
            1.0
        };
        event.salience as f64 * recency * (1.0 + uses as f64)
    }
}

/// Options of [`forget`].
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct ForgetOptions {
    /// Events the store may hold (not counting deleted ones).
    pub budget: u64,
    pub policy: RetentionPolicy,
    /// "Now" for recency (default: the latest event's time).
    pub now: Option<i64>,
}

impl ForgetOptions {
    pub fn with_budget(budget: u64) -> Self {
        ForgetOptions {
            budget,
            ..ForgetOptions::default()
        }
    }
}

/// What a forgetting did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ForgetReport {
    /// Events held (not deleted) before and after; `after` counts the deletion event itself.
    pub events_before: u64,
    pub events_after: u64,
    pub evicted: usize,
    /// Events that could have been evicted (see the module documentation).
    pub evictable: usize,
    /// Bytes of the store directory before and after (the log keeps evicted records until
    /// `loci compact`).
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// The budget could not be met: too little is evictable.
    pub over_budget: bool,
    /// Sequence number of the deletion event (0 when nothing was evicted).
    pub seq: u64,
}

/// Events the store holds now (not deleted).
fn held(store: &Store) -> u64 {
    let s = store.stats();
    s.events.saturating_sub(s.events_deleted)
}

/// Evicts the lowest-retention evictable events until the store holds at most `budget`
/// events (the deletion event included), or nothing evictable is left.
pub fn forget(store: &Store, opts: &ForgetOptions) -> Result<ForgetReport> {
    if opts.budget == 0 {
        return Err(Error::InvalidArgument {
            name: "budget".into(),
            message: "must be at least 1 event".into(),
        });
    }
    let mut report = ForgetReport {
        events_before: held(store),
        bytes_before: store.disk_bytes(),
        ..ForgetReport::default()
    };
    report.events_after = report.events_before;
    report.bytes_after = report.bytes_before;
    if report.events_before <= opts.budget {
        return Ok(report);
    }
    let now = match opts.now {
        Some(n) => n,
        None => store.latest_event_time()?.unwrap_or(0),
    };
    let candidates = evictable(store)?;
    report.evictable = candidates.len();
    // One more record comes in: the deletion event.
    let excess = (report.events_before + 1 - opts.budget) as usize;
    let mut scored: Vec<(OrderedFloat<f64>, u64)> = candidates
        .iter()
        .map(|e| (OrderedFloat(opts.policy.score(e, now, 0)), e.seq))
        .collect();
    scored.sort_unstable();
    let chosen: BTreeSet<u64> = scored.iter().take(excess).map(|(_, s)| *s).collect();
    report.over_budget = chosen.len() < excess;
    if chosen.is_empty() {
        return Ok(report);
    }
    let deletion = store.delete_for(&DeleteRequest::events(chosen), Reason::Forget)?;
    report.evicted = deletion.deleted.len();
    report.seq = deletion.seq;
    report.events_after = held(store);
    report.bytes_after = store.disk_bytes();
    Ok(report)
}

/// The events forgetting may evict (see the module documentation).
fn evictable(store: &Store) -> Result<Vec<Event>> {
    let mut all: Vec<Summary> = Vec::new();
    for ev in store.events_of_kind(SUMMARY)? {
        all.extend(Summary::of_event(&ev));
    }
    let mut latest: BTreeMap<(Level, i64), u64> = BTreeMap::new();
    for s in &all {
        latest.insert((s.level, s.start), s.seq);
    }
    let live: BTreeSet<u64> = latest.values().copied().collect();
    // Parent of each live summary's children, among live summaries.
    let mut parent_level: BTreeMap<u64, Level> = BTreeMap::new();
    for s in all.iter().filter(|s| live.contains(&s.seq)) {
        for c in &s.children {
            parent_level.insert(*c, s.level);
        }
    }
    let mut seqs: BTreeSet<u64> = BTreeSet::new();
    for s in &all {
        if !live.contains(&s.seq) {
            // Superseded: its replacement holds the gist.
            seqs.insert(s.seq);
            continue;
        }
        match s.level {
            Level::Episode if parent_level.get(&s.seq) == Some(&Level::Day) => {
                seqs.insert(s.seq);
                seqs.extend(s.children.iter().copied());
            }
            Level::Day if parent_level.get(&s.seq) == Some(&Level::Week) => {
                seqs.insert(s.seq);
            }
            _ => {}
        }
    }
    let pinned = |key: &str| store.node_by_key(key).is_some_and(|n| n.pinned);
    let mut out = Vec::with_capacity(seqs.len());
    for seq in seqs {
        let Some(ev) = store.event(seq)? else {
            continue;
        };
        let bookkeeping = [DELETE, TOMBSTONE, "PIN", "UNPIN"].contains(&ev.kind.as_str());
        let rests_a_pin = ev.assertions.iter().any(|a| match a {
            Assertion::UpsertNode(up) => pinned(&up.key),
            _ => false,
        });
        if !bookkeeping && !rests_a_pin {
            out.push(ev);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventDraft;

    #[test]
    fn retention_halves_per_half_life_and_follows_salience() {
        let p = RetentionPolicy { half_life: 100.0 };
        let mut d = EventDraft::new(0, "bot", "X");
        d.salience = Some(0.8);
        let e = Event::from_draft(1, 0, d);
        assert!((p.score(&e, 0, 0) - 0.8).abs() < 1e-9);
        assert!((p.score(&e, 100, 0) - 0.4).abs() < 1e-6);
        assert!((p.score(&e, 100, 1) - 0.8).abs() < 1e-6);
        // An event from the future is not more than fresh.
        assert!((p.score(&e, -50, 0) - 0.8).abs() < 1e-9);
    }
}
