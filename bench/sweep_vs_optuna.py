#!/usr/bin/env python3
"""A sweep's throughput and what it keeps when trials die hard: `train sweep`
(each trial a train process, an Optuna journal on disk) against an Optuna
study in one Python process over the PyTorch reference model doing the same
trials (bench/trial_reference.py: same model, same shapes, same epochs).

  python bench/sweep_vs_optuna.py --train target/release/train --cfgcheck target/release/cfgcheck

Throughput: N trials of bench/trial_tiny.yaml with a sampled learning rate,
at --parallel 1 and 2 (Optuna: n_jobs 1 and 2 in its one process), as trials
per hour. Dying hard: the same N trials, one in ten killed with SIGKILL
(train: TRAINGUARD_FAULT=sigkill in that trial's environment; Optuna: the
objective kills its own process, as a CUDA error that poisons the context
ends seed 004's). Kept: the finished trials each has in its storage at the
end (Optuna's storage is a JournalStorage file too, so nothing finished is
lost by the storage; what is lost is the sweep itself).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cfgcheck_result, command_line, load_note, stamp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "trial_tiny.yaml")

OPTUNA_SIDE = r'''
import json, os, signal, sys
import optuna, torch
sys.path.insert(0, sys.argv[1])
from trial_reference import trial
cfg = json.load(open(sys.argv[2]))
journal, n, jobs, die_every, out = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
torch.set_num_threads(max(1, (os.cpu_count() or 1) // jobs))
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(journal))
study = optuna.create_study(study_name="bench", storage=storage, sampler=optuna.samplers.RandomSampler(seed=0))
def objective(t):
    c = dict(cfg, learning_rate=t.suggest_float("learning_rate", 1e-4, 1e-2, log=True))
    if die_every and t.number % die_every == die_every - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return trial(c, os.path.join(out, str(t.number)), "cpu")
study.optimize(objective, n_trials=n, n_jobs=jobs)
'''


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def ours(train, n, parallel, die_every, tmp):
    """(seconds, finished trials, recorded trials) of a train sweep."""
    faults = ""
    if die_every:
        # A grid whose fault parameter kills one trial in `die_every`; the
        # other values never fire (epoch 99 does not exist).
        values = [f'"nan@99:{i}"' for i in range(die_every - 1)] + ['"sigkill@1:1"']
        faults = f"  environment.TRAINGUARD_FAULT: {{values: [{', '.join(values)}]}}\n"
        lrs = ", ".join(str(1e-4 * (1.5 ** i)) for i in range(max(1, n // die_every)))
        space = f"method: grid\nmetric: {{name: val_loss, goal: minimize}}\nparameters:\n  learning_rate: {{values: [{lrs}]}}\n{faults}"
    else:
        space = (f"method: random\nmetric: {{name: val_loss, goal: minimize}}\nrun_cap: {n}\nparameters:\n"
                 "  learning_rate: {distribution: log_uniform_values, min: 0.0001, max: 0.01}\n")
    path = write(os.path.join(tmp, f"space-{parallel}-{die_every}.yaml"), space)
    out = os.path.join(tmp, f"sweep-{parallel}-{die_every}")
    start = time.perf_counter()
    done = subprocess.run([train, "sweep", "--config", BASE, "--space", path, "--out", out,
                           "--parallel", str(parallel)], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: train sweep exited {done.returncode}:\n{done.stderr[-2000:]}")
    report = subprocess.run([train, "sweep", "--report", out, "--format", "json"], capture_output=True,
                            text=True, check=True)
    trials = json.loads(report.stdout)["trials"]
    return seconds, sum(t["state"] == "COMPLETE" for t in trials), len(trials)


def theirs(python, cfg_json, n, jobs, die_every, tmp):
    """(seconds, finished trials in its storage, trials it ran) of an Optuna study."""
    journal = os.path.join(tmp, f"optuna-{jobs}-{die_every}.log")
    out = os.path.join(tmp, f"optuna-{jobs}-{die_every}")
    start = time.perf_counter()
    subprocess.run([python, "-c", OPTUNA_SIDE, HERE, cfg_json, journal, str(n), str(jobs), str(die_every), out],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    count = subprocess.run([python, "-c", (
        "import optuna,sys; optuna.logging.set_verbosity(optuna.logging.WARNING);"
        "s=optuna.load_study(study_name='bench', storage=optuna.storages.JournalStorage("
        "optuna.storages.journal.JournalFileBackend(sys.argv[1])));"
        "print(sum(t.state.name=='COMPLETE' for t in s.trials), len(s.trials))"), journal],
        capture_output=True, text=True, check=True).stdout.split()
    return seconds, int(count[0]), int(count[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True)
    ap.add_argument("--cfgcheck", required=True)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    n = args.trials
    note = load_note()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg_json = write(os.path.join(tmp, "cfg.json"), json.dumps(cfgcheck_result(args.cfgcheck, BASE)["resolved"]))
        for k in (1, 2):
            s, done, _ = ours(args.train, n, k, 0, tmp)
            rows.append(("train sweep", f"--parallel {k}", n, s, done, n))
            s, done, _ = theirs(args.python, cfg_json, n, k, 0, tmp)
            rows.append(("Optuna study, one process", f"n_jobs {k}", n, s, done, n))
        s, done, recorded = ours(args.train, n, 1, 10, tmp)
        rows.append(("train sweep, 1 in 10 killed", "--parallel 1", n, s, done, recorded))
        s, done, ran = theirs(args.python, cfg_json, n, 1, 10, tmp)
        rows.append(("Optuna study, 1 in 10 killed", "n_jobs 1", n, s, done, ran))
    os.makedirs(args.results, exist_ok=True)
    header = "way,parallel,trials asked,seconds,finished trials per hour,finished trials kept,trials recorded\n"
    with open(os.path.join(args.results, "sweep_vs_optuna.csv"), "w") as f:
        f.write(header)
        for way, par, asked, s, done, rec in rows:
            f.write(f"{way},{par},{asked},{s:.1f},{done / s * 3600:.0f},{done},{rec}\n")
    optuna_version = subprocess.run([args.python, "-c", "import optuna; print(optuna.__version__)"],
                                    capture_output=True, text=True, check=True).stdout.strip()
    lines = [
        "# train sweep against an Optuna study in one process",
        "",
        f"{stamp()}, `{command_line()}`, optuna {optuna_version}, {note}, "
        "bench/trial_tiny.yaml's trial (PyTorch side: bench/trial_reference.py), CPU.",
        "",
        "| way | parallel | trials asked | seconds | finished trials per hour | finished trials kept | trials recorded |",
        "|---|---|---|---|---|---|---|",
    ]
    for way, par, asked, s, done, rec in rows:
        lines.append(f"| {way} | {par} | {asked} | {s:.1f} | {done / s * 3600:.0f} | {done} | {rec} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.results, "sweep_vs_optuna.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
