//! `train run -- CMD`: one guarded run of any command (the user's own
//! `python main.py --config ...`). Its output read as it comes, its memory
//! sampled, the known fixes set in its environment, its end said in words;
//! with `--config A --fallback B ...` and `{config}` in the command, a chain
//! of configs for any script, and with `--auto-fix` (autofix.rs) attempts
//! with the fix of the failure applied. The supervision is the supervise
//! crate's (`leg`); this is the chain, the run directory and the exit code.

use anyhow::Context;
use clap::Parser;
use common::bad_input;
use common::wire::failure::Class;
use common::wire::program::{AutoFix, ProgramLeg, ProgramMetric, ProgramStatus, ProgramSummary};
use common::wire::run_dir::RunDir;
use common::wire::Versioned;
use diagnose::ladder::MAX_ATTEMPTS;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use supervise::autofix::{
    expand, resume_dir, Attempt, Failure, Fixer, Next, CONFIG_WORD, RESUME_WORD,
};
use supervise::child::Spec;
use supervise::command::shell_words;
use supervise::events::{self, Bell, Interrupter, Waiter};
use supervise::leg::{Ended, Leg, Objective, FOUND_METRICS};
use supervise::readers::Reader;
use supervise::verdict::Stop;

mod codes;
mod setup;
pub use codes::ExitCodes;
use codes::{class_code, exit_code};
use setup::{fixes, ranks, say_restarts};

#[derive(Parser, Debug)]
#[command(
    after_help = "Exit codes: the command's own when it ran (128+N when signal N ended it; 130 when \
                  train run was stopped by Ctrl-C or SIGTERM), or with --exit-codes classes how it \
                  ended (75-78 a repeat may succeed, 80-84 it cannot); 2 bad usage or a command \
                  that cannot be started; 4 train broke. How it ended, in words, is in DIR/summary.yaml \
                  (program-summary/v1) and on stderr. docs/guide/own-script.md, \"Your own training script\"."
)]
pub struct Args {
    /// The run directory [default: runs/<program>-<time>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The config put in `{config}`'s place in the command.
    #[arg(long, value_name = "CFG")]
    pub config: Option<PathBuf>,
    /// The next config when the previous one ends in a failure a config
    /// causes (out of memory, CUDA graphs, a non-finite loss); repeat for a
    /// chain (A -> B -> C).
    #[arg(long, value_name = "CFG", requires = "config")]
    pub fallback: Vec<PathBuf>,
    /// End the command after this long (90s, 45m, 2h), then record a
    /// timeout.
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// Between SIGTERM to the command's process group and SIGKILL.
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = humantime::parse_duration)]
    pub grace: Duration,
    /// The metric the summary's best and last are of [default: the first
    /// reported of eval_loss (Hugging Face's Trainer), val_loss (Lightning,
    /// Keras), valid_loss, validation_loss, eval/loss, val/loss].
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,
    /// A regular expression with one capture group that reads --metric
    /// from a line (e.g. --metric val_loss --metric-regex 'valid loss\s+([0-9.]+)').
    #[arg(long, value_name = "RE", requires = "metric")]
    pub metric_regex: Option<String>,
    /// The metric is better larger (accuracy), not smaller.
    #[arg(long)]
    pub maximize: bool,
    /// After a failure a setting can fix (out of memory, CUDA-graph replay,
    /// fp16's non-finite loss), run again with the fix applied: gradient
    /// checkpointing on, then half the batch with twice the gradient
    /// accumulation (the effective batch kept), compile mode `default`,
    /// bf16; in the command's own flags (read from its argparse parser, or
    /// its --help) or a copy of its config in DIR; it stops where halving
    /// the batch cannot help. After the last --fallback.
    #[arg(long)]
    pub auto_fix: bool,
    /// Attempts at most, the first and --fallback's included.
    #[arg(long, value_name = "N", default_value_t = MAX_ATTEMPTS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_attempts: u32,
    /// Your own name for a setting --auto-fix turns, where it cannot tell
    /// it: batch=bsz (a flag --bsz, or a config key bsz); the settings are
    /// batch, accumulation, checkpointing, compile_mode, precision. Repeat.
    #[arg(long = "knob", value_name = "KNOB=NAME", value_parser = diagnose::knobs::parse_user_knob, requires = "auto_fix")]
    pub knobs: Vec<(diagnose::knobs::Knob, String)>,
    /// After a failure line (one train run knows: out of memory, a CUDA
    /// error, ...), end the whole job when no output comes for this long
    /// and no metric was reported at a later epoch or step since: a rank
    /// that failed leaves the others waiting in a collective until NCCL's
    /// timeout. [default: 5m for a launcher's job (torchrun, python -m
    /// torch.distributed.run, accelerate launch, deepspeed), off for
    /// another command; 0 turns it off]
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub hang_grace: Option<Duration>,
    /// The exit code: `command` passes the command's own on (128+N for
    /// signal N); `classes` says how it ended, for a scheduler: 75-78 a
    /// repeat may succeed (out of memory, killed, preempted by SIGTERM, a
    /// GPU error), 80-84 it cannot (a config's failure, the data, a
    /// non-finite loss, --timeout, any other); docs/FORMATS.md lists them.
    #[arg(long, value_enum, value_name = "HOW", default_value_t = ExitCodes::Command)]
    pub exit_codes: ExitCodes,
    /// Keep the command's output in DIR/output.log only.
    #[arg(long, short)]
    pub quiet: bool,
    /// The command, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `train run`: `stop` is the process's stop request (Ctrl-C, SIGTERM).
