//! The command line: flags (clap) resolved into library calls, one module per command group,
//! output as text for people or `--json` for programs.
//!
//! - [`args`]: every flag, with one vocabulary across commands (`--store`, `--limit`,
//!   `--queries`, `--json`, `--out`);
//! - [`write`]: init, ingest, extract, pin, unpin; [`read`]: search, neighbors, query, run,
//!   queries, stats, replay; [`memory`]: consolidate, forget, delete, compact, repair, wm,
//!   emerge, check; [`journal`]; [`context`]; [`serve`]: serve and mcp; [`demo`]: world and
//!   demo; [`bench`]: the benchmark reports;
//! - [`output`]: how results reach standard output; [`exit`]: the exit codes; [`interrupt`]:
//!   Ctrl-C and SIGTERM taken between two commits.

mod args;
mod bench;
mod context;
mod demo;
pub(crate) mod exit;
mod interrupt;
mod journal;
mod memory;
pub(crate) mod output;
use output::errln;
mod read;
mod serve;
mod write;

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser};

pub use args::Cli;
use args::Command;
use exit::Code;

/// Runs the command line and turns the outcome into an exit code. The store and every other
/// resource are dropped before this returns, so a process never exits with a store open.
pub fn main() -> ExitCode {
    let cli = Cli::try_parse().unwrap_or_else(|e| exit_with_long_values_shortened(e));
    init_logging(&cli.log);
    quiet_caught_panics();
    let damage_met = || DAMAGE_MET.load(std::sync::atomic::Ordering::Relaxed);
    match run(cli) {
        // A report of differences (`replay --verify`, `check`) names the damage itself, and so
        // does a verify that found the snapshot damaged.
        Ok(code @ (Code::Mismatch | Code::Corrupt)) => code.into(),
        // The answer went out, but part of it may have read as missing.
        Ok(_) if damage_met() => damage_met_exit(),
        Ok(code) => code.into(),
        // The reader of our output went away (`loci ... | head`): the output was not wanted
        // any more, which is not a failure of ours.
        Err(e) if output::is_broken_pipe(&e) => Code::Ok.into(),
        Err(e) => {
            let code = exit::code_of(&e);
            let said = match e.downcast_ref::<output::Excerpted>() {
                Some(excerpted) => excerpted.shortened(),
                None => loci::error::shortened_message(&render(&e)),
            };
            errln!("error: {said}");
            let damage = e
                .downcast_ref::<loci::Error>()
                .is_some_and(loci::Error::reports_damage);
            if damage && !said.contains("loci repair") && !said.contains("backup") {
                errln!("{DAMAGE_REMEDY}");
            }
            // What failed may be the damage speaking ("no node has key ..." for a node whose
            // record read as missing), not an answer a script should act on.
            if damage_met() {
                return damage_met_exit();
            }
            code.into()
        }
    }
}

/// Exits as clap does for a flag or value it refused, but with each value it quotes that is
/// long (a 100 kB word given for `--mode`) shown by its start and length, as loci's own errors
/// show one ([`loci::error::excerpt`]): clap quotes it whole, in its message and its
/// suggestions. clap's error has no public way to change a value it holds, so its text is.
fn exit_with_long_values_shortened(e: clap::Error) -> ! {
    use clap::error::ContextValue;
    let mut long: Vec<&str> = Vec::new();
    for (_, value) in e.context() {
        match value {
            ContextValue::String(s) => long.push(s),
            ContextValue::Strings(all) => long.extend(all.iter().map(String::as_str)),
            _ => {}
        }
    }
    long.retain(|s| loci::error::excerpt(s) != *s);
    if long.is_empty() {
        e.exit()
    }
    let mut text = e.render().to_string();
    for value in long {
        text = text.replace(value, &loci::error::excerpt(value));
    }
    errln!("{}", text.trim_end());
    std::process::exit(e.exit_code())
}

/// What to do about damage whose error does not say: the backends' own words ("DB
/// corrupted: File truncated below stored layout") and a log record's checksum had said
/// nothing more (helper-148).
const DAMAGE_REMEDY: &str = "what to do: `loci repair --store DIR` writes the store's files \
     anew from its log where every record of the log can be read (where one cannot, it says \
     so and changes nothing); the log is the one thing not derived from another, so a damaged \
     log needs the store from a backup";

