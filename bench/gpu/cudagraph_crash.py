#!/usr/bin/env python3
"""Seed 001's crash, reproduced in PyTorch on a GPU: the reference model with
per-frame torch.utils.checkpoint under torch.compile(mode="reduce-overhead")
(CUDA graphs), trained for 2 epochs. Expected: a RuntimeError whose message
cfgcheck --explain classifies as cuda-graphs-checkpointing. Writes
cudagraph_crash.txt under --out; exit 0 when the crash was reproduced."""

import argparse
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reference_model import Model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    cfg = {"memory_optimized": True, "gradient_checkpointing": True, "image_channels": 3, "image_size": 32,
           "temporal_frames": 4, "scalar_features": 8, "dropout": 0.1, "task": "regression", "num_labels": 2,
           "architecture": {"name": "transformer", "channels": None, "embed_dim": 64, "attention_heads": 4,
                            "attention_layers": 1, "ffn_dim": None, "scalar_hidden": 32}}
    model = Model(cfg).cuda().train()
    step = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    frames = torch.randn(16, 4, 3, 32, 32, device="cuda")
    scalars = torch.randn(16, 8, device="cuda")
    target = torch.randn(16, device="cuda")
    report = os.path.join(args.out, "cudagraph_crash.txt")
    try:
        for epoch in range(1, 3):
            for _ in range(4):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(step(frames, scalars).squeeze(-1), target)
                loss.backward()
                opt.step()
            print(f"epoch {epoch} done", file=sys.stderr)
    except Exception:
        with open(report, "w") as f:
            f.write(traceback.format_exc())
        print("reproduced: " + traceback.format_exc().strip().splitlines()[-1], file=sys.stderr)
        return 0
    with open(report, "w") as f:
        f.write("not reproduced: two epochs completed without the CUDA graph error\n")
    print("not reproduced", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
