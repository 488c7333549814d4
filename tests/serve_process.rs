//! `loci serve` as a process: where it listens, the lock a second server meets, the CLI reading
//! beside it, a clean stop on SIGTERM (uses flushed, the store closed), and no acknowledged
//! append lost to a kill -9.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_loci");

fn loci(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// Starts `loci [global...] serve` on a free port; returns the child, its address and the
/// rest of its standard error.
fn spawn_serve(global: &[&str], store: &str) -> (Child, String, BufReader<ChildStderr>) {
    let mut child = Command::new(BIN)
        .args(global)
        .args(["serve", "--store", store, "--addr", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (child, addr, err)
}

/// Starts `loci serve` on a free port; returns the child and its address.
fn start(store: &str) -> (Child, String) {
    let (child, addr, mut err) = spawn_serve(&[], store);
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
    });
    (child, addr)
}

/// One HTTP/1.1 request; the status and body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    Ok((status, body))
}

fn init_world(dir: &std::path::Path) -> String {
    let store = dir.join("store");
    let s = store.to_str().unwrap().to_string();
    let world = dir.join("w.jsonl");
    assert!(loci(&["world", "--out", world.to_str().unwrap()])
        .status
        .success());
    assert!(loci(&["init", "--store", &s]).status.success());
    assert!(loci(&["ingest", "--store", &s, world.to_str().unwrap()])
        .status
        .success());
    s
}

fn sigterm(child: &Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

#[test]
fn a_served_store_is_locked_readable_and_closed_cleanly_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let s = init_world(tmp.path());
    let (mut child, addr) = start(&s);

    // A second server, or a writer, meets the lock with the holder's pid.
    let second = loci(&["serve", "--store", &s, "--addr", "127.0.0.1:0"]);
    assert_eq!(second.status.code(), Some(5));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains(&format!("locked by process {}", child.id())),
        "{err}"
    );
    // Reading commands run beside it.
    let stats = loci(&["stats", "--store", &s, "--json"]);
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );

    let (status, body) = http(
        &addr,
        "POST",
        "/v1/events",
        "{\"ts\": 5, \"actor\": \"bot\", \"kind\": \"NOTE\"}\n",
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    // A query records uses, held in memory until the stop flushes them.
    let (status, _) = http(
        &addr,
        "POST",
        "/v1/query",
        r#"{"question": "where is home"}"#,
    )
    .unwrap();
    assert_eq!(status, 200);

    sigterm(&child);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(20)), Some(0));
    let out = loci(&["stats", "--store", &s, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["events"], 51,
        "49 world events, the append, and the uses flushed at the stop"
    );
    assert!(loci(&["replay", "--store", &s, "--verify"])
        .status
        .success());
}

#[test]
fn exposure_without_a_key_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let s = init_world(tmp.path());
    let out = loci(&["serve", "--store", &s, "--addr", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
    let key = tmp.path().join("key");
    std::fs::write(&key, "short\n").unwrap();
    let out = loci(&["serve", "--store", &s, "--key-file", key.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("at least 16") && !err.contains("short"),
        "the key is never shown: {err}"
    );
}

#[test]
fn no_acknowledged_append_is_lost_to_a_kill_9() {
    let tmp = tempfile::tempdir().unwrap();
    let s = init_world(tmp.path());
    let (mut child, addr) = start(&s);
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let addr = addr.clone();
            let acked = acked.clone();
            std::thread::spawn(move || {
                for i in 0.. {
                    let key = format!("w{w}-{i}");
                    let line = format!(
                        "{{\"ts\": 10, \"actor\": \"bot\", \"kind\": \"NOTE\", \"idempotency_key\": \"{key}\"}}\n"
                    );
                    match http(&addr, "POST", "/v1/events", &line) {
                        Ok((200, _)) => acked.lock().unwrap().push(key),
                        _ => return,
                    }
                }
            })
        })
        .collect();
    // Kill mid-load, once some appends are acknowledged (however slow a loaded machine is).
    let until = Instant::now() + Duration::from_secs(120);
    while acked.lock().unwrap().len() < 20 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 10,
        "only {} appends acknowledged",
        acked.len()
    );
    // Every acknowledged key is in the store: re-sending each one applies nothing.
    let again = tmp.path().join("again.jsonl");
    let lines: String = acked
        .iter()
        .map(|k| format!("{{\"ts\": 10, \"actor\": \"bot\", \"kind\": \"NOTE\", \"idempotency_key\": \"{k}\"}}\n"))
        .collect();
    std::fs::write(&again, lines).unwrap();
    let out = loci(&["ingest", "--store", &s, "--json", again.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["events"], 0, "an acknowledged append was lost: {v}");
    assert_eq!(v["skipped"], acked.len(), "{v}");
    assert!(loci(&["replay", "--store", &s, "--verify"])
        .status
        .success());
}

