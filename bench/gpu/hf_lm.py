"""A small GPT-2 trained with the Hugging Face Trainer, shaped as a user's
script is: HfArgumentParser over its own ModelArguments and
TrainingArguments, so every TrainingArguments flag works
(`--per_device_train_batch_size 32`, `--gradient_accumulation_steps 2`,
`--gradient_checkpointing`, `--bf16`, `--full_determinism`). The model is
built from a GPT2Config (no download) and trained on synthetic token data;
at the end it prints one JSON line: the trained model's mean loss over the
training set (`final_loss`) and the peak GPU memory torch held.

The GPU recipe (hf_oom.py) runs it under `train run` beside a ballast that
leaves too little of the card for the batch it starts with.
"""

import json
import sys
from dataclasses import dataclass, field

import torch
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    n_layer: int = field(default=2, metadata={"help": "Transformer blocks."})
    n_embd: int = field(default=256, metadata={"help": "Width."})
    n_head: int = field(default=4, metadata={"help": "Attention heads."})
    n_inner: int = field(default=0, metadata={"help": "MLP width (0: 4 x n_embd)."})
    vocab_size: int = field(default=8192, metadata={"help": "Vocabulary size."})
    seq_len: int = field(default=512, metadata={"help": "Tokens per example."})
    train_examples: int = field(default=128, metadata={"help": "Synthetic training examples."})
    attn_implementation: str = field(default="eager", metadata={"help": "eager or sdpa."})


class Tokens(torch.utils.data.Dataset):
    def __init__(self, a: ModelArguments):
        g = torch.Generator().manual_seed(0)
        # A learnable sequence: each token follows from the one before.
        start = torch.randint(0, a.vocab_size, (a.train_examples, 1), generator=g)
        step = torch.randint(1, 7, (a.train_examples, 1), generator=g)
        self.ids = (start + step * torch.arange(a.seq_len)) % a.vocab_size

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main(argv=None):
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    if argv is None and len(sys.argv) == 2 and sys.argv[1].endswith((".json", ".yaml", ".yml")):
        reader = parser.parse_json_file if sys.argv[1].endswith(".json") else parser.parse_yaml_file
        m, t = reader(sys.argv[1])
    else:
        m, t = parser.parse_args_into_dataclasses(args=argv)
    torch.manual_seed(t.seed)
    config = GPT2Config(n_layer=m.n_layer, n_embd=m.n_embd, n_head=m.n_head, n_inner=m.n_inner or None,
                        vocab_size=m.vocab_size,
                        n_positions=m.seq_len, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        attn_implementation=m.attn_implementation)
    model = GPT2LMHeadModel(config)
    data = Tokens(m)
    trainer = Trainer(model=model, args=t, train_dataset=data)
    trainer.train()
    model.eval()
    device = next(model.parameters()).device
    total, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(data), 8):
            ids = data.ids[i:i + 8].to(device)
            total += model(input_ids=ids, labels=ids).loss.item() * len(ids)
            n += len(ids)
    cuda = device.type == "cuda"
    result = {"final_loss": total / n,
              "peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
              "peak_reserved_mib": torch.cuda.max_memory_reserved() / 2**20 if cuda else None,
              "batch": t.per_device_train_batch_size, "accumulation": t.gradient_accumulation_steps,
              "checkpointing": bool(getattr(t, "gradient_checkpointing", False) or getattr(t, "activation_checkpointing", False)),
              "bf16": t.bf16}
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
