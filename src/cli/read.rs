//! Commands that read: `search`, `neighbors`, `query`, `run`, `queries`, `stats`, `replay`.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::Result;

use loci::query::{Answer, Asked, SavedQueries, SavedQuery};
use loci::retrieval::RankingMode;
use loci::{
    ExpandOptions, NameOf, RetrieveOptions, Retriever, SearchFilter, SnippetKind, Store, Target,
};

use super::args::{
    NeighborsArgs, QueriesArgs, QueryArgs, ReplayArgs, RunArgs, SearchArgs, StatsArgs, StoreArg,
    TimelineArgs,
};
use super::exit::{fail, Code};
use super::output::{
    count, errln, item_among, list, one_field, outln, print_json, stdout, visible, JsonValuesFrom,
};
use super::{open_for_reading, open_to_verify};

/// `NAME=VALUE` flag values as pairs.
pub fn name_values(flag: &str, raw: &[String]) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(raw.len());
    for kv in raw {
        let Some((k, v)) = kv.split_once('=') else {
            fail!(Code::BadInput, "{flag} takes NAME=VALUE, got {kv:?}");
        };
        if k.is_empty() {
            fail!(
                Code::BadInput,
                "{flag} takes NAME=VALUE, got {} with an empty NAME",
                loci::error::quoted_excerpt(kv)
            );
        }
        if k.trim() != k {
            fail!(
                Code::BadInput,
                "{flag} takes NAME=VALUE, and the NAME {} has spaces around it",
                loci::error::quoted_excerpt(k)
            );
        }
        // One value a name: the last had silently won.
        if let Some((_, first)) = out.iter().find(|(seen, _)| seen == k) {
            fail!(
                Code::BadInput,
                "{flag} {} is given twice ({} and {}); give each name once",
                loci::error::excerpt(k),
                loci::error::quoted_excerpt(first),
                loci::error::quoted_excerpt(v)
            );
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

pub fn search(a: SearchArgs) -> Result<Code> {
    loci::text::check_search(
        &a.text,
        "text",
        a.label.iter().map(String::as_str),
        a.kind.iter().map(String::as_str),
    )?;
    refuse_backward_range(a.from, a.to)?;
    let s = open_for_reading(&a.store)?;
    check_filter_names(&s, &[], &a.label)?;
    for k in s.refuse_kind_near_misses("--kind", a.kind.iter().map(String::as_str))? {
        errln!("note: no event of this store has kind {k:?} (kinds are case-sensitive)");
    }
    let time = match (a.from, a.to) {
        (None, None) => None,
        (f, t) => Some((f.unwrap_or(i64::MIN), t.unwrap_or(i64::MAX))),
    };
    let mut filter = SearchFilter::default()
        .with_labels(a.label)
        .with_kinds(a.kind);
    filter.time = time;
    let hits = s.search(&a.text, &filter, a.limit)?;
    let rows: Vec<serde_json::Value> = hits
        .iter()
        .map(|h| loci::text::hit_json(&s, h))
        .collect::<loci::Result<_>>()?;
    if a.json {
        print_json(&rows)?;
    } else if rows.is_empty() {
        outln!("no hits");
    } else {
        for (i, r) in rows.iter().enumerate() {
            outln!(
                "{:>3}. {:>7.3}  {}",
                i + 1,
                r["score"].as_f64().unwrap_or(0.0),
                one_field(r["text"].as_str().unwrap_or(""))
            );
        }
    }
    Ok(Code::Ok)
}

/// Refuses a `--from` after `--to` (search and timeline), which would match nothing.
fn refuse_backward_range(from: Option<i64>, to: Option<i64>) -> Result<()> {
    if let (Some(from), Some(to)) = (from, to) {
        if from > to {
            fail!(Code::BadInput, "--from {from} is after --to {to}");
        }
    }
    Ok(())
}

/// `timeline`: the latest `--limit` events between two world times, oldest first, one line
/// each (its number, time, kind and text: a summary's sentence), then how many the range
/// holds when some are left out. A summary a later one of its period replaced is not listed.
pub fn timeline(a: TimelineArgs) -> Result<Code> {
    refuse_backward_range(a.from, a.to)?;
    let s = open_for_reading(&a.store)?;
    let (from, to) = (a.from.unwrap_or(i64::MIN), a.to.unwrap_or(i64::MAX));
    // The entries alone first (16 bytes each), then each event written as it is read: a
    // closed pipe stops the reading.
    let (mut entries, total) = s.latest_event_times(from, to, a.limit)?;
    if a.json {
        #[derive(serde::Serialize)]
        struct Timeline<E> {
            events: E,
            total: usize,
        }
        let events = JsonValuesFrom::new(|visit: &mut dyn FnMut(_) -> loci::Result<bool>| {
            // Taken, not copied: the list is written once.
            s.each_event_of_time_entries(std::mem::take(&mut entries), &mut |e| {
                visit(loci::serve::api::timeline_row(&e))
            })
        });
        return print_json(&Timeline {
            events: &events,
            total,
        })
        .map_err(|e| events.failure().map_or(e, Into::into))
        .map(|()| Code::Ok);
    }
    let mut shown = 0usize;
    let mut out = stdout();
    let mut written = Ok(());
    s.each_event_of_time_entries(entries, &mut |e| {
        let full = loci::serve::api::timeline_text(&e);
        // The quoting escapes the rest.
        let text = loci::text::lines_joined(&full);
        let line = format!(
            "{:>7}  t={}  {}  {}",
            e.seq,
            e.ts,
            e.kind,
            loci::error::quoted_excerpt(&text)
        );
        written = writeln!(out, "{}", visible(&line));
        shown += 1;
        Ok(written.is_ok())
    })?;
    written?;
    drop(out);
    if shown == 0 {
        outln!("no events");
    } else if total > shown {
        outln!("the latest {shown} of {total} events in the range (--limit shows more)");
    }
    Ok(Code::Ok)
}

/// Refuses relation and label names given on the command line that only a slip of case or
/// whitespace keeps from naming the store's ([`loci::store::GraphRead::refuse_near_misses`]),
/// and says on stderr which others no edge or node of the store has: names are
/// case-sensitive, and a misspelt filter would otherwise just match nothing, silently.
fn check_filter_names(s: &Store, relations: &[String], labels: &[String]) -> Result<()> {
    let g = s.graph();
    g.refuse_near_misses("--relation", NameOf::Relation, relations)?;
    g.refuse_near_misses("--label", NameOf::Label, labels)?;
    for r in relations.iter().filter(|r| g.relation_id(r).is_none()) {
        errln!(
            "note: no edge of this store has relation {r:?} (relation names are case-sensitive)"
        );
    }
    for l in labels.iter().filter(|l| g.label_id(l).is_none()) {
        errln!("note: no node of this store has label {l:?} (labels are case-sensitive)");
    }
    Ok(())
}

pub fn neighbors(a: NeighborsArgs) -> Result<Code> {
    if !(0.0..=1.0).contains(&a.min_confidence) {
        fail!(
            Code::BadInput,
            "--min-confidence must be in [0, 1], got {}",
            a.min_confidence
        );
    }
    loci::text::refuse_any_blank(a.relation.iter().map(String::as_str), "relation")?;
    let s = open_for_reading(&a.store)?;
    check_filter_names(&s, &a.relation, &[])?;
    let start = resolve_node(&s, &a.node)?;
    let mut opts = ExpandOptions::default()
        .with_min_confidence(a.min_confidence)
        .with_relations(a.relation)
        .with_raw_confidence(a.raw_confidence)
        .with_include_ended(a.include_ended);
    opts.now = a.now;
    let found = s.neighbors(start.id, a.depth, &opts);
    if a.json {
        // A struct, not `json!`: `json!` widens each f32 to an f64 (0.3 -> 0.30000001192092896).
        #[derive(serde::Serialize)]
        struct Out<'a> {
            start: &'a str,
            neighbors: &'a [loci::Neighbor],
        }
        print_json(&Out {
            start: &start.key,
            neighbors: &found,
        })?;
    } else {
        // Quoted where a space at either end or a comma would read as the line's own
        // (helper-147: ` lead ( lead, Thing)`).
        fn item(text: &str) -> std::borrow::Cow<'_, str> {
            item_among(text, ",")
        }
        outln!(
            "{} ({}, {}): {} within {}",
            item(&start.key),
            item(&start.name),
            item(&start.label),
            count(found.len() as u64, "node", "nodes"),
            count(a.depth, "hop", "hops")
        );
        for n in found {
            let arrow = if n.incoming { "<-" } else { "->" };
            let stored = if (n.stored_confidence - n.confidence).abs() >= 0.005 {
                format!(" (stored {:.2})", n.stored_confidence)
            } else {
                String::new()
            };
            outln!(
                "  hop {} {arrow}{}{arrow} {} ({}, {})  confidence {:.2}{stored}  edge {}",
                n.hops,
                one_field(&n.relation),
                item(&n.key),
                item(&n.name),
                item(&n.label),
                n.confidence,
                n.edge.0
            );
        }
    }
    Ok(Code::Ok)
}

