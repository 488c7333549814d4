//! The places a user's deletion makes again. `emerge` writes its places and villages as
//! `PLACES` events made from sightings, as a summary is made from its period's events, and
//! kept, a `PLACES` event went on making a place whose every sighting a user had deleted; and
//! a place deleted by its key took the whole event, every place and village in it. A deletion
//! that takes a sighting, an event at a block (an interaction a place may rest on) or a
//! `PLACES` event therefore takes every live `PLACES` event and writes one in their place, in
//! its commit: the places and villages that emerge from the events left (under the policy the
//! latest was written with) and that the store held, with what later events gave them and the
//! edges live events link them by. A place the request names by its key is not made again,
//! and its sightings go with it (`deletion::names_node`).

use std::collections::{BTreeMap, BTreeSet};

use super::{State, Store};
use crate::dynamics::places::{self, EmergePolicy, PLACES, SIGHTING};
use crate::error::Result;
use crate::model::{labels, relations, Assertion, EdgeUpsert, Event, EventDraft, NodeUpsert};
use crate::DeleteRequest;

/// The `PLACES` events a deletion takes, to be made again.
pub(super) struct PlacesTaken {
    /// Their records, in log order.
    events: Vec<Event>,
    /// The policy the latest was written with.
    policy: EmergePolicy,
    /// The first `PLACES` event these stand for (one made again records the first of those
    /// it replaced): what later events gave the places is read from there on.
    since: u64,
    /// The events users' deletions took before this one.
    by_user: BTreeSet<u64>,
}

impl PlacesTaken {
    pub(super) fn takes(&self, seq: u64) -> bool {
        // `events` is in log order.
        self.events.binary_search_by_key(&seq, |e| e.seq).is_ok()
    }
}

/// Whether deleting `ev` may change what emerges or what the places made again restate: a
/// sighting, a `PLACES` event, an event anchored at a block, or one asserting something of an
/// emerged place (an edge to one, which the places made again restated, rests on them).
fn bears_on_places(ev: &Event) -> bool {
    let emerged = |key: &str| key.starts_with(places::PLACE_KEY_PREFIX);
    ev.kind == SIGHTING
        || ev.kind == PLACES
        || block_of(ev).is_some()
        || ev.assertions.iter().any(|a| match a {
            Assertion::UpsertNode(up) => emerged(&up.key),
            Assertion::UpsertEdge(up) => emerged(&up.from) || emerged(&up.to),
            Assertion::RetractNode { key } => emerged(key),
            Assertion::RetractEdge { from, to, .. } => emerged(from) || emerged(to),
        })
}

fn block_of(ev: &Event) -> Option<[i32; 3]> {
    ev.anchor.and_then(|a| a.block)
}

impl Store {
    /// Adds every live `PLACES` event to `targets`, and every one forgetting took to `gone`
    /// (the summaries holding it, which restate its places, are taken with it), where one of
    /// them, or of the forgotten events the deletion reaches (`gone`), bears on places; `None`
    /// where none does, or the log has no `PLACES` event left.
    pub(super) fn take_places_of(
        &self,
        targets: &mut BTreeMap<u64, i64>,
        gone: &mut BTreeMap<u64, i64>,
    ) -> Result<Option<PlacesTaken>> {
        let mut bears = false;
        for seq in targets.keys().chain(gone.keys()) {
            if self.raw_event(*seq)?.is_some_and(|ev| bears_on_places(&ev)) {
                bears = true;
                break;
            }
        }
        if !bears {
            return Ok(None);
        }
        let live = self.events_of_kind(PLACES)?;
        let (by_user, forgotten) = self.deleted_by_reason()?;
        let faded = self.forgotten_of_kind(forgotten.difference(&by_user).copied(), PLACES)?;
        targets.extend(live.iter().map(|e| (e.seq, e.ts)));
        gone.extend(faded.iter().map(|e| (e.seq, e.ts)));
        let mut events: Vec<Event> = live.into_iter().chain(faded).collect();
        events.sort_by_key(|e| e.seq);
        let Some(latest) = events.last() else {
            return Ok(None);
        };
        let policy = places::policy_of(latest);
        let since = (events.iter())
            .map(|e| places::since_of(e).unwrap_or(e.seq))
            .min()
            .unwrap_or(0);
        Ok(Some(PlacesTaken {
            events,
            policy,
            since,
            by_user,
        }))
    }

