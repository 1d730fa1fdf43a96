#!/usr/bin/env python3
"""Program sweeps (issue 23) under faults: trials that are a real PyTorch
script (examples/own_script/main.py, from the project's .venv).

`--mode kill`: SIGKILL the `train sweep` driver at random moments (a delay
drawn from [0, --max-delay] s) and `--resume` it, again and again, until a
driver reaches the end; then a fresh sweep, until --kills kills have landed.
The sweep: a grid of 8 learning rates, 3 epochs of 0.4 s each, --parallel 2.
Checks: after each kill every journal line is whole JSON (a torn last line
is counted); each sweep's last driver exits 0; no process of a killed
driver's trials outlives the `--resume` that follows (found by
TRAINGUARD_TRIAL_DIR in /proc/PID/environ); Optuna loads the journal; trial
numbers 0..n-1 once each, none RUNNING; every grid point COMPLETE exactly
once; every other trial `interrupted`.

`--mode soak`: one sweep of --trials program trials, a grid of `fault`
(none, nan, label, oom, sigkill, hang) × `seed`, --parallel 1 (a fault run
in parallel would count as crowded and run again alone: see docs/guide/program-sweeps.md),
--trial-timeout 8. The faults are real: a NaN torch computes, torch's
IndexError, an out-of-memory under RLIMIT_AS, a SIGKILL, a hang past the
timeout. Checks: exit 0; Optuna loads the journal; exactly --trials trials,
numbered once each; each in the state and class its fault calls for;
`--report` agrees.

`--mode soak --auto-fix`: the same with `auto_fix: true` in the space and one
more fault, `oom-batch` (a batch of 64 whose activations do not fit under
the process's address-space limit; 32 fits): those trials COMPLETE in their
second attempt at batch 32 x accumulation 2 (the effective batch kept), the
`oom` trials (a fixed allocation past the limit, which no batch fixes) FAIL
after max_attempts attempts, every other fault ends as without auto_fix, in
one attempt. Checks as above, plus each trial's attempts and effective
batch.
"""

import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import rel_common as rc

SCRIPT = os.path.join(rc.ROOT, "examples", "own_script", "main.py")
EXPECT = {
    "none": ("COMPLETE", None),
    "nan": ("FAIL", "non-finite-loss"),
    "label": ("FAIL", "label-out-of-range"),
    "oom": ("FAIL", "out-of-memory"),
    "sigkill": ("FAIL", "killed"),
    "hang": ("FAIL", "timeout"),
}


def interpreter():
    venv = os.environ.get("VIRTUAL_ENV")
    py = os.path.join(venv, "bin", "python") if venv else None
    return py if py and os.path.exists(py) else sys.executable


def journal_ok(journal):
    """(bad lines, torn last line?)."""
    try:
        with open(journal, "rb") as f:
            data = f.read()
    except OSError:
        return [], False
    torn = bool(data) and not data.endswith(b"\n")
    lines = data.split(b"\n")
    whole = lines[:-1]
    bad = []
    for i, line in enumerate(whole):
        try:
            json.loads(line)
        except ValueError:
            bad.append(i + 1)
    return bad, torn


def preload_line(args):
    """The space's `preload:` line (--preload): trials forked from a server."""
    return f"preload: [{', '.join(args.preload)}]\n" if args.preload else ""


