//! Planner queries: a small, strict, read-only Cypher/GQL-style language. Parser, planner and
//! executor are kept apart (`parser` → `plan` → `exec`), as are saved queries (`saved`).
//!
//! ```text
//! MATCH (b:Bot {key: $bot})-[h:HOME]->(p:Place)
//! WHERE h.valid_to IS NULL
//! RETURN p.name AS home, confidence(h) AS confidence, provenance(h) AS events
//! ```
//!
//! Extensions to openCypher, marked as such in the grammar: `SEARCH var FOR text [LIMIT n]`
//! binds `var` to full-text hits; `confidence(e)`, `provenance(e)` (supporting event sequence
//! numbers) and `path_cost(p, overlay)` (sum of an edge property, `darkness` = 15 - light, or
//! `hops`; null when no step carries the property, or `p` is not a path) are functions;
//! events are nodes with the virtual label `Event`.

pub mod exec;
pub mod parser;
pub mod plan;
pub mod saved;

use std::collections::HashMap;
use std::num::{IntErrorKind, ParseIntError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use exec::Val;
pub use parser::{parse, ParseError, Query, Span, MAX_DEPTH, MAX_QUERY_BYTES};
pub use plan::{plan, Op, Plan, PlanLimits};
pub use saved::{ParamSpec, ParamType, SavedQueries, SavedQuery};

use crate::store::Store;

/// What can go wrong with a query.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The text does not parse. `line` and `column` are 1-based.
    #[error("line {line}, column {column}: expected {expected}, found {found}")]
    Parse {
        line: usize,
        column: usize,
        span: Span,
        found: String,
        expected: String,
    },
    /// The query parses but cannot be planned (unknown variable or function, hop limit).
    #[error("{0}")]
    Plan(String),
    /// As [`QueryError::Plan`], because of a name at a place in the text (an unknown variable
    /// or function, an aggregate where none may be): `line` and `column` are 1-based ([`plan()`]
    /// alone, which has no text, leaves them 0; [`prepare`] gives them).
    #[error("line {line}, column {column}: {message}")]
    PlanAt {
        line: usize,
        column: usize,
        span: Span,
        message: String,
    },
    /// A parameter is missing or of the wrong type.
    #[error("parameter: {0}")]
    Param(String),
    /// The query would exceed a row, hop or time limit. A program sets them with [`Limits`]
    /// ([`prepare`]); the CLI and the server keep the defaults, so the message offers only
    /// a narrower pattern.
    #[error("limit exceeded: {0}")]
    LimitExceeded(String),
    #[error(transparent)]
    Store(#[from] crate::Error),
}

impl QueryError {
    fn from_parse(e: ParseError, text: &str) -> Self {
        let (line, column) = e.position(text);
        QueryError::Parse {
            line,
            column,
            span: e.span,
            found: e.found,
            expected: e.expected,
        }
    }

    /// The line of the text the error is at, where it has a place there.
    pub fn line(&self) -> Option<usize> {
        match self {
            QueryError::Parse { line, .. } | QueryError::PlanAt { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// The error with its line and column in `text`, where it has a place there.
    fn placed_in(self, text: &str) -> Self {
        match self {
            QueryError::PlanAt { span, message, .. } => {
                let (line, column) = span.position(text);
                QueryError::PlanAt {
                    line,
                    column,
                    span,
                    message,
                }
            }
            other => other,
        }
    }

    /// The error with the offending line of `text` and a caret under the span, for people.
    pub fn render(&self, text: &str) -> String {
        match self {
            // A query of blanks or comments has no line worth showing, and a caret under
            // nothing points at nothing.
            QueryError::Parse { found, .. } if found == parser::EMPTY_QUERY => self.to_string(),
            QueryError::Parse { span, .. } | QueryError::PlanAt { span, .. } => {
                // The line the span starts on, found from the span itself: counting lines by
                // `str::lines` dropped each "\r" of CRLF ends, and the caret drifted a column
                // right per earlier line.
                let mut at = span.start.min(text.len());
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let line_end = text[line_start..]
                    .find('\n')
                    .map_or(text.len(), |i| line_start + i);
                let src = &text[line_start..line_end];
                let src = src.strip_suffix('\r').unwrap_or(src);
                let start = span.start.saturating_sub(line_start);
                let end = span.end.saturating_sub(line_start);
                let (excerpt, carets) = excerpt_with_carets(src, start, end);
                format!("{self}\n  {excerpt}\n  {carets}")
            }
            other => other.to_string(),
        }
    }
}

/// Columns of an error's line shown each side of it: a 64 KiB one-line query must not be
/// echoed whole, and the excerpt should fit a terminal.
const EXCERPT_COLUMNS: usize = 60;

/// One grapheme of a line as a terminal draws it (a letter with its marks, an emoji with its
/// joiners and selectors): where it starts, what to show, and what to write under it so that
/// the next column lines up.
struct Cell<'a> {
    at: usize,
    shown: &'a str,
    pad: std::borrow::Cow<'static, str>,
    columns: usize,
}

/// Bytes of one grapheme shown as it is: a letter under ten thousand accents is one column
/// and 20 kB, and the excerpt is bounded by its columns.
const MAX_SHOWN_GRAPHEME_BYTES: usize = 64;

/// The cells of `src`. Widths are of whole graphemes (unicode-width reads a family of joined
/// people as one picture of two columns, where its parts add up to six); a tab stays a tab
/// under itself. Shown as U+FFFD instead: any other control character, line or paragraph
/// separator or bidirectional control (echoed, a carriage return sent the terminal back over
/// the excerpt, and a right-to-left override reversed it), a grapheme of no width (a window
/// is bounded by columns, and a hundred thousand zero-width spaces take none; shown, the
/// reader sees that something is there), and a grapheme over [`MAX_SHOWN_GRAPHEME_BYTES`].
fn cells(src: &str) -> Vec<Cell<'_>> {
    use unicode_segmentation::UnicodeSegmentation;
    use unicode_width::UnicodeWidthStr;
    src.grapheme_indices(true)
        .map(|(at, g)| {
            let columns = g.width();
            if g == "\t" {
                Cell {
                    at,
                    shown: g,
                    pad: "\t".into(),
                    columns: 1,
                }
            } else if columns == 0
                || g.len() > MAX_SHOWN_GRAPHEME_BYTES
                || g.chars().any(crate::text::breaks_a_line_or_its_order)
            {
                Cell {
                    at,
                    shown: "\u{fffd}",
                    pad: " ".into(),
                    columns: 1,
                }
            } else {
                Cell {
                    at,
                    shown: g,
                    pad: " ".repeat(columns).into(),
                    columns,
                }
            }
        })
        .collect()
}

/// Bytes of the line each side of an error's start that are cut into graphemes: enough for
/// [`EXCERPT_COLUMNS`] graphemes of [`MAX_SHOWN_GRAPHEME_BYTES`] each way and twice that after
/// (a grapheme longer than that is one column shown as U+FFFD, so a window of them shows
/// fewer columns, and is still marked as cut).
const EXCERPT_WINDOW_BYTES: usize = 2 * (EXCERPT_COLUMNS + 1) * MAX_SHOWN_GRAPHEME_BYTES;

/// The bytes of `src` an excerpt around `start` may show, on character boundaries: `start`
/// is clamped into the line.
fn excerpt_window(src: &str, start: usize) -> std::ops::Range<usize> {
    let start = start.min(src.len());
    let mut lo = start.saturating_sub(EXCERPT_WINDOW_BYTES);
    while !src.is_char_boundary(lo) {
        lo -= 1;
    }
    let mut hi = start
        .saturating_add(2 * EXCERPT_WINDOW_BYTES)
        .min(src.len());
    while !src.is_char_boundary(hi) {
        hi += 1;
    }
    lo..hi
}

/// The part of the line `src` around the bytes `start..end` (offsets into it, clamped), at most
/// [`EXCERPT_COLUMNS`] each side and marked "..." where cut, and the line of carets under
/// those bytes.
fn excerpt_with_carets(src: &str, start: usize, end: usize) -> (String, String) {
    // Only the bytes around the error are cut into graphemes: the whole line had been, one
    // cell each, and a 16 MB query took 2 GB and 5 s to be told it was over 64 KiB.
    let window = excerpt_window(src, start);
    let (cut_before, cut_after) = (window.start > 0, window.end < src.len());
    let (start, end) = (start - window.start, end.saturating_sub(window.start));
    let src = &src[window];
    let cells = cells(src);
    // The grapheme the error starts in (or the end of the line), and the first after it.
    let first = if start >= src.len() {
        cells.len()
    } else {
        cells.iter().rposition(|c| c.at <= start).unwrap_or(0)
    };
    let last = cells
        .iter()
        .position(|c| c.at >= end.max(start + 1))
        .unwrap_or(cells.len())
        .max(first + 1);
    let mut from = first;
    let mut used = 0;
    while from > 0 && used + cells[from - 1].columns <= EXCERPT_COLUMNS {
        from -= 1;
        used += cells[from].columns;
    }
    let mut to = first;
    while to < cells.len() && (to == first || used + cells[to].columns <= 2 * EXCERPT_COLUMNS) {
        used += cells[to].columns;
        to += 1;
    }
    let lead = if from > 0 || cut_before { "..." } else { "" };
    let tail = if to < cells.len() || cut_after {
        "..."
    } else {
        ""
    };
    let shown: String = cells[from..to].iter().map(|c| c.shown).collect();
    let pad: String = cells[from..first].iter().map(|c| c.pad.as_ref()).collect();
    let carets = cells[first.min(to)..last.min(to)]
        .iter()
        .map(|c| c.columns)
        .sum::<usize>()
        .max(1);
    (
        format!("{lead}{shown}{tail}"),
        format!("{}{pad}{}", " ".repeat(lead.len()), "^".repeat(carets)),
    )
}

/// Execution limits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Intermediate rows at most.
    pub max_rows: usize,
    /// Bytes of one operator's intermediate rows at most (each row holds a value for every
    /// variable of the query, so a pattern of many hops makes wide rows): `max_rows` rows of
    /// 97 values, a 48-hop pattern's, took 5.8 GB. Also the bound, over the whole query, of
    /// what is held beside the rows: ORDER BY's keys, the grouping keys and DISTINCT's.
    pub max_intermediate_bytes: usize,
    /// Wall-clock time at most.
    pub timeout: Duration,
    /// Hops of one quantified relation at most (also the bound of an open `*`).
    pub max_hops: u32,
    /// Bytes of result values (returned rows and `collect` lists, approximately) at most: rows
    /// are bounded by `max_rows`, but one row can hold a megabyte, and a million of them would
    /// exhaust memory long before the time limit.
    pub max_result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_rows: 1_000_000,
            max_intermediate_bytes: 128 << 20,
            timeout: Duration::from_secs(10),
            max_hops: 8,
            max_result_bytes: 256 << 20,
        }
    }
}

