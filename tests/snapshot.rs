//! The state snapshot (`store/snapshot.rs`), run against every backend: an open reads it and
//! replays only the log after it instead of the whole log, gives the same state as the whole
//! replay (`verify` compares the live views with the replay of the log), and refuses a
//! snapshot that is damaged, of another version, of another store or from before a rewrite,
//! replaying the whole log instead.

use std::path::Path;

use loci::model::{Assertion, EdgeUpsert, EventDraft, NodeUpsert, Value};
use loci::storage::BackendKind;
use loci::{ExpandOptions, StateSource, Store};

const SNAPSHOT: &str = "state.snapshot";

fn node(key: &str, label: &str, name: &str) -> Assertion {
    Assertion::UpsertNode(NodeUpsert {
        key: key.into(),
        label: Some(label.into()),
        name: Some(name.into()),
        ..Default::default()
    })
}

fn edge(from: &str, rel: &str, to: &str, conf: f32) -> Assertion {
    Assertion::UpsertEdge(EdgeUpsert {
        from: from.into(),
        relation: rel.into(),
        to: to.into(),
        confidence: Some(conf),
        ..Default::default()
    })
}

fn event(ts: i64, assertions: Vec<Assertion>) -> EventDraft {
    let mut e = EventDraft::new(ts, "bot", "SEEN");
    e.assertions = assertions;
    e
}

/// A graph with what a snapshot must carry: several labels and relations, a self loop, a
/// bounded edge, a pinned node, a retracted edge and a retracted node, an updated edge.
fn build(store: &Store, offset: i64) {
    let mut batch = Vec::new();
    for i in 0..40 {
        let mut a = vec![node(
            &format!("n{i}"),
            ["Place", "NPC", "Item"][i % 3],
            &format!("thing {i}"),
        )];
        if i > 0 {
            a.push(edge(
                &format!("n{i}"),
                "NEAR",
                &format!("n{}", i / 2),
                0.5 + (i % 5) as f32 / 10.0,
            ));
        }
        if i % 7 == 0 {
            a.push(edge(&format!("n{i}"), "OWNS", &format!("n{i}"), 0.9));
        }
        batch.push(event(offset + i as i64, a));
    }
    let mut bounded = EdgeUpsert {
        from: "n3".into(),
        relation: "TRADED".into(),
        to: "n4".into(),
        confidence: Some(0.7),
        valid_to: Some(offset + 500),
        ..Default::default()
    };
    bounded.props.insert("price".into(), Value::Int(3));
    batch.push(event(offset + 41, vec![Assertion::UpsertEdge(bounded)]));
    batch.push(event(offset + 42, vec![edge("n5", "NEAR", "n2", 0.95)]));
    batch.push(event(
        offset + 43,
        vec![Assertion::RetractEdge {
            from: "n9".into(),
            relation: "NEAR".into(),
            to: "n4".into(),
        }],
    ));
    batch.push(event(
        offset + 44,
        vec![Assertion::RetractNode { key: "n39".into() }],
    ));
    store.ingest(batch).unwrap();
    store.pin(&["n1"], true).unwrap();
}

/// Retracts an edge of `build`'s graph and checkpoints, whatever either gives: what a store
/// opened from a crafted snapshot must survive without a panic or a hang.
fn retract_and_checkpoint(store: &Store) {
    let _ = store.ingest(vec![event(
        900,
        vec![Assertion::RetractEdge {
            from: "n6".into(),
            relation: "NEAR".into(),
            to: "n3".into(),
        }],
    )]);
    let _ = store.checkpoint();
}

/// A store in `dir` holding `build`'s graph, with a snapshot of it.
fn built_with_snapshot(kind: BackendKind, dir: &Path) -> Store {
    let store = Store::create(dir, kind).unwrap();
    build(&store, 0);
    store.checkpoint().unwrap().unwrap();
    store
}

/// Everything a reader sees of the graph, in a canonical order.
fn dump(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    let g = store.graph();
    for n in g.nodes() {
        let mut nb: Vec<String> = store
            .neighbors(n.id, 1, &ExpandOptions::default())
            .iter()
            .map(|x| format!("{:?}", x))
            .collect();
        nb.sort();
        out.push(format!(
            "{} {} {} pinned={} {:?}",
            n.key, n.label, n.name, n.pinned, nb
        ));
    }
    // The labels traversals and label filters read (the adjacency's column) and the pins
    // tiers and decay floors read (the adjacency's set), beside the record's above.
    for id in g.node_ids() {
        out.push(format!(
            "{id} labelled {:?} pinned {}",
            g.node_label(id),
            g.is_pinned(id)
        ));
    }
    for (id, e) in g.edges() {
        out.push(format!(
            "{id}: {}-{}->{} {:?}",
            e.from,
            g.relation_name(e.relation),
            e.to,
            e
        ));
    }
    out.sort();
    out
}

fn assert_verified(store: &Store) {
    let report = store.verify().unwrap();
    assert!(report.ok(), "replay differs: {:#?}", report.differences);
}

/// The dump of the store in `dir` replayed from its log (its snapshot moved aside for it).
fn dump_from_log(dir: &Path) -> Vec<String> {
    let snap = dir.join(SNAPSHOT);
    let aside = dir.join("aside");
    let had = snap.exists();
    if had {
        std::fs::rename(&snap, &aside).unwrap();
    }
    let store = Store::open(dir).unwrap();
    assert_eq!(store.state_source(), StateSource::Log);
    let d = dump(&store);
    drop(store);
    // The small store writes no snapshot on close, so the one set aside comes back as it was.
    assert!(!snap.exists());
    if had {
        std::fs::rename(&aside, &snap).unwrap();
    }
    d
}

fn an_open_reads_the_snapshot_and_sees_what_a_rebuild_sees(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    build(&store, 0);
    let seq = store.checkpoint().unwrap().expect("a snapshot is written");
    assert_eq!(
        store.checkpoint().unwrap(),
        None,
        "it is current: nothing to write"
    );
    let live = dump(&store);
    drop(store);
    assert!(dir.join(SNAPSHOT).exists());

    let store = Store::open(dir).unwrap();
    assert_eq!(
        store.state_source(),
        StateSource::Snapshot { seq, caught_up: 0 }
    );
    assert_eq!(dump(&store), live);
    assert_verified(&store);
    drop(store);
    assert_eq!(dump_from_log(dir), live);

    // A reader beside no writer uses it too.
    let reader = Store::open_read_only(dir).unwrap();
    assert!(matches!(
        reader.state_source(),
        StateSource::Snapshot { .. }
    ));
    assert_eq!(dump(&reader), live);
}

/// `stats` says where the snapshot's bytes go, section by section, in file order; the
/// sections are the file but for its header, body and padding.
fn stats_say_where_the_snapshots_bytes_go(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    let stats = store.stats();
    let sections = &stats.disk_bytes_snapshot_sections;
    let names: Vec<&str> = sections.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 15, "{names:?}");
    assert_eq!(names[0], "edge core blocks");
    let entries = sections
        .iter()
        .find(|(n, _)| n == "adjacency entries")
        .unwrap()
        .1;
    // Packed: each edge's two sides in fewer than the 16 bytes each that memory holds.
    assert!(
        entries > 0 && entries < 16 * 2 * stats.edges as u64,
        "{entries} bytes for {} edges",
        stats.edges
    );
    let sum: u64 = sections.iter().map(|(_, b)| b).sum();
    assert!(
        sum <= stats.disk_bytes_snapshot && stats.disk_bytes_snapshot - sum < 16 * 4096 + 8192,
        "{sum} of {}",
        stats.disk_bytes_snapshot
    );
}

/// Each node's list of entries, as edge ids in list order.
fn lists(store: &Store) -> Vec<Vec<u32>> {
    let g = store.graph();
    let ids: Vec<loci::NodeId> = g.node_ids().collect();
    ids.iter()
        .map(|n| g.adjacency().entries(*n).map(|e| e.edge).collect())
        .collect()
}

