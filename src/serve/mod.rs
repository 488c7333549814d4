//! `loci serve`: one process holds the store open and answers HTTP/JSON and MCP.
//!
//! A request goes through, outermost first: the request log and metrics (`observe`), the key
//! check (every route but `/health`), its body read whole within `body_timeout` and the
//! body-size limit, then the server-wide concurrency limit (`admit`: a request beyond
//! `max_in_flight` is answered 503 with `Retry-After` at once, never queued without bound;
//! `/health` takes no place), then its handler. Handlers run the store's work on tokio's
//! blocking pool, at most `workers` at a time; a panic there is caught at that boundary and
//! answered 500 instead of taking the server down.
//!
//! The routes are in [`api`], the MCP tools in [`mcp`] (over stdio through [`stdio`]), the
//! Prometheus text in [`metrics`]. On SIGTERM or SIGINT the server stops accepting, drains the
//! requests in flight, and drops the store, which flushes the uses waiting to be written and
//! closes the files.

pub mod api;
pub mod error;
pub mod mcp;
pub mod metrics;
pub mod stdio;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

pub use error::ApiError;

use crate::query::SavedQueries;
use crate::retrieval::RetrieverCache;
use crate::Store;

/// How the server runs. Its `Debug` form shows whether there is a key, never the key.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServeConfig {
    pub addr: SocketAddr,
    /// The key every route but `/health` needs (`Authorization: Bearer <key>`).
    pub key: Option<String>,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Requests handled at once; one more is answered 503 with `Retry-After`.
    pub max_in_flight: usize,
    /// Store operations running at once on the blocking pool (the rest wait their turn, within
    /// `max_in_flight`).
    pub workers: usize,
    /// Saved queries beyond the built-in ones.
    pub queries_dir: Option<PathBuf>,
    /// How long the retrieval dictionary (the names linked in questions) may lag appends; see
    /// `RetrieverCache::with_max_staleness`.
    pub dictionary_lag: Duration,
    /// How long a request's body may take to arrive; it is read whole before the request
    /// takes one of the `max_in_flight` places, so a slow client holds none.
    pub body_timeout: Duration,
    /// Connections held open at once; the next waits to be accepted until one closes.
    pub max_connections: usize,
    /// How long a request's headers may take to arrive, and an idle connection may wait for
    /// its next request, before the connection is closed: without it a client that never
    /// finished its headers held its connection for ever (before the key was checked).
    pub header_timeout: Duration,
    /// MCP sessions open at once over HTTP; an `initialize` beyond it is answered 503. A
    /// session holds about 70 kB until it is closed or idles out (5 minutes).
    pub max_mcp_sessions: usize,
    /// How old the first waiting use may grow before the server writes the uses, idle or not
    /// ([`flush_uses_while_serving`]).
    pub uses_flush_after: Duration,
}

impl std::fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeConfig")
            .field("addr", &self.addr)
            .field("key", &self.key.as_ref().map(|_| "<set>"))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_in_flight", &self.max_in_flight)
            .field("workers", &self.workers)
            .field("queries_dir", &self.queries_dir)
            .field("dictionary_lag", &self.dictionary_lag)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .field("header_timeout", &self.header_timeout)
            .field("max_mcp_sessions", &self.max_mcp_sessions)
            .field("uses_flush_after", &self.uses_flush_after)
            .finish()
    }
}

/// The shortest key accepted: a short key can be guessed over the network.
pub const MIN_KEY_BYTES: usize = 16;
/// The largest retrieval or context budget a request may ask for, in tokens.
pub const MAX_BUDGET: usize = 200_000;
/// The most snippets, hits or events one request may ask for.
pub const MAX_ROWS: usize = 10_000;

/// The answer to a request whose reads may have met a damaged block of the state snapshot.
const DAMAGED_ANSWER: &str = "a block of the store's state snapshot is damaged, and what it held reads as missing, so this answer could be short; the graph is being replayed from the log: ask again";

impl Default for ServeConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        ServeConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 7700)),
            key: None,
            max_body_bytes: 16 * 1024 * 1024,
            max_in_flight: 256,
            workers: (cores * 2).max(2),
            queries_dir: None,
            dictionary_lag: Duration::from_secs(1),
            body_timeout: Duration::from_secs(30),
            max_connections: 512,
            header_timeout: Duration::from_secs(30),
            max_mcp_sessions: 256,
            uses_flush_after: crate::dynamics::usage::FLUSH_INTERVAL,
        }
    }
}

