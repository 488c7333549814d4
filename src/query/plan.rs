//! Planner: AST to a linear plan of operators over rows of variable slots. Each pattern is
//! anchored at its most selective node (a variable already bound, a `key`, a `name` found
//! through the full-text index, a label, or else every node) and expanded outward in both
//! directions; node constraints become filters, `WHERE` a final filter. Events are queryable as
//! nodes with the virtual label `Event`; `ts` bounds in `WHERE` are pushed into the time index.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use super::parser::{
    BinOp, Dir, Expr, Literal, NodePat, PathPat, Places, Query, RelPat, ReturnItem, Search, Span,
};
use super::{QueryError, Val};
use crate::store::Facet;

/// The virtual label of events.
pub const EVENT_LABEL: &str = "Event";

/// One operator of a plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Op {
    /// Bind `slot` to the best full-text hits (nodes) for `text`.
    Search {
        slot: usize,
        text: Expr,
        limit: u64,
        /// Where the text is, for a refusal of its value.
        #[serde(skip)]
        text_at: Span,
    },
    /// Bind `slot` to the node with this key.
    LookupKey {
        slot: usize,
        key: Expr,
    },
    /// Bind `slot` to nodes whose name (or alias) equals `name`, found through the full-text
    /// index.
    LookupName {
        slot: usize,
        name: Expr,
    },
    ScanLabel {
        slot: usize,
        labels: Vec<String>,
    },
    ScanAll {
        slot: usize,
    },
    /// Bind `slot` to events with `from <= ts <= to` (and, with a facet, only those whose
    /// kind, actor or place equals its value: read from the facet index, not the whole log).
    ScanEvents {
        slot: usize,
        from: Option<Expr>,
        to: Option<Expr>,
        facet: Option<(Facet, Expr)>,
        /// The facets (kind, actor) each row gets from the episodic index with its entry,
        /// where the query reads no more of the event than they, its number and its time
        /// ([`covered_facets`]): no record is read.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        covered: Vec<Facet>,
    },
    /// Keep rows whose node in `slot` has one of `labels` (when any) and these properties.
    CheckNode {
        slot: usize,
        labels: Vec<String>,
        props: Vec<(String, Expr)>,
    },
    /// Follow edges from the node in `from` to `to`, binding the edge (or, for a quantified
    /// relation, the path segment) to `rel`. Edges already bound in `distinct_from` are not
    /// reused (trail semantics across the patterns of one MATCH clause).
    Expand {
        from: usize,
        rel: usize,
        to: usize,
        types: Vec<String>,
        dir: Dir,
        min: u32,
        max: u32,
        to_bound: bool,
        props: Vec<(String, Expr)>,
        distinct_from: Vec<usize>,
        /// The pattern runs from `to` to `from` (planned from its right end): a relation of
        /// several hops is bound to its path reversed, so that it reads in pattern order.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        backwards: bool,
        /// A bound the WHERE filter puts on the relation's length (`length(r) <= $depth`),
        /// read per row: trails stop there rather than run to `max` and be filtered (a
        /// saved query's `[r*1..4]` of a hub at depth 1 had enumerated 800k trails of 4 hops
        /// and stopped at the row limit; helper-120).
        #[serde(skip_serializing_if = "Option::is_none")]
        max_by: Option<Expr>,
        /// All the query reads of the relation is its least length to each node it reaches
        /// ([`least_lengths_alone`]): one row a node, by a breadth-first walk, not one a
        /// trail. The saved `neighbors` at depth 4 had enumerated 799k trails from a hub.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        reach: bool,
    },
    /// Bind `slot` to the path through these node and relation slots, in pattern order.
    BindPath {
        slot: usize,
        nodes: Vec<usize>,
        rels: Vec<usize>,
    },
    Filter(Expr),
}

/// A planned query.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// Variable name of each slot (an unnamed one's is "`anonN`", which no query can write).
    pub slots: Vec<String>,
    pub ops: Vec<Op>,
    pub distinct: bool,
    pub returns: Vec<(String, Expr)>,
    pub order: Vec<(Expr, bool)>,
    pub limit: Option<Expr>,
    /// Where LIMIT's expression stands in the text, for an error in its value found as the
    /// query runs (a parameter's value is known only then). Not part of the plan's JSON, which
    /// says what runs, not where it was written.
    #[serde(skip)]
    pub limit_at: Option<Span>,
    /// Parameters the query uses.
    pub params: Vec<String>,
}

impl Plan {
    /// The first parameter the query uses that `given` has no value for.
    pub fn missing_param<V>(&self, given: &HashMap<String, V>) -> Option<&str> {
        self.params
            .iter()
            .find(|p| !given.contains_key(*p))
            .map(String::as_str)
    }

    /// The first by name of the parameters `given` that the query does not use.
    pub fn unused_param<'a, V>(&self, given: &'a HashMap<String, V>) -> Option<&'a str> {
        given
            .keys()
            .filter(|k| !self.params.contains(k))
            .min()
            .map(String::as_str)
    }
}

/// Most operators of one plan.
pub const MAX_OPS: usize = 128;

/// Planning limits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PlanLimits {
    /// Largest hop count of a quantified relation (also the bound of an open `*`).
    pub max_hops: u32,
}

impl Default for PlanLimits {
    fn default() -> Self {
        PlanLimits { max_hops: 8 }
    }
}

impl From<super::Limits> for PlanLimits {
    /// What of a query's limits binds its planning.
    fn from(limits: super::Limits) -> Self {
        PlanLimits {
            max_hops: limits.max_hops,
        }
    }
}

/// One relation of a pattern to expand: from the node in `from` over `rel` to `to`, written
/// right to left when `flip`.
struct Step<'a> {
    from: usize,
    rel: &'a RelPat,
    rel_slot: usize,
    to: usize,
    to_node: &'a NodePat,
    flip: bool,
}

struct Planner {
    slots: Vec<String>,
    index: HashMap<String, usize>,
    kinds: HashMap<usize, Kind>,
    ops: Vec<Op>,
    bound: Vec<bool>,
    limits: PlanLimits,
    /// Property checks of patterns that read a variable not yet bound where the pattern's node
    /// or relation is, as (its slot, key, value): each is checked once its variables are.
    waiting: Vec<(usize, String, Expr)>,
    /// The conjuncts of `WHERE` not yet checked: each is checked as soon as the variables it
    /// reads are bound, not after every pattern (a condition on the first of three patterns
    /// had waited for their cross product).
    conditions: Vec<Expr>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Node,
    Rel,
    Path,
}

/// A plan longer than [`MAX_OPS`]: the executor passes rows from operator to operator by
/// recursion, one level each.
fn too_many_steps(ops: usize) -> String {
    format!(
        "the query needs {ops} steps to match its patterns so far, at most {MAX_OPS} are \
         allowed: split it or use fewer relations"
    )
}

