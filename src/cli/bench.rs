//! `bench`: the benchmark reports. Each prints its report (text, or JSON with `--json`) and
//! with `--out FILE` also writes the JSON there.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use loci::{BackendKind, RetrieveOptions, Store};

use super::args::{BenchCommand, ReportArgs};
use super::backend;
use super::exit::{fail, Code};
use super::output::{errln, print_json, print_report};
use super::read::name_values;

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

fn spinner(msg: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_message(msg.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// Prints a report and, when asked, writes it as JSON to a file too.
fn emit(report: &impl serde::Serialize, how: &ReportArgs) -> Result<()> {
    let v = serde_json::to_value(report)?;
    // Printed first: a file that cannot be written after all does not take the run with it.
    // Written whatever the printing met: a reader gone (`| head`) is no reason to lose it.
    let printed = if how.json {
        print_json(&v)
    } else {
        print_report(&v)
    };
    if let Some(path) = &how.out {
        std::fs::write(path, serde_json::to_string_pretty(&v)?)
            .with_context(|| format!("writing {}", loci::error::shown_path(path)))?;
    }
    printed
}

/// Writes one JSON object per line.
fn write_json_lines<T: serde::Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    use std::io::Write;
    let f = std::fs::File::create(path)
        .with_context(|| format!("creating {}", loci::error::shown_path(path)))?;
    let mut w = std::io::BufWriter::new(f);
    let written = rows
        .iter()
        .try_for_each(|row| {
            serde_json::to_writer(&mut w, row)?;
            writeln!(w)
        })
        .and_then(|()| w.flush());
    written.with_context(|| format!("writing {}", loci::error::shown_path(path)))
}

/// Refuses, before a benchmark runs for minutes, an output file whose directory does not exist
/// (the run would end with nothing written).
fn check_outputs(b: &BenchCommand) -> Result<()> {
    let (report, extra) = match b {
        BenchCommand::Metaqa { report, .. }
        | BenchCommand::World { report, .. }
        | BenchCommand::Context { report, .. }
        | BenchCommand::Serve { report, .. }
        | BenchCommand::Retrieval { report, .. } => (report, None),
        BenchCommand::Locomo {
            report,
            questions_out,
            ..
        } => (report, questions_out.as_deref()),
        BenchCommand::Graph {
            report,
            write_edges,
            ..
        } => (report, write_edges.as_deref()),
    };
    for path in [report.out.as_deref(), extra].into_iter().flatten() {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            fail!(
                Code::NotFound,
                "cannot write {}: the directory {} does not exist",
                loci::error::shown_path(path),
                loci::error::shown_path(dir)
            );
        }
        // A bench runs for minutes, and its report is written at the end: a path it cannot
        // write is refused now, not once the run is done.
        if path.is_dir() {
            fail!(
                Code::BadInput,
                "cannot write {}: it is a directory, expected a file",
                loci::error::shown_path(path)
            );
        }
        // A file that is there is opened to append (which changes nothing); a FIFO or a
        // device is not, which would wait for a reader.
        let writable = match std::fs::metadata(path) {
            Ok(m) if m.is_file() => std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .map(drop),
            Ok(_) => Ok(()),
            Err(_) => tempfile::NamedTempFile::new_in(dir).map(drop),
        };
        if let Err(e) = writable {
            let path = loci::error::shown_path(path);
            fail!(Code::BadInput, "cannot write {path}: {e}");
        }
    }
    Ok(())
}

