//! Store behaviour, run against every backend: projection rules, atomic batches, retraction,
//! replay verification, full-text catch-up, reader isolation, and dataset ingest.

use std::path::Path;

use loci::ingest::{self, Format};
use loci::model::{Assertion, EdgeId, EdgeUpsert, EventDraft, NodeId, NodeUpsert, Props, Value};
use loci::storage::{BackendKind, Table, WriteBatch};
use loci::{DeleteRequest, Error, SearchFilter, Store, Target};

fn node(key: &str, label: &str, name: &str) -> Assertion {
    Assertion::UpsertNode(NodeUpsert {
        key: key.into(),
        label: Some(label.into()),
        name: Some(name.into()),
        ..Default::default()
    })
}

fn edge(from: &str, rel: &str, to: &str, conf: f32) -> Assertion {
    Assertion::UpsertEdge(EdgeUpsert {
        from: from.into(),
        relation: rel.into(),
        to: to.into(),
        confidence: Some(conf),
        ..Default::default()
    })
}

fn event(ts: i64, kind: &str, assertions: Vec<Assertion>) -> EventDraft {
    let mut e = EventDraft::new(ts, "bot", kind);
    e.assertions = assertions;
    e
}

fn assert_verified(store: &Store) {
    let report = store.verify().unwrap();
    assert!(report.ok(), "replay differs: {:#?}", report.differences);
}

fn village(store: &Store) {
    store
        .ingest(vec![
            event(
                10,
                "DISCOVERY",
                vec![
                    node("village", "Place", "Oakvale village"),
                    node("smith", "NPC", "toolsmith"),
                    node("emerald", "Item", "emerald"),
                    edge("smith", "LOCATED_IN", "village", 1.0),
                ],
            ),
            event(20, "TRADE", vec![edge("smith", "OFFERS", "emerald", 0.8)]),
        ])
        .unwrap();
}

fn projection_rules(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    village(&store);
    let offer = store
        .edge_between("smith", "OFFERS", "emerald")
        .unwrap()
        .unwrap();
    assert_eq!(
        (offer.confidence, offer.last_seen, offer.evidence.clone()),
        (0.8, 20, vec![2])
    );
    // Re-assertion: confidence replaced, evidence appended, last_seen advanced, props merged.
    let mut up = EdgeUpsert {
        from: "smith".into(),
        relation: "OFFERS".into(),
        to: "emerald".into(),
        confidence: Some(0.6),
        ..Default::default()
    };
    up.props = Props::from([
        ("price".to_string(), Value::Int(3)),
        ("note".to_string(), Value::from("x")),
    ]);
    store
        .ingest(vec![event(
            50,
            "TRADE",
            vec![Assertion::UpsertEdge(up.clone())],
        )])
        .unwrap();
    up.confidence = None;
    up.props = Props::from([("note".to_string(), Value::Null)]);
    store
        .ingest(vec![event(40, "TRADE", vec![Assertion::UpsertEdge(up)])])
        .unwrap();
    let offer = store
        .edge_between("smith", "OFFERS", "emerald")
        .unwrap()
        .unwrap();
    assert_eq!(
        offer.confidence, 0.6,
        "an upsert without confidence keeps it"
    );
    assert_eq!(offer.evidence, vec![2, 3, 4]);
    assert_eq!(
        offer.last_seen, 50,
        "last_seen is the latest world time, not the latest event"
    );
    assert_eq!(
        offer.props,
        Props::from([("price".to_string(), Value::Int(3))]),
        "null removes a property"
    );
    // Node merge: aliases accumulate, name stays unless given.
    store
        .ingest(vec![event(
            60,
            "OBSERVATION",
            vec![Assertion::UpsertNode(NodeUpsert {
                key: "smith".into(),
                aliases: vec!["Bob".into(), "toolsmith".into()],
                ..Default::default()
            })],
        )])
        .unwrap();
    let smith = store.node_by_key("smith").unwrap();
    assert_eq!(
        (
            smith.name.as_str(),
            smith.aliases.clone(),
            smith.created,
            smith.updated
        ),
        ("toolsmith", vec!["Bob".to_string()], 10, 60)
    );
    // A name given that is an alias takes it out of the aliases: a node's aliases never hold
    // its name, whichever order the events that gave them come in (rules 8; the deletion of a
    // summary after forgetting had left `A3` named `A3` with the alias `A3`, deletion_prop at
    // seed 2).
    store
        .ingest(vec![event(
            65,
            "OBSERVATION",
            vec![Assertion::UpsertNode(NodeUpsert {
                key: "smith".into(),
                name: Some("Bob".into()),
                aliases: vec!["Bob".into()],
                ..Default::default()
            })],
        )])
        .unwrap();
    let smith = store.node_by_key("smith").unwrap();
    assert_eq!(
        (smith.name.as_str(), smith.aliases.clone()),
        ("Bob", Vec::<String>::new())
    );
    // A node created from aliases alone is named by its first alias.
    store
        .ingest(vec![event(
            70,
            "OBSERVATION",
            vec![Assertion::UpsertNode(NodeUpsert {
                key: "ent:x".into(),
                aliases: vec!["Mr X".into()],
                ..Default::default()
            })],
        )])
        .unwrap();
    let x = store.node_by_key("ent:x").unwrap();
    assert_eq!(
        (x.name.as_str(), x.label.as_str(), x.aliases.len()),
        ("Mr X", "Entity", 0)
    );
    assert_verified(&store);
}

fn failed_batch_changes_nothing(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    village(&store);
    let before = store.stats();
    let err = store
        .ingest(vec![
            event(30, "DISCOVERY", vec![node("mine", "Place", "deep mine")]),
            event(31, "TRADE", vec![edge("smith", "OFFERS", "diamond", 0.5)]),
        ])
        .unwrap_err();
    match err {
        Error::InvalidEvent {
            event,
            assertion,
            field,
            message,
        } => {
            assert_eq!((event, assertion, field.as_str()), (1, Some(0), "to"));
            assert!(message.contains("diamond"), "{message}");
        }
        other => panic!("unexpected {other}"),
    }
    let err = store
        .ingest(vec![event(
            30,
            "TRADE",
            vec![edge("smith", "OFFERS", "emerald", 1.5)],
        )])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("confidence: 1.5 is outside [0, 1]"),
        "{err}"
    );
    let mut bad_place = event(30, "SLEEP", vec![]);
    bad_place.place = Some("nowhere".into());
    assert!(store
        .ingest(vec![bad_place])
        .unwrap_err()
        .to_string()
        .contains("place"));
    let after = store.stats();
    assert_eq!(
        (after.events, after.nodes, after.edges),
        (before.events, before.nodes, before.edges)
    );
    assert!(store.node_by_key("mine").is_none());
    let filter = SearchFilter::default();
    assert!(
        store.search("deep mine", &filter, 5).unwrap().is_empty(),
        "nothing of the failed batch is indexed"
    );
    assert_eq!(store.event(3).unwrap(), None, "no log record was written");
    // The next good batch continues the sequence without a gap.
    let c = store.ingest(vec![event(40, "SLEEP", vec![])]).unwrap();
    assert_eq!((c.first_seq, c.last_seq), (3, 3));
    assert_verified(&store);
}

fn retraction_and_stable_ids(kind: BackendKind, dir: &Path) {
    {
        let store = Store::create(dir, kind).unwrap();
        village(&store);
        store
            .ingest(vec![event(
                30,
                "OBSERVATION",
                vec![
                    node("ghost", "NPC", "wandering trader"),
                    edge("ghost", "OFFERS", "emerald", 0.9),
                    edge("ghost", "LOCATED_IN", "village", 0.9),
                ],
            )])
            .unwrap();
        let ghost = store.node_by_key("ghost").unwrap().id;
        assert_eq!(store.graph().adjacency().entries(ghost).count(), 2);
        store
            .ingest(vec![event(
                40,
                "OBSERVATION",
                vec![
                    Assertion::RetractNode {
                        key: "ghost".into(),
                    },
                    Assertion::RetractEdge {
                        from: "smith".into(),
                        relation: "LOCATED_IN".into(),
                        to: "village".into(),
                    },
                ],
            )])
            .unwrap();
        assert!(store.node_by_key("ghost").is_none());
        assert!(store
            .edge_between("smith", "LOCATED_IN", "village")
            .unwrap()
            .is_none());
        let village_id = store.node_by_key("village").unwrap().id;
        assert!(
            store
                .graph()
                .adjacency()
                .entries(village_id)
                .next()
                .is_none(),
            "incident edges left both lists"
        );
        assert!(store
            .search(
                "wandering trader",
                &SearchFilter::default().with_nodes_only(true),
                5
            )
            .unwrap()
            .is_empty());
        // Retracting what does not exist is an error, not a silent no-op.
        let e = store
            .ingest(vec![event(
                41,
                "X",
                vec![Assertion::RetractNode {
                    key: "ghost".into(),
                }],
            )])
            .unwrap_err();
        assert!(e.to_string().contains("unknown node \"ghost\""), "{e}");
        assert_verified(&store);
    }
    // Ids are never reused, even for the highest retracted id, across a reopen.
    let store = Store::open(dir).unwrap();
    store
        .ingest(vec![event(
            50,
            "OBSERVATION",
            vec![node("ghost", "NPC", "back again")],
        )])
        .unwrap();
    assert_eq!(
        store.node_by_key("ghost").unwrap().id.0,
        4,
        "ids 0..=3 were used before"
    );
    assert_verified(&store);
}

