#!/usr/bin/env python3
"""The memory estimate against measured peaks, on a GPU (the GPU recipe).

Over a matrix of configs (model widths × batch × frames × per-frame
checkpointing × precision), for each: cfgcheck's estimate (its lines, from
`cfgcheck --format json`), train's peak allocated memory (`train bench
--device cuda`, the allocator view) and PyTorch's (the reference model,
torch.cuda.max_memory_allocated) over the same steps. The allocator does not
see the CUDA context, so the estimate is compared without its "CUDA context
and workspaces" line. Reports each side's error and the share within ±10%
(target 90%), and fits measured ≈ a·activations + b·(everything else) by
least squares: a and b are the constants to fold back into
common/src/estimate.rs. Results: estimate_matrix.{csv,md} under --out,
rewritten after every config so a run cut short keeps what it measured.

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

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchlib import CONTEXT_LINE, estimate_lines, first_line  # noqa: E402
from train_vs_pytorch import pytorch_side  # noqa: E402

ACTIVATIONS = ("Activations: CNN encoder", "Activations: temporal, scalars, fusion")
FIELDS = ["small_model", "batch", "frames", "checkpointing", "precision", "estimate_mib", "activations_mib", "rest_mib",
          "context_allowance_mib", "train_peak_mib", "pytorch_peak_mib", "train_error", "pytorch_error", "note"]


def grid():
    for small, batch, frames, ckpt, precision in itertools.product([True, False], [8, 16], [3, 5], ["off", "on"], ["off", "bf16"]):
        yield {"memory_optimized": small, "batch_size": batch, "temporal_frames": frames, "image_size": 128,
               "gradient_checkpointing": ckpt == "on", "mixed_precision": precision, "epochs": 1}


def estimate(cfgcheck, path):
    """(activations MiB, the rest MiB, context allowance MiB) from cfgcheck."""
    lines = estimate_lines(cfgcheck, path)
    missing = [name for name in (CONTEXT_LINE, *ACTIVATIONS) if name not in lines]
    if missing:
        raise SystemExit(f"estimate_matrix: the estimate has no line {missing} (lines: {list(lines)}); update this script")
    context = lines.pop(CONTEXT_LINE)
    act = sum(lines[name] for name in ACTIVATIONS)
    return act, sum(lines.values()) - act, context


def write(out, rows, device_name):
    # A row with a note failed on one side: shown, but out of the statistics.
    ok = [r for r in rows if not r["note"] and r["train_peak_mib"] != "" and r["pytorch_peak_mib"] != ""]
    summary = []
    for side in ("train", "pytorch"):
        errs = [r[f"{side}_error"] for r in ok if r[f"{side}_error"] != ""]
        if errs:
            within = sum(abs(e) <= 0.10 for e in errs) / len(errs)
            summary.append(f"{side}: {len(errs)} configs, share within ±10%: {within:.0%}, mean error {sum(errs) / len(errs):+.1%}, "
                           f"worst {max(errs, key=abs):+.1%}")
    fit = None
    if len(ok) >= 2:
        # Least squares for measured(train) ≈ a·activations + b·rest.
        a_ = torch.tensor([[r["activations_mib"], r["rest_mib"]] for r in ok], dtype=torch.float64)
        y = torch.tensor([[r["train_peak_mib"]] for r in ok], dtype=torch.float64)
        fit = torch.linalg.lstsq(a_, y).solution.flatten().tolist()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "estimate_matrix.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(out, "estimate_matrix.md"), "w") as f:
        f.write(f"# Memory estimate vs measured peaks ({device_name})\n\n")
        f.write("Error = (estimate − measured peak allocated) / measured, without the CUDA context allowance.\n\n")
        for line in summary:
            f.write(f"- {line}\n")
        if fit:
            f.write(f"- fit (train): measured ≈ {fit[0]:.3f} × activations + {fit[1]:.3f} × the rest\n")
        f.write("\n| small | batch | frames | ckpt | precision | estimate MiB | train peak | error | PyTorch peak | error | note |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            pct = lambda e: f"{e:+.1%}" if e != "" else ""
            f.write(f"| {r['small_model']} | {r['batch']} | {r['frames']} | {r['checkpointing']} | {r['precision']} | {r['estimate_mib']} | "
                    f"{r['train_peak_mib']} | {pct(r['train_error'])} | {r['pytorch_peak_mib']} | {pct(r['pytorch_error'])} | {r['note']} |\n")
    return summary, fit


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", help="the train binary (not needed with --check)")
    ap.add_argument("--cfgcheck", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true", help="only check that every config's estimate has the lines the fit reads")
    args = ap.parse_args()
    if not args.check and not torch.cuda.is_available():
        print("estimate_matrix: no CUDA device (--check runs without one)", file=sys.stderr)
        return 2
    if not args.check and not args.train:
        ap.error("--train is required unless --check")
    rows, summary, fit = [], [], None
    with tempfile.TemporaryDirectory() as tmp:
        for cfg in grid():
            path = os.path.join(tmp, "c.yaml")
            with open(path, "w") as f:
                json.dump(cfg, f)
            act, rest, context = estimate(args.cfgcheck, path)
            row = {"small_model": cfg["memory_optimized"], "batch": cfg["batch_size"], "frames": cfg["temporal_frames"],
                   "checkpointing": "on" if cfg["gradient_checkpointing"] else "off", "precision": cfg["mixed_precision"],
                   "estimate_mib": round(act + rest, 1), "activations_mib": round(act, 1), "rest_mib": round(rest, 1),
                   "context_allowance_mib": context, "train_peak_mib": "", "pytorch_peak_mib": "",
                   "train_error": "", "pytorch_error": "", "note": ""}
            rows.append(row)
            if args.check:
                continue
            weights = os.path.join(tmp, "w.safetensors")
            bench = subprocess.run([args.train, "bench", "--config", path, "--device", "cuda", "--steps", "2", "--warmup", "1",
                                    "--save", weights], capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if bench.returncode != 0:
                last = (bench.stderr.strip().splitlines() or [""])[-1]
                row["note"] = f"train bench exit {bench.returncode}: {first_line(last)}"
            else:
                report = json.loads(bench.stdout)
                # null when train cannot read the allocator (built without the
                # CUDA headers): kept empty, and the note leaves the row out.
                peak = report.get("peak_allocated_mib")
                if peak is None:
                    row["note"] = "train bench reported no peak (peak_allocated_mib: null; train info's allocator_view is false)"
                else:
                    row["train_peak_mib"] = round(peak, 1)
                try:
                    gc.collect()
                    torch.cuda.empty_cache()
                    pt_peak = pytorch_side(report, weights, 2, 1, torch.get_num_threads(), "cuda")[3]
                    if pt_peak is None:
                        row["note"] = "; ".join(filter(None, [row["note"], "PyTorch side reported no peak"]))
                    else:
                        row["pytorch_peak_mib"] = round(pt_peak, 1)
                except Exception as e:  # an OOM or a crash on PyTorch's side: keep the row, say why
                    row["note"] = "; ".join(filter(None, [row["note"], f"PyTorch side: {type(e).__name__}: {first_line(e)}"]))
                for side in ("train", "pytorch"):
                    if row[f"{side}_peak_mib"] != "":
                        row[f"{side}_error"] = round((row["estimate_mib"] - row[f"{side}_peak_mib"]) / row[f"{side}_peak_mib"], 4)
            print(f"estimate_matrix: {len(rows):2}: {row}", file=sys.stderr)
            summary, fit = write(args.out, rows, torch.cuda.get_device_name(0))
    if args.check:
        print(f"estimate_matrix: --check: {len(rows)} configs, each estimate has {CONTEXT_LINE!r} and the activation lines", file=sys.stderr)
        return 0
    for line in summary:
        print(f"estimate_matrix: {line}", file=sys.stderr)
    if fit:
        print(f"estimate_matrix: fit (train): measured ≈ {fit[0]:.3f} × activations + {fit[1]:.3f} × the rest", file=sys.stderr)
    return 0 if any(not r["note"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