fn resolve_node(s: &Store, key_or_name: &str) -> Result<loci::Node> {
    // A key, or a name to search for: refused as `node` when it could be neither.
    loci::text::check_search_text(key_or_name, "node")?;
    match s.require_node(key_or_name) {
        Ok(n) => return Ok(n),
        Err(loci::Error::NotFound(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let filter = SearchFilter::default().with_nodes_only(true);
    // The best hit that holds every word asked: the best may share one word of several
    // (`cave:last_night` found "Mossyhollow cave", another cave, which a planner took for the
    // one asked), and a later one hold them all.
    let mut best = None;
    for h in s.search(key_or_name, &filter, NAME_MATCHES_TRIED)? {
        let Some(n) = (match h.target {
            Target::Node(id) => s.node(id),
            _ => None,
        }) else {
            continue;
        };
        if names_every_word(s, &n, key_or_name)? {
            errln!(
                "note: no node has key {key_or_name:?}; using best name match {:?} ({})",
                n.key,
                n.name
            );
            return Ok(n);
        }
        best.get_or_insert(n);
    }
    if let Some(n) = best {
        fail!(
            Code::NotFound,
            "no node has key {key_or_name:?}, and no node's name holds all its words (the best match is {:?} ({}): give its key to use it)",
            n.key,
            n.name
        );
    }
    if !s.searches_nodes() {
        fail!(
            Code::NotFound,
            "no node has key {key_or_name:?}, and names cannot be looked up: this reader opened while a deletion was being written; try again once it is done"
        )
    }
    fail!(
        Code::NotFound,
        "no node has key {key_or_name:?} and no node name matches it"
    )
}

/// Search hits `resolve_node` tries for one whose name holds every word asked.
const NAME_MATCHES_TRIED: usize = 10;

/// Whether each word of `asked`, as the full-text index analyses it (case, accents, stopwords
/// and plurals aside, as a search sets them), is a word of node `n`'s name, aliases or key, or
/// the start of one (a word typed short).
fn names_every_word(s: &Store, n: &loci::Node, asked: &str) -> Result<bool> {
    let index = s.text_index();
    let mut own = Vec::new();
    for text in std::iter::once(&n.name)
        .chain(&n.aliases)
        .chain(std::iter::once(&n.key))
    {
        own.extend(index.analyze(text)?);
    }
    // A one-letter word is a possessive's `s` ("José's") or an initial: no word to hold.
    Ok(index
        .analyze(asked)?
        .iter()
        .filter(|w| w.chars().nth(1).is_some())
        .all(|w| own.iter().any(|o| o.starts_with(w.as_str()))))
}

pub fn query(a: QueryArgs) -> Result<Code> {
    // Named by the flags here (retrieval names the library's fields, `relations`).
    for (flag, list) in [
        ("--relation", &a.relation),
        ("--deny-relation", &a.deny_relation),
    ] {
        loci::text::refuse_any_blank(list.iter().map(String::as_str), flag)?;
    }
    loci::retrieval::refuse_asked_and_denied(&a.relation, &a.deny_relation, "--deny-relation")?;
    let s = open_for_reading(&a.store)?;
    check_filter_names(&s, &a.relation, &[])?;
    let kinds: Vec<SnippetKind> = a
        .kind
        .iter()
        .map(|k| k.parse())
        .collect::<loci::Result<_>>()?;
    let mut opts = RetrieveOptions::default()
        .with_k(a.limit)
        .with_token_counter(a.tokenizer)
        .with_min_confidence(a.min_confidence)
        .with_relations(a.relation)
        .with_deny_relations(a.deny_relation)
        .with_kinds(kinds)
        .with_include_ended(a.include_ended)
        .with_raw_confidence(a.raw_confidence)
        .with_record_usage(!a.no_record)
        .with_mode(a.mode.parse::<RankingMode>()?);
    opts.budget = a.budget;
    opts.as_of = a.as_of;
    let pack = Retriever::new(&s)?.retrieve(&a.question, &opts)?;
    if a.json {
        print_json(&pack)?;
    } else {
        print_pack(&pack)?;
    }
    Ok(Code::Ok)
}

fn print_pack(pack: &loci::ContextPack) -> Result<()> {
    // Quoted when it holds a line break: its second line had read as a line of the pack's.
    outln!("question: {}", one_field(&pack.question));
    if pack.seeds.is_empty() {
        // Said, because a pack ranked by text alone reads as confidently as one the graph
        // ranked: a question with typos ("emerlads for stiks") listed facts about trading
        // posts under no seed line.
        if pack.snippets.is_empty() && pack.cut.is_empty() {
            outln!("  nothing the memory holds matches the question");
        } else {
            outln!("  no entity the memory knows is named in the question: ranked from its best text hits");
        }
    }
    for seed in &pack.seeds {
        outln!(
            "  seed {} ({}): {}, weight {:.3}",
            item_among(&seed.key, ","),
            item_among(&seed.name, ","),
            seed.source,
            seed.weight
        );
    }
    for (i, s) in pack.snippets.iter().enumerate() {
        // Only the parts that contributed: a passage has no confidence, and "confidence 0.00"
        // would read as a claim that it is false.
        let p = &s.parts;
        let parts: Vec<String> = [
            ("text", p.text),
            ("graph", p.graph),
            ("confidence", p.confidence),
            ("recency", p.recency),
            ("salience", p.salience),
            ("usage", p.usage),
        ]
        .iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|(name, v)| format!("{name} {v:.2}"))
        .collect();
        outln!(
            "\n{:>2}. [{} {}] score {:.3} ({}), {} tokens",
            i + 1,
            s.kind.name(),
            s.id,
            s.score,
            parts.join(", "),
            s.tokens
        );
        let mut text: String = s.text.chars().take(300).collect();
        if text.len() < s.text.len() {
            text.push_str("...");
        }
        outln!("    {text}");
        for w in &s.why {
            outln!("    why: {w}");
        }
        let p = &s.provenance;
        let edges: Vec<u32> = p.edges.iter().map(|e| e.0).collect();
        let sources: Vec<String> = [
            ("edges", list(&edges)),
            ("events", list(&p.events)),
            ("passages", list(&p.passages)),
        ]
        .into_iter()
        .filter(|(_, l)| l != "none")
        .map(|(name, l)| format!("{name} {l}"))
        .collect();
        if !sources.is_empty() {
            outln!("    provenance: {}", sources.join("; "));
        }
    }
    let budget = pack
        .budget
        .map(|b| b.to_string())
        .unwrap_or("unlimited".into());
    outln!(
        "\n{} tokens of {budget} ({}); {} cut; {} us",
        pack.tokens_used,
        pack.token_counter,
        pack.cut.len(),
        pack.elapsed_us
    );
    for c in &pack.cut {
        outln!(
            "  cut {} {} ({} tokens, score {:.3})",
            c.kind.name(),
            c.id,
            c.tokens,
            c.score
        );
    }
    Ok(())
}

/// The saved queries: built in, then those of `dir`.
fn saved_queries(dir: Option<&Path>) -> Result<SavedQueries> {
    SavedQueries::builtin_and(dir).map_err(excerpted)
}

/// `e` as the CLI prints it: a saved query's error in its file carries the query's excerpt
/// and carets after its first line, which must not be shortened word by word as a message is
/// (a run of joined emoji cut to its start and length moved the text from over its caret).
fn excerpted(e: loci::Error) -> anyhow::Error {
    let shown = e.to_string();
    if shown.contains('\n') {
        anyhow::Error::new(e).context(super::output::Excerpted(shown))
    } else {
        e.into()
    }
}

pub fn run_query(a: RunArgs) -> Result<Code> {
    let args = name_values("--param", &a.params)?;
    // The query as asked, and its file, where it has one (a saved query's).
    let (text, loaded);
    let asked = match (a.saved, a.query) {
        (Some(_), Some(_)) => fail!(Code::Usage, "give a saved query or --query, not both"),
        (None, None) => fail!(
            Code::Usage,
            "give a saved query (name or .gq file) or --query TEXT"
        ),
        (None, Some(given)) => {
            text = given;
            Asked::Text(&text, loci::query::params_from_pairs(&args)?)
        }
        (Some(name), None) => {
            loaded = if name.ends_with(".gq") || Path::new(&name).is_file() {
                SavedQuery::load(Path::new(&name)).map_err(excerpted)?
            } else {
                let all = saved_queries(a.queries.as_deref())?;
                match all.get(&name) {
                    Some(q) => q.clone(),
                    None => fail!(Code::NotFound, "{}", all.unknown(&name)),
                }
            };
            Asked::Saved(&loaded, loci::query::command_line_values(&args)?)
        }
    };
    // With --explain no store is read, and none is needed.
    let store = match (a.explain, &a.store) {
        (true, _) => None,
        (false, Some(store)) => Some(open_for_reading(&StoreArg {
            store: store.clone(),
        })?),
        (false, None) => fail!(Code::Usage, "give --store DIR (or LOCI_STORE)"),
    };
    let origin = match &asked {
        Asked::Saved(q, _) => Some(&q.path),
        Asked::Text(..) => None,
    };
    // Shown against the query text, after the file it is in where it has a line there (a
    // saved query's lines are its file's); the exit code comes from the error's kind
    // (exit::code_of).
    let result = asked.answer(store.as_deref()).map_err(|e| {
        // As an error found when the file was read is told (`f.gq:5: query: line 5, ...`).
        let shown = match (origin, e.line()) {
            (Some(path), Some(line)) => format!(
                "{}:{line}: query: {}",
                loci::error::shown_path(path),
                e.render(asked.text())
            ),
            _ => e.render(asked.text()),
        };
        anyhow::Error::new(e).context(super::output::Excerpted(shown))
    })?;
    let result = match result {
        // A plan has no table: JSON either way.
        Answer::Plan(plan) => {
            print_json(&plan)?;
            return Ok(Code::Ok);
        }
        Answer::Rows(result) => result,
    };
    if a.json {
        print_json(&result)?;
    } else {
        outln!("{}", result.columns.join(" | "));
        for row in &result.rows {
            let cells: Vec<String> = row.iter().map(cell).collect();
            outln!("{}", cells.join(" | "));
        }
        let n = result.rows.len();
        let rows = if n == 1 { "row" } else { "rows" };
        outln!("({n} {rows}, {} us)", result.elapsed_us);
    }
    Ok(Code::Ok)
}

/// A result cell for people: strings bare where nothing else reads the same (else quoted),
/// lists and maps as JSON, null as `-`, numbers without binary noise, a float with a point.
fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => super::output::table_cell(s).into_owned(),
        serde_json::Value::Null => "-".into(),
        serde_json::Value::Number(n) if n.is_f64() => n.as_f64().map_or(n.to_string(), human_float),
        other => other.to_string(),
    }
}