impl ServeConfig {
    pub fn with_addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }
    pub fn with_key(mut self, key: Option<String>) -> Self {
        self.key = key;
        self
    }

    /// Refuses what would expose the memory: a non-loopback address without a key, a key too
    /// short to resist guessing, limits of zero.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(k) = &self.key {
            if k.len() < MIN_KEY_BYTES {
                return Err(format!(
                    "the key is {} bytes; use at least {MIN_KEY_BYTES} (e.g. `openssl rand -hex 32`)",
                    k.len()
                ));
            }
        }
        if !self.addr.ip().is_loopback() && self.key.is_none() {
            return Err(format!(
                "{} is not a loopback address: serving an agent's memory beyond this machine needs --key-file",
                self.addr
            ));
        }
        if self.max_in_flight == 0
            || self.workers == 0
            || self.max_body_bytes == 0
            || self.max_connections == 0
            || self.max_mcp_sessions == 0
        {
            return Err(
                "max_in_flight, workers, max_body_bytes, max_connections and max_mcp_sessions must be at least 1"
                    .into(),
            );
        }
        Ok(())
    }
}

/// What every handler shares.
pub struct AppState {
    store: RwLock<Option<Arc<Store>>>,
    pub retriever: RetrieverCache,
    pub queries: SavedQueries,
    pub config: ServeConfig,
    pub metrics: metrics::Metrics,
    in_flight: Arc<Semaphore>,
    /// Bodies being received at once, `max_in_flight` at most: what they hold in memory is
    /// bounded as it was when a body was read inside its request's place.
    body_reads: Semaphore,
    workers: Semaphore,
    /// A replay of the graph from the log is under way ([`AppState::replay_damaged`]).
    replaying: Arc<std::sync::atomic::AtomicBool>,
    /// Cancelled when shutdown begins: ends MCP sessions, whose streams would otherwise keep
    /// the drain waiting.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// The MCP sessions open over HTTP, counted against `max_mcp_sessions` ([`admit`]).
    pub(crate) mcp_sessions: Arc<mcp::Sessions>,
    /// Places of the `GET /mcp` streams open at once ([`mcp_streams_for`]); each is held by
    /// its stream's body until the stream ends.
    mcp_streams: Arc<Semaphore>,
}

/// How many `GET /mcp` streams may be open at once with `max_connections` connections: a
/// quarter of them (at least one). A stream holds its connection for as long as its client
/// keeps it, so without a bound of its own a client's streams took every connection and the
/// server answered no one.
pub fn mcp_streams_for(max_connections: usize) -> usize {
    (max_connections / 4).max(1)
}

impl AppState {
    pub fn new(store: Store, config: ServeConfig) -> crate::Result<Arc<AppState>> {
        let queries = SavedQueries::builtin_and(config.queries_dir.as_deref())?;
        // The retrieval dictionary is built before the first request, not by it.
        let retriever = RetrieverCache::with_max_staleness(config.dictionary_lag);
        crate::Retriever::with_cache(&store, retriever.clone())?;
        Ok(Arc::new(AppState {
            store: RwLock::new(Some(Arc::new(store))),
            retriever,
            queries,
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
            body_reads: Semaphore::new(config.max_in_flight),
            workers: Semaphore::new(config.workers),
            replaying: Arc::default(),
            metrics: metrics::Metrics::default(),
            shutdown: tokio_util::sync::CancellationToken::new(),
            mcp_sessions: Arc::default(),
            mcp_streams: Arc::new(Semaphore::new(mcp_streams_for(config.max_connections))),
            config,
        }))
    }

