#!/usr/bin/env python3
"""The driver's own CPU per trial as the study grows (issue 44): a program
sweep of instant trials (or of trials that print one line a second for
--seconds) resumed on top of a study of N finished trials that
bench/gen_study.py wrote, for each N of --sizes, side by side in one run.
The driver's CPU is its own (utime + stime in /proc/PID/stat, sampled
until it exits), not its trials', per trial in the steady state (from the
first tenth of the new trials to the end of the last); its CPU up to then
(the start, which replays the whole journal once) and after (the end: the
sweep's summary and its objective.png of every trial) are reported apart,
with its wall time per trial, its peak RSS (VmHWM) and the seconds from
its start to its first new trial's folder (what a worker joining the study
waits).

  sweep_scale.py [--train target/release/train] [--sizes 1000,20000]
                 [--new 200] [--parallel 4] [--workers 1] [--seconds 0] [--rounds 3]

With --workers W, W - 1 `train sweep --worker` drivers join the resumed
one on the same journal, and the CPU is theirs together. With --postgres
the study is in a throwaway PostgreSQL (scripts/postgres/cluster.sh; a
database for each run) instead of a journal, its N trials copied in by
bench/gen_study.py --postgres, and the workers join it with --storage.

Results: bench/results/sweep_scale.{csv,md} (sweep_scale_METHOD.* for
another --method, sweep_scale[_METHOD]_lines.* with --seconds, a `_Ww`
suffix with --workers W, `_pg` with --postgres).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import GENERATED_TRIAL, generated_space, command_line, generated_db_sweep, generated_sweep, load_note, stamp, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
TICK = os.sysconf("SC_CLK_TCK")

def own_cpu(pid):
    """(own CPU seconds, peak RSS MiB) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK, hwm / 1024.0


class Ended:
    """Trials that ended since the run started: the journal's records that
    finish a trial, read from where the last look stopped, or the
    database's finished trials."""

    def __init__(self, journal=None, url=None, passfile=None):
        self.n, self.tail, self.conn = 0, b"", None
        if journal is not None:
            self.f = open(journal, "rb")
            self.f.seek(0, os.SEEK_END)
        else:
            import psycopg2
            self.conn = psycopg2.connect(url, passfile=passfile)
            self.conn.autocommit = True
            self.first = self._finished()

    def _finished(self):
        with self.conn.cursor() as c:
            c.execute("SELECT count(*) FROM trials WHERE state <> 'RUNNING'")
            return c.fetchone()[0]

    def count(self):
        if self.conn is not None:
            return self._finished() - self.first
        lines = (self.tail + self.f.read()).split(b"\n")
        self.tail = lines.pop()
        self.n += sum(1 for l in lines if l.startswith(b'{"op_code":6,') and b'"state":0,' not in l)
        return self.n


def created(journal):
    with open(journal, "rb") as f:
        return sum(1 for line in f if line.startswith(b'{"op_code":4,'))


