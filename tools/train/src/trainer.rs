//! The training loop. It neither prints nor writes files other than the
//! checkpoints: it emits events (events.rs) that listeners turn into console
//! lines, metrics.csv, curves.png and summary.yaml. It is split into an
//! epoch, a step with its out-of-memory recovery, and validation; when to
//! save is `strategy`, how is `checkpoint`. Test faults are handed in.
//!
//! Resume is exact: the data order is a function of (seed, epoch), dropout's
//! RNG is reseeded from (seed, global step) before each step, and the
//! checkpoint holds the weights, batch-norm statistics and AdamW's moments.

use crate::checkpoint::Checkpointer;
use crate::data::{self, Dataset};
use crate::events::{Event, Listeners, Skip};
use crate::fault::Faults;
use crate::metrics::{self, TaskMetrics};
use crate::model::Net;
use crate::optim::{self, AdamW, LossScaler};
use crate::panics;
use crate::shim;
use crate::step::{self, Amp};
use crate::strategy::{EveryEpochBestByValLoss, SaveStrategy};
use common::config::{Config, Precision, Task};
use common::model::ModelSpec;
use common::wire::failure::Class;
use common::wire::train::{Best, CheckpointMeta, EpochRow, OomEvent, PeakMemory};
use common::wire::Versioned;
use diagnose::failures;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;
use tch::{nn, Device, Kind, Tensor};

/// Why training cannot go on: the reason and its class go to summary.yaml.
#[derive(Debug)]
pub enum Stop {
    Finished,
    Failed {
        class: Class,
        reason: String,
    },
    /// SIGINT or SIGTERM arrived; the loop stopped before the next step.
    Stopped {
        reason: String,
    },
}

/// Set by train's SIGINT/SIGTERM handler (lib.rs): the loop stops before
/// its next step, so the run ends with its summary and a checkpoint of its
/// last whole epoch. (A sweep stops a pruned trial this way.)
pub static STOP_REQUESTED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Go on, or stop the run with this outcome.
type Flow<T> = anyhow::Result<ControlFlow<Stop, T>>;

/// Non-finite losses in a row that end the run (single ones are skipped).
pub const NON_FINITE_LIMIT: u32 = 3;

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

