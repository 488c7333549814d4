//! Commands that write: `init`, `ingest`, `extract`, `pin`/`unpin`.

use std::io::Write;
use std::ops::ControlFlow;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};

use loci::ingest::{self, Format, SourceBatch};
use loci::{Commit, Store};

use super::args::{ExtractArgs, IngestArgs, InitArgs, PinArgs};
use super::exit::{fail, Code};
use super::interrupt;
use super::output::{count, errln, outln, print_json};
use super::{backend, open};

pub fn init(a: InitArgs) -> Result<Code> {
    let s = Store::create(&a.store.store, backend(&a.backend)?)?;
    outln!(
        "created {} store at {}",
        s.backend_kind(),
        a.store.store.display()
    );
    Ok(Code::Ok)
}

/// The `committed ...` lines of an ingest. They are a report, not the work: when the reader
/// of standard output goes away, the ingest goes on (and says so on stderr at the end), so
/// that `loci ingest ... | head -2` never stops half-way without a word.
struct CommitReport {
    json: bool,
    /// Why standard output took no more lines: its reader went away, or a write failed.
    stopped: Option<String>,
    printed: usize,
}

impl CommitReport {
    fn line(&mut self, c: &Commit) {
        if self.stopped.is_some() {
            return;
        }
        let text = if self.json {
            serde_json::to_string(c).unwrap_or_default()
        } else if c.events == 0 {
            // Every event of the batch was applied before (idempotency keys): the total of
            // skipped events is said once at the end.
            return;
        } else {
            format!(
                "committed events {}..={} ({}; {} and {} upserted, {} and {} removed)",
                c.first_seq,
                c.last_seq,
                count(c.events as u64, "event", "events"),
                count(c.nodes_upserted as u64, "node", "nodes"),
                count(c.edges_upserted as u64, "edge", "edges"),
                count(c.nodes_removed as u64, "node", "nodes"),
                count(c.edges_removed as u64, "edge", "edges")
            )
        };
        // Flushed line by line: a reader (or the crash test) may rely on every printed line
        // being committed.
        let mut out = super::output::stdout();
        match writeln!(out, "{text}").and_then(|()| out.flush()) {
            Ok(()) => self.printed += 1,
            Err(e) => {
                tracing::debug!("standard output stopped: {e}");
                self.stopped = Some(if e.kind() == std::io::ErrorKind::BrokenPipe {
                    "was closed".to_string()
                } else {
                    format!("failed ({e})")
                });
            }
        }
    }
}

pub fn ingest(a: IngestArgs) -> Result<Code> {
    if let Some(ns) = &a.namespace {
        if SourceBatch::check_namespace(ns).is_err() {
            fail!(
                Code::BadInput,
                "--namespace {ns:?}: use a non-empty name without '/' or surrounding spaces"
            );
        }
    }
    let s = open(&a.store)?;
    let format: Option<Format> = a.format.as_deref().map(str::parse).transpose()?;
    let mut skipped = 0usize;
    // Tool calls no extractor took (kept raw): counted, and the first reasons shown.
    let mut unextracted: Vec<(usize, String)> = Vec::new();
    // Namespacing and the passage check, applied to every batch before it is committed.
    let mut prepare = |b: SourceBatch| -> loci::Result<SourceBatch> {
        unextracted.extend(b.unextracted.iter().cloned());
        let mut b = match &a.namespace {
            Some(ns) => b.namespaced(ns),
            None => b,
        };
        skipped += b.dedupe_passages(&s, a.replace)?;
        Ok(b)
    };
    let mut report = CommitReport {
        json: a.json,
        stopped: None,
        printed: 0,
    };
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("ingesting {msg} {pos} events {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if a.check {
        return check(&a, &s, format, prepare);
    }
    let mut committed = 0usize;
    let mut already_applied = 0usize;
    let mut last = LastCommit::default();
    // From here a signal stops the run between two commits, each reported; `cut_short` says
    // whether it left input uncommitted (a signal after the last commit stops nothing).
    interrupt::hold();
    let stop = || interrupt::received().is_some();
    let mut cut_short = false;
    match a.commit_every {
        // Streamed: each round of the file is committed in batches of `n` before the next is
        // read.
        Some(n) => {
            let n = n.max(1);
            for f in &a.files {
                if stop() {
                    cut_short = true;
                    break;
                }
                bar.set_message(f.display().to_string());
                ingest::read_file_in_rounds(f, format, n, &mut |round| {
                    for b in prepare(round)?.chunks(n) {
                        if stop() {
                            cut_short = true;
                            return Ok(ControlFlow::Break(()));
                        }
                        let c = last.commit(b, &s)?;
                        committed += c.events;
                        already_applied += c.skipped;
                        bar.inc(c.events as u64);
                        report.line(&c);
                    }
                    Ok(ControlFlow::Continue(()))
                })?;
            }
        }
        // One atomic batch: everything is read before anything is written.
        None => {
            let mut all = SourceBatch::default();
            for f in &a.files {
                if stop() {
                    break;
                }
                bar.set_message(format!("reading {}", f.display()));
                all.append(ingest::read_file(f, format)?);
            }
            cut_short = stop();
            // Stopped while reading: nothing is checked against the store or written.
            let all = if cut_short {
                SourceBatch::default()
            } else {
                prepare(all)?
            };
            if !all.events.is_empty() {
                bar.set_message("committing".to_string());
                let c = last.commit(all, &s)?;
                committed += c.events;
                already_applied += c.skipped;
                report.line(&c);
            }
        }
    }
    bar.finish_and_clear();
    // In --json mode standard output holds only the commits' JSON lines; the notes go to
    // stderr so that a reader can parse every line.
    let note = |text: String| -> Result<()> {
        if a.json {
            errln!("{text}");
        } else {
            outln!("{text}");
        }
        Ok(())
    };
    // Interrupted, the passages skipped and the tool calls kept raw were counted over input
    // that was read but not all committed: they are not said.
    let interrupted = interrupt::received().filter(|_| cut_short);
    let whole = report.stopped.is_none() && interrupted.is_none();
    if skipped > 0 && whole {
        note(format!(
            "skipped {skipped} passages the store already holds with the same title and text"
        ))?;
    }
    if already_applied > 0 && report.stopped.is_none() {
        note(format!(
            "skipped {already_applied} events whose idempotency key the store already holds"
        ))?;
    }
    if !unextracted.is_empty() && whole {
        let first: Vec<String> = unextracted
            .iter()
            .take(3)
            .map(|(line, why)| format!("line {line}: {why}"))
            .collect();
        note(format!(
            "{} tool calls no extractor took were kept raw as TOOL_CALL events ({}{})",
            unextracted.len(),
            first.join("; "),
            if unextracted.len() > 3 { "; ..." } else { "" }
        ))?;
    }
    if committed == 0 && skipped == 0 && already_applied == 0 && whole {
        note("nothing to commit: the input holds no events".to_string())?;
    }
    if let Some(why) = &report.stopped {
        errln!(
            "note: standard output {why} after {} lines; the ingest went on and committed {committed} events",
            report.printed
        );
    }
    if let Some(signal) = interrupted {
        errln!(
            "interrupted by {}: {}",
            interrupt::name(signal),
            last.said()
        );
        return Ok(Code::Interrupted);
    }
    Ok(Code::Ok)
}

