"""`just test-slurm`'s verdict on a sweep's journal, read by Optuna itself:
every trial number once, nothing left RUNNING, each grid point COMPLETE
exactly once, each interrupted trial run again with its parameters.

    python scripts/slurm/check_sweep.py DIR STUDY GRID_POINTS
"""
import json
import sys

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
path, study_name, points = sys.argv[1], sys.argv[2], int(sys.argv[3])
storage = optuna.storages.JournalStorage(
    optuna.storages.journal.JournalFileBackend(f"{path}/journal.log")
)
trials = optuna.load_study(study_name=study_name, storage=storage).trials
problems = []
numbers = [t.number for t in trials]
if numbers != list(range(len(trials))):
    problems.append(f"trial numbers are not 0..{len(trials) - 1} once each: {numbers}")
for t in trials:
    if not t.state.is_finished():
        problems.append(f"trial {t.number} is {t.state.name}")
interrupted = [t for t in trials if t.user_attrs.get("error_class") == "interrupted"]
others = [t for t in trials if t not in interrupted]
complete = [t for t in others if t.state == optuna.trial.TrialState.COMPLETE]
if len(complete) != len(others):
    bad = [(t.number, t.state.name, t.user_attrs.get("error_message")) for t in others if t not in complete]
    problems.append(f"trials that neither completed nor were interrupted: {bad}")
grid = {json.dumps(t.params, sort_keys=True) for t in complete}
if len(complete) != points or len(grid) != points:
    problems.append(f"{len(complete)} complete trials over {len(grid)} grid points, expected {points} and {points}")
for t in interrupted:
    again = [r for r in trials if r.user_attrs.get("retried_from") == t.user_attrs.get("retried_from", t.number) and r.number > t.number]
    if not again or again[-1].params != t.params:
        problems.append(f"interrupted trial {t.number} was not run again with its parameters")
workers = sorted({t.user_attrs.get("worker", {}).get("slurm_job") or "none" for t in trials})
print(f"{len(trials)} trials: {len(complete)} complete over {len(grid)} grid points, "
      f"{len(interrupted)} interrupted and run again; Slurm tasks: {', '.join(workers)}")
for t in interrupted:
    print(f"  interrupted: trial {t.number} ({t.user_attrs.get('worker', {}).get('slurm_job')}): {t.user_attrs.get('error_message')}")
if problems:
    print("FAILED:\n  " + "\n  ".join(problems))
    sys.exit(1)
print("ok: every trial number ended once and Optuna loads the journal")
