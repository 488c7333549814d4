//! Usage and tiers: reads record what they returned without writing per read, the uses reach
//! the log as `USAGE` events that replay reproduces, hot items rank first, forgetting keeps what
//! is used, and `USAGE` records neither come from input nor outlive a deleted node. Both
//! backends where the backend matters.

use loci::dynamics::consolidate::{self, ConsolidateOptions, RuleSummarizer};
use loci::dynamics::forget::{self, ForgetOptions};
use loci::dynamics::usage::{Item, USAGE};
use loci::model::{Assertion, EventDraft, NodeUpsert};
use loci::retrieval::{RetrieveOptions, Retriever, SnippetKind};
use loci::{BackendKind, DeleteRequest, Store};

fn assert_verifies(store: &Store) {
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:#?}", report.differences);
}

fn held(store: &Store) -> u64 {
    let s = store.stats();
    s.events - s.events_deleted
}

/// A store of `n` villages, each with a passage-like node of the same words, so that a
/// question about them ties every village and only the tie-break (or usage) orders them.
fn villages(dir: &std::path::Path, backend: BackendKind, n: usize) -> Store {
    let store = Store::create(dir, backend).unwrap();
    let drafts = (0..n)
        .map(|i| {
            let mut d = EventDraft::new(i as i64, "bot", "DISCOVERY");
            let mut up = NodeUpsert {
                key: format!("village:{i}"),
                label: Some("Place".into()),
                name: Some(format!("Vale {i}")),
                ..Default::default()
            };
            up.props
                .insert("text".into(), "a quiet village with a bell tower".into());
            d.assertions.push(Assertion::UpsertNode(up));
            d
        })
        .collect();
    store.ingest(drafts).unwrap();
    store
}

fn ranked_nodes(store: &Store, question: &str) -> Vec<String> {
    let opts = RetrieveOptions::default()
        .with_k(10)
        .with_kinds([SnippetKind::Entity])
        .with_record_usage(false);
    Retriever::new(store)
        .unwrap()
        .retrieve(question, &opts)
        .unwrap()
        .snippets
        .into_iter()
        .map(|s| s.id)
        .collect()
}

fn usage_events(store: &Store) -> usize {
    store.events_of_kind(USAGE).unwrap().len()
}

#[test]
fn reads_write_nothing_until_a_flush_and_the_flush_replays() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = villages(dir.path(), backend, 4);
        let events = store.stats().events;
        let pack = Retriever::new(&store)
            .unwrap()
            .retrieve("bell tower village", &RetrieveOptions::default())
            .unwrap();
        assert!(!pack.snippets.is_empty());
        let r = loci::query::run(
            &store,
            "MATCH (v:Place) RETURN v ORDER BY v.key LIMIT 2",
            &Default::default(),
        )
        .unwrap();
        assert_eq!(r.rows.len(), 2);
        assert_eq!(store.stats().events, events, "{backend}: a read wrote");
        assert!(store.usage_pending() > 0, "{backend}");
        drop(store);

        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.stats().events,
            events + 1,
            "{backend}: one USAGE event"
        );
        assert_eq!(usage_events(&store), 1);
        let g = store.graph();
        // Both the pack's villages and the query's first two were used; those in both twice.
        let used = |k: &str| g.usage(&Item::Node(k.into())).map_or(0, |u| u.used);
        // The query returned villages 0 and 1; the pack its own nodes: each read counts once.
        let in_pack = |k: &str| pack.snippets.iter().any(|s| s.id == k) as u32;
        assert_eq!(used("village:0"), 1 + in_pack("village:0"), "{backend}");
        assert_eq!(used("village:1"), 1 + in_pack("village:1"), "{backend}");
        drop(g);
        assert_verifies(&store);
        // Nothing waits: a second close writes nothing.
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(usage_events(&store), 1);
    }
}

#[test]
fn hot_items_win_a_tie_and_stats_count_the_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let store = villages(dir.path(), BackendKind::Redb, 4);
    let before = ranked_nodes(&store, "bell tower village");
    assert_eq!(before.len(), 4);
    let last = before.last().unwrap().clone();
    assert_eq!(store.stats().tiers.hot_nodes, 0);

    // Used once: still warm, so the ranking does not move.
    store.record_use([Item::Node(last.clone())]);
    store.flush_usage().unwrap().unwrap();
    assert_eq!(ranked_nodes(&store, "bell tower village"), before);
    // Used twice, recently: hot, first.
    store.record_use([Item::Node(last.clone())]);
    store.flush_usage().unwrap().unwrap();
    let after = ranked_nodes(&store, "bell tower village");
    assert_eq!(after[0], last, "{after:?}");
    let tiers = store.stats().tiers;
    assert_eq!((tiers.hot_nodes, tiers.warm_nodes), (1, 3));

    // Pinned is hot without any use.
    store.pin(&[before[0].as_str()], true).unwrap();
    assert_eq!(store.stats().tiers.hot_nodes, 2);
    assert_verifies(&store);

    // A week of world time later, the used item is warm again; the pinned one stays hot.
    let mut later = EventDraft::new(8 * 24_000, "bot", "SLEEP");
    later.salience = Some(0.1);
    store.ingest(vec![later]).unwrap();
    assert_eq!(store.stats().tiers.hot_nodes, 1);
}