fn plan_err(message: impl Into<String>) -> QueryError {
    QueryError::Plan(message.into())
}

/// [`plan_err`] at `place` in the text, where there is one (`prepare` gives it its line and
/// column).
pub(super) fn plan_err_at(place: Option<Span>, message: impl Into<String>) -> QueryError {
    match place {
        Some(span) => QueryError::PlanAt {
            line: 0,
            column: 0,
            span,
            message: message.into(),
        },
        None => plan_err(message),
    }
}

impl Planner {
    /// The slot of variable `name` (a slot of its own when unnamed), declared `at` in the text.
    fn slot(&mut self, name: Option<&str>, kind: Kind, at: Span) -> Result<usize, QueryError> {
        let Some(name) = name else {
            // Named "`anonN`", which no query can write (a name in backticks can be any text
            // but a backtick), and never indexed: the name had been " anonN", and a user's
            // `` ` anon2` `` had met the unnamed node of slot 2.
            let s = self.slots.len();
            self.slots.push(format!("`anon{s}`"));
            self.kinds.insert(s, kind);
            self.bound.push(false);
            return Ok(s);
        };
        let name = name.to_string();
        if let Some(&s) = self.index.get(&name) {
            if self.kinds.get(&s) != Some(&kind) {
                return Err(plan_err_at(
                    Some(at),
                    format!("variable {name} is used both as a node and as a relation or path"),
                ));
            }
            return Ok(s);
        }
        let s = self.slots.len();
        self.slots.push(name.clone());
        self.index.insert(name, s);
        self.kinds.insert(s, kind);
        self.bound.push(false);
        Ok(s)
    }

    /// Whether every variable `e` reads is bound at this step of the plan.
    fn ready(&self, e: &Expr) -> bool {
        self.first_unbound(e).is_none()
    }

    /// The first variable `e` reads that is not bound at this step, if any.
    fn first_unbound(&self, e: &Expr) -> Option<String> {
        let mut first = None;
        for_each_var(e, &mut |v| {
            if first.is_none() && !self.index.get(v).is_some_and(|&s| self.bound[s]) {
                first = Some(v.to_string());
            }
        });
        first
    }

    /// Of the `props` of the node or relation in `slot`, those that can be checked at this
    /// step; each other one reads a variable bound later, and waits until it is (checked here,
    /// it read that variable as null and matched nothing).
    fn ready_props(&mut self, slot: usize, props: Vec<(String, Expr)>) -> Vec<(String, Expr)> {
        let (now, later): (Vec<_>, Vec<_>) = props.into_iter().partition(|(_, e)| self.ready(e));
        self.waiting
            .extend(later.into_iter().map(|(key, value)| (slot, key, value)));
        now
    }

    /// The waiting property checks whose variables are all bound now, as checks of their
    /// node or relation (so a `name` matches as it does where it is checked at once).
    fn check_ready(&mut self) {
        let (ready, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|(slot, _, e)| self.bound[*slot] && self.ready(e));
        self.waiting = still;
        let mut by_slot: Vec<(usize, Vec<(String, Expr)>)> = Vec::new();
        for (slot, key, value) in ready {
            match by_slot.iter_mut().find(|(s, _)| *s == slot) {
                Some((_, props)) => props.push((key, value)),
                None => by_slot.push((slot, vec![(key, value)])),
            }
        }
        for (slot, props) in by_slot {
            self.ops.push(Op::CheckNode {
                slot,
                labels: Vec::new(),
                props,
            });
        }
        let (ready, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.conditions)
            .into_iter()
            .partition(|e| self.ready(e) && first_aggregate(e).is_none());
        self.conditions = still;
        self.ops.extend(ready.into_iter().map(Op::Filter));
    }

    /// How cheaply `node` binds: already bound, by key, by name, by label, by a scan. A key or
    /// name serves only when what it equals can be read before the node is bound.
    fn access(&self, slot: usize, node: &NodePat) -> u8 {
        let usable = |name: &str| node.props.iter().any(|(k, e)| k == name && self.ready(e));
        if self.bound[slot] {
            0
        } else if usable("key") {
            1
        } else if usable("name") {
            2
        } else if !node.labels.is_empty() {
            3
        } else {
            4
        }
    }

    fn bind_node(&mut self, slot: usize, node: &NodePat, ts_bounds: &(Option<Expr>, Option<Expr>)) {
        let is_event = node.labels.iter().any(|l| l == EVENT_LABEL);
        let mut props = node.props.clone();
        // The property a lookup binds by, of those that can be read before the node is bound.
        let take = |props: &mut Vec<(String, Expr)>, name: &str, planner: &Self| {
            let i = props
                .iter()
                .position(|(k, e)| k == name && planner.ready(e))?;
            Some(props.remove(i).1)
        };
        // Labels a lookup has not already applied, checked with the properties. An event scan
        // applies `:Event`; a variable bound before is checked for it (it had passed unchecked,
        // and `(a:Place), (a:Event)` counted every place).
        let mut labels = if is_event && !self.bound[slot] {
            Vec::new()
        } else {
            node.labels.clone()
        };
        if self.bound[slot] {
            // Already bound (by SEARCH or an earlier pattern): only its constraints remain.
        } else if is_event {
            // The first of kind, actor and place the pattern fixes is read from its index.
            let facet = (FACET_FIELDS.into_iter())
                .find_map(|(name, facet)| Some((facet, take(&mut props, name, self)?)))
                .or_else(|| {
                    // Or the first the WHERE filter fixes (`e.kind = $kind`), which still applies:
                    // a scan of every event for one kind had read every record.
                    let var = node.var.as_deref()?;
                    self.conditions.iter().find_map(|c| facet_fixed_by(c, var))
                });
            self.ops.push(Op::ScanEvents {
                slot,
                from: ts_bounds.0.clone(),
                to: ts_bounds.1.clone(),
                facet,
                covered: Vec::new(),
            });
        } else if let Some(key) = take(&mut props, "key", self) {
            self.ops.push(Op::LookupKey { slot, key });
        } else if let Some(name) = take(&mut props, "name", self) {
            self.ops.push(Op::LookupName { slot, name });
        } else if !labels.is_empty() {
            self.ops.push(Op::ScanLabel {
                slot,
                labels: std::mem::take(&mut labels),
            });
        } else {
            self.ops.push(Op::ScanAll { slot });
        }
        self.bound[slot] = true;
        let props = self.ready_props(slot, props);
        if !labels.is_empty() || !props.is_empty() {
            self.ops.push(Op::CheckNode {
                slot,
                labels,
                props,
            });
        }
        self.check_ready();
    }

