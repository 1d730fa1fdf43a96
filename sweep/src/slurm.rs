//! `train sweep --slurm`: the sweep rides on Slurm rather than growing a
//! scheduler. Each array task runs `train sweep --worker DIR`, one more
//! worker on the journal (as Optuna's workers share one storage); Slurm
//! only decides where and when they run. What Slurm says is asked of
//! `scontrol show config` (MaxArraySize), `sbatch --parsable` and `squeue`,
//! never `sacct` (many clusters give users no accounting database), and the
//! journal stays the truth: a task Slurm killed shows as a RUNNING trial
//! whose job `squeue` no longer lists.

use anyhow::{bail, Context};
use common::bad_input;
use common::wire::run_dir::{self, SweepDir};
use common::wire::sweep::{Options, SlurmJobs, Submission};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The sweep's slurm.yaml (the options workers were submitted with, which a
/// `--resume --slurm` reuses, and every submission's job id), None before
/// the first submission.
pub fn read_jobs(dir: &Path) -> anyhow::Result<Option<SlurmJobs>> {
    let path = SweepDir::new(dir).slurm_jobs();
    if !path.exists() {
        return Ok(None);
    }
    let input = common::input::read(&path)?;
    common::wire::parse(&input.name, &input.text).map(Some)
}

/// The Slurm task this process runs in: `JOBID_TASK` in an array, else
/// `JOBID`; None outside Slurm.
pub fn task_from_env() -> Option<String> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (var("SLURM_ARRAY_JOB_ID"), var("SLURM_ARRAY_TASK_ID")) {
        (Some(job), Some(task)) => Some(format!("{job}_{task}")),
        _ => var("SLURM_JOB_ID"),
    }
}

/// The cores Slurm gave this task: SLURM_CPUS_PER_TASK (set with
/// --cpus-per-task), else SLURM_CPUS_ON_NODE (what the job holds here).
pub fn cpus_from_env() -> Option<usize> {
    ["SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"]
        .iter()
        .find_map(|k| {
            std::env::var(k)
                .ok()?
                .trim()
                .parse()
                .ok()
                .filter(|&n| n > 0)
        })
}

/// One line of `squeue`.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// `JOBID_TASK` for an array task, else `JOBID`.
    pub key: String,
    /// The array's job id (a plain job's own id).
    pub array_job: String,
    pub state: String,
    /// Time used, as squeue prints it.
    pub time: String,
    /// The node it runs on, or why it waits.
    pub where_or_why: String,
}

/// The jobs squeue lists for this user, array tasks one per line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Queue {
    pub entries: Vec<Entry>,
}

/// `%F` the array's job id, `%K` the task id, `%i` the job's id as shown,
/// `%T` the state, `%M` the time used, `%R` the node or the reason.
const SQUEUE_FORMAT: &str = "%F|%K|%i|%T|%M|%R";

impl Queue {
    /// Asks squeue (`--me`, one line per array task). Err says why Slurm
    /// could not be asked.
    pub fn query() -> Result<Queue, String> {
        let out = Command::new("squeue")
            .args(["--me", "--noheader", "--array", "--format", SQUEUE_FORMAT])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("squeue did not run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "squeue failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Queue::parse(&String::from_utf8_lossy(&out.stdout))
    }

    pub fn parse(text: &str) -> Result<Queue, String> {
        let mut entries = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.trim().splitn(6, '|').collect();
            let [array_job, task, _id, state, time, where_or_why] = f[..] else {
                return Err(format!("squeue printed an unexpected line: {line:?}"));
            };
            let key = if task == "N/A" || task.is_empty() {
                array_job.to_string()
            } else {
                format!("{array_job}_{task}")
            };
            entries.push(Entry {
                key,
                array_job: array_job.into(),
                state: state.into(),
                time: time.into(),
                where_or_why: where_or_why.into(),
            });
        }
        Ok(Queue { entries })
    }

    /// The state of a task (`JOBID_TASK` or `JOBID`) if squeue lists it.
    pub fn state_of(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.state.as_str())
    }

    /// The entries of these arrays.
    pub fn of_jobs<'a>(&'a self, jobs: &'a [String]) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(|e| jobs.contains(&e.array_job))
    }
}

