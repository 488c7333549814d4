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
        // Quoted where it would not read as itself: a trailing space made another directory.
        loci::error::shown_path(&a.store.store)
    );
    Ok(Code::Ok)
}

/// A commit as `--json` writes it: its fields in their order, then the tool calls of its
/// batch kept raw.
#[derive(serde::Serialize)]
struct CommitLine<'a> {
    #[serde(flatten)]
    commit: &'a Commit,
    unextracted: &'a [ingest::Unextracted],
}

/// The note on tool calls kept raw: how many, and the first three by file, line and reason.
fn kept_raw_note(kept_raw: &[ingest::Unextracted]) -> Option<String> {
    if kept_raw.is_empty() {
        return None;
    }
    let first: Vec<String> = kept_raw
        .iter()
        .take(3)
        .map(|u| format!("{}:{}: {}", loci::error::shown_file(&u.file), u.line, u.why))
        .collect();
    let n = kept_raw.len() as u64;
    Some(format!(
        "{} kept raw as {} ({}{})",
        count(n, "tool call was", "tool calls were"),
        if n == 1 {
            "a TOOL_CALL event"
        } else {
            "TOOL_CALL events"
        },
        first.join("; "),
        if kept_raw.len() > 3 { "; ..." } else { "" }
    ))
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
    /// The line of commit `c`; in JSON, with the tool calls of its batch kept raw (the text
    /// mode says them once, in its closing note).
    fn line(&mut self, c: &Commit, kept_raw: &[ingest::Unextracted]) {
        if self.stopped.is_some() {
            return;
        }
        let text = if self.json {
            serde_json::to_string(&CommitLine {
                commit: c,
                unextracted: kept_raw,
            })
            .unwrap_or_default()
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

/// `ingest`: reads the files and commits their events, streamed in batches (`--commit-every`)
/// or as one atomic batch, then says what was skipped; a signal stops it between two commits.
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
    let mut tally = Tally::default();
    if a.check {
        return check(&a, &s, format, |b| tally.prepare(b, &a, &s));
    }
    let mut run = IngestRun {
        a: &a,
        s: &s,
        format,
        tally,
        last: LastCommit::default(),
        report: CommitReport {
            json: a.json,
            stopped: None,
            printed: 0,
        },
        bar: ProgressBar::new(0).with_style(
            ProgressStyle::with_template("ingesting {msg} {pos} events {per_sec}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
    };
    // From here a signal stops the run between two commits, each reported; `cut_short` says
    // whether it left input uncommitted (a signal after the last commit stops nothing).
    interrupt::hold();
    match a.commit_every {
        Some(n) => run.streamed(n.max(1))?,
        None => run.at_once()?,
    }
    run.bar.finish_and_clear();
    run.finish()
}

/// What an ingest has done so far, for its closing notes.
#[derive(Default)]
struct Tally {
    committed: usize,
    /// Events skipped as their idempotency key was applied before.
    already_applied: usize,
    /// Of `already_applied`, those whose key an event since deleted or forgotten holds.
    applied_then_deleted: usize,
    /// Events skipped as they repeated an earlier line of the input.
    repeated: usize,
    /// Passages skipped as the store holds them with the same title and text.
    passages_held: usize,
    /// Tool calls kept raw: counted, and the first reasons shown by file and line.
    unextracted: Vec<loci::ingest::Unextracted>,
    /// Whether a signal left input uncommitted.
    cut_short: bool,
}

impl Tally {
    /// Namespacing and the passage check, applied to every batch before it is committed.
    fn prepare(&mut self, b: SourceBatch, a: &IngestArgs, s: &Store) -> loci::Result<SourceBatch> {
        self.unextracted.extend(b.unextracted.iter().cloned());
        let mut b = match &a.namespace {
            Some(ns) => b.namespaced(ns),
            None => b,
        };
        self.passages_held += b.dedupe_passages(s, a.replace)?;
        Ok(b)
    }

    fn count(&mut self, c: &Commit) {
        self.committed += c.events;
        self.already_applied += c.skipped - c.repeated;
        self.applied_then_deleted += c.skipped_deleted;
        self.repeated += c.repeated;
    }
}

/// How long a streamed ingest's input (a pipe fed as events happen) may pause before what it
/// has read is committed: a live feed's events reach the store about this long after they
/// come, where they had waited for 16k lines or the input's end. A signal is noticed within
/// it too, while the read waits on.
const FEED_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// An ingest under way.
struct IngestRun<'a> {
    a: &'a IngestArgs,
    s: &'a Store,
    format: Option<Format>,
    tally: Tally,
    last: LastCommit,
    report: CommitReport,
    bar: ProgressBar,
}

impl IngestRun<'_> {
    fn stop() -> bool {
        interrupt::received().is_some()
    }

    /// Streamed: each round of a file is committed in batches of `n` before the next is read.
    /// An error stops it there, and the commits before it stand: the note says how far they
    /// reached, so the user can mend the input and go on from the next line.
    fn streamed(&mut self, n: usize) -> Result<()> {
        self.stream_files(n).map_err(|e| {
            // One error that says both, so the note follows what it is about.
            let note = self.last.said(
                "the error came before the first commit",
                "the commits before the error stand",
            );
            anyhow::Error::new(super::exit::CliError {
                code: super::exit::code_of(&e),
                message: format!("{}\nnote: {note}", super::render(&e)),
            })
        })
    }

    fn stream_files(&mut self, n: usize) -> Result<()> {
        for f in &self.a.files {
            if Self::stop() {
                self.tally.cut_short = true;
                break;
            }
            self.bar.set_message(f.display().to_string());
            let stop = Self::stop;
            let pacing = ingest::Pacing {
                idle: FEED_PAUSE,
                stop: &stop,
            };
            let read =
                ingest::read_file_in_rounds(f, self.format, n, Some(&pacing), &mut |round| {
                    for mut b in self.tally.prepare(round, self.a, self.s)?.chunks(n) {
                        if Self::stop() {
                            self.tally.cut_short = true;
                            return Ok(ControlFlow::Break(()));
                        }
                        let kept_raw = std::mem::take(&mut b.unextracted);
                        let c = self.last.commit(b, self.s)?;
                        self.tally.count(&c);
                        self.bar.inc(c.events as u64);
                        self.report.line(&c, &kept_raw);
                    }
                    Ok(ControlFlow::Continue(()))
                })?;
            // Stopped while the input paused, what came after the last commit unread.
            if !read.to_the_end && Self::stop() {
                self.tally.cut_short = true;
                break;
            }
        }
        Ok(())
    }

    /// One atomic batch: everything is read before anything is written.
    fn at_once(&mut self) -> Result<()> {
        let mut all = SourceBatch::default();
        for f in &self.a.files {
            if Self::stop() {
                break;
            }
            self.bar.set_message(format!("reading {}", f.display()));
            // Paced too, so that a signal stops a read waiting on a pipe: what a pause hands
            // on is kept with the rest, for the one commit.
            let stop = Self::stop;
            let pacing = ingest::Pacing {
                idle: FEED_PAUSE,
                stop: &stop,
            };
            ingest::read_file_in_rounds(f, self.format, usize::MAX, Some(&pacing), &mut |b| {
                all.append(b);
                Ok(ControlFlow::Continue(()))
            })?;
        }
        self.tally.cut_short = Self::stop();
        // Stopped while reading: nothing is checked against the store or written.
        if self.tally.cut_short {
            return Ok(());
        }
        let mut all = self.tally.prepare(all, self.a, self.s)?;
        if !all.events.is_empty() {
            self.bar.set_message("committing".to_string());
            let kept_raw = std::mem::take(&mut all.unextracted);
            let c = self.last.commit(all, self.s)?;
            self.tally.count(&c);
            self.report.line(&c, &kept_raw);
        }
        Ok(())
    }

    /// The closing notes: what was skipped, standard output closed early, an interruption.
    fn finish(self) -> Result<Code> {
        let (a, t, report) = (self.a, &self.tally, &self.report);
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
        // Interrupted, the passages skipped and the tool calls kept raw were counted over
        // input that was read but not all committed: they are not said.
        let interrupted = interrupt::received().filter(|_| t.cut_short);
        let whole = report.stopped.is_none() && interrupted.is_none();
        if t.passages_held > 0 && whole {
            note(format!(
                "skipped {} the store already holds with the same title and text",
                count(t.passages_held as u64, "passage", "passages")
            ))?;
        }
        if t.already_applied > 0 && report.stopped.is_none() {
            let deleted = match t.applied_then_deleted {
                0 => String::new(),
                1 => " (1 held by an event since deleted or forgotten: a retry does not bring it \
                       back)"
                    .to_string(),
                n => format!(
                    " ({n} held by events since deleted or forgotten: a retry does not bring them \
                     back)"
                ),
            };
            note(format!(
                "skipped {} whose idempotency key the store already holds{deleted}",
                count(t.already_applied as u64, "event", "events")
            ))?;
        }
        if t.repeated > 0 && report.stopped.is_none() {
            note(format!(
                "skipped {} repeating an earlier line of the input",
                count(t.repeated as u64, "event", "events")
            ))?;
        }
        if let Some(kept_raw) = kept_raw_note(&t.unextracted).filter(|_| whole) {
            note(kept_raw)?;
        }
        if t.committed == 0
            && t.passages_held == 0
            && t.already_applied == 0
            && t.repeated == 0
            && whole
        {
            note("nothing to commit: the input holds no events".to_string())?;
        }
        if let Some(why) = &report.stopped {
            errln!(
                "note: standard output {why} after {}; the ingest went on and committed {}",
                count(report.printed as u64, "line", "lines"),
                count(t.committed as u64, "event", "events")
            );
        }
        if let Some(signal) = interrupted {
            errln!(
                "interrupted by {}: {}",
                interrupt::name(signal),
                self.last.said(
                    "stopped before the first commit",
                    "stopped after the commit in progress"
                )
            );
            return Ok(Code::Interrupted);
        }
        Ok(Code::Ok)
    }
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

    /// How far the commits reached, after `before_any` when none was made, else after
    /// `after_some`.
    fn said(&self, before_any: &str, after_some: &str) -> String {
        let Some(read) = &self.read else {
            return format!("{before_any}; nothing was written");
        };
        let events = self
            .seq
            .map(|q| format!(" (events ..={q})"))
            .unwrap_or_default();
        // "Through" the line, not "the last event committed": the last batches may have
        // committed nothing new (every event applied before, by its idempotency key).
        if read.in_file_order {
            format!(
                "{after_some}{events}; the input is in the store through {} line {}, and \
                 nothing after that line was written",
                read.file, read.line
            )
        } else {
            format!(
                "{after_some}{events}; {} is a triples file, whose \
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
    let mut all = prepare(all)?;
    let kept_raw = std::mem::take(&mut all.unextracted);
    let c = all.check(s)?;
    if a.json {
        print_json(&CommitLine {
            commit: &c,
            unextracted: &kept_raw,
        })?;
    } else {
        outln!(
            "check passed; nothing written. Would commit {} ({} and {} upserted, {} and {} removed); {} skipped by idempotency key{}",
            count(c.events as u64, "event", "events"),
            count(c.nodes_upserted as u64, "node", "nodes"),
            count(c.edges_upserted as u64, "edge", "edges"),
            count(c.nodes_removed as u64, "node", "nodes"),
            count(c.edges_removed as u64, "edge", "edges"),
            count(c.skipped as u64, "event", "events"),
            match c.skipped_deleted {
                0 => String::new(),
                n => format!(" ({n} held by events since deleted or forgotten)"),
            }
        );
        if let Some(note) = kept_raw_note(&kept_raw) {
            outln!("{note}");
        }
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
    } else if c.events == 0 {
        outln!(
            "{}",
            if pinned {
                "pinned 0 nodes: already pinned"
            } else {
                "unpinned 0 nodes: not pinned"
            }
        );
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
