//! Device names and memory from the CUDA driver API (libcuda), loaded at run
//! time: tch has no call for a device's name. Driver ordinals are the ones
//! libtorch uses (both honour CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER).

use libloading::{Library, Symbol};
use std::ffi::{c_char, c_int, CStr};

#[derive(Debug, Clone)]
pub struct Device {
    pub index: u32,
    pub name: String,
    pub total_mib: u64,
}

type CuResult = c_int;

/// Lists the devices the driver exposes, or says why it cannot.
pub fn devices() -> Result<Vec<Device>, String> {
    // SAFETY: libcuda's initialisers have no preconditions; the symbols below
    // are declared with the signatures of cuda.h (stable since CUDA 3.2).
    unsafe {
        let lib = Library::new("libcuda.so.1")
            .map_err(|e| format!("no NVIDIA driver: cannot load libcuda.so.1 ({e})"))?;
        let init: Symbol<unsafe extern "C" fn(u32) -> CuResult> =
            lib.get(b"cuInit\0").map_err(|e| format!("libcuda: {e}"))?;
        let count: Symbol<unsafe extern "C" fn(*mut c_int) -> CuResult> = lib
            .get(b"cuDeviceGetCount\0")
            .map_err(|e| format!("libcuda: {e}"))?;
        let get: Symbol<unsafe extern "C" fn(*mut c_int, c_int) -> CuResult> = lib
            .get(b"cuDeviceGet\0")
            .map_err(|e| format!("libcuda: {e}"))?;
        let name: Symbol<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuResult> = lib
            .get(b"cuDeviceGetName\0")
            .map_err(|e| format!("libcuda: {e}"))?;
        let total: Symbol<unsafe extern "C" fn(*mut usize, c_int) -> CuResult> = lib
            .get(b"cuDeviceTotalMem_v2\0")
            .map_err(|e| format!("libcuda: {e}"))?;
        check(init(0), "cuInit")?;
        let mut n: c_int = 0;
        check(count(&mut n), "cuDeviceGetCount")?;
        let mut out = Vec::new();
        for ordinal in 0..n {
            let mut dev: c_int = 0;
            check(get(&mut dev, ordinal), "cuDeviceGet")?;
            let mut buf = [0 as c_char; 256];
            check(
                name(buf.as_mut_ptr(), buf.len() as c_int, dev),
                "cuDeviceGetName",
            )?;
            let mut bytes: usize = 0;
            check(total(&mut bytes, dev), "cuDeviceTotalMem_v2")?;
            out.push(Device {
                index: ordinal as u32,
                name: CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned(),
                total_mib: (bytes / (1024 * 1024)) as u64,
            });
        }
        Ok(out)
    }
}

fn check(code: CuResult, call: &str) -> Result<(), String> {
    match code {
        0 => Ok(()),
        100 => Err(format!(
            "{call}: CUDA_ERROR_NO_DEVICE (100): the driver sees no GPU"
        )),
        code => Err(format!("{call} failed with CUresult {code}")),
    }
}