/// The cluster's MaxArraySize (an array's largest index is one less).
pub fn max_array_size() -> anyhow::Result<u64> {
    let out = Command::new("scontrol")
        .args(["show", "config"])
        .stdin(Stdio::null())
        .output()
        .context("scontrol did not run (is Slurm installed here?)")?;
    if !out.status.success() {
        bail!(
            "`scontrol show config` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_max_array_size(&String::from_utf8_lossy(&out.stdout))
        .context("`scontrol show config` printed no MaxArraySize")
}

/// `MaxArraySize           = 1001` from `scontrol show config`.
pub fn parse_max_array_size(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "MaxArraySize")
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}

/// `k` workers as arrays of at most `max` tasks each (MaxArraySize: an
/// index must stay below it).
pub fn chunks(k: u64, max: u64) -> Vec<u64> {
    let max = max.max(1);
    let mut left = k;
    let mut out = Vec::new();
    while left > 0 {
        out.push(left.min(max));
        left -= left.min(max);
    }
    out
}

/// Single quotes for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The sbatch script of an array of `tasks` workers.
pub fn script(dir: &Path, train: &Path, name: &str, tasks: u64, o: &Options) -> String {
    let dir_s = dir.display().to_string();
    let mut lines = vec![
        "#!/bin/bash".to_string(),
        format!("# Written by `train sweep --slurm`: each array task is one more worker on the sweep in {dir_s};"),
        "# it claims trials from the sweep's journal (or the database its sweep.yaml names) until none is left.".to_string(),
        format!("#SBATCH --job-name={}", job_name(name)),
        format!("#SBATCH --array=0-{}", tasks.saturating_sub(1)),
        "#SBATCH --ntasks=1".to_string(),
        format!(
            "#SBATCH --output={dir_s}/{}/{}",
            run_dir::SLURM_DIR,
            run_dir::SLURM_OUTPUT
        ),
    ];
    if let Some(p) = &o.partition {
        lines.push(format!("#SBATCH --partition={p}"));
    }
    if let Some(c) = o.cpus_per_task {
        lines.push(format!("#SBATCH --cpus-per-task={c}"));
    }
    if let Some(g) = o.gpus_per_task {
        lines.push(format!("#SBATCH --gpus-per-task={g}"));
    }
    if let Some(t) = &o.time {
        lines.push(format!("#SBATCH --time={t}"));
    }
    lines.push(format!(
        "exec {} sweep --worker {}",
        quote(&train.display().to_string()),
        quote(&dir_s)
    ));
    lines.join("\n") + "\n"
}

/// A job name sbatch takes: the study's name, without what would end the
/// `#SBATCH` line early.
fn job_name(study: &str) -> String {
    let clean: String = study
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("sweep-{clean}")
}

/// Refuses options that would break the script's `#SBATCH` lines.
pub fn check(o: &Options) -> anyhow::Result<()> {
    for (flag, v) in [("--partition", &o.partition), ("--time", &o.time)] {
        if let Some(v) = v {
            if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(bad_input!(
                    "{flag}: expected one word as sbatch takes it, found {v:?}"
                ));
            }
        }
    }
    for (flag, v) in [
        ("--gpus-per-task", o.gpus_per_task),
        ("--cpus-per-task", o.cpus_per_task),
    ] {
        if v == Some(0) {
            return Err(bad_input!("{flag}: expected a positive number, found 0"));
        }
    }
    Ok(())
}

