//! The projection: the one deterministic function from events to graph changes.
//!
//! Live ingest and replay both run [`project_batch`]: it validates a batch of events against the
//! state before it and collects every change in an [`Overlay`] without touching that state. Only
//! when the whole batch is valid (and, live, durably committed) is the overlay applied, so a bad
//! line anywhere leaves nothing half-written.

mod changes;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use changes::Changes;

use crate::error::{Error, Result};
use crate::model::{
    Assertion, Edge, EdgeId, EdgeUpsert, Event, Node, NodeId, NodeUpsert, Props, Value,
    MAX_KEY_BYTES, MAX_LABEL_BYTES, MAX_NAME_BYTES,
};

/// Id counters and log position; persisted in the meta table with every batch so that ids are
/// never reused, even after a retraction of the highest id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub next_node: u32,
    pub next_edge: u32,
    pub last_seq: u64,
}

/// What the projection reads of the state a batch applies to.
pub(crate) trait ProjectionBase {
    fn node_id(&self, key: &str) -> Option<NodeId>;
    /// Called before a batch is refused for naming `key`, which the base did not find: a
    /// base read from a snapshot's map checks the blocks that lookup read again, and records
    /// the damage it finds (the store then projects the batch again on the graph replayed
    /// from its log). A file changed under the map after a block's first read must not pass
    /// for the caller's error.
    fn recheck_key(&self, _key: &str) {}
    fn node(&self, id: NodeId) -> Option<Node>;
    fn edge_id(&self, from: NodeId, relation: &str, to: NodeId) -> Option<EdgeId>;
    /// The full edge record (may read storage).
    fn edge(&self, id: EdgeId) -> Result<Option<Edge>>;
    /// Ids of the live edges incident to `node`.
    fn incident_edges(&self, node: NodeId) -> Vec<EdgeId>;
    fn counters(&self) -> Counters;
}

/// The changes of one batch, keyed by id; `None` is a removal.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    pub counters: Counters,
    pub nodes: Changes<NodeId, Node>,
    pub edges: Changes<EdgeId, Edge>,
    pub events: Vec<Event>,
    new_node_keys: HashMap<String, NodeId, foldhash::fast::RandomState>,
    /// The edges this batch made, by `(from, relation, to)` with the relation as its position
    /// in `new_relations` (a bulk batch's hundred thousand edges share a handful of
    /// relations: a copy of the name per edge was an allocation each).
    new_edge_keys: HashMap<(NodeId, u32, NodeId), EdgeId, foldhash::fast::RandomState>,
    new_relations: HashMap<String, u32, foldhash::fast::RandomState>,
    /// The batch's edges by endpoint, built at the batch's first node retraction and kept up
    /// from then on: a retraction had scanned every edge of the batch, so a replay batch of
    /// thousands of retractions among 100k edges took seconds per thousand.
    edges_by_node: Option<HashMap<NodeId, Vec<EdgeId>, foldhash::fast::RandomState>>,
}

/// Where an error happened, for [`Error::InvalidEvent`].
#[derive(Clone, Copy)]
struct At {
    event: usize,
    assertion: Option<usize>,
}

impl At {
    fn err(self, field: &str, message: impl Into<String>) -> Error {
        Error::InvalidEvent {
            event: self.event,
            assertion: self.assertion,
            field: field.to_string(),
            message: message.into(),
        }
    }
}

impl Overlay {
    fn new(counters: Counters) -> Self {
        Overlay {
            counters,
            nodes: Changes::new(counters.next_node),
            edges: Changes::new(counters.next_edge),
            ..Default::default()
        }
    }

    fn node_id<B: ProjectionBase>(&self, base: &B, key: &str) -> Option<NodeId> {
        self.node_id_over(key, || base.node_id(key))
    }

    /// The node `key` names after this batch so far, given what the base says it names.
    fn node_id_over(&self, key: &str, in_base: impl FnOnce() -> Option<NodeId>) -> Option<NodeId> {
        if let Some(id) = self.new_node_keys.get(key) {
            return matches!(self.nodes.get(id), Some(Some(_))).then_some(*id);
        }
        let id = in_base()?;
        match self.nodes.get(&id) {
            Some(None) => None,
            _ => Some(id),
        }
    }

