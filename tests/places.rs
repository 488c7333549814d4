//! Places that emerge from sightings, against the sighting world's ground truth: every object
//! seen twice (or seen and used) becomes a place, nothing glimpsed once does, and the villages
//! found are the true ones.

use loci::dynamics::places::{emerge, place_key, EmergePolicy};
use loci::world::sighting_world;
use loci::{BackendKind, Store};

#[test]
fn places_and_villages_emerge_from_sightings_as_the_ground_truth_says() {
    for (seed, backend) in [
        (1, BackendKind::Redb),
        (2, BackendKind::Sled),
        (3, BackendKind::Redb),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let w = sighting_world(seed, 4);
        store.ingest(w.events.clone()).unwrap();
        let r = emerge(&store, &EmergePolicy::default()).unwrap();
        assert_eq!(r.places, w.places.len(), "seed {seed}");
        for (object, block) in &w.places {
            let n = store
                .node_by_key(&place_key(object, *block))
                .unwrap_or_else(|| panic!("seed {seed}: {object} at {block:?} did not emerge"));
            assert_eq!(n.anchor.and_then(|a| a.block), Some(*block));
        }
        for (object, block) in &w.glimpses {
            assert!(store.node_by_key(&place_key(object, *block)).is_none());
        }
        // Villages: one per true centre, each found within the village's spread.
        assert_eq!(r.villages, w.villages.len(), "seed {seed}");
        let found: Vec<loci::Node> = store
            .graph()
            .nodes()
            .filter(|n| n.key.starts_with("seen:village:"))
            .collect();
        for centre in &w.villages {
            let near = found.iter().any(|v| {
                let a = v.anchor.unwrap();
                let (x, z) = (a.cx * 16, a.cz * 16);
                (x - centre[0]).abs() <= 24 && (z - centre[1]).abs() <= 24
            });
            assert!(near, "seed {seed}: no village near {centre:?}");
        }
        for v in &found {
            let members = store
                .neighbors(v.id, 1, &loci::ExpandOptions::default())
                .len();
            assert!(members >= 3, "{}: {members} members", v.key);
        }
        // Again: nothing new.
        let again = emerge(&store, &EmergePolicy::default()).unwrap();
        assert_eq!((again.places, again.villages, again.seq), (0, 0, 0));
        let report = store.verify().unwrap();
        assert!(report.ok(), "{:#?}", report.differences);
    }
}

/// Sightings at the far corners of the i32 block range are still distances, not overflows.
#[test]
fn sightings_at_extreme_blocks_do_not_overflow() {
    use loci::model::{Anchor, EventDraft, Value};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let mut events = Vec::new();
    for (i, (object, x)) in [
        ("bed", i32::MIN),
        ("bed", i32::MAX),
        ("workstation", i32::MAX - 1),
    ]
    .into_iter()
    .enumerate()
    {
        for k in 0..2 {
            let end = loci::store::MAX_ABS_TS;
            let mut e = EventDraft::new(end - 10 + (2 * i + k) as i64, "bot", "SIGHTING");
            let mut m = std::collections::BTreeMap::new();
            m.insert("object".to_string(), Value::from(object));
            e.payload = Value::Map(m);
            e.anchor = Some(Anchor {
                cx: 0,
                cz: 0,
                block: Some([x, 0, x]),
            });
            events.push(e);
        }
    }
    store.ingest(events).unwrap();
    let r = emerge(&store, &EmergePolicy::default()).unwrap();
    assert_eq!(r.places, 3);
    assert_eq!(r.villages, 0, "{r:?}");
}

