//! Consolidation: raw events become SUMMARY events, written back to the log, as a hierarchy of
//! time-ranged chunks.
//!
//! - An **episode** is a run of events inside one day, ended by a `SLEEP` event or by a gap of
//!   more than [`ConsolidationPolicy::episode_gap`] of world time;
//! - a **day** (`[d * day, (d + 1) * day - 1]`) rolls up its episodes;
//! - a **week** ([`ConsolidationPolicy::week_days`] days) rolls up its days.
//!
//! A summary's payload holds its level, its time range `[start, end]`, the sequence numbers of
//! its children (events for an episode, episode summaries for a day, day summaries for a
//! week), a [`Digest`] (counts and names, computed by loci) and the text a [`Summarizer`] wrote
//! from it. The built-in [`RuleSummarizer`] writes plain sentences without a model; a caller
//! can plug in its own (an LLM) through the trait.
//!
//! Only closed periods are consolidated (a day once some event lies after it), so a summary
//! never misses events still to come in order. Running consolidation again with no new events
//! adds nothing; an event that arrives late, into a period already summarised, makes that
//! period summarised again, and the new summary names the one it `supersedes`.
//!
//! A day (and a week) summary re-asserts the nodes and edges its events asserted, with their
//! values as the graph holds them then, so it becomes part of their support: when forgetting
//! evicts the raw events, the facts stay as they were, resting on the summary. Its world time
//! is the start of its range; each edge it restates says when its events last saw it, so the
//! summary moves no edge's `last_seen` (and decay), forward or back.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::dynamics::decay::DAY;
use crate::dynamics::deletion;
use crate::error::{Error, Result};
use crate::model::{kinds, Assertion, EdgeUpsert, Event, EventDraft, NodeUpsert, Value};
use crate::store::{Store, SummaryEntry};

/// Kind of a summary event.
pub const SUMMARY: &str = "SUMMARY";

/// Kinds that are bookkeeping, not experience: never summarised.
const NOT_SUMMARISED: [&str; 7] = [
    SUMMARY,
    crate::dynamics::usage::USAGE,
    crate::model::kinds::CONTEXT,
    deletion::DELETE,
    deletion::TOMBSTONE,
    kinds::PIN,
    kinds::UNPIN,
];

/// Most salient moments a chunk's digest names (a merged digest: twice as many).
const NOTABLE_PER_CHUNK: usize = 2;

/// Longest list a digest keeps (places, trades, ...), so summaries stay short. A week's lists
/// merge its days', and once the days are forgotten the week is all that names them: at 12,
/// a week of 19 discoveries (the 20-day world) lost 7 of them.
const DIGEST_LIST_CAP: usize = 32;

/// The level of a summary in the hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Episode,
    Day,
    Week,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Episode => "episode",
            Level::Day => "day",
            Level::Week => "week",
        }
    }
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "episode" => Some(Level::Episode),
            "day" => Some(Level::Day),
            "week" => Some(Level::Week),
            _ => None,
        }
    }
}

/// The periods of consolidation, in the store's world time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsolidationPolicy {
    /// Length of a day.
    pub day: i64,
    /// Days per week.
    pub week_days: i64,
    /// A pause longer than this inside a day starts a new episode.
    pub episode_gap: i64,
}

/// A day of world time kept in minutes (journal entries, conversation turns).
pub const MINUTES_A_DAY: i64 = 1440;

/// Whether the store's clock is minutes since 1970: its events are conversation turns or
/// journal entries timed by text (the store's own records aside), with one of either. A world
/// store with an entry in it keeps its ticks, and so does a store of entries given in its
/// own world time (an integer, whose unit is the store's).
fn kept_in_minutes(store: &Store) -> Result<bool> {
    use crate::conversation::TURN;
    use crate::journal::{JOURNAL, MINUTES};
    const CLOCKLESS: [&str; 10] = [
        crate::model::kinds::USAGE,
        crate::model::kinds::CONTEXT,
        crate::model::kinds::PIN,
        crate::model::kinds::UNPIN,
        crate::journal::PROMOTE,
        crate::dynamics::working::WM,
        SUMMARY,
        crate::dynamics::deletion::DELETE,
        crate::dynamics::deletion::TOMBSTONE,
        crate::dynamics::places::PLACES,
    ];
    // A store of more kinds than these holds something else.
    let kinds = store.event_kinds(CLOCKLESS.len() + 3)?;
    let timed = |k: &String| k == TURN || k == JOURNAL;
    if !kinds
        .iter()
        .all(|k| timed(k) || CLOCKLESS.contains(&k.as_str()))
    {
        return Ok(false);
    }
    if kinds.iter().any(|k| k == TURN) {
        return Ok(true);
    }
    let minutes = |ev: &crate::model::Event| matches!(&ev.payload, Value::Map(m) if m.get(MINUTES) == Some(&Value::Bool(true)));
    Ok(kinds.iter().any(|k| k == JOURNAL)
        && store
            .events_with(crate::store::Facet::Kind, JOURNAL, i64::MIN, i64::MAX)?
            .iter()
            .all(minutes))
}

impl Default for ConsolidationPolicy {
    fn default() -> Self {
        ConsolidationPolicy {
            day: DAY as i64,
            week_days: 7,
            episode_gap: DAY as i64 / 8,
        }
    }
}

impl ConsolidationPolicy {
    /// The policy to consolidate `store` with: days of `day` (world time) if given, else of the
    /// length its day summaries have (1440 in a store of journals consolidated so), else of
    /// minutes in a store of journal entries or conversation turns (both timed in minutes),
    /// else the default's. A day given that differs from the store's is refused by
    /// [`consolidate`].
    pub fn for_store(store: &Store, day: Option<i64>) -> Result<Self> {
        let day = match day {
            Some(d) => Some(d),
            None => match summarised_day(&latest_summaries(store)?) {
                Some(d) => Some(d),
                // Days of 24,000 had summarised more than a fortnight of minutes as one, and
                // the first consolidation (a forgetting's too) fixes the store's day.
                None if kept_in_minutes(store)? => Some(MINUTES_A_DAY),
                None => None,
            },
        };
        Ok(match day {
            Some(d) => ConsolidationPolicy::default().with_day(d),
            None => ConsolidationPolicy::default(),
        })
    }

    /// This policy with days of `day` (1440 for a store kept in minutes) and episodes
    /// ending at a pause of an eighth of a day, as the default's do.
    pub fn with_day(mut self, day: i64) -> Self {
        self.day = day;
        self.episode_gap = (day / 8).max(1);
        self
    }

    fn validate(&self) -> Result<()> {
        let bad = |name: &str, message: &str| {
            Err(Error::InvalidArgument {
                name: name.into(),
                message: message.into(),
            })
        };
        if self.day < 1 {
            return bad("day", "must be at least 1 (in the store's world time)");
        }
        if !(1..=366).contains(&self.week_days) {
            return bad("week_days", "must be between 1 and 366");
        }
        if self.episode_gap < 1 {
            return bad(
                "episode_gap",
                "must be at least 1 (in the store's world time)",
            );
        }
        // A week's range around the world's ends (±2^61) stays within what a summary may
        // span (±2^62): a longer day had saturated its arithmetic and written a summary at
        // `i64::MIN`.
        if self.day.saturating_mul(self.week_days) > crate::store::MAX_ABS_TS {
            let longest = crate::store::MAX_ABS_TS / self.week_days;
            return bad(
                "day",
                &format!(
                    "{}: a week of {} such days leaves the range of world time (2^61); give a day of at most {longest}",
                    self.day, self.week_days
                ),
            );
        }
        Ok(())
    }
    /// The day (by number) of world time `ts`.
    pub(crate) fn day_of(&self, ts: i64) -> i64 {
        ts.div_euclid(self.day)
    }
    fn day_range(&self, day: i64) -> (i64, i64) {
        let start = day.saturating_mul(self.day);
        (start, start.saturating_add(self.day - 1))
    }
    fn week_of_day(&self, day: i64) -> i64 {
        day.div_euclid(self.week_days)
    }
}

/// Counts and names of a chunk, computed by loci whatever writes the text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Digest {
    pub events: usize,
    /// Events per kind.
    pub kinds: BTreeMap<String, usize>,
    /// Place name -> events there.
    pub places: BTreeMap<String, usize>,
    /// "fletcher villager at Oakridge village".
    pub trades: Vec<String>,
    /// "creeper (lost)".
    pub fights: Vec<String>,
    /// Where the agent died.
    pub deaths: Vec<String>,
    /// "iron ingot x5".
    pub dropped: Vec<String>,
    pub slept_at: Vec<String>,
    /// People and villagers met (traded with, or first seen).
    pub people: Vec<String>,
    /// Places and things first seen.
    pub found: Vec<String>,
    /// What observations and other events without a field of their own said.
    pub notes: Vec<String>,
    /// The text of the most salient events.
    pub notable: Vec<String>,
    /// The days (by number) a week's digest covers, in order, those forgetting took since
    /// included: a week summarised again after forgetting no longer has their summaries, and
    /// counted fewer days at each fold. Empty in a day's digest, and in a week's written
    /// before it was recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<i64>,
}

fn push_capped(list: &mut Vec<String>, item: String) {
    if !item.is_empty() && list.len() < DIGEST_LIST_CAP && !list.contains(&item) {
        list.push(item);
    }
}

