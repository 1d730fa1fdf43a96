//! The command form's smoke run: the user's command under the supervisor
//! `train run` uses (supervise's `Leg`: its own process group, stdin from
//! /dev/null, its output read line by line, its memory sampled, a keeper
//! that ends it if verify-fixes dies), until it has reported N epochs, or a
//! non-finite loss, or S seconds have passed; then stopped. What it saw
//! comes back as a `Ran`, which `command` judges. `Tally` (what the reports
//! say, pure) is apart from the loop.

use common::wire::run_dir::RunDir;
use std::collections::HashMap;
use std::time::Duration;
use supervise::child::Spec;
use supervise::leg::{Ended, Leg, Objective};
use supervise::readers::{Reader, Report, Source};
use supervise::verdict::Stop;

/// Between SIGTERM to the command's group and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// What to run, and when to stop it.
pub struct Plan<'a> {
    pub argv: &'a [String],
    /// Variables set for it on top of ours (the environment fixes).
    pub env: Vec<(String, String)>,
    pub dir: &'a RunDir,
    pub seconds: f64,
    pub epochs: u64,
    pub expect: Option<&'a str>,
    pub regex: Option<&'a str>,
}

/// Why verify-fixes stopped the command.
#[derive(Clone, Debug, PartialEq)]
pub enum Why {
    Epochs(u64),
    NonFinite(String),
    Time(f64),
}

impl Why {
    pub fn words(&self) -> String {
        match self {
            Why::Epochs(n) => format!("stopped by verify-fixes after {n} epoch(s)"),
            Why::NonFinite(what) => format!("stopped by verify-fixes at a non-finite {what}"),
            Why::Time(s) => format!("stopped by verify-fixes after {s} s (--smoke-seconds)"),
        }
    }
}

/// What the smoke saw.
pub struct Ran {
    pub ended: Ended,
    pub stopped: Option<Why>,
    pub tally: Tally,
}

/// One metric's reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub source: Source,
    pub reports: u64,
    pub last: Option<f64>,
    /// Its first non-finite report, in words.
    pub non_finite: Option<String>,
}

/// Every metric read, in the order first seen. Pure.
#[derive(Debug, Default)]
pub struct Tally {
    pub order: Vec<String>,
    pub by: HashMap<String, Seen>,
}

impl Tally {
    pub fn add(&mut self, r: &Report) {
        let name = r.metric.to_string();
        let seen = self.by.entry(name.clone()).or_insert_with(|| {
            self.order.push(name.clone());
            Seen {
                source: r.source,
                reports: 0,
                last: None,
                non_finite: None,
            }
        });
        seen.reports += 1;
        if r.value.is_finite() {
            seen.last = Some(r.value);
        } else if seen.non_finite.is_none() {
            seen.non_finite = Some(format!("{name} {} at step {}", r.value, r.step));
        }
    }

    /// The metric whose reports count epochs: the expected one, else the
    /// one `train run` would find (`eval_loss`, `val_loss`, ...), else the
    /// first read.
    pub fn epoch_metric<'a>(&'a self, expect: Option<&'a str>) -> Option<&'a str> {
        if expect.is_some() {
            return expect;
        }
        supervise::leg::FOUND_METRICS
            .into_iter()
            .find(|m| self.by.contains_key(*m))
            .or(self.order.first().map(String::as_str))
    }

    pub fn epochs(&self, expect: Option<&str>) -> u64 {
        self.epoch_metric(expect)
            .and_then(|m| self.by.get(m))
            .map_or(0, |s| s.reports)
    }

    /// The first non-finite report of the epoch metric or of a loss (a
    /// gradient norm may be NaN at a step fp16's loss scaler skips: not a
    /// failure).
    pub fn non_finite(&self, expect: Option<&str>) -> Option<&str> {
        let epoch = self.epoch_metric(expect);
        self.order
            .iter()
            .filter(|m| Some(m.as_str()) == epoch || m.contains("loss"))
            .find_map(|m| self.by[m].non_finite.as_deref())
    }
}

