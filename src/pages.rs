//! A vector that grows in pages that never move ([`Pages`]), for the columns a load appends
//! to by the million: the edge cores of a table built in this process, and the tail of a
//! column read from the snapshot (`crate::mapped::Layered`).
//!
//! A `Vec` doubles as it grows: each doubling copies every item and holds both blocks at
//! once, 134 MB at the 8.4 millionth edge core of a 10M-edge load. Here page `k` holds
//! [`FIRST_PAGE`] times `2^k` items, allocated whole when the first of them is set and filled
//! as ids come: the part past the last item set is never written, so it is not resident, and
//! nothing already placed moves. Pages of one size (64 KiB) had cost a 100M-edge load 4.8
//! B/edge more resident than the vector (peak 82.7 against 77.6-77.9, one run), most likely as
//! the allocator mixes such blocks with a batch's in its pages, where it maps a block of many
//! megabytes on its own.

/// Items of the first page; page `k` holds this many times `2^k`.
pub const FIRST_PAGE: usize = 4096;

/// The page item `i` is in, and its place there.
#[inline]
pub fn page_of(i: usize) -> (usize, usize) {
    let q = i / FIRST_PAGE + 1;
    let page = q.ilog2() as usize;
    (page, i - FIRST_PAGE * ((1 << page) - 1))
}

/// Items by index in pages that double (see the module doc). Every index below
/// [`Pages::len`] reads as an item: one set, or the fill it was grown with.
#[derive(Clone, Debug)]
pub struct Pages<T> {
    pages: Vec<Vec<T>>,
    len: usize,
}

// Not derived: that would ask `T: Default`.
impl<T> Default for Pages<T> {
    fn default() -> Self {
        Pages {
            pages: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Copy> Pages<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Item `i`; `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let (page, at) = page_of(i);
        self.pages.get(page)?.get(at)
    }

    /// Sets item `i`, first growing the pages to hold it with `fill`.
    pub fn set(&mut self, i: usize, value: T, fill: T) {
        self.grow(i + 1, fill);
        let (page, at) = page_of(i);
        self.pages[page][at] = value;
    }

    /// Grows to `len` items, the new ones `fill` (never shrinks).
    pub fn grow(&mut self, len: usize, fill: T) {
        if len <= self.len {
            return;
        }
        let (last, at) = page_of(len - 1);
        while self.pages.len() <= last {
            let items = FIRST_PAGE << self.pages.len();
            self.pages.push(Vec::with_capacity(items));
        }
        // Pages fill in order: those before the one holding the last item are full already,
        // those after it up to the last fill whole, and the last fills to `at`.
        let first = self.len.checked_sub(1).map_or(0, |end| page_of(end).0);
        for k in first..=last {
            let want = if k == last { at + 1 } else { FIRST_PAGE << k };
            let page = &mut self.pages[k];
            if page.len() < want {
                page.resize(want, fill);
            }
        }
        self.len = len;
    }

    /// The pages' bytes as allocated, the part never written included.
    pub fn heap_bytes(&self) -> usize {
        self.pages
            .iter()
            .map(|p| p.capacity() * std::mem::size_of::<T>())
            .sum::<usize>()
            + self.pages.capacity() * std::mem::size_of::<Vec<T>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items map to pages end to end: each item one place, each page twice the one before.
    #[test]
    fn page_of_places_every_item_once_in_pages_that_double() {
        let mut next = (0, 0);
        for i in 0..FIRST_PAGE * 63 + 5 {
            let (page, at) = page_of(i);
            if (page, at) != next {
                assert_eq!((page, at), (next.0 + 1, 0), "item {i}");
                assert_eq!(next.1, FIRST_PAGE << next.0, "page {} ends early", next.0);
            }
            next = (page, at + 1);
        }
        assert_eq!(page_of(u32::MAX as usize).0, 20);
    }

    /// Growth moves no item already placed (a doubled vector held both copies at once),
    /// allocates at most twice what it holds, and reads items skipped over as the fill.
    #[test]
    fn growing_pages_move_no_item_already_placed() {
        let mut p = Pages::default();
        p.set(0, 7u64, 0);
        let first = p.get(0).map(|v| v as *const u64);
        for i in 1..300_000u64 {
            p.set(i as usize, i * 3, 0);
        }
        assert_eq!(first, p.get(0).map(|v| v as *const u64), "item 0 moved");
        assert!(
            p.heap_bytes() <= 2 * 300_000 * 8 + 4_096,
            "{}",
            p.heap_bytes()
        );
        assert_eq!(p.get(299_999), Some(&899_997));
        assert_eq!(p.get(300_000), None);
        p.set(1_000_000, 1, 9);
        assert_eq!(p.len(), 1_000_001);
        assert_eq!(p.get(300_000), Some(&9));
        assert_eq!(p.get(999_999), Some(&9));
        p.grow(10, 5);
        assert_eq!((p.len(), p.get(5)), (1_000_001, Some(&15)));
    }
}
