//! Property: a user's deletion leaves a store that consolidates and forgets believing what a
//! store given the same events and deletions, and never consolidated or forgotten, believes:
//! what the log without the deleted events says. The store's summaries restated the deleted
//! events' facts, and forgetting left some facts to the summaries alone; the deletion takes
//! the summaries that carry what it deletes and makes them again from what is left.
//!
//! Random notes on four people (made, named, aliased, given properties, retracted, made
//! again) and the agent's beliefs in them (with confidences, times and properties, retracted),
//! written week by week: the store consolidates each week in days of 100 and forgets down to
//! a small budget, late notes arrive for a week already summarised, and the user deletes notes
//! (kept or forgotten) and people. After each deletion both stores are compared: every belief
//! (an edge at an effective confidence of at least 0.5, or at a pinned node) with its
//! confidence, times and properties, and each of its nodes with its label, name, aliases,
//! properties and pin; and no node or edge is in the store that the reference lacks. This is
//! session 38's fuzz harness in the suite, without its compactions (once a forgotten note's
//! record is a tombstone what it gave is unknown: the design's stated limit).
//!
//! The suite runs the same cases each time (`SUITE_SEED`); `LOCI_PROP_CASES=200` runs more
//! cases, `PROPTEST_RNG_SEED=N` others; with `LOCI_PROP_TRACE` set, each note, forgetting and
//! deletion is written to stderr. (A random seed in every run had CI fail now and then on a
//! gap since closed: `a_belief_a_deleted_retraction_had_ended_comes_back_when_forgetting_took_its_period`.)

use std::collections::{BTreeMap, BTreeSet};

use loci::dynamics::consolidate::{self, ConsolidateOptions, RuleSummarizer};
use loci::dynamics::forget::{self, ForgetOptions};
use loci::model::{Assertion, EdgeUpsert, EventDraft, NodeUpsert, Value};
use loci::{BackendKind, DeleteRequest, Store};
use proptest::prelude::*;

const KEYS: [&str; 4] = ["n1", "n2", "n3", "n4"];
const LABELS: [&str; 3] = ["Person", "Smith", "NPC"];
const NAMES: [&str; 3] = ["Ann", "Annie", "Bob"];
const ALIASES: [&str; 3] = ["A1", "A2", "A3"];
const RELATIONS: [&str; 3] = ["KNOWS", "HOME", "OFFERS"];
const CONFIDENCES: [f32; 5] = [0.3, 0.55, 0.7, 0.9, 1.0];
const SALIENCES: [f32; 4] = [0.1, 0.3, 0.5, 0.9];
/// World time units in a day and a week of the store's consolidation.
const DAY: i64 = 100;
const WEEK: i64 = 7 * DAY;

/// What one assertion of a note does, before it is made valid against the reference store
/// (`Notes::assertions`): numbers index the tables above.
#[derive(Clone, Debug)]
enum Step {
    Node {
        key: u8,
        label: Option<u8>,
        name: Option<u8>,
        alias: Option<u8>,
        prop: Option<u8>,
    },
    Edge {
        relation: u8,
        to: u8,
        confidence: Option<u8>,
        from_time: Option<u16>,
        price: Option<u8>,
    },
    RetractNode(u8),
    RetractEdge(u8),
}

#[derive(Clone, Debug)]
struct Note {
    salience: u8,
    steps: Vec<Step>,
}

#[derive(Clone, Debug)]
enum Deletion {
    /// The n-th note not deleted yet (modulo their number).
    Event(u16),
    Node(u8),
    /// The n-th live summary of the store (modulo their number), by its number: the user
    /// deletes the summary's text and what it alone held of forgotten events, so the
    /// reference deletes those (`forgotten_under`); its events left are summarised again.
    Summary(u16),
}

#[derive(Clone, Debug)]
struct Week {
    notes: Vec<Note>,
    pin: Option<u8>,
    /// Forget down to this many events held.
    forget: Option<u8>,
    /// A note for the week before, once it is summarised.
    late: Option<Note>,
    deletions: Vec<Deletion>,
}

fn step() -> impl Strategy<Value = Step> {
    let small = |n: u8| 0..n;
    prop_oneof![
        4 => (small(4), proptest::option::of(small(3)), proptest::option::of(small(3)),
              proptest::option::weighted(0.3, small(3)), proptest::option::weighted(0.4, small(4)))
            .prop_map(|(key, label, name, alias, prop)| Step::Node { key, label, name, alias, prop }),
        4 => (small(3), small(4), proptest::option::weighted(0.7, small(5)),
              proptest::option::weighted(0.2, 0u16..1200), proptest::option::weighted(0.25, small(3)))
            .prop_map(|(relation, to, confidence, from_time, price)| Step::Edge {
                relation, to, confidence, from_time, price,
            }),
        1 => small(4).prop_map(Step::RetractNode),
        1 => small(12).prop_map(Step::RetractEdge),
    ]
}

fn note() -> impl Strategy<Value = Note> {
    (0u8..4, proptest::collection::vec(step(), 1..4))
        .prop_map(|(salience, steps)| Note { salience, steps })
}

fn week() -> impl Strategy<Value = Week> {
    week_with(
        prop_oneof![3 => any::<u16>().prop_map(Deletion::Event), 1 => (0u8..4).prop_map(Deletion::Node)]
            .boxed(),
    )
}

fn week_with(deletion: BoxedStrategy<Deletion>) -> impl Strategy<Value = Week> {
    (
        proptest::collection::vec(note(), 3..7),
        proptest::option::weighted(0.2, 0u8..4),
        proptest::option::weighted(0.7, 2u8..9),
        proptest::option::weighted(0.4, note()),
        proptest::collection::vec(deletion, 0..3),
    )
        .prop_map(|(notes, pin, forget, late, deletions)| Week {
            notes,
            pin,
            forget,
            late,
            deletions,
        })
}

/// The two stores, and the notes both took: each note's numbers in the store and in the
/// reference (they part once the store writes summaries), its assertions, and whether a
/// deletion took it.
struct Notes {
    store: Store,
    reference: Store,
    taken: Vec<Taken>,
    latest: i64,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

struct Taken {
    seqs: (u64, u64),
    assertions: Vec<Assertion>,
    deleted: bool,
}

impl Notes {
    fn new(backend: BackendKind) -> Notes {
        let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut notes = Notes {
            store: Store::create(dirs.0.path(), backend).unwrap(),
            reference: Store::create(dirs.1.path(), backend).unwrap(),
            taken: Vec::new(),
            latest: 0,
            _dirs: dirs,
        };
        let bot = Assertion::UpsertNode(NodeUpsert {
            key: "bot".into(),
            label: Some("Bot".into()),
            name: Some("bot".into()),
            ..Default::default()
        });
        notes.ingest(1, 0.5, vec![bot]);
        notes
    }

    /// Gives both stores the note, made valid against the reference (an edge to a person it
    /// lacks makes them first; a retraction of what it lacks is left out); the store must take
    /// whatever the reference takes.
    fn note(&mut self, ts: i64, note: &Note) {
        let assertions = self.assertions(note);
        if !assertions.is_empty() {
            let salience = SALIENCES[note.salience as usize % SALIENCES.len()];
            self.ingest(ts, salience, assertions);
        }
    }

    fn ingest(&mut self, ts: i64, salience: f32, assertions: Vec<Assertion>) {
        let mut d = EventDraft::new(ts, "bot", "NOTE");
        d.salience = Some(salience);
        d.payload = Value::from(format!("note at {ts}"));
        d.assertions = assertions;
        match self.store.check(vec![d.clone()]) {
            Err(e) => {
                let said = e.to_string();
                assert!(
                    said.contains("forgetting let it fade"),
                    "the store refused what the reference takes: {said}: {d:?}"
                );
            }
            Ok(_) => assert!(
                !self.links_a_faded_node(&d.assertions),
                "the store took an edge to a node it let fade: {d:?}"
            ),
        }
        d.assertions = self.with_faded_named_again(d.assertions);
        let r = self.reference.ingest(vec![d.clone()]).unwrap();
        let s = (self.store.ingest(vec![d.clone()]))
            .unwrap_or_else(|e| panic!("the store refused what the reference took: {e}: {d:?}"));
        self.latest = self.latest.max(ts);
        if std::env::var("LOCI_PROP_TRACE").is_ok() {
            eprintln!(
                "ingest ts={ts} sal={salience} s={} r={} {:?}",
                s.first_seq, r.first_seq, d.assertions
            );
        }
        self.taken.push(Taken {
            seqs: (s.first_seq, r.first_seq),
            assertions: d.assertions,
            deleted: false,
        });
    }

    /// Whether the reference holds node `key` and the store lacks it: forgetting let it fade
    /// there (or a deletion took from the store what it left in the reference, which the
    /// comparisons after each deletion would have found).
    fn faded_in_store(&self, key: &str) -> bool {
        self.store.node_by_key(key).is_none() && self.reference.node_by_key(key).is_some()
    }

    /// Whether an edge of `assertions` has an end the reference holds and the store lacks,
    /// not upserted before it.
    fn links_a_faded_node(&self, assertions: &[Assertion]) -> bool {
        let mut upserted = BTreeSet::new();
        assertions.iter().any(|a| match a {
            Assertion::UpsertNode(up) => {
                upserted.insert(up.key.as_str());
                false
            }
            Assertion::UpsertEdge(up) => [&up.from, &up.to]
                .into_iter()
                .any(|end| !upserted.contains(end.as_str()) && self.faded_in_store(end)),
            _ => false,
        })
    }

    /// The nodes beliefs hold in the reference, as [`Notes::compare`] reads them.
    fn belief_nodes_of_the_reference(&self) -> BTreeSet<String> {
        beliefs(&self.reference, self.latest).belief_nodes()
    }

