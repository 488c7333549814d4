//! The `loci` binary end to end: every command, `--json` output, exit codes and error messages.

mod common;

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

/// `loci ingest` of `file` into `store` as `format`, which must succeed; its output.
fn ingest_as(store: &Path, file: &Path, format: &str) -> String {
    ok(&["ingest", "--store", p(store), p(file), "--format", format])
}

/// `loci args` run in `dir`, which must succeed; its output.
fn ok_in<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(dir: impl AsRef<Path>, args: &[S]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "loci {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `loci args`, which must exit with `code`; what it wrote to standard error.
fn fails(args: &[&str], code: i32) -> String {
    let out = loci(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    err
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// `f` of every item of a JSON array (which `list` must be).
fn each<'a, T>(list: &'a serde_json::Value, f: impl Fn(&'a serde_json::Value) -> T) -> Vec<T> {
    list.as_array().unwrap().iter().map(f).collect()
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
    let keys = each(&hits, |h| h["id"].as_str().unwrap());
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
    // One of a thing is said as one (a new user's try read "within 1 hops").
    let one = ok(&[
        "neighbors",
        "--store",
        p(&store),
        "npc:fletcher:0",
        "--relation",
        "OFFERS",
    ]);
    assert!(
        one.lines().next().unwrap().ends_with(" within 1 hop"),
        "{one}"
    );

    let out = ok(&["replay", "--verify", "--store", p(&store)]);
    assert!(out.contains("OK: live state equals replay"), "{out}");

    // A bad file: exit code 3 (bad input), error names file, line and field, store unchanged.
    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"ts\":1,\"kind\":\"TRADE\",\"assert\":[{\"op\":\"edge\",\"from\":\"bot\",\"rel\":\"OWES\",\"to\":\"nobody\"}]}\n").unwrap();
    let err = fails(&["ingest", "--store", p(&store), p(&events), p(&bad)], 3);
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

/// `stats` of a store opened from its snapshot counts the state on the heap, next to nothing
/// (the snapshot is mapped), and says the rest is read in place, rather than seeming to
/// report an empty graph.
#[test]
fn stats_says_a_state_opened_from_its_snapshot_is_read_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    // The benchmark leaves its store with a snapshot (a small ingest writes none yet).
    let store = tmp.path().join("g");
    ok(&[
        "bench",
        "graph",
        "--nodes",
        "2000",
        "--edges",
        "10000",
        "--dir",
        p(&store),
        "--json",
    ]);
    let out = ok(&["stats", "--store", p(&store)]);
    assert!(out.contains("opened from  the snapshot"), "{out}");
    let memory = out.lines().find(|l| l.starts_with("memory")).unwrap();
    assert!(
        memory.contains("bytes of state on the heap")
            && memory.contains("the rest read in place from the snapshot"),
        "{memory}"
    );
}

/// `init` into a directory that holds other files and no store's refuses, and writes nothing
/// there: it had made `data.redb`, `text/` and a manifest among a user's files without a word
/// (`loci init --store ~` filled a home directory).
#[test]
fn init_refuses_a_directory_of_other_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("notes");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("todo.txt"), "x").unwrap();
    std::fs::write(dir.join("b.txt"), "x").unwrap();
    let err = fails(&["init", "--store", p(&dir)], 3);
    assert!(
        err.contains("is not empty and holds no loci store")
            && err.contains("\"b.txt\" and 1 more")
            && err.contains("an empty or new directory"),
        "{err}"
    );
    let mut left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["b.txt", "todo.txt"], "nothing is written there");
    // An empty directory, and one a cut-short creation left only its lock in, are taken.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    ok(&["init", "--store", p(&empty)]);
    let cut = tmp.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    std::fs::write(cut.join("lock"), "").unwrap();
    ok(&["init", "--store", p(&cut)]);
    // What a file manager leaves in a new folder is no file of the user's.
    let finder = tmp.path().join("finder");
    std::fs::create_dir(&finder).unwrap();
    std::fs::write(finder.join(".DS_Store"), "x").unwrap();
    ok(&["init", "--store", p(&finder)]);
    // A store's remains without its log (the log moved away, as the lost-manifest refusal
    // had advised) are said to be what they are, not other files; and that advice now
    // names the directory.
    let store = world_store(&tmp.path().join("w"));
    std::fs::remove_file(store.join("loci.json")).unwrap();
    let err = fails(&["init", "--store", p(&store)], 6);
    assert!(err.contains("or move the directory away"), "{err}");
    std::fs::rename(store.join("data.redb"), tmp.path().join("moved.redb")).unwrap();
    let err = fails(&["init", "--store", p(&store)], 3);
    assert!(
        err.contains("holds what is left of a store") && err.contains("\"text\""),
        "{err}"
    );
}

#[test]
fn errors_are_clear() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let out = loci(&["stats", "--store", p(&store)]);
    assert_eq!(out.status.code(), Some(4), "a missing store is not found");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loci store"));
    ok(&["init", "--store", p(&store)]);
    let out = loci(&["init", "--store", p(&store)]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    // A file where the store would go is named as one (it had been "File exists (os error 17)").
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = loci(&["init", "--store", p(&file)]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a file, not a directory"));
    // And so is it to a command that reads a store, which said "Not a directory (os error
    // 20)" (a helper's probe).
    let err = fails(&["stats", "--store", p(&file)], 4);
    assert!(
        err.contains("is a file, not a directory") && !err.contains("os error"),
        "{err}"
    );
    let out = loci(&["neighbors", "--store", p(&store), "nothing-here"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no node has key \"nothing-here\""));
    let bad = tmp.path().join("x.jsonl");
    std::fs::write(&bad, "{\"ts\":1,\"kind\":\"K\"}\nnot json\n").unwrap();
    let out = loci(&["ingest", "--store", p(&store), p(&bad)]);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{}:2: json:", bad.display())));
    let out = loci(&["replay", "--store", p(&store)]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--verify"));
    // An instructions file that is a directory is bad input naming it, as an input file is; a
    // missing one is not found (session 25 probe: a directory exited 8, "other failure").
    let context = |file: &Path| {
        loci(&[
            "context",
            "--store",
            p(&store),
            "--budget",
            "100",
            "--instructions",
            p(file),
        ])
    };
    let out = context(tmp.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(p(tmp.path())) && err.contains("--instructions") && err.contains("directory"),
        "{err}"
    );
    let out = context(&tmp.path().join("no-such-file.txt"));
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A line of the file that is the context's boundary is bad input named by file and line
    // (it had said "invalid instructions: line 2", naming no file).
    let boundary = tmp.path().join("boundary.txt");
    std::fs::write(
        &boundary,
        format!("Be brief.\n  {}\nAnswer.\n", loci::context::BOUNDARY),
    )
    .unwrap();
    let out = context(&boundary);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("{}:2", p(&boundary))) && err.contains("--instructions"),
        "{err}"
    );
    // Flags are named as the user wrote them, and a negative number is a value to judge, not
    // an unknown flag.
    let out = loci(&["query", "--store", p(&store), "x", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--limit"));
    for args in [
        vec!["query", "--store", p(&store), "x", "--min-confidence", "-1"],
        vec![
            "neighbors",
            "--store",
            p(&store),
            "x",
            "--min-confidence",
            "-1",
        ],
    ] {
        let out = loci(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("[0, 1]") && !err.contains("tip:"),
            "{args:?}: {err}"
        );
    }
}

/// `--help` gives every exit code with the cases the README gives it, so that a script
/// written from either reads a code the same way: 0 also when the output's reader went away,
/// 1 also for a demo answer unlike the ground truth and a check's finding, 6 also after reads
/// met a damaged block.
#[test]
fn help_gives_each_exit_code_the_cases_the_readme_does() {
    let help = ok(&["--help"]);
    let codes = help
        .split_once("Exit codes:")
        .map(|(_, rest)| {
            rest.split("\n\n")
                .next()
                .unwrap_or_default()
                .replace('\n', " ")
        })
        .expect("an exit code summary");
    for (code, case) in [
        ("0 success", "reader of the output went away"),
        ("1 replay --verify found a difference", "demo"),
        ("1 replay --verify found a difference", "check a finding"),
        ("6 corrupt store", "damaged block"),
        ("6 corrupt store", "loci repair"),
        ("7 query limit exceeded", ""),
        ("8 other failure", ""),
        (
            "130 ingest stopped by Ctrl-C or SIGTERM",
            "every commit reported",
        ),
    ] {
        let at = codes
            .find(code)
            .unwrap_or_else(|| panic!("{code:?} in {codes:?}"));
        // The next code's digits end this one's cases.
        let from = at + code.len();
        let next = codes[from..]
            .find(|c: char| c.is_ascii_digit())
            .map_or(codes.len(), |i| from + i);
        assert!(
            codes[at..next].contains(case),
            "code {code:?} says {case:?}: {:?}",
            &codes[at..next]
        );
    }
}

#[test]
fn demo_answers_match_ground_truth() {
    let v = json(&["demo", "--json"]);
    let truth = &v["ground_truth"];
    assert_eq!(v["where_is_home"]["place"]["key"], truth["home"]);
    assert_eq!(
        each(&v["trade_sticks_for_emeralds"], |t| &t["villager"]),
        each(&truth["sticks_for_emeralds"], |t| &t["villager"])
    );
    assert_eq!(v["last_death"]["place"]["key"], truth["last_death_place"]);
    assert_eq!(v["replay_verified"], true);
    let text = ok(&["demo"]);
    assert!(!text.contains("DIFFERS"), "{text}");
    assert_eq!(text.matches("matches ground truth").count(), 4, "{text}");
    let sled = ok(&["demo", "--seed", "7", "--scale", "2", "--backend", "sled"]);
    assert!(
        sled.starts_with("loci demo: synthetic world (seed 7, scale 2) in a temporary sled store"),
        "{sled}"
    );
    assert_eq!(sled.matches("matches ground truth").count(), 4, "{sled}");
}

#[test]
fn extract_query_and_retrieval_bench() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let corpus = tmp.path().join("corpus.jsonl");
    let passages = [
        (
            "p1",
            "Glimmer (film)",
            "Glimmer is a 1999 film directed by Orla Venn with music composed by Tomas Brill.",
        ),
        (
            "p2",
            "Tomas Brill",
            "Tomas Brill was a Danish musician born in Aarhus.",
        ),
        (
            "p3",
            "Orla Venn",
            "Orla Venn is an Irish director born in Cork.",
        ),
    ];
    let lines: String = passages
        .iter()
        .map(|(id, t, x)| serde_json::json!({"id": id, "title": t, "text": x}).to_string() + "\n")
        .collect();
    std::fs::write(&corpus, lines).unwrap();
    ok(&["init", "--store", p(&store)]);
    ok(&["ingest", "--store", p(&store), p(&corpus)]);
    let c = json(&["extract", "--store", p(&store), "--json"]);
    assert_eq!(c["mentions"]["events"], 3);
    assert!(c["mentions"]["edges_upserted"].as_u64().unwrap() >= 5);

    let pack = json(&[
        "query",
        "--store",
        p(&store),
        "Where was the composer of film Glimmer born?",
        "--kind",
        "passage",
        "--k",
        "2",
        "--json",
    ]);
    let ids = each(&pack["snippets"], |s| s["id"].as_str().unwrap());
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&"p1"), "{ids:?}");
    let budgeted = json(&[
        "query",
        "--store",
        p(&store),
        "Glimmer",
        "--budget",
        "20",
        "--tokenizer",
        "cl100k_base",
        "--json",
    ]);
    assert!(budgeted["tokens_used"].as_u64().unwrap() <= 20);
    assert_eq!(budgeted["token_counter"], "cl100k_base");
    let text = ok(&[
        "query",
        "--store",
        p(&store),
        "Where was the composer of film Glimmer born?",
    ]);
    assert!(
        text.contains("why: seed: question names \"glimmer\""),
        "{text}"
    );

    let questions = tmp.path().join("q.jsonl");
    std::fs::write(&questions, "{\"id\":\"q\",\"question\":\"Where was the composer of film Glimmer born?\",\"gold_ids\":[\"p1\",\"p2\"]}\n").unwrap();
    let out = tmp.path().join("report.json");
    ok(&[
        "bench",
        "retrieval",
        "--corpus",
        p(&corpus),
        "--questions",
        p(&questions),
        "--out",
        p(&out),
        "--set",
        "alpha=0.3",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(report["n"], 1);
    assert!(report["loci"]["recall@5"].as_f64().unwrap() > 0.99);
    let bad = loci(&[
        "bench",
        "retrieval",
        "--corpus",
        p(&corpus),
        "--questions",
        p(&questions),
        "--set",
        "alpha=2",
    ]);
    assert_eq!(bad.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("alpha"));
}

/// helper-101 (session 46): an `--out` that was a directory passed the check made before a
/// bench runs, and the run was lost at its end: the report was written to the file first, and
/// nothing reached standard output either.
#[test]
fn a_bench_refuses_an_out_it_cannot_write_before_it_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let small = ["bench", "graph", "--nodes", "100", "--edges", "300", "-q"];
    for flag in ["--out", "--write-edges"] {
        let mut args = small.to_vec();
        args.extend([flag, p(tmp.path())]);
        let out = loci(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{flag}: {err}");
        assert!(err.contains("is a directory"), "{flag}: {err}");
        assert!(out.stdout.is_empty(), "{flag}: it ran");
    }
    // A report written where it can be is written, and printed.
    let file = tmp.path().join("r.json");
    let mut args = small.to_vec();
    args.extend(["--out", p(&file), "--json"]);
    let printed: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(printed, written);
}

/// helper-101 (session 46): asked for more edges than its nodes hold, the generator made
/// fewer and the report said nothing of it.
#[test]
fn a_generated_graph_smaller_than_asked_for_is_said_to_be() {
    let out = loci(&[
        "bench", "graph", "--nodes", "2", "--edges", "1000", "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let made = v["edges"].as_u64().unwrap();
    assert!(made < 1000, "{v}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "note: asked for 1000 edges; 2 nodes hold {made} distinct ones"
        )),
        "{err}"
    );
}

/// A store in `tmp` of the demo world's fixture (`datasets/world-seed42.jsonl`).
fn seed42_store(tmp: &Path) -> std::path::PathBuf {
    let store = tmp.join("store");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/world-seed42.jsonl");
    ok(&["init", "--store", p(&store)]);
    ok(&["ingest", "--store", p(&store), p(&fixture)]);
    store
}

#[test]
fn saved_queries_run_and_metaqa_bench() {
    let tmp = tempfile::tempdir().unwrap();
    let store = seed42_store(tmp.path());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let truth: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("datasets/world-seed42.answers.json")).unwrap(),
    )
    .unwrap();
    let queries = root.join("queries");
    let list = json(&["queries", "--queries", p(&queries), "--json"]);
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .any(|q| q["name"] == "find_trade" && q["params"][0]["name"] == "want"));
    let home = json(&[
        "run",
        "--store",
        p(&store),
        "where_is_home",
        "--queries",
        p(&queries),
        "--json",
    ]);
    assert_eq!(home["rows"][0][0], truth["home"]);
    let file = queries.join("last_death.gq");
    let death = json(&["run", "--store", p(&store), p(&file), "--json"]);
    assert_eq!(death["rows"][0][0], truth["last_death_place"]);
    let inline = json(&[
        "run",
        "--store",
        p(&store),
        "--query",
        "MATCH (b {key: $k})-[:HOME]->(p) RETURN p.key ORDER BY p.key",
        "--param",
        "k=bot",
        "--json",
    ]);
    assert_eq!(inline["rows"].as_array().unwrap().len(), 2);
    let bad = loci(&[
        "run",
        "--store",
        p(&store),
        "--query",
        "MATCH (a) RETURN a ORDER",
    ]);
    assert_eq!(bad.status.code(), Some(3));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("line 1, column 25: expected BY, found end of query") && err.contains('^'),
        "{err}"
    );
    let missing = loci(&[
        "run",
        "--store",
        p(&store),
        "last_night",
        "--queries",
        p(&queries),
    ]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("needs parameter day"));

    // A tiny MetaQA-shaped benchmark.
    let kb = tmp.path().join("kb.txt");
    std::fs::write(&kb, "Heat|directed_by|Michael Mann\nCollateral|directed_by|Michael Mann\nHeat|starred_actors|Al Pacino\nCollateral|release_year|2004\n").unwrap();
    let qa = tmp.path().join("qa.txt");
    std::fs::write(
        &qa,
        "who directed [Heat]\tMichael Mann\nwhat films share directors with [Heat]\tCollateral\n",
    )
    .unwrap();
    let qt = tmp.path().join("qt.txt");
    std::fs::write(&qt, "movie_to_director\nmovie_to_director_to_movie\n").unwrap();
    let out = tmp.path().join("mq.json");
    ok(&[
        "bench",
        "metaqa",
        "--kb",
        p(&kb),
        "--questions",
        p(&qa),
        "--qtypes",
        p(&qt),
        "--out",
        p(&out),
    ]);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r["n"], 2);
    assert_eq!(r["planner"]["hits@1"], 1.0);
    assert_eq!(r["planner"]["f1"], 1.0);
    for key in ["p50_ms", "p95_ms"] {
        assert!(r["planner"][key].is_number());
    }
    assert!(r["retrieval"]["answer_recall@10"].is_number() && r["load_s"].is_number());
    metaqa_answerable_is_read_as_given(tmp.path(), [&kb, &qa, &qt]);
}

/// helper-126 found no way to see which plan a query runs (it told the breadth-first walk
/// by `rows_examined`): `run --explain` prints the plan the query would run with the
/// parameters given, as JSON, and runs nothing (no use is recorded); its errors are the run's.
#[test]
fn run_explain_prints_the_plan_the_parameters_decide() {
    let tmp = tempfile::tempdir().unwrap();
    let store = seed42_store(tmp.path());
    let before = std::fs::read(store.join("data.redb")).unwrap();
    let plan = json(&[
        "run",
        "--store",
        p(&store),
        "neighbors",
        "--param",
        "node=bot",
        "--param",
        "depth=4",
        "--explain",
    ]);
    let expand = (plan["ops"].as_array().unwrap().iter())
        .find_map(|op| op.get("Expand"))
        .expect("an Expand");
    assert_eq!(expand["reach"], true, "{plan}");
    assert_eq!(
        plan["params"],
        serde_json::json!(["node", "depth"]),
        "{plan}"
    );
    // Planned again with what the parameters decide: the saved timeline given a kind reads
    // the kind's index, and given none the time index.
    let scan = |given: &[&str]| {
        let mut args = vec!["run", "--store", p(&store), "timeline", "--explain"];
        args.extend(given);
        json(&args)["ops"][0]["ScanEvents"]["facet"].clone()
    };
    assert_eq!(scan(&["--param", "kind=TRADE"])[0], "kind");
    assert!(scan(&[]).is_null());
    // Text too; a parameter the text does not use is refused as a run refuses it.
    let plan = json(&[
        "run",
        "--store",
        p(&store),
        "--query",
        "MATCH (a {key: 'bot'})-[r*1..2]-(b) WHERE b <> a RETURN count(*) AS n",
        "--explain",
    ]);
    assert!(!plan.to_string().contains("reach"), "{plan}");
    let err = fails(
        &[
            "run",
            "--store",
            p(&store),
            "--query",
            "MATCH (a) RETURN a.key",
            "--param",
            "x=1",
            "--explain",
        ],
        3,
    );
    assert!(
        err.contains("$x is given, but the query does not use it"),
        "{err}"
    );
    // A LIMIT the run refuses is refused by the plan too (helper-129: it showed a plan the
    // run then refused): a parameter or a literal, which it can tell without the store.
    for (query, given) in [
        ("MATCH (a) RETURN a.key LIMIT $n", "n=\"3\""),
        ("MATCH (a) RETURN a.key LIMIT $n", "n=-3"),
        ("MATCH (a) RETURN a.key LIMIT -1", ""),
        ("MATCH (a) RETURN a.key LIMIT -$n", "n=3"),
        // The negation of i64::MIN is null to a run, as to the plan (helper-131).
        ("MATCH (a) RETURN a.key LIMIT --9223372036854775808", ""),
        // Any negated literal, as the run negates it: a string's negation is null.
        ("MATCH (a) RETURN a.key LIMIT -'x'", ""),
    ] {
        let mut args = vec!["run", "--query", query, "--explain"];
        if !given.is_empty() {
            args.extend(["--param", given]);
        }
        let err = fails(&args, 3);
        assert!(
            err.contains("LIMIT takes a non-negative integer"),
            "{query} {given}: {err}"
        );
    }
    // Nothing ran: no use was recorded.
    assert_eq!(std::fs::read(store.join("data.redb")).unwrap(), before);
    // No store is read, so none need be given (helper-128); a run still needs one.
    let plan = json(&["run", "neighbors", "--param", "node=bot", "--explain"]);
    assert!(plan["ops"].is_array(), "{plan}");
    let err = fails(&["run", "neighbors", "--param", "node=bot"], 2);
    assert!(err.contains("--store"), "{err}");
}

