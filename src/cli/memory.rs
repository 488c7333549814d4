//! Commands that change what the memory holds over time: `consolidate`, `forget`, `delete`,
//! `compact`, `wm`, `emerge`; `repair`, which mends a store from its log; and `check`, the
//! health check of what it holds.

use anyhow::Result;

use loci::dynamics::consolidate::{self, ConsolidateOptions, ConsolidationPolicy, RuleSummarizer};
use loci::dynamics::forget::{self as forgetting, ForgetOptions};
use loci::dynamics::working::{WmOp, MAX_CAPACITY};
use loci::DeleteRequest;

use super::args::{
    CheckArgs, CompactArgs, ConsolidateArgs, DeleteArgs, EmergeArgs, ForgetArgs, RepairArgs, WmArgs,
};
use super::exit::fail;
use super::exit::Code;
use super::open;
use super::open_for_reading;
use super::output::{count, errln, item_among, one_field, outln, print_json, JsonValuesFrom};

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
            "deleted {} (deletion event {}): {} and {} removed, {} kept with less support",
            count(r.deleted.len() as u64, "event", "events"),
            r.seq,
            count(r.nodes_removed as u64, "node", "nodes"),
            count(r.edges_removed as u64, "edge", "edges"),
            count(r.edges_weakened as u64, "edge", "edges")
        );
        if r.nodes_kept > 0 {
            let more = r.nodes_kept - r.nodes_kept_keys.len();
            outln!(
                "{} the deleted events asserted {}, asserted by events that remain: {}{}; `loci delete --node KEY` takes a node with every event that names it",
                count(r.nodes_kept as u64, "node", "nodes"),
                if r.nodes_kept == 1 { "stays" } else { "stay" },
                r.nodes_kept_keys
                    .iter()
                    .map(|k| loci::error::quoted_excerpt(k))
                    .collect::<Vec<_>>()
                    .join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
        }
        if !r.nodes_unpinned.is_empty() {
            outln!(
                "{} lost {} pin with the deleted events (a pin event names every node it pins): {}; `loci pin KEY` pins again",
                count(r.nodes_unpinned.len() as u64, "node", "nodes"),
                if r.nodes_unpinned.len() == 1 { "its" } else { "their" },
                r.nodes_unpinned
                    .iter()
                    .map(|k| loci::error::quoted_excerpt(k))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if !r.pinned_nodes_removed.is_empty() {
            let n = r.pinned_nodes_removed.len();
            outln!(
                "{} went with the events that made {} (a pin keeps a node from fading, and makes none): {}{}; asserted again, {} `loci pin` again",
                count(n as u64, "pinned node", "pinned nodes"),
                if n == 1 { "it" } else { "them" },
                r.pinned_nodes_removed
                    .iter()
                    .take(loci::dynamics::deletion::NODES_KEPT_LISTED)
                    .map(|k| loci::error::quoted_excerpt(k))
                    .collect::<Vec<_>>()
                    .join(", "),
                match n.saturating_sub(loci::dynamics::deletion::NODES_KEPT_LISTED) {
                    0 => String::new(),
                    more => format!(" and {more} more"),
                },
                if n == 1 { "it needs" } else { "they need" },
            );
        }
        if !r.deleted_before.is_empty() {
            outln!(
                "{} the deletion reached {} deleted already (by forgetting, or an earlier deletion), and the summaries holding {} went: {}",
                count(r.deleted_before.len() as u64, "event", "events"),
                if r.deleted_before.len() == 1 { "was" } else { "were" },
                if r.deleted_before.len() == 1 { "it" } else { "them" },
                seq_list(&r.deleted_before)
            );
        }
        if !r.summaries_made_again.is_empty() {
            outln!(
                "{} made again without what was deleted, keeping what {} restated of the events left: {}",
                count(r.summaries_made_again.len() as u64, "summary", "summaries"),
                if r.summaries_made_again.len() == 1 { "it" } else { "they" },
                seq_list(&r.summaries_made_again)
            );
        }
        if !r.summaries_not_made_again.is_empty() {
            outln!(
                "{} taken and not made again, {} gist gone (what forgotten or compacted events gave is not summarised again; the next `consolidate` summarises the live events of closed periods): {}",
                count(r.summaries_not_made_again.len() as u64, "summary", "summaries"),
                if r.summaries_not_made_again.len() == 1 { "its" } else { "their" },
                seq_list(&r.summaries_not_made_again)
            );
        }
        if let Some(seq) = r.places_made_again {
            outln!(
                "the places and villages `emerge` made were made again from the events left, as event {seq} (a place only deleted sightings made is not)"
            );
        }
        outln!("their text stays in the store's files until `loci compact`");
    }
    Ok(Code::Ok)
}

/// Most runs of numbers a report line lists; `--json` lists every number.
const SEQ_RUNS_LISTED: usize = 20;

/// Event sequence numbers (ascending) as a report line lists them: runs of consecutive ones as
/// ranges, `3-5, 9`, at most [`SEQ_RUNS_LISTED`] runs, then how many numbers are left out. A
/// deletion may make thousands of summaries again, numbered one after another in its commit:
/// listed one by one, they had made a line of 20 kB (helper-91).
fn seq_list(seqs: &[u64]) -> String {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &s in seqs {
        match runs.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(s) => *end = s,
            _ => runs.push((s, s)),
        }
    }
    let shown = runs.len().min(SEQ_RUNS_LISTED);
    let mut out: Vec<String> = runs[..shown]
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    let left: u64 = runs[shown..].iter().map(|(a, b)| b - a + 1).sum();
    if left > 0 {
        out.push(format!("and {left} more (`--json` lists them all)"));
    }
    out.join(", ")
}