    fn node<B: ProjectionBase>(&self, base: &B, id: NodeId) -> Option<Node> {
        match self.nodes.get(&id) {
            Some(n) => n.clone(),
            None => base.node(id),
        }
    }

    fn edge_id<B: ProjectionBase>(
        &self,
        base: &B,
        from: NodeId,
        relation: &str,
        to: NodeId,
    ) -> Option<EdgeId> {
        self.edge_id_hinted(base, from, relation, to, None)
    }

    /// [`Overlay::edge_id`] with what the base says the edge is when that is known already
    /// (`Some`: see [`Hint::edge`]).
    fn edge_id_hinted<B: ProjectionBase>(
        &self,
        base: &B,
        from: NodeId,
        relation: &str,
        to: NodeId,
        in_base: Option<Option<EdgeId>>,
    ) -> Option<EdgeId> {
        if let Some(rel) = self.new_relations.get(relation) {
            if let Some(id) = self.new_edge_keys.get(&(from, *rel, to)) {
                return matches!(self.edges.get(id), Some(Some(_))).then_some(*id);
            }
        }
        let id = match in_base {
            Some(hinted) => hinted?,
            None => base.edge_id(from, relation, to)?,
        };
        match self.edges.get(&id) {
            Some(None) => None,
            _ => Some(id),
        }
    }

    fn edge<B: ProjectionBase>(&self, base: &B, id: EdgeId) -> Result<Option<Edge>> {
        match self.edges.get(&id) {
            Some(e) => Ok(e.clone()),
            None => base.edge(id),
        }
    }

    fn resolve<B: ProjectionBase>(
        &self,
        base: &B,
        at: At,
        field: &str,
        key: &str,
    ) -> Result<NodeId> {
        self.node_id(base, key)
            .ok_or_else(|| Self::unknown(base, at, field, key))
    }

    /// The error for a reference to `key`, which names no live node.
    #[cold]
    fn unknown<B: ProjectionBase>(base: &B, at: At, field: &str, key: &str) -> Error {
        base.recheck_key(key);
        at.err(field, unknown_node(key))
    }

    /// [`Overlay::resolve`] with what the base says `key` names when that is known already
    /// (`Some`: see [`KeyHints`]).
    fn resolve_hinted<B: ProjectionBase>(
        &self,
        base: &B,
        at: At,
        field: &str,
        key: &str,
        in_base: Option<Option<NodeId>>,
    ) -> Result<NodeId> {
        match in_base {
            None => self.resolve(base, at, field, key),
            Some(id) => self
                .node_id_over(key, || id)
                .ok_or_else(|| Self::unknown(base, at, field, key)),
        }
    }

    fn upsert_node<B: ProjectionBase>(
        &mut self,
        base: &B,
        at: At,
        ev: &Event,
        up: &NodeUpsert,
    ) -> Result<()> {
        if up.key.trim().is_empty() {
            return Err(at.err("key", "empty node key"));
        }
        check_len(at, "key", &up.key, MAX_KEY_BYTES)?;
        if let Some(label) = &up.label {
            if label.trim().is_empty() {
                return Err(at.err("label", "empty label"));
            }
            check_len(at, "label", label, MAX_LABEL_BYTES)?;
        }
        if let Some(name) = &up.name {
            check_len(at, "name", name, MAX_NAME_BYTES)?;
        }
        for alias in &up.aliases {
            check_len(at, "aliases", alias, MAX_NAME_BYTES)?;
        }
        if let Some(s) = up.salience {
            check_unit(at, "salience", s)?;
        }
        let existing = self
            .node_id(base, &up.key)
            .and_then(|id| self.node(base, id));
        let node = match existing {
            Some(mut n) => {
                fold_node_upsert(
                    [&mut n.label, &mut n.name],
                    &mut n.aliases,
                    &mut n.props,
                    up,
                );
                if up.anchor.is_some() {
                    n.anchor = up.anchor;
                }
                // An explicit salience is the caller's word; otherwise a node is as salient as
                // the most salient event that asserted it, a summary aside (`restates`).
                match up.salience {
                    Some(s) => n.salience = s,
                    None if restates(ev) => {}
                    None => n.salience = n.salience.max(ev.salience),
                }
                if let Some(p) = up.pinned {
                    n.pinned = p;
                }
                // A summary restates the node as it was; its time (the start of its range) is
                // no time anything happened to it.
                if !restates(ev) {
                    n.updated = n.updated.max(ev.ts);
                }
                n
            }
            None => {
                let id = NodeId(self.counters.next_node);
                self.counters.next_node = self
                    .counters
                    .next_node
                    .checked_add(1)
                    .ok_or_else(|| at.err("key", "node id space exhausted"))?;
                self.new_node_keys.insert(up.key.clone(), id);
                let NodeValues {
                    label,
                    name,
                    aliases,
                    props,
                } = NodeValues::made_by(up);
                Node {
                    id,
                    key: up.key.clone(),
                    label,
                    name,
                    aliases,
                    props,
                    anchor: up.anchor,
                    salience: up.salience.unwrap_or(ev.salience),
                    pinned: up.pinned.unwrap_or(false),
                    created: ev.ts,
                    updated: ev.ts,
                }
            }
        };
        self.nodes.insert(node.id, Some(node));
        Ok(())
    }

