//! The directories the tools leave on disk, and the one place their file
//! names are written: a run's (`train --out DIR`), a sweep's (`train sweep
//! --out DIR`) and, inside a sweep's, each trial's. The formats of the files
//! are the other modules' (`train`, `sweep`, `config`).
//!
//! ```text
//! RUN/                       train --out RUN
//!   config.yaml              the resolved config in use
//!   metrics.csv              one row per epoch (train-metrics/v1)
//!   summary.yaml             how the run ended (train-summary/v1)
//!   chain.yaml               with --fallback (train-chain/v1)
//!   checkpoint.safetensors   the last epoch's state (train-checkpoint/v1)
//!   best.safetensors         the best model's weights
//!   curves.png               the loss and memory curves
//! RUN/                       train run --out RUN -- CMD (a supervised command)
//!   output.log               its stdout and stderr, as they came
//!   metrics.csv              the reports read from them (supervise-metrics/v1)
//!   memory.csv               its process tree's memory every 0.5 s (supervise-memory/v2)
//!   memory.png               that timeline, a mark per reported epoch
//!   memory-N.csv, memory-N.png  the same for leg N of a --fallback chain
//!   summary.yaml             how it ended, each leg (program-summary/v1)
//!   own-metrics.csv          rows the program appends ($TRAINGUARD_METRICS_CSV)
//! SWEEP/                     train sweep --out SWEEP
//!   sweep.yaml               sweep-settings/v1
//!   journal.log              Optuna's journal, the sweep's one truth
//!   slurm.yaml               sweep-slurm/v1
//!   slurm/                   workers-N.sbatch, and each task's %A_%a.out
//!   best_config.yaml         the best trial's config (--report)
//!   best_command.sh          the best trial's command line (--report)
//!   objective.png            the objective per trial (--report)
//!   trials/NNNN/             one trial:
//!     config.yaml            the config it runs
//!     train.log              its train's stdout and stderr
//!     pid                    its train's pid
//!     run/                   its run directory (RUN above)
//!   trials/NNNN/ of a program sweep (the space names `program`):
//!     config.yaml            with `${config}`: the base config, the trial's values applied
//!     train.log              the program's stdout and stderr
//!     pid                    the program's pid (its process group's id)
//!     params.json            the trial's parameters ($TRAINGUARD_PARAMS)
//!     wandb-config.yaml      the same as W&B's agent writes it ($WANDB_SWEEP_PARAM_PATH)
//!     args.json              `${args_json_file}`
//!     metrics.csv            rows the program appends ($TRAINGUARD_TRIAL_DIR/metrics.csv)
//!     work/                  its working directory, with `working_dir: trial`
//!     run/                   the supervisor's record (a supervised RUN above)
//! ```

use std::path::{Path, PathBuf};

pub const CONFIG: &str = "config.yaml";
pub const METRICS: &str = "metrics.csv";
pub const SUMMARY: &str = "summary.yaml";
pub const CHAIN: &str = "chain.yaml";
pub const CHECKPOINT: &str = "checkpoint.safetensors";
pub const BEST_WEIGHTS: &str = "best.safetensors";
pub const CURVES: &str = "curves.png";

pub const SETTINGS: &str = "sweep.yaml";
pub const JOURNAL: &str = "journal.log";
/// What a database sweep's reads know, for the next reader to start from
/// (the journal's own is `<journal>.checkpoint`, beside it).
pub const DATABASE_CHECKPOINT: &str = "database.checkpoint";
pub const SLURM_JOBS: &str = "slurm.yaml";
pub const SLURM_DIR: &str = "slurm";
/// Slurm's name for an array task's output, under `SLURM_DIR`.
pub const SLURM_OUTPUT: &str = "%A_%a.out";
pub const BEST_CONFIG: &str = "best_config.yaml";
pub const BEST_COMMAND: &str = "best_command.sh";
pub const OBJECTIVE: &str = "objective.png";
pub const TRIALS: &str = "trials";

pub const OUTPUT_LOG: &str = "output.log";
pub const MEMORY_CSV: &str = "memory.csv";
pub const MEMORY_PNG: &str = "memory.png";
pub const OWN_METRICS: &str = "own-metrics.csv";

pub const TRIAL_LOG: &str = "train.log";
pub const TRIAL_PARAMS: &str = "params.json";
pub const TRIAL_WANDB_PARAMS: &str = "wandb-config.yaml";
pub const TRIAL_ARGS_JSON: &str = "args.json";
pub const TRIAL_WORK: &str = "work";
pub const TRIAL_PID: &str = "pid";
pub const TRIAL_RUN: &str = "run";

/// A run's directory (`train --out`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir(PathBuf);

