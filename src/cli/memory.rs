//! Commands that change what the memory holds over time: `consolidate`, `forget`, `delete`,
//! `compact`.

use anyhow::Result;

use loci::dynamics::consolidate::{self, ConsolidateOptions, RuleSummarizer};
use loci::dynamics::forget::{self as forgetting, ForgetOptions};
use loci::DeleteRequest;

use super::args::{CompactArgs, ConsolidateArgs, DeleteArgs, ForgetArgs};
use super::exit::Code;
use super::open;
use super::output::{outln, print_json};

/// `delete`: one deletion event for the listed events and nodes.
pub fn delete(a: DeleteArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let mut request = DeleteRequest::events(a.events);
    request.nodes = a.nodes;
    let r = s.delete(&request)?;
    if a.json {
        print_json(&r)?;
    } else {
        outln!(
            "deleted {} events (deletion event {}): {} nodes and {} edges removed, {} edges kept with less support",
            r.deleted.len(),
            r.seq,
            r.nodes_removed,
            r.edges_removed,
            r.edges_weakened
        );
        outln!("their text stays in the store's files until `loci compact`");
    }
    Ok(Code::Ok)
}

/// `compact`: rewrite the files without the text of deleted events.
pub fn compact(a: CompactArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let (_store, r) = s.compact()?;
    if a.json {
        print_json(&r)?;
    } else {
        outln!(
            "compacted: {} deleted events now tombstones ({} in all); {} -> {} bytes",
            r.tombstones_written,
            r.deleted_events,
            r.bytes_before,
            r.bytes_after
        );
    }
    Ok(Code::Ok)
}

/// `consolidate`: summaries of every closed day and week, with the rule-based summariser.
pub fn consolidate(a: ConsolidateArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let mut opts = ConsolidateOptions::default();
    opts.until = a.until;
    let r = consolidate::consolidate(&s, &RuleSummarizer, &opts)?;
    let shown: Vec<_> = consolidate::summaries(&s)?
        .into_iter()
        .filter(|x| a.all || (r.first_seq..=r.last_seq).contains(&x.seq))
        .collect();
    if a.json {
        print_json(&serde_json::json!({"report": r, "summaries": shown}))?;
        return Ok(Code::Ok);
    }
    outln!(
        "consolidated {} events: {} episode, {} day and {} week summaries ({} replace earlier ones)",
        r.events_consolidated,
        r.episodes,
        r.days,
        r.weeks,
        r.superseded
    );
    for x in shown
        .iter()
        .filter(|x| x.level != consolidate::Level::Episode)
    {
        outln!(
            "[{} {}..{}, event {}] {}",
            x.level.name(),
            x.start,
            x.end,
            x.seq,
            x.text
        );
    }
    Ok(Code::Ok)
}

/// `forget`: consolidate (so summaries keep the gist), then evict down to the budget.
pub fn forget(a: ForgetArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let c = consolidate::consolidate(&s, &RuleSummarizer, &ConsolidateOptions::default())?;
    let mut opts = ForgetOptions::with_budget(a.budget);
    opts.now = a.now;
    let r = forgetting::forget(&s, &opts)?;
    if a.json {
        print_json(&serde_json::json!({"consolidated": c, "forget": r}))?;
        return Ok(Code::Ok);
    }
    if c.days + c.weeks > 0 {
        outln!(
            "consolidated {} events into {} day and {} week summaries first",
            c.events_consolidated,
            c.days,
            c.weeks
        );
    }
    outln!(
        "forgot {} of {} evictable events: {} -> {} events held (budget {}); {} -> {} bytes",
        r.evicted,
        r.evictable,
        r.events_before,
        r.events_after,
        a.budget,
        r.bytes_before,
        r.bytes_after
    );
    if r.over_budget {
        outln!(
            "still over budget: the rest is pinned, not yet summarised, or summaries at the top"
        );
    }
    if r.evicted > 0 {
        outln!("the evicted records stay in the store's files until `loci compact`");
    }
    Ok(Code::Ok)
}
