//! Working memory: what the agent holds in mind right now, as events.
//!
//! A bounded ring of the most recent observations (capacity 16 unless set), a *mainline* (the
//! one thing that survives every clearing: the agent's standing purpose), the current intent, a
//! stack of subgoals, the active threats and the pending promises. Every change is an event of
//! kind [`WM`] whose payload says what changed (`{"op": "intent", "text": ...}`), so the working
//! memory is derived from the log like everything else and replay reproduces it.
//!
//! It is cleared, all but the mainline, when the agent sleeps (a `SLEEP` event) or after an
//! idle period ([`IDLE`] of world time without a working-memory event): what it held is in the
//! log already, as the `WM` events themselves, so consolidation summarises it with its day.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::dynamics::decay::DAY;
use crate::error::{quoted_excerpt, Error, Result};
use crate::model::{kinds, Event, EventDraft, Value};

/// Kind of a working-memory event.
pub const WM: &str = "WM";
/// World time without a working-memory event after which it is cleared (a quarter day).
pub const IDLE: i64 = DAY as i64 / 4;
/// Observations the ring holds unless a `capacity` op says otherwise.
pub const DEFAULT_CAPACITY: usize = 16;
/// The largest capacity a `capacity` op may set.
pub const MAX_CAPACITY: usize = 1024;
/// Longest text an op may carry: a note held in mind, not a document (that is an event of its
/// own, or a journal entry), and every context assembled while it is held carries it.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
/// Most subgoals, threats or promises a change may leave held. Each is in every context while
/// it is held, and a threat or promise is matched by its whole text.
pub const MAX_HELD: usize = 256;

/// One change to working memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WmOp {
    Observe {
        text: String,
    },
    Intent {
        text: String,
    },
    // Each taken as the CLI spells it too (`loci wm push-subgoal`).
    #[serde(alias = "push-subgoal")]
    PushSubgoal {
        text: String,
    },
    #[serde(alias = "pop-subgoal")]
    PopSubgoal,
    #[serde(alias = "add-threat")]
    AddThreat {
        text: String,
    },
    #[serde(alias = "clear-threat")]
    ClearThreat {
        text: String,
    },
    Promise {
        text: String,
    },
    #[serde(alias = "keep-promise")]
    KeepPromise {
        text: String,
    },
    Mainline {
        text: String,
    },
    Capacity {
        n: usize,
    },
    Clear,
}

impl WmOp {
    /// The event that makes this change at world time `ts`.
    pub fn draft(&self, ts: i64, actor: &str) -> EventDraft {
        let mut d = EventDraft::new(ts, actor, WM);
        d.payload = serde_json::to_value(self)
            .ok()
            .and_then(|v| serde_json::from_value::<Value>(v).ok())
            .unwrap_or_default();
        d
    }

    /// The change an event makes, if it is a well-formed working-memory event.
    pub fn of_event(ev: &Event) -> Option<WmOp> {
        if ev.kind != WM {
            return None;
        }
        let json = serde_json::to_value(&ev.payload).ok()?;
        serde_json::from_value(json).ok()
    }

    /// The text the op carries, if it takes one.
    fn text(&self) -> Option<&str> {
        match self {
            WmOp::Observe { text }
            | WmOp::Intent { text }
            | WmOp::PushSubgoal { text }
            | WmOp::AddThreat { text }
            | WmOp::ClearThreat { text }
            | WmOp::Promise { text }
            | WmOp::KeepPromise { text }
            | WmOp::Mainline { text } => Some(text),
            WmOp::PopSubgoal | WmOp::Capacity { .. } | WmOp::Clear => None,
        }
    }