/// Where an ingest's commits have reached, for the note of an interrupted run: a user resumes
/// from the line after the last one the commits took.
#[derive(Default)]
struct LastCommit {
    /// The last event committed, and how far into its file the commits have read.
    seq: Option<u64>,
    read: Option<ingest::ReadThrough>,
}

impl LastCommit {
    /// Commits `batch` and remembers where it ends.
    fn commit(&mut self, batch: SourceBatch, s: &Store) -> loci::Result<Commit> {
        let read = batch.read_through();
        let c = batch.commit(s)?;
        // A batch whose events were all applied before (idempotency keys) still moves the
        // input on, but commits no event.
        if c.events > 0 {
            self.seq = Some(c.last_seq);
        }
        self.read = read.or(self.read.take());
        Ok(c)
    }

    fn said(&self) -> String {
        let Some(read) = &self.read else {
            return "stopped before the first commit; nothing was written".to_string();
        };
        let events = self
            .seq
            .map(|q| format!(" (events ..={q})"))
            .unwrap_or_default();
        // "Through" the line, not "the last event committed": the last batches may have
        // committed nothing new (every event applied before, by its idempotency key).
        if read.in_file_order {
            format!(
                "stopped after the commit in progress{events}; the input is in the store \
                 through {} line {}, and nothing after that line was written",
                read.file, read.line
            )
        } else {
            format!(
                "stopped after the commit in progress{events}; {} is a triples file, whose \
                 events gather a passage's lines from anywhere in it, so it is not taken up \
                 again from a line",
                read.file
            )
        }
    }
}

/// `ingest --check`: the whole input as one batch, projected against the store and reported,
/// never written.
fn check(
    a: &IngestArgs,
    s: &Store,
    format: Option<Format>,
    mut prepare: impl FnMut(SourceBatch) -> loci::Result<SourceBatch>,
) -> Result<Code> {
    let mut all = SourceBatch::default();
    for f in &a.files {
        all.append(ingest::read_file(f, format)?);
    }
    let all = prepare(all)?;
    let c = all.check(s)?;
    if a.json {
        print_json(&c)?;
    } else {
        outln!(
            "check passed; nothing written. Would commit {} ({} and {} upserted, {} and {} removed); {} skipped by idempotency key",
            count(c.events as u64, "event", "events"),
            count(c.nodes_upserted as u64, "node", "nodes"),
            count(c.edges_upserted as u64, "edge", "edges"),
            count(c.nodes_removed as u64, "node", "nodes"),
            count(c.edges_removed as u64, "edge", "edges"),
            count(c.skipped as u64, "event", "events")
        );
    }
    Ok(Code::Ok)
}

pub fn extract(a: ExtractArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let c = s.ingest(loci::extract::extract_mentions(&s)?)?;
    let al = s.ingest(loci::extract::alias_links(&s)?)?;
    if a.json {
        print_json(&serde_json::json!({"mentions": c, "aliases": al}))?;
    } else {
        outln!(
            "extracted from {} passages: {} entities and {} mentions upserted; {} SAME_AS links between near-duplicate names",
            c.events, c.nodes_upserted, c.edges_upserted, al.edges_upserted
        );
    }
    Ok(Code::Ok)
}

/// `pin` and `unpin`: one event that sets the nodes' `pinned` flag.
pub fn pin(a: PinArgs, pinned: bool) -> Result<Code> {
    let s = open(&a.store)?;
    let keys: Vec<&str> = a.keys.iter().map(String::as_str).collect();
    let c = s.pin(&keys, pinned)?;
    if a.json {
        print_json(&c)?;
    } else {
        let nodes = c.nodes_upserted;
        outln!(
            "{} {nodes} node{} (event {})",
            if pinned { "pinned" } else { "unpinned" },
            if nodes == 1 { "" } else { "s" },
            c.last_seq
        );
    }
    Ok(Code::Ok)
}
