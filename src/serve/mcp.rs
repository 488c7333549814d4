//! MCP (the Model Context Protocol) on the official Rust SDK, rmcp: the same tools over stdio
//! (`loci mcp`) and over streamable HTTP at `/mcp` on `loci serve`.
//!
//! Tools: `remember` (append an observation, or a whole event), `recall` (a context pack for a
//! question), `query` (a saved or inline planner query with parameters, or with `explain` the
//! plan it would run), `timeline`,
//! `neighbours`, `context` (the prompt context of a turn). The saved queries are resources
//! (`loci://queries/{name}`) whose contents give their parameters as a JSON schema. A tool that
//! fails answers a tool error (`isError`) with the same message the HTTP route would give.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Value as Json};

use super::api::{self, ContextRequest, QueryRequest, RunRequest};
use super::{ApiError, AppState};
use crate::model::{EventDraft, Props, Value};

const QUERY_URI: &str = "loci://queries/";

/// The MCP server: the tools over one shared [`AppState`].
#[derive(Clone)]
pub struct LociMcp {
    state: Arc<AppState>,
    tool_router: ToolRouter<LociMcp>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// What was observed, said or done, in words.
    pub text: Option<String>,
    /// The event's kind (default OBSERVATION).
    pub kind: Option<String>,
    /// Who observed it (default "agent").
    pub actor: Option<String>,
    /// World time (default: the latest event's).
    pub ts: Option<i64>,
    /// The agent session it belongs to.
    pub session: Option<String>,
    /// A whole event, as one line of `loci ingest --format events` (instead of `text`).
    pub event: Option<Json>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// The question.
    pub question: String,
    /// Tokens the pack may take.
    #[schemars(range(max = super::MAX_BUDGET))]
    pub budget: Option<usize>,
    /// Snippets at most (default 10).
    #[schemars(range(min = 1, max = super::MAX_ROWS))]
    pub limit: Option<usize>,
    /// Record what is returned as used (default true): items used often and recently rank
    /// higher.
    pub record: Option<bool>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryArgs {
    /// A saved query's name (see the resources).
    pub name: Option<String>,
    /// Planner query text (instead of `name`).
    pub query: Option<String>,
    /// Parameters by name. (A name given twice cannot be refused here: rmcp reads a tool's
    /// arguments into a map, which keeps the last, before they reach this type.)
    #[serde(default)]
    pub params: BTreeMap<String, Json>,
    /// The plan the query would run with these parameters, not its answer: which index
    /// or walk each step takes.
    #[serde(default)]
    pub explain: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimelineArgs {
    pub from: Option<i64>,
    pub to: Option<i64>,
    /// Events at most (default 100), the latest ones.
    #[schemars(range(min = 1, max = super::MAX_ROWS))]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NeighboursArgs {
    /// The start node's key.
    pub node: String,
    /// Hops, 1 to 4 (default 1).
    #[schemars(range(min = 1, max = 4))]
    pub depth: Option<u8>,
    /// Edges below this confidence are not followed (0 to 1; default 0).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_confidence: Option<f32>,
    pub relation: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextArgs {
    /// Tokens the context may take (at least what the pinned lines and instructions take).
    #[schemars(range(min = 1, max = super::MAX_BUDGET))]
    pub budget: usize,
    pub question: Option<String>,
    /// all (default), anchor or mainline.
    pub mode: Option<String>,
    pub session: Option<String>,
    /// Record what the snippets return as used (default true).
    pub record: Option<bool>,
}

/// The `/v1/query` request of a `recall`.
fn recall_request(a: RecallArgs) -> QueryRequest {
    QueryRequest::new(a.question, a.budget, a.limit).with_record(a.record)
}

/// The `/v1/context` request of a `context` call.
fn context_request(a: ContextArgs) -> ContextRequest {
    ContextRequest::new(a.budget, a.question, a.mode, a.session).with_record(a.record)
}

/// A tool's answer: the JSON as text, or the error as a tool error.
fn answer(r: Result<axum::Json<Json>, ApiError>) -> CallToolResult {
    match r {
        Ok(axum::Json(v)) => {
            let text = serde_json::to_string_pretty(&v).unwrap_or_default();
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(v);
            result
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
            "{}: {}",
            e.code, e.message
        ))]),
    }
}

/// Appends what `remember` was given. A refusal names the field as the caller spelt it: an
/// event's as `loci ingest` names it (`event: assert[0].to`), a text's argument (`kind`).
fn remembered(s: &crate::Store, a: RememberArgs) -> Result<crate::Commit, ApiError> {
    use crate::Error;
    let batch = remember_draft(s, a)?;
    batch.commit(s).map_err(|e| {
        match e {
            // The one event given: its line is no line of a file.
            Error::Input {
                file,
                field,
                message,
                ..
            } => Error::Input {
                file,
                line: 0,
                field,
                message,
            },
            Error::InvalidEvent {
                assertion: None,
                field,
                message,
                ..
            } => Error::InvalidArgument {
                name: field,
                message,
            },
            other => other,
        }
        .into()
    })
}

