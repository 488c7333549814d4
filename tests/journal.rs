//! Journals: entries from several harnesses feed one memory, move captured -> consolidated ->
//! promoted (pinned and hot), replay to the same state; and the health check (`loci check`)
//! finds dangling pins, likely duplicates, tiers over their caps and summaries whose children
//! are gone.

use loci::dynamics::consolidate::{self, ConsolidateOptions, ConsolidationPolicy, RuleSummarizer};
use loci::dynamics::health::{self, Finding, Gone, HealthOptions};
use loci::dynamics::usage::Tier;
use loci::ingest::{self, Format};
use loci::journal::{self, Status};
use loci::model::{Assertion, EventDraft, NodeUpsert, Props, Value};
use loci::{BackendKind, Store};

const ENTRIES: &str = r#"{"v":1,"time":"2026-11-20T10:00:00Z","harness":"claude-code","session":"a1","cwd":"/repo","kind":"decision","text":"Use redb as the default backend","tags":["storage"]}
{"v":1,"time":"2026-11-20T11:00:00Z","harness":"claude-code","session":"a1","kind":"lesson","text":"cargo test needs 9 minutes on 2 cores","tags":["ci"]}
{"v":1,"time":"2026-11-21T09:00:00Z","harness":"codex","session":"b7","kind":"decision","text":"use redb as the  default backend","tags":["Storage"]}
{"v":1,"time":"2026-11-22T09:00:00Z","harness":"codex","session":"b8","kind":"progress","text":"journal format landed"}
"#;

fn minutes_days() -> ConsolidateOptions {
    ConsolidateOptions::default().with_policy(ConsolidationPolicy {
        day: 1440,
        episode_gap: 180,
        ..Default::default()
    })
}

fn status_of(store: &Store, text_part: &str) -> Status {
    journal::entries(store)
        .unwrap()
        .into_iter()
        .find(|e| e.text.contains(text_part))
        .unwrap()
        .status
}

#[test]
fn journal_entries_move_from_captured_to_consolidated_to_promoted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let batch = ingest::read_str("j.jsonl", ENTRIES, Format::Journal).unwrap();
    assert_eq!(batch.commit(&store).unwrap().events, 4);
    // Reading the same file again applies nothing.
    let again = ingest::read_str("j.jsonl", ENTRIES, Format::Journal).unwrap();
    let c = again.commit(&store).unwrap();
    assert_eq!((c.events, c.skipped), (0, 4));

    let entries = journal::entries(&store).unwrap();
    assert_eq!(
        entries.len(),
        3,
        "one note written by two agents is one entry"
    );
    let redb = entries.iter().find(|e| e.text.contains("redb")).unwrap();
    assert_eq!(redb.sessions, ["claude-code/a1", "codex/b7"]);
    assert_eq!(redb.tags, ["storage"]);
    assert_eq!(redb.events.len(), 2);
    assert!(entries.iter().all(|e| e.status == Status::Captured));

    // Consolidating closes the first two days; the last entry's day is still open.
    consolidate::consolidate(&store, &RuleSummarizer, &minutes_days()).unwrap();
    assert_eq!(status_of(&store, "redb"), Status::Consolidated);
    assert_eq!(status_of(&store, "cargo test"), Status::Consolidated);
    assert_eq!(status_of(&store, "landed"), Status::Captured);
    // The day's summary says what was noted.
    let day = consolidate::summaries(&store)
        .unwrap()
        .into_iter()
        .find(|s| s.level == consolidate::Level::Day)
        .unwrap();
    assert!(day.text.contains("Use redb"), "{}", day.text);

    // Only the entry written in two sessions recurs.
    let recurring = journal::recurring(&store, 2).unwrap();
    assert_eq!(recurring, std::slice::from_ref(&redb.key));
    // A key given twice is one entry, promoted once.
    let twice = [recurring[0].clone(), recurring[0].clone()];
    let first = journal::promote(&store, &twice).unwrap();
    assert_eq!(first.commit.nodes_upserted, 1);
    assert_eq!(first.promoted, std::slice::from_ref(&redb.key));
    assert_eq!(status_of(&store, "redb"), Status::Promoted);
    let g = store.graph();
    let id = g.node_id(&redb.key).unwrap();
    assert!(g.node(id).unwrap().pinned);
    assert_eq!(g.node_tier(id, i64::MAX / 2), Tier::Hot, "promoted is hot");
    drop(g);
    // Promoting it again writes nothing: it is already pinned (each run had logged another
    // PROMOTE event and said it promoted the entry).
    let before = store.last_seq();
    let again = journal::promote(&store, &twice).unwrap();
    assert_eq!(again.commit.events, 0);
    assert!(again.promoted.is_empty());
    assert_eq!(again.already_promoted, std::slice::from_ref(&redb.key));
    assert_eq!(store.last_seq(), before);
    // A promotion is bookkeeping, as a pin is: not among the latest events of a context (it
    // had shown as "t=... PROMOTE user"; helper-105, session 47).
    let c = loci::context::build_context(&store, &loci::context::ContextOptions::with_budget(4000))
        .unwrap();
    assert!(!c.text.contains(journal::PROMOTE), "{}", c.text);
    // Promoting something that is not a journal entry writes nothing.
    let before = store.last_seq();
    assert!(journal::promote(&store, &["session:codex/b7".to_string()]).is_err());
    assert_eq!(store.last_seq(), before);
    assert!(store.verify().unwrap().ok());
}

