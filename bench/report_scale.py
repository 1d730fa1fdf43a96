#!/usr/bin/env python3
"""`train sweep --report` and `--status` of a large study against Optuna's
own `load_study().trials`, side by side on the same files (issue 44's
baseline): a study of --trials finished trials written by
bench/gen_study.py twice, as `train sweep` writes its records and through
Optuna itself, each read --rounds times by each reader; the medians of the
wall time and of the reader's own peak RSS (wait4).

  report_scale.py [--train target/release/train] [--trials 28000] [--rounds 3] [--plot-trials 50000]
                  [--postgres]

With --postgres, the same three readers read a study of --trials trials in
a throwaway PostgreSQL (scripts/postgres/cluster.sh) in Optuna's own
tables: Optuna itself copies a generated study of --trials / 32 trials in
(`copy_study` into its RDBStorage; it writes about 10 trials a second,
too slow for all), then SQL doubles every trial's rows five times, each
copy renumbered (trial ids and numbers after the last).

Then the whole `--report` of a sweep directory (the table, best_config.yaml
and objective.png, drawn as shaded cells from 2,000 trials on) holding a
generated study of --plot-trials trials (0: left out). Optuna's own plot is
not timed beside it: its history plot needs matplotlib or plotly, and most
of its time would be load_study's, measured above.

Results: bench/results/report_scale.{csv,md}.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import command_line, generated_space, generated_sweep, load_note, measured, stamp, write_results

HERE = os.path.dirname(os.path.abspath(__file__))

LOAD = """import optuna, sys
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = sys.argv[1]
if "://" not in storage:  # A journal file, else a database URL.
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage))
print(len(optuna.load_study(study_name="s", storage=storage).trials))
"""


COPY = """import optuna, sys
optuna.logging.set_verbosity(optuna.logging.WARNING)
optuna.copy_study(from_study_name="s", to_storage=sys.argv[2], from_storage=optuna.storages.JournalStorage(
    optuna.storages.journal.JournalFileBackend(sys.argv[1])))
"""

PLOTTED = "train sweep --report DIR (with objective.png)"

def plotted(a, train, d):
    """The whole --report of a sweep directory on a generated study."""
    s = os.path.join(d, "plot")
    os.makedirs(s)
    journal = generated_sweep(train, a.python, s, generated_space(), 'print(\'{"val_loss": 1.0}\')\n', a.plot_trials,
                              interrupted=0.02)
    runs = [measured([train, "sweep", "--report", os.path.join(s, "s"), "--format", "json"])
            for _ in range(a.rounds)]
    if not os.path.exists(os.path.join(s, "s", "objective.png")):
        sys.exit("report_scale: --report drew no objective.png")
    return {
        "written_by": "train sweep",
        "journal_mib": round(os.path.getsize(journal) / 2**20, 1),
        "reader": PLOTTED,
        "seconds": round(statistics.median(r[0] for r in runs) / 1000, 2),
        "peak_rss_mib": round(statistics.median(r[1] for r in runs)),
    }


def timed(a, written_by, mib, readers, env=None):
    """Each reader's median wall time and peak RSS over --rounds runs."""
    rows = []
    for reader, cmd in readers:
        runs = [measured(cmd, env) for _ in range(a.rounds)]
        rows.append({
            "written_by": written_by,
            "journal_mib": mib,
            "reader": reader,
            "seconds": round(statistics.median(r[0] for r in runs) / 1000, 2),
            "peak_rss_mib": round(statistics.median(r[1] for r in runs)),
        })
        print(rows[-1], flush=True)
    return rows


DOUBLINGS = 5


def doubled(pg, db):
    """Every trial's rows in each table that has a trial_id, once more,
    with the trial ids and numbers after the last (the serial ids of the
    other tables drawn afresh)."""
    tables = pg.sql(db, "SELECT table_name FROM information_schema.columns "
                        "WHERE column_name = 'trial_id' AND table_schema = 'public'").split()
    sql = ["SELECT max(trial_id) AS id, max(number) + 1 AS n FROM trials \\gset"]
    for t in ["trials"] + sorted(set(tables) - {"trials"}):
        cols = pg.sql(db, f"SELECT column_name FROM information_schema.columns WHERE table_name = '{t}' "
                          "AND (column_name = 'trial_id' OR column_default IS NULL OR column_default NOT LIKE 'nextval%') "
                          "ORDER BY ordinal_position").split()
        picked = ", ".join({"trial_id": "trial_id + :id", "number": "number + :n"}.get(c, c) for c in cols)
        sql.append(f"INSERT INTO {t} ({', '.join(cols)}) SELECT {picked} FROM {t};")
    sql.append("SELECT setval('trials_trial_id_seq', (SELECT max(trial_id) FROM trials));")
    pg.sql_script(db, "\n".join(sql))


