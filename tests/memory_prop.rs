//! Property: after any sequence of memory commands (ingest, consolidate, forget, delete of an
//! event or a node, compact, pin, unpin, working-memory changes, reads that record uses), on
//! either backend, replay of the log equals the live
//! state (`replay --verify`), before and after reopening the store.

use loci::dynamics::consolidate::{self, ConsolidateOptions, RuleSummarizer};
use loci::dynamics::forget::{self, ForgetOptions};
use loci::dynamics::working::WmOp;
use loci::model::EventDraft;
use loci::world::{self, WorldConfig};
use loci::{BackendKind, DeleteRequest, Store};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Command {
    /// Ingest the next day of the synthetic world.
    IngestDay,
    Consolidate,
    /// Forget down to this share (in tenths) of what is held.
    Forget(u8),
    /// Delete the n-th live event (modulo their number).
    DeleteEvent(u16),
    /// Delete the n-th node (modulo their number), with every event that names it.
    DeleteNode(u16),
    Compact,
    Pin(u16),
    Unpin(u16),
    /// A working-memory change (which one: the number modulo the ops).
    Wm(u8),
    /// A retrieval and a planner query, their uses flushed when the number is even (else left
    /// for a later flush or the close).
    Read(u8),
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        4 => Just(Command::IngestDay),
        2 => Just(Command::Consolidate),
        2 => (3u8..10).prop_map(Command::Forget),
        2 => any::<u16>().prop_map(Command::DeleteEvent),
        1 => any::<u16>().prop_map(Command::DeleteNode),
        1 => Just(Command::Compact),
        1 => any::<u16>().prop_map(Command::Pin),
        1 => any::<u16>().prop_map(Command::Unpin),
        2 => any::<u8>().prop_map(Command::Wm),
        2 => any::<u8>().prop_map(Command::Read),
    ]
}

/// The world's events grouped by day, oldest first.
fn days_of_world() -> Vec<Vec<EventDraft>> {
    let w = world::generate(&WorldConfig {
        seed: 5,
        scale: 1,
        days: 12,
    });
    let mut days: Vec<Vec<EventDraft>> = Vec::new();
    for e in w.events {
        let d = (e.ts / 24_000) as usize;
        if days.len() <= d {
            days.resize(d + 1, Vec::new());
        }
        days[d].push(e);
    }
    days
}

fn live_events(store: &Store) -> Vec<u64> {
    let mut seqs = Vec::new();
    store
        .scan_log(1, |ev| {
            if ev.kind != "DELETE" {
                seqs.push(ev.seq);
            }
            Ok(true)
        })
        .unwrap();
    seqs
}

fn node_keys(store: &Store) -> Vec<String> {
    let mut keys: Vec<String> = store.graph().nodes().map(|n| n.key.clone()).collect();
    keys.sort();
    keys
}

/// Runs one command; errors the command may legitimately give (nothing to delete) are fine.
fn apply(store: Store, cmd: &Command, days: &mut std::vec::IntoIter<Vec<EventDraft>>) -> Store {
    match cmd {
        Command::IngestDay => {
            if let Some(day) = days.next() {
                let before = store.stats().events;
                if let Err(e) = store.ingest(day) {
                    // A day that names a node deleted earlier is refused whole, as any input
                    // naming an unknown node is; nothing of it is written.
                    assert!(e.to_string().contains("unknown node"), "{e}");
                    assert_eq!(store.stats().events, before);
                }
            }
        }
        Command::Consolidate => {
            consolidate::consolidate(&store, &RuleSummarizer, &ConsolidateOptions::default())
                .unwrap();
        }
        Command::Forget(tenths) => {
            let s = store.stats();
            let held = s.events - s.events_deleted;
            let budget = (held * *tenths as u64 / 10).max(1);
            forget::forget(&store, &ForgetOptions::with_budget(budget)).unwrap();
        }
        Command::DeleteEvent(n) => {
            let seqs = live_events(&store);
            if !seqs.is_empty() {
                let seq = seqs[*n as usize % seqs.len()];
                store.delete(&DeleteRequest::events([seq])).unwrap();
            }
        }
        Command::DeleteNode(n) => {
            let keys = node_keys(&store);
            if !keys.is_empty() {
                let key = keys[*n as usize % keys.len()].clone();
                store.delete(&DeleteRequest::nodes([key])).unwrap();
            }
        }
        Command::Compact => return store.compact().unwrap().0,
        Command::Read(n) => {
            let questions = ["where is home", "who trades emeralds", "diamond chest"];
            loci::retrieval::Retriever::new(&store)
                .unwrap()
                .retrieve(
                    questions[*n as usize % questions.len()],
                    &loci::retrieval::RetrieveOptions::default(),
                )
                .unwrap();
            loci::query::run(
                &store,
                "MATCH (a)-[r]->(b) RETURN a, r, b ORDER BY a.key LIMIT 5",
                &Default::default(),
            )
            .unwrap();
            if n % 2 == 0 {
                store.flush_usage().unwrap();
            }
        }
        Command::Wm(n) => {
            let text = format!("note {n}");
            let op = match n % 6 {
                0 => WmOp::Observe { text },
                1 => WmOp::Intent { text },
                2 => WmOp::PushSubgoal { text },
                3 => WmOp::PopSubgoal,
                4 => WmOp::Mainline { text },
                _ => WmOp::Capacity {
                    n: 1 + *n as usize % 4,
                },
            };
            let events_before = store.stats().events;
            match store.change_working_memory(&op, "bot", None) {
                Ok(_) => {}
                // A pop of an empty stack is refused, and writes nothing.
                Err(loci::Error::NotFound(_)) if op == WmOp::PopSubgoal => {
                    assert_eq!(store.stats().events, events_before);
                }
                Err(e) => panic!("{op:?}: {e}"),
            }
        }
        Command::Pin(n) | Command::Unpin(n) => {
            let keys = node_keys(&store);
            if !keys.is_empty() {
                let key = &keys[*n as usize % keys.len()];
                store
                    .pin(&[key.as_str()], matches!(cmd, Command::Pin(_)))
                    .unwrap();
            }
        }
    }
    store
}

fn check(store: &Store, after: &[Command]) {
    let report = store.verify().unwrap();
    assert!(report.ok(), "after {after:?}: {:#?}", report.differences);
}

proptest! {
    #![proptest_config(ProptestConfig {
        // A few seconds in the default suite; LOCI_PROP_CASES=200 for a longer run.
        cases: std::env::var("LOCI_PROP_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12),
        max_shrink_iters: 50,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn replay_equals_live_after_any_memory_commands(
        commands in proptest::collection::vec(command(), 1..10),
        sled in any::<bool>(),
    ) {
        let backend = if sled { BackendKind::Sled } else { BackendKind::Redb };
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::create(dir.path(), backend).unwrap();
        let mut days = days_of_world().into_iter();
        for (i, cmd) in commands.iter().enumerate() {
            store = apply(store, cmd, &mut days);
            check(&store, &commands[..=i]);
        }
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        check(&store, &commands);
    }
}
