//! Seed linking: finds the entities a question names. Every node's name and aliases enter a
//! dictionary under several keys, each with a match quality, so near-duplicate names link
//! without an LLM: the normalised form (case, punctuation, whitespace; 1.0), without a leading
//! "the" (0.9), without a parenthetical disambiguation (0.9), with initials run together
//! ("J. R. R. Tolkien" = "JRR Tolkien"; 0.85), and singular ("sticks" = "stick"; 0.7). The
//! question's word n-grams are matched longest first; a match is weighted by its quality and by
//! the node's inverse frequency (rare entities say more than hubs).

use std::collections::HashMap;

use crate::error::Result;
use crate::extract::split_disambiguation;
use crate::model::{normalize_name, singular, Node, NodeId};
use crate::store::GraphRead;
pub use crate::text::names::collapse_initials;
use crate::text::names::{keys, STOP};

/// Longest name, in words, the linker looks for.
const MAX_WORDS: usize = 10;

/// One entity the question names.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Link {
    pub node: NodeId,
    /// The words of the question that matched.
    pub phrase: String,
    /// Match quality in (0, 1].
    pub quality: f32,
    /// Inverse frequency of the node.
    pub idf: f32,
    /// quality * idf: the seed weight before normalisation.
    pub weight: f32,
    /// How many nodes the phrase links (a speaker's name titles every turn they said).
    pub shared_by: u32,
}

/// A map of the dictionary's, hashed by foldhash: SipHash was a tenth of a build, which at 20M
/// nodes takes most of a first question's minute. (No output follows a map's order.)
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The name dictionary of one store state.
pub struct EntityIndex {
    dict: Map<String, Vec<(NodeId, f32)>>,
    /// By node id (ids are dense); 0 for an id no live node has.
    idf: Vec<f32>,
    /// Live nodes the dictionary was built from.
    nodes: usize,
    /// Words of a name's parenthetical disambiguation ("Glimmer (film)" -> ["film"]).
    disambiguation: Map<NodeId, Vec<String>>,
}

/// Quality kept by a match through a disambiguation-stripped key when the question does not
/// say the disambiguating word ("Glimmer" for "Glimmer (band)" in a question about a film).
const UNCONFIRMED_DISAMBIGUATION: f32 = 0.5;

/// One word of a question: its normalised form, and whether it looks like part of a name
/// (capitalised but not the question's first word, or containing a digit).
struct QWord {
    norm: String,
    named: bool,
}

/// Splits a question into words for matching; possessives are dropped ("Murry's" -> "Murry").
fn question_words(question: &str) -> Vec<QWord> {
    let mut out = Vec::new();
    for (i, raw) in question
        .split(|c: char| c.is_whitespace() || c == '-' || c == '/')
        .filter(|w| !w.is_empty())
        .enumerate()
    {
        let w = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let w = w
            .strip_suffix("'s")
            .or_else(|| w.strip_suffix("’s"))
            .or_else(|| w.strip_suffix("'S"))
            .unwrap_or(w);
        let norm = normalize_name(w);
        if norm.is_empty() {
            continue;
        }
        let first = w.chars().next().unwrap_or(' ');
        // "I" is capitalised wherever it stands, and names nothing: counted as a name, it
        // had kept every lowercase name of a question from linking ("where can I trade
        // sticks for emeralds" had no seed).
        let pronoun_i = w == "I" || w.starts_with("I'") || w.starts_with("I’");
        let named =
            (i > 0 && first.is_uppercase() && !pronoun_i) || w.chars().any(|c| c.is_ascii_digit());
        for part in norm.split(' ') {
            out.push(QWord {
                norm: part.to_string(),
                named,
            });
        }
    }
    out
}

/// What linking reads of a store's names: the nodes a key names, each with the quality of its
/// best key of that form; a node's disambiguation words; its inverse frequency.
trait Names {
    fn named(&self, key: &str) -> Option<&[(NodeId, f32)]>;
    fn disambiguation(&self, node: NodeId) -> Option<&[String]>;
    fn idf(&self, node: NodeId) -> f32;
}

