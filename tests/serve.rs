//! `loci serve` in process: every route answers what the CLI prints, errors are JSON with a
//! stable code, the key guards every route but /health, bodies and budgets are bounded, a bad
//! batch writes nothing, and the OpenAPI document lists exactly the routes served.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use loci::serve::{router, AppState, ServeConfig};
use loci::{BackendKind, Store};
use serde_json::Value;
use tower::ServiceExt;

const KEY: &str = "0123456789abcdef0123456789abcdef";

fn world_store(dir: &std::path::Path) -> Store {
    let store = Store::create(dir, BackendKind::Redb).unwrap();
    let world = loci::world::generate(&loci::world::WorldConfig::default());
    store.ingest(world.events.clone()).unwrap();
    store
}

fn state(dir: &std::path::Path, key: Option<&str>) -> Arc<AppState> {
    let mut config = ServeConfig::default().with_key(key.map(str::to_string));
    config.max_body_bytes = 64 * 1024;
    AppState::new(world_store(dir), config).unwrap()
}

async fn call(
    state: &Arc<AppState>,
    method: &str,
    uri: &str,
    body: Option<&str>,
    key: Option<&str>,
) -> (StatusCode, Value, String) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(k) = key {
        req = req.header(header::AUTHORIZATION, format!("Bearer {k}"));
    }
    let req = req
        .body(Body::from(body.unwrap_or("").to_string()))
        .unwrap();
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let retry = resp
        .headers()
        .get(header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).to_string()));
    (status, v, retry)
}

/// The significant digits of every fraction in `v` whose digits pass 9 (an f32 holds 9 at
/// most, so more say it was widened to f64 on the way: 0.95 written 0.949999988079071).
fn widened_numbers(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Number(n) if n.is_f64() => {
            let text = n.to_string();
            let digits = text
                .trim_start_matches(['-', '0', '.'])
                .chars()
                .take_while(|c| *c != 'e')
                .filter(char::is_ascii_digit)
                .count();
            if digits > 9 {
                out.push(format!("{at}: {text}"));
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                widened_numbers(x, &format!("{at}[{i}]"), out);
            }
        }
        Value::Object(fields) => {
            for (k, x) in fields {
                widened_numbers(x, &format!("{at}.{k}"), out);
            }
        }
        _ => {}
    }
}

