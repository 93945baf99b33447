"""A small-op PyTorch training loop for overhead benchmarks: an MLP on scikit-learn's digits,
batch 16, so that per-batch framework overhead dominates. Prints one JSON line with its own
makespan (from the first import to the end), peak RSS, the training loop's wall time
(train_s) and process CPU time (train_cpu_s), each epoch's thread CPU in ms (epochs_ms), and
getrusage deltas over the loop (thread_cpu_s, minflt, majflt, utime, stime, nvcsw, nivcsw;
bench/hooks_cost/ reads these).

usage: mlp_digits.py [--epochs N] [--profiler]   (--profiler: run under torch.profiler)
"""
import argparse
import json
import resource
import time

START = time.perf_counter()

import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--profiler", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()

    epochs_ms = []

    def train():
        for _ in range(args.epochs):
            epoch_start = time.thread_time()
            for xb, yb in loader:
                optimizer.zero_grad()
                loss = loss_fn(model(xb), yb)
                loss.backward()
                optimizer.step()
            epochs_ms.append(round((time.thread_time() - epoch_start) * 1e3, 2))

    usage_start = resource.getrusage(resource.RUSAGE_SELF)
    thread_start = time.thread_time()
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
    thread_cpu_s = time.thread_time() - thread_start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    deltas = {k: getattr(usage, "ru_" + k) - getattr(usage_start, "ru_" + k)
              for k in ("minflt", "majflt", "utime", "stime", "nvcsw", "nivcsw")}
    print(json.dumps({"makespan_s": time.perf_counter() - START, "train_s": train_s, "train_cpu_s": train_cpu_s,
                      "thread_cpu_s": thread_cpu_s, **deltas, "epochs_ms": epochs_ms,
                      "peak_rss_mb": usage.ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
