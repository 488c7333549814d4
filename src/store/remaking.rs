//! The summaries a user's deletion takes, made again without what it deleted, in the
//! deletion's own commit.
//!
//! A summary restates what the events of its range asserted, and once forgetting has taken
//! them it is all that supports those facts. A deletion must take a summary made from an event
//! it deletes (its text and digest hold the event's gist), and with it went every fact the
//! summary restated of the other events: deleting a forgotten note took a person and a belief
//! that the note never named. So each day and week summary the deletion takes is written again
//! in its commit: its digest less what the deleted events added, its text written again from
//! that, and the nodes and edges it restated with their values, less what only deleted events
//! gave ([`Carriers::seed_only`]) and less every node the request names. An episode is made
//! again too (its events less the deleted), so that the events left keep their episode.

use std::collections::{BTreeMap, BTreeSet};

use super::deleting::{origins_of, Carriers, SummaryLink, Taken};
use super::{now_ms, replay_excluding, LiveBase, State, Store};
use crate::dynamics::consolidate::{self, Level, Summary};
use crate::dynamics::deletion::{self, DeleteRequest};
use crate::error::{Error, Result};
use crate::model::{Assertion, Event};
use crate::projection::ProjectionBase;

/// What [`Store::summaries_made_again`] wrote.
#[derive(Default)]
pub(super) struct MadeAgain {
    /// The summaries made again, numbered in the deletion's commit.
    pub(super) events: Vec<Event>,
    /// The summaries taken that one of them replaces: what those restated of events left,
    /// one made again restates still.
    pub(super) replaced: BTreeSet<u64>,
}

/// The summaries taken that share a level and a range, made again as one.
struct Group {
    /// The latest of them, whose children, digest and salience the one made again takes.
    latest: u64,
    members: Vec<u64>,
}

impl Store {
    /// The summaries made again, numbered from `first_seq`, in place of the summaries among
    /// `targets` (the deletion's, summaries taken included) that
    /// [`Store::add_summaries_of`] or the request's nodes took (`taken`). `gone` are the events
    /// deleted before that the request names. `before` is the state before the deletion.
    ///
    /// A summary is not made again when the user named it, when a newer one of its range
    /// stays, when what it was made from is no longer known (a compaction made it a tombstone)
    /// or when nothing of it is left (no event counted, no fact restated). The cost is one more
    /// replay of the log, when there is a summary to make again.
    pub(super) fn summaries_made_again(
        &self,
        before: &State,
        targets: &BTreeMap<u64, i64>,
        gone: &BTreeMap<u64, i64>,
        request: &DeleteRequest,
        taken: &Taken,
        first_seq: u64,
    ) -> Result<MadeAgain> {
        let groups = groups_to_make_again(before, targets, request, &taken.chain);
        if groups.is_empty() {
            return Ok(MadeAgain::default());
        }
        let chain_seqs: BTreeSet<u64> = taken.chain.iter().map(|l| l.seq).collect();
        let raw_seeds: BTreeMap<u64, i64> = targets
            .iter()
            .chain(gone)
            .map(|(s, t)| (*s, *t))
            .filter(|(s, _)| !chain_seqs.contains(s))
            .collect();
        let origins = origins_of(&taken.chain, &raw_seeds);
        let graph = self.graph_keeping(before, targets, &groups)?;
        let name = |key: &str| consolidate::node_name(self, key);
        // The names of the nodes the request names, which no text made again may keep.
        let request_names: Vec<String> = request
            .nodes
            .iter()
            .filter_map(|key| before.node_id(key).and_then(|id| before.node(id)))
            .flat_map(|n| std::iter::once(n.name).chain(n.aliases))
            .collect();
        let mut made: BTreeMap<u64, u64> = BTreeMap::new();
        let mut out = MadeAgain::default();
        for group in &groups {
            let Some(event) = self.raw_event(group.latest)? else {
                continue;
            };
            let Some(summary) = Summary::of_event(&event) else {
                continue;
            };
            let Some(removed) = self.events_of(origins.get(&group.latest))? else {
                continue;
            };
            let children: Vec<u64> = summary
                .children
                .iter()
                .filter_map(|c| match targets.contains_key(c) {
                    true => made.get(c).copied(),
                    false => Some(*c),
                })
                .collect();
            let mut asserted = Vec::new();
            for seq in &group.members {
                if let Some(ev) = self.raw_event(*seq)? {
                    asserted.push(ev);
                }
            }
            let seed_only = |value: &str| {
                taken.carriers.as_ref().is_some_and(|c: &Carriers| {
                    c.seed_only(value, (summary.start, summary.end), group.latest)
                })
            };
            let restated = consolidate::restated(
                asserted
                    .iter()
                    .flat_map(|e| e.assertions.iter().map(move |a| (e.ts, a))),
                |key| Ok(graph.node_id(key).and_then(|id| graph.node(id))),
                |from, relation, to| {
                    let base = LiveBase { state: &graph };
                    Ok(match (base.node_id(from), base.node_id(to)) {
                        (Some(f), Some(t)) => base.edge_id(f, relation, t),
                        _ => None,
                    }
                    .and_then(|id| graph.edge(id)))
                },
            )?;
            let assertions = kept_of(restated, &request.nodes, &seed_only);
            let mut unnamed = request_names.clone();
            if let Some(c) = &taken.carriers {
                unnamed.extend(c.seed_only_names((summary.start, summary.end), group.latest));
            }
            let nothing_left = summary.digest.events <= removed.len() && assertions.is_empty();
            if nothing_left {
                continue;
            }
            let seq = first_seq + out.events.len() as u64;
            let without: Vec<u64> = removed.iter().map(|e| e.seq).collect();
            let draft = consolidate::made_again(
                &summary,
                &event,
                (&removed, &without, &unnamed),
                &children,
                assertions,
                &name,
            )?;
            for m in &group.members {
                made.insert(*m, seq);
                out.replaced.insert(*m);
            }
            out.events.push(Event::from_draft(seq, now_ms(), draft));
        }
        Ok(out)
    }

