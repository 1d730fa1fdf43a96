//! The training loop. It neither prints nor writes files other than the
//! checkpoints: it emits events (events.rs) that listeners turn into console
//! lines, metrics.csv, curves.png and summary.yaml. It is split into an
//! epoch, a step with its out-of-memory recovery, and validation; when to
//! save is `strategy`, how is `checkpoint`. Test faults and the stop request
//! (`Interrupter`) are handed in.
//!
//! Resume is exact: the data order is a function of (seed, epoch), dropout's
//! RNG is reseeded from (seed, global step) before each step, and the
//! checkpoint holds the weights, batch-norm statistics and AdamW's moments.

use crate::model::data::{self, Dataset};
use crate::model::optim::{self, AdamW, LossScaler};
use crate::model::Model;
use crate::system::panics;
use crate::system::shim;
use crate::training::checkpoint::Checkpointer;
use crate::training::events::{Event, Listeners, Skip};
use crate::training::fault::Faults;
use crate::training::progress::{self, Progress, NON_FINITE_LIMIT};
use crate::training::step::{self, Amp};
use crate::training::strategy::{EveryEpochBestByValLoss, SaveStrategy};
use crate::training::validation;
use crate::training::Interrupter;
use common::config::{Config, Precision};
use common::model::ModelSpec;
use common::wire::failure::Class;
use common::wire::train::{Best, CheckpointMeta, EpochRow, OomEvent};
use common::wire::Versioned;
use diagnose::failures;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

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

/// Go on, or stop the run with this outcome.
type Flow<T> = anyhow::Result<ControlFlow<Stop, T>>;

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