    fn expand(&mut self, step: Step<'_>, trail: &[usize]) -> Result<(), QueryError> {
        let Step {
            from,
            rel,
            rel_slot,
            to,
            to_node,
            flip,
        } = step;
        let max = match rel.max {
            Some(m) => m,
            None => self.limits.max_hops,
        };
        if max > self.limits.max_hops {
            return Err(plan_err_at(
                Some(rel.span),
                format!(
                    "a relation may span at most {} hops, this one asks for {max}",
                    self.limits.max_hops
                ),
            ));
        }
        // An open one ends at the limit: one that starts past it would match nothing.
        if rel.min > max {
            return Err(plan_err_at(
                Some(rel.span),
                format!(
                    "a relation may span at most {} hops, this one asks for at least {}",
                    self.limits.max_hops, rel.min
                ),
            ));
        }
        let single = rel.min == 1 && max == 1;
        if !single {
            // A property of a relation of several hops holds of each of its edges: no one
            // filter afterwards can say that.
            if let Some(v) = rel.props.iter().find_map(|(_, e)| self.first_unbound(e)) {
                return Err(plan_err_at(
                    Some(rel.span),
                    format!(
                        "a relation of several hops compares its properties only with \
                         variables bound before it, and {v} is not"
                    ),
                ));
            }
        }
        let dir = match (rel.dir, flip) {
            (Dir::Right, true) => Dir::Left,
            (Dir::Left, true) => Dir::Right,
            (d, _) => d,
        };
        let to_bound = self.bound[to];
        let rel_props = self.ready_props(rel_slot, rel.props.clone());
        self.ops.push(Op::Expand {
            from,
            rel: rel_slot,
            to,
            types: rel.types.clone(),
            dir,
            min: rel.min,
            max,
            to_bound,
            props: rel_props,
            distinct_from: trail
                .iter()
                .copied()
                .filter(|s| *s != rel_slot && self.bound[*s])
                .collect(),
            backwards: flip,
            max_by: (!single)
                .then_some(rel.var.as_deref())
                .flatten()
                .and_then(|var| self.conditions.iter().find_map(|c| length_bound(c, var))),
            reach: false,
        });
        self.bound[rel_slot] = true;
        self.bound[to] = true;
        let props = self.ready_props(to, to_node.props.clone());
        if !to_node.labels.is_empty() || !props.is_empty() {
            self.ops.push(Op::CheckNode {
                slot: to,
                labels: to_node.labels.clone(),
                props,
            });
        }
        self.check_ready();
        Ok(())
    }
}

/// The top-level conjuncts of `e` (`a AND (b AND c)` is `a`, `b`, `c`), in the order written.
fn conjuncts(e: &Expr) -> Vec<Expr> {
    match e {
        Expr::Bin(BinOp::And, a, b) => {
            let mut out = conjuncts(a);
            out.extend(conjuncts(b));
            out
        }
        other => vec![other.clone()],
    }
}

/// The index an event scan of `var` can read for `condition` (a conjunct of the WHERE
/// filter), with the value it reads: when it is `var.kind = e` (or `actor`, `place`, or the
/// same turned round) and `e` names no variable.
fn facet_fixed_by(condition: &Expr, var: &str) -> Option<(Facet, Expr)> {
    let facet_of = |x: &Expr| {
        let field = field_of(x, var)?;
        (FACET_FIELDS.into_iter()).find_map(|(name, facet)| (name == field).then_some(facet))
    };
    match compared_with_constant(condition, &|x| facet_of(x).is_some())? {
        (subject, BinOp::Eq, value) => Some((facet_of(subject)?, value.clone())),
        _ => None,
    }
}

/// The event fields the episodic index keys events by, in the order a pattern's are read
/// from it (the first a pattern fixes is its scan's index).
const FACET_FIELDS: [(&str, Facet); 3] = [
    ("kind", Facet::Kind),
    ("actor", Facet::Actor),
    ("place", Facet::Place),
];

/// The field of `facet` ([`FACET_FIELDS`], which names every facet).
fn facet_field(facet: Facet) -> &'static str {
    (FACET_FIELDS.into_iter())
        .find_map(|(name, f)| (f == facet).then_some(name))
        .unwrap_or_default()
}

/// The field `x` reads of variable `var` (`var.kind`), when it is one.
fn field_of<'e>(x: &'e Expr, var: &str) -> Option<&'e str> {
    match x {
        Expr::Prop(v, field) if matches!(&**v, Expr::Var(n) if n == var) => Some(field),
        _ => None,
    }
}

/// The bound `condition` puts on the time of event `var`, when it compares `var.ts` with a
/// value that names no variable by `<`, `<=`, `>` or `>=`: whether it is a lower bound, and
/// the value. A strict bound is taken as an inclusive one; the filter still applies.
fn ts_bound_of<'e>(condition: &'e Expr, var: &str) -> Option<(bool, &'e Expr)> {
    match compared_with_constant(condition, &|x| field_of(x, var) == Some("ts"))? {
        (_, BinOp::Ge | BinOp::Gt, value) => Some((true, value)),
        (_, BinOp::Le | BinOp::Lt, value) => Some((false, value)),
        _ => None,
    }
}

/// `condition` as `subject op value`, when it compares a subject (`is_subject` tells one)
/// with a value that names no variable: turned round when written the other way (`5 >
/// length(r)` is `length(r) < 5`). What the planner reads a bound or an index from.
fn compared_with_constant<'e>(
    condition: &'e Expr,
    is_subject: &dyn Fn(&Expr) -> bool,
) -> Option<(&'e Expr, BinOp, &'e Expr)> {
    let Expr::Bin(op, a, b) = condition else {
        return None;
    };
    let (subject, op, value) = if is_subject(a) {
        (a, *op, b)
    } else if is_subject(b) {
        let turned = match op {
            BinOp::Eq => BinOp::Eq,
            BinOp::Lt => BinOp::Gt,
            BinOp::Le => BinOp::Ge,
            BinOp::Gt => BinOp::Lt,
            BinOp::Ge => BinOp::Le,
            _ => return None,
        };
        (b, turned, a)
    } else {
        return None;
    };
    (!mentions_vars(value)).then_some((&**subject, op, &**value))
}