    /// The open store (absent only while `compact` swaps it, or after shutdown).
    pub fn store(&self) -> Result<Arc<Store>, ApiError> {
        self.store
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| ApiError::busy("the store is being compacted or closed; retry"))
    }

    /// Runs `f` with the store on the blocking pool, one of `workers` at a time. A panic in
    /// `f` is answered 500 (and logged), never propagated. While the state snapshot the
    /// graph is read from is known to be damaged, what `f` answered may be short (a damaged
    /// block reads as missing): the answer is 500 `corrupt` instead, and the graph is
    /// replayed from the log beside the requests ([`AppState::replay_damaged`]), as the
    /// next write would have it.
    pub async fn blocking<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, ApiError> + Send + 'static,
    {
        let (answer, damaged) = self.run_blocking(f).await?;
        if damaged {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "corrupt",
                DAMAGED_ANSWER,
            ));
        }
        answer
    }

    /// [`AppState::blocking`] for a report of the store itself (`/v1/stats`, `/metrics`),
    /// which says whether damage was found and so is answered whatever it found.
    pub async fn blocking_report<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, ApiError> + Send + 'static,
    {
        self.run_blocking(f).await?.0
    }

    /// Runs `f` on the blocking pool; gives its answer and whether the snapshot is known to
    /// be damaged after it (a replay is then under way).
    async fn run_blocking<T, F>(&self, f: F) -> Result<(Result<T, ApiError>, bool), ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, ApiError> + Send + 'static,
    {
        let _turn = self
            .workers
            .acquire()
            .await
            .map_err(|_| ApiError::busy("the server is shutting down"))?;
        let store = self.store()?;
        let worker = Arc::clone(&store);
        let (answer, damaged) = match tokio::task::spawn_blocking(move || {
            let answer = match f(&worker) {
                // An internal error of a handle that refuses every call is that refusal
                // (helper-144: 500 `internal` after a failed sled commit).
                Err(e)
                    if e.status == StatusCode::INTERNAL_SERVER_ERROR
                        && worker.usable().is_err() =>
                {
                    Err(e.closed())
                }
                other => other,
            };
            (answer, worker.snapshot_damage_found())
        })
        .await
        {
            Ok(done) => done,
            Err(e) => {
                tracing::error!(error = %e, "a request's work panicked");
                return Err(ApiError::internal("the request's work failed unexpectedly"));
            }
        };
        if damaged {
            self.replay_damaged(store);
        }
        Ok((answer, damaged))
    }

    /// Replays the graph of `store` from the log on the blocking pool, unless a replay is
    /// under way: a server may write nothing for a long time, and until a write replays it
    /// every read would meet the damage.
    fn replay_damaged(&self, store: Arc<Store>) {
        if self
            .replaying
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let replaying = Arc::clone(&self.replaying);
        tokio::task::spawn_blocking(move || {
            match store.replay_if_damaged() {
                Ok(_) => tracing::info!("the graph is replayed from the log; answers are whole"),
                Err(e) => {
                    tracing::error!(error = %e, "the graph could not be replayed from the log")
                }
            }
            replaying.store(false, std::sync::atomic::Ordering::SeqCst);
        });
    }

    /// Takes the store out for an operation that needs it alone (`compact`), waiting up to
    /// `wait` for the requests holding it to finish; `put_store` returns it. New requests are
    /// told to retry meanwhile. The lock is not held while waiting: every request takes it
    /// (on a runtime thread), and with the runtime's threads parked on it the requests
    /// holding the store were never polled to their end (the server froze for `wait`).
    pub fn take_store(&self, wait: Duration) -> Result<Store, ApiError> {
        let taken = self.store.write().unwrap_or_else(|e| e.into_inner()).take();
        let Some(mut arc) = taken else {
            return Err(ApiError::busy("the store is being compacted or closed"));
        };
        let until = Instant::now() + wait;
        loop {
            match Arc::try_unwrap(arc) {
                Ok(store) => return Ok(store),
                Err(back) if Instant::now() >= until => {
                    *self.store.write().unwrap_or_else(|e| e.into_inner()) = Some(back);
                    return Err(ApiError::busy("requests still hold the store; retry"));
                }
                Err(back) => {
                    arc = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }

    pub fn put_store(&self, store: Store) {
        *self.store.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(store));
    }

    /// Closes the store: pending uses flushed, files closed. Returns whether it was the last
    /// holder (false: a request still holds it; it closes when that request ends).
    pub fn close(&self) -> bool {
        let taken = self.store.write().unwrap_or_else(|e| e.into_inner()).take();
        match taken.map(Arc::try_unwrap) {
            Some(Ok(store)) => {
                if let Err(e) = store.flush_usage() {
                    tracing::warn!(error = %e, "flushing uses at shutdown failed");
                }
                drop(store);
                true
            }
            Some(Err(_)) | None => false,
        }
    }
}

/// Counts a request and logs it.
async fn observe(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let method = req.method().to_string();
    let response = next.run(req).await;
    let took = started.elapsed();
    let status = response.status().as_u16();
    state
        .metrics
        .record(&route, metrics::method_label(&method), status, took);
    tracing::info!(
        target: "loci::serve",
        method = %method,
        route = %route,
        status,
        micros = took.as_micros() as u64,
        "request"
    );
    response
}

/// The answer to a request body over `limit` bytes.
fn too_large(limit: usize) -> Response {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the request body is over {limit} bytes, the server's limit"),
    )
    .into_response()
}

