//! The seeds' model in tch, tensor for tensor `common::model::ModelSpec` (same
//! names, so the estimate's parameter count is this model's, and PyTorch's
//! bench/reference_model.py loads these weights).
//!
//! The encoder always runs frame by frame, as the seeds' model does, so batch
//! norm sees the same statistics with and without checkpointing. Its dropout
//! mask is drawn explicitly and handed back, so that checkpointing's
//! recomputation reuses exactly the mask of the first pass.
//!
//! Each frame enters the encoder with NHWC strides when the config's
//! `channels_last` applies to its device (on the CPU by default): libtorch's
//! CPU max-pool is about 12× slower in NCHW (3.4 ms against 0.27 ms per call
//! at [32, 32, 32, 32], issue 26), and conv, batch norm, ReLU and max-pool
//! all keep the layout they are given, so one copy at the top is enough.

use common::config::{ChannelsLast, Config};
use common::model::ModelSpec;
use tch::nn;
use tch::{Kind, Tensor};

struct Block {
    conv: nn::Conv2D,
    bn: nn::BatchNorm,
}

struct Layer {
    in_proj: nn::Linear,
    out_proj: nn::Linear,
    norm1: nn::LayerNorm,
    fc1: nn::Linear,
    fc2: nn::Linear,
    norm2: nn::LayerNorm,
}

pub struct Net {
    blocks: Vec<Block>,
    proj: nn::Linear,
    pos: Option<Tensor>,
    layers: Vec<Layer>,
    heads: i64,
    scalars: Option<(nn::Linear, nn::Linear)>,
    fusion: nn::Linear,
    head: nn::Linear,
    dropout: f64,
    channels_last: ChannelsLast,
}

/// How the encoder treats batch norm's running statistics: the first (or
/// only) pass updates them; checkpointing's recomputation must not again.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum BnStats {
    Update,
    Frozen,
}

/// The CNN encoder's blocks: a 3×3 convolution and batch norm each.
fn encoder_blocks(enc: &nn::Path, spec: &ModelSpec) -> Vec<Block> {
    spec.blocks
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let p = enc / format!("block{i}");
            let conv_cfg = nn::ConvConfig {
                padding: 1,
                bias: false,
                ..Default::default()
            };
            Block {
                conv: nn::conv2d(
                    &p / "conv",
                    b.in_channels as i64,
                    b.out_channels as i64,
                    3,
                    conv_cfg,
                ),
                bn: nn::batch_norm2d(&p / "bn", b.out_channels as i64, Default::default()),
            }
        })
        .collect()
}

/// The temporal transformer's layers (PyTorch's encoder layer's names).
fn attention_layers(tmp: &nn::Path, spec: &ModelSpec) -> Vec<Layer> {
    let d = spec.embed_dim as i64;
    let ff = spec.ffn_dim as i64;
    (0..spec.attention_layers)
        .map(|l| {
            let p = tmp / format!("layer{l}");
            let ln = || nn::LayerNormConfig::default();
            Layer {
                in_proj: nn::linear(&p / "attn" / "in_proj", d, 3 * d, Default::default()),
                out_proj: nn::linear(&p / "attn" / "out_proj", d, d, Default::default()),
                norm1: nn::layer_norm(&p / "norm1", vec![d], ln()),
                fc1: nn::linear(&p / "ffn" / "fc1", d, ff, Default::default()),
                fc2: nn::linear(&p / "ffn" / "fc2", ff, d, Default::default()),
                norm2: nn::layer_norm(&p / "norm2", vec![d], ln()),
            }
        })
        .collect()
}

/// The scalar features' two-layer MLP, when the config has scalars.
fn scalar_mlp(root: &nn::Path, spec: &ModelSpec) -> Option<(nn::Linear, nn::Linear)> {
    (spec.scalar_features > 0).then(|| {
        let p = root / "scalars";
        let h = spec.scalar_hidden as i64;
        (
            nn::linear(
                &p / "fc1",
                spec.scalar_features as i64,
                h,
                Default::default(),
            ),
            nn::linear(&p / "fc2", h, spec.embed_dim as i64, Default::default()),
        )
    })
}

impl Net {
    pub fn new(root: &nn::Path, c: &Config) -> Net {
        let spec = ModelSpec::from_config(c);
        let d = spec.embed_dim as i64;
        let enc = root / "encoder";
        // Variables are made in this order (libtorch's RNG draws their
        // initial values): encoder, projection, temporal, scalars, heads.
        let blocks = encoder_blocks(&enc, &spec);
        let proj = nn::linear(
            &enc / "proj",
            spec.cnn_width() as i64,
            d,
            Default::default(),
        );
        let tmp = root / "temporal";
        let pos = (spec.attention_layers > 0).then(|| {
            tmp.var(
                "pos",
                &[spec.frames as i64, d],
                nn::Init::Randn {
                    mean: 0.0,
                    stdev: 0.02,
                },
            )
        });
        let layers = attention_layers(&tmp, &spec);
        let scalars = scalar_mlp(root, &spec);
        Net {
            blocks,
            proj,
            pos,
            layers,
            heads: spec.heads as i64,
            scalars,
            fusion: nn::linear(
                root / "fusion",
                spec.fusion_inputs() as i64,
                d,
                Default::default(),
            ),
            head: nn::linear(root / "head", d, spec.outputs as i64, Default::default()),
            dropout: c.dropout,
            channels_last: c.channels_last,
        }
    }

