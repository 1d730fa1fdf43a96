//! How a trial's end is judged: what the driver knows when a trial's process
//! is gone (its summary, the metric per epoch, why the driver was ending it,
//! the exit status, its log's last lines, whether the disk is full) in; the
//! journal's state and the error attributes out. Pure: the driver reads the
//! files and writes the journal, this decides (a table of cases, tested).

use crate::journal::Outcome;
use crate::trial::Direction;
use common::wire::failure::Class;
use common::wire::program::{ProgramStatus, ProgramSummary};
use common::wire::run_dir;
use common::wire::train::{RunStatus, TrainSummary};
use serde_json::Value;

/// The longest `error_message` the journal gets.
pub const MESSAGE_CHARS: usize = 500;

/// Why the driver was ending a trial it started.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    Pruned(String),
    Timeout,
    Interrupted,
}

/// What is known of a trial whose process has ended.
pub struct Ended<'a> {
    /// Its summary.yaml, if it wrote a whole one.
    pub summary: Option<&'a TrainSummary>,
    /// The objective metric's value per epoch (metrics.csv), in order.
    pub values: &'a [f64],
    /// The metric's name, for messages, and its goal.
    pub metric: &'a str,
    pub goal: Direction,
    /// Why the driver was ending it, if it was.
    pub ending: Option<&'a Ending>,
    /// The signal that ended it, or its exit code.
    pub signal: Option<i32>,
    pub code: Option<i32>,
    /// "last lines of train.log: ..." or "its log is empty".
    pub log_tail: &'a str,
    pub trial_timeout_s: Option<f64>,
    /// The Slurm task this worker is (`JOBID_TASK`), if it is one.
    pub slurm_task: Option<&'a str>,
    /// "the filesystem of DIR is full (N bytes free)", when it is.
    pub disk_full: Option<&'a str>,
    /// Earlier runs of this trial that were run again for a broken
    /// allocator (`RERUN_ALLOCATOR`).
    pub allocator_reruns: usize,
}

/// The journal's outcome, the attributes that say why, and whether the full
/// disk decided it (the sweep then stops).
#[derive(Debug, PartialEq)]
pub struct Verdict {
    pub outcome: Outcome,
    pub attrs: Vec<(&'static str, Value)>,
    pub for_the_disk: bool,
}

impl Verdict {
    fn fail(class: Class, message: String) -> Verdict {
        let message: String = message.chars().take(MESSAGE_CHARS).collect();
        Verdict {
            outcome: Outcome::Fail,
            attrs: vec![
                ("error_class", Value::from(class.as_str())),
                ("error_message", Value::from(message)),
            ],
            for_the_disk: false,
        }
    }

    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.as_str())
    }

    /// The stderr word for it: "complete, val_loss 0.120000", "pruned",
    /// "failed (out-of-memory)".
    pub fn word(&self, metric: &str) -> String {
        match self.outcome {
            Outcome::Complete(v) => format!("complete, {metric} {v:.6}"),
            Outcome::Pruned => "pruned".into(),
            Outcome::Fail => format!(
                "failed ({})",
                self.attr("error_class").unwrap_or(Class::Other.as_str())
            ),
        }
    }
}

