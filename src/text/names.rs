//! The forms a name is linked by: every node's name and aliases are known under several keys,
//! each with a match quality, so near-duplicate names link without an LLM (see
//! [`crate::retrieval::link`]). The full-text index keeps each node's keys (as
//! [`super::name_term`]s of its name field), so that a store too large for a dictionary in
//! memory links through the index.

use crate::extract::strip_disambiguation;
use crate::model::{normalize_name, singular};

/// Question words that never link on their own.
pub(crate) const STOP: &[&str] = &[
    "a", "an", "the", "who", "whom", "whose", "what", "which", "where", "when", "why", "how", "is",
    "was", "are", "were", "be", "been", "did", "do", "does", "of", "in", "on", "at", "to", "for",
    "from", "by", "with", "and", "or", "as", "that", "this", "it", "its", "he", "she", "his",
    "her", "their", "they", "first", "same", "both", "many", "much", "there", "name", "born",
    "died", "die", "place", "country", "city", "film", "movie", "song", "person", "year", "date",
    "one", "other", "than", "more", "most", "i", "me", "my", "can", "could", "would",
];

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

/// The keys of a surface form, with their qualities: the normalised form (1.0), without a
/// leading "the" (0.9), without a parenthetical disambiguation (0.9), with initials run
/// together (0.85), singular (0.7). Keys of one letter and stopwords are left out. The
/// full-text index holds them: a change to what this gives needs a new `TEXT_FORMAT`.
pub fn keys(surface: &str) -> Vec<(String, f32)> {
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
