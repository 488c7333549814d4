//! `loci bench context`: the context builder's speed and prefix stability.
//!
//! - `latency`: a store of `events` events (the synthetic world of 60 days, padded with
//!   observations spread over the same days), consolidated; then contexts of `budget` tokens
//!   for a rotation of questions, timed per call (p50, p95) under each tokenizer, with one
//!   `ContextBuilder` reused as an agent would;
//! - `session`: a fresh store fed the world's events over `turns` turns, consolidating every
//!   20 turns, a saved context each turn: the share of turns whose stable prefix is
//!   byte-identical to the previous turn's, and the largest context against its budget.

use std::time::Instant;

use serde::Serialize;

use crate::context::{ContextBuilder, ContextOptions};
use crate::dynamics::consolidate::{self, ConsolidateOptions, RuleSummarizer};
use crate::error::{Error, Result};
use crate::model::EventDraft;
use crate::retrieval::Tokenizer;
use crate::storage::BackendKind;
use crate::store::Store;
use crate::world::{self, WorldConfig};

/// What `loci bench context` runs.
#[derive(Clone, Debug)]
pub struct ContextBenchConfig {
    pub events: usize,
    pub turns: usize,
    pub budget: usize,
    pub seed: u64,
}

/// Per-call timings of one tokenizer.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub calls: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub max_tokens: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ContextBenchReport {
    pub events: u64,
    pub budget: usize,
    pub consolidate_s: f64,
    pub latency_approx: Latency,
    pub latency_cl100k: Latency,
    pub turns: usize,
    /// Turns (after the first) whose prefix equals the previous turn's.
    pub prefix_stable: usize,
    pub prefix_stable_share: f64,
    pub cover_held_over: usize,
    pub session_max_tokens: usize,
}

const QUESTIONS: [&str; 4] = [
    "who trades emeralds for sticks",
    "where did I last die and what did I drop",
    "where is home",
    "what happened last night",
];

/// Consolidation runs every this many turns of the session.
const CONSOLIDATE_EVERY: usize = 20;

pub fn run_context_bench(config: &ContextBenchConfig) -> Result<ContextBenchReport> {
    let mut report = ContextBenchReport {
        budget: config.budget,
        turns: config.turns,
        ..ContextBenchReport::default()
    };
    let tmp = || {
        tempfile::Builder::new()
            .prefix("loci-bench-context-")
            .tempdir()
            .map_err(|e| Error::io(std::env::temp_dir(), e))
    };
    let days = 60;
    let w = world::generate(&WorldConfig {
        seed: config.seed,
        scale: 1,
        days,
    });

    // Latency on a large store.
    let dir = tmp()?;
    let store = Store::create(dir.path(), BackendKind::Redb)?;
    let padding = config.events.saturating_sub(w.events.len());
    let mut drafts = w.events.clone();
    for i in 0..padding {
        let ts = (i as i64 * days as i64 * 24_000) / padding.max(1) as i64;
        let mut d = EventDraft::new(ts, "bot", "OBSERVATION");
        d.payload = format!("noticed pattern {} near block {}", i % 97, i % 1013)
            .as_str()
            .into();
        drafts.push(d);
    }
    drafts.sort_by_key(|d| d.ts);
    for chunk in drafts.chunks(20_000) {
        store.ingest(chunk.to_vec())?;
    }
    let t = Instant::now();
    consolidate::consolidate(&store, &RuleSummarizer, &ConsolidateOptions::default())?;
    report.consolidate_s = t.elapsed().as_secs_f64();
    report.events = store.events_held();
    let builder = ContextBuilder::new(&store)?;
    for (tokenizer, out) in [
        (Tokenizer::Approx, &mut report.latency_approx),
        (Tokenizer::Cl100kBase, &mut report.latency_cl100k),
    ] {
        *out = time_contexts(&builder, config.budget, tokenizer)?;
    }
    drop(builder);
    drop(store);

    // Prefix stability over a session.
    let dir = tmp()?;
    let store = Store::create(dir.path(), BackendKind::Redb)?;
    let per_turn = w.events.len().div_ceil(config.turns.max(1)).max(1);
    let mut events = w.events.into_iter();
    let mut previous: Option<String> = None;
    let builder = ContextBuilder::new(&store)?;
    for turn in 0..config.turns {
        let batch: Vec<EventDraft> = events.by_ref().take(per_turn).collect();
        if !batch.is_empty() {
            store.ingest(batch)?;
        }
        if turn > 0 && turn % CONSOLIDATE_EVERY == 0 {
            consolidate::consolidate(&store, &RuleSummarizer, &ConsolidateOptions::default())?;
        }
        let mut opts = ContextOptions::with_budget(config.budget);
        opts.question = Some(QUESTIONS[turn % QUESTIONS.len()].to_string());
        opts.save = true;
        let c = builder.build(&opts)?;
        report.session_max_tokens = report.session_max_tokens.max(c.tokens);
        report.cover_held_over += usize::from(c.cover_held_over);
        if previous.as_deref() == Some(c.prefix_digest.as_str()) {
            report.prefix_stable += 1;
        }
        previous = Some(c.prefix_digest);
    }
    report.prefix_stable_share =
        report.prefix_stable as f64 / config.turns.saturating_sub(1).max(1) as f64;
    Ok(report)
}

/// Times contexts for the rotation of questions (after one warm-up call each).
fn time_contexts(
    builder: &ContextBuilder<'_>,
    budget: usize,
    tokenizer: Tokenizer,
) -> Result<Latency> {
    const CALLS: usize = 60;
    let mut samples = Vec::with_capacity(CALLS);
    let mut max_tokens = 0;
    for i in 0..CALLS + QUESTIONS.len() {
        let mut opts = ContextOptions::with_budget(budget);
        opts.question = Some(QUESTIONS[i % QUESTIONS.len()].to_string());
        opts.tokenizer = tokenizer;
        opts.record_usage = false;
        let t = Instant::now();
        let c = builder.build(&opts)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        max_tokens = max_tokens.max(c.tokens);
        if i >= QUESTIONS.len() {
            samples.push(ms);
        }
    }
    let (p50_ms, p95_ms) = super::p50_p95(samples);
    Ok(Latency {
        calls: CALLS,
        p50_ms,
        p95_ms,
        max_tokens,
    })
}