#[test]
fn journal_lines_that_break_the_format_are_refused_with_line_and_field() {
    let cases = [
        (
            r#"{"v":2,"time":1,"harness":"h","session":"s","kind":"k","text":"t"}"#,
            "v",
        ),
        (
            r#"{"v":1,"time":"soon","harness":"h","session":"s","kind":"k","text":"t"}"#,
            "time",
        ),
        (
            r#"{"v":1,"time":1,"harness":" ","session":"s","kind":"k","text":"t"}"#,
            "harness",
        ),
        (
            r#"{"v":1,"time":1,"harness":"h","session":"s","kind":"k","text":"t","x":1}"#,
            "x",
        ),
    ];
    for (line, field) in cases {
        let text = format!("{}\n{line}\n", ENTRIES.lines().next().unwrap());
        let e = ingest::read_str("j.jsonl", &text, Format::Journal).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains("j.jsonl:2") && shown.contains(field),
            "{line}: {shown}"
        );
    }
    // A time in the right form but of no day there is says so, where it said the form was
    // wrong (session 25 probe: "expected RFC 3339" of an RFC 3339 time).
    for time in ["2026-02-30T00:00:00Z", "2026-02-30", "2026-13-01T00:00:00Z"] {
        let line = format!(
            r#"{{"v":1,"time":"{time}","harness":"h","session":"s","kind":"k","text":"t"}}"#
        );
        let e = ingest::read_str("j.jsonl", &line, Format::Journal).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains("time") && shown.contains("no such date") && !shown.contains("expected"),
            "{time}: {shown}"
        );
    }
}

fn pinned_node(key: &str, name: &str, label: &str) -> Assertion {
    Assertion::UpsertNode(NodeUpsert {
        key: key.into(),
        label: Some(label.into()),
        name: Some(name.into()),
        ..Default::default()
    })
}