/// The exit of a command whose reads met a damaged block of the state snapshot.
fn damage_met_exit() -> ExitCode {
    errln!(
        "error: a block of the store's state snapshot is damaged, and what it held read as missing: the output may be incomplete or wrong. The next write replays the state from the log (`loci repair` does it now)"
    );
    Code::Corrupt.into()
}

/// An error and its causes, each said once (a cause whose text the outer message already
/// contains is not repeated).
pub(crate) fn render(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

/// A panic the library catches at its boundary with redb, sled or tantivy (a damaged file)
/// becomes an error that names the file and says what panicked: printing the panic as well,
/// with a backtrace where `RUST_BACKTRACE` is set, made a handled error look like a crash. It
/// goes to the debug log instead. Any other panic is printed as Rust prints it.
fn quiet_caught_panics() {
    let print = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if loci::boundary::catching() {
            tracing::debug!(panic = %info, "caught at the library's boundary");
        } else {
            print(info);
        }
    }));
}

/// Logs go to standard error: warnings by default, `-v` info, `-vv` debug, `-vvv` trace, `-q`
/// errors only; `LOCI_LOG` (tracing's filter syntax, e.g. `loci=debug`) overrides both.
fn init_logging(flags: &args::LogArgs) {
    output::QUIET.store(flags.quiet, std::sync::atomic::Ordering::Relaxed);
    let level = if flags.quiet {
        "error"
    } else {
        match flags.verbose {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }
    };
    // `-q` is quiet whatever `LOCI_LOG` asks; a `LOCI_LOG` that is no filter is said to be
    // one, where it had been passed over in silence (helper-147).
    let asked = std::env::var("LOCI_LOG").ok().filter(|_| !flags.quiet);
    let filter = match asked.map(|f| (tracing_subscriber::EnvFilter::try_new(&f), f)) {
        Some((Ok(filter), _)) => filter,
        Some((Err(e), f)) => {
            errln!(
                "warning: LOCI_LOG={} is not a log filter ({e}); logging at {level} (e.g. LOCI_LOG=loci=debug)",
                loci::error::quoted_excerpt(&f)
            );
            tracing_subscriber::EnvFilter::new(level)
        }
        None => tracing_subscriber::EnvFilter::new(level),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in a log file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        // A log line that cannot be written (standard error closed by its reader) is dropped:
        // by default the subscriber reports it with eprintln!, which panics on that same
        // closed pipe, and a panic while a store closes is an abort.
        .log_internal_errors(false)
        .try_init();
}

/// Opens the store for a command that writes.
fn open(store: &args::StoreArg) -> Result<Opened> {
    opening_for_writing(loci::Store::open(&store.store)).map(Opened::new)
}

/// What a command that opens the store for writing got, its refusal of this user explained.
fn opening_for_writing<T>(opened: loci::Result<T>) -> Result<T> {
    match opened {
        Ok(s) => Ok(s),
        // The refusal alone (`i/o on DIR/lock: Permission denied`) read as a broken store.
        Err(e) if loci::error::refuses_this_user(&e) => {
            let e = anyhow::Error::new(e);
            Err(anyhow::Error::new(exit::CliError {
                code: exit::code_of(&e),
                message: format!(
                    "{}; this command opens the store for writing, which the system refuses \
                     this user (its permissions, or a read-only mount); on a redb store the \
                     commands that only read (search, neighbors, query, run, stats, context \
                     without --save, replay --verify) still read it, and a sled store is read \
                     only by a user who may write it",
                    render(&e)
                ),
            }))
        }
        Err(e) => Err(e.into()),
    }
}

/// Opens the store for `replay --verify`: for writing, so that no other process appends while
/// the log is replayed (a writer elsewhere is waited for, then named); read-only where the
/// system refuses this user a write (another user's store, a read-only mount), as the check
/// writes nothing. The second of the pair says which it got.
fn open_to_verify(store: &args::StoreArg) -> Result<(Opened, bool)> {
    match loci::Store::open(&store.store) {
        Ok(s) => Ok((Opened::new(s), false)),
        Err(e) if loci::error::refuses_this_user(&e) => Ok((
            Opened::new(loci::Store::open_read_only(&store.store)?),
            true,
        )),
        Err(e) => Err(e.into()),
    }
}

/// Opens the store for a command that only reads: read-only beside a writer in another process
/// (redb), so that queries run during an ingest.
fn open_for_reading(store: &args::StoreArg) -> Result<Opened> {
    Ok(Opened::new(loci::Store::open_for_reading(&store.store)?))
}

/// Set when a store a command opened had met a damaged block of its snapshot by the time it
/// closed (see [`loci::Store::snapshot_damage_found`]): a command that otherwise succeeded
/// exits 6, so a script does not take a short answer for a whole one. A write that met
/// damage has replayed the state from the log before it wrote, and leaves it unset.
static DAMAGE_MET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The store a command opened. The process exits when the command ends, so the store is
/// closed with [`loci::Store::close_at_exit`]: its in-memory state is left to the system
/// rather than freed record by record.
pub(crate) struct Opened(std::mem::ManuallyDrop<loci::Store>);

impl Opened {
    fn new(store: loci::Store) -> Opened {
        Opened(std::mem::ManuallyDrop::new(store))
    }

    /// The store itself, for a call that takes it by value.
    fn into_store(self) -> loci::Store {
        let mut this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the store is taken out once.
        unsafe { std::mem::ManuallyDrop::take(&mut this.0) }
    }
}

impl std::ops::Deref for Opened {
    type Target = loci::Store;
    fn deref(&self) -> &loci::Store {
        &self.0
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        // SAFETY: the store is taken out once, here, and `self` is not used after.
        let store = unsafe { std::mem::ManuallyDrop::take(&mut self.0) };
        if store.snapshot_damage_found() {
            DAMAGE_MET.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        store.close_at_exit();
    }
}

fn backend(name: &str) -> Result<loci::BackendKind> {
    Ok(name.parse()?)
}

fn run(cli: Cli) -> Result<Code> {
    match cli.command {
        Command::Init(a) => write::init(a),
        Command::Ingest(a) => write::ingest(a),
        Command::Extract(a) => write::extract(a),
        Command::Pin(a) => write::pin(a, true),
        Command::Unpin(a) => write::pin(a, false),
        Command::Delete(a) => memory::delete(a),
        Command::Compact(a) => memory::compact(a),
        Command::Repair(a) => memory::repair(a),
        Command::Consolidate(a) => memory::consolidate(a),
        Command::Forget(a) => memory::forget(a),
        Command::Wm(a) => memory::working_memory(a),
        Command::Emerge(a) => memory::emerge(a),
        Command::Context(a) => context::context(a),
        Command::Journal(c) => journal::journal(c),
        Command::Check(a) => memory::check(a),
        Command::Serve(a) => serve::serve(a),
        Command::Mcp(a) => serve::mcp(a),
        Command::Search(a) => read::search(a),
        Command::Timeline(a) => read::timeline(a),
        Command::Neighbors(a) => read::neighbors(a),
        Command::Query(a) => read::query(a),
        Command::Run(a) => read::run_query(a),
        Command::Queries(a) => read::list_queries(a),
        Command::Stats(a) => read::stats(a),
        Command::Replay(a) => read::replay(a),
        Command::World(a) => demo::world(a),
        Command::Demo(a) => demo::demo(a),
        Command::Bench(b) => bench::run(b),
        Command::Completions { shell } => {
            // Into a buffer first: the generator panics on a failed write.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "loci", &mut script);
            use std::io::Write as _;
            let mut out = output::stdout();
            out.write_all(&script)?;
            out.flush()?;
            Ok(Code::Ok)
        }
    }
}

/// The text of a file that `flag` names: a missing one is not found (4), a directory or bytes
/// that are not UTF-8 bad input (3), as an input file is; each says the flag and the file (a
/// directory had exited 8, "other failure").
pub(crate) fn read_flag_file(flag: &str, path: &std::path::Path) -> Result<String> {
    let shown = loci::error::shown_path(path);
    if path.is_dir() {
        exit::fail!(
            Code::BadInput,
            "{flag} {shown}: is a directory, expected a text file"
        );
    }
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            // A byte-order mark (Windows editors write one) is no part of the text, as ingest
            // and saved queries take it; kept, it headed the prompt an instructions file began.
            Ok(text) => Ok(match text.strip_prefix('\u{feff}') {
                Some(rest) => rest.to_string(),
                None => text,
            }),
            Err(e) => exit::fail!(
                Code::BadInput,
                "{flag} {shown}: not UTF-8 text (at byte {})",
                e.utf8_error().valid_up_to()
            ),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            exit::fail!(Code::NotFound, "{flag} {shown}: no such file")
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("{flag} {shown}: reading it"))),
    }
}
