//! The versioned JSON routes of `loci serve`, mirroring the library and the CLI: what `loci X
//! --json` prints, a route answers. The OpenAPI document ([`ApiDoc`], `GET /openapi.json`) is
//! generated from these handlers' annotations, so it lists what the router serves.
//!
//! Every request is bounded: bodies by the server's body limit, budgets by [`MAX_BUDGET`],
//! rows by [`MAX_ROWS`], planner queries by the planner's row, hop and time limits.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value as Json_};
use utoipa::{IntoParams, OpenApi, ToSchema};

use super::{ApiError, AppState, MAX_BUDGET, MAX_ROWS};
use crate::context::{self, ContextMode, ContextOptions};
use crate::dynamics::consolidate::{self, ConsolidateOptions, ConsolidationPolicy, RuleSummarizer};
use crate::dynamics::forget::{self, ForgetOptions};
use crate::dynamics::working::WmOp;
use crate::ingest::{self, Format};
use crate::query::{self, Asked, QueryError};
use crate::retrieval::{RankingMode, Tokenizer};
use crate::{
    DeleteRequest, EdgeId, ExpandOptions, NameOf, RetrieveOptions, Retriever, SearchFilter,
    SnippetKind, Store,
};

type Answer = Result<Json<Json_>, ApiError>;

/// A JSON body, whatever its content type says, whose rejection (not JSON, a missing or
/// unknown field, too large) is answered as an [`ApiError`] naming the field, like every other
/// error.
pub struct Body<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for Body<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await?;
        json_body(&bytes).map(Body)
    }
}

/// A JSON body as `T`; an error names the field that does not read.
fn json_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every route's body is an object: serde reads an array as a struct's fields in order,
    // and refused `[1, 2]` as "[0]: expected a string".
    let given = match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => None,
        Some(b'[') => Some("an array"),
        Some(b'"') => Some("a string"),
        Some(b't' | b'f') => Some("true or false"),
        Some(b'n') => Some("null"),
        Some(b'-' | b'0'..=b'9') => Some("a number"),
        Some(_) => None,
        None => Some("nothing"),
    };
    let not_json = |e: serde_json::Error| ApiError::bad_input(format!("body: not JSON: {e}"));
    if let Some(given) = given {
        // The first letter only guesses: "not json" starts as null does.
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            if given != "nothing" {
                return Err(not_json(e));
            }
        }
        return Err(ApiError::bad_input(format!(
            "body: expected a JSON object, got {given}"
        )));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize::<_, T>(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            // Where the text stops being JSON, no field is at fault ("?" was printed as one).
            not_json(inner)
        } else if let Some(said) = integer_too_large(bytes, &inner) {
            refused_at_saying("body", &path, said)
        } else {
            refused_at("body", &path, inner)
        }
    })?;
    de.end()
        .map_err(|e| ApiError::bad_input(format!("body: {e}")))?;
    if let Some((path, digits)) = std::str::from_utf8(bytes)
        .ok()
        .and_then(crate::model::inexact_integer)
    {
        let said = crate::model::inexact_integer_message(&digits);
        return Err(refused_at_saying("body", &path, said));
    }
    Ok(value)
}

/// A value of JSON `what` (a body, a tool's arguments) refused at `path`, which names the field
/// where there is one (`body: budget: invalid type ...`).
pub(super) fn refused_at(what: &str, path: &str, inner: serde_json::Error) -> ApiError {
    refused_at_saying(what, path, inner.to_string())
}

/// [`refused_at`], in words of the caller's.
pub(super) fn refused_at_saying(what: &str, path: &str, said: String) -> ApiError {
    if path.is_empty() || path == "." || path == "?" {
        ApiError::bad_input(format!("{what}: {said}"))
    } else {
        ApiError::bad_input(format!("{what}: {path}: {said}"))
    }
}

/// What to say of an integer of `body` too large for its field, which serde_json reads as a
/// float and refuses as "invalid type: floating point `1.8446744073709552e+19`": the digits
/// as given, found where the error points (the end of the value).
fn integer_too_large(body: &[u8], e: &serde_json::Error) -> Option<String> {
    let said = e.to_string();
    let rest = said.strip_prefix("invalid type: floating point `")?;
    let expected = &rest[rest.find(", expected ")? + 2..];
    let expected = expected.split(" at line ").next().unwrap_or(expected);
    let line_start = body
        .split_inclusive(|b| *b == b'\n')
        .take(e.line().saturating_sub(1))
        .map(<[u8]>::len)
        .sum::<usize>();
    let end = (line_start + e.column()).min(body.len());
    let start = body[..end]
        .iter()
        .rposition(|b| !(b.is_ascii_digit() || *b == b'-'))
        .map_or(0, |p| p + 1);
    // Only a whole number written as one: a fraction or an exponent is a float as given.
    if start > 0 && matches!(body[start - 1], b'.' | b'e' | b'E' | b'+') {
        return None;
    }
    let digits = std::str::from_utf8(&body[start..end]).ok()?;
    let magnitude = digits.strip_prefix('-').unwrap_or(digits);
    (!magnitude.is_empty() && magnitude.bytes().all(|b| b.is_ascii_digit())).then(|| {
        format!(
            "{digits} is out of range, {expected} (at line {} column {})",
            e.line(),
            e.column()
        )
    })
}

/// What to say of a whole number too large for its field once it was read into a JSON value
/// (a tool's arguments, a working-memory change read field by field), where its digits are
/// gone: serde_json holds it as a float and refuses it as "invalid type: floating point
/// `1.8446744073709552e19`, expected usize", blaming its kind. `None` for a fraction.
pub(super) fn whole_number_too_large(said: &str) -> Option<String> {
    let rest = said.strip_prefix("invalid type: floating point `")?;
    let (number, expected) = rest.split_once("`, ")?;
    let x: f64 = number.parse().ok()?;
    (x.fract() == 0.0 && x.abs() >= 9.2e18).then(|| {
        format!("an integer too large to read exactly ({number}) is out of range, {expected}")
    })
}

