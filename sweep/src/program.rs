//! A trial of a program sweep (the space names `program`): its files (the
//! parameters as JSON and as W&B's agent writes them, `${args_json_file}`,
//! `${config}`), its command line from the space's `command` and W&B's
//! macros, its environment, and its supervised leg (the supervise crate).
//! The driver owns the loop; `launch` starts the trial with this.

use crate::space::{Program, Space};
use crate::trial::ParamValue;
use anyhow::Context;
use common::wire::run_dir::TrialDir;
use common::wire::sweep::Settings;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use supervise::autofix::{self, Attempt, CONFIG_WORD};
use supervise::child::Spec;
use supervise::env::{TorchVersion, Wants};
use supervise::leg::{Leg, Objective};
use supervise::preload::Server;
use supervise::readers::Reader;

/// What a program trial needs besides the space and the settings.
pub struct Launch<'a> {
    pub number: u64,
    pub dir: &'a TrialDir,
    pub values: &'a BTreeMap<String, ParamValue>,
    /// Its `CUDA_VISIBLE_DEVICES` slot, its CPU threads.
    pub gpu: Option<String>,
    pub threads: Option<usize>,
    /// A rerun after a device-side assert.
    pub launch_blocking: bool,
    /// The interpreter's torch, asked once per sweep.
    pub torch: TorchVersion,
    pub grace: std::time::Duration,
    /// Rung on its output and its exit.
    pub bell: &'a supervise::events::Bell,
    /// The sweep's preload server, if it has one.
    pub preload: Option<&'a Preloaded>,
    /// `--hang-grace` as given (0: off; None: the default).
    pub hang_grace: Option<std::time::Duration>,
}

/// A sweep's preload server (the space's `preload`, a worker's
/// `--preload`): one Python that imported the modules once, each Python
/// trial a fork of it.
pub struct Preloaded {
    server: Arc<Server>,
    /// Said once: why a trial's command runs fresh instead.
    said: AtomicBool,
}

impl Preloaded {
    /// Starts the server with the sweep's interpreter; a module it cannot
    /// import is bad input naming it (exit 2, before any trial).
    pub fn start(
        space: &Space,
        settings: &Settings,
        more: &[String],
    ) -> anyhow::Result<Option<Preloaded>> {
        let mut modules: Vec<String> = space
            .program
            .as_ref()
            .map(|p| p.preload.clone())
            .unwrap_or_default();
        for m in more {
            if !modules.contains(m) {
                modules.push(m.clone());
            }
        }
        if modules.is_empty() {
            return Ok(None);
        }
        let Some(python) = &settings.interpreter else {
            return Err(common::bad_input!(
                "{}: `preload` needs a Python: give --interpreter",
                settings.space_name
            ));
        };
        let t = std::time::Instant::now();
        let server = Server::start(Path::new(python), &modules, &[])?;
        common::say!(
            "train sweep: preload: {} imported once by {python} in {:.1} s (pid {}); each Python trial is a fork of it",
            modules.join(", "),
            t.elapsed().as_secs_f64(),
            server.pid()
        );
        Ok(Some(Preloaded {
            server: Arc::new(server),
            said: AtomicBool::new(false),
        }))
    }

    /// The server, if it can run `argv` forked; else says why once.
    fn fit(&self, argv: &[String]) -> Option<Arc<Server>> {
        match self.server.fits(argv) {
            Ok(()) => Some(self.server.clone()),
            Err(why) => {
                if !self.said.swap(true, Ordering::SeqCst) {
                    common::say!("train sweep: preload: trials run as fresh processes: {why}");
                }
                None
            }
        }
    }
}

/// The ranks each trial of `program` starts and where the number comes
/// from: the space's `ranks_per_trial`, else its command's launcher
/// (`torchrun --nproc_per_node N ...`), read from the command as written,
/// its macros standing for what they become (`${interpreter}` a python,
/// `${program}` the file); one for a plain command, unread for a launcher whose
/// own defaults or config file decide). Err: the two disagree.
pub fn ranks_per_trial(program: &crate::space::Program) -> Result<Ranks, String> {
    let words: Vec<String> = program
        .command
        .iter()
        .flatten()
        .filter(|w| *w != "${env}")
        .map(|w| match w.as_str() {
            "${interpreter}" => "python".to_string(),
            "${program}" => program.file.clone(),
            w => w.to_string(),
        })
        .collect();
    let launcher = supervise::launcher::ranks_of(&words);
    match (program.ranks_per_trial, launcher) {
        (Some(k), Some(Ok((n, from)))) if n != k => Err(format!(
            "ranks_per_trial: {k}, but the command starts {n} ranks ({from}): give one number"
        )),
        (Some(k), _) => Ok(Ranks::Of(k, format!("ranks_per_trial: {k}"))),
        (None, Some(Ok((n, from)))) => Ok(Ranks::Of(n, from)),
        (None, Some(Err(why))) => Ok(Ranks::Unread(why)),
        (None, None) => Ok(Ranks::One),
    }
}

