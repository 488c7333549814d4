//! Places that emerge from sightings.
//!
//! An agent does not get its places handed to it: it sees a bed here, a chest there. A
//! `SIGHTING` event (payload `{"object": "bed" | "chest" | "workstation" | "ore" | "portal" |
//! "villager", "name"?: ...}` and an anchor with the exact block) makes a place *candidate* at
//! that block; the candidate becomes a Place node after a second sighting, or after one
//! sighting and an interaction there (any other event anchored at the same block: sleeping in
//! the bed, opening the chest). A villager becomes an NPC node the same way.
//!
//! Villages are inferred: emerged beds and workstations closer than
//! [`EmergePolicy::link_distance`] blocks (horizontally) to one another form clusters (single
//! linkage), and a cluster with at least [`EmergePolicy::min_beds`] beds and one workstation
//! becomes a Village node at its centroid, with its radius (from that point, the key's, to the
//! furthest member), and `LOCATED_IN` edges from its members. A cluster that holds a member of
//! a village made before is that village (it grew, or its centroid moved): its new members are
//! located in it, its radius takes them in, and no second village is made.
//!
//! [`emerge`] writes what is new as one `PLACES` event, so it is replayed like everything
//! else; running it again with no new sightings writes nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::{
    labels, relations, Anchor, Assertion, EdgeUpsert, EventDraft, NodeUpsert, Value,
};
use crate::store::Store;

/// Kind of a sighting event.
pub const SIGHTING: &str = "SIGHTING";
/// Kind of the event that records emerged places.
pub const PLACES: &str = "PLACES";

/// Thresholds of emergence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmergePolicy {
    /// Sightings that make a place (an interaction stands in for one).
    pub sightings: usize,
    /// Beds and workstations closer than this (blocks, horizontally) belong together.
    pub link_distance: f64,
    /// Beds a cluster needs to be a village (and one workstation).
    pub min_beds: usize,
}

impl EmergePolicy {
    /// Whether an object seen `sightings` times at a block, with `interactions` other events
    /// there, becomes a place: an interaction stands in for one sighting, and a place is
    /// seen at least once.
    pub(crate) fn makes_place(&self, sightings: usize, interactions: usize) -> bool {
        sightings > 0 && sightings + interactions.min(1) >= self.sightings
    }
}

impl Default for EmergePolicy {
    fn default() -> Self {
        EmergePolicy {
            sightings: 2,
            link_distance: 24.0,
            min_beds: 2,
        }
    }
}

/// What [`emerge`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EmergeReport {
    pub candidates: usize,
    pub places: usize,
    pub villages: usize,
    /// Sequence number of the `PLACES` event (0 when nothing new emerged).
    pub seq: u64,
}

/// A place candidate: an object seen at one block.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    object: String,
    name: Option<String>,
    block: [i32; 3],
    sightings: usize,
    interactions: usize,
}

impl Candidate {
    /// The key of the node it becomes.
    pub(crate) fn key(&self) -> String {
        place_key(&self.object, self.block)
    }

    /// A place already made, as a candidate for clustering again.
    pub(crate) fn made(object: &str, block: [i32; 3]) -> Candidate {
        Candidate {
            object: object.to_string(),
            name: None,
            block,
            sightings: 0,
            interactions: 0,
        }
    }
}

/// The key of the node a candidate becomes.
pub fn place_key(object: &str, block: [i32; 3]) -> String {
    format!(
        "{PLACE_KEY_PREFIX}{object}:{}:{}:{}",
        block[0], block[1], block[2]
    )
}

/// How the key of every node `emerge` makes begins (villages too).
pub const PLACE_KEY_PREFIX: &str = "seen:";

fn anchor_of(block: [i32; 3]) -> Anchor {
    Anchor {
        cx: block[0].div_euclid(16),
        cz: block[2].div_euclid(16),
        block: Some(block),
    }
}

/// The place a `SIGHTING` event sees: its object and block, where it has both.
pub(crate) fn sighted(ev: &crate::model::Event) -> Option<(&str, [i32; 3])> {
    let block = ev.anchor.and_then(|a| a.block)?;
    let Value::Map(m) = &ev.payload else {
        return None;
    };
    let object = m.get("object").and_then(Value::as_str)?;
    (ev.kind == SIGHTING).then_some((object, block))
}

