//! Executor: runs a plan's operators over rows of slots, then orders, projects, de-duplicates
//! and limits. Read-only. Row count and time are bounded; exceeding a bound is an error, never
//! a silently truncated answer.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use super::parser::{BinOp, Dir, Expr, Literal, Span};
use super::plan::{Op, Plan};
use super::{Limits, QueryError, QueryResult};
use crate::dynamics::usage::Item;
use crate::model::{same_name, Edge, EdgeId, Event, NodeId, Value};
use crate::storage::Table;
use crate::store::{Facet, GraphRead, Store};
use crate::text::{SearchFilter, Target};

/// Functions the language knows.
pub const FUNCTIONS: &[&str] = &[
    "confidence",
    "provenance",
    "path_cost",
    "path_max",
    "prop",
    "length",
    "nodes",
    "relationships",
    "id",
    "type",
    "label",
    "labels",
    "coalesce",
    "tolower",
    "toupper",
    "size",
    "abs",
    "last_seen",
    "degree",
    "count",
    "min",
    "max",
    "sum",
    "avg",
    "collect",
];

/// How many arguments the function `name` takes, where it takes a set number (not
/// `coalesce`, which takes any, nor the aggregates, checked as RETURN items): checked when a
/// query is planned, as [`Ctx::call`] checks it again on each row.
pub(super) fn arity(name: &str) -> Option<usize> {
    match name {
        "prop" | "path_cost" | "path_max" => Some(2),
        "confidence" | "provenance" | "length" | "nodes" | "relationships" | "id" | "type"
        | "label" | "labels" | "tolower" | "toupper" | "size" | "abs" | "last_seen" | "degree" => {
            Some(1)
        }
        _ => None,
    }
}

/// What `name`'s second argument must be, for the functions whose second argument names
/// something as a string.
pub(super) fn names_a_string(name: &str) -> Option<&'static str> {
    match name {
        "prop" => Some(PROP_TAKES_A_NAME),
        "path_cost" | "path_max" => Some(OVERLAY_IS_A_STRING),
        _ => None,
    }
}

const PROP_TAKES_A_NAME: &str = "prop(x, name): name is a property name as a string";
const OVERLAY_IS_A_STRING: &str =
    "path_cost(p, overlay) and path_max(p, overlay): overlay is a string such as 'distance', \
     'risk', 'darkness' or 'hops'";
pub(super) const SEARCH_TAKES_A_STRING: &str = "SEARCH ... FOR takes a string";
/// As `loci search` refuses a blank text: it could only find nothing.
pub(super) const SEARCH_TEXT_IS_BLANK: &str =
    "SEARCH ... FOR takes a text that is not blank (not only spaces, invisible or control characters)";

/// Functions that aggregate the rows of a group.
pub const AGGREGATES: &[&str] = &["count", "min", "max", "sum", "avg", "collect"];

pub(super) fn is_aggregate(e: &Expr) -> bool {
    matches!(e, Expr::Call(name, ..) if AGGREGATES.contains(&name.as_str()))
}

/// The running value of one aggregate over a group.
enum Acc {
    Count(i64),
    Min(Option<Val>),
    Max(Option<Val>),
    Sum(Sum),
    /// The total and count of the numbers so far, or `None` once a value was not a number.
    Avg(Option<(f64, usize)>),
    Collect(Vec<Val>),
}

/// A running sum: exact while every value is an integer, a float once one is not, and null
/// once a value is not a number (as `+` of a string and a number is: a column of text had
/// summed to 0, a total that reads as real).
#[derive(Clone, Copy)]
enum Sum {
    Ints(i128),
    Floats(f64),
    NotNumbers,
}

impl Acc {
    fn new(name: &str) -> Acc {
        match name {
            "count" => Acc::Count(0),
            "min" => Acc::Min(None),
            "max" => Acc::Max(None),
            "sum" => Acc::Sum(Sum::Ints(0)),
            "avg" => Acc::Avg(Some((0.0, 0))),
            _ => Acc::Collect(Vec::new()),
        }
    }
    /// Adds one row's value; nulls are skipped, as in Cypher.
    fn add(&mut self, v: Val) {
        if v == Val::Null {
            return;
        }
        match self {
            Acc::Count(n) => *n += 1,
            // By ORDER BY's total order, so that values of several types give one answer in
            // any row order; of equal values (1 and 1.0) the integer.
            Acc::Min(m) => {
                if m.as_ref().is_none_or(|x| extreme_order(&v, x).is_lt()) {
                    *m = Some(v);
                }
            }
            Acc::Max(m) => {
                if m.as_ref().is_none_or(|x| extreme_order(&v, x).is_gt()) {
                    *m = Some(v);
                }
            }
            Acc::Sum(total) => {
                *total = match (*total, &v) {
                    // Integers add exactly (in i128, so no row order overflows early); the sum
                    // is null when the result does not fit an i64.
                    (Sum::Ints(t), Val::Int(i)) => Sum::Ints(t.saturating_add(*i as i128)),
                    (Sum::Ints(t), Val::Float(f)) => Sum::Floats(t as f64 + f),
                    (Sum::Floats(t), Val::Int(_) | Val::Float(_)) => {
                        Sum::Floats(t + v.num().unwrap_or(0.0))
                    }
                    _ => Sum::NotNumbers,
                };
            }
            Acc::Avg(sums) => {
                *sums = match (*sums, &v) {
                    (Some((total, n)), Val::Int(_) | Val::Float(_)) => {
                        Some((total + v.num().unwrap_or(0.0), n + 1))
                    }
                    _ => None,
                };
            }
            Acc::Collect(items) => items.push(v),
        }
    }
    fn finish(self) -> Val {
        match self {
            Acc::Count(n) => Val::Int(n),
            Acc::Min(m) | Acc::Max(m) => m.unwrap_or(Val::Null),
            Acc::Sum(Sum::Ints(t)) => i64::try_from(t).map_or(Val::Null, Val::Int),
            Acc::Sum(Sum::Floats(t)) => Val::Float(t),
            Acc::Sum(Sum::NotNumbers) | Acc::Avg(None | Some((_, 0))) => Val::Null,
            Acc::Avg(Some((t, n))) => Val::Float(t / n as f64),
            Acc::Collect(items) => Val::List(items),
        }
    }
}

/// The order `min` and `max` choose by: [`sort_order`], and of equal numbers the integer as
/// the least and the greatest.
fn extreme_order(a: &Val, b: &Val) -> std::cmp::Ordering {
    let float = |v: &Val| matches!(v, Val::Float(_));
    sort_order(a, b).then_with(|| match (float(a), float(b)) {
        (false, true) => std::cmp::Ordering::Less,
        (true, false) => std::cmp::Ordering::Greater,
        _ => std::cmp::Ordering::Equal,
    })
}

fn order_cmp(a: &[Val], b: &[Val], desc: &[bool]) -> std::cmp::Ordering {
    order_cmp_pairs(desc.iter().enumerate().map(|(i, &d)| (&a[i], &b[i], d)))
}