#[test]
fn the_health_check_finds_what_a_memory_drifts_into() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let opts = HealthOptions::default();
    assert!(health::check(&store, &opts).unwrap().healthy());

    let mut d = EventDraft::new(10, "bot", "DISCOVERY");
    d.assertions = vec![
        pinned_node("npc:iron_golem", "Iron Golem", "NPC"),
        pinned_node("npc:iron-golem", "the iron-golem", "NPC"),
        pinned_node("npc:snow_golem", "Snow Golem", "NPC"),
        pinned_node("chest:1", "Chest", "Place"),
    ];
    store.ingest(vec![d]).unwrap();
    store.pin(&["chest:1"], true).unwrap();
    let mut retract = EventDraft::new(11, "bot", "BUILD");
    retract.assertions = vec![Assertion::RetractNode {
        key: "chest:1".into(),
    }];
    store.ingest(vec![retract]).unwrap();
    // A summary whose child the log never held (a hand-written one).
    let mut s = EventDraft::new(0, "loci", consolidate::SUMMARY);
    s.payload = Value::Map(Props::from([
        ("level".to_string(), Value::from("day")),
        ("start".to_string(), Value::Int(0)),
        ("end".to_string(), Value::Int(23_999)),
        (
            "children".to_string(),
            Value::List(vec![Value::Int(1), Value::Int(999)]),
        ),
        ("text".to_string(), Value::from("a day")),
    ]));
    store.ingest(vec![s]).unwrap();

    let r = health::check(&store, &opts).unwrap();
    assert!(!r.healthy());
    assert!(r.findings.contains(&Finding::DanglingPin {
        key: "chest:1".into(),
        pinned_by: 2
    }));
    let dups: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| matches!(f, Finding::LikelyDuplicates { .. }))
        .collect();
    assert_eq!(dups.len(), 1, "{dups:?}");
    assert!(matches!(dups[0], Finding::LikelyDuplicates { keys, .. }
        if keys == &["npc:iron-golem".to_string(), "npc:iron_golem".to_string()]));
    assert!(r.findings.iter().any(|f| matches!(f,
        Finding::SummaryChildrenGone { gone, children: 2, .. } if gone == &[(999, Gone::NeverHeld)])));
    assert!(!r
        .findings
        .iter()
        .any(|f| matches!(f, Finding::TierOverCap { .. })));

    // Caps: pinning one node with a cap of zero pins is a finding.
    store.pin(&["npc:snow_golem"], true).unwrap();
    let mut tight = HealthOptions::default();
    tight.max_pinned = 0;
    let r = health::check(&store, &tight).unwrap();
    assert!(r.findings.contains(&Finding::TierOverCap {
        tier: "pinned nodes".into(),
        count: 1,
        cap: 0
    }));
}

/// Keys that differ only in their numbers ("npc:villager:6", "npc:villager:10") were counted
/// out on purpose: two fletchers at two trading posts are two villagers, not one written
/// twice. Names alike under keys of different shapes still are likely duplicates.
/// The likely duplicates the health check finds in `store`.
fn likely_duplicates(store: &Store) -> Vec<Finding> {
    health::check(store, &HealthOptions::default())
        .unwrap()
        .findings
        .into_iter()
        .filter(|f| matches!(f, Finding::LikelyDuplicates { .. }))
        .collect()
}

#[test]
fn numbered_instances_of_one_kind_are_not_likely_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let w = loci::world::generate(&loci::world::WorldConfig::default());
    store.ingest(w.events).unwrap();
    assert_eq!(
        likely_duplicates(&store),
        vec![],
        "the world's villagers and chests are counted"
    );

    let mut d = EventDraft::new(1_000_000, "bot", "DISCOVERY");
    d.assertions = vec![
        pinned_node("npc:golem:1", "Iron Golem", "NPC"),
        pinned_node("npc:golem:2", "Iron Golem", "NPC"),
        pinned_node("npc:iron_golem", "iron golem", "NPC"),
    ];
    store.ingest(vec![d]).unwrap();
    assert_eq!(
        likely_duplicates(&store),
        vec![Finding::LikelyDuplicates {
            label: "NPC".into(),
            name: "irongolem".into(),
            keys: vec![
                "npc:golem:1".into(),
                "npc:golem:2".into(),
                "npc:iron_golem".into()
            ],
        }],
        "a key of another shape among numbered ones"
    );
}

