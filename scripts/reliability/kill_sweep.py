#!/usr/bin/env python3
"""Kill a sweep at random: SIGKILL the `train sweep` driver at random
moments and resume it, and SIGKILL its trial processes too.

Injects: SIGKILL of the driver after a delay drawn uniformly from
[0, --max-delay] seconds (so kills land while it starts, claims a trial,
appends to the journal, waits on trials, records a trial's end), then
`train sweep --resume DIR`, killed again, ... until a driver reaches the end
of the sweep; then a fresh sweep, until --kills driver kills have landed.
During each driver's life, with probability --trial-kill-p, a SIGKILL of a
running trial's train process (its pid from trials/NNNN/pid, checked against
the start time written beside it) at a random moment: a FAIL trial of class `killed`.

The sweep: configs/reliability/kill_sweep_base.yaml (a tiny CPU model, 3
epochs) over configs/reliability/kill_sweep_space.yaml (a grid of 24
points), --parallel 2.

Checks: right after each driver kill, every journal line is whole JSON (a
torn last line is counted; --resume must cut it); at the end of each sweep
the last driver exits 0; Optuna (5.0.0 since issue 22) loads the journal
(optuna.load_study on JournalStorage(JournalFileBackend)); trial numbers are
0..n-1 once each, none RUNNING; every trial that is not `interrupted` is
COMPLETE or FAIL with an error class; every grid point is finished by
exactly one trial that is not `interrupted`; every interrupted trial was
run again (a later trial of the same parameters, not interrupted, whose
user attribute `retried_from` names the point's first trial); the only
failures are our kills (`killed`); no panic on any driver's stderr; after
each driver kill, the trial processes it ran end within --orphan-wait
seconds (their keepers' SIGTERM; none is left for --resume to find).
"""

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import yaml

import rel_common as rc


def grid_points(space_path):
    with open(space_path) as f:
        space = yaml.safe_load(f)
    params = space["parameters"]
    names = list(params)
    points = [{}]
    for n in names:
        points = [dict(p, **{n: v}) for p in points for v in params[n]["values"]]
    return points


