//! The fallback chain's rules (A -> B -> C, `--fallback`), pure: where a
//! config starts, what a leg's end leads to, and the chain state the next
//! config starts from. The run driver (run/mod.rs) does the I/O: it runs
//! the legs, writes chain.yaml and emits the events.

use crate::training::Stop;
use common::exit;
use common::wire::failure::Class;
use common::wire::train::{ChainConfig, ChainState, RunStatus};
use common::wire::Versioned;

/// A run's chain before its first leg: its configs, the first one current.
pub fn at_start(configs: Vec<ChainConfig>) -> ChainState {
    ChainState {
        schema: ChainState::SCHEMA.into(),
        configs,
        current: 0,
        carry_from_epoch: None,
        legs: Vec::new(),
        seconds_before: 0.0,
    }
}

/// Where the current config starts, from the epoch of the checkpoint in the
/// run directory and the chain's `carry_from_epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegStart {
    /// Nothing to start from: a fresh start.
    Fresh,
    /// The previous config's checkpoint: carry what fits.
    Carry,
    /// This config's own checkpoint: an exact resume.
    Resume,
}

pub fn leg_start(checkpoint_epoch: Option<u32>, carry_from_epoch: Option<u32>) -> LegStart {
    match (checkpoint_epoch, carry_from_epoch) {
        (None, _) => LegStart::Fresh,
        (Some(e), Some(from)) if e == from => LegStart::Carry,
        (Some(_), _) => LegStart::Resume,
    }
}

/// How a leg ended, as summary.yaml and chain.yaml say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: RunStatus,
    pub reason: String,
    pub class: Option<Class>,
}

/// The outcome of a leg whose loop stopped so, for a config of `epochs`.
pub fn outcome(stop: Stop, epochs: u32) -> Outcome {
    let (status, reason, class) = match stop {
        Stop::Finished => (
            RunStatus::Finished,
            format!("completed {epochs} epochs"),
            None,
        ),
        Stop::Failed { class, reason } => (RunStatus::Failed, reason, Some(class)),
        Stop::Stopped { reason } => (RunStatus::Stopped, reason, None),
    };
    Outcome {
        status,
        reason,
        class,
    }
}

/// What follows a leg.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The chain's config `index` runs next, from the last good checkpoint:
    /// in a fresh process when its environment differs, since the
    /// allocator and CUDA read theirs once.
    Leg { index: usize, fresh_process: bool },
    /// The run ends, and train exits with `code`.
    End { code: u8 },
}

/// After the current config's leg ended with `outcome`: the next config
/// when the failure is one a config causes (out of memory at micro-batch 1,
/// CUDA graphs, a diverging loss) and the chain has one; otherwise the end.
pub fn after_leg(chain: &ChainState, outcome: &Outcome) -> Next {
    let i = chain.current;
    let next = chain
        .configs
        .get(i + 1)
        .filter(|_| outcome.class.is_some_and(Class::config_caused));
    match (next, chain.configs.get(i)) {
        (Some(next), Some(now)) => Next::Leg {
            index: i + 1,
            fresh_process: next.config.environment != now.config.environment,
        },
        _ => Next::End {
            code: exit_code(outcome.status),
        },
    }
}

/// train's exit code for a run that ended so.
pub fn exit_code(status: RunStatus) -> u8 {
    match status {
        RunStatus::Finished => exit::OK,
        RunStatus::Failed => exit::FOUND,
        RunStatus::Stopped => exit::STOPPED,
    }
}