/// helper-101 (session 46): `--answerable` lines that were no question's number were dropped
/// without a word (the qtype file given by mistake read as no question answerable), and the
/// answerable figures read 0.0 when no such file was given, as if every question were missed.
fn metaqa_answerable_is_read_as_given(tmp: &Path, [kb, qa, qt]: [&Path; 3]) {
    let bench = |answerable: Option<&Path>| {
        let mut args = vec!["bench", "metaqa", "--kb", p(kb), "--questions", p(qa)];
        args.extend(["--qtypes", p(qt), "--json", "-q"]);
        if let Some(a) = answerable {
            args.extend(["--answerable", p(a)]);
        }
        loci(&args)
    };
    let r: serde_json::Value = serde_json::from_slice(&bench(None).stdout).unwrap();
    for key in ["hits@1_answerable", "f1_answerable", "n_answerable"] {
        assert!(r["planner"][key].is_null(), "{key}: {r}");
    }
    let mut args = vec!["bench", "metaqa", "--kb", p(kb), "--questions", p(qa)];
    args.extend(["--qtypes", p(qt), "--json", "-q", "--retrieval-limit", "0"]);
    let r: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    assert!(r["retrieval"]["answer_recall@10"].is_null(), "{r}");
    let answerable = tmp.join("answerable.txt");
    std::fs::write(&answerable, "1\n").unwrap();
    let r: serde_json::Value = serde_json::from_slice(&bench(Some(&answerable)).stdout).unwrap();
    assert_eq!(r["planner"]["n_answerable"], 1);
    assert_eq!(r["planner"]["hits@1_answerable"], 1.0);
    for (text, line, says) in [
        ("0\nmovie_to_director\n", 2, "movie_to_director"),
        ("0\n2\n", 2, "0 to 1"),
        ("-1\n", 1, "-1"),
    ] {
        std::fs::write(&answerable, text).unwrap();
        let out = bench(Some(&answerable));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{text:?}: {err}");
        let at = format!("{}:{line}:", answerable.display());
        assert!(err.contains(&at) && err.contains(says), "{text:?}: {err}");
    }
}

/// A new, empty store under `tmp`, made by `loci init`.
fn empty_store(tmp: &Path) -> std::path::PathBuf {
    let store = tmp.join("store");
    ok(&["init", "--store", p(&store)]);
    store
}

/// Ingests `lines` (event JSON, one a line) into `store` from a file beside it.
fn ingest_lines(store: &Path, lines: &[&str]) {
    let file = store.with_extension("lines.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    ok(&["ingest", "--store", p(store), p(&file)]);
}

/// A store holding the committed synthetic-world fixture.
fn world_store(tmp: &Path) -> std::path::PathBuf {
    let store = empty_store(tmp);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/world-seed42.jsonl");
    ok(&["ingest", "--store", p(&store), p(&fixture)]);
    store
}

/// A question that names no entity the memory knows (typos: "emerlads for stiks") is said to
/// be ranked by text alone, where the pack listed confident facts under no seed line and
/// nothing told the user that nothing was linked (a new user's run).
#[test]
fn a_question_that_links_no_entity_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let said = "no entity the memory knows is named in the question";
    let typos = ok(&[
        "query",
        "--store",
        p(&store),
        "who trades emerlads for stiks",
    ]);
    assert!(typos.contains(said), "{typos}");
    let linked = ok(&[
        "query",
        "--store",
        p(&store),
        "who trades emeralds for sticks",
    ]);
    assert!(!linked.contains(said), "{linked}");
    // With no text hit either, it says that nothing matched, not that it ranked hits.
    let nothing = ok(&["query", "--store", p(&store), "xyzzy plugh"]);
    assert!(
        nothing.contains("nothing the memory holds matches the question")
            && !nothing.contains("best text hits"),
        "{nothing}"
    );
}

/// A number given with blanks around it is refused by every flag alike, where `--budget " 5"`
/// and `--now " 5"` were taken and `--limit " 2"` refused; a budget of one token is said in
/// the singular (a helper's probe: "1 tokens").
#[test]
fn numbers_with_blanks_are_refused_alike_and_one_token_is_one() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let s = p(&store);
    for args in [
        &["context", "--store", s, "--budget", " 5"][..],
        &["forget", "--store", s, "--budget", "5 "],
        &["forget", "--store", s, "--budget", "5", "--now", " 5"],
        &["search", "--store", s, "fletcher", "--limit", " 2"],
    ] {
        let err = fails(args, 2);
        assert!(err.contains("invalid digit"), "{args:?}: {err}");
    }
    let err = fails(&["context", "--store", s, "--budget", "1"], 3);
    assert!(err.contains("a budget of 1 token:"), "{err}");
}

/// A tool-call log ingested again, or again after it grew, applies each call once, as journals
/// and conversations do: the same file twice had doubled every observation ("file_read:
/// src/main.rs x2"; a helper's probe). A call with no time of its own cannot be told from a
/// repeat of it, and is applied each time.
#[test]
fn a_tool_call_log_ingested_again_applies_each_call_once() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let calls = tmp.path().join("calls.jsonl");
    let line = |path: &str, ts: u32| {
        format!("{{\"tool\":\"Read\",\"args\":{{\"path\":\"{path}\"}},\"ts\":{ts},\"session\":\"s1\"}}\n")
    };
    // Two identical lines are two calls: each is applied.
    std::fs::write(&calls, line("a.rs", 100) + &line("a.rs", 100)).unwrap();
    let ingest = || ingest_as(&store, &calls, "toolcalls");
    assert!(ingest().contains("committed events 1..=2"));
    let again = ingest();
    assert!(
        again.contains("skipped 2 events whose idempotency key"),
        "{again}"
    );
    // Grown by a line: only the new one is applied.
    std::fs::write(
        &calls,
        line("a.rs", 100) + &line("a.rs", 100) + &line("b.rs", 101),
    )
    .unwrap();
    let grown = ingest();
    assert!(
        grown.contains("committed events 3..=3") && grown.contains("skipped 2 events"),
        "{grown}"
    );
    // With no time of its own, a call is applied each time.
    let untimed = tmp.path().join("untimed.jsonl");
    std::fs::write(
        &untimed,
        "{\"tool\":\"Read\",\"args\":{\"path\":\"c.rs\"}}\n",
    )
    .unwrap();
    for _ in 0..2 {
        let out = ingest_as(&store, &untimed, "toolcalls");
        assert!(out.contains("committed events"), "{out}");
    }
}

/// A line that repeats an earlier line of the same input is said to be a repeat, where it was
/// said to be a key "the store already holds" of a store that held nothing (a helper's probe).
#[test]
fn a_line_repeated_in_one_input_is_said_to_repeat_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let file = tmp.path().join("j.jsonl");
    let line = r#"{"v":1,"time":100,"harness":"cc","session":"1","kind":"note","text":"same"}"#;
    std::fs::write(&file, format!("{line}\n{line}\n")).unwrap();
    let first = ingest_as(&store, &file, "journal");
    assert!(
        first.contains("committed events 1..=1")
            && first.contains("skipped 1 event repeating an earlier line of the input")
            && !first.contains("the store already holds"),
        "{first}"
    );
    // Again: both are the store's now.
    let again = ingest_as(&store, &file, "journal");
    assert!(
        again.contains("skipped 2 events whose idempotency key the store already holds")
            && !again.contains("repeating"),
        "{again}"
    );
    // In JSON, `repeated` counts the repeats among `skipped`.
    let other = tmp.path().join("k.jsonl");
    let line2 = line.replace("same", "other");
    std::fs::write(&other, format!("{line2}\n{line2}\n")).unwrap();
    let c = json(&[
        "ingest",
        "--store",
        p(&store),
        "--format",
        "journal",
        p(&other),
        "--json",
    ]);
    assert_eq!(
        (c["skipped"].as_u64(), c["repeated"].as_u64()),
        (Some(1), Some(1)),
        "{c}"
    );
}

/// Runs loci with its standard output a pipe whose reader has already gone away.
fn with_closed_stdout(args: &[&str]) -> Output {
    with_closed_pipe(args, true)
}

/// Runs loci with its standard output (`stdout`) or standard error a pipe whose reader has
/// gone away before loci writes (as `loci ... 2>&1 | head -c 1` once head has its byte).
fn with_closed_pipe(args: &[&str], stdout: bool) -> Output {
    use std::process::Stdio;
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if stdout {
        drop(child.stdout.take());
    } else {
        drop(child.stderr.take());
    }
    child.wait_with_output().unwrap()
}

#[test]
fn closed_stdout_is_a_quiet_end_of_output() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    for args in [
        vec!["search", "--store", p(&store), "emerald", "--limit", "50"],
        vec!["stats", "--store", p(&store)],
        vec!["replay", "--verify", "--store", p(&store)],
        vec!["queries"],
        vec!["completions", "bash"],
    ] {
        let out = with_closed_stdout(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "loci {args:?}: {err}");
        assert!(!err.contains("panicked"), "loci {args:?}: {err}");
    }
    // The store is intact after all of them.
    assert!(ok(&["replay", "--verify", "--store", p(&store)]).contains("OK"));
}

/// Runs loci with its standard error closed by the reader before it writes.
fn with_closed_stderr(args: &[&str]) -> std::process::ExitStatus {
    with_closed_pipe(args, false).status
}

#[test]
fn closed_stderr_ends_no_command_with_a_panic_or_an_abort() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/world-seed42.jsonl");
    // -vv logs every batch; a snapshot that is a directory logs warnings at the default level.
    let status = with_closed_stderr(&["ingest", "--store", p(&store), "-vv", p(&fixture)]);
    assert_eq!(status.code(), Some(0), "ingest -vv: {status}");
    let snapshot = store.join("state.snapshot");
    let _ = std::fs::remove_file(&snapshot);
    std::fs::create_dir(&snapshot).unwrap();
    for args in [
        vec!["stats", "--store", p(&store), "--json"],
        vec!["stats", "--store", p(&store), "--json", "-vv"],
    ] {
        let status = with_closed_stderr(&args);
        assert_eq!(status.code(), Some(0), "loci {args:?}: {status}");
    }
    std::fs::remove_dir(&snapshot).unwrap();
    assert!(ok(&["replay", "--verify", "--store", p(&store)]).contains("OK"));
}

/// Text a store holds reaches a terminal as text: a control character in an ingested payload
/// (an ANSI escape that recolours or retitles the terminal, a bell, a NUL) is printed escaped
/// by the human output of `search` and `query`, and as it is in their JSON.
#[test]
fn stored_control_characters_are_printed_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let passages = tmp.path().join("p.jsonl");
    std::fs::write(
        &passages,
        "{\"id\":\"x\",\"title\":\"Trap \\u001b[2J\",\"text\":\"emerald \\u001b]0;pwned\\u0007 \\u001b[31mred\\u0000 end\"}\n",
    )
    .unwrap();
    ok(&[
        "ingest",
        "--store",
        p(&store),
        "--format",
        "passages",
        p(&passages),
    ]);
    for args in [
        vec!["search", "--store", p(&store), "emerald"],
        vec!["query", "--store", p(&store), "emerald"],
    ] {
        let out = ok(&args);
        assert!(out.contains("Trap"), "loci {args:?}: {out}");
        assert!(
            !out.chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "loci {args:?} printed a raw control character: {out:?}"
        );
        assert!(out.contains("\\u{1b}"), "loci {args:?}: {out}");
    }
    // So is a character that reorders the rest of its line on screen (a right-to-left
    // override, in the question echoed back; session 25 probe) or breaks it (U+2028).
    for question in ["emerald\u{202e} sticks", "emerald\u{2028}sticks"] {
        let out = ok(&["query", "--store", p(&store), question]);
        assert!(
            !out.contains('\u{202e}') && !out.contains('\u{2028}'),
            "{question:?}: {out:?}"
        );
        assert!(
            out.contains("\\u{202e}") || out.contains("\\u{2028}"),
            "{question:?}: {out}"
        );
    }
}

#[test]
fn ingest_finishes_when_stdout_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/world-seed42.jsonl");
    let lines = std::fs::read_to_string(&fixture).unwrap().lines().count() as u64;
    let out = with_closed_stdout(&[
        "ingest",
        "--store",
        p(&store),
        "--commit-every",
        "1",
        p(&fixture),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("standard output was closed"), "{err}");
    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(
        stats["events"].as_u64().unwrap(),
        lines,
        "every event committed"
    );
}

#[test]
fn saved_queries_are_built_in_and_work_from_any_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let list = ok_in("/", &["queries", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let names = each(&list, |q| q["name"].as_str().unwrap().to_string());
    assert!(names.contains(&"where_is_home".to_string()), "{names:?}");
    ok_in(
        "/",
        &["run", "--store", p(&store), "where_is_home", "--json"],
    );
    // A user's own directory adds queries (and may refine a built-in one).
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(
        mine.join("count_nodes.gq"),
        "// name: count_nodes\n// description: How many nodes.\nMATCH (n) RETURN count(n) AS n\n",
    )
    .unwrap();
    let list = json(&["queries", "--queries", p(&mine), "--json"]);
    let names = each(&list, |q| q["name"].as_str().unwrap().to_string());
    assert!(
        names.contains(&"count_nodes".to_string()) && names.contains(&"find_trade".to_string())
    );
    // An unknown name: not found (4), with the error said once.
    let err = fails(&["run", "--store", p(&store), "no_such_query"], 4);
    assert_eq!(err.matches("no saved query").count(), 1, "{err}");
}

#[test]
fn exit_codes_tell_failures_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    // Usage.
    assert_eq!(loci(&["search"]).status.code(), Some(2));
    // Bad input: a query that does not parse, a bad parameter.
    let q = loci(&["run", "--store", p(&store), "--query", "MATCH (a RETURN a"]);
    assert_eq!(q.status.code(), Some(3));
    let q = loci(&[
        "run",
        "--store",
        p(&store),
        "last_night",
        "--param",
        "day=x",
    ]);
    assert_eq!(q.status.code(), Some(3));
    // Not found: a missing input file, a missing store.
    let f = loci(&["ingest", "--store", p(&store), "/no/such/file.jsonl"]);
    assert_eq!(f.status.code(), Some(4));
    let s = loci(&["stats", "--store", "/no/such/store"]);
    assert_eq!(s.status.code(), Some(4));
    // Corrupt: a store whose manifest is garbage.
    let bad = tmp.path().join("bad-store");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("loci.json"), "garbage").unwrap();
    assert_eq!(loci(&["stats", "--store", p(&bad)]).status.code(), Some(6));
    // A directory that holds no store is "not found", not "corrupt"; a second init of the
    // same store is bad input.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = loci(&["stats", "--store", p(&empty)]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !empty.join("lock").exists(),
        "reading a non-store leaves nothing behind"
    );
    assert_eq!(loci(&["init", "--store", p(&store)]).status.code(), Some(3));
}

#[test]
fn store_comes_from_loci_store_variable() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let out = Command::new(BIN)
        .args(["stats", "--json"])
        .env("LOCI_STORE", &store)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["events"].as_u64().unwrap() > 0);
}

#[test]
fn negative_times_are_values_not_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let out = ok(&[
        "search",
        "--store",
        p(&store),
        "emerald",
        "--from",
        "-5",
        "--to",
        "-1",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["kind"] == "node" || h["ts"].as_i64().unwrap() <= -1));
}

/// A "now" or an "at" is a world time, within the ±2^61 the store takes: a probe found
/// `neighbors --now` taking i64::MIN and judging every fact from there. Refused at the flag,
/// as a usage error that names it; ±2^61 itself is a time.
#[test]
fn a_world_time_flag_past_the_store_range_is_refused_at_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let s = p(&store);
    let min = i64::MIN.to_string();
    let past = ((1i64 << 61) + 1).to_string();
    for args in [
        vec!["neighbors", "--store", s, "npc:fletcher:0", "--now", &min],
        vec!["neighbors", "--store", s, "npc:fletcher:0", "--now", &past],
        vec!["forget", "--store", s, "--budget", "10", "--now", &min],
        vec!["consolidate", "--store", s, "--until", &past],
        vec!["query", "--store", s, "where is kalomi", "--as-of", &min],
    ] {
        let out = loci(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let flag = args[args.len() - 2];
        assert!(
            err.contains(flag) && err.contains("2^61"),
            "{args:?}: {err}"
        );
    }
    let edge = (1i64 << 61).to_string();
    ok(&["neighbors", "--store", s, "npc:fletcher:0", "--now", &edge]);
}

/// A query error printed by the CLI keeps its excerpt whole under the carets: every error is
/// shortened word by word, and a run of joined emoji in the excerpt was cut to its start and
/// length, which moved the error from above its caret (a helper's probe).
#[test]
fn a_query_error_excerpt_is_printed_whole_above_its_caret() {
    use unicode_width::UnicodeWidthStr;
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}".repeat(40);
    let query = format!("MATCH (n) WHERE n.key <> \"{family}\" RETURN n.key LIMIT -1");
    let err = fails(&["run", "--store", p(&store), "--query", &query], 3);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].contains("LIMIT takes a non-negative integer"),
        "{err}"
    );
    let (excerpt, carets) = (lines[1], lines[2]);
    assert!(!excerpt.contains("bytes)"), "{err}");
    let at = excerpt.rfind("-1").unwrap();
    assert_eq!(carets.find('^'), Some(excerpt[..at].width()), "{err}");
    // So does one in a saved query's file, found as it is loaded, which had still been
    // shortened (a helper's review), or as it runs, which had not named the file.
    let file = tmp.path().join("family.gq");
    for (query, says, under) in [
        (
            format!("MATCH (n) WHERE n.key <> \"{family}\" RETURN m.key"),
            "family.gq:3: query: line 3, column 236: unknown variable m",
            "m.key",
        ),
        (
            query,
            "family.gq:3: query: line 3, column 248: LIMIT takes a non-negative integer",
            "-1",
        ),
    ] {
        std::fs::write(
            &file,
            format!("// name: family\n// description: emoji\n{query}\n"),
        )
        .unwrap();
        let err = fails(&["run", "--store", p(&store), p(&file)], 3);
        let lines: Vec<&str> = err.lines().collect();
        assert!(lines[0].contains(says), "{err}");
        let (excerpt, carets) = (lines[1], lines[2]);
        assert!(!excerpt.contains("bytes)"), "{err}");
        let at = excerpt.rfind(under).unwrap();
        assert_eq!(carets.find('^'), Some(excerpt[..at].width()), "{err}");
    }
}

#[test]
fn search_rows_use_the_pack_vocabulary() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let rows = json(&["search", "--store", p(&store), "fletcher", "--json"]);
    assert!(!rows.as_array().unwrap().is_empty());
    for r in rows.as_array().unwrap() {
        assert!(r.get("type").is_none(), "{r}");
        assert!(r["kind"] == "node" || r["kind"] == "event", "{r}");
        assert!(r["id"].is_string(), "{r}");
        // Scores keep the digits of an f32, not the noise of its widening.
        let score = r["score"].to_string();
        assert!(score.len() < 12, "{score}");
    }
}

#[test]
fn odd_input_files_are_read_or_rejected_with_their_line() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let write = |name: &str, bytes: &[u8]| {
        let f = tmp.path().join(name);
        std::fs::write(&f, bytes).unwrap();
        f
    };
    // A byte-order mark and CRLF line endings are accepted.
    let bom = write(
        "bom.jsonl",
        b"\xEF\xBB\xBF{\"ts\":1,\"kind\":\"K\"}\r\n{\"ts\":2,\"kind\":\"K\"}\r\n",
    );
    assert!(ok(&["ingest", "--store", p(&store), p(&bom)]).contains("committed events 1..=2"));
    // Invalid UTF-8: its line, and the OS message is not repeated.
    let bin = write(
        "bin.jsonl",
        b"{\"ts\":1,\"kind\":\"K\"}\n\xFF\xFE\x00binary\n",
    );
    let err = fails(&["ingest", "--store", p(&store), p(&bin)], 3);
    assert!(
        err.contains(&format!("{}:2: line: not UTF-8", bin.display())),
        "{err}"
    );
    // An empty file commits nothing and says so.
    let empty = write("empty.jsonl", b"");
    let out = ok(&[
        "ingest",
        "--store",
        p(&store),
        "--format",
        "events",
        p(&empty),
    ]);
    assert!(out.contains("nothing to commit"), "{out}");
    // A wrong type names its field; an integer beyond i64 is refused, not rounded.
    let wrong = write("wrong.jsonl", b"{\"ts\":\"soon\",\"kind\":\"K\"}\n");
    let err = String::from_utf8_lossy(
        &loci(&[
            "ingest",
            "--store",
            p(&store),
            "--format",
            "events",
            p(&wrong),
        ])
        .stderr,
    )
    .to_string();
    assert!(err.contains("wrong.jsonl:1: ts: invalid type"), "{err}");
    let big = write(
        "big.jsonl",
        b"{\"ts\":1,\"kind\":\"K\",\"payload\":{\"n\":18446744073709551615}}\n",
    );
    let err = String::from_utf8_lossy(&loci(&["ingest", "--store", p(&store), p(&big)]).stderr)
        .to_string();
    assert!(
        err.contains("big.jsonl:1: payload") && err.contains("write it as a string"),
        "{err}"
    );
    // A triple's bad confidence names `confidence`, not `p`.
    let triples = write(
        "t.jsonl",
        b"{\"doc\":\"d1\",\"s\":\"A\",\"p\":\"knows\",\"o\":\"B\",\"confidence\":7}\n",
    );
    ok(&[
        "ingest",
        "--store",
        p(&store),
        "--format",
        "passages",
        p(&write(
            "d.jsonl",
            b"{\"id\":\"d1\",\"title\":\"D\",\"text\":\"x\"}\n",
        )),
    ]);
    let err = String::from_utf8_lossy(&loci(&["ingest", "--store", p(&store), p(&triples)]).stderr)
        .to_string();
    assert!(err.contains("t.jsonl:1: confidence:"), "{err}");
    // The store holds exactly the two good events and the passage.
    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(stats["events"], 3);
}

