//! `train info`: what libtorch this binary runs on and what it can see. Read by
//! people, and by verify-fixes' runtime check (`train info --format yaml`).

use crate::cuda_driver;
use serde::Serialize;
use std::io::Write;

pub const SCHEMA: &str = "train-info/v1";

#[derive(clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value = "yaml")]
    format: InfoFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum InfoFormat {
    Yaml,
    Json,
}

#[derive(Serialize)]
pub struct Info {
    schema: &'static str,
    train_version: &'static str,
    /// The libtorch version train was compiled against (its headers).
    torch_version: &'static str,
    /// Where train was linked against libtorch (its rpath).
    libtorch_dir: &'static str,
    /// libtorch_cuda is linked in (a CUDA build of torch).
    cuda_build: bool,
    cuda_available: bool,
    cudnn_available: bool,
    /// cuDNN version as libtorch reports it (e.g. 91900), when CUDA is usable.
    cudnn_version: Option<i64>,
    device_count: i64,
    devices: Vec<Device>,
    cpu_threads: i32,
    /// train can read the CUDA caching allocator (its C++ shim was built
    /// with the CUDA headers): peak memory figures in metrics.csv.
    allocator_view: bool,
    notes: Vec<String>,
}

#[derive(Serialize)]
struct Device {
    index: u32,
    name: String,
    total_mib: u64,
}

pub fn collect() -> Info {
    let cuda_build = env!("TRAIN_CUDA_BUILD") == "1";
    let cuda_available = tch::Cuda::is_available();
    let mut notes = Vec::new();
    let mut devices = Vec::new();
    if !cuda_build {
        notes.push("train is linked against a CPU-only libtorch: it cannot use a GPU".to_string());
    }
    match cuda_driver::devices() {
        Ok(list) => devices.extend(list.into_iter().map(|d| Device {
            index: d.index,
            name: d.name,
            total_mib: d.total_mib,
        })),
        Err(why) => notes.push(format!("CUDA unavailable: {why}")),
    }
    if cuda_build && !cuda_available && !devices.is_empty() {
        notes.push(
            "the driver sees GPUs but libtorch does not: check that libtorch_cuda is linked \
             (ldd train | grep torch_cuda) and that the driver supports this CUDA build"
                .to_string(),
        );
    }
    Info {
        schema: SCHEMA,
        train_version: env!("CARGO_PKG_VERSION"),
        torch_version: env!("TRAIN_TORCH_VERSION"),
        libtorch_dir: env!("TRAIN_LIBTORCH_LIB"),
        cuda_build,
        cuda_available,
        cudnn_available: cuda_available && tch::Cuda::cudnn_is_available(),
        cudnn_version: cuda_available.then(tch::utils::version_cudnn),
        device_count: if cuda_available {
            tch::Cuda::device_count()
        } else {
            0
        },
        devices,
        cpu_threads: tch::get_num_threads(),
        allocator_view: crate::shim::has_cuda_allocator(),
        notes,
    }
}

pub fn run(args: &Args) -> anyhow::Result<u8> {
    let info = collect();
    let mut out = std::io::stdout().lock();
    match args.format {
        InfoFormat::Yaml => out.write_all(serde_yaml::to_string(&info)?.as_bytes())?,
        InfoFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &info)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(common::exit::OK)
}
