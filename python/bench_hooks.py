"""Cost of the PyTorch auto-instrumentation's hot path: ns of CPU time per hooked call, and
the small-op training loop of bench/mlp_digits.py with and without the hooks, in the same run.

    /usr/bin/python3 python/bench_hooks.py [--pairs=N] [--epochs=E] [--calls-only | --loop-only] [--profiler] [path/to/libgrademl.so]

Per hooked call (child processes, hooks installed and recording, a listening socket standing
in for grademl's collector as in bench_phase.py; thread CPU time, medians of 9 rounds), minus
the same call without hooks:
  forward    an outermost nn.Module call (a module returning its input)
  nested     a module call inside another (only the depth is kept)
  step       an outermost optimizer step (an Optimizer subclass whose step does nothing)
  loss       an outermost loss-module call
  timed      the forward call inside a DataLoader iteration whose fine phases are not
             recorded (sampling: the call is timed only)
  iteration  a DataLoader iteration whose loop body does nothing (a loader of ints, no
             collation): the iterator's __next__ with the iteration's end and mode tag, the
             tuning's decision, the data wait and the next iteration's begin

Loop: bench/mlp_digits.py --epochs E in alternating children: plain (no hooks), hooked
(default), hooked with --deep (GRADEML_DEEP=1), and under torch.profiler; process CPU time of
the training loop (train_cpu_s) and its wall time (train_s), medians over the pairs. This is
the in-process cost alone (no grademl monitor): `grademl run` adds the monitor's CPU on top
(bench/run_all.sh section 4 measures that).
"""
import glob
import json
import os
import statistics
import sys

from bench_child import run_child

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CALLS = r"""
import os, statistics, sys, time
if os.environ.get("BENCH_HOOKS") == "1":
    import grademl.auto
    grademl.auto.install()
import grademl
import torch
torch.set_num_threads(1)
tt = time.thread_time_ns

class Id(torch.nn.Module):
    def forward(self, x):
        return x

class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Id()
    def forward(self, x):
        return self.inner(x)

class Nop(torch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {})
    def step(self, closure=None):
        return None

class L(torch.nn.modules.loss._Loss):
    def forward(self, a, b):
        return a

x = torch.zeros(1)
m, o = Id(), Outer()
opt = Nop([torch.nn.Parameter(torch.zeros(1))])
loss = L()

def per(fn, n=20000):
    fn(); fn()
    rounds = []
    for _ in range(9):
        t = tt()
        for _ in range(n):
            fn()
        rounds.append((tt() - t) / n)
    return statistics.median(rounds)

out = {}
out["forward"] = per(lambda: m(x))
out["outer2"] = per(lambda: o(x))
out["step"] = per(lambda: opt.step())
out["loss"] = per(lambda: loss(x, x))
# Inside a sampled-out iteration: a DataLoader whose fine phases are not recorded (a budget so
# small that every iteration after the warm-up is timed only).
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(400, 1)), batch_size=1)
timed = []
for (b,) in loader:
    t = tt()
    for _ in range(200):
        m(x)
    timed.append((tt() - t) / 200)
out["timed"] = statistics.median(timed[-300:])
# Per DataLoader iteration: a loader of plain ints (no collation), its loop doing nothing: the
# iterator's __next__ with the hooks (the previous iteration's end and mode tag, the tuning's
# decision, the data wait, the next iteration's begin) against without.
ints = torch.utils.data.DataLoader(list(range(1000)), batch_size=None)
def iterate():
    for _ in ints:
        pass
out["iteration"] = per(iterate, n=1) / 1000
print(__import__("json").dumps(out))
"""