#[test]
fn demo_exit_code_says_whether_answers_match() {
    let out = loci(&["demo", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["matches_ground_truth"], true);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn passage_ids_never_collide_silently() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let a = tmp.path().join("a.jsonl");
    let b = tmp.path().join("b.jsonl");
    std::fs::write(
        &a,
        "{\"id\":\"p0\",\"title\":\"Alpha\",\"text\":\"first corpus\"}\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "{\"id\":\"p0\",\"title\":\"Beta\",\"text\":\"second corpus\"}\n",
    )
    .unwrap();
    ok(&["ingest", "--store", p(&store), p(&a)]);
    // The same file again: nothing new (no doubled events or hits).
    let again = ok(&["ingest", "--store", p(&store), p(&a)]);
    assert!(
        again.contains("skipped 1 passage the store already holds"),
        "{again}"
    );
    assert_eq!(
        json(&["stats", "--store", p(&store), "--json"])["events"],
        1
    );
    // Another corpus numbering its passages alike: refused, naming the line and the way out.
    let err = fails(&["ingest", "--store", p(&store), p(&b)], 3);
    assert!(
        err.contains(&format!(
            "{}:1: id: passage id \"p0\" already holds another passage",
            b.display()
        )),
        "{err}"
    );
    // A clash after a line the store already held names the store as the holder, not that
    // line, which was skipped (a helper's probe).
    let c = tmp.path().join("c.jsonl");
    std::fs::write(
        &c,
        "{\"id\":\"p0\",\"title\":\"Alpha\",\"text\":\"first corpus\"}\n\
         {\"id\":\"p0\",\"title\":\"Gamma\",\"text\":\"third corpus\"}\n",
    )
    .unwrap();
    let err =
        String::from_utf8_lossy(&loci(&["ingest", "--store", p(&store), p(&c)]).stderr).to_string();
    assert!(
        err.contains(&format!(
            "{}:2: id: passage id \"p0\" already holds another passage (\"Alpha\", from the store)",
            c.display()
        )),
        "{err}"
    );
    // An id that is the key of a node other than a passage names what the node is, and is
    // refused even with --replace, which had made the person a passage (a helper's probe).
    let person = tmp.path().join("person.jsonl");
    std::fs::write(
        &person,
        r#"{"ts":1,"actor":"bot","kind":"NOTE","assert":[{"op":"node","key":"p1","label":"Person","name":"Bob"}]}"#,
    )
    .unwrap();
    ok(&["ingest", "--store", p(&store), p(&person)]);
    let d = tmp.path().join("d.jsonl");
    std::fs::write(&d, "{\"id\":\"p1\",\"title\":\"Delta\",\"text\":\"x\"}\n").unwrap();
    for extra in [&[][..], &["--replace"][..]] {
        let mut args = vec!["ingest", "--store", p(&store), p(&d)];
        args.extend_from_slice(extra);
        let err = fails(&args, 3);
        assert!(
            err.contains("is the key of a Person node (\"Bob\") in the store, not a passage's"),
            "{extra:?}: {err}"
        );
    }
    let bob = json(&["search", "--store", p(&store), "Bob", "--json"]);
    assert!(bob.to_string().contains("Person"), "{bob}");
    // Under a namespace both live; --replace overwrites.
    ok(&["ingest", "--store", p(&store), "--namespace", "beta", p(&b)]);
    let hits = json(&["search", "--store", p(&store), "corpus", "--json"]);
    let ids = each(&hits, |h| h["id"].as_str().unwrap().to_string());
    assert!(
        ids.contains(&"p0".to_string()) && ids.contains(&"beta/p0".to_string()),
        "{ids:?}"
    );
    ok(&["ingest", "--store", p(&store), "--replace", p(&b)]);
    let hits = json(&["search", "--store", p(&store), "first", "--json"]);
    assert!(each(&hits, |h| h["id"].as_str().unwrap().to_string())
        .iter()
        .all(|i| i != "p0"));
    assert!(ok(&["replay", "--verify", "--store", p(&store)]).contains("OK"));
}

#[test]
fn reingesting_keyed_events_reports_them_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let file = tmp.path().join("events.jsonl");
    std::fs::write(
        &file,
        "{\"ts\":1,\"kind\":\"DEATH\",\"idempotency_key\":\"d1\"}\n{\"ts\":2,\"kind\":\"TRADE\",\"idempotency_key\":\"t1\"}\n",
    )
    .unwrap();
    ok(&["init", "--store", p(&store)]);
    let first = ok(&["ingest", "--store", p(&store), p(&file)]);
    assert!(first.contains("committed events 1..=2"), "{first}");
    for extra in [&[][..], &["--commit-every", "1"][..]] {
        let mut args = vec!["ingest", "--store", p(&store), p(&file)];
        args.extend_from_slice(extra);
        let again = ok(&args);
        assert_eq!(
            again.trim(),
            "skipped 2 events whose idempotency key the store already holds",
            "{extra:?}"
        );
    }
    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(stats["events"], 2);
    let c = json(&["ingest", "--store", p(&store), p(&file), "--json"]);
    assert_eq!(
        (c["events"].as_u64(), c["skipped"].as_u64()),
        (Some(0), Some(2))
    );
    // One is said as one: a probe read "skipped 1 events".
    let one = tmp.path().join("one.jsonl");
    std::fs::write(
        &one,
        "{\"ts\":3,\"kind\":\"NOTE\",\"idempotency_key\":\"n1\"}\n",
    )
    .unwrap();
    ok(&["ingest", "--store", p(&store), p(&one)]);
    assert_eq!(
        ok(&["ingest", "--store", p(&store), p(&one)]).trim(),
        "skipped 1 event whose idempotency key the store already holds"
    );
}

/// helper-100 (session 46): an integer past every integer type was read as the nearest float
/// and kept so, without a word.
#[test]
fn an_ingested_integer_no_type_holds_is_refused_by_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let file = tmp.path().join("e.jsonl");
    std::fs::write(
        &file,
        "{\"ts\":1,\"kind\":\"NOTE\"}\n{\"ts\":2,\"kind\":\"NOTE\",\"payload\":{\"n\":[1,99999999999999999999999]}}\n",
    )
    .unwrap();
    let out = loci(&["ingest", "--store", p(&store), p(&file)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "{}:2: payload.n[1]: integer 99999999999999999999999",
            p(&file)
        )),
        "{err}"
    );
    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(stats["events"], 0, "a failed batch writes nothing");
}

/// helper-97 #17: a retry of a deleted event is skipped (its key outlives it, so the retry
/// does not bring it back), and the skip said only that the store held the key, as if the
/// event were there.
#[test]
fn a_retry_of_a_deleted_event_says_its_event_was_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let file = tmp.path().join("events.jsonl");
    std::fs::write(
        &file,
        "{\"ts\":1,\"kind\":\"NOTE\",\"idempotency_key\":\"a\"}\n{\"ts\":2,\"kind\":\"NOTE\",\"idempotency_key\":\"b\"}\n",
    )
    .unwrap();
    ok(&["init", "--store", p(&store)]);
    ok(&["ingest", "--store", p(&store), p(&file)]);
    ok(&["delete", "--store", p(&store), "--event", "1"]);
    assert_eq!(
        ok(&["ingest", "--store", p(&store), p(&file)]).trim(),
        "skipped 2 events whose idempotency key the store already holds \
         (1 held by an event since deleted or forgotten: a retry does not bring it back)"
    );
    let c = json(&["ingest", "--store", p(&store), p(&file), "--json"]);
    assert_eq!(
        (c["skipped"].as_u64(), c["skipped_deleted"].as_u64()),
        (Some(2), Some(1))
    );
}

