//! The training loop. It neither prints nor formats: it emits events that the
//! console and metrics.csv consume (burn-train's shape), and it owns when to
//! save (every epoch, and the best model) while `checkpoint` owns how.
//!
//! Resume is exact: the data order is a function of (seed, epoch), dropout's
//! RNG is reseeded from (seed, global step) before each step, and the
//! checkpoint holds the weights, batch-norm statistics and AdamW's moments.

use crate::checkpoint;
use crate::data::{self, Dataset};
use crate::fault::Faults;
use crate::metrics::{self, TaskMetrics};
use crate::model::Net;
use crate::optim::{self, AdamW, LossScaler};
use crate::panics;
use crate::shim;
use crate::step::{self, Amp};
use common::config::{Config, Precision, Task};
use common::failures::{self, Class};
use common::model::ModelSpec;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::{nn, Device, Kind, Tensor};

pub const CHECKPOINT: &str = "checkpoint.safetensors";
pub const BEST: &str = "best.safetensors";
pub const CHECKPOINT_SCHEMA: &str = "train-checkpoint/v1";

#[derive(Clone, Debug, Serialize)]
pub struct EpochRecord {
    pub epoch: u32,
    pub epochs: u32,
    pub train_loss: f64,
    pub val_loss: f64,
    pub lr: f64,
    pub seconds: f64,
    pub samples_per_s: f64,
    /// Peak GPU memory in the epoch; None where it cannot be read (CPU).
    pub peak_allocated_mib: Option<f64>,
    pub peak_reserved_mib: Option<f64>,
    /// Steps whose update was skipped in this epoch (fp16 overflow, or a
    /// non-finite loss).
    pub skipped_steps: u64,
    /// Out-of-memory errors recovered in this epoch.
    pub oom_events: u64,
    /// The micro-batch in use at the end of the epoch.
    pub micro_batch: u32,
    #[serde(flatten)]
    pub metrics: TaskMetrics,
}

/// The run's GPU memory, from the allocator view, or why it is unknown.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PeakMemory {
    pub allocated_mib: Option<f64>,
    pub reserved_mib: Option<f64>,
    pub alloc_retries: Option<i64>,
    pub ooms: Option<i64>,
    pub note: Option<String>,
}

pub enum Event<'a> {
    Batch {
        epoch: u32,
        done: u64,
        total: u64,
        loss: f64,
    },
    EpochEnd(&'a EpochRecord),
    NewBest {
        val_loss: f64,
    },
}

pub trait Listener {
    fn on(&mut self, event: &Event) -> anyhow::Result<()>;
}

pub struct Trainer {
    pub config: Config,
    pub out: PathBuf,
    pub device: Device,
    vs: nn::VarStore,
    net: Net,
    opt: AdamW,
    train: Dataset,
    val: Dataset,
    /// First epoch to run (1-based); > 1 after a resume.
    pub start_epoch: u32,
    pub best: Option<(u32, f64)>,
    pub last: Option<EpochRecord>,
    /// fp16 only.
    pub scaler: Option<LossScaler>,
    pub peak: PeakMemory,
    /// The micro-batch in use (None: whole batches).
    pub micro_batch: Option<u32>,
    pub oom_events: Vec<OomEvent>,
    non_finite: u64,
    non_finite_streak: u32,
}

#[derive(Debug)]
pub enum Stop {
    Finished,
    /// Training cannot go on; the reason and its class go to summary.yaml.
    Failed {
        class: Class,
        reason: String,
    },
}

/// A recovered out-of-memory error (metrics.csv counts them, summary.yaml
/// lists them).
#[derive(Clone, Debug, Serialize)]
pub struct OomEvent {
    pub epoch: u32,
    pub step: u64,
    pub old_micro_batch: u32,
    pub new_micro_batch: u32,
    /// The allocator's figures at the failure; null off the GPU.
    pub allocated_mib: Option<f64>,
    pub reserved_mib: Option<f64>,
    pub message: String,
}

/// Non-finite losses in a row that end the run (single ones are skipped).
pub const NON_FINITE_LIMIT: u32 = 3;

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

