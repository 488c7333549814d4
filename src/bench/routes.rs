//! The place questions of `loci bench world` that are answered by routes over PATH edges:
//! "where is the nearest chest with iron" (from home) and "where is the nearest bed I can
//! reach in the dark" (from the trading post of the scripted emerald trader, along paths whose
//! every step is lit to at least 8 of 15, so darkness at most 7).
//!
//! The expected answer is computed on the store that keeps everything by a plain Dijkstra over
//! its PATH edges (shortest distance), written here and sharing nothing with the planner; the
//! answer is asked of the store under test in the planner language, and counts when the
//! expected place is among its first five.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use ordered_float::OrderedFloat;

use crate::error::Result;
use crate::model::{labels, relations, EdgeId, Node, NodeId, Value};
use crate::queries::darkness;
use crate::store::{GraphRead, Store};
use crate::world::GroundTruth;

/// Darkness a step may have when the way must be lit ("reachable in the dark").
const LIT_ENOUGH: f64 = 7.0;

const IRON: &str = "item:iron_ingot";

const NEAREST_IRON_CHEST: &str = "MATCH route = (a:Place {key: $from})-[:PATH*1..6]-(b:Place {type: 'chest'}), (b)-[:CONTAINS]->(i {key: 'item:iron_ingot'}) WHERE b.key <> a.key RETURN b.key AS place, min(path_cost(route, 'distance')) AS distance ORDER BY distance LIMIT 5";

const NEAREST_LIT_BED: &str = "MATCH route = (a:Place {key: $from})-[:PATH*1..6]-(b:Place {type: 'bed'}) WHERE b.key <> a.key AND path_max(route, 'darkness') <= $max_darkness RETURN b.key AS place, min(path_cost(route, 'distance')) AS distance ORDER BY distance LIMIT 5";

/// Adds the route questions whose expected answer exists to `out` (question -> answered).
pub(crate) fn route_questions(
    asked: &Store,
    knowing: &Store,
    truth: &GroundTruth,
    out: &mut BTreeMap<String, bool>,
) -> Result<()> {
    let has_iron = |g: &GraphRead<'_>, n: &Node| -> bool {
        let (Some(contains), Some(iron)) = (g.relation_id(relations::CONTAINS), g.node_id(IRON))
        else {
            return false;
        };
        g.adjacency()
            .entries(n.id)
            .any(|e| !e.is_incoming() && e.relation() == contains && e.neighbor() == iron)
    };
    let is_type = |n: &Node, t: &str| {
        n.label == labels::PLACE && n.props.get("type").and_then(Value::as_str) == Some(t)
    };
    let expected = nearest_by_dijkstra(knowing, &truth.home, 15.0, |g, n| {
        is_type(n, "chest") && has_iron(g, n)
    })?;
    if let Some(expected) = expected {
        let top = planner_places(asked, NEAREST_IRON_CHEST, &truth.home, None)?;
        out.insert(
            "nearest chest with iron".to_string(),
            top.contains(&expected),
        );
    }
    if let Some(post) = truth.sticks_for_emeralds.first().map(|t| t.place.clone()) {
        let expected = nearest_by_dijkstra(knowing, &post, LIT_ENOUGH, |_, n| is_type(n, "bed"))?;
        if let Some(expected) = expected {
            let top = planner_places(asked, NEAREST_LIT_BED, &post, Some(LIT_ENOUGH))?;
            out.insert(
                "nearest bed reachable in the dark".to_string(),
                top.contains(&expected),
            );
        }
    }
    Ok(())
}

/// The `place` column of a planner query run with `$from` (and `$max_darkness`).
fn planner_places(
    store: &Store,
    query: &str,
    from: &str,
    max_darkness: Option<f64>,
) -> Result<Vec<String>> {
    use crate::query::Val;
    let mut params = std::collections::HashMap::from([("from".to_string(), Val::Str(from.into()))]);
    if let Some(d) = max_darkness {
        params.insert("max_darkness".to_string(), Val::Float(d));
    }
    let result = crate::query::prepare(query, crate::query::Limits::default())
        .and_then(|p| p.run_without_recording(store, &params))
        .map_err(|e| crate::Error::InvalidArgument {
            name: "route question".into(),
            message: e.to_string(),
        })?;
    Ok(result
        .rows
        .iter()
        .filter_map(|r| r.first().and_then(|v| v.as_str()).map(str::to_string))
        .collect())
}

/// The key of the nearest node other than `from` that `accept` takes, by total PATH distance
/// over steps at most `max_darkness` dark (either direction); ties by key.
fn nearest_by_dijkstra(
    store: &Store,
    from: &str,
    max_darkness: f64,
    accept: impl Fn(&GraphRead<'_>, &Node) -> bool,
) -> Result<Option<String>> {
    let (start, path_edges) = {
        let g = store.graph();
        let (Some(start), Some(path)) = (g.node_id(from), g.relation_id(relations::PATH)) else {
            return Ok(None);
        };
        let ids: Vec<EdgeId> = g
            .edges()
            .filter(|(_, c)| c.relation == path)
            .map(|(id, _)| id)
            .collect();
        (start, ids)
    };
    // Distance of each step that is lit enough, both ways.
    let mut steps: HashMap<NodeId, Vec<(NodeId, f64)>> = HashMap::new();
    for id in path_edges {
        let Some(e) = store.edge(id)? else { continue };
        let num = |k: &str| e.props.get(k).and_then(Value::as_f64);
        if crate::queries::step_cost(darkness(num("light"))) > max_darkness {
            continue;
        }
        // As the routes it checks weigh a step (a negative one walked both ways never ends).
        let d = crate::queries::step_cost(num("distance").unwrap_or(0.0));
        steps.entry(e.from).or_default().push((e.to, d));
        steps.entry(e.to).or_default().push((e.from, d));
    }
    let g = store.graph();
    let mut best: HashMap<NodeId, f64> = HashMap::from([(start, 0.0)]);
    let mut heap = BinaryHeap::from([Reverse((OrderedFloat(0.0), start))]);
    let mut found: Option<(f64, String)> = None;
    while let Some(Reverse((OrderedFloat(d), n))) = heap.pop() {
        if best.get(&n).is_some_and(|b| *b < d) {
            continue;
        }
        if let Some((fd, _)) = &found {
            if d > *fd {
                break;
            }
        }
        if n != start {
            if let Some(node) = g.node(n).filter(|x| accept(&g, x)) {
                let better = match &found {
                    None => true,
                    Some((fd, key)) => d < *fd || node.key < *key,
                };
                if better {
                    found = Some((d, node.key.clone()));
                }
            }
        }
        for (m, w) in steps.get(&n).map(Vec::as_slice).unwrap_or(&[]) {
            let nd = d + w;
            if best.get(m).is_none_or(|b| nd < *b) {
                best.insert(*m, nd);
                heap.push(Reverse((OrderedFloat(nd), *m)));
            }
        }
    }
    Ok(found.map(|(_, k)| k))
}
