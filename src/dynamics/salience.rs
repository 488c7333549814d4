//! Salience: how much an event matters to an agent, in [0, 1], computed when it is ingested
//! (unless the event carries its own) and stored in the log, so replay never recomputes it.
//!
//! Four factors, each in [0, 1]:
//! - **survival**: the event's kind (`DEATH` 1.0, `COMBAT` 0.7, `DAMAGE` 0.7, `HUNGER` 0.5) or,
//!   failing that, danger words in its text ("died", "lava", "creeper", ...: 0.6);
//! - **novelty**: first sightings, i.e. assertions that create a place, item, NPC or person the
//!   store did not know (one: 0.7, two or more: 1.0), raised by the share of the event's words
//!   the store has never indexed (rare terms);
//! - **social**: trades, promises and talk (`TRADE` 1.0, `PROMISE` 1.0, `GIFT` 0.8, `CHAT` 0.6),
//!   or assertions of social relations (`OFFERS`, ...: 0.8) or about named people (0.4);
//! - **baseline**: what any event gets.
//!
//! They combine as a noisy-or, so one strong reason is enough and more reasons add up without
//! passing 1:
//!
//! `salience = 1 - (1 - baseline) * (1 - w_survival * survival) * (1 - w_novelty * novelty)
//!   * (1 - w_social * social)`
//!
//! with weights 0.9, 0.6 and 0.6 and baseline 0.1 by default (all in [`SaliencePolicy`]).
//! Recency is not part of an event's salience: it is judged at read time (ranking, retention),
//! since an event does not become less important by being stored. Nodes and edges take the
//! highest salience of the events that assert them, summaries aside (a summary restates them,
//! and raises neither).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::model::{kinds, labels, relations, Assertion, Node, Props};
use crate::projection::NodeValues;

/// The lowercase words of `text`, split on anything that is not a letter or digit.
pub fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Weights and tables of the salience formula (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaliencePolicy {
    pub baseline: f32,
    pub survival_weight: f32,
    pub novelty_weight: f32,
    pub social_weight: f32,
    /// Survival factor by event kind.
    pub survival_kinds: BTreeMap<String, f32>,
    /// Words (lowercase) whose presence in an event's text gives [`Self::danger_word_factor`].
    pub danger_words: Vec<String>,
    pub danger_word_factor: f32,
    /// Social factor by event kind.
    pub social_kinds: BTreeMap<String, f32>,
    /// Relations whose assertion is a social act.
    pub social_relations: Vec<String>,
    pub social_relation_factor: f32,
    /// Labels of named people.
    pub person_labels: Vec<String>,
    pub person_factor: f32,
    /// Labels whose first sighting is novel.
    pub novel_labels: Vec<String>,
}

impl Default for SaliencePolicy {
    fn default() -> Self {
        let table = |pairs: &[(&str, f32)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect::<BTreeMap<_, _>>()
        };
        let words = |ws: &[&str]| ws.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        SaliencePolicy {
            baseline: 0.1,
            survival_weight: 0.9,
            novelty_weight: 0.6,
            social_weight: 0.6,
            survival_kinds: table(&[
                (kinds::DEATH, 1.0),
                (kinds::COMBAT, 0.7),
                ("DAMAGE", 0.7),
                ("HUNGER", 0.5),
            ]),
            danger_words: words(&[
                "death",
                "died",
                "dead",
                "killed",
                "kill",
                "damage",
                "hurt",
                "hunger",
                "starving",
                "lava",
                "drowned",
                "drowning",
                "fell",
                "creeper",
                "zombie",
                "skeleton",
                "poison",
                "fire",
                "explosion",
                "attack",
                "attacked",
            ]),
            danger_word_factor: 0.6,
            social_kinds: table(&[
                (kinds::TRADE, 1.0),
                ("PROMISE", 1.0),
                ("GIFT", 0.8),
                ("CHAT", 0.6),
            ]),
            social_relations: words(&[relations::OFFERS, "TRADED_WITH", "PROMISED", "KNOWS"]),
            social_relation_factor: 0.8,
            person_labels: words(&[labels::NPC, "Person"]),
            person_factor: 0.4,
            novel_labels: words(&[labels::PLACE, labels::ITEM, labels::NPC, "Person"]),
        }
    }
}

/// What the store knows about an event when it scores it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SalienceInputs<'a> {
    pub kind: &'a str,
    /// The event's words, lowercase, as written (danger words are matched against these).
    pub words: &'a [String],
    /// The share of the event's index terms that no indexed document has yet, in [0, 1].
    pub unseen_share: f32,
    /// Labels of the nodes the event creates (first sightings).
    pub new_node_labels: Vec<&'a str>,
    /// Labels of every node the event's assertions touch.
    pub touched_labels: Vec<&'a str>,
    /// Relations of the edges the event asserts.
    pub relations: Vec<&'a str>,
}

