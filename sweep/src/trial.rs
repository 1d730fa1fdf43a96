//! What every part of a sweep shares, in Optuna's terms so that the journal
//! maps one to one: a parameter's distribution, its value, a trial's state,
//! and a trial as the journal's replay knows it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A categorical choice (Optuna's CategoricalChoiceType: None, bool, int,
/// float, str).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Choice {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// A parameter's distribution, as Optuna's FloatDistribution,
/// IntDistribution and CategoricalDistribution define them.
#[derive(Clone, Debug, PartialEq)]
pub enum Distribution {
    /// [low, high]; `log`: sampled in log space (low > 0); `step`: a grid of
    /// low + k·step (not with log).
    Float {
        low: f64,
        high: f64,
        log: bool,
        step: Option<f64>,
    },
    /// [low, high] inclusive, on low + k·step; `log`: in log space (step 1).
    Int {
        low: i64,
        high: i64,
        log: bool,
        step: i64,
    },
    Categorical {
        choices: Vec<Choice>,
    },
}

impl Distribution {
    /// The rules of Optuna's distribution constructors, plus finiteness:
    /// what the journal refuses to write and the samplers to draw from.
    pub fn check(&self) -> Result<(), String> {
        fn finite(v: f64, what: &str) -> Result<(), String> {
            if v.is_finite() {
                Ok(())
            } else {
                Err(format!("{what} is {v}, not a finite number"))
            }
        }
        match self {
            Distribution::Float {
                low,
                high,
                log,
                step,
            } => {
                finite(*low, "low")?;
                finite(*high, "high")?;
                if let Some(s) = step {
                    finite(*s, "step")?;
                    if *log {
                        return Err("step is not supported with log".to_string());
                    }
                    if *s <= 0.0 {
                        return Err(format!("step {s} is not > 0"));
                    }
                }
                if low > high {
                    return Err(format!("low {low} > high {high}"));
                }
                if *log && *low <= 0.0 {
                    return Err(format!("low {low} is not > 0 with log"));
                }
            }
            Distribution::Int {
                low,
                high,
                log,
                step,
            } => {
                if *log && *step != 1 {
                    return Err(format!("step {step} with log (must be 1)"));
                }
                if low > high {
                    return Err(format!("low {low} > high {high}"));
                }
                if *log && *low < 1 {
                    return Err(format!("low {low} is not >= 1 with log"));
                }
                if *step <= 0 {
                    return Err(format!("step {step} is not > 0"));
                }
            }
            Distribution::Categorical { choices } => {
                if choices.is_empty() {
                    return Err("no choices".to_string());
                }
                for c in choices {
                    if let Choice::Float(f) = c {
                        finite(*f, "a choice")?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A parameter's value as a user (and a config) sees it: Optuna's
/// "external representation".
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    Float(f64),
    Int(i64),
    Choice(Choice),
}

impl ParamValue {
    /// As a JSON value (a program's parameters, the memory model's input).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as Json;
        match self {
            ParamValue::Float(f) => Json::from(*f),
            ParamValue::Int(i) => Json::from(*i),
            ParamValue::Choice(c) => match c {
                Choice::Null => Json::Null,
                Choice::Bool(b) => Json::from(*b),
                Choice::Int(i) => Json::from(*i),
                Choice::Float(f) => Json::from(*f),
                Choice::Str(s) => Json::from(s.clone()),
            },
        }
    }

    /// As a YAML value, to set into a config.
    pub fn to_yaml(&self) -> serde_yaml::Value {
        match self {
            ParamValue::Float(f) => serde_yaml::Value::from(*f),
            ParamValue::Int(i) => serde_yaml::Value::from(*i),
            ParamValue::Choice(c) => serde_yaml::to_value(c).unwrap_or(serde_yaml::Value::Null),
        }
    }
}

/// Optuna's TrialState, with its numbers (the journal stores them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrialState {
    Running = 0,
    Complete = 1,
    Pruned = 2,
    Fail = 3,
    #[default]
    Waiting = 4,
}

impl TrialState {
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TrialState::Complete | TrialState::Pruned | TrialState::Fail
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TrialState::Running => "RUNNING",
            TrialState::Complete => "COMPLETE",
            TrialState::Pruned => "PRUNED",
            TrialState::Fail => "FAIL",
            TrialState::Waiting => "WAITING",
        }
    }
}

/// Optuna's StudyDirection (0 is NOT_SET).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Minimize = 1,
    Maximize = 2,
}

impl Direction {
    /// Whether `a` is better than `b` in this direction.
    pub fn better(self, a: f64, b: f64) -> bool {
        match self {
            Direction::Minimize => a < b,
            Direction::Maximize => a > b,
        }
    }
}

/// A trial's (or a study's) attributes, keyed and ordered as a BTreeMap's,
/// held in one sorted Vec: a trial has a dozen or two, and a map's nodes
/// were a third of a 50,000-trial study's memory. A key of up to 24 bytes
/// (all of ours) is held in place, not allocated: a dozen allocations a
/// trial fewer.
pub type Attrs = litemap::LiteMap<AttrKey, serde_json::Value>;

/// An attribute's name.
pub type AttrKey = compact_str::CompactString;

/// `attrs` without the room that inserting them one at a time left (up to
/// half of it), for a trial that takes no more.
pub fn shrunk(attrs: Attrs) -> Attrs {
    let mut v = attrs.into_tuple_vec();
    v.shrink_to_fit();
    Attrs::from_sorted_store_unchecked(v)
}

/// The attributes of a JSON object (tests build trials from `json!`).
#[cfg(test)]
pub(crate) fn attrs_of(object: &serde_json::Value) -> Attrs {
    let entries = object.as_object().expect("an object").iter();
    entries
        .map(|(k, v)| (k.as_str().into(), v.clone()))
        .collect()
}

/// One trial as the journal's replay knows it (Optuna's FrozenTrial); the
/// default is an empty WAITING trial 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trial {
    /// Its number in the study, from 0, in the order trials were created.
    pub number: u64,
    pub state: TrialState,
    pub params: BTreeMap<String, ParamValue>,
    /// Shared by the trials that have the same ones (a sweep's all do):
    /// the replay hands out one map per text it read, not one per trial.
    pub distributions: Arc<BTreeMap<String, Distribution>>,
    /// The objective; None unless COMPLETE (single objective).
    pub value: Option<f64>,
    /// The metric per epoch (Optuna's intermediate values, step -> value).
    pub intermediate: BTreeMap<u64, f64>,
    pub user_attrs: Attrs,
    pub system_attrs: Attrs,
    /// Naive UTC timestamps, ISO 8601 without a zone (Optuna's format).
    pub datetime_start: Option<String>,
    pub datetime_complete: Option<String>,
    /// Named by a DISCARD_TRIALS record (op_code 10, which Rustuna writes).
    /// Optuna 5 skips that record, so the trial stays what it is to the
    /// samplers, the grid's count, `--resume` and the best trial; only the
    /// report shows the flag.
    pub discarded: bool,
}

/// `trials` as a study holds them (shared), for tests that build trials.
#[cfg(test)]
pub fn shared(trials: &[Trial]) -> Vec<std::sync::Arc<Trial>> {
    trials.iter().cloned().map(std::sync::Arc::new).collect()
}
