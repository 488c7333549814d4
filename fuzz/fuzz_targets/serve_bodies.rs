//! Any bytes as the JSON body of a `loci serve` route end in an answer with a stable error code
//! or a success, never in a panic (caught or not): the first byte picks the route.
#![no_main]

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::Request;
use libfuzzer_sys::fuzz_target;
use loci::serve::{router, AppState, ServeConfig};
use tower::ServiceExt;

const ROUTES: [(&str, &str); 10] = [
    ("POST", "/v1/query"),
    ("POST", "/v1/run"),
    ("POST", "/v1/context"),
    ("POST", "/v1/events"),
    ("POST", "/v1/events?format=journal"),
    ("POST", "/v1/wm"),
    ("POST", "/v1/pin"),
    ("POST", "/v1/consolidate"),
    ("GET", "/v1/search?q="),
    ("GET", "/v1/neighbors?node="),
];

static STATE: OnceLock<(tempfile::TempDir, Arc<AppState>, tokio::runtime::Runtime)> =
    OnceLock::new();

fn state() -> &'static (tempfile::TempDir, Arc<AppState>, tokio::runtime::Runtime) {
    STATE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = loci::Store::create(dir.path().join("s"), loci::BackendKind::Redb).expect("store");
        let world = loci::world::generate(&loci::world::WorldConfig::default());
        store.ingest(world.events).expect("world");
        let mut config = ServeConfig::default();
        config.max_body_bytes = 64 * 1024;
        let state = AppState::new(store, config).expect("state");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        (dir, state, rt)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let (method, route) = ROUTES[pick as usize % ROUTES.len()];
    let (_, st, rt) = state();
    let (uri, body) = if method == "GET" {
        let q: String = body
            .iter()
            .map(|b| format!("%{b:02X}"))
            .collect();
        (format!("{route}{q}"), Vec::new())
    } else {
        (route.to_string(), body.to_vec())
    };
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::from(body))
        .expect("request");
    let resp = rt.block_on(router(st.clone()).oneshot(req)).expect("infallible");
    let status = resp.status().as_u16();
    let bytes = rt
        .block_on(axum::body::to_bytes(resp.into_body(), 1 << 26))
        .expect("body");
    if status >= 500 {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("\"internal\""),
            "{method} {route}: {status} {text}"
        );
    }
});