/// Every adjacency list is in the order of its edge ids, live, from the snapshot and replayed
/// from the log (in other chunks than the batches were): edges retracted, changed and added
/// in one batch, and again after a checkpoint, leave lists that traversals read alike
/// whichever way the store was opened.
fn adjacency_lists_are_in_edge_id_order_however_the_store_was_opened(
    kind: BackendKind,
    dir: &Path,
) {
    let store = built_with_snapshot(kind, dir);
    let retract = |from: &str, to: &str| Assertion::RetractEdge {
        from: from.into(),
        relation: "NEAR".into(),
        to: to.into(),
    };
    // Edges of `build`'s graph (n{i} -NEAR-> n{i/2}), two retracted each round.
    let gone = [[("n4", "n2"), ("n3", "n1")], [("n6", "n3"), ("n12", "n6")]];
    for (round, [first, second]) in gone.iter().enumerate() {
        let round = round as i64;
        store
            .ingest(vec![
                event(
                    500 + round,
                    vec![retract(first.0, first.1), edge("n8", "NEAR", "n4", 0.3)],
                ),
                event(
                    510 + round,
                    vec![
                        edge("n5", "NEAR", "n2", 0.1 + round as f32 / 10.0),
                        edge("n2", "NEAR", &format!("n{}", 20 + round), 0.7),
                        retract(second.0, second.1),
                    ],
                ),
            ])
            .unwrap();
        if round == 0 {
            store.checkpoint().unwrap();
        }
    }
    let live = lists(&store);
    for list in &live {
        // A self loop is one edge in its list twice.
        assert!(list.windows(2).all(|w| w[0] <= w[1]), "{list:?}");
    }
    let neighbors = |s: &Store| {
        let n2 = s.graph().node_id("n2").unwrap();
        s.neighbors(n2, 2, &ExpandOptions::default())
    };
    let want = neighbors(&store);
    drop(store);
    for remove_snapshot in [false, true] {
        if remove_snapshot {
            std::fs::remove_file(dir.join(SNAPSHOT)).unwrap();
        }
        let store = Store::open(dir).unwrap();
        assert_eq!(store.state_source() == StateSource::Log, remove_snapshot);
        assert_eq!(lists(&store), live);
        assert_eq!(neighbors(&store), want);
        assert_verified(&store);
    }
}

fn changes_after_the_snapshot_are_caught_up(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    build(&store, 0);
    let seq = store.checkpoint().unwrap().unwrap();
    // After the snapshot: new nodes, a new relation, an updated and a retracted edge, a
    // retracted node with edges, an unpinned node, and a commit that changes no node.
    store
        .ingest(vec![
            event(
                100,
                vec![
                    node("late", "Bot", "late arrival"),
                    edge("late", "FOLLOWS", "n2", 0.6),
                ],
            ),
            event(101, vec![edge("n5", "NEAR", "n2", 0.2)]),
            event(
                102,
                vec![Assertion::RetractEdge {
                    from: "n6".into(),
                    relation: "NEAR".into(),
                    to: "n3".into(),
                }],
            ),
            event(103, vec![Assertion::RetractNode { key: "n10".into() }]),
        ])
        .unwrap();
    store.pin(&["n1"], false).unwrap();
    store.ingest(vec![event(104, vec![])]).unwrap();
    let live = dump(&store);
    drop(store);

    let store = Store::open(dir).unwrap();
    match store.state_source() {
        StateSource::Snapshot { seq: s, caught_up } => {
            assert_eq!(s, seq);
            assert!(caught_up > 0);
        }
        other => panic!("expected the snapshot, got {other:?}"),
    }
    assert_eq!(dump(&store), live);
    assert_verified(&store);
    // The reopened store goes on from there: more changes, a second checkpoint (which prunes
    // the records before it), more changes, and an open catches up from the second.
    // Among them, changes to lists that lie in the mapped snapshot: a confidence updated, an
    // edge retracted, an edge added to an old node.
    store
        .ingest(vec![event(
            105,
            vec![
                edge("late", "NEAR", "n3", 0.4),
                edge("n8", "NEAR", "n4", 0.15),
                Assertion::RetractEdge {
                    from: "n12".into(),
                    relation: "NEAR".into(),
                    to: "n6".into(),
                },
                edge("n20", "OWNS", "n21", 0.3),
            ],
        )])
        .unwrap();
    assert_verified(&store);
    let second = store.checkpoint().unwrap().unwrap();
    store
        .ingest(vec![event(106, vec![node("later", "Bot", "later")])])
        .unwrap();
    let live = dump(&store);
    drop(store);
    let store = Store::open(dir).unwrap();
    assert!(matches!(store.state_source(), StateSource::Snapshot { seq, .. } if seq == second));
    assert_eq!(dump(&store), live);
    assert_verified(&store);
    drop(store);
    assert_eq!(dump_from_log(dir), live);
}

