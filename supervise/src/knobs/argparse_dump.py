# trainguard's reader of a Python program's flags (supervise::knobs): runs
# the program as __main__ up to its first argparse parse of its own command
# line, prints that parser's options as one JSON line after a marker, and
# exits there, before the program does anything else. A program that never
# parses its command line with argparse runs on as it would (the caller's
# timeout ends it). Hugging Face's HfArgumentParser is an argparse parser.
#
# argv: MARKER, then `-m MODULE ARGS...` or `SCRIPT ARGS...`.
import argparse
import importlib.util
import json
import os
import runpy
import sys

MARKER = sys.argv[1]
TARGET = sys.argv[2:]


def text(value):
    return None if value is None else str(value)


def action(a):
    nargs = a.nargs if a.nargs is None or isinstance(a.nargs, int) else str(a.nargs)
    choices = None
    if a.choices is not None:
        try:
            choices = [str(c) for c in a.choices]
        except TypeError:
            choices = None
    return {
        "option_strings": list(a.option_strings),
        "dest": a.dest,
        # As its --help would print it (`%(default)s`).
        "default": None if a.default is argparse.SUPPRESS else str(a.default),
        "type": None if a.type is None else getattr(a.type, "__name__", str(a.type)),
        "action": type(a).__name__,
        "nargs": nargs,
        "const": text(a.const),
        "choices": choices,
        "help": a.help if isinstance(a.help, str) and a.help != argparse.SUPPRESS else None,
    }


def of_command_line(args):
    """Whether a parse is of the program's own command line: no args (argparse
    reads sys.argv), or sys.argv's (HfArgumentParser passes them, after the
    arguments of an args file)."""
    if args is None:
        return True
    own = sys.argv[1:]
    args = list(args)
    return len(own) > 0 and args[-len(own):] == own


# A first parser without -h that only picks its own options out of the
# command line (timm's `--config` pre-parser) is let through: its options
# join those of the next parser, whatever that one is given to parse.
EARLIER = []


def dump(parser):
    actions = [action(a) for a in parser._actions] + EARLIER
    out = {"program": PROGRAM, "actions": actions}
    os.write(1, ("\n" + MARKER + json.dumps(out) + "\n").encode())
    os._exit(0)


def caught(original, known):
    def parse(self, args=None, namespace=None):
        if EARLIER:
            dump(self)
        if of_command_line(args):
            if known and not self.add_help:
                EARLIER.extend(action(a) for a in self._actions)
                return original(self, args, namespace)
            dump(self)
        return original(self, args, namespace)

    return parse


argparse.ArgumentParser.parse_known_args = caught(argparse.ArgumentParser.parse_known_args, True)
argparse.ArgumentParser.parse_args = caught(argparse.ArgumentParser.parse_args, False)

if TARGET[0] == "-m":
    spec = importlib.util.find_spec(TARGET[1])
    if spec is not None and spec.submodule_search_locations is not None:
        spec = importlib.util.find_spec(TARGET[1] + ".__main__")
    PROGRAM = None if spec is None else spec.origin
    sys.argv = TARGET[1:]
    # As `python -m`: the working directory first on the path.
    sys.path[0] = os.getcwd()
    runpy.run_module(TARGET[1], run_name="__main__", alter_sys=True)
else:
    PROGRAM = os.path.abspath(TARGET[0])
    sys.argv = TARGET
    # As `python SCRIPT`: the script's directory first on the path.
    sys.path[0] = os.path.dirname(PROGRAM)
    runpy.run_path(TARGET[0], run_name="__main__")
