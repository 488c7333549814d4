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
use crate::text::TermHits;

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
type Set<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

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

/// A node's link keys: each key of its name and aliases once, with its best quality. The
/// dictionary's entries for the node, and what a node the index gives is checked against.
fn best_keys(node: &Node) -> Vec<(String, f32)> {
    let mut out: Vec<(String, f32)> = Vec::new();
    for surface in std::iter::once(&node.name).chain(node.aliases.iter()) {
        for (key, quality) in keys(surface) {
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, q)) => *q = q.max(quality),
                None => out.push((key, quality)),
            }
        }
    }
    out
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
    // Where each node's link is in `out`: a name that titles thousands of nodes (a speaker's,
    // on every turn they said) made finding them there quadratic.
    let mut at: Map<NodeId, usize> = Map::default();
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
                // `at` holds only positions pushed below, and `out` never shrinks: in bounds.
                match at.get(node).map(|&k| &mut out[k]) {
                    Some(l) if l.weight >= quality * idf => {}
                    Some(l) => {
                        l.quality = quality;
                        l.weight = quality * idf;
                        l.phrase.clone_from(&phrase);
                        l.shared_by = shared_by;
                    }
                    None => {
                        at.insert(*node, out.len());
                        out.push(Link {
                            node: *node,
                            phrase: phrase.clone(),
                            quality,
                            idf,
                            weight: quality * idf,
                            shared_by,
                        });
                    }
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
            for (key, quality) in best_keys(&node) {
                dict.entry(key).or_default().push((node.id, quality));
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
/// of a first question's 42). It holds what the dictionary would hold for those keys, as long
/// as the index is at the graph's position: the index keeps each node's keys as hashes, so
/// every node it gives has its keys made again from its name and aliases, and is kept only
/// under those. (A node whose document is behind the graph, as after a failed index update
/// until the next open, links by the keys both hold.)
pub struct QuestionNames {
    question: String,
    named: Map<String, Vec<(NodeId, f32)>>,
    disambiguation: Map<NodeId, Vec<String>>,
    idf: Map<NodeId, f32>,
    nodes: usize,
}

impl QuestionNames {
    /// Looks up every span of `question` (and its singular) at once: `nodes_under` gives the
    /// nodes whose documents hold each span's hash (see `Store::nodes_under_name_terms`).
    pub(crate) fn look_up(
        g: &GraphRead<'_>,
        question: &str,
        nodes_under: impl FnOnce(&[String]) -> Result<TermHits>,
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
        let hits = nodes_under(&forms)?;
        // Each list's forms by their text, to file each node of the list under those of its
        // keys that are among them: one pass over a list however many forms share its hash.
        let mut forms_of_list: Vec<Set<&str>> = vec![Set::default(); hits.nodes.len()];
        for (form, &list) in forms.iter().zip(&hits.of_form) {
            // `of_form` indexes `nodes` (`TermHits`): there is always such a list.
            if let Some(set) = forms_of_list.get_mut(list) {
                set.insert(form.as_str());
            }
        }
        let live = g.adjacency().node_count();
        let mut out = QuestionNames {
            question: question.to_string(),
            named: Map::default(),
            disambiguation: Map::default(),
            idf: Map::default(),
            nodes: live,
        };
        // Each node's keys, made once: only what linking reads of it is kept.
        let mut keys_of: Map<NodeId, Vec<(String, f32)>> = Map::default();
        for (ids, forms) in hits.nodes.iter().zip(&forms_of_list) {
            for &id in ids {
                let keys = keys_of.entry(id).or_insert_with(|| {
                    let Some(node) = g.node(id) else {
                        return Vec::new();
                    };
                    out.idf.insert(id, idf_of(live, g.adjacency().degree(id)));
                    if let Some(words) = disambiguation_of(&node.name) {
                        out.disambiguation.insert(id, words);
                    }
                    best_keys(&node)
                });
                for (key, quality) in keys.iter() {
                    if forms.contains(key.as_str()) {
                        out.named
                            .entry(key.clone())
                            .or_default()
                            .push((id, *quality));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Live nodes in the graph the names were looked up in.
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// The entities named in the question these names were looked up for (see [`link_by`]).
    pub fn link(&self) -> Vec<Link> {
        link_by(self, &self.question)
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

    /// Links `question` through the index of `store`.
    fn through_the_index(store: &crate::Store, question: &str) -> Vec<Link> {
        let g = store.graph_for_search();
        QuestionNames::look_up(&g, question, |forms| {
            store.nodes_under_name_terms(&g, forms)
        })
        .unwrap()
        .link()
    }

    /// Asserts that every question links the same through the index of `store` as through a
    /// dictionary of it; how many questions linked anything.
    fn assert_both_ways_link_alike(store: &crate::Store) -> usize {
        let g = store.graph_for_search();
        let dictionary = EntityIndex::build(&g);
        let mut linked = 0;
        for q in questions() {
            let names =
                QuestionNames::look_up(&g, &q, |forms| store.nodes_under_name_terms(&g, forms))
                    .unwrap();
            let links = names.link();
            assert_eq!(links, dictionary.link(&q), "{q}");
            assert_eq!(names.node_count(), dictionary.node_count());
            linked += usize::from(!links.is_empty());
        }
        linked
    }

    /// Linking through the full-text index gives what the dictionary gives, link for link and
    /// in the same order (the index keeps hashes of keys: each node it gives must have its
    /// keys made again): after a rename, a retraction, a new alias, a deletion that gives
    /// every id anew, and a reopen.
    #[test]
    fn linking_through_the_index_links_as_the_dictionary_does() {
        use crate::model::{kinds, Assertion, EdgeUpsert, EventDraft, NodeUpsert};
        use crate::{BackendKind, DeleteRequest, Store};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
        let event = |assertion: Assertion| {
            let mut ev = EventDraft::new(0, "test", kinds::IMPORT);
            ev.assertions = vec![assertion];
            ev
        };
        // An event a node and an edge, so that a deletion of one node leaves the others.
        let mut events: Vec<EventDraft> = NAMES
            .iter()
            .enumerate()
            .map(|(i, (name, aliases))| {
                event(Assertion::UpsertNode(NodeUpsert {
                    key: format!("k{i}"),
                    name: Some(name.to_string()),
                    aliases: aliases.iter().map(|a| a.to_string()).collect(),
                    ..Default::default()
                }))
            })
            .collect();
        // Degrees of 0 to 4, for inverse frequencies that differ.
        for i in 0..NAMES.len() {
            for j in 1..=(i % 5) {
                events.push(event(Assertion::UpsertEdge(EdgeUpsert {
                    from: format!("k{i}"),
                    relation: "NEAR".into(),
                    to: format!("k{}", (i + j) % NAMES.len()),
                    ..Default::default()
                })));
            }
        }
        store.ingest(events).unwrap();
        assert!(assert_both_ways_link_alike(&store) > 1000);
        store
            .ingest(vec![
                event(Assertion::UpsertNode(NodeUpsert {
                    key: "k1".into(),
                    name: Some("Renamed Society".into()),
                    ..Default::default()
                })),
                event(Assertion::RetractNode { key: "k17".into() }),
                event(Assertion::UpsertNode(NodeUpsert {
                    key: "k9".into(),
                    aliases: vec!["The Sticks".into()],
                    ..Default::default()
                })),
            ])
            .unwrap();
        assert!(assert_both_ways_link_alike(&store) > 1000);
        // The old name is gone from the index, the new one is there.
        let k1 = store.graph().node_id("k1").unwrap();
        assert!(through_the_index(&store, "tolkien society")
            .iter()
            .all(|l| l.node != k1));
        assert_eq!(through_the_index(&store, "renamed society")[0].node, k1);
        store
            .delete(&DeleteRequest {
                events: Vec::new(),
                nodes: vec!["k3".into()],
            })
            .unwrap();
        let k19 = store.graph().node_id("k19").unwrap();
        assert!(k19.0 < 19, "the deletion gave ids anew: {k19:?}");
        assert!(assert_both_ways_link_alike(&store) > 1000);
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(assert_both_ways_link_alike(&store) > 1000);
    }

    /// Forms of one 32-bit hash share one list of nodes, and a node under it links only by
    /// its own keys: a question of spans made to collide with a name links nothing through it.
    #[test]
    fn forms_of_one_hash_share_a_list_and_link_only_by_their_own_keys() {
        use crate::model::{kinds, Assertion, EventDraft, NodeUpsert};
        use crate::text::name_term;
        use crate::{BackendKind, Store};
        let mut seen: HashMap<u64, String> = HashMap::new();
        let (a, b) = (0u32..)
            .map(|i| format!("zq{i}"))
            .find_map(|form| {
                let term = name_term(&form);
                match seen.get(&term) {
                    Some(other) => Some((other.clone(), form)),
                    None => {
                        seen.insert(term, form);
                        None
                    }
                }
            })
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
        let mut ev = EventDraft::new(0, "test", kinds::IMPORT);
        ev.assertions = (0..3)
            .map(|i| {
                Assertion::UpsertNode(NodeUpsert {
                    key: format!("k{i}"),
                    name: Some(a.clone()),
                    ..Default::default()
                })
            })
            .collect();
        store.ingest(vec![ev]).unwrap();
        let g = store.graph_for_search();
        let hits = store
            .nodes_under_name_terms(&g, &[a.clone(), b.clone()])
            .unwrap();
        assert_eq!(hits.of_form[0], hits.of_form[1], "{a} and {b} share a hash");
        assert_eq!(hits.nodes.len(), 1);
        assert_eq!(hits.nodes[0].len(), 3);
        drop(g);
        assert!(
            through_the_index(&store, &b).is_empty(),
            "{b} names nothing"
        );
        assert_eq!(through_the_index(&store, &a).len(), 3);
        assert_eq!(
            through_the_index(&store, &format!("{b} {b} {a}")).len(),
            3,
            "{a} still links beside {b}"
        );
    }
}