/// A village that grows (a bed seen later nearby) is the same village with one member more:
/// its centre moved, and a village keyed by the new centre had been made beside the first,
/// the first three places located in both (a helper's probe).
#[test]
fn a_village_that_grows_stays_one_village() {
    use loci::model::{Anchor, EventDraft, Value};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let seen_twice = |ts: i64, object: &str, x: i32| -> Vec<EventDraft> {
        (0..2)
            .map(|k| {
                let mut e = EventDraft::new(ts + k, "bot", "SIGHTING");
                e.payload = Value::Map(std::collections::BTreeMap::from([(
                    "object".to_string(),
                    Value::from(object),
                )]));
                e.anchor = Some(Anchor {
                    cx: x.div_euclid(16),
                    cz: 0,
                    block: Some([x, 64, 0]),
                });
                e
            })
            .collect()
    };
    let first: Vec<EventDraft> = [(10, "bed", 0), (20, "bed", 4), (30, "workstation", 2)]
        .into_iter()
        .flat_map(|(ts, o, x)| seen_twice(ts, o, x))
        .collect();
    store.ingest(first).unwrap();
    let r = emerge(&store, &EmergePolicy::default()).unwrap();
    assert_eq!((r.places, r.villages), (3, 1));
    store.ingest(seen_twice(40, "bed", 12)).unwrap();
    let r = emerge(&store, &EmergePolicy::default()).unwrap();
    assert_eq!((r.places, r.villages), (1, 0), "{r:?}");
    let villages: Vec<loci::Node> = store
        .graph()
        .nodes()
        .filter(|n| n.key.starts_with("seen:village:"))
        .collect();
    assert_eq!(villages.len(), 1, "{villages:?}");
    let members = store
        .neighbors(villages[0].id, 1, &loci::ExpandOptions::default())
        .len();
    assert_eq!(members, 4);
    let again = emerge(&store, &EmergePolicy::default()).unwrap();
    assert_eq!((again.places, again.villages, again.seq), (0, 0, 0));
    assert!(store.verify().unwrap().ok());
}

/// A village is a place at the centroid of its members, block and all: it had only its
/// chunk, so the planner's `places_by_type`, which gives every place's block coordinates,
/// gave a village none (helper-147). Its height is its members' mean, as its x and z are.
#[test]
fn a_village_has_the_block_of_its_members_centroid() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let w = sighting_world(1, 4);
    store.ingest(w.events.clone()).unwrap();
    emerge(&store, &EmergePolicy::default()).unwrap();
    let villages: Vec<loci::Node> = (store.graph().nodes())
        .filter(|n| n.key.starts_with("seen:village:"))
        .collect();
    assert!(!villages.is_empty());
    for v in &villages {
        let members: Vec<[i32; 3]> = (store.neighbors(v.id, 1, &loci::ExpandOptions::default()))
            .into_iter()
            .filter_map(|n| {
                store
                    .node(n.node)
                    .and_then(|m| m.anchor)
                    .and_then(|a| a.block)
            })
            .collect();
        let mean = |i: usize| {
            (members.iter().map(|b| b[i] as f64).sum::<f64>() / members.len() as f64).round() as i32
        };
        let block = v.anchor.and_then(|a| a.block);
        assert_eq!(block, Some([mean(0), mean(1), mean(2)]), "{}", v.key);
        assert_eq!(v.key, format!("seen:village:{}:{}", mean(0), mean(2)));
    }
    let rows = loci::query::run(
        &store,
        "MATCH (p:Place {type: 'village'}) RETURN p.x AS x, p.y AS y, p.z AS z",
        &Default::default(),
    )
    .unwrap();
    assert!(!rows.rows.is_empty());
    for row in &rows.rows {
        assert!(row.iter().all(|v| v.as_i64().is_some()), "{row:?}");
    }
    assert!(store.verify().unwrap().ok());
}

/// The radius of the one village of `store`, and its key.
fn the_village_radius(store: &Store) -> (String, f64) {
    let villages = villages_of(store);
    assert_eq!(villages.len(), 1, "{villages:?}");
    let key = villages[0].0.clone();
    let node = store.node_by_key(&key).unwrap();
    let radius = node.props.get("radius").and_then(|v| v.as_f64()).unwrap();
    (key, radius)
}

