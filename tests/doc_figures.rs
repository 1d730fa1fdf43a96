//! The figures the guide and bench/README quote from a benchmark's run are
//! that run's: each is computed here from the committed results file and
//! must appear in the text, so re-running the benchmark without updating
//! the documents (or the other way round) fails here.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `bench/results/wheel_install.csv` (bench/wheel_install.py): its rows as
/// (path, column -> value).
fn wheel_install() -> Vec<(String, std::collections::HashMap<String, String>)> {
    let text = read("bench/results/wheel_install.csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            let row = header
                .iter()
                .zip(&cells)
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect();
            (cells[0].to_string(), row)
        })
        .collect()
}

fn number(row: &std::collections::HashMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|e| panic!("{key} = {:?}: {e}", row[key]))
}

fn must_say(path: &str, figure: &str) {
    let text = read(path);
    assert!(
        text.contains(figure),
        "{path} does not quote \"{figure}\" from bench/results/wheel_install.csv: update the document or re-run `just bench-wheel`"
    );
}

#[test]
fn the_wheels_figures_are_the_last_runs() {
    let rows = wheel_install();
    let wheels: Vec<_> = rows.iter().filter(|(p, _)| p == "wheel").collect();
    assert!(!wheels.is_empty(), "no wheel rows");
    let mib = |bytes: f64| format!("{:.1} MiB", bytes / 1048576.0);
    let size = mib(number(&wheels[0].1, "wheel_bytes"));
    let installed = mib(number(&wheels[0].1, "installed_bytes"));
    let mut totals: Vec<f64> = wheels.iter().map(|(_, r)| number(r, "total_s")).collect();
    totals.sort_by(f64::total_cmp);
    let median = totals[totals.len() / 2];
    must_say(
        "docs/guide/install.md",
        &format!("{median:.0} s from a fresh venv to a running memdiag; {size}"),
    );
    must_say(
        "bench/README.md",
        &format!("{size}, the four binaries {installed}"),
    );
    if let Some((_, source)) = rows.iter().find(|(p, _)| p == "source build") {
        let cpu = number(source, "cpu_s");
        must_say(
            "docs/guide/install.md",
            &format!("{cpu:.0} CPU seconds of compiling"),
        );
    }
}