/// A query's answer: named columns and rows of JSON values (nodes as `{key, name, label}`,
/// edges as `{id, from, type, to, confidence}`, events as `{seq, ts, kind, place}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
    /// Rows and traversal steps the executor looked at.
    pub rows_examined: usize,
    /// Rows the scans and lookups that start each pattern produced: with LIMIT and no ORDER BY
    /// or aggregate, scans stop once the answer is complete, so this stays near the limit.
    pub rows_scanned: usize,
    pub elapsed_us: u64,
    /// The nodes, edges and events the rows return, as usage items (`dynamics::usage`); left
    /// out of the JSON form.
    #[serde(skip)]
    pub used: Vec<crate::dynamics::usage::Item>,
}

/// A parsed and planned query, ready to run many times with different parameters.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub text: String,
    pub query: Query,
    pub plan: Plan,
    limits: Limits,
}

/// Parses and plans `text`.
pub fn prepare(text: &str, limits: Limits) -> Result<Prepared, QueryError> {
    let query = parse(text).map_err(|e| QueryError::from_parse(e, text))?;
    let plan = plan::plan(&query, limits.into()).map_err(|e| e.placed_in(text))?;
    Ok(Prepared {
        text: text.to_string(),
        query,
        plan,
        limits,
    })
}

impl Prepared {
    /// Runs the query with parameters, and records what it returned as uses
    /// (`dynamics::usage`).
    pub fn run(
        &self,
        store: &Store,
        params: &HashMap<String, Val>,
    ) -> Result<QueryResult, QueryError> {
        let result = self.run_without_recording(store, params)?;
        store.record_use(result.used.iter().cloned());
        Ok(result)
    }

