#!/usr/bin/env python3
"""Step sweep-pack: program trials packed on one GPU by their measured peaks.

Beside a ballast that leaves --room MiB of the card (the same on a T4 and an
H200), three program sweeps of gpu_trial.py (it holds --mib of GPU memory
and computes for --seconds):
  one    4 trials at --parallel 1
  auto   8 trials at --parallel auto: the first alone, then as many at once
         as their measured NVML peaks fit (never past the cores)
  crowd  --parallel 2 over two points that fit alone but not together and one
         too big for the room: the crowded one is re-run alone and finishes;
         the too-big one runs out of memory alone too and is not taken for
         crowding (its failure stands)
Reported: the trials at once, each trial's NVML peak, trials per hour of
auto against one at a time. Each sweep's journal (Optuna's) is read here.

  sweep_pack.py --bin BIN --python PY --out DIR [--room 8192] [--dry-run]
"""

import argparse
import json
import os
import sys
import time

from gpulib import Ballast, Checks, common_args, journal, refuse_faults, run

HERE = os.path.dirname(os.path.abspath(__file__))
def sweep(a, name, values, parallel, mib_of, seconds):
    work = os.path.join(a.out, f"sweep-{name}")
    os.makedirs(work, exist_ok=True)
    device = "cpu" if a.dry_run else "cuda"
    with open(os.path.join(work, "space.yaml"), "w") as f:
        f.write(f"program: {os.path.join(HERE, 'gpu_trial.py')}\nmethod: grid\nmetric: {{name: val_loss}}\n"
                f"parameters:\n  mib: {{values: [{', '.join(str(mib_of(v)) for v in values)}]}}\n"
                f"  seconds: {{value: {seconds}}}\n  device: {{value: {device}}}\n")
    cmd = [os.path.join(a.bin, "train"), "sweep", "--space", os.path.join(work, "space.yaml"),
           "--out", os.path.join(work, "s"), "--parallel", str(parallel), "--interpreter", a.python]
    code, secs, out, err = run(cmd, timeout=240)
    with open(os.path.join(a.out, f"sweep-{name}.err"), "w") as f:
        f.write(err)
    trials = journal(os.path.join(work, "s", "journal.log")) if os.path.exists(os.path.join(work, "s", "journal.log")) else []
    placement = [l for l in err.splitlines() if "placement" in l]
    return {"exit": code, "seconds": round(secs, 2), "trials": trials, "placement": placement,
            "per_hour": round(len(trials) * 3600 / secs, 1) if secs > 0 else None}


def brief(t):
    return {"n": t["number"], "state": t["state"], "mib": t["params"].get("mib"), "at_once": t["attrs"].get("at_once"),
            "peak_gpu_mib": t["attrs"].get("peak_gpu_mib"), "class": t["attrs"].get("error_class"),
            "rerun": t["attrs"].get("rerun"), "retried_from": t["attrs"].get("retried_from")}


def main():
    ap = common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--room", type=int, default=8192, help="MiB of the card the ballast leaves")
    a = ap.parse_args()
    refuse_faults("sweep-pack")
    c = Checks("sweep-pack", a.out, a.dry_run)
    small = 64 if a.dry_run else 1024
    seconds = 1 if a.dry_run else 3
    with Ballast(a.python, a.room, a.dry_run) as ballast:
        c.figure("ballast", ballast.info)
        one = sweep(a, "one", range(4), 1, lambda v: small + v, seconds)
        c.figure("one", {**one, "trials": [brief(t) for t in one["trials"]]})
        auto = sweep(a, "auto", range(8), "auto", lambda v: small + v, seconds)
        c.figure("auto", {**auto, "trials": [brief(t) for t in auto["trials"]]})
        big = a.room + 4096
        fits = int(a.room * 0.6)
        crowd = sweep(a, "crowd", [fits, fits + 1, big], 2, lambda v: 32 + v % 8 if a.dry_run else v, seconds + 2)
        c.figure("crowd", {**crowd, "trials": [brief(t) for t in crowd["trials"]]})
    done = lambda s: [t for t in s["trials"] if t["state"] == "COMPLETE"]
    c.check("--parallel 1: every trial completed", len(done(one)) == 4, f"{[brief(t) for t in one['trials']]}")
    c.check("auto: every trial completed", len(done(auto)) == 8, f"{[brief(t) for t in auto['trials']]}")
    at_once = max((t["attrs"].get("at_once") or 0) for t in auto["trials"]) if auto["trials"] else 0
    peaks = [t["attrs"].get("peak_gpu_mib") for t in auto["trials"]]
    cores = os.cpu_count() or 1
    ratio = auto["per_hour"] / one["per_hour"] if one["per_hour"] else None
    c.figure("summary", {"auto_at_once": at_once, "auto_peaks_gpu_mib": peaks, "per_hour_one": one["per_hour"],
                         "per_hour_auto": auto["per_hour"], "auto_over_one": ratio})
    if not a.dry_run:
        c.check("auto packed more than one trial at once on the GPU", 1 < at_once <= cores,
                f"at most {at_once} at once ({cores} cores); placement: {auto['placement'][-2:]}")
        c.check("each auto trial has its NVML peak", all(p for p in peaks), f"{peaks}")
        by_mib = {}
        for t in crowd["trials"]:
            by_mib.setdefault(t["params"].get("mib"), []).append(t)
        fit_done = all(any(t["state"] == "COMPLETE" for t in by_mib.get(m, [])) for m in (fits, fits + 1))
        crowded = [t for t in crowd["trials"] if str(t["attrs"].get("rerun", "")).startswith("crowded")]
        c.check("two trials that fit alone but not together: crowded out, re-run alone, finished",
                fit_done and crowded, f"{[brief(t) for t in crowd['trials']]}")
        last_big = (by_mib.get(big) or [{}])[-1]
        c.check("the point too big ran out of memory alone and its failure stands",
                last_big.get("state") == "FAIL" and last_big.get("attrs", {}).get("error_class") == "out-of-memory",
                f"{[brief(t) for t in by_mib.get(big, [])]}")
    c.verdict(f"auto: up to {at_once} at once, {auto['per_hour']} trials/h against {one['per_hour']} at --parallel 1 "
              f"({ratio and round(ratio, 2)}x); NVML peaks {[p and round(p) for p in peaks]} MiB; crowd: "
              f"{[(t['params'].get('mib'), t['state'], t['attrs'].get('rerun')) for t in crowd['trials']]}")


if __name__ == "__main__":
    sys.exit(main())
