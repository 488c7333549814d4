//! MCP over standard input and output (`loci mcp`): the lines loci answers itself, and the
//! rest handed to rmcp.
//!
//! rmcp drops a line it cannot parse without a word (as the other official SDKs do, lest two
//! peers answer each other's errors forever; rmcp issue 938), and it cannot parse `1e400` or a
//! lone surrogate escape, which are JSON by its grammar all the same: a client that sent one
//! waited forever for its answer. It also read a key given twice as its last value, which
//! every HTTP route refuses. So each line that is JSON by the grammar is screened first
//! ([`super::mcp::refusal`], as a POST to `/mcp` is): a refused line is answered here (parse
//! error, invalid request, invalid params), any other, and text that is not JSON at all, goes
//! on to rmcp through an in-memory pipe; rmcp's answers come back through another, to be
//! written to standard output a whole line at a time between the refusals.

use std::future::Future;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// Bytes each in-memory pipe holds before its writer waits.
const PIPE_BYTES: usize = 1 << 16;

/// Answers held for standard output before the screen waits for them to be written.
const ANSWERS_QUEUED: usize = 64;

/// Runs `session` (rmcp's service, given its transport) over `input` and `output`, screening
/// every line of `input` of at most `max_line` bytes; a longer line is refused whole, never
/// held. Returns the session's result once it has ended and its answers are written.
pub async fn serve<S, F>(
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
    max_line: usize,
    session: S,
) -> std::io::Result<()>
where
    S: FnOnce((DuplexStream, DuplexStream)) -> F,
    F: Future<Output = std::io::Result<()>>,
{
    let (to_rmcp, rmcp_reads) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (refused, answers) = mpsc::channel(ANSWERS_QUEUED);
    let screening = tokio::spawn(screen(input, to_rmcp, refused, max_line));
    let (broke, output_broke) = tokio::sync::oneshot::channel();
    let writing = tokio::spawn(write_out(from_rmcp, answers, output, broke));
    let session = session((rmcp_reads, rmcp_writes));
    tokio::pin!(session);
    let result = tokio::select! {
        result = &mut session => result,
        // Err: the writer ended without the output breaking (the session is ending).
        gone = output_broke => {
            if gone.is_ok() {
                // The client closed our standard output: it has left, and no answer can reach
                // it. Its input is closed to the session here, which then ends, where it had
                // gone on until standard input ended and rmcp logged a failed answer for every
                // request still to come (the writer takes its answers and drops them).
                screening.abort();
            }
            session.await
        }
    };
    // A session that ended on its own (a client that never initialized) leaves the screen
    // waiting for a line that may never come; its refusals so far are queued.
    screening.abort();
    let written = writing.await.unwrap_or(Ok(()));
    result?;
    match written {
        // The client closed its end: it has left, which ends a session quietly.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Reads `input` line by line: a line [`super::mcp::refusal`] refuses, or one over `max_line`
/// bytes, is answered through `refused`; any other is passed on to rmcp whole. Ends at the end
/// of `input`, or when rmcp or the writer has gone.
async fn screen(
    input: impl AsyncRead + Unpin,
    mut to_rmcp: DuplexStream,
    refused: mpsc::Sender<Vec<u8>>,
    max_line: usize,
) {
    use tokio::io::AsyncReadExt;
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    let mut initializing = Initializing::default();
    loop {
        line.clear();
        // One byte past the limit tells a line of exactly `max_line` bytes from a longer one.
        let limit = u64::try_from(max_line)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        match (&mut input).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let screened = if line.len() > max_line && line.last() != Some(&b'\n') {
            if skip_rest_of_line(&mut input).await.is_err() {
                return;
            }
            Screened::Answer(too_long(max_line))
        } else {
            let message = message_of(&line);
            match serde_json::from_slice::<serde_json::Value>(message) {
                // Not JSON: rmcp ignores it, as the other SDKs do.
                Err(e) if (e.is_syntax() || e.is_eof()) && !is_json_beyond_the_reader(&e) => {
                    Screened::Pass
                }
                _ if is_blank(&line) => Screened::Pass,
                read => {
                    match super::mcp::refusal(message).or_else(|| super::mcp::no_message(message)) {
                        Some(a) => Screened::Answer(a.to_string().into_bytes()),
                        None => initializing.screen(read.ok()),
                    }
                }
            }
        };
        let passed = match screened {
            Screened::Answer(mut a) => {
                a.push(b'\n');
                refused.send(a).await.is_ok()
            }
            Screened::Drop => continue,
            // A blank line goes on too: rmcp skips it, as it always has. The input's last
            // line may lack its line end, and rmcp drops a line without one.
            Screened::Pass => {
                if line.last() != Some(&b'\n') {
                    line.push(b'\n');
                }
                to_rmcp.write_all(&line).await.is_ok()
            }
        };
        if !passed {
            return;
        }
    }
}

/// Whether the session has been asked to initialize: rmcp takes no other message first. A
/// notification before it (`notifications/initialized` sent early) ended `loci mcp` with exit
/// 3 and a debug dump of the message, and a request had an answer about a missing protocol
/// version (helper-118).
#[derive(Default)]
struct Initializing {
    asked: bool,
}

/// What the screen does with a line.
enum Screened {
    /// On to rmcp whole.
    Pass,
    /// Answered here, and not passed on.
    Answer(Vec<u8>),
    /// Dropped: a notification or an answer before the session's `initialize`.
    Drop,
}

impl Initializing {
    /// What becomes of a message (`read` as JSON, when it is) that no other rule refused: a
    /// request before `initialize` is refused, naming what comes first (a ping is answered,
    /// as MCP has it); a notification before it is dropped; the rest, and the `initialize`
    /// itself, pass.
    fn screen(&mut self, read: Option<serde_json::Value>) -> Screened {
        if self.asked {
            return Screened::Pass;
        }
        let Some(serde_json::Value::Object(read)) = read else {
            return Screened::Pass;
        };
        let method = read.get("method").and_then(serde_json::Value::as_str);
        // A request rmcp serves without an `initialize` (protocol 2026-07-28): discovery, or
        // one whose `_meta` names the protocol version and the client's capabilities. Once
        // one passes, rmcp is in its main loop, as after an `initialize`.
        let meta = read.get("params").and_then(|p| p.get("_meta"));
        let stateless = method == Some("server/discover")
            || meta.is_some_and(|m| {
                m.get("io.modelcontextprotocol/protocolVersion").is_some()
                    && m.get("io.modelcontextprotocol/clientCapabilities")
                        .is_some()
            });
        match (method, read.get("id")) {
            (Some("initialize"), Some(_)) => {
                self.asked = true;
                Screened::Pass
            }
            (Some(_), Some(_)) if stateless => {
                self.asked = true;
                Screened::Pass
            }
            // A notification (an `initialize` without an id among them, which rmcp reads as
            // one), or an answer, before `initialize`: nothing to answer, and rmcp ends the
            // session on any first message but a request it can serve.
            (Some(_), None) | (None, _) => Screened::Drop,
            // The one request MCP lets come first (a client's check that the server lives).
            (Some("ping"), Some(id)) => Screened::Answer(
                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})
                    .to_string()
                    .into_bytes(),
            ),
            (Some(method), Some(id)) => Screened::Answer(
                super::mcp::rpc_error(
                    id.clone(),
                    -32600,
                    format!(
                        "Invalid Request: {method} before the session is initialized; send \
                         `initialize` first (then `notifications/initialized`)"
                    ),
                )
                .to_string()
                .into_bytes(),
            ),
        }
    }
}