/// The factors behind a score, for explanations and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SalienceFactors {
    pub survival: f32,
    pub novelty: f32,
    pub social: f32,
}

impl SaliencePolicy {
    /// Reads a policy from a JSON file; what it leaves out keeps its default.
    pub fn from_file(path: &std::path::Path) -> crate::Result<Self> {
        let policy: SaliencePolicy = super::read_policy(path, "salience policy")?;
        policy.validate().map_err(|e| super::refused_in(path, e))?;
        Ok(policy)
    }

    /// Checks that every weight and factor lies in [0, 1].
    pub fn validate(&self) -> crate::Result<()> {
        let mut all: Vec<(&str, f32)> = vec![
            ("baseline", self.baseline),
            ("survival_weight", self.survival_weight),
            ("novelty_weight", self.novelty_weight),
            ("social_weight", self.social_weight),
            ("danger_word_factor", self.danger_word_factor),
            ("social_relation_factor", self.social_relation_factor),
            ("person_factor", self.person_factor),
        ];
        all.extend(self.survival_kinds.iter().map(|(k, v)| (k.as_str(), *v)));
        all.extend(self.social_kinds.iter().map(|(k, v)| (k.as_str(), *v)));
        for (name, v) in all {
            if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                return Err(crate::Error::InvalidArgument {
                    name: format!("salience {name}"),
                    message: format!("{v} is outside [0, 1]"),
                });
            }
        }
        Ok(())
    }

    pub fn factors(&self, x: &SalienceInputs<'_>) -> SalienceFactors {
        let survival = self.survival_kinds.get(x.kind).copied().unwrap_or_else(|| {
            let danger = x
                .words
                .iter()
                .any(|w| self.danger_words.iter().any(|d| d == w));
            if danger {
                self.danger_word_factor
            } else {
                0.0
            }
        });
        let firsts = x
            .new_node_labels
            .iter()
            .filter(|l| self.novel_labels.iter().any(|n| n == *l))
            .count();
        let sighting = match firsts {
            0 => 0.0,
            1 => 0.7,
            _ => 1.0,
        };
        let rare = x.unseen_share.clamp(0.0, 1.0);
        let novelty = 1.0 - (1.0 - sighting) * (1.0 - 0.5 * rare);
        let social = self.social_kinds.get(x.kind).copied().unwrap_or_else(|| {
            if x.relations
                .iter()
                .any(|r| self.social_relations.iter().any(|s| s == r))
            {
                self.social_relation_factor
            } else if x
                .touched_labels
                .iter()
                .any(|l| self.person_labels.iter().any(|p| p == l))
            {
                self.person_factor
            } else {
                0.0
            }
        });
        SalienceFactors {
            survival,
            novelty,
            social,
        }
    }

    /// The salience of an event described by `x`.
    pub fn score(&self, x: &SalienceInputs<'_>) -> f32 {
        let f = self.factors(x);
        let s = 1.0
            - (1.0 - self.baseline)
                * (1.0 - self.survival_weight * f.survival)
                * (1.0 - self.novelty_weight * f.novelty)
                * (1.0 - self.social_weight * f.social);
        s.clamp(0.0, 1.0)
    }
}

