//! Sentence embeddings without an LLM: a small BERT encoder (the all-MiniLM-L6-v2 family:
//! sentence-transformers' mean pooling and L2 normalisation) run on the CPU, from a directory
//! holding `config.json`, `model.safetensors` and `tokenizer.json` (or `vocab.txt`). It gives
//! retrieval a signal that words alone miss ("where did she move from" against a turn about
//! "my home country, Sweden"); see `retrieval::dense`.
//!
//! Each text runs alone (no padding), its matrix products on one thread, so a text's vector
//! does not depend on what else is embedded with it or on the number of threads: the same
//! store and question give the same bytes out. Texts are spread over the cores.
//!
//! The model is an input like any file: every tensor's shape is checked against the config at
//! load, token ids against the embedding table and the length against the position table, so
//! a damaged or foreign model is an error that names the file, never a panic.

mod wordpiece;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::Value as Json;

use crate::error::{Error, Result};
pub use wordpiece::WordPiece;

/// Longest input, in tokens, when the model directory does not say
/// (`sentence_bert_config.json`'s `max_seq_length`).
const DEFAULT_MAX_TOKENS: usize = 256;

/// Longest input, in tokens, whatever the model directory says: attention holds an n x n
/// matrix of scores, 16 MB at this length, where a position table of 65,536 rows had asked
/// 17 GB of a long text. BERT encoders take 512.
const MAX_TOKENS: usize = 2048;

/// Longest word, in characters, before it is one unknown token, when the tokenizer does not
/// say (`max_input_chars_per_word`; BERT's own value).
const DEFAULT_MAX_WORD_CHARS: usize = 100;

/// The error for `file` of the model in `dir`.
fn encoder_error(dir: &Path, file: &str, message: String) -> Error {
    Error::Encoder {
        path: dir.join(file),
        message,
    }
}

/// A loaded sentence encoder.
pub struct SentenceEncoder {
    tokenizer: WordPiece,
    model: Bert,
    max_tokens: usize,
    dir: PathBuf,
}

impl std::fmt::Debug for SentenceEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceEncoder")
            .field("dir", &self.dir)
            .field("dim", &self.model.hidden)
            .field("layers", &self.model.layers.len())
            .finish()
    }
}

impl SentenceEncoder {
    /// Loads the encoder in `dir` (the files of a sentence-transformers BERT model).
    pub fn load(dir: &Path) -> Result<Self> {
        let fail = |file: &str, message: String| encoder_error(dir, file, message);
        let config = read_json(dir, "config.json")?;
        let tokenizer = load_tokenizer(dir)?;
        let weights_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights_path).map_err(|e| Error::io(&weights_path, e))?;
        let model =
            Bert::from_safetensors(&config, &bytes).map_err(|m| fail("model.safetensors", m))?;
        if tokenizer.max_id() as usize >= model.vocab {
            return Err(fail(
                "tokenizer.json",
                format!(
                    "token id {} is past the model's {} embeddings",
                    tokenizer.max_id(),
                    model.vocab
                ),
            ));
        }
        let max_tokens = match read_json(dir, "sentence_bert_config.json") {
            Ok(c) => c
                .get("max_seq_length")
                .and_then(Json::as_u64)
                .map_or(DEFAULT_MAX_TOKENS, |n| n as usize),
            Err(_) => DEFAULT_MAX_TOKENS,
        }
        .clamp(2, model.positions.min(MAX_TOKENS));
        Ok(SentenceEncoder {
            tokenizer,
            model,
            max_tokens,
            dir: dir.to_path_buf(),
        })
    }

    /// Length of the vectors.
    pub fn dim(&self) -> usize {
        self.model.hidden
    }

    /// The directory the encoder was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The unit-length vector of `text`.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let ids = self.tokenizer.encode(text, self.max_tokens);
        let mut v = self.model.mean_pooled(&ids);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if !norm.is_finite() {
            // Finite weights can still overflow on some input: such a text matches nothing
            // rather than everything.
            return vec![0.0; v.len()];
        }
        let norm = norm.max(1e-12);
        v.iter_mut().for_each(|x| *x /= norm);
        v
    }

    /// The vectors of `texts`, in order, computed on every core.
    pub fn embed_all(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        texts.par_iter().map(|t| self.embed(t)).collect()
    }
}

