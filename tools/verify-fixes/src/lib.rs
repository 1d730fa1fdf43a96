//! verify-fixes: the gate before a long run (seed 004's script that had to
//! pass 5/5 before 5000 trials). Every check prints a mark, its name, what it
//! saw, and the fix when it fails; exit 0 only when no check failed. Two
//! forms: `--config CFG` gates train's own run (`config_form`); `-- CMD`
//! gates any command by a short smoke run of it (`command`, `smoke`). Each
//! form's checks, their ids and names: `rows`.

mod command;
mod config_form;
mod configs;
mod machine;
mod metric_check;
mod rows;
mod smoke;
mod space;

use clap::Parser;
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use common::bad_input;
use common::config::{Config, LoadedConfig};
use common::exit;
use common::format::Format;
use common::input;
use common::report::Report;
use common::wire::verify::{Output, Smoke};
use common::wire::Versioned;
use config_form::Context;
use diagnose::rules::{self, Target};
use machine::{Machine, DEBUG_VARS};
use rows::{Check, Form, Status};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use supervise::command::shell_words;

#[derive(Parser)]
#[command(
    name = "verify-fixes",
    version,
    about = "The gate before a long run: allocator, config, memory, runtime, GPU state, smoke run, data, disk",
    after_help = "The target GPU: memdiag's report piped on stdin, --gpu NAME (a GPU profile built in, such as t4) \
                  or --gpu FILE (a saved report). \
                  `verify-fixes [OPTIONS] -- CMD...` gates your own command instead of train's \
                  config: it runs it for a short while (docs/guide/own-script.md, \"verify-fixes -- CMD\"). \
                  Exit codes: 0 no check failed, 1 a check failed, 2 bad input or usage, \
                  4 verify-fixes broke (an I/O failure or a bug), 5 the train it found was built \
                  without libtorch (the pip wheel's; --skip runtime --skip smoke --skip data runs the rest)."
)]
struct Cli {
    /// The config of the run to gate.
    #[arg(long, value_name = "CFG", required_unless_present_any = ["print_env", "command"])]
    config: Option<PathBuf>,
    #[arg(long, value_name = "NAME|FILE", help = common::gpus::help())]
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
    /// runtime, gpu-state, smoke, data, disk; with -- CMD: config,
    /// allocator, gpu-state, started, metric, memory, disk.
    #[arg(long, value_name = "ID", value_parser = clap::builder::PossibleValuesParser::new(rows::all_ids()))]
    skip: Vec<String>,
    /// Headroom to keep free on the GPU, in percent (the config rules').
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    margin: f64,
    /// Largest share of the GPU's memory other processes may hold, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    max_other_share: f64,
    /// The run's output directory (checked for writing and room) [default:
    /// runs]; with -- CMD, where the smoke's output.log and memory.csv stay
    /// [default: a new temporary directory, kept only when a check fails].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The train binary [default: next to verify-fixes, else on PATH].
    #[arg(long, value_name = "PATH")]
    train: Option<PathBuf>,
    /// Print `export`/`unset` lines for the fixes that are environment
    /// variables, for `eval "$(verify-fixes --print-env)"`.
    #[arg(long)]
    print_env: bool,
    /// With -- CMD: stop the smoke after this many seconds.
    #[arg(long, value_name = "S", default_value_t = 300.0, requires = "command")]
    smoke_seconds: f64,
    /// With -- CMD: stop the smoke after this many evaluations (reports of
    /// the metric a sweep ranks by, not of the training loss); some
    /// crashes, such as CUDA graphs with gradient checkpointing, come only
    /// after the first.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "command")]
    smoke_epochs: u64,
    /// With -- CMD: the metric a sweep will rank by, which must be read
    /// [default: the first reported of eval_loss, val_loss, valid_loss,
    /// validation_loss, eval/loss, val/loss, as train run finds it].
    #[arg(long, value_name = "NAME", requires = "command")]
    expect_metric: Option<String>,
    /// With -- CMD: a regular expression with one capture group that reads
    /// the metric from a line (e.g. 'valid loss\s+([0-9.]+)').
    #[arg(long, value_name = "RE", requires = "expect_metric")]
    metric_regex: Option<String>,
    /// The command to gate, after `--` (its stdin is /dev/null).
    #[arg(last = true, value_name = "CMD", conflicts_with_all = ["config", "space", "parallel", "train", "print_env"])]
    command: Vec<String>,
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
    if !cli.command.is_empty() {
        return gate_command(cli, &env);
    }
    let loaded = match &cli.config {
        Some(p) => Some(Config::load(&input::read(p)?)?),
        None => None,
    };
    if cli.print_env {
        return print_env(loaded.as_ref().map(|l| &l.config), &env);
    }
    let loaded = loaded.expect("clap requires --config without --print-env or a command");
    gate_config(cli, loaded, &env)
}

