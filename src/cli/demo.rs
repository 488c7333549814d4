//! `world` (write the synthetic world) and `demo` (build it and answer its seed questions,
//! checked against the generator's ground truth: the exit code is 1 when an answer differs).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use loci::ingest;
use loci::queries;
use loci::world::{self, WorldConfig};
use loci::{RetrieveOptions, Retriever, Store};

use super::args::{DemoArgs, WorldArgs};
use super::backend;
use super::exit::Code;
use super::output::{block, errln, list, outln, print_json};

pub fn world(a: WorldArgs) -> Result<Code> {
    if let Some(villages) = a.sightings {
        let w = world::sighting_world(a.seed, villages as usize);
        write_events(&a.out, &w.events)?;
        if let Some(path) = a.answers {
            let truth = serde_json::json!({
                "villages": w.villages,
                "places": w.places,
                "glimpses": w.glimpses,
            });
            std::fs::write(&path, serde_json::to_string_pretty(&truth)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        errln!(
            "wrote {} events (sightings) to {}",
            w.events.len(),
            shown(&a.out)
        );
        return Ok(Code::Ok);
    }
    let w = world::generate(&WorldConfig {
        seed: a.seed,
        scale: a.scale,
        days: a.days,
    });
    write_events(&a.out, &w.events)?;
    if let Some(path) = a.answers {
        std::fs::write(&path, serde_json::to_string_pretty(&w.truth)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    errln!("wrote {} events to {}", w.events.len(), shown(&a.out));
    Ok(Code::Ok)
}

/// `-` is standard output, as it is standard input for `ingest`.
fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Where the events went, for the status line (which goes to standard error, off the events).
fn shown(path: &Path) -> String {
    if is_stdout(path) {
        "standard output".into()
    } else {
        path.display().to_string()
    }
}

fn write_events(path: &Path, events: &[loci::EventDraft]) -> Result<()> {
    let out: Box<dyn Write> = if is_stdout(path) {
        Box::new(super::output::stdout())
    } else {
        Box::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )
    };
    let mut w = std::io::BufWriter::new(out);
    for e in events {
        writeln!(w, "{}", ingest::EventLine::from(e.clone()).to_json_line())?;
    }
    w.flush()?;
    Ok(())
}

fn ok(good: bool) -> &'static str {
    if good {
        "matches ground truth"
    } else {
        "DIFFERS from ground truth"
    }
}

fn provenance(p: &queries::Provenance) -> String {
    let edges: Vec<u32> = p.edges.iter().map(|e| e.0).collect();
    format!(
        "edges {}; events {}; observations {}",
        list(&edges),
        list(&p.events),
        list(&p.observations)
    )
}

pub fn demo(a: DemoArgs) -> Result<Code> {
    let backend = backend(&a.backend)?;
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("demo-store");
    let t = Instant::now();
    let w = world::generate(&WorldConfig {
        seed: a.seed,
        scale: a.scale,
        ..Default::default()
    });
    let store = Store::create(&dir, backend)?;
    let commit = store.ingest(w.events.clone())?;
    let build_s = t.elapsed().as_secs_f64();
    let stats = store.stats();

    let t = Instant::now();
    let home = queries::where_is_home(&store, world::BOT, None)?;
    // Ranked by recency, then by the walk from home; the home is the answer above.
    let from = home
        .as_ref()
        .map(|h| h.place.key.clone())
        .unwrap_or_default();
    let ranked = queries::find_trade_from(
        &store,
        "emerald",
        "stick",
        0.5,
        &from,
        queries::Overlay::Distance,
    )?;
    let trades: Vec<queries::TradeAnswer> = ranked.iter().map(|(t, _)| t.clone()).collect();
    let walk: Vec<Option<f64>> = ranked.iter().map(|(_, c)| *c).collect();
    let night = queries::last_night(&store, None)?;
    let death = queries::last_death(&store, world::BOT)?;
    let answer_ms = t.elapsed().as_secs_f64() * 1e3;
    // What an LLM router gets for the same question: ranked snippets under a token budget.
    let pack_question = "where can I trade sticks for emeralds?";
    let pack = Retriever::new(&store)?.retrieve(
        pack_question,
        &RetrieveOptions::default()
            .with_k(6)
            .with_budget(160)
            .with_min_confidence(0.5),
    )?;
    let verify = store.verify()?;

    let home_ok = home.as_ref().is_some_and(|h| h.place.key == w.truth.home);
    let expected: Vec<&str> = w
        .truth
        .sticks_for_emeralds
        .iter()
        .map(|t| t.villager.as_str())
        .collect();
    let got: Vec<&str> = trades.iter().map(|t| t.villager.as_str()).collect();
    let trades_ok = expected == got;
    let obs: Vec<String> = night
        .events
        .iter()
        .flat_map(|e| e.observations.clone())
        .collect();
    let night_ok = obs == w.truth.last_night;
    let death_ok = death.as_ref().is_some_and(|d| {
        d.place.key == w.truth.last_death_place && d.dropped == w.truth.last_death_dropped
    });
    let all_ok = home_ok && trades_ok && night_ok && death_ok && verify.ok();
    let code = if all_ok { Code::Ok } else { Code::Mismatch };

    if a.json {
        print_json(&serde_json::json!({
            "store": {"backend": backend, "events": commit.events, "nodes": stats.nodes, "edges": stats.edges, "build_s": build_s},
            "where_is_home": home,
            "trade_sticks_for_emeralds": trades,
            "trade_walk_from_home": walk,
            "last_night": night,
            "last_death": death,
            "ground_truth": w.truth,
            "answers_ms": answer_ms,
            "context_pack": pack,
            "replay_verified": verify.ok(),
            "matches_ground_truth": all_ok,
        }))?;
        return Ok(code);
    }
    outln!(
        "loci demo: synthetic world (seed {}, scale {}) in a temporary {backend} store",
        a.seed,
        a.scale
    );
    outln!(
        "  {} events -> {} nodes, {} edges, {} text documents; built in {:.2}s\n",
        commit.events,
        stats.nodes,
        stats.edges,
        stats.text_docs,
        build_s
    );
    outln!("Q: where is home?");
    match &home {
        Some(h) => outln!(
            "  1. {} ({}) at {}, confidence {}, since {}  [{}]\n     provenance: {}",
            h.place.name,
            h.place.key,
            block(h.place.anchor.and_then(|a| a.block)),
            h.confidence,
            h.since
                .map(|s| format!("t={s}"))
                .unwrap_or("the start".into()),
            ok(home_ok),
            provenance(&h.provenance)
        ),
        None => outln!("  no answer  [{}]", ok(home_ok)),
    }
    outln!("\nQ: where can I trade sticks for emeralds? (offers with confidence >= 0.5; most recent first, then nearest)");
    for (i, t) in trades.iter().enumerate() {
        let route = walk[i]
            .map(|c| format!("{c:.0} blocks from home"))
            .unwrap_or("no known path".into());
        outln!(
            "  {}. {} ({}) at {} ({route}): {} {} for {} {}, confidence {:.2}, last seen t={}\n     provenance: {}",
            i + 1,
            t.villager_name,
            t.villager,
            t.place
                .as_ref()
                .map(|p| format!("{} ({})", p.name, p.key))
                .unwrap_or("an unknown place".into()),
            t.gives_count,
            t.gives,
            t.wants_count,
            t.wants,
            t.confidence,
            t.last_seen,
            provenance(&t.provenance)
        );
    }
    outln!(
        "  [{}; below 0.5 and skipped: {}]",
        ok(trades_ok),
        list(&w.truth.low_confidence_offers)
    );
    outln!(
        "\nQ: what happened last night? (t={}..{})",
        night.from,
        night.to
    );
    for e in &night.events {
        outln!(
            "  t={} {} (event {}; observations {})",
            e.ts,
            e.summary,
            e.seq,
            list(&e.observations)
        );
    }
    outln!("  summary: {}  [{}]", night.summary, ok(night_ok));
    outln!("\nQ: where did I last die, and what did I drop?");
    match &death {
        Some(d) => {
            outln!(
                "  at {} ({}) {}, t={}, {}\n  dropped: {}\n     provenance: {}  [{}]",
                d.place.name,
                d.place.key,
                block(d.place.anchor.and_then(|a| a.block)),
                d.ts,
                d.cause.as_deref().unwrap_or("cause unknown"),
                d.dropped
                    .iter()
                    .map(|(i, c)| format!("{c} {i}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                provenance(&d.provenance),
                ok(death_ok)
            );
        }
        None => outln!("  no recorded death  [{}]", ok(death_ok)),
    }
    outln!(
        "\nContext pack for an LLM router: {pack_question:?} (budget 160 tokens, confidence >= 0.5)"
    );
    for s in &pack.snippets {
        outln!("  [score {:.2}] {}", s.score, s.text);
    }
    outln!(
        "  {} tokens used, {} snippets cut; retrieved in {} us",
        pack.tokens_used,
        pack.cut.len(),
        pack.elapsed_us
    );
    outln!(
        "\nanswered in {answer_ms:.2} ms; replay --verify: {}",
        if verify.ok() { "OK" } else { "MISMATCH" }
    );
    if !all_ok {
        errln!("error: an answer differs from the ground truth (exit code 1)");
    }
    Ok(code)
}
