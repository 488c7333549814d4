//! Memory dynamics: how what the store holds changes in weight with time, without anything
//! being written by a read.
//!
//! - [`salience`]: how much an event matters (survival, novelty, social value), scored at
//!   ingest and stored in the log; nodes and edges take it from the events that assert them;
//! - [`decay`]: an edge's *effective* confidence fades with the world time since it was last
//!   seen, per relation, and is restored when an event re-confirms it.

pub mod decay;
pub mod salience;

pub use decay::DecayPolicy;
pub use salience::SaliencePolicy;
