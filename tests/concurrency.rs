//! Many readers beside one writer in one process (what `loci serve` does): a reader that reads
//! the store's state twice in one call (a planner query reading events while it holds the
//! graph) must never deadlock against a writer waiting between the two reads, and a reader
//! sees whole batches only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use loci::model::EventDraft;
use loci::{BackendKind, RetrieveOptions, Retriever, Store};

#[test]
fn readers_holding_the_graph_never_deadlock_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::create(dir.path(), BackendKind::Redb).unwrap());
    let world = loci::world::generate(&loci::world::WorldConfig::default());
    store.ingest(world.events).unwrap();
    let queries = loci::query::SavedQueries::builtin_and(None).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (done, finished) = mpsc::channel::<&'static str>();

    let mut threads = Vec::new();
    for r in 0..4 {
        let (store, stop, done) = (store.clone(), stop.clone(), done.clone());
        let queries = queries.clone();
        threads.push(std::thread::spawn(move || {
            let retriever = Retriever::new(&store).unwrap();
            let opts = RetrieveOptions::default().with_record_usage(false);
            while !stop.load(Ordering::Relaxed) {
                for name in ["find_trade", "last_death", "where_is_home"] {
                    let q = queries.get(name).unwrap();
                    let result = q
                        .prepared
                        .run_without_recording(&store, &q.bind(&[]).unwrap())
                        .unwrap();
                    // Whole batches only: every batch below adds two NOTE events at once.
                    let _ = result;
                }
                if r % 2 == 0 {
                    retriever.retrieve("who trades emeralds", &opts).unwrap();
                }
                let notes = store.events_of_kind("NOTE").unwrap().len();
                assert_eq!(notes % 2, 0, "a reader saw half a batch");
            }
            let _ = done.send("reader");
        }));
    }
    {
        let (store, stop, done) = (store.clone(), stop.clone(), done.clone());
        threads.push(std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let batch = (0..2)
                    .map(|_| EventDraft::new(200_000 + i, "bot", "NOTE"))
                    .collect();
                store.ingest(batch).unwrap();
                i += 1;
            }
            let _ = done.send("writer");
        }));
    }
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let until = Instant::now() + Duration::from_secs(60);
    for _ in 0..threads.len() {
        let left = until.saturating_duration_since(Instant::now());
        finished
            .recv_timeout(left)
            .expect("a reader or the writer is stuck: the state lock deadlocked");
    }
    for t in threads {
        t.join().unwrap();
    }
    assert!(store.verify().unwrap().ok());
}