/// The event `remember` appends, as a batch that names an event's fields as its input does.
fn remember_draft(
    s: &crate::Store,
    a: RememberArgs,
) -> Result<crate::ingest::SourceBatch, ApiError> {
    let fields_of_a_text = a.text.is_some()
        || a.kind.is_some()
        || a.actor.is_some()
        || a.ts.is_some()
        || a.session.is_some();
    if a.event.is_some() && fields_of_a_text {
        return Err(ApiError::bad_input(
            "give \"event\" (a whole event) or \"text\" with its kind, actor, ts and session, not both",
        ));
    }
    if let Some(ev) = a.event {
        let line = serde_json::to_string(&ev).map_err(|e| ApiError::bad_input(e.to_string()))?;
        return Ok(crate::ingest::read_str(
            "event",
            &line,
            crate::ingest::Format::Events,
        )?);
    }
    let Some(text) = a.text else {
        return Err(ApiError::bad_input("give \"text\" or \"event\""));
    };
    crate::text::refuse_blank(&text, "text")?;
    let ts = match a.ts {
        Some(t) => t,
        None => s.latest_event_time()?.unwrap_or(0),
    };
    let mut d = EventDraft::new(
        ts,
        a.actor.unwrap_or_else(|| "agent".into()),
        a.kind
            .unwrap_or_else(|| crate::model::kinds::OBSERVATION.into()),
    );
    // Typed like a tool-call observation (`observe`), so the context's observations block
    // shows it grouped with the others.
    // The text once: its subject the first 300 characters (cut between words where there
    // is a space to cut at), and the rest apart. It had been both the subject and a `text`,
    // so search and the timeline showed it twice and its words counted twice in scoring. The
    // rest is not a `detail`, which the context's observations block shows whole: a long note
    // would not fit the block's share of a budget, and would be left out of it.
    let (subject, rest) = split_subject(&text, 300);
    let mut payload = Props::from([
        ("type".to_string(), Value::from("noted")),
        ("subject".to_string(), Value::from(subject)),
    ]);
    if !rest.is_empty() {
        payload.insert("rest".to_string(), Value::from(rest));
    }
    if let Some(session) = a.session {
        payload.insert("session".to_string(), Value::from(session.as_str()));
    }
    d.payload = Value::Map(payload);
    let mut batch = crate::ingest::SourceBatch::default();
    batch.events.push(d);
    Ok(batch)
}

/// `text` as a subject of at most `max` characters and the rest: cut at the last space
/// within them, or at `max` where a first word is longer; the space cut at is in neither.
fn split_subject(text: &str, max: usize) -> (&str, &str) {
    let Some((end, _)) = text.char_indices().nth(max) else {
        return (text, "");
    };
    match text[..end].rfind(' ') {
        Some(space) if space > 0 => (&text[..space], &text[space + 1..]),
        _ => (&text[..end], &text[end..]),
    }
}

#[tool_router]
impl LociMcp {
    pub fn new(state: Arc<AppState>) -> Self {
        LociMcp {
            state,
            tool_router: Self::tool_router(),
        }
    }

    /// A tool's answer: `work` on the store with the tool's arguments, or the refusal of
    /// its arguments.
    async fn call<T, F>(&self, args: Result<T, ApiError>, work: F) -> CallToolResult
    where
        T: Send + 'static,
        F: FnOnce(&crate::Store, T) -> Result<axum::Json<Json>, ApiError> + Send + 'static,
    {
        answer(match args {
            Ok(a) => self.state.blocking(move |s| work(s, a)).await,
            Err(refused) => Err(refused),
        })
    }

    #[tool(
        description = "Remember something: an observation in words (text), or a whole event (event). Appended to the memory's log as one event."
    )]
    async fn remember(&self, Parameters(a): Parameters<RememberArgs>) -> CallToolResult {
        self.call(a, |s, a| Ok(axum::Json(json!(remembered(s, a)?))))
            .await
    }

    #[tool(
        description = "Recall what the memory knows about a question: ranked snippets (facts, passages, events, entities), each with its provenance."
    )]
    async fn recall(&self, Parameters(a): Parameters<RecallArgs>) -> CallToolResult {
        let cache = self.state.retriever.clone();
        self.call(a, move |s, a| api::pack_of(s, cache, &recall_request(a)))
            .await
    }

    #[tool(
        description = "Run a planner query: a saved one by name (see the resources loci://queries/...) or query text, with parameters; with explain, the plan it would run instead of its rows."
    )]
    async fn query(&self, Parameters(a): Parameters<QueryArgs>) -> CallToolResult {
        let state = self.state.clone();
        self.call(a, move |s, a| {
            api::run_request(
                s,
                &state,
                &RunRequest::new(a.name, a.query, a.params, a.explain),
            )
        })
        .await
    }

    #[tool(description = "The latest events between two world times, oldest first.")]
    async fn timeline(&self, Parameters(a): Parameters<TimelineArgs>) -> CallToolResult {
        self.call(a, |s, a| api::timeline_of(s, a.from, a.to, a.limit))
            .await
    }

    #[tool(description = "The nodes within 1 to 4 hops of a node, with the edges followed.")]
    async fn neighbours(&self, Parameters(a): Parameters<NeighboursArgs>) -> CallToolResult {
        self.call(a, |s, a| {
            api::neighbors_of(s, &a.node, a.depth, a.min_confidence, a.relation)
        })
        .await
    }

    #[tool(
        description = "This turn's prompt context in a token budget: pinned items, the memory cover of summaries, snippets for the question, working memory, observations and the latest events."
    )]
    async fn context(&self, Parameters(a): Parameters<ContextArgs>) -> CallToolResult {
        self.call(a, |s, a| api::context_of(s, context_request(a)))
            .await
    }
}

/// A tool's arguments, read as `/v1` reads a body: arguments of the wrong kind, or one the
/// tool does not take, are the tool's `bad_input` error naming the argument
/// (`arguments: budget: invalid type ...`), where rmcp's own wrapper said "failed to
/// deserialize parameters", naming none. Named as rmcp's wrapper is because rmcp's `#[tool]`
/// takes a tool's input schema from its argument of that name.
struct Parameters<T>(Result<T, ApiError>);

