//! What the train binary's run tests share: the binary, a tiny config
//! that trains in seconds on CPU, and readers of a run's files.

use assert_cmd::Command;
use safetensors::SafeTensors;
use std::path::Path;

pub const BIN: &str = env!("CARGO_BIN_EXE_train");

pub const TINY: &str = "\
gradient_checkpointing: true
batch_size: 32
temporal_frames: 3
epochs: 4
learning_rate: 0.003
image_size: 16
scalar_features: 4
data: {synthetic_train_examples: 192, synthetic_val_examples: 64}
architecture: {channels: [8, 16], embed_dim: 16, attention_heads: 2}
";

/// TINY trained for `epochs` epochs.
pub fn tiny(epochs: u32) -> String {
    TINY.replace("epochs: 4", &format!("epochs: {epochs}"))
}

pub fn train() -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("TRAINGUARD_FAULT")
        .args(["--threads", "1", "--device", "cpu"]);
    c
}

/// `train --config A --fallback B ... --out OUT` of `configs` in order.
pub fn chain(configs: &[&Path], out: &Path) -> Command {
    let mut c = train();
    c.arg("--config").arg(configs[0]);
    for next in &configs[1..] {
        c.arg("--fallback").arg(next);
    }
    c.arg("--out").arg(out);
    c
}

/// A run directory's summary.yaml, typed (train-summary/v1).
pub fn summary_of(run: &Path) -> common::wire::train::TrainSummary {
    let path = run.join("summary.yaml");
    common::wire::parse(
        &path.display().to_string(),
        &std::fs::read_to_string(&path).unwrap(),
    )
    .unwrap()
}

pub fn tensors(path: &Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut v: Vec<(String, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| (n, t.data().to_vec()))
        .collect();
    v.sort();
    v
}
