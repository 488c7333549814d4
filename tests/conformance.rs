//! The storage conformance suite: one set of tests, instantiated for every backend by the
//! `conformance!` macro at the bottom. A new backend passes these or it is not a backend.

use std::path::Path;

use loci::storage::{Backend, BackendKind, Table, WriteBatch};

fn be(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

fn collect(b: &dyn Backend, t: Table, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    b.scan(t, start, end, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        Ok(true)
    })
    .unwrap();
    out
}

fn empty_tables(kind: BackendKind, dir: &Path) {
    let b = kind.open(dir).unwrap();
    for t in Table::ALL {
        assert_eq!(b.get(t, b"x").unwrap(), None);
        assert_eq!(b.last(t).unwrap(), None);
        assert!(collect(&*b, t, &[], None).is_empty());
    }
}

fn put_get_overwrite_delete(kind: BackendKind, dir: &Path) {
    let b = kind.open(dir).unwrap();
    let mut w = WriteBatch::default();
    w.put(Table::Nodes, be(1), b"one".to_vec());
    w.put(Table::Nodes, be(2), Vec::new());
    b.commit(w).unwrap();
    assert_eq!(
        b.get(Table::Nodes, &be(1)).unwrap().as_deref(),
        Some(&b"one"[..])
    );
    assert_eq!(
        b.get(Table::Nodes, &be(2)).unwrap().as_deref(),
        Some(&b""[..]),
        "empty values are values"
    );
    let mut w = WriteBatch::default();
    w.put(Table::Nodes, be(1), b"uno".to_vec());
    w.delete(Table::Nodes, be(2));
    w.delete(Table::Nodes, be(99)); // deleting a missing key is not an error
    b.commit(w).unwrap();
    assert_eq!(
        b.get(Table::Nodes, &be(1)).unwrap().as_deref(),
        Some(&b"uno"[..])
    );
    assert_eq!(b.get(Table::Nodes, &be(2)).unwrap(), None);
}

fn later_ops_in_a_batch_win(kind: BackendKind, dir: &Path) {
    let b = kind.open(dir).unwrap();
    let mut w = WriteBatch::default();
    w.put(Table::Edges, be(5), b"a".to_vec());
    w.delete(Table::Edges, be(5));
    w.put(Table::Edges, be(6), b"a".to_vec());
    w.put(Table::Edges, be(6), b"b".to_vec());
    // A table rewritten whole deletes every key, then puts what it keeps.
    w.put(Table::Edges, be(7), b"a".to_vec());
    b.commit(w).unwrap();
    let mut w = WriteBatch::default();
    w.delete(Table::Edges, be(7));
    w.put(Table::Edges, be(7), b"c".to_vec());
    b.commit(w).unwrap();
    assert_eq!(
        b.get(Table::Edges, &be(7)).unwrap().as_deref(),
        Some(&b"c"[..])
    );
    assert_eq!(b.get(Table::Edges, &be(5)).unwrap(), None);
    assert_eq!(
        b.get(Table::Edges, &be(6)).unwrap().as_deref(),
        Some(&b"b"[..])
    );
}