def kill_mode(args, checks, figures):
    rng = random.Random(args.seed)
    project = tempfile.mkdtemp(prefix="program-kill-", dir=args.out)
    with open(os.path.join(project, "space.yaml"), "w") as f:
        f.write(f"program: {SCRIPT}\nmethod: grid\nmetric: {{name: val_loss}}\n{preload_line(args)}parameters:\n"
                "  lr: {values: [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]}\n"
                "  epochs: {value: 3}\n  epoch_seconds: {value: 0.4}\n")
    kills = sweeps = torn_total = orphans = 0
    ended_after = 0.0
    while kills < args.kills:
        sweeps += 1
        sweep = os.path.join(project, f"s{sweeps}")
        first = True
        while True:
            # Killed before it wrote sweep.yaml (while its preload server
            # imported torch, say): started again, as a user would.
            if not os.path.exists(os.path.join(sweep, "sweep.yaml")):
                shutil.rmtree(sweep, ignore_errors=True)
                first = True
            cmd = [args.train, "sweep", "--space", "space.yaml", "--out", sweep, "--parallel", "2",
                   "--interpreter", interpreter()] if first else [args.train, "sweep", "--resume", sweep]
            log = open(os.path.join(project, f"driver-{sweeps}.log"), "a")
            p = subprocess.Popen(cmd, cwd=project, stdout=log, stderr=log)
            first = False
            if kills < args.kills:
                try:
                    code = p.wait(timeout=rng.uniform(0, args.max_delay))
                except subprocess.TimeoutExpired:
                    left = rc.live_trials(sweep)
                    p.send_signal(signal.SIGKILL)
                    p.wait()
                    kills += 1
                    # No trial outlives its driver: each one's keeper ends it.
                    still, took = rc.orphans_after_kill(sweep, left, args.orphan_wait)
                    orphans += len(still)
                    ended_after = max(ended_after, took if left else 0.0)
                    checks.check(not still, f"sweep {sweeps}: trials {still} outlived their killed driver by {took:.0f} s")
                    bad, torn = journal_ok(os.path.join(sweep, "journal.log"))
                    torn_total += torn
                    checks.check(not bad, f"sweep {sweeps}: journal lines {bad} are not JSON after a kill")
                    continue
            else:
                code = p.wait()
            checks.check(code == 0, f"sweep {sweeps}: the last driver exited {code}")
            break
        try:
            trials = rc.optuna_trials(os.path.join(sweep, "journal.log"), f"s{sweeps}")
        except RuntimeError as e:
            checks.check(False, str(e))
            continue
        numbers = [t["number"] for t in trials]
        checks.check(numbers == list(range(len(trials))), f"sweep {sweeps}: numbers {numbers}")
        checks.check(all(t["state"] != "RUNNING" for t in trials), f"sweep {sweeps}: RUNNING left")
        done = collections.Counter(t["params"]["lr"] for t in trials if t["state"] == "COMPLETE")
        checks.check(sorted(done) == [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]
                     and set(done.values()) == {1}, f"sweep {sweeps}: grid points done {dict(done)}")
        other = [t for t in trials if t["state"] != "COMPLETE"
                 and t["user_attrs"].get("error_class") != "interrupted"]
        checks.check(not other, f"sweep {sweeps}: failures not ours: {other[:3]}")
        print(f"program_sweep kill: sweep {sweeps} done, {kills}/{args.kills} kills", file=sys.stderr, flush=True)
    figures.update({"driver_kills": kills, "sweeps": sweeps, "torn_tails_after_kill": torn_total,
                    "orphaned_trial_processes": orphans,
                    "slowest_trial_end_after_a_kill_s": round(ended_after, 2)})


# With auto_fix: (state, class, attempts, effective batch x accumulation).
EXPECT_FIXED = {
    "none": ("COMPLETE", None, 1, None),
    "nan": ("FAIL", "non-finite-loss", 1, None),
    "label": ("FAIL", "label-out-of-range", 1, None),
    # A fixed allocation past the limit: the batch halved four times (64 x 1
    # -> 4 x 16), max_attempts reached, still out of memory.
    "oom": ("FAIL", "out-of-memory", 5, (4, 16)),
    "oom-batch": ("COMPLETE", None, 2, (32, 2)),
    "sigkill": ("FAIL", "killed", 1, None),
    "hang": ("FAIL", "timeout", 1, None),
}


def outcome(x, auto_fix):
    """A trial's outcome as EXPECT / EXPECT_FIXED word it."""
    a = x["user_attrs"]
    got = (x["state"], a.get("error_class"))
    if not auto_fix:
        return got
    eff = a.get("effective_params") or {}
    batch = (eff["batch_size"], eff["accum_steps"]) if "batch_size" in eff else None
    return got + (a.get("attempts"), batch)


