#!/usr/bin/env python3
"""Preloaded trials on the device (issue 32): a program sweep whose space
preloads torch, each trial forked from the server, must find CUDA not yet
initialised in its own process (the server never initialises it) and then
use the device itself: on a GPU, a tensor allocated on it and a step run
there; without one (the CPU fallback), the same on the CPU.

  preload_cuda.py --train BIN/train --python PY --device cuda|cpu --out DIR

On a GPU, nvidia-smi is polled while the sweep runs: the server (each
forked trial's parent) must never be listed as a compute process, each
trial must be. The same sweep without `preload` gives the per-trial cost of
a fresh process beside it. Writes DIR/preload_cuda.json (each trial's
report, the pids nvidia-smi listed, the per-trial seconds) and exits 1 when
a trial did not run forked, found CUDA initialised at its start, could not
use the device, or the server held a CUDA context.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from gpulib import compute_apps

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


def sweep(train, python, device, work, preload):
    """One 3-trial program sweep of TRIAL in WORK: (wall seconds, the trials'
    reports, its stderr, the pids nvidia-smi listed as compute processes
    while it ran)."""
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "trial.py"), "w") as f:
        f.write(TRIAL)
    with open(os.path.join(work, "space.yaml"), "w") as f:
        f.write("program: trial.py\nmethod: grid\nmetric: {name: val_loss}\n"
                + ("preload: [torch, torch._dynamo]\n" if preload else "") + "parameters:\n"
                f"  seed: {{values: [0, 1, 2]}}\n  device: {{value: {device}}}\n")
    seen, done = set(), threading.Event()

    def watch():
        # The server must never appear here: it never initialises CUDA.
        while not done.is_set():
            seen.update(compute_apps())
            done.wait(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    if device == "cuda":
        watcher.start()
    start = time.monotonic()
    run = subprocess.run([os.path.abspath(train), "sweep", "--space", "space.yaml", "--out", "s",
                          "--parallel", "1", "--interpreter", python], cwd=work, capture_output=True, text=True)
    wall = time.monotonic() - start
    done.set()
    if watcher.is_alive():
        watcher.join()
    reports = []
    for n in range(3):
        try:
            with open(os.path.join(work, "s", "trials", f"{n:04}", "train.log")) as f:
                reports += [json.loads(l) for l in f if l.startswith("{")]
        except (OSError, ValueError):
            pass
    return wall, reports, run, seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--device", choices=["cuda", "cpu"], required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    python = os.path.abspath(a.python) if os.sep in a.python else (shutil.which(a.python) or a.python)
    with tempfile.TemporaryDirectory() as d:
        wall, reports, run, seen = sweep(a.train, python, a.device, os.path.join(d, "preload"), True)
        sys.stderr.write(run.stderr)
        fresh_wall, fresh_reports, fresh, _ = sweep(a.train, python, a.device, os.path.join(d, "fresh"), False)
    forked = run.stderr.count("forked from the preload server")
    problems = []
    if run.returncode != 0:
        problems.append(f"train sweep exited {run.returncode}")
    if fresh.returncode != 0 or len(fresh_reports) != 3:
        problems.append(f"the sweep without preload exited {fresh.returncode} with {len(fresh_reports)} of 3 reports")
    if forked != 3:
        problems.append(f"{forked} of 3 trials ran forked from the preload server")
    if len(reports) != 3:
        problems.append(f"{len(reports)} of 3 trials reported")
    servers = {r["ppid"] for r in reports}
    for r in reports:
        if r["cuda_initialised_at_start"]:
            problems.append(f"trial pid {r['pid']}: CUDA was initialised before the trial touched it")
        if not r["device"].startswith(a.device):
            problems.append(f"trial pid {r['pid']}: ran on {r['device']}, not {a.device}")
    if a.device == "cuda":
        if servers & seen:
            problems.append(f"the preload server (pid {sorted(servers & seen)}) had a CUDA context (nvidia-smi listed it)")
        missing = [r["pid"] for r in reports if r["pid"] not in seen]
        if missing:
            problems.append(f"nvidia-smi never listed trial pid(s) {missing} as using the GPU (a trial shorter than its polling?)")
    per_trial = {"preloaded_s": round(wall / 3, 3), "fresh_s": round(fresh_wall / 3, 3),
                 "fresh_over_preloaded": round(fresh_wall / wall, 2) if wall else None}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "preload_cuda.json"), "w") as f:
        json.dump({"device": a.device, "forked": forked, "reports": reports, "server_pids": sorted(servers),
                   "nvidia_smi_pids": sorted(seen), "per_trial": per_trial, "problems": problems}, f, indent=1)
    for p in problems:
        print(f"preload_cuda: {p}", file=sys.stderr)
    print(f"preload_cuda: {len(reports)} forked trial(s) on {a.device}: {'ok' if not problems else 'FAILED'}; "
          f"per trial {per_trial['preloaded_s']}s preloaded, {per_trial['fresh_s']}s as a fresh process "
          f"({per_trial['fresh_over_preloaded']}x); server {'never in nvidia-smi' if a.device == 'cuda' and not servers & seen else 'not watched (CPU)' if a.device != 'cuda' else 'IN nvidia-smi'}",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