pub fn run(args: &Args, stop: &Interrupter) -> anyhow::Result<u8> {
    let configs = configs_of(args)?;
    // The regex is checked before anything runs.
    reader(args)?;
    let dir = RunDir::new(
        args.out
            .clone()
            .unwrap_or_else(|| default_out(&args.command)),
    );
    std::fs::create_dir_all(dir.path())
        .map_err(|e| bad_input!("{}: cannot create: {e}", dir.path().display()))?;
    let cwd = std::env::current_dir().context("the current directory")?;
    let (bell, wait) = events::bell();
    stop.wake(&bell);
    let watch = Watch {
        stop,
        bell: &bell,
        wait: &wait,
    };
    let started = Instant::now();
    let mut summary = new_summary(&cwd);
    let mut code = common::exit::FOUND;
    if args.command.iter().any(|w| w.contains(RESUME_WORD)) {
        std::fs::create_dir_all(resume_dir(&dir))?;
    }
    let mut legs = Legs {
        queue: configs
            .into_iter()
            .map(|config| Attempt::new(args.command.clone(), config))
            .collect(),
        fixer: args.auto_fix.then(|| Fixer::new(&args.knobs, &dir, None)),
        max_attempts: args.max_attempts,
    };
    if args.auto_fix {
        say_restarts(&args.command);
    }
    let mut number = 0;
    while let Some(attempt) = legs.queue.pop_front() {
        number += 1;
        let argv = expand(&attempt.command, attempt.config.as_deref(), &dir);
        let env = fixes(&argv, &mut summary);
        let (argv, env) = ranks(argv, env, &mut summary);
        for c in &attempt.changed {
            common::say!("train run: leg {number}: {c}");
        }
        let config = attempt.config.clone();
        let ended = run_leg(args, &watch, &dir, number, argv, env, config)?;
        let failure = Failure::of(&ended);
        let mut l = ended.leg;
        l.changed = attempt.changed.clone();
        l.resumed_from = attempt.resumed_from.clone();
        code = exit_code(&l);
        summary.status = l.status;
        summary.class = l.class;
        summary.evidence = l.evidence.clone();
        summary.advice = l.advice.clone();
        summary.metric = Some(metric_of(summary.metric.take(), ended.metric));
        summary.best = ended.best.or(summary.best.take());
        summary.last = ended.last.or(summary.last.take());
        summary.seconds = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
        say_leg_end(number, &l);
        let fixable = l.status == ProgramStatus::Failed && supervise::leg::config_caused(l.class);
        let account = summary.auto_fix.take();
        summary.auto_fix = legs.after(&attempt, number, &l, &failure, account)?;
        summary.legs.push(l);
        common::files::write_yaml(&dir.summary(), &summary)?;
        if !fixable {
            break;
        }
        say_next(&attempt, number, legs.queue.front());
    }
    say_end(&summary, &dir);
    if args.exit_codes == ExitCodes::Classes {
        code = class_code(&summary, stop);
    }
    Ok(code)
}

/// The run's last words: a metric never reported, why `--auto-fix`
/// stopped, where the summary is.
fn say_end(summary: &ProgramSummary, dir: &RunDir) {
    // A failed run's missing metric is its failure's: not said over it.
    let finished = summary.status == ProgramStatus::Finished;
    let tail = || log_tail(&dir.output_log());
    let missing = summary.metric.as_ref().filter(|_| finished);
    if let Some(words) = missing.and_then(|m| metric_missing(m, tail)) {
        common::say!("train run: {words}");
    }
    if let Some(why) = summary.auto_fix.as_ref().and_then(|a| a.stopped.as_ref()) {
        common::say!("train run: stopped: {why}");
    }
    common::say!("train run: summary in {}", dir.summary().display());
}

