//! The memory cover: which summaries of the consolidation hierarchy stand for the past in a
//! section of `cap` tokens.
//!
//! Start from the roots (live summaries that no live summary of a higher level contains: the
//! weeks, and the days and episodes of periods not yet rolled up); while they are over the cap,
//! drop the oldest; give the room the drops left to the newest dropped root's latest parts (its
//! children, newest first, while they fit, then the next one's own children); then, while there
//! is room, split the widest chunk into its children (the live summaries one level down within
//! its range) if they fit in its place. Containment is by
//! time range, not by the children lists, so a day summarised again (a late event) is still
//! under its week. Deterministic: ties go to the older chunk, then the lower sequence number.

use std::collections::BTreeSet;

use crate::dynamics::consolidate::{Level, Placement};

/// The cover of `live` (the latest summary of each range) within `cap` tokens, oldest first.
pub fn cover(
    live: &[Placement],
    cap: usize,
    tokens: &dyn Fn(&Placement) -> usize,
) -> Vec<Placement> {
    cover_and_dropped(live, cap, tokens).0
}

/// [`cover`], and the roots it dropped for want of room that its parts do not stand for whole,
/// oldest first (the newest of them may have its latest parts in the cover).
pub fn cover_and_dropped<'a>(
    live: &'a [Placement],
    cap: usize,
    tokens: &dyn Fn(&Placement) -> usize,
) -> (Vec<Placement>, Vec<&'a Placement>) {
    // Counted when first needed: a store's roots and the parts the walk below looks at are a
    // few of its summaries, and a cost needs the summary's text, which the cover reads only
    // for those (a store of 157k summaries had read all of theirs for each first context).
    let costs: Vec<std::cell::OnceCell<usize>> = vec![std::cell::OnceCell::new(); live.len()];
    let cost = |i: usize| *costs[i].get_or_init(|| tokens(&live[i]));
    // Indexes into `live` of the chunks in the cover.
    let above = Containers::of(live);
    let mut roots: Vec<usize> = (0..live.len())
        .filter(|&i| !above.contain(&live[i]))
        .collect();
    roots.sort_unstable_by_key(|&i| (live[i].start, live[i].seq));
    // The oldest roots go while the rest are over the cap: what stays is the longest run of
    // the newest that fits, found from the newest back (a root that goes is not costed). A
    // search of every root for the oldest at each drop had been most of a first context's
    // time: 2.6-3.1 s of it at 415k events (26,000 weeks), 1.3-1.4 s after.
    let mut total: usize = 0;
    let mut kept_from = roots.len();
    for &older in roots.iter().rev() {
        if total.saturating_add(cost(older)) > cap {
            break;
        }
        total += cost(older);
        kept_from -= 1;
    }
    let mut chosen: BTreeSet<usize> = roots[kept_from..].iter().copied().collect();
    let dropped: Vec<usize> = roots[..kept_from].to_vec();
    let below = Below::of(live);
    let children = |i: usize| below.children(live, i);
    // A root over the cap had gone with all its parts (a week of 486 tokens under a share of
    // 443 left one episode of the past, though its last days fitted): the dropped ones give
    // their latest parts, newest first and without holes, as long as they fit; a root whose
    // parts all fit is stood for by them, and the next older one gives its parts too.
    let mut whole: BTreeSet<usize> = BTreeSet::new();
    for &root in dropped.iter().rev() {
        // A root none of whose parts fit, or whose parts fit only in part, ends the walk:
        // anything older would leave a hole.
        let mut from = root;
        let all_fit = loop {
            let mut kids = children(from);
            if kids.is_empty() {
                break false;
            }
            kids.sort_by_key(|&j| std::cmp::Reverse((live[j].start, live[j].seq)));
            let mut missed = None;
            for j in kids {
                if total + cost(j) > cap {
                    missed = Some(j);
                    break;
                }
                chosen.insert(j);
                total += cost(j);
            }
            match missed {
                // Every part of `from` fit: the root is stood for whole if `from` is it.
                None => break from == root,
                // The first that does not fit: its own latest parts may.
                Some(j) => from = j,
            }
        };
        if !all_fit {
            break;
        }
        whole.insert(root);
    }
    let dropped: Vec<&Placement> = dropped
        .into_iter()
        .filter(|i| !whole.contains(i))
        .map(|i| &live[i])
        .collect();
    if chosen.is_empty() {
        return (Vec::new(), dropped);
    }
    split_widest_while_room(live, (&mut chosen, &mut total), cap, &cost, &children);
    let mut out: Vec<Placement> = chosen.into_iter().map(|i| live[i].clone()).collect();
    out.sort_by_key(|s| (s.start, std::cmp::Reverse(s.level), s.seq));
    (out, dropped)
}