/// A float at 12 significant digits, trailing zeros dropped: arithmetic on stored f32s gives
/// f64s like 2.7900002099999996, whose last digits are noise to a reader (`--json` keeps them).
fn human_float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        // Debug writes a whole float with its point: 0.0, -0.0.
        return format!("{f:?}");
    }
    let magnitude = f.abs().log10().floor() as i32;
    if !(-6..15).contains(&magnitude) {
        return format!("{f:e}");
    }
    let decimals = (11 - magnitude).clamp(0, 17) as usize;
    let s = format!("{f:.decimals$}");
    // A whole float keeps its point, as `--json` writes it: `1` is the integer's cell.
    match s.split_once('.') {
        Some((whole, fraction)) => match fraction.trim_end_matches('0') {
            "" => format!("{whole}.0"),
            fraction => format!("{whole}.{fraction}"),
        },
        None => format!("{s}.0"),
    }
}

pub fn list_queries(a: QueriesArgs) -> Result<Code> {
    let all = saved_queries(a.queries.as_deref())?;
    if a.json {
        print_json(&all.list())?;
    } else {
        for q in all.list() {
            let params: Vec<String> = q
                .params
                .iter()
                .map(|p| match &p.default {
                    Some(d) => format!("{} = {d}", p.declared()),
                    None => p.declared(),
                })
                .collect();
            outln!("{}({})\n    {}", q.name, params.join(", "), q.description);
        }
    }
    Ok(Code::Ok)
}

