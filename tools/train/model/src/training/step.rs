//! One training step's forward and backward, with or without per-frame
//! gradient checkpointing (libtorch has no torch.utils.checkpoint).
//!
//! Checkpointing (seed 003): each frame's encoder but the last runs once
//! without keeping its graph; those frame embeddings are detached at the
//! boundary and the rest of the model runs with grad; backward fills the
//! boundary gradients; then each of those frames is recomputed with grad,
//! one at a time, and the boundary gradient is back-propagated into it. The
//! recomputation reuses the first pass's dropout mask and does not update
//! batch norm's running statistics a second time, so the gradients equal
//! those without checkpointing.
//!
//! The last frame keeps its graph from the first pass and is
//! back-propagated with the head: recomputing it would rebuild the very
//! graph that was just thrown away, one of T frames' forward for nothing.
//! Its graph is alive while the head runs forward and backward, which the
//! memory estimate already counts (one frame's encoder activations beside
//! the head's, common/src/estimate.rs); the head is small, so the peak
//! moves by a few MiB (issue 26: 6 MiB on configs/demo_cpu.yaml).

use crate::model::net::{BnStats, Net};
use crate::system::shim;
use common::config::{Config, Loss, Precision};
use tch::{Device, Kind, Reduction, TchError, Tensor};

/// Mixed precision for one step: forward passes run under autocast to
/// `precision`; with fp16 the loss is multiplied by `loss_scale` before
/// backward (the caller unscales the gradients).
pub struct Amp {
    pub device: Device,
    pub precision: Precision,
    pub loss_scale: Option<f64>,
}

impl Amp {
    #[cfg(test)]
    pub fn off(device: Device) -> Amp {
        Amp {
            device,
            precision: Precision::Off,
            loss_scale: None,
        }
    }

    pub fn run<T>(&self, f: impl FnOnce() -> T) -> Result<T, TchError> {
        shim::autocast(self.device, self.precision, f).map_err(TchError::Torch)
    }

    /// Backward of `loss × weight` (a micro-batch's share of its batch),
    /// times the fp16 loss scale.
    fn backward(&self, loss: &Tensor, weight: f64) -> Result<(), TchError> {
        (loss * (self.loss_scale.unwrap_or(1.0) * weight)).f_backward()
    }
}

/// Seed 004's in-step checks, before the loss: labels in [0, num_labels) and
/// outputs of the expected shape, with the seed's detailed messages. (A bad
/// label would otherwise surface as a device-side assert on a GPU.)
pub fn check_batch(c: &Config, out: &Tensor, target: &Tensor) -> Result<(), TchError> {
    let b = target.size()[0];
    let k = c.outputs() as i64;
    if out.size() != [b, k] {
        return Err(TchError::Shape(format!(
            "Model output shape mismatch! Expected ({b}, {k}), got {:?}",
            out.size()
        )));
    }
    if c.task == common::config::Task::Classification && b > 0 {
        let (min, max) = (target.min().int64_value(&[]), target.max().int64_value(&[]));
        if min < 0 || max >= k {
            let first: Vec<i64> =
                Vec::<i64>::try_from(&target.narrow(0, 0, b.min(10)).to_device(Device::Cpu))
                    .unwrap_or_default();
            return Err(TchError::Torch(format!(
                "Invalid labels detected in batch! Expected range [0, {}], but got min={min}, max={max}. Batch labels: {first:?}...",
                k - 1
            )));
        }
    }
    Ok(())
}

pub fn loss(c: &Config, out: &Tensor, target: &Tensor) -> Tensor {
    match c.loss() {
        Loss::Mse => out.squeeze_dim(-1).mse_loss(target, Reduction::Mean),
        Loss::Huber => out.squeeze_dim(-1).huber_loss(target, Reduction::Mean, 1.0),
        Loss::CrossEntropy => out.cross_entropy_for_logits(target),
    }
}

