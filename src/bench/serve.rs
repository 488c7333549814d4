//! `loci bench serve`: a load test of `loci serve` on loopback, bounded in time and count.
//!
//! A store is built from a passage corpus (the 2Wiki corpus, with extracted mentions) plus the
//! synthetic world; `loci serve` is started on it as a child process, and this process opens
//! `connections` keep-alive connections that mix recall (80%: a corpus question, `POST
//! /v1/query`), planner queries (15%: a saved world query, `POST /v1/run`) and appends (5%: one
//! event with an idempotency key, `POST /v1/events`). With a `rate`, each connection sends on a
//! fixed schedule and latency is counted from the scheduled time (so a stall is not hidden by
//! the requests it delayed); without one, each sends its next request when the last is answered.
//!
//! Then the server is stopped with SIGTERM, and every acknowledged append is looked up in the
//! store; a second, shorter run is cut by a kill -9 of the server mid-load, and again every
//! acknowledged append must be there and `verify` (replay) must equal the live state.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::error::{Error, Result};
use crate::ingest::{read_file, Format};
use crate::{BackendKind, Store};

/// What to run.
#[derive(Clone, Debug)]
pub struct ServeBenchConfig {
    /// The `loci` binary to serve with.
    pub binary: PathBuf,
    /// Passages (`{"id", "title", "text"}` lines) and questions (`{"question", ...}` lines).
    pub corpus: PathBuf,
    pub questions: PathBuf,
    pub connections: usize,
    pub seconds: f64,
    /// Requests per second per connection (0: each as soon as the last is answered).
    pub rate: f64,
    /// Requests at most, over all connections.
    pub max_requests: usize,
    /// Seconds of load before the kill -9 of the second run (0: no second run).
    pub kill_after: f64,
    pub seed: u64,
}

/// Latency and errors of one kind of request.
#[derive(Clone, Debug, Default, Serialize)]
pub struct KindReport {
    pub count: usize,
    pub errors: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// What an acknowledged-append check found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DurabilityReport {
    pub acknowledged: usize,
    pub lost: usize,
    pub verify_ok: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ServeBenchReport {
    pub connections: usize,
    pub seconds: f64,
    pub rate_per_connection: f64,
    pub passages: usize,
    pub events_in_store: u64,
    pub requests: usize,
    pub errors: usize,
    pub throughput_rps: f64,
    pub recall: KindReport,
    pub planner: KindReport,
    pub append: KindReport,
    /// First error messages seen (at most 5).
    pub error_samples: Vec<String>,
    pub after_clean_stop: DurabilityReport,
    /// The second run, cut by a kill -9 (absent when `kill_after` is 0).
    pub after_kill_9: Option<DurabilityReport>,
    pub kill_9_requests: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Recall,
    Planner,
    Append,
}

#[derive(Default)]
struct Tally {
    recall: Vec<f64>,
    planner: Vec<f64>,
    append: Vec<f64>,
    errors: [usize; 3],
    samples: Vec<String>,
    acked: Vec<String>,
}

/// One HTTP/1.1 keep-alive connection: request out, status and body back.
struct Conn {
    reader: BufReader<TcpStream>,
    addr: String,
}

impl Conn {
    async fn open(addr: &str) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::new(s),
            addr: addr.to_string(),
        })
    }

    async fn post(&mut self, path: &str, body: &str) -> std::io::Result<(u16, String)> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let s = self.reader.get_mut();
        s.write_all(head.as_bytes()).await?;
        s.write_all(body.as_bytes()).await?;
        let mut line = String::new();
        self.reader.read_line(&mut line).await?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let mut length = 0usize;
        loop {
            line.clear();
            if self.reader.read_line(&mut line).await? == 0 {
                return Err(std::io::Error::other("connection closed mid-response"));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length.min(64 << 20)];
        self.reader.read_exact(&mut body).await?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

/// A child `loci serve` and the address it listens on.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(binary: &Path, store: &Path, connections: usize) -> Result<Server> {
        let mut child = Command::new(binary)
            .arg("serve")
            .arg("--store")
            .arg(store)
            .args(["--addr", "127.0.0.1:0", "--max-in-flight"])
            .arg((connections * 2 + 16).to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io(binary, e))?;
        let mut err =
            std::io::BufReader::new(child.stderr.take().ok_or_else(|| Error::InvalidArgument {
                name: "binary".into(),
                message: "no standard error to read the address from".into(),
            })?);
        let mut line = String::new();
        std::io::BufRead::read_line(&mut err, &mut line).map_err(|e| Error::io(binary, e))?;
        let Some(addr) = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
        else {
            let _ = child.kill();
            return Err(Error::InvalidArgument {
                name: "binary".into(),
                message: format!("`loci serve` did not say where it listens: {line:?}"),
            });
        };
        let addr = addr.to_string();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        });
        Ok(Server { child, addr })
    }

    /// SIGTERM, then wait for the drain (a kill after 60 s).
    fn stop(mut self) -> bool {
        #[cfg(unix)]
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }

    fn kill_9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