/// Opens the store in `dir` with its snapshot file changed by `damage`, and checks the state
/// was replayed from the log and is right.
fn open_with_damaged_snapshot(dir: &Path, live: &[String], damage: impl FnOnce(&mut Vec<u8>)) {
    let path = dir.join(SNAPSHOT);
    let mut bytes = std::fs::read(&path).unwrap();
    let good = bytes.clone();
    damage(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    let store = Store::open(dir).unwrap();
    assert_eq!(store.state_source(), StateSource::Log);
    assert_eq!(dump(&store), live);
    assert_verified(&store);
    drop(store);
    std::fs::write(&path, good).unwrap();
}

fn a_damaged_or_foreign_snapshot_is_not_used(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    let live = dump(&store);
    drop(store);
    let len = std::fs::metadata(dir.join(SNAPSHOT)).unwrap().len() as usize;
    let body_end = HEADER_LEN + body_len(&std::fs::read(dir.join(SNAPSHOT)).unwrap());
    // A flipped bit anywhere in the body (the checksum), in the header's counts. (Damage to
    // the mapped sections after the body is found when they are read: see
    // `damage_to_a_mapped_section_is_found_and_a_batch_replays_the_graph_first`.)
    for at in [20, 70, body_end / 2, body_end - 1] {
        open_with_damaged_snapshot(dir, &live, |b| b[at] ^= 0x10);
    }
    // Cut short: the sections no longer fit.
    open_with_damaged_snapshot(dir, &live, |b| b.truncate(len - 1));
    open_with_damaged_snapshot(dir, &live, |b| b.truncate(len / 3));
    open_with_damaged_snapshot(dir, &live, |b| b.truncate(5));
    open_with_damaged_snapshot(dir, &live, |b| b.clear());
    open_with_damaged_snapshot(dir, &live, |b| b[0] = b'X');
    // Another layout version, other derivation rules.
    open_with_damaged_snapshot(dir, &live, |b| {
        b[8..12].copy_from_slice(&99u32.to_le_bytes())
    });
    open_with_damaged_snapshot(dir, &live, |b| {
        b[16..20].copy_from_slice(&99u32.to_le_bytes())
    });
    // A count that claims more than the file holds.
    open_with_damaged_snapshot(dir, &live, |b| {
        b.extend_from_slice(&[0xff; 64]);
    });
    // Still used when intact.
    let store = Store::open(dir).unwrap();
    assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
    drop(store);

    // Another store's snapshot, with as many events and ids: refused by the fingerprint of
    // the last event.
    let other = dir.with_extension("other");
    let store = Store::create(&other, kind).unwrap();
    build(&store, 1_000);
    store.checkpoint().unwrap().unwrap();
    drop(store);
    std::fs::copy(other.join(SNAPSHOT), dir.join(SNAPSHOT)).unwrap();
    let store = Store::open(dir).unwrap();
    assert_eq!(store.state_source(), StateSource::Log);
    // Refused from its header, before its body was read or decoded (a whole decode of a 1M-edge
    // store's snapshot cost half a second and more memory than the state, for nothing).
    let open = store.stats().open_ms;
    assert_eq!(
        (open.snapshot_nodes, open.snapshot_edges),
        (0.0, 0.0),
        "another store's snapshot was decoded"
    );
    assert_eq!(dump(&store), live);
    assert_verified(&store);
}

fn a_snapshot_from_before_a_deletion_is_not_used(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    let old = std::fs::read(dir.join(SNAPSHOT)).unwrap();
    // Deleting the event that made n20 renumbers what replay derives afterwards.
    let n20 = store.node_by_key("n20").unwrap();
    let made_by = store
        .events_of_kind("SEEN")
        .unwrap()
        .into_iter()
        .find(|e| e.ts == 20)
        .unwrap()
        .seq;
    store
        .delete(&loci::dynamics::deletion::DeleteRequest::events([made_by]))
        .unwrap();
    assert!(store.node(n20.id).is_none_or(|n| n.key != "n20"));
    assert_ne!(
        std::fs::read(dir.join(SNAPSHOT)).unwrap(),
        old,
        "the outdated snapshot is replaced"
    );
    let live = dump(&store);
    drop(store);

    // The deletion wrote a new one, which the next open uses.
    let store = Store::open(dir).unwrap();
    assert!(matches!(
        store.state_source(),
        StateSource::Snapshot { caught_up: 0, .. }
    ));
    assert_eq!(dump(&store), live);
    drop(store);

    // The old one put back (as a crash before its removal would leave it): not used.
    std::fs::write(dir.join(SNAPSHOT), old).unwrap();
    let store = Store::open(dir).unwrap();
    assert_eq!(store.state_source(), StateSource::Log);
    assert_eq!(dump(&store), live);
    assert_verified(&store);
}

fn compaction_rewrites_the_snapshot(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    let live = dump(&store);
    let (store, _) = store.compact().unwrap();
    assert_eq!(dump(&store), live);
    drop(store);
    let store = Store::open(dir).unwrap();
    assert!(matches!(
        store.state_source(),
        StateSource::Snapshot { caught_up: 0, .. }
    ));
    assert_eq!(dump(&store), live);
    assert_verified(&store);
}

fn a_read_only_handle_cannot_checkpoint(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    build(&store, 0);
    drop(store);
    let reader = Store::open_read_only(dir).unwrap();
    assert!(reader.checkpoint().is_err());
    assert!(!dir.join(SNAPSHOT).exists());
    assert_eq!(reader.graph().node_id("n2").map(|id| id.0), Some(2));
}

/// A snapshot file is read whole into memory, so its header is checked against its length
/// first: a foreign or sparse file of gigabytes costs one small read, not its size.
fn a_huge_foreign_snapshot_is_refused_before_it_is_read(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    let live = dump(&store);
    drop(store);
    // Sparse: 3 GB long, a snapshot's magic at its start, no blocks on disk.
    for magic in [&b"LOCISNAP"[..], &b"\0\0\0\0\0\0\0\0"[..]] {
        let mut f = std::fs::File::create(dir.join(SNAPSHOT)).unwrap();
        std::io::Write::write_all(&mut f, magic).unwrap();
        f.set_len(3 << 30).unwrap();
        drop(f);
        let before = loci::bench::peak_rss_bytes();
        let store = Store::open(dir).unwrap();
        assert_eq!(store.state_source(), StateSource::Log);
        assert_eq!(dump(&store), live);
        assert_verified(&store);
        let grew = loci::bench::peak_rss_bytes().saturating_sub(before);
        assert!(grew < 1 << 30, "the open took {grew} more bytes of memory");
        drop(store);
    }
}

/// A command-line process closes its store with `close_at_exit`, leaving the memory to the
/// system: everything a drop writes must still be written (the waiting uses, a snapshot when
/// one is due), and the store must open as after a drop.
fn closing_at_exit_writes_what_a_drop_writes(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    build(&store, 0);
    // Enough changes since the last snapshot for one to be due on close.
    let many: Vec<Assertion> = (0..5_000)
        .map(|i| node(&format!("m{i}"), "Item", &format!("many {i}")))
        .collect();
    store.ingest(vec![event(900, many)]).unwrap();
    let events = store.stats().events;
    store.record_use([loci::dynamics::usage::Item::Node("n3".into())]);
    assert!(store.usage_pending() > 0);
    assert!(!dir.join(SNAPSHOT).exists(), "no snapshot before the close");
    let live = dump(&store);
    store.close_at_exit();

    let store = Store::open(dir).unwrap();
    assert_eq!(
        store.stats().events,
        events + 1,
        "the waiting uses are one event"
    );
    assert!(
        matches!(store.state_source(), StateSource::Snapshot { caught_up, .. } if caught_up <= 1),
        "the snapshot written on close is used: {:?}",
        store.state_source()
    );
    assert_eq!(dump(&store), live);
    assert_verified(&store);
    let used = store
        .graph()
        .usage(&loci::dynamics::usage::Item::Node("n3".into()))
        .map_or(0, |u| u.used);
    assert_eq!(used, 1);
}

/// A closed store of [`build`]'s graph with its snapshot file removed: what it holds, and the
/// path the snapshot goes to.
fn built_without_snapshot(kind: BackendKind, dir: &Path) -> (Vec<String>, std::path::PathBuf) {
    let store = Store::create(dir, kind).unwrap();
    build(&store, 0);
    let live = dump(&store);
    drop(store);
    let path = dir.join(SNAPSHOT);
    let _ = std::fs::remove_file(&path);
    (live, path)
}

/// A snapshot path that is a FIFO (or anything but a regular file) is not opened: opening a
/// FIFO for reading waits for a writer, and the store's open hung forever.
fn a_snapshot_that_is_not_a_file_is_not_opened(kind: BackendKind, dir: &Path) {
    let (live, path) = built_without_snapshot(kind, dir);
    let made = std::process::Command::new("mkfifo").arg(&path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", path.display());
    let (tx, rx) = std::sync::mpsc::channel();
    let dir_owned = dir.to_path_buf();
    std::thread::spawn(move || {
        let r = Store::open_read_only(&dir_owned).map(|s| (s.state_source(), dump(&s)));
        let _ = tx.send(r);
    });
    let (source, seen) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the open returned (it had waited on the FIFO for ever)")
        .unwrap();
    assert_eq!(source, StateSource::Log);
    assert_eq!(seen, live);
    std::fs::remove_file(&path).unwrap();
}

/// A snapshot that cannot be put in place (a directory holds its name) is an error that
/// leaves no temporary file behind: each open of a writer had left a `state.snapshot.tmp` of
/// the state's size.
fn a_snapshot_that_cannot_be_put_in_place_leaves_no_temporary_file(kind: BackendKind, dir: &Path) {
    let (live, path) = built_without_snapshot(kind, dir);
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("keep"), b"x").unwrap();
    let store = Store::open(dir).unwrap();
    assert!(
        store.checkpoint().is_err(),
        "a snapshot was written over a directory"
    );
    drop(store);
    let leftovers: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    let store = Store::open(dir).unwrap();
    assert_eq!(dump(&store), live);
    drop(store);
    std::fs::remove_dir_all(&path).unwrap();
}

/// Copies the directory `from` to `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The header's length; the body's length is its u64 at byte 40, and the body's CRC-32 is
/// its last four bytes.
const HEADER_LEN: usize = 52;

/// The body's length, as the header of snapshot `bytes` gives it.
fn body_len(bytes: &[u8]) -> usize {
    u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize
}

/// A body changed on purpose, its checksum made right again: what a bug in a writer, or a
/// crafted file, would give. Every such snapshot opens without a panic, as the state it
/// says (which `verify` then judges against the log) or not at all.
fn a_snapshot_changed_under_a_valid_checksum_opens_or_is_refused(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    let live = dump(&store);
    drop(store);
    let path = dir.join(SNAPSHOT);
    let good = std::fs::read(&path).unwrap();
    let body = body_len(&good);
    let (mut used, mut refused) = (0, 0);
    for at in (HEADER_LEN..HEADER_LEN + body).step_by((body / 150).max(1)) {
        for change in [0xffu8, 0x01] {
            let mut bytes = good.clone();
            bytes[at] = if change == 0xff {
                0xff
            } else {
                bytes[at] ^ change
            };
            let crc = crc32fast::hash(&bytes[HEADER_LEN..HEADER_LEN + body]);
            bytes[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
            std::fs::write(&path, &bytes).unwrap();
            let store = Store::open(dir).unwrap();
            match store.state_source() {
                StateSource::Log => {
                    refused += 1;
                    assert_eq!(dump(&store), live, "byte {at}");
                }
                _ => {
                    used += 1;
                    // Whatever it says, the replay can be compared with it, and the store
                    // takes writes and checkpoints without a panic or a hang (counts in the
                    // body once sized the key table of the next snapshot).
                    store.verify().unwrap();
                    drop(store);
                    // On a copy, so the store under test keeps its events.
                    let copy = dir.with_extension("written");
                    copy_dir(dir, &copy);
                    let store = Store::open(&copy).unwrap();
                    retract_and_checkpoint(&store);
                    drop(store);
                    std::fs::remove_dir_all(&copy).unwrap();
                }
            }
        }
    }
    std::fs::write(&path, good).unwrap();
    assert!(used > 0 && refused > 0, "used {used}, refused {refused}");
}

/// A writer killed while it wrote a snapshot leaves the temporary file (up to the snapshot's
/// size: gigabytes at 100M edges), which stayed until the next snapshot was written, forever
/// for a store that is opened and read. The next writer's open removes it; a reader's open,
/// beside a writer that may be writing it, does not.
fn a_snapshot_left_half_written_is_removed_by_the_next_writer(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    let live = dump(&store);
    drop(store);
    let tmp = dir.join("state.snapshot.tmp");
    std::fs::write(&tmp, vec![7u8; 100_000]).unwrap();
    if kind == BackendKind::Redb {
        let reader = Store::open_read_only(dir).unwrap();
        assert_eq!(dump(&reader), live);
        drop(reader);
        assert!(
            tmp.exists(),
            "a reader removed a file a writer may be writing"
        );
    }
    let store = Store::open(dir).unwrap();
    assert!(!tmp.exists(), "the half-written snapshot is still there");
    assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
    assert_eq!(dump(&store), live);
    assert_verified(&store);
}

/// An open from the snapshot maps the adjacency and the edge slots rather than building them
/// on the heap, and so does the store that wrote it, once it has; what either reads is the
/// state.
fn an_open_maps_the_adjacency_and_edges_instead_of_building_them(kind: BackendKind, dir: &Path) {
    let store = Store::create(dir, kind).unwrap();
    build(&store, 0);
    let built = store.stats().state_bytes;
    let live = dump(&store);
    store.checkpoint().unwrap().unwrap();
    let moved = store.stats().state_bytes;
    assert!(
        moved.adjacency < built.adjacency && moved.edges < built.edges,
        "built {built:?}, after the checkpoint {moved:?}"
    );
    assert_eq!(dump(&store), live);
    drop(store);
    let store = Store::open(dir).unwrap();
    assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
    let mapped = store.stats().state_bytes;
    assert!(
        mapped.adjacency < built.adjacency && mapped.edges < built.edges,
        "built {built:?}, mapped {mapped:?}"
    );
    assert_eq!(dump(&store), live);
    assert_verified(&store);
}

/// A store opened from its snapshot and written to keeps only what changed on the heap, and
/// a checkpoint moves it onto the new snapshot: the heap goes back to what an open takes,
/// and every reader sees the same graph before and after.
fn a_store_opened_from_its_snapshot_moves_onto_each_new_one(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    drop(store);
    let store = Store::open(dir).unwrap();
    let opened = store.stats().state_bytes;
    store
        .ingest(vec![event(
            300,
            vec![
                node("fresh", "Bot", "fresh"),
                edge("fresh", "NEAR", "n2", 0.5),
                edge("n7", "NEAR", "n3", 0.25),
            ],
        )])
        .unwrap();
    let written = store.stats().state_bytes;
    assert!(
        written.total() > opened.total(),
        "{opened:?} then {written:?}"
    );
    let live = dump(&store);
    store.checkpoint().unwrap().unwrap();
    let adopted = store.stats().state_bytes;
    assert!(
        adopted.total() <= opened.total(),
        "{opened:?}, written {written:?}, after the checkpoint {adopted:?}"
    );
    assert_eq!(dump(&store), live);
    assert_verified(&store);
    // It goes on from there, and an open reads the same.
    store
        .ingest(vec![event(301, vec![edge("fresh", "OWNS", "n5", 0.5)])])
        .unwrap();
    let live = dump(&store);
    assert_verified(&store);
    drop(store);
    let store = Store::open(dir).unwrap();
    assert_eq!(dump(&store), live);
    assert_verified(&store);
}

/// Damage to a mapped section is found when the block that holds it is first read (its
/// CRC-32): what the block holds reads as missing, never as wrong ids; `verify` reports it;
/// the next checkpoint refuses to write the damaged state and removes the snapshot; and the
/// next open replays the state from the log, whole again.
fn damage_to_a_mapped_section_is_found_and_a_batch_replays_the_graph_first(
    kind: BackendKind,
    dir: &Path,
) {
    let store = built_with_snapshot(kind, dir);
    let live = dump(&store);
    drop(store);
    let original = dir.with_extension("original");
    copy_dir(dir, &original);
    let path = dir.join(SNAPSHOT);
    let good = std::fs::read(&path).unwrap();
    let sections = (HEADER_LEN + body_len(&good)).div_ceil(4096) * 4096;
    let mut damaged = 0;
    // Every 61st byte of the sections, past their padding (where a change is harmless).
    for at in (sections..good.len()).step_by(61) {
        let mut bytes = good.clone();
        bytes[at] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        let store = Store::open(dir).unwrap();
        if OFFSET_SECTIONS
            .iter()
            .any(|k| section_bytes(&good, *k).contains(&at))
        {
            // A block the open reads (the ends of the offsets, each one block here): the
            // snapshot is refused there and then, and the state replayed from the log.
            assert!(
                matches!(store.state_source(), StateSource::Log),
                "byte {at}"
            );
            assert_eq!(dump(&store), live, "byte {at}");
            continue;
        }
        assert!(
            matches!(store.state_source(), StateSource::Snapshot { .. }),
            "byte {at}: {:?}",
            store.state_source()
        );
        if dump(&store) == live && store.verify().unwrap().ok() {
            continue;
        }
        damaged += 1;
        // A batch after the damage could take a key or an edge for missing and add a second
        // copy (or refuse an edge between nodes that exist): the store replays its graph
        // from the log first, and the batch is written against that.
        let events = store.stats().events;
        store
            .ingest(vec![event(900, vec![edge("n2", "NEAR", "n3", 0.5)])])
            .unwrap_or_else(|e| panic!("byte {at}: {e}"));
        assert_eq!(store.stats().events, events + 1);
        assert_verified(&store);
        let after = dump(&store);
        assert_ne!(
            after, live,
            "byte {at}: the batch changed the edge's confidence"
        );
        store.checkpoint().unwrap();
        drop(store);
        assert_eq!(dump_from_log(dir), after, "byte {at}");
        let store = Store::open(dir).unwrap();
        assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
        assert_eq!(dump(&store), after, "byte {at}");
        drop(store);
        // Back to the store as built, for the next byte.
        std::fs::remove_dir_all(dir).unwrap();
        copy_dir(&original, dir);
        if damaged == 8 {
            break;
        }
    }
    assert!(damaged > 0);
}

/// A block of the mapped snapshot is checked at its first read. Bytes of the file changed
/// after that (by another program, or the disk under the map) must not go into the next
/// snapshot with checksums of their own: a checkpoint checks every block again, those read
/// before included, and refuses a state that reads them; the next open replays the log.
/// (A probe found this: a byte flipped during a load, which runs on its own map, was
/// carried into the next snapshot, and `replay --verify` reported a missing node.)
fn a_block_changed_after_its_first_read_is_not_carried_into_the_next_snapshot(
    kind: BackendKind,
    dir: &Path,
) {
    use std::io::{Seek, SeekFrom, Write};
    drop(built_with_snapshot(kind, dir));
    let store = Store::open(dir).unwrap();
    assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
    // Every block is read, and found sound.
    let live = dump(&store);
    assert!(live.iter().any(|l| l.contains("thing 17")));
    let path = dir.join(SNAPSHOT);
    let bytes = std::fs::read(&path).unwrap();
    let records = section_bytes(&bytes, NODE_RECORDS);
    let name = bytes[records.clone()]
        .windows(8)
        .position(|w| w == b"thing 17")
        .expect("the node's name lies in its record");
    let at = records.start + name + 4;
    // Changed in place, as the map sees it: a write that truncated the file first would
    // leave the map's pages past its end for a moment.
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.seek(SeekFrom::Start(at as u64)).unwrap();
    file.write_all(&[bytes[at] ^ 0x20]).unwrap();
    file.sync_all().unwrap();
    drop(file);
    store
        .ingest(vec![event(900, vec![edge("n2", "NEAR", "n3", 0.5)])])
        .unwrap();
    let refused = store.checkpoint().unwrap_err().to_string();
    assert!(refused.contains("damaged"), "{refused}");
    assert!(!path.exists() && !dir.join("state.snapshot.tmp").exists());
    drop(store);
    let store = Store::open(dir).unwrap();
    assert_eq!(store.state_source(), StateSource::Log);
    let replayed = dump(&store);
    assert!(replayed.iter().any(|l| l.contains("thing 17")));
    assert!(!replayed.iter().any(|l| l.contains("thinG 17")));
    assert_verified(&store);
}

/// A key whose node record or key-table slot changed after its first read must not make a
/// batch that names it fail as naming an unknown node: a reference that misses checks the
/// blocks its lookup read again, and damage found there has the batch projected again on the
/// graph replayed from the log. (A probe found this: a byte flipped in a node record during
/// a load, after the block's first read, refused the next batch with `unknown node
/// "n117779"` though the log held that node.)
fn an_edge_to_a_key_whose_record_changed_after_its_first_read_is_not_refused_as_unknown(
    kind: BackendKind,
    dir: &Path,
) {
    // The key as node 17's record holds it (its length, then its bytes), and node 17's slot
    // in the key table (its id; no other slot holds 17 in this table of 39 keys).
    let changes: [(usize, &[u8], usize); 2] = [
        (NODE_RECORDS, b"\x03n17", 1),
        (KEY_TABLE, &[17, 0, 0, 0], 0),
    ];
    for (k, (section, found, byte)) in changes.into_iter().enumerate() {
        let dir = dir.join(format!("change {k}"));
        drop(built_with_snapshot(kind, &dir));
        let store = Store::open(&dir).unwrap();
        assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
        // Every block is read, and found sound: the dump reads the records, a lookup of every
        // key the key table.
        let live = dump(&store);
        assert!(live.iter().any(|l| l.starts_with("n17 ")));
        for i in 0..39 {
            assert!(store.graph().node_id(&format!("n{i}")).is_some());
        }
        let bytes = std::fs::read(dir.join(SNAPSHOT)).unwrap();
        let within = section_bytes(&bytes, section);
        let at = bytes[within.clone()]
            .windows(found.len())
            .position(|w| w == found)
            .expect("the bytes lie in the section");
        change_in_place(&dir.join(SNAPSHOT), within.start + at + byte);
        store
            .ingest(vec![event(900, vec![edge("n2", "NEAR", "n17", 0.5)])])
            .unwrap_or_else(|e| panic!("change {k}: n17 is in the log: {e}"));
        let after = dump(&store);
        assert!(after.iter().any(|l| l.starts_with("n17 ")), "change {k}");
        assert_ne!(after, live, "change {k}: the edge went in");
        assert_verified(&store);
        drop(store);
        let store = Store::open(&dir).unwrap();
        assert_eq!(dump(&store), after, "change {k}");
        assert_verified(&store);
    }
}

/// A key a user names whose node record changed after its first read (here: the key's
/// bytes) is not taken for unknown. A lookup (`require_node`: queries, the server, the CLI)
/// answers that the snapshot is damaged, and the next write replays the graph from the log;
/// a pin or a delete of it replays the graph and goes in. Each straight after the change,
/// on a store of its own.
fn a_key_asked_for_after_its_record_changed_is_found_damaged_not_unknown(
    kind: BackendKind,
    dir: &Path,
) {
    let changed = |name: &str| {
        let dir = dir.join(name);
        drop(built_with_snapshot(kind, &dir));
        let store = Store::open(&dir).unwrap();
        assert!(store.require_node("n17").is_ok());
        change_key_of_n17_in_place(&dir);
        assert!(store.node_by_key("n17").is_none(), "read as the block was");
        assert!(!store.snapshot_damage_found());
        store
    };

    let store = changed("lookup");
    let missed = store.require_node("n17").unwrap_err();
    assert!(matches!(missed, loci::Error::Corrupt { .. }), "{missed}");
    assert!(store.snapshot_damage_found());
    assert!(
        store.stats().snapshot_damage_found,
        "what a server's clients see"
    );
    store
        .ingest(vec![event(900, vec![edge("n2", "NEAR", "n3", 0.5)])])
        .unwrap();
    assert_eq!(store.require_node("n17").unwrap().name, "thing 17");
    assert!(!store.snapshot_damage_found());
    assert_verified(&store);

    let store = changed("pin");
    store.pin(&["n17"], true).unwrap();
    assert!(store.require_node("n17").unwrap().pinned);
    assert_verified(&store);

    let store = changed("delete");
    store.delete(&loci::DeleteRequest::nodes(["n17"])).unwrap();
    assert!(matches!(
        store.require_node("n17"),
        Err(loci::Error::NotFound(_))
    ));
    assert_verified(&store);
}

/// An upsert of a key whose node record changed after its first read misses (a miss of a
/// key that may be new is taken as it is) and makes a second node for it in the live
/// state, with its id given out. The log holds no second node: a replay of the graph, in
/// the same process once the damage is found or at the next open, takes what the log gives
/// (counters, and a text index without the second node's document) and verifies, where
/// every open after had been refused ("the replay reached ... the meta table says ...")
/// though the log was whole.
fn a_store_whose_live_state_made_a_key_twice_reopens_as_its_log_says(
    kind: BackendKind,
    dir: &Path,
) {
    for reopen in [true, false] {
        let dir = dir.join(if reopen { "reopened" } else { "in process" });
        drop(built_with_snapshot(kind, &dir));
        let mut store = Store::open(&dir).unwrap();
        assert!(store.require_node("n17").is_ok());
        let nodes = store.stats().nodes;
        change_key_of_n17_in_place(&dir);
        store
            .ingest(vec![event(900, vec![node("n17", "Item", "renamed 17")])])
            .unwrap();
        assert_eq!(
            store.stats().nodes,
            nodes + 1,
            "the live state made n17 again"
        );
        if reopen {
            drop(store);
            store = Store::open(&dir).unwrap();
        } else {
            // The checkpoint finds the damage; the next batch replays the graph.
            assert!(store.checkpoint().is_err());
            store
                .ingest(vec![event(901, vec![edge("n2", "NEAR", "n3", 0.5)])])
                .unwrap();
        }
        assert_eq!(store.stats().nodes, nodes, "reopened: {reopen}");
        let n17 = store.require_node("n17").unwrap();
        assert_eq!(n17.name, "renamed 17");
        let renamed = |store: &Store| {
            store
                .search("renamed", &loci::SearchFilter::default(), 10)
                .unwrap()
                .into_iter()
                .map(|h| h.target)
                .collect::<Vec<_>>()
        };
        assert_eq!(renamed(&store), [loci::Target::Node(n17.id)]);
        assert_verified(&store);
        // The id the second node had is given again, and no document names it.
        store
            .ingest(vec![event(902, vec![node("n40", "Item", "thing 40")])])
            .unwrap();
        assert_eq!(renamed(&store), [loci::Target::Node(n17.id)]);
        assert_verified(&store);
        drop(store);
        assert_verified(&Store::open(&dir).unwrap());
    }
}

/// An adjacency offset changed under the map after its block's first read, to past the
/// entries' end: the row reads as empty (as a damaged block's does), and the store is told,
/// so that the CLI exits as corrupt and the next write replays the graph. (A probe saw
/// such rows read as empty with no damage ever recorded.)
fn a_row_whose_offsets_changed_past_the_entries_is_found_damaged(kind: BackendKind, dir: &Path) {
    drop(built_with_snapshot(kind, dir));
    let store = Store::open(dir).unwrap();
    // Every block is read, and found sound.
    dump(&store);
    let n15 = store.require_node("n15").unwrap().id;
    let around = |store: &Store| store.neighbors(n15, 1, &ExpandOptions::default()).len();
    let neighbours = around(&store);
    assert!(neighbours > 0);
    let bytes = std::fs::read(dir.join(SNAPSHOT)).unwrap();
    let offsets = section_bytes(&bytes, ADJACENCY_OFFSETS);
    // The high byte of where row 15 ends (narrow offsets: four bytes each).
    change_in_place(
        &dir.join(SNAPSHOT),
        offsets.start + (n15.0 as usize + 1) * 4 + 3,
    );
    assert_eq!(around(&store), 0);
    assert!(store.snapshot_damage_found());
    store
        .ingest(vec![event(900, vec![node("n41", "Item", "thing 41")])])
        .unwrap();
    assert_eq!(around(&store), neighbours);
    assert!(!store.snapshot_damage_found());
    assert_verified(&store);
}

/// Flips a bit of a byte of node n17's key where its record in the snapshot in `dir` holds
/// it (after the key's length), in place ([`change_in_place`]).
fn change_key_of_n17_in_place(dir: &Path) {
    let bytes = std::fs::read(dir.join(SNAPSHOT)).unwrap();
    let records = section_bytes(&bytes, NODE_RECORDS);
    let at = bytes[records.clone()]
        .windows(4)
        .position(|w| w == b"\x03n17")
        .expect("the node's key lies in its record");
    change_in_place(&dir.join(SNAPSHOT), records.start + at + 1);
}

/// Flips a bit of the byte at `at` of the file at `path` in place, as a map of it sees: a
/// write that truncated the file first would leave the map's pages past its end for a moment.
fn change_in_place(path: &Path, at: usize) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8];
    file.seek(SeekFrom::Start(at as u64)).unwrap();
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(at as u64)).unwrap();
    file.write_all(&[byte[0] ^ 0x20]).unwrap();
    file.sync_all().unwrap();
}

