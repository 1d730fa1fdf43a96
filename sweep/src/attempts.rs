//! A program trial's attempts (the space's `auto_fix: true`): when its
//! attempt fails in a way a setting fixes, and crowding is ruled out, the
//! next attempt runs in the same trial with the fix applied
//! (`supervise::autofix`); the trial keeps the parameters the sampler
//! asked for, and its value is its last attempt's. What the journal keeps
//! of them: `attempts`, `auto_fix` (each change, in words), `knobs` (the
//! settings as the last attempt ran them), `effective_params` (a parameter
//! whose flag was turned, at its new value) and `config_used` (the last
//! attempt's config, when a fix changed it).

use crate::program::Started;
use crate::trials::{Look, Proc, Running};
use common::wire::failure::Class;
use common::wire::program::{AutoFix as Account, ProgramLeg, ProgramStatus};
use common::wire::run_dir::TrialDir;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Instant;
use supervise::autofix::{Attempt, Failure, Fixer, Next};
use supervise::leg::Ended;

/// A program trial whose last attempt has ended.
pub(crate) struct Done {
    pub ended: Ended,
    pub cwd: PathBuf,
    pub env_said: Vec<String>,
    pub attempt: Attempt,
    /// With `auto_fix`: the attempts, the settings, what was not possible.
    pub account: Option<Account>,
}

impl Done {
    /// A trial's attempt that exited with `status`, ended, without
    /// `auto_fix`.
    pub fn without_fixes(s: Started, status: ExitStatus) -> Done {
        let Started {
            leg,
            cwd,
            env_said,
            attempt,
            ..
        } = s;
        Done {
            ended: leg.end(status).in_a_sweep(),
            cwd,
            env_said,
            attempt,
            account: None,
        }
    }
}

impl Look<'_> {
    /// Ends `r`'s attempt that exited with `status` (`busy`: the slots of
    /// the others running). True: another attempt of it started, and it
    /// runs on; false: its `proc` is `Ended`, for `finish` to record.
    pub(crate) fn end_attempt(
        &mut self,
        mut r: Running,
        status: ExitStatus,
        busy: &[usize],
    ) -> anyhow::Result<(Running, bool)> {
        let s = match r.proc {
            Proc::Program(p) => *p,
            other => {
                r.proc = other;
                return Ok((r, false));
            }
        };
        let space = &self.sweep.space;
        let Some(af) = space.program.as_ref().and_then(|p| p.auto_fix.as_ref()) else {
            r.proc = Proc::Ended(Box::new(Done::without_fixes(s, status)));
            return Ok((r, false));
        };
        let Started {
            leg,
            cwd,
            env_said,
            attempt,
            number,
            spec,
            ..
        } = s;
        let ended = leg.end(status).in_a_sweep();
        let mut leg = ended.leg.clone();
        leg.changed = attempt.changed.clone();
        leg.resumed_from = attempt.resumed_from.clone();
        let class = leg.class;
        let fixable = r.ending.is_none()
            && leg.status == ProgramStatus::Failed
            && supervise::leg::config_caused(class);
        // On a shared device, the rerun alone comes first (`outcome`).
        let crowded = r.crowd.max(self.slots.crowd(r.slot, busy) + 1) > 1;
        let run = TrialDir::new(std::path::absolute(r.dir.path())?).run();
        let mut fixer = Fixer::new(&af.knobs, &run, Some(cwd.clone()));
        let mut account = Account {
            attempts: number,
            ..Account::default()
        };
        let next = if !fixable || crowded {
            None
        } else {
            let at = Failed {
                attempt: &attempt,
                number,
                failure: Failure::of(&ended),
            };
            next_attempt(&mut fixer, af, &at, &mut account)?
        };
        if let Some(a) = next {
            match self.restart(r.number, &r.dir, &spec, &env_said, a, number + 1) {
                Ok(started) => {
                    r.ran_out_legs.extend(ran_out_leg(&attempt, &leg));
                    r.proc = Proc::Program(Box::new(started));
                    r.attempt_started = Instant::now();
                    r.earlier.push(leg);
                    return Ok((r, true));
                }
                Err(e) => {
                    account.stopped = Some(format!("the next attempt could not start: {e:#}"));
                }
            }
        }
        // Fixes made before its first attempt count as earlier ones.
        if !r.earlier.is_empty() || account.stopped.is_some() || !attempt.changed.is_empty() {
            account.knobs = fixer.effective(&attempt).knobs;
        }
        r.proc = Proc::Ended(Box::new(Done {
            ended: Ended { leg, ..ended },
            cwd,
            env_said,
            attempt,
            account: Some(account),
        }));
        Ok((r, false))
    }
}

