//! The summaries a user's deletion takes, made again without what it deleted, in the
//! deletion's own commit.
//!
//! A summary restates what the events of its range asserted, and once forgetting has taken
//! them it is all that supports those facts. A deletion must take a summary made from an event
//! it deletes (its text and digest hold the event's gist), and with it went every fact the
//! summary restated of the other events: deleting a forgotten note took a person and a belief
//! that the note never named. So each summary the deletion takes is written again in its
//! commit, superseding it:
//!
//! - its digest made from the events it covers that are left (forgotten ones too, while the
//!   log holds their records), with the names the graph gives them once the deleted events are
//!   gone, and no line holding a name only deleted events gave or a deleted node's name;
//! - the nodes and edges it restated and those the events it covers that are left asserted
//!   (a value a deleted retraction had ended lives again), with the values the events left
//!   give: the graph of the log without the deleted events and with the forgotten events back
//!   (not those a user deleted, nor those only a summary a user's deletion took held). Where a
//!   compaction has made some of those a tombstone, with the values the summary restated, less
//!   each node, edge or value only deleted events gave ([`Carriers::seed_only`]).
//!
//! A summary the user names, and one made only from it, that holds no forgotten event its
//! deletion leaves, and the summaries above one not made again (not above a named one), are
//! taken as before, and the next consolidation summarises their periods again. (The
//! forgotten events a named summary alone held are deleted with it:
//! [`Store::with_the_gist_of_named_summaries`]; one a live summary under it holds stays, and
//! the named summary is made again for it, since no consolidation summarises forgotten events
//! again.)
//!
//! A fact a deleted retraction had ended lives again, and the summaries over the events that
//! asserted it restate it. Where forgetting took such an event and every summary over it, a
//! forgotten one is made again for it ([`revived_groups`]), or folded into a summary of its
//! range the deletion makes again ([`Store::absorb`]).
//!
//! A summary the user names that was the last to restate a belief forgotten events still give
//! (forgetting took their summaries once it restated it) is made again for it, as one the
//! deletion takes is made again for what other periods gave
//! ([`Store::keeping_beliefs`]).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::deleting::{origins_of, Carriers, SummaryLink, Taken};
use super::{now_ms, replay_excluding, Facet, LeftOutShown, State, Store, UNVISITED};
use crate::dynamics::consolidate::{self, summarised, ConsolidationPolicy, Digest, Level, Summary};
use crate::dynamics::deletion::{self, DeleteRequest, Reason};
use crate::error::{Error, Result};
use crate::model::{Assertion, Event, EventDraft, NodeId, Value};
use crate::projection::{EdgeValues, NodeValues};

/// What [`Store::summaries_made_again`] wrote.
#[derive(Default)]
pub(super) struct MadeAgain {
    /// The summaries made again, numbered in the deletion's commit.
    pub(super) events: Vec<Event>,
    /// The summaries taken that one of them replaces: what those restated of events left,
    /// one made again restates still.
    pub(super) replaced: BTreeSet<u64>,
    /// The edges an event left live supports at a node a summary made again restates, with
    /// the values the events left give and those events ([`live_edges_at`]): where the
    /// deletion's replay lacks one, or lacks one of those events' support of it, the last
    /// summary made again restates it too ([`Store::delete`]).
    pub(super) live_edges: Vec<(crate::model::EdgeUpsert, Vec<u64>)>,
}

/// The summaries taken that share a level and a range, made again as one.
struct Group {
    /// The latest of them, whose children, digest and salience the one made again takes.
    latest: u64,
    members: Vec<u64>,
    /// For a forgotten summary made again for what a deleted retraction had ended
    /// ([`revived_groups`]), those nodes and edges ([`deletion::subject_upserted`]): it is
    /// made again only if it restates one of them. Empty for a summary the deletion took.
    revives: Vec<String>,
}

impl Group {
    /// Whether it is a forgotten summary made again for revived facts ([`revived_groups`]),
    /// not summaries the deletion took.
    fn revives_facts(&self) -> bool {
        !self.revives.is_empty()
    }
}

/// A group to make again, with what it is made from.
struct Plan<'g> {
    group: &'g Group,
    summary: Summary,
    /// The records of the group's summaries, read once: the latest's, and what each restated.
    members: Vec<Event>,
    /// Where the latest's record is among `members`.
    latest_at: usize,
    /// The deleted events it was made from (and is made again without).
    removed: Vec<u64>,
    /// The events it covers (through its children and the summaries it replaced), less the
    /// deleted ones.
    covered: BTreeSet<u64>,
    /// Whether a summary it covers has a child whose record a compaction replaced.
    cut_off: bool,
}

impl Plan<'_> {
    /// The record of the group's latest summary.
    fn latest_event(&self) -> &Event {
        // In bounds: `latest_at` is the position `plans` found in this same vector, which
        // nothing changes after.
        &self.members[self.latest_at]
    }
}

/// What every summary a deletion makes again is made with.
struct Context<'a> {
    request: &'a DeleteRequest,
    taken: &'a Taken,
    sources: &'a Sources,
    /// The names and aliases of the nodes the request names, which no text made again keeps.
    request_names: Vec<String>,
    /// The events deleted that are not summaries.
    raw_deleted: BTreeSet<u64>,
    /// The values a summary made again restates a node with, where the events left lose
    /// them ([`Store::values_kept`]).
    values_kept: BTreeMap<String, NodeValues>,
}

/// The graphs and records the summaries are made again from.
struct Sources {
    /// The log without the deleted events, the forgotten events brought back (not those a
    /// user deleted): what the events left give.
    left: State,
    /// The log without the deleted events, the taken summaries kept: what a plan restates when
    /// some of its events were compacted (`None` when no plan needs it).
    kept: Option<State>,
    /// The events the plans cover that are left (not tombstones): their records are read
    /// plan by plan ([`Store::records_left`]).
    left_covered: BTreeSet<u64>,
    /// The events the plans cover that a compaction made tombstones.
    compacted: BTreeSet<u64>,
    /// The nodes an event left retracted and none made again after it: the summaries taken
    /// restated them only as a deleted event had made them again, so no fallback to their
    /// restatement brings them back.
    retracted: BTreeSet<String>,
}

impl Store {
    /// The summaries made again, numbered from `first_seq`, in place of the summaries among
    /// `targets` (the deletion's, summaries taken included) that
    /// [`Store::add_summaries_of`] or the request's nodes took (`taken`). `gone` are the events
    /// deleted before that the request names. `before` is the state before the deletion.
    ///
    /// The cost is one more replay of the log (two after a compaction), when there is a
    /// summary to make again, and the graph `taken` kept ([`KeptReplay`](super::KeptReplay))
    /// is not of the log without the same events; then a read of the log. The graph it made
    /// them from is kept in turn. Where a belief's value is in question after forgetting, a
    /// read of the deletion records and of the log's raw records each
    /// ([`Store::keeping_beliefs`], [`Store::values_kept`]).
    pub(super) fn summaries_made_again(
        &self,
        before: &State,
        targets: &BTreeMap<u64, i64>,
        gone: &BTreeMap<u64, i64>,
        request: &DeleteRequest,
        taken: &Taken,
        first_seq: u64,
    ) -> Result<MadeAgain> {
        let groups = groups_to_make_again(before, targets, &taken.chain);
        let seen = (targets, gone, &before.deleted);
        let (mut plans, left) =
            self.plans(&groups, seen, request, &taken.chain, &BTreeSet::new())?;
        let keep = self.keeping_beliefs(before, (targets, gone), request, &plans, &left)?;
        // Most deletions keep no summary so: no second reading of the chain's origins.
        if !keep.is_empty() {
            plans = self.plans(&groups, seen, request, &taken.chain, &keep)?.0;
        }
        // Whole: no record a tombstone or missing (`summarised_of` says which are).
        let records_whole = |seqs: &BTreeSet<u64>| Ok(self.summarised_of(seqs)?.is_some());
        let revived = revived_groups(before, targets, taken, (&groups, &plans), &records_whole)?;
        if !revived.absorbed.is_empty() {
            let index: BTreeMap<u64, &SummaryLink> =
                taken.chain.iter().map(|l| (l.seq, l)).collect();
            let raw_deleted = |s: &u64| targets.contains_key(s) || gone.contains_key(s);
            for plan in &mut plans {
                // A plan above one that absorbs (a week over its day) holds what it absorbs
                // too, through the one made again: its digest and restatement count it.
                let reached = reach(&index, plan.group.latest);
                let forgotten: BTreeSet<u64> = (revived.absorbed.iter())
                    .filter(|(into, _)| reached.contains(into))
                    .flat_map(|(_, forgotten)| forgotten.iter().copied())
                    .collect();
                let into_this = revived.absorbed.get(&plan.group.latest);
                self.absorb(plan, (&forgotten, into_this), &index, &raw_deleted)?;
            }
        }
        // Most deletions revive nothing: no second reading of the chain's origins.
        if !revived.groups.is_empty() {
            let none = BTreeSet::new();
            plans.extend(
                self.plans(&revived.groups, seen, request, &taken.chain, &none)?
                    .0,
            );
        }
        if plans.is_empty() {
            return Ok(MadeAgain::default());
        }
        let sources = self.sources(before, targets, gone, &plans, taken)?;
        let values_kept =
            self.values_kept(before, &sources.left, (targets, gone), request, &plans)?;
        let summaries: BTreeSet<u64> = taken.chain.iter().map(|l| l.seq).collect();
        let context = Context {
            values_kept,
            request,
            taken,
            sources: &sources,
            request_names: request_names(before, request),
            raw_deleted: (targets.keys().chain(gone.keys()))
                .filter(|s| !summaries.contains(s))
                .copied()
                .collect(),
        };
        let mut out = MadeAgain::default();
        let mut made: BTreeMap<u64, u64> = BTreeMap::new();
        // Each plan goes once its summary is made: what they read of their members' records
        // and the summaries made so far had been held together (354 and 438 MB of a hub's
        // deletion at 96k summaries made again).
        for plan in plans {
            let seq = first_seq + out.events.len() as u64;
            let Some(draft) = self.made_again(&plan, &context, &made)? else {
                continue;
            };
            for m in &plan.group.members {
                made.insert(*m, seq);
                out.replaced.insert(*m);
            }
            out.events.push(Event::from_draft(seq, now_ms(), draft));
        }
        let live = |seq: u64| {
            !before.deleted.contains(&seq)
                && !targets.contains_key(&seq)
                && !gone.contains_key(&seq)
        };
        out.live_edges = live_edges_at(&sources.left, &out.events, live);
        // In a store nothing was forgotten from, the deletion's own replay leaves out what
        // this one did.
        taken.replay.keep(sources.left);
        Ok(out)
    }

