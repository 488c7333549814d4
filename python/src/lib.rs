//! The `loci._loci` extension: the library's store behind a small Python class. Every method
//! releases the GIL while the store works and returns JSON text, which `loci/__init__.py`
//! turns into dicts, so Python sees exactly what `loci ... --json` prints.

use std::sync::{Arc, RwLock};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use loci::context::{ContextMode, ContextOptions};
use loci::ingest::{self, Format};
use loci::query::{Asked, QueryError, SavedQueries};
use loci::retrieval::{RetrieverCache, Tokenizer};
use loci::{BackendKind, RetrieveOptions, Retriever, SearchFilter, SnippetKind};

create_exception!(loci, LociError, PyException, "Any error of loci.");
create_exception!(
    loci,
    InputError,
    LociError,
    "A bad line, field, argument or query text."
);
create_exception!(
    loci,
    NotFoundError,
    LociError,
    "A node, saved query or store that does not exist."
);
create_exception!(
    loci,
    QueryLimitError,
    LociError,
    "A planner query hit its row, hop or time limit."
);
create_exception!(
    loci,
    StoreError,
    LociError,
    "The store is locked, damaged, closed or failed."
);

fn to_py(e: loci::Error) -> PyErr {
    use loci::Error as E;
    let message = loci::error::shortened_message(&e.to_string());
    match e {
        E::Input { .. } | E::InvalidEvent { .. } | E::InvalidArgument { .. } => {
            InputError::new_err(message)
        }
        // As the CLI's exit 4: a store directory that is not there was named wrongly.
        E::NotFound(_) | E::NotAStore { .. } => NotFoundError::new_err(message),
        E::Store { path, .. } if !path.exists() => NotFoundError::new_err(message),
        // As the CLI's exit codes of an input file: one not there is not found (4), one that
        // is not text is bad input (3).
        E::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            NotFoundError::new_err(message)
        }
        E::Io { ref source, .. } if source.kind() == std::io::ErrorKind::InvalidData => {
            InputError::new_err(message)
        }
        _ => StoreError::new_err(message),
    }
}

fn query_to_py(e: QueryError, text: &str) -> PyErr {
    match e {
        QueryError::Store(s) => to_py(s),
        QueryError::LimitExceeded(_) => QueryLimitError::new_err(e.to_string()),
        other => InputError::new_err(loci::error::shortened_message(&other.render(text))),
    }
}

fn json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::new_err(format!("encoding the answer: {e}")))
}

#[pyclass(module = "loci._loci")]
struct Store {
    inner: RwLock<Option<Arc<loci::Store>>>,
    retriever: RetrieverCache,
    queries: SavedQueries,
    /// The process that opened the store: a child made by `os.fork()` has a copy of the
    /// handle but none of the threads behind it (the full-text writer's), nor the writer lock.
    opened_by: u32,
}

impl Store {
    fn wrap(store: loci::Store) -> PyResult<Self> {
        Ok(Store {
            inner: RwLock::new(Some(Arc::new(store))),
            retriever: RetrieverCache::default(),
            queries: SavedQueries::builtin_and(None).map_err(to_py)?,
            opened_by: std::process::id(),
        })
    }

    fn store(&self) -> PyResult<Arc<loci::Store>> {
        self.check_same_process()?;
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| StoreError::new_err("the store is closed"))
    }

    /// A forked child's copy of the handle is refused: its writes waited forever on a text
    /// writer thread the child does not have, and its close panicked joining it.
    fn check_same_process(&self) -> PyResult<()> {
        if std::process::id() == self.opened_by {
            return Ok(());
        }
        Err(StoreError::new_err(format!(
            "this store was opened by process {}, and a handle does not survive os.fork(): \
             open the store in this process (after the parent closes it, or read_only=True)",
            self.opened_by
        )))
    }

    /// In a forked child, the copy of the store is left undropped: dropping it would join the
    /// parent's threads (which the child does not have) and release the parent's lock.
    fn forget_in_a_child(&self) {
        if std::process::id() != self.opened_by {
            let taken = self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
            std::mem::forget(taken);
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.forget_in_a_child();
    }
}