/// The server writes a confidence, a score or a salience as the CLI does (0.95), where
/// /v1/query, /v1/neighbors and /v1/nodes widened them to f64 (0.949999988079071), so that
/// a client comparing with 0.95 found none and the answers were not the CLI's (a helper's
/// probe).
#[tokio::test]
async fn the_server_writes_numbers_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let mut widened = Vec::new();
    for (method, uri, body) in [
        (
            "POST",
            "/v1/query",
            Some(r#"{"question": "who trades emeralds for sticks", "record": false}"#),
        ),
        ("GET", "/v1/neighbors?node=base:first&depth=2", None),
        ("GET", "/v1/nodes/npc:fletcher:0", None),
        ("GET", "/v1/edges/1", None),
        ("GET", "/v1/search?q=fletcher", None),
        (
            "POST",
            "/v1/context",
            Some(r#"{"budget": 400, "question": "where is home", "record": false}"#),
        ),
    ] {
        let (s, v, _) = call(&st, method, uri, body, None).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {v}");
        widened_numbers(&v, uri, &mut widened);
    }
    assert_eq!(widened, Vec::<String>::new());
}

/// helper-100 (session 46): an integer past every integer type (above u64, below i64) was
/// read as the nearest float and kept so, as an event's payload or a query's parameter, where
/// 2^63 to 2^64 - 1 were refused: "integers are exact 64-bit".
#[tokio::test]
async fn an_integer_no_type_holds_is_refused_not_kept_as_a_float() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for (uri, body, field) in [
        (
            "/v1/events",
            r#"{"ts":5,"actor":"bot","kind":"NOTE","payload":{"x":18446744073709551616123}}"#,
            "payload.x",
        ),
        (
            "/v1/events",
            r#"{"ts":5,"actor":"bot","kind":"NOTE","payload":{"x":-9223372036854775809}}"#,
            "payload.x",
        ),
        (
            "/v1/run",
            r#"{"query": "MATCH (n) RETURN $p LIMIT 1", "params": {"p": 18446744073709551616}}"#,
            "params.p",
        ),
    ] {
        let (s, v, _) = call(&st, "POST", uri, Some(body), None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(field) && message.contains("write it as a string"),
            "{body}: {message}"
        );
    }
    // A float that large, written as one, is a float.
    let body = r#"{"ts":5,"actor":"bot","kind":"NOTE","payload":{"x":1.8e22}}"#;
    let (s, v, _) = call(&st, "POST", "/v1/events", Some(body), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

/// helper-100 (session 46): a gzip body was read as it was and refused as "not UTF-8 text",
/// and a plain body labelled gzip was taken: the server does not decompress, and says so.
#[tokio::test]
async fn a_compressed_body_is_refused_as_an_encoding_the_server_does_not_take() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let send = |encoding: &'static str| {
        let st = st.clone();
        async move {
            let req = Request::builder()
                .method("POST")
                .uri("/v1/events")
                .header(header::CONTENT_ENCODING, encoding)
                .body(Body::from(r#"{"ts":5,"actor":"bot","kind":"NOTE"}"#))
                .unwrap();
            router(st).oneshot(req).await.unwrap()
        }
    };
    let refused = send("gzip").await;
    assert_eq!(refused.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let bytes = axum::body::to_bytes(refused.into_body(), usize::MAX)
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    let said = v["error"]["message"].as_str().unwrap();
    assert!(said.contains("Content-Encoding \"gzip\""), "{said}");
    assert_eq!(send("identity").await.status(), StatusCode::OK);
}

/// `/v1/forget` takes the length of a day, as `loci forget --day` does, where it refused
/// `day` as an unknown field (a helper's probe).
#[tokio::test]
async fn forget_over_http_takes_the_day_length() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/forget",
        Some(r#"{"budget": 20, "day": 0}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("day"),
        "{v}"
    );
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/forget",
        Some(r#"{"budget": 20, "day": 24000}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["evicted"].as_u64().unwrap() > 0, "{v}");
    // The store's days are now of 24000: another length is refused, naming theirs.
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/forget",
        Some(r#"{"budget": 20, "day": 1440}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("24000"),
        "{v}"
    );
}

/// An integer past the largest a field takes is said to be one, where serde read it as a
/// float and said "invalid type: floating point `1.8446744073709552e+19`" of the user's
/// integer (a helper's probe).
#[tokio::test]
async fn an_integer_too_large_is_said_to_be_one() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/query",
        Some(r#"{"question": "where is home", "limit": 18446744073709551616}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("body: limit: 18446744073709551616 is out of range, expected")
            && !message.contains("floating point"),
        "{message}"
    );
    // A float given as one is still said to be a float.
    let (_, v, _) = call(
        &st,
        "POST",
        "/v1/query",
        Some(r#"{"question": "where is home", "limit": 1.5e19}"#),
        None,
    )
    .await;
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("floating point"), "{message}");
}

#[tokio::test]
async fn routes_answer_what_the_library_does() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);

    let (s, v, _) = call(&st, "GET", "/health", None, None).await;
    assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("ok")));

    let (s, v, _) = call(&st, "GET", "/v1/stats", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (v["usable"].as_bool(), v["handle_error"].as_str()),
        (Some(true), None)
    );
    let events_before = v["events"].as_u64().unwrap();
    assert!(events_before > 0);

    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/query",
        Some(r#"{"question": "who trades emeralds for sticks", "limit": 3, "record": false}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let snippets = v["snippets"].as_array().unwrap();
    assert!(!snippets.is_empty() && snippets.len() <= 3);
    assert!(
        snippets[0]["text"].as_str().unwrap().contains("OFFERS"),
        "{v}"
    );

    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/run",
        Some(r#"{"name": "find_trade", "params": {"want": "emerald", "give": "stick"}}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(!v["rows"].as_array().unwrap().is_empty());
    // Inline text with typed JSON parameters.
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/run",
        Some(r#"{"query": "MATCH (n:NPC) WHERE n.key = $k RETURN n.name", "params": {"k": "npc:fletcher:0"}}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    // `explain`: the plan the parameters decide, as `loci run --explain` prints it; a
    // parameter out of its declared range is refused as a run refuses it.
    let explain = |body: &'static str| call(&st, "POST", "/v1/run", Some(body), None);
    let (s, v, _) =
        explain(r#"{"name": "neighbors", "params": {"node": "bot", "depth": 4}, "explain": true}"#)
            .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["rows"].is_null(), "{v}");
    assert!(
        (v["ops"].as_array().unwrap().iter()).any(|op| op["Expand"]["reach"] == true),
        "{v}"
    );
    let (s, v, _) =
        explain(r#"{"name": "neighbors", "params": {"node": "bot", "depth": 5}, "explain": true}"#)
            .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_input")),
        "{v}"
    );
    let (s, v, _) = explain(r#"{"query": "MATCH (n:NPC) RETURN n.name", "explain": true}"#).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["ops"].is_array() && v["rows"].is_null(), "{v}");

    let (s, v, _) = call(&st, "GET", "/v1/queries", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v
        .as_array()
        .unwrap()
        .iter()
        .any(|q| q["name"] == "find_trade"));

    let (s, v, _) = call(&st, "GET", "/v1/search?q=fletcher&limit=2", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v.as_array().unwrap().len(), 2);

    let (s, v, _) = call(
        &st,
        "GET",
        "/v1/neighbors?node=base:first&depth=1",
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(!v["neighbors"].as_array().unwrap().is_empty());

    let (s, v, _) = call(&st, "GET", "/v1/timeline?limit=5", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["events"].as_array().unwrap().len(), 5);

    let (s, v, _) = call(&st, "GET", "/v1/nodes/base:first", None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let edge = v["edges"][0]["id"].as_u64().unwrap();
    assert!(!v["edges"][0]["evidence"].as_array().unwrap().is_empty());
    let (s, v, _) = call(&st, "GET", &format!("/v1/edges/{edge}"), None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");

    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/context",
        Some(r#"{"budget": 400, "question": "where is home", "save": true}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["tokens"].as_u64().unwrap() <= 400);
    let turn = v["turn"].as_u64().unwrap();
    let (s, _, _) = call(&st, "GET", &format!("/v1/context/{turn}"), None, None).await;
    assert_eq!(s, StatusCode::OK);

    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/wm",
        Some(r#"{"op": "intent", "text": "find iron"}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["intent"], "find iron");
    // A change that finds nothing to change is refused by name.
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/wm",
        Some(r#"{"op": "clear_threat", "text": "creeper"}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert!(v.to_string().contains("none is held"), "{v}");
    // A field the op does not take is refused, as on every other route: a misspelt "txt"
    // would otherwise pass unnoticed.
    for body in [
        r#"{"op": "intent", "text": "a", "bogus": 1}"#,
        r#"{"op": "pop_subgoal", "text": "x"}"#,
        r#"{"op": "clear", "n": 3}"#,
    ] {
        let (s, v, _) = call(&st, "POST", "/v1/wm", Some(body), None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert!(v.to_string().contains("unknown field"), "{body}: {v}");
    }
    // A value of the wrong kind is named by its field, as on every other route (it was
    // "body: invalid value: integer `-1`, expected usize"; a helper's probe).
    for (body, field) in [
        (r#"{"op": "capacity", "n": -1}"#, "body: n: "),
        (r#"{"op": "intent", "text": 5}"#, "body: text: "),
        // Past u64: its kind was blamed, "invalid type: floating point" (session 35 probe).
        (
            r#"{"op": "capacity", "n": 18446744073709551616}"#,
            "body: n: an integer too large to read exactly",
        ),
        // An op that is none, or no string, is the op's fault, not the field tried beside it
        // (it had been "body: text: unknown variant `Observe`"; helper-105, session 47).
        (
            r#"{"op": "Observe", "text": "x"}"#,
            "body: op: unknown variant",
        ),
        (r#"{"op": 5, "text": "x"}"#, "body: op: "),
    ] {
        let (s, v, _) = call(&st, "POST", "/v1/wm", Some(body), None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{body}: {message}");
    }
    // An op is taken as the CLI spells it too.
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/wm",
        Some(r#"{"op": "push-subgoal", "text": "find iron"}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _, _) = call(
        &st,
        "POST",
        "/v1/pin",
        Some(r#"{"keys": ["base:first"]}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, v, _) = call(&st, "POST", "/v1/consolidate", None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");

    // Appends: one batch, atomic; the stats move by exactly its events.
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/events",
        Some("{\"ts\": 999999, \"actor\": \"bot\", \"kind\": \"NOTE\", \"payload\": {\"text\": \"a\"}}\n{\"ts\": 999999, \"actor\": \"bot\", \"kind\": \"NOTE\"}\n"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["events"], 2);
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/delete",
        Some(&format!(r#"{{"events": [{}]}}"#, v["last_seq"])),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // It takes no option: a field is refused, as on every other route, and nothing is done
    // (`{"x": 1}` had compacted; session 35 probe).
    let bytes_before = st.store().unwrap().disk_bytes();
    let (s, v, _) = call(&st, "POST", "/v1/compact", Some(r#"{"x": 1}"#), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(v.to_string().contains("unknown field `x`"), "{v}");
    assert_eq!(st.store().unwrap().disk_bytes(), bytes_before);
    let (s, v, _) = call(&st, "POST", "/v1/compact", Some("{}"), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v, _) = call(&st, "POST", "/v1/compact", None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // The server goes on after compacting, and replay still equals the live state.
    let (s, _, _) = call(&st, "GET", "/v1/stats", None, None).await;
    assert_eq!(s, StatusCode::OK);
    let store = st.store().unwrap();
    assert!(store.verify().unwrap().ok());
}

#[tokio::test]
async fn a_bad_batch_writes_nothing_and_errors_are_json_with_codes() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let before = st.store().unwrap().last_seq();
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/events?format=events",
        Some("{\"ts\": 1, \"actor\": \"bot\", \"kind\": \"NOTE\"}\n{\"ts\": 1, \"actor\": \"bot\"}\n"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["code"], "bad_input");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("request:2: kind"),
        "{v}"
    );
    assert_eq!(st.store().unwrap().last_seq(), before, "nothing written");

    for (method, uri, body, status, code) in [
        (
            "POST",
            "/v1/query",
            Some(r#"{"questio": "x"}"#),
            400,
            "bad_input",
        ),
        ("POST", "/v1/query", Some("not json"), 400, "bad_input"),
        (
            "POST",
            "/v1/query",
            Some(r#"{"question": "x", "budget": 999999999}"#),
            400,
            "bad_input",
        ),
        (
            "POST",
            "/v1/query",
            Some(r#"{"question": "x", "limit": 0}"#),
            400,
            "bad_input",
        ),
        (
            "POST",
            "/v1/run",
            Some(r#"{"query": "MATCH (n RETURN n"}"#),
            400,
            "bad_input",
        ),
        (
            "POST",
            "/v1/run",
            Some(r#"{"name": "nope"}"#),
            404,
            "not_found",
        ),
        // A list, an object or null fits no declared parameter type; as text, the list had
        // been taken for the string it is not, and matched nothing (200, no rows).
        (
            "POST",
            "/v1/run",
            Some(r#"{"name": "find_trade", "params": {"want": [1, 2]}}"#),
            400,
            "bad_input",
        ),
        (
            "POST",
            "/v1/run",
            Some(r#"{"name": "find_trade", "params": {"want": null}}"#),
            400,
            "bad_input",
        ),
        // A key given twice inside a parameter's value: its last value had been taken.
        (
            "POST",
            "/v1/run",
            Some(
                r#"{"query": "MATCH (n) RETURN $x AS x LIMIT 1", "params": {"x": {"a": 1, "a": 2}}}"#,
            ),
            400,
            "bad_input",
        ),
        (
            "POST",
            "/v1/run",
            Some(r#"{"query": "MATCH (a)-[*1..3]-(b)-[*1..3]-(c) RETURN count(*)"}"#),
            422,
            "limit_exceeded",
        ),
        ("GET", "/v1/nodes/nope", None, 404, "not_found"),
        ("GET", "/v1/edges/notanumber", None, 400, "bad_input"),
        (
            "GET",
            "/v1/neighbors?node=base:first&depth=9",
            None,
            400,
            "bad_input",
        ),
        ("GET", "/v1/search", None, 400, "bad_input"),
        ("GET", "/no/such/route", None, 404, "not_found"),
        // A route asked with a method it does not take: the error format, not an empty body.
        ("DELETE", "/v1/stats", None, 405, "method_not_allowed"),
        (
            "POST",
            "/v1/events?format=nope",
            Some("{}"),
            400,
            "bad_input",
        ),
    ] {
        let (s, v, _) = call(&st, method, uri, body, None).await;
        assert_eq!(
            (s.as_u16(), v["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {uri}: {v}"
        );
    }
    // An unknown saved query is answered with the names there are: the message had sent an
    // MCP client over stdio to an HTTP route it does not have (session 24 probe).
    let (_, v, _) = call(&st, "POST", "/v1/run", Some(r#"{"name": "nope"}"#), None).await;
    let said = v["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("saved: ") && said.contains("find_trade") && !said.contains("GET "),
        "{said}"
    );
    // Over the body limit (64 kB here): refused before it is read whole.
    let big = format!("{{\"question\": \"{}\"}}", "x".repeat(100_000));
    let (s, v, _) = call(&st, "POST", "/v1/query", Some(&big), None).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large"))
    );
}

/// A body declared longer than the limit is refused at once: it had been read until the
/// body timeout (30 s) and answered 408, holding one of the slots for bodies all the while (a
/// helper's probe sent `Content-Length: 99999999999` and two bytes).
#[tokio::test]
async fn a_body_declared_over_the_limit_is_refused_before_it_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let (_writer, reader) = tokio::io::duplex(64);
    let req = Request::builder()
        .method("POST")
        .uri("/v1/query")
        .header(header::CONTENT_LENGTH, "99999999999")
        .body(Body::from_stream(tokio_util::io::ReaderStream::new(reader)))
        .unwrap();
    let resp = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        router(st.clone()).oneshot(req),
    )
    .await
    .expect("answered before any of the body arrived")
    .unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn with_a_key_every_route_but_health_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), Some(KEY));
    let (s, _, _) = call(&st, "GET", "/health", None, None).await;
    assert_eq!(s, StatusCode::OK);
    for uri in [
        "/v1/stats",
        "/metrics",
        "/openapi.json",
        "/v1/queries",
        "/mcp",
    ] {
        let (s, v, _) = call(&st, "GET", uri, None, None).await;
        // At `/mcp` the refusal is a JSON-RPC error, the API's code in its data.
        let code = match uri {
            "/mcp" => &v["error"]["data"]["code"],
            _ => &v["error"]["code"],
        };
        assert_eq!(
            (s, code.as_str()),
            (StatusCode::UNAUTHORIZED, Some("unauthorized")),
            "{uri}"
        );
        let (s, _, _) = call(
            &st,
            "GET",
            uri,
            None,
            Some("0123456789abcdef0123456789abcdeX"),
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{uri} with a wrong key");
    }
    let (s, _, _) = call(&st, "GET", "/v1/stats", None, Some(KEY)).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _, _) = call(
        &st,
        "POST",
        "/v1/events",
        Some("{\"ts\":1,\"actor\":\"a\",\"kind\":\"K\"}"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "no write without the key");
}

/// The last note's open list: a 401 carried no `WWW-Authenticate`, which HTTP requires of it
/// (RFC 9110, 15.5.2) and by which a client learns the scheme to answer with. Without a key
/// it names the scheme only; with a wrong one it says the token is the trouble (RFC 6750,
/// 3.1), at `/mcp` too, where the refusal is a JSON-RPC error.
#[tokio::test]
async fn a_refusal_for_the_key_says_how_to_authenticate() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), Some(KEY));
    let challenge = |given: Vec<Vec<u8>>, uri: &str| {
        let mut req = Request::builder().method("GET").uri(uri);
        for value in given {
            req = req.header(
                header::AUTHORIZATION,
                header::HeaderValue::from_bytes(&value).unwrap(),
            );
        }
        let req = req.body(Body::empty()).unwrap();
        let st = st.clone();
        async move {
            let resp = router(st).oneshot(req).await.unwrap();
            let said = resp.headers().get(header::WWW_AUTHENTICATE);
            (resp.status(), said.map(|v| v.to_str().unwrap().to_string()))
        }
    };
    let bearer = |key: &[u8]| [b"Bearer ".as_slice(), key].concat();
    let realm = Some("Bearer realm=\"loci\"".to_string());
    let invalid = Some("Bearer realm=\"loci\", error=\"invalid_token\"".to_string());
    let unauthorized = StatusCode::UNAUTHORIZED;
    for uri in ["/v1/stats", "/mcp"] {
        for (given, expected, why) in [
            (vec![], (unauthorized, realm.clone()), "without a key"),
            // Another scheme is no bearer token: the scheme is what the client must learn.
            (
                vec![b"Basic eDp5".to_vec()],
                (unauthorized, realm.clone()),
                "Basic",
            ),
            (
                vec![bearer(b"0123456789abcdef0123456789abcdeX")],
                (unauthorized, invalid.clone()),
                "a wrong key",
            ),
            // helper-125: a token of bytes that are not text had been taken for none.
            (
                vec![bearer(b"\xff\xfe0123456789abcdef")],
                (unauthorized, invalid.clone()),
                "a key not of text",
            ),
            // helper-125: the first of two was read alone, so a right key before a wrong
            // one was let in. Credentials said twice are no request to guess at.
            (
                vec![
                    bearer(KEY.as_bytes()),
                    bearer(b"0123456789abcdef0123456789abcdeX"),
                ],
                (
                    StatusCode::BAD_REQUEST,
                    Some("Bearer realm=\"loci\", error=\"invalid_request\"".to_string()),
                ),
                "two keys",
            ),
        ] {
            assert_eq!(challenge(given, uri).await, expected, "{uri}, {why}");
        }
    }
    assert_eq!(
        challenge(vec![bearer(KEY.as_bytes())], "/v1/stats").await,
        (StatusCode::OK, None)
    );
    // helper-125: refused for want of the key, a route asked with a method it does not take
    // said which methods it does take (`allow`), and so that it exists. With the key, a 405
    // says them.
    let allow = |key: Option<&str>| {
        let mut req = Request::builder().method("POST").uri("/v1/stats");
        if let Some(k) = key {
            req = req.header(header::AUTHORIZATION, format!("Bearer {k}"));
        }
        let req = req.body(Body::empty()).unwrap();
        let st = st.clone();
        async move {
            let resp = router(st).oneshot(req).await.unwrap();
            (resp.status(), resp.headers().contains_key(header::ALLOW))
        }
    };
    assert_eq!(allow(None).await, (unauthorized, false));
    assert_eq!(
        allow(Some(KEY)).await,
        (StatusCode::METHOD_NOT_ALLOWED, true)
    );
}

#[tokio::test]
async fn beyond_the_concurrency_limit_requests_get_503_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServeConfig::default();
    config.max_in_flight = 1;
    config.workers = 1;
    let st = AppState::new(world_store(dir.path()), config).unwrap();
    // Hold the one slot with a slow request: a compaction waiting for a store a clone holds.
    let held = st.store().unwrap();
    let slow = {
        let st = st.clone();
        tokio::spawn(async move { call(&st, "POST", "/v1/compact", None, None).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (s, v, retry) = call(&st, "GET", "/v1/stats", None, None).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("busy"))
    );
    assert_eq!(retry, "1");
    drop(held);
    let (s, v, _) = slow.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _, _) = call(&st, "GET", "/v1/stats", None, None).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn the_openapi_document_lists_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let (s, v, _) = call(&st, "GET", "/openapi.json", None, None).await;
    assert_eq!(s, StatusCode::OK);
    // Query parameters are in the query, and only those a request must give are required:
    // they had been declared path parameters, all required, and a client made from the
    // document was wrong (a helper's probe).
    for (path, method, required, optional) in [
        (
            "/v1/search",
            "get",
            &["q"][..],
            &["label", "kind", "limit"][..],
        ),
        ("/v1/neighbors", "get", &["node"], &["depth"]),
        ("/v1/timeline", "get", &[], &["from", "to"]),
        ("/v1/events", "post", &[], &["format", "replace"]),
    ] {
        let params = v["paths"][path][method]["parameters"].as_array().unwrap();
        for p in params {
            assert_eq!(p["in"], "query", "{path} {p}");
        }
        let is_required = |name: &str| {
            params
                .iter()
                .find(|p| p["name"] == name)
                .unwrap_or_else(|| panic!("{path}: no parameter {name}"))["required"]
                == true
        };
        for name in required {
            assert!(is_required(name), "{path}: {name} is required");
        }
        for name in optional {
            assert!(!is_required(name), "{path}: {name} is optional");
        }
    }
    // The bounds the server holds a request to are the document's (a limit of 0 was allowed
    // there and refused here).
    let param = |path: &str, name: &str| -> Value {
        v["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["schema"]
            .clone()
    };
    assert_eq!(param("/v1/search", "limit")["minimum"], 1);
    assert_eq!(param("/v1/timeline", "limit")["minimum"], 1);
    assert_eq!(
        (
            param("/v1/neighbors", "depth")["minimum"].clone(),
            param("/v1/neighbors", "depth")["maximum"].clone()
        ),
        (serde_json::json!(1), serde_json::json!(4))
    );
    assert_eq!(
        v["components"]["schemas"]["QueryRequest"]["properties"]["limit"]["minimum"],
        1
    );
    // MCP's endpoint is listed (a client reading the document had not known it was there).
    let mcp = v["paths"]["/mcp"]["post"].to_string();
    assert!(mcp.contains("JSON-RPC") && mcp.contains("recall"), "{mcp}");
    // Its other two methods too: a session's event stream, and the session's end.
    for method in ["get", "delete"] {
        let op = v["paths"]["/mcp"][method].to_string();
        assert!(op.contains("Mcp-Session-Id"), "/mcp {method}: {op}");
    }
    // The working-memory operation's body is described, its `op` among its fields.
    let wm = v["paths"]["/v1/wm"]["post"]["requestBody"].to_string();
    assert!(wm.contains("WmOp"), "{wm}");
    let mut paths: Vec<&str> = v["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    paths.sort();
    for required in [
        "/health",
        "/v1/stats",
        "/v1/events",
        "/v1/query",
        "/v1/run",
        "/v1/queries",
        "/v1/search",
        "/openapi.json",
        "/metrics",
        "/mcp",
    ] {
        assert!(
            paths.contains(&required),
            "{required} missing from {paths:?}"
        );
    }
    // Every documented path is served (a GET or POST of it is not a 404 of the fallback).
    for p in &paths {
        let uri = p
            .replace("{key}", "base:first")
            .replace("{id}", "0")
            .replace("{turn}", "1");
        let (_, v, _) = call(&st, "GET", &uri, None, None).await;
        assert_ne!(
            v["error"]["message"].as_str(),
            Some("no such route; see /openapi.json"),
            "{p}"
        );
    }
    let (s, v, _) = call(&st, "GET", "/metrics", None, None).await;
    assert_eq!(s, StatusCode::OK);
    let text = v.as_str().unwrap();
    assert!(
        text.contains(
            "loci_http_requests_total{route=\"/openapi.json\",method=\"GET\",status=\"200\"} 2"
        ),
        "{text}"
    );
    assert!(text.contains("loci_store_events "));
    assert!(
        text.contains("\nloci_store_snapshot_damage_found 0\n"),
        "{text}"
    );
    assert!(text.contains("\nloci_store_usable 1\n"), "{text}");
}

/// A client that sends its body slowly, or never, held one of the server's places for as long
/// as it liked: four such connections kept a server of four places answering 503, `/health`
/// too, for minutes (a helper's probe). A body is now read whole before its request takes a
/// place, within `body_timeout`, and `/health` takes none; bodies being received have
/// `max_in_flight` places of their own, which requests without a body do not take.
#[tokio::test]
async fn a_body_that_never_comes_holds_no_place_and_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServeConfig::default();
    config.max_in_flight = 1;
    config.body_timeout = std::time::Duration::from_millis(400);
    let st = AppState::new(world_store(dir.path()), config).unwrap();
    // A body whose writer never writes nor closes.
    let (_writer, reader) = tokio::io::duplex(64);
    let slow = Request::builder()
        .method("POST")
        .uri("/v1/query")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(tokio_util::io::ReaderStream::new(reader)))
        .unwrap();
    let pending = tokio::spawn(router(st.clone()).oneshot(slow));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let (s, _, _) = call(&st, "GET", "/health", None, None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, v, _) = call(&st, "GET", "/v1/stats", None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // Bodies being received are bounded too (by max_in_flight), which bounds their memory.
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/query",
        Some(r#"{"question": "emerald"}"#),
        None,
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("busy")),
        "{v}"
    );
    let answered = tokio::time::timeout(std::time::Duration::from_secs(10), pending)
        .await
        .expect("the slow request is answered")
        .unwrap()
        .unwrap();
    assert_eq!(answered.status(), StatusCode::REQUEST_TIMEOUT);
    let bytes = axum::body::to_bytes(answered.into_body(), usize::MAX)
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["code"], "timeout", "{v}");
}

/// A limit of 0 is refused naming `limit`, on every route that takes one: `/v1/query` had
/// said "invalid argument k" (the library's name), and the others answered nothing.
#[tokio::test]
async fn a_limit_of_zero_is_refused_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for (method, uri, body) in [
        (
            "POST",
            "/v1/query",
            Some(r#"{"question": "emerald", "limit": 0}"#),
        ),
        ("GET", "/v1/search?q=emerald&limit=0", None),
        ("GET", "/v1/timeline?limit=0", None),
    ] {
        let (s, v, _) = call(&st, method, uri, body, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("limit"), "{uri}: {message}");
    }
}

/// An empty search text, question or filter is refused naming it: `q=` and a blank question
/// had answered 200 with nothing, and `label=` or `kind=` filtered to a name nothing has, so
/// any search with it found nothing.
#[tokio::test]
async fn empty_search_text_questions_and_filters_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for (method, uri, body, name) in [
        ("GET", "/v1/search?q=", None, "q"),
        ("GET", "/v1/search?q=%20%20", None, "q"),
        ("GET", "/v1/search?q=emerald&label=", None, "label"),
        ("GET", "/v1/search?q=emerald&kind=%20", None, "kind"),
        (
            "GET",
            "/v1/neighbors?node=base:first&relation=",
            None,
            "relation",
        ),
        // A blank node had been 404, "no node has key """.
        ("GET", "/v1/neighbors?node=%20", None, "node"),
        (
            "POST",
            "/v1/query",
            Some(r#"{"question": " "}"#),
            "question",
        ),
        (
            "POST",
            "/v1/query",
            Some(r#"{"question": "emerald", "relations": [""]}"#),
            "relations",
        ),
    ] {
        let (s, v, _) = call(&st, method, uri, body, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
        assert_eq!(v["error"]["code"], "bad_input", "{uri}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        let named = message.starts_with(&format!("{name}:"))
            || message.starts_with(&format!("invalid argument {name}:"));
        assert!(named && message.contains("empty"), "{uri}: {message}");
    }
    let (s, v, _) = call(&st, "GET", "/v1/search?q=emerald&label=Item", None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // An overlong search text is named as `q`, not as a question.
    let long = "w+".repeat(10_000);
    let (s, v, _) = call(&st, "GET", &format!("/v1/search?q={long}"), None, None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("q:") && !message.contains("question"),
        "{message}"
    );
}

/// A relation or label filter that differs from a name of the store only in case or in spaces
/// around it is refused (400), naming the field and the name it resembles: `label=%20Item`
/// and `relations: ["offers"]` had answered 200 with nothing. A name unlike any still
/// answers, with nothing.
#[tokio::test]
async fn a_filter_one_slip_of_case_or_space_from_a_known_name_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for (method, uri, body, name, meant) in [
        (
            "GET",
            "/v1/search?q=emerald&label=%20Item",
            None,
            "label",
            "Item",
        ),
        (
            "GET",
            "/v1/search?q=emerald&label=item",
            None,
            "label",
            "Item",
        ),
        (
            "GET",
            "/v1/neighbors?node=base:first&relation=path",
            None,
            "relation",
            "PATH",
        ),
        (
            "POST",
            "/v1/query",
            Some(r#"{"question": "emerald", "relations": ["offers"]}"#),
            "relations",
            "OFFERS",
        ),
        (
            "POST",
            "/v1/query",
            Some(r#"{"question": "emerald", "deny_relations": [" OFFERS"]}"#),
            "deny_relations",
            "OFFERS",
        ),
    ] {
        let (s, v, _) = call(&st, method, uri, body, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri} {body:?}: {v}");
        assert_eq!(v["error"]["code"], "bad_input", "{uri}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{name}:"))
                && message.contains(&format!("did you mean \"{meant}\"")),
            "{uri} {body:?}: {message}"
        );
    }
    let (s, v, _) = call(
        &st,
        "GET",
        "/v1/search?q=emerald&label=Villager",
        None,
        None,
    )
    .await;
    assert_eq!((s, v), (StatusCode::OK, serde_json::json!([])));
}

/// A query parameter whose percent-escapes do not decode to UTF-8 is refused, naming it. axum's
/// query extractor decoded `%FF` to U+FFFD, so `q=%FF` searched for a character the caller
/// never sent and answered 200.
#[tokio::test]
async fn a_query_parameter_that_is_not_utf8_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for (uri, name) in [
        ("/v1/search?q=%FF", "q"),
        ("/v1/search?q=emerald&label=It%C3em", "label"),
        ("/v1/search?q=emer%E2%82ald", "q"),
        ("/v1/neighbors?node=base:first&relation=%C0%80", "relation"),
        ("/v1/timeline?limit=3&k%FFey=1", "k\u{fffd}ey"),
    ] {
        let (s, v, _) = call(&st, "GET", uri, None, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
        assert_eq!(v["error"]["code"], "bad_input", "{uri}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{name}:")) && message.contains("UTF-8"),
            "{uri}: {message}"
        );
    }
    // Escapes that decode to UTF-8, and a plus for a space, still work.
    let (s, v, _) = call(&st, "GET", "/v1/search?q=em%65rald+%C3%A9", None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

/// A query parameter a route does not have is refused, naming it, as a body's unknown field
/// is: a misspelt `?lable=Item` had searched without the filter. And a time range whose
/// `from` is after its `to` is refused rather than answered with nothing.
#[tokio::test]
async fn unknown_query_parameters_and_backward_ranges_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for (uri, named) in [
        ("/v1/search?q=emerald&lable=Item", "lable"),
        ("/v1/neighbors?node=base:first&hops=2", "hops"),
        ("/v1/timeline?limit=3&form=10", "form"),
        ("/v1/timeline?from=10&to=5", "from"),
        ("/v1/search?q=emerald&from=10&to=5", "from"),
    ] {
        let (s, v, _) = call(&st, "GET", uri, None, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{uri}: {message}");
        // Said as the other errors are, by where (a new user's probe: axum's "Failed to
        // deserialize query string: lable: ..." led the message).
        if named != "from" {
            assert!(
                message.starts_with(&format!("query string: {named}: unknown field")),
                "{uri}: {message}"
            );
        }
    }
    let (s, v, _) = call(&st, "GET", "/v1/timeline?from=5&to=5", None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

/// A server whose reads met a damaged block of the state snapshot answers 500 `corrupt`, not
/// 200 with what the block held missing, and replays the graph from the log, after which it
/// answers as before the damage. It had answered short with 200 until the next write (a
/// probe's finding; the CLI exits 6 there).
#[tokio::test]
async fn reads_that_meet_a_damaged_snapshot_fail_until_the_graph_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = world_store(&path);
    store.checkpoint().unwrap();
    drop(store);
    let open = || {
        let mut config = ServeConfig::default();
        config.max_body_bytes = 64 * 1024;
        AppState::new(Store::open(&path).unwrap(), config).unwrap()
    };
    let search = "/v1/search?q=fletcher&limit=50";
    let st = open();
    let (s, clean, _) = call(&st, "GET", search, None, None).await;
    assert_eq!(s, StatusCode::OK, "{clean}");
    drop(st);
    // One byte of a fletcher's key in the node records.
    let snapshot = path.join("state.snapshot");
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let at = bytes
        .windows(14)
        .position(|w| w == b"npc:fletcher:0")
        .expect("the key lies in the snapshot");
    bytes[at + 4] ^= 0x5a;
    std::fs::write(&snapshot, &bytes).unwrap();
    let st = open();
    let (s, v, _) = call(&st, "GET", search, None, None).await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert_eq!(v["error"]["code"], "corrupt", "{v}");
    // The replay runs beside the requests; once it is in place the answer is whole.
    let mut answer = None;
    for _ in 0..300 {
        let (s, v, _) = call(&st, "GET", search, None, None).await;
        if s == StatusCode::OK {
            answer = Some(v);
            break;
        }
        assert_eq!(v["error"]["code"], "corrupt", "{v}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(answer.as_ref(), Some(&clean));
}

/// `POST /v1/context` takes `record`, as `/v1/query` does: with `false` its snippets are not
/// recorded as uses. The route had no way to leave them out (a probe's finding).
#[tokio::test]
async fn a_context_asked_not_to_record_records_no_use() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let pending = |metrics: &Value| -> u64 {
        let text = metrics.as_str().unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("loci_store_usage_pending"))
            .unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let body = r#"{"budget": 2000, "question": "who trades emeralds for sticks", "record": false}"#;
    let (s, v, _) = call(&st, "POST", "/v1/context", Some(body), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, metrics, _) = call(&st, "GET", "/metrics", None, None).await;
    assert_eq!(pending(&metrics), 0);
    let recorded = body.replace(r#", "record": false"#, "");
    let (s, v, _) = call(&st, "POST", "/v1/context", Some(&recorded), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, metrics, _) = call(&st, "GET", "/metrics", None, None).await;
    assert!(
        pending(&metrics) > 0,
        "a context records its uses by default"
    );
}

/// `POST /v1/events` takes a `namespace` for passages, as `loci ingest --namespace` does: two
/// corpora that number their passages alike can share a store over HTTP too (a new user's
/// run found no way to). A namespace the CLI refuses is refused here too.
#[tokio::test]
async fn passages_appended_over_http_take_a_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let line = r#"{"id": "p1", "title": "Zephyr Mill", "text": "The Zephyr Mill grinds barley."}"#;
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/events?format=passages&namespace=corpus_a",
        Some(line),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v, _) = call(&st, "GET", "/v1/nodes/corpus_a%2Fp1", None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["node"]["key"], "corpus_a/p1", "{v}");
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/events?format=passages&namespace=a%2Fb",
        Some(line),
        None,
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_input")),
        "{v}"
    );
}

/// A body that is not an object says the route takes a JSON object, not the name of the type
/// the server reads it into ("expected struct QueryRequest with 13 elements", the fresh-clone
/// probe's finding).
#[tokio::test]
async fn a_body_of_another_shape_is_refused_without_naming_internal_types() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for body in ["[]", "[1, 2]", "\"where is home\"", "7", " null", ""] {
        let (s, v, _) = call(&st, "POST", "/v1/query", Some(body), None).await;
        assert!(s.is_client_error(), "{body}: {s}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("a JSON object") && !message.contains("Request"),
            "{body}: {message}"
        );
    }
}

/// A body that is not JSON says so, where "not json" read as "got null" from its first letter,
/// and a body cut short named a field "?" (a new user's try).
#[tokio::test]
async fn a_body_that_is_not_json_says_so_and_names_no_made_up_field() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for body in [
        "not json",
        "nul",
        "tru",
        "-x",
        "\"open",
        "{",
        "{\"question\": ",
    ] {
        let (s, v, _) = call(&st, "POST", "/v1/query", Some(body), None).await;
        assert_eq!(s, 400, "{body}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("body: not JSON: ") && !message.contains("?:"),
            "{body}: {message}"
        );
    }
}

/// A body that starts with a byte-order mark (as some Windows tools write JSON) is read as
/// without it, as the CLI reads such a file: it was "body: expected value at line 1 column 1"
/// (session 25 probe).
#[tokio::test]
async fn a_body_that_starts_with_a_byte_order_mark_is_read_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let body = "\u{feff}{\"question\": \"where is home\"}";
    let (s, v, _) = call(&st, "POST", "/v1/query", Some(body), None).await;
    assert_eq!(s, 200, "{v}");
    assert!(!v["snippets"].as_array().unwrap().is_empty(), "{v}");
}

/// A body of blank lines holds no events, over HTTP as in a file the CLI reads: it commits
/// nothing, where it was refused as a format that cannot be detected (session 25 probe).
#[tokio::test]
async fn a_body_of_blank_lines_commits_nothing_as_a_blank_file_does() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let (_, before, _) = call(&st, "GET", "/v1/stats", None, None).await;
    for body in ["", "\n\n", " \r\n\t\n"] {
        let (s, v, _) = call(&st, "POST", "/v1/events", Some(body), None).await;
        assert_eq!(s, 200, "{body:?}: {v}");
        assert_eq!(v["events"], 0, "{body:?}: {v}");
    }
    let (_, after, _) = call(&st, "GET", "/v1/stats", None, None).await;
    assert_eq!(before["events"], after["events"]);
}

/// A planner query's parameter given twice is refused, naming it, as the CLI refuses
/// `--param` twice: the JSON object's last value had silently won (the fresh-clone probe's
/// finding).
#[tokio::test]
async fn a_query_parameter_given_twice_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let body = r#"{"name": "find_trade", "params": {"want": "emerald", "want": "diamond"}}"#;
    let (s, v, _) = call(&st, "POST", "/v1/run", Some(body), None).await;
    assert!(s.is_client_error(), "{s} {v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"want\" is given twice"), "{message}");
}

/// A saved query's parameter given as JSON of another type than it declares is refused, naming
/// the parameter and the type: 5 for the string `want` was read as the text "5" and matched
/// nothing (200, no rows), "0" passed for the float `min_confidence` (session 25 probe). An
/// integer past 64 bits is said as sent, not rounded through a float.
#[tokio::test]
async fn a_saved_query_parameter_of_another_json_type_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for (params, said) in [
        (r#"{"want": 5}"#, "want: takes a string, got the number 5"),
        (r#"{"want": true}"#, "want: takes a string, got true"),
        (
            r#"{"want": "emerald", "min_confidence": "0"}"#,
            "min_confidence: takes a number, got the string \"0\"",
        ),
        (
            r#"{"want": "emerald", "min_confidence": true}"#,
            "min_confidence: takes a number, got true",
        ),
    ] {
        let body = format!(r#"{{"name": "find_trade", "params": {params}}}"#);
        let (s, v, _) = call(&st, "POST", "/v1/run", Some(&body), None).await;
        assert_eq!(s, 400, "{params}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(said), "{params}: {message}");
    }
    let body = r#"{"name": "find_trade", "params": {"want": "emerald", "min_confidence": 0}}"#;
    let (s, v, _) = call(&st, "POST", "/v1/run", Some(body), None).await;
    assert_eq!(s, 200, "{v}");
    assert!(!v["rows"].as_array().unwrap().is_empty(), "{v}");
    let body =
        r#"{"query": "MATCH (n) RETURN n.key LIMIT $l", "params": {"l": 18446744073709551615}}"#;
    let (s, v, _) = call(&st, "POST", "/v1/run", Some(body), None).await;
    assert_eq!(s, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("l: 18446744073709551615 is out of range"),
        "{message}"
    );
}

/// A 60 kB key, parameter name or body field comes back shortened in its error, where the
/// answer had quoted it whole (twice, for an unknown query parameter).
#[tokio::test]
async fn a_long_value_comes_back_shortened_in_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let long = "k".repeat(60_000);
    let cases = [
        ("GET", format!("/v1/nodes/{long}"), None),
        ("GET", format!("/v1/neighbors?node={long}"), None),
        ("GET", format!("/v1/search?q=emerald&{long}=1"), None),
        (
            "POST",
            "/v1/query".to_string(),
            Some(format!(r#"{{"question": "x", "{long}": 1}}"#)),
        ),
        (
            "POST",
            "/v1/query".to_string(),
            Some(format!(r#"{{"question": "x", "limit": "{long}"}}"#)),
        ),
    ];
    for (method, uri, body) in cases {
        let (s, v, _) = call(&st, method, &uri, body.as_deref(), None).await;
        assert!(s.is_client_error(), "{}: {s}", &uri[..40]);
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.len() < 1_000 && message.contains(" bytes)"),
            "{} {}: {} bytes: {}",
            method,
            &uri[..uri.len().min(40)],
            message.len(),
            &message[..message.len().min(200)]
        );
    }
}

/// Found by the session 24 probe: a POST to /mcp whose body is not JSON was answered 415
/// ("fail to deserialize request body", rmcp's), a status that blames the content type. It is
/// JSON-RPC's parse error (-32700), with 400.
#[tokio::test]
async fn a_body_that_is_not_json_is_a_json_rpc_parse_error_at_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let post = |content_type: &'static str, body: &'static str| {
        let st = st.clone();
        async move {
            let req = Request::builder()
                .method("POST")
                .uri("/mcp")
                .header(header::HOST, "localhost")
                .header(header::CONTENT_TYPE, content_type)
                .header(header::ACCEPT, "application/json, text/event-stream")
                .body(Body::from(body))
                .unwrap();
            let resp = router(st).oneshot(req).await.unwrap();
            let status = resp.status();
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            let v: Value = serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).to_string()));
            (status.as_u16(), v["error"]["code"].as_i64(), v)
        }
    };
    // Not JSON: a parse error, whatever the case of the media type (rmcp takes it so).
    for content_type in ["application/json", "Application/JSON; charset=utf-8"] {
        let (status, code, v) = post(content_type, "{garbage").await;
        assert_eq!((status, code), (400, Some(-32700)), "{content_type}: {v}");
        assert_eq!(v["jsonrpc"], "2.0");
    }
    // JSON that is no JSON-RPC message: an invalid request (session 24 probe: 415).
    for body in [
        "{}",
        "[]",
        "42",
        r#"{"jsonrpc":"2.0","id":9}"#,
        // A key given twice, as every route refuses it (session 24 probe: MCP's `remember`
        // stored the last value).
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"remember","arguments":{"text":"first","text":"second"}}}"#,
    ] {
        let (status, code, v) = post("application/json", body).await;
        assert_eq!((status, code), (400, Some(-32600)), "{body}: {v}");
    }
    // A tool call whose parameters are not a call's (arguments that are no object, a name that
    // is no string): invalid params, with the request's id and what was wrong (session 25
    // probe: -32601 "tools/call", method not found).
    for (body, said) in [
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":"str"}}"#,
            "arguments",
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}"#,
            "name",
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[]}"#,
            "params",
        ),
    ] {
        let (status, code, v) = post("application/json", body).await;
        assert_eq!((status, code), (400, Some(-32602)), "{body}: {v}");
        assert_eq!(v["id"], 7, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Invalid params: ") && message.contains(said),
            "{body}: {message}"
        );
    }
    // Another media type is rmcp's to refuse, as the README says (415).
    let (status, _, v) = post("application/jsonx", "{garbage").await;
    assert_eq!(status, 415, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_waiting_for_requests_leaves_the_server_answering() {
    let dir = tempfile::tempdir().unwrap();
    let st = AppState::new(world_store(dir.path()), ServeConfig::default()).unwrap();
    // A request in flight holds the store while the compaction waits for it.
    let held = st.store().unwrap();
    let compaction = {
        let st = st.clone();
        tokio::spawn(async move { call(&st, "POST", "/v1/compact", None, None).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // Each request taking the store had blocked a runtime thread on the store's lock, which
    // the waiting compaction held: with both threads parked, the request holding the store
    // was never polled to its end, and nothing answered until the compaction gave up (30 s).
    // A deadlock detector, not a speed goal: a new request is told to retry at once.
    let asked = std::time::Instant::now();
    let stats = tokio::spawn({
        let st = st.clone();
        async move { call(&st, "GET", "/v1/stats", None, None).await }
    });
    let (s, v, retry) = stats.await.unwrap();
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(10),
        "answered after {:?}",
        asked.elapsed()
    );
    assert_eq!(
        (s, v["error"]["code"].as_str(), retry.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("busy"), "1"),
        "{v}"
    );
    drop(held);
    let (s, v, _) = compaction.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _, _) = call(&st, "GET", "/v1/stats", None, None).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_finishes_its_headers_is_closed_and_frees_its_place() {
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServeConfig::default();
    config.max_connections = 1;
    config.header_timeout = Duration::from_secs(1);
    let st = AppState::new(world_store(dir.path()), config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(loci::serve::serve(st.clone(), listener, async {
        let _ = stopped.await;
    }));
    // A client sends half its headers and no more, holding the one place.
    let mut stalled = tokio::net::TcpStream::connect(addr).await.unwrap();
    stalled
        .write_all(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut asking = tokio::net::TcpStream::connect(addr).await.unwrap();
    asking
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    // It had held its connection for ever (20,000 such ran the server out of descriptors).
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), stalled.read_to_end(&mut rest));
    assert!(
        closed.await.is_ok(),
        "the stalled connection is open after 20 s"
    );
    // The place it held goes to the next connection.
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(20), asking.read_to_string(&mut answer))
        .await
        .expect("/health unanswered after 20 s")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    stop.send(()).unwrap();
    assert!(
        server.await.unwrap().unwrap(),
        "the store is closed at the stop"
    );
}

/// A request to the MCP service at `path`, in `session` when one is given.
fn mcp_request(
    method: &str,
    path: &str,
    session: Option<&str>,
    body: &'static str,
) -> Request<Body> {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream");
    if let Some(id) = session {
        req = req.header("mcp-session-id", id);
    }
    req.body(Body::from(body)).unwrap()
}

/// Found by the session 35 probe: every `initialize` over HTTP opened a session (about 70 kB)
/// that lived until it idled out, 5 minutes later: 3,000 of them in 2.4 s took the server
/// from 47 to 255 MB, past every other bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sessions_over_http_are_bounded_and_a_closed_one_frees_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServeConfig::default();
    config.max_mcp_sessions = 2;
    let st = AppState::new(world_store(dir.path()), config).unwrap();
    let send_to =
        |method: &'static str, path: &'static str, session: Option<String>, body: &'static str| {
            let st = st.clone();
            async move {
                let req = mcp_request(method, path, session.as_deref(), body);
                let resp = router(st).oneshot(req).await.unwrap();
                let id = resp
                    .headers()
                    .get("mcp-session-id")
                    .map(|v| v.to_str().unwrap().to_string());
                (resp.status(), id)
            }
        };
    let send = |method: &'static str, session: Option<String>, body: &'static str| {
        send_to(method, "/mcp", session, body)
    };
    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}"#;
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let (status, id) = send("POST", None, INIT).await;
        assert_eq!(status, StatusCode::OK);
        sessions.push(id.expect("a session id"));
    }
    let (status, _) = send("POST", None, INIT).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "a third session");
    // Every path under `/mcp` reaches the MCP service: each is held to the same limit
    // (helper-118: `/mcp/x` opened a session past it each time, 70 kB each, without end).
    for path in ["/mcp/", "/mcp/x", "/mcp/x/y"] {
        let (status, _) = send_to("POST", path, None, INIT).await;
        assert_eq!(
            status,
            StatusCode::SERVICE_UNAVAILABLE,
            "a session at {path}"
        );
    }
    // A request inside an open session is no new session.
    let (status, _) = send(
        "POST",
        Some(sessions[0].clone()),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert!(status.is_success(), "{status}");
    let (status, _) = send("DELETE", Some(sessions.pop().unwrap()), "").await;
    assert!(status.is_success(), "{status}");
    let (status, id) = send("POST", None, INIT).await;
    assert_eq!(
        (status, id.is_some()),
        (StatusCode::OK, true),
        "after a close"
    );
}

/// helper-118: what refused a request at `/mcp` before a JSON-RPC message was read was plain
/// text (rmcp's 406, 404 for an unknown session, 405) or the API's JSON (the server's 503 and
/// 401), neither of which an MCP client reads. Each is a JSON-RPC error now, with its status
/// and headers; the API's routes answer as they did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_at_mcp_are_json_rpc_errors_with_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServeConfig::default();
    config.max_mcp_sessions = 1;
    let st = AppState::new(world_store(dir.path()), config).unwrap();
    let send = |req: Request<Body>| {
        let st = st.clone();
        async move {
            let resp = router(st).oneshot(req).await.unwrap();
            let (parts, body) = resp.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            let v: Value = serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).to_string()));
            // What the headers say of the body is true of the body sent.
            if let Some(n) = parts.headers.get(header::CONTENT_LENGTH) {
                assert_eq!(n.to_str().unwrap(), bytes.len().to_string(), "{v}");
            }
            (parts.status.as_u16(), parts.headers, v)
        }
    };
    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}"#;
    let is_rpc_error = |v: &Value, status: u16, says: &str| {
        let code = if status < 500 { -32600 } else { -32000 };
        v["jsonrpc"] == "2.0"
            && v["id"].is_null()
            && v["error"]["code"] == code
            && v["error"]["data"]["status"] == status
            && v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(says))
    };
    // No Accept that takes JSON and event streams: rmcp's 406.
    let mut req = mcp_request("POST", "/mcp", None, INIT);
    req.headers_mut().remove(header::ACCEPT);
    let (status, headers, v) = send(req).await;
    assert!(is_rpc_error(&v, 406, "Not Acceptable"), "{status} {v}");
    assert_eq!(status, 406);
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    // A session the server does not hold: 404, as MCP has it.
    let tools = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (status, _, v) = send(mcp_request("POST", "/mcp", Some("bogus"), tools)).await;
    assert!(is_rpc_error(&v, 404, "Session not found"), "{status} {v}");
    // A method the transport does not take: 405, its Allow kept.
    let (status, headers, v) = send(mcp_request("PUT", "/mcp", None, INIT)).await;
    assert!(is_rpc_error(&v, 405, "Method Not Allowed"), "{status} {v}");
    assert!(headers.contains_key(header::ALLOW), "{headers:?}");
    // rmcp's own JSON-RPC refusal passes as it is, with the request's id: an initialize
    // whose MCP-Protocol-Version header says another version than its body.
    let mut req = mcp_request("POST", "/mcp", None, INIT);
    req.headers_mut()
        .insert("mcp-protocol-version", "2025-03-26".parse().unwrap());
    let (status, _, v) = send(req).await;
    // Not made again by the server: its data would say the status.
    assert_eq!((status, &v["id"]), (400, &Value::from(1)), "{v}");
    assert!(v["error"]["data"]["status"].is_null(), "{v}");
    // The server's own refusal: a session past its limit, 503 with Retry-After, its code.
    let (status, headers, v) = send(mcp_request("POST", "/mcp", None, INIT)).await;
    assert_eq!(status, 200, "{v}");
    let session = headers["mcp-session-id"].to_str().unwrap().to_string();
    let (status, headers, v) = send(mcp_request("POST", "/mcp", None, INIT)).await;
    assert!(is_rpc_error(&v, 503, "MCP sessions"), "{status} {v}");
    assert_eq!(v["error"]["data"]["code"], "busy", "{v}");
    assert_eq!(headers[header::RETRY_AFTER], "1");
    // A session closed is answered 200 (the Python SDK's client took rmcp's 202 for a
    // failure); one the server does not hold, closed or never opened, 404 (helper-122: 202).
    let (status, _, v) = send(mcp_request("DELETE", "/mcp", Some(&session), "")).await;
    assert_eq!(status, 200, "{v}");
    for id in [session.as_str(), "bogus"] {
        let (status, _, v) = send(mcp_request("DELETE", "/mcp", Some(id), "")).await;
        assert!(
            is_rpc_error(&v, 404, "Session not found"),
            "{id}: {status} {v}"
        );
    }
    // The parse errors the server gives before rmcp pass as they are.
    let (status, _, v) = send(mcp_request("POST", "/mcp", None, "{garbage")).await;
    assert_eq!((status, &v["error"]["code"]), (400, &Value::from(-32700)));
    // The API's routes answer with the API's JSON.
    let (status, _, v) = send(mcp_request("GET", "/v1/nodes/no-such-node", None, "")).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
}

/// helper-118 (session 53): each `GET /mcp` stream held a connection's place for as long as
/// its client kept it open, and a session could open any number: eight made a server of
/// eight connections answer nothing, `/health` included, until the client let go. Streams
/// are held to a quarter of the connections; one that ends frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_streams_are_held_to_a_quarter_of_the_connections() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServeConfig::default();
    config.max_connections = 8;
    let st = AppState::new(world_store(dir.path()), config).unwrap();
    let request = |method: &str, session: Option<&str>, body: &'static str| {
        mcp_request(method, "/mcp", session, body)
    };
    const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}"#;
    let resp = router(st.clone())
        .oneshot(request("POST", None, INIT))
        .await
        .unwrap();
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let resp = router(st.clone())
        .oneshot(request(
            "POST",
            Some(&session),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ))
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    // Two streams are open (their bodies held, unread), a quarter of 8 connections.
    let mut open = Vec::new();
    for _ in 0..2 {
        let resp = router(st.clone())
            .oneshot(request("GET", Some(&session), ""))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        open.push(resp);
    }
    let resp = router(st.clone())
        .oneshot(request("GET", Some(&session), ""))
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "a third stream"
    );
    // Its connection is closed with it, rather than held until it idles out.
    assert_eq!(resp.headers()[header::CONNECTION], "close");
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stream"),
        "{body}"
    );
    // A stream that ends (its client gone) frees its place.
    drop(open.pop());
    let resp = router(st.clone())
        .oneshot(request("GET", Some(&session), ""))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "after a stream ended");
}

/// helper-118 (session 53): a server left idle kept its recorded uses in memory (a store
/// flushes them on the next recorded read once the first is 30 s old), so a CLI beside it
/// ranked otherwise, and a kill lost them. The server writes them once they are that old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_writes_its_recorded_uses_once_they_are_old_enough() {
    use loci::dynamics::usage::USAGE;
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServeConfig::default();
    config.uses_flush_after = std::time::Duration::from_millis(200);
    let st = AppState::new(world_store(dir.path()), config).unwrap();
    let usage_events =
        |st: &Arc<AppState>| st.store().unwrap().events_of_kind(USAGE).unwrap().len();
    let (s, v, _) = call(
        &st,
        "POST",
        "/v1/query",
        Some(r#"{"question": "where is home"}"#),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(usage_events(&st), 0, "uses wait in memory");
    let flusher = tokio::spawn(loci::serve::flush_uses_while_serving(st.clone()));
    let mut waited = 0;
    while usage_events(&st) == 0 && waited < 100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
    }
    assert_eq!(usage_events(&st), 1, "written with no other request");
    // Stopped with the server.
    st.shutdown.cancel();
    tokio::time::timeout(std::time::Duration::from_secs(5), flusher)
        .await
        .unwrap()
        .unwrap();
}

/// helper-118 (session 53): `min_confidence: 1e308` was refused as "inf is outside [0, 1]",
/// naming a value no one gave.
#[tokio::test]
async fn a_min_confidence_past_f32_is_refused_as_written_not_as_infinity() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for (given, said) in [
        ("1e308", "a number above 3.4e38"),
        ("-1e308", "a number below -3.4e38"),
    ] {
        let body = format!(r#"{{"question": "where is home", "min_confidence": {given}}}"#);
        let (s, v, _) = call(&st, "POST", "/v1/query", Some(&body), None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(said)
                && message.contains("min_confidence")
                && !message.contains("inf is"),
            "{message}"
        );
    }
}

/// helper-118 (session 53): a path parameter that did not parse was refused as "Invalid URL:
/// Cannot parse `abc` to a `u32`", naming no parameter.
#[tokio::test]
async fn a_path_parameter_that_does_not_parse_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for (uri, said) in [
        ("/v1/edges/abc", "id: \"abc\" is not a u32"),
        ("/v1/edges/-1", "id: \"-1\" is not a u32"),
        ("/v1/context/x", "turn: \"x\" is not a u64"),
    ] {
        let (s, v, _) = call(&st, "GET", uri, None, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
        assert_eq!(v["error"]["code"], "bad_input", "{uri}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(said), "{uri}: {message}");
    }
}

/// Found by the session 35 probe: `Authorization: bearer KEY` was refused 401, where HTTP's
/// scheme names are case-insensitive (RFC 9110, 11.1).
#[tokio::test]
async fn the_bearer_scheme_is_read_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), Some(KEY));
    for (given, status) in [
        (format!("bearer {KEY}"), StatusCode::OK),
        (format!("BEARER {KEY}"), StatusCode::OK),
        (format!("Bearer  {KEY}"), StatusCode::OK),
        (format!("Basic {KEY}"), StatusCode::UNAUTHORIZED),
        (format!("Bearer{KEY}"), StatusCode::UNAUTHORIZED),
        (KEY.to_string(), StatusCode::UNAUTHORIZED),
    ] {
        let req = Request::builder()
            .method("GET")
            .uri("/v1/stats")
            .header(header::AUTHORIZATION, &given)
            .body(Body::empty())
            .unwrap();
        let resp = router(st.clone()).oneshot(req).await.unwrap();
        assert_eq!(resp.status(), status, "{given}");
    }
}

