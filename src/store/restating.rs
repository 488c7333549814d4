//! The live summaries a user's deletion takes because they restate what the log without the
//! deleted events would not give.
//!
//! A summary restates the nodes and edges its events asserted as the graph held them when it
//! was written, and what the graph held can owe something to an event that gave none of it:
//! a retraction made a later note's belief a new one, at the confidence a new edge starts
//! with, where without it the note kept the older belief's; a note made a person while a later
//! note's belief in them, asserted before anything else made them, gave the time it held from,
//! which replay without the first note skips; a person made without a name took an alias as
//! one, or kept it as an alias, by whether a deleted note had made them first. The deletion's
//! [`Carriers`](super::deleting) follow the values the deleted events give; what they made
//! other events give is found here, by replaying the log without them and asking, at each live
//! summary written after the first of them, whether its restatement would change the graph
//! there where it would not change the graph of the log with them (a compaction leaves some
//! values to the summaries alone, which change both). One that would is taken (and made again
//! from the events left), and left out of the rest of the replay: what it restated is not
//! what the log without the deleted events gives.
//!
//! Only what the deleted events touch can differ: the nodes they upsert or retract, with
//! every edge at one of them, and the edges they upsert or retract (an edge's values follow
//! its own assertions and whether its ends are there; a node's, its own). So only a summary
//! restating one of those is looked at, and only those of its assertions: the replay stops
//! before each such summary to apply the events before it, and a summary restating the agent
//! alone, when the deleted events name other nodes, costs nothing.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::{replay_watched, KeptReplay, Look, Lookout, State, Store};
use crate::dynamics::consolidate::SUMMARY;
use crate::dynamics::deletion;
use crate::error::{Error, Result};
use crate::model::{Assertion, Props, Value};

impl Store {
    /// The live summaries logged after the first of `seeds` (the events a deletion takes, with
    /// those it names that were deleted before) with an assertion that would change the graph
    /// of the log without the seeds where they stand ([`changes`]) and not the graph of the
    /// log with them. `taken` are the summaries the deletion takes already; `summaries` every
    /// summary the log holds. Forgotten events no user deleted come back into both replays:
    /// the summaries restated them, and a summary left out would otherwise take with it what it
    /// restated of them. Forgotten summaries do not.
    ///
    /// The cost is a replay of the log, when a live summary not taken is logged after the first
    /// seed, that finds whether any such summary changes the graph without the seeds at all
    /// (none does, most often); and two more when one does. When none does, that replay's
    /// graph is kept in `kept`: in a store nothing was forgotten from, it is the log without
    /// the deletion's events, which the deletion replays again.
    pub(super) fn summaries_restating_otherwise(
        &self,
        seeds: &BTreeMap<u64, i64>,
        taken: &BTreeSet<u64>,
        summaries: &BTreeSet<u64>,
        kept: &KeptReplay,
    ) -> Result<BTreeSet<u64>> {
        let Some(&first) = seeds.keys().next() else {
            return Ok(BTreeSet::new());
        };
        let by_user = self.user_deleted()?;
        let with_seeds: BTreeSet<u64> = {
            let state = self.read_state();
            let looked_at = |s: &u64| !state.deleted.contains(s) && !taken.contains(s);
            if !summaries.range(first + 1..).any(looked_at) {
                return Ok(BTreeSet::new());
            }
            (state.deleted.iter())
                .filter(|s| by_user.contains(s) || summaries.contains(s))
                .copied()
                .collect()
        };
        let mut without_seeds = with_seeds.clone();
        without_seeds.extend(seeds.keys().chain(taken));
        let mut touched = Touched::default();
        for seq in seeds.keys() {
            if let Some(ev) = self.raw_event(*seq)? {
                touched.add(&ev);
            }
        }
        let mut look = Restating {
            touched,
            queued: HashSet::new(),
            after: first,
            pass: Pass::Probe,
            changing_anyway: BTreeMap::new(),
            found: BTreeSet::new(),
        };
        let passes = [
            (Pass::Probe, &without_seeds),
            (Pass::Note, &with_seeds),
            (Pass::Judge, &without_seeds),
        ];
        for (pass, excluded) in passes {
            look.pass = pass;
            look.queued.clear();
            let mut replayed =
                replay_watched(&*self.backend, excluded, &mut look)?.map_err(|msg| {
                    Error::Store {
                        path: self.dir.clone(),
                        message: format!("cannot find the summaries the deletion takes: {msg}"),
                    }
                })?;
            if pass == Pass::Probe && look.found.is_empty() {
                // Every event but `excluded` applied: the log without them.
                replayed.deleted = excluded.clone();
                kept.keep(replayed);
                break;
            }
            if pass == Pass::Probe {
                look.found.clear();
            }
        }
        Ok(look.found)
    }
}

