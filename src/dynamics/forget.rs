//! Forgetting: keeping the store within a budget of events by evicting those it can best do
//! without, as a deletion event of reason `forget` (so replay reproduces it; see
//! [`crate::dynamics::deletion`]).
//!
//! **What may be evicted.** Only what a summary keeps the gist of: a raw event that is a child
//! of an episode whose day is summarised, an episode summary whose day summary lives, a day
//! summary whose week summary lives, summaries that a later one superseded, and week summaries
//! once nothing else of their week is left (the top of the hierarchy: the oldest gist fades
//! last). Never an event not yet consolidated
//! (the open day: the agent's most recent experience), bookkeeping (deletions, pins), an event
//! that withdraws something (a retraction, a property removed, an unpin: the replay without it
//! would make again what it withdrew; a belief's node named by an alias given before, which
//! takes the alias out), the events the
//! working memory rests on ([`crate::dynamics::working::RestsOn`]: without them it would be
//! another), or **the last support of a belief**: an edge whose effective
//! confidence is still at least [`RetentionPolicy::belief_floor`] (0.5), an edge or node of a
//! pinned node, and a node with such an edge keep at least one event asserting them: for a
//! node, one giving it the name it has (for a node named by its key, any value; a pin's bare
//! upsert gives none), for an edge, one asserting it as seen when it last was (so it keeps its
//! `last_seen`); and every value of theirs that an upsert gives comes out of the events left
//! as it is (not an edge's salience, nor a node's `created` and `updated`: no upsert gives
//! those, so a summary cannot restate them; the last
//! event left giving a label, a confidence or a property gives the one there is now, each
//! alias keeps an event giving it, and a node's salience folds to what it is). Only events
//! after the last retraction of a node, an edge or an edge's end count for it: replay makes
//! it again from those alone. Nor does one go without which an edge's validity changes would
//! fold to one that ends before it starts, which replay refuses. What goes
//! with the last of its support is what has faded: stale edges (an offer not seen for weeks),
//! and nodes that nothing believed links any more. A node no belief holds keeps no value: it
//! may come out as an older summary restated it, an alias a later rename took out included. Each forgetting's deletion event replaces the previous ones (it lists what they
//! deleted), so forgetting often leaves one such record, not one per run. Since day and week summaries re-assert the nodes and edges of their events with the
//! values they had, the facts stay when the raw events go; what decays away is the detail.
//!
//! **Which first.** Detail before gist: superseded records (a later summary or `USAGE` record
//! holds all they say), then raw events, then episode, day and week summaries, so a summary
//! goes only once no detail of its level is left to evict. Within one of these, the lowest
//! retention score, then the oldest (by sequence number):
//!
//! `retention = salience * 0.5 ^ (age / half_life) * (1 + uses)`
//!
//! where `age` is world time since the event and `half_life` 7 days by default
//! ([`RetentionPolicy`]). `uses` counts the reads that returned the event (or cited it as a
//! snippet's provenance), as flushed to the log in `USAGE` events ([`crate::dynamics::usage`]):
//! what the agent keeps reading stays longer.
//!
//! A `USAGE` event whose every item appears in a later `USAGE` event is evictable too: the
//! later one carries the running totals, so the ledger does not change when it goes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use ordered_float::OrderedFloat;
use serde::{Deserialize, Serialize};

use crate::dynamics::consolidate::{self, Level, Placement, SUMMARY};
use crate::dynamics::decay::DAY;
use crate::dynamics::deletion::{reason_of, DeleteRequest, Reason, DELETE, TOMBSTONE};
use crate::dynamics::usage::{entries, Item, USAGE};
use crate::error::{Error, Result};
use crate::model::{kinds, Assertion, Event, Value};
use crate::projection::NodeValues;
use crate::store::Store;

/// How retention is scored (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionPolicy {
    /// World time after which recency halves an event's retention.
    pub half_life: f64,
    /// An edge with at least this effective confidence is a belief: its last support stays.
    pub belief_floor: f32,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            half_life: 7.0 * DAY,
            belief_floor: 0.5,
        }
    }
}

impl RetentionPolicy {
    /// The retention score of an event at world time `now`.
    pub fn score(&self, event: &Event, now: i64, uses: u32) -> f64 {
        self.score_of(event.ts, event.salience, now, uses)
    }

    /// [`Self::score`] of an event at `ts` of salience `salience`.
    fn score_of(&self, ts: i64, salience: f32, now: i64, uses: u32) -> f64 {
        let age = now.saturating_sub(ts).max(0) as f64;
        let recency = if self.half_life > 0.0 {
            0.5f64.powf(age / self.half_life)
        } else {
            1.0
        };
        salience as f64 * recency * (1.0 + uses as f64)
    }
}

/// Options of [`forget`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ForgetOptions {
    /// Events the store may hold (not counting deleted ones).
    pub budget: u64,
    pub policy: RetentionPolicy,
    /// "Now" for recency (default: the latest event's time).
    pub now: Option<i64>,
    /// Most rounds of choice and deletion (see [`forget`]; default [`MAX_ROUNDS`], at least 1).
    pub max_rounds: usize,
}

impl Default for ForgetOptions {
    fn default() -> Self {
        ForgetOptions {
            budget: 0,
            policy: RetentionPolicy::default(),
            now: None,
            max_rounds: MAX_ROUNDS,
        }
    }
}

impl ForgetOptions {
    pub fn with_budget(budget: u64) -> Self {
        ForgetOptions {
            budget,
            ..ForgetOptions::default()
        }
    }

    /// At most `rounds` rounds: one leaves the week summaries whose other events it evicted,
    /// holding the gist of what went (as a forgetting did before it took rounds).
    pub fn in_rounds(self, rounds: usize) -> Self {
        ForgetOptions {
            max_rounds: rounds,
            ..self
        }
    }
}

/// What a forgetting did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ForgetReport {
    /// Events held (not deleted) before and after; `after` counts the deletion event itself.
    pub events_before: u64,
    pub events_after: u64,
    /// Evictable events this forgetting evicted.
    pub evicted: usize,
    /// Earlier forgettings' deletion events that this one's replaces (it lists what they
    /// deleted): they go too, and are not among the evictable.
    pub replaced: usize,
    /// Events that could have been evicted (see the module documentation).
    pub evictable: usize,
    /// Bytes of the store directory before and after (the log keeps evicted records until
    /// `loci compact`).
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// What the store directory's files take on disk before and after: redb grows its file
    /// ahead of use, so a forgetting of 800,000 events took its length from 715 MB to 1.39
    /// GB while its allocated bytes went from 696 to 719 MB.
    #[serde(default)]
    pub allocated_before: u64,
    #[serde(default)]
    pub allocated_after: u64,
    /// The store holds more than the budget after the forgetting: too little is evictable,
    /// or the rounds ran out ([`ForgetOptions::max_rounds`]) or one failed ([`Self::round_failed`]).
    pub over_budget: bool,
    /// Rounds of choice and deletion that evicted something ([`forget`]).
    #[serde(default)]
    pub rounds: usize,
    /// Why a round after the first failed, ending the rounds: those before it stand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_failed: Option<String>,
    /// Sequence number of the deletion event (0 when nothing was evicted).
    pub seq: u64,
}

/// What `loci forget` and `/v1/forget` do: consolidates the store in its days (`day` if
/// given, else the length its day summaries have, else minutes in a store of journal entries
/// or conversation turns; see [`ConsolidationPolicy::for_store`](crate::dynamics::consolidate::ConsolidationPolicy::for_store)), so
/// that every closed day has a summary to keep its gist, then forgets down to the budget.
/// The consolidation's batches (whole weeks each), then the forgetting, each atomic: a run
/// cut short between them leaves summaries, which the next run finds made.
pub fn consolidate_then_forget(
    store: &Store,
    day: Option<i64>,
    opts: &ForgetOptions,
) -> Result<(consolidate::ConsolidateReport, ForgetReport)> {
    // Refused before the consolidation writes anything.
    refuse_bad_options(opts)?;
    let policy = consolidate::ConsolidationPolicy::for_store(store, day)?;
    let first = consolidate::ConsolidateOptions::default().with_policy(policy);
    let consolidated = consolidate::consolidate(store, &consolidate::RuleSummarizer, &first)?;
    Ok((consolidated, forget(store, opts)?))
}

