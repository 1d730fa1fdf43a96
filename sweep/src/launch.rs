//! Starting trials: a free slot, a trial claimed from the storage under
//! its lock (an interrupted trial again before a new draw), its threads
//! (its share of the cores free as it starts), its files, its block, and
//! its process through supervise's child module: a `train` of our model,
//! or the space's program. A trial that cannot start fails alone, recorded
//! with why; the sweep goes on.

use crate::banner::{print_block, print_program_block};
use crate::context::Sweep;
use crate::cores::Watch;
use crate::fitted::{fitted_attrs, Attrs};
use crate::history::{rerun_reason, Digest};
use crate::journal::{Outcome, Study, TrialRecord, TrialRef};
use crate::memory_model::{
    fits_as_fixed, refusal, values_of, Learner, Predicted, Refusal, Resource, Room,
};
use crate::outcome::{self, MESSAGE_CHARS};
use crate::owner;
use crate::packing::Held;
use crate::placement;
use crate::program::{self, Launch};
use crate::sampler::Sampler;
use crate::slots::Slots;
use crate::space::Param;
use crate::storage::Storage;
use crate::trial::ParamValue;
use crate::trials::{Proc, Running, GRACE};
use anyhow::Context;
use common::bad_input;
use common::wire::failure::Class;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Instant;
use supervise::autofix::Fixer;
use supervise::child::{Child, Spec};
use supervise::events::Bell;

/// A trial to run: its values, and the trial it runs again (if it does).
type Next = (BTreeMap<String, ParamValue>, Option<u64>);

/// What starting trials needs: the sweep, its storage, the sampler, the
/// slots, the bell the trials ring, and the cores free now.
pub(crate) struct Starter<'a> {
    pub sweep: &'a Sweep,
    pub storage: &'a dyn Storage,
    pub sampler: &'a dyn Sampler,
    pub slots: &'a Slots,
    pub bell: &'a Bell,
    pub cores: Cores<'a>,
    /// What each point is predicted to need, learned from the trials that
    /// ended.
    pub memory: &'a RefCell<Learner>,
    /// The study's history folded in as it goes (what to run again, how
    /// many drawn).
    pub digest: &'a RefCell<Digest>,
    /// The GPUs as last read (their free memory with what our trials hold
    /// there): the room a point on one would run in.
    pub gpus: &'a [placement::Gpu],
    /// Packing by predicted peaks (`packing`), with the largest peaks
    /// measured so far; None: every free slot starts a trial.
    pub packing: Option<crate::measured::Largest>,
}

/// The sweep's readings of the cores free (read as a trial on threads
/// starts, not at every look), and the threads a trial was last said to
/// get (said again when they change).
pub(crate) struct Cores<'a> {
    pub watch: &'a RefCell<Watch>,
    pub said: &'a Cell<Option<i32>>,
}

