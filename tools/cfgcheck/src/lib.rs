//! cfgcheck: will this config run on that GPU? Known-hazard rules and a memory
//! estimate (`diagnose` and `common`), before the run. The target GPU comes from a
//! memdiag report on stdin, `--gpu NAME|FILE`, or nothing.

mod concise;
mod configs;
mod explain;
mod formats;
mod output;
mod sarif;
mod scan;

use clap::Parser;
use common::bad_input;
use common::config::{Config, LoadedConfig};
use common::exit;
use common::report::Report;
use common::wire::cfgcheck::Output;
use common::wire::memdiag::{Gpu, Source};
use common::wire::Versioned;
use diagnose::any_config;
use diagnose::rules::{self, Severity, Target};
use formats::Chosen;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cfgcheck",
    version,
    about = "Will this config run on that GPU? Known-hazard rules and a memory estimate, before the run",
    after_help = "The target GPU: a memdiag report piped on stdin (memdiag | cfgcheck cfg.yaml), \
                  --gpu NAME (a GPU profile built in, such as t4), --gpu FILE (a saved report), or none (memory rules skipped).\n\
                  Exit codes: 0 no errors (warnings allowed unless --strict), 1 errors found, \
                  2 could not check (bad input or usage, such as --format sarif without --scan), 4 cfgcheck broke (an I/O failure or a bug). \
                  With --explain: 0 a known failure found, 1 nothing known found."
)]
struct Cli {
    /// Config files to check: trainguard's, or Hugging Face
    /// TrainingArguments (JSON or YAML), Axolotl's YAML, any nesting of
    /// their keys.
    #[arg(required_unless_present_any = ["list_rules", "explain", "scan"], value_name = "CONFIG")]
    configs: Vec<PathBuf>,
    /// Read the configs as this format instead of recognising it from their
    /// keys: hf, axolotl, trainguard, or any (every format's keys, at any
    /// depth).
    #[arg(long = "as", value_name = "FORMAT", value_parser = configs::parse_as)]
    as_format: Option<any_config::Format>,
    /// Read a log or traceback (`-`: stdin) and explain every known failure
    /// in it: cause, evidence lines, fix. Exit 0 when something known was
    /// found, 1 when nothing was.
    #[arg(long, value_name = "LOG", conflicts_with_all = ["configs", "fix", "fit", "list_rules"])]
    explain: Option<PathBuf>,
    /// With --explain: give the fix as a diff of this config.
    #[arg(long, value_name = "CFG", requires = "explain")]
    config: Option<PathBuf>,
    #[arg(long, value_name = "NAME|FILE", help = common::gpus::help())]
    gpu: Option<PathBuf>,
    /// Which GPU of the report [default: the one with most free memory].
    #[arg(long, value_name = "N")]
    device: Option<u32>,
    /// Output format [default: with --scan concise on a terminal, else table
    /// on a terminal; yaml otherwise]. concise: one line a finding,
    /// path:line:col: severity[rule-id] message. sarif: SARIF 2.1.0, --scan
    /// only.
    #[arg(long, value_enum)]
    format: Option<formats::Asked>,
    /// Headroom to keep free on the GPU, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 10.0, value_parser = parse_margin)]
    margin: f64,
    /// Host RAM in GiB for the data-loading rules [default: this machine's].
    #[arg(long, value_name = "GIB")]
    host_ram_gib: Option<f64>,
    /// Warnings fail too (exit 1).
    #[arg(long)]
    strict: bool,
    /// Print the corrected config on stdout (one CONFIG); each change is
    /// explained on stderr.
    #[arg(long, conflicts_with = "fit")]
    fix: bool,
    /// Print the config with the batch size (and model, if needed) computed
    /// for the target GPU (one CONFIG).
    #[arg(long)]
    fit: bool,
    /// List the rules and exit.
    #[arg(long)]
    list_rules: bool,
    /// Find the hazards in Python code instead: every *.py file under each
    /// PATH, with file:line:col for each half of the evidence (scan/v2). Exit
    /// 1 for an error finding, 2 for a PATH that does not exist.
    #[arg(long, value_name = "PATH", num_args = 1.., conflicts_with_all = ["configs", "explain", "fix", "fit", "list_rules", "gpu", "device"])]
    scan: Vec<PathBuf>,
}

fn parse_margin(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(format!("expected a percentage in [0, 100), found {s:?}")),
    }
}

/// The whole of `cfgcheck`'s binary (src/bin/, and the wheel's; uutils' shape).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    common::cli::run("cfgcheck", || run(&cli))
}

