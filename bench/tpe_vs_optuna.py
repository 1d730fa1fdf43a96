"""Our TPE (sweep's sampler, through sweep/examples/tpe_objective) against
Optuna's TPESampler and RandomSampler on the same objectives and seeds: the
best value after 30 and 60 trials, minimising. Not a timing: the claim is
"no worse than Optuna's TPE on the median".

Each of our TPE variants against the Optuna sampler it implements:
`bayes` (multivariate, constant liar) against Optuna 5's default
TPESampler(); `bayes: {variant: univariate}` against Optuna 4.x's default,
TPESampler(multivariate=False, constant_liar=False) in Optuna 5. The default
pair also runs 4 trials at a time (each side draws 4, all running, then
learns their values: what the constant liar is for), Optuna's through
study.ask().

TPE's random start-up trials follow the trials (`startup`, the rule `train
sweep` applies: a quarter of them, at most Optuna's default of 10), on both
sides; under 40 trials Optuna's TPE with its default of 10 runs too.

    python bench/tpe_vs_optuna.py [--seeds 20] [--trials 60]

Writes bench/results/tpe_vs_optuna.{csv,md} (tpe_vs_optuna_N.{csv,md} for
--trials N other than 60)."""

import argparse
import csv
import json
import math
import os
import random
import statistics
import subprocess
import sys

import benchlib

try:
    import optuna
except ImportError:
    sys.exit("optuna is missing: run just setup")

# Optuna 4.x's default TPESampler in Optuna 5's terms (5.0 made multivariate
# and constant_liar default to True; the rest kept 4.x's defaults).
OPTUNA_UNIVARIATE = dict(multivariate=False, constant_liar=False)
BATCH = 4

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CHECKPOINTS = (30, 60)


