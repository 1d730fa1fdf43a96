"""A plain argparse training script, as most are written: no help strings,
the gradient accumulation left at its default unless given, and a
`--checkpointing` switch over torch.utils.checkpoint. A wide MLP on
synthetic data, on the CPU; one JSON line per optimizer step and
`{"final_loss": ...}` at the end (the trained model's mean loss).

`--memory-budget-mib N` limits the address space (RLIMIT_AS) to what the
process maps before it builds the model plus N MiB (address_space.py): a
batch whose activations do not fit fails for real ("DefaultCPUAllocator:
can't allocate memory"). Between what 32 x 2 and 64 need, batch 64 fails
(with checkpointing too: the model is one layer) and 32 x 2 fits; under
the model's 64 MiB weight (40) the model itself fails, at every batch.
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import address_space

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--grad-accum", type=int, default=1)
p.add_argument("--checkpointing", action="store_true")
p.add_argument("--steps", type=int, default=4)
p.add_argument("--hidden", type=int, default=524288)
p.add_argument("--memory-budget-mib", type=int, default=0)
args = p.parse_args()


torch.manual_seed(0)
torch.set_num_threads(1)
features, labels = 32, 4
g = torch.Generator().manual_seed(0)
x = torch.randn(256, features, generator=g)
y = (x @ torch.randn(features, labels, generator=g)).argmax(dim=1)
if args.memory_budget_mib:
    address_space.limit(args.memory_budget_mib)
# 32 x 524288 floats: a 64 MiB weight.
up = torch.nn.Linear(features, args.hidden)
down = torch.nn.Linear(args.hidden, labels)
opt = torch.optim.SGD(list(up.parameters()) + list(down.parameters()), lr=0.01)


def hidden(xb):
    return torch.relu(up(xb))


def loss_of(xb, yb):
    h = checkpoint(hidden, xb, use_reentrant=False) if args.checkpointing else hidden(xb)
    return F.cross_entropy(down(h), yb)


micro, at = args.batch_size, 0
for step in range(1, args.steps + 1):
    for _ in range(args.grad_accum):
        xb, yb = x[at : at + micro], y[at : at + micro]
        at = (at + micro) % len(y)
        (loss_of(xb, yb) / args.grad_accum).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(json.dumps({"step": step, "loss": loss_of(xb, yb).item()}), flush=True)
with torch.no_grad():
    final = sum(loss_of(x[i : i + micro], y[i : i + micro]).item() * len(y[i : i + micro]) for i in range(0, len(y), micro))
print(json.dumps({"final_loss": final / len(y)}), flush=True)