    /// Runs the query with parameters, recording nothing (benchmarks, dry runs).
    pub fn run_without_recording(
        &self,
        store: &Store,
        params: &HashMap<String, Val>,
    ) -> Result<QueryResult, QueryError> {
        let plan = self.plan_with(params)?;
        exec::execute(store, &plan, params, self.limits).map_err(|e| e.placed_in(&self.text))
    }

    /// The plan the query runs with `params` (`loci run --explain`): planned again where
    /// they decide part of the filter, so that it says which index or walk the run takes.
    pub fn plan_with(
        &self,
        params: &HashMap<String, Val>,
    ) -> Result<std::borrow::Cow<'_, Plan>, QueryError> {
        // A parameter given no value is named where the query first uses it.
        if let Some(p) = self.plan.missing_param(params) {
            if let Some(span) = self.query.places.of_param(p) {
                return Err(plan::plan_err_at(Some(span), no_value(p)).placed_in(&self.text));
            }
        }
        // Planned again with what the parameters decide of the filter (`$kind = ''`), when
        // they decide something: an index may then be read for what is left of it.
        let decided =
            match (self.query.filter.as_ref()).and_then(|f| plan::decide_params(f, params)) {
                Some(filter) => {
                    let query = Query {
                        filter: Some(filter),
                        ..self.query.clone()
                    };
                    let planned = plan::plan(&query, self.limits.into());
                    Some(planned.map_err(|e| e.placed_in(&self.text))?)
                }
                None => None,
            };
        let plan = match decided {
            Some(plan) => std::borrow::Cow::Owned(plan),
            None => std::borrow::Cow::Borrowed(&self.plan),
        };
        exec::check_known_limit(&plan, params).map_err(|e| e.placed_in(&self.text))?;
        Ok(plan)
    }
}

