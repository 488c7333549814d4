//! Deletion and compaction: deleted events leave every view, edges keep the support of what
//! remains, replay agrees, and after a compaction no file of the store holds the deleted text.
//! Every test runs on both backends.

use std::path::Path;

use loci::model::{Assertion, EdgeUpsert, EventDraft, NodeUpsert, Value};
use loci::{BackendKind, DeleteRequest, Error, SearchFilter, Store};

fn node(key: &str, name: &str) -> Assertion {
    Assertion::UpsertNode(NodeUpsert {
        key: key.into(),
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

fn event(ts: i64, text: &str, assertions: Vec<Assertion>) -> EventDraft {
    let mut e = EventDraft::new(ts, "bot", "OBSERVATION");
    e.payload = Value::from(text);
    e.assertions = assertions;
    e
}

fn assert_verifies(store: &Store) {
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:#?}", report.differences);
}

/// 1: bot, villager, emerald; 2: the villager offers emeralds (0.9); 3: seen again (0.6);
/// 4: an unrelated observation.
fn market(dir: &Path, backend: BackendKind) -> Store {
    let store = Store::create(dir, backend).unwrap();
    store
        .ingest(vec![
            event(
                0,
                "woke up",
                vec![
                    node("bot", "Steve-bot"),
                    node("fletcher", "fletcher villager"),
                    node("emerald", "emerald"),
                ],
            ),
            event(
                10,
                "the fletcher pays emeralds",
                vec![edge("fletcher", "OFFERS", "emerald", 0.9)],
            ),
            event(
                20,
                "the fletcher still pays emeralds",
                vec![edge("fletcher", "OFFERS", "emerald", 0.6)],
            ),
            event(30, "rain over the hills", vec![]),
        ])
        .unwrap();
    store
}

#[test]
fn deleting_an_event_withdraws_its_support_from_every_edge() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = market(dir.path(), backend);
        let r = store.delete(&DeleteRequest::events([3])).unwrap();
        assert_eq!(r.deleted, vec![3]);
        assert_eq!((r.edges_removed, r.edges_weakened), (0, 1), "{backend}");
        let e = store
            .edge_between("fletcher", "OFFERS", "emerald")
            .unwrap()
            .expect("the edge keeps event 2's support");
        assert_eq!(e.confidence, 0.9, "confidence recomputed from what remains");
        assert_eq!(e.evidence, vec![2]);
        assert_eq!(e.last_seen, 10);
        assert!(store.event(3).unwrap().is_none());
        assert_verifies(&store);

        let r = store.delete(&DeleteRequest::events([2])).unwrap();
        assert_eq!((r.edges_removed, r.edges_weakened), (1, 0), "{backend}");
        assert!(store
            .edge_between("fletcher", "OFFERS", "emerald")
            .unwrap()
            .is_none());
        assert_verifies(&store);

        // The same state after a reopen (tables) as live (memory).
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(store
            .edge_between("fletcher", "OFFERS", "emerald")
            .unwrap()
            .is_none());
        assert!(store.node_by_key("fletcher").is_some());
        assert_verifies(&store);
    }
}

#[test]
fn deleting_a_node_deletes_every_event_that_names_it() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = market(dir.path(), backend);
        store
            .ingest(vec![event(
                40,
                "met Quillonia by the well",
                vec![
                    node("person:q", "Quillonia Vantreeze"),
                    edge("person:q", "OFFERS", "emerald", 1.0),
                ],
            )])
            .unwrap();
        assert!(!store
            .search("Quillonia", &SearchFilter::default(), 10)
            .unwrap()
            .is_empty());
        let r = store.delete(&DeleteRequest::nodes(["person:q"])).unwrap();
        assert_eq!(r.deleted, vec![5]);
        assert_eq!(r.nodes_removed, 1);
        assert!(store.node_by_key("person:q").is_none());
        assert!(store
            .search("Quillonia Vantreeze well", &SearchFilter::default(), 10)
            .unwrap()
            .is_empty());
        // The deletion event does not carry the key it deleted.
        let deletion = store.event(r.seq).unwrap().unwrap();
        assert!(!format!("{deletion:?}").contains("person:q"));
        // Later input naming the node is refused: it is gone.
        let err = store
            .ingest(vec![event(
                50,
                "x",
                vec![edge("person:q", "OFFERS", "emerald", 1.0)],
            )])
            .unwrap_err();
        assert!(err.to_string().contains("unknown node"), "{err}");
        assert_verifies(&store);
    }
}

