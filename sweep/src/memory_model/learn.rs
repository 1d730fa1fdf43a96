//! What a trial of the study teaches the model: the values it ran with
//! (its parameters, with the values auto-fix gave them over them) and its
//! peak, measured, or after an out-of-memory a lower bound.

use super::MemoryModel;
use crate::trial::{ParamValue, Trial, TrialState};
use serde_json::{Map, Value};

/// Which memory a model learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// The host's, by the trial's PSS peak (`peak_host_pss_mib`).
    Host,
    /// The GPU's, by NVML's per-process peak (`peak_gpu_mib`).
    Gpu,
}

impl Resource {
    fn attr(self) -> &'static str {
        match self {
            Resource::Host => "peak_host_pss_mib",
            Resource::Gpu => "peak_gpu_mib",
        }
    }
}

/// How a trial enters: measured, censored, or not at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lesson {
    Measured(f64),
    /// Ran out of memory after this peak: it needs more. The limit it hit
    /// is not in the journal (a GPU's free memory as it ran, the host's
    /// room), so the peak sampled before it died (every 0.5 s: below its
    /// need) is the bound.
    Above(f64),
    /// Still running, interrupted or killed before its peak could be
    /// known, or no peak of this resource (our own trainer's trials on
    /// the CPU).
    Nothing,
}

/// What `trial` teaches about `resource`.
pub fn lesson(trial: &Trial, resource: Resource) -> Lesson {
    let attr = |k: &str| trial.user_attrs.get(k);
    let Some(peak) = attr(resource.attr()).and_then(Value::as_f64) else {
        return Lesson::Nothing;
    };
    let class = attr("error_class").and_then(Value::as_str);
    match (trial.state, class) {
        (TrialState::Running | TrialState::Waiting, _) => Lesson::Nothing,
        (_, Some("out-of-memory")) => Lesson::Above(peak),
        (_, Some("interrupted" | "killed" | "timeout")) => Lesson::Nothing,
        _ => Lesson::Measured(peak),
    }
}

/// The values `trial` ran with: its parameters, and the flags auto-fix
/// turned (`effective_params`) in their place or beside them.
pub fn ran_with(trial: &Trial) -> Map<String, Value> {
    let mut out: Map<String, Value> = trial
        .params
        .iter()
        .map(|(k, v)| (k.clone(), json_of(v)))
        .collect();
    if let Some(Value::Object(fixed)) = trial.user_attrs.get("effective_params") {
        for (k, v) in fixed {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

fn json_of(v: &ParamValue) -> Value {
    match v {
        ParamValue::Float(f) => Value::from(*f),
        ParamValue::Int(i) => Value::from(*i),
        ParamValue::Choice(c) => serde_json::to_value(c).unwrap_or(Value::Null),
    }
}

impl MemoryModel {
    /// Learns what `trial` teaches about `resource`; false if nothing.
    pub fn observe(&mut self, trial: &Trial, resource: Resource) -> bool {
        match lesson(trial, resource) {
            Lesson::Measured(peak) => self.add_measured(&ran_with(trial), peak),
            Lesson::Above(peak) => self.add_censored(&ran_with(trial), peak),
            Lesson::Nothing => false,
        }
    }
}