/// `compact`: rewrite the files without the text of deleted events.
pub fn compact(a: CompactArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let (store, mut r) = s.into_store().compact()?;
    // The figure after is the files' as the command leaves them: closing writes too (redb's
    // allocator state), and measured before, the same 16 kB came back at every run.
    drop(super::Opened::new(store));
    r.bytes_after = loci::Store::files_bytes(&a.store.store);
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

/// `repair`: rebuild what is derived from the log, then check it as `replay --verify` does
/// (a repair that left a difference says so, and exits as a mismatch).
pub fn repair(a: RepairArgs) -> Result<Code> {
    // Not opened first: an open reads records derived from the log, which a repair writes
    // afresh, and one of them damaged would stop it.
    let (store, r) = super::opening_for_writing(loci::Store::repair_at(&a.store.store))?;
    let store = super::Opened::new(store);
    let verified = store.verify()?;
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        if let Some(fields) = v.as_object_mut() {
            fields.insert("verified".into(), verified.ok().into());
            fields.insert("differences".into(), verified.differences.clone().into());
        }
        print_json(&v)?;
    } else {
        outln!(
            "repaired from {} of the log: {} time-index, {} episodic-index and {} idempotency entries were wrong{}; the state and the full-text index were rebuilt",
            count(r.events_replayed, "event", "events"),
            r.time_entries_fixed,
            r.facet_entries_fixed,
            r.idempotency_entries_fixed,
            if r.meta_fixed {
                ", and the counters, deleted set or folds"
            } else {
                ""
            }
        );
        if !r.unreadable.is_empty() {
            outln!(
                "unreadable in the old files (damaged), rebuilt: {}{}",
                r.unreadable.join(", "),
                if r.not_compared.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; not compared after it, rebuilt: {}",
                        r.not_compared.join(", ")
                    )
                }
            );
        }
        if !r.read_without.is_empty() {
            outln!(
                "sled's own {}, failing {} checksum, read without: sled wrote {} anew",
                r.read_without.join(" and "),
                if r.read_without.len() == 1 {
                    "its"
                } else {
                    "their"
                },
                if r.read_without.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            );
        }
        if r.manifest_written {
            outln!("loci.json, gone or damaged, was written again from the log's meta table");
        }
        for d in &verified.differences {
            outln!("DIFFERENCE: {d}");
        }
        outln!(
            "{}",
            if verified.ok() {
                "verified: live state equals replay"
            } else {
                "MISMATCH after the repair"
            }
        );
    }
    Ok(if verified.ok() {
        Code::Ok
    } else {
        Code::Mismatch
    })
}

