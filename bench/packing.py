#!/usr/bin/env python3
"""Packing program trials by each point's predicted peak against packing
by the largest peak measured, side by side: the same `--parallel auto`
random sweep with `memory_model: true` (packed by prediction) and
`memory_model: false` (every start by the largest peak), alternating, for
each of --seeds seeds.

The trials are real processes that hold 100 or 400 MiB (4x apart) and
sleep, under `--memory-budget 700`: memory binds, not the cores. By the
largest peak (400 MiB with placement's 1.15 headroom) one runs at a time;
by prediction two small ones, or a small and a big one, share, and two big
ones never do. Reported: wall time and trials per hour of each, their
ratio, and the trials that ran out of memory. Results:
bench/results/packing.{csv,md}.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import command_line, load_note, stamp

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAM = """import sys, time
mib = int(sys.argv[1].split('=')[1])
b = bytearray(b'\\x01') * (mib << 20)
time.sleep(2.0)
print('valid loss', 1.0 / mib, flush=True)
"""

SPACE = """program: hold.py
method: random
memory_model: {on}
metric: {{name: loss, regex: 'valid loss\\s+([0-9.e-]+)'}}
parameters:
  mib: {{values: [100, 400]}}
"""

LOAD = """import json, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(sys.argv[1]))
s = optuna.load_study(study_name=sys.argv[2], storage=storage)
print(json.dumps([{"state": t.state.name, "class": t.user_attrs.get("error_class")} for t in s.trials]))
"""


def sweep(train, python, seed, trials, on):
    """One sweep: (its trials' states and classes, its wall seconds)."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "hold.py"), "w") as f:
            f.write(PROGRAM)
        with open(os.path.join(d, "space.yaml"), "w") as f:
            f.write(SPACE.format(on="true" if on else "false"))
        cmd = [train, "sweep", "--space", "space.yaml", "--out", "s", "--trials", str(trials),
               "--seed", str(seed), "--interpreter", python, "--memory-budget", "700"]
        t0 = time.monotonic()
        run = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if run.returncode != 0:
            sys.exit(f"train sweep failed ({run.returncode}):\n{run.stderr[-3000:]}")
        out = subprocess.run([python, "-c", LOAD, os.path.join(d, "s", "journal.log"), "s"],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout), wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="target/release/train")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    train = os.path.abspath(args.train)
    note = load_note()
    rows = []
    for seed in range(1, args.seeds + 1):
        for on in (False, True):
            trials, wall = sweep(train, args.python, seed, args.trials, on)
            row = {
                "seed": seed,
                "packed_by": "prediction" if on else "largest peak",
                "trials": len(trials),
                "complete": sum(t["state"] == "COMPLETE" for t in trials),
                "ran_out_of_memory": sum(t["class"] == "out-of-memory" for t in trials),
                "wall_s": round(wall, 1),
                "trials_per_hour": round(len(trials) * 3600 / wall),
            }
            print(row, flush=True)
            rows.append(row)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "packing.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

    def arm(by):
        return [r for r in rows if r["packed_by"] == by]

    rate = {by: statistics.median(r["trials_per_hour"] for r in arm(by))
            for by in ("largest peak", "prediction")}
    ratios = [p["trials_per_hour"] / l["trials_per_hour"]
              for l, p in zip(arm("largest peak"), arm("prediction"))]
    ooms = {by: sum(r["ran_out_of_memory"] for r in arm(by)) for by in rate}
    lines = [
        "# Packing by predicted peak against packing by the largest peak",
        "",
        f"{stamp()}; `{command_line()}`; {note}.",
        "",
        "| seed | packed by | trials | complete | ran out of memory | wall s | trials/h |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append("| " + " | ".join(str(r[k]) for k in r) + " |")
    lines += [
        "",
        f"- Trials per hour (median over seeds): {rate['largest peak']:.0f} by the largest peak, "
        f"{rate['prediction']:.0f} by prediction: {rate['prediction'] / rate['largest peak']:.2f}x "
        f"(per seed {min(ratios):.2f}x to {max(ratios):.2f}x).",
        f"- Trials that ran out of memory: {ooms['largest peak']} by the largest peak, {ooms['prediction']} by prediction.",
    ]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "packing.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
