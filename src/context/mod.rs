//! The context builder: everything loci knows, assembled into one prompt context per turn, in
//! an exact token budget, with a prefix that stays byte-identical between turns so an LLM
//! provider's prompt cache keeps hitting.
//!
//! Sections, in a fixed order (each line carries the ids it rests on):
//!
//! 1. **instructions**: the caller's text, line by line as given (`\r\n` ends a line as `\n`
//!    does; control characters are shown escaped);
//! 2. **pinned**: the mainline of working memory, then every pinned node (by key);
//! 3. **cover**: the *memory cover*, summaries chosen from the consolidation hierarchy
//!    ([`mod@cover`]): the roots (weeks, and the days and episodes no live summary holds) while they
//!    fit, the oldest dropped first, then the widest chunk split into its children while they
//!    fit; each line is labelled with its level and time range;
//!
//!    [`BOUNDARY`]: everything above it is the stable prefix;
//!
//! 4. **snippets**: retrieval's context pack for the question, with provenance;
//! 5. **working memory**: intent, subgoals, threats, promises, recent observations;
//! 6. **observations**: the typed observations of tool calls (`observe`) of this session,
//!    grouped by type and subject (`x3`, latest time), among the latest records;
//! 7. **moment**: the most recent raw events, newest kept first, in whatever budget is left.
//!
//! Each section but the moment has a share of the budget ([`Shares`]); what a section leaves
//! unused goes to the moment, and what the moment leaves to the snippets, working memory and
//! observations that their shares cut (all below the boundary). The final text is counted with the chosen tokenizer and never
//! exceeds the budget: lines are left out (moment oldest first, then the other sections from the
//! bottom up) until it fits, and every line left out is listed. Modes: `all`; `anchor` (cover
//! and moment only); `mainline` (pinned only).
//!
//! **Prefix stability.** The cover is a function of the live summaries and the budget only, so
//! the prefix changes only when consolidation (or forgetting) changes the summaries. When it
//! does, a saved context ([`ContextOptions::save`]) lets the next turn keep the previous cover
//! for one more turn (if its summaries all still live), so a cache break is not taken on the
//! turn that made the summary. Saved contexts are `CONTEXT` events (written by the store, not
//! indexed or summarised): which ids the context held, its token count and prefix digest, so a
//! later question can ask what the agent saw at turn T ([`snapshot`]).

mod cover;

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::dynamics::consolidate::{self, Placement};
use crate::error::{Error, Result};
use crate::model::{kinds, EventDraft, Value};
use crate::retrieval::{FactKey, RetrieveOptions, Retriever, TokenCounter, Tokenizer};
use crate::store::{Facet, Store};

pub use cover::cover;

/// The line between the stable prefix and the rest of the context.
pub const BOUNDARY: &str = "=== memory above is stable across turns; this turn below ===";

/// Kind of a saved context.
pub const CONTEXT: &str = kinds::CONTEXT;

/// Log records the moment reads at a time, going back from the end until its budget is full.
const MOMENT_STEP: u64 = 128;
/// Log records the moment looks back over at most, of those it can show.
const MOMENT_WINDOW: u64 = 4096;
/// Log records the moment reads back over at most, bookkeeping included: a run of records it
/// never shows (working-memory changes, uses, saved contexts) does not put the latest events
/// out of its reach, as when the window counted them.
const MOMENT_SCAN: u64 = 4 * MOMENT_WINDOW;

/// Kinds that are bookkeeping, never part of the moment (a journal's promotion pins its
/// entries, as a pin does).
const NOT_MOMENT: [&str; 9] = [
    crate::journal::PROMOTE,
    consolidate::SUMMARY,
    crate::dynamics::usage::USAGE,
    crate::dynamics::working::WM,
    crate::dynamics::deletion::DELETE,
    crate::dynamics::deletion::TOMBSTONE,
    kinds::CONTEXT,
    kinds::PIN,
    kinds::UNPIN,
];

/// Which sections a context holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextMode {
    /// Every section.
    #[default]
    All,
    /// The cover and the moment.
    Anchor,
    /// Pins and the mainline.
    Mainline,
}

impl ContextMode {
    pub const ALL: [ContextMode; 3] =
        [ContextMode::All, ContextMode::Anchor, ContextMode::Mainline];

    /// The name an option gives it (what [`str::parse`] reads).
    pub fn name(self) -> &'static str {
        match self {
            ContextMode::All => "all",
            ContextMode::Anchor => "anchor",
            ContextMode::Mainline => "mainline",
        }
    }
}

impl std::str::FromStr for ContextMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        ContextMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| Error::InvalidArgument {
                name: "mode".into(),
                message: format!(
                    "{}: expected all, anchor or mainline",
                    crate::error::quoted_excerpt(s)
                ),
            })
    }
}

/// Shares of the budget (after the instructions) of the sections before the moment, which
/// takes the rest.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Shares {
    pub pinned: f32,
    pub cover: f32,
    pub snippets: f32,
    pub working: f32,
    pub observations: f32,
}

impl Default for Shares {
    fn default() -> Self {
        Shares {
            pinned: 0.1,
            cover: 0.3,
            snippets: 0.25,
            working: 0.1,
            observations: 0.1,
        }
    }
}

/// Options of [`build_context`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ContextOptions {
    /// Tokens the rendered context may take.
    pub budget: usize,
    pub question: Option<String>,
    pub mode: ContextMode,
    pub instructions: Option<String>,
    pub shares: Shares,
    pub tokenizer: Tokenizer,
    /// Save the context as a `CONTEXT` event (and keep a changed cover one more turn).
    pub save: bool,
    /// Record what the snippets returned as uses (`dynamics::usage`).
    pub record_usage: bool,
    /// Whose tool-call observations to show: this session's (`None`: those without one).
    /// One session's observations never enter another's context.
    pub session: Option<String>,
}

impl ContextOptions {
    pub fn with_budget(budget: usize) -> Self {
        ContextOptions {
            budget,
            question: None,
            mode: ContextMode::All,
            instructions: None,
            shares: Shares::default(),
            tokenizer: Tokenizer::Approx,
            save: false,
            record_usage: true,
            session: None,
        }
    }
}

/// One rendered line and what it rests on (`event:SEQ`, node keys, `e<id>` facts).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub text: String,
    pub ids: Vec<String>,
    pub tokens: usize,
    /// The fact a fact snippet's line shows, by its ends' keys and relation: its id (`e28`)
    /// is one a deletion or forgetting gives anew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact: Option<FactKey>,
}

/// A section as rendered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Section {
    pub name: String,
    pub lines: Vec<Line>,
}

/// The cover's roots that did not fit listed at most in [`Context::left_out`], the newest.
pub const COVER_ROOTS_LISTED: usize = 50;

/// A line that did not fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    pub section: String,
    pub ids: Vec<String>,
    pub tokens: usize,
}

/// An assembled context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// The text to send.
    pub text: String,
    /// Its tokens, counted on `text` by `tokenizer`.
    pub tokens: usize,
    pub budget: usize,
    pub tokenizer: Tokenizer,
    /// Tokens of the stable prefix (up to and including the boundary line).
    pub prefix_tokens: usize,
    /// FNV-1a digest of the prefix bytes, hex: equal digests, identical prefixes.
    pub prefix_digest: String,
    pub sections: Vec<Section>,
    pub left_out: Vec<LeftOut>,
    /// Lines left out that `left_out` does not list: the cover's roots older than the newest
    /// [`COVER_ROOTS_LISTED`] that did not fit, counted, not read. A long history's oldest
    /// weeks had each been read and listed: 25,715 lines, 2.8 MB of JSON, for a context of
    /// 8,000 tokens of a store of 980k events.
    #[serde(default)]
    pub left_out_unlisted: usize,
    /// The summaries of the cover, by sequence number.
    pub cover: Vec<u64>,
    /// The cover is the previous turn's, kept one more turn.
    pub cover_held_over: bool,
    /// The turn number, when the context was saved.
    pub turn: Option<u64>,
}

