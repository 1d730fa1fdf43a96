#!/usr/bin/env python3
"""Step cudagraph: seed 001's crash for real, under `train run --auto-fix`.

compile_ckpt.py (per-frame checkpointing, torch.compile with its
--torch_compile_mode, validation after each epoch) starts in mode
reduce-overhead (CUDA graphs) with the CUDA graph settings of the PyTorch
the seed ran (--legacy_cudagraphs), with non-reentrant checkpointing and,
if that does not reproduce the crash and time is left, with reentrant
checkpointing (that PyTorch's default). The first attempt must end in the
cuda-graph-pointer class, named from the real message (its exact text is
kept); the second, in mode `default` (checkpointing kept), must complete.
Today's torch may re-record the graphs instead of raising: then the step's
result is "not reproduced" (exit 3) with what the run did, and --auto-fix
is recorded as not exercised.

  cudagraph_fix.py --bin BIN --python PY --out DIR [--dry-run]
"""

import argparse
import os
import re
import sys
import time

from gpulib import Checks, common_args, refuse_faults, run, summary, torch_version

HERE = os.path.dirname(os.path.abspath(__file__))


def error_lines(run_dir):
    """The lines of output.log that carry a CUDA graph error's text."""
    log = os.path.join(run_dir, "output.log")
    if not os.path.exists(log):
        return []
    with open(log, errors="replace") as f:
        text = f.read()
    keep = re.compile(r"data pointer changed|static input|cudagraph|CUDA ?graph|Error", re.I)
    return [l.rstrip() for l in text.splitlines() if keep.search(l)][-12:]


def attempt(a, c, variant, timeout):
    """One `train run --auto-fix` of compile_ckpt.py in VARIANT (nonreentrant
    or reentrant checkpointing): its summary and figures."""
    run_dir = os.path.join(a.out, f"cudagraph-{variant}")
    cmd = [os.path.join(a.bin, "train"), "run", "--auto-fix", "--quiet", "--out", run_dir,
           "--", a.python, os.path.join(HERE, "compile_ckpt.py"), "--torch_compile", "--torch_compile_mode",
           "reduce-overhead", "--gradient_checkpointing", "--legacy_cudagraphs", "--epochs", "2" if a.dry_run else "3"] \
        + (["--use_reentrant"] if variant == "reentrant" else []) + (["--device", "cpu"] if a.dry_run else [])
    if timeout > 0:
        cmd[3:3] = ["--timeout", f"{timeout}s"]
    code, secs, out, err = run(cmd)
    with open(os.path.join(a.out, f"cudagraph-{variant}.err"), "w") as f:
        f.write(err)
    s = summary(run_dir) or {}
    legs = s.get("legs") or []
    fix = s.get("auto_fix") or {}
    c.figure(variant, {"exit": code, "seconds": round(secs, 1), "status": s.get("status"), "knobs": fix.get("knobs"),
                       "legs": [{"status": l.get("status"), "class": l.get("class"), "evidence": l.get("evidence"),
                                 "changed": l.get("changed"), "seconds": l.get("seconds")} for l in legs],
                       "error_lines": error_lines(run_dir)})
    return s, legs, fix, code, err


def main():
    ap = common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--variants", default="nonreentrant,reentrant",
                    help="checkpointing variants tried in order until one reproduces (default: nonreentrant,reentrant)")
    a = ap.parse_args()
    refuse_faults("cudagraph")
    c = Checks("cudagraph", a.out, a.dry_run)
    torch = torch_version(a.python)
    c.figure("torch", torch)
    limit = int(os.environ.get("STEP_LIMIT") or 0)
    start = time.monotonic()
    tried = []
    for variant in a.variants.split(","):
        left = int(limit - (time.monotonic() - start)) - 5 if limit else 0
        if limit and left < 40:
            tried.append(f"{variant}: not run ({limit}s spent)")
            continue
        s, legs, fix, code, err = attempt(a, c, variant, left)
        if not legs:
            c.check(f"{variant}: train run ran the script", False, f"exit {code}: {err.strip()[-300:]}")
            c.verdict("no summary")
        first = legs[0]
        if first.get("class") == "cuda-graph-pointer":
            c.figure("exact_text", first.get("evidence"))
            c.check("train run names the class from the real message", True, (first.get("evidence") or "")[:300])
            c.check("--auto-fix switched to compile mode default and the run completed",
                    s.get("status") == "finished" and len(legs) >= 2
                    and "default" in str((fix.get("knobs") or {}).get("compile_mode")),
                    f"status {s.get('status')}, knobs {fix.get('knobs')}, {fix.get('stopped')}")
            c.verdict(f"torch {torch}, {variant} checkpointing: reproduced: {(first.get('evidence') or '')[:200]}; "
                      f"fixed by {legs[-1].get('changed')}" + (f" (before: {'; '.join(tried)})" if tried else ""))
        said = (f"{variant}: ended {first.get('status')}" + (f" ({first.get('class')}: {(first.get('evidence') or '')[:160]})"
                                                            if first.get("class") else "")
                + f" in {first.get('seconds', 0):.0f}s")
        tried.append(said)
        if first.get("status") != "finished" and not a.dry_run:
            c.check(f"{variant}: the run failed only in a known way", False, said)
    note = (f"torch {torch}, reduce-overhead with checkpointing and the seed's CUDA graph settings: "
            f"{'; '.join(tried)}; --auto-fix not exercised")
    c.verdict(note, no_result=None if a.dry_run else "not reproduced")


if __name__ == "__main__":
    sys.exit(main())
