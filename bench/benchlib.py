"""What the benchmarks share: the result files' date and command, running a
child with its own peak memory, and asking cfgcheck about a config."""

import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

# The estimate's GPU-only line (common/src/estimate.rs), left out wherever the
# estimate is compared with something that has no CUDA context.
CONTEXT_LINE = "CUDA context and workspaces"


def stamp():
    """The date line of a result table, in UTC."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def shown(path):
    """A path as a reader would type it: relative when under the working directory."""
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return shlex.quote(path if rel.startswith("..") else rel)


def command_line():
    """This run's command, to print beside its results."""
    return "python " + " ".join(shown(a) for a in sys.argv)


def load_note():
    """The machine's load when a benchmark starts, and this process's CPU
    share setting, for the results: the 1-minute load average, and with
    Linux's autogroup scheduling (where nice only counts inside a session)
    this session's autogroup nice value."""
    note = f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    try:
        with open("/proc/self/autogroup") as f:
            group = f.read().split()
        if group[-2] == "nice" and group[-1] != "0":
            note += f", run in its own autogroup at nice {group[-1]}"
    except (OSError, IndexError):
        pass
    return note


def first_line(text, width=160):
    """An error's first line, clipped (empty messages included)."""
    return (str(text).strip().splitlines() or [""])[0][:width]


def measured(cmd, env=None):
    """Run cmd with stdin closed (and `env` added to this environment): (wall
    ms, the child's own peak RSS in MiB, its stdout). The RSS comes from
    wait4, so it is this child's alone, not the most of all children so far.
    A non-zero exit ends the benchmark with the child's stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        full_env = {**os.environ, **env} if env else None
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=full_env)
        _, status, usage = os.wait4(p.pid, 0)
        ms = (time.perf_counter() - start) * 1000.0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            raise SystemExit(f"bench: {' '.join(cmd)} exited {p.returncode}:\n{err.read().decode(errors='replace')}")
        out.seek(0)
        return ms, usage.ru_maxrss / 1024.0, out.read().decode(errors="replace")


def cfgcheck_result(cfgcheck, config):
    """`cfgcheck --format json`'s result for one config (a path, or a dict of
    keys): its "resolved" config and its "estimate" among the rest. Exit 1
    (findings in the config) is a result; anything else ends the benchmark."""
    path = config
    if isinstance(config, dict):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            json.dump(config, f)  # JSON is YAML
        path = f.name
    try:
        done = subprocess.run([cfgcheck, path, "--format", "json"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
    finally:
        if path is not config:
            os.unlink(path)
    if done.returncode not in (0, 1):
        raise SystemExit(f"bench: cfgcheck failed on {config}:\n{done.stderr.strip()}")
    return json.loads(done.stdout)["results"][0]


def estimate_lines(cfgcheck, config):
    """The estimate's lines for one config, as {component: MiB}."""
    return {line["component"]: line["mib"] for line in cfgcheck_result(cfgcheck, config)["estimate"]["lines"]}


# Every trial of a journal's study as Optuna loads it: state, params, value,
# error class, user attributes.
_LOAD_TRIALS = """import json, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(sys.argv[1]))
s = optuna.load_study(study_name=sys.argv[2], storage=storage)
print(json.dumps([{"state": t.state.name, "params": t.params, "value": t.value,
    "class": t.user_attrs.get("error_class"), "user_attrs": t.user_attrs} for t in s.trials]))
"""


def program_sweep(train, python, program, space, flags):
    """`train sweep` of `program` (written as hold.py) over `space` (a
    space.yaml's text) with `flags`, in a fresh directory: (its trials as
    Optuna loads them, its wall seconds). A failed sweep ends the benchmark
    with its stderr."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "hold.py"), "w") as f:
            f.write(program)
        with open(os.path.join(d, "space.yaml"), "w") as f:
            f.write(space)
        cmd = [train, "sweep", "--space", "space.yaml", "--out", "s", "--interpreter", python] + flags
        t0 = time.monotonic()
        run = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if run.returncode != 0:
            sys.exit(f"train sweep failed ({run.returncode}):\n{run.stderr[-3000:]}")
        out = subprocess.run([python, "-c", _LOAD_TRIALS, os.path.join(d, "s", "journal.log"), "s"],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout), wall


# A trial of generated sweeps: a line a second for --seconds, then its
# last (instant where there is no --seconds).
GENERATED_TRIAL = """import json, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
lr, seconds = float(args["lr"]), int(args.get("seconds", 0))
for s in range(1, seconds + 1):
    time.sleep(1)
    print(json.dumps({"epoch": s, "val_loss": lr * 10 + 1.0 / s}), flush=True)