impl Starter<'_> {
    /// Starts trials in free slots, each claimed from the storage (other
    /// workers may share it). True: nothing is left to claim.
    pub fn launch(&self, trials: &mut Vec<Running>, cap: u64) -> anyhow::Result<bool> {
        loop {
            let busy: Vec<usize> = trials.iter().map(|t| t.slot).collect();
            let Some(slot) = self.slots.free(&busy) else {
                return Ok(false);
            };
            let mut chosen = None;
            let mut waiting = false;
            let made = self
                .storage
                .claim_trial(self.sweep.study_id, &mut |study| {
                    let Some((values, from)) = self.next_trial(study, cap)? else {
                        return Ok(None);
                    };
                    let mut record = self.record(&values, from);
                    // Under the lock the next number is the study's length.
                    let run = self.sweep.trial_dir(study.trials.len() as u64).run();
                    record.user_attrs.insert(
                        "run_dir".into(),
                        Value::from(run.path().display().to_string()),
                    );
                    // The trials at once when it started: what `--parallel
                    // auto` compares trials per hour by.
                    record
                        .user_attrs
                        .insert("at_once".into(), Value::from(self.slots.open()));
                    // A device-side assert runs again to name its kernel.
                    let blocking =
                        from.and_then(|r| rerun_reason(study, r)) == Some(outcome::RERUN_BLOCKING);
                    let predicted = self.predict(study, slot, &values);
                    for (k, v) in predicted.iter().flat_map(Predicted::attrs) {
                        record.user_attrs.insert(k.into(), v);
                    }
                    let refused =
                        self.refused(&values_of(&values), predicted.as_ref(), from, slot, trials);
                    // No room beside the trials running: drawn again later.
                    if refused.is_none() && !self.admits(predicted.as_ref(), slot, trials) {
                        waiting = true;
                        return Ok(None);
                    }
                    chosen = Some((values, from, blocking, predicted, refused));
                    Ok(Some(record))
                })?;
            let (Some(made), Some((values, retried_from, blocking, predicted, refused))) =
                (made, chosen)
            else {
                return Ok(!waiting);
            };
            // With auto_fix a point that does not fit as sampled starts
            // with the fixes predicted to fit (`start_program`).
            let unfit = match (predicted, refused) {
                (Some(p), Some(r)) if !self.fixes() => {
                    self.refuse(&made, &values, &p, &r.refusal)?;
                    continue;
                }
                (_, r) => r,
            };
            let crowd = self.slots.crowd(slot, &busy) + 1;
            let threads = self.threads(slot, made.number);
            let trial = Claimed {
                made,
                slot,
                values,
                retried_from,
                blocking,
                crowd,
                threads,
                predicted,
                unfit,
            };
            let started = if self.sweep.space.program.is_some() {
                self.start_program(trial)?
            } else {
                self.start_train(trial)?
            };
            trials.extend(started);
        }
    }

    /// What the point `values` is predicted to need where `slot` runs it
    /// (its GPU's memory, or the host's), from the trials that ended; None
    /// with `memory_model: false`.
    fn predict(
        &self,
        study: &Study,
        slot: usize,
        values: &BTreeMap<String, ParamValue>,
    ) -> Option<Predicted> {
        if !self.sweep.space.memory_model {
            return None;
        }
        let resource = match self.slots.slots[slot].gpu {
            Some(_) => Resource::Gpu,
            None => Resource::Host,
        };
        let mut memory = self.memory.borrow_mut();
        memory.update(&study.trials);
        memory.predict(&values_of(values), resource)
    }

    /// The memory a trial in `slot` would run in (`room`), with `trials`
    /// running.
    fn room(&self, slot: usize, trials: &[Running]) -> Option<Room> {
        match self.slots.slots[slot].gpu {
            Some(g) => crate::room::gpu(self.gpus, g, &self.slots.groups.label(g)),
            None => {
                let ours = trials.iter().filter_map(Running::host_peak_mib).sum();
                crate::room::host(self.sweep.settings.memory_budget_mib, ours)
            }
        }
    }

    /// Whether a point predicted `predicted` starts now in `slot` beside
    /// `trials` (`packing::admits`; always without packing): on the CPU
    /// against the host memory for our trials, on a GPU against that GPU's
    /// free memory as last read (what our trials held there counted in),
    /// the trials on the same device kept room for.
    fn admits(&self, predicted: Option<&Predicted>, slot: usize, trials: &[Running]) -> bool {
        let Some(largest) = self.packing else {
            return true;
        };
        let device = self.slots.slots[slot].gpu;
        let held: Vec<Held> = trials
            .iter()
            .filter(|r| self.slots.slots[r.slot].gpu == device)
            .map(|r| Held {
                now_mib: match device {
                    Some(_) => r.gpu_peak_mib(),
                    None => r.host_peak_mib(),
                },
                predicted_mib: r.predicted_mib,
            })
            .collect();
        let (room, largest) = match device {
            Some(g) => {
                let free = self.gpus.iter().find(|x| x.index == g);
                match (free, largest.gpu) {
                    (Some(x), Some(l)) => (x.free_mib as f64, l),
                    _ => return true,
                }
            }
            None => {
                let Some(l) = largest.host else {
                    return true;
                };
                let ours: f64 = held.iter().filter_map(|h| h.now_mib).sum();
                let budget = self.sweep.settings.memory_budget_mib;
                (budget.unwrap_or(crate::measured::available_mib() + ours), l)
            }
        };
        crate::packing::admits(predicted.map(|p| p.at.high_mib), room, &held, largest)
    }

    /// The space has `auto_fix: true`.
    fn fixes(&self) -> bool {
        let program = self.sweep.space.program.as_ref();
        program.is_some_and(|p| p.auto_fix.is_some())
    }

    /// Whether a new point (`from`: None) predicted `predicted` is refused
    /// (`memory_model::refusal`), in `slot` beside `trials`; the machine is
    /// read only for a point that may be. With `auto_fix` such a point
    /// starts with the fixes predicted to fit, if any are.
    fn refused(
        &self,
        values: &serde_json::Map<String, Value>,
        predicted: Option<&Predicted>,
        from: Option<u64>,
        slot: usize,
        trials: &[Running],
    ) -> Option<Unfit> {
        let p = predicted.filter(|p| from.is_none() && p.may_refuse())?;
        let ran_out = self.memory.borrow_mut().ran_out(values, p.resource);
        let room = self.room(slot, trials);
        let refusal = refusal(p, room.as_ref(), ran_out)?;
        Some(Unfit { refusal, room })
    }

    /// A point not run: predicted not to fit, recorded as failed with class
    /// `predicted-out-of-memory` and the limit it is above.
    fn refuse(
        &self,
        made: &TrialRef,
        values: &BTreeMap<String, ParamValue>,
        p: &Predicted,
        r: &Refusal,
    ) -> anyhow::Result<()> {
        let point: Vec<String> = values
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_json()))
            .collect();
        let message = format!("not run: predicted to need {}, {}", p.words(), r.why);
        common::say!(
            "train sweep: trial {} ({}): {message}; recorded as failed (predicted-out-of-memory); `memory_model: false` in the space runs every point",
            made.number,
            point.join(", ")
        );
        let room = ("room_mib".to_string(), Value::from(r.limit_mib.round()));
        self.record_failure(made, Class::PredictedOutOfMemory.as_str(), &message, [room])
    }

    /// A trial's threads as it starts in `slot`: its share of the cores
    /// free now (`placement::free_threads`), at most the slot's split of
    /// the cores; said when it changes.
    fn threads(&self, slot: usize, number: u64) -> Option<i32> {
        let most = self.slots.slots[slot].threads?;
        let Some(free) = self.cores.watch.borrow_mut().free() else {
            return Some(most);
        };
        let at_once = self.slots.open();
        let t = placement::free_threads(free.cores, at_once, most);
        if self.cores.said.replace(Some(t)) != Some(t) {
            let shared = match at_once {
                1 => String::new(),
                k => format!(", shared by {k} trials at once"),
            };
            let busy = match t < most {
                true => format!(
                    "; other work keeps the rest busy (with the cores free it would get {most})"
                ),
                false => String::new(),
            };
            common::say!(
                "train sweep: placement: trial {number} gets {t} thread(s): {:.1} of {} core(s) were free over the last {:.1} s (what our own trials use counts as free){shared}{busy}",
                free.cores,
                free.cpus,
                free.seconds
            );
        }
        Some(t)
    }

    /// What to run next, decided on the study as it stands under the lock:
    /// a trial whose every run was interrupted runs again (its parameters,
    /// `retried_from` its first number), else the sampler's next draw while
    /// the sweep has trials left. None: nothing left to claim.
    fn next_trial(&self, study: &Study, cap: u64) -> anyhow::Result<Option<Next>> {
        let sweep = self.sweep;
        let (first_root, index) = {
            let mut digest = self.digest.borrow_mut();
            let roots = digest.interrupted_roots(study);
            (roots.first().copied(), digest.drawn(study))
        };
        if let Some(root) = first_root {
            // The journal holds the sampled values; the fixed ones are the
            // space's.
            let mut values = sweep.search.fixed.clone();
            values.extend(study.trials[root as usize].params.clone());
            return Ok(Some((values, Some(root))));
        }
        if index >= cap {
            return Ok(None);
        }
        let values = self
            .sampler
            .sample(&sweep.search, &study.trials, sweep.space.metric.goal, index)
            .map_err(|e| bad_input!("{}: {e:#}", sweep.settings.space_name))?;
        Ok(Some((values, None)))
    }

    /// The storage's record of a trial with these values.
    fn record(
        &self,
        values: &BTreeMap<String, ParamValue>,
        retried_from: Option<u64>,
    ) -> TrialRecord {
        let params = &self.sweep.space.params;
        let sampled = |n: &str| {
            params
                .iter()
                .any(|(m, p)| m == n && matches!(p, Param::Sampled(_)))
        };
        let mut record = TrialRecord {
            distributions: params
                .iter()
                .filter_map(|(n, p)| match p {
                    Param::Sampled(d) if values.contains_key(n) => Some((n.clone(), d.clone())),
                    _ => None,
                })
                .collect(),
            params: values
                .iter()
                .filter(|(n, _)| sampled(n))
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect(),
            ..TrialRecord::default()
        };
        record
            .user_attrs
            .insert(owner::ATTR.into(), self.sweep.owner.clone());
        if let Some(from) = retried_from {
            record
                .user_attrs
                .insert("retried_from".into(), Value::from(from));
        }
        record
    }

    /// A trial of our model: its config from the space's values, then a
    /// `train --config` in its own process group with a keeper.
    fn start_train(&self, t: Claimed) -> anyhow::Result<Option<Running>> {
        let sweep = self.sweep;
        let dir = sweep.trial_dir(t.made.number);
        std::fs::create_dir_all(dir.path())?;
        // A combination the schema refuses is a failed trial, not a crash.
        let config = match sweep.space.apply(&sweep.settings.base, &t.values) {
            Ok(c) => c,
            Err(e) => return self.fail(&t.made, "config", &format!("{e:#}")),
        };
        let cfg_path = dir.config();
        common::files::write_atomic(&cfg_path, config.to_yaml().as_bytes())?;
        print_block(
            t.made.number,
            &config,
            &t.values,
            t.retried_from,
            &self.slots.runs_on(t.slot),
        );
        let mut argv = vec![
            sweep.train.display().to_string(),
            "--config".into(),
            cfg_path.display().to_string(),
            "--out".into(),
            dir.run().path().display().to_string(),
        ];
        if let Some(n) = t.threads {
            argv.extend(["--threads".into(), n.to_string()]);
        }
        let mut env = Vec::new();
        match self.slots.devices(t.slot) {
            Some(g) => env.push(("CUDA_VISIBLE_DEVICES".into(), g)),
            None if self.slots.inherit_gpus => {}
            None if self.slots.all_cpu() => argv.extend(["--device".into(), "cpu".into()]),
            None => {}
        }
        let spec = Spec {
            argv,
            cwd: None,
            env,
            log: dir.log(),
            own_metrics: None,
            echo: false,
            grace: GRACE,
            bell: self.bell.clone(),
            preload: None,
        };
        // train's own output is only logged: it writes its metrics.csv.
        let child = Child::spawn(&spec, None)?;
        supervise::group::write_pid_file(&dir.pid(), child.pid())?;
        Ok(Some(t.running(Proc::Train(Box::new(child)), dir)))
    }

    /// A program trial: its files, its block, its command (`program`).
    fn start_program(&self, mut t: Claimed) -> anyhow::Result<Option<Running>> {
        let sweep = self.sweep;
        let dir = sweep.trial_dir(t.made.number);
        std::fs::create_dir_all(dir.path())?;
        let unfit = t.unfit.take();
        let launch = Launch {
            number: t.made.number,
            dir: &dir,
            values: &t.values,
            gpu: self.slots.devices(t.slot),
            threads: t.threads.map(|n| n.max(1) as usize),
            launch_blocking: t.blocking,
            torch: sweep.torch,
            grace: GRACE,
            bell: self.bell,
            preload: sweep.preload.as_ref(),
            hang_grace: sweep
                .settings
                .hang_grace_s
                .map(std::time::Duration::from_secs_f64),
        };
        let prepared = match program::prepare(&sweep.space, &sweep.settings, &launch) {
            Ok(p) => p,
            Err(e) => return self.fail(&t.made, Class::Other.as_str(), &format!("{e:#}")),
        };
        let mut start_attrs = Vec::new();
        let prepared = match (unfit, t.predicted) {
            (Some(why), Some(p)) => match self.fit_first(&t, prepared, &p, &why) {
                Ok(Some((prepared, fitted, attrs))) => {
                    (t.predicted, start_attrs) = (Some(fitted), attrs);
                    prepared
                }
                Ok(None) => return Ok(None),
                Err(e) => return self.fail(&t.made, Class::Other.as_str(), &format!("{e:#}")),
            },
            _ => prepared,
        };
        let started = match program::start(&sweep.space, &launch, prepared) {
            Ok(s) => s,
            Err(e) => return self.fail(&t.made, Class::Other.as_str(), &format!("{e:#}")),
        };
        let mut runs_on = self.slots.runs_on(t.slot);
        if started.forked {
            runs_on.push_str(", forked from the preload server");
        }
        print_program_block(
            t.made.number,
            &t.values,
            t.retried_from,
            &started.argv,
            &runs_on,
            t.blocking,
            t.predicted.map(|p| p.words()),
        );
        let mut running = t.running(Proc::Program(Box::new(started)), dir);
        running.start_attrs = start_attrs;
        Ok(Some(running))
    }

    /// A point predicted not to fit as sampled (`unfit`, predicted `p`),
    /// with `auto_fix`: its first attempt with the fixes predicted to fit
    /// (`fitted::climb`), said, with what it is predicted to need so and
    /// the attributes that record it; when none is, the point is refused
    /// (None).
    fn fit_first(
        &self,
        t: &Claimed,
        mut prepared: program::Prepared,
        p: &Predicted,
        unfit: &Unfit,
    ) -> anyhow::Result<Option<(program::Prepared, Predicted, Attrs)>> {
        let program = self.sweep.space.program.as_ref();
        let af = program
            .and_then(|p| p.auto_fix.as_ref())
            .context("auto_fix")?;
        let run = prepared.dir.run();
        let mut fixer = Fixer::new(&af.knobs, &run, Some(prepared.cwd.clone())).before_start();
        let room = &unfit.room;
        let mut memory = self.memory.borrow_mut();
        let mut check = |v: &serde_json::Map<String, Value>| {
            let q = memory.predict(v, p.resource)?;
            let least = memory.least_ran_out(p.resource);
            Some((q, fits_as_fixed(&q, room.as_ref(), least)))
        };
        let values = values_of(&t.values);
        let rungs = af.max_attempts.saturating_sub(1);
        let fitted =
            crate::fitted::climb(&mut fixer, &prepared.attempt, &values, rungs, &mut check)?;
        drop(memory);
        let Some(f) = fitted else {
            let why = Refusal {
                why: format!(
                    "{}; no fix auto_fix can make (at most {rungs}) is predicted to fit",
                    unfit.refusal.why
                ),
                ..unfit.refusal.clone()
            };
            self.refuse(&t.made, &t.values, p, &why)?;
            return Ok(None);
        };
        common::say!(
            "train sweep: trial {}: predicted to need {} as sampled, {}; starts with auto_fix's fixes, predicted to need {}: {}",
            t.made.number,
            p.words(),
            unfit.refusal.why,
            f.predicted.words(),
            f.attempt.changed.join("; ")
        );
        let attrs = fitted_attrs(&f, Some(p));
        prepared.attempt = f.attempt;
        Ok(Some((prepared, f.predicted, attrs)))
    }

    /// A trial that could not start: failed with its class and message.
    fn fail(&self, made: &TrialRef, class: &str, message: &str) -> anyhow::Result<Option<Running>> {
        let shown: String = message.chars().take(MESSAGE_CHARS).collect();
        common::say!("train sweep: trial {}: {shown}", made.number);
        self.record_failure(made, class, message, None)?;
        Ok(None)
    }

    /// `made` finished as failed: its class, its message (clipped) and any
    /// `more` attributes.
    fn record_failure(
        &self,
        made: &TrialRef,
        class: &str,
        message: &str,
        more: impl IntoIterator<Item = (String, Value)>,
    ) -> anyhow::Result<()> {
        let message: String = message.chars().take(MESSAGE_CHARS).collect();
        let mut attrs = vec![
            ("error_class".to_string(), Value::from(class)),
            ("error_message".to_string(), Value::from(message)),
        ];
        attrs.extend(more);
        self.storage.finish(made.id, &attrs, Outcome::Fail)
    }
}