/// Found by the session 24 probe: a streamed ingest that met a bad line after some commits
/// said what was wrong, but not that the commits before it stand, nor where to resume.
#[test]
fn a_streamed_ingest_stopped_by_a_bad_line_says_where_the_store_is() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let file = tmp.path().join("events.jsonl");
    // The first round of lines (four commits' worth) is read and committed before the bad
    // line's round is read.
    let round = loci::ingest::MIN_ROUND_LINES;
    let event = |t: usize| format!("{{\"ts\":{t},\"kind\":\"SEEN\"}}");
    let mut lines: Vec<String> = (1..=round + 100).map(event).collect();
    lines.push("{bad".into());
    lines.extend((round + 102..=round + 110).map(event));
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    ok(&["init", "--store", p(&store)]);
    let every = (round / 4).to_string();
    let out = loci(&[
        "ingest",
        "--store",
        p(&store),
        "--commit-every",
        &every,
        p(&file),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("events.jsonl:{}", round + 101)),
        "{err}"
    );
    // The note follows the error it is about (session 24 probe: it came first).
    assert!(
        err.find("error:").unwrap() < err.find("commits before the error").unwrap(),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "the commits before the error stand (events ..={round})"
        )) && err.contains(&format!("through {} line {round},", p(&file))),
        "{err}"
    );
    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(stats["events"], round);
    // Before any commit, it says nothing was written.
    let first_bad = tmp.path().join("first.jsonl");
    std::fs::write(&first_bad, "{bad\n").unwrap();
    let out = loci(&[
        "ingest",
        "--store",
        p(&store),
        "--commit-every",
        "10",
        p(&first_bad),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing was written"), "{err}");
}

#[test]
fn ingest_check_reports_without_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let good = tmp.path().join("good.jsonl");
    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(
        &good,
        "{\"ts\":1,\"kind\":\"SEEN\",\"assert\":[{\"op\":\"node\",\"key\":\"cow\"}],\"idempotency_key\":\"s1\"}\n{\"ts\":2,\"kind\":\"SEEN\"}\n",
    )
    .unwrap();
    std::fs::write(
        &bad,
        "{\"ts\":1,\"kind\":\"SEEN\"}\n{\"ts\":2,\"kind\":\"SEEN\",\"assert\":[{\"op\":\"edge\",\"from\":\"cow\",\"rel\":\"IN\",\"to\":\"barn\"}]}\n",
    )
    .unwrap();
    ok(&["init", "--store", p(&store)]);
    let out = ok(&["ingest", "--store", p(&store), "--check", p(&good)]);
    assert!(
        out.contains("nothing written. Would commit 2 events (1 node and 0 edges upserted"),
        "{out}"
    );
    assert_eq!(
        json(&["stats", "--store", p(&store), "--json"])["events"],
        0
    );
    let err = fails(&["ingest", "--store", p(&store), "--check", p(&bad)], 3);
    assert!(
        err.contains("bad.jsonl:2: assert[0].from: unknown node \"cow\""),
        "{err}"
    );
    // After the real ingest the check sees the applied key.
    ok(&["ingest", "--store", p(&store), p(&good)]);
    let c = json(&[
        "ingest",
        "--store",
        p(&store),
        "--check",
        "--json",
        p(&good),
    ]);
    assert_eq!(
        (c["events"].as_u64(), c["skipped"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        json(&["stats", "--store", p(&store), "--json"])["events"],
        2
    );
}

#[test]
fn query_json_is_byte_identical_across_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let args = [
        "query",
        "--store",
        p(&store),
        "who trades emeralds for sticks",
        "--json",
        "--no-record",
    ];
    let first = ok(&args);
    assert!(!first.contains("elapsed_us"), "{first}");
    for _ in 0..3 {
        assert_eq!(ok(&args), first);
    }
}

#[test]
fn a_question_asked_again_finds_its_answers_hot() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let args = [
        "query",
        "--store",
        p(&store),
        "who trades emeralds for sticks",
        "--json",
    ];
    let hot = |pack: &serde_json::Value| {
        pack["snippets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["parts"]["usage"] == 1.0)
            .count()
    };
    let hot_edges = || {
        json(&["stats", "--store", p(&store), "--json"])["tiers"]["hot_edges"]
            .as_u64()
            .unwrap()
    };
    // Facts of pinned nodes (home) are hot from the start.
    let pinned_only = hot_edges();
    let first = json(&args);
    assert_eq!(hot(&first), 0);
    // Two reads, flushed as each process exits: the facts it returned are hot now.
    let _second = json(&args);
    let third = json(&args);
    assert!(hot(&third) >= 5, "{third}");
    assert!(hot_edges() >= pinned_only + 5);
    let verify = ok(&["replay", "--store", p(&store), "--verify"]);
    assert!(verify.contains("OK"), "{verify}");
}

#[test]
fn closed_stderr_is_no_panic_after_a_commit() {
    use std::process::Stdio;
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let world = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/world-seed42.jsonl");
    // `2>&1 | head -c 100` closes both: the ingest's notes on stderr must not panic it.
    let mut child = Command::new(BIN)
        .args([
            "ingest",
            "--store",
            p(&store),
            "--commit-every",
            "1",
            p(&world),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(stats["events"], 49);
    // A failure whose message cannot be written still exits with its code.
    let mut child = Command::new(BIN)
        .args(["neighbors", "--store", p(&store), "no such node"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    assert_eq!(child.wait().unwrap().code(), Some(4));
}

#[test]
fn neighbors_json_prints_confidences_without_float_noise() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let out = ok(&[
        "neighbors",
        "--store",
        p(&store),
        "npc:fletcher:rumour",
        "--json",
    ]);
    assert!(out.contains("\"stored_confidence\": 0.3,"), "{out}");
    assert!(!out.contains("0.3000000"), "{out}");
    let run = ok(&[
        "run",
        "--store",
        p(&store),
        "--json",
        "--query",
        "MATCH (v {key: 'npc:fletcher:rumour'})-[o:OFFERS]->(i) RETURN o",
    ]);
    assert!(run.contains("\"confidence\": 0.3"), "{run}");
    assert!(!run.contains("0.3000000"), "{run}");
}

/// Splits a shell command line on spaces, keeping double-quoted words whole.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The README's first-session example, run as written (its store in a temporary directory):
/// every output line it shows must be a line the command prints.
#[test]
fn readme_first_session_runs_as_written() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme
        .find("<!-- readme-example")
        .expect("the example marker");
    let block = &readme[start..];
    let block = &block[block.find("```console\n").unwrap() + 11..];
    let block = &block[..block.find("```").unwrap()];
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("loci-demo");
    let mut commands: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for line in block.lines() {
        let line = line.replace("/tmp/loci-demo", p(&store));
        match line.strip_prefix("$ loci ") {
            Some(cmd) => commands.push((shell_words(cmd), Vec::new())),
            None => commands.last_mut().unwrap().1.push(line),
        }
    }
    assert!(commands.len() >= 4);
    for (args, shown) in commands {
        let out = ok_in(env!("CARGO_MANIFEST_DIR"), &args);
        let printed = String::from_utf8_lossy(&out.stdout);
        let printed: Vec<&str> = printed.lines().map(str::trim_end).collect();
        for line in shown {
            assert!(
                printed.contains(&line.trim_end()),
                "{args:?} did not print {line:?}; it printed:\n{}",
                printed.join("\n")
            );
        }
    }
}

#[test]
fn a_store_file_that_is_not_a_database_exits_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    std::fs::write(store.join("data.redb"), vec![0x5a; 8192]).unwrap();
    let out = loci(&["stats", "--store", p(&store)]);
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("data.redb"), "{err}");
}

/// An emptied log file is refused as damage by every command, reading or writing, and left as
/// it is. redb had made a new database in its place on `loci search` (a reading command), and
/// the store then failed with "meta table has format None".
#[test]
fn an_emptied_log_file_is_refused_as_damage_and_left_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let data = store.join("data.redb");
    std::fs::write(&data, b"").unwrap();
    for args in [
        &["search", "--store", p(&store), "stick"][..],
        &["stats", "--store", p(&store)],
        &["replay", "--store", p(&store), "--verify"],
    ] {
        let out = loci(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{args:?}: {err}");
        assert!(err.contains("data.redb") && err.contains("empty"), "{err}");
        assert_eq!(std::fs::metadata(&data).unwrap().len(), 0, "{args:?}");
    }
}

/// A store whose loci.json is gone still holds its log: it is reported as damaged, not as no
/// store with the advice to `loci init` there, and `loci init` does not start a new store over
/// the log. init had written a manifest beside it: the store read as empty, and the next
/// ingest wrote over the log's first events (a probe's finding).
#[test]
fn a_log_without_its_manifest_is_not_taken_for_a_new_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let events = |store: &Path| json(&["stats", "--store", p(store), "--json"])["events"].clone();
    let before = events(&store);
    let manifest = std::fs::read(store.join("loci.json")).unwrap();
    std::fs::remove_file(store.join("loci.json")).unwrap();
    let out = loci(&["stats", "--store", p(&store)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(
        err.contains("loci.json") && err.contains("data.redb"),
        "{err}"
    );
    assert!(!err.contains("create one with"), "{err}");
    let out = loci(&["init", "--store", p(&store)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("data.redb"), "{err}");
    assert!(!store.join("loci.json").exists());
    // Nor a store of the other backend beside it.
    // The refusals say what mends it: repair writes the manifest again from the log's meta
    // table (helper-148: "restore loci.json from a backup").
    assert!(err.contains("loci repair"), "{err}");
    let out = loci(&["init", "--store", p(&store), "--backend", "sled"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(err.contains("loci repair"), "{err}");
    assert!(!store.join("loci.json").exists());
    let out = ok(&["repair", "--store", p(&store)]);
    assert!(
        out.contains("loci.json, gone or damaged, was written again"),
        "{out}"
    );
    assert_eq!(std::fs::read(store.join("loci.json")).unwrap(), manifest);
    assert_eq!(events(&store), before);
    ok(&["replay", "--store", p(&store), "--verify"]);
}

/// A backend that panics on its damaged file while opening it exits 6 (a corrupt store), as
/// it does when it panics reading a table. It had exited 8, a failure of the machine.
#[test]
fn a_backend_panic_on_a_damaged_file_exits_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let data = store.join("data.redb");
    let mut bytes = std::fs::read(&data).unwrap();
    let mut panicked = 0;
    // Damage a read does not reach is not noticed; damage that fails a command fails it as
    // corrupt.
    for at in [8192usize, 32768, 65536] {
        let saved = bytes.clone();
        bytes[at..at + 8].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef]);
        std::fs::write(&data, &bytes).unwrap();
        for args in [
            &["stats", "--store", p(&store)][..],
            &["replay", "--store", p(&store), "--verify"],
        ] {
            let out = loci(args);
            let err = String::from_utf8_lossy(&out.stderr);
            if out.status.code() != Some(0) {
                assert_eq!(
                    out.status.code(),
                    Some(6),
                    "damage at {at}, {args:?}: {err}"
                );
                // Said once: the marker that makes it damage adds no words of its own.
                assert_eq!(err.matches("probably damaged").count(), 1, "{err}");
                assert!(!err.contains("backend panicked"), "{err}");
            }
            panicked += usize::from(err.contains("panicked"));
        }
        bytes = saved;
    }
    assert!(panicked > 0, "no damage tried made redb panic");
}

/// sled's report of a damaged file is printed once, without its empty backtrace: trimming the
/// message had left sled's own error as its cause, printed after it whole.
#[test]
fn a_damaged_sled_store_is_reported_once_and_exits_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    ok(&["init", "--store", p(&store), "--backend", "sled"]);
    let db = store.join("sled").join("db");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .unwrap()
        .set_len(100)
        .unwrap();
    let out = loci(&["stats", "--store", p(&store)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert_eq!(err.matches("corrupted data").count(), 1, "{err}");
    assert!(!err.contains("backtrace"), "{err}");
}

/// A failed write of standard output says it was standard output: on a full device the
/// message had been only "No space left on device", as if the store were full.
#[test]
fn a_full_standard_output_is_named_in_the_error() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // not on this system
    };
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    for args in [
        &["search", "--store", p(&store), "emerald"][..],
        &["search", "--store", p(&store), "emerald", "--json"],
        &["stats", "--store", p(&store)],
        &["world", "--out", "-"],
        &["completions", "bash"],
    ] {
        let out = Command::new(BIN)
            .args(args)
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(err.contains("standard output"), "{args:?}: {err}");
    }
    // A file given with --out is named as well (session 24 probe: "No space left on device"
    // alone).
    let out = loci(&["world", "--out", "/dev/full"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert!(err.contains("writing /dev/full"), "{err}");
    // An ingest goes on without its report, and says why it stopped printing: the device is
    // full, not a reader gone.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/world-seed42.jsonl");
    let fresh = empty_store(&tmp.path().join("fresh"));
    let out = Command::new(BIN)
        .args(["ingest", "--store", p(&fresh), p(&fixture)])
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("No space left") && !err.contains("was closed"),
        "{err}"
    );
}

#[test]
fn delete_node_takes_the_events_of_a_key_retracted_since() {
    // `delete --node` takes every event that names a key, for a person's data, but refused
    // a key the graph no longer holds ("not found"), though the events that asserted it, the
    // pin and the retraction were all in the log; `check`'s "pin points nowhere" could not be
    // cleared either (a helper's probe).
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    ok(&["pin", "--store", p(&store), "npc:fletcher:1"]);
    ingest_lines(
        &store,
        &[
            r#"{"ts":200000,"actor":"bot","kind":"NOTE","assert":[{"op":"retract_node","key":"npc:fletcher:1"}]}"#,
        ],
    );
    let check = loci(&["check", "--store", p(&store)]);
    assert_eq!(check.status.code(), Some(1));
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        said.contains("pin points nowhere") && said.contains("loci delete --node"),
        "the finding says how to clear it: {said}"
    );
    // Unpinning is an upsert, which would make the node again: refused, saying what clears it.
    let unpin = loci(&["unpin", "--store", p(&store), "npc:fletcher:1"]);
    assert_eq!(unpin.status.code(), Some(4));
    let err = String::from_utf8_lossy(&unpin.stderr);
    assert!(err.contains("loci delete --node"), "{err}");
    let report = json(&[
        "delete",
        "--store",
        p(&store),
        "--node",
        "npc:fletcher:1",
        "--json",
    ]);
    assert!(report["deleted"].as_array().unwrap().len() >= 3, "{report}");
    ok(&["check", "--store", p(&store)]);
    ok(&["replay", "--store", p(&store), "--verify"]);
    let timeline = ok(&["run", "--store", p(&store), "timeline"]);
    assert!(!timeline.contains("fletcher:1"), "{timeline}");
    // A key no event names is still refused: a typo deletes nothing.
    let out = loci(&["delete", "--store", p(&store), "--node", "npc:no-such-key"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("npc:no-such-key"));
}

#[test]
fn checks_hint_for_a_dangling_pin_runs_as_printed() {
    // The hint quoted the key as Rust does: `--node "-x"` is a flag to the shell's reader and
    // `"$HOME"` expands (a helper's second probe). It is now one shell word, as given.
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    ingest_lines(
        &store,
        &[
            r#"{"ts":1,"actor":"bot","kind":"NOTE","assert":[{"op":"node","key":"-x $HOME 'q'","pinned":true}]}"#,
            r#"{"ts":2,"actor":"bot","kind":"NOTE","assert":[{"op":"retract_node","key":"-x $HOME 'q'"}]}"#,
        ],
    );
    let check = loci(&["check", "--store", p(&store)]);
    let said = String::from_utf8_lossy(&check.stdout);
    let hint = r#"loci delete --node='-x $HOME '\''q'\'''"#;
    assert!(said.contains(hint), "{said}");
    // What the shell gives loci for that word.
    ok(&["delete", "--store", p(&store), "--node=-x $HOME 'q'"]);
    ok(&["check", "--store", p(&store)]);
}

#[test]
fn delete_takes_several_events_or_keys_after_one_flag() {
    // The README's `--event SEQ... --node KEY...`: `--event 3 4` was a usage error (exit 2).
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let report = json(&[
        "delete",
        "--store",
        p(&store),
        "--event",
        "3",
        "4",
        "--json",
    ]);
    let deleted: Vec<u64> = each(&report["deleted"], |s| s.as_u64().unwrap());
    assert!(deleted.contains(&3) && deleted.contains(&4), "{report}");
    let report = json(&[
        "delete",
        "--store",
        p(&store),
        "--node",
        "npc:fletcher:0",
        "npc:fletcher:1",
        "--json",
    ]);
    assert!(report["nodes_removed"].as_u64().unwrap() >= 2, "{report}");
    ok(&["replay", "--store", p(&store), "--verify"]);
}

#[test]
fn delete_node_says_which_nodes_lost_their_pin_with_the_events() {
    // One pin event named two nodes; deleting the first node took the event whole, and the
    // second, which stays, lost its pin without a word (a helper's probe).
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    ok(&[
        "pin",
        "--store",
        p(&store),
        "npc:fletcher:0",
        "item:emerald",
    ]);
    let out = ok(&["delete", "--store", p(&store), "--node", "npc:fletcher:0"]);
    assert!(
        out.contains("lost its pin")
            && out.contains("\"item:emerald\"")
            && out.contains("loci pin"),
        "{out}"
    );
    ok(&["pin", "--store", p(&store), "npc:fletcher:1", "item:stick"]);
    let report = json(&[
        "delete",
        "--store",
        p(&store),
        "--node",
        "npc:fletcher:1",
        "--json",
    ]);
    assert_eq!(report["nodes_unpinned"], serde_json::json!(["item:stick"]));
}

#[test]
fn quiet_keeps_the_status_lines_off_standard_error() {
    // `-q` is "only errors on stderr", yet `context` printed its token count there and
    // `world` its "wrote" line (a helper's second probe).
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    for args in [
        vec![
            "-q",
            "context",
            "--store",
            p(&store),
            "--budget",
            "300",
            "--no-record",
        ],
        vec![
            "context",
            "--store",
            p(&store),
            "--budget",
            "300",
            "--no-record",
            "-q",
        ],
    ] {
        let out = loci(&args);
        assert!(out.status.success());
        assert!(!out.stdout.is_empty());
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
    }
    let file = tmp.path().join("w.jsonl");
    let out = loci(&["-q", "world", "--out", p(&file)]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    // Without it, the status is there.
    let out = loci(&[
        "context",
        "--store",
        p(&store),
        "--budget",
        "300",
        "--no-record",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("of 300 tokens"));
}

#[test]
fn pin_and_unpin_nodes_by_key() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    // The world pins the bot already: the event names the one node it changes.
    let out = ok(&["pin", "--store", p(&store), "npc:fletcher:1", "bot"]);
    assert!(out.starts_with("pinned 1 node (event "), "{out}");
    let r = json(&[
        "run",
        "--store",
        p(&store),
        "--json",
        "--query",
        "MATCH (n) WHERE n.pinned = true RETURN n.key ORDER BY n.key",
    ]);
    let keys: Vec<&str> = each(&r["rows"], |row| row[0].as_str().unwrap());
    assert!(
        keys.contains(&"npc:fletcher:1") && keys.contains(&"bot"),
        "{keys:?}"
    );
    let out = ok(&["unpin", "--store", p(&store), "npc:fletcher:1"]);
    assert!(out.starts_with("unpinned 1 node (event "), "{out}");
    // A key given twice is one node: "pinned 2 nodes" had been said of one.
    let out = ok(&[
        "pin",
        "--store",
        p(&store),
        "npc:fletcher:1",
        "npc:fletcher:1",
    ]);
    assert!(out.starts_with("pinned 1 node (event "), "{out}");
    // Nothing to change writes nothing, and says so.
    let out = ok(&["pin", "--store", p(&store), "bot"]);
    assert_eq!(out.trim(), "pinned 0 nodes: already pinned");
    let out = ok(&["unpin", "--store", p(&store), "npc:villager:1"]);
    assert_eq!(out.trim(), "unpinned 0 nodes: not pinned");
    let out = loci(&["pin", "--store", p(&store), "no:such:node"]);
    assert_eq!(out.status.code(), Some(4));
    ok(&["replay", "--store", p(&store), "--verify"]);
}

/// A node that a deleted event asserted and other events still assert stays, and the deletion
/// says which and how to take it whole: a pin is such an event, and a pinned secret's key had
/// stayed a node, searchable, with "0 nodes removed" said (the crash probe's finding).
#[test]
fn a_deletion_names_the_nodes_it_leaves_asserted_by_other_events() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let input = tmp.path().join("secret.jsonl");
    std::fs::write(
        &input,
        concat!(
            r#"{"actor":"bot","ts":10,"kind":"NOTE","payload":{"text":"password hunter2"},"#,
            r#""assert":[{"op":"node","key":"secret:1","label":"Secret","name":"password hunter2"}]}"#,
            "\n",
            r#"{"actor":"bot","ts":11,"kind":"NOTE","assert":[{"op":"node","key":"secret:1","aliases":["the password"]}]}"#,
            "\n"
        ),
    )
    .unwrap();
    ok(&["ingest", "--store", p(&store), p(&input)]);
    // (A pin is no such event: it makes no node that is not there.)
    let out = ok(&["delete", "--store", p(&store), "--event", "1"]);
    assert!(
        out.contains("1 node the deleted events asserted stays")
            && out.contains("\"secret:1\"")
            && out.contains("--node"),
        "{out}"
    );
    let r = json(&[
        "delete",
        "--store",
        p(&store),
        "--node",
        "secret:1",
        "--json",
    ]);
    assert_eq!(r["nodes_removed"], 1, "{r}");
    let hits = json(&["search", "--store", p(&store), "secret", "--json"]);
    assert_eq!(hits, serde_json::json!([]));
}

#[test]
fn misspelt_filters_are_noted_not_silent() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let out = loci(&[
        "neighbors",
        "--store",
        p(&store),
        "bot",
        "--relation",
        "HOMES",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no edge of this store has relation \"HOMES\""),
        "{err}"
    );
    let out = loci(&[
        "search",
        "--store",
        p(&store),
        "fletcher",
        "--label",
        "villager",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no node of this store has label \"villager\""),
        "{err}"
    );
    let out = loci(&[
        "search",
        "--store",
        p(&store),
        "fletcher",
        "--kind",
        "GOSSIP",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no event of this store has kind \"GOSSIP\""),
        "{err}"
    );
    // Known names say nothing.
    let out = loci(&[
        "neighbors",
        "--store",
        p(&store),
        "bot",
        "--relation",
        "HOME",
    ]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A filter that differs from a name of the store only in case or in spaces around it is
/// refused, naming the flag and the name it resembles: `--relation home` and `--label " Item"`
/// had matched nothing, with only a note on stderr, and over HTTP or MCP not even that.
#[test]
fn a_filter_one_slip_of_case_or_space_from_a_known_name_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let cases: [(&[&str], &str, &str); 5] = [
        (
            &["neighbors", "bot", "--relation", "home"],
            "--relation",
            "\"HOME\"",
        ),
        // An event kind too (helper-95: `--kind note` found nothing, without a word).
        (
            &["search", "fletcher", "--kind", "observation"],
            "--kind",
            "\"OBSERVATION\"",
        ),
        (
            &["search", "fletcher", "--label", " Item"],
            "--label",
            "\"Item\"",
        ),
        (
            &["search", "fletcher", "--label", "npc"],
            "--label",
            "\"NPC\"",
        ),
        (
            &["query", "who trades emeralds", "--relation", "OFFERS "],
            "--relation",
            "\"OFFERS\"",
        ),
    ];
    for (args, flag, meant) in cases {
        let mut argv = vec![args[0], "--store", p(&store)];
        argv.extend_from_slice(&args[1..]);
        let out = loci(&argv);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains(flag) && err.contains(&format!("did you mean {meant}")),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// A generated graph needs two nodes for an edge: fewer is a usage error (exit 2), not a
/// batch refused for naming a node the generator never made.
#[test]
fn bench_graph_needs_two_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("g");
    for nodes in ["0", "1"] {
        let r = loci(&[
            "bench",
            "graph",
            "--nodes",
            nodes,
            "--edges",
            "10",
            "--dir",
            p(&dir),
        ]);
        assert_eq!(r.status.code(), Some(2), "--nodes {nodes}");
        assert!(
            String::from_utf8_lossy(&r.stderr).contains("is not in"),
            "--nodes {nodes}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    assert!(!dir.exists());
}

/// The graph benchmark's JSON carries the keys the scale issue names, and the heap state at
/// the end of the load by part (most of a bulk load's peak), its parts adding up.
#[test]
fn bench_graph_json_reports_the_load_heap_state_by_part() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("g");
    let out = tmp.path().join("g.json");
    let r = loci(&[
        "bench",
        "graph",
        "--nodes",
        // A sparse graph: the timed traversals of a dense one (200 nodes, mean 2-hop reach
        // 187) were 32 s of a debug build; at 2,000 its reach is 18 and the run 5 s.
        "2000",
        "--edges",
        "5000",
        "--json",
        "--dir",
        p(&dir),
        "--out",
        p(&out),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    for key in [
        "open_fresh_process_s",
        "rss_bytes_per_edge",
        "peak_rss_bytes_per_edge",
        "disk_bytes_per_edge_total",
        "max_degree",
        "ingest_close_s",
        "open_fresh_process_open_ms",
    ] {
        assert!(report[key].is_number(), "{key} missing");
    }
    // The fresh open by stage, and where its state came from: the snapshot the load left.
    let stages = &report["open_fresh_process_open_ms_by_stage"];
    assert!(
        stages["text"].is_number() && stages["state"].is_number(),
        "{stages}"
    );
    assert_eq!(
        report["open_fresh_process_state_source"]["from"], "snapshot",
        "{report}"
    );
    let load = &report["ingest_state_bytes_per_edge"];
    let part = |k: &str| load[k].as_f64().unwrap();
    // Each edge's two adjacency entries alone are 32 bytes on the heap.
    assert!(part("adjacency") >= 32.0, "{load}");
    let sum = part("adjacency") + part("edges") + part("nodes") + part("node_keys");
    assert!((sum - part("total")).abs() < 1e-6, "{load}");
    // After the open the lists are the snapshot's, mapped: their bytes are counted there and
    // not read as 0 because none are on the heap.
    let mapped: u64 = report["disk_bytes_snapshot_sections"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| name.starts_with("adjacency"))
        .map(|(_, b)| b.as_u64().unwrap())
        .sum();
    assert!(mapped > 0, "{}", report["disk_bytes_snapshot_sections"]);
    let adjacency = report["adjacency_bytes_per_edge"].as_f64().unwrap() * 5000.0;
    assert!(adjacency >= mapped as f64 - 1e-6, "{adjacency} < {mapped}");
}

/// A graph written to a file and read back from it is the same graph to the benchmark (the
/// file loaded a batch at a time; its node ids are in the order the file first names them,
/// so the random start nodes differ and only what does not depend on ids is compared). An
/// empty file is a bad input, named.
#[test]
fn bench_graph_from_a_file_loads_the_graph_that_was_written() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("g é.txt");
    let run = |name: &str, extra: &[&str]| {
        let dir = tmp.path().join(name);
        let out = tmp.path().join(format!("{name}.json"));
        let mut args = vec![
            "bench",
            "graph",
            "--json",
            "--dir",
            p(&dir),
            "--out",
            p(&out),
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--edges-per-batch", "700"]);
        let r = loci(&args);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&out).unwrap()).unwrap()
    };
    let generated = run(
        "gen",
        &[
            "--nodes",
            "300",
            "--edges",
            "2000",
            "--write-edges",
            p(&file),
        ],
    );
    let read = run("file", &["--edges-file", p(&file)]);
    for key in ["nodes", "edges", "max_degree"] {
        assert!(generated[key].is_number(), "{key} missing");
        assert_eq!(generated[key], read[key], "{key}");
    }
    assert!(read["ingest_end_rss_anon_bytes_per_edge"].as_f64().unwrap() > 0.0);

    let empty = tmp.path().join("empty.txt");
    std::fs::write(&empty, "# nothing\n\n").unwrap();
    let dir = tmp.path().join("empty");
    let r = loci(&[
        "bench",
        "graph",
        "--edges-file",
        p(&empty),
        "--dir",
        p(&dir),
    ]);
    assert_eq!(
        r.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    // A fault of the whole file names no line (it said "line 0").
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains(&format!("{}: file: holds no edges", empty.display())),
        "{err}"
    );
}

#[test]
fn world_size_flags_are_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("w.jsonl");
    for args in [
        ["--scale", "1000000"],
        ["--scale", "0"],
        ["--days", "99999999"],
    ] {
        let mut all = vec!["world", "--out", p(&out)];
        all.extend_from_slice(&args);
        let r = loci(&all);
        assert_eq!(r.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&r.stderr).contains("is not in"),
            "{args:?}"
        );
    }
    assert!(!out.exists());
}

/// `world --out -` writes the events to standard output, as `ingest -` reads them from
/// standard input, and says what it wrote on standard error: the two pipe together. (It made
/// a file named `-`, and with `--out /dev/stdout` its status line broke the stream.)
#[test]
fn world_out_dash_writes_events_to_stdout_for_ingest() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ok_in(tmp.path(), &["world", "--out", "-"]);
    assert!(!tmp.path().join("-").exists(), "a file named - was made");
    let events = String::from_utf8(out.stdout).unwrap();
    assert!(events.lines().count() > 10);
    for line in events.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrote"));
    let store = empty_store(tmp.path());
    let ingested = common::run_with_stdin(
        BIN,
        &["ingest", "--store", p(&store), "-"],
        events.as_bytes(),
    );
    assert!(
        ingested.status.success(),
        "{}",
        String::from_utf8_lossy(&ingested.stderr)
    );
    // A path keeps its status line off the events too.
    let file = tmp.path().join("w.jsonl");
    let to_file = loci(&["world", "--out", p(&file)]);
    assert!(to_file.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), events);
}

#[test]
fn ingest_reads_standard_input_as_dash() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let run = |input: &str, extra: &[&str]| {
        let mut args = vec!["ingest", "--store", p(&store)];
        args.extend_from_slice(extra);
        args.push("-");
        common::run_with_stdin(BIN, &args, input.as_bytes())
    };
    let out = run(
        "{\"ts\":1,\"kind\":\"NOTE\"}\n{\"ts\":2,\"kind\":\"NOTE\"}\n",
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("committed events 1..=2"));
    let out = run("{\"ts\":1}\n", &["--format", "events"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<stdin>:1: kind:"));
}

/// The memory commands end to end: a sighting world emerges, a day world is consolidated,
/// forgotten within a budget, an event deleted and compacted, working memory changed, the past
/// looked at, and the store still verifies.
#[test]
fn memory_commands_work_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let s = p(&store);
    let sightings = tmp.path().join("s.jsonl");
    let days = tmp.path().join("w.jsonl");
    ok(&["init", "--store", s]);
    ok(&["world", "--sightings", "3", "--out", p(&sightings)]);
    ok(&["world", "--days", "20", "--out", p(&days)]);
    ok(&["ingest", "--store", s, p(&sightings)]);
    let e = json(&["emerge", "--store", s, "--json"]);
    assert_eq!(e["villages"], 3);
    ok(&["ingest", "--store", s, p(&days)]);
    let c = json(&["consolidate", "--store", s, "--json"]);
    assert!(c["report"]["days"].as_u64().unwrap() >= 19, "{c}");
    let f = json(&["forget", "--store", s, "--budget", "60", "--json"]);
    assert!(f["forget"]["events_after"].as_u64().unwrap() <= 60, "{f}");
    assert!(ok(&["wm", "--store", s, "intent", "find", "iron"]).contains("intent    find iron"));
    // The working-memory change is the last event.
    let last = json(&["stats", "--store", s, "--json"])["events"]
        .as_u64()
        .unwrap();
    let d = json(&[
        "delete",
        "--store",
        s,
        "--event",
        &last.to_string(),
        "--json",
    ]);
    assert_eq!(d["deleted"][0], last);
    assert!(ok(&["wm", "--store", s]).contains("intent    -"));
    ok(&["compact", "--store", s]);
    assert!(ok(&["replay", "--store", s, "--until", "5"]).starts_with("as of event 5"));
    assert!(ok(&["replay", "--store", s, "--verify"]).contains("OK: live state equals replay"));
    let bad = loci(&["wm", "--store", s, "capacity", "lots"]);
    assert_eq!(bad.status.code(), Some(2));
    // A number out of range is said to be, not to be no number or an unknown flag (session 25
    // probe: "needs a number, got 99999999999999999999", "unexpected argument '-1' found").
    for n in ["99999999999999999999", "-1", "0"] {
        let bad = loci(&["wm", "--store", s, "capacity", n]);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(3), "{n}: {err}");
        assert!(err.contains("between 1 and"), "{n}: {err}");
    }
    for args in [
        vec!["forget", "--store", s, "--budget", "-1"],
        vec!["context", "--store", s, "--budget", "-1"],
        vec!["query", "--store", s, "x", "--budget", "-1"],
    ] {
        let bad = loci(&args);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--budget") && err.contains("-1 is negative"),
            "{args:?}: {err}"
        );
    }
}

