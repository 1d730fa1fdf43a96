//! train's formats: `train info` (train-info/v1), `train check-data`
//! (train-data/v1), the run directory's metrics.csv (train-metrics/v1),
//! summary.yaml (train-summary/v1), checkpoint metadata (train-checkpoint/v1)
//! and chain.yaml (train-chain/v1), and `train bench` (train-bench/v1).

use super::config::Config;
use super::failure::Class;
use super::Versioned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `train info`: the libtorch train runs on and what it can see.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainInfo {
    pub schema: String,
    pub train_version: String,
    /// Whether this train links libtorch (absent in what an older train
    /// wrote: it always did).
    #[serde(default)]
    pub libtorch: Libtorch,
    /// The libtorch version train was compiled against (its headers); empty
    /// without libtorch.
    pub torch_version: String,
    /// The directory of the libtorch this process loaded; empty without
    /// libtorch.
    pub libtorch_dir: String,
    /// libtorch_cuda is linked in (a CUDA build of torch).
    pub cuda_build: bool,
    pub cuda_available: bool,
    pub cudnn_available: bool,
    /// cuDNN version as libtorch reports it (e.g. 91900), when CUDA is usable.
    pub cudnn_version: Option<i64>,
    pub device_count: i64,
    pub devices: Vec<InfoDevice>,
    pub cpu_threads: i32,
    /// train can read the CUDA caching allocator (its C++ shim was built
    /// with the CUDA headers): peak memory figures in metrics.csv.
    pub allocator_view: bool,
    pub notes: Vec<String>,
}

/// Whether a `train` links libtorch: the source build's does; the pip
/// wheel's does not, and trains nothing itself (`train run` and program
/// sweeps only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Libtorch {
    #[default]
    #[serde(rename = "linked")]
    Linked,
    #[serde(rename = "not in this build")]
    NotInThisBuild,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InfoDevice {
    pub index: u32,
    pub name: String,
    pub total_mib: u64,
}

impl Versioned for TrainInfo {
    const SCHEMA: &'static str = "train-info/v1";
    fn example() -> Self {
        TrainInfo {
            schema: Self::SCHEMA.into(),
            train_version: "0.1.0".into(),
            libtorch: Libtorch::Linked,
            torch_version: crate::torch_for_train!().into(),
            libtorch_dir: "/opt/torch/lib".into(),
            cuda_build: true,
            cuda_available: true,
            cudnn_available: true,
            cudnn_version: Some(91900),
            device_count: 1,
            devices: vec![InfoDevice {
                index: 0,
                name: "NVIDIA H100 80GB HBM3".into(),
                total_mib: 81559,
            }],
            cpu_threads: 16,
            allocator_view: true,
            notes: vec!["a note".into()],
        }
    }
}

/// `train check-data --config CFG`: what the data pass found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainData {
    pub schema: String,
    /// The training file, or `synthetic`.
    pub source: String,
    pub train_examples: i64,
    pub val_examples: i64,
    /// Classification only: `training` and `validation`, label -> count.
    pub class_counts: Option<BTreeMap<String, BTreeMap<i64, i64>>>,
}

impl Versioned for TrainData {
    const SCHEMA: &'static str = "train-data/v1";
    fn example() -> Self {
        let counts: BTreeMap<i64, i64> = [(0, 60), (1, 40)].into();
        TrainData {
            schema: Self::SCHEMA.into(),
            source: "train.npz".into(),
            train_examples: 100,
            val_examples: 20,
            class_counts: Some(
                [
                    ("training".to_string(), counts.clone()),
                    ("validation".to_string(), counts),
                ]
                .into(),
            ),
        }
    }
}

/// How a run (or one config of a chain) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Finished,
    Failed,
    /// Stopped on request (SIGINT or SIGTERM) between two steps; `--resume`
    /// continues from the last checkpoint.
    Stopped,
}

/// One row of metrics.csv (train-metrics/v1): one epoch. An empty cell (None)
/// is "not applicable or not available", never 0. The columns are the
/// fields, in this order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochRow {
    pub epoch: u32,
    /// NaN when every step of the epoch was skipped.
    pub train_loss: f64,
    pub val_loss: f64,
    pub lr: f64,
    pub seconds: f64,
    pub samples_per_s: f64,
    /// Peak GPU memory in the epoch, from the allocator view.
    pub peak_allocated_mib: Option<f64>,
    pub peak_reserved_mib: Option<f64>,
    /// Steps whose update was skipped: fp16 overflow, or a non-finite loss.
    pub skipped_steps: u64,
    /// Out-of-memory errors recovered in this epoch.
    pub oom_events: u64,
    /// The micro-batch in use at the end of the epoch.
    pub micro_batch: u32,
    pub mae: Option<f64>,
    pub rmse: Option<f64>,
    pub r2: Option<f64>,
    pub accuracy: Option<f64>,
    pub macro_f1: Option<f64>,
}

