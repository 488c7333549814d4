//! Observations from tool calls: typed, importance as salience, a call no extractor takes kept
//! raw and counted (never stopping the ingest), grouped in the context's observations block
//! (x3, latest time), and sessions kept apart.

use loci::context::{self, ContextOptions};
use loci::ingest::{self, Format};
use loci::observe::TOOL_CALL;
use loci::{BackendKind, Store};

const CALLS: &str = r#"{"tool":"Edit","args":{"path":"src/a.rs"},"ts":1,"session":"s1"}
{"tool":"Edit","args":{"path":"src/a.rs"},"ts":2,"session":"s1"}
{"tool":"Read","args":{"file_path":"src/b.rs"},"ts":3,"session":"s1"}
{"tool":"Bash","args":{"command":"cargo test"},"exit_code":101,"error":"error[E0425]: cannot find value","ts":4,"session":"s1"}
{"tool":"Edit","args":{"path":"src/a.rs"},"ts":5,"session":"s1"}
{"tool":"Edit","args":{"path":"secret/plan.md"},"ts":6,"session":"s2"}
{"tool":"Frobnicate","args":{},"ts":7,"session":"s1"}
this line is not JSON
{"tool":"Read","ts":9,"session":"s1"}
"#;

fn observations(store: &Store, session: Option<&str>) -> Vec<String> {
    let mut o = ContextOptions::with_budget(2000);
    o.session = session.map(str::to_string);
    let c = context::build_context(store, &o).unwrap();
    c.sections
        .iter()
        .find(|s| s.name == "observations")
        .unwrap()
        .lines
        .iter()
        .map(|l| l.text.clone())
        .collect()
}

#[test]
fn tool_calls_become_typed_observations_grouped_per_session() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let batch = ingest::read_str("calls.jsonl", CALLS, Format::Toolcalls).unwrap();
    assert_eq!(batch.lines, 9);
    let reasons: Vec<&str> = batch.unextracted.iter().map(|u| u.why.as_str()).collect();
    assert_eq!(
        batch.unextracted.iter().map(|u| u.line).collect::<Vec<_>>(),
        [7, 8, 9]
    );
    assert!(reasons[0].contains("Frobnicate") && reasons[1].starts_with("not JSON"));
    let c = batch.commit(&store).unwrap();
    assert_eq!(c.events, 9, "every call is an event, understood or not");
    assert_eq!(store.events_of_kind(TOOL_CALL).unwrap().len(), 3);
    let failed = store.events_of_kind("OBSERVATION").unwrap();
    let failed = failed
        .iter()
        .find(|e| e.text().contains("command_failed"))
        .unwrap();
    assert!((failed.salience - 0.8).abs() < 1e-6);

    let s1 = observations(&store, Some("s1"));
    assert_eq!(
        s1,
        [
            "command_failed: cargo test (exit 101: error[E0425]: cannot find value), last t=4",
            "file_edited: src/a.rs x3, last t=5",
            "file_read: src/b.rs, last t=3",
        ]
    );
    let s2 = observations(&store, Some("s2"));
    assert_eq!(s2, ["file_edited: secret/plan.md, last t=6"]);
    assert!(observations(&store, None).is_empty());
    // Typed observations are in their block, not repeated in the moment; raw calls are.
    let mut o = ContextOptions::with_budget(2000);
    o.session = Some("s1".into());
    let c = context::build_context(&store, &o).unwrap();
    let moment: Vec<&str> = c
        .sections
        .iter()
        .find(|s| s.name == "moment")
        .unwrap()
        .lines
        .iter()
        .map(|l| l.text.as_str())
        .collect();
    assert!(
        moment.iter().all(|l| !l.contains("file_edited")),
        "{moment:?}"
    );
    assert!(moment.iter().any(|l| l.contains("TOOL_CALL")), "{moment:?}");
    assert!(!c.text.contains("secret/plan.md"));
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.differences);
}

/// Found by trying odd input: one line of a tool-call log that was not UTF-8 stopped the whole
/// ingest (the line reader refused it before any extractor ran).
#[test]
fn a_call_line_that_is_not_utf8_is_kept_and_counted() {
    let mut bytes =
        b"{\"tool\":\"Read\",\"args\":{\"path\":\"\xc3\xa4 \xf0\x9f\xa6\x80\"},\"ts\":1}\n"
            .to_vec();
    bytes.extend_from_slice(b"\xff\xfe broken\n{\"tool\":\n");
    let batch = ingest::read_bytes("odd.jsonl", &bytes, Format::Toolcalls).unwrap();
    assert_eq!(batch.events.len(), 3);
    assert_eq!(batch.unextracted.len(), 2, "{:?}", batch.unextracted);
    assert_eq!(batch.events[0].kind, "OBSERVATION");
    assert!(batch.events[0].text().contains("ä 🦀"));
    assert_eq!(batch.events[1].kind, TOOL_CALL);
}

