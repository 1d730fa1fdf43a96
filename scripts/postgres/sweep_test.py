#!/usr/bin/env python3
"""`just test-postgres`: sweeps whose truth is a real PostgreSQL server
(Debian's, started by scripts/postgres/cluster.sh as a throwaway cluster on
127.0.0.1 and removed at the end), checked with Optuna's own RDBStorage,
optuna-dashboard's server and pg_dump. Each check prints PASS or the reason
it failed; the script exits 1 if any failed. Skips (exit 0, with the reason)
only where PostgreSQL cannot be installed.

  schema      pg_dump --schema-only of a database Optuna made and of one
              `train sweep` made are the same; a database Optuna made (with
              its own study) is joined by the very URL Optuna took
              (postgresql+psycopg2://; postgresql+psycopg:// too); schema
              13 is refused by name
  access      a wrong password, a database that does not exist, a role with
              no CREATE right: exit 2 before any trial, the password never
              printed; trials do not inherit PGPASSWORD; no file the sweep
              writes holds the password
  workers     --trials N on 4 `train sweep` workers (separate --out folders)
              and one Optuna worker (study.optimize) on one study, workers
              SIGKILLed at random moments (some restarted with the same
              --out, the others left dead); optuna-dashboard's server lists
              the trials while they run; at the end every number once, none
              RUNNING, N of ours drawn, Optuna's own trials all there, and
              Optuna and `--report` agree
  restart     the database stopped and started again mid-sweep: the workers
              wait and finish, every trial once; a database away longer than
              --db-patience ends a worker with exit 6
  same        one seeded sweep on the journal and on the database: the same
              `--report`
  generated   bench/gen_study.py --postgres (the scale benchmarks' studies)
              adds 300 trials to a sweep's study: Optuna loads them, every
              number once, and `--report` reads them as Optuna does
  between     a sweep while an Optuna worker adds a trial a second to
              another study in the same database, so that the other study's
              trial ids fall between ours: `--report` reads ours as Optuna
              does (no trial of the other study, none missing)
  checkpoint  a sweep resumed on top of 2,500 generated trials leaves
              DIR/database.checkpoint; `--report DIR` reads from it what it
              reads without it, a driver goes on from it, and after a
              finished trial's state is changed by hand the checkpoint is
              passed over (`--report` reads the change, as Optuna does)
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from pgcluster import Cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INSTANT = os.path.join(ROOT, "scripts", "postgres", "instant.py")
SPACE = """program: {program}
method: {method}
metric: {{name: val_loss, goal: minimize}}
parameters:
  x: {{distribution: uniform, min: -5, max: 5}}
  y: {{distribution: int_uniform, min: 0, max: 10}}
"""
FAILED = []


def say(*a):
    print("test-postgres:", *a, file=sys.stderr, flush=True)


def check(name, ok, why=""):
    if ok:
        say(f"PASS {name}")
    else:
        say(f"FAIL {name}: {why}")
        FAILED.append(name)


class Env:
    def __init__(self, args, pg, tmp):
        self.train, self.python, self.pg, self.tmp = args.train, args.python, pg, tmp

    def env(self, **extra):
        e = dict(os.environ, PGPASSFILE=self.pg.passfile)
        e.pop("PGPASSWORD", None)
        e.update(extra)
        return e

    def space(self, name, method="random", run_cap=None, sleep=None):
        path = os.path.join(self.tmp, f"{name}.yaml")
        text = SPACE.format(program=INSTANT, method=method)
        if sleep:
            text += f"  sleep: {{value: {sleep}}}\n"
        if run_cap:
            text += f"run_cap: {run_cap}\n"
        with open(path, "w") as f:
            f.write(text)
        return path

    def sweep(self, *args, env=None, **kw):
        return subprocess.run([self.train, "sweep", *args], env=env or self.env(), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)

    def start(self, *args, log, env=None):
        return subprocess.Popen([self.train, "sweep", *args], env=env or self.env(), text=True,
                                stdout=subprocess.DEVNULL, stderr=open(log, "a"))

    def optuna(self, script, *args):
        out = subprocess.run([self.python, "-c", script, *args], env=self.env(), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if out.returncode != 0:
            raise RuntimeError(f"python: {out.stderr[-2000:]}")
        return json.loads(out.stdout)


TRIALS = """
import json, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.load_study(study_name=sys.argv[2], storage=sys.argv[1])
print(json.dumps([{"number": t.number, "state": t.state.name, "value": t.value, "params": t.params,
                   "user_attrs": t.user_attrs, "system_attrs": t.system_attrs} for t in s.trials]))
