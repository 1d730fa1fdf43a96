"""A program trial for the GPU recipe's memory-model step (sweep_model.py):
holds --batch_size x --width MiB on the device for the whole trial (an
activation that grows with the batch and the model), computes for --seconds
and prints `{"val_loss": X}` twice a second; X depends on the width and the
effective batch (batch x accumulation), not on how the batch is split. A
point that does not fit fails as a user's script does, with torch's own
out-of-memory error. Its flags carry the usual names, so auto-fix finds the
batch and the accumulation."""

import argparse
import json
import math
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--batch_size", type=int, default=8)
p.add_argument("--gradient_accumulation_steps", type=int, default=1)
p.add_argument("--width", type=int, default=512)
p.add_argument("--seconds", type=float, default=1.0)
p.add_argument("--device", default="cuda")
a = p.parse_args()
held = torch.empty((a.batch_size * a.width) << 20, dtype=torch.uint8, device=a.device)
held.fill_(1)
x = torch.randn(512, 512, device=a.device)
loss = abs(math.log(a.width / 1024)) + 1.0 / (a.batch_size * a.gradient_accumulation_steps)
start = last = time.monotonic()
while time.monotonic() - start < a.seconds:
    x = torch.tanh(x @ x / 16.0)
    if time.monotonic() - last >= 0.5:
        last = time.monotonic()
        print(json.dumps({"val_loss": loss + 1e-3 * float(x.abs().mean())}), flush=True)
print(json.dumps({"val_loss": loss + 1e-3 * float(x.abs().mean())}), flush=True)