/// Found reading the context after the moment's window was fixed: the observations block
/// looked back over the latest 4,096 log records, bookkeeping included, so a run of
/// working-memory changes put a session's observations out of its reach.
#[test]
fn a_run_of_bookkeeping_does_not_hide_the_observations() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let batch = ingest::read_str("calls.jsonl", CALLS, Format::Toolcalls).unwrap();
    batch.commit(&store).unwrap();
    let before = observations(&store, Some("s1"));
    assert_eq!(before.len(), 3);
    let intents = (0..4096)
        .map(|i| {
            loci::dynamics::working::WmOp::Intent {
                text: format!("step {i}"),
            }
            .draft(9, "bot")
        })
        .collect();
    store.ingest(intents).unwrap();
    assert_eq!(observations(&store, Some("s1")), before);
}

/// Found by the session 24 probe: a call with a key given twice (`"tool"` twice, a path
/// twice) was read with the last value, so `{"tool":"Read","tool":"Bash",...}` became a
/// command run. Such a call is kept raw, counted, and its reason given.
#[test]
fn a_call_with_a_key_given_twice_is_kept_raw_not_guessed() {
    let lines = "{\"tool\":\"Read\",\"tool\":\"Bash\",\"args\":{\"command\":\"ls\"},\"ts\":1}\n\
                 {\"tool\":\"Read\",\"args\":{\"file_path\":\"a.rs\",\"file_path\":\"b.rs\"},\"ts\":2}\n\
                 {\"tool\":\"Read\",\"args\":{\"file_path\":\"c.rs\"},\"ts\":3}\n";
    let batch = ingest::read_str("calls.jsonl", lines, Format::Toolcalls).unwrap();
    assert_eq!(batch.events.len(), 3);
    let raw: Vec<usize> = batch.unextracted.iter().map(|u| u.line).collect();
    assert_eq!(raw, [1, 2], "{:?}", batch.unextracted);
    assert!(
        batch.unextracted.iter().all(|u| u.why.contains("twice")),
        "{:?}",
        batch.unextracted
    );
    assert_eq!(batch.events[0].kind, TOOL_CALL);
    assert_eq!(batch.events[2].kind, "OBSERVATION");
}

#[test]
fn observations_behind_a_long_run_of_summaries_are_still_shown() {
    // Consolidating a long history at once appends one summary per day and episode after the
    // latest records; the observations block read back 16,384 records and found none behind
    // them (as the moment did before it stepped over such runs).
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let calls = r#"{"tool":"Edit","args":{"path":"src/a.rs"},"ts":1}"#;
    ingest::read_str("calls.jsonl", calls, Format::Toolcalls)
        .unwrap()
        .commit(&store)
        .unwrap();
    let run: Vec<loci::model::EventDraft> = (0..17_000)
        .map(|i| {
            let mut d = loci::model::EventDraft::new(i % 10, "loci", "SUMMARY");
            d.payload = serde_json::from_value(serde_json::json!(
                {"level": "episode", "start": i % 10, "end": i % 10, "text": "a summary"}
            ))
            .unwrap();
            d
        })
        .collect();
    store.ingest(run).unwrap();
    assert_eq!(
        observations(&store, None),
        ["file_edited: src/a.rs, last t=1"]
    );
}

/// A raw call of one session (a tool no extractor takes, kept as `TOOL_CALL`) is not in
/// another session's context: the moment showed it, arguments and all (helper-79: an API key
/// of session s2 in s1's context), where its typed calls are kept apart.
#[test]
fn a_raw_call_of_one_session_is_not_in_another_sessions_context() {
    let dir = tempfile::tempdir().unwrap();
    let calls = r#"{"tool":"Edit","args":{"path":"src/a.rs"},"ts":1,"session":"s1"}
{"tool":"Frobnicate","args":{"token":"s2-PRIVATE-API-KEY"},"ts":3,"session":"s2"}
{"tool":"Frobnicate","args":{"token":"s1-OWN-NOTE"},"ts":4,"session":"s1"}"#;
    let store = store_of_calls(dir.path(), calls);
    let text = |session: Option<&str>| {
        let mut o = ContextOptions::with_budget(2000);
        o.session = session.map(str::to_string);
        o.record_usage = false;
        context::build_context(&store, &o).unwrap().text
    };
    let s1 = text(Some("s1"));
    assert!(!s1.contains("s2-PRIVATE-API-KEY"), "{s1}");
    assert!(s1.contains("s1-OWN-NOTE"), "{s1}");
    let s2 = text(Some("s2"));
    assert!(
        s2.contains("s2-PRIVATE-API-KEY") && !s2.contains("s1-OWN-NOTE"),
        "{s2}"
    );
    let none = text(None);
    assert!(
        !none.contains("PRIVATE") && !none.contains("OWN-NOTE"),
        "{none}"
    );
}

