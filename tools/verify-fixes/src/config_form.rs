//! The `--config` form's checks (their order and names: `rows`). Each
//! returns what it saw and, when it fails, the fix; the rules come from
//! `diagnose` and the estimate from `common`, and everything that needs
//! libtorch is asked of `train` as a child process.

use crate::machine::Machine;
use crate::rows::{Check, Form, Status};
use common::config::{Config, LoadedConfig};
use common::estimate::{self, Budget, MIB};
use common::report::Source;
use common::wire::run_dir::{self, RunDir};
use common::wire::train::{Libtorch, TrainData, TrainInfo};
use common::wire::{self, Versioned};
use diagnose::rules::{self, Severity, Target};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub struct Context<'a> {
    pub loaded: &'a LoadedConfig,
    pub config_path: &'a Path,
    pub machine: Machine<'a>,
    pub margin: f64,
    pub train: PathBuf,
    pub out: PathBuf,
    /// Configs to size memory for (a search space's worst cases), with a
    /// label each; just the config without --space.
    pub variants: Vec<(String, Config)>,
}

/// `train info --format yaml`, run once per process: the runtime check reads
/// it, and so does [`lacks_libtorch`] before any check runs.
fn train_info(train: &Path) -> &'static std::io::Result<Output> {
    static INFO: OnceLock<std::io::Result<Output>> = OnceLock::new();
    INFO.get_or_init(|| {
        Command::new(train)
            .args(["info", "--format", "yaml"])
            .output()
    })
}

/// True when `train` says it was built without libtorch (the pip wheel's
/// train): it cannot run the runtime, smoke and data checks, which gate a
/// run of its own trainer. A train that cannot be run or read is not this
/// case: those checks say what is wrong with it.
pub fn lacks_libtorch(train: &Path) -> bool {
    match train_info(train) {
        Ok(o) if o.status.success() => {
            wire::parse::<TrainInfo>("`train info`", &String::from_utf8_lossy(&o.stdout))
                .is_ok_and(|i| i.libtorch == Libtorch::NotInThisBuild)
        }
        _ => false,
    }
}

const FORM: Form = Form::Config;