/// ORDER BY's order over the keys of two rows, given as pairs with their directions: nulls
/// last either way.
fn order_cmp_pairs<'v>(keys: impl Iterator<Item = (&'v Val, &'v Val, bool)>) -> std::cmp::Ordering {
    for (a, b, d) in keys {
        let o = match (a, b) {
            (Val::Null, Val::Null) => std::cmp::Ordering::Equal,
            (Val::Null, _) => std::cmp::Ordering::Greater,
            (_, Val::Null) => std::cmp::Ordering::Less,
            (x, y) => {
                let o = sort_order(x, y);
                if d {
                    o.reverse()
                } else {
                    o
                }
            }
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// The total order ORDER BY sorts by: values of different types are ordered by type (booleans,
/// numbers, strings, lists, maps, nodes, edges, events, paths, null), values of one type by
/// value, numbers exactly (an integer against a float by mathematical value), NaN after every
/// other number. A sort needs a total order: "incomparable" treated as equal made the standard
/// sort panic on mixed columns.
fn sort_order(a: &Val, b: &Val) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    fn rank(v: &Val) -> u8 {
        match v {
            Val::Bool(_) => 0,
            Val::Int(_) | Val::Float(_) => 1,
            Val::Str(_) => 2,
            Val::List(_) => 3,
            Val::Map(_) => 4,
            Val::Node(_) => 5,
            Val::Edge(_) => 6,
            Val::Event(_) => 7,
            Val::Path(..) => 8,
            Val::Null => 9,
        }
    }
    match (a, b) {
        (Val::Bool(x), Val::Bool(y)) => x.cmp(y),
        (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => {
            compare_numbers(a, b).unwrap_or_else(|| {
                // Only NaN is unordered: it goes after every number, and equals itself.
                let nan = |v: &Val| matches!(v, Val::Float(f) if f.is_nan());
                nan(a).cmp(&nan(b))
            })
        }
        (Val::Str(x), Val::Str(y)) => x.cmp(y),
        (Val::List(x), Val::List(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| sort_order(p, q))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        (Val::Map(x), Val::Map(y)) => x
            .iter()
            .zip(y)
            .map(|((kp, p), (kq, q))| kp.cmp(kq).then_with(|| sort_order(p, q)))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        (Val::Node(x), Val::Node(y)) => x.cmp(y),
        (Val::Edge(x), Val::Edge(y)) => x.cmp(y),
        (Val::Event(x), Val::Event(y)) => x.seq.cmp(&y.seq),
        (Val::Path(n1, e1), Val::Path(n2, e2)) => n1.cmp(n2).then_with(|| e1.cmp(e2)),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Two numbers compared by mathematical value: integers exactly (not through f64, which
/// cannot tell 2^53 + 1 from 2^53), an integer against a float without rounding either. `None`
/// when either is NaN or not a number.
fn compare_numbers(a: &Val, b: &Val) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering;
    let int_vs_float = |i: i64, f: f64| -> Option<Ordering> {
        if f.is_nan() {
            return None;
        }
        match (i as f64).partial_cmp(&f)? {
            // Equal as floats: `f` is then a whole number within i64's range give or take the
            // rounding of `i`, so it converts to i128 exactly and the integers decide.
            Ordering::Equal => Some((i as i128).cmp(&(f as i128))),
            o => Some(o),
        }
    };
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => Some(x.cmp(y)),
        (Val::Float(x), Val::Float(y)) => x.partial_cmp(y),
        (Val::Int(i), Val::Float(f)) => int_vs_float(*i, *f),
        (Val::Float(f), Val::Int(i)) => int_vs_float(*i, *f).map(Ordering::reverse),
        _ => None,
    }
}

/// A value during execution.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Val>),
    Map(BTreeMap<String, Val>),
    Node(NodeId),
    Edge(EdgeId),
    Event(EventEntry),
    Path(Vec<NodeId>, Vec<EdgeId>),
}

/// An event row's value: the index entry its scan found. Its record is read when a field is
/// asked for (its number and time are the entry's), and checked to be the entry's then. One
/// event is one value whichever index found it: equal by number alone.
#[derive(Clone, Copy, Debug)]
pub struct EventEntry {
    pub seq: u64,
    /// The world time the entry gives.
    pub ts: i64,
    /// The index the entry is of: the time index, or the episodic one.
    pub index: Table,
    /// Its kind and actor where the scan read them from the episodic index (`Op::ScanEvents`
    /// `covered`), by their place among the execution's facet values (`Ctx::facet_values`).
    pub kind: Option<std::num::NonZeroU32>,
    pub actor: Option<std::num::NonZeroU32>,
}

impl PartialEq for EventEntry {
    fn eq(&self, other: &EventEntry) -> bool {
        self.seq == other.seq
    }
}

impl EventEntry {
    /// Gives the entry its value of `facet` (a place among the execution's facet values);
    /// a place is never given (not every event has one).
    fn set_facet(&mut self, facet: Facet, value: Option<std::num::NonZeroU32>) {
        match facet {
            Facet::Kind => self.kind = value,
            Facet::Actor => self.actor = value,
            Facet::Place => {}
        }
    }
}

impl Val {
    /// A literal of the query text as a query value.
    fn from_literal(l: &Literal) -> Val {
        match l {
            Literal::Null => Val::Null,
            Literal::Bool(b) => Val::Bool(*b),
            Literal::Int(i) => Val::Int(*i),
            Literal::Float(f) => Val::Float(*f),
            Literal::Str(s) => Val::Str(s.clone()),
        }
    }

    /// A parameter or property value as a query value.
    pub fn from_value(v: &Value) -> Val {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(*b),
            Value::Int(i) => Val::Int(*i),
            Value::Float(f) => Val::Float(*f),
            Value::Str(s) => Val::Str(s.clone()),
            Value::List(l) => Val::List(l.iter().map(Val::from_value).collect()),
            Value::Map(m) => Val::Map(
                m.iter()
                    .map(|(k, v)| (k.clone(), Val::from_value(v)))
                    .collect(),
            ),
        }
    }
    fn num(&self) -> Option<f64> {
        match self {
            Val::Int(i) => Some(*i as f64),
            Val::Float(f) => Some(*f),
            _ => None,
        }
    }
    fn truthy(&self) -> Option<bool> {
        match self {
            Val::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

struct Ctx<'a> {
    store: &'a Store,
    g: &'a GraphRead<'a>,
    params: &'a HashMap<String, Val>,
    edges: HashMap<EdgeId, Option<Edge>>,
    events: HashMap<u64, Option<Event>>,
    /// The kinds and actors event scans read from the episodic index, each once
    /// ([`EventEntry::kind`]), and where each is.
    facet_values: Vec<String>,
    facet_value_at: HashMap<String, std::num::NonZeroU32>,
    /// Large literal lists on the right of `IN`, as sets, by the address of the list's
    /// expression in the plan (which outlives the execution).
    in_sets: HashMap<usize, std::rc::Rc<InSet>>,
    slots: &'a [String],
    /// The nodes, edges and events the result returns, as usage items (`dynamics::usage`).
    used: Vec<Item>,
}

/// A scalar as `IN` compares it: numbers by value whatever their type, exactly, as [`equal`]
/// does (keyed by their float bits, 2^53 + 1 had been found in [2^53]).
#[derive(Hash, PartialEq, Eq)]
enum InKey {
    Str(String),
    Int(i64),
    Float(u64),
    Bool(bool),
}

impl InKey {
    fn of(v: &Val) -> Option<InKey> {
        Some(match v {
            Val::Str(s) => InKey::Str(s.clone()),
            Val::Bool(b) => InKey::Bool(*b),
            Val::Int(i) => InKey::Int(*i),
            Val::Float(f) => match exact_int(*f) {
                Some(i) => InKey::Int(i),
                // 0.0 and -0.0 are equal numbers with different bits (and both exact_int).
                None => InKey::Float(f.to_bits()),
            },
            _ => return None,
        })
    }
}

/// The list on the right of `IN` as a set, and whether it holds a null (then a value not in
/// it is null, not false: it may be the unknown one).
#[derive(Default)]
struct InSet {
    keys: HashSet<InKey>,
    has_null: bool,
}

/// The integer a float equals, if it equals one that is 64 bits.
fn exact_int(f: f64) -> Option<i64> {
    // 2^63 is exactly representable; i64 holds everything below it and down to -2^63.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    (f.fract() == 0.0 && (-TWO_63..TWO_63).contains(&f)).then_some(f as i64)
}

/// `x IN list` from whether `x` is null, is found, and the list holds a null (as Cypher: null
/// when `x` is null or not found beside a null, for a list that is not empty).
fn in_result(null: bool, found: bool, has_null: bool, empty: bool) -> Val {
    if empty {
        Val::Bool(false)
    } else if null {
        Val::Null
    } else if found {
        Val::Bool(true)
    } else if has_null {
        Val::Null
    } else {
        Val::Bool(false)
    }
}

/// `v` with each float that equals a 64-bit integer as that integer, so that values `=` calls
/// equal are one to grouping (1 and 1.0 were two groups).
fn canonical(v: &Val) -> Val {
    match v {
        Val::Float(f) => exact_int(*f).map_or(Val::Float(*f), Val::Int),
        Val::List(items) => Val::List(items.iter().map(canonical).collect()),
        Val::Map(m) => Val::Map(m.iter().map(|(k, v)| (k.clone(), canonical(v))).collect()),
        other => other.clone(),
    }
}

/// A returned row as DISTINCT compares it: with [`canonical`]'s numbers (1 and 1.0 were two
/// rows).
fn distinct_key(vals: &[serde_json::Value]) -> String {
    fn canonical_json(v: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value as J;
        match v {
            J::Number(n) if n.is_f64() => n
                .as_f64()
                .and_then(exact_int)
                .map_or_else(|| v.clone(), J::from),
            J::Array(items) => J::Array(items.iter().map(canonical_json).collect()),
            J::Object(m) => J::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), canonical_json(v)))
                    .collect(),
            ),
            _ => v.clone(),
        }
    }
    let vals: Vec<serde_json::Value> = vals.iter().map(canonical_json).collect();
    serde_json::to_string(&vals).unwrap_or_default()
}

/// Values of a facet past which an event scan reads its events' kinds or actors from their
/// records, not the episodic index ([`Store::visit_entries_of_values`] seeks once per value).
const MAX_COVERED_VALUES: usize = 10_000;

/// Event records kept at once by one execution.
const EVENT_CACHE: usize = 4096;

/// Lists longer than this on the right of `IN` are looked up through a set.
const IN_SET_MIN: usize = 16;

impl<'a> Ctx<'a> {
    fn edge(&mut self, id: EdgeId) -> Result<Option<&Edge>, QueryError> {
        if !self.edges.contains_key(&id) {
            let e = self.store.edge(id)?;
            self.edges.insert(id, e);
        }
        Ok(self.edges.get(&id).and_then(Option::as_ref))
    }
    /// The facet value at `at` (counted from 1, so that an entry holds it in 4 bytes).
    fn facet_value(&self, at: std::num::NonZeroU32) -> Val {
        let i = at.get() as usize - 1;
        (self.facet_values.get(i)).map_or(Val::Null, |v| Val::Str(v.clone()))
    }

    /// `value`'s place among the facet values, counted from 1, given one if it has none;
    /// `None` past u32 places.
    fn facet_value_at(&mut self, value: String) -> Option<std::num::NonZeroU32> {
        if let Some(&at) = self.facet_value_at.get(&value) {
            return Some(at);
        }
        let at = u32::try_from(self.facet_values.len() + 1).ok()?;
        let at = std::num::NonZeroU32::new(at)?;
        self.facet_values.push(value.clone());
        self.facet_value_at.insert(value, at);
        Some(at)
    }

    fn event(&mut self, at: EventEntry) -> Result<Option<&Event>, QueryError> {
        // Checked against its entry: the scan trusted the index's keys, and an entry a
        // flipped bit gave another event's number is found where its record is read (the
        // other event's record, kept from its own row, is read again and found out).
        let kept =
            (self.events.get(&at.seq)).is_some_and(|e| e.as_ref().is_none_or(|e| e.ts == at.ts));
        if !kept {
            // Rows of an event scan visit each event once or twice in a row; a bounded cache
            // keeps those hits without holding the whole log.
            if self.events.len() >= EVENT_CACHE {
                self.events.clear();
            }
            let e = self.store.event_of_entry(at.index, (at.ts, at.seq))?;
            self.events.insert(at.seq, e);
        }
        Ok(self.events.get(&at.seq).and_then(Option::as_ref))
    }

    fn prop(&mut self, v: &Val, name: &str) -> Result<Val, QueryError> {
        Ok(match v {
            Val::Node(id) => {
                // What is read in place, without decoding the node (see `store/node_table.rs`).
                let id = *id;
                let str_of = |s: Option<&str>| s.map_or(Val::Null, |s| Val::Str(s.to_string()));
                match name {
                    "key" => return Ok(str_of(self.g.node_key(id))),
                    "name" => return Ok(str_of(self.g.node_name(id))),
                    "label" => return Ok(str_of(self.g.node_label(id))),
                    "salience" => {
                        return Ok(self
                            .g
                            .node_salience(id)
                            .map_or(Val::Null, |s| Val::Float(widen(s))))
                    }
                    _ => {}
                }
                let Some(n) = self.g.node(id) else {
                    return Ok(Val::Null);
                };
                let anchor = n.anchor;
                match name {
                    "key" => Val::Str(n.key.clone()),
                    "name" => Val::Str(n.name.clone()),
                    "label" => Val::Str(n.label.clone()),
                    "aliases" => Val::List(n.aliases.iter().cloned().map(Val::Str).collect()),
                    "salience" => Val::Float(widen(n.salience)),
                    "pinned" => Val::Bool(n.pinned),
                    "created" => Val::Int(n.created),
                    "updated" => Val::Int(n.updated),
                    "cx" => anchor.map_or(Val::Null, |a| Val::Int(a.cx as i64)),
                    "cz" => anchor.map_or(Val::Null, |a| Val::Int(a.cz as i64)),
                    "x" | "y" | "z" => {
                        let i = match name {
                            "x" => 0,
                            "y" => 1,
                            _ => 2,
                        };
                        anchor
                            .and_then(|a| a.block)
                            .map_or(Val::Null, |b| Val::Int(b[i] as i64))
                    }
                    other => n.props.get(other).map_or(Val::Null, Val::from_value),
                }
            }
            Val::Edge(id) => {
                if let Some(c) = self.g.edge_core(*id) {
                    let bound = |x: i64, none: i64| if x == none { Val::Null } else { Val::Int(x) };
                    match name {
                        "confidence" => return Ok(Val::Float(widen(c.confidence))),
                        "last_seen" => return Ok(Val::Int(c.last_seen)),
                        "salience" => return Ok(Val::Float(widen(c.salience))),
                        "valid_from" => return Ok(bound(c.valid_from, i64::MIN)),
                        "valid_to" => return Ok(bound(c.valid_to, i64::MAX)),
                        "type" | "relation" => {
                            return Ok(Val::Str(self.g.relation_name(c.relation).to_string()))
                        }
                        _ => {}
                    }
                }
                match self.edge(*id)? {
                    Some(e) => match name {
                        "recorded" => Val::Int(e.recorded),
                        "evidence" => {
                            Val::List(e.evidence.iter().map(|s| Val::Int(*s as i64)).collect())
                        }
                        other => e.props.get(other).map_or(Val::Null, Val::from_value),
                    },
                    None => Val::Null,
                }
            }
            // Every event row comes from a scan of existing events: its number needs no record.
            Val::Event(at) if name == "seq" => Val::Int(at.seq as i64),
            // Nor its time, its index entry's (which a read of its record is checked against):
            // `ORDER BY e.ts` of a long range had read every record to sort them.
            Val::Event(at) if name == "ts" => Val::Int(at.ts),
            // The label an event is matched by (it read as the payload's, mostly null).
            Val::Event(_) if name == "label" => Val::Str(super::plan::EVENT_LABEL.to_string()),
            // Its kind or actor, where its scan read them from the episodic index.
            Val::Event(EventEntry { kind: Some(at), .. }) if name == "kind" => {
                self.facet_value(*at)
            }
            Val::Event(EventEntry {
                actor: Some(at), ..
            }) if name == "actor" => self.facet_value(*at),
            Val::Event(at) => match self.event(*at)? {
                Some(e) => match name {
                    "seq" => Val::Int(e.seq as i64),
                    "ts" => Val::Int(e.ts),
                    "kind" => Val::Str(e.kind.clone()),
                    "actor" => Val::Str(e.actor.clone()),
                    "place" => e.place.clone().map_or(Val::Null, Val::Str),
                    "salience" => Val::Float(widen(e.salience)),
                    "evidence" => Val::List(e.evidence.iter().cloned().map(Val::Str).collect()),
                    "payload" => Val::from_value(&e.payload),
                    "text" => Val::Str(e.text()),
                    "recorded_at" => Val::Int(e.recorded_at),
                    other => match &e.payload {
                        Value::Map(m) => m.get(other).map_or(Val::Null, Val::from_value),
                        _ => Val::Null,
                    },
                },
                None => Val::Null,
            },
            Val::Map(m) => m.get(name).cloned().unwrap_or(Val::Null),
            Val::Path(_, edges) if name == "length" => Val::Int(edges.len() as i64),
            _ => Val::Null,
        })
    }