/// A fact a saved context showed: the id it was shown by, and what outlasts that id (written
/// beside it: `{"id", "from", "relation", "to"}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedFact {
    pub id: String,
    #[serde(flatten)]
    pub fact: FactKey,
}

/// A saved context, as its `CONTEXT` event holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub turn: u64,
    /// Sequence number of the `CONTEXT` event.
    #[serde(default)]
    pub seq: u64,
    pub tokens: usize,
    pub budget: usize,
    pub prefix_digest: String,
    pub cover: Vec<u64>,
    pub cover_held_over: bool,
    /// The ids its lines rest on, each once, in the order the context shows them.
    pub ids: Vec<String>,
    /// Each fact among `ids` (`e28`) by its ends' keys and relation, as the store held it
    /// when the context was made: a deletion or forgetting gives every edge id anew, and the
    /// id alone then names another fact. Empty in a context saved before they were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<SavedFact>,
    /// What counted its tokens (`None` in a context saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<Tokenizer>,
    /// Which sections it held (`None` in a context saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ContextMode>,
    /// The question its snippets answered, if it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
}

/// Assembles the context for this turn (see the module documentation). For many turns, build
/// a [`ContextBuilder`] once: it keeps retrieval's entity dictionary between turns.
pub fn build_context(store: &Store, opts: &ContextOptions) -> Result<Context> {
    ContextBuilder::new(store)?.build(opts)
}

/// Assembles contexts turn after turn over one store. It keeps retrieval's dictionary and the
/// live summaries between turns (re-read only when a summary or a deletion was logged since).
pub struct ContextBuilder<'s> {
    store: &'s Store,
    retriever: Retriever<'s>,
    caches: Caches,
}

/// What a builder keeps between turns.
#[derive(Default)]
struct Caches {
    moment: std::sync::Mutex<MomentCache>,
    /// Tokens of each summary's cover line, per tokenizer.
    cover_costs: std::sync::Mutex<std::collections::HashMap<(u64, Tokenizer), usize>>,
    /// The cover line of each summary read for one: only those the cover weighs are read.
    cover_lines: std::sync::Mutex<std::collections::HashMap<u64, std::sync::Arc<str>>>,
}

impl Caches {
    /// The cover line of `s`, kept from its first reading by `read` (a summary's text never
    /// changes). A failed read keeps nothing. The cache's lock is not held while `read` reads
    /// the store (as `consolidate::cached`).
    fn cover_line(
        &self,
        s: &Placement,
        read: impl FnOnce() -> Result<Option<String>>,
    ) -> Result<std::sync::Arc<str>> {
        let lines = || self.cover_lines.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(line) = lines().get(&s.seq) {
            return Ok(line.clone());
        }
        let line: std::sync::Arc<str> = cover_text(s, &read()?.unwrap_or_default()).into();
        lines().insert(s.seq, line.clone());
        Ok(line)
    }

    /// Tokens of `s`'s cover line under `tokenizer` (the same every turn: counted once), or
    /// `None`, with nothing kept, when `line` could not read it: a cost kept for a line not
    /// read had undercounted every later turn's cover.
    fn cover_cost(
        &self,
        s: &Placement,
        tokenizer: Tokenizer,
        line: impl FnOnce() -> Option<std::sync::Arc<str>>,
        count: &dyn Fn(&str) -> usize,
    ) -> Option<usize> {
        let costs = || self.cover_costs.lock().unwrap_or_else(|e| e.into_inner());
        let key = (s.seq, tokenizer);
        if let Some(tokens) = costs().get(&key) {
            return Some(*tokens);
        }
        let tokens = count(&line()?);
        costs().insert(key, tokens);
        Some(tokens)
    }
}

impl<'s> ContextBuilder<'s> {
    pub fn new(store: &'s Store) -> Result<Self> {
        Ok(ContextBuilder {
            store,
            retriever: Retriever::new(store)?,
            caches: Caches::default(),
        })
    }

    /// The context for this turn.
    pub fn build(&self, opts: &ContextOptions) -> Result<Context> {
        // What a saved context records of its budget is a log value, at most i64::MAX: a
        // larger one had been saved as an empty record, its turn then not found.
        if i64::try_from(opts.budget).is_err() {
            return Err(Error::InvalidArgument {
                name: "budget".into(),
                message: format!(
                    "{} tokens is more than a context can record; give at most {}",
                    opts.budget,
                    i64::MAX
                ),
            });
        }
        if let Some(text) = &opts.instructions {
            refuse_oversized_instructions(text)?;
            refuse_a_boundary_line(text)?;
        }
        let placed = consolidate::placed_summaries(self.store)?;
        assemble(
            self.store,
            &self.retriever,
            &placed.live,
            &self.caches,
            opts,
        )
    }
}

/// Lines of instructions at most: each is a line of the context, and blank ones may cost
/// next to nothing under a real tokenizer, so the budget alone does not bound them (two
/// million had taken a server to 1.7 GB).
pub const MAX_INSTRUCTION_LINES: usize = 10_000;

/// Bytes of instructions at most: more than the server's largest budget (200,000 tokens,
/// about 800 kB of English) holds.
pub const MAX_INSTRUCTION_BYTES: usize = 1 << 20;

/// Refuses instructions over [`MAX_INSTRUCTION_BYTES`] or [`MAX_INSTRUCTION_LINES`], before
/// they are split into lines.
fn refuse_oversized_instructions(instructions: &str) -> Result<()> {
    let refuse = |message: String| {
        Err(Error::InvalidArgument {
            name: "instructions".into(),
            message,
        })
    };
    if instructions.len() > MAX_INSTRUCTION_BYTES {
        return refuse(format!(
            "{} bytes; at most {MAX_INSTRUCTION_BYTES} are taken",
            instructions.len()
        ));
    }
    let lines = instructions.lines().count();
    if lines > MAX_INSTRUCTION_LINES {
        return refuse(format!(
            "{lines} lines; at most {MAX_INSTRUCTION_LINES} are taken"
        ));
    }
    Ok(())
}

/// Refuses instructions holding a line that is the boundary line, spaces aside: the boundary
/// is the context's own, and a caller splitting the prompt at the first one would find the
/// instructions' above the pins and the cover. (Every other section's text is one visible
/// line that starts with text of the context's, so only the instructions could hold it.)
fn refuse_a_boundary_line(instructions: &str) -> Result<()> {
    match boundary_line(instructions) {
        Some(line) => Err(Error::InvalidArgument {
            name: "instructions".into(),
            message: format!("line {line} {BOUNDARY_LINE_REFUSED}"),
        }),
        None => Ok(()),
    }
}

/// Why instructions holding the boundary line are refused, after the line's place.
pub const BOUNDARY_LINE_REFUSED: &str = "is the boundary line, which the context places itself \
     below the cover; reword it (its words within a longer line are allowed)";

/// The number (from 1) of the first line of `instructions` that is the boundary line, spaces
/// aside, which [`ContextBuilder::build`] refuses: a caller reading them from a file names the
/// file and the line.
pub fn boundary_line(instructions: &str) -> Option<usize> {
    instructions
        .lines()
        .position(|l| l.trim() == BOUNDARY)
        .map(|i| i + 1)
}

