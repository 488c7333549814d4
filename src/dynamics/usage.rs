//! Usage and tiers: which items reads actually return, recorded as events so that what depends
//! on it (forgetting, the hot tier) replays exactly.
//!
//! Retrieval ([`crate::retrieval::Retriever::retrieve`]) and planner queries
//! ([`crate::query::Prepared::run`]) report the items they returned: node keys (passages,
//! entities, query nodes), edges by `(from, relation, to)` (facts; ids are renumbered by a
//! deletion, keys are not) and events by sequence number (event snippets and every event a
//! snippet cites as provenance). A read writes nothing: uses wait in memory
//! (`Store::record_use`) and are **flushed as one [`USAGE`] event** when the store is closed,
//! when [`Store::flush_usage`](crate::Store::flush_usage) is called, when [`FLUSH_ITEMS`] items are waiting, or on the
//! next recorded use once [`FLUSH_INTERVAL`] has passed since the first waiting use. A read-only
//! handle records nothing.
//!
//! A `USAGE` event carries, for each item it names, the item's *running totals* (`used`, and
//! `last_used` in world time), not increments: the ledger ([`UsageLedger`]) is the last value
//! the log gives each item, so a `USAGE` event whose items all appear in later ones changes
//! nothing when it goes, and forgetting may evict it. Its payload is not full-text indexed
//! (bookkeeping, not an experience), and a node deletion deletes the `USAGE` events that name
//! the node, like every other event naming it; the totals they carried for the other items
//! they named, where no later record names those, the deletion records again in a `USAGE`
//! event of its own commit.
//!
//! **Tiers.** An item is *hot* when it is pinned (a node, or a fact touching a pinned node), or
//! used at least [`TierPolicy::hot_min_uses`] times with the last use within
//! [`TierPolicy::hot_window`] of world time; every other item is *warm*. Retrieval adds
//! `weights.usage` (0.1) to a hot snippet's fused score, forgetting multiplies an event's
//! retention by `1 + used`, and `loci stats` counts each tier.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dynamics::decay::DAY;
use crate::model::{Event, EventDraft, Value};

/// Kind of the event that records uses. Only the store writes it.
pub const USAGE: &str = crate::model::kinds::USAGE;
/// Waiting items that trigger a flush.
pub const FLUSH_ITEMS: usize = 1024;
/// Wall-clock time after the first waiting use at which the next use flushes.
pub const FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// Something a read returned.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Item {
    /// A node, by key.
    Node(String),
    /// An edge, by `(from key, relation, to key)`.
    Edge(String, String, String),
    /// An event, by sequence number.
    Event(u64),
}

impl Item {
    /// Whether the item is, or touches, the node `key`.
    pub fn names_node(&self, key: &str) -> bool {
        match self {
            Item::Node(k) => k == key,
            Item::Edge(from, _, to) => from == key || to == key,
            Item::Event(_) => false,
        }
    }
}

/// An item's running totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Reads that returned it.
    pub used: u32,
    /// World time of the latest of them.
    pub last_used: i64,
}

impl Usage {
    /// These uses and `more`: their counts added, the later last use.
    fn and(self, more: Usage) -> Usage {
        Usage {
            used: self.used.saturating_add(more.used),
            last_used: self.last_used.max(more.last_used),
        }
    }
}

/// One entry of a `USAGE` event's payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    item: Item,
    used: u32,
    last_used: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Payload {
    items: Vec<Entry>,
}

/// Every item's usage, as the log's `USAGE` events give it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageLedger {
    items: BTreeMap<Item, Usage>,
}

impl UsageLedger {
    /// Takes in a `USAGE` event (any other event is ignored).
    pub fn apply(&mut self, ev: &Event) {
        for (item, usage) in entries(ev) {
            self.items.insert(item, usage);
        }
    }

    pub fn get(&self, item: &Item) -> Option<Usage> {
        self.items.get(item).copied()
    }

    /// Uses of the event `seq` (0 when never used).
    pub fn uses_of_event(&self, seq: u64) -> u32 {
        self.get(&Item::Event(seq)).map_or(0, |u| u.used)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Item, &Usage)> {
        self.items.iter()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The `USAGE` event, dated `now`, that adds `pending` uses to the totals, or `None` when
    /// nothing is pending. Each use keeps the world time of its read, so the totals are the
    /// same whenever the flush runs.
    pub fn flush_draft(&self, pending: &Pending, now: i64) -> Option<EventDraft> {
        if pending.counts.is_empty() {
            return None;
        }
        let totals = (pending.counts.keys()).filter_map(|item| {
            let total = pending.added_to(item, self.get(item))?;
            Some((item.clone(), total))
        });
        Some(record_draft(totals, now))
    }
}

/// The `USAGE` event recording these running totals at world time `now`.
pub(crate) fn record_draft(totals: impl Iterator<Item = (Item, Usage)>, now: i64) -> EventDraft {
    let items = totals
        .map(|(item, u)| Entry {
            item,
            used: u.used,
            last_used: u.last_used,
        })
        .collect();
    let mut draft = EventDraft::new(now, "loci", USAGE);
    draft.payload = serde_json::to_value(Payload { items })
        .ok()
        .and_then(|v| serde_json::from_value::<Value>(v).ok())
        .unwrap_or_default();
    // Bookkeeping, not an experience.
    draft.salience = Some(0.0);
    draft
}

/// The items and running totals a `USAGE` event records (none for any other event).
pub fn entries(ev: &Event) -> Vec<(Item, Usage)> {
    if ev.kind != USAGE {
        return Vec::new();
    }
    let Some(payload) = serde_json::to_value(&ev.payload)
        .ok()
        .and_then(|v| serde_json::from_value::<Payload>(v).ok())
    else {
        return Vec::new();
    };
    payload
        .items
        .into_iter()
        .map(|e| {
            (
                e.item,
                Usage {
                    used: e.used,
                    last_used: e.last_used,
                },
            )
        })
        .collect()
}

/// Uses recorded in memory and not yet flushed: each item's count of them, and the world time
/// of the latest.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    counts: BTreeMap<Item, Usage>,
    since: Option<std::time::Instant>,
}