    fn eval(&mut self, e: &Expr, row: &[Val]) -> Result<Val, QueryError> {
        Ok(match e {
            Expr::Lit(l) => Val::from_literal(l),
            Expr::Param(p) => self
                .params
                .get(p)
                .cloned()
                .ok_or_else(|| QueryError::Param(super::no_value(p)))?,
            Expr::Var(v) => match self.slots.iter().position(|s| s == v) {
                Some(i) => row[i].clone(),
                None => return Err(QueryError::Plan(format!("unknown variable {v}"))),
            },
            Expr::Prop(x, name) => {
                let v = self.eval(x, row)?;
                self.prop(&v, name)?
            }
            Expr::List(items) => Val::List(
                items
                    .iter()
                    .map(|i| self.eval(i, row))
                    .collect::<Result<_, _>>()?,
            ),
            Expr::Not(x) => match self.eval(x, row)?.truthy() {
                Some(b) => Val::Bool(!b),
                None => Val::Null,
            },
            Expr::Neg(x) => negated(self.eval(x, row)?),
            Expr::IsNull(x, negated) => Val::Bool((self.eval(x, row)? == Val::Null) != *negated),
            Expr::Bin(BinOp::In, a, b) if self.in_set(b).is_some() => {
                let a = self.eval(a, row)?;
                let set = self.in_set(b).unwrap_or_default();
                let found = InKey::of(&a).is_some_and(|k| set.keys.contains(&k));
                // A set is made only of a list longer than IN_SET_MIN: never empty.
                in_result(a == Val::Null, found, set.has_null, false)
            }
            Expr::Bin(op, a, b) => {
                let a = self.eval(a, row)?;
                // AND/OR short-circuit with three-valued logic.
                match op {
                    BinOp::And if a.truthy() == Some(false) => return Ok(Val::Bool(false)),
                    BinOp::Or if a.truthy() == Some(true) => return Ok(Val::Bool(true)),
                    _ => {}
                }
                let b = self.eval(b, row)?;
                binary(*op, &a, &b)
            }
            Expr::Call(name, args, at) => {
                let vals: Vec<Val> = args
                    .iter()
                    .map(|a| self.eval(a, row))
                    .collect::<Result<_, _>>()?;
                // A call's refusal of its arguments' values (a parameter's) is placed at it.
                self.call(name, vals).map_err(|e| match e {
                    QueryError::Plan(message) => super::plan::plan_err_at(Some(at.span()), message),
                    other => other,
                })?
            }
        })
    }

    /// The set of a long list of literals, built on first use: `x IN [10,000 keys]` must not
    /// rebuild and scan the list for every row. `None` for other lists, which stay lists.
    fn in_set(&mut self, list: &Expr) -> Option<std::rc::Rc<InSet>> {
        let at = list as *const Expr as usize;
        if let Some(set) = self.in_sets.get(&at) {
            return Some(set.clone());
        }
        let items = match list {
            Expr::List(items) if items.len() > IN_SET_MIN => items,
            // A list parameter is as constant as a literal, and as costly to copy per row.
            Expr::Param(p) => match self.params.get(p) {
                Some(Val::List(vals)) if vals.len() > IN_SET_MIN => {
                    let keys = vals
                        .iter()
                        .filter(|v| **v != Val::Null)
                        .map(InKey::of)
                        .collect::<Option<HashSet<_>>>()?;
                    let has_null = vals.contains(&Val::Null);
                    let set = std::rc::Rc::new(InSet { keys, has_null });
                    self.in_sets.insert(at, set.clone());
                    return Some(set);
                }
                _ => return None,
            },
            _ => return None,
        };
        let mut set = HashSet::with_capacity(items.len());
        let mut has_null = false;
        for i in items {
            match i {
                // A null item never equals anything, so it is not part of the set.
                Expr::Lit(Literal::Null) => has_null = true,
                Expr::Lit(Literal::Str(s)) => {
                    set.insert(InKey::Str(s.clone()));
                }
                Expr::Lit(Literal::Bool(b)) => {
                    set.insert(InKey::Bool(*b));
                }
                Expr::Lit(Literal::Int(x)) => {
                    set.insert(InKey::of(&Val::Int(*x))?);
                }
                Expr::Lit(Literal::Float(x)) => {
                    set.insert(InKey::of(&Val::Float(*x))?);
                }
                _ => return None,
            }
        }
        let set = std::rc::Rc::new(InSet {
            keys: set,
            has_null,
        });
        self.in_sets.insert(at, set.clone());
        Some(set)
    }

    fn call(&mut self, name: &str, args: Vec<Val>) -> Result<Val, QueryError> {
        let arity = |n: usize| -> Result<(), QueryError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(QueryError::Plan(format!(
                    "{name}() takes {n} argument(s), got {}",
                    args.len()
                )))
            }
        };
        let edges_of = |v: &Val| -> Vec<EdgeId> {
            match v {
                Val::Edge(e) => vec![*e],
                Val::Path(_, es) => es.clone(),
                Val::List(items) => items
                    .iter()
                    .filter_map(|i| if let Val::Edge(e) = i { Some(*e) } else { None })
                    .collect(),
                _ => Vec::new(),
            }
        };
        Ok(match name {
            "confidence" => {
                arity(1)?;
                let edges = edges_of(&args[0]);
                if edges.is_empty() {
                    Val::Null
                } else {
                    // A path is as believable as the product of its edges, each decayed to
                    // the latest event time (`e.confidence` reads the stored value).
                    let mut c = 1.0f64;
                    for e in edges {
                        c *= self.g.effective_confidence(e, None).map_or(0.0, widen);
                    }
                    Val::Float(c)
                }
            }
            "prop" => {
                arity(2)?;
                let Val::Str(key) = &args[1] else {
                    return Err(QueryError::Plan(PROP_TAKES_A_NAME.into()));
                };
                // User properties only, never a built-in field of the same name.
                match &args[0] {
                    Val::Node(n) => self
                        .g
                        .node(*n)
                        .and_then(|n| n.props.get(key).map(Val::from_value))
                        .unwrap_or(Val::Null),
                    Val::Edge(e) => self
                        .edge(*e)?
                        .and_then(|e| e.props.get(key))
                        .map_or(Val::Null, Val::from_value),
                    Val::Event(at) => match self.event(*at)?.map(|e| &e.payload) {
                        Some(Value::Map(m)) => m.get(key).map_or(Val::Null, Val::from_value),
                        _ => Val::Null,
                    },
                    Val::Map(m) => m.get(key).cloned().unwrap_or(Val::Null),
                    _ => Val::Null,
                }
            }
            "last_seen" => {
                arity(1)?;
                self.prop(&args[0], "last_seen")?
            }
            "provenance" => {
                arity(1)?;
                let mut seqs = Vec::new();
                for e in edges_of(&args[0]) {
                    if let Some(edge) = self.edge(e)? {
                        for s in &edge.evidence {
                            if !seqs.contains(s) {
                                seqs.push(*s);
                            }
                        }
                    }
                }
                Val::List(seqs.into_iter().map(|s| Val::Int(s as i64)).collect())
            }
            "path_cost" | "path_max" => {
                arity(2)?;
                let Val::Str(overlay) = &args[1] else {
                    return Err(QueryError::Plan(OVERLAY_IS_A_STRING.into()));
                };
                // The cost of what is not a path, or one no step of the path carries (a
                // misspelt overlay), is unknown: null, not a plausible 0 that would reorder
                // an ORDER BY without a word.
                let steps = match &args[0] {
                    Val::Edge(_) | Val::Path(..) => true,
                    // A relation list (`relationships(p)`, a `[r*]` variable); a list of no
                    // steps costs 0, one holding anything but relations is no path.
                    Val::List(items) => items.iter().all(|i| matches!(i, Val::Edge(_))),
                    _ => false,
                };
                if !steps {
                    return Ok(Val::Null);
                }
                let mut costs = Vec::new();
                let mut carried = false;
                for e in edges_of(&args[0]) {
                    costs.push(match overlay.as_str() {
                        "hops" => Some(1.0),
                        // The same overlay as the place-graph routes of `crate::queries`.
                        "darkness" => Some(crate::queries::darkness(
                            self.prop(&Val::Edge(e), "light")?.num(),
                        )),
                        other => self.prop(&Val::Edge(e), other)?.num(),
                    });
                    carried |= costs.last().is_some_and(Option::is_some);
                }
                if !costs.is_empty() && !carried {
                    return Ok(Val::Null);
                }
                // A step without it among steps with it counts 0, as in the route searches.
                let costs: Vec<f64> = costs.into_iter().map(|c| c.unwrap_or(0.0)).collect();
                // Sums of decimal properties carry binary noise (0.1 + 0.2); nine decimals is
                // far below any cost a planner compares.
                // Adding 0.0 turns the -0.0 of an empty sum (a path of no steps) into 0.0.
                let tidy = |x: f64| (x * 1e9).round() / 1e9 + 0.0;
                if name == "path_cost" {
                    Val::Float(tidy(costs.iter().sum()))
                } else {
                    costs
                        .into_iter()
                        .reduce(f64::max)
                        .map_or(Val::Null, |x| Val::Float(tidy(x)))
                }
            }
            "length" => {
                arity(1)?;
                match &args[0] {
                    Val::Path(_, es) => Val::Int(es.len() as i64),
                    Val::List(l) => Val::Int(l.len() as i64),
                    Val::Edge(_) => Val::Int(1),
                    _ => Val::Null,
                }
            }
            "nodes" => {
                arity(1)?;
                match &args[0] {
                    Val::Path(ns, _) => Val::List(ns.iter().map(|n| Val::Node(*n)).collect()),
                    _ => Val::Null,
                }
            }
            "relationships" => {
                arity(1)?;
                Val::List(edges_of(&args[0]).into_iter().map(Val::Edge).collect())
            }
            "id" => {
                arity(1)?;
                match &args[0] {
                    Val::Node(n) => self
                        .g
                        .node_key(*n)
                        .map_or(Val::Null, |k| Val::Str(k.to_string())),
                    Val::Edge(e) => Val::Str(e.to_string()),
                    Val::Event(at) => Val::Int(at.seq as i64),
                    _ => Val::Null,
                }
            }
            "type" => {
                arity(1)?;
                self.prop(&args[0], "type")?
            }
            "label" => {
                arity(1)?;
                self.prop(&args[0], "label")?
            }
            "labels" => {
                arity(1)?;
                match self.prop(&args[0], "label")? {
                    Val::Str(s) => Val::List(vec![Val::Str(s)]),
                    _ => Val::Null,
                }
            }
            "degree" => {
                arity(1)?;
                match &args[0] {
                    Val::Node(n) => Val::Int(self.g.adjacency().degree(*n) as i64),
                    _ => Val::Null,
                }
            }
            "coalesce" => args
                .into_iter()
                .find(|a| *a != Val::Null)
                .unwrap_or(Val::Null),
            "tolower" | "toupper" => {
                arity(1)?;
                match &args[0] {
                    Val::Str(s) if name == "tolower" => Val::Str(s.to_lowercase()),
                    Val::Str(s) => Val::Str(s.to_uppercase()),
                    _ => Val::Null,
                }
            }
            "size" => {
                arity(1)?;
                match &args[0] {
                    Val::Str(s) => Val::Int(s.chars().count() as i64),
                    Val::List(l) => Val::Int(l.len() as i64),
                    _ => Val::Null,
                }
            }
            "abs" => {
                arity(1)?;
                match &args[0] {
                    Val::Int(i) => i.checked_abs().map_or(Val::Null, Val::Int),
                    Val::Float(f) => Val::Float(f.abs()),
                    _ => Val::Null,
                }
            }
            agg if AGGREGATES.contains(&agg) => {
                return Err(QueryError::Plan(format!(
                    "{agg}() aggregates rows: use it as a whole RETURN item"
                )))
            }
            other => return Err(QueryError::Plan(format!("unknown function {other}()"))),
        })
    }
}