impl Digest {
    /// The digest of raw events; `name` turns a node key into its name.
    pub fn of_events(events: &[Event], name: &dyn Fn(&str) -> String) -> Digest {
        let mut d = Digest {
            events: events.len(),
            ..Digest::default()
        };
        // A conversation's turns, by how much each says: the longest are noted.
        let mut turns: Vec<(usize, u64, &Event)> = Vec::new();
        for ev in events {
            *d.kinds.entry(ev.kind.clone()).or_default() += 1;
            let place = ev.place.as_deref().map(name);
            if let Some(p) = &place {
                *d.places.entry(p.clone()).or_default() += 1;
            }
            // A tool call's text is its session's alone, and every session reads a summary:
            // counted, not noted (helper-147: a day's summary put one session's command and
            // a raw call's arguments in another's context).
            if crate::observe::call_session(ev).is_some() {
                continue;
            }
            let at = place
                .as_ref()
                .map(|p| format!(" at {p}"))
                .unwrap_or_default();
            let field = |k: &str| match &ev.payload {
                Value::Map(m) => m.get(k).and_then(Value::as_str).map(str::to_string),
                _ => None,
            };
            match ev.kind.as_str() {
                kinds::TRADE => {
                    let with = field("with").map(|w| name(&w)).unwrap_or_default();
                    push_capped(&mut d.trades, format!("{with}{at}").trim().to_string());
                    if !with.is_empty() {
                        push_capped(&mut d.people, with);
                    }
                }
                kinds::COMBAT => {
                    let mob = field("mob").unwrap_or_else(|| "something".into());
                    let fight = match field("outcome") {
                        Some(o) => format!("{mob} ({o})"),
                        None => mob,
                    };
                    push_capped(&mut d.fights, fight);
                }
                kinds::DEATH => {
                    push_capped(
                        &mut d.deaths,
                        place.clone().unwrap_or_else(|| "somewhere".into()),
                    );
                }
                kinds::SLEEP => {
                    if let Some(p) = &place {
                        push_capped(&mut d.slept_at, p.clone());
                    }
                }
                kinds::DISCOVERY | kinds::BUILD => {}
                crate::conversation::TURN => {
                    if let Some((_, speaker, said)) = crate::conversation::turn_passage(ev) {
                        push_capped(&mut d.people, speaker.to_string());
                        turns.push((said.len(), ev.seq, ev));
                    }
                }
                _ => push_capped(&mut d.notes, readable_payload(ev, name)),
            }
            for a in &ev.assertions {
                match a {
                    Assertion::UpsertEdge(up)
                        if up.relation == crate::model::relations::DROPPED =>
                    {
                        let count = up.props.get("count").and_then(Value::as_i64);
                        let item = name(&up.to);
                        push_capped(
                            &mut d.dropped,
                            match count {
                                Some(c) if c > 1 => format!("{item} x{c}"),
                                _ => item,
                            },
                        );
                    }
                    Assertion::UpsertNode(up) if up.label.is_some() && up.name.is_some() => {
                        // A node upsert with a label and a name is a sighting; the world and
                        // the loaders send them when something is first seen.
                        let label = up.label.as_deref().unwrap_or_default();
                        let n = up.name.clone().unwrap_or_default();
                        if ["NPC", "Person"].contains(&label) {
                            push_capped(&mut d.people, n);
                        } else if ["Place", "Region"].contains(&label) {
                            push_capped(&mut d.found, n);
                        }
                    }
                    _ => {}
                }
            }
        }
        // The turns that say the most, in the order said: every turn's note had made a
        // summary of a session a transcript of its openings, too long for the cover.
        turns.sort_by_key(|&(len, seq, _)| (std::cmp::Reverse(len), seq));
        turns.truncate(TURN_NOTES_PER_CHUNK);
        turns.sort_by_key(|&(_, seq, _)| seq);
        for (_, _, ev) in turns {
            push_capped(&mut d.notes, event_note(ev, name));
        }
        let mut by_salience: Vec<&Event> = (events.iter())
            .filter(|ev| crate::observe::call_session(ev).is_none())
            .collect();
        by_salience.sort_by(|a, b| b.salience.total_cmp(&a.salience).then(a.seq.cmp(&b.seq)));
        for ev in by_salience.into_iter().take(NOTABLE_PER_CHUNK) {
            push_capped(&mut d.notable, event_note(ev, name));
        }
        d
    }
}

/// Words a conversation's turn is noted by in a summary, at most.
const TURN_NOTE_WORDS: usize = 8;

/// Turns of a conversation an episode's summary notes, at most: the longest.
const TURN_NOTES_PER_CHUNK: usize = 4;

/// What a summary notes of an event: a conversation's turn by its speaker and the first words
/// said (its payload is only the turn's id, and summaries of a conversation had read "Noted:
/// D17:1; D17:2; ..."), any other event by [`readable_payload`].
fn event_note(ev: &Event, name: &dyn Fn(&str) -> String) -> String {
    match crate::conversation::turn_passage(ev) {
        Some((_, speaker, said)) => {
            // One word more than is noted, to know whether the note is cut.
            let words: Vec<&str> = said.split_whitespace().take(TURN_NOTE_WORDS + 1).collect();
            let mut note = format!(
                "{speaker}: {}",
                words[..words.len().min(TURN_NOTE_WORDS)].join(" ")
            );
            if words.len() > TURN_NOTE_WORDS {
                note.push('…');
            }
            note
        }
        None => readable_payload(ev, name),
    }
}

/// The strings of an event's payload, with node keys ("npc:villager:3") read as the node's
/// name.
fn readable_payload(ev: &Event, name: &dyn Fn(&str) -> String) -> String {
    let mut text = String::new();
    ev.payload.collect_text(&mut text);
    text.split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| {
            if w.contains(':') {
                name(w)
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Digest {
    /// The digest of several chunks together (a week from its days).
    pub fn merge(parts: &[Digest]) -> Digest {
        let mut d = Digest::default();
        for p in parts {
            d.events += p.events;
            for (k, n) in &p.kinds {
                *d.kinds.entry(k.clone()).or_default() += n;
            }
            for (k, n) in &p.places {
                *d.places.entry(k.clone()).or_default() += n;
            }
            for (into, from) in [
                (&mut d.trades, &p.trades),
                (&mut d.fights, &p.fights),
                (&mut d.deaths, &p.deaths),
                (&mut d.dropped, &p.dropped),
                (&mut d.slept_at, &p.slept_at),
                (&mut d.people, &p.people),
                (&mut d.found, &p.found),
                (&mut d.notes, &p.notes),
            ] {
                for item in from {
                    push_capped(into, item.clone());
                }
            }
        }
        let days: BTreeSet<i64> = parts.iter().flat_map(|p| p.days.iter().copied()).collect();
        d.days = days.into_iter().collect();
        // The most notable moment of each part, then the next, up to a few in all.
        for round in 0..NOTABLE_PER_CHUNK {
            for p in parts {
                if d.notable.len() < NOTABLE_PER_CHUNK * 2 {
                    if let Some(n) = p.notable.get(round) {
                        push_capped(&mut d.notable, n.clone());
                    }
                }
            }
        }
        d
    }
}

impl Digest {
    /// This digest less every line and place holding one of `names` (a line names a node as
    /// it was named when the digest was made): what a summary made again after a deletion
    /// keeps.
    pub fn without_names(mut self, names: &[String]) -> Digest {
        for list in [
            &mut self.trades,
            &mut self.fights,
            &mut self.deaths,
            &mut self.dropped,
            &mut self.slept_at,
            &mut self.people,
            &mut self.found,
            &mut self.notes,
            &mut self.notable,
        ] {
            list.retain(|line| !names_one(line, names));
        }
        self.places.retain(|place, _| !names_one(place, names));
        self
    }
}

/// Whether `line` holds one of `names` (a blank name holds nothing).
fn names_one(line: &str, names: &[String]) -> bool {
    names
        .iter()
        .any(|n| !n.trim().is_empty() && line.contains(n.as_str()))
}

/// What a summariser is given for one chunk.
pub struct Chunk<'a> {
    pub level: Level,
    pub start: i64,
    pub end: i64,
    /// The day (for days and episodes) or week number.
    pub number: i64,
    pub digest: &'a Digest,
    /// The raw events (episode, day) or the child summaries (week).
    pub events: &'a [Event],
    /// How many children the summary has.
    pub children: usize,
}

/// Writes the text of a summary. The built-in one is [`RuleSummarizer`]; an LLM can be
/// plugged in by implementing this.
pub trait Summarizer {
    fn summarize(&self, chunk: &Chunk<'_>) -> Result<String>;
}

/// Sentences from the digest, without a model: counts, places, trades, fights, deaths and what
/// was dropped, sleep, people met, things found, and the most salient moments.
#[derive(Clone, Copy, Debug, Default)]
pub struct RuleSummarizer;

/// "1 event", "3 events".
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

impl Summarizer for RuleSummarizer {
    fn summarize(&self, c: &Chunk<'_>) -> Result<String> {
        let d = c.digest;
        // Only a summary a deletion made again can have no event left (it is kept for what it
        // restates of other periods): "0 events in 1 episode" would read as an empty day.
        if d.events == 0 {
            let what = match c.level {
                Level::Episode => "Episode of day",
                Level::Day => "Day",
                Level::Week => "Week",
            };
            return Ok(format!(
                "{what} {} (t={} to {}): none of its events is left.",
                c.number, c.start, c.end
            ));
        }
        let mut out = match c.level {
            Level::Episode => format!(
                "Episode of day {} (t={} to {}): {}.",
                c.number,
                c.start,
                c.end,
                count(d.events, "event")
            ),
            Level::Day => format!(
                "Day {} (t={} to {}): {} in {}.",
                c.number,
                c.start,
                c.end,
                count(d.events, "event"),
                count(c.children, "episode")
            ),
            Level::Week => format!(
                "Week {} (t={} to {}): {} over {}.",
                c.number,
                c.start,
                c.end,
                count(d.events, "event"),
                count(c.children, "day")
            ),
        };
        let mut sentence = |s: String| {
            out.push(' ');
            out.push_str(&s);
        };
        if !d.places.is_empty() {
            let mut places: Vec<(&String, &usize)> = d.places.iter().collect();
            places.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let named: Vec<String> = places
                .iter()
                .take(6)
                .map(|(p, n)| {
                    if **n > 1 {
                        format!("{p} ({n})")
                    } else {
                        p.to_string()
                    }
                })
                .collect();
            sentence(format!("Was at {}.", list(&named)));
        }
        if !d.found.is_empty() {
            sentence(format!("Found {}.", list(&d.found)));
        }
        if !d.trades.is_empty() {
            let n = d.kinds.get(kinds::TRADE).copied().unwrap_or(d.trades.len());
            sentence(format!(
                "Traded {n} time{}: with {}.",
                if n == 1 { "" } else { "s" },
                list(&d.trades)
            ));
        }
        if !d.fights.is_empty() {
            sentence(format!("Fought {}.", list(&d.fights)));
        }
        if !d.deaths.is_empty() {
            let n = d.kinds.get(kinds::DEATH).copied().unwrap_or(d.deaths.len());
            let mut s = format!(
                "Died {n} time{} at {}",
                if n == 1 { "" } else { "s" },
                list(&d.deaths)
            );
            if !d.dropped.is_empty() {
                s.push_str(&format!(", dropping {}", list(&d.dropped)));
            }
            s.push('.');
            sentence(s);
        }
        if !d.slept_at.is_empty() {
            sentence(format!("Slept at {}.", list(&d.slept_at)));
        }
        if !d.people.is_empty() {
            sentence(format!("Met {}.", list(&d.people)));
        }
        let covered = [kinds::TRADE, kinds::COMBAT, kinds::DEATH, kinds::SLEEP];
        let others: Vec<String> = d
            .kinds
            .iter()
            .filter(|(k, _)| !covered.contains(&k.as_str()))
            .map(|(k, n)| format!("{n} {}", k.to_lowercase()))
            .collect();
        if !others.is_empty() {
            sentence(format!("Also {}.", list(&others)));
        }
        if !d.notes.is_empty() {
            sentence(format!("Noted: {}.", d.notes.join("; ")));
        }
        let notable: Vec<&String> = d.notable.iter().filter(|n| !d.notes.contains(n)).collect();
        if !notable.is_empty() {
            let notable: Vec<&str> = notable.iter().map(|n| n.as_str()).collect();
            sentence(format!("Notable: {}.", notable.join("; ")));
        }
        Ok(out)
    }
}

/// The sequence numbers a summary's payload lists under one field (none when it lists none).
fn seqs(field: Option<&Value>) -> Vec<u64> {
    match field {
        Some(Value::List(items)) => items
            .iter()
            .filter_map(Value::as_i64)
            .filter_map(|s| u64::try_from(s).ok())
            .collect(),
        _ => Vec::new(),
    }
}

/// What places a summary in the hierarchy: its level, its range and its children.
pub(crate) struct SummaryHead {
    pub level: Level,
    pub start: i64,
    pub end: i64,
    pub children: Vec<u64>,
}

/// The [`SummaryHead`] a summary event's payload gives, if it reads as a summary's: what
/// [`Summary::of_event`] reads, and the summary index (`store/summary_index.rs`) keys.
pub(crate) fn summary_head(payload: &Value) -> Option<SummaryHead> {
    let Value::Map(m) = payload else {
        return None;
    };
    Some(SummaryHead {
        level: Level::parse(m.get("level")?.as_str()?)?,
        start: m.get("start")?.as_i64()?,
        end: m.get("end")?.as_i64()?,
        children: seqs(m.get("children")),
    })
}

/// A summary event, read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub seq: u64,
    pub level: Level,
    pub start: i64,
    pub end: i64,
    pub children: Vec<u64>,
    pub text: String,
    pub digest: Digest,
    /// The earlier summary of the same range that this one replaces.
    pub supersedes: Option<u64>,
    /// For a summary a user's deletion made again: the deleted events that the one it
    /// replaces was made from and it is not (`Store::delete`).
    pub without: Vec<u64>,
}

/// What keeps `payload` from reading as a summary's ([`Summary::of_event`]): a level, and a
/// range that runs forward within ±2^62 (a period holding world times, which are within
/// ±2^61: a day around -2^61 starts before it). A summary given from outside is
/// refused with it at ingest, since consolidation and forgetting trust the summaries they
/// read (a day's length is that of the last day summary). `None` when it reads as one: the
/// field at fault and what it needs otherwise.
pub(crate) fn summary_payload_fault(payload: &Value) -> Option<(&'static str, String)> {
    let Value::Map(m) = payload else {
        return Some((
            "payload",
            "a summary's payload is an object with a level, a start and an end".into(),
        ));
    };
    if m.get("level")
        .and_then(Value::as_str)
        .and_then(Level::parse)
        .is_none()
    {
        return Some((
            "payload.level",
            "a summary's level is \"episode\", \"day\" or \"week\"".into(),
        ));
    }
    let bound = 2 * crate::store::MAX_ABS_TS;
    let time = |field: &str| {
        m.get(field)
            .and_then(Value::as_i64)
            .filter(|t| (-bound..=bound).contains(t))
    };
    let Some(start) = time("start") else {
        return Some(("payload.start", "an integer within ±2^62 is needed".into()));
    };
    let Some(end) = time("end") else {
        return Some(("payload.end", "an integer within ±2^62 is needed".into()));
    };
    (start > end).then(|| {
        (
            "payload.end",
            format!("the range runs backwards: it starts at {start} and ends at {end}"),
        )
    })
}

impl Summary {
    /// The summary an event carries, if it is a well-formed summary event.
    pub fn of_event(ev: &Event) -> Option<Summary> {
        Self::read(ev, true)
    }

    /// [`Summary::of_event`] with its digest left empty: what the memory cover reads (level,
    /// range, text). The digest goes through JSON to its type, most of the cost of reading a
    /// summary: a store of 27k summaries spent half a second of each context on it.
    pub fn of_event_without_digest(ev: &Event) -> Option<Summary> {
        Self::read(ev, false)
    }

    fn read(ev: &Event, with_digest: bool) -> Option<Summary> {
        if ev.kind != SUMMARY {
            return None;
        }
        let SummaryHead {
            level,
            start,
            end,
            children,
        } = summary_head(&ev.payload)?;
        let Value::Map(m) = &ev.payload else {
            return None;
        };
        let digest = m
            .get(crate::model::SUMMARY_DIGEST)
            .filter(|_| with_digest)
            .and_then(|v| serde_json::to_value(v).ok())
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        Some(Summary {
            seq: ev.seq,
            level,
            start,
            end,
            children,
            text: m
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            digest,
            supersedes: m
                .get("supersedes")
                .and_then(Value::as_i64)
                .and_then(|s| u64::try_from(s).ok()),
            without: seqs(m.get("without")),
        })
    }

    /// The summary event's draft.
    fn draft(
        level: Level,
        (start, end): (i64, i64),
        children: &[u64],
        text: String,
        digest: &Digest,
        supersedes: Option<u64>,
        salience: f32,
    ) -> EventDraft {
        let mut m = BTreeMap::new();
        m.insert("level".to_string(), Value::from(level.name()));
        m.insert("start".to_string(), Value::Int(start));
        m.insert("end".to_string(), Value::Int(end));
        m.insert(
            "children".to_string(),
            Value::List(children.iter().map(|s| Value::Int(*s as i64)).collect()),
        );
        m.insert("text".to_string(), Value::from(text));
        let digest = serde_json::to_value(digest)
            .ok()
            .and_then(|v| serde_json::from_value::<Value>(v).ok())
            .unwrap_or_default();
        m.insert(crate::model::SUMMARY_DIGEST.to_string(), digest);
        if let Some(s) = supersedes {
            m.insert("supersedes".to_string(), Value::Int(s as i64));
        }
        let mut d = EventDraft::new(start, "loci", SUMMARY);
        d.payload = Value::Map(m);
        d.salience = Some(salience);
        d
    }
}

/// Options of [`consolidate`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ConsolidateOptions {
    pub policy: ConsolidationPolicy,
    /// Consolidate periods that ended before this world time (default: the latest event's).
    pub until: Option<i64>,
    /// Raw events read into one batch, about: whole weeks are written together until they
    /// hold this many (a week that alone holds more is one batch). What a run holds in
    /// memory grows with it; each batch is atomic. At least 1.
    pub events_per_batch: usize,
}

impl Default for ConsolidateOptions {
    fn default() -> Self {
        ConsolidateOptions {
            policy: ConsolidationPolicy::default(),
            until: None,
            events_per_batch: EVENTS_PER_BATCH,
        }
    }
}

impl ConsolidateOptions {
    pub fn with_events_per_batch(mut self, events: usize) -> Self {
        self.events_per_batch = events;
        self
    }
    pub fn with_policy(mut self, policy: ConsolidationPolicy) -> Self {
        self.policy = policy;
        self
    }
    pub fn with_until(mut self, until: i64) -> Self {
        self.until = Some(until);
        self
    }
}

/// What a consolidation wrote.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsolidateReport {
    pub episodes: usize,
    pub days: usize,
    pub weeks: usize,
    /// Raw events read into new day summaries.
    pub events_consolidated: usize,
    /// Earlier live summaries the new ones replace (late events): a day or week summarised
    /// again, and the episodes of a day summarised again (the new day has episodes of its own).
    pub superseded: usize,
    /// The first and the last event the run wrote: its batches span them, and another
    /// writer's events may lie between two batches.
    pub first_seq: u64,
    pub last_seq: u64,
    /// The first and the last event of each batch the run wrote, in order.
    #[serde(default)]
    pub batches: Vec<(u64, u64)>,
}