#[test]
fn a_node_only_a_deleted_event_created_goes_with_the_assertions_on_it() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = market(dir.path(), backend);
        store
            .ingest(vec![
                event(40, "found a chest", vec![node("chest", "old chest")]),
                event(
                    41,
                    "the chest holds emeralds",
                    vec![edge("chest", "CONTAINS", "emerald", 1.0)],
                ),
                event(
                    42,
                    "the bot trusts the fletcher",
                    vec![edge("bot", "KNOWS", "fletcher", 1.0)],
                ),
            ])
            .unwrap();
        store.delete(&DeleteRequest::events([5])).unwrap();
        assert!(store.node_by_key("chest").is_none());
        assert!(store
            .edge_between("bot", "KNOWS", "fletcher")
            .unwrap()
            .is_some());
        // Event 6 stays in the log and readable; only its assertion on the chest is void.
        assert!(store.event(6).unwrap().is_some());
        assert_verifies(&store);
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(store.node_by_key("chest").is_none());
        assert_verifies(&store);
    }
}

#[test]
fn compact_leaves_no_deleted_text_in_any_file() {
    const SECRET: &str = "hunter2-zxqvbnm-secret";
    const NAME: &str = "Xylophaniel";
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = market(dir.path(), backend);
        let mut pasted = event(40, &format!("the password is {SECRET}"), vec![]);
        pasted.idempotency_key = Some("paste-1".into());
        store.ingest(vec![pasted.clone()]).unwrap();
        store
            .ingest(vec![event(
                41,
                &format!("met {NAME}"),
                vec![node("person:x", NAME)],
            )])
            .unwrap();
        store.delete(&DeleteRequest::events([5])).unwrap();
        store.delete(&DeleteRequest::nodes(["person:x"])).unwrap();
        for needle in [SECRET, NAME] {
            assert!(
                store
                    .search(needle, &SearchFilter::default(), 10)
                    .unwrap()
                    .is_empty(),
                "{backend}: search finds {needle} after the deletion"
            );
        }
        assert!(
            !files_containing(dir.path(), SECRET.as_bytes()).is_empty(),
            "{backend}: before a compaction the log still holds the deleted record"
        );
        let (store, report) = store.compact().unwrap();
        assert_eq!(report.tombstones_written, 2, "{backend}");
        assert_verifies(&store);
        // A retry of the deleted batch does not bring it back.
        let c = store.ingest(vec![pasted]).unwrap();
        assert_eq!((c.events, c.skipped), (0, 1));
        drop(store);
        for needle in [SECRET, NAME] {
            let found = files_containing(dir.path(), needle.as_bytes());
            assert!(found.is_empty(), "{backend}: {needle} still in {found:?}");
        }
        let store = Store::open(dir.path()).unwrap();
        assert_verifies(&store);
        assert!(store
            .edge_between("fletcher", "OFFERS", "emerald")
            .unwrap()
            .is_some());
        assert_eq!(store.stats().events, 8);
    }
}

/// Files under `dir` whose bytes contain `needle` (the way `grep -r` would look).
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

#[test]
fn an_interrupted_compaction_is_finished_or_undone_on_open() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = market(dir.path(), backend);
        store.delete(&DeleteRequest::events([4])).unwrap();
        drop(store);
        // Died while copying: the work directory holds a partial copy.
        let tmp = dir.path().join("compact.tmp");
        std::fs::create_dir_all(backend.path_in(&tmp)).unwrap();
        std::fs::write(tmp.join("partial"), b"x").unwrap();
        if backend == BackendKind::Sled {
            // ... or, for sled, between moving the old directory aside and the new one in.
            std::fs::rename(backend.path_in(dir.path()), dir.path().join("sled.old")).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert!(!tmp.exists());
        assert_verifies(&store);
        assert!(store.event(4).unwrap().is_none());
        assert_eq!(store.stats().events, 5);
    }
}

#[test]
fn deletion_records_cannot_be_ingested_or_deleted() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = market(dir.path(), backend);
        let forged = EventDraft::new(5, "bot", "DELETE");
        let err = store.ingest(vec![forged]).unwrap_err();
        assert!(
            matches!(err, Error::InvalidEvent { ref field, .. } if field == "kind"),
            "{err}"
        );
        let r = store.delete(&DeleteRequest::events([1])).unwrap();
        assert!(store.delete(&DeleteRequest::events([r.seq])).is_err());
        assert!(store.delete(&DeleteRequest::events([1])).is_err(), "twice");
        assert!(matches!(
            store.delete(&DeleteRequest::events([99])),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            store.delete(&DeleteRequest::nodes(["nobody"])),
            Err(Error::NotFound(_))
        ));
        assert_verifies(&store);
    }
}