/// A breadth-first walk of [`Run::walk_breadth_first`]: from `start`, rows at
/// `min..=until` hops.
struct Walk {
    start: NodeId,
    min: u32,
    until: u32,
    /// The relation is read either way (a self-loop is then listed twice).
    either: bool,
    /// The pattern runs from the row's `to` to its `from`: the path is bound reversed.
    backwards: bool,
}

/// An f32 as the f64 with the same shortest decimal form (0.95f32 -> 0.95, not 0.949999988).
fn widen(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(x as f64)
}

fn compare(a: &Val, b: &Val) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Val::Str(x), Val::Str(y)) => Some(x.cmp(y)),
        (Val::Bool(x), Val::Bool(y)) => Some(x.cmp(y)),
        _ => compare_numbers(a, b),
    }
}

fn equal(a: &Val, b: &Val) -> Option<bool> {
    match (a, b) {
        (Val::Null, _) | (_, Val::Null) => None,
        (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => {
            Some(compare_numbers(a, b) == Some(std::cmp::Ordering::Equal))
        }
        // Item by item, as `=` compares them: unequal if any pair is, else unknown if any
        // pair is (a null), else equal. `[1] = [1.0]` was false where `1 = 1.0` is true.
        (Val::List(x), Val::List(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            equal_pairs(x.iter().zip(y))
        }
        // Entry by entry, as lists compare item by item: `{a: 1} = {a: 1.0}` was false.
        (Val::Map(x), Val::Map(y)) => {
            if x.len() != y.len() || x.keys().ne(y.keys()) {
                return Some(false);
            }
            equal_pairs(x.values().zip(y.values()))
        }
        _ => Some(a == b),
    }
}

/// `=` over pairs of items: unequal if any pair is, else unknown if any pair is (a null),
/// else equal.
fn equal_pairs<'v>(pairs: impl Iterator<Item = (&'v Val, &'v Val)>) -> Option<bool> {
    let mut known = true;
    for (p, q) in pairs {
        match equal(p, q) {
            Some(false) => return Some(false),
            None => known = false,
            Some(true) => {}
        }
    }
    known.then_some(true)
}

fn binary(op: BinOp, a: &Val, b: &Val) -> Val {
    use std::cmp::Ordering::*;
    let ord = |want: &[std::cmp::Ordering]| {
        compare(a, b).map_or(Val::Null, |o| Val::Bool(want.contains(&o)))
    };
    match op {
        BinOp::And => match (a.truthy(), b.truthy()) {
            (Some(false), _) | (_, Some(false)) => Val::Bool(false),
            (Some(true), Some(true)) => Val::Bool(true),
            _ => Val::Null,
        },
        BinOp::Or => match (a.truthy(), b.truthy()) {
            (Some(true), _) | (_, Some(true)) => Val::Bool(true),
            (Some(false), Some(false)) => Val::Bool(false),
            _ => Val::Null,
        },
        BinOp::Eq => equal(a, b).map_or(Val::Null, Val::Bool),
        BinOp::Ne => equal(a, b).map_or(Val::Null, |x| Val::Bool(!x)),
        BinOp::Lt => ord(&[Less]),
        BinOp::Le => ord(&[Less, Equal]),
        BinOp::Gt => ord(&[Greater]),
        BinOp::Ge => ord(&[Greater, Equal]),
        BinOp::In => match b {
            Val::List(items) => in_result(
                *a == Val::Null,
                items.iter().any(|i| equal(a, i) == Some(true)),
                items.contains(&Val::Null),
                items.is_empty(),
            ),
            _ => Val::Null,
        },
        BinOp::StartsWith | BinOp::EndsWith | BinOp::Contains => match (a, b) {
            (Val::Str(x), Val::Str(y)) => Val::Bool(match op {
                BinOp::StartsWith => x.starts_with(y.as_str()),
                BinOp::EndsWith => x.ends_with(y.as_str()),
                _ => x.contains(y.as_str()),
            }),
            _ => Val::Null,
        },
        BinOp::Add => match (a, b) {
            (Val::Int(x), Val::Int(y)) => x.checked_add(*y).map_or(Val::Null, Val::Int),
            (Val::Str(x), Val::Str(y)) => Val::Str(format!("{x}{y}")),
            (Val::List(x), Val::List(y)) => Val::List(x.iter().chain(y).cloned().collect()),
            _ => num_op(a, b, |x, y| x + y),
        },
        BinOp::Sub => match (a, b) {
            (Val::Int(x), Val::Int(y)) => x.checked_sub(*y).map_or(Val::Null, Val::Int),
            _ => num_op(a, b, |x, y| x - y),
        },
        BinOp::Mul => match (a, b) {
            (Val::Int(x), Val::Int(y)) => x.checked_mul(*y).map_or(Val::Null, Val::Int),
            _ => num_op(a, b, |x, y| x * y),
        },
        BinOp::Div => match (a, b) {
            (Val::Int(_), Val::Int(0)) => Val::Null,
            (Val::Int(x), Val::Int(y)) => x.checked_div(*y).map_or(Val::Null, Val::Int),
            _ => num_op(a, b, |x, y| x / y),
        },
        BinOp::Mod => match (a, b) {
            (Val::Int(_), Val::Int(0)) => Val::Null,
            // Any integer's remainder by -1 is 0; `checked_rem` refuses i64::MIN % -1 only
            // because the quotient would overflow.
            (Val::Int(_), Val::Int(-1)) => Val::Int(0),
            (Val::Int(x), Val::Int(y)) => x.checked_rem(*y).map_or(Val::Null, Val::Int),
            _ => num_op(a, b, |x, y| x % y),
        },
    }
}

fn num_op(a: &Val, b: &Val, f: impl Fn(f64, f64) -> f64) -> Val {
    match (a.num(), b.num()) {
        (Some(x), Some(y)) => {
            let r = f(x, y);
            if r.is_finite() {
                Val::Float(r)
            } else {
                Val::Null
            }
        }
        _ => Val::Null,
    }
}

/// `-v`: null for what is no number, and for the negation of `i64::MIN`, which has none.
fn negated(v: Val) -> Val {
    match v {
        Val::Int(i) => i.checked_neg().map_or(Val::Null, Val::Int),
        Val::Float(f) => Val::Float(-f),
        _ => Val::Null,
    }
}

/// LIMIT's value `v` as a count of rows, refused unless a non-negative integer.
fn limit_of(v: Val, plan: &Plan) -> Result<usize, QueryError> {
    match v {
        Val::Int(n) if n >= 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        other => Err(super::plan::plan_err_at(
            plan.limit_at,
            format!(
                "LIMIT takes a non-negative integer, got {}",
                as_written(&other)
            ),
        )),
    }
}

/// Refuses the LIMIT a run would refuse where the plan tells it without a store (a literal
/// or a parameter given): `--explain` had shown the plan of a query its run then refused.
pub(crate) fn check_known_limit(
    plan: &Plan,
    params: &HashMap<String, Val>,
) -> Result<(), QueryError> {
    // Evaluated as the run evaluates them (`Val::from_literal`, `negated`).
    let known = |e: &Expr| match e {
        Expr::Param(p) => params.get(p).cloned(),
        Expr::Lit(l) => Some(Val::from_literal(l)),
        _ => None,
    };
    let known = match &plan.limit {
        Some(Expr::Neg(e)) => known(e).map(negated),
        Some(e) => known(e),
        None => None,
    };
    match known {
        Some(v) => limit_of(v, plan).map(|_| ()),
        None => Ok(()),
    }
}

/// A value refused (by LIMIT, by SEARCH), as its user wrote it (not as Rust's `Debug` prints
/// it).
fn as_written(v: &Val) -> String {
    match v {
        Val::Null => "null".into(),
        Val::Bool(b) => b.to_string(),
        Val::Int(n) => n.to_string(),
        // Rust's Display writes 1.0 as "1" and 1e20 as twenty-one digits, which read as the
        // integer LIMIT asks for; Debug writes "1.0" and "1e20".
        Val::Float(f) => format!("{f:?}"),
        Val::Str(s) => crate::error::quoted_excerpt(s),
        Val::List(_) => "a list".into(),
        Val::Map(_) => "a map".into(),
        Val::Node(_) => "a node".into(),
        Val::Edge(_) => "an edge".into(),
        Val::Event(_) => "an event".into(),
        Val::Path(..) => "a path".into(),
    }
}

fn to_json(ctx: &mut Ctx<'_>, v: &Val) -> Result<serde_json::Value, QueryError> {
    use serde_json::json;
    Ok(match v {
        Val::Null => serde_json::Value::Null,
        Val::Bool(b) => json!(b),
        Val::Int(i) => json!(i),
        Val::Float(f) => json!(f),
        Val::Str(s) => json!(s),
        Val::List(l) => serde_json::Value::Array(
            l.iter()
                .map(|x| to_json(ctx, x))
                .collect::<Result<_, _>>()?,
        ),
        Val::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, x) in m {
                out.insert(k.clone(), to_json(ctx, x)?);
            }
            serde_json::Value::Object(out)
        }
        Val::Node(n) => match ctx.g.node(*n) {
            Some(n) => {
                ctx.used.push(Item::Node(n.key.clone()));
                json!({"key": n.key, "name": n.name, "label": n.label})
            }
            None => serde_json::Value::Null,
        },
        Val::Edge(e) => match ctx.g.edge_core(*e) {
            Some(c) => {
                ctx.used.extend(ctx.g.edge_item(*e));
                json!({
                "id": e.to_string(),
                "from": ctx.g.node(c.from).map(|n| n.key.clone()),
                "type": ctx.g.relation_name(c.relation),
                "to": ctx.g.node(c.to).map(|n| n.key.clone()),
                "confidence": widen(c.confidence),
                })
            }
            None => serde_json::Value::Null,
        },
        Val::Event(at) => match ctx.event(*at)? {
            Some(e) => {
                let json = json!({"seq": e.seq, "ts": e.ts, "kind": e.kind, "place": e.place});
                ctx.used.push(Item::Event(at.seq));
                json
            }
            None => serde_json::Value::Null,
        },
        Val::Path(ns, es) => {
            ctx.used
                .extend(ns.iter().filter_map(|n| ctx.g.node_item(*n)));
            ctx.used
                .extend(es.iter().filter_map(|e| ctx.g.edge_item(*e)));
            json!({
            "nodes": ns.iter().map(|n| ctx.g.node(*n).map(|x| x.key.clone())).collect::<Vec<_>>(),
            "edges": es.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            })
        }
    })
}