/// How many mapped sections a snapshot has.
const SECTIONS: usize = 15;
/// Bytes of one item of each mapped section, in their order in the file (56: the header of a
/// block of a packed column; 4: an offset, narrow in every store these tests build).
const ITEM_BYTES: [usize; SECTIONS] = [56, 1, 56, 1, 4, 56, 1, 4, 1, 56, 1, 4, 4, 1, 1];
/// The sections of offsets, whose first and last blocks an open reads.
const OFFSET_SECTIONS: [usize; 3] = [4, 7, 12];
/// Mapped sections the tests change.
const EDGE_CORES: usize = 1;
const ADJACENCY_OFFSETS: usize = 4;
const ADJACENCY_ENTRY_BLOCKS: usize = 5;
const ADJACENCY_ENTRIES: usize = 6;
const NODE_RECORDS: usize = 8;
const NODE_LABEL_BLOCKS: usize = 9;
const NODE_LABELS: usize = 10;
const KEY_TABLE: usize = 11;
const EDGE_DETAILS: usize = 13;

/// Bytes of section `k` changed with its block's CRC-32 and the body's CRC made right again
/// (a crafted file, or a writer's bug), one change at a time: `each` is given the store
/// opened from each changed file. The test store is small enough that each of the sections
/// is one block, so the body ends with their table: an item count (u64) and one CRC (u32)
/// each. The store in `dir` is built first (`built_with_snapshot`). Returns how many
/// changed files were opened; the good file is put back.
fn for_each_change_under_valid_checksums(
    dir: &Path,
    k: usize,
    mut each: impl FnMut(&Store),
) -> usize {
    let path = dir.join(SNAPSHOT);
    let good = std::fs::read(&path).unwrap();
    let body_end = HEADER_LEN + body_len(&good);
    let table = body_end - SECTIONS * 12;
    let section = section_bytes(&good, k);
    let crc_at = table + k * 12 + 8..table + (k + 1) * 12;
    assert_eq!(
        crc32fast::hash(&good[section.clone()]).to_le_bytes(),
        good[crc_at.clone()],
        "the section's block CRC is where this test looks for it"
    );
    let mut opened = 0;
    for at in section.clone().step_by(7) {
        for change in [0xffu8, 0x01, 0x80] {
            let mut bytes = good.clone();
            bytes[at] ^= change;
            let crc = crc32fast::hash(&bytes[section.clone()]);
            bytes[crc_at.clone()].copy_from_slice(&crc.to_le_bytes());
            let body = crc32fast::hash(&bytes[HEADER_LEN..body_end]);
            bytes[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&body.to_le_bytes());
            std::fs::write(&path, &bytes).unwrap();
            let store = Store::open(dir).unwrap();
            assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
            opened += 1;
            each(&store);
        }
    }
    std::fs::write(&path, good).unwrap();
    opened
}

