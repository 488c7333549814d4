//! `loci bench world`: memory dynamics on the synthetic world, lived day by day.
//!
//! Two stores take the same world one day at a time and consolidate after each day; one also
//! forgets down to its size at the end of a warm-up (a tenth of the days). At the end:
//!
//! - `place_recall@5`: the seed questions whose answer the ground truth knows (where is home,
//!   who trades emeralds for sticks, where did I last die and what did I drop), answered by the
//!   planner calls, and the two route questions (the nearest chest; the nearest bed in the
//!   dark, `routes::route_questions`); a question counts when the expected answer is among
//!   the first five;
//! - `episodic_coverage`: the share of key events (deaths, fights, trades, sleeps, discoveries)
//!   that the live summaries of their day or week still name (where it happened, with whom, what
//!   was found), on the store that forgets;
//! - `staleness_rate`: the share of re-seen edges whose effective confidence had fallen below
//!   0.5 before an event saw them again;
//! - `growth`: events and bytes held after warm-up and at the end, forgetting on (before and
//!   after a compaction) and off;
//! - `consolidate_ms`: time to consolidate one simulated day (median, 95th percentile, max),
//!   including its durable commit;
//! - `replay_events_per_s`: `replay --verify` on the store that keeps everything.
//!
//! - `multihop_f1`: templated two-hop questions over the world's graph ("in which region is
//!   the place where villager V lives", "what do the villagers of place P offer"), expected
//!   answers read from the store that keeps everything by walking its adjacency, answers from
//!   the store that forgets through the planner language; mean set F1.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use crate::dynamics::consolidate::{self, ConsolidateOptions, Level, RuleSummarizer};
use crate::dynamics::decay::{DecayPolicy, DAY};
use crate::dynamics::forget::{self, ForgetOptions};
use crate::error::{Error, Result};
use crate::model::{kinds, Assertion, EventDraft, Value};
use crate::queries;
use crate::storage::BackendKind;
use crate::store::Store;
use crate::world::{self, GroundTruth, WorldConfig};

/// What `loci bench world` runs.
#[derive(Clone, Debug)]
pub struct WorldBenchConfig {
    pub seed: u64,
    pub scale: u32,
    pub days: u32,
    pub backend: BackendKind,
}

/// Events and bytes held, forgetting on and off.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Growth {
    pub warmup_days: u32,
    pub events_after_warmup: u64,
    pub bytes_after_warmup: u64,
    pub events_end_forgetting: u64,
    /// Evicted records stay in the files until a compaction; this is before it.
    pub bytes_end_forgetting: u64,
    /// After `compact` (the questions are asked of the compacted store).
    pub bytes_end_forgetting_compacted: u64,
    pub events_end_keeping: u64,
    pub bytes_end_keeping: u64,
    /// `events_end_forgetting / events_after_warmup`.
    pub events_ratio_forgetting: f64,
    pub events_evicted: usize,
}

/// Milliseconds per consolidated day.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DaySpread {
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
    pub days: usize,
}

/// The report (JSON keys as the issue names them).
#[derive(Clone, Debug, Default, Serialize)]
pub struct WorldBenchReport {
    pub seed: u64,
    pub scale: u32,
    pub days: u32,
    pub events_generated: usize,
    #[serde(rename = "place_recall@5")]
    pub place_recall_at_5: f64,
    /// The same questions on the store that keeps everything.
    #[serde(rename = "place_recall@5_keeping")]
    pub place_recall_at_5_keeping: f64,
    /// Question -> answered (forgetting store).
    pub place_questions: BTreeMap<String, bool>,
    pub multihop_f1: Option<f64>,
    pub multihop_questions: usize,
    pub episodic_coverage: f64,
    /// The same on the store that keeps everything.
    pub episodic_coverage_keeping: f64,
    pub key_events: usize,
    /// Per kind of key event (deaths, fights, trades, slept_at, found): covered and total, on
    /// the store that forgets.
    pub coverage_by_kind: BTreeMap<String, (usize, usize)>,
    pub staleness_rate: f64,
    pub edges_reseen: usize,
    pub growth: Growth,
    pub consolidate_ms: DaySpread,
    pub replay_events_per_s: f64,
    /// `replay --verify` passed on both stores at the end.
    pub verify_ok: bool,
}

