//! Values by edge id that a batch's new edges share ([`RunColumn`]): when each edge was last
//! seen ([`LastSeen`]), and its salience (`store/edge_table.rs`). Runs of ids for a state
//! built in this process, a vector (over the snapshot's column, for one opened from it) where
//! runs would not be smaller.
//!
//! The store gives new edges increasing ids, and every new edge of a batch takes its event's
//! time and salience, so a state built by a load or a replay holds long runs of one value: a
//! run per event, where a vector of times held eight bytes an edge (800 MB at 100M edges,
//! most of a bulk load's heap after its lists and edge slots), and one of saliences four.
//! Where runs would not be smaller (every edge seen at its own time), the values fall back
//! to a vector.

use std::collections::HashMap;

use crate::graph::BuildIdHasher;
use crate::mapped::Layered;
use crate::packed::Packable;

/// Ids per entry of [`Runs::directory`].
const DIRECTORY_STEP: usize = 64;

/// Values by edge id; the default (0) for an id never set.
#[derive(Clone, Debug)]
pub(crate) enum RunColumn<T> {
    Runs(Runs<T>),
    Vector(Layered<T>),
}

/// Last-seen times by edge id; 0 for an id never set.
pub(crate) type LastSeen = RunColumn<i64>;

impl<T> Default for RunColumn<T> {
    fn default() -> Self {
        RunColumn::Runs(Runs::default())
    }
}

/// Ids `starts[k]..starts[k + 1]` have the value `times[k]`, up to `len`; ids set again
/// since to other values are in `changed`.
#[derive(Clone, Debug)]
pub(crate) struct Runs<T> {
    starts: Vec<u32>,
    times: Vec<T>,
    len: usize,
    /// The run holding id `j * DIRECTORY_STEP`, for each `j`: a read starts there and steps
    /// over the few runs that begin before its id, where a binary search over a million runs
    /// would cost twenty misses.
    directory: Vec<u32>,
    changed: HashMap<u32, T, BuildIdHasher>,
}

impl<T> Default for Runs<T> {
    fn default() -> Self {
        Runs {
            starts: Vec::new(),
            times: Vec::new(),
            len: 0,
            directory: Vec::new(),
            changed: HashMap::default(),
        }
    }
}

impl<T: Copy + Eq + Default> Runs<T> {
    fn get(&self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        if !self.changed.is_empty() {
            if let Some(t) = self.changed.get(&(i as u32)) {
                return Some(*t);
            }
        }
        let mut k = *self.directory.get(i / DIRECTORY_STEP)? as usize;
        while self.starts.get(k + 1).is_some_and(|s| *s as usize <= i) {
            k += 1;
        }
        self.times.get(k).copied()
    }

    /// Gives id `len` the value `time`.
    fn push(&mut self, time: T) {
        if self.times.last() != Some(&time) {
            self.starts.push(self.len as u32);
            self.times.push(time);
        }
        if self.len.is_multiple_of(DIRECTORY_STEP) {
            self.directory.push(self.starts.len() as u32 - 1);
        }
        self.len += 1;
    }

    fn set(&mut self, edge: usize, time: T) {
        if edge < self.len {
            if self.get(edge) != Some(time) {
                self.changed.insert(edge as u32, time);
            }
        } else {
            while self.len < edge {
                self.push(T::default());
            }
            self.push(time);
        }
    }

    /// Whether a vector of the values would take less memory than the runs do.
    fn vector_is_smaller(&self) -> bool {
        let value = std::mem::size_of::<T>();
        let runs = self.starts.len() * (4 + value) + self.changed.len() * (8 + value);
        runs > 4096 && runs > self.len * value
    }

    fn heap_bytes(&self) -> usize {
        let value = std::mem::size_of::<T>();
        self.starts.capacity() * 4
            + self.times.capacity() * value
            + self.directory.capacity() * 4
            // A map slot: the id, the value and a control byte.
            + self.changed.capacity() * (4 + value + 1)
    }
}

impl<T: Packable + Eq + Default> RunColumn<T> {
    /// The value of `edge`; `None` past the ids set or where the map is damaged.
    #[inline]
    pub(crate) fn get(&self, edge: usize) -> Option<T> {
        match self {
            RunColumn::Runs(r) => r.get(edge),
            RunColumn::Vector(v) => v.get(edge),
        }
    }

    /// Sets the value of `edge` (ids skipped on the way read the default).
    pub(crate) fn set(&mut self, edge: usize, time: T) {
        if let RunColumn::Runs(r) = self {
            if edge < u32::MAX as usize {
                r.set(edge, time);
                if !r.vector_is_smaller() {
                    return;
                }
            }
            let times = (0..r.len).map(|i| r.get(i).unwrap_or_default()).collect();
            *self = RunColumn::Vector(Layered::Owned(times));
        }
        if let RunColumn::Vector(v) = self {
            v.set(edge, time, T::default());
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            RunColumn::Runs(r) => r.heap_bytes(),
            RunColumn::Vector(v) => v.heap_bytes(),
        }
    }

    /// Checks every mapped block now; whether all are sound.
    pub(crate) fn check_all(&self) -> bool {
        match self {
            RunColumn::Runs(_) => true,
            RunColumn::Vector(v) => v.check_all(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A bulk load's times (a run per event) take a run each, not a vector.
    #[test]
    fn a_time_per_event_takes_a_run_per_event() {
        let mut t = LastSeen::default();
        for e in 0..100_000usize {
            t.set(e, 1_000 + (e / 850) as i64);
        }
        let LastSeen::Runs(r) = &t else {
            panic!("became a vector")
        };
        assert_eq!(r.starts.len(), 118);
        assert!(t.heap_bytes() < 100_000 / 8, "{} bytes", t.heap_bytes());
        assert_eq!(t.get(0), Some(1_000));
        assert_eq!(t.get(99_999), Some(1_000 + 99_999 / 850));
        assert_eq!(t.get(100_000), None);
    }

    /// Times that each differ fall back to a vector.
    #[test]
    fn a_time_per_edge_falls_back_to_a_vector() {
        let mut t = LastSeen::default();
        for e in 0..10_000usize {
            t.set(e, e as i64 * 7);
        }
        assert!(matches!(t, LastSeen::Vector(_)));
        assert!((0..10_000).all(|e| t.get(e) == Some(e as i64 * 7)));
    }

    proptest! {
        /// Any sequence of sets reads back as a vector of the same sets does.
        #[test]
        fn reads_as_a_vector(sets in proptest::collection::vec((0..3_000usize, 0..4i64), 0..400)) {
            let mut t = LastSeen::default();
            let mut want: Vec<i64> = Vec::new();
            let steps = sets.len();
            for (step, (e, time)) in sets.into_iter().enumerate() {
                // Mostly appends, as a store makes them; some sets of old ids and gaps.
                let e = if e % 3 == 0 { e } else { want.len() + e % 2 };
                t.set(e, time);
                if want.len() <= e {
                    want.resize(e + 1, 0);
                }
                want[e] = time;
                // Every id after every 16th set and the last (each set, all of them, was 20 s
                // of a debug build's tests); the set id and its neighbours after each.
                let every = step % 16 == 15 || step + 1 == steps;
                let ids = if every {
                    0..want.len()
                } else {
                    e.saturating_sub(1)..want.len().min(e + 2)
                };
                for i in ids {
                    prop_assert_eq!(t.get(i), Some(want[i]), "id {}", i);
                }
                prop_assert_eq!(t.get(want.len()), None);
            }
        }
    }
}