/// Names alike that are already linked as one thing (`extract`'s SAME_AS links) are resolved:
/// the check said "likely duplicates" of the very pair `extract` had just linked, and exited 1.
/// A group is resolved only when its links join every member.
#[test]
fn names_already_linked_as_the_same_thing_are_not_likely_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let dups = |store: &Store| -> Vec<Vec<String>> {
        health::check(store, &HealthOptions::default())
            .unwrap()
            .findings
            .into_iter()
            .filter_map(|f| match f {
                Finding::LikelyDuplicates { keys, .. } => Some(keys),
                _ => None,
            })
            .collect()
    };
    let mut d = EventDraft::new(0, "extractor", "EXTRACTION");
    d.assertions = vec![
        pinned_node("ent:good place", "Good Place", "Entity"),
        pinned_node("ent:the good place", "The Good Place", "Entity"),
    ];
    store.ingest(vec![d]).unwrap();
    assert_eq!(dups(&store).len(), 1);
    store
        .ingest(loci::extract::alias_links(&store).unwrap())
        .unwrap();
    assert_eq!(dups(&store), Vec::<Vec<String>>::new(), "linked by extract");

    // A third name alike, not linked: the group is a finding again, with every key.
    let mut d = EventDraft::new(0, "user", "NOTE");
    d.assertions = vec![pinned_node("place:good", "the good-place", "Entity")];
    store.ingest(vec![d]).unwrap();
    assert_eq!(
        dups(&store),
        vec![vec![
            "ent:good place".to_string(),
            "ent:the good place".to_string(),
            "place:good".to_string()
        ]]
    );
}

#[test]
fn forgotten_children_are_not_a_finding_but_deleted_ones_take_their_summary() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    ingest::read_str("j.jsonl", ENTRIES, Format::Journal)
        .unwrap()
        .commit(&store)
        .unwrap();
    consolidate::consolidate(&store, &RuleSummarizer, &minutes_days()).unwrap();
    // A user deletes the first entry's event: the summaries made of it go too.
    store.delete(&loci::DeleteRequest::events([1])).unwrap();
    let r = health::check(&store, &HealthOptions::default()).unwrap();
    assert!(r.healthy(), "{:?}", r.findings);
    // Forgetting evicts detail and keeps the gist: summaries outlive their children.
    let held = store.events_held();
    let f = loci::dynamics::forget::forget(
        &store,
        &loci::dynamics::forget::ForgetOptions::with_budget(held - 2),
    )
    .unwrap();
    assert!(f.evicted > 0, "{f:?}");
    let r = health::check(&store, &HealthOptions::default()).unwrap();
    assert!(r.healthy(), "{:?}", r.findings);
    assert!(r.summaries_checked > 0);
    assert!(store.verify().unwrap().ok());
}

#[test]
fn journal_entries_outlive_the_events_forgetting_evicts() {
    // `journal list` was built from live JOURNAL events alone: once forgetting evicted the
    // summarised ones, their entries, promoted ones too, left the list though their nodes
    // (resting on the summaries) were still in the memory (session 26 probe).
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let batch = ingest::read_str("j.jsonl", ENTRIES, Format::Journal).unwrap();
    batch.commit(&store).unwrap();
    consolidate::consolidate(&store, &RuleSummarizer, &minutes_days()).unwrap();
    let redb = journal::entries(&store)
        .unwrap()
        .into_iter()
        .find(|e| e.text.contains("redb"))
        .unwrap();
    journal::promote(&store, std::slice::from_ref(&redb.key)).unwrap();
    let before = journal::entries(&store).unwrap();
    assert_eq!(before.len(), 3);

    let report = loci::dynamics::forget::forget(
        &store,
        &loci::dynamics::forget::ForgetOptions::with_budget(1),
    )
    .unwrap();
    assert!(report.evicted > 0, "{report:?}");
    let after = journal::entries(&store).unwrap();
    let keys = |list: &[journal::JournalEntry]| -> Vec<String> {
        list.iter().map(|e| e.key.clone()).collect()
    };
    assert_eq!(keys(&after), keys(&before), "every entry is still listed");
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            (&a.text, &a.kind, &a.sessions, &a.tags),
            (&b.text, &b.kind, &b.sessions, &b.tags),
            "{}",
            a.key
        );
        assert!(a.events.iter().all(|seq| b.events.contains(seq)));
        if a.events.is_empty() {
            // Forgotten: its times are its node's, first restated by its day's summary.
            assert!(a.first <= b.first && b.first - a.first < 1440, "{a:?}");
            assert_eq!(a.last, b.last, "{a:?}");
        } else {
            assert_eq!((a.first, a.last), (b.first, b.last));
        }
        if b.status != Status::Captured {
            assert_eq!(a.status, b.status, "{}", a.key);
        }
    }
    assert_eq!(status_of(&store, "redb"), Status::Promoted);
    assert!(store.verify().unwrap().ok());
}

