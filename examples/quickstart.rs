//! The library in one page: create a store, append events that assert nodes and edges, search,
//! expand a neighbourhood, read an edge's provenance, and verify the store by replay.
//!
//! cargo run --example quickstart

use loci::model::{Assertion, EdgeUpsert, NodeUpsert, Props, Value};
use loci::{BackendKind, EventDraft, ExpandOptions, SearchFilter, Store, Target};

fn node(key: &str, label: &str, name: &str) -> Assertion {
    Assertion::UpsertNode(NodeUpsert {
        key: key.into(),
        label: Some(label.into()),
        name: Some(name.into()),
        ..Default::default()
    })
}

fn main() -> loci::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| loci::Error::Io {
        path: "tempdir".into(),
        source: e,
    })?;
    let store = Store::create(dir.path().join("memory"), BackendKind::Redb)?;

    // An agent discovers a village and a villager, then trades with him.
    let mut discovery = EventDraft::new(1_000, "bot", "DISCOVERY");
    discovery.payload = Value::from("found a village by the river");
    discovery.assertions = vec![
        node("village:river", "Place", "River village"),
        node("npc:fletcher", "NPC", "fletcher villager"),
        node("item:emerald", "Item", "emerald"),
        Assertion::UpsertEdge(EdgeUpsert {
            from: "npc:fletcher".into(),
            relation: "LOCATED_IN".into(),
            to: "village:river".into(),
            ..Default::default()
        }),
    ];
    let mut trade = EventDraft::new(2_000, "bot", "TRADE");
    trade.place = Some("village:river".into());
    trade.assertions = vec![Assertion::UpsertEdge(EdgeUpsert {
        from: "npc:fletcher".into(),
        relation: "OFFERS".into(),
        to: "item:emerald".into(),
        confidence: Some(0.9),
        props: Props::from([("want".to_string(), Value::from("stick"))]),
        ..Default::default()
    })];
    let commit = store.ingest(vec![discovery, trade])?;
    println!(
        "committed events {}..={}",
        commit.first_seq, commit.last_seq
    );

    // Full-text search over nodes and events.
    for hit in store.search("river village", &SearchFilter::default(), 5)? {
        match hit.target {
            Target::Node(id) => println!(
                "node  {:.3} {}",
                hit.score,
                store.node(id).map(|n| n.name).unwrap_or_default()
            ),
            Target::Event(seq) => println!("event {:.3} #{seq}", hit.score),
        }
    }

    // Two hops out from the emerald, following only confident edges.
    let emerald = store.node_by_key("item:emerald").expect("just ingested");
    let opts = ExpandOptions::default().with_min_confidence(0.5);
    for n in store.neighbors(emerald.id, 2, &opts) {
        println!(
            "hop {}: {} via {} (confidence {:.2})",
            n.hops, n.key, n.relation, n.confidence
        );
    }

    // Every edge knows the events that support it.
    let offer = store
        .edge_between("npc:fletcher", "OFFERS", "item:emerald")?
        .expect("asserted");
    println!(
        "OFFERS edge {} supported by events {:?}",
        offer.id, offer.evidence
    );

    // The log is the source of truth: replay it and compare with the live views.
    let report = store.verify()?;
    println!(
        "replay verified: {} ({} events)",
        report.ok(),
        report.events_replayed
    );
    Ok(())
}
