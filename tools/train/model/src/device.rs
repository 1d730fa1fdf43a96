//! The libtorch device a run gets for the `--device` it asked for (the
//! choice itself is train-cli's, parsed by both binaries).

use common::exit;
use tch::Device;
use train_cli::DeviceChoice;

/// The device libtorch gives for this choice; `cuda` without a GPU is
/// exit 3.
pub fn pick(choice: DeviceChoice) -> anyhow::Result<Device> {
    match choice {
        DeviceChoice::Cpu => Ok(Device::Cpu),
        DeviceChoice::Auto => Ok(Device::cuda_if_available()),
        DeviceChoice::Cuda if tch::Cuda::is_available() => Ok(Device::Cuda(0)),
        DeviceChoice::Cuda => Err(anyhow::Error::new(exit::Failure::new(
            exit::NO_GPU,
            "--device cuda: libtorch sees no CUDA device (see `train info`)",
        ))),
    }
}

/// `cpu` or `cuda:N`, as PyTorch writes devices.
pub fn device_name(d: Device) -> String {
    match d {
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::Cpu => "cpu".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}