#[test]
fn uses_wait_in_memory_and_flush_when_enough_wait() {
    let dir = tempfile::tempdir().unwrap();
    let store = villages(dir.path(), BackendKind::Redb, 1);
    let events = store.stats().events;
    for i in 0..loci::dynamics::usage::FLUSH_ITEMS - 1 {
        store.record_use([Item::Event(i as u64 + 1_000_000)]);
    }
    assert_eq!(store.stats().events, events);
    store.record_use([Item::Event(42)]);
    assert_eq!(store.stats().events, events + 1, "the 1024th item flushes");
    assert_eq!(store.usage_pending(), 0);
    assert_verifies(&store);
}

#[test]
fn a_read_only_handle_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let writer = villages(dir.path(), BackendKind::Redb, 2);
    let events = writer.stats().events;
    let reader = Store::open_read_only(dir.path()).unwrap();
    Retriever::new(&reader)
        .unwrap()
        .retrieve("village", &RetrieveOptions::default())
        .unwrap();
    assert_eq!(reader.usage_pending(), 0);
    drop(reader);
    drop(writer);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.stats().events, events);
}

#[test]
fn usage_events_cannot_be_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let store = villages(dir.path(), BackendKind::Redb, 1);
    let err = store
        .ingest(vec![EventDraft::new(5, "bot", USAGE)])
        .unwrap_err();
    assert!(err.to_string().contains("only the store writes"), "{err}");
}

#[test]
fn usage_payloads_are_not_searchable() {
    let dir = tempfile::tempdir().unwrap();
    let store = villages(dir.path(), BackendKind::Redb, 1);
    store.record_use([Item::Node("zanzibarquux".into())]);
    store.flush_usage().unwrap().unwrap();
    let hits = store
        .search("zanzibarquux", &Default::default(), 10)
        .unwrap();
    assert!(hits.is_empty(), "{hits:?}");
}

#[test]
fn forgetting_keeps_what_is_used_and_drops_superseded_usage_records() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        // Forty observations over four days, then one on day six: the first days close.
        let mut drafts: Vec<EventDraft> = (0..40)
            .map(|i| {
                let mut d = EventDraft::new(i * 2_400, "bot", "OBSERVATION");
                d.payload = format!("noticed thing {i}").as_str().into();
                d.salience = Some(0.5);
                d
            })
            .collect();
        drafts.push(EventDraft::new(6 * 24_000, "bot", "OBSERVATION"));
        store.ingest(drafts).unwrap();
        consolidate::consolidate(&store, &RuleSummarizer, &ConsolidateOptions::default()).unwrap();
        let early: Vec<u64> = (1..=40).collect();
        let (used, unused): (Vec<u64>, Vec<u64>) = early.iter().partition(|s| *s % 2 == 0);
        // Five reads of the even ones, each flushed: five USAGE events, the first four
        // superseded by the last.
        for _ in 0..5 {
            store.record_use(used.iter().map(|s| Item::Event(*s)));
            store.flush_usage().unwrap();
        }
        assert_eq!(usage_events(&store), 5);
        let ledger_before: Vec<u32> = {
            let g = store.graph();
            used.iter()
                .map(|s| g.usage(&Item::Event(*s)).unwrap().used)
                .collect()
        };
        assert!(ledger_before.iter().all(|u| *u == 5));

        let budget = held(&store) - early.len() as u64 / 2;
        let r = forget::forget(&store, &ForgetOptions::with_budget(budget)).unwrap();
        assert!(r.evicted > 0, "{backend}: {r:?}");
        let gone = |seqs: &[u64]| {
            seqs.iter()
                .filter(|s| store.event(**s).unwrap().is_none())
                .count()
        };
        let (used_gone, unused_gone) = (gone(&used), gone(&unused));
        assert!(unused_gone > 0, "{backend}: {r:?}");
        assert!(
            used_gone == 0 || unused_gone == unused.len(),
            "{backend}: used evicted {used_gone} while unused ones stayed ({unused_gone} of {} gone)",
            unused.len()
        );
        // The superseded USAGE records went first (retention 0), the latest stays, and the
        // totals are what they were.
        assert_eq!(usage_events(&store), 1, "{backend}");
        let g = store.graph();
        let kept: Vec<u32> = used
            .iter()
            .filter(|s| store.event(**s).unwrap().is_some())
            .map(|s| g.usage(&Item::Event(*s)).unwrap().used)
            .collect();
        assert!(kept.iter().all(|u| *u == 5), "{kept:?}");
        drop(g);
        assert_verifies(&store);
    }
}