    /// The events among `forgotten` (in log order) of kind `kind`, found in one pass over the
    /// log that decodes only theirs: they are out of the kind's index, and a lookup and a
    /// decoding of each had been a third of a deletion's time on a store forgetting had
    /// thinned (272k records on `cx`, 2 s).
    fn forgotten_of_kind(
        &self,
        forgotten: impl Iterator<Item = u64>,
        kind: &str,
    ) -> Result<Vec<Event>> {
        let forgotten: BTreeSet<u64> = forgotten.collect();
        let mut found = Vec::new();
        let (Some(&first), Some(&last)) = (forgotten.first(), forgotten.last()) else {
            return Ok(found);
        };
        let log = super::Table::Log.name();
        super::log::scan(&*self.backend, first, &mut |seq, v| {
            if forgotten.contains(&seq) && crate::codec::peek_event_kind(log, v)?.1 == kind {
                found.push(crate::codec::decode_event(log, v)?);
            }
            Ok(seq < last)
        })?;
        Ok(found)
    }

    /// The `PLACES` event made again as event `seq` at world time `ts`, onto `replayed` (the
    /// log without the deleted events, the deletion's appended), or `None` when it would
    /// hold nothing. It holds what the events taken asserted and the store held (`before`):
    /// not a place the request names, nor one at a block an event deleted now was at (a
    /// sighting, an interaction) that the events left do not make under the policy; a village
    /// as it was while no member went, else its members clustered again (the largest
    /// cluster keeps its key, and its radius is measured over them; another is a village found
    /// anew, as `emerge` keys it).
    /// Forgetting takes no place: a forgotten sighting still counts.
    pub(super) fn places_made_again(
        &self,
        taken: &PlacesTaken,
        (before, replayed): (&State, &State),
        deleted_now: &BTreeSet<u64>,
        request: &DeleteRequest,
        (seq, ts): (u64, i64),
    ) -> Result<Option<Event>> {
        let (mut nodes, located) = asserted_by(&taken.events);
        nodes.retain(|key, _| before.node_id(key).is_some());
        let mut dropped: BTreeSet<String> = (request.nodes.iter())
            .filter(|k| nodes.contains_key(*k))
            .cloned()
            .collect();
        let read = self.read_for_places(&nodes, (&before.deleted, deleted_now), taken)?;
        dropped.extend(read.unmade);
        let is_village = |key: &str| key.starts_with(places::VILLAGE_KEY_PREFIX);
        let mut edges: Vec<(String, String)> = Vec::new();
        let mut found: Vec<NodeUpsert> = Vec::new();
        let mut radii: Vec<(String, f64)> = Vec::new();
        for village in nodes.keys().filter(|k| is_village(k)) {
            let members: Vec<&String> = (located.iter())
                .filter(|(_, v)| v == village)
                .map(|(m, _)| m)
                .collect();
            if dropped.contains(village) || members.iter().all(|m| dropped.contains(*m)) {
                dropped.insert(village.clone());
                continue;
            }
            if !members.iter().any(|m| dropped.contains(*m)) {
                edges.extend(members.iter().map(|m| ((*m).clone(), village.clone())));
                continue;
            }
            // Members went: those left clustered again.
            let left: Vec<places::Candidate> = (members.iter())
                .filter(|m| !dropped.contains(**m))
                .filter_map(|m| nodes.get(*m))
                .filter_map(candidate_of)
                .collect();
            let mut clusters = places::villages(&left.iter().collect::<Vec<_>>(), &taken.policy);
            clusters.sort_by(|a, b| {
                (b.members.len(), a.members.first()).cmp(&(a.members.len(), b.members.first()))
            });
            let mut clusters = clusters.into_iter();
            match clusters.next() {
                Some(kept) => {
                    edges.extend(kept.members.iter().map(|m| (m.clone(), village.clone())));
                    // Its radius holds the members left, around the centre its key names.
                    radii.extend(
                        places::radius_of(village, &kept.members).map(|r| (village.clone(), r)),
                    );
                }
                None => {
                    dropped.insert(village.clone());
                }
            }
            for other in clusters {
                let up = places::village_upsert(&other);
                if nodes.contains_key(&up.key) {
                    continue;
                }
                edges.extend(other.members.iter().map(|m| (m.clone(), up.key.clone())));
                found.push(up);
            }
        }
        for (village, radius) in radii {
            if let Some(up) = nodes.get_mut(&village) {
                up.props
                    .insert("radius".to_string(), crate::model::Value::Float(radius));
            }
        }
        nodes.retain(|key, _| !dropped.contains(key));
        nodes.extend(found.into_iter().map(|up| (up.key.clone(), up)));
        if nodes.is_empty() {
            return Ok(None);
        }
        let keys: BTreeSet<String> = nodes.keys().cloned().collect();
        let later = read.later;
        let mut assertions: Vec<Assertion> = (nodes.into_values())
            .map(|up| Assertion::UpsertNode(restated(up, replayed, &later)))
            .collect();
        assertions.extend(
            (edges.iter())
                .filter(|(m, v)| keys.contains(m) && keys.contains(v))
                .map(|(m, v)| places::located_in(m, v)),
        );
        assertions.extend(later.edges_lost(&keys, before, replayed));
        let mut draft = EventDraft::new(ts, "loci", PLACES);
        draft.payload = places::places_payload(&taken.policy, Some(taken.since));
        draft.salience = Some(0.5);
        draft.assertions = assertions;
        Ok(Some(Event::from_draft(seq, super::now_ms(), draft)))
    }

