//! `train info`: what libtorch this binary runs on and what it can see. Read by
//! people, and by verify-fixes' runtime check (`train info --format yaml`);
//! a train built without libtorch says so (`libtorch: not in this build`).

use crate::system::cuda_driver;
use common::wire::train::{InfoDevice, Libtorch, TrainInfo};
use common::wire::Versioned;
use std::io::Write;

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

/// The pip wheel's train: no libtorch, so nothing of torch to report; the
/// driver's devices still are (a program `train run` supervises uses them).
#[cfg(not(feature = "libtorch"))]
pub fn collect() -> TrainInfo {
    let mut notes = vec![
        "libtorch: not in this build (the pip wheel's train): `train run -- CMD`, program sweeps \
         and `train info` work; training the seeds' model (train --config, --resume, bench, \
         check-data, a sweep without `program`) needs the source build (docs/GUIDE.md, \"Install\")"
            .to_string(),
    ];
    let devices = driver_devices(&mut notes);
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
        devices,
        cpu_threads: 0,
        allocator_view: false,
        notes,
    }
}

#[cfg(feature = "libtorch")]
pub fn collect() -> TrainInfo {
    let cuda_build = env!("TRAIN_CUDA_BUILD") == "1";
    let cuda_available = tch::Cuda::is_available();
    let mut notes = Vec::new();
    if !cuda_build {
        notes.push("train is linked against a CPU-only libtorch: it cannot use a GPU".to_string());
    }
    let devices = driver_devices(&mut notes);
    if cuda_build && !cuda_available && !devices.is_empty() {
        notes.push(
            "the driver sees GPUs but libtorch does not: check that libtorch_cuda is linked \
             (ldd train | grep torch_cuda) and that the driver supports this CUDA build"
                .to_string(),
        );
    }
    let libtorch_dir = match loaded_libtorch_dir() {
        Ok(dir) => dir,
        Err(why) => {
            notes.push(format!(
                "the loaded libtorch could not be located ({why}); libtorch_dir is the build's"
            ));
            env!("TRAIN_LIBTORCH_LIB").to_string()
        }
    };
    TrainInfo {
        schema: TrainInfo::SCHEMA.into(),
        train_version: env!("CARGO_PKG_VERSION").into(),
        libtorch: Libtorch::Linked,
        torch_version: env!("TRAIN_TORCH_VERSION").into(),
        libtorch_dir,
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
        allocator_view: crate::system::shim::has_cuda_allocator(),
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

/// The directory of the libtorch_cpu.so this process really loaded (not the
/// build's path: LD_LIBRARY_PATH or a copied binary can pick another), from
/// the dynamic loader's list of loaded objects.
#[cfg(feature = "libtorch")]
pub fn loaded_libtorch_dir() -> Result<String, String> {
    use std::ffi::{c_int, c_void, CStr};
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        found: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader hands a valid entry whose name is NUL-terminated
        // (or null), and `found` is the Option below.
        unsafe {
            let name = (*info).dlpi_name;
            if name.is_null() {
                return 0;
            }
            let name = CStr::from_ptr(name).to_string_lossy();
            if name.ends_with("/libtorch_cpu.so") {
                *(found as *mut Option<String>) = Some(name.into_owned());
                return 1;
            }
        }
        0
    }
    let mut found: Option<String> = None;
    // SAFETY: `visit` only reads the entries and writes `found`.
    unsafe {
        libc::dl_iterate_phdr(
            Some(visit),
            &mut found as *mut Option<String> as *mut c_void,
        );
    }
    let lib = found.ok_or("libtorch_cpu.so is not among the loaded objects")?;
    let path = std::path::Path::new(&lib);
    let dir = path.parent().ok_or("no directory")?;
    Ok(std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .display()
        .to_string())
}
