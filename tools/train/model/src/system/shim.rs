//! Safe wrappers over the C++ shim (shim/shim.cpp): the CUDA caching
//! allocator's statistics and cache, and autocast with a dtype. Where the
//! allocator cannot be read (CPU, or a build without CUDA headers) the answer
//! is "not available" with the reason, never 0.

use common::config::Precision;
use std::ffi::{c_char, c_int, CStr};
use tch::Device;

extern "C" {
    fn tg_has_cuda_allocator() -> c_int;
    fn tg_cuda_memory_stats(device: c_int, out: *mut i64, err: *mut c_char, len: usize) -> c_int;
    fn tg_cuda_reset_peak(device: c_int, err: *mut c_char, len: usize) -> c_int;
    fn tg_cuda_empty_cache(err: *mut c_char, len: usize) -> c_int;
    fn tg_autocast(
        device: c_int,
        enabled: c_int,
        dtype: c_int,
        err: *mut c_char,
        len: usize,
    ) -> c_int;
}

/// The caching allocator's view of one GPU, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryStats {
    pub allocated: i64,
    pub peak_allocated: i64,
    pub reserved: i64,
    pub peak_reserved: i64,
    pub alloc_retries: i64,
    pub ooms: i64,
}

/// An allocator figure (bytes, as c10 counts them) in MiB.
pub fn mib(bytes: i64) -> f64 {
    common::estimate::mib_f64(bytes.max(0) as u64)
}

fn call(f: impl FnOnce(*mut c_char, usize) -> c_int) -> Result<(), String> {
    let mut buf = [0 as c_char; 512];
    let rc = f(buf.as_mut_ptr(), buf.len());
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: the shim always NUL-terminates what it writes into `buf`.
    let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Err(if rc == -1 {
        format!("not available: {msg}")
    } else {
        msg
    })
}

fn cuda_index(device: Device) -> Result<c_int, String> {
    match device {
        Device::Cuda(i) => Ok(i as c_int),
        _ => Err("not available on CPU".to_string()),
    }
}

pub fn memory_stats(device: Device) -> Result<MemoryStats, String> {
    let i = cuda_index(device)?;
    let mut out = [0i64; 6];
    // SAFETY: `out` has the six slots the shim fills.
    call(|e, n| unsafe { tg_cuda_memory_stats(i, out.as_mut_ptr(), e, n) })?;
    Ok(MemoryStats {
        allocated: out[0],
        peak_allocated: out[1],
        reserved: out[2],
        peak_reserved: out[3],
        alloc_retries: out[4],
        ooms: out[5],
    })
}

pub fn reset_peak(device: Device) -> Result<(), String> {
    let i = cuda_index(device)?;
    // SAFETY: plain values and the error buffer.
    call(|e, n| unsafe { tg_cuda_reset_peak(i, e, n) })
}

/// Returns cached blocks to the driver (used by out-of-memory recovery).
pub fn empty_cache(device: Device) -> Result<(), String> {
    cuda_index(device)?;
    // SAFETY: only the error buffer.
    call(|e, n| unsafe { tg_cuda_empty_cache(e, n) })
}

/// Whether this build can read the CUDA allocator at all.
pub fn has_cuda_allocator() -> bool {
    // SAFETY: no arguments.
    unsafe { tg_has_cuda_allocator() == 1 }
}

/// Runs `f` under autocast to `precision` on `device`; `Off` runs it as is.
pub fn autocast<T>(
    device: Device,
    precision: Precision,
    f: impl FnOnce() -> T,
) -> Result<T, String> {
    let dtype = match precision {
        Precision::Off => return Ok(f()),
        Precision::Fp16 => 0,
        Precision::Bf16 => 1,
    };
    let dev = if device.is_cuda() { 1 } else { 0 };
    // SAFETY: plain values and the error buffer.
    call(|e, n| unsafe { tg_autocast(dev, 1, dtype, e, n) })?;
    // Off again when `f` returns and when a libtorch error unwinds through
    // it (an out-of-memory error that the step then recovers from).
    struct Off(c_int, c_int);
    impl Drop for Off {
        fn drop(&mut self) {
            // SAFETY: as above. Switching off cannot fail once switching on worked.
            let _ = call(|e, n| unsafe { tg_autocast(self.0, 0, self.1, e, n) });
        }
    }
    let _off = Off(dev, dtype);
    Ok(f())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    #[test]
    fn autocast_changes_the_matmul_dtype_on_cpu_and_restores_it() {
        let a = Tensor::ones([4, 4], (Kind::Float, Device::Cpu));
        for (p, kind) in [
            (Precision::Bf16, Kind::BFloat16),
            (Precision::Fp16, Kind::Half),
        ] {
            let inside = autocast(Device::Cpu, p, || a.matmul(&a).kind()).unwrap();
            assert_eq!(inside, kind, "{p:?}");
        }
        assert_eq!(a.matmul(&a).kind(), Kind::Float, "off again afterwards");
        assert_eq!(
            autocast(Device::Cpu, Precision::Off, || a.matmul(&a).kind()).unwrap(),
            Kind::Float
        );
    }

    #[test]
    fn autocast_is_off_again_after_a_panic_inside_it() {
        let a = Tensor::ones([4, 4], (Kind::Float, Device::Cpu));
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            autocast(Device::Cpu, Precision::Bf16, || {
                assert_eq!(a.matmul(&a).kind(), Kind::BFloat16);
                panic!("a libtorch error raised by tch")
            })
        }));
        assert!(unwound.is_err());
        assert_eq!(a.matmul(&a).kind(), Kind::Float);
    }

    #[test]
    fn allocator_is_not_available_on_cpu() {
        let e = memory_stats(Device::Cpu).unwrap_err();
        assert!(e.contains("not available"), "{e}");
    }
}