/// The words of the node documents a batch's earlier events make, change or take, for the
/// novelty of its later events: what the full-text index holds of those nodes once the batch
/// is committed. Without them a node's name was unseen by the events after it in its own batch
/// and seen after a commit, so a file stored other saliences split into commits (helper-114:
/// `--commit-every 1`, or events fed one at a time, as MCP's `remember` feeds them).
#[derive(Default)]
pub(crate) struct BatchNodeWords {
    /// Each node the batch touched, as its document will be made; `None` when it has none (a
    /// node retracted, or one a retraction named that was not there).
    nodes: HashMap<String, Option<NodeText>>,
    /// How many of those documents, as the batch leaves them, hold each word.
    now: HashMap<String, u64>,
    /// How many of those nodes' documents in the index before the batch hold each word: the
    /// commit replaces or takes them.
    before: HashMap<String, u64>,
}

/// What a node's document is made of ([`crate::text::node_text`]), and its words.
struct NodeText {
    name: String,
    aliases: Vec<String>,
    props: Props,
    words: Vec<String>,
}

/// A text's distinct words, as the full-text index analyses them.
pub(crate) type Analyze<'a> = &'a dyn Fn(&str) -> crate::error::Result<Vec<String>>;

impl BatchNodeWords {
    /// Whether a node document the batch leaves holds `word`.
    pub(crate) fn holds(&self, word: &str) -> bool {
        self.now.get(word).is_some_and(|n| *n > 0)
    }

    /// How many documents of the index before the batch hold `word` that the batch replaces
    /// or takes: the index's count less these is what stays of them.
    pub(crate) fn replaced(&self, word: &str) -> u64 {
        self.before.get(word).copied().unwrap_or(0)
    }

    /// Takes in `assertion`, an assertion of an event of the batch, in log order: a node's
    /// upsert or retraction changes its document as the projection will (`projection.rs`).
    /// `before` gives a node as the store holds it before the batch.
    pub(crate) fn take(
        &mut self,
        assertion: &Assertion,
        before: &dyn Fn(&str) -> Option<Node>,
        analyze: Analyze<'_>,
    ) -> crate::error::Result<()> {
        match assertion {
            Assertion::UpsertNode(up) => {
                // The text has no label: the fold's is the upsert's, or none.
                let (
                    NodeValues {
                        name,
                        aliases,
                        props,
                        ..
                    },
                    old_words,
                ) = match self.current(&up.key, before, analyze)? {
                    Some(n) => {
                        let mut values = NodeValues {
                            label: String::new(),
                            name: n.name,
                            aliases: n.aliases,
                            props: n.props,
                        };
                        values.take(up);
                        (values, n.words)
                    }
                    None => (NodeValues::made_by(up), Vec::new()),
                };
                let words = analyze(&crate::text::node_text(&name, &aliases, &props))?;
                let text = NodeText {
                    name,
                    aliases,
                    props,
                    words,
                };
                self.set(&up.key, &old_words, Some(text));
            }
            Assertion::RetractNode { key } => {
                let old = self.current(key, before, analyze)?;
                self.set(key, old.as_ref().map_or(&[], |n| &n.words), None);
            }
            Assertion::UpsertEdge(_) | Assertion::RetractEdge { .. } => {}
        }
        Ok(())
    }

    /// Node `key` as the batch has left it so far, taken out for [`Self::set`] to put back
    /// changed (no copy of its properties an upsert); read from `before`, and its words counted
    /// as the index's, the first time the batch touches it.
    fn current(
        &mut self,
        key: &str,
        before: &dyn Fn(&str) -> Option<Node>,
        analyze: Analyze<'_>,
    ) -> crate::error::Result<Option<NodeText>> {
        if let Some(n) = self.nodes.remove(key) {
            return Ok(n);
        }
        let Some(n) = before(key) else {
            return Ok(None);
        };
        let words = analyze(&crate::text::node_text(&n.name, &n.aliases, &n.props))?;
        for w in &words {
            *self.before.entry(w.clone()).or_default() += 1;
            *self.now.entry(w.clone()).or_default() += 1;
        }
        Ok(Some(NodeText {
            name: n.name,
            aliases: n.aliases,
            props: n.props,
            words,
        }))
    }

