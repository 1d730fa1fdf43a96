"""A small Hugging Face Trainer script, shaped as transformers' examples are:
HfArgumentParser over its own ModelArguments and TrainingArguments, so every
TrainingArguments flag works (`--per_device_train_batch_size 64`,
`--gradient_accumulation_steps 2`, `--activation_checkpointing`), or one
JSON/YAML file of them as its only argument (`python train.py args.yaml`).

The model is a wide two-layer MLP (its memory is mostly the activations,
so the batch decides what fits) on synthetic classification data, on the
CPU, in seconds; it defines `activation_checkpointing_enable` as
transformers' own models do (torch.utils.checkpoint over its hidden layer).
No download. At the end it prints one JSON line, `{"final_loss": ...}`: the
trained model's mean loss over the whole training set.

`--memory_budget_mib N` limits the process's address space (RLIMIT_AS) to
what it maps once the model is built plus N MiB, as a small machine would:
a batch whose activations do not fit then fails for real, with torch's
"DefaultCPUAllocator: can't allocate memory". With $ADDRESS_SPACE_PROBE
naming a file it sets no limit and writes there what the run needed past
that point (how the tests find a budget between two batches here).
"""
import atexit
import ctypes
import json
import os
import resource
import sys
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from transformers import HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    hidden_size: int = field(default=524288, metadata={"help": "Width of the hidden layer."})
    features: int = field(default=4, metadata={"help": "Input features."})
    num_labels: int = field(default=4, metadata={"help": "Classes."})
    train_examples: int = field(default=512, metadata={"help": "Synthetic training examples."})
    memory_budget_mib: int = field(
        default=0, metadata={"help": "Address space allowed past the built model, in MiB (0: no limit)."}
    )


class WideMlp(torch.nn.Module):
    def __init__(self, a: ModelArguments):
        super().__init__()
        self.up = torch.nn.Linear(a.features, a.hidden_size)
        self.down = torch.nn.Linear(a.hidden_size, a.num_labels)
        self.checkpointing = False

    def activation_checkpointing_enable(self, activation_checkpointing_kwargs=None, every_n_layers=1, offload=False):
        self.checkpointing = True

    def hidden(self, x):
        return torch.relu(self.up(x))

    def forward(self, x, labels=None):
        if self.checkpointing and self.training:
            h = torch.utils.checkpoint.checkpoint(self.hidden, x, use_reentrant=False)
        else:
            h = self.hidden(x)
        logits = self.down(h)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return {"loss": loss, "logits": logits}


class Synthetic(torch.utils.data.Dataset):
    def __init__(self, a: ModelArguments):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(a.train_examples, a.features, generator=g)
        w = torch.randn(a.features, a.num_labels, generator=g)
        self.y = (self.x @ w).argmax(dim=1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


def parse():
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        return parser.parse_json_file(sys.argv[1])
    if len(sys.argv) == 2 and sys.argv[1].endswith((".yaml", ".yml")):
        return parser.parse_yaml_file(sys.argv[1])
    return parser.parse_args_into_dataclasses()


def vm_bytes(field_name: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field_name + ":"))


def limit_address_space(budget_mib: int):
    libc = ctypes.CDLL(None)
    # One malloc arena (M_ARENA_MAX, -8): a thread's first malloc would
    # reserve 64 MiB of address space for an arena of its own wherever
    # there is room. A fixed mmap threshold (M_MMAP_THRESHOLD, -3): glibc's
    # moving one keeps freed blocks mapped. Either way what fits would hang
    # on the order of allocations rather than on the batch.
    libc.mallopt(-8, 1)
    libc.mallopt(-3, 2**20)
    mapped = vm_bytes("VmSize")
    probe = os.environ.get("ADDRESS_SPACE_PROBE")
    if not probe:
        limit = mapped + budget_mib * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        return
    # The tests' calibration (testkit's budget.rs): no limit, and what the
    # run needed past this point written at exit (past the earlier
    # high-water mark exactly, else only bounded from above).
    before = vm_bytes("VmPeak")

    def record():
        peak = vm_bytes("VmPeak")
        with open(probe, "w") as f:
            json.dump({"need_mib": (peak - mapped) / 2**20, "exact": peak > before}, f)

    atexit.register(record)


def main():
    model_args, args = parse()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    data = Synthetic(model_args)
    model = WideMlp(model_args)
    trainer = Trainer(model=model, args=args, train_dataset=data)
    if model_args.memory_budget_mib:
        limit_address_space(model_args.memory_budget_mib)
    trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    model.eval()
    # In batches of the training's size: what fits for training fits here.
    b = args.per_device_train_batch_size
    with torch.no_grad():
        total = sum(
            model(data.x[i : i + b], data.y[i : i + b])["loss"].item() * len(data.y[i : i + b])
            for i in range(0, len(data), b)
        )
    print(json.dumps({"final_loss": total / len(data)}), flush=True)


if __name__ == "__main__":
    main()
