#!/usr/bin/env python3
"""Seed 001's crash, reproduced in PyTorch on a GPU: the reference model with
per-frame torch.utils.checkpoint under torch.compile(mode="reduce-overhead")
(CUDA graphs), trained for 2 epochs with a validation pass after each, as the
seed's loop does.

Whether it crashes depends on the PyTorch version's settings, so the run tries
several variants, each in its own process (a fresh CUDA context, and a hang or
crash in one cannot spoil the next), and reports what each did:

  defaults-nonreentrant  torch's defaults; checkpoint(use_reentrant=False)
  legacy-reentrant       the settings of the PyTorch the seed ran (before 2.5):
                         torch._dynamo.config.inline_inbuilt_nn_modules = False
                         and torch._inductor.config.triton.
                         cudagraph_support_input_mutation = False, under which
                         cudagraph trees raise "static input data pointer
                         changed" instead of re-recording; checkpoint's old
                         default use_reentrant=True
  defaults-reentrant     torch's defaults, use_reentrant=True
  legacy-nonreentrant    the legacy settings, use_reentrant=False

With torch's defaults (2.5 and later), a changed static input makes cudagraph
trees re-record the graph (up to triton.cudagraph_unexpected_rerecord_limit,
then fall back to eager) rather than raise, which this run shows as slower
epochs and cudagraph skips rather than a crash. On torch 2.13 the legacy
settings no longer bring the raise back: inline_inbuilt_nn_modules is a
deprecated no-op (always True) and CUDAGraphNode sets
rerecord_if_static_inputs_change = True unconditionally, so the legacy
variants measure what those flags still change, and a crash there would be
the other face of the clash (pytorch#154306, "graph recording observed an
input tensor deallocate during graph recording", still in 2.13's source).

A variant counts as reproducing the crash when `cfgcheck --explain` puts its
error in the cuda-graph-pointer class. Writes cudagraph_crash.txt under --out
(each variant: outcome, epoch times,
the inductor's counters, the error and its traceback), rewritten after each
variant.

Time: each variant gets --timeout seconds (default 420: a cold
torch.compile(mode="reduce-overhead") compiles the forward, the backward and
the eval graph before the first epoch ends), and all of them together --total
(default: $STEP_LIMIT, which run.sh sets to the step's limit; 0 = none). A
variant gets at most what is left of --total less a margin for the report;
one that would start with too little left is recorded as not run, with the
command that runs it later. A variant past its limit is killed with its
compile workers (its own process group) and recorded as timed out, with the
last lines it printed. Exit 0: the crash was reproduced in at least one variant; 1: every
variant ran and none crashed; 2: no CUDA device (or --device cpu, which only
exercises the machinery: CUDA graphs need CUDA).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from benchlib import first_line  # noqa: E402

VARIANTS = {
    "defaults-nonreentrant": {"legacy": False, "reentrant": False},
    "legacy-reentrant": {"legacy": True, "reentrant": True},
    "defaults-reentrant": {"legacy": False, "reentrant": True},
    "legacy-nonreentrant": {"legacy": True, "reentrant": False},
}
CLASS = "cuda-graph-pointer"
# Seconds of --total kept back for the report, and the least worth starting a variant with.
MARGIN, LEAST = 10, 30


def failure_class(cfgcheck, text):
    """The class cfgcheck --explain gives an error (the project's one table of
    known failures, diagnose/src/failures.rs), or None when nothing is known."""
    done = subprocess.run([cfgcheck, "--explain", "-", "--format", "json"], input=text, capture_output=True, text=True)
    found = json.loads(done.stdout)["found"] if done.returncode in (0, 1) and done.stdout else []
    return found[0]["class"] if found else None


def child(name, device):
    """One variant, in this process. Prints a JSON line on stdout at the end."""
    import torch
    import torch.utils.checkpoint

    import reference_model

    v = VARIANTS[name]
    if v["legacy"]:
        torch._dynamo.config.inline_inbuilt_nn_modules = False
        torch._inductor.config.triton.cudagraph_support_input_mutation = False
    # The reference model passes use_reentrant=False; the variant decides.
    reference_model.checkpoint = lambda fn, *a, use_reentrant=None, **k: torch.utils.checkpoint.checkpoint(
        fn, *a, use_reentrant=v["reentrant"], **k)
    cfg = {"memory_optimized": True, "gradient_checkpointing": True, "image_channels": 3, "image_size": 32,
           "temporal_frames": 4, "scalar_features": 8, "dropout": 0.1, "task": "regression", "num_labels": 2,
           "architecture": {"name": "transformer", "channels": None, "embed_dim": 64, "attention_heads": 4,
                            "attention_layers": 1, "ffn_dim": None, "scalar_hidden": 32}}
    torch.manual_seed(0)
    model = reference_model.Model(cfg).to(device).train()
    step = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    frames = torch.randn(16, 4, 3, 32, 32, device=device)
    scalars = torch.randn(16, 8, device=device)
    target = torch.randn(16, device=device)
    result = {"variant": name, "epochs": [], "error": None}
    try:
        for epoch in range(1, 3):
            start = time.perf_counter()
            model.train()
            for _ in range(4):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(step(frames, scalars).squeeze(-1), target)
                loss.backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                val = torch.nn.functional.mse_loss(step(frames, scalars).squeeze(-1), target).item()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            result["epochs"].append({"epoch": epoch, "seconds": round(time.perf_counter() - start, 2), "val_loss": round(val, 4)})
            print(f"Epoch {epoch}/2 | Loss: {loss.item():.4f} | Val Loss: {val:.4f} | Time: {time.perf_counter() - start:.2f}s", file=sys.stderr)
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()
    from torch._dynamo.utils import counters
    result["inductor_counters"] = {k: v for k, v in counters["inductor"].items() if "cudagraph" in k}
    result["torch"] = torch.__version__
    print(json.dumps(result))
    return 0


def report(path, results):
    with open(path, "w") as f:
        for r in results:
            f.write(f"== {r['variant']}: {r['outcome']}" + (f" ({r['seconds']} s)" if "seconds" in r else "") + "\n")
            for e in r.get("epochs", []):
                f.write(f"   epoch {e['epoch']}: {e['seconds']} s, val loss {e['val_loss']}\n")
            if r.get("inductor_counters"):
                f.write(f"   inductor counters: {r['inductor_counters']}\n")
            if r.get("traceback"):
                f.write(r["traceback"] + "\n")
            elif r.get("stderr_tail"):
                f.write("   last lines of its stderr:\n" + "".join(f"   | {l}\n" for l in r["stderr_tail"]))
            f.write("\n")


def run_variant(cmd, timeout):
    """cmd in its own process group, so that a timeout (or our own SIGTERM)
    kills it with the compile workers it started, whose inherited pipes would
    otherwise keep communicate() waiting. (returncode or None on timeout,
    stdout, stderr)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                         start_new_session=True)

    def kill_group(*_):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def on_term(signum, _frame):
        kill_group()
        sys.exit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        try:
            out, err = p.communicate(timeout=timeout)
            return p.returncode, out, err
        except subprocess.TimeoutExpired:
            kill_group()
            out, err = p.communicate()
            return None, out, err
    finally:
        kill_group()  # compile workers left behind by a finished variant
        signal.signal(signal.SIGTERM, previous)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="folder for cudagraph_crash.txt")
    ap.add_argument("--cfgcheck", help="the cfgcheck binary, whose --explain classifies each variant's error")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to exercise the machinery only")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, in order")
    ap.add_argument("--timeout", type=int, default=420, help="seconds per variant (default 420)")
    ap.add_argument("--total", type=int, default=int(os.environ.get("STEP_LIMIT") or 0),
                    help="seconds for all variants (default: $STEP_LIMIT, set by run.sh; 0: no limit)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.device)
    if not args.out or not args.cfgcheck:
        ap.error("--out and --cfgcheck are required")
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; known: {list(VARIANTS)}")
    import torch
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("cudagraph_crash: no CUDA device", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "cudagraph_crash.txt")
    results = []
    start = time.monotonic()
    for i, name in enumerate(names):
        limit = args.timeout
        if args.total > 0:
            left = int(args.total - MARGIN - (time.monotonic() - start))
            if left < LEAST:
                rest = names[i:]
                for n in rest:
                    results.append({"variant": n, "outcome": f"not run: {args.total}s for all variants spent "
                                    f"(CRASH_VARIANTS={','.join(rest)} run.sh --only crash runs them)"})
                    print(f"cudagraph_crash: {n}: {results[-1]['outcome']}", file=sys.stderr)
                report(path, results)
                break
            limit = min(limit, left)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--device", args.device]
        started = time.monotonic()
        code, out, stderr = run_variant(cmd, limit)
        lines = out.strip().splitlines()
        if code is None:
            more = ("CRASH_TIMEOUT gives a variant more" if limit >= args.timeout else
                    f"the step's time ran out: CRASH_VARIANTS={name} run.sh --only crash gives it {args.timeout}s")
            r = {"variant": name, "error": f"timed out after {limit}s, still compiling or running ({more})"}
        elif lines and lines[-1].startswith("{"):
            r = json.loads(lines[-1])
        else:
            r = {"variant": name, "error": f"exit {code}, no result"}
        r["seconds"] = round(time.monotonic() - started, 1)
        r["stderr_tail"] = stderr.strip().splitlines()[-8:]
        err = (r.get("error") or "").strip()
        if code is None:
            r["outcome"] = "TIMED OUT: " + err
        elif not err:
            r["outcome"] = "completed 2 epochs without the error"
        elif failure_class(args.cfgcheck, r.get("traceback") or err) == CLASS:
            r["outcome"] = "REPRODUCED: " + first_line(err, 300)
        else:
            r["outcome"] = "failed otherwise: " + first_line(err, 300)
        results.append(r)
        print(f"cudagraph_crash: {name}: {r['outcome']}", file=sys.stderr)
        report(path, results)
    reproduced = [r["variant"] for r in results if r["outcome"].startswith("REPRODUCED")]
    if reproduced:
        print(f"cudagraph_crash: reproduced in {', '.join(reproduced)} (of {len(results)} variants)", file=sys.stderr)
        return 0 if args.device.startswith("cuda") else 2
    counts = {}
    for r in results:
        kind = r["outcome"].split(":")[0]
        counts[kind] = counts.get(kind, 0) + 1
    print(f"cudagraph_crash: not reproduced in any of {len(results)} variants "
          f"({', '.join(f'{k}: {n}' for k, n in counts.items())}); see {path}", file=sys.stderr)
    return 1 if args.device.startswith("cuda") else 2


if __name__ == "__main__":
    sys.exit(main())