/// `consolidate`: summaries of every closed day and week, with the rule-based summariser.
pub fn consolidate(a: ConsolidateArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let mut opts = ConsolidateOptions::default().with_events_per_batch(a.events_per_batch);
    opts.until = a.until;
    opts.policy = ConsolidationPolicy::for_store(&s, a.day)?;
    let r = consolidate::consolidate(&s, &RuleSummarizer, &opts)?;
    if a.json {
        // Every summary written (or every live one), each printed as it is read again.
        let summaries = JsonValuesFrom::new(
            |visit: &mut dyn FnMut(_) -> loci::Result<bool>| match a.all {
                true => consolidate::each_live_summary(&s, true, visit),
                false => consolidate::each_summary_written(&s, &r, visit),
            },
        );
        print_consolidated_json(&r, &summaries).map_err(|e| match summaries.failure() {
            Some(read) => read.into(),
            None => e,
        })?;
        return Ok(Code::Ok);
    }
    outln!(
        "consolidated {}: {} episode, {} day and {} week summaries ({} replaced)",
        count(r.events_consolidated as u64, "event", "events"),
        r.episodes,
        r.days,
        r.weeks,
        count(r.superseded as u64, "earlier summary", "earlier summaries")
    );
    // The texts of days and weeks alone, each printed as it is read.
    let shown = |level| level != consolidate::Level::Episode;
    if !a.all {
        for x in consolidate::summaries_written_at(&s, &r, false, &shown)? {
            summary_line(&x)?;
        }
        return Ok(Code::Ok);
    }
    let mut printed = Ok(());
    consolidate::each_live_summary(&s, false, &mut |x| {
        if shown(x.level) {
            printed = summary_line(&x);
        }
        Ok(printed.is_ok())
    })?;
    printed?;
    Ok(Code::Ok)
}

/// One summary's line of `consolidate`'s listing.
fn summary_line(x: &consolidate::Summary) -> std::io::Result<()> {
    outln!(
        "[{} {}..{}, event {}] {}",
        x.level.name(),
        x.start,
        x.end,
        x.seq,
        one_field(&x.text)
    );
    Ok(())
}

/// `consolidate --json`: the report, then `summaries` (the keys in `json!`'s order, as before,
/// with no `Value` of every summary at once).
fn print_consolidated_json(
    report: &consolidate::ConsolidateReport,
    summaries: &impl serde::Serialize,
) -> Result<()> {
    #[derive(serde::Serialize)]
    struct Out<'a, S> {
        report: serde_json::Value,
        summaries: &'a S,
    }
    print_json(&Out {
        report: serde_json::to_value(report)?,
        summaries,
    })
}