/// With nothing deleted there is nothing to strip: compaction gives the redb file's free pages
/// back in place (a load in many batches leaves many), and the log, state and text stay.
#[test]
fn compacting_without_deletions_gives_back_free_pages_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    for b in 0..40 {
        let mut assertions: Vec<Assertion> = (0..200)
            .map(|i| node(&format!("n{b}_{i}"), &format!("node {b} {i}")))
            .collect();
        assertions.extend((1..200).map(|i| {
            edge(
                &format!("n{b}_{i}"),
                "NEAR",
                &format!("n{b}_{}", i - 1),
                0.5,
            )
        }));
        store
            .ingest(vec![event(b, &format!("batch {b}"), assertions)])
            .unwrap();
    }
    let file = dir.path().join("data.redb");
    let before = std::fs::metadata(&file).unwrap().len();
    let (events, edges) = (store.stats().events, store.stats().edges);
    let (store, report) = store.compact().unwrap();
    let after = std::fs::metadata(&file).unwrap().len();
    assert!(after < before, "data.redb {before} -> {after} bytes");
    assert!(report.bytes_after < report.bytes_before, "{report:?}");
    assert_eq!(report.tombstones_written, 0);
    assert_eq!((store.stats().events, store.stats().edges), (events, edges));
    assert_eq!(
        store
            .search("node 7 3", &SearchFilter::default(), 5)
            .unwrap()
            .len(),
        5
    );
    assert_verifies(&store);
}

/// A secret in an event that forgetting evicted lives on in the day summary made from it:
/// `delete` of the forgotten event takes that summary, and after `compact` no file of the
/// store holds the secret, whether the compaction came before the deletion or after. The
/// deletion had been refused ("event 4 is already deleted") and the secret stayed, searchable
/// and on disk (a helper's probe).
#[test]
fn a_forgotten_secret_is_deleted_from_the_summaries_that_hold_it() {
    use loci::dynamics::forget::{self, ForgetOptions};
    let secret = "hunter2zebra";
    for backend in BackendKind::ALL {
        for compact_first in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let fixture = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/world-seed42.jsonl"),
            )
            .unwrap();
            let mut lines: Vec<String> = fixture.lines().map(str::to_string).collect();
            lines.insert(
                3,
                format!(
                    r#"{{"ts":450,"actor":"bot","kind":"NOTE","payload":{{"text":"my password is {secret}"}}}}"#
                ),
            );
            let input = dir.path().join("w.jsonl");
            std::fs::write(&input, lines.join("\n") + "\n").unwrap();
            let store = Store::create(dir.path().join("s"), backend).unwrap();
            loci::ingest::read_file(&input, None)
                .unwrap()
                .commit(&store)
                .unwrap();
            forget::consolidate_then_forget(&store, None, &ForgetOptions::with_budget(5)).unwrap();
            let hits = |store: &Store| store.search(secret, &SearchFilter::default(), 10).unwrap();
            assert!(store.event(4).unwrap().is_none(), "{backend}: forgotten");
            assert!(!hits(&store).is_empty(), "{backend}: a summary holds it");
            let store = if compact_first {
                store.compact().unwrap().0
            } else {
                store
            };
            let r = store
                .delete(&DeleteRequest::events([4]))
                .unwrap_or_else(|e| panic!("{backend} {compact_first}: {e}"));
            assert!(!r.deleted.is_empty(), "{backend} {compact_first}: {r:?}");
            assert!(hits(&store).is_empty(), "{backend} {compact_first}");
            let report = store.verify().unwrap();
            assert!(report.ok(), "{:#?}", report.differences);
            let store = store.compact().unwrap().0;
            drop(store);
            assert_eq!(
                files_containing(&dir.path().join("s"), secret.as_bytes()),
                Vec::<String>::new(),
                "{backend} {compact_first}"
            );
        }
    }
}

/// Found by the session 35 probe: `delete --node ""` (or `/v1/delete {"nodes": [" "]}`) took
/// every event without an actor, and through their summaries weakened every edge.
#[test]
fn a_blank_node_key_is_refused_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let mut by_no_one = event(1, "a note by no one", vec![node("n", "N")]);
    by_no_one.actor = String::new();
    store.ingest(vec![by_no_one]).unwrap();
    for key in ["", " ", "\t"] {
        let mut request = DeleteRequest::default();
        request.nodes = vec![key.to_string()];
        let err = store.delete(&request).unwrap_err().to_string();
        assert!(err.contains("blank"), "{key:?}: {err}");
    }
    assert_eq!(store.stats().events_deleted, 0);
    assert!(store.node_by_key("n").is_some());
}