    /// The op with its text as it is held: [`crate::text::tidy`], so that a threat added as
    /// `"creeper "` is cleared as `creeper`.
    pub fn tidied(&self) -> WmOp {
        let mut op = self.clone();
        match &mut op {
            WmOp::Observe { text }
            | WmOp::Intent { text }
            | WmOp::PushSubgoal { text }
            | WmOp::AddThreat { text }
            | WmOp::ClearThreat { text }
            | WmOp::Promise { text }
            | WmOp::KeepPromise { text }
            | WmOp::Mainline { text } => *text = crate::text::tidy(text),
            WmOp::PopSubgoal | WmOp::Capacity { .. } | WmOp::Clear => {}
        }
        op
    }

    /// Checks the op before it is written, on its own ([`WorkingMemory::check_change`] checks
    /// it against what is held).
    pub fn validate(&self) -> Result<()> {
        if let WmOp::Capacity { n } = self {
            if *n == 0 || *n > MAX_CAPACITY {
                return Err(Error::InvalidArgument {
                    name: "capacity".into(),
                    message: format!("{n}: must be between 1 and {MAX_CAPACITY}"),
                });
            }
        }
        let Some(text) = self.text() else {
            return Ok(());
        };
        if text.len() > MAX_TEXT_BYTES {
            return Err(Error::InvalidArgument {
                name: "text".into(),
                message: format!(
                    "{} bytes: working memory holds notes of at most {MAX_TEXT_BYTES} bytes (ingest a longer text as an event)",
                    text.len()
                ),
            });
        }
        // An empty mainline clears it; any other op of no text would hold or match nothing.
        if crate::text::is_blank(text) && !matches!(self, WmOp::Mainline { .. }) {
            return Err(Error::InvalidArgument {
                name: "text".into(),
                message: "empty: this change needs a text".into(),
            });
        }
        Ok(())
    }
}

/// An observation held in the ring.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub seq: u64,
    pub ts: i64,
    pub text: String,
}

/// The working memory as derived from the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkingMemory {
    pub capacity: usize,
    pub observations: VecDeque<Held>,
    pub mainline: Option<String>,
    pub intent: Option<String>,
    pub subgoals: Vec<String>,
    pub threats: Vec<String>,
    pub promises: Vec<String>,
    /// World time of the last working-memory event (for the idle rule).
    pub last_active: Option<i64>,
}

impl Default for WorkingMemory {
    fn default() -> Self {
        WorkingMemory {
            capacity: DEFAULT_CAPACITY,
            observations: VecDeque::new(),
            mainline: None,
            intent: None,
            subgoals: Vec::new(),
            threats: Vec::new(),
            promises: Vec::new(),
            last_active: None,
        }
    }
}

impl WorkingMemory {
    fn clear_but_mainline(&mut self) {
        self.observations.clear();
        self.intent = None;
        self.subgoals.clear();
        self.threats.clear();
        self.promises.clear();
    }

    fn is_clear(&self) -> bool {
        self.observations.is_empty()
            && self.intent.is_none()
            && self.subgoals.is_empty()
            && self.threats.is_empty()
            && self.promises.is_empty()
    }

    /// Whether an event at world time `ts` comes after an idle period, and so finds the memory
    /// cleared.
    fn idle_at(&self, ts: i64) -> bool {
        self.last_active
            .is_some_and(|t| ts.saturating_sub(t) > IDLE)
    }

