//! `loci journal`: agent journal entries and their promotion (`loci::journal`).

use anyhow::Result;

use loci::journal::{self, Status};

use super::args::{JournalCommand, JournalListArgs, JournalPromoteArgs};
use super::exit::{fail, Code};
use super::output::{count, outln, print_json};
use super::{open, open_for_reading};

pub fn journal(c: JournalCommand) -> Result<Code> {
    match c {
        JournalCommand::List(a) => list(a),
        JournalCommand::Promote(a) => promote(a),
    }
}

fn list(a: JournalListArgs) -> Result<Code> {
    let s = open_for_reading(&a.store)?;
    let wanted = a.status.as_deref().and_then(Status::parse);
    let mut entries: Vec<_> = journal::entries(&s)?
        .into_iter()
        .filter(|e| wanted.is_none_or(|w| e.status == w))
        .collect();
    entries.sort_by(|x, y| (x.first, &x.key).cmp(&(y.first, &y.key)));
    if a.json {
        print_json(&entries)?;
        return Ok(Code::Ok);
    }
    if entries.is_empty() {
        outln!("no journal entries");
    }
    for e in &entries {
        let tags = if e.tags.is_empty() {
            String::new()
        } else {
            format!(" #{}", e.tags.join(" #"))
        };
        // Forgetting evicted its events; their gist is in a summary.
        let written = match e.events.len() {
            0 => "events forgotten".to_string(),
            n => format!("x{n}"),
        };
        outln!(
            "{} [{}] {}: {}{} ({} session{}, {written}, t={})",
            e.key,
            e.status.name(),
            e.kind,
            e.text.replace('\n', " "),
            tags,
            e.sessions.len(),
            if e.sessions.len() == 1 { "" } else { "s" },
            e.last
        );
    }
    Ok(Code::Ok)
}

fn promote(a: JournalPromoteArgs) -> Result<Code> {
    let s = open(&a.store)?;
    let keys = match a.recurring {
        Some(n) => journal::recurring(&s, n)?,
        None => a.keys.clone(),
    };
    if keys.is_empty() {
        if a.json {
            print_json(&serde_json::json!({"promoted": [], "seq": null}))?;
        } else {
            outln!("nothing to promote: no consolidated entry was written in that many sessions");
        }
        return Ok(Code::Ok);
    }
    let done = match journal::promote(&s, &keys) {
        Ok(done) => done,
        Err(loci::Error::NotFound(what)) => fail!(
            Code::NotFound,
            "{what}: not a journal entry of this store (see `loci journal list`)"
        ),
        Err(e) => return Err(e.into()),
    };
    let seq = (done.commit.events > 0).then_some(done.commit.last_seq);
    if a.json {
        print_json(&serde_json::json!({
            "promoted": done.promoted,
            "already_promoted": done.already_promoted,
            "seq": seq,
        }))?;
        return Ok(Code::Ok);
    }
    let already = done.already_promoted.join(", ");
    match seq {
        Some(seq) => outln!(
            "promoted {} (event {seq}): {}",
            count(done.promoted.len() as u64, "entry", "entries"),
            done.promoted.join(", ")
        ),
        None => outln!("promoted 0 entries: already promoted: {already}"),
    }
    if seq.is_some() && !already.is_empty() {
        outln!("already promoted: {already}");
    }
    Ok(Code::Ok)
}
