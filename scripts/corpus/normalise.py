"""The one place where a corpus output's volatile parts are normalised.

Two runs of the same binaries must give byte-identical OUT trees, so
everything that changes from run to run (or from checkout to checkout) is
replaced by a placeholder here, and nothing else: a rule that matched more
than the volatile part would hide the very changes the corpus exists to
catch. Each rule says what it is for; `normalise` applies them in order.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field


@dataclass
class Context:
    """What a run's outputs may mention that differs between runs."""

    scratch: str  # the run's temp dir (fixtures, run dirs, sweeps)
    bin_dir: str  # the binaries under test
    repo: str  # the checkout the corpus runs in
    home: str = ""  # HOME given to the tools (inside scratch)
    hostname: str = ""
    # Other spellings of the paths above (symlinks resolved).
    aliases: dict[str, str] = field(default_factory=dict)

    def paths(self) -> list[tuple[str, str]]:
        """(path, placeholder), longest first so a path inside another
        is replaced before the one that holds it."""
        pairs = [(self.scratch, "$TMP"), (self.bin_dir, "$BIN"), (self.repo, "$REPO")]
        if self.home:
            pairs.append((self.home, "$HOME"))
        pairs += list(self.aliases.items())
        pairs = [(p.rstrip("/"), v) for p, v in pairs if p and p.rstrip("/")]
        return sorted(pairs, key=lambda pv: -len(pv[0]))


TOOLS = r"(?:memdiag|cfgcheck|verify-fixes|train)"

# Timing columns of the CSV files the tools write (train-metrics/v1's
# metrics.csv, sweep-report/v2's CSV): dropped whole.
CSV_TIME_COLUMNS = ("seconds", "samples_per_s", "time_s")

# (what it is for, pattern, replacement), applied in order after the paths.
RULES: list[tuple[str, re.Pattern[str], str]] = [
    (
        "ISO 8601 timestamps: memdiag's report time, --watch rows, the journal's"
        " datetime_start/complete",
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
        ),
        "<TIME>",
    ),
    (
        "an epoch line's duration: `Time: 0.06s`",
        re.compile(r"\bTime: \d+(?:\.\d+)?s\b"),
        "Time: <T>s",
    ),
    (
        "wall-clock totals: `in 2.7 s` (verify-fixes' smoke run, the sweep's end)",
        re.compile(r"\bin \d+(?:\.\d+)? ?s\b"),
        "in <T> s",
    ),
    (
        "`took 3.1 s`, `took 120 ms`",
        re.compile(r"\btook \d+(?:\.\d+)? ?(?:ms|s)\b"),
        "took <T>",
    ),
    (
        "timing fields in YAML and JSON (summary.yaml, the sweep report, the"
        " journal's user attributes)",
        re.compile(
            r"(\"?\b(?:seconds|seconds_before|time_s|samples_per_s)\"?\s*:\s*)"
            r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
        ),
        r"\1<T>",
    ),
    (
        "process ids: `pid 1234`, `(pid 1234)`, the journal's worker pid and"
        " start time",
        re.compile(r"\b(pid:?\s+)\d+\b|(\"pid\"\s*:\s*)\d+|(\"start\"\s*:\s*)\d+"),
        lambda m: (m.group(1) or m.group(2)) + "<PID>" if m.group(3) is None else m.group(3) + "<START>",
    ),
    (
        "UUIDs (a sweep worker's id is uuid-pid)",
        re.compile(
            r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?:-\d+)?\b"
        ),
        "<UUID>",
    ),
    (
        "the build's version (`memdiag 0.1.0`, train info's train_version);"
        " torch's version stays",
        re.compile(
            rf"(?m)^({TOOLS}) \d+\.\d+\.\d+\S*$"
            r"|(\"?train_version\"?\s*:\s*\"?)\d+\.\d+\.\d+[^\"\s,]*"
        ),
        lambda m: (m.group(1) + " <VERSION>") if m.group(1) else m.group(2) + "<VERSION>",
    ),
    (
        "free disk space in verify-fixes' disk check",
        re.compile(r"(writable; )\d+ MiB free"),
        r"\1<N> MiB free",
    ),
]


def _apply(rule: tuple, text: str) -> str:
    _, pattern, repl = rule
    return pattern.sub(repl, text)


def drop_csv_columns(text: str, columns=CSV_TIME_COLUMNS) -> str:
    """Drops the named columns from a CSV whose first line is its header;
    any other text comes back unchanged."""
    first = text.split("\n", 1)[0]
    names = first.split(",")
    if not any(n in columns for n in names) or not all(
        re.fullmatch(r"[A-Za-z0-9_.\-]+", n) for n in names
    ):
        return text
    keep = [i for i, n in enumerate(names) if n not in columns]
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error:
        return text
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    for row in rows:
        w.writerow([row[i] for i in keep if i < len(row)])
    result = out.getvalue()
    return result if text.endswith("\n") else result.rstrip("\n")


BOX_ROW = re.compile(r"^[│|].*[│|]$")
BOX_RULE = re.compile(r"^[┌├╞└+][─═┬┼╪┴+\-]*[┐┤╡┘+]$")


def blank_table_columns(text: str, columns) -> str:
    """In a box-drawn table (comfy-table's), replaces the cells of the named
    columns with `<T>` and drops every cell's padding and rule widths, so a
    timing whose width changed cannot move the other columns. The first row
    after a table's top rule is its header. Other lines stay as they are."""
    out: list[str] = []
    blank: set[int] | None = None
    for line in text.split("\n"):
        if BOX_RULE.match(line):
            if line.startswith("┌"):
                blank = None
            out.append(line[0] + "─" + line[-1])
        elif BOX_ROW.match(line):
            cells = [c.strip() for c in re.split(r"[┆│|]", line[1:-1])]
            if blank is None:
                blank = {i for i, c in enumerate(cells) if c in columns}
            else:
                cells = ["<T>" if i in blank and c else c for i, c in enumerate(cells)]
            out.append("│ " + " ┆ ".join(cells) + " │")
        else:
            out.append(line)
    return "\n".join(out)


def normalise(text: str, ctx: Context, table_columns=()) -> str:
    """Returns `text` with its volatile parts replaced (see RULES), in order:
    1. the scratch dir, the binaries' dir, the repository and HOME become
       $TMP, $BIN, $REPO and $HOME (longest first);
    2. the host name, as a whole word, becomes <HOST>;
    3. each rule of RULES (timestamps, durations, timing fields, pids, UUIDs,
       the build's version, free disk space);
    4. timing columns of a CSV with a header (CSV_TIME_COLUMNS) are dropped;
    5. with `table_columns`, those columns of box-drawn tables are blanked
       and the tables' padding dropped (for tables holding a timing)."""
    for path, placeholder in ctx.paths():
        text = text.replace(path, placeholder)
    if ctx.hostname:
        text = re.sub(
            rf"(?<![\w.\-/]){re.escape(ctx.hostname)}(?![\w\-/])", "<HOST>", text
        )
    for rule in RULES:
        text = _apply(rule, text)
    text = drop_csv_columns(text)
    if table_columns:
        text = blank_table_columns(text, set(table_columns))
    return text