/// A run's summary before its first leg.
fn new_summary(cwd: &Path) -> ProgramSummary {
    ProgramSummary {
        schema: ProgramSummary::SCHEMA.into(),
        status: ProgramStatus::Failed,
        class: None,
        evidence: String::new(),
        advice: None,
        cwd: cwd.display().to_string(),
        env_set: Vec::new(),
        metric: None,
        best: None,
        last: None,
        seconds: 0.0,
        legs: Vec::new(),
        auto_fix: None,
        ranks: None,
    }
}

/// What takes over after leg `number` (`attempt`) failed: the next config
/// given, or the fix.
fn say_next(attempt: &Attempt, number: u32, next: Option<&Attempt>) {
    match next {
        Some(n) if n.changed.is_empty() => common::say!(
            "train run: {} ended in a failure a config causes: the next config, {}, takes over",
            attempt.config.as_deref().unwrap_or("the config"),
            n.config.as_deref().unwrap_or("?")
        ),
        Some(_) => common::say!(
            "train run: leg {} tries again with the fix applied",
            number + 1
        ),
        None => {}
    }
}

/// The legs still to run: the configs given (`--config`, `--fallback`),
/// then `--auto-fix`'s attempts.
struct Legs<'a> {
    queue: std::collections::VecDeque<Attempt>,
    fixer: Option<Fixer<'a>>,
    max_attempts: u32,
}

impl Legs<'_> {
    /// After leg `number` (`attempt`, which ended as `leg`): with
    /// `--auto-fix`, the next attempt queued when a fix applies and the
    /// last config given has run, and the run's account; None without.
    fn after(
        &mut self,
        attempt: &Attempt,
        number: u32,
        leg: &ProgramLeg,
        failure: &Failure,
        account: Option<AutoFix>,
    ) -> anyhow::Result<Option<AutoFix>> {
        let Some(f) = self.fixer.as_mut() else {
            return Ok(None);
        };
        let mut account = account.unwrap_or_default();
        account.attempts = number;
        let failed = leg.status == ProgramStatus::Failed;
        // The settings as they ran: read (the program's --help, its config)
        // only once a fix was made or looked for, not on a first run that
        // finished.
        if number > 1 || (failed && self.queue.is_empty()) {
            let effective = f.effective(attempt);
            account.knobs = effective.knobs;
            account.effective_batch = effective.batch;
            account.flags_from = f.flags_from();
        }
        if !failed || !self.queue.is_empty() {
            return Ok(Some(account));
        }
        let class = leg.class.unwrap_or(Class::Other);
        if !class.config_caused() {
            account.stopped = Some(format!("a failure no setting fixes ({})", class.as_str()));
        } else if number >= self.max_attempts {
            account.stopped = Some(format!("--max-attempts {} reached", self.max_attempts));
        } else {
            match f.next(attempt, number, failure)? {
                Next::Attempt(a, passed) => {
                    add_new(&mut account.not_possible, passed);
                    self.queue.push_back(a);
                }
                Next::None {
                    stopped,
                    not_possible,
                } => {
                    account.stopped = Some(stopped);
                    for w in &not_possible {
                        common::say!("train run: not possible: {w}");
                    }
                    add_new(&mut account.not_possible, not_possible);
                }
            }
        }
        Ok(Some(account))
    }
}

/// The reader of the command's lines: with no --metric, there is no regex
/// (clap requires --metric with --metric-regex) and no W&B name to map.
fn reader(args: &Args) -> anyhow::Result<Reader> {
    Reader::new(
        args.metric.as_deref().unwrap_or_default(),
        args.metric_regex.as_deref(),
    )
}

/// The run's objective after one more leg: the metric chosen (a later
/// leg's when it reported one), the metrics seen by any leg.
fn metric_of(before: Option<ProgramMetric>, leg: ProgramMetric) -> ProgramMetric {
    let Some(mut m) = before else {
        return leg;
    };
    if leg.reported || m.name.is_none() {
        m.name = leg.name;
        m.reported = leg.reported;
    }
    for s in leg.seen {
        if !m.seen.contains(&s) {
            m.seen.push(s);
        }
    }
    m
}