/// A village's radius is the distance from its centre (the point its key names) to its
/// furthest member. It was the radius of the members first found, kept as the village grew,
/// and kept when a deletion took its furthest member.
#[test]
fn a_village_radius_holds_its_members_as_they_come_and_go() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let mut ts = 1;
        let mut seen_twice = |object: &str, x: i32| -> Vec<loci::model::EventDraft> {
            ts += 2;
            vec![
                sighting(ts - 2, object, [x, 64, 0]),
                sighting(ts - 1, object, [x, 64, 0]),
            ]
        };
        let first: Vec<_> = [("bed", 0), ("bed", 10), ("workstation", 12)]
            .into_iter()
            .flat_map(|(o, x)| seen_twice(o, x))
            .collect();
        store.ingest(first).unwrap();
        emerge(&store, &EmergePolicy::default()).unwrap();
        // Centred at 7 (22 / 3, rounded): the bed at 0 is the furthest.
        assert_eq!(
            the_village_radius(&store),
            ("seen:village:7:0".to_string(), 7.0),
            "{backend}"
        );
        // A bed at 30 joins: 23 blocks from the centre.
        let far_bed = store.ingest(seen_twice("bed", 30)).unwrap();
        emerge(&store, &EmergePolicy::default()).unwrap();
        assert_eq!(the_village_radius(&store).1, 23.0, "{backend}");
        assert_eq!(villages_of(&store)[0].1.len(), 4, "{backend}");
        let again = emerge(&store, &EmergePolicy::default()).unwrap();
        assert_eq!(again.seq, 0, "{backend}: nothing new, nothing written");
        // The far bed's sightings deleted: the bed at 0 is the furthest again.
        store
            .delete(&loci::DeleteRequest::events(
                far_bed.first_seq..=far_bed.last_seq,
            ))
            .unwrap();
        assert_eq!(
            the_village_radius(&store),
            ("seen:village:7:0".to_string(), 7.0),
            "{backend}"
        );
        assert_eq!(villages_of(&store)[0].1.len(), 3, "{backend}");
        assert_verifies(&store, backend);
    }
}

/// A store of the sighting world of `seed` (4 villages) with its places emerged.
fn emerged_world(dir: &std::path::Path, backend: BackendKind, seed: u64) -> Store {
    let store = Store::create(dir, backend).unwrap();
    store.ingest(sighting_world(seed, 4).events).unwrap();
    emerge(&store, &EmergePolicy::default()).unwrap();
    store
}

/// A place (not a village) of the store other than those of `but`.
fn another_place(store: &Store, but: &[&String]) -> String {
    places_of(store)
        .into_iter()
        .find(|k| !but.contains(&k) && !k.starts_with("seen:village:"))
        .unwrap()
}

/// The store's live state is the replay of its log.
fn assert_verifies(store: &Store, backend: BackendKind) {
    let report = store.verify().unwrap();
    assert!(report.ok(), "{backend}: {:#?}", report.differences);
}

/// The sightings of one emerged place that is in no village: the place, its key and the
/// sequence numbers of its sightings.
fn a_lone_place(store: &Store) -> (String, Vec<u64>) {
    let g = store.graph();
    let located = |key: &str| {
        let id = g.node_id(key).unwrap();
        g.edges_of(id).count() > 0
    };
    let mut by_key: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for ev in store
        .events_of_kind(loci::dynamics::places::SIGHTING)
        .unwrap()
    {
        let block = ev.anchor.and_then(|a| a.block).unwrap();
        let loci::Value::Map(m) = &ev.payload else {
            panic!("a sighting's payload is an object")
        };
        let object = m["object"].as_str().unwrap().to_string();
        by_key
            .entry(place_key(&object, block))
            .or_default()
            .push(ev.seq);
    }
    by_key
        .into_iter()
        .find(|(k, _)| store.node_by_key(k).is_some() && !located(k))
        .expect("a place in no village")
}

fn places_of(store: &Store) -> std::collections::BTreeSet<String> {
    store
        .graph()
        .nodes()
        .filter(|n| n.key.starts_with("seen:"))
        .map(|n| n.key)
        .collect()
}

