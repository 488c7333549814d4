//! Journals: notes that agents keep about their own work (decisions, lessons, preferences,
//! progress), in one harness-agnostic entry format, so that several agents can feed one memory.
//!
//! An entry (`--format journal`, one per line) is
//! `{"v": 1, "time": "2026-11-23T21:43:09Z" | 29391, "harness": "claude-code", "session": "s1",
//! "cwd"?: "/repo", "kind": "decision", "text": "...", "tags"?: ["build"]}`. `time` is either
//! the store's world time (an integer) or RFC 3339 text, read as minutes since 1970 (the unit
//! conversations use). Unknown fields and other format versions are refused with the line and
//! field, so a harness writing a newer format learns it at once instead of losing data.
//!
//! Each entry becomes a `JOURNAL` event by `harness:{harness}` asserting a `Journal` node keyed
//! `journal:{fnv1a of the normalised text}`: the same note written twice, by one agent or by
//! two, is one node with two supporting events. The node is linked to its session
//! (`IN_SESSION`, a `Session` node `session:{harness}/{session}`) and its tags (`TAGGED`, a
//! `Tag` node `tag:{tag}`), so retrieval reaches notes through what they share. Re-reading the
//! same file applies nothing twice (each entry carries an idempotency key).
//!
//! An entry moves through three states, all derived from the log (so replay gives them back):
//! - **captured**: written, not yet covered by a summary;
//! - **consolidated**: a live summary (`dynamics::consolidate`) covers one of its events;
//! - **promoted**: pinned by a `PROMOTE` event, which also makes it hot (`dynamics::usage`) and
//!   keeps it in every context's pinned section. [`promote`] promotes named entries;
//!   [`recurring`] names the consolidated entries written in at least N sessions.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::dynamics::consolidate::each_live_summary_over;
use crate::error::Result;
use crate::model::{Assertion, EdgeUpsert, EventDraft, NodeUpsert, Props, Value};
use crate::store::{Commit, Store};

/// Kind of a journal entry's event.
pub const JOURNAL: &str = "JOURNAL";
/// Kind of the event that promotes entries.
pub const PROMOTE: &str = "PROMOTE";
/// The payload flag of an entry whose time was given as text, read as minutes since 1970.
pub const MINUTES: &str = "minutes";
/// Label of a journal entry's node.
pub const LABEL: &str = "Journal";
/// The entry format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// Longest entry text kept; a longer one is refused (a journal note, not a document).
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// Most tags an entry may carry (each is a node and an edge).
pub const MAX_TAGS: usize = 256;
/// Longest working directory an entry may name (Linux's `PATH_MAX`).
pub const MAX_CWD_BYTES: usize = 4096;

/// One journal entry, as a harness writes it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub v: u32,
    pub time: Time,
    pub harness: String,
    pub session: String,
    #[serde(default)]
    pub cwd: Option<String>,
    pub kind: String,
    pub text: String,
    #[serde(default)]
    pub tags: Vec<String>,
}

/// An entry's time: world time, or RFC 3339 text.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Time {
    World(i64),
    Text(String),
}

/// What a time is, for a value that is not one.
const TIME_EXPECTED: &str = "RFC 3339 (2026-11-23T21:43:09Z), a date or an integer";

