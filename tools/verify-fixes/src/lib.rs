//! verify-fixes: the gate before a long run (seed 004's script that had to
//! pass 5/5 before 5000 trials). Every check prints a mark, its name, what it
//! saw, and the fix when it fails; exit 0 only when no check failed.

mod checks;

use checks::{Check, Context, Status, DEBUG_VARS, IDS};
use clap::Parser;
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use common::config::Config;
use common::exit;
use common::format::Format;
use common::wire::space::Space;
use common::wire::verify::Output;
use common::wire::{self, Versioned};
use common::{bad_input, input};
use diagnose::rules::{self, Target};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "verify-fixes",
    version,
    about = "The gate before a long run: allocator, config, memory, runtime, GPU state, smoke run, data, disk",
    after_help = "The target GPU: memdiag's report piped on stdin, or --gpu FILE. \
                  Exit codes: 0 no check failed, 1 a check failed, 2 bad input or usage, \
                  4 verify-fixes broke (an I/O failure or a bug), 5 the train it found was built \
                  without libtorch (the pip wheel's; --skip runtime --skip smoke --skip data runs the rest)."
)]
struct Cli {
    /// The config of the run to gate.
    #[arg(long, value_name = "CFG", required_unless_present = "print_env")]
    config: Option<PathBuf>,
    /// The target GPU's report or profile, instead of stdin.
    #[arg(long, value_name = "FILE")]
    gpu: Option<PathBuf>,
    /// Which GPU of the report [default: the one with most free memory].
    #[arg(long, value_name = "N")]
    device: Option<u32>,
    /// A search space (space/v1): memory is checked for its worst case.
    #[arg(long, value_name = "SPACE")]
    space: Option<PathBuf>,
    /// Trials that will share the GPU (overrides the config's parallel_trials).
    #[arg(long, value_name = "K")]
    parallel: Option<u32>,
    /// Output format [default: table on a terminal, yaml otherwise]
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Checks that cannot run without a GPU fail instead of being skipped.
    #[arg(long)]
    require_gpu: bool,
    /// Skip a check on purpose (repeatable): allocator, config, memory,
    /// runtime, gpu-state, smoke, data, disk.
    #[arg(long, value_name = "ID", value_parser = IDS)]
    skip: Vec<String>,
    /// Headroom to keep free on the GPU, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    margin: f64,
    /// Largest share of the GPU's memory other processes may hold, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    max_other_share: f64,
    /// The run's output directory (checked for writing and room).
    #[arg(long, value_name = "DIR", default_value = "runs")]
    out: PathBuf,
    /// The train binary [default: next to verify-fixes, else on PATH].
    #[arg(long, value_name = "PATH")]
    train: Option<PathBuf>,
    /// Print `export`/`unset` lines for the fixes that are environment
    /// variables, for `eval "$(verify-fixes --print-env)"`.
    #[arg(long)]
    print_env: bool,
}

/// The whole of `verify-fixes`'s binary (src/bin/, and the wheel's; uutils' shape).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    common::cli::run("verify-fixes", || run(&cli))
}

