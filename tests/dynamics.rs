//! Memory dynamics: confidence that decays with world time unless re-seen, computed on read.

use std::collections::HashMap;
use std::path::Path;

use loci::dynamics::decay::DAY;
use loci::dynamics::DecayPolicy;
use loci::model::{Assertion, EdgeUpsert, EventDraft, NodeUpsert};
use loci::retrieval::{RetrieveOptions, Retriever, SnippetKind};
use loci::{BackendKind, ExpandOptions, Store};

const WEEK: i64 = 7 * DAY as i64;

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

fn event(ts: i64, assertions: Vec<Assertion>) -> EventDraft {
    let mut e = EventDraft::new(ts, "bot", "OBSERVATION");
    e.assertions = assertions;
    e
}

/// A fletcher who offered emeralds a week before the latest event, and a home that does not
/// decay.
fn village(dir: &Path) -> Store {
    let store = Store::create(dir, BackendKind::Redb).unwrap();
    store
        .ingest(vec![event(
            0,
            vec![
                node("bot", "Bot", "Steve-bot"),
                node("fletcher", "NPC", "fletcher villager"),
                node("emerald", "Item", "emerald"),
                node("base", "Place", "first base"),
                edge("fletcher", "OFFERS", "emerald", 0.8),
                edge("bot", "HOME", "base", 0.9),
            ],
        )])
        .unwrap();
    store.ingest(vec![event(WEEK, vec![])]).unwrap();
    store
}

fn neighbor_conf(store: &Store, key: &str, opts: &ExpandOptions) -> HashMap<String, (f32, f32)> {
    let id = store.node_by_key(key).unwrap().id;
    store
        .neighbors(id, 1, opts)
        .into_iter()
        .map(|n| (n.relation, (n.confidence, n.stored_confidence)))
        .collect()
}

#[test]
fn confidence_halves_per_half_life_unless_the_relation_lasts() {
    let dir = tempfile::tempdir().unwrap();
    let store = village(&dir.path().join("s"));
    let seen = neighbor_conf(&store, "fletcher", &ExpandOptions::default());
    let (effective, stored) = seen["OFFERS"];
    assert!((effective - 0.4).abs() < 1e-4, "{effective}");
    assert_eq!(stored, 0.8);
    let home = neighbor_conf(&store, "bot", &ExpandOptions::default())["HOME"];
    assert_eq!(home, (0.9, 0.9), "HOME never decays");
    // The filter judges the decayed value; raw confidence and an earlier `now` do not decay.
    let strict = ExpandOptions::default().with_min_confidence(0.5);
    assert!(!neighbor_conf(&store, "fletcher", &strict).contains_key("OFFERS"));
    assert!(neighbor_conf(
        &store,
        "fletcher",
        &strict.clone().with_raw_confidence(true)
    )
    .contains_key("OFFERS"));
    let then = neighbor_conf(&store, "fletcher", &strict.with_now(0));
    assert_eq!(then["OFFERS"], (0.8, 0.8));
}

#[test]
fn an_event_that_sees_the_edge_again_restores_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = village(&dir.path().join("s"));
    let before = store.stats();
    // Reads write nothing.
    for _ in 0..3 {
        neighbor_conf(&store, "fletcher", &ExpandOptions::default());
    }
    assert_eq!(store.stats().events, before.events);
    store
        .ingest(vec![event(
            WEEK,
            vec![edge("fletcher", "OFFERS", "emerald", 0.8)],
        )])
        .unwrap();
    let (effective, _) = neighbor_conf(&store, "fletcher", &ExpandOptions::default())["OFFERS"];
    assert_eq!(effective, 0.8);
    assert!(store.verify().unwrap().ok());
}

#[test]
fn queries_read_decayed_and_stored_confidence() {
    let dir = tempfile::tempdir().unwrap();
    let store = village(&dir.path().join("s"));
    let r = loci::query::run(
        &store,
        "MATCH (v)-[o:OFFERS]->(i) RETURN confidence(o) AS now, o.confidence AS stored",
        &HashMap::new(),
    )
    .unwrap();
    let row = &r.rows[0];
    assert!((row[0].as_f64().unwrap() - 0.4).abs() < 1e-4, "{row:?}");
    assert_eq!(row[1].as_f64().unwrap(), 0.8);
}

