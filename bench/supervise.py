"""What supervising a command costs, and what `--parallel auto` from measured
peaks buys (issue 23), side by side in one run:

1. per run: a command that exits at once (`python3 -c pass`), bare and under
   `train run` (its start, the keeper, the sampler, the summary), and
   `train --version`, interleaved, medians of --runs;
2. per trial: program sweeps of --few and of --trials trials that exit at
   once, against the same numbers of bare runs of the program, --rounds
   times interleaved: the slope between the sizes is the cost per trial,
   the rest the driver's fixed cost;
3. sampling: the CPU time `train run` itself spends while its command
   sleeps for --sample-seconds, with a tree of 1 and of 10 processes (the
   sampler reads /proc for the whole tree every 0.5 s);
4. trials per hour on the CPU: a program sweep of trials that each hold
   --hold-mib of touched host memory for --hold-seconds while sleeping (so
   memory, not the 2 cores, is what they use), inside a real memory cgroup
   of --cgroup-mib (when /sys/fs/cgroup/memory is writable): `--parallel 1`,
   `--parallel auto --memory-budget` the cgroup's size, and `--parallel 4`,
   with the trials crowded out of memory (killed by the kernel, then run
   again alone) counted.

Writes bench/results/supervise.md and .csv.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wall(cmd, cwd=None):
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1000.0


def cpu_of(cmd):
    """(wall s, the process's own user+sys CPU s) via wait4 (children excluded:
    the command's own time is not the supervisor's)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(p.pid, 0)
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime


def journal_trials(sweep):
    py = os.path.join(os.environ.get("VIRTUAL_ENV", ""), "bin", "python")
    script = ("import json,sys,optuna\noptuna.logging.set_verbosity(optuna.logging.WARNING)\n"
              "s=optuna.load_study(study_name=sys.argv[2],storage=optuna.storages.JournalStorage("
              "optuna.storages.journal.JournalFileBackend(sys.argv[1])))\n"
              "print(json.dumps([{'state':t.state.name,'attrs':t.user_attrs} for t in s.trials]))")
    out = subprocess.run([py if os.path.exists(py) else sys.executable, "-c", script,
                          os.path.join(sweep, "journal.log"), os.path.basename(sweep)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default=os.path.join(ROOT, "target", "release", "train"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--few", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sample-seconds", type=float, default=60.0)
    ap.add_argument("--hold-mib", type=int, default=300)
    ap.add_argument("--hold-seconds", type=float, default=3.0)
    ap.add_argument("--memory-trials", type=int, default=8)
    ap.add_argument("--cgroup-mib", type=int, default=1000)
    args = ap.parse_args()
    args.train = os.path.abspath(args.train)
    rows = []
    work = tempfile.mkdtemp(prefix="bench-supervise-")
    py = sys.executable

    # 1. One run, bare and supervised (interleaved, medians).
    bare, sup, floor = [], [], []
    for i in range(args.runs):
        bare.append(wall([py, "-c", "pass"]))
        sup.append(wall([args.train, "run", "--quiet", "--out", os.path.join(work, f"r{i}"), "--", py, "-c", "pass"]))
        floor.append(wall([args.train, "--version"]))
    b, s, f = statistics.median(bare), statistics.median(sup), statistics.median(floor)
    rows.append(["a command that exits at once (python3 -c pass)", f"bare {b:.1f} ms",
                 f"train run {s:.1f} ms", f"+{s - b:.1f} ms per run ({s / b:.2f}×); `train --version` "
                 f"{f:.1f} ms (train's own start)"])

    # 2. The cost per program trial: sweeps of `--few` and of `--trials`
    # instant trials, the same programs run bare, `--rounds` times
    # interleaved; the slope between the two sizes is the cost per trial
    # (the driver's own start and end cancel out), the rest its fixed cost.
    with open(os.path.join(work, "quick.py"), "w") as f:
        f.write("print('Epoch 1/1 | Train Loss: 1.0 | Val Loss: 1.0 | LR: 0.1 | Time: 0.0s')\n")
    for n in (args.few, args.trials):
        with open(os.path.join(work, f"space{n}.yaml"), "w") as f:
            f.write(f"program: quick.py\nmethod: grid\nmetric: {{name: val_loss}}\nparameters:\n"
                    f"  i: {{values: [{', '.join(str(i) for i in range(n))}]}}\n")
    per = {n: {"bare": [], "sweep": []} for n in (args.few, args.trials)}
    for r in range(args.rounds):
        for n in (args.few, args.trials):
            t = time.perf_counter()
            for _ in range(n):
                subprocess.run([py, "quick.py"], cwd=work, stdout=subprocess.DEVNULL, check=True)
            per[n]["bare"].append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run([args.train, "sweep", "--space", f"space{n}.yaml", "--out", f"q{n}-{r}",
                            "--parallel", "1", "--interpreter", py], cwd=work,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            per[n]["sweep"].append(time.perf_counter() - t)
    med = {n: {k: statistics.median(v) for k, v in d.items()} for n, d in per.items()}
    span = args.trials - args.few
    bare_ms = (med[args.trials]["bare"] - med[args.few]["bare"]) / span * 1000
    sweep_ms = (med[args.trials]["sweep"] - med[args.few]["sweep"]) / span * 1000
    fixed_ms = (med[args.few]["sweep"] - med[args.few]["bare"]) * 1000 - args.few * (sweep_ms - bare_ms)
    rows.append([f"a program sweep of instant trials, --parallel 1 ({args.few} and {args.trials} trials, "
                 f"median of {args.rounds} rounds)",
                 f"bare {bare_ms:.1f} ms per run", f"sweep {sweep_ms:.1f} ms per trial",
                 f"+{sweep_ms - bare_ms:.1f} ms per trial ({sweep_ms / bare_ms:.2f}×); the driver's fixed "
                 f"cost (start, study, end) {fixed_ms:.0f} ms per sweep"])

    # 3. What sampling costs: train run's own CPU while its command sleeps.
    for n in (1, 10):
        cmd = f"for i in $(seq {n}); do sleep {args.sample_seconds} & done; wait"
        secs, cpu = cpu_of([args.train, "run", "--quiet", "--out", os.path.join(work, f"s{n}"), "--", "sh", "-c", cmd])
        rows.append([f"sampling a tree of {n + 1} process(es) for {secs:.0f} s",
                     f"train run's CPU {cpu:.2f} s", f"{cpu / secs * 100:.2f}% of one core",
                     f"{cpu / (secs / 0.5) * 1000:.2f} ms per sample (every 0.5 s)"])

    # 4. Trials per hour, memory-bound, inside a real memory cgroup.
    with open(os.path.join(work, "hold.py"), "w") as f:
        f.write("import sys, time\nmib = int(sys.argv[1].split('=')[1])\n"
                "b = bytearray(b'\\x01') * (mib << 20)\ntime.sleep(%s)\n"
                "print(f'Epoch 1/1 | Train Loss: 1.0 | Val Loss: {1.0 / mib} | LR: 0.1 | Time: 1s', flush=True)\n"
                % args.hold_seconds)
    with open(os.path.join(work, "mem.yaml"), "w") as f:
        vals = ", ".join(str(args.hold_mib + i) for i in range(args.memory_trials))
        f.write(f"program: hold.py\nmethod: grid\nmetric: {{name: val_loss}}\nparameters:\n  hold_mib: {{values: [{vals}]}}\n")
    cg = f"/sys/fs/cgroup/memory/trainguard-bench-{os.getpid()}"
    try:
        os.mkdir(cg)
        with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
            f.write(str(args.cgroup_mib << 20))
        limit = f"a memory cgroup of {args.cgroup_mib} MiB around the sweep"
    except OSError as e:
        cg, limit = None, f"no memory cgroup ({e}): --memory-budget only"
    mem_rows = []
    for label, extra in (("--parallel 1", ["--parallel", "1"]),
                         (f"--parallel auto --memory-budget {args.cgroup_mib}",
                          ["--parallel", "auto", "--memory-budget", str(args.cgroup_mib)]),
                         ("--parallel 4", ["--parallel", "4"])):
        out = f"m{len(mem_rows)}"
        cmd = [args.train, "sweep", "--space", "mem.yaml", "--out", out, "--interpreter", py] + extra
        shell = " ".join(map(lambda a: "'" + a + "'", cmd))
        if cg:
            shell = f"echo $$ > {cg}/cgroup.procs && exec {shell}"
        t = time.perf_counter()
        subprocess.run(["sh", "-c", shell], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        secs = time.perf_counter() - t
        trials = journal_trials(os.path.join(work, out))
        done = sum(t_["state"] == "COMPLETE" for t_ in trials)
        crowded = sum(str(t_["attrs"].get("rerun", "")).startswith("crowded") for t_ in trials)
        mem_rows.append([label, f"{secs:.1f} s", f"{done}/{args.memory_trials} complete",
                         f"{done / secs * 3600:.0f} trials/h", f"{crowded} crowded out and run again"])
    if cg:
        # Its last processes may still be leaving.
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)
    base = float(mem_rows[0][3].split()[0])
    for r in mem_rows:
        r.append(f"{float(r[3].split()[0]) / base:.2f}× --parallel 1")

    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "supervise.csv"), "w", newline="") as f:
        w = csv.writer(f)
        for r in rows + mem_rows:
            w.writerow(r)
    lines = [f"# Supervising a command (issue 23)", "", f"{benchlib.stamp()} · `{benchlib.command_line()}`", "",
             "| what | bare | supervised | cost |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", f"Memory-bound trials ({args.memory_trials} trials holding {args.hold_mib} MiB for "
              f"{args.hold_seconds} s each, asleep; {limit}; 2 cores):", "",
              "| --parallel | wall | done | trials/h | crowding | vs 1 |", "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in mem_rows]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(ROOT, "bench", "results", "supervise.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