/// `filter` with each comparison of a parameter with a string decided by the value given
/// (`$kind = ''`), and what that decides of the `AND`s and `OR`s above it: `None` when
/// nothing was. A saved query's optional filter (`$kind = '' OR e.kind = $kind`) is no
/// conjunct an index is read for until it is decided: the saved `timeline` had read every
/// record of the log for its kind, and stopped at the time limit (helper-120).
pub(super) fn decide_params(filter: &Expr, params: &HashMap<String, Val>) -> Option<Expr> {
    fn fold(e: &Expr, params: &HashMap<String, Val>, changed: &mut bool) -> Expr {
        let decided = |b: bool, changed: &mut bool| {
            *changed = true;
            Expr::Lit(Literal::Bool(b))
        };
        match e {
            Expr::Bin(op @ (BinOp::Eq | BinOp::Ne), a, b) => {
                let given = |x: &Expr, y: &Expr| match (x, y) {
                    (Expr::Param(p), Expr::Lit(Literal::Str(lit))) => match params.get(p) {
                        Some(Val::Str(v)) => Some(v == lit),
                        _ => None,
                    },
                    _ => None,
                };
                match given(a, b).or_else(|| given(b, a)) {
                    Some(equal) => decided(equal == (*op == BinOp::Eq), changed),
                    None => e.clone(),
                }
            }
            Expr::Bin(op @ (BinOp::And | BinOp::Or), a, b) => {
                let (a, b) = (fold(a, params, changed), fold(b, params, changed));
                let lit = |x: &Expr| match x {
                    Expr::Lit(Literal::Bool(v)) => Some(*v),
                    _ => None,
                };
                // `true OR x` is true and `false AND x` false whatever x (null too), as the
                // executor, which reads left to right and stops there, has them; `false OR x`,
                // `x OR false`, `true AND x` and `x AND true` are x. Not `x OR true` nor `x AND
                // false`: the executor reads x first, and an error of x's is the answer.
                match (op, lit(&a), lit(&b)) {
                    (BinOp::Or, Some(true), _) => Expr::Lit(Literal::Bool(true)),
                    (BinOp::And, Some(false), _) => Expr::Lit(Literal::Bool(false)),
                    (BinOp::Or, Some(false), _) | (BinOp::And, Some(true), _) => b,
                    (BinOp::Or, _, Some(false)) | (BinOp::And, _, Some(true)) => a,
                    _ => Expr::Bin(*op, Box::new(a), Box::new(b)),
                }
            }
            _ => e.clone(),
        }
    }
    let mut changed = false;
    let folded = fold(filter, params, &mut changed);
    changed.then_some(folded)
}

/// The bound `condition` (a conjunct of the WHERE filter) puts on the length of the relation
/// `var`, when it is `length(var) <= e` (or `<`, or the same turned round) and `e` names no
/// variable: the most hops a trail of it needs. A strict bound is taken as an inclusive one;
/// the filter still applies.
fn length_bound(condition: &Expr, var: &str) -> Option<Expr> {
    match compared_with_constant(condition, &|x| is_length_of(x, var))? {
        (_, BinOp::Le | BinOp::Lt, bound) => Some(bound.clone()),
        _ => None,
    }
}

/// Whether `x` is `length(var)`.
fn is_length_of(x: &Expr, var: &str) -> bool {
    matches!(x, Expr::Call(name, args, _) if name == "length"
        && matches!(&args[..], [Expr::Var(v)] if v == var))
}

/// The expressions of `q` but WHERE's and RETURN's: ORDER BY's, LIMIT's, the SEARCH texts and
/// the values of the patterns' property maps.
fn other_expressions(q: &Query) -> Vec<&Expr> {
    let mut exprs: Vec<&Expr> = Vec::new();
    exprs.extend(q.order.iter().map(|(e, _)| e));
    exprs.extend(&q.limit);
    exprs.extend(q.searches.iter().map(|s| &s.text));
    for path in &q.patterns {
        exprs.extend(path.nodes().flat_map(|n| n.props.iter().map(|(_, e)| e)));
        exprs.extend(
            path.steps
                .iter()
                .flat_map(|(r, _)| r.props.iter().map(|(_, e)| e)),
        );
    }
    exprs
}

/// Sets [`Op::Expand`]'s `reach` on each relation of several hops that
/// [`least_lengths_alone`] allows.
fn mark_least_length_walks(ops: &mut [Op], q: &Query, slots: &[String]) {
    let elsewhere: Vec<usize> = (ops.iter())
        .flat_map(|op| match op {
            Op::Expand { distinct_from, .. } => distinct_from.clone(),
            Op::BindPath { rels, .. } => rels.clone(),
            _ => Vec::new(),
        })
        .collect();
    for op in ops.iter_mut() {
        if let Op::Expand {
            from,
            rel,
            to,
            min,
            max,
            to_bound,
            props,
            reach,
            ..
        } = op
        {
            let several = !(*min == 1 && *max == 1);
            *reach = several
                && *min <= 1
                && !*to_bound
                && props.is_empty()
                && !elsewhere.contains(rel)
                && least_lengths_alone(q, &slots[*rel], (&slots[*from], &slots[*to]), *min);
        }
    }
}

/// Whether the query reads relation `var` of several hops, from node `ends.0` to `ends.1`,
/// only for its least length to each node it reaches, so that one row a node stands for all
/// its trails: the relation is read only as `min(length(var))` in RETURN and in upper bounds
/// of WHERE (`length(var) <= $depth`: the least length passes whenever any does); no other
/// aggregate counts rows (`min` and `max` of what is not the relation do not), or with none
/// the rows are DISTINCT; and, where trails start at one hop, the filter leaves the start
/// out (`b <> a`), whose least length back to itself a walk does not find. A breadth-first
/// walk's path to a node is a trail of its least length.
fn least_lengths_alone(q: &Query, var: &str, ends: (&str, &str), min: u32) -> bool {
    let reads = |e: &Expr| {
        let mut any = false;
        for_each_var(e, &mut |v| any |= v == var);
        any
    };
    let least_length = |e: &Expr| {
        matches!(e, Expr::Call(name, args, _) if name == "min"
            && matches!(&args[..], [arg] if is_length_of(arg, var)))
    };
    let conditions = q.filter.as_ref().map(conjuncts).unwrap_or_default();
    let bounded_alone = (conditions.iter())
        .filter(|c| reads(c))
        .all(|c| length_bound(c, var).is_some());
    let start_left_out = min == 0
        || conditions.iter().any(|c| {
            matches!(c, Expr::Bin(BinOp::Ne, a, b)
                if matches!((&**a, &**b), (Expr::Var(x), Expr::Var(y))
                    if (x == ends.0 && y == ends.1) || (x == ends.1 && y == ends.0)))
        });
    let mut aggregates = false;
    let items_insensitive = q.items.iter().all(|item| match &item.expr {
        e if least_length(e) => {
            aggregates = true;
            true
        }
        e @ Expr::Call(name, ..) if super::exec::is_aggregate(e) => {
            aggregates = true;
            matches!(name.as_str(), "min" | "max") && !reads(e)
        }
        e => first_aggregate(e).is_none() && !reads(e),
    });
    let read_elsewhere = other_expressions(q).into_iter().any(reads);
    bounded_alone
        && start_left_out
        && items_insensitive
        && (aggregates || q.distinct)
        && !read_elsewhere
}

