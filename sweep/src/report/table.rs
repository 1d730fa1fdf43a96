//! `--report`'s table and CSV.
//!
//! Column names follow one rule (sweep-report/v2): a parameter's column is
//! `params_<name>`, as Optuna's `trials_dataframe()` names it, and no
//! column of ours starts with `params_`, so a user's `epochs` parameter and
//! our `epochs` column never share a name, whatever later versions add.
//!
//! Numbers: the CSV keeps every digit (it is for programs, and the values
//! are the exact ones Optuna holds); the table shows each float column with
//! as few significant digits as tell its values apart, at least 4, as
//! Optuna's dashboard shows what distinguishes trials rather than 17 digits.

use super::trials_words;
use common::wire::run_dir;
use common::wire::sweep::{Row, SweepReport};
use serde_json::Value;
use std::io::Write;

/// What a parameter's column name starts with.
pub(crate) const PARAM_PREFIX: &str = "params_";

/// The sweep's own CSV columns before and after the parameters', then
/// `discarded`, `attempts` and the predicted peak where some trial has
/// them.
const CSV_BEFORE: [&str; 3] = ["number", "state", "error_class"];
const CSV_AFTER: [&str; 6] = [
    "value",
    "epochs",
    "seconds",
    "peak_memory_mib",
    "peak_memory_of",
    "peak_gpu_mib",
];
const CSV_OPTIONAL: [&str; 4] = [
    "discarded",
    "attempts",
    "predicted_peak_mib",
    "predicted_of",
];

/// The fewest significant digits the table shows of a float.
const MIN_DIGITS: usize = 4;
/// Enough to tell any two different f64 apart.
const MAX_DIGITS: usize = 17;

