//! `cfgcheck --fix` and `--fit`: the changes that make a config run, planned on
//! the schema and applied to the user's file as targeted edits (yaml_edit), so
//! comments and key order survive. `--fix` follows the seeds' decision tree:
//! compile mode default; if memory still does not fit, compile off; then the
//! 32/64/128 model; then the largest batch that fits.

use crate::hazards::{self, Target, FIX_ORDER};
use crate::plan::{Plan, Planner};
use crate::yaml_edit;
use common::config::{Config, LoadedConfig};

/// The memory one trial may use on the target, in bytes: the budget's
/// per-trial share. None without a GPU.
pub fn budget_bytes(c: &Config, target: &Target) -> Option<u64> {
    Some(target.budget(c.parallel_trials)?.per_trial_bytes())
}

/// `--fix`: each hazard's fix, in the seeds' order.
pub fn plan_fix(loaded: &LoadedConfig, target: &Target) -> Plan {
    let mut p = Planner::new(&loaded.config);
    for id in FIX_ORDER {
        hazards::of(id).fix(&mut p, target);
    }
    p.finish()
}

/// `--fit`: the batch size (and, if needed, the smaller model) computed for
/// the target instead of seed 002's fixed tiers.
pub fn plan_fit(loaded: &LoadedConfig, target: &Target) -> Result<Plan, String> {
    let Some(budget) = target.budget(loaded.config.parallel_trials) else {
        return Err(format!(
            "--fit needs a target GPU with known memory: pipe memdiag's report in, or {}",
            common::gpus::how_to_name()
        ));
    };
    let mib = budget.per_trial_mib();
    let mut p = Planner::new(&loaded.config);
    if budget.largest_batch_per_trial(&p.config).is_none()
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
    match budget.largest_batch_per_trial(&p.config) {
        Some(b) if b != p.config.batch_size => {
            let old = p.config.batch_size;
            p.change(
                "batch_size",
                b.to_string(),
                format!("largest batch whose estimated peak fits {mib} MiB (was {old})"),
                |c| c.batch_size = b,
            );
        }
        Some(_) => {}
        None => p.plan.unfixable.push(format!(
            "nothing fits in {mib} MiB, even batch 1 of the smallest model"
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
    let input = common::input::Input {
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
    use crate::rules;
    use common::estimate;
    use common::input::Input;
    use common::wire::hazard::Severity;
    use common::wire::memdiag::{Gpu, Memory};

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
