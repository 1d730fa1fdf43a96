#!/usr/bin/env python3
"""Disk full and read-only output, on real filesystems that fill up.

Mechanism: size-limited tmpfs mounts (`mount -t tmpfs -o size=...`, needs
root and a container that allows mounts; the script says so and fails if it
cannot), filled by a filler file written until ENOSPC, and `mount -o
remount,ro` for read-only. (RLIMIT_FSIZE is not used: the filesystem really
fills, so every writer, not just one process, meets ENOSPC.)

Injects and checks:
1. train, output full mid-run (--epochs-full cases: the filesystem is
   filled after epoch 1, 2, ...: train is SIGSTOPped as soon as that
   epoch's metrics row is there, the filler written, SIGCONT): train stops
   with a documented non-zero exit code (1 or 4), a message naming a file of
   the run directory and "No space left on device", never a panic or a
   signal; the last checkpoint still parses (train-checkpoint/v1); once the
   filler is gone `train --resume` (or, when the first checkpoint's own write
   failed, `train --config C --out D` again) finishes with exit 0 and weights
   equal, bit for bit, to an uninterrupted run's.
2. train, read-only output: `--out` on a read-only tmpfs exits 2 naming the
   directory; a run killed mid-run (TRAINGUARD_FAULT=sigkill) whose
   filesystem is then remounted read-only: `train --resume` exits non-zero
   with a message naming a file, no panic; remounted read-write, --resume
   finishes bit-identical to the reference.
3. sweep, journal's filesystem full mid-sweep: the driver stops with a
   non-zero documented exit code (1 or 4) and a message about the full disk
   (the file whose write failed: the journal, or a trial's file), no panic
   of the driver; Optuna
   4.x loads the journal; once the filler is gone `train sweep --resume`
   exits 0 and every grid point is finished once.
"""

import argparse
import collections
import errno
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import yaml

import rel_common as rc

DOCUMENTED_FAIL = {1, 4}


def mount_tmpfs(path, size, ro=False):
    os.makedirs(path, exist_ok=True)
    opts = f"size={size}" + (",ro" if ro else "")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"mount -t tmpfs -o {opts}: {p.stderr.strip()} (this test needs root and mounts)")


def can_mount():
    """Whether a small tmpfs can be mounted here (and is unmounted again)."""
    d = tempfile.mkdtemp(prefix="trainguard-mount-check-")
    try:
        mount_tmpfs(d, "1m")
    except (RuntimeError, OSError):
        os.rmdir(d)
        return False
    umount(d)
    os.rmdir(d)
    return True


def remount(path, mode):
    subprocess.run(["mount", "-o", f"remount,{mode}", path], check=True)


def umount(path):
    subprocess.run(["umount", "-l", path], capture_output=True)


def fill(fs_dir):
    """Writes fs_dir/filler until ENOSPC, in ever smaller chunks; returns its size."""
    path = os.path.join(fs_dir, "filler")
    total = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    chunk = 1 << 20
    try:
        while chunk >= 1:
            try:
                n = os.write(fd, b"\0" * chunk)
                total += n
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    finally:
        os.close(fd)
    return total


def panicked(text):
    return "panicked" in text or "stack backtrace" in text or "RUST_BACKTRACE" in text


def same_weights(d, ref_dir):
    _, a = rc.read_safetensors(os.path.join(d, "checkpoint.safetensors"))
    _, b = rc.read_safetensors(os.path.join(ref_dir, "checkpoint.safetensors"))
    _, c = rc.read_safetensors(os.path.join(d, "best.safetensors"))
    _, e = rc.read_safetensors(os.path.join(ref_dir, "best.safetensors"))
    return a == b and c == e


def metrics_rows(path):
    try:
        with open(path) as f:
            return max(0, sum(1 for line in f if line.endswith("\n")) - 1)
    except FileNotFoundError:
        return 0