struct Guard {
    started: Instant,
    limits: Limits,
    ticks: std::cell::Cell<u32>,
    /// Bytes of result values so far (see [`Limits::max_result_bytes`]).
    bytes: std::cell::Cell<usize>,
    /// Bytes of the values held beside the rows: ORDER BY's keys and the grouping keys, each
    /// a value per row or group (see [`Limits::max_intermediate_bytes`]).
    held: std::cell::Cell<usize>,
    /// Bytes one intermediate row takes: a value for every variable (and the row's vector), so
    /// many rows of a wide pattern are bounded by [`Limits::max_intermediate_bytes`].
    row_bytes: usize,
}

impl Guard {
    /// Counts `v` against the result byte budget.
    fn spend(&self, v: &Val) -> Result<(), QueryError> {
        self.spend_bytes(approx_bytes(v))
    }

    /// Counts `n` bytes of results against their budget.
    fn spend_bytes(&self, n: usize) -> Result<(), QueryError> {
        add_within(&self.bytes, n, self.limits.max_result_bytes, |most| {
            format!("results larger than {most} bytes; return fewer or smaller values")
        })
    }

    /// Gives back `n` bytes [`Guard::hold`] counted, of values no longer held.
    fn release(&self, n: usize) {
        self.held.set(self.held.get().saturating_sub(n));
    }

    /// Counts `n` bytes of values held beside the rows (sort and grouping keys) against the
    /// intermediate byte bound: the rows are bounded, but a key read from a 4 MB property for
    /// each of them had taken 2 GB.
    fn hold(&self, n: usize) -> Result<(), QueryError> {
        add_within(&self.held, n, self.limits.max_intermediate_bytes, |most| {
            format!("more than {most} bytes of intermediate values (the keys rows are sorted or grouped by); sort or group by smaller values, or narrow the pattern")
        })
    }

    /// Checks that `n` rows of one operator are within the row and byte limits.
    fn rows(&self, n: usize) -> Result<(), QueryError> {
        if n > self.limits.max_rows {
            return Err(QueryError::LimitExceeded(format!(
                "more than {} intermediate rows; narrow the pattern (a label, a key or property, fewer hops)",
                self.limits.max_rows
            )));
        }
        if n.saturating_mul(self.row_bytes) > self.limits.max_intermediate_bytes {
            return Err(QueryError::LimitExceeded(format!(
                "more than {} bytes of intermediate rows ({n} rows of {} bytes: a value for each of the pattern's variables); narrow the pattern (a label, a key or property, fewer hops)",
                self.limits.max_intermediate_bytes, self.row_bytes
            )));
        }
        self.time()
    }

    fn timed_out(&self) -> bool {
        self.started.elapsed() > self.limits.timeout
    }

    fn time(&self) -> Result<(), QueryError> {
        if self.timed_out() {
            return Err(QueryError::LimitExceeded(format!(
                "ran longer than {} ms; narrow the pattern (a label, a key or property, fewer hops)",
                self.limits.timeout.as_millis()
            )));
        }
        Ok(())
    }

    /// Called once per row by every loop over rows: a single row's work is bounded, so looking
    /// at the clock every few rows bounds the overrun without paying for it on each row.
    fn tick(&self) -> Result<(), QueryError> {
        let t = self.ticks.get().wrapping_add(1);
        self.ticks.set(t);
        if t.is_multiple_of(16) {
            self.time()
        } else {
            Ok(())
        }
    }
}

/// Adds `n` to the running count `total`, and refuses a count over `most` with the limit
/// error `over(most)` says.
fn add_within(
    total: &std::cell::Cell<usize>,
    n: usize,
    most: usize,
    over: impl FnOnce(usize) -> String,
) -> Result<(), QueryError> {
    let sum = total.get().saturating_add(n);
    total.set(sum);
    if sum > most {
        return Err(QueryError::LimitExceeded(over(most)));
    }
    Ok(())
}

fn contains_edge(v: &Val, e: EdgeId) -> bool {
    match v {
        Val::Edge(x) => *x == e,
        Val::Path(_, es) => es.contains(&e),
        _ => false,
    }
}

/// Rows handed from one operator to the next at a time when LIMIT may end the query early.
const BATCH: usize = 64;
/// Streaming hands each batch on by recursion, one level per operator; longer plans (rare:
/// each relation or node constraint is one operator) run operator after operator instead.
const STREAM_MAX_OPS: usize = 16;

/// Whether the operators upstream should keep producing rows.
#[derive(PartialEq)]
enum Flow {
    More,
    Stop,
}

/// The rows one operator produced and has not handed on yet.
struct Produced {
    /// The operator's index in the plan.
    op: usize,
    rows: Vec<Vec<Val>>,
    /// Whether the operator reads the graph, the log or the index: its rows count as scanned.
    source: bool,
}

/// A scan of events: its `from` and `to` times and its facet, as the plan took them from
/// `WHERE`.
type EventRange<'e> = (
    Option<&'e Expr>,
    Option<&'e Expr>,
    Option<&'e (Facet, Expr)>,
);

/// Hands `$row` on through [`Run::emit`], and stops the operator when the answer is complete.
macro_rules! emit {
    ($run:expr, $out:expr, $row:expr) => {
        if $run.emit($out, $row)? == Flow::Stop {
            return Ok(Flow::Stop);
        }
    };
    // A copy of `$row` with `$slot` bound to `$value`.
    ($run:expr, $out:expr, $row:expr, $slot:expr => $value:expr) => {{
        let mut bound = $row.clone();
        bound[$slot] = $value;
        emit!($run, $out, bound);
    }};
}

/// One execution: operators pass rows depth-first, a batch at a time when the answer can stop
/// early (LIMIT without ORDER BY or aggregates), else the whole output of one operator at once.
struct Run<'a, 'p> {
    ctx: Ctx<'a>,
    store: &'a Store,
    plan: &'p Plan,
    guard: &'p Guard,
    batch: usize,
    /// Rows each operator has produced so far, for the row limit.
    produced: Vec<usize>,
    examined: usize,
    scanned: usize,
    /// Streaming: the projected answer so far.
    limit: Option<usize>,
    out: Vec<Vec<serde_json::Value>>,
    seen: HashSet<String>,
    /// Not streaming: every matched row.
    matched: Vec<Vec<Val>>,
    /// ORDER BY (no aggregate): the rows that sort first so far with their keys, in place of
    /// every matched row.
    first: Option<FirstRows>,
}

/// The first `keep` rows in ORDER BY's order of those given so far, each with its sort keys
/// (every row, for a `keep` of `usize::MAX`): rows are kept as they come, and once twice as
/// many are held (or 4,096 more) they are sorted and the rest dropped. Stable, as the sort of every row is: a row kept stands before
/// any that comes later, so ties stay in the order they came. The saved timeline over all of
/// a 980k-event store had held every row and its keys to return 1,000 (393 MB).
struct FirstRows {
    keep: usize,
    desc: Vec<bool>,
    keyed: Vec<(Vec<Val>, Vec<Val>)>,
}

impl FirstRows {
    fn add(&mut self, keys: Vec<Val>, row: Vec<Val>, guard: &Guard) {
        self.keyed.push((keys, row));
        if self.keyed.len() >= self.keep.saturating_add(self.keep.max(4096)) {
            self.cut(guard);
        }
    }

    /// Sorts the rows held and drops those past `keep`, their keys' bytes given back.
    fn cut(&mut self, guard: &Guard) {
        let desc = &self.desc;
        self.keyed.sort_by(|(a, _), (b, _)| order_cmp(a, b, desc));
        let dropped: usize = (self.keyed.iter().skip(self.keep))
            .map(|(keys, _)| keys.iter().map(held_bytes).sum::<usize>())
            .sum();
        self.keyed.truncate(self.keep);
        guard.release(dropped);
    }
}

impl Run<'_, '_> {
    /// Hands `rows` to operator `i` and what it produces on to the next ones (or to the
    /// answer, past the last one). Recursive only through full batches when streaming, so at
    /// most [`STREAM_MAX_OPS`] deep.
    fn feed(&mut self, mut i: usize, mut rows: Vec<Vec<Val>>) -> Result<Flow, QueryError> {
        loop {
            if rows.is_empty() {
                return Ok(Flow::More);
            }
            if i == self.plan.ops.len() {
                return self.answer(rows);
            }
            match self.step(i, rows)? {
                Some(next) => {
                    rows = next;
                    i += 1;
                }
                None => return Ok(Flow::Stop),
            }
        }
    }

    /// Runs operator `i` over `rows`: the rows it produced and has not yet handed on, or `None`
    /// when the answer is complete.
    fn step(&mut self, i: usize, rows: Vec<Vec<Val>>) -> Result<Option<Vec<Vec<Val>>>, QueryError> {
        let plan = self.plan;
        let op = &plan.ops[i];
        let mut out = Produced {
            op: i,
            rows: Vec::new(),
            source: matches!(
                op,
                Op::Search { .. }
                    | Op::LookupKey { .. }
                    | Op::LookupName { .. }
                    | Op::ScanLabel { .. }
                    | Op::ScanAll { .. }
                    | Op::ScanEvents { .. }
            ),
        };
        let flow = match op {
            Op::Search {
                slot,
                text,
                limit,
                text_at,
            } => self.search(&mut out, &rows, *slot, (text, *text_at), *limit)?,
            Op::LookupKey { slot, key } => self.lookup_key(&mut out, &rows, *slot, key)?,
            Op::LookupName { slot, name } => self.lookup_name(&mut out, &rows, *slot, name)?,
            Op::ScanLabel { slot, labels } => self.scan_label(&mut out, &rows, *slot, labels)?,
            Op::ScanAll { slot } => self.scan_all(&mut out, &rows, *slot)?,
            Op::ScanEvents {
                slot,
                from,
                to,
                facet,
                covered,
            } => {
                let range = (from.as_ref(), to.as_ref(), facet.as_ref());
                self.scan_events(&mut out, &rows, *slot, range, covered)?
            }
            Op::CheckNode {
                slot,
                labels,
                props,
            } => self.check_node(&mut out, rows, *slot, labels, props)?,
            Op::Expand { .. } => self.expand(&mut out, &rows, op)?,
            Op::BindPath { slot, nodes, rels } => {
                self.bind_path(&mut out, rows, *slot, nodes, rels)?
            }
            Op::Filter(e) => self.filter(&mut out, rows, e)?,
        };
        if flow == Flow::Stop {
            return Ok(None);
        }
        self.guard.time()?;
        Ok(Some(out.rows))
    }

