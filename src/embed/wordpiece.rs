//! BERT's uncased tokenizer: the normaliser (clean, space out CJK ideographs, lowercase, strip
//! accents), the pre-tokeniser (whitespace, then each punctuation mark alone) and WordPiece
//! (greedy longest match, `##` for a word's continuation), as `tokenizer.json` of a
//! sentence-transformers model describes them. It is written here rather than taken from the
//! `tokenizers` crate because these three steps are all an uncased BERT uses, and that crate
//! brings a regex engine in C or a second one in Rust and some twenty crates for them.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

/// A WordPiece vocabulary and the ids of the special tokens around a sequence.
#[derive(Clone, Debug)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
    /// Words longer than this (in characters) are one unknown token, as in BERT.
    max_word_chars: usize,
}

impl WordPiece {
    /// A tokenizer over `vocab`, which must hold `[UNK]`, `[CLS]` and `[SEP]`.
    pub fn new(vocab: HashMap<String, u32>, max_word_chars: usize) -> Result<Self, String> {
        let id = |t: &str| {
            vocab
                .get(t)
                .copied()
                .ok_or_else(|| format!("the vocabulary has no {t} token"))
        };
        Ok(WordPiece {
            unk: id("[UNK]")?,
            cls: id("[CLS]")?,
            sep: id("[SEP]")?,
            max_word_chars,
            vocab,
        })
    }

    /// Largest token id, so that a model can check its embedding table covers them all.
    pub fn max_id(&self) -> u32 {
        self.vocab.values().copied().max().unwrap_or(0)
    }

    /// Token ids of `text` between `[CLS]` and `[SEP]`, at most `max_len` in all (the words
    /// past it are dropped, as BERT truncates).
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let room = max_len.saturating_sub(2);
        let mut ids = Vec::with_capacity(room.min(64) + 2);
        ids.push(self.cls);
        'words: for word in pre_tokenize(&normalize(text)) {
            for id in self.word_pieces(&word) {
                if ids.len() > room {
                    break 'words;
                }
                ids.push(id);
            }
        }
        ids.push(self.sep);
        ids
    }

    /// The pieces of one word: the longest vocabulary entry from its start, then from where
    /// that ended with `##` in front, and so on; one `[UNK]` when some rest matches nothing.
    fn word_pieces(&self, word: &str) -> Vec<u32> {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        if chars.len() > self.max_word_chars {
            return vec![self.unk];
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut candidate = String::new();
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while end > start {
                let from = chars[start].0;
                let to = chars.get(end).map_or(word.len(), |c| c.0);
                candidate.clear();
                if start > 0 {
                    candidate.push_str("##");
                }
                candidate.push_str(&word[from..to]);
                if let Some(&id) = self.vocab.get(candidate.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => {
                    pieces.push(id);
                    start = end;
                }
                None => return vec![self.unk],
            }
        }
        pieces
    }
}

/// BERT's normaliser for uncased models: control characters dropped, whitespace made a space,
/// CJK ideographs spaced out, then lowercased with accents stripped (NFD, marks dropped).
fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || (is_control(c) && !c.is_whitespace()) {
            continue;
        }
        if c.is_whitespace() {
            cleaned.push(' ');
        } else if is_cjk(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    cleaned
        .to_lowercase()
        .nfd()
        .filter(|c| !is_nonspacing_mark(*c))
        .collect()
}

/// Splits on whitespace, then makes each punctuation character a word of its own.
fn pre_tokenize(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for chunk in text.split_whitespace() {
        let mut word = String::new();
        for c in chunk.chars() {
            if is_punctuation(c) {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                words.push(c.to_string());
            } else {
                word.push(c);
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
    }
    words
}

fn is_control(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{feff}')
}

/// What BERT counts as punctuation: every non-alphanumeric ASCII symbol, and the Unicode
/// punctuation blocks (general, supplemental, CJK, full-width forms) in which the
/// punctuation of ordinary text falls.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c,
            '\u{a1}' | '\u{a7}' | '\u{ab}' | '\u{b6}' | '\u{b7}' | '\u{bb}' | '\u{bf}'
            | '\u{2010}'..='\u{2027}' | '\u{2030}'..='\u{205e}'
            | '\u{2e00}'..='\u{2e7f}' | '\u{3001}'..='\u{3003}' | '\u{3008}'..='\u{3011}'
            | '\u{3014}'..='\u{301f}' | '\u{ff01}'..='\u{ff0f}' | '\u{ff1a}'..='\u{ff20}'
            | '\u{ff3b}'..='\u{ff40}' | '\u{ff5b}'..='\u{ff65}')
}

fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{4e00}'..='\u{9fff}' | '\u{3400}'..='\u{4dbf}' | '\u{20000}'..='\u{2a6df}'
        | '\u{2a700}'..='\u{2b73f}' | '\u{2b740}'..='\u{2b81f}' | '\u{2b820}'..='\u{2ceaf}'
        | '\u{f900}'..='\u{faff}' | '\u{2f800}'..='\u{2fa1f}')
}

/// Combining marks that NFD splits off accented letters (the Unicode Mn ranges of Latin,
/// Greek and Cyrillic text and the general combining blocks).
fn is_nonspacing_mark(c: char) -> bool {
    matches!(c,
        '\u{300}'..='\u{36f}' | '\u{483}'..='\u{487}' | '\u{591}'..='\u{5bd}'
        | '\u{1ab0}'..='\u{1aff}' | '\u{1dc0}'..='\u{1dff}' | '\u{20d0}'..='\u{20ff}'
        | '\u{fe20}'..='\u{fe2f}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPiece {
        let words = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cafe", "un", "##aff", "##able", ",", "!",
            "我",
        ];
        let vocab = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.to_string(), i as u32))
            .collect();
        WordPiece::new(vocab, 100).unwrap()
    }

    #[test]
    fn words_split_into_the_longest_pieces_with_continuations_marked() {
        // [CLS] the un ##aff ##able , [UNK] ! 我 [SEP]
        assert_eq!(
            tiny().encode("The UNAFFABLE, zzz!我", 512),
            vec![2, 4, 6, 7, 8, 9, 1, 10, 11, 3]
        );
    }

    #[test]
    fn accents_and_controls_are_normalised_away() {
        assert_eq!(tiny().encode("Café\u{7}", 512), vec![2, 5, 3]);
    }

    proptest::proptest! {
        /// Any text, of any script, controls and marks included, becomes ids of the
        /// vocabulary between [CLS] and [SEP], never more than the length asked for.
        #[test]
        fn any_text_encodes_to_vocabulary_ids_within_the_length(
            text in "\\PC{0,200}|[\\x00-\\x7f]{0,200}|(the|un|aff|able|[ ,!])*",
            max_len in 2usize..40,
        ) {
            let t = tiny();
            let ids = t.encode(&text, max_len);
            proptest::prop_assert!(ids.len() >= 2 && ids.len() <= max_len);
            proptest::prop_assert_eq!(ids[0], 2);
            proptest::prop_assert_eq!(*ids.last().unwrap(), 3);
            proptest::prop_assert!(ids.iter().all(|i| *i <= t.max_id()));
        }
    }

    #[test]
    fn a_long_text_is_cut_to_the_length_with_its_markers() {
        let ids = tiny().encode(&"the ".repeat(1000), 8);
        assert_eq!(ids, vec![2, 4, 4, 4, 4, 4, 4, 3]);
    }
}