fn param_names(r: &SweepReport) -> Vec<String> {
    let mut names: Vec<String> = r
        .trials
        .iter()
        .flat_map(|t| t.params.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Coefficients smaller than this say a term does not move memory (a
/// log term's power: doubling the value changes the peak by under 4%).
const NO_BEARING: f64 = 0.05;

/// The memory model's line: how far off it was, what the peak follows,
/// what does not move it, what it refused.
fn model_line(m: &common::wire::sweep::ModelError) -> String {
    let mut line = format!(
        "memory model: peaks predicted within {:.1}% of the measured (median, {} trial(s))",
        m.median_error * 100.0,
        m.trials
    );
    let (mut moves, mut not) = (Vec::new(), Vec::new());
    for e in &m.effects {
        let c = e.coefficient;
        if c.abs() < NO_BEARING {
            not.push(e.term.trim_start_matches("ln ").to_string());
        } else if let Some(name) = e.term.strip_prefix("ln ") {
            moves.push(format!("{name}^{c:.2}"));
        } else if e.term.contains('=') {
            moves.push(format!("{} x{:.2}", e.term, c.exp()));
        } else {
            moves.push(format!("e^({c:.3} {})", e.term));
        }
    }
    if !moves.is_empty() {
        line.push_str(&format!("; peak follows {}", moves.join(" * ")));
    }
    if !not.is_empty() {
        line.push_str(&format!("; does not move memory: {}", not.join(", ")));
    }
    if m.refused > 0 {
        line.push_str(&format!(
            "; {} point(s) not run, predicted not to fit",
            m.refused
        ));
    }
    line
}

fn column(name: &str) -> String {
    format!("{PARAM_PREFIX}{name}")
}

/// The significant digits that tell `values` apart: the fewest, from
/// MIN_DIGITS, at which no two different values print alike.
pub(crate) fn digits(values: &[f64]) -> usize {
    let mut distinct: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    // Rounding keeps the order, so only neighbours can print alike.
    (MIN_DIGITS..MAX_DIGITS)
        .find(|&d| {
            distinct
                .windows(2)
                .all(|w| short(w[0], d) != short(w[1], d))
        })
        .unwrap_or(MAX_DIGITS)
}

/// `v` to `d` significant digits in its shortest form (no trailing
/// zeros): plain from 1e-4 to 1e7, else with an exponent.
pub(crate) fn short(v: f64, d: usize) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let r: f64 = format!("{:.*e}", d.max(1) - 1, v).parse().unwrap_or(v);
    if r == 0.0 {
        "0".into()
    } else if (1e-4..1e7).contains(&r.abs()) {
        format!("{r}")
    } else {
        format!("{r:e}")
    }
}

/// A float of a parameter's JSON (its integers and choices are not).
fn float_of(v: &Value) -> Option<f64> {
    v.is_f64().then(|| v.as_f64()).flatten()
}

/// Each parameter's digits in the table, in `names`' order.
fn param_digits(r: &SweepReport, names: &[String]) -> Vec<usize> {
    names
        .iter()
        .map(|n| {
            let floats: Vec<f64> = r
                .trials
                .iter()
                .filter_map(|t| t.params.get(n).and_then(float_of))
                .collect();
            digits(&floats)
        })
        .collect()
}

/// The objective's digits in the table (and its best line).
fn value_digits(r: &SweepReport) -> usize {
    let values: Vec<f64> = r.trials.iter().filter_map(|t| t.value).collect();
    digits(&values)
}

/// A CSV cell: every digit.
fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// A table cell: a float to `digits`.
fn shown(v: Option<&Value>, digits: usize) -> String {
    match v.and_then(float_of) {
        Some(f) => short(f, digits),
        None => cell(v),
    }
}

/// The CSV's header: ours around the parameters' `params_<name>`.
/// Which optional columns the CSV has: [discarded, attempts, predicted].
fn optional(r: &SweepReport) -> [bool; 3] {
    [
        r.trials.iter().any(|t| t.discarded),
        r.trials.iter().any(|t| t.attempts.is_some()),
        r.trials.iter().any(|t| t.predicted_peak_mib.is_some()),
    ]
}

fn csv_header(names: &[String], [discards, attempts, predicted]: [bool; 3]) -> Vec<String> {
    let mut header: Vec<String> = CSV_BEFORE.map(String::from).to_vec();
    header.extend(names.iter().map(|n| column(n)));
    header.extend(CSV_AFTER.map(String::from));
    if discards {
        header.push(CSV_OPTIONAL[0].into());
    }
    if attempts {
        header.push(CSV_OPTIONAL[1].into());
    }
    if predicted {
        header.extend(CSV_OPTIONAL[2..].iter().map(|c| c.to_string()));
    }
    header
}

pub(super) fn write_csv(r: &SweepReport, w: &mut dyn Write) -> anyhow::Result<()> {
    let names = param_names(r);
    let mut csv = csv::Writer::from_writer(w);
    // Only journals with Rustuna's DISCARD_TRIALS records have the column;
    // only sweeps with `auto_fix` have `attempts`; only sweeps that
    // predicted a peak have the prediction.
    let has = optional(r);
    let [discards, attempts, predicted] = has;
    csv.write_record(csv_header(&names, has))?;
    for t in &r.trials {
        let mut rec = vec![
            t.number.to_string(),
            t.state.clone(),
            t.error_class.clone().unwrap_or_default(),
        ];
        rec.extend(names.iter().map(|n| cell(t.params.get(n))));
        let f = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        rec.extend([
            f(t.value),
            t.epochs.map(|e| e.to_string()).unwrap_or_default(),
            f(t.seconds),
            f(t.peak_memory_mib),
            t.peak_memory_of.clone().unwrap_or_default(),
            f(t.peak_gpu_mib),
        ]);
        if discards {
            rec.push(t.discarded.to_string());
        }
        if attempts {
            rec.push(t.attempts.map(|a| a.to_string()).unwrap_or_default());
        }
        if predicted {
            rec.push(f(t.predicted_peak_mib));
            rec.push(t.predicted_of.clone().unwrap_or_default());
        }
        csv.write_record(&rec)?;
    }
    csv.flush()?;
    Ok(())
}

pub(super) fn write_table(r: &SweepReport, w: &mut dyn Write) -> anyhow::Result<()> {
    use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
    let names = param_names(r);
    let digits = Digits {
        params: param_digits(r, &names),
        value: value_digits(r),
    };
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(140);
    let mut header: Vec<String> = vec!["#".into(), "state".into()];
    header.extend(names.iter().map(|n| column(n)));
    header.extend([
        r.metric.to_string(),
        "epochs".into(),
        "s".into(),
        "error".into(),
    ]);
    let attempts = r.trials.iter().any(|t| t.attempts.is_some());
    if attempts {
        header.push("attempts".into());
    }
    t.set_header(header);
    for row in &r.trials {
        let mut cells = trial_cells(row, &names, &digits);
        if attempts {
            cells.push(attempts_cell(row));
        }
        t.add_row(cells);
    }
    writeln!(w, "{t}")?;
    let counts: Vec<String> = r.counts.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let trials = r.trials.len() as u64;
    writeln!(
        w,
        "{}: {}",
        trials_words(trials, trials - r.points.min(trials)),
        counts.join(", ")
    )?;
    let discarded: Vec<u64> = r
        .trials
        .iter()
        .filter(|t| t.discarded)
        .map(|t| t.number)
        .collect();
    if !discarded.is_empty() {
        writeln!(
            w,
            "discarded by Rustuna: trial(s) {discarded:?} (Optuna keeps them, and so does the sweep: counted above)"
        )?;
    }
    match &r.best {
        Some(b) => writeln!(
            w,
            "best: trial {} with {} {} (config: {})",
            b.number,
            r.metric,
            b.value.map_or("NaN".into(), |v| short(v, digits.value)),
            run_dir::BEST_CONFIG
        )?,
        None => writeln!(w, "best: no complete trial")?,
    }
    if let Some(m) = &r.memory_model {
        writeln!(w, "{}", model_line(m))?;
    }
    if let Some(c) = &r.best_command {
        writeln!(
            w,
            "best command ({}): {}",
            run_dir::BEST_COMMAND,
            super::best::command_line(c)
        )?;
    }
    for g in &r.failures {
        let shared: Vec<String> = g.shared.iter().map(|(k, v)| format!("{k}={v}")).collect();
        // A group of one shares nothing with another: its values are its own.
        let line = match (g.trials.as_slice(), shared.is_empty()) {
            ([n], true) => format!("trial {n}"),
            ([n], false) => format!("trial {n}, which had {}", shared.join(", ")),
            (ns, true) => format!("{} trial(s) {ns:?}", ns.len()),
            (ns, false) => format!(
                "{} trial(s) {ns:?}; all had {}",
                ns.len(),
                shared.join(", ")
            ),
        };
        writeln!(w, "failed, {}: {line}", g.class)?;
    }
    Ok(())
}

/// The table's digits: each parameter's, and the objective's.
struct Digits {
    params: Vec<usize>,
    value: usize,
}

/// `2: batch 32, accumulation 2`: the attempts, and the batch settings
/// the last one ran with when a fix changed them.
fn attempts_cell(row: &Row) -> String {
    let n = row.attempts.unwrap_or(1);
    let knobs: Vec<String> = [
        "batch",
        "accumulation",
        "checkpointing",
        "compile_mode",
        "precision",
    ]
    .iter()
    .filter(|_| n > 1)
    .filter_map(|k| {
        let v = row.knobs.get(*k)?;
        Some(format!("{k} {}", v.split(' ').next().unwrap_or(v)))
    })
    .collect();
    if knobs.is_empty() {
        n.to_string()
    } else {
        format!("{n}: {}", knobs.join(", "))
    }
}

/// One trial's row of the `--report` table, in the header's order.
fn trial_cells(row: &Row, names: &[String], digits: &Digits) -> Vec<String> {
    let state = match row.discarded {
        true => format!("{} (discarded)", row.state),
        false => row.state.clone(),
    };
    let mut cells = vec![row.number.to_string(), state];
    cells.extend(
        names
            .iter()
            .zip(&digits.params)
            .map(|(n, d)| shown(row.params.get(n), *d)),
    );
    cells.extend([
        row.value
            .map(|v| short(v, digits.value))
            .unwrap_or_default(),
        row.epochs.map(|e| e.to_string()).unwrap_or_default(),
        row.seconds.map(|s| format!("{s:.1}")).unwrap_or_default(),
        match (&row.error_class, row.retried_from) {
            // A re-run: of an interrupted trial, a crowded one, a
            // device-side assert run with CUDA_LAUNCH_BLOCKING=1, or
            // one whose allocator broke.
            (Some(c), Some(f)) => format!("{c} (a re-run of #{f})"),
            (None, Some(f)) => format!("(a re-run of #{f})"),
            (c, None) => c.clone().unwrap_or_default(),
        },
    ]);
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::wire::Versioned;

    #[test]
    fn floats_show_what_tells_them_apart() {
        // Random draws: 4 digits tell them apart, not 17.
        let lr = [0.000_316_227_766_016_837_94, 0.001_234_567_890_123_456_7];
        assert_eq!(digits(&lr), 4);
        assert_eq!(short(lr[0], 4), "0.0003162");
        assert_eq!(short(lr[1], 4), "0.001235");
        // Close values take the digits that part them.
        assert_eq!(digits(&[0.123_456_1, 0.123_456_2, 0.123_456_1]), 7);
        assert_eq!(short(0.123_456_2, 7), "0.1234562");
        // A grid's values stay as written; tiny and huge ones get an exponent.
        assert_eq!(short(0.001, 4), "0.001");
        assert_eq!(short(3.0, 4), "3");
        assert_eq!(short(1.234_567e-7, 4), "1.235e-7");
        assert_eq!(short(2.5e9, 4), "2.5e9");
        assert_eq!(short(0.0, 4), "0");
        assert_eq!(short(f64::NAN, 4), "NaN");
        // Values 17 digits apart at most: 17.
        assert_eq!(digits(&[0.1 + 0.2, 0.3]), 17);
        assert_eq!(digits(&[]), MIN_DIGITS);
    }

    /// A report of one trial whose parameters are named like our columns.
    fn clashing() -> SweepReport {
        let mut r = SweepReport::example();
        let row = &mut r.trials[0];
        row.params = [
            ("epochs", Value::from(5)),
            ("value", Value::from(0.000_316_227_766_016_837_94)),
            ("state", Value::from("on")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        r
    }

    #[test]
    fn parameters_never_share_a_name_with_our_columns() {
        for ours in CSV_BEFORE.iter().chain(&CSV_AFTER).chain(&CSV_OPTIONAL) {
            assert!(!ours.starts_with(PARAM_PREFIX), "{ours}");
        }
        let mut out = Vec::new();
        write_csv(&clashing(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
        let mut unique = header.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), header.len(), "{header:?}");
        for name in [
            "params_epochs",
            "epochs",
            "params_value",
            "value",
            "params_state",
        ] {
            assert!(header.contains(&name), "{name}: {header:?}");
        }
        // The CSV keeps every digit.
        assert!(text.contains(",0.00031622776601683794,"), "{text}");
        let mut out = Vec::new();
        write_table(&clashing(), &mut out).unwrap();
        let table = String::from_utf8(out).unwrap();
        assert!(
            table.contains("params_epochs") && table.contains("0.0003162"),
            "{table}"
        );
        assert!(!table.contains("0.00031622776601683794"), "{table}");
    }

    #[test]
    fn the_best_command_is_a_line_of_the_table() {
        let mut out = Vec::new();
        write_table(&SweepReport::example(), &mut out).unwrap();
        let table = String::from_utf8(out).unwrap();
        assert!(
            table.contains("best command (best_command.sh): cd /home/me/project && /home/me/project/.venv/bin/python train.py --batch_size=64\n"),
            "{table}"
        );
    }
}