    /// Adds a row operator `out.op` produced; a full batch goes on downstream at once.
    fn emit(&mut self, out: &mut Produced, row: Vec<Val>) -> Result<Flow, QueryError> {
        out.rows.push(row);
        self.produced[out.op] += 1;
        if out.source {
            self.scanned += 1;
        }
        self.guard.rows(self.produced[out.op])?;
        if out.rows.len() >= self.batch {
            return self.feed(out.op + 1, std::mem::take(&mut out.rows));
        }
        Ok(Flow::More)
    }

    /// `SEARCH v FOR text LIMIT n`: the nodes the full-text index finds, best first. A text
    /// read from an earlier SEARCH's node that is missing or blank finds nothing for that row
    /// (as a comparison with null matches nothing); any other is refused, a parameter's by
    /// its name (the caller left it unset), the rest at the text's place.
    fn search(
        &mut self,
        out: &mut Produced,
        rows: &[Vec<Val>],
        slot: usize,
        (text, text_at): (&Expr, Span),
        limit: u64,
    ) -> Result<Flow, QueryError> {
        let mut params = Vec::new();
        super::plan::collect_params(text, &mut params);
        let param = params.first();
        let reads_a_row = super::plan::mentions_vars(text);
        for row in rows {
            self.guard.tick()?;
            let t = match self.ctx.eval(text, row)? {
                Val::Str(t) if !crate::text::is_blank(&t) => t,
                Val::Str(_) | Val::Null if reads_a_row => continue,
                Val::Str(_) => {
                    return Err(match param {
                        Some(p) => QueryError::Param(format!("${p}: {SEARCH_TEXT_IS_BLANK}")),
                        None => super::plan::plan_err_at(Some(text_at), SEARCH_TEXT_IS_BLANK),
                    })
                }
                // A literal of another kind was refused in planning: this is a parameter's
                // value, an earlier SEARCH's node or what an expression made of them.
                other => {
                    let said = format!("{SEARCH_TAKES_A_STRING}, got {}", as_written(&other));
                    return Err(match param {
                        Some(p) if !reads_a_row => QueryError::Param(format!("${p}: {said}")),
                        _ => super::plan::plan_err_at(Some(text_at), said),
                    });
                }
            };
            // At the text's place, or the parameter's, as a blank one is.
            crate::text::TextIndex::check_length(&t, "SEARCH ... FOR").map_err(
                |e| match param {
                    Some(p) if !reads_a_row => QueryError::Param(format!("${p}: {e}")),
                    _ => super::plan::plan_err_at(Some(text_at), e.to_string()),
                },
            )?;
            let filter = SearchFilter {
                nodes_only: Some(true),
                ..Default::default()
            };
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            for h in self.store.search(&t, &filter, limit)? {
                if let Target::Node(n) = h.target {
                    emit!(self, out, row, slot => Val::Node(n));
                }
            }
        }
        Ok(Flow::More)
    }

    /// `(v {key: k})`: the node of that key.
    fn lookup_key(
        &mut self,
        out: &mut Produced,
        rows: &[Vec<Val>],
        slot: usize,
        key: &Expr,
    ) -> Result<Flow, QueryError> {
        let g = self.ctx.g;
        for row in rows {
            self.guard.tick()?;
            if let Val::Str(k) = self.ctx.eval(key, row)? {
                if let Some(n) = g.node_id_named(&k) {
                    emit!(self, out, row, slot => Val::Node(n));
                }
            }
        }
        Ok(Flow::More)
    }

    /// `(v {name: x})`: the nodes of that name or alias.
    fn lookup_name(
        &mut self,
        out: &mut Produced,
        rows: &[Vec<Val>],
        slot: usize,
        name: &Expr,
    ) -> Result<Flow, QueryError> {
        for row in rows {
            self.guard.tick()?;
            let Val::Str(wanted) = self.ctx.eval(name, row)? else {
                continue;
            };
            for n in self.nodes_named(&wanted)? {
                emit!(self, out, row, slot => Val::Node(n));
            }
        }
        Ok(Flow::More)
    }

    /// The nodes a pattern's `{name: wanted}` finds, each once: through the full-text index,
    /// the exact name form first; when nothing bears it, analysed search filtered to names
    /// (or aliases) equal up to plural.
    fn nodes_named(&mut self, wanted: &str) -> Result<Vec<NodeId>, QueryError> {
        let g = self.ctx.g;
        // No node bears a name whose form is longer than a name may be.
        if crate::text::name_form(wanted).len() > crate::model::MAX_NAME_BYTES {
            return Ok(Vec::new());
        }
        let bears = |n, form: &str| g.bears_name_form(n, form);
        let mut found = self.store.text_index().lookup_name(wanted, 1000, &bears)?;
        // A value longer than a search takes is looked up by its form only.
        if found.is_empty() && wanted.len() <= crate::text::TextIndex::MAX_QUESTION_BYTES {
            let filter = SearchFilter {
                nodes_only: Some(true),
                ..Default::default()
            };
            for h in self.store.search(wanted, &filter, 50)? {
                let Target::Node(n) = h.target else { continue };
                let Some(node) = g.node(n) else { continue };
                if same_name(&node.name, wanted)
                    || node.aliases.iter().any(|a| same_name(a, wanted))
                {
                    found.push(n);
                }
            }
        }
        let mut seen = HashSet::new();
        found.retain(|n| seen.insert(*n));
        Ok(found)
    }

    /// `(v:Label)` with nothing else to start from: every node of one of `labels`.
    fn scan_label(
        &mut self,
        out: &mut Produced,
        rows: &[Vec<Val>],
        slot: usize,
        labels: &[String],
    ) -> Result<Flow, QueryError> {
        let g = self.ctx.g;
        for row in rows {
            let of_label = |id: &NodeId| {
                g.node_label(*id)
                    .is_some_and(|l| labels.iter().any(|x| x == l))
            };
            for n in g.node_ids().filter(of_label) {
                emit!(self, out, row, slot => Val::Node(n));
            }
        }
        Ok(Flow::More)
    }

    /// `(v)` with nothing to start from: every node.
    fn scan_all(
        &mut self,
        out: &mut Produced,
        rows: &[Vec<Val>],
        slot: usize,
    ) -> Result<Flow, QueryError> {
        let g = self.ctx.g;
        for row in rows {
            for n in g.node_ids() {
                emit!(self, out, row, slot => Val::Node(n));
            }
        }
        Ok(Flow::More)
    }

    /// `(v:Event)`: the events in the range and facet the plan took from `WHERE`.
    fn scan_events(
        &mut self,
        out: &mut Produced,
        rows: &[Vec<Val>],
        slot: usize,
        (from, to, facet): EventRange<'_>,
        covered: &[Facet],
    ) -> Result<Flow, QueryError> {
        for row in rows {
            let entries = self.event_entries(from, to, facet, row, covered)?;
            for at in entries {
                emit!(self, out, row, slot => Val::Event(at));
            }
        }
        Ok(Flow::More)
    }

