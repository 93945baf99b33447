#!/usr/bin/python3
"""What grademl's torch.distributed instrumentation costs (docs/PERFORMANCE.md):

  1. per call: gloo collectives in one process (world size 1, so the collective itself is
     as cheap as it gets and the wrapper's share as large as it gets): all_reduce (sync and
     async + wait, 4 floats), broadcast, barrier; plain python3 against the same under
     `grademl run` (recording every call), alternating;
  2. a DDP training loop: torchrun, 2 gloo ranks, a 3-layer MLP (DDP's buckets all-reduced
     every iteration through grademl's timed hook); seconds per iteration measured by rank 0
     inside the loop, and the CPU time per iteration of both ranks (all their threads), plain
     torchrun against `grademl run -- torchrun`, alternating.

Wall times on a machine shared with other work are noisy; the CPU times are the steadier
measure of what the instrumentation adds.

    bench/ddp_overhead.py --grademl build/grademl [--pairs 3] [--calls 20000] [--iters 200]

Debian's torchrun on Python 3.11 needs --redirects 2 --tee 2 (pytorch/pytorch#92319).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
HERE = os.path.abspath(__file__)


# ------------------------------------------------------------------ workers

def worker_calls(n, out):
    import torch
    import torch.distributed as dist

    store = tempfile.mktemp(prefix="grademl-bench-store-")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    t = torch.ones(4)
    res = {}
    cases = {
        "all_reduce": lambda: dist.all_reduce(t),
        "all_reduce_async_wait": lambda: dist.all_reduce(t, async_op=True).wait(),
        "broadcast": lambda: dist.broadcast(t, src=0),
        "barrier": lambda: dist.barrier(),
    }
    for name, f in cases.items():
        for _ in range(min(n, 2000)):  # warm-up
            f()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            f()
        res[name] = ((time.perf_counter() - t0) / n * 1e6, (time.process_time() - c0) / n * 1e6)
    dist.destroy_process_group()
    with open(out, "w") as fh:
        json.dump(res, fh)


def worker_ddp(iters, out):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(32, 256)
    y = torch.randint(0, 10, (32,))
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        lossf(ddp(x), y).backward()
        opt.step()

    for _ in range(10):
        step()
    dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        step()
    cpu = time.process_time() - c0
    dist.barrier()
    per_iter = (time.perf_counter() - t0) / iters
    buckets = len(ddp.reducer._get_zeros_like_grad_buckets())
    cpus = [None, None]
    dist.all_gather_object(cpus, cpu / iters)  # CPU time per iteration of each rank (all its threads)
    if dist.get_rank() == 0:
        with open(out, "w") as fh:
            json.dump({"s_per_iter": per_iter, "cpu_s_per_iter": sum(cpus), "buckets": buckets}, fh)
    dist.destroy_process_group()


def worker_hook(blocks, out):
    """In one process under grademl, world size 1: model A gets grademl's timed DDP hook, model
    B DDP's built-in C++ all-reduce hook (what DDP does without one, in C++), model C the same
    hook as grademl's in plain Python, untimed (registered past grademl): alternating blocks of
    iterations. C - B is what any Python hook costs in torch, A - C what grademl's timing adds."""
    import torch
    import torch.distributed as dist

    import grademl

    store = tempfile.mktemp(prefix="grademl-bench-store-")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)

    def make():
        torch.manual_seed(0)
        m = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(12)])
        return torch.nn.parallel.DistributedDataParallel(m, bucket_cap_mb=0.05)

    ddp_a, ddp_b, ddp_c = make(), make(), make()
    ddp_b._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)  # grademl's hook never goes in

    def first(fut):
        return fut.value()[0]

    def plain_hook(pg, bucket):
        buf = bucket.buffer()
        buf.mul_(1.0 / pg.size())
        return pg.allreduce([buf]).get_future().then(first)

    dist._register_comm_hook(ddp_c.reducer, ddp_c.process_group, plain_hook)  # not through DDP's method
    from grademl.auto import torch_distributed as td

    td._state_of(ddp_c).registrations = 1  # grademl leaves it alone
    x = torch.randn(16, 256)

    def steps(ddp, n):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            ddp(x).sum().backward()
        return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n

    for m in (ddp_a, ddp_b, ddp_c):
        steps(m, 20)
    assert td._ddp_states[ddp_a].installed and not td._ddp_states[ddp_b].installed
    assert not td._ddp_states[ddp_c].installed and grademl.enabled()
    a, b, c = [], [], []
    order = [(ddp_a, a), (ddp_b, b), (ddp_c, c)]
    for i in range(blocks):  # rotating: none goes first every time
        for m, into in order[i % 3:] + order[:i % 3]:
            into.append(steps(m, 20))
    buckets = len(ddp_a.reducer._get_zeros_like_grad_buckets())
    res = {"buckets": buckets,
           "a_wall": statistics.median(v[0] for v in a), "b_wall": statistics.median(v[0] for v in b),
           "a_cpu": statistics.median(v[1] for v in a), "b_cpu": statistics.median(v[1] for v in b),
           "c_wall": statistics.median(v[0] for v in c), "c_cpu": statistics.median(v[1] for v in c)}
    dist.destroy_process_group()
    with open(out, "w") as fh:
        json.dump(res, fh)


