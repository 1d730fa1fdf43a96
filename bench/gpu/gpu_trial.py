"""A program trial for the GPU recipe's packing step (sweep_pack.py): holds
--mib MiB on the device for the whole trial, computes for --seconds and
prints `{"val_loss": X}` twice a second. A trial that does not fit fails as a
user's script does, with torch's own out-of-memory error."""

import argparse
import json
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--mib", type=int, required=True)
p.add_argument("--seconds", type=float, default=3.0)
p.add_argument("--device", default="cuda")
a = p.parse_args()
held = torch.empty(a.mib << 20, dtype=torch.uint8, device=a.device)
held.fill_(1)
x = torch.randn(1024, 1024, device=a.device)
start = last = time.monotonic()
while time.monotonic() - start < a.seconds:
    x = torch.tanh(x @ x / 32.0)
    if time.monotonic() - last >= 0.5:
        last = time.monotonic()
        print(json.dumps({"val_loss": float(x.abs().mean())}), flush=True)
print(json.dumps({"val_loss": float(x.abs().mean())}), flush=True)