#[test]
fn retrieval_filters_and_ranks_by_decayed_confidence() {
    let dir = tempfile::tempdir().unwrap();
    let store = village(&dir.path().join("s"));
    let r = Retriever::new(&store).unwrap();
    let facts = |opts: RetrieveOptions| {
        r.retrieve(
            "fletcher emerald",
            &opts.with_kinds([SnippetKind::Fact]).with_k(5),
        )
        .unwrap()
        .snippets
    };
    let strict = RetrieveOptions::default().with_min_confidence(0.5);
    assert!(
        !facts(strict.clone())
            .iter()
            .any(|s| s.text.contains("OFFERS")),
        "the week-old offer is below 0.5 now"
    );
    let raw = facts(strict.clone().with_raw_confidence(true));
    let offer = raw.iter().find(|s| s.text.contains("OFFERS")).unwrap();
    assert_eq!(offer.parts.confidence, 0.8);
    let loose = facts(RetrieveOptions::default());
    let offer = loose.iter().find(|s| s.text.contains("OFFERS")).unwrap();
    assert!((offer.parts.confidence - 0.4).abs() < 1e-4);
    assert!(
        offer.text.contains("(confidence 0.40, 0.80 when last seen"),
        "{}",
        offer.text
    );
    let then = facts(strict.with_as_of(0));
    assert!(then.iter().any(|s| s.text.contains("OFFERS")));
}

#[test]
fn a_store_keeps_its_decay_policy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    {
        let store = village(&path);
        store
            .set_decay_policy(DecayPolicy::default().with_half_life("OFFERS", None))
            .unwrap();
        let bad = DecayPolicy::default().with_half_life("OFFERS", Some(0.0));
        assert!(store.set_decay_policy(bad).is_err());
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.decay_policy().half_life("OFFERS"), None);
    let (effective, _) = neighbor_conf(&store, "fletcher", &ExpandOptions::default())["OFFERS"];
    assert_eq!(effective, 0.8);
    // A damaged policy file is an error naming it, not a silent default.
    std::fs::write(path.join("decay.json"), "{").unwrap();
    drop(store);
    let err = Store::open(&path).err().unwrap().to_string();
    assert!(err.contains("decay.json"), "{err}");
}

#[test]
fn events_are_scored_and_nodes_and_edges_take_their_most_salient_event() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s"), BackendKind::Redb).unwrap();
    let mut walk = event(1, vec![node("field", "Place", "wheat field")]);
    walk.kind = "MOVE".into();
    let mut again = event(2, vec![node("field", "Place", "wheat field")]);
    again.kind = "MOVE".into();
    let mut death = EventDraft::new(3, "bot", "DEATH");
    death.payload = loci::Value::from("fell into lava");
    let mut trade = event(
        4,
        vec![
            node("smith", "NPC", "toolsmith"),
            node("iron", "Item", "iron ingot"),
            edge("smith", "OFFERS", "iron", 0.9),
        ],
    );
    trade.kind = "TRADE".into();
    let mut pinned_low = event(5, vec![]);
    pinned_low.salience = Some(0.05);
    death.assertions = vec![Assertion::UpsertEdge(EdgeUpsert {
        from: "field".into(),
        relation: "DIED_AT".into(),
        to: "field".into(),
        ..Default::default()
    })];
    store
        .ingest(vec![walk, again, death, trade, pinned_low])
        .unwrap();
    let s = |seq| store.event(seq).unwrap().unwrap().salience;
    // A first sighting is novel; the same sighting again is routine.
    assert!(s(1) > s(2), "{} {}", s(1), s(2));
    assert!(s(3) > 0.9, "death: {}", s(3));
    assert!(s(4) > s(2), "trade with first sightings: {}", s(4));
    assert_eq!(s(5), 0.05, "an explicit salience is kept");
    let field = store.node_by_key("field").unwrap();
    assert_eq!(field.salience, s(1).max(s(2)));
    let offer = store
        .edge_between("smith", "OFFERS", "iron")
        .unwrap()
        .unwrap();
    assert_eq!(offer.salience, s(4));
    // Salience is a fact's score part in retrieval.
    let r = Retriever::new(&store).unwrap();
    let pack = r
        .retrieve(
            "toolsmith iron",
            &RetrieveOptions::default().with_kinds([SnippetKind::Fact]),
        )
        .unwrap();
    let fact = pack
        .snippets
        .iter()
        .find(|x| x.text.contains("OFFERS"))
        .unwrap();
    assert_eq!(fact.parts.salience, s(4));
    assert!(store.verify().unwrap().ok());
}