impl<'de> Deserialize<'de> for Time {
    /// Read by hand, where an untagged enum told a `1e3` or a `null` only that the "data did
    /// not match any variant of untagged enum Time".
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct TimeVisitor;
        impl serde::de::Visitor<'_> for TimeVisitor {
            type Value = Time;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(TIME_EXPECTED)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Time, E> {
                Ok(Time::World(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Time, E> {
                i64::try_from(v)
                    .map(Time::World)
                    .map_err(|_| E::custom(format!("{v}: expected {TIME_EXPECTED} of 64 bits")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Time, E> {
                Ok(Time::Text(v.to_string()))
            }
        }
        d.deserialize_any(TimeVisitor)
    }
}

/// Why an entry was refused: the field and what was expected.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryError {
    pub field: &'static str,
    pub message: String,
}

fn refuse(field: &'static str, message: impl Into<String>) -> EntryError {
    EntryError {
        field,
        message: message.into(),
    }
}

/// Minutes since 1970 of RFC 3339 text ("2026-11-23T21:43:09Z", "...+01:00"), or a date
/// ("2026-11-23", midnight UTC).
pub fn parse_time(text: &str) -> Option<i64> {
    let t = text.trim();
    if let Ok(dt) = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339) {
        return Some(dt.unix_timestamp().div_euclid(60));
    }
    let date = time::Date::parse(t, time::macros::format_description!("[year]-[month]-[day]"));
    date.ok().map(|d| {
        crate::conversation::days_from_civil(d.year() as i64, d.month() as i64, d.day() as i64)
            * 1440
    })
}

/// Why a time of a form [`parse_time`] reads names no instant (February 30th, hour 25), if that
/// is why it was refused: the form is right, and the message should not say it is not.
fn impossible_time(text: &str) -> Option<String> {
    use time::error::Parse;
    let t = text.trim();
    let rfc = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339);
    let date = time::Date::parse(t, time::macros::format_description!("[year]-[month]-[day]"));
    match (rfc, date) {
        (Err(Parse::TryFromParsed(e)), _) | (_, Err(Parse::TryFromParsed(e))) => {
            Some(e.to_string())
        }
        _ => None,
    }
}

/// The text an entry is known by: composed (NFC: "Cafe" and a combining accent, as macOS
/// writes it, is "Café"), lower case, whitespace runs as one space.
fn normalised(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let composed: String = text.nfc().collect();
    composed
        .split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The key of the node an entry with this text asserts.
pub fn entry_key(text: &str) -> String {
    format!(
        "journal:{:016x}",
        crate::codec::fnv1a(normalised(text).as_bytes())
    )
}

fn name_field(field: &'static str, value: &str) -> std::result::Result<String, EntryError> {
    let v = crate::text::trim_invisible(value);
    if v.is_empty() {
        return Err(refuse(field, "must not be empty"));
    }
    // A name is part of a node key and shown on one line of a list.
    if v.chars().any(crate::text::breaks_a_line_or_its_order) {
        return Err(refuse(
            field,
            "must not hold a control character (a NUL, a line break, a tab), a line \
             separator or a bidirectional override",
        ));
    }
    if v.len() > 256 || v.contains('/') && field == "harness" {
        return Err(refuse(
            field,
            "at most 256 bytes (and a harness name without '/')",
        ));
    }
    Ok(v.to_string())
}

/// The first 160 characters of a text, whitespace runs as one space.
fn gist(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(160) {
        Some((cut, _)) => format!("{}...", &one_line[..cut]),
        None => one_line,
    }
}

/// The event an entry makes (see the module documentation), or why it is refused.
pub fn entry_event(e: &Entry) -> std::result::Result<EventDraft, EntryError> {
    if e.v != FORMAT_VERSION {
        return Err(refuse(
            "v",
            format!(
                "journal format {} is not read by this build (expected {FORMAT_VERSION})",
                e.v
            ),
        ));
    }
    let ts = match &e.time {
        Time::World(t) => *t,
        Time::Text(s) => parse_time(s).ok_or_else(|| match impossible_time(s) {
            Some(why) => refuse("time", format!("{s:?}: no such date or time ({why})")),
            None => refuse("time", format!("{s:?}: expected {TIME_EXPECTED}")),
        })?,
    };
    // Named here as the entry's field: the store would refuse it as its event's `ts`.
    if let Some(message) = crate::store::time_out_of_range(ts) {
        return Err(refuse("time", message));
    }
    let harness = name_field("harness", &e.harness)?;
    let session = name_field("session", &e.session)?;
    let kind = name_field("kind", &e.kind)?;
    let text = e.text.trim();
    if crate::text::is_blank(text) {
        return Err(refuse("text", "must not be empty"));
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(refuse(
            "text",
            format!("{} bytes: at most {MAX_TEXT_BYTES}", text.len()),
        ));
    }
    if e.tags.len() > MAX_TAGS {
        return Err(refuse(
            "tags",
            format!("{} tags: at most {MAX_TAGS}", e.tags.len()),
        ));
    }
    if let Some(cwd) = &e.cwd {
        if cwd.len() > MAX_CWD_BYTES {
            return Err(refuse(
                "cwd",
                format!("{} bytes: at most {MAX_CWD_BYTES}", cwd.len()),
            ));
        }
    }
    // Lower-cased, each once, in the order given.
    let mut tags: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for t in &e.tags {
        let t = name_field("tags", t)?.to_lowercase();
        if seen.insert(t.clone()) {
            tags.push(t);
        }
    }
    let key = entry_key(text);
    let session_key = format!("session:{harness}/{session}");
    let session_name = format!("{harness}/{session}");
    let mut payload = Props::from([
        ("harness".to_string(), Value::from(harness.as_str())),
        ("session".to_string(), Value::from(session.as_str())),
        ("kind".to_string(), Value::from(kind.as_str())),
        ("v".to_string(), Value::Int(FORMAT_VERSION as i64)),
    ]);
    if let Some(cwd) = &e.cwd {
        payload.insert("cwd".to_string(), Value::from(cwd.as_str()));
    }
    // A time given as text was read as minutes since 1970: a store of such entries keeps
    // days of minutes (`ConsolidationPolicy::for_store`), where one given as an integer is in
    // the store's own unit. (A flag, not text: an event's text values are indexed.)
    if matches!(e.time, Time::Text(_)) {
        payload.insert(MINUTES.to_string(), Value::Bool(true));
    }
    // The gist travels with the event, so that summaries and the context's latest events say
    // what was noted (the whole text is the node's).
    payload.insert("gist".to_string(), Value::from(gist(text).as_str()));
    let mut d = EventDraft::new(ts, format!("harness:{harness}"), JOURNAL);
    d.payload = Value::Map(payload);
    d.evidence = vec![key.clone()];
    d.idempotency_key = Some(format!(
        "journal:{harness}/{session}:{ts}:{:016x}",
        crate::codec::fnv1a(text.as_bytes())
    ));
    let node = |key: &str, label: &str, name: &str, props: Props| {
        Assertion::UpsertNode(NodeUpsert {
            key: key.to_string(),
            label: Some(label.to_string()),
            name: Some(name.to_string()),
            props,
            ..Default::default()
        })
    };
    let edge = |from: &str, relation: &str, to: &str| {
        Assertion::UpsertEdge(EdgeUpsert {
            from: from.to_string(),
            relation: relation.to_string(),
            to: to.to_string(),
            confidence: Some(1.0),
            ..Default::default()
        })
    };
    let title = gist(text);
    d.assertions = vec![
        node(
            &key,
            LABEL,
            &title,
            Props::from([
                ("text".to_string(), Value::from(text)),
                ("kind".to_string(), Value::from(kind.as_str())),
            ]),
        ),
        node(&session_key, "Session", &session_name, Props::new()),
        edge(&key, IN_SESSION, &session_key),
    ];
    for t in &tags {
        let tag_key = format!("tag:{t}");
        d.assertions.push(node(&tag_key, "Tag", t, Props::new()));
        d.assertions.push(edge(&key, TAGGED, &tag_key));
    }
    Ok(d)
}

/// Where an entry is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Captured,
    Consolidated,
    Promoted,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Captured => "captured",
            Status::Consolidated => "consolidated",
            Status::Promoted => "promoted",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "captured" => Some(Status::Captured),
            "consolidated" => Some(Status::Consolidated),
            "promoted" => Some(Status::Promoted),
            _ => None,
        }
    }
}