pub struct Trainer {
    pub config: Config,
    pub device: Device,
    vs: nn::VarStore,
    net: Net,
    opt: AdamW,
    /// Batch norm's running statistics: restored when a step is retried.
    buffers: Vec<Tensor>,
    train: Dataset,
    val: Dataset,
    /// The class balance of each set (classification).
    pub labels: Vec<(&'static str, BTreeMap<i64, i64>)>,
    checkpointer: Checkpointer,
    strategy: Box<dyn SaveStrategy>,
    /// First epoch to run (1-based); > 1 after a resume.
    pub start_epoch: u32,
    pub best: Option<Best>,
    pub last: Option<EpochRow>,
    /// fp16 only.
    pub scaler: Option<LossScaler>,
    pub peak: PeakMemory,
    /// The micro-batch in use (None: whole batches).
    pub micro_batch: Option<u32>,
    non_finite_streak: u32,
}

impl Trainer {
    pub fn new(config: Config, out: &Path, device: Device) -> anyhow::Result<Trainer> {
        let (train, val) = data::load(&config)?;
        let mut labels = Vec::new();
        for (which, d) in [("training", &train), ("validation", &val)] {
            if let Some(counts) = data::check(&config, d, which)? {
                labels.push((which, counts));
            }
        }
        let vs = nn::VarStore::new(device);
        tch::manual_seed(config.seed as i64);
        let net = Net::new(&vs.root(), &config);
        let opt = AdamW::new(&vs, config.weight_decay);
        let mut named: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| !t.requires_grad())
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Trainer {
            train: train.to(device),
            val: val.to(device),
            labels,
            scaler: (config.mixed_precision == Precision::Fp16).then(LossScaler::default),
            micro_batch: config.micro_batch_size,
            config,
            device,
            vs,
            net,
            opt,
            buffers: named.into_iter().map(|(_, t)| t).collect(),
            checkpointer: Checkpointer::new(out),
            strategy: Box::new(EveryEpochBestByValLoss),
            start_epoch: 1,
            best: None,
            last: None,
            peak: PeakMemory::default(),
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

    /// The estimate's parameter count, for the start-up line.
    pub fn expected_parameters(&self) -> u64 {
        ModelSpec::from_config(&self.config).parameter_count()
    }

    /// Training and validation examples loaded.
    pub fn examples(&self) -> (i64, i64) {
        (self.train.len(), self.val.len())
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

    /// Restores the state of the run directory's checkpoint.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        let (loaded, meta) = self.checkpointer.load()?;
        let name = self.checkpointer.path().display().to_string();
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
        self.opt.load_state(&loaded.tensors, meta.adam_steps)?;
        self.start_epoch = meta.epoch + 1;
        if let Some(m) = meta.micro_batch {
            self.micro_batch = Some(m);
        }
        if let Some(scaler) = &mut self.scaler {
            fn field<T>(v: Option<T>, name: &str, k: &str) -> anyhow::Result<T> {
                v.ok_or_else(|| common::bad_input!("{name}: metadata lacks `{k}` (an fp16 run)"))
            }
            scaler.scale = field(meta.loss_scale, &name, "loss_scale")?;
            scaler.good_steps = field(meta.loss_scale_good_steps, &name, "loss_scale_good_steps")?;
            scaler.skipped = field(meta.skipped_steps, &name, "skipped_steps")?;
        }
        self.best = (meta.best_epoch > 0).then_some(Best {
            epoch: meta.best_epoch,
            val_loss: meta.best_val_loss,
        });
        Ok(())
    }

    /// Starts from the run directory's checkpoint written by another config
    /// (the fallback chain): model tensors whose name and shape match are
    /// copied, the others keep their fresh initialisation; the optimizer
    /// starts fresh; epochs continue. Returns (tensors carried, model tensors).
    pub fn carry_from_checkpoint(&mut self) -> anyhow::Result<(usize, usize)> {
        let (loaded, meta) = self.checkpointer.load()?;
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
        self.start_epoch = meta.epoch + 1;
        // A different model's validation losses are not this one's best.
        self.best = None;
        Ok((carried, vars.len()))
    }

    fn save_checkpoint(&self, epoch: u32) -> anyhow::Result<()> {
        let mut tensors = self.named_weights();
        tensors.extend(self.opt.state());
        let best = self.best.unwrap_or(Best {
            epoch: 0,
            val_loss: f64::INFINITY,
        });
        let meta = CheckpointMeta {
            schema: CheckpointMeta::SCHEMA.into(),
            epoch,
            adam_steps: self.opt.steps,
            best_epoch: best.epoch,
            best_val_loss: best.val_loss,
            seed: self.config.seed,
            global_step: u64::from(epoch) * self.steps_per_epoch(),
            micro_batch: self.micro_batch,
            loss_scale: self.scaler.as_ref().map(|s| s.scale),
            loss_scale_good_steps: self.scaler.as_ref().map(|s| s.good_steps),
            skipped_steps: self.scaler.as_ref().map(|s| s.skipped),
        };
        self.checkpointer.save(&tensors, &meta)
    }

    /// Runs the remaining epochs. A failure of the run itself (out of memory
    /// at micro-batch 1, a libtorch error, a loss that stays non-finite) is a
    /// `Stop::Failed`; I/O errors are errors.
    pub fn run(&mut self, faults: &mut Faults, events: &mut Listeners) -> anyhow::Result<Stop> {
        for epoch in self.start_epoch..=self.config.epochs {
            if let ControlFlow::Break(stop) = self.epoch(epoch, faults, events)? {
                return Ok(stop);
            }
        }
        Ok(Stop::Finished)
    }

    /// One epoch: its steps, validation, the row, and the saves.
    fn epoch(&mut self, epoch: u32, faults: &mut Faults, events: &mut Listeners) -> Flow<()> {
        let c = self.config.clone();
        let steps = self.steps_per_epoch();
        let total = steps * u64::from(c.epochs);
        let warmup = steps * u64::from(c.warmup_epochs);
        // Peaks per epoch; on CPU this answers "not available".
        let _ = shim::reset_peak(self.device);
        let started = Instant::now();
        let order = data::shuffled(self.train.len() as usize, c.seed, u64::from(epoch));
        let (mut loss_sum, mut seen, mut lr) = (0.0, 0i64, 0.0);
        let (mut skipped, mut ooms) = (0u64, 0u64);
        for (i, chunk) in order.chunks(c.batch_size as usize).enumerate() {
            let at = StepAt {
                epoch,
                step: i as u64 + 1,
                global: u64::from(epoch - 1) * steps + i as u64,
            };
            if STOP_REQUESTED.load(std::sync::atomic::Ordering::SeqCst) {
                return Ok(ControlFlow::Break(Stop::Stopped {
                    reason: format!(
                        "stopped on request (SIGINT or SIGTERM) before epoch {epoch} step {}",
                        at.step
                    ),
                }));
            }
            faults.before_step(epoch, at.step);
            lr = optim::lr_at(c.learning_rate, at.global, warmup, total);
            let done = match self.step(at, chunk, faults, events)? {
                ControlFlow::Break(stop) => return Ok(ControlFlow::Break(stop)),
                ControlFlow::Continue(done) => done,
            };
            ooms += done.ooms;
            let Some(loss) = done.loss else {
                skipped += 1;
                continue;
            };
            if !optim::apply_update(&mut self.opt, self.scaler.as_mut(), c.grad_clip, lr) {
                skipped += 1;
                let new_scale = self.scaler.as_ref().map_or(1.0, |s| s.scale);
                events.emit(&Event::StepSkipped {
                    epoch,
                    step: at.step,
                    why: Skip::Fp16Overflow { new_scale },
                })?;
            }
            loss_sum += loss * chunk.len() as f64;
            seen += chunk.len() as i64;
            events.emit(&Event::Batch {
                epoch,
                done: at.step,
                total: steps,
                loss,
            })?;
        }
        let train_seconds = started.elapsed().as_secs_f64();
        let (val_loss, m) = match self.validate() {
            Ok(v) => v,
            Err(e) => {
                let message = e.to_string();
                return Ok(ControlFlow::Break(Stop::Failed {
                    class: failures::classify(&message),
                    reason: format!("validation after epoch {epoch}: {message}"),
                }));
            }
        };
        let (peak_allocated_mib, peak_reserved_mib) = self.read_memory();
        let row = EpochRow {
            epoch,
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
            skipped_steps: skipped,
            oom_events: ooms,
            micro_batch: self.micro_batch.unwrap_or(c.batch_size).min(c.batch_size),
            mae: m.mae,
            rmse: m.rmse,
            r2: m.r2,
            accuracy: m.accuracy,
            macro_f1: m.macro_f1,
        };
        let decision = self.strategy.after_epoch(&row, self.best);
        if decision.new_best {
            self.best = Some(Best { epoch, val_loss });
            self.checkpointer.save_best(&self.named_weights())?;
        }
        events.emit(&Event::EpochEnd(&row))?;
        if let (true, Some(best)) = (decision.new_best, self.best) {
            events.emit(&Event::NewBest(best))?;
        }
        // The checkpoint goes last: once it names this epoch, everything of
        // the epoch (metrics row, best model) is on disk.
        if decision.checkpoint {
            self.save_checkpoint(epoch)?;
        }
        self.last = Some(row);
        Ok(ControlFlow::Continue(()))
    }

    /// One step, retried with smaller micro-batches after an out-of-memory
    /// error. `loss` is None when the loss was not finite (update skipped).
    fn step(
        &mut self,
        at: StepAt,
        chunk: &[i64],
        faults: &mut Faults,
        events: &mut Listeners,
    ) -> Flow<StepDone> {
        let c = &self.config;
        let idx = Tensor::from_slice(chunk).to_device(self.device);
        let (frames, scalars, target) = self.train.batch(&idx);
        let bn_before: Vec<Tensor> = self.buffers.iter().map(Tensor::copy).collect();
        let mut ooms = 0;
        let loss = loop {
            // Every attempt starts from the same RNG state, so a retried step
            // draws the same dropout masks.
            tch::manual_seed(
                (c.seed as i64)
                    .wrapping_mul(1_000_003)
                    .wrapping_add(at.global as i64),
            );
            self.opt.zero_grad();
            let micro = self
                .micro_batch
                .map_or(chunk.len() as i64, i64::from)
                .min(chunk.len() as i64);
            let result = match faults.error(at.epoch, at.step) {
                Some(e) => Err(e),
                None => {
                    let fail_alloc = faults.alloc(at.epoch, at.step);
                    // libtorch errors that tch raises as panics (an
                    // out-of-memory error in a layer's forward) come back as
                    // errors, to be classified like the rest.
                    panics::catch(|| self.attempt(&frames, &scalars, &target, micro, fail_alloc))
                }
            };
            let e = match result {
                Ok(l) if faults.nan_loss(at.epoch, at.step) => break f64::NAN * l,
                Ok(l) => break l,
                Err(e) => e,
            };
            let message = e.to_string();
            let class = failures::classify(&message);
            let (epoch, step_no) = (at.epoch, at.step);
            if class != Class::OutOfMemory {
                return Ok(ControlFlow::Break(Stop::Failed {
                    class,
                    reason: format!("epoch {epoch} step {step_no}: {message}"),
                }));
            }
            // Out of memory: free what the step held, undo what its partial
            // forward did to batch norm's running statistics, split the
            // batch further, and try the same step again.
            self.opt.zero_grad();
            self.restore_buffers(&bn_before)?;
            let stats = shim::memory_stats(self.device).ok();
            let _ = shim::empty_cache(self.device);
            if micro <= 1 {
                return Ok(ControlFlow::Break(Stop::Failed {
                    class,
                    reason: format!("out of memory at epoch {epoch} step {step_no} even with micro-batches of 1: {}", first_line(&message)),
                }));
            }
            let new = ((micro + 1) / 2) as u32;
            let event = OomEvent {
                epoch,
                step: step_no,
                old_micro_batch: micro as u32,
                new_micro_batch: new,
                allocated_mib: stats.map(|m| shim::mib(m.allocated)),
                reserved_mib: stats.map(|m| shim::mib(m.reserved)),
                message: first_line(&message).to_string(),
            };
            events.emit(&Event::OomRecovered(&event))?;
            ooms += 1;
            self.micro_batch = Some(new);
        };
        if !loss.is_finite() {
            // Skip the update; several in a row mean the config diverges.
            self.opt.zero_grad();
            self.non_finite_streak += 1;
            events.emit(&Event::StepSkipped {
                epoch: at.epoch,
                step: at.step,
                why: Skip::NonFiniteLoss(loss),
            })?;
            if self.non_finite_streak >= NON_FINITE_LIMIT {
                return Ok(ControlFlow::Break(Stop::Failed {
                    class: Class::NonFiniteLoss,
                    reason: format!(
                        "loss is {loss} for {NON_FINITE_LIMIT} steps in a row (epoch {} step {})",
                        at.epoch, at.step
                    ),
                }));
            }
            return Ok(ControlFlow::Continue(StepDone { loss: None, ooms }));
        }
        self.non_finite_streak = 0;
        Ok(ControlFlow::Continue(StepDone {
            loss: Some(loss),
            ooms,
        }))
    }

    fn restore_buffers(&self, saved: &[Tensor]) -> anyhow::Result<()> {
        tch::no_grad(|| -> anyhow::Result<()> {
            for (b, s) in self.buffers.iter().zip(saved) {
                b.shallow_clone().f_copy_(s)?;
            }
            Ok(())
        })
    }

    /// One attempt at a step: the batch split into micro-batches whose
    /// gradients accumulate to the whole batch's (each loss weighted by its
    /// share). Returns the batch's mean loss. `fail_alloc`: the `alloc` test
    /// fault, which makes libtorch's allocator refuse after the first
    /// micro-batch's forward and backward, where a real out-of-memory error
    /// leaves batch norm's statistics already updated.
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
            if fail_alloc {
                let _never = amp.run(|| {
                    Tensor::empty(
                        [crate::fault::IMPOSSIBLE_FLOATS],
                        (Kind::Float, self.device),
                    )
                })?;
            }
        }
        Ok(loss)
    }

    /// This epoch's peaks (MiB), folded into the run's; None off the GPU.
    fn read_memory(&mut self) -> (Option<f64>, Option<f64>) {
        match shim::memory_stats(self.device) {
            Ok(m) => {
                let (a, r) = (shim::mib(m.peak_allocated), shim::mib(m.peak_reserved));
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
    pub fn validate(&self) -> Result<(f64, TaskMetrics), tch::TchError> {
        panics::catch(|| Ok(self.validate_chunks()))
    }

    fn validate_chunks(&self) -> (f64, TaskMetrics) {
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
}

/// Where a step stands: its epoch, its number in the epoch (from 1), and
/// its number in the run (from 0).
#[derive(Clone, Copy)]
struct StepAt {
    epoch: u32,
    step: u64,
    global: u64,
}

struct StepDone {
    loss: Option<f64>,
    ooms: u64,
}
