#!/usr/bin/env python3
"""What a sweep's checkpoint (the journal's `<journal>.checkpoint`, a
database sweep's `DIR/database.checkpoint`) saves the next reader of a
large study, side by side in one run: a worker joining the sweep (`train
sweep --resume DIR`, the seconds from its start to its first new trial's
folder), `--status DIR` and `--report DIR --format json` (wall seconds and
peak RSS), each with OLD (a build before checkpoints) and NEW without a
checkpoint, and NEW with the one a driver left. The variants alternate in
each round; medians of the rounds.

The sweep is a generated study of N trials (bench/gen_study.py, through
benchlib's generated sweeps) in a journal, or with --postgres in a
throwaway PostgreSQL (scripts/postgres/cluster.sh). The checkpoint is the
one a joining driver leaves as it ends (its first join, by NEW, before
the rounds); each join adds one trial, which the checkpoint does not hold,
as a running sweep's newest trials are not in its last checkpoint.

  python bench/checkpoint_scale.py --old OLD/train --train NEW/train --sizes 28000,50000 [--postgres]
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import (GENERATED_TRIAL, command_line, generated_db_sweep, generated_space, generated_sweep,
                      load_note, measured, stamp, write_results)

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = [("old", False), ("new", False), ("new", True)]


def join(train, python, d, env):
    """Seconds from `--resume s` to its first new trial's folder; the
    driver is then stopped (Ctrl-C) and waited for."""
    trials = os.path.join(d, "s", "trials")
    before = len(os.listdir(trials))
    t0 = time.monotonic()
    p = subprocess.Popen([train, "sweep", "--interpreter", python, "--parallel", "4", "--resume", "s"], cwd=d,
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while len(os.listdir(trials)) <= before:
        if p.poll() is not None:
            sys.exit(f"checkpoint_scale: {train} sweep --resume exited {p.returncode} before its first trial")
        time.sleep(0.005)
    seconds = time.monotonic() - t0
    p.send_signal(signal.SIGINT)
    p.wait()
    return seconds


def one_size(a, size, pg=None):
    d = tempfile.mkdtemp(prefix=f"ckpt{size}.")
    env = dict(os.environ)
    # Room for every join's trial.
    total = size + 1 + 10 * a.rounds
    if pg is None:
        generated_sweep(a.train, a.python, d, generated_space(), GENERATED_TRIAL, size, total=total)
        kept = os.path.join(d, "s", "journal.log.checkpoint")
    else:
        generated_db_sweep(a.train, a.python, d, generated_space(), GENERATED_TRIAL, size, pg, f"c{size}",
                           total=total)
        env["PGPASSFILE"] = pg.passfile
        kept = os.path.join(d, "s", "database.checkpoint")
    join(a.train, a.python, d, env)
    if not os.path.exists(kept):
        sys.exit(f"checkpoint_scale: the first join left no {kept}")
    saved = kept + ".saved"
    shutil.copyfile(kept, saved)
    got = {v: {"join": [], "status": [], "report": [], "status_rss": [], "report_rss": []} for v in VARIANTS}
    for _ in range(a.rounds):
        for build, with_kept in VARIANTS:
            train = a.train if build == "new" else a.old
            m = got[(build, with_kept)]
            for what, cmd in [("status", ["--status", "s"]), ("report", ["--report", "s", "--format", "json"]),
                              ("join", None)]:
                # Each measure starts from the same file, or none (a join
                # by NEW writes one as it goes).
                if with_kept:
                    shutil.copyfile(saved, kept)
                elif os.path.exists(kept):
                    os.unlink(kept)
                # The copy on disk first: a write-back under way would hold
                # up the join's first fsync (ext4 commits it with them).
                os.sync()
                if cmd is None:
                    m["join"].append(join(train, a.python, d, env))
                    continue
                old_cwd = os.getcwd()
                os.chdir(d)
                try:
                    ms, rss, _ = measured([train, "sweep", *cmd], env=env)
                finally:
                    os.chdir(old_cwd)
                m[what].append(ms / 1000.0)
                m[f"{what}_rss"].append(rss)
    mib = os.path.getsize(saved) / 2**20
    shutil.rmtree(d)
    med = statistics.median
    return [{"storage": "postgres" if pg else "journal", "study_trials": size, "build": build,
             "checkpoint": f"kept ({mib:.0f} MiB)" if with_kept else "none",
             "join_s": round(med(m["join"]), 3), "status_s": round(med(m["status"]), 3),
             "report_s": round(med(m["report"]), 3), "status_rss_mib": round(med(m["status_rss"])),
             "report_rss_mib": round(med(m["report_rss"])),
             "join_all": " ".join(f"{x:.2f}" for x in m["join"])}
            for (build, with_kept), m in got.items()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="a `train` built before checkpoints")
    ap.add_argument("--train", default=os.path.join(HERE, "..", "target", "release", "train"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--sizes", default="28000,50000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--postgres", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    note = load_note()
    pg = None
    if a.postgres:
        sys.path.insert(0, os.path.join(HERE, "..", "scripts", "postgres"))
        from pgcluster import Cluster
        top = tempfile.mkdtemp(prefix="ckpt-pg.")
        os.chmod(top, 0o755)  # The server runs as the postgres user.
        pg = Cluster(os.path.join(top, "pg"))
    try:
        rows = [r for size in map(int, a.sizes.split(",")) for r in one_size(a, size, pg)]
    finally:
        if pg is not None:
            pg.down()
            shutil.rmtree(top)
    head = ["storage", "study trials", "build", "checkpoint", "join s", "--status s", "--report s",
            "--status RSS MiB", "--report RSS MiB", "join, each round"]
    lines = [f"`{command_line()}` ({stamp()}, {note}; medians of {a.rounds} rounds)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows]
    name = "checkpoint_scale_pg" if a.postgres else "checkpoint_scale"
    write_results(a.out, name, rows, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