    fn upsert_edge<B: ProjectionBase>(
        &mut self,
        base: &B,
        at: At,
        ev: &Event,
        up: &EdgeUpsert,
        hint: Option<Hint>,
    ) -> Result<()> {
        if up.relation.trim().is_empty() {
            return Err(at.err("relation", "empty relation"));
        }
        check_len(at, "relation", &up.relation, MAX_LABEL_BYTES)?;
        if let Some(c) = up.confidence {
            check_unit(at, "confidence", c)?;
        }
        if let Some(message) = up.last_seen.and_then(crate::store::time_out_of_range) {
            return Err(at.err("last_seen", message));
        }
        let from = self.resolve_hinted(base, at, "from", &up.from, hint.map(|h| h.ends[0]))?;
        let to = self.resolve_hinted(base, at, "to", &up.to, hint.map(|h| h.ends[1]))?;
        // The hint's edge is the base's between the ends it names; an end the batch made or
        // made again is another node.
        let in_base = hint
            .filter(|h| h.ends == [Some(from), Some(to)])
            .map(|h| h.edge);
        let existing = match self.edge_id_hinted(base, from, &up.relation, to, in_base) {
            Some(id) => self.edge(base, id)?,
            None => None,
        };
        let edge = match existing {
            Some(mut e) => {
                fold_edge_upsert(
                    &mut e.confidence,
                    &mut e.props,
                    [&mut e.valid_from, &mut e.valid_to],
                    up,
                );
                e.last_seen = e.last_seen.max(up.last_seen.unwrap_or(ev.ts));
                if !restates(ev) {
                    e.salience = e.salience.max(ev.salience);
                }
                if e.evidence.last() != Some(&ev.seq) {
                    e.evidence.push(ev.seq);
                }
                e
            }
            None => {
                let id = EdgeId(self.counters.next_edge);
                self.counters.next_edge = self
                    .counters
                    .next_edge
                    .checked_add(1)
                    .ok_or_else(|| at.err("relation", "edge id space exhausted"))?;
                let next = self.new_relations.len() as u32;
                let rel = match self.new_relations.get(up.relation.as_str()) {
                    Some(r) => *r,
                    None => *self
                        .new_relations
                        .entry(up.relation.clone())
                        .or_insert(next),
                };
                self.new_edge_keys.insert((from, rel, to), id);
                let EdgeValues {
                    confidence,
                    props,
                    valid_from,
                    valid_to,
                } = EdgeValues::made_by(up);
                Edge {
                    id,
                    from,
                    relation: up.relation.clone(),
                    to,
                    props,
                    confidence,
                    valid_from,
                    valid_to,
                    recorded: ev.recorded_at,
                    last_seen: up.last_seen.unwrap_or(ev.ts),
                    evidence: vec![ev.seq],
                    salience: ev.salience,
                }
            }
        };
        if let (Some(f), Some(t)) = (edge.valid_from, edge.valid_to) {
            if f > t {
                return Err(at.err(
                    "valid_to",
                    format!("validity ends ({t}) before it starts ({f})"),
                ));
            }
        }
        if let Some(index) = &mut self.edges_by_node {
            for end in [edge.from, edge.to] {
                index.entry(end).or_default().push(edge.id);
            }
        }
        self.edges.insert(edge.id, Some(edge));
        Ok(())
    }