/// A journal entry as the store holds it: every event that wrote it, folded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub key: String,
    pub kind: String,
    pub text: String,
    pub status: Status,
    /// Harnesses and sessions that wrote it (`harness/session`), sorted.
    pub sessions: Vec<String>,
    pub tags: Vec<String>,
    /// World times of its first and latest writing, from its live events. Once forgetting
    /// took them all, `first` is its node's first assertion (the start of the day whose
    /// summary restates it) and `last` when its edges to its sessions were last seen.
    pub first: i64,
    pub last: i64,
    /// The events that wrote it, ascending.
    pub events: Vec<u64>,
}

/// Every live journal entry, by key: each `Journal` node, with the live events that wrote it.
///
/// The node, not its events, makes the entry: forgetting evicts the events of summarised days,
/// and the node stays, resting on the day's summary. Its sessions and tags are read from its
/// edges as well as from its events for the same reason.
pub fn entries(store: &Store) -> Result<Vec<JournalEntry>> {
    let journal = store.events_of_kind(JOURNAL)?;
    let covered = covered_by_summaries(store, journal.iter().map(|ev| (ev.seq, ev.ts)))?;
    let mut by_key: BTreeMap<String, JournalEntry> = BTreeMap::new();
    for ev in journal {
        let Some(key) = ev.evidence.first() else {
            continue;
        };
        let Some(node) = store.node_by_key(key) else {
            continue; // deleted or retracted since
        };
        let e = by_key
            .entry(key.clone())
            .or_insert_with(|| entry_of_node(&node));
        if e.events.is_empty() {
            (e.first, e.last) = (ev.ts, ev.ts);
        }
        e.first = e.first.min(ev.ts);
        e.last = e.last.max(ev.ts);
        e.events.push(ev.seq);
        if e.status == Status::Captured && covered.contains(&ev.seq) {
            e.status = Status::Consolidated;
        }
    }
    add_forgotten_entries(store, &mut by_key);
    read_edges(store, &mut by_key);
    Ok(by_key.into_values().collect())
}

