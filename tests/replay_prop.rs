//! Property: for any sequence of batches of node/edge upserts and retractions (some of them
//! invalid), a failed batch changes nothing, and after all of them replaying the log gives
//! exactly the live state, before and after reopening the store.

use loci::model::{Assertion, EdgeUpsert, EventDraft, NodeUpsert};
use loci::{BackendKind, Store};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Node(u8, u8),
    Edge(u8, u8, u8, u16),
    RetractNode(u8),
    RetractEdge(u8, u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6, 0u8..3).prop_map(|(k, v)| Op::Node(k, v)),
        5 => (0u8..6, 0u8..3, 0u8..6, 0u16..1100).prop_map(|(f, r, t, c)| Op::Edge(f, r, t, c)),
        1 => (0u8..6).prop_map(Op::RetractNode),
        1 => (0u8..6, 0u8..3, 0u8..6).prop_map(|(f, r, t)| Op::RetractEdge(f, r, t)),
    ]
}

fn assertion(op: &Op) -> Assertion {
    let key = |k: u8| format!("k{k}");
    match op {
        Op::Node(k, v) => Assertion::UpsertNode(NodeUpsert {
            key: key(*k),
            label: Some(["Place", "NPC", "Item"][*v as usize].into()),
            name: (*v != 2).then(|| format!("name {k} {v}")),
            aliases: vec![format!("alias {v}")],
            ..Default::default()
        }),
        // Confidence above 1000 (i.e. > 1.0) is invalid and must fail its batch.
        Op::Edge(f, r, t, c) => Assertion::UpsertEdge(EdgeUpsert {
            from: key(*f),
            relation: format!("R{r}"),
            to: key(*t),
            confidence: Some(*c as f32 / 1000.0),
            ..Default::default()
        }),
        Op::RetractNode(k) => Assertion::RetractNode { key: key(*k) },
        Op::RetractEdge(f, r, t) => Assertion::RetractEdge {
            from: key(*f),
            relation: format!("R{r}"),
            to: key(*t),
        },
    }
}

type Snapshot = (u64, Vec<loci::Node>, Vec<(u32, u32, u32, u32)>);

fn snapshot(store: &Store) -> Snapshot {
    let g = store.graph();
    let nodes = g.nodes().cloned().collect();
    let edges = g
        .edges()
        .map(|(id, e)| (id.0, e.from.0, e.to.0, e.confidence.to_bits()))
        .collect();
    drop(g);
    (store.stats().events, nodes, edges)
}

fn run(kind: BackendKind, batches: Vec<Vec<Vec<Op>>>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let before_reopen = {
        let store = Store::create(&path, kind).unwrap();
        for (b, batch) in batches.iter().enumerate() {
            let events: Vec<EventDraft> = batch
                .iter()
                .enumerate()
                .map(|(i, ops)| {
                    let mut e = EventDraft::new((b * 10 + i) as i64, "p", "OBSERVATION");
                    e.assertions = ops.iter().map(assertion).collect();
                    e
                })
                .collect();
            let before = snapshot(&store);
            if store.ingest(events).is_err() {
                assert_eq!(snapshot(&store), before, "a failed batch changed the state");
            }
        }
        let report = store.verify().unwrap();
        assert!(report.ok(), "{:#?}", report.differences);
        snapshot(&store)
    };
    let store = Store::open(&path).unwrap();
    assert_eq!(snapshot(&store), before_reopen);
    assert!(store.verify().unwrap().ok());
}

fn batches() -> impl Strategy<Value = Vec<Vec<Vec<Op>>>> {
    prop::collection::vec(
        prop::collection::vec(prop::collection::vec(op(), 0..6), 1..4),
        1..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn replay_equals_live_redb(b in batches()) {
        run(BackendKind::Redb, b);
    }

    #[test]
    fn replay_equals_live_sled(b in batches()) {
        run(BackendKind::Sled, b);
    }
}