/// Whether an event is experience to be summarised (not bookkeeping: summaries, uses,
/// contexts, deletions, pins).
pub fn summarised(ev: &Event) -> bool {
    summarised_kind(&ev.kind)
}

/// [`summarised`] of an event of kind `kind` (read without decoding the event).
pub fn summarised_kind(kind: &str) -> bool {
    !NOT_SUMMARISED.contains(&kind)
}

/// Splits a day's events (in time order) into episodes.
fn episodes(events: &[Event], gap: i64) -> Vec<&[Event]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..events.len() {
        let ends_here = events[i].kind == kinds::SLEEP
            || events
                .get(i + 1)
                .is_some_and(|next| next.ts.saturating_sub(events[i].ts) > gap);
        if ends_here || i + 1 == events.len() {
            out.push(&events[start..=i]);
            start = i + 1;
        }
    }
    out
}

/// The live summaries of the store ([`live`]), by level and range start, as the summary
/// index places them: each of its level, range and sequence number alone (a day's children
/// too), no text and no digest ([`full_summary`] reads one whole). What consolidation plans
/// against: reading every summary whole had cost a run with nothing to do 72 s and 1.4 GB
/// on a store of 157k summaries.
pub(crate) fn latest_summaries(store: &Store) -> Result<Latest> {
    Ok(live(indexed_summaries(store)?))
}

/// The summary event `seq` whole (its digest too), if the log holds it and it reads as one.
fn full_summary(store: &Store, seq: u64) -> Result<Option<Summary>> {
    Ok(store.event(seq)?.as_ref().and_then(Summary::of_event))
}

/// The live summaries of a store ([`live`]), each read without its digest
/// ([`Summary::of_event_without_digest`]: up to its payload, not the facts it restates), and
/// the summary events they leave out: what the memory cover shows, and what retrieval and
/// search leave out.
#[derive(Debug, Default)]
pub struct LiveSummaries {
    /// The live summaries, by level and range start.
    pub summaries: Vec<Summary>,
    /// The summary events that are not live: a later summary of their period replaced them
    /// (and repeats what they say).
    pub replaced: BTreeSet<u64>,
}

/// What a store last read of its summaries, kept by the store ([`Store::live_summary_cache`])
/// for every reader of it: its [`LiveSummaries`] (every live summary's text, for a caller
/// that reads them all), its [`PlacedSummaries`] (what the memory cover chooses from) and its
/// [`ReplacedSummaries`] (what a search, a timeline and retrieval leave out).
#[derive(Default)]
pub(crate) struct LiveSummaryCache {
    live: std::sync::Mutex<CacheEntry<LiveSummaries>>,
    placed: std::sync::Mutex<CacheEntry<PlacedSummaries>>,
    replaced: std::sync::Mutex<CacheEntry<ReplacedSummaries>>,
}

struct CacheEntry<T> {
    /// The log position and the number of deleted events when `value` was read or last found
    /// still true.
    seq: u64,
    deleted: usize,
    value: Option<std::sync::Arc<T>>,
}

impl<T> Default for CacheEntry<T> {
    fn default() -> Self {
        CacheEntry {
            seq: 0,
            deleted: 0,
            value: None,
        }
    }
}

/// The store's [`LiveSummaries`]: from its cache when the events logged since it was filled
/// hold no summary and nothing was deleted (forgetting deletes), read again otherwise.
pub fn live_summaries(store: &Store) -> Result<std::sync::Arc<LiveSummaries>> {
    cached(store, &store.live_summary_cache().live, read_live_summaries)
}

/// The summaries of a store as the summary index places them (`store/summary_index.rs`), no
/// summary decoded: what the memory cover chooses from, and what a deletion finds live.
/// A reader that only leaves the replaced ones out reads [`ReplacedSummaries`], less.
#[derive(Debug, Default)]
pub struct PlacedSummaries {
    /// The live summaries ([`live`]), by level and range start: what the memory cover chooses
    /// from, reading the text of those it weighs alone ([`summary_text`]).
    pub live: Vec<Placement>,
}