/// Whether `e` is serde_json's refusal of text that is JSON by its grammar but that its reader
/// cannot hold (a number past f64's range, a lone surrogate escape), or JSON but for bytes that
/// are no UTF-8 in a string. serde_json names these only in its message.
fn is_json_beyond_the_reader(e: &serde_json::Error) -> bool {
    let said = e.to_string();
    [
        "number out of range",
        "lone leading surrogate in hex escape",
        "unexpected end of hex escape",
        // JSON nested deeper than the reader follows (128 levels): rmcp drops it too.
        "recursion limit exceeded",
        // Bytes that are no UTF-8 in a string of a message otherwise JSON: its id is there to
        // be read and answered (-32700), as `/mcp` over HTTP answers the same body.
        "invalid unicode code point",
    ]
    .iter()
    .any(|m| said.starts_with(m))
}

/// Whether `line` holds nothing but white space (and a byte-order mark): no message to refuse.
fn is_blank(line: &[u8]) -> bool {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    line.iter().all(u8::is_ascii_whitespace)
}

/// The message a line holds, as rmcp reads it: without its line end, a carriage return before
/// it, or a byte-order mark. A blank line is no message to refuse.
fn message_of(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if is_blank(line) {
        // serde_json reads nothing as an early end of input: a parse error.
        b"null"
    } else {
        line
    }
}

