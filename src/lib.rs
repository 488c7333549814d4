//! # loci
//!
//! A memory for autonomous agents: an append-only event log from which a property graph
//! (nodes, typed edges with confidence, validity and provenance), an in-memory adjacency and a
//! full-text index are derived, and from which they can be rebuilt exactly.
//!
//! Modules, in data-flow order (ARCHITECTURE.md walks through each):
//! - [`model`]: nodes, edges, events and the assertions events carry; [`error`]: the one
//!   error type, which says where and what was expected;
//! - [`codec`], [`storage`]: versioned records in ordered tables behind one [`Backend`] trait
//!   (redb, sled); [`boundary`]: the panic boundary around the calls into redb, sled and
//!   tantivy that read their files, which can panic on a damaged one;
//! - `projection`: the deterministic function from events to graph changes;
//! - [`graph`]: the in-memory adjacency and traversals, over the columns of [`pages`],
//!   [`packed`] and [`mapped`] (and the private `lists` and `times`): what a load appends to,
//!   and what is read in place from the state snapshot; [`text`]: the tantivy index;
//! - [`store`]: the [`Store`] tying them together (ingest, reads, replay verification);
//! - [`ingest`]: JSON Lines readers for events, graphs, passages and triples; what becomes
//!   events without an LLM: [`observe`] (tool calls), [`conversation`] (chats), [`journal`]
//!   (agents' notes) and [`extract`] (entities named in passages);
//! - [`retrieval`]: GraphRAG, a question in and ranked snippets out, with [`embed`]'s
//!   sentence encoder where one is given; [`query`]: the planner query language;
//!   [`queries`]: the seed questions as functions;
//! - [`dynamics`]: how memory changes with time: salience, decay of confidence (computed on
//!   read), deletion and forgetting as events, consolidation into summaries;
//! - [`context`]: the prompt context of a turn (cover of summaries, snippets, working memory,
//!   the latest events) in an exact token budget with a stable prefix;
//! - [`serve`]: the HTTP/JSON and MCP server; [`world`]: the deterministic synthetic block
//!   world; [`bench`](mod@bench): the benchmark workloads.
//!
//! ```no_run
//! use loci::{BackendKind, Store, EventDraft};
//! # fn main() -> loci::Result<()> {
//! let store = Store::create("/tmp/my-store", BackendKind::Redb)?;
//! let commit = store.ingest(vec![EventDraft::new(0, "bot", "OBSERVATION")])?;
//! assert_eq!(commit.last_seq, 1);
//! # Ok(()) }
//! ```

// Docs link to private items where that is where the reason lives (a reader of the source
// follows them); `cargo doc --document-private-items` renders them.
#![allow(rustdoc::private_intra_doc_links)]

pub mod bench;
pub mod boundary;
pub mod codec;
pub mod context;
pub mod conversation;
pub mod dynamics;
pub mod embed;
pub mod error;
pub mod extract;
pub mod graph;
pub mod ingest;
pub mod journal;
mod lists;
pub mod mapped;
pub mod model;
pub mod observe;
pub mod packed;
pub mod pages;
mod projection;
pub mod queries;
pub mod query;
pub mod retrieval;
#[cfg(feature = "serve")]
pub mod serve;
pub mod storage;
pub mod store;
pub mod text;
mod times;
pub mod world;

pub use dynamics::deletion::{DeleteReport, DeleteRequest};
pub use error::{Error, Result};
pub use graph::{Direction, TraversalFilter};
pub use model::{
    Assertion, Edge, EdgeId, EdgeUpsert, Event, EventDraft, Node, NodeId, NodeUpsert, Value,
};
pub use projection::Counters;
pub use retrieval::{
    ContextPack, RetrieveOptions, Retriever, RetrieverCache, Snippet, SnippetKind, Tokenizer,
};
pub use storage::{Backend, BackendKind};
pub use store::{
    Commit, CompactReport, ExpandOptions, NameOf, Neighbor, OpenTimings, Past, PastState,
    StateBytes, StateSource, Stats, Store, VerifyReport,
};
pub use text::{Hit, SearchFilter, Target};