/// The store's [`PlacedSummaries`], cached as [`live_summaries`] is.
///
/// The summaries [`live`] leaves out are kept as the store's [`ReplacedSummaries`] too: a
/// context with a question, whose retrieval leaves them out, had read the summary index again
/// for them.
pub fn placed_summaries(store: &Store) -> Result<std::sync::Arc<PlacedSummaries>> {
    cached(store, &store.live_summary_cache().placed, |store| {
        // Read before the index, as `cached` reads them: what is read holds at least as much.
        let (seq, deleted) = (store.last_seq(), store.deleted_count());
        let indexed = indexed_summaries(store)?;
        let mut replaced: Vec<u64> = indexed.iter().map(|p| p.seq).collect();
        let live: Vec<Placement> = live(indexed).into_values().collect();
        let live_seqs: BTreeSet<u64> = live.iter().map(|p| p.seq).collect();
        replaced.retain(|s| !live_seqs.contains(s));
        replaced.sort_unstable();
        replaced.dedup();
        keep(
            &store.live_summary_cache().replaced,
            (seq, deleted),
            ReplacedSummaries { seqs: replaced },
        );
        Ok(PlacedSummaries { live })
    })
}

/// The summary events a later summary of their period replaced ([`live`] leaves them out):
/// what a search, a timeline and retrieval leave out, as they say nothing the later one does
/// not. Sorted, 8 bytes each.
#[derive(Debug, Default, PartialEq)]
pub struct ReplacedSummaries {
    seqs: Vec<u64>,
}

impl ReplacedSummaries {
    pub fn contains(&self, seq: u64) -> bool {
        self.seqs.binary_search(&seq).is_ok()
    }

    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }
}

/// The store's [`ReplacedSummaries`], cached as [`live_summaries`] is.
///
/// Read from the summary index's entries alone, and the children of the days an episode is
/// in question under: a reader that only leaves the replaced summaries out (every search,
/// timeline and query of the CLI, each a process of its own) had built [`PlacedSummaries`]
/// first, 0.45 s and 155 MB at 980k events and 566k summaries.
pub fn replaced_summaries(store: &Store) -> Result<std::sync::Arc<ReplacedSummaries>> {
    cached(store, &store.live_summary_cache().replaced, |store| {
        let reading = IndexReading::of(store.summary_entries()?);
        let named = store.named_by_their_days(&reading.in_question)?;
        let named: BTreeSet<(u64, u64)> = (reading.in_question.iter().zip(named))
            .filter(|(_, named)| *named)
            .map(|(pair, _)| *pair)
            .collect();
        Ok(ReplacedSummaries {
            seqs: reading.replaced(|pair| named.contains(pair)),
        })
    })
}

/// What the summary index's entries (deleted ones left out already) tell of which
/// summaries [`live`] keeps without a day's children: those it keeps whatever the days name,
/// and the episodes in question, which it keeps only where their day names them.
struct IndexReading {
    /// Every summary the entries place, sorted, each once.
    all: Vec<u64>,
    /// The latest of each level and start, but the episodes in question: live. Sorted.
    live: Vec<u64>,
    /// The episodes in question, each with its day, sorted: those a newer latest day over
    /// their start replaced unless it names them as its children.
    in_question: Vec<(u64, u64)>,
}

impl IndexReading {
    fn of(mut entries: Vec<SummaryEntry>) -> IndexReading {
        // The index's own order already: the sort finds it sorted.
        entries.sort_unstable_by_key(|e| (e.level, e.start, e.seq, e.end));
        // The highest number of each level and start is its latest; the others are replaced
        // by it. The same number again (two keys of one summary, damage) is no later summary:
        // `live` keeps the number live, once (one before a later number had been kept too).
        let latest: Vec<&SummaryEntry> = entries
            .chunk_by(|a, b| (a.level, a.start) == (b.level, b.start))
            .filter_map(|group| group.last())
            .collect();
        // Latest days by start: a store's days are of one length and do not overlap, so the
        // day over an episode is the last one starting at or before it.
        let days: Vec<&SummaryEntry> = (latest.iter().copied())
            .filter(|e| e.level == Level::Day)
            .collect();
        let mut in_question = Vec::new();
        let mut live = Vec::new();
        for e in &latest {
            let over = days.partition_point(|d| d.start <= e.start);
            let day = (e.level == Level::Episode)
                .then(|| over.checked_sub(1).and_then(|i| days.get(i)))
                .flatten()
                .filter(|day| e.start <= day.end && day.seq > e.seq);
            match day {
                Some(day) => in_question.push((day.seq, e.seq)),
                None => live.push(e.seq),
            }
        }
        in_question.sort_unstable();
        in_question.dedup();
        live.sort_unstable();
        live.dedup();
        let mut all: Vec<u64> = entries.iter().map(|e| e.seq).collect();
        all.sort_unstable();
        all.dedup();
        IndexReading {
            all,
            live,
            in_question,
        }
    }

    /// The summaries [`live`] leaves out, given which episodes in question their day names:
    /// those live under no key. A number live under one key and replaced under another
    /// (damage) is live, as `live` finds it.
    fn replaced(&self, named: impl Fn(&(u64, u64)) -> bool) -> Vec<u64> {
        let mut live = self.live.clone();
        live.extend(
            (self.in_question.iter())
                .filter(|pair| named(pair))
                .map(|(_, episode)| *episode),
        );
        live.sort_unstable();
        (self.all.iter().copied())
            .filter(|s| live.binary_search(s).is_err())
            .collect()
    }
}

/// The text of summary `seq` (read up to its payload, less its digest); `None` when the log
/// holds no such event or it is not a summary.
pub fn summary_text(store: &Store, seq: u64) -> Result<Option<String>> {
    Ok(summary_without_digest(store, seq)?.map(|s| s.text))
}

/// Summary `seq` read up to its payload, less its digest; `None` as [`summary_text`].
fn summary_without_digest(store: &Store, seq: u64) -> Result<Option<Summary>> {
    Ok(store
        .event_up_to_payload_without_digest(seq)?
        .as_ref()
        .and_then(Summary::of_event_without_digest))
}

/// The text of the summary `placed` places, checked against the place: an entry of the
/// summary index at another level or range than its summary's (a flipped bit in its key) is
/// [`Error::Corrupt`](crate::Error::Corrupt), where the memory cover had shown a day as an
/// episode with exit 0 (helper-111 probe). `None` as [`summary_text`].
pub(crate) fn placed_summary_text(store: &Store, placed: &Placement) -> Result<Option<String>> {
    match summary_without_digest(store, placed.seq)? {
        Some(s) => Ok(Some(as_placed(store, placed, s)?.text)),
        None => Ok(None),
    }
}

/// `ev` read as the summary `placed` places, checked against the place as
/// [`placed_summary_text`] checks it, for a pass over the log that meets the live summaries
/// in its order (the health check); `ev` read without its digest gives the summary without
/// one. `None` when `ev` is no summary.
pub(crate) fn summary_as_placed(
    store: &Store,
    placed: &Placement,
    ev: &Event,
) -> Result<Option<Summary>> {
    match Summary::of_event_without_digest(ev) {
        Some(s) => Ok(Some(as_placed(store, placed, s)?)),
        None => Ok(None),
    }
}

/// `summary`, read by the number `placed` gives, if it is at the level and range `placed`
/// says, else [`Error::Corrupt`](crate::Error::Corrupt) ([`placed_summary_text`]).
fn as_placed(store: &Store, placed: &Placement, summary: Summary) -> Result<Summary> {
    let (at, says) = (
        (placed.level, placed.start, placed.end),
        (summary.level, summary.start, summary.end),
    );
    if at != says {
        return Err(store.misplaced_summary(summary.seq, at, says));
    }
    Ok(summary)
}

/// `entry`'s value while the log holds no summary past it and nothing was deleted since,
/// else `read` again.
///
/// The entry's lock is not held while the store is read: a reader holding the state (a
/// retrieval) could wait for it behind a writer that waits for that reader.
fn cached<T>(
    store: &Store,
    entry: &std::sync::Mutex<CacheEntry<T>>,
    read: fn(&Store) -> Result<T>,
) -> Result<std::sync::Arc<T>> {
    let lock = || entry.lock().unwrap_or_else(|e| e.into_inner());
    // Read first: what is read from the store after them holds at least as much.
    let (seq, deleted) = (store.last_seq(), store.deleted_count());
    let cached = {
        let c = lock();
        c.value.clone().map(|value| (c.seq, c.deleted, value))
    };
    if let Some((cached_seq, cached_deleted, value)) = cached {
        // Past a few thousand events, reading the summaries again costs less than decoding
        // every event to find whether one is a summary.
        if cached_deleted == deleted && seq.saturating_sub(cached_seq) <= 4096 {
            let mut changed = false;
            if cached_seq < seq {
                store.scan_log(cached_seq + 1, |ev| {
                    changed |= ev.kind == SUMMARY;
                    Ok(!changed)
                })?;
            }
            if !changed {
                let mut c = lock();
                if c.value
                    .as_ref()
                    .is_some_and(|v| std::sync::Arc::ptr_eq(v, &value))
                {
                    c.seq = c.seq.max(seq);
                }
                return Ok(value);
            }
        }
    }
    let value = std::sync::Arc::new(read(store)?);
    *lock() = CacheEntry {
        seq,
        deleted,
        value: Some(value.clone()),
    };
    Ok(value)
}

/// Keeps `value`, read at log position and deletion count `at`, in `entry` unless it holds a
/// value read at least as late (any value is true of the position it is kept with: [`cached`]
/// reads again past it).
fn keep<T>(entry: &std::sync::Mutex<CacheEntry<T>>, at: (u64, usize), value: T) {
    let mut c = entry.lock().unwrap_or_else(|e| e.into_inner());
    if c.value.is_none() || c.seq < at.0 || c.deleted < at.1 {
        *c = CacheEntry {
            seq: at.0,
            deleted: at.1,
            value: Some(std::sync::Arc::new(value)),
        };
    }
}

/// A summary as the summary index places it: its level, range and sequence number, and a
/// day's children; no text, no digest. A tenth of a [`Summary`]'s size: read for every
/// summary of a store, [`Summary`]s had held 240 MB for a search of 157k.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub seq: u64,
    pub level: Level,
    pub start: i64,
    pub end: i64,
    /// A day's children (none for an episode or a week: [`live`] reads a day's alone).
    pub children: Vec<u64>,
}

/// What [`live`] reads of a summary: where it lies in the hierarchy.
pub(crate) trait Placed {
    fn seq(&self) -> u64;
    fn level(&self) -> Level;
    fn start(&self) -> i64;
    fn end(&self) -> i64;
    fn children(&self) -> &[u64];
}

macro_rules! placed_by_fields {
    ($t:ty) => {
        impl Placed for $t {
            fn seq(&self) -> u64 {
                self.seq
            }
            fn level(&self) -> Level {
                self.level
            }
            fn start(&self) -> i64 {
                self.start
            }
            fn end(&self) -> i64 {
                self.end
            }
            fn children(&self) -> &[u64] {
                &self.children
            }
        }
    };
}
placed_by_fields!(Summary);
placed_by_fields!(Placement);