/// A working-memory change that finds nothing to change (a misspelt threat, an empty stack) or
/// carries more than a note is refused by name, and writes no event.
#[test]
fn a_working_memory_change_that_finds_nothing_is_refused_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let s = p(&store);
    ok(&["init", "--store", s]);
    ok(&["wm", "--store", s, "add-threat", "creeper"]);
    let events = || {
        json(&["stats", "--store", s, "--json"])["events"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(events(), 1);
    let misspelt = loci(&["wm", "--store", s, "clear-threat", "creper"]);
    assert_eq!(misspelt.status.code(), Some(4));
    let said = String::from_utf8_lossy(&misspelt.stderr);
    assert!(
        said.contains("\"creper\"") && said.contains("\"creeper\""),
        "{said}"
    );
    let empty = loci(&["wm", "--store", s, "pop-subgoal"]);
    assert_eq!(empty.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("no subgoal"));
    let unmade = loci(&["wm", "--store", s, "keep-promise", "wheat"]);
    assert_eq!(unmade.status.code(), Some(4));
    let long = "x".repeat(17 * 1024);
    let too_long = loci(&["wm", "--store", s, "observe", &long]);
    assert_eq!(too_long.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&too_long.stderr).contains("17408 bytes"));
    for no_text in ["pop-subgoal", "clear", "show"] {
        let extra = loci(&["wm", "--store", s, no_text, "extra", "words"]);
        assert_eq!(extra.status.code(), Some(2), "{no_text}");
        assert!(String::from_utf8_lossy(&extra.stderr).contains("takes no text"));
    }
    // A text of invisible characters only is no text, as the library judges it (exit 2, as
    // for no text at all, where it got the store's exit 3).
    let invisible = loci(&["wm", "--store", s, "observe", "\u{200b}"]);
    assert_eq!(invisible.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&invisible.stderr).contains("needs a text"));
    assert_eq!(
        loci(&["wm", "--store", s, "show", "\u{feff}"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(events(), 1, "a refused change wrote an event");
    assert!(ok(&["wm", "--store", s, "clear-threat", "creeper"]).contains("threats   -"));
    assert_eq!(events(), 2);
}

#[test]
fn context_assembles_saves_and_recalls_a_turn() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    ok(&["consolidate", "--store", p(&store)]);
    let instructions = tmp.path().join("instructions.txt");
    std::fs::write(&instructions, "Be brief.\n").unwrap();
    let args = [
        "context",
        "--store",
        p(&store),
        "--budget",
        "900",
        "--question",
        "who trades emeralds for sticks",
        "--instructions",
        p(&instructions),
        "--save",
        "--json",
    ];
    let first = json(&args);
    assert!(first["tokens"].as_u64().unwrap() <= 900, "{first}");
    assert_eq!(first["turn"], 1);
    assert!(first["text"].as_str().unwrap().starts_with("Be brief.\n"));
    let second = json(&args);
    assert_eq!(second["turn"], 2);
    assert_eq!(second["prefix_digest"], first["prefix_digest"]);
    let text = ok(&["context", "--store", p(&store), "--turn", "1"]);
    assert!(text.starts_with("turn 1 (event "), "{text}");
    let head: Vec<&str> = text.lines().take(2).collect();
    assert!(
        head[0].contains(" of 900 tokens (approx), mode all, prefix "),
        "{text}"
    );
    assert_eq!(
        head[1], "question: who trades emeralds for sticks",
        "{text}"
    );
    let saved = json(&["context", "--store", p(&store), "--turn", "2", "--json"]);
    assert_eq!(saved["tokens"], second["tokens"]);
    assert!(!saved["ids"].as_array().unwrap().is_empty());
    // A saved turn is shown as it was: what would assemble another is refused, not ignored
    // (`--turn 1 --budget 5` showed the 900-token turn; a helper's probe).
    for flag in [
        ["--budget", "5"],
        ["--mode", "anchor"],
        ["--tokenizer", "cl100k_base"],
        ["--instructions", p(&instructions)],
        ["--session", "s"],
    ] {
        let out = loci(&[
            "context",
            "--store",
            p(&store),
            "--turn",
            "1",
            flag[0],
            flag[1],
        ]);
        assert_eq!(out.status.code(), Some(2), "{flag:?}");
    }
    // The plain form is the context itself; the figures go to stderr.
    let plain = ok(&[
        "context",
        "--store",
        p(&store),
        "--budget",
        "300",
        "--mode",
        "anchor",
    ]);
    assert!(plain.contains(loci::context::BOUNDARY), "{plain}");
    let verify = ok(&["replay", "--store", p(&store), "--verify"]);
    assert!(verify.contains("OK"), "{verify}");
}

#[test]
fn journal_and_check_work_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let s = p(&store);
    let file = tmp.path().join("journal.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"v":1,"time":"2026-11-20T10:00:00Z","harness":"a","session":"1","kind":"decision","text":"Keep pins few"}"#,
            "\n",
            r#"{"v":1,"time":"2026-11-21T10:00:00Z","harness":"b","session":"9","kind":"decision","text":"keep pins  few"}"#,
            "\n",
            r#"{"v":1,"time":"2026-11-23T10:00:00Z","harness":"b","session":"9","kind":"note","text":"today"}"#,
            "\n"
        ),
    )
    .unwrap();
    ok(&["init", "--store", s]);
    ok(&["ingest", "--store", s, "--format", "journal", p(&file)]);
    ok(&["consolidate", "--store", s, "--day", "1440"]);
    let listed = json(&["journal", "list", "--store", s, "--json"]);
    assert_eq!(
        each(&listed, |e| e["status"].as_str().unwrap()),
        ["consolidated", "captured"]
    );
    let promoted = json(&[
        "journal",
        "promote",
        "--store",
        s,
        "--recurring",
        "2",
        "--json",
    ]);
    assert_eq!(promoted["promoted"].as_array().unwrap().len(), 1);
    let shown = ok(&["journal", "list", "--store", s, "--status", "promoted"]);
    assert!(
        shown.contains("[promoted] decision: keep pins  few (2 sessions, x2"),
        "{shown}"
    );
    let captured = ok(&["journal", "list", "--store", s, "--status", "captured"]);
    assert!(captured.contains("(1 session, x1"), "{captured}");
    let missing = loci(&["journal", "promote", "--store", s, "journal:nope"]);
    assert_eq!(missing.status.code(), Some(4));
    // Written in at least no session would be every entry: refused, not taken as 1.
    let none = loci(&["journal", "promote", "--store", s, "--recurring", "0"]);
    assert_eq!(none.status.code(), Some(2));
    // A key given twice is one entry; one already promoted is said to be, and writes nothing.
    let key = promoted["promoted"][0].as_str().unwrap();
    let again = json(&["journal", "promote", "--store", s, key, key, "--json"]);
    assert_eq!(again["promoted"], serde_json::json!([]), "{again}");
    assert_eq!(
        again["already_promoted"],
        serde_json::json!([key]),
        "{again}"
    );
    assert_eq!(again["seq"], serde_json::Value::Null, "{again}");
    let said = ok(&["journal", "promote", "--store", s, key]);
    assert!(
        said.contains("promoted 0 entries: already promoted: "),
        "{said}"
    );

    // Healthy, then a finding: exit 1, with the finding named.
    let healthy = loci(&["check", "--store", s]);
    assert_eq!(healthy.status.code(), Some(0));
    let tight = loci(&["check", "--store", s, "--max-pinned", "0"]);
    assert_eq!(tight.status.code(), Some(1));
    let text = String::from_utf8_lossy(&tight.stdout);
    assert!(
        text.contains("tier over its cap: 1 pinned nodes (cap 0)"),
        "{text}"
    );
    ok(&["replay", "--store", s, "--verify"]);
}

/// A benchmark runs for minutes; an output it could not write at the end is refused before it
/// starts, naming the missing directory, with the not-found exit code.
#[test]
fn a_bench_refuses_an_output_in_a_missing_directory_before_it_runs() {
    let missing = tempfile::tempdir().unwrap().path().join("gone");
    let out = missing.join("report.json");
    let o = loci(&[
        "bench",
        "context",
        "--events",
        "2000",
        "--turns",
        "5",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains("does not exist") && err.contains("gone"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

/// A file of `n` events, one a line, each upserting a node of its own (`n0`, `n1`, ...).
fn many_events(dir: &Path, n: usize) -> std::path::PathBuf {
    let input = dir.join("many.jsonl");
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "{{\"actor\":\"bot\",\"kind\":\"OBSERVATION\",\"ts\":{i},\"assert\":[{{\"key\":\"n{i}\",\"label\":\"Thing\",\"name\":\"n{i}\",\"op\":\"node\"}}]}}\n"
        ));
    }
    std::fs::write(&input, text).unwrap();
    input
}

#[test]
fn commit_every_commits_batches_of_exactly_n_events_across_read_rounds() {
    // The file is read in rounds of at least 16,384 lines; a round that is not a multiple of
    // N used to leave a short batch at each round's end (5 x 3,000 + 1,384, and again).
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let input = many_events(tmp.path(), 40_000);
    let out = ok(&[
        "ingest",
        "--store",
        p(&store),
        "--commit-every",
        "3000",
        "--json",
        p(&input),
    ]);
    let sizes: Vec<u64> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["events"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let mut expected = vec![3000; 13];
    expected.push(1000);
    assert_eq!(sizes, expected);
}

/// The text output of `query` names every part of a snippet's score, usage too: a question
/// asked again scored higher with no part said to have grown (the fresh-clone probe saw 1.401,
/// then 1.501), where `--json` showed the usage term.
#[test]
fn a_snippets_usage_is_shown_among_its_score_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let ask = |json: bool| {
        let mut args = vec!["query", "--store", p(&store), "where is home"];
        if json {
            args.push("--json");
        }
        ok(&args)
    };
    let used = (0..5).any(|_| {
        let pack: serde_json::Value = serde_json::from_str(&ask(true)).unwrap();
        each(&pack["snippets"], |s| s["parts"]["usage"].as_f64().unwrap())
            .iter()
            .any(|u| *u > 0.0)
    });
    assert!(used, "no snippet became hot in five askings");
    let text = ask(false);
    assert!(text.contains("usage 1.00"), "{text}");
}

/// An emoji or another symbol is a word of its own to search: the tokenizer took only letters
/// and digits, so a search for "🦀" found nothing, though a name and an event held it.
#[test]
fn a_search_for_an_emoji_finds_what_holds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let input = tmp.path().join("emoji.jsonl");
    std::fs::write(
        &input,
        concat!(
            r#"{"actor":"bot","kind":"OBSERVATION","ts":1,"payload":{"text":"saw a crab🦀 by the €5 stall"},"#,
            r#""assert":[{"key":"ferris","label":"Thing","name":"Ferris 🦀","op":"node"}]}"#,
            "\n",
            r#"{"actor":"bot","kind":"OBSERVATION","ts":2,"payload":{"text":"a crab and a ⭐"}}"#,
            "\n"
        ),
    )
    .unwrap();
    ok(&["ingest", "--store", p(&store), p(&input)]);
    let ids = |text: &str| -> Vec<String> {
        let hits = json(&["search", "--store", p(&store), text, "--json"]);
        let mut ids = each(&hits, |h| h["id"].as_str().unwrap().to_string());
        ids.sort();
        ids
    };
    assert_eq!(ids("🦀"), ["event:1", "ferris"]);
    assert_eq!(ids("⭐"), ["event:2"]);
    assert_eq!(ids("€"), ["event:1"]);
    // The word beside the emoji is still a word.
    assert_eq!(ids("crab"), ["event:1", "event:2"]);
}

/// A store of one `NOTE` event for each of `notes`, in order (event 1 holds the first).
fn notes_store(tmp: &Path, notes: &[&str]) -> std::path::PathBuf {
    let store = empty_store(tmp);
    let input = tmp.join("notes.jsonl");
    let lines: Vec<String> = notes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            serde_json::json!({"ts": i + 1, "actor": "bot", "kind": "NOTE", "payload": n})
                .to_string()
        })
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    ok(&["ingest", "--store", p(&store), p(&input)]);
    store
}

/// The ids of what `search` finds in `store` for `text`, in order.
fn found_ids(store: &Path, text: &str) -> Vec<String> {
    let hits = json(&["search", "--store", p(store), text, "--json"]);
    let mut ids = each(&hits, |h| h["id"].as_str().unwrap().to_string());
    ids.sort();
    ids
}

/// Words the analyser dropped are found: a word of 40 bytes or more (a git SHA-1, a SHA-256)
/// was dropped whole, and a sentence of Chinese or Japanese, written without spaces, was one
/// word (and so dropped, or found only whole); a flag was two letters that every flag sharing
/// one matched. Found by the fresh-clone probe.
#[test]
fn a_search_finds_long_words_han_and_kana_text_and_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let sha1 = "7f4686d1a2b3c4d5e6f708192a3b4c5d6e7f8091";
    let sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let store = notes_store(
        tmp.path(),
        &[
            &format!("merged {sha1} into main"),
            &format!("sha256 {sha256}"),
            "東京都庁の近くでラーメンを食べました",
            "flew 🇫🇷 to Paris",
            "flew 🇷🇺 to Moscow",
        ],
    );
    let ids = |text: &str| found_ids(&store, text);
    assert_eq!(ids(sha1), ["event:1"]);
    assert_eq!(ids(sha256), ["event:2"]);
    assert_eq!(ids("東京都庁"), ["event:3"]);
    assert_eq!(ids("ラーメン"), ["event:3"]);
    assert_eq!(ids("🇫🇷"), ["event:4"]);
}

/// An emoji joined of others (a zero-width joiner between them) is one word: a search for
/// "👩‍💻" found every note with a woman or a laptop in it, as a search for either alone. Its
/// skin tone and presentation shape it and are not part of the word. Found by the fresh-clone
/// probe.
#[test]
fn a_search_for_a_joined_emoji_finds_it_and_not_its_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let store = notes_store(
        tmp.path(),
        &[
            "the \u{1F469}\u{200D}\u{1F4BB} fixed the build",
            "a \u{1F469} walked by",
            "a \u{1F4BB} on the desk",
            "the \u{1F469}\u{1F3FD}\u{200D}\u{1F4BB} shipped it",
            "a \u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467} at the fair",
        ],
    );
    let ids = |text: &str| found_ids(&store, text);
    assert_eq!(ids("\u{1F469}\u{200D}\u{1F4BB}"), ["event:1", "event:4"]);
    assert_eq!(ids("\u{1F469}"), ["event:2"]);
    assert_eq!(ids("\u{1F4BB}"), ["event:3"]);
    assert_eq!(
        ids("\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}"),
        ["event:5"]
    );
}

/// A parameter's name is a name: empty, or with spaces around it, it was taken as given and
/// the query then said it had "no parameter ;" (the space invisible). Found by the
/// fresh-clone probe.
#[test]
fn a_parameter_without_a_name_or_with_spaces_around_it_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    for (given, said) in [("=x", "an empty NAME"), ("want =x", "\"want \"")] {
        let err = fails(
            &["run", "--store", p(&store), "find_trade", "--param", given],
            3,
        );
        assert!(
            err.contains("--param") && err.contains(said),
            "{given}: {err}"
        );
    }
}

/// A world time past what an integer holds is refused as out of range, as one past ±2^61 is:
/// JSON reads it as a float, and the refusal had said "invalid type: floating point
/// 1.1805916207174113e21, expected i64" (the fresh-clone probe's finding).
#[test]
fn a_world_time_past_any_integer_is_refused_as_out_of_range() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    // Ingests a note at `ts` from `file`, which must be refused; what it said.
    let refused = |file: &str, ts: &str| -> String {
        let input = tmp.path().join(file);
        std::fs::write(
            &input,
            format!(r#"{{"ts":{ts},"actor":"bot","kind":"NOTE"}}"#) + "\n",
        )
        .unwrap();
        let out = loci(&["ingest", "--store", p(&store), p(&input)]);
        assert_eq!(out.status.code(), Some(3), "{ts}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for ts in [
        "1180591620717411303424",
        "-1e30",
        "18446744073709551615",
        "3e18",
    ] {
        let err = refused("far.jsonl", ts);
        assert!(
            err.contains("far.jsonl:1: ts: ")
                && err.contains("out of range")
                && err.contains("±2^61"),
            "{ts}: {err}"
        );
    }
    // A whole number written as a decimal is that number; a fraction is refused as one.
    let input = tmp.path().join("whole.jsonl");
    std::fs::write(&input, "{\"ts\":1e3,\"actor\":\"bot\",\"kind\":\"NOTE\"}\n").unwrap();
    ok(&["ingest", "--store", p(&store), p(&input)]);
    let events = json(&["search", "--store", p(&store), "note", "--json"]);
    assert_eq!(events[0]["ts"], 1000, "{events}");
    assert!(refused("whole.jsonl", "1.5").contains("1.5 is not an integer"));
    // Past 2^53 a decimal holds only some integers: 9007199254740993.0 had been read as
    // ...992, and 2305843009213693953.0 (past ±2^61 written as an integer) as 2^61 and kept.
    for ts in ["9007199254740993.0", "2305843009213693953.0", "-1e17"] {
        let err = refused("whole.jsonl", ts);
        assert!(
            err.contains("whole.jsonl:1: ts: ") && err.contains("2^53"),
            "{ts}: {err}"
        );
    }
    // An edge's validity is a world time too (a helper's probe: i64::MAX was taken, and
    // `r.valid_from + 10` read as null).
    let input = tmp.path().join("valid.jsonl");
    for (field, t) in [
        ("valid_from", "9223372036854775806"),
        ("valid_to", "-9223372036854775807"),
        // i64's ends mark an open bound only at their own end: a start at the end of time
        // (i64::MAX) had been taken, and was shown as a start (a helper's review).
        ("valid_from", "9223372036854775807"),
        ("valid_to", "-9223372036854775808"),
    ] {
        std::fs::write(
            &input,
            format!(
                r#"{{"ts":1,"actor":"bot","kind":"NOTE","assert":[{{"op":"node","key":"a"}},{{"op":"node","key":"b"}},{{"op":"edge","from":"a","relation":"R","to":"b","{field}":{t}}}]}}"#
            ) + "\n",
        )
        .unwrap();
        let err = fails(&["ingest", "--store", p(&store), p(&input)], 3);
        assert!(
            err.contains(&format!("valid.jsonl:1: assert[2].{field}: ")) && err.contains("±2^61"),
            "{field}: {err}"
        );
    }
}

/// A parameter given twice is refused, naming both values: the last had silently won, so a
/// script that built its flags from two sources ran with one of them unseen.
#[test]
fn a_parameter_given_twice_is_refused_naming_both_values() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let query = "MATCH (b {key: $k})-[:HOME]->(p) RETURN p.key ORDER BY p.key";
    let twice = loci(&[
        "run",
        "--store",
        p(&store),
        "--query",
        query,
        "--param",
        "k=bot",
        "--param",
        "k=nobody",
    ]);
    assert_eq!(twice.status.code(), Some(3));
    let err = String::from_utf8_lossy(&twice.stderr);
    assert!(
        err.contains("--param k") && err.contains("\"bot\"") && err.contains("\"nobody\""),
        "{err}"
    );
    assert!(twice.stdout.is_empty());
    let bench = loci(&[
        "bench",
        "retrieval",
        "--corpus",
        "missing.jsonl",
        "--questions",
        "missing.jsonl",
        "--set",
        "k=1",
        "--set",
        "k=2",
    ]);
    assert_eq!(
        bench.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&bench.stderr)
    );
    assert!(String::from_utf8_lossy(&bench.stderr).contains("--set k"));
}

/// The binary, to be started with SIGINT and SIGTERM at their defaults. A shell without job
/// control starts background commands with SIGINT ignored, and the child would inherit that
/// (and rightly keep it): the child starts with both signals at their defaults, as from a
/// terminal.
#[cfg(unix)]
fn loci_with_default_signals() -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(BIN);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    command
}

/// `loci ingest --json ARGS` started with SIGINT and SIGTERM at their defaults, sent `signal`
/// once it has reported its first commit; the commits it reported, its standard error and
/// its exit status.
#[cfg(unix)]
fn ingest_interrupted(
    args: &[&str],
    signal: i32,
) -> (Vec<serde_json::Value>, String, std::process::ExitStatus) {
    use std::io::BufRead;
    let mut command = loci_with_default_signals();
    command
        .arg("ingest")
        .args(args)
        .arg("--json")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    // SAFETY: a signal to the child this test spawned and has not waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let mut reported: Vec<serde_json::Value> = vec![serde_json::from_str(&first).unwrap()];
    for l in lines {
        reported.push(serde_json::from_str(&l.unwrap()).unwrap());
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (reported, err, out.status)
}

/// Ctrl-C (or SIGTERM) during `ingest --commit-every` stops after the commit in progress and
/// its line: every event in the store was reported, and the note says where the input stopped.
/// The process had died at the signal, so a commit could be durable and never reported, and a
/// user restarting from the last line reported added those events twice.
#[cfg(unix)]
#[test]
fn an_interrupted_ingest_reports_every_commit_it_made_and_where_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let input = many_events(tmp.path(), 60_000);
    for (signal, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let store = tmp.path().join(name);
        ok(&["init", "--store", p(&store)]);
        let (reported, err, status) = ingest_interrupted(
            &["--store", p(&store), "--commit-every", "500", p(&input)],
            signal,
        );
        assert_eq!(status.code(), Some(130), "{name}: {status:?} {err}");
        let events: u64 = reported.iter().map(|c| c["events"].as_u64().unwrap()).sum();
        assert!(events < 60_000, "{name}: the ingest was not stopped");
        let stats = json(&["stats", "--store", p(&store), "--json"]);
        assert_eq!(stats["events"], events, "{name}: {err}");
        let last = reported.last().unwrap()["last_seq"].as_u64().unwrap();
        assert!(
            err.contains("interrupted")
                && err.contains(&format!("..={last}"))
                && err.contains(&format!("{} line {events}", input.display())),
            "{name}: {err}"
        );
    }
}