impl Context<'_> {
    /// The check `id` of this form (`rows`), run.
    pub fn run(&self, id: &'static str, target: &Target) -> Check {
        match id {
            "allocator" => self.allocator(),
            "config" => self.config(target),
            "memory" => self.memory(),
            "runtime" => self.runtime(),
            "gpu-state" => self.gpu_state(),
            "smoke" => self.smoke(),
            "data" => self.data(),
            _ => self.disk(),
        }
    }

    pub fn allocator(&self) -> Check {
        let c = &self.loaded.config;
        match rules::alloc_conf(c, self.machine.env) {
            None => FORM.row("allocator", Status::Pass,
                "neither PYTORCH_ALLOC_CONF nor PYTORCH_CUDA_ALLOC_CONF is set: train sets expandable_segments:True itself (for another trainer: eval \"$(verify-fixes --print-env)\")",
                None,
            ),
            Some((var, value, source)) if rules::expandable_segments(&value) => {
                FORM.row("allocator", Status::Pass, format!("{var}={value} (from the {source})"), None)
            }
            Some((var, value, source)) => FORM.row("allocator", Status::Fail,
                format!("{var}={value} (from the {source}) has no expandable_segments:True: fragmentation (\"reserved but unallocated\") can end a long run"),
                Some(format!("set {var}={}", rules::with_expandable(&value))),
            ),
        }
    }

    pub fn config(&self, target: &Target) -> Check {
        let outcome = rules::check(self.loaded, target);
        let list = |s: Severity| -> Vec<String> {
            outcome
                .findings
                .iter()
                .filter(|f| f.severity == s)
                .map(|f| match f.line {
                    Some(l) => format!("{} (line {l})", f.id),
                    None => f.id.to_string(),
                })
                .collect()
        };
        let (errors, warnings) = (list(Severity::Error), list(Severity::Warning));
        if !errors.is_empty() {
            let fix = outcome
                .findings
                .iter()
                .find(|f| f.severity == Severity::Error)
                .map(|f| f.fix.clone());
            FORM.row(
                "config",
                Status::Fail,
                format!("errors: {}", errors.join(", ")),
                fix.map(|f| format!("{f} (or `cfgcheck --fix {}`)", self.config_path.display())),
            )
        } else if !warnings.is_empty() {
            FORM.row(
                "config",
                Status::Warn,
                format!("no errors; warnings: {}", warnings.join(", ")),
                None,
            )
        } else {
            FORM.row("config", Status::Pass, "no findings", None)
        }
    }

    pub fn memory(&self) -> Check {
        let m = &self.machine;
        let Some(gpu) = m.gpu() else {
            return m.no_gpu(FORM, "memory", m.no_gpu_reason());
        };
        let Some(mem) = gpu.memory else {
            return m.no_gpu(
                FORM,
                "memory",
                format!("the report does not give GPU {}'s memory", gpu.index),
            );
        };
        // The worst variant decides.
        let (label, config, peak) = self
            .variants
            .iter()
            .map(|(l, c)| (l, c, estimate::estimate(c).peak_mib()))
            .max_by_key(|(_, _, p)| *p)
            .expect("at least the config itself");
        let n = u64::from(config.parallel_trials.max(1));
        let budget = Budget::of(mem, config.parallel_trials, self.margin);
        let (usable_total, usable_free) = (budget.usable_total_mib(), budget.usable_free_mib());
        let gpu_name = gpu.name.as_deref().unwrap_or("the GPU");
        let saw = format!(
            "{n} × {peak} MiB{} on {gpu_name}: {} MiB total, {} MiB free, {:.0}% margin",
            if self.variants.len() > 1 {
                format!(" (worst case: {label})")
            } else {
                String::new()
            },
            mem.total_mib,
            mem.free_mib,
            self.margin * 100.0
        );
        if n * peak > usable_total || peak > usable_free {
            let fits = budget
                .trials_that_fit(peak)
                .min(usable_free * n / peak.max(1))
                .min(n);
            let fix = if fits >= 1 && n > 1 {
                format!("parallel_trials: {fits}, or `cfgcheck --fit`")
            } else {
                "`cfgcheck --fix` (smaller batch or model), or checkpointing / mixed precision"
                    .to_string()
            };
            FORM.row("memory", Status::Fail, saw, Some(fix))
        } else {
            FORM.row("memory", Status::Pass, saw, None)
        }
    }

    pub fn runtime(&self) -> Check {
        let out = match train_info(&self.train) {
            Ok(o) if o.status.success() => o,
            Ok(o) => {
                return FORM.row(
                    "runtime",
                    Status::Fail,
                    format!(
                        "`{} info` failed: {}",
                        self.train.display(),
                        last_line(&o.stderr)
                    ),
                    Some(
                        concat!(
                            "rebuild train (`just build`) against torch ",
                            common::torch_for_train!()
                        )
                        .into(),
                    ),
                )
            }
            Err(e) => {
                return FORM.row(
                    "runtime",
                    Status::Fail,
                    format!("cannot run {}: {e}", self.train.display()),
                    Some("build train (`just build`) or give --train PATH".into()),
                )
            }
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let info = match wire::parse::<TrainInfo>("`train info`", &text) {
            Ok(v) => v,
            Err(e) => {
                return FORM.row("runtime", Status::Fail,
                    format!("`train info` printed no {} YAML: {e:#}", TrainInfo::SCHEMA),
                    Some(
                        "use the train built with this verify-fixes (`just build`), or give --train PATH"
                            .into(),
                    ),
                )
            }
        };
        let torch = &info.torch_version;
        let (cuda, cudnn, devices) = (info.cuda_available, info.cudnn_available, info.device_count);
        let live_gpu = self
            .machine
            .report
            .is_some_and(|r| r.source == Source::Nvml && !r.gpus.is_empty());
        match (cuda, cudnn) {
            (true, true) => FORM.row("runtime", Status::Pass, format!("torch {torch}; CUDA with {devices} device(s); cuDNN available"), None),
            (true, false) => FORM.row("runtime", Status::Fail, format!("torch {torch}; CUDA available but not cuDNN"), Some("install the cuDNN that torch expects (PyPI's nvidia-cudnn)".into())),
            (false, _) if live_gpu => FORM.row("runtime", Status::Fail,
                format!("torch {torch} loads but does not see the GPU NVML reports: {}", info.notes.join("; ")),
                Some("check `ldd train-model | grep torch_cuda` (beside train) and the driver's CUDA version (`train info`)".into()),
            ),
            (false, _) => self.machine.no_gpu(FORM, "runtime", format!("torch {torch} loads; no GPU to check CUDA and cuDNN on ({})", info.notes.join("; "))),
        }
    }

    pub fn gpu_state(&self) -> Check {
        self.machine
            .gpu_state(FORM, &self.loaded.config.environment)
    }

    /// Two short epochs of the config with the same features, on a few
    /// batches: epoch 2 must complete (seed 001's crash came there) and the
    /// checkpoint must load back (`train --resume` of the finished run).
    pub fn smoke(&self) -> Check {
        let small = smoke_config(&self.loaded.config);
        let fail = |saw: String| FORM.row("smoke", Status::Fail, saw, None);
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => return fail(format!("no temporary directory: {e}")),
        };
        let cfg = dir.path().join("smoke.yaml");
        if let Err(e) = std::fs::write(&cfg, small.to_yaml()) {
            return fail(format!("cannot write {}: {e}", cfg.display()));
        }
        let run = dir.path().join("run");
        let started = std::time::Instant::now();
        if let Err(failed) = self.smoke_first_run(&cfg, &run) {
            return failed;
        }
        match Command::new(&self.train).arg("--resume").arg(&run).output() {
            Ok(o) if o.status.success() => FORM.row(
                "smoke",
                Status::Pass,
                format!(
                    "2 epochs of {} examples in {:.1} s; the checkpoint saved and loaded back",
                    small.max_train_examples.unwrap_or(0),
                    started.elapsed().as_secs_f64()
                ),
                None,
            ),
            Ok(o) => fail(format!(
                "the checkpoint did not load back: {}",
                last_line(&o.stderr)
            )),
            Err(e) => fail(format!("cannot run train --resume: {e}")),
        }
    }

    /// The smoke's first run, of `cfg` into `run`: the failed row unless it
    /// finished with 2 epochs in its metrics.
    fn smoke_first_run(&self, cfg: &Path, run: &Path) -> Result<(), Check> {
        let fail = |saw: String, fix: Option<String>| FORM.row("smoke", Status::Fail, saw, fix);
        let first = Command::new(&self.train)
            .arg("--config")
            .arg(cfg)
            .arg("--out")
            .arg(run)
            .output()
            .map_err(|e| fail(format!("cannot run {}: {e}", self.train.display()), None))?;
        if !first.status.success() {
            return Err(fail(
                format!("train failed: {}", last_line(&first.stderr)),
                Some("read the message above; `cfgcheck` the config; see docs/TROUBLESHOOTING.md, \"When a run fails\"".into()),
            ));
        }
        let rows = std::fs::read_to_string(RunDir::new(run).metrics())
            .map(|t| t.lines().count().saturating_sub(1))
            .unwrap_or(0);
        if rows < 2 {
            return Err(fail(
                format!("only {rows} epoch(s) in {}", run_dir::METRICS),
                None,
            ));
        }
        Ok(())
    }

    pub fn data(&self) -> Check {
        let out = Command::new(&self.train)
            .arg("check-data")
            .arg("--config")
            .arg(self.config_path)
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let text = String::from_utf8_lossy(&o.stdout);
                let v = match wire::parse::<TrainData>("`train check-data`", &text) {
                    Ok(v) => v,
                    Err(e) => {
                        return FORM.row("data", Status::Fail,
                            format!("`train check-data` printed no {} YAML: {e:#}", TrainData::SCHEMA),
                            Some("use the train built with this verify-fixes (`just build`), or give --train PATH".into()),
                        )
                    }
                };
                let mut saw = format!(
                    "{}: {} training / {} validation examples",
                    v.source, v.train_examples, v.val_examples
                );
                if let Some(counts) = v.class_counts.as_ref().and_then(|c| c.get("training")) {
                    let list: Vec<String> =
                        counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
                    saw += &format!("; training classes {}", list.join(", "));
                }
                FORM.row("data", Status::Pass, saw, None)
            }
            Ok(o) => FORM.row(
                "data",
                Status::Fail,
                last_line(&o.stderr),
                Some(
                    "fix the data (the message names the tensor and the first bad example)".into(),
                ),
            ),
            Err(e) => FORM.row(
                "data",
                Status::Fail,
                format!("cannot run {}: {e}", self.train.display()),
                Some("build train (`just build`) or give --train PATH".into()),
            ),
        }
    }

    pub fn disk(&self) -> Check {
        let dir = &self.out;
        let probe = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let f = tempfile::NamedTempFile::new_in(dir)?;
            std::io::Write::write_all(&mut f.as_file(), b"probe")?;
            f.as_file().sync_all()
        };
        if let Err(e) = probe() {
            return FORM.row(
                "disk",
                Status::Fail,
                format!("{}: not writable: {e}", dir.display()),
                Some("choose another --out, or fix its permissions".into()),
            );
        }
        let params = estimate::estimate(&self.loaded.config).parameters;
        // checkpoint (weights + 2 moments) and best model, each briefly twice
        // (temp file + rename), plus metrics and the plot.
        let need = params * 4 * 4 * 2 + 4 * MIB;
        match common::host::free_bytes(dir) {
            Some(free) if free < need => FORM.row(
                "disk",
                Status::Fail,
                format!(
                    "{}: {} MiB free, the run writes about {} MiB",
                    dir.display(),
                    estimate::whole_mib(free),
                    need.div_ceil(MIB)
                ),
                Some("free disk space or choose another --out".into()),
            ),
            Some(free) => FORM.row(
                "disk",
                Status::Pass,
                format!(
                    "{}: writable; {} MiB free, the run writes about {} MiB",
                    dir.display(),
                    estimate::whole_mib(free),
                    need.div_ceil(MIB)
                ),
                None,
            ),
            None => FORM.row(
                "disk",
                Status::Warn,
                format!("{}: writable; free space unknown", dir.display()),
                None,
            ),
        }
    }
}

/// The smoke's config: `c` for 2 epochs of 2 batches, validated on one.
fn smoke_config(c: &Config) -> Config {
    let mut small = c.clone();
    small.epochs = 2;
    small.warmup_epochs = small.warmup_epochs.min(1);
    let b = u64::from(c.batch_size);
    small.max_train_examples = Some(c.max_train_examples.map_or(2 * b, |m| m.min(2 * b)));
    small.max_val_examples = Some(c.max_val_examples.map_or(b, |m| m.min(b)));
    small
}

fn last_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("(no message)")
        .to_string()
}