/// Query-string parameters, rejected as an [`ApiError`].
pub struct Params<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for Params<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("").to_string();
        check_query_is_utf8(&query)?;
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(params)) => Ok(Params(params)),
            Err(rejection) => Err(
                value_named(&super::error::query_refusal(&rejection), &query)
                    .unwrap_or_else(|| rejection.into()),
            ),
        }
    }
}

/// The refusal of a query string's parameter that did not parse (`said`, as serde says it:
/// `limit: invalid digit found in string`) saying what value it was and what was wanted:
/// `limit=-1` had been told of an "invalid digit" alone (helper-118). `None` for another
/// refusal, or a parameter `query` does not hold.
fn value_named(said: &str, query: &str) -> Option<ApiError> {
    let (name, why) = said.split_once(": ")?;
    let decode = |part: &str| {
        percent_encoding::percent_decode_str(&part.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    let value = (query.split('&'))
        .filter_map(|pair| pair.split_once('='))
        .find(|(n, _)| decode(n) == name)
        .map(|(_, v)| decode(v))?;
    let shown = crate::error::quoted_excerpt(&value);
    let negative = value
        .strip_prefix('-')
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    let wanted = match why {
        "invalid digit found in string" if negative => "a whole number of 0 or more",
        "invalid digit found in string" => "a whole number",
        "cannot parse integer from empty string" => "a whole number",
        "invalid float literal" => "a number",
        "number too large to fit in target type" | "number too small to fit in target type" => {
            return Some(ApiError::bad_input(format!(
                "{name}: {shown} is out of range"
            )));
        }
        _ => return None,
    };
    Some(ApiError::bad_input(format!(
        "{name}: {shown} is not {wanted}"
    )))
}

/// Refuses a query string with a parameter whose percent-escapes do not decode to UTF-8, naming
/// it. axum's `Query` decodes such an escape to U+FFFD, so `q=%FF` would search for a character
/// the caller never sent.
fn check_query_is_utf8(query: &str) -> Result<(), ApiError> {
    use percent_encoding::percent_decode_str;
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if [name, value]
            .iter()
            .any(|part| percent_decode_str(part).decode_utf8().is_err())
        {
            let name = percent_decode_str(name).decode_utf8_lossy();
            return Err(ApiError::bad_input(format!(
                "{name}: not UTF-8 once its percent-escapes are decoded"
            )));
        }
    }
    Ok(())
}

/// Path parameters, rejected as an [`ApiError`].
#[derive(axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct PathParam<T>(pub T);

/// `/v1/edges/{id}`'s parameter, by name: a value that does not parse is refused naming it
/// (a bare `u32` is refused as "Cannot parse `abc` to a `u32`", naming nothing).
#[derive(serde::Deserialize)]
pub struct EdgeAt {
    id: u32,
}

/// `/v1/context/{turn}`'s parameter, by name (as [`EdgeAt`]).
#[derive(serde::Deserialize)]
pub struct TurnAt {
    turn: u64,
}

fn to_json(v: &impl serde::Serialize) -> Answer {
    value_of(v).map(Json)
}

/// `v` as JSON, its numbers as the CLI writes them: through the text, because a value
/// serialised straight to a [`serde_json::Value`] widens an f32 to f64, and a confidence of
/// 0.95 read 0.949999988079071.
fn value_of(v: &impl serde::Serialize) -> Result<serde_json::Value, ApiError> {
    serde_json::to_string(v)
        .and_then(|text| serde_json::from_str(&text))
        .map_err(|e| ApiError::internal(format!("encoding the answer: {e}")))
}

fn bounded(name: &str, value: usize, max: usize) -> Result<usize, ApiError> {
    if value > max {
        return Err(ApiError::bad_input(format!(
            "{name}: {value} is over this server's limit of {max}"
        )));
    }
    Ok(value)
}

/// A request's `limit`: at least 1 (nothing asked for is no question) and at most
/// [`MAX_ROWS`]; `default` when not given.
fn row_limit(given: Option<usize>, default: usize) -> Result<usize, ApiError> {
    match given {
        Some(0) => Err(ApiError::bad_input("limit: must be at least 1")),
        given => bounded("limit", given.unwrap_or(default), MAX_ROWS),
    }
}

/// Refuses a range of world times whose `from` is after its `to`: it holds nothing, and was
/// most likely given the wrong way round.
fn check_time_range(from: Option<i64>, to: Option<i64>) -> Result<(), ApiError> {
    match (from, to) {
        (Some(from), Some(to)) if from > to => Err(ApiError::bad_input(format!(
            "from: {from} is after to ({to})"
        ))),
        _ => Ok(()),
    }
}

/// The routes, with the state they need.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/health", get(health))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .route("/v1/stats", get_plain(stats))
        .route("/v1/events", post(append_events))
        .route("/v1/query", post_json(query_pack))
        .route("/v1/run", post_json(run_query))
        .route("/v1/queries", get_plain(list_queries))
        .route("/v1/search", get(search))
        .route("/v1/neighbors", get(neighbors))
        .route("/v1/timeline", get(timeline))
        .route("/v1/nodes/{key}", get_plain(node))
        .route("/v1/edges/{id}", get_plain(edge))
        .route("/v1/context", post_json(build_context))
        .route("/v1/context/{turn}", get_plain(saved_context))
        .route("/v1/consolidate", post_json(consolidate_now))
        .route("/v1/forget", post_json(forget_now))
        .route("/v1/delete", post_json(delete))
        .route("/v1/compact", post_json(compact))
        .route("/v1/pin", post_json(pin))
        .route(
            "/v1/wm",
            get_plain(working_memory).merge(post_json(change_working_memory)),
        )
}

