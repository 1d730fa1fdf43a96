"""A short job of ranks on the CPU (torchrun, gloo): each rank says the
GPUs its job was given (CUDA_VISIBLE_DEVICES), then rank 0 prints one loss
line and the job ends."""

import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print(f"devices {os.environ.get('CUDA_VISIBLE_DEVICES')}", flush=True)
dist.barrier()
if dist.get_rank() == 0:
    print(f"loss {t.item():.4f}", flush=True)
dist.destroy_process_group()
