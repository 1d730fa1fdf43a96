//! What verify-fixes knows of the machine, for both forms: the target GPU
//! (memdiag's report on stdin or `--gpu NAME|FILE`), the shell's variables, and
//! the check that reads only those (GPU state); how a check that needs a
//! GPU is skipped, or failed with `--require-gpu`.

use crate::rows::{Check, Form, Status};
use common::report::{Gpu, Report, Source};
use std::collections::BTreeMap;

/// CUDA debugging and profiling variables that slow or change a run.
pub const DEBUG_VARS: [&str; 6] = [
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_INJECTION64_PATH",
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
    "CUDA_DEVICE_WAITS_ON_EXCEPTION",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "TORCH_CUDA_SANITIZER",
];

pub struct Machine<'a> {
    pub report: Option<&'a Report>,
    pub device: Option<u32>,
    pub require_gpu: bool,
    pub other_share: f64,
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl Machine<'_> {
    pub fn gpu(&self) -> Option<&Gpu> {
        self.report.and_then(|r| r.pick_gpu(self.device))
    }

    /// Skipped, or failed with --require-gpu.
    pub fn no_gpu(&self, form: Form, id: &'static str, why: String) -> Check {
        if self.require_gpu {
            form.row(
                id,
                Status::Fail,
                format!("{why} (--require-gpu)"),
                Some("run on the GPU machine, with memdiag's report piped in".into()),
            )
        } else {
            form.row(id, Status::Skip, why, None)
        }
    }

    pub fn no_gpu_reason(&self) -> String {
        match self.report {
            None => format!(
                "no target GPU: pipe memdiag's report in, or {}",
                common::gpus::how_to_name()
            ),
            Some(r) if r.gpus.is_empty() => {
                format!("the report holds no GPU ({})", r.notes.join("; "))
            }
            Some(_) => format!(
                "the report has no GPU {}",
                self.device.map_or("".into(), |d| d.to_string())
            ),
        }
    }

    /// In the spirit of DCGM's level 1, from memdiag's live report: NVML
    /// answers, no pending retirements or remap failures, other processes'
    /// share, persistence; and no CUDA debugging variable left set (the
    /// shell's, or `config_env`: a config's `environment`).
    pub fn gpu_state(&self, form: Form, config_env: &BTreeMap<String, String>) -> Check {
        let id = "gpu-state";
        let debug = self.debug_vars_set(config_env);
        let debug_fix = (!debug.is_empty()).then(|| {
            "unset them for a long run (`eval \"$(verify-fixes --print-env)\"`)".to_string()
        });
        let live = self.report.filter(|r| r.source == Source::Nvml);
        let Some(gpu) = live.and_then(|r| r.pick_gpu(self.device)) else {
            let why = match self.report {
                Some(r) if r.source == Source::Profile => {
                    "a GPU profile, not a live GPU: NVML state not checked".to_string()
                }
                _ => self.no_gpu_reason(),
            };
            if !debug.is_empty() {
                return form.row(
                    id,
                    Status::Warn,
                    format!("{why}; debugging variables set: {}", debug.join(", ")),
                    debug_fix,
                );
            }
            return self.no_gpu(form, id, why);
        };
        let problems = self.gpu_problems(gpu);
        let mut warnings = Vec::new();
        if gpu.persistence_mode == Some(false) {
            warnings.push("persistence mode off (slower start-up; `nvidia-smi -pm 1`)".to_string());
        }
        if !debug.is_empty() {
            warnings.push(format!("debugging variables set: {}", debug.join(", ")));
        }
        let saw = format!(
            "GPU {} ({}) answers through NVML",
            gpu.index,
            gpu.name.as_deref().unwrap_or("unnamed")
        );
        if !problems.is_empty() {
            form.row(
                id,
                Status::Fail,
                format!("{saw}; {}", problems.join("; ")),
                Some("free or fix the GPU before a long run".into()),
            )
        } else if !warnings.is_empty() {
            form.row(
                id,
                Status::Warn,
                format!("{saw}; {}", warnings.join("; ")),
                debug_fix,
            )
        } else {
            form.row(
                id,
                Status::Pass,
                format!("{saw}; no pending retirements or remap failures; persistence on"),
                None,
            )
        }
    }

    /// The debugging variables set, `NAME=value`: the shell's, then the
    /// config's (`config_env`) marked so.
    fn debug_vars_set(&self, config_env: &BTreeMap<String, String>) -> Vec<String> {
        DEBUG_VARS
            .iter()
            .filter_map(|v| {
                (self.env)(v)
                    .filter(|x| !x.is_empty() && x != "0")
                    .map(|x| format!("{v}={x}"))
            })
            .chain(
                config_env
                    .iter()
                    .filter(|(k, v)| DEBUG_VARS.contains(&k.as_str()) && !v.is_empty() && *v != "0")
                    .map(|(k, v)| format!("{k}={v} (config)")),
            )
            .collect()
    }

    /// What fails a live GPU: pending retirements, failed remaps, other
    /// processes holding more than their share.
    fn gpu_problems(&self, gpu: &Gpu) -> Vec<String> {
        let mut problems = Vec::new();
        if gpu.retired_pages_pending == Some(true) {
            problems.push("retired pages pending (reset the GPU or reboot)".to_string());
        }
        if gpu.remapping_failed == Some(true) {
            problems.push("row remapping failed (the GPU needs service)".to_string());
        }
        if let (Some(mem), Some(procs)) = (gpu.memory, &gpu.processes) {
            let held: u64 = procs.iter().filter_map(|p| p.used_mib).sum();
            let share = held as f64 / mem.total_mib.max(1) as f64;
            if share > self.other_share {
                problems.push(format!(
                    "{} other process(es) hold {held} MiB ({:.0}% of {} MiB, over the {:.0}% allowed)",
                    procs.len(),
                    share * 100.0,
                    mem.total_mib,
                    self.other_share * 100.0
                ));
            }
        }
        problems
    }
}
