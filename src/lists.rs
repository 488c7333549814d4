//! The adjacency lists of the nodes a store made in this process, and the entries appended to
//! the rows of a base array since it was laid out ([`Lists`]): a pointer and a length a list,
//! its capacity implied by its length.
//!
//! A bulk load makes every node's list on the heap, one allocation each. As `Vec`s they cost a
//! 24-byte header a node (pointer, capacity, length), 480 MB of a 100M-edge graph of 20M nodes.
//! Here a list's capacity is [`capacity_for`] its length: a short list (up to [`EXACT_LIST`]
//! entries) is allocated to its length exactly, which suits lists that grow by a few entries
//! a batch (the allocator grows such a block in place within its size class), and a longer one
//! (a hub, appended to by most batches) to the next step of a series that grows by half, so
//! that it is not copied each batch. A list then costs 12 bytes of header.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::graph::AdjEntry;

/// Lists up to this many entries are allocated to their length exactly.
const EXACT_LIST: usize = 64;

/// The capacity a list of `len` entries is allocated with: `len` up to [`EXACT_LIST`], then the
/// first of 64, 96, 144, … (each half again the one before) that holds it.
pub(crate) fn capacity_for(len: usize) -> usize {
    if len <= EXACT_LIST {
        return len;
    }
    let mut cap = EXACT_LIST;
    while cap < len {
        cap = cap.saturating_add(cap / 2);
    }
    cap
}

/// The layout of `cap` entries: none past what a `Vec` of them could hold either (a list
/// that long, 2^59 entries, cannot have been made).
fn layout(cap: usize) -> Layout {
    match Layout::array::<AdjEntry>(cap) {
        Ok(l) => l,
        Err(_) => alloc::handle_alloc_error(Layout::new::<AdjEntry>()),
    }
}

/// Lists by index (see the module doc). Index `i`'s entries are `lens[i]` entries at
/// `starts[i]`, in an allocation of `capacity_for(lens[i])` entries (none for an empty list,
/// whose start dangles).
#[derive(Default)]
pub(crate) struct Lists {
    starts: Vec<NonNull<AdjEntry>>,
    lens: Vec<u32>,
}

// SAFETY: `Lists` owns the allocations its pointers name, as a `Vec<Vec<AdjEntry>>` would: no
// other value points into them, and `AdjEntry` is plain data.
unsafe impl Send for Lists {}
// SAFETY: as for `Send`; a shared `&Lists` only reads.
unsafe impl Sync for Lists {}

impl std::fmt::Debug for Lists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lists")
            .field("lists", &self.len())
            .field(
                "entries",
                &self.lens.iter().map(|l| *l as usize).sum::<usize>(),
            )
            .finish()
    }
}

impl Clone for Lists {
    fn clone(&self) -> Self {
        let mut copy = Lists::default();
        copy.grow_to(self.len());
        for i in 0..self.len() {
            copy.append(i, self.get(i).unwrap_or_default().iter().copied());
        }
        copy
    }
}

impl Drop for Lists {
    fn drop(&mut self) {
        for i in 0..self.len() {
            self.free(i);
        }
    }
}

impl Lists {
    /// How many lists (empty ones included).
    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Makes lists up to index `n - 1`, the new ones empty.
    pub(crate) fn grow_to(&mut self, n: usize) {
        if n > self.len() {
            self.starts.resize(n, NonNull::dangling());
            self.lens.resize(n, 0);
        }
    }

