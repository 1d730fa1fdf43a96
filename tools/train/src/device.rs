//! The device a run asks for (`--device`, `train bench --device`) and, in a
//! build with libtorch, the device it gets. The choice is built without
//! libtorch too: the wheel's train parses the same command line.

#[cfg(feature = "libtorch")]
use common::exit;
#[cfg(feature = "libtorch")]
use tch::Device;

/// Where to train (`--device`; `train bench --device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceChoice {
    Auto,
    Cpu,
    Cuda,
}

impl DeviceChoice {
    pub fn as_arg(self) -> &'static str {
        match self {
            DeviceChoice::Auto => "auto",
            DeviceChoice::Cpu => "cpu",
            DeviceChoice::Cuda => "cuda",
        }
    }

    /// The device libtorch gives for this choice; `cuda` without a GPU is
    /// exit 3.
    #[cfg(feature = "libtorch")]
    pub fn pick(self) -> anyhow::Result<Device> {
        match self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Auto => Ok(Device::cuda_if_available()),
            DeviceChoice::Cuda if tch::Cuda::is_available() => Ok(Device::Cuda(0)),
            DeviceChoice::Cuda => Err(anyhow::Error::new(exit::Failure::new(
                exit::NO_GPU,
                "--device cuda: libtorch sees no CUDA device (see `train info`)",
            ))),
        }
    }
}

/// `cpu` or `cuda:N`, as PyTorch writes devices.
#[cfg(feature = "libtorch")]
pub fn device_name(d: Device) -> String {
    match d {
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::Cpu => "cpu".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}
