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

`--background-busy N` keeps N other processes spinning on the CPU for the
whole run (a machine another job uses), reproducing issue 42: a trial given
every core as threads while other work keeps them busy runs far slower than
with its share of the free ones. `--before TRAIN` runs each way with that
binary too (a build from before a change), alternating with the others, so
the two read side by side in one run. Results then:
bench/results/parallel_auto_busy{N}.{csv,md}.
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
    """One sweep: its wall time, the trials at once auto chose, whether a
    failure was taken for crowding, and the threads its trials got."""
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
    threads = sorted(set(threads_of(out)))
    shutil.rmtree(out, ignore_errors=True)
    return seconds, chose[-1] if chose else "-", crowded, threads


def threads_of(out):
    """The OMP_NUM_THREADS each trial got (its summary's env_set)."""
    got = []
    trials = os.path.join(out, "trials")
    for t in sorted(os.listdir(trials)) if os.path.isdir(trials) else []:
        try:
            text = open(os.path.join(trials, t, "run", "summary.yaml")).read()
        except OSError:
            continue
        m = re.search(r"OMP_NUM_THREADS=(\d+)", text)
        if m:
            got.append(int(m.group(1)))
    return got


class Busy:
    """N processes that keep a core busy each until the run ends (a job
    beside the sweep), ended by their own pids."""

    def __init__(self, n):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="path to the train binary (release build)")
    ap.add_argument("--python", default=sys.executable, help="python with torch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--points", type=int, default=6, help="trials in the sweep (the last cannot fit)")
    ap.add_argument("--size", type=int, default=768)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--background-busy", type=int, default=0, metavar="N",
                    help="N processes spinning on the CPU for the whole run (another job on the machine)")
    ap.add_argument("--before", metavar="TRAIN", help="a train from before a change: each way runs with it too")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    ways = ["1", str(cores), "auto"] if cores > 1 else ["1", "auto"]
    trains = {"": os.path.abspath(args.train)}
    if args.before:
        trains[" (before)"] = os.path.abspath(args.before)
    # A way: (its label, the train, --parallel).
    runs = [(w + tag, train, w) for w in ways for tag, train in trains.items()]
    work = tempfile.mkdtemp(prefix="parallel-auto-")
    with open(os.path.join(work, "prog.py"), "w") as f:
        f.write(PROGRAM)
    with open(os.path.join(work, "space.yaml"), "w") as f:
        f.write(space(args.size, args.steps, args.points))
    times = {label: [] for label, _, _ in runs}
    chose, crowded, threads = {}, {}, {}
    with Busy(args.background_busy):
        load_before = load_note()
        for _ in range(args.rounds):
            for label, train, w in runs:
                s, c, cr, th = run(train, os.path.abspath(args.python), w, work)
                times[label].append(s)
                chose[label], crowded[label] = c, crowded.get(label, False) or cr
                threads[label] = sorted(set(threads.get(label, [])) | set(th))
        load_after = load_note()
    shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(times["1"])
    rows = []
    for label, _, _ in runs:
        m = statistics.median(times[label])
        rows.append({"parallel": label, "median_s": round(m, 2), "vs_parallel_1": round(m / base, 3),
                     "trials_at_once": chose[label], "threads": " ".join(map(str, threads[label])) or "-",
                     "taken_for_crowding": crowded[label],
                     "runs": " ".join(f"{t:.2f}" for t in times[label])})
    os.makedirs(args.out, exist_ok=True)
    stem = f"parallel_auto_busy{args.background_busy}" if args.background_busy else "parallel_auto"
    with open(os.path.join(args.out, f"{stem}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    busy = (f"; {args.background_busy} other process(es) spinning on the CPU throughout"
            if args.background_busy else "")
    before = f"; \"(before)\": `{args.before}`" if args.before else ""
    lines = [
        f"# --parallel auto against the fixed choices ({stamp()})", "",
        f"`{command_line()}`", "",
        f"{args.points} trials (the last cannot fit: its own address-space limit), matmul {args.size}, "
        f"{args.steps} steps, {cores} core(s), {args.rounds} round(s){busy}{before}; "
        f"load with them running: {load_before}, at the end: {load_after}", "",
        "| --parallel | median s | vs --parallel 1 | trials at once | threads | taken for crowding | runs (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['parallel']} | {r['median_s']} | {r['vs_parallel_1']}x | {r['trials_at_once']} | "
                     f"{r['threads']} | {'yes' if r['taken_for_crowding'] else 'no'} | {r['runs']} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, f"{stem}.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