/// Every edge as (id, from, to, confidence, relation name), in id order.
fn edge_rows(store: &Store) -> Vec<(EdgeId, NodeId, NodeId, f32, String)> {
    let g = store.graph();
    g.edges()
        .map(|(id, e)| {
            (
                id,
                e.from,
                e.to,
                e.confidence,
                g.relation_name(e.relation).to_string(),
            )
        })
        .collect()
}

fn reopen_restores_everything(kind: BackendKind, dir: &Path) {
    let (nodes, edges, hits) = {
        let store = Store::create(dir, kind).unwrap();
        village(&store);
        let nodes: Vec<_> = store.graph().nodes().collect();
        (
            nodes,
            edge_rows(&store),
            store
                .search("toolsmith", &SearchFilter::default(), 5)
                .unwrap(),
        )
    };
    let store = Store::open(dir).unwrap();
    assert_eq!(store.backend_kind(), kind);
    assert_eq!(store.graph().nodes().collect::<Vec<_>>(), nodes);
    assert_eq!(edge_rows(&store), edges);
    assert_eq!(
        store
            .search("toolsmith", &SearchFilter::default(), 5)
            .unwrap(),
        hits
    );
    assert_verified(&store);
}

fn search_filters(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    village(&store);
    let mut death = event(500, "DEATH", vec![]);
    death.payload = Value::from("fell into lava near the village");
    store.ingest(vec![death]).unwrap();
    let f = SearchFilter::default();
    let hits = store.search("village", &f, 10).unwrap();
    assert!(hits.iter().any(|h| h.target == Target::Event(3)));
    assert!(hits.iter().any(|h| matches!(h.target, Target::Node(_))));
    assert!(
        hits.windows(2).all(|w| w[0].score >= w[1].score),
        "ranked by score"
    );
    let only_places = SearchFilter::default().with_labels(["Place"]);
    let hits = store.search("village", &only_places, 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(
        hits[0].target,
        Target::Node(store.node_by_key("village").unwrap().id)
    );
    let deaths = SearchFilter::default().with_kinds(["DEATH"]);
    assert_eq!(store.search("lava", &deaths, 10).unwrap().len(), 1);
    let early = SearchFilter::default().with_time(0, 100);
    assert!(store.search("lava", &early, 10).unwrap().is_empty());
    // Stemming: "villages" finds "village".
    assert!(!store
        .search("villages", &only_places, 10)
        .unwrap()
        .is_empty());
    assert!(store.search("", &f, 10).unwrap().is_empty());
    assert!(
        store.search("?!", &f, 10).unwrap().is_empty(),
        "punctuation alone is no query, and no error"
    );
    assert_eq!(
        store
            .events_between(15, 25)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect::<Vec<_>>(),
        vec![2]
    );
    assert_eq!(store.latest_event_time().unwrap(), Some(500));
}

fn text_index_catches_up_and_rebuilds(kind: BackendKind, dir: &Path) {
    let text = dir.join("text");
    let saved = dir.join("..").join(format!("saved-text-{}", kind));
    {
        let store = Store::create(dir, kind).unwrap();
        village(&store);
    }
    // Keep the index as of seq 2, then write more.
    copy_dir(&text, &saved);
    {
        let store = Store::open(dir).unwrap();
        store
            .ingest(vec![event(
                30,
                "DISCOVERY",
                vec![node("mine", "Place", "deep mine")],
            )])
            .unwrap();
    }
    // Put the stale index back: the store must replay seq 3 into it on open.
    std::fs::remove_dir_all(&text).unwrap();
    copy_dir(&saved, &text);
    {
        let store = Store::open(dir).unwrap();
        assert_eq!(store.text_index().indexed_seq(), 3);
        let hits = store.search("mine", &SearchFilter::default(), 5).unwrap();
        let mine = store.node_by_key("mine").unwrap().id;
        assert_eq!(
            hits.iter().map(|h| h.target).collect::<Vec<_>>(),
            vec![Target::Node(mine)],
            "seq 3 was replayed into the index"
        );
        assert_verified(&store);
    }
    // No index at all: rebuilt from the log.
    std::fs::remove_dir_all(&text).unwrap();
    let store = Store::open(dir).unwrap();
    assert_eq!(
        store
            .search("toolsmith", &SearchFilter::default(), 5)
            .unwrap()
            .len(),
        1
    );
    assert_verified(&store);
    std::fs::remove_dir_all(&saved).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn verify_detects_tampering(kind: BackendKind, dir: &Path) {
    {
        let store = Store::create(dir, kind).unwrap();
        village(&store);
        assert_verified(&store);
        store.checkpoint().unwrap().unwrap();
    }
    {
        // Change the log behind the store's back: the first event says the smith is less
        // surely in the village. The snapshot, taken after the last event (which is as it
        // was), is still used, so the live state is no longer the log's projection.
        let backend = kind.open(dir).unwrap();
        let key = 1u64.to_be_bytes();
        let record = backend.get(Table::Log, &key).unwrap().unwrap();
        let mut ev = loci::codec::decode_event("log", &record).unwrap();
        match &mut ev.assertions[3] {
            Assertion::UpsertEdge(e) => e.confidence = Some(0.5),
            other => panic!("{other:?}"),
        }
        let mut w = WriteBatch::default();
        w.put(Table::Log, key, loci::codec::encode_event(&ev));
        backend.commit(w).unwrap();
    }
    let store = Store::open(dir).unwrap();
    assert!(matches!(
        store.state_source(),
        loci::StateSource::Snapshot { seq: 2, .. }
    ));
    let report = store.verify().unwrap();
    assert!(!report.ok());
    assert!(
        report
            .differences
            .iter()
            .any(|d| d.starts_with("live edge e0") && d.contains("confidence: 0.5")),
        "{:#?}",
        report.differences
    );
}

/// An event of the log that the projection refuses is named by its sequence number, where
/// the message said "event 1 of the batch" (counted from where the replay began) for the
/// log's third event (a helper's review).
fn a_logged_event_replay_refuses_is_named_by_its_seq(kind: BackendKind, dir: &Path) {
    {
        let store = Store::create(dir, kind).unwrap();
        village(&store);
        store.checkpoint().unwrap().unwrap();
        store
            .ingest(vec![event(9, "NOTE", vec![node("n:x", "Entity", "x")])])
            .unwrap();
    }
    let seq = 3u64;
    {
        // The third event's kind emptied behind the store's back.
        let backend = kind.open(dir).unwrap();
        let key = seq.to_be_bytes();
        let record = backend.get(Table::Log, &key).unwrap().unwrap();
        let mut ev = loci::codec::decode_event("log", &record).unwrap();
        assert_eq!(ev.seq, seq);
        ev.kind = String::new();
        let mut w = WriteBatch::default();
        w.put(Table::Log, key, loci::codec::encode_event(&ev));
        backend.commit(w).unwrap();
    }
    // The open replays the log past the snapshot (seq 2), and so does verify from the start.
    let said = match Store::open(dir) {
        Err(e) => e.to_string(),
        Ok(store) => match store.verify() {
            Err(e) => e.to_string(),
            Ok(report) => format!("{:?}", report.differences),
        },
    };
    assert!(said.contains("the log's event 3: kind: "), "{said}");
    assert!(!said.contains("of the batch"), "{said}");
}

fn readers_never_see_half_a_batch(kind: BackendKind, dir: &Path) {
    let store = std::sync::Arc::new(Store::create(dir, kind).unwrap());
    store
        .ingest(vec![event(
            0,
            "GENESIS",
            (0..100)
                .map(|i| node(&format!("n{i}"), "Entity", "x"))
                .collect(),
        )])
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut checks = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let g = store.graph();
                    let n = g.edges().count();
                    assert_eq!(n % 10, 0, "saw {n} edges: part of a batch");
                    assert_eq!(g.adjacency().edge_count(), n);
                    for (_, e) in g.edges() {
                        assert!(g.node(e.from).is_some() && g.node(e.to).is_some());
                    }
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    for b in 0..30 {
        let edges = (0..10)
            .map(|i| {
                edge(
                    &format!("n{}", (b * 10 + i) % 100),
                    &format!("R{b}"),
                    &format!("n{}", (b + i + 1) % 100),
                    0.5,
                )
            })
            .collect();
        store.ingest(vec![event(b as i64, "BATCH", edges)]).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(store.stats().edges, 300);
}

fn dataset_ingest_resolves_entities(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    let passages =
        "{\"id\":\"p1\",\"title\":\"Obama\",\"text\":\"Barack Obama was born in Honolulu.\"}\n\
                    {\"id\":\"p2\",\"title\":\"Honolulu\",\"text\":\"Honolulu is in Hawaii.\"}\n";
    ingest::read_str("corpus.jsonl", passages, Format::Passages)
        .unwrap()
        .commit(&store)
        .unwrap();
    let triples = "{\"doc\":\"p1\",\"s\":\"Barack Obama\",\"p\":\"born in\",\"o\":\"Honolulu\"}\n\
                   {\"doc\":\"p2\",\"s\":\"honolulu \",\"p\":\"located in\",\"o\":\"Hawaii\"}\n\
                   {\"doc\":\"p2\",\"s\":\"Barack  Obama.\",\"p\":\"visited\",\"o\":\"Hawaii\"}\n";
    let c = ingest::read_str("triples.jsonl", triples, Format::Triples)
        .unwrap()
        .commit(&store)
        .unwrap();
    assert_eq!(c.events, 2, "one extraction event per passage");
    let obama = store.node_by_key("ent:barack obama").unwrap();
    assert_eq!(obama.name, "Barack Obama");
    assert_eq!(obama.aliases, vec!["Barack  Obama.".to_string()]);
    let honolulu = store.node_by_key("ent:honolulu").unwrap();
    assert_eq!(
        honolulu.aliases,
        vec!["honolulu".to_string()],
        "trimmed surface form kept as alias"
    );
    let born = store
        .edge_between("ent:barack obama", "born in", "ent:honolulu")
        .unwrap()
        .unwrap();
    let ev = store.event(born.evidence[0]).unwrap().unwrap();
    assert_eq!(
        ev.evidence,
        vec!["p1".to_string()],
        "the edge's event cites its passage"
    );
    assert!(store
        .edge_between("p2", "MENTIONS", "ent:hawaii")
        .unwrap()
        .is_some());
    // A triple citing a passage that is not in the store fails the batch, naming line and field.
    let bad = "{\"doc\":\"p1\",\"s\":\"a\",\"p\":\"r\",\"o\":\"b\"}\n{\"doc\":\"p9\",\"s\":\"a\",\"p\":\"r\",\"o\":\"b\"}\n";
    let before = store.stats();
    let err = ingest::read_str("bad.jsonl", bad, Format::Triples)
        .unwrap()
        .commit(&store)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("bad.jsonl:2: doc: unknown node \"p9\""),
        "{err}"
    );
    assert_eq!(store.stats().edges, before.edges);
    assert!(
        store.node_by_key("ent:a").is_none(),
        "line 1 of the failed batch left nothing"
    );
    let err = ingest::read_str(
        "bad.jsonl",
        "{\"doc\":\"p1\",\"s\":\"  \",\"p\":\"r\",\"o\":\"b\"}",
        Format::Triples,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "bad.jsonl:1: s: empty entity name");
    // A name of symbols only is still an entity (MuSiQue has "$").
    ingest::read_str(
        "sym.jsonl",
        "{\"doc\":\"p1\",\"s\":\"price\",\"p\":\"in\",\"o\":\" $ \"}",
        Format::Triples,
    )
    .unwrap()
    .commit(&store)
    .unwrap();
    assert_eq!(store.node_by_key("ent:$").unwrap().name, "$");
    assert_verified(&store);
}

fn graph_format_errors_name_lines(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    let lines = "{\"op\":\"node\",\"key\":\"a\"}\n{\"op\":\"node\",\"key\":\"b\"}\n\n{\"op\":\"edge\",\"from\":\"a\",\"rel\":\"R\",\"to\":\"b\",\"confidence\":2}\n";
    let err = ingest::read_str("g.jsonl", lines, Format::Graph)
        .unwrap()
        .commit(&store)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "g.jsonl:4: confidence: 2 is outside [0, 1]"
    );
    let events = "{\"ts\":1,\"kind\":\"K\",\"assert\":[{\"op\":\"node\",\"key\":\"a\"},{\"op\":\"edge\",\"from\":\"a\",\"rel\":\"R\",\"to\":\"zz\"}]}\n";
    let err = ingest::read_str("e.jsonl", events, Format::Events)
        .unwrap()
        .commit(&store)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "e.jsonl:1: assert[1].to: unknown node \"zz\""
    );
    assert_eq!(store.stats().events, 0);
}