/// A POST route that reads its parameters from the JSON body alone (every one but
/// `/v1/events`, whose body is the events and whose query string names their format): a query
/// string beside the body is refused, naming (the first few of) what it held, as a GET route
/// refuses a parameter it does not know. `?budget=5` on `/v1/query` had been dropped without
/// a word, and the pack came back unbounded (helper-95).
fn post_json<H, T>(handler: H) -> axum::routing::MethodRouter<Arc<AppState>>
where
    H: axum::handler::Handler<T, Arc<AppState>>,
    T: 'static,
{
    // A route layer: another method on the route is still answered 405 (`layer` had wrapped
    // the fallback too, and a GET with a query string was told of the query string).
    post(handler).route_layer(axum::middleware::from_fn(refuse_query_string))
}

/// A GET route of the API that takes no parameters: a query string is refused as on
/// [`post_json`]'s routes (`/v1/nodes/bot?depth=2` had answered the node alone, the depth
/// dropped without a word). The server's own pages (`/health`, `/metrics`, the API's
/// description) are not these: a monitor's cache-busting `?t=` is no parameter of theirs.
fn get_plain<H, T>(handler: H) -> axum::routing::MethodRouter<Arc<AppState>>
where
    H: axum::handler::Handler<T, Arc<AppState>>,
    T: 'static,
{
    get(handler).route_layer(axum::middleware::from_fn(refuse_query_string))
}

async fn refuse_query_string(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if let Some(query) = req.uri().query().filter(|q| !q.is_empty()) {
        // The server takes UTF-8 in a query (`é` as two bytes): a name is cut after its 40th
        // character, where a cut at a byte count had panicked inside one.
        let shown = |text: &'_ str| -> String { text.chars().take(40).collect() };
        let mut names: Vec<String> = (query.split('&'))
            .filter_map(|pair| pair.split('=').next())
            .filter(|name| !name.is_empty())
            .take(5)
            .map(shown)
            .collect();
        if names.is_empty() {
            names.push(shown(query));
        }
        let instead = match *req.method() {
            axum::http::Method::POST => "give the parameters in the JSON body",
            _ => "this route takes no parameters",
        };
        return ApiError::bad_input(format!(
            "the query string ({}) is not read here: {instead}",
            names.join(", ")
        ))
        .into_response();
    }
    next.run(req).await
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "loci",
        description = "Memory for autonomous agents: an event log, a property graph, full-text \
                       and graph retrieval. Every route but /health needs `Authorization: \
                       Bearer <key>` when the server has a key. Errors are \
                       {\"error\": {\"code\", \"message\"}}."
    ),
    paths(
        health,
        openapi,
        metrics,
        stats,
        append_events,
        query_pack,
        run_query,
        list_queries,
        search,
        neighbors,
        timeline,
        node,
        edge,
        build_context,
        saved_context,
        consolidate_now,
        forget_now,
        delete,
        compact,
        pin,
        working_memory,
        change_working_memory,
        mcp_endpoint,
        mcp_stream,
        mcp_end
    ),
    components(schemas(
        QueryRequest,
        RunRequest,
        ContextRequest,
        ConsolidateRequest,
        ForgetRequest,
        DeleteBody,
        PinRequest,
        WmOp,
        super::error::ErrorBody,
        super::error::ErrorDetail
    ))
)]
pub struct ApiDoc;

/// MCP (the Model Context Protocol) over streamable HTTP: JSON-RPC 2.0 messages (`initialize`,
/// then `tools/list`, `tools/call`, `resources/list`, `resources/read`). The tools: `remember`,
/// `recall`, `query`, `timeline`, `neighbours`, `context`; the resources: the saved queries
/// (`loci://queries/...`). Answered as JSON or as an event stream, in a session the
/// `Mcp-Session-Id` header carries. Served by the MCP service mounted at `/mcp` (see
/// `serve::mcp`): this item only documents it, as no handler of this module answers it.
#[utoipa::path(post, path = "/mcp", request_body(content = Json_, description = "a JSON-RPC 2.0 request or notification"),
    responses((status = 200, description = "the JSON-RPC response (application/json or text/event-stream)"),
        (status = 202, description = "a notification or response accepted"),
        (status = 401, body = super::error::ErrorBody)))]
#[allow(dead_code)]
fn mcp_endpoint() {}

/// MCP's event stream of a session (the `Mcp-Session-Id` header): what the server sends it
/// unasked. Needs `Accept: text/event-stream`. Documented only, as [`mcp_endpoint`] is.
#[utoipa::path(get, path = "/mcp",
    responses((status = 200, description = "the session's event stream (text/event-stream)"),
        (status = 406, description = "the request does not accept text/event-stream"),
        (status = 401, body = super::error::ErrorBody)))]
#[allow(dead_code)]
fn mcp_stream() {}

/// Ends an MCP session (the `Mcp-Session-Id` header). Documented only, as [`mcp_endpoint`] is.
#[utoipa::path(delete, path = "/mcp",
    responses((status = 200, description = "the session is ended"),
        (status = 400, description = "no Mcp-Session-Id header"),
        (status = 401, body = super::error::ErrorBody)))]
#[allow(dead_code)]
fn mcp_end() {}

/// Liveness; needs no key. 503 once the store's handle refuses every call (a sled commit
/// that failed to reach disk, a panic inside the backend), which only a new open mends: a
/// supervisor restarting on it gets a server that works (helper-142: it said "ok" while every
/// write and log read was refused).
#[utoipa::path(get, path = "/health", responses((status = 200, body = Json_),
    (status = 503, body = Json_)))]
async fn health(State(st): State<Arc<AppState>>) -> axum::response::Response {
    let version = env!("CARGO_PKG_VERSION");
    // Absent only while `compact` swaps it in, or after shutdown: neither is a failure.
    let closed = st.store().ok().and_then(|store| store.usable().err());
    match closed {
        None => Json(json!({"status": "ok", "version": version})).into_response(),
        Some(e) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "failed", "error": e.to_string(), "version": version})),
        )
            .into_response(),
    }
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, body = Json_)))]
async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        ApiDoc::openapi().to_pretty_json().unwrap_or_default(),
    )
}

