//! The synthetic world: deterministic for a seed, valid input for the store, and its ground
//! truth is what the seed-question queries answer, across seeds, scales and backends.

use loci::ingest::{self, EventLine, Format};
use loci::queries;
use loci::world::{self, WorldConfig, BOT};
use loci::{BackendKind, Store};
use std::path::Path;

#[test]
fn same_seed_same_world_other_seed_other_world() {
    let a = world::generate(&WorldConfig {
        seed: 9,
        scale: 2,
        days: 6,
    });
    let b = world::generate(&WorldConfig {
        seed: 9,
        scale: 2,
        days: 6,
    });
    let c = world::generate(&WorldConfig {
        seed: 10,
        scale: 2,
        days: 6,
    });
    assert_eq!(a.events, b.events);
    assert_eq!(a.truth, b.truth);
    assert_ne!(a.events, c.events);
    let big = world::generate(&WorldConfig {
        seed: 9,
        scale: 40,
        days: 6,
    });
    assert!(
        big.events.len() > 5 * a.events.len(),
        "scale grows the world"
    );
}

#[test]
fn world_json_lines_round_trip_through_the_reader() {
    let w = world::generate(&WorldConfig::default());
    let text: String = w
        .events
        .iter()
        .map(|e| EventLine::from(e.clone()).to_json_line() + "\n")
        .collect();
    let batch = ingest::read_str("world.jsonl", &text, Format::Events).unwrap();
    assert_eq!(batch.events, w.events);
}

fn check_answers(seed: u64, scale: u32, backend: BackendKind) {
    let w = world::generate(&WorldConfig {
        seed,
        scale,
        days: 6,
    });
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s"), backend).unwrap();
    store.ingest(w.events.clone()).unwrap();
    let ctx = format!("seed {seed} scale {scale} {backend}");

    let home = queries::where_is_home(&store, BOT, None)
        .unwrap()
        .expect("a home");
    assert_eq!(home.place.key, w.truth.home, "{ctx}");
    // Before the move, the former home was home: validity is respected, not just recency.
    let before_move = home.since.unwrap() - 1;
    let old = queries::where_is_home(&store, BOT, Some(before_move))
        .unwrap()
        .unwrap();
    assert_eq!(old.place.key, w.truth.former_home, "{ctx}");
    assert!(!home.provenance.events.is_empty() && !home.provenance.observations.is_empty());

    let trades = queries::find_trade(&store, "emerald", "sticks", 0.5).unwrap();
    let got: Vec<(&str, Option<&str>, i64)> = trades
        .iter()
        .map(|t| {
            (
                t.villager.as_str(),
                t.place.as_ref().map(|p| p.key.as_str()),
                t.last_seen,
            )
        })
        .collect();
    let want: Vec<(&str, Option<&str>, i64)> = w
        .truth
        .sticks_for_emeralds
        .iter()
        .map(|t| (t.villager.as_str(), Some(t.place.as_str()), t.last_seen))
        .collect();
    assert_eq!(got, want, "{ctx}");
    // The confidence an offer is given with is the one its floor was applied to: decayed
    // since it was last seen, as a traversal of its edge gives it (the demo had printed an
    // offer believed at 0.56 with the 0.9 stored).
    for t in &trades {
        let villager = store.require_node(&t.villager).unwrap();
        let edge = t.provenance.edges[0];
        let believed = store
            .neighbors(villager.id, 1, &loci::ExpandOptions::default())
            .into_iter()
            .find(|n| n.edge == edge)
            .expect("the offer's edge leaves its villager");
        assert_eq!(t.confidence, believed.confidence, "{ctx}: {}", t.villager);
        assert!(t.confidence >= 0.5, "{ctx}");
    }
    let all = queries::find_trade(&store, "emerald", "stick", 0.0).unwrap();
    assert!(
        all.iter()
            .any(|t| w.truth.low_confidence_offers.contains(&t.villager)),
        "{ctx}: the rumour exists, below 0.5"
    );

    let night = queries::last_night(&store, None).unwrap();
    assert_eq!(
        (night.from, night.to),
        (w.truth.last_night_from, w.truth.last_night_to),
        "{ctx}"
    );
    let obs: Vec<String> = night
        .events
        .iter()
        .flat_map(|e| e.observations.clone())
        .collect();
    assert_eq!(obs, w.truth.last_night, "{ctx}");
    let kinds: Vec<String> = night.events.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds, w.truth.last_night_kinds, "{ctx}");

    let death = queries::last_death(&store, BOT).unwrap().expect("a death");
    assert_eq!(death.place.key, w.truth.last_death_place, "{ctx}");
    assert_eq!(death.ts, w.truth.last_death_ts, "{ctx}");
    assert_eq!(death.dropped, w.truth.last_death_dropped, "{ctx}");
    assert_eq!(
        death.provenance.observations,
        vec![w.truth.last_death_observation.clone()],
        "{ctx}"
    );

    assert!(store.verify().unwrap().ok(), "{ctx}");
}

#[test]
fn seed_questions_match_ground_truth_redb() {
    for seed in [1, 42, 777] {
        for scale in [1, 4] {
            check_answers(seed, scale, BackendKind::Redb);
        }
    }
}

/// From scale 16 the offer seen on the first day was seen so early in a six-day world that
/// it has faded below the 0.5 a trade needs (an offer's half-life is a week): the memory
/// rightly leaves it out, and the ground truth had still expected it, so `loci demo --scale
/// 16` reported a difference and exited 1 at every seed (helper-147).
#[test]
fn seed_questions_match_ground_truth_where_an_offer_has_faded() {
    for (seed, scale) in [(42, 16), (0, 24)] {
        check_answers(seed, scale, BackendKind::Redb);
    }
}

#[test]
fn seed_questions_match_ground_truth_sled() {
    check_answers(42, 1, BackendKind::Sled);
    check_answers(5, 3, BackendKind::Sled);
}

#[test]
fn committed_fixture_is_reproduced_exactly() {
    let w = world::generate(&WorldConfig {
        seed: 42,
        scale: 1,
        days: 6,
    });
    let lines: String = w
        .events
        .iter()
        .map(|e| EventLine::from(e.clone()).to_json_line() + "\n")
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets");
    let fixture = std::fs::read_to_string(root.join("world-seed42.jsonl")).unwrap();
    assert!(
        fixture == lines,
        "datasets/world-seed42.jsonl differs from the generator (see datasets/README.md)"
    );
    let answers: world::GroundTruth =
        serde_json::from_slice(&std::fs::read(root.join("world-seed42.answers.json")).unwrap())
            .unwrap();
    assert_eq!(answers, w.truth);
}

/// The health check finds nothing wrong with loci's own world, however large: a hundred
/// names per kind of place, and at scale 10 and 40 two ore veins had one name, which `loci
/// check` reports as likely duplicates (helper-147).
#[test]
fn the_health_check_finds_nothing_wrong_with_a_large_world() {
    for scale in [10, 40] {
        let w = world::generate(&WorldConfig {
            seed: 42,
            scale,
            days: 6,
        });
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("s"), BackendKind::Redb).unwrap();
        store.ingest(w.events).unwrap();
        let report = loci::dynamics::health::check(
            &store,
            &loci::dynamics::health::HealthOptions::default(),
        )
        .unwrap();
        assert!(report.healthy(), "scale {scale}: {report:?}");
    }
}
