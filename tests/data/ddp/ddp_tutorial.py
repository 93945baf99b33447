"""The shape of PyTorch's DDP tutorial (pytorch/examples, distributed/ddp-tutorial-series,
multigpu_torchrun.py), written for gloo on CPU, for the repeated end-to-end test of a job
under `grademl run -- torchrun ...` (tests/e2e/ddp_test.cpp):

    ddp_tutorial.py OUT_DIR TOTAL_EPOCHS SAVE_EVERY [BATCH_SIZE]

A Trainer wraps a small model (Linear(20, 1)) in DistributedDataParallel, runs TOTAL_EPOCHS
epochs over a DistributedSampler's share of 2048 random samples, and rank 0 saves a snapshot
(model state and epochs run) every SAVE_EVERY epochs to OUT_DIR/snapshot.pt; the process
group is destroyed at the end, as the tutorial does. Each rank then writes
OUT_DIR/done<RANK>.json ({"rank", "pid", "steps", "epochs"}) as its very last act, so a
test knows it reached its end (and how many optimizer steps it took) before the interpreter
exits.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    def __init__(self, size):
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.data[index]


def ddp_setup():
    init_process_group(backend="gloo")


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.steps = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()
        self.steps += 1

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[rank {self.global_rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}",
              flush=True)
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}
        torch.save(snapshot, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}", flush=True)

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.global_rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs():
    train_set = MyTrainDataset(2048)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def prepare_dataloader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=False, shuffle=False,
                      sampler=DistributedSampler(dataset))


def main(out_dir, total_epochs, save_every, batch_size):
    ddp_setup()
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, save_every, os.path.join(out_dir, "snapshot.pt"))
    trainer.train(total_epochs)
    destroy_process_group()
    with open(os.path.join(out_dir, f"done{trainer.global_rank}.json"), "w") as f:
        json.dump({"rank": trainer.global_rank, "pid": os.getpid(), "steps": trainer.steps,
                   "epochs": total_epochs - trainer.epochs_run}, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 32)