/// Prometheus text: requests by route and status, latency histograms, store counters.
#[utoipa::path(get, path = "/metrics", responses((status = 200, body = String)))]
async fn metrics(State(st): State<Arc<AppState>>) -> Result<impl IntoResponse, ApiError> {
    let state = st.clone();
    let text = st
        .blocking_report(move |s| {
            Ok(state
                .metrics
                .render(&s.stats(), s.usage_pending(), s.usable().is_ok()))
        })
        .await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}

/// Counts and sizes, as `loci stats --json`, with the process's `rss_bytes` and whether the
/// store's handle still serves (`usable`; `handle_error` when not). A closed handle's counts
/// are what was committed before it closed: the report still answers, for an operator to
/// see the store, but says so (helper-144: 200 from memory and no word of it).
#[utoipa::path(get, path = "/v1/stats", responses((status = 200, body = Json_)))]
async fn stats(State(st): State<Arc<AppState>>) -> Answer {
    st.blocking_report(|s| {
        let mut v = value_of(&s.stats())?;
        v["rss_bytes"] = crate::bench::rss_bytes().into();
        let usable = s.usable();
        v["usable"] = usable.is_ok().into();
        if let Err(e) = usable {
            v["handle_error"] = e.to_string().into();
        }
        Ok(Json(v))
    })
    .await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct EventsParams {
    /// events | graph | passages | triples | toolcalls | conversation | journal (default:
    /// told from the first line).
    format: Option<String>,
    /// Replace passages whose title the store holds with other text.
    #[serde(default)]
    replace: bool,
    /// Put passages (and the triples citing them) under this namespace, as `NS/id` (`loci
    /// ingest --namespace`).
    namespace: Option<String>,
}

/// Appends a JSON Lines body as one atomic batch: all of it or, on any bad line, nothing
/// (the error names `request:LINE: field`).
#[utoipa::path(post, path = "/v1/events", params(EventsParams),
    request_body(content = String, content_type = "application/x-ndjson"),
    responses((status = 200, body = Json_), (status = 400, body = super::error::ErrorBody)))]
async fn append_events(
    State(st): State<Arc<AppState>>,
    Params(p): Params<EventsParams>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Answer {
    let body = body?;
    let format = p.format.as_deref().map(str::parse::<Format>).transpose()?;
    st.blocking(move |s| {
        if let Some(ns) = &p.namespace {
            ingest::SourceBatch::check_namespace(ns)?;
        }
        let mut batch = ingest::read_bytes_detecting("request", &body, format)?;
        if let Some(ns) = &p.namespace {
            batch = batch.namespaced(ns);
        }
        let unextracted = batch.unextracted.len();
        let passages_skipped = batch.dedupe_passages(s, p.replace)?;
        let commit = batch.commit(s)?;
        let mut v = value_of(&commit)?;
        v["passages_skipped"] = passages_skipped.into();
        v["unextracted"] = unextracted.into();
        Ok(Json(v))
    })
    .await
}

/// A question for a context pack (`loci query`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    pub question: String,
    /// Tokens the pack may take (at most 200000).
    #[schema(maximum = 200000)]
    budget: Option<usize>,
    /// Snippets at most (default 10).
    #[schema(minimum = 1, maximum = 10000)]
    limit: Option<usize>,
    #[serde(default)]
    min_confidence: f32,
    #[serde(default)]
    relations: Vec<String>,
    #[serde(default)]
    deny_relations: Vec<String>,
    /// fact | passage | event | entity (default: all).
    #[serde(default)]
    kinds: Vec<String>,
    as_of: Option<i64>,
    #[serde(default)]
    include_ended: bool,
    #[serde(default)]
    raw_confidence: bool,
    /// fused (default) | text | graph.
    mode: Option<String>,
    /// approx (default) | cl100k_base.
    tokenizer: Option<String>,
    /// Record what the pack returned as uses (default true).
    record: Option<bool>,
}

fn tokenizer(name: Option<&str>) -> Result<Tokenizer, ApiError> {
    Ok(name.map(str::parse).transpose()?.unwrap_or_default())
}

fn retrieve_options(q: &QueryRequest) -> Result<RetrieveOptions, ApiError> {
    let kinds = q
        .kinds
        .iter()
        .map(|k| k.parse::<SnippetKind>())
        .collect::<crate::Result<Vec<_>>>()?;
    let mode: RankingMode = q.mode.as_deref().unwrap_or("fused").parse()?;
    let mut opts = RetrieveOptions::default()
        .with_k(row_limit(q.limit, 10)?)
        .with_token_counter(tokenizer(q.tokenizer.as_deref())?)
        .with_min_confidence(q.min_confidence)
        .with_relations(q.relations.clone())
        .with_deny_relations(q.deny_relations.clone())
        .with_kinds(kinds)
        .with_include_ended(q.include_ended)
        .with_raw_confidence(q.raw_confidence)
        .with_record_usage(q.record.unwrap_or(true))
        .with_mode(mode);
    opts.budget = q
        .budget
        .map(|b| bounded("budget", b, MAX_BUDGET))
        .transpose()?;
    opts.as_of = q.as_of;
    Ok(opts)
}

/// A context pack for a question, as `loci query --json`.
#[utoipa::path(post, path = "/v1/query", request_body = QueryRequest,
    responses((status = 200, body = Json_), (status = 400, body = super::error::ErrorBody)))]
async fn query_pack(State(st): State<Arc<AppState>>, Body(q): Body<QueryRequest>) -> Answer {
    let cache = st.retriever.clone();
    st.blocking(move |s| pack_of(s, cache, &q)).await
}

/// The context pack of a [`QueryRequest`] (shared with the MCP `recall` tool).
pub fn pack_of(s: &Store, cache: crate::retrieval::RetrieverCache, q: &QueryRequest) -> Answer {
    let opts = retrieve_options(q)?;
    let pack = Retriever::with_cache(s, cache)?.retrieve(&q.question, &opts)?;
    to_json(&pack)
}