    /// What one read of the log (deleted records too) says of the places of `nodes`:
    ///
    /// - those at a block an event deleted now was at (a sighting, an interaction) that the
    ///   events left no longer make, sightings and interactions counted over the whole log,
    ///   forgotten ones too, less what users deleted (before and now);
    /// - what the events live after it (`deleted`: before the deletion, and now) assert of
    ///   them from the first `PLACES` event taken stands for on: edges at them, and pins.
    fn read_for_places(
        &self,
        nodes: &BTreeMap<String, NodeUpsert>,
        (deleted_before, deleted_now): (&BTreeSet<u64>, &BTreeSet<u64>),
        taken: &PlacesTaken,
    ) -> Result<PlacesRead> {
        let mut blocks: BTreeSet<[i32; 3]> = BTreeSet::new();
        for seq in deleted_now.iter().filter(|s| !taken.takes(**s)) {
            blocks.extend(self.raw_event(*seq)?.as_ref().and_then(block_of));
        }
        // Places sightings made, whose keys name their blocks: a village is at its members'
        // centroid, which may be the block of a member a deletion takes, and is made from
        // its members, not its block's sightings.
        let at: Vec<(&String, [i32; 3], &str)> = (nodes.iter())
            .filter(|(key, _)| places::place_block(key).is_some())
            .filter_map(|(key, up)| {
                let block = up.anchor.and_then(|a| a.block)?;
                Some((key, block, object_of(up)?))
            })
            .filter(|(_, block, _)| blocks.contains(block))
            .collect();
        let by_user = |seq: u64| taken.by_user.contains(&seq) || deleted_now.contains(&seq);
        let live = |seq: u64| !deleted_before.contains(&seq) && !deleted_now.contains(&seq);
        let mut sightings: BTreeMap<(String, [i32; 3]), usize> = BTreeMap::new();
        let mut interactions: BTreeMap<[i32; 3], usize> = BTreeMap::new();
        let mut later = LaterFacts::default();
        // From the first record when there are sightings to count, else from `since`.
        let from = if at.is_empty() { taken.since } else { 1 };
        self.scan_log_with_deleted(from, |ev| {
            if !at.is_empty() && !by_user(ev.seq) {
                if let Some((object, block)) = places::sighted(&ev) {
                    if blocks.contains(&block) {
                        *sightings.entry((object.to_string(), block)).or_default() += 1;
                    }
                } else if let Some(block) = block_of(&ev).filter(|b| blocks.contains(b)) {
                    if ev.kind != PLACES {
                        *interactions.entry(block).or_default() += 1;
                    }
                }
            }
            if ev.seq >= taken.since && live(ev.seq) && ev.kind != PLACES {
                later.take(&ev, nodes);
            }
            Ok(true)
        })?;
        let unmade = at
            .into_iter()
            .filter(|(_, block, object)| {
                let seen = sightings
                    .get(&(object.to_string(), *block))
                    .copied()
                    .unwrap_or(0);
                let used = interactions.get(block).copied().unwrap_or(0);
                !taken.policy.makes_place(seen, used)
            })
            .map(|(key, _, _)| key.clone())
            .collect();
        Ok(PlacesRead { unmade, later })
    }
}

/// What [`Store::read_for_places`] read.
struct PlacesRead {
    /// The places the events left no longer make.
    unmade: BTreeSet<String>,
    later: LaterFacts,
}