impl Versioned for EpochRow {
    /// metrics.csv has no schema column; its columns are versioned by this name.
    const SCHEMA: &'static str = "train-metrics/v1";
    fn example() -> Self {
        EpochRow {
            epoch: 1,
            train_loss: 0.88,
            val_loss: 0.15,
            lr: 0.002,
            seconds: 5.0,
            samples_per_s: 200.0,
            peak_allocated_mib: Some(900.0),
            peak_reserved_mib: Some(1024.0),
            skipped_steps: 0,
            oom_events: 0,
            micro_batch: 32,
            mae: Some(0.3),
            rmse: Some(0.4),
            r2: Some(0.86),
            accuracy: Some(0.9),
            macro_f1: Some(0.88),
        }
    }
}

impl EpochRow {
    /// The metrics.csv header line, from the fields.
    pub fn header() -> String {
        let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
        w.serialize(Self::example()).expect("a row serialises");
        let bytes = w.into_inner().expect("in memory");
        String::from_utf8_lossy(&bytes)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// One CSV line (with its newline), columns as in `header`.
    pub fn to_csv_line(&self) -> String {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        w.serialize(self).expect("a row serialises");
        String::from_utf8(w.into_inner().expect("in memory")).expect("CSV of numbers is UTF-8")
    }

    /// Reads metrics.csv; a torn last line (no newline) is left out.
    pub fn read_all(name: &str, text: &str) -> anyhow::Result<Vec<EpochRow>> {
        let whole = match text.rfind('\n') {
            Some(i) => &text[..=i],
            None => "",
        };
        let mut r = csv::Reader::from_reader(whole.as_bytes());
        r.deserialize()
            .enumerate()
            .map(|(i, row)| row.map_err(|e| crate::bad_input!("{name}: line {}: {e}", i + 2)))
            .collect()
    }
}

/// The best epoch by validation loss.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Best {
    pub epoch: u32,
    pub val_loss: f64,
}

/// The run's GPU memory from the allocator view, or why it is unknown
/// (null with the reason in `note`, never 0).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeakMemory {
    pub allocated_mib: Option<f64>,
    pub reserved_mib: Option<f64>,
    pub alloc_retries: Option<i64>,
    pub ooms: Option<i64>,
    pub note: Option<String>,
}

/// A recovered out-of-memory error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// One config's part of a run (several with `--fallback`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Leg {
    pub config: String,
    pub first_epoch: u32,
    pub last_epoch: Option<u32>,
    pub status: RunStatus,
    pub stop_reason: String,
    pub error_class: Option<Class>,
    /// Model tensors carried over from the previous config's checkpoint,
    /// as `n/of`.
    pub carried_tensors: Option<String>,
    pub seconds: f64,
}

/// summary.yaml: how the run ended, written once at its end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainSummary {
    pub schema: String,
    pub status: RunStatus,
    pub stop_reason: String,
    /// The failure's class (`failure::Class`), null when it finished.
    pub error_class: Option<Class>,
    /// The config that ran last.
    pub config: String,
    pub device: String,
    pub parameters: i64,
    pub epochs_completed: u32,
    pub resumed_at_epoch: Option<u32>,
    pub best: Option<Best>,
    /// The last epoch's metrics.csv row.
    pub last: Option<EpochRow>,
    pub time_s: f64,
    pub peak_memory: PeakMemory,
    /// Steps skipped over the run (fp16 overflow or a non-finite loss): the
    /// sum of metrics.csv's `skipped_steps`.
    pub skipped_steps: u64,
    /// The micro-batch in use at the end (null: whole batches).
    pub micro_batch_size: Option<u32>,
    /// Out-of-memory errors recovered by the config that ran last.
    pub oom_events: Vec<OomEvent>,
    /// Each config that ran, in order, and why it stopped.
    pub configs: Vec<Leg>,
    /// Config settings this trainer does not apply, said rather than ignored.
    pub not_applied: Vec<String>,
}