/// Where mapped section `k` lies in snapshot `bytes` (each starts on a 4096-byte boundary
/// after the body, whose table gives each one's item count).
fn section_bytes(bytes: &[u8], k: usize) -> std::ops::Range<usize> {
    let body_end = HEADER_LEN + body_len(bytes);
    let table = body_end - SECTIONS * 12;
    let items: Vec<usize> = (0..SECTIONS)
        .map(|k| {
            u64::from_le_bytes(
                bytes[table + k * 12..table + k * 12 + 8]
                    .try_into()
                    .unwrap(),
            ) as usize
        })
        .collect();
    let mut start = body_end.div_ceil(4096) * 4096;
    for j in 0..k {
        start = (start + items[j] * ITEM_BYTES[j]).div_ceil(4096) * 4096;
    }
    start..start + items[k] * ITEM_BYTES[k]
}

/// Where the body of snapshot `bytes` gives its node counts: past the relation and label
/// names, the node slots (u32), the live nodes (u32), the pinned nodes' count (u32) and ids.
fn body_node_counts_at(bytes: &[u8]) -> usize {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let mut at = HEADER_LEN;
    for _ in 0..2 {
        let names = u32_at(at);
        at += 4;
        for _ in 0..names {
            at += 4 + u32_at(at) as usize;
        }
    }
    at
}