/// The candidates of the log's sightings, with the interactions at their blocks, in key
/// order.
fn candidates(store: &Store) -> Result<Vec<Candidate>> {
    let mut candidates: BTreeMap<(String, [i32; 3]), Candidate> = BTreeMap::new();
    for ev in store.events_of_kind(SIGHTING)? {
        let Some((object, block)) = sighted(&ev) else {
            continue;
        };
        let c = candidates
            .entry((object.to_string(), block))
            .or_insert_with(|| Candidate {
                object: object.to_string(),
                name: None,
                block,
                sightings: 0,
                interactions: 0,
            });
        c.sightings += 1;
        if c.name.is_none() {
            c.name = match &ev.payload {
                Value::Map(m) => m.get("name").and_then(Value::as_str).map(str::to_string),
                _ => None,
            };
        }
    }
    // Interactions: any other event anchored at a candidate's block. With no candidate there
    // is none to count, and this pass over the log is spared.
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let blocks: BTreeSet<[i32; 3]> = candidates.keys().map(|k| k.1).collect();
    store.scan_log(1, |ev| {
        if ev.kind != SIGHTING && ev.kind != PLACES {
            if let Some(b) = ev
                .anchor
                .and_then(|a| a.block)
                .filter(|b| blocks.contains(b))
            {
                for c in candidates.values_mut().filter(|c| c.block == b) {
                    c.interactions += 1;
                }
            }
        }
        Ok(true)
    })?;
    Ok(candidates.into_values().collect())
}

/// The upsert of the node a candidate becomes.
fn place_upsert(c: &Candidate) -> NodeUpsert {
    let label = if c.object == "villager" {
        labels::NPC
    } else {
        labels::PLACE
    };
    let mut props = BTreeMap::new();
    props.insert("type".to_string(), Value::from(c.object.as_str()));
    NodeUpsert {
        key: c.key(),
        label: Some(label.to_string()),
        name: Some(c.name.clone().unwrap_or_else(|| {
            format!(
                "{} at {} {} {}",
                c.object, c.block[0], c.block[1], c.block[2]
            )
        })),
        props,
        anchor: Some(anchor_of(c.block)),
        ..NodeUpsert::default()
    }
}