#[test]
fn mcp_over_stdio_ends_quietly_when_the_client_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let s = init_world(tmp.path());
    // No client at all: standard input closed at once.
    let out = Command::new(BIN)
        .args(["mcp", "--store", &s])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A client whose first message is not `initialize` is answered in the protocol (a
    // JSON-RPC error), and the session ends when it leaves.
    let out = common::run_with_stdin(
        BIN,
        &["mcp", "--store", &s],
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n",
    );
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.contains("\"error\"") && answer.contains("\"id\":1"),
        "{answer}"
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(loci(&["replay", "--store", &s, "--verify"])
        .status
        .success());
}

/// The answers of `loci mcp` on store `s` to `requests`, sent after the initialize exchange
/// as one client's lines, its input then closed.
fn mcp_session_answers(s: &str, requests: &[&str]) -> Vec<serde_json::Value> {
    let mut input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    ]
    .join("\n");
    for r in requests {
        input.push('\n');
        input.push_str(r);
    }
    input.push('\n');
    let out = common::run_with_stdin(BIN, &["mcp", "--store", s], input.as_bytes());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The answer of `answers` to the request of id `id`, which must be there.
fn answer_to(answers: &[serde_json::Value], id: u64) -> &serde_json::Value {
    answers
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("{id} unanswered: {answers:#?}"))
}

/// A tool's arguments of the wrong kind, or an argument it does not take, are the tool's
/// `bad_input` error naming the argument, as `/v1` names a body's field: rmcp's words were
/// "failed to deserialize parameters: invalid type: string \"lots\", expected usize", naming
/// none and with no code (a probe).
#[test]
fn mcp_tool_arguments_refused_are_bad_input_naming_the_argument() {
    let tmp = tempfile::tempdir().unwrap();
    let s = init_world(tmp.path());
    let answers = mcp_session_answers(
        &s,
        &[
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall","arguments":{"question":"x","budget":"lots"}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"context","arguments":{"budget":50,"bugdet":5}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"neighbours","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"recall","arguments":{"question":"x","limit":18446744073709551616}}}"#,
        ],
    );
    for (id, said) in [
        (
            2,
            "bad_input: arguments: budget: invalid type: string \"lots\"",
        ),
        (3, "bad_input: arguments: bugdet: unknown field `bugdet`"),
        (4, "bad_input: arguments: missing field `node`"),
        // Past u64: its kind was blamed ("invalid type: floating point", session 35 probe).
        (
            5,
            "bad_input: arguments: limit: integer 18446744073709551616 is beyond 64 bits",
        ),
    ] {
        let a = answer_to(&answers, id);
        assert_eq!(a["result"]["isError"], true, "{a}");
        let text = a["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(said), "{id}: {text}");
    }
}

/// The MCP `query` tool takes `explain`, as `/v1/run` and `loci run --explain` do: the plan
/// the parameters decide, not the rows (session 56 left it out of the tool).
#[test]
fn mcp_query_tool_explains_the_plan_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let s = init_world(tmp.path());
    let answers = mcp_session_answers(
        &s,
        &[
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query","arguments":{"name":"neighbors","params":{"node":"bot","depth":4},"explain":true}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"query","arguments":{"name":"neighbors","params":{"node":"bot","depth":4}}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"query","arguments":{"query":"MATCH (n:NPC) RETURN n.name","explain":true}}}"#,
        ],
    );
    let body = |id| {
        let a = answer_to(&answers, id);
        assert_ne!(a["result"]["isError"], true, "{a}");
        let text = a["result"]["content"][0]["text"].as_str().unwrap();
        serde_json::from_str::<serde_json::Value>(text).unwrap()
    };
    let plan = body(2);
    assert!(plan["rows"].is_null(), "{plan}");
    assert!(
        (plan["ops"].as_array().unwrap().iter()).any(|op| op["Expand"]["reach"] == true),
        "{plan}"
    );
    let rows = body(3);
    assert!(!rows["rows"].as_array().unwrap().is_empty(), "{rows}");
    let plan = body(4);
    assert!(plan["ops"].is_array() && plan["rows"].is_null(), "{plan}");
}