    /// The graph of the log without the deleted events and the deletion's targets, the
    /// summaries of `groups` kept: the values a summary made again restates are the ones the
    /// graph gives with the deleted events gone but the summary's restatement still in place
    /// (later events change them as they did).
    fn graph_keeping(
        &self,
        before: &State,
        targets: &BTreeMap<u64, i64>,
        groups: &[Group],
    ) -> Result<State> {
        let kept: BTreeSet<u64> = groups.iter().flat_map(|g| g.members.clone()).collect();
        let mut excluded = before.deleted.clone();
        excluded.extend(targets.keys().filter(|s| !kept.contains(s)));
        replay_excluding(&*self.backend, excluded, |_, _| {}, Vec::new(), u64::MAX)?.map_err(
            |msg| Error::Store {
                path: self.dir.clone(),
                message: format!("cannot make the deletion's summaries again: {msg}"),
            },
        )
    }

    /// The log records of `seqs` (none given: none), or `None` when one of them is a
    /// tombstone or missing, whose part in a summary is no longer known.
    fn events_of(&self, seqs: Option<&BTreeSet<u64>>) -> Result<Option<Vec<Event>>> {
        let mut out = Vec::new();
        for seq in seqs.into_iter().flatten() {
            match self.raw_event(*seq)? {
                Some(ev) if ev.kind != deletion::TOMBSTONE => out.push(ev),
                _ => return Ok(None),
            }
        }
        Ok(Some(out))
    }
}

/// The summaries of `targets` to make again, grouped by level and range, in log order of
/// their latest (episodes before the day that names them, days before their week).
fn groups_to_make_again(
    before: &State,
    targets: &BTreeMap<u64, i64>,
    request: &DeleteRequest,
    chain: &[SummaryLink],
) -> Vec<Group> {
    let live = |seq: u64| !before.deleted.contains(&seq) && !targets.contains_key(&seq);
    let mut by_range: BTreeMap<(Level, i64, i64), Vec<&SummaryLink>> = BTreeMap::new();
    for link in chain {
        let key = (link.level, link.start, link.end);
        by_range.entry(key).or_default().push(link);
    }
    let mut groups = Vec::new();
    for links in by_range.values() {
        let members: Vec<u64> = links
            .iter()
            .map(|l| l.seq)
            .filter(|s| targets.contains_key(s) && !before.deleted.contains(s))
            .filter(|s| !request.events.contains(s))
            .collect();
        let Some(&latest) = members.iter().max() else {
            continue;
        };
        let newer_stays = links.iter().any(|l| l.seq > latest && live(l.seq));
        let unknown = links
            .iter()
            .any(|l| members.contains(&l.seq) && l.unknown_child);
        if !newer_stays && !unknown {
            groups.push(Group { latest, members });
        }
    }
    groups.sort_by_key(|g| g.latest);
    groups
}

/// What a summary made again restates of `restated`: no node `nodes` names, no node or edge
/// only deleted events upserted (`seed_only` of its subject), no edge without both its ends,
/// and no value only deleted events gave.
fn kept_of(
    restated: Vec<Assertion>,
    nodes: &[String],
    seed_only: &dyn Fn(&str) -> bool,
) -> Vec<Assertion> {
    let named = |key: &str| nodes.iter().any(|k| k == key);
    let mut kept_nodes = BTreeSet::new();
    let mut out = Vec::new();
    for a in restated {
        let keep = match &a {
            Assertion::UpsertNode(up) => {
                let keep = !named(&up.key) && !seed_only(&deletion::node_subject(&up.key));
                if keep {
                    kept_nodes.insert(up.key.clone());
                }
                keep
            }
            Assertion::UpsertEdge(up) => {
                kept_nodes.contains(&up.from)
                    && kept_nodes.contains(&up.to)
                    && !seed_only(&deletion::edge_subject(&up.from, &up.relation, &up.to))
            }
            _ => false,
        };
        if keep {
            out.push(deletion::without_values(a, seed_only));
        }
    }
    out
}