/// A node named with no searchable word (a symbol, stopwords only; an emoji until the
/// analyser took emoji as words) is found by a search for its name: such a query had no terms
/// and found nothing (`loci search "🙂"`, from a probe with emoji names).
fn search_finds_names_without_words(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    village(&store);
    store
        .ingest(vec![event(
            20,
            "SIGHTING",
            vec![
                node("smile", "Mob", "🙂"),
                node("grin", "Mob", "😀"),
                node("her", "NPC", "Her"),
                node("dollar", "Item", "$"),
                node("cafe", "Place", "☕ Café"),
            ],
        )])
        .unwrap();
    let f = SearchFilter::default();
    let found = |text: &str, filter: &SearchFilter| -> Vec<String> {
        store
            .search(text, filter, 10)
            .unwrap()
            .into_iter()
            .map(|h| match h.target {
                Target::Node(n) => store.node(n).unwrap().key,
                Target::Event(e) => format!("event {e}"),
            })
            .collect()
    };
    assert_eq!(found("🙂", &f), ["smile"]);
    assert_eq!(
        found("  🙂 ", &f),
        ["smile"],
        "spaces around a name are not part of it"
    );
    assert_eq!(found("😀", &f), ["grin"]);
    assert_eq!(found("her", &f), ["her"], "a name of stopwords only");
    assert_eq!(found("$", &f), ["dollar"]);
    assert_eq!(found("café", &f), ["cafe"]);
    // The search's filters hold for names as for words.
    assert_eq!(
        found("🙂", &SearchFilter::default().with_labels(["Mob"])),
        ["smile"]
    );
    assert!(found("🙂", &SearchFilter::default().with_labels(["Place"])).is_empty());
    assert!(found("🙂", &SearchFilter::default().with_kinds(["SIGHTING"])).is_empty());
    assert!(found("🙃", &f).is_empty());
    assert!(found("?!", &f).is_empty());
    assert!(found("", &f).is_empty());
    // After a reopen, the graph read from its snapshot.
    drop(store);
    let store = Store::open(dir).unwrap();
    assert_eq!(
        store.search("🙂", &f, 10).unwrap().len(),
        1,
        "after reopening"
    );
    assert_verified(&store);
}