    /// `assertions`, each node they name that the reference holds and forgetting let fade in
    /// the store (the node, or a value of it) named again first, as the reference holds it:
    /// the agent, told a node faded
    /// (an edge to it is refused, `Store::check` above), names it again; and a store cannot
    /// know what an upsert of a faded key would have added to: the detail forgetting took is
    /// gone (a store that never forgot is the wrong reference for such a node).
    fn with_faded_named_again(&self, assertions: Vec<Assertion>) -> Vec<Assertion> {
        let mut named: Vec<&str> = Vec::new();
        for a in &assertions {
            match a {
                Assertion::UpsertNode(up) => named.push(&up.key),
                Assertion::UpsertEdge(up) => named.extend([up.from.as_str(), up.to.as_str()]),
                _ => {}
            }
        }
        let mut again = Vec::new();
        for key in named {
            let Some(node) = self.reference.node_by_key(key) else {
                continue;
            };
            let seen = again
                .iter()
                .any(|a| matches!(a, Assertion::UpsertNode(up) if up.key == key));
            if seen {
                continue;
            }
            let mut props = node.props;
            match self.store.node_by_key(key) {
                None => {}
                // Its detail faded while no belief held it: forgetting may take any value of a
                // node no belief holds (seed 1: an alias only a forgotten note gave, the node
                // a belief's end once a late note linked it). A belief's node is compared
                // after each deletion, and forgetting keeps its values; a difference there is
                // the store's, not one to name away.
                Some(held) => {
                    let same = held.label == node.label
                        && held.name == node.name
                        && held.aliases == node.aliases
                        && held.props == props;
                    if same || self.belief_nodes_of_the_reference().contains(key) {
                        continue;
                    }
                    // Faded, or older: every value a note no deletion took gave it (helper-140:
                    // naming it again would otherwise hide a deleted note's value left on it).
                    let strays = self.values_no_live_note_gave(key, &held);
                    assert!(
                        strays.is_empty(),
                        "the store's {key} holds what no live note gave it: {strays:?}: {held:?}"
                    );
                    for k in held.props.into_keys() {
                        props.entry(k).or_insert(Value::Null);
                    }
                }
            }
            if std::env::var("LOCI_PROP_TRACE").is_ok() {
                eprintln!("named again, faded in the store: {key}");
            }
            again.push(Assertion::UpsertNode(NodeUpsert {
                key: key.into(),
                label: Some(node.label),
                name: Some(node.name),
                aliases: node.aliases,
                props,
                ..Default::default()
            }));
        }
        again.extend(assertions);
        again
    }

    /// The values of `held` (the store's node `key`) that no note the deletions left gave it
    /// and that are not a node's defaults (an entity named by its key).
    fn values_no_live_note_gave(&self, key: &str, held: &loci::model::Node) -> Vec<String> {
        let mut given: BTreeSet<String> = BTreeSet::from(["Entity".to_string(), key.to_string()]);
        let ups = (self.taken.iter().filter(|t| !t.deleted))
            .flat_map(|t| &t.assertions)
            .filter_map(|a| match a {
                Assertion::UpsertNode(up) if up.key == key => Some(up),
                _ => None,
            });
        for up in ups {
            given.extend(up.label.iter().chain(&up.name).chain(&up.aliases).cloned());
            given.extend((up.props.iter()).map(|(k, v)| format!("{k}={v:?}")));
        }
        let held_values = [&held.label, &held.name]
            .into_iter()
            .chain(&held.aliases)
            .cloned()
            .chain(held.props.iter().map(|(k, v)| format!("{k}={v:?}")));
        held_values.filter(|v| !given.contains(v)).collect()
    }

    fn assertions(&self, note: &Note) -> Vec<Assertion> {
        let mut exists: BTreeSet<String> = self.reference.graph().nodes().map(|n| n.key).collect();
        let g = self.reference.graph();
        let mut edges: BTreeSet<(String, String)> = g
            .edges()
            .map(|(_, c)| {
                let to = g.node_key(c.to).unwrap().to_string();
                (g.relation_name(c.relation).to_string(), to)
            })
            .collect();
        drop(g);
        let mut out = Vec::new();
        for step in &note.steps {
            match step {
                Step::Node {
                    key,
                    label,
                    name,
                    alias,
                    prop,
                } => {
                    let key = KEYS[*key as usize % 4];
                    let new = exists.insert(key.to_string());
                    let label = label.or(new.then_some(0));
                    let name = name.or(new.then_some(*label.as_ref().unwrap_or(&0)));
                    let mut props = loci::model::Props::new();
                    if let Some(p) = prop {
                        let v = match p {
                            0 => Value::from("smith"),
                            1 => Value::from("farmer"),
                            2 => Value::from(3),
                            _ if new => Value::from("smith"),
                            _ => Value::Null,
                        };
                        props.insert(if p % 2 == 0 { "job" } else { "age" }.into(), v);
                    }
                    out.push(Assertion::UpsertNode(NodeUpsert {
                        key: key.into(),
                        label: label.map(|l| LABELS[l as usize % 3].into()),
                        name: name.map(|n| format!("{}X{key}", NAMES[n as usize % 3])),
                        aliases: alias
                            .iter()
                            .map(|a| ALIASES[*a as usize % 3].into())
                            .collect(),
                        props,
                        ..Default::default()
                    }));
                }
                Step::Edge {
                    relation,
                    to,
                    confidence,
                    from_time,
                    price,
                } => {
                    let to = KEYS[*to as usize % 4];
                    if exists.insert(to.to_string()) {
                        out.push(Assertion::UpsertNode(NodeUpsert {
                            key: to.into(),
                            label: Some(LABELS[0].into()),
                            name: Some(format!("AnnX{to}")),
                            ..Default::default()
                        }));
                    }
                    let relation = RELATIONS[*relation as usize % 3];
                    let mut props = loci::model::Props::new();
                    if let Some(p) = price {
                        props.insert("price".into(), Value::from(*p as i64 + 1));
                    }
                    edges.insert((relation.to_string(), to.to_string()));
                    out.push(Assertion::UpsertEdge(EdgeUpsert {
                        from: "bot".into(),
                        relation: relation.into(),
                        to: to.into(),
                        confidence: confidence.map(|c| CONFIDENCES[c as usize % 5]),
                        valid_from: from_time.map(i64::from),
                        props,
                        ..Default::default()
                    }));
                }
                Step::RetractNode(key) => {
                    let key = KEYS[*key as usize % 4];
                    if exists.remove(key) {
                        edges.retain(|(_, to)| to != key);
                        out.push(Assertion::RetractNode { key: key.into() });
                    }
                }
                Step::RetractEdge(i) => {
                    let Some((relation, to)) = edges.iter().nth(*i as usize % edges.len().max(1))
                    else {
                        continue;
                    };
                    let (relation, to) = (relation.clone(), to.clone());
                    edges.remove(&(relation.clone(), to.clone()));
                    out.push(Assertion::RetractEdge {
                        from: "bot".into(),
                        relation,
                        to,
                    });
                }
            }
        }
        out
    }

    fn consolidate(&self) {
        let days = ConsolidateOptions::default()
            .with_policy(consolidate::ConsolidationPolicy::default().with_day(DAY));
        consolidate::consolidate(&self.store, &RuleSummarizer, &days).unwrap();
    }

    fn pin(&mut self, key: u8) {
        let key = KEYS[key as usize % 4];
        if self.faded_in_store(key) {
            let said = self.store.pin(&[key], true).unwrap_err().to_string();
            assert!(said.contains("forgetting let it fade"), "{said}");
        }
        // The agent, told the node faded, names it again (`with_faded_named_again`); so too
        // a node whose values faded while no belief held it, which the pin makes one (seed
        // 10: a user's deletion of the last summary restating a person's name, forgetting
        // having taken the note that gave it, left `Entity`/`n4`, pinned a week later).
        let bare = vec![Assertion::UpsertNode(NodeUpsert {
            key: key.into(),
            ..Default::default()
        })];
        if self.with_faded_named_again(bare.clone()).len() > bare.len() {
            let ts = self.latest;
            self.ingest(ts, 0.5, bare);
        }
        for s in [&self.store, &self.reference] {
            // A key neither store holds is refused by both.
            let _ = s.pin(&[key], true);
        }
    }

    /// Forgets down to `budget`, and again, as a user may: a run of one round left the week
    /// summaries alone in their weeks, which a second forgot (deleting a summary then lost a
    /// belief that only a forgotten week's records held); a forgetting now takes rounds.
    fn forget(&self, budget: u8) {
        let opts = ForgetOptions::with_budget(u64::from(budget));
        let (_, f) = forget::consolidate_then_forget(&self.store, Some(DAY), &opts).unwrap();
        if std::env::var("LOCI_PROP_TRACE").is_ok() {
            eprintln!("forget {budget}: {f:?}");
        }
        let f = forget::forget(&self.store, &opts).unwrap();
        if std::env::var("LOCI_PROP_TRACE").is_ok() {
            eprintln!("forget again {budget}: {f:?}");
        }
    }

