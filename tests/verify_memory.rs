//! What `Store::verify` holds while it runs. It replays the whole log into a fresh state and
//! compares it with the live one; at 100M edges that replayed state alone is about 10 GB, so
//! anything more it holds per node or per edge (a copy of every record of either side) decides
//! whether verification fits the machine at all. This binary counts every heap byte through
//! its own allocator, so it holds one test: another running beside it would be counted too.

use loci::bench::{build_generated, GraphSpec};
use loci::{BackendKind, Store};

#[path = "common/counting.rs"]
mod counting;

/// The heap a verify adds at its peak, and the heap of the store's live state (which the
/// replay rebuilds), for the benchmark graph of `edges` edges and a fifth as many nodes.
fn verify_peak_and_state(edges: u32) -> (usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::create(tmp.path().join("s"), BackendKind::Redb).unwrap();
    let spec = GraphSpec {
        nodes: edges / 5,
        edges,
        ..GraphSpec::default()
    };
    build_generated(&store, &spec, 20_000, None).unwrap();

    let (added, report) = counting::peak_added(|| store.verify().unwrap());
    assert!(report.ok(), "{report:?}");
    assert_eq!(
        (report.nodes, report.edges),
        (edges as usize / 5, edges as usize)
    );
    // A state replayed on the heap, as verify's is: the load's own state maps the snapshots
    // it wrote as it grew, so its heap says little of what a replay holds.
    drop(store);
    let _ = std::fs::remove_file(tmp.path().join("s").join("state.snapshot"));
    let replayed = Store::open(tmp.path().join("s")).unwrap();
    (added, replayed.stats().state_bytes.total())
}

/// Verification holds the replayed state and little else that grows with the graph: no copy
/// of every node and edge of the replay and of the live state. At 100M edges it was killed by
/// the kernel at 24 GB for holding them.
///
/// The replay's chunk of 100,000 assertions in flight (about 44 MB) is the same at both
/// sizes here, so the difference of the peaks is what the extra 100,000 edges cost; it must
/// stay within 1.5 times what they add to a state. Holding the copies, it was 4.8 times; now
/// it is below one, since the peak falls within the replay's last chunk. The test is coarse
/// at this size: a copy made after the replay shows only past that chunk's 44 MB (a copy of
/// every edge does, one of the nodes alone, about 40 bytes an edge here, would not).
#[test]
fn verify_holds_the_replayed_state_and_not_a_copy_of_every_record() {
    let (small_peak, small_state) = verify_peak_and_state(100_000);
    let (large_peak, large_state) = verify_peak_and_state(200_000);
    let peak_per_edge = large_peak.saturating_sub(small_peak) as f64 / 100_000.0;
    let state_per_edge = large_state.saturating_sub(small_state) as f64 / 100_000.0;
    eprintln!(
        "verify's peak: {peak_per_edge:.0} heap bytes per edge added; a state: {state_per_edge:.0} (peaks {small_peak}, {large_peak})"
    );
    assert!(
        peak_per_edge <= 1.5 * state_per_edge,
        "verify's peak grew by {peak_per_edge:.0} heap bytes per edge added, a state by \
         {state_per_edge:.0} (peaks {small_peak} and {large_peak}, states {small_state} and \
         {large_state})"
    );
}