"""

OPTUNA_WORKER = """
import json, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.load_study(study_name=sys.argv[2], storage=sys.argv[1])
s.optimize(lambda t: (t.suggest_float("x", -5, 5) - 1) ** 2, n_trials=int(sys.argv[3]))
print(json.dumps({"done": int(sys.argv[3])}))
"""


def dump_schema(pg, db):
    out = subprocess.run([os.path.join(pg.bin, "pg_dump"), "--schema-only", "-h", "127.0.0.1", "-p", pg.port,
                          "-U", "sweeper", db], env=dict(os.environ, PGPASSFILE=pg.passfile),
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    # pg_dump's \\restrict key is random per run.
    return re.sub(r"^\\(un)?restrict .*$", "", out, flags=re.M)


def test_schema(e):
    pg = e.pg
    theirs, ours = pg.new_db("optuna_made"), pg.new_db("ours_made")
    e.optuna("""
import json, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.create_study(study_name="theirs", storage=sys.argv[1])
s.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
print("{}")
""", pg.sqlalchemy(theirs))
    space = e.space("schema", method="grid")
    with open(space, "w") as f:
        f.write(SPACE.format(program=INSTANT, method="grid").replace(
            "x: {distribution: uniform, min: -5, max: 5}", "x: {values: [0.5, 1.5]}").replace(
            "y: {distribution: int_uniform, min: 0, max: 10}", "y: {value: 1}"))
    out = e.sweep("--space", space, "--storage", ours, "--out", os.path.join(e.tmp, "schema-ours"))
    check("schema: a sweep on an empty database", out.returncode == 0, out.stderr[-1500:])
    a, b = dump_schema(pg, "optuna_made"), dump_schema(pg, "ours_made")
    check("schema: pg_dump --schema-only of Optuna's and ours are the same", a == b,
          "\n".join(l for l in __import__("difflib").unified_diff(a.splitlines(), b.splitlines(), lineterm=""))[:3000])
    # The URL Optuna was given, as it was given (postgresql+psycopg2://).
    out = e.sweep("--space", space, "--storage", pg.sqlalchemy(theirs), "--study", "ours",
                  "--out", os.path.join(e.tmp, "schema-join"))
    check("schema: a database Optuna made is joined, by the URL Optuna took (postgresql+psycopg2://)",
          out.returncode == 0 and "postgresql+psycopg2://" in out.stderr, out.stderr[-1500:])
    psycopg3 = theirs.replace("postgresql://", "postgresql+psycopg://", 1)
    out = e.sweep("--status", "--storage", psycopg3, "--study", "ours")
    check("schema: postgresql+psycopg:// names the same database", out.returncode == 0 and "COMPLETE 2" in out.stdout,
          (out.returncode, out.stdout[-500:], out.stderr[-500:]))
    names = e.optuna("""