/// The replays of [`Store::summaries_restating_otherwise`], in their order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Without the seeds, leaving nothing out: whether any summary would change the graph.
    /// Up to the first summary [`Pass::Judge`] leaves out, its replay is this one, and that
    /// summary changes the graph there: so when none does, none is left out.
    Probe,
    /// With the seeds: which assertions change the graph anyway (`changing_anyway`).
    Note,
    /// Without the seeds: the summaries with an assertion that changes the graph and is not
    /// one of those, left out.
    Judge,
}

/// The [`Lookout`] that finds the summaries logged after `after` with an assertion that
/// would change the graph without the seeds where they stand, and not the graph with them,
/// and leaves them out ([`Pass`]).
struct Restating {
    touched: Touched,
    /// The node keys the events queued name (as hashes: one shared by another key only costs
    /// a chunk applied early).
    queued: HashSet<u64>,
    after: u64,
    /// For each summary, the indexes of its assertions that change the graph with the seeds.
    changing_anyway: BTreeMap<u64, BTreeSet<usize>>,
    pass: Pass,
    /// The summaries found ([`Pass::Probe`]: any would change the graph).
    found: BTreeSet<u64>,
}

impl Lookout for Restating {
    fn wants(&self, ev: &crate::model::Event) -> Look {
        if ev.seq <= self.after || ev.kind != SUMMARY {
            return Look::No;
        }
        let mut concerned = (ev.assertions.iter())
            .filter(|a| self.touched.concerns(a))
            .peekable();
        if concerned.peek().is_none() {
            return Look::No;
        }
        // Whether a node or an edge looked at is there, and its values, follow only the
        // events naming its nodes.
        let waiting = concerned
            .flat_map(node_keys)
            .any(|k| self.queued.contains(&key_hash(k)));
        if waiting {
            Look::Applied
        } else {
            Look::AsItIs
        }
    }

    fn queued(&mut self, ev: &crate::model::Event) {
        let keys = ev.assertions.iter().flat_map(node_keys).map(key_hash);
        self.queued.extend(keys);
    }

    fn applied(&mut self) {
        self.queued.clear();
    }

    fn admits(&mut self, ev: &crate::model::Event, graph: &State) -> bool {
        let mut changing = (ev.assertions.iter().enumerate())
            .filter(|(_, a)| self.touched.concerns(a) && changes(a, graph))
            .map(|(j, _)| j);
        match self.pass {
            Pass::Probe => {
                if changing.next().is_some() {
                    self.found.insert(ev.seq);
                }
                return true;
            }
            Pass::Note => {
                let changing: BTreeSet<usize> = changing.collect();
                if !changing.is_empty() {
                    self.changing_anyway.insert(ev.seq, changing);
                }
                return true;
            }
            Pass::Judge => {}
        }
        let anyway = self.changing_anyway.get(&ev.seq);
        let owed_to_seeds = changing
            .into_iter()
            .any(|j| anyway.is_none_or(|a| !a.contains(&j)));
        if owed_to_seeds {
            self.found.insert(ev.seq);
        }
        !owed_to_seeds
    }
}