/// A batch holds its keys one after another in one buffer (`WriteBatch`): keys of every
/// length, puts and deletes interleaved across tables, each reach its own table with its own
/// value.
fn keys_of_any_length_in_one_batch_stay_apart(kind: BackendKind, dir: &Path) {
    let b = kind.open(dir).unwrap();
    let key = |n: usize| -> Vec<u8> { (0..n).map(|i| (i * 7 + n) as u8).collect() };
    let lengths = [1usize, 8, 300, 2, 65_536, 3];
    let mut w = WriteBatch::default();
    for (i, n) in lengths.iter().enumerate() {
        let table = Table::ALL[i % Table::ALL.len()];
        w.put(table, key(*n), vec![i as u8; i]);
        w.delete(table, key(n + 1));
    }
    assert_eq!(w.len(), 2 * lengths.len());
    b.commit(w).unwrap();
    let mut w = WriteBatch::default();
    w.delete(Table::ALL[0], key(1));
    w.put(Table::ALL[1], key(4), b"four".to_vec());
    // Within one table (the first batch left it empty): an empty key and an empty value,
    // between keys that share a start.
    w.put(Table::EventFacet, b"ab", b"1".to_vec());
    w.put(Table::EventFacet, b"", Vec::new());
    w.put(Table::EventFacet, b"a", b"2".to_vec());
    w.delete(Table::EventFacet, b"abc");
    w.put(Table::EventFacet, b"abcd", b"3".to_vec());
    b.commit(w).unwrap();
    assert_eq!(
        collect(&*b, Table::EventFacet, &[], None),
        vec![
            (Vec::new(), Vec::new()),
            (b"a".to_vec(), b"2".to_vec()),
            (b"ab".to_vec(), b"1".to_vec()),
            (b"abcd".to_vec(), b"3".to_vec()),
        ]
    );
    for (i, n) in lengths.iter().enumerate() {
        let table = Table::ALL[i % Table::ALL.len()];
        let want = (i != 0).then(|| vec![i as u8; i]);
        assert_eq!(
            b.get(table, &key(*n)).unwrap(),
            want,
            "{table:?} key of {n}"
        );
    }
    assert_eq!(
        b.get(Table::ALL[1], &key(4)).unwrap().as_deref(),
        Some(&b"four"[..])
    );
}

fn tables_are_separate(kind: BackendKind, dir: &Path) {
    let b = kind.open(dir).unwrap();
    let mut w = WriteBatch::default();
    for (i, t) in Table::ALL.iter().enumerate() {
        w.put(*t, be(7), vec![i as u8]);
    }
    b.commit(w).unwrap();
    for (i, t) in Table::ALL.iter().enumerate() {
        assert_eq!(b.get(*t, &be(7)).unwrap(), Some(vec![i as u8]));
        assert_eq!(
            collect(&*b, *t, &[], None).len(),
            1,
            "{t:?} sees only its own keys"
        );
        assert_eq!(b.last(*t).unwrap(), Some((be(7), vec![i as u8])));
    }
}

fn scans_are_ordered_and_bounded(kind: BackendKind, dir: &Path) {
    let b = kind.open(dir).unwrap();
    let mut w = WriteBatch::default();
    // Insert out of order, across a byte boundary (255 -> 256), to check numeric order.
    for n in [300u64, 1, 256, 255, 2, 1000] {
        w.put(Table::Log, be(n), be(n));
    }
    b.commit(w).unwrap();
    let keys = |v: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<u64> {
        v.into_iter()
            .map(|(k, _)| u64::from_be_bytes(k.try_into().unwrap()))
            .collect()
    };
    assert_eq!(
        keys(collect(&*b, Table::Log, &[], None)),
        vec![1, 2, 255, 256, 300, 1000]
    );
    assert_eq!(
        keys(collect(&*b, Table::Log, &be(2), Some(&be(300)))),
        vec![2, 255, 256],
        "start inclusive, end exclusive"
    );
    assert_eq!(keys(collect(&*b, Table::Log, &be(301), None)), vec![1000]);
    let mut seen = 0;
    b.scan(Table::Log, &[], None, &mut |_, _| {
        seen += 1;
        Ok(seen < 3)
    })
    .unwrap();
    assert_eq!(seen, 3, "returning false stops the scan");
    assert_eq!(b.last(Table::Log).unwrap().map(|(k, _)| k), Some(be(1000)));
}

fn scan_errors_propagate(kind: BackendKind, dir: &Path) {
    let b = kind.open(dir).unwrap();
    let mut w = WriteBatch::default();
    w.put(Table::Log, be(1), vec![]);
    b.commit(w).unwrap();
    let r = b.scan(Table::Log, &[], None, &mut |_, _| {
        Err(loci::Error::NotFound("stop".into()))
    });
    assert!(matches!(r, Err(loci::Error::NotFound(_))));
}

