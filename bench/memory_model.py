#!/usr/bin/env python3
"""The sweep's memory model against none, side by side: the same TPE sweep
(`method: bayes`) with `memory_model: false` (every point runs; TPE still
ranks the trials that ran out of memory as infeasible) and with the model
on, for each of --seeds seeds; with `--before TRAIN`, also with that older
`train` (one built before issue 43: TPE leaves out-of-memory trials out of
its model, as Optuna's does), the arms alternating.

The trials are real processes that hold rows x width MiB (rows 1..16,
width 16..160) under an address-space limit of their own (RLIMIT_AS: what
they map at start plus 900 MiB), so about a third of the space cannot fit
and a point that does not fit dies of a real MemoryError. The objective
is best at 600 MiB (rows 4), close to the edge of what fits, as a bigger
model is often better until it no longer fits.

Reported per seed and in all: the trials that ran out of memory, the points
refused (`predicted-out-of-memory`), the best value, the wall time; and the
false refusals: every refused point is run anyway afterwards, with the
same program and limit, and counted if it fits. Results:
bench/results/memory_model.{csv,md}.

With --auto-fix, the same script with argparse flags (`--batch_size` in
place of rows, `--gradient_accumulation_steps`, `--width`) and
`auto_fix: true` in the space, arms off and on: every point runs to its
end (a point too big with the batch halved and the accumulation doubled),
and what is counted is the attempts in all and those that ran out of
memory (bench/results/memory_model_autofix.{csv,md}).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from benchlib import command_line, load_note, program_sweep, stamp, write_results

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAM = """import math, resource, sys, time
args = dict(a.lstrip('-').split('=') for a in sys.argv[1:])
rows, width = int(args['rows']), int(args['width'])
mib = rows * width
pages = int(open('/proc/self/statm').read().split()[0])
limit = pages * resource.getpagesize() + (900 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
b = bytearray(b'\\x01') * (mib << 20)
time.sleep(1.0)
print('valid loss', abs(math.log(mib / 600)) + 0.1 * abs(math.log(rows / 4)), flush=True)
"""

# --auto-fix: the same memory and objective, its flags argparse's, so that
# auto-fix finds the batch and the accumulation.
FIX_PROGRAM = """import argparse, math, resource, time
p = argparse.ArgumentParser()
p.add_argument('--batch_size', type=int, default=1)
p.add_argument('--gradient_accumulation_steps', type=int, default=1)
p.add_argument('--width', type=int, default=16)
a = p.parse_args()
rows = a.batch_size * a.gradient_accumulation_steps
pages = int(open('/proc/self/statm').read().split()[0])
limit = pages * resource.getpagesize() + (900 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
b = bytearray(b'\\x01') * ((a.batch_size * a.width) << 20)
time.sleep(1.0)
mib = rows * a.width
print('valid loss', abs(math.log(mib / 600)) + 0.1 * abs(math.log(rows / 4)), flush=True)
"""

FIX_SPACE = """program: hold.py
method: bayes
metric: {{name: loss, regex: 'valid loss\\s+([0-9.e-]+)'}}
auto_fix: true
{key}parameters:
  batch_size: {{distribution: int_uniform, min: 1, max: 16}}
  width: {{distribution: int_uniform, min: 16, max: 160}}
"""

SPACE = """program: hold.py
method: bayes
metric: {{name: loss, regex: 'valid loss\\s+([0-9.e-]+)'}}
{key}parameters:
  rows: {{distribution: int_uniform, min: 1, max: 16}}
  width: {{distribution: int_uniform, min: 16, max: 160}}
"""

# --hf: examples/hf_trainer/train.py (transformers' Trainer, a wide MLP on
# the CPU) over its hidden layer's width and the batch, under an address
# limit of what it maps once built plus 450 MiB: hidden x batch of 2^25 and
# more (10 of the 36 points) cannot fit.
HF_PROGRAM = os.path.join(HERE, "..", "examples", "hf_trainer", "train.py")
HF_FIXED = {"max_steps": 8, "output_dir": "out", "report_to": "none", "memory_budget_mib": 450}
HF_SPACE = """program: hold.py
method: bayes
metric: {{name: final_loss}}
working_dir: trial
{key}parameters:
  hidden_size: {{values: [65536, 131072, 262144, 524288, 1048576, 2097152]}}
  per_device_train_batch_size: {{values: [4, 8, 16, 32, 64, 128]}}
""" + "".join(f"  {k}: {{{{value: {v}}}}}\n" for k, v in HF_FIXED.items())


def sweep(train, python, seed, trials, key, hf, fix=False):
    """One sweep (`key`: the space's memory_model line, or none): (its
    trials as Optuna loads them, its wall seconds)."""
    flags = ["--parallel", "1", "--trials", str(trials), "--seed", str(seed),
             "--max-consecutive-failures", "0"]
    if fix:
        return program_sweep(train, python, FIX_PROGRAM, FIX_SPACE.format(key=key), flags)
    if hf:
        with open(HF_PROGRAM) as f:
            return program_sweep(train, python, f.read(), HF_SPACE.format(key=key), flags)
    return program_sweep(train, python, PROGRAM, SPACE.format(key=key), flags)


def fits(python, params, hf):
    """Whether the point runs to its end, run anyway (its flags as the
    sweep gave them)."""
    with tempfile.TemporaryDirectory() as d:
        program = open(HF_PROGRAM).read() if hf else PROGRAM
        with open(os.path.join(d, "hold.py"), "w") as f:
            f.write(program)
        values = dict(params, **(HF_FIXED if hf else {}))
        run = subprocess.run([python, "hold.py"] + [f"--{k}={v}" for k, v in values.items()],
                             cwd=d, capture_output=True)
        return run.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="target/release/train")
    ap.add_argument("--before", help="an older train, run as a third arm (no memory_model key)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--hf", action="store_true",
                    help="the Hugging Face Trainer example instead of the rows x width script")
    ap.add_argument("--arms", default="before,off,on", help="which of before, off, on to run")
    ap.add_argument("--auto-fix", action="store_true",
                    help="the script with argparse flags and auto_fix: true; attempts counted (arms off, on)")
    args = ap.parse_args()
    if args.auto_fix:
        return auto_fix(args)
    train = os.path.abspath(args.train)
    note = load_note()
    arms = [("off", train, "memory_model: false\n"), ("on", train, "memory_model: true\n")]
    if args.before:
        arms.insert(0, ("before", os.path.abspath(args.before), ""))
    arms = [a for a in arms if a[0] in args.arms.split(",")]
    rows = []
    for seed in range(1, args.seeds + 1):
        for name, binary, key in arms:
            trials, wall = sweep(binary, args.python, seed, args.trials, key, args.hf)
            ran_out = sum(t["class"] == "out-of-memory" for t in trials)
            refused = [t for t in trials if t["class"] == "predicted-out-of-memory"]
            values = [t["value"] for t in trials if t["state"] == "COMPLETE" and t["value"] is not None]
            would_fit = sum(fits(args.python, t["params"], args.hf) for t in refused)
            row = {
                "seed": seed,
                "memory_model": name,
                "trials": len(trials),
                "ran_out_of_memory": ran_out,
                "refused": len(refused),
                "refused_that_fit": would_fit,
                "completed": len(values),
                "best_value": round(min(values), 4) if values else "",
                "wall_s": round(wall, 1),
            }
            print(row, flush=True)
            rows.append(row)
    def arm(on):
        return [r for r in rows if r["memory_model"] == on]

    def total(on, key):
        return sum(r[key] for r in arm(on))

    def best(on):
        vals = [r["best_value"] for r in arm(on) if r["best_value"] != ""]
        return statistics.median(vals), min(vals), max(vals)

    on_oom = total("on", "ran_out_of_memory")
    refused, false = total("on", "refused"), total("on", "refused_that_fit")
    names = {"before": "the train before the model (TPE blind to out-of-memory trials)",
             "off": "`memory_model: false`"}
    lines = [
        "# The sweep's memory model against none" + (" (the Hugging Face Trainer example)" if args.hf else ""),
        "",
        f"{stamp()}; `{command_line()}`; {note}.",
        "",
        "| seed | memory model | trials | ran out of memory | refused | refused that fit | completed | best value | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append("| " + " | ".join(str(r[k]) for k in r) + " |")
    m1, lo1, hi1 = best("on")
    lines.append("")
    for name, _, _ in arms[:-1]:
        oom = total(name, "ran_out_of_memory")
        m0, lo0, hi0 = best(name)
        lines += [
            f"- Against {names[name]}: trials that ran out of memory {oom} there, {on_oom} with the model"
            + (f" ({1 - on_oom / oom:.0%} fewer)" if oom else "")
            + f"; best value (median over seeds, lowest to highest) {m0:.4f} ({lo0:.4f} to {hi0:.4f}) there, "
            f"{m1:.4f} ({lo1:.4f} to {hi1:.4f}) with the model; wall time {total(name, 'wall_s'):.0f} s there, "
            f"{total('on', 'wall_s'):.0f} s with the model.",
        ]
    lines.append(
        f"- Points refused: {refused}; run anyway, {false} of them fit"
        + (f" ({false / refused:.0%} false refusals)." if refused else ".")
    )
    name = "memory_model_hf" if args.hf else "memory_model"
    write_results(args.out, name, rows, "\n".join(lines) + "\n")


def auto_fix(args):
    """--auto-fix: attempts in all, with and without the model."""
    train = os.path.abspath(args.train)
    rows = []
    for seed in range(1, args.seeds + 1):
        for name, key in [("off", "memory_model: false\n"), ("on", "memory_model: true\n")]:
            trials, wall = sweep(train, args.python, seed, args.trials, key, False, fix=True)
            attempts = [int(t["user_attrs"].get("attempts", 1)) for t in trials]
            legs = sum(len(t["user_attrs"].get("ran_out_legs", [])) for t in trials)
            values = [t["value"] for t in trials if t["state"] == "COMPLETE" and t["value"] is not None]
            row = {
                "seed": seed,
                "memory_model": name,
                "trials": len(trials),
                "attempts": sum(attempts),
                "ran_out_of_memory": legs + sum(t["class"] == "out-of-memory" for t in trials),
                "fixed_before_start": sum(1 for t in trials if t["user_attrs"].get("fixed_before_start")),
                "completed": len(values),
                "best_value": round(min(values), 4) if values else "",
                "wall_s": round(wall, 1),
            }
            print(row, flush=True)
            rows.append(row)

    def total(on, key):
        return sum(r[key] for r in rows if r["memory_model"] == on)

    def best(on):
        vals = [r["best_value"] for r in rows if r["memory_model"] == on and r["best_value"] != ""]
        return statistics.median(vals), min(vals), max(vals)

    a0, a1 = total("off", "attempts"), total("on", "attempts")
    n0, n1 = total("off", "trials"), total("on", "trials")
    o0, o1 = total("off", "ran_out_of_memory"), total("on", "ran_out_of_memory")
    (m0, lo0, hi0), (m1, lo1, hi1) = best("off"), best("on")
    lines = [
        "# With auto_fix: the memory model against none",
        "",
        f"{stamp()}; `{command_line()}`; {load_note()}.",
        "",
        "| seed | memory model | trials | attempts | ran out of memory | fixed before start | completed | best value | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(str(r[k]) for k in r) + " |" for r in rows]
    lines += [
        "",
        f"- Attempts in all: {a0} for {n0} trials with `memory_model: false`, {a1} for {n1} with the model"
        + (f" ({1 - a1 / a0:.0%} fewer)" if a0 else "") + f"; after the first: {a0 - n0} and {a1 - n1}"
        + (f" ({1 - (a1 - n1) / (a0 - n0):.0%} fewer)" if a0 > n0 else "") + ".",
        f"- Attempts that ran out of memory: {o0} and {o1}" + (f" ({1 - o1 / o0:.0%} fewer)" if o0 else "") + ".",
        f"- Best value (median over seeds, lowest to highest): {m0:.4f} ({lo0:.4f} to {hi0:.4f}) without, "
        f"{m1:.4f} ({lo1:.4f} to {hi1:.4f}) with; wall time {total('off', 'wall_s'):.0f} s and {total('on', 'wall_s'):.0f} s.",
    ]
    write_results(args.out, "memory_model_autofix", rows, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
