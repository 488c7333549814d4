//! Warm traversals on a store that is already there: the k-hop expansions `loci bench graph`
//! times, from the same starts, without loading the graph again. A 100M-edge load takes
//! minutes; a change to the traversal code is measured against the last build on the store one
//! load wrote, in alternating runs. Prints one JSON object: p50 and p95 in microseconds over
//! three passes after a warm-up pass (the pages read), and the mean number of nodes reached.
//!
//! cargo run --release --example warm_traversals -- STORE_DIR

use loci::bench::{latency, random_starts, GraphSpec};
use loci::{Store, TraversalFilter};

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("warm_traversals: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .ok_or("usage: warm_traversals STORE_DIR (a store `loci bench graph --dir` wrote)")?;
    let store = Store::open_read_only(std::path::Path::new(&dir))?;
    let nodes = u32::try_from(store.stats().nodes).unwrap_or(u32::MAX);
    if nodes == 0 {
        return Err("the store holds no nodes".into());
    }
    // The benchmark's starts: its generator's seed, over the nodes the store holds.
    let spec = GraphSpec {
        nodes,
        ..GraphSpec::default()
    };
    let starts = random_starts(&spec, 20_000);
    let g = store.graph();
    let adjacency = g.adjacency();
    let conf = TraversalFilter {
        min_confidence: 0.5,
        ..Default::default()
    };
    for &s in &starts {
        std::hint::black_box(adjacency.khop(s, 2, &conf).len());
    }
    let (mut two, mut three) = (Vec::new(), Vec::new());
    let (mut reached2, mut reached3) = (0usize, 0usize);
    for _ in 0..3 {
        for &s in &starts {
            let t = std::time::Instant::now();
            reached2 += adjacency.khop(s, 2, &conf).len();
            two.push(t.elapsed().as_secs_f64() * 1e6);
        }
        for &s in &starts[..2_000] {
            let t = std::time::Instant::now();
            reached3 += adjacency.khop_count(s, 3, &conf);
            three.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    // The benchmark's percentiles (nearest rank), so that the figures read as its do.
    let summary = |t: Vec<f64>, reached: usize| {
        let mean_nodes = reached as f64 / t.len() as f64;
        let l = latency(t);
        format!(
            "{{\"p50_us\": {:.3}, \"p95_us\": {:.3}, \"mean_nodes\": {mean_nodes:.2}}}",
            l.p50_us, l.p95_us
        )
    };
    println!(
        "{{\n  \"nodes\": {nodes},\n  \"two_hop_conf_0_5\": {},\n  \"three_hop_conf_0_5\": {}\n}}",
        summary(two, reached2),
        summary(three, reached3)
    );
    Ok(())
}
