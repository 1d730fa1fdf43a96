//! train's formats: `train info` (train-info/v1) and `train check-data`
//! (train-data/v1). verify-fixes reads both through `wire::parse`.

use super::Versioned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `train info`: the libtorch train runs on and what it can see.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainInfo {
    pub schema: String,
    pub train_version: String,
    /// The libtorch version train was compiled against (its headers).
    pub torch_version: String,
    /// The directory of the libtorch this process loaded.
    pub libtorch_dir: String,
    /// libtorch_cuda is linked in (a CUDA build of torch).
    pub cuda_build: bool,
    pub cuda_available: bool,
    pub cudnn_available: bool,
    /// cuDNN version as libtorch reports it (e.g. 91900), when CUDA is usable.
    pub cudnn_version: Option<i64>,
    pub device_count: i64,
    pub devices: Vec<InfoDevice>,
    pub cpu_threads: i32,
    /// train can read the CUDA caching allocator (its C++ shim was built
    /// with the CUDA headers): peak memory figures in metrics.csv.
    pub allocator_view: bool,
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InfoDevice {
    pub index: u32,
    pub name: String,
    pub total_mib: u64,
}

impl Versioned for TrainInfo {
    const SCHEMA: &'static str = "train-info/v1";
    fn example() -> Self {
        TrainInfo {
            schema: Self::SCHEMA.into(),
            train_version: "0.1.0".into(),
            torch_version: "2.11.0".into(),
            libtorch_dir: "/opt/torch/lib".into(),
            cuda_build: true,
            cuda_available: true,
            cudnn_available: true,
            cudnn_version: Some(91900),
            device_count: 1,
            devices: vec![InfoDevice {
                index: 0,
                name: "NVIDIA H100 80GB HBM3".into(),
                total_mib: 81559,
            }],
            cpu_threads: 16,
            allocator_view: true,
            notes: vec!["a note".into()],
        }
    }
}

/// `train check-data --config CFG`: what the data pass found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainData {
    pub schema: String,
    /// The training file, or `synthetic`.
    pub source: String,
    pub train_examples: i64,
    pub val_examples: i64,
    /// Classification only: `training` and `validation`, label -> count.
    pub class_counts: Option<BTreeMap<String, BTreeMap<i64, i64>>>,
}

impl Versioned for TrainData {
    const SCHEMA: &'static str = "train-data/v1";
    fn example() -> Self {
        let counts: BTreeMap<i64, i64> = [(0, 60), (1, 40)].into();
        TrainData {
            schema: Self::SCHEMA.into(),
            source: "train.npz".into(),
            train_examples: 100,
            val_examples: 20,
            class_counts: Some(
                [
                    ("training".to_string(), counts.clone()),
                    ("validation".to_string(), counts),
                ]
                .into(),
            ),
        }
    }
}
