//! `train sweep`'s command line (train forwards it here).

use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "Exit codes: 0 the sweep ran to its end (some trials may have failed: see \
                  --report), 1 it stopped after --max-consecutive-failures, or a program's first 3 \
                  trials failed before reporting anything, 2 bad input or usage, \
                  4 the tool broke, 6 the --storage database unreachable (run the same command \
                  again once it is back), 130 stopped by Ctrl-C or SIGTERM (continue with --resume). \
                  With --slurm: 0 submitted (or nothing left to run)."
)]
pub struct Args {
    /// The base config every trial starts from (for a space that names
    /// `program`: the file `${config}` gets, the trial's values applied;
    /// optional there).
    #[arg(long, value_name = "CFG")]
    pub config: Option<PathBuf>,
    /// The search space (W&B sweep YAML).
    #[arg(long, value_name = "SPACE", required_unless_present_any = ["resume", "status", "report", "worker"])]
    pub space: Option<PathBuf>,
    /// The sweep's directory: journal.log, sweep.yaml, trials/NNNN/ (with
    /// --storage: this host's sweep.yaml and trial folders).
    #[arg(long, value_name = "DIR", required_unless_present_any = ["resume", "status", "report", "worker"])]
    pub out: Option<PathBuf>,
    /// Trials at once: `auto` (as many as fit, from the estimate and
    /// memdiag's free memory; for a program, from the peaks measured) or a
    /// number.
    #[arg(long, value_name = "auto|K", default_value = "auto")]
    pub parallel: String,
    /// A program sweep's `${interpreter}`: a path, or a name looked up on
    /// PATH (`python3`) [default: the `python` on PATH].
    #[arg(long, value_name = "PYTHON")]
    pub interpreter: Option<PathBuf>,
    /// `--parallel auto` for a program on the CPU: the host memory its
    /// trials may use, in MiB [default: what /proc/meminfo says is
    /// available].
    #[arg(long, value_name = "MIB")]
    pub memory_budget: Option<f64>,
    /// Trials in all [default: the space's run_cap, or the grid's size].
    #[arg(long, value_name = "N")]
    pub trials: Option<u64>,
    /// The sampler's seed: trial i's random draws depend on (seed, i) only.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Stop a trial that runs longer than this (seconds); it is a failed
    /// trial of class `timeout`.
    #[arg(long, value_name = "SECONDS")]
    pub trial_timeout: Option<f64>,
    /// End a program trial whose output said a failure (out of memory, a
    /// CUDA error, ...) and then went quiet for this long with no progress:
    /// one rank of a torchrun job failed and the others wait on it.
    /// [default: 5m for a launcher's job (torchrun, accelerate launch, ...),
    /// off for another command; 0 turns it off]
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub hang_grace: Option<std::time::Duration>,
    /// Stop the sweep after this many failed trials in a row (0: never;
    /// also turns off stopping a program sweep whose first 3 trials fail
    /// before reporting anything).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub max_consecutive_failures: u32,
    /// Prune with Optuna's MedianPruner (the space's early_terminate gives
    /// W&B's hyperband instead).
    #[arg(long, value_name = "median", value_parser = ["median"])]
    pub pruner: Option<String>,
    /// Continue the sweep in DIR after Ctrl-C, a crash or kill -9: trials
    /// whose worker is gone run again (with --slurm: in new workers). With
    /// --storage: DIR may be left out (--study names the sweep, --out this
    /// host's trial folders).
    #[arg(long, value_name = "DIR", num_args = 0..=1, conflicts_with_all = ["config", "space", "status", "report", "worker"])]
    pub resume: Option<Option<PathBuf>>,
    /// Join the sweep in DIR as one more worker: claim the next trial from
    /// its journal, run it, repeat until none is left (what each Slurm array
    /// task runs; workers on several machines share DIR). With --storage:
    /// no DIR; the study is in the database (--study) and --out names this
    /// host's trial folders.
    #[arg(long, value_name = "DIR", num_args = 0..=1, conflicts_with_all = ["config", "space", "status", "report"])]
    pub worker: Option<Option<PathBuf>>,
    /// With --worker: import MODULE once in a server whose forks run the
    /// Python trials (repeatable; on top of the space's `preload`).
    // conflicts_with_all too: clap lets a `requires` pass when the required
    // argument conflicts with one given.
    #[arg(long, value_name = "MODULE", requires = "worker", value_parser = module_name,
          conflicts_with_all = ["config", "space", "out", "resume", "status", "report", "slurm"])]
    pub preload: Vec<String>,
    /// Run the trials as a Slurm job array of workers: write the sbatch
    /// script to DIR/slurm/, print it, and submit it.
    #[arg(long, conflicts_with_all = ["status", "report"])]
    pub slurm: bool,
    /// Array tasks (workers) [default: one per trial left].
    #[arg(long, value_name = "K", requires = "slurm", value_parser = clap::value_parser!(u64).range(1..))]
    pub array: Option<u64>,
    /// sbatch --partition.
    #[arg(long, value_name = "P", requires = "slurm")]
    pub partition: Option<String>,
    /// sbatch --gpus-per-task.
    #[arg(long, value_name = "G", requires = "slurm")]
    pub gpus_per_task: Option<u32>,
    /// sbatch --cpus-per-task.
    #[arg(long, value_name = "C", requires = "slurm")]
    pub cpus_per_task: Option<u32>,
    /// sbatch --time (a task's time limit; a trial it cuts short runs again).
    #[arg(long, value_name = "T", requires = "slurm")]
    pub time: Option<String>,
    /// Write and print the script without submitting it.
    #[arg(long, requires = "slurm")]
    pub dry_run: bool,
    /// What is running, done and failed, and the best so far (with
    /// --storage: DIR may be left out).
    #[arg(long, value_name = "DIR", num_args = 0..=1, conflicts_with_all = ["config", "space", "report", "worker"])]
    pub status: Option<Option<PathBuf>>,
    /// The trials as a table (or --format csv|json|yaml), failures by
    /// class, the best trial's config (DIR/best_config.yaml) and a plot
    /// (DIR/objective.png). With --storage: DIR may be left out (then
    /// --out, if given, gets the files).
    #[arg(long, value_name = "DIR", num_args = 0..=1, conflicts_with_all = ["config", "space", "worker"])]
    pub report: Option<Option<PathBuf>>,
    /// Keep the sweep's truth in a PostgreSQL database, in Optuna's own
    /// tables, shared by workers on any host, Optuna's workers and
    /// optuna-dashboard: postgresql://[user@]host[:port]/database
    /// [?sslmode=...], or the same URL Optuna takes
    /// (postgresql+psycopg2://, postgresql+psycopg://); the password from
    /// ~/.pgpass or PGPASSFILE [default: DIR/journal.log].
    #[arg(long, value_name = "URL")]
    pub storage: Option<String>,
    /// The study's name in --storage [default: the space's `name`, else
    /// the space file's name].
    #[arg(long, value_name = "NAME")]
    pub study: Option<String>,
    /// With --storage: a trial whose worker sends no heartbeat for this
    /// long is failed and run again by another worker.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub heartbeat_grace: f64,
    /// With --storage: how long workers wait for a database that went away
    /// before they stop (exit 6; run the same command again later).
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub db_patience: f64,
    /// --report's format [default: table on a terminal, yaml otherwise].
    #[arg(long, value_enum)]
    pub format: Option<common::format::Format>,
}