fn assemble(
    store: &Store,
    retriever: &Retriever<'_>,
    live: &[Placement],
    caches: &Caches,
    opts: &ContextOptions,
) -> Result<Context> {
    let counter = opts.tokenizer.counter();
    let count_line = |text: &str| counter.count(text);
    let instructions: Vec<Line> = opts
        .instructions
        .iter()
        .flat_map(|t| t.lines())
        .map(|t| line(t.to_string(), Vec::new(), &count_line))
        .collect();
    // Counted as rendered, newlines and all: the sum of the lines' counts fell short of the
    // text's under cl100k_base (93 tokens rendered where the lines summed to 92 or less), and
    // `fit` never drops an instruction, so the context came out over its budget.
    let fixed = counter.count(
        &render(&[Section {
            name: "instructions".into(),
            lines: instructions.clone(),
        }])
        .0,
    );
    if fixed > opts.budget {
        return Err(Error::InvalidArgument {
            name: "budget".into(),
            message: format!(
                "a budget of {}: {} alone take {fixed}; give at least {fixed}",
                if opts.budget == 1 {
                    "1 token".to_string()
                } else {
                    format!("{} tokens", opts.budget)
                },
                if opts.instructions.as_deref().is_some_and(|t| !t.is_empty()) {
                    "the instructions and the boundary line"
                } else {
                    "the section header and the boundary line"
                }
            ),
        });
    }
    let room = opts.budget - fixed;
    let share = |s: f32| ((room as f64) * s.clamp(0.0, 1.0) as f64) as usize;
    let wants = |section: &str| match opts.mode {
        ContextMode::All => true,
        ContextMode::Anchor => matches!(section, "cover" | "moment"),
        ContextMode::Mainline => section == "pinned",
    };

    let mut left_out = Vec::new();
    let mut left_out_unlisted = 0;
    let mut sections: Vec<Section> = vec![Section {
        name: "instructions".into(),
        lines: instructions,
    }];
    let pinned = if wants("pinned") {
        let cap = if opts.mode == ContextMode::Mainline {
            room
        } else {
            share(opts.shares.pinned)
        };
        fill(
            "pinned",
            pinned_lines(store, &count_line),
            cap,
            &mut left_out,
        )
    } else {
        Vec::new()
    };
    sections.push(Section {
        name: "pinned".into(),
        lines: pinned,
    });

    // Held to the save: two builds that read the same last turn saved the same next one.
    let _saving = opts.save.then(|| store.hold_context_saves());
    let previous = if opts.save {
        latest_snapshot(store)?
    } else {
        None
    };
    // A summary's line is read when the cover first weighs it: the cover's cost function
    // cannot fail, so the first failure is kept and returned once the cover is chosen.
    let line_failed = std::cell::RefCell::new(None);
    let cover_line = |s: &Placement| -> Option<std::sync::Arc<str>> {
        match caches.cover_line(s, || consolidate::placed_summary_text(store, s)) {
            Ok(line) => Some(line),
            Err(e) => {
                line_failed.borrow_mut().get_or_insert(e);
                None
            }
        }
    };
    let cover_cost = |s: &Placement| -> usize {
        caches
            .cover_cost(s, opts.tokenizer, || cover_line(s), &count_line)
            .unwrap_or(0)
    };
    let (cover_summaries, cover_held_over) = if wants("cover") {
        let (summaries, held_over, dropped) = choose_cover(
            live,
            previous.as_ref(),
            share(opts.shares.cover),
            &cover_cost,
        );
        // What did not fit is listed, the cover's roots too (none had been): the newest of
        // them, the nearest to fitting; the older ones are counted.
        let listed_from = dropped.len().saturating_sub(COVER_ROOTS_LISTED);
        left_out_unlisted = listed_from;
        left_out.extend(dropped[listed_from..].iter().map(|s| LeftOut {
            section: "cover".into(),
            ids: vec![format!("event:{}", s.seq)],
            tokens: cover_cost(s),
        }));
        (summaries, held_over)
    } else {
        (Vec::new(), false)
    };
    let cover_ids: Vec<u64> = cover_summaries.iter().map(|s| s.seq).collect();
    let cover_lines: Vec<Line> = cover_summaries
        .iter()
        .map(|s| Line {
            text: cover_line(s).as_deref().unwrap_or_default().to_string(),
            ids: vec![format!("event:{}", s.seq)],
            tokens: cover_cost(s),
            fact: None,
        })
        .collect();
    if let Some(e) = line_failed.into_inner() {
        return Err(e);
    }
    sections.push(Section {
        name: "cover".into(),
        lines: cover_lines,
    });

    // A blank question is none: the question is optional, and tool callers fill optional
    // strings with "" (retrieval refuses a blank one, which made the context fail, and only
    // in the modes that have snippets).
    let question = opts
        .question
        .as_deref()
        .filter(|q| !crate::text::is_blank(q));
    let snippets = match (question, wants("snippets")) {
        (Some(q), true) => snippet_lines(
            retriever,
            q,
            share(opts.shares.snippets),
            opts,
            &mut left_out,
        )?,
        _ => Vec::new(),
    };
    sections.push(Section {
        name: "snippets".into(),
        lines: snippets,
    });
    // Read once: the widening below makes its lines again from the same memory.
    let wm = store.working_memory();
    let (all_working, subgoals_cut) = if wants("working") {
        working_lines(&wm, &count_line, share(opts.shares.working))
    } else {
        (Vec::new(), false)
    };
    sections.push(Section {
        name: "working".into(),
        lines: fill(
            "working",
            all_working.clone(),
            share(opts.shares.working),
            &mut left_out,
        ),
    });
    let all_observations = if wants("observations") {
        let mut cache = caches.moment.lock().unwrap_or_else(|e| e.into_inner());
        observation_lines(store, &mut cache, opts.session.as_deref(), opts.tokenizer)?
    } else {
        Vec::new()
    };
    sections.push(Section {
        name: "observations".into(),
        lines: fill(
            "observations",
            all_observations.clone(),
            share(opts.shares.observations),
            &mut left_out,
        ),
    });
    let in_moment = if wants("moment") {
        let mut cache = caches.moment.lock().unwrap_or_else(|e| e.into_inner());
        place_moment(
            store,
            &mut cache,
            (opts, &count_line),
            &mut sections,
            &mut left_out,
        )?
    } else {
        sections.push(Section {
            name: "moment".into(),
            lines: Vec::new(),
        });
        HashSet::new()
    };
    if let Some(q) = question {
        let room = opts
            .budget
            .saturating_sub(lines_tokens(&sections) + count_line(BOUNDARY));
        widen_snippets(
            retriever,
            q,
            room,
            (opts, &in_moment),
            &mut sections,
            &mut left_out,
        )?;
    }
    // Working memory's lines are made again for the larger room: its subgoal stack is one
    // line cut to the room it was made for, and forty subgoals had shown their top three
    // with most of the budget unused.
    // (A section not wanted has no lines, none left out and none cut: `widen` passes it by.)
    let working_for = |cap: usize| working_lines(&wm, &count_line, cap).0;
    let observations_for = |_: usize| all_observations.clone();
    for (name, all, cut) in [
        (
            "working",
            &working_for as &dyn Fn(usize) -> Vec<Line>,
            subgoals_cut,
        ),
        ("observations", &observations_for, false),
    ] {
        let room = opts
            .budget
            .saturating_sub(lines_tokens(&sections) + count_line(BOUNDARY));
        widen(name, all, cut, room, (&mut sections, &mut left_out));
    }

    // A snippet retrieval cut is not left out where the latest events show it whole.
    left_out.retain(|l| {
        !(l.section == "snippets" && l.ids.first().is_some_and(|id| in_moment.contains(id)))
    });
    let mut context = fit(sections, opts, counter, &mut left_out);
    context.left_out = left_out;
    context.left_out_unlisted = left_out_unlisted;
    context.cover = cover_ids;
    context.cover_held_over = cover_held_over;
    if opts.save {
        let made = Made {
            mode: opts.mode,
            question,
        };
        context.turn = Some(save(store, &context, made, previous.as_ref())?);
    }
    Ok(context)
}