/// A trial claimed for a slot, before its process starts.
struct Claimed {
    made: TrialRef,
    slot: usize,
    values: BTreeMap<String, ParamValue>,
    retried_from: Option<u64>,
    /// A rerun with CUDA_LAUNCH_BLOCKING=1.
    blocking: bool,
    /// Trials on its slot's device, itself included.
    crowd: usize,
    /// Its CPU threads (None: torch's own default, a GPU trial alone).
    threads: Option<i32>,
    /// Its predicted peak, once the sweep has measured enough trials.
    predicted: Option<Predicted>,
    /// Predicted not to fit as sampled, with `auto_fix`.
    unfit: Option<Unfit>,
}

/// Why a point does not fit as sampled, and the room it was held against.
struct Unfit {
    refusal: Refusal,
    room: Option<Room>,
}

impl Claimed {
    fn running(self, proc: Proc, dir: common::wire::run_dir::TrialDir) -> Running {
        Running {
            number: self.made.number,
            id: self.made.id,
            proc,
            slot: self.slot,
            dir,
            started: Instant::now(),
            attempt_started: Instant::now(),
            earlier: Vec::new(),
            reported: BTreeMap::new(),
            ending: None,
            crowd: self.crowd,
            launch_blocking: self.blocking,
            predicted_mib: self.predicted.map(|p| p.at.high_mib),
            start_attrs: Vec::new(),
            ran_out_legs: Vec::new(),
        }
    }
}