/// The policy a `PLACES` event was written under, as its payload records it (the default's
/// before it did).
pub(crate) fn policy_of(ev: &crate::model::Event) -> EmergePolicy {
    let Value::Map(m) = &ev.payload else {
        return EmergePolicy::default();
    };
    m.get(POLICY)
        .and_then(|v| serde_json::to_value(v).ok())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// The payload key of the policy a `PLACES` event was written under.
const POLICY: &str = "policy";
/// The payload key of the first `PLACES` event one made again stands for.
const SINCE: &str = "since";

/// The first `PLACES` event one made again by a deletion stands for.
pub(crate) fn since_of(ev: &crate::model::Event) -> Option<u64> {
    let Value::Map(m) = &ev.payload else {
        return None;
    };
    m.get(SINCE)
        .and_then(Value::as_i64)
        .and_then(|s| u64::try_from(s).ok())
}

/// A `PLACES` event's payload: the policy it was written under, for a deletion that makes it
/// again, and for one made again, the first `PLACES` event it stands for.
pub(crate) fn places_payload(policy: &EmergePolicy, since: Option<u64>) -> Value {
    let policy = serde_json::to_value(policy)
        .and_then(serde_json::from_value::<Value>)
        .unwrap_or(Value::Null);
    let mut payload = crate::model::Props::from([(POLICY.to_string(), policy)]);
    if let Some(since) = since.and_then(|s| i64::try_from(s).ok()) {
        payload.insert(SINCE.to_string(), Value::Int(since));
    }
    Value::Map(payload)
}

/// Turns sightings into places and villages (see the module documentation).
pub fn emerge(store: &Store, policy: &EmergePolicy) -> Result<EmergeReport> {
    let candidates = candidates(store)?;
    let mut report = EmergeReport {
        candidates: candidates.len(),
        ..EmergeReport::default()
    };
    let emerged: Vec<&Candidate> = (candidates.iter())
        .filter(|c| policy.makes_place(c.sightings, c.interactions))
        .collect();
    let mut assertions = Vec::new();
    for c in &emerged {
        if store.node_by_key(&c.key()).is_some() {
            continue;
        }
        assertions.push(Assertion::UpsertNode(place_upsert(c)));
        report.places += 1;
    }
    for village in villages(&emerged, policy) {
        if let Some((key, known)) = village_of(store, &village.members) {
            // The village as it was found before, keyed by its first centroid: what joined it
            // since is located in it.
            let joined: Vec<&String> = (village.members.iter())
                .filter(|m| !known.contains(*m))
                .collect();
            for member in &joined {
                assertions.push(located_in(member, &key));
            }
            // Its radius takes in the members that joined it (with none, nothing is written).
            if joined.is_empty() {
                continue;
            }
            let held = store
                .node_by_key(&key)
                .and_then(|n| n.props.get("radius").and_then(Value::as_f64));
            let radius = radius_of(&key, known.iter().chain(joined));
            if let Some(radius) = radius.filter(|r| held != Some(*r)) {
                let mut props = BTreeMap::new();
                props.insert("radius".to_string(), Value::Float(radius));
                assertions.push(Assertion::UpsertNode(NodeUpsert {
                    key,
                    props,
                    ..NodeUpsert::default()
                }));
            }
            continue;
        }
        let up = village_upsert(&village);
        if store.node_by_key(&up.key).is_some() {
            continue;
        }
        let key = up.key.clone();
        assertions.push(Assertion::UpsertNode(up));
        for member in &village.members {
            assertions.push(located_in(member, &key));
        }
        report.villages += 1;
    }
    if assertions.is_empty() {
        return Ok(report);
    }
    let ts = store.latest_event_time()?.unwrap_or(0);
    let mut draft = EventDraft::new(ts, "loci", PLACES);
    draft.payload = places_payload(policy, None);
    draft.assertions = assertions;
    draft.salience = Some(0.5);
    report.seq = store.ingest(vec![draft])?.last_seq;
    Ok(report)
}

/// A village's radius: the horizontal distance from its centre to the furthest of its
/// members' `blocks`, to a tenth of a block. The centre is the one its key names, so the
/// radius holds the village as members join it and go (its centroid would move, its key does
/// not).
pub(crate) fn radius_around(centre: [i32; 2], blocks: impl IntoIterator<Item = [i32; 3]>) -> f64 {
    let furthest = blocks
        .into_iter()
        .map(|b| {
            // In f64: two blocks at the ends of the i32 range are further apart than an i32 holds.
            let dx = b[0] as f64 - centre[0] as f64;
            let dz = b[2] as f64 - centre[1] as f64;
            (dx * dx + dz * dz).sqrt()
        })
        .fold(0.0, f64::max);
    (furthest * 10.0).round() / 10.0
}

/// The centre a village's key names (`seen:village:{x}:{z}`).
pub(crate) fn village_centre(key: &str) -> Option<[i32; 2]> {
    let (x, z) = key.strip_prefix(VILLAGE_KEY_PREFIX)?.split_once(':')?;
    Some([x.parse().ok()?, z.parse().ok()?])
}

/// The block a place's key names (`seen:{object}:{x}:{y}:{z}`; the object may hold a colon).
pub(crate) fn place_block(key: &str) -> Option<[i32; 3]> {
    let mut parts = key.strip_prefix(PLACE_KEY_PREFIX)?.rsplitn(4, ':');
    let z = parts.next()?.parse().ok()?;
    let y = parts.next()?.parse().ok()?;
    let x = parts.next()?.parse().ok()?;
    parts.next()?;
    Some([x, y, z])
}

/// The radius of the village keyed `village` over its `members` (place keys; one whose key
/// names no block is passed by), or `None` when its key names no centre.
pub(crate) fn radius_of<'m>(
    village: &str,
    members: impl IntoIterator<Item = &'m String>,
) -> Option<f64> {
    let blocks = members.into_iter().filter_map(|m| place_block(m));
    Some(radius_around(village_centre(village)?, blocks))
}

/// The upsert of the node a village found anew becomes, keyed by its centroid.
pub(crate) fn village_upsert(village: &Village) -> NodeUpsert {
    let mut props = BTreeMap::new();
    props.insert("type".to_string(), Value::from("village"));
    props.insert("radius".to_string(), Value::Float(village.radius));
    NodeUpsert {
        key: format!(
            "{VILLAGE_KEY_PREFIX}{}:{}",
            village.centre[0], village.centre[1]
        ),
        label: Some(labels::PLACE.to_string()),
        name: Some(format!(
            "village at {} {}",
            village.centre[0], village.centre[1]
        )),
        props,
        // At its centroid's block (it had only the chunk, and a query of places' block
        // coordinates gave a village none: helper-147).
        anchor: Some(Anchor {
            cx: village.centre[0].div_euclid(16),
            cz: village.centre[1].div_euclid(16),
            block: Some([village.centre[0], village.height, village.centre[1]]),
        }),
        ..NodeUpsert::default()
    }
}

/// How a village's key begins.
pub const VILLAGE_KEY_PREFIX: &str = "seen:village:";