import json, sys, optuna
print(json.dumps(sorted((s.study_name, s.n_trials) for s in optuna.get_all_study_summaries(storage=sys.argv[1]))))
""", pg.sqlalchemy(theirs))
    check("schema: Optuna reads both studies", names == [["ours", 2], ["theirs", 3]], names)
    out = e.sweep("--report", "--storage", theirs, "--study", "theirs", "--format", "json")
    rows = json.loads(out.stdout)["trials"] if out.returncode == 0 else []
    check("schema: --report of a study Optuna ran (no sweep settings): its trials, the absence said",
          len(rows) == 3 and all(r["state"] == "COMPLETE" for r in rows)
          and "was not run by `train sweep`" in out.stderr, (out.returncode, out.stderr[-800:]))
    bumped = pg.new_db("bumped")
    e.optuna("import optuna, sys; optuna.storages.RDBStorage(sys.argv[1]); print('{}')", pg.sqlalchemy(bumped))
    pg.sql("bumped", "UPDATE version_info SET schema_version = 13")
    out = e.sweep("--space", space, "--storage", bumped, "--out", os.path.join(e.tmp, "schema-bumped"))
    check("schema: schema 13 is refused by name, exit 2",
          out.returncode == 2 and "schema 13" in out.stderr, (out.returncode, out.stderr[-800:]))


def test_access(e):
    pg = e.pg
    space = e.space("access", run_cap=3)
    host = pg.url.split("@", 1)[1].rsplit("/", 1)[0]
    bad = f"postgresql://sweeper:wrong-{pg.password[:4]}@{host}/sweeps"
    out = e.sweep("--space", space, "--storage", bad, "--out", os.path.join(e.tmp, "access-1"),
                  env=e.env(PGPASSFILE="/nonexistent"))
    check("access: a wrong password exits 2, before any trial, the password not printed",
          out.returncode == 2 and "password authentication failed" in out.stderr
          and f"wrong-{pg.password[:4]}" not in out.stderr + out.stdout
          and not os.path.exists(os.path.join(e.tmp, "access-1", "trials", "0000")),
          (out.returncode, out.stderr[-800:]))
    out = e.sweep("--space", space, "--storage", pg.url.rsplit("/", 1)[0] + "/nosuchdb",
                  "--out", os.path.join(e.tmp, "access-2"))
    check("access: a database that does not exist exits 2", out.returncode == 2 and "nosuchdb" in out.stderr,
          (out.returncode, out.stderr[-800:]))
    locked = pg.new_db("locked", owner="postgres")
    out = e.sweep("--space", space, "--storage", locked, "--out", os.path.join(e.tmp, "access-3"))
    check("access: no right to create Optuna's tables exits 2",
          out.returncode == 2 and "permission denied" in out.stderr, (out.returncode, out.stderr[-800:]))
    for query, code, says in [("sslmode=verify-full&sslrootcert=" + pg.ca, 2, "holds no study yet"),
                              ("sslmode=verify-full", 2, "the server's certificate was refused"),
                              ("sslmode=require", 2, "holds no study yet")]:
        out = e.sweep("--status", "--storage", f"{pg.url}?{query}")
        check(f"access: {query.split('&')[0]}{' with its CA' if 'rootcert' in query else ''}",
              out.returncode == code and says in out.stderr, (out.returncode, out.stderr[-500:]))
    probe = os.path.join(e.tmp, "probe.txt")
    db = pg.new_db("hygiene")
    out_dir = os.path.join(e.tmp, "access-4")
    env = e.env(PGPASSWORD=pg.password, PGPASSFILE="/nonexistent", TG_PROBE_ENV=probe)
    out = e.sweep("--space", space, "--storage", db, "--out", out_dir, "--parallel", "1", env=env)
    seen = open(probe).read().split() if os.path.exists(probe) else []
    check("access: PGPASSWORD works and trials do not inherit it",
          out.returncode == 0 and seen == ["None"] * 3, (out.returncode, seen, out.stderr[-800:]))
    leaked = [os.path.join(d, f) for d, _, fs in os.walk(out_dir) for f in fs
              if pg.password in open(os.path.join(d, f), errors="replace").read()]
    check("access: no file the sweep wrote holds the password", not leaked and pg.password not in out.stderr,
          leaked)


def killer(e, procs, restart, kills, stop_at, log):
    """SIGKILLs random live workers; each of the first `restart` comes back
    with the same --out (a restarted worker settles its dead trials)."""
    rng = random.Random(7)
    done = 0
    while done < kills and time.time() < stop_at:
        time.sleep(rng.uniform(0.5, 2.0))
        live = [i for i, (p, _) in enumerate(procs) if p.poll() is None]
        if not live:
            break
        i = rng.choice(live)
        p, args = procs[i]
        p.send_signal(signal.SIGKILL)
        p.wait()
        done += 1
        if done <= restart:
            time.sleep(0.3)
            procs[i] = (e.start(*args, log=log), args)
    return done


def test_workers(e, trials, kills):
    pg = e.pg
    db = pg.new_db("workers")
    space = e.space("workers", run_cap=trials)
    log = os.path.join(e.tmp, "workers.log")
    common = ["--storage", db, "--study", "big", "--parallel", "1", "--heartbeat-grace", "4"]
    first = ["--space", space, "--out", os.path.join(e.tmp, "w0"), *common]
    procs = [(e.start(*first, log=log), ["--worker", "--out", os.path.join(e.tmp, "w0"), *common])]
    # The others join once the first has made the study.
    deadline = time.time() + 60
    while time.time() < deadline and not _has_study(pg, "workers", "big"):
        time.sleep(0.2)
    for k in range(1, 4):
        args = ["--worker", "--out", os.path.join(e.tmp, f"w{k}"), *common]
        procs.append((e.start(*args, log=log), args))
    optuna_worker = subprocess.Popen([e.python, "-c", OPTUNA_WORKER, pg.sqlalchemy(db), "big", "30"],
                                     env=e.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dash = dashboard(e, pg.sqlalchemy(db))
    seen_live = None
    try:
        time.sleep(2)
        seen_live = dash_trials(dash[1])
        tls = pg.sql("postgres", "SELECT s.ssl, count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                                 "WHERE a.application_name = 'train sweep' GROUP BY s.ssl").split()
        done = killer(e, procs, restart=kills - 1, kills=kills, stop_at=time.time() + 600, log=log)
        codes = []
        for p, _ in procs:
            try:
                codes.append(p.wait(timeout=600))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append("hung")
        o_out, o_err = optuna_worker.communicate(timeout=600)
        seen_end = dash_trials(dash[1])
    finally:
        dash[0].terminate()
        dash[0].wait()
    check("workers: the Optuna worker finished", optuna_worker.returncode == 0, o_err[-1500:])
    check(f"workers: {done} SIGKILLs landed", done == kills, done)
    check("workers: their connections are encrypted (TLS, sslmode prefer by default)",
          len(tls) == 1 and tls[0].startswith("t|"), tls)
    check("workers: the live workers end with exit 0", all(c in (0, -9) for c in codes) and 0 in codes,
          (codes, open(log).read()[-3000:]))
    got = e.optuna(TRIALS, pg.sqlalchemy(db), "big")
    numbers = [t["number"] for t in got]
    ours = [t for t in got if "trainguard:claim" in t["system_attrs"]]
    theirs = [t for t in got if "trainguard:claim" not in t["system_attrs"]]
    drawn = [t for t in ours if "retried_from" not in t["user_attrs"]]
    check("workers: every number once", numbers == list(range(len(got))), numbers)
    check("workers: none RUNNING", all(t["state"] != "RUNNING" for t in got),
          [t["number"] for t in got if t["state"] == "RUNNING"])
    check(f"workers: {trials} of ours drawn, each COMPLETE once (re-runs of killed trials apart)",
          len(drawn) == trials and all(_settled(t, ours) for t in drawn),
          (len(drawn), [t["number"] for t in drawn if not _settled(t, ours)][:20]))
    cut = [t for t in ours if t["user_attrs"].get("error_class") == "interrupted"]
    stale = [t for t in cut if "heartbeat" in t["user_attrs"].get("error_message", "")]
    say(f"workers: {len(got)} trials, {len(cut)} interrupted by the kills ({len(stale)} reclaimed by heartbeat)")
    check("workers: the kills cut trials short, and each ran again", cut and all(
        any(r["user_attrs"].get("retried_from") == t["user_attrs"].get("retried_from", t["number"])
            and r["state"] == "COMPLETE" for r in ours) for t in cut), len(cut))
    check("workers: the Optuna worker's 30 trials are there, COMPLETE",
          len(theirs) == 30 and all(t["state"] == "COMPLETE" for t in theirs), len(theirs))
    check("workers: optuna-dashboard's server lists the trials while they run and at the end",
          seen_live is not None and 0 < seen_live and seen_end == len(got), (seen_live, seen_end, len(got)))
    out = e.sweep("--report", "--storage", db, "--study", "big", "--format", "json")
    report = json.loads(out.stdout) if out.returncode == 0 else {"trials": []}
    agree = [(r["number"], r["state"], r["value"]) for r in report["trials"]] == \
        [(t["number"], t["state"], t["value"]) for t in got]
    check("workers: --report agrees with Optuna", out.returncode == 0 and agree, out.stderr[-800:])
    return len(got)


def _settled(t, ours):
    """A drawn trial COMPLETE, or interrupted with a COMPLETE re-run."""
    if t["state"] == "COMPLETE":
        return True
    reruns = [r for r in ours if r["user_attrs"].get("retried_from") == t["number"]]
    return t["user_attrs"].get("error_class") == "interrupted" and \
        sum(r["state"] == "COMPLETE" for r in reruns) == 1


def _has_trials(pg, db, study):
    return pg.sql(db, "SELECT count(*) FROM trials t JOIN studies s ON s.study_id = t.study_id "
                      f"WHERE s.study_name = '{study}'").strip() not in ("", "0")


def _has_study(pg, db, name):
    if pg.sql(db, "SELECT to_regclass('studies') IS NOT NULL").strip() != "t":
        return False
    return pg.sql(db, f"SELECT count(*) FROM studies WHERE study_name = '{name}'").strip() == "1"


def dashboard(e, url):
    port = 28080 + random.Random().randrange(500)
    p = subprocess.Popen([os.path.join(os.path.dirname(e.python), "optuna-dashboard"), url, "--port", str(port),
                          "--host", "127.0.0.1"], env=e.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p, f"http://127.0.0.1:{port}"


def dash_trials(base):
    """The trials optuna-dashboard's API lists for the study (None: it did
    not answer in 30 s)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            studies = json.load(urllib.request.urlopen(f"{base}/api/studies", timeout=5))["study_summaries"]
            sid = [s["study_id"] for s in studies if s["study_name"] == "big"][0]
            return len(json.load(urllib.request.urlopen(f"{base}/api/studies/{sid}", timeout=5))["trials"])
        except Exception:
            time.sleep(0.5)
    return None