/// A reader beside a writer can open a full-text index that is ahead of the log it read (the
/// writer committed a batch between the two), or behind it (the writer had not indexed its
/// last batch yet). Its hits are kept to what its graph holds: a node or an event past it had
/// come back as a row of nulls (`loci search` beside `loci ingest`, from a probe), and so had
/// a node the batch retracted.
fn search_keeps_to_what_the_readers_graph_holds(kind: BackendKind, dir: &Path) {
    let (before, after) = (dir.with_extension("before"), dir.with_extension("after"));
    {
        let store = Store::create(dir, kind).unwrap();
        village(&store);
    }
    copy_tree(dir, &before);
    {
        let store = Store::open(dir).unwrap();
        let mut note = event(
            50,
            "NOTE",
            vec![
                node("port", "Place", "Zanzibar harbour"),
                Assertion::RetractNode {
                    key: "smith".into(),
                },
            ],
        );
        note.payload = Value::from("zanzibar spice: village, village, village");
        store.ingest(vec![note]).unwrap();
    }
    copy_tree(dir, &after);
    swap_text_indexes(&before, &after);
    let f = SearchFilter::default();
    // Ahead: the graph and the log as before the batch; the index as after it.
    let reader = Store::open_read_only(&before).unwrap();
    let last = reader.stats().events;
    assert!(reader.node_by_key("port").is_none());
    assert_eq!(reader.search("zanzibar", &f, 10).unwrap(), []);
    let hits = reader.search("village", &f, 100).unwrap();
    assert!(!hits.is_empty());
    for h in &hits {
        match h.target {
            Target::Node(n) => assert!(reader.node(n).is_some(), "{h:?}"),
            Target::Event(seq) => assert!(seq <= last, "{h:?} past event {last}"),
        }
    }
    assert_eq!(reader.search("Zanzibar harbour", &f, 10).unwrap(), []);
    // The index's own best hit for "village" is the batch's event, which the reader's graph
    // does not hold; a short limit still gives as many hits, those past the graph read past.
    let unscoped = reader.text_index().search("village", &f, 1).unwrap();
    assert_eq!(unscoped[0].target, Target::Event(last + 1));
    for limit in 1..=hits.len() {
        assert_eq!(reader.search("village", &f, limit).unwrap(), hits[..limit]);
    }
    drop(reader);
    // Behind: the graph and the log as after the batch, which retracted the toolsmith; the
    // index as before it, where the toolsmith's document still is.
    let reader = Store::open_read_only(&after).unwrap();
    assert!(reader.node_by_key("smith").is_none());
    assert_eq!(
        reader
            .text_index()
            .search("toolsmith", &f, 10)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(reader.search("toolsmith", &f, 10).unwrap(), []);
    drop(reader);
    std::fs::remove_dir_all(&before).unwrap();
    std::fs::remove_dir_all(&after).unwrap();
}

/// A deletion renumbers nodes (the log replayed without the deleted events gives ids anew)
/// and writes every node's document again. A reader whose graph is from one side of a
/// deletion and whose index is from the other (it opened while the deletion committed) took
/// the index's ids for its graph's: a search for one tree named another. Such a reader now
/// leaves node hits out (event hits stay: an event keeps its number); one in step finds them.
fn search_beside_a_deletion_never_names_another_node(kind: BackendKind, dir: &Path) {
    const NAMES: [&str; 4] = ["alder", "birch", "cedar", "damson"];
    let (before, after) = (dir.with_extension("before"), dir.with_extension("after"));
    {
        let store = Store::create(dir, kind).unwrap();
        for (ts, name) in (10..).zip(NAMES) {
            let mut e = event(ts, "NOTE", vec![node(name, "Tree", name)]);
            e.payload = Value::from(format!("planted a {name} tree"));
            store.ingest(vec![e]).unwrap();
        }
    }
    copy_tree(dir, &before);
    {
        let store = Store::open(dir).unwrap();
        store.delete(&DeleteRequest::nodes(["alder"])).unwrap();
        assert_ne!(
            store.node_by_key("birch").unwrap().id,
            NodeId(1),
            "the deletion renumbers the trees after the alder"
        );
    }
    copy_tree(dir, &after);
    swap_text_indexes(&before, &after);
    let f = SearchFilter::default();
    let names_found = |reader: &Store, name: &str| -> Vec<String> {
        let hits = reader.search(name, &f, 10).unwrap();
        hits.iter()
            .filter_map(|h| match h.target {
                Target::Node(n) => Some(reader.node(n).map(|x| x.name).unwrap_or_default()),
                Target::Event(_) => None,
            })
            .collect()
    };
    for side in [&before, &after] {
        let reader = Store::open_read_only(side).unwrap();
        assert!(!reader.searches_nodes(), "{}", side.display());
        for name in NAMES {
            let found = names_found(&reader, name);
            assert!(
                found.iter().all(|n| n == name),
                "{}: a search for {name:?} named {found:?}",
                side.display()
            );
        }
        assert!(!reader.search("planted", &f, 10).unwrap().is_empty());
    }
    let reader = Store::open_read_only(dir).unwrap();
    assert!(reader.searches_nodes());
    assert_eq!(names_found(&reader, "alder"), Vec::<String>::new());
    for name in &NAMES[1..] {
        assert_eq!(names_found(&reader, name), [name.to_string()]);
    }
    drop(reader);
    std::fs::remove_dir_all(&before).unwrap();
    std::fs::remove_dir_all(&after).unwrap();
}

/// A deletion gives every id anew, then writes every node's document again. A search in the
/// same process between the two (a server's request beside a deletion) read the old
/// documents' ids as the new graph's and named other nodes (10,131 of 15,502 node hits); then
/// it gave event hits only until the first commit of the new documents, and the nodes written
/// so far after it, so that a kept node went missing (a server's search for an item untouched
/// by the deletions answered none in 103 of 316 requests). A search now waits for the
/// deletion's documents. A deletion between a search and the reading of its hits' nodes is
/// read over (`Store::with_stable_ids`).
fn a_search_during_a_deletion_finds_each_node_it_keeps_and_no_other(kind: BackendKind, dir: &Path) {
    use std::sync::atomic::{AtomicBool, Ordering};
    const TREES: usize = 3000;
    let store = Store::create(dir, kind).unwrap();
    let planted: Vec<EventDraft> = (0..TREES)
        .map(|i| {
            let name = format!("tree{i} zq{i}");
            let mut e = event(
                10 + i as i64,
                "NOTE",
                vec![node(&format!("t{i}"), "Tree", &name)],
            );
            e.payload = Value::from(format!("planted zq{i}"));
            e
        })
        .collect();
    store.ingest(planted).unwrap();
    let done = AtomicBool::new(false);
    let (checked, wrong, missed) = std::thread::scope(|s| {
        let searcher = s.spawn(|| {
            let (mut checked, mut wrong, mut missed) = (0usize, Vec::new(), Vec::new());
            let mut i = 7usize;
            while !done.load(Ordering::SeqCst) {
                i = (i * 7919 + 13) % TREES;
                let word = format!("zq{i}");
                // The hits' nodes are read after the search, as a server's answer reads them.
                let names = store
                    .with_stable_ids(|| {
                        let hits = store.search(&word, &SearchFilter::default(), 10)?;
                        Ok(hits
                            .iter()
                            .filter_map(|h| match h.target {
                                Target::Node(n) => Some(store.node(n).map(|x| x.name)),
                                Target::Event(_) => None,
                            })
                            .collect::<Vec<_>>())
                    })
                    .unwrap();
                let kept = i >= 3;
                if kept
                    && !names
                        .iter()
                        .flatten()
                        .any(|n| n.split(' ').any(|w| w == word))
                {
                    missed.push(word.clone());
                }
                for name in names {
                    checked += 1;
                    let name = name.unwrap_or_default();
                    if !name.split(' ').any(|w| w == word) {
                        wrong.push((word.clone(), name));
                    }
                }
            }
            (checked, wrong, missed)
        });
        for key in ["t0", "t1", "t2"] {
            store.delete(&DeleteRequest::nodes([key])).unwrap();
        }
        done.store(true, Ordering::SeqCst);
        searcher.join().unwrap()
    });
    assert!(
        wrong.is_empty(),
        "{} of {checked} node hits named another node: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    assert!(
        missed.is_empty(),
        "{} searches for a kept node's word found no node: {:?}",
        missed.len(),
        &missed[..missed.len().min(5)]
    );
    assert!(store.searches_nodes());
    let hits = store
        .search("zq2999", &SearchFilter::default(), 10)
        .unwrap();
    assert!(hits
        .iter()
        .any(|h| matches!(h.target, Target::Node(n) if store.node(n).unwrap().key == "t2999")));
}

/// Gives each of two store directories the other's text index.
fn swap_text_indexes(a: &Path, b: &Path) {
    let swap = a.with_extension("swap");
    std::fs::rename(a.join("text"), &swap).unwrap();
    std::fs::rename(b.join("text"), a.join("text")).unwrap();
    std::fs::rename(&swap, b.join("text")).unwrap();
}

/// A copy of the tree at `from`, directories and all.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn keyed(ts: i64, key: &str, assertions: Vec<Assertion>) -> EventDraft {
    let mut e = event(ts, "SIGHTING", assertions);
    e.idempotency_key = Some(key.into());
    e
}

fn search_count(store: &Store, text: &str) -> usize {
    store
        .search(text, &SearchFilter::default(), 100)
        .unwrap()
        .len()
}

