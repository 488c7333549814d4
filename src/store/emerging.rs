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
    /// Their sequence numbers.
    seqs: BTreeSet<u64>,
    /// The policy the latest was written with.
    policy: EmergePolicy,
}

impl PlacesTaken {
    pub(super) fn takes(&self, seq: u64) -> bool {
        self.seqs.contains(&seq)
    }
}

/// Whether deleting `ev` may change what emerges or what the places made again restate: a
/// sighting, a `PLACES` event, an event anchored at a block, or one asserting something of an
/// emerged place (an edge to one, which the places made again restated, rests on them).
fn bears_on_places(ev: &Event) -> bool {
    let emerged = |key: &str| key.starts_with(places::PLACE_KEY_PREFIX);
    ev.kind == SIGHTING
        || ev.kind == PLACES
        || ev.anchor.is_some_and(|a| a.block.is_some())
        || ev.assertions.iter().any(|a| match a {
            Assertion::UpsertNode(up) => emerged(&up.key),
            Assertion::UpsertEdge(up) => emerged(&up.from) || emerged(&up.to),
            Assertion::RetractNode { key } => emerged(key),
            Assertion::RetractEdge { from, to, .. } => emerged(from) || emerged(to),
        })
}

impl Store {
    /// Adds every live `PLACES` event to `targets` where one of them bears on places; `None`
    /// where none does, or the log has no `PLACES` event.
    pub(super) fn take_places_of(
        &self,
        targets: &mut BTreeMap<u64, i64>,
    ) -> Result<Option<PlacesTaken>> {
        let mut bears = false;
        for seq in targets.keys() {
            if self.raw_event(*seq)?.is_some_and(|ev| bears_on_places(&ev)) {
                bears = true;
                break;
            }
        }
        if !bears {
            return Ok(None);
        }
        let live = self.events_of_kind(PLACES)?;
        let Some(latest) = live.iter().max_by_key(|e| e.seq) else {
            return Ok(None);
        };
        let policy = places::policy_of(latest);
        targets.extend(live.iter().map(|e| (e.seq, e.ts)));
        Ok(Some(PlacesTaken {
            seqs: live.iter().map(|e| e.seq).collect(),
            policy,
        }))
    }

    /// The `PLACES` event made again as event `seq` at world time `ts`, onto `replayed` (the
    /// log without `deleted`, the deletion's events appended): `None` when nothing the store
    /// held (`before`) emerges from the events left.
    pub(super) fn places_made_again(
        &self,
        taken: &PlacesTaken,
        (before, replayed): (&State, &State),
        deleted: &BTreeSet<u64>,
        request: &DeleteRequest,
        (seq, ts): (u64, i64),
    ) -> Result<Option<Event>> {
        let candidates = places::candidates(self, deleted)?;
        let named = |key: &str| request.nodes.iter().any(|k| k == key);
        // Not one the store did not hold (retracted since, or not emerged yet: `emerge`'s to
        // make), nor one the request names.
        let emerged: Vec<&places::Candidate> = places::emerged(&candidates, &taken.policy)
            .into_iter()
            .filter(|c| !named(&c.key()) && before.node_id(&c.key()).is_some())
            .collect();
        let mut made: Vec<NodeUpsert> = emerged.iter().map(|c| places::place_upsert(c)).collect();
        let mut located = Vec::new();
        let villages_of = villages_of_members(before);
        for village in places::villages(&emerged, &taken.policy) {
            // The village as the store held it: the one its members were located in (the
            // least key, should they be in two). A village not made before is `emerge`'s.
            let Some(key) = (village.members.iter())
                .filter_map(|m| villages_of.get(m))
                .flatten()
                .min()
                .filter(|k| !named(k))
            else {
                continue;
            };
            let Some(node) = before.node_id(key).and_then(|id| before.node(id)) else {
                continue;
            };
            made.push(NodeUpsert {
                key: key.clone(),
                label: Some(node.label.clone()),
                name: Some(node.name.clone()),
                props: node.props.clone(),
                anchor: node.anchor,
                ..NodeUpsert::default()
            });
            for member in &village.members {
                if villages_of.get(member).is_some_and(|v| v.contains(key)) {
                    located.push(Assertion::UpsertEdge(EdgeUpsert {
                        from: member.clone(),
                        relation: relations::LOCATED_IN.to_string(),
                        to: key.clone(),
                        ..EdgeUpsert::default()
                    }));
                }
            }
        }
        if made.is_empty() {
            return Ok(None);
        }
        let keys: BTreeSet<String> = made.iter().map(|up| up.key.clone()).collect();
        let later = self.later_facts(&keys, deleted, taken)?;
        let mut assertions: Vec<Assertion> = made
            .into_iter()
            .map(|up| Assertion::UpsertNode(restated(up, replayed, &later)))
            .collect();
        assertions.extend(located);
        assertions.extend(later.edges_lost(before, replayed));
        let mut draft = EventDraft::new(ts, "loci", PLACES);
        draft.payload = places::places_payload(&taken.policy);
        draft.salience = Some(0.5);
        draft.assertions = assertions;
        Ok(Some(Event::from_draft(seq, super::now_ms(), draft)))
    }

    /// What the live events after the first `PLACES` event taken assert of the places `keys`:
    /// the edges at them, and their pins.
    fn later_facts(
        &self,
        keys: &BTreeSet<String>,
        deleted: &BTreeSet<u64>,
        taken: &PlacesTaken,
    ) -> Result<LaterFacts> {
        let mut later = LaterFacts::default();
        let Some(&first) = taken.seqs.iter().next() else {
            return Ok(later);
        };
        self.scan_log(first, |ev| {
            if deleted.contains(&ev.seq) {
                return Ok(true);
            }
            for a in &ev.assertions {
                match a {
                    Assertion::UpsertEdge(up)
                        if keys.contains(&up.from) || keys.contains(&up.to) =>
                    {
                        later
                            .edges
                            .insert((up.from.clone(), up.relation.clone(), up.to.clone()));
                    }
                    Assertion::UpsertNode(up) if keys.contains(&up.key) => {
                        if let Some(p) = up.pinned {
                            later.pinned.insert(up.key.clone(), p);
                        }
                    }
                    _ => {}
                }
            }
            Ok(true)
        })?;
        Ok(later)
    }
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
    /// The edges live events assert at the places that the store held and the replay
    /// without the `PLACES` events lost (an edge to a place not made yet when its event came
    /// is skipped), with the values the store held.
    fn edges_lost(&self, before: &State, replayed: &State) -> Vec<Assertion> {
        (self.edges.iter())
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

/// Each emerged place's villages in `state`: the `seen:village:` nodes it is located in.
fn villages_of_members(state: &State) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in state.all_edges() {
        if e.relation != relations::LOCATED_IN {
            continue;
        }
        let (Some(from), Some(to)) = (state.nodes.key(e.from), state.nodes.key(e.to)) else {
            continue;
        };
        if to.starts_with("seen:village:") {
            out.entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
    }
    out
}
