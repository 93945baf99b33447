"""Tiny DDP training for check_torchrun_two_nodes.sh: one process per simulated host, gloo, CPU.

Each rank prints its rank, world size and hostname, trains a small nn.Linear for 5 iterations
under DistributedDataParallel, all-reduces a tensor and checks the result, and finally prints
"DONE rank R/W on HOSTNAME" (the harness looks for it).
"""

import gc
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main():
    start = time.monotonic()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    host = socket.gethostname()
    print(f"rank {rank} world_size {world} hostname {host} "
          f"local_rank {os.environ.get('LOCAL_RANK')} group_rank {os.environ.get('GROUP_RANK')} "
          f"master {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} "
          f"GLOO_SOCKET_IFNAME={os.environ.get('GLOO_SOCKET_IFNAME', '')}", flush=True)

    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(1 + rank)  # different data per rank
    for step in range(5):
        x = torch.randn(16, 8, generator=generator)
        y = x.sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)

    # The replicas must be identical after DDP's gradient averaging.
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    same = all(torch.equal(gathered[0], g) for g in gathered)

    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)  # sum of 1..world
    expected = world * (world + 1) / 2
    print(f"rank {rank} all_reduce {t.item()} (expected {expected}) replicas_equal {same}",
          flush=True)

    # Hostnames of every rank, for the harness.
    names = [None] * world
    dist.all_gather_object(names, host)
    print(f"rank {rank} hostnames {names}", flush=True)
    dist.barrier()
    # Drop DDP before the process group. Otherwise DDP's Reducer is the last owner of the gloo
    # process group and destroys it with the GIL held, and ~ProcessGroupGloo joins gloo's worker
    # threads, one of which may still be freeing the last work's tensors and waiting for the GIL:
    # a deadlock at exit (torch 1.13, seen in about 1 run in 8; pytorch/pytorch#56297).
    # destroy_process_group() releases the GIL while the process group is destroyed.
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()
    ok = t.item() == expected and same
    if ok:
        print(f"DONE rank {rank}/{world} on {host} in {time.monotonic() - start:.1f} s", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
