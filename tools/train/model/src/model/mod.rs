//! What is trained and on what: the seeds' network, AdamW with its schedule
//! and loss scaler, and the datasets.

pub(crate) mod data;
pub(crate) mod net;
pub(crate) mod optim;

use common::config::Config;
use tch::{nn, Device, Tensor};

/// The network with its variables: the store that holds them and batch
/// norm's running statistics (buffers), which a retried step restores.
pub struct Model {
    pub vs: nn::VarStore,
    pub net: net::Net,
    /// Batch norm's running statistics, in name order.
    buffers: Vec<Tensor>,
}

impl Model {
    /// The config's network on `device`, initialised from the config's seed.
    pub fn new(config: &Config, device: Device) -> Model {
        let vs = nn::VarStore::new(device);
        tch::manual_seed(config.seed as i64);
        let net = net::Net::new(&vs.root(), config);
        let mut named: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| !t.requires_grad())
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        Model {
            buffers: named.into_iter().map(|(_, t)| t).collect(),
            vs,
            net,
        }
    }

    pub fn device(&self) -> Device {
        self.vs.device()
    }

    pub fn parameter_count(&self) -> i64 {
        self.vs
            .variables()
            .values()
            .filter(|t| t.requires_grad())
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }

    /// Model tensors by name (weights and batch-norm statistics).
    pub fn named_weights(&self) -> Vec<(String, Tensor)> {
        let mut v: Vec<(String, Tensor)> = self.vs.variables().into_iter().collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// A copy of batch norm's running statistics, for `restore_buffers`.
    pub fn save_buffers(&self) -> Vec<Tensor> {
        self.buffers.iter().map(Tensor::copy).collect()
    }

    pub fn restore_buffers(&self, saved: &[Tensor]) -> anyhow::Result<()> {
        tch::no_grad(|| -> anyhow::Result<()> {
            for (b, s) in self.buffers.iter().zip(saved) {
                b.shallow_clone().f_copy_(s)?;
            }
            Ok(())
        })
    }
}
