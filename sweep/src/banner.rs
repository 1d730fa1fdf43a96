//! The block a sweep prints before each trial: its number, its values,
//! its command or model, where it runs.

use crate::trial::ParamValue;
use common::config::Config;
use std::collections::BTreeMap;

/// Seed 004's block before each trial.
pub fn print_block(
    number: u64,
    c: &Config,
    values: &BTreeMap<String, ParamValue>,
    retried_from: Option<u64>,
    runs_on: &str,
) {
    let rule = "=".repeat(80);
    let channels: Vec<String> = c.channels().iter().map(u32::to_string).collect();
    let mut lines = vec![
        rule.clone(),
        format!(
            "TRIAL {number} - Configuration:{}",
            retried_from.map_or(String::new(), |f| format!(
                " (again, for interrupted trial {f})"
            ))
        ),
        format!(
            "  Model: {} channels, {:?} head",
            channels.join("/"),
            c.architecture.name
        ),
        format!("  Batch size: {}", c.batch_size),
        format!("  Learning rate: {}", c.learning_rate),
        format!("  Dropout: {}", c.dropout),
    ];
    for (k, v) in values {
        if !["batch_size", "learning_rate", "dropout"].contains(&k.as_str()) {
            let text = serde_yaml::to_string(&v.to_yaml()).unwrap_or_default();
            lines.push(format!("  {k}: {}", text.trim()));
        }
    }
    lines.push(format!("  Runs on: {runs_on}"));
    lines.push(rule);
    common::say!("{}", lines.join("\n"));
}

/// Seed 004's block before a program trial: its parameters and command.
pub fn print_program_block(
    number: u64,
    values: &BTreeMap<String, ParamValue>,
    retried_from: Option<u64>,
    argv: &[String],
    runs_on: &str,
    launch_blocking: bool,
    predicted: Option<String>,
) {
    let rule = "=".repeat(80);
    let again = match (retried_from, launch_blocking) {
        (Some(f), true) => format!(" (again, for trial {f}, with CUDA_LAUNCH_BLOCKING=1)"),
        (Some(f), false) => format!(" (again, for trial {f})"),
        (None, _) => String::new(),
    };
    let mut lines = vec![
        rule.clone(),
        format!("TRIAL {number} - Configuration:{again}"),
    ];
    for (k, v) in values {
        let text = serde_yaml::to_string(&v.to_yaml()).unwrap_or_default();
        lines.push(format!("  {k}: {}", text.trim()));
    }
    lines.push(format!("  Command: {}", argv.join(" ")));
    lines.push(format!("  Runs on: {runs_on}"));
    if let Some(p) = predicted {
        lines.push(format!("  Predicted peak: {p}"));
    }
    lines.push(rule);
    common::say!("{}", lines.join("\n"));
}
