//! Criterion benches for the foundation's speed goals, on the synthetic scale-free graph of
//! `loci::bench` (200k nodes, 1M edges, redb): traversal, search, open and batched ingest.
//! `loci bench graph` reports the same figures (and memory and disk) in one run.
//!
//! LOCI_BENCH_BACKEND=sled runs them on sled.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use loci::bench::{self, GraphSpec};
use loci::model::Assertion;
use loci::{BackendKind, SearchFilter, Store, TraversalFilter};

fn backend() -> BackendKind {
    std::env::var("LOCI_BENCH_BACKEND")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(BackendKind::Redb)
}

fn queries(c: &mut Criterion) {
    let spec = GraphSpec::default();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    {
        let store = Store::create(&path, backend()).unwrap();
        bench::build(&store, &spec, 100_000).unwrap();
    }
    let store = Store::open(&path).unwrap();
    let starts = bench::random_starts(&spec, 4096);
    let conf = TraversalFilter {
        min_confidence: 0.5,
        ..Default::default()
    };
    let all = TraversalFilter::default();
    let mut g = c.benchmark_group("graph_200k_1m");
    {
        let read = store.graph();
        let adj = read.adjacency();
        let mut i = 0;
        g.bench_function("two_hop_conf_0.5_distinct_nodes", |b| {
            b.iter(|| {
                i = (i + 1) % starts.len();
                adj.khop(starts[i], 2, &conf)
            })
        });
        let mut i = 0;
        let params = loci::retrieval::PushParams::default();
        g.bench_function("ppr_push_one_seed_eps_1e-4", |b| {
            b.iter(|| {
                i = (i + 1) % starts.len();
                loci::retrieval::personalized_pagerank(
                    adj,
                    &[(starts[i], 1.0)],
                    params,
                    &all,
                    |_, e| e.confidence.max(1e-3),
                )
            })
        });
        let mut i = 0;
        g.bench_function("three_hop_count", |b| {
            b.iter(|| {
                i = (i + 1) % starts.len();
                adj.khop_count(starts[i], 3, &all)
            })
        });
    }
    let qs = bench::search_queries(&spec, 4096);
    let filter = SearchFilter::default();
    let mut i = 0;
    g.bench_function("search_top10", |b| {
        b.iter(|| {
            i = (i + 1) % qs.len();
            store.search(&qs[i], &filter, 10).unwrap()
        })
    });
    drop(store);
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("open_store", |b| b.iter(|| Store::open(&path).unwrap()));
    g.finish();
}

fn ingest(c: &mut Criterion) {
    let spec = GraphSpec::default();
    let nodes: Vec<Assertion> = bench::graph_nodes(&spec)
        .into_iter()
        .map(Assertion::UpsertNode)
        .collect();
    let edges = bench::graph_edges(&spec);
    let mut g = c.benchmark_group("ingest");
    g.sample_size(10).measurement_time(Duration::from_secs(40));
    g.throughput(Throughput::Elements(edges.len() as u64));
    g.bench_function("1m_edges_in_100k_durable_batches", |b| {
        b.iter_batched(
            || {
                // Untimed: a fresh store holding the nodes, and the edge batches ready.
                let dir = tempfile::tempdir().unwrap();
                let store = Store::create(dir.path().join("s"), backend()).unwrap();
                store
                    .ingest(bench::import_events(nodes.clone(), 1024))
                    .unwrap();
                let batches: Vec<_> = edges
                    .chunks(100_000)
                    .map(|c| {
                        bench::import_events(
                            c.iter().cloned().map(Assertion::UpsertEdge).collect(),
                            1024,
                        )
                    })
                    .collect();
                (dir, store, batches)
            },
            |(dir, store, batches)| {
                for b in batches {
                    store.ingest(b).unwrap();
                }
                (dir, store)
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, queries, ingest);
criterion_main!(benches);