/// Judges a trial's end.
pub fn judge(e: &Ended) -> Verdict {
    // A trial that finished as it was being stopped counts as finished.
    let finished = e.summary.is_some_and(|s| s.status == RunStatus::Finished);
    let ending = if finished { None } else { e.ending };
    let verdict = match (ending, e.summary) {
        (Some(Ending::Pruned(why)), _) => Verdict {
            outcome: Outcome::Pruned,
            attrs: vec![("prune_reason", Value::from(why.clone()))],
            for_the_disk: false,
        },
        (Some(Ending::Timeout), _) => Verdict::fail(
            Class::Timeout,
            format!(
                "ran past --trial-timeout {} s",
                e.trial_timeout_s.unwrap_or_default()
            ),
        ),
        (Some(Ending::Interrupted), _) => Verdict::fail(
            Class::Interrupted,
            match e.slurm_task {
                Some(task) => format!(
                    "its worker, Slurm task {task}, got SIGTERM (scancel, its time limit or preemption)"
                ),
                None => "stopped with the sweep (Ctrl-C or SIGTERM)".into(),
            },
        ),
        (None, Some(s)) if s.status == RunStatus::Finished => finished_with(e),
        (None, Some(s)) => Verdict::fail(s.error_class.unwrap_or(Class::Other), s.stop_reason.clone()),
        (None, None) => match (e.signal, e.code) {
            (Some(sig), _) => Verdict::fail(
                Class::Killed,
                format!("killed by signal {sig} ({}); {}", signal_name(sig), e.log_tail),
            ),
            (None, code) => Verdict::fail(
                Class::Other,
                format!(
                    "train exited {} without a summary; {}",
                    code.unwrap_or(-1),
                    e.log_tail
                ),
            ),
        },
    };
    // A trial that failed while the disk is full failed for the disk, not
    // for its parameters: it runs again once there is space.
    match (&verdict.outcome, ending, e.disk_full) {
        (Outcome::Fail, None, Some(full)) => {
            let mut v = Verdict::fail(
                Class::Interrupted,
                format!(
                    "it ended while {full}; it runs again on `train sweep --resume` (its own message: {})",
                    verdict.attr("error_message").unwrap_or("none")
                ),
            );
            v.for_the_disk = true;
            v
        }
        (Outcome::Fail, None, None) => with_rerun(
            verdict,
            e.summary.and_then(|s| s.error_class),
            e.allocator_reruns,
        ),
        _ => verdict,
    }
}

/// The `rerun` attribute's prefix for a trial whose allocator broke.
pub const RERUN_ALLOCATOR: &str = "allocator-broken";
/// How many times a trial runs again for a broken allocator before its
/// failure counts: the break is the process's, not the parameters', but
/// one that comes back every time is the point's.
pub const ALLOCATOR_RERUNS: usize = 2;

/// A failure that a new process undoes (pytorch#188008: expandable
/// segments' failed mapping breaks every later allocation of the process)
/// is marked to run again with the same parameters, up to
/// `ALLOCATOR_RERUNS` times.
fn with_rerun(mut v: Verdict, class: Option<Class>, done: usize) -> Verdict {
    if class == Some(Class::AllocatorBroken) && done < ALLOCATOR_RERUNS {
        v.attrs.push((
            "rerun",
            Value::from(format!(
                "{RERUN_ALLOCATOR}: the CUDA allocator broke for the rest of its process (expandable segments, pytorch#188008); it runs again in a new process ({} of {ALLOCATOR_RERUNS})",
                done + 1
            )),
        ));
    }
    v
}

/// A trial that finished: its best finite value is the objective; none at
/// all fails it.
fn finished_with(e: &Ended) -> Verdict {
    let best = e
        .values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .reduce(|a, b| if e.goal.better(b, a) { b } else { a });
    match best {
        Some(v) => Verdict {
            outcome: Outcome::Complete(v),
            attrs: Vec::new(),
            for_the_disk: false,
        },
        None => Verdict::fail(
            Class::NonFiniteLoss,
            format!("no finite {} in {}", e.metric, run_dir::METRICS),
        ),
    }
}

/// What is known of a program trial whose process has ended: its leg's
/// summary (the supervisor's verdict over its output and exit), a W&B
/// offline summary's value, and how crowded its device was.
pub struct ProgramEnd<'a> {
    pub summary: &'a ProgramSummary,
    /// `metric.summary: last` (W&B's summary) rather than the best.
    pub summary_last: bool,
    /// The metric in the summary a W&B script's offline run wrote.
    pub wandb_value: Option<f64>,
    pub metric: &'a str,
    /// Trials on its device when it started, itself included.
    pub crowd: usize,
    /// It already ran with CUDA_LAUNCH_BLOCKING=1.
    pub launch_blocking: bool,
    pub disk_full: Option<&'a str>,
    /// Earlier runs of this trial run again for a broken allocator.
    pub allocator_reruns: usize,
}

