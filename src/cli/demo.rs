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
use super::output::{block, count, errln, list, outln, print_json, statusln};

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
                .with_context(|| format!("writing {}", loci::error::shown_path(&path)))?;
        }
        statusln!(
            "wrote {} (sightings) to {}",
            count(w.events.len() as u64, "event", "events"),
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
            .with_context(|| format!("writing {}", loci::error::shown_path(&path)))?;
    }
    statusln!(
        "wrote {} to {}",
        count(w.events.len() as u64, "event", "events"),
        shown(&a.out)
    );
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
        loci::error::shown_path(path)
    }
}

fn write_events(path: &Path, events: &[loci::EventDraft]) -> Result<()> {
    let out: Box<dyn Write> = if is_stdout(path) {
        Box::new(super::output::stdout())
    } else {
        Box::new(
            std::fs::File::create(path)
                .with_context(|| format!("creating {}", loci::error::shown_path(path)))?,
        )
    };
    let mut w = std::io::BufWriter::new(out);
    let written = events
        .iter()
        .try_for_each(|e| writeln!(w, "{}", ingest::EventLine::from(e.clone()).to_json_line()))
        .and_then(|()| w.flush());
    // Standard output names itself in its errors (`output::stdout`); a file is named here.
    if is_stdout(path) {
        return Ok(written?);
    }
    written.with_context(|| format!("writing {}", loci::error::shown_path(path)))
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

/// The question the demo's context pack answers, as a router would ask it.
const PACK_QUESTION: &str = "where can I trade sticks for emeralds?";

/// The demo's store, built from the world.
struct Built {
    store: Store,
    _dir: tempfile::TempDir,
    backend: loci::BackendKind,
    events: usize,
    stats: loci::Stats,
    seconds: f64,
}

/// The demo's answers: the planner's four questions, and the router's pack.
struct Answers {
    home: Option<queries::HomeAnswer>,
    trades: Vec<queries::TradeAnswer>,
    /// The walk from home to each trade's place, in blocks.
    walk: Vec<Option<f64>>,
    night: queries::NightAnswer,
    death: Option<queries::DeathAnswer>,
    answer_ms: f64,
    pack: loci::ContextPack,
    verified: bool,
}

/// Whether each answer matches the world's ground truth.
struct Checks {
    home: bool,
    trades: bool,
    night: bool,
    death: bool,
}

/// `demo`: builds the world in a temporary store, answers its questions, checks the answers
/// against the ground truth and shows them; exit 1 when one differs.
pub fn demo(a: DemoArgs) -> Result<Code> {
    let w = world::generate(&WorldConfig {
        seed: a.seed,
        scale: a.scale,
        ..Default::default()
    });
    let built = build(&w, backend(&a.backend)?)?;
    let r = answer(&built.store)?;
    let checks = check(&r, &w.truth);
    let all_ok = checks.home && checks.trades && checks.night && checks.death && r.verified;
    let code = if all_ok { Code::Ok } else { Code::Mismatch };
    if a.json {
        print_json(&serde_json::json!({
            "store": {"backend": built.backend, "events": built.events, "nodes": built.stats.nodes, "edges": built.stats.edges, "build_s": built.seconds},
            "where_is_home": r.home,
            "trade_sticks_for_emeralds": r.trades,
            "trade_walk_from_home": r.walk,
            "last_night": r.night,
            "last_death": r.death,
            "ground_truth": w.truth,
            "answers_ms": r.answer_ms,
            "context_pack": r.pack,
            "replay_verified": r.verified,
            "matches_ground_truth": all_ok,
        }))?;
        return Ok(code);
    }
    show(&built, &r, &checks, &w.truth, a.seed, a.scale)?;
    if !all_ok {
        errln!("error: an answer differs from the ground truth (exit code 1)");
    }
    Ok(code)
}

/// The world's events ingested into a new store in a temporary directory.
fn build(w: &world::World, backend: loci::BackendKind) -> Result<Built> {
    let dir = tempfile::tempdir()?;
    let t = Instant::now();
    let store = Store::create(dir.path().join("demo-store"), backend)?;
    let commit = store.ingest(w.events.clone())?;
    let seconds = t.elapsed().as_secs_f64();
    let stats = store.stats();
    Ok(Built {
        store,
        _dir: dir,
        backend,
        events: commit.events,
        stats,
        seconds,
    })
}

/// The planner's questions (timed together), the router's pack, and `replay --verify`.
fn answer(store: &Store) -> Result<Answers> {
    let t = Instant::now();
    let home = queries::where_is_home(store, world::BOT, None)?;
    // Ranked by recency, then by the walk from home; the home is the answer above.
    let from = home
        .as_ref()
        .map(|h| h.place.key.clone())
        .unwrap_or_default();
    let ranked = queries::find_trade_from(
        store,
        "emerald",
        "stick",
        0.5,
        &from,
        queries::Overlay::Distance,
    )?;
    let trades = ranked.iter().map(|(t, _)| t.clone()).collect();
    let walk = ranked.iter().map(|(_, c)| *c).collect();
    let night = queries::last_night(store, None)?;
    let death = queries::last_death(store, world::BOT)?;
    let answer_ms = t.elapsed().as_secs_f64() * 1e3;
    // What an LLM router gets for the same question: ranked snippets under a token budget.
    let pack = Retriever::new(store)?.retrieve(
        PACK_QUESTION,
        &RetrieveOptions::default()
            .with_k(6)
            .with_budget(160)
            .with_min_confidence(0.5),
    )?;
    let verified = store.verify()?.ok();
    Ok(Answers {
        home,
        trades,
        walk,
        night,
        death,
        answer_ms,
        pack,
        verified,
    })
}

/// Each answer against the ground truth.
fn check(r: &Answers, truth: &world::GroundTruth) -> Checks {
    let expected: Vec<&str> = truth
        .sticks_for_emeralds
        .iter()
        .map(|t| t.villager.as_str())
        .collect();
    let got: Vec<&str> = r.trades.iter().map(|t| t.villager.as_str()).collect();
    let observed: Vec<String> = r
        .night
        .events
        .iter()
        .flat_map(|e| e.observations.clone())
        .collect();
    Checks {
        home: r.home.as_ref().is_some_and(|h| h.place.key == truth.home),
        trades: expected == got,
        night: observed == truth.last_night,
        death: r.death.as_ref().is_some_and(|d| {
            d.place.key == truth.last_death_place && d.dropped == truth.last_death_dropped
        }),
    }
}

/// The answers as text, each marked by its check.
fn show(
    built: &Built,
    r: &Answers,
    checks: &Checks,
    truth: &world::GroundTruth,
    seed: u64,
    scale: u32,
) -> Result<()> {
    outln!(
        "loci demo: synthetic world (seed {seed}, scale {scale}) in a temporary {} store",
        built.backend
    );
    outln!(
        "  {} events -> {} nodes, {} edges, {} text documents; built in {:.2}s\n",
        built.events,
        built.stats.nodes,
        built.stats.edges,
        built.stats.text_docs,
        built.seconds
    );
    outln!("Q: where is home?");
    match &r.home {
        Some(h) => outln!(
            "  1. {} ({}) at {}, confidence {}, since {}  [{}]\n     provenance: {}",
            h.place.name,
            h.place.key,
            block(h.place.anchor.and_then(|a| a.block)),
            h.confidence,
            h.since
                .map(|s| format!("t={s}"))
                .unwrap_or("the start".into()),
            ok(checks.home),
            provenance(&h.provenance)
        ),
        None => outln!("  no answer  [{}]", ok(checks.home)),
    }
    outln!("\nQ: where can I trade sticks for emeralds? (offers with confidence >= 0.5; most recent first, then nearest)");
    for (i, t) in r.trades.iter().enumerate() {
        let route = r.walk[i]
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
        ok(checks.trades),
        list(&truth.low_confidence_offers)
    );
    outln!(
        "\nQ: what happened last night? (t={}..{})",
        r.night.from,
        r.night.to
    );
    for e in &r.night.events {
        outln!(
            "  t={} {} (event {}; observations {})",
            e.ts,
            e.summary,
            e.seq,
            list(&e.observations)
        );
    }
    outln!("  summary: {}  [{}]", r.night.summary, ok(checks.night));
    outln!("\nQ: where did I last die, and what did I drop?");
    match &r.death {
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
                ok(checks.death)
            );
        }
        None => outln!("  no recorded death  [{}]", ok(checks.death)),
    }
    outln!(
        "\nContext pack for an LLM router: {PACK_QUESTION:?} (budget 160 tokens, confidence >= 0.5)"
    );
    for s in &r.pack.snippets {
        outln!("  [score {:.2}] {}", s.score, s.text);
    }
    outln!(
        "  {} tokens used, {} snippets cut; retrieved in {} us",
        r.pack.tokens_used,
        r.pack.cut.len(),
        r.pack.elapsed_us
    );
    outln!(
        "\nanswered in {:.2} ms; replay --verify: {}",
        r.answer_ms,
        if r.verified { "OK" } else { "MISMATCH" }
    );
    Ok(())
}
