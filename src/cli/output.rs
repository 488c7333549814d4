//! Everything the binary prints: standard output written through `outln!` so that a closed
//! pipe (`loci search ... | head -1`) is an ordinary end of output instead of a panic or a
//! signal, and the small formatters that keep printed values meant for people (no Rust debug
//! text, no float noise).

use std::io::Write;

use anyhow::Result;

/// `writeln!` to standard output, returning the error (a closed pipe included) to the caller.
/// Control characters other than line breaks and tabs are written escaped (`\u{1b}`): the
/// lines show text the store holds, and an ingested escape sequence must not recolour, clear
/// or retitle the reader's terminal.
macro_rules! outln {
    ($($arg:tt)*) => {
        {
            use std::io::Write as _;
            let line = format!($($arg)*);
            writeln!(
                $crate::cli::output::stdout(),
                "{}",
                $crate::cli::output::visible(&line)
            )?;
        }
    };
}
pub(crate) use outln;

/// Standard output, locked, whose write errors say that they are standard output's: on a
/// full device the error would otherwise read as if the store were full.
pub(crate) fn stdout() -> Stdout {
    Stdout(std::io::stdout().lock())
}

pub(crate) struct Stdout(std::io::StdoutLock<'static>);

impl Stdout {
    fn named(e: std::io::Error) -> std::io::Error {
        // The kind is kept: a closed pipe is still told apart (`is_broken_pipe`).
        std::io::Error::new(e.kind(), format!("writing standard output: {e}"))
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf).map_err(Self::named)
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.write_all(buf).map_err(Self::named)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(Self::named)
    }
}

/// `text` with every control character but `\n` and `\t`, and every character that breaks a
/// line or reorders it on screen (a right-to-left override), escaped as Rust writes it.
pub(crate) fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| loci::text::breaks_a_line_or_its_order(c) && c != '\n' && c != '\t';
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `text` as one field of a line: as it is, or, when it holds a line break, a tab or another
/// character [`visible`] escapes, quoted as Rust writes a string (`"line\nbreak"`, a
/// backslash or a quote in it escaped too), so that a key holding one neither splits its line
/// nor reads as another key (one holding a backslash and an `n`).
pub(crate) fn one_field(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = loci::text::breaks_a_line_or_its_order;
    // One that starts with a quote is quoted too: as it is, it could read as a quoted one.
    if !text.chars().any(hidden) && !text.starts_with('"') {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(quoted(text))
}

/// A string as one cell of a `|`-separated table row whose null is `-`: as [`one_field`]
/// shows it, and quoted too where it would read as another value or as more than one cell
/// (`-`, nothing, `1`, `true`, `x | y`, a space at either end).
pub(crate) fn table_cell(text: &str) -> std::borrow::Cow<'_, str> {
    if serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| !v.is_string()) {
        std::borrow::Cow::Owned(quoted(text))
    } else {
        item_among(text, "|")
    }
}

/// A text as one item of a line that lists items with `separator` between them and `-` for
/// none: as [`one_field`] shows it, and quoted too where it would read as none, as nothing, or
/// as more than one item (it holds the separator, or a space at either end).
pub(crate) fn item_among<'a>(text: &'a str, separator: &str) -> std::borrow::Cow<'a, str> {
    let reads_as_another = text.is_empty()
        || text == "-"
        || (!separator.trim().is_empty() && text.contains(separator.trim()))
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace);
    if reads_as_another {
        std::borrow::Cow::Owned(quoted(text))
    } else {
        one_field(text)
    }
}