impl<S, T: serde::de::DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, ErrorData> {
        let arguments = Json::Object(context.arguments.take().unwrap_or_default());
        Ok(Parameters(
            serde_path_to_error::deserialize(arguments).map_err(|e| {
                let path = e.path().to_string();
                let e = e.into_inner();
                match api::whole_number_too_large(&e.to_string()) {
                    Some(said) => api::refused_at_saying("arguments", &path, said),
                    None => api::refused_at("arguments", &path, e),
                }
            }),
        ))
    }
}

impl<T: schemars::JsonSchema> schemars::JsonSchema for Parameters<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// A saved query's parameters as a JSON schema.
fn params_schema(q: &crate::query::SavedQuery) -> Json {
    use crate::query::ParamType;
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for p in &q.params {
        let ty = match p.ty {
            ParamType::String => "string",
            ParamType::Int => "integer",
            ParamType::Float => "number",
            ParamType::Bool => "boolean",
        };
        let mut prop = json!({"type": ty});
        if let (Some(min), Some(max)) = (p.min, p.max) {
            prop["minimum"] = Json::from(min);
            prop["maximum"] = Json::from(max);
        }
        match &p.default {
            // Given as a value of its type, which a client may send back as it is; a default
            // its type cannot read (none the loader takes) is left as its text.
            Some(d) => {
                prop["default"] = match p.ty {
                    ParamType::String => None,
                    ParamType::Int => d.parse::<i64>().ok().map(Json::from),
                    ParamType::Float => d.parse::<f64>().ok().map(Json::from),
                    ParamType::Bool => d.parse::<bool>().ok().map(Json::from),
                }
                .unwrap_or_else(|| Json::from(d.as_str()))
            }
            None => required.push(Json::from(p.name.as_str())),
        }
        properties.insert(p.name.clone(), prop);
    }
    json!({"type": "object", "properties": properties, "required": required})
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for LociMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("loci", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "loci is this agent's memory. `recall` a question for ranked snippets with \
             provenance; `context` for a whole prompt context in a budget; `remember` what \
             happened; `query` runs planner queries (saved ones are the resources).",
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = self
            .state
            .queries
            .list()
            .iter()
            .map(|q| {
                Resource::new(format!("{QUERY_URI}{}", q.name), q.name.clone())
                    .with_description(q.description.clone())
                    .with_mime_type("application/json")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let name = request.uri.strip_prefix(QUERY_URI).unwrap_or("");
        let Some(q) = self.state.queries.get(name) else {
            return Err(ErrorData::resource_not_found(
                format!("no saved query at {}", crate::error::excerpt(&request.uri)),
                None,
            ));
        };
        let body = json!({
            "name": q.name,
            "description": q.description,
            "params": q.params,
            "params_schema": params_schema(q),
            "text": q.prepared.text,
        });
        let text = serde_json::to_string_pretty(&body).unwrap_or_default();
        // JSON, as resources/list says it is (rmcp's text contents say text/plain).
        let contents = ResourceContents::text(text, request.uri).with_mime_type("application/json");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

/// The JSON-RPC error that answers `message` before rmcp reads it, or `None` for one rmcp is
/// to read: text that is no JSON is a parse error (-32700, id null); JSON with a key given
/// twice anywhere in it (a tool's argument, an event's payload), which would reach the tools
/// as its last value where every other route refuses it, an invalid request (-32600); a
/// `tools/call` whose params are not a call's, invalid params (-32602); a request holding an
/// integer past every integer type, which rmcp would read as the nearest float, the tool's
/// `bad_input` result when it is in a tool's arguments ([`inexact_integer`]), else invalid
/// params. The last three carry the request's id. Over HTTP and over stdio alike
/// ([`super::stdio`]).
pub(super) fn refusal(message: &[u8]) -> Option<Json> {
    // One reading tells text that is no JSON from JSON with a key given twice.
    match serde_json::from_slice::<crate::model::Value>(message) {
        Err(e) if e.is_syntax() || e.is_eof() => Some(rpc_error(
            readable_id(message),
            -32700,
            format!("Parse error: {e}"),
        )),
        Err(e) if crate::model::is_repeated_key(&e) => Some(rpc_error(
            readable_id(message),
            -32600,
            format!("Invalid Request: {e}"),
        )),
        // Read once more as JSON (loci's own reading above keeps no JSON), for both checks.
        _ => {
            let read: Json = serde_json::from_slice(message).ok()?;
            match not_a_request(&read) {
                Some((id, why)) => Some(rpc_error(id, -32600, format!("Invalid Request: {why}"))),
                None => invalid_call(&read)
                    .map(|(id, why)| rpc_error(id, -32602, format!("Invalid params: {why}")))
                    .or_else(|| inexact_integer(message, &read)),
            }
        }
    }
}

/// The answer to a message holding an integer past every integer type
/// ([`crate::model::inexact_integer`]), which rmcp would read as the nearest float: in a tool's
/// arguments, the tool's `bad_input` result naming the argument, as a tool names any argument
/// it refuses; elsewhere, invalid params.
fn inexact_integer(message: &[u8], read: &Json) -> Option<Json> {
    // A notification is never answered.
    read.get("id")?;
    let (path, digits) = std::str::from_utf8(message)
        .ok()
        .and_then(crate::model::inexact_integer)?;
    let said = crate::model::inexact_integer_message(&digits);
    let id = readable_id(message);
    let argument = path.strip_prefix("params.arguments.");
    match argument.filter(|_| read.get("method").and_then(Json::as_str) == Some("tools/call")) {
        Some(argument) => Some(json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": format!("bad_input: arguments: {argument}: {said}")}],
            "isError": true,
        }})),
        // In the params, invalid params; elsewhere (the id), an invalid request.
        None if path.starts_with("params") => Some(rpc_error(
            id,
            -32602,
            format!("Invalid params: {path}: {said}"),
        )),
        None => Some(rpc_error(
            id,
            -32600,
            format!("Invalid Request: {path}: {said}"),
        )),
    }
}

/// A JSON-RPC error answer to request `id`.
pub(super) fn rpc_error(id: Json, code: i64, message: String) -> Json {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Whether `id` can be a request's id as JSON-RPC has it: a string or an integer.
fn is_an_id(id: &Json) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// The id of a request (a method and an id) that rmcp would answer with no id, so that its
/// client waited forever, and why: its `jsonrpc` is not "2.0", its method is no string, its
/// params neither an object nor an array, or its id an integer past i64 (rmcp's ids are i64);
/// a null id for an id that is no string or integer (past u64, a fraction, an object). A
/// message without an id is left to rmcp: a notification is never answered, and rmcp answers
/// one that is no message with a null id, as JSON-RPC has it.
fn not_a_request(message: &Json) -> Option<(Json, String)> {
    let method = message.get("method")?;
    let id = message.get("id")?;
    let shown = |v: &Json| crate::error::excerpt(&v.to_string());
    if !is_an_id(id) {
        // No id to give back: JSON-RPC answers such a request with a null one, where rmcp's
        // answer had none at all.
        return Some((
            Json::Null,
            format!("id {} is no string or integer", shown(id)),
        ));
    }
    let why = match (message.get("jsonrpc"), message.get("params")) {
        (None, _) => "no \"jsonrpc\": \"2.0\"".to_string(),
        (Some(v), _) if v != "2.0" => format!("\"jsonrpc\" is {}, expected \"2.0\"", shown(v)),
        _ if !method.is_string() => format!("\"method\" is {}, expected a string", shown(method)),
        (_, Some(p)) if !p.is_object() && !p.is_array() => {
            format!("\"params\" is {}, expected an object or an array", shown(p))
        }
        _ if !id.is_string() && !id.is_i64() => {
            format!("id {id} is past the largest this server takes, 2^63-1")
        }
        _ => return None,
    };
    Some((id.clone(), why))
}

/// The id of a message that cannot be read whole (a number past f64's range, a lone
/// surrogate, a key given twice, nesting past the reader's depth or text after it, all
/// elsewhere than in the id), or null: given back, the client's request is answered, where
/// under a null id it waited forever. The rest of the message is skipped unread (serde's
/// `IgnoredAny` takes any number and escape as text); of an id given twice the last is taken,
/// as the message's other readers take it.
fn readable_id(message: &[u8]) -> Json {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    /// The top-level object's id, its other values skipped (a map would hold them).
    struct IdOf;
    impl<'de> Visitor<'de> for IdOf {
        type Value = Json;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON-RPC message")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
            let mut id = Json::Null;
            while let Some(key) = map.next_key::<String>()? {
                if key == "id" {
                    id = Some(map.next_value::<Json>()?)
                        .filter(is_an_id)
                        .unwrap_or_default();
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(id)
        }
    }
    let mut reader = serde_json::Deserializer::from_slice(message);
    reader.deserialize_map(IdOf).unwrap_or(Json::Null)
}

/// The answer to a POST to `/mcp` whose JSON body does not parse, is no JSON-RPC message, or
/// is a tool call with a call's params wrong ([`refusal`], and -32600 for JSON that is no
/// message), with 400, given before the MCP service reads it, which answered 415 ("fail to
/// deserialize request body"), a status that blames the content type. `None` for anything
/// else, which the service answers itself.
pub(super) fn unparsable(
    parts: &axum::http::request::Parts,
    body: &[u8],
) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    let path = parts.uri.path();
    // The media type as rmcp judges it: its essence, in any case.
    let json_typed = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        });
    if parts.method != axum::http::Method::POST || !is_mcp_path(path) || !json_typed {
        return None;
    }
    // The body is read as rmcp reads it, so what passes here passes there.
    let answer = refusal(body).or_else(|| no_message(body))?;
    // A tool's result (its `bad_input`) is an answer, not a failed request.
    let status = match answer.get("result") {
        Some(_) => axum::http::StatusCode::OK,
        None => axum::http::StatusCode::BAD_REQUEST,
    };
    Some((status, axum::Json(answer)).into_response())
}