#[test]
fn the_health_check_counts_as_pins_the_keys_pinned_now() {
    // Every key ever pinned or unpinned was counted: a pin then an unpin of one node made
    // `check` say one pin more, with the same nodes pinned (a helper's probe).
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let mut d = EventDraft::new(10, "bot", "DISCOVERY");
    d.assertions = vec![
        pinned_node("npc:a", "A", "NPC"),
        pinned_node("npc:b", "B", "NPC"),
    ];
    store.ingest(vec![d]).unwrap();
    store.pin(&["npc:a", "npc:b"], true).unwrap();
    store.pin(&["npc:b"], false).unwrap();
    let r = health::check(&store, &HealthOptions::default()).unwrap();
    assert_eq!(r.pins_checked, 1, "{r:?}");
}

/// An entry ingested again with other content (another `cwd`, `kind` or tags, the same
/// harness, session, time and text) is refused naming the entry, not `idempotency_key`, a
/// field no journal line has (a helper's probe).
#[test]
fn an_entry_given_again_with_other_content_is_named_as_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let first = ENTRIES.lines().next().unwrap();
    ingest::read_str("j.jsonl", first, Format::Journal)
        .unwrap()
        .commit(&store)
        .unwrap();
    let other = first.replace("\"/repo\"", "\"/elsewhere\"");
    let e = ingest::read_str("k.jsonl", &other, Format::Journal)
        .unwrap()
        .commit(&store)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("k.jsonl:1: entry: "), "{e}");
    assert!(e.contains("the log's event 1"), "{e}");
    assert!(!e.contains("idempotency_key"), "{e}");
}

/// helper-97 (session 45): a pinned node retracted (or deleted) and then asserted again comes
/// back unpinned, since a pin makes no node and the new one starts unpinned; `check`, which
/// had said "asserting it again brings it back", then called the store healthy while the pin
/// its log still holds pinned nothing.
#[test]
fn the_health_check_finds_a_pin_its_node_came_back_without() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let mut d = EventDraft::new(10, "bot", "DISCOVERY");
    d.assertions = vec![pinned_node("chest:1", "Chest", "Place")];
    store.ingest(vec![d]).unwrap();
    store.pin(&["chest:1"], true).unwrap();
    let mut retract = EventDraft::new(11, "bot", "BUILD");
    retract.assertions = vec![Assertion::RetractNode {
        key: "chest:1".into(),
    }];
    store.ingest(vec![retract]).unwrap();
    let mut again = EventDraft::new(12, "bot", "DISCOVERY");
    again.assertions = vec![pinned_node("chest:1", "Chest", "Place")];
    store.ingest(vec![again]).unwrap();
    assert!(!store.node_by_key("chest:1").unwrap().pinned);

    let r = health::check(&store, &HealthOptions::default()).unwrap();
    assert_eq!(
        r.findings,
        vec![Finding::PinLost {
            key: "chest:1".into(),
            pinned_by: 2
        }]
    );
    let said = r.findings[0].describe();
    assert!(said.contains("loci pin 'chest:1'"), "{said}");
    // Pinned again, the store is healthy.
    store.pin(&["chest:1"], true).unwrap();
    assert!(health::check(&store, &HealthOptions::default())
        .unwrap()
        .healthy());
}

