"""torch.distributed auto-instrumentation: the wrappers never change a result and never raise.

Three gloo ranks (a world size that is not a power of two, where dividing and multiplying by
the reciprocal differ in the last bit), spawned as processes. Each trains small DDP models
with grademl disabled and then recording (into the fake recorder), and compares the
parameters bit for bit: DDP without a hook (grademl's timed hook stands in for the reducer's
own all-reduce), with a user hook registered before and after the first forward, with a
built-in hook registered after it, with gradient_as_bucket_view; and once with a recorder
that raises on every call. Collectives return the same values with and without grademl,
torch's own errors are raised unchanged, and the phases say what ran.
"""
import os
import socket
import sys
import unittest

from _ci import requires, skip_or_fail
from _fake import Recorder, disable, use_recorder

import grademl

WORLD = 3
ITERATIONS = 3


def _have_torch_distributed():
    try:
        import torch.distributed as dist

        return dist.is_available() and dist.is_gloo_available()
    except Exception:
        return False


class _Broken(Recorder):
    """A backend whose every recording call raises: grademl must swallow it."""

    def begin_typed(self, i, t):
        raise RuntimeError("broken backend")

    def begin_at(self, i, t, ticks):
        raise RuntimeError("broken backend")

    def tag_process(self, k, v):
        raise RuntimeError("broken backend")