/// `ts` bounds on `var` that `WHERE` states as top-level conjuncts with constant sides.
fn ts_bounds(filter: Option<&Expr>, var: &str) -> (Option<Expr>, Option<Expr>) {
    let mut lower = None;
    let mut upper = None;
    fn walk(e: &Expr, var: &str, lower: &mut Option<Expr>, upper: &mut Option<Expr>) {
        match e {
            Expr::Bin(BinOp::And, a, b) => {
                walk(a, var, lower, upper);
                walk(b, var, lower, upper);
            }
            _ => match ts_bound_of(e, var) {
                Some((true, value)) => *lower = Some(value.clone()),
                Some((false, value)) => *upper = Some(value.clone()),
                None => {}
            },
        }
    }
    if let Some(f) = filter {
        walk(f, var, &mut lower, &mut upper);
    }
    (lower, upper)
}

/// Whether `e` reads a variable (a row's value).
pub(super) fn mentions_vars(e: &Expr) -> bool {
    let mut any = false;
    for_each_var(e, &mut |_| any = true);
    any
}

/// Calls `f` with each variable `e` reads, in the order written.
fn for_each_var(e: &Expr, f: &mut impl FnMut(&str)) {
    match e {
        Expr::Var(v) => f(v),
        Expr::Lit(_) | Expr::Param(_) => {}
        Expr::Prop(x, _) | Expr::Not(x) | Expr::Neg(x) | Expr::IsNull(x, _) => for_each_var(x, f),
        Expr::Call(_, args, _) => args.iter().for_each(|a| for_each_var(a, f)),
        Expr::List(args) => args.iter().for_each(|a| for_each_var(a, f)),
        Expr::Bin(_, a, b) => {
            for_each_var(a, f);
            for_each_var(b, f);
        }
    }
}

/// The facets of event variable `var` an event scan can give each row from the episodic
/// index (kind, actor), where all the query reads of it is among them, its number, its time
/// and its label, or its count: none where it reads any other field, or the event itself,
/// for which its record is read anyway. Nor where a condition may leave few rows without
/// reading the facet, but for the facet the scan is `fixed` by, which costs nothing.
fn covered_facets(q: &Query, var: &str, fixed: Option<Facet>) -> Vec<Facet> {
    let mut read = BTreeSet::new();
    // The fields the event's own property maps give (`(e:Event {kind: 'TRADE'})`).
    let own_props: Vec<&str> = (q.patterns.iter())
        .flat_map(|p| p.nodes())
        .filter(|n| n.var.as_deref() == Some(var))
        .flat_map(|n| n.props.iter())
        .map(|(k, _)| k.as_str())
        .collect();
    read.extend(own_props.iter().copied());
    let exprs = (q.filter.iter())
        .chain(q.items.iter().map(|i| &i.expr))
        .chain(other_expressions(q));
    if !exprs.into_iter().all(|e| fields_read_of(e, var, &mut read)) {
        return Vec::new();
    }
    let given = ["kind", "actor", "seq", "ts", "label"];
    if !read.iter().all(|f| given.contains(f)) {
        return Vec::new();
    }
    // A condition on the event that reads neither (`e.seq = 5`, `{seq: 5}`) may leave a
    // few rows of many, which then read their records: reading every row's value first costs
    // more. A bound of its time is the scan's range (`ts_bounds`).
    let mut filtered_by: BTreeSet<String> = BTreeSet::new();
    let mut other_conditions = false;
    for k in own_props {
        match k {
            "kind" | "actor" => {
                filtered_by.insert(k.to_string());
            }
            // The facet the scan is fixed by is its index, not a check of its rows.
            k if fixed.is_some_and(|f| facet_field(f) == k) => {}
            _ => other_conditions = true,
        }
    }
    for c in q.filter.iter().flat_map(conjuncts) {
        let mut reads = BTreeSet::new();
        fields_read_of(&c, var, &mut reads);
        let a_time_bound = ts_bound_of(&c, var).is_some();
        if reads.contains("kind") || reads.contains("actor") {
            let facets = reads.into_iter().filter(|f| *f == "kind" || *f == "actor");
            filtered_by.extend(facets.map(str::to_string));
        } else if !reads.is_empty() && !a_time_bound {
            other_conditions = true;
        }
    }
    [Facet::Kind, Facet::Actor]
        .into_iter()
        .filter(|f| read.contains(facet_field(*f)))
        .filter(|f| !other_conditions || fixed == Some(*f) || filtered_by.contains(facet_field(*f)))
        .collect()
}

/// Adds to `read` the fields `e` reads of variable `var` (`var.kind`); `false` where it reads
/// `var` otherwise than through a field or in `count(var)`.
fn fields_read_of<'e>(e: &'e Expr, var: &str, read: &mut BTreeSet<&'e str>) -> bool {
    let is_var = |x: &Expr| matches!(x, Expr::Var(v) if v == var);
    match e {
        Expr::Prop(x, name) if is_var(x) => {
            read.insert(name.as_str());
            true
        }
        Expr::Var(v) => v != var,
        Expr::Call(name, args, _) if name == "count" && args.len() == 1 && is_var(&args[0]) => true,
        Expr::Lit(_) | Expr::Param(_) => true,
        Expr::Prop(x, _) | Expr::Not(x) | Expr::Neg(x) | Expr::IsNull(x, _) => {
            fields_read_of(x, var, read)
        }
        Expr::Call(_, args, _) => args.iter().all(|a| fields_read_of(a, var, read)),
        Expr::List(args) => args.iter().all(|a| fields_read_of(a, var, read)),
        Expr::Bin(_, a, b) => fields_read_of(a, var, read) && fields_read_of(b, var, read),
    }
}

