"""An instant trial for the database tests: reads --x and --y (and waits
--sleep seconds, 0 by default), prints one metric line and exits. With TG_PROBE_ENV=FILE it appends what it sees of
PGPASSWORD to FILE (the trials must not inherit it)."""

import json
import os
import sys
import time

args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
x, y = float(args.get("x", 0)), int(float(args.get("y", 0)))
time.sleep(float(args.get("sleep", 0)))
probe = os.environ.get("TG_PROBE_ENV")
if probe:
    with open(probe, "a") as f:
        f.write(repr(os.environ.get("PGPASSWORD")) + "\n")
print(json.dumps({"epoch": 1, "val_loss": round((x - 1.0) ** 2 + 0.1 * y, 6)}), flush=True)
