//! What a word is to the full-text index: a run of letters and digits, as tantivy's
//! `SimpleTokenizer` has it; one emoji or other pictographic symbol, which that tokenizer
//! dropped as punctuation, so that a search for "🦀" found nothing that held it (a flag, two
//! regional letters, is one word); and one Han ideograph or hiragana character, as Lucene's
//! standard tokenizer has them, since Chinese and Japanese are written without spaces and a
//! sentence had been one word, found only whole. Documents and queries are split alike (the
//! analyser is the index's), so an index written before this split is rebuilt
//! ([`super::TEXT_FORMAT`] 8).

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

    /// The end of a symbol begun at `from`: a regional letter takes the next with it (a flag).
    fn symbol_end(&mut self, from: usize, c: char) -> usize {
        let end = from + c.len_utf8();
        match self.chars.peek() {
            Some(&(at, next)) if is_regional_letter(c) && is_regional_letter(next) => {
                self.chars.next();
                at + next.len_utf8()
            }
            _ => end,
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
                let to = self.symbol_end(from, c);
                self.emit(from, to);
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
        let texts: Vec<String> = words("crab🦀 by the €5 stall 👍🏽 ❤\u{fe0f} 👩\u{200d}💻")
            .into_iter()
            .map(|(t, _, _)| t)
            .collect();
        assert_eq!(
            texts,
            ["crab", "🦀", "by", "the", "€", "5", "stall", "👍", "❤", "👩", "💻"]
        );
        assert_eq!(words("x🦀")[1], ("🦀".to_string(), 1, 5));
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
}