fn retried_batches_apply_once(kind: BackendKind, dir: &Path) {
    let batch = || {
        vec![
            keyed(1, "obs-1", vec![node("creeper", "Mob", "creeper")]),
            keyed(2, "obs-2", vec![node("cave", "Place", "dark cave")]),
            event(3, "NOTE", vec![]),
        ]
    };
    {
        let store = Store::create(dir, kind).unwrap();
        let first = store.ingest(batch()).unwrap();
        assert_eq!((first.events, first.skipped), (3, 0));
        // Events are indexed by kind: both keyed events are hits.
        assert_eq!(search_count(&store, "sighting"), 2);
        let hits = search_count(&store, "creeper");
        // The agent lost the acknowledgement and retries: only the unkeyed event is new.
        let retry = store.ingest(batch()).unwrap();
        assert_eq!((retry.events, retry.skipped), (1, 2));
        assert_eq!(search_count(&store, "creeper"), hits);
        assert_eq!(search_count(&store, "sighting"), 2);
        assert_eq!(store.stats().events, 4);
        assert_eq!(store.applied_key("obs-2").unwrap(), Some(2));
        assert_eq!(store.applied_key("obs-9").unwrap(), None);
        assert_eq!(
            store.event(2).unwrap().unwrap().idempotency_key.as_deref(),
            Some("obs-2")
        );
        assert_verified(&store);
    }
    // The keys survive a reopen; a batch mixing old and new keys applies only the new ones,
    // and a key repeated inside one batch with the same content counts once.
    let store = Store::open(dir).unwrap();
    let c = store
        .ingest(vec![
            keyed(2, "obs-2", vec![node("cave", "Place", "dark cave")]),
            keyed(5, "obs-3", vec![node("zombie", "Mob", "zombie")]),
            keyed(5, "obs-3", vec![node("zombie", "Mob", "zombie")]),
        ])
        .unwrap();
    assert_eq!((c.events, c.skipped, c.first_seq, c.last_seq), (1, 2, 5, 5));
    let all_skipped = store
        .ingest(vec![keyed(
            5,
            "obs-3",
            vec![node("zombie", "Mob", "zombie")],
        )])
        .unwrap();
    assert_eq!((all_skipped.events, all_skipped.skipped), (0, 1));
    assert_eq!(store.stats().events, 5);
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:#?}", report.differences);
    assert_eq!(report.idempotency_keys, 3);
}

fn reused_key_with_other_content_is_refused(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    store
        .ingest(vec![keyed(1, "k", vec![node("a", "Item", "apple")])])
        .unwrap();
    // Same key, other content: two distinct events were given one key; refusing beats
    // dropping one of them silently. The error names the caller's position (the second: the
    // first draft is new) and the field, and the batch writes nothing. Positions are said
    // counting from 1 and as the batch's, where "event 1" read as the log's event 1 (a
    // helper's probe).
    let err = store
        .ingest(vec![
            event(2, "NOTE", vec![]),
            keyed(1, "k", vec![node("a", "Item", "golden apple")]),
        ])
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("event 2 of the batch: idempotency_key:")
            && msg.contains("already used by the log's event 1"),
        "{msg}"
    );
    let err = store
        .ingest(vec![keyed(3, "n", vec![]), keyed(4, "n", vec![])])
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("event 2 of the batch: idempotency_key: key \"n\" is also given to event 1 of the batch"),
        "{err}"
    );
    // A projection error of a draft after a skipped one still names the caller's position.
    let err = store
        .ingest(vec![
            keyed(1, "k", vec![node("a", "Item", "apple")]),
            event(2, "NOTE", vec![edge("a", "R", "nowhere", 0.5)]),
        ])
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("event 2 of the batch, assertion 1:"),
        "{err}"
    );
    let err = store.ingest(vec![keyed(1, "", vec![])]).unwrap_err();
    assert!(err.to_string().contains("empty idempotency key"), "{err}");
    let long = "k".repeat(loci::model::MAX_KEY_BYTES + 1);
    let err = store.ingest(vec![keyed(1, &long, vec![])]).unwrap_err();
    assert!(
        err.to_string().contains("idempotency_key: 1025 bytes long"),
        "{err}"
    );
    assert_eq!(store.stats().events, 1);
    assert_verified(&store);
}

fn idempotency_keys_in_input_files(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    let events = "{\"ts\":1,\"kind\":\"DEATH\",\"idempotency_key\":\"run1/1\"}\n{\"ts\":2,\"kind\":\"RESPAWN\"}\n";
    let passages = "{\"id\":\"p1\",\"title\":\"Oakvale\",\"text\":\"a village\",\"idempotency_key\":\"p/1\"}\n";
    let triples = "{\"doc\":\"p1\",\"s\":\"Oakvale\",\"p\":\"has\",\"o\":\"smith\",\"idempotency_key\":\"t/1\"}\n{\"doc\":\"p1\",\"s\":\"Oakvale\",\"p\":\"near\",\"o\":\"river\",\"idempotency_key\":\"t/2\"}\n{\"doc\":\"p1\",\"s\":\"smith\",\"p\":\"sells\",\"o\":\"axe\"}\n";
    let read = |name: &str, text: &str, format| ingest::read_str(name, text, format).unwrap();
    // A keyed triple is an event of its own; the unkeyed ones of a passage share one.
    assert_eq!(read("t.jsonl", triples, Format::Triples).events.len(), 3);
    for (name, text, format, new) in [
        ("e.jsonl", events, Format::Events, 2),
        ("p.jsonl", passages, Format::Passages, 1),
        ("t.jsonl", triples, Format::Triples, 3),
    ] {
        let c = read(name, text, format).commit(&store).unwrap();
        assert_eq!((c.events, c.skipped), (new, 0), "{name}");
    }
    let events_before = store.stats().events;
    for (name, text, format, skipped) in [
        ("e.jsonl", events, Format::Events, 1),
        ("p.jsonl", passages, Format::Passages, 1),
        ("t.jsonl", triples, Format::Triples, 2),
    ] {
        let c = read(name, text, format).commit(&store).unwrap();
        assert_eq!(c.skipped, skipped, "{name}");
    }
    // The unkeyed event line and the unkeyed triple were applied again, nothing else.
    assert_eq!(store.stats().events, events_before + 2);
    let long = format!(
        "{{\"ts\":1,\"kind\":\"K\"}}\n{{\"ts\":1,\"kind\":\"K\",\"idempotency_key\":\"{}\"}}\n",
        "x".repeat(2000)
    );
    let err = read("long.jsonl", &long, Format::Events)
        .commit(&store)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("long.jsonl:2: idempotency_key: 2000 bytes long"),
        "{err}"
    );
    assert_verified(&store);
}

fn verify_detects_a_damaged_idempotency_table(kind: BackendKind, dir: &Path) {
    {
        let store = Store::create(dir, kind).unwrap();
        store
            .ingest(vec![keyed(1, "a", vec![]), keyed(2, "b", vec![])])
            .unwrap();
        assert_verified(&store);
    }
    {
        let backend = kind.open(dir).unwrap();
        let mut w = WriteBatch::default();
        w.delete(Table::Idempotency, b"a");
        w.put(Table::Idempotency, b"ghost", 7u64.to_be_bytes().to_vec());
        backend.commit(w).unwrap();
    }
    let store = Store::open(dir).unwrap();
    let report = store.verify().unwrap();
    let all = report.differences.join("\n");
    assert!(all.contains("key \"a\" of event 1 missing"), "{all}");
    assert!(
        all.contains("key \"ghost\" is stored, but no event carries it"),
        "{all}"
    );
}

/// A node is held as its encoded record (`store/node_table.rs`), not as a whole `Node`:
/// 184 bytes a slot and three allocations had made nodes the largest part of the state. The
/// record keeps everything: a node with aliases, properties and an anchor reads back whole,
/// through a reopen from the tables and from the snapshot.
fn a_node_is_held_as_its_record(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    let n = 2_000;
    let nodes: Vec<Assertion> = (0..n)
        .map(|i| {
            node(
                &format!("n{i:05}"),
                ["Place", "NPC"][i % 2],
                &format!("thing {i}"),
            )
        })
        .collect();
    store.ingest(vec![event(1, "SEEN", nodes)]).unwrap();
    let mut props = Props::new();
    props.insert("colour".into(), Value::from("red"));
    let full = Assertion::UpsertNode(NodeUpsert {
        key: " é🙂 home".into(),
        label: Some("Place".into()),
        name: Some("Home".into()),
        aliases: vec!["base".into(), "den".into()],
        props,
        salience: Some(0.75),
        pinned: Some(true),
        ..Default::default()
    });
    store.ingest(vec![event(2, "SEEN", vec![full])]).unwrap();
    let home = store.node_by_key(" é🙂 home").unwrap();
    assert_eq!((home.label.as_str(), home.name.as_str()), ("Place", "Home"));
    assert_eq!(home.aliases, ["base", "den"]);
    assert_eq!(home.props.get("colour"), Some(&Value::from("red")));
    assert!(home.pinned && home.salience == 0.75 && home.created == 2);

    let per_node = store.stats().state_bytes.nodes as f64 / (n + 1) as f64;
    // A 16-byte slot and a record of about 25 bytes (key, name, label id, times).
    assert!(per_node < 60.0, "{per_node:.0} bytes a node");
    let all: Vec<_> = store.graph().nodes().collect();
    store.checkpoint().unwrap().unwrap();
    drop(store);
    // From the snapshot, then replayed from the log.
    for remove_snapshot in [false, true] {
        if remove_snapshot {
            std::fs::remove_file(dir.join("state.snapshot")).unwrap();
        }
        let store = Store::open(dir).unwrap();
        let replayed = store.state_source() == loci::StateSource::Log;
        assert_eq!(replayed, remove_snapshot);
        assert_eq!(store.graph().nodes().collect::<Vec<_>>(), all);
        assert_eq!(store.node_by_key(" é🙂 home"), Some(home.clone()));
        assert_verified(&store);
    }
}

