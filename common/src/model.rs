//! The seeds' model, described once: train builds exactly these tensors and
//! the memory estimate counts them. Per frame a CNN encoder (conv 3×3 without
//! bias, batch norm, ReLU, 2×2 max pool per block; global average pool; a
//! linear projection to `embed_dim`), across frames temporal self-attention
//! (`transformer`) or a plain mean (`cnn`), a small MLP for the scalar inputs,
//! a fusion layer and the head.

use crate::wire::config::{ArchName, Config};

#[derive(Clone, Debug, PartialEq)]
pub struct ConvBlock {
    pub in_channels: u64,
    pub out_channels: u64,
    /// Side of the square input of this block; the output is `size / 2`.
    pub size: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    pub frames: u64,
    pub image_channels: u64,
    pub image_size: u64,
    pub blocks: Vec<ConvBlock>,
    pub embed_dim: u64,
    /// 0 for the `cnn` architecture.
    pub attention_layers: u64,
    pub heads: u64,
    pub ffn_dim: u64,
    pub scalar_features: u64,
    pub scalar_hidden: u64,
    pub outputs: u64,
}

/// One trainable tensor: its name in train's weights file and its shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<u64>,
}

impl Tensor {
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }
}

impl ModelSpec {
    pub fn from_config(c: &Config) -> ModelSpec {
        let mut size = u64::from(c.image_size);
        let mut in_channels = u64::from(c.image_channels);
        let mut blocks = Vec::new();
        for out in c.channels() {
            let out = u64::from(out);
            blocks.push(ConvBlock {
                in_channels,
                out_channels: out,
                size,
            });
            in_channels = out;
            size /= 2;
        }
        ModelSpec {
            frames: c.temporal_frames.into(),
            image_channels: c.image_channels.into(),
            image_size: c.image_size.into(),
            blocks,
            embed_dim: c.architecture.embed_dim.into(),
            attention_layers: match c.architecture.name {
                ArchName::Transformer => c.architecture.attention_layers.into(),
                ArchName::Cnn => 0,
            },
            heads: c.architecture.attention_heads.into(),
            ffn_dim: c.ffn_dim().into(),
            scalar_features: c.scalar_features.into(),
            scalar_hidden: c.architecture.scalar_hidden.into(),
            outputs: c.outputs().into(),
        }
    }

    /// Width of the CNN's last block.
    pub fn cnn_width(&self) -> u64 {
        self.blocks
            .last()
            .map_or(self.image_channels, |b| b.out_channels)
    }

    /// Every trainable tensor, in the order train creates them. Batch-norm
    /// running statistics are buffers, not parameters, as in PyTorch.
    pub fn tensors(&self) -> Vec<Tensor> {
        let mut t = Vec::new();
        let mut add = |name: String, shape: Vec<u64>| t.push(Tensor { name, shape });
        let d = self.embed_dim;
        for (i, b) in self.blocks.iter().enumerate() {
            add(
                format!("encoder.block{i}.conv.weight"),
                vec![b.out_channels, b.in_channels, 3, 3],
            );
            add(format!("encoder.block{i}.bn.weight"), vec![b.out_channels]);
            add(format!("encoder.block{i}.bn.bias"), vec![b.out_channels]);
        }
        add("encoder.proj.weight".into(), vec![d, self.cnn_width()]);
        add("encoder.proj.bias".into(), vec![d]);
        if self.attention_layers > 0 {
            add("temporal.pos".into(), vec![self.frames, d]);
        }
        for l in 0..self.attention_layers {
            let p = format!("temporal.layer{l}");
            add(format!("{p}.attn.in_proj.weight"), vec![3 * d, d]);
            add(format!("{p}.attn.in_proj.bias"), vec![3 * d]);
            add(format!("{p}.attn.out_proj.weight"), vec![d, d]);
            add(format!("{p}.attn.out_proj.bias"), vec![d]);
            add(format!("{p}.norm1.weight"), vec![d]);
            add(format!("{p}.norm1.bias"), vec![d]);
            add(format!("{p}.ffn.fc1.weight"), vec![self.ffn_dim, d]);
            add(format!("{p}.ffn.fc1.bias"), vec![self.ffn_dim]);
            add(format!("{p}.ffn.fc2.weight"), vec![d, self.ffn_dim]);
            add(format!("{p}.ffn.fc2.bias"), vec![d]);
            add(format!("{p}.norm2.weight"), vec![d]);
            add(format!("{p}.norm2.bias"), vec![d]);
        }
        if self.scalar_features > 0 {
            add(
                "scalars.fc1.weight".into(),
                vec![self.scalar_hidden, self.scalar_features],
            );
            add("scalars.fc1.bias".into(), vec![self.scalar_hidden]);
            add("scalars.fc2.weight".into(), vec![d, self.scalar_hidden]);
            add("scalars.fc2.bias".into(), vec![d]);
        }
        add("fusion.weight".into(), vec![d, self.fusion_inputs()]);
        add("fusion.bias".into(), vec![d]);
        add("head.weight".into(), vec![self.outputs, d]);
        add("head.bias".into(), vec![self.outputs]);
        t
    }

    /// Inputs of the fusion layer: the temporal summary, plus the scalar
    /// branch's embedding when there are scalar inputs.
    pub fn fusion_inputs(&self) -> u64 {
        if self.scalar_features > 0 {
            2 * self.embed_dim
        } else {
            self.embed_dim
        }
    }

    pub fn parameter_count(&self) -> u64 {
        self.tensors().iter().map(Tensor::numel).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_count_by_hand() {
        let mut c = Config::default();
        c.architecture.channels = Some(vec![4]);
        c.image_channels = 1;
        c.temporal_frames = 2;
        c.architecture.embed_dim = 8;
        c.architecture.attention_heads = 2;
        c.architecture.ffn_dim = Some(16);
        c.scalar_features = 3;
        c.architecture.scalar_hidden = 5;
        let m = ModelSpec::from_config(&c);
        let conv = 4 * 9 + 4 + 4;
        let proj = 8 * 4 + 8;
        let pos = 2 * 8;
        let attn = (24 * 8 + 24) + (8 * 8 + 8) + 16 + (16 * 8 + 16) + (8 * 16 + 8) + 16;
        let scalars = (5 * 3 + 5) + (8 * 5 + 8);
        let fusion = 8 * 16 + 8;
        let head = 8 + 1;
        assert_eq!(
            m.parameter_count(),
            conv + proj + pos + attn + scalars + fusion + head
        );
        c.architecture.name = ArchName::Cnn;
        assert_eq!(
            ModelSpec::from_config(&c).parameter_count(),
            conv + proj + scalars + fusion + head
        );
    }

    #[test]
    fn memory_optimized_model_is_smaller() {
        let full = ModelSpec::from_config(&Config::default()).parameter_count();
        let small = ModelSpec::from_config(&Config {
            memory_optimized: true,
            ..Config::default()
        })
        .parameter_count();
        assert!(small < full / 2, "{small} vs {full}");
    }
}
