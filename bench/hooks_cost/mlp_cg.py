"""A small-op PyTorch training loop for overhead benchmarks: an MLP on scikit-learn's digits,
batch 16, so that per-batch framework overhead dominates. Prints one JSON line with its own
makespan (from the first import to the end), peak RSS, and the training loop's wall time
(train_s) and process CPU time (train_cpu_s).

usage: mlp_digits.py [--epochs N] [--profiler]   (--profiler: run under torch.profiler)
"""
import argparse
import json
import resource
import time

START = time.perf_counter()

import torch  # noqa: E402
import numpy as np


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--profiler", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    digits = np.load("/tmp/py3/digits.npz")
    x = torch.tensor(digits["data"] / 16.0, dtype=torch.float32)
    y = torch.tensor(digits["target"])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train_epochs(n):
        for _ in range(n):
            for xb, yb in loader:
                optimizer.zero_grad()
                loss = loss_fn(model(xb), yb)
                loss.backward()
                optimizer.step()

    import ctypes
    libc = ctypes.CDLL(None)
    CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    def measured(a, b):
        train_epochs(args.epochs - 1)
        return 0
    cmp = CMP(measured)
    def train():
        train_epochs(1)  # warm-up epoch, not collected
        arr = (ctypes.c_int * 2)(1, 2)
        libc.qsort(arr, 2, 4, cmp)  # callgrind collects inside qsort only
    train_start = time.perf_counter()
    cpu_start = time.process_time()
    if args.profiler:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            train()
        prof.key_averages()  # what a user of the profiler looks at
    else:
        train()
    train_s = time.perf_counter() - train_start
    train_cpu_s = time.process_time() - cpu_start
    print(json.dumps({"makespan_s": time.perf_counter() - START, "train_s": train_s, "train_cpu_s": train_cpu_s,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