/// Reads the body whole ([`ServeConfig::body_timeout`], `max_body_bytes` at most), then gives
/// the request one of the `max_in_flight` places, or answers 503 when none is free. A place
/// taken before the body came was held by a client that sent it slowly, or never: four such
/// connections kept a server answering 503 for minutes. Bodies being received take places
/// of their own (`max_in_flight` of them, which bound their memory), so slow senders can
/// keep other bodies waiting for at most the timeout, and requests without a body, and
/// `/health`, not at all.
async fn admit(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    use http_body_util::BodyExt;
    if req.uri().path() == "/health" {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    // A compressed body read as it is was refused as "not UTF-8 text", and a plain one
    // labelled compressed was taken: the server reads bodies as sent, and says so.
    let encoding = (parts.headers.get(header::CONTENT_ENCODING))
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string())
        .filter(|v| !v.eq_ignore_ascii_case("identity"));
    if let Some(encoding) = encoding {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "Content-Encoding {}: this server takes bodies as sent, uncompressed",
                crate::error::quoted_excerpt(&encoding)
            ),
        )
        .into_response();
    }
    let limit = state.config.max_body_bytes;
    // A body declared longer than the limit is refused before any of it is read: it had held
    // a reading slot until the body timeout, waiting for bytes it would refuse.
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    // A request without a body (a GET) takes no place among the bodies being received.
    let reading = if axum::body::HttpBody::is_end_stream(&body) {
        None
    } else {
        match state.body_reads.try_acquire() {
            Ok(permit) => Some(permit),
            Err(_) => {
                let n = state.config.max_in_flight;
                return busy(
                    &state,
                    format!("the server is receiving {n} request bodies, its limit; retry"),
                );
            }
        }
    };
    let read = http_body_util::Limited::new(body, limit).collect();
    let read = tokio::time::timeout(state.config.body_timeout, read).await;
    drop(reading);
    let bytes = match read {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return too_large(limit),
        Ok(Err(e)) => {
            return ApiError::bad_input(format!("the request body could not be read: {e}"))
                .into_response()
        }
        Err(_) => {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                format!(
                    "the request body did not arrive within {} s",
                    state.config.body_timeout.as_secs_f64()
                ),
            )
            .into_response()
        }
    };
    // A byte-order mark before a JSON body (some Windows tools write one) is no part of it;
    // RFC 8259 lets a reader ignore it, and the CLI skips it in files.
    let bytes = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => {
            let rest = bytes.slice(bytes.len() - rest.len()..);
            parts
                .headers
                .insert(axum::http::header::CONTENT_LENGTH, rest.len().into());
            rest
        }
        None => bytes,
    };
    if let Some(answer) = mcp::unparsable(&parts, &bytes) {
        return answer;
    }
    if mcp::closes_a_session_not_held(&state, &parts).await {
        return ApiError::not_found("Not Found: Session not found").into_response();
    }
    if mcp::opens_a_session(&parts) {
        let open = state.mcp_sessions.sessions.read().await.len();
        if open >= state.config.max_mcp_sessions {
            return busy(
                &state,
                format!("the server holds {open} MCP sessions, its limit; close one (DELETE /mcp) or retry"),
            );
        }
    }
    let stream = if mcp::opens_a_stream(&parts) {
        match state.mcp_streams.clone().try_acquire_owned() {
            Ok(place) => Some(place),
            Err(_) => {
                let n = mcp_streams_for(state.config.max_connections);
                let mut refused = busy(
                    &state,
                    format!("the server holds {n} MCP streams (GET /mcp), its limit (a quarter of --max-connections); close one or retry"),
                );
                // The connection is closed with the answer: a client opening streams keeps
                // its connections, and each refused one had held a place until it idled out.
                refused.headers_mut().insert(
                    header::CONNECTION,
                    axum::http::HeaderValue::from_static("close"),
                );
                return refused;
            }
        }
    } else {
        None
    };
    let req = Request::from_parts(parts, axum::body::Body::from(bytes));
    if let Some(place) = stream {
        // Outside the requests in flight: a stream is answered at once and then lasts, held
        // to its own bound. Its place goes with its body, when the stream ends or its client
        // leaves.
        let answer = next.run(req).await;
        return answer.map(|body| {
            axum::body::Body::new(body.map_frame(move |frame| {
                let _held = &place;
                frame
            }))
        });
    }
    match state.in_flight.clone().try_acquire_owned() {
        Ok(permit) => {
            let r = next.run(req).await;
            drop(permit);
            r
        }
        Err(_) => {
            let n = state.config.max_in_flight;
            busy(
                &state,
                format!("the server is handling {n} requests, its limit; retry"),
            )
        }
    }
}