    fn retract_node<B: ProjectionBase>(&mut self, base: &B, at: At, key: &str) -> Result<()> {
        let id = self.resolve(base, at, "key", key)?;
        let mut incident: Vec<EdgeId> = base
            .incident_edges(id)
            .into_iter()
            .filter(|e| !matches!(self.edges.get(e), Some(None)))
            .collect();
        let edges = &self.edges;
        let index = self.edges_by_node.get_or_insert_with(|| {
            let mut index: HashMap<NodeId, Vec<EdgeId>, _> = HashMap::default();
            for e in edges.values().flatten() {
                for end in [e.from, e.to] {
                    index.entry(end).or_default().push(e.id);
                }
            }
            index
        });
        // The index lists each edge the batch put, removed since or not; an id's endpoints
        // never change, so what is still there is incident.
        incident.extend(
            index
                .get(&id)
                .into_iter()
                .flatten()
                .filter(|e| matches!(edges.get(e), Some(Some(_)))),
        );
        incident.sort_unstable();
        incident.dedup();
        for e in incident {
            self.edges.insert(e, None);
        }
        self.nodes.insert(id, None);
        Ok(())
    }

    fn retract_edge<B: ProjectionBase>(
        &mut self,
        base: &B,
        at: At,
        from: &str,
        relation: &str,
        to: &str,
    ) -> Result<()> {
        let f = self.resolve(base, at, "from", from)?;
        let t = self.resolve(base, at, "to", to)?;
        let id = self
            .edge_id(base, f, relation, t)
            .ok_or_else(|| at.err("relation", format!("no edge {from} -{relation}-> {to}")))?;
        self.edges.insert(id, None);
        Ok(())
    }
}

/// Refuses a string longer than `max` bytes (see the limits in `model`).
fn check_len(at: At, field: &str, v: &str, max: usize) -> Result<()> {
    if v.len() <= max {
        Ok(())
    } else {
        Err(at.err(
            field,
            format!("{} bytes long; at most {max} bytes are allowed", v.len()),
        ))
    }
}

fn check_unit(at: At, field: &str, v: f32) -> Result<()> {
    if v.is_finite() && (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(at.err(field, format!("{v} is outside [0, 1]")))
    }
}

/// The kinds of the events that pin and unpin nodes, which make none in a replay that skips
/// what deleted events made ([`Missing::Skip`]).
pub(crate) const PIN_KINDS: [&str; 3] = [
    crate::model::kinds::PIN,
    crate::model::kinds::UNPIN,
    crate::journal::PROMOTE,
];

/// Whether `ev` restates what the graph held rather than seeing it again: a summary restates
/// its period's nodes and edges, as the graph held them, and raises no salience (as the most
/// salient event of its day, it had lifted every node and edge of the day to that event's).
/// A node a summary makes (its events forgotten) takes the salience the summary restates
/// (summaries before projection rules 4 gave none: the summary's), an edge the summary's.
fn restates(ev: &Event) -> bool {
    ev.kind == crate::dynamics::consolidate::SUMMARY
}

/// What upserts of a node give it, folded in log order: its label, name, aliases and
/// properties. The one statement of those rules: replay folds a node's upserts by them
/// ([`fold_node_upsert`]), and so do the salience index's text of a node
/// ([`crate::dynamics::salience`]) and the remaking of summaries, which compares what two sets
/// of events give a pinned node (`store::remaking`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NodeValues {
    pub label: String,
    pub name: String,
    pub aliases: Vec<String>,
    pub props: Props,
}

