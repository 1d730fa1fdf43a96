"""Shared helpers of the reliability scripts (scripts/reliability/*.py).

Readers for the run directory's files (safetensors, train-summary/v1,
train-metrics/v1), the Optuna check of a sweep's journal, the machine's
description and the JSON result file every script writes.
"""

import datetime
import json
import os
import platform
import shlex
import struct
import subprocess
import sys
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMP_MARK = ".tmp"  # common/src/files.rs: `.NAME.tmp.EXT` beside the target


def default_train():
    return os.path.join(ROOT, "target", "release", "train")


def env_without_faults():
    env = dict(os.environ)
    env.pop("TRAINGUARD_FAULT", None)
    return env


def read_safetensors(path):
    """(metadata dict, {name: (dtype, shape, bytes)}) of a safetensors file;
    raises ValueError on anything malformed."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: {len(data)} bytes, shorter than the header length")
    n = struct.unpack("<Q", data[:8])[0]
    if 8 + n > len(data):
        raise ValueError(f"{path}: header of {n} bytes past the end ({len(data)})")
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {}) or {}
    body = data[8 + n :]
    tensors = {}
    end_max = 0
    for name, info in header.items():
        start, end = info["data_offsets"]
        if not (0 <= start <= end <= len(body)):
            raise ValueError(f"{path}: {name}: offsets {start}..{end} outside {len(body)} bytes")
        end_max = max(end_max, end)
        tensors[name] = (info["dtype"], tuple(info["shape"]), body[start:end])
    if end_max != len(body):
        raise ValueError(f"{path}: data is {len(body)} bytes, tensors end at {end_max}")
    return meta, tensors


CHECKPOINT_FIELDS = ["schema", "epoch", "adam_steps", "best_epoch", "best_val_loss", "seed", "global_step"]


def check_checkpoint(path):
    """Parses checkpoint.safetensors and its train-checkpoint/v1 metadata."""
    meta, tensors = read_safetensors(path)
    if meta.get("schema") != "train-checkpoint/v1":
        raise ValueError(f"{path}: schema {meta.get('schema')!r}")
    for f in CHECKPOINT_FIELDS:
        if f not in meta:
            raise ValueError(f"{path}: metadata lacks {f}")
    int(meta["epoch"]), int(meta["adam_steps"]), int(meta["best_epoch"]), int(meta["global_step"])
    float(meta["best_val_loss"])
    if not any(k.startswith("optim.m.") for k in tensors):
        raise ValueError(f"{path}: no AdamW moments")
    return meta, tensors


def check_summary(path):
    with open(path) as f:
        s = yaml.safe_load(f)
    if not isinstance(s, dict) or s.get("schema") != "train-summary/v1":
        raise ValueError(f"{path}: not train-summary/v1: {str(s)[:200]}")
    for f in ["status", "stop_reason", "error_class", "config", "device", "parameters",
              "epochs_completed", "resumed_at_epoch", "best", "last", "time_s", "peak_memory",
              "skipped_steps", "configs", "not_applied"]:
        if f not in s:
            raise ValueError(f"{path}: lacks {f}")
    return s


METRICS_HEADER = ("epoch,train_loss,val_loss,lr,seconds,samples_per_s,peak_allocated_mib,"
                  "peak_reserved_mib,skipped_steps,oom_events,micro_batch,mae,rmse,r2,accuracy,macro_f1")


def read_metrics(path):
    """train-metrics/v1 rows as dicts (every line whole, every cell a number
    or empty); raises ValueError otherwise."""
    with open(path) as f:
        text = f.read()
    if not text.endswith("\n"):
        raise ValueError(f"{path}: last line has no newline (torn)")
    lines = text.splitlines()
    if not lines or lines[0] != METRICS_HEADER:
        raise ValueError(f"{path}: header {lines[:1]!r}")
    cols = METRICS_HEADER.split(",")
    rows = []
    for i, line in enumerate(lines[1:], 2):
        cells = line.split(",")
        if len(cells) != len(cols):
            raise ValueError(f"{path}:{i}: {len(cells)} cells, expected {len(cols)}: {line!r}")
        row = {}
        for c, v in zip(cols, cells):
            row[c] = float(v) if v != "" else None
        rows.append(row)
    return rows


def temp_files(run_dir):
    """Temp files of atomic writes in run_dir: {name: (mtime_ns, size)}."""
    out = {}
    try:
        names = os.listdir(run_dir)
    except FileNotFoundError:
        return out
    for n in names:
        if n.startswith(".") and TEMP_MARK in n:
            try:
                st = os.stat(os.path.join(run_dir, n))
                out[n] = (st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                pass
    return out


OPTUNA_SCRIPT = r"""
import json, sys
import optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = sys.argv[1]  # A database's URL, else a journal file.
if "://" not in storage:
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage))
s = optuna.load_study(study_name=sys.argv[2], storage=storage)
print(json.dumps([{"number": t.number, "state": t.state.name, "params": t.params,
    "value": t.value, "user_attrs": t.user_attrs} for t in s.trials]))
