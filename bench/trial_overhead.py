#!/usr/bin/env python3
"""What one trial of a sweep costs beyond its training, side by side.

`train sweep` runs each trial as its own train process; this measures what
that pays per trial, against what a Python sweep pays, on
the smallest useful trial (bench/trial_tiny.yaml: one step, one validation
batch, a checkpoint), whose wall time is almost all overhead:

  train, process per trial     `train --config trial_tiny.yaml --out DIR`
  PyTorch, process per trial   `python bench/trial_reference.py` (same model)
  PyTorch, one process         the same trial N times in one Python process,
                               with seed 004's clean-up between trials (the
                               Optuna way: no start-up per trial, but a CUDA
                               error that poisons the context ends the sweep)

and the floors under the first two: `train info` (process start and
libtorch loading) and `python -c "import torch"`. The process-per-trial ways
alternate, so slow phases of a shared machine hit both. Reported: median and
90th percentile wall time, each child's peak resident memory (what parallel
trials each take from the host), and each median as a ratio to train's
trial. Results: bench/results/trial_overhead.{csv,md}.
"""

import argparse
import csv
import json
import math
import os
import platform
import statistics
import sys
import tempfile

from benchlib import cfgcheck_result, command_line, measured, shown, stamp

HERE = os.path.dirname(os.path.abspath(__file__))
# What every trial of the first two ways pays before any work: not trials.
FLOORS = ("train info (process start + libtorch)", "python -c 'import torch'")


def summary(samples):
    """Median and nearest-rank 90th percentile."""
    s = sorted(samples)
    return statistics.median(s), s[max(0, math.ceil(0.9 * len(s)) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="path to the train binary (release build)")
    ap.add_argument("--cfgcheck", required=True, help="path to the cfgcheck binary (resolves the config)")
    ap.add_argument("--config", default=os.path.join(HERE, "trial_tiny.yaml"))
    ap.add_argument("--trials", type=int, default=10, help="timed trials of each way")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--python", default=sys.executable, help="python with torch")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    if args.trials < 1:
        raise SystemExit("bench: --trials must be at least 1")

    with tempfile.TemporaryDirectory() as tmp:
        # The config with every default filled in (common's schema, as train
        # reads it), so the Python side builds the same model.
        cfg_json = os.path.join(tmp, "config.json")
        with open(cfg_json, "w") as f:
            json.dump(cfgcheck_result(args.cfgcheck, args.config)["resolved"], f)

        ways = {
            FLOORS[0]: lambda n: [args.train, "info"],
            FLOORS[1]: lambda n: [args.python, "-c", "import torch"],
            "train, process per trial": lambda n: [
                args.train, "--config", args.config, "--out", os.path.join(tmp, f"train-{n}"),
                "--threads", str(args.threads), "--device", args.device],
            "PyTorch, process per trial": lambda n: [
                args.python, os.path.join(HERE, "trial_reference.py"), "--config", cfg_json,
                "--out", os.path.join(tmp, f"torch-{n}"), "--threads", str(args.threads), "--device", args.device],
        }
        samples = {w: [] for w in ways}
        rss = {w: 0.0 for w in ways}
        # Round 0 warms the page cache and is not counted.
        for n in range(args.trials + 1):
            for way, cmd in ways.items():
                ms, peak, _ = measured(cmd(n))
                if n > 0:
                    samples[way].append(ms)
                    rss[way] = max(rss[way], peak)
            print(f"round {n}/{args.trials} done", file=sys.stderr)

        # The child reports its own per-trial times and peak.
        _, _, out = measured([
            args.python, os.path.join(HERE, "trial_reference.py"), "--config", cfg_json,
            "--out", os.path.join(tmp, "inproc"), "--threads", str(args.threads),
            "--device", args.device, "--in-process", str(args.trials)])
        got = json.loads(out)
        samples["PyTorch, one process (seed 004's clean-up)"] = got["trial_ms"]
        rss["PyTorch, one process (seed 004's clean-up)"] = got["max_rss_mib"]

    base = statistics.median(samples["train, process per trial"])
    rows = []
    for way, s in samples.items():
        median, p90 = summary(s)
        rows.append({"way": way, "runs": len(s), "median_ms": round(median, 2), "p90_ms": round(p90, 2),
                     "peak_rss_mib": round(rss[way], 1), "ratio_to_train_trial": round(median / base, 3)})
        print(f"{way:44} median {median:9.2f} ms   p90 {p90:9.2f} ms   peak RSS {rss[way]:7.1f} MiB", file=sys.stderr)
    write(args, rows)


def write(args, rows):
    date = stamp()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
    command = command_line()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "trial_overhead.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["date", "machine", "device", "threads", "config", *rows[0].keys()])
        w.writeheader()
        for r in rows:
            w.writerow({"date": date, "machine": machine, "device": args.device, "threads": args.threads,
                        "config": shown(args.config), **r})
    by = {r["way"]: r for r in rows}
    per_1000 = {w: r["median_ms"] * 1000 / 60000.0 for w, r in by.items() if w not in FLOORS}
    with open(os.path.join(args.out, "trial_overhead.md"), "w") as f:
        f.write(f"# Per-trial overhead: the smallest trial, three ways\n\n{date} · {machine} · {args.device}, "
                f"{args.threads} threads · `{shown(args.config)}`\n\nCommand: `{command}`\n\n")
        f.write("| way | runs | median ms | p90 ms | peak RSS MiB | median / train's trial |\n|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['way']} | {r['runs']} | {r['median_ms']} | {r['p90_ms']} | {r['peak_rss_mib']} | {r['ratio_to_train_trial']}× |\n")
        f.write("\nPer 1000 trials, at these medians: "
                + ", ".join(f"{w} {m:.1f} min" for w, m in per_1000.items())
                + ".\n")
    print(open(os.path.join(args.out, "trial_overhead.md")).read())


if __name__ == "__main__":
    main()