pub fn run(b: BenchCommand) -> Result<Code> {
    check_outputs(&b)?;
    match b {
        BenchCommand::Metaqa {
            kb,
            questions,
            qtypes,
            answerable,
            retrieval_limit,
            report,
        } => {
            let tmp = tempfile::tempdir()?;
            let bar = question_bar();
            let r = loci::bench::run_metaqa_bench(
                &tmp.path().join("store"),
                &kb,
                &questions,
                &qtypes,
                answerable.as_deref(),
                retrieval_limit,
                &|done, total| advance(&bar, done, total),
            )?;
            bar.finish_and_clear();
            emit(&r, &report)?;
        }
        BenchCommand::Retrieval {
            corpus,
            questions,
            triples,
            set,
            report,
        } => {
            let mut opts = RetrieveOptions::default();
            for (k, v) in name_values("--set", &set)? {
                opts.set(&k, &v)?;
            }
            let tmp = tempfile::tempdir()?;
            let bar = question_bar();
            let r = loci::bench::run_retrieval_bench(
                &tmp.path().join("store"),
                &corpus,
                &questions,
                triples.as_deref(),
                &opts,
                &|done, total| advance(&bar, done, total),
            )?;
            bar.finish_and_clear();
            emit(&r, &report)?;
        }
        BenchCommand::Locomo {
            data,
            set,
            questions_out,
            encoder,
            report,
        } => {
            let mut opts = RetrieveOptions::default();
            for (k, v) in name_values("--set", &set)? {
                opts.set(&k, &v)?;
            }
            let encoder = match encoder {
                Some(dir) => Some(std::sync::Arc::new(loci::embed::SentenceEncoder::load(
                    &dir,
                )?)),
                None => None,
            };
            let bar = question_bar();
            let r = loci::bench::run_locomo_bench(&data, &opts, encoder, &|done, total| {
                advance(&bar, done, total)
            })?;
            bar.finish_and_clear();
            if let Some(path) = questions_out {
                write_json_lines(&path, &r.questions)?;
            }
            emit(&r, &report)?;
        }
        BenchCommand::Serve {
            corpus,
            questions,
            connections,
            seconds,
            rate,
            max_requests,
            kill_after,
            seed,
            report,
        } => {
            for (name, v, max) in [
                ("--seconds", seconds, 3600.0),
                ("--kill-after", kill_after, 600.0),
                ("--rate", rate, 100_000.0),
            ] {
                if !(0.0..=max).contains(&v) {
                    fail!(
                        Code::BadInput,
                        "{name} must be between 0 and {max}, got {v}"
                    );
                }
            }
            let bar = spinner(&format!(
                "{connections} connections for {seconds} s against loci serve"
            ));
            let r = loci::bench::run_serve_bench(&loci::bench::ServeBenchConfig {
                binary: std::env::current_exe()?,
                corpus,
                questions,
                connections: connections as usize,
                seconds,
                rate,
                max_requests: max_requests as usize,
                kill_after,
                seed,
            })?;
            bar.finish_and_clear();
            emit(&r, &report)?;
        }
        BenchCommand::World {
            seed,
            scale,
            days,
            backend: b,
            report,
        } => {
            let bar = spinner(&format!("living {days} days of world {seed}"));
            let r = loci::bench::run_world_bench(&loci::bench::WorldBenchConfig {
                seed,
                scale,
                days,
                backend: backend(&b)?,
            })?;
            bar.finish_and_clear();
            emit(&r, &report)?;
        }
        BenchCommand::Context {
            events,
            turns,
            budget,
            seed,
            report,
        } => {
            let bar = spinner(&format!(
                "contexts over {events} events and a session of {turns} turns"
            ));
            let r = loci::bench::run_context_bench(&loci::bench::ContextBenchConfig {
                events: events as usize,
                turns: turns as usize,
                budget: budget as usize,
                seed,
            })?;
            bar.finish_and_clear();
            emit(&r, &report)?;
        }
        BenchCommand::Graph {
            nodes,
            edges,
            backend: b,
            edges_per_batch,
            dir,
            edges_file,
            write_edges,
            report,
        } => {
            let generated = edges_file.is_none();
            let source = match edges_file {
                Some(path) => GraphSource::File(path),
                None => GraphSource::Generated { write_edges },
            };
            let v = graph_bench(nodes, edges, &b, edges_per_batch, dir, source)?;
            emit(&v, &report)?;
            // Distinct edges between few nodes run out: the figures are of the graph made,
            // which is said, not of the one asked for.
            let made = v["edges"].as_u64().unwrap_or(0);
            if generated && made < u64::from(edges) {
                errln!(
                    "note: asked for {edges} edges; {nodes} nodes hold {made} distinct ones, and the figures are of those"
                );
            }
        }
    }
    Ok(Code::Ok)
}

/// Where `bench graph`'s edges come from.
enum GraphSource {
    /// A file of `src dst relation confidence` lines (`--edges-file`).
    File(PathBuf),
    /// The Barabási–Albert generator, its graph also written to `write_edges` if given.
    Generated { write_edges: Option<PathBuf> },
}

/// `bench graph`: builds the store, times it in this process, then opens it in a fresh one
/// on a cold page cache and adds that open's time and memory to the report.
fn graph_bench(
    nodes: u32,
    edges: u32,
    backend_name: &str,
    edges_per_batch: usize,
    dir: Option<PathBuf>,
    source: GraphSource,
) -> Result<serde_json::Value> {
    let tmp = tempfile::tempdir()?;
    let dir = dir.unwrap_or_else(|| tmp.path().join("bench"));
    let spec = loci::bench::GraphSpec {
        nodes,
        edges,
        ..Default::default()
    };
    let backend = backend(backend_name)?;
    // What the spinner says, and how the store is built.
    type Build<'b> = Box<dyn FnOnce(&loci::Store) -> loci::Result<(f64, f64)> + 'b>;
    let (doing, build): (String, Build<'_>) = match &source {
        GraphSource::File(path) => (
            format!("building the graph of {} ({backend_name})", path.display()),
            Box::new(move |s| loci::bench::build_from_file(s, path, edges_per_batch)),
        ),
        GraphSource::Generated { write_edges } => (
            format!("building {nodes} nodes, {edges} edges ({backend_name})"),
            Box::new(|s| {
                loci::bench::build_generated(s, &spec, edges_per_batch, write_edges.as_deref())
            }),
        ),
    };
    let bar = spinner(&doing);
    let r = loci::bench::run_graph_bench(&dir, backend, &spec, build)?;
    bar.finish_and_clear();
    let mut v = serde_json::to_value(&r)?;
    if let Ok(f) = child_open(&dir) {
        add_fresh_open(&mut v, &f, r.edges);
    }
    Ok(v)
}

