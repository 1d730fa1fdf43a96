"""The test suite's process-tree tests run again and again on a loaded
machine: each round runs the tests that wait for a process tree's state
(lineage, keeper, sampler, kill -9 of a supervisor) while `--load`
processes keep every core busy, and counts the rounds that passed. A test
that waits for an earlier sign of the state it asserts, rather than the
state itself, fails here long before it fails in CI.

    python scripts/reliability/tests_under_load.py --rounds 50 --load 2

Prints one line a round and a summary; writes DIR/tests_under_load.result.json
(reliability-result/v1);
exits 0 only if every round passed. Builds nothing itself beyond what
`cargo test --no-run` builds (the justfile's environment: run it under
`just`, or with VIRTUAL_ENV and PATH set to the torch environment).
"""

import argparse
import multiprocessing
import os
import subprocess
import sys
import time

import rel_common

# (cargo test arguments, test-binary filters): the tests that wait for a
# process tree's state, each a few seconds at most.
GROUPS = [
    (["-p", "supervise", "--lib"], ["lineage::", "group::", "events::"]),
    (["-p", "supervise", "--test", "memory"], []),
    (["-p", "train", "--test", "run_cmd"], ["killed_minus_nine", "ctrl_c"]),
]


def spin():
    while True:
        pass


def cargo_test(args, filters):
    cmd = ["cargo", "test", "-q", *args, "--", *filters]
    t = time.time()
    p = subprocess.run(cmd, cwd=rel_common.ROOT, capture_output=True, text=True)
    return p.returncode == 0, time.time() - t, p.stdout[-2000:] + p.stderr[-2000:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy processes beside the tests")
    ap.add_argument("--out", default=os.path.join(rel_common.ROOT, "runs", "reliability", "tests-under-load"))
    a = ap.parse_args()
    started = rel_common.utc_now()
    build = subprocess.run(["cargo", "test", "-q", "-p", "supervise", "-p", "train", "--no-run"], cwd=rel_common.ROOT)
    if build.returncode != 0:
        sys.exit("tests_under_load: the tests did not build")
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(a.load)]
    for s in spinners:
        s.start()
    failures = []
    try:
        for r in range(1, a.rounds + 1):
            for args, filters in GROUPS:
                ok, secs, tail = cargo_test(args, filters)
                name = " ".join(args + filters)
                print(f"round {r}: {'ok' if ok else 'FAILED'} {secs:.1f} s: {name}", flush=True)
                if not ok:
                    failures.append({"round": r, "tests": name, "output": tail})
    finally:
        for s in spinners:
            s.terminate()
    figures = {
        "rounds": a.rounds,
        "busy_processes": a.load,
        "groups": [" ".join(g[0] + g[1]) for g in GROUPS],
        "failed_rounds": len(failures),
    }
    rel_common.write_result(a.out, "tests_under_load", not failures, figures, failures, started)
    print(
        f"tests under load: {a.rounds} rounds of {len(GROUPS)} groups beside {a.load} busy processes: "
        f"{len(failures)} failure(s)"
    )
    sys.exit(0 if not failures else 1)


if __name__ == "__main__":
    main()
