//! The seed questions of an agent's planner, answered from the graph with provenance: where is
//! home; where to trade one item for another; what happened last night; where did I last die
//! and what did I drop. Each answer names the edges and events it rests on.
//!
//! These are library calls over the store's read API; the planner query language expresses
//! the same questions as saved queries (`queries/*.gq`).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::graph::Direction;
use crate::model::{relations, same_name, EdgeId, Event, Node, Value};
use crate::store::{ExpandOptions, Facet, Store};
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
    /// As believed at the query's now: decayed since last seen, as the floor was applied to it.
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
    store.require_node(key)
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
    // Validity is judged at `now`, here and by the traversal.
    let opts = ExpandOptions {
        relations: vec![relations::HOME.into()],
        direction: Direction::Outgoing,
        now: Some(now),
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
            // As believed now (decayed since last seen), which the floor was applied to.
            confidence: n.confidence,
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
    timeline_where(store, from, to, &TimelineFilter::default())
}

/// Which events a timeline keeps (`None` keeps any).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimelineFilter {
    pub place: Option<String>,
    pub actor: Option<String>,
    pub kind: Option<String>,
}

/// `timeline(from, to, place, actor, kind)`: the events with world time in `[from, to)` that
/// match `filter`, in time order.
pub fn timeline_where(
    store: &Store,
    from: i64,
    to: i64,
    filter: &TimelineFilter,
) -> Result<Vec<TimelineEntry>> {
    // The most selective facet given reads only its own events (the episodic index).
    let until = to.saturating_sub(1);
    let facet = (filter.place.as_deref().map(|p| (Facet::Place, p)))
        .or(filter.actor.as_deref().map(|a| (Facet::Actor, a)))
        .or(filter.kind.as_deref().map(|k| (Facet::Kind, k)));
    let mut entries = Vec::new();
    store.each_event(facet, from, until, &mut |ev| {
        let kept = filter
            .place
            .as_ref()
            .is_none_or(|p| ev.place.as_ref() == Some(p))
            && filter.actor.as_ref().is_none_or(|a| &ev.actor == a)
            && filter.kind.as_ref().is_none_or(|k| &ev.kind == k);
        if kept {
            entries.push(TimelineEntry {
                seq: ev.seq,
                ts: ev.ts,
                kind: ev.kind.clone(),
                place: ev.place.clone(),
                summary: summarize(&ev),
                observations: ev.evidence,
            });
        }
    })?;
    Ok(entries)
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
    let place = store
        .node(edge.to)
        .ok_or_else(|| Error::NotFound(format!("node {}", edge.to)))?;
    // The death event is the edge's latest evidence that is not a summary re-asserting it.
    let mut death_event = None;
    for seq in edge.evidence.iter().rev() {
        if let Some(ev) = store.event(*seq)? {
            if ev.kind != crate::dynamics::consolidate::SUMMARY {
                death_event = Some(ev);
                break;
            }
        }
    }
    let Some(event) = death_event else {
        // Forgotten: the graph still holds what was dropped there, and when.
        let (ts, dropped) = dropped_at(store, &place, edge.last_seen)?;
        return Ok(Some(DeathAnswer {
            place: PlaceRef::from(&place),
            ts,
            cause: None,
            dropped,
            provenance: provenance(store, vec![edge.id], Vec::new())?,
        }));
    };
    let seq = event.seq;
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

/// The items of the latest drop at `place`: its DROPPED edges with the greatest `valid_from`,
/// by item (the key without an `item:` prefix) and count, and that time (`fallback` when none).
fn dropped_at(store: &Store, place: &Node, fallback: i64) -> Result<(i64, Vec<(String, i64)>)> {
    let opts = ExpandOptions {
        relations: vec![relations::DROPPED.into()],
        direction: Direction::Outgoing,
        ..Default::default()
    };
    let mut drops: Vec<(i64, String, i64)> = Vec::new();
    for n in store.neighbors(place.id, 1, &opts) {
        let Some(e) = store.edge(n.edge)? else {
            continue;
        };
        let Some(at) = e.valid_from else {
            continue;
        };
        let Some(item) = store.node(e.to) else {
            continue;
        };
        let name = item
            .key
            .strip_prefix("item:")
            .unwrap_or(&item.key)
            .to_string();
        let count = e.props.get("count").and_then(Value::as_i64).unwrap_or(1);
        drops.push((at, name, count));
    }
    let latest = drops.iter().map(|d| d.0).max().unwrap_or(fallback);
    let mut items: Vec<(String, i64)> = drops
        .into_iter()
        .filter(|d| d.0 == latest)
        .map(|d| (d.1, d.2))
        .collect();
    items.sort();
    Ok((latest, items))
}

/// A cost overlay on PATH edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Overlay {
    /// Blocks walked (the `distance` property).
    Distance,
    /// Danger (the `risk` property, 0..1).
    Risk,
    /// How dark the way is: 15 minus the `light` property (0 lit .. 15 pitch black).
    Darkness,
    /// Steps.
    Hops,
}