/// Parses, plans and runs `text` once; a parameter the text does not use is refused.
pub fn run(
    store: &Store,
    text: &str,
    params: &HashMap<String, Val>,
) -> Result<QueryResult, QueryError> {
    prepared_for(text, params)?.run(store, params)
}

/// The plan [`run`] would run `text` with, given `params`, the query not run.
pub fn explain(text: &str, params: &HashMap<String, Val>) -> Result<Plan, QueryError> {
    let prepared = prepared_for(text, params)?;
    let plan = prepared.plan_with(params)?;
    Ok(plan.into_owned())
}

/// A query as a caller asks it: a saved one with its arguments as strings, or text with its
/// parameters. The CLI, the server (HTTP and MCP) and Python each read theirs into this and
/// answer through [`Asked::answer`], so that running and explaining are decided in one place.
#[derive(Clone, Debug)]
pub enum Asked<'a> {
    Saved(&'a SavedQuery, Vec<(String, String)>),
    Text(&'a str, HashMap<String, Val>),
}

/// What [`Asked::answer`] gives: the rows, or the plan the query would run with.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Rows(QueryResult),
    Plan(Plan),
}

impl Asked<'_> {
    /// The query's text, against which an error's span is shown.
    pub fn text(&self) -> &str {
        match self {
            Asked::Saved(q, _) => &q.prepared.text,
            Asked::Text(text, _) => text,
        }
    }

    /// Runs the query on `store`, or without one explains it: gives the plan, reading no store.
    pub fn answer(&self, store: Option<&Store>) -> Result<Answer, QueryError> {
        match (self, store) {
            (Asked::Saved(q, args), Some(s)) => q.run(s, args).map(Answer::Rows),
            (Asked::Saved(q, args), None) => q.explain(args).map(Answer::Plan),
            (Asked::Text(text, params), Some(s)) => run(s, text, params).map(Answer::Rows),
            (Asked::Text(text, params), None) => explain(text, params).map(Answer::Plan),
        }
    }
}