impl NodeValues {
    /// As the upsert that makes a node gives them: an entity's label, and the first alias or
    /// else the key for a name, where it gives none.
    pub fn made_by(up: &NodeUpsert) -> NodeValues {
        let name = (up.name.clone())
            .or_else(|| up.aliases.first().cloned())
            .unwrap_or_else(|| up.key.clone());
        let mut aliases = Vec::new();
        add_aliases(&mut aliases, &name, &up.aliases);
        let mut props = Props::new();
        merge_props(&mut props, &up.props);
        NodeValues {
            label: (up.label.clone()).unwrap_or_else(|| crate::model::labels::ENTITY.to_string()),
            name,
            aliases,
            props,
        }
    }

    /// Folds `up` into `slot`: made by it when `slot` holds none (never upserted, or retracted
    /// since), else taking it as a later upsert.
    pub fn fold(slot: &mut Option<NodeValues>, up: &NodeUpsert) {
        match slot {
            Some(values) => values.take(up),
            None => *slot = Some(NodeValues::made_by(up)),
        }
    }

    /// Whether `other` gives the node the same values, its aliases taken as a set: a summary
    /// restating them after a live note's gives them in another order than the log in time
    /// order does, and nothing of the node is lost (helper-137).
    pub fn same_as(&self, other: &NodeValues) -> bool {
        let set = |v: &NodeValues| {
            v.aliases
                .iter()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>()
        };
        self.label == other.label
            && self.name == other.name
            && self.props == other.props
            && set(self) == set(other)
    }

    /// Takes `up` as a later upsert of the node ([`fold_node_upsert`]).
    pub fn take(&mut self, up: &NodeUpsert) {
        let NodeValues {
            label,
            name,
            aliases,
            props,
        } = self;
        fold_node_upsert([label, name], aliases, props, up);
    }
}

/// What a later upsert of a node sets: the label and name it gives, the aliases it adds (not
/// the name, nor one held), its properties merged in ([`merge_props`]). A name given that is
/// an alias takes it out of the aliases: they never hold the name, whichever order the events
/// giving them come in (a summary restates a node after the live events of its period that
/// follow the forgotten ones it holds: an alias a live note added before the summary named
/// the node by it had stayed, where the log in time order has none; rules 8).
pub(crate) fn fold_node_upsert(
    [label, name]: [&mut String; 2],
    aliases: &mut Vec<String>,
    props: &mut Props,
    up: &NodeUpsert,
) {
    if let Some(l) = &up.label {
        label.clone_from(l);
    }
    if let Some(n) = &up.name {
        name.clone_from(n);
        aliases.retain(|a| a != n);
    }
    add_aliases(aliases, name, &up.aliases);
    merge_props(props, &up.props);
}

/// What upserts of an edge give it, folded in log order: its confidence, properties and
/// validity. Replay folds an edge's upserts by these rules ([`fold_edge_upsert`]), and so
/// does the remaking of summaries, which compares what two sets of events give a belief
/// (`store::remaking`). Not when it was last seen, nor its evidence or salience: those
/// follow the events, not their assertions' values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EdgeValues {
    pub confidence: f32,
    pub props: Props,
    pub valid_from: Option<i64>,
    pub valid_to: Option<i64>,
}

impl EdgeValues {
    /// As the upsert that makes an edge gives them: a confidence of 1 where it gives none.
    pub fn made_by(up: &EdgeUpsert) -> EdgeValues {
        let mut props = Props::new();
        merge_props(&mut props, &up.props);
        EdgeValues {
            confidence: up.confidence.unwrap_or(1.0),
            props,
            valid_from: up.valid_from,
            valid_to: up.valid_to,
        }
    }

    /// Folds `up` into `slot`, as [`NodeValues::fold`] does.
    pub fn fold(slot: &mut Option<EdgeValues>, up: &EdgeUpsert) {
        match slot {
            Some(v) => fold_edge_upsert(
                &mut v.confidence,
                &mut v.props,
                [&mut v.valid_from, &mut v.valid_to],
                up,
            ),
            None => *slot = Some(EdgeValues::made_by(up)),
        }
    }