/// A line of `text` ([`crate::text::one_line`]: a stored text's line breaks and control
/// characters cannot make lines of their own), counted.
fn line(text: String, ids: Vec<String>, count: &dyn Fn(&str) -> usize) -> Line {
    let text = match crate::text::one_line(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(shown) => shown,
    };
    let tokens = count(&text);
    Line {
        text,
        ids,
        tokens,
        fact: None,
    }
}

/// Keeps lines, in order, while they fit `cap`; the rest are left out.
fn fill(section: &str, lines: Vec<Line>, cap: usize, left_out: &mut Vec<LeftOut>) -> Vec<Line> {
    let mut used = 0;
    let mut kept = Vec::new();
    for l in lines {
        if used + l.tokens <= cap {
            used += l.tokens;
            kept.push(l);
        } else {
            left_out.push(LeftOut {
                section: section.into(),
                ids: l.ids,
                tokens: l.tokens,
            });
        }
    }
    kept
}

/// Fills section `name` again from `all` its lines (made for the larger cap), with the `room`
/// the other sections left added to what it holds, when its share alone left lines out or
/// `cut` one: below the boundary, as the snippets' ([`widen_snippets`]), so the prefix does
/// not move.
fn widen(
    name: &str,
    all: &dyn Fn(usize) -> Vec<Line>,
    cut: bool,
    room: usize,
    (sections, left_out): (&mut [Section], &mut Vec<LeftOut>),
) {
    if room == 0 || !(cut || left_out.iter().any(|l| l.section == name)) {
        return;
    }
    let Some(section) = sections.iter_mut().find(|s| s.name == name) else {
        return;
    };
    let cap = section.lines.iter().map(|l| l.tokens).sum::<usize>() + room;
    let mut still_out = Vec::new();
    section.lines = fill(name, all(cap), cap, &mut still_out);
    relist(name, still_out, left_out);
}

/// The mainline, then the pinned nodes by key.
fn pinned_lines(store: &Store, count: &dyn Fn(&str) -> usize) -> Vec<Line> {
    let mut out = Vec::new();
    if let Some(m) = store.working_memory().mainline {
        out.push(line(
            format!("Mainline: {m}"),
            vec!["wm:mainline".into()],
            count,
        ));
    }
    let g = store.graph();
    let mut pinned: Vec<crate::model::Node> = g.pinned_ids().filter_map(|id| g.node(id)).collect();
    pinned.sort_by(|a, b| a.key.cmp(&b.key));
    for n in pinned {
        let props = crate::retrieval::prop_parts(&n.props);
        let props = if props.is_empty() {
            String::new()
        } else {
            format!(" ({})", props.join(", "))
        };
        out.push(line(
            format!("Pinned {}: {}{props}", n.label, n.name),
            vec![n.key.clone()],
            count,
        ));
    }
    out
}

/// The cover for this turn: the previous turn's when a summary made since that turn changed
/// it and it was not already held over (and all its summaries still live), else the one the
/// summaries give now. A cover that differs for another reason (the previous turn's mode had
/// none, its budget another size) is not held over: that would break the prefix twice. Also
/// the roots the cover given now dropped for want of room (none for a cover held over, which
/// is the previous turn's).
fn choose_cover<'a>(
    live: &'a [Placement],
    previous: Option<&Snapshot>,
    cap: usize,
    cost: &dyn Fn(&Placement) -> usize,
) -> (Vec<Placement>, bool, Vec<&'a Placement>) {
    let (now, dropped) = cover::cover_and_dropped(live, cap, cost);
    let now_ids: Vec<u64> = now.iter().map(|s| s.seq).collect();
    if let Some(prev) = previous {
        let summary_made_since = now.iter().any(|s| s.seq > prev.seq);
        if prev.cover != now_ids
            && !prev.cover_held_over
            && !prev.cover.is_empty()
            && summary_made_since
        {
            let by_seq: std::collections::BTreeMap<u64, &Placement> =
                live.iter().map(|s| (s.seq, s)).collect();
            let kept: Option<Vec<Placement>> = prev
                .cover
                .iter()
                .map(|seq| by_seq.get(seq).map(|s| (*s).clone()))
                .collect();
            if let Some(kept) = kept {
                let tokens: usize = kept.iter().map(cost).sum();
                if tokens <= cap {
                    return (kept, true, Vec::new());
                }
            }
        }
    }
    (now, false, dropped)
}

fn cover_text(s: &Placement, text: &str) -> String {
    format!(
        "[{} {}..{}] {}",
        s.level.name(),
        s.start,
        s.end,
        crate::text::one_line(text.trim())
    )
}

/// Tokens of every line of `sections`.
fn lines_tokens(sections: &[Section]) -> usize {
    sections
        .iter()
        .flat_map(|s| &s.lines)
        .map(|l| l.tokens)
        .sum()
}

/// Gives the snippets the `room` the other sections left (the moment takes what the shares
/// leave, but has only so many latest events) when retrieval cut some for their share: with
/// most of a budget unused, snippets that would have fitted were listed as left out. The
/// pack is made again with the larger cap; its uses were recorded by the first, whose
/// snippets lead it.
fn widen_snippets(
    retriever: &Retriever<'_>,
    question: &str,
    room: usize,
    (opts, in_moment): (&ContextOptions, &HashSet<String>),
    sections: &mut [Section],
    left_out: &mut Vec<LeftOut>,
) -> Result<()> {
    let cut: usize = left_out
        .iter()
        .filter(|l| l.section == "snippets")
        .map(|l| l.tokens)
        .min()
        .unwrap_or(usize::MAX);
    let Some(section) = sections.iter_mut().find(|s| s.name == "snippets") else {
        return Ok(());
    };
    if cut > room {
        return Ok(());
    }
    let shown: usize = section.lines.iter().map(|l| l.tokens).sum();
    let mut wider = opts.clone();
    wider.record_usage = false;
    let mut cut_now = Vec::new();
    let mut lines = snippet_lines(retriever, question, shown + room, &wider, &mut cut_now)?;
    lines.retain(|l| !shown_in(l, in_moment));
    if lines.iter().map(|l| l.tokens).sum::<usize>() > shown + room {
        return Ok(());
    }
    section.lines = lines;
    relist("snippets", cut_now, left_out);
    Ok(())
}

/// Whether snippet line `l` shows an event or a turn's passage that the latest events show
/// whole (`in_moment`, [`Moment::shown`]).
fn shown_in(l: &Line, in_moment: &HashSet<String>) -> bool {
    l.ids.first().is_some_and(|id| in_moment.contains(id))
}

/// Adds the latest events after the sections before them, in the room those leave, and takes
/// from the snippets what they show whole: its tokens were spent twice. The moment keeps it,
/// in its run of time. Made a second time in the room the snippets taken freed (a longer run
/// of the same latest events, so it shows what the first did); what that frees is the pack's
/// ([`widen_snippets`]). Returns the ids it shows whole.
fn place_moment(
    store: &Store,
    cache: &mut MomentCache,
    (opts, count_line): (&ContextOptions, &dyn Fn(&str) -> usize),
    sections: &mut Vec<Section>,
    left_out: &mut Vec<LeftOut>,
) -> Result<HashSet<String>> {
    let mut moment = Moment {
        lines: Vec::new(),
        shown: HashSet::new(),
    };
    for _ in 0..2 {
        left_out.retain(|l| l.section != "moment");
        let used = lines_tokens(sections) + count_line(BOUNDARY);
        moment = moment_lines(
            store,
            cache,
            opts.budget.saturating_sub(used),
            opts.tokenizer,
            opts.session.as_deref(),
            left_out,
        )?;
        let Some(snippets) = sections.iter_mut().find(|s| s.name == "snippets") else {
            break;
        };
        let before = snippets.lines.len();
        snippets.lines.retain(|l| !shown_in(l, &moment.shown));
        if snippets.lines.len() == before {
            break;
        }
    }
    sections.push(Section {
        name: "moment".into(),
        lines: moment.lines,
    });
    Ok(moment.shown)
}

