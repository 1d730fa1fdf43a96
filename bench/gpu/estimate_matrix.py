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
common/src/estimate.rs. Results: estimate_matrix.{csv,md} under --out.
Needs CUDA; exits 2 without it.
"""

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from train_vs_pytorch import pytorch_side  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True)
    ap.add_argument("--cfgcheck", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("estimate_matrix: no CUDA device", file=sys.stderr)
        return 2
    rows = []
    grid = itertools.product([True, False], [8, 16], [3, 5], ["off", "on"], ["off", "bf16"])
    with tempfile.TemporaryDirectory() as tmp:
        for small, batch, frames, ckpt, precision in grid:
            cfg = {"memory_optimized": small, "batch_size": batch, "temporal_frames": frames, "image_size": 128,
                   "gradient_checkpointing": ckpt == "on", "mixed_precision": precision, "epochs": 1}
            path = os.path.join(tmp, "c.yaml")
            with open(path, "w") as f:
                json.dump(cfg, f)
            est = json.loads(subprocess.run([args.cfgcheck, path, "--format", "json"], capture_output=True, text=True).stdout)["results"][0]
            lines = {l["component"]: l["mib"] for l in est["estimate"]["lines"]}
            context = lines.pop("CUDA context and workspaces")
            act = lines.get("Activations: CNN encoder", 0) + lines.get("Activations: temporal, scalars, fusion", 0)
            rest = sum(lines.values()) - act
            weights = os.path.join(tmp, "w.safetensors")
            bench = subprocess.run([args.train, "bench", "--config", path, "--device", "cuda", "--steps", "2", "--warmup", "1",
                                    "--save", weights], capture_output=True, text=True)
            if bench.returncode != 0:
                print(f"estimate_matrix: train bench failed: {bench.stderr[-300:]}", file=sys.stderr)
                continue
            report = json.loads(bench.stdout)
            _, _, _, torch_peak = pytorch_side(report, weights, 2, 1, torch.get_num_threads(), "cuda")
            rows.append({"small_model": small, "batch": batch, "frames": frames, "checkpointing": ckpt, "precision": precision,
                         "estimate_mib": round(act + rest, 1), "activations_mib": round(act, 1), "rest_mib": round(rest, 1),
                         "context_allowance_mib": context, "train_peak_mib": report["peak_allocated_mib"],
                         "pytorch_peak_mib": round(torch_peak, 1)})
    if not rows:
        return 1
    for side in ("train", "pytorch"):
        errs = [(r["estimate_mib"] - r[f"{side}_peak_mib"]) / r[f"{side}_peak_mib"] for r in rows]
        within = sum(abs(e) <= 0.10 for e in errs) / len(errs)
        print(f"{side}: share within ±10%: {within:.0%}; mean error {sum(errs) / len(errs):+.1%}", file=sys.stderr)
    # Least squares for measured(train) ≈ a·activations + b·rest.
    a_ = torch.tensor([[r["activations_mib"], r["rest_mib"]] for r in rows], dtype=torch.float64)
    y = torch.tensor([[r["train_peak_mib"]] for r in rows], dtype=torch.float64)
    fit = torch.linalg.lstsq(a_, y).solution.flatten().tolist()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "estimate_matrix.csv"), "w") as f:
        f.write(",".join(rows[0].keys()) + "\n")
        for r in rows:
            f.write(",".join(str(v) for v in r.values()) + "\n")
    with open(os.path.join(args.out, "estimate_matrix.md"), "w") as f:
        f.write(f"# Memory estimate vs measured peaks ({torch.cuda.get_device_name(0)})\n\n")
        f.write(f"Fit (train): measured ≈ {fit[0]:.3f} × activations + {fit[1]:.3f} × the rest\n\n")
        f.write("| small | batch | frames | ckpt | precision | estimate MiB | train peak | PyTorch peak |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['small_model']} | {r['batch']} | {r['frames']} | {r['checkpointing']} | {r['precision']} | {r['estimate_mib']} | {r['train_peak_mib']} | {r['pytorch_peak_mib']} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
