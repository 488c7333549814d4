//! A graph from plain text, without an LLM: for every Passage node, entity nodes and
//! `passage -MENTIONS-> entity` edges for
//! - the passage's own title (confidence 1.0),
//! - other passages' titles found in its text (0.9): the links that let a question about one
//!   page reach the page of something it mentions,
//! - capitalised spans, i.e. probable proper names (0.6),
//! - years (0.3; they connect many passages, so they carry little weight).
//!
//! Each passage's mentions are asserted by one EXTRACTION event whose evidence is the passage
//! id, so every edge has its provenance. Entities are keyed `ent:<normalised name>`, the key the
//! triple loader uses, so extracted and given entities coincide.

use std::collections::{HashMap, HashSet};

use crate::error::Result;
use crate::model::{
    kinds, labels, normalize_name, relations, Assertion, EdgeUpsert, EventDraft, NodeUpsert, Props,
    Value,
};
use crate::store::Store;

/// Longest title, in words, looked for inside passage text.
const MAX_TITLE_WORDS: usize = 8;

/// Words that start sentences or join names but are not names themselves.
const STOP: &[&str] = &[
    "a", "an", "the", "he", "she", "it", "its", "his", "her", "they", "their", "this", "that",
    "these", "those", "in", "on", "at", "of", "for", "to", "from", "by", "with", "and", "or",
    "but", "as", "after", "before", "during", "since", "when", "while", "there", "here", "we",
    "you", "i", "is", "was", "are", "were", "be", "been", "also", "however", "although", "born",
    "died", "who", "which", "what", "where", "some", "many", "most", "one", "two", "both", "all",
    "if", "then", "than", "so", "not", "no", "yes", "film", "series", "album", "song",
];

/// Lowercase words that may sit inside a name ("Prince of Orange", "Leonardo da Vinci").
const CONNECTORS: &[&str] = &[
    "of", "de", "da", "del", "la", "le", "von", "van", "der", "den", "du", "y", "the", "and",
];

/// A mention: entity key, surface form, how it was found, the words around it.
type Found = (String, String, Via, String);

/// How a mention was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Via {
    Title,
    TitleMatch,
    Capitalised,
    Year,
}

impl Via {
    fn confidence(self) -> f32 {
        match self {
            Via::Title => 1.0,
            Via::TitleMatch => 0.9,
            Via::Capitalised => 0.6,
            Via::Year => 0.3,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Via::Title => "title",
            Via::TitleMatch => "title-match",
            Via::Capitalised => "capitalised",
            Via::Year => "year",
        }
    }
}

/// Words on each side of a mention kept as its context.
const CONTEXT_BEFORE: usize = 5;
const CONTEXT_AFTER: usize = 3;

/// A word of the text with its normalised form.
struct Word<'a> {
    raw: &'a str,
    norm: String,
    capitalised: bool,
    sentence_start: bool,
    /// Punctuation right before or after the word ends any name running through it.
    break_before: bool,
    break_after: bool,
}

fn words(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut sentence_start = true;
    for raw in text.split(|c: char| c.is_whitespace() || c == '/' || c == '—' || c == '–') {
        let trimmed = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if trimmed.is_empty() {
            if raw.contains(['.', '!', '?']) {
                sentence_start = true;
            }
            if let Some(last) = out.last_mut() {
                let w: &mut Word = last;
                w.break_after = true;
            }
            continue;
        }
        // "Billy's" and "Lee Hall's" name Billy and Lee Hall.
        let trimmed = trimmed
            .strip_suffix("'s")
            .or_else(|| trimmed.strip_suffix("’s"))
            .unwrap_or(trimmed);
        let norm = normalize_name(trimmed);
        let first = trimmed.chars().next().unwrap_or(' ');
        let lead = raw.chars().next().is_some_and(|c| !c.is_alphanumeric());
        let tail = raw.chars().last().is_some_and(|c| !c.is_alphanumeric()) || raw.ends_with("'s");
        out.push(Word {
            raw: trimmed,
            norm,
            capitalised: first.is_uppercase() || first.is_ascii_digit(),
            sentence_start,
            break_before: lead,
            break_after: tail && !(raw.ends_with('.') && is_initial(trimmed)),
        });
        // A word followed by sentence punctuation ends the sentence ("1953." but not "U.S").
        sentence_start = raw.ends_with(['.', '!', '?']) && !is_initial(trimmed);
    }
    out
}

