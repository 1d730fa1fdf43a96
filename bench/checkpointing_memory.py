#!/usr/bin/env python3
"""Per-frame checkpointing's memory and time, on against off, train and
PyTorch side by side, on a CPU: host memory (peak resident set) instead of
the GPU's peak allocated memory, which the GPU recipe measures.

For each of checkpointing off and on, in fresh processes:
  train    `train bench --config CFG --checkpointing X` (saves its weights and batch)
  train, glibc malloc defaults
           the same with GLIBC_TUNABLES=glibc.malloc.perturb=0, which makes
           train leave glibc's malloc thresholds alone: what train's own
           setting (a heap kept between steps, tools/train/model/src/system/malloc.rs)
           adds to the peak
  PyTorch  the same steps on the same weights and batch (train_vs_pytorch.py's
           reference side, eager NCHW as users run it, torch.utils.checkpoint
           per frame), in its own process
Each child's peak RSS comes from wait4. What training itself takes is that
peak less the side's floor: the peak of `train info` (libtorch loaded) and of
a Python process that imports torch and builds an AdamW (which imports
torch._dynamo on first use). Beside it, cfgcheck's estimate for the same config
without its CUDA context allowance (the GPU-only line). Reported: step time,
peak RSS, peak above the floor, and per side how much less memory
checkpointing takes for how much more time (the issue's target, stated for
the GPU: at least 30% less for at most 20% more).
Results: bench/results/checkpointing_memory.{csv,md}.

Mixed precision is off by default: on a CPU fp16 autocast is emulated and
takes minutes a step, which measures the emulation, not checkpointing.
"""

import argparse
import csv
import json
import os
import platform
import statistics
import sys
import tempfile

from benchlib import CONTEXT_LINE, command_line, estimate_lines, load_note, measured, shown, stamp

HERE = os.path.dirname(os.path.abspath(__file__))
PYTORCH_FLOOR = "import torch; torch.optim.AdamW([torch.zeros(1, requires_grad=True)])"
# A glibc.malloc tunable at its default value: train then keeps glibc's thresholds.
GLIBC_DEFAULTS = {"GLIBC_TUNABLES": "glibc.malloc.perturb=0"}
MALLOC_SIDE = "train, glibc malloc defaults"


def pytorch_child(report_path, weights, steps, warmup, threads):
    """The PyTorch side, run as its own process so its peak RSS is its own."""
    sys.path.insert(0, HERE)
    from train_vs_pytorch import pytorch_side

    with open(report_path) as f:
        report = json.load(f)
    step_ms = pytorch_side(report, weights, steps, warmup, threads)[1]
    print(json.dumps({"step_ms": step_ms}))


