//! cfgcheck's known-hazard rules, each with a stable id (shared later with
//! `cfgcheck --explain`), a severity, what will happen at run time, and the
//! fix. The rules read the config, the target GPU from a memdiag report, and
//! the host; they never touch a GPU.

use crate::config::{Config, LoadedConfig, Precision};
use crate::estimate::{self, Estimate, MIB};
use crate::report::Gpu;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// A rule's fixed description, for `cfgcheck --list-rules` and README.
pub struct Rule {
    pub id: &'static str,
    pub severity: Severity,
    pub summary: &'static str,
}

pub const CUDA_GRAPHS_CHECKPOINTING: &str = "cuda-graphs-checkpointing";
pub const MEMORY_EXCEEDS_FREE: &str = "memory-exceeds-free";
pub const MEMORY_HEADROOM: &str = "memory-headroom";
pub const PARALLEL_TRIALS: &str = "parallel-trials-overflow";
pub const FRAGMENTATION: &str = "allocator-fragmentation";
pub const ALLOC_CONF_SYNTAX: &str = "allocator-conf-syntax";
pub const WORKERS_SMALL_HOST: &str = "workers-small-host";
pub const PIN_MEMORY_NO_WORKERS: &str = "pin-memory-without-workers";
pub const UNCAPPED_DATASET: &str = "uncapped-dataset";
pub const LAUNCH_BLOCKING: &str = "launch-blocking";
pub const GPU_FEATURES_WITHOUT_GPU: &str = "gpu-features-without-gpu";

pub const RULES: &[Rule] = &[
    Rule { id: CUDA_GRAPHS_CHECKPOINTING, severity: Severity::Error, summary: "torch.compile with CUDA graphs (reduce-overhead, max-autotune) and gradient checkpointing: dies at epoch 2 with \"static input data pointer changed\"" },
    Rule { id: MEMORY_EXCEEDS_FREE, severity: Severity::Error, summary: "estimated peak above the target GPU's free memory: out of memory" },
    Rule { id: MEMORY_HEADROOM, severity: Severity::Warning, summary: "estimated peak fits with less headroom than the margin (default 10%)" },
    Rule { id: PARALLEL_TRIALS, severity: Severity::Error, summary: "parallel_trials × per-trial peak above the GPU's memory less the margin" },
    Rule { id: FRAGMENTATION, severity: Severity::Warning, summary: "long run, parallel trials or a sweep without expandable_segments:True: fragmentation (\"reserved but unallocated\") ends it" },
    Rule { id: ALLOC_CONF_SYNTAX, severity: Severity::Error, summary: "an allocator setting PyTorch refuses at start-up (expandable_segments takes True or False)" },
    Rule { id: WORKERS_SMALL_HOST, severity: Severity::Warning, summary: "DataLoader workers on a host with little RAM: the OOM killer ends the run (exit -9)" },
    Rule { id: PIN_MEMORY_NO_WORKERS, severity: Severity::Info, summary: "pin_memory without workers pins host memory for no overlap" },
    Rule { id: UNCAPPED_DATASET, severity: Severity::Warning, summary: "no max_train_examples and a dataset near or above host RAM: exit -9 while loading" },
    Rule { id: LAUNCH_BLOCKING, severity: Severity::Info, summary: "CUDA_LAUNCH_BLOCKING=1: 10-20% slower, for debugging only" },
    Rule { id: GPU_FEATURES_WITHOUT_GPU, severity: Severity::Warning, summary: "torch.compile or fp16 on a target with no GPU" },
];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    pub severity: Severity,
    /// What will happen at run time.
    pub message: String,
    pub fix: String,
    /// The config key the finding is about, and its line in the file.
    pub key: Option<String>,
    pub line: Option<usize>,
}

/// A rule that could not be applied, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub rules: Vec<String>,
    pub reason: String,
}

/// What the config is checked against.
pub struct Target<'a> {
    /// The GPU from the report, if a report with a GPU was given.
    pub gpu: Option<&'a Gpu>,
    /// A report was given and it holds no GPU (memdiag on a CPU machine).
    pub known_no_gpu: bool,
    /// Host RAM in MiB, when known.
    pub host_ram_mib: Option<u64>,
    /// Headroom required on the GPU, as a fraction (0.10 = 10%).
    pub margin: f64,
    /// The environment the run inherits (the caller's process environment).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// A host with less RAM than this is "small" for DataLoader workers: Colab's
