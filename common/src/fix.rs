//! `cfgcheck --fix` and `--fit`: the changes that make a config run, planned on
//! the schema and applied to the user's file as targeted edits (yaml_edit), so
//! comments and key order survive. `--fix` follows the seeds' decision tree:
//! compile mode default; if memory still does not fit, compile off; then the
//! 32/64/128 model; then the largest batch that fits.

use crate::config::{CompileMode, Config, LoadedConfig, Precision};
use crate::estimate::{self, MIB};
use crate::rules::{self, Target};
use crate::yaml_edit;

#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub key: String,
    /// The new value as YAML text.
    pub value: String,
    pub why: String,
}

#[derive(Debug, Default)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// Problems no config change can solve, each said plainly.
    pub unfixable: Vec<String>,
    /// The config once the changes are made.
    pub config: Config,
}

const BATCH_CAP: u32 = 4096;

struct Planner {
    config: Config,
    plan: Plan,
}

impl Planner {
    fn new(c: &Config) -> Planner {
        Planner {
            config: c.clone(),
            plan: Plan::default(),
        }
    }

    fn finish(mut self) -> Plan {
        self.plan.config = self.config;
        self.plan
    }
}

impl Planner {
    fn change(&mut self, key: &str, value: String, why: String, apply: impl FnOnce(&mut Config)) {
        apply(&mut self.config);
        self.plan.changes.push(Change {
            key: key.to_string(),
            value,
            why,
        });
    }
}

/// The memory one trial may use on the target: free memory, and with parallel
/// trials its share of the total, less the margin. None without a GPU.
pub fn budget_bytes(c: &Config, target: &Target) -> Option<u64> {
    let mem = target.gpu?.memory?;
    let share = mem.total_mib / u64::from(c.parallel_trials.max(1));
    let usable = mem.free_mib.min(share) as f64 * (1.0 - target.margin);
    Some(usable as u64 * MIB)
}

pub fn plan_fix(loaded: &LoadedConfig, target: &Target) -> Plan {
    let mut p = Planner::new(&loaded.config);
    let c = loaded.config.clone();

    if c.torch_compile && c.gradient_checkpointing && c.torch_compile_mode.uses_cuda_graphs() {
        p.change(
            "torch_compile_mode",
            yaml_edit::scalar("default"),
            format!(
                "\"{}\" uses CUDA graphs, which crash with gradient checkpointing at epoch 2; \"default\" keeps most of the speed-up (seed 001, Option A)",
                c.torch_compile_mode.as_str()
            ),
            |c| c.torch_compile_mode = CompileMode::Default,
        );
    }

    allocator_fixes(&mut p, target);

    if target.known_no_gpu {
        if c.torch_compile {
            p.change(
                "torch_compile",
                "false".into(),
                "no GPU on the target: compile costs minutes for little CPU gain".into(),
                |c| c.torch_compile = false,
            );
        }
        if c.mixed_precision == Precision::Fp16 {
            p.change(
                "mixed_precision",
                yaml_edit::scalar("off"),
                "no GPU on the target: fp16 autocast is for CUDA".into(),
                |c| c.mixed_precision = Precision::Off,
            );
        }
    }

    if let Some(ram) = target.host_ram_mib {
        if c.num_workers > 0 && ram < rules::SMALL_HOST_MIB {
            p.change(
                "num_workers",
                "0".into(),
                format!(
                    "{:.1} GiB of host RAM is too little for worker processes (seed 002)",
                    ram as f64 / 1024.0
                ),
                |c| c.num_workers = 0,
            );
        }
        if let Some((bytes, Some(per))) = rules::dataset_bytes(&c) {
            let half = ram * MIB / 2;
            if c.max_train_examples.is_none() && bytes > half {
                let n = (half / per.max(1)).max(1);
                p.change(
                    "max_train_examples",
                    n.to_string(),
                    format!(
                        "the training set ({} MiB) would not fit in half the host RAM ({} MiB)",
                        bytes / MIB,
                        ram / 2
                    ),
                    |c| c.max_train_examples = Some(n),
                );
            }
        }
    }

    let Some(mem) = target.gpu.and_then(|g| g.memory) else {
        return p.finish();
    };
    let peak = estimate::estimate(&p.config).peak_mib();
    if p.config.parallel_trials > 1 {
        let usable = (mem.total_mib as f64 * (1.0 - target.margin)) as u64;
        let n = u64::from(p.config.parallel_trials);
        if n * peak > usable && usable >= peak {
            let fits = (usable / peak) as u32;
            p.change("parallel_trials", fits.to_string(), format!("{n} trials of {peak} MiB do not fit in {usable} MiB; {fits} do (seed 004: 4 → 3)"), |c| c.parallel_trials = fits);
        }
    }
    memory_fixes(&mut p, target);
    p.finish()
}

