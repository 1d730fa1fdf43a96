"""A training script's flags as most plain argparse scripts define them: no
help strings (so its --help prints no default), and a `--checkpointing`
switch over torch.utils.checkpoint (imported where it is used, so the
script starts without torch). Prints what it read as JSON."""
import argparse
import json


def recompute(block, x):
    from torch.utils.checkpoint import checkpoint

    return checkpoint(block, x, use_reentrant=False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--checkpointing", action="store_true")
    print(json.dumps(vars(p.parse_args())))


if __name__ == "__main__":
    main()
