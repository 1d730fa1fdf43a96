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
import os
import statistics
import sys

from benchlib import command_line, load_note, program_sweep, stamp, write_results

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

def sweep(train, python, seed, trials, on):
    """One sweep: (its trials as Optuna loads them, its wall seconds)."""
    flags = ["--trials", str(trials), "--seed", str(seed), "--memory-budget", "700"]
    return program_sweep(train, python, PROGRAM, SPACE.format(on="true" if on else "false"), flags)


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
    write_results(args.out, "packing", rows, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
