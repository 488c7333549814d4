//! `replay --until`: the graph as it was after any event equals the state recorded live at
//! that point, on both backends, whether copied out whole (`Store::state_at`) or read in
//! place (`Store::past`, which the command line uses: a copy of every edge of a 100M-edge
//! graph does not fit in memory); a deletion stays in force when looking back.

use loci::model::{Assertion, EdgeUpsert, EventDraft, Node, NodeUpsert, Value};
use loci::world::{self, WorldConfig};
use loci::{BackendKind, DeleteRequest, Edge, Store};

/// The live graph: nodes and full edges, by id.
fn live(store: &Store) -> (Vec<Node>, Vec<Edge>) {
    let (mut nodes, ids): (Vec<Node>, Vec<loci::EdgeId>) = {
        let g = store.graph();
        (g.nodes().collect(), g.edges().map(|(id, _)| id).collect())
    };
    nodes.sort_by_key(|n| n.id);
    let mut edges: Vec<Edge> = ids
        .into_iter()
        .map(|id| store.edge(id).unwrap().unwrap())
        .collect();
    edges.sort_by_key(|e| e.id);
    (nodes, edges)
}

#[test]
fn the_graph_after_any_event_equals_what_was_live_then() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let w = world::generate(&WorldConfig {
            seed: 9,
            scale: 1,
            days: 10,
        });
        let mut recorded = Vec::new();
        // Batches of uneven sizes, so cut points fall everywhere.
        let mut events = w.events.into_iter().peekable();
        let mut size = 1;
        while events.peek().is_some() {
            let batch: Vec<EventDraft> = events.by_ref().take(size).collect();
            let c = store.ingest(batch).unwrap();
            recorded.push((c.last_seq, live(&store)));
            size = size % 7 + 2;
        }
        assert!(recorded.len() > 10);
        for (seq, (nodes, edges)) in &recorded {
            let past = store.state_at(*seq).unwrap();
            assert_eq!(past.seq, *seq);
            assert_eq!(&past.nodes, nodes, "{backend}: nodes after event {seq}");
            assert_eq!(&past.edges, edges, "{backend}: edges after event {seq}");
            // Read in place, record by record, it is the same graph, and its JSON the same.
            let held = store.past(*seq).unwrap();
            assert_eq!((held.seq(), held.latest_ts()), (past.seq, past.latest_ts));
            assert_eq!(
                (held.node_count(), held.edge_count()),
                (nodes.len(), edges.len())
            );
            assert_eq!(&held.nodes().collect::<Vec<_>>(), nodes);
            assert_eq!(&held.edges().collect::<Vec<_>>(), edges);
            assert_eq!(
                serde_json::to_string(&held).unwrap(),
                serde_json::to_string(&past).unwrap()
            );
        }
        // Beyond the end: the end.
        let last = recorded.last().unwrap().0;
        assert_eq!(store.state_at(last + 100).unwrap().seq, last);
    }
}

#[test]
fn looking_back_does_not_undo_a_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let mut first = EventDraft::new(0, "bot", "OBSERVATION");
    first.assertions = vec![
        Assertion::UpsertNode(NodeUpsert {
            key: "a".into(),
            ..Default::default()
        }),
        Assertion::UpsertNode(NodeUpsert {
            key: "b".into(),
            ..Default::default()
        }),
    ];
    let mut secret = EventDraft::new(1, "bot", "OBSERVATION");
    secret.payload = Value::from("a knows b's secret");
    secret.assertions = vec![Assertion::UpsertEdge(EdgeUpsert {
        from: "a".into(),
        relation: "KNOWS".into(),
        to: "b".into(),
        ..Default::default()
    })];
    store.ingest(vec![first, secret]).unwrap();
    assert_eq!(store.state_at(2).unwrap().edges.len(), 1);
    store.delete(&DeleteRequest::events([2])).unwrap();
    let past = store.state_at(2).unwrap();
    assert!(past.edges.is_empty(), "{past:?}");
    assert_eq!(past.nodes.len(), 2);
}

/// The episodic index gives, for every place, actor and kind, exactly the events a scan of the
/// whole time range finds, before and after a deletion.
#[test]
fn timelines_by_place_actor_and_kind_read_the_episodic_index() {
    use loci::queries::{timeline, timeline_where, TimelineFilter};
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let w = world::generate(&WorldConfig {
            seed: 4,
            scale: 2,
            days: 8,
        });
        store.ingest(w.events).unwrap();
        let check = |store: &Store| {
            let (from, to) = (20_000, 150_000);
            let all = timeline(store, from, to).unwrap();
            let mut places: Vec<String> = all.iter().filter_map(|e| e.place.clone()).collect();
            places.sort();
            places.dedup();
            assert!(places.len() > 5);
            for p in places {
                let filter = TimelineFilter {
                    place: Some(p.clone()),
                    ..Default::default()
                };
                let want: Vec<u64> = all
                    .iter()
                    .filter(|e| e.place.as_deref() == Some(p.as_str()))
                    .map(|e| e.seq)
                    .collect();
                let got: Vec<u64> = timeline_where(store, from, to, &filter)
                    .unwrap()
                    .iter()
                    .map(|e| e.seq)
                    .collect();
                assert_eq!(got, want, "{backend}: place {p}");
            }
            for kind in ["TRADE", "DEATH", "SLEEP", "DISCOVERY"] {
                let filter = TimelineFilter {
                    kind: Some(kind.into()),
                    actor: Some("bot".into()),
                    ..Default::default()
                };
                let want: Vec<u64> = all
                    .iter()
                    .filter(|e| e.kind == kind)
                    .map(|e| e.seq)
                    .collect();
                let got: Vec<u64> = timeline_where(store, from, to, &filter)
                    .unwrap()
                    .iter()
                    .map(|e| e.seq)
                    .collect();
                assert_eq!(got, want, "{backend}: kind {kind}");
            }
        };
        check(&store);
        let trade = timeline(&store, 20_000, 150_000)
            .unwrap()
            .into_iter()
            .find(|e| e.kind == "TRADE")
            .unwrap();
        store.delete(&DeleteRequest::events([trade.seq])).unwrap();
        check(&store);
        let report = store.verify().unwrap();
        assert!(report.ok(), "{:#?}", report.differences);
    }
}
