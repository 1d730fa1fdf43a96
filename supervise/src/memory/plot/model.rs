//! What memory.png shows, apart from drawing it: the samples of
//! memory.csv, the peaks (value and time), and the spans between reports of
//! the metric (one per epoch or evaluation), each with its highest PSS, so
//! that where memory went per epoch reads off the picture.

/// One row of memory.csv (supervise-memory/v1 or v2), the whole tree's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub seconds: f64,
    pub pss_mib: f64,
    pub rss_mib: f64,
    pub gpu_mib: Option<f64>,
}

/// memory.csv's rows of the whole tree (a rank's rows, v2's with a
/// `rank`, are left out); a row that does not parse is left out (a killed
/// supervisor's last line may be cut).
pub fn samples(csv: &str) -> Vec<Sample> {
    csv.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            if f.get(5).is_some_and(|r| !r.trim().is_empty()) {
                return None;
            }
            let n = |i: usize| f.get(i).and_then(|v| v.trim().parse::<f64>().ok());
            Some(Sample {
                seconds: n(0)?,
                pss_mib: n(1)?,
                rss_mib: n(2)?,
                gpu_mib: n(4),
            })
        })
        .collect()
}

/// A peak: its value and when it was sampled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peak {
    pub seconds: f64,
    pub mib: f64,
}

/// The time from one report of the metric to the next: an epoch (or
/// whatever the program reports at).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub start: f64,
    pub end: f64,
    /// The step of the report that ends it.
    pub step: u64,
    /// The highest PSS sampled in it (from the last sample at or before
    /// its start to its end): a leak shows as numbers that keep rising.
    pub pss_mib: f64,
    /// Whether its label is drawn: at most [`MAX_LABELS`] are, each with
    /// [`MIN_LABELLED`] of the axis for it.
    pub labelled: bool,
}

pub const MAX_LABELS: usize = 12;
/// The narrowest span labelled, as a share of the axis: its label's room.
pub const MIN_LABELLED: f64 = 0.05;

/// The picture's content.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryPlot {
    pub samples: Vec<Sample>,
    /// The x axis' end (seconds) and the y axis' top (MiB, from 0, with
    /// room above the highest line for the labels).
    pub end: f64,
    pub top: f64,
    pub pss_peak: Peak,
    pub rss_peak: Peak,
    pub gpu_peak: Option<Peak>,
    /// The start-up's end: the first line the command printed or its first
    /// report of any metric, else the first mark. Not the first report of
    /// the metric: a Hugging Face run's first evaluation may come at its
    /// end, after minutes of training steps.
    pub startup_end: Option<f64>,
    /// Each report's time (a grey mark).
    pub reports: Vec<f64>,
    /// One per report after the first, in order; reports at the same time
    /// make one span.
    pub spans: Vec<Span>,
}