/// Found by the session 35 probe: an unpin's upsert, replayed once the node's events were gone
/// (forgotten, deleted), made the node again, bare: an `Entity` named by its key that nothing
/// else held.
#[test]
fn an_unpin_of_a_node_no_longer_there_makes_none() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let made = store
            .ingest(vec![event(1, "a note", vec![node("n", "a note")])])
            .unwrap();
        store.pin(&["n"], true).unwrap();
        store.pin(&["n"], false).unwrap();
        store
            .delete(&DeleteRequest::events(vec![made.last_seq]))
            .unwrap();
        assert!(store.node_by_key("n").is_none(), "{backend}");
        assert_verifies(&store);
    }
}

/// A pin is the store's own event (`Store::pin`): ingested, it could make a node, which a replay
/// that skips what deleted events made would leave out.
#[test]
fn a_pin_is_not_ingested_but_made_by_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    for kind in ["PIN", "UNPIN", "PROMOTE"] {
        let mut pin = EventDraft::new(1, "user", kind);
        pin.assertions = vec![node("n", "a note")];
        let err = store.ingest(vec![pin]).unwrap_err().to_string();
        assert!(err.contains("only the store writes"), "{kind}: {err}");
    }
    assert_eq!(store.stats().events, 0);
}

/// A person whose every note forgetting took, and then the week summary that held them (once
/// nothing else of its week was left), has nothing left in the store: deleting them is refused
/// as already deleted, saying forgetting took their notes, and nothing is written. (The key is
/// not unknown: its notes are in the log. While a summary of them lived, it was taken and made
/// again without them: `a_person_only_forgotten_notes_named_is_deleted_from_the_summaries_made_from_them`
/// in `tests/deletion_prop.rs`.)
#[test]
fn deleting_a_node_forgetting_took_with_every_summary_of_it_is_refused_as_already_deleted() {
    use loci::dynamics::forget::{self, ForgetOptions};
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let first = event(5, "met ann", vec![node("ann", "Ann")]);
        let later = (1..6).map(|w| event(w * 700 + 5, "a quiet week", vec![]));
        store
            .ingest(std::iter::once(first).chain(later).collect())
            .unwrap();
        // The first run takes the notes and days; the second the week, all that is left of it.
        for _ in 0..2 {
            forget::consolidate_then_forget(&store, Some(100), &ForgetOptions::with_budget(1))
                .unwrap();
        }
        assert!(store.node_by_key("ann").is_none(), "{backend}");
        let hits = store.search("Ann", &SearchFilter::default(), 10).unwrap();
        assert!(hits.is_empty(), "{backend}: {hits:?}");
        let events = store.stats().events;
        let refused = store.delete(&DeleteRequest::nodes(["ann"])).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("\"ann\" is already deleted: forgetting took every event naming it"),
            "{backend}: {refused}"
        );
        assert_eq!(store.stats().events, events, "{backend}: nothing written");
        assert_verifies(&store);
    }
}

/// One deletion of many events takes each of them out of the full-text index and no other:
/// the index deletes them as one set of keys, where event 1's key must not take event 10's
/// or 11's with it.
#[test]
fn a_deletion_of_many_events_takes_exactly_them_from_search() {
    let word = |i: u64| format!("zq{}word", "x".repeat(i as usize));
    let deleted: Vec<u64> = (1..=30).filter(|i| i % 3 == 1).collect();
    let check = |store: &Store, when: &str| {
        for i in 1..=30u64 {
            let hits = store.search(&word(i), &SearchFilter::default(), 5).unwrap();
            assert_eq!(
                hits.is_empty(),
                deleted.contains(&i),
                "{when}: event {i}'s word, hits {hits:?}"
            );
        }
        assert_verifies(store);
    };
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        store
            .ingest(
                (1..=30)
                    .map(|i| event(i as i64, &word(i), vec![]))
                    .collect(),
            )
            .unwrap();
        store
            .delete(&DeleteRequest::events(deleted.clone()))
            .unwrap();
        check(&store, &format!("{backend}"));
        drop(store);
        check(
            &Store::open(dir.path()).unwrap(),
            &format!("{backend}, reopened"),
        );
    }
}
