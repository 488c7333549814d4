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
use crate::error::{Error, Result};
use crate::model::{kinds, Event, EventDraft, Value};

/// Kind of a working-memory event.
pub const WM: &str = "WM";
/// World time without a working-memory event after which it is cleared (a quarter day).
pub const IDLE: i64 = DAY as i64 / 4;
/// Observations the ring holds unless a `capacity` op says otherwise.
pub const DEFAULT_CAPACITY: usize = 16;
/// The largest capacity a `capacity` op may set.
pub const MAX_CAPACITY: usize = 1024;

/// One change to working memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WmOp {
    Observe { text: String },
    Intent { text: String },
    PushSubgoal { text: String },
    PopSubgoal,
    AddThreat { text: String },
    ClearThreat { text: String },
    Promise { text: String },
    KeepPromise { text: String },
    Mainline { text: String },
    Capacity { n: usize },
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

    /// Checks the op before it is written.
    pub fn validate(&self) -> Result<()> {
        match self {
            WmOp::Capacity { n } if *n == 0 || *n > MAX_CAPACITY => Err(Error::InvalidArgument {
                name: "capacity".into(),
                message: format!("{n}: must be between 1 and {MAX_CAPACITY}"),
            }),
            _ => Ok(()),
        }
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

    /// Applies one event of the log (any kind: sleep and idleness clear it).
    pub fn apply(&mut self, ev: &Event) {
        let idle = self
            .last_active
            .is_some_and(|t| ev.ts.saturating_sub(t) > IDLE);
        if (idle || ev.kind == kinds::SLEEP) && !self.is_clear() {
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
    fn ops_read_back_from_their_events() {
        let op = WmOp::Promise {
            text: "bring 3 wheat to Ana".into(),
        };
        assert_eq!(WmOp::of_event(&ev(1, 0, op.clone())), Some(op));
        assert!(WmOp::Capacity { n: 0 }.validate().is_err());
    }
}
