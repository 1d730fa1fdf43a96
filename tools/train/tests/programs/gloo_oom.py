"""A job of 2 ranks on the CPU (torchrun, gloo) where rank 1 runs out of
host memory for real (RLIMIT_AS on that rank only) and catches it.

  gloo_oom.py hang              rank 1 then waits; rank 0 waits in an
                                all-reduce for it: the job hangs
  gloo_oom.py recover SECONDS   rank 1 goes on with a smaller batch; both
                                report step 2, all-reduce quietly for
                                SECONDS, then report step 3 and exit 0
"""

import resource
import sys
import time

import torch
import torch.distributed as dist

mode = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
print(f"step 1 val_loss {1.0:.4f}", flush=True)
if rank == 1:
    pages = int(open("/proc/self/statm").read().split()[0])
    limit = pages * resource.getpagesize() + (256 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        batch = torch.empty(1 << 30, dtype=torch.float32)  # 4 GiB
    except RuntimeError as e:
        print(f"{e}", flush=True)
    if mode == "hang":
        while True:
            time.sleep(1)
    print("going on with a smaller batch", flush=True)
if mode == "recover":
    quiet = float(sys.argv[2])
    dist.all_reduce(t)
    print(f"step 2 val_loss {0.75:.4f}", flush=True)
    end = time.time() + quiet
    while time.time() < end:
        dist.all_reduce(t)
        time.sleep(0.2)
    print(f"step 3 val_loss 0.5", flush=True)
else:
    dist.all_reduce(t)
dist.destroy_process_group()