fn format_of(name: Option<&str>) -> PyResult<Option<Format>> {
    name.map(str::parse::<Format>).transpose().map_err(to_py)
}

#[pymethods]
impl Store {
    #[staticmethod]
    #[pyo3(signature = (path, backend = "redb"))]
    fn create(py: Python<'_>, path: &str, backend: &str) -> PyResult<Self> {
        let kind: BackendKind = backend.parse().map_err(to_py)?;
        let s = py
            .detach(|| loci::Store::create(path, kind))
            .map_err(to_py)?;
        Self::wrap(s)
    }

    #[staticmethod]
    #[pyo3(signature = (path, read_only = false))]
    fn open(py: Python<'_>, path: &str, read_only: bool) -> PyResult<Self> {
        let s = py
            .detach(|| {
                // Read-only takes no lock and writes nothing (`open_for_reading` had opened
                // for writing when no other process held the store, shutting its writer out).
                if read_only {
                    loci::Store::open_read_only(path)
                } else {
                    loci::Store::open(path)
                }
            })
            .map_err(to_py)?;
        Self::wrap(s)
    }

    #[pyo3(signature = (lines, format = None))]
    fn ingest(&self, py: Python<'_>, lines: &str, format: Option<&str>) -> PyResult<String> {
        let s = self.store()?;
        // An empty batch (`ingest([])`, a filter that kept nothing) commits nothing, as
        // `loci ingest` of an empty file does; it had been an error that the format of no
        // lines cannot be told.
        let format = match format_of(format)? {
            None if lines.trim().is_empty() => Some(Format::Events),
            f => f,
        };
        py.detach(|| {
            let mut batch = ingest::read_bytes_detecting("input", lines.as_bytes(), format)?;
            batch.dedupe_passages(&s, false)?;
            batch.commit(&s)
        })
        .map_err(to_py)
        .and_then(|c| json(&c))
    }

    #[pyo3(signature = (path, format = None))]
    fn ingest_file(&self, py: Python<'_>, path: &str, format: Option<&str>) -> PyResult<String> {
        let s = self.store()?;
        let format = format_of(format)?;
        py.detach(|| {
            let mut batch = ingest::read_file(std::path::Path::new(path), format)?;
            batch.dedupe_passages(&s, false)?;
            batch.commit(&s)
        })
        .map_err(to_py)
        .and_then(|c| json(&c))
    }

    #[pyo3(signature = (question, limit, budget, min_confidence, kinds, record))]
    #[allow(clippy::too_many_arguments)]
    fn retrieve(
        &self,
        py: Python<'_>,
        question: &str,
        limit: usize,
        budget: Option<usize>,
        min_confidence: f32,
        kinds: Vec<String>,
        record: bool,
    ) -> PyResult<String> {
        let s = self.store()?;
        // Named as Python names it (the library's field is `k`).
        if limit == 0 {
            return Err(InputError::new_err("limit: must be at least 1"));
        }
        let wanted = kinds
            .iter()
            .map(|k| k.parse::<SnippetKind>())
            .collect::<loci::Result<Vec<_>>>()
            .map_err(to_py)?;
        let mut opts = RetrieveOptions::default()
            .with_k(limit)
            .with_min_confidence(min_confidence)
            .with_kinds(wanted)
            .with_record_usage(record);
        opts.budget = budget;
        let cache = self.retriever.clone();
        py.detach(|| Retriever::with_cache(&s, cache)?.retrieve(question, &opts))
            .map_err(to_py)
            .and_then(|p| json(&p))
    }