/// Of the events `seqs` (with their world times), those a live summary holds as its children.
/// Only the summaries over their times are read, one at a time, without their digests (held
/// whole, every summary of 415k events consolidated was 5.2 GB; read one at a time, all 566k
/// of them took 14.6 s to place four entries).
fn covered_by_summaries(
    store: &Store,
    events: impl Iterator<Item = (u64, i64)>,
) -> Result<BTreeSet<u64>> {
    let mut covered = BTreeSet::new();
    let (mut seqs, mut times) = (BTreeSet::new(), Vec::new());
    for (seq, ts) in events {
        seqs.insert(seq);
        times.push(ts);
    }
    if seqs.is_empty() {
        return Ok(covered);
    }
    times.sort_unstable();
    each_live_summary_over(store, &times, &mut |s| {
        for child in &s.children {
            if let Some(seq) = seqs.take(child) {
                covered.insert(seq);
            }
        }
        Ok(!seqs.is_empty())
    })?;
    Ok(covered)
}

/// Relation from an entry's node to each of its tags.
const TAGGED: &str = "TAGGED";
/// Relation from an entry's node to each session that wrote it.
const IN_SESSION: &str = "IN_SESSION";

fn push_new(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// A tag's name from its node's key (`tag:{tag}`).
fn tag_name(key: &str) -> String {
    key.strip_prefix("tag:").unwrap_or(key).to_string()
}

/// An entry as its node alone gives it: no events yet, captured unless pinned, written when
/// the node was first and last asserted.
fn entry_of_node(node: &crate::model::Node) -> JournalEntry {
    let prop = |name: &str| {
        node.props
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    JournalEntry {
        key: node.key.clone(),
        kind: prop("kind"),
        text: prop("text"),
        status: if node.pinned {
            Status::Promoted
        } else {
            Status::Captured
        },
        sessions: Vec::new(),
        tags: Vec::new(),
        first: node.created,
        last: node.updated,
        events: Vec::new(),
    }
}

/// Adds the `Journal` nodes none of whose events is live (forgetting evicted them, after a
/// summary took their gist: so they are consolidated, or promoted).
fn add_forgotten_entries(store: &Store, by_key: &mut BTreeMap<String, JournalEntry>) {
    let g = store.graph();
    for id in g.node_ids().filter(|id| g.node_label(*id) == Some(LABEL)) {
        if g.node_key(id).is_some_and(|k| by_key.contains_key(k)) {
            continue;
        }
        let Some(node) = g.node(id) else {
            continue;
        };
        let mut e = entry_of_node(&node);
        if e.status == Status::Captured {
            e.status = Status::Consolidated;
        }
        by_key.insert(node.key, e);
    }
}

/// Each entry's sessions and tags, sorted, from its node's edges, which its events asserted
/// and its summaries restate; and, for an entry none of whose events is live, its last
/// writing: a summary restates the edge to each session as last seen when the entry was last
/// written there (the exact time, where the node's own is its day's start).
fn read_edges(store: &Store, by_key: &mut BTreeMap<String, JournalEntry>) {
    let g = store.graph();
    for e in by_key.values_mut() {
        let Some(id) = g.node_id(&e.key) else {
            continue;
        };
        let mut last_written = None;
        for edge in g.edges_of(id) {
            let Some(core) = g.edge_core(edge).filter(|c| c.from == id) else {
                continue;
            };
            let (Some(to_key), Some(to_name)) = (g.node_key(core.to), g.node_name(core.to)) else {
                continue;
            };
            match g.relation_name_checked(core.relation) {
                Some(IN_SESSION) => {
                    push_new(&mut e.sessions, to_name.to_string());
                    last_written = last_written.max(Some(core.last_seen));
                }
                Some(TAGGED) => push_new(&mut e.tags, tag_name(to_key)),
                _ => {}
            }
        }
        if let Some(last) = last_written.filter(|_| e.events.is_empty()) {
            e.last = last.max(e.first);
        }
        e.sessions.sort();
        e.tags.sort();
    }
}

/// The consolidated (not yet promoted) entries written in at least `min_sessions` distinct
/// sessions: notes that kept coming back, the ones worth keeping in every prompt.
pub fn recurring(store: &Store, min_sessions: usize) -> Result<Vec<String>> {
    Ok(entries(store)?
        .into_iter()
        .filter(|e| e.status == Status::Consolidated && e.sessions.len() >= min_sessions.max(1))
        .map(|e| e.key)
        .collect())
}

/// What [`promote`] did: the entries it promoted, in the order given, and those it left
/// out because they were already promoted (pinned).
#[derive(Debug, Default)]
pub struct Promotion {
    /// The `PROMOTE` event's commit; empty when nothing was left to promote.
    pub commit: Commit,
    pub promoted: Vec<String>,
    pub already_promoted: Vec<String>,
}

/// Promotes entries: one `PROMOTE` event pinning their nodes. A key that is not a live journal
/// entry is [`crate::Error::NotFound`] and nothing is written. A key given twice is one entry;
/// an entry already promoted is left out, and if none is left nothing is written (each such run
/// had logged another event and said it promoted the entry).
pub fn promote(store: &Store, keys: &[String]) -> Result<Promotion> {
    let of = crate::store::PinOf {
        kind: PROMOTE,
        pinned: true,
        what: "journal entry",
        admits: |n| n.label == LABEL,
    };
    if keys.is_empty() {
        return Ok(Promotion::default());
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    // Checked and written under the writer lock, as a pin is: an entry retracted between
    // the check and the commit would have come back as a bare pinned node.
    let done = store.pin_nodes(&keys, &of)?;
    Ok(Promotion {
        commit: done.commit,
        promoted: done.changed,
        already_promoted: done.unchanged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Entry {
        Entry {
            v: 1,
            time: Time::Text("2026-11-23T21:43:09Z".into()),
            harness: "claude-code".into(),
            session: "s1".into(),
            cwd: None,
            kind: "decision".into(),
            text: text.into(),
            tags: vec!["Build".into(), "build".into()],
        }
    }

    /// An entry's tags and directory are a few names: 100,000 tags took 28 s to read (each
    /// checked against every one before it), and a 10 MB directory was kept.
    #[test]
    fn tags_and_directory_are_bounded_and_tags_deduplicated_in_order() {
        let mut e = entry("x");
        e.tags = (0..MAX_TAGS).map(|i| format!("T{}", i % 100)).collect();
        let d = entry_event(&e).unwrap();
        let tags: Vec<&str> = d
            .assertions
            .iter()
            .filter_map(|a| match a {
                Assertion::UpsertNode(n) if n.label.as_deref() == Some("Tag") => n.name.as_deref(),
                _ => None,
            })
            .collect();
        let expected: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
        assert_eq!(tags, expected);
        e.tags.push("one more".into());
        let err = entry_event(&e).unwrap_err();
        assert_eq!(err.field, "tags", "{}", err.message);
        let mut e = entry("x");
        e.cwd = Some("/".repeat(MAX_CWD_BYTES + 1));
        assert_eq!(entry_event(&e).unwrap_err().field, "cwd");
        e.cwd = Some("/".repeat(MAX_CWD_BYTES));
        assert!(entry_event(&e).is_ok());
    }

    #[test]
    fn times_read_as_minutes_since_1970() {
        // A time of another JSON type is told what a time is, not serde's "data did not
        // match any variant of untagged enum Time" (session 24 probe).
        for odd in ["1e3", "null", "true", "[1]", "{}", "1.5"] {
            let err = serde_json::from_str::<Time>(odd).unwrap_err().to_string();
            assert!(
                err.contains("expected RFC 3339") && !err.contains("untagged"),
                "{odd}: {err}"
            );
        }
        assert_eq!(serde_json::from_str::<Time>("-5").unwrap(), Time::World(-5));
        assert_eq!(
            serde_json::from_str::<Time>("\"1970-01-02\"").unwrap(),
            Time::Text("1970-01-02".into())
        );
        assert_eq!(parse_time("1970-01-01T00:01:00Z"), Some(1));
        assert_eq!(parse_time("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_time("1970-01-02"), Some(1440));
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn the_same_note_is_one_node_and_bad_fields_are_named() {
        let a = entry_event(&entry("Use redb by default")).unwrap();
        let b = entry_event(&entry("  use REDB   by default ")).unwrap();
        assert_eq!(a.evidence, b.evidence);
        assert_ne!(a.idempotency_key, b.idempotency_key);
        // One tag, lower-cased, deduplicated.
        let tagged = a
            .assertions
            .iter()
            .filter(|x| matches!(x, Assertion::UpsertEdge(e) if e.relation == "TAGGED"))
            .count();
        assert_eq!(tagged, 1);
        assert_eq!(entry_event(&entry("\u{200b}")).unwrap_err().field, "text");
        let mut bad = entry("x");
        bad.v = 2;
        assert_eq!(entry_event(&bad).unwrap_err().field, "v");
        for out_of_range in [(1 << 61) + 1, i64::MIN] {
            let mut bad = entry("x");
            bad.time = Time::World(out_of_range);
            assert_eq!(entry_event(&bad).unwrap_err().field, "time");
        }
        let mut bad = entry("x");
        bad.time = Time::Text("soon".into());
        assert_eq!(entry_event(&bad).unwrap_err().field, "time");
        assert_eq!(entry_event(&entry("   ")).unwrap_err().field, "text");
        let mut bad = entry("x");
        bad.harness = "a/b".into();
        assert_eq!(entry_event(&bad).unwrap_err().field, "harness");
        // Names are keys and shown on one line: no control character, nor invisible only.
        for (harness, session, field) in [
            ("claude\0code", "s1", "harness"),
            ("claude-code", "s\n1", "session"),
            ("\u{200b}", "s1", "harness"),
            ("claude-code", "s\u{2028}1", "session"),
            ("claude\u{202e}edoc", "s1", "harness"),
        ] {
            let mut bad = entry("x");
            bad.harness = harness.into();
            bad.session = session.into();
            assert_eq!(entry_event(&bad).unwrap_err().field, field, "{harness:?}");
        }
        // A stray zero-width space at an end is no part of the name (session 24 probe: it
        // made another session).
        let mut stray = entry("x");
        stray.session = "\u{200b}s1\u{feff}".into();
        let keys = |d: &EventDraft| -> Vec<String> {
            d.assertions
                .iter()
                .filter_map(|a| match a {
                    Assertion::UpsertNode(n) => Some(n.key.clone()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(
            keys(&entry_event(&stray).unwrap()),
            keys(&entry_event(&entry("x")).unwrap())
        );
    }
}