/// `forget`: consolidate (so summaries keep the gist), then evict down to the budget.
pub fn forget(a: ForgetArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let mut opts = ForgetOptions::with_budget(a.budget);
    opts.now = a.now;
    let (c, r) = forgetting::consolidate_then_forget(&s, a.day, &opts)?;
    // A later round that failed is a failure of the command, though the rounds before it
    // stand: exit 8 after saying what they did.
    let code = match &r.round_failed {
        Some(_) => Code::Failure,
        None => Code::Ok,
    };
    if a.json {
        print_json(&serde_json::json!({"consolidated": c, "forget": r}))?;
        if let Some(why) = &r.round_failed {
            errln!(
                "error: a later round of forgetting failed, and the rounds before it stand: {why}"
            );
        }
        return Ok(code);
    }
    if c.days + c.weeks > 0 {
        outln!(
            "consolidated {} into {} day and {} week summaries first",
            count(c.events_consolidated as u64, "event", "events"),
            c.days,
            c.weeks
        );
    }
    // The new deletion record lists what earlier forgettings deleted, and replaces them.
    let replaced = match r.replaced {
        0 => String::new(),
        1 => " and the earlier forgetting's record".to_string(),
        n => format!(" and {n} earlier forgettings' records"),
    };
    outln!(
        "forgot {} of {} evictable events{replaced}: {} -> {} events held (budget {}); the store's files {} -> {} bytes long, {} -> {} on disk",
        r.evicted,
        r.evictable,
        r.events_before,
        r.events_after,
        a.budget,
        r.bytes_before,
        r.bytes_after,
        r.allocated_before,
        r.allocated_after
    );
    if r.rounds > 1 {
        // A week summary may go only once the rest of its week has: a round frees those the
        // one before emptied.
        outln!(
            "in {} rounds: each frees the week summaries the one before left alone in their weeks",
            r.rounds
        );
    }
    if r.over_budget && r.round_failed.is_none() {
        let more = if r.rounds >= opts.max_rounds {
            " (it stopped at its last round: another forget may go further)"
        } else {
            ""
        };
        outln!(
            "still over budget: what is left is pinned, not yet summarised, the last support of a belief, what the working memory rests on, what withdraws something, bookkeeping, or a week summary beside such a remnant of its week{more}"
        );
    }
    if r.evicted > 0 {
        // The files grow first (the deletion record, the rewritten indexes): a new user read
        // "142410 -> 337112 bytes" after a forgetting as a fault.
        outln!(
            "the evicted records stay in the store's files until `loci compact`, which gives their bytes back"
        );
    }
    if let Some(why) = &r.round_failed {
        errln!(
            "error: a later round of forgetting failed, and the rounds before it stand (another forget may go further): {why}"
        );
    }
    Ok(code)
}

/// `wm`: show working memory, or change it by one event.
pub fn working_memory(a: WmArgs) -> Result<Code> {
    let text = a.text.join(" ");
    let needs_text = |what: &str| -> Result<String> {
        if loci::text::is_blank(&text) {
            fail!(Code::Usage, "wm {what} needs a text");
        }
        Ok(text.clone())
    };
    let action = a.action.as_deref().unwrap_or("show");
    if matches!(action, "show" | "pop-subgoal" | "clear") && !loci::text::is_blank(&text) {
        fail!(
            Code::Usage,
            "wm {action} takes no text, got {}",
            loci::error::quoted_excerpt(&text)
        );
    }
    let op = match action {
        "show" => None,
        "observe" => Some(WmOp::Observe {
            text: needs_text("observe")?,
        }),
        "intent" => Some(WmOp::Intent {
            text: needs_text("intent")?,
        }),
        "push-subgoal" => Some(WmOp::PushSubgoal {
            text: needs_text("push-subgoal")?,
        }),
        "pop-subgoal" => Some(WmOp::PopSubgoal),
        "add-threat" => Some(WmOp::AddThreat {
            text: needs_text("add-threat")?,
        }),
        "clear-threat" => Some(WmOp::ClearThreat {
            text: needs_text("clear-threat")?,
        }),
        "promise" => Some(WmOp::Promise {
            text: needs_text("promise")?,
        }),
        "keep-promise" => Some(WmOp::KeepPromise {
            text: needs_text("keep-promise")?,
        }),
        // A text left out is a slip, not a wish to clear the one item that survives every
        // clearing: clearing takes one given empty.
        "mainline" if a.text.is_empty() => fail!(
            Code::Usage,
            "wm mainline needs a text; `loci wm mainline \"\"` clears it"
        ),
        "mainline" => Some(WmOp::Mainline { text: text.clone() }),
        "capacity" => match text.trim().parse::<i128>() {
            Ok(n) if (1..=MAX_CAPACITY as i128).contains(&n) => {
                Some(WmOp::Capacity { n: n as usize })
            }
            Ok(n) => fail!(
                Code::BadInput,
                "wm capacity {n}: must be between 1 and {MAX_CAPACITY}"
            ),
            Err(_) => fail!(Code::Usage, "wm capacity needs a number, got {text:?}"),
        },
        _ => Some(WmOp::Clear),
    };
    let s = match &op {
        Some(op) => {
            let s = open(&a.store)?;
            s.change_working_memory(op, &a.actor, a.at)?;
            s
        }
        None => open_for_reading(&a.store)?,
    };
    let wm = s.working_memory();
    if a.json {
        print_json(&wm)?;
        return Ok(Code::Ok);
    }
    // Each text on its line, quoted where it would break the line or read as more items
    // (a threat holding "; ") or none ("-").
    let listed = |items: &[String], separator: &str| -> String {
        if items.is_empty() {
            return "-".into();
        }
        (items.iter())
            .map(|t| item_among(t, separator).into_owned())
            .collect::<Vec<_>>()
            .join(separator)
    };
    outln!("mainline  {}", listed(wm.mainline.as_slice(), ""));
    outln!("intent    {}", listed(wm.intent.as_slice(), ""));
    outln!("subgoals  {}", listed(&wm.subgoals, " > "));
    outln!("threats   {}", listed(&wm.threats, "; "));
    outln!("promises  {}", listed(&wm.promises, "; "));
    outln!(
        "recent    ({} of at most {})",
        wm.observations.len(),
        wm.capacity
    );
    for h in &wm.observations {
        outln!("  [event {} at t={}] {}", h.seq, h.ts, one_field(&h.text));
    }
    Ok(Code::Ok)
}

