"""The seeds' model in PyTorch, layer for layer the model train builds
(common/src/model.rs): the same tensors under the same names, so weights move
between the two through safetensors. Used by the benchmarks as the PyTorch
eager reference and to check the memory estimate against what autograd saves.

Input: frames [B, T, C, H, W] float32, scalars [B, S] float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

FULL_CHANNELS = [64, 128, 256]
SMALL_CHANNELS = [32, 64, 128]


def channels_of(cfg):
    arch = cfg["architecture"]
    if arch.get("channels"):
        return list(arch["channels"])
    return SMALL_CHANNELS if cfg["memory_optimized"] else FULL_CHANNELS


class Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)


class Encoder(nn.Module):
    def __init__(self, cin, widths, d, dropout):
        super().__init__()
        self.n = len(widths)
        for i, w in enumerate(widths):
            setattr(self, f"block{i}", Block(cin, w))
            cin = w
        self.proj = nn.Linear(cin, d)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):  # [N, C, H, W] -> [N, d]
        for i in range(self.n):
            x = getattr(self, f"block{i}")(x)
        x = x.mean(dim=(2, 3))
        return self.dropout(F.relu(self.proj(x)))


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.in_proj = nn.Linear(d, 3 * d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x):  # [B, T, d]
        b, t, d = x.shape
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        split = lambda z: z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(y)


class FFN(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class TemporalLayer(nn.Module):
    """Post-norm transformer encoder layer."""

    def __init__(self, d, heads, ff, dropout):
        super().__init__()
        self.attn = Attention(d, heads)
        self.norm1 = nn.LayerNorm(d)
        self.ffn = FFN(d, ff)
        self.norm2 = nn.LayerNorm(d)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.attn(x)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class Temporal(nn.Module):
    def __init__(self, frames, d, heads, ff, layers, dropout):
        super().__init__()
        self.pos = nn.Parameter(torch.zeros(frames, d))
        self.n = layers
        for i in range(layers):
            setattr(self, f"layer{i}", TemporalLayer(d, heads, ff, dropout))

    def forward(self, x):
        x = x + self.pos
        for i in range(self.n):
            x = getattr(self, f"layer{i}")(x)
        return x


class Scalars(nn.Module):
    def __init__(self, s, h, d):
        super().__init__()
        self.fc1 = nn.Linear(s, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return F.relu(self.fc2(F.relu(self.fc1(x))))


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        arch = cfg["architecture"]
        d = arch["embed_dim"]
        ff = arch.get("ffn_dim") or 2 * d
        self.checkpointing = cfg["gradient_checkpointing"]
        self.encoder = Encoder(cfg["image_channels"], channels_of(cfg), d, cfg["dropout"])
        self.transformer = arch["name"] == "transformer"
        if self.transformer:
            self.temporal = Temporal(cfg["temporal_frames"], d, arch["attention_heads"], ff, arch["attention_layers"], cfg["dropout"])
        s = cfg["scalar_features"]
        self.has_scalars = s > 0
        if self.has_scalars:
            self.scalars = Scalars(s, arch["scalar_hidden"], d)
        self.fusion = nn.Linear(2 * d if self.has_scalars else d, d)
        self.head = nn.Linear(d, 1 if cfg["task"] == "regression" else cfg["num_labels"])
        self.dropout = nn.Dropout(cfg["dropout"])

    # Set by a caller that also ran `model.to(memory_format=torch.channels_last)`:
    # each frame then enters the encoder channels-last too (PyTorch's
    # recipe: the model and its input), as train's `channels_last` does.
    channels_last = False

    def frame(self, frames, i):
        x = frames[:, i]
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    def encode(self, frames):
        # Frame by frame, as the seeds' model and train do, so batch norm sees
        # the same statistics with and without checkpointing.
        t = frames.shape[1]
        if self.checkpointing and self.training:
            # Per-frame checkpointing (seed 003): one frame's graph at a time.
            outs = [checkpoint(self.encoder, self.frame(frames, i), use_reentrant=False) for i in range(t)]
        else:
            outs = [self.encoder(self.frame(frames, i)) for i in range(t)]
        return torch.stack(outs, dim=1)

    def forward(self, frames, scalars):
        x = self.encode(frames)
        if self.transformer:
            x = self.temporal(x)
        x = x.mean(dim=1)
        if self.has_scalars:
            x = torch.cat([x, self.scalars(scalars)], dim=-1)
        return self.head(self.dropout(F.relu(self.fusion(x))))


def loss_of(cfg, out, target):
    """train's loss for the config: cross-entropy, MSE (the default) or Huber."""
    if cfg["task"] == "classification":
        return F.cross_entropy(out, target)
    loss = cfg.get("loss") or "mse"
    if loss == "huber":
        return F.huber_loss(out.squeeze(-1), target)
    return F.mse_loss(out.squeeze(-1), target)