def floor(cmd, runs=3, env=None):
    return statistics.median(measured(cmd, env)[1] for _ in range(runs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", help="path to the train binary (release build; required)")
    ap.add_argument("--cfgcheck", help="path to the cfgcheck binary (required)")
    ap.add_argument("--config", default="configs/colab_full_stable.yaml")
    ap.add_argument("--precision", default="off", choices=["off", "bf16", "fp16"])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--python", default=sys.executable, help="python with torch")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--child", nargs=2, metavar=("REPORT", "WEIGHTS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        pytorch_child(*args.child, args.steps, args.warmup, args.threads)
        return
    if not (args.train and args.cfgcheck):
        ap.error("--train and --cfgcheck are required")

    # Each side's runtime with nothing trained: libtorch loaded; torch
    # imported with what an optimizer pulls in on first use (torch._dynamo).
    args.sched = load_note()
    floors = {"train": floor([args.train, "info"]), "PyTorch": floor([args.python, "-c", PYTORCH_FLOOR])}
    floors[MALLOC_SIDE] = floor([args.train, "info"], env=GLIBC_DEFAULTS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ckpt in ("off", "on"):
            weights = os.path.join(tmp, f"w-{ckpt}.safetensors")
            bench = [args.train, "bench", "--config", args.config, "--checkpointing", ckpt, "--precision", args.precision,
                     "--steps", str(args.steps), "--warmup", str(args.warmup), "--save", weights,
                     "--threads", str(args.threads), "--device", "cpu"]
            _, train_rss, out = measured(bench)
            report = json.loads(out)
            _, glibc_rss, out = measured(bench, env=GLIBC_DEFAULTS)
            glibc_ms = json.loads(out)["step_ms_median"]
            report_path = os.path.join(tmp, f"report-{ckpt}.json")
            with open(report_path, "w") as f:
                json.dump(report, f)
            _, torch_rss, out = measured([
                args.python, os.path.abspath(__file__), "--child", report_path, weights,
                "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads)])
            torch_ms = json.loads(out)["step_ms"]
            lines = estimate_lines(args.cfgcheck, report["config"])
            estimate = sum(mib for name, mib in lines.items() if name != CONTEXT_LINE)
            for side, ms, rss in (("train", report["step_ms_median"], train_rss), (MALLOC_SIDE, glibc_ms, glibc_rss),
                                  ("PyTorch", torch_ms, torch_rss)):
                rows.append({"side": side, "checkpointing": ckpt, "step_ms": round(ms, 1),
                             "peak_rss_mib": round(rss, 1), "floor_mib": round(floors[side], 1),
                             "training_mib": round(rss - floors[side], 1), "estimate_mib": round(estimate, 1)})
                print(f"{side:30} checkpointing {ckpt:3}: {ms:9.1f} ms/step, peak RSS {rss:8.1f} MiB "
                      f"({rss - floors[side]:8.1f} above the floor; estimate {estimate:.1f})", file=sys.stderr)
    write(args, rows, report["batch_size"])


def tradeoff(rows):
    parts = []
    for side in ("train", MALLOC_SIDE, "PyTorch"):
        by = {r["checkpointing"]: r for r in rows if r["side"] == side}
        slower = by["on"]["step_ms"] / by["off"]["step_ms"]
        if by["off"]["training_mib"] <= 0:  # a config too small to rise above the floor
            parts.append(f"{side} memory not measurable above the floor, {slower:.2f}× the step time")
            continue
        less = 1 - by["on"]["training_mib"] / by["off"]["training_mib"]
        parts.append(f"{side} {less:.1%} less memory for {slower:.2f}× the step time")
    return ("Checkpointing on against off: " + "; ".join(parts) + " (targets: on this CPU at least 40% less "
            "training memory for train, issue 26; on a GPU at least 30% less for at most 1.20×).")


def malloc_cost(rows):
    """What train's malloc setting adds to its peak, per checkpointing setting."""
    by = {(r["side"], r["checkpointing"]): r for r in rows}
    parts = [f"{by[('train', c)]['peak_rss_mib'] - by[(MALLOC_SIDE, c)]['peak_rss_mib']:+.1f} MiB peak RSS and "
             f"{by[('train', c)]['step_ms'] / by[(MALLOC_SIDE, c)]['step_ms']:.2f}× the step time with checkpointing {c}"
             for c in ("off", "on")]
    return ("train's malloc setting (heap kept between steps) against glibc's defaults: " + "; ".join(parts) + ".")


def write(args, rows, batch):
    date = stamp()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "checkpointing_memory.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["date", "machine", "config", "precision", "threads", *rows[0].keys()])
        w.writeheader()
        for r in rows:
            w.writerow({"date": date, "machine": machine, "config": shown(args.config), "precision": args.precision,
                        "threads": args.threads, **r})
    with open(os.path.join(args.out, "checkpointing_memory.md"), "w") as f:
        f.write(f"# Per-frame checkpointing on a CPU: host memory and step time\n\n{date} · {machine} · "
                f"`{shown(args.config)}`, batch {batch}, precision {args.precision}, {args.threads} threads\n\n"
                f"Command: `{command_line()}`\n\n")
        f.write("| side | checkpointing | ms/step | peak RSS MiB | floor MiB | training MiB (peak − floor) | "
                "cfgcheck estimate MiB (less CUDA context) |\n|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['side']} | {r['checkpointing']} | {r['step_ms']} | {r['peak_rss_mib']} | {r['floor_mib']} | "
                    f"{r['training_mib']} | {r['estimate_mib']} |\n")
        f.write("\n" + tradeoff(rows) + "\n\n" + malloc_cost(rows) + "\n")
        load = os.getloadavg()[0]
        f.write(f"\nAt the start: {args.sched}; at the end: load average {load:.2f}"
                + (". The machine was busy, so times are slower than on an idle one; memory is not affected.\n"
                   if max(load, float(args.sched.split()[2].rstrip(','))) > 1.0 else ".\n"))
    print(open(os.path.join(args.out, "checkpointing_memory.md")).read())


if __name__ == "__main__":
    main()