/// A signal that comes after the last commit stops nothing: the run ends as an uninterrupted
/// one (exit 0), where it had exited 130 saying it stopped, with the whole input in the store
/// (the fresh-clone probe saw it once in about 70 runs; here the signal comes as the only
/// commit is reported, while the store closes).
#[cfg(unix)]
#[test]
fn a_signal_after_the_last_commit_is_not_an_interruption() {
    let tmp = tempfile::tempdir().unwrap();
    let input = many_events(tmp.path(), 500);
    let store = empty_store(tmp.path());
    let (reported, err, status) = ingest_interrupted(
        &["--store", p(&store), "--commit-every", "500", p(&input)],
        libc::SIGINT,
    );
    assert_eq!(reported.len(), 1);
    assert_eq!(status.code(), Some(0), "{status:?} {err}");
    assert!(!err.contains("interrupted"), "{err}");
    assert_eq!(
        json(&["stats", "--store", p(&store), "--json"])["events"],
        500
    );
}

/// An interrupted ingest taken up again from the line after the one its note names ends with
/// the store an uninterrupted ingest makes, in the formats where a line is not an event: a
/// conversation's line gives several events, and a commit had split one, so the note named a
/// line whose last turns were never written (lost on resuming); a graph file's event holds
/// 1,024 lines, and the note named its first (the rest written twice on resuming). Found by
/// the fresh-clone probe.
#[cfg(unix)]
#[test]
fn an_interrupted_ingest_resumed_after_the_line_it_names_loses_and_repeats_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let conversation: String = (0..300)
        .map(|i| {
            let turns: Vec<String> = (0..5)
                .map(|t| {
                    format!(
                        r#"{{"speaker":"{}","dia_id":"D{i}:{t}","text":"turn {t} of session {i}"}}"#,
                        ["Ann", "Bo"][t % 2]
                    )
                })
                .collect();
            format!(
                r#"{{"conversation":"c","session":{i},"time":"1:56 pm on 8 May, 2023","turns":[{}]}}"#,
                turns.join(",")
            ) + "\n"
        })
        .collect();
    let graph: String = (0..20_000)
        .map(|i| format!(r#"{{"op":"node","key":"g:{i}","label":"Thing","name":"g {i}"}}"#) + "\n")
        .collect();
    for (format, text, every) in [("conversation", conversation, "3"), ("graph", graph, "1")] {
        let input = tmp.path().join(format!("{format}.jsonl"));
        std::fs::write(&input, &text).unwrap();
        let whole = tmp.path().join(format!("{format}-whole"));
        ok(&["init", "--store", p(&whole)]);
        ok(&[
            "ingest",
            "--store",
            p(&whole),
            "--format",
            format,
            p(&input),
        ]);
        let store = tmp.path().join(format!("{format}-resumed"));
        ok(&["init", "--store", p(&store)]);
        let (_, err, status) = ingest_interrupted(
            &[
                "--store",
                p(&store),
                "--format",
                format,
                "--commit-every",
                every,
                p(&input),
            ],
            libc::SIGINT,
        );
        assert_eq!(status.code(), Some(130), "{format}: {err}");
        let named = format!("through {} line ", input.display());
        let line: usize = err
            .split(&named)
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{format}: no line named in {err}"));
        let rest = tmp.path().join(format!("{format}-rest.jsonl"));
        let after: Vec<&str> = text.lines().skip(line).collect();
        std::fs::write(&rest, after.join("\n") + "\n").unwrap();
        ok(&["ingest", "--store", p(&store), "--format", format, p(&rest)]);
        let (a, b) = (
            json(&["stats", "--store", p(&store), "--json"]),
            json(&["stats", "--store", p(&whole), "--json"]),
        );
        assert_eq!(
            (&a["events"], &a["nodes"], &a["edges"]),
            (&b["events"], &b["nodes"], &b["edges"]),
            "{format}: resumed after line {line}: {err}"
        );
    }
}

#[test]
fn commit_every_zero_is_refused_as_usage() {
    // A batch of 0 events means nothing; it was taken as 1 without a word.
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let world = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/world-seed42.jsonl");
    let err = fails(
        &[
            "ingest",
            "--store",
            p(&store),
            "--commit-every",
            "0",
            p(&world),
        ],
        2,
    );
    assert!(err.contains("--commit-every"), "{err}");
    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(stats["events"], 0);
}

/// `loci query ""` and `loci search " "` (an unset variable in a script) exit 3 naming what
/// is empty, as do an empty `--label` or `--kind`: they had exited 0 with nothing found.
#[test]
fn empty_questions_search_texts_and_filters_exit_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    for (args, name) in [
        (vec!["query", "--store", p(&store), ""], "question"),
        (vec!["query", "--store", p(&store), "  "], "question"),
        (vec!["search", "--store", p(&store), " "], "text"),
        (
            vec!["search", "--store", p(&store), "emerald", "--label", ""],
            "label",
        ),
        (
            vec!["search", "--store", p(&store), "emerald", "--kind", " "],
            "kind",
        ),
        (
            vec!["query", "--store", p(&store), "emerald", "--relation", ""],
            "--relation",
        ),
        (
            vec![
                "query",
                "--store",
                p(&store),
                "emerald",
                "--deny-relation",
                " ",
            ],
            "--deny-relation",
        ),
        (
            vec![
                "neighbors",
                "--store",
                p(&store),
                "base:first",
                "--relation",
                " ",
            ],
            "relation",
        ),
        // A blank node had been "not found" (exit 4).
        (vec!["neighbors", "--store", p(&store), ""], "node"),
    ] {
        let out = loci(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains(name) && err.contains("empty"),
            "{args:?}: {err}"
        );
    }
    ok(&["search", "--store", p(&store), "emerald", "--label", "Item"]);
    // An overlong search text is named as the text it is, not as a question.
    let long = "w ".repeat(10_000);
    let out = loci(&["search", "--store", p(&store), &long]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("text") && !err.contains("question"), "{err}");
    // A range given the wrong way round, and no hops at all, are refused rather than
    // answered with nothing.
    for (args, named, code) in [
        (
            vec![
                "search",
                "--store",
                p(&store),
                "emerald",
                "--from",
                "10",
                "--to",
                "5",
            ],
            "--from",
            3,
        ),
        (
            vec![
                "neighbors",
                "--store",
                p(&store),
                "base:first",
                "--depth",
                "0",
            ],
            "--depth",
            2,
        ),
    ] {
        let out = loci(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
    }
    // Nor is an overlong node of `neighbors` (a key, or a name to search for) a question.
    let out = loci(&["neighbors", "--store", p(&store), &long]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("node") && !err.contains("question"), "{err}");
    let trades_for = |want: &str| {
        let want = format!("want={want}");
        let run = [
            "run",
            "--store",
            p(&store),
            "--json",
            "find_trade",
            "--param",
            &want,
        ];
        json(&run)["rows"].as_array().map(Vec::len)
    };
    // A saved query's name lookup of a value longer than any name finds nothing; it had
    // refused the value as a question.
    assert_eq!(trades_for(&"x".repeat(20_000)), Some(0));
    // A long value whose name form is a name's (padding is not part of it) still finds it.
    assert_eq!(
        trades_for(&format!("emerald{}", " ".repeat(5_000))),
        Some(2)
    );
    // `context`'s question is optional: a blank one is none (a tool caller's empty string),
    // not a refusal that came only with some modes.
    let none = ok(&["context", "--store", p(&store), "--no-record"]);
    let blank = ok(&[
        "context",
        "--store",
        p(&store),
        "--no-record",
        "--question",
        " ",
    ]);
    assert_eq!(blank, none);
    // A limit of 0 is a usage error, as it is for `query`.
    assert_eq!(
        loci(&["search", "--store", p(&store), "emerald", "--limit", "0"])
            .status
            .code(),
        Some(2)
    );
}

/// `context --no-record` records no use, as `query --no-record` does: `context` had no way
/// to assemble a prompt without the uses of its snippets flushed to the log (a probe's
/// finding), so a look at what a turn would hold changed the ranking of the next.
#[test]
fn a_context_made_with_no_record_records_no_use() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let events = || -> u64 {
        let stats: serde_json::Value =
            serde_json::from_str(&ok(&["stats", "--store", p(&store), "--json"])).unwrap();
        stats["events"].as_u64().unwrap()
    };
    let before = events();
    let question = "who trades emeralds for sticks";
    let args = ["context", "--store", p(&store), "--question", question];
    let first = ok(&[&args[..], &["--no-record"]].concat());
    assert_eq!(events(), before, "a context with --no-record wrote");
    assert_eq!(ok(&[&args[..], &["--no-record"]].concat()), first);
    ok(&args);
    assert!(events() > before, "a context records its uses by default");
}

/// The binary runs with transparent huge pages off (`main` asks the kernel): mimalloc asks for
/// them on its arenas, and a huge page is resident whole once a byte of it is written.
#[cfg(target_os = "linux")]
#[test]
fn the_binary_runs_without_transparent_huge_pages() {
    use std::process::Stdio;
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let mut child = Command::new(BIN)
        .args(["mcp", "--store", p(&store)])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut line = None;
    for _ in 0..200 {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        line = text
            .lines()
            .find(|l| l.starts_with("THP_enabled:"))
            .map(str::to_string);
        // The flag is set at the start of `main`; the store opens after it.
        if line.as_deref().is_some_and(|l| l.ends_with('0')) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(child.stdin.take());
    child.wait().unwrap();
    if let Some(line) = line {
        assert!(line.ends_with('0'), "{line}");
    }
}

#[test]
fn a_long_value_is_shown_shortened_in_its_error() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let long = "q".repeat(100_000);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/world-seed42.jsonl");
    let cases: [&[&str]; 9] = [
        &["run", &long],
        &["pin", &long],
        &["run", "last_seen", "--param", &long],
        &["ingest", "--format", &long, p(&fixture)],
        &["context", "--mode", &long],
        &["query", "x", "--tokenizer", &long],
        &["query", "x", "--mode", &long],
        &["search", "x", &format!("--{long}")],
        &["neighbors", "x", "--relation", "OFFERS", "--depth", &long],
    ];
    for args in cases {
        let mut all = args.to_vec();
        all.extend(["--store", p(&store)]);
        let out = loci(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{:?}", &args[0]);
        assert!(
            err.len() < 2_000 && err.contains(" bytes)"),
            "loci {}: {} bytes: {}",
            args[0],
            err.len(),
            &err[..err.len().min(300)]
        );
    }
    let init = loci(&[
        "init",
        "--backend",
        &long,
        "--store",
        p(&tmp.path().join("n")),
    ]);
    let err = String::from_utf8_lossy(&init.stderr);
    assert!(
        err.len() < 2_000 && err.contains("(100000 bytes)"),
        "{}",
        &err[..300]
    );
}

#[test]
fn repair_rebuilds_what_is_derived_and_leaves_the_answers_as_they_were() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let timeline = |store: &Path| timeline_rows(store);
    let before = timeline(&store);
    let r = json(&["repair", "--store", p(&store), "--json"]);
    assert_eq!(r["time_entries_fixed"], 0, "{r}");
    assert_eq!(
        r["meta_fixed"], false,
        "a healthy store has nothing to fix: {r}"
    );
    assert_eq!(r["events_replayed"], 49, "{r}");
    let human = ok(&["repair", "--store", p(&store)]);
    assert!(human.starts_with("repaired from 49 events"), "{human}");
    assert!(
        human.contains("verified: live state equals replay"),
        "{human}"
    );
    assert_eq!(timeline(&store), before);
    assert!(ok(&["replay", "--verify", "--store", p(&store)]).contains("OK"));
}