    /// Node `key`'s document, of `old_words` (taken out by [`Self::current`]), becomes
    /// `text`'s.
    fn set(&mut self, key: &str, old_words: &[String], text: Option<NodeText>) {
        for w in old_words {
            if let Some(n) = self.now.get_mut(w) {
                *n = n.saturating_sub(1);
            }
        }
        for w in text.iter().flat_map(|t| &t.words) {
            *self.now.entry(w.clone()).or_default() += 1;
        }
        self.nodes.insert(key.to_string(), text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Vec<String> {
        ws.iter().map(|w| w.to_string()).collect()
    }

    /// A weight out of range in a policy file is named by its file, as a syntax error is (it
    /// named no file, so a user could not tell why every command failed).
    #[test]
    fn a_policy_file_out_of_range_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("salience.json");
        std::fs::write(&f, r#"{"baseline": 2.0}"#).unwrap();
        let err = SaliencePolicy::from_file(&f).unwrap_err().to_string();
        assert!(
            err.contains("salience.json: salience baseline: 2 is outside [0, 1]"),
            "{err}"
        );
    }

    #[test]
    fn deaths_outrank_trades_outrank_routine() {
        let p = SaliencePolicy::default();
        let w = words(&["walked", "north"]);
        let routine = p.score(&SalienceInputs {
            kind: "MOVE",
            words: &w,
            ..Default::default()
        });
        assert!((routine - 0.1).abs() < 1e-6, "baseline only: {routine}");
        let death = p.score(&SalienceInputs {
            kind: "DEATH",
            words: &w,
            ..Default::default()
        });
        let trade = p.score(&SalienceInputs {
            kind: "TRADE",
            words: &w,
            ..Default::default()
        });
        assert!(
            death > trade && trade > routine,
            "{death} {trade} {routine}"
        );
        // Danger words count when the kind says nothing.
        let lava = words(&["fell", "into", "lava"]);
        let scare = p.score(&SalienceInputs {
            kind: "OBSERVATION",
            words: &lava,
            ..Default::default()
        });
        assert!(scare > 0.5, "{scare}");
    }

    #[test]
    fn first_sightings_and_rare_words_are_novel() {
        let p = SaliencePolicy::default();
        let w = words(&["a", "b", "c", "d"]);
        let seen = SalienceInputs {
            kind: "SIGHTING",
            words: &w,
            ..Default::default()
        };
        let first_village = SalienceInputs {
            new_node_labels: vec!["Place"],
            ..seen.clone()
        };
        let rare = SalienceInputs {
            unseen_share: 1.0,
            ..seen.clone()
        };
        assert_eq!(p.factors(&seen).novelty, 0.0);
        assert!((p.factors(&first_village).novelty - 0.7).abs() < 1e-6);
        assert!((p.factors(&rare).novelty - 0.5).abs() < 1e-6);
        assert!(p.score(&first_village) > p.score(&seen));
        // A first sighting of an unlisted label is not novel.
        let odd = SalienceInputs {
            new_node_labels: vec!["Cloud"],
            ..seen.clone()
        };
        assert_eq!(p.factors(&odd).novelty, 0.0);
    }

    #[test]
    fn scores_stay_in_the_unit_interval_and_bad_weights_are_refused() {
        let p = SaliencePolicy::default();
        let w = words(&["died", "lava"]);
        let everything = SalienceInputs {
            kind: "DEATH",
            words: &w,
            unseen_share: 1.0,
            new_node_labels: vec!["Place", "NPC", "Item"],
            touched_labels: vec!["NPC"],
            relations: vec!["OFFERS"],
        };
        let s = p.score(&everything);
        assert!(s > 0.95 && s <= 1.0, "{s}");
        let bad = SaliencePolicy {
            novelty_weight: 1.5,
            ..SaliencePolicy::default()
        };
        assert!(bad.validate().is_err());
        assert!(p.validate().is_ok());
    }
}