/// The answer to JSON that is no JSON-RPC message rmcp reads (`{}`, `[]`, `5`, `null`, a
/// batch): -32600 with a null id, as JSON-RPC has it, where rmcp's answer over stdio had no
/// id at all. `None` for a message.
pub(super) fn no_message(body: &[u8]) -> Option<Json> {
    let e = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(body).err()?;
    Some(rpc_error(
        Json::Null,
        -32600,
        format!("Invalid Request: {e}"),
    ))
}

/// Where in a request's params `e` found its fault: `params`, or `params.FIELD`.
fn at_params(e: &serde_path_to_error::Error<serde_json::Error>) -> String {
    match e.path().to_string().as_str() {
        "." => "params".to_string(),
        path => format!("params.{path}"),
    }
}

/// A request whose params rmcp cannot read: its id, and where and why. Params by position (an
/// array), which rmcp answered with no id; a `resources/read` without a string uri, or an
/// `initialize` or a `tools/call` whose params are not its own, which rmcp takes for a method
/// of its own and answered -32601, method not found, where the method is known and its params
/// are wrong (JSON-RPC's -32602).
fn invalid_call(message: &Json) -> Option<(Json, String)> {
    let method = message.get("method")?.as_str()?;
    // A notification is never answered, whatever its params.
    let id = message.get("id")?.clone();
    let params = message.get("params").cloned().unwrap_or(Json::Null);
    // JSON-RPC allows params by position; every method of MCP takes them by name, and rmcp
    // answered an array with no id, so that its client waited forever.
    if params.is_array() {
        return Some((
            id,
            format!("{method} params: an array, where MCP's methods take an object"),
        ));
    }
    // rmcp took a read without a string uri for a method it does not know (-32601).
    if method == "resources/read" && !params.get("uri").is_some_and(Json::is_string) {
        let uri = params.get("uri").map_or("missing".to_string(), |u| {
            crate::error::excerpt(&u.to_string())
        });
        return Some((
            id,
            format!("resources/read params.uri: {uri}, expected a string (loci://queries/NAME)"),
        ));
    }
    // rmcp took an initialize whose params it cannot read for a method it does not know
    // (-32601, "initialize").
    if method == "initialize" {
        let e = serde_path_to_error::deserialize::<_, rmcp::model::InitializeRequestParams>(params)
            .err()?;
        return Some((id, format!("initialize {}: {}", at_params(&e), e.inner())));
    }
    if method != "tools/call" {
        return None;
    }
    match serde_path_to_error::deserialize::<_, rmcp::model::CallToolRequestParams>(params) {
        Err(e) => Some((id, format!("tools/call {}: {}", at_params(&e), e.inner()))),
        // rmcp says "tool not found", naming neither the tool nor those there are.
        Ok(call) if !TOOLS.contains(&call.name.as_ref()) => Some((
            id,
            format!(
                "tools/call params.name: no tool named {}; the tools are {}",
                crate::error::quoted_excerpt(&call.name),
                TOOLS.join(", ")
            ),
        )),
        Ok(_) => None,
    }
}