impl QueryRequest {
    pub fn new(question: String, budget: Option<usize>, limit: Option<usize>) -> Self {
        QueryRequest {
            question,
            budget,
            limit,
            min_confidence: 0.0,
            relations: Vec::new(),
            deny_relations: Vec::new(),
            kinds: Vec::new(),
            as_of: None,
            include_ended: false,
            raw_confidence: false,
            mode: None,
            tokenizer: None,
            record: None,
        }
    }

    /// This request, recording its pack's uses or not (`None`: the default, recorded).
    pub fn with_record(mut self, record: Option<bool>) -> Self {
        self.record = record;
        self
    }
}

impl RunRequest {
    pub fn new(
        name: Option<String>,
        query: Option<String>,
        params: BTreeMap<String, Json_>,
        explain: bool,
    ) -> Self {
        RunRequest {
            name,
            query,
            params,
            explain,
        }
    }
}

impl ContextRequest {
    pub fn new(
        budget: usize,
        question: Option<String>,
        mode: Option<String>,
        session: Option<String>,
    ) -> Self {
        ContextRequest {
            budget,
            question,
            mode,
            instructions: None,
            session,
            tokenizer: None,
            save: false,
            record: None,
        }
    }

    /// This request, recording its snippets' uses or not (`None`: the default, recorded).
    pub fn with_record(mut self, record: Option<bool>) -> Self {
        self.record = record;
        self
    }
}

/// A planner query: a saved one by `name`, or `query` text; `params` by name.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    name: Option<String>,
    query: Option<String>,
    #[serde(default, deserialize_with = "params_by_unique_name")]
    #[schema(value_type = Object)]
    params: BTreeMap<String, Json_>,
    /// The plan the query would run with these parameters, not its answer (`loci run
    /// --explain`).
    #[serde(default)]
    explain: bool,
}

/// A JSON value read with every object's keys given once, at any depth: serde_json keeps the
/// last value of a key given twice, where the other routes refuse it.
struct UniqueJson(Json_);

impl<'de> Deserialize<'de> for UniqueJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueJsonVisitor).map(UniqueJson)
    }
}

