"""A plain argparse script whose out-of-memory is an optimizer-state
allocation made after the activations: a small language model (embedding
and output head, 64 MiB each) trained with fused Adam, whose moments (64
MiB each) are allocated at the first optimizer step, while the step's
logits and their probabilities are still held for its accuracy and
confidence. The failing allocation is the same 64 MiB buffer at every
batch that fails, but a smaller batch holds less (2 MiB an example): under
`--memory-budget-mib N` (the address space, RLIMIT_AS, past what the
process maps once the model is built; address_space.py) with N between
what 16 x 4 and 32 x 2 need (about 420 and 450 MiB), batch 64 and batch
32 x 2 fail there and batch 16 x 4 fits. It logs each step's loss once
the backward pass is done, before the optimizer step. One step by
default: the state allocated, later steps hold it and their activations
at once.
"""
import argparse
import json

import torch
import torch.nn.functional as F

import address_space

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--grad-accum", type=int, default=1)
p.add_argument("--steps", type=int, default=1)
p.add_argument("--memory-budget-mib", type=int, default=0)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
vocab, width, tokens = 16384, 1024, 16
embed = torch.nn.Embedding(vocab, width)
head = torch.nn.Linear(width, vocab, bias=False)
# Fused: its update makes no temporaries, so the state is what the step adds.
opt = torch.optim.Adam([embed.weight, head.weight], lr=1e-3, fused=True)
g = torch.Generator().manual_seed(0)
data = torch.randint(0, vocab, (256, tokens + 1), generator=g)
if args.memory_budget_mib:
    address_space.limit(args.memory_budget_mib)

at = 0
for step in range(1, args.steps + 1):
    for _ in range(args.grad_accum):
        batch = data[at : at + args.batch_size]
        at = (at + args.batch_size) % len(data)
        logits = head(embed(batch[:, :-1]))
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        (loss / args.grad_accum).backward()
        with torch.no_grad():
            probs = logits.softmax(-1)
    print(json.dumps({"step": step, "loss": loss.item()}), flush=True)
    opt.step()
    opt.zero_grad(set_to_none=True)
    accuracy = (logits.argmax(-1) == batch[:, 1:]).float().mean().item()
    confidence = probs.max(-1).values.mean().item()
    print(json.dumps({"step": step, "accuracy": accuracy, "confidence": confidence}), flush=True)