/// The metrics count a method outside HTTP's own under one label: each name a client made up
/// had been a series of its own, kept for the server's life, so requests with random method
/// names (without the key, answered 401) grew `/metrics` and the server's memory without
/// bound (helper-95: 20,000 such requests, 21 MB of metrics).
#[tokio::test]
async fn made_up_methods_are_counted_under_one_label() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), Some("sesame"));
    for i in 0..3 {
        let (s, _, _) = call(&st, &format!("XMETHOD{i}"), "/v1/stats", None, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
    }
    let (s, _, _) = call(&st, "GET", "/v1/stats", None, Some("sesame")).await;
    assert_eq!(s, StatusCode::OK);
    let (_, v, _) = call(&st, "GET", "/metrics", None, Some("sesame")).await;
    let text = v.as_str().unwrap();
    assert!(!text.contains("XMETHOD"), "{text}");
    assert!(
        text.contains(
            "loci_http_requests_total{route=\"/v1/stats\",method=\"other\",status=\"401\"} 3"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "loci_http_requests_total{route=\"/v1/stats\",method=\"GET\",status=\"200\"} 1"
        ),
        "{text}"
    );
}

/// A POST route reads its parameters from the JSON body; a query string beside it is refused,
/// naming what it held, as a GET route refuses a parameter it does not know: `?budget=5` on
/// `/v1/query` had been dropped without a word, and the pack came back unbounded
/// (helper-95).
#[tokio::test]
async fn a_post_route_refuses_parameters_in_its_query_string() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let body = Some(r#"{"question":"where is home"}"#);
    let (s, v, _) = call(&st, "POST", "/v1/query?budget=5&limit=1", body, None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let said = v["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("budget") && said.contains("JSON body"),
        "{said}"
    );
    let (s, v, _) = call(&st, "POST", "/v1/query", body, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _, _) = call(&st, "POST", "/v1/context?budget=5", Some("{}"), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

/// A GET route that takes no parameters refuses a query string, naming what it held, as the
/// POST routes do: `/v1/nodes/bot?depth=2` had answered the node alone, the depth dropped
/// without a word, and `/v1/context/1?budget=5` the whole saved context (helper-118). The
/// server's own pages (health, metrics, the API's description) take any, as a monitor's
/// cache-busting `?t=` is no parameter of theirs.
#[tokio::test]
async fn a_get_route_without_parameters_refuses_a_query_string() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    for uri in [
        "/v1/nodes/bot?depth=2",
        "/v1/edges/0?limit=1",
        "/v1/context/1?budget=5",
        "/v1/stats?verbose=1",
        "/v1/queries?name=home",
        "/v1/wm?namespace=a",
    ] {
        let (s, v, _) = call(&st, "GET", uri, None, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
        let said = v["error"]["message"].as_str().unwrap();
        let name = uri.split(['?', '=']).nth(1).unwrap();
        assert!(
            said.contains(name) && said.contains("takes no parameters"),
            "{uri}: {said}"
        );
        let plain = uri.split('?').next().unwrap();
        let (s, v, _) = call(&st, "GET", plain, None, None).await;
        assert_ne!(s, StatusCode::BAD_REQUEST, "{plain}: {v}");
    }
    for uri in ["/health?t=1", "/metrics?t=1", "/openapi.json?t=1"] {
        let (s, v, _) = call(&st, "GET", uri, None, None).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {v}");
    }
    // The route's POST is the JSON body's as before, and a GET with parameters reads them.
    let (s, v, _) = call(&st, "POST", "/v1/wm?x=1", Some("{}"), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let said = v["error"]["message"].as_str().unwrap();
    assert!(said.contains("JSON body"), "{said}");
    let (s, v, _) = call(&st, "GET", "/v1/timeline?limit=1", None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

/// A query-string number that does not parse is told with its value and what was wanted:
/// `limit=-1` had been answered "limit: invalid digit found in string" (helper-118).
#[tokio::test]
async fn a_query_string_number_that_does_not_parse_is_named_with_its_value() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let digits = "9".repeat(5000);
    for (uri, says) in [
        (
            "/v1/timeline?limit=-1",
            r#"limit: "-1" is not a whole number of 0 or more"#,
        ),
        (
            "/v1/timeline?limit=abc",
            r#"limit: "abc" is not a whole number"#,
        ),
        ("/v1/timeline?from=x", r#"from: "x" is not a whole number"#),
        ("/v1/timeline?limit=", r#"limit: "" is not a whole number"#),
        (
            "/v1/search?q=x&limit=1e3",
            r#"limit: "1e3" is not a whole number"#,
        ),
        (
            "/v1/neighbors?node=bot&depth=300",
            r#"depth: "300" is out of range"#,
        ),
        (
            "/v1/neighbors?node=bot&min_confidence=high",
            r#"min_confidence: "high" is not a number"#,
        ),
    ] {
        let (s, v, _) = call(&st, "GET", uri, None, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
        let said = v["error"]["message"].as_str().unwrap();
        assert_eq!(said, says, "{uri}");
    }
    // A long value is shown cut short.
    let uri = format!("/v1/timeline?limit={digits}");
    let (s, v, _) = call(&st, "GET", &uri, None, None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let said = v["error"]["message"].as_str().unwrap();
    assert!(
        said.starts_with("limit: ") && said.ends_with("is out of range"),
        "{said}"
    );
    assert!(said.len() < 400, "{said}");
}

/// A search's event kind one slip of case from a kind of the store is refused naming it, as a
/// label is: `kind=observation` had found nothing, without a word (helper-95).
#[tokio::test]
async fn a_search_kind_one_slip_from_a_known_kind_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let (s, v, _) = call(
        &st,
        "GET",
        "/v1/search?q=fletcher&kind=observation",
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let said = v["error"]["message"].as_str().unwrap();
    assert!(said.contains("did you mean \"OBSERVATION\""), "{said}");
    let (s, _, _) = call(
        &st,
        "GET",
        "/v1/search?q=fletcher&kind=OBSERVATION",
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
}

/// A query string refused on a POST route is quoted cut between characters, and another
/// method on the route is still "method not allowed": a name cut at its 40th byte inside an
/// `é` had panicked the request's task (helper-96).
#[tokio::test]
async fn a_refused_query_string_is_cut_between_characters() {
    let dir = tempfile::tempdir().unwrap();
    let st = state(dir.path(), None);
    let name = format!("{}é", "a".repeat(39));
    let uri = format!("/v1/query?{name}=1");
    let req = Request::builder()
        .method("POST")
        .uri(uri.as_bytes())
        .body(Body::from(r#"{"question":"x"}"#))
        .unwrap();
    let resp = router(st.clone()).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let (s, _, _) = call(&st, "GET", "/v1/query?x=1", None, None).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
}
