#!/usr/bin/env python3
"""Preloaded trials on the device (issue 32): a program sweep whose space
preloads torch, each trial forked from the server, must find CUDA not yet
initialised in its own process (the server never initialises it) and then
use the device itself: on a GPU, a tensor allocated on it and a step run
there; without one (the CPU fallback), the same on the CPU.

  preload_cuda.py --train BIN/train --python PY --device cuda|cpu --out DIR

Writes DIR/preload_cuda.json (each trial's report) and exits 1 when a trial
did not run forked, found CUDA initialised at its start, or could not use
the device.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

TRIAL = r'''
import argparse, json, os, torch
p = argparse.ArgumentParser(); p.add_argument("--seed", type=int); p.add_argument("--device"); a = p.parse_args()
started_initialised = torch.cuda.is_initialized()
dev = torch.device(a.device)
torch.manual_seed(a.seed)
m = torch.nn.Linear(64, 1).to(dev)
x = torch.randn(128, 64, device=dev)
loss = m(x).pow(2).mean()
loss.backward()
report = {"val_loss": float(loss), "pid": os.getpid(), "ppid": os.getppid(),
          "cuda_initialised_at_start": started_initialised, "device": str(x.device),
          "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
          "allocated_mib": torch.cuda.memory_allocated() / 2**20 if dev.type == "cuda" else 0.0}
print(json.dumps(report), flush=True)
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--device", choices=["cuda", "cpu"], required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    python = os.path.abspath(a.python) if os.sep in a.python else (shutil.which(a.python) or a.python)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "trial.py"), "w") as f:
            f.write(TRIAL)
        with open(os.path.join(d, "space.yaml"), "w") as f:
            f.write("program: trial.py\nmethod: grid\nmetric: {name: val_loss}\n"
                    "preload: [torch, torch._dynamo]\nparameters:\n"
                    f"  seed: {{values: [0, 1, 2]}}\n  device: {{value: {a.device}}}\n")
        run = subprocess.run([os.path.abspath(a.train), "sweep", "--space", "space.yaml", "--out", "s",
                              "--parallel", "1", "--interpreter", python],
                             cwd=d, capture_output=True, text=True)
        sys.stderr.write(run.stderr)
        reports = []
        for n in range(3):
            try:
                with open(os.path.join(d, "s", "trials", f"{n:04}", "train.log")) as f:
                    reports += [json.loads(l) for l in f if l.startswith("{")]
            except (OSError, ValueError):
                pass
    forked = run.stderr.count("forked from the preload server")
    problems = []
    if run.returncode != 0:
        problems.append(f"train sweep exited {run.returncode}")
    if forked != 3:
        problems.append(f"{forked} of 3 trials ran forked from the preload server")
    if len(reports) != 3:
        problems.append(f"{len(reports)} of 3 trials reported")
    for r in reports:
        if r["cuda_initialised_at_start"]:
            problems.append(f"trial pid {r['pid']}: CUDA was initialised before the trial touched it")
        if not r["device"].startswith(a.device):
            problems.append(f"trial pid {r['pid']}: ran on {r['device']}, not {a.device}")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "preload_cuda.json"), "w") as f:
        json.dump({"device": a.device, "forked": forked, "reports": reports, "problems": problems}, f, indent=1)
    for p in problems:
        print(f"preload_cuda: {p}", file=sys.stderr)
    print(f"preload_cuda: {len(reports)} forked trial(s) on {a.device}: "
          f"{'ok' if not problems else 'FAILED'}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
