//! The library's error type. Every error says where (file and line, field, store path) and
//! what was expected, because its reader is usually a person fixing an input file.

use std::path::PathBuf;

/// A dependency's error kept as the source of one of ours.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors returned by loci.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A line of an input file could not be used. `line` is 1-based; 0 for a fault of the
    /// whole file (one without edges), which names no line.
    #[error("{}{}: {field}: {message}", shown_file(file), if *line == 0 { String::new() } else { format!(":{line}") })]
    Input {
        file: String,
        line: usize,
        field: String,
        message: String,
    },
    /// An event of a batch passed to [`crate::Store::ingest`] is invalid. `event` is its
    /// 0-based position in the batch, `assertion` the position of the offending assertion.
    /// The message counts both from 1, as people do, and says "of the batch": "event 0" read
    /// as the log's (whose events count from 1).
    #[error("event {} of the batch{}: {field}: {message}", event + 1, assertion.map(|a| format!(", assertion {}", a + 1)).unwrap_or_default())]
    InvalidEvent {
        event: usize,
        assertion: Option<usize>,
        field: String,
        message: String,
    },
    /// A caller argument is out of its domain.
    #[error("invalid argument {name}: {message}")]
    InvalidArgument { name: String, message: String },
    /// Something the caller named does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The store directory is missing, not a loci store, or of another format version.
    #[error("store {}: {message}", shown_path(path))]
    Store { path: PathBuf, message: String },
    /// The directory holds no loci store (no manifest).
    #[error("store {}: not a loci store: {reason}", shown_path(path))]
    NotAStore { path: PathBuf, reason: String },
    /// `Store::create` on a directory that already holds a store.
    #[error("store {}: a loci store already exists here", shown_path(path))]
    AlreadyExists { path: PathBuf },
    /// A stored record could not be decoded (corruption or a format this build does not know).
    #[error("corrupt record in table {table}: {message}")]
    Corrupt {
        table: &'static str,
        message: String,
    },
    /// The storage backend failed. `source` is the backend's own error when there is one (a
    /// panic caught at the boundary, or a refusal of loci's, has none).
    #[error("storage backend {backend}: {message}")]
    Backend {
        backend: &'static str,
        message: String,
        #[source]
        source: Option<BoxError>,
    },
    /// The full-text index failed; `source` is tantivy's error when there is one.
    #[error("full-text index: {message}")]
    Text {
        message: String,
        #[source]
        source: Option<BoxError>,
    },
    #[error("i/o on {}: {source}", shown_path(path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A sentence encoder's files (`embed::SentenceEncoder::load`) could not be used: which
    /// file, and what in it.
    #[error("sentence encoder {}: {message}", shown_path(path))]
    Encoder { path: PathBuf, message: String },
    /// A read-only open found the store's nodes and edges derived by other rules than this
    /// build's (`found`: `None` for a store older than versioned rules), which only a writer
    /// rebuilds; `held` when another process holds the store, whose build decides the rules
    /// while it holds it. Not damage: a writable open of this build
    /// rebuilds them from the log.
    #[error("store {}: {}", shown_path(path), other_rules(*found, *ours, (*held, *holder)))]
    OtherRules {
        path: PathBuf,
        found: Option<u32>,
        ours: u32,
        /// Another process holds the store (its pid, `holder`, when the lock file says it).
        held: bool,
        holder: Option<u32>,
    },
    /// The store was opened read-only ([`crate::Store::open_read_only`]) and cannot write.
    #[error(
        "store {} is open read-only (another process may be writing it); writes need `Store::open`",
        shown_path(path)
    )]
    ReadOnly { path: PathBuf },
    /// Another process (or another handle in this one: `here`) holds the store.
    #[error("store {} is locked by {}", shown_path(path), locked_by(*holder, *here))]
    Locked {
        path: PathBuf,
        holder: Option<u32>,
        /// A handle of this process holds it. The pid alone cannot say: a process of another
        /// container (or host) sharing the store can have this process's pid.
        here: bool,
    },
}

/// The source of the error of a read-only open that found no full-text index it can read:
/// a writer rebuilds it as it opens. `being_made`: there is none yet, or one with nothing
/// committed (a writer clears the directory, then makes the index anew); beside a live writer
/// that is the writer at work (a compaction's or a repair's swap, a `text/` removed), and the
/// store is busy rather than damaged ([`Error::finds_the_index_being_made`]). Otherwise it is
/// an index of another layout, which a writer of this build would rebuild.
#[derive(Debug, thiserror::Error)]
#[error("missing or of another layout")]
pub struct IndexToRebuild {
    pub being_made: bool,
}

