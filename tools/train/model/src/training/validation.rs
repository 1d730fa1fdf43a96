//! Validation: the loss and the task's metrics over the validation set, in
//! eval mode without gradients.

use crate::model::data::Dataset;
use crate::model::net::Net;
use crate::system::{panics, shim};
use crate::training::metrics::{self, TaskMetrics};
use crate::training::step;
use common::config::{Config, Task};
use tch::{Device, Kind, Tensor};

/// Validation loss and task metrics, in chunks of `chunk` examples (the
/// micro-batch: after an out-of-memory recovery the whole batch may not fit,
/// a micro-batch did with gradients). In eval mode each example's output is
/// independent of the others in its chunk. libtorch's panics come back as
/// errors.
pub fn validate(
    net: &Net,
    c: &Config,
    val: &Dataset,
    device: Device,
    chunk: u32,
) -> Result<(f64, TaskMetrics), tch::TchError> {
    panics::catch(|| Ok(in_chunks(net, c, val, device, chunk)))
}

fn in_chunks(
    net: &Net,
    c: &Config,
    val: &Dataset,
    device: Device,
    chunk: u32,
) -> (f64, TaskMetrics) {
    let _guard = tch::no_grad_guard();
    let n = val.len();
    let mut outs = Vec::new();
    let mut loss_sum = 0.0;
    for start in (0..n).step_by(chunk as usize) {
        let len = (chunk as i64).min(n - start);
        let idx = Tensor::arange_start(start, start + len, (Kind::Int64, device));
        let (frames, scalars, target) = val.batch(&idx);
        let out = shim::autocast(device, c.mixed_precision, || {
            net.forward(&frames, &scalars, false)
        })
        .unwrap_or_else(|_| net.forward(&frames, &scalars, false));
        loss_sum += step::loss(c, &out, &target).double_value(&[]) * len as f64;
        outs.push(out);
    }
    let out = Tensor::cat(&outs, 0);
    let metrics = match c.task {
        Task::Regression => metrics::regression(&out, &val.target),
        Task::Classification => metrics::classification(&out, &val.target, c.num_labels as i64),
    };
    (loss_sum / n.max(1) as f64, metrics)
}
