#!/usr/bin/python3
"""A model fitted with torch.optim.LBFGS and a closure (the shape of PyTorch's
time-sequence-prediction example): each optimizer.step() calls the closure several times
(forward, loss, backward inside it), then the fit is scored under torch.no_grad().

Ground truth (truth.py): getrusage, peak PSS, and counts: optimizer_steps,
closure_calls (= train forward passes = backward passes), eval_forwards.

    lbfgs.py [--steps 6] [--n 2000] [--threads N]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truth  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=6)
ap.add_argument("--n", type=int, default=2000)
ap.add_argument("--features", type=int, default=64)
ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
args = ap.parse_args()

truth.start("lbfgs")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.manual_seed(0)
if args.threads:
    torch.set_num_threads(args.threads)
x = torch.randn(args.n, args.features)
w = torch.randn(args.features, 1)
y = torch.sin(x @ w) + 0.05 * torch.randn(args.n, 1)
x_test = torch.randn(args.n // 4, args.features)
y_test = torch.sin(x_test @ w)

model = nn.Sequential(nn.Linear(args.features, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, 1))
opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=10, history_size=20)
crit = nn.MSELoss()


def closure():
    opt.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    truth.count("closure_calls")
    return loss


for step in range(args.steps):
    loss = opt.step(closure)
    truth.count("optimizer_steps")
    with torch.no_grad():
        test = crit(model(x_test), y_test).item()
        truth.count("eval_forwards")
    print(f"step {step}: loss {loss.item():.4f}, test {test:.4f}", flush=True)
truth.finish()