    /// Draws the encoder's dropout mask for a batch of `n` frames (inverted
    /// dropout: kept units scaled by 1/(1-p)), or None when there is none.
    pub fn encoder_mask(&self, n: i64, d: i64, train: bool, like: &Tensor) -> Option<Tensor> {
        (train && self.dropout > 0.0).then(|| {
            let keep = Tensor::rand([n, d], (Kind::Float, like.device())).ge(self.dropout);
            keep.to_kind(Kind::Float) / (1.0 - self.dropout)
        })
    }

    pub fn embed_dim(&self) -> i64 {
        self.proj.ws.size()[0]
    }

    /// One frame for the whole batch: [B, C, H, W] -> [B, d].
    pub fn encode_frame(
        &self,
        x: &Tensor,
        train: bool,
        stats: BnStats,
        mask: Option<&Tensor>,
    ) -> Tensor {
        // Decided by the frame's device, not the var store's: `train bench`
        // builds the model on the CPU and moves it afterwards.
        let mut x = if self.channels_last.applies(x.device().is_cuda()) {
            nhwc(x)
        } else {
            x.shallow_clone()
        };
        for b in &self.blocks {
            let y = x.apply(&b.conv);
            let y = match (train, stats) {
                (true, BnStats::Frozen) => y.batch_norm(
                    b.bn.ws.as_ref(),
                    b.bn.bs.as_ref(),
                    None::<&Tensor>,
                    None::<&Tensor>,
                    true,
                    0.1,
                    1e-5,
                    true,
                ),
                _ => y.apply_t(&b.bn, train),
            };
            x = y.relu().max_pool2d([2, 2], [2, 2], [0, 0], [1, 1], false);
        }
        let x = x
            .mean_dim(&[2i64, 3][..], false, None::<Kind>)
            .apply(&self.proj)
            .relu();
        match mask {
            Some(m) => x * m,
            None => x,
        }
    }

    /// Whether frames on `device` enter the encoder in NHWC.
    pub fn channels_last_on(&self, device: tch::Device) -> bool {
        self.channels_last.applies(device.is_cuda())
    }

    /// Everything after the encoder: frame embeddings [B, T, d] and scalars
    /// [B, S] -> outputs [B, out].
    pub fn head_forward(&self, emb: &Tensor, scalars: &Tensor, train: bool) -> Tensor {
        // Out of place: `emb` may be the checkpoint boundary.
        let mut x = match &self.pos {
            Some(pos) => emb + pos,
            None => emb.shallow_clone(),
        };
        for l in &self.layers {
            let a = self.attention(l, &x).dropout(self.dropout, train);
            x = (&x + a).apply(&l.norm1);
            let f = x
                .apply(&l.fc1)
                .relu()
                .apply(&l.fc2)
                .dropout(self.dropout, train);
            x = (&x + f).apply(&l.norm2);
        }
        let mut x = x.mean_dim(&[1i64][..], false, None::<Kind>);
        if let Some((fc1, fc2)) = &self.scalars {
            let s = scalars.apply(fc1).relu().apply(fc2).relu();
            x = Tensor::cat(&[x, s], 1);
        }
        x.apply(&self.fusion)
            .relu()
            .dropout(self.dropout, train)
            .apply(&self.head)
    }

    fn attention(&self, l: &Layer, x: &Tensor) -> Tensor {
        let (b, t, d) = x.size3().expect("[B, T, d]");
        let hd = d / self.heads;
        let qkv = x.apply(&l.in_proj).chunk(3, -1);
        let split = |z: &Tensor| z.view([b, t, self.heads, hd]).transpose(1, 2);
        let (q, k, v) = (split(&qkv[0]), split(&qkv[1]), split(&qkv[2]));
        let att = (q.matmul(&k.transpose(-2, -1)) / (hd as f64).sqrt()).softmax(-1, None::<Kind>);
        att.matmul(&v)
            .transpose(1, 2)
            .reshape([b, t, d])
            .apply(&l.out_proj)
    }

    /// The whole forward without checkpointing: frames [B, T, C, H, W].
    pub fn forward(&self, frames: &Tensor, scalars: &Tensor, train: bool) -> Tensor {
        let (b, t) = (frames.size()[0], frames.size()[1]);
        let d = self.embed_dim();
        let emb: Vec<Tensor> = (0..t)
            .map(|i| {
                let mask = self.encoder_mask(b, d, train, frames);
                self.encode_frame(&frames.select(1, i), train, BnStats::Update, mask.as_ref())
            })
            .collect();
        self.head_forward(&Tensor::stack(&emb, 1), scalars, train)
    }
}

