//! `train-model info`: `train info`'s libtorch part, train-info/v1 with what
//! only a process that loaded libtorch can say (its version and directory,
//! CUDA and cuDNN as libtorch sees them, the allocator view). `train info`
//! runs it and adds the driver's devices (tools/train/src/info.rs), so that
//! this binary needs nothing of the CUDA driver.

use common::wire::train::{Libtorch, TrainInfo};
use common::wire::Versioned;
use std::io::Write;
use train_cli::{InfoArgs as Args, InfoFormat};

pub fn collect() -> TrainInfo {
    let cuda_build = env!("TRAIN_CUDA_BUILD") == "1";
    let cuda_available = tch::Cuda::is_available();
    let mut notes = Vec::new();
    if !cuda_build {
        notes.push("train is linked against a CPU-only libtorch: it cannot use a GPU".to_string());
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
        // The driver's: `train info` fills them in.
        devices: Vec::new(),
        cpu_threads: tch::get_num_threads(),
        allocator_view: crate::system::shim::has_cuda_allocator(),
        notes,
    }
}

pub fn run(args: &Args) -> anyhow::Result<u8> {
    let info = collect();
    let mut out = std::io::stdout().lock();
    match args.format {
        InfoFormat::Yaml => common::format::write_yaml(&info, &mut out)?,
        InfoFormat::Json => common::format::write_json(&info, &mut out)?,
    }
    out.flush()?;
    Ok(common::exit::OK)
}

/// The directory of the libtorch_cpu.so this process really loaded (not the
/// build's path: LD_LIBRARY_PATH or a copied binary can pick another), from
/// the dynamic loader's list of loaded objects.
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