#[test]
fn deleting_a_node_deletes_the_usage_records_that_name_it() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = villages(dir.path(), backend, 3);
        store.record_use([
            Item::Node("village:1".into()),
            Item::Node("village:2".into()),
        ]);
        store.flush_usage().unwrap().unwrap();
        store.record_use([Item::Node("village:2".into())]);
        store.flush_usage().unwrap().unwrap();
        store.delete(&DeleteRequest::nodes(["village:1"])).unwrap();
        assert_eq!(usage_events(&store), 1, "{backend}");
        let g = store.graph();
        assert_eq!(g.usage(&Item::Node("village:1".into())), None);
        // The later record's totals (2) stand for village:2.
        assert_eq!(g.usage(&Item::Node("village:2".into())).unwrap().used, 2);
        drop(g);
        assert_verifies(&store);
        let (store, _) = store.compact().unwrap();
        assert_verifies(&store);
        assert_eq!(store.graph().usage(&Item::Node("village:1".into())), None);
    }
}

/// Found by the session 34 review: a node deletion takes every `USAGE` record naming the node,
/// and with it the running totals it carried for other items; one no later record named fell
/// back to an older total or to none (its tier and retention with it). Their totals are
/// recorded again by the deletion, in one commit with it.
#[test]
fn deleting_a_node_keeps_the_usage_of_the_items_recorded_beside_it() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = villages(dir.path(), backend, 4);
        let v = |i: u32| Item::Node(format!("village:{i}"));
        store.record_use([v(3)]);
        store.flush_usage().unwrap().unwrap();
        store.record_use([v(1), v(2), v(3)]);
        store.flush_usage().unwrap().unwrap();
        store.record_use([v(1), v(2)]);
        store.flush_usage().unwrap().unwrap();
        let used = |store: &Store, item: &Item| store.graph().usage(item).map(|u| u.used);
        assert_eq!(
            [2, 3].map(|i| used(&store, &v(i))),
            [Some(2), Some(2)],
            "{backend}"
        );
        store.delete(&DeleteRequest::nodes(["village:1"])).unwrap();
        assert_eq!(used(&store, &v(1)), None, "{backend}");
        assert_eq!(
            [2, 3].map(|i| used(&store, &v(i))),
            [Some(2), Some(2)],
            "{backend}: the totals recorded beside village:1"
        );
        // Nothing of the deleted node is recorded again.
        let again = store.events_of_kind(USAGE).unwrap();
        assert!(
            again
                .iter()
                .all(|e| !loci::dynamics::deletion::names_node(e, "village:1")),
            "{backend}: {again:?}"
        );
        assert_verifies(&store);
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(used(&store, &v(3)), Some(2), "{backend}");
        assert_verifies(&store);
    }
}

/// The tier counts, which count only pinned and used items, equal a count of every node and
/// edge by its own tier: an edge both at a pinned node and used counts once, a used item that
/// no longer exists counts nowhere.
#[test]
fn tier_counts_equal_a_count_of_every_item() {
    use loci::model::EdgeUpsert;
    let dir = tempfile::tempdir().unwrap();
    let store = villages(dir.path(), BackendKind::Redb, 6);
    let mut d = EventDraft::new(10, "bot", "ROADS");
    for (a, b) in [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (1, 1)] {
        d.assertions.push(Assertion::UpsertEdge(EdgeUpsert {
            from: format!("village:{a}"),
            relation: "ROAD".into(),
            to: format!("village:{b}"),
            ..Default::default()
        }));
    }
    store.ingest(vec![d]).unwrap();
    store.pin(&["village:1"], true).unwrap();
    let edge = |a: u32, b: u32| {
        Item::Edge(
            format!("village:{a}"),
            "ROAD".into(),
            format!("village:{b}"),
        )
    };
    for _ in 0..2 {
        store.record_use([
            edge(0, 1),
            edge(3, 4),
            edge(9, 9),
            Item::Node("village:1".into()),
            Item::Node("village:4".into()),
            Item::Node("village:77".into()),
            Item::Event(1),
        ]);
        store.flush_usage().unwrap().unwrap();
    }
    let tiers = store.stats().tiers;
    let g = store.graph();
    let now = g.latest_event_time().unwrap_or(0);
    let nodes: Vec<_> = g.nodes().map(|n| g.node_tier(n.id, now)).collect();
    let edges: Vec<_> = g.edges().map(|(id, _)| g.edge_tier(id, now)).collect();
    let hot = |v: &[loci::dynamics::usage::Tier]| {
        v.iter()
            .filter(|t| **t == loci::dynamics::usage::Tier::Hot)
            .count() as u64
    };
    assert_eq!(
        (tiers.hot_nodes, tiers.warm_nodes),
        (hot(&nodes), nodes.len() as u64 - hot(&nodes))
    );
    assert_eq!(
        (tiers.hot_edges, tiers.warm_edges),
        (hot(&edges), edges.len() as u64 - hot(&edges))
    );
    // village:1 (pinned, also used) and village:4; the edges at village:1 (0-1, 1-2, 1-1) and 3-4.
    assert_eq!((tiers.hot_nodes, tiers.hot_edges), (2, 4));
    assert_eq!(tiers.hot_events, 1);
}