def test_restart(e, restarts, cap):
    pg = e.pg
    db = pg.new_db("restart")
    cap = cap or 60 * restarts
    space = e.space("restart", run_cap=cap)
    log = os.path.join(e.tmp, "restart.log")
    common = ["--storage", db, "--study", "r", "--parallel", "1"]
    a = e.start("--space", space, "--out", os.path.join(e.tmp, "r0"), *common, log=log)
    time.sleep(2)
    b = e.start("--worker", "--out", os.path.join(e.tmp, "r1"), *common, log=log)
    rng = random.Random(11)
    for _ in range(restarts):
        time.sleep(rng.uniform(1.0, 4.0))
        pg.stop()
        time.sleep(rng.uniform(1.0, 5.0))
        pg.start()
    codes = [a.wait(timeout=120 * restarts + 180), b.wait(timeout=120 * restarts + 180)]
    text = open(log).read()
    check(f"restart: both workers waited for the database ({restarts} restart(s)) and finished with exit 0",
          codes == [0, 0] and text.count("is back") >= restarts, (codes, text.count("is back"), text[-2500:]))
    got = e.optuna(TRIALS, pg.sqlalchemy(db), "r")
    drawn = [t for t in got if "retried_from" not in t["user_attrs"]]
    say(f"restart: {len(got)} trials, {len(got) - len(drawn)} re-run(s)")
    check(f"restart: every number once, none RUNNING, {cap} drawn",
          [t["number"] for t in got] == list(range(len(got))) and len(drawn) == cap
          and all(t["state"] != "RUNNING" for t in got), (len(got), len(drawn)))
    # Away longer than --db-patience: exit 6, nothing lost.
    # Trials of 0.2 s, so that the sweep outlasts the stop in any build.
    space2 = e.space("patience", run_cap=40, sleep=0.2)
    c = e.start("--space", space2, "--out", os.path.join(e.tmp, "r3"), "--storage", db, "--study", "p",
                "--db-patience", "2", "--parallel", "1", log=log)
    deadline = time.time() + 60
    while time.time() < deadline and not _has_trials(pg, "restart", "p"):
        time.sleep(0.1)
    pg.stop()
    code = c.wait(timeout=120)
    pg.start()
    check("restart: a database away past --db-patience ends the worker with exit 6", code == 6,
          (code, open(log).read()[-1500:]))
    out = e.sweep("--resume", "--out", os.path.join(e.tmp, "r3"), "--storage", db, "--study", "p")
    got = e.optuna(TRIALS, pg.sqlalchemy(db), "p")
    drawn = [t for t in got if "retried_from" not in t["user_attrs"]]
    check("restart: --resume after exit 6 finishes the sweep, every trial once",
          out.returncode == 0 and len(drawn) == 40 and all(t["state"] != "RUNNING" for t in got),
          (out.returncode, len(drawn), out.stderr[-800:]))