/// The ranks a trial's job starts.
#[derive(Debug, PartialEq)]
pub enum Ranks {
    /// A plain command: one process.
    One,
    /// N ranks, and the words that say so.
    Of(u32, String),
    /// A launcher whose own defaults or config file decide, and why.
    Unread(String),
}

/// A started program trial.
pub struct Started {
    pub leg: Leg,
    /// Where it runs.
    pub cwd: PathBuf,
    pub argv: Vec<String>,
    pub env_said: Vec<String>,
    /// Forked from the preload server.
    pub forked: bool,
    /// What this attempt runs (its command with the `{config}` and
    /// `{resume}` words), for the fixer's next one.
    pub attempt: Attempt,
    /// Its attempt's number, from 1.
    pub number: u32,
    /// The spec it started with, for another attempt.
    pub spec: Spec,
}

/// The launch directory of a sweep (where `train sweep` was first started).
pub fn launch_dir(settings: &Settings) -> PathBuf {
    settings
        .launch_dir
        .clone()
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_default())
}

/// Before any trial: the program exists (from the launch directory), a
/// `${config}` has its --config, `${interpreter}` has a Python.
pub fn check(space: &Space, settings: &Settings) -> anyhow::Result<()> {
    let Some(p) = &space.program else {
        return Ok(());
    };
    let file = launch_dir(settings).join(&p.file);
    if !file.is_file() {
        return Err(common::bad_input!(
            "{}: `program`: {} is not a file (a program is found from the directory train sweep starts in, {})",
            settings.space_name,
            p.file,
            launch_dir(settings).display()
        ));
    }
    if uses_config(p.command.as_deref()) && settings.base_text.is_none() {
        return Err(common::bad_input!(
            "{}: `command` uses ${{config}}: give --config, the file each trial's values are set in",
            settings.space_name
        ));
    }
    let default = supervise::command::DEFAULT.map(String::from);
    let words = p.command.as_deref().unwrap_or(&default);
    if settings.interpreter.is_none() && words.iter().any(|w| w == "${interpreter}") {
        return Err(common::bad_input!(
            "{}: `command` uses ${{interpreter}} and no python is on PATH: give --interpreter",
            settings.space_name
        ));
    }
    Ok(())
}

/// A program trial with its files written and its first attempt made,
/// before its process starts (`prepare`, then `start`): a fix the memory
/// model predicts it needs can be made to the attempt in between.
pub struct Prepared {
    /// Where it runs.
    pub cwd: PathBuf,
    /// Its directory, absolute.
    pub dir: TrialDir,
    pub attempt: Attempt,
}

/// Writes the trial's files and makes its first attempt.
pub fn prepare(space: &Space, settings: &Settings, l: &Launch) -> anyhow::Result<Prepared> {
    let program = space
        .program
        .as_ref()
        .context("a program trial of a space without `program`")?;
    let launch = launch_dir(settings);
    // Absolute (the sweep's directory as this process was given it): the
    // program runs in the launch directory or its own.
    let dir = TrialDir::new(std::path::absolute(l.dir.path())?);
    let params = space.program_params(l.values);
    let config = write_inputs(program, settings, l, &dir, &params)?;
    let get = |k: &str| std::env::var(k).ok();
    // The command with the config's place kept as the fixer's word.
    let (cwd, template) = command_line(
        program,
        settings,
        &launch,
        &dir,
        &params,
        config.as_ref().map(|_| CONFIG_WORD),
        &get,
    )?;
    Ok(Prepared {
        cwd,
        dir,
        attempt: Attempt::new(template, config),
    })
}