#[test]
fn a_store_derived_by_older_rules_is_rebuilt_from_its_log_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let (node_salience, edge_salience) = {
        let store = village(&path);
        store.checkpoint().unwrap();
        let n = store.node_by_key("fletcher").unwrap().salience;
        let e = store
            .edge_between("fletcher", "OFFERS", "emerald")
            .unwrap()
            .unwrap()
            .salience;
        (n, e)
    };
    {
        // What a build before salience left: no projection version in the meta table, and a
        // snapshot of the state its rules derived.
        let backend = BackendKind::Redb.open(&path).unwrap();
        let mut w = loci::storage::WriteBatch::default();
        w.delete(loci::storage::Table::Meta, b"projection");
        backend.commit(w).unwrap();
        let snapshot = path.join("state.snapshot");
        let mut bytes = std::fs::read(&snapshot).unwrap();
        bytes[16..20].copy_from_slice(&1u32.to_le_bytes());
        std::fs::write(&snapshot, bytes).unwrap();
    }
    assert_ne!(
        node_salience, 0.5,
        "the test must change what the rebuild restores"
    );
    let store = Store::open(&path).unwrap();
    // The snapshot of the older rules is not used: the state is this build's replay.
    assert_eq!(store.state_source(), loci::StateSource::Log);
    assert_eq!(
        store.node_by_key("fletcher").unwrap().salience,
        node_salience
    );
    assert_eq!(
        store
            .edge_between("fletcher", "OFFERS", "emerald")
            .unwrap()
            .unwrap()
            .salience,
        edge_salience
    );
    assert!(store.verify().unwrap().ok());
    drop(store);
    // The rules' version is recorded.
    let backend = BackendKind::Redb.open(&path).unwrap();
    let v = backend
        .get(loci::storage::Table::Meta, b"projection")
        .unwrap()
        .unwrap();
    assert_eq!(
        loci::codec::decode::<u32>("meta", &v).unwrap(),
        loci::store::PROJECTION_VERSION
    );
}

#[test]
fn neighbors_follow_only_facts_valid_at_their_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s"), BackendKind::Redb).unwrap();
    let bounded = |to: &str, from_t: Option<i64>, to_t: Option<i64>| {
        Assertion::UpsertEdge(EdgeUpsert {
            from: "bot".into(),
            relation: "HOME".into(),
            to: to.into(),
            valid_from: from_t,
            valid_to: to_t,
            ..Default::default()
        })
    };
    store
        .ingest(vec![event(
            200,
            vec![
                node("bot", "Bot", "Steve-bot"),
                node("old", "Place", "first base"),
                node("new", "Place", "second base"),
                node("later", "Place", "planned base"),
                bounded("old", None, Some(100)),
                bounded("new", Some(100), None),
                bounded("later", Some(500), None),
            ],
        )])
        .unwrap();
    let homes = |opts: &ExpandOptions| -> Vec<String> {
        let id = store.node_by_key("bot").unwrap().id;
        let mut v: Vec<String> = store
            .neighbors(id, 1, opts)
            .into_iter()
            .map(|n| n.key)
            .collect();
        v.sort();
        v
    };
    assert_eq!(homes(&ExpandOptions::default()), vec!["new"]);
    assert_eq!(homes(&ExpandOptions::default().with_now(50)), vec!["old"]);
    assert_eq!(
        homes(&ExpandOptions::default().with_now(600)),
        vec!["later", "new"]
    );
    assert_eq!(
        homes(&ExpandOptions::default().with_include_ended(true)),
        vec!["later", "new", "old"]
    );
}