/// `text` prepared, a parameter it does not use refused.
fn prepared_for(text: &str, params: &HashMap<String, Val>) -> Result<Prepared, QueryError> {
    let prepared = prepare(text, Limits::default())?;
    // A saved query refuses a parameter it does not declare; text has no header, and what it
    // uses is what it declares. One it does not use was a typo in the text (`$wnat`) or a
    // value meant for another query, answered as if it had been read.
    if let Some(p) = prepared.plan.unused_param(params) {
        let uses: Vec<String> = prepared
            .plan
            .params
            .iter()
            .map(|p| format!("${p}"))
            .collect();
        let uses = if uses.is_empty() {
            "no parameters".to_string()
        } else {
            uses.join(", ")
        };
        return Err(QueryError::Param(format!(
            "${p} is given, but the query does not use it; it uses {uses}"
        )));
    }
    Ok(prepared)
}

/// How a caller gives parameter `name` a value, in each interface (the message of a query
/// whose parameter has none is read in all of them).
pub(crate) fn how_to_give(name: &str) -> String {
    format!("`--param {name}=...` on the command line, `params` in Python, over HTTP and MCP")
}

/// The error of a query parameter `$name` that has no value.
pub(crate) fn no_value(name: &str) -> String {
    format!("${name} has no value: give it ({})", how_to_give(name))
}

/// The refusal of `raw` as a value of `ty` (`what` it is not), naming the value meant when it
/// is one in double quotes: quotes make an untyped parameter a string (`"007"`), so a user
/// may well quote a typed one, which takes its value bare.
fn not_a(raw: &str, ty: ParamType, what: &str) -> String {
    let refused = format!("{} is not {what}", crate::error::quoted_excerpt(raw));
    let inside = (raw.len() >= 2)
        .then(|| raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
        .flatten();
    // Read without `parse_param`, whose refusal comes here: `""""…"` would recurse once
    // for each pair of quotes.
    let reads_as_ty = |meant: &str| match ty {
        ParamType::Int => meant.parse::<i64>().is_ok(),
        ParamType::Float => meant.parse::<f64>().is_ok_and(f64::is_finite),
        ParamType::Bool => meant == "true" || meant == "false",
        ParamType::String => true,
    };
    match inside {
        Some(meant) if reads_as_ty(meant) => {
            let meant = crate::error::excerpt(meant);
            format!("{refused}: it is in quotes: give it bare, {meant}")
        }
        _ => refused,
    }
}

/// Reads a command-line parameter value by type; `None` guesses (integer, number, true/false,
/// null, else string: `"null"` in quotes is the string).
pub fn parse_param(raw: &str, ty: Option<ParamType>) -> Result<Val, String> {
    match ty {
        Some(ParamType::String) => Ok(Val::Str(raw.to_string())),
        Some(ParamType::Int) => raw.parse().map(Val::Int).map_err(|e| {
            past_64_bits(raw, &e).unwrap_or_else(|| not_a(raw, ParamType::Int, "an integer"))
        }),
        Some(ParamType::Float) => match raw.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Val::Float(f)),
            // "inf" and "NaN" parse, and are no number a query compares.
            Ok(_) if raw.chars().any(|c| c.is_ascii_digit()) => Err(format!(
                "{} is out of range: a number is at most about 1.8e308",
                crate::error::quoted_excerpt(raw)
            )),
            _ => Err(not_a(raw, ParamType::Float, "a number")),
        },
        Some(ParamType::Bool) => match raw {
            "true" => Ok(Val::Bool(true)),
            "false" => Ok(Val::Bool(false)),
            _ => Err(not_a(raw, ParamType::Bool, "true or false")),
        },
        // A value in double quotes is a string whatever it looks like (`"007"`, `"true"`);
        // so is a number written with a leading zero or a plus sign, which no one writes for
        // a number but keys and codes often have.
        None if raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') => {
            Ok(Val::Str(raw[1..raw.len() - 1].to_string()))
        }
        // `--param want=$W` with W unset: searching for "" would match nothing, silently.
        None if raw.is_empty() => {
            Err(r#"no value: give one, or "" (in quotes) for an empty string"#.to_string())
        }
        None if looks_like_a_code(raw) => Ok(Val::Str(raw.to_string())),
        None => Ok(match raw.parse::<i64>() {
            Ok(i) => Val::Int(i),
            // An integer past 64 bits would parse as a float of another value.
            Err(e) => {
                if let Some(said) = past_64_bits(raw, &e) {
                    let raw = crate::error::excerpt(raw);
                    return Err(format!("{said} (quote it, \"{raw}\", for a string)"));
                }
                untyped_non_integer(raw)
            }
        }),
    }
}

