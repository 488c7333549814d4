//! Observations from an agent's tool calls, without an LLM: typed extractors turn one JSON
//! object per call into an `OBSERVATION` event with a type, an importance and a subject.
//!
//! A call is `{"tool": ..., "args": {...}, "result"?: ..., "error"?: ..., "exit_code"?: n,
//! "ts"?: n, "session"?: ...}` (`name`/`input`/`arguments`/`time` are accepted too; an exit
//! code or a time may be a float, whose whole part is read, or a string of digits, and a time
//! that is neither keeps the call raw with the reason). The table:
//!
//! | type | tools | subject | importance |
//! |---|---|---|---|
//! | `file_read` | Read, read_file, view, cat | `path` / `file_path` | 0.2 |
//! | `file_edited` | Edit, MultiEdit, str_replace, edit_file, apply_patch | the path | 0.5 |
//! | `file_created` | Write, create_file, write_file | the path | 0.6 |
//! | `command_run` | Bash, shell, run_command, exec, terminal | `command` | 0.3 |
//! | `command_failed` | a command with a non-zero exit code or an error | the command; the first error line | 0.8 |
//! | `search_performed` | Grep, Glob, search, grep, glob, WebSearch, web_search | `pattern` / `query` | 0.3 |
//! | `todo_updated` | TodoWrite, todo_write, update_todos | the number of items | 0.4 |
//! | `task_delegated` | Task, Agent, delegate, spawn_agent | `description` / `prompt` | 0.6 |
//! | `TOOL_CALL` (kept raw) | any other, or a line that is not JSON | none | 0.1 |
//!
//! A call no extractor takes (an unknown tool, a missing subject, a line that is not JSON) is
//! kept as a `TOOL_CALL` event with the raw line, and counted: ingestion never stops for it.
//! The importance is the event's salience. Grouping (a file edited three times is one line
//! marked x3, at its latest time) happens where observations are read, in the context
//! builder's observations block, so every call stays an event of its own.

use serde_json::Value as Json;

use crate::model::{kinds, EventDraft, Value};

/// Kind of a call no extractor took, kept raw.
pub const TOOL_CALL: &str = "TOOL_CALL";

/// The importance (salience) of a call kept raw: not understood, so it matters least. Every
/// tool-call event has its importance from this module's table, so a batch of them is never
/// analysed for novelty at ingest.
pub const RAW_IMPORTANCE: f32 = 0.1;

/// One typed observation.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub kind: &'static str,
    pub importance: f32,
    pub subject: String,
    pub detail: Option<String>,
}

const READ: &[&str] = &["read", "read_file", "view", "cat"];
const EDIT: &[&str] = &[
    "edit",
    "multiedit",
    "str_replace",
    "edit_file",
    "apply_patch",
];
const CREATE: &[&str] = &["write", "create_file", "write_file"];
const RUN: &[&str] = &["bash", "shell", "run_command", "exec", "terminal"];
const SEARCH: &[&str] = &["grep", "glob", "search", "websearch", "web_search"];
const TODO: &[&str] = &["todowrite", "todo_write", "update_todos"];
const DELEGATE: &[&str] = &["task", "agent", "delegate", "spawn_agent"];

fn field<'a>(v: &'a Json, names: &[&str]) -> Option<&'a Json> {
    names.iter().find_map(|n| v.get(*n))
}

/// An integer written as one, as a float (its whole part, toward zero) or as a string of
/// digits (a '-' before a negative one): harnesses write exit codes and times each way, and
/// `2.0` had been read as no exit code (success).
fn integer_of(v: &Json) -> Option<i64> {
    v.as_i64()
        .or_else(|| {
            // Whole parts past 2^53 are not exact: no time or exit code is that large.
            v.as_f64()
                .filter(|f| f.is_finite() && f.abs() < 9_007_199_254_740_992.0)
                .map(|f| f.trunc() as i64)
        })
        .or_else(|| {
            let s = v.as_str()?.trim();
            let digits = s.strip_prefix('-').unwrap_or(s);
            // `parse` would take a '+' too, which no harness writes and the docs do not say.
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        })
}