/// What to say when the metric named was never reported, or none was
/// named and none looked for was: the metrics that were, and the flag
/// that takes one of them; when none was read, a regex made from a line of
/// `tail` (its output's last lines), shown only when it reads that line.
fn metric_missing(m: &ProgramMetric, tail: impl FnOnce() -> Vec<String>) -> Option<String> {
    if m.reported {
        return None;
    }
    let what = match &m.name {
        Some(name) => format!("--metric {name} was never reported, so the summary has no best"),
        None => format!(
            "no --metric given and none of {} was reported, so the summary has no best",
            FOUND_METRICS.join(", ")
        ),
    };
    let fix = match m.seen.first() {
        Some(first) => format!(
            "it reported {}: choose one, e.g. --metric {first}",
            m.seen.join(", ")
        ),
        None => {
            let print = "no metric was read from its output: print a line per evaluation \
                 (`epoch 1: val_loss=0.41` or `{\"epoch\": 1, \"val_loss\": 0.41}`)";
            match supervise::readers::suggest::regex_for(&tail(), m.name.as_deref()) {
                Some(s) => format!(
                    "{print}, or give the metric and a regex that reads it from `{}` \
                     (its value {} there): e.g. --metric {} --metric-regex '{}'",
                    s.line.trim(),
                    s.value,
                    s.metric,
                    s.regex
                ),
                None => format!(
                    "{print}, or give --metric NAME and --metric-regex with one group \
                     around its value"
                ),
            }
        }
    };
    Some(format!("{what}; {fix}"))
}

/// The last lines of the run's output.log (from its last 256 KiB): where
/// a regex is looked for.
fn log_tail(log: &Path) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    const LINES: usize = 200;
    let mut bytes = Vec::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        let len = f.metadata().map_or(0, |m| m.len());
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(256 * 1024)));
        let _ = f.read_to_end(&mut bytes);
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LINES)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// Leg `number` of the run in `dir`: `argv` with `env` set, supervised from
/// start to end (its output appended to output.log).
fn run_leg(
    args: &Args,
    watch: &Watch,
    dir: &RunDir,
    number: u32,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    config: Option<String>,
) -> anyhow::Result<Ended> {
    let words = shell_words(&argv);
    let spec = Spec {
        argv,
        cwd: None,
        env,
        log: dir.output_log(),
        own_metrics: Some(dir.own_metrics()),
        echo: !args.quiet,
        grace: args.grace,
        bell: watch.bell.clone(),
        preload: None,
    };
    let reader = reader(args)?;
    let objective = Objective {
        metric: args.metric.clone(),
        maximize: args.maximize,
    };
    mark_leg(dir, number, &words)?;
    let mut leg = Leg::start(&spec, reader, dir, number, objective, config)?;
    common::say!(
        "train run: leg {number}: {words} (pid {}); output in {}",
        leg.pid(),
        dir.output_log().display()
    );
    if let Some(grace) = supervise::hang::grace_for(args.hang_grace, &spec.argv) {
        leg.watch_hangs(grace);
    }
    let status = watch.until_end(&mut leg, args)?;
    Ok(leg.end(status))
}

/// Leg `number`'s marker in output.log, above its output: every leg's,
/// the first's too (a blank line before the others').
fn mark_leg(dir: &RunDir, number: u32, words: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.output_log())?;
    let gap = if number > 1 { "\n" } else { "" };
    writeln!(log, "{gap}==> train run: leg {number}: {words}")?;
    Ok(())
}

/// `more`'s lines not yet in `list`.
fn add_new(list: &mut Vec<String>, more: Vec<String>) {
    for m in more {
        if !list.contains(&m) {
            list.push(m);
        }
    }
}

/// How leg `number` ended, and what to change, on stderr.
fn say_leg_end(number: u32, l: &ProgramLeg) {
    let word = match l.class {
        Some(c) => format!("{:?} ({})", l.status, c.as_str()).to_lowercase(),
        None => format!("{:?}", l.status).to_lowercase(),
    };
    common::say!("train run: leg {number} {word}: {}", l.evidence);
    if let Some(a) = &l.advice {
        common::say!("train run: what to change: {a}");
    }
}

/// The legs' configs: `--config` then each `--fallback` (None: a command
/// without `{config}`). A `{config}` without `--config`, or the reverse,
/// is bad usage; each file must exist.
fn configs_of(args: &Args) -> anyhow::Result<Vec<Option<String>>> {
    let has_word = args.command.iter().any(|w| w.contains(CONFIG_WORD));
    match (&args.config, has_word) {
        (None, false) => return Ok(vec![None]),
        (None, true) => {
            return Err(bad_input!(
                "the command has {CONFIG_WORD} but no --config names the file to put there"
            ))
        }
        (Some(_), false) => {
            return Err(bad_input!(
                "--config is given but the command has no {CONFIG_WORD} to put it in (e.g. `-- python main.py --config {CONFIG_WORD}`)"
            ))
        }
        (Some(_), true) => {}
    }
    let files: Vec<&PathBuf> = args.config.iter().chain(&args.fallback).collect();
    for f in &files {
        if !f.is_file() {
            return Err(bad_input!("{}: no such config file", f.display()));
        }
    }
    Ok(files
        .iter()
        .map(|f| Some(f.display().to_string()))
        .collect())
}