    /// Whether `edge` holds these values.
    pub fn are_of(&self, edge: &Edge) -> bool {
        self.confidence == edge.confidence
            && self.props == edge.props
            && self.valid_from == edge.valid_from
            && self.valid_to == edge.valid_to
    }
}

/// What a later upsert of an edge sets: the confidence and either end of validity it gives,
/// its properties merged in ([`merge_props`]).
pub(crate) fn fold_edge_upsert(
    confidence: &mut f32,
    props: &mut Props,
    [valid_from, valid_to]: [&mut Option<i64>; 2],
    up: &EdgeUpsert,
) {
    if let Some(c) = up.confidence {
        *confidence = c;
    }
    merge_props(props, &up.props);
    if up.valid_from.is_some() {
        *valid_from = up.valid_from;
    }
    if up.valid_to.is_some() {
        *valid_to = up.valid_to;
    }
}

pub(crate) fn add_aliases(aliases: &mut Vec<String>, name: &str, new: &[String]) {
    for a in new {
        if a != name && !a.trim().is_empty() && !aliases.contains(a) {
            aliases.push(a.clone());
        }
    }
}

pub(crate) fn merge_props(into: &mut Props, from: &Props) {
    for (k, v) in from {
        if *v == Value::Null {
            into.remove(k);
        } else {
            into.insert(k.clone(), v.clone());
        }
    }
}

/// How strictly [`project_batch`] treats assertions about nodes and edges that do not exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Missing {
    /// An error: live ingest refuses an event that names an unknown node.
    Refuse,
    /// Skipped: replay of a log with deleted events, where a later event can name a node that
    /// only a deleted event created. Such an assertion never took effect on the state as it
    /// is after the deletion, which is what this replay computes (see `dynamics::deletion`).
    Skip,
}

impl Overlay {
    /// Drops what the projection needed and applying the batch does not: the lookups of the
    /// batch's new keys and the events' assertions (the events stay, for the folds, the
    /// commit's report and their text documents, which read no assertion). Live ingest calls
    /// it once the log records are made, before the backend's commit: a bulk batch had held
    /// the lookups and the assertions through it, about 300 of the 600 bytes a batch edge
    /// cost at the ingest's peak.
    pub(crate) fn shed_inputs(&mut self) {
        self.new_node_keys = HashMap::default();
        self.new_edge_keys = HashMap::default();
        self.new_relations = HashMap::default();
        self.edges_by_node = None;
        for e in &mut self.events {
            e.assertions = Vec::new();
        }
    }

    /// Whether `assertion` names a node or edge that does not exist (before it applies).
    fn names_missing<B: ProjectionBase>(
        &self,
        base: &B,
        ev: &Event,
        assertion: &Assertion,
    ) -> bool {
        let missing = |key: &str| self.node_id(base, key).is_none();
        match assertion {
            // A pin, unpin or promotion of a node its deleted (or forgotten) events made makes
            // none: it had made a bare one, with its key for a name.
            Assertion::UpsertNode(up) => PIN_KINDS.contains(&ev.kind.as_str()) && missing(&up.key),
            Assertion::UpsertEdge(up) => missing(&up.from) || missing(&up.to),
            Assertion::RetractNode { key } => missing(key),
            Assertion::RetractEdge { from, relation, to } => {
                match (self.node_id(base, from), self.node_id(base, to)) {
                    (Some(f), Some(t)) => self.edge_id(base, f, relation, t).is_none(),
                    _ => true,
                }
            }
        }
    }
}

/// What a refusal of a reference to `key`, which names no live node, says (the store reads it
/// back to tell a faded node from a typo: `Store::why_unknown`).
pub(crate) fn unknown_node(key: &str) -> String {
    format!("unknown node {key:?}")
}

/// Whether `assertion` retracts one of `faded` (a node, an edge, or an edge at a node whose
/// other end is live or faded too: `exists` says which keys name a live node). An edge from a
/// key no event ever made never was, faded end or not (helper-139: it was taken as done).
fn retracts_one_of(
    assertion: &Assertion,
    faded: &std::collections::HashSet<String>,
    exists: impl Fn(&str) -> bool,
) -> bool {
    use crate::dynamics::deletion::{edge_subject, node_subject};
    if faded.is_empty() {
        return false;
    }
    match assertion {
        Assertion::RetractNode { key } => faded.contains(&node_subject(key)),
        Assertion::RetractEdge { from, relation, to } => {
            let end_faded = |key: &str| faded.contains(&node_subject(key));
            let end_known = |key: &str| end_faded(key) || exists(key);
            faded.contains(&edge_subject(from, relation, to))
                || ((end_faded(from) || end_faded(to)) && end_known(from) && end_known(to))
        }
        _ => false,
    }
}

