"""A training script's flags as Hugging Face's HfArgumentParser defines them
from TrainingArguments: prints what argparse read as JSON (no
TrainingArguments is built: its checks want a GPU for bf16)."""
import json

from transformers import HfArgumentParser, TrainingArguments

args = HfArgumentParser(TrainingArguments).parse_args()
keys = ["per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing",
        "torch_compile_mode", "bf16", "fp16", "output_dir", "resume_from_checkpoint"]
print(json.dumps({k: getattr(args, k) for k in keys}))