fn peak(samples: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<Peak> {
    samples
        .iter()
        .filter_map(|s| {
            f(s).map(|mib| Peak {
                seconds: s.seconds,
                mib,
            })
        })
        .reduce(|a, b| if b.mib > a.mib { b } else { a })
}

/// The highest PSS from the last sample at or before `start` (memory held
/// then is held in the span) to `end`.
fn highest_pss(samples: &[Sample], start: f64, end: f64) -> f64 {
    let from = samples
        .partition_point(|s| s.seconds <= start)
        .saturating_sub(1);
    samples[from..]
        .iter()
        .take_while(|s| s.seconds <= end)
        .map(|s| s.pss_mib)
        .fold(0.0, f64::max)
}

impl MemoryPlot {
    /// The plot of `samples` with `marks`, each report of the metric as
    /// (seconds, step), and `startup`, the seconds to the command's first
    /// output line or report; None without samples.
    pub fn of(
        mut samples: Vec<Sample>,
        marks: &[(f64, u64)],
        startup: Option<f64>,
    ) -> Option<MemoryPlot> {
        samples.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        let pss_peak = peak(&samples, |s| Some(s.pss_mib))?;
        let rss_peak = peak(&samples, |s| Some(s.rss_mib))?;
        let gpu_peak = peak(&samples, |s| s.gpu_mib);
        let last = samples.last().map_or(0.0, |s| s.seconds);
        let end = marks.iter().map(|m| m.0).fold(last, f64::max).max(0.5);
        let highest = pss_peak
            .mib
            .max(rss_peak.mib)
            .max(gpu_peak.map_or(0.0, |g| g.mib))
            .max(1.0);
        let mut marks = marks.to_vec();
        marks.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut spans: Vec<Span> = Vec::new();
        for w in marks.windows(2) {
            let ((start, _), (end, step)) = (w[0], w[1]);
            match spans.last_mut() {
                // A report at the same time as the one before: one span.
                Some(s) if end == s.end => s.step = step,
                _ if end == start => {}
                _ => spans.push(Span {
                    start,
                    end,
                    step,
                    pss_mib: highest_pss(&samples, start, end),
                    labelled: false,
                }),
            }
        }
        label(&mut spans, end);
        Some(MemoryPlot {
            samples,
            end,
            top: highest * 1.3,
            pss_peak,
            rss_peak,
            gpu_peak,
            startup_end: [startup, marks.first().map(|m| m.0)]
                .into_iter()
                .flatten()
                .reduce(f64::min),
            reports: marks.iter().map(|m| m.0).collect(),
            spans,
        })
    }
}

/// Chooses the spans whose labels are drawn: every k-th counted from the
/// last (where a run ended), so that at most [`MAX_LABELS`] are, and of
/// those the ones with room for their label (their width, times k: the
/// spans between two labels are unnamed).
fn label(spans: &mut [Span], axis: f64) {
    let every = spans.len().div_ceil(MAX_LABELS).max(1);
    let n = spans.len();
    for (i, s) in spans.iter_mut().enumerate() {
        s.labelled =
            (n - 1 - i) % every == 0 && (s.end - s.start) * every as f64 >= axis * MIN_LABELLED;
    }
}

/// Seconds as the axis labels them: in tenths (hundredths under 2 s),
/// without trailing zeros: 0, 0.5, 1, 1.5.
pub fn seconds(v: f64, end: f64) -> String {
    let text = if end < 2.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    };
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run as memory.csv records it: a start-up ramp, then epochs whose
    /// memory rises by 10 MiB each (a leak), with a spike at 4.2 s.
    fn csv() -> String {
        let mut text = String::from("seconds,host_pss_mib,host_rss_mib,processes,gpu_mib\n");
        let pss = |t: f64| {
            if t < 2.0 {
                t * 200.0
            } else if (t - 4.2).abs() < 1e-9 {
                900.0
            } else {
                400.0 + 10.0 * (t - 2.0).floor()
            }
        };
        for i in 0..=16 {
            let t = i as f64 * 0.5;
            text += &format!("{t},{},{},1,\n", pss(t), pss(t) + 100.0);
        }
        // Out of order: the plot orders its samples.
        text += "4.2,900,1000,2,\n";
        text += "8.5,41"; // cut by a kill: left out
        text
    }

    #[test]
    fn the_peak_is_named_with_its_time() {
        let p = MemoryPlot::of(samples(&csv()), &[], None).unwrap();
        assert_eq!(p.samples.len(), 18, "the cut row is left out");
        assert_eq!(
            p.pss_peak,
            Peak {
                seconds: 4.2,
                mib: 900.0
            }
        );
        assert_eq!(
            p.rss_peak,
            Peak {
                seconds: 4.2,
                mib: 1000.0
            }
        );
        assert_eq!(p.gpu_peak, None);
        // From 0, with room above the highest line for the labels.
        assert!(p.top > 1000.0, "{}", p.top);
        assert_eq!(p.end, 8.0);
        assert!(p.spans.is_empty() && p.startup_end.is_none());
        assert_eq!(MemoryPlot::of(Vec::new(), &[(1.0, 1)], None), None);
    }

    #[test]
    fn each_span_between_reports_has_its_step_and_highest_memory() {
        let marks = [(2.0, 1), (3.0, 2), (4.0, 3), (5.0, 4), (5.0, 5), (7.0, 6)];
        let p = MemoryPlot::of(samples(&csv()), &marks, None).unwrap();
        assert_eq!(p.startup_end, Some(2.0));
        assert_eq!(p.reports.len(), 6);
        let got: Vec<(f64, f64, u64, f64)> = p
            .spans
            .iter()
            .map(|s| (s.start, s.end, s.step, s.pss_mib))
            .collect();
        // The leak reads off the spans; the spike is in step 4's; two
        // reports at 5.0 s make one span, named by the later.
        assert_eq!(
            got,
            [
                (2.0, 3.0, 2, 410.0),
                (3.0, 4.0, 3, 420.0),
                (4.0, 5.0, 5, 900.0),
                (5.0, 7.0, 6, 450.0),
            ]
        );
        assert!(p.spans.iter().all(|s| s.labelled));
    }

    #[test]
    fn labels_are_few_and_the_last_span_keeps_its_own() {
        let text: String =
            std::iter::once("seconds,host_pss_mib,host_rss_mib,processes,gpu_mib\n".to_string())
                .chain((0..=1000).map(|i| format!("{},{},{},1,7\n", i as f64 * 0.1, 300, 310)))
                .collect();
        let marks: Vec<(f64, u64)> = (1..=100).map(|i| (i as f64, i)).collect();
        let p = MemoryPlot::of(samples(&text), &marks, None).unwrap();
        assert_eq!(p.spans.len(), 99);
        let named: Vec<u64> = p
            .spans
            .iter()
            .filter(|s| s.labelled)
            .map(|s| s.step)
            .collect();
        assert!(
            named.len() <= MAX_LABELS && named.len() >= MAX_LABELS / 2,
            "{named:?}"
        );
        assert_eq!(named.last(), Some(&100));
        assert_eq!(p.gpu_peak.map(|g| g.mib), Some(7.0));
        // A span too narrow for its label goes unnamed.
        let p = MemoryPlot::of(samples(&text), &[(10.0, 1), (10.1, 2), (50.0, 3)], None).unwrap();
        let named: Vec<bool> = p.spans.iter().map(|s| s.labelled).collect();
        assert_eq!(named, [false, true]);
    }

    #[test]
    fn the_start_up_ends_at_the_first_line_not_the_first_report_of_the_metric() {
        // A Hugging Face run: its first loss line at 8 s, its only
        // evaluation at 93 s, its end.
        let text: String =
            std::iter::once("seconds,host_pss_mib,host_rss_mib,processes,gpu_mib\n".to_string())
                .chain((0..=186).map(|i| format!("{},{},{},1,\n", i as f64 * 0.5, 600, 700)))
                .collect();
        let p = MemoryPlot::of(samples(&text), &[(93.0, 1)], Some(8.0)).unwrap();
        assert_eq!(p.startup_end, Some(8.0));
        assert_eq!(p.reports, [93.0]);
        // A first line after the first report (a script that reports
        // through metrics.csv and prints later) does not move it back.
        let p = MemoryPlot::of(samples(&text), &[(5.0, 1), (93.0, 2)], Some(8.0)).unwrap();
        assert_eq!(p.startup_end, Some(5.0));
        // Output but no report of the metric: its start-up still ends.
        let p = MemoryPlot::of(samples(&text), &[], Some(3.5)).unwrap();
        assert_eq!(p.startup_end, Some(3.5));
    }

    #[test]
    fn a_ranks_rows_are_not_the_whole_trees() {
        let text = "seconds,host_pss_mib,host_rss_mib,processes,gpu_mib,rank
0.500,1500.0,2600.0,3,,
0.500,700.5,1200.0,1,,0
0.500,690.0,1190.0,1,,1
1.000,1510.0,2610.0,3,,
";
        let s = samples(text);
        assert_eq!(
            s.iter().map(|s| s.pss_mib).collect::<Vec<_>>(),
            [1500.0, 1510.0]
        );
    }

    #[test]
    fn seconds_are_labelled_without_trailing_zeros() {
        let labels = |end: f64, ticks: &[f64]| -> Vec<String> {
            ticks.iter().map(|&v| seconds(v, end)).collect()
        };
        assert_eq!(labels(5.2, &[0.0, 0.5, 1.0, 4.5]), ["0", "0.5", "1", "4.5"]);
        assert_eq!(labels(50.0, &[0.0, 10.0, 20.0]), ["0", "10", "20"]);
        assert_eq!(labels(0.3, &[0.05, 0.1, 0.25]), ["0.05", "0.1", "0.25"]);
    }
}