    /// Refuses a change at world time `ts` that would find nothing to change, or hold more than
    /// [`MAX_HELD`]: a pop of an empty stack, a threat cleared or a promise kept that is not
    /// held (a misspelt one would otherwise pass unnoticed, and the agent believe it gone), a
    /// subgoal, threat or promise past the bound. Judged on the memory as the change would find
    /// it, after an idle period's clearing. The caller writes nothing when this refuses.
    ///
    /// [`WorkingMemory::apply`] does not enforce it: a `WM` event in an ingested log is applied
    /// as it was written, as the log is the source of truth.
    pub fn check_change(&self, op: &WmOp, ts: i64) -> Result<()> {
        let (subgoals, threats, promises): (&[String], &[String], &[String]) = if self.idle_at(ts) {
            (&[], &[], &[])
        } else {
            (&self.subgoals, &self.threats, &self.promises)
        };
        match op {
            WmOp::PopSubgoal if subgoals.is_empty() => Err(Error::NotFound(
                "no subgoal to pop: the stack is empty".into(),
            )),
            WmOp::PushSubgoal { .. } if subgoals.len() >= MAX_HELD => Err(full("subgoals", "pop")),
            WmOp::ClearThreat { text } => find_held("threat", text, threats),
            WmOp::KeepPromise { text } => find_held("promise", text, promises),
            WmOp::AddThreat { text } if threats.len() >= MAX_HELD && !threats.contains(text) => {
                Err(full("threats", "clear"))
            }
            WmOp::Promise { text } if promises.len() >= MAX_HELD && !promises.contains(text) => {
                Err(full("promises", "keep"))
            }
            _ => Ok(()),
        }
    }

    /// Applies one event of the log (any kind: sleep and idleness clear it).
    pub fn apply(&mut self, ev: &Event) {
        if (self.idle_at(ev.ts) || ev.kind == kinds::SLEEP) && !self.is_clear() {
            self.clear_but_mainline();
        }
        let Some(op) = WmOp::of_event(ev) else {
            return;
        };
        self.last_active = Some(ev.ts);
        match op {
            WmOp::Observe { text } => {
                self.observations.push_back(Held {
                    seq: ev.seq,
                    ts: ev.ts,
                    text,
                });
                while self.observations.len() > self.capacity {
                    self.observations.pop_front();
                }
            }
            WmOp::Intent { text } => self.intent = Some(text),
            WmOp::PushSubgoal { text } => self.subgoals.push(text),
            WmOp::PopSubgoal => {
                self.subgoals.pop();
            }
            WmOp::AddThreat { text } => {
                if !self.threats.contains(&text) {
                    self.threats.push(text);
                }
            }
            WmOp::ClearThreat { text } => self.threats.retain(|t| *t != text),
            WmOp::Promise { text } => {
                if !self.promises.contains(&text) {
                    self.promises.push(text);
                }
            }
            WmOp::KeepPromise { text } => self.promises.retain(|p| *p != text),
            WmOp::Mainline { text } => {
                self.mainline = (!text.is_empty()).then_some(text);
            }
            WmOp::Capacity { n } => {
                self.capacity = n.clamp(1, MAX_CAPACITY);
                while self.observations.len() > self.capacity {
                    self.observations.pop_front();
                }
            }
            WmOp::Clear => self.clear_but_mainline(),
        }
    }
}

/// The events whose loss would change the working memory they fold into, found by seeing
/// every live event in log order ([`RestsOn::see`]): every `WM` event since the last clearing
/// (a `SLEEP`, a `clear`, or an event after an idle period), that clearing itself when it is a
/// `SLEEP` or a `clear` that cleared a change, the latest `mainline` and `capacity` changes,
/// which outlive every clearing, and the latest `WM` event (the last activity). Forgetting
/// keeps them. What came before the last clearing is cleared whatever it held: without an
/// event of it, an idle period is only longer, and a clearing still clears.
#[derive(Debug, Default)]
pub(crate) struct RestsOn {
    last_active: Option<i64>,
    since_clearing: Vec<u64>,
    clearing: Option<u64>,
    mainline: Option<u64>,
    capacity: Option<u64>,
    /// The latest `WM` event: its time is the memory's last activity.
    latest: Option<u64>,
}