/// The node keys assertion `a` names: its node's, or its edge's ends.
fn node_keys(a: &Assertion) -> impl Iterator<Item = &str> {
    let (first, second) = match a {
        Assertion::UpsertNode(up) => (up.key.as_str(), None),
        Assertion::RetractNode { key } => (key.as_str(), None),
        Assertion::UpsertEdge(up) => (up.from.as_str(), Some(up.to.as_str())),
        Assertion::RetractEdge { from, to, .. } => (from.as_str(), Some(to.as_str())),
    };
    std::iter::once(first).chain(second)
}

fn key_hash(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// The nodes and edges a deletion's events upsert or retract: all their absence can change.
#[derive(Default)]
struct Touched {
    nodes: BTreeSet<String>,
    /// By their subject text ([`deletion::edge_subject`]).
    edges: BTreeSet<String>,
}

impl Touched {
    fn add(&mut self, ev: &crate::model::Event) {
        for a in &ev.assertions {
            let (from, relation, to) = match a {
                Assertion::UpsertNode(up) => {
                    self.nodes.insert(up.key.clone());
                    continue;
                }
                Assertion::RetractNode { key } => {
                    self.nodes.insert(key.clone());
                    continue;
                }
                Assertion::UpsertEdge(up) => (&up.from, &up.relation, &up.to),
                Assertion::RetractEdge { from, relation, to } => (from, relation, to),
            };
            self.edges
                .insert(deletion::edge_subject(from, relation, to));
        }
    }

    /// Whether `a` upserts a node or an edge whose values the deletion can change: one of its
    /// nodes, an edge at one of them, or one of its edges.
    fn concerns(&self, a: &Assertion) -> bool {
        match a {
            Assertion::UpsertNode(up) => self.nodes.contains(&up.key),
            Assertion::UpsertEdge(up) => {
                self.nodes.contains(&up.from)
                    || self.nodes.contains(&up.to)
                    || (self.edges).contains(&deletion::edge_subject(
                        &up.from,
                        &up.relation,
                        &up.to,
                    ))
            }
            _ => false,
        }
    }
}

/// Whether `a` would change what `graph` believes: make a node or an edge it lacks, or give
/// one a label, name, alias, property, anchor, pin, confidence or time it does not have (the
/// values [`deletion::values_given`] follows). Salience and when a fact was last seen are left
/// aside: they move with use and time, not with what an event asserted.
fn changes(a: &Assertion, graph: &State) -> bool {
    match a {
        Assertion::UpsertNode(up) => {
            let Some(n) = graph.node_id(&up.key).and_then(|id| graph.node(id)) else {
                return true;
            };
            // An alias is added unless it is the node's name, as the upsert leaves it.
            let name = up.name.as_ref().unwrap_or(&n.name);
            let new_alias =
                |a: &String| a != name && !a.trim().is_empty() && !n.aliases.contains(a);
            differs(&up.label, &n.label)
                || differs(&up.name, &n.name)
                || up.aliases.iter().any(new_alias)
                || props_change(&up.props, &n.props)
                || up.anchor.is_some_and(|x| n.anchor != Some(x))
                || up.pinned.is_some_and(|p| p != n.pinned)
        }
        Assertion::UpsertEdge(up) => {
            let Some(e) = graph.edge_by_keys(&up.from, &up.relation, &up.to) else {
                return true;
            };
            differs(&up.confidence, &e.confidence)
                || up.valid_from.is_some_and(|t| e.valid_from != Some(t))
                || up.valid_to.is_some_and(|t| e.valid_to != Some(t))
                || props_change(&up.props, &e.props)
        }
        _ => false,
    }
}

/// Whether `given` is a value other than `held`.
fn differs<T: PartialEq>(given: &Option<T>, held: &T) -> bool {
    given.as_ref().is_some_and(|g| g != held)
}

/// Whether merging properties `given` into `held` would change them (a null removes one).
fn props_change(given: &Props, held: &Props) -> bool {
    given.iter().any(|(k, v)| match v {
        Value::Null => held.contains_key(k),
        v => held.get(k) != Some(v),
    })
}