/// What an integer too large for 64 bits is told, if `e` says `raw` is one.
fn past_64_bits(raw: &str, e: &ParseIntError) -> Option<String> {
    matches!(
        e.kind(),
        IntErrorKind::PosOverflow | IntErrorKind::NegOverflow
    )
    .then(|| {
        let raw = crate::error::quoted_excerpt(raw);
        format!("{raw} is out of range: an integer is 64 bits")
    })
}

/// An untyped parameter that is no integer: a float, a boolean, or else a string.
fn untyped_non_integer(raw: &str) -> Val {
    if let Some(f) = raw.parse::<f64>().ok().filter(|f| f.is_finite()) {
        Val::Float(f)
    } else if raw == "true" || raw == "false" {
        Val::Bool(raw == "true")
    } else if raw == "null" {
        Val::Null
    } else {
        Val::Str(raw.to_string())
    }
}

/// `007`, `+5`, `00.5`: digits that a person would not write for a number.
fn looks_like_a_code(raw: &str) -> bool {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    raw.starts_with('+')
        || (digits.len() > 1
            && digits.starts_with('0')
            && !digits.starts_with("0.")
            && digits.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Parameters given as JSON by name (a server's request, a Python caller's dict), for query
/// text that declares no types: each value as the planner value it is (`"42"` stays a string).
pub fn params_from_json<'a>(
    params: impl IntoIterator<Item = (&'a String, &'a serde_json::Value)>,
) -> Result<HashMap<String, Val>, QueryError> {
    fn val(v: &serde_json::Value) -> Result<Val, QueryError> {
        use serde_json::Value as J;
        Ok(match v {
            J::Null => Val::Null,
            J::Bool(b) => Val::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Val::Int(i),
                // Read as a float, 18446744073709551615 was said back as 18446744073709552000.
                None if n.is_u64() => {
                    return Err(QueryError::Param(format!(
                        "{n} is out of range: an integer is 64 bits"
                    )))
                }
                None => Val::Float(
                    n.as_f64()
                        .ok_or_else(|| QueryError::Param(format!("{n}: out of range")))?,
                ),
            },
            J::String(s) => Val::Str(s.clone()),
            J::Array(items) => Val::List(items.iter().map(val).collect::<Result<_, _>>()?),
            J::Object(m) => Val::Map(
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), val(v)?)))
                    .collect::<Result<_, QueryError>>()?,
            ),
        })
    }
    params
        .into_iter()
        .map(|(k, v)| match val(v) {
            Ok(v) => Ok((k.clone(), v)),
            Err(QueryError::Param(m)) => Err(QueryError::Param(format!("{k}: {m}"))),
            Err(e) => Err(e),
        })
        .collect()
}

/// Values of `NAME=VALUE` pairs given on a command line for a saved query's declared
/// parameters ([`saved::SavedQuery::run`]): an empty value is refused, as [`parse_param`]
/// refuses it for an untyped one (`--param want=$W` with W unset), and `""` is the empty
/// string. Over JSON a string is given in quotes, and an empty one is meant.
pub fn command_line_values(
    pairs: &[(String, String)],
) -> Result<Vec<(String, String)>, QueryError> {
    pairs
        .iter()
        .map(|(k, v)| match v.as_str() {
            "" => Err(QueryError::Param(format!(
                r#"{k}: no value: give one, or "" (in quotes) for an empty string"#
            ))),
            r#""""# => Ok((k.clone(), String::new())),
            _ => Ok((k.clone(), v.clone())),
        })
        .collect()
}