/// Refuses a budget of nothing, and a "now" past the world times the store takes: ages from
/// there overflow the arithmetic of retention.
fn refuse_bad_options(opts: &ForgetOptions) -> Result<()> {
    if opts.budget == 0 {
        return Err(Error::InvalidArgument {
            name: "budget".into(),
            message: "must be at least 1 event".into(),
        });
    }
    match opts.now.and_then(crate::store::time_out_of_range) {
        Some(message) => Err(Error::InvalidArgument {
            name: "now".into(),
            message,
        }),
        None => Ok(()),
    }
}

/// Evicts the lowest-retention evictable events until the store holds at most `budget`
/// events (the deletion event included), or nothing evictable is left.
///
/// In rounds, each a choice and its deletion: a week summary may go only once nothing else of
/// its week is left, which a choice reads before its deletion, so a round leaves the weeks
/// whose other events it evicted (at 272k events, `--budget 1` ended at 7,165 events where a
/// second run went on to 60). Another round is chosen while the store is still over budget
/// and the last round left a week summary alone in its week that was not evictable before it
/// (nothing else becomes evictable by a deletion: the choice already released what each
/// eviction frees), at most [`ForgetOptions::max_rounds`]. Each round's deletion event
/// replaces the round's before, so one is live. A round after the first that fails
/// ends the rounds, and the report says why ([`ForgetReport::round_failed`]): the rounds
/// before it are committed, each deletion atomic, and the store is as a forgetting of fewer
/// rounds would leave it.
pub fn forget(store: &Store, opts: &ForgetOptions) -> Result<ForgetReport> {
    forget_in_rounds(store, opts, forget_round)
}

/// What a round of [`forget`] is given: the store, the options, the turn at deleting it holds,
/// the week summaries the last round found evictable, and the report so far.
type Round<'a, 's> = (
    &'a Store,
    &'a ForgetOptions,
    &'a crate::store::DeletionTurn<'s>,
    &'a mut Option<BTreeSet<u64>>,
    &'a mut ForgetReport,
);

/// [`forget`], each round by `round` ([`forget_round`]; a test's may fail one).
fn forget_in_rounds(
    store: &Store,
    opts: &ForgetOptions,
    mut round: impl FnMut(Round<'_, '_>) -> Result<bool>,
) -> Result<ForgetReport> {
    refuse_bad_options(opts)?;
    // No deletion commits between the choice of events, which reads the log, and their
    // deletion.
    let turn = store.deletion_turn();
    let mut report = ForgetReport {
        events_before: store.events_held(),
        bytes_before: store.disk_bytes(),
        allocated_before: store.disk_bytes_allocated(),
        ..ForgetReport::default()
    };
    report.events_after = report.events_before;
    let mut weeks_seen: Option<BTreeSet<u64>> = None;
    while report.rounds < opts.max_rounds.max(1) && report.events_after > opts.budget {
        let first = report.rounds == 0;
        match round((store, opts, &turn, &mut weeks_seen, &mut report)) {
            Ok(true) => report.rounds += 1,
            Ok(false) => break,
            Err(e) if first => return Err(e),
            Err(e) => {
                tracing::warn!(round = report.rounds + 1, error = %e, "a later round of forgetting failed; the rounds before it stand");
                report.round_failed = Some(e.to_string());
                break;
            }
        }
    }
    report.over_budget = report.events_after > opts.budget;
    report.bytes_after = store.disk_bytes();
    report.allocated_after = store.disk_bytes_allocated();
    Ok(report)
}

/// One round of [`forget`]: chooses what to evict and deletes it, adding to `report`; `false`
/// when it evicted nothing. A round after the first chooses only when the one before left a
/// week summary evictable that `weeks_seen` (the evictable week summaries the last round
/// found) lacks: else it would find what the last one could not evict.
fn forget_round((store, opts, turn, weeks_seen, report): Round<'_, '_>) -> Result<bool> {
    let gists = evictable_gists(store)?;
    let weeks: BTreeSet<u64> = (gists.iter())
        .filter(|(_, g)| **g == Gist::Week)
        .map(|(seq, _)| *seq)
        .collect();
    if weeks_seen
        .as_ref()
        .is_some_and(|seen| weeks.is_subset(seen))
    {
        return Ok(false);
    }
    *weeks_seen = Some(weeks);
    let mut this = ForgetReport {
        events_before: report.events_after,
        ..ForgetReport::default()
    };
    // The choice's state (every evictable event, the support of every belief) is dropped
    // before the deletion, which replays the log and indexes again: it had been held
    // through both.
    let chosen = choose_evictions(store, opts, gists, &mut this)?;
    // What is evictable now: what earlier rounds evicted, and what this one could.
    report.evictable = report.evicted + this.evictable;
    let Some(chosen) = chosen else {
        return Ok(false);
    };
    // An earlier forgetting's record is replaced in the first round; a later round's
    // replaces the round's before, which is no earlier forgetting.
    if report.rounds == 0 {
        report.replaced = this.replaced;
    }
    let deletion = store.delete_in_turn(turn, &DeleteRequest::events(chosen), Reason::Forget)?;
    report.evicted += this.evicted;
    report.seq = deletion.seq;
    report.events_after = store.events_held();
    Ok(true)
}

/// Most rounds of choice and deletion one forgetting takes ([`forget`]): a round frees the
/// weeks whose events the one before evicted, and there is no level above a week, so a third
/// round most often finds nothing new and stops before its choice (week summaries of two day
/// lengths, whose ranges overlap, may need it). Each round costs what a forgetting did: a
/// reading of the summaries' placements, one of the log for the support of beliefs, and the
/// deletion's replay; the second most often finds the store already small.
pub const MAX_ROUNDS: usize = 4;

/// The events a forgetting evicts, with the earlier forgettings' deletion events it replaces
/// (`None`: nothing to evict); fills in `report`'s counts.
fn choose_evictions(
    store: &Store,
    opts: &ForgetOptions,
    gists: BTreeMap<u64, Gist>,
    report: &mut ForgetReport,
) -> Result<Option<BTreeSet<u64>>> {
    let now = match opts.now {
        Some(n) => n,
        None => store.latest_event_time()?.unwrap_or(0),
    };
    let (candidates, mut support) =
        candidates_and_support(store, gists, now, opts.policy.belief_floor)?;
    report.evictable = candidates.len();
    // One more record comes in: the deletion event.
    let excess = (report.events_before + 1 - opts.budget) as usize;
    let mut scored: Vec<(Gist, OrderedFloat<f64>, u64)> = {
        let g = store.graph();
        candidates
            .iter()
            .map(|c| {
                let uses = g.usage(&Item::Event(c.claims.seq)).map_or(0, |u| u.used);
                let score = opts.policy.score_of(c.ts, c.salience, now, uses);
                (c.gist, OrderedFloat(score), c.claims.seq)
            })
            .collect()
    };
    scored.sort_unstable();
    // Earlier forgettings go too: the new deletion lists what they deleted.
    let earlier: Vec<u64> = store
        .events_of_kind(DELETE)?
        .iter()
        .filter(|e| reason_of(e) == Some(Reason::Forget))
        .map(|e| e.seq)
        .collect();
    let take = excess.saturating_sub(earlier.len());
    let by_seq: BTreeMap<u64, &Claims> = candidates
        .iter()
        .map(|c| (c.claims.seq, &c.claims))
        .collect();
    let mut chosen = choose(&scored, &by_seq, &mut support, take);
    report.over_budget = chosen.len() + earlier.len() < excess;
    if chosen.is_empty() {
        return Ok(None);
    }
    report.evicted = chosen.len();
    report.replaced = earlier.len();
    chosen.extend(earlier);
    Ok(Some(chosen))
}