/// `--param want=$W` with W unset: a saved query declares `want` a string, and took the empty
/// value as given, matching nothing with exit 0 (only untyped parameters were refused). On the
/// command line an empty string is said in quotes, for saved queries too.
#[test]
fn a_saved_query_parameter_given_no_value_on_the_command_line_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let err = fails(
        &[
            "run",
            "--store",
            p(&store),
            "find_trade",
            "--param",
            "want=",
        ],
        3,
    );
    assert!(err.contains("want") && err.contains(r#""""#), "{err}");
    // In quotes, it is the empty string: no trade asks for nothing.
    let rows = json(&[
        "run",
        "--store",
        p(&store),
        "find_trade",
        "--param",
        r#"want="""#,
        "--json",
    ]);
    assert_eq!(rows["rows"], serde_json::json!([]), "{rows}");
    let given = json(&["run", "--store", p(&store), "find_trade", "--json"]);
    assert!(!given["rows"].as_array().unwrap().is_empty());
}

#[test]
fn a_table_of_another_type_in_the_backend_file_is_damage_exit_6_naming_it() {
    // A flipped bit in redb's table tree can make a table's stored type read as another;
    // loci always opens its tables with one type, so a mismatch is damage (exit 6), not an
    // "other failure" (exit 8, as a helper's probe found). Made here by writing the table
    // anew with another type.
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    ok(&["init", "--store", p(&store)]);
    {
        let db = redb::Database::open(store.join("data.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        txn.delete_table(redb::TableDefinition::<&[u8], &[u8]>::new("meta"))
            .unwrap();
        txn.open_table(redb::TableDefinition::<u64, u64>::new("meta"))
            .unwrap()
            .insert(1, 1)
            .unwrap();
        txn.commit().unwrap();
    }
    let out = loci(&["stats", "--store", p(&store)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("meta") && err.contains("data.redb"), "{err}");
}

/// Flips a bit of the meta record `key` in the redb file of `store`, and asserts that an open
/// then fails as damage (exit 6) naming the record.
fn flip_a_bit_of_meta_record(store: &Path, key: &str) {
    {
        let db = redb::Database::open(store.join("data.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            use redb::ReadableTable;
            let mut meta = txn
                .open_table(redb::TableDefinition::<&[u8], &[u8]>::new("meta"))
                .unwrap();
            let mut value = meta
                .get(key.as_bytes())
                .unwrap()
                .unwrap_or_else(|| panic!("no meta record {key:?}"))
                .value()
                .to_vec();
            let last = value.len() - 1;
            value[last] ^= 1;
            meta.insert(key.as_bytes(), &value[..]).unwrap();
        }
        txn.commit().unwrap();
    }
    let stats = loci(&["stats", "--store", p(store)]);
    assert_eq!(stats.status.code(), Some(6));
    let err = String::from_utf8_lossy(&stats.stderr);
    assert!(err.contains(&format!("record {key:?}")), "{err}");
}

/// The rows of the saved query `timeline` on `store`: what a repair must leave as it was.
fn timeline_rows(store: &Path) -> serde_json::Value {
    json(&["run", "--store", p(store), "timeline", "--json"])["rows"].clone()
}

/// Runs `loci repair` on `store` and asserts it verified the result; then that the store
/// opens and verifies again, and its timeline is `before`.
fn assert_repaired(store: &Path, before: &serde_json::Value) {
    let out = loci(&["repair", "--store", p(store)]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("verified: live state equals replay"),
        "{said}"
    );
    assert!(!store.join("compact.tmp").exists(), "repair left its work");
    ok(&["replay", "--store", p(store), "--verify"]);
    let timeline = timeline_rows(store);
    assert_eq!(&timeline, before);
}

#[test]
fn repair_rebuilds_a_text_index_whose_directory_is_gone_or_is_a_file() {
    // Repair rebuilds the full-text index from the log, but with its directory gone it
    // failed after swapping in the fresh files, and every later open failed the same way:
    // the store could no longer be opened (a helper's probe). A file in its place failed
    // every open, repair's too.
    let tmp = tempfile::tempdir().unwrap();
    for file_in_its_place in [false, true] {
        let store = world_store(&tmp.path().join(format!("file {file_in_its_place}")));
        let before = timeline_rows(&store);
        std::fs::remove_dir_all(store.join("text")).unwrap();
        if file_in_its_place {
            std::fs::write(store.join("text"), "not an index").unwrap();
        }
        assert_repaired(&store, &before);
        assert!(store.join("text").is_dir());
        let hits = json(&["search", "--store", p(&store), "emerald", "--json"]);
        assert!(!hits.as_array().unwrap().is_empty(), "{hits}");
    }
}

#[test]
fn repair_replaces_a_directory_where_the_state_snapshot_belongs() {
    // Every open reads past a snapshot path that is not a regular file, but repair, which
    // writes the snapshot afresh, failed on it (exit 8) each time it ran.
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let before = timeline_rows(&store);
    std::fs::remove_file(store.join("state.snapshot")).ok();
    std::fs::create_dir_all(store.join("state.snapshot").join("inside")).unwrap();
    assert_repaired(&store, &before);
    assert!(store.join("state.snapshot").is_file());
}

#[test]
fn verify_finds_an_ids_floor_the_log_does_not_give() {
    // A well-formed ids floor past the log's last deletion made every open for writing
    // rebuild the text index and every search lose its node hits, while `replay --verify`
    // said OK (a helper's second probe): the floor is derived from the log, and compared.
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    ok(&["delete", "--store", p(&store), "--event", "3"]);
    let before = timeline_rows(&store);
    {
        let db = redb::Database::open(store.join("data.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(redb::TableDefinition::<&[u8], &[u8]>::new("meta"))
            .unwrap()
            .insert(&b"ids_floor"[..], &loci::codec::encode(&1000u64)[..])
            .unwrap();
        txn.commit().unwrap();
    }
    let verify = loci(&["replay", "--store", p(&store), "--verify"]);
    let said = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(verify.status.code(), Some(1), "{said}");
    assert!(said.contains("ids floor"), "{said}");
    assert_repaired(&store, &before);
}

#[test]
fn an_interrupted_rewrite_is_named_as_compaction_or_repair() {
    // A repair cut short after its swap left its work directory, and every open after said it
    // finished "an interrupted compaction", one the user never ran (a helper's second probe).
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    std::fs::create_dir(store.join("compact.tmp")).unwrap();
    let out = loci(&["stats", "--store", p(&store)]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interrupted compaction or repair"), "{err}");
    assert!(!store.join("compact.tmp").exists());
    ok(&["replay", "--store", p(&store), "--verify"]);
}

#[test]
fn repair_rebuilds_a_damaged_ids_floor_record() {
    // The ids floor (the last deletion's number) is derived from the log like the counters,
    // and one flipped bit in it stopped every open; repair copied it as it was, so the store
    // stayed unusable (a helper's probe).
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    ok(&["delete", "--store", p(&store), "--event", "3"]);
    let before = timeline_rows(&store);
    flip_a_bit_of_meta_record(&store, "ids_floor");
    assert_repaired(&store, &before);
}

#[test]
fn repair_rebuilds_a_damaged_record_derived_from_the_log_that_stopped_every_open() {
    // The counters (and the deleted set, the folds) are derived from the log and written
    // afresh by repair, yet one flipped bit in them stopped every open, repair's own too: the
    // store could not be repaired though its log was whole (a helper's probe).
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let before = timeline_rows(&store);
    std::fs::remove_file(store.join("state.snapshot")).ok();
    flip_a_bit_of_meta_record(&store, "counters");
    assert_repaired(&store, &before);
}

/// A conversation's turn whose passage key is the key of a node other than a passage is
/// refused naming the turn and what the node is: the turn's upsert had made the store's
/// person a passage, relabelled and renamed to the speaker (a helper's probe).
#[test]
fn a_conversation_turn_never_relabels_a_node_of_another_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let person = tmp.path().join("person.jsonl");
    std::fs::write(
        &person,
        r#"{"ts":1,"actor":"bot","kind":"NOTE","assert":[{"op":"node","key":"c:D1:2","label":"Person","name":"Bob"}]}"#,
    )
    .unwrap();
    ok(&["ingest", "--store", p(&store), p(&person)]);
    let talk = tmp.path().join("talk.jsonl");
    std::fs::write(
        &talk,
        r#"{"conversation":"c","session":1,"time":"1:56 pm on 8 May, 2023","turns":[{"speaker":"Ann","dia_id":"D1:1","text":"hi"},{"speaker":"Cy","dia_id":"D1:2","text":"hello"}]}"#
            .to_string()
            + "\n",
    )
    .unwrap();
    let err = fails(
        &[
            "ingest",
            "--store",
            p(&store),
            p(&talk),
            "--format",
            "conversation",
        ],
        3,
    );
    assert!(
        err.contains(&format!("{}:1: turns[1].dia_id: ", talk.display()))
            && err.contains("\"c:D1:2\" is the key of a Person node (\"Bob\") in the store"),
        "{err}"
    );
    // Nothing of the batch was written, and Bob is still a person.
    let bob = json(&["search", "--store", p(&store), "Bob", "--json"]);
    assert!(bob.to_string().contains("Person"), "{bob}");
    let ann = json(&["search", "--store", p(&store), "hi", "--json"]);
    assert_eq!(ann.as_array().map(Vec::len), Some(0), "{ann}");
    // So is one whose node is made by an earlier file of the same ingest, and a passage's
    // (a helper's probe: the check looked at the store alone, and Bob became a passage).
    let other = tmp.path().join("other");
    let store = empty_store(&other);
    let person2 = tmp.path().join("person2.jsonl");
    std::fs::write(
        &person2,
        r#"{"ts":1,"actor":"bot","kind":"NOTE","assert":[{"op":"node","key":"c:D1:2","label":"Person","name":"Bob"},{"op":"node","key":"p9","label":"Person","name":"Di"}]}"#,
    )
    .unwrap();
    let passage = tmp.path().join("passage.jsonl");
    std::fs::write(&passage, "{\"id\":\"p9\",\"title\":\"T\",\"text\":\"x\"}\n").unwrap();
    for (second, says) in [
        (&talk, format!("{}:1: turns[1].dia_id: ", talk.display())),
        (&passage, format!("{}:1: id: ", passage.display())),
    ] {
        let err = fails(&["ingest", "--store", p(&store), p(&person2), p(second)], 3);
        assert!(
            err.contains(&says)
                && err.contains(" is the key of a Person node (")
                && err.contains(&format!("made at {}:1", person2.display())),
            "{err}"
        );
    }
    let stats = json(&["stats", "--store", p(&store), "--json"]);
    assert_eq!(stats["events"], 0, "{stats}");
}

/// A journal entry's tag, session or entry node whose key is a node of another kind is
/// refused naming the field, where the entry relabelled and renamed it (a helper's probe: a
/// Person `tag:alice` became a Tag).
#[test]
fn a_journal_entry_never_relabels_a_node_of_another_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let nodes = tmp.path().join("nodes.jsonl");
    std::fs::write(
        &nodes,
        r#"{"ts":1,"actor":"bot","kind":"NOTE","assert":[{"op":"node","key":"tag:alice","label":"Person","name":"Alice"},{"op":"node","key":"session:cc/s1","label":"Place","name":"S1"}]}"#,
    )
    .unwrap();
    ok(&["ingest", "--store", p(&store), p(&nodes)]);
    let entry = |tags: &str, session: &str| {
        format!(
            r#"{{"v":1,"time":100,"harness":"cc","session":"{session}","kind":"decision","text":"use rocksdb","tags":[{tags}]}}"#
        ) + "\n"
    };
    let journal = tmp.path().join("j.jsonl");
    for (line, field, key, label) in [
        (entry("\"alice\"", "s2"), "tags", "tag:alice", "Person"),
        (entry("", "s1"), "session", "session:cc/s1", "Place"),
    ] {
        std::fs::write(&journal, line).unwrap();
        let err = fails(
            &[
                "ingest",
                "--store",
                p(&store),
                p(&journal),
                "--format",
                "journal",
            ],
            3,
        );
        assert!(
            err.contains(&format!("{}:1: {field}: ", journal.display()))
                && err.contains(&format!("\"{key}\" is the key of a {label} node")),
            "{field}: {err}"
        );
    }
    let alice = json(&["search", "--store", p(&store), "Alice", "--json"]);
    assert!(alice.to_string().contains("Person"), "{alice}");
}

/// A tool call kept raw is counted in words that agree ("1 tool call ... was"), and one at a
/// time past the store's range is one of them, with its reason, while the rest of the file
/// is ingested (a helper's probe: the time stopped the file, and one call read "1 tool
/// calls ... were").
#[test]
fn a_tool_call_kept_raw_is_counted_and_its_reason_given() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let calls = tmp.path().join("calls.jsonl");
    std::fs::write(
        &calls,
        "{\"tool\":\"Read\",\"args\":{\"path\":\"a\"},\"ts\":9223372036854775807}\n\
         {\"tool\":\"Read\",\"args\":{\"path\":\"b\"},\"ts\":5}\n",
    )
    .unwrap();
    let out = loci(&[
        "ingest",
        "--store",
        p(&store),
        p(&calls),
        "--format",
        "toolcalls",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("committed events 1..=2"), "{said}");
    assert!(
        said.contains("1 tool call was kept raw as a TOOL_CALL event (")
            && said.contains("calls.jsonl:1: ts: ")
            && said.contains("out of range"),
        "{said}"
    );
}

/// `ingest --json` says which tool calls were kept raw in the commit line of their batch, by
/// file, line and reason, as the text mode says them in its note: a JSON reader had only
/// the commits' counts, and the note on stderr in words.
#[test]
fn ingest_json_names_the_tool_calls_kept_raw_in_their_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let calls = tmp.path().join("calls.jsonl");
    // The call kept raw is the first of three: in its own batch, not the last one's.
    std::fs::write(
        &calls,
        "{\"tool\":\"Read\",\"args\":{\"path\":\"a\"},\"ts\":9223372036854775807}\n\
         {\"tool\":\"Read\",\"args\":{\"path\":\"b\"},\"ts\":5}\n\
         {\"tool\":\"Read\",\"args\":{\"path\":\"c\"},\"ts\":6}\n",
    )
    .unwrap();
    let runs: [&[&str]; 3] = [&[], &["--commit-every", "1"], &["--namespace", "ns"]];
    for extra in runs {
        let mut args = vec![
            "ingest",
            "--store",
            p(&store),
            p(&calls),
            "--format",
            "toolcalls",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = String::from_utf8(loci(&args).stdout).unwrap();
        // The commit's own fields first, in their order, as every other --json line has them.
        assert!(out.starts_with("{\"first_seq\":"), "{extra:?}: {out}");
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let raw: Vec<&serde_json::Value> = lines
            .iter()
            .flat_map(|c| c["unextracted"].as_array().unwrap())
            .collect();
        assert_eq!(raw.len(), 1, "{extra:?}: {out}");
        assert!(
            raw[0]["file"].as_str().unwrap().ends_with("calls.jsonl"),
            "{out}"
        );
        assert_eq!(raw[0]["line"], 1, "{out}");
        assert!(
            raw[0]["why"].as_str().unwrap().contains("out of range"),
            "{out}"
        );
        // It is in the commit of the event it became: the first.
        let holder = lines
            .iter()
            .position(|c| !c["unextracted"].as_array().unwrap().is_empty());
        assert_eq!(holder, Some(0), "{extra:?}: {out}");
    }
    // A check says them too, in JSON and in words.
    let check = |json: bool| {
        let mut args = vec![
            "ingest",
            "--store",
            p(&store),
            p(&calls),
            "--format",
            "toolcalls",
            "--check",
        ];
        if json {
            args.push("--json");
        }
        ok(&args)
    };
    let v: serde_json::Value = serde_json::from_str(&check(true)).unwrap();
    assert_eq!(v["unextracted"][0]["line"], 1, "{v}");
    assert!(check(false).contains("1 tool call was kept raw"));
}

/// An idempotency key given to two events of a file with other content is refused naming the
/// line of the first, where the message said "event 1 of the batch" under the second's line
/// (a helper's probe).
#[test]
fn a_key_given_twice_in_a_file_names_the_line_of_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let file = tmp.path().join("twice.jsonl");
    std::fs::write(
        &file,
        "{\"ts\":1,\"kind\":\"NOTE\",\"idempotency_key\":\"k\"}\n\
         {\"ts\":2,\"kind\":\"NOTE\"}\n\
         {\"ts\":3,\"kind\":\"NOTE\",\"idempotency_key\":\"k\"}\n",
    )
    .unwrap();
    let err = fails(&["ingest", "--store", p(&store), p(&file)], 3);
    assert!(
        err.contains(&format!(
            "{}:3: idempotency_key: key \"k\" is also given to line 1, with other content",
            file.display()
        )),
        "{err}"
    );
    assert!(!err.contains("of the batch"), "{err}");
}

/// A passage id that clashes under a namespace already given asks for another namespace, not
/// for one (a helper's probe: "give a --namespace" to a command that had given one).
#[test]
fn a_passage_clash_under_a_namespace_asks_for_another() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let a = tmp.path().join("a.jsonl");
    let b = tmp.path().join("b.jsonl");
    std::fs::write(
        &a,
        "{\"id\":\"p0\",\"title\":\"Alpha\",\"text\":\"first\"}\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "{\"id\":\"p0\",\"title\":\"Beta\",\"text\":\"second\"}\n",
    )
    .unwrap();
    ok(&["ingest", "--store", p(&store), p(&a), "--namespace", "c1"]);
    let err = fails(
        &["ingest", "--store", p(&store), p(&b), "--namespace", "c1"],
        3,
    );
    assert!(
        err.contains("passage id \"c1/p0\" already holds another passage")
            && err.contains("give another --namespace than \"c1\" to keep both"),
        "{err}"
    );
}

/// A store path that would not read as itself in a message (blanks at an end, a line break,
/// nothing at all) is quoted; a plain one is shown as it is (a helper's probe: `store  x:`
/// hid the leading space that made the path another).
#[test]
fn a_store_path_that_would_not_read_as_itself_is_quoted() {
    let tmp = tempfile::tempdir().unwrap();
    for (given, shown) in [
        (" x", "store \" x\": "),
        ("x\ny", "store \"x\\ny\": "),
        ("plain", "store plain: "),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_loci"))
            .current_dir(tmp.path())
            .args(["stats", "--store", given])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(4), "{given:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(shown), "{given:?}: {err}");
    }
    // So is the store `init` made (a new user's probe: "at /tmp/trail " hid the space).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loci"))
        .current_dir(tmp.path())
        .args(["init", "--store", "trail "])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("store at \"trail \""), "{said}");
    // A name with blanks at an end anywhere in the path, not only at its ends (helper-128:
    // "store /tmp/  sp" read as "/tmp/ sp" or "/tmp/sp").
    let inner = tmp.path().join("  sp").join("x");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loci"))
        .args(["stats", "--store", p(&inner)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("store {:?}: ", p(&inner))), "{err}");
    // So is an input file's, in a refusal of one of its lines, and a file `world` cannot
    // write (helper-129: "error: bad.jsonl  :1: json: ...").
    let store = empty_store(tmp.path());
    let bad = tmp.path().join("bad.jsonl  ");
    std::fs::write(&bad, "{not json\n").unwrap();
    let err = fails(&["ingest", "--store", p(&store), p(&bad)], 3);
    assert!(err.contains(&format!("{:?}:1: ", p(&bad))), "{err}");
    let out = tmp.path().join("dir  ").join("none").join("x.jsonl");
    let err = fails(&["world", "--out", p(&out)], 4);
    assert!(err.contains(&format!("{:?}", p(&out))), "{err}");
}

/// An error message is written with the characters that would move or reorder the terminal's
/// text escaped, as standard output's lines are: a carriage return or a right-to-left
/// override in a query's name went to standard error raw (a helper's probe).
#[test]
fn an_error_message_never_writes_a_carriage_return_or_an_override() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let query = "MATCH (n) RETURN `x\u{202e}y\rz`";
    let err = fails(&["run", "--store", p(&store), "--query", query], 3);
    assert!(!err.contains('\r') && !err.contains('\u{202e}'), "{err:?}");
    assert!(err.contains("unknown variable x\\u{202e}y\\u{d}z"), "{err}");
}

/// A speaker too long for the actor a turn is written by is refused as the turn's speaker,
/// where the refusal named `actor`, a field no conversation line has (a new user's probe).
#[test]
fn a_speaker_too_long_is_named_as_the_turns_speaker() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let talk = tmp.path().join("talk.jsonl");
    std::fs::write(
        &talk,
        format!(
            r#"{{"conversation":"c","session":1,"time":"1:56 pm on 8 May, 2023","turns":[{{"speaker":"Ann","dia_id":"D1:1","text":"hi"}},{{"speaker":"{}","dia_id":"D1:2","text":"hello"}}]}}"#,
            "s".repeat(100_000)
        ) + "\n",
    )
    .unwrap();
    let err = fails(&["ingest", "--store", p(&store), p(&talk)], 3);
    assert!(
        err.contains(&format!("{}:1: turns[1].speaker: ", talk.display()))
            && err.contains("100000 bytes long"),
        "{err}"
    );
}

/// Tool calls kept raw from two files are reported by file and line, where "line 1" could be
/// either file's (a new user's probe).
#[test]
fn tool_calls_kept_raw_are_reported_by_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let a = tmp.path().join("a.jsonl");
    let b = tmp.path().join("b.jsonl");
    std::fs::write(&a, "{\"tool\":\"Frobnicate\",\"ts\":1}\n").unwrap();
    std::fs::write(
        &b,
        "{\"tool\":\"Read\",\"args\":{\"path\":\"x\"},\"ts\":2}\nnot json\n",
    )
    .unwrap();
    let said = ok(&[
        "ingest",
        "--store",
        p(&store),
        p(&a),
        p(&b),
        "--format",
        "toolcalls",
    ]);
    assert!(
        said.contains("2 tool calls were kept raw as TOOL_CALL events (")
            && said.contains(&format!("{}:1: unknown tool", a.display()))
            && said.contains(&format!("{}:2: not JSON", b.display())),
        "{said}"
    );
}

/// `loci delete` with neither `--event` nor `--node` is a usage error (exit 2, with the usage
/// naming both), as a missing argument is for every command: it was refused after the store
/// opened, as bad input (exit 3).
#[test]
fn a_delete_naming_nothing_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let out = loci(&["delete", "--store", p(&store)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--event") && err.contains("--node"), "{err}");
    assert!(out.stdout.is_empty());
}

/// helper-91 (session 42): the CLI had no listing of the log's events; the timeline was the
/// HTTP server's alone. `loci timeline` lists the latest `--limit` events of a range of world
/// times, oldest first, says how many the range holds when it leaves some out, and gives the
/// same rows as JSON; a range given backwards is refused.
#[test]
fn timeline_lists_the_latest_events_of_a_range_oldest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    ingest_lines(
        &store,
        &[
            r#"{"ts":300,"kind":"NOTE","payload":"third, with a\nline break"}"#,
            r#"{"ts":100,"kind":"NOTE","payload":"first"}"#,
            r#"{"ts":200,"kind":"SIGHTING","actor":"bot","payload":"second 🦙"}"#,
        ],
    );
    let all = ok(&["timeline", "--store", p(&store)]);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 3, "{all}");
    assert!(
        lines[0].contains("t=100") && lines[0].contains("first"),
        "{all}"
    );
    assert!(
        lines[1].contains("SIGHTING") && lines[1].contains("🦙"),
        "{all}"
    );
    assert!(
        lines[2].contains("t=300") && lines[2].contains("third"),
        "{all}"
    );
    let two = ok(&[
        "timeline",
        "--store",
        p(&store),
        "--limit",
        "2",
        "--from",
        "150",
    ]);
    assert!(!two.contains("first"), "{two}");
    assert!(
        two.contains("the latest 2 of 2") || two.lines().count() == 2,
        "{two}"
    );
    let one = ok(&["timeline", "--store", p(&store), "--limit", "1"]);
    assert!(one.contains("third"), "{one}");
    assert!(one.contains("the latest 1 of 3 events"), "{one}");
    let rows = json(&["timeline", "--store", p(&store), "--to", "250", "--json"]);
    assert_eq!(rows["total"], 2);
    assert_eq!(
        each(&rows["events"], |e| e["ts"].as_i64().unwrap()),
        vec![100, 200]
    );
    assert!(ok(&["timeline", "--store", p(&store), "--from", "400"]).contains("no events"));
    let err = fails(
        &["timeline", "--store", p(&store), "--from", "5", "--to", "1"],
        3,
    );
    assert!(err.contains("--from 5 is after --to 1"), "{err}");
    fails(&["timeline", "--store", p(&store), "--limit", "0"], 2);
}

/// helper-92 (session 43): a timeline listed a day's summary beside the later one that
/// replaced it (a late event came in), where search lists the later alone, and showed a
/// summary as the words of its payload ("SUMMARY loci Amberbrook chest ..."), not its sentence.
#[test]
fn a_timeline_leaves_out_replaced_summaries_and_shows_a_summarys_sentence() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let day = 24_000;
    ingest_lines(
        &store,
        &[
            &format!(
                r#"{{"ts":{},"kind":"NOTE","payload":"a walk by the river"}}"#,
                10
            ),
            &format!(
                r#"{{"ts":{},"kind":"NOTE","payload":"a second day"}}"#,
                day + 10
            ),
        ],
    );
    ok(&["consolidate", "--store", p(&store)]);
    ingest_lines(
        &store,
        &[&format!(
            r#"{{"ts":{},"kind":"NOTE","payload":"a late note"}}"#,
            20
        )],
    );
    ok(&["consolidate", "--store", p(&store)]);
    let rows = json(&[
        "timeline",
        "--store",
        p(&store),
        "--to",
        &(day - 1).to_string(),
        "--json",
    ]);
    let days: Vec<&serde_json::Value> = (rows["events"].as_array().unwrap().iter())
        .filter(|e| e["kind"] == "SUMMARY" && e["text"].as_str().unwrap().contains("Day"))
        .collect();
    assert_eq!(days.len(), 1, "{rows:#}");
    assert_eq!(
        rows["total"].as_u64().unwrap() as usize,
        rows["events"].as_array().unwrap().len(),
        "{rows:#}"
    );
    let text = days[0]["text"].as_str().unwrap();
    assert!(!text.starts_with("SUMMARY"), "{text}");
    let plain = ok(&[
        "timeline",
        "--store",
        p(&store),
        "--to",
        &(day - 1).to_string(),
    ]);
    assert_eq!(plain.matches("Day").count(), 1, "{plain}");
}

/// helper-92 (session 43): `loci neighbors cave:last_night`, a key the store no longer had,
/// answered with the neighbours of `cave:0:0` ("Mossyhollow cave", the best search hit for
/// "cave") and exit 0; a planner reading the answer took it for the cave it asked about. A
/// name match stands in for a key only when the node's name, aliases or key hold every word
/// asked; otherwise it is not found, and the best hit is named as a suggestion.
#[test]
fn neighbors_of_a_missing_key_is_not_another_node_that_shares_a_word() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    ingest_lines(
        &store,
        &[
            r#"{"ts":1,"actor":"bot","kind":"SIGHTING","assert":[{"op":"node","key":"cave:0:0","label":"Cave","name":"Mossyhollow cave"},{"op":"node","key":"bot","label":"Bot","name":"bot"},{"op":"edge","from":"bot","relation":"SAW","to":"cave:0:0"}]}"#,
        ],
    );
    let err = fails(&["neighbors", "--store", p(&store), "cave:last_night"], 4);
    assert!(err.contains("no node has key \"cave:last_night\""), "{err}");
    assert!(err.contains("cave:0:0"), "the best hit is suggested: {err}");
    let by_name = ok(&["neighbors", "--store", p(&store), "mossyhollow"]);
    assert!(by_name.contains("bot"), "{by_name}");
    let by_words = ok(&["neighbors", "--store", p(&store), "Mossyhollow Cave"]);
    assert!(by_words.contains("bot"), "{by_words}");
    // Words as a search reads them: a stopword, a plural, an accent.
    let as_searched = ok(&["neighbors", "--store", p(&store), "the mossyhollow caves"]);
    assert!(as_searched.contains("bot"), "{as_searched}");
    let accented = ok(&["neighbors", "--store", p(&store), "Mossyhöllow"]);
    assert!(accented.contains("bot"), "{accented}");
    // helper-94: a possessive's `s` is no word the name must hold.
    let possessive = ok(&["neighbors", "--store", p(&store), "Mossyhollow's cave"]);
    assert!(possessive.contains("bot"), "{possessive}");
}