/// Cosine similarity of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn read_json(dir: &Path, file: &str) -> Result<Json> {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| encoder_error(dir, file, format!("line {}: {e}", e.line())))
}

/// The WordPiece vocabulary of `tokenizer.json` (`model.vocab`), or of `vocab.txt` (one token
/// a line, ids by line) when there is no `tokenizer.json`.
fn load_tokenizer(dir: &Path) -> Result<WordPiece> {
    let fail = |file: &str, message: String| encoder_error(dir, file, message);
    if dir.join("tokenizer.json").exists() {
        let t = read_json(dir, "tokenizer.json")?;
        let model = t
            .get("model")
            .ok_or_else(|| fail("tokenizer.json", "no \"model\"".into()))?;
        if let Some(kind) = model.get("type").and_then(Json::as_str) {
            if kind != "WordPiece" {
                return Err(fail(
                    "tokenizer.json",
                    format!("model type {kind}, expected WordPiece"),
                ));
            }
        }
        let vocab = model
            .get("vocab")
            .and_then(Json::as_object)
            .ok_or_else(|| fail("tokenizer.json", "no \"model.vocab\" object".into()))?;
        let mut map = HashMap::with_capacity(vocab.len());
        for (token, id) in vocab {
            let id = id
                .as_u64()
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| fail("tokenizer.json", format!("token {token:?}: id {id}")))?;
            map.insert(token.clone(), id);
        }
        let max_chars = model
            .get("max_input_chars_per_word")
            .and_then(Json::as_u64)
            .map_or(DEFAULT_MAX_WORD_CHARS, |n| n as usize);
        return WordPiece::new(map, max_chars).map_err(|m| fail("tokenizer.json", m));
    }
    let path = dir.join("vocab.txt");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let map = text
        .lines()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32))
        .collect();
    WordPiece::new(map, DEFAULT_MAX_WORD_CHARS).map_err(|m| fail("vocab.txt", m))
}

/// One encoder layer's weights, linear maps stored as PyTorch does (`out x in`, row-major).
struct Layer {
    /// Query, key and value maps stacked (`3d x d`), so one product makes all three.
    qkv: Vec<f32>,
    qkv_bias: Vec<f32>,
    attn_out: Vec<f32>,
    attn_out_bias: Vec<f32>,
    attn_norm: (Vec<f32>, Vec<f32>),
    up: Vec<f32>,
    up_bias: Vec<f32>,
    down: Vec<f32>,
    down_bias: Vec<f32>,
    out_norm: (Vec<f32>, Vec<f32>),
}

/// A BERT encoder's weights and shape.
struct Bert {
    hidden: usize,
    heads: usize,
    intermediate: usize,
    vocab: usize,
    positions: usize,
    eps: f32,
    words: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embed_norm: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

/// The tensors of a safetensors file, each checked for its dtype and shape as taken.
struct Tensors<'a> {
    file: safetensors::SafeTensors<'a>,
    /// `"bert."` when the file's names carry it (a `BertModel` saved inside another model).
    prefix: &'static str,
}

impl Tensors<'_> {
    fn take(&self, name: &str, shape: &[usize]) -> std::result::Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let t = self
            .file
            .tensor(&full)
            .map_err(|_| format!("no tensor {full}"))?;
        if t.shape() != shape {
            return Err(format!(
                "tensor {full} has shape {:?}, the config implies {shape:?}",
                t.shape()
            ));
        }
        let values: Vec<f32> = match t.dtype() {
            safetensors::Dtype::F32 => t
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            other => {
                return Err(format!(
                    "tensor {full} is {other:?}; this encoder reads F32"
                ))
            }
        };
        // A NaN or an infinity in a weight makes every vector NaN, and a NaN similarity
        // would sort first.
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!("tensor {full}: value {i} is {}", values[i]));
        }
        Ok(values)
    }

    fn norm(&self, name: &str, d: usize) -> std::result::Result<(Vec<f32>, Vec<f32>), String> {
        Ok((
            self.take(&format!("{name}.weight"), &[d])?,
            self.take(&format!("{name}.bias"), &[d])?,
        ))
    }
}

/// Largest dimension a config may give; far above any sentence encoder, so that a damaged
/// config fails here instead of asking for terabytes.
const MAX_DIM: u64 = 1 << 16;