impl RestsOn {
    /// Takes the next live event of the log.
    pub(crate) fn see(&mut self, ev: &Event) {
        let op = WmOp::of_event(ev);
        let idle = self
            .last_active
            .is_some_and(|t| ev.ts.saturating_sub(t) > IDLE);
        let clears = ev.kind == kinds::SLEEP || matches!(op, Some(WmOp::Clear));
        // A clearing of nothing (no change since the one before) changes nothing without it
        // either, and leaves the one before as the clearing (it had taken its place, and then
        // neither was kept).
        if (idle || clears) && !self.since_clearing.is_empty() {
            self.since_clearing.clear();
            self.clearing = clears.then_some(ev.seq);
        }
        let Some(op) = op else { return };
        self.last_active = Some(ev.ts);
        self.latest = Some(ev.seq);
        match op {
            WmOp::Mainline { .. } => self.mainline = Some(ev.seq),
            WmOp::Capacity { .. } => self.capacity = Some(ev.seq),
            WmOp::Clear => {}
            _ => self.since_clearing.push(ev.seq),
        }
    }

    /// The events seen that the working memory rests on.
    pub(crate) fn events(self) -> Vec<u64> {
        let mut out = self.since_clearing;
        out.extend(self.clearing);
        out.extend(self.mainline);
        out.extend(self.capacity);
        out.extend(self.latest);
        out
    }
}

/// The refusal of one more `what` past [`MAX_HELD`], saying how to make room.
fn full(what: &str, undo: &str) -> Error {
    Error::InvalidArgument {
        name: "op".into(),
        message: format!(
            "working memory holds {MAX_HELD} {what}, the most it may; {undo} one first"
        ),
    }
}

/// Most held texts a refusal names.
const HELD_NAMED: usize = 5;

