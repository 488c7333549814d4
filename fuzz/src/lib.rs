//! Shared harness of the ingest fuzz targets: one store, created once per fuzzing process and
//! holding a few nodes, edges and an idempotency key, against which every input is read and
//! checked (never written, so every run sees the same store and a crash reproduces).

use std::sync::OnceLock;

use loci::ingest::{self, Format};
use loci::{BackendKind, Store};

static STORE: OnceLock<(tempfile::TempDir, Store)> = OnceLock::new();

fn store() -> &'static Store {
    &STORE
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temporary directory");
            let store = Store::create(dir.path().join("s"), BackendKind::Redb).expect("store");
            let seed = concat!(
                "{\"ts\":1,\"kind\":\"SEEN\",\"idempotency_key\":\"k1\",\"assert\":[",
                "{\"op\":\"node\",\"key\":\"a\",\"label\":\"NPC\",\"name\":\"Ann\"},",
                "{\"op\":\"node\",\"key\":\"b\",\"label\":\"Place\"},",
                "{\"op\":\"edge\",\"from\":\"a\",\"rel\":\"AT\",\"to\":\"b\"}]}\n",
                "{\"id\":\"p1\",\"title\":\"Ann\",\"text\":\"Ann lives in b\"}\n"
            );
            for (line, format) in seed.lines().zip([Format::Events, Format::Passages]) {
                ingest::read_str("seed", line, format)
                    .and_then(|b| b.commit(&store))
                    .expect("seed batch");
            }
            (dir, store)
        })
        .1
}

/// Reads `data` as `format` (or detects the format when `None`) and checks the batch against
/// the store. Any outcome but a panic is fine: an error must say where.
pub fn check_input(format: Option<Format>, data: &[u8]) {
    let format = match format {
        Some(f) => f,
        None => match std::str::from_utf8(data)
            .ok()
            .and_then(|t| ingest::detect_format(std::path::Path::new("fuzz"), t).ok())
        {
            Some(f) => f,
            None => return,
        },
    };
    let store = store();
    match ingest::read_bytes("fuzz", data, format) {
        Ok(mut batch) => {
            if let Err(e) = batch.dedupe_passages(store, false) {
                assert!(e.to_string().starts_with("fuzz:"), "{e}");
                return;
            }
            let namespaced = batch.clone().namespaced("ns");
            for b in [batch, namespaced] {
                if let Err(e) = b.check(store) {
                    let msg = e.to_string();
                    assert!(!msg.is_empty());
                }
            }
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz:"), "{e}"),
    }
}
