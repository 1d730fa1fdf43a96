//! The sweep's own formats, in the sweep's directory: sweep.yaml
//! (sweep-settings/v1, what the sweep was started with), slurm.yaml
//! (sweep-slurm/v1, the Slurm submissions) and `train sweep --report`'s
//! output (sweep-report/v2). Writing and reading them is the sweep crate's.

use super::config::Config;
use super::metric::Metric;
use super::Versioned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// sweep.yaml (sweep-settings/v1): what the sweep was started with, so that
/// `--resume` goes on with the same base config, space and settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub schema: String,
    /// The study's name in the journal (what optuna.load_study takes).
    pub study_name: String,
    /// The base config's file, and the config resolved.
    pub base_name: String,
    pub base: Config,
    /// The space's file, and its text as given (parsed again on resume).
    pub space_name: String,
    pub space_text: String,
    pub seed: u64,
    /// Trials in all (None: the space's run_cap or the grid's size).
    pub trials: Option<u64>,
    /// `auto` or a number.
    pub parallel: String,
    pub trial_timeout_s: Option<f64>,
    /// `--hang-grace` (seconds; 0: off): a program trial's failure line
    /// followed by this long without output or progress ends it. Absent:
    /// the default, 5 minutes for a launcher's job of ranks, off otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hang_grace_s: Option<f64>,
    pub max_consecutive_failures: u32,
    /// `median`, or null (the space's early_terminate, if any, prunes).
    pub pruner: Option<String>,
    /// Where `train sweep` was started: a program's trials run from here,
    /// whoever runs them (`--resume`, `--worker`). Absent before issue 23.
    #[serde(default)]
    pub launch_dir: Option<String>,
    /// A program sweep's `${interpreter}` (absolute).
    #[serde(default)]
    pub interpreter: Option<String>,
    /// A program sweep's `--config` as it was at the start: what each
    /// trial's `${config}` file is made from.
    #[serde(default)]
    pub base_text: Option<String>,
    /// `--memory-budget` (MiB) for `--parallel auto` of a program.
    #[serde(default)]
    pub memory_budget_mib: Option<f64>,
    /// A `method: bayes` sweep's TPE, `multivariate` or `univariate`, as it
    /// started (the space's `bayes.variant`, else the default then), so that
    /// `--resume` keeps it when the default changes. Absent: univariate
    /// (sweeps started before 2026-11-25, when it was the only one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bayes_variant: Option<String>,
    /// Where the sweep's truth is when it is not DIR/journal.log: a
    /// database URL, never with its password (`--storage`). Absent: the
    /// journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

impl Versioned for Settings {
    const SCHEMA: &'static str = "sweep-settings/v1";
    fn example() -> Self {
        Settings {
            schema: Self::SCHEMA.into(),
            study_name: "sweep".into(),
            base_name: "configs/demo_cpu.yaml".into(),
            base: Config::default(),
            space_name: "configs/sweeps/tiny_cpu.yaml".into(),
            space_text: "method: bayes\n...".into(),
            seed: 0,
            trials: Some(20),
            parallel: "auto".into(),
            trial_timeout_s: Some(600.0),
            hang_grace_s: None,
            max_consecutive_failures: 10,
            pruner: Some("median".into()),
            launch_dir: Some("/home/me/project".into()),
            interpreter: Some("/home/me/project/.venv/bin/python".into()),
            base_text: Some("epochs: 50\n".into()),
            memory_budget_mib: Some(8192.0),
            bayes_variant: Some("multivariate".into()),
            storage: Some("postgresql://me@dbhost/sweeps".into()),
        }
    }
}

