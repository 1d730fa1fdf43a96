#!/usr/bin/env python3
"""Step sweep-model: the sweep's memory model on a GPU's own peaks.

Beside a ballast that leaves --room MiB of the card, program sweeps over a
4 x 4 grid of model_trial.py (it holds batch_size x width MiB on the GPU:
widths 512 to 4096, batches 1 to 8, so 6 of the 16 points cannot fit in
6144 MiB), one trial at a time:
  model    the memory model on, no auto_fix: the points it refuses
           (`predicted-out-of-memory`), those that still ran out, its
           median error against NVML's peaks (`--report`); then each
           refused point run alone anyway, beside the ballast: a false
           refusal if it fits
  fix-off  `auto_fix: true`, `memory_model: false`: each point too big
           climbs the fixes one failed attempt at a time
  fix-on   `auto_fix: true` with the model: a point predicted not to fit
           starts with the fixes predicted to fit
Reported: refusals, out-of-memory trials, false refusals, attempts in all,
the model's error and terms.

  sweep_model.py --bin BIN --python PY --out DIR [--room 6144] [--arms model,fix-off,fix-on]
                 [--widths 512,1024,2048,4096] [--dry-run]
"""

import argparse
import json
import os
import sys

from gpulib import Ballast, Checks, common_args, journal, refuse_faults, run

HERE = os.path.dirname(os.path.abspath(__file__))
TRIAL = os.path.join(HERE, "model_trial.py")
BATCHES = [1, 2, 4, 8]


def space(widths, device, model, fix):
    return (f"program: {TRIAL}\nmethod: grid\nmetric: {{name: val_loss}}\nmemory_model: {str(model).lower()}\n"
            + ("auto_fix: true\n" if fix else "")
            + f"parameters:\n  width: {{values: {widths}}}\n  batch_size: {{values: {BATCHES}}}\n"
            f"  seconds: {{value: 1}}\n  device: {{value: {device}}}\n")


def sweep(a, name, widths, model, fix):
    work = os.path.join(a.out, f"model-{name}")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "space.yaml"), "w") as f:
        f.write(space(widths, "cpu" if a.dry_run else "cuda", model, fix))
    out = os.path.join(work, "s")
    cmd = [os.path.join(a.bin, "train"), "sweep", "--space", os.path.join(work, "space.yaml"), "--out", out,
           "--parallel", "1", "--max-consecutive-failures", "0", "--interpreter", a.python]
    code, secs, _, err = run(cmd, timeout=a.sweep_timeout)
    with open(os.path.join(a.out, f"model-{name}.err"), "w") as f:
        f.write(err)
    path = os.path.join(out, "journal.log")
    trials = journal(path) if os.path.exists(path) else []
    _, _, rep, _ = run([os.path.join(a.bin, "train"), "sweep", "--report", out, "--format", "json"], timeout=60)
    try:
        model_error = json.loads(rep).get("memory_model")
    except ValueError:
        model_error = None
    return {"exit": code, "seconds": round(secs, 1), "trials": trials, "model": model_error}


def brief(t):
    a = t["attrs"]
    return {"n": t["number"], "state": t["state"], "width": t["params"].get("width"),
            "batch": t["params"].get("batch_size"), "class": a.get("error_class"), "attempts": a.get("attempts", 1),
            "fixed_before_start": a.get("fixed_before_start"), "peak_gpu_mib": a.get("peak_gpu_mib"),
            "predicted_peak_mib": a.get("predicted_peak_mib"), "effective": a.get("effective_params")}


def counts(s):
    ts = s["trials"]
    return {"trials": len(ts), "complete": sum(t["state"] == "COMPLETE" for t in ts),
            "ran_out": sum(t["attrs"].get("error_class") == "out-of-memory" for t in ts),
            "refused": sum(t["attrs"].get("error_class") == "predicted-out-of-memory" for t in ts),
            "attempts": sum(int(t["attrs"].get("attempts", 1)) for t in ts),
            "fixed_before_start": sum(1 for t in ts if t["attrs"].get("fixed_before_start")),
            "seconds": s["seconds"], "exit": s["exit"], "model": s["model"]}


def fits_alone(a, t):
    """Whether a refused point, run anyway beside the ballast, fits."""
    device = "cpu" if a.dry_run else "cuda"
    code, _, _, err = run([a.python, TRIAL, f"--batch_size={t['params']['batch_size']}",
                           f"--width={t['params']['width']}", "--seconds=1", f"--device={device}"], timeout=60)
    return code == 0, (err.strip().splitlines() or [""])[-1][:200]


