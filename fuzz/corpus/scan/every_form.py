import os
from os import environ
import torch as t
import torch.utils.checkpoint as cp
from torch.utils.checkpoint import checkpoint as ckpt, checkpoint_sequential
from torch.utils.data import DataLoader
from transformers import TrainingArguments

os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")
os.putenv("CUDA_LAUNCH_BLOCKING", "1")
os.environ.update({"CUDA_LAUNCH_BLOCKING": "1"})

m = t.compile(m, mode="reduce-" "overhead", options=None)
m = t.compile(m, options={"triton.cudagraphs": True, **extra})
m = t.compile(m, backend="cudagraphs")
m = t.compile(m, mode=f"{kind}")
model.compile(mode=("max-autotune"))


@t.compile(mode="max-autotune")
def step(x):
    if __name__ == "__main__":
        pass
    return ckpt(f, x) + cp.checkpoint(g, x) + checkpoint_sequential(s, 2, x)


loader = DataLoader(ds, 8, True, None, None, 0x2)
args = TrainingArguments(torch_compile_mode=mode, gradient_checkpointing=cfg.gc, dataloader_num_workers=1_0)
match cfg:
    case {"debug": True}:
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
