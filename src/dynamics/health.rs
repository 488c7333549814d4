//! The memory's health check (`loci check`): things that are not corruption (`replay --verify`
//! finds that) but that a memory kept for months drifts into, and that a user should look at.
//!
//! - **pins that point nowhere**: a node pinned by an event of the log (`PIN`, `PROMOTE`, or
//!   any upsert with `pinned`) that the graph no longer holds (retracted since);
//! - **entities that look like duplicates**: nodes of one label whose names are equal once
//!   case, punctuation and a leading "the" are set aside, under different keys ("Iron Golem",
//!   "iron-golem"); passages and journal entries are texts, not entities, and are left out, and
//!   so are keys that differ only in their numbers ("npc:villager:6", "npc:villager:10"):
//!   numbered instances of a kind, counted apart on purpose;
//! - **keys and kinds that read alike**: node keys equal once composed (NFC) and trimmed,
//!   event kinds equal so in any case: loci keeps both as given, so "café" composed and
//!   decomposed are two nodes whose keys print alike;
//! - **tiers over their caps**: more pinned nodes, hot nodes or hot edges than the caps of
//!   [`HealthOptions`] (a hot tier that holds everything ranks nothing);
//! - **summaries whose children are gone**: a live summary with a child that a user deletion
//!   removed after the summary was written (deleting should have taken the summary too: its
//!   text is made of the child's) or that the log never held. Children evicted by forgetting
//!   are not a finding: keeping the gist when the detail goes is what forgetting is for.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::dynamics::consolidate::{placed_summaries, summary_as_placed, PlacedSummaries};
use crate::dynamics::deletion::{self, Reason};
use crate::error::Result;
use crate::graph::Adjacency;
use crate::model::{labels, relations, Assertion, Event, NodeId};
use crate::store::Store;

/// Caps of the health check; a cap a serialized form leaves out is its default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct HealthOptions {
    pub max_pinned: u64,
    pub max_hot_nodes: u64,
    pub max_hot_edges: u64,
    /// Findings of one sort listed at most (the count is always whole).
    pub max_listed: usize,
    /// Event kinds compared at most, shorter first and then in byte order (the episodic
    /// index's order; a seek each): the report says when there were more.
    pub max_kinds: usize,
}

impl Default for HealthOptions {
    fn default() -> Self {
        HealthOptions {
            max_pinned: 256,
            max_hot_nodes: 1024,
            max_hot_edges: 4096,
            max_listed: 50,
            max_kinds: 10_000,
        }
    }
}

/// Why a summary's child is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gone {
    /// A user deletion removed it, and the summary stayed.
    DeletedByUser,
    /// The log holds no record of it at all.
    NeverHeld,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "finding", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Finding {
    DanglingPin {
        key: String,
        /// The last event that pinned it.
        pinned_by: u64,
    },
    /// A node whose last pinning event pins it and which the graph holds unpinned: it went
    /// (retracted, or its events deleted) and was asserted again, and a pin makes no node,
    /// so the node it pinned is not the one there now.
    PinLost {
        key: String,
        /// The last event that pinned it.
        pinned_by: u64,
    },
    LikelyDuplicates {
        label: String,
        name: String,
        keys: Vec<String>,
    },
    /// Node keys that are one once composed (NFC) and with their surrounding whitespace set
    /// aside: nodes apart whose keys print alike.
    KeysAlike {
        keys: Vec<String>,
    },
    /// Event kinds that are one once composed, without their surrounding whitespace, in any
    /// case: a filter by one misses the events of the others.
    KindsAlike {
        kinds: Vec<String>,
    },
    TierOverCap {
        tier: String,
        count: u64,
        cap: u64,
    },
    SummaryChildrenGone {
        seq: u64,
        level: String,
        start: i64,
        end: i64,
        children: usize,
        gone: Vec<(u64, Gone)>,
    },
}

