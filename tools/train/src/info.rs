//! `train info`: what libtorch this train runs on and what it can see. Read by
//! people, and by verify-fixes' runtime check (`train info --format yaml`).
//! The libtorch part comes from `train-model info` (a child: only a process
//! that loaded libtorch can say it); the driver's devices are this
//! process's, through libcuda loaded at run time. Without train-model (the
//! pip wheel's train) it says so: `libtorch: not in this build`.

use crate::{cuda_driver, handoff};
use anyhow::Context;
use common::wire::train::{InfoDevice, Libtorch, TrainInfo};
use common::wire::Versioned;
use std::io::Write;
use std::path::Path;
use train_cli::{InfoArgs, InfoFormat};

pub fn run(args: &InfoArgs) -> anyhow::Result<u8> {
    let info = collect()?;
    let mut out = std::io::stdout().lock();
    match args.format {
        InfoFormat::Yaml => common::format::write_yaml(&info, &mut out)?,
        InfoFormat::Json => common::format::write_json(&info, &mut out)?,
    }
    out.flush()?;
    Ok(common::exit::OK)
}

/// The whole report: train-model's, or the wheel's, with the driver's
/// devices.
pub fn collect() -> anyhow::Result<TrainInfo> {
    let mut info = match handoff::binary() {
        Some(model) => from_model(&model)?,
        None => without_libtorch(),
    };
    info.devices = driver_devices(&mut info.notes);
    if info.cuda_build && !info.cuda_available && !info.devices.is_empty() {
        info.notes.push(
            "the driver sees GPUs but libtorch does not: check that libtorch_cuda is linked \
             (ldd train-model | grep torch_cuda, train-model beside train) and that the driver \
             supports this CUDA build"
                .to_string(),
        );
    }
    Ok(info)
}

/// `train-model info`: the libtorch part, as train-info/v1 JSON.
fn from_model(model: &Path) -> anyhow::Result<TrainInfo> {
    let out = std::process::Command::new(model)
        .args(["info", "--format", "json"])
        .output()
        .with_context(|| format!("cannot start {}", model.display()))?;
    if !out.status.success() {
        // Most often the loader's: the torch libraries train-model was
        // built against are not where its rpath says.
        anyhow::bail!(
            "{} (train's libtorch half) could not report ({}): {}",
            model.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "{} info printed no {} JSON",
            model.display(),
            TrainInfo::SCHEMA
        )
    })
}

/// The pip wheel's train: no libtorch, so nothing of torch to report; the
/// driver's devices still are (a program `train run` supervises uses them).
fn without_libtorch() -> TrainInfo {
    TrainInfo {
        schema: TrainInfo::SCHEMA.into(),
        train_version: env!("CARGO_PKG_VERSION").into(),
        libtorch: Libtorch::NotInThisBuild,
        torch_version: String::new(),
        libtorch_dir: String::new(),
        cuda_build: false,
        cuda_available: false,
        cudnn_available: false,
        cudnn_version: None,
        device_count: 0,
        devices: Vec::new(),
        cpu_threads: 0,
        allocator_view: false,
        notes: vec![
            "libtorch: not in this build (the pip wheel's train): `train run -- CMD`, program \
             sweeps and `train info` work; training the built-in model (train --config, --resume, \
             bench, check-data, a sweep without `program`) needs the source build \
             (docs/guide/install.md, \"Install\")"
                .to_string(),
        ],
    }
}

/// The driver's devices (libcuda, loaded at run time), or why there are none.
fn driver_devices(notes: &mut Vec<String>) -> Vec<InfoDevice> {
    match cuda_driver::devices() {
        Ok(list) => list
            .into_iter()
            .map(|d| InfoDevice {
                index: d.index,
                name: d.name,
                total_mib: d.total_mib,
            })
            .collect(),
        Err(why) => {
            notes.push(format!("CUDA unavailable: {why}"));
            Vec::new()
        }
    }
}
