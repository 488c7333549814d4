//! Memory dynamics: how what the store holds changes in weight with time, without anything
//! being written by a read.
//!
//! - [`salience`]: how much an event matters (survival, novelty, social value), scored at
//!   ingest and stored in the log; nodes and edges take it from the events that assert them;
//! - [`decay`]: an edge's *effective* confidence fades with the world time since it was last
//!   seen, per relation, and is restored when an event re-confirms it; a fact touching a pinned
//!   node (`Store::pin`, a `PIN` event) decays no lower than a floor;
//! - [`deletion`]: deleting and forgetting events as events of the log, with their support
//!   withdrawn from every edge, and compaction that leaves tombstones in their place;
//! - [`consolidate`]: raw events rolled up into SUMMARY events (episodes, days, weeks);
//! - [`forget`]: the store kept within a budget of events, evicting the lowest retention first,
//!   never the last support of a belief or what is not yet summarised;
//! - [`usage`]: which items reads returned, flushed in batches as `USAGE` events; hot and warm
//!   tiers;
//! - [`working`]: working memory (recent observations, mainline, intent, subgoals, threats,
//!   promises) as `WM` events, cleared by sleep or idleness;
//! - [`health`]: the health check (`loci check`): dangling pins, likely duplicates, tiers over
//!   their caps, summaries whose children are gone.

pub mod consolidate;
pub mod decay;
pub mod deletion;
pub mod forget;
pub mod health;
pub mod places;
pub mod salience;
pub mod usage;
pub mod working;

pub use decay::DecayPolicy;
pub use salience::SaliencePolicy;

/// Reads a policy file (JSON); errors name the file, its line and `what`.
/// A policy file's value out of range (`validate`'s [`crate::Error::InvalidArgument`]) as an
/// error naming the file, as its syntax errors do: it named no file, so a user could not tell
/// why every command on the store failed.
fn refused_in(path: &std::path::Path, e: crate::Error) -> crate::Error {
    match e {
        crate::Error::InvalidArgument { name, message } => crate::Error::Input {
            file: path.display().to_string(),
            line: 0,
            field: name,
            message,
        },
        e => e,
    }
}

fn read_policy<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    what: &str,
) -> crate::Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| crate::Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| crate::Error::Input {
        file: path.display().to_string(),
        line: e.line(),
        field: what.into(),
        message: e.to_string(),
    })
}