def soak_mode(args, checks, figures):
    expect = EXPECT_FIXED if args.auto_fix else EXPECT
    seeds = max(1, args.trials // len(expect))
    project = tempfile.mkdtemp(prefix="program-soak-", dir=args.out)
    fix = "auto_fix: true\nfix: {batch: batch_size, accumulation: accum_steps}\n" if args.auto_fix else ""
    with open(os.path.join(project, "space.yaml"), "w") as f:
        f.write(f"program: {SCRIPT}\nmethod: grid\nmetric: {{name: val_loss}}\n{preload_line(args)}{fix}parameters:\n"
                f"  fault: {{values: [{', '.join(expect)}]}}\n"
                f"  seed: {{values: [{', '.join(str(s) for s in range(seeds))}]}}\n"
                "  epochs: {value: 2}\n  fault_epoch: {value: 1}\n  memory_limit_mib: {value: 1500}\n"
                "  batch_size: {value: 64}\n  accum_steps: {value: 1}\n  budget_mib: {value: 700}\n")
    sweep = os.path.join(project, "s")
    t = rc.Timer()
    with open(os.path.join(project, "driver.log"), "w") as log:
        code = subprocess.run([args.train, "sweep", "--space", "space.yaml", "--out", sweep,
                               "--parallel", "1", "--trial-timeout", str(args.trial_timeout),
                               "--interpreter", interpreter(),
                               "--max-consecutive-failures", "0"], cwd=project, stdout=log, stderr=log).returncode
    seconds = t.s()
    checks.check(code == 0, f"train sweep exited {code}")
    trials = rc.optuna_trials(os.path.join(sweep, "journal.log"), "s")
    want = seeds * len(expect)
    checks.check([x["number"] for x in trials] == list(range(want)), f"{len(trials)} trials, expected {want}")
    wrong = [(x["number"], x["params"]["fault"]) + outcome(x, args.auto_fix)
             for x in trials if outcome(x, args.auto_fix) != expect[x["params"]["fault"]]]
    checks.check(not wrong, f"{len(wrong)} trial(s) not in their class: {wrong[:10]}")
    rep = subprocess.run([args.train, "sweep", "--report", sweep, "--format", "json"], capture_output=True, text=True)
    if checks.check(rep.returncode == 0, f"--report exited {rep.returncode}"):
        counts = {k: v for k, v in json.loads(rep.stdout)["counts"].items() if v}
        states = dict(collections.Counter(x["state"] for x in trials))
        checks.check(counts == states, f"--report {counts} != Optuna {states}")
    classes = collections.Counter(x["user_attrs"].get("error_class") for x in trials if x["state"] == "FAIL")
    if args.auto_fix:
        figures["attempts"] = dict(collections.Counter(x["user_attrs"].get("attempts") for x in trials))
    figures.update({"trials": len(trials), "seconds": round(seconds, 1),
                    "trials_per_hour": round(len(trials) / seconds * 3600),
                    "error_classes": dict(classes), "wrong_outcomes": len(wrong)})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["kill", "soak"], required=True)
    ap.add_argument("--train", default=rc.default_train())
    ap.add_argument("--out", default=os.path.join(rc.ROOT, "runs", "reliability", "program"))
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--max-delay", type=float, default=5.0)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--preload", action="append", default=[], metavar="MODULE",
                    help="the space's preload (repeatable): each trial forked from one server")
    ap.add_argument("--orphan-wait", type=float, default=25.0,
                    help="kill: seconds a killed driver's trials get to end (the keeper's grace is 20 s)")
    ap.add_argument("--trial-timeout", type=float, default=8.0, help="soak: a hang ends after this")
    ap.add_argument("--auto-fix", action="store_true",
                    help="soak: the space has auto_fix: true, and an out-of-memory a smaller batch fixes")
    args = ap.parse_args()
    args.train = os.path.abspath(args.train)
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    started = rc.utc_now()
    checks = rc.Checks()
    figures = {"mode": args.mode, "preload": args.preload, "auto_fix": args.auto_fix}
    t = rc.Timer()
    (kill_mode if args.mode == "kill" else soak_mode)(args, checks, figures)
    figures["wall_seconds"] = round(t.s(), 1)
    ok = not checks.failed
    path = rc.write_result(args.out, f"program-{args.mode}", ok, figures, checks.failed, started)
    print(f"program_sweep {args.mode}: {'PASS' if ok else 'FAIL'}: {figures}; {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
