#!/usr/bin/env python3
"""train versus PyTorch eager, side by side in one run, like for like.

`train bench` times steady-state training steps (forward, backward, gradient
clipping, AdamW) on one fixed batch, and saves its initial weights and that
batch. The same model in PyTorch (reference_model.py) loads those weights and
that batch and times the same steps with torch.optim.AdamW, with the same
thread count. Both sides run with per-frame checkpointing on and off.

train ships two settings a plain PyTorch script does not have (issue 26):
the encoder in channels-last (NHWC) on the CPU, and glibc malloc thresholds
that keep the heap between steps. So PyTorch runs in four ways, each in its
own process, each against the same train:
  eager                    as users run it: NCHW, glibc's default malloc
  channels-last            model.to(memory_format=torch.channels_last) and
                           each frame channels-last
  eager+malloc             NCHW with train's malloc setting, through the
                           environment (MALLOC_MMAP_THRESHOLD_=268435456
                           MALLOC_TRIM_THRESHOLD_=1073741824)
  channels-last+malloc     both: PyTorch with everything train has
and train runs in its own layout and in the other one (`train bench
--channels-last`), which says what the layout alone buys. With --device cuda
(the GPU recipe) the malloc variants are left out (they concern host memory)
and train's other layout is channels-last, which `auto` leaves off on CUDA:
the pair the GPU has not measured yet.

Correctness cross-check first: each PyTorch side's initial eval-mode loss on
the batch must agree with train's to 1e-4 (relative; 1e-3 on a GPU). For each
side: the median step and forward+backward time over --steps steps after
--warmup, the minor page faults per timed step (getrusage in each process)
and the process's peak resident memory (wait4). Every round runs every side
once, checkpointing off and on, in a rotated order, so a slow phase of a
shared machine hits all sides; ratios are taken within a round (PyTorch's
step time / train's: > 1 means train is faster) and the median round's ratio
is reported with the spread over rounds. On a GPU each side also reports
its peak allocated memory (train through its allocator view, PyTorch through
torch.cuda.max_memory_allocated); --precision sets autocast on both (fp16
with a loss scaler on both); --compile adds PyTorch with torch.compile
(default mode), once per checkpointing setting after the rounds. The load
average, and the autogroup nice value where Linux's autogroup scheduling is
on, go into the results. Results: bench/results/train_vs_pytorch{--tag}.{csv,md},
rewritten after every round.
"""

import argparse
import csv
import json
import os
import platform
import resource
import statistics
import struct
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import command_line, first_line, load_note, measured, stamp  # noqa: E402
from reference_model import Model, loss_of  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"F32": torch.float32, "I64": torch.int64}
# train's malloc setting (tools/train/model/src/system/malloc.rs), for PyTorch's process.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(256 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
# PyTorch's variants: (name, channels-last, malloc environment, compile mode).
VARIANTS = {
    "eager": (False, None, None),
    "channels-last": (True, None, None),
    "eager+malloc": (False, MALLOC_ENV, None),
    "channels-last+malloc": (True, MALLOC_ENV, None),
    "compile": (False, None, "default"),
}


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


def pytorch_side(report, weights_path, steps, warmup, threads, device="cpu", compile_mode=None, channels_last=False):
    """The same steps in PyTorch: (initial eval loss, median step ms, median
    forward+backward ms, peak allocated MiB on CUDA or None, minor page
    faults per timed step)."""
    torch.set_num_threads(threads)
    tensors = read_safetensors(weights_path)
    batch = {k[len("batch."):]: v.to(device) for k, v in tensors.items() if k.startswith("batch.")}
    state = {k: v for k, v in tensors.items() if not k.startswith("batch.")}
    return pytorch_steps(report["config"], state, batch, steps, warmup, device, compile_mode, channels_last)