# ------------------------------------------------------------------ driver

def run(cmd, graded, grademl, db):
    full = [grademl, "--db", db, "run", "--no-report", "--"] + cmd if graded else cmd
    env = dict(os.environ)
    r = subprocess.run(full, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(full)}\n{r.stderr[-3000:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grademl", required=True)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--iters", type=int, default=200)
    a = ap.parse_args()
    grademl = os.path.abspath(a.grademl)
    tmp = tempfile.mkdtemp(prefix="grademl-ddp-bench-")
    print(f"# torch.distributed instrumentation cost — {time.strftime('%Y-%m-%d', time.gmtime())}, "
          f"{os.cpu_count()} cores")

    plain, graded = {}, {}
    for i in range(a.pairs):
        for is_graded, into in ((False, plain), (True, graded)):
            out = os.path.join(tmp, f"calls{i}{int(is_graded)}.json")
            run([PY, HERE, "--worker", "calls", str(a.calls), out], is_graded, grademl, os.path.join(tmp, "c.db"))
            for k, v in json.load(open(out)).items():
                into.setdefault(k, []).append(v)
    print(f"\n## 1. Per call, gloo world size 1, {a.calls} calls each, {a.pairs} pairs (median µs per call; "
          f"wall, and CPU of the process's threads)")
    print(f"{'collective':24} {'plain':>8} {'grademl':>8} {'added':>8} {'CPU plain':>10} {'CPU grademl':>12} {'added':>8}")
    for k in plain:
        p, g = statistics.median(v[0] for v in plain[k]), statistics.median(v[0] for v in graded[k])
        cp, cg = statistics.median(v[1] for v in plain[k]), statistics.median(v[1] for v in graded[k])
        print(f"{k:24} {p:8.2f} {g:8.2f} {g - p:8.2f} {cp:10.2f} {cg:12.2f} {cg - cp:8.2f}")

    tr = ["/usr/bin/torchrun", "--standalone", "--nproc_per_node", "2", "--redirects", "2", "--tee", "2",
          HERE, "--worker", "ddp", str(a.iters)]
    rows = []
    for i in range(a.pairs):
        pair = []
        for is_graded in (False, True):
            out = os.path.join(tmp, f"ddp{i}{int(is_graded)}.json")
            run(tr + [out], is_graded, grademl, os.path.join(tmp, "d.db"))
            pair.append(json.load(open(out)))
        rows.append(pair)
    p = [r[0]["s_per_iter"] for r in rows]
    g = [r[1]["s_per_iter"] for r in rows]
    ratios = [y / x for x, y in zip(p, g)]
    print(f"\n## 2. DDP training loop, torchrun 2 gloo ranks, {a.iters} iterations, {rows[0][0]['buckets']} buckets, "
          f"{a.pairs} pairs")
    print(f"plain median {1000 * statistics.median(p):.2f} ms/iteration; under grademl median "
          f"{1000 * statistics.median(g):.2f} ms/iteration")
    print(f"ratio: median {statistics.median(ratios):.4f}, min {min(ratios):.4f}, max {max(ratios):.4f}")
    pc = [r[0]["cpu_s_per_iter"] for r in rows]
    gc = [r[1]["cpu_s_per_iter"] for r in rows]
    cratios = [y / x for x, y in zip(pc, gc)]
    print(f"CPU of both ranks: plain median {1000 * statistics.median(pc):.2f} ms/iteration; under grademl median "
          f"{1000 * statistics.median(gc):.2f} ms/iteration; ratio median {statistics.median(cratios):.4f}, "
          f"min {min(cratios):.4f}, max {max(cratios):.4f}")
    out = os.path.join(tmp, "hook.json")
    run([PY, HERE, "--worker", "hook", "40", out], True, grademl, os.path.join(tmp, "h.db"))
    h = json.load(open(out))
    n = h["buckets"]
    print(f"\n## 3. DDP's bucket all-reduce: built-in C++ hook, the same in plain Python, grademl's timed hook; one "
          f"process under grademl, world size 1, {n} buckets, 40 rotating blocks of 20 iterations (medians)")
    for label, k in (("C++ built-in", "b"), ("plain Python hook", "c"), ("grademl's hook", "a")):
        print(f"{label:18} wall {1e3 * h[k + '_wall']:.3f} ms/iteration, CPU {1e3 * h[k + '_cpu']:.3f} ms/iteration")
    print(f"per bucket: a Python hook in torch adds wall {1e6 * (h['c_wall'] - h['b_wall']) / n:.1f} µs, CPU "
          f"{1e6 * (h['c_cpu'] - h['b_cpu']) / n:.1f} µs; grademl's timing on top of it wall "
          f"{1e6 * (h['a_wall'] - h['c_wall']) / n:.1f} µs, CPU {1e6 * (h['a_cpu'] - h['c_cpu']) / n:.1f} µs")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, n, out = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        {"calls": worker_calls, "ddp": worker_ddp, "hook": worker_hook}[kind](n, out)
    else:
        main()