/// Puts `now` in place of the lines of section `name` that `left_out` lists, where the first
/// of those was (before the later sections' lines).
fn relist(name: &str, now: Vec<LeftOut>, left_out: &mut Vec<LeftOut>) {
    let at = left_out
        .iter()
        .position(|l| l.section == name)
        .unwrap_or(left_out.len());
    left_out.retain(|l| l.section != name);
    let at = at.min(left_out.len());
    left_out.splice(at..at, now);
}

/// Retrieval's pack for the question, packed into `cap` tokens; the ranked snippets that did
/// not fit (the pack's `cut`) are left out. A snippet of another session's tool call (typed or
/// raw) is dropped: no session sees another's calls, in any section.
fn snippet_lines(
    retriever: &Retriever<'_>,
    question: &str,
    cap: usize,
    opts: &ContextOptions,
    left_out: &mut Vec<LeftOut>,
) -> Result<Vec<Line>> {
    if cap == 0 {
        return Ok(Vec::new());
    }
    let retrieve = RetrieveOptions::default()
        .with_budget(cap)
        .with_token_counter(opts.tokenizer)
        .with_record_usage(opts.record_usage);
    let pack = retriever.retrieve(question, &retrieve)?;
    left_out.extend(pack.cut.into_iter().map(|c| LeftOut {
        section: "snippets".into(),
        ids: vec![c.id],
        tokens: c.tokens,
    }));
    let store = retriever.store();
    let foreign = |s: &crate::retrieval::Snippet| -> Result<bool> {
        if s.kind != crate::retrieval::SnippetKind::Event {
            return Ok(false);
        }
        let Some(&seq) = s.provenance.events.first() else {
            return Ok(false);
        };
        Ok(store
            .event(seq)?
            .and_then(|ev| crate::observe::call_session(&ev))
            .is_some_and(|of| of.as_deref() != opts.session.as_deref()))
    };
    let mut mine = Vec::with_capacity(pack.snippets.len());
    for s in pack.snippets {
        if !foreign(&s)? {
            mine.push(s);
        }
    }
    Ok(mine
        .into_iter()
        .map(|s| {
            let mut ids = vec![s.id.clone()];
            ids.extend(s.provenance.events.iter().map(|e| format!("event:{e}")));
            Line {
                text: s.text,
                ids,
                tokens: s.tokens,
                fact: s.provenance.fact,
            }
        })
        .collect())
}

/// Intent, subgoals, threats, promises, then observations newest first; and whether the
/// subgoal stack was shown by its top, cut to its room (the room the intent, threats and
/// promises leave: sized to all of it, a stack made for a widened room had pushed the threats
/// back out).
fn working_lines(
    wm: &crate::dynamics::working::WorkingMemory,
    count: &dyn Fn(&str) -> usize,
    room: usize,
) -> (Vec<Line>, bool) {
    let wm_id = |what: &str| vec![format!("wm:{what}")];
    let intent: Vec<Line> = wm
        .intent
        .iter()
        .map(|i| line(format!("Intent: {i}"), wm_id("intent"), count))
        .collect();
    let threats: Vec<Line> = wm
        .threats
        .iter()
        .map(|t| line(format!("Threat: {t}"), wm_id("threats"), count))
        .collect();
    let promises: Vec<Line> = wm
        .promises
        .iter()
        .map(|p| line(format!("Promise: {p}"), wm_id("promises"), count))
        .collect();
    let others: usize = [&intent, &threats, &promises]
        .iter()
        .flat_map(|ls| ls.iter())
        .map(|l| l.tokens)
        .sum();
    let (subgoals, cut) = if wm.subgoals.is_empty() {
        (None, false)
    } else {
        let (l, cut) = subgoals_line(&wm.subgoals, room.saturating_sub(others), count);
        (Some(l), cut)
    };
    let mut out = intent;
    out.extend(subgoals);
    out.extend(threats);
    out.extend(promises);
    for o in wm.observations.iter().rev() {
        out.push(line(
            format!("Noticed (t={}): {}", o.ts, o.text),
            vec![format!("event:{}", o.seq)],
            count,
        ));
    }
    (out, cut)
}

/// The subgoal stack as one line, bottom to top, and whether it is cut. A whole stack over
/// `room` is shown by its top that fits, after "…" (the current subgoal matters most); when not
/// even the top one fits, the whole line (which is then left out, and listed).
fn subgoals_line(subgoals: &[String], room: usize, count: &dyn Fn(&str) -> usize) -> (Line, bool) {
    let ids = || vec!["wm:subgoals".to_string()];
    let whole = line(format!("Subgoals: {}", subgoals.join(" > ")), ids(), count);
    if whole.tokens <= room {
        return (whole, false);
    }
    let mut top = None;
    for k in 1..subgoals.len() {
        let text = format!(
            "Subgoals: … > {}",
            subgoals[subgoals.len() - k..].join(" > ")
        );
        let shown = line(text, ids(), count);
        if shown.tokens > room {
            break;
        }
        top = Some(shown);
    }
    match top {
        Some(top) => (top, true),
        None => (whole, false),
    }
}

/// The moment's lines of recent log records, kept between turns: consecutive turns show mostly
/// the same latest events, and decoding and rendering them is most of a context's cost.
/// Cleared when an event is deleted.
/// A log record as the moment and the observations block use it.
struct Cached {
    ts: i64,
    text: String,
    /// The passage a conversation's turn shows the words of ([`moment_text`]): its line
    /// rests on it too.
    passage: Option<String>,
    /// A typed observation of a tool call (`observe`): shown grouped in its own block, not in
    /// the moment.
    observation: Option<Observed>,
    /// For a tool call kept raw (`observe::TOOL_CALL`), its session: shown in the moment of
    /// that session's contexts only, as its typed calls are.
    raw_call: Option<Option<String>>,
}

#[derive(Clone)]
struct Observed {
    kind: String,
    subject: String,
    detail: Option<String>,
    session: Option<String>,
}

impl Observed {
    fn of(ev: &crate::model::Event) -> Option<Observed> {
        if ev.kind != kinds::OBSERVATION {
            return None;
        }
        let Value::Map(m) = &ev.payload else {
            return None;
        };
        let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Observed {
            kind: text("type")?,
            subject: text("subject")?,
            detail: text("detail"),
            session: text("session"),
        })
    }
}

#[derive(Default)]
struct MomentCache {
    deleted: usize,
    /// Per sequence number: the line's time and text, or `None` for a record the moment skips
    /// (bookkeeping, or deleted).
    lines: std::collections::BTreeMap<u64, Option<Cached>>,
    tokens: std::collections::HashMap<(u64, Tokenizer), usize>,
}

/// An event as the latest events show it: its text, and for a turn of a conversation, whose
/// words are its passage's and not its payload's, what was said (shown as its speaker and
/// id alone, the turn told the reader nothing).
fn moment_text(ev: &crate::model::Event) -> String {
    let mut text = ev.text();
    if let Some((_, _, said)) = crate::conversation::turn_passage(ev) {
        text.push_str(": ");
        text.push_str(said);
    }
    text
}

impl MomentCache {
    /// Forgets everything once an event was deleted since it was filled.
    fn sync(&mut self, store: &Store) {
        let deleted = store.deleted_count();
        if self.deleted != deleted {
            *self = MomentCache {
                deleted,
                ..MomentCache::default()
            };
        }
    }

