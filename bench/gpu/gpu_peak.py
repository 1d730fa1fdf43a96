#!/usr/bin/env python3
"""Step gpu-peak: memdiag and the supervisor's GPU peak against NVML.

A process holds a known amount of GPU memory (--gib in one tensor) under
`train run`; while it holds it, memdiag and nvidia-smi (both NVML) read the
card and its processes, and must agree; the CUDA context is NVML's figure
for the process less torch.cuda.memory_reserved(); and the supervisor's
peak_gpu_mib for the run (summary.yaml) must be within 5% of held + context.
Where NVML reports no per-process memory (a container that hides pids),
the step says so and is not a pass (exit 3).

  gpu_peak.py --bin BIN --python PY --out DIR [--gib 10] [--dry-run]
"""

import argparse
import json
import os
import subprocess
import sys
import time

from gpulib import Checks, common_args, compute_apps, gpu_memory, refuse_faults, run, summary

HOLD = r"""
import json, os, sys, time, torch
gib, seconds, ready, device = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device=device)
x.fill_(1)
cuda = device == "cuda"
if cuda:
    torch.cuda.synchronize()
info = {"pid": os.getpid(), "held_mib": x.numel() / 2**20,
        "reserved_mib": torch.cuda.memory_reserved() / 2**20 if cuda else 0.0,
        "allocated_mib": torch.cuda.memory_allocated() / 2**20 if cuda else 0.0}
with open(ready + ".tmp", "w") as f:
    json.dump(info, f)
os.replace(ready + ".tmp", ready)
print(f"holding {info['held_mib']:.0f} MiB", flush=True)
time.sleep(seconds)
"""


def main():
    ap = common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--gib", type=float, default=10.0)
    a = ap.parse_args()
    refuse_faults("gpu-peak")
    c = Checks("gpu-peak", a.out, a.dry_run)
    gib = 0.0625 if a.dry_run else a.gib
    device = "cpu" if a.dry_run else "cuda"
    hold = os.path.join(a.out, "gpu_peak_hold.py")
    ready = os.path.join(a.out, "gpu_peak_ready.json")
    with open(hold, "w") as f:
        f.write(HOLD)
    if os.path.exists(ready):
        os.remove(ready)
    run_dir = os.path.join(a.out, "gpu-peak-run")
    cmd = [os.path.join(a.bin, "train"), "run", "--quiet", "--out", run_dir, "--",
           a.python, hold, str(gib), "6", ready, device]
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if not os.path.exists(ready):
        child.kill()
        out, err = child.communicate()
        c.check("the holding process started", False, (err or out).strip()[-300:])
        c.verdict("the holding process never held its memory")
    with open(ready) as f:
        info = json.load(f)
    c.figure("held", info)
    # Both read NVML while the memory is held and nothing else moves.
    code, _, report_text, err = run([os.path.join(a.bin, "memdiag"), "--format", "json"], timeout=30)
    smi_mem = gpu_memory()
    apps = compute_apps()
    report = json.loads(report_text) if code == 0 else {}
    c.figure("memdiag_report", report)
    c.figure("nvidia_smi", {"memory": smi_mem, "compute_apps": apps})
    out, err = child.communicate(timeout=120)
    c.check("train run exited 0", child.returncode == 0, f"exit {child.returncode}: {err.strip()[-200:]}")
    s = summary(run_dir) or {}
    leg = (s.get("legs") or [{}])[-1]
    peak = leg.get("peak") or {}
    c.figure("supervisor_peak", peak)
    if a.dry_run:
        c.check("memdiag ran", code == 0, f"exit {code}")
        c.verdict(f"held {info['held_mib']:.0f} MiB on the CPU; supervisor host peak {peak.get('host_pss_mib')} MiB, "
                  f"gpu {peak.get('gpu_mib')} ({peak.get('gpu_note')})")
    gpu0 = (report.get("gpus") or [{}])[0]
    mem = gpu0.get("memory") or {}
    c.check("memdiag read the GPU", code == 0 and mem, f"memdiag exit {code}, memory {mem}")
    if smi_mem and mem:
        c.check("memdiag's used memory equals nvidia-smi's (both NVML)", abs(mem["used_mib"] - smi_mem["used_mib"]) <= 2,
                f"memdiag {mem['used_mib']} MiB used of {mem['total_mib']}, nvidia-smi {smi_mem['used_mib']} of {smi_mem['total_mib']}")
    pid = info["pid"]
    procs = {p.get("pid"): p.get("used_mib") for p in (gpu0.get("processes") or [])}
    nvml_mib = apps.get(pid)
    if nvml_mib is None or procs.get(pid) is None:
        c.verdict(f"memdiag lists {sorted(procs)}, nvidia-smi {apps}; the holder is pid {pid}",
                  no_result="NVML reports no per-process memory for the holder (a container that hides pids?)")
    c.check("memdiag's figure for the process equals nvidia-smi's", abs(procs[pid] - nvml_mib) <= 1,
            f"memdiag {procs[pid]} MiB, nvidia-smi {nvml_mib} MiB for pid {pid}")
    context = nvml_mib - info["reserved_mib"]
    c.figure("cuda_context_mib", context)
    c.check("the CUDA context is NVML's figure less torch's reserved memory, and positive", 0 < context < 4096,
            f"{nvml_mib} - {info['reserved_mib']:.0f} = {context:.0f} MiB")
    gpu_peak = peak.get("gpu_mib")
    expected = info["held_mib"] + context
    if gpu_peak is None:
        c.check("the supervisor measured a GPU peak", False, f"gpu_mib null: {peak.get('gpu_note')}")
    else:
        err_pct = 100.0 * (gpu_peak - expected) / expected
        c.figure("supervisor_error_pct", err_pct)
        c.check("the supervisor's peak_gpu_mib is within 5% of held + context", abs(err_pct) <= 5,
                f"{gpu_peak:.0f} MiB against {info['held_mib']:.0f} + {context:.0f} = {expected:.0f} ({err_pct:+.1f}%)")
    c.verdict(f"held {info['held_mib']:.0f} MiB: NVML {nvml_mib} MiB for the process (memdiag {procs[pid]}), "
              f"context {context:.0f} MiB, supervisor peak {gpu_peak} MiB")


if __name__ == "__main__":
    sys.exit(main())
