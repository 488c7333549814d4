//! The `loci` binary end to end: every command, `--json` output, exit codes and error messages.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_loci");

fn loci(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = loci(args);
    assert!(
        out.status.success(),
        "loci {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).unwrap()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn world_ingest_search_neighbors_stats_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let events = tmp.path().join("world.jsonl");
    let answers = tmp.path().join("answers.json");
    ok(&[
        "world",
        "--seed",
        "7",
        "--out",
        p(&events),
        "--answers",
        p(&answers),
    ]);
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&answers).unwrap()).unwrap();
    assert!(truth["home"].is_string());
    ok(&["init", "--store", p(&store), "--backend", "sled"]);
    let out = ok(&["ingest", "--store", p(&store), p(&events)]);
    assert!(out.starts_with("committed events 1..="), "{out}");

    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(stats["backend"], "sled");
    assert!(stats["edges"].as_u64().unwrap() > 50);
    let events_before = stats["events"].as_u64().unwrap();

    let hits = json(&[
        "search",
        "--store",
        p(&store),
        "fletcher",
        "--label",
        "NPC",
        "--json",
    ]);
    let keys: Vec<&str> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"npc:fletcher:0"), "{keys:?}");

    let n = json(&[
        "neighbors",
        "--store",
        p(&store),
        "npc:fletcher:0",
        "--relation",
        "OFFERS",
        "--json",
    ]);
    let found = n["neighbors"].as_array().unwrap();
    assert!(found
        .iter()
        .any(|x| x["key"] == "item:emerald" && x["relation"] == "OFFERS"));
    let deep = json(&[
        "neighbors",
        "--store",
        p(&store),
        "bot",
        "--depth",
        "2",
        "--min-confidence",
        "0.5",
        "--json",
    ]);
    assert!(deep["neighbors"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["hops"] == 2));

    let out = ok(&["replay", "--verify", "--store", p(&store)]);
    assert!(out.contains("OK: live state equals replay"), "{out}");

    // A bad file: exit code 2, error names file, line and field, store unchanged.
    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"ts\":1,\"kind\":\"TRADE\",\"assert\":[{\"op\":\"edge\",\"from\":\"bot\",\"rel\":\"OWES\",\"to\":\"nobody\"}]}\n").unwrap();
    let out = loci(&["ingest", "--store", p(&store), p(&events), p(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:1: assert[0].to: unknown node \"nobody\"",
            bad.display()
        )),
        "{err}"
    );
    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(
        stats["events"].as_u64().unwrap(),
        events_before,
        "the good file in the failed call was not committed either"
    );
}

#[test]
fn errors_are_clear() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let out = loci(&["stats", "--store", p(&store)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loci store"));
    ok(&["init", "--store", p(&store)]);
    let out = loci(&["init", "--store", p(&store)]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = loci(&["neighbors", "--store", p(&store), "nothing-here"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no node has key \"nothing-here\""));
    let bad = tmp.path().join("x.jsonl");
    std::fs::write(&bad, "{\"ts\":1,\"kind\":\"K\"}\nnot json\n").unwrap();
    let out = loci(&["ingest", "--store", p(&store), p(&bad)]);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{}:2: json:", bad.display())));
    let out = loci(&["replay", "--store", p(&store)]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--verify"));
}

#[test]
fn demo_answers_match_ground_truth() {
    let v = json(&["demo", "--json"]);
    let truth = &v["ground_truth"];
    assert_eq!(v["where_is_home"]["place"]["key"], truth["home"]);
    let trades: Vec<&serde_json::Value> = v["trade_sticks_for_emeralds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["villager"])
        .collect();
    let expected: Vec<&serde_json::Value> = truth["sticks_for_emeralds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["villager"])
        .collect();
    assert_eq!(trades, expected);
    assert_eq!(v["last_death"]["place"]["key"], truth["last_death_place"]);
    assert_eq!(v["replay_verified"], true);
    let text = ok(&["demo"]);
    assert!(!text.contains("DIFFERS"), "{text}");
    assert_eq!(text.matches("matches ground truth").count(), 4, "{text}");
}