/// free tier has 12.7 GB (seed 002).
pub const SMALL_HOST_MIB: u64 = 16 * 1024;
/// Epochs from which a single run counts as long for fragmentation.
pub const LONG_RUN_EPOCHS: u32 = 20;
const BATCH_CAP: u32 = 4096;

pub struct Outcome {
    pub findings: Vec<Finding>,
    pub skipped: Vec<Skipped>,
    pub estimate: Estimate,
}

pub fn check(loaded: &LoadedConfig, target: &Target) -> Outcome {
    let c = &loaded.config;
    let at = |key: &str| loaded.index.line_of(key);
    let mut findings = Vec::new();
    let mut skipped = Vec::new();
    let mut add = |id: &str, severity, key: &str, message: String, fix: String| {
        findings.push(Finding {
            id: id.to_string(),
            severity,
            message,
            fix,
            key: Some(key.to_string()),
            line: at(key),
        })
    };

    if c.torch_compile && c.gradient_checkpointing && c.torch_compile_mode.uses_cuda_graphs() {
        add(
            CUDA_GRAPHS_CHECKPOINTING,
            Severity::Error,
            "torch_compile_mode",
            format!(
                "torch.compile mode \"{}\" records CUDA graphs, which need every tensor at a fixed address; gradient checkpointing recomputes activations at new addresses, so the run dies at epoch 2 with \"RuntimeError: static input data pointer changed\"",
                c.torch_compile_mode.as_str()
            ),
            "set torch_compile_mode: default (keeps most of the compile speed-up), or torch_compile: false".into(),
        );
    }

    let est = estimate::estimate(c);
    match target.gpu {
        Some(gpu) => match gpu.memory {
            Some(mem) => memory_rules(c, &est, gpu, mem, target.margin, &mut add),
            None => skipped.push(Skipped {
                rules: vec![MEMORY_EXCEEDS_FREE.into(), MEMORY_HEADROOM.into(), PARALLEL_TRIALS.into()],
                reason: format!("the report does not give GPU {}'s memory", gpu.index),
            }),
        },
        None => skipped.push(Skipped {
            rules: vec![MEMORY_EXCEEDS_FREE.into(), MEMORY_HEADROOM.into(), PARALLEL_TRIALS.into()],
            reason: if target.known_no_gpu {
                "the report holds no GPU".into()
            } else {
                "no target GPU: pipe memdiag's report in, or give --gpu FILE (a report or a profile in configs/gpus/)".into()
            },
        }),
    }

    allocator_rules(c, target, &mut add);

    match target.host_ram_mib {
        Some(ram) => host_rules(c, ram, &mut add),
        None => skipped.push(Skipped {
            rules: vec![WORKERS_SMALL_HOST.into(), UNCAPPED_DATASET.into()],
            reason: "host RAM unknown (give --host-ram-gib)".into(),
        }),
    }
    if c.pin_memory && c.num_workers == 0 {
        add(
            PIN_MEMORY_NO_WORKERS,
            Severity::Info,
            "pin_memory",
            "pin_memory without workers pins every batch in the main process: page-locked host memory with no loading overlap to gain".into(),
            "set pin_memory: false, or use it only with num_workers > 0 (seed 002)".into(),
        );
    }
    if let Some((v, source)) = c.env_var("CUDA_LAUNCH_BLOCKING", target.env) {
        if v.trim() == "1" {
            add(
                LAUNCH_BLOCKING,
                Severity::Info,
                "environment",
                format!("CUDA_LAUNCH_BLOCKING=1 (from the {source}) makes every kernel launch synchronous: errors point at the right line, but the run is 10-20% slower"),
                "keep it for debugging a device-side assert; unset it for long runs".into(),
            );
        }
    }
    if target.known_no_gpu && (c.torch_compile || c.mixed_precision == Precision::Fp16) {
        let what = match (c.torch_compile, c.mixed_precision == Precision::Fp16) {
            (true, true) => "torch_compile and mixed_precision fp16",
            (true, false) => "torch_compile",
            _ => "mixed_precision fp16",
        };
        add(
            GPU_FEATURES_WITHOUT_GPU,
            Severity::Warning,
            if c.torch_compile { "torch_compile" } else { "mixed_precision" },
            format!("{what} on a target with no GPU: compile spends minutes for little CPU gain, and fp16 autocast is slow or unsupported on CPU"),
            "on CPU set torch_compile: false and mixed_precision: off (or bf16)".into(),
        );
    }
    findings.sort_by_key(|f| f.severity);
    Outcome {
        findings,
        skipped,
        estimate: est,
    }
}

