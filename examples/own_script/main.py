"""A small real PyTorch training script, in the shape of the seeds' own
(`python main.py --config cfg.yaml`): a two-layer MLP on synthetic
classification data, on the CPU, in seconds. It prints the seeds' epoch
lines, a JSON line per epoch and a "valid loss" line, which trainguard reads
without any change to the script.

Settings come from --config (a YAML file) and/or flags (`--lr=0.01`, as W&B's
`${args}` gives them); flags win. For the tests and the demo, `fault:` makes
a failure happen for real:
  nan       a NaN in the inputs: the loss is NaN (computed by torch)
  label     a label equal to num_classes: torch's IndexError "Target N is out
            of bounds."
  oom       the process limits its own address space to `memory_limit_mib`
            (RLIMIT_AS, a small machine) and then allocates a batch that does
            not fit: torch's "DefaultCPUAllocator: can't allocate memory"
  oom-batch the process limits its address space to what it maps plus
            `budget_mib`, then allocates a step's activations, 16 MiB per
            example of `batch_size`: a batch too large fails as `oom` does,
            a smaller one fits (what `train run --auto-fix` turns)
  sigkill   at epoch 2 the process SIGKILLs itself, standing in for the
            kernel's OOM killer (seed 002's exit -9), with no message
  hang      at epoch 2 it sleeps for an hour
  cuda-graph  prints the CUDA-graph replay error of seed 000's clash, as
            torch/_inductor/cudagraph_trees.py words it (its stack trace a
            sample; a CPU cannot produce it), and exits 1
`hold_mib: N` keeps N MiB of host memory touched for the whole run.
"""
import argparse
import json
import os
import resource
import signal
import sys
import time

import torch
import torch.nn.functional as F
import yaml

DEFAULTS = {
    "lr": 0.05,
    "batch_size": 64,
    "accum_steps": 1,
    "hidden": 32,
    "epochs": 3,
    "num_classes": 5,
    "seed": 0,
    "fault": "none",
    "fault_epoch": 2,
    "hold_mib": 0,
    "memory_limit_mib": 0,
    "budget_mib": 700,
    "epoch_seconds": 0.0,
}

CUDA_GRAPH_ERROR = (
    "RuntimeError: Error: accessing tensor output of CUDAGraphs that has been "
    "overwritten by a subsequent run. Stack trace: File \"main.py\", line 212. "
    "To prevent overwriting, clone the tensor outside of torch.compile() or "
    "call torch.compiler.cudagraph_mark_step_begin() before each model invocation."
)


def settings():
    p = argparse.ArgumentParser()
    p.add_argument("--config")
    for k, v in DEFAULTS.items():
        p.add_argument(f"--{k}", type=type(v) if not isinstance(v, bool) else str)
    a = p.parse_args()
    s = dict(DEFAULTS)
    if a.config:
        with open(a.config) as f:
            s.update(yaml.safe_load(f) or {})
    s.update({k: v for k, v in vars(a).items() if v is not None and k != "config"})
    return s


def main():
    s = settings()
    torch.manual_seed(int(s["seed"]))
    held = bytearray(b"\x01") * (int(s["hold_mib"]) << 20) if s["hold_mib"] else None
    n, d, k = 1024, 20, int(s["num_classes"])
    x = torch.randn(n, d)
    w = torch.randn(d, k)
    y = (x @ w).argmax(dim=1)
    if s["fault"] == "nan":
        x[3, 4] = float("nan")
    if s["fault"] == "label":
        y[7] = k
    xv, yv = torch.randn(256, d), None
    yv = (xv @ w).argmax(dim=1)
    model = torch.nn.Sequential(
        torch.nn.Linear(d, int(s["hidden"])), torch.nn.ReLU(), torch.nn.Linear(int(s["hidden"]), k)
    )
    opt = torch.optim.SGD(model.parameters(), lr=float(s["lr"]))
    bs = int(s["batch_size"])
    epochs = int(s["epochs"])
    for epoch in range(1, epochs + 1):
        t0 = time.time()
        if epoch == int(s["fault_epoch"]):
            if s["fault"] == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if s["fault"] == "hang":
                time.sleep(3600)
            if s["fault"] == "cuda-graph":
                print(CUDA_GRAPH_ERROR, file=sys.stderr, flush=True)
                sys.exit(1)
            if s["fault"] == "oom":
                limit = int(s["memory_limit_mib"]) << 20
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                # A batch of activations that does not fit under the limit.
                torch.empty(limit // 4 + (1 << 20), dtype=torch.float32).fill_(1.0)
            if s["fault"] == "oom-batch":
                with open("/proc/self/statm") as f:
                    mapped = int(f.read().split()[0]) * resource.getpagesize()
                limit = mapped + (int(s["budget_mib"]) << 20)
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                torch.empty(bs, 4 << 20, dtype=torch.float32).fill_(1.0)
        model.train()
        total = 0.0
        # `accum_steps` batches per update: the effective batch is
        # batch_size x accum_steps.
        accum = int(s["accum_steps"])
        opt.zero_grad()
        for k, i in enumerate(range(0, n, bs)):
            loss = F.cross_entropy(model(x[i : i + bs]), y[i : i + bs])
            (loss / accum).backward()
            if (k + 1) % accum == 0 or i + bs >= n:
                opt.step()
                opt.zero_grad()
            total += loss.item() * len(x[i : i + bs])
        model.eval()
        with torch.no_grad():
            val = F.cross_entropy(model(xv), yv).item()
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        time.sleep(float(s["epoch_seconds"]))
        dt = time.time() - t0
        print(
            f"Epoch {epoch}/{epochs} | Train Loss: {total / n:.4f} | Val Loss: {val:.4f} "
            f"| LR: {float(s['lr']):.6f} | Time: {dt:.2f}s",
            flush=True,
        )
        print(json.dumps({"epoch": epoch, "val_accuracy": round(acc, 4)}), flush=True)
        print(f"| end of epoch {epoch} | valid loss {val:.4f}", flush=True)
    del held
    print(f"best val loss {val:.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