macro_rules! store_suite {
    ($module:ident, $kind:expr, [$($test:ident),* $(,)?]) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    let dir = tempfile::tempdir().unwrap();
                    super::$test($kind, &dir.path().join("store"));
                }
            )*
        }
    };
}

macro_rules! all_backends {
    ($($test:ident),* $(,)?) => {
        store_suite!(redb, loci::BackendKind::Redb, [$($test),*]);
        store_suite!(sled, loci::BackendKind::Sled, [$($test),*]);
    };
}

all_backends!(
    a_node_is_held_as_its_record,
    projection_rules,
    failed_batch_changes_nothing,
    retraction_and_stable_ids,
    reopen_restores_everything,
    search_filters,
    search_finds_names_without_words,
    search_keeps_to_what_the_readers_graph_holds,
    search_beside_a_deletion_never_names_another_node,
    a_search_during_a_deletion_finds_each_node_it_keeps_and_no_other,
    text_index_catches_up_and_rebuilds,
    verify_detects_tampering,
    a_logged_event_replay_refuses_is_named_by_its_seq,
    readers_never_see_half_a_batch,
    dataset_ingest_resolves_entities,
    graph_format_errors_name_lines,
    retried_batches_apply_once,
    reused_key_with_other_content_is_refused,
    idempotency_keys_in_input_files,
    verify_detects_a_damaged_idempotency_table,
    search_ties_break_by_target,
    edge_details_follow_retractions_through_snapshots_and_replay,
    a_store_of_an_older_format_is_replayed_and_its_tables_retired,
    a_growing_store_takes_each_snapshot_as_its_base,
);

/// Each node's adjacency entries, as (edge, other end, incoming, confidence bits), in list
/// order.
fn lists(store: &Store) -> Vec<Vec<(u32, u32, bool, u32)>> {
    let g = store.graph();
    let adj = g.adjacency();
    (0..adj.node_bound() as u32)
        .map(|n| {
            adj.entries(NodeId(n))
                .map(|e| (e.edge, e.node, e.is_incoming(), e.confidence.to_bits()))
                .collect()
        })
        .collect()
}

/// A store that grows writes a snapshot each time it has tripled since the last, and reads
/// its graph from it, so that its heap holds only what came since. A bulk load had written
/// none after its first, and held its whole graph on the heap until it closed. The graph
/// reads the same live, reopened from the snapshot and replayed from the log.
fn a_growing_store_takes_each_snapshot_as_its_base(kind: BackendKind, dir: &Path) {
    const NODES: usize = 10_000;
    const BATCHES: usize = 24;
    let store = Store::create(dir, kind).unwrap();
    let places = (0..NODES)
        .map(|i| node(&format!("n{i}"), "Place", &format!("place {i}")))
        .collect();
    store.ingest(vec![event(1, "IMPORT", places)]).unwrap();
    let mut snapshots = Vec::new();
    for b in 0..BATCHES {
        // Each batch gives every node one more edge out, to a node it has no edge to yet.
        let edges = (0..NODES)
            .map(|i| {
                let to = (i + 1 + b) % NODES;
                let conf = 0.5 + ((i + b) % 5) as f32 / 10.0;
                edge(&format!("n{i}"), "LINKS", &format!("n{to}"), conf)
            })
            .collect();
        store
            .ingest(vec![event(2 + b as i64, "IMPORT", edges)])
            .unwrap();
        snapshots.push(store.stats().disk_bytes_snapshot);
    }
    let stats = store.stats();
    assert_eq!(stats.edges, NODES * BATCHES);
    snapshots.dedup();
    // None before 65,536 changes; then at 70,000 nodes and edges, and at 210,000 (twice as
    // many changes again).
    assert_eq!(
        snapshots.len(),
        3,
        "snapshot sizes as it grew: {snapshots:?}"
    );
    // The last four batches' entries on the heap, not those of all of them.
    let all_entries = NODES * BATCHES * 2 * 16;
    assert!(
        stats.state_bytes.adjacency < all_entries / 3,
        "{} bytes of adjacency on the heap",
        stats.state_bytes.adjacency
    );
    let (rows, live_lists) = (edge_rows(&store), lists(&store));
    assert_eq!(live_lists[0].len(), 2 * BATCHES);
    assert_verified(&store);
    drop(store);
    for replayed in [false, true] {
        if replayed {
            std::fs::remove_file(dir.join("state.snapshot")).unwrap();
        }
        let store = Store::open(dir).unwrap();
        assert_eq!(edge_rows(&store), rows, "replayed: {replayed}");
        assert_eq!(lists(&store), live_lists, "replayed: {replayed}");
    }
}

fn retract_edge(from: &str, rel: &str, to: &str) -> Assertion {
    Assertion::RetractEdge {
        from: from.into(),
        relation: rel.into(),
        to: to.into(),
    }
}

/// Nodes n0 to n`len` and the edges `n(i) -NEXT-> n(i+1)`, ids 0 to `len - 1`.
fn chain(len: usize) -> Vec<Assertion> {
    let mut a: Vec<Assertion> = (0..=len)
        .map(|i| node(&format!("n{i}"), "Place", &format!("stop {i}")))
        .collect();
    a.extend((0..len).map(|i| edge(&format!("n{i}"), "NEXT", &format!("n{}", i + 1), 0.5)));
    a
}

/// Every edge's full record, by id.
fn full_edges(store: &Store) -> Vec<loci::Edge> {
    let ids: Vec<EdgeId> = store.graph().edges().map(|(id, _)| id).collect();
    ids.into_iter()
        .map(|id| store.edge(id).unwrap().unwrap())
        .collect()
}

/// An edge's details (properties, evidence, recorded time) are kept in rows of 16 edges: a
/// row emptied by retractions, an edge made and retracted in one batch, and an edge changed
/// in a row of others all read back the same live, from a snapshot, and replayed from the
/// log.
fn edge_details_follow_retractions_through_snapshots_and_replay(kind: BackendKind, dir: &Path) {
    let want = {
        let store = Store::create(dir, kind).unwrap();
        store.ingest(vec![event(1, "SCAN", chain(20))]).unwrap();
        store
            .ingest(vec![event(
                2,
                "SCAN",
                (16..20)
                    .map(|i| retract_edge(&format!("n{i}"), "NEXT", &format!("n{}", i + 1)))
                    .collect(),
            )])
            .unwrap();
        assert_verified(&store);
        // Edge 20 is new, in the row of 16 to 31, which is empty now.
        let mut context = Props::new();
        context.insert("context".into(), Value::from("over the bridge é🙂"));
        store
            .ingest(vec![event(
                3,
                "SCAN",
                vec![
                    edge("n0", "JUMP", "n9", 0.4),
                    retract_edge("n0", "JUMP", "n9"),
                    Assertion::UpsertEdge(EdgeUpsert {
                        from: "n1".into(),
                        relation: "NEXT".into(),
                        to: "n2".into(),
                        confidence: Some(0.8),
                        props: context.clone(),
                        ..Default::default()
                    }),
                ],
            )])
            .unwrap();
        let e1 = store.edge(EdgeId(1)).unwrap().unwrap();
        assert_eq!((e1.confidence, e1.evidence.as_slice()), (0.8, &[1, 3][..]));
        assert_eq!(e1.props, context);
        assert_eq!(store.edge(EdgeId(0)).unwrap().unwrap().evidence, [1]);
        assert!(store.edge(EdgeId(20)).unwrap().is_none());
        assert!(store.edge(EdgeId(17)).unwrap().is_none());
        assert_verified(&store);
        store.checkpoint().unwrap();
        full_edges(&store)
    };
    assert_eq!(want.len(), 16);
    for remove_snapshot in [false, true] {
        if remove_snapshot {
            std::fs::remove_file(dir.join("state.snapshot")).unwrap();
        }
        let store = Store::open(dir).unwrap();
        assert_eq!(
            store.state_source() == loci::StateSource::Log,
            remove_snapshot
        );
        assert_eq!(full_edges(&store), want);
        assert_verified(&store);
    }
}