    /// Keeps the rows whose `slot` has one of `labels` and every one of `props`.
    fn check_node(
        &mut self,
        out: &mut Produced,
        rows: Vec<Vec<Val>>,
        slot: usize,
        labels: &[String],
        props: &[(String, Expr)],
    ) -> Result<Flow, QueryError> {
        // The nodes each wanted name finds, looked up once per name.
        let mut named: HashMap<String, HashSet<NodeId>> = HashMap::new();
        'rows: for row in rows {
            self.guard.tick()?;
            let v = row[slot].clone();
            if !labels.is_empty() {
                let label = self.ctx.prop(&v, "label")?;
                if !labels.iter().any(|l| Val::Str(l.clone()) == label) {
                    continue;
                }
            }
            for (k, e) in props {
                let want = self.ctx.eval(e, &row)?;
                // A node's `name` matches as the lookup that binds a pattern by it does (case,
                // plural, aliases), wherever the planner starts the pattern: reached over an
                // edge it was an exact test, and the answer hung on the plan.
                if let (true, Val::Node(id), Val::Str(wanted)) = (k == "name", &v, &want) {
                    if !named.contains_key(wanted) {
                        let found = self.nodes_named(wanted)?.into_iter().collect();
                        named.insert(wanted.clone(), found);
                    }
                    if !named.get(wanted).is_some_and(|found| found.contains(id)) {
                        continue 'rows;
                    }
                    continue;
                }
                let have = self.ctx.prop(&v, k)?;
                if equal(&have, &want) != Some(true) {
                    continue 'rows;
                }
            }
            emit!(self, out, row);
        }
        Ok(Flow::More)
    }

    /// `(a)-[r:T*min..max]->(b)`: the trails (no edge twice) from each row's `from`, depth
    /// first.
    fn expand(
        &mut self,
        out: &mut Produced,
        rows: &[Vec<Val>],
        op: &Op,
    ) -> Result<Flow, QueryError> {
        let Op::Expand {
            from,
            rel,
            to,
            types,
            dir,
            min,
            max,
            to_bound,
            props,
            distinct_from,
            backwards,
            max_by,
            reach,
        } = op
        else {
            return Ok(Flow::More);
        };
        let g = self.ctx.g;
        let type_ids: Option<Vec<u32>> =
            (!types.is_empty()).then(|| types.iter().filter_map(|t| g.relation_id(t)).collect());
        for row in rows {
            let Val::Node(start) = row[*from] else {
                continue;
            };
            let admits = |e: &crate::graph::AdjEntry| -> bool {
                let dir_ok = match dir {
                    Dir::Right => !e.is_incoming(),
                    Dir::Left => e.is_incoming(),
                    Dir::Either => true,
                };
                dir_ok
                    && type_ids
                        .as_ref()
                        .is_none_or(|ids| ids.contains(&e.relation()))
                    && !distinct_from
                        .iter()
                        .any(|s| contains_edge(&row[*s], e.edge_id()))
            };
            // What a trail runs to for this row; whether the relation is one edge or a path
            // is the pattern's (`[r*1..4]` bounded to 1 by WHERE is still a path).
            let until = match max_by {
                Some(e) => hops_at_most(&self.ctx.eval(e, row)?, *max),
                None => *max,
            };
            if *reach {
                let walk = Walk {
                    start,
                    min: *min,
                    until,
                    either: *dir == Dir::Either,
                    backwards: *backwards,
                };
                if self.walk_breadth_first(out, row, (*rel, *to), walk, &admits)? == Flow::Stop {
                    return Ok(Flow::Stop);
                }
                continue;
            }
            // Depth-first over trails (no edge twice) of min..=max hops.
            let mut stack: Vec<(Vec<NodeId>, Vec<EdgeId>)> = vec![(vec![start], Vec::new())];
            while let Some((nodes, edges)) = stack.pop() {
                self.examined += 1;
                self.guard.tick()?;
                let here = *nodes.last().unwrap_or(&start);
                if edges.len() as u32 >= *min {
                    let end_ok = match &row[*to] {
                        Val::Node(b) if *to_bound => *b == here,
                        _ => true,
                    };
                    let mut props_ok = true;
                    if !props.is_empty() {
                        for (k, e) in props {
                            let want = self.ctx.eval(e, row)?;
                            for edge in &edges {
                                if equal(&self.ctx.prop(&Val::Edge(*edge), k)?, &want) != Some(true)
                                {
                                    props_ok = false;
                                }
                            }
                        }
                    }
                    if end_ok && props_ok {
                        let mut r = row.clone();
                        r[*rel] = if *min == 1 && *max == 1 {
                            Val::Edge(edges[0])
                        } else if *backwards {
                            Val::Path(
                                nodes.iter().rev().copied().collect(),
                                edges.iter().rev().copied().collect(),
                            )
                        } else {
                            Val::Path(nodes.clone(), edges.clone())
                        };
                        r[*to] = Val::Node(here);
                        emit!(self, out, r);
                    }
                }
                if edges.len() as u32 >= until {
                    continue;
                }
                // Pushed last first, so that trails are visited (and rows made) in the order of
                // the adjacency list, a node before those reached through it: an order that
                // does not depend on how the rows are batched downstream.
                let at = stack.len();
                for e in g.adjacency().entries(here) {
                    // A self-loop is in its node's list twice, out and in: either way, once.
                    let loop_twin = *dir == Dir::Either && e.is_incoming() && e.neighbor() == here;
                    if admits(&e) && !loop_twin && !edges.contains(&e.edge_id()) {
                        let mut ns = nodes.clone();
                        ns.push(e.neighbor());
                        let mut es = edges.clone();
                        es.push(e.edge_id());
                        stack.push((ns, es));
                    }
                }
                stack[at..].reverse();
            }
        }
        Ok(Flow::More)
    }

    /// [`Run::expand`] of a relation read only for its least length to each node
    /// ([`Op::Expand`]'s `reach`): one row for each node reached in `walk.min..=walk.until`
    /// hops, the relation bound to the path a breadth-first walk first reached it by (in the
    /// adjacency lists' order), one of its shortest trails. The start is a row only at no
    /// hops: the plan leaves it out otherwise.
    fn walk_breadth_first(
        &mut self,
        out: &mut Produced,
        row: &[Val],
        (rel, to): (usize, usize),
        walk: Walk,
        admits: &dyn Fn(&crate::graph::AdjEntry) -> bool,
    ) -> Result<Flow, QueryError> {
        let g = self.ctx.g;
        // Each node reached: the node and edge it was reached from, and its hops.
        let mut reached: HashMap<NodeId, Option<(NodeId, EdgeId)>> =
            HashMap::from([(walk.start, None)]);
        let mut frontier = std::collections::VecDeque::from([(walk.start, 0u32)]);
        while let Some((here, hops)) = frontier.pop_front() {
            self.examined += 1;
            self.guard.tick()?;
            if hops >= walk.min && (hops > 0 || walk.min == 0) {
                let (mut nodes, mut edges) = (vec![here], Vec::new());
                while let Some(Some((before, edge))) = reached.get(nodes.last().unwrap_or(&here)) {
                    edges.push(*edge);
                    nodes.push(*before);
                }
                // Walked back from `here`: reversed to read from the start, unless the
                // pattern runs the other way.
                if !walk.backwards {
                    nodes.reverse();
                    edges.reverse();
                }
                let mut r = row.to_vec();
                r[rel] = Val::Path(nodes, edges);
                r[to] = Val::Node(here);
                emit!(self, out, r);
            }
            if hops >= walk.until {
                continue;
            }
            for e in g.adjacency().entries(here) {
                // A self-loop is in its node's list twice, out and in: either way, once.
                let loop_twin = walk.either && e.is_incoming() && e.neighbor() == here;
                if admits(&e) && !loop_twin && !reached.contains_key(&e.neighbor()) {
                    reached.insert(e.neighbor(), Some((here, e.edge_id())));
                    frontier.push_back((e.neighbor(), hops + 1));
                }
            }
        }
        Ok(Flow::More)
    }

    /// `p = (a)-[r]->(b)...`: binds `slot` to the path through these node and relation slots.
    fn bind_path(
        &mut self,
        out: &mut Produced,
        rows: Vec<Vec<Val>>,
        slot: usize,
        nodes: &[usize],
        rels: &[usize],
    ) -> Result<Flow, QueryError> {
        for mut row in rows {
            self.guard.tick()?;
            let mut ns: Vec<NodeId> = Vec::new();
            let mut es: Vec<EdgeId> = Vec::new();
            if let Val::Node(n) = row[nodes[0]] {
                ns.push(n);
            }
            for (i, r) in rels.iter().enumerate() {
                match &row[*r] {
                    Val::Edge(e) => {
                        es.push(*e);
                        if let Val::Node(n) = row[nodes[i + 1]] {
                            ns.push(n);
                        }
                    }
                    Val::Path(pn, pe) => {
                        es.extend(pe);
                        ns.extend(pn.iter().skip(1));
                    }
                    _ => {}
                }
            }
            row[slot] = Val::Path(ns, es);
            emit!(self, out, row);
        }
        Ok(Flow::More)
    }

    /// `WHERE e`: the rows for which `e` is true.
    fn filter(
        &mut self,
        out: &mut Produced,
        rows: Vec<Vec<Val>>,
        e: &Expr,
    ) -> Result<Flow, QueryError> {
        for row in rows {
            self.guard.tick()?;
            if self.ctx.eval(e, &row)?.truthy() == Some(true) {
                emit!(self, out, row);
            }
        }
        Ok(Flow::More)
    }

    /// The index entries of the events with `from <= ts <= to`, in time order (ties by
    /// sequence). Only entries are kept: a row needs an event's record when it reads a field,
    /// and holding every record of a long log at once is what made whole-log scans costly.
    fn event_entries(
        &mut self,
        from: Option<&Expr>,
        to: Option<&Expr>,
        facet: Option<&(Facet, Expr)>,
        row: &[Val],
        covered: &[Facet],
    ) -> Result<Vec<EventEntry>, QueryError> {
        let mut bound = |e: Option<&Expr>, default: i64| -> Result<i64, QueryError> {
            match e {
                Some(e) => Ok(self.ctx.eval(e, row)?.num().map_or(default, |x| x as i64)),
                None => Ok(default),
            }
        };
        let lo = bound(from, i64::MIN)?;
        let hi = bound(to, i64::MAX)?;
        let facet = match facet {
            Some((facet, value)) => match self.ctx.eval(value, row)? {
                Val::Str(value) => Some((*facet, value)),
                // Kinds, actors and places are strings: any other value equals no event's.
                _ => return Ok(Vec::new()),
            },
            None => None,
        };
        let guard = self.guard;
        let entries = self.store.event_entries(
            facet
                .as_ref()
                .map(|(facet, value)| (*facet, value.as_str())),
            lo,
            hi,
            &|| !guard.timed_out(),
        )?;
        // A scan stopped by the time limit is no answer.
        guard.time()?;
        // No record is read here: a row reads its event's when it asks for a field (a point
        // read, as fast per row as a range's records read in one view were, 12 us each for
        // 54k deaths of a 980k-event store), and many rows ask for none (`count(e)`).
        let index = match facet {
            Some(_) => Table::EventFacet,
            None => Table::EventTime,
        };
        let mut entries: Vec<EventEntry> = (entries.into_iter())
            .map(|(ts, seq)| EventEntry {
                seq,
                ts,
                index,
                kind: None,
                actor: None,
            })
            .collect();
        for &f in covered {
            match &facet {
                // The facet the scan fixed: every entry's value is the one given.
                Some((fixed, value)) if *fixed == f => {
                    let at = self.ctx.facet_value_at(value.clone());
                    entries.iter_mut().for_each(|e| e.set_facet(f, at));
                }
                _ => self.cover(&mut entries, f, (lo, hi))?,
            }
        }
        Ok(entries)
    }

    /// Gives each of `entries` (in time order, as found in `range`) its value of `facet`
    /// (kind or actor) from the episodic index: each value's entries in the range, matched to
    /// the scan's by time and number, so that an entry a flipped bit changed matches none and
    /// its row reads its record, checked. Not for an answer that may stop after a few rows
    /// (streaming), nor for fewer entries than the log has values (a seek each), nor past
    /// [`MAX_COVERED_VALUES`] values, nor past 16 index entries read for each row: those rows
    /// read their records.
    fn cover(
        &mut self,
        entries: &mut [EventEntry],
        facet: Facet,
        range: (i64, i64),
    ) -> Result<(), QueryError> {
        if self.batch != usize::MAX || entries.is_empty() {
            return Ok(());
        }
        let Some(values) = self.store.facet_values_at_most(facet, MAX_COVERED_VALUES)? else {
            return Ok(());
        };
        if entries.len() < values.len() {
            return Ok(());
        }
        let guard = self.guard;
        let at: Vec<Option<std::num::NonZeroU32>> = (values.iter())
            .map(|v| self.ctx.facet_value_at(v.clone()))
            .collect();
        // The index holds every event of the range under some value, and a scan fixed by
        // another facet has a few of them: past this many entries read, its rows read their
        // records (a key read costs a fiftieth of a record's).
        let most = entries.len().saturating_mul(16).saturating_add(4096);
        let mut seen = 0usize;
        self.store
            .visit_entries_of_values(facet, &values, range, &mut |value, (ts, seq)| {
                let found = entries.binary_search_by_key(&(ts, seq), |e| (e.ts, e.seq));
                if let (Ok(i), Some(&id)) = (found, at.get(value)) {
                    entries[i].set_facet(facet, id);
                }
                seen += 1;
                seen < most && (!seen.is_multiple_of(1024) || !guard.timed_out())
            })?;
        guard.time()?;
        Ok(())
    }

    /// Rows that matched every operator: projected at once when streaming, else kept.
    fn answer(&mut self, rows: Vec<Vec<Val>>) -> Result<Flow, QueryError> {
        self.examined += rows.len();
        if let Some(first) = &mut self.first {
            for row in rows {
                self.guard.tick()?;
                let keys = order_keys(&mut self.ctx, self.plan, &row)?;
                self.guard.hold(keys.iter().map(held_bytes).sum())?;
                first.add(keys, row, self.guard);
            }
            return Ok(Flow::More);
        }
        let Some(limit) = self.limit.filter(|_| self.batch != usize::MAX) else {
            self.matched.extend(rows);
            return Ok(Flow::More);
        };
        for row in &rows {
            if self.out.len() >= limit {
                break;
            }
            self.guard.tick()?;
            keep_projected(
                &mut self.ctx,
                (self.plan, self.guard),
                row,
                &mut self.seen,
                &mut self.out,
            )?;
        }
        Ok(if self.out.len() >= limit {
            Flow::Stop
        } else {
            Flow::More
        })
    }
}

