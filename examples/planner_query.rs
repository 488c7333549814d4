//! Planner queries: a query written inline, and the saved queries of `queries/` run by name
//! with typed parameters, over the synthetic world.
//!
//! cargo run --example planner_query

use std::collections::HashMap;

use loci::query::{self, SavedQueries, Val};
use loci::world::{self, WorldConfig};
use loci::{BackendKind, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::create(dir.path().join("world"), BackendKind::Redb)?;
    store.ingest(world::generate(&WorldConfig::default()).events)?;

    // Inline: which villagers offer what, with how sure we are and why we believe it.
    let text = "MATCH (v:NPC)-[o:OFFERS]->(i:Item {name: $item}) \
                WHERE confidence(o) >= $min \
                RETURN v.key AS villager, o.want AS wants, confidence(o) AS confidence, provenance(o) AS events \
                ORDER BY confidence DESC LIMIT 5";
    let params = HashMap::from([
        ("item".to_string(), Val::Str("emerald".into())),
        ("min".to_string(), Val::Float(0.5)),
    ]);
    let result = query::run(&store, text, &params)?;
    println!("{}", result.columns.join(" | "));
    for row in &result.rows {
        println!(
            "{}",
            row.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }

    // Saved queries, by name, with string arguments checked against their declared types.
    let saved =
        SavedQueries::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("queries"))?;
    for q in saved.list() {
        println!("saved: {} — {}", q.name, q.description);
    }
    let home = saved.run_saved(&store, "where_is_home", &[])?;
    println!("home: {}", home.rows[0][0]);
    let near = saved.run_saved(
        &store,
        "nearest_place",
        &[
            ("from".into(), home.rows[0][0].as_str().unwrap_or("").into()),
            ("type".into(), "chest".into()),
        ],
    )?;
    println!("nearest chest: {:?}", near.rows.first());

    // A parse error says where and what was expected.
    if let Err(e) = query::prepare("MATCH (a) RETURN a ORDER", query::Limits::default()) {
        println!("{}", e.render("MATCH (a) RETURN a ORDER"));
    }
    Ok(())
}
