//! cfgcheck over any config, trainguard's or one it did not define
//! (`diagnose::any_config`): one result per file, and `--fix` / `--fit`,
//! the edited config on stdout and each change on stderr.

use anyhow::Context;
use common::config::Config;
use common::exit::{self, Failure};
use common::input::Input;
use common::wire::cfgcheck::{verdict, ConfigResult, EstimateOut, TargetInfo};
use common::wire::memdiag::{Gpu, Source};
use diagnose::any_config::{self, Format};
use diagnose::fix;
use diagnose::rules::{self, Finding, Severity, Target};
use std::io::Write;
use std::path::Path;

/// `--as`'s value parser: a clear message and exit 2 on anything else.
pub fn parse_as(s: &str) -> Result<Format, String> {
    any_config::parse_as(s)
}

/// One config checked, as cfgcheck/v2's result.
pub fn result(
    path: &Path,
    named: Option<Format>,
    target: &Target,
    gpu: Option<(&Gpu, Source)>,
) -> anyhow::Result<ConfigResult> {
    let input = common::input::read(path)?;
    let checked = any_config::check(&input, named, target)?;
    let (estimate, resolved) = match checked.trainguard {
        Some((loaded, est)) => (Some(EstimateOut::from(&est)), Some(loaded.config)),
        None => (None, None),
    };
    Ok(ConfigResult {
        config: input.name,
        format: checked.format,
        target: gpu.map(|(g, source)| TargetInfo::of(g, source)),
        verdict: verdict(&checked.findings).into(),
        findings: checked.findings,
        skipped: checked.skipped,
        read_keys: checked.read_keys,
        estimate,
        resolved,
    })
}

fn fails(findings: &[Finding], strict: bool) -> bool {
    findings
        .iter()
        .any(|f| f.severity == Severity::Error || (strict && f.severity == Severity::Warning))
}

/// --fix (any format) or --fit (trainguard's): the edited config on stdout,
/// each change on stderr; exit 1 when something is left or cannot be fixed.
pub fn edit(
    path: &Path,
    named: Option<Format>,
    fit: bool,
    strict: bool,
    target: &Target,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let input = common::input::read(path)?;
    let name = input.name.clone();
    let fixed = if fit {
        fit_trainguard(&input, named, target)?
    } else {
        any_config::fix(&input, named, target)?
    }
    .map_err(|e| anyhow::Error::new(Failure::found(format!("{name}: {e}"))))?;
    for c in &fixed.changes {
        common::say!("cfgcheck: {name}: {}: {}", c.key, c.why);
        common::say!("          set {}: {}", c.key, c.value);
    }
    for u in &fixed.unfixable {
        common::say!("cfgcheck: {name}: cannot fix: {u}");
    }
    if fixed.changes.is_empty() && fixed.unfixable.is_empty() {
        common::say!("cfgcheck: {name}: nothing to change");
    }
    out.write_all(fixed.text.as_bytes())
        .context("writing the config")?;
    out.flush()?;
    // The edited config must itself pass: say so through the exit code.
    Ok(
        if fails(&fixed.left, strict) || !fixed.unfixable.is_empty() {
            exit::FOUND
        } else {
            exit::OK
        },
    )
}

/// --fit: the batch (and model) for the target, trainguard's schema only
/// (the estimate is of its model).
fn fit_trainguard(
    input: &Input,
    named: Option<Format>,
    target: &Target,
) -> anyhow::Result<Result<any_config::Fixed, String>> {
    let checked = any_config::check(input, named, target)?;
    let Some((loaded, _)) = checked.trainguard else {
        return Err(common::bad_input!(
            "{}: --fit sizes trainguard's own model, and this file is not a trainguard config (read as {}: {}); cfgcheck does not know its model",
            input.name,
            checked.format.as_str(),
            checked.format.title()
        ));
    };
    let plan =
        fix::plan_fit(&loaded, target).map_err(|e| anyhow::Error::new(Failure::bad_input(e)))?;
    let text = match fix::apply(&loaded, &plan) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    let edited = common::config::LoadedConfig {
        config: plan.config.clone(),
        ..Config::load(&Input {
            name: loaded.name.clone(),
            text: text.clone(),
        })?
    };
    Ok(Ok(any_config::Fixed {
        format: Format::Trainguard,
        text,
        changes: plan.changes,
        unfixable: plan.unfixable,
        left: rules::check(&edited, target).findings,
    }))
}
