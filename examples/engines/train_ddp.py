#!/usr/bin/env python3
"""Step 3 - train, data-parallel on 2 ranks: data/features.npz -> models/mlp.pt.

Run by torchrun (see pipeline.yaml):
  torchrun --standalone --nproc_per_node 2 --redirects 2 --tee 2 train_ddp.py
(Debian's torchrun on Python 3.11 needs `--redirects 2 --tee 2`: without them it stops at start
with "'NoneType' object has no attribute 'get'", pytorch/pytorch#92319.)

Each rank trains the same MLP on its shard of the training rows (DistributedSampler) with
DistributedDataParallel over gloo (CPU): gradients are all-reduced in buckets while the
backward pass goes on. Under `grademl run` each rank's process is tagged with its rank, and
its collectives (DDP's bucketed all-reduce included) are recorded with their bytes; the
report shows per rank how long communication took, how much of it overlapped computation,
and how long each rank waited for the slower one (docs/engines.md). Rank 0 saves the model.

Size knob: ENGINES_SCALE (env; epochs = max(1, round(2 x scale))).
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_model(n_features, hidden):
    return nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", default="data/features.npz", help="features archive (default: %(default)s)")
    p.add_argument("--out", default="models/mlp.pt", help="where rank 0 saves the model (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=None, help="default: max(1, round(2 x ENGINES_SCALE))")
    p.add_argument("--batch-size", type=int, default=256, help="per rank (default: %(default)s)")
    p.add_argument("--hidden", type=int, default=512, help="hidden layer width (default: %(default)s)")
    p.add_argument("--bucket-cap-mb", type=float, default=0.25,
                   help="DDP gradient bucket size (default: %(default)s MB; DDP's first bucket is 1 MiB: with the default model of 2 MiB, 5 buckets per step)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default: %(default)s)")
    args = p.parse_args()
    if "RANK" not in os.environ:
        sys.exit("train_ddp: error: run me with torchrun (see the docstring)")
    try:
        scale = float(os.environ.get("ENGINES_SCALE", "1.0"))
    except ValueError:
        sys.exit("train_ddp: error: ENGINES_SCALE must be a number")
    epochs = args.epochs if args.epochs is not None else max(1, round(2 * scale))

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = np.load(args.input)
    train = TensorDataset(torch.from_numpy(data["X_train"]), torch.from_numpy(data["y_train"]))
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    model = DDP(make_model(train.tensors[0].shape[1], args.hidden), bucket_cap_mb=args.bucket_cap_mb)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.BCEWithLogitsLoss()

    t0 = time.time()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, batches = 0.0, 0
        for xb, yb in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb).squeeze(1), yb)
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        mean_loss = torch.tensor([total / max(1, batches)])
        dist.all_reduce(mean_loss)
        if rank == 0:
            print(f"train_ddp: epoch {epoch + 1}/{epochs}: loss {mean_loss.item() / world:.4f} "
                  f"({batches} batches per rank)", flush=True)
    dist.barrier()
    if rank == 0:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        torch.save({"state": model.module.state_dict(), "hidden": args.hidden,
                    "n_features": train.tensors[0].shape[1]}, args.out)
        print(f"train_ddp: {world} ranks, {epochs} epochs in {time.time() - t0:.1f} s -> {args.out}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