#[test]
fn pinned_facts_decay_no_lower_than_the_floor_and_pins_are_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = village(&dir.path().join("s"));
    let strict = ExpandOptions::default().with_min_confidence(0.5);
    let offer =
        |store: &Store| neighbor_conf(store, "fletcher", &ExpandOptions::default())["OFFERS"].0;
    assert!((offer(&store) - 0.4).abs() < 1e-4);
    let events = store.stats().events;
    let latest = store.latest_event_time().unwrap();
    store.pin(&["fletcher"], true).unwrap();
    assert_eq!(store.stats().events, events + 1, "a pin is an event");
    assert_eq!(
        store.latest_event_time().unwrap(),
        latest,
        "and does not move now"
    );
    assert!(store.node_by_key("fletcher").unwrap().pinned);
    // 0.8 decayed to 0.4, held at the 0.5 floor; so the filter keeps it.
    assert_eq!(offer(&store), 0.5);
    assert!(neighbor_conf(&store, "fletcher", &strict).contains_key("OFFERS"));
    let r = loci::query::run(
        &store,
        "MATCH (v)-[o:OFFERS]->(i) RETURN confidence(o)",
        &HashMap::new(),
    )
    .unwrap();
    assert_eq!(r.rows[0][0].as_f64().unwrap(), 0.5);
    // A floor never raises a fact above what was stored.
    store
        .set_decay_policy(DecayPolicy {
            pinned_floor: 0.9,
            ..DecayPolicy::default()
        })
        .unwrap();
    assert_eq!(offer(&store), 0.8);
    store.pin(&["fletcher"], false).unwrap();
    assert!((offer(&store) - 0.4).abs() < 1e-4);
    assert!(matches!(
        store.pin(&["fletcher", "nobody"], true),
        Err(loci::Error::NotFound(_))
    ));
    // No key at all pins nothing: refused, where `POST /v1/pin {"keys": []}` wrote a PIN
    // event of no node (session 24 probe).
    let events = store.stats().events;
    assert!(matches!(
        store.pin(&[], true),
        Err(loci::Error::InvalidArgument { .. })
    ));
    assert_eq!(store.stats().events, events);
    assert!(
        !store.node_by_key("fletcher").unwrap().pinned,
        "nothing written"
    );
    assert!(store.verify().unwrap().ok());
    // Reopened, the pins are replayed from the log.
    store.pin(&["emerald"], true).unwrap();
    let path = store.dir().to_path_buf();
    drop(store);
    let again = Store::open(&path).unwrap();
    assert!(again.node_by_key("emerald").unwrap().pinned);
    assert_eq!(
        neighbor_conf(&again, "emerald", &ExpandOptions::default())["OFFERS"].0,
        0.8,
        "the floor of 0.9 stops at the stored 0.8"
    );
}

#[test]
fn pinning_what_is_already_pinned_writes_no_event() {
    // `unpin` of a node never pinned wrote an UNPIN event and said "unpinned 1 node", each
    // time it was run (session 26 probe).
    let dir = tempfile::tempdir().unwrap();
    let store = village(&dir.path().join("s"));
    let events = store.stats().events;
    let c = store.pin(&["fletcher"], false).unwrap();
    assert_eq!((c.events, c.nodes_upserted), (0, 0), "{c:?}");
    assert_eq!(store.stats().events, events, "nothing written");
    let c = store.pin(&["fletcher"], true).unwrap();
    assert_eq!((c.events, c.nodes_upserted), (1, 1));
    let c = store.pin(&["fletcher"], true).unwrap();
    assert_eq!((c.events, c.nodes_upserted), (0, 0), "already pinned");
    // Of several keys, the event names only those whose pin changes.
    let c = store.pin(&["fletcher", "emerald"], true).unwrap();
    assert_eq!((c.events, c.nodes_upserted), (1, 1), "{c:?}");
    assert!(store.node_by_key("emerald").unwrap().pinned);
    // A key the store does not hold is still refused, even beside pinned ones.
    assert!(matches!(
        store.pin(&["fletcher", "nobody"], true),
        Err(loci::Error::NotFound(_))
    ));
    assert_eq!(store.stats().events, events + 2);
    assert!(store.verify().unwrap().ok());
}

#[test]
fn novelty_counts_the_terms_of_earlier_events_whose_salience_was_given() {
    use loci::model::{EventDraft, Props, Value};
    let draft = |text: &str, salience: Option<f32>| {
        let mut d = EventDraft::new(1, "bot", "NOTE");
        d.payload = Value::Map(Props::from([("text".to_string(), Value::from(text))]));
        d.salience = salience;
        d
    };
    let alone = tempfile::tempdir().unwrap();
    let alone = loci::Store::create(alone.path(), loci::BackendKind::Redb).unwrap();
    alone
        .ingest(vec![draft("zebra quokka axolotl", None)])
        .unwrap();
    let after_given = tempfile::tempdir().unwrap();
    let after_given = loci::Store::create(after_given.path(), loci::BackendKind::Redb).unwrap();
    after_given
        .ingest(vec![
            draft("zebra quokka axolotl", Some(0.9)),
            draft("zebra quokka axolotl", None),
        ])
        .unwrap();
    let fresh = alone.event(1).unwrap().unwrap().salience;
    let seen = after_given.event(2).unwrap().unwrap().salience;
    assert!((after_given.event(1).unwrap().unwrap().salience - 0.9).abs() < 1e-6);
    assert!(
        seen < fresh,
        "terms already in the batch are not novel: {seen} vs {fresh}"
    );
}

