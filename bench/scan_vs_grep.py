#!/usr/bin/env python3
"""`cfgcheck --scan` on a large real Python tree, side by side with grep.

The tree: the torch package of the project's environment (thousands of
files; the one this Python imports). cfgcheck parses every file with tree-sitter and
judges the hazards across the tree; the alternative a person reaches for is
`grep -rn -E` with the same needles, which finds lines and leaves the
judging (an alias, a mode in a variable, the other half in another file) to
them. cfgcheck runs on every core it is given (available_parallelism), so it
is timed twice: with the machine's cores, and pinned to one core with
taskset, where grep's one thread is the fair comparison. Median of --runs
runs each. Results: bench/results/scan_vs_grep.{csv,md}.
"""

import argparse
import csv
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import command_line, shown, stamp

HERE = os.path.dirname(os.path.abspath(__file__))
# What the scanner looks for, as a person would grep for it.
NEEDLES = [
    r"mode=['\"](reduce-overhead|max-autotune)['\"]",
    r"triton\.cudagraphs",
    r"backend=['\"]cudagraphs",
    r"checkpoint(_sequential)?\(",
    r"gradient_checkpointing_enable\(",
    r"gradient_checkpointing=",
    r"torch_compile_mode=",
    r"num_workers=",
    r"CUDA_LAUNCH_BLOCKING",
]


def default_tree():
    """The torch package of the Python running this script (the project's
    .venv under `just bench`), found without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"bench: {sys.executable} has no torch package; give --tree")
    return spec.submodule_search_locations[0]


def timed(cmd, ok_codes):
    """(wall ms, CPU ms of the child: user + system, its stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        ms = (time.perf_counter() - start) * 1000.0
        code = os.waitstatus_to_exitcode(status)
        if code not in ok_codes:
            err.seek(0)
            raise SystemExit(f"bench: {' '.join(cmd)} exited {code}:\n{err.read().decode(errors='replace')}")
        out.seek(0)
        return ms, (usage.ru_utime + usage.ru_stime) * 1000.0, out.read()


def median_ms(cmd, runs, ok_codes):
    """Medians of the wall and CPU times over runs, and the last stdout."""
    walls, cpus, out = [], [], b""
    for _ in range(runs):
        ms, cpu, out = timed(cmd, ok_codes)
        walls.append(ms)
        cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus), out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cfgcheck", required=True, help="a release build of cfgcheck")
    ap.add_argument("--tree", help="the Python tree to scan [default: the environment's torch package]")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    tree = args.tree or default_tree()
    scan = [args.cfgcheck, "--scan", tree, "--format", "json", "--host-ram-gib", "12.7"]
    cores = len(os.sched_getaffinity(0))
    # Exit 1 is a result (an error finding in the tree), as grep's 1 (no line).
    scan_ms, scan_cpu, out = median_ms(scan, args.runs, (0, 1))
    result = json.loads(out)
    files = result["files"]["scanned"]
    rows = [(f"cfgcheck --scan, {cores} core(s)", scan_ms, scan_cpu)]
    if shutil.which("taskset") and cores > 1:
        pin = ["taskset", "-c", str(min(os.sched_getaffinity(0)))]
        one_ms, one_cpu, _ = median_ms(pin + scan, args.runs, (0, 1))
        rows.append(("cfgcheck --scan, 1 core (taskset)", one_ms, one_cpu))
    grep = ["grep", "-rn", "-E", "--include=*.py"] + sum([["-e", n] for n in NEEDLES], []) + [tree]
    grep_ms, grep_cpu, grep_out = median_ms(grep, args.runs, (0, 1))
    grep_lines = len(grep_out.splitlines())
    rows.append((f"grep -rn -E, {len(NEEDLES)} needles", grep_ms, grep_cpu))
    said = (f"cfgcheck: {len(result['findings'])} finding(s), {len(result['cannot_tell'])} cannot tell, "
            f"{result['files']['not_parsed']} file(s) not parsed; grep: {grep_lines} matching line(s)")
    print(f"{files} files under {tree}: " + ", ".join(f"{n} {ms:.0f} ms ({cpu:.0f} ms CPU)" for n, ms, cpu in rows)
          + f"; {said}", file=sys.stderr)

    date = stamp()
    machine = f"{platform.machine()}, {os.cpu_count()} cores"
    load = os.getloadavg()[0]
    with open(os.path.join(args.out, "scan_vs_grep.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["date", "machine", "load_average", "tree", "files", "tool", "median_ms", "files_per_s",
                    "ratio_to_grep", "median_cpu_ms", "cpu_ratio_to_grep"])
        for name, ms, cpu in rows:
            w.writerow([date, machine, f"{load:.1f}", shown(tree), files, name, f"{ms:.1f}",
                        f"{files / (ms / 1000):.0f}", f"{ms / grep_ms:.2f}", f"{cpu:.1f}", f"{cpu / grep_cpu:.1f}"])
    with open(os.path.join(args.out, "scan_vs_grep.md"), "w") as f:
        f.write(f"# cfgcheck --scan on {files} Python files, against grep\n\n{date} · {machine}\n\n")
        f.write(f"Command: `{command_line()}`\n\nTree: `{shown(tree)}` ({files} .py files); median of {args.runs} runs; "
                f"load average {load:.1f} at the end (other work on the machine slows both sides' wall time; "
                "CPU time, the child's user + system, is what each side itself spent).\n\n")
        f.write("| tool | median wall ms | files/s (wall) | wall / grep | median CPU ms | CPU / grep |\n"
                "|---|---|---|---|---|---|\n")
        for name, ms, cpu in rows:
            f.write(f"| {name} | {ms:.0f} | {files / (ms / 1000):.0f} | {ms / grep_ms:.1f}× | {cpu:.0f} | "
                    f"{cpu / grep_cpu:.1f}× |\n")
        f.write(f"\nWhat each said: {said}. The needles: `{'`, `'.join(NEEDLES)}`.\n")
    print(open(os.path.join(args.out, "scan_vs_grep.md")).read())


if __name__ == "__main__":
    main()
