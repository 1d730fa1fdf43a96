#!/usr/bin/env python3
"""train versus PyTorch eager, side by side in one run, on CPU.

`train bench` times steady-state training steps (forward, backward, gradient
clipping, AdamW) on one fixed batch, and saves its initial weights and that
batch. The same model in PyTorch (reference_model.py) loads those weights and
that batch and times the same steps with torch.optim.AdamW, with the same
thread count. Both sides run with per-frame checkpointing on and off.
Correctness cross-check first: the initial weights' eval-mode loss on the batch
must agree to 1e-4 (relative). Medians of --steps steps after --warmup;
ratio = PyTorch's median step time / train's (> 1: train is faster).
The two sides alternate for --rounds rounds and the median round of each
counts, so a slow phase of a shared machine does not land on one side only.
With --device cuda (the GPU recipe) both sides run on the GPU and report
their peak allocated memory (train through its allocator view, PyTorch
through torch.cuda.max_memory_allocated); --precision sets autocast on both
(fp16 with a loss scaler on both); --compile adds PyTorch with torch.compile
(default mode). Results: bench/results/train_vs_pytorch{--tag}.{csv,md}.
"""

import argparse
import csv
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import command_line, first_line, stamp  # noqa: E402
from reference_model import Model, loss_of  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"F32": torch.float32, "I64": torch.int64}


