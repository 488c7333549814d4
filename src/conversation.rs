//! Conversations as memory: multi-session chats where each turn is an event, without an LLM.
//!
//! A session (`--format conversation`, one per line) is `{"conversation": id, "session": n,
//! "time": "1:56 pm on 8 May, 2023", "turns": [{"speaker", "dia_id", "text"}, ...]}` (the
//! LoCoMo layout). Each turn becomes a `TURN` event by `person:{speaker}` at the session's time
//! (world time in minutes since 1970, plus the turn's index), asserting a `Passage` node keyed
//! `{conversation}:{dia_id}` whose title is the speaker and whose text is what was said, so
//! the passage pipeline applies: `extract` links the people, places, things and years it names,
//! and retrieval ranks turns by graph and text. Relative dates ("yesterday", "last Saturday",
//! "two weeks ago", "last month") are resolved against the session time and written into the
//! turn's text as `[date: 6 May 2023]`, so a time question reaches the right turns.

use serde::Deserialize;

use crate::model::{labels, Assertion, EdgeUpsert, EventDraft, NodeUpsert, Props, Value};

/// Kind of a conversation turn.
pub const TURN: &str = "TURN";

/// Relation from a turn to the turn before it in its session: a reply is usually about what it
/// replies to, so expansion from a turn that matches a question reaches the answer next to it.
pub const FOLLOWS: &str = "FOLLOWS";

/// Confidence of a [`FOLLOWS`] edge: as sure as a mention (the order of turns is observed).
pub const FOLLOWS_CONFIDENCE: f32 = 1.0;

/// Salience of a turn that says something.
pub const TURN_SALIENCE: f32 = 0.5;

/// Salience of a turn that ends by asking: it hands the floor over, so what it says is mostly a
/// reaction to the turn before, and the answer is in the turn after (reached by [`FOLLOWS`]).
/// On LoCoMo dev, 11% of evidence turns end with a question mark against 26% of all turns.
pub const ASKING_TURN_SALIENCE: f32 = 0.2;

