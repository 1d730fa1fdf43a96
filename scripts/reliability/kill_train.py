#!/usr/bin/env python3
"""Kill at random: SIGKILL a `train` run at random moments, resume it, and
check it ends exactly where an uninterrupted run ends.

Injects: SIGKILL (kill -9) of the train process after a delay drawn
uniformly over an uninterrupted run's wall time (start-up included), so
kills land in start-up, inside steps, validation, and the atomic writes of
checkpoint.safetensors, best.safetensors, summary.yaml, curves.png and the
appends to metrics.csv. After each kill: `train --resume DIR` (or, when the
run was killed before its first checkpoint existed, the original
`train --config C --out DIR`, as docs/guide/train.md, "train" says), killed again, ... until a
run finishes; then a fresh run, until --kills kills have landed.

Checks:
- two uninterrupted runs give bit-identical tensors (the premise);
- right after each kill, every file the run directory holds parses
  (checkpoint and best: safetensors with train-checkpoint/v1 metadata;
  config.yaml; metrics.csv: whole train-metrics/v1 rows);
- each run ends with exit 0, never a panic, and then: checkpoint.safetensors
  and best.safetensors hold the reference's tensors bit for bit (names,
  dtypes, shapes, bytes) and the same metadata; summary.yaml is
  train-summary/v1 with status finished; metrics.csv has exactly one row per
  epoch, equal to the reference's in every column but time; config.yaml
  equals the reference's; curves.png is a PNG; no temp file is left.
Counts how many kills landed while the temp file of an atomic write was new
(created or rewritten since the previous look), i.e. inside a write. Kills
at uniform moments rarely land inside a write (they take a few ms of a
run's seconds), so --aim-at-writes F aims a fraction F of the kills: the
directory is polled and the process SIGKILLed the moment the temp file
of a file picked at random (checkpoint, best, curves.png, summary.yaml,
metrics.csv, config.yaml) appears.
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import time

import yaml

import rel_common as rc

TIME_COLS = {"seconds", "samples_per_s"}
# The files train writes atomically in a run directory; an aimed kill picks one.
WRITTEN = ["checkpoint.safetensors", "best.safetensors", "curves.png", "summary.yaml", "metrics.csv",
           "config.yaml"]


def run_once(train, config, out, threads):
    t = rc.Timer()
    p = subprocess.run([train, "--config", config, "--out", out, "--threads", str(threads)],
                       env=rc.env_without_faults(), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"kill_train: the reference run failed ({p.returncode}): {p.stderr[-2000:]}")
    return t.s()


def same_tensors(a, b):
    return a.keys() == b.keys() and all(a[k] == b[k] for k in a)


def check_intermediate(d, checks, tag):
    """Every file a killed run left parses."""
    for name in ["checkpoint.safetensors", "best.safetensors"]:
        p = os.path.join(d, name)
        if os.path.exists(p):
            try:
                if name == "checkpoint.safetensors":
                    rc.check_checkpoint(p)
                else:
                    rc.read_safetensors(p)
            except Exception as e:  # noqa: BLE001 - any failure to parse is the finding
                checks.check(False, f"{tag}: {name} does not parse after a kill: {e}")
    for name in ["config.yaml", "summary.yaml", "chain.yaml"]:
        p = os.path.join(d, name)
        if os.path.exists(p):
            try:
                with open(p) as f:
                    checks.check(isinstance(yaml.safe_load(f), dict), f"{tag}: {name} is not a map")
            except Exception as e:  # noqa: BLE001
                checks.check(False, f"{tag}: {name} does not parse after a kill: {e}")
    p = os.path.join(d, "metrics.csv")
    if os.path.exists(p):
        try:
            rc.read_metrics(p)
        except Exception as e:  # noqa: BLE001
            checks.check(False, f"{tag}: metrics.csv after a kill: {e}")


def check_final(d, ref, checks, tag, epochs):
    try:
        meta, tens = rc.check_checkpoint(os.path.join(d, "checkpoint.safetensors"))
        checks.check(same_tensors(tens, ref["ckpt"]), f"{tag}: checkpoint tensors differ from the reference")
        checks.check(meta == ref["ckpt_meta"], f"{tag}: checkpoint metadata {meta} != {ref['ckpt_meta']}")
        _, best = rc.read_safetensors(os.path.join(d, "best.safetensors"))
        checks.check(same_tensors(best, ref["best"]), f"{tag}: best.safetensors differs from the reference")
    except Exception as e:  # noqa: BLE001
        checks.check(False, f"{tag}: weights: {e}")
    try:
        s = rc.check_summary(os.path.join(d, "summary.yaml"))
        checks.check(s["status"] == "finished", f"{tag}: summary status {s['status']}")
        checks.check(s["epochs_completed"] == epochs, f"{tag}: epochs_completed {s['epochs_completed']}")
        checks.check(s["best"] == ref["summary"]["best"], f"{tag}: best {s['best']} != {ref['summary']['best']}")
    except Exception as e:  # noqa: BLE001
        checks.check(False, f"{tag}: summary.yaml: {e}")
    try:
        rows = rc.read_metrics(os.path.join(d, "metrics.csv"))
        checks.check([int(r["epoch"]) for r in rows] == list(range(1, epochs + 1)),
                     f"{tag}: metrics.csv epochs {[r['epoch'] for r in rows]}")
        if len(rows) == len(ref["rows"]):
            for r, q in zip(rows, ref["rows"]):
                diff = [c for c in r if c not in TIME_COLS and r[c] != q[c]]
                checks.check(not diff, f"{tag}: metrics.csv epoch {r['epoch']} differs in {diff}")
    except Exception as e:  # noqa: BLE001
        checks.check(False, f"{tag}: metrics.csv: {e}")
    try:
        with open(os.path.join(d, "config.yaml")) as f:
            checks.check(yaml.safe_load(f) == ref["config"], f"{tag}: config.yaml differs")
        with open(os.path.join(d, "curves.png"), "rb") as f:
            checks.check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{tag}: curves.png is not a PNG")
        if os.path.exists(os.path.join(d, "chain.yaml")):
            with open(os.path.join(d, "chain.yaml")) as f:
                checks.check(yaml.safe_load(f)["schema"] == "train-chain/v1", f"{tag}: chain.yaml")
    except Exception as e:  # noqa: BLE001
        checks.check(False, f"{tag}: {e}")
    left = rc.temp_files(d)
    checks.check(not left, f"{tag}: temp files left at the end: {sorted(left)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default=rc.default_train())
    ap.add_argument("--out", default=os.path.join(rc.ROOT, "runs", "reliability", "kill-train"))
    ap.add_argument("--config", default=os.path.join(rc.ROOT, "configs", "reliability", "kill_train.yaml"))
    ap.add_argument("--kills", type=int, default=100, help="SIGKILLs to land in all")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--aim-at-writes", type=float, default=0.0,
                    help="fraction of kills aimed at atomic writes (killed the moment a temp file appears) "
                         "instead of at a uniform random moment")
    ap.add_argument("--max-attempts", type=int, default=100, help="processes per run before giving up")
    args = ap.parse_args()
    started = rc.utc_now()
    rng = random.Random(args.seed)
    checks = rc.Checks()
    os.makedirs(args.out, exist_ok=True)
    subprocess.run(["rm", "-rf", os.path.join(args.out, "ref1"), os.path.join(args.out, "ref2"),
                    os.path.join(args.out, "runs")], check=True)
    with open(args.config) as f:
        epochs = yaml.safe_load(f)["epochs"]

    # The reference, twice: the premise is a deterministic run.
    r1, r2 = os.path.join(args.out, "ref1"), os.path.join(args.out, "ref2")
    t1 = run_once(args.train, args.config, r1, args.threads)
    t2 = run_once(args.train, args.config, r2, args.threads)
    duration = max(t1, t2)
    ref = {}
    ref["ckpt_meta"], ref["ckpt"] = rc.check_checkpoint(os.path.join(r1, "checkpoint.safetensors"))
    _, ref["best"] = rc.read_safetensors(os.path.join(r1, "best.safetensors"))
    ref["summary"] = rc.check_summary(os.path.join(r1, "summary.yaml"))
    ref["rows"] = rc.read_metrics(os.path.join(r1, "metrics.csv"))
    with open(os.path.join(r1, "config.yaml")) as f:
        ref["config"] = yaml.safe_load(f)
    m2, c2 = rc.check_checkpoint(os.path.join(r2, "checkpoint.safetensors"))
    _, b2 = rc.read_safetensors(os.path.join(r2, "best.safetensors"))
    deterministic = same_tensors(c2, ref["ckpt"]) and same_tensors(b2, ref["best"]) and m2 == ref["ckpt_meta"]
    if not deterministic:
        sys.exit("kill_train: two uninterrupted runs differ; the test needs a deterministic run")
    print(f"kill_train: reference: two uninterrupted runs bit-identical; {duration:.2f} s per run",
          file=sys.stderr, flush=True)

    kills = 0
    in_write = 0
    aimed_kills = aimed_in_write = 0
    in_write_files = {}
    kills_before_ckpt = 0
    runs = 0
    processes = 0
    panics = 0
    kill_times = []
    while kills < args.kills:
        d = os.path.join(args.out, "runs", f"{runs:03d}")
        tag = f"run {runs}"
        log_path = d + ".log"
        os.makedirs(os.path.dirname(d), exist_ok=True)
        prev_temps = {}
        run_kills = 0
        finished = False
        for attempt in range(args.max_attempts):
            if os.path.exists(os.path.join(d, "checkpoint.safetensors")):
                cmd = [args.train, "--resume", d, "--threads", str(args.threads)]
            else:
                cmd = [args.train, "--config", args.config, "--out", d, "--threads", str(args.threads)]
            with open(log_path, "a") as log:
                log.write(f"$ {' '.join(cmd)}\n")
                log.flush()
                p = subprocess.Popen(cmd, env=rc.env_without_faults(), stdout=log, stderr=log)
            processes += 1
            killed = False
            aimed = False
            if kills < args.kills:
                delay = rng.uniform(0, duration)
                if args.aim_at_writes > 0 and rng.random() < args.aim_at_writes:
                    # Aimed: SIGKILL as soon as a temp file of an atomic write
                    # appears (new, or rewritten since the last look).
                    aimed = True
                    target = "." + rng.choice(WRITTEN) + ".tmp"
                    t0 = time.monotonic()
                    while p.poll() is None and time.monotonic() - t0 < 4 * duration:
                        now = rc.temp_files(d)
                        if any(n.startswith(target) and prev_temps.get(n) != v for n, v in now.items()):
                            p.send_signal(signal.SIGKILL)
                            killed = True
                            break
                else:
                    try:
                        p.wait(timeout=delay)
                    except subprocess.TimeoutExpired:
                        p.send_signal(signal.SIGKILL)
                        killed = True
            rc_ = p.wait()
            if killed and rc_ == -signal.SIGKILL:
                kills += 1
                run_kills += 1
                kill_times.append(None if aimed else round(delay, 3))
                if not os.path.exists(os.path.join(d, "checkpoint.safetensors")):
                    kills_before_ckpt += 1
                temps = rc.temp_files(d)
                new = sorted(n for n, v in temps.items() if prev_temps.get(n) != v)
                aimed_kills += aimed
                if new:
                    in_write += 1
                    aimed_in_write += aimed
                    for n in new:
                        in_write_files[n] = in_write_files.get(n, 0) + 1
                prev_temps = temps
                check_intermediate(d, checks, f"{tag} kill {run_kills}")
                continue
            with open(log_path) as f:
                text = f.read()
            if "panicked" in text or "RUST_BACKTRACE" in text:
                panics += 1
                checks.check(False, f"{tag}: a panic in {log_path}")
            if rc_ == 0:
                finished = True
                break
            checks.check(False, f"{tag}: `{' '.join(cmd)}` exited {rc_}: {text[-800:]}")
            break
        checks.check(finished, f"{tag}: did not finish after {args.max_attempts} processes")
        if finished:
            check_final(d, ref, checks, tag, epochs)
        print(f"kill_train: run {runs}: {run_kills} kill(s), finished={finished}; "
              f"{kills}/{args.kills} kills, {in_write} inside an atomic write", file=sys.stderr, flush=True)
        runs += 1
        if len(checks.failed) > 20:
            break

    figures = {
        "kills": kills,
        "runs": runs,
        "train_processes": processes,
        "kills_inside_atomic_write": in_write,
        "aimed_kills": aimed_kills,
        "aimed_kills_inside_atomic_write": aimed_in_write,
        "random_kills": kills - aimed_kills,
        "random_kills_inside_atomic_write": in_write - aimed_in_write,
        "kills_inside_atomic_write_by_file": in_write_files,
        "kills_before_first_checkpoint": kills_before_ckpt,
        "panics": panics,
        "reference_run_s": round(duration, 3),
        "epochs": epochs,
        "kill_delays_s": kill_times,
    }
    ok = not checks.failed and kills >= args.kills
    path = rc.write_result(args.out, "kill_train", ok, figures, checks.failed, started)
    print(f"kill_train: {'PASS' if ok else 'FAIL'}: {kills} SIGKILLs ({kills - aimed_kills} at random moments, "
          f"{aimed_kills} aimed at writes) over {runs} runs ({processes} train processes); {in_write} landed "
          f"inside an atomic write ({in_write - aimed_in_write} random, {aimed_in_write} aimed) {in_write_files}; "
          f"every run ended "
          f"bit-identical to the reference: {not checks.failed}; {len(checks.failed)} failed check(s); {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