/// The summaries of the store as the summary index places them.
fn indexed_summaries(store: &Store) -> Result<Vec<Placement>> {
    // The entries first: a day summary written between the two scans is then not among them,
    // where read after its children it would have none, and its episodes read as replaced.
    let entries = store.summary_entries()?;
    let mut children = store.day_summary_children()?;
    Ok(entries
        .into_iter()
        .map(|e| Placement {
            seq: e.seq,
            level: e.level,
            start: e.start,
            end: e.end,
            children: match e.level {
                Level::Day => children.remove(&e.seq).unwrap_or_default(),
                _ => Vec::new(),
            },
        })
        .collect())
}

/// Every summary of the store (replaced ones too) as a [`Placement`], each with its children
/// whatever its level (an episode's raw events too, where the summary index keeps a day's
/// alone), in time order: for a reader of the hierarchy that needs no summary's text.
/// Every summary held whole as a [`Summary`] (566k of them) had been 436 MB of a forgetting
/// at 415k events.
pub(crate) fn placements_with_children(store: &Store) -> Result<Vec<Placement>> {
    let mut out = Vec::new();
    each_summary_without_digest(store, &mut |s| {
        out.push(Placement {
            seq: s.seq,
            level: s.level,
            start: s.start,
            end: s.end,
            children: s.children,
        })
    })?;
    Ok(out)
}

/// Gives `each` every summary of the store, read without its digest, in time order, one at a
/// time: the events are not held.
fn each_summary_without_digest(store: &Store, each: &mut dyn FnMut(Summary)) -> Result<()> {
    store.each_event_with_up_to_payload_without_digest(
        crate::store::Facet::Kind,
        SUMMARY,
        i64::MIN,
        i64::MAX,
        &mut |e| {
            if let Some(s) = Summary::of_event_without_digest(&e) {
                each(s)
            }
        },
    )
}

/// The live summaries, read one at a time and only the latest of each level and start kept
/// as they come ([`live`] keeps no other): the summaries a later one of their period replaced
/// are not held beside the rest.
fn read_live_summaries(store: &Store) -> Result<LiveSummaries> {
    let mut replaced = BTreeSet::new();
    let mut latest: BTreeMap<(Level, i64), Summary> = BTreeMap::new();
    each_summary_without_digest(store, &mut |s| {
        replaced.insert(s.seq);
        let key = (s.level, s.start);
        if latest.get(&key).is_none_or(|l| l.seq < s.seq) {
            latest.insert(key, s);
        }
    })?;
    let summaries: Vec<Summary> = live(latest.into_values()).into_values().collect();
    for s in &summaries {
        replaced.remove(&s.seq);
    }
    Ok(LiveSummaries {
        summaries,
        replaced,
    })
}

/// The live summaries among `all` (summary events, in any order), by level and range start:
/// the latest (highest sequence number) of each level and start, less the episodes that a
/// newer live day summary over their range does not name as its children.
///
/// A day summarised again (a late event, a deleted day summary) is written with episodes of
/// its own. An old episode whose start none of them shares would stay latest for its start,
/// and the memory cover would show it beside the new episode that holds its events.
pub(crate) fn live<S: Placed>(all: impl IntoIterator<Item = S>) -> BTreeMap<(Level, i64), S> {
    let mut latest: BTreeMap<(Level, i64), S> = BTreeMap::new();
    for s in all {
        let key = (s.level(), s.start());
        if latest.get(&key).is_none_or(|l| l.seq() < s.seq()) {
            latest.insert(key, s);
        }
    }
    // Days by start: a store's days are of one length and do not overlap, so the day over an
    // episode is the last one starting at or before it.
    let days: BTreeMap<i64, (i64, u64, BTreeSet<u64>)> = latest
        .values()
        .filter(|s| s.level() == Level::Day)
        .map(|s| {
            (
                s.start(),
                (s.end(), s.seq(), s.children().iter().copied().collect()),
            )
        })
        .collect();
    latest.retain(|_, s| {
        let replaced = || {
            days.range(..=s.start())
                .next_back()
                .is_some_and(|(_, (end, seq, children))| {
                    s.start() <= *end && *seq > s.seq() && !children.contains(&s.seq())
                })
        };
        s.level() != Level::Episode || !replaced()
    });
    latest
}

/// The length in world time of the newest day summary among `latest`, if there is one.
fn summarised_day(latest: &Latest) -> Option<i64> {
    latest
        .values()
        .filter(|s| s.level == Level::Day)
        .max_by_key(|s| s.seq)
        .map(|s| s.end.saturating_sub(s.start).saturating_add(1))
}

/// A day to summarise: its raw events, and its episode and day summaries, written but not yet
/// numbered.
struct DayPlan {
    day: i64,
    events: Vec<Event>,
    /// The day's summary before, when forgetting had thinned the day: it restated what the
    /// forgotten events asserted, which rests on it alone.
    folded: Option<Event>,
    episodes: Vec<EventDraft>,
    summary: EventDraft,
    digest: Digest,
}

impl DayPlan {
    /// What the day's summary restates, each assertion with its event's time: what the day's
    /// events asserted and what a folded summary restated. Without the latter, a node or a
    /// faded edge whose events forgetting took went once the superseded summary did, though
    /// the same store without a late event kept them.
    fn asserted(&self) -> impl Iterator<Item = (i64, &Assertion)> {
        self.events
            .iter()
            .chain(&self.folded)
            .flat_map(|e| e.assertions.iter().map(move |a| (e.ts, a)))
    }
}

/// A day summary that a week rolls up: one already in the log, or one planned in this run.
enum DayRef {
    Logged(Box<Event>),
    Planned(usize),
}

/// Summaries already in the log, by level and range start, as the summary index places them
/// ([`latest_summaries`]).
type Latest = BTreeMap<(Level, i64), Placement>;

/// What the log holds that days and weeks are planned against, read once per consolidation.
#[derive(Clone, Copy)]
struct Past<'a> {
    latest: &'a Latest,
    /// The last deletion of a user's ([`last_user_deletion`]).
    last_user_deletion: Option<u64>,
}

/// A week to summarise: its summary, written but not yet numbered, its days, and the week's
/// summary before when forgetting had taken some of what it held (what it restated of those
/// rests on it alone, as with [`DayPlan::folded`]).
struct WeekPlan {
    summary: EventDraft,
    days: Vec<DayRef>,
    folded: Option<Event>,
}

/// Raw events a consolidation reads into one batch by default, about
/// ([`ConsolidateOptions::events_per_batch`]). One batch for every period had held 2.3 GB to
/// consolidate 115k events, and 8.2 GB for 415k. At 115k events (release build, one sitting):
/// batches of 2,000 peaked at 210 MB in 15.6 s, 5,000 at 213 MB in 13.1 s, 10,000 at 277 MB
/// in 12.9 s, 20,000 at 471 MB in 12.5 s, one batch at 2.36 GB in 11.4 s.
pub const EVENTS_PER_BATCH: usize = 5_000;

/// Consolidates every closed period not yet summarised (or with events that arrived after its
/// summary): days with their episodes, then the weeks they complete. Whole weeks are written
/// together, each batch atomic, about [`ConsolidateOptions::events_per_batch`] raw events at
/// a time (the
/// summariser writes every text of a batch before the store is locked for it): a run cut
/// short, or whose summariser fails, keeps the weeks it wrote, and the next goes on from them.
pub fn consolidate(
    store: &Store,
    summarizer: &dyn Summarizer,
    opts: &ConsolidateOptions,
) -> Result<ConsolidateReport> {
    let policy = &opts.policy;
    policy.validate()?;
    if opts.events_per_batch == 0 {
        return Err(Error::InvalidArgument {
            name: "events_per_batch".into(),
            message: "must be at least 1".into(),
        });
    }
    if let Some(message) = opts.until.and_then(crate::store::time_out_of_range) {
        return Err(Error::InvalidArgument {
            name: "until".into(),
            message,
        });
    }
    let mut report = ConsolidateReport::default();
    let Some(now) = opts.until.or(store.latest_event_time()?) else {
        return Ok(report);
    };
    let latest = latest_summaries(store)?;
    // Days of another length would overlap the summaries there are, and both would be read.
    if let Some(day) = summarised_day(&latest).filter(|d| *d != policy.day) {
        return Err(Error::InvalidArgument {
            name: "day".into(),
            message: format!(
                "this store's days are summarised in days of {day} (world time), not {}: consolidate with a \
                 day of {day} (`--day {day}`), or the summaries of two day lengths overlap",
                policy.day
            ),
        });
    }
    let past = Past {
        latest: &latest,
        last_user_deletion: last_user_deletion(store)?,
    };
    let days = days_to_plan(store, policy, &past, now)?;
    let run = |report: &mut ConsolidateReport| -> Result<()> {
        let mut batch = Batch::default();
        for week in weeks_to_plan(policy, &latest, &days, now) {
            for day in days.range(week_days(policy, week)) {
                if let Some(plan) = plan_day_again(store, summarizer, policy, &past, day, report)? {
                    batch.events += plan.events.len();
                    batch.plans.push(plan);
                }
            }
            batch.events += logged_days_weight(policy, &latest, &days, week);
            batch.weeks.insert(week);
            if batch.events >= opts.events_per_batch {
                std::mem::take(&mut batch).write(store, summarizer, policy, &past, now, report)?;
            }
        }
        batch.write(store, summarizer, policy, &past, now, report)
    };
    let ran = run(&mut report);
    if let (Some(first), Some(last)) = (report.batches.first(), report.batches.last()) {
        (report.first_seq, report.last_seq) = (first.0, last.1);
    }
    if let Err(e) = ran {
        if !report.batches.is_empty() {
            tracing::warn!(
                batches = report.batches.len(),
                "consolidation failed after writing whole weeks in batches (events {}..{}): they stay, and the next run goes on from them",
                report.first_seq,
                report.last_seq
            );
        }
        return Err(e);
    }
    Ok(report)
}

/// What the day summaries already logged of a week a batch rolls up weigh against
/// [`ConsolidateOptions::events_per_batch`]: each is read whole (its digest and what it
/// restates), as its episodes and one more. Closed weeks whose days were summarised while
/// they were open weighed nothing, and any number of them had gone into one batch.
fn logged_days_weight(
    policy: &ConsolidationPolicy,
    latest: &Latest,
    days: &BTreeMap<i64, DayToPlan>,
    week: i64,
) -> usize {
    let range = week_range(policy, week);
    latest
        .range((Level::Day, range.0)..=(Level::Day, range.1))
        .filter(|(_, s)| !days.contains_key(&policy.day_of(s.start)))
        .map(|(_, s)| s.children.len() + 1)
        .sum()
}

/// Days planned in a consolidation, and the weeks they lie in, written as one batch.
#[derive(Default)]
struct Batch {
    plans: Vec<DayPlan>,
    weeks: BTreeSet<i64>,
    /// The raw events of the plans.
    events: usize,
}

