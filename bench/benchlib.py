"""What every benchmark's result files say the same way: when, and the
command that produced them."""

import datetime
import os
import shlex
import sys


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
