//! cfgcheck's rules: the hazards of `hazards` run against a config and its
//! target, each finding with its stable id (the same id `cfgcheck --explain`
//! names as the rule that would have caught a failure, and verify-fixes'
//! config check lists), a severity, what will happen at run time, and the
//! fix. The rules read the config, the target GPU from a memdiag report, and
//! the host; they never touch a GPU.

use crate::hazards::{self, Cx, Needs, CHECK_ORDER};
use crate::keys::Found;
use common::config::LoadedConfig;
use common::estimate::{self, Estimate};

// What the rules' callers (cfgcheck, verify-fixes) use beside `check`.
pub use crate::hazards::{
    alloc_conf, dataset_bytes, expandable_segments, long_run, with_expandable, Target,
    LONG_RUN_EPOCHS, SMALL_HOST_MIB,
};
pub use common::wire::cfgcheck::{Finding, Skipped};
pub use common::wire::hazard::{HazardId, Severity};

/// A rule's fixed description, for `cfgcheck --list-rules` and docs/guide/cfgcheck.md, "Rules".
pub struct Rule {
    pub id: HazardId,
    pub severity: Severity,
    pub summary: &'static str,
}

const fn rule(id: HazardId) -> Rule {
    Rule {
        id,
        severity: id.severity(),
        summary: id.summary(),
    }
}

pub const RULES: &[Rule] = &[
    rule(HazardId::ALL[0]),
    rule(HazardId::ALL[1]),
    rule(HazardId::ALL[2]),
    rule(HazardId::ALL[3]),
    rule(HazardId::ALL[4]),
    rule(HazardId::ALL[5]),
    rule(HazardId::ALL[6]),
    rule(HazardId::ALL[7]),
    rule(HazardId::ALL[8]),
    rule(HazardId::ALL[9]),
    rule(HazardId::ALL[10]),
    rule(HazardId::ALL[11]),
];

pub struct Outcome {
    pub findings: Vec<Finding>,
    pub skipped: Vec<Skipped>,
    pub estimate: Estimate,
}

/// Why hazards that need `needs` cannot be judged on this target, if so.
fn unmet(needs: Needs, target: &Target) -> Option<String> {
    match needs {
        Needs::Nothing => None,
        Needs::GpuMemory => match target.gpu {
            Some(gpu) if gpu.memory.is_some() => None,
            Some(gpu) => Some(format!(
                "the report does not give GPU {}'s memory",
                gpu.index
            )),
            None if target.known_no_gpu => Some("the report holds no GPU".into()),
            None => Some(format!(
                "no target GPU: pipe memdiag's report in, or {}",
                common::gpus::how_to_name()
            )),
        },
        Needs::HostRam => target
            .host_ram_mib
            .is_none()
            .then(|| "host RAM unknown (give --host-ram-gib)".into()),
    }
}

pub fn check(loaded: &LoadedConfig, target: &Target) -> Outcome {
    let est = estimate::estimate(&loaded.config);
    let cx = Cx {
        loaded,
        target,
        estimate: &est,
    };
    let mut findings = Vec::new();
    let mut skipped: Vec<(Needs, Skipped)> = Vec::new();
    for id in CHECK_ORDER {
        let needs = hazards::needs(id);
        if let Some(reason) = unmet(needs, target) {
            match skipped.iter_mut().find(|(n, _)| *n == needs) {
                Some((_, s)) => s.rules.push(id),
                None => skipped.push((
                    needs,
                    Skipped {
                        rules: vec![id],
                        reason,
                    },
                )),
            }
            continue;
        }
        findings.extend(hazards::of(id).check(&cx));
    }
    findings.sort_by_key(|f| f.severity);
    Outcome {
        findings,
        skipped: skipped.into_iter().map(|(_, s)| s).collect(),
        estimate: est,
    }
}

/// Why a rule that reads trainguard's model cannot judge a config cfgcheck
/// did not define.
pub const NO_MODEL: &str = "the memory estimate is of trainguard's own model; the model this config trains is not known to cfgcheck";
/// Why a rule that reads trainguard's environment or data keys cannot.
pub const NO_SUCH_KEYS: &str = "they read trainguard's own keys (environment, data, epochs and trials), which this config does not have";

/// The rules over the keys of a config cfgcheck did not define: each hazard
/// that reads such keys (`Hazard::reads_keys`), the others said as skipped.
pub fn check_keys(found: &Found, target: &Target) -> (Vec<Finding>, Vec<Skipped>) {
    let mut findings = Vec::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    let mut skip =
        |id: HazardId, reason: String| match skipped.iter_mut().find(|s| s.reason == reason) {
            Some(s) => s.rules.push(id),
            None => skipped.push(Skipped {
                rules: vec![id],
                reason,
            }),
        };
    for id in CHECK_ORDER {
        let hazard = hazards::of(id);
        let needs = hazards::needs(id);
        if !hazard.reads_keys() {
            let why = if needs == Needs::GpuMemory {
                NO_MODEL
            } else {
                NO_SUCH_KEYS
            };
            skip(id, why.to_string());
        } else if let Some(reason) = unmet(needs, target) {
            skip(id, reason);
        } else {
            findings.extend(hazard.check_keys(found, target));
        }
    }
    findings.sort_by_key(|f| f.severity);
    (findings, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::config::Config;
    use common::input::Input;

    const CUDA_GRAPHS_CHECKPOINTING: HazardId = HazardId::CudaGraphsCheckpointing;
    const MEMORY_EXCEEDS_FREE: HazardId = HazardId::MemoryExceedsFree;
    const MEMORY_HEADROOM: HazardId = HazardId::MemoryHeadroom;
    const PARALLEL_TRIALS: HazardId = HazardId::ParallelTrialsOverflow;
    const FRAGMENTATION: HazardId = HazardId::AllocatorFragmentation;
    const ALLOC_CONF_SYNTAX: HazardId = HazardId::AllocatorConfSyntax;
    const WORKERS_SMALL_HOST: HazardId = HazardId::WorkersSmallHost;
    const PIN_MEMORY_NO_WORKERS: HazardId = HazardId::PinMemoryWithoutWorkers;
    const UNCAPPED_DATASET: HazardId = HazardId::UncappedDataset;
    const LAUNCH_BLOCKING: HazardId = HazardId::LaunchBlocking;
    const GPU_FEATURES_WITHOUT_GPU: HazardId = HazardId::GpuFeaturesWithoutGpu;
    use common::wire::memdiag::{Gpu, Memory};

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
            .map(|f| f.id.to_string())
            .collect()
    }

    fn fires(id: HazardId, text: &str, case: Case) -> bool {
        ids(text, case).iter().any(|i| i == id.as_str())
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
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
    }
}