/// `text` quoted as Rust writes a string: a line break, a tab, a backslash, a quote and every
/// character [`visible`] escapes, escaped.
fn quoted(text: &str) -> String {
    let hidden = loci::text::breaks_a_line_or_its_order;
    let mut out = String::with_capacity(text.len() + 16);
    out.push('"');
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if hidden(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `eprintln!` that never panics: when stderr is a closed pipe (`2>&1 | head`), a note or an
/// error message is lost, but the command still finishes and exits with its code.
macro_rules! errln {
    ($($arg:tt)*) => {
        {
            use std::io::Write as _;
            // Escaped as standard output's lines are: a message quotes names and values as
            // given, and a carriage return or an override in one moved or reversed the line.
            let line = format!($($arg)*);
            let _ = writeln!(
                std::io::stderr().lock(),
                "{}",
                $crate::cli::output::visible(&line)
            );
        }
    };
}
pub(crate) use errln;

/// Set by `-q`: status lines (what a command did, its counts) are left off standard error,
/// which then carries errors only.
pub(crate) static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A status line on standard error, unless `-q` asked for errors only.
macro_rules! statusln {
    ($($arg:tt)*) => {
        if !$crate::cli::output::QUIET.load(std::sync::atomic::Ordering::Relaxed) {
            $crate::cli::output::errln!($($arg)*);
        }
    };
}
pub(crate) use statusln;

/// An error message followed by an excerpt of the text it is about and a line of carets
/// under the place (a query's [`loci::query::QueryError::render`]). Its first line is
/// shortened as every error message is; the excerpt is bounded by its own window, and
/// shortening a long word of it (a run of joined emoji) moved the text from under its caret.
#[derive(Debug)]
pub(crate) struct Excerpted(pub String);

impl std::fmt::Display for Excerpted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Excerpted {
    /// The message for standard error: its first line shortened, the excerpt as it is.
    pub(crate) fn shortened(&self) -> String {
        match self.0.split_once('\n') {
            Some((message, excerpt)) => {
                format!("{}\n{excerpt}", loci::error::shortened_message(message))
            }
            None => loci::error::shortened_message(&self.0),
        }
    }
}

/// `n` and the noun for it: "1 event", "2 events", "0 events".
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Pretty JSON of `v` on standard output.
pub fn print_json(v: &impl serde::Serialize) -> Result<()> {
    // Buffered: stdout alone flushes at every line, a write per line of a document that can
    // run to millions of lines (`replay --until` of a large graph).
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout());
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// A list that serializes as `serde_json::json!` makes it (each object's keys in the sorted
/// order of `serde_json::Map`), its items given by `each` as they are read and none held after
/// its turn: `json!` builds a `Value` of the whole list first, which for `consolidate --json`
/// on a large store was a tree of every summary beside the summaries themselves. `each` calls its visitor with each item until it returns
/// `false` (the output failed); an error of `each`'s own is kept for [`Self::failure`], so that
/// the caller returns it as it is (a damaged record exits as damage, not as a failed write).
pub struct JsonValuesFrom<T, F> {
    each: std::cell::RefCell<F>,
    failed: std::cell::RefCell<Option<loci::Error>>,
    item: std::marker::PhantomData<fn(T)>,
}

impl<T, F> JsonValuesFrom<T, F>
where
    F: FnMut(&mut dyn FnMut(T) -> loci::Result<bool>) -> loci::Result<()>,
{
    pub fn new(each: F) -> Self {
        JsonValuesFrom {
            each: std::cell::RefCell::new(each),
            failed: Default::default(),
            item: std::marker::PhantomData,
        }
    }

    /// What `each` failed with, if it did.
    pub fn failure(&self) -> Option<loci::Error> {
        self.failed.borrow_mut().take()
    }
}

impl<T, F> serde::Serialize for JsonValuesFrom<T, F>
where
    T: serde::Serialize,
    F: FnMut(&mut dyn FnMut(T) -> loci::Result<bool>) -> loci::Result<()>,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = s.serialize_seq(None)?;
        let mut written = Ok(());
        let read = (self.each.borrow_mut())(&mut |item| {
            let element = serde_json::to_value(&item)
                .map_err(S::Error::custom)
                .and_then(|value| seq.serialize_element(&value));
            written = element;
            Ok(written.is_ok())
        });
        written?;
        if let Err(e) = read {
            let said = S::Error::custom(&e);
            *self.failed.borrow_mut() = Some(e);
            return Err(said);
        }
        seq.end()
    }
}

/// True when `e` (anywhere in its chain) is a write to a reader that went away.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(|j| j.io_error_kind())
                .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe)
    })
}