/// A node's inverse frequency among `live` nodes: rare entities say more than hubs.
fn idf_of(live: usize, degree: usize) -> f32 {
    (1.0 + live.max(1) as f32 / (1.0 + degree as f32)).ln()
}

/// The words of a name's parenthetical disambiguation ("Glimmer (film)" -> ["film"]).
fn disambiguation_of(name: &str) -> Option<Vec<String>> {
    let (_, inner) = split_disambiguation(name)?;
    let words = normalize_name(inner);
    (!words.is_empty()).then(|| words.split(' ').map(str::to_string).collect())
}

/// The quality of `node`'s best key of form `key` (over its name and aliases), if it has one.
fn key_quality(node: &Node, key: &str) -> Option<f32> {
    std::iter::once(&node.name)
        .chain(node.aliases.iter())
        .flat_map(|surface| keys(surface))
        .filter(|(k, _)| k == key)
        .map(|(_, q)| q)
        .reduce(f32::max)
}

/// The spans of `words` starting at `i` that may name an entity, longest first, with their
/// phrases. When the question writes names with capitals, only spans holding a capitalised
/// word or a number qualify: "the *director* of film Blood Street" links Blood Street, not
/// some entity called Director. An all-lowercase question links any span.
fn spans_at(words: &[QWord], cased: bool, i: usize) -> impl Iterator<Item = (usize, String)> + '_ {
    (1..=MAX_WORDS.min(words.len() - i))
        .rev()
        .filter_map(move |n| {
            let span = &words[i..i + n];
            if span.iter().all(|w| STOP.contains(&w.norm.as_str()))
                || (cased && !span.iter().any(|w| w.named))
            {
                return None;
            }
            let phrase = span
                .iter()
                .map(|w| w.norm.as_str())
                .collect::<Vec<_>>()
                .join(" ");
            Some((n, phrase))
        })
}

/// The entities named in `question`: longest matches first, without overlap; each matched
/// phrase links every node it names best.
fn link_by(names: &impl Names, question: &str) -> Vec<Link> {
    let words = question_words(question);
    let words_all: Vec<String> = words.iter().map(|w| w.norm.clone()).collect();
    let cased = words.iter().any(|w| w.named);
    let mut out: Vec<Link> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let mut matched = 0;
        for (n, phrase) in spans_at(&words, cased, i) {
            let hits = names.named(&phrase).map(|h| (h, 1.0)).or_else(|| {
                let one = singular(&phrase);
                (one != phrase)
                    .then(|| names.named(&one).map(|h| (h, 0.7)))
                    .flatten()
            });
            let Some((nodes, scale)) = hits else {
                continue;
            };
            // A name whose disambiguation the question does not echo is a weaker reading of
            // the phrase: "film Glimmer" is "Glimmer (film)" before "Glimmer (band)".
            let confirmed = |node: &NodeId| match names.disambiguation(*node) {
                Some(words) if !phrase.contains(words.join(" ").as_str()) => {
                    if words.iter().any(|d| words_all.contains(d)) {
                        1.0
                    } else {
                        UNCONFIRMED_DISAMBIGUATION
                    }
                }
                _ => 1.0,
            };
            let scored: Vec<(NodeId, f32)> =
                nodes.iter().map(|(n, q)| (*n, q * confirmed(n))).collect();
            // A phrase links the nodes it names best: an exact name beats a node that only
            // shares a weaker key (a singular, a stripped article) with it.
            let best = scored.iter().map(|(_, q)| *q).fold(0.0f32, f32::max);
            let shared_by = scored.iter().filter(|(_, q)| *q >= best).count() as u32;
            for (node, q) in scored.iter().filter(|(_, q)| *q >= best) {
                let quality = q * scale;
                let idf = names.idf(*node);
                match out.iter_mut().find(|l| l.node == *node) {
                    Some(l) if l.weight >= quality * idf => {}
                    Some(l) => {
                        l.quality = quality;
                        l.weight = quality * idf;
                        l.phrase.clone_from(&phrase);
                        l.shared_by = shared_by;
                    }
                    None => out.push(Link {
                        node: *node,
                        phrase: phrase.clone(),
                        quality,
                        idf,
                        weight: quality * idf,
                        shared_by,
                    }),
                }
            }
            matched = n;
            break;
        }
        i += matched.max(1);
    }
    out
}

