//! The command form's smoke run: the user's command under the supervisor
//! `train run` uses (supervise's `Leg`: its own process group, stdin from
//! /dev/null, its output read line by line, its memory sampled, a keeper
//! that ends it if verify-fixes dies), until it has reported N evaluations
//! (reports of the metric a sweep ranks by, not its training loss: two
//! data epochs can take hours, two evaluations need not), or a non-finite
//! loss, or S seconds have passed; then stopped. What it saw
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
    /// Evaluations to wait for.
    pub evaluations: u64,
    pub expect: Option<&'a str>,
    pub regex: Option<&'a str>,
}

/// Why verify-fixes stopped the command.
#[derive(Clone, Debug, PartialEq)]
pub enum Why {
    Evaluations(u64),
    NonFinite(String),
    Time(f64),
}

impl Why {
    pub fn words(&self) -> String {
        match self {
            Why::Evaluations(n) => format!("stopped by verify-fixes after {n} evaluation(s)"),
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
    /// The epoch of its last report that gave one, as given (0.625).
    pub epoch: Option<f64>,
}

/// Every metric read, in the order first seen. Pure.
#[derive(Debug, Default)]
pub struct Tally {
    pub order: Vec<String>,
    pub by: HashMap<String, Seen>,
    /// The epoch of the last report that gave one: how far the run got.
    pub last_epoch: Option<f64>,
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
                epoch: None,
            }
        });
        seen.reports += 1;
        if let Some(e) = r.epoch {
            seen.epoch = Some(e);
            self.last_epoch = Some(e);
        }
        if r.value.is_finite() {
            seen.last = Some(r.value);
        } else if seen.non_finite.is_none() {
            seen.non_finite = Some(format!("{name} {} at step {}", r.value, r.step));
        }
    }

    /// The metric whose reports are evaluations: the expected one, else
    /// the one `train run` would find (`eval_loss`, `val_loss`, ...). Never
    /// a training loss: a Trainer's `loss` lines come many times an epoch.
    pub fn objective<'a>(&'a self, expect: Option<&'a str>) -> Option<&'a str> {
        if expect.is_some() {
            return expect;
        }
        supervise::leg::FOUND_METRICS
            .into_iter()
            .find(|m| self.by.contains_key(*m))
    }

    /// The evaluations so far: the objective's reports.
    pub fn evaluations(&self, expect: Option<&str>) -> u64 {
        self.objective(expect)
            .and_then(|m| self.by.get(m))
            .map_or(0, |s| s.reports)
    }

    /// How far its reports got, in words: ` (up to epoch 0.625)`, a
    /// Trainer's fraction as it printed it; empty when none gave an epoch.
    pub fn how_far(&self) -> String {
        self.last_epoch
            .map_or(String::new(), |e| format!(" (up to epoch {e})"))
    }

    /// Whether its reports are a Hugging Face Trainer's: `loss` with
    /// `grad_norm` or `learning_rate` in dict lines.
    pub fn trainer(&self) -> bool {
        let dict = |m: &str| self.by.get(m).is_some_and(|s| s.source == Source::Dict);
        dict("loss") && (dict("grad_norm") || dict("learning_rate"))
    }

    /// The first non-finite report of the objective or of a loss (a
    /// gradient norm may be NaN at a step fp16's loss scaler skips: not a
    /// failure).
    pub fn non_finite(&self, expect: Option<&str>) -> Option<&str> {
        let epoch = self.objective(expect);
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
        "verify-fixes: smoke: pid {}, up to {} evaluation(s) or {} s; its output in {}",
        leg.pid(),
        p.evaluations,
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
        let evaluations = tally.evaluations(p.expect);
        if evaluations > said {
            said = evaluations;
            let at = tally
                .objective(p.expect)
                .and_then(|m| tally.by.get(m).map(|s| (m, s)))
                .map_or(String::new(), |(m, s)| {
                    let epoch = s.epoch.map_or(String::new(), |e| format!(" at epoch {e}"));
                    format!(" ({m}{epoch})")
                });
            common::say!("verify-fixes: smoke: evaluation {evaluations} reported{at}");
        }
        if stopped.is_none() {
            let why = if let Some(what) = tally.non_finite(p.expect) {
                Some(Why::NonFinite(what.to_string()))
            } else if evaluations >= p.evaluations {
                Some(Why::Evaluations(evaluations))
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
            at: None,
            source,
        }
    }

    #[test]
    fn evaluations_count_the_expected_metric_else_a_found_one_never_a_training_loss() {
        let mut t = Tally::default();
        t.add(&r("accuracy", 0.5, 1, Source::Dict));
        t.add(&r("train_loss", 0.9, 1, Source::EpochLine));
        assert_eq!(t.objective(None), None);
        assert_eq!(t.evaluations(None), 0);
        t.add(&r("val_loss", 0.8, 1, Source::EpochLine));
        t.add(&r("val_loss", 0.7, 2, Source::EpochLine));
        assert_eq!(t.objective(None), Some("val_loss"));
        assert_eq!(t.evaluations(None), 2);
        assert_eq!(t.evaluations(Some("accuracy")), 1);
        assert_eq!(t.evaluations(Some("eval_loss")), 0);
        // Hugging Face's Trainer's comes before Lightning's.
        t.add(&r("eval_loss", 0.7, 1, Source::Dict));
        assert_eq!(t.objective(None), Some("eval_loss"));
        assert_eq!(t.order, ["accuracy", "train_loss", "val_loss", "eval_loss"]);
        assert_eq!(t.by["val_loss"].last, Some(0.7));
        assert_eq!(t.by["accuracy"].source, Source::Dict);
    }

    #[test]
    fn a_trainers_loss_lines_are_not_evaluations_and_its_epoch_is_kept() {
        let mut t = Tally::default();
        for (i, e) in [0.125, 0.25, 0.375, 0.5, 0.625].into_iter().enumerate() {
            for name in ["loss", "grad_norm", "learning_rate"] {
                let mut x = r(name, 1.0, i as u64 + 1, Source::Dict);
                x.epoch = Some(e);
                t.add(&x);
            }
        }
        assert!(t.trainer());
        assert_eq!(t.evaluations(None), 0);
        assert_eq!(t.how_far(), " (up to epoch 0.625)");
        let mut x = r("eval_loss", 2.5, 1, Source::Dict);
        x.epoch = Some(1.0);
        t.add(&x);
        assert_eq!(
            (t.evaluations(None), t.by["eval_loss"].epoch),
            (1, Some(1.0))
        );
        let mut plain = Tally::default();
        plain.add(&r("loss", 1.0, 1, Source::Pairs));
        assert!(!plain.trainer());
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
