//! What a trial of the study teaches the model: the values it ran with
//! (its parameters, with the values auto-fix gave them over them) and its
//! peak, measured, or after an out-of-memory a lower bound.

use super::{MemoryModel, Row};
use crate::trial::{ParamValue, Trial, TrialState};
use serde_json::{Map, Value};
use std::sync::Arc;

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

/// A trial's attribute listing its attempts that ran out of memory before
/// auto-fix's next one (each: `values`, the flags turned by then, by their
/// bare names; and its peaks, `peak_host_pss_mib`, `peak_gpu_mib`).
pub const RAN_OUT_LEGS: &str = "ran_out_legs";

/// `trial`'s attempts that ran out of memory of `resource` before its last
/// one: the values each ran with, and its peak (a lower bound of its need).
pub fn ran_out_legs(trial: &Trial, resource: Resource) -> Vec<(Map<String, Value>, f64)> {
    let Some(Value::Array(legs)) = trial.user_attrs.get(RAN_OUT_LEGS) else {
        return vec![];
    };
    let params = values_of(&trial.params);
    legs.iter()
        .filter_map(|leg| {
            let peak = leg.get(resource.attr())?.as_f64()?;
            let mut values = params.clone();
            if let Some(Value::Object(turned)) = leg.get("values") {
                values.extend(turned.clone());
            }
            Some((values, peak))
        })
        .collect()
}

/// The values `trial` ran with: its parameters, and the flags auto-fix
/// turned (`effective_params`) in their place or beside them.
pub fn ran_with(trial: &Trial) -> Map<String, Value> {
    let mut out = values_of(&trial.params);
    if let Some(Value::Object(fixed)) = trial.user_attrs.get("effective_params") {
        out.extend(fixed.clone());
    }
    out
}

impl MemoryModel {
    /// Learns what `trial` teaches about `resource`; false if nothing.
    pub fn observe(&mut self, trial: &Trial, resource: Resource) -> bool {
        match lesson(trial, resource) {
            Lesson::Nothing => false,
            taught => self.learn(taught, &ran_with(trial)),
        }
    }

    /// Learns `lesson`, of a trial that ran with `values`.
    fn learn(&mut self, lesson: Lesson, values: &Map<String, Value>) -> bool {
        match lesson {
            Lesson::Measured(peak) => self.add_measured(values, peak),
            Lesson::Above(peak) => self.add_censored(values, peak),
            Lesson::Nothing => false,
        }
    }
}

/// Measured trials a model needs before its predictions are shown or
/// recorded: fewer cannot tell a parameter's bearing from the trials'
/// spread.
pub const MIN_MEASURED: usize = 3;

/// The sweep's two models, fed each finished trial once.
#[derive(Debug, Default)]
pub struct Learner {
    host: MemoryModel,
    gpu: MemoryModel,
    seen: std::collections::HashSet<u64>,
    fits: [Option<super::Fit>; 2],
    /// Each resource's trials that ran out of memory: number, and the
    /// values they ran with as the model's row (read once: at 50,000
    /// trials, reading every such trial's values at each question was a
    /// quarter of the driver's time).
    ran_out: [Vec<(u64, Row)>; 2],
    /// Per resource, `ran_out` by the current fit's ln need, lowest first
    /// (ln need, index into `ran_out`); dropped with the fit.
    ranked: [Option<Vec<(f64, usize)>>; 2],
    /// Trials before this index are all seen finished.
    settled: usize,
}

/// A trial that ran out of memory whose point another point needs at
/// least as much as (`Fit::at_least`): that point does not fit either.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RanOut {
    pub number: u64,
    pub need_mib: f64,
}

/// A point's prediction and what it stands on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Predicted {
    pub resource: Resource,
    pub at: super::Prediction,
    /// Trials behind the fit (measured and out-of-memory).
    pub trials: usize,
    /// The fit's residual degrees of freedom (`Fit::free`).
    pub free: usize,
}

fn slot_of(resource: Resource) -> usize {
    match resource {
        Resource::Host => 0,
        Resource::Gpu => 1,
    }
}

impl Learner {
    /// Learns from the finished trials it has not seen, `trials` in number
    /// order. The pass starts at the first trial not yet seen finished, so
    /// a turn costs the trials still running and the new ones, not the
    /// study's length; what each adds to the sums is counted once.
    pub fn update(&mut self, trials: &[Arc<Trial>]) {
        for t in trials.iter().skip(self.settled) {
            if !t.state.is_finished() || self.seen.contains(&t.number) {
                continue;
            }
            self.seen.insert(t.number);
            // The values it ran with, made once for both models.
            let mut values: Option<Map<String, Value>> = None;
            for (resource, model) in [
                (Resource::Host, &mut self.host),
                (Resource::Gpu, &mut self.gpu),
            ] {
                let slot = slot_of(resource);
                let taught = lesson(t, resource);
                if taught != Lesson::Nothing {
                    let ran = values.get_or_insert_with(|| ran_with(t));
                    if model.learn(taught, ran) {
                        (self.fits[slot], self.ranked[slot]) = (None, None);
                        if let Lesson::Above(_) = taught {
                            self.ran_out[slot].push((t.number, model.row(ran)));
                        }
                    }
                }
                for (values, peak) in ran_out_legs(t, resource) {
                    if model.add_censored(&values, peak) {
                        (self.fits[slot], self.ranked[slot]) = (None, None);
                        self.ran_out[slot].push((t.number, model.row(&values)));
                    }
                }
            }
        }
        while trials
            .get(self.settled)
            .is_some_and(|t| self.seen.contains(&t.number))
        {
            self.settled += 1;
        }
    }