def startup(n):
    """TPE's random start-up trials in a sweep of n: a quarter, rounded up,
    at least 1, at most Optuna's default of 10 (sweep/src/sampler/tpe.rs,
    `startup_for`)."""
    return min(max(-(-n // 4), 1), 10)


def quad_mixed(p):
    """A shifted quadratic over a float pair, a log-scale learning rate, an
    integer and a categorical (minimum 0 at x=1.3, y=-0.7, lr=10^-3.2,
    layers=5, adam)."""
    return ((p["x"] - 1.3) ** 2 + (p["y"] + 0.7) ** 2 + (math.log10(p["lr"]) + 3.2) ** 2
            + 0.3 * (p["layers"] - 5) ** 2 + {"adam": 0.0, "rmsprop": 0.5, "sgd": 1.0}[p["opt"]])


def branin(p):
    """Branin-Hoo (minimum 0.397887)."""
    x1, x2 = p["x1"], p["x2"]
    b, c = 5.1 / (4 * math.pi ** 2), 5 / math.pi
    return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


HARTMANN3_A = [[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]]
HARTMANN3_P = [[0.3689, 0.1170, 0.2673], [0.4699, 0.4387, 0.7470],
               [0.1091, 0.8732, 0.5547], [0.0381, 0.5743, 0.8828]]


def hartmann3(p):
    """Hartmann 3-D (minimum -3.86278), x3 on a 0.01 step grid."""
    x = [p["x1"], p["x2"], p["x3"]]
    return -sum(a * math.exp(-sum(HARTMANN3_A[i][j] * (x[j] - HARTMANN3_P[i][j]) ** 2 for j in range(3)))
                for i, a in enumerate([1.0, 1.2, 3.0, 3.2]))


OBJECTIVES = {
    "quad_mixed": (quad_mixed, [
        {"name": "x", "type": "float", "low": -5, "high": 5},
        {"name": "y", "type": "float", "low": -5, "high": 5},
        {"name": "lr", "type": "float", "low": 1e-5, "high": 1e-1, "log": True},
        {"name": "layers", "type": "int", "low": 1, "high": 8},
        {"name": "opt", "type": "categorical", "choices": ["adam", "sgd", "rmsprop"]},
    ]),
    "branin": (branin, [
        {"name": "x1", "type": "float", "low": -5, "high": 10},
        {"name": "x2", "type": "float", "low": 0, "high": 15},
    ]),
    "hartmann3": (hartmann3, [
        {"name": "x1", "type": "float", "low": 0, "high": 1},
        {"name": "x2", "type": "float", "low": 0, "high": 1},
        {"name": "x3", "type": "float", "low": 0, "high": 1, "step": 0.01},
    ]),
}


def suggest(trial, p):
    if p["type"] == "float":
        return trial.suggest_float(p["name"], p["low"], p["high"], log=p.get("log", False), step=p.get("step"))
    if p["type"] == "int":
        return trial.suggest_int(p["name"], p["low"], p["high"], log=p.get("log", False))
    return trial.suggest_categorical(p["name"], p["choices"])


def run_optuna(sampler, f, space, n, batch=1):
    """Optuna's study: `batch` trials asked (and their parameters drawn, each
    seeing the ones before it running), then told, until n."""
    study = optuna.create_study(sampler=sampler)
    values = []
    while len(values) < n:
        asked = []
        for _ in range(min(batch, n - len(values))):
            t = study.ask()
            asked.append((t, {p["name"]: suggest(t, p) for p in space}))
        for t, params in asked:
            values.append(f(params))
            study.tell(t, values[-1])
    return values


def run_ours(binary, method, seed, f, space, n, batch=1):
    """Drive the example: read a batch of parameters, answer with the values."""
    child = subprocess.Popen([binary, method, str(seed), str(n), json.dumps(space), str(batch)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    values = []
    while len(values) < n:
        drawn = [json.loads(child.stdout.readline()) for _ in range(min(batch, n - len(values)))]
        for params in drawn:
            values.append(f(params))
            child.stdin.write(f"{values[-1]!r}\n")
        child.stdin.flush()
    child.stdin.close()
    if child.wait() != 0:
        raise SystemExit(f"bench: {binary} exited {child.returncode}")
    return values


def best_after(values, k):
    return min(values[:k])


def median_diff_interval(ours, theirs, resamples=4000):
    """A 95% bootstrap interval of median(ours) - median(theirs), the seeds of
    each side resampled on their own (the two draw different random numbers,
    so seed s of one is no pair of seed s of the other)."""
    rng = random.Random(0)
    diffs = sorted(statistics.median(rng.choices(ours, k=len(ours)))
                   - statistics.median(rng.choices(theirs, k=len(theirs))) for _ in range(resamples))
    return diffs[int(0.025 * resamples)], diffs[int(0.975 * resamples) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--trials", type=int, default=max(CHECKPOINTS))
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "sweep", "--example", "tpe_objective"],
                   cwd=ROOT, check=True)
    binary = os.path.join(target, "release", "examples", "tpe_objective")

    n = args.trials
    checkpoints = sorted({k for k in CHECKPOINTS if k < n} | {n})
    # Both sides start TPE after the same random trials (ours by the rule
    # `train sweep` applies to its cap, which tpe_objective's n is).
    tpe = lambda **kw: optuna.samplers.TPESampler(n_startup_trials=startup(n), **kw)
    samplers = {
        "trainguard TPE": lambda s, f, sp: run_ours(binary, "tpe", s, f, sp, n),
        "Optuna TPE": lambda s, f, sp: run_optuna(tpe(seed=s), f, sp, n),
        f"trainguard TPE, {BATCH} at a time": lambda s, f, sp: run_ours(binary, "tpe", s, f, sp, n, BATCH),
        f"Optuna TPE, {BATCH} at a time": lambda s, f, sp: run_optuna(tpe(seed=s), f, sp, n, BATCH),
        "trainguard TPE univariate": lambda s, f, sp: run_ours(binary, "tpe-univariate", s, f, sp, n),
        "Optuna TPE univariate": lambda s, f, sp: run_optuna(tpe(seed=s, **OPTUNA_UNIVARIATE), f, sp, n),
        "trainguard random": lambda s, f, sp: run_ours(binary, "random", s, f, sp, n),
        "Optuna random": lambda s, f, sp: run_optuna(optuna.samplers.RandomSampler(seed=s), f, sp, n),
    }
    if startup(n) < 10:
        # What the rule changes: Optuna's default start-up, 10 random trials.
        samplers["Optuna TPE, 10 start-up trials (its default)"] = lambda s, f, sp: run_optuna(
            optuna.samplers.TPESampler(seed=s), f, sp, n)
    # Each of ours against the Optuna sampler it implements.
    pairs = [(ours, ours.replace("trainguard", "Optuna")) for ours in samplers
             if ours.startswith("trainguard TPE")]
    rows = []
    for name, (f, space) in OBJECTIVES.items():
        for sampler, run in samplers.items():
            for seed in range(args.seeds):
                values = run(seed, f, space)
                rows.append({"objective": name, "sampler": sampler, "seed": seed,
                             **{f"best_{k}": best_after(values, k) for k in checkpoints}})
            print(f"{name:12} {sampler:32} done", file=sys.stderr)

    out = os.path.join(HERE, "results")
    os.makedirs(out, exist_ok=True)
    stem = "tpe_vs_optuna" if n == max(CHECKPOINTS) else f"tpe_vs_optuna_{n}"
    with open(os.path.join(out, f"{stem}.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

    lines = [
        "# trainguard's TPE against Optuna's",
        "",
        f"{benchlib.stamp()}, optuna {optuna.__version__}, {benchlib.load_note()}, `{benchlib.command_line()}`",
        "",
        f"Best value after N trials (minimising), over seeds 0..{args.seeds - 1}: median "
        "[first quartile, third quartile]. Same objectives and seeds for every sampler; "
        "Optuna's samplers with `seed=s`: its TPE `TPESampler()` (Optuna 5's default: multivariate, "
        f"constant liar), its TPE univariate `TPESampler({', '.join(f'{k}={v}' for k, v in OPTUNA_UNIVARIATE.items())})` "
        f"(Optuna 4.x's default); {BATCH} at a time: {BATCH} trials drawn, all running, before their values are known "
        "(Optuna's through `study.ask()`). Ours through `sweep/examples/tpe_objective`: `bayes` and "
        "`bayes: {variant: univariate}`. "
        f"Every TPE but the one so named draws its first {startup(n)} trial(s) at random "
        f"(`n_startup_trials={startup(n)}` on Optuna's side: a quarter of the {n} trials, at most 10, "
        "the rule `train sweep` applies to its trials). "
        "Ours draw other random numbers than Optuna's, so seeds pair up only in name.",
        "",
        "| objective | sampler | " + " | ".join(f"best after {k}" for k in checkpoints) + " |",
        "|---|---|" + "---|" * len(checkpoints),
    ]
    verdicts = []
    for name in OBJECTIVES:
        med, per_seed = {}, {}
        for sampler in samplers:
            cells = []
            for k in checkpoints:
                v = sorted(r[f"best_{k}"] for r in rows if r["objective"] == name and r["sampler"] == sampler)
                q1, m, q3 = statistics.quantiles(v, n=4, method="inclusive")
                med[(sampler, k)] = m
                per_seed[(sampler, k)] = v
                cells.append(f"{m:.4g} [{q1:.4g}, {q3:.4g}]")
            lines.append(f"| {name} | {sampler} | " + " | ".join(cells) + " |")
        for a, b in pairs:
            for k in checkpoints:
                ours, theirs = med[(a, k)], med[(b, k)]
                lo, hi = median_diff_interval(per_seed[(a, k)], per_seed[(b, k)])
                verdict = ("no worse" if ours <= theirs
                           else "higher, within noise" if lo <= 0 else "WORSE")
                verdicts.append(f"| {name} | {a.removeprefix('trainguard ')} | {k} | {ours:.4g} | {theirs:.4g} "
                                f"| [{lo:+.3g}, {hi:+.3g}] | {verdict} |")
    lines += ["", "Median best, each trainguard TPE against the Optuna TPE it implements (lower is better; "
              "the interval is a 95% bootstrap interval of the difference of medians, ours minus Optuna's):", "",
              "| objective | TPE | N | ours | Optuna's | difference, 95% | verdict |",
              "|---|---|---|---|---|---|---|"]
    lines += verdicts + [""]
    with open(os.path.join(out, f"{stem}.md"), "w") as fh:
        fh.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
