#!/usr/bin/env python3
"""Soak: a long sweep of tiny CPU trials, a fifth of which fail on purpose.

Injects: through the space's `environment.TRAINGUARD_FAULT` values
(configs/reliability/soak_space.yaml, a grid of 40 learning rates x 25
fault values), in one trial out of five: SIGABRT (`abort`), an
out-of-memory error at every micro-batch (`oom-always`), three NaN losses
in a row (`nan`), a hang ended by --trial-timeout (`hang`) and a SIGKILL
(`sigkill`); the other trials meet faults they recover from (an OOM halved
away, one NaN step skipped, a failed allocation) or none.

Checks: the sweep exits 0; Optuna (5.0.0 since issue 22) loads the journal
(optuna.load_study on JournalStorage(JournalFileBackend)); it holds exactly
--trials trials, numbered 0..N-1 once each, none RUNNING; each grid point
ran once; each trial ended in the state and error class its fault calls
for (COMPLETE, or FAIL with killed / out-of-memory / non-finite-loss /
timeout); no panic on the driver's stderr; `train sweep --report` agrees.
Records the duration, trials per hour, the journal's lines and size.
"""

import argparse
import collections
import json
import os
import subprocess
import sys

import rel_common as rc

# The fault values that fail a trial, and the class they fail with; every
# other value of the space completes.
FAILING = {
    "abort@1:1": "killed",
    "oom-always@1:1": "out-of-memory",
    "nan@1:1,nan@1:2,nan@1:3": "non-finite-loss",
    "hang@1:1": "timeout",
    "sigkill@1:2": "killed",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default=rc.default_train())
    ap.add_argument("--out", default=os.path.join(rc.ROOT, "runs", "reliability", "soak"))
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--trial-timeout", type=float, default=5)
    ap.add_argument("--seed", type=int, default=1, help="the sweep's --seed (a grid does not use it)")
    ap.add_argument("--base", default=os.path.join(rc.ROOT, "configs", "reliability", "soak_base.yaml"))
    ap.add_argument("--space", default=os.path.join(rc.ROOT, "configs", "reliability", "soak_space.yaml"))
    args = ap.parse_args()
    started = rc.utc_now()
    checks = rc.Checks()
    os.makedirs(args.out, exist_ok=True)
    sweep_dir = os.path.join(args.out, "sweep")
    subprocess.run(["rm", "-rf", sweep_dir], check=True)
    cmd = [args.train, "sweep", "--config", args.base, "--space", args.space, "--out", sweep_dir,
           "--parallel", str(args.parallel), "--trials", str(args.trials),
           "--trial-timeout", str(args.trial_timeout), "--seed", str(args.seed),
           "--max-consecutive-failures", "1000000"]
    t = rc.Timer()
    log_path = os.path.join(args.out, "driver.log")
    with open(log_path, "w") as log:
        code = subprocess.run(cmd, env=rc.env_without_faults(), stdout=log, stderr=log).returncode
    seconds = t.s()
    with open(log_path) as f:
        log_text = f.read()
    checks.check(code == 0, f"train sweep exited {code}: {log_text[-1500:]}")
    checks.check("panicked" not in log_text, "a panic on the driver's stderr")

    journal = os.path.join(sweep_dir, "journal.log")
    figures = {"trials_asked": args.trials, "parallel": args.parallel, "seconds": round(seconds, 1),
               "exit_code": code}
    try:
        trials = rc.optuna_trials(journal, "sweep")
    except Exception as e:  # noqa: BLE001
        checks.check(False, str(e))
        trials = []
    numbers = [t_["number"] for t_ in trials]
    checks.check(sorted(numbers) == list(range(args.trials)),
                 f"trial numbers are not 0..{args.trials - 1} once each ({len(numbers)} trials)")
    running = [t_["number"] for t_ in trials if t_["state"] == "RUNNING"]
    checks.check(not running, f"trials left RUNNING: {running[:20]}")
    points = collections.Counter((t_["params"].get("learning_rate"),
                                  t_["params"].get("environment.TRAINGUARD_FAULT")) for t_ in trials)
    dup = [p for p, n in points.items() if n > 1]
    checks.check(not dup, f"grid points run more than once: {dup[:10]}")
    states = collections.Counter()
    classes = collections.Counter()
    wrong = []
    for t_ in trials:
        fault = t_["params"].get("environment.TRAINGUARD_FAULT")
        want = ("FAIL", FAILING[fault]) if fault in FAILING else ("COMPLETE", None)
        got = (t_["state"], t_["user_attrs"].get("error_class"))
        states[t_["state"]] += 1
        if got[1]:
            classes[got[1]] += 1
        if got != want:
            wrong.append(f"trial {t_['number']} ({fault}): {got}, expected {want}: "
                         f"{str(t_['user_attrs'].get('error_message'))[:200]}")
    checks.check(not wrong, f"{len(wrong)} trial(s) not in their expected state/class: {wrong[:10]}")
    rep = subprocess.run([args.train, "sweep", "--report", sweep_dir, "--format", "json"],
                         capture_output=True, text=True)
    if checks.check(rep.returncode == 0, f"--report exited {rep.returncode}: {rep.stderr[-500:]}"):
        counts = json.loads(rep.stdout)["counts"]
        checks.check({k: v for k, v in counts.items() if v} == dict(states),
                     f"--report's counts {counts} != Optuna's {dict(states)}")
    size = os.path.getsize(journal) if os.path.exists(journal) else 0
    lines = 0
    if size:
        with open(journal, "rb") as f:
            lines = sum(1 for _ in f)
    figures.update({
        "trials": len(trials),
        "states": dict(states),
        "error_classes": dict(classes),
        "trials_per_hour": round(len(trials) / seconds * 3600) if seconds else None,
        "journal_lines": lines,
        "journal_bytes": size,
        "wrong_outcomes": len(wrong),
    })
    ok = not checks.failed
    path = rc.write_result(args.out, "soak", ok, figures, checks.failed, started)
    print(f"soak: {'PASS' if ok else 'FAIL'}: {len(trials)}/{args.trials} trials finished "
          f"({dict(states)}; classes {dict(classes)}) in {seconds:.0f} s "
          f"({figures['trials_per_hour']} trials/h); journal {lines} lines, {size} bytes; "
          f"Optuna loads it; {len(checks.failed)} failed check(s); {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