def read_safetensors(path):
    """A minimal reader (the safetensors package is not a torch dependency)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        body = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[a:b]), dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out


def pytorch_side(report, weights_path, steps, warmup, threads, device="cpu", compile_mode=None):
    """The same steps in PyTorch: (initial eval loss, median step ms, median
    forward+backward ms, peak allocated MiB on CUDA or None)."""
    torch.set_num_threads(threads)
    cfg = report["config"]
    tensors = read_safetensors(weights_path)
    batch = {k[len("batch."):]: v.to(device) for k, v in tensors.items() if k.startswith("batch.")}
    state = {k: v for k, v in tensors.items() if not k.startswith("batch.")}
    torch.manual_seed(0)
    model = Model(cfg)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise SystemExit(f"bench: weights do not match the reference model: missing {missing}, unexpected {unexpected}")
    model = model.to(device)
    model.eval()
    with torch.no_grad():
        initial = loss_of(cfg, model(batch["frames"], batch["scalars"]), batch["target"]).item()
    model.train()
    run = torch.compile(model, mode=compile_mode) if compile_mode else model
    precision = cfg.get("mixed_precision", "off")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(device) if precision == "fp16" else None
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["learning_rate"], weight_decay=cfg["weight_decay"], eps=1e-8)
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    times, fb_times = [], []
    for i in range(warmup + steps):
        if cuda and i == warmup:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        with torch.autocast(device.split(":")[0], dtype=dtype, enabled=dtype is not None):
            loss = loss_of(cfg, run(batch["frames"], batch["scalars"]), batch["target"])
        (scaler.scale(loss) if scaler else loss).backward()
        sync()
        fb = time.perf_counter()
        if scaler:
            scaler.unscale_(opt)
        if cfg.get("grad_clip"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        sync()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1000.0)
            fb_times.append((fb - start) * 1000.0)
    times.sort()
    fb_times.sort()
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    return initial, times[len(times) // 2], fb_times[len(fb_times) // 2], peak


def checkpointing_tradeoff(rows):
    """Per-frame checkpointing on against off, each side: step time ratio and,
    on a GPU, how much less peak memory (target: >= 30% less for <= 20% more time)."""
    by = {r["checkpointing"]: r for r in rows}
    if set(by) != {"off", "on"}:
        return ""
    parts = []
    for side, name in (("train", "train"), ("pytorch", "PyTorch (torch.utils.checkpoint)")):
        ratio = by["on"][f"{side}_step_ms"] / by["off"][f"{side}_step_ms"]
        text = f"{name}: step time x{ratio:.3f}"
        off, on = by["off"][f"{side}_peak_allocated_mib"], by["on"][f"{side}_peak_allocated_mib"]
        if off and on:
            text += f", peak allocated {1 - on / off:.1%} less ({off} -> {on} MiB)"
        parts.append(text)
    return "Checkpointing on vs off: " + "; ".join(parts) + "."


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="path to the train binary (release build)")
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3, help="alternating train/PyTorch rounds; the median round counts")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the GPU recipe)")
    ap.add_argument("--precision", choices=["off", "bf16", "fp16"], help="override the config's mixed_precision")
    ap.add_argument("--compile", action="store_true", help="also time PyTorch with torch.compile (default mode)")
    ap.add_argument("--tag", default="", help="suffix for the result files")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ckpt in ("off", "on"):
            weights = os.path.join(tmp, f"bench-{ckpt}.safetensors")
            cmd = [args.train, "bench", "--config", args.config, "--steps", str(args.steps), "--warmup", str(args.warmup),
                   "--checkpointing", ckpt, "--save", weights, "--threads", str(args.threads),
                   "--device", "cuda" if args.device.startswith("cuda") else "cpu"]
            if args.precision:
                cmd += ["--precision", args.precision]
            # Alternate the two sides so that slow phases of a shared machine
            # hit both; each side's median over rounds is reported.
            train_rounds, torch_rounds = [], []
            for _ in range(args.rounds):
                done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
                if done.returncode != 0:
                    raise SystemExit(f"bench: {' '.join(cmd)} failed:\n{done.stderr}")
                report = json.loads(done.stdout)
                initial, torch_ms, torch_fb, torch_peak = pytorch_side(report, weights, args.steps, args.warmup, args.threads, args.device)
                rel = abs(initial - report["initial_eval_loss"]) / max(abs(initial), 1e-12)
                # cuDNN picks algorithms per process on a GPU: a looser bound there.
                if rel > (1e-3 if args.device.startswith("cuda") else 1e-4):
                    raise SystemExit(f"bench: losses disagree: train {report['initial_eval_loss']} vs PyTorch {initial}")
                train_rounds.append((report["step_ms_median"], report["forward_backward_ms_median"]))
                torch_rounds.append((torch_ms, torch_fb))
            train_rounds.sort()
            torch_rounds.sort()
            report["step_ms_median"], report["forward_backward_ms_median"] = train_rounds[len(train_rounds) // 2]
            torch_ms, torch_fb = torch_rounds[len(torch_rounds) // 2]
            train_ms = report["step_ms_median"]
            b = report["batch_size"]
            rows.append({
                "checkpointing": ckpt,
                "batch": b,
                "threads": args.threads,
                "train_step_ms": round(train_ms, 2),
                "pytorch_step_ms": round(torch_ms, 2),
                "train_samples_per_s": round(b / train_ms * 1000, 1),
                "pytorch_samples_per_s": round(b / torch_ms * 1000, 1),
                "pytorch_over_train": round(torch_ms / train_ms, 3),
                "train_fwd_bwd_ms": round(report["forward_backward_ms_median"], 2),
                "pytorch_fwd_bwd_ms": round(torch_fb, 2),
                "pytorch_compile_step_ms": "",
                "pytorch_compile_over_train": "",
                "train_peak_allocated_mib": round(report["peak_allocated_mib"], 1) if report.get("peak_allocated_mib") else "",
                "pytorch_peak_allocated_mib": round(torch_peak, 1) if torch_peak else "",
                "device": args.device,
                "precision": report["config"]["mixed_precision"],
                "loss_rel_diff": f"{rel:.1e}",
            })
            print(f"checkpointing {ckpt:3}: train {train_ms:8.2f} ms (fwd+bwd {report['forward_backward_ms_median']:.2f})  PyTorch {torch_ms:8.2f} ms (fwd+bwd {torch_fb:.2f})  ratio {torch_ms / train_ms:.3f}  (loss rel diff {rel:.1e})", file=sys.stderr)
            # Written after every measurement: a run stopped by a time limit
            # (a slow compile on a lent GPU) keeps what it measured.
            write(args, rows)
            if args.compile:
                # A compile failure (a missing compiler, an unsupported op) is
                # a result to report, not a reason to lose the other columns.
                try:
                    compile_ms = pytorch_side(report, weights, args.steps, args.warmup, args.threads, args.device, "default")[1]
                    rows[-1]["pytorch_compile_step_ms"] = round(compile_ms, 2)
                    rows[-1]["pytorch_compile_over_train"] = round(compile_ms / train_ms, 3)
                except Exception as e:
                    note = f"failed: {type(e).__name__}: {first_line(e, 120)}"
                    rows[-1]["pytorch_compile_step_ms"] = note
                    print(f"bench: torch.compile (checkpointing {ckpt}) {note}", file=sys.stderr)
                write(args, rows)
    print(open(os.path.join(args.out, f"train_vs_pytorch{args.tag}.md")).read())


def write(args, rows):
    date = stamp()
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"CPU ({platform.processor() or platform.machine()})"
    machine = f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}"
    command = command_line()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"train_vs_pytorch{args.tag}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["date", "machine", "config", *rows[0].keys()])
        w.writeheader()
        for r in rows:
            w.writerow({"date": date, "machine": machine, "config": args.config, **r})
    with open(os.path.join(args.out, f"train_vs_pytorch{args.tag}.md"), "w") as f:
        f.write(f"# train vs PyTorch eager, one training step on {args.device}\n\n{date} · {machine} · `{args.config}`\n\nCommand: `{command}`\n\n")
        f.write(f"Device: {device_name} · precision: {rows[0]['precision']}\n\n")
        f.write("| checkpointing | batch | threads | train ms/step | PyTorch ms/step | PyTorch+compile ms/step | of which fwd+bwd (train / PyTorch) | train samples/s | PyTorch samples/s | PyTorch / train | PyTorch+compile / train | peak MiB (train / PyTorch) | initial loss rel. diff |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            peak = f"{r['train_peak_allocated_mib'] or 'n/a'} / {r['pytorch_peak_allocated_mib'] or 'n/a'}"
            f.write(f"| {r['checkpointing']} | {r['batch']} | {r['threads']} | {r['train_step_ms']} | {r['pytorch_step_ms']} | {r['pytorch_compile_step_ms'] or ('not run' if not args.compile else 'pending')} | {r['train_fwd_bwd_ms']} / {r['pytorch_fwd_bwd_ms']} | {r['train_samples_per_s']} | {r['pytorch_samples_per_s']} | {r['pytorch_over_train']} | {r['pytorch_compile_over_train'] or 'n/a'} | {peak} | {r['loss_rel_diff']} |\n")
        f.write("\n" + checkpointing_tradeoff(rows) + "\n")


if __name__ == "__main__":
    main()
