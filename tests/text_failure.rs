//! A full-text update that fails after its batch is durable (a full disk for a moment, a
//! damaged segment): the batch stands, and its documents reach the index all the same. Its own
//! test binary: the failure is injected through a process-wide switch.

use loci::{BackendKind, EventDraft, SearchFilter, Store};

fn note(ts: i64, text: &str) -> EventDraft {
    let mut e = EventDraft::new(ts, "bot", "NOTE");
    e.payload = loci::model::Value::from(text);
    e
}

/// The events whose documents a search for `word` finds.
fn found(store: &Store, word: &str) -> Vec<u64> {
    let mut seqs: Vec<u64> = store
        .search(word, &SearchFilter::default(), 10)
        .unwrap()
        .into_iter()
        .filter_map(|h| match h.target {
            loci::text::Target::Event(seq) => Some(seq),
            _ => None,
        })
        .collect();
    seqs.sort();
    seqs
}

/// helper-148: a server whose index could not take a batch answered every search after it
/// without that batch, and the next batch that reached the index recorded its position past
/// the one left out, so no open caught it up either. Now the next commit reads what the index
/// missed back from the log; an update refused for damage, or failing again, rebuilds the
/// index at once.
#[test]
fn a_batch_the_index_could_not_take_is_found_after_the_next_commit() {
    for backend in BackendKind::ALL {
        // Once for want of space; once for damage; twice for want of space (the catch-up
        // fails too, and the index is rebuilt).
        for (failures, damage) in [(1, false), (1, true), (2, false)] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::create(dir.path().join("s"), backend).unwrap();
            store.ingest(vec![note(1, "alpha")]).unwrap();
            loci::text::fail_next_commits(failures, damage);
            let b = store.ingest(vec![note(2, "bravo")]).unwrap();
            if damage {
                // Rebuilt from the log at once.
                assert_eq!(found(&store, "bravo"), [b.first_seq], "{backend}");
            }
            let c = store.ingest(vec![note(3, "charlie")]).unwrap();
            let ctx = format!("{backend}, {failures} failures, damage {damage}");
            assert_eq!(found(&store, "bravo"), [b.first_seq], "{ctx}");
            assert_eq!(found(&store, "charlie"), [c.first_seq], "{ctx}");
            assert_eq!(found(&store, "alpha"), [1], "{ctx}");
            assert_eq!(store.stats().text_indexed_seq, c.last_seq, "{ctx}");
            let report = store.verify().unwrap();
            assert!(report.ok(), "{ctx}: {:?}", report.differences);
            drop(store);
            let store = Store::open(dir.path().join("s")).unwrap();
            assert_eq!(found(&store, "bravo"), [b.first_seq], "{ctx}");
        }
        // A reload that fails after its commit went through: the position is the commit's,
        // and the next commit does not index the committed batch again (helper-149).
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("s"), backend).unwrap();
        store.ingest(vec![note(1, "alpha")]).unwrap();
        loci::text::fail_next_reloads(1);
        let b = store.ingest(vec![note(2, "bravo")]).unwrap();
        let c = store.ingest(vec![note(3, "charlie")]).unwrap();
        assert_eq!(found(&store, "bravo"), [b.first_seq], "{backend}, a reload");
        assert_eq!(
            found(&store, "charlie"),
            [c.first_seq],
            "{backend}, a reload"
        );
        assert!(store.verify().unwrap().ok(), "{backend}");
        // The commit after the failed one a deletion: it wrote its own documents and the
        // nodes', and recorded the log's end past the batch left out (the review of helper-148's
        // fix); it rebuilds the index instead.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("s"), backend).unwrap();
        store.ingest(vec![note(1, "alpha")]).unwrap();
        loci::text::fail_next_commits(1, false);
        let b = store.ingest(vec![note(2, "bravo")]).unwrap();
        store.delete(&loci::DeleteRequest::events([1])).unwrap();
        assert_eq!(
            found(&store, "bravo"),
            [b.first_seq],
            "{backend}, a deletion"
        );
        assert!(found(&store, "alpha").is_empty(), "{backend}");
        assert!(store.verify().unwrap().ok(), "{backend}");
    }
}