/// The keys of a table.
fn table_keys(kind: BackendKind, dir: &Path, table: Table) -> Vec<Vec<u8>> {
    let backend = kind.open(dir).unwrap();
    let mut keys = Vec::new();
    backend
        .scan(table, &[], None, &mut |k, _| {
            keys.push(k.to_vec());
            Ok(true)
        })
        .unwrap();
    keys
}

/// A store of an older format (nodes and edges tables, a change record per commit) opens
/// read-only as it is, its state replayed from its log, leaving its files alone; its first
/// writable open marks it with this build's format (4) in the meta table and the manifest (so
/// that an older build refuses it from then on) and empties what only older builds read. A
/// store of format 3 (no such tables) is read from its snapshot, and marked alike.
fn a_store_of_an_older_format_is_replayed_and_its_tables_retired(kind: BackendKind, dir: &Path) {
    let manifest_format = || -> u64 {
        let raw = std::fs::read(dir.join("loci.json")).unwrap();
        serde_json::from_slice::<serde_json::Value>(&raw).unwrap()["format"]
            .as_u64()
            .unwrap()
    };
    let meta_format = || -> u32 {
        let backend = kind.open(dir).unwrap();
        let v = backend.get(Table::Meta, b"format").unwrap().unwrap();
        loci::codec::decode("meta", &v).unwrap()
    };
    let want = {
        let store = Store::create(dir, kind).unwrap();
        village(&store);
        store.checkpoint().unwrap();
        full_edges(&store)
    };
    assert_eq!((manifest_format(), meta_format()), (4, 4));
    // Format 3 differs only in how its log compresses a record: its snapshot is read.
    {
        let backend = kind.open(dir).unwrap();
        let mut w = WriteBatch::default();
        w.put(Table::Meta, b"format", loci::codec::encode(&3u32));
        backend.commit(w).unwrap();
    }
    let raw = std::fs::read(dir.join("loci.json")).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    manifest["format"] = 3.into();
    std::fs::write(
        dir.join("loci.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    {
        let store = Store::open_read_only(dir).unwrap();
        assert!(
            matches!(store.state_source(), loci::StateSource::Snapshot { .. }),
            "{:?}",
            store.state_source()
        );
        assert_eq!(full_edges(&store), want);
    }
    assert_eq!((manifest_format(), meta_format()), (3, 3));
    {
        let store = Store::open(dir).unwrap();
        assert_eq!(full_edges(&store), want);
        assert_verified(&store);
    }
    assert_eq!((manifest_format(), meta_format()), (4, 4));
    for old in [2u32, 1] {
        // What an older build left: its format's markers, records in the tables it kept
        // (their content is never read now), and change records; no snapshot, which no
        // build before format 3 made.
        let _ = std::fs::remove_file(dir.join("state.snapshot"));
        {
            let backend = kind.open(dir).unwrap();
            let mut w = WriteBatch::default();
            w.put(Table::Meta, b"format", loci::codec::encode(&old));
            w.put(Table::Meta, b"changed/\0\0\0\0\0\0\0\x02", vec![3, 0]);
            for id in 0u32..3 {
                w.put(Table::Nodes, id.to_be_bytes(), vec![3, 1, 2]);
            }
            w.put(Table::Edges, 0u32.to_be_bytes(), vec![0x80, 0]);
            backend.commit(w).unwrap();
        }
        let raw = std::fs::read(dir.join("loci.json")).unwrap();
        let mut manifest: serde_json::Value = serde_json::from_slice(&raw).unwrap();
        manifest["format"] = old.into();
        std::fs::write(
            dir.join("loci.json"),
            serde_json::to_vec(&manifest).unwrap(),
        )
        .unwrap();
        {
            let store = Store::open_read_only(dir).unwrap();
            assert_eq!(store.state_source(), loci::StateSource::Log);
            assert_eq!(full_edges(&store), want);
        }
        assert_eq!((manifest_format(), meta_format()), (old as u64, old));
        assert_eq!(table_keys(kind, dir, Table::Nodes).len(), 3);
        {
            let store = Store::open(dir).unwrap();
            assert_eq!(full_edges(&store), want);
            assert_verified(&store);
        }
        assert_eq!((manifest_format(), meta_format()), (4, 4));
        for table in [Table::Nodes, Table::Edges] {
            assert_eq!(table_keys(kind, dir, table), Vec::<Vec<u8>>::new());
        }
        let meta = table_keys(kind, dir, Table::Meta);
        assert!(!meta.iter().any(|k| k.starts_with(b"changed/")), "{meta:?}");
    }
    // A format this build does not know is refused, naming it.
    let raw = std::fs::read(dir.join("loci.json")).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    manifest["format"] = 5.into();
    std::fs::write(
        dir.join("loci.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let err = Store::open(dir).err().expect("format 5 opened").to_string();
    assert!(err.contains("store format 5"), "{err}");
}

/// Equal BM25 scores are cut and ordered by target, not by where the index happens to keep the
/// documents (segment order, which merges and updates change): a rebuilt index answers alike.
fn search_ties_break_by_target(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    let batch: Vec<EventDraft> = (0..30)
        .map(|i| {
            event(
                i,
                "SEEN",
                vec![node(&format!("n{i:02}"), "Item", "copper widget")],
            )
        })
        .collect();
    store.ingest(batch).unwrap();
    // Updating n00 moves its document to the end of the index.
    store
        .ingest(vec![event(
            40,
            "SEEN",
            vec![node("n00", "Item", "copper widget")],
        )])
        .unwrap();
    let hits = store
        .search("widget", &SearchFilter::default().with_nodes_only(true), 5)
        .unwrap();
    let keys: Vec<String> = hits
        .iter()
        .map(|h| match h.target {
            Target::Node(id) => store.node(id).unwrap().key,
            Target::Event(_) => unreachable!(),
        })
        .collect();
    assert!(hits.windows(2).all(|w| w[0].score == w[1].score), "all tie");
    assert_eq!(keys, ["n00", "n01", "n02", "n03", "n04"]);
    // The exact-name lookup that anchors planner queries cuts its ties the same way.
    let named: Vec<String> = store
        .text_index()
        .lookup_name("Copper Widget", 3, &|id, form| {
            loci::text::bears_name_form(&store.node(id).unwrap(), form)
        })
        .unwrap()
        .into_iter()
        .map(|id| store.node(id).unwrap().key)
        .collect();
    assert_eq!(named, ["n00", "n01", "n02"]);
}

/// `analyze` gives each distinct term once, in first-seen order, and scales to an event with a
/// hundred thousand distinct words (it compared every word with every earlier one before).
#[test]
fn analysed_terms_are_distinct_in_first_seen_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s"), BackendKind::Redb).unwrap();
    let terms = store
        .text_index()
        .analyze("Creepers blew up; the creeper BLEW the wall")
        .unwrap();
    let again: std::collections::HashSet<&String> = terms.iter().collect();
    assert_eq!(again.len(), terms.len(), "{terms:?}");
    assert_eq!(
        terms.first().map(String::as_str),
        Some("creeper"),
        "{terms:?}"
    );
    let many: String = (0..100_000).map(|i| format!("w{i} ")).collect();
    assert_eq!(store.text_index().analyze(&many).unwrap().len(), 100_000);
}

/// A batch looks up the edges it made itself by their identity without copying the relation
/// (`projection::EdgeKeyRef`): asserting the same edge again in the same batch, in the same
/// event or a later one, must re-confirm that edge, not make a second one.
#[test]
fn an_edge_asserted_again_in_its_own_batch_is_one_edge() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    store
        .ingest(vec![
            event(
                10,
                "DISCOVERY",
                vec![
                    node("smith", "NPC", "toolsmith"),
                    node("emerald", "Item", "emerald"),
                    edge("smith", "OFFERS", "emerald", 0.5),
                    edge("smith", "OFFERS", "emerald", 0.6),
                    edge("smith", "SELLS", "emerald", 0.4),
                ],
            ),
            event(20, "TRADE", vec![edge("smith", "OFFERS", "emerald", 0.9)]),
        ])
        .unwrap();
    let rows = edge_rows(&store);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let offers = store
        .edge_between("smith", "OFFERS", "emerald")
        .unwrap()
        .expect("the edge");
    assert_eq!(offers.confidence, 0.9);
    assert_eq!(offers.evidence.len(), 2, "{offers:?}");
    assert_verified(&store);
}

/// A node's first batch adds its document without deleting first (nothing can be there); a
/// later batch that changes the node replaces its document. Either way one document a node.
#[test]
fn a_node_has_one_document_whether_it_is_new_or_changed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    store
        .ingest(vec![event(
            1,
            "SEEN",
            vec![node("a", "Place", "quartz cave")],
        )])
        .unwrap();
    store
        .ingest(vec![event(
            2,
            "SEEN",
            vec![
                node("a", "Place", "quartz cavern"),
                node("b", "Place", "quartz ridge"),
            ],
        )])
        .unwrap();
    let nodes = SearchFilter::default().with_nodes_only(true);
    let hits = store.search("quartz", &nodes, 10).unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_ne!(hits[0].target, hits[1].target, "{hits:?}");
    // The first name's document is gone.
    assert!(store.search("cave", &nodes, 10).unwrap().is_empty());
    assert_verified(&store);
}