    /// Deletes in both stores, or in neither when the store refuses (a forgotten note of which
    /// nothing is left, or a person no note names), and compares them.
    fn delete(&mut self, deletion: &Deletion, history: &str) {
        let (request, reference_request, notes) = match deletion {
            Deletion::Event(i) => {
                let left: Vec<usize> = (0..self.taken.len())
                    .filter(|t| !self.taken[*t].deleted && *t > 0)
                    .collect();
                if left.is_empty() {
                    return;
                }
                let t = left[*i as usize % left.len()];
                let (s, r) = self.taken[t].seqs;
                (
                    DeleteRequest::events([s]),
                    DeleteRequest::events([r]),
                    vec![t],
                )
            }
            Deletion::Node(k) => {
                let key = KEYS[*k as usize % 4];
                let naming: Vec<usize> = (0..self.taken.len())
                    .filter(|t| self.taken[*t].assertions.iter().any(|a| names(a, key)))
                    .collect();
                let request = DeleteRequest::nodes([key]);
                (request.clone(), request, naming)
            }
            Deletion::Summary(i) => {
                let live = consolidate::summaries(&self.store).unwrap();
                if live.is_empty() {
                    return;
                }
                // Not one holding the agent's own node's note (the first), which later notes
                // link from: the reference would refuse them.
                let first = self.taken[0].seqs.0;
                let Some((seq, held)) = (0..live.len())
                    .map(|k| live[(*i as usize + k) % live.len()].seq)
                    .map(|seq| (seq, forgotten_under(&self.store, seq)))
                    .find(|(_, held)| !held.contains(&first))
                else {
                    return;
                };
                let notes: Vec<usize> = (0..self.taken.len())
                    .filter(|t| !self.taken[*t].deleted && held.contains(&self.taken[*t].seqs.0))
                    .collect();
                let reference = notes.iter().map(|t| self.taken[*t].seqs.1);
                (
                    DeleteRequest::events([seq]),
                    DeleteRequest::events(reference),
                    notes,
                )
            }
        };
        if std::env::var("LOCI_PROP_TRACE").is_ok() {
            dump_log(&self.store);
        }
        let done = match self.store.delete(&request) {
            Ok(report) => report,
            Err(e) => {
                let refused = e.to_string();
                assert!(
                    refused.contains("already deleted") || refused.contains("not found"),
                    "{history}: {deletion:?}: {refused}"
                );
                if refused.contains("not found") {
                    assert!(
                        self.reference.delete(&reference_request).is_err(),
                        "{history}: {deletion:?}: the store found nothing, the reference did"
                    );
                }
                return;
            }
        };
        if !reference_request.events.is_empty() || !reference_request.nodes.is_empty() {
            self.reference
                .delete(&reference_request)
                .unwrap_or_else(|e| {
                    panic!(
                        "{history}: {deletion:?}: the reference refused what the store took: {e}"
                    )
                });
        }
        for t in notes {
            self.taken[t].deleted = true;
        }
        if std::env::var("LOCI_PROP_TRACE").is_ok() {
            eprintln!("delete {request:?} / {reference_request:?}: {done:?}");
            dump_log(&self.store);
        }
        let report = self.store.verify().unwrap();
        assert!(report.ok(), "{history}: {:#?}", report.differences);
        self.compare(&format!("{history}: {deletion:?}: {done:?}"));
        self.no_summary_holds_a_deleted_note(&format!("{history}: {deletion:?}: {done:?}"));
    }

    /// No live summary holds a note a user's deletion took, through its children and the
    /// summaries it replaced (less what each on the way is without): a later deletion of the
    /// summary would not find the note gone with it, and a later revival of it by a deleted
    /// retraction would pass it by (helper-140: a forgotten day folded into one made again
    /// brought its children, one holding a note of a node the same deletion named).
    fn no_summary_holds_a_deleted_note(&self, history: &str) {
        let deleted: BTreeSet<u64> = (self.taken.iter())
            .filter(|t| t.deleted)
            .map(|t| t.seqs.0)
            .collect();
        let records = records_of(&self.store);
        for summary in consolidate::summaries(&self.store).unwrap() {
            let held = events_under(&records, summary.seq, &|_| false);
            let wrong: Vec<&u64> = held.intersection(&deleted).collect();
            assert!(
                wrong.is_empty(),
                "{history}: summary {} holds the deleted notes {wrong:?}",
                summary.seq
            );
        }
    }