/// Every read of what a changed section holds gives a node or an edge or nothing, never a
/// panic, and `verify` compares it with the log.
fn a_section_changed_under_valid_checksums_reads_as_something_or_nothing(
    kind: BackendKind,
    dir: &Path,
    k: usize,
) {
    drop(built_with_snapshot(kind, dir));
    let opened = for_each_change_under_valid_checksums(dir, k, |store| {
        let _ = dump(store);
        let g = store.graph();
        for id in g.node_ids().collect::<Vec<_>>() {
            let _ = (g.node(id), g.node_key(id), g.node_name(id));
        }
        let edges: Vec<_> = g.edges().map(|(id, _)| id).collect();
        drop(g);
        for id in edges {
            let _ = store.edge(id).unwrap();
        }
        store.verify().unwrap();
    });
    assert!(opened > 10);
}

/// `replay --verify` proves the live state: a change to section `k` that any read can tell
/// from the log's replay is one `verify` reports, whatever field of the section it is in.
fn a_change_any_read_sees_is_one_verify_reports(kind: BackendKind, dir: &Path, k: usize) {
    drop(built_with_snapshot(kind, dir));
    let replayed = dump_from_log(dir);
    let mut seen = 0;
    let opened = for_each_change_under_valid_checksums(dir, k, |store| {
        let read = dump(store);
        if read != replayed {
            seen += 1;
            let report = store.verify().unwrap();
            let first = read.iter().zip(&replayed).find(|(a, b)| a != b);
            assert!(
                !report.ok(),
                "section {k}: reads differ from the log's replay ({first:?}) and verify says OK"
            );
        }
    });
    assert!(seen > 0, "{opened} opened, {seen} read otherwise");
}

