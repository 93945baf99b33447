"""A 2-rank gloo DDP training job for the end-to-end test (tests/e2e/ddp_test.cpp), run by
torchrun under grademl:

    ddp_job.py OUT_DIR ITERATIONS SLEEP_S SLOW_RANK

Three bias-free Linear(512, 512) layers: 1 MiB of float32 gradient each. DDP starts with one
bucket for all of them (its first iteration, before it rebuilds the buckets in the order
gradients arrived) and then, with bucket_cap_mb=1, one bucket per layer: 1 + 3 x (ITERATIONS
- 1) bucket all-reduces per rank. Rank SLOW_RANK sleeps SLEEP_S before each backward, so the
other rank waits for it in every iteration. Each rank writes OUT_DIR/rank<R>.json with its
pid and, per iteration, the number of buckets DDP's own reducer held for that backward.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

out_dir, iterations, sleep_s, slow_rank = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(512, 512, bias=False) for _ in range(3)])
x = torch.randn(64, 512)
# Warm up autograd and the allocator before the job is timed: a first pass costs both ranks
# far more than later ones, and unevenly on a loaded machine.
for _ in range(3):
    model(x).pow(2).mean().backward()
model.zero_grad()
ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
buckets = []
for _ in range(iterations):
    opt.zero_grad()
    loss = ddp(x).pow(2).mean()
    # After the forward (which rebuilds the buckets at the second iteration): this backward's.
    buckets.append(len(ddp.reducer._get_zeros_like_grad_buckets()))
    if rank == slow_rank:
        time.sleep(sleep_s)
    loss.backward()
    opt.step()
dist.barrier()
with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "pid": os.getpid(), "buckets": buckets,
               "world_size": dist.get_world_size()}, f)
dist.destroy_process_group()