    /// Makes sure the records `start..end` are known, reading them from the log if not.
    fn load(&mut self, store: &Store, start: u64, end: u64) -> Result<()> {
        if (start..end).all(|seq| self.lines.contains_key(&seq)) {
            return Ok(());
        }
        let mut found = std::collections::BTreeMap::new();
        store.scan_log(start, |ev| {
            if ev.seq >= end {
                return Ok(false);
            }
            let line = (!NOT_MOMENT.contains(&ev.kind.as_str())).then(|| Cached {
                ts: ev.ts,
                text: format!("t={} {}", ev.ts, crate::text::one_line(&moment_text(&ev))),
                passage: crate::conversation::turn_passage(&ev).map(|(key, ..)| key.to_string()),
                observation: Observed::of(&ev),
                raw_call: crate::observe::raw_call_session(&ev),
            });
            found.insert(ev.seq, line);
            Ok(true)
        })?;
        for seq in start..end {
            self.lines.insert(seq, found.remove(&seq).flatten());
        }
        // Keep the latest records only.
        let excess = self.lines.len().saturating_sub(2 * MOMENT_SCAN as usize);
        if let Some(&cutoff) = self.lines.keys().nth(excess).filter(|_| excess > 0) {
            self.lines = self.lines.split_off(&cutoff);
            self.tokens.retain(|(seq, _), _| *seq >= cutoff);
        }
        Ok(())
    }
}

/// The observations of one type and subject: the latest time and detail, and every event.
struct Group {
    latest: i64,
    detail: Option<String>,
    seqs: Vec<u64>,
}

/// Order of the observation types in the block (the `observe` table's).
const OBSERVATION_TYPES: [&str; 8] = [
    "command_failed",
    "file_edited",
    "file_created",
    "task_delegated",
    "todo_updated",
    "command_run",
    "search_performed",
    "file_read",
];

/// The typed observations of the session (or those without one) among the latest records,
/// one line per type and subject (`x3` when seen three times, at the latest time), grouped by
/// type, newest first within a type.
fn observation_lines(
    store: &Store,
    cache: &mut MomentCache,
    session: Option<&str>,
    tokenizer: Tokenizer,
) -> Result<Vec<Line>> {
    cache.sync(store);
    let last = store.last_seq();
    let start = latest_records(store, cache, last)?;
    let mut groups: std::collections::BTreeMap<(usize, String), Group> =
        std::collections::BTreeMap::new();
    for (seq, entry) in cache.lines.range(start..=last) {
        let Some(Cached {
            ts,
            observation: Some(o),
            ..
        }) = entry
        else {
            continue;
        };
        if o.session.as_deref() != session {
            continue;
        }
        let rank = OBSERVATION_TYPES
            .iter()
            .position(|t| *t == o.kind)
            .unwrap_or(OBSERVATION_TYPES.len());
        let g = groups.entry((rank, o.subject.clone())).or_insert(Group {
            latest: i64::MIN,
            detail: None,
            seqs: Vec::new(),
        });
        if *ts >= g.latest {
            g.latest = *ts;
            g.detail = o.detail.clone();
        }
        g.seqs.push(*seq);
    }
    let mut ordered: Vec<((usize, String), Group)> = groups.into_iter().collect();
    ordered.sort_by(|((ra, sa), a), ((rb, sb), b)| {
        (ra, std::cmp::Reverse(a.latest), sa).cmp(&(rb, std::cmp::Reverse(b.latest), sb))
    });
    let counter = tokenizer.counter();
    let lines = ordered
        .into_iter()
        .map(|((rank, subject), g)| {
            let kind = OBSERVATION_TYPES.get(rank).copied().unwrap_or("other");
            let n = g.seqs.len();
            let times = if n > 1 {
                format!(" x{n}")
            } else {
                String::new()
            };
            let detail = g.detail.map(|d| format!(" ({d})")).unwrap_or_default();
            let text = format!("{kind}: {subject}{detail}{times}, last t={}", g.latest);
            let ids = g.seqs.iter().map(|s| format!("event:{s}")).collect();
            line(text, ids, &|t: &str| counter.count(t))
        })
        .collect();
    Ok(lines)
}

/// Reads the log back from `last` until it holds `MOMENT_WINDOW` records the context can show,
/// or `MOMENT_SCAN` records in all (runs of summaries stepped over), and returns the first of
/// them: bookkeeping after the last events does not put them out of reach, as when the window
/// counted it.
fn latest_records(store: &Store, cache: &mut MomentCache, last: u64) -> Result<u64> {
    let mut scan = BackwardScan::new(last);
    let mut showable = 0;
    while let Some(step) = scan.next_step(store, cache)? {
        for seq in step.rev() {
            if matches!(cache.lines.get(&seq), Some(Some(_))) {
                showable += 1;
                if showable == MOMENT_WINDOW {
                    return Ok(seq);
                }
            }
        }
    }
    Ok(scan.from)
}

/// The log read back from its end a step of `MOMENT_STEP` records at a time into the cache,
/// up to `MOMENT_SCAN` records, stepping over runs of summaries without reading them or
/// counting them against that reach: a consolidation of a long history appends them in runs
/// of thousands (one per day and episode) after the latest events, which the moment and the
/// observations then never reached.
struct BackwardScan {
    last: u64,
    /// The first record read so far (`last + 1` before the first step).
    from: u64,
    passed_over: u64,
    /// The summaries' numbers, read from the episodic index's keys once a whole step held
    /// nothing to show.
    summaries: Option<std::collections::BTreeSet<u64>>,
}

impl BackwardScan {
    fn new(last: u64) -> Self {
        BackwardScan {
            last,
            from: last + 1,
            passed_over: 0,
            summaries: None,
        }
    }

    /// The records of the next step back, loaded into `cache`; `None` at the log's start or
    /// the scan's reach.
    fn next_step(
        &mut self,
        store: &Store,
        cache: &mut MomentCache,
    ) -> Result<Option<std::ops::Range<u64>>> {
        if let Some(summaries) = &self.summaries {
            for seq in summaries.range(..self.from).rev() {
                if *seq + 1 != self.from {
                    break;
                }
                self.from = *seq;
                self.passed_over += 1;
            }
        }
        if self.from <= 1 || (self.last + 1 - self.from) - self.passed_over >= MOMENT_SCAN {
            return Ok(None);
        }
        let start = self.from.saturating_sub(MOMENT_STEP).max(1);
        cache.load(store, start, self.from)?;
        // A whole step of records no section shows: bookkeeping, most likely a run of
        // summaries; from here on the scan steps over them.
        if self.summaries.is_none()
            && (start..self.from).all(|seq| !matches!(cache.lines.get(&seq), Some(Some(_))))
        {
            self.summaries = Some(
                store
                    .seqs_with(crate::store::Facet::Kind, consolidate::SUMMARY)?
                    .into_iter()
                    .collect(),
            );
        }
        let step = start..self.from;
        self.from = start;
        Ok(Some(step))
    }
}