/// Nor do retrieval's snippets bring another session's calls into a context: asked about
/// them, s1's context showed s2's raw call, its API key with it, as an event snippet
/// (helper-79's finding, followed past the moment).
#[test]
fn a_question_brings_no_call_of_another_session_into_a_context() {
    let dir = tempfile::tempdir().unwrap();
    let calls = r#"{"tool":"Edit","args":{"path":"src/a.rs"},"ts":1,"session":"s1"}
{"tool":"Frobnicate","args":{"token":"s2-PRIVATE-API-KEY"},"ts":3,"session":"s2"}
{"tool":"Edit","args":{"path":"secret/plan.md"},"ts":4,"session":"s2"}
{"tool":"Read","args":{"path":"src/b.rs"},"ts":5,"session":"s1"}"#;
    let store = store_of_calls(dir.path(), calls);
    let mut o = ContextOptions::with_budget(2000);
    o.session = Some("s1".into());
    o.record_usage = false;
    o.question = Some("frobnicate token private secret plan".into());
    let c = context::build_context(&store, &o).unwrap();
    assert!(
        !c.text.contains("PRIVATE") && !c.text.contains("plan.md"),
        "{}",
        c.text
    );
    o.session = Some("s2".into());
    let c = context::build_context(&store, &o).unwrap();
    assert!(c.text.contains("s2-PRIVATE-API-KEY"), "{}", c.text);
}

/// A store of the tool calls `calls` (JSON Lines).
fn store_of_calls(dir: &std::path::Path, calls: &str) -> Store {
    let store = Store::create(dir.join("s"), BackendKind::Redb).unwrap();
    ingest::read_str("calls.jsonl", calls, Format::Toolcalls)
        .unwrap()
        .commit(&store)
        .unwrap();
    store
}

/// Nor do the summaries a consolidation writes: a day's summary noted what each call said,
/// whichever session made it, and every context shows the summaries (its cover, and its
/// snippets when a question finds one), so after `consolidate` s1's context read s2's
/// command and its raw call's arguments (helper-147). A summary counts the calls; their
/// text stays with their session's own events.
#[test]
fn a_summary_brings_no_call_of_another_session_into_a_context() {
    let dir = tempfile::tempdir().unwrap();
    let calls = r#"{"tool":"Read","args":{"file_path":"src/a.rs"},"result":"x","ts":1,"session":"s1"}
{"tool":"Bash","args":{"command":"echo s2-TOPSECRET"},"result":"ok","exit_code":0,"ts":2,"session":"s2"}
{"tool":"Frobnicate","args":{"x":"s2-RAW-SECRET"},"ts":3,"session":"s2"}
{"tool":"Frobnicate","args":{"x":"no-session-RAW"},"ts":4}
{"tool":"Read","args":{"file_path":"src/b.rs"},"result":"x","ts":30000,"session":"s1"}"#;
    let store = store_of_calls(dir.path(), calls);
    let report = loci::dynamics::consolidate::consolidate(
        &store,
        &loci::dynamics::consolidate::RuleSummarizer,
        &loci::dynamics::consolidate::ConsolidateOptions::default(),
    )
    .unwrap();
    assert!(report.episodes > 0, "{report:?}");
    let text = |session: Option<&str>, question: Option<&str>| {
        let mut o = ContextOptions::with_budget(4000);
        o.session = session.map(str::to_string);
        o.record_usage = false;
        o.question = question.map(str::to_string);
        context::build_context(&store, &o).unwrap().text
    };
    for question in [
        None,
        Some("echo s2-TOPSECRET frobnicate s2-RAW-SECRET x no-session-RAW"),
    ] {
        let s1 = text(Some("s1"), question);
        assert!(
            !s1.contains("TOPSECRET") && !s1.contains("RAW"),
            "{question:?}: {s1}"
        );
        let none = text(None, question);
        assert!(
            !none.contains("TOPSECRET") && !none.contains("s2-RAW"),
            "{question:?}: {none}"
        );
        let s2 = text(Some("s2"), question);
        assert!(!s2.contains("no-session-RAW"), "{question:?}: {s2}");
    }
    // Each session still sees its own calls, in the moment or its observations.
    assert!(text(Some("s2"), None).contains("s2-RAW-SECRET"));
}