/// The expressions of patterns name only variables of the query and hold no aggregate:
/// checked before planning, as a pattern may read a variable that a later one binds.
fn check_pattern_expressions(q: &Query) -> Result<(), QueryError> {
    // First every name the query binds, since a property may read a variable that a later
    // pattern binds; the labels are checked on the way.
    let mut known: HashMap<String, usize> = q.searches.iter().map(|s| (s.var.clone(), 0)).collect();
    for path in &q.patterns {
        known.extend(path.var.iter().map(|v| (v.clone(), 0)));
        known.extend(
            path.steps
                .iter()
                .filter_map(|(r, _)| r.var.clone())
                .map(|v| (v, 0)),
        );
        for n in path.nodes() {
            // Events and nodes are matched apart: the other labels were dropped.
            if n.labels.len() > 1 && n.labels.iter().any(|l| l == EVENT_LABEL) {
                return Err(plan_err_at(
                    Some(n.span),
                    "an (:Event) pattern takes no other label: match events and nodes apart",
                ));
            }
            known.extend(n.var.iter().map(|v| (v.clone(), 0)));
        }
    }
    let check = |e: &Expr, at: Span| -> Result<(), QueryError> {
        check_vars(e, &known, &[], &q.places)?;
        match first_aggregate(e) {
            Some(name) => Err(plan_err_at(
                q.places.of_call_in(name, Some(at)),
                "aggregates (count, min, ...) belong in RETURN, not in a pattern or SEARCH",
            )),
            None => Ok(()),
        }
    };
    for s in &q.searches {
        check(&s.text, s.span)?;
    }
    for path in &q.patterns {
        for n in path.nodes() {
            n.props.iter().try_for_each(|(_, e)| check(e, n.span))?;
        }
        for (r, _) in &path.steps {
            r.props.iter().try_for_each(|(_, e)| check(e, r.span))?;
        }
    }
    Ok(())
}

/// The name of the first aggregate in `e`, if any.
fn first_aggregate(e: &Expr) -> Option<&str> {
    match e {
        Expr::Call(name, ..) if super::exec::AGGREGATES.contains(&name.as_str()) => Some(name),
        Expr::Call(_, args, _) => args.iter().find_map(first_aggregate),
        Expr::List(args) => args.iter().find_map(first_aggregate),
        Expr::Lit(_) | Expr::Param(_) | Expr::Var(_) => None,
        Expr::Prop(x, _) | Expr::Not(x) | Expr::Neg(x) | Expr::IsNull(x, _) => first_aggregate(x),
        Expr::Bin(_, a, b) => first_aggregate(a).or_else(|| first_aggregate(b)),
    }
}

/// Adds to `out` each parameter `e` reads that it lacks, in the order written.
pub(super) fn collect_params(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Param(p) => {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        Expr::Lit(_) | Expr::Var(_) => {}
        Expr::Prop(x, _) | Expr::Not(x) | Expr::Neg(x) | Expr::IsNull(x, _) => {
            collect_params(x, out)
        }
        Expr::Call(_, args, _) => args.iter().for_each(|a| collect_params(a, out)),
        Expr::List(args) => args.iter().for_each(|a| collect_params(a, out)),
        Expr::Bin(_, a, b) => {
            collect_params(a, out);
            collect_params(b, out);
        }
    }
}

fn check_vars(
    e: &Expr,
    known: &HashMap<String, usize>,
    aliases: &[String],
    places: &Places,
) -> Result<(), QueryError> {
    let check = |x: &Expr| check_vars(x, known, aliases, places);
    match e {
        Expr::Var(v) if !known.contains_key(v) && !aliases.contains(v) => Err(plan_err_at(
            places.of_var(v),
            format!("unknown variable {v}: bind it in MATCH or SEARCH first"),
        )),
        Expr::Var(_) | Expr::Lit(_) | Expr::Param(_) => Ok(()),
        Expr::Prop(x, _) | Expr::Not(x) | Expr::Neg(x) | Expr::IsNull(x, _) => check(x),
        Expr::Call(name, args, at) => {
            // The call's own name (not the first call of that name in the text).
            let named = Some(Span {
                start: at.span().start,
                end: at.span().start + name.len(),
            });
            if !super::exec::FUNCTIONS.contains(&name.as_str()) {
                return Err(plan_err_at(
                    named,
                    format!(
                        "unknown function {name}(); known: {}",
                        super::exec::FUNCTIONS.join(", ")
                    ),
                ));
            }
            match super::exec::arity(name) {
                Some(n) if args.len() != n => Err(plan_err_at(
                    named,
                    format!("{name}() takes {n} argument(s), got {}", args.len()),
                )),
                _ => match (super::exec::names_a_string(name), args.get(1)) {
                    // A literal of another kind can only fail as the query runs, where the
                    // error would have no place in the text.
                    (Some(says), Some(Expr::Lit(l))) if !matches!(l, Literal::Str(_)) => {
                        Err(plan_err_at(Some(at.span()), says))
                    }
                    _ => args.iter().try_for_each(check),
                },
            }
        }
        Expr::List(args) => args.iter().try_for_each(check),
        Expr::Bin(_, a, b) => {
            check(a)?;
            check(b)
        }
    }
}

/// Plans a parsed query: its searches, then each pattern from its cheapest anchor, then the
/// filter; the RETURN items and ORDER BY are checked, and the parameters it uses collected.
pub fn plan(q: &Query, limits: PlanLimits) -> Result<Plan, QueryError> {
    let mut p = Planner {
        slots: Vec::new(),
        index: HashMap::new(),
        kinds: HashMap::new(),
        ops: Vec::new(),
        bound: Vec::new(),
        limits,
        waiting: Vec::new(),
        conditions: q.filter.as_ref().map(conjuncts).unwrap_or_default(),
    };
    check_pattern_expressions(q)?;
    p.plan_searches(&q.searches, &q.places)?;
    // Relations are distinct edges within one MATCH clause (openCypher's relationship
    // isomorphism, GQL's DIFFERENT EDGES), so the trail holds the relation slots of the
    // clause's patterns planned so far and starts afresh at the next clause.
    let mut trail: Vec<usize> = Vec::new();
    let mut clause = q.patterns.first().map_or(0, |path| path.clause);
    for path in &q.patterns {
        if path.clause != clause {
            clause = path.clause;
            trail.clear();
        }
        p.plan_path(path, q.filter.as_ref(), &mut trail)?;
        // At the pattern that passes the bound, which had been said with no place.
        if p.ops.len() > MAX_OPS {
            return Err(plan_err_at(Some(path.span), too_many_steps(p.ops.len())));
        }
    }
    // Every variable is bound now: no property check is left waiting.
    p.check_ready();
    debug_assert!(p.waiting.is_empty());
    if p.ops.len() > MAX_OPS {
        return Err(plan_err(too_many_steps(p.ops.len())));
    }
    if let Some(f) = &q.filter {
        check_vars(f, &p.index, &[], &q.places)?;
        if let Some(name) = first_aggregate(f) {
            return Err(plan_err_at(
                q.places.of_call_in(name, q.places.filter),
                "aggregates (count, min, ...) belong in RETURN, not WHERE",
            ));
        }
        // What no pattern made ready (a condition of constants only): checked last.
        p.ops.extend(
            std::mem::take(&mut p.conditions)
                .into_iter()
                .map(Op::Filter),
        );
    }
    check_return_items(&q.items, &p.index, &q.places)?;
    let order = order_by_expressions(q, &p.index)?;
    if let Some(l) = &q.limit {
        if mentions_vars(l) {
            return Err(plan_err_at(
                q.places.limit,
                "LIMIT takes a number or a parameter",
            ));
        }
    }
    mark_least_length_walks(&mut p.ops, q, &p.slots);
    let params = params_used(q, &p.ops, &order);
    // The first operator alone, run once: a scan later in the plan runs once for each row
    // before it, and would read the index each time (a join of two scans: 0.1 s to 10 s).
    if let Some(Op::ScanEvents {
        slot,
        covered,
        facet,
        ..
    }) = p.ops.first_mut()
    {
        let fixed = facet.as_ref().map(|(f, _)| *f);
        *covered = covered_facets(q, &p.slots[*slot], fixed);
    }
    Ok(Plan {
        slots: p.slots,
        ops: p.ops,
        distinct: q.distinct,
        returns: q
            .items
            .iter()
            .map(|i| (i.alias.clone(), i.expr.clone()))
            .collect(),
        order,
        limit: q.limit.clone(),
        limit_at: q.places.limit,
        params,
    })
}

