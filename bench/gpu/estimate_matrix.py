#!/usr/bin/env python3
"""The memory estimate against measured peaks, on a GPU (the GPU recipe's
step estimate-matrix).

Over a matrix of configs (model widths × batch × frames × per-frame
checkpointing × precision off/fp16/bf16), for each: cfgcheck's estimate
(its lines, from `cfgcheck --format json`), PyTorch's peak allocated memory
for the seeds' model (the reference model, torch.cuda.max_memory_allocated,
over the same steps) and the process's memory as NVML reports it (context,
workspaces and the allocator's reserved memory: what nvidia-smi shows), and
with --train also train's own (`train bench --device cuda`, the allocator
view). The allocator does not see the CUDA context, so its peaks are
compared with the estimate less its "CUDA context and workspaces" line, and
NVML's figure with the whole estimate. Reports each side's error and the
share within ±10% (target 90%), and fits measured ≈ a·activations +
b·(everything else) by least squares on PyTorch's peaks: a and b are the
constants to fold back into common/src/estimate.rs. Results:
estimate_matrix.{csv,md} under --out, rewritten after every config, and
configs are measured until --total seconds (default $STEP_LIMIT) are nearly
spent, so a run cut short keeps what it measured.

A config that fails on one side (an out-of-memory, a crash) is recorded with
its reason and left out of the statistics. Needs CUDA (exits 2 without it),
except with --check: then it only asks cfgcheck for every config's estimate
and checks that the lines the fit reads are there (the CPU fallback of the
recipe runs this, so a renamed estimate line cannot silently break the GPU run).
"""

import argparse
import csv
import gc
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchlib import CONTEXT_LINE, cfgcheck_result, first_line  # noqa: E402
from gpulib import compute_apps  # noqa: E402
from train_vs_pytorch import pytorch_side, pytorch_steps  # noqa: E402

ACTIVATIONS = ("Activations: CNN encoder", "Activations: temporal, scalars, fusion")
FIELDS = ["small_model", "batch", "frames", "checkpointing", "precision", "estimate_mib", "activations_mib", "rest_mib",
          "context_allowance_mib", "train_peak_mib", "pytorch_peak_mib", "nvml_mib", "train_error", "pytorch_error",
          "nvml_error", "note"]


def grid():
    for small, batch, frames, ckpt, precision in itertools.product([True, False], [8, 16], [3, 5], ["off", "on"], ["off", "fp16", "bf16"]):
        yield {"memory_optimized": small, "batch_size": batch, "temporal_frames": frames, "image_size": 128,
               "gradient_checkpointing": ckpt == "on", "mixed_precision": precision, "epochs": 1}


def estimate(cfgcheck, path):
    """(activations MiB, the rest MiB, context allowance MiB, the resolved
    config) from cfgcheck."""
    result = cfgcheck_result(cfgcheck, path)
    lines = {line["component"]: line["mib"] for line in result["estimate"]["lines"]}
    missing = [name for name in (CONTEXT_LINE, *ACTIVATIONS) if name not in lines]
    if missing:
        raise SystemExit(f"estimate_matrix: the estimate has no line {missing} (lines: {list(lines)}); update this script")
    context = lines.pop(CONTEXT_LINE)
    act = sum(lines[name] for name in ACTIVATIONS)
    return act, sum(lines.values()) - act, context, result["resolved"]


def synthetic_batch(cfg, device):
    """A batch of CFG's shapes (seed 1) for PyTorch alone."""
    g = torch.Generator().manual_seed(1)
    b, t, size = cfg["batch_size"], cfg["temporal_frames"], cfg["image_size"]
    frames = torch.randn(b, t, cfg["image_channels"], size, size, generator=g)
    scalars = torch.randn(b, cfg["scalar_features"], generator=g)
    if cfg["task"] == "classification":
        target = torch.randint(0, cfg["num_labels"], (b,), generator=g)
    else:
        target = torch.randn(b, generator=g)
    return {"frames": frames.to(device), "scalars": scalars.to(device), "target": target.to(device)}