    /// Every belief of the reference the store holds alike, with its nodes; nothing the
    /// reference lacks.
    fn compare(&self, history: &str) {
        let (store, reference) = (
            beliefs(&self.store, self.latest),
            beliefs(&self.reference, self.latest),
        );
        for (k, e) in &reference.edges {
            if e.belief {
                assert_eq!(store.edges.get(k), Some(e), "{history}: belief {k:?}");
            }
        }
        for k in reference.belief_nodes() {
            assert_eq!(
                store.nodes.get(&k),
                reference.nodes.get(&k),
                "{history}: node {k}"
            );
        }
        for k in store.nodes.keys() {
            assert!(
                reference.nodes.contains_key(k),
                "{history}: node {k} only in the store"
            );
        }
        for k in store.edges.keys() {
            assert!(
                reference.edges.contains_key(k),
                "{history}: edge {k:?} only in the store"
            );
        }
    }
}

/// Prints the store's log, deleted records marked, for a trace of a failing case.
fn dump_log(store: &Store) {
    let mut live = BTreeSet::new();
    store
        .scan_log(1, |ev| {
            live.insert(ev.seq);
            Ok(true)
        })
        .unwrap();
    store
        .scan_log_with_deleted(1, |ev| {
            let mark = if live.contains(&ev.seq) { ' ' } else { 'x' };
            let mut payload = format!("{:?}", ev.payload);
            payload.truncate(400);
            eprintln!(
                "  {mark} {} ts={} {} {payload} {:?}",
                ev.seq, ev.ts, ev.kind, ev.assertions
            );
            Ok(true)
        })
        .unwrap();
}

/// Whether assertion `a` names node `key`.
fn names(a: &Assertion, key: &str) -> bool {
    match a {
        Assertion::UpsertNode(up) => up.key == key,
        Assertion::RetractNode { key: k } => k == key,
        Assertion::UpsertEdge(up) => up.from == key || up.to == key,
        Assertion::RetractEdge { from, to, .. } => from == key || to == key,
    }
}

/// What a store believes: every edge by its keys, and every node by its key.
struct Beliefs {
    edges: BTreeMap<(String, String, String), EdgeSeen>,
    nodes: BTreeMap<String, NodeSeen>,
}

#[derive(Debug, PartialEq)]
struct EdgeSeen {
    /// An effective confidence of at least 0.5 at the latest note's time, or a pinned end.
    belief: bool,
    confidence: f32,
    valid: (Option<i64>, Option<i64>),
    props: String,
}

#[derive(Debug, PartialEq)]
struct NodeSeen {
    label: String,
    name: String,
    aliases: BTreeSet<String>,
    props: String,
    pinned: bool,
}

impl Beliefs {
    /// The nodes a belief has at an end, and the pinned ones.
    fn belief_nodes(&self) -> BTreeSet<String> {
        let ends = (self.edges.iter())
            .filter(|(_, e)| e.belief)
            .flat_map(|((from, _, to), _)| [from.clone(), to.clone()]);
        let pinned = (self.nodes.iter())
            .filter(|(_, n)| n.pinned)
            .map(|(k, _)| k.clone());
        ends.chain(pinned).collect()
    }
}

fn beliefs(store: &Store, now: i64) -> Beliefs {
    let g = store.graph();
    let key = |id| g.node_key(id).unwrap().to_string();
    let mut nodes = BTreeMap::new();
    for n in g.nodes() {
        let seen = NodeSeen {
            label: n.label,
            name: n.name,
            aliases: n.aliases.into_iter().collect(),
            props: format!("{:?}", n.props),
            pinned: n.pinned,
        };
        nodes.insert(n.key, seen);
    }
    let mut edges = BTreeMap::new();
    for (id, c) in g.edges() {
        let e = store.edge(id).unwrap().unwrap();
        let pinned = g.is_pinned(c.from) || g.is_pinned(c.to);
        let effective = g.effective_confidence(id, Some(now)).unwrap();
        let keys = (
            key(c.from),
            g.relation_name(c.relation).to_string(),
            key(c.to),
        );
        edges.insert(
            keys,
            EdgeSeen {
                belief: effective >= 0.5 || pinned,
                confidence: e.confidence,
                valid: (e.valid_from, e.valid_to),
                props: format!("{:?}", e.props),
            },
        );
    }
    Beliefs { edges, nodes }
}

/// Runs `weeks` on a fresh pair of stores.
fn run(weeks: &[Week], backend: BackendKind) {
    let mut notes = Notes::new(backend);
    let mut history = String::new();
    for (w, week) in weeks.iter().enumerate() {
        let start = w as i64 * WEEK;
        let gap = (WEEK - 20) / week.notes.len() as i64;
        for (i, note) in week.notes.iter().enumerate() {
            notes.note(start + 5 + i as i64 * gap, note);
        }
        notes.ingest(start + WEEK + 1, 0.1, Vec::new());
        notes.consolidate();
        history.push_str(&format!(" week {w}"));
        if let Some(k) = week.pin {
            notes.pin(k);
        }
        if w == 0 {
            continue;
        }
        if let Some(budget) = week.forget {
            notes.forget(budget);
            history.push_str(&format!(", forgot to {budget}"));
        }
        if let Some(late) = &week.late {
            notes.note(start - WEEK + 50, late);
            notes.consolidate();
        }
        for d in &week.deletions {
            history.push_str(&format!(", {d:?}"));
            notes.delete(d, &history);
        }
    }
    notes.compare(&history);
}

/// The seed of the suite's cases when `PROPTEST_RNG_SEED` is not set.
const SUITE_SEED: u64 = 11;

proptest! {
    #![proptest_config(ProptestConfig {
        // About half a minute in the default suite; LOCI_PROP_CASES=200 for a longer run.
        cases: std::env::var("LOCI_PROP_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(16),
        max_shrink_iters: 100,
        failure_persistence: None,
        // The suite's cases are the same at every run; `PROPTEST_RNG_SEED` picks others.
        rng_seed: match ProptestConfig::default().rng_seed {
            proptest::test_runner::RngSeed::Random => proptest::test_runner::RngSeed::Fixed(SUITE_SEED),
            chosen => chosen,
        },
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_deletion_leaves_what_the_log_without_its_events_says(
        weeks in proptest::collection::vec(week(), 2..5),
        sled in any::<bool>(),
    ) {
        let backend = if sled { BackendKind::Sled } else { BackendKind::Redb };
        run(&weeks, backend);
    }

    /// A summary the user deletes by its number takes its text, not its events: the store
    /// still believes all the reference does, though forgetting left some of it to that
    /// summary, or to one made from it, alone.
    #[test]
    fn a_deleted_summary_leaves_what_its_events_say(
        weeks in proptest::collection::vec(
            week_with(
                prop_oneof![3 => any::<u16>().prop_map(Deletion::Summary), 1 => any::<u16>().prop_map(Deletion::Event)]
                    .boxed(),
            ),
            2..5,
        ),
        sled in any::<bool>(),
    ) {
        let backend = if sled { BackendKind::Sled } else { BackendKind::Redb };
        run(&weeks, backend);
    }
}

/// The forgotten events the summary `top` alone holds: through its children and the
/// summaries it replaced, forgotten summaries on the way included (not live ones, which hold
/// theirs), less the events each is without.
fn forgotten_under(store: &Store, top: u64) -> BTreeSet<u64> {
    let live = |seq: u64| store.event(seq).unwrap().is_some();
    // A live summary below holds its events itself.
    let mut held = events_under(&records_of(store), top, &|seq| seq != top && live(seq));
    held.retain(|seq| !live(*seq));
    held
}

/// Every event (not summary) the summary `top` holds, through its children and the summaries
/// it replaced, less the events each on the way is without; not through a summary `stop` says
/// holds its events itself.
fn events_under(
    records: &BTreeMap<u64, loci::model::Event>,
    top: u64,
    stop: &dyn Fn(u64) -> bool,
) -> BTreeSet<u64> {
    let (mut stack, mut seen) = (vec![top], BTreeSet::new());
    let (mut held, mut without) = (BTreeSet::new(), BTreeSet::new());
    while let Some(seq) = stack.pop() {
        let Some(ev) = records.get(&seq).filter(|_| seen.insert(seq)) else {
            continue;
        };
        match consolidate::Summary::of_event(ev).filter(|_| ev.kind == consolidate::SUMMARY) {
            Some(_) if stop(seq) => {}
            Some(s) => {
                without.extend(s.without);
                stack.extend(s.children.into_iter().chain(s.supersedes));
            }
            None => {
                held.insert(seq);
            }
        }
    }
    held.retain(|s| !without.contains(s));
    held
}

/// Every record of the store's log, deleted ones too, by number.
fn records_of(store: &Store) -> BTreeMap<u64, loci::model::Event> {
    let mut records = BTreeMap::new();
    store
        .scan_log_with_deleted(1, |ev| {
            records.insert(ev.seq, ev);
            Ok(true)
        })
        .unwrap();
    records
}

/// A note of the given salience (an index into `SALIENCES`).
fn note_of(salience: u8, steps: Vec<Step>) -> Note {
    Note { salience, steps }
}

/// A step upserting node `key`, with the given label, name and property (indexes).
fn node_step(key: u8, label: Option<u8>, name: Option<u8>, prop: Option<u8>) -> Step {
    Step::Node {
        key,
        label,
        name,
        alias: None,
        prop,
    }
}

/// A step upserting the agent's belief `relation` in `to` (indexes), with a price.
fn belief_step(relation: u8, to: u8, price: Option<u8>) -> Step {
    Step::Edge {
        relation,
        to,
        confidence: None,
        from_time: None,
        price,
    }
}

/// A week of `notes`, forgetting down to `forget` events, then `deletions`.
fn week_of(notes: Vec<Note>, forget: Option<u8>, deletions: Vec<Deletion>) -> Week {
    Week {
        notes,
        pin: None,
        forget,
        late: None,
        deletions,
    }
}

/// This property's case from seed 11, shrunk: a person the agent's beliefs alone made (n2,
/// by two notes of `bot KNOWS n2`), both notes forgotten, and the person no longer in the
/// graph. The user's deletion of n2 was refused as not found, although the week summaries
/// made from those notes hold them; the reference, which forgets nothing, deleted the notes.
#[test]
fn a_person_only_forgotten_notes_named_is_deleted_from_the_summaries_made_from_them() {
    let note = |steps| note_of(0, steps);
    let plain = |key| node_step(key, None, None, None);
    let knows = |to| belief_step(0, to, None);
    let weeks = [
        week_of(
            vec![
                note(vec![plain(3)]),
                note(vec![knows(1), plain(0)]),
                note(vec![knows(0)]),
            ],
            None,
            vec![],
        ),
        week_of(
            vec![
                note(vec![knows(1)]),
                note(vec![knows(0)]),
                note(vec![plain(0)]),
            ],
            None,
            vec![],
        ),
        week_of(
            vec![
                note(vec![plain(0)]),
                note(vec![plain(0)]),
                note(vec![
                    node_step(2, Some(0), None, Some(0)),
                    node_step(2, None, Some(1), Some(0)),
                ]),
            ],
            Some(3),
            vec![Deletion::Node(0), Deletion::Node(1)],
        ),
    ];
    run(&weeks, BackendKind::Redb);
}

/// This property's case from seed 13 (shrunk a hundred steps): a live note (s20) made n3 and
/// the agent's belief `bot KNOWS n3`, where `bot` rested on the week-0 summary alone (its note
/// forgotten); a later note (s33) retracted n3 and made it again. Deleting a forgotten week-0
/// note made the week-0 summary again after s20, and deleting a week-1 note made the week-1
/// summary again after s33, without the belief. Deleting s33 then left the belief out: in the
/// log without s33 the note's belief falls away where it stands (no `bot` yet), and the
/// week-1 summary written after the retraction did not restate it. That summary is taken and
/// made again, as for a forgotten note whose belief a deleted retraction had ended.
#[test]
fn deleting_a_retraction_brings_back_a_live_notes_belief_whose_end_a_later_summary_holds() {
    let note = note_of;
    let plain = |key| node_step(key, None, None, None);
    let weeks = [
        week_of(
            (0..5).map(|_| note(0, vec![plain(0)])).collect(),
            None,
            vec![],
        ),
        week_of(
            vec![
                note(0, vec![plain(0)]),
                note(0, vec![belief_step(0, 2, None), Step::RetractNode(0)]),
                note(0, vec![plain(0)]),
            ],
            Some(2),
            vec![Deletion::Event(7193)],
        ),
        week_of(
            vec![
                note(0, vec![Step::RetractNode(2), belief_step(2, 2, None)]),
                note(
                    3,
                    vec![Step::RetractNode(1), node_step(2, Some(0), Some(2), None)],
                ),
                note(0, vec![node_step(1, Some(0), None, None)]),
                note(
                    0,
                    vec![
                        belief_step(1, 0, Some(0)),
                        node_step(3, Some(0), None, Some(3)),
                        belief_step(0, 3, None),
                    ],
                ),
                note(0, vec![node_step(0, None, Some(0), None)]),
                note(
                    2,
                    vec![node_step(0, None, None, Some(0)), Step::RetractEdge(6)],
                ),
            ],
            None,
            vec![Deletion::Event(35159), Deletion::Event(6323)],
        ),
    ];
    run(&weeks, BackendKind::Redb);
}

/// This property's case from `PROPTEST_RNG_SEED=13` with 60 cases of the summary deletions
/// (session 42): `bot` rested on the week-0 summary alone (its note forgotten), and live notes
/// of week 1 (s25, s26: kept, after a retraction of n4) believed `bot HOME n4`. Deleting a
/// forgotten week-0 note made the week-0 summary again at the end of the log: replayed before
/// it, the notes' edges fell away, and the edge stood on the week-1 summary alone, so
/// deleting that summary by its number took the belief the notes still give.
#[test]
fn a_live_notes_belief_keeps_its_support_when_the_summary_that_made_its_end_is_made_again() {
    let note = note_of;
    let plain = |key| node_step(key, None, None, None);
    let edge = |relation, to, confidence, from_time| Step::Edge {
        relation,
        to,
        confidence: Some(confidence),
        from_time,
        price: None,
    };
    let weeks = [
        week_of(
            [0, 2, 0, 0, 0, 0].map(|k| note(0, vec![plain(k)])).to_vec(),
            None,
            vec![],
        ),
        week_of(
            vec![
                note(0, vec![edge(0, 3, 4, None)]),
                note(
                    1,
                    vec![node_step(3, Some(2), Some(0), None), edge(0, 0, 1, None)],
                ),
                note(3, vec![Step::RetractNode(3)]),
                note(3, vec![edge(2, 3, 0, None)]),
                note(
                    3,
                    vec![
                        edge(1, 3, 4, Some(1111)),
                        edge(0, 3, 3, None),
                        Step::RetractNode(0),
                    ],
                ),
            ],
            Some(3),
            vec![Deletion::Event(46139), Deletion::Summary(40839)],
        ),
    ];
    run(&weeks, BackendKind::Redb);
}

/// The known gap of sessions 38 to 42 (seeds 15, 20 and 22 with 120 cases), made by hand:
/// a forgotten note of week 0 believed `bot HOME n1`, a week-1 note retracted it, and
/// forgetting took the note and then, with nothing else of its period left, the summaries over
/// it (the belief, retracted, rested on nothing). Deleting the retraction brings the belief back
/// in the log without it; the store had no summary left to restate it from, and lost it. Now
/// the lowest of those forgotten summaries that holds the note is made again, with the belief.
#[test]
fn a_belief_a_deleted_retraction_had_ended_comes_back_when_forgetting_took_its_period() {
    let note = note_of;
    let plain = |key| node_step(key, None, None, None);
    let weeks = [
        week_of(
            vec![
                note(0, vec![node_step(0, Some(0), Some(0), None)]),
                note(0, vec![belief_step(1, 0, None)]),
            ],
            None,
            vec![],
        ),
        week_of(
            vec![
                note(3, vec![Step::RetractEdge(0)]),
                note(3, vec![plain(0), belief_step(0, 0, None)]),
            ],
            Some(2),
            vec![],
        ),
        week_of(
            vec![note(3, vec![plain(0)])],
            Some(2),
            vec![Deletion::Event(3)],
        ),
    ];
    for backend in [BackendKind::Redb, BackendKind::Sled] {
        run(&weeks, backend);
    }
}
/// `PROPTEST_RNG_SEED=25` with 120 cases (session 43, older than it), shrunk a hundred steps:
/// a forgotten note (ts 1857) believed `bot HOME n4` after a note had retracted `n4` (ts 705)
/// and a later one the user then deleted had made it again (ts 1157). Replay without that one
/// skipped the belief for want of `n4`. Deleting the retraction brings it back in the log
/// without both, but it had not ended the belief (it came before it), so no summary over the
/// forgotten note was taken or made again to restate it.
#[test]
fn a_forgotten_notes_belief_at_a_node_a_deleted_retraction_had_taken_before_it_comes_back() {
    let note = note_of;
    let plain = |key| node_step(key, None, None, None);
    // A belief with a confidence, a start and a price (indexes), as the generator makes one.
    let edge = |relation, to, confidence, from_time, price| Step::Edge {
        relation,
        to,
        confidence,
        from_time,
        price,
    };
    let weeks = [
        week_of(
            [0, 3, 0, 0, 0].map(|k| note(0, vec![plain(k)])).to_vec(),
            None,
            vec![],
        ),
        week_of(
            vec![
                note(
                    1,
                    vec![
                        Step::RetractEdge(6),
                        Step::RetractNode(1),
                        Step::RetractNode(3),
                    ],
                ),
                note(0, vec![node_step(1, Some(1), Some(1), Some(0))]),
                note(2, vec![belief_step(1, 1, None)]),
                note(
                    1,
                    vec![
                        node_step(2, None, Some(0), Some(0)),
                        node_step(0, Some(2), None, Some(3)),
                    ],
                ),
                note(
                    3,
                    vec![
                        edge(1, 1, Some(1), Some(872), None),
                        edge(2, 3, Some(0), Some(918), None),
                    ],
                ),
                note(
                    0,
                    vec![edge(2, 3, Some(2), None, None), Step::RetractEdge(10)],
                ),
            ],
            Some(6),
            vec![],
        ),
        Week {
            pin: Some(1),
            late: Some(note(2, vec![node_step(1, Some(1), None, None)])),
            ..week_of(
                vec![
                    note(
                        3,
                        vec![node_step(1, None, Some(1), None), Step::RetractEdge(4)],
                    ),
                    note(
                        1,
                        vec![
                            node_step(2, None, Some(0), None),
                            edge(0, 0, Some(4), None, None),
                            edge(0, 1, Some(2), None, Some(0)),
                        ],
                    ),
                    note(1, vec![belief_step(1, 3, Some(1))]),
                ],
                Some(2),
                vec![Deletion::Event(58498), Deletion::Event(61992)],
            )
        },
        week_of(
            vec![
                note(
                    3,
                    vec![
                        node_step(3, None, None, Some(1)),
                        edge(2, 1, Some(3), None, None),
                        Step::Node {
                            key: 2,
                            label: None,
                            name: Some(1),
                            alias: Some(1),
                            prop: None,
                        },
                    ],
                ),
                note(
                    0,
                    vec![
                        edge(2, 2, Some(2), None, None),
                        node_step(3, Some(1), None, None),
                    ],
                ),
                note(
                    2,
                    vec![
                        node_step(3, None, Some(0), Some(3)),
                        Step::Node {
                            key: 0,
                            label: Some(1),
                            name: Some(0),
                            alias: Some(0),
                            prop: Some(2),
                        },
                    ],
                ),
            ],
            Some(6),
            vec![Deletion::Event(11166), Deletion::Event(44800)],
        ),
    ];
    run(&weeks, BackendKind::Sled);
}

/// Seed 27 at 120 cases: `n3`, made again in week 2 by one note that the user then deleted,
/// lived on only in a forgotten summary restating that note; deleting the node took
/// the day summary made again without the note, where a store that never forgot finds no
/// `n3` (`deleting::Chain`).
#[test]
fn a_node_only_a_deleted_note_named_is_not_found_though_a_forgotten_summary_restated_it() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 0,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 2,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 2,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![Deletion::Node(2)],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 1,
                        label: Some(0),
                        name: Some(0),
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![
                        Step::Node {
                            key: 0,
                            label: Some(0),
                            name: Some(1),
                            alias: Some(1),
                            prop: Some(2),
                        },
                        Step::Node {
                            key: 3,
                            label: Some(0),
                            name: Some(2),
                            alias: None,
                            prop: Some(0),
                        },
                        Step::Edge {
                            relation: 0,
                            to: 3,
                            confidence: None,
                            from_time: None,
                            price: Some(0),
                        },
                    ],
                },
                Note {
                    salience: 3,
                    steps: vec![
                        Step::RetractNode(0),
                        Step::Edge {
                            relation: 1,
                            to: 2,
                            confidence: Some(3),
                            from_time: Some(168),
                            price: Some(1),
                        },
                        Step::Edge {
                            relation: 1,
                            to: 2,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                    ],
                },
            ],
            pin: None,
            forget: Some(4),
            late: None,
            deletions: vec![Deletion::Event(42638), Deletion::Node(2)],
        },
    ];
    run(&weeks, BackendKind::Sled);
}

