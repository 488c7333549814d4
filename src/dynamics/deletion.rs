//! Deletion and forgetting as events.
//!
//! A deletion is an event of kind [`DELETE`] whose payload lists the sequence numbers it
//! deletes. The derived state is defined as the projection of the log *without* the deleted
//! events: an edge keeps the support of its remaining events (confidence, properties and
//! validity recomputed from them, in log order) and disappears when none remain; a node
//! disappears when every event that asserted it is deleted, and with it its edges. A later
//! event that names such a node has that assertion skipped, as if it had never been made.
//! Because live deletion and replay compute the same function of the same log, replay
//! reproduces the state after any sequence of deletions.
//!
//! Deleted events stay in the log until `Store::compact` replaces them with [`TOMBSTONE`]
//! records (sequence number, time and idempotency key only) and rewrites the backend's files
//! and the full-text index, so nothing of their text survives on disk. Reads never return a
//! deleted event, and search never finds one, from the moment of the deletion.
//!
//! Node and edge ids are positions assigned by the projection; a deletion renumbers them
//! (keys are the stable identity of a node, `(from, relation, to)` of an edge).

use std::collections::BTreeSet;

use crate::model::{Assertion, Event, EventDraft, Value};

/// Kind of the event that deletes others.
pub const DELETE: &str = "DELETE";
/// Kind of the record a compaction leaves in place of a deleted event.
pub const TOMBSTONE: &str = "TOMBSTONE";

/// Kinds only the store itself writes: an ingested event of one of these kinds is refused, so
/// no input file can delete anything by accident. A deletion record is never deleted, except
/// that a forgetting deletes the forgettings before it and lists what they deleted (so that
/// periodic forgetting does not pile up records of its own).
pub const RESERVED_KINDS: [&str; 2] = [DELETE, TOMBSTONE];

/// Kinds an ingested event may not have: the reserved ones and `USAGE`, which only reads
/// write (`dynamics::usage`), so that no input can fake what was used; and the pins
/// (`Store::pin`, `journal promote`), which pin nodes that are there and make none, where an
/// ingested one could have made a node that a replay skipping deleted events skips too.
pub const STORE_WRITTEN_KINDS: [&str; 7] = [
    DELETE,
    TOMBSTONE,
    crate::model::kinds::USAGE,
    crate::model::kinds::CONTEXT,
    crate::model::kinds::PIN,
    crate::model::kinds::UNPIN,
    crate::journal::PROMOTE,
];

/// Why events were deleted; recorded in the deletion event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    /// `loci delete`: a user removed something on purpose.
    Delete,
    /// `loci forget`: evicted to keep the store within a budget.
    Forget,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Delete => "delete",
            Reason::Forget => "forget",
        }
    }
}

/// What to delete: events by sequence number, and nodes by key (a node's deletion deletes every
/// event that names it: asserts it, links to it, or has it as actor or place).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct DeleteRequest {
    pub events: Vec<u64>,
    pub nodes: Vec<String>,
}