/// The class balance of a set (classification), by the set's name.
pub(crate) type Labels = Vec<(&'static str, BTreeMap<i64, i64>)>;

/// The datasets, on the device, and their class balance.
struct Data {
    train: Dataset,
    val: Dataset,
    labels: Labels,
}

pub struct Trainer {
    config: Config,
    model: Model,
    opt: AdamW,
    /// fp16 only.
    scaler: Option<LossScaler>,
    data: Data,
    checkpointer: Checkpointer,
    strategy: Box<dyn SaveStrategy>,
    progress: Progress,
}

impl Trainer {
    /// A trainer of `config` on `device`, whose checkpoints go through
    /// `checkpointer` (the loop knows no files).
    pub fn new(
        config: Config,
        checkpointer: Checkpointer,
        device: Device,
    ) -> anyhow::Result<Trainer> {
        let (train, val) = data::load(&config)?;
        let mut labels = Vec::new();
        for (which, d) in [("training", &train), ("validation", &val)] {
            if let Some(counts) = data::check(&config, d, which)? {
                labels.push((which, counts));
            }
        }
        let model = Model::new(&config, device);
        let opt = AdamW::new(&model.vs, config.weight_decay);
        Ok(Trainer {
            data: Data {
                train: train.to(device),
                val: val.to(device),
                labels,
            },
            scaler: (config.mixed_precision == Precision::Fp16).then(LossScaler::default),
            progress: Progress::new(config.micro_batch_size),
            config,
            model,
            opt,
            checkpointer,
            strategy: Box::new(EveryEpochBestByValLoss),
        })
    }

    pub(crate) fn parameter_count(&self) -> i64 {
        self.model.parameter_count()
    }

    /// The estimate's parameter count, for the start-up line.
    pub(crate) fn expected_parameters(&self) -> u64 {
        ModelSpec::from_config(&self.config).parameter_count()
    }

    /// Training and validation examples loaded.
    pub(crate) fn examples(&self) -> (i64, i64) {
        (self.data.train.len(), self.data.val.len())
    }

    /// The class balance of each set (classification).
    pub(crate) fn labels(&self) -> &Labels {
        &self.data.labels
    }

    /// Where the run stands: epochs, best, micro-batch, peaks.
    pub(crate) fn progress(&self) -> &Progress {
        &self.progress
    }

    fn steps_per_epoch(&self) -> u64 {
        (self.data.train.len() as u64).div_ceil(u64::from(self.config.batch_size))
    }

    /// Restores the state of the run directory's checkpoint.
    pub(crate) fn resume(&mut self) -> anyhow::Result<()> {
        let (loaded, meta) = self.checkpointer.load()?;
        let name = self.checkpointer.path().display().to_string();
        let device = self.model.device();
        tch::no_grad(|| -> anyhow::Result<()> {
            for (n, mut t) in self.model.vs.variables() {
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
                t.f_copy_(&src.to_device(device))?;
            }
            Ok(())
        })?;
        self.opt.load_state(&loaded.tensors, meta.adam_steps)?;
        self.progress.start_epoch = meta.epoch + 1;
        if let Some(m) = meta.micro_batch {
            self.progress.micro_batch = Some(m);
        }
        if let Some(scaler) = &mut self.scaler {
            fn field<T>(v: Option<T>, name: &str, k: &str) -> anyhow::Result<T> {
                v.ok_or_else(|| common::bad_input!("{name}: metadata lacks `{k}` (an fp16 run)"))
            }
            scaler.scale = field(meta.loss_scale, &name, "loss_scale")?;
            scaler.good_steps = field(meta.loss_scale_good_steps, &name, "loss_scale_good_steps")?;
            scaler.skipped = field(meta.skipped_steps, &name, "skipped_steps")?;
        }
        self.progress.best = (meta.best_epoch > 0).then_some(Best {
            epoch: meta.best_epoch,
            val_loss: meta.best_val_loss,
        });
        Ok(())
    }

    /// Starts from the run directory's checkpoint written by another config
    /// (the fallback chain): model tensors whose name and shape match are
    /// copied, the others keep their fresh initialisation; the optimizer
    /// starts fresh; epochs continue. Returns (tensors carried, model tensors).
    pub(crate) fn carry_from_checkpoint(&mut self) -> anyhow::Result<(usize, usize)> {
        let (loaded, meta) = self.checkpointer.load()?;
        let vars = self.model.vs.variables();
        let device = self.model.device();
        let mut carried = 0;
        tch::no_grad(|| -> anyhow::Result<()> {
            for (n, t) in &vars {
                if let Some(src) = loaded.tensors.get(n).filter(|s| s.size() == t.size()) {
                    t.shallow_clone().f_copy_(&src.to_device(device))?;
                    carried += 1;
                }
            }
            Ok(())
        })?;
        self.progress.start_epoch = meta.epoch + 1;
        // A different model's validation losses are not this one's best.
        self.progress.best = None;
        Ok((carried, vars.len()))
    }

    fn save_checkpoint(&self, epoch: u32) -> anyhow::Result<()> {
        let mut tensors = self.model.named_weights();
        tensors.extend(self.opt.state());
        let best = self.progress.best.unwrap_or(Best {
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
            micro_batch: self.progress.micro_batch,
            loss_scale: self.scaler.as_ref().map(|s| s.scale),
            loss_scale_good_steps: self.scaler.as_ref().map(|s| s.good_steps),
            skipped_steps: self.scaler.as_ref().map(|s| s.skipped),
        };
        self.checkpointer.save(&tensors, &meta)
    }

    /// Runs the remaining epochs. A failure of the run itself (out of memory
    /// at micro-batch 1, a libtorch error, a loss that stays non-finite) is a
    /// `Stop::Failed`; a stop asked through `interrupter` is a
    /// `Stop::Stopped`; I/O errors are errors.
    pub fn run(
        &mut self,
        faults: &mut Faults,
        interrupter: &Interrupter,
        events: &mut Listeners,
    ) -> anyhow::Result<Stop> {
        for epoch in self.progress.start_epoch..=self.config.epochs {
            if let ControlFlow::Break(stop) = self.epoch(epoch, faults, interrupter, events)? {
                return Ok(stop);
            }
        }
        Ok(Stop::Finished)
    }

    /// One epoch: its steps, validation, the row, and the saves.
    fn epoch(
        &mut self,
        epoch: u32,
        faults: &mut Faults,
        interrupter: &Interrupter,
        events: &mut Listeners,
    ) -> Flow<()> {
        // Peaks per epoch; on CPU this answers "not available".
        let _ = shim::reset_peak(self.model.device());
        let started = Instant::now();
        let totals = match self.steps(epoch, faults, interrupter, events)? {
            ControlFlow::Break(stop) => return Ok(ControlFlow::Break(stop)),
            ControlFlow::Continue(t) => t,
        };
        let train_seconds = started.elapsed().as_secs_f64();
        let chunk = self.micro_batch_for(self.config.batch_size).max(1);
        let (val_loss, m) = match validation::validate(
            &self.model.net,
            &self.config,
            &self.data.val,
            self.model.device(),
            chunk,
        ) {
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
            train_loss: if totals.seen > 0 {
                totals.loss_sum / totals.seen as f64
            } else {
                f64::NAN
            },
            val_loss,
            lr: totals.lr,
            seconds: started.elapsed().as_secs_f64(),
            samples_per_s: totals.seen as f64 / train_seconds.max(1e-9),
            peak_allocated_mib,
            peak_reserved_mib,
            skipped_steps: totals.skipped,
            oom_events: totals.ooms,
            micro_batch: self.micro_batch_for(self.config.batch_size),
            mae: m.mae,
            rmse: m.rmse,
            r2: m.r2,
            accuracy: m.accuracy,
            macro_f1: m.macro_f1,
        };
        self.end_epoch(row, events)?;
        Ok(ControlFlow::Continue(()))
    }

    /// The micro-batch for a batch of `n` examples (`Progress`).
    fn micro_batch_for(&self, n: u32) -> u32 {
        self.progress.micro_batch_for(n)
    }

    /// The epoch's training steps, in the epoch's order of the data.
    fn steps(
        &mut self,
        epoch: u32,
        faults: &mut Faults,
        interrupter: &Interrupter,
        events: &mut Listeners,
    ) -> Flow<EpochTotals> {
        let c = self.config.clone();
        let steps = self.steps_per_epoch();
        let total = steps * u64::from(c.epochs);
        let warmup = steps * u64::from(c.warmup_epochs);
        let order = data::shuffled(self.data.train.len() as usize, c.seed, u64::from(epoch));
        let mut t = EpochTotals::default();
        for (i, chunk) in order.chunks(c.batch_size as usize).enumerate() {
            let at = StepAt {
                epoch,
                step: i as u64 + 1,
                global: u64::from(epoch - 1) * steps + i as u64,
            };
            if interrupter.should_stop() {
                return Ok(ControlFlow::Break(Stop::Stopped {
                    reason: format!(
                        "stopped on request (SIGINT or SIGTERM) before epoch {epoch} step {}",
                        at.step
                    ),
                }));
            }
            faults.before_step(epoch, at.step);
            t.lr = optim::lr_at(c.learning_rate, at.global, warmup, total);
            let done = match self.step(at, chunk, faults, events)? {
                ControlFlow::Break(stop) => return Ok(ControlFlow::Break(stop)),
                ControlFlow::Continue(done) => done,
            };
            t.ooms += done.ooms;
            let Some(loss) = done.loss else {
                t.skipped += 1;
                continue;
            };
            if !optim::apply_update(&mut self.opt, self.scaler.as_mut(), c.grad_clip, t.lr) {
                t.skipped += 1;
                let new_scale = self.scaler.as_ref().map_or(1.0, |s| s.scale);
                events.emit(&Event::StepSkipped {
                    epoch,
                    step: at.step,
                    why: Skip::Fp16Overflow { new_scale },
                })?;
            }
            t.loss_sum += loss * chunk.len() as f64;
            t.seen += chunk.len() as i64;
            events.emit(&Event::Batch {
                epoch,
                done: at.step,
                total: steps,
                loss,
            })?;
        }
        Ok(ControlFlow::Continue(t))
    }

    /// After an epoch's row: the best model, the events, the checkpoint.
    fn end_epoch(&mut self, row: EpochRow, events: &mut Listeners) -> anyhow::Result<()> {
        let decision = self.strategy.after_epoch(&row, self.progress.best);
        if decision.new_best {
            self.progress.best = Some(Best {
                epoch: row.epoch,
                val_loss: row.val_loss,
            });
            self.checkpointer.save_best(&self.model.named_weights())?;
        }
        events.emit(&Event::EpochEnd(&row))?;
        if let (true, Some(best)) = (decision.new_best, self.progress.best) {
            events.emit(&Event::NewBest(best))?;
        }
        // The checkpoint goes last: once it names this epoch, everything of
        // the epoch (metrics row, best model) is on disk.
        if decision.checkpoint {
            self.save_checkpoint(row.epoch)?;
        }
        self.progress.last = Some(row);
        Ok(())
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
        let idx = Tensor::from_slice(chunk).to_device(self.model.device());
        let (frames, scalars, target) = self.data.train.batch(&idx);
        let bn_before = self.model.save_buffers();
        let mut ooms = 0;
        let loss = loop {
            // Every attempt starts from the same RNG state, so a retried step
            // draws the same dropout masks.
            tch::manual_seed(
                (self.config.seed as i64)
                    .wrapping_mul(1_000_003)
                    .wrapping_add(at.global as i64),
            );
            self.opt.zero_grad();
            let micro = self.micro_batch_for(chunk.len() as u32);
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
            match result {
                Ok(l) if faults.nan_loss(at.epoch, at.step) => break f64::NAN * l,
                Ok(l) => break l,
                Err(e) => {
                    if let ControlFlow::Break(stop) =
                        self.recover(at, e, micro, &bn_before, events)?
                    {
                        return Ok(ControlFlow::Break(stop));
                    }
                    ooms += 1;
                }
            }
        };
        if !loss.is_finite() {
            // Skip the update; several in a row mean the config diverges.
            self.opt.zero_grad();
            let diverged = self.progress.non_finite_loss();
            events.emit(&Event::StepSkipped {
                epoch: at.epoch,
                step: at.step,
                why: Skip::NonFiniteLoss(loss),
            })?;
            if diverged {
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
        self.progress.finite_loss();
        Ok(ControlFlow::Continue(StepDone {
            loss: Some(loss),
            ooms,
        }))
    }

    /// After a step's attempt at micro-batch `micro` failed with `e`: an
    /// out-of-memory error frees what the step held, undoes what its partial
    /// forward did to batch norm's running statistics and halves the
    /// micro-batch, for the same step again; anything else, or out of
    /// memory at micro-batch 1, stops the run.
    fn recover(
        &mut self,
        at: StepAt,
        e: tch::TchError,
        micro: u32,
        bn_before: &[Tensor],
        events: &mut Listeners,
    ) -> Flow<()> {
        let message = e.to_string();
        let class = failures::classify(&message);
        let (epoch, step_no) = (at.epoch, at.step);
        if class != Class::OutOfMemory {
            return Ok(ControlFlow::Break(Stop::Failed {
                class,
                reason: format!("epoch {epoch} step {step_no}: {message}"),
            }));
        }
        let device = self.model.device();
        self.opt.zero_grad();
        self.model.restore_buffers(bn_before)?;
        let stats = shim::memory_stats(device).ok();
        let _ = shim::empty_cache(device);
        let Some(new) = progress::halved(micro) else {
            return Ok(ControlFlow::Break(Stop::Failed {
                class,
                reason: format!("out of memory at epoch {epoch} step {step_no} even with micro-batches of 1: {}", first_line(&message)),
            }));
        };
        let event = OomEvent {
            epoch,
            step: step_no,
            old_micro_batch: micro,
            new_micro_batch: new,
            allocated_mib: stats.map(|m| shim::mib(m.allocated)),
            reserved_mib: stats.map(|m| shim::mib(m.reserved)),
            message: first_line(&message).to_string(),
        };
        events.emit(&Event::OomRecovered(&event))?;
        self.progress.micro_batch = Some(new);
        Ok(ControlFlow::Continue(()))
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
        micro: u32,
        fail_alloc: bool,
    ) -> Result<f64, tch::TchError> {
        let c = &self.config;
        let micro = i64::from(micro);
        let n = frames.size()[0];
        let amp = Amp {
            device: self.model.device(),
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
                    &self.model.net,
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
                        [crate::training::fault::IMPOSSIBLE_FLOATS],
                        (Kind::Float, amp.device),
                    )
                })?;
            }
        }
        Ok(loss)
    }

    /// This epoch's peaks (MiB), folded into the run's; None off the GPU.
    fn read_memory(&mut self) -> (Option<f64>, Option<f64>) {
        match shim::memory_stats(self.model.device()) {
            Ok(m) => {
                let (a, r) = (shim::mib(m.peak_allocated), shim::mib(m.peak_reserved));
                self.progress.fold_peak(a, r, m.alloc_retries, m.ooms);
                (Some(a), Some(r))
            }
            Err(why) => {
                self.progress.peak.note = Some(why);
                (None, None)
            }
        }
    }
}

/// What an epoch's steps add up to, for its row.
#[derive(Default)]
struct EpochTotals {
    loss_sum: f64,
    seen: i64,
    /// The learning rate of the last step.
    lr: f64,
    skipped: u64,
    ooms: u64,
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