impl Pending {
    /// Counts one use of each item by a read at world time `now` (an item named twice in one
    /// read counts once).
    pub fn add(&mut self, items: impl IntoIterator<Item = Item>, now: i64) {
        let items: std::collections::BTreeSet<Item> = items.into_iter().collect();
        if items.is_empty() {
            return;
        }
        self.since.get_or_insert_with(std::time::Instant::now);
        let one = Usage {
            used: 1,
            last_used: now,
        };
        for item in items {
            let n = self.counts.entry(item).or_default();
            *n = n.and(one);
        }
    }

    /// `item`'s usage `flushed` (the ledger's), with the uses waiting here added: what a read
    /// counts, so that it ranks as it would once they are flushed, whenever that is.
    pub fn added_to(&self, item: &Item, flushed: Option<Usage>) -> Option<Usage> {
        let Some(waiting) = self.counts.get(item) else {
            return flushed;
        };
        Some(flushed.map_or(*waiting, |before| before.and(*waiting)))
    }

    /// The items with uses waiting.
    pub fn items(&self) -> impl Iterator<Item = &Item> {
        self.counts.keys()
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Adds back uses that could not be flushed.
    pub fn merge(&mut self, other: Pending) {
        for (item, n) in other.counts {
            let c = self.counts.entry(item).or_default();
            *c = c.and(n);
        }
        self.since = match (self.since, other.since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Whether enough is waiting, or it has waited long enough, to flush.
    pub fn due(&self) -> bool {
        self.counts.len() >= FLUSH_ITEMS || self.waited(FLUSH_INTERVAL)
    }

    /// Whether the first waiting use is at least `age` old.
    pub fn waited(&self, age: std::time::Duration) -> bool {
        self.since.is_some_and(|t| t.elapsed() >= age)
    }
}

/// Which items are hot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TierPolicy {
    /// Uses that make an item hot (with a recent last use).
    pub hot_min_uses: u32,
    /// World time since the last use within which a used item stays hot.
    pub hot_window: i64,
}

impl Default for TierPolicy {
    fn default() -> Self {
        TierPolicy {
            hot_min_uses: 2,
            hot_window: 7 * DAY as i64,
        }
    }
}

/// An item's tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Hot,
    Warm,
}

impl TierPolicy {
    /// The tier of an item with this usage at world time `now` (pins are judged by the caller).
    pub fn tier(&self, usage: Option<Usage>, now: i64) -> Tier {
        match usage {
            Some(u)
                if u.used >= self.hot_min_uses
                    && now.saturating_sub(u.last_used) <= self.hot_window =>
            {
                Tier::Hot
            }
            _ => Tier::Warm,
        }
    }
}

/// Counts of hot and warm items, by sort.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierCounts {
    pub hot_nodes: u64,
    pub warm_nodes: u64,
    pub hot_edges: u64,
    pub warm_edges: u64,
    pub hot_events: u64,
    pub warm_events: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage_event(seq: u64, draft: EventDraft) -> Event {
        Event::from_draft(seq, 0, draft)
    }

    #[test]
    fn flushes_carry_running_totals_so_the_last_one_wins() {
        let mut ledger = UsageLedger::default();
        let mut pending = Pending::default();
        pending.add(
            [Item::Node("home".into()), Item::Event(3), Item::Event(3)],
            100,
        );
        let first = ledger.flush_draft(&pending, 100).unwrap();
        ledger.apply(&usage_event(10, first));
        assert_eq!(
            ledger.get(&Item::Node("home".into())),
            Some(Usage {
                used: 1,
                last_used: 100
            })
        );
        let mut pending = Pending::default();
        pending.add([Item::Node("home".into())], 200);
        pending.add([Item::Node("home".into())], 250);
        // Flushed after a later event: the uses keep their reads' time.
        let second = ledger.flush_draft(&pending, 900).unwrap();
        let second = usage_event(11, second);
        // Folding the second alone over an empty ledger gives the same totals for its items:
        // the first is superseded.
        let mut only_second = UsageLedger::default();
        only_second.apply(&second);
        ledger.apply(&second);
        assert_eq!(
            ledger.get(&Item::Node("home".into())),
            only_second.get(&Item::Node("home".into()))
        );
        assert_eq!(
            ledger.get(&Item::Node("home".into())),
            Some(Usage {
                used: 3,
                last_used: 250
            })
        );
        assert_eq!(ledger.uses_of_event(3), 1);
        assert!(Pending::default().is_empty());
        assert!(ledger.flush_draft(&Pending::default(), 5).is_none());
    }

    #[test]
    fn hot_means_used_often_and_recently() {
        let p = TierPolicy::default();
        let u = |used, last_used| Some(Usage { used, last_used });
        assert_eq!(p.tier(None, 0), Tier::Warm);
        assert_eq!(p.tier(u(1, 0), 0), Tier::Warm);
        assert_eq!(p.tier(u(2, 0), 0), Tier::Hot);
        assert_eq!(p.tier(u(2, 0), p.hot_window), Tier::Hot);
        assert_eq!(p.tier(u(2, 0), p.hot_window + 1), Tier::Warm);
    }
}