/// Writes the scripts of `workers` array tasks (split at MaxArraySize),
/// prints each on stdout, and unless `dry_run` submits them with sbatch and
/// records their job ids in DIR/slurm.yaml.
pub fn submit_workers(
    dir: &Path,
    train: &Path,
    study: &str,
    options: &Options,
    workers: u64,
    dry_run: bool,
) -> anyhow::Result<()> {
    let max = match max_array_size() {
        Ok(m) => m,
        Err(e) if dry_run => {
            common::say!(
                "train sweep: {e:#}: the array is not split at the cluster's MaxArraySize"
            );
            workers
        }
        Err(e) => return Err(bad_input!("{e:#}")),
    };
    let parts = chunks(workers, max);
    if parts.len() > 1 {
        common::say!(
            "train sweep: {workers} workers are more than this cluster's MaxArraySize {max}: {} arrays",
            parts.len()
        );
    }
    let scripts = SweepDir::new(dir).slurm_dir();
    std::fs::create_dir_all(&scripts).with_context(|| format!("creating {}", scripts.display()))?;
    let mut record = read_jobs(dir)?.unwrap_or(SlurmJobs {
        schema: <SlurmJobs as common::wire::Versioned>::SCHEMA.into(),
        options: Options::default(),
        jobs: Vec::new(),
    });
    record.options = options.clone();
    let first = record.jobs.len() + 1;
    let mut out = std::io::stdout().lock();
    for (i, tasks) in parts.iter().enumerate() {
        let path: PathBuf = SweepDir::new(dir).worker_script(first + i);
        let text = script(dir, train, study, *tasks, options);
        common::files::write_atomic(&path, text.as_bytes())?;
        use std::io::Write;
        writeln!(out, "# {}", path.display())?;
        write!(out, "{text}")?;
        out.flush()?;
        if dry_run {
            common::say!(
                "train sweep: wrote {} ({tasks} workers); not submitted (--dry-run): `sbatch {0}` submits it",
                path.display()
            );
            continue;
        }
        let job_id = sbatch(&path)?;
        common::say!(
            "train sweep: submitted job {job_id}: array 0-{} of workers ({})",
            tasks - 1,
            path.display()
        );
        record.jobs.push(Submission {
            job_id,
            tasks: *tasks,
            script: path.display().to_string(),
            submitted: crate::journal::iso_utc(std::time::SystemTime::now())?,
        });
        // Written after each submission: a job id is never lost.
        common::files::write_yaml(&SweepDir::new(dir).slurm_jobs(), &record)?;
    }
    if dry_run {
        common::files::write_yaml(&SweepDir::new(dir).slurm_jobs(), &record)?;
    } else {
        common::say!(
            "train sweep: follow it with `train sweep --status {}`",
            dir.display()
        );
    }
    Ok(())
}

/// `sbatch --parsable SCRIPT` -> the job id.
fn sbatch(script: &Path) -> anyhow::Result<String> {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .arg(script)
        .stdin(Stdio::null())
        .output()
        .context("sbatch did not run (is Slurm installed here?)")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(bad_input!(
            "sbatch {} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // `JOBID` or `JOBID;CLUSTER`.
    let id = stdout.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        bail!("sbatch printed {stdout:?}, not a job id");
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_become_task_keys() {
        let q = Queue::parse(
            "4107|0|4107_0|RUNNING|0:12|vm\n4107|2|4107_2|PENDING|0:00|(Resources)\n99|N/A|99|RUNNING|1:00|vm\n",
        )
        .unwrap();
        assert_eq!(q.state_of("4107_0"), Some("RUNNING"));
        assert_eq!(q.state_of("4107_2"), Some("PENDING"));
        assert_eq!(q.state_of("4107_1"), None);
        assert_eq!(q.state_of("99"), Some("RUNNING"));
        assert_eq!(q.of_jobs(&["4107".into()]).count(), 2);
        assert!(Queue::parse("what\n").is_err());
    }

    #[test]
    fn max_array_size_is_read_and_arrays_are_split_below_it() {
        let text = "MailProg                = /bin/mail\nMaxArraySize            = 1001\nMaxJobCount             = 10000\n";
        assert_eq!(parse_max_array_size(text), Some(1001));
        assert_eq!(parse_max_array_size("MaxJobCount = 3\n"), None);
        assert_eq!(chunks(2500, 1001), vec![1001, 1001, 498]);
        assert_eq!(chunks(3, 1001), vec![3]);
        assert_eq!(chunks(0, 1001), Vec::<u64>::new());
    }

    #[test]
    fn the_script_runs_one_worker_per_task_with_the_options_given() {
        let o = Options {
            partition: Some("gpu".into()),
            gpus_per_task: Some(1),
            cpus_per_task: None,
            time: Some("1:00:00".into()),
        };
        let s = script(
            Path::new("/shared/it's"),
            Path::new("/opt/train"),
            "my sweep",
            3,
            &o,
        );
        assert!(s.starts_with("#!/bin/bash\n"));
        for line in [
            "#SBATCH --job-name=sweep-my_sweep",
            "#SBATCH --array=0-2",
            "#SBATCH --partition=gpu",
            "#SBATCH --gpus-per-task=1",
            "#SBATCH --time=1:00:00",
            "#SBATCH --output=/shared/it's/slurm/%A_%a.out",
            r"exec '/opt/train' sweep --worker '/shared/it'\''s'",
        ] {
            assert!(s.lines().any(|l| l == line), "{line} not in\n{s}");
        }
        assert!(!s.contains("cpus-per-task"));
        assert!(check(&o).is_ok());
        let bad = Options {
            time: Some("1:00 --x".into()),
            ..o
        };
        assert!(check(&bad).is_err());
    }
}
