#!/usr/bin/env python3
"""memdiag one-shot wall time, side by side with what people run instead.

Alternatives timed in the same run, when present on the machine:
  - nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv
  - seed 002's diagnostic cell: import torch, then torch.cuda.mem_get_info()
    (on a machine without a GPU it stops at torch.cuda.is_available()).
Each command runs a few times to warm the page cache, then --runs times; the
median and 90th percentile wall times are reported, and each alternative's
median as a ratio to memdiag's. Results: bench/results/memdiag_oneshot.{csv,md}.
"""

import argparse
import csv
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

from benchlib import command_line, stamp

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_CELL = (
    "import torch\n"
    "if torch.cuda.is_available():\n"
    "    free, total = torch.cuda.mem_get_info()\n"
    "    print(total, total - free, free)\n"
    "else:\n"
    "    print('no GPU')\n"
)


def time_runs(cmd, runs, warmup=3):
    for _ in range(warmup):
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append((time.perf_counter() - start) * 1000.0)
        if done.returncode != 0:
            raise SystemExit(f"bench: {' '.join(cmd)} exited {done.returncode}")
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="path to the memdiag binary (release build)")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--alt-runs", type=int, default=10, help="runs for the slow Python alternative")
    ap.add_argument("--python", default=sys.executable, help="python with torch, for the seed-002 cell")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()

    cases = [("memdiag", [args.bin, "--format", "yaml"], args.runs)]
    smi = shutil.which("nvidia-smi")
    if smi:
        cases.append(("nvidia-smi", [smi, "--query-gpu=memory.total,memory.used,memory.free", "--format=csv"], args.runs))
    cases.append(("torch cell (seed 002)", [args.python, "-c", TORCH_CELL], args.alt_runs))

    rows = []
    for name, cmd, runs in cases:
        median, p90 = time_runs(cmd, runs)
        rows.append({"tool": name, "runs": runs, "median_ms": round(median, 2), "p90_ms": round(p90, 2)})
        print(f"{name:24} median {median:9.2f} ms   p90 {p90:9.2f} ms   ({runs} runs)", file=sys.stderr)
    base = rows[0]["median_ms"]
    for r in rows:
        r["ratio_to_memdiag"] = round(r["median_ms"] / base, 1) if base > 0 else ""

    command = command_line()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
    gpu = "nvidia-smi present" if smi else "no NVIDIA driver"
    date = stamp()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "memdiag_oneshot.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["date", "machine", "gpu", "tool", "runs", "median_ms", "p90_ms", "ratio_to_memdiag"])
        w.writeheader()
        for r in rows:
            w.writerow({"date": date, "machine": machine, "gpu": gpu, **r})
    with open(os.path.join(args.out, "memdiag_oneshot.md"), "w") as f:
        f.write(f"# memdiag one-shot wall time\n\n{date} · {machine} · {gpu}\n\nCommand: `{command}`\n\n")
        f.write("| tool | runs | median ms | p90 ms | median / memdiag's |\n|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['tool']} | {r['runs']} | {r['median_ms']} | {r['p90_ms']} | {r['ratio_to_memdiag']}× |\n")
    print(open(os.path.join(args.out, "memdiag_oneshot.md")).read())


if __name__ == "__main__":
    main()