    #[pyo3(signature = (name, query, params, explain))]
    fn run(
        &self,
        py: Python<'_>,
        name: Option<&str>,
        query: Option<&str>,
        params: &str,
        explain: bool,
    ) -> PyResult<String> {
        let s = self.store()?;
        let text = params;
        let params: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
            .map_err(|e| {
                InputError::new_err(loci::error::shortened_message(&format!("params: {e}")))
            })?;
        if let Some((path, digits)) = loci::model::inexact_integer(text) {
            let said = loci::model::inexact_integer_message(&digits);
            return Err(InputError::new_err(format!("params.{path}: {said}")));
        }
        let asked = match (name, query) {
            (Some(name), None) => {
                let Some(q) = self.queries.get(name) else {
                    return Err(NotFoundError::new_err(self.queries.unknown(name)));
                };
                let args = q
                    .args_from_json(&params)
                    .map_err(|e| query_to_py(e, &q.prepared.text))?;
                Asked::Saved(q, args)
            }
            (None, Some(text)) => Asked::Text(
                text,
                loci::query::params_from_json(&params).map_err(|e| query_to_py(e, text))?,
            ),
            _ => {
                return Err(InputError::new_err(
                    "give a saved query's name or query text, one of them",
                ))
            }
        };
        let store = (!explain).then_some(&*s);
        (py.detach(|| asked.answer(store)))
            .map_err(|e| query_to_py(e, asked.text()))
            .and_then(|a| json(&a))
    }

    fn queries(&self) -> PyResult<String> {
        // Refused once closed, as every other method is.
        self.store()?;
        json(&self.queries.list())
    }

    #[pyo3(signature = (text, label, kind, limit))]
    fn search(
        &self,
        py: Python<'_>,
        text: &str,
        label: Option<String>,
        kind: Option<String>,
        limit: usize,
    ) -> PyResult<String> {
        let s = self.store()?;
        // Refused as `loci search` refuses them: an empty text or filter, or no hits asked
        // for, had answered [], which reads as a store that knows nothing.
        loci::text::check_search(text, "text", label.as_deref(), kind.as_deref()).map_err(to_py)?;
        if limit == 0 {
            return Err(InputError::new_err("limit: must be at least 1"));
        }
        s.graph()
            .refuse_near_misses("label", loci::NameOf::Label, label.as_deref())
            .map_err(to_py)?;
        py.detach(|| {
            let filter = SearchFilter::default().with_labels(label).with_kinds(kind);
            s.search(text, &filter, limit)?
                .iter()
                .map(|h| loci::text::hit_json(&s, h))
                .collect::<loci::Result<Vec<_>>>()
        })
        .map_err(to_py)
        .and_then(|r| json(&r))
    }

    #[pyo3(signature = (budget, question, mode, session, instructions, tokenizer, save))]
    #[allow(clippy::too_many_arguments)]
    fn context(
        &self,
        py: Python<'_>,
        budget: usize,
        question: Option<String>,
        mode: &str,
        session: Option<String>,
        instructions: Option<String>,
        tokenizer: &str,
        save: bool,
    ) -> PyResult<String> {
        let s = self.store()?;
        let mut opts = ContextOptions::with_budget(budget);
        opts.question = question;
        opts.mode = mode.parse::<ContextMode>().map_err(to_py)?;
        opts.session = session;
        opts.instructions = instructions;
        opts.tokenizer = tokenizer.parse::<Tokenizer>().map_err(to_py)?;
        opts.save = save;
        py.detach(|| loci::context::build_context(&s, &opts))
            .map_err(to_py)
            .and_then(|c| json(&c))
    }

    fn stats(&self, py: Python<'_>) -> PyResult<String> {
        let s = self.store()?;
        json(&py.detach(|| s.stats()))
    }

    fn verify(&self, py: Python<'_>) -> PyResult<String> {
        let s = self.store()?;
        let r = py.detach(|| s.verify()).map_err(to_py)?;
        let mut v = serde_json::to_value(&r).map_err(|e| StoreError::new_err(e.to_string()))?;
        v["ok"] = r.ok().into();
        json(&v)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // A forked child's close leaves the parent's store alone (and is not an error: a
        // `with` block around the fork closes it in both).
        self.forget_in_a_child();
        let taken = self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(s) = taken {
            py.detach(|| s.flush_usage()).map_err(to_py)?;
        }
        Ok(())
    }
}

#[pymodule]
fn _loci(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Store>()?;
    m.add("LociError", py.get_type::<LociError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("QueryLimitError", py.get_type::<QueryLimitError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    Ok(())
}
