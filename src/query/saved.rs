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
//! An int parameter may declare the values it takes, `// param: depth: int in 1..4 = 1`; one
//! outside them is refused by name.
//!
//! A router lists them (`SavedQueries::list`) and runs one by name with string arguments that
//! the header's types check.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{parse_param, prepare, Limits, Plan, Prepared, QueryError, QueryResult, Val};
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

impl ParamType {
    const ALL: [ParamType; 4] = [
        ParamType::String,
        ParamType::Int,
        ParamType::Float,
        ParamType::Bool,
    ];

    /// The type as a header writes it (and as it serialises).
    fn name(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Int => "int",
            ParamType::Float => "float",
            ParamType::Bool => "bool",
        }
    }

    /// What a value of the type is, for messages.
    fn described(self) -> &'static str {
        match self {
            ParamType::String => "a string",
            ParamType::Int => "an integer",
            ParamType::Float => "a number",
            ParamType::Bool => "true or false",
        }
    }
}

/// A JSON value as a message names it.
fn json_described(v: &serde_json::Value) -> String {
    use serde_json::Value as J;
    match v {
        J::Null => "null".into(),
        J::Bool(b) => b.to_string(),
        J::Number(n) => format!("the number {n}"),
        J::String(s) => format!("the string {}", crate::error::quoted_excerpt(s)),
        J::Array(_) => "a list".into(),
        J::Object(_) => "an object".into(),
    }
}

/// A declared parameter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParamSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: ParamType,
    /// The default, as written; `None` makes the parameter required.
    pub default: Option<String>,
    /// The least and the greatest value an int parameter takes (`int in 1..4`), where the
    /// header bounds it: the query's text may hold a bound of its own (a path of at most
    /// four hops), and a value past it was answered as if it were the bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
}

impl ParamSpec {
    /// Whether `v` is in the parameter's range; the message says the range.
    fn check_range(&self, v: &Val) -> Result<(), String> {
        let (Some(min), Some(max), Val::Int(i)) = (self.min, self.max, v) else {
            return Ok(());
        };
        if (min..=max).contains(i) {
            Ok(())
        } else {
            Err(format!("{i} is out of range: takes {min}..{max}"))
        }
    }