fn run(cli: &Cli) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    if cli.list_rules {
        return list_rules(&mut out);
    }
    if !cli.scan.is_empty() {
        let format = formats::for_scan(cli.format);
        let host_ram_mib = host_ram_mib(cli.host_ram_gib)?;
        return scan::run(&cli.scan, host_ram_mib, format, cli.strict, &mut out);
    }
    if let Some(log) = &cli.explain {
        return explain_log(cli, log, &mut out);
    }
    if (cli.fix || cli.fit) && cli.configs.len() != 1 {
        return Err(bad_input!("--fix and --fit take exactly one CONFIG"));
    }
    // Before the GPU is read: a format the configs do not take is bad usage.
    let format = formats::for_configs(cli.format)?;
    let report = common::host::target_report(cli.gpu.as_deref())?;
    let gpu = pick_gpu(report.as_ref(), cli.device)?;
    let env = |name: &str| std::env::var(name).ok();
    let target = Target {
        gpu,
        known_no_gpu: report.as_ref().is_some_and(|r| r.gpus.is_empty()),
        host_ram_mib: host_ram_mib(cli.host_ram_gib)?,
        margin: cli.margin,
        env: &env,
    };
    if cli.fix || cli.fit {
        return configs::edit(
            &cli.configs[0],
            cli.as_format,
            cli.fit,
            cli.strict,
            &target,
            &mut out,
        );
    }
    let on = gpu.zip(report.as_ref().map(|r| r.source));
    check_configs(cli, &target, on, format, &mut out)
}

fn list_rules(out: &mut dyn Write) -> anyhow::Result<u8> {
    for r in rules::RULES {
        writeln!(
            out,
            "{:28} {:8} {}",
            r.id.as_str(),
            r.severity.as_str(),
            r.summary
        )?;
    }
    Ok(exit::OK)
}

/// `--host-ram-gib` in MiB, else this machine's RAM.
fn host_ram_mib(gib: Option<f64>) -> anyhow::Result<Option<u64>> {
    match gib {
        Some(g) if g.is_finite() && g > 0.0 => Ok(Some((g * 1024.0) as u64)),
        Some(g) => Err(bad_input!(
            "--host-ram-gib: expected a positive number, found {g}"
        )),
        None => Ok(common::host::ram_mib()),
    }
}

/// The report's GPU `--device N`, else the one with most free memory.
fn pick_gpu(report: Option<&Report>, device: Option<u32>) -> anyhow::Result<Option<&Gpu>> {
    Ok(match (report, device) {
        (Some(r), Some(i)) => Some(r.pick_gpu(Some(i)).ok_or_else(|| {
            bad_input!(
                "--device {i}: the report has no GPU {i} (it has {})",
                r.gpus
                    .iter()
                    .map(|g| g.index.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?),
        (Some(r), None) => r.pick_gpu(None),
        (None, _) => None,
    })
}

/// Each config checked and written; a config that cannot be read is
/// reported and the others still checked (exit 2 at the end).
fn check_configs(
    cli: &Cli,
    target: &Target,
    on: Option<(&Gpu, Source)>,
    format: Chosen,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let mut results = Vec::new();
    let mut bad = false;
    for path in &cli.configs {
        match configs::result(path, cli.as_format, target, on) {
            Ok(r) => results.push(r),
            Err(e) => {
                common::say!("cfgcheck: {e:#}");
                bad = true;
            }
        }
    }
    let result = Output {
        schema: Output::SCHEMA.into(),
        results,
    };
    match format {
        Chosen::Common(f) => f.write(&result, out, output::write_table, output::write_csv)?,
        Chosen::Concise => concise::write_configs(&result, out)?,
        Chosen::Sarif => unreachable!("formats::for_configs refuses sarif"),
    }
    out.flush()?;
    let worst = result
        .results
        .iter()
        .flat_map(|r| r.findings.iter().map(|f| f.severity))
        .min();
    Ok(if bad {
        exit::BAD_INPUT
    } else if worst == Some(Severity::Error) || (cli.strict && worst == Some(Severity::Warning)) {
        exit::FOUND
    } else {
        exit::OK
    })
}

/// --explain: the log is read line by line (no size cap: logs are large);
/// with --gpu the out-of-memory fix is sized for that GPU.
/// Whether train-model, train's libtorch half, is beside this binary.
fn trainer_installed() -> bool {
    std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.join("train-model")))
        .is_some_and(|p| p.is_file())
}

fn explain_log(cli: &Cli, log: &std::path::Path, out: &mut dyn Write) -> anyhow::Result<u8> {
    let name = if log == std::path::Path::new("-") {
        "<stdin>".to_string()
    } else {
        log.display().to_string()
    };
    let mut scan = if log == std::path::Path::new("-") {
        diagnose::explain::scan(&name, std::io::stdin().lock())?
    } else {
        let file = std::fs::File::open(log).map_err(|e| bad_input!("{name}: cannot open: {e}"))?;
        diagnose::explain::scan(&name, std::io::BufReader::with_capacity(1 << 20, file))?
    };
    // Train's config keys only for a user of train's own trainer: a config
    // of train's given, or its libtorch half beside this cfgcheck (the
    // source build; the pip wheel has none, nor `train check-data`).
    // train's keys where the log is its trainer's and it is installed, or
    // the user named train's config.
    let ours = scan.ours && trainer_installed();
    scan.advise(cli.config.is_some() || ours);
    let loaded = match &cli.config {
        Some(p) => Some(load(p)?),
        None => None,
    };
    let report = match &cli.gpu {
        Some(p) => Some(common::report::Report::parse(&common::input::read(p)?)?),
        None => None,
    };
    let gpu = report.as_ref().and_then(|r| r.pick_gpu(cli.device));
    explain::print(
        &scan,
        &name,
        loaded.as_ref(),
        gpu,
        formats::common_only(cli.format, "--explain")?,
        out,
    )
}

fn load(path: &std::path::Path) -> anyhow::Result<LoadedConfig> {
    Config::load(&common::input::read(path)?)
}