/// The `rerun` attribute's prefix for a trial crowded out of memory.
pub const RERUN_CROWDED: &str = "crowded";
/// The `rerun` attribute of a device-side assert's rerun.
pub const RERUN_BLOCKING: &str = "CUDA_LAUNCH_BLOCKING=1";

/// Judges a program trial's end.
pub fn judge_program(e: &ProgramEnd) -> Verdict {
    let s = e.summary;
    let evidence = || match &s.advice {
        Some(a) => format!("{}; what to change: {a}", s.evidence),
        None => s.evidence.clone(),
    };
    let mut verdict = match s.status {
        ProgramStatus::Pruned => Verdict {
            outcome: Outcome::Pruned,
            attrs: vec![("prune_reason", Value::from(s.evidence.clone()))],
            for_the_disk: false,
        },
        ProgramStatus::Stopped => Verdict::fail(Class::Interrupted, s.evidence.clone()),
        ProgramStatus::Finished => {
            let read = if e.summary_last { &s.last } else { &s.best };
            match read.as_ref().map(|v| v.value).or(e.wandb_value) {
                Some(v) => Verdict {
                    outcome: Outcome::Complete(v),
                    attrs: Vec::new(),
                    for_the_disk: false,
                },
                None => Verdict::fail(
                    Class::Other,
                    format!(
                        "it exited 0 without reporting {}: no epoch, JSON or dict line, metric.regex match, $TRAINGUARD_TRIAL_DIR/metrics.csv row or W&B offline summary gave it",
                        e.metric
                    ),
                ),
            }
        }
        ProgramStatus::Failed => Verdict::fail(s.class.unwrap_or(Class::Other), evidence()),
    };
    if verdict.outcome != Outcome::Fail || s.status == ProgramStatus::Stopped {
        return verdict;
    }
    if let Some(full) = e.disk_full {
        let mut v = Verdict::fail(
            Class::Interrupted,
            format!("it ended while {full}; it runs again on `train sweep --resume` (its own message: {})", s.evidence),
        );
        v.for_the_disk = true;
        return v;
    }
    // Not the trial's fault: run again with the same parameters. An
    // out-of-memory at the trial's own address-space limit is its own,
    // however many trials share the host.
    let sigkill = s.legs.last().and_then(|l| l.signal) == Some(libc::SIGKILL);
    let own_limit = s.legs.last().and_then(|l| l.peak.address_limit_mib);
    let rerun = match s.class {
        Some(Class::OutOfMemory) if own_limit.is_some() => None,
        Some(Class::OutOfMemory) | Some(Class::Killed) if e.crowd > 1 && (s.class == Some(Class::OutOfMemory) || sigkill) => Some(format!(
            "{RERUN_CROWDED}: out of memory while sharing its device with {} other trial(s); it runs again with one trial fewer there",
            e.crowd - 1
        )),
        Some(Class::DeviceSideAssert) if !e.launch_blocking => Some(RERUN_BLOCKING.to_string()),
        _ => None,
    };
    if let Some(why) = rerun {
        verdict.attrs.push(("rerun", Value::from(why)));
        return verdict;
    }
    with_rerun(verdict, s.class, e.allocator_reruns)
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGBUS => "SIGBUS",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::wire::Versioned;

    fn summary(status: RunStatus, class: Option<Class>, reason: &str) -> TrainSummary {
        let mut s = TrainSummary::example();
        s.status = status;
        s.error_class = class;
        s.stop_reason = reason.into();
        s
    }

    fn ended<'a>(summary: Option<&'a TrainSummary>, values: &'a [f64]) -> Ended<'a> {
        Ended {
            summary,
            values,
            metric: "val_loss",
            goal: Direction::Minimize,
            ending: None,
            signal: None,
            code: Some(0),
            log_tail: "its log is empty",
            trial_timeout_s: Some(60.0),
            slurm_task: None,
            disk_full: None,
            allocator_reruns: 0,
        }
    }

    fn class_and_message(v: &Verdict) -> (Outcome, &str, &str) {
        (
            v.outcome,
            v.attr("error_class").unwrap_or("-"),
            v.attr("error_message").unwrap_or("-"),
        )
    }

    #[test]
    fn a_finished_trial_takes_its_best_finite_value_for_its_goal() {
        let done = summary(RunStatus::Finished, None, "completed 3 epochs");
        let values = [0.5, f64::NAN, 0.2, 0.3];
        let min = judge(&ended(Some(&done), &values));
        assert_eq!(min.outcome, Outcome::Complete(0.2));
        assert!(min.attrs.is_empty());
        assert_eq!(min.word("val_loss"), "complete, val_loss 0.200000");
        let mut e = ended(Some(&done), &values);
        e.goal = Direction::Maximize;
        assert_eq!(judge(&e).outcome, Outcome::Complete(0.5));
    }

    #[test]
    fn the_table_of_ends() {
        let done = summary(RunStatus::Finished, None, "completed 3 epochs");
        let oom = summary(
            RunStatus::Failed,
            Some(Class::OutOfMemory),
            "out of memory at micro-batch 1",
        );
        let unclassed = summary(RunStatus::Failed, None, "something else");
        let pruned = Ending::Pruned("median".into());
        type Case<'a> = (
            &'a str,
            Option<&'a TrainSummary>,
            &'a [f64],
            Option<&'a Ending>,
            Option<i32>,
            Option<i32>,
            Option<&'a str>,
            (Outcome, &'a str, &'a str),
        );
        let cases: Vec<Case> = vec![
            (
                "finished, no finite metric",
                Some(&done),
                &[f64::NAN],
                None,
                None,
                Some(0),
                None,
                (Outcome::Fail, "non-finite-loss", "no finite val_loss in metrics.csv"),
            ),
            (
                "a summary with its class",
                Some(&oom),
                &[],
                None,
                None,
                Some(1),
                None,
                (Outcome::Fail, "out-of-memory", "out of memory at micro-batch 1"),
            ),
            (
                "a summary without a class",
                Some(&unclassed),
                &[],
                None,
                None,
                Some(1),
                None,
                (Outcome::Fail, "other", "something else"),
            ),
            (
                "no summary, a signal",
                None,
                &[],
                None,
                Some(libc::SIGKILL),
                None,
                None,
                (Outcome::Fail, "killed", "killed by signal 9 (SIGKILL); its log is empty"),
            ),
            (
                "no summary, an exit code",
                None,
                &[],
                None,
                None,
                Some(101),
                None,
                (Outcome::Fail, "other", "train exited 101 without a summary; its log is empty"),
            ),
            (
                "timeout",
                None,
                &[],
                Some(&Ending::Timeout),
                Some(libc::SIGTERM),
                None,
                None,
                (Outcome::Fail, "timeout", "ran past --trial-timeout 60 s"),
            ),
            (
                "interrupted",
                None,
                &[],
                Some(&Ending::Interrupted),
                Some(libc::SIGTERM),
                None,
                None,
                (Outcome::Fail, "interrupted", "stopped with the sweep (Ctrl-C or SIGTERM)"),
            ),
            (
                "interrupted in Slurm",
                None,
                &[],
                Some(&Ending::Interrupted),
                Some(libc::SIGTERM),
                None,
                Some("7_2"),
                (
                    Outcome::Fail,
                    "interrupted",
                    "its worker, Slurm task 7_2, got SIGTERM (scancel, its time limit or preemption)",
                ),
            ),
            (
                "pruned",
                None,
                &[0.4],
                Some(&pruned),
                Some(libc::SIGTERM),
                None,
                None,
                (Outcome::Pruned, "-", "-"),
            ),
            (
                "finished while being stopped counts as finished",
                Some(&done),
                &[0.4],
                Some(&Ending::Interrupted),
                None,
                Some(0),
                None,
                (Outcome::Complete(0.4), "-", "-"),
            ),
        ];
        for (name, summary, values, ending, signal, code, slurm, want) in cases {
            let mut e = ended(summary, values);
            e.ending = ending;
            e.signal = signal;
            e.code = code;
            e.slurm_task = slurm;
            let v = judge(&e);
            assert_eq!(class_and_message(&v), want, "{name}");
            assert!(!v.for_the_disk, "{name}");
        }
        let mut e = ended(None, &[]);
        e.ending = Some(&pruned);
        assert_eq!(
            judge(&e).attrs,
            vec![("prune_reason", Value::from("median"))]
        );
    }

    #[test]
    fn a_failure_on_a_full_disk_is_an_interruption_for_the_disk() {
        let oom = summary(RunStatus::Failed, Some(Class::OutOfMemory), "no space left");
        let full = "the filesystem of /x is full (12 bytes free)";
        let mut e = ended(Some(&oom), &[]);
        e.disk_full = Some(full);
        let v = judge(&e);
        assert!(v.for_the_disk);
        assert_eq!(
            class_and_message(&v),
            (
                Outcome::Fail,
                "interrupted",
                "it ended while the filesystem of /x is full (12 bytes free); it runs again on `train sweep --resume` (its own message: no space left)"
            )
        );
        // A full disk does not change a trial that completed, or one the
        // driver was ending.
        let done = summary(RunStatus::Finished, None, "completed");
        let mut e = ended(Some(&done), &[0.1]);
        e.disk_full = Some(full);
        assert_eq!(judge(&e).outcome, Outcome::Complete(0.1));
        let mut e = ended(None, &[]);
        e.ending = Some(&Ending::Timeout);
        e.disk_full = Some(full);
        assert_eq!(class_and_message(&judge(&e)).1, "timeout");
    }

    #[test]
    fn messages_are_cut_at_the_journal_limit() {
        let long = "x".repeat(MESSAGE_CHARS + 50);
        let failed = summary(RunStatus::Failed, Some(Class::Other), &long);
        let v = judge(&ended(Some(&failed), &[]));
        assert_eq!(
            v.attr("error_message").unwrap().chars().count(),
            MESSAGE_CHARS
        );
        assert_eq!(v.word("val_loss"), "failed (other)");
    }

    #[test]
    fn a_broken_allocator_runs_again_a_bounded_number_of_times() {
        let broken = summary(
            RunStatus::Failed,
            Some(Class::AllocatorBroken),
            "RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at \"c10/cuda/CUDACachingAllocator.cpp\":487, please report a bug to PyTorch.",
        );
        let rerun = |done| {
            let mut e = ended(Some(&broken), &[]);
            e.code = Some(1);
            e.allocator_reruns = done;
            let v = judge(&e);
            assert_eq!(class_and_message(&v).1, "allocator-broken");
            v.attr("rerun").map(String::from)
        };
        let first = rerun(0).expect("runs again");
        assert!(first.starts_with(RERUN_ALLOCATOR), "{first}");
        assert!(first.ends_with("(1 of 2)"), "{first}");
        assert!(rerun(1).unwrap().ends_with("(2 of 2)"));
        // Broken in a new process every time: the point's own failure.
        assert_eq!(rerun(ALLOCATOR_RERUNS), None);
        // Another class is not run again; nor is one on a full disk (it
        // waits for space as an interruption).
        let oom = summary(RunStatus::Failed, Some(Class::OutOfMemory), "oom");
        assert_eq!(judge(&ended(Some(&oom), &[])).attr("rerun"), None);
        let mut e = ended(Some(&broken), &[]);
        e.disk_full = Some("the filesystem of /x is full (0 bytes free)");
        let v = judge(&e);
        assert_eq!(
            (v.attr("error_class"), v.attr("rerun")),
            (Some("interrupted"), None)
        );
    }

    #[test]
    fn a_program_whose_allocator_broke_runs_again_before_other_reruns_are_asked() {
        let mut s = ProgramSummary::example();
        s.class = Some(Class::AllocatorBroken);
        s.evidence = "RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at \"c10/cuda/CUDACachingAllocator.cpp\":487, please report a bug to PyTorch. (exit 1)".into();
        let end = |s: &ProgramSummary, crowd, done| {
            judge_program(&ProgramEnd {
                summary: s,
                summary_last: false,
                wandb_value: None,
                metric: "val_loss",
                crowd,
                launch_blocking: false,
                disk_full: None,
                allocator_reruns: done,
            })
        };
        let v = end(&s, 1, 0);
        assert_eq!(v.outcome, Outcome::Fail);
        assert_eq!(v.attr("error_class"), Some("allocator-broken"));
        assert!(v.attr("rerun").unwrap().starts_with(RERUN_ALLOCATOR));
        assert_eq!(end(&s, 1, ALLOCATOR_RERUNS).attr("rerun"), None);
        // A crowded out-of-memory keeps its own re-run (one trial fewer).
        s.class = Some(Class::OutOfMemory);
        let v = end(&s, 2, 0);
        assert!(v.attr("rerun").unwrap().starts_with(RERUN_CROWDED));
        assert_eq!(v.attrs.iter().filter(|(k, _)| *k == "rerun").count(), 1);
        // Out of memory at its own address-space limit: not crowding, even
        // when it shared the host.
        s.legs[0].peak.address_limit_mib = Some(1500.0);
        let v = end(&s, 2, 0);
        assert_eq!(v.attr("error_class"), Some("out-of-memory"));
        assert_eq!(v.attr("rerun"), None);
    }

    #[test]
    fn a_cuda_out_of_memory_beside_a_trial_on_its_own_gpu_is_crowded() {
        use crate::placement::Slot;
        use crate::slots::Slots;
        let tail = vec![
            "Traceback (most recent call last):".to_string(),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.".into(),
        ];
        let leg = supervise::verdict::judge(&supervise::verdict::End {
            code: Some(1),
            signal: None,
            stop: None,
            tail: &tail,
            non_finite: None,
            reports: 1,
            oom_killed: None,
        });
        assert_eq!(leg.class, Some(Class::OutOfMemory), "{leg:?}");
        let mut s = ProgramSummary::example();
        s.status = ProgramStatus::Failed;
        s.class = leg.class;
        s.evidence = leg.evidence;
        // Slots 0 and 1 on GPU 0, slot 2 on GPU 1; the trial in slot 0
        // ended, its crowd counted as the driver does (itself included).
        let on = |gpu| Slot {
            gpu: Some(gpu),
            threads: None,
        };
        let slots = Slots::new(vec![on(0), on(0), on(1)], false);
        let rerun = |busy: &[usize]| {
            let v = judge_program(&ProgramEnd {
                summary: &s,
                summary_last: false,
                wandb_value: None,
                metric: "val_loss",
                crowd: slots.crowd(0, busy) + 1,
                launch_blocking: false,
                disk_full: None,
                allocator_reruns: 0,
            });
            assert_eq!(v.attr("error_class"), Some("out-of-memory"));
            v.attr("rerun").map(String::from)
        };
        let crowded = rerun(&[1]).expect("crowded on GPU 0");
        assert!(
            crowded.starts_with(RERUN_CROWDED) && crowded.contains("with 1 other trial(s)"),
            "{crowded}"
        );
        // A trial on GPU 1 is not GPU 0's crowd: its own failure.
        assert_eq!(rerun(&[2]), None);
        assert_eq!(rerun(&[]), None);
    }
}
