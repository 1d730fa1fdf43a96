//! What a run gets before it trains: the environment variables train sets,
//! and the config's settings this build does not apply (said at start-up).
//! The device it asked for is `crate::device`'s.

use common::config::{Config, Precision};
use tch::Device;

/// Settings in the config that this build of train does not apply.
pub fn not_applied(c: &Config, device: Device) -> Vec<String> {
    let mut out = Vec::new();
    if c.torch_compile {
        out.push(format!(
            "torch_compile (mode {}): libtorch has no torch.compile; this trainer runs eager",
            c.torch_compile_mode.as_str()
        ));
    }
    if c.mixed_precision == Precision::Fp16 && device == Device::Cpu {
        out.push("mixed_precision fp16 on CPU: applied through CPU autocast, but slow there; bf16 is CPU's half precision".to_string());
    }
    if c.num_workers > 0 {
        out.push(format!(
            "num_workers {}: the dataset is held in memory and batched in-process; no worker processes",
            c.num_workers
        ));
    }
    if c.pin_memory {
        out.push("pin_memory: not used (the dataset is moved to the device once)".to_string());
    }
    out
}

/// The variables the run gets: the config's `environment`, expandable
/// segments unless the user chose an allocator setting (seed 004), and
/// CUDA_LAUNCH_BLOCKING=1 with --sync-errors. Called before anything starts
/// CUDA: the caching allocator reads its setting once.
pub fn apply_environment(c: &Config, sync_errors: bool) -> Vec<String> {
    let mut said = Vec::new();
    for (k, v) in &c.environment {
        std::env::set_var(k, v);
    }
    if std::env::var_os("PYTORCH_ALLOC_CONF").is_none()
        && std::env::var_os("PYTORCH_CUDA_ALLOC_CONF").is_none()
    {
        std::env::set_var("PYTORCH_ALLOC_CONF", "expandable_segments:True");
        said.push("PYTORCH_ALLOC_CONF=expandable_segments:True (train's default; set it yourself to choose)".to_string());
    }
    if sync_errors {
        std::env::set_var("CUDA_LAUNCH_BLOCKING", "1");
        said.push(
            "CUDA_LAUNCH_BLOCKING=1 (--sync-errors: errors point at their kernel, 10-20% slower)"
                .to_string(),
        );
    }
    said
}