const PLANNER: [&str; 3] = [
    r#"{"name": "find_trade", "params": {"want": "emerald", "give": "stick"}}"#,
    r#"{"name": "where_is_home"}"#,
    r#"{"name": "last_death"}"#,
];

struct Load {
    addr: String,
    questions: Arc<Vec<String>>,
    connections: usize,
    rate: f64,
    until: Instant,
    max_requests: usize,
    seed: u64,
    run: &'static str,
}

async fn connection(
    load: Arc<Load>,
    id: usize,
    sent: Arc<std::sync::atomic::AtomicUsize>,
    tally: Arc<Mutex<Tally>>,
) {
    use std::sync::atomic::Ordering;
    let mut rng = Rng(load.seed ^ (id as u64).wrapping_mul(0x1000_0000_01b3));
    let mut conn = None;
    let interval = (load.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / load.rate));
    // Connections start spread over one interval, not all at once.
    let mut next = Instant::now()
        + interval.map_or(Duration::ZERO, |i| {
            i.mul_f64((id as f64) / load.connections as f64)
        });
    let mut i = 0usize;
    loop {
        if let Some(iv) = interval {
            let now = Instant::now();
            if next > now {
                tokio::time::sleep(next - now).await;
            }
            next += iv;
        }
        if Instant::now() >= load.until || sent.fetch_add(1, Ordering::Relaxed) >= load.max_requests
        {
            return;
        }
        let scheduled = if interval.is_some() {
            next - interval.unwrap_or_default()
        } else {
            Instant::now()
        };
        let roll = rng.next() % 100;
        let (kind, path, body, key) = if roll < 80 {
            let q = &load.questions[(rng.next() as usize) % load.questions.len()];
            let body = serde_json::json!({"question": q, "limit": 5, "record": false}).to_string();
            (Kind::Recall, "/v1/query", body, None)
        } else if roll < 95 {
            let body = PLANNER[(rng.next() as usize) % PLANNER.len()].to_string();
            (Kind::Planner, "/v1/run", body, None)
        } else {
            let key = format!("bench-{}-{id}-{i}", load.run);
            let body = format!(
                "{{\"ts\": 200000, \"actor\": \"bot\", \"kind\": \"NOTE\", \"payload\": {{\"text\": \"load note {i}\"}}, \"idempotency_key\": \"{key}\"}}\n"
            );
            (Kind::Append, "/v1/events?format=events", body, Some(key))
        };
        i += 1;
        if conn.is_none() {
            conn = Conn::open(&load.addr).await.ok();
        }
        let result = match conn.as_mut() {
            Some(c) => c.post(path, &body).await,
            None => Err(std::io::Error::other("cannot connect")),
        };
        let ms = scheduled.elapsed().as_secs_f64() * 1e3;
        let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
        let slot = match kind {
            Kind::Recall => 0,
            Kind::Planner => 1,
            Kind::Append => 2,
        };
        match result {
            Ok((200, _)) => {
                match kind {
                    Kind::Recall => t.recall.push(ms),
                    Kind::Planner => t.planner.push(ms),
                    Kind::Append => t.append.push(ms),
                }
                if let Some(k) = key {
                    t.acked.push(k);
                }
            }
            Ok((status, body)) => {
                t.errors[slot] += 1;
                if t.samples.len() < 5 {
                    t.samples.push(format!(
                        "{path}: {status} {}",
                        body.chars().take(200).collect::<String>()
                    ));
                }
            }
            Err(e) => {
                t.errors[slot] += 1;
                if t.samples.len() < 5 {
                    t.samples.push(format!("{path}: {e}"));
                }
                conn = None;
            }
        }
    }
}