/// `--report --format json|yaml` (sweep-report/v2; v2 over v1: the CSV's
/// parameter columns are `params_<name>`, and `best_command`).
///
/// Column names, for what later versions add: a trial's parameters are
/// under `params` (CSV and the table: `params_<name>`, as Optuna's
/// `trials_dataframe()` names them); every other field or column is the
/// sweep's own and never starts with `params_`, so no parameter can take a
/// name of ours (a user's `epochs` is `params_epochs` beside our `epochs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    pub schema: String,
    pub study: String,
    /// The metrics.csv column trials are ranked by, and its goal.
    pub metric: Metric,
    pub goal: String,
    /// Trials by state, re-runs included.
    pub counts: BTreeMap<String, u64>,
    /// The points of the space tried: the trials less the re-runs (rows
    /// with `retried_from`). Absent in reports written before it was added.
    #[serde(default)]
    pub points: u64,
    pub best: Option<Row>,
    /// The best trial's command, to run it again (a program's from the
    /// space's `command` with its values, our model's `train --config`
    /// with best_config.yaml); absent without a best trial or settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_command: Option<BestCommand>,
    pub trials: Vec<Row>,
    pub failures: Vec<FailureGroup>,
    /// How far the predicted peaks were from the measured ones; absent
    /// where no trial has both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_model: Option<ModelError>,
}

/// The sweep's memory model against what it predicted: the median of
/// |predicted / measured - 1| over the trials with both; what each value
/// does to the peak by the model fitted on all the trials; the points it
/// refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelError {
    pub trials: u64,
    pub median_error: f64,
    /// Each term of the fit (absent in reports written before it was
    /// added).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<Effect>,
    /// Points not run as predicted not to fit (`predicted-out-of-memory`).
    #[serde(default)]
    pub refused: u64,
}

/// One term of the memory model: `ln rows` (the peak follows rows to the
/// power `coefficient`: 1 proportional, 0 no bearing), `lr` (a number that
/// can be 0: ln peak per unit), or `optimizer=adam` (a categorical value:
/// the peak times e^coefficient against the others).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    pub term: String,
    pub coefficient: f64,
}

/// A command to run again: where, and its words (best_command.sh runs it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BestCommand {
    pub cwd: String,
    pub argv: Vec<String>,
}

/// One trial (`--report --format csv` is these, one per line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub number: u64,
    pub state: String,
    pub error_class: Option<String>,
    pub params: BTreeMap<String, Value>,
    /// The objective: the best value of the metric over the trial's epochs
    /// (a pruned trial's is its last reported value).
    pub value: Option<f64>,
    /// The metric per epoch.
    pub intermediate: BTreeMap<u64, f64>,
    pub epochs: Option<u64>,
    pub seconds: Option<f64>,
    /// The trial's memory peak, of what `peak_memory_of` says.
    pub peak_memory_mib: Option<f64>,
    /// What `peak_memory_mib` measured: `torch-allocated` (train's own
    /// trials: the most torch's allocator held) or `host-pss` (a program
    /// trial: its process tree's host memory, shared pages counted once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_of: Option<String>,
    /// A program trial's GPU memory peak (NVML, its processes'), where
    /// measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_gpu_mib: Option<f64>,
    pub error_message: Option<String>,
    pub retried_from: Option<u64>,
    /// A DISCARD_TRIALS record (Rustuna's) names it; Optuna 5 ignores the
    /// record and so does the sweep (it counts, ranks and samples from the
    /// trial). Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub discarded: bool,
    /// A program trial's attempts (the space's `auto_fix: true`); absent:
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u64>,
    /// With more than one attempt: the settings its last attempt ran with,
    /// by name (`batch`, `accumulation`, ...): `value (where)`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
    /// What the sweep predicted it would need before it started, MiB, of
    /// `predicted_of` (`host-pss`: as `peak_memory_mib` of a program trial;
    /// `gpu`: as `peak_gpu_mib`); absent where it did not predict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_peak_mib: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_of: Option<String>,
}

/// Failed trials of one class, and the parameter values all of them share.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailureGroup {
    pub class: String,
    pub count: u64,
    pub trials: Vec<u64>,
    pub shared: BTreeMap<String, Value>,
}

