//! `loci`: the command-line interface, a thin layer over the library. Raw flags are parsed by
//! clap, resolved into library calls, and printed as text or (`--json`) as JSON.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use loci::ingest::{self, Format, SourceBatch};
use loci::retrieval::RankingMode;
use loci::world::{self, WorldConfig};
use loci::{
    queries, BackendKind, ExpandOptions, RetrieveOptions, Retriever, SearchFilter, SnippetKind,
    Store, Target,
};

#[derive(Parser)]
#[command(
    name = "loci",
    version,
    about = "Memory for autonomous agents: an event-sourced property graph with full-text search"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct StoreArg {
    /// Store directory.
    #[arg(long, value_name = "DIR")]
    store: PathBuf,
}

#[derive(Subcommand)]
enum Command {
    /// Create a new, empty store.
    Init {
        #[command(flatten)]
        store: StoreArg,
        /// Storage backend, recorded in the store.
        #[arg(long, default_value = "redb", value_parser = ["redb", "sled"])]
        backend: String,
    },
    /// Append JSON Lines files to the log as one atomic batch (or one per --commit-every events).
    Ingest {
        #[command(flatten)]
        store: StoreArg,
        /// Input format; detected from the first line when not given.
        #[arg(long, value_parser = ["events", "graph", "passages", "triples"])]
        format: Option<String>,
        /// Commit every N events as its own atomic batch (default: everything in one batch).
        #[arg(long, value_name = "N")]
        commit_every: Option<usize>,
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Build entities and MENTIONS edges from the text of every passage (titles, title
    /// mentions, capitalised names, years), one EXTRACTION event per passage.
    Extract {
        #[command(flatten)]
        store: StoreArg,
        #[arg(long)]
        json: bool,
    },
    /// Full-text search over nodes and events.
    Search {
        #[command(flatten)]
        store: StoreArg,
        text: String,
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Only nodes with this label (repeatable).
        #[arg(long)]
        label: Vec<String>,
        /// Only events of this kind (repeatable).
        #[arg(long)]
        kind: Vec<String>,
        /// Only documents with world time >= T.
        #[arg(long, value_name = "T")]
        from: Option<i64>,
        /// Only documents with world time <= T.
        #[arg(long, value_name = "T")]
        to: Option<i64>,
        #[arg(long)]
        json: bool,
    },
    /// Nodes within N hops of a node (by key, or the best name match).
    Neighbors {
        #[command(flatten)]
        store: StoreArg,
        node: String,
        #[arg(long, default_value_t = 1)]
        depth: u8,
        #[arg(long, default_value_t = 0.0)]
        min_confidence: f32,
        /// Only these relations (repeatable).
        #[arg(long)]
        relation: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Retrieve a context pack for a question: ranked snippets with provenance, and why.
    Query {
        #[command(flatten)]
        store: StoreArg,
        question: String,
        /// Snippets at most.
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// Token budget of the rendered snippets.
        #[arg(long)]
        budget: Option<usize>,
        #[arg(long, default_value = "approx", value_parser = ["approx", "cl100k_base"])]
        tokenizer: String,
        #[arg(long, default_value_t = 0.0)]
        min_confidence: f32,
        /// Only these relations (repeatable).
        #[arg(long)]
        relation: Vec<String>,
        /// Never these relations (repeatable).
        #[arg(long)]
        deny_relation: Vec<String>,
        /// Only these kinds of snippets (repeatable): fact, passage, event, entity.
        #[arg(long, value_parser = ["fact", "passage", "event", "entity"])]
        kind: Vec<String>,
        /// Judge validity at this world time (default: the latest event).
        #[arg(long)]
        as_of: Option<i64>,
        /// Also use facts whose validity has ended.
        #[arg(long)]
        include_ended: bool,
        #[arg(long, default_value = "fused", value_parser = ["fused", "text", "graph"])]
        mode: String,
        #[arg(long)]
        json: bool,
    },
    /// Run a planner query: a saved query (a `.gq` file, or a name from --queries), or inline
    /// text given with --query.
    Run {
        #[command(flatten)]
        store: StoreArg,
        /// A `.gq` file or the name of a saved query.
        saved: Option<String>,
        /// Query text instead of a saved query.
        #[arg(long)]
        query: Option<String>,
        /// NAME=VALUE (repeatable).
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Where saved queries are found by name.
        #[arg(long, default_value = "queries")]
        queries: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// List the saved queries of a directory with their parameters.
    Queries {
        #[arg(long, default_value = "queries")]
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Counts and sizes of a store.
    Stats {
        #[command(flatten)]
        store: StoreArg,
        #[arg(long)]
        json: bool,
    },
    /// Rebuild every derived view from the log and compare it with the live state.
    Replay {
        #[command(flatten)]
        store: StoreArg,
        /// Required: compare, report differences, exit 1 on any.
        #[arg(long)]
        verify: bool,
        #[arg(long)]
        json: bool,
    },
    /// Write the synthetic world as event JSON Lines (and its ground truth).
    World {
        #[arg(long, default_value_t = 42)]
        seed: u64,
        #[arg(long, default_value_t = 1)]
        scale: u32,
        #[arg(long, default_value_t = 6)]
        days: u32,
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        answers: Option<PathBuf>,
    },
    /// Build the synthetic world in a temporary store and answer the seed questions.
    Demo {
        #[arg(long, default_value_t = 42)]
        seed: u64,
        #[arg(long, default_value_t = 1)]
        scale: u32,
        #[arg(long, default_value = "redb", value_parser = ["redb", "sled"])]
        backend: String,
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// MetaQA: planner path queries (Hits@1, F1) and retrieval (answer recall@10).
    Metaqa {
        #[arg(long)]
        kb: PathBuf,
        #[arg(long)]
        questions: PathBuf,
        #[arg(long)]
        qtypes: PathBuf,
        #[arg(long)]
        answerable: Option<PathBuf>,
        /// Run retrieval mode on the first N questions only.
        #[arg(long)]
        retrieval_limit: Option<usize>,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Passage recall of loci and of BM25 on a question set (formats: ../shared/datasets).
    Retrieval {
        #[arg(long)]
        corpus: PathBuf,
        #[arg(long)]
        questions: PathBuf,
        #[arg(long)]
        triples: Option<PathBuf>,
        /// Retrieval option NAME=VALUE (repeatable; see RetrieveOptions::set).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Also write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Ingest, open, traversal and search on a synthetic scale-free graph.
    Graph {
        #[arg(long, default_value_t = 200_000)]
        nodes: u32,
        #[arg(long, default_value_t = 1_000_000)]
        edges: u32,
        #[arg(long, default_value = "redb", value_parser = ["redb", "sled"])]
        backend: String,
        #[arg(long, default_value_t = 100_000)]
        edges_per_batch: usize,
        /// Where to build the store (default: a temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Also write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

fn main() {
    // Like other command-line tools, stop quietly when the reader of our output goes away
    // (`loci ... | head`) instead of failing on the broken pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE at start-up, before any thread
    // exists, is what C programs get by default.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}

/// `NAME=VALUE` flag values as pairs.
fn name_values(flag: &str, raw: &[String]) -> Result<Vec<(String, String)>> {
    raw.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => Ok((k.to_string(), v.to_string())),
            None => bail!("{flag} takes NAME=VALUE, got {kv:?}"),
        })
        .collect()
}

/// The progress bar of a benchmark over questions (hidden when stderr is not a terminal).
fn question_bar() -> ProgressBar {
    ProgressBar::new(0).with_style(
        ProgressStyle::with_template("questions {pos}/{len} {wide_bar} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

fn advance(bar: &ProgressBar, done: usize, total: usize) {
    bar.set_length(total as u64);
    bar.set_position(done as u64);
}

/// Prints a benchmark report and, when asked, writes it as JSON to a file too.
fn emit_report(report: &impl serde::Serialize, json: Option<&Path>) -> Result<()> {
    print_json(report)?;
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn print_json(v: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn open(store: &StoreArg) -> Result<Store> {
    Ok(Store::open(&store.store)?)
}

fn backend(name: &str) -> Result<BackendKind> {
    Ok(name.parse()?)
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Init { store, backend: b } => {
            let s = Store::create(&store.store, backend(&b)?)?;
            println!(
                "created {} store at {}",
                s.backend_kind(),
                store.store.display()
            );
        }
        Command::Ingest {
            store,
            format,
            commit_every,
            files,
            json,
        } => ingest_cmd(&store, format.as_deref(), commit_every, &files, json)?,
        Command::Search {
            store,
            text,
            limit,
            label,
            kind,
            from,
            to,
            json,
        } => {
            let s = open(&store)?;
            let time = match (from, to) {
                (None, None) => None,
                (f, t) => Some((f.unwrap_or(i64::MIN), t.unwrap_or(i64::MAX))),
            };
            let filter = SearchFilter {
                labels: label,
                kinds: kind,
                nodes_only: None,
                time,
            };
            let hits = s.search(&text, &filter, limit)?;
            let rows: Vec<serde_json::Value> = hits
                .iter()
                .map(|h| describe_target(&s, h.target, h.score))
                .collect::<Result<_>>()?;
            if json {
                print_json(&rows)?;
            } else if rows.is_empty() {
                println!("no hits");
            } else {
                for (i, r) in rows.iter().enumerate() {
                    println!(
                        "{:>3}. {:>7.3}  {}",
                        i + 1,
                        r["score"].as_f64().unwrap_or(0.0),
                        r["text"].as_str().unwrap_or("")
                    );
                }
            }
        }
        Command::Neighbors {
            store,
            node,
            depth,
            min_confidence,
            relation,
            json,
        } => {
            let s = open(&store)?;
            if !(0.0..=1.0).contains(&min_confidence) {
                bail!("--min-confidence must be in [0, 1], got {min_confidence}");
            }
            let start = resolve_node(&s, &node)?;
            let opts = ExpandOptions {
                min_confidence,
                relations: relation,
                ..Default::default()
            };
            let found = s.neighbors(start.id, depth, &opts);
            if json {
                print_json(&serde_json::json!({"start": start.key, "neighbors": found}))?;
            } else {
                println!(
                    "{} ({}, {}): {} nodes within {depth} hops",
                    start.key,
                    start.name,
                    start.label,
                    found.len()
                );
                for n in found {
                    let arrow = if n.incoming { "<-" } else { "->" };
                    println!(
                        "  hop {} {arrow}{}{arrow} {} ({}, {})  confidence {:.2}  edge {}",
                        n.hops, n.relation, n.key, n.name, n.label, n.confidence, n.edge
                    );
                }
            }
        }
        Command::Extract { store, json } => {
            let s = open(&store)?;
            let c = s.ingest(loci::extract::extract_mentions(&s)?)?;
            let a = s.ingest(loci::extract::alias_links(&s)?)?;
            if json {
                print_json(&serde_json::json!({"mentions": c, "aliases": a}))?;
            } else {
                println!(
                    "extracted from {} passages: {} entities and {} mentions upserted; {} SAME_AS links between near-duplicate names",
                    c.events, c.nodes_upserted, c.edges_upserted, a.edges_upserted
                );
            }
        }
        Command::Query {
            store,
            question,
            k,
            budget,
            tokenizer,
            min_confidence,
            relation,
            deny_relation,
            kind,
            as_of,
            include_ended,
            mode,
            json,
        } => {
            let s = open(&store)?;
            let kinds = kind
                .iter()
                .map(|k| match k.as_str() {
                    "fact" => SnippetKind::Fact,
                    "passage" => SnippetKind::Passage,
                    "event" => SnippetKind::Event,
                    _ => SnippetKind::Entity,
                })
                .collect();
            let opts = RetrieveOptions {
                k,
                budget,
                token_counter: tokenizer,
                min_confidence,
                relations: relation,
                deny_relations: deny_relation,
                kinds,
                as_of,
                include_ended,
                mode: match mode.as_str() {
                    "text" => RankingMode::Text,
                    "graph" => RankingMode::Graph,
                    _ => RankingMode::Fused,
                },
                ..Default::default()
            };
            let pack = Retriever::new(&s)?.retrieve(&question, &opts)?;
            if json {
                print_json(&pack)?;
            } else {
                print_pack(&pack);
            }
        }
        Command::Run {
            store,
            saved,
            query,
            params,
            queries,
            json,
        } => {
            let args = name_values("--param", &params)?;
            let s = open(&store)?;
            let (text, result) = match (saved, query) {
                (Some(_), Some(_)) => bail!("give a saved query or --query, not both"),
                (None, None) => bail!("give a saved query (file or name) or --query TEXT"),
                (None, Some(text)) => {
                    let params = loci::query::params_from_pairs(&args)?;
                    let r = loci::query::run(&s, &text, &params);
                    (text, r)
                }
                (Some(name), None) => {
                    let q = if name.ends_with(".gq") || Path::new(&name).is_file() {
                        loci::query::SavedQuery::load(Path::new(&name))?
                    } else {
                        let all = loci::query::SavedQueries::load(&queries)?;
                        all.get(&name).cloned().ok_or_else(|| {
                            anyhow::anyhow!("no saved query {name:?} in {}", queries.display())
                        })?
                    };
                    let r = q.run(&s, &args);
                    (q.prepared.text.clone(), r)
                }
            };
            let result = result.map_err(|e| anyhow::anyhow!("{}", e.render(&text)))?;
            if json {
                print_json(&result)?;
            } else {
                println!("{}", result.columns.join(" | "));
                for row in &result.rows {
                    let cells: Vec<String> = row
                        .iter()
                        .map(|v| match v {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect();
                    println!("{}", cells.join(" | "));
                }
                println!("({} rows, {} us)", result.rows.len(), result.elapsed_us);
            }
        }
        Command::Queries { dir, json } => {
            let all = loci::query::SavedQueries::load(&dir)?;
            if json {
                print_json(&all.list())?;
            } else {
                for q in all.list() {
                    let params: Vec<String> = q
                        .params
                        .iter()
                        .map(|p| match &p.default {
                            Some(d) => format!("{}: {:?} = {d}", p.name, p.ty),
                            None => format!("{}: {:?}", p.name, p.ty),
                        })
                        .collect();
                    println!("{}({})\n    {}", q.name, params.join(", "), q.description);
                }
            }
        }
        Command::Stats { store, json } => {
            let s = open(&store)?;
            let stats = s.stats();
            let rss = loci::bench::rss_bytes();
            if json {
                let mut v = serde_json::to_value(&stats)?;
                v["rss_bytes"] = rss.into();
                print_json(&v)?;
            } else {
                println!("backend      {}", stats.backend);
                println!("events       {}", stats.events);
                println!("nodes        {}", stats.nodes);
                println!("edges        {}", stats.edges);
                println!("relations    {}", stats.relations);
                println!("labels       {}", stats.labels);
                println!(
                    "text docs    {} (indexed to seq {})",
                    stats.text_docs, stats.text_indexed_seq
                );
                println!(
                    "disk         {} bytes in {}, {} bytes of full-text index",
                    stats.disk_bytes_backend, stats.backend, stats.disk_bytes_text
                );
                println!(
                    "memory       {} bytes of adjacency, {rss} bytes resident",
                    stats.adjacency_bytes
                );
            }
        }
        Command::Replay {
            store,
            verify,
            json,
        } => {
            if !verify {
                bail!("replay needs --verify (replay never rewrites the live store)");
            }
            let s = open(&store)?;
            let t = Instant::now();
            let report = s.verify()?;
            if json {
                print_json(&report)?;
            } else {
                println!(
                    "replayed {} events into {} nodes, {} edges, {} text documents in {:.2}s",
                    report.events_replayed,
                    report.nodes,
                    report.edges,
                    report.text_docs,
                    t.elapsed().as_secs_f64()
                );
                for d in &report.differences {
                    println!("DIFFERENCE: {d}");
                }
                if report.more_differences > 0 {
                    println!("... and {} more differences", report.more_differences);
                }
                println!(
                    "{}",
                    if report.ok() {
                        "OK: live state equals replay"
                    } else {
                        "MISMATCH"
                    }
                );
            }
            if !report.ok() {
                std::process::exit(1);
            }
        }
        Command::World {
            seed,
            scale,
            days,
            out,
            answers,
        } => {
            let w = world::generate(&WorldConfig { seed, scale, days });
            write_events(&out, &w.events)?;
            if let Some(a) = answers {
                std::fs::write(&a, serde_json::to_string_pretty(&w.truth)?)
                    .with_context(|| format!("writing {}", a.display()))?;
            }
            println!("wrote {} events to {}", w.events.len(), out.display());
        }
        Command::Demo {
            seed,
            scale,
            backend: b,
            json,
        } => demo(seed, scale, backend(&b)?, json)?,
        Command::Bench(BenchCommand::Metaqa {
            kb,
            questions,
            qtypes,
            answerable,
            retrieval_limit,
            json,
        }) => {
            let tmp = tempfile::tempdir()?;
            let bar = question_bar();
            let report = loci::bench::run_metaqa_bench(
                &tmp.path().join("store"),
                &kb,
                &questions,
                &qtypes,
                answerable.as_deref(),
                retrieval_limit,
                &|done, total| advance(&bar, done, total),
            )?;
            bar.finish_and_clear();
            emit_report(&report, json.as_deref())?;
        }
        Command::Bench(BenchCommand::Retrieval {
            corpus,
            questions,
            triples,
            set,
            json,
        }) => {
            let mut opts = RetrieveOptions::default();
            for (k, v) in name_values("--set", &set)? {
                opts.set(&k, &v)?;
            }
            let tmp = tempfile::tempdir()?;
            let bar = question_bar();
            let report = loci::bench::run_retrieval_bench(
                &tmp.path().join("store"),
                &corpus,
                &questions,
                triples.as_deref(),
                &opts,
                &|done, total| advance(&bar, done, total),
            )?;
            bar.finish_and_clear();
            emit_report(&report, json.as_deref())?;
        }
        Command::Bench(BenchCommand::Graph {
            nodes,
            edges,
            backend: b,
            edges_per_batch,
            dir,
            json,
        }) => {
            let tmp = tempfile::tempdir()?;
            let dir = dir.unwrap_or_else(|| tmp.path().join("bench"));
            let spec = loci::bench::GraphSpec {
                nodes,
                edges,
                ..Default::default()
            };
            let bar = spinner(&format!("building {nodes} nodes, {edges} edges ({b})"));
            let report = loci::bench::run_graph_bench(&dir, backend(&b)?, &spec, edges_per_batch)?;
            bar.finish_and_clear();
            let fresh = child_open(&dir).ok();
            let mut v = serde_json::to_value(&report)?;
            if let Some((full, secs, empty)) = fresh {
                v["open_fresh_process_s"] = secs.into();
                v["rss_open_bytes"] = full.into();
                v["rss_empty_store_bytes"] = empty.into();
                v["rss_bytes_per_edge"] =
                    ((full.saturating_sub(empty)) as f64 / report.edges.max(1) as f64).into();
            }
            emit_report(&v, json.as_deref())?;
        }
    }
    Ok(())
}

/// Resident memory and wall time of `loci stats` (which opens the store) on `dir`, and the
/// resident memory of the same on an empty store, each in a fresh process: what a user who
/// opens the store pays.
fn child_open(dir: &Path) -> Result<(u64, f64, u64)> {
    let exe = std::env::current_exe()?;
    let run = |d: &Path| -> Result<(u64, f64)> {
        let t = Instant::now();
        let out = std::process::Command::new(&exe)
            .args(["stats", "--json", "--store"])
            .arg(d)
            .output()?;
        let secs = t.elapsed().as_secs_f64();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        Ok((v["rss_bytes"].as_u64().unwrap_or(0), secs))
    };
    let empty = tempfile::tempdir()?;
    Store::create(empty.path().join("s"), BackendKind::Redb)?;
    let (full, secs) = run(dir)?;
    Ok((full, secs, run(&empty.path().join("s"))?.0))
}

fn spinner(msg: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_message(msg.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

fn write_events(path: &Path, events: &[loci::EventDraft]) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    for e in events {
        writeln!(w, "{}", ingest::EventLine::from(e.clone()).to_json_line())?;
    }
    w.flush()?;
    Ok(())
}

fn ingest_cmd(
    store: &StoreArg,
    format: Option<&str>,
    commit_every: Option<usize>,
    files: &[PathBuf],
    json: bool,
) -> Result<()> {
    let s = open(store)?;
    let format: Option<Format> = format.map(str::parse).transpose()?;
    let mut all = SourceBatch::default();
    let read_bar = ProgressBar::new(files.len() as u64).with_style(
        ProgressStyle::with_template("reading {pos}/{len} files {wide_bar} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    for f in files {
        read_bar.set_message(f.display().to_string());
        all.append(ingest::read_file(f, format)?);
        read_bar.inc(1);
    }
    read_bar.finish_and_clear();
    let batches = match commit_every {
        Some(n) => all.chunks(n),
        None => vec![all],
    };
    let total: usize = batches.iter().map(|b| b.events.len()).sum();
    let bar = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("committing {pos}/{len} events {wide_bar} {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut out = std::io::stdout().lock();
    for b in batches {
        let n = b.events.len();
        let c = b.commit(&s)?;
        bar.inc(n as u64);
        // One line per durable commit, flushed at once: a reader (or the crash test) may rely
        // on every printed line being committed.
        if json {
            writeln!(out, "{}", serde_json::to_string(&c)?)?;
        } else {
            writeln!(
                out,
                "committed events {}..={} ({} events; {} nodes and {} edges upserted, {} nodes and {} edges removed)",
                c.first_seq, c.last_seq, c.events, c.nodes_upserted, c.edges_upserted, c.nodes_removed, c.edges_removed
            )?;
        }
        out.flush()?;
    }
    bar.finish_and_clear();
    Ok(())
}

fn print_pack(pack: &loci::ContextPack) {
    println!("question: {}", pack.question);
    for seed in &pack.seeds {
        println!(
            "  seed {} ({}): {}, weight {:.3}",
            seed.key, seed.name, seed.source, seed.weight
        );
    }
    for (i, s) in pack.snippets.iter().enumerate() {
        println!(
            "\n{:>2}. [{:?} {}] score {:.3} (text {:.2}, graph {:.2}, confidence {:.2}, recency {:.2}, salience {:.2}), {} tokens",
            i + 1, s.kind, s.id, s.score, s.parts.text, s.parts.graph, s.parts.confidence, s.parts.recency, s.parts.salience, s.tokens
        );
        let mut text: String = s.text.chars().take(300).collect();
        if text.len() < s.text.len() {
            text.push_str("...");
        }
        println!("    {text}");
        for w in &s.why {
            println!("    why: {w}");
        }
        let p = &s.provenance;
        if !(p.edges.is_empty() && p.events.is_empty() && p.passages.is_empty()) {
            println!(
                "    provenance: edges {:?}, events {:?}, passages {:?}",
                p.edges, p.events, p.passages
            );
        }
    }
    let budget = pack
        .budget
        .map(|b| b.to_string())
        .unwrap_or("unlimited".into());
    println!(
        "\n{} tokens of {budget} ({}); {} cut; {} us",
        pack.tokens_used,
        pack.token_counter,
        pack.cut.len(),
        pack.elapsed_us
    );
    for c in &pack.cut {
        println!(
            "  cut {:?} {} ({} tokens, score {:.3})",
            c.kind, c.id, c.tokens, c.score
        );
    }
}

fn resolve_node(s: &Store, key_or_name: &str) -> Result<loci::Node> {
    if let Some(n) = s.node_by_key(key_or_name) {
        return Ok(n);
    }
    let filter = SearchFilter {
        nodes_only: Some(true),
        ..Default::default()
    };
    for h in s.search(key_or_name, &filter, 1)? {
        if let Target::Node(id) = h.target {
            if let Some(n) = s.node(id) {
                eprintln!(
                    "note: no node has key {key_or_name:?}; using best name match {:?} ({})",
                    n.key, n.name
                );
                return Ok(n);
            }
        }
    }
    bail!("no node has key {key_or_name:?} and no node name matches it")
}

fn describe_target(s: &Store, t: Target, score: f32) -> Result<serde_json::Value> {
    Ok(match t {
        Target::Node(id) => {
            let n = s.node(id);
            serde_json::json!({
                "type": "node", "id": id.0, "score": score,
                "key": n.as_ref().map(|n| n.key.clone()),
                "label": n.as_ref().map(|n| n.label.clone()),
                "text": n.as_ref().map(|n| format!("[{}] {} ({})", n.label, n.name, n.key)),
            })
        }
        Target::Event(seq) => {
            let e = s.event(seq)?;
            serde_json::json!({
                "type": "event", "seq": seq, "score": score,
                "kind": e.as_ref().map(|e| e.kind.clone()),
                "ts": e.as_ref().map(|e| e.ts),
                "text": e.as_ref().map(|e| format!("[event {seq} @{}] {}", e.ts, e.text())),
            })
        }
    })
}

fn demo(seed: u64, scale: u32, backend: BackendKind, json: bool) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("demo-store");
    let t = Instant::now();
    let w = world::generate(&WorldConfig {
        seed,
        scale,
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
        &RetrieveOptions {
            k: 6,
            budget: Some(160),
            min_confidence: 0.5,
            ..Default::default()
        },
    )?;
    let verify = store.verify()?;

    if json {
        return print_json(&serde_json::json!({
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
        }));
    }
    println!(
        "loci demo: synthetic world (seed {seed}, scale {scale}) in a temporary {backend} store"
    );
    println!(
        "  {} events -> {} nodes, {} edges, {} text documents; built in {:.2}s\n",
        commit.events, stats.nodes, stats.edges, stats.text_docs, build_s
    );
    let ok = |good: bool| {
        if good {
            "matches ground truth"
        } else {
            "DIFFERS from ground truth"
        }
    };
    println!("Q: where is home?");
    match &home {
        Some(h) => println!(
            "  1. {} ({}) at {:?}, confidence {:.2}, since t={}  [{}]\n     provenance: edge {}, events {:?}, observations {:?}",
            h.place.name, h.place.key, h.place.anchor.and_then(|a| a.block), h.confidence,
            h.since.map(|s| s.to_string()).unwrap_or("the start".into()),
            ok(h.place.key == w.truth.home),
            h.provenance.edges[0], h.provenance.events, h.provenance.observations
        ),
        None => println!("  no answer"),
    }
    println!("\nQ: where can I trade sticks for emeralds? (offers with confidence >= 0.5; most recent first, then nearest)");
    for (i, t) in trades.iter().enumerate() {
        let route = walk[i]
            .map(|c| format!("{c:.0} blocks from home"))
            .unwrap_or("no known path".into());
        println!(
            "  {}. {} ({}) at {} ({route}): {} {} for {} {}, confidence {:.2}, last seen t={}\n     provenance: edge {}, events {:?}",
            i + 1, t.villager_name, t.villager,
            t.place.as_ref().map(|p| format!("{} ({})", p.name, p.key)).unwrap_or("?".into()),
            t.gives_count, t.gives, t.wants_count, t.wants, t.confidence, t.last_seen,
            t.provenance.edges[0], t.provenance.events
        );
    }
    let expected: Vec<&str> = w
        .truth
        .sticks_for_emeralds
        .iter()
        .map(|t| t.villager.as_str())
        .collect();
    let got: Vec<&str> = trades.iter().map(|t| t.villager.as_str()).collect();
    println!(
        "  [{}; below 0.5 and skipped: {:?}]",
        ok(expected == got),
        w.truth.low_confidence_offers
    );
    println!(
        "\nQ: what happened last night? (t={}..{})",
        night.from, night.to
    );
    for e in &night.events {
        println!(
            "  t={} {} (event {}, {:?})",
            e.ts, e.summary, e.seq, e.observations
        );
    }
    let obs: Vec<String> = night
        .events
        .iter()
        .flat_map(|e| e.observations.clone())
        .collect();
    println!(
        "  summary: {}  [{}]",
        night.summary,
        ok(obs == w.truth.last_night)
    );
    println!("\nQ: where did I last die, and what did I drop?");
    match &death {
        Some(d) => {
            println!(
                "  at {} ({}) {:?}, t={}, {}\n  dropped: {}\n     provenance: edge {}, events {:?}, observations {:?}  [{}]",
                d.place.name, d.place.key, d.place.anchor.and_then(|a| a.block), d.ts,
                d.cause.as_deref().unwrap_or("cause unknown"),
                d.dropped.iter().map(|(i, c)| format!("{c} {i}")).collect::<Vec<_>>().join(", "),
                d.provenance.edges[0], d.provenance.events, d.provenance.observations,
                ok(d.place.key == w.truth.last_death_place && d.dropped == w.truth.last_death_dropped)
            );
        }
        None => println!("  no recorded death"),
    }
    println!(
        "\nContext pack for an LLM router: {pack_question:?} (budget 160 tokens, confidence >= 0.5)"
    );
    for s in &pack.snippets {
        println!("  [{:?}, score {:.2}] {}", s.kind, s.score, s.text);
    }
    println!(
        "  {} tokens used, {} snippets cut; retrieved in {} us",
        pack.tokens_used,
        pack.cut.len(),
        pack.elapsed_us
    );
    println!(
        "\nanswered in {answer_ms:.2} ms; replay --verify: {}",
        if verify.ok() { "OK" } else { "MISMATCH" }
    );
    Ok(())
}
