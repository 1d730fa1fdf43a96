#!/usr/bin/env python3
"""Compares two corpus runs (scripts/corpus/run.py) case by case.

    scripts/corpus/compare.py A B [--allow FILE] [--max-lines N] [--summary-only]

Reports every case whose stdout, stderr, exit, cmd or captured files differ,
each with a unified diff trimmed to --max-lines lines per file, then a
summary. Exit 0 when nothing differs (or only what --allow accepts), 1 when
something does, 2 on bad arguments.

An allow file lists the expected differences of a reshape, one per line:

    CASE-GLOB[:FILE-GLOB]  REGEX        # comment

CASE-GLOB matches case ids (fnmatch: `*`, `?`, `[...]`); FILE-GLOB, if
given, the file within the case (`stdout`, `stderr`, `exit`, `cmd`,
`files/summary.yaml`, ...). A difference in a file is accepted when every
changed line of its diff (each `-` and `+` line, marker included, so
`^-` means a removed line) matches, with re.search, the REGEX of an entry
that matches the case and the file. A case present in only one run counts as
one changed line `<only in A>` or `<only in B>`. Entries that accepted
nothing are listed at the end, so a stale allowance shows.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import re
import sys
from dataclasses import dataclass
from pathlib import Path

MARKER = ".corpus-run"


@dataclass
class Allow:
    case: str
    file: str
    regex: re.Pattern[str]
    line: int  # in the allow file, for messages
    used: bool = False

    def covers(self, case: str, file: str) -> bool:
        return fnmatch.fnmatchcase(case, self.case) and fnmatch.fnmatchcase(file, self.file)


def parse_allow(text: str, name: str = "allow") -> list[Allow]:
    """Parses an allow file (see the module doc); raises ValueError naming
    the line of a malformed entry."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise ValueError(f"{name}:{n}: expected `CASE-GLOB[:FILE-GLOB] REGEX`, found {raw!r}")
        target, pattern = parts
        # A trailing comment is one preceded by whitespace; `#` inside a
        # regex needs `\#`.
        pattern = re.split(r"\s+#", pattern, maxsplit=1)[0].rstrip()
        case, _, file = target.partition(":")
        try:
            regex = re.compile(pattern)
        except re.error as e:
            raise ValueError(f"{name}:{n}: bad regex {pattern!r}: {e}") from None
        out.append(Allow(case=case, file=file or "*", regex=regex, line=n))
    return out


def changed_lines(diff: list[str]) -> list[str]:
    """The `-` and `+` lines of a unified diff, markers kept, headers not."""
    return [l for l in diff if l[:1] in "+-" and not l.startswith(("+++", "---"))]


def accepted(case: str, file: str, lines: list[str], allows: list[Allow]) -> bool:
    """Whether every changed line is matched by an entry covering the file;
    marks the entries that matched."""
    mine = [a for a in allows if a.covers(case, file)]
    if not mine or not lines:
        return False
    hits = []
    for line in lines:
        a = next((a for a in mine if a.regex.search(line)), None)
        if a is None:
            return False
        hits.append(a)
    for a in hits:
        a.used = True
    return True


def case_files(d: Path) -> dict[str, Path]:
    if not d.is_dir():
        return {}
    return {str(p.relative_to(d)): p for p in sorted(d.rglob("*")) if p.is_file()}


def read(p: Path | None) -> list[str]:
    if p is None:
        return ["<no such file>"]
    return p.read_text(encoding="utf-8", errors="backslashreplace").splitlines()


def trim(diff: list[str], max_lines: int) -> list[str]:
    if len(diff) <= max_lines:
        return diff
    return diff[:max_lines] + [f"... {len(diff) - max_lines} more diff lines"]


def compare(a: Path, b: Path, allows: list[Allow], max_lines: int, out=sys.stdout,
            summary_only: bool = False) -> dict[str, list[str]]:
    """Compares two OUT trees; returns the case ids by outcome:
    same, differ, allowed, only_a, only_b."""
    ids_a = {p.name for p in a.iterdir() if p.is_dir()}
    ids_b = {p.name for p in b.iterdir() if p.is_dir()}
    result: dict[str, list[str]] = {k: [] for k in ("same", "differ", "allowed", "only_a", "only_b")}
    for cid in sorted(ids_a | ids_b):
        if cid not in ids_b or cid not in ids_a:
            side = "A" if cid in ids_a else "B"
            key = "only_a" if side == "A" else "only_b"
            if accepted(cid, "*", [f"<only in {side}>"], allows):
                result["allowed"].append(cid)
            else:
                result[key].append(cid)
                if not summary_only:
                    print(f"== {cid}: only in {side}", file=out)
            continue
        fa, fb = case_files(a / cid), case_files(b / cid)
        shown, allowed_here, differs = [], False, False
        for name in sorted(set(fa) | set(fb)):
            pa, pb = fa.get(name), fb.get(name)
            if pa and pb and pa.read_bytes() == pb.read_bytes():
                continue
            diff = list(difflib.unified_diff(read(pa), read(pb), f"A/{cid}/{name}", f"B/{cid}/{name}",
                                             n=2, lineterm=""))
            if not diff:
                # Same lines, different bytes: line endings or the last newline.
                diff = [f"--- A/{cid}/{name}", f"+++ B/{cid}/{name}", "-<line endings differ>",
                        "+<line endings differ>"]
            if accepted(cid, name, changed_lines(diff), allows):
                allowed_here = True
                continue
            differs = True
            shown += trim(diff, max_lines)
        if differs:
            result["differ"].append(cid)
            if not summary_only:
                print(f"== {cid}", file=out)
                print("\n".join(shown), file=out)
        elif allowed_here:
            result["allowed"].append(cid)
        else:
            result["same"].append(cid)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path, help="the run before (run.py's OUT)")
    ap.add_argument("b", type=Path, help="the run after")
    ap.add_argument("--allow", type=Path, help="expected differences (see above)")
    ap.add_argument("--max-lines", type=int, default=40, help="diff lines shown per file [default: 40]")
    ap.add_argument("--summary-only", action="store_true", help="print only the summary")
    args = ap.parse_args()
    for d in (args.a, args.b):
        if not (d / MARKER).is_file():
            print(f"compare.py: {d}: not a corpus run (no {MARKER})", file=sys.stderr)
            return 2
    allows: list[Allow] = []
    if args.allow:
        try:
            allows = parse_allow(args.allow.read_text(), str(args.allow))
        except (OSError, ValueError) as e:
            print(f"compare.py: {e}", file=sys.stderr)
            return 2
    r = compare(args.a, args.b, allows, args.max_lines, summary_only=args.summary_only)
    total = sum(len(v) for v in r.values())
    print(f"{total} cases: {len(r['same'])} identical, {len(r['differ'])} differ, "
          f"{len(r['allowed'])} differ as allowed, {len(r['only_a'])} only in A, {len(r['only_b'])} only in B")
    for name in ("differ", "allowed", "only_a", "only_b"):
        if r[name]:
            print(f"{name}: {' '.join(r[name])}")
    for a in allows:
        if not a.used:
            print(f"compare.py: {args.allow}:{a.line}: accepted no difference", file=sys.stderr)
    return 1 if r["differ"] or r["only_a"] or r["only_b"] else 0


if __name__ == "__main__":
    sys.exit(main())