/// helper-109 (session 48): a reader of a store whose derived records were made by other
/// rules was told "derived by older rules (Some(6), this build uses 7)": Rust's `Option` in
/// the message, and "older" for a newer build's rules too. It says which, in words, and
/// what to do.
#[test]
fn a_reader_of_a_store_of_other_rules_is_told_whose_in_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    drop(Store::create(&path, BackendKind::Redb).unwrap());
    let mark = |version: Option<u32>| {
        let backend = BackendKind::Redb.open(&path).unwrap();
        let mut w = loci::storage::WriteBatch::default();
        match version {
            Some(v) => w.put(
                loci::storage::Table::Meta,
                b"projection",
                loci::codec::encode(&v),
            ),
            None => w.delete(loci::storage::Table::Meta, b"projection"),
        }
        backend.commit(w).unwrap();
    };
    let now = loci::store::PROJECTION_VERSION;
    let refusal = |version: Option<u32>| {
        mark(version);
        let e = Store::open_read_only(&path).err().unwrap().to_string();
        assert!(!e.contains("Some("), "{e}");
        assert!(e.contains(&format!("this build's are {now}")), "{e}");
        e
    };
    let older = refusal(Some(now - 1));
    assert!(
        older.contains(&format!("older rules ({};", now - 1)),
        "{older}"
    );
    assert!(older.contains("open it for writing once"), "{older}");
    let unversioned = refusal(None);
    assert!(
        unversioned.contains("older rules (unversioned;"),
        "{unversioned}"
    );
    let newer = refusal(Some(now + 1));
    assert!(
        newer.contains(&format!("a newer build's rules ({};", now + 1)),
        "{newer}"
    );
}

/// helper-114: an event's novelty (its words no earlier document held) counted the names of
/// nodes made earlier in its batch as unseen, where after a commit between the two they are
/// in the index: the same file stored other saliences with `--commit-every 1` (or fed one event
/// at a time, as MCP's `remember` does) than in one batch. Each split scores the same.
#[test]
fn salience_is_the_same_however_a_file_is_split_into_commits() {
    use loci::model::{Props, Value};
    let noted = |ts: i64, text: &str, assertions: Vec<Assertion>| {
        let mut d = EventDraft::new(ts, "bot", "NOTE");
        d.payload = Value::from(text);
        d.assertions = assertions;
        d
    };
    let upsert = |key: &str, name: Option<&str>, aliases: &[&str], props: &[(&str, &str)]| {
        Assertion::UpsertNode(NodeUpsert {
            key: key.into(),
            name: name.map(str::to_string),
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            props: props
                .iter()
                .map(|(k, v)| (k.to_string(), Value::from(*v)))
                .collect::<Props>(),
            ..Default::default()
        })
    };
    let drafts = vec![
        noted(0, "hello", vec![upsert("p:1", Some("Zorblax"), &[], &[])]),
        noted(1, "Zorblax again", vec![]),
        // An alias, a property's text, a key as a name.
        noted(
            2,
            "more",
            vec![upsert("p:1", None, &["Vornish"], &[("motto", "Plimsoll")])],
        ),
        noted(3, "Vornish Plimsoll", vec![]),
        noted(4, "nameless", vec![upsert("glarpkey", None, &[], &[])]),
        noted(5, "glarpkey seen", vec![]),
        // A name the node no longer bears, and a node retracted: their words leave the index.
        noted(6, "named", vec![upsert("p:2", Some("Frimble"), &[], &[])]),
        noted(7, "renamed", vec![upsert("p:2", Some("Grendt"), &[], &[])]),
        noted(8, "Frimble Grendt", vec![]),
        noted(9, "made", vec![upsert("p:3", Some("Droskle"), &[], &[])]),
        noted(
            10,
            "gone",
            vec![Assertion::RetractNode { key: "p:3".into() }],
        ),
        noted(11, "Droskle", vec![]),
    ];
    for backend in BackendKind::ALL {
        let salience = |split: bool| {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::create(dir.path(), backend).unwrap();
            match split {
                true => {
                    for d in &drafts {
                        store.ingest(vec![d.clone()]).unwrap();
                    }
                }
                false => {
                    store.ingest(drafts.clone()).unwrap();
                }
            }
            (1..=drafts.len() as u64)
                .map(|seq| store.event(seq).unwrap().unwrap().salience)
                .collect::<Vec<f32>>()
        };
        let (one, each) = (salience(false), salience(true));
        assert_eq!(one, each, "{backend}: one batch, then one commit an event");
    }
}