fn allocator_fixes(p: &mut Planner, target: &Target) {
    let c = p.config.clone();
    match rules::alloc_conf(&c, target.env) {
        Some((name, value, source)) if !rules::expandable_segments(&value) => {
            let fixed = rules::with_expandable(&value);
            let long = c.epochs >= rules::LONG_RUN_EPOCHS || c.parallel_trials > 1 || c.trials > 1;
            let bad_syntax = value.contains("expandable_segments:");
            if !(long || bad_syntax) {
                return;
            }
            if source == "config" {
                let key = format!("environment.{name}");
                p.change(
                    &key,
                    yaml_edit::scalar(&fixed),
                    "expandable segments keep fragmentation from ending long runs (seed 004)"
                        .into(),
                    |c| {
                        c.environment.insert(name.clone(), fixed.clone());
                    },
                );
            } else {
                p.plan.unfixable.push(format!(
                    "{name}={value} comes from your shell, not the config: set {name}={fixed} there"
                ));
            }
        }
        None if c.epochs >= rules::LONG_RUN_EPOCHS || c.parallel_trials > 1 || c.trials > 1 => {
            let value = rules::with_expandable("");
            p.change(
                "environment.PYTORCH_ALLOC_CONF",
                yaml_edit::scalar(&value),
                "expandable segments keep fragmentation from ending long runs (seed 004)".into(),
                |c| {
                    c.environment
                        .insert("PYTORCH_ALLOC_CONF".into(), value.clone());
                },
            );
        }
        _ => {}
    }
}

fn memory_fixes(p: &mut Planner, target: &Target) {
    let Some(budget) = budget_bytes(&p.config, target) else {
        return;
    };
    let fits = |c: &Config| estimate::estimate(c).peak_bytes <= budget;
    if fits(&p.config) {
        return;
    }
    if p.config.torch_compile {
        p.change(
            "torch_compile",
            "false".into(),
            "memory does not fit: the seeds' next step (Option B) turns compile off, which saves its compilation memory; the estimate does not model compile, so it does not count on this".into(),
            |c| c.torch_compile = false,
        );
    }
    if !fits(&p.config) && !p.config.memory_optimized && p.config.architecture.channels.is_none() {
        let before = estimate::estimate(&p.config).peak_mib();
        p.change("memory_optimized", "true".into(), String::new(), |c| {
            c.memory_optimized = true
        });
        let after = estimate::estimate(&p.config).peak_mib();
        p.plan.changes.last_mut().expect("just pushed").why =
            format!("memory does not fit: the 32/64/128 model (Option C) brings the estimate from {before} to {after} MiB");
    }
    if !fits(&p.config) {
        match estimate::largest_batch(&p.config, budget, BATCH_CAP) {
            Some(b) => {
                let old = p.config.batch_size;
                p.change("batch_size", b.to_string(), format!("batch {old} does not fit in {} MiB; {b} is the largest that does", budget / MIB), |c| c.batch_size = b);
            }
            None => p.plan.unfixable.push(format!(
                "even batch_size 1 does not fit in {} MiB with this model; enable gradient_checkpointing or mixed_precision, lower image_size or temporal_frames, or use a larger GPU",
                budget / MIB
            )),
        }
    }
}

/// `--fit`: the batch size (and, if needed, the smaller model) computed for
/// the target instead of seed 002's fixed tiers.
pub fn plan_fit(loaded: &LoadedConfig, target: &Target) -> Result<Plan, String> {
    let Some(budget) = budget_bytes(&loaded.config, target) else {
        return Err("--fit needs a target GPU with known memory: pipe memdiag's report in or give --gpu FILE".into());
    };
    let mut p = Planner::new(&loaded.config);
    if estimate::largest_batch(&p.config, budget, BATCH_CAP).is_none()
        && !p.config.memory_optimized
        && p.config.architecture.channels.is_none()
    {
        p.change(
            "memory_optimized",
            "true".into(),
            "the full model does not fit even at batch 1; the 32/64/128 model does".into(),
            |c| c.memory_optimized = true,
        );
    }
    match estimate::largest_batch(&p.config, budget, BATCH_CAP) {
        Some(b) if b != p.config.batch_size => {
            let old = p.config.batch_size;
            p.change(
                "batch_size",
                b.to_string(),
                format!(
                    "largest batch whose estimated peak fits {} MiB (was {old})",
                    budget / MIB
                ),
                |c| c.batch_size = b,
            );
        }
        Some(_) => {}
        None => p.plan.unfixable.push(format!(
            "nothing fits in {} MiB, even batch 1 of the smallest model",
            budget / MIB
        )),
    }
    Ok(p.finish())
}