impl std::str::FromStr for Overlay {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "distance" => Ok(Overlay::Distance),
            "risk" => Ok(Overlay::Risk),
            "darkness" => Ok(Overlay::Darkness),
            "hops" => Ok(Overlay::Hops),
            other => Err(Error::InvalidArgument {
                name: "overlay".into(),
                message: format!(
                    "{}: expected distance, risk, darkness or hops",
                    crate::error::quoted_excerpt(other)
                ),
            }),
        }
    }
}

/// How dark a step is: what its light level (0 pitch black .. 15 fully lit) lacks; a step of
/// unknown light counts as fully dark. The `darkness` overlay of routes and of `path_cost`.
pub fn darkness(light: Option<f64>) -> f64 {
    15.0 - light.unwrap_or(0.0)
}

/// A step's cost to a route search: what its property says, or nothing where that is below
/// zero or no number. A* needs costs of at least zero: a step of negative distance, walked
/// both ways, is a cycle whose cost falls on every lap, and the search never ended. (The
/// query language's `path_cost` sums the properties as they are, so on such data the saved
/// `nearest_place` and [`nearest_place`] report different costs for one route.)
pub(crate) fn step_cost(x: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

/// A route along PATH edges.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Route {
    pub place: PlaceRef,
    pub cost: f64,
    /// Place keys from start to end.
    pub path: Vec<String>,
    pub edges: Vec<EdgeId>,
}

struct PathCosts {
    /// Per PATH edge: distance, darkness, risk.
    costs: std::collections::HashMap<EdgeId, (f64, f64, f64)>,
}

impl PathCosts {
    fn load(store: &Store) -> Result<Self> {
        let ids: Vec<EdgeId> = {
            let g = store.graph();
            let Some(rel) = g.relation_id(relations::PATH) else {
                return Ok(PathCosts {
                    costs: Default::default(),
                });
            };
            g.edges()
                .filter(|(_, e)| e.relation == rel)
                .map(|(id, _)| id)
                .collect()
        };
        let mut costs = std::collections::HashMap::new();
        for id in ids {
            if let Some(e) = store.edge(id)? {
                let num = |k: &str| e.props.get(k).and_then(Value::as_f64);
                costs.insert(
                    id,
                    (
                        step_cost(num("distance").unwrap_or(0.0)),
                        step_cost(darkness(num("light"))),
                        step_cost(num("risk").unwrap_or(0.0)),
                    ),
                );
            }
        }
        Ok(PathCosts { costs })
    }

    fn cost(&self, e: EdgeId, overlay: Overlay) -> f64 {
        let (d, dark, risk) = self.costs.get(&e).copied().unwrap_or((0.0, 15.0, 0.0));
        match overlay {
            Overlay::Distance => d,
            Overlay::Risk => risk,
            Overlay::Darkness => dark,
            Overlay::Hops => 1.0,
        }
    }
}

/// Cheapest route from `from` to any place satisfying `is_goal`, along PATH edges (walked in
/// either direction) no darker than `max_darkness`, by A* (petgraph) with `overlay` costs.
fn route(
    store: &Store,
    costs: &PathCosts,
    from: &str,
    overlay: Overlay,
    max_darkness: f64,
    is_goal: impl Fn(&Node) -> bool,
) -> Result<Option<Route>> {
    use petgraph::visit::{EdgeFiltered, EdgeRef};
    let start = node_or_missing(store, from)?;
    let g = store.graph();
    let allowed = |e: crate::graph::AdjEdgeRef<'_>| {
        costs
            .costs
            .get(&e.id())
            .is_some_and(|(_, dark, _)| *dark <= max_darkness)
    };
    let filtered = EdgeFiltered::from_fn(g.adjacency(), allowed);
    let found = petgraph::algo::astar(
        &filtered,
        start.id,
        |n| n != start.id && g.node(n).is_some_and(|x| is_goal(&x)),
        |e| costs.cost(e.id(), overlay),
        |_| 0.0,
    );
    let Some((cost, nodes)) = found else {
        return Ok(None);
    };
    // Recover the edges: between consecutive nodes, the cheapest allowed PATH edge.
    let mut edges = Vec::new();
    for w in nodes.windows(2) {
        let best = g
            .adjacency()
            .entries(w[0])
            .filter(|e| {
                e.neighbor() == w[1]
                    && costs
                        .costs
                        .get(&e.edge_id())
                        .is_some_and(|(_, d, _)| *d <= max_darkness)
            })
            .min_by(|a, b| {
                costs
                    .cost(a.edge_id(), overlay)
                    .total_cmp(&costs.cost(b.edge_id(), overlay))
            });
        if let Some(e) = best {
            edges.push(e.edge_id());
        }
    }
    let keys = nodes
        .iter()
        .filter_map(|n| g.node(*n).map(|x| x.key.clone()))
        .collect();
    let end = nodes
        .last()
        .and_then(|n| g.node(*n))
        .map(|n| PlaceRef::from(&n));
    Ok(end.map(|place| Route {
        place,
        cost,
        path: keys,
        edges,
    }))
}

