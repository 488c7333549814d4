//! `loci serve` and `loci mcp`: the flags resolved into a `ServeConfig`, a tokio runtime, and
//! the library's server (`loci::serve`).

use std::sync::Arc;

use anyhow::{Context as _, Result};

use loci::serve::{self, AppState, ServeConfig};

use super::args::{McpArgs, ServeArgs};
use super::exit::{fail, Code};
use super::output::errln;

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("loci-serve")
        .build()
        .context("starting the server's runtime")
}

/// The key in a key file, without surrounding whitespace (never printed).
fn read_key(path: &std::path::Path) -> Result<String> {
    let raw = super::read_flag_file("--key-file", path)?;
    Ok(raw.trim().to_string())
}

fn config(a: &ServeArgs) -> Result<ServeConfig> {
    let key = a.key_file.as_deref().map(read_key).transpose()?;
    let mut c = ServeConfig::default().with_addr(a.addr).with_key(key);
    c.max_in_flight = a.max_in_flight as usize;
    c.max_connections = a.max_connections as usize;
    if let Some(w) = a.workers {
        c.workers = w as usize;
    }
    c.max_body_bytes = a.max_body_bytes as usize;
    c.queries_dir = a.queries.clone();
    if let Err(why) = c.validate() {
        fail!(Code::BadInput, "{why}");
    }
    Ok(c)
}

pub fn serve(a: ServeArgs) -> Result<Code> {
    let config = config(&a)?;
    // The server owns the store for its whole run and drops it on shutdown.
    let store = loci::Store::open(&a.store.store)?;
    let state = AppState::new(store, config.clone())?;
    let rt = runtime()?;
    let code = rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(config.addr).await {
            Ok(l) => l,
            Err(e) => fail!(Code::Failure, "listening on {}: {e}", config.addr),
        };
        let bound = listener.local_addr()?;
        // The one line a supervisor (or a test) waits for: where to connect.
        errln!(
            "loci serve: listening on http://{bound} ({}; MCP at /mcp)",
            if config.key.is_some() {
                "key required"
            } else {
                "no key, loopback only"
            }
        );
        let closed = serve::serve(Arc::clone(&state), listener, serve::termination()).await?;
        errln!(
            "loci serve: stopped; {}",
            if closed {
                "the store is closed"
            } else {
                "a request still held the store (committed batches are durable)"
            }
        );
        Ok(Code::Ok)
    });
    // Work a stuck request left on the blocking pool is not waited for past this.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

pub fn mcp(a: McpArgs) -> Result<Code> {
    // The server owns the store for its whole run and drops it on shutdown.
    let store = loci::Store::open(&a.store.store)?;
    let mut config = ServeConfig::default();
    config.queries_dir = a.queries.clone();
    let state = AppState::new(store, config)?;
    let rt = runtime()?;
    let served = rt.block_on(serve::mcp::serve_stdio(Arc::clone(&state)));
    if !state.close() {
        tracing::info!("work still held the store at exit (a request, or a replay of the graph from the log) and is left unfinished; committed batches are durable");
    }
    // As `serve`: work left on the blocking pool (a replay of the graph after damage, which
    // at 100M edges takes minutes) is not waited for past this, so that a client closing
    // the server's input and starting another finds the store free.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    served?;
    Ok(Code::Ok)
}