def postgres(a, train, d):
    """A study of --trials trials in a throwaway PostgreSQL, read there by
    each reader."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts", "postgres"))
    from pgcluster import Cluster
    os.chmod(d, 0o755)  # The server runs as the postgres user.
    pg = Cluster(os.path.join(d, "pg"))
    try:
        url = pg.new_db("scale")
        env = {"PGPASSFILE": pg.passfile}
        start = time.perf_counter()
        journal = os.path.join(d, "first.log")
        subprocess.run([a.python, os.path.join(HERE, "gen_study.py"), "--trials", str(a.trials >> DOUBLINGS),
                        "--out", journal, "--optuna"], check=True)
        subprocess.run([a.python, "-c", COPY, journal, Cluster.sqlalchemy(url)], check=True,
                       env={**os.environ, **env})
        for _ in range(DOUBLINGS):
            doubled(pg, "scale")
        count = pg.sql("scale", "SELECT count(DISTINCT number) FROM trials").strip()
        if int(count) != a.trials >> DOUBLINGS << DOUBLINGS:
            sys.exit(f"report_scale: {count} trials in PostgreSQL, not {a.trials >> DOUBLINGS << DOUBLINGS}")
        print(f"report_scale: {count} trials in PostgreSQL in {time.perf_counter() - start:.0f} s", flush=True)
        return timed(a, "Optuna, in PostgreSQL", "-", [
            ("train sweep --report (json)",
             [train, "sweep", "--report", "--storage", url, "--study", "s", "--format", "json"]),
            ("train sweep --status", [train, "sweep", "--status", "--storage", url, "--study", "s"]),
            ("Optuna load_study().trials", [a.python, "-c", LOAD, Cluster.sqlalchemy(url)]),
        ], env)
    finally:
        pg.down()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="target/release/train")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--trials", type=int, default=28000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--plot-trials", type=int, default=50000)
    ap.add_argument("--postgres", action="store_true", help="read the study Optuna wrote in PostgreSQL too")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    train = os.path.abspath(a.train)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for written_by, flags in [("train sweep", []), ("Optuna", ["--optuna"])]:
            path = os.path.join(d, f"{len(rows)}.log")
            subprocess.run([a.python, os.path.join(HERE, "gen_study.py"), "--trials", str(a.trials), "--out", path]
                           + flags, check=True)
            rows += timed(a, written_by, round(os.path.getsize(path) / 2**20, 1), [
                ("train sweep --report (json)", [train, "sweep", "--report", path, "--format", "json"]),
                ("train sweep --status", [train, "sweep", "--status", path]),
                ("Optuna load_study().trials", [a.python, "-c", LOAD, path]),
            ])
        if a.postgres:
            rows += postgres(a, train, d)
        if a.plot_trials:
            rows.append(plotted(a, train, d))
            print(rows[-1], flush=True)
    lines = [
        f"# `--report` and `--status` of a {a.trials}-trial study against Optuna's reader",
        "",
        f"{stamp()}; `{command_line()}`; {load_note()}; medians of {a.rounds} rounds.",
        "",
        "| written by | journal MiB | reader | seconds | peak RSS MiB |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(str(r[k]) for k in r) + " |" for r in rows]
    lines.append("")
    for written_by in dict.fromkeys(r["written_by"] for r in rows if r["reader"] != PLOTTED):
        mine = [r for r in rows if r["written_by"] == written_by and r["reader"] != PLOTTED]
        optuna = next(r for r in mine if r["reader"].startswith("Optuna"))
        for r in mine:
            if r is not optuna:
                lines.append(f"- Written by {written_by}: {r['reader']} {optuna['seconds'] / r['seconds']:.1f}x "
                             f"faster than Optuna's reader, {r['peak_rss_mib'] / optuna['peak_rss_mib']:.2f}x its memory.")
    for r in rows:
        if r["reader"] == PLOTTED:
            lines.append(f"- The last row: the whole `--report` of a sweep directory of {a.plot_trials} generated "
                         f"trials, objective.png included (shaded cells from 2,000 trials on): {r['seconds']} s.")
    write_results(a.out, "report_scale", rows, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