def main():
    ap = common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--room", type=int, default=6144, help="MiB of the card the ballast leaves")
    ap.add_argument("--arms", default="model,fix-off,fix-on", help="which sweeps to run")
    ap.add_argument("--widths", default="512,1024,2048,4096", help="the grid's widths (MiB a batch item holds)")
    ap.add_argument("--sweep-timeout", type=int, default=150, help="seconds each sweep may take")
    a = ap.parse_args()
    refuse_faults("sweep-model")
    c = Checks("sweep-model", a.out, a.dry_run)
    arms = a.arms.split(",")
    widths = [1, 2, 4, 8] if a.dry_run else [int(w) for w in a.widths.split(",")]
    empty = {"exit": 0, "seconds": 0, "trials": [], "model": None}
    model, off, on, reruns = empty, empty, empty, []
    with Ballast(a.python, a.room, a.dry_run) as ballast:
        c.figure("ballast", ballast.info)
        if "model" in arms:
            model = sweep(a, "model", widths, True, False)
            c.figure("model", {**counts(model), "trials": [brief(t) for t in model["trials"]]})
            refused = [t for t in model["trials"] if t["attrs"].get("error_class") == "predicted-out-of-memory"]
            reruns = [(brief(t), *fits_alone(a, t)) for t in refused]
            c.figure("refused_run_anyway", reruns)
        if "fix-off" in arms:
            off = sweep(a, "fix-off", widths, False, True)
            c.figure("fix-off", {**counts(off), "trials": [brief(t) for t in off["trials"]]})
        if "fix-on" in arms:
            on = sweep(a, "fix-on", widths, True, True)
            c.figure("fix-on", {**counts(on), "trials": [brief(t) for t in on["trials"]]})
    m, f0, f1 = counts(model), counts(off), counts(on)
    points = len(widths) * len(BATCHES)
    # The points that do not fit as sampled: those auto-fix had to fix.
    unfit = sum(1 for t in off["trials"] if int(t["attrs"].get("attempts", 1)) > 1)
    false = sum(1 for _, fit, _ in reruns if fit)
    error = (m["model"] or {}).get("median_error")
    summary = {"unfit_points": unfit, "model_refused": m["refused"], "model_ran_out": m["ran_out"],
               "false_refusals": false, "attempts_fix_off": f0["attempts"], "attempts_fix_on": f1["attempts"],
               "fixed_before_start": f1["fixed_before_start"], "median_error": error,
               "effects": (m["model"] or {}).get("effects")}
    c.figure("summary", summary)
    c.check("every sweep ran to its end", all(s["exit"] == 0 for s in (model, off, on)),
            f"exits {[s['exit'] for s in (model, off, on)]}")
    c.check("with auto_fix every point completed, with the model and without",
            all(f["complete"] == f["trials"] == points for f, arm in ((f0, "fix-off"), (f1, "fix-on")) if arm in arms),
            f"fix-off {f0['complete']}/{f0['trials']}, fix-on {f1['complete']}/{f1['trials']}")
    if not a.dry_run and "model" in arms:
        c.check("the model refused points, and fewer ran out of memory than did not fit",
                m["refused"] >= 1 and m["ran_out"] < unfit,
                f"{m['refused']} refused, {m['ran_out']} ran out of memory, {unfit} points do not fit")
        c.check("no refused point fits when run anyway", false == 0, f"{reruns}")
        c.check("the model's median error on NVML's peaks is at most 15%", error is not None and error <= 0.15,
                f"{error}")
    if not a.dry_run and "fix-off" in arms and "fix-on" in arms:
        c.check("auto_fix with the model ran fewer attempts", f1["attempts"] < f0["attempts"],
                f"{f1['attempts']} with the model, {f0['attempts']} without")
    c.verdict(f"{unfit} of {points} points do not fit in {a.room} MiB; the model refused {m['refused']} "
              f"({false} would have fit), {m['ran_out']} ran out of memory; median error "
              f"{error if error is None else round(error * 100, 1)}% on NVML's peaks; auto_fix attempts "
              f"{f0['attempts']} without the model, {f1['attempts']} with ({f1['fixed_before_start']} started fixed)")


if __name__ == "__main__":
    sys.exit(main())