    /// The draft of the summary of `plan` made again (`made`: the numbers of those made
    /// before it in this deletion), or `None` when no event of its period is left and it
    /// restates nothing the events left give.
    fn made_again(
        &self,
        plan: &Plan<'_>,
        context: &Context<'_>,
        made: &BTreeMap<u64, u64>,
    ) -> Result<Option<EventDraft>> {
        let sources = context.sources;
        let complete = !plan.cut_off && plan.covered.is_disjoint(&sources.compacted);
        let graph = match (&sources.kept, complete) {
            (Some(kept), false) => kept,
            _ => &sources.left,
        };
        let range = (plan.summary.start, plan.summary.end);
        let carriers = context.taken.carriers.as_ref();
        let seed_only = |value: &str| {
            carriers.is_some_and(|c: &Carriers| c.seed_only(value, range, plan.group.latest))
        };
        // A summary made again for a revived fact restates what the events left give, from
        // their records alone: not the graph with the taken summaries kept, whose values may
        // be a deleted event's.
        let revived = plan.group.revives_facts();
        if revived && !complete {
            return Ok(None);
        }
        let records = self.records_left(plan, &sources.left_covered)?;
        let mut assertions =
            self.restated_again(plan, (graph, complete), (context, &records), &seed_only)?;
        restate_values_kept(
            &mut assertions,
            &context.values_kept,
            [graph, &context.sources.left],
        );
        let mut unnamed = context.request_names.clone();
        if let Some(c) = carriers {
            unnamed.extend(c.seed_only_names(range, plan.group.latest));
        }
        let policy = policy_of(&plan.summary, &context.taken.chain);
        let digest = digest_again(plan, &records, (graph, complete), &unnamed, &policy);
        // A summary forgetting left the only support of what other periods' events gave (their
        // summaries went once it restated it) is made again for that, with no event of its own.
        if digest.events == 0 && assertions.is_empty() {
            return Ok(None);
        }
        let revives = |a: &Assertion| {
            deletion::subject_upserted(a).is_some_and(|s| plan.group.revives.contains(&s))
        };
        if revived && !assertions.iter().any(revives) {
            return Ok(None);
        }
        let children = children_again(&plan.summary, &context.raw_deleted, made);
        // The events the summary it replaces was without, it is without too: its children
        // still hold them.
        let without: BTreeSet<u64> = (plan.summary.without.iter())
            .chain(&plan.removed)
            .copied()
            .collect();
        let without: Vec<u64> = without.into_iter().collect();
        // An episode's text says when its events were: the span of those it has left, where
        // all are known (it had kept a deleted last event's time as its end). Its range stays
        // the period it was made for, by which the summaries of a period are found.
        let span = (plan.summary.level == Level::Episode && complete)
            .then(|| {
                let times = || events_left(&records).map(|e| e.ts);
                times().min().zip(times().max())
            })
            .flatten()
            .unwrap_or((plan.summary.start, plan.summary.end));
        consolidate::made_again(
            &policy,
            (&plan.summary, plan.latest_event()),
            digest,
            (&children, &without, span),
            assertions,
        )
        .map(Some)
    }

    /// Folds into `plan` the `forgotten` summaries of its range that hold an event whose fact
    /// the deletion revives ([`revived_groups`]): the summary made again holds their children
    /// too, and restates what they and the events they cover that are left give. Made again
    /// apart, such a summary and `plan`'s would both stand for one range, and only the later
    /// is read as the range's (seed 10: a late note's day, written after the retraction, was
    /// made again beside the forgotten day of the note whose belief came back).
    ///
    /// `forgotten` are all those folded into `plan` or a plan under it, whose events it comes
    /// to cover; `into_this` those folded into `plan` itself, whose children it takes.
    fn absorb(
        &self,
        plan: &mut Plan<'_>,
        (forgotten, into_this): (&BTreeSet<u64>, Option<&BTreeSet<u64>>),
        index: &BTreeMap<u64, &SummaryLink>,
        raw_deleted: &dyn Fn(&u64) -> bool,
    ) -> Result<()> {
        if forgotten.is_empty() {
            return Ok(());
        }
        for seq in forgotten {
            let (covered, cut_off) = coverage(index, *seq);
            plan.covered
                .extend(covered.iter().copied().filter(|s| !raw_deleted(s)));
            plan.cut_off |= cut_off;
            if into_this.is_some_and(|into| into.contains(seq)) {
                // What this deletion takes that it covers, the one made again is without, as
                // it is without its own events deleted (`Plan::removed`), since it holds the
                // episodes that hold them (helper-140).
                plan.summary
                    .without
                    .extend(covered.iter().copied().filter(|s| raw_deleted(s)));
            }
        }
        for seq in into_this.into_iter().flatten() {
            // Its children, and those of the summaries it replaced, whose coverage it folded
            // in: the one made again replaces only the summary it is made again for
            // (helper-140: an event only a replaced summary held was counted, not reached).
            let mut next = Some(*seq);
            while let Some(link) = next.and_then(|s| index.get(&s)) {
                plan.summary.children.extend(&link.children);
                plan.summary.without.extend(&link.without);
                next = link.supersedes;
            }
            // As `plans` reads a member: what it asserted, not its text. Its coverage was
            // found whole (`revived_groups`).
            if let Some(mut record) = self.raw_event(*seq)? {
                record.payload = Value::Null;
                plan.members.push(record);
            }
        }
        plan.summary.children.sort_unstable();
        plan.summary.children.dedup();
        plan.summary.without.sort_unstable();
        plan.summary.without.dedup();
        Ok(())
    }

    /// The records of the events `plan` covers before its latest summary that are left
    /// (`left`), in log order, read in one view: plan by plan, where every plan's had been
    /// held at once (150 MB of a hub's deletion at 96k summaries made again).
    fn records_left(&self, plan: &Plan<'_>, left: &BTreeSet<u64>) -> Result<Vec<Event>> {
        let view = self.backend.pinned_view()?;
        let backend = view.as_deref().unwrap_or(&*self.backend);
        let mut out = Vec::new();
        for seq in (plan.covered.iter()).filter(|s| **s < plan.group.latest && left.contains(s)) {
            out.extend(self.raw_event_decoded(backend, *seq, super::decode_event)?);
        }
        Ok(out)
    }

