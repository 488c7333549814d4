//! Prometheus-format metrics of the server: requests by route, method and status, latency
//! histograms by route, requests refused as busy, and the store's counters at scrape time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(String, String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    busy: u64,
}

/// The server's counters.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

/// The label a request's method is counted under: HTTP's own methods by name, any other as
/// `other`. A client names the method, and each name had been a series of its own, kept for
/// the server's life: made-up names grew the metrics and the memory without bound.
pub fn method_label(method: &str) -> &str {
    const KNOWN: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE",
    ];
    KNOWN.into_iter().find(|m| *m == method).unwrap_or("other")
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Counters stay usable after a panic elsewhere: a lost increment is no reason to stop.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one answered request.
    pub fn record(&self, route: &str, method: &str, status: u16, took: Duration) {
        let mut m = self.lock();
        *m.requests
            .entry((route.to_string(), method.to_string(), status))
            .or_default() += 1;
        let h = m.latency.entry(route.to_string()).or_default();
        let s = took.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += s;
    }

    /// Counts one request refused because the server was at its concurrency limit.
    pub fn record_busy(&self) {
        self.lock().busy += 1;
    }

    /// The text exposition, with the store's counters.
    pub fn render(&self, store: &crate::Stats, usage_pending: usize, usable: bool) -> String {
        let m = self.lock();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP loci_http_requests_total Requests answered, by route, method and status.\n# TYPE loci_http_requests_total counter"
        );
        for ((route, method, status), n) in &m.requests {
            let _ = writeln!(
                out,
                "loci_http_requests_total{{route=\"{}\",method=\"{}\",status=\"{status}\"}} {n}",
                escape(route),
                escape(method)
            );
        }
        let _ = writeln!(
            out,
            "# HELP loci_http_request_duration_seconds Time to answer, by route.\n# TYPE loci_http_request_duration_seconds histogram"
        );
        for (route, h) in &m.latency {
            let r = escape(route);
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "loci_http_request_duration_seconds_bucket{{route=\"{r}\",le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "loci_http_request_duration_seconds_bucket{{route=\"{r}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "loci_http_request_duration_seconds_sum{{route=\"{r}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "loci_http_request_duration_seconds_count{{route=\"{r}\"}} {}",
                h.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP loci_http_busy_total Requests refused with 503 at the concurrency limit.\n# TYPE loci_http_busy_total counter\nloci_http_busy_total {}",
            m.busy
        );
        for (name, help, v) in [
            ("loci_store_events", "Records in the log.", store.events),
            (
                "loci_store_events_deleted",
                "Events deleted or forgotten.",
                store.events_deleted,
            ),
            (
                "loci_store_nodes",
                "Nodes in the graph.",
                store.nodes as u64,
            ),
            (
                "loci_store_edges",
                "Edges in the graph.",
                store.edges as u64,
            ),
            (
                "loci_store_disk_bytes",
                "Bytes of the store's files.",
                store.disk_bytes_backend + store.disk_bytes_text,
            ),
            (
                "loci_store_usage_pending",
                "Uses waiting to be flushed as a USAGE event.",
                usage_pending as u64,
            ),
            (
                "loci_store_usable",
                "0 once the store's handle refuses every call (a failed sled commit, a panic inside the backend): only a restart mends it.",
                u64::from(usable),
            ),
            (
                "loci_store_snapshot_damage_found",
                "1 when a read found the mapped state snapshot damaged: answers may be short until the next write replays the graph.",
                u64::from(store.snapshot_damage_found),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
