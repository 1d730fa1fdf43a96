//! memdiag: what the GPUs hold now, read through NVML, as a `memdiag/v1` report
//! (docs/FORMATS.md, "`memdiag/v1` report (memdiag's output, GPU profiles)"). A table on a
//! terminal, YAML in a pipe.

mod nvml;
mod watch;

use clap::Parser;
use common::exit;
use common::format::Format;
use common::report::Report;
use common::tiers::TierTable;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

#[derive(Parser)]
#[command(
    name = "memdiag",
    version,
    about = "What the GPUs hold now (NVML), as a report other tools read",
    after_help = "Exit codes: 0 report written (also with no GPU), 2 bad input or usage, \
                  3 --require-gpu and no GPU could be read, 4 memdiag broke (an I/O failure or a bug)."
)]
struct Cli {
    /// Output format [default: table on a terminal, yaml otherwise]
    #[arg(long, value_enum)]
    format: Option<Format>,
    #[arg(long, value_name = "NAME|FILE", help = format!(
        "Replay a built-in GPU profile ({}) or a saved report's file (a value holding a `/` or ending in .yaml or .json; `-` reads stdin) instead of asking the driver",
        common::gpus::names()
    ))]
    from: Option<PathBuf>,
    /// Replace the built-in memory tiers with a `tiers/v1` file.
    #[arg(long, value_name = "FILE")]
    tiers: Option<PathBuf>,
    /// Exit 3 (nothing on stdout) when no GPU can be read.
    #[arg(long)]
    require_gpu: bool,
    /// Sample every SECONDS and write CSV rows until Ctrl-C or --count.
    #[arg(long, value_name = "SECONDS", value_parser = parse_interval)]
    watch: Option<Duration>,
    /// With --watch: stop after N samples.
    #[arg(long, value_name = "N", requires = "watch")]
    count: Option<u64>,
    /// With --watch: append the rows to FILE instead of stdout.
    #[arg(long, value_name = "FILE", requires = "watch")]
    csv: Option<PathBuf>,
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!(
            "expected a number of seconds in (0, 86400], found {s:?}"
        )),
    }
}

/// The whole of `memdiag`'s binary (src/bin/, and the wheel's; uutils' shape).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    common::cli::run("memdiag", || run(&cli))
}

fn run(cli: &Cli) -> anyhow::Result<u8> {
    let tiers = match &cli.tiers {
        Some(path) => TierTable::parse(&common::input::read(path)?)?,
        None => TierTable::default(),
    };
    // Opened only when asked for, and once: `--watch` reuses the session.
    let session = cli.from.is_none().then(nvml::Session::open);
    let mut report = match (&cli.from, &session) {
        (Some(value), _) => Report::parse(&common::gpus::read(value)?)?,
        (None, Some(session)) => {
            let mut r = session.report();
            r.time = Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
            r.host = common::host::name();
            r
        }
        (None, None) => unreachable!("a session is opened whenever --from is absent"),
    };
    report.recommend(&tiers);

    if report.gpus.is_empty() && cli.require_gpu {
        let why = report.notes.join("; ");
        return Err(anyhow::Error::new(exit::Failure::no_gpu(format!(
            "no GPU could be read (--require-gpu): {why}"
        ))));
    }

    if let Some(interval) = cli.watch {
        if report.gpus.is_empty() {
            common::say!("memdiag: nothing to watch: {}", report.notes.join("; "));
            return Ok(exit::OK);
        }
        let opts = watch::Options {
            interval,
            count: cli.count,
            csv: cli.csv.as_deref(),
        };
        match &session {
            Some(session) => watch::run(&opts, || session.sample())?,
            None => watch::run(&opts, || watch::samples_of(&report))?,
        }
        return Ok(exit::OK);
    }

    let mut out = std::io::stdout().lock();
    Format::resolve(cli.format).write(&report, &mut out, Report::write_table, Report::write_csv)?;
    out.flush()?;
    Ok(exit::OK)
}