/// Applies the plan to the file's text, and checks that the edited text reads
/// back as exactly the planned config.
pub fn apply(loaded: &LoadedConfig, plan: &Plan) -> Result<String, String> {
    let mut text = loaded.text.clone();
    for change in &plan.changes {
        text = yaml_edit::set(&text, &change.key, &change.value)
            .map_err(|e| format!("cannot change `{}` in place: {e}", change.key))?;
    }
    let input = crate::input::Input {
        name: loaded.name.clone(),
        text: text.clone(),
    };
    match Config::load(&input) {
        Ok(edited) if edited.config == plan.config => Ok(text),
        Ok(_) => Err(
            "the edited file does not read back as the planned config; nothing was changed".into(),
        ),
        Err(e) => Err(format!(
            "the edited file does not parse ({e:#}); nothing was changed"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Input;
    use crate::report::{Gpu, Memory};
    use crate::rules::Severity;

    fn t4() -> Gpu {
        let mut g = Gpu::new(0);
        g.memory = Some(Memory {
            total_mib: 15360,
            used_mib: 0,
            free_mib: 15360,
        });
        g
    }

    fn load(text: &str) -> LoadedConfig {
        Config::load(&Input {
            name: "c.yaml".into(),
            text: text.into(),
        })
        .unwrap()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn target(gpu: &Gpu) -> Target<'_> {
        Target {
            gpu: Some(gpu),
            known_no_gpu: false,
            host_ram_mib: Some(64 * 1024),
            margin: 0.10,
            env: &no_env,
        }
    }

    fn keys(plan: &Plan) -> Vec<&str> {
        plan.changes.iter().map(|c| c.key.as_str()).collect()
    }

    #[test]
    fn follows_the_seeds_decision_tree() {
        let gpu = t4();
        let text = "# A\ngradient_checkpointing: true\ntorch_compile: true\ntorch_compile_mode: reduce-overhead  # fast\nbatch_size: 512\nimage_size: 256\n";
        let loaded = load(text);
        let plan = plan_fix(&loaded, &target(&gpu));
        assert_eq!(
            keys(&plan),
            [
                "torch_compile_mode",
                "torch_compile",
                "memory_optimized",
                "batch_size"
            ]
        );
        let fixed = apply(&loaded, &plan).unwrap();
        assert!(
            fixed.starts_with("# A\n") && fixed.contains("torch_compile_mode: default  # fast\n"),
            "{fixed}"
        );
        let again = load(&fixed);
        let left: Vec<_> = rules::check(&again, &target(&gpu))
            .findings
            .into_iter()
            .filter(|f| f.severity == Severity::Error)
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn stops_as_soon_as_memory_fits() {
        let gpu = t4();
        let plan = plan_fix(&load("gradient_checkpointing: true\ntorch_compile: true\ntorch_compile_mode: max-autotune\n"), &target(&gpu));
        assert_eq!(
            keys(&plan),
            ["torch_compile_mode"],
            "only the hazard; memory already fits"
        );
    }

    #[test]
    fn says_what_it_cannot_fix() {
        let mut tiny = t4();
        tiny.memory = Some(Memory {
            total_mib: 600,
            used_mib: 0,
            free_mib: 600,
        });
        let plan = plan_fix(&load("image_size: 512\n"), &target(&tiny));
        assert!(
            plan.unfixable
                .iter()
                .any(|u| u.contains("even batch_size 1")),
            "{:?}",
            plan.unfixable
        );
        let shell_env =
            |n: &str| (n == "PYTORCH_ALLOC_CONF").then(|| "max_split_size_mb:64".to_string());
        let gpu = t4();
        let t = Target {
            env: &shell_env,
            ..target(&gpu)
        };
        let plan = plan_fix(&load("epochs: 50\n"), &t);
        assert!(
            plan.unfixable[0].contains("from your shell"),
            "{:?}",
            plan.unfixable
        );
    }

    #[test]
    fn fit_computes_the_batch_for_the_target() {
        let gpu = t4();
        let loaded = load("image_size: 256\nbatch_size: 4\n");
        let plan = plan_fit(&loaded, &target(&gpu)).unwrap();
        assert_eq!(keys(&plan), ["batch_size"]);
        let b = plan.config.batch_size;
        let budget = budget_bytes(&plan.config, &target(&gpu)).unwrap();
        let at = |b: u32| {
            estimate::estimate(&Config {
                batch_size: b,
                ..plan.config.clone()
            })
            .peak_bytes
        };
        assert!(at(b) <= budget && at(b + 1) > budget);
        let none = Target {
            gpu: None,
            ..target(&gpu)
        };
        assert!(plan_fit(&loaded, &none).is_err());
    }
}