pub fn stats(a: StatsArgs) -> Result<Code> {
    let s = open_for_reading(&a.store)?;
    let stats = s.stats();
    let rss = loci::bench::rss_bytes();
    let (anon, file) = loci::bench::rss_anon_and_file_bytes();
    if a.json {
        let mut v = serde_json::to_value(&stats)?;
        v["rss_bytes"] = rss.into();
        v["rss_anon_bytes"] = anon.into();
        v["rss_file_bytes"] = file.into();
        print_json(&v)?;
    } else {
        outln!("backend      {}", stats.backend);
        outln!(
            "events       {} ({} deleted)",
            stats.events,
            stats.events_deleted
        );
        outln!("nodes        {}", stats.nodes);
        outln!("edges        {}", stats.edges);
        let t = &stats.tiers;
        outln!(
            "tiers        hot: {} nodes, {} edges, {} events; warm: {} nodes, {} edges, {} events",
            t.hot_nodes,
            t.hot_edges,
            t.hot_events,
            t.warm_nodes,
            t.warm_edges,
            t.warm_events
        );
        outln!("relations    {}", stats.relations);
        outln!("labels       {}", stats.labels);
        outln!(
            "text docs    {} (indexed to seq {})",
            stats.text_docs,
            stats.text_indexed_seq
        );
        outln!(
            "disk         {} bytes in {}, {} bytes of full-text index, {} bytes of state snapshot; {} bytes allocated in all",
            stats.disk_bytes_backend,
            stats.backend,
            stats.disk_bytes_text,
            stats.disk_bytes_snapshot,
            stats.disk_bytes_allocated
        );
        let (source, mapped) = match stats.state_source {
            loci::StateSource::Snapshot { seq, caught_up } => (
                format!("the snapshot of event {seq}, {caught_up} changes caught up"),
                " (the rest read in place from the snapshot)",
            ),
            _ => ("the whole log, replayed".to_string(), ""),
        };
        outln!("opened from  {source}");
        let b = stats.state_bytes;
        // A state opened from its snapshot maps it: what changed since is all its heap holds,
        // which without the note reads as an empty graph.
        outln!(
            "memory       {} bytes of state on the heap{mapped}: {} nodes, {} node keys, {} edge cores, {} adjacency; {rss} bytes resident",
            b.total(),
            b.nodes,
            b.node_keys,
            b.edges,
            b.adjacency
        );
    }
    Ok(Code::Ok)
}

