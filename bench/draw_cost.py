#!/usr/bin/env python3
"""A single TPE draw on a large study, side by side (issue 44): `train
sweep`'s TPE (sweep/examples/draw_cost.rs), Optuna 5's `TPESampler` and
Rustuna 0.2's, multivariate, on the same generated study of N finished
trials (bench/gen_study.py: one journal a size, which all three read).

- ours: `draw_cost JOURNAL s ROUNDS`, the sampler alone, one sampler kept
  across the rounds as a driver keeps it (its first draw folds the study
  in; the next ones see what is new);
- Optuna: the journal loaded by Optuna, its trials copied into an
  in-memory study (`add_trials`), then `study.ask(fixed_distributions=...)`
  timed: the sampler, and a trial made in memory;
- Rustuna: `rustuna.load_study` of a copy of the journal, then
  `study.ask()` and a `suggest_*` for each parameter timed: the sampler,
  and its trial appended to its journal.

Each draw leaves a RUNNING trial behind, as a claim does. The first
draw and the median of the rest are reported apart. `--before OLD` adds
another build's draw_cost, its rounds alternating with ours.

  python bench/draw_cost.py --draw-cost target/release/examples/draw_cost --sizes 1000,10000,50000 [--before OLD/draw_cost]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import command_line, load_note, stamp, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 0


def ours(draw_cost, journal, rounds):
    out = subprocess.run([draw_cost, journal, "s", str(rounds)], stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(out.stdout)["tpe_ms"]


def builds(draw_cost, before, journal, rounds):
    """Ours (and the --before build's): 3 runs of `rounds` draws each, the
    builds alternating; the first run's first draw, then every later draw."""
    runs = [("train sweep", draw_cost)] + ([("train sweep, before", before)] if before else [])
    got = {who: [] for who, _ in runs}
    for _ in range(3):
        for who, binary in runs:
            ms = ours(binary, journal, rounds)
            got[who] += ms[1:] if got[who] else ms
    return list(got.items())


def timed(rounds, draw):
    ms = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        draw()
        ms.append((time.perf_counter() - t0) * 1000)
    return ms


def optuna_draws(journal, rounds):
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    loaded = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(journal)))
    trials = loaded.get_trials(deepcopy=False)
    study = optuna.create_study(direction=loaded.direction,
                                sampler=optuna.samplers.TPESampler(multivariate=True, seed=SEED))
    study.add_trials(trials)
    dists = dict(trials[0].distributions)
    return timed(rounds, lambda: study.ask(fixed_distributions=dists))


def rustuna_draws(journal, rounds, d):
    import rustuna

    copy = os.path.join(d, "rustuna.log")
    shutil.copyfile(journal, copy)
    study = rustuna.load_study(study_name="s", storage=rustuna.storages.JournalFileStorage(copy),
                               sampler=rustuna.samplers.TPESampler(multivariate=True, seed=SEED))

    def draw():
        t = study.ask()
        t.suggest_float("lr", 1e-5, 1e-1, log=True)
        t.suggest_int("batch_size", 1, 64)
        t.suggest_categorical("width", [64, 128, 256, 512, 1024])

    return timed(rounds, draw)


def summary(ms):
    rest = ms[1:] or ms
    return round(ms[0], 2), round(statistics.median(rest), 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draw-cost", required=True, help="sweep's draw_cost example, built with --release")
    ap.add_argument("--before", help="another build's draw_cost, side by side")
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    draw_cost = os.path.abspath(a.draw_cost)
    if a.before:
        a.before = os.path.abspath(a.before)
    note = load_note()
    rows = []
    for size in [int(s) for s in a.sizes.split(",")]:
        d = tempfile.mkdtemp(prefix=f"draw{size}.")
        journal = os.path.join(d, "s.log")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_study.py"), "--trials", str(size), "--interrupted",
                        "0", "--out", journal], check=True, stdout=subprocess.DEVNULL)
        for who, ms in [*builds(draw_cost, a.before, journal, a.rounds),
                        ("Optuna 5", optuna_draws(journal, a.rounds)),
                        ("Rustuna 0.2", rustuna_draws(journal, a.rounds, d))]:
            first, rest = summary(ms)
            rows.append({"study_trials": size, "sampler": who, "first_ms": first, "median_ms": rest})
            print(rows[-1], file=sys.stderr)
        shutil.rmtree(d)
    base = {r["study_trials"]: r for r in rows if r["sampler"] == "train sweep"}
    lines = [f"`{command_line()}` ({stamp()}, {note}); multivariate TPE, one draw at a time, "
             f"{a.rounds} draws a sampler: the first, and the median of the rest"
             + (" (ours and --before: 3 samplers each, alternating; the first one's first draw, and the "
                "median of every later draw)." if a.before else "."), "",
             "| study trials | sampler | first draw ms | later draws ms (median) | later draws against ours |",
             "|---|---|---|---|---|"]
    for r in rows:
        ratio = r["median_ms"] / max(base[r["study_trials"]]["median_ms"], 1e-9)
        lines.append(f"| {r['study_trials']:,} | {r['sampler']} | {r['first_ms']} | {r['median_ms']} | {ratio:.1f}x |")
    write_results(a.out, "draw_cost", rows, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