impl Planner {
    /// Each SEARCH clause binds its variable to the nodes the full-text index finds.
    fn plan_searches(&mut self, searches: &[Search], places: &Places) -> Result<(), QueryError> {
        for s in searches {
            // The text is read before any pattern binds: only an earlier SEARCH's variable can
            // be read (any other was read as null).
            if let Some(v) = self.first_unbound(&s.text) {
                return Err(plan_err_at(
                    places.of_var_in(&v, Some(s.span)),
                    format!(
                        "SEARCH ... FOR reads {v}, which no earlier SEARCH binds: give a string, \
                         a parameter or an earlier SEARCH's variable"
                    ),
                ));
            }
            match &s.text {
                Expr::Lit(Literal::Str(t)) if crate::text::is_blank(t) => {
                    return Err(plan_err_at(
                        Some(s.text_span),
                        super::exec::SEARCH_TEXT_IS_BLANK,
                    ));
                }
                Expr::Lit(Literal::Str(_)) => {}
                Expr::Lit(_) => {
                    return Err(plan_err_at(
                        Some(s.text_span),
                        super::exec::SEARCH_TAKES_A_STRING,
                    ));
                }
                _ => {}
            }
            let slot = self.slot(Some(&s.var), Kind::Node, s.span)?;
            if self.bound[slot] {
                // A second SEARCH into the same variable would silently keep only the rows both
                // searches share (a join nobody asked for).
                return Err(plan_err_at(
                    Some(s.span),
                    format!(
                        "variable {} is bound by two SEARCH clauses; give each its own variable",
                        s.var
                    ),
                ));
            }
            self.ops.push(Op::Search {
                slot,
                text: s.text.clone(),
                // The index returns no more than this whatever is asked; a smaller plan value
                // keeps a huge LIMIT from reaching any allocation sized by it.
                limit: s
                    .limit
                    .unwrap_or(10)
                    .min(crate::text::TextIndex::MAX_SEARCH_HITS as u64),
                text_at: s.text_span,
            });
            self.bound[slot] = true;
        }
        Ok(())
    }

    /// One pattern: bound at its cheapest node (one bound already, then by key, by name, by
    /// label, a scan; the first of equals), then expanded forwards to its end and backwards to
    /// its start; `trail` holds the relation slots of the clause's patterns planned so far.
    fn plan_path(
        &mut self,
        path: &PathPat,
        filter: Option<&Expr>,
        trail: &mut Vec<usize>,
    ) -> Result<(), QueryError> {
        let start = &path.start;
        let mut node_slots = vec![self.slot(start.var.as_deref(), Kind::Node, start.span)?];
        let mut rel_slots = Vec::new();
        for (rel, node) in &path.steps {
            let slot = self.slot(rel.var.as_deref(), Kind::Rel, rel.span)?;
            // A second use would bind it anew (the rows of both, crossed), not join on it.
            if let Some(v) = rel
                .var
                .as_deref()
                .filter(|_| self.bound[slot] || rel_slots.contains(&slot))
            {
                return Err(plan_err_at(
                    Some(rel.span),
                    format!(
                        "relation variable {v} names two relations; give each its own variable \
                         (and compare them in WHERE if they are to be one)"
                    ),
                ));
            }
            rel_slots.push(slot);
            node_slots.push(self.slot(node.var.as_deref(), Kind::Node, node.span)?);
        }
        let nodes: Vec<&NodePat> = path.nodes().collect();
        let event = nodes
            .iter()
            .find(|n| n.labels.iter().any(|l| l == EVENT_LABEL));
        if let Some(event) = event {
            // Whichever node a path is anchored at, an event in it matches nothing; and a
            // path's nodes are graph nodes, so one bound to an event alone held none
            // (`nodes(p)` was `[]`).
            let refusal = if !path.steps.is_empty() {
                Some("events have no relations: an (:Event) node cannot be part of a path")
            } else if path.var.is_some() {
                Some("an (:Event) node is not a path's node: return the event, not a path")
            } else {
                None
            };
            if let Some(message) = refusal {
                return Err(plan_err_at(Some(event.span), message));
            }
        }
        let anchor = (0..nodes.len())
            .min_by_key(|&i| (self.access(node_slots[i], nodes[i]), i))
            .unwrap_or(0);
        let var = nodes[anchor].var.clone().unwrap_or_default();
        let bounds = ts_bounds(filter, &var);
        self.bind_node(node_slots[anchor], nodes[anchor], &bounds);
        for i in anchor..path.steps.len() {
            let (rel, _) = &path.steps[i];
            self.expand(
                Step {
                    from: node_slots[i],
                    rel,
                    rel_slot: rel_slots[i],
                    to: node_slots[i + 1],
                    to_node: nodes[i + 1],
                    flip: false,
                },
                trail,
            )?;
            trail.push(rel_slots[i]);
        }
        for i in (0..anchor).rev() {
            let (rel, _) = &path.steps[i];
            self.expand(
                Step {
                    from: node_slots[i + 1],
                    rel,
                    rel_slot: rel_slots[i],
                    to: node_slots[i],
                    to_node: nodes[i],
                    flip: true,
                },
                trail,
            )?;
            trail.push(rel_slots[i]);
        }
        if let Some(v) = &path.var {
            let slot = self.slot(Some(v), Kind::Path, path.span)?;
            if self.bound[slot] {
                return Err(plan_err_at(
                    Some(path.span),
                    format!("path variable {v} names two patterns; give each its own"),
                ));
            }
            self.ops.push(Op::BindPath {
                slot,
                nodes: node_slots,
                rels: rel_slots,
            });
            self.bound[slot] = true;
            self.check_ready();
        }
        Ok(())
    }
}

