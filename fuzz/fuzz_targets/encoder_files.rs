//! A sentence encoder's files are input like any other: whatever bytes stand in
//! `model.safetensors` (beside a small valid config and vocabulary), loading ends in an error
//! or in an encoder whose vectors are finite, for any text (the same bytes, read as text).
#![no_main]

use libfuzzer_sys::fuzz_target;

const CONFIG: &str = r#"{"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 16, "vocab_size": 6, "max_position_embeddings": 8, "type_vocab_size": 2, "hidden_act": "gelu"}"#;
const TOKENIZER: &str = r###"{"model": {"type": "WordPiece", "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "alpha": 4, "##a": 5}}}"###;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let wrote = std::fs::write(dir.path().join("config.json"), CONFIG).is_ok()
        && std::fs::write(dir.path().join("tokenizer.json"), TOKENIZER).is_ok()
        && std::fs::write(dir.path().join("model.safetensors"), data).is_ok();
    if !wrote {
        return;
    }
    if let Ok(encoder) = loci::embed::SentenceEncoder::load(dir.path()) {
        let text = String::from_utf8_lossy(data);
        let v = encoder.embed(&text);
        assert!(v.iter().all(|x| x.is_finite()));
    }
});