/// What the base says the keys of a batch's assertions name, looked up before the batch (on
/// every core) so that the projection, which must run in order on one thread, does not wait
/// on a cache miss into the node records for every edge end: `[event][assertion]`. Empty, or
/// shorter than the batch, where not known.
pub(crate) type KeyHints = Vec<Vec<Hint>>;

/// What the base says of one assertion's keys (see [`KeyHints`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Hint {
    /// An edge's two ends; a node upsert's node first.
    pub ends: [Option<NodeId>; 2],
    /// For an edge whose two ends the base holds, the base's edge of its relation between
    /// them, if any: the lookup scans the shorter end's list, a cache miss or more into the
    /// adjacency for each edge of a bulk batch.
    pub edge: Option<EdgeId>,
}

/// Validates and projects `events` (already numbered) against `base`; `on_missing` says what
/// an assertion about a missing node does. `first_index` is the position of `events[0]` in
/// the caller's batch, for error messages. The overlay holds no events: the caller keeps
/// them whatever the outcome (live ingest projects them again on a graph replayed from the
/// log when the first base read as damaged).
///
/// `faded` are the nodes and edges ([`crate::dynamics::deletion::subject_upserted`]) that
/// forgetting let fade (every event naming them taken): a retraction of one the graph no longer
/// holds is done already, and skipped, where live ingest refuses a retraction of a node or an
/// edge no event ever made (a typo). Replay skips it too: a store that forgot is replayed
/// with [`Missing::Skip`].
pub(crate) fn project_batch<B: ProjectionBase>(
    base: &B,
    events: &[Event],
    first_index: usize,
    on_missing: Missing,
    hints: &KeyHints,
    faded: &std::collections::HashSet<String>,
) -> Result<Overlay> {
    let mut ov = Overlay::new(base.counters());
    for (i, ev) in events.iter().enumerate() {
        let event = first_index + i;
        let at = At {
            event,
            assertion: None,
        };
        if ev.kind.trim().is_empty() {
            return Err(at.err("kind", "empty event kind"));
        }
        check_len(at, "kind", &ev.kind, MAX_LABEL_BYTES)?;
        check_len(at, "actor", &ev.actor, MAX_KEY_BYTES)?;
        check_unit(at, "salience", ev.salience)?;
        if let Some(key) = &ev.idempotency_key {
            if key.is_empty() {
                return Err(at.err("idempotency_key", "empty idempotency key"));
            }
            check_len(at, "idempotency_key", key, MAX_KEY_BYTES)?;
        }
        for (a, assertion) in ev.assertions.iter().enumerate() {
            let at = At {
                event,
                assertion: Some(a),
            };
            let skips = on_missing == Missing::Skip
                || retracts_one_of(assertion, faded, |key| ov.node_id(base, key).is_some());
            if skips && ov.names_missing(base, ev, assertion) {
                continue;
            }
            match assertion {
                Assertion::UpsertNode(up) => ov.upsert_node(base, at, ev, up)?,
                Assertion::UpsertEdge(up) => {
                    let hint = hints.get(i).and_then(|h| h.get(a)).copied();
                    ov.upsert_edge(base, at, ev, up, hint)?
                }
                Assertion::RetractNode { key } => ov.retract_node(base, at, key)?,
                Assertion::RetractEdge { from, relation, to } => {
                    ov.retract_edge(base, at, from, relation, to)?
                }
            }
        }
        if let Some(place) = &ev.place {
            if on_missing == Missing::Refuse {
                ov.resolve(base, at, "place", place)?;
            }
        }
        ov.counters.last_seq = ev.seq;
    }
    Ok(ov)
}