/// The words around `ws[i..j]`, as the mention's context.
fn context(ws: &[Word<'_>], i: usize, j: usize) -> String {
    let from = i.saturating_sub(CONTEXT_BEFORE);
    let to = (j + CONTEXT_AFTER).min(ws.len());
    ws[from..to]
        .iter()
        .map(|w| w.raw)
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_initial(w: &str) -> bool {
    w.chars().count() == 1
}

/// Prefix of the keys of entities named by text (extraction, triples): their key is their name.
pub const ENTITY_KEY_PREFIX: &str = "ent:";

fn title_key(title: &str) -> String {
    format!("{ENTITY_KEY_PREFIX}{}", normalize_name(title))
}

/// The title without a trailing parenthetical disambiguation: "Inherent Vice (Film)" ->
/// "Inherent Vice".
pub fn strip_disambiguation(title: &str) -> &str {
    match split_disambiguation(title) {
        Some((name, _)) => name,
        None => title,
    }
}

/// The title's name and its parenthetical disambiguation, both trimmed: " Beyoncé (album) " ->
/// ("Beyoncé", "album"). Both come from offsets into the same string, so callers never need to
/// slice one string by a length measured on another (a trimmed copy is shorter, and the
/// difference can land inside a multi-byte character).
pub fn split_disambiguation(title: &str) -> Option<(&str, &str)> {
    let title = title.trim_end();
    let open = title.rfind(" (")?;
    let inner = title.strip_suffix(')')?.get(open + 2..)?;
    Some((title[..open].trim(), inner.trim()))
}

/// Builds the EXTRACTION events for every passage in `store` (none for a store without
/// passages). Mentions the store already holds are not asserted again; those this extractor
/// made that a passage no longer makes (its text replaced, a title gone) are retracted
/// ([`stale_mentions`]).
pub fn extract_mentions(store: &Store) -> Result<Vec<EventDraft>> {
    let (passages, existing) = read_passages(store);
    let titles = title_index(&passages);
    let mut out = Vec::new();
    for p in &passages {
        let found = find_mentions(p, &titles);
        let stale = stale_mentions(store, p, &found, &existing)?;
        out.extend(extraction_event(p, found, &existing, stale));
    }
    Ok(out)
}

/// The entities passage `p` has a `MENTIONS` edge to (`existing`) that `found` no longer has,
/// where only this extractor's events (and summaries restating them) assert the edge: a
/// mention given by other input (a triple's) stays. A passage replaced (`ingest --replace`)
/// kept every mention of its old text, and they never decayed.
fn stale_mentions(
    store: &Store,
    p: &Passage,
    found: &Mentions,
    existing: &Held,
) -> Result<Vec<String>> {
    let mut stale = Vec::new();
    let mut held: Vec<&String> = existing
        .get(&p.key)
        .into_iter()
        .flatten()
        .filter(|ent| !found.seen.contains(*ent))
        .collect();
    // In key order: the event's assertions are the same whatever the set's order.
    held.sort();
    for ent in held {
        let Some(edge) = store.edge_between(&p.key, relations::MENTIONS, ent)? else {
            continue;
        };
        let mut by_this_extractor = false;
        let mut by_other_input = false;
        for seq in &edge.evidence {
            let Some(ev) = store.event(*seq)? else {
                continue;
            };
            if ev.kind == crate::dynamics::consolidate::SUMMARY {
                continue;
            }
            let ours = ev.kind == kinds::EXTRACTION
                && matches!(&ev.payload, Value::Map(m)
                    if m.get("extractor").and_then(Value::as_str) == Some("text"));
            by_this_extractor |= ours;
            by_other_input |= !ours;
        }
        if by_this_extractor && !by_other_input {
            stale.push(ent.clone());
        }
    }
    Ok(stale)
}

/// A passage node: its key, title and text.
struct Passage {
    key: String,
    title: String,
    text: String,
}

/// The entities each passage (by key) has a `MENTIONS` edge to.
type Held = HashMap<String, HashSet<String>>;

/// The passages of `store`, and the mentions it holds already, so that given mentions (e.g. a
/// triple's) keep their confidence.
fn read_passages(store: &Store) -> (Vec<Passage>, Held) {
    let g = store.graph();
    let passages: Vec<Passage> = g
        .node_ids()
        .filter(|id| g.node_label(*id) == Some(labels::PASSAGE))
        .filter_map(|id| g.node(id))
        .map(|n| Passage {
            text: n
                .props
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            key: n.key,
            title: n.name,
        })
        .collect();
    let existing = passages
        .iter()
        .filter_map(|p| g.node_id(&p.key).map(|id| (&p.key, id)))
        .flat_map(|(key, id)| {
            g.adjacency()
                .entries(id)
                .filter(|e| {
                    !e.is_incoming() && g.relation_name(e.relation()) == relations::MENTIONS
                })
                .filter_map(|e| g.node(e.neighbor()).map(|n| (key.clone(), n.key.clone())))
                .collect::<Vec<_>>()
        })
        .fold(Held::new(), |mut held, (passage, ent)| {
            held.entry(passage).or_default().insert(ent);
            held
        });
    (passages, existing)
}

/// Every title, by normalised full form and by its form without disambiguation: the
/// entities (title key, title) each form names.
type Titles = HashMap<String, Vec<(String, String)>>;

fn title_index(passages: &[Passage]) -> Titles {
    let mut titles = Titles::new();
    for p in passages {
        let entry = (title_key(&p.title), p.title.clone());
        for form in [p.title.as_str(), strip_disambiguation(&p.title)] {
            let norm = normalize_name(form);
            if norm.is_empty()
                || (!norm.contains(' ') && (norm.len() < 3 || STOP.contains(&norm.as_str())))
            {
                continue;
            }
            let list = titles.entry(norm).or_default();
            if !list.contains(&entry) {
                list.push(entry.clone());
            }
        }
    }
    titles
}

/// The mentions found in one passage, each entity once, in the order found.
#[derive(Default)]
struct Mentions {
    found: Vec<Found>,
    /// The share of the confidence an ambiguous title match gives each of its readings.
    shares: HashMap<String, f32>,
    seen: HashSet<String>,
}

impl Mentions {
    fn add(&mut self, ent: String, surface: &str, via: Via, ctx: String) {
        // A name too long to be a key (see `model::MAX_KEY_BYTES`) is not an entity worth
        // linking; skipping it keeps the passage's other mentions.
        let fits = ent.len() <= crate::model::MAX_KEY_BYTES
            && surface.len() <= crate::model::MAX_NAME_BYTES;
        if fits && self.seen.insert(ent.clone()) {
            self.found.push((ent, surface.to_string(), via, ctx));
        }
    }
}

/// What passage `p` mentions: its own title, then titles of other passages, capitalised
/// spans not already covered by a title, and years.
fn find_mentions(p: &Passage, titles: &Titles) -> Mentions {
    let mut m = Mentions::default();
    if !normalize_name(&p.title).is_empty() {
        m.add(title_key(&p.title), &p.title, Via::Title, String::new());
    }
    let ws = words(&p.text);
    let covered = title_matches(&ws, &p.title, titles, &mut m);
    capitalised_spans(&ws, &covered, &mut m);
    years(&ws, &mut m);
    m
}

/// Titles of other passages in `ws`, longest match first; gives which words they cover.
fn title_matches(ws: &[Word<'_>], own_title: &str, titles: &Titles, m: &mut Mentions) -> Vec<bool> {
    let mut covered = vec![false; ws.len()];
    let mut i = 0;
    while i < ws.len() {
        let mut matched = 0;
        if ws[i].capitalised {
            for n in (1..=MAX_TITLE_WORDS.min(ws.len() - i)).rev() {
                let phrase = ws[i..i + n]
                    .iter()
                    .map(|w| w.norm.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                if let Some(list) = titles.get(&phrase) {
                    let surface = ws[i..i + n]
                        .iter()
                        .map(|w| w.raw)
                        .collect::<Vec<_>>()
                        .join(" ");
                    // An ambiguous match ("Glimmer" for "Glimmer (film)" and "Glimmer
                    // (band)") means the passage's own subject when it is one of them;
                    // otherwise each reading gets an equal share of the confidence.
                    let own = title_key(own_title);
                    let readings: Vec<&String> = if list.iter().any(|(e, _)| *e == own) {
                        vec![&own]
                    } else {
                        list.iter().map(|(e, _)| e).collect()
                    };
                    let share = 1.0 / readings.len() as f32;
                    for ent in readings {
                        m.add(
                            ent.clone(),
                            &surface,
                            Via::TitleMatch,
                            context(ws, i, i + n),
                        );
                        m.shares.insert(ent.clone(), share);
                    }
                    matched = n;
                    break;
                }
            }
        }
        if matched > 0 {
            covered[i..i + matched].iter_mut().for_each(|c| *c = true);
            i += matched;
        } else {
            i += 1;
        }
    }
    covered
}

/// Capitalised spans of `ws` not already covered by a title (a connector continues a name
/// only when a capitalised word follows it).
fn capitalised_spans(ws: &[Word<'_>], covered: &[bool], m: &mut Mentions) {
    let mut i = 0;
    while i < ws.len() {
        let w = &ws[i];
        let starts = !covered[i]
            && w.raw.chars().next().is_some_and(char::is_uppercase)
            && !(STOP.contains(&w.norm.as_str()));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < ws.len() && !covered[j] && !ws[j - 1].break_after && !ws[j].break_before {
            let x = &ws[j];
            let capital = x.raw.chars().next().is_some_and(char::is_uppercase) && !x.sentence_start;
            let connector = CONNECTORS.contains(&x.raw)
                && j + 1 < ws.len()
                && ws[j + 1].raw.chars().next().is_some_and(char::is_uppercase);
            if !(capital || connector) {
                break;
            }
            j += 1;
        }
        let single_sentence_start = j == i + 1 && w.sentence_start;
        if !single_sentence_start && w.norm.len() > 1 {
            let surface = ws[i..j].iter().map(|w| w.raw).collect::<Vec<_>>().join(" ");
            let norm = normalize_name(&surface);
            if norm.len() > 2 {
                m.add(
                    format!("ent:{norm}"),
                    &surface,
                    Via::Capitalised,
                    context(ws, i, j),
                );
            }
        }
        i = j;
    }
}

/// Years (four digits, 1000 to 2100) in `ws`.
fn years(ws: &[Word<'_>], m: &mut Mentions) {
    for (i, w) in ws.iter().enumerate() {
        if w.raw.len() == 4 && w.raw.chars().all(|c| c.is_ascii_digit()) {
            if let Ok(y) = w.raw.parse::<u32>() {
                if (1000..=2100).contains(&y) {
                    m.add(format!("date:{y}"), w.raw, Via::Year, context(ws, i, i + 1));
                }
            }
        }
    }
}

/// The EXTRACTION event of passage `p`'s mentions that the store does not hold yet, and of the
/// retractions of its `stale` ones (none when there is neither).
fn extraction_event(
    p: &Passage,
    m: Mentions,
    existing: &Held,
    stale: Vec<String>,
) -> Option<EventDraft> {
    let key = &p.key;
    let mut ev = EventDraft::new(0, "extractor", kinds::EXTRACTION);
    ev.evidence = vec![key.clone()];
    ev.payload = Value::Map(Props::from([
        ("doc".to_string(), Value::from(key.as_str())),
        ("extractor".to_string(), Value::from("text")),
    ]));
    for (ent, surface, via, ctx) in m.found {
        let confidence = via.confidence() * m.shares.get(&ent).copied().unwrap_or(1.0);
        if existing.get(key).is_some_and(|held| held.contains(&ent)) {
            continue;
        }
        let node = match via {
            Via::Title => {
                let stripped = strip_disambiguation(&surface);
                NodeUpsert {
                    key: ent.clone(),
                    label: Some(labels::ENTITY.into()),
                    aliases: if stripped != surface && !stripped.is_empty() {
                        vec![stripped.to_string()]
                    } else {
                        Vec::new()
                    },
                    name: Some(surface),
                    ..Default::default()
                }
            }
            Via::Year => NodeUpsert {
                key: ent.clone(),
                label: Some("Date".into()),
                name: Some(surface),
                ..Default::default()
            },
            // Names found in text never rename an entity: they become aliases (the first one
            // names a new entity).
            Via::TitleMatch | Via::Capitalised => NodeUpsert {
                key: ent.clone(),
                label: Some(labels::ENTITY.into()),
                aliases: vec![surface],
                ..Default::default()
            },
        };
        ev.assertions.push(Assertion::UpsertNode(node));
        ev.assertions.push(Assertion::UpsertEdge(EdgeUpsert {
            from: key.clone(),
            relation: relations::MENTIONS.into(),
            to: ent,
            confidence: Some(confidence),
            props: if ctx.is_empty() {
                Props::from([("via".to_string(), Value::from(via.name()))])
            } else {
                Props::from([
                    ("via".to_string(), Value::from(via.name())),
                    ("context".to_string(), Value::Str(ctx)),
                ])
            },
            ..Default::default()
        }));
    }
    ev.assertions
        .extend(stale.into_iter().map(|to| Assertion::RetractEdge {
            from: key.clone(),
            relation: relations::MENTIONS.into(),
            to,
        }));
    (!ev.assertions.is_empty()).then_some(ev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_know_sentences_and_capitals() {
        let ws =
            words("Warbeck was born in Southampton, Hampshire. He wrote scores for the U.S. Army.");
        let raw: Vec<&str> = ws.iter().map(|w| w.raw).collect();
        assert_eq!(
            raw[..6],
            ["Warbeck", "was", "born", "in", "Southampton", "Hampshire"]
        );
        assert!(ws[0].sentence_start && !ws[4].sentence_start);
        assert!(ws[6].sentence_start, "He starts a sentence");
        assert_eq!(
            strip_disambiguation("Inherent Vice (Film)"),
            "Inherent Vice"
        );
        assert_eq!(strip_disambiguation("Fox (band)"), "Fox");
        assert_eq!(strip_disambiguation("Plain"), "Plain");
        assert_eq!(
            split_disambiguation(" Beyoncé (album) "),
            Some(("Beyoncé", "album"))
        );
        for odd in ["()", " ( ) ", " (", "(é)", "é (", "🎵 (🎶)"] {
            let _ = split_disambiguation(odd);
            let _ = strip_disambiguation(odd);
        }
    }
}

/// The key under which near-duplicate entity names meet: normalised (case, punctuation,
/// whitespace), without a leading "the", initials run together, and, for names written in
/// lowercase only (common nouns), singular. Capitalised names keep their plural form: "Williams"
/// is not "William".
pub fn canonical_name(name: &str) -> String {
    let norm = normalize_name(name);
    let norm = norm.strip_prefix("the ").unwrap_or(&norm).to_string();
    let collapsed = crate::text::names::collapse_initials(&norm);
    if name.chars().any(char::is_uppercase) {
        collapsed
    } else {
        crate::model::singular(&collapsed)
    }
}

/// SAME_AS edges between entities whose names share a [`canonical_name`] (and are both
/// capitalised or both lowercase), so
/// that noisy extractions of one thing ("The Beatles", "Beatles", "the beatles") connect in
/// the graph. Each group is joined to its first member (lowest id) by one ALIAS event.
/// Only name-keyed entities take part (passages and nodes with keys of their own are left
/// out); existing SAME_AS edges are not re-asserted.
pub fn alias_links(store: &Store) -> Result<Vec<EventDraft>> {
    let g = store.graph();
    let same_as = g.relation_id(relations::SAME_AS);
    let mut groups: HashMap<String, Vec<(crate::model::NodeId, String)>> = HashMap::new();
    // Only nodes keyed by their name (`ent:<name>`, as text extraction and triples key them)
    // can be noisy copies of one thing. A node with a key of its own from structured input
    // (`npc:fletcher:0`, `npc:fletcher:1`) is distinct by that key, whatever it is called.
    let entities = g
        .node_ids()
        .filter(|id| {
            g.node_key(*id)
                .is_some_and(|k| k.starts_with(ENTITY_KEY_PREFIX))
        })
        .filter_map(|id| g.node(id));
    for n in entities {
        // Names only: aliases gathered from text can be shared by different things ("Glimmer"
        // for the film and for the band) and would chain them together. Numbers are dates or
        // amounts, never near-duplicates of each other. A capitalised name and a lowercase one
        // are a proper noun and a common noun ("The Doctor", "doctor"), so the case class is
        // part of the key.
        let key = canonical_name(&n.name);
        if key.len() <= 2 || key.chars().all(|c| c.is_ascii_digit() || c == ' ') {
            continue;
        }
        let class = if n.name.chars().any(char::is_uppercase) {
            "N"
        } else {
            "n"
        };
        groups
            .entry(format!("{class}:{key}"))
            .or_default()
            .push((n.id, n.key.clone()));
    }
    let mut pairs: Vec<(String, String, String)> = Vec::new();
    let mut seen = HashSet::new();
    let mut sorted: Vec<_> = groups.into_iter().filter(|(_, v)| v.len() > 1).collect();
    sorted.sort();
    for (key, mut members) in sorted {
        members.sort();
        members.dedup();
        let (head_id, head) = members[0].clone();
        for (id, member) in members.into_iter().skip(1) {
            let linked = same_as.is_some_and(|rel| {
                g.adjacency()
                    .entries(id)
                    .any(|e| e.relation() == rel && e.neighbor() == head_id)
            });
            if !linked && seen.insert((member.clone(), head.clone())) {
                pairs.push((member, head.clone(), key.clone()));
            }
        }
    }
    drop(g);
    if pairs.is_empty() {
        return Ok(Vec::new());
    }
    let mut ev = EventDraft::new(0, "extractor", kinds::EXTRACTION);
    ev.payload = Value::Map(Props::from([(
        "extractor".to_string(),
        Value::from("aliases"),
    )]));
    ev.assertions = pairs
        .into_iter()
        .map(|(from, to, key)| {
            Assertion::UpsertEdge(EdgeUpsert {
                from,
                relation: relations::SAME_AS.into(),
                to,
                confidence: Some(0.8),
                props: Props::from([("key".to_string(), Value::Str(key))]),
                ..Default::default()
            })
        })
        .collect();
    Ok(vec![ev])
}

#[cfg(test)]
mod alias_tests {
    use super::canonical_name;

    #[test]
    fn canonical_names() {
        assert_eq!(
            canonical_name("The Beatles"),
            canonical_name("the  Beatles.")
        );
        assert_ne!(canonical_name("The Beatles"), canonical_name("beatle"));
        assert_eq!(
            canonical_name("J. R. R. Tolkien"),
            canonical_name("JRR Tolkien")
        );
        assert_ne!(canonical_name("Williams"), canonical_name("William"));
        assert_eq!(canonical_name("sticks"), canonical_name("stick"));
    }
}