impl Finding {
    /// One line for a person.
    pub fn describe(&self) -> String {
        match self {
            Finding::DanglingPin { key, pinned_by } => {
                format!(
                    "pin points nowhere: {key:?} (pinned by event {pinned_by}) is not in the graph; asserted again, `loci pin {}` pins it again (a pin makes no node), and `loci delete --node={}` takes every event that names it, its pin too", shell_word(key), shell_word(key)
                )
            }
            Finding::PinLost { key, pinned_by } => {
                format!(
                    "pin lost: {key:?} (pinned by event {pinned_by}) went and was asserted again, unpinned (a pin makes no node); `loci pin {}` pins it again", shell_word(key)
                )
            }
            Finding::LikelyDuplicates { label, name, keys } => format!(
                "likely duplicates: {} {label} nodes named like {name:?}: {}",
                keys.len(),
                quoted_list(keys)
            ),
            Finding::KeysAlike { keys } => format!(
                "keys that read alike: {} (nodes apart where a reader sees one: assert the facts under one key; `loci delete --node=KEY` takes every event that names another)",
                quoted_list(keys)
            ),
            Finding::KindsAlike { kinds } => format!(
                "event kinds that read alike: {} (a filter by one misses the events of the others)",
                quoted_list(kinds)
            ),
            Finding::TierOverCap { tier, count, cap } => {
                format!("tier over its cap: {count} {tier} (cap {cap})")
            }
            Finding::SummaryChildrenGone {
                seq,
                level,
                start,
                end,
                children,
                gone,
            } => {
                let by_user = gone
                    .iter()
                    .filter(|(_, g)| *g == Gone::DeletedByUser)
                    .count();
                format!(
                    "summary {seq} ({level} {start}..{end}) lost {} of {children} children: {by_user} deleted by a user, {} never held",
                    gone.len(),
                    gone.len() - by_user
                )
            }
        }
    }
}