/// Retractions in a batch find the batch's own edges through an index of them by node, built
/// at the first retraction and kept up after it: an edge added after that index was built, to
/// a node retracted later in the batch, goes with the node.
#[test]
fn retracting_nodes_in_a_batch_removes_the_batchs_edges_made_before_and_after() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let retract = |key: &str| Assertion::RetractNode {
        key: key.to_string(),
    };
    store
        .ingest(vec![event(
            10,
            "SCAN",
            vec![
                node("a", "Place", "a"),
                node("b", "Place", "b"),
                node("c", "Place", "c"),
                node("d", "Place", "d"),
                edge("a", "PATH", "b", 0.9),
                edge("c", "PATH", "d", 0.9),
                retract("a"),
                edge("c", "PATH", "b", 0.8),
                edge("d", "PATH", "c", 0.7),
                retract("b"),
            ],
        )])
        .unwrap();
    let rows = edge_rows(&store);
    assert_eq!(rows.len(), 2, "only c-d and d-c are left: {rows:?}");
    assert!(store.edge_between("c", "PATH", "b").unwrap().is_none());
    assert!(store.edge_between("c", "PATH", "d").unwrap().is_some());
    assert_verified(&store);
}

/// The store directory's size is counted without following links: a link back to the
/// directory inside it had sent the count round the loop until the stack overflowed (an
/// abort). What the disk holds is reported as allocated blocks beside the files' lengths.
#[cfg(unix)]
#[test]
fn the_disk_count_follows_no_link_and_reports_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    store
        .ingest(vec![event(10, "SCAN", vec![node("a", "Place", "a")])])
        .unwrap();
    std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
    let stats = store.stats();
    assert!(stats.disk_bytes_backend > 0);
    assert!(stats.disk_bytes_allocated > 0);
    assert!(store.disk_bytes() >= stats.disk_bytes_backend);
}

/// The files of a directory and their lengths, sorted by path.
fn listing(dir: &Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(listing(&path));
        } else if let Ok(meta) = std::fs::metadata(&path) {
            out.push((path, meta.len()));
        }
    }
    out.sort();
    out
}

/// The segments a text index's `meta.json` lists, as the hex digits of their ids.
fn listed_segments(text: &Path) -> Vec<String> {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(text.join("meta.json")).unwrap()).unwrap();
    meta["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["segment_id"].as_str().unwrap().replace('-', ""))
        .collect()
}

/// A closed store is quiet: nothing of it still writes or removes files, so the directory can
/// be copied or opened again at once, and its text index holds no segment it does not list.
/// tantivy's writer, dropped, does not wait for the merges it started: they went on writing
/// segments nobody listed and removing merged ones after the close (a copy made right after a
/// close found a file gone).
#[test]
fn a_closed_store_changes_no_file_after_the_close() {
    // A merge starts when a level holds 8 segments and each commit adds one: some of these
    // closes come right after the commit that starts one.
    for commits in 7..=17i64 {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
            for b in 0..commits {
                let nodes = (0..50)
                    .map(|i| node(&format!("n{b}_{i}"), "Place", &format!("place {b} {i}")))
                    .collect();
                store.ingest(vec![event(b, "SCAN", nodes)]).unwrap();
            }
        }
        let closed = listing(dir.path());
        let listed = listed_segments(&dir.path().join("text"));
        for (path, _) in &closed {
            let name = path.file_name().unwrap().to_string_lossy();
            let stem = name.split('.').next().unwrap();
            if stem.len() == 32 && stem.bytes().all(|b| b.is_ascii_hexdigit()) {
                assert!(
                    listed.iter().any(|s| s == stem),
                    "after {commits} commits: {name} belongs to no segment the index lists"
                );
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(
            closed,
            listing(dir.path()),
            "after {commits} commits: files changed after the close"
        );
    }
}

/// A bulk load's log records (a thousand edges an event, 10 to 19 kB compressed) are kept in
/// chunks that fill redb's pages: whole, each took a run of pages rounded up to a power of
/// two, and the log's overhead was 63% of its records at 1M edges.
#[test]
fn a_bulk_loads_log_takes_little_more_than_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s"), BackendKind::Redb).unwrap();
    let nodes: Vec<Assertion> = (0..5_000)
        .map(|i| node(&format!("n{i}"), "Place", &format!("stop {i}")))
        .collect();
    store.ingest(vec![event(1, "SCAN", nodes)]).unwrap();
    let mut rng = 7u64;
    let mut next = |n: u64| {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) % n
    };
    let events: Vec<EventDraft> = (0..40)
        .map(|e| {
            let edges = (0..1024)
                .map(|_| {
                    let (a, b) = (next(5_000), next(5_000));
                    edge(
                        &format!("n{a}"),
                        &format!("R{}", next(8)),
                        &format!("n{b}"),
                        0.5,
                    )
                })
                .collect();
            event(2 + e, "IMPORT", edges)
        })
        .collect();
    store.ingest(events).unwrap();
    let tables = store.disk_bytes_by_table().unwrap();
    let log = tables.iter().find(|(t, _)| *t == "log").unwrap().1;
    let overhead = log.overhead.unwrap() as f64 / log.entries as f64;
    assert!(log.entries > 200_000, "{log:?}");
    assert!(
        overhead < 0.15,
        "{log:?}: {:.0}% overhead",
        overhead * 100.0
    );
    assert_verified(&store);
}

/// A node's edges, read from its adjacency list (what the server's `/v1/nodes/{key}` gives):
/// every live edge from or to it, once each (a self loop sits twice in its list), in id
/// order, as a scan of every edge of the graph finds them. The server scanned every edge per
/// request, which at 100M edges is seconds.
#[test]
fn a_nodes_edges_are_read_from_its_list_once_each_in_id_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s"), BackendKind::Redb).unwrap();
    village(&store);
    store
        .ingest(vec![event(
            30,
            "SEEN",
            vec![
                node("well", "Place", "the old well"),
                edge("smith", "SELF", "smith", 0.5),
                edge("village", "HAS", "smith", 0.9),
                edge("well", "LOCATED_IN", "village", 1.0),
                edge("smith", "NEAR", "well", 0.4),
            ],
        )])
        .unwrap();
    store
        .ingest(vec![event(
            40,
            "MOVED",
            vec![Assertion::RetractEdge {
                from: "smith".into(),
                relation: "NEAR".into(),
                to: "well".into(),
            }],
        )])
        .unwrap();
    let g = store.graph();
    let mut seen = 0;
    for n in g.nodes() {
        let scanned: Vec<EdgeId> = g
            .edges()
            .filter(|(_, e)| e.from == n.id || e.to == n.id)
            .map(|(id, _)| id)
            .collect();
        assert_eq!(g.edges_of(n.id).collect::<Vec<_>>(), scanned, "{}", n.key);
        seen += scanned.len();
    }
    // The smith: LOCATED_IN, OFFERS, SELF, HAS (NEAR was retracted).
    let smith = store.node_by_key("smith").unwrap().id;
    assert_eq!(g.edges_of(smith).count(), 4);
    assert!(seen > 0);
}

/// World times past ±2^61 are refused with the event and field: an event at `i64::MAX` had
/// been taken, and as the store's "now" it aged every fact to nothing (a planner's trade
/// query then found none). The range's own ends are taken, and the store reads on.
#[test]
fn an_event_past_the_range_of_world_times_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    for ts in [i64::MAX, i64::MIN, (1 << 61) + 1, -(1 << 61) - 1] {
        let e = store
            .ingest(vec![event(1, "NOTE", vec![]), event(ts, "NOTE", vec![])])
            .unwrap_err();
        assert!(
            matches!(&e, loci::Error::InvalidEvent { event: 1, field, .. } if field == "ts"),
            "{ts}: {e:?}"
        );
    }
    assert_eq!(store.stats().events, 0, "a refused batch writes nothing");
    let ends = vec![
        event(-(1 << 61), "NOTE", vec![node("a", "Item", "alpha")]),
        event(1 << 61, "NOTE", vec![node("b", "Item", "beta")]),
    ];
    store.ingest(ends).unwrap();
    assert_eq!(store.stats().events, 2);
    assert!(store.verify().unwrap().ok());
}
