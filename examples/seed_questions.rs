//! The planner's seed questions on the synthetic world, as library calls.
//!
//! cargo run --example seed_questions -- [seed] [scale]

use loci::queries;
use loci::world::{self, WorldConfig, BOT};
use loci::{BackendKind, Store};

fn main() -> loci::Result<()> {
    let mut args = std::env::args().skip(1);
    let seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(42);
    let scale = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let w = world::generate(&WorldConfig {
        seed,
        scale,
        ..Default::default()
    });
    let dir = tempfile::tempdir().map_err(|e| loci::Error::Io {
        path: "tempdir".into(),
        source: e,
    })?;
    let store = Store::create(dir.path().join("world"), BackendKind::Redb)?;
    store.ingest(w.events)?;

    if let Some(home) = queries::where_is_home(&store, BOT, None)? {
        println!(
            "home: {} ({}), events {:?}",
            home.place.name, home.place.key, home.provenance.events
        );
    }
    for t in queries::find_trade(&store, "emeralds", "sticks", 0.5)? {
        println!(
            "trade: {} at {:?}, confidence {:.2}, last seen {}",
            t.villager,
            t.place.map(|p| p.key),
            t.confidence,
            t.last_seen
        );
    }
    let night = queries::last_night(&store, None)?;
    println!("last night: {}", night.summary);
    if let Some(d) = queries::last_death(&store, BOT)? {
        println!(
            "last death: {} at t={}, dropped {:?}",
            d.place.key, d.ts, d.dropped
        );
    }
    println!(
        "ground truth: {}",
        serde_json::to_string(&w.truth).unwrap_or_default()
    );
    Ok(())
}