/// `texts` quoted as Rust quotes them: a combining mark escaped (`"cafe\u{301}"`), spaces
/// inside the quotes, so that texts that print alike show how they differ.
fn quoted_list(texts: &[String]) -> String {
    (texts.iter().map(|t| format!("{t:?}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the health check found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthReport {
    /// Findings by sort, each sort sorted by a stable key.
    pub findings: Vec<Finding>,
    /// Findings beyond `max_listed` of their sort, counted only.
    pub not_listed: usize,
    pub nodes_checked: usize,
    pub summaries_checked: usize,
    pub pins_checked: usize,
    /// Event kinds compared ([`HealthOptions::max_kinds`] at most).
    #[serde(default)]
    pub kinds_checked: usize,
    /// The log has kinds past those compared: they were not.
    #[serde(default)]
    pub more_kinds: bool,
}

impl HealthReport {
    pub fn healthy(&self) -> bool {
        self.findings.is_empty() && self.not_listed == 0
    }
}

/// Runs every check over `store`.
pub fn check(store: &Store, opts: &HealthOptions) -> Result<HealthReport> {
    let mut report = HealthReport::default();
    let add = |report: &mut HealthReport, found: Vec<Finding>| {
        let extra = found.len().saturating_sub(opts.max_listed);
        report.not_listed += extra;
        report
            .findings
            .extend(found.into_iter().take(opts.max_listed));
    };
    let (pins, summaries) = read_the_log(store)?;
    report.pins_checked = pins.pinned();
    add(&mut report, pins.findings(store));
    let (dups, checked) = likely_duplicates(store);
    report.nodes_checked = checked;
    add(&mut report, dups);
    add(&mut report, keys_alike(store));
    let (kinds, checked, more) = kinds_alike(store, opts.max_kinds)?;
    (report.kinds_checked, report.more_kinds) = (checked, more);
    add(&mut report, kinds);
    add(&mut report, tiers_over_caps(store, opts)?);
    report.summaries_checked = summaries.checked;
    add(&mut report, summaries.findings());
    Ok(report)
}

/// The checks that read events, in one pass over the log: each event decoded once, without a
/// summary's digest. The pins had been a pass of their own, decoding every event whole, and
/// the summaries' children a read of each live summary by itself, a read transaction each:
/// 7.0-7.3 s of `check` at 980k events, 566k of them summaries.
fn read_the_log(store: &Store) -> Result<(Pins, ChildrenGone)> {
    let mut pins = Pins::default();
    let mut summaries = ChildrenGone::new(store)?;
    store.scan_log_without_digests(1, |ev| {
        pins.note(&ev);
        summaries.note(store, &ev)?;
        Ok(true)
    })?;
    Ok((pins, summaries))
}

/// Each key's latest pinning event: whether it pins the key, and its number.
#[derive(Default)]
struct Pins {
    latest: BTreeMap<String, (bool, u64)>,
}

impl Pins {
    fn note(&mut self, ev: &Event) {
        for a in &ev.assertions {
            if let Assertion::UpsertNode(up) = a {
                if let Some(p) = up.pinned {
                    self.latest.insert(up.key.clone(), (p, ev.seq));
                }
            }
        }
    }

    /// The keys pinned now: one unpinned since is not a pin.
    fn pinned(&self) -> usize {
        self.latest.values().filter(|(pinned, _)| *pinned).count()
    }

    /// The keys whose latest pinning event pins them and that the graph does not hold, or
    /// holds unpinned.
    fn findings(self, store: &Store) -> Vec<Finding> {
        (self.latest.into_iter())
            .filter(|(_, (pinned, _))| *pinned)
            .filter_map(|(key, (_, pinned_by))| match store.node_by_key(&key) {
                None => Some(Finding::DanglingPin { key, pinned_by }),
                Some(n) if !n.pinned => Some(Finding::PinLost { key, pinned_by }),
                Some(_) => None,
            })
            .collect()
    }
}

/// `text` as one word for a POSIX shell, in single quotes (a quote inside closes them, is
/// escaped and opens them again): a hint runs as printed whatever the key holds (`$`, a
/// leading dash, spaces, quotes).
fn shell_word(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A name with case, punctuation and a leading article set aside.
fn name_folded(name: &str) -> String {
    use unicode_normalization::{char::is_combining_mark, UnicodeNormalization};
    // Composed, as `normalize_name` does: "Cafe\u{301}" and "Café" are one name.
    let lower = name.nfc().collect::<String>().to_lowercase();
    // A minus sign that starts a number is part of it: `bed at 5 64 -6` and `bed at 5 64 6`
    // are two places (a hyphen between words is punctuation still).
    let chars: Vec<char> = lower.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let signs_a_number =
            c == '-' && word.is_empty() && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c.is_alphanumeric() || is_combining_mark(c) || signs_a_number {
            word.push(c);
        } else if !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let words = match words.first().map(String::as_str) {
        Some("the") | Some("a") | Some("an") if words.len() > 1 => &words[1..],
        _ => &words[..],
    };
    words.concat()
}

fn likely_duplicates(store: &Store) -> (Vec<Finding>, usize) {
    let g = store.graph();
    let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut checked = 0;
    for n in g.nodes() {
        if n.label == labels::PASSAGE || n.label == crate::journal::LABEL {
            continue;
        }
        checked += 1;
        let name = if n.name.trim().is_empty() {
            n.key.rsplit(':').next().unwrap_or(&n.key)
        } else {
            &n.name
        };
        let folded = name_folded(name);
        if folded.is_empty() {
            continue;
        }
        groups
            .entry((n.label.clone(), folded))
            .or_default()
            .push(n.key.clone());
    }
    let same_as = g.relation_id(relations::SAME_AS);
    let found = groups
        .into_iter()
        .filter(|(_, keys)| {
            keys.len() > 1 && {
                let shapes: std::collections::BTreeSet<String> =
                    keys.iter().map(|k| key_shape(k)).collect();
                shapes.len() > 1
            }
        })
        // Keys that read alike are that finding ([`keys_alike`]), not this one as well.
        .filter(|(_, keys)| {
            let read: std::collections::BTreeSet<String> =
                keys.iter().map(|k| as_read(k)).collect();
            read.len() > 1
        })
        .filter(|(_, keys)| {
            let ids: Vec<NodeId> = keys.iter().filter_map(|k| g.node_id(k)).collect();
            !same_as.is_some_and(|rel| linked_as_one(g.adjacency(), rel, &ids))
        })
        .map(|((label, name), mut keys)| {
            keys.sort();
            Finding::LikelyDuplicates { label, name, keys }
        })
        .collect();
    (found, checked)
}

/// `text` composed (NFC) and without its surrounding whitespace: what a reader sees of it.
fn as_read(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    text.trim().nfc().collect()
}

/// The groups of two or more of `texts` that `fold` makes one, each sorted, in the order of
/// their folded form.
fn alike(texts: impl Iterator<Item = String>, fold: impl Fn(&str) -> String) -> Vec<Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in texts {
        groups.entry(fold(&t)).or_default().push(t);
    }
    (groups.into_values())
        .filter(|g| g.len() > 1)
        .map(|mut g| {
            g.sort();
            g
        })
        .collect()
}

/// Node keys that read alike ([`Finding::KeysAlike`]).
fn keys_alike(store: &Store) -> Vec<Finding> {
    use unicode_normalization::{is_nfc_quick, IsNormalized};
    let g = store.graph();
    // A key another key reads as is rare: only keys that change when read are grouped, with
    // the keys they read as. Keys read in place, not nodes decoded, and most found unchanged
    // without a copy.
    let unchanged = |k: &str| k.trim() == k && is_nfc_quick(k.chars()) == IsNormalized::Yes;
    let changed: Vec<String> = (g.node_ids())
        .filter_map(|id| g.node_key(id))
        .filter(|k| !unchanged(k) && as_read(k) != *k)
        .map(str::to_string)
        .collect();
    let read: HashSet<String> = changed.iter().map(|k| as_read(k)).collect();
    let texts = changed
        .into_iter()
        .chain(read.into_iter().filter(|k| g.node_id(k).is_some()));
    alike(texts, as_read)
        .into_iter()
        .map(|keys| Finding::KeysAlike { keys })
        .collect()
}

/// Event kinds that read alike ([`Finding::KindsAlike`]) among the first `max` kinds, how
/// many were compared, and whether the log has more.
fn kinds_alike(store: &Store, max: usize) -> Result<(Vec<Finding>, usize, bool)> {
    let mut kinds = store.event_kinds(max.saturating_add(1))?;
    let more = kinds.len() > max;
    kinds.truncate(max);
    let checked = kinds.len();
    // Composed again: an upper case may decompose ("ǰ" is "J" and a caron).
    let found = alike(kinds.into_iter(), |k| as_read(&as_read(k).to_uppercase()))
        .into_iter()
        .map(|kinds| Finding::KindsAlike { kinds })
        .collect();
    Ok((found, checked, more))
}

/// Whether `SAME_AS` links (relation `rel`, either way) among `nodes` join them all into one:
/// then they are known to be one thing (`extract` linked them, or a user did), not a finding.
fn linked_as_one(adjacency: &Adjacency, rel: u32, nodes: &[NodeId]) -> bool {
    let Some(&first) = nodes.first() else {
        return true;
    };
    let members: HashSet<NodeId> = nodes.iter().copied().collect();
    let mut reached = HashSet::from([first]);
    let mut frontier = vec![first];
    while let Some(n) = frontier.pop() {
        for e in adjacency.entries(n) {
            let next = e.neighbor();
            if e.relation() == rel && members.contains(&next) && reached.insert(next) {
                frontier.push(next);
            }
        }
    }
    reached.len() == members.len()
}

/// A key with each run of digits as `#`: keys of one shape ("npc:villager:6",
/// "npc:villager:10") number instances of a kind, which their writer counted apart on purpose
/// ("item:0001" and "item:1" are of one shape too: numbers written two ways are not a name
/// written two ways).
fn key_shape(key: &str) -> String {
    let mut shape = String::with_capacity(key.len());
    let mut in_digits = false;
    for c in key.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                shape.push('#');
            }
            in_digits = true;
        } else {
            shape.push(c);
            in_digits = false;
        }
    }
    shape
}