/// The same [N, C, H, W] tensor with channels-last (NHWC) strides. tch (0.24
/// to 0.26) has no memory-format argument to `contiguous`; a permute to NHWC, a copy,
/// and a permute back give the strides `torch.channels_last` gives.
pub fn nhwc(x: &Tensor) -> Tensor {
    x.permute([0, 2, 3, 1]).contiguous().permute([0, 3, 1, 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::config::{ArchName, Task};
    use common::input::read;
    use std::path::Path;
    use tch::{Device, Kind};

    fn built(c: &Config) -> (nn::VarStore, Net) {
        let vs = nn::VarStore::new(Device::Cpu);
        let net = Net::new(&vs.root(), c);
        (vs, net)
    }

    #[test]
    fn tensors_are_the_estimates_for_every_shipped_config() {
        let _rng = crate::TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../configs");
        let mut checked = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "yaml") || path.ends_with("tiers-example.yaml")
            {
                continue;
            }
            let c = Config::load(&read(&path).unwrap()).unwrap().config;
            let (vs, _) = built(&c);
            let mut ours: Vec<(String, Vec<u64>)> = vs
                .variables()
                .into_iter()
                .filter(|(_, t)| t.requires_grad())
                .map(|(n, t)| (n, t.size().iter().map(|&d| d as u64).collect()))
                .collect();
            ours.sort();
            let mut spec: Vec<(String, Vec<u64>)> = ModelSpec::from_config(&c)
                .tensors()
                .into_iter()
                .map(|t| (t.name, t.shape))
                .collect();
            spec.sort();
            assert_eq!(ours, spec, "{}", path.display());
            checked += 1;
        }
        assert!(checked >= 4, "the seed configs and the demo");
    }

    /// Channels-last changes only how oneDNN sums: the same loss and the
    /// same gradients within float tolerance, in train and eval mode.
    #[test]
    fn channels_last_on_and_off_give_the_same_loss_and_gradients() {
        let _rng = crate::TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
        let run = |layout: ChannelsLast, train: bool| {
            let mut c = Config {
                image_size: 16,
                temporal_frames: 3,
                dropout: 0.2,
                channels_last: layout,
                ..Config::default()
            };
            c.architecture.channels = Some(vec![8, 16]);
            c.architecture.embed_dim = 16;
            tch::manual_seed(3);
            let (vs, net) = built(&c);
            let frames = Tensor::randn([4, 3, 3, 16, 16], (Kind::Float, Device::Cpu));
            let scalars = Tensor::randn([4, 8], (Kind::Float, Device::Cpu));
            assert_eq!(
                net.channels_last_on(Device::Cpu),
                layout == ChannelsLast::On
            );
            let loss = net
                .forward(&frames, &scalars, train)
                .square()
                .mean(None::<Kind>);
            if train {
                loss.backward();
            }
            let mut grads: Vec<(String, Tensor)> = vs
                .variables()
                .into_iter()
                .filter(|(_, t)| train && t.requires_grad())
                .map(|(n, t)| (n, t.grad()))
                .collect();
            grads.sort_by(|a, b| a.0.cmp(&b.0));
            (loss.double_value(&[]), grads)
        };
        for train in [true, false] {
            let (a, ga) = run(ChannelsLast::On, train);
            let (b, gb) = run(ChannelsLast::Off, train);
            assert!((a - b).abs() <= 1e-5 * a.abs(), "loss {a} against {b}");
            assert_eq!(ga.len(), gb.len());
            assert!(!train || ga.len() > 10, "every parameter has a gradient");
            for ((n, x), (_, y)) in ga.iter().zip(&gb) {
                let scale = y.abs().max().double_value(&[]).max(1e-6);
                let diff = (x - y).abs().max().double_value(&[]);
                assert!(diff <= 1e-4 * scale, "{n}: {diff} of {scale}");
            }
        }
        // The layout really differs: the encoder's input strides.
        let x = Tensor::randn([2, 3, 4, 5], (Kind::Float, Device::Cpu));
        let y = nhwc(&x);
        assert_eq!(y.stride(), [60, 1, 15, 3]);
        assert!(x.equal(&y));
    }

    #[test]
    fn output_shapes_for_both_architectures_and_tasks() {
        let _rng = crate::TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
        for arch in [ArchName::Transformer, ArchName::Cnn] {
            for (task, out) in [(Task::Regression, 1), (Task::Classification, 3)] {
                let mut c = Config {
                    image_size: 16,
                    temporal_frames: 3,
                    task,
                    num_labels: 3,
                    ..Config::default()
                };
                c.architecture.name = arch;
                c.architecture.channels = Some(vec![4, 8]);
                c.architecture.embed_dim = 16;
                let (_, net) = built(&c);
                let frames = Tensor::randn([2, 3, 3, 16, 16], (Kind::Float, Device::Cpu));
                let scalars = Tensor::randn([2, 8], (Kind::Float, Device::Cpu));
                for train in [true, false] {
                    assert_eq!(
                        net.forward(&frames, &scalars, train).size(),
                        [2, out],
                        "{arch:?} {task:?}"
                    );
                }
            }
        }
    }
}
