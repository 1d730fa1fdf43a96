#!/usr/bin/env python3
"""The memory estimate's activation lines against the bytes autograd really
saves, on CPU, in fp32 (issue 3: "the activation part can already be checked
against the bytes that autograd really saves").

For each config, `cfgcheck --format json` gives the resolved config and the
estimate (with mixed_precision forced off, since this runs in fp32 on CPU).
The reference model (reference_model.py, the same layers as train's) runs one
training forward under torch.autograd.graph.saved_tensors_hooks, which sees
every tensor kept for backward; parameters are left out and tensors sharing
storage are counted once.

Without checkpointing, everything is saved in the forward. With per-frame
checkpointing the forward saves only the frame boundaries and the layers
after the encoder; backward then recomputes one frame at a time, whose saved
bytes are measured by running the encoder alone on one frame. Estimate and
measurement are printed side by side; results go to bench/results/activations.{csv,md}.
"""

import argparse
import csv
import os
import platform
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cfgcheck_result, estimate_lines, stamp  # noqa: E402
from reference_model import Model  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024 * 1024


def saved_bytes(model, fn):
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = max(seen.get(st.data_ptr(), 0), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(seen.values()), out


def measure(cfg, seed=0):
    torch.manual_seed(seed)
    model = Model(cfg).train()
    b, t = cfg["batch_size"], cfg["temporal_frames"]
    c, s = cfg["image_channels"], cfg["image_size"]
    frames = torch.randn(b, t, c, s, s)
    scalars = torch.randn(b, cfg["scalar_features"])
    total, out = saved_bytes(model, lambda: model(frames, scalars))
    measured = total
    if cfg["gradient_checkpointing"]:
        # Backward's recomputation keeps one frame's encoder graph at a time.
        one, _ = saved_bytes(model, lambda: model.encoder(frames[:, 0].contiguous()))
        measured += one
    out.sum().backward()  # the graph is a real training graph
    return measured


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cfgcheck", required=True, help="path to the cfgcheck binary")
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    rows = []
    for path in args.configs:
        base = cfgcheck_result(args.cfgcheck, path)["resolved"]
        for ckpt in (False, True):
            cfg = dict(base, mixed_precision="off", gradient_checkpointing=ckpt, torch_compile=False)
            lines = estimate_lines(args.cfgcheck, cfg)
            est = lines["Activations: CNN encoder"] + lines["Activations: temporal, scalars, fusion"]
            got = measure(cfg) / MIB
            rows.append({
                "config": os.path.basename(path),
                "checkpointing": ckpt,
                "batch": cfg["batch_size"],
                "frames": cfg["temporal_frames"],
                "image": cfg["image_size"],
                "estimate_mib": round(est, 1),
                "saved_mib": round(got, 1),
                "estimate_over_saved": round(est / got, 3),
            })
            print(f"{path:40} ckpt={ckpt!s:5} estimate {est:8.1f} MiB  saved {got:8.1f} MiB  ratio {est / got:.3f}", file=sys.stderr)

    date = stamp()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}"
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "activations.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["date", "machine", *rows[0].keys()])
        w.writeheader()
        for r in rows:
            w.writerow({"date": date, "machine": machine, **r})
    with open(os.path.join(args.out, "activations.md"), "w") as f:
        f.write(f"# Estimated activations vs bytes autograd saves (CPU, fp32)\n\n{date} · {machine}\n\n")
        f.write("Command: `just bench-activations`\n\n")
        f.write("| config | checkpointing | batch × frames × image | estimate MiB | saved MiB | estimate / saved |\n|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['config']} | {'on' if r['checkpointing'] else 'off'} | {r['batch']} × {r['frames']} × {r['image']}² | {r['estimate_mib']} | {r['saved_mib']} | {r['estimate_over_saved']} |\n")
    print(open(os.path.join(args.out, "activations.md")).read())


if __name__ == "__main__":
    main()
