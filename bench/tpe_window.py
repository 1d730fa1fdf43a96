#!/usr/bin/env python3
"""TPE at scale (issue 44): our TPE with its worse side capped at the
latest ABOVE_WINDOW trials (the default, sweep/src/sampler/tpe.rs) against
the same TPE weighing every trial (as Optuna does), on bench/tpe_vs_optuna.py's
objectives and seeds, up to --trials trials each: the best value after
1,000, 2,000 and 5,000 trials, and the wall time of the run. Draws one at a
time (multivariate, constant liar), through sweep/examples/tpe_objective
with TPE_ABOVE_WINDOW set.

    python bench/tpe_window.py [--seeds 3] [--trials 5000]

Writes bench/results/tpe_window.{csv,md}.
"""

import argparse
import os
import statistics
import time

import benchlib
from tpe_vs_optuna import OBJECTIVES, ROOT, run_ours

CHECKPOINTS = (1000, 2000, 5000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--trials", type=int, default=max(CHECKPOINTS))
    ap.add_argument("--window", type=int, default=1000, help="the cap (the sampler's ABOVE_WINDOW)")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "examples", "tpe_objective"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    checkpoints = [c for c in CHECKPOINTS if c <= a.trials]
    rows = []
    for name, (f, space) in OBJECTIVES.items():
        for seed in range(a.seeds):
            for window in (a.window, 0):
                os.environ["TPE_ABOVE_WINDOW"] = str(window)
                t0 = time.monotonic()
                values = run_ours(a.binary, "bayes", seed, f, space, a.trials)
                took = time.monotonic() - t0
                row = {"objective": name, "seed": seed, "above": f"latest {window}" if window else "all",
                       "seconds": round(took, 1)}
                row.update({f"best_{c}": min(values[:c]) for c in checkpoints})
                rows.append(row)
                print(row, flush=True)
    lines = ["# TPE at scale: the worse side capped, against every trial weighed\n",
             f"{benchlib.stamp()}; `{benchlib.command_line()}`; {benchlib.load_note()}; "
             f"{a.seeds} seeds, medians over them.\n",
             "| objective | worse side | " + " | ".join(f"best after {c}" for c in checkpoints) + " | run seconds |",
             "|---|---|" + "---|" * len(checkpoints) + "---|"]
    for name in OBJECTIVES:
        for above in (f"latest {a.window}", "all"):
            mine = [r for r in rows if r["objective"] == name and r["above"] == above]
            best = [f"{statistics.median(r[f'best_{c}'] for r in mine):.6g}" for c in checkpoints]
            secs = statistics.median(r["seconds"] for r in mine)
            lines.append(f"| {name} | {above} | " + " | ".join(best) + f" | {secs:.0f} |")
    benchlib.write_results(a.out, "tpe_window", rows, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