def journal_lines_ok(journal):
    """(whole lines, torn last line?, bad lines)."""
    try:
        with open(journal, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return 0, False, []
    lines = data.split(b"\n")
    torn = lines[-1] != b""
    bad = []
    for i, line in enumerate(lines[:-1]):
        try:
            json.loads(line)
        except ValueError:
            bad.append(i + 1)
    return len(lines) - 1, torn, bad


def trial_pids(sweep_dir):
    """{trial dir: pid} of the sweep's trial processes that are alive (by
    pid file and start time: a reused pid is not one)."""
    return rc.live_trials(sweep_dir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default=rc.default_train())
    ap.add_argument("--out", default=os.path.join(rc.ROOT, "runs", "reliability", "kill-sweep"))
    ap.add_argument("--kills", type=int, default=50, help="driver SIGKILLs to land in all")
    ap.add_argument("--max-delay", type=float, default=4.0, help="a driver is killed within this many seconds")
    ap.add_argument("--trial-kill-p", type=float, default=0.4)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--orphan-wait", type=float, default=25.0,
                    help="seconds a killed driver's trials get to end (the keeper's grace is 20 s)")
    ap.add_argument("--max-drivers", type=int, default=200, help="drivers per sweep before giving up")
    ap.add_argument("--base", default=os.path.join(rc.ROOT, "configs", "reliability", "kill_sweep_base.yaml"))
    ap.add_argument("--space", default=os.path.join(rc.ROOT, "configs", "reliability", "kill_sweep_space.yaml"))
    args = ap.parse_args()
    started = rc.utc_now()
    rng = random.Random(args.seed)
    checks = rc.Checks()
    os.makedirs(args.out, exist_ok=True)
    subprocess.run(["rm", "-rf", os.path.join(args.out, "sweeps")], check=True)
    points = grid_points(args.space)
    key = lambda p: json.dumps(p, sort_keys=True)  # noqa: E731

    kills = trial_kills = torn_after_kill = drivers = sweeps = panics = orphans = 0
    slowest_end = 0.0
    interrupted_total = retried_total = 0
    t = rc.Timer()
    while kills < args.kills:
        d = os.path.join(args.out, "sweeps", f"{sweeps:03d}")
        log_path = d + ".log"
        os.makedirs(os.path.dirname(d), exist_ok=True)
        finished = False
        sweep_kills = 0
        for _ in range(args.max_drivers):
            if os.path.exists(os.path.join(d, "sweep.yaml")):
                cmd = [args.train, "sweep", "--resume", d]
            else:
                # Killed before it wrote sweep.yaml: start it again, as a user would.
                subprocess.run(["rm", "-rf", d], check=True)
                cmd = [args.train, "sweep", "--config", args.base, "--space", args.space, "--out", d,
                       "--parallel", str(args.parallel), "--seed", str(args.seed),
                       "--max-consecutive-failures", "1000"]
            with open(log_path, "a") as log:
                log.write(f"$ {' '.join(cmd)}\n")
                log.flush()
                p = subprocess.Popen(cmd, env=rc.env_without_faults(), stdout=log, stderr=log)
            drivers += 1
            killed = False
            stop = threading.Event()
            landed = []
            if kills < args.kills:
                delay = rng.uniform(0, args.max_delay)
                if rng.random() < args.trial_kill_p:
                    at = rng.uniform(0, delay)

                    def kill_a_trial(at=at):
                        if stop.wait(at):
                            return
                        pids = trial_pids(d)
                        if pids:
                            n = sorted(pids)[rng.randrange(len(pids))]
                            try:
                                os.kill(pids[n], signal.SIGKILL)
                                landed.append(n)
                            except ProcessLookupError:
                                pass
                    th = threading.Thread(target=kill_a_trial)
                    th.start()
                else:
                    th = None
                try:
                    p.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    left = rc.live_trials(d)
                    p.send_signal(signal.SIGKILL)
                    killed = True
                stop.set()
                if th:
                    th.join()
            code = p.wait()
            if killed:
                # No trial outlives its driver: each one's keeper ends it.
                still, took = rc.orphans_after_kill(d, left, args.orphan_wait)
                orphans += len(still)
                slowest_end = max(slowest_end, took if left else 0.0)
                checks.check(not still, f"sweep {sweeps}: trials {still} outlived their killed driver by {took:.0f} s")
            trial_kills += len(landed)
            if killed and code == -signal.SIGKILL:
                kills += 1
                sweep_kills += 1
                _, torn, bad = journal_lines_ok(os.path.join(d, "journal.log"))
                torn_after_kill += torn
                checks.check(not bad, f"sweep {sweeps}: journal lines {bad} are not JSON after a kill")
                continue
            with open(log_path) as f:
                text = f.read()
            if "panicked" in text:
                panics += 1
                checks.check(False, f"sweep {sweeps}: a panic in {log_path}")
            if code == 0:
                finished = True
                break
            checks.check(False, f"sweep {sweeps}: `{' '.join(cmd)}` exited {code}: {text[-800:]}")
            break
        checks.check(finished, f"sweep {sweeps}: not finished after {args.max_drivers} drivers")
        if finished:
            with open(os.path.join(d, "sweep.yaml")) as f:
                study = yaml.safe_load(f)["study_name"]
            try:
                trials = rc.optuna_trials(os.path.join(d, "journal.log"), study)
            except Exception as e:  # noqa: BLE001
                checks.check(False, f"sweep {sweeps}: {e}")
                trials = []
            tag = f"sweep {sweeps}"
            nums = [x["number"] for x in trials]
            checks.check(nums == list(range(len(trials))), f"{tag}: numbers {nums}")
            checks.check(all(x["state"] != "RUNNING" for x in trials), f"{tag}: a trial is RUNNING")
            done = collections.Counter()
            for x in trials:
                cls = x["user_attrs"].get("error_class")
                if cls == "interrupted":
                    interrupted_total += 1
                    # A retry names the first trial of its point (driver.rs:
                    # `retried_from` its first number), so a chain of
                    # interrupted runs ends in one finished trial naming the first.
                    first = x["user_attrs"].get("retried_from", x["number"])
                    retry = [r for r in trials if r["user_attrs"].get("retried_from") == first
                             and r["user_attrs"].get("error_class") != "interrupted"]
                    checks.check(len(retry) == 1 and retry[0]["params"] == x["params"]
                                 and retry[0]["number"] > x["number"],
                                 f"{tag}: interrupted trial {x['number']} run again as {[r['number'] for r in retry]}")
                    continue
                if x["user_attrs"].get("retried_from") is not None:
                    retried_total += 1
                checks.check(x["state"] == "COMPLETE" or (x["state"] == "FAIL" and cls),
                             f"{tag}: trial {x['number']} {x['state']} class {cls}")
                checks.check(x["state"] == "COMPLETE" or cls == "killed",
                             f"{tag}: trial {x['number']} failed with {cls}, not by our kill")
                done[key(x["params"])] += 1
            want = collections.Counter(key(p) for p in points)
            checks.check(done == want, f"{tag}: grid points finished {dict(done - want)} extra, "
                         f"{dict(want - done)} missing")
        print(f"kill_sweep: sweep {sweeps}: {sweep_kills} driver kill(s), finished={finished}; "
              f"{kills}/{args.kills} driver kills, {trial_kills} trial kills", file=sys.stderr, flush=True)
        sweeps += 1
        if len(checks.failed) > 20:
            break
    figures = {
        "driver_kills": kills,
        "trial_kills": trial_kills,
        "sweeps": sweeps,
        "drivers_started": drivers,
        "grid_points_per_sweep": len(points),
        "interrupted_trials": interrupted_total,
        "retries_finished": retried_total,
        "torn_journal_lines_after_kill": torn_after_kill,
        "orphaned_trial_processes": orphans,
        "slowest_trial_end_after_a_kill_s": round(slowest_end, 2),
        "panics": panics,
        "seconds": round(t.s(), 1),
    }
    ok = not checks.failed and kills >= args.kills
    path = rc.write_result(args.out, "kill_sweep", ok, figures, checks.failed, started)
    print(f"kill_sweep: {'PASS' if ok else 'FAIL'}: {kills} driver SIGKILLs and {trial_kills} trial "
          f"SIGKILLs over {sweeps} sweeps of {len(points)} grid points ({drivers} drivers); "
          f"{interrupted_total} interrupted trials all run again; every point finished once; Optuna loads "
          f"every journal: {not checks.failed}; {len(checks.failed)} failed check(s); {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