impl Batch {
    /// Plans the batch's weeks over its days and writes them all, adding what it wrote to
    /// `report`.
    fn write(
        self,
        store: &Store,
        summarizer: &dyn Summarizer,
        policy: &ConsolidationPolicy,
        past: &Past<'_>,
        now: i64,
        report: &mut ConsolidateReport,
    ) -> Result<()> {
        let Batch { plans, weeks, .. } = self;
        let weeks = plan_weeks(store, summarizer, policy, past, &plans, &weeks, now, report)?;
        if plans.is_empty() && weeks.is_empty() {
            return Ok(());
        }
        let commit = write_summaries(store, &plans, &weeks)?;
        report.episodes += plans.iter().map(|p| p.episodes.len()).sum::<usize>();
        report.days += plans.len();
        report.weeks += weeks.len();
        report.events_consolidated += plans.iter().map(|p| p.events.len()).sum::<usize>();
        report.batches.push((commit.first_seq, commit.last_seq));
        Ok(())
    }
}

/// A closed day to summarise, as [`days_to_plan`] finds it.
struct DayToPlan {
    /// Its live summary, if it has one.
    previous: Option<u64>,
    /// Its summary, when what it covered and is gone now was taken by forgetting alone (no
    /// user deleted anything since it was written): its digest then stands for those events
    /// in the new one.
    forgotten_from: Option<u64>,
}

/// The closed days before `now` with events after their summary, or without one (found from
/// the time index alone), by day number.
fn days_to_plan(
    store: &Store,
    policy: &ConsolidationPolicy,
    past: &Past<'_>,
    now: i64,
) -> Result<BTreeMap<i64, DayToPlan>> {
    let Past {
        latest,
        last_user_deletion,
    } = *past;
    let summary_seqs: BTreeSet<u64> = latest.values().map(|s| s.seq).collect();
    let mut newest_in_day: BTreeMap<i64, u64> = BTreeMap::new();
    for (ts, seq) in store.event_times(i64::MIN, now)? {
        if summary_seqs.contains(&seq) {
            continue;
        }
        let day = policy.day_of(ts);
        if policy.day_range(day).1 >= now {
            continue;
        }
        let newest = newest_in_day.entry(day).or_default();
        *newest = (*newest).max(seq);
    }
    let mut days = BTreeMap::new();
    for (day, newest) in newest_in_day {
        let previous = latest
            .get(&(Level::Day, policy.day_range(day).0))
            .map(|s| s.seq);
        // A live week summary covers its days too: once forgetting took a day's summary, the
        // events it had to keep are summarised still, and only an event after the week's
        // summary is late.
        let week_start = policy
            .day_range(policy.week_of_day(day).saturating_mul(policy.week_days))
            .0;
        let covered = previous.max(latest.get(&(Level::Week, week_start)).map(|s| s.seq));
        if covered.is_some_and(|p| p > newest) {
            continue;
        }
        let forgotten_from = previous.filter(|p| last_user_deletion.is_none_or(|d| d < *p));
        days.insert(
            day,
            DayToPlan {
                previous,
                forgotten_from,
            },
        );
    }
    Ok(days)
}

/// The weeks a consolidation plans, in order: those of the days it plans, and the closed
/// ones before `now` with a day summary and none of their own (the week was open when its
/// days were summarised).
fn weeks_to_plan(
    policy: &ConsolidationPolicy,
    latest: &Latest,
    days: &BTreeMap<i64, DayToPlan>,
    now: i64,
) -> BTreeSet<i64> {
    let mut weeks: BTreeSet<i64> = days.keys().map(|d| policy.week_of_day(*d)).collect();
    for s in latest.values().filter(|s| s.level == Level::Day) {
        let week = policy.week_of_day(policy.day_of(s.start));
        let range = week_range(policy, week);
        if range.1 < now && !latest.contains_key(&(Level::Week, range.0)) {
            weeks.insert(week);
        }
    }
    weeks
}

/// The days (by number) of `week`.
fn week_days(policy: &ConsolidationPolicy, week: i64) -> std::ops::RangeInclusive<i64> {
    let first = week.saturating_mul(policy.week_days);
    first..=first.saturating_add(policy.week_days - 1)
}

/// The range in world time of `week`.
fn week_range(policy: &ConsolidationPolicy, week: i64) -> (i64, i64) {
    let days = week_days(policy, week);
    (
        policy.day_range(*days.start()).0,
        policy.day_range(*days.end()).1,
    )
}

/// Plans a day [`days_to_plan`] found, and counts the summaries its new one replaces.
fn plan_day_again(
    store: &Store,
    summarizer: &dyn Summarizer,
    policy: &ConsolidationPolicy,
    past: &Past<'_>,
    (&day, to_plan): (&i64, &DayToPlan),
    report: &mut ConsolidateReport,
) -> Result<Option<DayPlan>> {
    let forgotten_from = match to_plan.forgotten_from {
        Some(seq) => full_summary(store, seq)?,
        None => None,
    };
    let plan = plan_day(
        store,
        summarizer,
        policy,
        day,
        to_plan.previous,
        forgotten_from.as_ref(),
    )?;
    if plan.is_some() {
        // The new day comes with episodes of its own, and [`live`] reads the day's earlier
        // episodes as replaced once it is written.
        let (start, end) = policy.day_range(day);
        let episodes_replaced = past
            .latest
            .range((Level::Episode, start)..=(Level::Episode, end))
            .count();
        report.superseded += usize::from(to_plan.previous.is_some()) + episodes_replaced;
    }
    Ok(plan)
}

/// The last deletion of a user's (not forgetting's), after which no earlier summary is folded
/// in: a summary may keep the gist of events forgetting took, but never of one a user deleted.
fn last_user_deletion(store: &Store) -> Result<Option<u64>> {
    Ok(store
        .events_with(
            crate::store::Facet::Kind,
            deletion::DELETE,
            i64::MIN,
            i64::MAX,
        )?
        .iter()
        .filter(|e| deletion::reason_of(e) != Some(deletion::Reason::Forget))
        .map(|e| e.seq)
        .max())
}

/// The closed weeks of `weeks` before `now` with a day new in `plans`, or without a summary,
/// each planned with its summary over its days' digests. A week whose summary before held
/// days or events forgetting has taken since folds that summary in, as a day does.
#[allow(clippy::too_many_arguments)]
fn plan_weeks(
    store: &Store,
    summarizer: &dyn Summarizer,
    policy: &ConsolidationPolicy,
    past: &Past<'_>,
    plans: &[DayPlan],
    weeks_planned: &BTreeSet<i64>,
    now: i64,
    report: &mut ConsolidateReport,
) -> Result<Vec<WeekPlan>> {
    let Past {
        latest,
        last_user_deletion,
    } = *past;
    let mut days_of_week: BTreeMap<i64, BTreeMap<i64, DayRef>> = BTreeMap::new();
    for week in weeks_planned {
        let range = week_range(policy, *week);
        if range.1 >= now {
            continue;
        }
        for s in latest
            .range((Level::Day, range.0)..=(Level::Day, range.1))
            .map(|(_, s)| s)
        {
            if let Some(ev) = store.event(s.seq)? {
                days_of_week
                    .entry(*week)
                    .or_default()
                    .insert(policy.day_of(s.start), DayRef::Logged(Box::new(ev)));
            }
        }
    }
    let mut changed_weeks = BTreeSet::new();
    for (i, plan) in plans.iter().enumerate() {
        let week = policy.week_of_day(plan.day);
        changed_weeks.insert(week);
        days_of_week
            .entry(week)
            .or_default()
            .insert(plan.day, DayRef::Planned(i));
    }
    let mut weeks = Vec::new();
    for (week, days) in days_of_week {
        let range = week_range(policy, week);
        let previous = latest.get(&(Level::Week, range.0)).map(|s| s.seq);
        if range.1 >= now || (previous.is_some() && !changed_weeks.contains(&week)) {
            continue;
        }
        let previous_summary = match previous {
            Some(seq) => full_summary(store, seq)?,
            None => None,
        };
        let previous_summary = previous_summary.as_ref();
        let digests: Vec<Digest> = days
            .values()
            .map(|d| match d {
                DayRef::Logged(ev) => Summary::of_event(ev).map(|s| s.digest).unwrap_or_default(),
                DayRef::Planned(i) => plans[*i].digest.clone(),
            })
            .collect();
        let mut digest = Digest::merge(&digests);
        let folded = previous_summary
            .filter(|p| last_user_deletion.is_none_or(|d| d < p.seq))
            .filter(|p| covered_before(&days, plans, &digests, p.seq) < p.digest.events);
        if let Some(before) = folded {
            let planned = days.values().filter_map(|d| match d {
                DayRef::Planned(i) => Some(&plans[*i].events),
                DayRef::Logged(_) => None,
            });
            digest = folded_digest(store, before, planned.flatten());
        }
        let covered: BTreeSet<i64> = digest.days.iter().chain(days.keys()).copied().collect();
        digest.days = covered.into_iter().collect();
        let logged: Vec<Event> = days
            .values()
            .filter_map(|d| match d {
                DayRef::Logged(ev) => Some((**ev).clone()),
                DayRef::Planned(_) => None,
            })
            .collect();
        let text = summarizer.summarize(&Chunk {
            level: Level::Week,
            start: range.0,
            end: range.1,
            number: week,
            digest: &digest,
            events: &logged,
            // Folded, the week had at least the days its summary before had (a summary
            // written before the digest recorded its days lists them as its children).
            children: digest
                .days
                .len()
                .max(folded.map_or(0, |b| b.children.len())),
        })?;
        let salience = days
            .values()
            .map(|d| match d {
                DayRef::Logged(ev) => ev.salience,
                DayRef::Planned(i) => plans[*i].summary.salience.unwrap_or(0.0),
            })
            .fold(0.0, f32::max);
        let draft = Summary::draft(Level::Week, range, &[], text, &digest, previous, salience);
        report.superseded += usize::from(previous.is_some());
        let folded = event_of(store, folded)?;
        weeks.push(WeekPlan {
            summary: draft,
            days: days.into_values().collect(),
            folded,
        });
    }
    Ok(weeks)
}

/// A node's name, or `key` for a node the graph no longer holds: what a digest names.
pub(crate) fn node_name(store: &Store, key: &str) -> String {
    store
        .node_by_key(key)
        .map(|n| n.name)
        .unwrap_or_else(|| key.to_string())
}

/// The digest of a period summarised again whose summary before, `before`, is folded in:
/// that digest covers every event logged before it, forgotten ones too, and the events of
/// `events` logged after it are added to it.
fn folded_digest<'a>(
    store: &Store,
    before: &Summary,
    events: impl Iterator<Item = &'a Event>,
) -> Digest {
    let late: Vec<Event> = events.filter(|e| e.seq > before.seq).cloned().collect();
    let name = |key: &str| node_name(store, key);
    Digest::merge(&[before.digest.clone(), Digest::of_events(&late, &name)])
}