pub(crate) fn located_in(member: &str, village: &str) -> Assertion {
    Assertion::UpsertEdge(EdgeUpsert {
        from: member.to_string(),
        relation: relations::LOCATED_IN.to_string(),
        to: village.to_string(),
        ..EdgeUpsert::default()
    })
}

/// The village made before that one of `members` is located in (the least key, should they
/// be in two), with the keys of the places located in it.
fn village_of(store: &Store, members: &[String]) -> Option<(String, BTreeSet<String>)> {
    let g = store.graph();
    let located_in = g.relation_id(relations::LOCATED_IN)?;
    let is_village = |key: &str| key.starts_with(VILLAGE_KEY_PREFIX);
    let village = members
        .iter()
        .filter_map(|m| g.node_id(m))
        .flat_map(|m| {
            g.edges_of(m)
                .filter_map(|e| g.edge_core(e))
                .filter(move |c| c.from == m && c.relation == located_in)
                .filter_map(|c| g.node_key(c.to).map(str::to_string))
        })
        .filter(|key| is_village(key))
        .min()?;
    let id = g.node_id(&village)?;
    let known = g
        .edges_of(id)
        .filter_map(|e| g.edge_core(e))
        .filter(|c| c.to == id && c.relation == located_in)
        .filter_map(|c| g.node_key(c.from).map(str::to_string))
        .collect();
    Some((village, known))
}

/// A village found by clustering.
pub(crate) struct Village {
    /// The members' centroid, x and z: what the village is keyed by.
    centre: [i32; 2],
    /// The members' mean height: the y of the village's block.
    height: i32,
    radius: f64,
    pub(crate) members: Vec<String>,
}

/// Single-linkage clusters of emerged beds and workstations that hold enough of both.
pub(crate) fn villages(emerged: &[&Candidate], policy: &EmergePolicy) -> Vec<Village> {
    let parts: Vec<&&Candidate> = emerged
        .iter()
        .filter(|c| c.object == "bed" || c.object == "workstation")
        .collect();
    let n = parts.len();
    // Union-find over pairs closer than the link distance (n is small: places one agent saw).
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    // In f64: two blocks at the ends of the i32 range are further apart than an i32 holds.
    let dist = |a: &Candidate, b: &Candidate| {
        let dx = a.block[0] as f64 - b.block[0] as f64;
        let dz = a.block[2] as f64 - b.block[2] as f64;
        (dx * dx + dz * dz).sqrt()
    };
    for i in 0..n {
        for j in i + 1..n {
            if dist(parts[i], parts[j]) <= policy.link_distance {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut clusters: BTreeMap<usize, Vec<&Candidate>> = BTreeMap::new();
    for (i, part) in parts.iter().enumerate() {
        let r = root(&mut parent, i);
        clusters.entry(r).or_default().push(part);
    }
    clusters
        .into_values()
        .filter(|members| {
            members.iter().filter(|c| c.object == "bed").count() >= policy.min_beds
                && members.iter().any(|c| c.object == "workstation")
        })
        .map(|members| {
            let k = members.len() as f64;
            let cx = members.iter().map(|c| c.block[0] as f64).sum::<f64>() / k;
            let cz = members.iter().map(|c| c.block[2] as f64).sum::<f64>() / k;
            let cy = members.iter().map(|c| c.block[1] as f64).sum::<f64>() / k;
            let centre = [cx.round() as i32, cz.round() as i32];
            Village {
                centre,
                height: cy.round() as i32,
                radius: radius_around(centre, members.iter().map(|c| c.block)),
                members: members
                    .iter()
                    .map(|c| place_key(&c.object, c.block))
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_blocks_and_centres_radii_are_measured_from() {
        let odd = place_key("sign:left", [-3, 64, 2_000_000_000]);
        assert_eq!(place_block(&odd), Some([-3, 64, 2_000_000_000]));
        assert_eq!(place_block("seen:village:7:0"), None);
        assert_eq!(place_block("seen:bed:1:2"), None);
        assert_eq!(village_centre("seen:village:-7:12"), Some([-7, 12]));
        assert_eq!(village_centre("seen:bed:1:2:3"), None);
        // Blocks at the ends of the i32 range, measured without overflow.
        let far = radius_around([i32::MIN, 0], [[i32::MAX, 0, 0]]);
        assert_eq!(far, (u32::MAX as f64 * 10.0).round() / 10.0);
        let members = [place_key("bed", [3, 64, 4]), "npc:x".to_string()];
        assert_eq!(radius_of("seen:village:0:0", &members), Some(5.0));
        assert_eq!(radius_of("home", &members), None);
    }
}