/// Splits the widest chunk of `chosen` (indexes into `live`, of `total` tokens) into its
/// `children` while they fit in its place within `cap`; one that does not is tried no more.
fn split_widest_while_room(
    live: &[Placement],
    (chosen, total): (&mut BTreeSet<usize>, &mut usize),
    cap: usize,
    cost: &dyn Fn(usize) -> usize,
    children: &dyn Fn(usize) -> Vec<usize>,
) {
    // The widest chunk not yet found unsplittable, each time (the older, then the lower
    // number, of two as wide): the top of a heap of those not tried yet, where a search of
    // the cover for each split had made a context of a budget that holds every summary take
    // splits x summaries (a budget of 8M tokens 23 s, of i64::MAX over 15 min at 980k
    // events; helper-120).
    let width = |i: usize| {
        (
            live[i].end.saturating_sub(live[i].start),
            std::cmp::Reverse((live[i].start, live[i].seq)),
            i,
        )
    };
    let mut untried: std::collections::BinaryHeap<_> = chosen.iter().map(|&i| width(i)).collect();
    // Where ranges of a level overlap (an odd store), a chunk may be pushed again: one split
    // since, or found unsplittable, is not tried again, as the search had it.
    let mut unsplittable: BTreeSet<usize> = BTreeSet::new();
    while let Some((_, _, widest)) = untried.pop() {
        if !chosen.contains(&widest) || unsplittable.contains(&widest) {
            continue;
        }
        let kids = children(widest);
        let with_kids = *total - cost(widest) + kids.iter().map(|&j| cost(j)).sum::<usize>();
        if kids.is_empty() || with_kids > cap {
            unsplittable.insert(widest);
            continue;
        }
        chosen.remove(&widest);
        untried.extend(kids.iter().map(|&j| width(j)));
        chosen.extend(kids);
        *total = with_kids;
    }
}

/// The days and the episodes of `live` by start, for finding a summary's children (the live
/// summaries one level down within its range) by a search, where a pass over every summary
/// for each split had made a large cover take splits x summaries.
struct Below {
    /// Indexes into `live` of the days, then of the episodes, each by (start, index).
    days: Vec<usize>,
    episodes: Vec<usize>,
}

impl Below {
    fn of(live: &[Placement]) -> Below {
        let of_level = |level: Level| {
            let mut at: Vec<usize> = (0..live.len())
                .filter(|&i| live[i].level == level)
                .collect();
            at.sort_unstable_by_key(|&i| (live[i].start, i));
            at
        };
        Below {
            days: of_level(Level::Day),
            episodes: of_level(Level::Episode),
        }
    }

    /// The summaries one level below `live[i]` within its range, in the order of `live`.
    fn children(&self, live: &[Placement], i: usize) -> Vec<usize> {
        let outer = &live[i];
        let level = match outer.level {
            Level::Week => &self.days,
            Level::Day => &self.episodes,
            Level::Episode => return Vec::new(),
        };
        let from = level.partition_point(|&j| live[j].start < outer.start);
        let mut kids: Vec<usize> = level[from..]
            .iter()
            .copied()
            .take_while(|&j| live[j].start <= outer.end)
            .filter(|&j| live[j].end <= outer.end)
            .collect();
        kids.sort_unstable();
        kids
    }
}

