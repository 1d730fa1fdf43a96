#!/usr/bin/env python3
"""One small training trial in PyTorch, as a sweep written in Python runs it:
the reference model (reference_model.py) on random data of the config's
shapes, AdamW, the config's epochs of training plus validation, and a
checkpoint written atomically at the end. bench/trial_overhead.py times it two
ways against a train process per trial:

  python bench/trial_reference.py --config CFG.json --out DIR
      one trial in this fresh process (a process-per-trial sweep)
  python bench/trial_reference.py --config CFG.json --out DIR --in-process N
      a warm-up trial, then N trials in this one process, each followed by
      seed 004's clean-up (gc.collect and torch.cuda.empty_cache before and
      after); prints {"trial_ms": [...], "max_rss_mib": ...} as JSON

CFG.json is train's resolved config (the "config" of `train bench`'s report),
so both sides build the same model. Work is deliberately the same or less
than train's (no metrics CSV, no plot, no summary), so the comparison cannot
flatter train.
"""

import argparse
import gc
import json
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_model import Model, loss_of  # noqa: E402


def data(cfg, n, device):
    shape = (n, cfg["temporal_frames"], cfg["image_channels"], cfg["image_size"], cfg["image_size"])
    frames = torch.randn(shape, device=device)
    scalars = torch.randn(n, cfg["scalar_features"], device=device)
    if cfg["task"] == "classification":
        target = torch.randint(0, cfg["num_labels"], (n,), device=device)
    else:
        target = torch.randn(n, device=device)
    return frames, scalars, target


def save_atomically(state, path):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def trial(cfg, out, device):
    torch.manual_seed(cfg["seed"])
    model = Model(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["learning_rate"], weight_decay=cfg["weight_decay"])
    b = cfg["batch_size"]
    train = data(cfg, cfg["data"]["synthetic_train_examples"], device)
    val = data(cfg, cfg["data"]["synthetic_val_examples"], device)
    for _ in range(cfg["epochs"]):
        model.train()
        for i in range(0, len(train[0]), b):
            frames, scalars, target = (t[i:i + b] for t in train)
            opt.zero_grad(set_to_none=True)
            loss_of(cfg, model(frames, scalars), target).backward()
            if cfg.get("grad_clip"):
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
            opt.step()
        model.eval()
        total = 0.0
        with torch.no_grad():
            for i in range(0, len(val[0]), b):
                frames, scalars, target = (t[i:i + b] for t in val)
                total += loss_of(cfg, model(frames, scalars), target).item()
    os.makedirs(out, exist_ok=True)
    save_atomically({"model": model.state_dict(), "optimizer": opt.state_dict()}, os.path.join(out, "checkpoint.pt"))
    return total


def clean_up(device):
    # Seed 004's fix 2: clear the CUDA cache before and after garbage collection.
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="train's resolved config as JSON")
    ap.add_argument("--out", required=True, help="trial directory (the checkpoint goes there)")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--in-process", type=int, metavar="N", help="run a warm-up trial and N timed trials in this process")
    args = ap.parse_args()
    with open(args.config) as f:
        cfg = json.load(f)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.in_process is None:
        trial(cfg, args.out, device)
        return
    times = []
    for n in range(args.in_process + 1):
        start = time.perf_counter()
        trial(cfg, os.path.join(args.out, f"trial-{n}"), device)
        clean_up(device)
        if n > 0:  # trial 0 pays the process's one-time costs
            times.append((time.perf_counter() - start) * 1000.0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"trial_ms": times, "max_rss_mib": rss}))


if __name__ == "__main__":
    main()