fn tiers_over_caps(store: &Store, opts: &HealthOptions) -> Result<Vec<Finding>> {
    let now = store.latest_event_time()?.unwrap_or(0);
    let g = store.graph();
    let pinned = g.pinned_ids().count() as u64;
    let tiers = g.tier_counts(now);
    let mut found = Vec::new();
    for (tier, count, cap) in [
        ("pinned nodes", pinned, opts.max_pinned),
        ("hot nodes", tiers.hot_nodes, opts.max_hot_nodes),
        ("hot edges", tiers.hot_edges, opts.max_hot_edges),
    ] {
        if count > cap {
            found.push(Finding::TierOverCap {
                tier: tier.to_string(),
                count,
                cap,
            });
        }
    }
    Ok(found)
}

/// The live summaries with a child gone ([`Finding::SummaryChildrenGone`]), each checked as
/// the pass over the log meets it.
struct ChildrenGone {
    /// Each event's first deletion, with its reason: a child deleted before its summary was
    /// written (a summary a deletion made again names the summaries it took) is no finding.
    reasons: HashMap<u64, (Reason, u64)>,
    /// The live summaries' places.
    placed: std::sync::Arc<PlacedSummaries>,
    /// Their numbers and indexes in `placed.live`, by number: the log's order.
    by_seq: Vec<(u64, usize)>,
    /// The first of `by_seq` the pass has not passed.
    next: usize,
    checked: usize,
    found: Vec<Finding>,
}