/// Reads and drops the rest of an overlong line, through its line end.
async fn skip_rest_of_line(input: &mut BufReader<impl AsyncRead + Unpin>) -> std::io::Result<()> {
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(());
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(end) => {
                input.consume(end + 1);
                return Ok(());
            }
            None => {
                let n = chunk.len();
                input.consume(n);
            }
        }
    }
}

/// The invalid-request answer to a line over `max_line` bytes, which no message may be (the
/// same limit as a request body over HTTP).
fn too_long(max_line: usize) -> Vec<u8> {
    super::mcp::rpc_error(
        serde_json::Value::Null,
        -32600,
        format!("Invalid Request: a line of more than {max_line} bytes"),
    )
    .to_string()
    .into_bytes()
}

/// Writes rmcp's answers and the screen's refusals to `output`, each a whole line, until both
/// have ended.
async fn write_out(
    from_rmcp: DuplexStream,
    mut refused: mpsc::Receiver<Vec<u8>>,
    mut output: impl AsyncWrite + Unpin,
    broke: tokio::sync::oneshot::Sender<()>,
) -> std::io::Result<()> {
    let mut from_rmcp = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    let (mut rmcp_open, mut screen_open) = (true, true);
    // Once the output breaks, what is left to write is read and dropped, so that the session
    // ends without a failed write per answer; `broke` tells the caller to end it.
    let mut broke = Some(broke);
    let mut failed: Option<std::io::Error> = None;
    while rmcp_open || screen_open {
        let written = tokio::select! {
            // Cancel safe: a line read in part stays in `line` for the next turn.
            read = from_rmcp.read_until(b'\n', &mut line), if rmcp_open => {
                if read? == 0 {
                    rmcp_open = false;
                    // rmcp's last answer may lack its line end.
                    if line.is_empty() {
                        continue;
                    }
                }
                let written = write_line(&mut output, &line, failed.is_some()).await;
                line.clear();
                written
            }
            answer = refused.recv(), if screen_open => match answer {
                Some(a) => write_line(&mut output, &a, failed.is_some()).await,
                None => {
                    screen_open = false;
                    Ok(())
                }
            },
        };
        if let Err(e) = written {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(e);
            }
            if let Some(b) = broke.take() {
                let _ = b.send(());
            }
            failed = Some(e);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// Writes and flushes `bytes`, unless the output is `gone`.
async fn write_line(
    output: &mut (impl AsyncWrite + Unpin),
    bytes: &[u8],
    gone: bool,
) -> std::io::Result<()> {
    if gone {
        return Ok(());
    }
    output.write_all(bytes).await?;
    output.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the screen and writer over `input` with a session that echoes every line it is
    /// given as `{"echo": ...}`; returns what reached the output, line by line.
    fn through(input: &'static [u8], max_line: usize) -> Vec<String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (out_writer, mut out_reader) = tokio::io::duplex(1 << 20);
        rt.block_on(async move {
            let served = serve(
                input,
                out_writer,
                max_line,
                |(reads, mut writes)| async move {
                    let mut lines = BufReader::new(reads).lines();
                    while let Some(l) = lines.next_line().await? {
                        let echo = serde_json::json!({ "echo": l }).to_string();
                        writes.write_all(format!("{echo}\n").as_bytes()).await?;
                    }
                    Ok(())
                },
            );
            served.await.unwrap();
            let mut all = String::new();
            tokio::io::AsyncReadExt::read_to_string(&mut out_reader, &mut all)
                .await
                .unwrap();
            all.lines().map(str::to_string).collect()
        })
    }

    /// A client that closed loci's standard output has left: the session's input is closed,
    /// though standard input stays open, and it ends with every answer taken (and dropped),
    /// rather than go on answering into the closed pipe (rmcp logged one broken-pipe error for
    /// each request still to answer: 198 lines for 200 requests piped through `head -c 100`,
    /// helper-95).
    #[test]
    fn a_closed_output_ends_the_session() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // Standard input: one request, then open and silent.
            let (mut client, input) = tokio::io::duplex(1 << 10);
            client.write_all(b"{\"id\":1}\n").await.unwrap();
            // Standard output: closed by its reader.
            let (output, reader) = tokio::io::duplex(1 << 10);
            drop(reader);
            // The session (rmcp in `loci mcp`) ends at the end of its input, each answer
            // written: none fails, as none is logged.
            let ended_well = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = ended_well.clone();
            let answered = serve(input, output, 1 << 10, |(reads, mut writes)| async move {
                let mut lines = BufReader::new(reads).lines();
                while let Some(l) = lines.next_line().await? {
                    writes.write_all(format!("{l}\n").as_bytes()).await?;
                }
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            });
            let ended = tokio::time::timeout(std::time::Duration::from_secs(10), answered).await;
            assert!(matches!(ended, Ok(Ok(()))), "{ended:?}");
            assert!(ended_well.load(std::sync::atomic::Ordering::SeqCst));
            drop(client);
        });
    }

    #[test]
    fn lines_rmcp_cannot_read_are_answered_and_the_rest_passed_on_whole() {
        let out = through(
            b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"x\":1e400}\n\nnot json\n{\"x\":\"\\udc00\"}\n{\"id\":7,\"id\":7}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\r\n{\"id\":\"a\",\"x\":[1e400]}\n{\"x\":\"\\ud800\",\"id\":3}\n{\"id\":1e400}\n{\"id\":4,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n\
              {\"jsonrpc\":\"2.0\",\"id\":5,\"method\":5}\n\
              {\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\",\"params\":5}\n\
              {\"jsonrpc\":\"2.0\",\"id\":18446744073709551615,\"method\":\"ping\"}\n\
              {\"jsonrpc\":\"2.0\",\"id\":10,\"id\":11,\"method\":\"ping\",\"x\":1e400}\n\
              {\"x\":1e400,\"id\":12,\"id\":13}\n\
              {\"jsonrpc\":\"2.0\",\"id\":18446744073709551616,\"method\":\"ping\"}\n\
              {\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}\n\
              {\"jsonrpc\":\"2.0\",\"id\":40,\"method\":\"tools/call\",\"params\":{\"name\":\"recal\"}}\n",
            1024,
        );
        let mut passed: Vec<&str> = Vec::new();
        let mut codes = Vec::new();
        for l in &out {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            match v.get("echo") {
                Some(e) => passed.push(match e.as_str().unwrap() {
                    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}" => "initialize",
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}" => "1",
                    "" => "blank",
                    "not json" => "not json",
                    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\r"
                    | "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}" => "2",
                    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}" => {
                        "notification"
                    }
                    other => panic!("{other}"),
                }),
                None => codes.push((v["id"].clone(), v["error"]["code"].as_i64().unwrap())),
            }
        }
        // Text that is no JSON at all goes on to rmcp, which ignores it.
        assert_eq!(
            passed,
            ["initialize", "1", "blank", "not json", "2", "notification"],
            "{out:?}"
        );
        // A call of a tool there is not names it and the tools there are (a new user's
        // probe: rmcp said "tool not found").
        let unknown = out
            .iter()
            .find(|l| l.contains("\"id\":40"))
            .expect("the unknown tool's call answered");
        assert!(
            unknown.contains("no tool named \\\"recal\\\"") && unknown.contains("recall"),
            "{unknown}"
        );
        codes.sort_by_key(|c| c.1);
        // An id that can be read is given back, so that the client's request is answered
        // (a helper's probe: it waited for an answer to its id forever), and so is a request
        // rmcp answers with no id: without `"jsonrpc": "2.0"`, a method or params of the
        // wrong kind, an id past i64; an id that is no string or integer (past u64, a
        // fraction) is answered with a null id, as JSON-RPC has it, where rmcp's answer had no
        // id at all. Of an id given twice, the last is the message's.
        assert_eq!(
            codes,
            [
                (serde_json::Value::Null, -32700),
                (serde_json::Value::Null, -32700),
                (serde_json::json!("a"), -32700),
                (serde_json::json!(3), -32700),
                (serde_json::Value::Null, -32700),
                (serde_json::json!(13), -32700),
                (serde_json::json!(40), -32602),
                (serde_json::json!(7), -32600),
                (serde_json::json!(4), -32600),
                (serde_json::json!(5), -32600),
                (serde_json::json!(6), -32600),
                (serde_json::json!(18446744073709551615u64), -32600),
                (serde_json::json!(11), -32600),
                (serde_json::Value::Null, -32600),
                (serde_json::Value::Null, -32600)
            ],
            "{out:?}"
        );
    }

    /// Found by the session 35 probe: JSON that is no JSON-RPC message was answered by rmcp
    /// with no id at all, where JSON-RPC gives a null one (as `/mcp` over HTTP did).
    #[test]
    fn json_that_is_no_message_is_answered_with_a_null_id() {
        let out = through(
            b"[]\n{}\n5\n\"x\"\nnull\n[{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"ping\"}]\n\n",
            1024,
        );
        assert_eq!(out.len(), 7, "{out:?}");
        for l in &out[..6] {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v.get("id"), Some(&serde_json::Value::Null), "{l}");
            assert_eq!(v["error"]["code"], -32600, "{l}");
        }
        assert!(out[6].contains("echo"), "a blank line goes on: {out:?}");
    }

    /// helper-118 (session 53): a request with bytes that are no UTF-8 inside a string went
    /// on to rmcp, which dropped it: the client waited for ever, where `/mcp` over HTTP
    /// answers the same body -32700 with its id.
    #[test]
    fn a_line_with_bytes_that_are_no_utf8_is_answered_with_its_id() {
        let out = through(
            b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"recall\",\"arguments\":{\"question\":\"a\xff\xfe\"}}}\n",
            1024,
        );
        assert_eq!(out.len(), 1, "{out:?}");
        let v: serde_json::Value = serde_json::from_str(&out[0]).unwrap();
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (serde_json::json!(9), serde_json::json!(-32700)),
            "{v}"
        );
    }

    /// helper-118 (session 53): a notification before `initialize` ended `loci mcp` (exit 3,
    /// a debug dump of the message), and a request before it was answered about a missing
    /// protocol version. Now the notification is dropped, a ping answered, any other request
    /// refused naming what comes first, and the `initialize` after them goes on.
    #[test]
    fn messages_before_initialize_are_dropped_answered_or_refused() {
        let out = through(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n\
              {\"jsonrpc\":\"2.0\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n\
              {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n\
              {\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}\n\
              {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\
              {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n\
              {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n\
              {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
            1024,
        );
        let read: Vec<serde_json::Value> = out
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(read.len(), 4, "{out:?}");
        assert_eq!(
            read[0],
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {}})
        );
        assert_eq!(
            (read[1]["id"].clone(), read[1]["error"]["code"].clone()),
            (serde_json::json!(2), serde_json::json!(-32600))
        );
        let said = read[1]["error"]["message"].as_str().unwrap();
        assert!(
            said.contains("tools/list before the session is initialized"),
            "{said}"
        );
        // The rest reached the session: the `initialize`, and the notification after it.
        assert!(
            read[2]["echo"].as_str().unwrap().contains("\"initialize\""),
            "{out:?}"
        );
        assert!(
            read[3]["echo"]
                .as_str()
                .unwrap()
                .contains("notifications/initialized"),
            "{out:?}"
        );
    }

    /// helper-119: a request rmcp serves without an `initialize` (discovery, protocol
    /// 2026-07-28) goes on to it, and what follows it too.
    #[test]
    fn a_request_served_without_initialize_goes_on() {
        let out = through(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n",
            1024,
        );
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out.iter().all(|l| l.contains("echo")), "{out:?}");
    }

    #[test]
    fn a_line_over_the_limit_is_refused_whole_and_the_next_one_read() {
        // The next line is a ping, which the screen answers itself before `initialize` (any
        // message that would reach the session is longer than this limit).
        let out = through(
            b"{\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n",
            48,
        );
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out
            .iter()
            .any(|l| l.contains("-32600") && l.contains("more than 48 bytes")));
        assert!(out
            .iter()
            .any(|l| l.contains("\"id\":3") && l.contains("\"result\":{}")));
    }
}