def _train(torch, dist, mode, iterations=ITERATIONS):
    """Parameters after `iterations` SGD steps of a fresh DDP model (same data every time)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    torch.manual_seed(0)
    # Gradients in reverse: 10 kB, then 1.2 MB (past DDP's 1 MiB first bucket), then 82 kB
    # (past bucket_cap_mb): two buckets once DDP has rebuilt them after the first iteration.
    model = torch.nn.Sequential(torch.nn.Linear(33, 600), torch.nn.Tanh(), torch.nn.Linear(600, 500), torch.nn.Tanh(),
                                torch.nn.Linear(500, 5))
    kwargs = {"bucket_cap_mb": 0.01}
    if mode == "bucket_view":
        kwargs["gradient_as_bucket_view"] = True
    ddp = torch.nn.parallel.DistributedDataParallel(model, **kwargs)
    if mode == "hook_before":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + dist.get_rank())
    for i in range(iterations):
        x = torch.randn(16, 33, generator=g) * 3.7
        opt.zero_grad()
        ddp(x).pow(2).mean().backward()
        opt.step()
        if i == 0 and mode == "hook_after":
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        if i == 0 and mode == "builtin_after":
            ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
    return [p.detach().clone() for p in ddp.parameters()]


def _collectives(torch, dist):
    """A round of collectives; returns their results (same for every run of this rank)."""
    rank = dist.get_rank()
    out = {}
    t = torch.arange(4.0) + rank
    dist.all_reduce(t)
    out["all_reduce"] = t
    t2 = torch.arange(4.0) * (rank + 1)
    dist.all_reduce(t2, async_op=True).wait()
    out["all_reduce_async"] = t2
    b = torch.full((3,), float(rank))
    dist.broadcast(b, src=1)
    out["broadcast"] = b
    gathered = [torch.zeros(2) for _ in range(WORLD)]
    dist.all_gather(gathered, torch.full((2,), float(rank)))
    out["all_gather"] = torch.stack(gathered)
    r = torch.full((2,), float(rank + 1))
    dist.reduce(r, dst=0)
    out["reduce"] = r if rank == 0 else None
    g = [torch.zeros(1) for _ in range(WORLD)] if rank == 2 else None
    dist.gather(torch.full((1,), float(rank)), gather_list=g, dst=2)
    out["gather"] = torch.stack(g) if g else None
    s = torch.zeros(2)
    dist.scatter(s, scatter_list=[torch.full((2,), float(k)) for k in range(WORLD)] if rank == 0 else None, src=0)
    out["scatter"] = s
    msg = torch.zeros(5)
    if rank == 0:
        dist.send(torch.arange(5.0), dst=1)
        dist.isend(torch.arange(5.0) * 2, dst=2).wait()
    elif rank == 1:
        dist.recv(msg, src=0)
    else:
        dist.irecv(msg, src=0).wait()
    out["p2p"] = msg
    objs = [None] * WORLD
    dist.all_gather_object(objs, {"rank": rank})
    out["objects"] = objs
    dist.barrier()
    # torch's own errors come through unchanged
    for bad in (lambda: dist.all_reduce("not a tensor"), lambda: dist.broadcast(torch.zeros(1), src=99)):
        try:
            bad()
            out.setdefault("errors", []).append(None)
        except Exception as e:
            out.setdefault("errors", []).append(type(e).__name__)
    return out


def _same(a, b):
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _worker(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD),
                      LOCAL_RANK=str(rank))
    import grademl.auto

    grademl._set_backend(use_recorder())
    grademl.auto.install()  # patched at torch's import
    disable()
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    modes = ["plain", "hook_before", "hook_after", "builtin_after", "bucket_view"]
    baseline = {m: _train(torch, dist, m) for m in modes}
    baseline_coll = _collectives(torch, dist)

    rec = use_recorder()
    for m in modes:
        got = _train(torch, dist, m)
        assert _same(got, baseline[m]), f"rank {rank}: DDP ({m}) changed under grademl"
    got_coll = _collectives(torch, dist)
    assert _same(got_coll, baseline_coll), f"rank {rank}: collectives changed under grademl: {got_coll} {baseline_coll}"
    assert not grademl.auto._disabled, grademl.auto._disabled
    dist.barrier()
    import time

    time.sleep(0.2)  # the last futures' callbacks
    phases = rec.phases()
    coll = [p for p in phases if p[1] == "collective"]
    buckets = [p for p in coll if "ddp_bucket" in p[2]]
    # plain and builtin_after (3 iterations), hook_after's first: grademl's own hook; hook_before and
    # hook_after's later iterations: the user's hook's all_reduce; bucket_view: not timed.
    assert {p[2]["ddp_bucket"] for p in buckets} == {"0", "1"}, buckets
    assert all(p[0] == "all_reduce" and p[2]["async"] == "1" for p in buckets), buckets
    seen = {p[0] for p in coll}
    for name in ("all_reduce", "broadcast", "all_gather", "reduce", "gather", "scatter", "barrier"):
        assert name in seen, (name, seen)
    assert ("send" in seen) == (rank == 0) and ("recv" in seen) == (rank != 0), seen
    for p in coll:
        assert p[2]["process_group"] == "world" and int(p[2]["seq"]) >= 0, p
    async_p2p = [p for p in coll if p[2].get("call") in ("isend", "irecv")]
    assert len(async_p2p) == (1 if rank in (0, 2) else 0), async_p2p  # recorded at wait()

    # A backend that raises on every call: results unchanged, no exception, hook switched off.
    grademl._set_backend(_Broken())
    got = _train(torch, dist, "plain")
    assert _same(got, baseline["plain"]), f"rank {rank}: DDP changed with a broken backend"
    got_coll = _collectives(torch, dist)
    assert _same(got_coll, baseline_coll), f"rank {rank}: collectives changed with a broken backend"
    assert "torch.distributed" in grademl.auto._disabled, grademl.auto._disabled
    disable()
    dist.barrier()
    dist.destroy_process_group()


@requires(_have_torch_distributed(), "torch.distributed (gloo) not importable (Debian: python3-torch)")
class DistributedWrappersTest(unittest.TestCase):
    def test_results_unchanged_and_nothing_raised(self):
        import torch.multiprocessing as mp

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(_worker, args=(port,), nprocs=WORLD, join=True)


class DistributedUnitTest(unittest.TestCase):
    """The parts that need no process group."""

    def test_rank_tags_from_the_environment(self):
        if not _have_torch_distributed():
            skip_or_fail(self, "torch.distributed not importable (Debian: python3-torch)")
        import torch

        from grademl.auto import torch_distributed as td

        r = use_recorder()
        try:
            old = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID")}
            os.environ.update(RANK="3", WORLD_SIZE="8", LOCAL_RANK="1", TORCHELASTIC_RUN_ID="abc")
            td._tag_from_environment(torch)
            self.assertEqual(r.process_tags(), {"rank": "3", "world_size": "8", "local_rank": "1",
                                                "launcher": "torchrun", "job": "abc"})
            r.events.clear()
            os.environ["RANK"] = "x"
            td._tag_from_environment(torch)
            self.assertEqual(r.process_tags(), {})
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            disable()


if __name__ == "__main__":
    sys.exit(unittest.main())