/// `text` among the `held` threats or promises, or an error that names what is held, so that
/// a misspelling shows beside what it missed.
fn find_held(what: &str, text: &str, held: &[String]) -> Result<()> {
    if held.iter().any(|h| h == text) {
        return Ok(());
    }
    let mut named: Vec<String> = held
        .iter()
        .take(HELD_NAMED)
        .map(|h| quoted_excerpt(h))
        .collect();
    if held.len() > HELD_NAMED {
        named.push(format!("and {} more", held.len() - HELD_NAMED));
    }
    let held = if named.is_empty() {
        "none is held".to_string()
    } else {
        format!("held: {}", named.join(", "))
    };
    Err(Error::NotFound(format!(
        "{what} {} in working memory ({held})",
        quoted_excerpt(text)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, ts: i64, op: WmOp) -> Event {
        Event::from_draft(seq, 0, op.draft(ts, "bot"))
    }

    #[test]
    fn the_ring_is_bounded_and_sleep_clears_all_but_the_mainline() {
        let mut wm = WorkingMemory::default();
        wm.apply(&ev(1, 0, WmOp::Capacity { n: 2 }));
        wm.apply(&ev(
            2,
            1,
            WmOp::Mainline {
                text: "beat the dragon".into(),
            },
        ));
        for (i, t) in ["a", "b", "c"].iter().enumerate() {
            wm.apply(&ev(
                3 + i as u64,
                2,
                WmOp::Observe {
                    text: t.to_string(),
                },
            ));
        }
        let texts: Vec<&str> = wm.observations.iter().map(|h| h.text.as_str()).collect();
        assert_eq!(texts, ["b", "c"]);
        wm.apply(&ev(
            6,
            3,
            WmOp::PushSubgoal {
                text: "find iron".into(),
            },
        ));
        wm.apply(&ev(
            7,
            3,
            WmOp::PushSubgoal {
                text: "mine".into(),
            },
        ));
        wm.apply(&ev(8, 3, WmOp::PopSubgoal));
        assert_eq!(wm.subgoals, ["find iron"]);
        let sleep = Event::from_draft(9, 0, EventDraft::new(4, "bot", kinds::SLEEP));
        wm.apply(&sleep);
        assert!(wm.observations.is_empty() && wm.subgoals.is_empty());
        assert_eq!(wm.mainline.as_deref(), Some("beat the dragon"));
        assert_eq!(wm.capacity, 2);
    }

    #[test]
    fn an_idle_period_clears_it() {
        let mut wm = WorkingMemory::default();
        wm.apply(&ev(
            1,
            0,
            WmOp::AddThreat {
                text: "creeper".into(),
            },
        ));
        let later = Event::from_draft(2, 0, EventDraft::new(IDLE + 1, "bot", "OBSERVATION"));
        wm.apply(&later);
        assert!(wm.threats.is_empty());
    }

    #[test]
    fn a_change_that_finds_nothing_or_overfills_is_refused() {
        let mut wm = WorkingMemory::default();
        let text = |t: &str| t.to_string();
        assert!(wm.check_change(&WmOp::PopSubgoal, 0).is_err());
        wm.apply(&ev(
            1,
            0,
            WmOp::AddThreat {
                text: text("creeper"),
            },
        ));
        wm.apply(&ev(2, 0, WmOp::PushSubgoal { text: text("mine") }));
        let clear = |t: &str| WmOp::ClearThreat { text: text(t) };
        assert!(wm.check_change(&clear("creeper"), 0).is_ok());
        let missed = wm
            .check_change(&clear("creper"), 0)
            .unwrap_err()
            .to_string();
        assert!(missed.contains("\"creper\"") && missed.contains("held: \"creeper\""));
        assert!(wm.check_change(&WmOp::PopSubgoal, 0).is_ok());
        let keep = WmOp::KeepPromise {
            text: text("wheat"),
        };
        assert!(wm.check_change(&keep, 0).is_err());
        // After an idle period the change finds the memory cleared.
        assert!(wm.check_change(&clear("creeper"), IDLE + 1).is_err());
        assert!(wm.check_change(&WmOp::PopSubgoal, IDLE + 1).is_err());
        for i in 1..MAX_HELD {
            wm.apply(&ev(
                3,
                0,
                WmOp::PushSubgoal {
                    text: i.to_string(),
                },
            ));
            wm.apply(&ev(
                4,
                0,
                WmOp::Promise {
                    text: i.to_string(),
                },
            ));
        }
        wm.apply(&ev(
            5,
            0,
            WmOp::Promise {
                text: text("wheat"),
            },
        ));
        let push = WmOp::PushSubgoal {
            text: text("one more"),
        };
        assert!(wm.check_change(&push, 0).is_err());
        assert!(wm.check_change(&push, IDLE + 1).is_ok());
        assert!(wm
            .check_change(
                &WmOp::Promise {
                    text: text("bread")
                },
                0
            )
            .is_err());
        // A promise already held is not one more.
        assert!(wm
            .check_change(
                &WmOp::Promise {
                    text: text("wheat")
                },
                0
            )
            .is_ok());
        assert!(wm.check_change(&keep, 0).is_ok());
        let many = wm.check_change(&WmOp::KeepPromise { text: text("x") }, 0);
        assert!(many.unwrap_err().to_string().contains("and 251 more"));
    }

    #[test]
    fn an_op_carries_a_note_not_a_document() {
        let long = WmOp::Observe {
            text: "x".repeat(MAX_TEXT_BYTES + 1),
        };
        assert!(long
            .validate()
            .unwrap_err()
            .to_string()
            .contains("16385 bytes"));
        let fits = WmOp::Observe {
            text: "x".repeat(MAX_TEXT_BYTES),
        };
        assert!(fits.validate().is_ok());
        for blank in [" ", "\u{200b}"] {
            let blank = WmOp::PushSubgoal { text: blank.into() };
            assert!(blank.validate().is_err());
        }
        // An empty mainline clears it.
        assert!(WmOp::Mainline { text: "".into() }.validate().is_ok());
    }

    #[test]
    fn ops_read_back_from_their_events() {
        let op = WmOp::Promise {
            text: "bring 3 wheat to Ana".into(),
        };
        assert_eq!(WmOp::of_event(&ev(1, 0, op.clone())), Some(op));
        assert!(WmOp::Capacity { n: 0 }.validate().is_err());
    }
}