type Add<'a> = dyn FnMut(&str, Severity, &str, String, String) + 'a;

fn memory_rules(
    c: &Config,
    est: &Estimate,
    gpu: &Gpu,
    mem: crate::report::Memory,
    margin: f64,
    add: &mut Add,
) {
    let peak = est.peak_mib();
    let name = gpu.name.as_deref().unwrap_or("the GPU");
    let free = mem.free_mib;
    let budget = ((free as f64) * (1.0 - margin)) as u64 * MIB;
    let levers = levers(c, est);
    let largest = estimate::largest_batch(c, budget, BATCH_CAP);
    let batch_advice = match largest {
        Some(b) => format!(
            "largest batch_size that fits with {:.0}% headroom: {b}",
            margin * 100.0
        ),
        None => "even batch_size 1 does not fit".to_string(),
    };
    if peak > free {
        add(
            MEMORY_EXCEEDS_FREE,
            Severity::Error,
            "batch_size",
            format!("estimated peak {peak} MiB is above the {free} MiB free on {name} (GPU {}): the run stops with \"CUDA out of memory\"", gpu.index),
            format!("{batch_advice}; {levers}"),
        );
    } else if ((free - peak) as f64) < margin * free as f64 {
        add(
            MEMORY_HEADROOM,
            Severity::Warning,
            "batch_size",
            format!(
                "estimated peak {peak} MiB leaves {} MiB ({:.1}%) of the {free} MiB free on {name}, under the {:.0}% margin: fragmentation or another process can push it out of memory",
                free - peak,
                100.0 * (free - peak) as f64 / free as f64,
                margin * 100.0
            ),
            format!("{batch_advice}; {levers}"),
        );
    }
    if c.parallel_trials > 1 {
        let usable = ((mem.total_mib as f64) * (1.0 - margin)) as u64;
        let n = u64::from(c.parallel_trials);
        if n * peak > usable {
            let fits = usable / peak.max(1);
            add(
                PARALLEL_TRIALS,
                Severity::Error,
                "parallel_trials",
                format!(
                    "{n} trials × {peak} MiB = {} MiB on {name}'s {} MiB less the {:.0}% margin ({usable} MiB): no breathing room, fragmentation turns into OOM and device-side asserts (seed 004: 4 trials of ~6 GB on 24 GB died, 3 ran)",
                    n * peak,
                    mem.total_mib,
                    margin * 100.0
                ),
                if fits >= 1 {
                    format!("set parallel_trials: {fits} (the most that fit with the margin)")
                } else {
                    "not even one trial fits with the margin: shrink the trial first".to_string()
                },
            );
        }
    }
}

/// What each memory lever would save, from the estimate itself.
fn levers(c: &Config, est: &Estimate) -> String {
    let mut out = Vec::new();
    let mut try_lever = |label: &str, changed: Config| {
        let saved = est
            .peak_bytes
            .saturating_sub(estimate::estimate(&changed).peak_bytes);
        if saved > 0 {
            out.push(format!("{label} saves {} MiB", saved / MIB));
        }
    };
    if !c.gradient_checkpointing {
        try_lever(
            "gradient_checkpointing: true",
            Config {
                gradient_checkpointing: true,
                ..c.clone()
            },
        );
    }
    if c.mixed_precision == Precision::Off {
        try_lever(
            "mixed_precision: bf16",
            Config {
                mixed_precision: Precision::Bf16,
                ..c.clone()
            },
        );
    }
    if !c.memory_optimized && c.architecture.channels.is_none() {
        try_lever(
            "memory_optimized: true (32/64/128)",
            Config {
                memory_optimized: true,
                ..c.clone()
            },
        );
    }
    if c.temporal_frames > 1 {
        let t = c.temporal_frames - 1;
        try_lever(
            &format!("temporal_frames: {t}"),
            Config {
                temporal_frames: t,
                ..c.clone()
            },
        );
    }
    if out.is_empty() {
        "no other lever left in the config".to_string()
    } else {
        out.join(", ")
    }
}

/// The allocator setting the run gets, read under both names.
pub fn alloc_conf(
    c: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, String, &'static str)> {
    ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"]
        .iter()
        .find_map(|name| {
            c.env_var(name, env)
                .map(|(v, src)| (name.to_string(), v, src))
        })
}

