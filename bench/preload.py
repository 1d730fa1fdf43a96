#!/usr/bin/env python3
"""Python trials forked from a preload server (supervise::preload) against a
fresh `python trial.py` per trial and an Optuna study in one process.

  cargo build --release -p supervise --example preload_trials -p train
  python bench/preload.py --train target/release/train \
      [--example target/release/examples/preload_trials] [--hf]

(a) N one-step PyTorch trials (a two-layer MLP, one Adam step, a printed
loss): `python torch_step.py --lr L --seed i` per trial; the same command
forked from a server that imported torch (and torch._dynamo, which torch's
optimizers import at their first step); and an Optuna study calling the
same step N times in one process. (b) with --hf, N Hugging Face Trainer
trials (a tiny BertConfig model, synthetic data, 4 steps, an evaluation; no
download) fresh and forked from a server that imported torch and
transformers.trainer. Each way runs whole (its interpreter or server start
included, as a sweep pays it once) once per round, the ways alternating;
reported: the medians over rounds of the wall time and of a trial's time
once the interpreter, server or study has started (a long sweep's steady
rate; for `train sweep`, the median gap between two trials' ends in its
journal), as trials
per hour, and ratios. With --train, the same trials run as a `train sweep`
(`--parallel 1`, a grid over --seed) with and without the space's
`preload`: the product as a user runs it, the driver's cost included. The forked trials go through the real client and server (the
preload_trials example: pipes, SCM_RIGHTS, fork, exit status). Results:
bench/results/preload.md.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import command_line, load_note, stamp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

TORCH_STEP = '''"""One PyTorch trial: a two-layer MLP, one Adam step, its loss."""
import argparse
import torch


def step(lr, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    x, y = torch.randn(64, 32), torch.randn(64, 1)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    print(f"loss={step(a.lr, a.seed):.6f}")
'''

OPTUNA_SIDE = '''
import sys
import optuna
sys.path.insert(0, sys.argv[1])
from torch_step import step
optuna.logging.set_verbosity(optuna.logging.WARNING)
import json, time
times = []
def objective(trial):
    t = time.perf_counter()
    loss = step(trial.suggest_float("lr", 1e-4, 1e-1, log=True), trial.number)
    times.append(time.perf_counter() - t)
    return loss
study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
study.optimize(objective, n_trials=int(sys.argv[2]))
print(json.dumps(times))
'''

HF_TRIAL = '''"""One Hugging Face Trainer trial: a tiny BERT, synthetic data, 4 steps."""
import argparse
import tempfile

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Synthetic(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 100, (n, 16), generator=g)
        self.labels = (self.ids.sum(1) % 2).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=37, max_position_embeddings=32, num_labels=2)
    model = BertForSequenceClassification(cfg)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=4, per_device_train_batch_size=8,
                                 learning_rate=a.lr, report_to=[], save_strategy="no",
                                 logging_strategy="no", disable_tqdm=True, use_cpu=True, seed=a.seed)
        trainer = Trainer(model=model, args=args, train_dataset=Synthetic(64, a.seed),
                          eval_dataset=Synthetic(32, a.seed + 1))
        trainer.train()
        print(f"eval_loss={trainer.evaluate()['eval_loss']:.6f}")


if __name__ == "__main__":
    main()
'''


def timed(cmd, cwd):
    """Wall seconds of `cmd`; a failure ends the benchmark with its stderr."""
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    s = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return s, r.stdout


# Each way returns (wall seconds of all N trials, start included; the median
# trial's seconds once started: the steady rate of a long sweep).


def fresh(py, script, n, cwd):
    def run():
        total = 0.0
        for i in range(n):
            s, out = timed([py, script, "--lr", str(0.001 * (i + 1)), "--seed", str(i)], cwd)
            assert "loss=" in out, out
            total += s
        return total, total / n

    return run


def forked(example, py, modules, script, n, cwd):
    def run():
        cmd = [example, "--interpreter", py, "--trials", str(n)]
        for m in modules:
            cmd += ["--preload", m]
        cmd += ["--", py, script, "--lr", "0.00{i}1", "--seed", "{i}"]
        s, out = timed(cmd, cwd)
        said = json.loads(out)  # the example's own figures: it ran every trial
        assert all("loss=" in line for line in said["last_lines"]), said
        return s, statistics.median(said["trials_s"])

    return run


def sweep_way(train, py, modules, script, n, cwd):
    """`train sweep` of n trials of `script` (a grid over --seed), its
    trials forked from a server that imported `modules` (none: each trial a
    fresh process, the W&B agent's way); (wall time, the median trial's
    seconds as the journal records them)."""
    runs = [0]

    def run():
        runs[0] += 1
        name = f"sweep-{len(modules)}-{os.path.basename(script)}-{runs[0]}"
        space = os.path.join(cwd, name + ".yaml")
        with open(space, "w") as f:
            f.write(f"program: {os.path.basename(script)}\nmethod: grid\n"
                    "metric: {name: loss, regex: 'loss=([0-9.eE+-]+)'}\n"
                    + (f"preload: [{', '.join(modules)}]\n" if modules else "")
                    + "parameters:\n  lr: {value: 0.001}\n"
                    f"  seed: {{values: [{', '.join(str(i) for i in range(n))}]}}\n")
        s, _ = timed([train, "sweep", "--space", space, "--out", name, "--parallel", "1",
                      "--interpreter", py], cwd)
        _, out = timed([train, "sweep", "--report", name, "--format", "json"], cwd)
        trials = json.loads(out)["trials"]
        assert len(trials) == n and all(t["state"] == "COMPLETE" for t in trials), out[-2000:]
        # A trial once the sweep runs: the median gap between two trials'
        # ends in the journal (the driver's own work between them included).
        ends = []
        with open(os.path.join(cwd, name, "journal.log")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("op_code") == 6:
                    ends.append(datetime.datetime.fromisoformat(r["datetime_complete"]))
        gaps = [(b - a).total_seconds() for a, b in zip(ends, ends[1:])]
        return s, statistics.median(gaps)

    return run


def optuna_side(py, n, cwd):
    def run():
        s, out = timed([py, "-c", OPTUNA_SIDE, cwd, str(n)], cwd)
        return s, statistics.median(json.loads(out))

    return run


def measure(ways, rounds):
    """Each way once per round, the order turned each round: medians."""
    times = {name: [] for name, _ in ways}
    for r in range(rounds):
        order = ways if r % 2 == 0 else ways[::-1]
        for name, run in order:
            times[name].append(run())
            wall, each = times[name][-1]
            print(f"  round {r + 1}: {name}: {wall:.1f} s, {each:.2f} s a trial", file=sys.stderr)
    return {name: tuple(statistics.median(x) for x in zip(*t)) for name, t in times.items()}


def table(title, medians, n, base, extra=None):
    vs = f" vs {extra} |" if extra else ""
    lines = [f"**{title}** ({n} trials a way, its start included; then a trial once started, as in a long sweep; medians of the rounds)", "",
             "| way | wall time | trials/hour | vs fresh |" + vs + " a trial once started | trials/hour | vs fresh |" + vs,
             "|---|---|---|---|" + ("---|" if extra else "") + "---|---|---|" + ("---|" if extra else "")]
    for name, (wall, each) in medians.items():
        row = f"| {name} | {wall:.1f} s | {n / wall * 3600:.0f} | {medians[base][0] / wall:.2f}× |"
        if extra:
            row += f" {medians[extra][0] / wall:.2f}× |"
        row += f" {each * 1000:.0f} ms | {3600 / each:.0f} | {medians[base][1] / each:.1f}× |"
        if extra:
            row += f" {medians[extra][1] / each:.3f}× |"
        lines.append(row)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--example", help="the preload_trials example binary: the client alone")
    ap.add_argument("--train", help="a release `train`: the same trials as `train sweep` trials")
    ap.add_argument("--python", default=os.path.join(os.environ.get("VIRTUAL_ENV", ""), "bin", "python"))
    ap.add_argument("--trials", type=int, default=8, help="trials a way and round (a)")
    ap.add_argument("--hf-trials", type=int, default=6, help="trials a way and round (b)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--hf", action="store_true", help="also (b), Hugging Face Trainer trials")
    a = ap.parse_args()
    if a.rounds < 5:
        sys.exit("--rounds: at least 5 (the medians are the figures)")
    if not a.example and not a.train:
        sys.exit("give --train (train sweep's trials) or --example (the client alone), or both")
    example = a.example and os.path.abspath(a.example)
    train = a.train and os.path.abspath(a.train)
    note = load_note()
    out = [f"{stamp()}, `{command_line()}`, {note}", ""]
    with tempfile.TemporaryDirectory() as tmp:
        step = os.path.join(tmp, "torch_step.py")
        with open(step, "w") as f:
            f.write(TORCH_STEP)
        n = a.trials
        print(f"(a) {n} one-step torch trials, {a.rounds} rounds", file=sys.stderr)
        ways = [
            ("fresh `python torch_step.py`", fresh(a.python, step, n, tmp)),
            ("Optuna study, one process", optuna_side(a.python, n, tmp)),
        ]
        if example:
            ways += [
                ("preload [torch] (the client alone)", forked(example, a.python, ["torch"], step, n, tmp)),
                ("preload [torch, torch._dynamo] (the client alone)",
                 forked(example, a.python, ["torch", "torch._dynamo"], step, n, tmp)),
            ]
        if train:
            ways += [
                ("`train sweep`, a fresh process a trial", sweep_way(train, a.python, [], step, n, tmp)),
                ("`train sweep`, preload [torch, torch._dynamo]",
                 sweep_way(train, a.python, ["torch", "torch._dynamo"], step, n, tmp)),
            ]
        m = measure(ways, a.rounds)
        out.append(table("(a) one-step PyTorch trials", m, n, ways[0][0], ways[1][0]))
        if a.hf:
            hf = os.path.join(tmp, "hf_trial.py")
            with open(hf, "w") as f:
                f.write(HF_TRIAL)
            n = a.hf_trials
            print(f"(b) {n} Hugging Face Trainer trials, {a.rounds} rounds", file=sys.stderr)
            ways = [("fresh `python hf_trial.py`", fresh(a.python, hf, n, tmp))]
            if example:
                ways += [
                    ("preload [torch, transformers.trainer] (the client alone)",
                     forked(example, a.python, ["torch", "transformers.trainer"], hf, n, tmp)),
                    ("preload [torch, torch._dynamo, transformers.trainer] (the client alone)",
                     forked(example, a.python, ["torch", "torch._dynamo", "transformers.trainer"], hf, n, tmp)),
                ]
            if train:
                ways += [
                    ("`train sweep`, a fresh process a trial (the W&B agent's way)",
                     sweep_way(train, a.python, [], hf, n, tmp)),
                    ("`train sweep`, preload [torch, torch._dynamo, transformers.trainer]",
                     sweep_way(train, a.python, ["torch", "torch._dynamo", "transformers.trainer"], hf, n, tmp)),
                ]
            m = measure(ways, a.rounds)
            out += ["", table("(b) Hugging Face Trainer trials", m, n, ways[0][0])]
    text = "\n".join(out) + "\n"
    print(text)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "preload.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