def nvml_mib():
    """What NVML attributes to this process now (context, workspaces and the
    allocator's reserved memory, which it keeps after the steps), MiB."""
    return compute_apps().get(os.getpid())


def write(out, rows, device_name):
    # A row with a note failed on one side: shown, but out of the statistics.
    ok = [r for r in rows if not r["note"] and r["pytorch_peak_mib"] != ""]
    summary = []
    for side in ("train", "pytorch", "nvml"):
        errs = [r[f"{side}_error"] for r in ok if r[f"{side}_error"] != ""]
        if errs:
            within = sum(abs(e) <= 0.10 for e in errs) / len(errs)
            summary.append(f"{side}: {len(errs)} configs, share within ±10%: {within:.0%}, mean error {sum(errs) / len(errs):+.1%}, "
                           f"worst {max(errs, key=abs):+.1%}")
    fit = None
    if len(ok) >= 2:
        # Least squares for measured(PyTorch) ≈ a·activations + b·rest.
        a_ = torch.tensor([[r["activations_mib"], r["rest_mib"]] for r in ok], dtype=torch.float64)
        y = torch.tensor([[r["pytorch_peak_mib"]] for r in ok], dtype=torch.float64)
        fit = torch.linalg.lstsq(a_, y).solution.flatten().tolist()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "estimate_matrix.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(out, "estimate_matrix.md"), "w") as f:
        f.write(f"# Memory estimate vs measured peaks ({device_name})\n\n")
        f.write("Error = (estimate − measured) / measured: against the allocator's peaks (train, PyTorch) without the "
                "estimate's CUDA context allowance, against NVML's figure for the process with it.\n\n")
        for line in summary:
            f.write(f"- {line}\n")
        if fit:
            f.write(f"- fit (PyTorch): measured ≈ {fit[0]:.3f} × activations + {fit[1]:.3f} × the rest\n")
        f.write("\n| small | batch | frames | ckpt | precision | estimate MiB | PyTorch peak | error | NVML | error "
                "| train peak | error | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            pct = lambda e: f"{e:+.1%}" if e != "" else ""
            f.write(f"| {r['small_model']} | {r['batch']} | {r['frames']} | {r['checkpointing']} | {r['precision']} | "
                    f"{r['estimate_mib']} | {r['pytorch_peak_mib']} | {pct(r['pytorch_error'])} | {r['nvml_mib']} | "
                    f"{pct(r['nvml_error'])} | {r['train_peak_mib']} | {pct(r['train_error'])} | {r['note']} |\n")
    return summary, fit


def train_peak(train, path, tmp, row):
    """train bench's peak allocated MiB for the config at PATH, with its
    report and weights (for PyTorch to run the same), or None with a note."""
    weights = os.path.join(tmp, "w.safetensors")
    bench = subprocess.run([train, "bench", "--config", path, "--device", "cuda", "--steps", "2", "--warmup", "1",
                            "--save", weights], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if bench.returncode != 0:
        last = (bench.stderr.strip().splitlines() or [""])[-1]
        row["note"] = f"train bench exit {bench.returncode}: {first_line(last)}"
        return None
    report = json.loads(bench.stdout)
    # null when train cannot read the allocator (built without the CUDA
    # headers): kept empty, and the note leaves the row out.
    peak = report.get("peak_allocated_mib")
    if peak is None:
        row["note"] = "train bench reported no peak (peak_allocated_mib: null; train info's allocator_view is false)"
    else:
        row["train_peak_mib"] = round(peak, 1)
    return report, weights


def measure(args, cfg, resolved, path, tmp, row):
    """Fills ROW's measured columns for one config (a dry run: on the CPU,
    where nothing has a peak)."""
    device = "cpu" if args.dry_run else "cuda"
    from_train = train_peak(args.train, path, tmp, row) if args.train else None
    try:
        gc.collect()
        if not args.dry_run:
            torch.cuda.empty_cache()
        if from_train:
            pt_peak = pytorch_side(from_train[0], from_train[1], 2, 1, torch.get_num_threads(), device)[3]
        else:
            pt_peak = pytorch_steps(resolved, None, synthetic_batch(resolved, device), 2, 1, device)[3]
        row["pytorch_peak_mib"] = "" if pt_peak is None else round(pt_peak, 1)
        used = nvml_mib()
        row["nvml_mib"] = "" if used is None else used
    except Exception as e:  # an OOM or a crash on PyTorch's side: keep the row, say why
        row["note"] = "; ".join(filter(None, [row["note"], f"PyTorch side: {type(e).__name__}: {first_line(e)}"]))
    for side, measured, est in (("train", row["train_peak_mib"], row["estimate_mib"]),
                                ("pytorch", row["pytorch_peak_mib"], row["estimate_mib"]),
                                ("nvml", row["nvml_mib"], row["estimate_mib"] + row["context_allowance_mib"])):
        if measured != "":
            row[f"{side}_error"] = round((est - measured) / measured, 4)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", help="the train binary (optional: train's own peaks beside PyTorch's)")
    ap.add_argument("--cfgcheck", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--total", type=int, default=int(os.environ.get("STEP_LIMIT") or 0),
                    help="seconds for the whole matrix (default: $STEP_LIMIT; 0: no limit)")
    ap.add_argument("--check", action="store_true", help="only check that every config's estimate has the lines the fit reads")
    ap.add_argument("--dry-run", action="store_true", help="one config on the CPU: the machinery, no measurement")
    args = ap.parse_args()
    if not args.check and not args.dry_run and not torch.cuda.is_available():
        print("estimate_matrix: no CUDA device (--check runs without one)", file=sys.stderr)
        return 2
    rows, summary, fit = [], [], None
    start, slowest = time.monotonic(), 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i, cfg in enumerate(grid()):
            if args.dry_run and i == 1:
                break
            if args.total and time.monotonic() - start + 2 * slowest + 3 > args.total:
                print(f"estimate_matrix: {args.total}s spent after {len(rows)} configs", file=sys.stderr)
                break
            began = time.monotonic()
            path = os.path.join(tmp, "c.yaml")
            with open(path, "w") as f:
                json.dump(cfg, f)
            act, rest, context, resolved = estimate(args.cfgcheck, path)
            row = {"small_model": cfg["memory_optimized"], "batch": cfg["batch_size"], "frames": cfg["temporal_frames"],
                   "checkpointing": "on" if cfg["gradient_checkpointing"] else "off", "precision": cfg["mixed_precision"],
                   "estimate_mib": round(act + rest, 1), "activations_mib": round(act, 1), "rest_mib": round(rest, 1),
                   "context_allowance_mib": context, "train_peak_mib": "", "pytorch_peak_mib": "", "nvml_mib": "",
                   "train_error": "", "pytorch_error": "", "nvml_error": "", "note": ""}
            rows.append(row)
            if args.check:
                continue
            measure(args, cfg, resolved, path, tmp, row)
            print(f"estimate_matrix: {len(rows):2}: {row}", file=sys.stderr)
            summary, fit = write(args.out, rows, "CPU, dry run" if args.dry_run else torch.cuda.get_device_name(0))
            slowest = max(slowest, time.monotonic() - began)
    if args.check:
        print(f"estimate_matrix: --check: {len(rows)} configs, each estimate has {CONTEXT_LINE!r} and the activation lines", file=sys.stderr)
        return 0
    for line in summary:
        print(f"estimate_matrix: {line}", file=sys.stderr)
    if fit:
        print(f"estimate_matrix: fit (PyTorch): measured ≈ {fit[0]:.3f} × activations + {fit[1]:.3f} × the rest", file=sys.stderr)
    return 0 if any(not r["note"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
