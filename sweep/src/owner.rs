//! Who runs a trial: every trial the sweep starts records its worker (host,
//! pid, process start time and, under Slurm, the array task) in the journal
//! as the user attribute `worker`. `--resume` and `--status` read it to tell
//! a trial whose worker lives (leave it alone) from one whose worker is gone
//! (run it again), across machines: on this host by the process table, for
//! a Slurm task by `squeue`, and otherwise not at all (said, not guessed).

use crate::slurm::Queue;
use crate::trial::Trial;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The user attribute that holds it.
pub const ATTR: &str = "worker";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Owner {
    pub host: String,
    pub pid: u32,
    /// /proc's start time of the worker process (pid reuse is told apart).
    pub start: Option<u64>,
    /// The Slurm task it runs in: `JOBID_TASK` for an array task, else
    /// `JOBID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<String>,
}

/// Whether a RUNNING trial's worker still runs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Liveness {
    /// Its worker runs: leave it. The text says where.
    Live(String),
    /// Its worker is gone: the trial is interrupted.
    Gone(String),
    /// This machine cannot tell (another host, Slurm not reachable).
    Unknown(String),
}

impl Owner {
    /// This process.
    pub fn this() -> Owner {
        let pid = std::process::id();
        Owner {
            host: common::host::name().unwrap_or_else(|| "unknown".into()),
            pid,
            start: common::host::process_start(pid),
            slurm_job: crate::slurm::task_from_env(),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The trial's worker, if it recorded one (trials from before workers
    /// were recorded have none).
    pub fn of(t: &Trial) -> Option<Owner> {
        serde_json::from_value(t.user_attrs.get(ATTR)?.clone()).ok()
    }

    /// Does this worker still run? `queue` is Slurm's view (None: not asked
    /// or not reachable, with why).
    pub fn liveness(&self, queue: &Result<Queue, String>) -> Liveness {
        if let Some(job) = &self.slurm_job {
            return match queue {
                Ok(q) => match q.state_of(job) {
                    Some(state) => Liveness::Live(format!("Slurm job {job} is {state}")),
                    None => Liveness::Gone(format!("Slurm job {job} is no longer in squeue")),
                },
                Err(why) => Liveness::Unknown(format!(
                    "it runs in Slurm job {job} and squeue cannot tell: {why}"
                )),
            };
        }
        let here = common::host::name().unwrap_or_default();
        if self.host != here {
            return Liveness::Unknown(format!(
                "its worker (pid {}) runs on {}, not on this host ({here})",
                self.pid, self.host
            ));
        }
        match common::host::process_start(self.pid) {
            Some(s) if self.start.is_none_or(|mine| mine == s) => {
                Liveness::Live(format!("worker pid {} on {here}", self.pid))
            }
            _ => Liveness::Gone(format!("its worker (pid {}) has ended", self.pid)),
        }
    }
}

/// A RUNNING trial's liveness; a trial with no recorded worker (an older
/// sweep) counts as one whose worker has ended, as `--resume` always took it.
pub fn liveness(t: &Trial, queue: &Result<Queue, String>) -> Liveness {
    match Owner::of(t) {
        Some(o) => o.liveness(queue),
        None => Liveness::Gone("no worker recorded".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare() -> Trial {
        Trial {
            number: 0,
            state: crate::trial::TrialState::Running,
            params: Default::default(),
            distributions: Default::default(),
            value: None,
            intermediate: Default::default(),
            user_attrs: Default::default(),
            system_attrs: Default::default(),
            datetime_start: None,
            datetime_complete: None,
            discarded: false,
        }
    }

    fn trial_of(o: &Owner) -> Trial {
        let mut t = bare();
        t.user_attrs.insert(ATTR.into(), o.to_json());
        t
    }

    #[test]
    fn this_process_lives_and_another_start_time_does_not() {
        let me = Owner::this();
        let q = Err("not asked".to_string());
        assert!(matches!(liveness(&trial_of(&me), &q), Liveness::Live(_)));
        let reused = Owner {
            start: me.start.map(|s| s + 1),
            ..me.clone()
        };
        assert!(matches!(reused.liveness(&q), Liveness::Gone(_)));
        let elsewhere = Owner {
            host: "another-host".into(),
            ..me.clone()
        };
        assert!(matches!(elsewhere.liveness(&q), Liveness::Unknown(_)));
        assert!(matches!(liveness(&bare(), &q), Liveness::Gone(_)));
    }

    #[test]
    fn a_slurm_task_lives_while_squeue_lists_it() {
        let o = Owner {
            slurm_job: Some("41_2".into()),
            ..Owner::this()
        };
        let q = Queue::parse("41|2|41_2|RUNNING|0:05|vm\n41|3|41_3|PENDING|0:00|(Resources)\n")
            .unwrap();
        assert!(matches!(o.liveness(&Ok(q.clone())), Liveness::Live(_)));
        let gone = Owner {
            slurm_job: Some("41_1".into()),
            ..o.clone()
        };
        assert!(matches!(gone.liveness(&Ok(q)), Liveness::Gone(_)));
        assert!(matches!(
            o.liveness(&Err("squeue: not found".into())),
            Liveness::Unknown(_)
        ));
    }
}