/// The world's events by day, oldest first.
fn by_day(events: Vec<EventDraft>) -> Vec<Vec<EventDraft>> {
    let mut days: Vec<Vec<EventDraft>> = Vec::new();
    for e in events {
        let d = e.ts.div_euclid(DAY as i64).max(0) as usize;
        if days.len() <= d {
            days.resize(d + 1, Vec::new());
        }
        days[d].push(e);
    }
    days
}

/// Runs the benchmark in temporary stores.
pub fn run_world_bench(config: &WorldBenchConfig) -> Result<WorldBenchReport> {
    let w = world::generate(&WorldConfig {
        seed: config.seed,
        scale: config.scale,
        days: config.days,
    });
    let tmp = |what: &str| {
        tempfile::Builder::new()
            .prefix(&format!("loci-bench-world-{what}-"))
            .tempdir()
            .map_err(|e| Error::io(std::env::temp_dir(), e))
    };
    let (dir_f, dir_k) = (tmp("forgetting")?, tmp("keeping")?);
    let forgetting = Store::create(dir_f.path(), config.backend)?;
    let keeping = Store::create(dir_k.path(), config.backend)?;
    let mut report = WorldBenchReport {
        seed: config.seed,
        scale: config.scale,
        days: config.days,
        events_generated: w.events.len(),
        ..WorldBenchReport::default()
    };
    let days = by_day(w.events);
    let warmup = (days.len() / 10).max(1) as u32;
    report.growth.warmup_days = warmup;
    let mut budget = None;
    let mut day_ms = Vec::new();
    let options = ConsolidateOptions::default();
    for (d, day) in days.into_iter().enumerate() {
        forgetting.ingest(day.clone())?;
        keeping.ingest(day)?;
        let t = Instant::now();
        let r = consolidate::consolidate(&forgetting, &RuleSummarizer, &options)?;
        if r.days > 0 {
            day_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        consolidate::consolidate(&keeping, &RuleSummarizer, &options)?;
        if d as u32 + 1 == warmup {
            budget = Some(forgetting.events_held());
            report.growth.events_after_warmup = forgetting.events_held();
            report.growth.bytes_after_warmup = forgetting.disk_bytes();
        } else if let Some(b) = budget {
            let f = forget::forget(&forgetting, &ForgetOptions::with_budget(b))?;
            report.growth.events_evicted += f.evicted;
        }
    }
    report.growth.events_end_forgetting = forgetting.events_held();
    report.growth.bytes_end_forgetting = forgetting.disk_bytes();
    // Before the compaction, which leaves only tombstones of what was forgotten.
    let by_kind = episodic_coverage(&forgetting)?;
    let (covered, key) = totals(&by_kind);
    report.episodic_coverage = covered as f64 / key.max(1) as f64;
    report.key_events = key;
    report.coverage_by_kind = by_kind;
    let (forgetting, _) = forgetting.compact()?;
    report.growth.bytes_end_forgetting_compacted = forgetting.disk_bytes();
    report.growth.events_end_keeping = keeping.events_held();
    report.growth.bytes_end_keeping = keeping.disk_bytes();
    report.growth.events_ratio_forgetting = report.growth.events_end_forgetting as f64
        / report.growth.events_after_warmup.max(1) as f64;
    day_ms.sort_by(f64::total_cmp);
    let at = |q: f64| {
        day_ms
            .get(((day_ms.len().max(1) - 1) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    report.consolidate_ms = DaySpread {
        p50: at(0.5),
        p95: at(0.95),
        max: day_ms.last().copied().unwrap_or(0.0),
        days: day_ms.len(),
    };

    let answers = place_questions(&forgetting, &keeping, &w.truth)?;
    report.place_recall_at_5 = share(&answers);
    report.place_questions = answers;
    report.place_recall_at_5_keeping = share(&place_questions(&keeping, &keeping, &w.truth)?);
    let (f1, questions) = multihop(&keeping, &forgetting)?;
    report.multihop_f1 = Some(f1);
    report.multihop_questions = questions;
    let (covered_k, key_k) = totals(&episodic_coverage(&keeping)?);
    report.episodic_coverage_keeping = covered_k as f64 / key_k.max(1) as f64;
    let (stale, reseen) = staleness(&keeping)?;
    report.staleness_rate = stale as f64 / reseen.max(1) as f64;
    report.edges_reseen = reseen;

    let t = Instant::now();
    let verified = keeping.verify()?;
    report.replay_events_per_s = verified.events_replayed as f64 / t.elapsed().as_secs_f64();
    report.verify_ok = verified.ok() && forgetting.verify()?.ok();
    Ok(report)
}

fn share(answers: &BTreeMap<String, bool>) -> f64 {
    answers.values().filter(|a| **a).count() as f64 / answers.len().max(1) as f64
}

/// The seed questions with a known answer, each true when the expected answer is among the
/// first five the planner gives.
fn place_questions(
    store: &Store,
    knowing: &Store,
    truth: &GroundTruth,
) -> Result<BTreeMap<String, bool>> {
    let mut out = BTreeMap::new();
    let home = queries::where_is_home(store, "bot", None)?;
    out.insert(
        "where is home".to_string(),
        home.is_some_and(|h| h.place.key == truth.home),
    );
    if let Some(expected) = truth.sticks_for_emeralds.first() {
        let offers = queries::find_trade(store, "emerald", "stick", 0.5)?;
        out.insert(
            "who trades emeralds for sticks".to_string(),
            offers
                .iter()
                .take(5)
                .any(|o| o.villager == expected.villager),
        );
    }
    let death = queries::last_death(store, "bot")?;
    out.insert(
        "where did I last die".to_string(),
        death
            .as_ref()
            .is_some_and(|d| d.place.key == truth.last_death_place),
    );
    out.insert(
        "what did I drop".to_string(),
        death.is_some_and(|d| {
            truth
                .last_death_dropped
                .iter()
                .all(|(item, _)| d.dropped.iter().any(|(got, _)| got == item))
        }),
    );
    super::routes::route_questions(store, knowing, truth, &mut out)?;
    Ok(out)
}

/// Mean set F1 of the templated two-hop questions (see the module documentation).
fn multihop(truth: &Store, asked: &Store) -> Result<(f64, usize)> {
    use std::collections::BTreeSet;
    let mut questions: Vec<(String, BTreeSet<String>)> = Vec::new();
    {
        let g = truth.graph();
        let located = g.relation_id(crate::model::relations::LOCATED_IN);
        let offers = g.relation_id(crate::model::relations::OFFERS);
        // One pass over the edges: out-neighbours by (node, relation).
        let mut outs: std::collections::HashMap<(u32, u32), Vec<crate::model::NodeId>> =
            std::collections::HashMap::new();
        for (_, c) in g.edges() {
            outs.entry((c.from.0, c.relation)).or_default().push(c.to);
        }
        let out = |n: crate::model::NodeId, rel: Option<u32>| -> Vec<crate::model::NodeId> {
            rel.and_then(|r| outs.get(&(n.0, r)).cloned())
                .unwrap_or_default()
        };
        let key = |n: crate::model::NodeId| g.node(n).map(|x| x.key.clone()).unwrap_or_default();
        let npcs: Vec<_> = g
            .nodes()
            .filter(|n| n.label == crate::model::labels::NPC)
            .collect();
        for npc in &npcs {
            let regions: BTreeSet<String> = out(npc.id, located)
                .into_iter()
                .flat_map(|p| out(p, located))
                .map(key)
                .collect();
            if !regions.is_empty() {
                let q = format!(
                    "MATCH (n {{key: '{}'}})-[:LOCATED_IN]->(p)-[:LOCATED_IN]->(r) RETURN r.key",
                    npc.key
                );
                questions.push((q, regions));
            }
        }
        let mut places: BTreeSet<crate::model::NodeId> = BTreeSet::new();
        for npc in &npcs {
            places.extend(out(npc.id, located));
        }
        for place in places {
            let items: BTreeSet<String> = npcs
                .iter()
                .filter(|v| out(v.id, located).contains(&place))
                .flat_map(|v| out(v.id, offers))
                .map(key)
                .collect();
            if !items.is_empty() {
                let q = format!(
                    "MATCH (i)<-[:OFFERS]-(v)-[:LOCATED_IN]->(p {{key: '{}'}}) RETURN i.key",
                    key(place)
                );
                questions.push((q, items));
            }
        }
    }
    let mut total = 0.0;
    for (q, expected) in &questions {
        let answer = crate::query::prepare(q, crate::query::Limits::default())
            .and_then(|p| p.run_without_recording(asked, &Default::default()));
        let got: BTreeSet<String> = match answer {
            Ok(r) => r
                .rows
                .iter()
                .filter_map(|row| row.first().and_then(|v| v.as_str()).map(str::to_string))
                .collect(),
            Err(_) => BTreeSet::new(),
        };
        let hit = got.intersection(expected).count() as f64;
        if hit > 0.0 {
            let (p, r) = (hit / got.len() as f64, hit / expected.len() as f64);
            total += 2.0 * p * r / (p + r);
        }
    }
    Ok((total / questions.len().max(1) as f64, questions.len()))
}

/// Key events of closed days, and how many of them the live summaries of their period name.
fn episodic_coverage(store: &Store) -> Result<BTreeMap<String, (usize, usize)>> {
    let summaries: Vec<_> = consolidate::summaries(store)?
        .into_iter()
        .filter(|s| s.level != Level::Episode)
        .collect();
    let closed_end = summaries.iter().map(|s| s.end).max().unwrap_or(i64::MIN);
    let name = |key: &str| consolidate::node_name(store, key);
    let mut by_kind: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    // Every event logged, deleted or not: forgotten ones are what coverage is about.
    let mut events = Vec::new();
    store.scan_log_with_deleted(1, |ev| {
        events.push(ev);
        Ok(true)
    })?;
    for ev in events {
        if ev.ts > closed_end {
            continue;
        }
        let field = |k: &str| match &ev.payload {
            Value::Map(m) => m.get(k).and_then(Value::as_str).map(str::to_string),
            _ => None,
        };
        let place = ev.place.as_deref().map(name);
        let mention: Option<(&str, String)> = match ev.kind.as_str() {
            kinds::DEATH => place.map(|p| ("deaths", p)),
            kinds::COMBAT => field("mob").map(|m| ("fights", m)),
            kinds::TRADE => field("with").map(|w| ("trades", name(&w))),
            kinds::SLEEP => place.map(|p| ("slept_at", p)),
            kinds::DISCOVERY => ev.assertions.iter().find_map(|a| match a {
                Assertion::UpsertNode(up) if up.name.is_some() => {
                    Some(("found", up.name.clone().unwrap_or_default()))
                }
                _ => None,
            }),
            _ => None,
        };
        let Some((list, needle)) = mention else {
            continue;
        };

        let named = summaries
            .iter()
            .filter(|s| s.start <= ev.ts && ev.ts <= s.end)
            .any(|s| {
                let d = &s.digest;
                let items = match list {
                    "deaths" => &d.deaths,
                    "fights" => &d.fights,
                    "trades" => &d.trades,
                    "slept_at" => &d.slept_at,
                    _ => &d.found,
                };
                items.iter().any(|i| i.contains(&needle))
            });
        let counts = by_kind.entry(list.to_string()).or_default();
        counts.0 += usize::from(named);
        counts.1 += 1;
    }
    Ok(by_kind)
}

/// Covered and total key events over every kind.
fn totals(by_kind: &BTreeMap<String, (usize, usize)>) -> (usize, usize) {
    by_kind
        .values()
        .fold((0, 0), |(c, t), (kc, kt)| (c + kc, t + kt))
}

/// Re-sightings of edges, and how many came after the edge's effective confidence had fallen
/// below 0.5 under the default decay policy.
fn staleness(store: &Store) -> Result<(usize, usize)> {
    let policy = DecayPolicy::default();
    let mut stale = 0;
    let mut reseen = 0;
    let edges: Vec<(String, String, String)> = {
        let g = store.graph();
        g.edges()
            .filter_map(|(_, c)| {
                Some((
                    g.node(c.from)?.key.clone(),
                    g.relation_name(c.relation).to_string(),
                    g.node(c.to)?.key.clone(),
                ))
            })
            .collect()
    };
    for (from, relation, to) in edges {
        let Some(edge) = store.edge_between(&from, &relation, &to)? else {
            continue;
        };
        let Some(half_life) = policy.half_life(&relation) else {
            continue;
        };
        let mut times = Vec::new();
        for seq in &edge.evidence {
            if let Some(ev) = store.event(*seq)? {
                if ev.kind != consolidate::SUMMARY {
                    times.push(ev.ts);
                }
            }
        }
        times.sort_unstable();
        let mut was_stale = false;
        for pair in times.windows(2) {
            let gap = (pair[1] - pair[0]) as f64;
            if edge.confidence as f64 * 0.5f64.powf(gap / half_life) < 0.5 {
                was_stale = true;
            }
        }
        if times.len() > 1 {
            reseen += 1;
            stale += usize::from(was_stale);
        }
    }
    Ok((stale, reseen))
}
