//! What the supervisor of any command writes (`train run -- CMD`, and each
//! trial of a program sweep under `trials/NNNN/run/`): program-summary/v1,
//! how it ended, leg by leg; supervise-metrics/v1, the reports it read from
//! the program's output and its own metrics.csv.

use super::failure::Class;
use super::Versioned;
use serde::{Deserialize, Serialize};

/// How a supervised command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProgramStatus {
    /// It exited 0 and reported no non-finite metric.
    Finished,
    /// It exited non-zero, died of a signal, reported a non-finite metric
    /// or ran past its time.
    Failed,
    /// The supervisor was stopped (Ctrl-C, SIGTERM) and ended it.
    Stopped,
    /// A sweep's pruner ended it.
    Pruned,
}

/// One command line of a run (several with `--fallback`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramLeg {
    /// The file in `{config}`'s place, if the command has one.
    pub config: Option<String>,
    pub command: Vec<String>,
    pub status: ProgramStatus,
    pub class: Option<Class>,
    /// The output line (or the exit) that says why, in words.
    pub evidence: String,
    /// What to change: an environment variable or the code, for a program.
    pub advice: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub seconds: f64,
    /// CPU cores it kept busy on average: its CPU seconds (user and system,
    /// from wait4) over its seconds; absent where not measured (a command
    /// forked from a preload server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores: Option<f64>,
    /// Reports read (output lines and its own metrics.csv).
    pub reports: u64,
    pub peak: ProgramPeak,
    /// An attempt of `--auto-fix`: each knob changed from the leg before,
    /// in words (`--per_device_train_batch_size: 64 -> 32 (why)`). Absent
    /// for a first leg and a fallback's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    /// The checkpoint it resumed from (`--auto-fix`), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<String>,
}

/// `--auto-fix`'s account of a run: the knobs as the last attempt had
/// them, and each fix that was not possible, with why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoFix {
    pub attempts: u32,
    /// Knob name (`batch`, `accumulation`, `checkpointing`,
    /// `compile_mode`, `precision`) -> `value (where)`, as the last attempt
    /// ran.
    pub knobs: std::collections::BTreeMap<String, String>,
    pub not_possible: Vec<String>,
    /// Why no further attempt was made, when the last one failed.
    pub stopped: Option<String>,
    /// Where the program's own flags were read from, in words (`argparse:
    /// ...` or `--help: ...`); absent when they were never read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags_from: Option<String>,
    /// The batch each optimizer step sees as the last attempt ran: batch x
    /// accumulation, x the world size for a job of ranks, in words; absent
    /// where the batch or accumulation is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_batch: Option<String>,
}

/// The process tree's peak memory, sampled every 0.5 s: host memory as PSS
/// (shared pages counted once), GPU memory as NVML attributes it to the
/// tree's pids; null with the reason in `gpu_note` where not measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramPeak {
    pub host_pss_mib: Option<f64>,
    pub host_rss_mib: Option<f64>,
    /// Its anonymous memory (heap, tensors; smaps_rollup's `Anonymous`):
    /// what one more copy of it adds, the file-backed pages (torch's
    /// libraries) being shared between copies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_anon_mib: Option<f64>,
    pub gpu_mib: Option<f64>,
    pub gpu_note: Option<String>,
    /// When it ran out of host memory under an address-space limit
    /// (RLIMIT_AS) of its own: that limit, MiB. The limit, not the host (nor
    /// trials beside it), ran out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_limit_mib: Option<f64>,
    /// A launcher's job of ranks: each rank's own host peak (PSS of the
    /// processes whose environment says `RANK=N`), MiB, by rank.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub ranks_host_pss_mib: std::collections::BTreeMap<u32, f64>,
    /// Where it used more than one GPU (ranks spread over a group): each
    /// GPU's peak of its memory there, MiB, by NVML index.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub gpu_by_device_mib: std::collections::BTreeMap<u32, f64>,
}

impl ProgramPeak {
    /// What it needs of each GPU it is given: the most it held on one GPU
    /// (all it held, where it used one).
    pub fn gpu_each_mib(&self) -> Option<f64> {
        let most = self.gpu_by_device_mib.values().copied().reduce(f64::max);
        most.or(self.gpu_mib)
    }
}

/// The objective's best (or last) report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramValue {
    pub metric: String,
    pub value: f64,
    pub step: u64,
}

/// Which metric `best` and `last` are of, how it was chosen, and what the
/// run reported: a metric named but never reported is said, not passed in
/// silence.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramMetric {
    /// The metric named, or the one found; null when none was named and
    /// none of the names looked for was reported.
    pub name: Option<String>,
    /// `given` (`--metric`, a space's `metric.name`) or `found` (none
    /// given: the first of the names looked for that the run reported).
    pub how: String,
    /// Whether `name` was reported at least once.
    pub reported: bool,
    /// Every metric the run reported, in the order first seen.
    pub seen: Vec<String>,
}