/// `--preload`'s value: a module name as Python imports it.
fn module_name(s: &str) -> Result<String, String> {
    supervise::preload::check_module(s).map(|()| s.to_string())
}

impl Args {
    pub fn slurm_options(&self) -> common::wire::sweep::Options {
        common::wire::sweep::Options {
            partition: self.partition.clone(),
            gpus_per_task: self.gpus_per_task,
            cpus_per_task: self.cpus_per_task,
            time: self.time.clone(),
        }
    }

    /// The directory an optional-DIR flag names, else --out (with
    /// --storage, where DIR may be left out; None: no directory).
    pub fn dir_of(&self, given: &Option<PathBuf>, flag: &str) -> anyhow::Result<Option<PathBuf>> {
        match (given, &self.out, &self.storage) {
            (Some(_), Some(_), _) => Err(common::bad_input!(
                "{flag} DIR and --out DIR: give one directory"
            )),
            (Some(d), None, _) => Ok(Some(d.clone())),
            (None, out, Some(_)) => Ok(out.clone()),
            (None, _, None) => Err(common::bad_input!(
                "{flag}: expected the sweep's directory ({flag} DIR), or --storage URL --study NAME"
            )),
        }
    }

    /// --heartbeat-grace and --db-patience, checked.
    pub fn db_times(&self) -> anyhow::Result<(std::time::Duration, std::time::Duration)> {
        let secs = |v: f64, flag: &str| {
            (v.is_finite() && v > 0.0)
                .then(|| std::time::Duration::from_secs_f64(v))
                .ok_or_else(|| {
                    common::bad_input!("{flag}: expected a positive number of seconds, found {v}")
                })
        };
        Ok((
            secs(self.heartbeat_grace, "--heartbeat-grace")?,
            secs(self.db_patience, "--db-patience")?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn preload_is_a_workers_repeatable_module_name() {
        let cli = Cli::try_parse_from([
            "sweep",
            "--worker",
            "s",
            "--preload",
            "torch",
            "--preload",
            "transformers.trainer",
        ])
        .unwrap();
        assert_eq!(cli.args.preload, ["torch", "transformers.trainer"]);
        let e = Cli::try_parse_from(["sweep", "--worker", "s", "--preload", "torch-x"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("expected a module name as Python imports it"),
            "{e}"
        );
        let e = Cli::try_parse_from(["sweep", "--space", "a", "--out", "o", "--preload", "torch"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("cannot be used with '--preload <MODULE>'"),
            "{e}"
        );
        let e = Cli::try_parse_from(["sweep", "--preload", "torch"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--worker"), "{e}");
    }
}
