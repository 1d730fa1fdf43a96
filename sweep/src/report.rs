//! `train sweep --report` and `--status`, from the sweep's truth alone
//! (what `reading` loads): the
//! trials table (table, csv, json, yaml), failures grouped by class with the
//! parameter values they share (seed 004's post-run analysis), the best
//! trial's config as a ready config file, and a plot of the objective per
//! trial with the best so far.

use crate::cli::Args;
use crate::journal::Study;
use crate::owner::Liveness;
use crate::reading::load;
use crate::slurm::Queue;
use crate::space::Space;
use crate::trial::{Direction, ParamValue, Trial, TrialState};
use common::format::Format;
use common::wire::failure::Class;
use common::wire::metric::Metric;
use common::wire::run_dir::{self, SweepDir};
use common::wire::sweep::{FailureGroup, Row, Settings, SlurmJobs, SweepReport};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn param_json(v: &ParamValue) -> Value {
    serde_json::to_value(v.to_yaml()).unwrap_or(Value::Null)
}

fn row(t: &Trial) -> Row {
    let num = |k: &str| t.user_attrs.get(k).and_then(Value::as_f64);
    let text = |k: &str| {
        t.user_attrs
            .get(k)
            .and_then(Value::as_str)
            .map(String::from)
    };
    Row {
        number: t.number,
        state: t.state.as_str().into(),
        error_class: text("error_class"),
        params: t
            .params
            .iter()
            .map(|(k, v)| (k.clone(), param_json(v)))
            .collect(),
        value: t.value,
        intermediate: t.intermediate.clone(),
        epochs: t.user_attrs.get("epochs").and_then(Value::as_u64),
        seconds: num("seconds"),
        peak_memory_mib: num("peak_memory_mib").or(num("peak_host_pss_mib")),
        peak_memory_of: match (num("peak_memory_mib"), num("peak_host_pss_mib")) {
            (Some(_), _) => Some("torch-allocated".into()),
            (None, Some(_)) => Some("host-pss".into()),
            (None, None) => None,
        },
        peak_gpu_mib: num("peak_gpu_mib"),
        error_message: text("error_message"),
        retried_from: t.user_attrs.get("retried_from").and_then(Value::as_u64),
        discarded: t.discarded,
        attempts: t.user_attrs.get("attempts").and_then(Value::as_u64),
        knobs: t
            .user_attrs
            .get("knobs")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The best COMPLETE trial in the study's direction.
pub fn best(study: &Study) -> Option<&Trial> {
    study
        .trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .filter_map(|t| t.value.map(|v| (t, v)))
        .reduce(|a, b| {
            if study.direction.better(b.1, a.1) {
                b
            } else {
                a
            }
        })
        .map(|(t, _)| t)
}

/// The trials that re-ran another (an interrupted, crowded or allocator-
/// broken one): the points tried are the trials less these.
fn reruns(study: &Study) -> u64 {
    study
        .trials
        .iter()
        .filter(|t| t.user_attrs.contains_key("retried_from"))
        .count() as u64
}

/// `6 points, 8 trials (2 re-runs)`, or `6 trials` without a re-run.
fn trials_words(trials: u64, reruns: u64) -> String {
    match reruns {
        0 => format!("{trials} trials"),
        r => format!("{} points, {trials} trials ({r} re-run(s))", trials - r),
    }
}

fn counts(study: &Study) -> BTreeMap<String, u64> {
    let mut c = BTreeMap::new();
    for t in &study.trials {
        *c.entry(t.state.as_str().to_string()).or_default() += 1;
    }
    c
}

fn failures(study: &Study) -> Vec<FailureGroup> {
    let mut groups: BTreeMap<String, Vec<&Trial>> = BTreeMap::new();
    for t in study.trials.iter().filter(|t| t.state == TrialState::Fail) {
        let class = t
            .user_attrs
            .get("error_class")
            .and_then(Value::as_str)
            .unwrap_or(Class::Other.as_str());
        groups.entry(class.to_string()).or_default().push(t);
    }
    groups
        .into_iter()
        .map(|(class, ts)| {
            let first = &ts[0].params;
            let shared = first
                .iter()
                .filter(|(k, v)| ts.iter().all(|t| t.params.get(*k) == Some(*v)))
                .map(|(k, v)| (k.clone(), param_json(v)))
                .collect();
            FailureGroup {
                class,
                count: ts.len() as u64,
                trials: ts.iter().map(|t| t.number).collect(),
                shared,
            }
        })
        .collect()
}

/// The line the driver prints at its end.
pub fn print_summary(study: &Study, space: &Space, took: Duration) {
    let c = counts(study);
    let list: Vec<String> = c
        .iter()
        .map(|(s, n)| format!("{n} {}", s.to_lowercase()))
        .collect();
    let best = best(study).map_or("no complete trial".to_string(), |t| {
        format!(
            "best: trial {} with {} {:.6}",
            t.number,
            space.metric.name,
            t.value.unwrap_or(f64::NAN)
        )
    });
    common::say!(
        "train sweep: {} ({}) in {:.1} s; {best}",
        trials_words(study.trials.len() as u64, reruns(study)),
        list.join(", "),
        took.as_secs_f64()
    );
}

/// `--status DIR` (or --storage URL --study NAME).
pub fn status(args: &Args, given: &Option<PathBuf>) -> anyhow::Result<u8> {
    let loaded = load(args, given, "--status")?;
    let (study, dir, metric) = (&loaded.study, &loaded.dir, loaded.metric());
    let jobs = match &dir {
        Some(d) => crate::slurm::read_jobs(d)?,
        None => None,
    };
    let queue = match &jobs {
        Some(_) => crate::slurm::Queue::query(),
        None => Err("the sweep has no Slurm job".into()),
    };
    let mut out = std::io::stdout().lock();
    let c = counts(study);
    let list: Vec<String> = c.iter().map(|(s, n)| format!("{s} {n}")).collect();
    writeln!(
        out,
        "{} · {} · {} {} · {}: {}",
        loaded.shown,
        loaded.method(),
        metric,
        goal(study.direction),
        trials_words(study.trials.len() as u64, reruns(study)),
        list.join(", ")
    )?;
    for t in study
        .trials
        .iter()
        .filter(|t| t.state == TrialState::Running)
    {
        if loaded.sweep.is_none() || !crate::history::ours(study, t) {
            writeln!(out, "running: trial {} (an Optuna client's)", t.number)?;
            continue;
        }
        write_running(&mut out, dir.as_deref(), &metric, t, &queue)?;
    }
    match best(study) {
        Some(t) => writeln!(
            out,
            "best so far: trial {} with {} {:.6} ({})",
            t.number,
            metric,
            t.value.unwrap_or(f64::NAN),
            params_text(t)
        )?,
        None => writeln!(out, "best so far: no complete trial yet")?,
    }
    if let Some(jobs) = &jobs {
        write_slurm(&mut out, jobs, &queue)?;
    }
    out.flush()?;
    Ok(common::exit::OK)
}

/// A RUNNING trial's line: its progress where it runs, or why the journal's
/// state is stale and how to run it again.
fn write_running(
    out: &mut impl Write,
    dir: Option<&Path>,
    metric: &Metric,
    t: &Trial,
    queue: &Result<Queue, String>,
) -> anyhow::Result<()> {
    let last = t.intermediate.iter().next_back();
    let progress = last.map_or("no epoch yet".to_string(), |(e, v)| {
        format!("epoch {e}: {metric} {v:.6}")
    });
    let train_pid =
        dir.and_then(|d| crate::recover::live_trial_pid(&SweepDir::new(d).trial(t.number)));
    match crate::owner::liveness(t, queue) {
        Liveness::Live(where_) => {
            let pid = train_pid.map_or(String::new(), |p| format!(", train pid {p}"));
            writeln!(
                out,
                "running: trial {} ({where_}{pid}), {progress}",
                t.number
            )?
        }
        Liveness::Gone(why) => {
            let leftover = train_pid.map_or(String::new(), |p| {
                format!(" (its train, pid {p}, still runs)")
            });
            writeln!(
                out,
                "trial {} is RUNNING in the journal but {why}{leftover}: `train sweep --resume {}` runs it again",
                t.number,
                dir.map_or("DIR".into(), |d| d.display().to_string())
            )?
        }
        Liveness::Unknown(why) => {
            writeln!(out, "trial {} is RUNNING in the journal; {why}", t.number)?
        }
    }
    Ok(())
}

/// The sweep's Slurm tasks as squeue lists them, or why it could not.
fn write_slurm(
    out: &mut impl Write,
    jobs: &SlurmJobs,
    queue: &Result<Queue, String>,
) -> anyhow::Result<()> {
    let ids = jobs.job_ids();
    match queue {
        Ok(q) => {
            let listed: Vec<_> = q.of_jobs(&ids).collect();
            if listed.is_empty() {
                writeln!(
                    out,
                    "slurm: squeue lists no task of job(s) {}",
                    ids.join(", ")
                )?;
            }
            for e in listed {
                writeln!(
                    out,
                    "slurm: {} {} {} {}",
                    e.key, e.state, e.time, e.where_or_why
                )?;
            }
        }
        Err(why) => writeln!(out, "slurm: job(s) {}: {why}", ids.join(", "))?,
    }
    Ok(())
}

fn goal(d: Direction) -> &'static str {
    match d {
        Direction::Minimize => "minimize",
        Direction::Maximize => "maximize",
    }
}

fn params_text(t: &Trial) -> String {
    t.params
        .iter()
        .map(|(k, v)| format!("{k}={}", param_json(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--report DIR` (or --storage URL --study NAME [--out DIR]): the table
/// on stdout; best_config.yaml and objective.png written in the sweep's
/// directory.
pub fn report(args: &Args, given: &Option<PathBuf>) -> anyhow::Result<u8> {
    let loaded = load(args, given, "--report")?;
    let study = &loaded.study;
    let rows: Vec<Row> = study.trials.iter().map(row).collect();
    let best_trial = best(study);
    match (&loaded.dir, &loaded.sweep) {
        (Some(dir), Some((settings, space))) => {
            write_files(dir, &loaded.shown, settings, space, study, best_trial)?
        }
        (None, Some(_)) => common::say!(
            "train sweep: no --out DIR: {} and {} not written",
            run_dir::BEST_CONFIG,
            run_dir::OBJECTIVE
        ),
        (_, None) => {}
    }
    let report = SweepReport {
        schema: <SweepReport as common::wire::Versioned>::SCHEMA.into(),
        study: study.name.clone(),
        metric: loaded.metric(),
        goal: goal(study.direction).into(),
        counts: counts(study),
        points: study.trials.len() as u64 - reruns(study),
        best: best_trial.map(row),
        trials: rows,
        failures: failures(study),
    };
    let mut out = std::io::stdout().lock();
    Format::resolve(args.format).write(&report, &mut out, write_table, write_csv)?;
    out.flush()?;
    Ok(common::exit::OK)
}

/// best_config.yaml and objective.png in the sweep's directory.
fn write_files(
    dir: &Path,
    shown: &str,
    settings: &Settings,
    space: &Space,
    study: &Study,
    best_trial: Option<&Trial>,
) -> anyhow::Result<()> {
    if let Some(t) = best_trial {
        let text = format!(
            "# The best trial of the sweep in {shown}: trial {}, {} {:.6}\n{}",
            t.number,
            space.metric.name,
            t.value.unwrap_or(f64::NAN),
            best_text(settings, space, t)?
        );
        common::files::write_atomic(&SweepDir::new(dir).best_config(), text.as_bytes())?;
    }
    if let Err(e) = crate::plot::objective(
        &SweepDir::new(dir).objective(),
        study,
        space.metric.name.as_str(),
    ) {
        common::say!("train sweep: {} not drawn: {e:#}", run_dir::OBJECTIVE);
    }
    Ok(())
}

/// The best trial's config: the base with its values; for a program, its
/// `${config}` text, or without one its parameters as YAML.
fn best_text(settings: &Settings, space: &Space, trial: &Trial) -> anyhow::Result<String> {
    let params = &trial.params;
    if space.program.is_none() {
        return Ok(space.apply(&settings.base, params)?.to_yaml());
    }
    let mut values = space.search_space().fixed;
    values.extend(params.clone());
    // auto_fix: the settings its last attempt ran with, so that the config
    // does not reproduce the failure its first attempt met.
    let mut note = String::new();
    if let Some(changes) = trial.user_attrs.get("auto_fix").and_then(Value::as_array) {
        note.push_str(
            "# auto_fix: the trial ran these changes (its last attempt's settings are below):\n",
        );
        for c in changes.iter().filter_map(Value::as_str) {
            note.push_str(&format!("#   {c}\n"));
        }
    }
    if let Some(used) = trial.user_attrs.get("config_used").and_then(Value::as_str) {
        if let Ok(text) = std::fs::read_to_string(used) {
            return Ok(format!("{note}{text}"));
        }
    }
    if let Some(eff) = trial
        .user_attrs
        .get("effective_params")
        .and_then(Value::as_object)
    {
        for (k, v) in eff {
            if let Some(p) = values.get(k).cloned() {
                values.insert(k.clone(), with_json(&p, v));
            }
        }
    }
    let text = match &settings.base_text {
        Some(base) => Space::trial_config_text(base, &settings.base_name, &values)?,
        None => {
            let map: serde_yaml::Mapping = space
                .program_params(&values)
                .into_iter()
                .map(|(k, v)| (k.into(), serde_yaml::to_value(v).unwrap_or_default()))
                .collect();
            serde_yaml::to_string(&map)?
        }
    };
    Ok(format!("{note}{text}"))
}

/// `v` (JSON) as a value of the kind `like` is.
fn with_json(like: &ParamValue, v: &Value) -> ParamValue {
    use crate::trial::Choice;
    match (like, v) {
        (ParamValue::Int(_), v) if v.is_i64() => ParamValue::Int(v.as_i64().unwrap_or_default()),
        (ParamValue::Float(_), v) if v.is_number() => {
            ParamValue::Float(v.as_f64().unwrap_or_default())
        }
        (_, Value::Bool(b)) => ParamValue::Choice(Choice::Bool(*b)),
        (_, v) if v.is_i64() => ParamValue::Choice(Choice::Int(v.as_i64().unwrap_or_default())),
        (_, Value::String(s)) => ParamValue::Choice(Choice::Str(s.clone())),
        _ => like.clone(),
    }
}

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

fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

fn write_csv(r: &SweepReport, w: &mut dyn Write) -> anyhow::Result<()> {
    let names = param_names(r);
    let mut csv = csv::Writer::from_writer(w);
    let mut header: Vec<String> = ["number", "state", "error_class"]
        .map(String::from)
        .to_vec();
    header.extend(names.iter().cloned());
    header.extend(
        [
            "value",
            "epochs",
            "seconds",
            "peak_memory_mib",
            "peak_memory_of",
            "peak_gpu_mib",
        ]
        .map(String::from),
    );
    // Only journals with Rustuna's DISCARD_TRIALS records have the column.
    let discards = r.trials.iter().any(|t| t.discarded);
    if discards {
        header.push("discarded".into());
    }
    // Only sweeps with `auto_fix` have the column.
    let attempts = r.trials.iter().any(|t| t.attempts.is_some());
    if attempts {
        header.push("attempts".into());
    }
    csv.write_record(&header)?;
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
        csv.write_record(&rec)?;
    }
    csv.flush()?;
    Ok(())
}

fn write_table(r: &SweepReport, w: &mut dyn Write) -> anyhow::Result<()> {
    use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
    let names = param_names(r);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(140);
    let mut header: Vec<String> = vec!["#".into(), "state".into()];
    header.extend(names.iter().cloned());
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
        let mut cells = trial_cells(row, &names);
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
            "best: trial {} with {} {:.6} (config: {})",
            b.number,
            r.metric,
            b.value.unwrap_or(f64::NAN),
            run_dir::BEST_CONFIG
        )?,
        None => writeln!(w, "best: no complete trial")?,
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

/// One trial's row of the `--report` table, in the header's order.
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

fn trial_cells(row: &Row, names: &[String]) -> Vec<String> {
    let state = match row.discarded {
        true => format!("{} (discarded)", row.state),
        false => row.state.clone(),
    };
    let mut cells = vec![row.number.to_string(), state];
    cells.extend(names.iter().map(|n| cell(row.params.get(n))));
    cells.extend([
        row.value.map(|v| format!("{v:.6}")).unwrap_or_default(),
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
