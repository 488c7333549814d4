//! Forgetting: the store kept within a budget of events while every fact, pinned item and top
//! summary stays, as a replayable deletion event. Runs on both backends.

use std::collections::BTreeMap;

use loci::dynamics::consolidate::{self, ConsolidateOptions, Level, RuleSummarizer};
use loci::dynamics::forget::{self, ForgetOptions};
use loci::world::{self, WorldConfig};
use loci::{BackendKind, Store};

fn assert_verifies(store: &Store) {
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:#?}", report.differences);
}

/// Every belief (an edge with an effective confidence of at least 0.5, or touching a pinned
/// node) by its keys, with its stored confidence.
fn facts(store: &Store) -> BTreeMap<(String, String, String), f32> {
    edges(store, true)
}

/// Every edge (`beliefs`: only beliefs) by its keys, with its stored confidence.
fn edges(store: &Store, beliefs: bool) -> BTreeMap<(String, String, String), f32> {
    let g = store.graph();
    g.edges()
        .filter(|(id, c)| {
            !beliefs
                || g.effective_confidence(*id, None).unwrap() >= 0.5
                || g.node(c.from).unwrap().pinned
                || g.node(c.to).unwrap().pinned
        })
        .map(|(_, c)| {
            let key = |id| g.node(id).unwrap().key.clone();
            (
                (
                    key(c.from),
                    g.relation_name(c.relation).to_string(),
                    key(c.to),
                ),
                c.confidence,
            )
        })
        .collect()
}

fn held(store: &Store) -> u64 {
    let s = store.stats();
    s.events - s.events_deleted
}

#[test]
fn forgetting_keeps_the_store_within_budget_and_every_belief() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let w = world::generate(&WorldConfig {
            seed: 11,
            scale: 2,
            days: 30,
        });
        store.ingest(w.events).unwrap();
        consolidate::consolidate(&store, &RuleSummarizer, &ConsolidateOptions::default()).unwrap();
        let before = facts(&store);
        let nodes_before = store.stats().nodes;
        let weeks: Vec<u64> = consolidate::summaries(&store)
            .unwrap()
            .iter()
            .filter(|s| s.level == Level::Week)
            .map(|s| s.seq)
            .collect();
        let budget = held(&store) * 2 / 5;
        let r = forget::forget(&store, &ForgetOptions::with_budget(budget)).unwrap();
        assert!(r.evicted > 0, "{backend}: {r:?}");
        assert!(!r.over_budget, "{backend}: {r:?}");
        assert!(
            held(&store) <= budget,
            "{backend}: {} > {budget}",
            held(&store)
        );
        assert_eq!(r.events_after, held(&store));

        // Every belief stays, with its confidence: the summaries hold it up. Faded edges may go.
        // (Resting on a summary dated at its day's start, a belief can look a little older.)
        let after = edges(&store, false);
        for (k, c) in &before {
            assert_eq!(after.get(k), Some(c), "{backend}: {k:?}");
        }
        assert!(store.stats().nodes <= nodes_before);
        // The newest week's summary is among the last to go; the pinned bot stays.
        assert!(store.event(*weeks.last().unwrap()).unwrap().is_some());
        assert!(store.node_by_key("bot").unwrap().pinned);
        assert_verifies(&store);

        // Within budget already: nothing more goes.
        let again = forget::forget(&store, &ForgetOptions::with_budget(budget)).unwrap();
        assert_eq!(again.evicted, 0);
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(edges(&store, false), after);
        assert_verifies(&store);
    }
}