struct UniqueJsonVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueJsonVisitor {
    type Value = Json_;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json_, E> {
        Ok(Json_::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json_, E> {
        Ok(Json_::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json_, E> {
        Ok(Json_::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json_, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Json_::Null, Json_::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json_, E> {
        Ok(Json_::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json_, E> {
        Ok(Json_::String(v))
    }
    fn visit_unit<E>(self) -> Result<Json_, E> {
        Ok(Json_::Null)
    }
    fn visit_none<E>(self) -> Result<Json_, E> {
        Ok(Json_::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json_, A::Error> {
        let mut out = Vec::new();
        while let Some(UniqueJson(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Json_::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Json_, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some((k, UniqueJson(v))) = map.next_entry::<String, UniqueJson>()? {
            if out.contains_key(&k) {
                return Err(crate::model::key_given_twice(&k));
            }
            out.insert(k, v);
        }
        Ok(Json_::Object(out))
    }
}

/// A query's parameters by name, a name given twice refused: a JSON object's map keeps the
/// last silently, where the CLI refuses `--param k=a --param k=b`.
fn params_by_unique_name<'de, D>(d: D) -> Result<BTreeMap<String, Json_>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct ByName;
    impl<'de> serde::de::Visitor<'de> for ByName {
        type Value = BTreeMap<String, Json_>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object of parameters by name")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((name, UniqueJson(value))) = map.next_entry::<String, UniqueJson>()? {
                if out.contains_key(&name) {
                    return Err(serde::de::Error::custom(format!(
                        "parameter {} is given twice; give each name once",
                        crate::error::quoted_excerpt(&name)
                    )));
                }
                out.insert(name, value);
            }
            Ok(out)
        }
    }
    d.deserialize_map(ByName)
}

/// Runs a saved or inline planner query, as `loci run --json`.
#[utoipa::path(post, path = "/v1/run", request_body = RunRequest,
    responses((status = 200, body = Json_), (status = 400, body = super::error::ErrorBody),
              (status = 422, body = super::error::ErrorBody)))]
async fn run_query(State(st): State<Arc<AppState>>, Body(r): Body<RunRequest>) -> Answer {
    let state = st.clone();
    st.blocking(move |s| run_request(s, &state, &r)).await
}

/// Runs a [`RunRequest`] (shared with the MCP `query` tool).
pub fn run_request(s: &Store, state: &AppState, r: &RunRequest) -> Answer {
    let shown = |text: &str, e: QueryError| -> ApiError {
        // The query text with the failing span marked, as the CLI shows it.
        let rendered = e.render(text);
        let mut a = ApiError::from(e);
        if a.code == "bad_input" {
            a.message = rendered;
        }
        a
    };
    let asked = match (&r.name, &r.query) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(ApiError::bad_input(
                "give a saved query's \"name\" or \"query\" text, one of them",
            ))
        }
        (Some(name), None) => {
            let Some(q) = state.queries.get(name) else {
                return Err(ApiError::not_found(state.queries.unknown(name)));
            };
            let args = q.args_from_json(&r.params);
            Asked::Saved(q, args.map_err(|e| shown(&q.prepared.text, e))?)
        }
        (None, Some(text)) => Asked::Text(text, query::params_from_json(&r.params)?),
    };
    let store = (!r.explain).then_some(s);
    to_json(&asked.answer(store).map_err(|e| shown(asked.text(), e))?)
}

/// The saved queries with their parameters, as `loci queries --json`.
#[utoipa::path(get, path = "/v1/queries", responses((status = 200, body = Json_)))]
async fn list_queries(State(st): State<Arc<AppState>>) -> Answer {
    to_json(&st.queries.list())
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct SearchParams {
    /// The text to search for.
    q: String,
    /// Only nodes of this label.
    label: Option<String>,
    /// Only events of this kind.
    kind: Option<String>,
    /// Hits at most (default 10).
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<usize>,
    from: Option<i64>,
    to: Option<i64>,
}

/// Full-text search over nodes and events, as `loci search --json`.
#[utoipa::path(get, path = "/v1/search", params(SearchParams),
    responses((status = 200, body = Json_), (status = 400, body = super::error::ErrorBody)))]
async fn search(State(st): State<Arc<AppState>>, Params(p): Params<SearchParams>) -> Answer {
    let limit = row_limit(p.limit, 10)?;
    check_time_range(p.from, p.to)?;
    crate::text::check_search(&p.q, "q", p.label.as_deref(), p.kind.as_deref())?;
    st.blocking(move |s| {
        s.graph()
            .refuse_near_misses("label", NameOf::Label, p.label.as_deref())?;
        s.refuse_kind_near_misses("kind", p.kind.as_deref())?;
        let mut filter = SearchFilter::default()
            .with_labels(p.label)
            .with_kinds(p.kind);
        if p.from.is_some() || p.to.is_some() {
            filter.time = Some((p.from.unwrap_or(i64::MIN), p.to.unwrap_or(i64::MAX)));
        }
        // The hits' ids are read back after the search: a deletion between gives every id
        // anew.
        let rows: Vec<Json_> = s.with_stable_ids(|| {
            s.search(&p.q, &filter, limit)?
                .iter()
                .map(|h| crate::text::hit_json(s, h))
                .collect()
        })?;
        Ok(Json(Json_::Array(rows)))
    })
    .await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct NeighborsParams {
    /// The start node's key.
    node: String,
    /// Hops (default 1, at most 4).
    #[param(minimum = 1, maximum = 4)]
    depth: Option<u8>,
    min_confidence: Option<f32>,
    /// Only edges of this relation.
    relation: Option<String>,
}

/// Nodes within N hops of a node, as `loci neighbors --json`.
#[utoipa::path(get, path = "/v1/neighbors", params(NeighborsParams),
    responses((status = 200, body = Json_), (status = 404, body = super::error::ErrorBody)))]
async fn neighbors(State(st): State<Arc<AppState>>, Params(p): Params<NeighborsParams>) -> Answer {
    st.blocking(move |s| neighbors_of(s, &p.node, p.depth, p.min_confidence, p.relation))
        .await
}

/// The neighbours of a node by key (shared with the MCP `neighbours` tool).
pub fn neighbors_of(
    s: &Store,
    key: &str,
    depth: Option<u8>,
    min_confidence: Option<f32>,
    relation: Option<String>,
) -> Answer {
    let depth = depth.unwrap_or(1);
    if !(1..=4).contains(&depth) {
        return Err(ApiError::bad_input("depth: must be between 1 and 4"));
    }
    let min = min_confidence.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&min) {
        return Err(ApiError::bad_input("min_confidence: must be in [0, 1]"));
    }
    crate::text::refuse_any_blank(relation.as_deref(), "relation")?;
    crate::text::refuse_blank(key, "node")?;
    s.graph()
        .refuse_near_misses("relation", NameOf::Relation, relation.as_deref())?;
    let start = match s.require_node(key) {
        Ok(n) => n,
        Err(crate::Error::NotFound(_)) => {
            return Err(ApiError::not_found(format!("no node has key {key:?}")))
        }
        Err(e) => return Err(e.into()),
    };
    let opts = ExpandOptions::default()
        .with_min_confidence(min)
        .with_relations(relation);
    let found = s.neighbors(start.id, depth, &opts);
    // Its parts are made JSON once, through the text (`value_of`), and put together as they are.
    Ok(Json(
        json!({"start": start.key, "neighbors": value_of(&found)?}),
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct TimelineParams {
    /// World time from (inclusive; default: the beginning).
    from: Option<i64>,
    /// World time to (inclusive; default: the end).
    to: Option<i64>,
    /// Events at most (default 100), the latest ones.
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<usize>,
}

/// The events between two world times, oldest first (the latest `limit` of them).
#[utoipa::path(get, path = "/v1/timeline", params(TimelineParams),
    responses((status = 200, body = Json_)))]
async fn timeline(State(st): State<Arc<AppState>>, Params(p): Params<TimelineParams>) -> Answer {
    st.blocking(move |s| timeline_of(s, p.from, p.to, p.limit))
        .await
}

/// The latest `limit` events between two times (shared with the MCP `timeline` tool).
pub fn timeline_of(s: &Store, from: Option<i64>, to: Option<i64>, limit: Option<usize>) -> Answer {
    let limit = row_limit(limit, 100)?;
    check_time_range(from, to)?;
    let (events, total) =
        s.latest_events(from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX), limit)?;
    let events: Vec<serde_json::Value> = events.iter().map(timeline_row).collect();
    to_json(&json!({"events": events, "total": total}))
}

/// An event as a timeline lists it (here, in the MCP tool, and `loci timeline --json`).
pub fn timeline_row(e: &crate::model::Event) -> serde_json::Value {
    json!({
        "seq": e.seq, "ts": e.ts, "kind": e.kind, "actor": e.actor,
        "place": e.place, "text": timeline_text(e),
    })
}

/// What a timeline shows of event `e`: a summary's sentence, or the event's text (the words
/// it is indexed with: kind, actor, place and payload). A summary's indexed text puts its
/// digest's words before its sentence.
pub fn timeline_text(e: &crate::model::Event) -> String {
    use crate::dynamics::consolidate::{Summary, SUMMARY};
    match (e.kind == SUMMARY).then(|| Summary::of_event(e)).flatten() {
        Some(summary) => summary.text,
        None => e.text(),
    }
}

/// A node by key, with its edges (each with the events that support it).
#[utoipa::path(get, path = "/v1/nodes/{key}", params(("key" = String, Path)),
    responses((status = 200, body = Json_), (status = 404, body = super::error::ErrorBody)))]