"""


def optuna_trials(journal, study, env=None):
    """The trials as Optuna (5.0.0 since issue 22) loads them (optuna.load_study on a
    JournalStorage(JournalFileBackend(journal)), or on a database's
    SQLAlchemy URL given instead), in a fresh interpreter;
    raises RuntimeError when Optuna cannot load the journal."""
    p = subprocess.run([sys.executable, "-c", OPTUNA_SCRIPT, journal, study],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"Optuna could not load {journal}: {p.stderr.strip()[-2000:]}")
    return json.loads(p.stdout)


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"host": platform.node(), "cores": os.cpu_count(), "cpu": cpu, "gpu": None,
            "kernel": platform.release(), "python": platform.python_version()}


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_result(out_dir, name, ok, figures, checks_failed, started):
    res = {
        "schema": "reliability-result/v1",
        "test": name,
        "ok": ok,
        "date": utc_now(),
        "started": started,
        "command": " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
        "machine": machine(),
        "figures": figures,
        "failures": checks_failed[:50],
    }
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.result.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    return path


class Checks:
    """Collects failed checks (a check that fails does not stop the test)."""

    def __init__(self):
        self.failed = []

    def check(self, cond, msg):
        if not cond:
            self.failed.append(msg)
            print(f"CHECK FAILED: {msg}", file=sys.stderr, flush=True)
        return cond


def wait_gone(proc, timeout=30):
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Timer:
    def __init__(self):
        self.t0 = time.monotonic()

    def s(self):
        return time.monotonic() - self.t0


def _start_time(pid):
    """/proc's start time of a live (not zombie) pid, else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            after = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if after[0] == "Z" else int(after[19])


def live_trials(sweep_dir):
    """{trial: pid} of the sweep's trials whose process still lives: the pid
    file's pid with the start time written beside it (so a forked preloaded
    trial, whose /proc environ and cmdline are its server's, is found too,
    and a reused pid is not)."""
    out = {}
    tdir = os.path.join(sweep_dir, "trials")
    try:
        names = os.listdir(tdir)
    except FileNotFoundError:
        return out
    for n in names:
        try:
            with open(os.path.join(tdir, n, "pid")) as f:
                words = f.read().split()
            pid, start = int(words[0]), int(words[1])
        except (OSError, ValueError, IndexError):
            continue
        if _start_time(pid) == start:
            out[n] = pid
    return out


def orphans_after_kill(sweep_dir, left, wait_s):
    """After the driver that ran `left` ({trial: pid}) was killed: waits up
    to wait_s for those processes to end (their keepers' SIGTERM, then
    SIGKILL after the grace); returns (the ones still alive, seconds the
    last one took)."""
    t = time.monotonic()
    still = dict(left)
    while still and time.monotonic() - t < wait_s:
        time.sleep(0.05)
        alive = live_trials(sweep_dir)
        still = {n: p for n, p in still.items() if alive.get(n) == p}
    return still, time.monotonic() - t