/// The RETURN items name bound variables, each its own column, and an aggregate is a whole
/// item of one argument.
fn check_return_items(
    items: &[ReturnItem],
    index: &HashMap<String, usize>,
    places: &Places,
) -> Result<(), QueryError> {
    let mut columns = std::collections::HashSet::new();
    for item in items {
        // A row read by column name (its JSON object) would keep one of two alike.
        if !columns.insert(item.alias.as_str()) {
            return Err(plan_err_at(
                Some(item.span),
                format!(
                    "two RETURN items are named {}; give one another name with AS",
                    item.alias
                ),
            ));
        }
        check_vars(&item.expr, index, &[], places)?;
        match &item.expr {
            Expr::Call(name, args, _) if super::exec::AGGREGATES.contains(&name.as_str()) => {
                let ok = if name == "count" {
                    args.len() <= 1
                } else {
                    args.len() == 1
                };
                if !ok {
                    return Err(plan_err_at(
                        Some(item.span),
                        format!("{name}() takes one argument (count also takes *)"),
                    ));
                }
                if let Some(inner) = args.iter().find_map(first_aggregate) {
                    // Inside the item, after the outer call's own name.
                    let args_at = Span {
                        start: item.span.start + 1,
                        end: item.span.end,
                    };
                    return Err(plan_err_at(
                        places.of_call_in(inner, Some(args_at)),
                        "aggregates cannot be nested",
                    ));
                }
            }
            e => {
                if let Some(name) = first_aggregate(e) {
                    return Err(plan_err_at(
                        places.of_call_in(name, Some(item.span)),
                        format!("{}: an aggregate must be a whole RETURN item", item.alias),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `e` with each RETURN alias it reads replaced by the aliased expression, wherever in `e`
/// (`ORDER BY -w` for `a.w AS w`). A returned column's name stands for the column, even where
/// a pattern variable has that name too (as in Cypher: it had ordered by the variable).
fn with_aliases_read(e: &Expr, items: &[ReturnItem]) -> Expr {
    let read = |x: &Expr| Box::new(with_aliases_read(x, items));
    match e {
        Expr::Var(v) => items
            .iter()
            .find(|i| &i.alias == v)
            .map_or_else(|| e.clone(), |i| i.expr.clone()),
        Expr::Lit(_) | Expr::Param(_) => e.clone(),
        Expr::Prop(x, p) => Expr::Prop(read(x), p.clone()),
        Expr::Not(x) => Expr::Not(read(x)),
        Expr::Neg(x) => Expr::Neg(read(x)),
        Expr::IsNull(x, negated) => Expr::IsNull(read(x), *negated),
        Expr::Call(name, args, at) => Expr::Call(
            name.clone(),
            args.iter().map(|a| with_aliases_read(a, items)).collect(),
            *at,
        ),
        Expr::List(xs) => Expr::List(xs.iter().map(|x| with_aliases_read(x, items)).collect()),
        Expr::Bin(op, a, b) => Expr::Bin(*op, read(a), read(b)),
    }
}

/// Whether `e` is made of returned expressions (`items`) and constants only.
fn reads_only_returned(e: &Expr, items: &[ReturnItem]) -> bool {
    let only = |x: &Expr| reads_only_returned(x, items);
    if items.iter().any(|i| &i.expr == e) {
        return true;
    }
    match e {
        Expr::Lit(_) | Expr::Param(_) => true,
        Expr::Var(_) => false,
        Expr::Prop(x, _) | Expr::Not(x) | Expr::Neg(x) | Expr::IsNull(x, _) => only(x),
        Expr::Call(_, args, _) => args.iter().all(only),
        Expr::List(xs) => xs.iter().all(only),
        Expr::Bin(_, a, b) => only(a) && only(b),
    }
}

/// ORDER BY's expressions, checked; one may read RETURN aliases, which are replaced by the
/// aliased expressions ([`with_aliases_read`]).
fn order_by_expressions(
    q: &Query,
    index: &HashMap<String, usize>,
) -> Result<Vec<(Expr, bool)>, QueryError> {
    let aliases: Vec<String> = q.items.iter().map(|i| i.alias.clone()).collect();
    let order: Vec<(Expr, bool)> = q
        .order
        .iter()
        .map(|(e, desc)| (with_aliases_read(e, &q.items), *desc))
        .collect();
    let grouped = q.items.iter().any(|i| super::exec::is_aggregate(&i.expr));
    for (i, (e, _)) in order.iter().enumerate() {
        let at = q.places.order.get(i).copied();
        check_vars(e, index, &aliases, &q.places)?;
        if q.distinct && !grouped && !reads_only_returned(e, &q.items) {
            // DISTINCT drops every other value before the rows are ordered, as openCypher
            // has it: ordered by one it dropped, rows had been sorted first and each kept
            // where it first came.
            return Err(plan_err_at(
                at,
                "with DISTINCT, ORDER BY may only read returned columns",
            ));
        }
        if grouped {
            // Rows are groups by then: only what each group returns can order them.
            if !q.items.iter().any(|item| &item.expr == e) {
                return Err(plan_err_at(
                    at,
                    "with aggregates, ORDER BY may only name returned columns",
                ));
            }
        } else if let Some(name) = first_aggregate(e) {
            return Err(plan_err_at(
                q.places.of_call_in(name, at),
                format!("{name}() in ORDER BY: return it with AS and order by that name"),
            ));
        }
    }
    Ok(order)
}

/// The parameters the plan reads, in the order it first reads them.
fn params_used(q: &Query, ops: &[Op], order: &[(Expr, bool)]) -> Vec<String> {
    let mut params = Vec::new();
    for s in &q.searches {
        collect_params(&s.text, &mut params);
    }
    for op in ops {
        match op {
            Op::LookupKey { key: e, .. } | Op::LookupName { name: e, .. } | Op::Filter(e) => {
                collect_params(e, &mut params)
            }
            Op::CheckNode { props, .. } => props
                .iter()
                .for_each(|(_, e)| collect_params(e, &mut params)),
            Op::Expand { props, max_by, .. } => props
                .iter()
                .map(|(_, e)| e)
                .chain(max_by)
                .for_each(|e| collect_params(e, &mut params)),
            Op::ScanEvents {
                from, to, facet, ..
            } => from
                .iter()
                .chain(to.iter())
                .chain(facet.iter().map(|(_, e)| e))
                .for_each(|e| collect_params(e, &mut params)),
            _ => {}
        }
    }
    for i in &q.items {
        collect_params(&i.expr, &mut params);
    }
    for (e, _) in order {
        collect_params(e, &mut params);
    }
    if let Some(l) = &q.limit {
        collect_params(l, &mut params);
    }
    params
}
