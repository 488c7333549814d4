//! Crash consistency with the real binary: `loci ingest --commit-every N` is killed with
//! SIGKILL at random moments, many times, for each backend. After every kill the store must
//! open, `loci replay --verify` must pass, and every event the process reported as committed
//! must be in the log with the content it was given.
//!
//! The kill points are drawn from a seeded generator; set LOCI_CRASH_SEED to replay a run, and
//! LOCI_CRASH_ROUNDS to run more rounds.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use loci::ingest::EventLine;
use loci::world::{self, Rng, WorldConfig};
use loci::{BackendKind, Store};

const BIN: &str = env!("CARGO_BIN_EXE_loci");

/// Writes the world's events with a unique evidence tag per event, so each can be recognised.
fn write_round_file(path: &Path, round: usize) -> usize {
    let w = world::generate(&WorldConfig {
        seed: 3,
        scale: 12,
        days: 6,
    });
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for (j, mut e) in w.events.into_iter().enumerate() {
        e.evidence = vec![format!("round{round}-event{j}")];
        writeln!(f, "{}", EventLine::from(e).to_json_line()).unwrap();
    }
    f.flush().unwrap();
    std::fs::read_to_string(path).unwrap().lines().count()
}

/// Parses "committed events A..=B (...)" lines into ranges.
fn acked(lines: &[String]) -> Vec<(u64, u64)> {
    lines
        .iter()
        .filter_map(|l| {
            let rest = l.strip_prefix("committed events ")?;
            let range = rest.split_whitespace().next()?;
            let (a, b) = range.split_once("..=")?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect()
}

fn crash_rounds(backend: BackendKind) {
    let seed: u64 = std::env::var("LOCI_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261122);
    let rounds: usize = std::env::var("LOCI_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    println!("crash test {backend}: seed {seed}, {rounds} rounds");
    let mut rng = Rng::new(seed ^ backend as u64);
    let tmp = tempfile::tempdir().unwrap();
    let store_dir = tmp.path().join("store");
    let status = Command::new(BIN)
        .args(["init", "--backend", backend.name(), "--store"])
        .arg(&store_dir)
        .status()
        .unwrap();
    assert!(status.success());

    let mut kills_mid_ingest = 0;
    let mut durable_unacked = 0;
    for round in 0..rounds {
        let file = tmp.path().join(format!("round{round}.jsonl"));
        let events_in_file = write_round_file(&file, round);
        let mut child = Command::new(BIN)
            .args(["ingest", "--commit-every", "7", "--store"])
            .arg(&store_dir)
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        // Kill anywhere from before the store opens to after the last commit.
        let delay = Duration::from_micros(rng.below(2_500_000));
        let started = Instant::now();
        let mut exited = None;
        while started.elapsed() < delay {
            if let Some(s) = child.try_wait().unwrap() {
                exited = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if exited.is_none() {
            child.kill().unwrap(); // SIGKILL
            kills_mid_ingest += 1;
        }
        // Reaps the child (returns at once when it had already exited).
        let status = child.wait().unwrap();
        let lines = reader.join().unwrap();
        if exited.is_some() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            assert!(
                status.success(),
                "round {round}: ingest failed on its own: {err}"
            );
        }
        let ranges = acked(&lines);

        // The binary must accept the store and verify it.
        let verify = Command::new(BIN)
            .args(["replay", "--verify", "--store"])
            .arg(&store_dir)
            .output()
            .unwrap();
        assert!(
            verify.status.success(),
            "round {round} (killed after {delay:?}): replay --verify failed:\n{}\n{}",
            String::from_utf8_lossy(&verify.stdout),
            String::from_utf8_lossy(&verify.stderr)
        );

        // Every acknowledged event is present, with its content.
        let store = Store::open(&store_dir).unwrap();
        if let Some(&(first, _)) = ranges.first() {
            for &(a, b) in &ranges {
                for seq in a..=b {
                    let ev = store.event(seq).unwrap().unwrap_or_else(|| {
                        panic!("round {round}: acknowledged event {seq} is missing")
                    });
                    let j = seq - first;
                    assert_eq!(
                        ev.evidence,
                        vec![format!("round{round}-event{j}")],
                        "round {round}: event {seq}"
                    );
                }
            }
            let last_acked = ranges.last().map(|r| r.1).unwrap_or(0);
            let last = store.stats().events;
            assert!(last >= last_acked);
            if last > last_acked {
                durable_unacked += 1;
            }
            if exited.is_some() {
                assert_eq!(
                    last_acked - first + 1,
                    events_in_file as u64,
                    "a clean exit acknowledges every event"
                );
            }
        }
        assert!(store.verify().unwrap().ok());
    }
    println!(
        "crash test {backend}: {kills_mid_ingest} of {rounds} rounds killed mid-run; \
         {durable_unacked} left a commit that was durable but not yet acknowledged"
    );
    assert!(
        kills_mid_ingest > 0,
        "no round was killed: the delays are too long to test anything"
    );
}

#[test]
fn crash_consistency_redb() {
    crash_rounds(BackendKind::Redb);
}

#[test]
fn crash_consistency_sled() {
    crash_rounds(BackendKind::Sled);
}
