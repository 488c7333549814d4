//! Exit codes: one per kind of failure, so that a script (or an agent shelling out) can tell a
//! bad input from a locked or corrupt store without parsing messages. Documented in the README
//! and in `loci --help`.

use std::process::ExitCode;

/// The documented exit codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Success (also when the reader of standard output went away early).
    Ok = 0,
    /// The command ran and found a problem: `replay --verify` reported a difference, or
    /// `check` a finding.
    Mismatch = 1,
    /// A usage error: unknown flag, missing argument (clap's own code).
    Usage = 2,
    /// An input was rejected: a bad line of a file, a query that does not parse, a bad
    /// parameter or option value.
    BadInput = 3,
    /// Something named does not exist: a node, a saved query, a file, a store.
    NotFound = 4,
    /// The store is held by another process.
    Locked = 5,
    /// The store is damaged or of a format this build does not read.
    Corrupt = 6,
    /// A query hit its row, hop or time limit.
    LimitExceeded = 7,
    /// Anything else: an I/O failure, a full disk, a backend failure.
    Failure = 8,
    /// Stopped by Ctrl-C or SIGTERM between two commits, after reporting every commit made
    /// (128 + SIGINT, as a shell reports a command Ctrl-C ended).
    Interrupted = 130,
}

impl From<Code> for ExitCode {
    fn from(c: Code) -> Self {
        ExitCode::from(c as u8)
    }
}

/// An error the CLI itself raises, with its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    pub code: Code,
    pub message: String,
}

/// `Err(CliError)` with a code, like `anyhow::bail!`.
macro_rules! fail {
    ($code:expr, $($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::cli::exit::CliError {
            code: $code,
            message: format!($($arg)*),
        }))
    };
}
pub(crate) use fail;

/// The exit code of an error: the first error in its chain that has a known kind decides.
pub fn code_of(e: &anyhow::Error) -> Code {
    for cause in e.chain() {
        if let Some(c) = cause.downcast_ref::<CliError>() {
            return c.code;
        }
        if let Some(q) = cause.downcast_ref::<loci::query::QueryError>() {
            return match q {
                loci::query::QueryError::Store(s) => library_code(s),
                loci::query::QueryError::LimitExceeded(_) => Code::LimitExceeded,
                _ => Code::BadInput,
            };
        }
        if let Some(l) = cause.downcast_ref::<loci::Error>() {
            return library_code(l);
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return io_code(io);
        }
        if let Some(json) = cause.downcast_ref::<serde_json::Error>() {
            // A failed write of a JSON document (a full disk under a large `--json` answer)
            // is the output's failure, not the input's: it had exited 3, as a bad input does.
            return match json.io_error_kind() {
                Some(kind) => io_code(&std::io::Error::from(kind)),
                None => Code::BadInput,
            };
        }
    }
    Code::Failure
}

fn io_code(io: &std::io::Error) -> Code {
    match io.kind() {
        std::io::ErrorKind::NotFound => Code::NotFound,
        std::io::ErrorKind::InvalidData => Code::BadInput,
        // A name longer than the file system takes (ENAMETOOLONG), or a path through a file
        // (ENOTDIR), is the caller's to change, as every command's: `init` had exited 8 on
        // it where the others exited 4.
        std::io::ErrorKind::InvalidFilename | std::io::ErrorKind::NotADirectory => Code::BadInput,
        _ => Code::Failure,
    }
}

fn library_code(e: &loci::Error) -> Code {
    use loci::Error as E;
    match e {
        E::Input { .. } | E::InvalidEvent { .. } | E::InvalidArgument { .. } => Code::BadInput,
        E::NotFound(_) | E::NotAStore { .. } => Code::NotFound,
        E::AlreadyExists { .. } => Code::BadInput,
        E::Locked { .. } | E::ReadOnly { .. } => Code::Locked,
        // A writer of another build holds it: busy, not damaged (helper-136: it exited 6).
        E::OtherRules { held: true, .. } => Code::Locked,
        // Of rules this build reads only once a writer rebuilds them.
        E::OtherRules { held: false, .. } => Code::Corrupt,
        // A store directory that is not there was named wrongly; one that is there but does
        // not read is damaged (or of another format).
        E::Store { path, .. } if !path.exists() => Code::NotFound,
        E::Corrupt { .. } | E::Store { .. } => Code::Corrupt,
        E::Io { source, .. } => io_code(source),
        e if e.reports_damage() => Code::Corrupt,
        _ => Code::Failure,
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that fails as a full disk does.
    struct Full;

    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from(std::io::ErrorKind::StorageFull))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// helper-104 (session 47): `loci run --json` of a large answer into `/dev/full` exited 3,
    /// a bad input, where a small one exited 8: every JSON error was taken as the input's,
    /// the writer's too. A JSON document that could not be written is a failure (8); one that
    /// could not be read is still a bad input (3).
    #[test]
    fn a_json_answer_that_cannot_be_written_is_a_failure_not_a_bad_input() {
        let big = vec!["x".repeat(100); 1000];
        let written = serde_json::to_writer(Full, &big).unwrap_err();
        assert_eq!(code_of(&anyhow::Error::from(written)), Code::Failure);
        let read = serde_json::from_str::<Vec<String>>("[1,").unwrap_err();
        assert_eq!(code_of(&anyhow::Error::from(read)), Code::BadInput);
    }

    /// helper-112: a flipped bit in a child pointer of a redb branch page sends a read past
    /// the file's end, which redb reports as an I/O error ("failed to fill whole buffer"):
    /// `replay --verify`, `timeline` and `repair` exited 8, an other failure, where the file is
    /// damaged (6). An I/O error of another kind stays a failure.
    #[test]
    fn a_read_past_the_end_of_the_file_is_damage_not_an_io_failure() {
        // The code of redb's I/O error of `kind`, as the backend wraps it.
        let code_of_io = |kind: std::io::ErrorKind| {
            let io = redb::StorageError::Io(std::io::Error::from(kind));
            code_of(&anyhow::Error::from(loci::Error::Backend {
                backend: "redb",
                message: io.to_string(),
                source: Some(Box::new(io)),
            }))
        };
        assert_eq!(code_of_io(std::io::ErrorKind::UnexpectedEof), Code::Corrupt);
        assert_eq!(
            code_of_io(std::io::ErrorKind::PermissionDenied),
            Code::Failure
        );
    }
}