/// helper-97 (session 45): a place made only from deleted sightings stayed (the `PLACES`
/// event that `emerge` wrote kept it), where a place of the log without them does not
/// emerge; and `delete --node` of an emerged place took the whole `PLACES` event, every place
/// and village with it (46 nodes), and left its sightings, so that `emerge` made it again.
#[test]
fn deleting_sightings_or_an_emerged_place_takes_only_that_place() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = emerged_world(dir.path(), backend, 1);
        let all = places_of(&store);

        // The sightings of a place: it goes, and nothing else.
        let (key, sightings) = a_lone_place(&store);
        let r = store
            .delete(&loci::DeleteRequest::events(sightings.clone()))
            .unwrap();
        let mut left = all.clone();
        left.remove(&key);
        assert_eq!(places_of(&store), left, "{backend}: {r:?}");
        assert!(r.places_made_again.is_some(), "{backend}: {r:?}");
        // Support moved from the `PLACES` event taken to the one made again is not lost.
        assert_eq!(r.edges_weakened, 0, "{backend}: {r:?}");
        let again = emerge(&store, &EmergePolicy::default()).unwrap();
        assert_eq!((again.places, again.villages), (0, 0), "{backend}");

        // An emerged place by its key: it goes with its sightings, and nothing else.
        let (key, sightings) = a_lone_place(&store);
        let r = store
            .delete(&loci::DeleteRequest::nodes([key.clone()]))
            .unwrap();
        for s in &sightings {
            assert!(
                r.deleted.contains(s),
                "{backend}: {s} not in {:?}",
                r.deleted
            );
        }
        left.remove(&key);
        assert_eq!(places_of(&store), left, "{backend}: {r:?}");
        let again = emerge(&store, &EmergePolicy::default()).unwrap();
        assert_eq!((again.places, again.villages), (0, 0), "{backend}");
        assert_verifies(&store, backend);
    }
}

/// What later events gave an emerged place stays when a deletion makes the places again: an
/// edge to it (which the replay without the `PLACES` event skipped, its end not made yet), a
/// name given later, and a pin.
#[test]
fn the_places_made_again_keep_what_later_events_gave_them() {
    use loci::model::{Assertion, EdgeUpsert, EventDraft, NodeUpsert};
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = emerged_world(dir.path(), backend, 1);
        let (gone, sightings) = a_lone_place(&store);
        let kept = another_place(&store, &[&gone]);
        let ts = store.latest_event_time().unwrap().unwrap() + 1;
        // The edge first, in an event of its own: replayed without the `PLACES` event, its
        // end is not there yet, and it is skipped.
        let mut home = EventDraft::new(ts, "bot", "NOTE");
        home.assertions = vec![
            Assertion::UpsertNode(NodeUpsert {
                key: "bot".into(),
                name: Some("Steve-bot".into()),
                ..Default::default()
            }),
            Assertion::UpsertEdge(EdgeUpsert {
                from: "bot".into(),
                relation: "HOME".into(),
                to: kept.clone(),
                confidence: Some(0.9),
                ..Default::default()
            }),
        ];
        let mut named = EventDraft::new(ts + 1, "bot", "NOTE");
        named.assertions = vec![Assertion::UpsertNode(NodeUpsert {
            key: kept.clone(),
            name: Some("the old mill".into()),
            ..Default::default()
        })];
        store.ingest(vec![home, named]).unwrap();
        store.pin(&[&kept], true).unwrap();
        // A place pinned with nothing else said of it: replayed without the `PLACES` event,
        // its pin finds no node and makes none.
        let pinned = another_place(&store, &[&gone, &kept]);
        store.pin(&[&pinned], true).unwrap();

        store
            .delete(&loci::DeleteRequest::events(sightings))
            .unwrap();
        assert!(store.node_by_key(&pinned).unwrap().pinned, "{backend}");
        let n = store.node_by_key(&kept).unwrap();
        assert_eq!(n.name, "the old mill", "{backend}");
        assert!(n.pinned, "{backend}");
        assert_eq!(n.label, "Place", "{backend}");
        let e = store.edge_between("bot", "HOME", &kept).unwrap().unwrap();
        assert!((e.confidence - 0.9).abs() < 1e-6, "{backend}: {e:?}");
        assert!(store.node_by_key(&gone).is_none(), "{backend}");
        assert_verifies(&store, backend);

        // A second deletion of another place's sightings keeps them too (helper-99: it read
        // later events only from the `PLACES` event made again by the first).
        let (other, sightings) = a_lone_place(&store);
        assert!(other != kept && other != pinned);
        store
            .delete(&loci::DeleteRequest::events(sightings))
            .unwrap();
        assert!(
            store.edge_between("bot", "HOME", &kept).unwrap().is_some(),
            "{backend}"
        );
        assert!(store.node_by_key(&pinned).unwrap().pinned, "{backend}");
        assert!(store.node_by_key(&kept).unwrap().pinned, "{backend}");

        // The edge restated rests on its event still: deleted, the edge goes.
        let home_seq = store
            .events_of_kind("NOTE")
            .unwrap()
            .iter()
            .find(|e| e.assertions.len() == 2)
            .unwrap()
            .seq;
        store
            .delete(&loci::DeleteRequest::events([home_seq]))
            .unwrap();
        assert!(
            store.edge_between("bot", "HOME", &kept).unwrap().is_none(),
            "{backend}"
        );
        assert_eq!(
            store.node_by_key(&kept).unwrap().name,
            "the old mill",
            "{backend}"
        );
        assert_verifies(&store, backend);
    }
}

