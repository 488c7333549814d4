//! What a word is to the full-text index:
//! - a run of letters and digits, as tantivy's `SimpleTokenizer` has it;
//! - one emoji or other pictographic symbol, which that tokenizer dropped as punctuation, so
//!   that a search for "🦀" found nothing that held it. A flag (two regional letters) is one
//!   word; so are symbols joined by a zero-width joiner (👩‍💻), and a black flag with its tag
//!   letters (Scotland's). Skin tones and presentation selectors are left out of the word.
//!   A symbol's word holds at most [`MAX_SYMBOL_BYTES`];
//! - one Han ideograph or hiragana character, as Lucene's standard tokenizer has them, since
//!   Chinese and Japanese are written without spaces and a sentence had been one word, found
//!   only whole.
//!
//! Documents and queries are split alike (the analyser is the index's), so an index written
//! before this split (format 9) is rebuilt ([`super::TEXT_FORMAT`]).

use std::iter::Peekable;
use std::str::CharIndices;

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// Splits text into words and symbols (see the module's documentation).
#[derive(Clone, Default)]
pub(crate) struct WordsAndSymbols {
    token: Token,
}

pub(crate) struct WordsAndSymbolsStream<'a> {
    text: &'a str,
    chars: Peekable<CharIndices<'a>>,
    token: &'a mut Token,
}

impl Tokenizer for WordsAndSymbols {
    type TokenStream<'a> = WordsAndSymbolsStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordsAndSymbolsStream<'a> {
        self.token.reset();
        WordsAndSymbolsStream {
            text,
            chars: text.char_indices().peekable(),
            token: &mut self.token,
        }
    }
}

/// A symbol that is a word by itself: the emoji and pictographs of the symbol blocks, the
/// currency and letterlike signs, arrows and dingbats. Not general punctuation, which
/// separates words, nor what only shapes the symbol before it (joiners, variation
/// selectors, skin-tone modifiers), nor combining marks, which belong to a letter.
fn is_symbol(c: char) -> bool {
    matches!(c,
        '\u{00A9}' | '\u{00AE}' // © ®
        | '\u{203C}' | '\u{2049}' // ‼ ⁉
        | '\u{20A0}'..='\u{20CF}' // currency signs: € ₹ ₿
        | '\u{2100}'..='\u{214F}' // letterlike: ™ ℹ
        | '\u{2190}'..='\u{21FF}' // arrows
        | '\u{2300}'..='\u{23FF}' // technical: ⌚ ⏰
        | '\u{24C2}' // Ⓜ
        | '\u{25A0}'..='\u{27BF}' // shapes, symbols, dingbats: ☀ ♥ ✅
        | '\u{2900}'..='\u{297F}' // arrows
        | '\u{2B00}'..='\u{2BFF}' // symbols and arrows: ⭐ ⬛
        | '\u{3030}' | '\u{303D}' | '\u{3297}' | '\u{3299}' // 〰 〽 ㊗ ㊙
        | '\u{1F000}'..='\u{1F3FA}' | '\u{1F400}'..='\u{1FAFF}' // pictographs, emoticons
    ) && !c.is_alphanumeric()
}

/// A character that is a word by itself among letters: a Han ideograph (with the iteration
/// mark 々) or a hiragana character. Katakana runs stay words, as loanwords are.
fn is_ideograph(c: char) -> bool {
    matches!(c,
        '\u{3005}'
        | '\u{3041}'..='\u{3096}' | '\u{309D}'..='\u{309F}' // hiragana, not its voicing marks
        | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2FA1F}'
    )
}

/// A regional indicator letter: two of them make a flag.
fn is_regional_letter(c: char) -> bool {
    matches!(c, '\u{1F1E6}'..='\u{1F1FF}')
}

/// The zero-width joiner: symbols it joins are one emoji (👩‍💻, a technologist, is not a
/// woman and a laptop).
const JOINER: char = '\u{200D}';