impl Look<'_> {
    /// Attempt `number` of trial `trial` (in `dir`), `a`, started in place
    /// of the one that ended.
    fn restart(
        &self,
        trial: u64,
        dir: &TrialDir,
        spec: &supervise::child::Spec,
        env_said: &[String],
        a: Attempt,
        number: u32,
    ) -> anyhow::Result<Started> {
        for c in &a.changed {
            common::say!("train sweep: trial {trial} attempt {number}: {c}");
        }
        let (space, settings) = (&self.sweep.space, &self.sweep.settings);
        let hang = settings
            .hang_grace_s
            .map(std::time::Duration::from_secs_f64);
        Started::again(space, dir, spec, env_said.to_vec(), a, number, hang)
    }
}

/// An attempt that failed in a way a setting fixes.
struct Failed<'a> {
    attempt: &'a Attempt,
    number: u32,
    failure: Failure,
}

/// The attempt after `at`, or None with why in `account`.
fn next_attempt(
    fixer: &mut Fixer,
    af: &crate::space::AutoFix,
    at: &Failed,
    account: &mut Account,
) -> anyhow::Result<Option<Attempt>> {
    if at.number >= af.max_attempts {
        account.stopped = Some(format!("max_attempts {} reached", af.max_attempts));
        return Ok(None);
    }
    Ok(match fixer.next(at.attempt, at.number, &at.failure)? {
        Next::Attempt(a, passed) => {
            account.not_possible = passed;
            Some(a)
        }
        Next::None {
            stopped,
            not_possible,
        } => {
            account.stopped = Some(stopped);
            account.not_possible = not_possible;
            None
        }
    })
}

/// The journal attributes of a trial's attempts, when it had more than one
/// or a fix was looked for.
pub(crate) fn attrs(d: &Done, earlier: &[ProgramLeg]) -> Vec<(&'static str, Value)> {
    let Some(account) = &d.account else {
        return vec![];
    };
    let mut attrs = vec![("attempts", Value::from(account.attempts))];
    let changed: Vec<Value> = earlier
        .iter()
        .chain([&d.ended.leg])
        .flat_map(|l| l.changed.iter().cloned().map(Value::from))
        .collect();
    if !changed.is_empty() {
        attrs.push(("auto_fix", Value::from(changed)));
    }
    if !account.knobs.is_empty() {
        let knobs: serde_json::Map<String, Value> = account
            .knobs
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        attrs.push(("knobs", Value::Object(knobs)));
    }
    let params = effective_params(&d.attempt);
    if !params.is_empty() {
        attrs.push(("effective_params", Value::Object(params)));
    }
    if !earlier.is_empty() && d.attempt.config != earlier[0].config {
        if let Some(c) = &d.attempt.config {
            attrs.push(("config_used", Value::from(c.clone())));
        }
    }
    if let Some(why) = &account.stopped {
        attrs.push(("auto_fix_stopped", Value::from(why.clone())));
    }
    if !account.not_possible.is_empty() {
        attrs.push((
            "auto_fix_not_possible",
            Value::from(account.not_possible.clone()),
        ));
    }
    attrs
}

/// An attempt that ran out of memory before the one after it, as
/// `ran_out_legs` records it: the flags turned by then (`values`, by their
/// bare names) and its peaks; None for an attempt that ended otherwise.
fn ran_out_leg(a: &Attempt, leg: &ProgramLeg) -> Option<Value> {
    if leg.class != Some(Class::OutOfMemory) {
        return None;
    }
    let mut entry = serde_json::Map::new();
    entry.insert("values".into(), Value::Object(effective_params(a)));
    if let Some(m) = leg.peak.host_pss_mib {
        entry.insert("peak_host_pss_mib".into(), Value::from(m));
    }
    if let Some(m) = leg.peak.gpu_each_mib() {
        entry.insert("peak_gpu_mib".into(), Value::from(m));
    }
    Some(Value::Object(entry))
}

/// The flags the fixes turned, by their bare names (`--bsz=64` -> `bsz`),
/// at their last values: a parameter of the same name took that value.
pub(crate) fn effective_params(a: &Attempt) -> serde_json::Map<String, Value> {
    use diagnose::keys::Scalar;
    let mut out = serde_json::Map::new();
    for (place, value) in &a.flags_set {
        let name = place.trim_start_matches('-');
        let name = name.split('=').next().unwrap_or(name).to_string();
        let v = match value {
            Scalar::Bool(b) => Value::from(*b),
            Scalar::Int(n) => Value::from(*n),
            Scalar::Str(s) => Value::from(s.clone()),
            Scalar::Null | Scalar::Other => continue,
        };
        out.insert(name, v);
    }
    out
}