/// This property's case, shrunk, once forgetting ran twice a week (session 57): the first run
/// took both weeks' notes and days, the second week 0's summary, since week 1's restated its
/// belief `bot OFFERS n2` (week 0's note and week 1's both asserted it). The user deleted
/// week 1's summary, and with it the forgotten notes only it held; the belief went too,
/// though week 0's forgotten note, whose record the log keeps, still gives it: nothing made a
/// summary again for week 0, whose own summary forgetting had taken.
#[test]
fn a_belief_only_a_forgotten_weeks_records_hold_outlives_the_deletion_of_another_summary() {
    let week0 = vec![
        note_of(0, vec![node_step(0, None, None, None)]),
        note_of(0, vec![node_step(0, None, None, None)]),
        note_of(0, vec![belief_step(2, 1, None)]),
    ];
    let week1 = vec![
        note_of(0, vec![belief_step(2, 1, None)]),
        note_of(0, vec![node_step(0, None, None, None)]),
        note_of(
            0,
            vec![Step::Edge {
                relation: 0,
                to: 0,
                confidence: None,
                from_time: Some(66),
                price: Some(2),
            }],
        ),
    ];
    let weeks = [
        week_of(week0, None, Vec::new()),
        week_of(week1, Some(3), vec![Deletion::Summary(57910)]),
    ];
    run(&weeks, BackendKind::Redb);
}

/// This property's case at `PROPTEST_RNG_SEED=23` (120 cases), shrunk as far as 100 steps
/// went: `bot OFFERS n2` was given `price 1` by a week 1 note, which forgetting took with the
/// summaries over it once week 2's summary restated the edge with its price (a week 2 note
/// asserted it again, without one). The user deleted week 2's summary: the week 2 note held
/// the edge up, without its price, though the forgotten note, whose record the log keeps,
/// still gives it.
#[test]
fn a_value_only_a_forgotten_note_gives_outlives_the_deletion_of_the_last_summary_restating_it() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 3,
                    steps: vec![
                        Step::Node {
                            key: 1,
                            label: None,
                            name: None,
                            alias: None,
                            prop: None,
                        },
                        Step::Node {
                            key: 3,
                            label: None,
                            name: None,
                            alias: None,
                            prop: None,
                        },
                    ],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 1,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 2,
                        to: 1,
                        confidence: None,
                        from_time: None,
                        price: Some(0),
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![
                        Step::Edge {
                            relation: 0,
                            to: 2,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                        Step::Node {
                            key: 2,
                            label: None,
                            name: Some(0),
                            alias: None,
                            prop: Some(2),
                        },
                        Step::Node {
                            key: 0,
                            label: None,
                            name: None,
                            alias: None,
                            prop: Some(2),
                        },
                    ],
                },
            ],
            pin: None,
            forget: Some(8),
            late: None,
            deletions: vec![Deletion::Summary(31612), Deletion::Summary(7628)],
        },
        Week {
            notes: vec![
                Note {
                    salience: 2,
                    steps: vec![
                        Step::RetractEdge(10),
                        Step::Node {
                            key: 3,
                            label: Some(2),
                            name: None,
                            alias: None,
                            prop: Some(3),
                        },
                        Step::Node {
                            key: 0,
                            label: None,
                            name: Some(2),
                            alias: None,
                            prop: Some(0),
                        },
                    ],
                },
                Note {
                    salience: 0,
                    steps: vec![
                        Step::Edge {
                            relation: 1,
                            to: 0,
                            confidence: Some(1),
                            from_time: None,
                            price: Some(0),
                        },
                        Step::Edge {
                            relation: 0,
                            to: 1,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                    ],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Edge {
                        relation: 1,
                        to: 1,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![
                        Step::Edge {
                            relation: 2,
                            to: 1,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                        Step::RetractEdge(5),
                    ],
                },
            ],
            pin: None,
            forget: Some(8),
            late: None,
            deletions: vec![Deletion::Summary(13818), Deletion::Summary(13865)],
        },
    ];
    run(&weeks, BackendKind::Redb);
}

/// This property's case at `PROPTEST_RNG_SEED=23` (120 cases) once the one above passed,
/// shrunk as far as 100 steps went: a live week 2 note asserted `bot HOME n1` where only a
/// forgotten note had made `n1` still (the notes that made it before were deleted), so the
/// store's replay skipped it and week 2's summary alone restated the belief. The user
/// deleted that summary, and the belief went: no forgotten note gave it, and a live one did.
#[test]
fn a_belief_a_live_note_gives_at_an_end_only_a_forgotten_note_made_outlives_its_last_summary() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 3,
                    steps: vec![
                        Step::Edge {
                            relation: 0,
                            to: 1,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                        Step::Edge {
                            relation: 0,
                            to: 1,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                    ],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Edge {
                        relation: 1,
                        to: 2,
                        confidence: Some(1),
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 3,
                    steps: vec![
                        Step::Edge {
                            relation: 0,
                            to: 2,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                        Step::Node {
                            key: 2,
                            label: None,
                            name: Some(0),
                            alias: None,
                            prop: Some(2),
                        },
                        Step::Node {
                            key: 0,
                            label: None,
                            name: None,
                            alias: None,
                            prop: Some(2),
                        },
                    ],
                },
            ],
            pin: None,
            forget: Some(8),
            late: None,
            deletions: vec![Deletion::Summary(31612), Deletion::Summary(7628)],
        },
        Week {
            notes: vec![
                Note {
                    salience: 2,
                    steps: vec![
                        Step::RetractEdge(10),
                        Step::Node {
                            key: 3,
                            label: Some(2),
                            name: None,
                            alias: None,
                            prop: Some(3),
                        },
                        Step::Node {
                            key: 0,
                            label: None,
                            name: Some(2),
                            alias: None,
                            prop: Some(0),
                        },
                    ],
                },
                Note {
                    salience: 0,
                    steps: vec![
                        Step::Edge {
                            relation: 1,
                            to: 0,
                            confidence: Some(1),
                            from_time: None,
                            price: Some(0),
                        },
                        Step::Edge {
                            relation: 0,
                            to: 1,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                    ],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Edge {
                        relation: 1,
                        to: 1,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![
                        Step::Edge {
                            relation: 2,
                            to: 1,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                        Step::RetractEdge(5),
                    ],
                },
            ],
            pin: None,
            forget: Some(8),
            late: None,
            deletions: vec![Deletion::Summary(13818), Deletion::Summary(13865)],
        },
    ];
    run(&weeks, BackendKind::Redb);
}

/// This property's case at `PROPTEST_RNG_SEED=41` (120 cases), shrunk: `n1`, pinned, named
/// only by week 0's notes; one forgetting of two rounds took them and week 0's summary, since
/// week 1's restated the node. The user deleted week 1's summary, and the pinned node went,
/// though the forgotten notes, whose records the log keeps, still give it.
#[test]
fn a_pinned_node_only_a_forgotten_weeks_notes_give_outlives_the_deletion_of_its_last_summary() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 1,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: Some(0),
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 0,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 2,
                        label: None,
                        name: Some(1),
                        alias: None,
                        prop: Some(3),
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::RetractEdge(11)],
                },
            ],
            pin: None,
            forget: Some(2),
            late: None,
            deletions: vec![Deletion::Summary(43922), Deletion::Summary(65385)],
        },
    ];
    run(&weeks, BackendKind::Sled);
}

