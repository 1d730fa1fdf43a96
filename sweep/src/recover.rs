//! `--resume`: after a driver or worker that died or was stopped, each
//! trial still RUNNING whose worker is gone (its process on this host, its
//! Slurm task in squeue) is recorded as interrupted, after its leftover
//! process group on this host is ended; trials whose worker lives are left
//! to it. Interrupted trials then run again with the same parameters:
//! workers claim them before new ones (`launch`).

use crate::context::Sweep;
use crate::journal::Outcome;
use crate::owner::{self, Liveness, Owner};
use crate::storage::Storage;
use crate::trial::TrialState;
use crate::trials::GRACE;
use common::wire::failure::Class;
use common::wire::run_dir::TrialDir;
use serde_json::Value;

pub(crate) fn recover(sweep: &Sweep, storage: &dyn Storage) -> anyhow::Result<()> {
    let study = sweep.study(storage)?;
    let running: Vec<_> = study
        .trials
        .iter()
        .zip(study.trial_ids.iter())
        .filter(|(t, _)| t.state == TrialState::Running && crate::history::ours(&study, t))
        .collect();
    let in_slurm = running
        .iter()
        .any(|(t, _)| Owner::of(t).is_some_and(|o| o.slurm_job.is_some()));
    let queue = if in_slurm {
        crate::slurm::Queue::query()
    } else {
        Err("not asked".into())
    };
    let here = common::host::name().unwrap_or_default();
    for (t, id) in running {
        let why = match owner::liveness(t, &queue) {
            Liveness::Live(where_) => {
                common::say!(
                    "train sweep: trial {} still runs ({where_}): left to it",
                    t.number
                );
                continue;
            }
            Liveness::Unknown(why) => {
                common::say!(
                    "train sweep: trial {} is RUNNING and {why}: left RUNNING (`train sweep --resume` on that host settles it)",
                    t.number
                );
                continue;
            }
            Liveness::Gone(why) => why,
        };
        let dir = sweep.trial_dir(t.number);
        let on_this_host = Owner::of(t).is_none_or(|o| o.host == here);
        if let Some(pid) = live_trial_pid(&dir).filter(|_| on_this_host) {
            common::say!(
                "train sweep: trial {} still runs (pid {pid}) from a worker that ended: ending its process group",
                t.number
            );
            supervise::group::end(pid, GRACE);
        }
        common::say!(
            "train sweep: trial {} was RUNNING and {why}: interrupted; it runs again",
            t.number
        );
        let attrs = [
            (
                "error_class".to_string(),
                Value::from(Class::Interrupted.as_str()),
            ),
            (
                "error_message".to_string(),
                Value::from(format!(
                    "the sweep's worker ended while the trial ran ({why}); it runs again as a new trial"
                )),
            ),
        ];
        storage.finish(*id, &attrs, Outcome::Fail)?;
    }
    Ok(())
}

/// The pid in a trial's pid file, if that process lives and runs that
/// trial: its start time is the one written, or, for a pid file written
/// without one, a train whose command line names the trial's directory or
/// a program whose environment's TRAINGUARD_TRIAL_DIR is it.
pub fn live_trial_pid(dir: &TrialDir) -> Option<u32> {
    supervise::group::live_pid(&dir.pid(), |pid| runs_trial(pid, dir))
}

fn runs_trial(pid: u32, dir: &TrialDir) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let needle = dir.path().display().to_string();
    if String::from_utf8_lossy(&cmdline).contains(&needle) {
        return true;
    }
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let Ok(ours) = std::fs::canonicalize(dir.path()) else {
        return false;
    };
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| kv.strip_prefix(b"TRAINGUARD_TRIAL_DIR="))
        .any(|v| {
            std::fs::canonicalize(String::from_utf8_lossy(v).as_ref()).ok() == Some(ours.clone())
        })
}