/// A request whose params are an array (JSON-RPC allows one; MCP's methods take objects), or a
/// `resources/read` without a string uri, is answered invalid params with its id: rmcp
/// answered the first with no id at all, so that its client waited forever, and the second
/// "-32601 resources/read", method not found (a helper's probe).
#[test]
fn mcp_requests_whose_params_rmcp_cannot_read_are_answered_with_their_id() {
    let tmp = tempfile::tempdir().unwrap();
    let s = init_world(tmp.path());
    let answers = mcp_session_answers(
        &s,
        &[
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":5}}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"loci://queries/find_trade"}}"#,
            // An initialize that does not read was "-32601 initialize" (session 35 probe).
            r#"{"jsonrpc":"2.0","id":10,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":5}}"#,
        ],
    );
    for (id, said) in [
        (5, "params"),
        (6, "params"),
        (7, "uri"),
        (8, "uri"),
        (10, "initialize params: missing field"),
        (11, "initialize params.protocolVersion: invalid type"),
    ] {
        let a = answer_to(&answers, id);
        assert_eq!(a["error"]["code"], -32602, "{a}");
        let message = a["error"]["message"].as_str().unwrap();
        assert!(message.contains(said), "{id}: {message}");
    }
    // A saved query's resource is JSON, as resources/list says (it read text/plain).
    let read = answer_to(&answers, 9);
    assert_eq!(
        read["result"]["contents"][0]["mimeType"], "application/json",
        "{read}"
    );
}

/// Over stdio, a line that is JSON by the grammar but no message loci can read is answered as
/// over HTTP (a parse error, -32700, or an invalid request, -32600, with its id where it has
/// one): rmcp dropped a request holding `1e400` or a lone surrogate without a word, and its
/// client waited forever (a helper's probe). Text that is not JSON at all is ignored, as the
/// SDKs ignore it. The session goes on and answers the next request.
#[test]
fn mcp_over_stdio_answers_lines_it_cannot_read() {
    let tmp = tempfile::tempdir().unwrap();
    let s = init_world(tmp.path());
    let mut child = Command::new(BIN)
        .args(["mcp", "--store", &s])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"x":1e400}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"x":"\ud800"}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","id":4}"#,
        "not json at all",
        // Nested past the reader's 128 levels: rmcp dropped it as it drops text.
        &format!(
            r#"{{"jsonrpc":"2.0","id":6,"method":"ping","params":{{"x":{}{}}}}}"#,
            "[".repeat(130),
            "]".repeat(130)
        ),
        // The last line without its line end, which rmcp dropped unanswered.
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
    ];
    let (last, rest) = lines.split_last().unwrap();
    for l in rest {
        writeln!(stdin, "{l}").unwrap();
    }
    write!(stdin, "{last}").unwrap();
    stdin.flush().unwrap();
    drop(stdin);
    // Answers are read on a thread, so that an output that never ends fails the test instead
    // of hanging it.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // All answers, to the end of the output: the refusals and rmcp's answers come by two
    // paths, in no set order.
    let mut answers: Vec<serde_json::Value> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => answers.push(serde_json::from_str(&line).unwrap()),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(_) => panic!("the output did not end; got {answers:#?}"),
        }
    }
    assert_eq!(wait_exit(&mut child, Duration::from_secs(30)), Some(0));
    let code = |a: &serde_json::Value| a["error"]["code"].as_i64();
    let parse_errors = answers.iter().filter(|a| code(a) == Some(-32700)).count();
    assert_eq!(parse_errors, 3, "{answers:#?}");
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 4 && code(a) == Some(-32600)),
        "a key given twice: {answers:#?}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 5 && a["result"]["tools"].is_array()),
        "{answers:#?}"
    );
}

#[test]
fn request_logs_are_plain_structured_lines_without_colour_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let s = init_world(tmp.path());
    let (mut child, addr, mut err) = spawn_serve(&["-v"], &s);
    let (status, _) = http(&addr, "GET", "/v1/stats", "").unwrap();
    assert_eq!(status, 200);
    sigterm(&child);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(20)), Some(0));
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("route=/v1/stats status=200"), "{rest}");
    assert!(
        !rest.contains('\u{1b}'),
        "colour codes in a piped log: {rest:?}"
    );
}
