//! What a planner query over events holds while it runs. A pattern `(e:Event)` scans the
//! events of a time range, or of one kind, actor or place; a row reads an event's record when
//! it asks for a field. Holding every record the scan names at once had made
//! `MATCH (e:Event {kind: 'SUMMARY'}) RETURN count(e)` hold 3.8 GB on a store of 566k
//! summaries, and the saved `timeline` query (whose default range is all of time) 4.3 GB.
//! This binary counts every heap byte through its own allocator, so it holds one test: another
//! running beside it would be counted too.

use std::collections::{BTreeMap, HashMap};

use loci::model::{EventDraft, Value};
use loci::query::{self, Val};
use loci::{BackendKind, Store};

#[path = "common/counting.rs"]
mod counting;

/// Events in the store, and the bytes of text each carries: 24 MB of records decoded, four
/// times what the executor's cache of 4,096 records holds.
const EVENTS: usize = 16_000;
const TEXT_BYTES: usize = 1_500;

/// The heap `text` adds at its peak while it runs with `$hi` = `hi`, and its only cell (a
/// count).
fn peak_and_count(store: &Store, text: &str, hi: i64) -> (usize, serde_json::Value) {
    let params = HashMap::from([("hi".to_string(), Val::Int(hi))]);
    let (added, result) = counting::peak_added(|| query::run(store, text, &params).unwrap());
    (added, result.rows[0][0].clone())
}

/// Scans of a range, of one kind in a range, and of every event, each reading every record it
/// names (`count(e.text)`): over all 16,000 events they hold about what a range scan holds
/// over the first 4,000 (the cache's worth, and a row and an index entry per event), where
/// holding every record named had added 18 MB.
#[test]
fn an_event_scan_holds_a_cache_of_records_not_every_record_it_names() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::create(tmp.path().join("s"), BackendKind::Redb).unwrap();
    // Each text differs from the others, as observations do (zstd would shrink a repeated
    // one on disk, not in memory, so only the count of events matters here).
    let drafts: Vec<EventDraft> = (0..EVENTS)
        .map(|i| {
            let mut e = EventDraft::new(i as i64, "bot", "NOTE");
            let text = format!("{i} ").repeat(TEXT_BYTES / (i.to_string().len() + 1));
            e.payload = Value::Map(BTreeMap::from([("text".to_string(), Value::Str(text))]));
            e
        })
        .collect();
    for chunk in drafts.chunks(4_000) {
        store.ingest(chunk.to_vec()).unwrap();
    }
    let records = EVENTS * TEXT_BYTES;
    let range = "MATCH (e:Event) WHERE e.ts >= 0 AND e.ts <= $hi RETURN count(e.text) AS n";
    let (quarter, n) = peak_and_count(&store, range, EVENTS as i64 / 4 - 1);
    assert_eq!(n, serde_json::json!(EVENTS / 4));
    for text in [
        range,
        "MATCH (e:Event {kind: 'NOTE'}) WHERE e.ts <= $hi RETURN count(e.text) AS n",
        "MATCH (e:Event) WHERE $hi >= 0 RETURN count(e.text) AS n",
    ] {
        let (all, n) = peak_and_count(&store, text, EVENTS as i64 - 1);
        assert_eq!(n, serde_json::json!(EVENTS), "{text}");
        eprintln!("{text}: {all} heap bytes at the peak; {quarter} over a quarter of the events");
        assert!(
            all.saturating_sub(quarter) < records / 8,
            "{text} held {all} heap bytes at its peak over every event, {quarter} over a \
             quarter of them: the records it scans hold {records}"
        );
    }
}
