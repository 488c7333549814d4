//! What reading a saved context holds. Each turn an agent saves its context as a `CONTEXT`
//! event; the next save numbers its turn after the newest, and `loci context --turn T` shows
//! one. Both had read every saved context to find the one they wanted, so a turn cost more with
//! every turn before it. This binary counts every heap byte through its own allocator, so it
//! holds one test: another running beside it would be counted too.

#[path = "common/counting.rs"]
mod counting;

use loci::context::{self, ContextOptions};
use loci::world::{self, WorldConfig};
use loci::{BackendKind, Store};

/// Saves `turns` contexts of the world's store.
fn save(store: &Store, turns: usize) {
    let mut o = ContextOptions::with_budget(2_000);
    o.question = Some("who trades emeralds for sticks".into());
    o.save = true;
    for _ in 0..turns {
        context::build_context(store, &o).unwrap();
    }
}

/// Reading turn 1 holds what that turn saved, not every turn saved: with eight times as many
/// saved, it holds about the same (it had held eight times as much).
#[test]
fn reading_a_saved_turn_holds_that_turn_not_every_turn() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::create(tmp.path().join("s"), BackendKind::Redb).unwrap();
    let w = world::generate(&WorldConfig {
        seed: 7,
        scale: 1,
        days: 2,
    });
    store.ingest(w.events).unwrap();
    save(&store, 5);
    let (few, snap) = counting::peak_added(|| context::snapshot(&store, 1).unwrap());
    assert_eq!(snap.map(|s| s.turn), Some(1));
    save(&store, 35);
    let (many, snap) = counting::peak_added(|| context::snapshot(&store, 1).unwrap());
    assert_eq!(snap.map(|s| s.turn), Some(1));
    eprintln!("reading turn 1: {few} heap bytes at the peak with 5 turns saved, {many} with 40");
    assert!(
        many < few * 2,
        "reading turn 1 held {many} heap bytes with 40 turns saved, {few} with 5"
    );
    // The next save numbers its turn after the newest.
    let mut o = ContextOptions::with_budget(2_000);
    o.save = true;
    assert_eq!(context::build_context(&store, &o).unwrap().turn, Some(41));
}