    /// The entries of list `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&[AdjEntry]> {
        let (start, len) = (*self.starts.get(i)?, *self.lens.get(i)? as usize);
        // SAFETY: `len` entries at `start` are initialised (see the struct doc); a dangling
        // start goes with a length of 0, which `from_raw_parts` allows.
        Some(unsafe { std::slice::from_raw_parts(start.as_ptr(), len) })
    }

    /// The length of list `i`, without reading it.
    #[inline]
    pub(crate) fn list_len(&self, i: usize) -> Option<usize> {
        self.lens.get(i).map(|l| *l as usize)
    }

    /// Fetches ahead the length of list `i` ([`Lists::list_len`]).
    #[inline]
    pub(crate) fn prefetch_len(&self, i: usize) {
        if let Some(len) = self.lens.get(i) {
            crate::mapped::prefetch_read(len);
        }
    }

    /// Fetches ahead the first entries of list `i` (its start and length fetched before).
    #[inline]
    pub(crate) fn prefetch_list(&self, i: usize) {
        if let Some(first) = self.get(i).and_then(<[AdjEntry]>::first) {
            crate::mapped::prefetch_read(first);
        }
    }

    /// The entries of list `i`, to change in place.
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut [AdjEntry]> {
        let (start, len) = (*self.starts.get(i)?, *self.lens.get(i)? as usize);
        // SAFETY: as in `get`, and `&mut self` makes this the only reference.
        Some(unsafe { std::slice::from_raw_parts_mut(start.as_ptr(), len) })
    }

    /// Moves list `i` (below [`Lists::len`]) to an allocation of `cap` entries, keeping the
    /// first `cap` of its entries if it held more. Its length (which says how large its
    /// allocation is) is then at most `cap`.
    fn reallocate(&mut self, i: usize, cap: usize) {
        let len = self.lens[i] as usize;
        let old_cap = capacity_for(len);
        if cap == old_cap {
            return;
        }
        if cap == 0 {
            self.free(i);
            return;
        }
        let start = self.starts[i];
        let moved = if old_cap == 0 {
            // SAFETY: `layout(cap)` has a non-zero size (`cap > 0`, entries are 16 bytes).
            unsafe { alloc::alloc(layout(cap)) }
        } else {
            // SAFETY: `start` was allocated with `layout(old_cap)` (`old_cap > 0`), and the new
            // size is non-zero and, being a valid layout's, does not overflow `isize`.
            unsafe { alloc::realloc(start.as_ptr().cast(), layout(old_cap), layout(cap).size()) }
        };
        match NonNull::new(moved.cast::<AdjEntry>()) {
            Some(p) => self.starts[i] = p,
            None => alloc::handle_alloc_error(layout(cap)),
        }
        // Entries cut off are plain data: nothing to drop.
        self.lens[i] = len.min(cap) as u32;
    }

    /// Frees list `i`'s allocation, leaving it empty.
    fn free(&mut self, i: usize) {
        let cap = capacity_for(self.lens[i] as usize);
        if cap > 0 {
            // SAFETY: the list was allocated with `layout(cap)`.
            unsafe { alloc::dealloc(self.starts[i].as_ptr().cast(), layout(cap)) };
        }
        self.starts[i] = NonNull::dangling();
        self.lens[i] = 0;
    }

    /// Appends `entries` to list `i`, made first if need be (growing it once for all of them).
    pub(crate) fn append(&mut self, i: usize, entries: impl ExactSizeIterator<Item = AdjEntry>) {
        self.grow_to(i + 1);
        let len = self.lens[i] as usize;
        // A list longer than `u32::MAX` entries (64 GiB) is not made: its length would not fit.
        let want = len.saturating_add(entries.len()).min(u32::MAX as usize);
        self.reallocate(i, capacity_for(want));
        let start = self.starts[i].as_ptr();
        let mut written = len;
        for e in entries.take(want - len) {
            // SAFETY: `written < want <= capacity_for(want)`, within the allocation.
            unsafe { start.add(written).write(e) };
            written += 1;
        }
        self.lens[i] = want as u32;
        if written < want {
            // Fewer given than the iterator said: the list holds what was given, in an
            // allocation sized to it (the slots past it were never read).
            self.reallocate(i, capacity_for(written));
            self.lens[i] = written as u32;
        }
    }

    /// Removes entry `at` of list `i`, keeping the order of the others; what it was.
    pub(crate) fn remove(&mut self, i: usize, at: usize) -> Option<AdjEntry> {
        let list = self.get_mut(i)?;
        let removed = *list.get(at)?;
        list.copy_within(at + 1.., at);
        let left = list.len() - 1;
        self.reallocate(i, capacity_for(left));
        self.lens[i] = left as u32;
        Some(removed)
    }

    /// Empties list `i`, giving back its allocation.
    pub(crate) fn clear(&mut self, i: usize) {
        if i < self.len() {
            self.free(i);
        }
    }

    /// Heap bytes: the headers and each list's allocation.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.starts.capacity() * std::mem::size_of::<NonNull<AdjEntry>>()
            + self.lens.capacity() * std::mem::size_of::<u32>()
            + self
                .lens
                .iter()
                .map(|l| capacity_for(*l as usize) * std::mem::size_of::<AdjEntry>())
                .sum::<usize>()
    }

    /// The capacity of list `i`'s allocation, in entries.
    #[cfg(test)]
    pub(crate) fn capacity(&self, i: usize) -> usize {
        self.list_len(i).map_or(0, capacity_for)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EdgeId, NodeId};
    use proptest::prelude::*;

    fn entry(n: u32) -> AdjEntry {
        AdjEntry::new(NodeId(n), EdgeId(n), n % 7, 0.5, n.is_multiple_of(2))
    }

    #[test]
    fn capacities_are_exact_while_short_then_grow_by_half() {
        assert_eq!(
            [0, 1, 5, 64, 65, 96, 97, 145].map(capacity_for),
            [0, 1, 5, 64, 96, 96, 144, 216]
        );
        for len in 0..100_000 {
            let cap = capacity_for(len);
            assert!(
                cap >= len && (len <= EXACT_LIST || cap <= len * 3 / 2 + 1),
                "{len}"
            );
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Append(usize, u8),
        Remove(usize, usize),
        Clear(usize),
        Change(usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..12usize, 0..80u8).prop_map(|(i, n)| Op::Append(i, n)),
            2 => (0..12usize, 0..200usize).prop_map(|(i, at)| Op::Remove(i, at)),
            1 => (0..12usize).prop_map(Op::Clear),
            1 => (0..12usize, 0..200usize).prop_map(|(i, at)| Op::Change(i, at)),
        ]
    }

    proptest! {
        /// Any run of appends, removals, clears and changes in place leaves the lists as a
        /// vector of vectors, each allocated to the capacity its length implies; a copy
        /// reads the same.
        #[test]
        fn lists_read_as_vectors(ops in proptest::collection::vec(op(), 0..200)) {
            let mut lists = Lists::default();
            let mut model: Vec<Vec<AdjEntry>> = Vec::new();
            let mut next = 0u32;
            for op in ops {
                match op {
                    Op::Append(i, n) => {
                        let new: Vec<AdjEntry> = (next..next + u32::from(n)).map(entry).collect();
                        next += u32::from(n);
                        lists.append(i, new.iter().copied());
                        if model.len() <= i {
                            model.resize(i + 1, Vec::new());
                        }
                        model[i].extend(new);
                    }
                    Op::Remove(i, at) => {
                        let want = model.get_mut(i).filter(|l| at < l.len()).map(|l| l.remove(at));
                        prop_assert_eq!(lists.remove(i, at), want);
                    }
                    Op::Clear(i) => {
                        lists.clear(i);
                        if let Some(l) = model.get_mut(i) {
                            l.clear();
                        }
                    }
                    Op::Change(i, at) => {
                        if let Some(e) = lists.get_mut(i).and_then(|l| l.get_mut(at)) {
                            e.confidence = 0.25;
                        }
                        if let Some(e) = model.get_mut(i).and_then(|l| l.get_mut(at)) {
                            e.confidence = 0.25;
                        }
                    }
                }
            }
            prop_assert!(lists.len() <= model.len());
            let copy = lists.clone();
            for (i, want) in model.iter().enumerate() {
                let got = lists.get(i).unwrap_or_default();
                prop_assert_eq!(got, &want[..]);
                prop_assert_eq!(copy.get(i).unwrap_or_default(), &want[..]);
                prop_assert_eq!(lists.list_len(i).unwrap_or(0), want.len());
                prop_assert_eq!(lists.capacity(i), capacity_for(want.len()));
            }
        }
    }

    /// An iterator that says it yields more than it does leaves the list with what it gave.
    #[test]
    fn an_iterator_short_of_its_length_appends_what_it_gives() {
        struct Liar(std::vec::IntoIter<AdjEntry>);
        impl Iterator for Liar {
            type Item = AdjEntry;
            fn next(&mut self) -> Option<AdjEntry> {
                self.0.next()
            }
        }
        impl ExactSizeIterator for Liar {
            fn len(&self) -> usize {
                self.0.len() + 100
            }
        }
        let mut lists = Lists::default();
        lists.append(3, (0..70).map(entry));
        lists.append(3, Liar((70..75).map(entry).collect::<Vec<_>>().into_iter()));
        assert_eq!(lists.get(3).unwrap().len(), 75);
        assert_eq!(lists.capacity(3), capacity_for(75));
        assert_eq!(lists.get(3).unwrap()[74], entry(74));
        assert_eq!(lists.get(0), Some(&[][..]));
    }
}