fn run(cli: &Cli) -> anyhow::Result<u8> {
    for (name, v) in [
        ("--margin", cli.margin),
        ("--max-other-share", cli.max_other_share),
    ] {
        if !(0.0..100.0).contains(&v) {
            return Err(bad_input!(
                "{name}: expected a percentage in [0, 100), found {v}"
            ));
        }
    }
    let env = |name: &str| std::env::var(name).ok();
    let loaded = match &cli.config {
        Some(p) => Some(Config::load(&input::read(p)?)?),
        None => None,
    };
    if cli.print_env {
        return print_env(loaded.as_ref().map(|l| &l.config), &env);
    }
    let mut loaded = loaded.expect("clap requires --config without --print-env");
    if let Some(k) = cli.parallel {
        if k == 0 {
            return Err(bad_input!(
                "--parallel: expected a positive number of trials"
            ));
        }
        loaded.config.parallel_trials = k;
    }
    let config_path = cli.config.as_deref().expect("required");
    let report = common::host::target_report(cli.gpu.as_deref())?;
    let variants = match &cli.space {
        Some(p) => space_variants(&loaded.config, p)?,
        None => vec![("the config".to_string(), loaded.config.clone())],
    };
    let train = cli.train.clone().unwrap_or_else(default_train);
    // The runtime, smoke and data checks run train's own trainer: a train
    // without libtorch (the pip wheel's) cannot, and says so once here.
    let needs_trainer = ["runtime", "smoke", "data"]
        .iter()
        .any(|id| !cli.skip.iter().any(|s| s == id));
    if needs_trainer && checks::lacks_libtorch(&train) {
        return Err(exit::no_libtorch(
            "verify-fixes --config (its runtime, smoke and data checks run train's trainer on the \
             config; --skip runtime --skip smoke --skip data runs the others)",
            &train,
        ));
    }
    let ctx = Context {
        loaded: &loaded,
        config_path,
        report: report.as_ref(),
        device: cli.device,
        require_gpu: cli.require_gpu,
        margin: cli.margin / 100.0,
        other_share: cli.max_other_share / 100.0,
        train,
        out: cli.out.clone(),
        env: &env,
        host_ram_mib: common::host::ram_mib(),
        variants,
    };
    let target = Target {
        gpu: ctx.report.and_then(|r| r.pick_gpu(cli.device)),
        known_no_gpu: ctx.report.is_some_and(|r| r.gpus.is_empty()),
        host_ram_mib: ctx.host_ram_mib,
        margin: ctx.margin,
        env: &env,
    };
    let mut results = Vec::new();
    for id in IDS {
        if cli.skip.iter().any(|s| s == id) {
            results.push(Check {
                id: id.into(),
                name: checks::name_of(id).into(),
                status: Status::Skip,
                saw: "skipped on purpose (--skip)".into(),
                fix: None,
            });
            continue;
        }
        results.push(match id {
            "allocator" => ctx.allocator(),
            "config" => ctx.config(&target),
            "memory" => ctx.memory(),
            "runtime" => ctx.runtime(),
            "gpu-state" => ctx.gpu_state(),
            "smoke" => ctx.smoke(),
            "data" => ctx.data(),
            _ => ctx.disk(),
        });
    }
    let count = |s: &[Status]| results.iter().filter(|c| s.contains(&c.status)).count();
    let output = Output {
        schema: Output::SCHEMA.into(),
        config: loaded.name.clone(),
        passed: count(&[Status::Pass, Status::Warn]),
        failed: count(&[Status::Fail]),
        skipped: count(&[Status::Skip]),
        checks: results,
    };
    let mut out = std::io::stdout().lock();
    Format::resolve(cli.format).write(&output, &mut out, write_table, write_csv)?;
    out.flush()?;
    Ok(if output.failed > 0 {
        exit::FOUND
    } else {
        exit::OK
    })
}

fn write_csv(o: &Output, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(["id", "name", "status", "saw", "fix"])?;
    for c in &o.checks {
        w.write_record([
            c.id.as_str(),
            &c.name,
            c.status.as_str(),
            &c.saw,
            c.fix.as_deref().unwrap_or(""),
        ])?;
    }
    w.flush()?;
    Ok(())
}

fn write_table(o: &Output, w: &mut dyn Write) -> anyhow::Result<()> {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(120)
        .set_header(["", "Check", "What it saw", "Fix"]);
    for c in &o.checks {
        let mark = match c.status {
            Status::Pass => "✓",
            Status::Warn => "!",
            Status::Fail => "✗",
            Status::Skip => "-",
        };
        t.add_row([mark, &c.name, &c.saw, c.fix.as_deref().unwrap_or("")]);
    }
    writeln!(w, "verify-fixes: {}", o.config)?;
    writeln!(w, "{t}")?;
    let run = o.passed + o.failed;
    writeln!(
        w,
        "{}/{run} checks passed{}",
        o.passed,
        if o.skipped > 0 {
            format!(" ({} skipped)", o.skipped)
        } else {
            String::new()
        }
    )?;
    Ok(())
}