/// The events forgetting may evict, as what the choice reads of them, and the support of
/// the beliefs at `now` (of confidence `floor` and more) they are released from. One reading
/// of the log finds what the beliefs rest on, what the working memory rests on, and the
/// candidates' claims: the summaries' placements, read for the gists, are dropped before it,
/// and no candidate is read again by number (955,000 point reads at 980k events).
fn candidates_and_support(
    store: &Store,
    gists: BTreeMap<u64, Gist>,
    now: i64,
    floor: f32,
) -> Result<(Vec<Candidate>, Support)> {
    let mut rests_on = crate::dynamics::working::RestsOn::default();
    let mut candidates = Vec::with_capacity(gists.len());
    let support = Support::of_beliefs(store, now, floor, |ev, claims| {
        rests_on.see(ev);
        if let Some(gist) = gists.get(&ev.seq).filter(|_| may_go(ev)) {
            candidates.push(Candidate {
                claims,
                gist: *gist,
                ts: ev.ts,
                salience: ev.salience,
            });
        }
    })?;
    let kept: BTreeSet<u64> = rests_on.events().into_iter().collect();
    candidates.retain(|c| !kept.contains(&c.claims.seq));
    candidates.shrink_to_fit();
    Ok((candidates, support))
}

/// Up to `take` of the candidates `scored` (in the order they go) that can go, released from
/// `support` in that order. An event that cannot go yet because a later event needs a node it
/// creates may go once that later one has: passes over those still waiting repeat while they
/// make progress. A pass tries only the events a release since their last try may have freed
/// (one that changed a node they were held by): any other would be held as it was, with
/// nothing changed. A freed event after the release in the order is tried in the same pass,
/// one before it in the next, as a pass over every waiting event would. Each pass over every
/// waiting event had made a forgetting quadratic in the events: a world's chain of places,
/// each linked to the one before, freed one link a pass (41 s at 8,600 events).
fn choose(
    scored: &[(Gist, OrderedFloat<f64>, u64)],
    by_seq: &BTreeMap<u64, &Claims>,
    support: &mut Support,
    take: usize,
) -> BTreeSet<u64> {
    let mut chosen = BTreeSet::new();
    // The waiting events (by their place in `scored`) each node holds.
    let mut held_by: HashMap<String, Vec<usize>> = HashMap::new();
    let mut next: BTreeSet<usize> = (0..scored.len()).collect();
    while !next.is_empty() && chosen.len() < take {
        let mut pass = std::mem::take(&mut next);
        while let Some(i) = pass.pop_first() {
            if chosen.len() == take {
                break;
            }
            let ev = by_seq[&scored[i].2];
            match support.release(ev) {
                Release::Done => {
                    chosen.insert(ev.seq);
                    let (upserts, needs) = ev.node_roles();
                    for key in upserts.iter().chain(needs.iter()) {
                        for j in held_by.remove(*key).into_iter().flatten() {
                            if j > i {
                                pass.insert(j);
                            } else {
                                next.insert(j);
                            }
                        }
                    }
                }
                Release::HeldBy(keys) => {
                    for key in keys {
                        held_by.entry(key).or_default().push(i);
                    }
                }
                Release::Never => {}
            }
        }
    }
    chosen
}

/// The protected nodes and edges as the graph holds them now, by key.
struct Now {
    nodes: HashMap<String, crate::model::Node>,
    edges: HashMap<EdgeKey, EdgeNow>,
}

/// An edge's values that its upserts give (its evidence list, which can be long, aside).
struct EdgeNow {
    confidence: f32,
    valid_from: Option<i64>,
    valid_to: Option<i64>,
    props: crate::model::Props,
}

impl Now {
    fn of(
        store: &Store,
        nodes: &HashMap<String, u32>,
        edges: &HashMap<EdgeKey, u32>,
    ) -> Result<Now> {
        let mut now = Now {
            nodes: nodes
                .keys()
                .filter_map(|k| Some((k.clone(), store.node_by_key(k)?)))
                .collect(),
            edges: HashMap::with_capacity(edges.len()),
        };
        for k in edges.keys() {
            if let Some(e) = store.edge_between(&k.0, &k.1, &k.2)? {
                let values = EdgeNow {
                    confidence: e.confidence,
                    valid_from: e.valid_from,
                    valid_to: e.valid_to,
                    props: e.props,
                };
                now.edges.insert(k.clone(), values);
            }
        }
        Ok(now)
    }
}

/// What [`Support::release`] did with an event.
enum Release {
    Done,
    /// Not now: a later event needs one of these nodes, which the event creates. It may go
    /// once that event has.
    HeldBy(Vec<String>),
    /// Not in this forgetting: it is the last support of a belief (supports only ever fall).
    Never,
}

/// What asserts each belief: how many live events give each protected node a value, and how
/// many assert each protected edge as last seen when it was (the edge's `last_seen`, kept with
/// it); and, for every node, which live events create it and which name it.
struct Support {
    nodes: HashMap<String, u32>,
    edges: HashMap<EdgeKey, u32>,
    /// Each protected edge's `last_seen`: only an event asserting it as seen then supports it.
    /// Any assertion had counted, and a kept home moved back to an earlier sighting when the
    /// summary that restated its latest went (from 500 to 400; session 35 probe).
    last_seen: HashMap<EdgeKey, i64>,
    /// Each protected node's name where it is not its key: only an event giving that name
    /// supports it. Any value had counted, and a pinned tag kept only the event that had
    /// made it (`Tag`, `ci`) lost the name, properties, alias and pin a later one gave, once
    /// the summary restating them went (session 35 re-probe, seed 641).
    names: HashMap<String, String>,
    order: HashMap<String, NodeOrder>,
    /// The last retraction of each node and edge that the log retracts, by sequence number:
    /// replay makes what it retracted again from the events after it alone, so only those
    /// support it (an upsert from before a node's retraction had counted as making it before
    /// an edge that needs it, and a summary from before an edge's retraction as its support;
    /// helper-83).
    retracted_nodes: HashMap<String, u64>,
    retracted_edges: HashMap<EdgeKey, u64>,
    /// The retraction after which each count was made (0: none), for counts of edges whose
    /// end a later retraction took: reset when the first event after it is counted.
    counted_after: HashMap<EdgeKey, u64>,
    /// Every edge's validity changes since its last retraction, belief or not.
    validity: HashMap<EdgeKey, Validity>,
    /// Which live events give each protected node's values.
    node_values: HashMap<String, Givers>,
    /// Which live events give each protected edge's values.
    edge_values: HashMap<EdgeKey, Givers>,
    /// The one copy of each key and name the maps and the candidates' claims share.
    keys: Keys,
}

/// An edge by its ends' keys and its relation, one shared copy of each: the candidates'
/// claims name the same edges again and again (each summary restates its period's). As
/// `String`s each was a copy of its own, most of a forgetting's peak at 415k events; as
/// three shared strings, 48 bytes a claim, 121 MB of 514 at 980k events.
type EdgeKey = Arc<(Arc<str>, Arc<str>, Arc<str>)>;

/// The key of the edge `relation` from `from` to `to`.
fn edge_key(keys: &mut Keys, from: &str, relation: &str, to: &str) -> EdgeKey {
    let ends = (keys.of(from), keys.of(relation), keys.of(to));
    if let Some(shared) = keys.edges.get(&ends) {
        return shared.clone();
    }
    let shared = Arc::new(ends);
    keys.edges.insert(shared.clone());
    shared
}

