//! Views folded from events rather than projected from their assertions: the working memory
//! (`WM` events, `dynamics::working`) and the usage ledger (`USAGE` events,
//! `dynamics::usage`). Each is kept in the meta table, rewritten by the batch that changes it,
//! and recomputed by replay, which `verify` compares.

use crate::codec::encode;
use crate::dynamics::usage::{UsageLedger, USAGE};
use crate::dynamics::working::WorkingMemory;
use crate::error::Result;
use crate::model::Event;
use crate::storage::{Backend, Table, WriteBatch};

use super::read_meta;

/// The working memory's meta record.
const META_WM: &[u8] = b"working_memory";
/// The usage ledger's meta record.
const META_USAGE: &[u8] = b"usage";

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Folds {
    pub wm: WorkingMemory,
    pub usage: UsageLedger,
}

impl Folds {
    pub fn apply(&mut self, ev: &Event) {
        self.wm.apply(ev);
        self.usage.apply(ev);
    }

    /// The folds as stored (defaults for a store made before a record existed, whose log
    /// then has no event that changes it).
    pub fn read(backend: &dyn Backend) -> Result<Folds> {
        Ok(Folds {
            wm: read_meta(backend, META_WM)?,
            usage: read_meta(backend, META_USAGE)?,
        })
    }

    /// Puts every record into `batch` (a rebuild).
    pub fn put_all(&self, batch: &mut WriteBatch) {
        batch.put(Table::Meta, META_WM, encode(&self.wm));
        batch.put(Table::Meta, META_USAGE, encode(&self.usage));
    }

    /// Puts into `batch` the records that `events`, appended after this state, change. The
    /// ledger is copied only for a batch with a `USAGE` event (it grows with what was ever
    /// used; working memory is small).
    pub fn put_changes(&self, events: &[Event], batch: &mut WriteBatch) {
        let mut wm = self.wm.clone();
        for ev in events {
            wm.apply(ev);
        }
        if wm != self.wm {
            batch.put(Table::Meta, META_WM, encode(&wm));
        }
        if events.iter().any(|e| e.kind == USAGE) {
            let mut usage = self.usage.clone();
            for ev in events {
                usage.apply(ev);
            }
            batch.put(Table::Meta, META_USAGE, encode(&usage));
        }
    }

    /// How `self` (called `this`) differs from `other` (called `that`), one line per view.
    pub fn differences(&self, this: &str, other: &Folds, that: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.wm != other.wm {
            out.push(format!(
                "working memory: {this} {:?}, {that} {:?}",
                self.wm, other.wm
            ));
        }
        if self.usage != other.usage {
            let first_difference = self
                .usage
                .iter()
                .zip(other.usage.iter())
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!(", first difference {a:?} vs {b:?}"))
                .unwrap_or_default();
            out.push(format!(
                "usage ledger: {this} has {} items, {that} {}{first_difference}",
                self.usage.len(),
                other.usage.len()
            ));
        }
        out
    }
}
