//! Seed linking: finds the entities a question names. Every node's name and aliases enter a
//! dictionary under several keys, each with a match quality, so near-duplicate names link
//! without an LLM: the normalised form (case, punctuation, whitespace; 1.0), without a leading
//! "the" (0.9), without a parenthetical disambiguation (0.9), with initials run together
//! ("J. R. R. Tolkien" = "JRR Tolkien"; 0.85), and singular ("sticks" = "stick"; 0.7). The
//! question's word n-grams are matched longest first; a match is weighted by its quality and by
//! the node's inverse frequency (rare entities say more than hubs).

use std::collections::HashMap;

use crate::extract::{split_disambiguation, strip_disambiguation};
use crate::model::{normalize_name, singular, NodeId};
use crate::store::GraphRead;

/// Longest name, in words, the linker looks for.
const MAX_WORDS: usize = 10;

/// Question words that never link on their own.
const STOP: &[&str] = &[
    "a", "an", "the", "who", "whom", "whose", "what", "which", "where", "when", "why", "how", "is",
    "was", "are", "were", "be", "been", "did", "do", "does", "of", "in", "on", "at", "to", "for",
    "from", "by", "with", "and", "or", "as", "that", "this", "it", "its", "he", "she", "his",
    "her", "their", "they", "first", "same", "both", "many", "much", "there", "name", "born",
    "died", "die", "place", "country", "city", "film", "movie", "song", "person", "year", "date",
    "one", "other", "than", "more", "most", "i", "me", "my", "can", "could", "would",
];

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

/// "j r r tolkien" -> "jrr tolkien": runs of single letters become one word.
pub fn collapse_initials(norm: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run = String::new();
    for w in norm.split(' ') {
        if w.chars().count() == 1 && w.chars().all(char::is_alphabetic) {
            run.push_str(w);
        } else {
            if !run.is_empty() {
                out.push(std::mem::take(&mut run));
            }
            out.push(w.to_string());
        }
    }
    if !run.is_empty() {
        out.push(run);
    }
    out.join(" ")
}

/// The dictionary keys of a surface form, with their qualities.
fn keys(surface: &str) -> Vec<(String, f32)> {
    let norm = normalize_name(surface);
    let mut out = vec![(norm.clone(), 1.0)];
    if let Some(rest) = norm.strip_prefix("the ") {
        out.push((rest.to_string(), 0.9));
    }
    let stripped = normalize_name(strip_disambiguation(surface));
    if stripped != norm {
        out.push((stripped, 0.9));
    }
    let collapsed = collapse_initials(&norm);
    if collapsed != norm {
        out.push((collapsed, 0.85));
    }
    let one = singular(&norm);
    if one != norm {
        out.push((one, 0.7));
    }
    out.retain(|(k, _)| !k.is_empty() && !(STOP.contains(&k.as_str())) && k.len() > 1);
    out
}

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
        let n = live.max(1) as f32;
        for node in g.nodes() {
            let degree = g.adjacency().degree(node.id) as f32;
            let at = node.id.0 as usize;
            if idf.len() <= at {
                idf.resize(at + 1, 0.0);
            }
            idf[at] = (1.0 + n / (1.0 + degree)).ln();
            nodes += 1;
            if let Some((_, inner)) = split_disambiguation(&node.name) {
                let words = normalize_name(inner);
                if !words.is_empty() {
                    disambiguation.insert(node.id, words.split(' ').map(str::to_string).collect());
                }
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

    /// The entities named in `question`: longest matches first, without overlap; each matched
    /// phrase links every node it names.
    ///
    /// When the question writes names with capitals, only spans holding a capitalised word or a
    /// number link: "the *director* of film Blood Street" links Blood Street, not some entity
    /// called Director. An all-lowercase question links any span.
    pub fn link(&self, question: &str) -> Vec<Link> {
        let words = question_words(question);
        let words_all: Vec<String> = words.iter().map(|w| w.norm.clone()).collect();
        let cased = words.iter().any(|w| w.named);
        let mut out: Vec<Link> = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let mut matched = 0;
            for n in (1..=MAX_WORDS.min(words.len() - i)).rev() {
                let span = &words[i..i + n];
                if span.iter().all(|w| STOP.contains(&w.norm.as_str()))
                    || (cased && !span.iter().any(|w| w.named))
                {
                    continue;
                }
                let phrase = span
                    .iter()
                    .map(|w| w.norm.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                let hits = self.dict.get(&phrase).map(|h| (h, 1.0)).or_else(|| {
                    let one = singular(&phrase);
                    (one != phrase)
                        .then(|| self.dict.get(&one).map(|h| (h, 0.7)))
                        .flatten()
                });
                if let Some((nodes, scale)) = hits {
                    // A name whose disambiguation the question does not echo is a weaker reading
                    // of the phrase: "film Glimmer" is "Glimmer (film)" before "Glimmer (band)".
                    let confirmed = |node: &NodeId| match self.disambiguation.get(node) {
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
                    // A phrase links the nodes it names best: an exact name beats a node that
                    // only shares a weaker key (a singular, a stripped article) with it.
                    let best = scored.iter().map(|(_, q)| *q).fold(0.0f32, f32::max);
                    let shared_by = scored.iter().filter(|(_, q)| *q >= best).count() as u32;
                    for (node, q) in scored.iter().filter(|(_, q)| *q >= best) {
                        let quality = q * scale;
                        let idf = self.idf(*node);
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
            }
            i += matched.max(1);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