/// Runs the smoke. An error: the command could not be started (its message
/// names the program), or its records could not be written.
pub fn run(p: &Plan) -> anyhow::Result<Ran> {
    let (bell, wait) = supervise::events::bell();
    let spec = Spec {
        argv: p.argv.to_vec(),
        cwd: None,
        env: p.env.clone(),
        log: p.dir.output_log(),
        own_metrics: Some(p.dir.own_metrics()),
        echo: false,
        grace: GRACE,
        bell,
        preload: None,
    };
    let reader = Reader::new(p.expect.unwrap_or("val_loss"), p.regex)?;
    let objective = Objective {
        metric: p.expect.map(String::from),
        maximize: false,
    };
    let mut leg = Leg::start(&spec, reader, p.dir, 1, objective, None)?;
    common::say!(
        "verify-fixes: smoke: pid {}, up to {} epoch(s) or {} s; its output in {}",
        leg.pid(),
        p.epochs,
        p.seconds,
        p.dir.output_log().display()
    );
    let mut tally = Tally::default();
    let mut stopped = None;
    let mut said = 0;
    let status = loop {
        for r in leg.poll() {
            tally.add(&r);
        }
        let epochs = tally.epochs(p.expect);
        if epochs > said {
            said = epochs;
            common::say!("verify-fixes: smoke: epoch {epochs} reported");
        }
        if stopped.is_none() {
            let why = if let Some(what) = tally.non_finite(p.expect) {
                Some(Why::NonFinite(what.to_string()))
            } else if epochs >= p.epochs {
                Some(Why::Epochs(epochs))
            } else if leg.seconds() > p.seconds {
                Some(Why::Time(p.seconds))
            } else {
                None
            };
            if let Some(why) = why {
                leg.stop(Stop::Pruned(why.words()));
                stopped = Some(why);
            }
        }
        if let Some(status) = leg.tick()? {
            break status;
        }
        // Its next line or its exit wakes this; the time limit at the latest.
        let limit = leg.started() + Duration::from_secs_f64(p.seconds);
        wait.until(if stopped.is_some() {
            leg.deadline()
        } else {
            Some(limit)
        });
    };
    // The lines still in the pipes when it ended (`tick` read them to the
    // end), before `end` takes them.
    for r in leg.poll() {
        tally.add(&r);
    }
    Ok(Ran {
        ended: leg.end(status),
        stopped,
        tally,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::wire::metric::Metric;

    fn r(name: &str, value: f64, step: u64, source: Source) -> Report {
        Report {
            metric: Metric::from_name(name),
            value,
            step,
            epoch: None,
            source,
        }
    }

    #[test]
    fn epochs_count_the_expected_metric_else_a_found_one_else_the_first() {
        let mut t = Tally::default();
        t.add(&r("accuracy", 0.5, 1, Source::Dict));
        assert_eq!(t.epoch_metric(None), Some("accuracy"));
        t.add(&r("train_loss", 0.9, 1, Source::EpochLine));
        t.add(&r("val_loss", 0.8, 1, Source::EpochLine));
        t.add(&r("val_loss", 0.7, 2, Source::EpochLine));
        assert_eq!(t.epoch_metric(None), Some("val_loss"));
        assert_eq!(t.epochs(None), 2);
        assert_eq!(t.epochs(Some("accuracy")), 1);
        assert_eq!(t.epochs(Some("eval_loss")), 0);
        // Hugging Face's Trainer's comes before Lightning's.
        t.add(&r("eval_loss", 0.7, 1, Source::Dict));
        assert_eq!(t.epoch_metric(None), Some("eval_loss"));
        assert_eq!(t.order, ["accuracy", "train_loss", "val_loss", "eval_loss"]);
        assert_eq!(t.by["val_loss"].last, Some(0.7));
        assert_eq!(t.by["accuracy"].source, Source::Dict);
    }

    #[test]
    fn a_non_finite_loss_counts_and_a_non_finite_gradient_norm_does_not() {
        let mut t = Tally::default();
        t.add(&r("train_loss", 0.5, 1, Source::EpochLine));
        t.add(&r("grad_norm", f64::NAN, 1, Source::Dict));
        assert_eq!(t.non_finite(None), None);
        t.add(&r("train_loss", f64::INFINITY, 2, Source::EpochLine));
        t.add(&r("train_loss", f64::NAN, 3, Source::EpochLine));
        assert_eq!(t.non_finite(None), Some("train_loss inf at step 2"));
        assert_eq!(t.by["train_loss"].last, Some(0.5));
        let mut t = Tally::default();
        t.add(&r("acc", f64::NAN, 3, Source::Regex));
        assert_eq!(t.non_finite(Some("acc")), Some("acc NaN at step 3"));
    }
}
