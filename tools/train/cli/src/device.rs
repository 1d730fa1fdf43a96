//! The device a run asks for (`--device`, `train bench --device`); the
//! device libtorch gives for it is train-model's (its device.rs).

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
}