impl Versioned for TrainSummary {
    const SCHEMA: &'static str = "train-summary/v1";
    fn example() -> Self {
        TrainSummary {
            schema: Self::SCHEMA.into(),
            status: RunStatus::Failed,
            stop_reason: "out of memory at epoch 2 step 1 even with micro-batches of 1".into(),
            error_class: Some(Class::OutOfMemory),
            config: "a.yaml".into(),
            device: "cuda:0".into(),
            parameters: 284897,
            epochs_completed: 1,
            resumed_at_epoch: Some(1),
            best: Some(Best {
                epoch: 1,
                val_loss: 0.15,
            }),
            last: Some(EpochRow::example()),
            time_s: 12.5,
            peak_memory: PeakMemory {
                allocated_mib: Some(900.0),
                reserved_mib: Some(1024.0),
                alloc_retries: Some(0),
                ooms: Some(1),
                note: Some("why a figure is missing".into()),
            },
            skipped_steps: 0,
            micro_batch_size: Some(16),
            oom_events: vec![OomEvent {
                epoch: 1,
                step: 1,
                old_micro_batch: 32,
                new_micro_batch: 16,
                allocated_mib: Some(800.0),
                reserved_mib: Some(1000.0),
                message: "CUDA out of memory. Tried to allocate 2.00 GiB.".into(),
            }],
            configs: vec![Leg {
                config: "a.yaml".into(),
                first_epoch: 1,
                last_epoch: Some(1),
                status: RunStatus::Failed,
                stop_reason: "...".into(),
                error_class: Some(Class::OutOfMemory),
                carried_tensors: Some("24/24".into()),
                seconds: 12.5,
            }],
            not_applied: vec!["torch_compile (mode default): ...".into()],
        }
    }
}

/// The metadata of checkpoint.safetensors (train-checkpoint/v1), stored as
/// safetensors' string map: everything `--resume` needs beside the tensors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    pub schema: String,
    /// The last finished epoch.
    pub epoch: u32,
    /// AdamW updates taken (its bias correction).
    pub adam_steps: i64,
    /// 0 when no epoch had a finite validation loss yet.
    pub best_epoch: u32,
    pub best_val_loss: f64,
    /// Dropout's RNG is reseeded from (seed, global_step) each step and the
    /// data order from (seed, epoch): these are its state.
    pub seed: u64,
    pub global_step: u64,
    /// After an out-of-memory recovery.
    pub micro_batch: Option<u32>,
    /// fp16's loss scaler.
    pub loss_scale: Option<f64>,
    pub loss_scale_good_steps: Option<u64>,
    pub skipped_steps: Option<u64>,
}

impl Versioned for CheckpointMeta {
    const SCHEMA: &'static str = "train-checkpoint/v1";
    fn example() -> Self {
        CheckpointMeta {
            schema: Self::SCHEMA.into(),
            epoch: 3,
            adam_steps: 18,
            best_epoch: 3,
            best_val_loss: 0.1,
            seed: 42,
            global_step: 18,
            micro_batch: Some(16),
            loss_scale: Some(65536.0),
            loss_scale_good_steps: Some(18),
            skipped_steps: Some(0),
        }
    }
}

impl CheckpointMeta {
    /// As safetensors' metadata: one string per field, absent when None.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            m.insert(k.to_string(), v);
        };
        put("schema", self.schema.clone());
        put("epoch", self.epoch.to_string());
        put("adam_steps", self.adam_steps.to_string());
        put("best_epoch", self.best_epoch.to_string());
        put("best_val_loss", self.best_val_loss.to_string());
        put("seed", self.seed.to_string());
        put("global_step", self.global_step.to_string());
        if let Some(v) = self.micro_batch {
            put("micro_batch", v.to_string());
        }
        if let Some(v) = self.loss_scale {
            put("loss_scale", v.to_string());
        }
        if let Some(v) = self.loss_scale_good_steps {
            put("loss_scale_good_steps", v.to_string());
        }
        if let Some(v) = self.skipped_steps {
            put("skipped_steps", v.to_string());
        }
        m
    }

    /// From safetensors' metadata of the file `name`: the schema first, then
    /// each field, naming the one that is missing or not a number.
    pub fn from_map(
        name: &str,
        m: &std::collections::HashMap<String, String>,
    ) -> anyhow::Result<CheckpointMeta> {
        use crate::bad_input;
        let get = |k: &str| {
            m.get(k)
                .ok_or_else(|| bad_input!("{name}: metadata lacks `{k}`"))
        };
        let schema = get("schema")?;
        if schema != Self::SCHEMA {
            return Err(bad_input!(
                "{name}: metadata `schema`: expected a {} checkpoint, found {schema:?}",
                Self::SCHEMA
            ));
        }
        fn num<T: std::str::FromStr>(name: &str, k: &str, v: &str) -> anyhow::Result<T> {
            v.parse()
                .map_err(|_| crate::bad_input!("{name}: metadata `{k}` is not a number: {v:?}"))
        }
        let req = |k: &str| get(k).map(String::as_str);
        let opt = |k: &str| m.get(k).map(String::as_str);
        Ok(CheckpointMeta {
            schema: schema.clone(),
            epoch: num(name, "epoch", req("epoch")?)?,
            adam_steps: num(name, "adam_steps", req("adam_steps")?)?,
            best_epoch: num(name, "best_epoch", req("best_epoch")?)?,
            best_val_loss: num(name, "best_val_loss", req("best_val_loss")?)?,
            seed: num(name, "seed", req("seed")?)?,
            global_step: num(name, "global_step", req("global_step")?)?,
            micro_batch: opt("micro_batch")
                .map(|v| num(name, "micro_batch", v))
                .transpose()?,
            loss_scale: opt("loss_scale")
                .map(|v| num(name, "loss_scale", v))
                .transpose()?,
            loss_scale_good_steps: opt("loss_scale_good_steps")
                .map(|v| num(name, "loss_scale_good_steps", v))
                .transpose()?,
            skipped_steps: opt("skipped_steps")
                .map(|v| num(name, "skipped_steps", v))
                .transpose()?,
        })
    }
}

