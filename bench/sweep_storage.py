#!/usr/bin/env python3
"""Trials per hour of instant trials (scripts/postgres/instant.py: a Python
process that prints one metric line) with 1, 4 and 8 workers, whose truth
is: the journal file (`train sweep --out DIR` plus `--worker DIR`), a
PostgreSQL database (`train sweep --storage URL`, each worker its own
--out), and Optuna's own RDBStorage on the same database (W Python
processes, each `study.optimize` with an objective that runs the same
instant program as a subprocess). A throwaway PostgreSQL (scripts/postgres/
cluster.sh) on this machine; rounds alternate the three. Writes
bench/results/sweep_storage.{csv,md}.

    python bench/sweep_storage.py --train target/release/train [--trials 200] [--rounds 2]
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "postgres"))
from pgcluster import Cluster  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTANT = os.path.join(ROOT, "scripts", "postgres", "instant.py")
SPACE = """program: %s
method: random
metric: {name: val_loss, goal: minimize}
run_cap: %d
parameters:
  x: {distribution: uniform, min: -5, max: 5}
  y: {distribution: int_uniform, min: 0, max: 10}
"""
OPTUNA_WORKER = """
import subprocess, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
url, name, n, python, program = sys.argv[1:6]
s = optuna.load_study(study_name=name, storage=url)
def objective(t):
    x, y = t.suggest_float("x", -5, 5), t.suggest_int("y", 0, 10)
    out = subprocess.run([python, program, f"--x={x}", f"--y={y}"], stdout=subprocess.PIPE, text=True, check=True)
    return float(out.stdout.split('"val_loss": ')[1].rstrip("}\\n"))
s.optimize(objective, n_trials=int(n))
"""


def run_ours(args, workers, tmp, tag, storage):
    space = os.path.join(tmp, f"{tag}.yaml")
    with open(space, "w") as f:
        f.write(SPACE % (INSTANT, args.trials))
    env = dict(os.environ)
    base = [args.train, "sweep", "--parallel", "1"]
    db = ["--storage", storage, "--study", tag] if storage else []
    out = os.path.join(tmp, tag)
    t0 = time.monotonic()
    first = subprocess.Popen(base + ["--space", space, "--out", f"{out}-0", *db, "--interpreter", args.python],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Others join once the study exists (the journal, or the database's row).
    wait_for = os.path.join(f"{out}-0", "sweep.yaml")
    while not os.path.exists(wait_for) and first.poll() is None:
        time.sleep(0.02)
    rest = []
    for k in range(1, workers):
        where = ["--worker", f"{out}-0"] if not storage else ["--worker", "--out", f"{out}-{k}", *db]
        rest.append(subprocess.Popen(base + where, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    codes = [p.wait() for p in [first, *rest]]
    took = time.monotonic() - t0
    if any(codes):
        sys.exit(f"{tag}: a worker failed: {codes}")
    return took


def run_optuna(args, workers, storage, tag):
    url = Cluster.sqlalchemy(storage)
    subprocess.run([args.python, "-c", f"import optuna; optuna.create_study(study_name='{tag}', storage='{url}')"],
                   check=True, stderr=subprocess.DEVNULL)
    per = [args.trials // workers + (1 if k < args.trials % workers else 0) for k in range(workers)]
    t0 = time.monotonic()
    procs = [subprocess.Popen([args.python, "-c", OPTUNA_WORKER, url, tag, str(n), args.python, INSTANT])
             for n in per]
    codes = [p.wait() for p in procs]
    took = time.monotonic() - t0
    if any(codes):
        sys.exit(f"{tag}: an Optuna worker failed: {codes}")
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", default=os.path.join(ROOT, "target", "release", "train"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 4, 8])
    args = ap.parse_args()
    load = benchlib.load_note()
    tmp = tempfile.mkdtemp(prefix="trainguard-bench-pg.")
    os.chmod(tmp, 0o755)
    state = os.path.join(tmp, "pg")
    pg = Cluster(state)
    os.environ["PGPASSFILE"] = pg.passfile
    url = pg.url
    times = {}
    try:
        for r in range(args.rounds):
            for w in args.workers:
                for kind in ("journal", "postgres", "optuna-rdb"):
                    tag = f"r{r}w{w}{kind.replace('-', '')}"
                    if kind == "journal":
                        t = run_ours(args, w, tmp, tag, None)
                    elif kind == "postgres":
                        t = run_ours(args, w, tmp, tag, url)
                    else:
                        t = run_optuna(args, w, url, tag)
                    times.setdefault((w, kind), []).append(t)
                    print(f"round {r + 1}, {w} worker(s), {kind}: {t:.1f} s", file=sys.stderr)
    finally:
        pg.down()
    rows = []
    for w in args.workers:
        per_hour = {k: args.trials / statistics.median(times[(w, k)]) * 3600
                    for k in ("journal", "postgres", "optuna-rdb")}
        rows.append([w, round(per_hour["journal"]), round(per_hour["postgres"]), round(per_hour["optuna-rdb"]),
                     round(per_hour["postgres"] / per_hour["journal"], 2),
                     round(per_hour["postgres"] / per_hour["optuna-rdb"], 2)])
    head = ["workers", "journal trials/h", "postgres trials/h", "optuna-rdb trials/h",
            "postgres / journal", "postgres / optuna-rdb"]
    res = os.path.join(ROOT, "bench", "results")
    with open(os.path.join(res, "sweep_storage.csv"), "w", newline="") as f:
        csv.writer(f).writerows([head, *rows])
    md = [f"# Sweep storage: trials per hour, {args.trials} instant trials, median of {args.rounds} rounds", "",
          f"{benchlib.stamp()}; {load}; PostgreSQL {pg.bin.split('/')[-2]} on this machine.", "",
          f"`{benchlib.command_line()}`", "",
          "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    with open(os.path.join(res, "sweep_storage.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
