"""Cost of the auto-instrumentation's wrappers, in microseconds of CPU time per call
(medians; CPU time of the measuring thread, so that other programs on a busy machine count
less than in wall time).

    /usr/bin/python3 python/bench_auto.py [path/to/libgrademl.so]

Measures, in child processes, with the hooks not installed, installed while events are not
recorded, and installed and recording (a listening socket stands in for grademl's collector,
as in bench_phase.py):
  - pickle.dump of a small object to an open file (io hook: phase, path and bytes tags);
  - one iteration of a DataLoader loop over a tiny in-memory dataset, with a backward pass
    (epoch/iteration/data_wait phases, the mode and num_workers tags, forward/backward).
"""
import glob
import os
import sys

from bench_child import run_child

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import os, pickle, statistics, sys, tempfile, time
if os.environ.get("BENCH_HOOKS") == "1":
    import grademl.auto
    grademl.auto.install()
import grademl
import torch
torch.set_num_threads(1)

def pickle_us(n, f):
    obj = {"a": 1}
    t = time.thread_time_ns()
    for _ in range(n):
        pickle.dump(obj, f)
    return (time.thread_time_ns() - t) / n / 1000

model = torch.nn.Linear(2, 1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(2000, 2)), batch_size=1)

def loop_us():
    t = time.thread_time_ns()
    n = 0
    for (x,) in loader:
        model(x).sum().backward()
        n += 1
    return (time.thread_time_ns() - t) / n / 1000

with tempfile.TemporaryFile() as f:
    pickle_us(2000, f)
    p = statistics.median(pickle_us(20000, f) for _ in range(9))
loop_us()
l = statistics.median(loop_us() for _ in range(9))
print(f"{p:.3f} {l:.2f} {grademl.enabled()} {pickle.dump.__module__}")
"""


def measure(label, lib=None, hooks=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEML_")}
    env["PYTHONPATH"] = HERE
    if hooks:
        env["BENCH_HOOKS"] = "1"
        env["GRADEML_AUTO_FORCE"] = "1"
    if lib:
        env["GRADEML_LIBRARY"] = lib
    out = run_child(CHILD, env, collector=bool(lib))
    if out.returncode != 0:
        print(f"{label:<36} failed: {out.stderr.strip()[-300:]}")
        return
    p, l, enabled, module = out.stdout.split()
    print(f"{label:<36} pickle.dump {float(p):7.3f} us   DataLoader iteration {float(l):7.2f} us"
          f"   (recording={enabled}, pickle.dump from {module})")


def main():
    lib = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GRADEML_LIBRARY")
    if not lib:
        found = sorted(glob.glob(os.path.join(HERE, "..", "build*", "libgrademl.so")))
        lib = os.path.abspath(found[0]) if found else None
    measure("no hooks")
    measure("hooks installed, not recording", hooks=True)
    if lib:
        measure("hooks installed, recording", lib=lib, hooks=True)
    else:
        print("no libgrademl.so: the recording figure is skipped")


if __name__ == "__main__":
    main()
