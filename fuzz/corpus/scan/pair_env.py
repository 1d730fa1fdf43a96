import os
import sys

# Left on from a debugging session: every run pays for it.
os.environ["CUDA_LAUNCH_BLOCKING"] = "1"

if "--debug" in sys.argv:
    # Only when asked for: not every run.
    os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")