impl RunDir {
    pub fn new(path: impl Into<PathBuf>) -> RunDir {
        RunDir(path.into())
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// The resolved config in use.
    pub fn config(&self) -> PathBuf {
        self.0.join(CONFIG)
    }
    pub fn metrics(&self) -> PathBuf {
        self.0.join(METRICS)
    }
    pub fn summary(&self) -> PathBuf {
        self.0.join(SUMMARY)
    }
    /// The fallback chain's state, with `--fallback`.
    pub fn chain(&self) -> PathBuf {
        self.0.join(CHAIN)
    }
    /// The last epoch's full state, what `--resume` reads.
    pub fn checkpoint(&self) -> PathBuf {
        self.0.join(CHECKPOINT)
    }
    /// The best model's weights.
    pub fn best_weights(&self) -> PathBuf {
        self.0.join(BEST_WEIGHTS)
    }
    pub fn curves(&self) -> PathBuf {
        self.0.join(CURVES)
    }
    /// A supervised command's stdout and stderr (`train run`).
    pub fn output_log(&self) -> PathBuf {
        self.0.join(OUTPUT_LOG)
    }
    /// Its process tree's memory over time.
    pub fn memory_csv(&self) -> PathBuf {
        self.0.join(MEMORY_CSV)
    }
    pub fn memory_png(&self) -> PathBuf {
        self.0.join(MEMORY_PNG)
    }
    /// Leg `n`'s (from 1) memory.csv: the first is `memory.csv`, a
    /// fallback's `memory-N.csv`.
    pub fn memory_csv_of(&self, n: u32) -> PathBuf {
        self.legged(MEMORY_CSV, n)
    }
    pub fn memory_png_of(&self, n: u32) -> PathBuf {
        self.legged(MEMORY_PNG, n)
    }
    fn legged(&self, name: &str, n: u32) -> PathBuf {
        match (n, name.rsplit_once('.')) {
            (0 | 1, _) | (_, None) => self.0.join(name),
            (_, Some((stem, ext))) => self.0.join(format!("{stem}-{n}.{ext}")),
        }
    }
    /// Where `train run`'s command may append its own metric rows.
    pub fn own_metrics(&self) -> PathBuf {
        self.0.join(OWN_METRICS)
    }
}

/// A sweep's trial directory (`SWEEP/trials/NNNN`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrialDir(PathBuf);

impl TrialDir {
    pub fn new(path: impl Into<PathBuf>) -> TrialDir {
        TrialDir(path.into())
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// The config the trial runs.
    pub fn config(&self) -> PathBuf {
        self.0.join(CONFIG)
    }
    /// Its train's stdout and stderr.
    pub fn log(&self) -> PathBuf {
        self.0.join(TRIAL_LOG)
    }
    /// Its train's pid, so that a later driver can find and end it.
    pub fn pid(&self) -> PathBuf {
        self.0.join(TRIAL_PID)
    }
    /// A program trial's parameters as JSON.
    pub fn params(&self) -> PathBuf {
        self.0.join(TRIAL_PARAMS)
    }
    /// The same, as W&B's agent writes them for `wandb.init`.
    pub fn wandb_params(&self) -> PathBuf {
        self.0.join(TRIAL_WANDB_PARAMS)
    }
    /// `${args_json_file}`.
    pub fn args_json(&self) -> PathBuf {
        self.0.join(TRIAL_ARGS_JSON)
    }
    /// Rows a program trial appends ($TRAINGUARD_TRIAL_DIR/metrics.csv).
    pub fn own_metrics(&self) -> PathBuf {
        self.0.join(METRICS)
    }
    /// A program trial's working directory with `working_dir: trial`.
    pub fn work(&self) -> PathBuf {
        self.0.join(TRIAL_WORK)
    }
    /// Its train's run directory.
    pub fn run(&self) -> RunDir {
        RunDir(self.0.join(TRIAL_RUN))
    }
}

/// A sweep's directory (`train sweep --out`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepDir(PathBuf);

impl SweepDir {
    pub fn new(path: impl Into<PathBuf>) -> SweepDir {
        SweepDir(path.into())
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    pub fn settings(&self) -> PathBuf {
        self.0.join(SETTINGS)
    }
    pub fn journal(&self) -> PathBuf {
        self.0.join(JOURNAL)
    }
    pub fn database_checkpoint(&self) -> PathBuf {
        self.0.join(DATABASE_CHECKPOINT)
    }
    pub fn slurm_jobs(&self) -> PathBuf {
        self.0.join(SLURM_JOBS)
    }
    /// The sbatch scripts and the tasks' output.
    pub fn slurm_dir(&self) -> PathBuf {
        self.0.join(SLURM_DIR)
    }
    /// The sbatch script of the `n`th submission (1-based).
    pub fn worker_script(&self, n: usize) -> PathBuf {
        self.slurm_dir().join(format!("workers-{n}.sbatch"))
    }
    pub fn best_config(&self) -> PathBuf {
        self.0.join(BEST_CONFIG)
    }
    pub fn best_command(&self) -> PathBuf {
        self.0.join(BEST_COMMAND)
    }
    pub fn objective(&self) -> PathBuf {
        self.0.join(OBJECTIVE)
    }
    pub fn trials(&self) -> PathBuf {
        self.0.join(TRIALS)
    }
    /// Trial `number`'s directory: its number in four digits or more.
    pub fn trial(&self, number: u64) -> TrialDir {
        TrialDir(self.trials().join(format!("{number:04}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trial_lives_in_its_sweep_and_holds_a_run() {
        let sweep = SweepDir::new("runs/s");
        let trial = sweep.trial(7);
        assert_eq!(trial.path(), Path::new("runs/s/trials/0007"));
        assert_eq!(sweep.trial(12345).path(), Path::new("runs/s/trials/12345"));
        assert_eq!(trial.log(), Path::new("runs/s/trials/0007/train.log"));
        assert_eq!(trial.pid(), Path::new("runs/s/trials/0007/pid"));
        let run = trial.run();
        assert_eq!(run.path(), Path::new("runs/s/trials/0007/run"));
        assert_eq!(
            run.metrics(),
            Path::new("runs/s/trials/0007/run/metrics.csv")
        );
        assert_eq!(sweep.journal(), Path::new("runs/s/journal.log"));
        assert_eq!(
            sweep.worker_script(2),
            Path::new("runs/s/slurm/workers-2.sbatch")
        );
    }
}
