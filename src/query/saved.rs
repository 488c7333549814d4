//! Saved queries: `queries/*.gq` files whose header names the query, its typed parameters with
//! their defaults, and what it answers:
//!
//! ```text
//! // name: where_is_home
//! // description: The bot's current home, with the events that established it.
//! // param: bot: string = "bot"
//! MATCH (b {key: $bot})-[h:HOME]->(p:Place) WHERE h.valid_to IS NULL RETURN p.name AS home
//! ```
//!
//! A router lists them (`SavedQueries::list`) and runs one by name with string arguments that
//! the header's types check.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{parse_param, prepare, Limits, Prepared, QueryError, QueryResult, Val};
use crate::error::Error;
use crate::store::Store;

/// A parameter's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    String,
    Int,
    Float,
    Bool,
}

/// A declared parameter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParamSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: ParamType,
    /// The default, as written; `None` makes the parameter required.
    pub default: Option<String>,
}

/// A saved query: its header and its prepared text.
#[derive(Clone, Debug, Serialize)]
pub struct SavedQuery {
    pub name: String,
    pub description: String,
    pub params: Vec<ParamSpec>,
    pub path: PathBuf,
    #[serde(skip)]
    pub prepared: Prepared,
}

fn bad(path: &Path, line: usize, field: &str, message: impl Into<String>) -> Error {
    Error::Input {
        file: path.display().to_string(),
        line,
        field: field.to_string(),
        message: message.into(),
    }
}

impl SavedQuery {
    /// Reads, parses and plans a saved query file; every error names the file and line.
    pub fn load(path: &Path) -> Result<SavedQuery, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let mut name = None;
        let mut description = String::new();
        let mut params = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let Some(rest) = line.trim().strip_prefix("//") else {
                continue;
            };
            let rest = rest.trim();
            if let Some(v) = rest.strip_prefix("name:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = rest.strip_prefix("description:") {
                if !description.is_empty() {
                    description.push(' ');
                }
                description.push_str(v.trim());
            } else if let Some(v) = rest.strip_prefix("param:") {
                params.push(parse_param_spec(v).map_err(|m| bad(path, i + 1, "param", m))?);
            }
        }
        let name =
            name.ok_or_else(|| bad(path, 1, "name", "missing `// name: ...` header line"))?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad(
                path,
                1,
                "name",
                format!("{name:?}: use letters, digits and _"),
            ));
        }
        if description.is_empty() {
            return Err(bad(
                path,
                1,
                "description",
                "missing `// description: ...` header line",
            ));
        }
        let prepared = prepare(&text, Limits::default()).map_err(|e| match &e {
            QueryError::Parse { line, .. } => bad(path, *line, "query", e.render(&text)),
            other => bad(path, 1, "query", other.to_string()),
        })?;
        for p in &prepared.plan.params {
            if !params.iter().any(|s: &ParamSpec| &s.name == p) {
                return Err(bad(
                    path,
                    1,
                    "param",
                    format!("${p} is used but not declared with `// param: {p}: TYPE`"),
                ));
            }
        }
        for spec in &params {
            if let Some(d) = &spec.default {
                parse_param(d, Some(spec.ty))
                    .map_err(|m| bad(path, 1, "param", format!("default of {}: {m}", spec.name)))?;
            }
        }
        Ok(SavedQuery {
            name,
            description,
            params,
            path: path.to_path_buf(),
            prepared,
        })
    }

    /// Typed parameters from string arguments, defaults filled in.
    pub fn bind(&self, args: &[(String, String)]) -> Result<HashMap<String, Val>, QueryError> {
        let mut out = HashMap::new();
        for (k, v) in args {
            let spec = self.params.iter().find(|p| &p.name == k).ok_or_else(|| {
                QueryError::Param(format!(
                    "{} has no parameter {k}; it takes {}",
                    self.name,
                    self.params
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            let val = parse_param(v, Some(spec.ty))
                .map_err(|m| QueryError::Param(format!("{k}: {m}")))?;
            out.insert(k.clone(), val);
        }
        for spec in &self.params {
            if out.contains_key(&spec.name) {
                continue;
            }
            match &spec.default {
                Some(d) => {
                    let v = parse_param(d, Some(spec.ty)).map_err(QueryError::Param)?;
                    out.insert(spec.name.clone(), v);
                }
                None => {
                    return Err(QueryError::Param(format!(
                        "{} needs --param {}=...",
                        self.name, spec.name
                    )))
                }
            }
        }
        Ok(out)
    }

    /// Runs the query with string arguments.
    pub fn run(&self, store: &Store, args: &[(String, String)]) -> Result<QueryResult, QueryError> {
        self.prepared.run(store, &self.bind(args)?)
    }
}

/// `name: type [= default]`, the type one of string, int, float, bool.
fn parse_param_spec(spec: &str) -> Result<ParamSpec, String> {
    let (decl, default) = match spec.split_once('=') {
        Some((d, v)) => {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|x| x.strip_suffix('"'))
                .unwrap_or(v);
            (d, Some(v.to_string()))
        }
        None => (spec, None),
    };
    let (name, ty) = decl
        .split_once(':')
        .ok_or_else(|| format!("{spec:?}: expected `name: type [= default]`"))?;
    let ty = match ty.trim() {
        "string" => ParamType::String,
        "int" => ParamType::Int,
        "float" => ParamType::Float,
        "bool" => ParamType::Bool,
        other => {
            return Err(format!(
                "type {other:?}: expected string, int, float or bool"
            ))
        }
    };
    let name = name.trim().to_string();
    if name.is_empty() {
        return Err("empty parameter name".into());
    }
    Ok(ParamSpec { name, ty, default })
}

/// The saved queries of a directory, by name.
#[derive(Clone, Debug, Default)]
pub struct SavedQueries {
    queries: Vec<SavedQuery>,
}

impl SavedQueries {
    /// Loads every `*.gq` file of `dir` (sorted by file name); any bad file is an error.
    pub fn load(dir: &Path) -> Result<SavedQueries, Error> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| Error::io(dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "gq"))
            .collect();
        paths.sort();
        let mut queries: Vec<SavedQuery> = Vec::new();
        for p in paths {
            let q = SavedQuery::load(&p)?;
            if let Some(other) = queries.iter().find(|x| x.name == q.name) {
                return Err(bad(
                    &p,
                    1,
                    "name",
                    format!("{} is also the name of {}", q.name, other.path.display()),
                ));
            }
            queries.push(q);
        }
        Ok(SavedQueries { queries })
    }

    /// Every saved query (name, description, parameters), for a router.
    pub fn list(&self) -> &[SavedQuery] {
        &self.queries
    }

    pub fn get(&self, name: &str) -> Option<&SavedQuery> {
        self.queries.iter().find(|q| q.name == name)
    }

    /// Runs the saved query `name` with string arguments.
    pub fn run_saved(
        &self,
        store: &Store,
        name: &str,
        args: &[(String, String)],
    ) -> Result<QueryResult, QueryError> {
        let q = self.get(name).ok_or_else(|| {
            QueryError::Param(format!(
                "no saved query {name:?}; saved: {}",
                self.queries
                    .iter()
                    .map(|q| q.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        q.run(store, args)
    }
}