/// summary.yaml of a supervised run, rewritten after each leg.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramSummary {
    pub schema: String,
    /// The last leg's.
    pub status: ProgramStatus,
    pub class: Option<Class>,
    pub evidence: String,
    pub advice: Option<String>,
    /// The directory the command ran in.
    pub cwd: String,
    /// The variables the supervisor set, each with why (`K=V (why)`).
    pub env_set: Vec<String>,
    /// The objective: named or found, reported or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<ProgramMetric>,
    pub best: Option<ProgramValue>,
    pub last: Option<ProgramValue>,
    pub seconds: f64,
    pub legs: Vec<ProgramLeg>,
    /// With `--auto-fix` (or a sweep's `auto_fix: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_fix: Option<AutoFix>,
    /// A launcher's job of several processes (torchrun, accelerate
    /// launch, DeepSpeed); absent for any other command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<ProgramRanks>,
}

/// A job of ranks as its launcher's options give it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramRanks {
    /// `torchrun`, `torch.distributed.run`, `accelerate launch`, ...
    pub launcher: String,
    /// How many ranks it starts, with the options it was read from, or why
    /// it is not known.
    pub world_size: String,
    /// How each rank's lines reach output.log: `tagged [rank N] by the
    /// launcher (...)` or `untagged: WHY`.
    pub lines: String,
}

impl Versioned for ProgramSummary {
    const SCHEMA: &'static str = "program-summary/v1";
    fn example() -> Self {
        let leg = ProgramLeg {
            config: Some("b.yaml".into()),
            command: vec!["python".into(), "main.py".into(), "--config".into(), "b.yaml".into()],
            status: ProgramStatus::Failed,
            class: Some(Class::OutOfMemory),
            evidence: "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes.".into(),
            advice: Some("a smaller batch size in your config".into()),
            exit_code: Some(1),
            signal: None,
            seconds: 4.2,
            cpu_cores: Some(1.9),
            reports: 3,
            peak: ProgramPeak {
                host_pss_mib: Some(812.4),
                host_rss_mib: Some(905.0),
                host_anon_mib: Some(330.2),
                gpu_mib: None,
                gpu_note: Some("not available: NVML cannot be loaded".into()),
                address_limit_mib: None,
                ranks_host_pss_mib: Default::default(),
                gpu_by_device_mib: Default::default(),
            },
            changed: vec![],
            resumed_from: None,
        };
        let value = ProgramValue {
            metric: "val_loss".into(),
            value: 1.2103,
            step: 2,
        };
        ProgramSummary {
            schema: Self::SCHEMA.into(),
            status: leg.status,
            class: leg.class,
            evidence: leg.evidence.clone(),
            advice: leg.advice.clone(),
            cwd: "/home/me/project".into(),
            env_set: vec!["PYTORCH_ALLOC_CONF=expandable_segments:True (...)".into()],
            metric: Some(ProgramMetric {
                name: Some("val_loss".into()),
                how: "given".into(),
                reported: true,
                seen: vec!["train_loss".into(), "val_loss".into()],
            }),
            best: Some(value.clone()),
            last: Some(value),
            seconds: 4.2,
            legs: vec![leg],
            ranks: None,
            auto_fix: None,
        }
    }
}

/// One row of a supervised run's metrics.csv: one report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReportRow {
    /// Since the command (its leg) started.
    pub seconds: f64,
    /// The leg (1 for a run without `--fallback`).
    pub leg: u32,
    pub metric: String,
    pub step: u64,
    pub value: f64,
}

impl ReportRow {
    pub const HEADER: &'static str = "seconds,leg,metric,step,value\n";

    /// The row as a CSV line (with its newline).
    pub fn to_csv_line(&self) -> String {
        let metric = if self.metric.contains([',', '"', '\n']) {
            format!("\"{}\"", self.metric.replace('"', "\"\""))
        } else {
            self.metric.clone()
        };
        format!(
            "{:.1},{},{},{},{}\n",
            self.seconds, self.leg, metric, self.step, self.value
        )
    }
}

impl Versioned for ReportRow {
    const SCHEMA: &'static str = "supervise-metrics/v1";
    fn example() -> Self {
        ReportRow {
            seconds: 95.3,
            leg: 1,
            metric: "val_loss".into(),
            step: 2,
            value: 1.2103,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_back_and_a_row_quotes_its_metric() {
        let s = ProgramSummary::example();
        let text = serde_yaml::to_string(&s).unwrap();
        assert_eq!(
            super::super::parse::<ProgramSummary>("summary.yaml", &text).unwrap(),
            s
        );
        let row = ReportRow {
            metric: "eval/loss, smoothed".into(),
            ..ReportRow::example()
        };
        let text = format!("{}{}", ReportRow::HEADER, row.to_csv_line());
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let back: ReportRow = r.deserialize().next().unwrap().unwrap();
        assert_eq!(back.metric, "eval/loss, smoothed");
        assert_eq!(back.value, 1.2103);
    }
}
