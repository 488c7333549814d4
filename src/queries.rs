//! The seed questions of an agent's planner, answered from the graph with provenance: where is
//! home; where to trade one item for another; what happened last night; where did I last die
//! and what did I drop. Each answer names the edges and events it rests on.
//!
//! These are library calls over the store's read API; the planner query language (a later
//! stage) will express them as saved queries.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::graph::Direction;
use crate::model::{relations, same_name, EdgeId, Event, Node, Value};
use crate::store::{ExpandOptions, Store};
use crate::text::{SearchFilter, Target};
use crate::world::{DAY, NIGHT_START};

/// What an answer rests on.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Provenance {
    pub edges: Vec<EdgeId>,
    /// Event sequence numbers.
    pub events: Vec<u64>,
    /// Observation ids carried by those events.
    pub observations: Vec<String>,
}

/// A place the answer points at.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlaceRef {
    pub key: String,
    pub name: String,
    pub anchor: Option<crate::model::Anchor>,
}

impl From<&Node> for PlaceRef {
    fn from(n: &Node) -> Self {
        PlaceRef {
            key: n.key.clone(),
            name: n.name.clone(),
            anchor: n.anchor,
        }
    }
}

/// Answer to "where is home".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HomeAnswer {
    pub place: PlaceRef,
    pub confidence: f32,
    pub since: Option<i64>,
    pub provenance: Provenance,
}

/// One ranked trade offer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TradeAnswer {
    pub villager: String,
    pub villager_name: String,
    pub place: Option<PlaceRef>,
    pub gives: String,
    pub gives_count: i64,
    pub wants: String,
    pub wants_count: i64,
    pub confidence: f32,
    pub last_seen: i64,
    pub provenance: Provenance,
}

/// One event of a timeline, rendered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineEntry {
    pub seq: u64,
    pub ts: i64,
    pub kind: String,
    pub place: Option<String>,
    pub summary: String,
    pub observations: Vec<String>,
}

/// Answer to "what happened last night": the window and its events in time order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NightAnswer {
    pub from: i64,
    pub to: i64,
    pub events: Vec<TimelineEntry>,
    /// One line: counts of each kind of event, e.g. "1 COMBAT, 1 SLEEP".
    pub summary: String,
}

/// Answer to "where did I last die and what did I drop".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeathAnswer {
    pub place: PlaceRef,
    pub ts: i64,
    pub cause: Option<String>,
    pub dropped: Vec<(String, i64)>,
    pub provenance: Provenance,
}

fn node_or_missing(store: &Store, key: &str) -> Result<Node> {
    store
        .node_by_key(key)
        .ok_or_else(|| Error::NotFound(format!("node {key:?}")))
}

fn provenance(store: &Store, edges: Vec<EdgeId>, events: Vec<u64>) -> Result<Provenance> {
    let mut observations = Vec::new();
    for seq in &events {
        if let Some(ev) = store.event(*seq)? {
            observations.extend(ev.evidence);
        }
    }
    Ok(Provenance {
        edges,
        events,
        observations,
    })
}

/// Where is home for `actor`: its HOME edges valid at `now` (default: the latest event time),
/// best by confidence, then by the most recent confirmation.
pub fn where_is_home(store: &Store, actor: &str, now: Option<i64>) -> Result<Option<HomeAnswer>> {
    let actor_node = node_or_missing(store, actor)?;
    let now = match now {
        Some(t) => t,
        None => store.latest_event_time()?.unwrap_or(0),
    };
    let opts = ExpandOptions {
        relations: vec![relations::HOME.into()],
        direction: Direction::Outgoing,
        ..Default::default()
    };
    let mut best = None;
    for n in store.neighbors(actor_node.id, 1, &opts) {
        let Some(edge) = store.edge(n.edge)? else {
            continue;
        };
        if !edge.valid_at(now) {
            continue;
        }
        let rank = (edge.confidence, edge.last_seen);
        if best
            .as_ref()
            .is_none_or(|(r, _): &((f32, i64), _)| rank > *r)
        {
            best = Some((rank, edge));
        }
    }
    let Some((_, edge)) = best else {
        return Ok(None);
    };
    let place = store
        .node(edge.to)
        .ok_or_else(|| Error::NotFound(format!("node {}", edge.to)))?;
    Ok(Some(HomeAnswer {
        place: PlaceRef::from(&place),
        confidence: edge.confidence,
        since: edge.valid_from,
        provenance: provenance(store, vec![edge.id], edge.evidence.clone())?,
    }))
}

/// Finds an item node by name: exact normalised name or alias first, else the best full-text hit
/// among Item nodes.
pub fn find_item(store: &Store, name: &str) -> Result<Option<Node>> {
    let filter = SearchFilter {
        labels: vec![crate::model::labels::ITEM.into()],
        nodes_only: Some(true),
        ..Default::default()
    };
    let hits = store.search(name, &filter, 10)?;
    let nodes: Vec<Node> = hits
        .iter()
        .filter_map(|h| match h.target {
            Target::Node(id) => store.node(id),
            Target::Event(_) => None,
        })
        .collect();
    let exact = nodes
        .iter()
        .find(|n| same_name(&n.name, name) || n.aliases.iter().any(|a| same_name(a, name)));
    Ok(exact.or(nodes.first()).cloned())
}

fn prop_str<'a>(props: &'a crate::model::Props, key: &str) -> Option<&'a str> {
    props.get(key).and_then(Value::as_str)
}

