//! What a sweep settles before its first trial: its settings from the
//! command line, how many trials it runs, and the inputs of its placement
//! (the GPUs memdiag sees, the space's worst estimate, a Slurm task's share).

use crate::cli::Args;
use crate::placement::{self};
use crate::sampler::{self};
use crate::space::Space;
use common::bad_input;
use common::config::Config;
use common::wire::run_dir::SweepDir;
use common::wire::sweep::Settings;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

/// A worker in a Slurm task: `--parallel` trials at once (default one) on
/// the cores and GPUs Slurm gave the task.
pub fn slurm_plan(parallel: Option<u32>) -> placement::Plan {
    let k = parallel.unwrap_or(1).max(1);
    let cpus = crate::slurm::cpus_from_env()
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let slots = placement::cpu_slots(k, cpus);
    let why = format!(
        "Slurm task {}: {k} trial(s) at a time, each with up to {} of the {cpus} core(s) Slurm gave it as libtorch threads, {}",
        crate::slurm::task_from_env().unwrap_or_default(),
        slots[0].threads.unwrap_or(1),
        match std::env::var("CUDA_VISIBLE_DEVICES") {
            Ok(g) => format!("on its GPUs (CUDA_VISIBLE_DEVICES={g})"),
            Err(_) => "no GPU (Slurm set no CUDA_VISIBLE_DEVICES)".into(),
        }
    );
    placement::Plan {
        slots,
        why: vec![why],
    }
}

pub fn new_settings(args: &Args, dir: &Path) -> anyhow::Result<Settings> {
    if SweepDir::new(dir).journal().exists() {
        return Err(bad_input!(
            "{}: already holds a sweep; continue it with `train sweep --resume {0}` or choose another --out",
            dir.display()
        ));
    }
    let space_path = args.space.as_ref().expect("clap requires --space");
    let space = common::input::read(space_path)?;
    // A program's base config is its own format: kept as text, not loaded.
    let program = names_program(&space)?;
    let (base_name, base, base_text) = match (&args.config, program) {
        (Some(p), false) => {
            let b = Config::load(&common::input::read(p)?)?;
            (b.name, b.config, None)
        }
        (None, false) => {
            return Err(bad_input!(
                "--config is required: the base config each trial's parameters are set in (only a space that names `program` runs without one)"
            ))
        }
        (Some(p), true) => {
            let i = common::input::read(p)?;
            (i.name, Config::default(), Some(i.text))
        }
        (None, true) => (String::new(), Config::default(), None),
    };
    let launch_dir = std::env::current_dir()
        .ok()
        .and_then(|d| std::fs::canonicalize(d).ok())
        .map(|d| d.display().to_string());
    let interpreter = match (&args.interpreter, program) {
        (_, false) => None,
        (Some(p), true) => Some(interpreter_of(p)?),
        (None, true) => python_on_path(),
    };
    let mut settings = Settings {
        schema: <Settings as common::wire::Versioned>::SCHEMA.into(),
        study_name: dir
            .file_name()
            .map_or("sweep".into(), |n| n.to_string_lossy().into_owned()),
        base_name,
        base,
        space_name: space.name,
        space_text: space.text,
        seed: args.seed,
        trials: args.trials,
        parallel: args.parallel.clone(),
        trial_timeout_s: args.trial_timeout,
        hang_grace_s: args.hang_grace.map(|d| d.as_secs_f64()),
        max_consecutive_failures: args.max_consecutive_failures,
        pruner: args.pruner.clone(),
        launch_dir,
        interpreter,
        base_text,
        memory_budget_mib: args.memory_budget,
        bayes_variant: None,
        storage: None,
    };
    settings.bayes_variant = started_variant(&settings)?.map(|v| v.as_str().into());
    if let Some(t) = settings
        .trial_timeout_s
        .filter(|t| !(t.is_finite() && *t > 0.0))
    {
        return Err(bad_input!(
            "--trial-timeout: expected a positive number of seconds, found {t}"
        ));
    }
    Ok(settings)
}

/// The TPE a `bayes` space starts with, to record: its `bayes.variant`,
/// else today's default (the parse here is the one `--resume` repeats).
pub(crate) fn started_variant(settings: &Settings) -> anyhow::Result<Option<sampler::TpeVariant>> {
    let input = common::input::Input {
        name: settings.space_name.clone(),
        text: settings.space_text.clone(),
    };
    Ok(match Space::parse(&input, &settings.base)?.space.method {
        sampler::Method::Bayes(v) => Some(v),
        _ => None,
    })
}