/// `emerge`: places and villages from sightings.
pub fn emerge(a: EmergeArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let r = loci::dynamics::places::emerge(&s, &loci::dynamics::places::EmergePolicy::default())?;
    if a.json {
        print_json(&r)?;
    } else {
        outln!(
            "{} candidates seen; {} new places and {} new villages{}",
            r.candidates,
            r.places,
            r.villages,
            if r.seq > 0 {
                format!(" (event {})", r.seq)
            } else {
                String::new()
            }
        );
    }
    Ok(Code::Ok)
}

/// `check`: the health check; exit 1 when anything is found.
pub fn check(a: CheckArgs) -> Result<Code> {
    let s = open_for_reading(&a.store)?;
    let mut opts = loci::dynamics::health::HealthOptions::default();
    opts.max_pinned = a.max_pinned;
    opts.max_hot_nodes = a.max_hot_nodes;
    opts.max_hot_edges = a.max_hot_edges;
    let r = loci::dynamics::health::check(&s, &opts)?;
    if a.json {
        print_json(&r)?;
    } else {
        for f in &r.findings {
            outln!("{}", f.describe());
        }
        if r.not_listed > 0 {
            outln!(
                "... and {} more not listed",
                count(r.not_listed as u64, "finding", "findings")
            );
        }
        let kinds = count(r.kinds_checked as u64, "event kind", "event kinds");
        outln!(
            "{}: checked {}, {}, {}, {}",
            if r.healthy() {
                "healthy".to_string()
            } else {
                count(
                    (r.findings.len() + r.not_listed) as u64,
                    "finding",
                    "findings",
                )
            },
            count(r.pins_checked as u64, "pin", "pins"),
            count(r.nodes_checked as u64, "entity", "entities"),
            match r.more_kinds {
                true => format!("{kinds} (the first, shorter first; the others not compared)"),
                false => kinds,
            },
            count(r.summaries_checked as u64, "summary", "summaries")
        );
    }
    Ok(if r.healthy() {
        Code::Ok
    } else {
        Code::Mismatch
    })
}

#[cfg(test)]
mod tests {
    use super::seq_list;

    #[test]
    fn a_report_lists_runs_of_numbers_as_ranges_and_at_most_twenty_runs() {
        assert_eq!(seq_list(&[3]), "3");
        assert_eq!(seq_list(&[3, 4, 5, 9, 11, 12]), "3-5, 9, 11-12");
        let thousands: Vec<u64> = (44_853..47_924).collect();
        assert_eq!(seq_list(&thousands), "44853-47923");
        let scattered: Vec<u64> = (0..25).map(|i| i * 10).collect();
        let line = seq_list(&scattered);
        assert!(line.starts_with("0, 10, 20"), "{line}");
        assert!(
            line.ends_with("190, and 5 more (`--json` lists them all)"),
            "{line}"
        );
        assert_eq!(
            seq_list(&[u64::MAX - 1, u64::MAX]),
            format!("{}-{}", u64::MAX - 1, u64::MAX)
        );
    }
}