impl EntityIndex {
    /// Builds the dictionary from every live node (passages by title).
    pub fn build(g: &GraphRead<'_>) -> Self {
        let live = g.adjacency().node_count();
        // A name gives one to four keys, most one: sized for one a node.
        let mut dict: Map<String, Vec<(NodeId, f32)>> =
            Map::with_capacity_and_hasher(live, Default::default());
        let mut idf = Vec::new();
        let mut nodes = 0;
        let mut disambiguation: Map<NodeId, Vec<String>> = Map::default();
        for node in g.nodes() {
            let at = node.id.0 as usize;
            if idf.len() <= at {
                idf.resize(at + 1, 0.0);
            }
            idf[at] = idf_of(live, g.adjacency().degree(node.id));
            nodes += 1;
            if let Some(words) = disambiguation_of(&node.name) {
                disambiguation.insert(node.id, words);
            }
            let surfaces = std::iter::once(&node.name).chain(node.aliases.iter());
            for surface in surfaces {
                for (key, quality) in keys(surface) {
                    let list = dict.entry(key).or_default();
                    match list.iter_mut().find(|(id, _)| *id == node.id) {
                        Some((_, q)) => *q = q.max(quality),
                        None => list.push((node.id, quality)),
                    }
                }
            }
        }
        EntityIndex {
            dict,
            idf,
            nodes,
            disambiguation,
        }
    }

    /// Nodes in the graph the dictionary was built from.
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// Inverse frequency of a node (0 for an unknown node).
    pub fn idf(&self, node: NodeId) -> f32 {
        self.idf.get(node.0 as usize).copied().unwrap_or(0.0)
    }

    /// The entities named in `question` (see [`link_by`]).
    pub fn link(&self, question: &str) -> Vec<Link> {
        link_by(self, question)
    }
}

impl Names for EntityIndex {
    fn named(&self, key: &str) -> Option<&[(NodeId, f32)]> {
        self.dict.get(key).map(Vec::as_slice)
    }
    fn disambiguation(&self, node: NodeId) -> Option<&[String]> {
        self.disambiguation.get(&node).map(Vec::as_slice)
    }
    fn idf(&self, node: NodeId) -> f32 {
        EntityIndex::idf(self, node)
    }
}

/// The names one question's spans may be, looked up in the full-text index: how a store too
/// large for a dictionary in memory links (the dictionary of 20M nodes took 3.9 GB, and 35 s
/// of a first question's 42). It holds what the dictionary would hold for those keys: the
/// index keeps each node's keys as hashes, so every node it gives has its keys made again from
/// its name and aliases, and is kept only if one is the key asked for.
pub struct QuestionNames {
    named: Map<String, Vec<(NodeId, f32)>>,
    disambiguation: Map<NodeId, Vec<String>>,
    idf: Map<NodeId, f32>,
    nodes: usize,
}

