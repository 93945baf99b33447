"""A training loop starved by its DataLoader, for the lever validation (levers.py): each
sample costs pure-Python CPU work in __getitem__ (decoding, augmenting), the model step is
small. The first argument is the DataLoader's num_workers (0: loading in the main process,
as the loop was written). Prints wall and CPU time (getrusage) at the end."""
import resource
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

ITEM_UNITS = 20000  # inner-loop steps per sample


class SlowDataset(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        acc = i
        for k in range(ITEM_UNITS):
            acc = (acc * 31 + k) % 1_000_003
        g = torch.Generator().manual_seed(acc)
        return torch.randn(64, generator=g), acc % 10


def main():
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    samples = int(sys.argv[2]) if len(sys.argv) > 2 else 640
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowDataset(samples), batch_size=16, num_workers=workers,
                        multiprocessing_context="fork" if workers > 0 else None)
    start = time.monotonic()
    for x, y in loader:
        for _ in range(20):  # the compute of one iteration
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
    wall = time.monotonic() - start
    ru_self = resource.getrusage(resource.RUSAGE_SELF)
    ru_kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru_self.ru_utime + ru_self.ru_stime + ru_kids.ru_utime + ru_kids.ru_stime
    print(f"loader num_workers={workers} samples={samples} loop_wall_s={wall:.3f} cpu_s={cpu:.3f}", flush=True)


if __name__ == "__main__":
    main()