/// The latest raw events that fit `cap`, newest kept first, shown oldest first (a raw tool
/// call of another session than `session` left out). The log is read back from its end a step
/// at a time, so the cost follows the budget, not the store.
fn moment_lines(
    store: &Store,
    cache: &mut MomentCache,
    cap: usize,
    tokenizer: Tokenizer,
    session: Option<&str>,
    left_out: &mut Vec<LeftOut>,
) -> Result<Moment> {
    cache.sync(store);
    let counter = tokenizer.counter();
    let mut kept: Vec<(i64, u64, Line)> = Vec::new();
    let mut cut_seq = None;
    let mut used = 0;
    let mut showable = 0;
    let mut scan = BackwardScan::new(store.last_seq());
    'steps: while showable < MOMENT_WINDOW {
        let Some(step) = scan.next_step(store, cache)? else {
            break;
        };
        for seq in step.rev() {
            let Some(Some(Cached {
                ts,
                text,
                passage,
                observation: None,
                raw_call,
            })) = cache.lines.get(&seq)
            else {
                continue;
            };
            if raw_call.as_ref().is_some_and(|s| s.as_deref() != session) {
                continue;
            }
            showable += 1;
            let tokens = *cache
                .tokens
                .entry((seq, tokenizer))
                .or_insert_with(|| counter.count(text));
            let mut ids = vec![format!("event:{seq}")];
            ids.extend(passage.iter().cloned());
            if used + tokens > cap {
                // The newest event alone longer than the room is shown cut to fit: left out,
                // it would empty the section, and every older event with it.
                if kept.is_empty() {
                    if let Some(cut) = cut_to_fit(text, cap, counter) {
                        let tokens = counter.count(&cut);
                        kept.push((
                            *ts,
                            seq,
                            Line {
                                text: cut,
                                ids,
                                tokens,
                                fact: None,
                            },
                        ));
                        // Full: the next event shown, if any, is the first left out.
                        used = cap;
                        cut_seq = Some(seq);
                        continue;
                    }
                }
                // The moment is a run of the latest events, without holes: once one does not
                // fit, it and everything older stay out (the first of them is listed).
                left_out.push(LeftOut {
                    section: "moment".into(),
                    ids,
                    tokens,
                });
                break 'steps;
            }
            used += tokens;
            kept.push((
                *ts,
                seq,
                Line {
                    text: text.clone(),
                    ids,
                    tokens,
                    fact: None,
                },
            ));
        }
    }
    kept.sort_by_key(|(ts, seq, _)| (*ts, *seq));
    // What the latest events show whole: each line's ids, but a line shown cut's.
    let shown = (kept.iter())
        .filter(|(_, seq, _)| Some(*seq) != cut_seq)
        .flat_map(|(_, _, l)| l.ids.iter().cloned())
        .collect();
    Ok(Moment {
        lines: kept.into_iter().map(|(_, _, l)| l).collect(),
        shown,
    })
}

/// The latest events as the context shows them.
struct Moment {
    lines: Vec<Line>,
    /// The ids of the events shown whole, and of the passages the turns among them show.
    shown: HashSet<String>,
}

/// Fewest characters of an event worth showing cut.
const CUT_AT_LEAST_CHARS: usize = 16;

/// The longest start of `text` that, followed by "…", counts at most `room` tokens (found by
/// bisection over its characters, each a whole grapheme cluster: a joined emoji, a letter with
/// its accents, a Hangul syllable of jamo, a conjunct); `None` when not even
/// [`CUT_AT_LEAST_CHARS`] fit.
fn cut_to_fit(text: &str, room: usize, counter: &dyn TokenCounter) -> Option<String> {
    use unicode_segmentation::UnicodeSegmentation;
    let starts: Vec<usize> = text.grapheme_indices(true).map(|(i, _)| i).collect();
    let cut = |chars: usize| {
        let end = starts.get(chars).copied().unwrap_or(text.len());
        format!("{}…", text[..end].trim_end())
    };
    let fits = |chars: usize| counter.count(&cut(chars)) <= room;
    let (mut lo, mut hi) = (CUT_AT_LEAST_CHARS, starts.len());
    if lo >= hi || !fits(lo) {
        return None;
    }
    // `lo` fits; the longest that does lies in lo..=hi.
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(cut(lo))
}

/// Renders the sections and counts the text; while it is over the budget (a tokenizer that
/// does not add up over lines), drops lines from the bottom: the oldest of the moment first,
/// then the last line of the sections above, never the instructions.
fn fit(
    mut sections: Vec<Section>,
    opts: &ContextOptions,
    counter: &dyn TokenCounter,
    left_out: &mut Vec<LeftOut>,
) -> Context {
    loop {
        let (text, prefix) = render(&sections);
        let tokens = counter.count(&text);
        if tokens > opts.budget && cut_shorter(&mut sections, tokens - opts.budget, counter) {
            continue;
        }
        if tokens <= opts.budget || !drop_enough(&mut sections, tokens - opts.budget, left_out) {
            return Context {
                prefix_tokens: counter.count(&prefix),
                prefix_digest: format!("{:016x}", crate::codec::fnv1a(prefix.as_bytes())),
                text,
                tokens,
                budget: opts.budget,
                tokenizer: opts.tokenizer,
                sections,
                left_out: Vec::new(),
                left_out_unlisted: 0,
                cover: Vec::new(),
                cover_held_over: false,
                turn: None,
            };
        }
    }
}

/// Drops lines ([`drop_one`]) until what they free, each its tokens and its line's end, covers
/// `over`, so that the text is counted again once, not once a line: a line's end counts a token
/// under `approx`, which its lines' counts leave out, and a context of a hundred lines had been
/// counted again after each of the lines dropped for them. A line is taken to free its count
/// and one token more, at least what it frees under either counter, so the drops stop early
/// rather than late (and the loop in [`fit`] counts again). False when nothing could be
/// dropped.
fn drop_enough(sections: &mut [Section], over: usize, left_out: &mut Vec<LeftOut>) -> bool {
    let mut freed = 0usize;
    let mut dropped = false;
    while freed < over {
        if !drop_one(sections, left_out) {
            break;
        }
        dropped = true;
        freed += left_out.last().map_or(0, |l| l.tokens + 1);
    }
    dropped
}

/// Cuts the moment's only line (the newest event, whole or cut to fit its room counted alone)
/// by `over` tokens more, where the rendered text counts more than its lines do (cl100k_base
/// counts a line's break with its words): dropped instead, it would leave the moment empty.
/// False when the moment has another number of lines, or the line cannot be cut shorter.
fn cut_shorter(sections: &mut [Section], over: usize, counter: &dyn TokenCounter) -> bool {
    let Some(moment) = sections.iter_mut().find(|s| s.name == "moment") else {
        return false;
    };
    let [line] = moment.lines.as_mut_slice() else {
        return false;
    };
    let start = line.text.strip_suffix('…').unwrap_or(&line.text);
    let room = line.tokens.saturating_sub(over.max(1));
    match cut_to_fit(start, room, counter) {
        Some(text) => {
            line.tokens = counter.count(&text);
            line.text = text;
            true
        }
        None => false,
    }
}

/// Drops one line (see [`fit`]); false when nothing but instructions is left.
fn drop_one(sections: &mut [Section], left_out: &mut Vec<LeftOut>) -> bool {
    let order = [
        "moment",
        "observations",
        "working",
        "snippets",
        "cover",
        "pinned",
    ];
    for name in order {
        let Some(s) = sections.iter_mut().find(|s| s.name == name) else {
            continue;
        };
        // The moment loses its earliest event in the log (its lines are the latest events,
        // shown by time: the first shown may be one that came late with an old time, and
        // dropping it left a hole in the run); the others their last line.
        let dropped = if name == "moment" {
            let seq_of = |l: &Line| {
                l.ids
                    .first()
                    .and_then(|id| id.strip_prefix("event:"))
                    .and_then(|n| n.parse::<u64>().ok())
            };
            (0..s.lines.len())
                .min_by_key(|i| seq_of(&s.lines[*i]))
                .map(|i| s.lines.remove(i))
        } else {
            s.lines.pop()
        };
        let Some(l) = dropped else {
            continue;
        };
        left_out.push(LeftOut {
            section: name.into(),
            ids: l.ids,
            tokens: l.tokens,
        });
        return true;
    }
    false
}

/// The context text and its stable prefix (through the boundary line).
fn render(sections: &[Section]) -> (String, String) {
    let mut prefix = String::new();
    let mut rest = String::new();
    for s in sections {
        let into = if matches!(s.name.as_str(), "instructions" | "pinned" | "cover") {
            &mut prefix
        } else {
            &mut rest
        };
        for l in &s.lines {
            into.push_str(&l.text);
            into.push('\n');
        }
    }
    prefix.push_str(BOUNDARY);
    prefix.push('\n');
    let text = format!("{prefix}{rest}");
    (text, prefix)
}