impl DeleteRequest {
    pub fn events(seqs: impl IntoIterator<Item = u64>) -> Self {
        DeleteRequest {
            events: seqs.into_iter().collect(),
            nodes: Vec::new(),
        }
    }
    pub fn nodes(keys: impl IntoIterator<Item = impl Into<String>>) -> Self {
        DeleteRequest {
            events: Vec::new(),
            nodes: keys.into_iter().map(Into::into).collect(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.nodes.is_empty()
    }
}

/// What a deletion did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeleteReport {
    /// Sequence number of the deletion event.
    pub seq: u64,
    /// The events deleted, ascending.
    pub deleted: Vec<u64>,
    pub nodes_removed: usize,
    pub edges_removed: usize,
    /// Edges that lost some, not all, of their supporting events, and stay.
    pub edges_weakened: usize,
    /// Nodes a deleted event asserted that stay, asserted by events that remain (a later
    /// event giving a value; a pin alone makes no node): a user deleting the event of a
    /// secret learns that its key is still a node, and that `--node` takes a node with every
    /// event naming it.
    #[serde(default)]
    pub nodes_kept: usize,
    /// The first of those keys, in key order ([`NODES_KEPT_LISTED`] at most).
    #[serde(default)]
    pub nodes_kept_keys: Vec<String>,
    /// Of the nodes kept, those pinned before and not after, in key order: a pin event names
    /// every node it pins, and deleted for one of them it unpins the others.
    #[serde(default)]
    pub nodes_unpinned: Vec<String>,
    /// Nodes pinned before that the deletion took, in key order, not counting those the
    /// request names: a pin keeps a node from fading, not from the deletion of every event
    /// that made it (a pin makes no node), and its pin event stays, pointing nowhere until
    /// the node is asserted again.
    #[serde(default)]
    pub pinned_nodes_removed: Vec<String>,
    /// The summaries written again in the deletion's commit, in place of the summaries it
    /// took, without what it deleted: what they restated of the events left (forgotten ones
    /// among them) rests on them still (`Store::summaries_made_again`).
    #[serde(default)]
    pub summaries_made_again: Vec<u64>,
    /// The summaries the deletion took that none made again replaces, ascending: their gist
    /// is gone. The next consolidation summarises a closed period's events left again; what
    /// forgotten events gave a summary is not summarised again, and where a compaction made a
    /// deleted event a tombstone, its part in a summary can no longer be told from the other
    /// events' (taking the summary is what keeps its text out).
    #[serde(default)]
    pub summaries_not_made_again: Vec<u64>,
    /// The `PLACES` event written again in the deletion's commit in place of those it took,
    /// where it took sightings, events at blocks or a place: the places and villages that
    /// emerge from the events left (`store::emerging`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub places_made_again: Option<u64>,
    /// The events the request named, or that name its nodes, that were deleted before it
    /// (by forgetting, most often), ascending: not in `deleted`, since this deletion does not
    /// delete them again; the summaries holding them are among what it took.
    #[serde(default)]
    pub deleted_before: Vec<u64>,
}

/// Keys of the nodes a deletion kept that its report lists, at most.
pub const NODES_KEPT_LISTED: usize = 10;

/// Whether `event` names the node `key`: asserts or retracts it, links to it, has it as actor
/// or place, records a use of it (`dynamics::usage`), or is a saved context that held it
/// (its ids list the key: a deletion for a person's data takes the turns that showed it).
pub fn names_node(event: &Event, key: &str) -> bool {
    crate::dynamics::usage::entries(event)
        .iter()
        .any(|(item, _)| item.names_node(key))
        || saved_context_lists(event, key)
        // A sighting names the place it sees: deleted by its key, a place goes with them, and
        // `emerge` does not make it again.
        || crate::dynamics::places::sighted(event)
            .is_some_and(|(object, block)| crate::dynamics::places::place_key(object, block) == key)
        || event.actor == key
        || event.place.as_deref() == Some(key)
        || event.assertions.iter().any(|a| match a {
            Assertion::UpsertNode(up) => up.key == key,
            Assertion::UpsertEdge(up) => up.from == key || up.to == key,
            Assertion::RetractNode { key: k } => k == key,
            Assertion::RetractEdge { from, to, .. } => from == key || to == key,
        })
}

/// Whether `event` is a saved context (`context::CONTEXT`) whose ids list `key`, or that
/// showed a fact with `key` at an end (its `facts`), as a use of such an edge names it.
fn saved_context_lists(event: &Event, key: &str) -> bool {
    // Read in place: a deletion asks this of every event of the log.
    let Value::Map(m) = &event.payload else {
        return false;
    };
    let end_is_key = |fact: &Value| {
        let Value::Map(f) = fact else {
            return false;
        };
        ["from", "to"]
            .iter()
            .any(|end| f.get(*end).and_then(Value::as_str) == Some(key))
    };
    event.kind == crate::model::kinds::CONTEXT
        && (matches!(m.get("ids"), Some(Value::List(ids)) if ids.iter().any(|id| id.as_str() == Some(key)))
            || matches!(m.get("facts"), Some(Value::List(facts)) if facts.iter().any(end_is_key)))
}

/// The values `event` gives nodes and edges, each as one text naming what it is a value of
/// and the value: a node's label, name, each alias, property, anchor and pin, an edge's
/// confidence, properties and validity. A property set to null gives no value (it removes
/// one). A summary restates the values the graph holds as it is written, so one written after
/// an event may carry the event's values: a deletion takes the summaries that carry a value
/// only deleted events give (`Store::add_summaries_of`).
pub(crate) fn values_given(event: &Event) -> Vec<String> {
    let mut out = Vec::new();
    for a in &event.assertions {
        match a {
            Assertion::UpsertNode(up) => {
                out.extend(node_values(up).into_iter().map(|(_, v)| v));
                out.extend(first_alias_naming(up).map(|(v, _)| v));
            }
            Assertion::UpsertEdge(up) => out.extend(edge_values(up).into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
    out
}

/// The names `event` gives nodes (a name, an alias, a first alias naming a node made without
/// a name), each with the node's key and its value's text ([`values_given`]): a summary made
/// again after a deletion must not name a node by one only deleted events gave.
pub(crate) fn names_given(event: &Event) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for a in &event.assertions {
        if let Assertion::UpsertNode(up) = a {
            let of = |what: &str, name: &String| {
                (
                    up.key.clone(),
                    node_value(&up.key, what, name),
                    name.clone(),
                )
            };
            out.extend(up.name.iter().map(|n| of("name", n)));
            out.extend(up.aliases.iter().map(|a| of("alias", a)));
            out.extend(first_alias_naming(up).map(|(v, a)| (up.key.clone(), v, a.clone())));
        }
    }
    out
}

/// A node made without a name is named by its first alias: that name's value text, and the
/// alias.
fn first_alias_naming(up: &crate::model::NodeUpsert) -> Option<(String, &String)> {
    let alias = up.aliases.first().filter(|_| up.name.is_none())?;
    Some((node_value(&up.key, "name", alias), alias))
}

/// The nodes and edges `event` upserts, each as one text (apart from any value's text): what a
/// summary made again after a deletion restates only where an event left asserts it too.
pub(crate) fn subjects_given(event: &Event) -> Vec<String> {
    event
        .assertions
        .iter()
        .filter_map(subject_upserted)
        .collect()
}

/// The text of the node or edge `assertion` upserts ([`subjects_given`]), if it upserts one.
pub(crate) fn subject_upserted(assertion: &Assertion) -> Option<String> {
    match assertion {
        Assertion::UpsertNode(up) => Some(node_subject(&up.key)),
        Assertion::UpsertEdge(up) => Some(edge_subject(&up.from, &up.relation, &up.to)),
        _ => None,
    }
}

/// The text of node `key` as a subject ([`subjects_given`]).
pub(crate) fn node_subject(key: &str) -> String {
    format!("s\0n\0{key}")
}

/// The text of edge `from -relation-> to` as a subject ([`subjects_given`]).
pub(crate) fn edge_subject(from: &str, relation: &str, to: &str) -> String {
    format!("s\0e\0{from}\0{relation}\0{to}")
}

/// The text of one value of node `key` ([`values_given`]).
fn node_value(key: &str, what: &str, value: &str) -> String {
    format!("n\0{key}\0{what}\0{value}")
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// One field of an upsert that gives a value, to strip it by.
#[derive(Clone, Debug, PartialEq)]
enum Field {
    Label,
    Name,
    Alias(String),
    Anchor,
    Pinned,
    Prop(String),
    Confidence,
    ValidFrom,
    ValidTo,
}

/// Each value a node upsert gives, with its field.
fn node_values(up: &crate::model::NodeUpsert) -> Vec<(Field, String)> {
    let of = |what: &str, value: &str| node_value(&up.key, what, value);
    let mut out = Vec::new();
    out.extend(up.label.iter().map(|l| (Field::Label, of("label", l))));
    out.extend(up.name.iter().map(|n| (Field::Name, of("name", n))));
    out.extend(
        up.aliases
            .iter()
            .map(|a| (Field::Alias(a.clone()), of("alias", a))),
    );
    out.extend(
        up.anchor
            .iter()
            .map(|a| (Field::Anchor, of("anchor", &json(a)))),
    );
    out.extend(
        up.pinned
            .filter(|p| *p)
            .map(|_| (Field::Pinned, of("pinned", "true"))),
    );
    out.extend(props_given(&up.props, of));
    out
}

/// Each value an edge upsert gives, with its field.
fn edge_values(up: &crate::model::EdgeUpsert) -> Vec<(Field, String)> {
    let of = |what: &str, value: &str| {
        format!(
            "e\0{}\0{}\0{}\0{what}\0{value}",
            up.from, up.relation, up.to
        )
    };
    let mut out = Vec::new();
    out.extend(
        up.confidence
            .map(|c| (Field::Confidence, of("confidence", &json(&c)))),
    );
    out.extend(
        up.valid_from
            .map(|t| (Field::ValidFrom, of("valid_from", &t.to_string()))),
    );
    out.extend(
        up.valid_to
            .map(|t| (Field::ValidTo, of("valid_to", &t.to_string()))),
    );
    out.extend(props_given(&up.props, of));
    out
}

/// A node's and an edge's properties alike, each named by `of`. A property set to null gives
/// no value (it removes one).
fn props_given(
    props: &crate::model::Props,
    of: impl Fn(&str, &str) -> String,
) -> Vec<(Field, String)> {
    props
        .iter()
        .filter(|(_, v)| **v != Value::Null)
        .map(|(k, v)| (Field::Prop(k.clone()), of(&format!("prop\0{k}"), &json(v))))
        .collect()
}

/// `assertion` without each value `gone` says must not be restated ([`values_given`]'s texts):
/// what a summary made again after a deletion restates of a node or an edge that stays.
pub(crate) fn without_values(mut assertion: Assertion, gone: impl Fn(&str) -> bool) -> Assertion {
    let fields: Vec<Field> = match &assertion {
        Assertion::UpsertNode(up) => node_values(up),
        Assertion::UpsertEdge(up) => edge_values(up),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|(_, value)| gone(value))
    .map(|(field, _)| field)
    .collect();
    for field in fields {
        match (&mut assertion, field) {
            (Assertion::UpsertNode(up), Field::Label) => up.label = None,
            (Assertion::UpsertNode(up), Field::Name) => up.name = None,
            (Assertion::UpsertNode(up), Field::Alias(a)) => up.aliases.retain(|x| *x != a),
            (Assertion::UpsertNode(up), Field::Anchor) => up.anchor = None,
            (Assertion::UpsertNode(up), Field::Pinned) => up.pinned = None,
            (Assertion::UpsertNode(up), Field::Prop(k)) => {
                up.props.remove(&k);
            }
            (Assertion::UpsertEdge(up), Field::Confidence) => up.confidence = None,
            (Assertion::UpsertEdge(up), Field::ValidFrom) => up.valid_from = None,
            (Assertion::UpsertEdge(up), Field::ValidTo) => up.valid_to = None,
            (Assertion::UpsertEdge(up), Field::Prop(k)) => {
                up.props.remove(&k);
            }
            _ => {}
        }
    }
    assertion
}

/// The deletion event for `deleted`, at world time `ts`.
pub fn deletion_draft(
    ts: i64,
    reason: Reason,
    deleted: &BTreeSet<u64>,
    nodes: &[String],
) -> EventDraft {
    let mut draft = EventDraft::new(ts, "loci", DELETE);
    let mut payload = std::collections::BTreeMap::new();
    payload.insert("reason".to_string(), Value::from(reason.name()));
    payload.insert(
        "deleted".to_string(),
        Value::List(
            deleted
                .iter()
                .map(|s| Value::Int(i64::try_from(*s).unwrap_or(i64::MAX)))
                .collect(),
        ),
    );
    if !nodes.is_empty() {
        // The keys are not copied into the log: a key can itself be what must go (a person's
        // name). The count says a node deletion happened.
        payload.insert("nodes".to_string(), Value::Int(nodes.len() as i64));
    }
    draft.payload = Value::Map(payload);
    // Bookkeeping, not an experience: nothing to score.
    draft.salience = Some(0.0);
    draft
}

/// The sequence numbers a deletion event deletes (none for any other event).
pub fn deleted_by(event: &Event) -> Vec<u64> {
    if event.kind != DELETE {
        return Vec::new();
    }
    let Value::Map(map) = &event.payload else {
        return Vec::new();
    };
    match map.get("deleted") {
        Some(Value::List(items)) => items
            .iter()
            .filter_map(Value::as_i64)
            .filter_map(|s| u64::try_from(s).ok())
            // An event can delete only what came before it.
            .filter(|s| *s < event.seq)
            .collect(),
        _ => Vec::new(),
    }
}

/// Why a deletion event deleted (none for any other event).
pub fn reason_of(event: &Event) -> Option<Reason> {
    if event.kind != DELETE {
        return None;
    }
    let Value::Map(map) = &event.payload else {
        return None;
    };
    match map.get("reason").and_then(Value::as_str) {
        Some("delete") => Some(Reason::Delete),
        Some("forget") => Some(Reason::Forget),
        _ => None,
    }
}

/// The record that replaces a deleted event in a compacted log: its position, times and
/// idempotency key (so a retried batch is still recognised), nothing of its content.
pub fn tombstone(event: &Event) -> Event {
    Event {
        seq: event.seq,
        recorded_at: event.recorded_at,
        ts: event.ts,
        actor: String::new(),
        place: None,
        anchor: None,
        kind: TOMBSTONE.to_string(),
        payload: Value::Null,
        salience: 0.0,
        evidence: Vec::new(),
        assertions: Vec::new(),
        idempotency_key: event.idempotency_key.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deletion_event_lists_what_it_deletes_and_only_earlier_events() {
        let set: BTreeSet<u64> = [3, 5, 40].into_iter().collect();
        let draft = deletion_draft(10, Reason::Delete, &set, &["alice".into()]);
        assert!(!format!("{:?}", draft.payload).contains("alice"));
        let ev = Event::from_draft(20, 0, draft);
        assert_eq!(deleted_by(&ev), vec![3, 5]);
        let mut other = ev.clone();
        other.kind = "OBSERVATION".into();
        assert!(deleted_by(&other).is_empty());
    }
}
