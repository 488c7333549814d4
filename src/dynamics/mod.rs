//! Memory dynamics: how what the store holds changes in weight with time, without anything
//! being written by a read.
//!
//! - [`decay`]: an edge's *effective* confidence fades with the world time since it was last
//!   seen, per relation, and is restored when an event re-confirms it.

pub mod decay;

pub use decay::DecayPolicy;
