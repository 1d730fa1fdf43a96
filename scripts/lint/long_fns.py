#!/usr/bin/env python3
"""List the workspace's non-test Rust functions longer than a limit.

Usage: python scripts/lint/long_fns.py [--limit 80] [--max N] [ROOT]

A function's length is from its `fn` line to its closing brace. Test code is
left out: files under tests/, fuzz/, and anything after a `#[cfg(test)]`
line in a file. With --max N it exits 1 when more than N functions are over
the limit (issue 31's budget is 5).
"""
import argparse
import pathlib
import re
import sys

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+(\w+)")


def functions(path):
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("#[cfg(test)]"):
            break
        m = FN.match(line)
        if not m:
            i += 1
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            code = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j].split("//")[0])
            code = re.sub(r"'(\\.|[^'\\])'", "''", code)
            if not started and ";" in code and "{" not in code:
                break  # a declaration without a body (trait method)
            depth += code.count("{") - code.count("}")
            if "{" in code:
                started = True
            if started and depth <= 0:
                out.append((m.group(7), i + 1, j - i + 1))
                break
            j += 1
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--max", type=int, default=None)
    ap.add_argument("root", nargs="?", default=".")
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    long = []
    for path in sorted(root.rglob("*.rs")):
        rel = path.relative_to(root)
        parts = rel.parts
        if parts[0] in ("target", "fuzz", "packaging") or "tests" in parts or ".venv" in parts:
            continue
        if path.name in ("tests.rs",):
            continue
        for name, line, n in functions(path):
            if n > args.limit:
                long.append((n, f"{rel}:{line}", name))
    for n, where, name in sorted(long, reverse=True):
        print(f"{n:5} {where} {name}")
    print(f"{len(long)} function(s) over {args.limit} lines", file=sys.stderr)
    if args.max is not None and len(long) > args.max:
        sys.exit(1)


if __name__ == "__main__":
    main()