/// A sighting of `object` at `block` at time `ts`.
fn sighting(ts: i64, object: &str, block: [i32; 3]) -> loci::model::EventDraft {
    let mut d = loci::model::EventDraft::new(ts, "bot", loci::dynamics::places::SIGHTING);
    d.anchor = Some(loci::model::Anchor {
        cx: block[0].div_euclid(16),
        cz: block[2].div_euclid(16),
        block: Some(block),
    });
    d.payload = loci::Value::Map(loci::model::Props::from([(
        "object".to_string(),
        loci::Value::from(object),
    )]));
    d
}

/// The villages of the store, each with its members.
fn villages_of(store: &Store) -> Vec<(String, std::collections::BTreeSet<String>)> {
    let g = store.graph();
    let mut out = Vec::new();
    for v in g.nodes().filter(|n| n.key.starts_with("seen:village:")) {
        let members = g
            .edges_of(v.id)
            .filter_map(|e| g.edge_core(e))
            .filter(|c| c.to == v.id)
            .filter_map(|c| g.node_key(c.from).map(str::to_string))
            .collect();
        out.push((v.key.clone(), members));
    }
    out
}

/// helper-99 (session 45): the places made again were those the live sightings made, so that
/// after forgetting (which evicts sightings and keeps the places) a deletion of one unrelated
/// sighting took every place whose sightings were forgotten; and a user's deletion of
/// forgotten sightings made no place again, and left the place only they had made.
#[test]
fn forgetting_takes_no_place_from_a_later_deletion() {
    use loci::dynamics::consolidate::{self, ConsolidateOptions, RuleSummarizer};
    use loci::dynamics::forget::{forget, ForgetOptions};
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = emerged_world(dir.path(), backend, 3);
        let (lone, sightings) = a_lone_place(&store);
        let all = places_of(&store);
        // Days later: the sightings' days are closed, summarised and forgotten.
        let later = store.latest_event_time().unwrap().unwrap() + 10 * 24_000;
        store
            .ingest(vec![loci::model::EventDraft::new(later, "bot", "NOTE")])
            .unwrap();
        consolidate::consolidate(&store, &RuleSummarizer, &ConsolidateOptions::default()).unwrap();
        forget(&store, &ForgetOptions::with_budget(5)).unwrap();
        assert_eq!(
            places_of(&store),
            all,
            "{backend}: forgetting keeps the places"
        );
        assert!(
            sightings.iter().all(|s| store.event(*s).unwrap().is_none()),
            "{backend}: the sightings were forgotten"
        );
        // An unrelated sighting's deletion takes no other place (helper-99: it took every
        // place whose sightings were forgotten).
        let other = store
            .events_of_kind(loci::dynamics::places::SIGHTING)
            .unwrap()
            .into_iter()
            .find(|e| !sightings.contains(&e.seq));
        if let Some(other) = other {
            store
                .delete(&loci::DeleteRequest::events([other.seq]))
                .unwrap();
        }
        // The lone place's sightings, forgotten now: the user deletes them.
        let r = store
            .delete(&loci::DeleteRequest::events(sightings.clone()))
            .unwrap();
        let mut left = all.clone();
        left.remove(&lone);
        // (The unrelated sighting's place may have gone with it, if it was its last.)
        let now = places_of(&store);
        assert!(
            now.is_subset(&left) && left.len() - now.len() <= 1,
            "{backend}: {r:?}"
        );
        assert!(!now.contains(&lone), "{backend}");
        assert_verifies(&store, backend);
    }
}