/// helper-92 (session 43): a key holding a line break (or a tab) printed as it is split a
/// line of `neighbors` and `search` in two, where a right-to-left override was escaped: each
/// field of a line is one line, its breaks escaped as Rust writes them.
#[test]
fn a_key_holding_a_line_break_stays_on_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    ingest_lines(
        &store,
        &[
            r#"{"ts":1,"actor":"bot","kind":"OBS","payload":"p","assert":[{"op":"node","key":"line\nbreak","label":"Thing","name":"thing"},{"op":"node","key":"tab\tkey","label":"Thing","name":"thing two"},{"op":"edge","from":"line\nbreak","relation":"NEAR","to":"tab\tkey"}]}"#,
        ],
    );
    let hits = ok(&["search", "--store", p(&store), "thing"]);
    assert_eq!(hits.lines().count(), 2, "{hits}");
    assert!(hits.contains(r"line\nbreak"), "{hits}");
    let near = ok(&["neighbors", "--store", p(&store), "line\nbreak"]);
    assert_eq!(near.lines().count(), 2, "{near}");
    assert!(near.starts_with(r#""line\nbreak""#), "{near}");
    assert!(near.contains(r#""tab\tkey""#), "{near}");
}

/// helper-92 (session 43): `--limit 0` was told "0 is not in 1..18446744073709551615", and
/// `--limit -1` "unexpected argument '-1' found". A count of 1 or more says so.
#[test]
fn a_count_flag_below_one_says_to_give_one_or_more() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    for (args, said) in [
        (
            vec!["timeline", "--limit", "0"],
            "0 is too few: give 1 or more",
        ),
        (
            vec!["timeline", "--limit", "-1"],
            "-1 is negative: give 1 or more",
        ),
        (vec!["search", "x", "--limit", "0"], "0 is too few"),
        (vec!["neighbors", "x", "--depth", "0"], "0 is too few"),
        // Its largest named (helper-95: "out of range: it is too large").
        (
            vec!["neighbors", "x", "--depth", "256"],
            "256 is too large: give at most 255",
        ),
    ] {
        let mut full = vec![args[0], "--store", p(&store)];
        full.extend(&args[1..]);
        let err = fails(&full, 2);
        assert!(err.contains(said), "{full:?}: {err}");
    }
}

/// `delete --event -1` was told "unexpected argument '-1' found", as if `-1` were a flag, and
/// `replay --until -1` the same (session 59's open list). A sequence number below 1 says that
/// events are numbered from 1, and nothing is deleted.
#[test]
fn a_sequence_number_below_one_says_events_are_numbered_from_one() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    for args in [
        vec!["delete", "--event", "-1"],
        vec!["delete", "--event", "0"],
        vec!["delete", "--event", "3", "-2"],
        vec!["replay", "--until", "-1"],
    ] {
        let mut full = vec![args[0], "--store", p(&store)];
        full.extend(&args[1..]);
        let err = fails(&full, 2);
        assert!(
            err.contains("events are numbered from 1"),
            "{full:?}: {err}"
        );
    }
    // The state before the first event.
    ok(&["replay", "--store", p(&store), "--until", "0"]);
}

/// helper-136 (session 59): a reading command beside a writer of another build, whose store
/// holds nodes and edges derived by other rules, exited 6, "corrupt store", though nothing is
/// damaged: the writer's build decides the rules while it holds the store. It exits 5, as a
/// locked store does, naming the rules and the holder; with no writer, the read rebuilds them,
/// and says so where they were a newer build's (nothing had said so).
#[test]
fn a_reader_beside_a_writer_of_other_rules_is_told_the_store_is_held_not_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let now = loci::store::PROJECTION_VERSION;
    let backend = loci::storage::BackendKind::Redb.open(&store).unwrap();
    let mut w = loci::storage::WriteBatch::default();
    w.put(
        loci::storage::Table::Meta,
        b"projection",
        loci::codec::encode(&(now + 1)),
    );
    backend.commit(w).unwrap();
    drop(backend);
    let writer = loci::storage::StoreLock::acquire(&store).unwrap();
    let err = fails(&["stats", "--store", p(&store)], 5);
    let said = format!(
        "its nodes and edges were derived by a newer build's rules ({}; this build's are {now}): \
         it is held by process {}, whose build decides the rules while it holds the store: read \
         it with that build, or once that process lets go (this build then rebuilds them)",
        now + 1,
        std::process::id()
    );
    assert!(err.contains(&said), "{err}");
    drop(writer);
    // A writable open rebuilds them under this build's older rules, and says so: the newer
    // build rebuilds them again at its next open.
    let out = loci(&["stats", "--store", p(&store)]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("derived by a newer build's rules"), "{said}");
    ok(&["stats", "--store", p(&store)]);
}

/// The timeline shows a control character apart from its escape typed as text: both had read
/// `a \\u{1} b`, the character escaped once to break no line and then again with the quoting
/// (helper-95). A line break still reads as a space, and an override character as its escape.
#[test]
fn timeline_shows_a_control_character_apart_from_its_escape_typed_as_text() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let lines = concat!(
        r#"{"ts":1,"actor":"bot","kind":"NOTE","payload":{"text":"a \\u{1} b"}}"#,
        "\n",
        r#"{"ts":2,"actor":"bot","kind":"NOTE","payload":{"text":"a \u0001 b"}}"#,
        "\n",
        r#"{"ts":3,"actor":"bot","kind":"NOTE","payload":{"text":"one\ntwo \u202e three"}}"#,
        "\n",
    );
    let ingested = common::run_with_stdin(
        BIN,
        &["ingest", "--store", p(&store), "-"],
        lines.as_bytes(),
    );
    assert!(ingested.status.success());
    let shown = ok(&["timeline", "--store", p(&store)]);
    let texts: Vec<&str> = shown
        .lines()
        .map(|l| l.split_once("NOTE").unwrap().1.trim())
        .collect();
    assert_eq!(texts.len(), 3, "{shown}");
    assert_ne!(texts[0], texts[1], "{shown}");
    assert!(texts[1].contains("a \\u{1} b"), "{shown}");
    assert!(texts[0].contains("a \\\\u{1} b"), "{shown}");
    assert!(texts[2].contains("one two \\u{202e} three"), "{shown}");
}

/// A relation both asked for and denied is refused, naming it: `--relation OFFERS
/// --deny-relation OFFERS` had run and found no fact, without a word (helper-95).
#[test]
fn a_relation_both_asked_for_and_denied_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let err = fails(
        &[
            "query",
            "--store",
            p(&store),
            "who trades emeralds",
            "--relation",
            "OFFERS",
            "--deny-relation",
            "OFFERS",
        ],
        3,
    );
    assert!(
        err.contains("--deny-relation") && err.contains("\"OFFERS\" is also asked for"),
        "{err}"
    );
}

/// helper-95 (session 44): a table cell showed the float 1.0 as `1`, the integer's cell, and a
/// string as it is, so that `'-'` read as null, `''` as nothing, `'x | y'` as two cells, `'1'`
/// as a number and a line break split its row.
#[test]
fn a_query_table_tells_each_value_from_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let out = ok(&[
        "run",
        "--store",
        p(&store),
        "--query",
        "MATCH (n {key: 'bot'}) RETURN 1 AS i, 1.0 AS f, 2.5 AS g, null AS z, '-' AS dash, \
         '' AS empty, 'x | y' AS bar, '1' AS one, 'a\\nb' AS br, ' lead' AS lead, 'plain' AS s",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(
        lines[1], r#"1 | 1.0 | 2.5 | - | "-" | "" | "x | y" | "1" | "a\nb" | " lead" | plain"#,
        "{out}"
    );
}

/// helper-97 (session 45): deleting the only event that made a pinned node took the node and
/// said nothing of its pin, which then pointed nowhere (`check` exit 1), where the README said
/// a pin kept the node. A pin keeps a node from fading, not from its events' deletion: the
/// report names the pinned nodes the deletion took.
#[test]
fn delete_names_the_pinned_nodes_it_took() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    ok(&["pin", "--store", p(&store), "npc:fletcher:1"]);
    let out = ok(&["delete", "--store", p(&store), "--event", "15"]);
    assert!(
        out.contains("1 pinned node went with the events that made it")
            && out.contains("\"npc:fletcher:1\""),
        "{out}"
    );
    ok(&["pin", "--store", p(&store), "item:stick"]);
    ok(&["pin", "--store", p(&store), "npc:fletcher:0"]);
    let report = json(&[
        "delete",
        "--store",
        p(&store),
        "--event",
        "7",
        "49",
        "--json",
    ]);
    assert_eq!(
        report["pinned_nodes_removed"],
        serde_json::json!(["npc:fletcher:0"]),
        "{report}"
    );
    // A node the request names is taken with its pins, and not listed; a pinned node
    // that went with the events naming it is ("bot", pinned by the world, made by event 1,
    // which names the stick).
    let report = json(&[
        "delete",
        "--store",
        p(&store),
        "--node",
        "item:stick",
        "--json",
    ]);
    assert_eq!(
        report["pinned_nodes_removed"],
        serde_json::json!(["bot"]),
        "{report}"
    );
    ok(&["replay", "--store", p(&store), "--verify"]);
}

/// helper-97 (session 45): `loci wm mainline` with its text forgotten cleared the mainline,
/// the one item that survives every clearing, and exited 0; clearing it takes a text given
/// as empty.
#[test]
fn wm_mainline_without_a_text_is_refused_and_an_empty_one_clears_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    ok(&["wm", "--store", p(&store), "mainline", "find diamonds"]);
    let out = loci(&["wm", "--store", p(&store), "mainline"]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("wm mainline needs a text") && said.contains("\"\""),
        "{said}"
    );
    let shown = json(&["wm", "--store", p(&store), "--json"]);
    assert_eq!(shown["mainline"], "find diamonds");
    ok(&["wm", "--store", p(&store), "mainline", ""]);
    let shown = json(&["wm", "--store", p(&store), "--json"]);
    assert_eq!(shown["mainline"], serde_json::Value::Null);
}

/// helper-97 (session 45): an instructions file saved with a byte-order mark (as Windows
/// editors write one) put the mark at the head of the prompt, where ingest drops it.
#[test]
fn a_byte_order_mark_leaves_an_instructions_file_at_its_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let file = tmp.path().join("instructions.txt");
    std::fs::write(&file, "\u{feff}Be brief.\n").unwrap();
    let out = ok(&[
        "context",
        "--store",
        p(&store),
        "--budget",
        "300",
        "--no-record",
        "--instructions",
        p(&file),
    ]);
    assert!(!out.contains('\u{feff}'), "{out:?}");
    assert!(out.lines().any(|l| l == "Be brief."), "{out}");
}

/// helper-97 (session 45): `loci wm` printed a text as it is, so that an observation with a
/// line break split its line, and a threat holding "; " read as two threats.
#[test]
fn wm_shows_each_text_as_one_item_of_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    ok(&["wm", "--store", p(&store), "observe", "line one\nline two"]);
    ok(&[
        "wm",
        "--store",
        p(&store),
        "add-threat",
        "creeper; skeleton",
    ]);
    ok(&["wm", "--store", p(&store), "add-threat", "-"]);
    ok(&["wm", "--store", p(&store), "mainline", "find diamonds"]);
    let out = ok(&["wm", "--store", p(&store)]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "mainline  find diamonds", "{out}");
    assert_eq!(lines[3], r#"threats   "creeper; skeleton"; "-""#, "{out}");
    assert!(
        lines[6].ends_with(r#"] "line one\nline two""#) && lines.len() == 7,
        "{out}"
    );
}

/// helper-97 (session 45): `context --turn` listed a fact by an edge id a deletion since had
/// given to another fact, and a deleted event as if it were there.
#[test]
fn a_saved_turn_shows_its_facts_by_their_ends_and_says_which_events_went() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let shown = |args: &[&str]| {
        let mut all = vec!["context", "--store", p(&store)];
        all.extend_from_slice(args);
        ok(&all)
    };
    shown(&[
        "--budget",
        "300",
        "--question",
        "who trades emeralds for sticks",
        "--save",
        "--no-record",
    ]);
    ok(&["delete", "--store", p(&store), "--event", "7"]);
    let out = shown(&["--turn", "1"]);
    assert!(
        out.lines()
            .any(|l| l.ends_with("  npc:fletcher:0 -OFFERS-> item:emerald")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l == "  event:7  (gone since: deleted or forgotten)"),
        "{out}"
    );
    assert!(out.lines().any(|l| l == "  event:49"), "{out}");
}

/// The bytes of the files under `dir` (lengths, as `compact` counts them).
fn files_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                files_bytes(&p)
            } else {
                std::fs::metadata(&p).unwrap().len()
            }
        })
        .sum()
}

/// helper-97 (session 45): `compact` said "55002 -> 38618 bytes" of a store whose files were
/// 55002 bytes again once it exited (redb writes its allocator state as it closes), every
/// time it ran. The figure after is the store's files after the command.
#[test]
fn compact_reports_the_bytes_the_store_has_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    for store in [empty_store(tmp.path()), {
        let w = tmp.path().join("w");
        std::fs::create_dir(&w).unwrap();
        world_store(&w)
    }] {
        for _ in 0..2 {
            let r = json(&["compact", "--store", p(&store), "--json"]);
            assert_eq!(
                r["bytes_after"].as_u64().unwrap(),
                files_bytes(&store),
                "{r}"
            );
        }
    }
}

/// `forget` said "the store's files 714797616 -> 1394021401 bytes" of a forgetting at
/// 980k events whose files took 696 MB on disk before and 719 MB after: redb grows its file
/// ahead of use, a sparse length. It says what they take on disk too.
#[test]
fn forget_reports_what_the_store_takes_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let s = p(&store);
    let r = json(&["forget", "--store", s, "--budget", "60", "--json"]);
    let f = &r["forget"];
    let after = f["allocated_after"].as_u64().unwrap();
    assert!(f["allocated_before"].as_u64().unwrap() > 0, "{r}");
    // Measured with the store open: closing writes a little (redb's allocator state).
    assert!(
        after.abs_diff(allocated_bytes(&store)) < 1 << 20,
        "{after} against {}",
        allocated_bytes(&store)
    );
    let said = ok(&["forget", "--store", s, "--budget", "60"]);
    assert!(said.contains(" on disk"), "{said}");
}

/// What the files under `dir` take on disk (allocated blocks).
fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                allocated_bytes(&p)
            } else {
                std::fs::metadata(&p).unwrap().blocks() * 512
            }
        })
        .sum()
}

/// `consolidate --events-per-batch N` writes whole weeks N raw events at a time, and the
/// summaries come out as one batch writes them (their event numbers aside); 0 is refused.
#[test]
fn consolidate_in_batches_of_a_few_events_writes_the_summaries_one_batch_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let days = tmp.path().join("w.jsonl");
    ok(&["world", "--days", "30", "--out", p(&days)]);
    let texts = |batch: &str| -> Vec<String> {
        let store = tmp.path().join(format!("s{batch}"));
        let s = p(&store);
        ok(&["init", "--store", s]);
        ok(&["ingest", "--store", s, p(&days)]);
        let c = json(&[
            "consolidate",
            "--store",
            s,
            "--events-per-batch",
            batch,
            "--json",
        ]);
        assert!(c["report"]["weeks"].as_u64().unwrap() >= 4, "{c}");
        let mut texts: Vec<String> = c["summaries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["text"].as_str().unwrap().to_string())
            .collect();
        texts.sort();
        texts
    };
    assert_eq!(texts("3"), texts("20000"));
    let refused = fails(
        &[
            "consolidate",
            "--store",
            "nowhere",
            "--events-per-batch",
            "0",
        ],
        2,
    );
    assert!(refused.contains("0 is too few"), "{refused}");
    let negative = fails(
        &[
            "consolidate",
            "--store",
            "nowhere",
            "--events-per-batch",
            "-1",
        ],
        2,
    );
    assert!(negative.contains("-1 is negative"), "{negative}");
}

/// What the text output shows of a key, a name or a question reads as no other: `neighbors`
/// showed a key of a leading space as ` lead (name  lead, Thing)`, its spaces lost to the
/// eye, and `query` printed a question of two lines on two lines, the second as if a line of
/// its own (helper-147).
#[test]
fn neighbors_and_query_show_a_key_or_question_as_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let store = empty_store(dir.path());
    ingest_lines(
        &store,
        &[
            r#"{"ts":1,"actor":"bot","kind":"NOTE","assert":[{"op":"node","key":" lead","name":" lead","label":"Thing"},{"op":"node","key":"b, c","label":"Thing"},{"op":"edge","from":" lead","relation":"NEAR","to":"b, c"}]}"#,
        ],
    );
    let out = ok(&["neighbors", "--store", p(&store), " lead"]);
    assert!(out.starts_with("\" lead\" (\" lead\", Thing)"), "{out}");
    assert!(out.contains("->NEAR-> \"b, c\" ("), "{out}");
    // Quoted, as a key holding a line break is; the seed named as the key is.
    let out = ok(&["query", "--store", p(&store), "lead\nnear"]);
    assert!(out.starts_with("question: \"lead\\nnear\"\n"), "{out}");
    assert!(out.contains("  seed \" lead\" (\" lead\"): "), "{out}");
}

/// An error that says a store's files are damaged says what to do: "DB corrupted: File
/// truncated below stored layout", "Not a redb database: magic number mismatch" and a log
/// record's checksum mismatch had said nothing more (helper-148).
#[test]
fn a_damaged_store_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let store = world_store(dir.path());
    let file = store.join("data.redb");
    let len = std::fs::metadata(&file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let err = fails(&["stats", "--store", p(&store)], 6);
    assert!(
        err.contains("loci repair") && err.contains("backup"),
        "{err}"
    );
}

/// An empty key is a mistake in the command, whichever command is given it: `pin ""` said
/// "not found" and exited 4, where `delete --node ""` and `neighbors ""` exit 3 (helper-147).
#[test]
fn an_empty_key_is_bad_input_to_pin_and_unpin_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = world_store(dir.path());
    for command in ["pin", "unpin"] {
        let err = fails(&[command, "--store", p(&store), ""], 3);
        assert!(err.contains("empty"), "{command}: {err}");
    }
    fails(&["delete", "--store", p(&store), "--node", ""], 3);
}

/// `LOCI_LOG` that is no filter is said to be one, not passed over in silence; and `-q` is
/// quiet whatever `LOCI_LOG` asks (helper-147).
#[test]
fn a_log_filter_that_is_none_is_said_and_quiet_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    ok(&["init", "--store", p(&store)]);
    let run = |env: &str, args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("LOCI_LOG", env)
            .output()
            .unwrap()
    };
    let out = run("loci=[nonsense", &["stats", "--store", p(&store)]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("LOCI_LOG") && err.contains("loci=[nonsense"),
        "{err}"
    );
    let out = run("trace", &["stats", "-q", "--store", p(&store)]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "-q with LOCI_LOG=trace"
    );
}

/// A store name longer than the file system takes (a 300-byte name), or a path through a
/// file, is the caller's mistake, said alike by every command: `init` exited 8, a failure of
/// the machine, where the others exited 4 and told the user to `loci init` there, which could
/// not (helper-147, helper-150).
#[test]
fn a_store_name_the_file_system_cannot_take_is_a_bad_input_to_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let long = tmp.path().join("a".repeat(300));
    let nested = tmp.path().join("a".repeat(300)).join("s");
    let events = tmp.path().join("e.jsonl");
    std::fs::write(&events, "").unwrap();
    // And a path through a file (ENOTDIR), said as a path that cannot be (helper-150).
    let through_a_file = events.join("s");
    for (store, said) in [
        (&long, "File name too long"),
        (&nested, "File name too long"),
        (&through_a_file, "Not a directory"),
    ] {
        for args in [
            &["init", "--store", p(store)][..],
            &["stats", "--store", p(store)],
            &["ingest", "--store", p(store), p(&events)],
            &["search", "--store", p(store), "emerald"],
        ] {
            let err = fails(args, 3);
            assert!(err.contains(said), "{args:?}: {err}");
            assert!(!err.contains("loci init"), "{args:?}: {err}");
        }
    }
}

/// The README speaks of `--as-of`/`--now` as one idea, but `query` took only `--as-of` and
/// `neighbors` only `--now`: a user who wrote the other was refused (helper-147 #9). Each takes
/// both, and they mean the same.
#[test]
fn as_of_and_now_are_one_flag_in_query_and_neighbors() {
    let tmp = tempfile::tempdir().unwrap();
    let store = world_store(tmp.path());
    let s = p(&store);
    // A query records its use unless told not to: the second would read the first's.
    for (command, subject, quiet) in [
        ("query", "where is kalomi", "--no-record"),
        ("neighbors", "npc:fletcher:0", "--json"),
    ] {
        // Less the time the query took, which its last line says.
        let at = |flag: &str| {
            let out = ok(&[command, "--store", s, subject, quiet, flag, "30000"]);
            let timed = |l: &&str| l.ends_with(" us");
            out.lines()
                .filter(|l| !timed(l))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let (as_of, now) = (at("--as-of"), at("--now"));
        assert_eq!(as_of, now, "{command}");
        assert!(!as_of.is_empty(), "{command}");
    }
}

/// `ingest --commit-every N -` fed by a live pipe (`tail -f events.jsonl | loci ingest ...`):
/// it committed nothing until 16k lines or the input's end came, and a SIGTERM while it
/// waited for input did not stop it (its read went on; helper-150). What it has read is
/// committed once the input pauses, and a signal while it waits stops it at once, with exit
/// 130 and the note of where the input is in the store.
#[cfg(unix)]
#[test]
fn a_live_feed_is_committed_as_it_pauses_and_a_signal_stops_the_wait() {
    use std::io::{BufRead, Write};
    let tmp = tempfile::tempdir().unwrap();
    let store = empty_store(tmp.path());
    let input = std::fs::read_to_string(many_events(tmp.path(), 30)).unwrap();
    let mut command = loci_with_default_signals();
    command
        .args([
            "ingest",
            "--store",
            p(&store),
            "--commit-every",
            "10",
            "--json",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    // The feed stays open: what it sent is all there is for now.
    let mut feed = child.stdin.take().unwrap();
    feed.write_all(input.as_bytes()).unwrap();
    feed.flush().unwrap();
    // Read apart, so that a run that commits nothing fails here, not hangs.
    let stdout = child.stdout.take().unwrap();
    let (tx, reported) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    let mut events = 0;
    while events < 30 {
        let Ok(line) = reported.recv_timeout(std::time::Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!("{events} of the 30 events sent committed 30 s after the feed paused");
        };
        let commit: serde_json::Value = serde_json::from_str(&line).unwrap();
        events += commit["events"].as_u64().unwrap();
    }
    assert_eq!(events, 30);
    // SAFETY: a signal to the child this test spawned and has not waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the signal did not stop the ingest waiting for input");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(feed);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{status:?} {err}");
    assert!(
        err.contains("interrupted") && err.contains("<stdin> line 30"),
        "{err}"
    );
    assert_eq!(
        json(&["stats", "--store", p(&store), "--json"])["events"],
        30
    );
}
