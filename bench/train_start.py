#!/usr/bin/env python3
"""What `train` pays before it does anything, side by side: a `train` that
links libtorch (the source build before issue 32, `--before`) against the
`train` that does not and hands the seeds' model to `train-model` (`--train`).

  train --version                      clap's answer: process start alone
  train run --out DIR -- true          a guarded command that does nothing
  train sweep --status DIR             a sweep's status (a finished program
                                       sweep of one trial, made first)
  train --config trial_tiny.yaml       a trial of the seeds' model
                                       (bench/trial_tiny.yaml, one step): it
                                       loads libtorch either way, and after
                                       the split pays one exec more

Each command runs --rounds times per binary, the two binaries alternating
within a round so slow phases of a shared machine hit both. Reported: the
median and the slowest wall time, and the median as a ratio to `--before`'s.
Results: bench/results/train_start.{csv,md}.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile

from benchlib import command_line, load_note, measured, shown, stamp

SPACE = """program: trial.py
method: grid
metric: {name: val_loss, goal: minimize}
parameters:
  lr: {value: 0.1}
"""
TRIAL = "print('epoch 1: val_loss 0.5')\n"
TINY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trial_tiny.yaml")


def commands(train, tmp, status_dir, round_no, tag):
    """The timed commands of one round for one binary: (name, argv)."""
    out = os.path.join(tmp, f"run-{tag}-{round_no}")
    return [
        ("train --version", [train, "--version"]),
        ("train run -- true", [train, "run", "--out", out, "--", "true"]),
        ("train sweep --status DIR", [train, "sweep", "--status", status_dir]),
        ("train --config trial_tiny.yaml", [train, "--config", TINY, "--out", out + "-tiny", "--device", "cpu"]),
    ]


def finished_sweep(train, tmp):
    """A program sweep of one trial that exits at once, to ask the status of."""
    with open(os.path.join(tmp, "space.yaml"), "w") as f:
        f.write(SPACE)
    with open(os.path.join(tmp, "trial.py"), "w") as f:
        f.write(TRIAL)
    sweep = os.path.join(tmp, "sweep")
    subprocess.run(
        [train, "sweep", "--space", "space.yaml", "--out", sweep, "--interpreter", sys.executable],
        cwd=tmp, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    return sweep


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="the train to measure (release build, train-model beside it)")
    ap.add_argument("--before", required=True, help="the train to compare with (one that links libtorch)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = ap.parse_args()
    args.train, args.before = os.path.abspath(args.train), os.path.abspath(args.before)
    if args.rounds < 5:
        raise SystemExit("bench: --rounds must be at least 5 (a median of fewer says little)")
    note = load_note()
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        status_dir = finished_sweep(args.train, tmp)
        binaries = [("before", args.before), ("after", args.train)]
        for r in range(args.rounds):
            for tag, train in binaries if r % 2 == 0 else reversed(binaries):
                for name, argv in commands(train, tmp, status_dir, r, tag):
                    ms, _, _ = measured(argv)
                    times.setdefault((name, tag), []).append(ms)
    rows = []
    for name in dict.fromkeys(n for n, _ in times):
        before = statistics.median(times[(name, "before")])
        for tag, train in (("before", args.before), ("after", args.train)):
            t = times[(name, tag)]
            rows.append({
                "command": name,
                "binary": shown(train),
                "median_ms": round(statistics.median(t), 2),
                "max_ms": round(max(t), 2),
                "ratio_to_before": round(statistics.median(t) / before, 4),
            })
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "train_start.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [
        f"`{command_line()}`, {stamp()}, {args.rounds} rounds, {note}",
        "",
        "| command | binary | median ms | max ms | median / before's |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| `{row['command']}` | `{row['binary']}` | {row['median_ms']} | {row['max_ms']} | {row['ratio_to_before']}× |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "train_start.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