/// This property's case at `PROPTEST_RNG_SEED=23` (120 cases), shrunk as far as 100 steps
/// went (older than session 58): a late note came into week 1 after forgetting had taken its
/// notes, one of which gave `bot KNOWS n2`; day 7 was summarised again, and a first deletion
/// made week 1 again over the forgotten notes and the late one. The user then named the day:
/// it and the week made only from it were left to consolidation, and the week above them,
/// the last to restate the forgotten note's belief, was not made again, so the belief went.
#[test]
fn a_week_holding_forgotten_notes_above_a_named_day_is_made_again_for_them() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 0,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 1,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 2,
                        to: 0,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: Some(5),
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 1,
                    steps: vec![Step::Node {
                        key: 1,
                        label: Some(1),
                        name: Some(0),
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 3,
                    steps: vec![
                        Step::RetractEdge(0),
                        Step::Node {
                            key: 0,
                            label: None,
                            name: None,
                            alias: None,
                            prop: None,
                        },
                        Step::RetractEdge(1),
                    ],
                },
                Note {
                    salience: 1,
                    steps: vec![
                        Step::Edge {
                            relation: 2,
                            to: 1,
                            confidence: Some(1),
                            from_time: None,
                            price: None,
                        },
                        Step::Node {
                            key: 3,
                            label: Some(1),
                            name: None,
                            alias: None,
                            prop: Some(0),
                        },
                        Step::Node {
                            key: 2,
                            label: Some(1),
                            name: Some(1),
                            alias: None,
                            prop: None,
                        },
                    ],
                },
                Note {
                    salience: 0,
                    steps: vec![
                        Step::Edge {
                            relation: 1,
                            to: 3,
                            confidence: Some(4),
                            from_time: Some(1067),
                            price: None,
                        },
                        Step::Edge {
                            relation: 2,
                            to: 2,
                            confidence: Some(1),
                            from_time: None,
                            price: None,
                        },
                        Step::Node {
                            key: 0,
                            label: Some(1),
                            name: Some(0),
                            alias: None,
                            prop: Some(3),
                        },
                    ],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 3,
                        confidence: Some(1),
                        from_time: None,
                        price: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: Some(Note {
                salience: 3,
                steps: vec![Step::Node {
                    key: 2,
                    label: None,
                    name: None,
                    alias: None,
                    prop: Some(2),
                }],
            }),
            deletions: vec![Deletion::Summary(26430), Deletion::Summary(41580)],
        },
    ];
    run(&weeks, BackendKind::Redb);
}

/// This property's case at `PROPTEST_RNG_SEED=23` (120 cases) once the others passed, shrunk
/// as far as 100 steps went: pinned `n1` kept a live bare upsert, but its label and name only
/// forgotten notes gave, which the week summary the user deleted was the last to restate. The
/// node stayed as `Entity`/`n1`, where the log without the deleted events says
/// `Person`/`BobXn1`.
#[test]
fn a_pinned_nodes_values_only_forgotten_notes_give_outlive_the_deletion_of_its_last_summary() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 1,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 0,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 1,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![
                        Step::RetractEdge(0),
                        Step::Node {
                            key: 0,
                            label: None,
                            name: None,
                            alias: None,
                            prop: None,
                        },
                    ],
                },
            ],
            pin: Some(0),
            forget: Some(2),
            late: None,
            deletions: vec![Deletion::Summary(101)],
        },
    ];
    run(&weeks, BackendKind::Redb);
}
/// This property's case at `PROPTEST_RNG_SEED=1` (120 cases): forgetting took the one note
/// giving `n3` an alias while no belief held it, and a late note then linked it by a belief.
/// The store's `n3` was the week summary's, without the alias, before any deletion: the
/// detail faded as forgetting may let it, and the agent names the node again as it would a
/// faded one. The deletions after it keep the node as the note gave it.
#[test]
fn a_node_forgetting_left_without_a_later_alias_is_named_again_by_the_note_making_it_a_belief() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 2,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 0,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 1,
                        label: Some(0),
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: Some(5),
            late: Some(Note {
                salience: 2,
                steps: vec![Step::RetractNode(1), Step::RetractEdge(4)],
            }),
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![
                        Step::Node {
                            key: 2,
                            label: None,
                            name: None,
                            alias: Some(0),
                            prop: None,
                        },
                        Step::Node {
                            key: 1,
                            label: Some(1),
                            name: None,
                            alias: None,
                            prop: None,
                        },
                    ],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Node {
                        key: 1,
                        label: None,
                        name: Some(1),
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: Some(3),
            forget: None,
            late: Some(Note {
                salience: 1,
                steps: vec![
                    Step::Edge {
                        relation: 1,
                        to: 3,
                        confidence: Some(0),
                        from_time: None,
                        price: None,
                    },
                    Step::RetractEdge(10),
                ],
            }),
            deletions: vec![Deletion::Summary(44652), Deletion::Summary(54368)],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 3,
                        confidence: Some(4),
                        from_time: None,
                        price: Some(0),
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Node {
                        key: 0,
                        label: Some(2),
                        name: Some(0),
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 1,
                    steps: vec![Step::RetractEdge(6)],
                },
                Note {
                    salience: 3,
                    steps: vec![
                        Step::Node {
                            key: 1,
                            label: Some(1),
                            name: Some(0),
                            alias: Some(2),
                            prop: None,
                        },
                        Step::RetractEdge(3),
                        Step::RetractNode(0),
                    ],
                },
            ],
            pin: None,
            forget: Some(7),
            late: Some(Note {
                salience: 0,
                steps: vec![
                    Step::Node {
                        key: 3,
                        label: Some(2),
                        name: Some(2),
                        alias: None,
                        prop: None,
                    },
                    Step::Edge {
                        relation: 0,
                        to: 2,
                        confidence: Some(1),
                        from_time: None,
                        price: None,
                    },
                ],
            }),
            deletions: vec![Deletion::Summary(12343), Deletion::Summary(34187)],
        },
    ];
    run(&weeks, BackendKind::Redb);
}