    /// The declaration as a header writes it, without its default: `depth: int in 1..4`.
    pub fn declared(&self) -> String {
        let ty = self.ty.name();
        match (self.min, self.max) {
            (Some(min), Some(max)) => format!("{}: {ty} in {min}..{max}", self.name),
            _ => format!("{}: {ty}", self.name),
        }
    }
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
        Self::parse(path, &text)
    }

    /// Parses and plans the text of a saved query; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<SavedQuery, Error> {
        // A byte-order mark (some editors write one) is no part of the text, as for ingest.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut name = None;
        let mut description = String::new();
        // Each parameter with the line that declares it, for errors about it.
        let mut params: Vec<ParamSpec> = Vec::new();
        let mut param_lines: Vec<usize> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let Some(rest) = line.trim().strip_prefix("//") else {
                continue;
            };
            let rest = rest.trim();
            if let Some(v) = rest.strip_prefix("name:") {
                name = Some((v.trim().to_string(), i + 1));
            } else if let Some(v) = rest.strip_prefix("description:") {
                if !description.is_empty() {
                    description.push(' ');
                }
                description.push_str(v.trim());
            } else if let Some(v) = rest.strip_prefix("param:") {
                let spec = parse_param_spec(v).map_err(|m| bad(path, i + 1, "param", m))?;
                if let Some(j) = params.iter().position(|p| p.name == spec.name) {
                    return Err(bad(
                        path,
                        i + 1,
                        "param",
                        format!(
                            "{} is already declared on line {}",
                            spec.name, param_lines[j]
                        ),
                    ));
                }
                params.push(spec);
                param_lines.push(i + 1);
            }
        }
        let (name, name_line) =
            name.ok_or_else(|| bad(path, 1, "name", "missing `// name: ...` header line"))?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad(
                path,
                name_line,
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
        let prepared = prepare(text, Limits::default()).map_err(|e| match e.line() {
            // A planning error with a place is told at its line with its caret, as a parse
            // error is (it was told at line 1 of the file).
            Some(line) => bad(path, line, "query", e.render(text)),
            None => bad(path, 1, "query", e.to_string()),
        })?;
        for p in &prepared.plan.params {
            if !params.iter().any(|s: &ParamSpec| &s.name == p) {
                // Where the parser met it: a search of the text for `$p` found `$want` for
                // `$w`, and a `$p` in a string or a comment.
                let used_on = prepared
                    .query
                    .places
                    .of_param(p)
                    .map_or(1, |span| span.position(text).0);
                return Err(bad(
                    path,
                    used_on,
                    "param",
                    format!("${p} is used but not declared with `// param: {p}: TYPE`"),
                ));
            }
        }
        for (spec, line) in params.iter().zip(&param_lines) {
            if let Some(d) = &spec.default {
                parse_param(d, Some(spec.ty))
                    .and_then(|v| spec.check_range(&v))
                    .map_err(|m| {
                        bad(
                            path,
                            *line,
                            "param",
                            format!("default of {}: {m}", spec.name),
                        )
                    })?;
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
                .and_then(|val| spec.check_range(&val).map(|()| val))
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
                        "{} needs parameter {} ({})",
                        self.name,
                        spec.name,
                        crate::query::how_to_give(&spec.name)
                    )))
                }
            }
        }
        Ok(out)
    }

    /// Arguments given as JSON by name, for [`SavedQuery::run`]: each of its declared type (a
    /// string parameter takes a JSON string, an int an integer, a float a number, a bool true
    /// or false). Over JSON a value's type is given, so another one is refused by name rather
    /// than read as text: 5 for a string parameter matched nothing, and "0" passed for a
    /// number.
    pub fn args_from_json<'a>(
        &self,
        params: impl IntoIterator<Item = (&'a String, &'a serde_json::Value)>,
    ) -> Result<Vec<(String, String)>, QueryError> {
        use serde_json::Value as J;
        params
            .into_iter()
            .map(|(k, v)| {
                let Some(spec) = self.params.iter().find(|p| &p.name == k) else {
                    // `bind` says which parameters the query takes.
                    return Ok((k.clone(), v.to_string()));
                };
                let text = match (spec.ty, v) {
                    (ParamType::String, J::String(s)) => s.clone(),
                    (ParamType::Int, J::Number(n)) if n.is_i64() => n.to_string(),
                    (ParamType::Int, J::Number(n)) if n.is_u64() => {
                        return Err(QueryError::Param(format!(
                            "{k}: {n} is out of range: an integer is 64 bits"
                        )))
                    }
                    (ParamType::Float, J::Number(n)) => n.to_string(),
                    (ParamType::Bool, J::Bool(b)) => b.to_string(),
                    (ty, other) => {
                        return Err(QueryError::Param(format!(
                            "{k}: takes {}, got {}",
                            ty.described(),
                            json_described(other)
                        )))
                    }
                };
                Ok((k.clone(), text))
            })
            .collect()
    }

    /// Runs the query with string arguments.
    pub fn run(&self, store: &Store, args: &[(String, String)]) -> Result<QueryResult, QueryError> {
        self.prepared.run(store, &self.bind(args)?)
    }

    /// The plan [`SavedQuery::run`] would run with `args`, the query not run.
    pub fn explain(&self, args: &[(String, String)]) -> Result<Plan, QueryError> {
        let params = self.bind(args)?;
        Ok(self.prepared.plan_with(&params)?.into_owned())
    }
}