async fn node(State(st): State<Arc<AppState>>, PathParam(key): PathParam<String>) -> Answer {
    st.blocking(move |s| {
        let n = match s.require_node(&key) {
            Ok(n) => n,
            Err(crate::Error::NotFound(_)) => {
                return Err(ApiError::not_found(format!("no node has key {key:?}")))
            }
            Err(e) => return Err(e.into()),
        };
        // From its list, not a scan of every edge (seconds per request at 100M edges).
        let g = s.graph();
        let edges: Vec<_> = g.edges_of(n.id).take(MAX_ROWS).collect();
        drop(g);
        let edges: Vec<_> = edges
            .into_iter()
            .filter_map(|id| s.edge(id).transpose())
            .collect::<crate::Result<_>>()?;
        Ok(Json(
            json!({"node": value_of(&n)?, "edges": value_of(&edges)?}),
        ))
    })
    .await
}

/// An edge by id, with its provenance (the events that support it).
#[utoipa::path(get, path = "/v1/edges/{id}", params(("id" = u32, Path)),
    responses((status = 200, body = Json_), (status = 404, body = super::error::ErrorBody)))]
async fn edge(
    State(st): State<Arc<AppState>>,
    PathParam(EdgeAt { id }): PathParam<EdgeAt>,
) -> Answer {
    st.blocking(move |s| match s.edge(EdgeId(id))? {
        Some(e) => to_json(&e),
        None => Err(ApiError::not_found(format!("no edge has id {id}"))),
    })
    .await
}

/// This turn's prompt context (`loci context`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextRequest {
    /// Tokens the context may take (at least what the pinned lines and instructions take, at
    /// most 200000).
    #[schema(minimum = 1, maximum = 200000)]
    budget: usize,
    question: Option<String>,
    /// all (default) | anchor | mainline.
    mode: Option<String>,
    instructions: Option<String>,
    session: Option<String>,
    /// approx (default) | cl100k_base.
    tokenizer: Option<String>,
    /// Save it as a snapshot (a CONTEXT event).
    #[serde(default)]
    save: bool,
    /// Record what the snippets return as uses (default true), as `/v1/query`'s `record`.
    record: Option<bool>,
}

/// Assembles a prompt context, as `loci context --json`.
#[utoipa::path(post, path = "/v1/context", request_body = ContextRequest,
    responses((status = 200, body = Json_), (status = 400, body = super::error::ErrorBody)))]
async fn build_context(State(st): State<Arc<AppState>>, Body(r): Body<ContextRequest>) -> Answer {
    st.blocking(move |s| context_of(s, r)).await
}

/// Builds a [`ContextRequest`] (shared with the MCP `context` tool).
pub fn context_of(s: &Store, r: ContextRequest) -> Answer {
    let mut opts = ContextOptions::with_budget(bounded("budget", r.budget, MAX_BUDGET)?);
    opts.question = r.question;
    opts.mode = r.mode.as_deref().unwrap_or("all").parse::<ContextMode>()?;
    opts.instructions = r.instructions;
    opts.session = r.session;
    opts.tokenizer = tokenizer(r.tokenizer.as_deref())?;
    opts.save = r.save;
    opts.record_usage = r.record.unwrap_or(true);
    to_json(&context::build_context(s, &opts)?)
}

/// What a saved context held at turn T.
#[utoipa::path(get, path = "/v1/context/{turn}", params(("turn" = u64, Path)),
    responses((status = 200, body = Json_), (status = 404, body = super::error::ErrorBody)))]
async fn saved_context(
    State(st): State<Arc<AppState>>,
    PathParam(TurnAt { turn }): PathParam<TurnAt>,
) -> Answer {
    st.blocking(move |s| match context::snapshot(s, turn)? {
        Some(snap) => to_json(&snap),
        None => Err(ApiError::not_found(format!(
            "no saved context of turn {turn}"
        ))),
    })
    .await
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ConsolidateRequest {
    until: Option<i64>,
    /// The length of a day in world time (default 24000; 1440 for a store kept in minutes).
    day: Option<i64>,
}

/// Summarises every closed day and week (`loci consolidate`).
#[utoipa::path(post, path = "/v1/consolidate", request_body = ConsolidateRequest,
    responses((status = 200, body = Json_)))]
async fn consolidate_now(
    State(st): State<Arc<AppState>>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Answer {
    let body = body?;
    // An empty body takes every default.
    let r: ConsolidateRequest = if body.iter().all(u8::is_ascii_whitespace) {
        ConsolidateRequest::default()
    } else {
        json_body(&body)?
    };
    st.blocking(move |s| {
        let mut opts = ConsolidateOptions {
            until: r.until,
            ..Default::default()
        };
        // A day under one tick is refused by the policy's own check.
        opts.policy = ConsolidationPolicy::for_store(s, r.day)?;
        to_json(&consolidate::consolidate(s, &RuleSummarizer, &opts)?)
    })
    .await
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetRequest {
    /// Events the store may hold.
    #[schema(minimum = 1)]
    budget: u64,
    now: Option<i64>,
    /// The length of a day in world time of the consolidation that comes first (default: the
    /// length of the store's day summaries, else 1440 in a store of conversation turns or
    /// journal entries timed by text, else 24000), as `loci forget --day`.
    #[schema(minimum = 1)]
    day: Option<i64>,
}

/// Consolidates, then evicts down to a budget of events (`loci forget`).
#[utoipa::path(post, path = "/v1/forget", request_body = ForgetRequest,
    responses((status = 200, body = Json_)))]
async fn forget_now(State(st): State<Arc<AppState>>, Body(r): Body<ForgetRequest>) -> Answer {
    st.blocking(move |s| {
        let mut opts = ForgetOptions::with_budget(r.budget);
        opts.now = r.now;
        to_json(&forget::consolidate_then_forget(s, r.day, &opts)?.1)
    })
    .await
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteBody {
    #[serde(default)]
    events: Vec<u64>,
    #[serde(default)]
    nodes: Vec<String>,
}

/// Deletes events and nodes as one deletion event (`loci delete`).
#[utoipa::path(post, path = "/v1/delete", request_body = DeleteBody,
    responses((status = 200, body = Json_), (status = 404, body = super::error::ErrorBody)))]