def report_rows(out):
    """A `--report --format json`'s trials as number, state, params, value."""
    return [(t["number"], t["state"], t["params"], t["value"]) for t in json.loads(out.stdout)["trials"]]


def optuna_rows(trials):
    """The same of the trials Optuna loaded (TRIALS)."""
    return [(t["number"], t["state"], t["params"], t["value"]) for t in trials]


def test_same(e):
    db = e.pg.new_db("same")
    space = e.space("same", run_cap=12)
    j = os.path.join(e.tmp, "same-journal")
    a = e.sweep("--space", space, "--out", j, "--parallel", "1", "--seed", "3")
    b = e.sweep("--space", space, "--storage", db, "--out", os.path.join(e.tmp, "same-db"), "--parallel", "1",
                "--seed", "3")
    ra = e.sweep("--report", j, "--format", "json")
    rb = e.sweep("--report", "--storage", db, "--format", "json")
    ok = all(o.returncode == 0 for o in (a, b, ra, rb))
    check("same: one seeded sweep, the same --report on the journal and on the database",
          ok and report_rows(ra) == report_rows(rb) and len(report_rows(ra)) == 12,
          (a.stderr[-500:], b.stderr[-500:], rb.stderr[-500:]))


SLOW_WORKER = """
import sys, time, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.create_study(study_name=sys.argv[2], storage=sys.argv[1])
def f(t):
    time.sleep(1)
    return t.suggest_float("x", -5, 5) ** 2
s.optimize(f, n_trials=int(sys.argv[3]))
"""