/// The nearest place of `place_type` (the `type` property) from the place `from`, by `overlay`
/// cost, using only PATH edges at most `max_darkness` dark (15 allows every path).
pub fn nearest_place(
    store: &Store,
    from: &str,
    place_type: &str,
    overlay: Overlay,
    max_darkness: f64,
) -> Result<Option<Route>> {
    let costs = PathCosts::load(store)?;
    // The start itself is never the answer: "the nearest base" from a base is another one.
    route(store, &costs, from, overlay, max_darkness, |n| {
        n.key != from
            && n.label == crate::model::labels::PLACE
            && n.props.get("type").and_then(Value::as_str) == Some(place_type)
    })
}

/// Places with the `type` property `place_type`, by name.
pub fn places_by_type(store: &Store, place_type: &str) -> Vec<PlaceRef> {
    let g = store.graph();
    // Places by their label first, read in place; only they are decoded.
    let mut out: Vec<PlaceRef> = g
        .node_ids()
        .filter(|id| g.node_label(*id) == Some(crate::model::labels::PLACE))
        .filter_map(|id| g.node(id))
        .filter(|n| n.props.get("type").and_then(Value::as_str) == Some(place_type))
        .map(|n| PlaceRef::from(&n))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name).then(a.key.cmp(&b.key)));
    out
}

/// Where and when `entity` was last seen: the place linked to it by its most recently confirmed
/// edge (any relation, either direction), with the edge's provenance.
pub fn last_seen(store: &Store, entity: &str) -> Result<Option<(PlaceRef, i64, Provenance)>> {
    let node = node_or_missing(store, entity)?;
    let best = {
        let g = store.graph();
        g.adjacency()
            .entries(node.id)
            .filter(|e| {
                g.node(e.neighbor())
                    .is_some_and(|n| n.label == crate::model::labels::PLACE)
            })
            .filter_map(|e| {
                g.edge_core(e.edge_id())
                    .map(|c| (c.last_seen, e.edge_id(), e.neighbor()))
            })
            .max()
    };
    let Some((ts, edge, place)) = best else {
        return Ok(None);
    };
    let evidence = store.edge(edge)?.map(|e| e.evidence).unwrap_or_default();
    let place = store
        .node(place)
        .ok_or_else(|| Error::NotFound(format!("node {place}")))?;
    Ok(Some((
        PlaceRef::from(&place),
        ts,
        provenance(store, vec![edge], evidence)?,
    )))
}

/// [`find_trade`], each offer with the cheapest route from `from` to the villager's place
/// (`route_cost`, by `overlay`), ranked by recency, then by route cost, then by villager key.
pub fn find_trade_from(
    store: &Store,
    want: &str,
    give: &str,
    min_confidence: f32,
    from: &str,
    overlay: Overlay,
) -> Result<Vec<(TradeAnswer, Option<f64>)>> {
    let costs = PathCosts::load(store)?;
    let mut out = Vec::new();
    for t in find_trade(store, want, give, min_confidence)? {
        let cost = match &t.place {
            Some(p) if p.key == from => Some(0.0),
            Some(p) => {
                route(store, &costs, from, overlay, 15.0, |n| n.key == p.key)?.map(|r| r.cost)
            }
            None => None,
        };
        out.push((t, cost));
    }
    // Most recent first, then nearest, then by villager key, so that ties come out the same
    // on every call.
    out.sort_by(|(a, ca), (b, cb)| {
        b.last_seen
            .cmp(&a.last_seen)
            .then(
                ca.unwrap_or(f64::INFINITY)
                    .total_cmp(&cb.unwrap_or(f64::INFINITY)),
            )
            .then_with(|| a.villager.cmp(&b.villager))
    });
    Ok(out)
}
