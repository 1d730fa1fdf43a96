//! The hazards of the run's environment variables: the allocator setting
//! (fragmentation over long runs, a value PyTorch refuses) and
//! CUDA_LAUNCH_BLOCKING left on.

use super::{Cx, Edits, ExplainCx, Hazard, Target};
use crate::plan::Planner;
use crate::yaml_edit;
use common::wire::cfgcheck::Finding;
use common::wire::config::Config;
use common::wire::hazard::HazardId;

/// Epochs from which a single run counts as long for fragmentation.
pub const LONG_RUN_EPOCHS: u32 = 20;

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

/// A long run for fragmentation: many epochs, parallel trials, or a sweep.
pub fn long_run(c: &Config) -> bool {
    c.epochs >= LONG_RUN_EPOCHS || c.parallel_trials > 1 || c.trials > 1
}

const EXPANDABLE_WHY: &str = "expandable segments keep fragmentation from ending long runs";

pub struct AllocatorFragmentation;

impl Hazard for AllocatorFragmentation {
    fn id(&self) -> HazardId {
        HazardId::AllocatorFragmentation
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let c = cx.config();
        let on = alloc_conf(c, cx.target.env).is_some_and(|(_, v, _)| expandable_segments(&v));
        if !long_run(c) || on {
            return vec![];
        }
        let (why, key) = match (c.trials > 1, c.parallel_trials > 1) {
            (true, _) => (format!("a sweep of {} trials", c.trials), "trials"),
            (_, true) => (
                format!("{} parallel trials", c.parallel_trials),
                "parallel_trials",
            ),
            _ => (format!("{} epochs", c.epochs), "epochs"),
        };
        vec![cx.finding(
            self.id(),
            key,
            format!("{why} without expandable_segments:True: the caching allocator fragments (\"X GiB is reserved by PyTorch but unallocated\") until a small allocation fails, in a sweep often hundreds of trials in"),
            "set environment: {PYTORCH_ALLOC_CONF: \"expandable_segments:True\"} (PYTORCH_CUDA_ALLOC_CONF before PyTorch 2.9); trainguard's train sets it itself when neither is set".into(),
        )]
    }
    /// Also fixes [`AllocatorConfSyntax`]: the setting is rewritten with
    /// `expandable_segments:True`, the user's other options kept.
    fn fix(&self, p: &mut Planner, target: &Target) {
        let c = p.config.clone();
        match alloc_conf(&c, target.env) {
            Some((name, value, source)) if !expandable_segments(&value) => {
                let fixed = with_expandable(&value);
                let bad_syntax = value.contains("expandable_segments:");
                if !(long_run(&c) || bad_syntax) {
                    return;
                }
                if source == "config" {
                    let key = format!("environment.{name}");
                    p.change(
                        &key,
                        yaml_edit::scalar(&fixed),
                        EXPANDABLE_WHY.into(),
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
            None if long_run(&c) => {
                let value = with_expandable("");
                p.change(
                    "environment.PYTORCH_ALLOC_CONF",
                    yaml_edit::scalar(&value),
                    EXPANDABLE_WHY.into(),
                    |c| {
                        c.environment
                            .insert("PYTORCH_ALLOC_CONF".into(), value.clone());
                    },
                );
            }
            _ => {}
        }
    }
    fn edits(&self, cx: &ExplainCx) -> Edits {
        let (name, value) = match alloc_conf(cx.config, cx.env) {
            Some((n, v, _)) => (n, v),
            None => ("PYTORCH_ALLOC_CONF".to_string(), String::new()),
        };
        Ok(vec![(
            format!("environment.{name}"),
            yaml_edit::scalar(&with_expandable(&value)),
        )])
    }
}

/// Fixed by [`AllocatorFragmentation`]'s fix.
pub struct AllocatorConfSyntax;

impl Hazard for AllocatorConfSyntax {
    fn id(&self) -> HazardId {
        HazardId::AllocatorConfSyntax
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let Some((name, value, source)) = alloc_conf(cx.config(), cx.target.env) else {
            return vec![];
        };
        value
            .split(',')
            .filter_map(|opt| opt.trim().strip_prefix("expandable_segments:"))
            .filter(|v| *v != "True" && *v != "False")
            .map(|v| {
                cx.finding(
                    self.id(),
                    "environment",
                    format!("{name}={value} (from the {source}): PyTorch accepts only True or False for expandable_segments and stops at start-up on \"{v}\""),
                    "write expandable_segments:True".into(),
                )
            })
            .collect()
    }
}

pub struct LaunchBlocking;

/// What CUDA_LAUNCH_BLOCKING=1 costs, set in `source` (the config, the
/// environment, a script: `scan`).
pub fn launch_blocking_message(source: &str) -> String {
    format!("CUDA_LAUNCH_BLOCKING=1 (from the {source}) makes every kernel launch synchronous: errors point at the right line, but the run is 10-20% slower")
}

/// The fix, `unset` saying how to take it away where it is set.
pub fn launch_blocking_fix(unset: &str) -> String {
    format!("keep it for debugging a device-side assert; {unset} for long runs")
}

impl Hazard for LaunchBlocking {
    fn id(&self) -> HazardId {
        HazardId::LaunchBlocking
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        match cx.config().env_var("CUDA_LAUNCH_BLOCKING", cx.target.env) {
            Some((v, source)) if v.trim() == "1" => vec![cx.finding(
                self.id(),
                "environment",
                launch_blocking_message(source),
                launch_blocking_fix("unset it"),
            )],
            _ => vec![],
        }
    }
}