/// The ranges of the day and week summaries, for finding whether a summary of a lower level
/// lies within one: by a search over the ranges sorted by start, where a pass over every
/// summary for each took 0.7 s of each context on a store of 27k summaries.
struct Containers {
    /// Per level above episodes: (start, the largest end of the ranges up to this one) in
    /// start order. With the running largest end, a range that starts at or before a point
    /// and ends at or after another exists exactly when the entry for the last start at or
    /// before the point reaches the other (ranges of one level may overlap in an odd store).
    levels: [(Level, Vec<(i64, i64)>); 2],
}

impl Containers {
    fn of(live: &[Placement]) -> Containers {
        let ranges = |level: Level| {
            let mut r: Vec<(i64, i64)> = live
                .iter()
                .filter(|s| s.level == level)
                .map(|s| (s.start, s.end))
                .collect();
            r.sort_unstable();
            let mut reach = i64::MIN;
            for (_, end) in r.iter_mut() {
                reach = reach.max(*end);
                *end = reach;
            }
            r
        };
        Containers {
            levels: [
                (Level::Day, ranges(Level::Day)),
                (Level::Week, ranges(Level::Week)),
            ],
        }
    }

    /// Whether a summary of a higher level than `inner`'s covers its range.
    fn contain(&self, inner: &Placement) -> bool {
        self.levels
            .iter()
            .filter(|(level, _)| *level > inner.level)
            .any(|(_, ranges)| {
                let after = ranges.partition_point(|(start, _)| *start <= inner.start);
                after > 0 && ranges[after - 1].1 >= inner.end
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seq: u64, level: Level, start: i64, end: i64) -> Placement {
        Placement {
            seq,
            level,
            start,
            end,
            children: Vec::new(),
        }
    }

    /// A summary's children by a pass over every summary, as the cover had found them.
    fn children_by_a_pass(live: &[Placement], i: usize) -> Vec<usize> {
        let below = match live[i].level {
            Level::Week => Level::Day,
            Level::Day => Level::Episode,
            Level::Episode => return Vec::new(),
        };
        (0..live.len())
            .filter(|&j| live[j].level == below)
            .filter(|&j| live[i].start <= live[j].start && live[j].end <= live[i].end)
            .collect()
    }

    /// The splits as the cover had made them: the widest by a pass over the cover each time.
    fn split_by_passes(
        live: &[Placement],
        (chosen, total): (&mut BTreeSet<usize>, &mut usize),
        cap: usize,
        cost: &dyn Fn(usize) -> usize,
    ) {
        let mut unsplittable: BTreeSet<usize> = BTreeSet::new();
        while let Some(&widest) = (chosen.iter())
            .filter(|i| !unsplittable.contains(i))
            .max_by_key(|&&i| {
                let p = &live[i];
                (p.end - p.start, std::cmp::Reverse((p.start, p.seq)))
            })
        {
            let kids = children_by_a_pass(live, widest);
            let with_kids = *total - cost(widest) + kids.iter().map(|&j| cost(j)).sum::<usize>();
            if kids.is_empty() || with_kids > cap {
                unsplittable.insert(widest);
                continue;
            }
            chosen.remove(&widest);
            chosen.extend(kids);
            *total = with_kids;
        }
    }

    proptest::proptest! {
        /// The children found by a search of the summaries by start, and the splits made
        /// from a heap of the chunks not tried, are those passes over every summary and over
        /// the cover had found (helper-120: those passes made a cover of every summary of a
        /// long store take hours), for hierarchies of any shape, costs and cap.
        #[test]
        fn splits_from_a_heap_and_a_search_are_those_of_passes_over_everything(
            weeks in 1usize..5,
            episodes in proptest::collection::vec(0usize..4, 35),
            widths in proptest::collection::vec(1i64..300, 140),
            costs in proptest::collection::vec(0usize..30, 200),
            room in 0usize..500,
            stride in 1usize..7,
            overlapping in proptest::collection::vec(proptest::bool::ANY, 35),
        ) {
            let mut live = Vec::new();
            let mut seq = 0u64;
            let mut next = || { seq += 1; seq };
            for w in 0..weeks {
                let week = w as i64 * 7000;
                live.push(s(next(), Level::Week, week, week + 6999));
                // And one over half of this week and half of the next.
                if overlapping[w] && w + 1 < weeks {
                    live.push(s(next(), Level::Week, week + 3500, week + 10499));
                }
                for d in 0..7 {
                    let day = week + d * 1000;
                    live.push(s(next(), Level::Day, day, day + 999));
                    // A day over half of this one and half of the next (an odd store's), with
                    // the episodes of both under it.
                    if overlapping[w * 7 + d as usize] && d < 6 {
                        live.push(s(next(), Level::Day, day + 500, day + 1499));
                    }
                    for e in 0..episodes[w * 7 + d as usize] {
                        let at = day + e as i64 * 250;
                        let width = widths[live.len() % widths.len()].min(249);
                        live.push(s(next(), Level::Episode, at, at + width));
                    }
                }
            }
            // Listed in another order than made: ties in `live`'s order must not decide.
            let mut order: Vec<usize> = (0..live.len()).collect();
            order.sort_by_key(|&i| ((i * stride + 3) % 7, std::cmp::Reverse(i)));
            let live: Vec<Placement> = order.iter().map(|&i| live[i].clone()).collect();
            let below = Below::of(&live);
            for i in 0..live.len() {
                proptest::prop_assert_eq!(below.children(&live, i), children_by_a_pass(&live, i));
            }
            let cost = |i: usize| costs[live[i].seq as usize % costs.len()];
            let roots: BTreeSet<usize> =
                (0..live.len()).filter(|&i| live[i].level == Level::Week).collect();
            let total: usize = roots.iter().map(|&i| cost(i)).sum();
            let cap = total + room;
            let (mut heap, mut heap_total) = (roots.clone(), total);
            let children = |i: usize| below.children(&live, i);
            split_widest_while_room(&live, (&mut heap, &mut heap_total), cap, &cost, &children);
            let (mut passes, mut passes_total) = (roots, total);
            split_by_passes(&live, (&mut passes, &mut passes_total), cap, &cost);
            proptest::prop_assert_eq!(heap, passes);
            proptest::prop_assert_eq!(heap_total, passes_total);
        }
    }

    proptest::proptest! {
        /// The roots that go are those dropping the oldest while the rest are over the cap
        /// drops, as that loop had found them, whose costs (zero too) and order are any.
        #[test]
        fn the_roots_that_go_are_the_oldest_while_the_rest_are_over_the_cap(
            costs in proptest::collection::vec(0usize..40, 0..40),
            cap in 0usize..400,
        ) {
            // Weeks (roots without parts) in a shuffled order of their sequence numbers.
            let live: Vec<Placement> = costs
                .iter()
                .enumerate()
                .map(|(i, _)| {
                    let start = ((i * 7) % costs.len().max(1)) as i64 * 1000;
                    s(i as u64 + 1, Level::Week, start, start + 999)
                })
                .collect();
            let tokens = |p: &Placement| costs[(p.seq - 1) as usize];
            let mut left: Vec<usize> = (0..live.len()).collect();
            left.sort_by_key(|&i| (live[i].start, live[i].seq));
            let mut expected_dropped = Vec::new();
            while left.iter().map(|&i| tokens(&live[i])).sum::<usize>() > cap {
                expected_dropped.push(live[left.remove(0)].seq);
            }
            let (cover, dropped) = cover_and_dropped(&live, cap, &tokens);
            let dropped: Vec<u64> = dropped.iter().map(|p| p.seq).collect();
            proptest::prop_assert_eq!(dropped, expected_dropped);
            let kept: Vec<u64> = left.iter().map(|&i| live[i].seq).collect();
            let covered: Vec<u64> = cover.iter().map(|p| p.seq).collect();
            proptest::prop_assert_eq!(covered, kept);
        }
    }

    /// Two weeks of two days each, each day of two episodes; every chunk costs 10 tokens.
    fn hierarchy() -> Vec<Placement> {
        let mut v = Vec::new();
        let mut seq = 0;
        for w in 0..2i64 {
            for d in 0..2i64 {
                let day = w * 2 + d;
                for e in 0..2i64 {
                    seq += 1;
                    v.push(s(
                        seq,
                        Level::Episode,
                        day * 100 + e * 50,
                        day * 100 + e * 50 + 49,
                    ));
                }
                seq += 1;
                v.push(s(seq, Level::Day, day * 100, day * 100 + 99));
            }
            seq += 1;
            v.push(s(seq, Level::Week, w * 200, w * 200 + 199));
        }
        v
    }

    fn levels<S: std::borrow::Borrow<Placement>>(c: &[S]) -> Vec<(Level, i64)> {
        c.iter()
            .map(|s| (s.borrow().level, s.borrow().start))
            .collect()
    }

    #[test]
    fn roots_first_then_the_widest_split_while_it_fits() {
        let h = hierarchy();
        let ten = |_: &Placement| 10;
        assert_eq!(
            levels(&cover(&h, 20, &ten)),
            [(Level::Week, 0), (Level::Week, 200)]
        );
        // Room for one split: the older week (a tie on width) becomes its two days.
        assert_eq!(
            levels(&cover(&h, 30, &ten)),
            [(Level::Day, 0), (Level::Day, 100), (Level::Week, 200)]
        );
        // Over the cap: the oldest root goes first.
        assert_eq!(levels(&cover(&h, 15, &ten)), [(Level::Week, 200)]);
        assert!(cover(&h, 5, &ten).is_empty());
        // Everything fits down to episodes.
        assert_eq!(cover(&h, 80, &ten).len(), 8);
        assert!(cover(&h, 80, &ten)
            .iter()
            .all(|s| s.level == Level::Episode));
    }

    #[test]
    fn the_roots_found_by_search_are_those_no_higher_summary_contains() {
        // The definition, checked over every pair, against the search over sorted ranges,
        // on a hierarchy with days and weeks left out here and there and odd lengths.
        let mut v = Vec::new();
        let mut seq = 0;
        let mut x: u64 = 7;
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        for day in 0..300i64 {
            for e in 0..3i64 {
                seq += 1;
                let start = day * 100 + e * 30 + next(5) as i64;
                v.push(s(seq, Level::Episode, start, start + 20 + next(15) as i64));
            }
            if next(4) > 0 {
                seq += 1;
                v.push(s(
                    seq,
                    Level::Day,
                    day * 100,
                    day * 100 + 99 - next(3) as i64,
                ));
            }
            if day % 7 == 6 && next(3) > 0 {
                seq += 1;
                v.push(s(seq, Level::Week, (day - 6) * 100, day * 100 + 99));
            }
        }
        let above = Containers::of(&v);
        let mut contained = 0;
        for inner in &v {
            let naive = v
                .iter()
                .any(|o| o.level > inner.level && o.start <= inner.start && inner.end <= o.end);
            assert_eq!(above.contain(inner), naive, "{inner:?}");
            contained += usize::from(naive);
        }
        assert!(
            contained > 0 && contained < v.len(),
            "{contained} of {}",
            v.len()
        );
    }

    /// helper-105 (session 47): a root over the cap went with all its parts, so a week of
    /// 486 tokens under a cover share of 443 left one 35-token episode of the past, though the
    /// week's last days fitted, and the agent saw less of its past after consolidating more.
    /// The newest dropped root gives the room to its latest parts, without holes.
    #[test]
    fn a_root_over_the_cap_gives_its_room_to_its_latest_parts() {
        let mut v: Vec<Placement> = (0..7)
            .map(|d| s(d as u64 + 1, Level::Day, d * 100, d * 100 + 99))
            .collect();
        v.push(s(20, Level::Week, 0, 699));
        let cost = |x: &Placement| if x.level == Level::Week { 50 } else { 10 };
        let (c, dropped) = cover_and_dropped(&v, 45, &cost);
        assert_eq!(
            levels(&c),
            [
                (Level::Day, 300),
                (Level::Day, 400),
                (Level::Day, 500),
                (Level::Day, 600)
            ]
        );
        assert_eq!(levels(&dropped), [(Level::Week, 0)]);
        let (c, dropped) = cover_and_dropped(&v, 9, &cost);
        assert!(c.is_empty());
        assert_eq!(levels(&dropped), [(Level::Week, 0)]);
        // A newer week that fits stays whole; the older one's last days take what is left.
        v.push(s(21, Level::Week, 700, 1399));
        let cost = |x: &Placement| match (x.level, x.start) {
            (Level::Week, 0) => 50,
            (Level::Week, _) => 30,
            _ => 10,
        };
        let (c, dropped) = cover_and_dropped(&v, 55, &cost);
        assert_eq!(
            levels(&c),
            [(Level::Day, 500), (Level::Day, 600), (Level::Week, 700)]
        );
        assert_eq!(levels(&dropped), [(Level::Week, 0)]);
        // The newest dropped week's days all fit: it is stood for whole, not listed, and the
        // older week gives its latest day too.
        let mut two: Vec<Placement> = (0..14)
            .map(|d| s(d as u64 + 1, Level::Day, d * 100, d * 100 + 99))
            .collect();
        two.push(s(20, Level::Week, 0, 699));
        two.push(s(21, Level::Week, 700, 1399));
        let cost = |x: &Placement| match (x.level, x.start) {
            (Level::Week, 0) => 50,
            (Level::Week, _) => 60,
            (_, start) if start >= 700 => 5,
            _ => 10,
        };
        let (c, dropped) = cover_and_dropped(&two, 50, &cost);
        assert_eq!(c.len(), 8, "{:?}", levels(&c));
        assert_eq!(c[0].start, 600);
        assert!(c[1..]
            .iter()
            .all(|x| x.level == Level::Day && x.start >= 700));
        assert_eq!(levels(&dropped), [(Level::Week, 0)]);
        // A day that does not fit gives its own latest episodes.
        let mut h = hierarchy();
        h.retain(|x| x.level != Level::Week || x.start == 200);
        let cost = |x: &Placement| if x.level == Level::Episode { 5 } else { 10 };
        // Roots: days 0 and 100 (no week over them), week 200 at 10.
        let (c, _) = cover_and_dropped(&h, 16, &cost);
        assert_eq!(levels(&c), [(Level::Episode, 150), (Level::Week, 200)]);
    }

    #[test]
    fn a_period_not_yet_rolled_up_is_a_root_of_its_own() {
        let mut h = hierarchy();
        h.push(s(100, Level::Day, 400, 499));
        h.push(s(101, Level::Episode, 500, 549));
        let ten = |_: &Placement| 10;
        assert_eq!(
            levels(&cover(&h, 40, &ten)),
            [
                (Level::Week, 0),
                (Level::Week, 200),
                (Level::Day, 400),
                (Level::Episode, 500)
            ]
        );
    }

    /// The cover weighs (reads the text of) only the summaries it looks at, each once: the
    /// roots, and the parts it walks into. It had weighed every summary of the store, and a
    /// store of 157k summaries read all their texts for each first context (4.2 s).
    #[test]
    fn the_cover_weighs_only_the_roots_and_the_parts_it_walks_into_each_once() {
        let mut v = Vec::new();
        let mut seq = 0;
        for w in 0..100i64 {
            for d in 0..7 {
                let day = w * 7 + d;
                for e in 0..2 {
                    seq += 1;
                    let start = day * 100 + e * 50;
                    v.push(s(seq, Level::Episode, start, start + 40));
                }
                seq += 1;
                v.push(s(seq, Level::Day, day * 100, day * 100 + 99));
            }
            seq += 1;
            v.push(s(seq, Level::Week, w * 700, w * 700 + 699));
        }
        let weighed = std::cell::RefCell::new(std::collections::BTreeMap::<u64, usize>::new());
        let cost = |x: &Placement| {
            *weighed.borrow_mut().entry(x.seq).or_default() += 1;
            10
        };
        let c = cover(&v, 100, &cost);
        assert_eq!(c.len(), 10, "{c:?}");
        let weighed = weighed.into_inner();
        assert!(weighed.values().all(|n| *n == 1), "{weighed:?}");
        assert!(
            weighed.len() < 300,
            "{} of {} weighed",
            weighed.len(),
            v.len()
        );
    }
}