/// A mark that only shapes the symbol before it, part of neither word nor query term: a
/// presentation selector or a skin tone. (👍🏽 is found by 👍.)
fn is_shaping_mark(c: char) -> bool {
    matches!(c, '\u{FE0E}' | '\u{FE0F}' | '\u{1F3FB}'..='\u{1F3FF}')
}

/// The black flag, whose tag letters name a subdivision's flag.
const BLACK_FLAG: char = '\u{1F3F4}';
/// The tag that ends a subdivision flag's letters.
const CANCEL_TAG: char = '\u{E007F}';

/// The most a symbol's word holds, in bytes: the longest emoji, a family of four (25 bytes) or
/// a subdivision flag (32), fit. Past it a run of joined symbols (no emoji) goes on as words
/// of their own, and tag letters separate words, where one word would pass the index's 255
/// bytes and be dropped, unfound.
const MAX_SYMBOL_BYTES: usize = 64;

/// Whether a symbol's word `text` can take `more` bytes within [`MAX_SYMBOL_BYTES`].
fn fits(text: &str, more: usize) -> bool {
    text.len() + more <= MAX_SYMBOL_BYTES
}

/// A tag character: after 🏴, up to [`CANCEL_TAG`], the letters that name a subdivision's flag
/// (Scotland's, Wales'), kept in the word, which they tell apart. Anywhere else a tag is
/// hidden text and separates words, as punctuation does.
fn is_tag(c: char) -> bool {
    matches!(c, '\u{E0020}'..='\u{E007F}')
}

impl WordsAndSymbolsStream<'_> {
    /// Takes the rest of a word: letters and digits up to the next other character or
    /// ideograph, which is left for the next token.
    fn word_end(&mut self) -> usize {
        while let Some(&(at, c)) = self.chars.peek() {
            if !c.is_alphanumeric() || is_ideograph(c) {
                return at;
            }
            self.chars.next();
        }
        self.text.len()
    }

    /// Emits the symbol `c` begun at `from` with the rest of it: a regional letter takes the
    /// next with it (a flag); a black flag takes its tag letters; and a symbol other than a
    /// regional letter takes the symbols joined to it, with their joiners. Its shaping marks
    /// lie within its offsets but are left out of its text, so that a query term with another
    /// skin tone is the same word.
    fn emit_symbol(&mut self, from: usize, c: char) {
        self.token.text.push(c);
        let mut to = from + c.len_utf8();
        if is_regional_letter(c) {
            if let Some(&(at, next)) = self.chars.peek().filter(|(_, n)| is_regional_letter(*n)) {
                self.chars.next();
                self.token.text.push(next);
                to = at + next.len_utf8();
            }
        } else {
            if c == BLACK_FLAG {
                self.take_tag_letters(&mut to);
            }
            loop {
                while let Some(&(at, m)) = self.chars.peek().filter(|(_, m)| is_shaping_mark(*m)) {
                    self.chars.next();
                    to = at + m.len_utf8();
                }
                // A joiner joins only a symbol, and not a flag's letter (a flag is a word of
                // its own): one before a letter, or at the end, is a separator like any
                // other punctuation.
                let mut ahead = self.chars.clone();
                match (ahead.next(), ahead.next()) {
                    (Some((_, JOINER)), Some((at, s)))
                        if is_symbol(s)
                            && !is_regional_letter(s)
                            && fits(&self.token.text, JOINER.len_utf8() + s.len_utf8()) =>
                    {
                        self.chars = ahead;
                        self.token.text.push(JOINER);
                        self.token.text.push(s);
                        to = at + s.len_utf8();
                    }
                    _ => break,
                }
            }
        }
        self.token.offset_from = from;
        self.token.offset_to = to;
    }

    /// Takes a black flag's tag letters into its word, up to and with [`CANCEL_TAG`], moving
    /// `to` past them.
    fn take_tag_letters(&mut self, to: &mut usize) {
        while let Some(&(at, t)) = self
            .chars
            .peek()
            .filter(|(_, t)| is_tag(*t) && fits(&self.token.text, t.len_utf8()))
        {
            self.chars.next();
            self.token.text.push(t);
            *to = at + t.len_utf8();
            if t == CANCEL_TAG {
                break;
            }
        }
    }

    fn emit(&mut self, from: usize, to: usize) {
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.text.push_str(&self.text[from..to]);
    }
}