/// One shared copy of each key and name the choice holds, and of each edge's ([`EdgeKey`]).
#[derive(Default)]
struct Keys {
    strings: std::collections::HashSet<Arc<str>>,
    edges: std::collections::HashSet<EdgeKey>,
}

impl Keys {
    fn of(&mut self, s: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(s) {
            return shared.clone();
        }
        let shared: Arc<str> = s.into();
        self.strings.insert(shared.clone());
        shared
    }
}

/// Which live events give a protected node's or edge's values, value by value (an edge's
/// validity aside: [`Validity`] folds it for every edge). Replay folds
/// the events that remain in log order (the last to give a value sets it, aliases add up, and
/// a node's salience is the last one given raised by each later raw event asserting it), so an
/// event may go only if, without it, every value still comes out as it is now. A node's
/// support had been any event giving it its name: a week summary written before a later week
/// changed the node gave that name, and once the later week's events and summaries went it
/// brought back the old label, aliases, properties and salience; an edge's, any event
/// asserting it as seen when it last was, which brought back a corrected confidence
/// (helper-82).
#[derive(Default)]
struct Givers {
    /// Each value the last giver sets.
    last_wins: HashMap<Field, LastWins>,
    /// Each alias the node has, with the events giving it.
    aliases: HashMap<String, BTreeSet<u64>>,
    /// The node as the events noted so far give it, folded as replay folds them.
    folded: Option<NodeValues>,
    /// The events naming the node by an alias it had then, which takes it out of the aliases
    /// (rules 8): without one, replay keeps the alias. Each stays, as a retraction does (a
    /// later event giving the alias again would do too; this does not look for one). Only an
    /// alias the node had: "ever given as one" had held every summary restating a node named
    /// by its first alias (helper-137).
    unaliasing: BTreeSet<u64>,
    /// A node's salience now, the events giving one by sequence number, and those raising it
    /// (a raw event asserting the node without one raises it to its own salience).
    salience: Option<f32>,
    salience_given: BTreeMap<u64, f32>,
    salience_raised: BTreeMap<u64, f32>,
    /// The last retraction before these events (0: none): the givers noted before a later
    /// one are dropped when the first event after it is noted, not looked for at the
    /// retraction (a node's retraction takes every edge at it).
    after: u64,
}

/// A value of a node or an edge that the last event giving it sets.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Field {
    Label,
    Name,
    Anchor,
    Pinned,
    Confidence,
    Prop(String),
}

/// Who gives one such value.
struct LastWins {
    /// The events giving it, each with whether it gives the value there is now.
    givers: BTreeMap<u64, bool>,
    /// Whether replay with no giver left gives the value there is now (none, `Entity`, 1.0).
    as_if_none: bool,
}

impl Givers {
    /// Starts afresh if what was noted came before the last retraction, `retracted`.
    fn start_after(&mut self, retracted: u64) {
        if self.after != retracted {
            *self = Givers {
                after: retracted,
                ..Givers::default()
            };
        }
    }

    fn give(&mut self, field: Field, seq: u64, gives_now: bool, as_if_none: bool) {
        self.last_wins
            .entry(field)
            .or_insert_with(|| LastWins {
                givers: BTreeMap::new(),
                as_if_none,
            })
            .givers
            .insert(seq, gives_now);
    }

    /// Notes what `up`, of event `ev`, gives the node `now`.
    fn give_node(&mut self, ev: &Event, up: &crate::model::NodeUpsert, now: &crate::model::Node) {
        let seq = ev.seq;
        if let Some(label) = &up.label {
            let entity = now.label == crate::model::labels::ENTITY;
            self.give(Field::Label, seq, *label == now.label, entity);
        }
        if let Some(name) = &up.name {
            self.give(Field::Name, seq, *name == now.name, now.name == now.key);
        }
        if up.anchor.is_some() {
            self.give(
                Field::Anchor,
                seq,
                up.anchor == now.anchor,
                now.anchor.is_none(),
            );
        }
        if let Some(pinned) = up.pinned {
            self.give(Field::Pinned, seq, pinned == now.pinned, !now.pinned);
        }
        self.give_props(seq, &up.props, &now.props);
        if let Some(name) = &up.name {
            if (self.folded.as_ref()).is_some_and(|v| v.aliases.contains(name)) {
                self.unaliasing.insert(seq);
            }
            // Those that gave the alias before give it no more: this takes it out, and only
            // a later giver adds it again (helper-137: one of two givers, the later, went, as
            // if the earlier still gave it).
            self.aliases.remove(name);
        }
        NodeValues::fold(&mut self.folded, up);
        // Replay adds no alias that is the name the upsert gives (a summary restating a name
        // and an alias alike gives only the name; helper-84).
        let added = |a: &&String| now.aliases.contains(a) && up.name.as_ref() != Some(*a);
        for alias in up.aliases.iter().filter(added) {
            self.aliases.entry(alias.clone()).or_default().insert(seq);
        }
        self.salience = Some(now.salience);
        match up.salience {
            Some(s) => {
                self.salience_given.insert(seq, s);
            }
            None if ev.kind == SUMMARY => {}
            None => {
                self.salience_raised.insert(seq, ev.salience);
            }
        }
    }

    /// Notes what `up`, of event `seq`, gives the edge `now`.
    fn give_edge(&mut self, seq: u64, up: &crate::model::EdgeUpsert, now: &EdgeNow) {
        if let Some(c) = up.confidence {
            self.give(
                Field::Confidence,
                seq,
                c == now.confidence,
                now.confidence == 1.0,
            );
        }
        self.give_props(seq, &up.props, &now.props);
    }

    /// A property set to null removes it: it gives the value there is now if there is none.
    fn give_props(&mut self, seq: u64, given: &crate::model::Props, now: &crate::model::Props) {
        for (k, v) in given {
            let gives_now = match now.get(k) {
                Some(have) => have == v,
                None => *v == Value::Null,
            };
            self.give(Field::Prop(k.clone()), seq, gives_now, !now.contains_key(k));
        }
    }

    /// Whether every value comes out as it is now once event `seq` goes.
    fn hold_without(&self, seq: u64) -> bool {
        let last_wins = self
            .last_wins
            .values()
            .all(|f| match f.givers.last_key_value() {
                Some((last, _)) if *last == seq => match f.givers.range(..seq).next_back() {
                    Some((_, gives_now)) => *gives_now,
                    None => f.as_if_none,
                },
                _ => true,
            });
        let aliases = self
            .aliases
            .values()
            .all(|by| by.len() > 1 || !by.contains(&seq));
        last_wins && aliases && !self.unaliasing.contains(&seq) && self.salience_holds_without(seq)
    }

    fn salience_holds_without(&self, seq: u64) -> bool {
        let Some(now) = self.salience else {
            return true;
        };
        if !self.salience_given.contains_key(&seq) && !self.salience_raised.contains_key(&seq) {
            return true;
        }
        let given = self
            .salience_given
            .iter()
            .rev()
            .find(|(s, _)| **s != seq)
            .map(|(s, v)| (*s, *v));
        let after = given.map_or(0, |(s, _)| s.saturating_add(1));
        let raised = self
            .salience_raised
            .range(after..)
            .filter(|(s, _)| **s != seq)
            .map(|(_, v)| *v)
            .reduce(f32::max);
        let folded = match (given.map(|(_, v)| v), raised) {
            (Some(g), Some(r)) => Some(g.max(r)),
            (g, r) => g.or(r),
        };
        // Nothing left to give one: the node goes with its last upsert, which the counts of
        // its support keep.
        folded.is_none_or(|v| v == now)
    }

