"""A training script's flags as argparse defines them: prints what it read
as JSON (tests/knobs.rs turns its command and runs it)."""
import argparse
import json

p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
p.add_argument("data")
p.add_argument("--batch-size", "-b", type=int, default=64, help="examples per step")
p.add_argument("--grad_accum", type=int, default=1, help="steps per optimizer update")
p.add_argument("--gradient-checkpointing", action="store_true", help="recompute activations")
p.add_argument("--mixed_precision", choices=["no", "fp16", "bf16"], default="no", help="autocast dtype")
p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True, help="torch.compile the model")
p.add_argument("--compile_mode", default="max-autotune", help="torch.compile's mode, one of default, reduce-overhead, max-autotune: a long help that wraps at 80 columns")
p.add_argument("--output_dir", help="where checkpoints go")
p.add_argument("--lr", type=float)
print(json.dumps(vars(p.parse_args())))