fn a_changed_adjacency_entry_that_reads_otherwise_fails_verify(kind: BackendKind, dir: &Path) {
    a_change_any_read_sees_is_one_verify_reports(kind, &dir.join("blocks"), ADJACENCY_ENTRY_BLOCKS);
    a_change_any_read_sees_is_one_verify_reports(kind, &dir.join("bits"), ADJACENCY_ENTRIES);
}

fn a_changed_node_label_that_reads_otherwise_fails_verify(kind: BackendKind, dir: &Path) {
    a_change_any_read_sees_is_one_verify_reports(kind, &dir.join("blocks"), NODE_LABEL_BLOCKS);
    a_change_any_read_sees_is_one_verify_reports(kind, &dir.join("bits"), NODE_LABELS);
}

/// The body's set of pinned nodes, changed under a right checksum to name another node:
/// tiers and decay floors read the pins from that set, not from the node records, so
/// `verify` compares it with the log's (it said OK while `n2` read as pinned and `n1` not).
fn a_changed_pin_that_reads_otherwise_fails_verify(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    let (n1, n2) = (
        store.node_by_key("n1").unwrap().id,
        store.node_by_key("n2").unwrap().id,
    );
    drop(store);
    let path = dir.join(SNAPSHOT);
    let mut bytes = std::fs::read(&path).unwrap();
    let pins = body_node_counts_at(&bytes) + 8;
    let id_at = pins + 4..pins + 8;
    assert_eq!(bytes[pins..pins + 4], 1u32.to_le_bytes(), "one pinned node");
    assert_eq!(
        bytes[id_at.clone()],
        n1.0.to_le_bytes(),
        "n1 is the pinned one"
    );
    bytes[id_at].copy_from_slice(&n2.0.to_le_bytes());
    let body_end = HEADER_LEN + body_len(&bytes);
    let crc = crc32fast::hash(&bytes[HEADER_LEN..body_end]);
    bytes[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();

    let store = Store::open(dir).unwrap();
    assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
    let g = store.graph();
    assert!(
        g.is_pinned(n2) && !g.is_pinned(n1),
        "the changed set is what reads see"
    );
    drop(g);
    let report = store.verify().unwrap();
    assert!(!report.ok(), "the pins read otherwise and verify says OK");
    assert!(
        report.differences.iter().any(|d| d.contains("pins")),
        "{:?}",
        report.differences
    );
}

/// A dry run and a pin meet damage to the key table as a batch does: the graph is replayed
/// from the log and they answer from it, where a node the damaged table hid was missing
/// (the dry run refused an edge to it, the pin said it was not found). The damage is found
/// by a read before the dry run, by the dry run's lookups, or by the pin's.
fn a_dry_run_and_a_pin_see_past_a_damaged_key_table(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    let batch = || vec![event(900, vec![edge("n2", "NEAR", "n3", 0.5)])];
    // What the dry run says, but where its event would go (after the pin's, or not).
    let what = |c: loci::Commit| loci::Commit {
        first_seq: 0,
        last_seq: 0,
        ..c
    };
    let intact = what(store.check(batch()).unwrap());
    drop(store);
    let original = dir.with_extension("original");
    copy_dir(dir, &original);
    let path = dir.join(SNAPSHOT);
    let good = std::fs::read(&path).unwrap();
    let keys: Vec<String> = (0..39).map(|i| format!("n{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    for (i, at) in section_bytes(&good, KEY_TABLE).step_by(5).enumerate() {
        let mut bytes = good.clone();
        bytes[at] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        let store = Store::open(dir).unwrap();
        assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
        let pin = || {
            store
                .pin(&keys, true)
                .unwrap_or_else(|e| panic!("byte {at}: {e}"))
        };
        let dry_run = || assert_eq!(what(store.check(batch()).unwrap()), intact, "byte {at}");
        match i % 3 {
            0 => {
                // Every key looked up: the damage is found before the dry run.
                keys.iter().for_each(|k| drop(store.node_by_key(k)));
                dry_run();
                pin();
            }
            1 => {
                dry_run();
                pin();
            }
            _ => {
                pin();
                dry_run();
            }
        }
        // The graph was replayed: the damaged snapshot is gone (removed, or replaced by the
        // pin's checkpoint).
        assert!(
            std::fs::read(&path).ok() != Some(bytes),
            "byte {at}: not replayed"
        );
        assert_verified(&store);
        assert_eq!(store.graph().pinned_ids().count(), keys.len(), "byte {at}");
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
        copy_dir(&original, dir);
    }
}

/// Damage to the adjacency entries is met by nothing that scores a batch, only by its
/// projection, which looks for the edge among its source's entries: on the damaged graph an
/// update of an edge that exists would add a second one. The batch is projected again on
/// the graph replayed from the log, and the edge updated.
fn damage_met_while_a_batch_is_projected_has_it_projected_again(kind: BackendKind, dir: &Path) {
    let events = built_with_snapshot(kind, dir).stats().events;
    let original = dir.with_extension("original");
    copy_dir(dir, &original);
    let path = dir.join(SNAPSHOT);
    let good = std::fs::read(&path).unwrap();
    let entries = section_bytes(&good, ADJACENCY_ENTRIES);
    for at in entries.clone().step_by(entries.len() / 5) {
        let mut bytes = good.clone();
        bytes[at] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        let store = Store::open(dir).unwrap();
        assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
        // Nothing read before the batch (`stats` reads every section).
        store
            .ingest(vec![event(900, vec![edge("n2", "NEAR", "n1", 0.5)])])
            .unwrap_or_else(|e| panic!("byte {at}: {e}"));
        // The graph was replayed: the damaged snapshot is gone (removed, or replaced by the
        // batch's checkpoint).
        assert!(
            std::fs::read(&path).ok() != Some(bytes),
            "byte {at}: not replayed"
        );
        assert_eq!(store.stats().events, events + 1, "byte {at}");
        assert_verified(&store);
        let g = store.graph();
        let edges = g
            .edges()
            .filter(|(_, e)| {
                g.node_key(e.from) == Some("n2")
                    && g.node_key(e.to) == Some("n1")
                    && g.relation_name(e.relation) == "NEAR"
            })
            .count();
        assert_eq!(edges, 1, "byte {at}");
        drop(g);
        let after = dump(&store);
        drop(store);
        assert_eq!(dump_from_log(dir), after, "byte {at}");
        std::fs::remove_dir_all(dir).unwrap();
        copy_dir(&original, dir);
    }
}

/// A read command that met a damaged block of the snapshot exits 6 (corrupt store) after its
/// output, saying so, where it exited 0 with a partial answer and an ERROR line a script
/// would not see; on the healthy store the same command exits 0.
fn a_read_command_that_met_damage_exits_as_corrupt(kind: BackendKind, dir: &Path) {
    drop(built_with_snapshot(kind, dir));
    let path = dir.join(SNAPSHOT);
    let good = std::fs::read(&path).unwrap();
    let neighbors = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_loci"))
            .args(["neighbors", "n2", "--depth", "1", "--store"])
            .arg(dir)
            .output()
            .unwrap()
    };
    let healthy = neighbors();
    assert_eq!(healthy.status.code(), Some(0), "{healthy:?}");
    let mut bytes = good.clone();
    bytes[section_bytes(&good, ADJACENCY_ENTRIES).start + 3] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let damaged = neighbors();
    let stderr = String::from_utf8_lossy(&damaged.stderr);
    assert_eq!(damaged.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("damaged"), "{stderr}");
}

/// A closed store in `dir` ([`built_with_snapshot`]) whose snapshot has byte `at` of `section`
/// flipped: the block holding it fails its checksum.
fn built_with_a_byte_of_a_section_flipped(
    kind: BackendKind,
    dir: &Path,
    section: usize,
    at: usize,
) {
    drop(built_with_snapshot(kind, dir));
    let path = dir.join(SNAPSHOT);
    let mut bytes = std::fs::read(&path).unwrap();
    let start = section_bytes(&bytes, section).start;
    bytes[start + at] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
}

/// helper-102 (session 46): `replay --verify` on a store whose snapshot held a damaged block
/// compared what read as missing, and exited 1, "MISMATCH", with a hundred differences and
/// the advice to repair: a script takes that for a divergence of the log's views. It exits 6,
/// saying the differences are the damage's.
fn a_verify_that_met_damage_says_so_and_exits_as_corrupt(kind: BackendKind, dir: &Path) {
    built_with_a_byte_of_a_section_flipped(kind, dir, EDGE_DETAILS, 3);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loci"))
        .args(["replay", "--verify", "--store"])
        .arg(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(6), "{stdout}");
    assert!(!stdout.contains("MISMATCH"), "{stdout}");
    assert!(
        stdout.starts_with("replayed") && stdout.contains("DAMAGED"),
        "{stdout}"
    );
}

/// A lookup whose node read as missing because its record lies in a damaged block exits 6
/// (corrupt store), not 4 (not found): "no node has key n2" was the damage speaking, and a
/// script took it for an answer.
fn a_lookup_that_met_damage_exits_as_corrupt_not_as_not_found(kind: BackendKind, dir: &Path) {
    built_with_a_byte_of_a_section_flipped(kind, dir, NODE_RECORDS, 5);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loci"))
        .args(["neighbors", "n2", "--depth", "1", "--store"])
        .arg(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("damaged"), "{stderr}");
}

fn a_node_record_changed_under_valid_checksums_reads_as_a_node_or_nothing(
    kind: BackendKind,
    dir: &Path,
) {
    a_section_changed_under_valid_checksums_reads_as_something_or_nothing(kind, dir, NODE_RECORDS);
}

fn an_edge_core_changed_under_valid_checksums_reads_as_an_edge_or_nothing(
    kind: BackendKind,
    dir: &Path,
) {
    a_section_changed_under_valid_checksums_reads_as_something_or_nothing(kind, dir, EDGE_CORES);
}

fn an_edge_detail_changed_under_valid_checksums_reads_as_an_edge_or_nothing(
    kind: BackendKind,
    dir: &Path,
) {
    a_section_changed_under_valid_checksums_reads_as_something_or_nothing(kind, dir, EDGE_DETAILS);
}

/// The live node and edge counts in the body, crafted to 0 under a right checksum: the store
/// opens from it, takes a retraction and a checkpoint without a panic, an overflow or a hang
/// (the next snapshot's key table was sized from the count, and probing a full table never
/// ended), and `verify` compares it with the log.
fn understated_live_counts_in_the_body_break_nothing(kind: BackendKind, dir: &Path) {
    let store = built_with_snapshot(kind, dir);
    drop(store);
    let path = dir.join(SNAPSHOT);
    let mut bytes = std::fs::read(&path).unwrap();
    let body_end = HEADER_LEN + body_len(&bytes);
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let at = body_node_counts_at(&bytes);
    let live_nodes = at + 4;
    let pinned = u32_at(&bytes, at + 8) as usize;
    let live_edges = at + 12 + 4 * pinned + 4;
    assert!(u32_at(&bytes, live_nodes) > 30 && u32_at(&bytes, live_edges) > 30);
    bytes[live_nodes..live_nodes + 4].copy_from_slice(&0u32.to_le_bytes());
    bytes[live_edges..live_edges + 4].copy_from_slice(&0u32.to_le_bytes());
    let crc = crc32fast::hash(&bytes[HEADER_LEN..body_end]);
    bytes[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let dir = dir.to_path_buf();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let store = Store::open(&dir).unwrap();
        assert!(matches!(store.state_source(), StateSource::Snapshot { .. }));
        retract_and_checkpoint(&store);
        let _ = store.verify().unwrap();
        drop(store);
        let _ = dump(&Store::open(&dir).unwrap());
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the store finished its writes and checkpoint (a panic or a hang if not)");
}

macro_rules! snapshot_suite {
    ($module:ident, $kind:expr, [$($test:ident),* $(,)?]) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    let dir = tempfile::tempdir().unwrap();
                    super::$test($kind, &dir.path().join("store"));
                }
            )*
        }
    };
}