/// helper-97 (session 45): one note written composed ("Café", as most systems write it) and
/// decomposed ("Cafe" and a combining accent, as macOS file names and some editors write it)
/// was two entries, shown alike, where the same note from two agents is one entry.
#[test]
fn one_note_in_composed_and_decomposed_form_is_one_entry() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let lines = concat!(
        r#"{"v":1,"time":"2026-11-21T09:00:00Z","harness":"codex","session":"a","kind":"note","text":"Cafe\u0301 opens at nine"}"#,
        "\n",
        r#"{"v":1,"time":"2026-11-21T10:00:00Z","harness":"codex","session":"b","kind":"note","text":"caf\u00e9  opens at NINE"}"#,
        "\n",
    );
    let batch = ingest::read_str("j.jsonl", lines, Format::Journal).unwrap();
    assert_eq!(batch.commit(&store).unwrap().events, 2);
    let entries = journal::entries(&store).unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].events.len(), 2);
    assert_eq!(
        journal::entry_key("Cafe\u{301} opens at nine"),
        journal::entry_key("Caf\u{e9} opens at nine")
    );
}

/// helper-97 (session 45): a store of journal entries (timed in minutes) forgotten before it
/// was ever consolidated was summarised in days of 24,000 (more than a fortnight of minutes
/// each), and that day length then held for the store: `consolidate --day 1440` was refused.
/// Without a day given or summarised, a store of journal entries or conversation turns takes
/// days of minutes.
#[test]
fn a_store_of_minutes_takes_days_of_minutes_when_none_is_given() {
    use loci::dynamics::consolidate::ConsolidationPolicy;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    assert_eq!(
        ConsolidationPolicy::for_store(&store, None).unwrap().day,
        24_000
    );
    ingest::read_str("j.jsonl", ENTRIES, Format::Journal)
        .unwrap()
        .commit(&store)
        .unwrap();
    assert_eq!(
        ConsolidationPolicy::for_store(&store, None).unwrap().day,
        1440
    );
    // A day given is the day.
    assert_eq!(
        ConsolidationPolicy::for_store(&store, Some(60))
            .unwrap()
            .day,
        60
    );
    // A world store (its days of 24,000 ticks) with an entry given in its world time stays
    // in ticks, and so does one with an entry in RFC 3339 (helper-98: any journal entry had
    // turned a world store's days into 1440 ticks).
    for time in ["146500", "\"2026-11-21T09:00:00Z\""] {
        let dir = tempfile::tempdir().unwrap();
        let world = Store::create(dir.path(), BackendKind::Redb).unwrap();
        world
            .ingest(loci::world::generate(&loci::world::WorldConfig::default()).events)
            .unwrap();
        let line = format!(
            r#"{{"v":1,"time":{time},"harness":"bot","session":"s1","kind":"note","text":"x"}}"#
        );
        ingest::read_str("j.jsonl", &line, Format::Journal)
            .unwrap()
            .commit(&world)
            .unwrap();
        assert_eq!(
            ConsolidationPolicy::for_store(&world, None).unwrap().day,
            24_000,
            "{time}"
        );
    }
    // Nor does a store of entries given in world time: their unit is the store's.
    let dir = tempfile::tempdir().unwrap();
    let ticks = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let line = r#"{"v":1,"time":5000,"harness":"bot","session":"s1","kind":"note","text":"x"}"#;
    ingest::read_str("j.jsonl", line, Format::Journal)
        .unwrap()
        .commit(&ticks)
        .unwrap();
    assert_eq!(
        ConsolidationPolicy::for_store(&ticks, None).unwrap().day,
        24_000
    );
    // Forgetting consolidates with it, and a later `--day 1440` agrees.
    loci::dynamics::forget::consolidate_then_forget(
        &store,
        None,
        &loci::dynamics::forget::ForgetOptions::with_budget(2),
    )
    .unwrap();
    let policy = ConsolidationPolicy::for_store(&store, Some(1440)).unwrap();
    let mut opts = ConsolidateOptions::default();
    opts.policy = policy;
    consolidate::consolidate(&store, &RuleSummarizer, &opts).unwrap();
}