impl QuestionNames {
    /// Looks up every span of `question` (and its singular) at once: `nodes_under` gives, for
    /// each key, the nodes whose documents hold its hash (see
    /// [`crate::text::TextIndex::nodes_under_name_terms`]).
    pub fn look_up(
        g: &GraphRead<'_>,
        question: &str,
        nodes_under: impl FnOnce(&[String]) -> Result<Vec<Vec<NodeId>>>,
    ) -> Result<Self> {
        let words = question_words(question);
        let cased = words.iter().any(|w| w.named);
        let mut forms: Vec<String> = Vec::new();
        for i in 0..words.len() {
            for (_, phrase) in spans_at(&words, cased, i) {
                let one = singular(&phrase);
                if one != phrase {
                    forms.push(one);
                }
                forms.push(phrase);
            }
        }
        forms.sort_unstable();
        forms.dedup();
        let under = nodes_under(&forms)?;
        let live = g.adjacency().node_count();
        let mut read: Map<NodeId, Option<Node>> = Map::default();
        let mut out = QuestionNames {
            named: Map::default(),
            disambiguation: Map::default(),
            idf: Map::default(),
            nodes: live,
        };
        for (form, ids) in forms.into_iter().zip(under) {
            let mut list = Vec::new();
            for id in ids {
                let node = read.entry(id).or_insert_with(|| g.node(id));
                if let Some(q) = node.as_ref().and_then(|n| key_quality(n, &form)) {
                    list.push((id, q));
                }
            }
            if !list.is_empty() {
                out.named.insert(form, list);
            }
        }
        for (id, node) in read {
            let Some(node) = node else { continue };
            out.idf.insert(id, idf_of(live, g.adjacency().degree(id)));
            if let Some(words) = disambiguation_of(&node.name) {
                out.disambiguation.insert(id, words);
            }
        }
        Ok(out)
    }

    /// Live nodes in the graph the names were looked up in.
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// The entities named in the question these names were looked up for (see [`link_by`]).
    pub fn link(&self, question: &str) -> Vec<Link> {
        link_by(self, question)
    }
}