/// `replay --verify`: the exit code says whether the live state equals the replay; the store
/// is closed before the process exits either way.
pub fn replay(a: ReplayArgs) -> Result<Code> {
    if let Some(seq) = a.until {
        let s = open_for_reading(&a.store)?;
        let t = Instant::now();
        // Read in place: a copy of every edge of a 100M-edge graph does not fit in memory.
        let past = s.past(seq)?;
        if a.json {
            print_json(&past)?;
        } else {
            outln!(
                "as of event {}{}: {} nodes, {} edges (replayed in {:.2}s)",
                past.seq(),
                past.latest_ts()
                    .map(|t| format!(" (world time {t})"))
                    .unwrap_or_default(),
                past.node_count(),
                past.edge_count(),
                t.elapsed().as_secs_f64()
            );
        }
        return Ok(Code::Ok);
    }
    if !a.verify {
        fail!(
            Code::Usage,
            "replay needs --verify or --until SEQ (replay never rewrites the live store)"
        );
    }
    let (s, read_only) = open_to_verify(&a.store)?;
    let t = Instant::now();
    let report = s.verify()?;
    // What a damaged block of the snapshot held read as missing: the differences are the
    // damage's, not a divergence of the log's views, which a script would take a mismatch for.
    let damaged = s.snapshot_damage_found();
    if a.json {
        let mut v = serde_json::to_value(&report)?;
        if let Some(fields) = v.as_object_mut() {
            fields.insert("checked_read_only".into(), read_only.into());
            fields.insert("snapshot_damaged".into(), damaged.into());
        }
        print_json(&v)?;
    } else if damaged {
        outln!(
            "replayed {} in {:.2}s",
            count(report.events_replayed, "event", "events"),
            t.elapsed().as_secs_f64()
        );
        outln!(
            "DAMAGED: a block of the state snapshot fails its checksum, and what it held read as missing ({} differences in all, which follow from it). The next write replays the state from the log, as `loci repair` does now; verify again after it",
            report.differences.len() + report.more_differences
        );
    } else {
        outln!(
            "replayed {} into {} nodes, {} edges, {} text documents in {:.2}s",
            count(report.events_replayed, "event", "events"),
            report.nodes,
            report.edges,
            report.text_docs,
            t.elapsed().as_secs_f64()
        );
        for d in &report.differences {
            outln!("DIFFERENCE: {d}");
        }
        if report.more_differences > 0 {
            outln!("... and {} more differences", report.more_differences);
        }
        if read_only {
            outln!("note: checked read-only, as this user may not write the store; a writer appending meanwhile would show as differences");
        }
        if report.text_rebuilt_at_open {
            outln!("note: this open found the full-text index damaged and rebuilt it from the log; the index compared is the rebuilt one");
        }
        outln!(
            "{}",
            if report.log_events_not_found > 0 {
                "DAMAGED: the log's own index (`loci repair` writes the store's files anew from a scan of the log, which mends it)"
            } else if report.ok() {
                "OK: live state equals replay"
            } else {
                "MISMATCH (`loci repair` rebuilds every view derived from the log)"
            }
        );
    }
    Ok(if damaged || report.log_events_not_found > 0 {
        Code::Corrupt
    } else if report.ok() {
        Code::Ok
    } else {
        Code::Mismatch
    })
}

#[cfg(test)]
mod tests {
    use super::human_float;

    #[test]
    fn floats_for_people_drop_binary_noise() {
        assert_eq!(human_float(2.7900002099999996), "2.79000021");
        assert_eq!(human_float(0.95), "0.95");
        assert_eq!(human_float(-3.0), "-3.0");
        assert_eq!(human_float(1.0), "1.0");
        assert_eq!(human_float(0.0), "0.0");
        assert_eq!(human_float(1e14), "100000000000000.0");
        assert_eq!(human_float(2.0000000000001), "2.0");
        assert_eq!(human_float(1234.5), "1234.5");
        assert_eq!(human_float(1e-9), "1e-9");
        assert_eq!(human_float(0.1 + 0.2), "0.3");
    }
}