/// The most hops a trail needs under a bound `length(r) <= bound` of the WHERE filter: at most
/// `max`, none past a negative one, and `max` for a bound that is no number (the filter
/// decides those rows).
fn hops_at_most(bound: &Val, max: u32) -> u32 {
    match bound.num() {
        Some(b) if b < 0.0 => 0,
        // Saturating: a bound past u32 (or infinite) is `max`; NaN is no bound.
        Some(b) if !b.is_nan() => (b.floor() as u64).min(u64::from(max)) as u32,
        _ => max,
    }
}

/// Projects `row` and keeps it in `out`, unless DISTINCT has kept it already: what is kept
/// counts against the result bytes, and a repeat DISTINCT drops does not (41 rows of one
/// 400 kB value had been refused as over the limit, for an answer of one row).
fn keep_projected(
    ctx: &mut Ctx<'_>,
    (plan, guard): (&Plan, &Guard),
    row: &[Val],
    seen: &mut HashSet<String>,
    out: &mut Vec<Vec<serde_json::Value>>,
) -> Result<(), QueryError> {
    let mut vals = Vec::with_capacity(plan.returns.len());
    let mut bytes = 0usize;
    for (_, e) in &plan.returns {
        let v = ctx.eval(e, row)?;
        bytes = bytes.saturating_add(approx_bytes(&v));
        vals.push(to_json(ctx, &v)?);
    }
    if plan.distinct {
        let key = distinct_key(&vals);
        if seen.contains(&key) {
            return Ok(());
        }
        // The key is held beside the answer, about as large as the row: intermediate bytes,
        // so a DISTINCT answer has the result bytes any answer has.
        guard.hold(key.len())?;
        seen.insert(key);
    }
    guard.spend_bytes(bytes)?;
    out.push(vals);
    Ok(())
}

/// About how many bytes a value takes once returned (its strings, plus a little per value).
fn approx_bytes(v: &Val) -> usize {
    match v {
        Val::Str(s) => s.len() + 8,
        Val::List(items) => 8 + items.iter().map(approx_bytes).sum::<usize>(),
        Val::Map(m) => {
            8 + m
                .iter()
                .map(|(k, x)| k.len() + approx_bytes(x))
                .sum::<usize>()
        }
        Val::Path(ns, es) => 16 + 48 * (ns.len() + es.len()),
        // Nodes, edges and events come out as small objects.
        Val::Node(_) | Val::Edge(_) | Val::Event(_) => 64,
        _ => 8,
    }
}

/// About how many bytes a value takes held in memory (a sort or grouping key): the value
/// itself and what it owns. [`approx_bytes`] estimates a returned value, whose node is an
/// object of 64 bytes, where a held node is an id.
fn held_bytes(v: &Val) -> usize {
    let own = std::mem::size_of::<Val>();
    match v {
        Val::Str(s) => own + s.len(),
        Val::List(items) => own + items.iter().map(held_bytes).sum::<usize>(),
        Val::Map(m) => {
            own + m
                .iter()
                .map(|(k, x)| k.len() + held_bytes(x))
                .sum::<usize>()
        }
        Val::Path(ns, es) => own + 8 * (ns.len() + es.len()),
        _ => own,
    }
}

/// Runs `plan` against `store`.
pub fn execute(
    store: &Store,
    plan: &Plan,
    params: &HashMap<String, Val>,
    limits: Limits,
) -> Result<QueryResult, QueryError> {
    if let Some(p) = plan.missing_param(params) {
        return Err(QueryError::Param(super::no_value(p)));
    }
    // A plan that searches does so under the graph read here: a deletion's documents are
    // waited for now (`Store::graph_for_search`), before the query's clock starts.
    let searches = plan
        .ops
        .iter()
        .any(|op| matches!(op, Op::Search { .. } | Op::LookupName { .. }));
    let g = if searches {
        store.graph_for_search()
    } else {
        store.graph()
    };
    let guard = Guard {
        started: Instant::now(),
        limits,
        ticks: std::cell::Cell::new(0),
        bytes: std::cell::Cell::new(0),
        held: std::cell::Cell::new(0),
        row_bytes: plan.slots.len() * std::mem::size_of::<Val>() + std::mem::size_of::<Vec<Val>>(),
    };
    let mut ctx = Ctx {
        store,
        g: &g,
        params,
        edges: HashMap::new(),
        events: HashMap::new(),
        facet_values: Vec::new(),
        facet_value_at: HashMap::new(),
        in_sets: HashMap::new(),
        slots: &plan.slots,
        used: Vec::new(),
    };
    let limit = match &plan.limit {
        Some(e) => Some(limit_of(ctx.eval(e, &[])?, plan)?),
        None => None,
    };
    let aggregates = plan.returns.iter().any(|(_, e)| is_aggregate(e));
    // Only an answer that needs no row but the first few can stop the scans early.
    let streaming =
        limit.is_some() && plan.order.is_empty() && !aggregates && plan.ops.len() <= STREAM_MAX_OPS;
    let mut run = Run {
        ctx,
        store,
        plan,
        guard: &guard,
        batch: if streaming { BATCH } else { usize::MAX },
        produced: vec![0; plan.ops.len()],
        examined: 0,
        scanned: 0,
        limit,
        out: Vec::new(),
        seen: HashSet::new(),
        matched: Vec::new(),
        // Every row sorted is kept where DISTINCT may drop some of the first (it applies to
        // what they project) or where there is no limit.
        first: (!plan.order.is_empty() && !aggregates).then(|| FirstRows {
            keep: match plan.distinct {
                true => usize::MAX,
                false => limit.unwrap_or(usize::MAX),
            },
            desc: plan.order.iter().map(|(_, d)| *d).collect(),
            keyed: Vec::new(),
        }),
    };
    let width = plan.slots.len();
    run.feed(0, vec![vec![Val::Null; width]])?;
    let Run {
        mut ctx,
        examined,
        scanned,
        out,
        matched: mut rows,
        first,
        ..
    } = run;
    if streaming {
        return Ok(QueryResult {
            columns: plan.returns.iter().map(|(a, _)| a.clone()).collect(),
            rows: out,
            rows_examined: examined,
            rows_scanned: scanned,
            elapsed_us: guard.started.elapsed().as_micros() as u64,
            used: std::mem::take(&mut ctx.used),
        });
    }
    if aggregates {
        return aggregate(&mut ctx, plan, rows, limit, (examined, scanned), &guard);
    }

    // ORDER BY on the matched rows (nulls last), then projection, DISTINCT and LIMIT.
    if let Some(mut first) = first {
        guard.time()?;
        // At most `max_rows` rows of precomputed keys: bounded work, checked on either side.
        first.cut(&guard);
        guard.time()?;
        rows = first.keyed.into_iter().map(|(_, r)| r).collect();
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for row in &rows {
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        guard.tick()?;
        keep_projected(&mut ctx, (plan, &guard), row, &mut seen, &mut out)?;
    }
    Ok(QueryResult {
        columns: plan.returns.iter().map(|(a, _)| a.clone()).collect(),
        rows: out,
        rows_examined: examined,
        rows_scanned: scanned,
        elapsed_us: guard.started.elapsed().as_micros() as u64,
        used: std::mem::take(&mut ctx.used),
    })
}

/// The ORDER BY keys of `row`.
fn order_keys(ctx: &mut Ctx<'_>, plan: &Plan, row: &[Val]) -> Result<Vec<Val>, QueryError> {
    (plan.order.iter()).map(|(e, _)| ctx.eval(e, row)).collect()
}

/// RETURN with aggregates: rows grouped by the non-aggregate items (in order of first
/// appearance), then ORDER BY over the returned columns, then LIMIT.
fn aggregate(
    ctx: &mut Ctx<'_>,
    plan: &Plan,
    rows: Vec<Vec<Val>>,
    limit: Option<usize>,
    (examined, scanned): (usize, usize),
    guard: &Guard,
) -> Result<QueryResult, QueryError> {
    let mut groups: Vec<(Vec<Val>, Vec<Acc>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for row in &rows {
        guard.tick()?;
        let mut key = Vec::new();
        for (_, e) in plan.returns.iter().filter(|(_, e)| !is_aggregate(e)) {
            key.push(ctx.eval(e, row)?);
        }
        let id = format!("{:?}", key.iter().map(canonical).collect::<Vec<_>>());
        let g = match index.get(&id) {
            Some(g) => *g,
            None => {
                // A group holds its key twice: as values, and as the text it is found by.
                guard.hold(id.len().saturating_add(key.iter().map(held_bytes).sum()))?;
                let accs = plan
                    .returns
                    .iter()
                    .filter_map(|(_, e)| match e {
                        Expr::Call(name, ..) if is_aggregate(e) => Some(Acc::new(name)),
                        _ => None,
                    })
                    .collect();
                groups.push((key, accs));
                index.insert(id, groups.len() - 1);
                groups.len() - 1
            }
        };
        let aggs = plan.returns.iter().filter(|(_, e)| is_aggregate(e));
        for (i, (_, e)) in aggs.enumerate() {
            let Expr::Call(_, args, _) = e else { continue };
            // count(*) counts rows: any non-null stands for the row.
            let v = match args.first() {
                Some(a) => ctx.eval(a, row)?,
                None => Val::Bool(true),
            };
            if matches!(groups[g].1[i], Acc::Collect(_)) {
                guard.spend(&v)?;
            }
            groups[g].1[i].add(v);
        }
    }
    // Only aggregates and no rows: one row of empty aggregates (count 0), as in Cypher.
    if groups.is_empty() && plan.returns.iter().all(|(_, e)| is_aggregate(e)) {
        let accs = plan
            .returns
            .iter()
            .filter_map(|(_, e)| match e {
                Expr::Call(name, ..) => Some(Acc::new(name)),
                _ => None,
            })
            .collect();
        groups.push((Vec::new(), accs));
    }
    let mut out_rows: Vec<Vec<Val>> = groups
        .into_iter()
        .map(|(key, accs)| {
            let mut keys = key.into_iter();
            let mut accs = accs.into_iter();
            plan.returns
                .iter()
                .map(|(_, e)| {
                    if is_aggregate(e) {
                        accs.next().map_or(Val::Null, Acc::finish)
                    } else {
                        keys.next().unwrap_or(Val::Null)
                    }
                })
                .collect()
        })
        .collect();
    let mut columns = Vec::new();
    for (e, desc) in &plan.order {
        let i = plan
            .returns
            .iter()
            .position(|(_, r)| r == e)
            .ok_or_else(|| {
                QueryError::Plan("with aggregates, ORDER BY may only name returned columns".into())
            })?;
        columns.push((i, *desc));
    }
    if !columns.is_empty() {
        guard.time()?;
        // Compared in place: cloning the key columns for each comparison had copied a
        // large key n log n times.
        out_rows
            .sort_by(|a, b| order_cmp_pairs(columns.iter().map(|&(i, desc)| (&a[i], &b[i], desc))));
        guard.time()?;
    }
    if let Some(l) = limit {
        out_rows.truncate(l);
    }
    let mut out = Vec::with_capacity(out_rows.len());
    for r in &out_rows {
        guard.tick()?;
        out.push(
            r.iter()
                .map(|v| to_json(ctx, v))
                .collect::<Result<Vec<_>, _>>()?,
        );
    }
    Ok(QueryResult {
        columns: plan.returns.iter().map(|(a, _)| a.clone()).collect(),
        rows: out,
        rows_examined: examined,
        rows_scanned: scanned,
        elapsed_us: guard.started.elapsed().as_micros() as u64,
        used: std::mem::take(&mut ctx.used),
    })
}
