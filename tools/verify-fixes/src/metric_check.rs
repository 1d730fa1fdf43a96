//! The command form's metric check: what the smoke read, by which reader;
//! that the metric a sweep ranks by came (an evaluation, not the training
//! loss) within the smoke's time, and how to make it come sooner; finite;
//! and for output no reader read, a regex made from its lines, shown only
//! when it reads the line it was made from.

use crate::command::{Gate, FORM};
use crate::rows::{Check, Status};
use crate::smoke::{Ran, Tally, Why};
use common::wire::run_dir::RunDir;
use supervise::leg::FOUND_METRICS;
use supervise::readers::suggest as regex_suggest;

/// The output lines a regex is looked for in (the latest).
const SUGGEST_FROM: usize = 200;

impl Gate<'_> {
    pub(crate) fn metric(&self, ran: &Ran) -> Check {
        let id = "metric";
        let t = &ran.tally;
        if t.order.is_empty() {
            return self.no_metric(ran);
        }
        let failed = !(ran.stopped.is_some() || ran.ended.leg.exit_code == Some(0));
        let timed_out = matches!(ran.stopped, Some(Why::Time(_)));
        let read = t.order.join(", ");
        let Some(main) = t.objective(self.expect) else {
            if failed {
                return FORM.row(
                    id,
                    Status::Skip,
                    format!("no evaluation before the command failed (see the command check); read {read}"),
                    None,
                );
            }
            let none_of = format!(
                "none of {} (the metrics train run and a sweep rank by when none is named)",
                FOUND_METRICS.join(", ")
            );
            return if timed_out {
                FORM.row(
                    id,
                    Status::Fail,
                    format!(
                        "no evaluation in {:.1} s: {none_of} was reported before --smoke-seconds ran out{}; read {read}",
                        ran.ended.leg.seconds,
                        t.how_far()
                    ),
                    Some(self.sooner(t)),
                )
            } else {
                FORM.row(
                    id,
                    Status::Fail,
                    format!("{none_of} was reported; read {read}"),
                    Some(format!(
                        "report a validation metric (`{{\"epoch\": 1, \"val_loss\": 0.41}}`), or name the one to rank by, e.g. --expect-metric {}",
                        t.order[0]
                    )),
                )
            };
        };
        let others: Vec<String> = t
            .order
            .iter()
            .filter(|m| m.as_str() != main)
            .map(|m| describe(t, m))
            .collect();
        let also = if others.is_empty() {
            String::new()
        } else {
            format!("; also {}", others.join(", "))
        };
        if !t.by.contains_key(main) {
            let (why, fix) = if timed_out {
                (
                    format!(" before --smoke-seconds ran out{}", t.how_far()),
                    self.sooner(t),
                )
            } else {
                (
                    String::new(),
                    format!(
                        "report {main} in a line per evaluation, or expect one that is read, e.g. --expect-metric {}",
                        t.order[0]
                    ),
                )
            };
            return FORM.row(
                id,
                Status::Fail,
                format!("no report of {main} (--expect-metric){why}; read {read}"),
                Some(fix),
            );
        }
        if let Some(what) = t.non_finite(self.expect) {
            let fix = diagnose::failures::KNOWN
                .iter()
                .find(|k| k.class == common::wire::failure::Class::NonFiniteLoss)
                .map(|k| k.program_fix.to_string());
            return FORM.row(
                id,
                Status::Fail,
                format!(
                    "{what}: a non-finite value; read {}{also}",
                    describe(t, main)
                ),
                fix,
            );
        }
        let evaluations = t.evaluations(self.expect);
        if timed_out && evaluations < self.evaluations {
            return FORM.row(
                id,
                Status::Fail,
                format!(
                    "{evaluations} evaluation(s) in {:.1} s, not {} (--smoke-epochs): a crash that comes only after the first evaluation (CUDA graphs with gradient checkpointing) would not be seen; read {}{also}",
                    ran.ended.leg.seconds,
                    self.evaluations,
                    describe(t, main)
                ),
                Some(self.sooner(t)),
            );
        }
        FORM.row(
            id,
            Status::Pass,
            format!("{}{also}", describe(t, main)),
            None,
        )
    }

    /// How to get an evaluation within the smoke's time.
    fn sooner(&self, t: &Tally) -> String {
        let trainer = t.trainer()
            || self
                .argv
                .iter()
                .any(|w| w.contains("eval_strategy") || w.contains("evaluation_strategy"));
        let how = if trainer {
            "make it evaluate sooner for the smoke: a Hugging Face Trainer script takes --eval_strategy steps --eval_steps N (N a few of its logging steps)"
        } else {
            "make it report its validation metric sooner for the smoke (evaluate every N steps, or on a smaller dataset)"
        };
        format!("{how}; or a longer --smoke-seconds")
    }

    /// The metric check when no metric was read: skipped when the command
    /// failed, else failed, with a regex for the metric when one made from
    /// a line of its output reads that line back.
    fn no_metric(&self, ran: &Ran) -> Check {
        let id = "metric";
        if !(ran.stopped.is_some() || ran.ended.leg.exit_code == Some(0)) {
            return FORM.row(
                id,
                Status::Skip,
                "none read before the command failed (see the command check)",
                None,
            );
        }
        let print = "print one line per evaluation: `epoch 1: val_loss=0.41`, `Epoch 1/10 | Val Loss: 0.41` or `{\"epoch\": 1, \"val_loss\": 0.41}`";
        let fix = match self.suggestion() {
            Some(s) => format!(
                "{print}; or name the metric and a regex that reads it from its line, e.g. --expect-metric {} --metric-regex '{}' (it reads {} from `{}`; to `train run`: --metric ... --metric-regex ...; in a sweep's space: metric.regex)",
                s.metric, s.regex, s.value, s.line.trim()
            ),
            None => format!(
                "{print}; or name the metric with --expect-metric and give --metric-regex a regular expression with one group around its value"
            ),
        };
        let fix = if matches!(ran.stopped, Some(Why::Time(_))) {
            format!("{fix}; or a longer --smoke-seconds, if it reports later")
        } else {
            fix
        };
        FORM.row(
            id,
            Status::Fail,
            format!(
                "no metric read in {:.1} s: no epoch line, JSON or dict line, name=value pair of a metric it knows{}, or $TRAINGUARD_METRICS_CSV row in its output, so a sweep would see nothing",
                ran.ended.leg.seconds,
                if self.regex.is_some() { ", --metric-regex match" } else { "" }
            ),
            Some(fix),
        )
    }

    /// A regex for the metric, from the latest lines of the smoke's output.
    fn suggestion(&self) -> Option<regex_suggest::Suggestion> {
        let log = std::fs::read(RunDir::new(self.dir).output_log()).ok()?;
        let text = String::from_utf8_lossy(&log);
        let lines: Vec<String> = text.lines().map(String::from).collect();
        let from = lines.len().saturating_sub(SUGGEST_FROM);
        regex_suggest::regex_for(&lines[from..], self.expect)
    }
}

/// A metric as read: its reader, reports and last value.
fn describe(t: &Tally, m: &str) -> String {
    let s = &t.by[m];
    format!(
        "{m} by {} ({} report(s){})",
        s.source.as_str(),
        s.reports,
        s.last.map_or(String::new(), |v| format!(", last {v}"))
    )
}