/// An allocator setting with expandable segments turned on, the user's other
/// options kept (`max_split_size_mb:128` -> `max_split_size_mb:128,expandable_segments:True`).
pub fn with_expandable(value: &str) -> String {
    let mut parts: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty() && !o.starts_with("expandable_segments:"))
        .collect();
    parts.push("expandable_segments:True");
    parts.join(",")
}

/// Whether an allocator setting turns expandable segments on.
pub fn expandable_segments(value: &str) -> bool {
    value
        .split(',')
        .any(|opt| opt.trim() == "expandable_segments:True")
}

fn allocator_rules(c: &Config, target: &Target, add: &mut Add) {
    let conf = alloc_conf(c, target.env);
    if let Some((name, value, source)) = &conf {
        for opt in value.split(',') {
            if let Some(v) = opt.trim().strip_prefix("expandable_segments:") {
                if v != "True" && v != "False" {
                    add(
                        ALLOC_CONF_SYNTAX,
                        Severity::Error,
                        "environment",
                        format!("{name}={value} (from the {source}): PyTorch accepts only True or False for expandable_segments and stops at start-up on \"{v}\""),
                        "write expandable_segments:True".into(),
                    );
                }
            }
        }
    }
    let long = c.epochs >= LONG_RUN_EPOCHS || c.parallel_trials > 1 || c.trials > 1;
    let on = conf
        .as_ref()
        .is_some_and(|(_, v, _)| expandable_segments(v));
    if long && !on {
        let (why, key) = match (c.trials > 1, c.parallel_trials > 1) {
            (true, _) => (format!("a sweep of {} trials", c.trials), "trials"),
            (_, true) => (
                format!("{} parallel trials", c.parallel_trials),
                "parallel_trials",
            ),
            _ => (format!("{} epochs", c.epochs), "epochs"),
        };
        add(
            FRAGMENTATION,
            Severity::Warning,
            key,
            format!("{why} without expandable_segments:True: the caching allocator fragments (\"X GiB is reserved by PyTorch but unallocated\") until a small allocation fails (seed 004 died at trial 182)"),
            "set environment: {PYTORCH_ALLOC_CONF: \"expandable_segments:True\"} (PYTORCH_CUDA_ALLOC_CONF before PyTorch 2.9); trainguard's train sets it itself when neither is set".into(),
        );
    }
}

/// Bytes the training set takes in host RAM when loaded whole (fp32), and
/// per example when that is known (the synthetic set; a file gives its size).
pub fn dataset_bytes(c: &Config) -> Option<(u64, Option<u64>)> {
    match &c.data.path {
        None => {
            let per = 4
                * (u64::from(c.temporal_frames)
                    * u64::from(c.image_channels)
                    * u64::from(c.image_size).pow(2)
                    + u64::from(c.scalar_features)
                    + 1);
            Some((per * c.data.synthetic_train_examples, Some(per)))
        }
        Some(p) => std::fs::metadata(p).ok().map(|m| (m.len(), None)),
    }
}