fn commits_survive_reopen(kind: BackendKind, dir: &Path) {
    {
        let b = kind.open(dir).unwrap();
        let mut w = WriteBatch::default();
        for i in 0..10_000u64 {
            w.put(Table::Log, be(i), vec![(i % 251) as u8; 40]);
        }
        w.put(Table::Meta, b"counters", b"x".to_vec());
        b.commit(w).unwrap();
    }
    let b = kind.open(dir).unwrap();
    let all = collect(&*b, Table::Log, &[], None);
    assert_eq!(all.len(), 10_000);
    assert!(all
        .iter()
        .enumerate()
        .all(|(i, (k, v))| *k == be(i as u64) && v[0] == (i % 251) as u8));
    assert_eq!(
        b.get(Table::Meta, b"counters").unwrap().as_deref(),
        Some(&b"x"[..])
    );
}

fn concurrent_readers_see_whole_values(kind: BackendKind, dir: &Path) {
    // One writer keeps rewriting one large value; readers must always see one whole version
    // (all bytes equal), never a mix, and never an older version after a newer one. Each reader
    // reads before the writer starts and until it has seen the last version, so every reader
    // provably read during the writes.
    use std::sync::atomic::{AtomicUsize, Ordering};
    const LAST: u8 = 49;
    let b: std::sync::Arc<dyn Backend> = std::sync::Arc::from(kind.open(dir).unwrap());
    let mut w = WriteBatch::default();
    w.put(Table::Nodes, b"big", vec![0; 64 * 1024]);
    b.commit(w).unwrap();
    let started = std::sync::Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let b = b.clone();
            let started = started.clone();
            std::thread::spawn(move || {
                let mut reads = 0usize;
                let mut versions: Vec<u8> = Vec::new();
                loop {
                    let v = b.get(Table::Nodes, b"big").unwrap().expect("the value");
                    assert!(v.iter().all(|x| *x == v[0]), "torn value");
                    if reads == 0 {
                        started.fetch_add(1, Ordering::SeqCst);
                    }
                    reads += 1;
                    if versions.last() != Some(&v[0]) {
                        assert!(
                            versions.last().is_none_or(|last| *last < v[0]),
                            "version {} after {:?}",
                            v[0],
                            versions.last()
                        );
                        versions.push(v[0]);
                    }
                    if v[0] == LAST {
                        return (reads, versions);
                    }
                }
            })
        })
        .collect();
    while started.load(Ordering::SeqCst) < 2 {
        std::thread::yield_now();
    }
    for round in 1..=LAST {
        let mut w = WriteBatch::default();
        w.put(Table::Nodes, b"big", vec![round; 64 * 1024]);
        b.commit(w).unwrap();
    }
    for r in readers {
        let (reads, versions) = r.join().unwrap();
        assert!(reads >= 2, "{kind}: {reads} reads");
        assert_eq!(versions.first(), Some(&0), "{kind}: read before the writes");
        assert_eq!(versions.last(), Some(&LAST), "{kind}: read the last write");
    }
}

fn table_bytes_count_each_tables_own_entries(kind: BackendKind, dir: &Path) {
    let b = kind.open(dir).unwrap();
    let mut w = WriteBatch::default();
    for i in 0..100u64 {
        w.put(Table::Log, be(i), vec![7u8; 1000]);
    }
    b.commit(w).unwrap();
    let log = b.table_bytes(Table::Log).unwrap();
    // 100 values of 1,000 bytes and their 8-byte keys, however the backend lays them out.
    assert!(
        (100 * 1008..=100 * 1008 + 4096).contains(&log.entries),
        "{log:?}"
    );
    assert_eq!(b.table_bytes(Table::Nodes).unwrap().entries, 0);
}

macro_rules! conformance {
    ($module:ident, $kind:expr, [$($test:ident),* $(,)?]) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    let dir = tempfile::tempdir().unwrap();
                    super::$test($kind, dir.path());
                }
            )*
        }
    };
}

macro_rules! all_backends {
    ($($test:ident),* $(,)?) => {
        conformance!(redb, loci::BackendKind::Redb, [$($test),*]);
        conformance!(sled, loci::BackendKind::Sled, [$($test),*]);
    };
}

all_backends!(
    empty_tables,
    put_get_overwrite_delete,
    later_ops_in_a_batch_win,
    keys_of_any_length_in_one_batch_stay_apart,
    tables_are_separate,
    scans_are_ordered_and_bounded,
    scan_errors_propagate,
    commits_survive_reopen,
    concurrent_readers_see_whole_values,
    table_bytes_count_each_tables_own_entries,
);