/// Whether a space names `program` (its full parse comes later).
fn names_program(space: &common::input::Input) -> anyhow::Result<bool> {
    let doc: serde_yaml::Value = serde_yaml::from_str(&space.text).map_err(|e| {
        bad_input!(
            "{}: not YAML: {e} (a W&B `command` holds `${{...}}` macros: write it as a block list, `- ${{env}}`, or quote each item)",
            space.name
        )
    })?;
    Ok(doc.as_mapping().is_some_and(|m| m.contains_key("program")))
}

/// Absolute, symlinks kept: a venv's `bin/python` is a symlink whose
/// target would lose the venv.
fn absolute(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// The `python` (else `python3`) on PATH, as W&B's agent runs it.
fn python_on_path() -> Option<String> {
    ["python", "python3"].iter().find_map(|name| on_path(name))
}

/// `name` looked up on PATH as a shell looks up a command.
fn on_path(name: &str) -> Option<String> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

/// `--interpreter`: a path (with a `/`) is made absolute, since trials may
/// run in another directory; a bare name (`python3`) is looked up on PATH,
/// as a shell would, and one that is not there is bad input.
pub(crate) fn interpreter_of(p: &Path) -> anyhow::Result<String> {
    let text = p.display().to_string();
    if text.contains('/') {
        return Ok(absolute(p));
    }
    on_path(&text).ok_or_else(|| {
        bad_input!("--interpreter {text}: no {text} on PATH (give its path, e.g. --interpreter .venv/bin/python)")
    })
}

/// Trials in all: --trials, else the space's run_cap, else the grid's size.
pub fn trial_cap(
    s: &Settings,
    space: &Space,
    search: &sampler::SearchSpace,
) -> anyhow::Result<u64> {
    let grid = match space.method {
        crate::space::Method::Grid => Some(
            sampler::GridSampler::new(search)
                .map_err(|e| bad_input!("{}: {e:#}", s.space_name))?
                .len(),
        ),
        _ => None,
    };
    s.trials
        .or(space.run_cap)
        .map(|n| grid.map_or(n, |g| n.min(g)))
        .or(grid)
        .ok_or_else(|| {
            bad_input!(
                "{}: no end: give --trials N or `run_cap` (a {} search has no size of its own)",
                s.space_name,
                space.method.as_str()
            )
        })
}

/// The GPUs memdiag (beside train) sees, with their free memory.
pub fn gpus(train: &Path) -> Vec<placement::Gpu> {
    gpus_counting(train, &BTreeSet::new())
}

/// `gpus`, each GPU's free memory counting what the processes `ours` (our
/// running trials' trees) hold on it at the same moment, as memdiag lists
/// them: theirs to keep, so not taken from the room the next trials get.
/// One snapshot, so a trial that just released its memory is not counted
/// twice (once freed, once by its peak).
pub fn gpus_counting(train: &Path, ours: &BTreeSet<u32>) -> Vec<placement::Gpu> {
    let memdiag = train.with_file_name("memdiag");
    let Ok(out) = Command::new(&memdiag)
        .args(["--format", "yaml"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        common::say!(
            "train sweep: placement: {} did not run: placing trials as on a machine without a GPU",
            memdiag.display()
        );
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let Ok(report) = common::report::Report::parse(&common::input::Input {
        name: "memdiag".into(),
        text,
    }) else {
        return Vec::new();
    };
    gpus_of(&report, ours)
}

/// The report's GPUs, free memory plus what the processes `ours` hold.
pub(crate) fn gpus_of(
    report: &common::report::Report,
    ours: &BTreeSet<u32>,
) -> Vec<placement::Gpu> {
    report
        .gpus
        .iter()
        .filter_map(|g| {
            let held: u64 = g
                .processes
                .iter()
                .flatten()
                .filter(|p| ours.contains(&p.pid))
                .filter_map(|p| p.used_mib)
                .sum();
            g.memory.map(|m| placement::Gpu {
                index: g.index,
                name: g.name.clone().unwrap_or_default(),
                total_mib: m.total_mib,
                free_mib: (m.free_mib + held).min(m.total_mib),
            })
        })
        .collect()
}

/// The GPUs as placement sees them: for trials that are jobs of several
/// ranks, in groups of that many (`Groups`), said with why; one GPU a
/// trial otherwise. Bad input: more ranks than GPUs, or the space's
/// `ranks_per_trial` and its command disagree.
pub fn grouped(
    space: &Space,
    gpus: Vec<placement::Gpu>,
) -> anyhow::Result<(crate::groups::Groups, Vec<placement::Gpu>)> {
    let Some(program) = &space.program else {
        return Ok((Default::default(), gpus));
    };
    use crate::program::Ranks;
    let said = crate::program::ranks_per_trial(program).map_err(|e| bad_input!("{e}"))?;
    let (ranks, from) = match said {
        Ranks::Of(n, from) => (n, from),
        Ranks::Unread(why) if !gpus.is_empty() => {
            common::say!(
                "train sweep: placement: {why}: each trial is given one GPU; give `ranks_per_trial: N` in the space to give each N"
            );
            (1, String::new())
        }
        Ranks::Unread(_) | Ranks::One => (1, String::new()),
    };
    let (groups, why) = crate::groups::Groups::of(&gpus, ranks, &from).map_err(|e| {
        bad_input!("{e}: give --nproc_per_node 1 to run one rank a trial (trials spread over the GPUs), or run the sweep where no GPU is seen to run the ranks on the CPU (gloo)")
    })?;
    for w in why {
        common::say!("train sweep: placement: {w}");
    }
    let placed = groups.apply(&gpus);
    Ok((groups, placed))
}

/// cfgcheck's estimate of the space's worst combination.
pub fn worst_peak_mib(space: &Space, base: &Config) -> u64 {
    space
        .corners(base)
        .iter()
        .map(|(_, c)| common::estimate::estimate(c).peak_mib())
        .max()
        .unwrap_or_else(|| common::estimate::estimate(base).peak_mib())
}

/// A program's interpreter's torch, asked on a thread (a Python start,
/// 0.1 s or more) while the study loads, not before: a worker joining a
/// large study waits for both.
pub(crate) fn torch_of(
    space: &crate::space::Space,
    settings: &Settings,
) -> Option<std::thread::JoinHandle<supervise::env::TorchVersion>> {
    let python = std::path::PathBuf::from(settings.interpreter.as_ref()?);
    space.program.as_ref()?;
    Some(std::thread::spawn(move || {
        supervise::env::torch_version(&python)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_interpreter_is_looked_up_on_path_and_a_path_made_absolute() {
        let sh = interpreter_of(Path::new("sh")).unwrap();
        assert!(sh.starts_with('/') && sh.ends_with("/sh"), "{sh}");
        let e = interpreter_of(Path::new("no-such-python-3")).unwrap_err();
        assert!(
            format!("{e:#}").contains("no no-such-python-3 on PATH"),
            "{e:#}"
        );
        let rel = interpreter_of(Path::new(".venv/bin/python")).unwrap();
        assert!(
            rel.starts_with('/') && rel.ends_with("/.venv/bin/python"),
            "{rel}"
        );
    }

    #[test]
    fn our_trials_memory_counts_as_free_and_another_jobs_does_not() {
        use common::wire::memdiag::{Process, ProcessKind};
        use common::wire::Versioned;
        let mut report = common::report::Report::example();
        let proc_ = |pid, used| Process {
            pid,
            name: None,
            used_mib: used,
            kind: ProcessKind::Compute,
            gpu_instance: None,
        };
        // 9600 free of 15360; our trial (pid 10) holds 1758, another job
        // 4000, and a process NVML cannot size counts nothing.
        report.gpus[0].memory = Some(common::wire::memdiag::Memory {
            total_mib: 15360,
            used_mib: 5760,
            free_mib: 9600,
        });
        report.gpus[0].processes = Some(vec![
            proc_(10, Some(1758)),
            proc_(4242, Some(4000)),
            proc_(11, None),
        ]);
        let ours: BTreeSet<u32> = [10, 11].into();
        let g = gpus_of(&report, &ours);
        assert_eq!((g[0].index, g[0].free_mib), (0, 11358));
        assert_eq!(gpus_of(&report, &BTreeSet::new())[0].free_mib, 9600);
        // Never past the card's total.
        report.gpus[0].processes = Some(vec![proc_(10, Some(90000))]);
        assert_eq!(gpus_of(&report, &ours)[0].free_mib, 15360);
    }
}