def pytorch_steps(cfg, state, batch, steps, warmup, device="cpu", compile_mode=None, channels_last=False):
    """pytorch_side's steps on the reference model of CFG (a resolved config:
    train bench's, or cfgcheck's `resolved`) with STATE's weights (None: its
    own initialisation, seed 0) on BATCH (frames, scalars, target)."""
    torch.manual_seed(0)
    model = Model(cfg)
    if state is not None:
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [m for m in missing if not m.endswith("num_batches_tracked")]
        if missing or unexpected:
            raise SystemExit(f"bench: weights do not match the reference model: missing {missing}, unexpected {unexpected}")
    model = model.to(device)
    if channels_last:
        # PyTorch's recipe: the model's 4-D weights, and the input (per frame).
        model = model.to(memory_format=torch.channels_last)
        model.channels_last = True
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
    faults_before = 0
    for i in range(warmup + steps):
        if i == warmup:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
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
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / max(steps, 1)
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    return initial, statistics.median(times), statistics.median(fb_times), peak, faults


def child(args):
    """One PyTorch variant in this process (its own peak RSS, its own malloc
    environment); prints its figures as JSON."""
    with open(args.child[0]) as f:
        report = json.load(f)
    channels_last, _, compile_mode = VARIANTS[args.variant]
    initial, step, fb, peak, faults = pytorch_side(report, args.child[1], args.steps, args.warmup, args.threads,
                                                   args.device, compile_mode, channels_last)
    print(json.dumps({"initial_eval_loss": initial, "step_ms": step, "fb_ms": fb, "peak_allocated_mib": peak,
                      "minor_faults_per_step": faults}))


def run_train(args, ckpt, layout, weights):
    """One `train bench` process: its figures in the same shape as a PyTorch side's."""
    cmd = [args.train, "bench", "--config", args.config, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--checkpointing", ckpt, "--save", weights, "--threads", str(args.threads),
           "--device", "cuda" if args.device.startswith("cuda") else "cpu", "--channels-last", layout]
    if args.precision:
        cmd += ["--precision", args.precision]
    _, rss, out = measured(cmd)
    r = json.loads(out)
    return r, {"step_ms": r["step_ms_median"], "fb_ms": r["forward_backward_ms_median"], "peak_rss_mib": rss,
               "peak_allocated_mib": r.get("peak_allocated_mib"), "minor_faults_per_step": r.get("minor_faults_per_step"),
               "initial_eval_loss": r["initial_eval_loss"], "channels_last": r.get("channels_last")}


def run_pytorch(args, variant, report_path, weights):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", report_path, weights, "--variant", variant,
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads), "--device", args.device]
    _, rss, out = measured(cmd, env=VARIANTS[variant][1])
    return {**json.loads(out), "peak_rss_mib": rss}


def other_layout(args):
    """train's second side: the layout `auto` does not pick on this device."""
    return ("train, channels-last", "on") if args.device.startswith("cuda") else ("train, NCHW", "off")


def sides(args):
    """The sides every round runs: train in its own layout (first), train in
    the other one, PyTorch's variants (the malloc ones on the CPU only)."""
    names = ["train", other_layout(args)[0], "PyTorch eager", "PyTorch channels-last"]
    if not args.device.startswith("cuda"):
        names += ["PyTorch eager+malloc", "PyTorch channels-last+malloc"]
    return names


def run_side(args, ckpt, side, prepared, tmp):
    """One process of one side; its figures, checked against train's loss."""
    report, report_path, weights = prepared[ckpt]
    if side == "train":
        _, fig = run_train(args, ckpt, "auto", os.path.join(tmp, f"t-{ckpt}.safetensors"))
    elif side == other_layout(args)[0]:
        _, fig = run_train(args, ckpt, other_layout(args)[1], os.path.join(tmp, f"t-{ckpt}.safetensors"))
    else:
        fig = run_pytorch(args, side.removeprefix("PyTorch "), report_path, weights)
    rel = abs(fig["initial_eval_loss"] - report["initial_eval_loss"]) / max(abs(report["initial_eval_loss"]), 1e-12)
    # cuDNN picks algorithms per process on a GPU: a looser bound there.
    if rel > (1e-3 if args.device.startswith("cuda") else 1e-4):
        raise SystemExit(f"bench: losses disagree ({side}, checkpointing {ckpt}): train "
                         f"{report['initial_eval_loss']} vs {fig['initial_eval_loss']}")
    fig["loss_rel_diff"] = rel
    return fig