/// What `events` (`PLACES` events, in log order) asserted: each node's upsert, the later
/// ones' values over the earlier's, and the `LOCATED_IN` edges (member, village).
fn asserted_by(events: &[Event]) -> (BTreeMap<String, NodeUpsert>, BTreeSet<(String, String)>) {
    let mut nodes: BTreeMap<String, NodeUpsert> = BTreeMap::new();
    let mut located = BTreeSet::new();
    for a in events.iter().flat_map(|e| &e.assertions) {
        match a {
            Assertion::UpsertNode(up) => match nodes.get_mut(&up.key) {
                Some(was) => {
                    was.label = up.label.clone().or(was.label.take());
                    was.name = up.name.clone().or(was.name.take());
                    was.anchor = up.anchor.or(was.anchor);
                    was.pinned = up.pinned.or(was.pinned);
                    was.props.extend(up.props.clone());
                }
                None => {
                    nodes.insert(up.key.clone(), up.clone());
                }
            },
            Assertion::UpsertEdge(up) if up.relation == relations::LOCATED_IN => {
                located.insert((up.from.clone(), up.to.clone()));
            }
            _ => {}
        }
    }
    (nodes, located)
}

/// The object a place's upsert says it is (its `type`).
fn object_of(up: &NodeUpsert) -> Option<&str> {
    up.props.get("type").and_then(crate::model::Value::as_str)
}

/// A place's upsert as a candidate to cluster into villages.
fn candidate_of(up: &NodeUpsert) -> Option<places::Candidate> {
    let block = up.anchor.and_then(|a| a.block)?;
    Some(places::Candidate::made(object_of(up)?, block))
}

/// What live events after the `PLACES` events taken assert of the places made again.
#[derive(Default)]
struct LaterFacts {
    /// The edges at them, by keys.
    edges: BTreeSet<(String, String, String)>,
    /// The last pin or unpin of each.
    pinned: BTreeMap<String, bool>,
}

impl LaterFacts {
    /// Takes in what live event `ev` asserts of the nodes of `nodes`.
    fn take(&mut self, ev: &Event, nodes: &BTreeMap<String, NodeUpsert>) {
        for a in &ev.assertions {
            match a {
                Assertion::UpsertEdge(up)
                    if nodes.contains_key(&up.from) || nodes.contains_key(&up.to) =>
                {
                    self.edges
                        .insert((up.from.clone(), up.relation.clone(), up.to.clone()));
                }
                Assertion::UpsertNode(up) if nodes.contains_key(&up.key) => {
                    if let Some(p) = up.pinned {
                        self.pinned.insert(up.key.clone(), p);
                    }
                }
                _ => {}
            }
        }
    }

    /// The edges live events assert at the places `made` again that the store held and the
    /// replay without the `PLACES` events lost (an edge to a place not made yet when its
    /// event came is skipped), with the values the store held.
    fn edges_lost(
        &self,
        made: &BTreeSet<String>,
        before: &State,
        replayed: &State,
    ) -> Vec<Assertion> {
        // At a place made again, its other end one too or in the graph (not a place that
        // went: an edge to a node not there is no edge).
        let there = |key: &String| made.contains(key) || replayed.node_id(key).is_some();
        (self.edges.iter())
            .filter(|(f, _, t)| (made.contains(f) || made.contains(t)) && there(f) && there(t))
            .filter(|(f, r, t)| replayed.edge_by_keys(f, r, t).is_none())
            .filter_map(|(f, r, t)| before.edge_by_keys(f, r, t).map(|e| (f, t, e)))
            .map(|(from, to, e)| {
                Assertion::UpsertEdge(EdgeUpsert {
                    from: from.clone(),
                    relation: e.relation,
                    to: to.clone(),
                    confidence: Some(e.confidence),
                    props: e.props,
                    valid_from: e.valid_from,
                    valid_to: e.valid_to,
                    // As last seen by the events that asserted it, not at the deletion.
                    last_seen: Some(e.last_seen),
                })
            })
            .collect()
    }
}

/// `up` as the place made again restates it: where a live event after the `PLACES` events
/// made the node again in the replay without them, only what that left unset (the later
/// event's values stand, as they did after the place emerged); and pinned where a live pin
/// pins it (a pin makes no node in that replay, `projection::PIN_KINDS`, and was skipped).
fn restated(mut up: NodeUpsert, replayed: &State, later: &LaterFacts) -> NodeUpsert {
    let now = replayed.node_id(&up.key).and_then(|id| replayed.node(id));
    if let Some(n) = &now {
        if n.label != labels::ENTITY {
            up.label = None;
        }
        if n.name != n.key {
            up.name = None;
        }
        if n.anchor.is_some() {
            up.anchor = None;
        }
        up.props.retain(|k, _| !n.props.contains_key(k));
    }
    if later.pinned.get(&up.key) == Some(&true) && !now.is_some_and(|n| n.pinned) {
        up.pinned = Some(true);
    }
    up
}
