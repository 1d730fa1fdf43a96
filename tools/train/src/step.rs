//! One training step's forward and backward, with or without per-frame
//! gradient checkpointing (libtorch has no torch.utils.checkpoint).
//!
//! Checkpointing (seed 003): each frame's encoder runs once without keeping
//! its graph; the frame embeddings are detached at the boundary and the rest
//! of the model runs with grad; backward fills the boundary gradients; then
//! each frame is recomputed with grad, one at a time, and the boundary
//! gradient is back-propagated into it. The recomputation reuses the first
//! pass's dropout mask and does not update batch norm's running statistics
//! a second time, so the gradients equal those without checkpointing.

use crate::model::{BnStats, Net};
use common::config::{Config, Loss};
use tch::{Kind, Reduction, Tensor};

pub fn loss(c: &Config, out: &Tensor, target: &Tensor) -> Tensor {
    match c.loss() {
        Loss::Mse => out.squeeze_dim(-1).mse_loss(target, Reduction::Mean),
        Loss::Huber => out.squeeze_dim(-1).huber_loss(target, Reduction::Mean, 1.0),
        Loss::CrossEntropy => out.cross_entropy_for_logits(target),
    }
}

/// Forward and backward of one batch; gradients accumulate into the
/// parameters. Returns the loss.
pub fn forward_backward(
    net: &Net,
    c: &Config,
    frames: &Tensor,
    scalars: &Tensor,
    target: &Tensor,
    checkpointing: bool,
) -> Result<f64, tch::TchError> {
    if !checkpointing {
        let out = net.forward(frames, scalars, true);
        let l = loss(c, &out, target);
        l.f_backward()?;
        return l.f_double_value(&[]);
    }
    let (b, t) = (frames.size()[0], frames.size()[1]);
    let d = net.embed_dim();
    let (masks, boundary): (Vec<Option<Tensor>>, Vec<Tensor>) = tch::no_grad(|| {
        (0..t)
            .map(|i| {
                let mask = net.encoder_mask(b, d, true, frames);
                let out =
                    net.encode_frame(&frames.select(1, i), true, BnStats::Update, mask.as_ref());
                (mask, out.detach().set_requires_grad(true))
            })
            .unzip()
    });
    let out = net.head_forward(&Tensor::stack(&boundary, 1), scalars, true);
    let l = loss(c, &out, target);
    l.f_backward()?;
    for (i, (mask, edge)) in masks.iter().zip(&boundary).enumerate() {
        let grad = edge.grad();
        let recomputed = net.encode_frame(
            &frames.select(1, i as i64),
            true,
            BnStats::Frozen,
            mask.as_ref(),
        );
        (recomputed * grad).sum(Kind::Float).f_backward()?;
    }
    l.f_double_value(&[])
}