/// chain.yaml in a run directory started with `--fallback`: the configs of
/// the chain, the one running now, and the legs that ended, so that the
/// chain goes on across `--resume` and across the fresh process a config
/// with another environment runs in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainState {
    pub schema: String,
    pub configs: Vec<ChainConfig>,
    /// Index into `configs` of the config running (or to run) now.
    pub current: usize,
    /// The current config starts from the previous config's checkpoint of
    /// this epoch (tensors that fit are carried over), until it has written
    /// a checkpoint of its own; null: it resumes its own.
    pub carry_from_epoch: Option<u32>,
    /// Legs that ended, in order.
    pub legs: Vec<Leg>,
    /// Seconds spent by the processes before this one.
    pub seconds_before: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainConfig {
    /// The file it was read from.
    pub name: String,
    /// The resolved config.
    pub config: Config,
}

impl Versioned for ChainState {
    const SCHEMA: &'static str = "train-chain/v1";
    fn example() -> Self {
        let s = TrainSummary::example();
        ChainState {
            schema: Self::SCHEMA.into(),
            configs: vec![ChainConfig {
                name: "a.yaml".into(),
                config: Config::default(),
            }],
            current: 1,
            carry_from_epoch: Some(1),
            legs: s.configs,
            seconds_before: 12.5,
        }
    }
}

/// `train bench`: steady-state step time on a fixed batch (one JSON line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainBench {
    pub schema: String,
    /// The resolved config, with the bench's overrides.
    pub config: Config,
    pub threads: i32,
    pub batch_size: u32,
    pub steps: usize,
    pub step_ms_median: f64,
    /// Of which zero_grad, forward and backward (the rest: clipping, AdamW).
    pub forward_backward_ms_median: f64,
    pub step_ms_all: Vec<f64>,
    pub samples_per_s: f64,
    /// MSE (or cross-entropy) of the initial weights on the saved batch, eval mode.
    pub initial_eval_loss: f64,
    pub parameters: i64,
    pub device: String,
    /// The allocator's peak over the timed steps (MiB); null off the GPU.
    pub peak_allocated_mib: Option<f64>,
    pub peak_reserved_mib: Option<f64>,
    /// The encoder ran in NHWC (the config's `channels_last` on this device).
    #[serde(default)]
    pub channels_last: bool,
    /// The process's minor page faults per timed step (getrusage); null
    /// where the system does not count them.
    #[serde(default)]
    pub minor_faults_per_step: Option<f64>,
}

impl Versioned for TrainBench {
    const SCHEMA: &'static str = "train-bench/v1";
    fn example() -> Self {
        TrainBench {
            schema: Self::SCHEMA.into(),
            config: Config::default(),
            threads: 2,
            batch_size: 32,
            steps: 20,
            step_ms_median: 124.5,
            forward_backward_ms_median: 120.0,
            step_ms_all: vec![124.5],
            samples_per_s: 257.0,
            initial_eval_loss: 1.02,
            parameters: 284897,
            device: "cpu".into(),
            peak_allocated_mib: Some(900.0),
            peak_reserved_mib: Some(1024.0),
            channels_last: true,
            minor_faults_per_step: Some(310.0),
        }
    }
}