/// The chain moved on to config `index`, which starts from the run
/// directory's checkpoint, of `checkpoint_epoch`: the last good epoch of
/// the config before.
pub fn move_to(chain: &mut ChainState, index: usize, checkpoint_epoch: Option<u32>) {
    chain.current = index;
    chain.carry_from_epoch = checkpoint_epoch;
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::config::Config;

    /// A chain of `n` configs at config `current`; `env` gives each
    /// config's environment variable TRAINGUARD_FAULT.
    fn chain(current: usize, env: &[&str]) -> ChainState {
        let configs = env
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut config = Config::default();
                if !v.is_empty() {
                    config
                        .environment
                        .insert("TRAINGUARD_FAULT".into(), (*v).into());
                }
                ChainConfig {
                    name: format!("{i}.yaml"),
                    config,
                }
            })
            .collect();
        ChainState {
            current,
            ..at_start(configs)
        }
    }

    fn failed(class: Class) -> Outcome {
        outcome(
            Stop::Failed {
                class,
                reason: "r".into(),
            },
            3,
        )
    }

    #[test]
    fn a_leg_starts_fresh_carried_or_resumed() {
        assert_eq!(leg_start(None, None), LegStart::Fresh);
        assert_eq!(leg_start(None, Some(2)), LegStart::Fresh);
        assert_eq!(leg_start(Some(2), Some(2)), LegStart::Carry);
        assert_eq!(
            leg_start(Some(3), Some(2)),
            LegStart::Resume,
            "the next config wrote its own checkpoint"
        );
        assert_eq!(leg_start(Some(3), None), LegStart::Resume);
    }

    #[test]
    fn the_loop_stop_becomes_the_leg_outcome() {
        assert_eq!(
            outcome(Stop::Finished, 8),
            Outcome {
                status: RunStatus::Finished,
                reason: "completed 8 epochs".into(),
                class: None
            }
        );
        assert_eq!(
            outcome(Stop::Stopped { reason: "s".into() }, 8),
            Outcome {
                status: RunStatus::Stopped,
                reason: "s".into(),
                class: None
            }
        );
        assert_eq!(
            failed(Class::OutOfMemory),
            Outcome {
                status: RunStatus::Failed,
                reason: "r".into(),
                class: Some(Class::OutOfMemory)
            }
        );
    }

    /// Each outcome class at each position in a chain of three (and a run
    /// of one config): the next config only after a failure a config
    /// causes, and only where there is one.
    #[test]
    fn after_a_leg_the_table_of_outcomes_and_positions() {
        let end = |code| Next::End { code };
        let next = |index| Next::Leg {
            index,
            fresh_process: false,
        };
        let finished = outcome(Stop::Finished, 3);
        let stopped = outcome(Stop::Stopped { reason: "s".into() }, 3);
        #[rustfmt::skip]
        let table: Vec<(&str, Outcome, [Next; 4])> = vec![
            //                                          alone     first of 3  second    last
            ("finished", finished, [end(0), end(0), end(0), end(0)]),
            ("stopped", stopped, [end(130), end(130), end(130), end(130)]),
            ("out of memory", failed(Class::OutOfMemory), [end(1), next(1), next(2), end(1)]),
            ("cuda graphs", failed(Class::CudaGraphPointer), [end(1), next(1), next(2), end(1)]),
            ("non-finite loss", failed(Class::NonFiniteLoss), [end(1), next(1), next(2), end(1)]),
            ("device-side assert", failed(Class::DeviceSideAssert), [end(1), end(1), end(1), end(1)]),
            ("cuda error", failed(Class::CudaError), [end(1), end(1), end(1), end(1)]),
            ("killed", failed(Class::Killed), [end(1), end(1), end(1), end(1)]),
            ("timeout", failed(Class::Timeout), [end(1), end(1), end(1), end(1)]),
            ("interrupted", failed(Class::Interrupted), [end(1), end(1), end(1), end(1)]),
            ("other", failed(Class::Other), [end(1), end(1), end(1), end(1)]),
        ];
        let positions = [
            chain(0, &[""]),
            chain(0, &["", "", ""]),
            chain(1, &["", "", ""]),
            chain(2, &["", "", ""]),
        ];
        for (what, o, expected) in &table {
            for (at, want) in positions.iter().zip(expected) {
                assert_eq!(
                    after_leg(at, o),
                    *want,
                    "{what} at config {} of {}",
                    at.current + 1,
                    at.configs.len()
                );
            }
        }
    }

    #[test]
    fn a_next_config_with_another_environment_runs_in_a_fresh_process() {
        let oom = failed(Class::OutOfMemory);
        let fresh = |index| Next::Leg {
            index,
            fresh_process: true,
        };
        assert_eq!(after_leg(&chain(0, &["oom@1:1", "none"]), &oom), fresh(1));
        assert_eq!(after_leg(&chain(0, &["", "none"]), &oom), fresh(1));
        assert_eq!(
            after_leg(&chain(1, &["a", "none", "none"]), &oom),
            Next::Leg {
                index: 2,
                fresh_process: false
            },
            "the same environment as the config before"
        );
    }

    #[test]
    fn exit_codes_are_the_documented_ones() {
        assert_eq!(exit_code(RunStatus::Finished), 0);
        assert_eq!(exit_code(RunStatus::Failed), 1);
        assert_eq!(exit_code(RunStatus::Stopped), 130);
    }

    #[test]
    fn moving_on_starts_from_the_last_good_checkpoint() {
        let mut c = chain(0, &["", ""]);
        c.seconds_before = 4.0;
        move_to(&mut c, 1, Some(2));
        assert_eq!((c.current, c.carry_from_epoch), (1, Some(2)));
        assert_eq!(c.seconds_before, 4.0);
        move_to(&mut c, 1, None);
        assert_eq!(c.carry_from_epoch, None, "no checkpoint yet");
    }
}