/// This property's case at `PROPTEST_RNG_SEED=2` (120 cases; shrinking stopped at 100
/// steps): the user deleted the summary holding the note that made pinned `n4` as `AnnXn4`.
/// Left, a forgotten note that gave `n4` only the alias `A3` (its name, without the first),
/// and a live note that gave the alias again. The summary made again restated `n4` named
/// `A3`, after the live note in the log: replay made the node from the live note, named by its
/// key, added the alias, then took the name and kept the alias (`A3` with the alias `A3`),
/// where the log in time order has none. A name given that is an alias now takes it out
/// (rules 8).
#[test]
fn a_node_a_summary_made_again_names_by_an_alias_a_live_note_gave_before_it_keeps_no_such_alias() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 3,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 3,
                        label: None,
                        name: None,
                        alias: Some(2),
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![
                        Step::Edge {
                            relation: 2,
                            to: 3,
                            confidence: Some(2),
                            from_time: None,
                            price: None,
                        },
                        Step::Node {
                            key: 3,
                            label: None,
                            name: None,
                            alias: None,
                            prop: Some(0),
                        },
                        Step::Node {
                            key: 3,
                            label: Some(1),
                            name: None,
                            alias: Some(2),
                            prop: Some(3),
                        },
                    ],
                },
            ],
            pin: Some(3),
            forget: None,
            late: None,
            deletions: vec![Deletion::Event(29020), Deletion::Summary(2927)],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: Some(0),
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![
                        Step::Edge {
                            relation: 0,
                            to: 2,
                            confidence: Some(1),
                            from_time: None,
                            price: None,
                        },
                        Step::Node {
                            key: 0,
                            label: None,
                            name: Some(1),
                            alias: None,
                            prop: None,
                        },
                    ],
                },
                Note {
                    salience: 3,
                    steps: vec![
                        Step::RetractEdge(1),
                        Step::Edge {
                            relation: 2,
                            to: 1,
                            confidence: Some(0),
                            from_time: None,
                            price: None,
                        },
                    ],
                },
                Note {
                    salience: 3,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 2,
                        confidence: Some(2),
                        from_time: None,
                        price: None,
                    }],
                },
            ],
            pin: None,
            forget: Some(3),
            late: Some(Note {
                salience: 3,
                steps: vec![
                    Step::Edge {
                        relation: 2,
                        to: 2,
                        confidence: None,
                        from_time: Some(1167),
                        price: None,
                    },
                    Step::Edge {
                        relation: 2,
                        to: 2,
                        confidence: None,
                        from_time: None,
                        price: None,
                    },
                    Step::Node {
                        key: 0,
                        label: Some(1),
                        name: Some(1),
                        alias: None,
                        prop: None,
                    },
                ],
            }),
            deletions: vec![Deletion::Summary(51547), Deletion::Summary(14452)],
        },
    ];
    run(&weeks, BackendKind::Sled);
}

/// This property's case at `PROPTEST_RNG_SEED=1` (120 cases) on 225b6b0: a note gave `n3`
/// the alias `A1`; forgetting took the note and its day's summary. The alias
/// lived on only in summaries that restated `n3` from the graph without holding the note: the
/// week before it (43, written after the note) and the day and week made when a late note
/// came into the note's day (69, 70; that note, `bot -KNOWS-> n3`, made `n3` a belief's end).
/// The user deleted 43, then 69: 69 and 70 were made again from the late note alone, as the
/// events left give `n3`, without the alias, though the forgotten note (no user's deletion,
/// and held by no summary the deletions took) still gives it. A summary made again now
/// restates a belief's node as the raw log left gives it where the events left lose a value
/// (`Store::values_kept`).
#[test]
fn a_value_only_summaries_restating_the_graph_carried_outlives_the_deletion_of_the_last() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 2,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 2,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: Some(5),
            late: Some(Note {
                salience: 2,
                steps: vec![Step::RetractNode(1), Step::RetractEdge(4)],
            }),
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![
                        Step::Node {
                            key: 2,
                            label: None,
                            name: None,
                            alias: Some(0),
                            prop: None,
                        },
                        Step::Node {
                            key: 1,
                            label: Some(1),
                            name: None,
                            alias: None,
                            prop: None,
                        },
                    ],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Node {
                        key: 1,
                        label: None,
                        name: Some(1),
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: Some(3),
            forget: None,
            late: Some(Note {
                salience: 1,
                steps: vec![
                    Step::Edge {
                        relation: 1,
                        to: 3,
                        confidence: Some(0),
                        from_time: None,
                        price: None,
                    },
                    Step::RetractEdge(10),
                ],
            }),
            deletions: vec![Deletion::Summary(44652), Deletion::Summary(54368)],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 3,
                        confidence: Some(4),
                        from_time: None,
                        price: Some(0),
                    }],
                },
                Note {
                    salience: 2,
                    steps: vec![Step::Node {
                        key: 0,
                        label: Some(2),
                        name: Some(0),
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 1,
                    steps: vec![Step::RetractEdge(6)],
                },
                Note {
                    salience: 3,
                    steps: vec![
                        Step::Node {
                            key: 1,
                            label: Some(1),
                            name: Some(0),
                            alias: Some(2),
                            prop: None,
                        },
                        Step::RetractEdge(3),
                        Step::RetractNode(0),
                    ],
                },
            ],
            pin: None,
            forget: Some(7),
            late: Some(Note {
                salience: 0,
                steps: vec![
                    Step::Node {
                        key: 3,
                        label: Some(2),
                        name: Some(2),
                        alias: None,
                        prop: None,
                    },
                    Step::Edge {
                        relation: 0,
                        to: 2,
                        confidence: Some(1),
                        from_time: None,
                        price: None,
                    },
                ],
            }),
            deletions: vec![Deletion::Summary(12343), Deletion::Summary(34187)],
        },
    ];
    run(&weeks, BackendKind::Redb);
}

/// This property's case at `PROPTEST_RNG_SEED=10` (120 cases; its third week, after the
/// failure, left out: the whole case passes, as the seed's run does), older than session 59:
/// a note made `n4` and `bot -KNOWS-> n4`; a live note retracted the edge; forgetting to 2
/// events took the first note and every summary over it. A late note then made a day and a week of that range again. The user deleted the
/// retraction: the late note's day and week, written after it, were made again from the late
/// note alone, and the forgotten day holding the first note was not made again, as its range
/// was theirs, so the belief did not come back, where the log without the retraction holds it
/// (confidence 1.0). The day made again now holds the forgotten day's children too.
#[test]
fn deleting_a_retraction_after_forgetting_to_two_events_brings_back_the_belief_it_ended() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 0,
                        to: 3,
                        confidence: None,
                        from_time: None,
                        price: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::RetractNode(0)],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::RetractEdge(0)],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: Some(2),
            late: Some(Note {
                salience: 0,
                steps: vec![Step::Node {
                    key: 0,
                    label: None,
                    name: None,
                    alias: None,
                    prop: None,
                }],
            }),
            deletions: vec![Deletion::Event(57611)],
        },
    ];
    run(&weeks, BackendKind::Sled);
}

/// The second property's case at `PROPTEST_RNG_SEED=10` (120 cases), the test's own: forgetting
/// took the note naming `n4` (no belief held it), and the user's deletion of the last summary
/// restating it left `Entity`/`n4`, as forgetting allows for a node no belief holds. A week later
/// the agent pinned it, and the reference, which never forgot, had `Person`/`AnnXn4`. A pin of a
/// node whose values faded now names it again first, as a note naming it does
/// (`with_faded_named_again`).
#[test]
fn a_node_whose_values_faded_is_named_again_before_a_pin_makes_it_a_belief() {
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 3,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::RetractNode(0)],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 3,
                        label: None,
                        name: None,
                        alias: None,
                        prop: Some(3),
                    }],
                },
            ],
            pin: None,
            forget: Some(2),
            late: Some(Note {
                salience: 0,
                steps: vec![Step::Edge {
                    relation: 0,
                    to: 0,
                    confidence: None,
                    from_time: Some(0),
                    price: None,
                }],
            }),
            deletions: vec![Deletion::Summary(44793), Deletion::Summary(565)],
        },
        Week {
            notes: vec![
                Note {
                    salience: 1,
                    steps: vec![
                        Step::Edge {
                            relation: 1,
                            to: 2,
                            confidence: Some(0),
                            from_time: None,
                            price: None,
                        },
                        Step::RetractEdge(4),
                        Step::RetractEdge(9),
                    ],
                },
                Note {
                    salience: 2,
                    steps: vec![
                        Step::Edge {
                            relation: 1,
                            to: 1,
                            confidence: Some(1),
                            from_time: None,
                            price: None,
                        },
                        Step::Node {
                            key: 1,
                            label: None,
                            name: Some(2),
                            alias: Some(2),
                            prop: Some(1),
                        },
                    ],
                },
                Note {
                    salience: 0,
                    steps: vec![
                        Step::RetractEdge(5),
                        Step::Node {
                            key: 0,
                            label: None,
                            name: None,
                            alias: Some(2),
                            prop: None,
                        },
                    ],
                },
            ],
            pin: Some(3),
            forget: Some(2),
            late: Some(Note {
                salience: 0,
                steps: vec![
                    Step::Node {
                        key: 0,
                        label: None,
                        name: Some(2),
                        alias: None,
                        prop: None,
                    },
                    Step::Node {
                        key: 2,
                        label: Some(2),
                        name: None,
                        alias: Some(2),
                        prop: Some(2),
                    },
                ],
            }),
            deletions: vec![],
        },
    ];
    run(&weeks, BackendKind::Redb);
}

/// helper-140's review of the fold of a forgotten summary into one made again: a deletion of a
/// retraction and of a node at once, the node named by a forgotten note of the day whose
/// forgotten summary is folded into the late note's day made again. That day took the
/// forgotten day's children, the episode holding the node's note among them, without saying
/// it is without the note: it held an event a user deleted (a later deletion of it would not
/// find the note gone with it, and a later revival would pass it by).
#[test]
fn a_summary_folded_into_one_made_again_is_without_what_the_same_deletion_takes() {
    for backend in [BackendKind::Redb, BackendKind::Sled] {
        let mut notes = a_belief_retracted_a_week_later(backend);
        notes.forget(2);
        notes.note(50, &note_of(0, vec![node_step(0, None, None, None)]));
        notes.consolidate();
        let retraction = (notes.taken.iter())
            .position(|t| (t.assertions.iter()).any(|a| matches!(a, Assertion::RetractEdge { .. })))
            .unwrap();
        let naming: Vec<usize> = (0..notes.taken.len())
            .filter(|t| notes.taken[*t].assertions.iter().any(|a| names(a, "n2")))
            .collect();
        let (s, r) = notes.taken[retraction].seqs;
        let request = |seq| {
            let mut request = DeleteRequest::events([seq]);
            request.nodes.push("n2".into());
            request
        };
        let done = notes.store.delete(&request(s)).unwrap();
        notes.reference.delete(&request(r)).unwrap();
        for t in naming.into_iter().chain([retraction]) {
            notes.taken[t].deleted = true;
        }
        assert!(notes.store.verify().unwrap().ok());
        let history = format!("{backend:?}: {done:?}");
        notes.compare(&history);
        notes.no_summary_holds_a_deleted_note(&history);
        let belief = ("bot".to_string(), "KNOWS".to_string(), "n4".to_string());
        assert!(
            beliefs(&notes.store, notes.latest).edges[&belief].belief,
            "{history}"
        );
    }
}