/// Forward and backward of one (micro-)batch; gradients of `loss × weight`
/// accumulate into the parameters (times `amp.loss_scale` when set).
/// Returns the loss.
#[allow(clippy::too_many_arguments)]
pub fn forward_backward(
    net: &Net,
    c: &Config,
    frames: &Tensor,
    scalars: &Tensor,
    target: &Tensor,
    checkpointing: bool,
    amp: &Amp,
    weight: f64,
) -> Result<f64, TchError> {
    if !checkpointing {
        let out = amp.run(|| net.forward(frames, scalars, true))?;
        check_batch(c, &out, target)?;
        let l = amp.run(|| loss(c, &out, target))?;
        amp.backward(&l, weight)?;
        return l.f_double_value(&[]);
    }
    let (b, t) = (frames.size()[0], frames.size()[1]);
    let d = net.embed_dim();
    let last = t - 1;
    // Masks are drawn frame by frame in order, as without checkpointing.
    let (masks, boundary): (Vec<Option<Tensor>>, Vec<Tensor>) = amp.run(|| {
        (0..t)
            .map(|i| {
                let mask = net.encoder_mask(b, d, true, frames);
                let frame = frames.select(1, i);
                let out = if i == last {
                    // Kept with its graph: back-propagated with the head.
                    net.encode_frame(&frame, true, BnStats::Update, mask.as_ref())
                } else {
                    tch::no_grad(|| net.encode_frame(&frame, true, BnStats::Update, mask.as_ref()))
                        .detach()
                        .set_requires_grad(true)
                };
                (mask, out)
            })
            .unzip()
    })?;
    let out = amp.run(|| net.head_forward(&Tensor::stack(&boundary, 1), scalars, true))?;
    check_batch(c, &out, target)?;
    let l = amp.run(|| loss(c, &out, target))?;
    amp.backward(&l, weight)?;
    // The last frame's gradients are in already.
    let recompute = masks.iter().zip(&boundary).take(last as usize);
    for (i, (mask, edge)) in recompute.enumerate() {
        let grad = edge.grad();
        // Recomputed under the same autocast state as the first pass.
        let recomputed = amp.run(|| {
            net.encode_frame(
                &frames.select(1, i as i64),
                true,
                BnStats::Frozen,
                mask.as_ref(),
            )
        })?;
        (recomputed * grad).sum(Kind::Float).f_backward()?;
    }
    l.f_double_value(&[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::config::ChannelsLast;
    use tch::nn;

    fn grads_after_step(c: &Config, checkpointing: bool) -> Vec<(String, Tensor)> {
        tch::manual_seed(7);
        let vs = nn::VarStore::new(Device::Cpu);
        let net = Net::new(&vs.root(), c);
        tch::manual_seed(11);
        let frames = Tensor::randn(
            [4, c.temporal_frames as i64, 3, 16, 16],
            (Kind::Float, Device::Cpu),
        );
        let scalars = Tensor::randn([4, 8], (Kind::Float, Device::Cpu));
        let target = Tensor::randn([4], (Kind::Float, Device::Cpu));
        // The same RNG state for both runs: the same dropout masks.
        tch::manual_seed(13);
        forward_backward(
            &net,
            c,
            &frames,
            &scalars,
            &target,
            checkpointing,
            &Amp::off(Device::Cpu),
            1.0,
        )
        .unwrap();
        let mut v: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .map(|(n, t)| {
                let g = if t.requires_grad() {
                    t.grad()
                } else {
                    t.detach()
                };
                (n, g.copy())
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    #[test]
    fn in_step_checks_give_the_seeds_messages() {
        let c = Config {
            task: common::config::Task::Classification,
            num_labels: 3,
            ..Config::default()
        };
        let out = Tensor::zeros([4, 3], (Kind::Float, Device::Cpu));
        let good = Tensor::from_slice(&[0i64, 1, 2, 1]);
        assert!(check_batch(&c, &out, &good).is_ok());
        let bad = Tensor::from_slice(&[0i64, 5, 2, -1]);
        let e = check_batch(&c, &out, &bad).unwrap_err().to_string();
        assert!(
            e.contains("Invalid labels detected in batch! Expected range [0, 2], but got min=-1, max=5. Batch labels: [0, 5, 2, -1]..."),
            "{e}"
        );
        let e = check_batch(
            &c,
            &Tensor::zeros([4, 2], (Kind::Float, Device::Cpu)),
            &good,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("Model output shape mismatch! Expected (4, 3), got [4, 2]"),
            "{e}"
        );
    }

    #[test]
    fn checkpointing_gives_the_same_gradients_and_statistics() {
        let _rng = crate::TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
        let mut c = Config {
            image_size: 16,
            temporal_frames: 3,
            dropout: 0.3,
            ..Config::default()
        };
        c.architecture.channels = Some(vec![4, 8]);
        c.architecture.embed_dim = 16;
        // In both encoder layouts (channels_last auto is on for the CPU).
        for layout in [ChannelsLast::On, ChannelsLast::Off] {
            c.channels_last = layout;
            let plain = grads_after_step(&c, false);
            let ckpt = grads_after_step(&c, true);
            assert_eq!(plain.len(), ckpt.len());
            for ((n, a), (m, b)) in plain.iter().zip(&ckpt) {
                assert_eq!(n, m);
                assert!(a.defined() && b.defined(), "{n} has no gradient");
                // Gradients of parameters; running statistics for buffers.
                let diff = (a - b).abs().max().double_value(&[]);
                assert!(diff < 1e-5, "{layout:?} {n}: max abs diff {diff}");
            }
        }
        let plain = grads_after_step(&c, false);
        // Dropout really was active: another RNG state changes the result.
        let mut other = c.clone();
        other.dropout = 0.0;
        let no_dropout = grads_after_step(&other, true);
        let differs = plain
            .iter()
            .zip(&no_dropout)
            .any(|((_, a), (_, b))| (a - b).abs().max().double_value(&[]) > 1e-6);
        assert!(
            differs,
            "dropout must change the gradients for this test to mean anything"
        );
    }
}
