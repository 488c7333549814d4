//! Decay of belief: the effective confidence of an edge is its stored confidence halved every
//! half-life of world time since it was last seen:
//!
//! `effective = confidence * 0.5 ^ (max(0, now - last_seen) / half_life(relation))`
//!
//! It is computed on read from `now` (the latest event time unless a caller gives one), so a
//! read writes nothing and replay is unaffected; an event that upserts the edge again sets its
//! `last_seen` and so restores it. Relations that describe lasting structure (a home, a path,
//! what a passage mentions, an alias) do not decay; what changes quickly (a chest's contents,
//! dropped items) fades fast. The stored confidence stays readable (`e.confidence` in queries,
//! `Neighbor::stored_confidence`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

use crate::graph::DecayFilter;
use crate::model::relations;

/// World ticks per day (the synthetic world's clock: 24,000 ticks).
pub const DAY: f64 = 24_000.0;

/// A relation's half-life in world ticks; `None` never decays.
pub type HalfLife = Option<f64>;

/// Per-relation half-lives, with a default for relations it does not name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecayPolicy {
    /// Half-life of every relation not listed in `relations`.
    pub default_half_life: HalfLife,
    /// Half-lives by relation name.
    pub relations: BTreeMap<String, HalfLife>,
    /// An edge touching a pinned node decays no lower than this (and never above its stored
    /// confidence): what the agent pinned stays believable.
    #[serde(default = "default_pinned_floor")]
    pub pinned_floor: f32,
}

fn default_pinned_floor() -> f32 {
    0.5
}

impl Default for DecayPolicy {
    /// Documented defaults: a week for most facts; a day-scale fade for what the world changes
    /// quickly; no decay for structure and for corpus facts.
    ///
    /// | relation | half-life |
    /// |---|---|
    /// | `HOME`, `PATH`, `MENTIONS`, `SAME_AS`, `DIED_AT` | never |
    /// | `LOCATED_IN` | 30 days |
    /// | `OFFERS` | 7 days |
    /// | `CONTAINS`, `SLEPT_AT` | 3 days |
    /// | `DROPPED` | 1/4 day (items on the ground despawn) |
    /// | any other | 7 days |
    fn default() -> Self {
        let mut r = BTreeMap::new();
        for never in [
            relations::HOME,
            relations::PATH,
            relations::MENTIONS,
            relations::SAME_AS,
            relations::DIED_AT,
        ] {
            r.insert(never.to_string(), None);
        }
        r.insert(relations::LOCATED_IN.into(), Some(30.0 * DAY));
        r.insert(relations::OFFERS.into(), Some(7.0 * DAY));
        r.insert(relations::CONTAINS.into(), Some(3.0 * DAY));
        r.insert(relations::SLEPT_AT.into(), Some(3.0 * DAY));
        r.insert(relations::DROPPED.into(), Some(DAY / 4.0));
        DecayPolicy {
            default_half_life: Some(7.0 * DAY),
            relations: r,
            pinned_floor: default_pinned_floor(),
        }
    }
}

impl DecayPolicy {
    /// A policy under which nothing decays.
    pub fn none() -> Self {
        DecayPolicy {
            default_half_life: None,
            relations: BTreeMap::new(),
            pinned_floor: default_pinned_floor(),
        }
    }

    pub fn half_life(&self, relation: &str) -> HalfLife {
        match self.relations.get(relation) {
            Some(h) => *h,
            None => self.default_half_life,
        }
    }

    /// Sets one relation's half-life (`None`: never decays).
    pub fn with_half_life(mut self, relation: impl Into<String>, half_life: HalfLife) -> Self {
        self.relations.insert(relation.into(), half_life);
        self
    }

    /// The confidence of an edge of `relation` stored as `confidence` and last seen at
    /// `last_seen`, as believed at world time `now`.
    pub fn effective(&self, relation: &str, confidence: f32, last_seen: i64, now: i64) -> f32 {
        effective(confidence, last_seen, now, self.half_life(relation))
    }

    /// `effective`, for an edge with a pinned endpoint: never below the floor (nor above the
    /// stored confidence).
    pub fn effective_pinned(
        &self,
        relation: &str,
        confidence: f32,
        last_seen: i64,
        now: i64,
    ) -> f32 {
        self.effective(relation, confidence, last_seen, now)
            .max(confidence.min(self.pinned_floor))
    }

    /// Checks that every half-life is a positive, finite number of ticks, and the floor a
    /// confidence.
    pub fn validate(&self) -> Result<()> {
        if !(self.pinned_floor.is_finite() && (0.0..=1.0).contains(&self.pinned_floor)) {
            return Err(Error::InvalidArgument {
                name: "pinned_floor".into(),
                message: format!("{} is outside [0, 1]", self.pinned_floor),
            });
        }
        let bad = |name: &str, h: f64| Error::InvalidArgument {
            name: format!("half_life of {name}"),
            message: format!("{h} is not a positive, finite span of world time"),
        };
        if let Some(h) = self.default_half_life {
            if !(h.is_finite() && h > 0.0) {
                return Err(bad("default", h));
            }
        }
        for (rel, h) in &self.relations {
            if let Some(h) = *h {
                if !(h.is_finite() && h > 0.0) {
                    return Err(bad(rel, h));
                }
            }
        }
        Ok(())
    }

