"""The address-space budget the test programs run out of memory under: a
real limit (RLIMIT_AS) of what the process maps at the call plus a budget.

What a run needs past that point differs between machines (the torch
build's kernels and buffers, the Python), so a test does not guess a
budget: it runs the sizes that must fit and fail once each with
$ADDRESS_SPACE_PROBE naming a file, where no limit is set and the peak
past the call is written at exit, and puts the budget between them
(testkit::budget).
"""
import atexit
import ctypes
import json
import os
import resource

PROBE = "ADDRESS_SPACE_PROBE"


def _vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def limit(budget_mib):
    libc = ctypes.CDLL(None)
    # One malloc arena (M_ARENA_MAX): a thread's first malloc would reserve
    # 64 MiB of address space for an arena of its own wherever there is
    # room, so what fits would hang on which threads ran first.
    libc.mallopt(-8, 1)
    # A fixed mmap threshold (M_MMAP_THRESHOLD): glibc's moving one keeps
    # freed blocks mapped.
    libc.mallopt(-3, 2**20)
    mapped = _vm("VmSize")
    probe = os.environ.get(PROBE)
    if not probe:
        limit = mapped + budget_mib * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        return
    before = _vm("VmPeak")

    def record():
        # VmPeak is the process's high-water mark: past the earlier one it
        # is this run's need exactly, else only a bound from above.
        peak = _vm("VmPeak")
        with open(probe, "w") as f:
            json.dump({"need_mib": (peak - mapped) / 2**20, "exact": peak > before}, f)

    atexit.register(record)