/// helper-99 (session 45): two places at blocks that differ only in a coordinate's sign (`bed
/// at 65645 64 -6`, `bed at 65645 64 6`) were called likely duplicates: the check's fold of
/// names dropped the minus sign with the punctuation.
#[test]
fn names_that_differ_in_a_numbers_sign_are_not_likely_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let mut d = EventDraft::new(10, "bot", "DISCOVERY");
    d.assertions = vec![
        pinned_node("seen:bed:65645:64:-6", "bed at 65645 64 -6", "Place"),
        pinned_node("seen:bed:65645:64:6", "bed at 65645 64 6", "Place"),
        // A hyphen between words is still punctuation.
        pinned_node("npc:iron-golem", "iron-golem", "NPC"),
        pinned_node("npc:iron_golem", "iron golem", "NPC"),
    ];
    store.ingest(vec![d]).unwrap();
    let dups = likely_duplicates(&store);
    assert_eq!(dups.len(), 1, "{dups:?}");
    assert!(matches!(&dups[0], Finding::LikelyDuplicates { label, .. } if label == "NPC"));
}

/// helper-118: keys and kinds are taken as given, so "café" composed and "cafe" with a
/// combining accent were two nodes whose keys print alike, " lead" a node apart from "lead",
/// and " NOTE " and "note" kinds apart from "NOTE" (a filter by one misses the others); the
/// check found them only when their names were alike too. It names such keys and kinds,
/// the difference shown (a combining mark escaped, the spaces inside the quotes).
#[test]
fn keys_and_kinds_that_read_alike_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let mut events = Vec::new();
    for (key, kind, name) in [
        ("caf\u{e9}", "NOTE", "Corner Cafe"),
        ("cafe\u{301}", "NOTE", "corner cafe"),
        (" lead", " NOTE ", "third"),
        ("lead", "note", "fourth"),
        ("tin", "Trade", "fifth"),
    ] {
        let mut d = EventDraft::new(1, "a", kind);
        d.assertions = vec![Assertion::UpsertNode(NodeUpsert {
            key: key.into(),
            label: Some("L".into()),
            name: Some(name.into()),
            ..Default::default()
        })];
        events.push(d);
    }
    store.ingest(events).unwrap();
    let all = health::check(&store, &HealthOptions::default())
        .unwrap()
        .findings;
    // Alike names under keys that read alike are that finding alone, not likely duplicates
    // as well (helper-124).
    assert!(
        !all.iter()
            .any(|f| matches!(f, Finding::LikelyDuplicates { .. })),
        "{all:?}"
    );
    let found: Vec<Finding> = (all.into_iter())
        .filter(|f| matches!(f, Finding::KeysAlike { .. } | Finding::KindsAlike { .. }))
        .collect();
    assert_eq!(
        found,
        vec![
            Finding::KeysAlike {
                keys: vec!["cafe\u{301}".into(), "caf\u{e9}".into()]
            },
            Finding::KeysAlike {
                keys: vec![" lead".into(), "lead".into()]
            },
            Finding::KindsAlike {
                kinds: vec![" NOTE ".into(), "NOTE".into(), "note".into()]
            },
        ]
    );
    let said: Vec<String> = found.iter().map(Finding::describe).collect();
    assert!(said[0].contains(r#""cafe\u{301}""#), "{}", said[0]);
    assert!(said[1].contains(r#"" lead""#), "{}", said[1]);

    // The last note's open list: kinds past the first 10,000 were left out in silence. The
    // report says how many it compared, and that there were more.
    let r = health::check(&store, &HealthOptions::default()).unwrap();
    assert_eq!((r.kinds_checked, r.more_kinds), (4, false), "{r:?}");
    let mut capped = HealthOptions::default();
    capped.max_kinds = 2;
    let r = health::check(&store, &capped).unwrap();
    assert_eq!((r.kinds_checked, r.more_kinds), (2, true), "{r:?}");
    // The first two (shorter first: "note", "NOTE") read alike; nothing past them is compared.
    assert!(
        !(r.findings.iter()).any(|f| matches!(f, Finding::KindsAlike { kinds } if kinds.len() > 2)),
        "{r:?}"
    );
}