fn mib_or_na(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.0} MiB"))
}

impl Trainer {
    pub fn new(config: Config, out: PathBuf, device: Device) -> anyhow::Result<Trainer> {
        let (train, val) = data::load(&config)?;
        check_data(&config, &train, "training")?;
        check_data(&config, &val, "validation")?;
        let vs = nn::VarStore::new(device);
        tch::manual_seed(config.seed as i64);
        let net = Net::new(&vs.root(), &config);
        let opt = AdamW::new(&vs, config.weight_decay);
        let config_precision = config.mixed_precision;
        let config_micro = config.micro_batch_size;
        Ok(Trainer {
            train: train.to(device),
            val: val.to(device),
            config,
            out,
            device,
            vs,
            net,
            opt,
            start_epoch: 1,
            best: None,
            last: None,
            scaler: (config_precision == Precision::Fp16).then(LossScaler::default),
            peak: PeakMemory::default(),
            micro_batch: config_micro,
            oom_events: Vec::new(),
            non_finite: 0,
            non_finite_streak: 0,
        })
    }

    pub fn parameter_count(&self) -> i64 {
        self.vs
            .variables()
            .values()
            .filter(|t| t.requires_grad())
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }

    /// Model tensors by name (weights and batch-norm statistics).
    pub fn named_weights(&self) -> Vec<(String, Tensor)> {
        let mut v: Vec<(String, Tensor)> = self.vs.variables().into_iter().collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    fn steps_per_epoch(&self) -> u64 {
        (self.train.len() as u64).div_ceil(u64::from(self.config.batch_size))
    }

    /// Restores the state of `dir`'s checkpoint.
    pub fn resume(&mut self, dir: &Path) -> anyhow::Result<()> {
        let path = dir.join(CHECKPOINT);
        let name = path.display();
        let loaded = checkpoint::load(&path)?;
        let meta = |k: &str| {
            loaded
                .metadata
                .get(k)
                .cloned()
                .ok_or_else(|| common::bad_input!("{name}: metadata lacks `{k}`"))
        };
        if meta("schema")? != CHECKPOINT_SCHEMA {
            return Err(common::bad_input!(
                "{name}: expected a {CHECKPOINT_SCHEMA} checkpoint"
            ));
        }
        let num = |k: &str| -> anyhow::Result<f64> {
            meta(k)?
                .parse()
                .map_err(|_| common::bad_input!("{name}: metadata `{k}` is not a number"))
        };
        tch::no_grad(|| -> anyhow::Result<()> {
            for (n, mut t) in self.vs.variables() {
                let src = loaded.tensors.get(&n).ok_or_else(|| {
                    common::bad_input!("{name}: no tensor `{n}` (a checkpoint of another model?)")
                })?;
                if src.size() != t.size() {
                    return Err(common::bad_input!(
                        "{name}: tensor `{n}` has shape {:?}, the model {:?}",
                        src.size(),
                        t.size()
                    ));
                }
                t.f_copy_(&src.to_device(self.device))?;
            }
            Ok(())
        })?;
        self.opt
            .load_state(&loaded.tensors, num("adam_steps")? as i64)?;
        self.start_epoch = num("epoch")? as u32 + 1;
        if let Ok(m) = num("micro_batch") {
            self.micro_batch = Some(m as u32);
        }
        if let Some(scaler) = &mut self.scaler {
            scaler.scale = num("loss_scale")?;
            scaler.good_steps = num("loss_scale_good_steps")? as u64;
            scaler.skipped = num("skipped_steps")? as u64;
        }
        let best_epoch = num("best_epoch")? as u32;
        self.best =
            (best_epoch > 0).then(|| (best_epoch, num("best_val_loss").unwrap_or(f64::INFINITY)));
        Ok(())
    }

    /// Starts from the checkpoint in `dir` written by another config (the
    /// fallback chain): model tensors whose name and shape match are copied,
    /// the others keep their fresh initialisation; the optimizer starts
    /// fresh; epochs continue. Returns (tensors carried, model tensors).
    pub fn carry_from(&mut self, dir: &Path) -> anyhow::Result<(usize, usize)> {
        let path = dir.join(CHECKPOINT);
        let loaded = checkpoint::load(&path)?;
        let vars = self.vs.variables();
        let mut carried = 0;
        tch::no_grad(|| -> anyhow::Result<()> {
            for (n, t) in &vars {
                if let Some(src) = loaded.tensors.get(n).filter(|s| s.size() == t.size()) {
                    t.shallow_clone().f_copy_(&src.to_device(self.device))?;
                    carried += 1;
                }
            }
            Ok(())
        })?;
        let epoch: u32 = loaded
            .metadata
            .get("epoch")
            .and_then(|e| e.parse().ok())
            .ok_or_else(|| common::bad_input!("{}: metadata lacks `epoch`", path.display()))?;
        self.start_epoch = epoch + 1;
        // A different model's validation losses are not this one's best.
        self.best = None;
        Ok((carried, vars.len()))
    }

    fn save_checkpoint(&self, epoch: u32) -> anyhow::Result<()> {
        let mut tensors = self.named_weights();
        tensors.extend(self.opt.state());
        let (best_epoch, best_loss) = self.best.unwrap_or((0, f64::INFINITY));
        let mut meta: BTreeMap<String, String> = [
            ("schema", CHECKPOINT_SCHEMA.to_string()),
            ("epoch", epoch.to_string()),
            ("adam_steps", self.opt.steps.to_string()),
            ("best_epoch", best_epoch.to_string()),
            ("best_val_loss", best_loss.to_string()),
            // Dropout's RNG is reseeded from (seed, step) each step, and the
            // data order from (seed, epoch): these two numbers are its state.
            ("seed", self.config.seed.to_string()),
            (
                "global_step",
                (u64::from(epoch) * self.steps_per_epoch()).to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(m) = self.micro_batch {
            meta.insert("micro_batch".into(), m.to_string());
        }
        if let Some(s) = &self.scaler {
            meta.insert("loss_scale".into(), s.scale.to_string());
            meta.insert("loss_scale_good_steps".into(), s.good_steps.to_string());
            meta.insert("skipped_steps".into(), s.skipped.to_string());
        }
        checkpoint::save(&self.out.join(CHECKPOINT), &tensors, meta)
    }

    /// One attempt at a step: the batch split into micro-batches whose
    /// gradients accumulate to the whole batch's (each loss weighted by its
    /// share). Returns the batch's mean loss. `fail_alloc`: the `alloc` test
    /// fault.
    fn attempt(
        &self,
        frames: &Tensor,
        scalars: &Tensor,
        target: &Tensor,
        micro: i64,
        fail_alloc: bool,
    ) -> Result<f64, tch::TchError> {
        let c = &self.config;
        let n = frames.size()[0];
        let amp = Amp {
            device: self.device,
            precision: c.mixed_precision,
            loss_scale: self.scaler.as_ref().map(|s| s.scale),
        };
        if fail_alloc {
            // The `alloc` fault: libtorch's allocator refuses, under autocast,
            // where a layer's forward would allocate.
            let _never = amp.run(|| {
                Tensor::empty(
                    [crate::fault::IMPOSSIBLE_FLOATS],
                    (tch::Kind::Float, self.device),
                )
            })?;
        }
        let mut loss = 0.0;
        for start in (0..n).step_by(micro.max(1) as usize) {
            let len = micro.min(n - start);
            let weight = len as f64 / n as f64;
            let (f, s, t) = (
                frames.narrow(0, start, len),
                scalars.narrow(0, start, len),
                target.narrow(0, start, len),
            );
            loss += weight
                * step::forward_backward(
                    &self.net,
                    c,
                    &f,
                    &s,
                    &t,
                    c.gradient_checkpointing,
                    &amp,
                    weight,
                )?;
        }
        Ok(loss)
    }

    /// Runs the remaining epochs. A failure of the run itself (out of memory
    /// at micro-batch 1, a libtorch error, a loss that stays non-finite) is a
    /// `Stop::Failed`; I/O errors are errors.
    pub fn run(&mut self, listeners: &mut [&mut dyn Listener]) -> anyhow::Result<Stop> {
        let c = self.config.clone();
        let steps = self.steps_per_epoch();
        let total = steps * u64::from(c.epochs);
        let warmup = steps * u64::from(c.warmup_epochs);
        let n = self.train.len() as usize;
        let mut faults = Faults::from_env()?;
        for epoch in self.start_epoch..=c.epochs {
            // Peaks per epoch; on CPU this answers "not available".
            let _ = shim::reset_peak(self.device);
            let skipped_before = self.skipped_total();
            let ooms_before = self.oom_events.len();
            let started = Instant::now();
            let order = data::shuffled(n, c.seed, u64::from(epoch));
            let mut loss_sum = 0.0;
            let mut seen = 0i64;
            let mut lr = 0.0;
            for (i, chunk) in order.chunks(c.batch_size as usize).enumerate() {
                let step_no = i as u64 + 1;
                faults.before_step(epoch, step_no);
                let global = u64::from(epoch - 1) * steps + i as u64;
                lr = optim::lr_at(c.learning_rate, global, warmup, total);
                let idx = Tensor::from_slice(chunk).to_device(self.device);
                let (frames, scalars, target) = self.train.batch(&idx);
                let loss = loop {
                    // Every attempt starts from the same RNG state, so a
                    // retried step draws the same dropout masks.
                    tch::manual_seed(
                        (c.seed as i64)
                            .wrapping_mul(1_000_003)
                            .wrapping_add(global as i64),
                    );
                    self.opt.zero_grad();
                    let micro = self
                        .micro_batch
                        .map_or(chunk.len() as i64, i64::from)
                        .min(chunk.len() as i64);
                    let result = match faults.error(epoch, step_no) {
                        Some(e) => Err(e),
                        None => {
                            let fail_alloc = faults.alloc(epoch, step_no);
                            // libtorch errors that tch raises as panics (an
                            // out-of-memory error in a layer's forward) come
                            // back as errors, to be classified like the rest.
                            panics::catch(|| {
                                self.attempt(&frames, &scalars, &target, micro, fail_alloc)
                            })
                        }
                    };
                    let e = match result {
                        Ok(l) if faults.nan_loss(epoch, step_no) => break f64::NAN * l,
                        Ok(l) => break l,
                        Err(e) => e,
                    };
                    let message = e.to_string();
                    let class = failures::classify(&message);
                    if class != Class::OutOfMemory {
                        return Ok(Stop::Failed {
                            class,
                            reason: format!("epoch {epoch} step {step_no}: {message}"),
                        });
                    }
                    // Out of memory: free what the step held, split the batch
                    // further, and try the same step again.
                    self.opt.zero_grad();
                    let stats = shim::memory_stats(self.device).ok();
                    let _ = shim::empty_cache(self.device);
                    if micro <= 1 {
                        return Ok(Stop::Failed {
                            class,
                            reason: format!("out of memory at epoch {epoch} step {step_no} even with micro-batches of 1: {}", first_line(&message)),
                        });
                    }
                    let new = ((micro + 1) / 2) as u32;
                    let event = OomEvent {
                        epoch,
                        step: step_no,
                        old_micro_batch: micro as u32,
                        new_micro_batch: new,
                        allocated_mib: stats.map(|m| m.allocated as f64 / 1048576.0),
                        reserved_mib: stats.map(|m| m.reserved as f64 / 1048576.0),
                        message: first_line(&message).to_string(),
                    };
                    eprintln!(
                        "train: out of memory at epoch {epoch} step {step_no}: micro-batch {micro} -> {new}, same step again (allocated {}, reserved {})",
                        mib_or_na(event.allocated_mib),
                        mib_or_na(event.reserved_mib)
                    );
                    self.oom_events.push(event);
                    self.micro_batch = Some(new);
                };
                if !loss.is_finite() {
                    // Skip the update; several in a row mean the config diverges.
                    self.opt.zero_grad();
                    self.non_finite += 1;
                    self.non_finite_streak += 1;
                    eprintln!(
                        "train: loss is {loss} at epoch {epoch} step {step_no}: update skipped"
                    );
                    if self.non_finite_streak >= NON_FINITE_LIMIT {
                        return Ok(Stop::Failed {
                            class: Class::NonFiniteLoss,
                            reason: format!("loss is {loss} for {NON_FINITE_LIMIT} steps in a row (epoch {epoch} step {step_no})"),
                        });
                    }
                    continue;
                }
                self.non_finite_streak = 0;
                let apply = match &mut self.scaler {
                    Some(s) => {
                        let found_inf = self.opt.unscale_grads(s.scale);
                        s.update(found_inf)
                    }
                    None => true,
                };
                if apply {
                    if let Some(max) = c.grad_clip {
                        self.opt.clip_grad_norm(max);
                    }
                    self.opt.step(lr);
                }
                loss_sum += loss * chunk.len() as f64;
                seen += chunk.len() as i64;
                for l in listeners.iter_mut() {
                    l.on(&Event::Batch {
                        epoch,
                        done: step_no,
                        total: steps,
                        loss,
                    })?;
                }
            }
            let train_seconds = started.elapsed().as_secs_f64();
            let (val_loss, metrics) = match self.evaluate() {
                Ok(v) => v,
                Err(e) => {
                    let message = e.to_string();
                    return Ok(Stop::Failed {
                        class: failures::classify(&message),
                        reason: format!("validation after epoch {epoch}: {message}"),
                    });
                }
            };
            let (peak_allocated_mib, peak_reserved_mib) = self.read_memory();
            let record = EpochRecord {
                epoch,
                epochs: c.epochs,
                // NaN, not 0, when every step of the epoch was skipped.
                train_loss: if seen > 0 {
                    loss_sum / seen as f64
                } else {
                    f64::NAN
                },
                val_loss,
                lr,
                seconds: started.elapsed().as_secs_f64(),
                samples_per_s: seen as f64 / train_seconds.max(1e-9),
                peak_allocated_mib,
                peak_reserved_mib,
                skipped_steps: self.skipped_total() - skipped_before,
                oom_events: (self.oom_events.len() - ooms_before) as u64,
                micro_batch: self.micro_batch.unwrap_or(c.batch_size).min(c.batch_size),
                metrics,
            };
            let improved = val_loss.is_finite() && self.best.is_none_or(|(_, b)| val_loss < b);
            if improved {
                self.best = Some((epoch, val_loss));
                checkpoint::save(&self.out.join(BEST), &self.named_weights(), BTreeMap::new())?;
            }
            // The checkpoint goes last: once it names this epoch, everything
            // of the epoch (metrics row, best model) is on disk.
            for l in listeners.iter_mut() {
                l.on(&Event::EpochEnd(&record))?;
                if improved {
                    l.on(&Event::NewBest { val_loss })?;
                }
            }
            self.save_checkpoint(epoch)?;
            self.last = Some(record);
        }
        Ok(Stop::Finished)
    }

    /// Steps whose update was skipped: fp16 overflow or a non-finite loss.
    fn skipped_total(&self) -> u64 {
        self.scaler.as_ref().map_or(0, |s| s.skipped) + self.non_finite
    }

    /// This epoch's peaks (MiB), folded into the run's; None off the GPU.
    fn read_memory(&mut self) -> (Option<f64>, Option<f64>) {
        const MIB: f64 = 1024.0 * 1024.0;
        match shim::memory_stats(self.device) {
            Ok(m) => {
                let (a, r) = (m.peak_allocated as f64 / MIB, m.peak_reserved as f64 / MIB);
                let p = &mut self.peak;
                p.allocated_mib = Some(p.allocated_mib.map_or(a, |x| x.max(a)));
                p.reserved_mib = Some(p.reserved_mib.map_or(r, |x| x.max(r)));
                p.alloc_retries = Some(m.alloc_retries);
                p.ooms = Some(m.ooms);
                (Some(a), Some(r))
            }
            Err(why) => {
                self.peak.note = Some(why);
                (None, None)
            }
        }
    }

    /// Validation loss and task metrics, in eval mode without gradients, in
    /// chunks of the micro-batch: after an out-of-memory recovery the whole
    /// batch may not fit, a micro-batch did with gradients. (In eval mode each
    /// example's output is independent of the others in its chunk.)
    pub fn evaluate(&self) -> Result<(f64, TaskMetrics), tch::TchError> {
        panics::catch(|| Ok(self.evaluate_chunks()))
    }

    fn evaluate_chunks(&self) -> (f64, TaskMetrics) {
        let c = &self.config;
        let _guard = tch::no_grad_guard();
        let n = self.val.len();
        let chunk = self
            .micro_batch
            .map_or(c.batch_size, |m| m.clamp(1, c.batch_size));
        let mut outs = Vec::new();
        let mut loss_sum = 0.0;
        for start in (0..n).step_by(chunk as usize) {
            let len = (chunk as i64).min(n - start);
            let idx = Tensor::arange_start(start, start + len, (Kind::Int64, self.device));
            let (frames, scalars, target) = self.val.batch(&idx);
            let out = shim::autocast(self.device, c.mixed_precision, || {
                self.net.forward(&frames, &scalars, false)
            })
            .unwrap_or_else(|_| self.net.forward(&frames, &scalars, false));
            loss_sum += step::loss(c, &out, &target).double_value(&[]) * len as f64;
            outs.push(out);
        }
        let out = Tensor::cat(&outs, 0);
        let metrics = match c.task {
            Task::Regression => metrics::regression(&out, &self.val.target),
            Task::Classification => {
                metrics::classification(&out, &self.val.target, c.num_labels as i64)
            }
        };
        (loss_sum / n.max(1) as f64, metrics)
    }

    /// Training and validation examples loaded.
    pub fn examples(&self) -> (i64, i64) {
        (self.train.len(), self.val.len())
    }

    /// The estimate's parameter count, for the start-up line.
    pub fn expected_parameters(&self) -> u64 {
        ModelSpec::from_config(&self.config).parameter_count()
    }
}

/// Seed 004's defensive data pass: labels in [0, num_labels), no NaN or inf,
/// before anything touches the GPU.
pub fn check_data(c: &Config, d: &Dataset, which: &str) -> anyhow::Result<()> {
    let bad_at = |mask: Tensor| -> Option<i64> {
        let idx = mask.nonzero();
        (idx.size()[0] > 0).then(|| idx.int64_value(&[0, 0]))
    };
    let flat = |t: &Tensor| t.reshape([t.size()[0], -1]).to_kind(Kind::Float);
    for (name, t) in [("frames", &d.frames), ("scalars", &d.scalars)] {
        if t.numel() > 0 {
            if let Some(i) = bad_at(flat(t).isfinite().logical_not().any_dim(1, false)) {
                return Err(common::bad_input!(
                    "{which} data: tensor `{name}`: NaN or inf in example {i}"
                ));
            }
        }
    }
    match c.task {
        Task::Regression => {
            if let Some(i) = bad_at(d.target.isfinite().logical_not()) {
                return Err(common::bad_input!(
                    "{which} data: tensor `target`: NaN or inf in example {i}"
                ));
            }
        }
        Task::Classification => {
            let k = c.num_labels as i64;
            let counts: Vec<String> = (0..k)
                .map(|label| {
                    format!(
                        "{label}: {}",
                        d.target.eq(label).sum(Kind::Int64).int64_value(&[])
                    )
                })
                .collect();
            eprintln!("train: {which} labels: {}", counts.join(", "));
            if let Some(i) = bad_at(d.target.lt(0).logical_or(&d.target.ge(k))) {
                return Err(common::bad_input!(
                    "{which} data: tensor `target`: label {} in example {i} is outside [0, {k}) (num_labels {k}); cross-entropy would raise a device-side assert on a GPU",
                    d.target.int64_value(&[i])
                ));
            }
        }
    }
    Ok(())
}
