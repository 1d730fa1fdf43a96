//! What mixed precision the GPU a command runs on has, for the fix
//! ladder's last out-of-memory rung: NVML's compute capability of the first
//! device the command sees (CUDA_VISIBLE_DEVICES' first index, else 0);
//! bf16 from 8.0 (Ampere) on. No NVML or no device: the CPU.

use diagnose::ladder::Device;
use nvml_wrapper::Nvml;

pub fn mixed_precision() -> Device {
    let Ok(nvml) = Nvml::init() else {
        return Device::Cpu;
    };
    let index = first_visible(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
    let Some(index) = index else {
        return Device::Cpu;
    };
    match nvml
        .device_by_index(index)
        .and_then(|d| d.cuda_compute_capability())
    {
        Ok(cc) => Device::Gpu {
            bf16: cc.major >= 8,
        },
        Err(_) => Device::Cpu,
    }
}

/// The first index CUDA_VISIBLE_DEVICES names (0 when unset; None when it
/// hides every device or names one by UUID, which this does not resolve).
fn first_visible(var: Option<&str>) -> Option<u32> {
    match var.map(str::trim) {
        None => Some(0),
        Some(v) => v.split(',').next()?.trim().parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_visible_device() {
        use super::first_visible;
        assert_eq!(first_visible(None), Some(0));
        assert_eq!(first_visible(Some("2,3")), Some(2));
        assert_eq!(first_visible(Some("")), None);
        assert_eq!(first_visible(Some("-1")), None);
        assert_eq!(first_visible(Some("GPU-1234")), None);
    }
}
