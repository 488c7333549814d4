//! `loci bench locomo`: evidence recall on LoCoMo long conversations.
//!
//! Each conversation of the file goes into a store of its own through the conversation format
//! (one `TURN` event and one Passage node per turn, relative dates resolved; the text graph
//! extracted as for any passages). For each question, loci retrieves turns (passages only,
//! nothing recorded as used) and a BM25 index over exactly the same turn texts does the same;
//! recall@k is the share of the question's evidence turns among the first k, overall and per
//! category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value as Json;

use crate::conversation::{session_events, Session, SessionChecks, SessionField, Turn};
use crate::embed::SentenceEncoder;
use crate::error::{Error, Result};
use crate::retrieval::{RetrieveOptions, Retriever, SnippetKind};
use crate::storage::BackendKind;
use crate::store::Store;

/// Recall of one ranking in one category (or overall).
#[derive(Clone, Debug, Default, Serialize)]
pub struct CategoryRecall {
    pub n: usize,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
}

/// Recall and latency of one ranking.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LocomoMetrics {
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    pub by_category: BTreeMap<String, CategoryRecall>,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LocomoReport {
    pub n: usize,
    pub conversations: usize,
    pub turns: usize,
    /// The sentence encoder loci used (its directory), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoder: Option<String>,
    /// Seconds spent embedding the turns (0 without an encoder).
    pub embed_s: f64,
    pub loci: LocomoMetrics,
    pub bm25: LocomoMetrics,
    /// Every question with both rankings, for `--questions-out` (not part of the report).
    #[serde(skip)]
    pub questions: Vec<QuestionRanking>,
}

/// One question, its evidence turns, and the top 10 turns of each ranking.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QuestionRanking {
    pub conversation: String,
    pub category: String,
    pub question: String,
    pub evidence: Vec<String>,
    pub loci: Vec<String>,
    pub bm25: Vec<String>,
}

#[derive(Default)]
struct Tally {
    sums: BTreeMap<String, (usize, f64, f64)>,
    latencies: Vec<f64>,
}

impl Tally {
    fn add(&mut self, category: &str, ranked: &[String], gold: &[String], ms: f64) {
        let hits = |k: usize| {
            gold.iter()
                .filter(|g| ranked.iter().take(k).any(|r| r == *g))
                .count() as f64
                / gold.len() as f64
        };
        let (r5, r10) = (hits(5), hits(10));
        for key in ["all", category] {
            let e = self.sums.entry(key.to_string()).or_default();
            e.0 += 1;
            e.1 += r5;
            e.2 += r10;
        }
        self.latencies.push(ms);
    }

    fn finish(self) -> LocomoMetrics {
        let recall = |(n, r5, r10): (usize, f64, f64)| CategoryRecall {
            n,
            recall_5: r5 / n.max(1) as f64,
            recall_10: r10 / n.max(1) as f64,
        };
        let mut by_category: BTreeMap<String, CategoryRecall> = self
            .sums
            .iter()
            .map(|(k, v)| (k.clone(), recall(*v)))
            .collect();
        let all = by_category.remove("all").unwrap_or_default();
        let (p50_ms, p95_ms) = super::p50_p95(self.latencies);
        LocomoMetrics {
            recall_5: all.recall_5,
            recall_10: all.recall_10,
            by_category,
            p50_ms,
            p95_ms,
        }
    }
}

