#!/usr/bin/env python3
"""`cfgcheck --explain` on a 50 MB log, side by side with grep.

The log: 50 MB of epoch lines in the seeds' format, with seed 001's CUDA graph
error and a real PyTorch out-of-memory message near the end. cfgcheck reads it
line by line and explains every known failure; the alternative a person
reaches for is `grep -n -F` with the same needles, which only finds lines.
Median of --runs runs each. Target (issue 8): under a second.
Results: bench/results/explain_large_log.{csv,md}.
"""

import argparse
import csv
import os
import platform
import statistics
import subprocess
import sys
import time

from benchlib import command_line, stamp

HERE = os.path.dirname(os.path.abspath(__file__))
NEEDLES = ["CUDA out of memory. Tried to allocate", "static input data pointer changed", "device-side assert triggered", "CUDA error: "]
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
       "of which 364.31 MiB is free. Process 175356 has 77.26 GiB memory in use. Of the allocated memory 72.12 GiB is "
       "allocated by PyTorch, and 3.78 GiB is reserved by PyTorch but unallocated.\n")


def make_log(path, megabytes):
    line = "Epoch {}/5000 | Train Loss: 3.8234 | Val Loss: 1.2103 | LR: 0.000001 | Time: 95.32s\n"
    with open(path, "w") as f:
        written, i = 0, 0
        while written < megabytes * 1024 * 1024:
            s = line.format(i % 5000 + 1)
            f.write(s)
            written += len(s)
            i += 1
        f.write("Traceback (most recent call last):\nRuntimeError: static input data pointer changed.\n")
        f.write(OOM)


def median_ms(cmd, runs, ok_codes=(0,)):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000.0)
        if done.returncode not in ok_codes:
            raise SystemExit(f"bench: {' '.join(cmd)} exited {done.returncode}")
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cfgcheck", required=True)
    ap.add_argument("--megabytes", type=int, default=50)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    log = os.path.join(HERE, "out", "large.log")
    make_log(log, args.megabytes)
    size = os.path.getsize(log) / 1024 / 1024
    explain = median_ms([args.cfgcheck, "--explain", log, "--format", "json"], args.runs)
    grep_cmd = ["grep", "-n", "-F"] + sum([["-e", n] for n in NEEDLES], []) + [log]
    grep = median_ms(grep_cmd, args.runs)
    print(f"{size:.1f} MB log: cfgcheck --explain {explain:.0f} ms, grep -F {grep:.0f} ms", file=sys.stderr)
    date = stamp()
    machine = f"{platform.machine()}, {os.cpu_count()} cores"
    rows = [("cfgcheck --explain (explains)", explain), ("grep -n -F, 4 needles (finds lines)", grep)]
    with open(os.path.join(args.out, "explain_large_log.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["date", "machine", "log_mb", "tool", "median_ms", "ratio_to_grep"])
        for name, ms in rows:
            w.writerow([date, machine, f"{size:.1f}", name, f"{ms:.1f}", f"{ms / grep:.2f}"])
    with open(os.path.join(args.out, "explain_large_log.md"), "w") as f:
        f.write(f"# cfgcheck --explain on a {size:.0f} MB log\n\n{date} · {machine}\n\n")
        f.write(f"Command: `{command_line()}`\n\n")
        f.write("| tool | median ms | / grep |\n|---|---|---|\n")
        for name, ms in rows:
            f.write(f"| {name} | {ms:.0f} | {ms / grep:.2f}× |\n")
    print(open(os.path.join(args.out, "explain_large_log.md")).read())


if __name__ == "__main__":
    main()