async fn delete(State(st): State<Arc<AppState>>, Body(r): Body<DeleteBody>) -> Answer {
    st.blocking(move |s| {
        let mut request = DeleteRequest::events(r.events);
        request.nodes = r.nodes;
        to_json(&s.delete(&request)?)
    })
    .await
}

/// `/v1/compact`'s body, which takes no field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactRequest {}

/// Rewrites the store's files without the text of deleted events (`loci compact`); waits up
/// to 30 s for the requests in flight to let go of the store.
#[utoipa::path(post, path = "/v1/compact", responses((status = 200, body = Json_),
    (status = 503, body = super::error::ErrorBody)))]
async fn compact(
    State(st): State<Arc<AppState>>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Answer {
    // It takes no option: a body is empty or `{}`, and a field in it is refused, as on every
    // other route (`{"x": 1}` had compacted, the field unread).
    let body = body?;
    if !body.iter().all(u8::is_ascii_whitespace) {
        let CompactRequest {} = json_body(&body)?;
    }
    let state = st.clone();
    let _turn = st
        .workers
        .acquire()
        .await
        .map_err(|_| ApiError::busy("shutting down"))?;
    let joined = tokio::task::spawn_blocking(move || {
        let store = state.take_store(Duration::from_secs(30))?;
        let dir = store.dir().to_path_buf();
        match store.compact() {
            Ok((fresh, report)) => {
                state.put_store(fresh);
                to_json(&report)
            }
            Err(e) => {
                // The old store was consumed; open it again so the server goes on.
                match Store::open(&dir) {
                    Ok(again) => state.put_store(again),
                    Err(open) => {
                        tracing::error!(error = %open, "reopening after a failed compaction")
                    }
                }
                Err(e.into())
            }
        }
    })
    .await;
    joined.map_err(|_| ApiError::internal("compaction failed unexpectedly"))?
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PinRequest {
    keys: Vec<String>,
    /// false unpins (default true).
    pinned: Option<bool>,
}

/// Pins or unpins nodes by key (`loci pin`).
#[utoipa::path(post, path = "/v1/pin", request_body = PinRequest,
    responses((status = 200, body = Json_), (status = 400, body = super::error::ErrorBody),
        (status = 404, body = super::error::ErrorBody)))]
async fn pin(State(st): State<Arc<AppState>>, Body(r): Body<PinRequest>) -> Answer {
    st.blocking(move |s| {
        let keys: Vec<&str> = r.keys.iter().map(String::as_str).collect();
        to_json(&s.pin(&keys, r.pinned.unwrap_or(true))?)
    })
    .await
}

/// The field of a working-memory change at fault, named: serde reads an op by its tag, and its
/// refusal of a field's value names no field ("body: invalid value: integer `-1`, expected
/// usize"). Each field is read alone with the op; the one refused is the one at fault.
fn field_at_fault(body: &[u8]) -> Option<ApiError> {
    let given: serde_json::Map<String, Json_> = serde_json::from_slice(body).ok()?;
    let op = given.get("op")?.clone();
    // The op first: one that is none (or no string) fails every field read with it, and had
    // been blamed on the first field tried.
    if let Err(e) = serde_json::from_value::<WmOp>(serde_json::json!({ "op": op })) {
        let said = e.to_string();
        if !said.starts_with("missing field") {
            return Some(ApiError::bad_input(format!("body: op: {said}")));
        }
    }
    given.iter().filter(|(k, _)| *k != "op").find_map(|(k, v)| {
        let alone = serde_json::json!({ "op": op, k.as_str(): v });
        let e = serde_json::from_value::<WmOp>(alone).err()?;
        let said = e.to_string();
        let said = whole_number_too_large(&said).unwrap_or(said);
        (!said.starts_with("missing field") && !said.starts_with("unknown field"))
            .then(|| ApiError::bad_input(format!("body: {k}: {said}")))
    })
}

/// The working memory.
#[utoipa::path(get, path = "/v1/wm", responses((status = 200, body = Json_)))]
async fn working_memory(State(st): State<Arc<AppState>>) -> Answer {
    st.blocking(|s| to_json(&s.working_memory())).await
}

/// Changes the working memory by one event: `{"op": "observe" | "intent" | "push_subgoal" |
/// "pop_subgoal" | "add_threat" | "clear_threat" | "promise" | "keep_promise" | "mainline" |
/// "capacity" | "clear", "text"?: .., "n"?: ..}`. A change that finds nothing to change (a pop
/// of an empty stack, a threat or promise not held) is 404, and writes nothing.
#[utoipa::path(post, path = "/v1/wm", request_body = WmOp,
    responses((status = 200, body = Json_), (status = 400, body = super::error::ErrorBody),
        (status = 404, body = super::error::ErrorBody)))]
async fn change_working_memory(State(st): State<Arc<AppState>>, body: Bytes) -> Answer {
    let op: WmOp = json_body(&body).map_err(|e| field_at_fault(&body).unwrap_or(e))?;
    // The op is read by its tag, which lets fields it does not take pass unread: they are
    // refused here, as every other route refuses an unknown field.
    let given: serde_json::Map<String, Json_> = json_body(&body)?;
    let takes = serde_json::to_value(&op).unwrap_or_default();
    if let Some(extra) = given.keys().find(|k| takes.get(k.as_str()).is_none()) {
        return Err(ApiError::bad_input(format!(
            "body: unknown field {}: op {} takes {}",
            crate::error::quoted_excerpt(extra),
            takes["op"],
            takes
                .as_object()
                .map(|o| o
                    .keys()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        )));
    }
    st.blocking(move |s| {
        s.change_working_memory(&op, "agent", None)?;
        to_json(&s.working_memory())
    })
    .await
}