/// helper-99 (session 45): a village whose bridging bed went was kept whole, its two halves
/// 40 blocks apart, where `emerge` finds two villages; and one whose beds a retraction had
/// taken went with a deletion of an unrelated sighting.
#[test]
fn a_village_made_again_splits_where_its_members_no_longer_cluster() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let mut events = Vec::new();
        let mut ts = 1;
        for (object, x) in [
            ("bed", 0),
            ("bed", 10),
            ("workstation", 5),
            ("bed", 30),
            ("bed", 50),
            ("bed", 60),
            ("workstation", 55),
            ("chest", 500),
        ] {
            for _ in 0..2 {
                events.push(sighting(ts, object, [x, 64, 0]));
                ts += 1;
            }
        }
        store.ingest(events).unwrap();
        emerge(&store, &EmergePolicy::default()).unwrap();
        assert_eq!(villages_of(&store).len(), 1, "{backend}");
        // The chest's sightings: nothing of the village changes.
        let before = villages_of(&store);
        store
            .delete(&loci::DeleteRequest::events([15, 16]))
            .unwrap();
        assert_eq!(villages_of(&store), before, "{backend}");
        // The bridging bed's: two villages of three.
        store.delete(&loci::DeleteRequest::events([7, 8])).unwrap();
        let after = villages_of(&store);
        assert_eq!(after.len(), 2, "{backend}: {after:?}");
        assert!(
            after.iter().all(|(_, m)| m.len() == 3),
            "{backend}: {after:?}"
        );
        assert!(after[0].1.is_disjoint(&after[1].1), "{backend}: {after:?}");
        assert_verifies(&store, backend);
    }
}

/// helper-99 (session 45): a village a retraction had left with one bed, clustered again, was
/// no village, and went with the deletion of an unrelated sighting.
#[test]
fn a_village_no_member_of_which_a_deletion_took_stays_as_it_was() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let mut events = Vec::new();
        for (i, (object, x)) in [
            ("bed", 0),
            ("bed", 10),
            ("bed", 20),
            ("workstation", 5),
            ("chest", 500),
        ]
        .into_iter()
        .enumerate()
        {
            for j in 0..2 {
                events.push(sighting(1 + 2 * i as i64 + j, object, [x, 64, 0]));
            }
        }
        store.ingest(events).unwrap();
        emerge(&store, &EmergePolicy::default()).unwrap();
        let mut retract = loci::model::EventDraft::new(100, "bot", "NOTE");
        retract.assertions = ["seen:bed:10:64:0", "seen:bed:20:64:0"]
            .into_iter()
            .map(|key| loci::model::Assertion::RetractNode { key: key.into() })
            .collect();
        store.ingest(vec![retract]).unwrap();
        let before = villages_of(&store);
        assert_eq!(before.len(), 1, "{backend}");
        // The chest's sightings (events 9 and 10).
        store.delete(&loci::DeleteRequest::events([9, 10])).unwrap();
        assert_eq!(villages_of(&store), before, "{backend}");
        assert!(
            store.node_by_key("seen:chest:500:64:0").is_none(),
            "{backend}"
        );
        assert_verifies(&store, backend);
    }
}

/// An edge a later event asserts between a place that goes and one made again goes with the
/// first, and the deletion goes through (the places made again read the edges of every
/// place taken, and restate only those whose ends are there).
#[test]
fn an_edge_from_a_place_that_goes_is_not_made_again() {
    use loci::model::{Assertion, EdgeUpsert, EventDraft};
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = emerged_world(dir.path(), backend, 1);
        let (gone, sightings) = a_lone_place(&store);
        let kept = another_place(&store, &[&gone]);
        let mut path = EventDraft::new(
            store.latest_event_time().unwrap().unwrap() + 1,
            "bot",
            "NOTE",
        );
        path.assertions = vec![Assertion::UpsertEdge(EdgeUpsert {
            from: gone.clone(),
            relation: "PATH".into(),
            to: kept.clone(),
            ..Default::default()
        })];
        store.ingest(vec![path]).unwrap();
        store
            .delete(&loci::DeleteRequest::events(sightings))
            .unwrap();
        assert!(store.node_by_key(&gone).is_none(), "{backend}");
        assert!(store.node_by_key(&kept).is_some(), "{backend}");
        assert!(
            store.edge_between(&gone, "PATH", &kept).unwrap().is_none(),
            "{backend}"
        );
        assert_verifies(&store, backend);
    }
}
