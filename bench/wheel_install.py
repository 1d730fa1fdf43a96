#!/usr/bin/env python3
"""From nothing to a running memdiag: the pip wheel against the source build.

The wheel's path, --runs times, each from scratch: `python3 -m venv` of a
fresh environment, `pip install` of the built wheel from a local file (no
index, no download: a user fetching it from PyPI adds the download of its
size), and the first `memdiag --format yaml` from that environment. Its size,
and what it takes on disk once installed, beside.

The source build's path (--source-build), once: `cargo build --release
--workspace` (what `just build` runs once `just setup` has a torch 2.13
environment) into a new, empty target directory, so every crate of the
workspace and its dependencies compile, libtorch's torch-sys and train's C++
shim among them. Not counted: installing Rust, just, and the 4.6 GB torch
environment the source build needs and the wheel does not (pip caches it;
`just setup` says how long its download takes on your link).

Results: bench/results/wheel_install.{csv,md}.
"""

import argparse
import csv
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import command_line, stamp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd, **kw):
    """Wall seconds of cmd; a failure ends the benchmark with its stderr."""
    return timed_cpu(cmd, **kw)[0::2]


def timed_cpu(cmd, **kw):
    """(wall seconds, CPU seconds of cmd and its children, stdout): on a
    shared machine the CPU time says what the work costs, the wall time what
    it took here."""
    cpu = cpu_children()
    start = time.perf_counter()
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, **kw)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds, cpu_children() - cpu, done.stdout


def du_bytes(path):
    total = 0
    for base, _, files in os.walk(path):
        for f in files:
            p = os.path.join(base, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def wheel_runs(wheel, runs, python):
    rows = []
    for i in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            venv = os.path.join(tmp, "venv")
            cpu = cpu_children()
            t_venv, _ = timed([python, "-m", "venv", venv])
            before = du_bytes(venv)
            t_pip, _ = timed([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet",
                              "--no-index", "--no-deps", wheel])
            installed = du_bytes(venv) - before
            t_memdiag, out = timed([os.path.join(venv, "bin", "memdiag"), "--format", "yaml"])
            if "schema: memdiag/v1" not in out:
                raise SystemExit(f"bench: memdiag printed no memdiag/v1 report:\n{out}")
            rows.append({"run": i + 1, "venv_s": t_venv, "pip_install_s": t_pip, "first_memdiag_s": t_memdiag,
                         "total_s": t_venv + t_pip + t_memdiag, "cpu_s": cpu_children() - cpu,
                         "installed_bytes": installed})
    return rows


def source_build():
    """`cargo build --release --workspace` into an empty target directory."""
    with tempfile.TemporaryDirectory(dir=os.path.join(ROOT, "target")) as target:
        env = dict(os.environ, CARGO_TARGET_DIR=target)
        seconds, cpu, _ = timed_cpu(["cargo", "build", "--release", "--workspace", "--quiet"], cwd=ROOT, env=env)
        memdiag = os.path.join(target, "release", "memdiag")
        t_memdiag, cpu_memdiag, _ = timed_cpu([memdiag, "--format", "yaml"])
        return seconds, t_memdiag, cpu + cpu_memdiag


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", required=True, help="the built wheel (just wheel: target/wheels/oomkit-*.whl)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default="python3", help="the Python that makes the fresh environments")
    ap.add_argument("--source-build", action="store_true",
                    help="also time cargo build --release --workspace into an empty target directory (minutes)")
    args = ap.parse_args()
    wheel_bytes = os.path.getsize(args.wheel)
    load_before = load()
    rows = wheel_runs(args.wheel, args.runs, args.python)
    build = source_build() if args.source_build else None
    load_after = load()

    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "wheel_install.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["path", "run", "venv_s", "pip_install_s", "first_memdiag_s", "total_s",
                                          "cpu_s", "installed_bytes", "wheel_bytes"])
        w.writeheader()
        for r in rows:
            w.writerow({"path": "wheel", **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()},
                        "wheel_bytes": wheel_bytes})
        if build:
            w.writerow({"path": "source build", "run": 1, "total_s": round(build[0] + build[1], 3),
                        "first_memdiag_s": round(build[1], 3), "cpu_s": round(build[2], 1)})

    med = {k: statistics.median(r[k] for r in rows)
           for k in ("venv_s", "pip_install_s", "first_memdiag_s", "total_s", "cpu_s")}
    installed = statistics.median(r["installed_bytes"] for r in rows)
    lines = [
        "# From nothing to a running memdiag: the pip wheel against the source build",
        "",
        f"{stamp()} · {platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()} · "
        f"load average {load_before} before, {load_after} after (the machine is shared)",
        "",
        f"Command: `{command_line()}`",
        "",
        f"Wheel: `{os.path.basename(args.wheel)}`, {wheel_bytes / 2**20:.1f} MiB "
        f"({wheel_bytes} bytes); installed, the four binaries take {installed / 2**20:.1f} MiB.",
        "",
        "| path | runs | fresh venv s | install or build s | first memdiag s | total s (median) | / wheel's "
        "| CPU s | / wheel's |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| wheel: venv, `pip install` of the local file, memdiag | {len(rows)} | {med['venv_s']:.2f} | "
        f"{med['pip_install_s']:.2f} | {med['first_memdiag_s']:.3f} | {med['total_s']:.2f} | 1.0× "
        f"| {med['cpu_s']:.2f} | 1.0× |",
    ]
    if build:
        total = build[0] + build[1]
        lines.append(f"| source: `cargo build --release --workspace`, empty target directory, memdiag | 1 | – | "
                     f"{build[0]:.1f} | {build[1]:.3f} | {total:.1f} | {total / med['total_s']:.0f}× "
                     f"| {build[2]:.1f} | {build[2] / med['cpu_s']:.0f}× |")
    lines += [
        "",
        "Not counted on either side: the download (the wheel's size from PyPI; the source build's torch 2.13 "
        "environment, about 4.6 GB, and Rust). The source build gives everything (train with libtorch); "
        "the wheel gives memdiag, cfgcheck, verify-fixes and train without libtorch.",
    ]
    with open(os.path.join(HERE, "results", "wheel_install.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