/// A results CSV's rows as column -> value.
/// bench/README.md with every run of white space as one space (lines wrap).
fn bench_readme() -> String {
    read("bench/README.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The sum of `key` over the rows of one `memory_model` arm.
fn sum_by_arm(rows: &[std::collections::HashMap<String, String>], arm: &str, key: &str) -> f64 {
    rows.iter()
        .filter(|r| r["memory_model"] == arm)
        .map(|r| number(r, key))
        .sum()
}

fn rows_of(path: &str) -> Vec<std::collections::HashMap<String, String>> {
    csv::Reader::from_reader(read(path).as_bytes())
        .deserialize()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_memory_models_figures_are_the_last_runs() {
    let rows = rows_of("bench/results/memory_model.csv");
    let total = |arm: &str, key: &str| sum_by_arm(&rows, arm, key);
    let (before, off, on) = (
        total("before", "ran_out_of_memory"),
        total("off", "ran_out_of_memory"),
        total("on", "ran_out_of_memory"),
    );
    let (refused, fit) = (total("on", "refused"), total("on", "refused_that_fit"));
    let path = "bench/README.md";
    // Compared with every run of white space as one space: lines wrap.
    let flat = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = flat(&read(path));
    let say = |figure: String| {
        assert!(
            text.contains(&flat(&figure)),
            "{path} does not quote \"{figure}\" from bench/results/memory_model.csv: update it or re-run bench/memory_model.py"
        )
    };
    say(format!(
        "| before issue 43 (TPE blind to out-of-memory trials) | {before} |"
    ));
    say(format!(
        "| `memory_model: false` (TPE ranks them infeasible) | {off} |"
    ));
    say(format!("| memory model on | {on} | {refused} | {fit} |"));
    say(format!(
        "{:.0}% fewer trials ran out of memory than before issue 43 ({:.0}% fewer",
        100.0 * (1.0 - on / before),
        100.0 * (1.0 - on / off)
    ));
}

#[test]
fn the_packing_figures_are_the_last_runs() {
    let rows = rows_of("bench/results/packing.csv");
    let rates = |by: &str| -> Vec<f64> {
        rows.iter()
            .filter(|r| r["packed_by"] == by)
            .map(|r| number(r, "trials_per_hour"))
            .collect()
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (largest, predicted) = (rates("largest peak"), rates("prediction"));
    let ratios: Vec<f64> = largest.iter().zip(&predicted).map(|(l, p)| p / l).collect();
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), r| (a.min(*r), b.max(*r)));
    let (ml, mp) = (median(largest), median(predicted));
    let text = bench_readme();
    for figure in [
        format!("| packed by the largest peak | {ml:.0} |"),
        format!("| packed by each point's predicted peak | {mp:.0} |"),
        format!(
            "{:.2}x the trials per hour (per seed {lo:.2}x to {hi:.2}x)",
            mp / ml
        ),
    ] {
        assert!(
            text.contains(&figure),
            "bench/README.md does not quote \"{figure}\" from bench/results/packing.csv: update it or re-run bench/packing.py"
        );
    }
}

#[test]
fn the_trainer_memory_models_figures_are_the_last_runs() {
    let rows = rows_of("bench/results/memory_model_hf.csv");
    let total = |arm: &str, key: &str| sum_by_arm(&rows, arm, key);
    let (before, on) = (
        total("before", "ran_out_of_memory"),
        total("on", "ran_out_of_memory"),
    );
    let (refused, fit) = (total("on", "refused"), total("on", "refused_that_fit"));
    let text = bench_readme();
    for figure in [
        format!("| before issue 43 | {before} | 0 | 0 |"),
        format!("| memory model on | {on} | {refused} | {fit} |"),
        format!(
            "{:.0}% fewer trials ran out of memory with the model",
            100.0 * (1.0 - on / before)
        ),
    ] {
        assert!(
            text.contains(&figure),
            "bench/README.md does not quote \"{figure}\" from bench/results/memory_model_hf.csv: update it or re-run bench/memory_model.py --hf"
        );
    }
}

#[test]
fn the_auto_fix_memory_models_figures_are_the_last_runs() {
    let rows = rows_of("bench/results/memory_model_autofix.csv");
    let total = |arm: &str, key: &str| sum_by_arm(&rows, arm, key);
    let (a0, a1) = (total("off", "attempts"), total("on", "attempts"));
    let (n0, n1) = (total("off", "trials"), total("on", "trials"));
    let (o0, o1) = (
        total("off", "ran_out_of_memory"),
        total("on", "ran_out_of_memory"),
    );
    let fixed = total("on", "fixed_before_start");
    let text = bench_readme();
    for figure in [
        format!("| `memory_model: false` | {n0} | {a0} | {o0} | 0 |"),
        format!("| memory model on | {n1} | {a1} | {o1} | {fixed} |"),
        format!(
            "{:.0}% fewer attempts in all, {:.0}% fewer after the first",
            100.0 * (1.0 - a1 / a0),
            100.0 * (1.0 - (a1 - n1) / (a0 - n0))
        ),
    ] {
        assert!(
            text.contains(&figure),
            "bench/README.md does not quote \"{figure}\" from bench/results/memory_model_autofix.csv: update it or re-run bench/memory_model.py --auto-fix"
        );
    }
}

/// The table row of bench/README.md that holds `cells` followed by one of
/// `then` (so that 1.3 is not read as 1.31).
fn row_with(cells: &str, then: &[&str]) -> Option<String> {
    read("bench/README.md")
        .lines()
        .map(str::to_owned)
        .find(|l| {
            l.split_once(cells)
                .is_some_and(|(_, rest)| then.iter().any(|t| rest.starts_with(t)))
        })
}

#[test]
fn the_large_study_figures_are_the_last_runs() {
    let rows = rows_of("bench/results/report_scale.csv");
    for r in &rows {
        let by = match r["written_by"].as_str() {
            "train sweep" => "`train sweep`",
            other => other,
        };
        let reader = match r["reader"].as_str() {
            "train sweep --report (json)" => "`--report`".to_string(),
            "train sweep --status" => "`--status`".to_string(),
            // The whole report of a larger sweep directory: no "before".
            "train sweep --report DIR (with objective.png)" => {
                let figure = format!(
                    "| `--report DIR`, objective.png included | {}",
                    r["seconds"]
                );
                let rss = format!("| {}", r["peak_rss_mib"]);
                assert!(
                    row_with(&figure, &[" (", " |"]).is_some_and(|l| l.contains(&rss)),
                    "bench/README.md does not quote \"{figure}\" from bench/results/report_scale.csv: update it or re-run bench/report_scale.py"
                );
                continue;
            }
            _ => "Optuna `load_study().trials`".to_string(),
        };
        // Seconds, then an earlier run's in parentheses where there was one.
        let figure = format!("| {by} | {reader} | {}", r["seconds"]);
        let rss = format!("| {}", r["peak_rss_mib"]);
        assert!(
            row_with(&figure, &[" (", " |"]).is_some_and(|l| l.contains(&rss)),
            "bench/README.md does not quote \"{figure} ... {rss}\" from bench/results/report_scale.csv: update it or re-run bench/report_scale.py"
        );
    }
}

#[test]
fn the_driver_scale_and_tpe_window_figures_are_the_last_runs() {
    let text = bench_readme();
    for r in rows_of("bench/results/sweep_scale.csv") {
        let n: u64 = r["study_trials"].parse().unwrap();
        let shown = match n {
            1000.. => format!("{},{:03}", n / 1000, n % 1000),
            _ => n.to_string(),
        };
        let figure = format!("| {shown} | {}", r["driver_cpu_ms_per_trial"]);
        let rest = format!(
            "| {} | {} | {} ",
            r["start_cpu_s"], r["whole_run_cpu_ms_per_trial"], r["driver_peak_rss_mib"]
        );
        assert!(
            row_with(&figure, &[" (", " |"]).is_some_and(|l| l.contains(&rest)),
            "bench/README.md does not quote \"{figure} ... {rest}\" from bench/results/sweep_scale.csv: update it or re-run bench/sweep_scale.py"
        );
    }
    // The window's table is the results file's, row for row.
    let md = read("bench/results/tpe_window.md");
    for row in md
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| objective"))
    {
        assert!(
            text.contains(row),
            "bench/README.md does not quote \"{row}\" from bench/results/tpe_window.md: update it or re-run bench/tpe_window.py"
        );
    }
}