fn text_of<'a>(v: &'a Json, names: &[&str]) -> Option<&'a str> {
    field(v, names)
        .and_then(Json::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The observation a call makes, or why none.
pub fn extract(call: &Json) -> std::result::Result<Observation, String> {
    let tool = text_of(call, &["tool", "name", "tool_name"]).ok_or("no tool name")?;
    let args = field(call, &["args", "input", "arguments", "parameters"]).unwrap_or(&Json::Null);
    let lower = tool.to_lowercase();
    let is = |set: &[&str]| set.contains(&lower.as_str());
    let path = || text_of(args, &["path", "file_path", "filename", "file"]);
    let obs = |kind, importance, subject: &str| Observation {
        kind,
        importance,
        subject: subject.chars().take(300).collect(),
        detail: None,
    };
    if is(READ) {
        return path()
            .map(|p| obs("file_read", 0.2, p))
            .ok_or("no path".into());
    }
    if is(EDIT) {
        return path()
            .map(|p| obs("file_edited", 0.5, p))
            .ok_or("no path".into());
    }
    if is(CREATE) {
        return path()
            .map(|p| obs("file_created", 0.6, p))
            .ok_or("no path".into());
    }
    if is(RUN) {
        let command = text_of(args, &["command", "cmd", "script"]).ok_or("no command")?;
        let exit = field(call, &["exit_code", "exitCode", "status"]).and_then(integer_of);
        let error = text_of(call, &["error", "stderr"]);
        if exit.is_some_and(|c| c != 0) || error.is_some() {
            let first_line = error
                .or_else(|| text_of(call, &["result", "output"]))
                .and_then(|e| e.lines().map(str::trim).find(|l| !l.is_empty()))
                .map(|l| l.chars().take(200).collect::<String>());
            let mut o = obs("command_failed", 0.8, command);
            o.detail = Some(match (exit, first_line) {
                (Some(c), Some(l)) => format!("exit {c}: {l}"),
                (Some(c), None) => format!("exit {c}"),
                (None, Some(l)) => l,
                (None, None) => "failed".into(),
            });
            return Ok(o);
        }
        return Ok(obs("command_run", 0.3, command));
    }
    if is(SEARCH) {
        return text_of(args, &["pattern", "query", "q", "glob"])
            .map(|q| obs("search_performed", 0.3, q))
            .ok_or("no pattern or query".into());
    }
    if is(TODO) {
        let n = field(args, &["todos", "items"])
            .and_then(Json::as_array)
            .map_or(0, Vec::len);
        return Ok(obs("todo_updated", 0.4, &format!("{n} items")));
    }
    if is(DELEGATE) {
        return text_of(args, &["description", "prompt", "task"])
            .map(|d| obs("task_delegated", 0.6, d))
            .ok_or("no description".into());
    }
    Err(format!("unknown tool {tool:?}"))
}

/// The session of a tool-call event this module made, a typed observation or a call kept
/// raw: `Some` of its session (or `Some(None)`, a call without one), `None` for an event of
/// any other kind (the world's `OBSERVATION`s among them: they have no type and subject).
/// Each session's calls are its own: a context shows it only its own, and a summary, which
/// every session reads, notes none of them.
pub fn call_session(ev: &crate::model::Event) -> Option<Option<String>> {
    let session =
        |m: &crate::model::Props| m.get("session").and_then(Value::as_str).map(str::to_string);
    match &ev.payload {
        Value::Map(m)
            if ev.kind == kinds::OBSERVATION
                && ["type", "subject"]
                    .iter()
                    .all(|k| m.get(*k).and_then(Value::as_str).is_some()) =>
        {
            Some(session(m))
        }
        _ => raw_call_session(ev),
    }
}

/// [`call_session`] of a call kept raw ([`TOOL_CALL`]); `None` for any other event.
pub fn raw_call_session(ev: &crate::model::Event) -> Option<Option<String>> {
    (ev.kind == TOOL_CALL).then(|| match &ev.payload {
        Value::Map(m) => m.get("session").and_then(Value::as_str).map(str::to_string),
        _ => None,
    })
}

/// The event of a call at line `line`: a typed `OBSERVATION`, or the raw `TOOL_CALL` when no
/// extractor takes it (then the reason is returned too).
pub fn event_of_call(raw: &str, line: usize) -> (EventDraft, Option<String>) {
    // Parsed once: the call's fields and the extraction both read this value.
    let (json, failure) = match serde_json::from_str::<Json>(raw) {
        // A key given twice would be read as its last value (`"tool"` twice, a path twice):
        // the call is kept raw, with the reason, rather than guessed at. loci's own reading
        // of JSON refuses it; serde_json's keeps the last.
        Ok(v) => match serde_json::from_str::<Value>(raw) {
            Err(e) if crate::model::is_repeated_key(&e) => (None, Some(e.to_string())),
            _ => (Some(v), None),
        },
        Err(e) => (None, Some(format!("not JSON: {e}"))),
    };
    // A time that says no world time keeps the call raw, with the reason: it had been taken
    // as 0 without a word.
    let given_time = json
        .as_ref()
        .and_then(|c| field(c, &["ts", "time", "timestamp"]));
    let ts = match given_time {
        None => Ok(0),
        Some(t) => match integer_of(t) {
            // The store refuses it, and with it the whole file's batch.
            Some(ts) => {
                crate::store::time_out_of_range(ts).map_or(Ok(ts), |m| Err(format!("ts: {m}")))
            }
            None => Err(format!(
                "ts: {} is not a world time (an integer)",
                crate::error::excerpt(&t.to_string())
            )),
        },
    };
    // A call with a time of its own is told from a repeat of it by its line and text: it is
    // applied once however often its log is read, and two like lines of one log are two
    // calls. One without cannot be told from a repeat. The line goes first, so that a log's
    // keys rise with its lines and the key table takes them as appends (in hash order they
    // went to every page of it).
    let key = (given_time.is_some() && ts.is_ok()).then(|| {
        format!(
            "toolcall:{line:012}:{:016x}",
            crate::codec::fnv1a(raw.trim().as_bytes())
        )
    });
    let (call, failure) = match (&json, &ts) {
        (Some(_), Err(why)) => (None, Some(why.clone())),
        (Some(v), Ok(_)) => match extract(v) {
            Ok(o) => (Some((v, o)), None),
            Err(why) => (None, Some(why)),
        },
        (None, _) => (None, failure),
    };
    let ts = ts.unwrap_or(0);
    // A session id written as a number is that number's text (it had been dropped).
    let session = json
        .as_ref()
        .and_then(|c| field(c, &["session", "session_id"]))
        .and_then(|s| match s {
            Json::Number(n) => Some(n.to_string()),
            _ => s
                .as_str()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        });
    let (mut d, failure) = match call {
        Some((call, o)) => {
            let mut d = EventDraft::new(ts, "agent", kinds::OBSERVATION);
            let mut m = crate::model::Props::new();
            m.insert("type".into(), Value::from(o.kind));
            m.insert("subject".into(), Value::from(o.subject.as_str()));
            // As the f32 reads (0.2), not widened to f64 (0.20000000298023224).
            let importance = o.importance.to_string().parse().unwrap_or(0.0);
            m.insert("importance".into(), Value::Float(importance));
            if let Some(t) = text_of(call, &["tool", "name", "tool_name"]) {
                m.insert("tool".into(), Value::from(t));
            }
            if let Some(detail) = &o.detail {
                m.insert("detail".into(), Value::from(detail.as_str()));
            }
            if let Some(s) = &session {
                m.insert("session".into(), Value::from(s.as_str()));
            }
            d.payload = Value::Map(m);
            d.salience = Some(o.importance);
            (d, None)
        }
        None => {
            let mut d = EventDraft::new(ts, "agent", TOOL_CALL);
            let mut m = crate::model::Props::new();
            // Kept whole (bounded): the call is not lost, only not understood.
            let kept: String = raw.chars().take(4096).collect();
            m.insert("raw".into(), Value::from(kept.as_str()));
            if let Some(s) = &session {
                m.insert("session".into(), Value::from(s.as_str()));
            }
            d.payload = Value::Map(m);
            d.salience = Some(RAW_IMPORTANCE);
            (d, failure)
        }
    };
    d.idempotency_key = key;
    (d, failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(s: &str) -> std::result::Result<Observation, String> {
        extract(&serde_json::from_str(s).unwrap())
    }

    /// A float's whole part is its part before the point, toward zero, as documented: -0.5 is
    /// 0 (an exit code of success), where `floor` made it -1 (a failure); a string is digits,
    /// with a sign only for a negative, where "+102" was taken (a helper's probe).
    #[test]
    fn a_number_is_read_by_its_whole_part_and_a_string_by_its_digits() {
        let read = |s: &str| integer_of(&serde_json::from_str(s).unwrap());
        assert_eq!(read("-0.5"), Some(0));
        assert_eq!(read("-1.5"), Some(-1));
        assert_eq!(read("2.9"), Some(2));
        assert_eq!(read("\"102\""), Some(102));
        assert_eq!(read("\"-3\""), Some(-3));
        assert_eq!(read("\"+102\""), None);
        assert_eq!(read("\"1e3\""), None);
    }

    #[test]
    fn the_table_types_calls() {
        let o = ex(r#"{"tool":"Read","args":{"file_path":"src/main.rs"}}"#).unwrap();
        assert_eq!((o.kind, o.subject.as_str()), ("file_read", "src/main.rs"));
        assert_eq!(
            ex(r#"{"tool":"Edit","args":{"path":"a.rs"}}"#)
                .unwrap()
                .kind,
            "file_edited"
        );
        assert_eq!(
            ex(r#"{"tool":"Write","args":{"path":"b.rs"}}"#)
                .unwrap()
                .kind,
            "file_created"
        );
        let ok = ex(r#"{"tool":"Bash","args":{"command":"ls"},"exit_code":0}"#).unwrap();
        assert_eq!(ok.kind, "command_run");
        let failed = ex(
            r#"{"tool":"Bash","args":{"command":"cargo test"},"exit_code":101,"error":"\n error[E0425]: x\nmore"}"#,
        )
        .unwrap();
        assert_eq!(failed.kind, "command_failed");
        assert_eq!(failed.detail.as_deref(), Some("exit 101: error[E0425]: x"));
        assert_eq!(
            ex(r#"{"tool":"Grep","args":{"pattern":"fn main"}}"#)
                .unwrap()
                .kind,
            "search_performed"
        );
        assert_eq!(
            ex(r#"{"tool":"TodoWrite","args":{"todos":[1,2]}}"#)
                .unwrap()
                .subject,
            "2 items"
        );
        assert_eq!(
            ex(r#"{"tool":"Task","args":{"description":"review"}}"#)
                .unwrap()
                .kind,
            "task_delegated"
        );
        assert!(ex(r#"{"tool":"Frobnicate"}"#)
            .unwrap_err()
            .contains("unknown tool"));
        assert!(ex(r#"{"tool":"Read","args":{}}"#).is_err());
        assert!(ex(r#"{"args":{}}"#).is_err());
    }

    #[test]
    fn a_call_no_extractor_takes_is_kept_raw_with_its_reason() {
        let (d, why) = event_of_call(r#"{"tool":"Frobnicate","ts":5,"session":"s1"}"#, 1);
        assert_eq!(d.kind, TOOL_CALL);
        assert_eq!(d.ts, 5);
        assert!(why.unwrap().contains("Frobnicate"));
        assert_eq!(d.salience, Some(RAW_IMPORTANCE));
        let (d, why) = event_of_call("not json {", 1);
        assert_eq!(d.kind, TOOL_CALL);
        assert!(why.unwrap().starts_with("not JSON"));
        let (d, why) = event_of_call(r#"{"tool":"Read","args":{"path":"x"},"ts":9}"#, 1);
        assert_eq!((d.kind.as_str(), d.ts, why), ("OBSERVATION", 9, None));
    }

    /// A time, exit code or session written as another JSON type than expected is read as
    /// what it says, and a time that says no world time keeps the call raw with the reason:
    /// each had been taken silently as 0, success or nothing (session 25 probe 2).
    #[test]
    fn times_exit_codes_and_sessions_of_another_json_type_are_read_or_reported() {
        let (d, why) = event_of_call(
            r#"{"tool":"Read","args":{"path":"a"},"ts":1700000000.5}"#,
            1,
        );
        assert_eq!(
            (d.kind.as_str(), d.ts, why),
            ("OBSERVATION", 1_700_000_000, None)
        );
        let (d, why) = event_of_call(r#"{"tool":"Read","args":{"path":"a"},"ts":"1700"}"#, 1);
        assert_eq!((d.ts, why), (1700, None));
        // A time past the store's range (±2^61) too: it had stopped the whole file's ingest,
        // where every other unreadable call is kept raw (a helper's probe).
        for ts in [
            r#""2024-05-01T10:00:00Z""#,
            "18446744073709551615",
            "true",
            "9223372036854775807",
            "-3000000000000000000",
        ] {
            let (d, why) = event_of_call(
                &format!(r#"{{"tool":"Read","args":{{"path":"a"}},"ts":{ts}}}"#),
                1,
            );
            assert_eq!(d.kind, TOOL_CALL, "{ts}");
            assert!(
                why.as_deref().is_some_and(|w| w.starts_with("ts: ")),
                "{ts}: {why:?}"
            );
        }
        for exit in ["2.0", r#""1""#, "-1"] {
            let o = ex(&format!(
                r#"{{"tool":"Bash","args":{{"command":"make"}},"exit_code":{exit}}}"#
            ))
            .unwrap();
            assert_eq!(o.kind, "command_failed", "{exit}");
        }
        let (d, _) = event_of_call(r#"{"tool":"Read","args":{"path":"a"},"session":7}"#, 1);
        let Value::Map(m) = &d.payload else {
            panic!("{d:?}")
        };
        assert_eq!(m.get("session"), Some(&Value::from("7")));
    }
}