/// A 503 for a request beyond one of the server's limits, counted in its metrics.
fn busy(state: &AppState, message: String) -> Response {
    state.metrics.record_busy();
    ApiError::busy(message).into_response()
}

/// Byte-wise equality in time independent of where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u8 | u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// Every route but `/health` needs the key when the server has one.
async fn authorize(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let Some(key) = state.config.key.as_deref() else {
        return next.run(req).await;
    };
    if req.uri().path() == "/health" {
        return next.run(req).await;
    }
    let mut said = req.headers().get_all(header::AUTHORIZATION).iter();
    let (first, again) = (said.next(), said.next().is_some());
    // A token is bytes, compared as bytes: one that is not text is a token refused, not none.
    let given = first
        .and_then(|v| v.as_bytes().split_first_chunk::<7>())
        // A scheme's name is read in any case (RFC 9110, 11.1), and spaces may follow it.
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"bearer "))
        .map(|(_, key)| key.trim_ascii_start());
    if !again && constant_time_eq(given.unwrap_or(b""), key.as_bytes()) {
        return next.run(req).await;
    }
    // A 401 must say the scheme to answer with (RFC 9110, 15.5.2); a bearer token given and
    // refused is said to be the trouble, and a request without one is not (RFC 6750, 3.1).
    // Credentials given twice are a bad request: which one was meant is not guessed.
    let (refused, challenge) = match (again, given) {
        (true, _) => (
            ApiError::bad_input("the Authorization header is given more than once"),
            "Bearer realm=\"loci\", error=\"invalid_request\"",
        ),
        (false, None) => (ApiError::unauthorized(), "Bearer realm=\"loci\""),
        (false, Some(_)) => (
            ApiError::unauthorized(),
            "Bearer realm=\"loci\", error=\"invalid_token\"",
        ),
    };
    let mut refused = refused.into_response();
    refused.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static(challenge),
    );
    refused
}

/// The whole router: the JSON API, MCP at `/mcp`, and the layers above.
pub fn router(state: Arc<AppState>) -> axum::Router {
    // The layers below run inside each route's method router, which adds `allow` to what its
    // fallback answers: to a 401 too, telling a client without the key that the route exists
    // (helper-125). Said once routing is done, it is taken off a refusal for want of the key.
    axum::Router::new()
        .fallback_service(routed(state))
        .layer(axum::middleware::map_response(
            |mut r: axum::response::Response| async move {
                if r.status() == StatusCode::UNAUTHORIZED {
                    r.headers_mut().remove(header::ALLOW);
                }
                r
            },
        ))
}