impl TokenStream for WordsAndSymbolsStream<'_> {
    fn advance(&mut self) -> bool {
        self.token.text.clear();
        self.token.position = self.token.position.wrapping_add(1);
        while let Some((from, c)) = self.chars.next() {
            if is_ideograph(c) {
                self.emit(from, from + c.len_utf8());
                return true;
            }
            if c.is_alphanumeric() {
                let to = self.word_end();
                self.emit(from, to);
                return true;
            }
            if !c.is_ascii() && is_symbol(c) {
                self.emit_symbol(from, c);
                return true;
            }
        }
        false
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tokens `tokenizer` makes of `text`: text and byte offsets.
    fn tokens(mut tokenizer: impl Tokenizer, text: &str) -> Vec<(String, usize, usize)> {
        let mut s = tokenizer.token_stream(text);
        let mut out = Vec::new();
        while s.advance() {
            let k = s.token();
            out.push((k.text.clone(), k.offset_from, k.offset_to));
        }
        out
    }

    fn words(text: &str) -> Vec<(String, usize, usize)> {
        tokens(WordsAndSymbols::default(), text)
    }

    #[test]
    fn words_are_split_as_the_simple_tokenizer_splits_them() {
        use tantivy::tokenizer::SimpleTokenizer;
        for text in [
            "Hello, happy tax payer!",
            "café au lait — naïve “quotes” ¿qué? e\u{301}t\u{e9}",
            "a-b_c 12.5 한국어 Ελληνικά カタカナ  ",
            "",
        ] {
            let expected = tokens(SimpleTokenizer::default(), text);
            assert_eq!(words(text), expected, "{text:?}");
        }
    }

    #[test]
    fn an_emoji_is_a_word_of_its_own_and_its_shaping_marks_are_not() {
        let texts: Vec<String> = words("crab🦀 by the €5 stall 👍🏽 ❤\u{fe0f} 👩 💻")
            .into_iter()
            .map(|(t, _, _)| t)
            .collect();
        assert_eq!(
            texts,
            ["crab", "🦀", "by", "the", "€", "5", "stall", "👍", "❤", "👩", "💻"]
        );
        assert_eq!(words("x🦀")[1], ("🦀".to_string(), 1, 5));
        // The shaping marks lie within the symbol's offsets.
        assert_eq!(words("👍🏽 x")[0], ("👍".to_string(), 0, 8));
    }

    #[test]
    fn joined_symbols_are_one_word_without_their_shaping_marks() {
        let texts = |t: &str| -> Vec<String> { words(t).into_iter().map(|(w, _, _)| w).collect() };
        let technologist = "👩\u{200d}💻";
        assert_eq!(texts(technologist), [technologist]);
        // Another skin tone, and a presentation selector, are the same word.
        assert_eq!(texts("👩🏽\u{200d}💻"), [technologist]);
        assert_eq!(
            texts("🏳\u{fe0f}\u{200d}🌈 🏃\u{200d}♀\u{fe0f}!"),
            ["🏳\u{200d}🌈", "🏃\u{200d}♀"]
        );
        assert_eq!(words("a 👨\u{200d}👩\u{200d}👧 b")[1].2, 20);
        // A joiner before a letter or at the end joins nothing.
        assert_eq!(texts("🦀\u{200d}x 🦀\u{200d}"), ["🦀", "x", "🦀"]);
        // A run of joined symbols longer than any emoji goes on as words of their own.
        let run = ["🦀"; 20].join("\u{200d}");
        let parts = words(&run);
        assert!(
            parts.len() > 1 && parts.iter().all(|(w, _, _)| w.len() <= 64),
            "{parts:?}"
        );
        assert_eq!(
            parts
                .iter()
                .map(|(w, _, _)| w.matches('🦀').count())
                .sum::<usize>(),
            20
        );
        assert_eq!(parts.last().unwrap().2, run.len());
        // Tag letters belong to a black flag's word, up to their end mark; after another
        // symbol, or past the end, they are hidden text, not part of the word.
        assert_eq!(texts("👍\u{e0041}\u{e0042} x"), ["👍", "x"]);
        assert_eq!(
            texts("🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}\u{e0041}"),
            ["🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}"]
        );
        // A joiner before a flag joins nothing: the flag is a word of its own.
        assert_eq!(texts("🏳\u{200d}🇫🇷"), ["🏳", "🇫🇷"]);
        // Scotland's flag is not England's.
        let scotland = "🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}";
        let england = "🏴\u{e0067}\u{e0062}\u{e0065}\u{e006e}\u{e0067}\u{e007f}";
        assert_eq!(texts(&format!("{scotland} {england}")), [scotland, england]);
    }

    #[test]
    fn a_flag_is_one_word_and_han_and_hiragana_a_word_a_character() {
        let texts = |t: &str| -> Vec<String> { words(t).into_iter().map(|(w, _, _)| w).collect() };
        assert_eq!(texts("🇫🇷🇷🇺 🇫"), ["🇫🇷", "🇷🇺", "🇫"]);
        assert_eq!(
            texts("東京都庁の近くでラーメンを食べました abc東"),
            [
                "東",
                "京",
                "都",
                "庁",
                "の",
                "近",
                "く",
                "で",
                "ラーメン",
                "を",
                "食",
                "べ",
                "ま",
                "し",
                "た",
                "abc",
                "東"
            ]
        );
    }

    /// Characters the splitting treats apart, and any other.
    fn a_char() -> impl proptest::strategy::Strategy<Value = char> {
        use proptest::prelude::*;
        prop_oneof![
            4 => proptest::sample::select(vec![
                'a', 'Z', '7', ' ', '-', '.', 'é', '\u{301}', '\u{200d}', '\u{fe0f}',
                '\u{1f3fd}', '\u{20e3}', '\u{1f1eb}', '\u{1f1f7}', '\u{e0067}', '\u{e007f}',
                '🏴', '🦀', '👩', '💻', '♀', '€', '東', 'の', 'ラ', 'ー', '々', '\u{309b}',
            ]),
            1 => any::<char>(),
        ]
    }

    proptest::proptest! {
        /// Whatever the text, its words lie in order on character boundaries within it, each
        /// word's text is drawn from its span in order (shaping marks left out), and no
        /// symbol's word passes its bound: tantivy takes the offsets as given.
        #[test]
        fn words_lie_in_order_within_the_text(chars in proptest::collection::vec(a_char(), 0..80)) {
            let text: String = chars.into_iter().collect();
            let mut end = 0;
            for (word, from, to) in words(&text) {
                proptest::prop_assert!(end <= from && from < to && to <= text.len(), "{text:?}");
                proptest::prop_assert!(text.is_char_boundary(from) && text.is_char_boundary(to));
                let mut span = text[from..to].chars();
                proptest::prop_assert!(
                    word.chars().all(|c| span.any(|s| s == c)),
                    "{word:?} is not drawn from {:?}",
                    &text[from..to]
                );
                let first = word.chars().next().unwrap_or(' ');
                if is_symbol(first) {
                    proptest::prop_assert!(word.len() <= MAX_SYMBOL_BYTES, "{word:?}");
                }
                end = to;
            }
        }
    }
}