/// Who holds a locked store, as its error says: this process is named as such when a handle
/// of it holds the lock, since the caller then has the store open already.
fn locked_by(holder: Option<u32>, here: bool) -> String {
    match holder {
        _ if here => format!(
            "this process ({}): another handle of the store is open here; close it first, or \
             share that one",
            std::process::id()
        ),
        Some(p) => format!("process {p}"),
        None => "another process".to_string(),
    }
}

/// What [`Error::OtherRules`] says: whose rules, and what to do.
fn other_rules(found: Option<u32>, ours: u32, (held, holder): (bool, Option<u32>)) -> String {
    let whose = match found {
        Some(v) if v > ours => format!(
            "its nodes and edges were derived by a newer build's rules ({v}; this build's are {ours})"
        ),
        _ => format!(
            "its nodes and edges were derived by older rules ({}; this build's are {ours})",
            found.map_or("unversioned".to_string(), |v| v.to_string())
        ),
    };
    let by = holder.map_or("another process".to_string(), |p| format!("process {p}"));
    let what_to_do = match found {
        _ if held => format!(
            "it is held by {by}, whose build decides the rules while it holds the store: read it \
             with that build, or once that process lets go (this build then rebuilds them)"
        ),
        Some(v) if v > ours => "read it with that build, or open it for writing once with this \
             one to rebuild them under its rules"
            .to_string(),
        _ => "open it for writing once to rebuild them".to_string(),
    };
    format!("{whose}: {what_to_do}")
}