/// `name: type [in MIN..MAX] [= default]`, the type one of string, int, float, bool, and a
/// range only for an int.
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
    let (ty, range) = match ty.trim().split_once(char::is_whitespace) {
        Some((ty, range)) => (ty, Some(range.trim())),
        None => (ty.trim(), None),
    };
    let Some(ty) = ParamType::ALL.into_iter().find(|t| t.name() == ty) else {
        return Err(format!("type {ty:?}: expected string, int, float or bool"));
    };
    let name = name.trim().to_string();
    if name.is_empty() {
        return Err("empty parameter name".into());
    }
    let (min, max) = match range {
        None => (None, None),
        Some(range) => {
            let (min, max) = parse_range(range)?;
            if ty != ParamType::Int {
                return Err(format!(
                    "{name}: only an int takes a range, and this is {}",
                    ty.described()
                ));
            }
            (Some(min), Some(max))
        }
    };
    Ok(ParamSpec {
        name,
        ty,
        default,
        min,
        max,
    })
}

/// `in MIN..MAX`, both ends taken.
fn parse_range(text: &str) -> Result<(i64, i64), String> {
    let expected = || format!("{text:?}: expected `in MIN..MAX` after the type, as `int in 1..4`");
    let bounds = text
        .strip_prefix("in")
        .filter(|r| r.starts_with(char::is_whitespace))
        .and_then(|r| r.trim().split_once(".."))
        .ok_or_else(expected)?;
    let (Ok(min), Ok(max)) = (
        bounds.0.trim().parse::<i64>(),
        bounds.1.trim().parse::<i64>(),
    ) else {
        return Err(expected());
    };
    if min > max {
        return Err(format!(
            "in {min}..{max}: a range from {min} down to {max} holds nothing; write MIN..MAX"
        ));
    }
    Ok((min, max))
}

/// The saved queries that ship inside loci (the repository's `queries/` directory, compiled
/// in so that they work from any directory): file name and text.
pub const BUILTIN: &[(&str, &str)] = &[
    ("find_trade.gq", include_str!("../../queries/find_trade.gq")),
    (
        "find_trade_near.gq",
        include_str!("../../queries/find_trade_near.gq"),
    ),
    ("last_death.gq", include_str!("../../queries/last_death.gq")),
    ("last_night.gq", include_str!("../../queries/last_night.gq")),
    ("last_seen.gq", include_str!("../../queries/last_seen.gq")),
    (
        "nearest_place.gq",
        include_str!("../../queries/nearest_place.gq"),
    ),
    ("neighbors.gq", include_str!("../../queries/neighbors.gq")),
    (
        "places_by_type.gq",
        include_str!("../../queries/places_by_type.gq"),
    ),
    ("timeline.gq", include_str!("../../queries/timeline.gq")),
    (
        "where_is_home.gq",
        include_str!("../../queries/where_is_home.gq"),
    ),
];

/// Where built-in queries say they come from (their `path`).
pub const BUILTIN_DIR: &str = "<built-in>";

/// The saved queries of a directory, by name.
#[derive(Clone, Debug, Default)]
pub struct SavedQueries {
    queries: Vec<SavedQuery>,
}

impl SavedQueries {
    /// The queries that ship inside loci.
    pub fn builtin() -> Result<SavedQueries, Error> {
        let mut all = SavedQueries::default();
        for (file, text) in BUILTIN {
            all.add(
                SavedQuery::parse(&Path::new(BUILTIN_DIR).join(file), text)?,
                false,
            )?;
        }
        Ok(all)
    }

    /// The built-in queries, then every `*.gq` file of `dir` (if given); a user's query of the
    /// same name as a built-in one replaces it, so a user can refine a shipped query.
    pub fn builtin_and(dir: Option<&Path>) -> Result<SavedQueries, Error> {
        let mut all = Self::builtin()?;
        if let Some(dir) = dir {
            for q in Self::load(dir)?.queries {
                all.add(q, true)?;
            }
        }
        Ok(all)
    }