    /// Event `seq` is gone.
    fn drop_giver(&mut self, seq: u64) {
        for f in self.last_wins.values_mut() {
            f.givers.remove(&seq);
        }
        for by in self.aliases.values_mut() {
            by.remove(&seq);
        }
        self.salience_given.remove(&seq);
        self.salience_raised.remove(&seq);
    }
}

/// The live events that change an edge's validity, each with what it sets, after the edge's
/// last retraction. Replay refuses an upsert that leaves a validity ending before it starts,
/// even of a log with deleted events, so an event may go only if the changes left still fold
/// to a validity that starts no later than it ends at each step: `[10, 20]`, an end of 100,
/// then a start of 50 is `[50, 100]`, and without the end `[50, 20]`, which made forgetting's
/// deletion fail on every run (helper-84).
/// For a protected edge, the fold must also end at the validity it has now (the last change
/// left giving each bound gives today's; none left, it is unbounded).
#[derive(Default)]
struct Validity {
    /// The last retraction before these changes (as [`Givers::after`]).
    after: u64,
    changes: BTreeMap<u64, (Option<i64>, Option<i64>)>,
    /// A protected edge's validity now.
    now: Option<(Option<i64>, Option<i64>)>,
}

impl Validity {
    /// Starts afresh if what was noted came before the last retraction, `retracted`.
    fn start_after(&mut self, retracted: u64) {
        if self.after != retracted {
            *self = Validity {
                after: retracted,
                ..Validity::default()
            };
        }
    }

    /// Whether the changes fold without `seq` as replay takes them, to the validity a
    /// protected edge has now.
    fn holds_without(&self, seq: u64) -> bool {
        let (mut from, mut to) = (None, None);
        for (s, (f, t)) in &self.changes {
            if *s == seq {
                continue;
            }
            from = f.or(from);
            to = t.or(to);
            if let (Some(f), Some(t)) = (from, to) {
                if f > t {
                    return false;
                }
            }
        }
        self.now.is_none_or(|now| now == (from, to))
    }
}

/// The live events that upsert a node and those whose assertions need it to exist (edge ends),
/// by sequence number. Replay without an evicted event skips an assertion on a
/// node that does not exist yet at its place in the log, so evicting an upsert is safe only if
/// another upsert still comes before the first event that needs the node: a day summary, which
/// re-asserts the node, is written after the next day's events, and evicting the node's
/// creator would otherwise silently drop their edges to it.
#[derive(Default)]
struct NodeOrder {
    upserts: BTreeSet<u64>,
    needs: BTreeSet<u64>,
}

impl NodeOrder {
    /// Whether the node still exists before every event that needs it once `seq` goes.
    fn survives_without(&self, seq: u64) -> bool {
        let first_need = self.needs.iter().find(|s| **s != seq);
        let first_upsert = self.upserts.iter().find(|s| **s != seq);
        match (first_need, first_upsert) {
            (None, _) => true,
            // An event may upsert a node and then link it (its assertions apply in order, and
            // live ingest refuses an edge to a node not yet upserted).
            (Some(need), Some(upsert)) => upsert <= need,
            (Some(_), None) => false,
        }
    }
}

/// An evictable event as the choice reads it.
struct Candidate {
    claims: Claims,
    gist: Gist,
    ts: i64,
    salience: f32,
}

/// What the choice reads of an event: its sequence number, the nodes it upserts
/// with what decides whether it supports them ([`Support::supports`]), and the edges it
/// upserts with when it saw them (a retraction names nothing here). Candidates are held as
/// these, not as events: at 115,000 events a forgetting held 265,000 candidates whole, 445 MB
/// of payloads (a summary's holds its digest) and 228 MB of the rest, of 1.4 GB of heap.
/// Each list is as long as it is: grown a push at a time, the edges' of 955,000 candidates
/// had held room for four claims where most had one, 121 MB of 514.
struct Claims {
    seq: u64,
    nodes: Box<[NodeClaim]>,
    edges: Box<[EdgeClaim]>,
}

struct NodeClaim {
    key: Arc<str>,
    name: Option<Arc<str>>,
    first_alias: Option<Arc<str>>,
    gives_a_value: bool,
}

struct EdgeClaim {
    key: EdgeKey,
    /// When the upsert saw the edge (its event's time, or the `last_seen` it gives).
    seen: i64,
}

impl Claims {
    fn of(ev: &Event, keys: &mut Keys) -> Claims {
        // Made as long as they will be, so that boxing them moves nothing: the pass makes
        // the claims of every event of the log, not only the candidates' (helper-130).
        let count =
            |upserts: fn(&Assertion) -> bool| ev.assertions.iter().filter(|a| upserts(a)).count();
        let mut nodes = Vec::with_capacity(count(|a| matches!(a, Assertion::UpsertNode(_))));
        let mut edges = Vec::with_capacity(count(|a| matches!(a, Assertion::UpsertEdge(_))));
        for a in &ev.assertions {
            match a {
                Assertion::UpsertNode(up) => nodes.push(NodeClaim {
                    key: keys.of(&up.key),
                    name: up.name.as_deref().map(|n| keys.of(n)),
                    first_alias: up.aliases.first().map(|a| keys.of(a)),
                    gives_a_value: gives_a_value(up),
                }),
                Assertion::UpsertEdge(up) => edges.push(EdgeClaim {
                    key: edge_key(keys, &up.from, &up.relation, &up.to),
                    seen: up.last_seen.unwrap_or(ev.ts),
                }),
                Assertion::RetractNode { .. } | Assertion::RetractEdge { .. } => {}
            }
        }
        Claims {
            seq: ev.seq,
            nodes: nodes.into_boxed_slice(),
            edges: edges.into_boxed_slice(),
        }
    }

    /// The nodes the event upserts and those its assertions need: an edge's ends. A
    /// retraction needs nothing: replay skips one whose node is not there, which leaves it as
    /// retracted (counted as a need, a kept retraction held the node's maker forever).
    fn node_roles(&self) -> (BTreeSet<&str>, BTreeSet<&str>) {
        let upserts = self.nodes.iter().map(|n| &*n.key).collect();
        let needs = self
            .edges
            .iter()
            .flat_map(|e| [&*e.key.0, &*e.key.2])
            .collect();
        (upserts, needs)
    }
}

impl Support {
    /// Counts, over every live event, the assertions of the beliefs at `now`: edges with an
    /// effective confidence of at least `floor` or touching a pinned node, their nodes, and
    /// pinned nodes. Shows `also` each live event as it goes, with its claims.
    fn of_beliefs(
        store: &Store,
        now: i64,
        floor: f32,
        mut also: impl FnMut(&Event, Claims),
    ) -> Result<Support> {
        let mut nodes = HashMap::new();
        let mut edges = HashMap::new();
        let mut last_seen = HashMap::new();
        let mut keys = Keys::default();
        {
            let g = store.graph();
            for id in g.pinned_ids() {
                nodes.insert(g.node_key(id).unwrap_or_default().to_string(), 0);
            }
            for (id, core) in g.edges() {
                let (Some(from), Some(to)) = (g.node_key(core.from), g.node_key(core.to)) else {
                    continue;
                };
                let believed = g.effective_confidence(id, Some(now)).unwrap_or(0.0) >= floor
                    || g.is_pinned(core.from)
                    || g.is_pinned(core.to);
                if believed {
                    let key = edge_key(&mut keys, from, g.relation_name(core.relation), to);
                    last_seen.insert(key.clone(), core.last_seen);
                    edges.insert(key, 0);
                    nodes.insert(from.to_string(), 0);
                    nodes.insert(to.to_string(), 0);
                }
            }
        }
        let now = Now::of(store, &nodes, &edges)?;
        let names = now
            .nodes
            .iter()
            .filter(|(key, node)| node.name != **key)
            .map(|(key, node)| (key.clone(), node.name.clone()))
            .collect();
        let mut support = Support {
            nodes,
            edges,
            last_seen,
            names,
            order: HashMap::new(),
            retracted_nodes: HashMap::new(),
            retracted_edges: HashMap::new(),
            counted_after: HashMap::new(),
            validity: HashMap::new(),
            node_values: HashMap::new(),
            edge_values: HashMap::new(),
            keys,
        };
        store.scan_log(1, |ev| {
            support.note_retractions(&ev);
            let claims = Claims::of(&ev, &mut support.keys);
            support.each_belief(&claims, |count| *count += 1);
            support.note_values(&ev, &now);
            support.note_order(&ev);
            also(&ev, claims);
            Ok(true)
        })?;
        Ok(support)
    }

