//! AdamW in Rust (tch's optimizer state cannot be saved), its learning-rate
//! schedule and gradient clipping. The update is PyTorch's AdamW, so the two
//! agree step for step; its moments go into the checkpoint for exact resume.

use std::collections::HashMap;
use tch::{nn::VarStore, Kind, Tensor};

pub struct AdamW {
    /// Updates taken so far (bias correction uses it).
    pub steps: i64,
    names: Vec<String>,
    params: Vec<Tensor>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    weight_decay: f64,
}

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPS: f64 = 1e-8;

impl AdamW {
    /// Over every trainable variable of `vs`, in name order.
    pub fn new(vs: &VarStore, weight_decay: f64) -> AdamW {
        let mut vars: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let m = vars.iter().map(|(_, t)| t.zeros_like()).collect();
        let v = vars.iter().map(|(_, t)| t.zeros_like()).collect();
        let (names, params) = vars.into_iter().unzip();
        AdamW {
            steps: 0,
            names,
            params,
            m,
            v,
            weight_decay,
        }
    }

    pub fn zero_grad(&mut self) {
        for p in &mut self.params {
            p.zero_grad();
        }
    }

    /// Scales gradients so their global L2 norm is at most `max`, as
    /// torch.nn.utils.clip_grad_norm_; returns the norm before clipping.
    pub fn clip_grad_norm(&self, max: f64) -> f64 {
        tch::no_grad(|| {
            let grads: Vec<Tensor> = self
                .params
                .iter()
                .map(Tensor::grad)
                .filter(Tensor::defined)
                .collect();
            if grads.is_empty() {
                return 0.0;
            }
            let norms: Vec<Tensor> = grads
                .iter()
                .map(|g| g.norm().to_kind(Kind::Double))
                .collect();
            let total = Tensor::stack(&norms, 0).norm().double_value(&[]);
            let coef = max / (total + 1e-6);
            if coef < 1.0 {
                for mut g in grads {
                    let _ = g.g_mul_scalar_(coef);
                }
            }
            total
        })
    }

    pub fn step(&mut self, lr: f64) {
        self.steps += 1;
        let t = self.steps as i32;
        let bc1 = 1.0 - BETA1.powi(t);
        let bc2 = 1.0 - BETA2.powi(t);
        tch::no_grad(|| {
            for ((p, m), v) in self.params.iter_mut().zip(&mut self.m).zip(&mut self.v) {
                let g = p.grad();
                if !g.defined() {
                    continue;
                }
                // In place where PyTorch's single-tensor AdamW is: decay, the
                // two moving averages, then p -= lr/bc1 · m / (sqrt(v)/sqrt(bc2) + eps).
                let _ = p.g_mul_scalar_(1.0 - lr * self.weight_decay);
                let _ = m.lerp_(&g, 1.0 - BETA1);
                let _ = v.lerp_(&g.square(), 1.0 - BETA2);
                let mut denom = v.sqrt();
                let _ = denom.g_div_scalar_(bc2.sqrt());
                let _ = denom.g_add_scalar_(EPS);
                let _ = p.addcdiv_(&(&*m * (-lr / bc1)), &denom);
            }
        });
    }

    /// Divides every gradient by `scale` and says whether any was inf or NaN
    /// (libtorch's `_amp_non_finite_check_and_unscale_`, as GradScaler uses).
    pub fn unscale_grads(&self, scale: f64) -> bool {
        tch::no_grad(|| {
            let Some(first) = self.params.first() else {
                return false;
            };
            let mut found = Tensor::zeros([1], (Kind::Float, first.device()));
            let inv = Tensor::from_slice(&[(1.0 / scale) as f32]).to_device(first.device());
            for p in &self.params {
                let mut g = p.grad();
                if g.defined() {
                    g.internal_amp_non_finite_check_and_unscale(&mut found, &inv);
                }
            }
            found.double_value(&[0]) > 0.0
        })
    }

    /// The moments, named `optim.m.<param>` and `optim.v.<param>`.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for (i, n) in self.names.iter().enumerate() {
            out.push((format!("optim.m.{n}"), self.m[i].shallow_clone()));
            out.push((format!("optim.v.{n}"), self.v[i].shallow_clone()));
        }
        out
    }

    pub fn load_state(
        &mut self,
        tensors: &HashMap<String, Tensor>,
        steps: i64,
    ) -> anyhow::Result<()> {
        tch::no_grad(|| -> anyhow::Result<()> {
            for (i, n) in self.names.iter().enumerate() {
                for (kind, dst) in [("m", &mut self.m[i]), ("v", &mut self.v[i])] {
                    let key = format!("optim.{kind}.{n}");
                    let src = tensors
                        .get(&key)
                        .ok_or_else(|| common::bad_input!("checkpoint lacks `{key}`"))?;
                    dst.f_copy_(&src.to_device(dst.device()))?;
                }
            }
            Ok(())
        })?;
        self.steps = steps;
        Ok(())
    }
}