    /// Adds `q`; a name already taken is an error unless `replace_builtin` and the holder is
    /// built in.
    fn add(&mut self, q: SavedQuery, replace_builtin: bool) -> Result<(), Error> {
        match self.queries.iter().position(|x| x.name == q.name) {
            Some(i) if replace_builtin && self.queries[i].path.starts_with(BUILTIN_DIR) => {
                self.queries[i] = q;
            }
            Some(i) => {
                return Err(bad(
                    &q.path,
                    1,
                    "name",
                    format!(
                        "{} is also the name of {}",
                        q.name,
                        self.queries[i].path.display()
                    ),
                ))
            }
            None => self.queries.push(q),
        }
        Ok(())
    }

    /// Loads every `*.gq` file of `dir` (sorted by file name); any bad file is an error.
    pub fn load(dir: &Path) -> Result<SavedQueries, Error> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| Error::io(dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "gq"))
            .collect();
        paths.sort();
        let mut all = SavedQueries::default();
        for p in paths {
            all.add(SavedQuery::load(&p)?, false)?;
        }
        Ok(all)
    }

    /// Every saved query (name, description, parameters), for a router.
    pub fn list(&self) -> &[SavedQuery] {
        &self.queries
    }

    pub fn get(&self, name: &str) -> Option<&SavedQuery> {
        self.queries.iter().find(|q| q.name == name)
    }

    /// What a caller is told of a `name` there is no saved query of: the names there are, so
    /// that every interface (CLI, HTTP, MCP over stdio) says the same and needs no other call.
    pub fn unknown(&self, name: &str) -> String {
        let meant = self
            .likely_meant(name)
            .map(|m| format!(" did you mean {m:?}?"))
            .unwrap_or_default();
        format!(
            "no saved query {};{meant} saved: {}",
            crate::error::quoted_excerpt(name),
            self.queries
                .iter()
                .map(|q| q.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// The saved query `name` (not one of them) was most likely meant as: the nearest by
    /// edits of a letter, case set aside, two at most and fewer than half its letters; the
    /// first by name among equals. A name of more than 64 letters is no misspelling.
    fn likely_meant(&self, name: &str) -> Option<&str> {
        let given = name.to_lowercase();
        let letters = given.chars().count();
        if letters == 0 || letters > 64 {
            return None;
        }
        (self.queries.iter())
            .map(|q| {
                (
                    strsim::levenshtein(&given, &q.name.to_lowercase()),
                    q.name.as_str(),
                )
            })
            .filter(|(d, _)| *d <= 2 && d * 2 < letters)
            .min()
            .map(|(_, n)| n)
    }

    /// Runs the saved query `name` with string arguments.
    pub fn run_saved(
        &self,
        store: &Store,
        name: &str,
        args: &[(String, String)],
    ) -> Result<QueryResult, QueryError> {
        let q = self
            .get(name)
            .ok_or_else(|| QueryError::Param(self.unknown(name)))?;
        q.run(store, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that starts with a byte-order mark (as some Windows editors save) reads as
    /// without it: its `// name:` line had not been found (a helper's probe), where ingest
    /// and the server skip a BOM.
    #[test]
    fn a_saved_query_after_a_byte_order_mark_is_read() {
        let text = "\u{feff}// name: marked\n// description: x\nMATCH (n) RETURN n.key LIMIT 1\n";
        let q = SavedQuery::parse(Path::new("marked.gq"), text).unwrap();
        assert_eq!(q.name, "marked");
    }

    /// Every file of `queries/` ships in the binary, and nothing else does: a query added to
    /// the directory but not to [`BUILTIN`] would work from the repository root only.
    #[test]
    fn builtin_queries_are_exactly_the_queries_directory() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("queries");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| f.ends_with(".gq"))
            .collect();
        files.sort();
        let builtin: Vec<String> = BUILTIN.iter().map(|(f, _)| f.to_string()).collect();
        assert_eq!(files, builtin);
        for (file, text) in BUILTIN {
            assert_eq!(&std::fs::read_to_string(dir.join(file)).unwrap(), text);
        }
        assert_eq!(SavedQueries::builtin().unwrap().list().len(), BUILTIN.len());
    }
}