/// One session of a conversation.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    pub conversation: String,
    pub session: u32,
    pub time: String,
    pub turns: Vec<Turn>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Turn {
    pub speaker: String,
    pub dia_id: String,
    pub text: String,
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day number.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The day `months` calendar months before `day`, on the same day of the month, or the
/// month's last where it is shorter (a month before 31 March is 28 February): months of 30
/// days had made "last month" on 31 March the first of March, and "last year" on 31
/// December of a leap year its first of January.
fn months_back(day: i64, months: i64) -> i64 {
    let (y, m, d) = civil_from_days(day);
    let month = y * 12 + (m - 1) - months;
    let (y, m) = (month.div_euclid(12), month.rem_euclid(12) + 1);
    let next = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    let length = days_from_civil(next.0, next.1, 1) - days_from_civil(y, m, 1);
    days_from_civil(y, m, d.min(length))
}

fn date_text(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    let month = MONTHS[(m - 1).clamp(0, 11) as usize];
    let mut cap = month.to_string();
    cap[..1].make_ascii_uppercase();
    format!("{d} {cap} {y}")
}

/// Minutes since 1970 of a LoCoMo session time ("1:56 pm on 8 May, 2023"), or `None`.
pub fn parse_session_time(text: &str) -> Option<i64> {
    let lower = text.to_lowercase().replace(',', " ");
    let words: Vec<&str> = lower.split_whitespace().collect();
    let on = words.iter().position(|w| *w == "on")?;
    // Clock, meridiem (or none), "on", day, month, year: and no other word, which had been
    // passed over ("..., 2023, UTC").
    if !(on == 1 || on == 2) || words.len() != on + 4 {
        return None;
    }
    let (clock, meridiem) = (words.first()?, words.get(1).copied().unwrap_or(""));
    // "am" or "pm" (or "a.m.", "p.m."), or straight "on" for a 24-hour clock: any other word
    // there had been passed over, and a "p.m." time read 12 hours early.
    let meridiem = match meridiem {
        "am" | "a.m." => "am",
        "pm" | "p.m." => "pm",
        "on" => "",
        _ => return None,
    };
    let (h, m) = clock.split_once(':')?;
    let (mut h, m): (i64, i64) = (digits(h)?, digits(m)?);
    if !(0..=23).contains(&h) || !(0..=59).contains(&m) {
        return None;
    }
    match meridiem {
        // A 12-hour clock reads 1 to 12.
        "am" | "pm" if !(1..=12).contains(&h) => return None,
        "pm" if h < 12 => h += 12,
        "am" if h == 12 => h = 0,
        _ => {}
    }
    let day = digits(words.get(on + 1)?)?;
    let month_word = *words.get(on + 2)?;
    let month = MONTHS.iter().position(|x| *x == month_word)? as i64 + 1;
    let year = digits(words.get(on + 3)?)?;
    if !(1..=31).contains(&day) || !(1..=9999).contains(&year) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    // A day the month does not have (31 February) would count on into the next month.
    if civil_from_days(days) != (year, month, day) {
        return None;
    }
    Some(days * 1440 + h * 60 + m)
}

/// A number written in digits alone (`str::parse` takes a sign too), of at most 9 of them.
fn digits(w: &str) -> Option<i64> {
    if w.is_empty() || w.len() > 9 || !w.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    w.parse().ok()
}

fn number_word(w: &str) -> Option<i64> {
    let words = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    match w {
        "a" | "an" => Some(1),
        "few" | "couple" => Some(2),
        _ => w
            .parse()
            .ok()
            .or_else(|| words.iter().position(|x| *x == w).map(|i| i as i64 + 1)),
    }
}

/// The dates that relative expressions in `text` name, against the session day `today` (days
/// since 1970): "yesterday", "the day before yesterday", "last week(end)", "last month",
/// "last year", `"last <weekday>"`, "N days/weeks/months/years ago". Months and years are calendar ones ([`months_back`]).
pub fn resolve_relative_dates(text: &str, today: i64) -> Vec<String> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = Vec::new();
    // Days already named, so a long text naming many is read in one pass, not a pass over
    // the dates per word (a 4.6 MB turn took 7 s).
    let mut seen = std::collections::HashSet::new();
    let mut add = |day: i64| {
        // No calendar date before year 1 (it had been written as "31 December 0").
        if civil_from_days(day).0 >= 1 && seen.insert(day) {
            out.push(date_text(day));
        }
    };
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).copied().unwrap_or("");
        match *w {
            "yesterday" if i >= 2 && words[i - 2..i] == ["day", "before"] => add(today - 2),
            "yesterday" => add(today - 1),
            "today" | "tonight" => add(today),
            "last" => match next {
                "week" => add(today - 7),
                "weekend" => {
                    // The Saturday before today: a week back when today is a Saturday (it was
                    // the day before, a Friday).
                    let weekday = (today + 3).rem_euclid(7); // 0 = Monday
                    let back = (weekday - 5).rem_euclid(7);
                    add(today - if back == 0 { 7 } else { back });
                }
                "month" => add(months_back(today, 1)),
                "year" => add(months_back(today, 12)),
                day => {
                    if let Some(target) = WEEKDAYS.iter().position(|d| *d == day) {
                        let weekday = (today + 3).rem_euclid(7);
                        let back = (weekday - target as i64).rem_euclid(7);
                        add(today - if back == 0 { 7 } else { back });
                    }
                }
            },
            "ago" if i >= 2 => {
                if let Some(n) = number_word(words[i - 2]) {
                    let unit = words[i - 1].trim_end_matches('s');
                    // Beyond a few thousand years ago is not a date anyone means (and would
                    // overflow the calendar's arithmetic).
                    if (0..=10_000).contains(&n) {
                        match unit {
                            "day" => add(today - n),
                            "week" => add(today - n * 7),
                            "month" => add(months_back(today, n)),
                            "year" => add(months_back(today, n * 12)),
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The field of a session a [`Refusal`] is about; each reader names it in its own layout (a
/// `--format conversation` line's fields, or a LoCoMo sample's keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SessionField {
    Time,
    Conversation,
    /// A turn's field, by the turn's position in its session.
    Turn(usize, &'static str),
}

/// Why a session cannot be taken in.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub field: SessionField,
    pub message: String,
}

/// The checks a session passes before its turns become events, the same for an ingested file
/// and a benchmark's data: a time that reads as one (taken as 1970, an unread time would put
/// the turns before everything else), a conversation and speakers that say something, a
/// speaker that makes an actor key, and turn ids that name one turn each.
#[derive(Default)]
pub(crate) struct SessionChecks {
    /// Where each turn's passage key was given, and what the turn was: another turn under a
    /// used key would make one passage of two, while the same turn again (a session repeated
    /// word for word) is the input's own repeat, applied once.
    turns: std::collections::HashMap<String, (String, String)>,
}

impl SessionChecks {
    /// Checks `s`, found at `at` ("line 3", "session_2"), against itself and the sessions
    /// checked before it.
    pub fn check(&mut self, s: &Session, at: &str) -> Result<(), Refusal> {
        let refuse = |field, message: String| Err(Refusal { field, message });
        if parse_session_time(&s.time).is_none() {
            return refuse(
                SessionField::Time,
                format!(
                    "{:?} is not a session time like \"1:56 pm on 8 May, 2023\"",
                    s.time
                ),
            );
        }
        if crate::text::is_blank(&s.conversation) {
            return refuse(SessionField::Conversation, "is empty".into());
        }
        for (i, t) in s.turns.iter().enumerate() {
            if crate::text::is_blank(&t.speaker) {
                return refuse(SessionField::Turn(i, "speaker"), "is empty".into());
            }
            // The turn is written by `person:{speaker}`, an actor of at most MAX_KEY_BYTES:
            // refused as the speaker, which the input has, not the actor, which it has not.
            let most = crate::model::MAX_KEY_BYTES - "person:".len();
            if t.speaker.len() > most {
                return refuse(
                    SessionField::Turn(i, "speaker"),
                    format!(
                        "{} bytes long; at most {most} bytes are allowed",
                        t.speaker.len()
                    ),
                );
            }
            if crate::text::is_blank(&t.dia_id) {
                return refuse(SessionField::Turn(i, "dia_id"), "is empty".into());
            }
            let key = format!("{}:{}", s.conversation, t.dia_id);
            // And the turn before it, which its FOLLOWS edge names.
            let before = i
                .checked_sub(1)
                .and_then(|p| s.turns.get(p))
                .map_or("", |p| p.dia_id.as_str());
            let turn = format!(
                "{}\0{}\0{}\0{}\0{i}\0{before}",
                t.speaker, t.text, s.time, s.session
            );
            let (first, was) = self
                .turns
                .entry(key)
                .or_insert_with(|| (at.to_string(), turn.clone()));
            if *was != turn {
                return refuse(
                    SessionField::Turn(i, "dia_id"),
                    format!(
                        "{} is already a turn of conversation {} ({first}): each turn needs its own id",
                        crate::error::quoted_excerpt(&t.dia_id),
                        crate::error::quoted_excerpt(&s.conversation)
                    ),
                );
            }
        }
        Ok(())
    }
}

/// The passage a conversation's turn event asserts: its key, the speaker and what was said
/// (the event's payload holds only the turn's id and session).
pub(crate) fn turn_passage(ev: &crate::model::Event) -> Option<(&str, &str, &str)> {
    if ev.kind != TURN {
        return None;
    }
    ev.assertions.iter().find_map(|a| match a {
        Assertion::UpsertNode(up) if up.label.as_deref() == Some(labels::PASSAGE) => up
            .props
            .get("text")
            .and_then(Value::as_str)
            .map(|said| (up.key.as_str(), up.name.as_deref().unwrap_or(""), said)),
        _ => None,
    })
}

/// The salience of a turn: lower when it ends by asking (see [`ASKING_TURN_SALIENCE`]).
fn turn_salience(text: &str) -> f32 {
    if text.trim_end().ends_with('?') {
        ASKING_TURN_SALIENCE
    } else {
        TURN_SALIENCE
    }
}

/// The events of a session: one `TURN` per turn (see the module documentation). A session time
/// that cannot be read counts as time 0 (the turns keep their order); readers refuse it before
/// this ([`SessionChecks`]).
pub fn session_events(s: &Session) -> Vec<EventDraft> {
    let start = parse_session_time(&s.time).unwrap_or(0);
    let today = start.div_euclid(1440);
    s.turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut text = t.text.clone();
            let dates = resolve_relative_dates(&t.text, today);
            if !dates.is_empty() {
                text.push_str(&format!(" [date: {}]", dates.join("; ")));
            }
            let mut d = EventDraft::new(start + i as i64, format!("person:{}", t.speaker), TURN);
            d.payload = Value::Map(Props::from([
                ("dia_id".to_string(), Value::from(t.dia_id.as_str())),
                ("session".to_string(), Value::Int(s.session as i64)),
            ]));
            let key = format!("{}:{}", s.conversation, t.dia_id);
            // The same turn again (the file ingested twice) is applied once; a turn whose text
            // changed is a new event, as an edited journal entry is.
            d.idempotency_key = Some(format!(
                "turn:{key}:{:016x}",
                crate::codec::fnv1a(t.text.as_bytes())
            ));
            d.evidence = vec![key.clone()];
            let follows = i.checked_sub(1).map(|p| {
                Assertion::UpsertEdge(EdgeUpsert {
                    from: key.clone(),
                    relation: FOLLOWS.into(),
                    to: format!("{}:{}", s.conversation, s.turns[p].dia_id),
                    confidence: Some(FOLLOWS_CONFIDENCE),
                    ..Default::default()
                })
            });
            d.assertions = vec![Assertion::UpsertNode(NodeUpsert {
                key,
                label: Some(labels::PASSAGE.into()),
                name: Some(t.speaker.clone()),
                salience: Some(turn_salience(&t.text)),
                props: Props::from([
                    ("text".to_string(), Value::Str(text)),
                    ("time".to_string(), Value::from(s.time.as_str())),
                ]),
                ..Default::default()
            })];
            d.assertions.extend(follows);
            d
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// helper-97 (session 45): months and years were counted as 30 and 365 days, so "last
    /// year" said on 31 December 2024 was 1 January 2024, and "last month" on 31 March 2023
    /// was 1 March 2023.
    #[test]
    fn months_and_years_back_are_calendar_months_and_years() {
        let on = |date: &str| parse_session_time(date).unwrap().div_euclid(1440);
        let at = on("1:00 pm on 31 December, 2024");
        assert_eq!(
            resolve_relative_dates("last year I moved", at),
            ["31 December 2023"]
        );
        let at = on("1:00 pm on 31 March, 2023");
        assert_eq!(
            resolve_relative_dates("last month was rough", at),
            ["28 February 2023"]
        );
        assert_eq!(
            resolve_relative_dates("two months ago", at),
            ["31 January 2023"]
        );
        let at = on("1:00 pm on 29 February, 2024");
        assert_eq!(
            resolve_relative_dates("a year ago", at),
            ["28 February 2023"]
        );
        assert_eq!(
            resolve_relative_dates("4 years ago", at),
            ["29 February 2020"]
        );
        let at = on("1:00 pm on 15 January, 2023");
        assert_eq!(
            resolve_relative_dates("last month", at),
            ["15 December 2022"]
        );
        // Far back is bounded as before, and the earliest date is year 1.
        assert!(resolve_relative_dates("10000 years ago", at).is_empty());
    }

    /// "The day before yesterday" is two days back, not yesterday (the helper-110 probe: "I
    /// saw Bob the day before yesterday" on 31 March was dated 30 March).
    #[test]
    fn the_day_before_yesterday_is_two_days_back() {
        let day = parse_session_time("10:00 am on 31 March, 2023")
            .unwrap()
            .div_euclid(1440);
        assert_eq!(
            resolve_relative_dates("I saw Bob the day before yesterday.", day),
            ["29 March 2023"]
        );
        assert_eq!(
            resolve_relative_dates("Day-before-yesterday, and yesterday too", day),
            ["29 March 2023", "30 March 2023"]
        );
        assert_eq!(
            resolve_relative_dates("the day before yesterday's", day),
            ["29 March 2023"]
        );
    }

    #[test]
    fn session_times_and_relative_dates_resolve() {
        let t = parse_session_time("1:56 pm on 8 May, 2023").unwrap();
        let day = t.div_euclid(1440);
        assert_eq!(date_text(day), "8 May 2023");
        assert_eq!(t.rem_euclid(1440), 13 * 60 + 56);
        assert_eq!(
            parse_session_time("12:05 am on 1 January, 2024").unwrap() % 1440,
            5
        );
        assert!(parse_session_time("sometime in spring").is_none());
        // Found by the session 24 probe: a day the month does not have was taken as a day of
        // the next month, and an hour past 12 with "pm" as itself.
        for impossible in [
            "1:56 pm on 31 February, 2023",
            "1:56 pm on 29 February, 2023",
            "1:56 pm on 31 April, 2023",
            "13:56 pm on 8 May, 2023",
            "0:30 am on 8 May, 2023",
        ] {
            assert!(parse_session_time(impossible).is_none(), "{impossible}");
        }
        // Nor an unknown word where "am" or "pm" goes, which had been ignored and the clock
        // read as 24-hour (session 24 probe), nor a signed number.
        for odd in [
            "1:56 xm on 8 May, 2023",
            "1:56 PST on 8 May, 2023",
            "+1:56 pm on 8 May, 2023",
            "1:56 pm on +8 May, 2023",
        ] {
            assert!(parse_session_time(odd).is_none(), "{odd}");
        }
        assert_eq!(
            parse_session_time("1:56 p.m. on 8 May, 2023"),
            parse_session_time("1:56 pm on 8 May, 2023")
        );
        assert!(parse_session_time("1:56 pm on 29 February, 2024").is_some());
        assert!(parse_session_time("13:56 on 8 May, 2023").is_some());
        // 8 May 2023 was a Monday.
        assert_eq!(
            resolve_relative_dates("I went there yesterday", day),
            ["7 May 2023"]
        );
        assert_eq!(
            resolve_relative_dates("last Saturday was fun", day),
            ["6 May 2023"]
        );
        assert_eq!(
            resolve_relative_dates("two weeks ago", day),
            ["24 April 2023"]
        );
        assert_eq!(resolve_relative_dates("3 days ago", day), ["5 May 2023"]);
        assert_eq!(resolve_relative_dates("last weekend", day), ["6 May 2023"]);
        assert!(resolve_relative_dates("nothing relative here", day).is_empty());
        // Absurd counts are not dates (and never overflow).
        assert!(resolve_relative_dates("9223372036854775807 years ago", day).is_empty());
        assert!(resolve_relative_dates("99999 days ago", day).is_empty());
        for d in [-1000, 0, 19_000, 800_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