/// A list of numbers as `1, 2, 3` (or `none`).
pub fn list<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A block position as `(x, y, z)`, or `unknown position`.
pub fn block(b: Option<[i32; 3]>) -> String {
    match b {
        Some([x, y, z]) => format!("({x}, {y}, {z})"),
        None => "unknown position".to_string(),
    }
}

/// A report as indented `key: value` lines, for people (the same data as `--json`).
pub fn print_report(v: &serde_json::Value) -> Result<()> {
    fn walk(v: &serde_json::Value, indent: usize, out: &mut impl Write) -> std::io::Result<()> {
        let pad = "  ".repeat(indent);
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match x {
                        serde_json::Value::Object(_) => {
                            writeln!(out, "{pad}{k}:")?;
                            walk(x, indent + 1, out)?;
                        }
                        serde_json::Value::Array(a) if a.iter().any(|i| i.is_object()) => {
                            writeln!(out, "{pad}{k}:")?;
                            for (i, item) in a.iter().enumerate() {
                                writeln!(out, "{pad}  [{i}]")?;
                                walk(item, indent + 2, out)?;
                            }
                        }
                        other => writeln!(out, "{pad}{k}: {}", scalar(other))?,
                    }
                }
            }
            other => writeln!(out, "{pad}{}", scalar(other))?,
        }
        Ok(())
    }
    fn scalar(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => "-".into(),
            serde_json::Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(", "),
            other => other.to_string(),
        }
    }
    let mut out = stdout();
    walk(v, 0, &mut out)?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{one_field, JsonValuesFrom};

    /// `consolidate --json` prints the bytes it printed through `json!`: a list written one
    /// element at a time has each object's keys in the same sorted order, nested ones too.
    #[test]
    fn a_list_written_one_value_at_a_time_is_the_list_json_makes() {
        #[derive(serde::Serialize)]
        struct Item {
            zeta: u32,
            alpha: Vec<u64>,
            inner: Inner,
            none: Option<u8>,
        }
        #[derive(serde::Serialize)]
        struct Inner {
            y: &'static str,
            b: f32,
        }
        let item = |i: u32| Item {
            zeta: i,
            alpha: (0..u64::from(i)).collect(),
            inner: Inner {
                y: "é 🙂", b: 0.5
            },
            none: None,
        };
        let items: Vec<Item> = (0..3).map(item).collect();
        #[derive(serde::Serialize)]
        struct Out<S> {
            report: u8,
            summaries: S,
        }
        let each = |visit: &mut dyn FnMut(Item) -> loci::Result<bool>| {
            for i in 0..3 {
                if !visit(item(i))? {
                    break;
                }
            }
            Ok(())
        };
        let streamed = serde_json::to_string_pretty(&Out {
            report: 1,
            summaries: JsonValuesFrom::new(each),
        })
        .unwrap();
        let whole =
            serde_json::to_string_pretty(&serde_json::json!({"report": 1, "summaries": items}))
                .unwrap();
        assert_eq!(streamed, whole);
        assert!(streamed.find("alpha") < streamed.find("zeta"), "{streamed}");
    }

    /// helper-93's review (session 43): a key holding a line break printed as one holding a
    /// backslash and an `n`. Each key shows as no other does.
    #[test]
    fn one_field_shows_each_key_as_no_other() {
        let keys = [
            "plain",
            "line\nbreak",
            "line\\nbreak",
            "\"line\\nbreak\"",
            "\"quoted\"",
            "tab\tkey",
            "tab\\tkey",
            "rt\u{202e}L",
            "rt\\u{202e}L",
        ];
        let shown: std::collections::BTreeSet<String> =
            keys.iter().map(|k| one_field(k).into_owned()).collect();
        assert_eq!(shown.len(), keys.len(), "{shown:?}");
        assert!(shown.iter().all(|s| !s.contains('\n') && !s.contains('\t')));
        assert_eq!(one_field("plain"), "plain");
        assert_eq!(one_field("line\nbreak"), r#""line\nbreak""#);
    }
}
