//! sled when a commit cannot reach disk. The file-size limit of this process (RLIMIT_FSIZE,
//! with SIGXFSZ ignored) makes sled's writes fail like a full disk would; that limit is
//! process-wide, which is why this is the only test in this file.
//!
//! A failed commit must come back as an error and leave the previous state: in this process
//! (sled has already applied the batch in memory, so the handle must refuse to serve it) and
//! after reopening (sled may write the batch when the handle is dropped with room again: the
//! next open takes it back, from the record the failure left).

use loci::model::{Assertion, EventDraft, NodeUpsert};
use loci::world::{self, WorldConfig};
use loci::{BackendKind, Store};

fn set_file_size_limit(bytes: Option<u64>) {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls with valid pointers.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut current), 0);
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: bytes.map(|b| b as libc::rlim_t).unwrap_or(current.rlim_max),
            rlim_max: current.rlim_max,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
}

fn largest_file(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .max()
        .unwrap_or(0)
}

/// What a server on `store` answers to a GET of each of `uris`: the status and the body. The
/// store goes with the server.
fn server_answers(store: Store, uris: &[&str]) -> Vec<(u16, String)> {
    use tower::ServiceExt;
    let state = loci::serve::AppState::new(store, loci::serve::ServeConfig::default()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut answers = Vec::new();
        for uri in uris {
            let request = axum::http::Request::builder()
                .uri(*uri)
                .body(axum::body::Body::empty())
                .unwrap();
            let response = loci::serve::router(state.clone())
                .oneshot(request)
                .await
                .unwrap();
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            answers.push((status, String::from_utf8_lossy(&bytes).into_owned()));
        }
        answers
    })
}

/// The names of the files recording a failed commit in the store's sled directory.
fn failure_records(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir.join("sled"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("loci-failed-commit-"))
        .collect()
}

#[test]
fn failed_sled_commit_is_an_error_and_leaves_the_previous_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let store = Store::create(&dir, BackendKind::Sled).unwrap();
    let mut first = EventDraft::new(1, "bot", "OBSERVATION");
    first.assertions = vec![Assertion::UpsertNode(NodeUpsert {
        key: "home".into(),
        name: Some("home".into()),
        ..Default::default()
    })];
    store.ingest(vec![first]).unwrap();

    let w = world::generate(&WorldConfig {
        seed: 5,
        scale: 8,
        days: 6,
    });
    // sled writes into space it already allocated until that runs out: commit until one fails.
    set_file_size_limit(Some(largest_file(&dir.join("sled"))));
    let mut before = store.stats();
    let mut err = None;
    for _ in 0..50 {
        before = store.stats();
        if let Err(e) = store.ingest(w.events.clone()) {
            err = Some(e);
            break;
        }
    }
    set_file_size_limit(None);
    let err = err.expect("a commit beyond the file size limit must fail");
    println!("failed commit after {} events: {err}", before.events);
    let failed_first = before.events + 1;
    // The failure is recorded beside sled's files, for the next open to take back whatever of
    // the batch sled writes when the handle is dropped with room on the disk again (it did,
    // now and then: the reopened store served the failed batch).
    let recorded = failure_records(&dir);
    assert_eq!(
        recorded.len(),
        1,
        "one record of the failed commit: {recorded:?}"
    );
    assert!(
        recorded[0].starts_with(&format!("loci-failed-commit-v1-{}-", before.events)),
        "{recorded:?}"
    );

    // In this process: nothing of the failed batch is visible, through any read.
    let after = store.stats();
    assert_eq!(
        (after.events, after.nodes, after.edges),
        (before.events, before.nodes, before.edges)
    );
    assert!(
        !matches!(store.event(failed_first), Ok(Some(_))),
        "the failed batch's first event is served from sled's memory"
    );
    // The handle stays closed even with space again: sled would now persist the failed batch.
    assert!(store.ingest(w.events[..1].to_vec()).is_err());
    assert!(store.usable().is_err());
    // A server on it says so at /health, for a supervisor to restart it (helper-142: "ok"),
    // and answers a request the handle refuses 503 `closed`, not 500 `internal` (helper-144).
    let answers = server_answers(
        store,
        &[
            "/health",
            "/v1/timeline?from=0&to=10",
            "/v1/stats",
            "/metrics",
        ],
    );
    let (status, body) = &answers[0];
    assert_eq!(*status, 503, "{body}");
    assert!(
        body.contains(r#""status":"failed""#) && body.contains("this handle is closed"),
        "{body}"
    );
    let (status, body) = &answers[1];
    assert_eq!(*status, 503, "{body}");
    assert!(body.contains(r#""code":"closed""#), "{body}");
    // The reports still answer (the counts are what was committed), and say the handle is
    // closed rather than passing for a working store (helper-144: 200 from memory, no word).
    let (status, body) = &answers[2];
    assert_eq!(*status, 200, "{body}");
    let stats: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(stats["events"], before.events, "{body}");
    assert_eq!(stats["usable"], false, "{body}");
    assert!(
        stats["handle_error"]
            .as_str()
            .is_some_and(|e| e.contains("this handle is closed")),
        "{body}"
    );
    let (status, body) = &answers[3];
    assert_eq!(*status, 200, "{body}");
    assert!(body.contains("\nloci_store_usable 0\n"), "{body}");

    // After reopening: exactly the previous state, and the store works again.
    let store = Store::open(&dir).unwrap();
    assert!(
        failure_records(&dir).is_empty(),
        "taken back, the record goes"
    );
    let reopened = store.stats();
    assert_eq!(
        (reopened.events, reopened.nodes, reopened.edges),
        (before.events, before.nodes, before.edges)
    );
    assert!(store.event(failed_first).unwrap().is_none());
    assert!(store.event(before.events).unwrap().is_some());
    assert!(store.verify().unwrap().ok());
    store.ingest(w.events[..3].to_vec()).unwrap();
    assert_eq!(store.stats().events, before.events + 3);
    assert!(store.verify().unwrap().ok());
}