macro_rules! all_backends {
    ($($test:ident),* $(,)?) => {
        snapshot_suite!(redb, loci::BackendKind::Redb, [$($test),*]);
        snapshot_suite!(sled, loci::BackendKind::Sled, [$($test),*]);
    };
}

all_backends!(
    an_open_reads_the_snapshot_and_sees_what_a_rebuild_sees,
    adjacency_lists_are_in_edge_id_order_however_the_store_was_opened,
    stats_say_where_the_snapshots_bytes_go,
    changes_after_the_snapshot_are_caught_up,
    a_damaged_or_foreign_snapshot_is_not_used,
    a_snapshot_from_before_a_deletion_is_not_used,
    compaction_rewrites_the_snapshot,
    a_snapshot_left_half_written_is_removed_by_the_next_writer,
    a_read_only_handle_cannot_checkpoint,
    closing_at_exit_writes_what_a_drop_writes,
    a_huge_foreign_snapshot_is_refused_before_it_is_read,
    a_snapshot_that_is_not_a_file_is_not_opened,
    a_snapshot_that_cannot_be_put_in_place_leaves_no_temporary_file,
    a_snapshot_changed_under_a_valid_checksum_opens_or_is_refused,
    an_open_maps_the_adjacency_and_edges_instead_of_building_them,
    damage_to_a_mapped_section_is_found_and_a_batch_replays_the_graph_first,
    a_block_changed_after_its_first_read_is_not_carried_into_the_next_snapshot,
    an_edge_to_a_key_whose_record_changed_after_its_first_read_is_not_refused_as_unknown,
    a_key_asked_for_after_its_record_changed_is_found_damaged_not_unknown,
    a_store_whose_live_state_made_a_key_twice_reopens_as_its_log_says,
    a_row_whose_offsets_changed_past_the_entries_is_found_damaged,
    a_node_record_changed_under_valid_checksums_reads_as_a_node_or_nothing,
    an_edge_detail_changed_under_valid_checksums_reads_as_an_edge_or_nothing,
    an_edge_core_changed_under_valid_checksums_reads_as_an_edge_or_nothing,
    a_changed_adjacency_entry_that_reads_otherwise_fails_verify,
    a_changed_node_label_that_reads_otherwise_fails_verify,
    a_changed_pin_that_reads_otherwise_fails_verify,
    a_dry_run_and_a_pin_see_past_a_damaged_key_table,
    damage_met_while_a_batch_is_projected_has_it_projected_again,
    a_read_command_that_met_damage_exits_as_corrupt,
    a_lookup_that_met_damage_exits_as_corrupt_not_as_not_found,
    a_verify_that_met_damage_says_so_and_exits_as_corrupt,
    a_store_opened_from_its_snapshot_moves_onto_each_new_one,
    understated_live_counts_in_the_body_break_nothing,
);

#[test]
fn a_long_log_replayed_at_open_is_snapshotted_at_close_however_small_its_graph() {
    // A log of many events over a small graph (an agent's notes, then thousands of summaries)
    // was replayed whole at every open: a state replayed from the log counted as changed by
    // its graph's size (278 for 43k events), under the close's threshold, so no snapshot was
    // ever written (0.5 s of every command on such a store; session 27).
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
        let notes: Vec<EventDraft> = (0..6_000)
            .map(|i| {
                let mut d = EventDraft::new(i, "bot", "OBSERVATION");
                d.payload = Value::from("a note");
                d
            })
            .collect();
        store.ingest(notes).unwrap();
    }
    let first = Store::open(dir.path()).unwrap();
    let first_source = first.state_source();
    drop(first);
    let again = Store::open(dir.path()).unwrap();
    assert!(
        matches!(again.state_source(), StateSource::Snapshot { .. }),
        "opened first from {first_source:?}, then from {:?}",
        again.state_source()
    );
}