print(json.dumps({"epoch": seconds + 1, "val_loss": lr * 10}), flush=True)
"""


def generated_space(method="random", extra=""):
    """A space whose parameters are bench/gen_study.py's trials' (a sweep
    goes on from a generated study), with `extra` parameter lines."""
    return ("program: trial.py\n"
            f"method: {method}\n"
            "metric: {name: val_loss, goal: minimize}\n"
            "parameters:\n"
            "  lr: {distribution: log_uniform_values, min: 1.0e-5, max: 0.1}\n"
            "  batch_size: {distribution: int_uniform, min: 1, max: 64}\n"
            "  width: {values: [64, 128, 256, 512, 1024]}\n" + extra)


def _first_sweep(train, python, d, space, trial, flags, env=None):
    """`trial` (written as d/trial.py) swept over `space` (d/space.yaml's
    text) and `flags` for one trial, its folders in d/s; returns the
    settings' path and text."""
    with open(os.path.join(d, "trial.py"), "w") as f:
        f.write(trial)
    with open(os.path.join(d, "space.yaml"), "w") as f:
        f.write(space)
    subprocess.run([train, "sweep", "--interpreter", python, *flags, "--space", "space.yaml", "--out", "s",
                    "--trials", "1"], cwd=d, check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    settings = os.path.join(d, "s", "sweep.yaml")
    with open(settings) as f:
        return settings, f.read()


def _gen_study(python, trials, out, *args):
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([python, os.path.join(here, "gen_study.py"), "--trials", str(trials), "--out", out, *args],
                   check=True, stderr=subprocess.DEVNULL)


def _with_total(text, total):
    """Settings' text with the sweep's trial count `total` (it was 1)."""
    return text.replace("\ntrials: 1\n", f"\ntrials: {total}\n")


def generated_sweep(train, python, d, space, trial, trials, flags=(), total=None, interrupted=0.0):
    """A sweep directory (d/s) whose journal holds a study of `trials`
    finished trials that bench/gen_study.py wrote, under the name `train
    sweep` gave it: the sweep is started with one trial of `trial` (a
    Python program, written as d/trial.py) over `space` (its space.yaml's
    text) and `flags`, then its journal replaced; `total` (if given)
    becomes the sweep's trial count, so that a resume runs the rest;
    `interrupted` is the share of generated trials left interrupted.
    Returns the journal's path."""
    settings, text = _first_sweep(train, python, d, space, trial, flags)
    name = next(l.split(":", 1)[1].strip().strip("'\"") for l in text.splitlines() if l.startswith("study_name:"))
    if total is not None:
        with open(settings, "w") as f:
            f.write(_with_total(text, total))
    journal = os.path.join(d, "s", "journal.log")
    _gen_study(python, trials, journal, "--name", name, "--interrupted", str(interrupted))
    return journal


def generated_db_sweep(train, python, d, space, trial, trials, pg, db, flags=(), total=None):
    """generated_sweep's study in a PostgreSQL database instead of a
    journal: database `db` of the scripts/postgres `Cluster` pg, the
    sweep's folders in d/s, the study named s; returns its URL."""
    url = pg.new_db(db)
    env = {**os.environ, "PGPASSFILE": pg.passfile}
    settings, text = _first_sweep(train, python, d, space, trial, [*flags, "--storage", url, "--study", "s"], env)
    script = os.path.join(d, "gen.sql")
    study = pg.sql(db, "SELECT study_id FROM studies WHERE study_name = 's'").strip()
    _gen_study(python, trials, script, "--postgres", study, "--interrupted", "0")
    with open(script) as f:
        pg.sql_script(db, f.read())
    if total is not None:
        # The trial count where --resume DIR reads it and in the database
        # (its settings as JSON text: a newline is backslash-n there).
        with open(settings, "w") as f:
            f.write(_with_total(text, total))
        pg.sql(db, "UPDATE study_system_attributes SET value_json = "
                   f"replace(value_json, '\\ntrials: 1\\n', '\\ntrials: {total}\\n') WHERE key = 'trainguard:settings'")
    return url


def write_results(out, name, rows, text):
    """`rows` as out/NAME.csv and `text` as out/NAME.md; `text` printed."""
    import csv

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(text)
    print(text)