impl ChildrenGone {
    fn new(store: &Store) -> Result<Self> {
        let mut reasons: HashMap<u64, (Reason, u64)> = HashMap::new();
        for ev in store.events_of_kind(deletion::DELETE)? {
            if let Some(r) = deletion::reason_of(&ev) {
                for seq in deletion::deleted_by(&ev) {
                    let first = reasons.entry(seq).or_insert((r, ev.seq));
                    if ev.seq < first.1 {
                        *first = (r, ev.seq);
                    }
                }
            }
        }
        let placed = placed_summaries(store)?;
        let mut by_seq: Vec<(u64, usize)> = (placed.live.iter().enumerate())
            .map(|(i, p)| (p.seq, i))
            .collect();
        by_seq.sort_unstable();
        Ok(ChildrenGone {
            reasons,
            placed,
            by_seq,
            next: 0,
            checked: 0,
            found: Vec::new(),
        })
    }

    /// Checks `ev` if it is a live summary. A placed summary the log does not hold (deleted
    /// since the index was read) is passed over, as a read of it by number finds none.
    fn note(&mut self, store: &Store, ev: &Event) -> Result<()> {
        // The pass meets events in order: the summaries before `ev` are passed for good.
        while self
            .by_seq
            .get(self.next)
            .is_some_and(|&(seq, _)| seq < ev.seq)
        {
            self.next += 1;
        }
        let at = self.next;
        while (self.by_seq.get(self.next)).is_some_and(|&(seq, _)| seq == ev.seq) {
            self.next += 1;
        }
        // Each place the index gives the number: under two keys (damage), one is misplaced,
        // which [`summary_as_placed`] finds whichever sorts first (helper-127).
        let mut read = None;
        for &(_, i) in &self.by_seq[at..self.next] {
            read = summary_as_placed(store, &self.placed.live[i], ev)?;
        }
        let Some(s) = read else {
            return Ok(());
        };
        self.checked += 1;
        let mut gone = Vec::new();
        for &child in &s.children {
            if store.holds_event(child) {
                continue;
            }
            match self.reasons.get(&child) {
                Some((_, by)) if *by < s.seq => {}
                Some((Reason::Forget, _)) => {}
                Some((Reason::Delete, _)) => gone.push((child, Gone::DeletedByUser)),
                None => gone.push((child, Gone::NeverHeld)),
            }
        }
        if !gone.is_empty() {
            self.found.push(Finding::SummaryChildrenGone {
                seq: s.seq,
                level: s.level.name().to_string(),
                start: s.start,
                end: s.end,
                children: s.children.len(),
                gone,
            });
        }
        Ok(())
    }

    /// The findings, by summary number (the log's order, as they were met).
    fn findings(self) -> Vec<Finding> {
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fold_case_punctuation_and_articles() {
        assert_eq!(name_folded("Iron Golem"), name_folded("iron-golem"));
        assert_eq!(name_folded("The Village"), name_folded("village"));
        assert_ne!(name_folded("Iron Golem"), name_folded("Snow Golem"));
        assert_eq!(name_folded("the"), "the");
        assert_eq!(name_folded("Café Émile"), "caféémile");
    }
}