/// The sessions of one LoCoMo sample, in order, each checked as `ingest --format
/// conversation` checks a line ([`SessionChecks`]): figures over sessions taken in as 1970, or
/// over turns passed over or merged, would be of another conversation than the file's. `data`
/// names the file in a refusal.
fn sessions_of(sample: &Json, id: &str, data: &Path) -> Result<Vec<Session>> {
    // A field of the sample (its `sample_id`), or of its conversation.
    let in_sample = |field: String, message: String| Error::Input {
        file: data.display().to_string(),
        line: 0,
        field: format!("sample {id}: {field}"),
        message,
    };
    let refuse = |field: String, message| in_sample(format!("conversation.{field}"), message);
    let Some(conv) = sample.get("conversation") else {
        return Ok(Vec::new());
    };
    let mut checks = SessionChecks::default();
    let mut out = Vec::new();
    for n in 1..=200u32 {
        let name = format!("session_{n}");
        let Some(turns) = conv.get(&name) else {
            continue;
        };
        let Some(turns) = turns.as_array() else {
            return Err(refuse(name, "expected a list of turns".into()));
        };
        let time_key = format!("{name}_date_time");
        let time = match conv.get(&time_key) {
            Some(Json::String(t)) => t.clone(),
            Some(_) => return Err(refuse(time_key, "expected a string".into())),
            None => return Err(refuse(time_key, "is missing".into())),
        };
        let turns = turns
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let text = |field: &str| match t.get(field) {
                    Some(Json::String(s)) => Ok(s.clone()),
                    Some(_) => Err(refuse(
                        format!("{name}[{i}].{field}"),
                        "expected a string".into(),
                    )),
                    None => Err(refuse(format!("{name}[{i}].{field}"), "is missing".into())),
                };
                Ok(Turn {
                    speaker: text("speaker")?,
                    dia_id: text("dia_id")?,
                    text: text("text")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let session = Session {
            conversation: id.to_string(),
            session: n,
            time,
            turns,
        };
        checks.check(&session, &name).map_err(|r| match r.field {
            SessionField::Time => refuse(time_key.clone(), r.message),
            SessionField::Conversation => in_sample("sample_id".into(), r.message),
            SessionField::Turn(i, field) => refuse(format!("{name}[{i}].{field}"), r.message),
        })?;
        out.push(session);
    }
    Ok(out)
}

/// Evidence turn ids of a question, as passage keys (an entry may hold several ids).
fn evidence_of(q: &Json, id: &str) -> Vec<String> {
    q.get("evidence")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .flat_map(|e| e.split([';', ',', ' ']))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| format!("{id}:{e}"))
        .collect()
}

/// Runs the benchmark on the LoCoMo file `data`; with `encoder`, loci's retriever also ranks
/// turns by their sentence vectors (embedding a conversation's turns is timed apart, in
/// `embed_s`; each question's own embedding is part of its latency).
pub fn run_locomo_bench(
    data: &Path,
    opts: &RetrieveOptions,
    encoder: Option<Arc<SentenceEncoder>>,
    progress: &dyn Fn(usize, usize),
) -> Result<LocomoReport> {
    let raw = std::fs::read_to_string(data).map_err(|e| Error::io(data, e))?;
    let samples: Vec<Json> = serde_json::from_str(&raw).map_err(|e| Error::Input {
        file: data.display().to_string(),
        line: e.line(),
        field: "json".into(),
        message: e.to_string(),
    })?;
    let mut report = LocomoReport {
        conversations: samples.len(),
        encoder: encoder.as_ref().map(|e| e.dir().display().to_string()),
        ..LocomoReport::default()
    };
    let (mut loci, mut bm25) = (Tally::default(), Tally::default());
    let opts = RetrieveOptions {
        k: 10,
        kinds: vec![SnippetKind::Passage],
        record_usage: false,
        ..opts.clone()
    };
    for (i, sample) in samples.iter().enumerate() {
        let id = sample
            .get("sample_id")
            .and_then(Json::as_str)
            .map_or_else(|| format!("conv-{i}"), str::to_string);
        let sessions = sessions_of(sample, &id, data)?;
        let dir = tempfile::Builder::new()
            .prefix("loci-bench-locomo-")
            .tempdir()
            .map_err(|e| Error::io(std::env::temp_dir(), e))?;
        let store = Store::create(dir.path(), BackendKind::Redb)?;
        let events: Vec<_> = sessions.iter().flat_map(session_events).collect();
        report.turns += events.len();
        store.ingest(events)?;
        store.ingest(crate::extract::extract_mentions(&store)?)?;
        store.ingest(crate::extract::alias_links(&store)?)?;
        let mut retriever = Retriever::new(&store)?;
        if let Some(encoder) = &encoder {
            let t = Instant::now();
            retriever = retriever.with_encoder(encoder.clone());
            report.embed_s += t.elapsed().as_secs_f64();
        }
        let baseline = super::PassageBm25::build(&store)?;
        for q in sample
            .get("qa")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let Some(question) = q.get("question").and_then(Json::as_str) else {
                continue;
            };
            let gold = evidence_of(q, &id);
            if gold.is_empty() {
                continue;
            }
            let category = q
                .get("category")
                .map(|c| c.to_string().trim_matches('"').to_string())
                .unwrap_or_default();
            let t = Instant::now();
            let pack = retriever.retrieve(question, &opts)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let loci_ranked: Vec<String> = pack.snippets.into_iter().map(|s| s.id).collect();
            loci.add(&category, &loci_ranked, &gold, ms);
            let t = Instant::now();
            let hits = baseline.search(question, 10)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let bm25_ranked: Vec<String> = hits.into_iter().map(|(k, _)| k).collect();
            bm25.add(&category, &bm25_ranked, &gold, ms);
            report.n += 1;
            report.questions.push(QuestionRanking {
                conversation: id.clone(),
                category,
                question: question.to_string(),
                evidence: gold,
                loci: loci_ranked,
                bm25: bm25_ranked,
            });
        }
        progress(i + 1, samples.len());
    }
    report.loci = loci.finish();
    report.bm25 = bm25.finish();
    Ok(report)
}
