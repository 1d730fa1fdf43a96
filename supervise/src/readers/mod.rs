//! A program's metric reports, read from what it already writes: its output
//! lines (the seeds' epoch lines, JSON or Python dict lines, `name=value`
//! pairs of the names it knows, the space's `metric.regex`) and the rows it appends to `$TRAINGUARD_TRIAL_DIR/metrics.csv`.
//! Pure: text in, reports out. A line that is not a report yields nothing,
//! never an error; a non-finite value is reported as it is (the caller fails
//! the trial on it).

mod csv_rows;
mod epoch_line;
mod literal;
mod number;
mod pairs;
pub mod suggest;

pub use csv_rows::CsvRows;

use common::wire::metric::Metric;
use regex::Regex;
use std::collections::HashMap;

/// One value of one metric, at a step.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub metric: Metric,
    pub value: f64,
    /// The epoch when the line gives a whole one (else its `step`), else a
    /// running count; strictly increasing per metric (see [`Steps`]).
    pub step: u64,
    /// The epoch its line gave, as it gave it (a Trainer's 0.625), when it
    /// gave one.
    pub epoch: Option<f64>,
    /// Where its line said it was (its epoch, else its step), as written;
    /// None where it said not. Two ranks' lines of one step give the same.
    pub at: Option<f64>,
    /// The reader that found it.
    pub source: Source,
}

/// Which reader a report came from: verify-fixes says it, so the author of
/// a sweep knows how the metric will be seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// `Epoch N/M | Val Loss: ...` lines.
    EpochLine,
    /// A JSON object or Python dict per line.
    Dict,
    /// `name=value`, `name: value` or `name value` of a name it knows,
    /// anywhere on a line.
    Pairs,
    /// The `metric.regex` (`--metric-regex`).
    Regex,
    /// Rows appended to `$TRAINGUARD_METRICS_CSV`.
    Csv,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::EpochLine => "epoch lines",
            Source::Dict => "JSON or dict lines",
            Source::Pairs => "name=value pairs",
            Source::Regex => "the regex",
            Source::Csv => "metrics.csv rows",
        }
    }
}

/// The steps of each metric's reports. Optuna keeps one intermediate value
/// per step, so a metric's steps only increase: the epoch the line gives
/// when it is whole and past the metric's last step, else one more than the
/// last (a running count from 1). Hugging Face's training-loss lines come at
/// fractional epochs (0.33, 0.67, 1.0): they count 1, 2, 3.
#[derive(Debug, Default)]
struct Steps {
    last: HashMap<String, u64>,
}

/// The largest epoch taken as a step: beyond it an f64 no longer holds every
/// whole number.
const MAX_STEP: f64 = 9_007_199_254_740_992.0;

impl Steps {
    fn next(&mut self, metric: &str, epoch: Option<f64>) -> u64 {
        let last = self.last.get(metric).copied();
        let whole = epoch.filter(|e| e.fract() == 0.0 && *e >= 0.0 && *e <= MAX_STEP);
        let step = match (whole, last) {
            (Some(e), None) => e as u64,
            (Some(e), Some(l)) if e as u64 > l => e as u64,
            (_, Some(l)) => l.saturating_add(1),
            (None, None) => 1,
        };
        self.last.insert(metric.to_string(), step);
        step
    }
}

/// The keys and columns that say where a report is rather than what it
/// measured: never reported, the first present is its step.
const STEP_KEYS: [&str; 4] = ["epoch", "step", "global_step", "_step"];

/// What one line gave, before steps: (name, value) pairs and where the
/// line is.
struct Found {
    values: Vec<(String, f64)>,
    /// Its epoch, else its step.
    at: Option<f64>,
    /// Its epoch alone, as written.
    epoch: Option<f64>,
    /// A dict line: its keys may be Hugging Face Trainer's.
    dict: bool,
}

/// Reads a program's output lines, one at a time as they come.
#[derive(Debug)]
pub struct Reader {
    metric: String,
    regex: Option<Regex>,
    steps: Steps,
    /// Inside the "wandb: Run summary:" block wandb prints at its end.
    in_wandb_summary: bool,
    wandb_summary: HashMap<String, f64>,
}

impl Reader {
    /// A reader for the space's `metric.name`, with its `metric.regex` if it
    /// has one; a regex that does not compile or lacks exactly one capture
    /// group is refused (bad input: the space check exits 2).
    pub fn new(metric: &str, regex: Option<&str>) -> anyhow::Result<Reader> {
        let regex = regex.map(|r| compile(metric, r)).transpose()?;
        Ok(Reader {
            metric: metric.to_string(),
            regex,
            steps: Steps::default(),
            in_wandb_summary: false,
            wandb_summary: HashMap::new(),
        })
    }