/// helper-140's review of the fold: a forgotten day folded into one made again had replaced
/// another (a late note came into the day after forgetting had thinned it), and the events
/// only that other one held were counted by the one made again ("note at 5" in its digest)
/// but not reached through its children, which is how a later deletion of the note finds the
/// summaries made from it (here another path still found it, and the note's deletion below
/// matches the reference either way).
#[test]
fn a_summary_folded_into_one_made_again_holds_what_the_summaries_it_replaced_held() {
    for backend in [BackendKind::Redb, BackendKind::Sled] {
        let mut notes = a_belief_retracted_a_week_later(backend);
        let trace = std::env::var("LOCI_PROP_TRACE").is_ok();
        // Thinned: raw notes go, summaries stay; a late note then replaces the first day.
        notes.forget(14);
        notes.note(50, &note_of(0, vec![node_step(0, None, None, None)]));
        notes.consolidate();
        if trace {
            dump_log(&notes.store);
        }
        // All of it goes; another late note makes the day again.
        notes.forget(2);
        notes.note(60, &note_of(0, vec![node_step(0, None, None, None)]));
        notes.consolidate();
        if trace {
            dump_log(&notes.store);
        }
        let at = |pred: &dyn Fn(&Assertion) -> bool| {
            (notes.taken.iter())
                .position(|t| t.assertions.iter().any(pred))
                .unwrap()
        };
        let retraction = at(&|a| matches!(a, Assertion::RetractEdge { .. }));
        let belief = at(&|a| matches!(a, Assertion::UpsertEdge(up) if up.to == "n4"));
        for t in [retraction, belief] {
            let (s, r) = notes.taken[t].seqs;
            let done = notes.store.delete(&DeleteRequest::events([s])).unwrap();
            notes.reference.delete(&DeleteRequest::events([r])).unwrap();
            notes.taken[t].deleted = true;
            if trace {
                eprintln!("{done:?}");
                dump_log(&notes.store);
            }
            assert!(notes.store.verify().unwrap().ok());
            let history = format!("{backend:?}: {done:?}");
            notes.compare(&history);
            notes.no_summary_holds_a_deleted_note(&history);
            if t == retraction {
                // The belief's note, which the day made again counts, it reaches.
                let records = records_of(&notes.store);
                let note = notes.taken[belief].seqs.0;
                let holding = consolidate::summaries(&notes.store)
                    .unwrap()
                    .into_iter()
                    .find(|s| s.level == consolidate::Level::Day && s.start <= 5 && 5 <= s.end);
                let holding = holding.expect("a live day over the belief's note");
                assert!(
                    events_under(&records, holding.seq, &|_| false).contains(&note),
                    "{history}: day {} does not reach note {note}",
                    holding.seq
                );
            }
        }
    }
}

/// Two weeks, each consolidated: eight notes in the first, the first two in its first day
/// (the agent's belief `bot -KNOWS-> n4`, then `n2` made), and the belief's retraction first
/// in the second.
fn a_belief_retracted_a_week_later(backend: BackendKind) -> Notes {
    let mut notes = Notes::new(backend);
    let mut week0 = vec![
        note_of(0, vec![belief_step(0, 3, None)]),
        note_of(0, vec![node_step(1, None, None, None)]),
    ];
    week0.extend((0..6).map(|_| note_of(0, vec![node_step(0, None, None, None)])));
    let week1 = vec![
        note_of(0, vec![Step::RetractEdge(0)]),
        note_of(0, vec![node_step(0, None, None, None)]),
        note_of(0, vec![node_step(0, None, None, None)]),
    ];
    for (w, week) in [week0, week1].iter().enumerate() {
        let start = w as i64 * WEEK;
        let gap = (WEEK - 20) / week.len() as i64;
        for (i, note) in week.iter().enumerate() {
            notes.note(start + 5 + i as i64 * gap, note);
        }
        notes.ingest(start + WEEK + 1, 0.1, Vec::new());
        notes.consolidate();
    }
    notes
}

/// The second property's case at `PROPTEST_RNG_SEED=16` (120 cases), older than session 60:
/// a user deleted the summaries of a live note (`bot -HOME-> n2` at 0.3), the next
/// consolidation summarised it again, forgetting took it and those, and a week's summary over
/// a later note re-asserting the belief without a confidence was all that restated 0.3. The
/// deletion of that week took the note's gist as the first deletion's (the summaries it took
/// had held it), and the week made again said 1.0 ([`gist_taken`] in `remaking.rs`).
#[test]
fn a_summarys_deletion_after_forgetting_to_three_leaves_a_beliefs_confidence_as_its_events_give_it()
{
    let weeks = vec![
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 2,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Node {
                        key: 0,
                        label: None,
                        name: None,
                        alias: None,
                        prop: None,
                    }],
                },
                Note {
                    salience: 0,
                    steps: vec![Step::Edge {
                        relation: 1,
                        to: 1,
                        confidence: Some(0),
                        from_time: None,
                        price: None,
                    }],
                },
            ],
            pin: None,
            forget: None,
            late: Some(Note {
                salience: 0,
                steps: vec![Step::Node {
                    key: 0,
                    label: None,
                    name: None,
                    alias: Some(0),
                    prop: Some(1),
                }],
            }),
            deletions: vec![Deletion::Summary(49812), Deletion::Event(65524)],
        },
        Week {
            notes: vec![
                Note {
                    salience: 1,
                    steps: vec![
                        Step::Edge {
                            relation: 2,
                            to: 2,
                            confidence: None,
                            from_time: None,
                            price: Some(0),
                        },
                        Step::Node {
                            key: 0,
                            label: None,
                            name: Some(0),
                            alias: None,
                            prop: Some(1),
                        },
                        Step::Node {
                            key: 1,
                            label: Some(0),
                            name: None,
                            alias: None,
                            prop: None,
                        },
                    ],
                },
                Note {
                    salience: 0,
                    steps: vec![
                        Step::Node {
                            key: 0,
                            label: Some(0),
                            name: Some(0),
                            alias: Some(0),
                            prop: None,
                        },
                        Step::Node {
                            key: 0,
                            label: None,
                            name: Some(1),
                            alias: None,
                            prop: Some(2),
                        },
                        Step::Node {
                            key: 1,
                            label: Some(0),
                            name: None,
                            alias: Some(2),
                            prop: None,
                        },
                    ],
                },
                Note {
                    salience: 3,
                    steps: vec![
                        Step::Edge {
                            relation: 0,
                            to: 1,
                            confidence: Some(3),
                            from_time: None,
                            price: None,
                        },
                        Step::RetractNode(0),
                    ],
                },
                Note {
                    salience: 1,
                    steps: vec![
                        Step::Node {
                            key: 1,
                            label: None,
                            name: Some(1),
                            alias: None,
                            prop: Some(0),
                        },
                        Step::Node {
                            key: 3,
                            label: Some(0),
                            name: Some(1),
                            alias: Some(1),
                            prop: None,
                        },
                    ],
                },
            ],
            pin: Some(1),
            forget: None,
            late: None,
            deletions: vec![],
        },
        Week {
            notes: vec![
                Note {
                    salience: 3,
                    steps: vec![
                        Step::Edge {
                            relation: 1,
                            to: 0,
                            confidence: Some(2),
                            from_time: None,
                            price: None,
                        },
                        Step::Edge {
                            relation: 2,
                            to: 2,
                            confidence: Some(0),
                            from_time: None,
                            price: None,
                        },
                        Step::Edge {
                            relation: 2,
                            to: 1,
                            confidence: Some(4),
                            from_time: None,
                            price: None,
                        },
                    ],
                },
                Note {
                    salience: 3,
                    steps: vec![
                        Step::Edge {
                            relation: 1,
                            to: 3,
                            confidence: Some(3),
                            from_time: None,
                            price: None,
                        },
                        Step::Edge {
                            relation: 2,
                            to: 2,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                    ],
                },
                Note {
                    salience: 1,
                    steps: vec![
                        Step::Edge {
                            relation: 2,
                            to: 0,
                            confidence: None,
                            from_time: None,
                            price: None,
                        },
                        Step::Edge {
                            relation: 1,
                            to: 2,
                            confidence: Some(4),
                            from_time: None,
                            price: None,
                        },
                        Step::Edge {
                            relation: 1,
                            to: 2,
                            confidence: Some(4),
                            from_time: None,
                            price: None,
                        },
                    ],
                },
                Note {
                    salience: 1,
                    steps: vec![
                        Step::Node {
                            key: 2,
                            label: Some(2),
                            name: None,
                            alias: Some(2),
                            prop: Some(3),
                        },
                        Step::Edge {
                            relation: 1,
                            to: 1,
                            confidence: None,
                            from_time: None,
                            price: Some(2),
                        },
                        Step::Edge {
                            relation: 1,
                            to: 2,
                            confidence: Some(3),
                            from_time: None,
                            price: None,
                        },
                    ],
                },
                Note {
                    salience: 1,
                    steps: vec![
                        Step::Edge {
                            relation: 2,
                            to: 0,
                            confidence: Some(2),
                            from_time: None,
                            price: None,
                        },
                        Step::Edge {
                            relation: 1,
                            to: 2,
                            confidence: Some(3),
                            from_time: None,
                            price: None,
                        },
                    ],
                },
            ],
            pin: None,
            forget: Some(3),
            late: None,
            deletions: vec![Deletion::Summary(62615), Deletion::Event(65472)],
        },
    ];
    run(&weeks, BackendKind::Redb);
}