impl Bert {
    fn from_safetensors(config: &Json, bytes: &[u8]) -> std::result::Result<Self, String> {
        let dim = |key: &str| -> std::result::Result<usize, String> {
            match config.get(key).and_then(Json::as_u64) {
                Some(n) if n > 0 && n <= MAX_DIM => Ok(n as usize),
                Some(n) => Err(format!("config.json: {key} = {n}, out of range")),
                None => Err(format!("config.json: no {key}")),
            }
        };
        let hidden = dim("hidden_size")?;
        let heads = dim("num_attention_heads")?;
        let layers_n = dim("num_hidden_layers")?;
        let intermediate = dim("intermediate_size")?;
        let vocab = config
            .get("vocab_size")
            .and_then(Json::as_u64)
            .filter(|n| *n > 0 && *n <= 1 << 22)
            .ok_or("config.json: vocab_size missing or out of range")? as usize;
        let positions = dim("max_position_embeddings")?;
        if positions < 2 {
            // Every text takes [CLS] and [SEP].
            return Err(format!(
                "config.json: max_position_embeddings = {positions}; a text takes at least 2"
            ));
        }
        let types = dim("type_vocab_size").unwrap_or(2);
        if hidden % heads != 0 {
            return Err(format!(
                "config.json: hidden_size {hidden} is not a multiple of {heads} heads"
            ));
        }
        if let Some(act) = config.get("hidden_act").and_then(Json::as_str) {
            if act != "gelu" {
                return Err(format!(
                    "config.json: hidden_act {act}; this encoder runs gelu"
                ));
            }
        }
        let eps = config
            .get("layer_norm_eps")
            .and_then(Json::as_f64)
            .unwrap_or(1e-12) as f32;
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let prefix = if file.names().iter().any(|n| n.starts_with("bert.")) {
            "bert."
        } else {
            ""
        };
        let t = Tensors { file, prefix };
        let (d, i) = (hidden, intermediate);
        let mut layers = Vec::new();
        for l in 0..layers_n {
            let p = format!("encoder.layer.{l}.");
            // Sized by the tensors read, not by the config: a config's sizes are only in
            // range until the file's tensors bear them out (65,536 asked 48 GiB here).
            let (mut qkv, mut qkv_bias) = (Vec::new(), Vec::new());
            for part in ["query", "key", "value"] {
                qkv.push(t.take(&format!("{p}attention.self.{part}.weight"), &[d, d])?);
                qkv_bias.push(t.take(&format!("{p}attention.self.{part}.bias"), &[d])?);
            }
            let (qkv, qkv_bias) = (qkv.concat(), qkv_bias.concat());
            layers.push(Layer {
                qkv,
                qkv_bias,
                attn_out: t.take(&format!("{p}attention.output.dense.weight"), &[d, d])?,
                attn_out_bias: t.take(&format!("{p}attention.output.dense.bias"), &[d])?,
                attn_norm: t.norm(&format!("{p}attention.output.LayerNorm"), d)?,
                up: t.take(&format!("{p}intermediate.dense.weight"), &[i, d])?,
                up_bias: t.take(&format!("{p}intermediate.dense.bias"), &[i])?,
                down: t.take(&format!("{p}output.dense.weight"), &[d, i])?,
                down_bias: t.take(&format!("{p}output.dense.bias"), &[d])?,
                out_norm: t.norm(&format!("{p}output.LayerNorm"), d)?,
            });
        }
        Ok(Bert {
            hidden,
            heads,
            intermediate,
            vocab,
            positions,
            eps,
            words: t.take("embeddings.word_embeddings.weight", &[vocab, d])?,
            position: t.take("embeddings.position_embeddings.weight", &[positions, d])?,
            token_type: t.take("embeddings.token_type_embeddings.weight", &[types, d])?,
            embed_norm: t.norm("embeddings.LayerNorm", d)?,
            layers,
        })
    }

    /// The mean of the last layer's token states for `ids` (which the tokenizer bounded by
    /// the vocabulary and the position table).
    fn mean_pooled(&self, ids: &[u32]) -> Vec<f32> {
        let (n, d) = (ids.len().min(self.positions), self.hidden);
        let mut x = vec![0f32; n * d];
        for (t, &id) in ids.iter().take(n).enumerate() {
            let word = &self.words[id as usize * d..][..d];
            let pos = &self.position[t * d..][..d];
            let row = &mut x[t * d..][..d];
            for j in 0..d {
                row[j] = word[j] + pos[j] + self.token_type[j];
            }
        }
        layer_norm(&mut x, d, &self.embed_norm, self.eps);
        for layer in &self.layers {
            self.encoder_layer(&mut x, n, layer);
        }
        let mut mean = vec![0f32; d];
        for row in x.chunks_exact(d) {
            mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
        }
        mean.iter_mut().for_each(|m| *m /= n.max(1) as f32);
        mean
    }