    /// Reads a policy from a JSON file (`{"default_half_life": 168000, "relations": {"HOME":
    /// null, ...}}`); a relation the file leaves out takes the default half-life.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let refused = |e: serde_json::Error| Error::Input {
            file: path.display().to_string(),
            line: e.line(),
            field: "decay policy".into(),
            message: e.to_string(),
        };
        // A relation given twice is refused, as in every JSON loci reads; the policy's own
        // reading would keep its last half-life.
        if let Err(e) = serde_json::from_str::<crate::model::Value>(&text) {
            if crate::model::is_repeated_key(&e) {
                return Err(refused(e));
            }
        }
        let policy: DecayPolicy = serde_json::from_str(&text).map_err(refused)?;
        policy.validate().map_err(|e| super::refused_in(path, e))?;
        Ok(policy)
    }

    /// The policy resolved against interned relation ids, for traversal filters.
    pub(crate) fn resolve(&self, now: i64, relation_names: &[&str]) -> DecayFilter {
        DecayFilter {
            now,
            half_lives: relation_names
                .iter()
                .map(|r| self.half_life(r).unwrap_or(f64::INFINITY))
                .collect(),
            pinned_floor: self.pinned_floor,
        }
    }
}

/// `confidence` halved every `half_life` ticks since `last_seen`; unchanged without a
/// half-life or when `last_seen` is not before `now`.
pub fn effective(confidence: f32, last_seen: i64, now: i64, half_life: HalfLife) -> f32 {
    match half_life {
        Some(h) if now > last_seen => {
            let age = (now as f64) - (last_seen as f64);
            (confidence as f64 * 0.5f64.powf(age / h)) as f32
        }
        _ => confidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_every_half_life_and_never_for_structure() {
        let p = DecayPolicy::default();
        let week = (7.0 * DAY) as i64;
        assert_eq!(p.effective("OFFERS", 0.8, 1000, 1000), 0.8);
        assert!((p.effective("OFFERS", 0.8, 0, week) - 0.4).abs() < 1e-6);
        assert!((p.effective("OFFERS", 0.8, 0, 2 * week) - 0.2).abs() < 1e-6);
        assert_eq!(p.effective("HOME", 1.0, 0, 100 * week), 1.0);
        assert_eq!(p.effective("MENTIONS", 1.0, 0, i64::MAX), 1.0);
        // Unknown relations take the default; a future last_seen is not a negative age.
        assert!((p.effective("LIKES", 1.0, 0, week) - 0.5).abs() < 1e-6);
        assert_eq!(p.effective("OFFERS", 0.7, 5000, 10), 0.7);
        // Extreme times neither overflow nor leave [0, confidence].
        let e = p.effective("OFFERS", 1.0, i64::MIN, i64::MAX);
        assert!((0.0..=1.0).contains(&e), "{e}");
        assert_eq!(
            DecayPolicy::none().effective("OFFERS", 0.9, 0, 10 * week),
            0.9
        );
    }

    #[test]
    fn policies_read_from_json_and_bad_half_lives_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("decay.json");
        std::fs::write(
            &f,
            r#"{"default_half_life": null, "relations": {"OFFERS": 1000}}"#,
        )
        .unwrap();
        let p = DecayPolicy::from_file(&f).unwrap();
        assert_eq!(p.half_life("OFFERS"), Some(1000.0));
        assert_eq!(p.half_life("HOME"), None);
        std::fs::write(&f, r#"{"default_half_life": -5, "relations": {}}"#).unwrap();
        let err = DecayPolicy::from_file(&f).unwrap_err().to_string();
        // Named by its file, as a syntax error is (it named no file, so a user could not
        // tell why every command failed).
        assert!(
            err.contains("decay.json: half_life of default: -5 is not a positive"),
            "{err}"
        );
        std::fs::write(&f, r#"{"default_half_life": 5, "relation": {}}"#).unwrap();
        let err = DecayPolicy::from_file(&f).unwrap_err().to_string();
        assert!(
            err.contains("decay.json:1: decay policy: unknown field"),
            "{err}"
        );
        // A relation given twice: its last half-life had been taken without a word (a
        // helper's probe), where every other JSON loci reads refuses a key given twice.
        std::fs::write(
            &f,
            "{\"default_half_life\": 5,\n \"relations\": {\"OFFERS\": null, \"OFFERS\": 1}}",
        )
        .unwrap();
        let err = DecayPolicy::from_file(&f).unwrap_err().to_string();
        assert!(
            err.contains("decay.json:2: decay policy: key \"OFFERS\" is given twice"),
            "{err}"
        );
    }
}