/// Parameters from `NAME=VALUE` strings.
pub fn params_from_pairs(pairs: &[(String, String)]) -> Result<HashMap<String, Val>, QueryError> {
    pairs
        .iter()
        .map(|(k, v)| {
            parse_param(v, None)
                .map(|v| (k.clone(), v))
                .map_err(|m| QueryError::Param(format!("{k}: {m}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// helper-128 (session 56): `--param depth='"4"'` was refused as `"\"4\"" is not an
    /// integer`, which read as escaped twice and said nothing of the quotes: a typed
    /// parameter takes its value bare, and the refusal says so.
    #[test]
    fn a_typed_value_given_in_quotes_is_refused_with_the_value_meant() {
        for (raw, ty, said) in [
            (r#""4""#, ParamType::Int, "it is in quotes: give it bare, 4"),
            (
                r#""0.5""#,
                ParamType::Float,
                "it is in quotes: give it bare, 0.5",
            ),
            (
                r#""true""#,
                ParamType::Bool,
                "it is in quotes: give it bare, true",
            ),
        ] {
            let e = parse_param(raw, Some(ty)).unwrap_err();
            assert!(e.ends_with(said), "{raw}: {e}");
        }
        // Quotes around what is no value of the type are not blamed.
        let e = parse_param(r#""four""#, Some(ParamType::Int)).unwrap_err();
        assert_eq!(e, r#""\"four\"" is not an integer"#);
        // A long value is quoted by its start, as every refusal quotes one.
        let long = "x".repeat(100_000);
        let e = parse_param(&long, Some(ParamType::Int)).unwrap_err();
        assert!(e.len() < 400, "{} bytes", e.len());
        // Nor a long number, in quotes or past 64 bits, typed or not (helper-130).
        let digits = format!("4{}", "0".repeat(100_000));
        for (raw, ty) in [
            (
                format!("\"{}\"", "0".repeat(100_000) + "4"),
                Some(ParamType::Int),
            ),
            (
                format!("\"0.{}1\"", "0".repeat(100_000)),
                Some(ParamType::Float),
            ),
            (digits.clone(), Some(ParamType::Int)),
            (digits, None),
        ] {
            let e = parse_param(&raw, ty).unwrap_err();
            assert!(e.len() < 600, "{} bytes: {}", e.len(), &e[..600]);
        }
        // Quotes within quotes are looked in once, not once a pair.
        let quotes = "\"".repeat(1_000_000);
        assert!(parse_param(&quotes, Some(ParamType::Int)).is_err());
    }

    /// helper-104 (session 47): every grapheme of an error's line was made a cell before the
    /// 60 columns each side were chosen, so a 16 MB one-line query took 2 GB and 5 s to be
    /// told it was over 64 KiB (and a server as much per request). Only a window of bytes
    /// around the error is cut into graphemes, and the excerpt is the one it was.
    #[test]
    fn an_error_in_a_long_line_is_shown_from_a_window_of_it() {
        let at = 8 << 20;
        let line = format!("{}@{}", "a".repeat(at), "b".repeat(at));
        assert!(excerpt_window(&line, at).len() <= 3 * EXCERPT_WINDOW_BYTES);
        let (excerpt, carets) = excerpt_with_carets(&line, at, at + 1);
        assert_eq!(
            excerpt,
            format!("...{}@{}...", "a".repeat(60), "b".repeat(59))
        );
        assert_eq!(carets, format!("{}^", " ".repeat(63)));
        // Windows end on character boundaries, whatever byte the error starts at.
        let wide = "é".repeat(at / 2);
        for start in [0, 1, 2, 4097, at - 1, at, at + 5] {
            let w = excerpt_window(&wide, start);
            assert!(wide.is_char_boundary(w.start) && wide.is_char_boundary(w.end));
            let (excerpt, _) = excerpt_with_carets(&wide, start, start + 1);
            assert!(excerpt.chars().count() <= 2 * 60 + 6, "{start}: {excerpt}");
        }
        // A short line is shown whole, uncut.
        let (excerpt, carets) = excerpt_with_carets("RETURN 1 +", 10, 11);
        assert_eq!(
            (excerpt.as_str(), carets.as_str()),
            ("RETURN 1 +", "          ^")
        );
    }
}