    /// Notes the retractions of `ev`, in the log's order. A node's count starts afresh at its
    /// retraction; an edge's when the first event after the retraction is counted (a node's
    /// retraction takes every edge at it, which are not looked for here).
    fn note_retractions(&mut self, ev: &Event) {
        for a in &ev.assertions {
            match a {
                Assertion::RetractNode { key } => {
                    self.retracted_nodes.insert(key.clone(), ev.seq);
                    if let Some(c) = self.nodes.get_mut(key) {
                        *c = 0;
                    }
                }
                Assertion::RetractEdge { from, relation, to } => {
                    let key = edge_key(&mut self.keys, from, relation, to);
                    self.retracted_edges.insert(key, ev.seq);
                }
                _ => {}
            }
        }
    }

    /// The last retraction of edge `key` or of one of its ends (0: none).
    fn edge_retracted_at(&self, key: &EdgeKey) -> u64 {
        let node = |k: &str| self.retracted_nodes.get(k).copied().unwrap_or(0);
        let edge = self.retracted_edges.get(key).copied().unwrap_or(0);
        edge.max(node(&key.0)).max(node(&key.2))
    }

    /// Notes which nodes `ev` upserts and which its edges need, in the order of its
    /// assertions (after a retraction in it, for the node made again).
    fn note_order(&mut self, ev: &Event) {
        for a in &ev.assertions {
            match a {
                Assertion::UpsertNode(up) => {
                    let o = self.order.entry(up.key.clone()).or_default();
                    o.upserts.insert(ev.seq);
                }
                Assertion::UpsertEdge(up) => {
                    for key in [&up.from, &up.to] {
                        let o = self.order.entry(key.clone()).or_default();
                        o.needs.insert(ev.seq);
                    }
                }
                // The node made again is another: what needed the one before is gone with
                // it, whatever replay makes of that.
                Assertion::RetractNode { key } => {
                    self.order.remove(key);
                }
                Assertion::RetractEdge { .. } => {}
            }
        }
    }

    /// Calls `f` once with the count of each belief `ev` supports (once, however often it
    /// asserts it): a node it gives a value, an edge it asserts as seen when it last was;
    /// either only after its last retraction.
    fn each_belief(&mut self, ev: &Claims, mut f: impl FnMut(&mut u32)) {
        let mut node_keys = BTreeSet::new();
        let mut edge_keys = BTreeSet::new();
        for up in ev.nodes.iter().filter(|up| self.supports(up)) {
            let retracted = self.retracted_nodes.get(&*up.key).copied().unwrap_or(0);
            if ev.seq > retracted {
                node_keys.insert(&*up.key);
            }
        }
        for up in &ev.edges {
            let retracted = self.edge_retracted_at(&up.key);
            if ev.seq > retracted
                && self
                    .last_seen
                    .get(&up.key)
                    .is_some_and(|last| up.seen >= *last)
            {
                edge_keys.insert((&up.key, retracted));
            }
        }
        for key in node_keys {
            if let Some(c) = self.nodes.get_mut(key) {
                f(c);
            }
        }
        for (key, retracted) in edge_keys {
            if let Some(c) = self.edges.get_mut(key) {
                // The first count after a retraction starts afresh (the scan counts in log
                // order; a release only ever sees events of the count's own life).
                if self.counted_after.get(key).copied().unwrap_or(0) != retracted {
                    *c = 0;
                    self.counted_after.insert(key.clone(), retracted);
                }
                f(c);
            }
        }
    }

    /// Whether `up` supports its node: gives it the name it has (the name, or the first
    /// alias a node made without one takes), or, for a node named by its key, any value.
    fn supports(&self, up: &NodeClaim) -> bool {
        match self.names.get(&*up.key) {
            Some(name) => match &up.name {
                Some(given) => **given == **name,
                None => up.first_alias.as_deref() == Some(name.as_str()),
            },
            None => up.gives_a_value,
        }
    }

    /// Notes which of the protected nodes' and edges' values `ev` gives, after its last
    /// retraction (`note_retractions`): replay makes what it retracted again from the events
    /// after it alone.
    fn note_values(&mut self, ev: &Event, now: &Now) {
        for a in &ev.assertions {
            match a {
                Assertion::UpsertNode(up) => {
                    let retracted = self.retracted_nodes.get(&up.key).copied().unwrap_or(0);
                    if let Some(n) = now.nodes.get(&up.key).filter(|_| ev.seq > retracted) {
                        let givers = self.node_values.entry(up.key.clone()).or_default();
                        givers.start_after(retracted);
                        givers.give_node(ev, up, n);
                    }
                }
                Assertion::UpsertEdge(up) => {
                    let key = edge_key(&mut self.keys, &up.from, &up.relation, &up.to);
                    let retracted = self.edge_retracted_at(&key);
                    let changes_validity = up.valid_from.is_some() || up.valid_to.is_some();
                    if changes_validity && ev.seq > retracted {
                        let v = self.validity.entry(key.clone()).or_default();
                        v.start_after(retracted);
                        v.now = now.edges.get(&key).map(|e| (e.valid_from, e.valid_to));
                        v.changes.insert(ev.seq, (up.valid_from, up.valid_to));
                    }
                    if let Some(e) = now.edges.get(&key).filter(|_| ev.seq > retracted) {
                        let givers = self.edge_values.entry(key).or_default();
                        givers.start_after(retracted);
                        givers.give_edge(ev.seq, up, e);
                    }
                }
                Assertion::RetractNode { .. } | Assertion::RetractEdge { .. } => {}
            }
        }
    }

    /// The nodes whose values, or those of an edge from them, would change without `ev`, or
    /// an edge from which would fold to a validity replay refuses.
    fn values_held_by(&self, ev: &Claims) -> Vec<String> {
        let mut held: BTreeSet<&str> = BTreeSet::new();
        for up in &ev.nodes {
            if let Some(g) = self.node_values.get(&*up.key) {
                if !g.hold_without(ev.seq) {
                    held.insert(&up.key);
                }
            }
        }
        for up in &ev.edges {
            let values = self
                .edge_values
                .get(&up.key)
                .is_none_or(|g| g.hold_without(ev.seq));
            let validity = self
                .validity
                .get(&up.key)
                .is_none_or(|v| v.holds_without(ev.seq));
            if !(values && validity) {
                held.insert(&up.key.0);
            }
        }
        held.into_iter().map(String::from).collect()
    }

    /// `ev` is gone: it gives no value, and changes no validity, any more.
    fn drop_givers(&mut self, ev: &Claims) {
        for up in &ev.nodes {
            if let Some(g) = self.node_values.get_mut(&*up.key) {
                g.drop_giver(ev.seq);
            }
        }
        for up in &ev.edges {
            if let Some(g) = self.edge_values.get_mut(&up.key) {
                g.drop_giver(ev.seq);
            }
            if let Some(v) = self.validity.get_mut(&up.key) {
                v.changes.remove(&ev.seq);
            }
        }
    }