impl Names for QuestionNames {
    fn named(&self, key: &str) -> Option<&[(NodeId, f32)]> {
        self.named.get(key).map(Vec::as_slice)
    }
    fn disambiguation(&self, node: NodeId) -> Option<&[String]> {
        self.disambiguation.get(&node).map(Vec::as_slice)
    }
    fn idf(&self, node: NodeId) -> f32 {
        self.idf.get(&node).copied().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::names::keys;

    #[test]
    fn near_duplicate_keys() {
        let k = keys("The J. R. R. Tolkien Society (UK)");
        let forms: Vec<&str> = k.iter().map(|(k, _)| k.as_str()).collect();
        assert!(forms.contains(&"the j r r tolkien society uk"));
        assert!(forms.contains(&"j r r tolkien society uk"));
        assert!(forms.contains(&"the j r r tolkien society"));
        assert!(forms.contains(&"the jrr tolkien society uk"));
        assert_eq!(collapse_initials("j r r tolkien"), "jrr tolkien");
        let q = question_words("Why did John Middleton Murry's wife die in 1923?");
        let norms: Vec<&str> = q.iter().map(|w| w.norm.as_str()).collect();
        assert_eq!(
            norms,
            [
                "why",
                "did",
                "john",
                "middleton",
                "murry",
                "wife",
                "die",
                "in",
                "1923"
            ]
        );
        let named: Vec<bool> = q.iter().map(|w| w.named).collect();
        assert_eq!(
            named,
            [false, false, true, true, true, false, false, false, true]
        );
        assert!(keys("The").is_empty());
    }

    /// Names of every kind of key: articles, disambiguations, initials, plurals, aliases,
    /// names shared by several nodes, stopwords, symbols, accents.
    const NAMES: &[(&str, &[&str])] = &[
        ("The Tolkien Society", &[]),
        ("Tolkien Society", &[]),
        ("J. R. R. Tolkien", &["JRR Tolkien", "Tolkien"]),
        ("Glimmer (film)", &[]),
        ("Glimmer (band)", &["The Glimmers"]),
        ("Glimmer", &[]),
        ("Sticks", &["stick"]),
        ("Emeralds", &[]),
        ("Berries", &["Sweet Berries"]),
        ("Boxes", &[]),
        ("Blood Street", &[]),
        ("Blood Street", &[]),
        ("The", &[]),
        ("Are You Here", &[]),
        ("$", &[]),
        ("Émile Zola (writer)", &["Zola"]),
        ("U.S. Navy", &["US Navy"]),
        ("Bus", &[]),
        ("Class", &[]),
        ("1923", &[]),
    ];

    /// Questions made of the names' words and some others: each name asked about, cased and
    /// not, and word salads of a fixed pseudo-random sequence.
    fn questions() -> Vec<String> {
        let mut words: Vec<String> = ["who", "is", "the", "of", "film", "where", "band", "I"]
            .map(String::from)
            .to_vec();
        let mut out = Vec::new();
        for (name, aliases) in NAMES {
            for n in std::iter::once(name).chain(aliases.iter()) {
                out.push(format!("Who is {n}?"));
                out.push(format!("where is {}", n.to_lowercase()));
                out.push(format!("What did the {n} film say about {n}'s band"));
                words.extend(n.split(' ').map(String::from));
            }
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        for _ in 0..1500 {
            let len = 1 + next(12);
            let q: Vec<String> = (0..len)
                .map(|_| {
                    let w = &words[next(words.len())];
                    if next(3) == 0 {
                        w.to_lowercase()
                    } else {
                        w.clone()
                    }
                })
                .collect();
            out.push(q.join(" "));
        }
        out
    }

    /// Linking through the full-text index gives what the dictionary gives, link for link and
    /// in the same order (the index keeps hashes of keys: each node it gives must have its
    /// keys made again), after a rename and a retraction too.
    #[test]
    fn linking_through_the_index_links_as_the_dictionary_does() {
        use crate::model::{kinds, Assertion, EdgeUpsert, EventDraft, NodeUpsert};
        use crate::{BackendKind, Store};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
        let mut assertions: Vec<Assertion> = NAMES
            .iter()
            .enumerate()
            .map(|(i, (name, aliases))| {
                Assertion::UpsertNode(NodeUpsert {
                    key: format!("k{i}"),
                    name: Some(name.to_string()),
                    aliases: aliases.iter().map(|a| a.to_string()).collect(),
                    ..Default::default()
                })
            })
            .collect();
        // Degrees of 0 to 4, for inverse frequencies that differ.
        for i in 0..NAMES.len() {
            for j in 1..=(i % 5) {
                assertions.push(Assertion::UpsertEdge(EdgeUpsert {
                    from: format!("k{i}"),
                    relation: "NEAR".into(),
                    to: format!("k{}", (i + j) % NAMES.len()),
                    ..Default::default()
                }));
            }
        }
        let mut ev = EventDraft::new(0, "test", kinds::IMPORT);
        ev.assertions = assertions;
        store.ingest(vec![ev]).unwrap();
        let mut later = EventDraft::new(1, "test", kinds::IMPORT);
        later.assertions = vec![
            Assertion::UpsertNode(NodeUpsert {
                key: "k1".into(),
                name: Some("Renamed Society".into()),
                ..Default::default()
            }),
            Assertion::RetractNode { key: "k17".into() },
        ];
        store.ingest(vec![later]).unwrap();
        let g = store.graph_for_search();
        let dictionary = EntityIndex::build(&g);
        let mut linked = 0;
        for q in questions() {
            let names =
                QuestionNames::look_up(&g, &q, |forms| store.nodes_under_name_terms(&g, forms))
                    .unwrap();
            let links = names.link(&q);
            assert_eq!(links, dictionary.link(&q), "{q}");
            assert_eq!(names.node_count(), dictionary.node_count());
            linked += usize::from(!links.is_empty());
        }
        assert!(linked > 1000, "{linked} questions linked");
        // The old name is gone from the index, the new one is there.
        let gone = QuestionNames::look_up(&g, "tolkien society", |forms| {
            store.nodes_under_name_terms(&g, forms)
        })
        .unwrap();
        assert!(gone
            .link("tolkien society")
            .iter()
            .all(|l| l.node != NodeId(1)));
        let renamed = QuestionNames::look_up(&g, "renamed society", |forms| {
            store.nodes_under_name_terms(&g, forms)
        })
        .unwrap();
        assert_eq!(renamed.link("renamed society")[0].node, NodeId(1));
    }
}