def env_for(lib, hooks, extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEML_")}
    env["PYTHONPATH"] = HERE
    if hooks:
        env["BENCH_HOOKS"] = "1"
        env["GRADEML_AUTO_FORCE"] = "1"
        env["GRADEML_LIBRARY"] = lib
    env.update(extra or {})
    return env


def calls(lib, rounds):
    rows = {"plain": [], "hooked": []}
    for _ in range(rounds):
        for mode in rows:
            extra = {"GRADEML_OVERHEAD_BUDGET": "0.001"} if mode == "hooked" else {}
            out = run_child(CALLS, env_for(lib, mode == "hooked", extra), collector=mode == "hooked")
            if out.returncode != 0:
                sys.exit(f"calls child failed: {out.stderr[-2000:]}")
            rows[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in rows.items()}
    print("ns of thread CPU time per call, hooked (recording) minus plain, medians of "
          f"{rounds} children x 9 rounds:")
    for k, label in (("forward", "outermost forward"), ("outer2", "forward + one nested module call"),
                     ("step", "outermost optimizer step"), ("loss", "outermost loss call"),
                     ("timed", "forward, timed only (sampled-out iteration)"),
                     ("iteration", "DataLoader iteration (end, data wait, begin)")):
        p, h = med["plain"][k], med["hooked"][k]
        print(f"  {label:<44} {h - p:8.0f} ns   (plain {p:.0f} ns, hooked {h:.0f} ns)")


def loop(lib, pairs, epochs, profiler):
    script = os.path.join(ROOT, "bench", "mlp_digits.py")
    modes = ["plain", "hooked", "deep"] + (["profiler"] if profiler else [])
    rows = {m: [] for m in modes}
    auto = os.path.join(HERE, "grademl", "_autoload")
    for _ in range(pairs):
        for mode in modes:
            args = ["--epochs", str(epochs)] + (["--profiler"] if mode == "profiler" else [])
            env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEML_")}
            collector = mode in ("hooked", "deep")
            if collector:
                env.update(PYTHONPATH=auto + os.pathsep + HERE, GRADEML_AUTO="1", GRADEML_LIBRARY=lib)
                if mode == "deep":
                    env["GRADEML_DEEP"] = "1"
            code = f"import sys; sys.argv = {[script] + args!r}; exec(compile(open({script!r}).read(), {script!r}, 'exec'))"
            out = run_child(code, env, collector=collector)
            if out.returncode != 0:
                sys.exit(f"{mode} child failed: {out.stderr[-2000:]}")
            rows[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"bench/mlp_digits.py --epochs {epochs}, {pairs} alternating rounds, medians "
          "(ratios against plain; spread = (max-min)/median of the ratio over rounds):")
    base_cpu = statistics.median(r["train_cpu_s"] for r in rows["plain"])
    base_wall = statistics.median(r["train_s"] for r in rows["plain"])
    for mode in modes:
        cpu = statistics.median(r["train_cpu_s"] for r in rows[mode])
        wall = statistics.median(r["train_s"] for r in rows[mode])
        per_round = [h["train_cpu_s"] / p["train_cpu_s"] for h, p in zip(rows[mode], rows["plain"])]
        spread = (max(per_round) - min(per_round)) / statistics.median(per_round)
        print(f"  {mode:<9} train CPU {cpu:.3f} s ({cpu / base_cpu:.3f}x, spread {spread:.3f})   "
              f"train wall {wall:.3f} s ({wall / base_wall:.3f}x)")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = [a for a in sys.argv[1:] if a.startswith("--")]
    pairs = 7
    epochs = 3
    for o in opts:
        if o.startswith("--pairs="):
            pairs = int(o.split("=", 1)[1])
        if o.startswith("--epochs="):
            epochs = int(o.split("=", 1)[1])
    lib = args[0] if args else os.environ.get("GRADEML_LIBRARY")
    if not lib:
        found = sorted(glob.glob(os.path.join(ROOT, "build*", "libgrademl.so")))
        if not found:
            sys.exit("no libgrademl.so (give its path)")
        lib = found[0]
    lib = os.path.abspath(lib)
    if "--loop-only" not in opts:
        calls(lib, pairs if "--calls-only" in opts else max(3, pairs // 2))
    if "--calls-only" not in opts:
        loop(lib, pairs, epochs, "--profiler" in opts)


if __name__ == "__main__":
    main()