impl Versioned for SweepReport {
    const SCHEMA: &'static str = "sweep-report/v2";
    fn example() -> Self {
        let row = Row {
            number: 3,
            state: "FAIL".into(),
            error_class: Some("out-of-memory".into()),
            params: [("batch_size".to_string(), Value::from(64))].into(),
            value: Some(0.12),
            intermediate: [(1, 0.2), (2, 0.12)].into(),
            epochs: Some(2),
            seconds: Some(4.5),
            peak_memory_mib: Some(900.0),
            peak_memory_of: Some("host-pss".into()),
            peak_gpu_mib: Some(1210.0),
            error_message: Some("out of memory at epoch 1 step 1 ...".into()),
            retried_from: Some(1),
            discarded: true,
            attempts: Some(2),
            knobs: [(
                "batch".to_string(),
                "32 (--per_device_train_batch_size)".to_string(),
            )]
            .into(),
            predicted_peak_mib: Some(1150.0),
            predicted_of: Some("gpu".into()),
        };
        SweepReport {
            schema: Self::SCHEMA.into(),
            study: "sweep".into(),
            metric: Metric::ValLoss,
            goal: "minimize".into(),
            counts: [("COMPLETE".to_string(), 1)].into(),
            points: 1,
            best: Some(row.clone()),
            best_command: Some(BestCommand {
                cwd: "/home/me/project".into(),
                argv: vec![
                    "/home/me/project/.venv/bin/python".into(),
                    "train.py".into(),
                    "--batch_size=64".into(),
                ],
            }),
            trials: vec![row],
            failures: vec![FailureGroup {
                class: "out-of-memory".into(),
                count: 1,
                trials: vec![3],
                shared: [("batch_size".to_string(), Value::from(64))].into(),
            }],
            memory_model: Some(ModelError {
                trials: 1,
                median_error: 0.05,
                effects: vec![Effect {
                    term: "ln batch_size".into(),
                    coefficient: 0.98,
                }],
                refused: 0,
            }),
        }
    }
}

/// The sbatch options a user gives (`None`: the cluster's default).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Options {
    pub partition: Option<String>,
    pub gpus_per_task: Option<u32>,
    pub cpus_per_task: Option<u32>,
    /// Slurm's time format (`MM`, `HH:MM:SS`, `D-HH`, ...).
    pub time: Option<String>,
}

impl Options {
    /// `later`'s options where it gives one, else these.
    pub fn merged(&self, later: &Options) -> Options {
        Options {
            partition: later.partition.clone().or(self.partition.clone()),
            gpus_per_task: later.gpus_per_task.or(self.gpus_per_task),
            cpus_per_task: later.cpus_per_task.or(self.cpus_per_task),
            time: later.time.clone().or(self.time.clone()),
        }
    }
}

/// slurm.yaml (sweep-slurm/v1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlurmJobs {
    pub schema: String,
    pub options: Options,
    pub jobs: Vec<Submission>,
}

/// One `sbatch` of an array of workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    /// The array's job id (its tasks are `JOBID_0`, `JOBID_1`, ...).
    pub job_id: String,
    /// Array tasks in it.
    pub tasks: u64,
    /// The script submitted.
    pub script: String,
    /// When, naive UTC (as the journal's times).
    pub submitted: String,
}

impl Versioned for SlurmJobs {
    const SCHEMA: &'static str = "sweep-slurm/v1";
    fn example() -> Self {
        SlurmJobs {
            schema: Self::SCHEMA.into(),
            options: Options {
                partition: Some("gpu".into()),
                gpus_per_task: Some(1),
                cpus_per_task: Some(4),
                time: Some("04:00:00".into()),
            },
            jobs: vec![Submission {
                job_id: "4107".into(),
                tasks: 3,
                script: "runs/sweep/slurm/workers-1.sbatch".into(),
                submitted: "2026-11-23T10:04:12.000000".into(),
            }],
        }
    }
}

impl SlurmJobs {
    pub fn job_ids(&self) -> Vec<String> {
        self.jobs.iter().map(|j| j.job_id.clone()).collect()
    }
}