#[test]
fn the_lowest_retention_goes_first_and_the_open_day_never() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let w = world::generate(&WorldConfig {
        seed: 3,
        scale: 1,
        days: 16,
    });
    store.ingest(w.events).unwrap();
    consolidate::consolidate(&store, &RuleSummarizer, &ConsolidateOptions::default()).unwrap();
    let now = store.latest_event_time().unwrap().unwrap();
    let open_day_start = now - now.rem_euclid(24_000);

    // What the documented rules make evictable, and each one's retention now.
    let policy = forget::RetentionPolicy::default();
    let summaries = consolidate::summaries(&store).unwrap();
    let mut evictable: BTreeMap<u64, f64> = BTreeMap::new();
    let mut asserts_nothing = std::collections::BTreeSet::new();
    let weeks_end = summaries
        .iter()
        .filter(|s| s.level == Level::Week)
        .map(|s| s.end)
        .max()
        .unwrap();
    for s in &summaries {
        let mut seqs = Vec::new();
        match s.level {
            Level::Episode => {
                seqs.push(s.seq);
                seqs.extend(s.children.iter().copied());
            }
            Level::Day if s.end <= weeks_end => seqs.push(s.seq),
            Level::Week => seqs.push(s.seq),
            _ => {}
        }
        for seq in seqs {
            let ev = store.event(seq).unwrap().unwrap();
            evictable.insert(seq, policy.score(&ev, now, 0));
            if ev.assertions.is_empty() {
                asserts_nothing.insert(seq);
            }
        }
    }

    let held_before = held(&store);
    let r = forget::forget(&store, &ForgetOptions::with_budget(held_before - 5)).unwrap();
    assert_eq!(r.evicted, 6, "five over budget, and the deletion event");
    assert_eq!(r.evictable, evictable.len());
    let deletion = store.event(r.seq).unwrap().unwrap();
    let loci::Value::Map(m) = &deletion.payload else {
        panic!("{deletion:?}")
    };
    assert_eq!(m["reason"], loci::Value::from("forget"));
    let evicted: Vec<u64> = match &m["deleted"] {
        loci::Value::List(v) => v.iter().map(|s| s.as_i64().unwrap() as u64).collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(evicted.len(), 6);
    let worst_evicted = evicted
        .iter()
        .map(|s| *evictable.get(s).expect("only evictable events go"))
        .fold(f64::MIN, f64::max);
    // An event that asserts nothing is never the last support of a belief, so none of them
    // that stayed may score lower than one that went.
    let best_kept_low = evictable
        .iter()
        .filter(|(s, _)| !evicted.contains(s) && asserts_nothing.contains(s))
        .map(|(_, v)| *v)
        .fold(f64::MAX, f64::min);
    assert!(
        worst_evicted <= best_kept_low,
        "{worst_evicted} > {best_kept_low}"
    );
    for seq in &evicted {
        assert!(store.event(*seq).unwrap().is_none());
    }
    // Nothing of the open day is evictable at all.
    store
        .scan_log(1, |ev| {
            assert!(
                ev.ts < open_day_start || !evictable.contains_key(&ev.seq) || ev.kind == "SUMMARY"
            );
            Ok(true)
        })
        .unwrap();
    assert_verifies(&store);
}

/// Found by `loci bench world`: once a day summary re-asserted the death, `last_death` read the
/// dropped items from the summary (the edge's latest evidence) and found none.
#[test]
fn last_death_names_what_was_dropped_after_consolidation_and_forgetting() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let w = world::generate(&WorldConfig {
        seed: 42,
        scale: 1,
        days: 12,
    });
    store.ingest(w.events).unwrap();
    consolidate::consolidate(&store, &RuleSummarizer, &ConsolidateOptions::default()).unwrap();
    let answer = |store: &Store| loci::queries::last_death(store, "bot").unwrap().unwrap();
    let d = answer(&store);
    assert_eq!(d.place.key, w.truth.last_death_place);
    assert_eq!(d.dropped, w.truth.last_death_dropped);
    assert_eq!(d.ts, w.truth.last_death_ts);
    // Everything evictable goes, the death event with it: the answer comes from the graph.
    forget::forget(&store, &ForgetOptions::with_budget(1)).unwrap();
    let d = answer(&store);
    assert!(d.provenance.events.is_empty(), "{:?}", d.provenance);
    assert_eq!(d.place.key, w.truth.last_death_place);
    let mut dropped = d.dropped.clone();
    dropped.sort();
    let mut expected = w.truth.last_death_dropped.clone();
    expected.sort();
    assert_eq!(dropped, expected);
}

/// `loci bench world` on a short run: forgetting holds the post-warm-up size, both stores
/// verify, and the planner still answers the seed and two-hop questions.
#[test]
fn the_world_benchmark_holds_its_budget_and_its_answers() {
    let r = loci::bench::run_world_bench(&loci::bench::WorldBenchConfig {
        seed: 42,
        scale: 1,
        days: 20,
        backend: BackendKind::Redb,
    })
    .unwrap();
    assert!(r.verify_ok);
    assert_eq!(r.growth.warmup_days, 2);
    assert!(
        r.growth.events_end_forgetting <= r.growth.events_after_warmup,
        "{:?}",
        r.growth
    );
    assert!(r.growth.events_end_keeping > r.growth.events_end_forgetting);
    assert_eq!(r.place_recall_at_5_keeping, 1.0, "{:?}", r.place_questions);
    assert!(r.multihop_questions > 10);
    assert!(r.multihop_f1.unwrap() >= 0.95, "{:?}", r.multihop_f1);
    assert_eq!(r.episodic_coverage_keeping, 1.0);
    assert_eq!(r.consolidate_ms.days, 20);
}