/// The event of a summary folded in, which the new summary restates the facts of.
fn event_of(store: &Store, folded: Option<&Summary>) -> Result<Option<Event>> {
    match folded {
        Some(before) => store.event(before.seq),
        None => Ok(None),
    }
}

/// How many of its raw events the week's days cover that were logged before `seq` (the
/// week's summary before): a day summary in the log covers its digest's events, a planned day
/// its digest's less the events logged after.
fn covered_before(
    days: &BTreeMap<i64, DayRef>,
    plans: &[DayPlan],
    digests: &[Digest],
    seq: u64,
) -> usize {
    days.values()
        .zip(digests)
        .map(|(d, digest)| match d {
            DayRef::Logged(_) => digest.events,
            DayRef::Planned(i) => {
                let late = plans[*i].events.iter().filter(|e| e.seq > seq).count();
                digest.events.saturating_sub(late)
            }
        })
        .sum()
}

/// Writes the planned days (each after its episodes) and weeks as one batch, each summary
/// naming its children by the numbers they get in it, and asserting what they support.
fn write_summaries(
    store: &Store,
    plans: &[DayPlan],
    weeks: &[WeekPlan],
) -> Result<crate::store::Commit> {
    store.ingest_with(|first| {
        let mut next = first;
        let mut drafts = Vec::new();
        let mut day_seq = Vec::with_capacity(plans.len());
        for plan in plans {
            let children: Vec<u64> = (next..next + plan.episodes.len() as u64).collect();
            next += plan.episodes.len() as u64;
            drafts.extend(plan.episodes.iter().cloned());
            let mut day = plan.summary.clone();
            set_children(&mut day, &children);
            day.assertions = support_of(store, plan.asserted())?;
            drafts.push(day);
            day_seq.push(next);
            next += 1;
        }
        for plan in weeks {
            let mut week = plan.summary.clone();
            let children: Vec<u64> = plan
                .days
                .iter()
                .map(|d| match d {
                    DayRef::Logged(ev) => ev.seq,
                    DayRef::Planned(i) => day_seq[*i],
                })
                .collect();
            set_children(&mut week, &children);
            let mut asserted: Vec<(i64, &Assertion)> = Vec::new();
            for d in &plan.days {
                match d {
                    DayRef::Logged(ev) => {
                        asserted.extend(ev.assertions.iter().map(|a| (ev.ts, a)));
                    }
                    DayRef::Planned(i) => asserted.extend(plans[*i].asserted()),
                }
            }
            if let Some(before) = &plan.folded {
                asserted.extend(before.assertions.iter().map(|a| (before.ts, a)));
            }
            week.assertions = support_of(store, asserted.into_iter())?;
            drafts.push(week);
        }
        Ok(drafts)
    })
}

/// Replaces the children list of a summary draft.
fn set_children(draft: &mut EventDraft, children: &[u64]) {
    if let Value::Map(m) = &mut draft.payload {
        m.insert(
            "children".to_string(),
            Value::List(children.iter().map(|s| Value::Int(*s as i64)).collect()),
        );
    }
}

/// Reads one closed day and writes the texts of its episodes and of the day.
/// `forgotten_from`: the day's summary before, when what it covered and is gone now was taken
/// by forgetting alone; its digest then stands for those events in the new one.
fn plan_day(
    store: &Store,
    summarizer: &dyn Summarizer,
    policy: &ConsolidationPolicy,
    day: i64,
    previous: Option<u64>,
    forgotten_from: Option<&Summary>,
) -> Result<Option<DayPlan>> {
    let range = policy.day_range(day);
    let events: Vec<Event> = store
        .events_between(range.0, range.1)?
        .into_iter()
        .filter(summarised)
        .collect();
    if events.is_empty() {
        return Ok(None);
    }
    let name = |key: &str| node_name(store, key);
    let parts = episodes(&events, policy.episode_gap);
    let mut episode_drafts = Vec::with_capacity(parts.len());
    let mut digests = Vec::with_capacity(parts.len());
    for part in &parts {
        let digest = Digest::of_events(part, &name);
        let r = (part[0].ts, part[part.len() - 1].ts);
        let text = summarizer.summarize(&Chunk {
            level: Level::Episode,
            start: r.0,
            end: r.1,
            number: day,
            digest: &digest,
            events: part,
            children: part.len(),
        })?;
        let children: Vec<u64> = part.iter().map(|e| e.seq).collect();
        episode_drafts.push(Summary::draft(
            Level::Episode,
            r,
            &children,
            text,
            &digest,
            None,
            max_salience(part),
        ));
        digests.push(digest);
    }
    let mut digest = Digest::merge(&digests);
    // A late event into a day forgetting thinned: made of the events left alone, the new
    // summary lost what the old one kept of the others (a trade, where the agent slept).
    // The old digest covers every event before it, the late ones are added to it.
    let folded = forgotten_from
        .filter(|b| events.iter().filter(|e| e.seq < b.seq).count() < b.digest.events);
    if let Some(before) = folded {
        digest = folded_digest(store, before, events.iter());
    }
    let text = summarizer.summarize(&Chunk {
        level: Level::Day,
        start: range.0,
        end: range.1,
        number: day,
        digest: &digest,
        events: &events,
        // Folded, the day had at least the episodes its summary before had.
        children: parts.len().max(folded.map_or(0, |b| b.children.len())),
    })?;
    let summary = Summary::draft(
        Level::Day,
        range,
        &[],
        text,
        &digest,
        previous,
        max_salience(&events),
    );
    let folded = event_of(store, folded)?;
    Ok(Some(DayPlan {
        day,
        events,
        folded,
        episodes: episode_drafts,
        summary,
        digest,
    }))
}

fn max_salience(events: &[Event]) -> f32 {
    events.iter().map(|e| e.salience).fold(0.0, f32::max)
}

/// Re-assertions of the nodes and edges that events asserted (each with its event's time) and
/// the graph still holds, with their current values, so that a summary supports them: when
/// forgetting evicts the raw events, the facts stay as they were, resting on the summary. An
/// edge is restated as last seen when the latest of those events saw it (no later than the
/// graph has it): the summary's own time, its range's start, made a forgotten week's offers
/// look weeks older, and faded them.
fn support_of<'a>(
    store: &Store,
    asserted: impl Iterator<Item = (i64, &'a Assertion)>,
) -> Result<Vec<Assertion>> {
    restated(
        asserted,
        |key| Ok(store.node_by_key(key)),
        |from, relation, to| store.edge_between(from, relation, to),
    )
}