/// The idempotency key of the context saved as turn `turn`. A deleted event's key outlives it
/// (a retry must not bring it back), tombstone included, so it tells a deleted turn's number
/// after the event's payload is gone.
fn turn_key(turn: u64) -> String {
    format!("{}context:turn:{turn}", crate::store::STORE_KEY_PREFIX)
}

/// What a context was asked for, as its record keeps it beside what the context holds.
struct Made<'a> {
    mode: ContextMode,
    /// The question its snippets answered (none when blank).
    question: Option<&'a str>,
}

/// Writes the context as a `CONTEXT` event; returns its turn number: the one after the latest
/// saved context's, past any a deleted context had (a store saved before contexts had keys
/// can give a deleted one's number again).
fn save(
    store: &Store,
    context: &Context,
    made: Made<'_>,
    previous: Option<&Snapshot>,
) -> Result<u64> {
    let mut turn = previous.map_or(1, |p| p.turn + 1);
    while store.applied_key(&turn_key(turn))?.is_some() {
        turn += 1;
    }
    // In the order shown, first sighting first: what the agent read, as it read it.
    let mut seen = std::collections::HashSet::new();
    let ids: Vec<String> = context
        .sections
        .iter()
        .flat_map(|s| &s.lines)
        .flat_map(|l| &l.ids)
        .filter(|id| seen.insert(id.as_str()))
        .cloned()
        .collect();
    let mut facts: Vec<SavedFact> = Vec::new();
    for l in context.sections.iter().flat_map(|s| &s.lines) {
        if let (Some(f), Some(id)) = (&l.fact, l.ids.first()) {
            if !facts.iter().any(|s| &s.id == id) {
                facts.push(SavedFact {
                    id: id.clone(),
                    fact: f.clone(),
                });
            }
        }
    }
    let snapshot = Snapshot {
        turn,
        seq: 0,
        tokens: context.tokens,
        budget: context.budget,
        prefix_digest: context.prefix_digest.clone(),
        cover: context.cover.clone(),
        cover_held_over: context.cover_held_over,
        ids,
        facts,
        tokenizer: Some(context.tokenizer),
        mode: Some(made.mode),
        question: made.question.map(String::from),
    };
    let ts = store.latest_event_time()?.unwrap_or(0);
    let mut draft = EventDraft::new(ts, "loci", CONTEXT);
    draft.payload = serde_json::to_value(&snapshot)
        .and_then(serde_json::from_value::<Value>)
        .map_err(|e| Error::InvalidArgument {
            name: "context".into(),
            message: format!("cannot be saved: {e}"),
        })?;
    draft.salience = Some(0.0);
    draft.idempotency_key = Some(turn_key(turn));
    store.append_bookkeeping(draft)?;
    Ok(turn)
}

/// The saved contexts, oldest first.
pub fn snapshots(store: &Store) -> Result<Vec<Snapshot>> {
    let mut out: Vec<Snapshot> = store
        .events_with(Facet::Kind, CONTEXT, i64::MIN, i64::MAX)?
        .into_iter()
        .filter_map(snapshot_of)
        .collect();
    out.sort_by_key(|s| s.seq);
    Ok(out)
}

/// The context `ev` saved, or `None` when its record holds none this build reads.
fn snapshot_of(ev: crate::model::Event) -> Option<Snapshot> {
    let json = serde_json::to_value(&ev.payload).ok()?;
    let mut s: Snapshot = serde_json::from_value(json).ok()?;
    s.seq = ev.seq;
    Some(s)
}

/// The saved context read first from the newest: the one a saving build numbers its turn
/// after. Each save had read every saved context to find it, so a turn cost more with every
/// turn before it (0.8 s at the first, 1.0 s at the 400th, on a 272k-event store).
fn latest_snapshot(store: &Store) -> Result<Option<Snapshot>> {
    // A damaged entry of the index (past the log, naming another kind) is `Corrupt`.
    let mut latest = None;
    store.each_event_of_kind_newest_first(CONTEXT, &mut |ev| {
        latest = snapshot_of(ev);
        latest.is_none()
    })?;
    Ok(latest)
}

/// The saved context of turn `turn`, if there is one: the event its turn's key names (a
/// deleted one's key outlives it, and it is gone), else, for a store that saved contexts
/// before they had keys, the one of that turn among them all.
pub fn snapshot(store: &Store, turn: u64) -> Result<Option<Snapshot>> {
    if let Some(seq) = store.applied_key(&turn_key(turn))? {
        let saved = store.event(seq)?.filter(|ev| ev.kind == CONTEXT);
        return Ok(saved.and_then(snapshot_of).filter(|s| s.turn == turn));
    }
    Ok(snapshots(store)?.into_iter().find(|s| s.turn == turn))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_reads_back_from_its_name_and_no_other_spelling() {
        for mode in ContextMode::ALL {
            assert_eq!(mode.name().parse::<ContextMode>().unwrap(), mode);
        }
        for odd in ["Anchor", " all", "", "mainlines"] {
            let e = odd.parse::<ContextMode>().unwrap_err().to_string();
            assert!(
                e.contains("expected all, anchor or mainline"),
                "{odd:?}: {e}"
            );
        }
    }

    fn moment_line(seq: u64) -> Line {
        Line {
            text: format!("event {seq}"),
            ids: vec![format!("event:{seq}")],
            tokens: 2,
            fact: None,
        }
    }

    /// Found by the session 34 review: the moment is the latest events by log order, shown by
    /// time, and a trim dropped its first line shown, the earliest in time. An event that came
    /// late with an old time was kept, and the newest dropped first: a hole in the run of the
    /// latest events. The trim drops the earliest in the log.
    #[test]
    fn a_moment_trimmed_loses_its_earliest_event_in_the_log() {
        // Shown by time: event 9 came last with the oldest time.
        let mut sections = vec![Section {
            name: "moment".into(),
            lines: vec![moment_line(9), moment_line(5), moment_line(6)],
        }];
        let mut left_out = Vec::new();
        assert!(drop_one(&mut sections, &mut left_out));
        assert_eq!(left_out[0].ids, ["event:5"]);
        let kept: Vec<&str> = sections[0]
            .lines
            .iter()
            .map(|l| l.ids[0].as_str())
            .collect();
        assert_eq!(kept, ["event:9", "event:6"]);
    }

    /// helper-108 (session 48): a summary whose text could not be read was weighed as an
    /// empty line, and that cost was kept: every later turn of the builder chose its cover,
    /// and reported the line's tokens, by it. A failed read keeps nothing; the next one counts
    /// the line.
    #[test]
    fn a_cover_line_that_could_not_be_read_leaves_no_cost_behind() {
        let caches = Caches::default();
        let day = Placement {
            seq: 7,
            level: consolidate::Level::Day,
            start: 0,
            end: 99,
            children: Vec::new(),
        };
        let count = |text: &str| text.len();
        let failing = || {
            Err(Error::InvalidArgument {
                name: "read".into(),
                message: "the disk went away".into(),
            })
        };
        let weigh = |read: &dyn Fn() -> Result<Option<String>>| {
            caches.cover_cost(
                &day,
                Tokenizer::Approx,
                || caches.cover_line(&day, read).ok(),
                &count,
            )
        };
        assert_eq!(weigh(&failing), None);
        let read = || Ok(Some("a day by the sea".to_string()));
        let line = "[day 0..99] a day by the sea";
        assert_eq!(weigh(&read), Some(line.len()));
        // Kept once read: a later failing read is not made.
        assert_eq!(weigh(&failing), Some(line.len()));
        assert_eq!(&*caches.cover_line(&day, failing).unwrap(), line);
    }
}