/// Offers that give `want` in exchange for `give`, with confidence of at least `min_confidence`,
/// most recently confirmed first.
pub fn find_trade(
    store: &Store,
    want: &str,
    give: &str,
    min_confidence: f32,
) -> Result<Vec<TradeAnswer>> {
    let Some(item) = find_item(store, want)? else {
        return Ok(Vec::new());
    };
    let opts = ExpandOptions {
        relations: vec![relations::OFFERS.into()],
        direction: Direction::Incoming,
        min_confidence,
        ..Default::default()
    };
    let mut out = Vec::new();
    for n in store.neighbors(item.id, 1, &opts) {
        let Some(edge) = store.edge(n.edge)? else {
            continue;
        };
        let wants = prop_str(&edge.props, "want").unwrap_or_default();
        if !same_name(wants, give) {
            continue;
        }
        let located = ExpandOptions {
            relations: vec![relations::LOCATED_IN.into()],
            direction: Direction::Outgoing,
            ..Default::default()
        };
        let place = store
            .neighbors(n.node, 1, &located)
            .into_iter()
            .max_by(|a, b| a.confidence.total_cmp(&b.confidence))
            .and_then(|p| store.node(p.node))
            .map(|p| PlaceRef::from(&p));
        out.push(TradeAnswer {
            villager: n.key.clone(),
            villager_name: n.name.clone(),
            place,
            gives: prop_str(&edge.props, "give")
                .unwrap_or(&item.name)
                .to_string(),
            gives_count: edge
                .props
                .get("give_count")
                .and_then(Value::as_i64)
                .unwrap_or(1),
            wants: wants.to_string(),
            wants_count: edge
                .props
                .get("want_count")
                .and_then(Value::as_i64)
                .unwrap_or(1),
            confidence: edge.confidence,
            last_seen: edge.last_seen,
            provenance: provenance(store, vec![edge.id], edge.evidence.clone())?,
        });
    }
    out.sort_by(|a, b| {
        b.last_seen
            .cmp(&a.last_seen)
            .then(b.confidence.total_cmp(&a.confidence))
            .then(a.villager.cmp(&b.villager))
    });
    Ok(out)
}

fn summarize(ev: &Event) -> String {
    let mut text = String::new();
    ev.payload.collect_text(&mut text);
    let place = ev
        .place
        .as_deref()
        .map(|p| format!(" at {p}"))
        .unwrap_or_default();
    if text.is_empty() {
        format!("{}{place}", ev.kind)
    } else {
        format!("{}{place}: {text}", ev.kind)
    }
}

/// The entries of every event with world time in `[from, to)`, in time order.
pub fn timeline(store: &Store, from: i64, to: i64) -> Result<Vec<TimelineEntry>> {
    Ok(store
        .events_between(from, to.saturating_sub(1))?
        .into_iter()
        .map(|ev| TimelineEntry {
            seq: ev.seq,
            ts: ev.ts,
            kind: ev.kind.clone(),
            place: ev.place.clone(),
            summary: summarize(&ev),
            observations: ev.evidence,
        })
        .collect())
}

/// What happened last night: the most recent night (dusk to dawn, in world ticks) that began
/// before `now` (default: the latest event time) and is over, rolled up.
pub fn last_night(store: &Store, now: Option<i64>) -> Result<NightAnswer> {
    let now = match now {
        Some(t) => t,
        None => store.latest_event_time()?.unwrap_or(0),
    };
    let day = now.div_euclid(DAY);
    let from = (day - 1) * DAY + NIGHT_START;
    let to = day * DAY;
    let events = timeline(store, from, to)?;
    let mut counts: Vec<(String, usize)> = Vec::new();
    for e in &events {
        match counts.iter_mut().find(|(k, _)| *k == e.kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((e.kind.clone(), 1)),
        }
    }
    let summary = if counts.is_empty() {
        "nothing recorded".to_string()
    } else {
        counts
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(NightAnswer {
        from,
        to,
        events,
        summary,
    })
}

/// Where `actor` last died (its most recently confirmed DIED_AT edge) and what it dropped
/// (from the death event the edge cites last).
pub fn last_death(store: &Store, actor: &str) -> Result<Option<DeathAnswer>> {
    let actor_node = node_or_missing(store, actor)?;
    let opts = ExpandOptions {
        relations: vec![relations::DIED_AT.into()],
        direction: Direction::Outgoing,
        ..Default::default()
    };
    let mut latest = None;
    for n in store.neighbors(actor_node.id, 1, &opts) {
        if let Some(edge) = store.edge(n.edge)? {
            if latest
                .as_ref()
                .is_none_or(|l: &crate::model::Edge| edge.last_seen > l.last_seen)
            {
                latest = Some(edge);
            }
        }
    }
    let Some(edge) = latest else { return Ok(None) };
    let Some(&seq) = edge.evidence.last() else {
        return Ok(None);
    };
    let event = store
        .event(seq)?
        .ok_or_else(|| Error::NotFound(format!("event {seq}")))?;
    let place = store
        .node(edge.to)
        .ok_or_else(|| Error::NotFound(format!("node {}", edge.to)))?;
    let (cause, dropped) = match &event.payload {
        Value::Map(m) => {
            let cause = m.get("cause").and_then(Value::as_str).map(str::to_string);
            let dropped = match m.get("dropped") {
                Some(Value::List(items)) => items
                    .iter()
                    .filter_map(|i| match i {
                        Value::Map(d) => Some((
                            d.get("item")?.as_str()?.to_string(),
                            d.get("count").and_then(Value::as_i64).unwrap_or(1),
                        )),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            (cause, dropped)
        }
        _ => (None, Vec::new()),
    };
    Ok(Some(DeathAnswer {
        place: PlaceRef::from(&place),
        ts: event.ts,
        cause,
        dropped,
        provenance: provenance(store, vec![edge.id], vec![seq])?,
    }))
}