/// [`support_of`] against any graph: `node` and `edge` look a node up by key and an edge by
/// the keys of its ends and its relation (a deletion's replay, `Store::summaries_made_again`).
pub(crate) fn restated<'a>(
    asserted: impl Iterator<Item = (i64, &'a Assertion)>,
    node: impl Fn(&str) -> Result<Option<crate::model::Node>>,
    edge: impl Fn(&str, &str, &str) -> Result<Option<crate::model::Edge>>,
) -> Result<Vec<Assertion>> {
    let mut nodes = BTreeSet::new();
    let mut edges: BTreeMap<(String, String, String), i64> = BTreeMap::new();
    for (ts, a) in asserted {
        match a {
            Assertion::UpsertNode(up) => {
                nodes.insert(up.key.clone());
            }
            Assertion::UpsertEdge(up) => {
                nodes.insert(up.from.clone());
                nodes.insert(up.to.clone());
                let seen = up.last_seen.unwrap_or(ts);
                edges
                    .entry((up.from.clone(), up.relation.clone(), up.to.clone()))
                    .and_modify(|s| *s = (*s).max(seen))
                    .or_insert(seen);
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for key in nodes {
        if let Some(n) = node(&key)? {
            out.push(Assertion::UpsertNode(NodeUpsert {
                key: n.key,
                label: Some(n.label),
                name: Some(n.name),
                aliases: n.aliases,
                props: n.props,
                anchor: n.anchor,
                // Restated, as an explicit value: a node whose events are forgotten keeps it.
                salience: Some(n.salience),
                // A pin outlives the evicted event that set it (an unpin is an event that is
                // never evicted, and comes later in the log).
                pinned: n.pinned.then_some(true),
            }));
        }
    }
    for ((from, relation, to), seen) in edges {
        if let Some(e) = edge(&from, &relation, &to)? {
            out.push(Assertion::UpsertEdge(EdgeUpsert {
                from,
                relation,
                to,
                confidence: Some(e.confidence),
                props: e.props,
                valid_from: e.valid_from,
                valid_to: e.valid_to,
                // No later than the graph has it: the latest assertion in the range may be one
                // that never took effect (replay skips an edge whose nodes a deletion had
                // taken, and a later event made them again), and its time would move the
                // fact forward.
                last_seen: Some(seen.min(e.last_seen)),
            }));
        }
    }
    Ok(out)
}

/// The draft of `summary` (its event `event`) made again by a user's deletion, in the
/// deletion's commit (`Store::summaries_made_again`): its level and range, `digest` (made from
/// the events left), `children`, and `assertions` (what it restated that stays), its text
/// written by the [`RuleSummarizer`] (the store holds no other). It names `summary` as the one
/// it supersedes, and lists the deleted events it is `without` (those that one was made from),
/// so that a deletion of another event that one was made from still finds it and a second
/// deletion of one of these finds nothing. Its text says the times `span` (an episode's:
/// those of the events it has left; else its range).
pub(crate) fn made_again(
    policy: &ConsolidationPolicy,
    (summary, event): (&Summary, &Event),
    digest: Digest,
    (children, without, span): (&[u64], &[u64], (i64, i64)),
    assertions: Vec<Assertion>,
) -> Result<EventDraft> {
    let range = (summary.start, summary.end);
    let day = policy.day_of(summary.start);
    let text = RuleSummarizer.summarize(&Chunk {
        level: summary.level,
        start: span.0,
        end: span.1,
        number: match summary.level {
            Level::Week => policy.week_of_day(day),
            Level::Day | Level::Episode => day,
        },
        digest: &digest,
        events: &[],
        // A week's digest records the days of the events left, forgotten ones too; its
        // children may name a day taken with nothing left.
        children: match (summary.level, digest.days.is_empty()) {
            (Level::Week, false) => digest.days.len(),
            _ => children.len(),
        },
    })?;
    let mut draft = Summary::draft(
        summary.level,
        range,
        children,
        text,
        &digest,
        Some(summary.seq),
        event.salience,
    );
    draft.assertions = assertions;
    if let Value::Map(m) = &mut draft.payload {
        if !without.is_empty() {
            m.insert(
                "without".to_string(),
                Value::List(without.iter().map(|s| Value::Int(*s as i64)).collect()),
            );
        }
    }
    Ok(draft)
}

/// The summaries of the store, latest per range, by the end of their range (a week after its
/// last day), then level. Every one is held with its digest: a reader that can take them one
/// at a time takes [`each_live_summary`].
pub fn summaries(store: &Store) -> Result<Vec<Summary>> {
    let mut all = Vec::new();
    each_live_summary(store, true, &mut |s| {
        all.push(s);
        Ok(true)
    })?;
    Ok(all)
}

/// Gives `visit` every live summary in [`summaries`]' order, one at a time, until it returns
/// `false`. The summary index says which are live and where each falls in the order, and each
/// is read by its number when its turn comes. Without `digests` each is read as
/// [`Summary::of_event_without_digest`] reads it. Every summary read whole and held at once,
/// as `check`, `journal list` and `consolidate --all` had read them, was 5.2 GB at 566k
/// summaries (415k events consolidated).
pub fn each_live_summary(
    store: &Store,
    digests: bool,
    visit: &mut dyn FnMut(Summary) -> Result<bool>,
) -> Result<()> {
    each_live_summary_where(store, digests, &|_| true, visit)
}

/// [`each_live_summary`] of the summaries whose range holds one of `times` (ascending): the
/// only ones the store writes that can hold an event at those times as a child (an ingested
/// summary's children are not checked against its range). The others are not read
/// (`journal list` had read all 566k summaries of a long history to place four entries).
pub fn each_live_summary_over(
    store: &Store,
    times: &[i64],
    visit: &mut dyn FnMut(Summary) -> Result<bool>,
) -> Result<()> {
    let over = |p: &Placement| {
        let first_after_start = times.partition_point(|t| *t < p.start);
        times.get(first_after_start).is_some_and(|t| *t <= p.end)
    };
    each_live_summary_where(store, false, &over, visit)
}

/// [`each_live_summary`] of the placements `wanted` keeps.
fn each_live_summary_where(
    store: &Store,
    digests: bool,
    wanted: &dyn Fn(&Placement) -> bool,
    visit: &mut dyn FnMut(Summary) -> Result<bool>,
) -> Result<()> {
    let placed = placed_summaries(store)?;
    let mut order: Vec<&Placement> = placed.live.iter().filter(|p| wanted(p)).collect();
    order.sort_unstable_by_key(|p| (p.end, p.level, p.seq));
    for at in order {
        let Some(summary) = summary_read(store, at.seq, digests)? else {
            continue;
        };
        if !visit(as_placed(store, at, summary)?)? {
            break;
        }
    }
    Ok(())
}

/// Summary `seq`, with its digest or not; `None` as [`summary_text`].
fn summary_read(store: &Store, seq: u64, digests: bool) -> Result<Option<Summary>> {
    match digests {
        true => Ok(store.event(seq)?.as_ref().and_then(Summary::of_event)),
        false => summary_without_digest(store, seq),
    }
}

/// The live summaries a consolidation wrote (its report's range of the log), ordered as
/// [`summaries`] orders them: only that range is read, where [`summaries`] reads every
/// summary of the store (seconds, for a consolidation that had nothing to do). Without
/// `digests` each is read as [`Summary::of_event_without_digest`] reads it: a tenth of the
/// memory, for a reader of their texts.
pub fn summaries_written(
    store: &Store,
    report: &ConsolidateReport,
    digests: bool,
) -> Result<Vec<Summary>> {
    summaries_written_at(store, report, digests, &|_| true)
}

/// [`summaries_written`] of the levels `keep` takes alone, the others passed over as they are
/// read: `loci consolidate` lists days and weeks, and the episodes it had read with them were
/// most of its peak (566k summaries held at 415k events).
pub fn summaries_written_at(
    store: &Store,
    report: &ConsolidateReport,
    digests: bool,
    keep: &dyn Fn(Level) -> bool,
) -> Result<Vec<Summary>> {
    let read = match digests {
        true => Summary::of_event,
        false => Summary::of_event_without_digest,
    };
    let mut written = Vec::new();
    each_event_written(store, report, &mut |ev| {
        written.extend(read(ev).filter(|s| keep(s.level)));
    })?;
    written.sort_by_key(|s| (s.end, s.level, s.seq));
    Ok(written)
}

/// Gives `each` every event of `report`'s batches that no later summary replaced, in log
/// order. Batch by batch: another writer's events may lie between two.
fn each_event_written(
    store: &Store,
    report: &ConsolidateReport,
    each: &mut dyn FnMut(&Event),
) -> Result<()> {
    let replaced = replaced_summaries(store)?;
    for &(first, last) in &report.batches {
        store.scan_log(first, |ev| {
            if ev.seq > last {
                return Ok(false);
            }
            if !replaced.contains(ev.seq) {
                each(&ev);
            }
            Ok(true)
        })?;
    }
    Ok(())
}

/// The live summaries a consolidation wrote, each with its digest, given to `visit` one at a
/// time in [`summaries_written`]'s order until it returns `false`. Only each one's place in
/// the order is held (its end, level and number), and each is read again by its number when
/// its turn comes: the list of them whole was most of `consolidate --json`'s peak (382 MB at
/// 115,000 events, the summaries with their digests).
pub fn each_summary_written(
    store: &Store,
    report: &ConsolidateReport,
    visit: &mut dyn FnMut(Summary) -> Result<bool>,
) -> Result<()> {
    let mut order = Vec::new();
    each_event_written(store, report, &mut |ev| {
        if let Some(s) = Summary::of_event_without_digest(ev) {
            order.push((s.end, s.level, s.seq));
        }
    })?;
    order.sort_unstable();
    for (_, _, seq) in order {
        if let Some(summary) = summary_read(store, seq, true)? {
            if !visit(summary)? {
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Summaries of every level at a few starts and ends (days of several lengths, so they
    /// may overlap), their sequence numbers a permutation, and each day's children a subset
    /// of the episodes.
    fn arbitrary_hierarchy() -> impl proptest::strategy::Strategy<Value = Vec<Placement>> {
        use proptest::prelude::*;
        proptest::collection::vec((0u8..3, 0i64..12, 0i64..6, any::<u64>()), 0..40)
            .prop_flat_map(|specs| {
                let seqs: Vec<u64> = (1..=specs.len() as u64).collect();
                (Just(specs), Just(seqs).prop_shuffle())
            })
            .prop_map(|(specs, seqs)| {
                let mut all: Vec<Placement> = specs
                    .iter()
                    .zip(&seqs)
                    .map(|(&(level, start, len, _), &seq)| Placement {
                        seq,
                        level: [Level::Episode, Level::Day, Level::Week][level as usize],
                        start,
                        end: start + len,
                        children: Vec::new(),
                    })
                    .collect();
                let episodes: Vec<u64> = (all.iter())
                    .filter(|p| p.level == Level::Episode)
                    .map(|p| p.seq)
                    .collect();
                for (p, &(_, _, _, mask)) in all.iter_mut().zip(&specs) {
                    if p.level == Level::Day {
                        p.children = (episodes.iter().enumerate())
                            .filter(|(i, _)| mask >> (i % 64) & 1 == 1)
                            .map(|(_, s)| *s)
                            .collect();
                    }
                }
                all
            })
    }

    /// Two keys of one summary at one level and start (a flipped bit in the end of one):
    /// the summary stays live, as [`live`] keeps it, where it had read as replaced by itself.
    #[test]
    fn a_summary_the_index_holds_twice_is_not_replaced_by_itself() {
        let at = |seq, end| SummaryEntry {
            seq,
            level: Level::Week,
            start: 0,
            end,
        };
        let reading = IndexReading::of(vec![at(4, 9), at(4, 7), at(2, 9)]);
        assert_eq!(reading.in_question, Vec::new());
        assert_eq!(reading.replaced(|_| false), vec![2]);
    }

    /// The summaries of `all` replaced as read from their index entries and the days'
    /// children, and those [`live`] leaves out of them.
    fn replaced_read_and_left_out_by_live(all: &[Placement]) -> (Vec<u64>, Vec<u64>) {
        let live_seqs: BTreeSet<u64> = live(all.to_vec()).values().map(|p| p.seq).collect();
        let left_out: BTreeSet<u64> = (all.iter().map(|p| p.seq))
            .filter(|s| !live_seqs.contains(s))
            .collect();
        let entries = (all.iter())
            .map(|p| SummaryEntry {
                seq: p.seq,
                level: p.level,
                start: p.start,
                end: p.end,
            })
            .collect();
        let named: BTreeSet<(u64, u64)> = (all.iter())
            .flat_map(|p| p.children.iter().map(|c| (p.seq, *c)))
            .collect();
        let read = IndexReading::of(entries).replaced(|p| named.contains(p));
        (read, left_out.into_iter().collect())
    }

    proptest::proptest! {
        /// The replaced summaries read from the index's entries and the children of the days
        /// in question are those [`live`] leaves out of the same summaries.
        #[test]
        fn the_replaced_summaries_are_what_live_leaves_out(all in arbitrary_hierarchy()) {
            let (read, expected) = replaced_read_and_left_out_by_live(&all);
            proptest::prop_assert_eq!(read, expected);
        }

        /// helper-127 (session 56): with a summary under a second key of the index too (a
        /// flipped bit in its level or start), live under one and replaced under the other,
        /// the replaced summaries read alone had counted it replaced, where [`live`], and so
        /// the set kept beside the placements, keeps it live: which one a process saw
        /// depended on which it read first.
        #[test]
        fn a_summary_under_two_keys_is_replaced_as_live_finds_it(
            all in arbitrary_hierarchy(),
            copies in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), 0u8..3, 0i64..12), 1..4),
        ) {
            let mut all = all;
            if !all.is_empty() {
                for (i, level, start) in copies {
                    let mut copy = all[i.index(all.len())].clone();
                    copy.level = [Level::Episode, Level::Day, Level::Week][level as usize];
                    copy.start = start;
                    all.push(copy);
                }
            }
            let (read, expected) = replaced_read_and_left_out_by_live(&all);
            proptest::prop_assert_eq!(read, expected);
        }
    }

    fn ev(seq: u64, ts: i64, kind: &str) -> Event {
        Event::from_draft(seq, 0, EventDraft::new(ts, "bot", kind))
    }

    #[test]
    fn episodes_end_at_sleep_and_at_long_pauses() {
        let events = vec![
            ev(1, 0, "A"),
            ev(2, 10, "SLEEP"),
            ev(3, 20, "A"),
            ev(4, 5000, "A"),
            ev(5, 5001, "A"),
        ];
        let parts: Vec<Vec<u64>> = episodes(&events, 3000)
            .iter()
            .map(|p| p.iter().map(|e| e.seq).collect())
            .collect();
        assert_eq!(parts, vec![vec![1, 2], vec![3], vec![4, 5]]);
    }

    #[test]
    fn a_summary_reads_back_what_was_written() {
        let digest = Digest {
            events: 3,
            trades: vec!["fletcher".into()],
            ..Digest::default()
        };
        let d = Summary::draft(
            Level::Day,
            (0, 23999),
            &[4, 5],
            "text".into(),
            &digest,
            Some(2),
            0.7,
        );
        let s = Summary::of_event(&Event::from_draft(9, 0, d)).unwrap();
        assert_eq!(
            (s.level, s.start, s.end, s.children, s.supersedes),
            (Level::Day, 0, 23999, vec![4, 5], Some(2))
        );
        assert_eq!(s.digest, digest);
    }
}