/// helper-114: the server (and MCP) keeps uses in memory until a flush, and a read scored with
/// the flushed uses alone: the same question asked three times over HTTP ranked as if never
/// asked until 30 s of wall time had passed, where the CLI (a flush per process) ranked the
/// used snippets hot the third time. Uses waiting count in the reads after them, and the
/// totals a flush writes do not depend on when it runs (an event ingested before it moves no
/// use's time).
#[test]
fn uses_waiting_count_as_flushed_ones_and_their_time_is_the_reads() {
    for backend in BackendKind::ALL {
        let asked = |flush_each: bool| {
            let dir = tempfile::tempdir().unwrap();
            let store = villages(dir.path(), backend, 4);
            let opts = RetrieveOptions::default()
                .with_k(2)
                .with_kinds([SnippetKind::Entity]);
            let mut packs = Vec::new();
            for _ in 0..3 {
                let pack = Retriever::new(&store)
                    .unwrap()
                    .retrieve("bell tower village", &opts)
                    .unwrap();
                packs.push(
                    (pack.snippets.iter())
                        .map(|s| (s.id.clone(), s.score.to_bits(), s.parts.usage.to_bits()))
                        .collect::<Vec<_>>(),
                );
                if flush_each {
                    store.flush_usage().unwrap();
                }
            }
            // The events held differ by the `USAGE` records each flush wrote.
            let t = store.stats().tiers;
            let tiers = (t.hot_nodes, t.warm_nodes, t.hot_edges, t.hot_events);
            // A week of world time passes before the uses are flushed: they were made before.
            let mut later = EventDraft::new(8 * 24_000, "bot", "SLEEP");
            later.salience = Some(0.1);
            store.ingest(vec![later]).unwrap();
            store.flush_usage().unwrap();
            let g = store.graph();
            let used: Vec<_> = (0..4)
                .map(|i| g.usage(&Item::Node(format!("village:{i}"))))
                .collect();
            drop(g);
            assert_verifies(&store);
            (packs, tiers, used)
        };
        let (flushed, waiting) = (asked(true), asked(false));
        assert_ne!(
            flushed.0[0], flushed.0[2],
            "{backend}: the third asking ranks the used"
        );
        assert_eq!(waiting, flushed, "{backend}");
    }
}

/// helper-116's review: uses waiting in memory for a node a user then deleted were flushed
/// after the deletion, and reads now count waiting uses: the node made again under its key was
/// hot at once, and a `USAGE` record named a node the deletion had taken. A user's deletion
/// flushes the waiting uses first, so they go with the node's other records.
#[test]
fn a_deleted_nodes_waiting_uses_go_with_it() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = villages(dir.path(), backend, 3);
        for _ in 0..2 {
            store.record_use([
                Item::Node("village:1".into()),
                Item::Node("village:2".into()),
            ]);
        }
        store.delete(&DeleteRequest::nodes(["village:1"])).unwrap();
        let mut again = EventDraft::new(10, "bot", "DISCOVERY");
        again.assertions.push(Assertion::UpsertNode(NodeUpsert {
            key: "village:1".into(),
            label: Some("Place".into()),
            ..Default::default()
        }));
        store.ingest(vec![again]).unwrap();
        let g = store.graph();
        assert_eq!(g.usage(&Item::Node("village:1".into())), None, "{backend}");
        assert_eq!(g.usage(&Item::Node("village:2".into())).unwrap().used, 2);
        drop(g);
        store.flush_usage().unwrap();
        assert_eq!(
            store.graph().usage(&Item::Node("village:1".into())),
            None,
            "{backend}: flushed after the deletion"
        );
        assert_verifies(&store);
    }
}