/// Adds to a `bench graph` report the open of its store in a fresh process: its time, and
/// its memory beside an empty store's.
fn add_fresh_open(v: &mut serde_json::Value, f: &FreshOpen, edges: usize) {
    v["open_fresh_process_s"] = f.store.secs.into();
    // Of that wall time, the open itself as the process timed it (the rest is starting the
    // process and what `stats` computes).
    v["open_fresh_process_open_ms"] = f.store.open_ms.into();
    // By stage, and where its state came from: what a slow first open spent its time on.
    v["open_fresh_process_open_ms_by_stage"] = f.store.open_stages.clone();
    v["open_fresh_process_state_source"] = f.store.state_source.clone();
    v["open_page_cache"] = if cfg!(target_os = "linux") {
        "cold: the store's files were evicted (posix_fadvise DONTNEED) before the open"
    } else {
        "warm: this system cannot evict the files from its page cache"
    }
    .into();
    let per_edge = |a: u64, b: u64| (a.saturating_sub(b)) as f64 / edges.max(1) as f64;
    v["rss_open_bytes"] = f.store.rss.into();
    v["rss_empty_store_bytes"] = f.empty.rss.into();
    v["rss_bytes_per_edge"] = per_edge(f.store.rss, f.empty.rss).into();
    // Of it, the heap's part: the rest is pages of mapped files the open read.
    v["rss_anon_open_bytes"] = f.store.anon.into();
    v["rss_anon_empty_store_bytes"] = f.empty.anon.into();
    v["rss_anon_bytes_per_edge"] = per_edge(f.store.anon, f.empty.anon).into();
}

/// Asks the kernel to drop the cached pages of every file under `dir` (posix_fadvise
/// DONTNEED: no privileges needed, clean pages only), so that the next open reads from disk:
/// a cold open, as after a reboot, rather than one served from memory.
fn evict_from_page_cache(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            evict_from_page_cache(&path);
        } else if let Ok(f) = std::fs::File::open(&path) {
            #[cfg(target_os = "linux")]
            {
                use std::os::fd::AsRawFd;
                let _ = f.sync_all();
                // SAFETY: a valid open descriptor; the call only advises the kernel.
                unsafe {
                    libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
                }
            }
            #[cfg(not(target_os = "linux"))]
            drop(f);
        }
    }
}

/// What one `loci stats` run in a fresh process shows of the store it opens.
struct ChildOpen {
    /// Resident set, bytes.
    rss: u64,
    /// Of it, anonymous memory (the rest is pages of mapped files: the snapshot's sections
    /// once read, the binary, the text index).
    anon: u64,
    /// Wall time of the whole process, seconds.
    secs: f64,
    /// The open as the process timed it, milliseconds.
    open_ms: f64,
    /// The same by stage, as `stats --json` gives it.
    open_stages: serde_json::Value,
    /// Where its state came from (the snapshot and the log records caught up, or a replay).
    state_source: serde_json::Value,
}

/// `loci stats` on the store and on an empty one.
struct FreshOpen {
    store: ChildOpen,
    empty: ChildOpen,
}

/// `loci stats` (which opens the store) on `dir`, its files evicted from the page cache
/// first, and on an empty store, each in a fresh process: what a user who opens the store
/// pays.
fn child_open(dir: &Path) -> Result<FreshOpen> {
    let exe = std::env::current_exe()?;
    let run = |d: &Path| -> Result<ChildOpen> {
        let t = Instant::now();
        // Its warnings (and logs, under LOCI_LOG) go where this process's go.
        let out = std::process::Command::new(&exe)
            .args(["stats", "--json", "--store"])
            .arg(d)
            .stderr(std::process::Stdio::inherit())
            .output()?;
        let secs = t.elapsed().as_secs_f64();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let bytes = |k: &str| v[k].as_u64().unwrap_or(0);
        Ok(ChildOpen {
            rss: bytes("rss_bytes"),
            anon: bytes("rss_anon_bytes"),
            secs,
            open_ms: v["open_ms"]["total"].as_f64().unwrap_or(0.0),
            open_stages: v["open_ms"].clone(),
            state_source: v["state_source"].clone(),
        })
    };
    let empty = tempfile::tempdir()?;
    Store::create(empty.path().join("s"), BackendKind::Redb)?;
    evict_from_page_cache(dir);
    let store = run(dir)?;
    let empty = run(&empty.path().join("s"))?;
    Ok(FreshOpen { store, empty })
}