/// The tools [`LociMcp`] serves (its router's, as a test checks), for a call of another.
const TOOLS: &[&str] = &[
    "context",
    "neighbours",
    "query",
    "recall",
    "remember",
    "timeline",
];

/// Error bodies this long at most are read to be answered as JSON-RPC (rmcp's are a line,
/// the server's own a short JSON object); a longer one, or one of no known length, passes
/// unread.
const MAX_REFUSAL_BYTES: usize = 64 * 1024;

/// An answer at `/mcp` that refuses a request before any JSON-RPC message was read, as a
/// JSON-RPC error (`-32600` for a 4xx, `-32000` for a 5xx, a 408 or a 429; a null id: none
/// was read), its status and headers kept: rmcp's refusals of the transport (406 without an `Accept` that takes JSON and event streams, 404
/// for an unknown session, 405, 415, 400 for a bad header) are plain text, and the server's
/// own (503 busy, 401, 413, a body that timed out) the API's JSON, neither of which an MCP
/// client reads (helper-118). The API's code goes in `data`, with the status. JSON-RPC
/// answers and successes pass as they are.
pub(super) async fn refusals_as_json_rpc(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use http_body_util::BodyExt;
    if !is_mcp_path(req.uri().path()) {
        return next.run(req).await;
    }
    let closing = req.method() == axum::http::Method::DELETE;
    let mut answer = next.run(req).await;
    // A session closed is answered 200, not rmcp's 202: the Python SDK's client takes
    // anything but 200 or 204 as a failure, and said "Session termination failed: 202" at
    // every close.
    if closing && answer.status() == axum::http::StatusCode::ACCEPTED {
        *answer.status_mut() = axum::http::StatusCode::OK;
    }
    let status = answer.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return answer;
    }
    // Only a body of a known length within the bound is read: a longer one, or one that
    // streams, is no refusal of ours or rmcp's, and passes unread.
    let size = axum::body::HttpBody::size_hint(answer.body()).upper();
    if size.is_none_or(|n| n > MAX_REFUSAL_BYTES as u64) {
        return answer;
    }
    let (mut parts, body) = answer.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        // A body that broke off says nothing; its status stands alone.
        Err(_) => axum::body::Bytes::new(),
    };
    let Some(rpc) = refusal_as_json_rpc(status, &bytes) else {
        return axum::response::Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    let body = serde_json::to_vec(&rpc).unwrap_or_default();
    parts.headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    parts
        .headers
        .insert(axum::http::header::CONTENT_LENGTH, body.len().into());
    axum::response::Response::from_parts(parts, axum::body::Body::from(body))
}

/// Whether `request` closes a session the server does not hold: a `DELETE` of the MCP
/// service naming one. rmcp accepts the close of any session (202), so a client told its
/// session was closed had not learned that it had none; MCP answers an unknown session with
/// 404 ([`super::admit`]).
pub(crate) async fn closes_a_session_not_held(
    state: &AppState,
    request: &axum::http::request::Parts,
) -> bool {
    if request.method != axum::http::Method::DELETE || !is_mcp_path(request.uri.path()) {
        return false;
    }
    let Some(id) = (request.headers.get("mcp-session-id")).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    !state.mcp_sessions.sessions.read().await.contains_key(id)
}

