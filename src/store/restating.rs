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

use std::collections::{BTreeMap, BTreeSet};

use super::{replay_checked, Checkpoint, State, Store};
use crate::dynamics::consolidate::SUMMARY;
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
    /// The cost is two replays of the log, when a live summary not taken is logged after the
    /// first seed.
    pub(super) fn summaries_restating_otherwise(
        &self,
        seeds: &BTreeMap<u64, i64>,
        taken: &BTreeSet<u64>,
        summaries: &BTreeSet<u64>,
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
        let mut look = Restating {
            after: first,
            changing_anyway: BTreeMap::new(),
            judging: false,
            found: BTreeSet::new(),
        };
        for excluded in [with_seeds, without_seeds] {
            replay_checked(&*self.backend, &excluded, &mut look)?.map_err(|msg| Error::Store {
                path: self.dir.clone(),
                message: format!("cannot find the summaries the deletion takes: {msg}"),
            })?;
            look.judging = true;
        }
        Ok(look.found)
    }
}

/// The [`Checkpoint`] that finds the summaries logged after `after` with an assertion that
/// would change the graph without the seeds where they stand (`judging`), and not the graph
/// with them (the first replay, which notes those that do in `changing_anyway`), and leaves
/// them out.
struct Restating {
    after: u64,
    /// For each summary, the indexes of its assertions that change the graph with the seeds.
    changing_anyway: BTreeMap<u64, BTreeSet<usize>>,
    judging: bool,
    found: BTreeSet<u64>,
}

impl Checkpoint for Restating {
    fn wants(&self, ev: &crate::model::Event) -> bool {
        ev.seq > self.after && ev.kind == SUMMARY
    }

    fn admits(&mut self, ev: &crate::model::Event, graph: &State) -> bool {
        let changing = (ev.assertions.iter().enumerate())
            .filter(|(_, a)| changes(a, graph))
            .map(|(j, _)| j);
        if !self.judging {
            let changing: BTreeSet<usize> = changing.collect();
            if !changing.is_empty() {
                self.changing_anyway.insert(ev.seq, changing);
            }
            return true;
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

/// Whether `a` would change what `graph` believes: make a node or an edge it lacks, or give
/// one a label, name, alias, property, anchor, confidence or time it does not have. Salience,
/// pins and when a fact was last seen are left aside: a summary restates them as the graph
/// had them, and they move with use, not with what an event asserted.
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