    /// The trial that ran out of memory of `resource` whose point the
    /// point `values` needs at least as much as (the smallest such); None
    /// before a prediction can be made, or when there is none.
    pub fn ran_out(&mut self, values: &Map<String, Value>, resource: Resource) -> Option<RanOut> {
        let slot = slot_of(resource);
        self.ranked(resource)?;
        let (ranked, fit) = (self.ranked[slot].as_ref()?, self.fits[slot].as_ref()?);
        let xa = fit.full(values);
        let ya = fit.ln_peak(&xa);
        // `at_least` needs a's ln need above b's: past a's own, none can
        // be; the first that is, is the one that needs least.
        ranked
            .iter()
            .take_while(|(y, _)| *y <= ya + 1e-9)
            .find(|(_, k)| fit.at_least_rows(&xa, &fit.dense(&self.ran_out[slot][*k].1)))
            .map(|&ranked| self.ran_out_at(slot, ranked))
    }

    /// The trial that ran out of memory of `resource` whose point the fit
    /// says needs least (its need: a bound above the limit it ran under);
    /// None before a prediction can be made, or when none ran out.
    pub fn least_ran_out(&mut self, resource: Resource) -> Option<RanOut> {
        let &first = self.ranked(resource)?.first()?;
        Some(self.ran_out_at(slot_of(resource), first))
    }

    /// A `ranked` entry (ln need, index into `ran_out`) as a `RanOut`.
    fn ran_out_at(&self, slot: usize, (ln_need, k): (f64, usize)) -> RanOut {
        RanOut {
            number: self.ran_out[slot][k].0,
            need_mib: ln_need.exp(),
        }
    }

    /// `ranked` of `resource`, made for the current fit if it was not.
    fn ranked(&mut self, resource: Resource) -> Option<&[(f64, usize)]> {
        let slot = slot_of(resource);
        self.fit(resource)?;
        if self.ranked[slot].is_none() {
            let fit = self.fits[slot].as_ref()?;
            let mut ranked: Vec<(f64, usize)> = self.ran_out[slot]
                .iter()
                .enumerate()
                .map(|(k, (_, row))| (fit.predict_row(row), k))
                .collect();
            // Stable: of equal needs, the earlier trial first, as before.
            ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
            self.ranked[slot] = Some(ranked);
        }
        self.ranked[slot].as_deref()
    }

    /// The fit of `resource`, solved again only after a trial taught it
    /// something; None before `MIN_MEASURED` trials measured it.
    pub fn fit(&mut self, resource: Resource) -> Option<&super::Fit> {
        let (model, slot) = match resource {
            Resource::Host => (&self.host, 0),
            Resource::Gpu => (&self.gpu, 1),
        };
        if model.measured < MIN_MEASURED {
            return None;
        }
        if self.fits[slot].is_none() {
            self.fits[slot] = model.fit();
        }
        self.fits[slot].as_ref()
    }

    /// What the point `values` is predicted to need of `resource`; None
    /// before `MIN_MEASURED` trials measured it.
    pub fn predict(
        &mut self,
        values: &Map<String, Value>,
        resource: Resource,
    ) -> Option<Predicted> {
        let fit = self.fit(resource)?;
        Some(Predicted {
            resource,
            at: fit.predict(values),
            trials: fit.trials,
            free: fit.free,
        })
    }
}

/// A sampled point's values as the model reads them.
pub fn values_of(params: &std::collections::BTreeMap<String, ParamValue>) -> Map<String, Value> {
    params
        .iter()
        .map(|(k, v)| (k.clone(), v.to_json()))
        .collect()
}

impl Predicted {
    /// The words of a trial's block: "812 MiB of host memory (700 to 950,
    /// from 5 trials)".
    pub fn words(&self) -> String {
        let of = match self.resource {
            Resource::Host => "host memory",
            Resource::Gpu => "GPU memory",
        };
        format!(
            "{:.0} MiB of {of} ({:.0} to {:.0}, from {} trial(s))",
            self.at.peak_mib, self.at.low_mib, self.at.high_mib, self.trials
        )
    }

    /// The trial's user attributes that record it.
    pub fn attrs(&self) -> [(&'static str, Value); 4] {
        let r = |x: f64| Value::from(x.round());
        [
            ("predicted_peak_mib", r(self.at.peak_mib)),
            ("predicted_low_mib", r(self.at.low_mib)),
            ("predicted_high_mib", r(self.at.high_mib)),
            (
                "predicted_of",
                Value::from(match self.resource {
                    Resource::Host => "host-pss",
                    Resource::Gpu => "gpu",
                }),
            ),
        ]
    }
}
