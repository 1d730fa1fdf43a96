"""A plain argparse DDP training script on the CPU (torchrun, gloo): a wide
MLP on synthetic data, each rank on its half. Rank 0 prints one JSON line
per epoch and `{"final_loss": ...}` at the end (the trained model's mean
loss over all the data).

`--memory-budget-mib N` limits rank 1's address space (RLIMIT_AS) from the
second epoch on to what it maps then plus N MiB (address_space.py): a batch
whose activations do not fit fails for real on that rank only
("DefaultCPUAllocator: can't allocate memory"), and the launcher ends the
other. Between what 32 x 2 and 64 need, batch 64 fails and 32 x 2 fits.
"""
import argparse
import json

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import address_space

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--grad-accum", type=int, default=1)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--hidden", type=int, default=524288)
p.add_argument("--memory-budget-mib", type=int, default=0)
args = p.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
torch.set_num_threads(1)
features, labels = 32, 4
g = torch.Generator().manual_seed(0)
x = torch.randn(256, features, generator=g)
y = (x @ torch.randn(features, labels, generator=g)).argmax(dim=1)
mine_x, mine_y = x[rank::world], y[rank::world]
model = DDP(
    torch.nn.Sequential(
        # Batch statistics: the result depends on the batch as each step
        # saw it, not only on batch x accumulation.
        torch.nn.BatchNorm1d(features),
        torch.nn.Linear(features, args.hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, labels),
    )
)
opt = torch.optim.SGD(model.parameters(), lr=0.001)


micro = args.batch_size
for epoch in range(1, args.epochs + 1):
    if epoch == 2 and rank == 1 and args.memory_budget_mib:
        address_space.limit(args.memory_budget_mib)
    for at in range(0, len(mine_y), micro * args.grad_accum):
        for k in range(args.grad_accum):
            lo = at + k * micro
            xb, yb = mine_x[lo : lo + micro], mine_y[lo : lo + micro]
            loss = F.cross_entropy(model(xb), yb) / args.grad_accum
            if k + 1 < args.grad_accum:
                with model.no_sync():
                    loss.backward()
            else:
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if rank == 0:
        print(json.dumps({"epoch": epoch, "loss": loss.item() * args.grad_accum}), flush=True)
model.eval()
with torch.no_grad():
    final = sum(
        F.cross_entropy(model.module(x[i : i + micro]), y[i : i + micro], reduction="sum").item()
        for i in range(0, len(y), micro)
    ) / len(y)
if rank == 0:
    print(json.dumps({"final_loss": final}), flush=True)
dist.destroy_process_group()