fn host_rules(c: &Config, ram_mib: u64, add: &mut Add) {
    if c.num_workers > 0 && ram_mib < SMALL_HOST_MIB {
        add(
            WORKERS_SMALL_HOST,
            Severity::Warning,
            "num_workers",
            format!("{} DataLoader workers on a host with {:.1} GiB of RAM: each worker is a process with its own copies, and the OOM killer ends the run with exit code -9 (seed 002)", c.num_workers, ram_mib as f64 / 1024.0),
            "set num_workers: 0 on small hosts (Colab, Kaggle)".into(),
        );
    }
    let Some((bytes, per)) = dataset_bytes(c) else {
        return;
    };
    let half = ram_mib * MIB / 2;
    if c.max_train_examples.is_none() && bytes > half {
        let cap =
            per.map(|per| format!(": about {} examples fit in half the RAM", half / per.max(1)));
        add(
            UNCAPPED_DATASET,
            Severity::Warning,
            "max_train_examples",
            format!("no max_train_examples and the training set takes {} MiB against {ram_mib} MiB of host RAM: loading it can get the process killed (exit -9, seed 002)", bytes / MIB),
            format!("set max_train_examples{}", cap.unwrap_or_default()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Input;
    use crate::report::{Gpu, Memory};

    fn gpu(total_mib: u64, free_mib: u64) -> Gpu {
        let mut g = Gpu::new(0);
        g.name = Some("test GPU".into());
        g.memory = Some(Memory {
            total_mib,
            used_mib: total_mib - free_mib,
            free_mib,
        });
        g
    }

    struct Case {
        gpu: Option<Gpu>,
        known_no_gpu: bool,
        ram_mib: Option<u64>,
        env: Vec<(&'static str, &'static str)>,
    }

    impl Default for Case {
        fn default() -> Self {
            Case {
                gpu: Some(gpu(15360, 15360)),
                known_no_gpu: false,
                ram_mib: Some(64 * 1024),
                env: vec![],
            }
        }
    }

    fn ids(text: &str, case: Case) -> Vec<String> {
        let loaded = Config::load(&Input {
            name: "c.yaml".into(),
            text: text.into(),
        })
        .unwrap();
        let env_vars = case.env.clone();
        let env = move |name: &str| {
            env_vars
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        let target = Target {
            gpu: case.gpu.as_ref(),
            known_no_gpu: case.known_no_gpu,
            host_ram_mib: case.ram_mib,
            margin: 0.10,
            env: &env,
        };
        check(&loaded, &target)
            .findings
            .into_iter()
            .map(|f| f.id)
            .collect()
    }

    fn fires(id: &str, text: &str, case: Case) -> bool {
        ids(text, case).iter().any(|i| i == id)
    }

    #[test]
    fn cuda_graphs_with_checkpointing() {
        let bad = "gradient_checkpointing: true\ntorch_compile: true\ntorch_compile_mode: reduce-overhead\n";
        assert!(fires(CUDA_GRAPHS_CHECKPOINTING, bad, Case::default()));
        assert!(fires(
            CUDA_GRAPHS_CHECKPOINTING,
            &bad.replace("reduce-overhead", "max-autotune"),
            Case::default()
        ));
        assert!(!fires(
            CUDA_GRAPHS_CHECKPOINTING,
            &bad.replace("reduce-overhead", "default"),
            Case::default()
        ));
        assert!(!fires(
            CUDA_GRAPHS_CHECKPOINTING,
            &bad.replace("reduce-overhead", "max-autotune-no-cudagraphs"),
            Case::default()
        ));
        assert!(!fires(
            CUDA_GRAPHS_CHECKPOINTING,
            &bad.replace("torch_compile: true", "torch_compile: false"),
            Case::default()
        ));
        assert!(!fires(
            CUDA_GRAPHS_CHECKPOINTING,
            &bad.replace("checkpointing: true", "checkpointing: false"),
            Case::default()
        ));
    }

    #[test]
    fn memory_against_free_memory_and_margin() {
        let big = "batch_size: 64\nimage_size: 256\n";
        assert!(fires(MEMORY_EXCEEDS_FREE, big, Case::default()));
        assert!(!fires(
            MEMORY_EXCEEDS_FREE,
            "batch_size: 4\n",
            Case::default()
        ));
        // Skipped, not guessed, without a target.
        assert!(!fires(
            MEMORY_EXCEEDS_FREE,
            big,
            Case {
                gpu: None,
                ..Case::default()
            }
        ));
        // Just under the free memory: fits, but within the margin.
        let loaded = Config::load(&Input {
            name: "c".into(),
            text: big.into(),
        })
        .unwrap();
        let peak = estimate::estimate(&loaded.config).peak_mib();
        let tight = Case {
            gpu: Some(gpu(peak + 100, peak + 100)),
            ..Case::default()
        };
        let found = ids(big, tight);
        assert!(
            found.contains(&MEMORY_HEADROOM.to_string())
                && !found.contains(&MEMORY_EXCEEDS_FREE.to_string()),
            "{found:?}"
        );
        let roomy = Case {
            gpu: Some(gpu(peak * 2, peak * 2)),
            ..Case::default()
        };
        assert!(!fires(MEMORY_HEADROOM, big, roomy));
        // Another process holding memory: free, not total, is what counts.
        let shared = Case {
            gpu: Some(gpu(peak * 2, peak / 2)),
            ..Case::default()
        };
        assert!(fires(MEMORY_EXCEEDS_FREE, big, shared));
    }

    #[test]
    fn parallel_trials_against_total_memory() {
        let text = |n: u32| format!("parallel_trials: {n}\nimage_size: 128\nbatch_size: 32\n");
        let loaded = Config::load(&Input {
            name: "c".into(),
            text: text(1),
        })
        .unwrap();
        let peak = estimate::estimate(&loaded.config).peak_mib();
        // Seed 004's arithmetic: room for 3 with the margin, not 4.
        let total = (peak * 3 * 100).div_ceil(90) + 10;
        let case = || Case {
            gpu: Some(gpu(total, total)),
            ..Case::default()
        };
        assert!(fires(PARALLEL_TRIALS, &text(4), case()));
        assert!(!fires(PARALLEL_TRIALS, &text(3), case()));
    }

    #[test]
    fn fragmentation_and_allocator_syntax() {
        assert!(fires(FRAGMENTATION, "epochs: 50\n", Case::default()));
        assert!(fires(
            FRAGMENTATION,
            "epochs: 2\nparallel_trials: 2\n",
            Case::default()
        ));
        assert!(fires(
            FRAGMENTATION,
            "epochs: 2\ntrials: 5000\n",
            Case::default()
        ));
        assert!(!fires(FRAGMENTATION, "epochs: 5\n", Case::default()));
        let on = "epochs: 50\nenvironment:\n  PYTORCH_CUDA_ALLOC_CONF: \"max_split_size_mb:128,expandable_segments:True\"\n";
        assert!(!fires(FRAGMENTATION, on, Case::default()));
        // From the shell, under either name.
        let shell = Case {
            env: vec![("PYTORCH_ALLOC_CONF", "expandable_segments:True")],
            ..Case::default()
        };
        assert!(!fires(FRAGMENTATION, "epochs: 50\n", shell));
        let lower = "environment: {PYTORCH_ALLOC_CONF: \"expandable_segments:true\"}\n";
        assert!(fires(ALLOC_CONF_SYNTAX, lower, Case::default()));
        assert!(!fires(ALLOC_CONF_SYNTAX, on, Case::default()));
    }

    #[test]
    fn data_loading_on_small_hosts() {
        let colab = || Case {
            ram_mib: Some(12_700),
            ..Case::default()
        };
        assert!(fires(WORKERS_SMALL_HOST, "num_workers: 2\n", colab()));
        assert!(!fires(WORKERS_SMALL_HOST, "num_workers: 0\n", colab()));
        assert!(!fires(
            WORKERS_SMALL_HOST,
            "num_workers: 2\n",
            Case::default()
        ));
        assert!(fires(
            PIN_MEMORY_NO_WORKERS,
            "pin_memory: true\n",
            Case::default()
        ));
        assert!(!fires(
            PIN_MEMORY_NO_WORKERS,
            "pin_memory: true\nnum_workers: 2\n",
            Case::default()
        ));
        // 200000 examples of 5×3×128×128 fp32 = 45.8 GiB.
        let huge = "image_size: 128\ndata: {synthetic_train_examples: 200000}\n";
        assert!(fires(UNCAPPED_DATASET, huge, colab()));
        assert!(!fires(
            UNCAPPED_DATASET,
            &format!("{huge}max_train_examples: 10000\n"),
            colab()
        ));
        assert!(!fires(UNCAPPED_DATASET, "image_size: 128\n", colab()));
    }

    #[test]
    fn launch_blocking_and_gpu_features_without_gpu() {
        assert!(fires(
            LAUNCH_BLOCKING,
            "environment: {CUDA_LAUNCH_BLOCKING: \"1\"}\n",
            Case::default()
        ));
        assert!(fires(
            LAUNCH_BLOCKING,
            "epochs: 1\n",
            Case {
                env: vec![("CUDA_LAUNCH_BLOCKING", "1")],
                ..Case::default()
            }
        ));
        assert!(!fires(
            LAUNCH_BLOCKING,
            "environment: {CUDA_LAUNCH_BLOCKING: \"0\"}\n",
            Case::default()
        ));
        let cpu = || Case {
            gpu: None,
            known_no_gpu: true,
            ..Case::default()
        };
        assert!(fires(
            GPU_FEATURES_WITHOUT_GPU,
            "torch_compile: true\n",
            cpu()
        ));
        assert!(fires(
            GPU_FEATURES_WITHOUT_GPU,
            "mixed_precision: fp16\n",
            cpu()
        ));
        assert!(!fires(
            GPU_FEATURES_WITHOUT_GPU,
            "mixed_precision: bf16\n",
            cpu()
        ));
        assert!(!fires(
            GPU_FEATURES_WITHOUT_GPU,
            "torch_compile: true\n",
            Case::default()
        ));
    }

    #[test]
    fn every_rule_id_is_listed_once() {
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
    }
}
