#!/usr/bin/env python3
"""Soak at scale (issue 44): a sweep of --trials instant trials run by
--workers workers on one journal, --kills of them SIGKILLed along the way.

The sweep: a random search over a log-uniform learning rate and a width,
each trial a shell script that prints its metric line and exits (so what is
measured is the workers, not the trials). The first worker is the driver
(`train sweep --space ... --trials N`), the others `train sweep --worker
DIR`; they start together.

Injects: SIGKILL of a live worker, chosen at random, each time another
--trials/(--kills+1) trials have started; a new `train sweep --worker DIR`
takes its place, so --workers run to the end. A killed worker leaves the
trial it was running RUNNING in the journal; once every worker has ended,
`train sweep --resume DIR` runs those again (what the guide tells a user).

Checks: every worker that was not killed exits 0, and so does the resume;
no panic on any worker's stderr; Optuna (5.0.0) loads the journal: trial
numbers 0..n-1 once each, none RUNNING; exactly --trials trials are not
`interrupted` (every number drawn once, none lost), each COMPLETE; each
interrupted trial was run again by a later trial whose `retried_from`
names it; `train sweep --report --format json` counts the same.
Figures: the workers' own CPU per trial (utime + stime from /proc, read
every half second and just before a kill; their trials' CPU not
included), the wall time, trials per second, the workers' peak RSS, the
journal's size, and `--status` on the final journal.

With --postgres the study is in a throwaway PostgreSQL
(scripts/postgres/cluster.sh) instead: each worker has its own --out
(`train sweep --worker --storage URL --study s --out wN`), a killed worker
comes back with the same --out and settles the trial it left RUNNING
(run again, as on the journal), and Optuna loads the database.

  scale_soak.py [--train target/release/train] [--trials 20000] [--workers 8] [--kills 40] [--postgres]
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import rel_common as rc

TRIAL = """for a; do case $a in --lr=*) lr=${a#--lr=};; esac; done
echo "{\\"val_loss\\": $lr}"
"""

SPACE = """program: trial.sh
method: random
metric: {name: val_loss, goal: minimize}
parameters:
  lr: {distribution: log_uniform_values, min: 1.0e-5, max: 0.1}
  width: {values: [64, 128, 256, 512, 1024]}
"""

TICK = os.sysconf("SC_CLK_TCK")


def own_usage(pid):
    """(own CPU seconds, peak RSS MiB) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK, hwm / 1024.0


class Worker:
    def __init__(self, train, d, n, first, trials, db=None, out=None):
        """Worker `n`; on a database (`db`: its URL and environment), its
        trial folders in `out` (default wN)."""
        cmd = [train, "sweep", "--parallel", "1"]
        self.out = out or ("s" if first else f"w{n}")
        if first:
            cmd += ["--space", "space.yaml", "--out", "s", "--trials", str(trials), "--interpreter", "/bin/sh"]
        elif db is None:
            cmd += ["--worker", "s"]
        else:
            cmd += ["--worker", "--out", self.out]
        if db is not None:
            cmd += ["--storage", db[0], "--study", "s", "--heartbeat-grace", "10"]
        self.err_path = os.path.join(d, f"worker{n}.err")
        self.p = subprocess.Popen(cmd, cwd=d, stdout=subprocess.DEVNULL, stderr=open(self.err_path, "w"),
                                  env=db[1] if db else None)
        self.cpu, self.rss, self.killed = 0.0, 0.0, False

    def sample(self):
        u = own_usage(self.p.pid)
        if u:
            self.cpu, self.rss = u[0], max(self.rss, u[1])


def started(d):
    """Trial folders so far: the sweep's (s), and a database's other
    workers' (w1, w2, ...)."""
    n = 0
    for out in os.listdir(d):
        try:
            n += len(os.listdir(os.path.join(d, out, "trials")))
        except (FileNotFoundError, NotADirectoryError):
            pass
    return n


def run(a, d, checks, db=None):
    with open(os.path.join(d, "trial.sh"), "w") as f:
        f.write(TRIAL)
    with open(os.path.join(d, "space.yaml"), "w") as f:
        f.write(SPACE)
    rng = random.Random(a.seed)
    t = rc.Timer()
    workers = [Worker(a.train, d, 0, True, a.trials, db)]
    while not os.path.exists(os.path.join(d, "s", "sweep.yaml")) and workers[0].p.poll() is None:
        time.sleep(0.05)
    workers += [Worker(a.train, d, n, False, a.trials, db) for n in range(1, a.workers)]
    step = a.trials / (a.kills + 1)
    kills = 0
    while any(w.p.poll() is None for w in workers):
        live = [w for w in workers if w.p.poll() is None]
        for w in live:
            w.sample()
        if kills < a.kills and started(d) >= step * (kills + 1):
            victim = rng.choice(live)
            victim.sample()
            victim.p.send_signal(signal.SIGKILL)
            victim.p.wait()
            victim.killed = True
            kills += 1
            # On a database the worker comes back with its --out, which
            # settles the trial it left; on a journal the resume does.
            again = victim.out if db is not None and victim.out != "s" else None
            workers.append(Worker(a.train, d, len(workers), False, a.trials, db, again))
        time.sleep(0.5)
    run_s = t.s()
    for w in workers:
        if not w.killed:
            checks.check(w.p.returncode == 0, f"worker {w.p.args[2:]} exited {w.p.returncode}")
        with open(w.err_path) as f:
            err = f.read()
        checks.check("panicked" not in err, f"a worker panicked: {w.err_path}: {err[-500:]}")
    checks.check(kills == a.kills, f"{kills} kills landed, {a.kills} asked for")
    resume = subprocess.run([a.train, "sweep", "--resume", "s", "--parallel", "2"], cwd=d,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=db[1] if db else None)
    checks.check(resume.returncode == 0, f"the resume exited {resume.returncode}: {resume.stderr[-500:]}")
    return workers, kills, run_s


def check_study(a, d, checks, db=None):
    journal = os.path.join(d, "s", "journal.log")
    with open(os.path.join(d, "s", "sweep.yaml")) as f:
        name = next(line.split(":", 1)[1].strip().strip("'\"") for line in f if line.startswith("study_name:"))
    if db is None:
        trials = rc.optuna_trials(journal, name)
    else:
        trials = rc.optuna_trials(db[0].replace("postgresql://", "postgresql+psycopg2://", 1), name, db[1])
    numbers = sorted(x["number"] for x in trials)
    checks.check(numbers == list(range(len(trials))), "trial numbers are not 0..n-1 once each")
    checks.check(not [x for x in trials if x["state"] == "RUNNING"], "a trial is RUNNING after the resume")
    kept = [x for x in trials if x["user_attrs"].get("error_class") != "interrupted"]
    interrupted = [x for x in trials if x["user_attrs"].get("error_class") == "interrupted"]
    checks.check(len(kept) == a.trials, f"{len(kept)} trials not interrupted, {a.trials} drawn")
    checks.check(all(x["state"] == "COMPLETE" for x in kept), "a trial that was not interrupted did not complete")
    # A re-run names its point's first trial, so a chain of interrupted runs
    # ends in one finished trial naming the first (as in kill_sweep.py).
    reruns = {}
    for x in kept:
        if x["user_attrs"].get("retried_from") is not None:
            reruns.setdefault(x["user_attrs"]["retried_from"], []).append(x)
    for x in interrupted:
        root = x["user_attrs"].get("retried_from", x["number"])
        again = reruns.get(root, [])
        checks.check(len(again) == 1 and again[0]["params"] == x["params"] and again[0]["number"] > x["number"],
                     f"interrupted trial {x['number']} run again as {[r['number'] for r in again]}")
    rep = subprocess.run([a.train, "sweep", "--report", "s", "--format", "json"], cwd=d,
                         capture_output=True, text=True, env=db[1] if db else None)
    counts = json.loads(rep.stdout)["counts"] if rep.returncode == 0 else {}
    checks.check(counts.get("COMPLETE") == a.trials, f"--report counts {counts}, Optuna {a.trials} COMPLETE")
    t0 = time.monotonic()
    subprocess.run([a.train, "sweep", "--status", "s"], cwd=d, stdout=subprocess.DEVNULL, check=False,
                   env=db[1] if db else None)
    status_s = time.monotonic() - t0
    return len(trials), len(interrupted), os.path.getsize(journal) if db is None else None, status_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default=rc.default_train())
    ap.add_argument("--trials", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--kills", type=int, default=40)
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--postgres", action="store_true", help="the study in a throwaway PostgreSQL")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    a = ap.parse_args()
    a.train = os.path.abspath(a.train)
    started_at = rc.utc_now()
    checks = rc.Checks()
    with tempfile.TemporaryDirectory(prefix="scale-soak-") as d:
        pg = db = None
        if a.postgres:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "postgres"))
            from pgcluster import Cluster
            os.chmod(d, 0o755)  # The server runs as the postgres user.
            pg = Cluster(os.path.join(d, "pg"))
            db = (pg.new_db("soak"), {**os.environ, "PGPASSFILE": pg.passfile})
        try:
            workers, kills, run_s = run(a, d, checks, db)
            n, interrupted, size, status_s = check_study(a, d, checks, db)
        finally:
            if pg is not None:
                pg.down()
    cpu = sum(w.cpu for w in workers)
    figures = {
        "storage": "postgres" if a.postgres else "journal",
        "trials": a.trials, "workers": a.workers, "kills": kills, "trials_in_journal": n,
        "interrupted_and_rerun": interrupted, "wall_s": round(run_s, 1),
        "trials_per_s": round(a.trials / run_s, 1),
        "workers_cpu_s": round(cpu, 1), "workers_cpu_ms_per_trial": round(1000 * cpu / a.trials, 2),
        "worker_peak_rss_mib": round(max(w.rss for w in workers), 1),
        "journal_mib": None if size is None else round(size / 2**20, 1), "status_s": round(status_s, 2),
    }
    name = "scale_soak_postgres" if a.postgres else "scale_soak"
    path = rc.write_result(a.out, name, not checks.failed, figures, checks.failed, started_at)
    print(json.dumps(figures, indent=2))
    print(f"scale_soak: {'ok' if not checks.failed else f'{len(checks.failed)} check(s) failed'}; {path}",
          file=sys.stderr)
    sys.exit(0 if not checks.failed else 1)


if __name__ == "__main__":
    main()
