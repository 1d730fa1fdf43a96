#!/usr/bin/env python3
"""`train sweep --parallel auto` against the fixed choices, side by side.

One program sweep, run three ways on this machine in one go: `--parallel 1`,
`--parallel N` (N = the cores) and `--parallel auto`. The program is a small
real PyTorch training script whose step uses every thread it is given
(a matrix multiply of `--size`), so one trial with all the cores is as fast
as two trials of one core each, or faster; and one of its points can never
fit (it limits its own address space, RLIMIT_AS, and asks for more: a real
out-of-memory that crowding cannot cause, which auto must not take for
crowding). The ways alternate over --rounds, so slow phases of a shared
machine hit each. Reported: the median wall time of each way, its ratio to
`--parallel 1`, and the trials at once auto chose (from its placement
lines). Results: bench/results/parallel_auto.{csv,md}.
"""

import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import command_line, load_note, stamp

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAM = """import argparse, json, resource, time, torch
p = argparse.ArgumentParser()
p.add_argument('--size', type=int)
p.add_argument('--steps', type=int)
p.add_argument('--too_big', type=int, default=0)
a = p.parse_args()
if a.too_big:
    pages = int(open('/proc/self/statm').read().split()[0])
    limit = pages * resource.getpagesize() + (200 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    torch.empty(a.too_big << 18).fill_(1.0)
x = torch.randn(a.size, a.size)
for s in range(a.steps):
    x = torch.tanh(x @ x / a.size)
print(json.dumps({'loss': float(x.abs().mean())}), flush=True)
"""


def space(size, steps, points):
    too_big = [0] * (points - 1) + [4096]
    return (
        "program: prog.py\nmethod: grid\nmetric: {name: loss}\nparameters:\n"
        f"  size: {{value: {size}}}\n  steps: {{value: {steps}}}\n"
        f"  too_big: {{values: [{', '.join(str(v) for v in too_big)}]}}\n"
    )


def run(train, python, parallel, work):
    out = os.path.join(work, f"s-{parallel}-{time.monotonic_ns()}")
    t = time.monotonic()
    p = subprocess.run(
        [train, "sweep", "--space", "space.yaml", "--out", out, "--parallel", parallel,
         "--interpreter", python, "--max-consecutive-failures", "0"],
        cwd=work, capture_output=True, text=True)
    seconds = time.monotonic() - t
    if p.returncode != 0:
        raise SystemExit(f"bench: --parallel {parallel} exited {p.returncode}: {p.stderr[-2000:]}")
    done = re.search(r"\((\d+) complete", p.stderr)
    if not done or int(done.group(1)) == 0:
        raise SystemExit(f"bench: --parallel {parallel}: no trial completed: {p.stderr[-2000:]}")
    chose = re.findall(r"(\d+) trial\(s\) at once \(", p.stderr)
    crowded = "from now on" in p.stderr
    shutil.rmtree(out, ignore_errors=True)
    return seconds, chose[-1] if chose else "-", crowded


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="path to the train binary (release build)")
    ap.add_argument("--python", default=sys.executable, help="python with torch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--points", type=int, default=6, help="trials in the sweep (the last cannot fit)")
    ap.add_argument("--size", type=int, default=768)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    ways = ["1", str(cores), "auto"] if cores > 1 else ["1", "auto"]
    work = tempfile.mkdtemp(prefix="parallel-auto-")
    with open(os.path.join(work, "prog.py"), "w") as f:
        f.write(PROGRAM)
    with open(os.path.join(work, "space.yaml"), "w") as f:
        f.write(space(args.size, args.steps, args.points))
    load_before = load_note()
    times = {w: [] for w in ways}
    chose, crowded = {}, {}
    for _ in range(args.rounds):
        for w in ways:
            s, c, cr = run(os.path.abspath(args.train), os.path.abspath(args.python), w, work)
            times[w].append(s)
            chose[w], crowded[w] = c, crowded.get(w, False) or cr
    shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(times["1"])
    rows = []
    for w in ways:
        m = statistics.median(times[w])
        rows.append({"parallel": w, "median_s": round(m, 2), "vs_parallel_1": round(m / base, 3),
                     "trials_at_once": chose[w], "taken_for_crowding": crowded[w],
                     "runs": " ".join(f"{t:.2f}" for t in times[w])})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "parallel_auto.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [
        f"# --parallel auto against the fixed choices ({stamp()})", "",
        f"`{command_line()}`", "",
        f"{args.points} trials (the last cannot fit: its own address-space limit), matmul {args.size}, "
        f"{args.steps} steps, {cores} core(s), {args.rounds} round(s); load before: {load_before}, after: {load_note()}", "",
        "| --parallel | median s | vs --parallel 1 | trials at once | taken for crowding | runs (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['parallel']} | {r['median_s']} | {r['vs_parallel_1']}x | {r['trials_at_once']} | "
                     f"{'yes' if r['taken_for_crowding'] else 'no'} | {r['runs']} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "parallel_auto.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
