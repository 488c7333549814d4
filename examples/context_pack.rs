//! Retrieval for an LLM router: a small passage corpus, the text graph extracted from it, and
//! a context pack for a two-hop question, fitted to a token budget, with each snippet's score
//! parts, provenance and the path that explains it.
//!
//! cargo run --example context_pack

use loci::ingest::{self, Format};
use loci::retrieval::{RetrieveOptions, Retriever, SnippetKind, Tokenizer};
use loci::{BackendKind, Store};

const CORPUS: &str = r#"{"id": "p1", "title": "Glimmer (film)", "text": "Glimmer is a 1999 drama film directed by Orla Venn with music composed by Tomas Brill."}
{"id": "p2", "title": "Tomas Brill", "text": "Tomas Brill (1950 - 2011) was a Danish musician. Brill was born in Aarhus."}
{"id": "p3", "title": "Orla Venn", "text": "Orla Venn is an Irish director born in Cork."}
{"id": "p4", "title": "Glimmer (band)", "text": "Glimmer is a rock band from Leeds."}
"#;

fn main() -> loci::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| loci::Error::Io {
        path: "tempdir".into(),
        source: e,
    })?;
    let store = Store::create(dir.path().join("corpus"), BackendKind::Redb)?;
    ingest::read_str("corpus.jsonl", CORPUS, Format::Passages)?.commit(&store)?;
    // No triples: build entities and MENTIONS edges from the text itself.
    store.ingest(loci::extract::extract_mentions(&store)?)?;
    store.ingest(loci::extract::alias_links(&store)?)?;

    let retriever = Retriever::new(&store)?;
    let opts = RetrieveOptions::default()
        .with_k(3)
        .with_budget(80)
        .with_kinds([SnippetKind::Passage])
        .with_token_counter(Tokenizer::Cl100kBase);
    let pack = retriever.retrieve("Where was the composer of film Glimmer born?", &opts)?;
    for s in &pack.snippets {
        println!("{:.3} {} ({} tokens): {}", s.score, s.id, s.tokens, s.text);
        for why in &s.why {
            println!("      {why}");
        }
    }
    println!(
        "{} of 80 tokens used; cut: {:?}",
        pack.tokens_used,
        pack.cut.iter().map(|c| &c.id).collect::<Vec<_>>()
    );
    Ok(())
}
