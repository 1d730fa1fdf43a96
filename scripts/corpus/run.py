#!/usr/bin/env python3
"""Runs the behaviour corpus: a fixed list of a few hundred invocations of
memdiag, cfgcheck, verify-fixes and train (cases.py), and writes what each
printed, normalised, so that the outputs of two builds can be diffed.

    scripts/corpus/run.py --bin DIR --out OUT [--jobs N] [--only REGEX] [--list]

DIR holds the four binaries under test. For each case OUT/<case-id>/ gets
`cmd` (the argv as text), `stdout`, `stderr`, `exit` (the code, or
`signal N`) and, where a case names them, `files/<name>` (files the run
wrote: summary.yaml, metrics.csv, a sweep's journal, --fix's input after
the run). Every case runs from the repository root with a fixed environment
(TZ=UTC, LANG=C.UTF-8, NO_COLOR, TERM=dumb, HOME and TMPDIR in the scratch
dir, none of the caller's allocator or fault variables), stdin from
/dev/null unless the case gives a file or a pipe, and never a terminal.
Inputs are the repository's configs, GPU profiles and fuzz seeds, plus the
synthetic fixtures of fixtures.py written into a fresh scratch dir.
Volatile parts (timestamps, durations, paths, pids, the host name, the
build's version) are replaced in one function, normalise.normalise: two runs
of the same binaries give identical OUT trees.

Before and after a reshape (scripts/corpus/README.md has the details):

    git worktree add /tmp/before BASE_REV
    (cd /tmp/before && cargo build --bins)           # debug is enough
    scripts/corpus/run.py --bin /tmp/before/target/debug --out /tmp/corpus-before
    cargo build --bins
    scripts/corpus/run.py --bin target/debug --out /tmp/corpus-after
    scripts/corpus/compare.py /tmp/corpus-before /tmp/corpus-after [--allow FILE]

The whole corpus takes a few minutes on 2 cores with debug binaries
(--jobs 2). Exit 0 when every case ran (whatever its own exit code), 2 on a
bad argument or a corpus that could not run.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cases as corpus  # noqa: E402
import fixtures  # noqa: E402
from normalise import Context, normalise  # noqa: E402

REPO = HERE.parents[1]
TOOLS = ("memdiag", "cfgcheck", "verify-fixes", "train")
MARKER = ".corpus-run"


def environment(scratch: Path) -> dict[str, str]:
    """The fixed environment every case starts from (its own `env` added)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "TZ": "UTC",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }


class Runner:
    def __init__(self, bin_dir: Path, out: Path, scratch: Path):
        self.bin_dir, self.out, self.scratch = bin_dir, out, scratch
        self.fx = scratch / "fx"
        self.env = environment(scratch)
        aliases = {}
        for path, name in ((scratch, "$TMP"), (bin_dir, "$BIN"), (REPO, "$REPO")):
            real = os.path.realpath(path)
            if real != str(path):
                aliases[real] = name
        self.ctx = Context(scratch=str(scratch), bin_dir=str(bin_dir), repo=str(REPO),
                           home=self.env["HOME"], hostname=socket.gethostname(), aliases=aliases)
        self.seconds: dict[str, float] = {}

    def dirs(self, c: corpus.Case) -> dict[str, Path]:
        return {"FX": self.fx, "W": self.scratch / "w" / c.id,
                "G": self.scratch / "g" / (c.group or c.id), "REPO": REPO}

    def expand(self, text: str, d: dict[str, Path]) -> str:
        return re.sub(r"\{(FX|W|G)\}", lambda m: str(d[m.group(1)]), text)

    def argv(self, words: list[str], d: dict[str, Path]) -> list[str]:
        tool = words[0]
        if tool not in TOOLS:
            raise ValueError(f"not a tool under test: {tool}")
        return [str(self.bin_dir / tool)] + [self.expand(w, d) for w in words[1:]]

    def command_text(self, c: corpus.Case, d: dict[str, Path]) -> str:
        """The argv as a shell line (tools by name, paths normalised)."""
        words = [c.argv[0]] + [self.expand(w, d) for w in c.argv[1:]]
        text = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(c.env.items()))
        text = (text + " " if text else "") + shlex.join(words)
        if c.pipe:
            producer = [c.pipe[0]] + [self.expand(w, d) for w in c.pipe[1:]]
            text = shlex.join(producer) + " | " + text
        elif c.stdin:
            text += " < " + shlex.quote(self.expand(c.stdin, d))
        return normalise(text, self.ctx) + "\n"

    def stdin_bytes(self, c: corpus.Case, d: dict[str, Path]) -> bytes:
        if c.pipe:
            p = subprocess.run(self.argv(c.pipe, d), cwd=REPO, env=self.env, stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=c.timeout)
            return p.stdout
        if c.stdin:
            path = Path(self.expand(c.stdin, d))
            return (path if path.is_absolute() else REPO / path).read_bytes()
        return b""

    def run_case(self, c: corpus.Case) -> None:
        d = self.dirs(c)
        d["W"].mkdir(parents=True, exist_ok=True)
        d["G"].mkdir(parents=True, exist_ok=True)
        if c.setup:
            c.setup(d)
        started = time.monotonic()
        stdout, stderr, exit_text = self.execute(c, d)
        self.seconds[c.id] = time.monotonic() - started
        dest = self.out / c.id
        dest.mkdir(parents=True)
        write(dest / "cmd", self.command_text(c, d))
        write(dest / "stdout", normalise(decode(stdout), self.ctx, c.table_columns))
        write(dest / "stderr", normalise(decode(stderr), self.ctx, c.table_columns))
        write(dest / "exit", exit_text + "\n")
        for name, path in c.files:
            p = Path(self.expand(path, d))
            text = normalise(decode(p.read_bytes()), self.ctx) if p.is_file() else "<no such file>\n"
            (dest / "files").mkdir(exist_ok=True)
            write(dest / "files" / name, text)

    def execute(self, c: corpus.Case, d: dict[str, Path]) -> tuple[bytes, bytes, str]:
        env = {**self.env, **c.env}
        data = self.stdin_bytes(c, d)
        proc = subprocess.Popen(self.argv(c.argv, d), cwd=REPO, env=env,
                                stdin=subprocess.PIPE if (c.pipe or c.stdin) else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(data if (c.pipe or c.stdin) else None, timeout=c.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            return stdout, stderr, f"timeout after {c.timeout} s"
        finally:
            # Whatever the case started in its session (a sweep's trials) ends with it.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        rc = proc.returncode
        return stdout, stderr, f"signal {-rc}" if rc < 0 else str(rc)

    def run_group(self, group: list[corpus.Case]) -> list[str]:
        failed = []
        for c in group:
            try:
                self.run_case(c)
            except Exception as e:  # a broken case must not stop the others
                failed.append(f"{c.id}: {type(e).__name__}: {e}")
        return failed


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def groups(cases: list[corpus.Case]) -> list[list[corpus.Case]]:
    """Cases by group, in the order of their first case."""
    by: dict[str, list[corpus.Case]] = {}
    for c in cases:
        by.setdefault(c.group or c.id, []).append(c)
    return list(by.values())


def prepare_out(out: Path) -> None:
    """OUT must be new, empty, or an earlier corpus run (replaced)."""
    if out.exists():
        if not out.is_dir():
            sys.exit(f"run.py: {out}: not a directory")
        if any(out.iterdir()) and not (out / MARKER).exists():
            sys.exit(f"run.py: {out}: not empty and not a corpus run; not replacing it")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("written by scripts/corpus/run.py\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", type=Path, help="the directory holding the four binaries under test")
    ap.add_argument("--out", type=Path, help="where to write OUT/<case-id>/{cmd,stdout,stderr,exit}")
    ap.add_argument("--jobs", type=int, default=2, help="groups of cases run at once [default: 2]")
    ap.add_argument("--only", help="run only the cases whose id matches this regex (for debugging)")
    ap.add_argument("--list", action="store_true", help="print the case ids and exit")
    ap.add_argument("--keep-scratch", action="store_true", help="keep the scratch dir (its path is printed)")
    args = ap.parse_args()
    cases = corpus.all_cases()
    if args.only:
        cases = [c for c in cases if re.search(args.only, c.id)]
    if args.list:
        print("\n".join(c.id for c in cases))
        return 0
    if not args.bin or not args.out:
        ap.error("--bin and --out are required")
    bin_dir = args.bin.resolve()
    missing = [t for t in TOOLS if not os.access(bin_dir / t, os.X_OK)]
    if missing:
        sys.exit(f"run.py: {bin_dir}: no executable {', '.join(missing)}")
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    out = args.out.resolve()
    prepare_out(out)
    # An aborted train (a fault case) must not leave a core file in the repo.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # A fixed-length name: table widths do not depend on it.
    scratch = Path(tempfile.mkdtemp(prefix="corpus-", dir="/tmp"))
    started = time.monotonic()
    try:
        for sub in ("home", "tmp"):
            (scratch / sub).mkdir()
        fixtures.write(scratch / "fx", REPO)
        runner = Runner(bin_dir, out, scratch)
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            failed = [f for fs in pool.map(runner.run_group, groups(cases)) for f in fs]
    finally:
        if args.keep_scratch:
            print(f"scratch kept: {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.monotonic() - started
    counts = Counter(c.argv[0] for c in cases)
    print(f"{len(cases)} cases in {elapsed:.0f} s ({', '.join(f'{t} {counts[t]}' for t in TOOLS)})"
          f" -> {out}")
    slow = sorted(runner.seconds.items(), key=lambda kv: -kv[1])[:5]
    print("slowest: " + ", ".join(f"{k} {v:.1f} s" for k, v in slow))
    for f in failed:
        print(f"run.py: case not run: {f}", file=sys.stderr)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