    /// The groups to make again, each with what it is made from: not a summary the user
    /// names that covers no forgotten event its deletion leaves (one a live summary under it
    /// holds: an episode restates nothing, so what such events gave rested on the named
    /// summary), nor one made only from a summary the user names (the user deletes that
    /// summary's text, not its events) that holds no forgotten event (the next consolidation
    /// summarises its period again from the events; with some forgotten, it could not, and
    /// what only it held of other periods would go), nor one made from a deleted event whose record a compaction replaced (what
    /// it gave is no longer known), nor one above a summary taken and not made again (it
    /// would cover that summary's period, which the next consolidation summarises again)
    /// unless it holds forgotten events the deletion leaves: it alone restates what they gave.
    /// `deleted`: the events deleted before this deletion. With them, the groups left to the
    /// next consolidation for no other reason than that (by their latest summary); one `keep`
    /// holds is made again all the same ([`Store::keeping_beliefs`]).
    fn plans<'g>(
        &self,
        groups: &'g [Group],
        (targets, gone, deleted): (&BTreeMap<u64, i64>, &BTreeMap<u64, i64>, &BTreeSet<u64>),
        request: &DeleteRequest,
        chain: &[SummaryLink],
        keep: &BTreeSet<u64>,
    ) -> Result<(Vec<Plan<'g>>, Vec<u64>)> {
        let index: BTreeMap<u64, &SummaryLink> = chain.iter().map(|l| (l.seq, l)).collect();
        let named: BTreeMap<u64, i64> = request
            .events
            .iter()
            .filter_map(|s| index.get(s).map(|l| (*s, l.start)))
            .collect();
        let from_named = origins_of(chain, &named);
        let raw_seeds: BTreeMap<u64, i64> = targets
            .iter()
            .chain(gone)
            .map(|(s, t)| (*s, *t))
            .filter(|(s, _)| !index.contains_key(s))
            .collect();
        let origins = origins_of(chain, &raw_seeds);
        let mut not_made: BTreeSet<u64> = BTreeSet::new();
        let mut plans = Vec::new();
        let mut left = Vec::new();
        for group in groups {
            let above_not_made = (group.members.iter())
                .filter_map(|m| index.get(m))
                .flat_map(|l| l.children.iter().chain(&l.supersedes))
                .any(|c| not_made.contains(c));
            let removed = match origins.get(&group.latest) {
                Some(seqs) => self.summarised_of(seqs)?,
                None => Some(Vec::new()),
            };
            let mut members = Vec::with_capacity(group.members.len());
            for seq in &group.members {
                members.extend(self.raw_event(*seq)?);
            }
            let latest_at = members.iter().position(|e| e.seq == group.latest);
            let summary = latest_at
                .and_then(|i| members.get(i))
                .and_then(Summary::of_event);
            // A plan reads of its members what they asserted and when (and the latest's
            // salience): their texts and digests, the summary read above holding the
            // latest's, had been most of a hub's deletion's memory, every plan's at once
            // (171 of 404 MB for 21k summaries made again).
            for member in &mut members {
                member.payload = Value::Null;
            }
            let (covered, cut_off) = coverage(&index, group.latest);
            let only_from_named =
                from_named.contains_key(&group.latest) && !origins.contains_key(&group.latest);
            let is_named = group.members.iter().any(|m| named.contains_key(m));
            // Forgotten events the deletion leaves: no consolidation summarises them again.
            let holds_forgotten =
                (covered.iter()).any(|s| deleted.contains(s) && !raw_seeds.contains_key(s));
            // Above a summary not made again, it is left to consolidation with that one's
            // period, unless it holds forgotten events: then it is the last to say what they
            // gave, and is made again for them, as a week above a named summary is (seed 23: a
            // week made again after a late note, above the day the user named and the week
            // made only from it, was the last to restate a forgotten note's belief).
            let above_not_made = above_not_made && !holds_forgotten;
            let left_to_consolidation = if keep.contains(&group.latest) {
                // The last to restate a belief forgotten events give
                // ([`Store::keeping_beliefs`]).
                false
            } else if is_named {
                // Its text goes, and the forgotten events only it held; one a live summary
                // under it holds stays, and no consolidation summarises its period again from
                // forgotten events: what they gave rested on this summary (an episode restates
                // nothing), so it is made again for them.
                !holds_forgotten
            } else {
                only_from_named && !covered.iter().any(|s| deleted.contains(s))
            };
            match (removed, latest_at, summary) {
                (Some(removed), Some(latest_at), Some(summary))
                    if !above_not_made && !left_to_consolidation =>
                {
                    let deleted = |s: &u64| raw_seeds.contains_key(s);
                    plans.push(Plan {
                        group,
                        summary,
                        members,
                        latest_at,
                        removed,
                        covered: covered.into_iter().filter(|s| !deleted(s)).collect(),
                        cut_off,
                    });
                }
                (Some(_), Some(_), Some(_)) if !above_not_made => {
                    left.push(group.latest);
                    if !is_named {
                        not_made.extend(group.members.iter().copied());
                    }
                }
                // A summary the user names and that is not made again is not one above which
                // nothing is made again: a week above it holding forgotten events of other
                // days is made again for those.
                _ if is_named => {}
                _ => not_made.extend(group.members.iter().copied()),
            }
        }
        Ok((plans, left))
    }

    /// Of `seqs`, those of a summarised kind (the ones a summary's digest counted), or `None`
    /// when one of them is a tombstone or missing, whose part in a summary is no longer known.
    fn summarised_of(&self, seqs: &BTreeSet<u64>) -> Result<Option<Vec<u64>>> {
        let mut out = Vec::new();
        for seq in seqs {
            match self.raw_event(*seq)? {
                Some(ev) if ev.kind == deletion::TOMBSTONE => return Ok(None),
                Some(ev) => {
                    if summarised(&ev) {
                        out.push(*seq);
                    }
                }
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// The graphs and records the plans are made again from (see [`Sources`]). A forgotten
    /// event comes back into `left` when no user's deletion lists it and a summary that stays
    /// holds it ([`held_by_summaries`]), or forgetting took every summary that held it
    /// ([`orphaned_by_forgetting`]: later summaries restated what it gave, and those may be
    /// the ones taken); not when a user's deletion took a summary holding it (one forgetting
    /// had not taken before, and no other summary holds) while it was forgotten, and none
    /// that stays holds it ([`gist_taken`]). Forgotten
    /// summaries do not come back (they restated values as they were, a deleted event's
    /// among them).
    fn sources(
        &self,
        before: &State,
        targets: &BTreeMap<u64, i64>,
        gone: &BTreeMap<u64, i64>,
        plans: &[Plan<'_>],
        taken: &Taken,
    ) -> Result<Sources> {
        let chain = &taken.chain;
        let covered: BTreeSet<u64> = plans.iter().flat_map(|p| p.covered.clone()).collect();
        let (deleted_at, forgotten) = self.deletion_times()?;
        // The summaries made again in place of taken ones (not a forgotten one made again for
        // a revived fact, which stays out of the graph with the taken summaries kept).
        let members: BTreeSet<u64> = (plans.iter())
            .filter(|p| !p.group.revives_facts())
            .flat_map(|p| p.group.members.iter().copied())
            .collect();
        let mut held = held_by_summaries(chain, |seq| {
            !before.deleted.contains(&seq)
                && (!targets.contains_key(&seq) || members.contains(&seq))
        });
        // The summaries whose events' gist a user's deletion took: not one forgetting had
        // taken before a deletion listed it (the chain runs through forgotten summaries), nor
        // one another holds (as a child, or as the one it replaced: one made again holds the
        // one it replaces, and the taken ones not made again below it).
        let held_by_another: BTreeSet<u64> = (chain.iter())
            .flat_map(|l| l.children.iter().copied().chain(l.supersedes))
            .collect();
        let cut = gist_taken(chain, |seq| {
            if targets.contains_key(&seq) && !members.contains(&seq) {
                return Some(u64::MAX);
            }
            let by_user = !forgotten.contains(&seq) && !held_by_another.contains(&seq);
            deleted_at.get(&seq).copied().filter(|_| by_user)
        });
        let user_deleted = |seq: &u64| deleted_at.contains_key(seq);
        held.extend(orphaned_by_forgetting(chain, &before.deleted, &held, &cut));
        let mut excluded = before.deleted.clone();
        excluded.extend(targets.keys().chain(gone.keys()));
        let mut left_out = excluded.clone();
        left_out.retain(|s| {
            !held.contains(s) || user_deleted(s) || targets.contains_key(s) || gone.contains_key(s)
        });
        let mut left_covered = BTreeSet::new();
        let mut compacted = BTreeSet::new();
        let mut retracted = BTreeSet::new();
        let mut visit = |ev: &Event, out: bool| {
            // A pin makes no node in this replay (`Missing::Skip`): it does not undo a
            // retraction.
            if !out && !crate::projection::PIN_KINDS.contains(&ev.kind.as_str()) {
                for a in &ev.assertions {
                    match a {
                        Assertion::RetractNode { key } => {
                            retracted.insert(key.clone());
                        }
                        Assertion::UpsertNode(up) => {
                            retracted.remove(&up.key);
                        }
                        _ => {}
                    }
                }
            }
            if !covered.contains(&ev.seq) {
                return;
            }
            if ev.kind == deletion::TOMBSTONE {
                compacted.insert(ev.seq);
            } else if !out {
                left_covered.insert(ev.seq);
            }
        };
        // An event left out is of note only where a plan covers it.
        let of_note = |seq: u64| covered.contains(&seq);
        let shown = LeftOutShown::Those(&of_note);
        let left = match taken.replay.take(&left_out) {
            Some(left) => {
                // The graph is kept; what this notes of each event it looks at is read from
                // the log, as a replay would read it.
                self.scan_log_where(
                    1,
                    |seq| shown.reads(&left_out, seq),
                    |ev| {
                        visit(&ev, left_out.contains(&ev.seq));
                        Ok(true)
                    },
                )?;
                left
            }
            None => self.replay_for_remaking(left_out, (visit, shown))?,
        };
        let cut_off = plans
            .iter()
            .any(|p| p.cut_off || !p.covered.is_disjoint(&compacted));
        let kept = if cut_off || restates_a_node_not_in(plans, &left) {
            excluded.retain(|s| !members.contains(s));
            Some(self.replay_for_remaking(excluded, UNVISITED)?)
        } else {
            None
        };
        Ok(Sources {
            left,
            kept,
            left_covered,
            compacted,
            retracted,
        })
    }

    /// The graph of the log without `excluded`, each event read shown to `visit` with whether
    /// it is left out.
    fn replay_for_remaking(
        &self,
        excluded: BTreeSet<u64>,
        visit: (impl FnMut(&Event, bool), LeftOutShown<'_>),
    ) -> Result<State> {
        replay_excluding(&*self.backend, excluded, visit, Vec::new(), u64::MAX)?.map_err(|msg| {
            Error::Store {
                path: self.dir.clone(),
                message: format!("cannot make the deletion's summaries again: {msg}"),
            }
        })
    }

    /// The events users' deletions list (not forgetting's).
    pub(super) fn user_deleted(&self) -> Result<BTreeSet<u64>> {
        Ok(self.deleted_by_reason()?.0)
    }

    /// The events users' deletions list, and those forgetting's list (its latest lists all it
    /// took), from one read of the deletion events.
    pub(super) fn deleted_by_reason(&self) -> Result<(BTreeSet<u64>, BTreeSet<u64>)> {
        let (by_user, forgotten) = self.deletion_times()?;
        Ok((by_user.into_keys().collect(), forgotten))
    }

    /// The events users' deletions list, each with the number of the first deletion to list
    /// it, and those forgetting's list, from one read of the deletion events.
    fn deletion_times(&self) -> Result<(BTreeMap<u64, u64>, BTreeSet<u64>)> {
        let (mut by_user, mut forgotten) = (BTreeMap::new(), BTreeSet::new());
        for e in self.events_with(Facet::Kind, deletion::DELETE, i64::MIN, i64::MAX)? {
            match deletion::reason_of(&e) {
                Some(Reason::Delete) => {
                    for seq in deletion::deleted_by(&e) {
                        let first: &mut u64 = by_user.entry(seq).or_insert(e.seq);
                        *first = (*first).min(e.seq);
                    }
                }
                Some(Reason::Forget) => forgotten.extend(deletion::deleted_by(&e)),
                _ => {}
            }
        }
        Ok((by_user, forgotten))
    }

    /// What the summary of `plan` made again restates: the nodes and edges its group
    /// restated or the events it covers that are left asserted, as `graph` holds them, less
    /// every node the request names; from the graph with the taken summaries kept (not
    /// `complete`), also less what `seed_only` says only deleted events gave. A node the
    /// events left do not make (its maker forgotten, and held by no summary that stays but
    /// the taken ones; not one they retracted last) comes from the taken summaries' own
    /// restatement, less that, with the edges that want it; an edge whose ends the events left
    /// make and which they do not make (a retraction, an assertion on a node a deleted event
    /// had made) is not brought back.
    fn restated_again(
        &self,
        plan: &Plan<'_>,
        (graph, complete): (&State, bool),
        (context, records): (&Context<'_>, &[Event]),
        seed_only: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<Assertion>> {
        // What the covered events left asserted counts as well as what the group restated:
        // a value that was dead when the group was written (a forgotten event's edge a later
        // retraction ended) lives again once the deletion takes what ended it.
        let asserted: Vec<&Event> = plan.members.iter().chain(records).collect();
        let restate = |graph: &State, keep: &dyn Fn(&Assertion) -> bool| {
            consolidate::restated(
                (asserted.iter())
                    .flat_map(|e| e.assertions.iter().map(move |a| (e.ts, a)))
                    .filter(|(_, a)| keep(a)),
                |key| Ok(graph.node_id(key).and_then(|id| graph.node(id))),
                |from, relation, to| Ok(graph.edge_by_keys(from, relation, to)),
            )
        };
        let nodes = &context.request.nodes;
        let not_stripped = |_: &str| false;
        let strip: &dyn Fn(&str) -> bool = if complete { &not_stripped } else { seed_only };
        let mut out = kept_of(restate(graph, &|_| true)?, nodes, strip, &BTreeSet::new());
        let (Some(kept), true, true) =
            (&context.sources.kept, complete, !plan.group.revives_facts())
        else {
            return Ok(out);
        };
        let retracted = |key: &str| context.sources.retracted.contains(key);
        let missing = |a: &Assertion| {
            wants_a_node_not_in(a, graph)
                && match a {
                    Assertion::UpsertNode(up) => !retracted(&up.key),
                    // An edge's ends are restated with it.
                    Assertion::UpsertEdge(up) => !retracted(&up.from) && !retracted(&up.to),
                    _ => true,
                }
        };
        let present: BTreeSet<String> = (out.iter())
            .filter_map(|a| match a {
                Assertion::UpsertNode(up) => Some(up.key.clone()),
                _ => None,
            })
            .collect();
        // A node of the graph above keeps that graph's values: an edge the fallback restates
        // for want of its other end restates this end too, with the values of the graph with
        // the taken summaries kept, which may be a deleted event's (a day summary written
        // after it restated them).
        let mut fallback = restate(kept, &missing)?;
        fallback.retain(|a| !matches!(a, Assertion::UpsertNode(up) if present.contains(&up.key)));
        out.extend(kept_of(fallback, nodes, seed_only, &present));
        Ok(out)
    }
}

/// The edges of `left` (the graph of the events left) at a node one of `made` (the summaries
/// made again) restates that an event `live` says is left supports, as upserts with their
/// values in `left`, each with the live events supporting it.
///
/// A summary made again comes after every event of the log. A live event after the summary
/// it replaces, asserting an edge at a node that only that summary made before it (the
/// node's own events forgotten), is replayed where the node is not yet made again, and its
/// edge is skipped: an agent's recent belief in a person whose first note was forgotten went
/// with the deletion of another old note.
fn live_edges_at(
    left: &State,
    made: &[Event],
    live: impl Fn(u64) -> bool,
) -> Vec<(crate::model::EdgeUpsert, Vec<u64>)> {
    let restated: BTreeSet<&str> = (made.iter())
        .flat_map(|e| &e.assertions)
        .filter_map(|a| match a {
            Assertion::UpsertNode(up) => Some(up.key.as_str()),
            _ => None,
        })
        .collect();
    let ids: BTreeSet<crate::model::EdgeId> = (restated.into_iter())
        .filter_map(|key| left.node_id(key))
        .flat_map(|n| left.adj.entries(n).map(|e| e.edge_id()))
        .collect();
    let key = |id| left.nodes.key(id).map(str::to_string);
    (ids.into_iter())
        .filter_map(|id| left.edge(id))
        .filter_map(|e| {
            let support: Vec<u64> = e.evidence.iter().copied().filter(|s| live(*s)).collect();
            let up = crate::model::EdgeUpsert {
                from: key(e.from)?,
                relation: e.relation,
                to: key(e.to)?,
                confidence: Some(e.confidence),
                props: e.props,
                valid_from: e.valid_from,
                valid_to: e.valid_to,
                last_seen: Some(e.last_seen),
            };
            (!support.is_empty()).then_some((up, support))
        })
        .collect()
}

/// The forgotten summaries to make again for what a deleted retraction had ended, where no
/// summary that stays or is made again holds the event that asserted it (`plans`): forgetting
/// took the event and then, with nothing else of its period left, its summary (the fact, then
/// retracted, rested on nothing). With the retraction deleted the fact lives again in the log
/// without it, and the store has nothing else to restate it from.
///
/// For each such event, of the day and week summaries over its time that forgetting took (not
/// a user) and that hold it, the one of the lowest level, the latest of that level, is made
/// again; each with the nodes and edges it revives, so that one restating none of them is not
/// written. Not one of a range a live summary has, or a summary this deletion takes and leaves
/// to consolidation (`groups`): the two would both stand. One of the range of a summary this
/// deletion makes again (`plans`), older than it, is folded into that one
/// ([`Revived::absorbed`]). Nor one holding an event a user deleted: written before that
/// deletion, which takes only live summaries, it restated that event's values (a week made
/// again after the deletion, without it, may be made again).
///
/// The cost, where the deletion revives nothing (most): one pass over what the seeds ended.
/// Otherwise one reading of which events the summaries that stay hold, and the coverage of
/// each forgotten summary over one of the revived events' times.
fn revived_groups(
    before: &State,
    targets: &BTreeMap<u64, i64>,
    taken: &Taken,
    (groups, plans): (&[Group], &[Plan<'_>]),
    records_whole: &dyn Fn(&BTreeSet<u64>) -> Result<bool>,
) -> Result<Revived> {
    let Some(carriers) = &taken.carriers else {
        return Ok(Revived::default());
    };
    let in_plans: BTreeSet<u64> = plans
        .iter()
        .flat_map(|p| p.covered.iter().copied())
        .collect();
    // Each forgotten event whose fact the deletion revives, with its time and those facts.
    let mut revived: BTreeMap<u64, (i64, BTreeSet<String>)> = BTreeMap::new();
    for ended in carriers.ended_by_seeds() {
        let forgotten = before.deleted.contains(&ended.seq) && !targets.contains_key(&ended.seq);
        if !forgotten || in_plans.contains(&ended.seq) {
            continue;
        }
        let subjects = (ended.subjects.iter())
            .filter(|(_, retraction)| targets.contains_key(retraction))
            .map(|(subject, _)| subject.clone());
        let entry = revived
            .entry(ended.seq)
            .or_insert((ended.ts, BTreeSet::new()));
        entry.1.extend(subjects);
    }
    revived.retain(|_, (_, subjects)| !subjects.is_empty());
    if revived.is_empty() {
        return Ok(Revived::default());
    }
    let chain = &taken.chain;
    let staying = |seq: u64| !before.deleted.contains(&seq) && !targets.contains_key(&seq);
    // A summary that stays restates what the events it holds gave.
    let held = held_by_summaries(chain, staying);
    revived.retain(|seq, _| !held.contains(seq));
    if revived.is_empty() {
        return Ok(Revived::default());
    }
    let index: BTreeMap<u64, &SummaryLink> = chain.iter().map(|l| (l.seq, l)).collect();
    let range = |l: &SummaryLink| (l.level, l.start, l.end);
    // The range of each group made again, by it: a forgotten summary of one, older than it,
    // is folded into it (`Revived::absorbed`).
    let planned: BTreeMap<(Level, i64, i64), u64> = (plans.iter())
        .filter_map(|p| index.get(&p.group.latest).map(|l| (range(l), l.seq)))
        .collect();
    let taken_ranges = (groups.iter())
        .flat_map(|g| &g.members)
        .filter_map(|m| index.get(m).map(|l| range(l)))
        .filter(|r| !planned.contains_key(r));
    let ranges: BTreeSet<(Level, i64, i64)> = (chain.iter())
        .filter(|l| staying(l.seq))
        .map(range)
        .chain(taken_ranges)
        .collect();
    let older_than_planned = |l: &SummaryLink| (planned.get(&range(l))).is_none_or(|p| l.seq < *p);
    let times: BTreeSet<i64> = revived.values().map(|(ts, _)| *ts).collect();
    // Not an episode: a day or a week restates its events' facts, an episode none.
    let candidate = |l: &&SummaryLink| {
        l.level != Level::Episode
            && before.deleted.contains(&l.seq)
            && !carriers.deleted_by_user(l.seq)
            && !ranges.contains(&range(l))
            && older_than_planned(l)
            && l.start <= l.end
            && times.range(l.start..=l.end).next().is_some()
    };
    let mut best: BTreeMap<u64, &SummaryLink> = BTreeMap::new();
    for link in chain.iter().filter(candidate) {
        let (covered, cut_off) = coverage(&index, link.seq);
        if covered.iter().any(|s| carriers.deleted_by_user(*s)) {
            continue;
        }
        // One to fold into a summary made again must be whole: a compaction's tombstone under
        // it would have the one made again restated from the graph with the taken summaries
        // kept, whose values may be a deleted event's (as one made again apart is not written
        // then: helper-140).
        let folded = planned.contains_key(&range(link));
        if folded && (cut_off || !records_whole(&covered)?) {
            continue;
        }
        for seq in covered.iter().filter(|s| revived.contains_key(s)) {
            let better =
                |b: &&SummaryLink| (link.level, Reverse(link.seq)) < (b.level, Reverse(b.seq));
            if best.get(seq).is_none_or(better) {
                best.insert(*seq, link);
            }
        }
    }
    let mut by_summary: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    let mut out = Revived::default();
    for (seq, link) in best {
        if let Some(&made_again) = planned.get(&range(link)) {
            out.absorbed.entry(made_again).or_default().insert(link.seq);
        } else if let Some((_, subjects)) = revived.get(&seq) {
            by_summary
                .entry(link.seq)
                .or_default()
                .extend(subjects.iter().cloned());
        }
    }
    // A summary folded into one made again holds what it reaches, which one made again apart
    // would hold a second time (helper-140: a forgotten week folded into its week, and a
    // forgotten day under it made again for another revived event).
    let folded_reach: BTreeSet<u64> = (out.absorbed.values().flatten())
        .flat_map(|f| reach(&index, *f))
        .collect();
    by_summary.retain(|seq, _| !folded_reach.contains(seq));
    out.groups = (by_summary.into_iter())
        .map(|(seq, subjects)| Group {
            latest: seq,
            members: vec![seq],
            revives: subjects.into_iter().collect(),
        })
        .collect();
    Ok(out)
}

/// What [`revived_groups`] found to make again for the facts a deleted retraction had ended.
#[derive(Default)]
struct Revived {
    /// Forgotten summaries made again, each for the facts it revives.
    groups: Vec<Group>,
    /// Forgotten summaries of a range a group the deletion takes is made again for, by that
    /// group's latest summary: folded into it ([`Store::absorb`]).
    absorbed: BTreeMap<u64, BTreeSet<u64>>,
}

impl Store {
    /// The values of the nodes a belief holds that the summaries made again restate, where
    /// the events the deletion leaves give a node otherwise than the state before it did, and
    /// the raw events the users' deletions and this one leave (forgotten ones back) give it as
    /// it was: a value a forgotten note gave, that only summaries restating the graph carried
    /// (not holding the note), went with the last of them, though the log without the deleted
    /// events holds it (seed 1: an alias of a belief's end). Each is restated as it was
    /// ([`restate_values_kept`]): the summary comes last. Only as it was: not a value
    /// forgetting had let fade while no belief held the node, which the raw log gives too,
    /// nor where a compaction made a giver a tombstone, or only a summary gave a value, and
    /// the raw log gives less (helper-138).
    ///
    /// The cost: a look at each node the plans' member records restate, in the graphs before
    /// and after. Where a belief's node changes and forgetting took events the deletion leaves
    /// (a deletion of a note that set a value of one, on a store that forgot), a read of the
    /// deletion records and one reading of the log's raw records.
    fn values_kept(
        &self,
        before: &State,
        left: &State,
        (targets, gone): (&BTreeMap<u64, i64>, &BTreeMap<u64, i64>),
        request: &DeleteRequest,
        plans: &[Plan<'_>],
    ) -> Result<BTreeMap<String, NodeValues>> {
        let decay = self.decay_policy();
        let mut beliefs = Beliefs::new(before, &decay);
        let mut changed: BTreeMap<String, Option<NodeValues>> = BTreeMap::new();
        // Each node once, however many records restate it (a hub's deletion makes tens of
        // thousands of summaries again).
        let mut looked: std::collections::HashSet<&str> = std::collections::HashSet::new();
        let restated = (plans.iter())
            .flat_map(|p| &p.members)
            .flat_map(|e| &e.assertions);
        for a in restated {
            let Assertion::UpsertNode(up) = a else {
                continue;
            };
            if !looked.insert(&up.key) || request.nodes.contains(&up.key) {
                continue;
            }
            let (was, is) = (values_in(before, &up.key), values_in(left, &up.key));
            let differs = match (&was, &is) {
                (Some(was), Some(is)) => !was.same_as(is),
                (Some(_), None) => true,
                _ => false,
            };
            if differs && beliefs.hold(&up.key) {
                changed.insert(up.key.clone(), None);
            }
        }
        if changed.is_empty() {
            return Ok(BTreeMap::new());
        }
        let (user_deleted, forgotten) = self.deleted_by_reason()?;
        let taken_here = |seq: &u64| targets.contains_key(seq) || gone.contains_key(seq);
        if (forgotten.iter()).all(|s| taken_here(s) || user_deleted.contains(s)) {
            return Ok(BTreeMap::new());
        }
        super::log::scan(&*self.backend, 1, &mut |seq, v| {
            if taken_here(&seq) || user_deleted.contains(&seq) {
                return Ok(true);
            }
            let (_, kind) = crate::codec::peek_event_kind(super::Table::Log.name(), v)?;
            if !consolidate::summarised_kind(&kind) {
                return Ok(true);
            }
            let ev = super::decode_event(super::Table::Log.name(), v)?;
            for a in &ev.assertions {
                match a {
                    Assertion::UpsertNode(up) => {
                        if let Some(slot) = changed.get_mut(&up.key) {
                            NodeValues::fold(slot, up);
                        }
                    }
                    Assertion::RetractNode { key } => {
                        if let Some(slot) = changed.get_mut(key) {
                            *slot = None;
                        }
                    }
                    _ => {}
                }
            }
            Ok(true)
        })?;
        Ok((changed.into_iter())
            .filter_map(|(key, raw)| {
                let was = values_in(before, &key)?;
                let as_it_was = raw.is_some_and(|raw| raw.same_as(&was));
                as_it_was.then_some((key, was))
            })
            .collect())
    }

    /// The summaries among those [`Store::plans`] left to the next consolidation (`left`, by
    /// the latest of each group) that were the last to restate a belief (an edge of effective
    /// confidence 0.5 or more, or at a pinned node) as it is, which an event users' deletions
    /// and this one leave still gives: forgetting took that event, and the summaries over it,
    /// once the other restated the belief from a later event (or took the event that made an
    /// end of it, and replay skips a live event's assertion of it). Taken,
    /// the belief went, or a value of it, though the log without the deleted events holds it
    /// (session 58: after two forgettings, a week summary's deletion lost a belief the week
    /// before had given; a price only a forgotten note gave went the same way). Each is made
    /// again, restating what it restated as the events left give it, and what its events left
    /// give, as a summary the deletion takes is made again for what other periods gave.
    ///
    /// A summary is the last to restate a belief as it is when the events supporting it that
    /// the deletion leaves, folded in log order as replay folds them ([`EdgeValues`]), give
    /// another edge, or none, and the raw events the users' deletions and this one leave
    /// (forgotten ones back) give yet another: else what went was only deleted events' doing.
    /// Not one a summary made again supports: that one restates it as the events left give
    /// it. Only beliefs: an edge gone stale fades with its last support, as forgetting lets it
    /// (made again for such edges, forgotten days brought back 14 stale edges for one
    /// deletion; helper-133). The floor is forgetting's default. Not the time it was last
    /// seen, which the deletion of the latest summary restating it most often takes with the
    /// events deleted; the belief may then fade sooner than the log without them says. A
    /// node a belief holds (pinned, or an end of a belief: [`Beliefs::hold`]) that the
    /// summary restated is kept so too, where the live events the deletion leaves give it
    /// otherwise (its label, name, aliases, properties), or not at all, than the raw events
    /// the users' deletions leave do (seeds 41 and 23; an end of a belief only a forgotten
    /// week named had gone, and the belief with it).
    ///
    /// The cost: a read of each summary left to consolidation, and of the events each belief
    /// it restated rests on that the deletion leaves (through one view); then, where a belief
    /// is left so, or the summaries restated a node a belief holds (most restate a belief's
    /// ends) and forgetting took events the deletion leaves, a read of the deletion records
    /// and one reading of the log's raw records the users' deletions leave (and of the live
    /// summaries, where a node is in question). On `cx` forgotten to 60 events (272k in the
    /// log) a deletion of a summary took 7.6-10.9 s against 8.1-10.1 s when only pinned nodes
    /// were kept so: the world's bot is pinned, and most summaries restate it.
    fn keeping_beliefs(
        &self,
        before: &State,
        (targets, gone): (&BTreeMap<u64, i64>, &BTreeMap<u64, i64>),
        request: &DeleteRequest,
        plans: &[Plan<'_>],
        left: &[u64],
    ) -> Result<BTreeSet<u64>> {
        if left.is_empty() {
            return Ok(BTreeSet::new());
        }
        let made_again: BTreeSet<u64> = (plans.iter())
            .flat_map(|p| p.group.members.iter().copied())
            .collect();
        let taken_here = |seq: &u64| targets.contains_key(seq) || gone.contains_key(seq);
        let view = self.backend.pinned_view()?;
        let backend = view.as_deref().unwrap_or(&*self.backend);
        // Each edge once, however many summaries restated it, with those summaries. An edge at
        // a node the request names goes with it: the forgotten events that asserted it name
        // the node, and are deleted too.
        let mut restating: BTreeMap<(String, String, String), BTreeSet<u64>> = BTreeMap::new();
        // The nodes a belief holds (pinned, or an end of a belief), each with the summaries
        // left that restated it.
        let decay = self.decay_policy();
        let mut beliefs = Beliefs::new(before, &decay);
        let mut held_nodes: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        for seq in left {
            let Some(summary) = self.raw_event_decoded(backend, *seq, super::decode_event)? else {
                continue;
            };
            for a in summary.assertions {
                match a {
                    Assertion::UpsertEdge(up)
                        if !request.nodes.iter().any(|k| *k == up.from || *k == up.to) =>
                    {
                        let key = (up.from, up.relation, up.to);
                        restating.entry(key).or_default().insert(*seq);
                    }
                    // A node a belief holds keeps its last support as a belief does (seed 41: a
                    // pinned person only a forgotten week's note had named; a belief's end so
                    // named went, and the belief with it).
                    Assertion::UpsertNode(up)
                        if !request.nodes.contains(&up.key) && beliefs.hold(&up.key) =>
                    {
                        held_nodes.entry(up.key).or_default().insert(*seq);
                    }
                    _ => {}
                }
            }
        }
        // Each belief the events supporting it that the deletion leaves give otherwise, with
        // its ends and what those give.
        let mut orphans: BTreeMap<String, ([String; 2], Option<EdgeValues>)> = BTreeMap::new();
        for (from, relation, to) in restating.keys() {
            let Some(edge) = before.edge_by_keys(from, relation, to) else {
                continue;
            };
            // Only a belief, as forgetting keeps a belief's last support.
            let believed = beliefs.believe(
                [edge.from, edge.to],
                relation,
                edge.confidence,
                edge.last_seen,
            );
            // A summary made again restates the edge as the events left give it. With no
            // evidence (details a damaged snapshot lost) nothing says what the deletion
            // leaves of it.
            let remade = edge.evidence.iter().any(|e| made_again.contains(e));
            if !believed || remade || edge.evidence.is_empty() {
                continue;
            }
            let mut folded = None;
            for seq in edge.evidence.iter().filter(|e| !taken_here(e)) {
                let Some(ev) = self.raw_event_decoded(backend, *seq, super::decode_event)? else {
                    continue;
                };
                for a in &ev.assertions {
                    match a {
                        Assertion::UpsertEdge(up)
                            if up.from == *from && up.relation == *relation && up.to == *to =>
                        {
                            EdgeValues::fold(&mut folded, up)
                        }
                        _ => {}
                    }
                }
            }
            if !folded.as_ref().is_some_and(|v| v.are_of(&edge)) {
                let ends = [from.clone(), to.clone()];
                orphans.insert(deletion::edge_subject(from, relation, to), (ends, folded));
            }
        }
        if orphans.is_empty() && held_nodes.is_empty() {
            return Ok(BTreeSet::new());
        }
        let (user_deleted, forgotten) = self.deleted_by_reason()?;
        // A node's values only forgotten events give are what a summary keeps of it: with
        // none forgotten but those the deletion takes, the live events left give every node
        // as the raw ones left do, and the log need not be read for nodes (most summaries
        // restate a belief's ends).
        if (forgotten.iter()).all(|s| taken_here(s) || user_deleted.contains(s)) {
            held_nodes.clear();
            if orphans.is_empty() {
                return Ok(BTreeSet::new());
            }
        }
        // The log the users' deletions and this one leave, forgotten events back, gives each
        // such edge as its events folded in log order do (a retraction of it or of an end
        // ends it): where that is not what the events supporting it give, the summary is
        // made again. Live events count too: replay skipped a live note's assertion for want
        // of an end only forgotten events made (seed 23: `bot HOME n1`). Where it is the
        // same, what went was only deleted events' doing.
        let left_by_users = |seq: u64| !taken_here(&seq) && !user_deleted.contains(&seq);
        let mut at_node: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (subject, (ends, _)) in &orphans {
            for end in ends {
                at_node.entry(end).or_default().push(subject);
            }
        }
        let mut in_left: BTreeMap<&str, Option<EdgeValues>> = BTreeMap::new();
        // Each node a belief holds as the live events left give it (summaries too), and as
        // the raw events the users' deletions leave do (forgotten ones too).
        let mut node_stays: BTreeMap<&str, Option<NodeValues>> = BTreeMap::new();
        let mut node_left: BTreeMap<&str, Option<NodeValues>> = BTreeMap::new();
        super::log::scan(&*self.backend, 1, &mut |seq, v| {
            if !left_by_users(seq) {
                return Ok(true);
            }
            // Not a deletion record (a forgetting's, replaced by the next, lists every event
            // it took), nor a summary unless live and a node a belief holds is in question:
            // only raw events are read whole.
            let (_, kind) = crate::codec::peek_event_kind(super::Table::Log.name(), v)?;
            let live = !before.deleted.contains(&seq);
            let summary = kind == consolidate::SUMMARY;
            let nodes_read = live && summary && !held_nodes.is_empty();
            if !consolidate::summarised_kind(&kind) && !nodes_read {
                return Ok(true);
            }
            let ev = super::decode_event(super::Table::Log.name(), v)?;
            for a in &ev.assertions {
                match a {
                    Assertion::UpsertNode(up) => {
                        if let Some((key, _)) = held_nodes.get_key_value(&up.key) {
                            if live {
                                NodeValues::fold(node_stays.entry(key).or_default(), up);
                            }
                            if !summary {
                                NodeValues::fold(node_left.entry(key).or_default(), up);
                            }
                        }
                    }
                    Assertion::RetractNode { key } => {
                        node_stays.remove(key.as_str());
                        if !summary {
                            node_left.remove(key.as_str());
                        }
                    }
                    _ => {}
                }
            }
            if summary {
                return Ok(true);
            }
            for a in &ev.assertions {
                match a {
                    Assertion::UpsertEdge(up) => {
                        let subject = deletion::edge_subject(&up.from, &up.relation, &up.to);
                        if let Some((key, _)) = orphans.get_key_value(&subject) {
                            EdgeValues::fold(in_left.entry(key).or_default(), up);
                        }
                    }
                    Assertion::RetractEdge { from, relation, to } => {
                        in_left.remove(deletion::edge_subject(from, relation, to).as_str());
                    }
                    Assertion::RetractNode { key } => {
                        for subject in at_node.get(key.as_str()).into_iter().flatten() {
                            in_left.remove(subject);
                        }
                    }
                    _ => {}
                }
            }
            Ok(true)
        })?;
        let lost = |subject: &String| match (orphans.get(subject), in_left.get(subject.as_str())) {
            (Some((_, staying)), Some(left)) => left != staying,
            _ => false,
        };
        let node_lost = |key: &str| match (node_left.get(key), node_stays.get(key)) {
            (Some(Some(left)), Some(Some(staying))) => !left.same_as(staying),
            (Some(Some(_)), _) => true,
            _ => false,
        };
        let for_edges = (restating.iter())
            .filter(|((f, r, t), _)| lost(&deletion::edge_subject(f, r, t)))
            .flat_map(|(_, summaries)| summaries.iter().copied());
        let for_nodes = (held_nodes.iter())
            .filter(|(key, _)| node_lost(key))
            .flat_map(|(_, summaries)| summaries.iter().copied());
        Ok(for_edges.chain(for_nodes).collect())
    }
}

/// Node `key`'s values in `graph`.
fn values_in(graph: &State, key: &str) -> Option<NodeValues> {
    let n = graph.node_id(key).and_then(|id| graph.node(id))?;
    Some(NodeValues {
        label: n.label,
        name: n.name,
        aliases: n.aliases,
        props: n.props,
    })
}

/// Restates each node of `assertions` that `kept` holds with those values: the label, name,
/// aliases and properties (a property either graph, the one the summary was made from and
/// that of the events left, has and they lack set to null). The node comes out with them, and
/// with any alias the events left give besides: no upsert takes one out.
fn restate_values_kept(
    assertions: &mut [Assertion],
    kept: &BTreeMap<String, NodeValues>,
    graphs: [&State; 2],
) {
    if kept.is_empty() {
        return;
    }
    for a in assertions {
        let Assertion::UpsertNode(up) = a else {
            continue;
        };
        let Some(values) = kept.get(&up.key) else {
            continue;
        };
        up.label = Some(values.label.clone());
        up.name = Some(values.name.clone());
        up.aliases.clone_from(&values.aliases);
        let mut props = values.props.clone();
        for held in graphs.iter().filter_map(|g| values_in(g, &up.key)) {
            for k in held.props.into_keys() {
                props.entry(k).or_insert(Value::Null);
            }
        }
        up.props = props;
    }
}

/// What the state before a deletion believes, as forgetting's default policy does
/// (`forget::Support::of_beliefs`): an edge with a pinned end, or of effective confidence at
/// the belief floor or more, and the nodes such edges link, and pinned nodes.
struct Beliefs<'a> {
    before: &'a State,
    decay: &'a crate::dynamics::decay::DecayPolicy,
    floor: f32,
    /// Each node's answer, once asked: its edges are read once, however many summaries
    /// restate it.
    held: BTreeMap<String, bool>,
}

impl<'a> Beliefs<'a> {
    fn new(before: &'a State, decay: &'a crate::dynamics::decay::DecayPolicy) -> Self {
        Beliefs {
            before,
            decay,
            floor: crate::dynamics::forget::RetentionPolicy::default().belief_floor,
            held: BTreeMap::new(),
        }
    }

    /// Whether the edge between `ends` of `relation`, `confidence` and last seen at
    /// `last_seen` is a belief (at the latest time the state knows).
    fn believe(&self, ends: [NodeId; 2], relation: &str, confidence: f32, last_seen: i64) -> bool {
        let adj = &self.before.adj;
        let now = self.before.latest_ts.unwrap_or(last_seen);
        ends.iter().any(|end| adj.is_pinned(end.0))
            || self.decay.effective(relation, confidence, last_seen, now) >= self.floor
    }

    /// Whether a belief holds node `key`: it is pinned, or an end of a belief.
    fn hold(&mut self, key: &str) -> bool {
        if let Some(known) = self.held.get(key) {
            return *known;
        }
        let before = self.before;
        let holds = before.node_id(key).is_some_and(|id| {
            let adj = &before.adj;
            adj.is_pinned(id.0)
                || adj.entries(id).any(|e| {
                    let relation = before.relations.name(e.relation());
                    let last_seen = adj.last_seen(e.edge_id());
                    self.believe([id, e.neighbor()], relation, e.confidence, last_seen)
                })
        });
        self.held.insert(key.to_string(), holds);
        holds
    }
}

/// Whether assertion `a` upserts a node, or an edge with an end, that `graph` does not hold.
fn wants_a_node_not_in(a: &Assertion, graph: &State) -> bool {
    let missing = |key: &str| graph.node_id(key).is_none();
    match a {
        Assertion::UpsertNode(up) => missing(&up.key),
        Assertion::UpsertEdge(up) => missing(&up.from) || missing(&up.to),
        _ => false,
    }
}

/// Whether some node the summaries of `plans` restated is not in `graph`: then the graph with
/// the taken summaries kept is read too ([`Store::restated_again`]).
fn restates_a_node_not_in(plans: &[Plan<'_>], graph: &State) -> bool {
    (plans.iter())
        .flat_map(|p| &p.members)
        .flat_map(|e| &e.assertions)
        .any(|a| wants_a_node_not_in(a, graph))
}

/// The names and aliases of the nodes `request` names, which no text made again may keep,
/// less those another node is named too (its lines cannot be told from theirs).
fn request_names(before: &State, request: &DeleteRequest) -> Vec<String> {
    let names: BTreeSet<String> = (request.nodes.iter())
        .filter_map(|key| before.node_id(key).and_then(|id| before.node(id)))
        .flat_map(|n| std::iter::once(n.name).chain(n.aliases))
        .collect();
    let bearers = before.keys_named(&names);
    let only_theirs = |name: &String| {
        (bearers.get(name)).is_none_or(|keys| keys.iter().all(|k| request.nodes.contains(k)))
    };
    names.into_iter().filter(only_theirs).collect()
}

/// The digest of the summary of `plan` made again: made from the records of the events it
/// covers that are left, named as `graph` names them, less every line naming one of
/// `unnamed`. Where a compaction took the records of some it covered (not `complete`), it
/// counts the events its summary counted less the deleted ones, and a week the days its
/// summary covered; otherwise a week covers the days of the events left.
fn digest_again(
    plan: &Plan<'_>,
    records: &[Event],
    (graph, complete): (&State, bool),
    unnamed: &[String],
    policy: &ConsolidationPolicy,
) -> Digest {
    let events: Vec<Event> = events_left(records).cloned().collect();
    let name = |key: &str| {
        graph
            .node_id(key)
            .and_then(|id| graph.node(id))
            .map(|n| n.name)
            .unwrap_or_else(|| key.to_string())
    };
    let mut digest = Digest::of_events(&events, &name).without_names(unnamed);
    if plan.summary.level == Level::Week {
        let days: BTreeSet<i64> = events.iter().map(|e| policy.day_of(e.ts)).collect();
        digest.days = days.into_iter().collect();
    }
    if !complete {
        let counted = plan
            .summary
            .digest
            .events
            .saturating_sub(plan.removed.len());
        digest.events = digest.events.max(counted);
        let days: BTreeSet<i64> = (digest.days.iter())
            .chain(&plan.summary.digest.days)
            .copied()
            .collect();
        digest.days = days.into_iter().collect();
    }
    digest
}

/// The events of a summary's period it is made again from: of `records` (those it covers
/// before it that are left, [`Store::records_left`]), the ones of a summarised kind.
fn events_left(records: &[Event]) -> impl Iterator<Item = &Event> {
    records.iter().filter(|e| summarised(e))
}

/// The children of `summary` made again: those taken by their numbers made again, and none
/// of the deleted events (`raw_deleted`: a raw event among an episode's children). Every
/// other child stays, a summary taken and not made again too: the chain from the events it
/// was made from to the summary made again runs through it (its digest holds their lines),
/// and after a compaction through its tombstone, whose events its world time finds. The
/// events the summary made again is without, it lists.
fn children_again(
    summary: &Summary,
    raw_deleted: &BTreeSet<u64>,
    made: &BTreeMap<u64, u64>,
) -> Vec<u64> {
    summary
        .children
        .iter()
        .filter(|c| !raw_deleted.contains(c))
        .map(|c| made.get(c).copied().unwrap_or(*c))
        .collect()
}

/// The events (not summaries) that the summaries `live` says count hold, through their
/// children and the summaries they replaced, forgotten ones on the way included, less every
/// event one of them is without: those that stay ([`Store::sources`]). Those a user's
/// deletion took with a summary, [`gist_taken`] finds.
fn held_by_summaries(chain: &[SummaryLink], live: impl Fn(u64) -> bool) -> BTreeSet<u64> {
    held_from(chain, |seq| live(seq).then_some(0))
        .into_keys()
        .collect()
}

/// The events (not summaries) that the summaries `root` gives a number hold, through their
/// children and the summaries they replaced, forgotten ones on the way included, less every
/// event one of them is without; each with the largest number of a root that reaches it.
fn held_from(chain: &[SummaryLink], root: impl Fn(u64) -> Option<u64>) -> BTreeMap<u64, u64> {
    let index: BTreeSet<u64> = chain.iter().map(|l| l.seq).collect();
    let mut reached: BTreeMap<u64, u64> = (index.iter())
        .filter_map(|s| root(*s).map(|at| (*s, at)))
        .collect();
    let mut held: BTreeMap<u64, u64> = BTreeMap::new();
    let mut without = BTreeSet::new();
    // A summary comes after its children and the summary it replaced: from the end of the
    // log back, each is reached before what it holds.
    for link in chain.iter().rev() {
        let Some(&at) = reached.get(&link.seq) else {
            continue;
        };
        without.extend(link.without.iter().copied());
        for below in link.children.iter().chain(&link.supersedes) {
            let into = if index.contains(below) {
                &mut reached
            } else {
                &mut held
            };
            let largest = into.entry(*below).or_insert(at);
            *largest = (*largest).max(at);
        }
    }
    held.retain(|s, _| !without.contains(s));
    held
}

/// The events (not summaries) whose gist a user's deletion took: those the summaries
/// `taken_at` names held (through their children and the summaries they replaced, less what
/// each on the way is without), where no summary written after the deletion that took them
/// (`taken_at`'s number) holds them, directly or through older summaries. An event live when
/// a user deleted a summary of it stays, and the next consolidation summarises it again (a
/// week written afterwards lists the old day over it): once forgetting took it and those
/// summaries, a summary over later events was what restated its facts (seed 16: a belief's
/// confidence, which a later note re-asserting it without one kept), and a deletion of that
/// summary must not lose them with it. The summaries say which, not the deletions' lists: a
/// deletion before session 38 did not list the forgotten events it named.
///
/// One pass back over `chain`, and a second where a summary named was taken by an earlier
/// deletion (none is in most deletions: the summaries this one takes are taken now).
fn gist_taken(chain: &[SummaryLink], taken_at: impl Fn(u64) -> Option<u64>) -> BTreeSet<u64> {
    let held = held_from(chain, taken_at);
    if held.values().all(|at| *at == u64::MAX) {
        return held.into_keys().collect();
    }
    // The latest summary holding each summary, itself included, then each event held.
    let index: BTreeSet<u64> = chain.iter().map(|l| l.seq).collect();
    let mut holder: BTreeMap<u64, u64> = BTreeMap::new();
    let mut latest_holder: BTreeMap<u64, u64> = BTreeMap::new();
    for link in chain.iter().rev() {
        let latest = holder.get(&link.seq).copied().unwrap_or(0).max(link.seq);
        for below in link.children.iter().chain(&link.supersedes) {
            let into = if index.contains(below) {
                &mut holder
            } else if held.contains_key(below) {
                &mut latest_holder
            } else {
                continue;
            };
            let slot = into.entry(*below).or_insert(latest);
            *slot = (*slot).max(latest);
        }
    }
    (held.into_iter())
        .filter(|(seq, at)| latest_holder.get(seq).is_none_or(|l| l < at))
        .map(|(seq, _)| seq)
        .collect()
}

/// The events (not summaries) the summaries of `chain` were made from that are `deleted` and
/// that neither summaries that stay hold (`held`) nor summaries a user deleted held (`cut`):
/// forgetting took them and every summary over them, once later summaries restated what they
/// gave (a node's label, with the node restated as an edge's end). Without them, a summary
/// made again took the node from a later event that named it without a label.
fn orphaned_by_forgetting(
    chain: &[SummaryLink],
    deleted: &BTreeSet<u64>,
    held: &BTreeSet<u64>,
    cut: &BTreeSet<u64>,
) -> BTreeSet<u64> {
    let summaries: BTreeSet<u64> = chain.iter().map(|l| l.seq).collect();
    (chain.iter())
        .flat_map(|l| &l.children)
        .filter(|c| !summaries.contains(c) && deleted.contains(c))
        .filter(|c| !held.contains(c) && !cut.contains(c))
        .copied()
        .collect()
}

/// The summaries `top` holds, itself included: through their children and the summaries
/// they replaced.
fn reach(index: &BTreeMap<u64, &SummaryLink>, top: u64) -> BTreeSet<u64> {
    let mut reached = BTreeSet::from([top]);
    let mut stack = vec![top];
    while let Some(seq) = stack.pop() {
        let Some(link) = index.get(&seq) else {
            continue;
        };
        for below in link.children.iter().chain(&link.supersedes) {
            if index.contains_key(below) && reached.insert(*below) {
                stack.push(*below);
            }
        }
    }
    reached
}

/// The events the summary `top` covers, through its children and the summaries it replaced
/// (less the events each made again on the way is without), and whether a summary on the way has a
/// child whose record a compaction replaced. Children and replaced summaries come before
/// their summary in the log, so the summaries reached are taken in log order.
fn coverage(index: &BTreeMap<u64, &SummaryLink>, top: u64) -> (BTreeSet<u64>, bool) {
    let reached = reach(index, top);
    let mut covers: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut cut_off = false;
    for seq in &reached {
        let link = index[seq];
        cut_off |= link.unknown_child;
        let mut set = BTreeSet::new();
        for c in &link.children {
            match covers.get(c) {
                Some(under) => set.extend(under.iter().copied()),
                None if !index.contains_key(c) => {
                    set.insert(*c);
                }
                None => {}
            }
        }
        if let Some(replaced) = link.supersedes.and_then(|s| covers.get(&s)) {
            set.extend(replaced.iter().copied());
        }
        set.retain(|s| !link.without.contains(s));
        covers.insert(*seq, set);
    }
    (covers.remove(&top).unwrap_or_default(), cut_off)
}

/// The consolidation policy `summary` was made in: days of the length its level and range
/// say (a week is [`ConsolidationPolicy::week_days`] days), or, for an episode, of the length
/// of a day summary of the chain. (The store's newest live day summary may be forgotten.)
fn policy_of(summary: &Summary, chain: &[SummaryLink]) -> ConsolidationPolicy {
    let policy = ConsolidationPolicy::default();
    let length = |start: i64, end: i64| end.saturating_sub(start).saturating_add(1);
    let day = match summary.level {
        Level::Day => Some(length(summary.start, summary.end)),
        Level::Week => Some(length(summary.start, summary.end) / policy.week_days),
        Level::Episode => chain
            .iter()
            .find(|l| l.level == Level::Day)
            .map(|l| length(l.start, l.end)),
    };
    match day.filter(|d| *d >= 1) {
        Some(day) => policy.with_day(day),
        None => policy,
    }
}

/// The summaries of `targets` to make again, grouped by level and range, episodes first, then
/// days, then weeks (so that a summary made again names its children made again), each level
/// in log order of its latest. Not one a newer live summary of its range outlives. (One the
/// user named is among them: [`Store::plans`] makes it again only for the forgotten events it
/// covers that the deletion leaves.)
fn groups_to_make_again(
    before: &State,
    targets: &BTreeMap<u64, i64>,
    chain: &[SummaryLink],
) -> Vec<Group> {
    let live = |seq: u64| !before.deleted.contains(&seq) && !targets.contains_key(&seq);
    let mut by_range: BTreeMap<(Level, i64, i64), Vec<&SummaryLink>> = BTreeMap::new();
    for link in chain {
        let key = (link.level, link.start, link.end);
        by_range.entry(key).or_default().push(link);
    }
    let mut groups: Vec<(Level, Group)> = Vec::new();
    for ((level, _, _), links) in &by_range {
        let members: Vec<u64> = links
            .iter()
            .map(|l| l.seq)
            .filter(|s| targets.contains_key(s) && !before.deleted.contains(s))
            .collect();
        let Some(&latest) = members.iter().max() else {
            continue;
        };
        if !links.iter().any(|l| l.seq > latest && live(l.seq)) {
            groups.push((
                *level,
                Group {
                    latest,
                    members,
                    revives: Vec::new(),
                },
            ));
        }
    }
    groups.sort_by_key(|(level, g)| (*level, g.latest));
    groups.into_iter().map(|(_, g)| g).collect()
}

/// What a summary made again restates of `restated`: no node `nodes` names, no node or edge
/// only deleted events upserted (`seed_only` of its subject), no edge without both its ends
/// (among `restated`'s nodes kept and `kept_before`), and no value only deleted events gave.
fn kept_of(
    restated: Vec<Assertion>,
    nodes: &[String],
    seed_only: &dyn Fn(&str) -> bool,
    kept_before: &BTreeSet<String>,
) -> Vec<Assertion> {
    let named = |key: &str| nodes.iter().any(|k| k == key);
    let mut kept_nodes = kept_before.clone();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamics::consolidate::Level;

    /// Note 1, its episode 2 and day 3, and week 4, which a user's deletion numbered 5 took;
    /// then `later`, summaries written after it.
    fn a_week_deleted_at_five(later: Vec<SummaryLink>) -> BTreeSet<u64> {
        let mut chain = vec![
            SummaryLink::of(2, Level::Episode, &[1]),
            SummaryLink::of(3, Level::Day, &[2]),
            SummaryLink::of(4, Level::Week, &[3]),
        ];
        chain.extend(later);
        gist_taken(&chain, |seq| (seq == 4).then_some(5))
    }

    /// A note under a summary a user deleted is its gist, unless a summary written after the
    /// deletion holds it: directly (an episode made again over it), or through the older
    /// summaries it lists (the next consolidation's week lists the old day: helper-143).
    #[test]
    fn a_note_a_summary_written_after_the_deletion_holds_is_not_its_gist() {
        assert_eq!(a_week_deleted_at_five(vec![]), BTreeSet::from([1]));
        let episode_again = SummaryLink::of(6, Level::Episode, &[1]);
        assert!(a_week_deleted_at_five(vec![episode_again]).is_empty());
        let week_over_the_old_day = SummaryLink::of(6, Level::Week, &[3]);
        assert!(a_week_deleted_at_five(vec![week_over_the_old_day]).is_empty());
    }
}
