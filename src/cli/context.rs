//! `loci context`: this turn's prompt context, or what a saved one held.

use anyhow::Result;

use loci::context::{self, ContextMode, ContextOptions};

use super::args::ContextArgs;
use super::exit::{fail, Code};
use super::output::{count, one_field, outln, print_json};
use super::{open, open_for_reading};

pub fn context(a: ContextArgs) -> Result<Code> {
    if let Some(turn) = a.turn {
        let s = open_for_reading(&a.store)?;
        let Some(snap) = context::snapshot(&s, turn)? else {
            fail!(Code::NotFound, "no saved context of turn {turn}");
        };
        if a.json {
            print_json(&snap)?;
        } else {
            // A context saved before these were recorded has none of them.
            let made = [
                snap.tokenizer.map(|t| format!(" ({t})")),
                snap.mode.map(|m| format!(", mode {}", m.name())),
            ]
            .into_iter()
            .flatten()
            .collect::<String>();
            outln!(
                "turn {} (event {}): {} of {} tokens{made}, prefix {}{}",
                snap.turn,
                snap.seq,
                snap.tokens,
                snap.budget,
                snap.prefix_digest,
                if snap.cover_held_over {
                    ", cover held over"
                } else {
                    ""
                }
            );
            if let Some(q) = &snap.question {
                outln!("question: {}", loci::text::one_line(q));
            }
            // A fact by what it was, beside the id it was shown by (given anew by any
            // deletion since); an event a deletion or forgetting took since, said so.
            for id in &snap.ids {
                let fact = snap.facts.iter().find(|f| &f.id == id).map(|f| &f.fact);
                let gone = id
                    .strip_prefix("event:")
                    .and_then(|seq| seq.parse::<u64>().ok())
                    .map(|seq| s.event(seq))
                    .transpose()?
                    .is_some_and(|ev| ev.is_none());
                match (fact, gone) {
                    (Some(f), _) => outln!(
                        "  {}  {} -{}-> {}",
                        one_field(id),
                        one_field(&f.from),
                        one_field(&f.relation),
                        one_field(&f.to)
                    ),
                    (None, true) => {
                        outln!("  {}  (gone since: deleted or forgotten)", one_field(id))
                    }
                    (None, false) => outln!("  {}", one_field(id)),
                }
            }
        }
        return Ok(Code::Ok);
    }
    let instructions = match &a.instructions {
        Some(path) => Some(read_instructions(path)?),
        None => None,
    };
    // Saving writes an event; assembling reads (and records what retrieval returned).
    let s = if a.save {
        open(&a.store)?
    } else {
        open_for_reading(&a.store)?
    };
    let mut opts = ContextOptions::with_budget(a.budget);
    opts.question = a.question;
    opts.mode = a.mode.parse::<ContextMode>()?;
    opts.instructions = instructions;
    opts.tokenizer = a.tokenizer;
    opts.save = a.save;
    opts.session = a.session;
    opts.record_usage = !a.no_record;
    let c = context::build_context(&s, &opts)?;
    if a.json {
        print_json(&c)?;
    } else {
        outln!("{}", c.text.trim_end_matches('\n'));
        super::output::statusln!(
            "{} of {} tokens ({}), prefix {} tokens; {} left out{}",
            c.tokens,
            c.budget,
            c.tokenizer,
            c.prefix_tokens,
            count(
                (c.left_out.len() + c.left_out_unlisted) as u64,
                "line",
                "lines"
            ),
            c.turn
                .map(|t| format!("; saved as turn {t}"))
                .unwrap_or_default()
        );
    }
    Ok(Code::Ok)
}

/// The instructions file's text; a line of it that is the context's boundary is refused here,
/// naming the file and the line (the library, given the text, can name only the line).
fn read_instructions(path: &std::path::Path) -> Result<String> {
    let text = super::read_flag_file("--instructions", path)?;
    if let Some(line) = context::boundary_line(&text) {
        fail!(
            Code::BadInput,
            "--instructions {}:{line}: this line {}",
            loci::error::shown_path(path),
            context::BOUNDARY_LINE_REFUSED
        );
    }
    Ok(text)
}