/// `verify-fixes --config CFG`.
fn gate_config(
    cli: &Cli,
    mut loaded: LoadedConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<u8> {
    if let Some(k) = cli.parallel {
        if k == 0 {
            return Err(bad_input!(
                "--parallel: expected a positive number of trials"
            ));
        }
        loaded.config.parallel_trials = k;
    }
    unknown_skip(cli, Form::Config, "the --config form")?;
    let config_path = cli.config.as_deref().expect("required");
    let report = common::host::target_report(cli.gpu.as_deref())?;
    let variants = match &cli.space {
        Some(p) => space::space_variants(&loaded.config, p)?,
        None => vec![("the config".to_string(), loaded.config.clone())],
    };
    let train = cli.train.clone().unwrap_or_else(default_train);
    // The runtime, smoke and data checks run train's own trainer: a train
    // without libtorch (the pip wheel's) cannot, and says so once here.
    let needs_trainer = ["runtime", "smoke", "data"]
        .iter()
        .any(|id| !cli.skip.iter().any(|s| s == id));
    if needs_trainer && config_form::lacks_libtorch(&train) {
        return Err(exit::no_libtorch(
            "verify-fixes --config (its runtime, smoke and data checks run train's trainer on the \
             config; --skip runtime --skip smoke --skip data runs the others)",
            &train,
        ));
    }
    let host_ram_mib = common::host::ram_mib();
    let ctx = Context {
        loaded: &loaded,
        config_path,
        machine: machine(cli, report.as_ref(), env),
        margin: cli.margin / 100.0,
        train,
        out: cli.out.clone().unwrap_or_else(|| PathBuf::from("runs")),
        variants,
    };
    let target = target(cli, report.as_ref(), host_ram_mib, env);
    let results = Form::Config
        .ids()
        .into_iter()
        .map(|id| {
            if cli.skip.iter().any(|s| s == id) {
                Form::Config.skipped_on_purpose(id)
            } else {
                ctx.run(id, &target)
            }
        })
        .collect();
    emit(cli, loaded.name.clone(), results, None)
}

/// Bad usage when a `--skip` id is not a check of `form`.
fn unknown_skip(cli: &Cli, form: Form, words: &str) -> anyhow::Result<()> {
    match cli.skip.iter().find(|s| !form.has(s)) {
        Some(id) => Err(bad_input!(
            "--skip {id}: not a check of {words} (its checks: {})",
            form.ids().join(", ")
        )),
        None => Ok(()),
    }
}

/// The machine as the options give it.
fn machine<'a>(
    cli: &Cli,
    report: Option<&'a Report>,
    env: &'a dyn Fn(&str) -> Option<String>,
) -> Machine<'a> {
    Machine {
        report,
        device: cli.device,
        require_gpu: cli.require_gpu,
        other_share: cli.max_other_share / 100.0,
        env,
    }
}

/// The target the config rules judge against.
fn target<'a>(
    cli: &Cli,
    report: Option<&'a Report>,
    host_ram_mib: Option<u64>,
    env: &'a dyn Fn(&str) -> Option<String>,
) -> Target<'a> {
    Target {
        gpu: report.and_then(|r| r.pick_gpu(cli.device)),
        known_no_gpu: report.is_some_and(|r| r.gpus.is_empty()),
        host_ram_mib,
        margin: cli.margin / 100.0,
        env,
    }
}

/// `verify-fixes -- CMD`.
fn gate_command(cli: &Cli, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<u8> {
    unknown_skip(cli, Form::Command, "the command form")?;
    if !(cli.smoke_seconds > 0.0 && cli.smoke_seconds.is_finite()) {
        return Err(bad_input!(
            "--smoke-seconds: expected a positive number of seconds, found {}",
            cli.smoke_seconds
        ));
    }
    if cli.smoke_epochs == 0 {
        return Err(bad_input!("--smoke-epochs: expected at least 1 evaluation"));
    }
    // A bad regex is bad usage, said before anything runs.
    supervise::readers::Reader::new(
        cli.expect_metric.as_deref().unwrap_or("val_loss"),
        cli.metric_regex.as_deref(),
    )?;
    let report = common::host::target_report(cli.gpu.as_deref())?;
    let dir = match &cli.out {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| bad_input!("--out {}: cannot create: {e}", d.display()))?;
            common::say!(
                "verify-fixes: the smoke's output.log and memory.csv stay in {}",
                d.display()
            );
            d.clone()
        }
        None => tempfile::Builder::new()
            .prefix("verify-fixes-")
            .tempdir()
            .map_err(|e| anyhow::anyhow!("a temporary directory for the smoke: {e}"))?
            .keep(),
    };
    let gate = command::Gate {
        argv: &cli.command,
        machine: machine(cli, report.as_ref(), env),
        target: target(cli, report.as_ref(), common::host::ram_mib(), env),
        skip: &cli.skip,
        dir: &dir,
        seconds: cli.smoke_seconds,
        evaluations: cli.smoke_epochs,
        expect: cli.expect_metric.as_deref(),
        regex: cli.metric_regex.as_deref(),
    };
    let (results, mut smoke) = gate.run();
    if cli.out.is_none() {
        // A temporary directory stays only when there is something in it
        // to read: a failed check.
        if results.iter().any(|c| c.status == Status::Fail) {
            common::say!(
                "verify-fixes: a check failed: the smoke's output.log and memory.csv stay in {}",
                dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&dir);
            if let Some(s) = smoke.as_mut() {
                s.dir = None;
            }
        }
    }
    emit(cli, shell_words(&cli.command), results, smoke)
}

/// Writes the output; the exit code: 1 when a check failed.
fn emit(cli: &Cli, config: String, checks: Vec<Check>, smoke: Option<Smoke>) -> anyhow::Result<u8> {
    let count = |s: &[Status]| checks.iter().filter(|c| s.contains(&c.status)).count();
    let output = Output {
        schema: Output::SCHEMA.into(),
        config,
        passed: count(&[Status::Pass, Status::Warn]),
        failed: count(&[Status::Fail]),
        skipped: count(&[Status::Skip]),
        checks,
        smoke,
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
    if let Some(smoke) = &o.smoke {
        match &smoke.dir {
            Some(dir) => writeln!(
                w,
                "smoke: {}; its output.log, memory.csv, memory.png and metrics.csv are in {dir}",
                smoke.ended
            )?,
            None => writeln!(
                w,
                "smoke: {}; its files were removed (no check failed; --out DIR keeps them)",
                smoke.ended
            )?,
        }
    }
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