fn run_load(load: Load) -> Tally {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let load = Arc::new(load);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return Tally::default(),
    };
    rt.block_on(async {
        let tasks: Vec<_> = (0..load.connections)
            .map(|id| tokio::spawn(connection(load.clone(), id, sent.clone(), tally.clone())))
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
    std::mem::take(&mut *t)
}

fn kind_report(mut ms: Vec<f64>, errors: usize) -> KindReport {
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| -> f64 {
        if ms.is_empty() {
            return 0.0;
        }
        ms[((ms.len() as f64 * p).ceil() as usize).clamp(1, ms.len()) - 1]
    };
    KindReport {
        count: ms.len() + errors,
        errors,
        p50_ms: at(0.50),
        p95_ms: at(0.95),
        p99_ms: at(0.99),
        max_ms: ms.last().copied().unwrap_or(0.0),
    }
}

fn durability(store_dir: &Path, acked: &[String]) -> Result<DurabilityReport> {
    let store = Store::open(store_dir)?;
    let mut lost = 0;
    for k in acked {
        if store.applied_key(k)?.is_none() {
            lost += 1;
        }
    }
    let verify_ok = store.verify()?.ok();
    Ok(DurabilityReport {
        acknowledged: acked.len(),
        lost,
        verify_ok,
    })
}

/// Builds the store, runs the load, stops the server cleanly, checks; then the kill -9 run.
pub fn run_serve_bench(config: &ServeBenchConfig) -> Result<ServeBenchReport> {
    let dir = tempfile::tempdir().map_err(|e| Error::io(Path::new("tempdir"), e))?;
    let store_dir = dir.path().join("store");
    let passages;
    let events_in_store;
    {
        let store = Store::create(&store_dir, BackendKind::Redb)?;
        let batch = read_file(&config.corpus, Some(Format::Passages))?;
        passages = batch.events.len();
        batch.commit(&store)?;
        store.ingest(crate::extract::extract_mentions(&store)?)?;
        store.ingest(crate::extract::alias_links(&store)?)?;
        let world = crate::world::generate(&crate::world::WorldConfig::default());
        store.ingest(world.events)?;
        events_in_store = store.stats().events;
    }
    let questions: Vec<String> = super::read_questions(&config.questions)?
        .into_iter()
        .map(|q| q.question)
        .collect();
    if questions.is_empty() {
        return Err(Error::InvalidArgument {
            name: "questions".into(),
            message: "the file holds no questions".into(),
        });
    }
    let questions = Arc::new(questions);

    let server = Server::start(&config.binary, &store_dir, config.connections)?;
    let started = Instant::now();
    let tally = run_load(Load {
        addr: server.addr.clone(),
        questions: questions.clone(),
        connections: config.connections,
        rate: config.rate,
        until: started + Duration::from_secs_f64(config.seconds),
        max_requests: config.max_requests,
        seed: config.seed,
        run: "clean",
    });
    let elapsed = started.elapsed().as_secs_f64();
    let stopped_cleanly = server.stop();
    let mut after_clean_stop = durability(&store_dir, &tally.acked)?;
    after_clean_stop.verify_ok &= stopped_cleanly;

    let ok = tally.recall.len() + tally.planner.len() + tally.append.len();
    let errors: usize = tally.errors.iter().sum();
    let mut report = ServeBenchReport {
        connections: config.connections,
        seconds: elapsed,
        rate_per_connection: config.rate,
        passages,
        events_in_store,
        requests: ok + errors,
        errors,
        throughput_rps: (ok + errors) as f64 / elapsed.max(1e-9),
        recall: kind_report(tally.recall, tally.errors[0]),
        planner: kind_report(tally.planner, tally.errors[1]),
        append: kind_report(tally.append, tally.errors[2]),
        error_samples: tally.samples,
        after_clean_stop,
        after_kill_9: None,
        kill_9_requests: 0,
    };

    if config.kill_after > 0.0 {
        let server = Server::start(&config.binary, &store_dir, config.connections)?;
        let addr = server.addr.clone();
        let kill_at = Instant::now() + Duration::from_secs_f64(config.kill_after);
        // The kill lands while the load is running: the load is given twice as long.
        let killer = std::thread::spawn(move || {
            let now = Instant::now();
            if kill_at > now {
                std::thread::sleep(kill_at - now);
            }
            server.kill_9();
        });
        let tally = run_load(Load {
            addr,
            questions,
            connections: config.connections,
            rate: config.rate,
            until: Instant::now() + Duration::from_secs_f64(config.kill_after * 2.0),
            max_requests: config.max_requests,
            seed: config.seed ^ 0x55,
            run: "kill",
        });
        let _ = killer.join();
        report.kill_9_requests = tally.recall.len() + tally.planner.len() + tally.append.len();
        report.after_kill_9 = Some(durability(&store_dir, &tally.acked)?);
    }
    Ok(report)
}