/// `export`/`unset` lines: expandable segments, the config's environment,
/// and the debugging variables a long run should not carry.
fn print_env(config: Option<&Config>, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    let quote = |v: &str| format!("'{}'", v.replace('\'', "'\\''"));
    if let Some(c) = config {
        for (k, v) in &c.environment {
            if !DEBUG_VARS.contains(&k.as_str()) {
                writeln!(out, "export {k}={}", quote(v))?;
            }
        }
    }
    let default = Config::default();
    let c = config.unwrap_or(&default);
    match rules::alloc_conf(c, env) {
        Some((_, v, _)) if rules::expandable_segments(&v) => {}
        Some((name, v, _)) => {
            writeln!(out, "export {name}={}", quote(&rules::with_expandable(&v)))?
        }
        None => writeln!(out, "export PYTORCH_ALLOC_CONF=expandable_segments:True")?,
    }
    for v in DEBUG_VARS {
        if env(v).is_some() {
            writeln!(out, "unset {v}")?;
        }
    }
    out.flush()?;
    Ok(exit::OK)
}

fn default_train() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("train")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("train"))
}

const MAX_VARIANTS: usize = 10_000;

/// The configs to size memory for: a sweep space (W&B sweep YAML, the one
/// space format of the toolkit: train sweep's) at its corners, or the older
/// space/v1 (`parameters: {key: [values...]}`), read as a deprecated alias
/// with every combination.
fn space_variants(base: &Config, path: &Path) -> anyhow::Result<Vec<(String, Config)>> {
    let input = input::read(path)?;
    if wire::check_schema(&input.name, &input.text, Space::SCHEMA).is_err() {
        let parsed = sweep::space::Space::parse(&input, base)?;
        for w in &parsed.warnings {
            common::say!("verify-fixes: {}: {w}", input.name);
        }
        let corners = parsed.space.corners(base);
        if corners.is_empty() {
            return Err(bad_input!(
                "{}: no combination of the space's ends is a valid config",
                input.name
            ));
        }
        return Ok(corners);
    }
    common::say!(
        "verify-fixes: {}: space/v1 is deprecated: write the space as a sweep space (see docs/GUIDE.md, \"The search space: W&B's sweep YAML\"), which train sweep reads too",
        input.name
    );
    let name = &input.name;
    let space = wire::parse::<Space>(name, &input.text)?;
    let params = &space.parameters;
    let mut variants: Vec<(Vec<String>, serde_yaml::Value)> =
        vec![(Vec::new(), serde_yaml::to_value(base)?)];
    for (k, values) in params {
        let key = k
            .as_str()
            .ok_or_else(|| bad_input!("{name}: `parameters`: keys must be strings"))?;
        let list = values
            .as_sequence()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| {
                bad_input!("{name}: `parameters.{key}`: expected a non-empty list of values")
            })?;
        if variants.len() * list.len() > MAX_VARIANTS {
            return Err(bad_input!("{name}: more than {MAX_VARIANTS} combinations"));
        }
        let mut next = Vec::new();
        for (label, cfg) in &variants {
            for value in list {
                let mut cfg = cfg.clone();
                let mut slot = &mut cfg;
                for part in key.split('.') {
                    slot = slot
                        .as_mapping_mut()
                        .and_then(|m| m.get_mut(part))
                        .ok_or_else(|| {
                            bad_input!("{name}: `parameters.{key}`: not a config key")
                        })?;
                }
                *slot = value.clone();
                let mut label = label.clone();
                label.push(format!(
                    "{key}={}",
                    serde_yaml::to_string(value).unwrap_or_default().trim()
                ));
                next.push((label, cfg));
            }
        }
        variants = next;
    }
    variants
        .into_iter()
        .map(|(label, v)| {
            let c: Config = serde_yaml::from_value(v)
                .map_err(|e| bad_input!("{name}: {}: {e}", label.join(", ")))?;
            if let Some((key, msg)) = c.validate().into_iter().next() {
                return Err(bad_input!("{name}: {}: `{key}`: {msg}", label.join(", ")));
            }
            Ok((label.join(", "), c))
        })
        .collect()
}