    /// Takes `ev`'s support away if no belief would be left without any, every value of one
    /// would come out as it is, and every node it creates would still be there for the events
    /// that need it; says what it did.
    fn release(&mut self, ev: &Claims) -> Release {
        let mut last = false;
        self.each_belief(ev, |count| last |= *count <= 1);
        if last {
            return Release::Never;
        }
        // An earlier event giving a value as it was comes next in line: once it has gone, the
        // one before it may give the value there is now.
        let values_held = self.values_held_by(ev);
        if !values_held.is_empty() {
            return Release::HeldBy(values_held);
        }
        let (upserts, needs) = ev.node_roles();
        let held_by: Vec<String> = upserts
            .iter()
            .filter(|key| {
                self.order
                    .get(**key)
                    .is_some_and(|o| !o.survives_without(ev.seq))
            })
            .map(|key| key.to_string())
            .collect();
        if !held_by.is_empty() {
            return Release::HeldBy(held_by);
        }
        self.each_belief(ev, |count| *count = count.saturating_sub(1));
        self.drop_givers(ev);
        for key in upserts.iter().chain(needs.iter()) {
            if let Some(o) = self.order.get_mut(*key) {
                o.upserts.remove(&ev.seq);
                o.needs.remove(&ev.seq);
            }
        }
        Release::Done
    }
}

/// The events of the summary hierarchy forgetting may evict (see the module documentation),
/// by the gist that holds what they say; [`may_go`] says which of them can, and the choice
/// leaves out the events the working memory rests on
/// ([`crate::dynamics::working::RestsOn`]: evicting a `SLEEP` that had cleared it brought a
/// stale intent back into every context).
fn evictable_gists(store: &Store) -> Result<BTreeMap<u64, Gist>> {
    // Without their digests, which nothing here reads; in log order, as the passes below
    // have always taken them.
    let mut all = consolidate::placements_with_children(store)?;
    all.sort_by_key(|s| s.seq);
    let live: BTreeSet<u64> = consolidate::live(all.iter().cloned())
        .values()
        .map(|s| s.seq)
        .collect();
    // Parent of each live summary's children, among live summaries.
    let mut parent_level: BTreeMap<u64, Level> = BTreeMap::new();
    for s in all.iter().filter(|s| live.contains(&s.seq)) {
        for c in &s.children {
            parent_level.insert(*c, s.level);
        }
    }
    let mut seqs: BTreeMap<u64, Gist> = BTreeMap::new();
    for s in &all {
        if !live.contains(&s.seq) {
            // Superseded: its replacement holds the gist.
            seqs.insert(s.seq, Gist::Redundant);
            continue;
        }
        match s.level {
            Level::Episode if parent_level.get(&s.seq) == Some(&Level::Day) => {
                seqs.insert(s.seq, Gist::Episode);
                for c in &s.children {
                    seqs.insert(*c, Gist::Detail);
                }
            }
            Level::Day if parent_level.get(&s.seq) == Some(&Level::Week) => {
                seqs.insert(s.seq, Gist::Day);
            }
            // The top of the hierarchy goes last: only once nothing else of its week is left,
            // so that no remnant (a last support forgetting had to keep) makes the next
            // consolidation summarise the week again from what little remains.
            Level::Week if only_event_of_its_range(store, s)? => {
                seqs.insert(s.seq, Gist::Week);
            }
            _ => {}
        }
    }
    for seq in superseded_usage(store)? {
        seqs.insert(seq, Gist::Redundant);
    }
    Ok(seqs)
}

/// Whether an event the hierarchy lets go can: not one that withdraws something, nor
/// bookkeeping (deletions, tombstones, pins).
fn may_go(ev: &Event) -> bool {
    !ev.assertions.iter().any(withdraws)
        && ![DELETE, TOMBSTONE, kinds::PIN, kinds::UNPIN].contains(&ev.kind.as_str())
}

/// Whether `up` gives its node a value (a label, name, alias, property or anchor): a pin's
/// upsert gives none, and as the node's last support it had left the node bare when replay
/// made it again (a pinned turn lost its label, name and text; session 35 probe).
fn gives_a_value(up: &crate::model::NodeUpsert) -> bool {
    up.label.is_some()
        || up.name.is_some()
        || !up.aliases.is_empty()
        || !up.props.is_empty()
        || up.anchor.is_some()
}

/// Whether `a` withdraws something: a retraction, a property set to null (its removal), an
/// unpin. It supports no belief, yet the replay without it makes again what it withdrew from an
/// earlier event or summary (a retracted edge came back at full confidence, a removed password
/// and a pin came back).
fn withdraws(a: &Assertion) -> bool {
    let removes = |props: &crate::model::Props| props.values().any(|v| *v == Value::Null);
    match a {
        Assertion::RetractEdge { .. } | Assertion::RetractNode { .. } => true,
        Assertion::UpsertNode(up) => removes(&up.props) || up.pinned == Some(false),
        Assertion::UpsertEdge(up) => removes(&up.props),
    }
}

/// Whether `summary` is the only live event of its time range.
fn only_event_of_its_range(store: &Store, summary: &Placement) -> Result<bool> {
    Ok(store
        .event_times(summary.start, summary.end)?
        .iter()
        .all(|(_, seq)| *seq == summary.seq))
}

/// How much of the past an evictable event stands for: forgetting takes the lower first
/// (detail before gist), and by retention within one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Gist {
    /// A superseded summary or `USAGE` record: a later one holds all it says.
    Redundant,
    /// A raw event of a summarised episode.
    Detail,
    Episode,
    Day,
    Week,
}