/// The JSON-RPC error an error answer `body` of `status` says ([`refusals_as_json_rpc`]);
/// `None` for a JSON-RPC message already.
fn refusal_as_json_rpc(status: axum::http::StatusCode, body: &[u8]) -> Option<Json> {
    let read: Option<Json> = serde_json::from_slice(body).ok();
    if read.as_ref().is_some_and(|v| v.get("jsonrpc").is_some()) {
        return None;
    }
    let api = read.as_ref().and_then(|v| v.get("error"));
    let (api_code, message) = match api {
        Some(e) => (
            e.get("code").and_then(Json::as_str).map(str::to_string),
            e.get("message").and_then(Json::as_str).map(str::to_string),
        ),
        None => (None, Some(String::from_utf8_lossy(body).trim().to_string())),
    };
    let message = message
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("refused").to_string());
    // A request refused as it stands is an invalid request (as the Python SDK's server and
    // client have it: its client gave -32600 for a 404 of a session); the server's state
    // (busy, failing) and the moment's (a body that timed out, too many requests) are a
    // server error.
    let transient = [
        axum::http::StatusCode::REQUEST_TIMEOUT,
        axum::http::StatusCode::TOO_MANY_REQUESTS,
    ];
    let rpc_code = match status.is_client_error() && !transient.contains(&status) {
        true => -32600,
        false => -32000,
    };
    let mut rpc = rpc_error(Json::Null, rpc_code, message);
    rpc["error"]["data"] = json!({"status": status.as_u16()});
    if let Some(code) = api_code {
        rpc["error"]["data"]["code"] = Json::from(code);
    }
    Some(rpc)
}

/// The MCP service mounted at `/mcp`: one server per session, ended at shutdown.
/// The MCP sessions open over HTTP (one set per server, whatever number of routers).
pub(crate) type Sessions = LocalSessionManager;

/// Whether `path` reaches the MCP service: `/mcp`, and every path under it (the router
/// nests the service there, and a client may write the address with a trailing slash).
pub(crate) fn is_mcp_path(path: &str) -> bool {
    path == "/mcp" || path.starts_with("/mcp/")
}

/// Whether `request` would open an MCP session: a POST to the MCP service that names none (an
/// `initialize`), which [`super::admit`] refuses past `max_mcp_sessions`.
pub(crate) fn opens_a_session(request: &axum::http::request::Parts) -> bool {
    request.method == axum::http::Method::POST
        && is_mcp_path(request.uri.path())
        && !request.headers.contains_key("mcp-session-id")
}

/// Whether `request` opens a stream of the server's messages: a `GET` of the MCP service,
/// which [`super::admit`] holds to [`super::mcp_streams_for`] at once.
pub(crate) fn opens_a_stream(request: &axum::http::request::Parts) -> bool {
    request.method == axum::http::Method::GET && is_mcp_path(request.uri.path())
}

pub fn http_service(state: Arc<AppState>) -> StreamableHttpService<LociMcp, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(state.shutdown.child_token())
        .with_max_request_body_bytes(state.config.max_body_bytes);
    if !state.config.addr.ip().is_loopback() {
        // Exposed only with a key (ServeConfig::validate); the Host check guards loopback
        // servers against DNS rebinding, which a key already stops.
        config = config.disable_allowed_hosts();
    }
    let factory_state = state.clone();
    StreamableHttpService::new(
        move || Ok(LociMcp::new(factory_state.clone())),
        Arc::clone(&state.mcp_sessions),
        config,
    )
}

/// Serves MCP over standard input and output until the client closes it: rmcp reads the
/// lines [`super::stdio`] lets through and writes its answers through it.
pub async fn serve_stdio(state: Arc<AppState>) -> std::io::Result<()> {
    let max_line = state.config.max_body_bytes;
    let stop = tokio_util::sync::CancellationToken::new();
    let flusher = tokio::spawn(super::flush_uses_until(state.clone(), stop.clone()));
    let served = serve_stdio_lines(state, max_line).await;
    // A flush under way finishes before the caller closes the store.
    stop.cancel();
    let _ = flusher.await;
    served
}

