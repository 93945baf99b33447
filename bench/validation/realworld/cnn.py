#!/usr/bin/python3
"""A small CNN trained on synthetic 28x28 images with a torch DataLoader and num_workers=2
forked workers (the shape of PyTorch's MNIST example), evaluated after each epoch under
model.eval() + torch.no_grad(), with its own ground truth (truth.py).

The data set lives in the parent (about 190 MB of float32 images, made before the workers
fork), so the workers share its pages: the tree's RSS summed over processes counts them
three times, its PSS once. Ground truth: getrusage of the parent (RUSAGE_SELF; RUSAGE_CHILDREN
= its reaped workers), of each worker, the tree's peak PSS sampled by the parent, and the
epochs and iterations per mode.

    cnn.py [--epochs 2] [--train 2048] [--test 512] [--batch 64]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truth  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--train", type=int, default=2048)
ap.add_argument("--test", type=int, default=512)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--ballast", type=int, default=48000, help="images held by the data set but not used (shared memory)")
args = ap.parse_args()

truth.start("cnn", tree=True)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

torch.manual_seed(0)


class Synthetic(Dataset):
    """Images whose class is set by which quadrant is bright, plus noise. The tensor holds
    `ballast` more images than it serves: the memory every worker shares."""

    def __init__(self, n, ballast, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.rand((n + ballast, 1, 28, 28), generator=g)
        self.y = torch.randint(0, 4, (n + ballast,), generator=g)
        for q in range(4):
            r, c = divmod(q, 2)
            self.x[self.y == q, :, r * 14:(r + 1) * 14, c * 14:(c + 1) * 14] += 1.0
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.fc1 = nn.Linear(16 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def worker_init(_):
    truth.worker_init()


train_set = Synthetic(args.train, args.ballast, 1)
test_set = Synthetic(args.test, 0, 2)
train_loader = DataLoader(train_set, batch_size=args.batch, shuffle=True, num_workers=2, worker_init_fn=worker_init)
test_loader = DataLoader(test_set, batch_size=256, num_workers=2, worker_init_fn=worker_init)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for epoch in range(1, args.epochs + 1):
    model.train()
    for x, y in train_loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        truth.count("train_iterations")
    truth.count("train_epochs")
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in test_loader:
            correct += (model(x).argmax(1) == y).sum().item()
            truth.count("eval_iterations")
    truth.count("eval_epochs")
    print(f"epoch {epoch}: loss {loss.item():.3f}, test accuracy {correct / len(test_set):.3f}", flush=True)
truth.finish()
