//! `train sweep --report` and `--status`, from the sweep's truth alone
//! (what `reading` loads): the
//! trials table (table, csv, json, yaml; `table`), failures grouped by
//! class with the parameter values they share (seed 004's post-run
//! analysis), the best trial's config and command, ready to run (`best`),
//! and a plot of the objective per trial with the best so far.

mod best;
mod table;

use crate::cli::Args;
use crate::journal::Study;
use crate::memory_model::Learner;
use crate::owner::Liveness;
use crate::reading::load;
use crate::slurm::Queue;
use crate::space::Space;
use crate::trial::{Direction, Trial, TrialState};
use common::format::Format;
use common::wire::failure::Class;
use common::wire::metric::Metric;
use common::wire::run_dir::{self, SweepDir};
use common::wire::sweep::{
    BestCommand, FailureGroup, ModelError, Row, Settings, SlurmJobs, SweepReport,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The median of |predicted / measured - 1| over the trials with both (an
/// out-of-memory trial's peak is only a lower bound, and a trial auto-fix
/// ran again after its first attempt ran other values than predicted:
/// both left out), the
/// model's terms fitted on every trial (the GPU's where trials measured
/// it, else the host's), and the points it refused.
fn model_error(rows: &[Row], mut learner: Learner) -> Option<ModelError> {
    let mut errors: Vec<f64> = rows
        .iter()
        .filter(|r| r.error_class.as_deref() != Some("out-of-memory"))
        .filter(|r| r.attempts.is_none_or(|a| a <= 1))
        .filter_map(|r| {
            let measured = match r.predicted_of.as_deref()? {
                "gpu" => r.peak_gpu_mib,
                "host-pss" if r.peak_memory_of.as_deref() == Some("host-pss") => r.peak_memory_mib,
                _ => None,
            }?;
            let predicted = r.predicted_peak_mib?;
            (measured > 0.0).then(|| (predicted / measured - 1.0).abs())
        })
        .collect();
    if errors.is_empty() {
        return None;
    }
    errors.sort_by(f64::total_cmp);
    let resource = match rows.iter().any(|r| r.peak_gpu_mib.is_some()) {
        true => crate::memory_model::Resource::Gpu,
        false => crate::memory_model::Resource::Host,
    };
    let effects = learner.fit(resource).map_or(Vec::new(), |f| {
        f.effects()
            .into_iter()
            .map(|(term, c)| common::wire::sweep::Effect {
                term: term.to_string(),
                coefficient: (c * 1000.0).round() / 1000.0,
            })
            .collect()
    });
    let refused = rows
        .iter()
        .filter(|r| r.error_class.as_deref() == Some(Class::PredictedOutOfMemory.as_str()))
        .count() as u64;
    Some(ModelError {
        trials: errors.len() as u64,
        median_error: errors[errors.len() / 2],
        effects,
        refused,
    })
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
            .map(|(k, v)| (k.clone(), v.to_json()))
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
        retried_from: crate::history::retried_from(t),
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
        predicted_peak_mib: num("predicted_peak_mib"),
        predicted_of: text("predicted_of"),
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
        .map(|(t, _)| &**t)
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
    let mut c = BTreeMap::<TrialState, u64>::new();
    for t in study.trials.iter() {
        *c.entry(t.state).or_default() += 1;
    }
    c.into_iter()
        .map(|(s, n)| (s.as_str().to_string(), n))
        .collect()
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
                .map(|(k, v)| (k.clone(), v.to_json()))
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
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
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
    leave(loaded);
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
        .map(|(k, v)| format!("{k}={}", v.to_json()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a one-time reader read, left to the process's exit to free: the
/// trials of a large study are a heap of small maps, and freeing them one
/// by one took a tenth of `--report`'s time on 28,000 trials.
fn leave<T>(read: T) {
    std::mem::forget(read);
}

/// `--report DIR` (or --storage URL --study NAME [--out DIR]): the table
/// on stdout; best_config.yaml, best_command.sh and objective.png written
/// in the sweep's directory. `train` is the binary our model's trials run.
pub fn report(args: &Args, given: &Option<PathBuf>, train: &Path) -> anyhow::Result<u8> {
    let loaded = load(args, given, "--report")?;
    let study = &loaded.study;
    // The memory model learns the trials beside the rows being built.
    let (rows, learner) = std::thread::scope(|s| {
        let learner = s.spawn(|| {
            let mut learner = Learner::default();
            learner.update(&study.trials);
            learner
        });
        let rows: Vec<Row> = study.trials.iter().map(|t| row(t)).collect();
        let learner = learner
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (rows, learner)
    });
    let memory_model = model_error(&rows, learner);
    let best_trial = best(study);
    let best_command = match (&loaded.sweep, best_trial) {
        (Some((settings, space)), Some(t)) => Some(best::command(
            settings,
            space,
            t,
            loaded.dir.as_deref(),
            train,
        )?),
        _ => None,
    };
    match (&loaded.dir, &loaded.sweep) {
        (Some(dir), Some((settings, space))) => {
            let best = best_trial.zip(best_command.as_ref());
            write_files(dir, &loaded.shown, settings, space, study, best)?
        }
        (None, Some(_)) => common::say!(
            "train sweep: no --out DIR: {}, {} and {} not written",
            run_dir::BEST_CONFIG,
            run_dir::BEST_COMMAND,
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
        best_command,
        trials: rows,
        failures: failures(study),
        memory_model,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    Format::resolve(args.format).write(&report, &mut out, table::write_table, table::write_csv)?;
    out.flush()?;
    leave(loaded);
    leave(report);
    Ok(common::exit::OK)
}

/// best_config.yaml, best_command.sh and objective.png in the sweep's
/// directory.
fn write_files(
    dir: &Path,
    shown: &str,
    settings: &Settings,
    space: &Space,
    study: &Study,
    best_trial: Option<(&Trial, &BestCommand)>,
) -> anyhow::Result<()> {
    if let Some((t, command)) = best_trial {
        let whose = format!(
            "The best trial of the sweep in {shown}: trial {}, {} {}",
            t.number,
            space.metric.name,
            t.value.unwrap_or(f64::NAN)
        );
        let text = format!("# {whose}\n{}", best::config_text(settings, space, t)?);
        let sweep = SweepDir::new(dir);
        common::files::write_atomic(&sweep.best_config(), text.as_bytes())?;
        let script = best::script(command, &whose);
        common::files::write_atomic(&sweep.best_command(), script.as_bytes())?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(sweep.best_command(), std::fs::Permissions::from_mode(0o755))?;
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
