#!/usr/bin/env python3
"""`train sweep --report` and `--status` of a large study against Optuna's
own `load_study().trials`, side by side on the same files (issue 44's
baseline): a study of --trials finished trials written by
bench/gen_study.py twice, as `train sweep` writes its records and through
Optuna itself, each read --rounds times by each reader; the medians of the
wall time and of the reader's own peak RSS (wait4).

  report_scale.py [--train target/release/train] [--trials 28000] [--rounds 3] [--plot-trials 50000]

Then the whole `--report` of a sweep directory (the table, best_config.yaml
and objective.png, drawn as shaded cells from 2,000 trials on) holding a
generated study of --plot-trials trials (0: left out). Optuna's own plot is
not timed beside it: its history plot needs matplotlib or plotly, and most
of its time would be load_study's, measured above.

Results: bench/results/report_scale.{csv,md}.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from benchlib import command_line, generated_sweep, load_note, measured, stamp, write_results

HERE = os.path.dirname(os.path.abspath(__file__))

LOAD = """import optuna, sys
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.load_study(study_name="s", storage=optuna.storages.JournalStorage(
    optuna.storages.journal.JournalFileBackend(sys.argv[1])))
print(len(s.trials))
"""


PLOTTED = "train sweep --report DIR (with objective.png)"

SPACE = """program: trial.py
method: random
metric: {name: val_loss, goal: minimize}
parameters:
  lr: {distribution: log_uniform_values, min: 1.0e-5, max: 0.1}
  batch_size: {distribution: int_uniform, min: 1, max: 64}
  width: {values: [64, 128, 256, 512, 1024]}
"""


def plotted(a, train, d):
    """The whole --report of a sweep directory on a generated study."""
    s = os.path.join(d, "plot")
    os.makedirs(s)
    journal = generated_sweep(train, a.python, s, SPACE, 'print(\'{"val_loss": 1.0}\')\n', a.plot_trials,
                              interrupted=0.02)
    runs = [measured([train, "sweep", "--report", os.path.join(s, "s"), "--format", "json"])
            for _ in range(a.rounds)]
    if not os.path.exists(os.path.join(s, "s", "objective.png")):
        sys.exit("report_scale: --report drew no objective.png")
    return {
        "written_by": "train sweep",
        "journal_mib": round(os.path.getsize(journal) / 2**20, 1),
        "reader": PLOTTED,
        "seconds": round(statistics.median(r[0] for r in runs) / 1000, 2),
        "peak_rss_mib": round(statistics.median(r[1] for r in runs)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="target/release/train")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--trials", type=int, default=28000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--plot-trials", type=int, default=50000)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    train = os.path.abspath(a.train)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for written_by, flags in [("train sweep", []), ("Optuna", ["--optuna"])]:
            path = os.path.join(d, f"{len(rows)}.log")
            subprocess.run([a.python, os.path.join(HERE, "gen_study.py"), "--trials", str(a.trials), "--out", path]
                           + flags, check=True)
            readers = [
                ("train sweep --report (json)", [train, "sweep", "--report", path, "--format", "json"]),
                ("train sweep --status", [train, "sweep", "--status", path]),
                ("Optuna load_study().trials", [a.python, "-c", LOAD, path]),
            ]
            for reader, cmd in readers:
                runs = [measured(cmd) for _ in range(a.rounds)]
                rows.append({
                    "written_by": written_by,
                    "journal_mib": round(os.path.getsize(path) / 2**20, 1),
                    "reader": reader,
                    "seconds": round(statistics.median(r[0] for r in runs) / 1000, 2),
                    "peak_rss_mib": round(statistics.median(r[1] for r in runs)),
                })
                print(rows[-1], flush=True)
        if a.plot_trials:
            rows.append(plotted(a, train, d))
            print(rows[-1], flush=True)
    lines = [
        f"# `--report` and `--status` of a {a.trials}-trial study against Optuna's reader",
        "",
        f"{stamp()}; `{command_line()}`; {load_note()}; medians of {a.rounds} rounds.",
        "",
        "| written by | journal MiB | reader | seconds | peak RSS MiB |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(str(r[k]) for k in r) + " |" for r in rows]
    lines.append("")
    for written_by in ("train sweep", "Optuna"):
        mine = [r for r in rows if r["written_by"] == written_by and r["reader"] != PLOTTED]
        optuna = next(r for r in mine if r["reader"].startswith("Optuna"))
        for r in mine:
            if r is not optuna:
                lines.append(f"- Written by {written_by}: {r['reader']} {optuna['seconds'] / r['seconds']:.1f}x "
                             f"faster than Optuna's reader, {r['peak_rss_mib'] / optuna['peak_rss_mib']:.2f}x its memory.")
    for r in rows:
        if r["reader"] == PLOTTED:
            lines.append(f"- The last row: the whole `--report` of a sweep directory of {a.plot_trials} generated "
                         f"trials, objective.png included (shaded cells from 2,000 trials on): {r['seconds']} s.")
    write_results(a.out, "report_scale", rows, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