def prepare(args, tmp):
    """Per checkpointing setting, the weights, the batch and the resolved
    config every round shares (train draws them from the config's seed: the
    same in every run)."""
    prepared = {}
    for ckpt in ("off", "on"):
        weights = os.path.join(tmp, f"w-{ckpt}.safetensors")
        report, _ = run_train(argparse.Namespace(**{**vars(args), "steps": 1, "warmup": 0}), ckpt, "auto", weights)
        report_path = os.path.join(tmp, f"r-{ckpt}.json")
        with open(report_path, "w") as f:
            json.dump(report, f)
        prepared[ckpt] = (report, report_path, weights)
    return prepared


def rounds(args, prepared, tmp):
    """Every round: every side, checkpointing off and on, in an order rotated
    from round to round. Yields {(ckpt, side): [figures per round]} after
    each round."""
    order = [(ckpt, side) for ckpt in ("off", "on") for side in sides(args)]
    results = {key: [] for key in order}
    for rnd in range(args.rounds):
        shift = rnd * len(order) // max(args.rounds, 1)
        for ckpt, side in order[shift:] + order[:shift]:
            fig = run_side(args, ckpt, side, prepared, tmp)
            results[(ckpt, side)].append(fig)
            print(f"round {rnd + 1}/{args.rounds} checkpointing {ckpt:3} {side:30} {fig['step_ms']:8.2f} ms/step "
                  f"(fwd+bwd {fig['fb_ms']:.2f}), {fig['minor_faults_per_step'] or 0:7.0f} faults/step, "
                  f"peak RSS {fig['peak_rss_mib']:.0f} MiB", file=sys.stderr)
        yield results


def spread(values, digits=3):
    """Median [min-max] of values."""
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def summarise(args, results):
    """One row per (checkpointing, side): medians over rounds, and this
    side's step time over train's, taken within each round; and train's
    checkpointing cost (on over off) within each round."""
    rows = []
    for (ckpt, side), figs in results.items():
        train = results[(ckpt, "train")]
        # This side's step time over train's, round by round (> 1: train is faster).
        ratios = [f["step_ms"] / t["step_ms"] for t, f in zip(train, figs)] if side != "train" else []
        ms = [f["step_ms"] for f in figs]
        faults = [f["minor_faults_per_step"] for f in figs if f.get("minor_faults_per_step") is not None]
        peak_alloc = [f["peak_allocated_mib"] for f in figs if f.get("peak_allocated_mib")]
        rows.append({
            "checkpointing": ckpt,
            "side": side,
            "rounds": len(figs),
            "step_ms_median": round(statistics.median(ms), 2),
            "step_ms_min": round(min(ms), 2),
            "step_ms_max": round(max(ms), 2),
            "fwd_bwd_ms_median": round(statistics.median(f["fb_ms"] for f in figs), 2),
            "samples_per_s": round(args.batch / statistics.median(ms) * 1000, 1),
            "over_train_median": round(statistics.median(ratios), 3) if ratios else "",
            "over_train_min": round(min(ratios), 3) if ratios else "",
            "over_train_max": round(max(ratios), 3) if ratios else "",
            "minor_faults_per_step": round(statistics.median(faults)) if faults else "",
            "peak_rss_mib": round(statistics.median(f["peak_rss_mib"] for f in figs), 1),
            "peak_allocated_mib": round(statistics.median(peak_alloc), 1) if peak_alloc else "",
            "loss_rel_diff": f"{max(f['loss_rel_diff'] for f in figs):.1e}",
            "step_ms_rounds": ";".join(f"{m:.2f}" for m in ms),
        })
    ckpt_cost = {side: [a["step_ms"] / b["step_ms"] for a, b in zip(results[("on", side)], results[("off", side)])]
                 for side in ("train", "PyTorch eager")}
    return rows, ckpt_cost