/// What a leg's loop waits on: the stop request and the bell its
/// command's lines and exit ring.
struct Watch<'a> {
    stop: &'a Interrupter,
    bell: &'a Bell,
    wait: &'a Waiter,
}

impl Watch<'_> {
    /// Watches the leg until its command ends, waking on its output, its
    /// exit, Ctrl-C and the timeout: Ctrl-C and the timeout stop it.
    fn until_end(&self, leg: &mut Leg, args: &Args) -> anyhow::Result<std::process::ExitStatus> {
        let timeout_at = args.timeout.map(|t| leg.started() + t);
        loop {
            leg.poll();
            if leg.stopping().is_none() {
                if self.stop.should_stop() {
                    common::say!(
                        "train run: stopping the command: SIGTERM to its process group, SIGKILL after {}",
                        humantime::format_duration(args.grace)
                    );
                    let by = self.stop.asked_by();
                    leg.stop(Stop::Interrupted(format!("train run got {by}")));
                } else if let Some(limit) =
                    args.timeout.filter(|_| timeout_at <= Some(Instant::now()))
                {
                    common::say!(
                        "train run: past --timeout {}: ending the command",
                        humantime::format_duration(limit)
                    );
                    leg.stop(Stop::Timeout {
                        limit_s: limit.as_secs_f64(),
                    });
                }
            }
            if let Some(said) = leg.stop_if_hung() {
                common::say!(
                    "train run: {said}: ending it, SIGTERM to all its processes, SIGKILL after {}",
                    humantime::format_duration(args.grace)
                );
            }
            if let Some(status) = leg.tick()? {
                return Ok(status);
            }
            let next = match leg.stopping() {
                Some(_) => leg.deadline(),
                None => [timeout_at, leg.hang_deadline()]
                    .into_iter()
                    .flatten()
                    .min(),
            };
            self.wait.until(next);
        }
    }
}

fn default_out(command: &[String]) -> PathBuf {
    // The script's name for `python main.py`, else the program's.
    let word = command
        .iter()
        .find(|w| w.ends_with(".py"))
        .or(command.first())
        .map(|w| {
            Path::new(w)
                .file_stem()
                .map_or("run".into(), |s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "run".into());
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let stamp =
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(secs))
            .to_string()
            .replace([':', 'T'], "-")
            .trim_end_matches('Z')
            .to_string();
    PathBuf::from("runs").join(format!("{word}-{stamp}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cmd: &str, config: Option<&str>) -> Args {
        let mut argv = vec!["run".to_string()];
        if let Some(c) = config {
            argv.extend(["--config".into(), c.into()]);
        }
        argv.push("--".into());
        argv.extend(cmd.split(' ').map(String::from));
        Args::try_parse_from(argv).unwrap()
    }

    #[test]
    fn config_and_its_word_go_together() {
        assert_eq!(configs_of(&args("python m.py", None)).unwrap(), vec![None]);
        let e = configs_of(&args("python m.py --config {config}", None)).unwrap_err();
        assert!(e.to_string().contains("no --config"), "{e}");
        let e = configs_of(&args("python m.py", Some("Cargo.toml"))).unwrap_err();
        assert!(e.to_string().contains("no {config}"), "{e}");
        let e = configs_of(&args("python m.py --config={config}", Some("nope.yaml"))).unwrap_err();
        assert!(
            e.to_string().contains("nope.yaml: no such config file"),
            "{e}"
        );
        assert_eq!(
            expand(
                &["--config={config}".into(), "{resume}".into()],
                Some("a.yaml"),
                &RunDir::new(PathBuf::from("r"))
            ),
            ["--config=a.yaml", "r/checkpoints"]
        );
    }

    #[test]
    fn exit_codes_are_the_commands() {
        use common::wire::program::ProgramLeg;
        let mut leg = ProgramSummary::example().legs.remove(0);
        assert_eq!(exit_code(&leg), 1);
        leg = ProgramLeg {
            exit_code: None,
            signal: Some(9),
            ..leg
        };
        assert_eq!(exit_code(&leg), 137);
        leg.status = ProgramStatus::Stopped;
        assert_eq!(exit_code(&leg), 130);
        assert_eq!(
            shell_words(&["python".into(), "a b.py".into()]),
            "python 'a b.py'"
        );
        assert!(default_out(&["python".into(), "x/main.py".into()])
            .display()
            .to_string()
            .starts_with("runs/main-"));
    }
}