/// The update after a step's backward, the same for training and `train
/// bench`: with fp16, unscale the gradients and skip the update when they
/// overflowed; clip; AdamW. Returns whether the update was applied.
pub fn apply_update(
    opt: &mut AdamW,
    scaler: Option<&mut LossScaler>,
    grad_clip: Option<f64>,
    lr: f64,
) -> bool {
    let apply = match scaler {
        Some(s) => {
            let found_inf = opt.unscale_grads(s.scale);
            s.update(found_inf)
        }
        None => true,
    };
    if apply {
        if let Some(max) = grad_clip {
            opt.clip_grad_norm(max);
        }
        opt.step(lr);
    }
    apply
}

/// fp16's dynamic loss scale (torch.cuda.amp.GradScaler's rule): the loss is
/// multiplied by `scale` before backward; a step whose gradients hold inf or
/// NaN is skipped and the scale halves; after `GROWTH_INTERVAL` good steps in
/// a row it doubles.
#[derive(Clone, Debug, PartialEq)]
pub struct LossScaler {
    pub scale: f64,
    pub good_steps: u64,
    pub skipped: u64,
}

pub const GROWTH_INTERVAL: u64 = 2000;

impl Default for LossScaler {
    fn default() -> Self {
        LossScaler {
            scale: 65536.0,
            good_steps: 0,
            skipped: 0,
        }
    }
}

impl LossScaler {
    /// Records the outcome of a step; returns whether to apply it.
    pub fn update(&mut self, found_inf: bool) -> bool {
        if found_inf {
            self.scale *= 0.5;
            self.good_steps = 0;
            self.skipped += 1;
            return false;
        }
        self.good_steps += 1;
        if self.good_steps == GROWTH_INTERVAL {
            self.scale *= 2.0;
            self.good_steps = 0;
        }
        true
    }
}

/// Linear warm-up to `base` over `warmup` steps, then cosine decay to 0 at
/// `total`. `step` counts from 0.
pub fn lr_at(base: f64, step: u64, warmup: u64, total: u64) -> f64 {
    if step < warmup {
        return base * (step + 1) as f64 / warmup as f64;
    }
    let span = total.saturating_sub(warmup).max(1);
    let progress = ((step - warmup) as f64 / span as f64).min(1.0);
    base * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_scaler_backs_off_and_grows() {
        let mut s = LossScaler::default();
        assert!(!s.update(true));
        assert_eq!((s.scale, s.skipped), (32768.0, 1));
        for _ in 0..GROWTH_INTERVAL - 1 {
            assert!(s.update(false));
        }
        assert_eq!(s.scale, 32768.0);
        assert!(s.update(false));
        assert_eq!(s.scale, 65536.0);
    }

    #[test]
    fn unscale_finds_non_finite_gradients() {
        let vs = tch::nn::VarStore::new(tch::Device::Cpu);
        let w = vs.root().var("w", &[3], tch::nn::Init::Const(1.0));
        let opt = AdamW::new(&vs, 0.0);
        (&w * 4.0).sum(Kind::Float).backward();
        assert!(!opt.unscale_grads(2.0));
        assert_eq!(Vec::<f32>::try_from(&w.grad()).unwrap(), [2.0, 2.0, 2.0]);
        (&w * f64::INFINITY).sum(Kind::Float).backward();
        assert!(opt.unscale_grads(2.0));
    }

    #[test]
    fn schedule_warms_up_then_decays() {
        assert!((lr_at(1.0, 0, 4, 20) - 0.25).abs() < 1e-12);
        assert!((lr_at(1.0, 3, 4, 20) - 1.0).abs() < 1e-12);
        assert!((lr_at(1.0, 4, 4, 20) - 1.0).abs() < 1e-12);
        assert!(lr_at(1.0, 12, 4, 20) < 1.0 && lr_at(1.0, 12, 4, 20) > 0.0);
        assert!(lr_at(1.0, 19, 4, 20) < 0.05);
    }
}