/// The `USAGE` events whose every item a later `USAGE` event names (see the module
/// documentation).
fn superseded_usage(store: &Store) -> Result<Vec<u64>> {
    let mut named_later: BTreeSet<Item> = BTreeSet::new();
    let mut out = Vec::new();
    for ev in store.events_of_kind(USAGE)?.iter().rev() {
        let items: Vec<Item> = entries(ev).into_iter().map(|(item, _)| item).collect();
        if items.iter().all(|i| named_later.contains(i)) {
            out.push(ev.seq);
        }
        named_later.extend(items);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventDraft;

    /// helper-137: the givers of an alias that an event naming the node by it took out give
    /// it no more. "Ann" given the alias "Annie", renamed "Annie", renamed "Ann", then given
    /// "Annie" again: the first giver had still counted, so the last could go, and replay
    /// without it has no alias. The rename itself stays (it takes the alias out).
    #[test]
    fn an_alias_a_rename_took_out_keeps_only_its_later_givers() {
        let upsert = |name: Option<&str>, aliases: &[&str]| crate::model::NodeUpsert {
            key: "p".into(),
            name: name.map(str::to_string),
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        };
        let now = crate::model::Node {
            id: crate::model::NodeId(0),
            key: "p".into(),
            label: crate::model::labels::ENTITY.into(),
            name: "Ann".into(),
            aliases: vec!["Annie".into()],
            props: Default::default(),
            anchor: None,
            salience: 0.5,
            pinned: false,
            created: 10,
            updated: 40,
        };
        let mut givers = Givers::default();
        let steps = [
            (1, upsert(Some("Ann"), &["Annie"])),
            (2, upsert(Some("Annie"), &[])),
            (3, upsert(Some("Ann"), &[])),
            (4, upsert(None, &["Annie"])),
        ];
        for (seq, up) in &steps {
            let ev = Event::from_draft(*seq, 0, EventDraft::new(*seq as i64 * 10, "bot", "NOTE"));
            givers.give_node(&ev, up, &now);
        }
        assert!(!givers.hold_without(4), "the alias's only giver left");
        assert!(!givers.hold_without(2), "the rename takes the alias out");
        assert!(givers.hold_without(1), "the rename cancelled what it gave");
    }

    /// The passes [`choose`] stands for: every waiting event tried in order, again and again
    /// while a pass makes progress.
    fn choose_by_sweeps(
        scored: &[(Gist, OrderedFloat<f64>, u64)],
        by_seq: &BTreeMap<u64, &Claims>,
        support: &mut Support,
        take: usize,
    ) -> BTreeSet<u64> {
        let mut chosen = BTreeSet::new();
        let mut waiting = scored.to_vec();
        loop {
            let before = chosen.len();
            waiting.retain(|(_, _, seq)| {
                let done =
                    chosen.len() < take && matches!(support.release(by_seq[seq]), Release::Done);
                if done {
                    chosen.insert(*seq);
                }
                !done
            });
            if chosen.len() == take || chosen.len() == before {
                break;
            }
        }
        chosen
    }

    /// The review of session 34 found the first worklist deferred to the next pass an event a
    /// release freed later in the same pass, which a sweep tries at once: with a limit of 191
    /// on this world, another event went. Both choose the same events, for every limit, on a
    /// world whose places each link to those found before (long chains of creators and
    /// needers).
    #[test]
    fn the_worklist_chooses_what_sweeps_over_every_waiting_event_choose() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), crate::storage::BackendKind::Redb).unwrap();
        let w = crate::world::generate(&crate::world::WorldConfig {
            seed: 6,
            scale: 1,
            days: 30,
        });
        store.ingest(w.events).unwrap();
        crate::dynamics::consolidate::consolidate(
            &store,
            &crate::dynamics::consolidate::RuleSummarizer,
            &Default::default(),
        )
        .unwrap();
        let now = store.latest_event_time().unwrap().unwrap();
        let policy = RetentionPolicy::default();
        let gists = evictable_gists(&store).unwrap();
        let (candidates, _) =
            candidates_and_support(&store, gists, now, policy.belief_floor).unwrap();
        let mut scored: Vec<(Gist, OrderedFloat<f64>, u64)> = candidates
            .iter()
            .map(|c| {
                let score = policy.score_of(c.ts, c.salience, now, 0);
                (c.gist, OrderedFloat(score), c.claims.seq)
            })
            .collect();
        scored.sort_unstable();
        let by_seq: BTreeMap<u64, &Claims> = candidates
            .iter()
            .map(|c| (c.claims.seq, &c.claims))
            .collect();
        let mut held_somewhere = false;
        // Every limit: at 191 the first worklist chose another event.
        for take in 1..=scored.len() {
            let mut a = Support::of_beliefs(&store, now, policy.belief_floor, |_, _| {}).unwrap();
            let mut b = Support::of_beliefs(&store, now, policy.belief_floor, |_, _| {}).unwrap();
            let by_worklist = choose(&scored, &by_seq, &mut a, take);
            let by_sweeps = choose_by_sweeps(&scored, &by_seq, &mut b, take);
            assert_eq!(by_worklist, by_sweeps, "take {take}");
            held_somewhere |= by_sweeps.len() < take.min(scored.len());
        }
        assert!(
            held_somewhere,
            "no limit left an event held: the test tests nothing"
        );
    }

    /// A store of 100 world days, consolidated: one forgetting of it to a budget of 1 takes
    /// more than one round (the week summaries go once their weeks are empty).
    fn consolidated_world() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), crate::storage::BackendKind::Redb).unwrap();
        let w = crate::world::generate(&crate::world::WorldConfig {
            seed: 7,
            scale: 1,
            days: 100,
        });
        store.ingest(w.events).unwrap();
        let rules = crate::dynamics::consolidate::RuleSummarizer;
        crate::dynamics::consolidate::consolidate(&store, &rules, &Default::default()).unwrap();
        (dir, store)
    }

    /// A round after the first that fails ends the rounds, and the report says why: the first
    /// round's deletion stands (the events it evicted are gone, and replay says the same),
    /// where an error had hidden that anything was forgotten. A first round's failure is the
    /// forgetting's.
    #[test]
    fn a_later_round_that_fails_leaves_the_rounds_before_it_and_says_why() {
        let (_dir, store) = consolidated_world();
        let opts = ForgetOptions::with_budget(1);
        let before = store.events_held();
        let report = forget_in_rounds(&store, &opts, |r| {
            if r.4.rounds == 0 {
                forget_round(r)
            } else {
                Err(Error::InvalidArgument {
                    name: "round".into(),
                    message: "injected".into(),
                })
            }
        })
        .unwrap();
        assert_eq!(report.rounds, 1, "{report:?}");
        assert!(
            report
                .round_failed
                .as_deref()
                .is_some_and(|w| w.contains("injected")),
            "{report:?}"
        );
        assert!(report.evicted > 0 && report.over_budget, "{report:?}");
        assert_eq!(report.events_after, store.events_held());
        assert!(report.events_after < before, "{report:?}");
        assert!(store.verify().unwrap().ok());

        let failed = forget_in_rounds(&store, &opts, |_| {
            Err(Error::InvalidArgument {
                name: "round".into(),
                message: "injected".into(),
            })
        });
        assert!(failed.is_err_and(|e| e.to_string().contains("injected")));
    }

    /// Found by the session 35 probe: a pin's upsert counted as its node's support, so the
    /// one event giving a pinned node its label, name and text could go, and replay made the
    /// node again from the pin alone, bare.
    #[test]
    fn a_pin_is_no_support_of_its_nodes_values() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), crate::BackendKind::Redb).unwrap();
        let mut noted = EventDraft::new(10, "bot", "NOTE");
        noted.assertions = vec![Assertion::UpsertNode(crate::model::NodeUpsert {
            key: "n".into(),
            label: Some("Passage".into()),
            name: Some("a note".into()),
            ..Default::default()
        })];
        let seq = store.ingest(vec![noted]).unwrap().last_seq;
        store.pin(&["n"], true).unwrap();
        let noted = store.event(seq).unwrap().unwrap();
        let mut support = Support::of_beliefs(&store, 10, 0.5, |_, _| {}).unwrap();
        assert!(matches!(
            support.release(&Claims::of(&noted, &mut Keys::default())),
            Release::Never
        ));
    }

    /// Found by the session 35 re-probe (seed 641): any value had counted as a node's
    /// support, so the event that had made a tag (`Tag`, `ci`) held it up while the one that
    /// named it, gave its properties, an alias and its pin went; replay kept the tag bare.
    #[test]
    fn only_an_event_giving_a_nodes_name_supports_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), crate::BackendKind::Redb).unwrap();
        let upsert = |name: &str, pinned: Option<bool>| {
            let mut ev = EventDraft::new(10, "bot", "NOTE");
            ev.assertions = vec![Assertion::UpsertNode(crate::model::NodeUpsert {
                key: "tag:ci".into(),
                label: Some("Tag".into()),
                name: Some(name.into()),
                pinned,
                ..Default::default()
            })];
            ev
        };
        store.ingest(vec![upsert("ci", None)]).unwrap();
        let seq = store
            .ingest(vec![upsert("river fletcher", Some(true))])
            .unwrap()
            .last_seq;
        let named = store.event(seq).unwrap().unwrap();
        let mut support = Support::of_beliefs(&store, 10, 0.5, |_, _| {}).unwrap();
        assert!(matches!(
            support.release(&Claims::of(&named, &mut Keys::default())),
            Release::Never
        ));
    }

    #[test]
    fn retention_halves_per_half_life_and_follows_salience() {
        let p = RetentionPolicy {
            half_life: 100.0,
            ..RetentionPolicy::default()
        };
        let mut d = EventDraft::new(0, "bot", "X");
        d.salience = Some(0.8);
        let e = Event::from_draft(1, 0, d);
        assert!((p.score(&e, 0, 0) - 0.8).abs() < 1e-6);
        assert!((p.score(&e, 100, 0) - 0.4).abs() < 1e-6);
        assert!((p.score(&e, 100, 1) - 0.8).abs() < 1e-6);
        // An event from the future is not more than fresh.
        assert!((p.score(&e, -50, 0) - 0.8).abs() < 1e-6);
    }
}