def test_generated(e):
    db = e.pg.new_db("generated")
    space = e.space("generated")
    a = e.sweep("--space", space, "--storage", db, "--study", "g", "--out", os.path.join(e.tmp, "generated"),
                "--trials", "1")
    study = e.pg.sql("generated", "SELECT study_id FROM studies WHERE study_name = 'g'").strip()
    script = os.path.join(e.tmp, "generated.sql")
    subprocess.run([e.python, os.path.join(ROOT, "bench", "gen_study.py"), "--trials", "300", "--out", script,
                    "--postgres", study, "--interrupted", "0"], check=True, stderr=subprocess.DEVNULL)
    with open(script) as f:
        e.pg.sql_script("generated", f.read())
    theirs = e.optuna(TRIALS, e.pg.sqlalchemy(db), "g")
    report = e.sweep("--report", "--storage", db, "--study", "g", "--format", "json")
    ok = a.returncode == 0 and report.returncode == 0
    check("generated: 300 trials copied in, every number once, ours by their claim, --report reads them as Optuna",
          ok and [t["number"] for t in theirs] == list(range(301))
          and all("trainguard:claim" in t["system_attrs"] for t in theirs)
          and report_rows(report) == optuna_rows(theirs),
          (a.stderr[-500:], report.stderr[-500:], len(theirs)))


