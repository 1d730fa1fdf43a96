//! With `auto_fix: true`, a new point the memory model says will not fit
//! as sampled starts with the fixes it says will: the rungs auto-fix would
//! climb after an out-of-memory (checkpointing on, then the batch halved
//! with the accumulation doubled, ...; `supervise::autofix`), climbed
//! before the first attempt, one after another, until the point as it
//! would then run (its values with the flags the rungs turned) is
//! predicted to fit. The attempts that would have run out of memory are
//! never run. A rung whose knob the model has not seen (checkpointing in a
//! sweep where no trial ran with it) moves nothing in its prediction: it
//! only lowers what a point needs, so the prediction stays on the safe side
//! and the climb goes on to a rung it can predict.

use crate::attempts::effective_params;
use crate::memory_model::Predicted;
use common::wire::failure::Class;
use serde_json::{Map, Value};
use supervise::autofix::{Attempt, Failure, Fixer, Next};

/// What a point as it would run is predicted to need, and whether that
/// fits (None: no prediction).
pub(crate) type Check<'a> = dyn FnMut(&Map<String, Value>) -> Option<(Predicted, bool)> + 'a;

/// A trial's journal attributes, known before it ends.
pub(crate) type Attrs = Vec<(&'static str, Value)>;

/// The first attempt with the fixes predicted to fit.
pub(crate) struct Fitted {
    /// Its changes (`Attempt::changed`) are every rung's, in order.
    pub attempt: Attempt,
    /// What the point needs as it runs so.
    pub predicted: Predicted,
    /// The rungs climbed.
    pub rungs: u32,
}

/// What the fixer is told the point did: ran out of memory, before any
/// step, with no figures (none was run).
fn out_of_memory() -> Failure {
    Failure {
        class: Class::OutOfMemory,
        fragmented: false,
        oom: None,
        reports: 0,
    }
}

/// `values` as `a` would run them: a parameter whose flag a rung turned at
/// its new value, a knob outside the space beside them.
fn as_run(values: &Map<String, Value>, a: &Attempt) -> Map<String, Value> {
    let mut out = values.clone();
    out.extend(effective_params(a));
    out
}

/// `first` with at most `rungs` of the out-of-memory fixes made, stopping
/// at the first whose values `check` predicts (the prediction, and whether
/// it fits); None: no rung within `rungs` is predicted to fit, or the
/// ladder ends first.
pub(crate) fn climb(
    fixer: &mut Fixer,
    first: &Attempt,
    values: &Map<String, Value>,
    rungs: u32,
    check: &mut Check,
) -> anyhow::Result<Option<Fitted>> {
    let mut a = first.clone();
    let mut changed = Vec::new();
    for rung in 1..=rungs {
        // Attempt number 0: a rung's config copy is config-1, which no
        // real attempt writes (the second writes config-2).
        a = match fixer.next(&a, 0, &out_of_memory())? {
            Next::Attempt(next, _) => next,
            Next::None { .. } => return Ok(None),
        };
        changed.extend(a.changed.iter().cloned());
        let Some((predicted, fits)) = check(&as_run(values, &a)) else {
            return Ok(None);
        };
        if fits {
            // No attempt ran out of memory: the halving rule starts afresh.
            a.out_of_memory.clear();
            a.changed = changed;
            return Ok(Some(Fitted {
                attempt: a,
                predicted,
                rungs: rung,
            }));
        }
    }
    Ok(None)
}

/// The attributes a trial started so records (with its end): the
/// prediction of what ran in place of the point's as sampled, which is
/// kept beside it, and the rungs climbed before its first attempt.
pub(crate) fn fitted_attrs(f: &Fitted, sampled: Option<&Predicted>) -> Attrs {
    let mut attrs: Attrs = f.predicted.attrs().into_iter().collect();
    if let Some(p) = sampled {
        attrs.push((
            "predicted_as_sampled_mib",
            Value::from(p.at.peak_mib.round()),
        ));
    }
    attrs.push(("fixed_before_start", Value::from(f.rungs)));
    attrs
}