/// Starts the prepared trial's first attempt.
pub fn start(space: &Space, l: &Launch, p: Prepared) -> anyhow::Result<Started> {
    let Prepared { cwd, dir, attempt } = p;
    let config = attempt.config.clone();
    let get = |k: &str| std::env::var(k).ok();
    let argv = autofix::expand(&attempt.command, config.as_deref(), &dir.run());
    // A launcher's ranks share the trial's threads.
    let ranks = match space.program.as_ref().map(ranks_per_trial) {
        Some(Ok(Ranks::Of(n, _))) => n as usize,
        _ => 1,
    };
    let fixes = supervise::env::fixes(
        &get,
        l.torch,
        &Wants {
            gpu: l.gpu.as_deref(),
            threads: l.threads,
            ranks,
            launch_blocking: l.launch_blocking,
        },
    );
    let mut env = fixes.set;
    env.extend(trial_env(l.number, &dir));
    let argv = supervise::launcher::tag(argv, &mut env, &get);
    if get("WANDB_MODE").is_none() {
        // No W&B server behind a trainguard sweep: wandb.init runs offline.
        env.push(("WANDB_MODE".into(), "offline".into()));
    }
    let run = dir.run();
    std::fs::create_dir_all(run.path())?;
    let spec = Spec {
        argv: argv.clone(),
        cwd: Some(cwd.clone()),
        env,
        log: dir.log(),
        own_metrics: Some(dir.own_metrics()),
        echo: false,
        grace: l.grace,
        bell: l.bell.clone(),
        preload: l.preload.and_then(|p| p.fit(&argv)),
    };
    let forked = spec.preload.is_some();
    let (reader, objective) = read_by(space)?;
    let mut leg = Leg::start(&spec, reader, &run, 1, objective, config)?;
    supervise::group::write_pid_file(&dir.pid(), leg.pid())?;
    if let Some(g) = supervise::hang::grace_for(l.hang_grace, &argv) {
        leg.watch_hangs(g);
    }
    Ok(Started {
        leg,
        cwd,
        argv,
        env_said: fixes.said,
        forked,
        attempt,
        number: 1,
        spec,
    })
}

/// How a trial's output is read, and the metric it is judged by.
fn read_by(space: &Space) -> anyhow::Result<(Reader, Objective)> {
    let name = space.metric.name.to_string();
    let reader = Reader::new(&name, space.metric.regex.as_deref())?;
    let objective = Objective {
        metric: Some(name),
        maximize: space.metric.goal == crate::trial::Direction::Maximize,
    };
    Ok((reader, objective))
}

impl Started {
    /// Attempt `number` of the same trial, `attempt` in place of this one's
    /// command and config: its environment, directory and log as before.
    pub fn again(
        space: &Space,
        dir: &TrialDir,
        spec: &Spec,
        env_said: Vec<String>,
        attempt: Attempt,
        number: u32,
        hang_grace: Option<std::time::Duration>,
    ) -> anyhow::Result<Started> {
        let dir = TrialDir::new(std::path::absolute(dir.path())?);
        let run = dir.run();
        let argv = autofix::expand(&attempt.command, attempt.config.as_deref(), &run);
        // Tagged as the first attempt was: its environment has the tag's
        // variable already.
        let get = |k: &str| std::env::var(k).ok();
        let argv = supervise::launcher::tag(argv, &mut Vec::new(), &get);
        let spec = Spec {
            argv: argv.clone(),
            ..spec.clone()
        };
        let (reader, objective) = read_by(space)?;
        let mut leg = Leg::start(
            &spec,
            reader,
            &run,
            number,
            objective,
            attempt.config.clone(),
        )?;
        supervise::group::write_pid_file(&dir.pid(), leg.pid())?;
        if let Some(g) = supervise::hang::grace_for(hang_grace, &argv) {
            leg.watch_hangs(g);
        }
        Ok(Started {
            leg,
            cwd: spec.cwd.clone().unwrap_or_default(),
            argv,
            env_said,
            forked: spec.preload.is_some(),
            attempt,
            number,
            spec,
        })
    }
}

/// The files a trial's program reads its values from: params.json, W&B's
/// param file, args.json when the command names it, and the trial's config
/// when the command uses `${config}` (its path returned).
fn write_inputs(
    program: &Program,
    settings: &Settings,
    l: &Launch,
    dir: &TrialDir,
    params: &[(String, Value)],
) -> anyhow::Result<Option<String>> {
    let json = supervise::command::args_json(params);
    common::files::write_atomic(&dir.params(), format!("{json}\n").as_bytes())?;
    common::files::write_atomic(&dir.wandb_params(), wandb_config(params).as_bytes())?;
    if supervise::command::uses_args_json_file(program.command.as_deref()) {
        common::files::write_atomic(&dir.args_json(), json.as_bytes())?;
    }
    if !uses_config(program.command.as_deref()) {
        return Ok(None);
    }
    let text = settings
        .base_text
        .as_deref()
        .context("`${config}` needs the sweep's --config")?;
    let trial_text = Space::trial_config_text(text, &settings.base_name, l.values)?;
    common::files::write_atomic(&dir.config(), trial_text.as_bytes())?;
    Ok(Some(dir.config().display().to_string()))
}