def test_between(e):
    db = e.pg.new_db("between")
    url = e.pg.sqlalchemy(db)
    slow = subprocess.Popen([e.python, "-c", SLOW_WORKER, url, "other", "60"], env=e.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    def others():  # The other study's trials so far (0 before Optuna made its tables).
        if e.pg.sql("between", "SELECT to_regclass('trials') IS NULL").strip() == "t":
            return 0
        return int(e.pg.sql("between", "SELECT count(*) FROM trials").strip())

    try:
        deadline = time.time() + 60
        while time.time() < deadline and others() == 0:
            time.sleep(0.2)
        space = e.space("between", run_cap=12, sleep=0.2)
        a = e.sweep("--space", space, "--storage", db, "--study", "ours", "--out", os.path.join(e.tmp, "between"),
                    "--parallel", "1")
    finally:
        slow.kill()
        slow.wait()
    report = e.sweep("--report", "--storage", db, "--study", "ours", "--format", "json")
    ids = e.pg.sql("between", "SELECT min(t.trial_id), max(t.trial_id), count(*) FROM trials t "
                              "JOIN studies s USING (study_id) WHERE s.study_name = 'ours'").strip().split("|")
    say(f"between: our trials' ids {ids[0]}..{ids[1]}, {ids[2]} of them (the rest the other study's)")
    theirs = e.optuna(TRIALS, url, "ours")
    ok = a.returncode == 0 and report.returncode == 0
    rows = report_rows(report) if ok else []
    check("between: another study's trials among ours; --report reads ours as Optuna does",
          ok and len(rows) == 12 and rows == optuna_rows(theirs)
          and int(ids[1]) - int(ids[0]) + 1 > 12,
          (a.stderr[-500:], report.stderr[-500:], ids))


def test_checkpoint(e):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import benchlib

    d = os.path.join(e.tmp, "kept")
    os.makedirs(d)
    url = benchlib.generated_db_sweep(e.train, e.python, d, benchlib.generated_space(), benchlib.GENERATED_TRIAL, 2500, e.pg, "kept", total=2503)
    run = lambda *a: subprocess.run([e.train, "sweep", *a], cwd=d, env=e.env(), text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    resumed = run("--interpreter", e.python, "--resume", "s")
    kept = os.path.join(d, "s", "database.checkpoint")
    header = {}
    if os.path.exists(kept):
        with open(kept) as f:
            header = json.loads(f.readline())
    report = lambda: run("--report", "s", "--format", "json")
    a = report()
    os.rename(kept, kept + ".aside")
    b = report()
    os.rename(kept + ".aside", kept)
    ok = resumed.returncode == 0 and a.returncode == 0 and b.returncode == 0
    check("checkpoint: a sweep of 2,503 trials leaves one; --report reads the same from it as without it",
          ok and header.get("study_name") == "s" and len(report_rows(a)) == 2503 and report_rows(a) == report_rows(b),
          (resumed.stderr[-800:], a.stderr[-500:], header.get("ids")))
    # It is what was read: a value changed in it (and only there) shows.
    with open(kept) as f:
        lines = f.readlines()
    n = next(i for i, l in enumerate(lines[2:]) if '"state":1,' in l)
    lines[2 + n] = re.sub(r'"values":\[[^]]*\]', '"values":[42.0]', lines[2 + n])
    with open(kept + ".marked", "w") as f:
        f.writelines(lines)
    os.rename(kept, kept + ".aside")
    os.rename(kept + ".marked", kept)
    marked = report()
    os.rename(kept + ".aside", kept)
    check("checkpoint: --report DIR reads the trials from it",
          marked.returncode == 0 and report_rows(marked)[n][3] == 42.0 and report_rows(a)[n][3] != 42.0,
          (marked.stderr[-500:], n))
    # A driver goes on from it: the next trial is numbered after all.
    with open(os.path.join(d, "s", "sweep.yaml")) as f:
        text = f.read()
    with open(os.path.join(d, "s", "sweep.yaml"), "w") as f:
        f.write(text.replace("\ntrials: 2503\n", "\ntrials: 2504\n"))
    more = run("--interpreter", e.python, "--resume", "s")
    c = report()
    check("checkpoint: --resume from it runs the next trial, number 2503",
          more.returncode == 0 and c.returncode == 0 and [r[0] for r in report_rows(c)] == list(range(2504)),
          (more.stderr[-800:], c.stderr[-300:]))
    # A finished trial changed by hand: the digest differs, the rows are read.
    e.pg.sql("kept", "UPDATE trials SET state = 'FAIL' WHERE number = 7 AND study_id = "
                     "(SELECT study_id FROM studies WHERE study_name = 's')")
    changed = report()
    theirs = e.optuna(TRIALS, e.pg.sqlalchemy(url), "s")
    rows = report_rows(changed) if changed.returncode == 0 else []
    check("checkpoint: a finished trial changed by hand is read as Optuna reads it (the checkpoint passed over)",
          len(rows) == 2504 and rows[7][1] == "FAIL" and rows == optuna_rows(theirs),
          (changed.stderr[-500:], rows[7] if rows else None))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", default=os.path.join(ROOT, "target", "debug", "train"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--kills", type=int, default=8)
    ap.add_argument("--restarts", type=int, default=1)
    ap.add_argument("--restart-trials", type=int, default=None,
                    help="the restarted sweep's trials [default: 60 a restart]; enough to outlast the restarts")
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    # Some checks run them from a sweep's folder.
    args.train, args.python = os.path.abspath(args.train), os.path.abspath(args.python)
    tmp = tempfile.mkdtemp(prefix="trainguard-pg.")
    os.chmod(tmp, 0o755)
    state = os.path.join(tmp, "pg")
    try:
        pg = Cluster(state)
    except subprocess.CalledProcessError as err:
        if err.returncode == 3:
            say("SKIP: PostgreSQL is not installed and could not be installed here (see above)")
            return 0
        say(f"FAIL: the throwaway PostgreSQL did not start ({err})")
        return 1
    e = Env(args, pg, tmp)
    try:
        tests = {"schema": test_schema, "access": test_access,
                 "workers": lambda e: test_workers(e, args.trials, args.kills),
                 "restart": lambda e: test_restart(e, args.restarts, args.restart_trials), "same": test_same,
                 "generated": test_generated, "between": test_between, "checkpoint": test_checkpoint}
        for name, fn in tests.items():
            if args.only is None or name in args.only:
                t0 = time.time()
                try:
                    fn(e)
                except Exception as err:  # a check that could not run is a failure
                    check(f"{name}: ran", False, repr(err))
                say(f"{name}: {time.time() - t0:.1f} s")
    finally:
        pg.down()
    if FAILED:
        say(f"{len(FAILED)} check(s) failed: {', '.join(FAILED)} (files kept in {tmp})")
        return 1
    subprocess.run(["rm", "-rf", tmp])
    say("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
