"""A job of ranks on the CPU (torchrun, gloo): each rank writes its pid and
its parent's (the launcher's agent) to rankN.pid, then prints one
loss line and all-reduces quietly every half second until it is ended."""

import os, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
with open(f"rank{rank}.pid", "w") as f:
    f.write(f"{os.getpid()} {os.getppid()}\n")
t = torch.ones(4)
dist.all_reduce(t)
print(f"step 1 loss {t.sum().item():.4f}", flush=True)
# Then quiet, as ranks waiting in a collective are: no write that a closed
# pipe would end.
while True:
    dist.all_reduce(t)
    time.sleep(0.5)