/// The routes and the layers every request passes.
fn routed(state: Arc<AppState>) -> axum::Router {
    let mcp = mcp::http_service(state.clone());
    api::routes()
        .nest_service("/mcp", mcp)
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such route; see /openapi.json",
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method; see /openapi.json",
            )
        })
        .layer(axum::extract::DefaultBodyLimit::max(
            state.config.max_body_bytes,
        ))
        .layer(axum::middleware::from_fn_with_state(state.clone(), admit))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authorize,
        ))
        .layer(axum::middleware::from_fn(mcp::refusals_as_json_rpc))
        .layer(axum::middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// Serves until `shutdown` resolves, then drains the requests in flight (for at most
/// [`DRAIN_LIMIT`]) and closes the store; returns whether it could close it.
pub async fn serve(
    state: Arc<AppState>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<bool> {
    let app = router(state.clone());
    let flusher = tokio::spawn(flush_uses_while_serving(state.clone()));
    let token = state.shutdown.clone();
    let server = accept(listener, app, state.config.clone(), async move {
        shutdown.await;
        token.cancel();
    });
    // The drain is bounded: a request stuck past DRAIN_LIMIT after the signal does not keep
    // the process alive (committed batches are durable; the lock goes with the process).
    let began = state.shutdown.clone();
    tokio::select! {
        () = server => {},
        _ = async {
            began.cancelled().await;
            tokio::time::sleep(DRAIN_LIMIT).await;
        } => {
            tracing::warn!(
                target: "loci::serve",
                "requests still in flight {} s after the signal; stopping without them",
                DRAIN_LIMIT.as_secs()
            );
        }
    }
    // Requests have drained; the blocking work they started has ended with them.
    // The shutdown token ends it; a flush under way finishes first, so that the close
    // below finds the store free (an abort had left a running flush holding it).
    let _ = flusher.await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if state.close() {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                target: "loci::serve",
                "a request still holds the store; leaving it open (committed batches are durable)"
            );
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes the recorded uses once the first waiting one is `config.uses_flush_after` old,
/// until shutdown begins (the close writes what is left). A store flushes on the next
/// recorded read after that time: a server left idle had kept its uses in memory, its
/// rankings unlike a CLI's beside it, and lost them to a kill (helper-118).
pub async fn flush_uses_while_serving(state: Arc<AppState>) {
    flush_uses_until(state.clone(), state.shutdown.clone()).await;
}

/// [`flush_uses_while_serving`] until `stop` is cancelled.
pub(crate) async fn flush_uses_until(
    state: Arc<AppState>,
    stop: tokio_util::sync::CancellationToken,
) {
    let age = state.config.uses_flush_after;
    // Often enough that a use waits little past its age (a tenth of it: 33 s at most for
    // 30 s); seldom enough to cost nothing.
    let tick = (age / 10).max(Duration::from_millis(10));
    loop {
        tokio::select! {
            () = tokio::time::sleep(tick) => {}
            () = stop.cancelled() => return,
        }
        let Ok(store) = state.store() else {
            continue;
        };
        let flushed = tokio::task::spawn_blocking(move || store.flush_usage_older_than(age)).await;
        if let Ok(Err(e)) = flushed {
            tracing::warn!(target: "loci::serve", error = %e, "recorded uses could not be written; kept for later");
        }
    }
}

/// Accepts connections until `shutdown` resolves, then waits for those open to finish their
/// requests. At most `config.max_connections` are open at once, and each is closed when a
/// request's headers take longer than `config.header_timeout` to arrive, or when it waits
/// idle that long for its next request (hyper's header timer). `axum::serve` has neither: a
/// client that sent part of its headers and no more held its connection for ever, and
/// 20,000 of them ran the process out of file descriptors, unanswered by any route.
async fn accept(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    config: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let open = Arc::new(Semaphore::new(config.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let place = tokio::select! {
            place = Arc::clone(&open).acquire_owned() => place,
            () = &mut shutdown => break,
        };
        let Ok(place) = place else { break };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, most often: wait for some to close.
                tracing::error!(target: "loci::serve", error = %e, "accept error");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(target: "loci::serve", error = %e, "connection ended");
            }
            drop(place);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// How long a stop waits for the requests in flight.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// Resolves on SIGTERM or SIGINT.
pub async fn termination() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!(target: "loci::serve", "shutting down: draining requests in flight");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_whole() {
        assert!(constant_time_eq(b"0123456789abcdef", b"0123456789abcdef"));
        assert!(!constant_time_eq(b"0123456789abcdef", b"0123456789abcdeX"));
        assert!(!constant_time_eq(b"0123456789abcdef", b"0123456789abcde"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let c = ServeConfig::default().with_key(Some("0123456789abcdef-secret".into()));
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("secret") && shown.contains("<set>"),
            "{shown}"
        );
    }

    #[test]
    fn exposure_needs_a_key() {
        let c = ServeConfig::default();
        assert!(c.validate().is_ok());
        let open = c.clone().with_addr("0.0.0.0:7700".parse().unwrap());
        assert!(open.validate().unwrap_err().contains("loopback"));
        assert!(open
            .clone()
            .with_key(Some("short".into()))
            .validate()
            .unwrap_err()
            .contains("at least"));
        assert!(open
            .with_key(Some("0123456789abcdef0123".into()))
            .validate()
            .is_ok());
    }
}