    /// The value of `metric` in the run summary a W&B script printed as it
    /// finished (`wandb: Run summary:`, then `wandb: <key> <value>` lines):
    /// what W&B's sweep would rank it by. An offline run keeps its history
    /// in a binary .wandb file, which is not read.
    pub fn wandb_summary(&self, metric: &str) -> Option<f64> {
        self.wandb_summary.get(metric).copied()
    }

    /// Tracks the W&B run summary block; true for a line inside it.
    fn wandb_footer(&mut self, text: &str) -> bool {
        let Some(rest) = text.strip_prefix("wandb:") else {
            self.in_wandb_summary = false;
            return false;
        };
        let rest = rest.trim();
        if rest == "Run summary:" {
            self.in_wandb_summary = true;
            return true;
        }
        if !self.in_wandb_summary {
            return false;
        }
        let mut words = rest.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(k), Some(v), None) => {
                if let Some(v) = number::whole(v) {
                    self.wandb_summary.insert(k.to_string(), v);
                }
            }
            _ => self.in_wandb_summary = false,
        }
        true
    }

    /// The reports in one line of stdout or stderr (with or without its
    /// newline): every metric an epoch, JSON or dict line gives, else the
    /// `name=value` pairs of the names it knows, and one report of
    /// `metric.name` per match of the regex, which alone reports that
    /// metric when given.
    pub fn line(&mut self, line: &str) -> Vec<Report> {
        let shown = visible(line);
        // A launcher's rank tag (`[rank N] `) is not the line's.
        let (_, text) = crate::launcher::said_by(&shown);
        if self.wandb_footer(text) {
            return Vec::new();
        }
        let found = epoch_line::read(text)
            .map(|f| (f, Source::EpochLine))
            .or_else(|| literal::read(text).map(|f| (f, Source::Dict)))
            .or_else(|| pairs::read(text).map(|f| (f, Source::Pairs)));
        let mut reports = Vec::new();
        if let Some((found, source)) = found {
            for (name, value) in found.values {
                let name = if found.dict && wandb_name(&name).is_some_and(|w| w == self.metric) {
                    self.metric.clone()
                } else {
                    name
                };
                if self.regex.is_some() && name == self.metric {
                    continue;
                }
                let step = self.steps.next(&name, found.at);
                reports.push(Report {
                    metric: Metric::from_name(&name),
                    value,
                    step,
                    epoch: found.epoch,
                    at: found.at,
                    source,
                });
            }
        }
        if let Some(regex) = &self.regex {
            for caps in regex.captures_iter(text) {
                let Some(value) = caps.get(1).and_then(|m| number::whole(m.as_str())) else {
                    continue;
                };
                let step = self.steps.next(&self.metric, None);
                reports.push(Report {
                    metric: Metric::from_name(&self.metric),
                    value,
                    step,
                    epoch: None,
                    at: None,
                    source: Source::Regex,
                });
            }
        }
        reports
    }
}

fn compile(metric: &str, pattern: &str) -> anyhow::Result<Regex> {
    let regex = Regex::new(pattern)
        .map_err(|e| common::bad_input!("metric.regex for {metric} does not compile: {e}"))?;
    let groups = regex.captures_len() - 1;
    if groups != 1 {
        return Err(common::bad_input!(
            "metric.regex for {metric} has {groups} capture groups; it needs exactly one, around the value (e.g. 'valid loss\\s+([0-9.]+)'; write other groups as (?:...))"
        ));
    }
    Ok(regex)
}

/// What a terminal shows of a line: its text after the last carriage return
/// (a progress bar redraws with `\r`, and tqdm's `write` clears the bar that
/// way before the line), without ANSI colour and cursor sequences.
fn visible(line: &str) -> String {
    let line = line.trim_end_matches(['\n', '\r']);
    let shown = line.rsplit('\r').next().unwrap_or(line);
    let mut out = String::with_capacity(shown.len());
    let mut chars = shown.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        // CSI: ESC [ parameters, then one final byte in @..~.
        if chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

/// The name W&B's Hugging Face integration logs a Trainer key under
/// (transformers' integrations `rewrite_logs`: `eval_loss` is `eval/loss`,
/// `test_x` is `test/x`, any other `x` is `train/x`), so a space written for
/// W&B finds it; None for the step keys.
fn wandb_name(key: &str) -> Option<String> {
    if STEP_KEYS.contains(&key) {
        return None;
    }
    Some(if let Some(rest) = key.strip_prefix("eval_") {
        format!("eval/{rest}")
    } else if let Some(rest) = key.strip_prefix("test_") {
        format!("test/{rest}")
    } else {
        format!("train/{key}")
    })
}

#[cfg(test)]
mod tests;