def train_full(args, mnt, ref_dir, after_epoch, checks, cases):
    tag = f"train full after epoch {after_epoch}"
    mount_tmpfs(mnt, "4m")
    try:
        d = os.path.join(mnt, "run")
        p = subprocess.Popen([args.train, "--config", args.config, "--out", d, "--threads", "1"],
                             env=rc.env_without_faults(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while metrics_rows(os.path.join(d, "metrics.csv")) < after_epoch and p.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.002)
        stopped = p.poll() is None
        if stopped:
            p.send_signal(signal.SIGSTOP)
        filled = fill(mnt)
        if stopped:
            p.send_signal(signal.SIGCONT)
        out, err = p.communicate(timeout=120)
        err = err.decode(errors="replace")
        checks.check(stopped, f"{tag}: the run ended before the filesystem was filled")
        named = re.findall(re.escape(d) + r"/[^\s:,)]+", err)
        case = {"after_epoch": after_epoch, "exit": p.returncode, "filler_bytes": filled,
                "message": [l for l in err.splitlines() if l.strip()][-1:] if err.strip() else [],
                "files_named": sorted(set(named))}
        checks.check(p.returncode in DOCUMENTED_FAIL, f"{tag}: exit {p.returncode} (signal if < 0): {err[-600:]}")
        checks.check(not panicked(err), f"{tag}: a panic: {err[-1500:]}")
        checks.check("No space left on device" in err, f"{tag}: no 'No space left on device': {err[-600:]}")
        checks.check(bool(named), f"{tag}: the message names no file of {d}: {err[-600:]}")
        ckpt = os.path.join(d, "checkpoint.safetensors")
        if os.path.exists(ckpt):
            try:
                meta, _ = rc.check_checkpoint(ckpt)
                case["checkpoint_epoch"] = int(meta["epoch"])
            except Exception as e:  # noqa: BLE001
                checks.check(False, f"{tag}: the last checkpoint does not load: {e}")
            again = [args.train, "--resume", d, "--threads", "1"]
        else:
            # The first checkpoint's own write failed (metrics.csv's row of
            # epoch 1 comes before it): there is nothing to resume, and
            # docs/guide/train.md, "train" says to start again: `train --config C
            # --out D` (allowed, since D holds no checkpoint).
            checks.check(".checkpoint.safetensors.tmp" in err,
                         f"{tag}: no checkpoint, yet its write is not what failed: {err[-600:]}")
            case["checkpoint_epoch"] = None
            again = [args.train, "--config", args.config, "--out", d, "--threads", "1"]
        os.remove(os.path.join(mnt, "filler"))
        r = subprocess.run(again, env=rc.env_without_faults(), capture_output=True, text=True)
        case["resume_exit"] = r.returncode
        checks.check(r.returncode == 0, f"{tag}: --resume after space is back exited {r.returncode}: {r.stderr[-600:]}")
        if r.returncode == 0:
            same = same_weights(d, ref_dir)
            case["resumed_bit_identical"] = same
            checks.check(same, f"{tag}: resumed weights differ from the reference")
            rows = rc.read_metrics(os.path.join(d, "metrics.csv"))
            checks.check([int(x["epoch"]) for x in rows] == list(range(1, len(rows) + 1)) and len(rows) == args.epochs,
                         f"{tag}: metrics.csv epochs {[x['epoch'] for x in rows]}")
        cases.append(case)
    finally:
        umount(mnt)


def train_read_only(args, mnt, ref_dir, checks, figures):
    # A fresh run whose --out is on a read-only filesystem.
    mount_tmpfs(mnt, "1m", ro=True)
    try:
        d = os.path.join(mnt, "run")
        r = subprocess.run([args.train, "--config", args.config, "--out", d, "--threads", "1"],
                           env=rc.env_without_faults(), capture_output=True, text=True)
        figures["ro_fresh"] = {"exit": r.returncode, "message": r.stderr.strip().splitlines()[-1:]}
        checks.check(r.returncode == 2 and d in r.stderr and not panicked(r.stderr),
                     f"read-only --out: exit {r.returncode}: {r.stderr[-600:]}")
    finally:
        umount(mnt)
    # A run killed mid-run, its filesystem then read-only, resumed.
    mount_tmpfs(mnt, "4m")
    try:
        d = os.path.join(mnt, "run")
        env = rc.env_without_faults()
        env["TRAINGUARD_FAULT"] = "sigkill@3:2"
        r = subprocess.run([args.train, "--config", args.config, "--out", d, "--threads", "1"], env=env,
                           capture_output=True, text=True)
        checks.check(r.returncode == -9, f"sigkill@3:2 run exited {r.returncode}")
        remount(mnt, "ro")
        r = subprocess.run([args.train, "--resume", d, "--threads", "1"], env=rc.env_without_faults(),
                           capture_output=True, text=True)
        named = re.findall(re.escape(d) + r"/[^\s:,)]+", r.stderr)
        figures["ro_resume"] = {"exit": r.returncode, "message": r.stderr.strip().splitlines()[-1:],
                                "files_named": sorted(set(named))}
        checks.check(r.returncode in DOCUMENTED_FAIL | {2}, f"read-only --resume: exit {r.returncode}: {r.stderr[-600:]}")
        checks.check(not panicked(r.stderr), f"read-only --resume: a panic: {r.stderr[-1500:]}")
        checks.check(bool(named) and "Read-only file system" in r.stderr,
                     f"read-only --resume: the message names no file or not the cause: {r.stderr[-600:]}")
        remount(mnt, "rw")
        r = subprocess.run([args.train, "--resume", d, "--threads", "1"], env=rc.env_without_faults(),
                           capture_output=True, text=True)
        figures["ro_resume"]["resume_rw_exit"] = r.returncode
        checks.check(r.returncode == 0, f"--resume once read-write: exit {r.returncode}: {r.stderr[-600:]}")
        if r.returncode == 0:
            same = same_weights(d, ref_dir)
            figures["ro_resume"]["resumed_bit_identical"] = same
            checks.check(same, "read-only then read-write --resume: weights differ from the reference")
    finally:
        umount(mnt)


def sweep_full(args, mnt, checks, figures):
    tag = "sweep journal full"
    mount_tmpfs(mnt, "16m")
    try:
        d = os.path.join(mnt, "sweep")
        p = subprocess.Popen([args.train, "sweep", "--config", args.sweep_base, "--space", args.sweep_space,
                              "--out", d, "--parallel", "2"], env=rc.env_without_faults(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(d, "trials", f"{args.fill_at_trial:04d}")) and p.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        checks.check(p.poll() is None, f"{tag}: the sweep ended before the filesystem was filled")
        filled = fill(mnt)
        try:
            out, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            checks.check(False, f"{tag}: the driver did not stop within 300 s of a full disk")
        err = err.decode(errors="replace")
        lines = [l for l in err.splitlines() if l.startswith("train")]
        case = {"exit": p.returncode, "filler_bytes": filled, "last_lines": lines[-3:]}
        checks.check(p.returncode in DOCUMENTED_FAIL, f"{tag}: exit {p.returncode}: {err[-800:]}")
        checks.check(not panicked(err), f"{tag}: a panic: {err[-1500:]}")
        # The driver says which write failed: a file's ENOSPC ("No space left
        # on device"), or the journal's own append ("short write ...; disk
        # full?": the record was not written), or that a trial failed while
        # the filesystem was full ("stopped, disk full: ...").
        checks.check("No space left on device" in err or "disk full" in err,
                     f"{tag}: no message about the full disk: {err[-800:]}")
        try:
            trials = rc.optuna_trials(os.path.join(d, "journal.log"), "sweep")
            case["optuna_trials_when_full"] = len(trials)
            case["states_when_full"] = dict(collections.Counter(t["state"] for t in trials))
            case["failed_when_full"] = [
                {"number": t["number"], "class": t["user_attrs"].get("error_class"),
                 "message": str(t["user_attrs"].get("error_message"))[-300:]}
                for t in trials if t["state"] == "FAIL"]
            # A trial that failed while the disk was full failed for the disk:
            # it is recorded `interrupted` (run again on --resume), never a
            # failure of its parameters (RELIABILITY.md, finding 2).
            case["trials_failed_other_when_full"] = sum(
                1 for t in trials if t["state"] == "FAIL" and t["user_attrs"].get("error_class") != "interrupted")
            case["trials_interrupted_when_full"] = sum(
                1 for t in trials if t["user_attrs"].get("error_class") == "interrupted")
            checks.check(case["trials_failed_other_when_full"] == 0,
                         f"{tag}: trials recorded failed for a full disk: {case['failed_when_full']}")
        except Exception as e:  # noqa: BLE001
            checks.check(False, f"{tag}: {e}")
        os.remove(os.path.join(mnt, "filler"))
        r = subprocess.run([args.train, "sweep", "--resume", d], env=rc.env_without_faults(),
                           capture_output=True, text=True)
        case["resume_exit"] = r.returncode
        checks.check(r.returncode == 0 and not panicked(r.stderr),
                     f"{tag}: --resume once space is back: exit {r.returncode}: {r.stderr[-800:]}")
        try:
            trials = rc.optuna_trials(os.path.join(d, "journal.log"), "sweep")
            done = collections.Counter(json.dumps(t["params"], sort_keys=True) for t in trials
                                       if t["user_attrs"].get("error_class") != "interrupted")
            case["after_resume"] = dict(collections.Counter(
                (t["state"], t["user_attrs"].get("error_class")) and f"{t['state']}/{t['user_attrs'].get('error_class')}"
                for t in trials))
            with open(args.sweep_space) as f:
                space = yaml.safe_load(f)["parameters"]
            n_points = 1
            for v in space.values():
                n_points *= len(v["values"])
            checks.check(len(done) == n_points and all(v == 1 for v in done.values()),
                         f"{tag}: after --resume, {len(done)} of {n_points} points finished, counts {set(done.values())}")
            checks.check(all(t["state"] != "RUNNING" for t in trials), f"{tag}: a trial is RUNNING after --resume")
        except Exception as e:  # noqa: BLE001
            checks.check(False, f"{tag}: after --resume: {e}")
        figures["sweep_full"] = case
    finally:
        umount(mnt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default=rc.default_train())
    ap.add_argument("--out", default=os.path.join(rc.ROOT, "runs", "reliability", "disk"))
    ap.add_argument("--config", default=os.path.join(rc.ROOT, "configs", "reliability", "kill_train.yaml"))
    ap.add_argument("--epochs-full", type=int, default=5,
                    help="train cases: fill the filesystem after epoch 1, 2, ..., this many")
    ap.add_argument("--sweep-base", default=os.path.join(rc.ROOT, "configs", "reliability", "kill_sweep_base.yaml"))
    ap.add_argument("--sweep-space", default=os.path.join(rc.ROOT, "configs", "reliability", "kill_sweep_space.yaml"))
    ap.add_argument("--fill-at-trial", type=int, default=4, help="fill the sweep's filesystem when this trial starts")
    ap.add_argument("--seed", type=int, default=1, help="unused: the test is deterministic; kept for a uniform CLI")
    ap.add_argument("--skip-without-mount", action="store_true",
                    help="where tmpfs cannot be mounted (not root, a locked-down container), say SKIPPED and exit 0 "
                         "instead of failing (`just test`; the recorded run fails instead)")
    args = ap.parse_args()
    if args.skip_without_mount and not can_mount():
        print("disk: SKIPPED: this machine cannot mount a tmpfs (the test needs root and mounts); "
              "the other reliability tests still ran")
        return 0
    started = rc.utc_now()
    checks = rc.Checks()
    os.makedirs(args.out, exist_ok=True)
    with open(args.config) as f:
        args.epochs = yaml.safe_load(f)["epochs"]
    ref_dir = os.path.join(args.out, "ref")
    subprocess.run(["rm", "-rf", ref_dir], check=True)
    r = subprocess.run([args.train, "--config", args.config, "--out", ref_dir, "--threads", "1"],
                       env=rc.env_without_faults(), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"disk: the reference run failed: {r.stderr[-1000:]}")
    mnt = tempfile.mkdtemp(prefix="trainguard-disk-")
    figures = {"mechanism": "tmpfs mounts (mount -t tmpfs -o size=4m / 16m) filled by a filler file until "
                            "ENOSPC; read-only: a tmpfs mounted ro, and mount -o remount,ro",
               "train_full": []}
    try:
        for e in range(1, args.epochs_full + 1):
            train_full(args, mnt, ref_dir, e, checks, figures["train_full"])
        train_read_only(args, mnt, ref_dir, checks, figures)
        sweep_full(args, mnt, checks, figures)
    except RuntimeError as e:
        checks.check(False, str(e))
    finally:
        umount(mnt)
        try:
            os.rmdir(mnt)
        except OSError:
            pass
    ok = not checks.failed
    path = rc.write_result(args.out, "disk", ok, figures, checks.failed, started)
    named = sorted({os.path.basename(f) for c in figures["train_full"] for f in c.get("files_named", [])})
    print(f"disk: {'PASS' if ok else 'FAIL'}: train with a full tmpfs after epochs 1..{args.epochs_full}: exits "
          f"{[c['exit'] for c in figures['train_full']]}, files named {named}, resumed bit-identical; read-only: "
          f"fresh exit {figures.get('ro_fresh', {}).get('exit')}, resume exit "
          f"{figures.get('ro_resume', {}).get('exit')}; sweep with a full journal filesystem: exit "
          f"{figures.get('sweep_full', {}).get('exit')}, Optuna loads it, --resume exit "
          f"{figures.get('sweep_full', {}).get('resume_exit')}; {len(checks.failed)} failed check(s); {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