/// The directory the program runs in (its own `work`, made here, or the
/// launch directory) and its argv, the space's command expanded.
fn command_line(
    program: &Program,
    settings: &Settings,
    launch: &Path,
    dir: &TrialDir,
    params: &[(String, Value)],
    config: Option<&str>,
    get: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<(PathBuf, Vec<String>)> {
    if program.work_in_trial {
        std::fs::create_dir_all(dir.work())?;
    }
    command_words(program, settings, launch, dir, params, config, get)
}

/// `command_line` without making anything: what `--report` writes as the
/// best trial's command.
pub fn command_words(
    program: &Program,
    settings: &Settings,
    launch: &Path,
    dir: &TrialDir,
    params: &[(String, Value)],
    config: Option<&str>,
    get: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let cwd = if program.work_in_trial {
        dir.work()
    } else {
        launch.to_path_buf()
    };
    // The program as the space names it, from the launch directory.
    let program_path = if program.work_in_trial {
        launch.join(&program.file).display().to_string()
    } else {
        program.file.clone()
    };
    let interpreter = settings
        .interpreter
        .clone()
        .unwrap_or_else(|| "python".into());
    let argv = supervise::command::expand(
        program.command.as_deref(),
        &supervise::command::Context {
            params,
            program: &program_path,
            interpreter: &interpreter,
            args_json_file: &dir.args_json().display().to_string(),
            config,
            env: get,
        },
    )?;
    Ok((cwd, argv))
}

/// The variables every program trial gets (docs/guide/program-sweeps.md,
/// "Sweeps whose trials are your program").
fn trial_env(number: u64, dir: &TrialDir) -> Vec<(String, String)> {
    let p = |p: PathBuf| p.display().to_string();
    vec![
        ("TRAINGUARD_TRIAL".into(), number.to_string()),
        ("TRAINGUARD_TRIAL_DIR".into(), p(dir.path().to_path_buf())),
        ("TRAINGUARD_PARAMS".into(), p(dir.params())),
        ("TRAINGUARD_METRICS_CSV".into(), p(dir.own_metrics())),
        ("WANDB_SWEEP_PARAM_PATH".into(), p(dir.wandb_params())),
        // wandb's offline run lands in the trial, not the launch directory.
        ("WANDB_DIR".into(), p(dir.path().to_path_buf())),
    ]
}

/// Whether the command uses `${config}` (W&B's default never does).
pub fn uses_config(command: Option<&[String]>) -> bool {
    command.is_some_and(|c| c.iter().any(|w| w.contains("${config}")))
}

/// The parameters as W&B's agent writes them for `wandb.init`
/// (wandb_agent.py: `config_util.save_config_file_from_dict`): a
/// `wandb_version: 1` line, then `name: {value: v}` per parameter.
pub fn wandb_config(params: &[(String, Value)]) -> String {
    let mut map = serde_yaml::Mapping::new();
    for (k, v) in params {
        let mut inner = serde_yaml::Mapping::new();
        inner.insert("value".into(), serde_yaml::to_value(v).unwrap_or_default());
        map.insert(k.as_str().into(), inner.into());
    }
    let body = serde_yaml::to_string(&map).unwrap_or_default();
    format!("wandb_version: 1\n\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wandb_params_are_written_as_its_agent_does() {
        let params = vec![
            ("lr".to_string(), Value::from(0.01)),
            ("layers".to_string(), Value::from(2)),
            ("opt".to_string(), Value::from("adam")),
        ];
        assert_eq!(
            wandb_config(&params),
            "wandb_version: 1\n\nlr:\n  value: 0.01\nlayers:\n  value: 2\nopt:\n  value: adam\n"
        );
        assert!(uses_config(Some(&["--config=${config}".to_string()])));
        assert!(!uses_config(None));
    }

    #[test]
    fn a_trials_ranks_come_from_the_space_or_the_launcher_and_must_agree() {
        let program = |command: &str, key: Option<u32>| crate::space::Program {
            file: "train.py".into(),
            command: Some(command.split(' ').map(String::from).collect()),
            work_in_trial: false,
            preload: vec![],
            auto_fix: None,
            ranks_per_trial: key,
        };
        let torchrun =
            "${env} ${interpreter} -m torch.distributed.run --nproc_per_node 4 ${program} ${args}";
        assert_eq!(
            ranks_per_trial(&program(torchrun, None)),
            Ok(Ranks::Of(4, "--nproc_per_node 4".into()))
        );
        let e = ranks_per_trial(&program(torchrun, Some(2))).unwrap_err();
        assert_eq!(
            e,
            "ranks_per_trial: 2, but the command starts 4 ranks (--nproc_per_node 4): give one number"
        );
        // The launcher's own defaults decide: the space says, or one GPU.
        let gpu = "torchrun --nproc_per_node gpu ${program}";
        assert_eq!(
            ranks_per_trial(&program(gpu, Some(2))),
            Ok(Ranks::Of(2, "ranks_per_trial: 2".into()))
        );
        let Ok(Ranks::Unread(why)) =
            ranks_per_trial(&program("accelerate launch ${program}", None))
        else {
            panic!("unread")
        };
        assert!(why.contains("own defaults or config file"), "{why}");
        let plain = program("${env} ${interpreter} ${program} ${args}", None);
        assert_eq!(ranks_per_trial(&plain), Ok(Ranks::One));
    }
}