/// An I/O error of no particular file (a caller's own reader or writer).
impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io {
            path: PathBuf::new(),
            source,
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether this is a read-only open's finding that the full-text index is being made
    /// ([`IndexToRebuild`]).
    pub(crate) fn finds_the_index_being_made(&self) -> bool {
        matches!(
            self,
            Error::Text { source: Some(s), .. }
                if s.downcast_ref::<IndexToRebuild>().is_some_and(|i| i.being_made)
        )
    }

    /// A full-text error of loci's own (no underlying error).
    pub(crate) fn text(message: impl std::fmt::Display) -> Self {
        Error::Text {
            message: message.to_string(),
            source: None,
        }
    }

    /// A full-text error caused by `e` (tantivy's), kept as the source.
    pub(crate) fn text_source(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Text {
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }

    /// A backend error of loci's own (a refusal, a caught panic).
    pub(crate) fn backend(backend: &'static str, message: impl Into<String>) -> Self {
        Error::Backend {
            backend,
            message: message.into(),
            source: None,
        }
    }

    /// Whether this says that something the store read is damaged (rather than that reading it
    /// failed): the store is then corrupt, not the machine out of something. The CLI exits 6
    /// on it, the server answers `corrupt`.
    pub fn reports_damage(&self) -> bool {
        match self {
            Error::Corrupt { .. } => true,
            Error::Backend {
                source: Some(source),
                ..
            }
            | Error::Text {
                source: Some(source),
                ..
            } => source_reports_damage(&**source),
            _ => false,
        }
    }

    /// A backend error caused by `e` (the backend's own), kept as the source.
    pub(crate) fn backend_source(
        backend: &'static str,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Backend {
            backend,
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

/// Whether a backend's or tantivy's own error says that what it read is damaged (rather than
/// that reading it failed).
fn source_reports_damage(e: &(dyn std::error::Error + 'static)) -> bool {
    use redb::StorageError;
    let redb_storage = e.downcast_ref::<StorageError>().or_else(|| {
        match e.downcast_ref::<redb::DatabaseError>() {
            Some(redb::DatabaseError::Storage(s)) => return Some(s),
            Some(_) => return None,
            None => {}
        }
        match e.downcast_ref::<redb::TransactionError>() {
            Some(redb::TransactionError::Storage(s)) => return Some(s),
            Some(_) => return None,
            None => {}
        }
        match e.downcast_ref::<redb::TableError>() {
            Some(redb::TableError::Storage(s)) => return Some(s),
            Some(_) => return None,
            None => {}
        }
        match e.downcast_ref::<redb::CommitError>() {
            Some(redb::CommitError::Storage(s)) => Some(s),
            _ => None,
        }
    });
    match redb_storage {
        Some(StorageError::Corrupted(_)) => return true,
        // redb's word for a file that is not a redb database at all; and a read past the
        // file's end, where a damaged page pointer sends it (helper-112).
        Some(StorageError::Io(io)) => {
            return matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            )
        }
        Some(_) => return false,
        None => {}
    }
    if let Some(redb::Error::Corrupted(_)) = e.downcast_ref::<redb::Error>() {
        return true;
    }
    // A backend's panic on its file, or sled's corruption error.
    if e.downcast_ref::<crate::storage::DamagedFile>().is_some() {
        return true;
    }
    match e.downcast_ref::<tantivy::TantivyError>() {
        Some(tantivy::TantivyError::DataCorruption(_)) => true,
        // A segment file whose bytes do not read as what it must hold (helper-148: a
        // flipped byte in a `.store` file under a running server, "invalid unicode code
        // point"), as redb's reads are judged above.
        Some(tantivy::TantivyError::OpenReadError(
            tantivy::directory::error::OpenReadError::IoError { io_error, .. },
        )) => matches!(
            io_error.kind(),
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

/// Whether `e` is the system refusing this user a file: no permission, or a read-only file
/// system (a store another user owns, or on a read-only mount).
pub(crate) fn is_refusal(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    )
}

/// Whether `e`, or an error under it, is such a refusal ([`is_refusal`]): the system refused
/// this user a file of the store (its permissions, or a read-only mount).
pub fn refuses_this_user(e: &(dyn std::error::Error + 'static)) -> bool {
    has_io_cause(e, is_refusal)
}

/// Whether `e`, or an error under it, is the disk being full (or the file too large for it).
pub(crate) fn out_of_space(e: &(dyn std::error::Error + 'static)) -> bool {
    has_io_cause(e, |io| {
        io.kind() == std::io::ErrorKind::StorageFull
            || io.kind() == std::io::ErrorKind::FileTooLarge
    })
}

/// Whether `e`, or an error under it, is an I/O error `is`.
fn has_io_cause(
    e: &(dyn std::error::Error + 'static),
    is: impl Fn(&std::io::Error) -> bool,
) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        let io = c.downcast_ref::<std::io::Error>().or_else(|| {
            // tantivy keeps its I/O errors in an `Arc`.
            c.downcast_ref::<std::sync::Arc<std::io::Error>>()
                .map(|a| &**a)
        });
        if io.is_some_and(&is) {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Longest value an error quotes whole; a longer one is quoted by its start.
const QUOTED_WHOLE_BYTES: usize = 200;

/// `value` quoted for an error message (as `{:?}` quotes it), and when it is long, only its
/// first characters and its length: a 100 kB name given where a short one belongs would
/// otherwise come back whole, once for each place that names it.
pub fn quoted_excerpt(value: &str) -> String {
    match long_value_start(value) {
        None => format!("{value:?}"),
        Some(start) => format!("{start:?}… ({} bytes)", value.len()),
    }
}

/// A path as a message shows it: as it is where it reads as itself, quoted (as
/// [`quoted_excerpt`] quotes) where it would not: empty, blanks at an end of the path or of
/// any name in it, a control, line separator or bidirectional character, or bytes that are
/// not UTF-8 (`store  x:` hid the space that made ` x` another directory, and `/tmp/  sp`
/// the two in a directory's name).
pub fn shown_path(path: &std::path::Path) -> String {
    let Some(text) = path.to_str() else {
        return quoted_excerpt(&path.to_string_lossy());
    };
    let blank_at_an_end =
        |name: &str| name.starts_with(char::is_whitespace) || name.ends_with(char::is_whitespace);
    // The first and last names hold the path's own ends.
    let odd = text.is_empty()
        || text.split(std::path::is_separator).any(blank_at_an_end)
        || text.chars().any(crate::text::breaks_a_line_or_its_order);
    if odd {
        quoted_excerpt(text)
    } else {
        text.to_string()
    }
}

/// An input's name (a file's, or a stand-in such as `<stdin>` or `request`) as a message shows
/// it: as [`shown_path`] shows a path, and none at all as nothing, where an event came from
/// no named input (an MCP `remember`), not as `""`.
pub fn shown_file(file: &str) -> String {
    match file {
        "" => String::new(),
        file => shown_path(std::path::Path::new(file)),
    }
}

/// [`quoted_excerpt`] for a message that quotes the value itself (clap's).
pub fn excerpt(value: &str) -> String {
    match long_value_start(value) {
        None => value.to_string(),
        Some(start) => format!("{start}… ({} bytes)", value.len()),
    }
}

/// Longest message [`shortened_message`] leaves whole, once its long words are shortened.
const LONGEST_MESSAGE_BYTES: usize = 4_000;

/// `message` as an interface shows it (the CLI's stderr, an HTTP or MCP error, a Python
/// exception): each word of it longer than an excerpt shows by its start and length, and a
/// message still longer than a few kB by its start and end. Errors name the value they
/// refuse, and the places that do are many (a key, a name, a flag, a serde error's quote of
/// a field); this is the net under all of them, so a 100 kB key sent by a client never comes
/// back in its error.
pub fn shortened_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(LONGEST_MESSAGE_BYTES + 64));
    let mut rest = message;
    while !rest.is_empty() {
        let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        push_word(&mut out, &rest[..word_end]);
        rest = &rest[word_end..];
        let space_end = rest
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(rest.len());
        out.push_str(&excerpt(&rest[..space_end]));
        rest = &rest[space_end..];
    }
    if out.len() <= LONGEST_MESSAGE_BYTES {
        return out;
    }
    let head = floor_boundary(&out, LONGEST_MESSAGE_BYTES / 2);
    let tail = ceil_boundary(&out, out.len() - LONGEST_MESSAGE_BYTES / 4);
    format!(
        "{} … ({} bytes left out) … {}",
        &out[..head],
        tail - head,
        &out[tail..]
    )
}

/// Pushes `word`, a long one by its excerpt: the quotes, brackets and punctuation around it
/// are kept whole, outside the excerpt, so that the length said is the value's and the
/// message keeps its colon.
fn push_word(out: &mut String, word: &str) {
    if word.len() <= QUOTED_WHOLE_BYTES {
        out.push_str(word);
        return;
    }
    let core = word.trim_start_matches(['"', '\'', '(', '[', '{', '`']);
    let before = &word[..word.len() - core.len()];
    let core = core.trim_end_matches(['"', '\'', ')', ']', '}', '`', ':', ';', ',', '.']);
    let after = &word[before.len() + core.len()..];
    // A word of marks alone is a value too.
    if before.len() + after.len() > 8 {
        out.push_str(&excerpt(word));
        return;
    }
    out.push_str(before);
    out.push_str(&excerpt(core));
    out.push_str(after);
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The start an excerpt shows of a value too long to show whole.
fn long_value_start(value: &str) -> Option<&str> {
    if value.len() <= QUOTED_WHOLE_BYTES {
        return None;
    }
    Some(&value[..floor_boundary(value, QUOTED_WHOLE_BYTES / 2)])
}

#[cfg(test)]
mod tests {
    use super::{excerpt, quoted_excerpt, shortened_message};

    #[test]
    fn a_message_keeps_its_words_and_shortens_a_long_one() {
        let short = "no node has key \"emerald\"; give\ta  key";
        assert_eq!(shortened_message(short), short);
        let long = format!("no node has key \"{}\": see the list", "ü".repeat(50_000));
        let shown = shortened_message(&long);
        assert!(shown.starts_with("no node has key \"üü") && shown.ends_with(" see the list"));
        assert!(
            shown.contains("ü… (100000 bytes)\": see the list") && shown.len() < 300,
            "{shown}"
        );
        let many = "word ".repeat(10_000);
        let shown = shortened_message(&many);
        assert!(
            shown.len() < 4_100 && shown.contains("bytes left out"),
            "{}",
            shown.len()
        );
        assert!(shown.starts_with("word word") && shown.ends_with("word "));
    }

    /// The length said is the value's: a store path of 100,000 bytes was said to be 100,001,
    /// its word taking the colon after it, which the message then lacked.
    #[test]
    fn a_long_word_is_said_by_its_own_length_and_keeps_the_marks_around_it() {
        let path = "x".repeat(100_000);
        let shown = shortened_message(&format!("store {path}: not a loci store"));
        assert!(
            shown.ends_with("… (100000 bytes): not a loci store"),
            "{shown}"
        );
        let shown = shortened_message(&format!("got \"{path}\", expected a key"));
        assert!(shown.starts_with("got \"xxx"), "{shown}");
        assert!(
            shown.ends_with("… (100000 bytes)\", expected a key"),
            "{shown}"
        );
        let shown = shortened_message(&format!("({path})."));
        assert!(
            shown.starts_with("(xxx") && shown.ends_with("… (100000 bytes))."),
            "{shown}"
        );
        let marks = "(".repeat(100_000);
        assert!(shortened_message(&marks).len() < 300);
    }

    #[test]
    fn a_long_value_is_quoted_by_its_start_and_length() {
        assert_eq!(quoted_excerpt("redb"), "\"redb\"");
        let long = "é".repeat(1_000);
        let shown = quoted_excerpt(&long);
        assert!(shown.ends_with("… (2000 bytes)"), "{shown}");
        assert!(shown.len() < 120, "{shown}");
        assert_eq!(quoted_excerpt(&"a".repeat(200)).len(), 202);
        assert_eq!(excerpt(&"a".repeat(200)), "a".repeat(200));
        assert_eq!(
            excerpt(&"b".repeat(201)),
            format!("{}… (201 bytes)", "b".repeat(100))
        );
    }
}
