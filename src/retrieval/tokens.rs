//! Token counting for context budgets. The budget is checked against the rendered snippet text
//! exactly as it will be sent, by a pluggable counter.

use std::sync::OnceLock;

/// Counts the tokens of a text as some model's tokenizer would.
pub trait TokenCounter: Send + Sync {
    fn count(&self, text: &str) -> usize;
    fn name(&self) -> &str;
}

/// Fast approximation: one token per 4 characters of a word, at least one per word and one per
/// punctuation mark. It over-counts English against BPE tokenizers (about 1.1x against
/// cl100k_base), so a budget it accepts fits the real tokenizer too in practice.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApproxTokens;

impl TokenCounter for ApproxTokens {
    fn count(&self, text: &str) -> usize {
        let mut tokens = 0;
        let mut word = 0usize;
        for c in text.chars() {
            if c.is_alphanumeric() {
                word += 1;
            } else {
                tokens += word.div_ceil(4);
                word = 0;
                if !c.is_whitespace() {
                    tokens += 1;
                }
            }
        }
        tokens + word.div_ceil(4)
    }
    fn name(&self) -> &str {
        "approx"
    }
}

/// OpenAI's cl100k_base byte-pair encoding (GPT-3.5/GPT-4 family), from the tiktoken-rs crate,
/// which ships the vocabulary: nothing is downloaded. Loaded once, on first use.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cl100kTokens;

fn cl100k() -> Option<&'static tiktoken_rs::CoreBPE> {
    static BPE: OnceLock<Option<tiktoken_rs::CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().ok()).as_ref()
}

impl TokenCounter for Cl100kTokens {
    fn count(&self, text: &str) -> usize {
        match cl100k() {
            Some(bpe) => bpe.encode_ordinary(text).len(),
            // The vocabulary is compiled in, so this cannot fail in practice; fall back to
            // counting bytes, which over-counts and so still respects the budget.
            None => text.len(),
        }
    }
    fn name(&self) -> &str {
        "cl100k_base"
    }
}

/// A counter by name: `approx` or `cl100k_base` (alias `cl100k`).
pub fn counter(name: &str) -> Option<Box<dyn TokenCounter>> {
    match name {
        "approx" => Some(Box::new(ApproxTokens)),
        "cl100k_base" | "cl100k" => Some(Box::new(Cl100kTokens)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approx_over_counts_bpe_on_english() {
        let text = "Stephen Warbeck (born 3 May 1953) is an English composer, best known for his film and television scores.";
        let approx = ApproxTokens.count(text);
        let bpe = Cl100kTokens.count(text);
        assert!(bpe > 15 && bpe < 40, "{bpe}");
        assert!(approx >= bpe, "approx {approx} < bpe {bpe}");
        assert!(approx <= bpe * 2, "approx {approx} far above bpe {bpe}");
        assert_eq!(ApproxTokens.count(""), 0);
        assert_eq!(Cl100kTokens.count("hello world"), 2);
    }
}
