"""What every benchmark's result files say the same way: when, and the
command that produced them."""

import datetime
import os
import shlex
import subprocess
import sys
import tempfile
import time


def stamp():
    """The date line of a result table, in UTC."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def shown(path):
    """A path as a reader would type it: relative when under the working directory."""
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return shlex.quote(path if rel.startswith("..") else rel)


def command_line():
    """This run's command, to print beside its results."""
    return "python " + " ".join(shown(a) for a in sys.argv)


def first_line(text, width=160):
    """An error's first line, clipped (empty messages included)."""
    return (str(text).strip().splitlines() or [""])[0][:width]


def measured(cmd):
    """Run cmd with stdin closed: (wall ms, the child's own peak RSS in MiB,
    its stdout). The RSS comes from wait4, so it is this child's alone, not
    the most of all children so far. A non-zero exit ends the benchmark with
    the child's stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        ms = (time.perf_counter() - start) * 1000.0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            raise SystemExit(f"bench: {' '.join(cmd)} exited {p.returncode}:\n{err.read().decode(errors='replace')}")
        out.seek(0)
        return ms, usage.ru_maxrss / 1024.0, out.read().decode(errors="replace")