def verdicts(args, rows, ckpt_cost):
    """The issue's targets against the medians (CPU only)."""
    if args.device.startswith("cuda"):
        return []
    by = {(r["checkpointing"], r["side"]): r for r in rows}
    out = []
    for side, target in (("PyTorch eager", 1.3), ("PyTorch channels-last", 1.1)):
        r = by[("off", side)]
        v = r["over_train_median"]
        out.append(f"train against {side}, checkpointing off: {v}× (spread {r['over_train_min']}-{r['over_train_max']}); "
                   f"target at least {target}×: {'met' if v >= target else 'NOT met'}")
    cost = ckpt_cost["train"]
    c = statistics.median(cost)
    out.append(f"train's per-frame checkpointing: {c:.3f}× its step time without (spread {min(cost):.3f}-"
               f"{max(cost):.3f}); target at most 1.3×: {'met' if c <= 1.3 else 'NOT met'}")
    return out


def write(args, rows, ckpt_cost, own_layout, loads, compiled):
    date = stamp()
    cuda = args.device.startswith("cuda")
    device_name = torch.cuda.get_device_name(0) if cuda else f"CPU ({platform.processor() or platform.machine()})"
    machine = f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}"
    load = f"{args.sched} before the run, {loads[1]:.2f} after"
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"train_vs_pytorch{args.tag}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["date", "machine", "config", "device", "precision", "batch", "threads",
                                          "load_before", "load_after", *rows[0].keys()])
        w.writeheader()
        for r in rows:
            w.writerow({"date": date, "machine": machine, "config": args.config, "device": args.device,
                        "precision": args.precision_used, "batch": args.batch, "threads": args.threads,
                        "load_before": f"{loads[0]:.2f}", "load_after": f"{loads[1]:.2f}", **r})
    own = "NHWC (channels_last)" if own_layout else "NCHW"
    other = "NCHW" if own_layout else "NHWC (channels_last: on)"
    with open(os.path.join(args.out, f"train_vs_pytorch{args.tag}.md"), "w") as f:
        f.write(f"# train vs PyTorch, one training step on {args.device}, like for like\n\n"
                f"{date} · {machine} · `{args.config}` · batch {args.batch} · {args.threads} threads · "
                f"{rows[0]['rounds']} of {args.rounds} rounds of {args.steps} steps after {args.warmup} warm-up · {load}\n\n"
                f"Command: `{command_line()}`\n\n"
                f"Device: {device_name} · precision: {args.precision_used}\n\n"
                f"train runs its encoder in {own} here (`channels_last: auto`) and, as a second side, in {other}. "
                "PyTorch runs as users run it (eager, NCHW), with `model.to(memory_format=torch.channels_last)` "
                "and channels-last frames")
        if not cuda:
            f.write(", and each of those with train's malloc setting in its environment "
                    "(`MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824`)")
        f.write(". Each side is its own process on the same weights and batch. Ratios are taken within a "
                "round and the median round's is given with the spread over rounds [min-max]; "
                "\"× train\" is that side's step time over train's (> 1: train is faster). "
                "Faults: minor page faults per timed step, in that process. Peak RSS: the whole process's "
                "peak resident memory (wait4), runtime included.\n\n")
        f.write("| checkpointing | side | ms/step median [min-max] | fwd+bwd ms | samples/s | × train [min-max] | "
                "faults/step | peak RSS MiB | peak allocated MiB | initial loss rel. diff |\n"
                "|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            ratio = f"{r['over_train_median']} [{r['over_train_min']}-{r['over_train_max']}]" if r["over_train_median"] != "" else "1"
            f.write(f"| {r['checkpointing']} | {r['side']} | {r['step_ms_median']} [{r['step_ms_min']}-{r['step_ms_max']}] | "
                    f"{r['fwd_bwd_ms_median']} | {r['samples_per_s']} | {ratio} | {r['minor_faults_per_step']} | "
                    f"{r['peak_rss_mib']} | {r['peak_allocated_mib'] or 'n/a'} | {r['loss_rel_diff']} |\n")
        by = {(r["checkpointing"], r["side"]): r for r in rows}
        f.write("\nPer-frame checkpointing on against off, within each round: ")
        parts = []
        for side, name in (("train", "train"), ("PyTorch eager", "PyTorch eager (torch.utils.checkpoint)")):
            text = f"{name} {spread(ckpt_cost[side])}× the step time"
            off, on = by[("off", side)]["peak_allocated_mib"], by[("on", side)]["peak_allocated_mib"]
            if off and on:
                text += f", peak allocated {1 - on / off:.1%} less ({off} -> {on} MiB)"
            parts.append(text)
        f.write("; ".join(parts) + ".\n")
        for v in verdicts(args, rows, ckpt_cost):
            f.write(f"\n- {v}")
        f.write("\n")
        for ckpt, text in compiled.items():
            f.write(f"\nPyTorch with torch.compile (default mode), checkpointing {ckpt}: {text}.\n")
        if not cuda and loads[0] > 1.0:
            f.write(f"\nThe machine was not quiet (load average {loads[0]:.2f} before the run on {os.cpu_count()} cores): "
                    "the interleaved rounds keep the ratios fair, the absolute times are slower than on an idle machine.\n")


def compile_once(args, prepared, results):
    """PyTorch with torch.compile (default mode), once per checkpointing
    setting after the rounds (a cold compile takes minutes): {ckpt: text}.
    A failure (a missing compiler, an unsupported op) is a result to report,
    not a reason to lose the other figures."""
    out = {}
    for ckpt in ("off", "on"):
        _, report_path, weights = prepared[ckpt]
        try:
            fig = run_pytorch(args, "compile", report_path, weights)
            train_ms = statistics.median(f["step_ms"] for f in results[(ckpt, "train")])
            out[ckpt] = f"{fig['step_ms']:.2f} ms/step, {fig['step_ms'] / train_ms:.3f}× train's median (one run)"
        except (Exception, SystemExit) as e:
            out[ckpt] = f"failed: {type(e).__name__}: {first_line(e, 120)}"
        print(f"bench: torch.compile, checkpointing {ckpt}: {out[ckpt]}", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", help="path to the train binary (release build; required)")
    ap.add_argument("--config", help="the training config (required)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (at least 5 for a figure worth citing)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the GPU recipe)")
    ap.add_argument("--precision", choices=["off", "bf16", "fp16"], help="override the config's mixed_precision")
    ap.add_argument("--compile", action="store_true", help="also time PyTorch with torch.compile (default mode), once")
    ap.add_argument("--tag", default="", help="suffix for the result files")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--child", nargs=2, metavar=("REPORT", "WEIGHTS"), help=argparse.SUPPRESS)
    ap.add_argument("--variant", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if not (args.train and args.config):
        ap.error("--train and --config are required")
    load_before = os.getloadavg()[0]
    args.sched = load_note()
    with tempfile.TemporaryDirectory() as tmp:
        prepared = prepare(args, tmp)
        report = prepared["off"][0]
        args.batch = report["batch_size"]
        args.precision_used = report["config"]["mixed_precision"]
        own_layout = report.get("channels_last")
        # Written after every round: a run stopped by a time limit (a lent
        # GPU) keeps what it measured.
        for results in rounds(args, prepared, tmp):
            rows, ckpt_cost = summarise(args, results)
            write(args, rows, ckpt_cost, own_layout, (load_before, os.getloadavg()[0]), {})
        if args.compile:
            compiled = compile_once(args, prepared, results)
            write(args, rows, ckpt_cost, own_layout, (load_before, os.getloadavg()[0]), compiled)
    print(open(os.path.join(args.out, f"train_vs_pytorch{args.tag}.md")).read())


if __name__ == "__main__":
    main()