    /// One post-norm transformer layer over the `n x d` states `x`, in place.
    fn encoder_layer(&self, x: &mut [f32], n: usize, w: &Layer) {
        let d = self.hidden;
        let dh = d / self.heads;
        let qkv = linear(x, n, d, &w.qkv, &w.qkv_bias, 3 * d);
        let mut context = vec![0f32; n * d];
        let mut scores = vec![0f32; n * n];
        let scale = 1.0 / (dh as f32).sqrt();
        for h in 0..self.heads {
            let (q, k, v) = (h * dh, d + h * dh, 2 * d + h * dh);
            // scores = Q_h K_h^T, rows of qkv are 3d apart.
            // SAFETY (of the call): every slice and stride below stays inside its buffer:
            // Q_h, K_h and V_h are n x dh windows of the n x 3d `qkv`, `scores` is n x n and
            // the head's columns of `context` are an n x dh window of n x d.
            unsafe {
                matrixmultiply::sgemm(
                    n,
                    dh,
                    n,
                    scale,
                    qkv[q..].as_ptr(),
                    (3 * d) as isize,
                    1,
                    qkv[k..].as_ptr(),
                    1,
                    (3 * d) as isize,
                    0.0,
                    scores.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
            for row in scores.chunks_exact_mut(n) {
                softmax(row);
            }
            unsafe {
                matrixmultiply::sgemm(
                    n,
                    n,
                    dh,
                    1.0,
                    scores.as_ptr(),
                    n as isize,
                    1,
                    qkv[v..].as_ptr(),
                    (3 * d) as isize,
                    1,
                    0.0,
                    context[h * dh..].as_mut_ptr(),
                    d as isize,
                    1,
                );
            }
        }
        let attended = linear(&context, n, d, &w.attn_out, &w.attn_out_bias, d);
        x.iter_mut().zip(&attended).for_each(|(a, b)| *a += b);
        layer_norm(x, d, &w.attn_norm, self.eps);
        let mut up = linear(x, n, d, &w.up, &w.up_bias, self.intermediate);
        up.iter_mut().for_each(|v| *v = gelu(*v));
        let down = linear(&up, n, self.intermediate, &w.down, &w.down_bias, d);
        x.iter_mut().zip(&down).for_each(|(a, b)| *a += b);
        layer_norm(x, d, &w.out_norm, self.eps);
    }
}

/// `x W^T + b` for the `n x k` rows `x` and the `m x k` weight `w` (PyTorch's layout).
fn linear(x: &[f32], n: usize, k: usize, w: &[f32], b: &[f32], m: usize) -> Vec<f32> {
    // Cannot fail: every caller passes states of `n x k` it made and a weight and bias whose
    // shapes `Bert::from_safetensors` checked against the config. It stays a check because
    // the unsafe product below would read out of bounds if that ever stopped being true.
    assert!(x.len() >= n * k && w.len() >= m * k && b.len() == m);
    let mut out: Vec<f32> = (0..n).flat_map(|_| b.iter().copied()).collect();
    // SAFETY (of the call): x is n x k row-major, w read as its transpose (k x m: row
    // stride 1, column stride k) and out is n x m, all within the lengths asserted above.
    unsafe {
        matrixmultiply::sgemm(
            n,
            k,
            m,
            1.0,
            x.as_ptr(),
            k as isize,
            1,
            w.as_ptr(),
            1,
            k as isize,
            1.0,
            out.as_mut_ptr(),
            m as isize,
            1,
        );
    }
    out
}

fn layer_norm(x: &mut [f32], d: usize, (gamma, beta): &(Vec<f32>, Vec<f32>), eps: f32) {
    for row in x.chunks_exact_mut(d) {
        let mean = row.iter().sum::<f32>() / d as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for j in 0..d {
            row[j] = (row[j] - mean) * inv * gamma[j] + beta[j];
        }
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    row.iter_mut().for_each(|v| *v /= sum);
}

/// BERT's exact GELU, `x Φ(x)`.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}