/// [`serve_stdio`]'s session, over lines of at most `max_line` bytes.
async fn serve_stdio_lines(state: Arc<AppState>, max_line: usize) -> std::io::Result<()> {
    super::stdio::serve(
        tokio::io::stdin(),
        tokio::io::stdout(),
        max_line,
        |transport| async move {
            use rmcp::service::ServerInitializeError as Init;
            use rmcp::ServiceExt;
            let running = match LociMcp::new(state).serve(transport).await {
                Ok(r) => r,
                // A client that leaves before initializing ends the session; it is not a
                // failure.
                Err(Init::ConnectionClosed(_)) => return Ok(()),
                Err(e @ Init::ExpectedInitializeRequest(_)) => {
                    return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
                }
                Err(e) => return Err(std::io::Error::other(e)),
            };
            running.waiting().await.map_err(std::io::Error::other)?;
            Ok(())
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// helper-100 (session 46): the tools' schemas declared no maximum of a budget or a recall's
    /// limit, and a limit's minimum as 0, where the server refuses 0 and more than its limits.
    #[test]
    fn the_tool_schemas_declare_the_limits_the_server_keeps() {
        let recall = serde_json::to_value(schemars::schema_for!(RecallArgs)).unwrap();
        let context = serde_json::to_value(schemars::schema_for!(ContextArgs)).unwrap();
        let limit = &recall["properties"]["limit"];
        assert_eq!(
            (limit["minimum"].as_u64(), limit["maximum"].as_u64()),
            (Some(1), Some(super::super::MAX_ROWS as u64)),
            "{limit}"
        );
        for budget in [
            &recall["properties"]["budget"],
            &context["properties"]["budget"],
        ] {
            assert_eq!(
                budget["maximum"].as_u64(),
                Some(super::super::MAX_BUDGET as u64),
                "{budget}"
            );
        }
        let openapi =
            serde_json::to_value(<super::super::api::ApiDoc as utoipa::OpenApi>::openapi())
                .unwrap();
        let schemas = &openapi["components"]["schemas"];
        for (schema, field, min, max) in [
            (
                "QueryRequest",
                "budget",
                Some(0),
                Some(super::super::MAX_BUDGET as u64),
            ),
            (
                "ContextRequest",
                "budget",
                Some(1),
                Some(super::super::MAX_BUDGET as u64),
            ),
            ("ForgetRequest", "budget", Some(1), None),
        ] {
            let f = &schemas[schema]["properties"][field];
            assert_eq!(
                (f["minimum"].as_u64(), f["maximum"].as_u64()),
                (min, max),
                "{schema}.{field}: {f}"
            );
        }
    }

    /// helper-100 (session 46): an argument past every integer type reached the tools as the
    /// nearest float.
    #[test]
    fn a_call_with_an_integer_no_type_holds_is_refused_with_its_id() {
        let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"remember","arguments":{"event":{"ts":1,"kind":"NOTE","payload":{"n":-99999999999999999999}}}}}"#;
        let answer = refusal(call).expect("refused");
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["result"]["isError"], true);
        let said = answer["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            said.starts_with(
                "bad_input: arguments: event.payload.n: integer -99999999999999999999"
            ),
            "{said}"
        );
        let elsewhere = br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"recall","arguments":{"question":"x"},"_meta":{"n":99999999999999999999}}}"#;
        let answer = refusal(elsewhere).expect("refused");
        assert_eq!(
            (answer["id"].as_i64(), answer["error"]["code"].as_i64()),
            (Some(8), Some(-32602))
        );
        let fine = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"remember","arguments":{"text":"x","n":12345678901234567890.5}}}"#;
        assert!(refusal(fine).is_none_or(|a| !a.to_string().contains("beyond 64 bits")));
    }

    /// `remember` with a whole event and a text had kept the event and dropped the text
    /// without a word (a helper's probe): one or the other is taken, both are refused.
    #[test]
    fn remember_takes_an_event_or_a_text_not_both() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::create(dir.path(), crate::BackendKind::Redb).unwrap();
        let args = |text: Option<&str>, event: Option<Json>| RememberArgs {
            text: text.map(str::to_string),
            kind: None,
            actor: None,
            ts: None,
            session: None,
            event,
        };
        let event = serde_json::json!({"ts": 5, "kind": "NOTE", "actor": "bot"});
        let both = remember_draft(&store, args(Some("saw a creeper"), Some(event.clone())));
        let e = both.expect_err("both refused");
        assert!(e.message.contains("not both"), "{}", e.message);
        assert_eq!(
            remember_draft(&store, args(None, Some(event)))
                .unwrap()
                .events
                .len(),
            1
        );
        let text = remember_draft(&store, args(Some("saw a creeper"), None)).unwrap();
        assert_eq!(text.events[0].kind, crate::model::kinds::OBSERVATION);
        // A blank text is named as given and empty; the refusal had said to give a text.
        let blank = remember_draft(&store, args(Some(" "), None)).expect_err("blank refused");
        assert!(
            blank.message.contains("text:") && blank.message.contains("empty"),
            "{}",
            blank.message
        );
        let neither = remember_draft(&store, args(None, None)).expect_err("nothing refused");
        assert!(neither.message.contains("give"), "{}", neither.message);
    }

    /// A remembered text is in its event once: it had been both the `subject` (its first 300
    /// characters) and the `text`, so search and the timeline showed "hello world hello
    /// world", and its words counted twice in full-text scoring (helper-95). A longer text is
    /// cut between words: the subject, then the rest apart from it (not as a `detail`, which
    /// the context's observations block shows whole: helper-96).
    #[test]
    fn a_remembered_text_is_in_its_event_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::create(dir.path(), crate::BackendKind::Redb).unwrap();
        let args = |text: &str| RememberArgs {
            text: Some(text.to_string()),
            kind: None,
            actor: None,
            ts: None,
            session: None,
            event: None,
        };
        let short = remember_draft(&store, args("saw a creeper")).unwrap();
        assert_eq!(short.events[0].text().matches("creeper").count(), 1);
        let words: Vec<String> = (0..120).map(|i| format!("w{i}")).collect();
        let long = words.join(" ");
        let draft = &remember_draft(&store, args(&long)).unwrap().events[0];
        let indexed = draft.text();
        for w in &words {
            let n = indexed.split_whitespace().filter(|t| t == w).count();
            assert_eq!(n, 1, "{w} in {indexed}");
        }
        let field = |k: &str| match &draft.payload {
            Value::Map(m) => m.get(k).and_then(Value::as_str).unwrap_or("").to_string(),
            _ => String::new(),
        };
        assert!(field("subject").chars().count() <= 300);
        assert_eq!(format!("{} {}", field("subject"), field("rest")), long);
        assert_eq!(
            field("detail"),
            "",
            "the observations block shows a detail whole"
        );
    }

    /// What `remember` refuses in an event is named as the event's field (`assert[0].to`),
    /// as `loci ingest` and `/v1/events` name it; it had said "event 1 of the batch,
    /// assertion 1" (a helper's probe). A text's refusal names the argument.
    #[test]
    fn remember_names_a_refused_field_as_the_event_or_the_arguments_spell_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::create(dir.path(), crate::BackendKind::Redb).unwrap();
        let event = serde_json::json!({"ts": 5, "kind": "NOTE", "actor": "bot", "assert": [
            {"op": "edge", "from": "a", "relation": "R", "to": "b"}]});
        let args = RememberArgs {
            text: None,
            kind: None,
            actor: None,
            ts: None,
            session: None,
            event: Some(event),
        };
        let e = remembered(&store, args).expect_err("an edge between no nodes");
        assert!(e.message.starts_with("event: assert[0]."), "{}", e.message);
        let args = RememberArgs {
            text: Some("saw a creeper".into()),
            kind: Some("K".repeat(100_000)),
            actor: None,
            ts: None,
            session: None,
            event: None,
        };
        let e = remembered(&store, args).expect_err("a kind too long");
        assert!(e.message.contains("kind: "), "{}", e.message);
        assert!(!e.message.contains("of the batch"), "{}", e.message);
        assert_eq!(store.stats().events, 0);
    }

    /// A saved query's parameter defaults are given as values of their types, where the schema
    /// said `"default": "0.5"` of a number, and a client that filled it in was refused "takes a
    /// number, got the string" (a helper's probe).
    #[test]
    fn a_saved_querys_schema_gives_defaults_of_their_types() {
        let queries = crate::query::SavedQueries::builtin().unwrap();
        let find_trade = queries.get("find_trade").unwrap();
        let schema = params_schema(find_trade);
        assert_eq!(
            schema["properties"]["min_confidence"]["default"],
            json!(0.5),
            "{schema}"
        );
        let timeline = params_schema(queries.get("timeline").unwrap());
        assert_eq!(
            timeline["properties"]["from"]["default"],
            json!(i64::MIN),
            "{timeline}"
        );
        // A header's range is the schema's.
        let neighbors = params_schema(queries.get("neighbors").unwrap());
        let depth = &neighbors["properties"]["depth"];
        assert_eq!(
            (depth["minimum"].as_i64(), depth["maximum"].as_i64()),
            (Some(1), Some(4)),
            "{neighbors}"
        );
    }

    /// The `neighbours` tool's schema says the depths it takes, 1 to 4, where it said up to
    /// 255 and refused 5 (a helper's probe); and min_confidence's range, 0 to 1.
    #[test]
    fn the_neighbours_schema_gives_the_depths_it_takes() {
        let tools = LociMcp::tool_router().list_all();
        let tool = tools.iter().find(|t| t.name == "neighbours").unwrap();
        let props = &tool.input_schema["properties"];
        let depth = &props["depth"];
        assert_eq!(
            (depth["minimum"].as_u64(), depth["maximum"].as_u64()),
            (Some(1), Some(4)),
            "{depth}"
        );
        let timeline = tools.iter().find(|t| t.name == "timeline").unwrap();
        let limit = &timeline.input_schema["properties"]["limit"];
        assert_eq!(
            limit["maximum"].as_u64(),
            Some(super::super::MAX_ROWS as u64),
            "{limit}"
        );
        let min = &props["min_confidence"];
        assert_eq!(
            (min["minimum"].as_f64(), min["maximum"].as_f64()),
            (Some(0.0), Some(1.0)),
            "{min}"
        );
    }

    /// The tools a call of another is told of are the router's.
    #[test]
    fn the_tools_named_to_a_call_of_another_are_the_routers() {
        let mut routed: Vec<String> = LociMcp::tool_router()
            .list_all()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        routed.sort();
        assert_eq!(routed, TOOLS);
    }

    /// A tool's arguments are refused with a field they do not have, as the HTTP routes'
    /// bodies are: `record` had been ignored so (a misspelt `recrod` still is, silently).
    #[test]
    fn tool_arguments_with_an_unknown_field_are_refused() {
        let unknown = serde_json::json!({"question": "where is home", "recrod": false});
        assert!(serde_json::from_value::<RecallArgs>(unknown).is_err());
        let unknown = serde_json::json!({"budget": 100, "quesion": "where is home"});
        assert!(serde_json::from_value::<ContextArgs>(unknown).is_err());
        let unknown = serde_json::json!({"node": "base:first", "hops": 2});
        assert!(serde_json::from_value::<NeighboursArgs>(unknown).is_err());
    }

    /// `recall` and `context` take `record`, as `/v1/query` does: with `false` nothing they
    /// return is recorded as used. An unknown `record: false` had been ignored, and every
    /// recall recorded (a probe's finding).
    #[test]
    fn recall_and_context_asked_not_to_record_record_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::create(dir.path(), crate::BackendKind::Redb).unwrap();
        let world = crate::world::generate(&crate::world::WorldConfig::default());
        store.ingest(world.events).unwrap();
        let question = "who trades emeralds for sticks";
        let recall: RecallArgs =
            serde_json::from_value(serde_json::json!({"question": question, "record": false}))
                .unwrap();
        let pack = api::pack_of(&store, Default::default(), &recall_request(recall)).unwrap();
        assert!(
            !pack.0["snippets"].as_array().unwrap().is_empty(),
            "{}",
            pack.0
        );
        let context: ContextArgs = serde_json::from_value(
            serde_json::json!({"budget": 2000, "question": question, "record": false}),
        )
        .unwrap();
        let context = api::context_of(&store, context_request(context)).unwrap();
        assert!(
            context.0["text"].as_str().unwrap().contains("emerald"),
            "{}",
            context.0
        );
        assert_eq!(store.usage_pending(), 0);
        let recall: RecallArgs =
            serde_json::from_value(serde_json::json!({"question": question})).unwrap();
        let pack = api::pack_of(&store, Default::default(), &recall_request(recall)).unwrap();
        assert!(
            !pack.0["snippets"].as_array().unwrap().is_empty(),
            "{}",
            pack.0
        );
        assert!(
            store.usage_pending() > 0,
            "a recall records its uses by default"
        );
    }
}