def one_run(a, size, d, pg=None, db=None):
    """Resumes a sweep of `size` generated trials with --new more (its
    truth database `db` of the cluster `pg` where given): (driver CPU s,
    wall s, peak RSS MiB, trials run, start CPU s, whole run CPU s a trial,
    first trial s)."""
    parallel = ["--parallel", str(a.parallel)]
    space = generated_space(a.method, f"  seconds: {{value: {a.seconds}}}\n")
    env = dict(os.environ)
    if pg is None:
        journal = generated_sweep(a.train, a.python, d, space, GENERATED_TRIAL, size, parallel, total=size + a.new)
        join = lambda w: ["--worker", "s"]
    else:
        # The first sweep's one trial counts towards the total too.
        url = generated_db_sweep(a.train, a.python, d, space, GENERATED_TRIAL, size, pg, db, parallel, total=size + 1 + a.new)
        env["PGPASSFILE"] = pg.passfile
        join = lambda w: ["--worker", "--storage", url, "--study", "s", "--out", f"w{w}"]
    base = [a.train, "sweep", "--interpreter", a.python] + parallel
    t0 = time.monotonic()
    # Its messages to a file: a pipe read only at the end fills (64 KiB,
    # about 150 trials' lines) and blocks the driver in its next write.
    err = open(os.path.join(d, "driver.err"), "w+b")
    p = subprocess.Popen(base + ["--resume", "s"], cwd=d, env=env,
                         stdout=subprocess.DEVNULL, stderr=err)
    # With --workers W, W - 1 more drivers join the same study: the CPU
    # is all the drivers' together, per trial any of them ran.
    others = [subprocess.Popen(base + join(w), cwd=d, stdout=subprocess.DEVNULL, env=env,
                               stderr=open(os.path.join(d, f"worker{w}.err"), "wb"))
              for w in range(1, a.workers)]
    procs = [p] + others
    # The steady state: from the first tenth of the new trials on (the
    # start, which replays the whole journal once, is reported apart).
    # A database's workers keep their trial folders apart (w1, w2, ...).
    folders = [os.path.join(d, "s", "trials")] + [os.path.join(d, f"w{w}", "trials") for w in range(1, a.workers)]
    warm = max(1, a.new // 10)
    last = {q.pid: (0.0, 0.0) for q in procs}
    at_warm, first = None, None
    if pg is None:
        folders = folders[:1]  # Journal workers share the sweep's folders.

    def started():
        return sum(len(os.listdir(f)) for f in folders if os.path.isdir(f))

    # The steady state ends as the last new trial does: what follows (the
    # sweep's summary, its objective.png of every trial) is reported apart.
    ended = Ended(journal) if pg is None else Ended(url=url, passfile=pg.passfile)
    at_end = None
    while any(q.poll() is None for q in procs):
        for q in procs:
            if q.returncode is None:
                last[q.pid] = own_cpu(q.pid) or last[q.pid]
        cpu = sum(c for c, _ in last.values())
        # A joining worker's wait: from its start to its first trial's
        # folder (the one trial of the first sweep's is there already).
        n = started()
        if first is None and n > 1:
            first = time.monotonic() - t0
        e = ended.count() if at_end is None else a.new
        if at_warm is None and n > warm + 1:
            at_warm = (cpu, time.monotonic(), e)
        if at_end is None and at_warm is not None and e >= a.new:
            at_end = (cpu, time.monotonic())
        time.sleep(0.02)
    cpu = sum(c for c, _ in last.values())
    last = (cpu, max(r for _, r in last.values()))
    for q in others:
        if q.returncode != 0:
            sys.exit(f"sweep_scale: a joining worker exited {q.returncode}")
    wall = time.monotonic() - t0
    if p.returncode != 0:
        err.seek(0)
        sys.exit(f"sweep_scale: the resumed sweep exited {p.returncode}:\n{err.read().decode()[-2000:]}")
    err.close()
    if pg is None:
        ran = created(journal) - size
    else:  # The first sweep's trial, the generated ones, the new ones.
        ran = int(pg.sql(db, "SELECT count(*) FROM trials").strip()) - size - 1
    if at_warm is None:
        sys.exit("sweep_scale: the sweep ended before its first tenth of trials was seen")
    if at_end is None and ended.count() >= a.new:
        at_end = (cpu, time.monotonic())  # Its end came within the last look.
    if at_end is None:
        sys.exit("sweep_scale: the sweep ended before its last trial was seen to end")
    # The trials that ended between the two moments.
    steady = a.new - at_warm[2]
    return ((at_end[0] - at_warm[0]) / steady, (at_end[1] - at_warm[1]) / steady, last[1], ran, at_warm[0],
            last[0] / ran, first, last[0] - at_end[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="target/release/train")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--sizes", default="1000,20000")
    ap.add_argument("--new", type=int, default=200, help="trials run on top of each study")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1, help="drivers on the journal (the resumed one and W - 1 `--worker`s)")
    ap.add_argument("--seconds", type=int, default=0, help="each trial's length (a line a second)")
    ap.add_argument("--method", default="random")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--postgres", action="store_true", help="the study in a throwaway PostgreSQL, not a journal")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    a.train = os.path.abspath(a.train)
    sizes = [int(s) for s in a.sizes.split(",")]
    runs = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as top:
        pg = None
        if a.postgres:
            sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts", "postgres"))
            from pgcluster import Cluster
            os.chmod(top, 0o755)  # The server runs as the postgres user.
            pg = Cluster(os.path.join(top, "pg"))
        try:
            for r in range(a.rounds):
                for n in sizes:  # Sizes alternate within a round: load drifts hit all.
                    with tempfile.TemporaryDirectory() as d:
                        runs[n].append(one_run(a, n, d, pg, f"scale_{n}_{r}"))
        finally:
            if pg is not None:
                pg.down()
    rows = []
    for n in sizes:
        cpu, wall, rss, ran, start, whole, first, end = (statistics.median(r[i] for r in runs[n]) for i in range(8))
        rows.append({"study_trials": n, "method": a.method, "parallel": a.parallel, "workers": a.workers,
                     "trial_seconds": a.seconds,
                     "trials_run": int(ran), "driver_cpu_ms_per_trial": round(cpu * 1000, 1),
                     "wall_ms_per_trial": round(wall * 1000, 1), "driver_peak_rss_mib": round(rss),
                     "start_cpu_s": round(start, 2), "whole_run_cpu_ms_per_trial": round(whole * 1000, 1),
                     "first_trial_s": round(first, 2), "end_cpu_s": round(end, 2)})
    first = rows[0]
    text = [f"# The driver's own CPU per trial as the study grows ({'PostgreSQL' if a.postgres else 'a journal'})\n",
            f"{stamp()}; `{command_line()}`; {load_note()}; medians of {a.rounds} rounds.\n",
            "| study trials | method | workers | at once | trial s | trials run | driver CPU ms/trial | wall ms/trial | driver peak RSS MiB | start CPU s | end CPU s | whole run CPU ms/trial | first trial s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    text += [f"| {r['study_trials']} | {r['method']} | {r['workers']} | {r['parallel']} | {r['trial_seconds']} | {r['trials_run']} | "
             f"{r['driver_cpu_ms_per_trial']} | {r['wall_ms_per_trial']} | {r['driver_peak_rss_mib']} | {r['start_cpu_s']} | {r['end_cpu_s']} | {r['whole_run_cpu_ms_per_trial']} | {r['first_trial_s']} |"
             for r in rows]
    text.append("")
    text += [f"- At {r['study_trials']} trials: {r['driver_cpu_ms_per_trial'] / first['driver_cpu_ms_per_trial']:.2f}x "
             f"the driver's CPU per trial at {first['study_trials']}." for r in rows[1:]]
    name = "sweep_scale" + ("" if a.method == "random" else f"_{a.method}") + ("_lines" if a.seconds else "") \
        + ("" if a.workers == 1 else f"_{a.workers}w") + ("_pg" if a.postgres else "")
    write_results(a.out, name, rows, "\n".join(text) + "\n")


if __name__ == "__main__":
    main()
