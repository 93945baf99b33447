"""The cost of grademl's Dask scheduler plugin (python/grademl/dask_plugin.py) on a large
graph: the same ~100,000-task graph computed on one LocalCluster, alternately without and
with the plugin on its scheduler, in the same process (docs/PERFORMANCE.md, "Dask").

    /usr/bin/python3 bench/dask_plugin_bench.py [--tasks 100000] [--pairs 2] [--workers 2]
                                                [--grademl build/grademl]

Prints per run the wall time of client.get, and at the end the median ratio with/without,
the hooks' time per task (measured around the plugin's own methods in a separate pass of
the same graph), the writer thread's CPU time, the size of the task log and, with
--grademl, how long `grademl import` takes to read one such log. Needs Debian's
python3-distributed.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def inc(x):
    return x + 1


def add(a, b):
    return a + b


def make_graph(n_tasks, run):
    """Half leaves, then a binary tree summing them: about n_tasks tasks, one output. Keys
    differ per run (a key still in memory from a previous run would be reused)."""
    leaves = n_tasks // 2
    names = [f"leaf-r{run}-{i}" for i in range(leaves)]
    dsk = {name: (inc, i) for i, name in enumerate(names)}
    level = 0
    while len(names) > 1:
        nxt = []
        for j in range(0, len(names) - 1, 2):
            key = f"sum-r{run}-l{level}-{j // 2}"
            dsk[key] = (add, names[j], names[j + 1])
            nxt.append(key)
        if len(names) % 2:
            nxt.append(names[-1])
        names, level = nxt, level + 1
    return dsk, names[0], leaves * (leaves + 1) // 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--grademl", help="a grademl binary: also time the import of one log")
    args = ap.parse_args()

    events = tempfile.mkdtemp(prefix="grademl-dask-bench-")
    os.environ["GRADEML_EVENTS_DIR"] = events
    import dask
    from dask.distributed import Client, LocalCluster
    import grademl.dask_plugin as plugin_module

    runs = iter(range(1, 1000))
    dsk, out, expected = make_graph(args.tasks, 0)
    print(f"graph: {len(dsk)} tasks; LocalCluster of {args.workers} worker processes, 1 thread each")
    with dask.config.set({"distributed.scheduler.preload": []}), \
            LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                         dashboard_address=None) as cluster, Client(cluster) as client:
        scheduler = cluster.scheduler
        plugin = None
        times = {False: [], True: []}
        writer_cpu = []
        # Warm-up (imports, connections).
        warm = make_graph(2000, -1)
        client.get(warm[0], warm[1])
        for pair in range(args.pairs):
            for on in (False, True) if pair % 2 == 0 else (True, False):
                if on:
                    plugin = plugin_module.install(scheduler)
                    assert plugin is not None
                dsk, out, expected = make_graph(args.tasks, next(runs))
                t0 = time.perf_counter()
                value = client.get(dsk, out)
                dt = time.perf_counter() - t0
                assert value == expected, (value, expected)
                times[on].append(dt)
                print(f"  run {pair}: plugin {'on ' if on else 'off'} {dt:7.2f} s"
                      f" ({1e6 * dt / len(dsk):.0f} us per task)")
                if on:
                    scheduler.remove_plugin(name=plugin_module.PLUGIN_NAME)
                    plugin.log.close()
                    writer_cpu.append(plugin.log.cpu_s)
                    plugin = None
        # The hooks' own time: the plugin's methods timed on the scheduler's thread.
        plugin = plugin_module.install(scheduler)
        spent = [0.0, 0]
        for name in ("transition", "update_graph"):
            original = getattr(plugin, name)

            def timed(*a, _original=original, **kw):
                t = time.perf_counter()
                try:
                    return _original(*a, **kw)
                finally:
                    spent[0] += time.perf_counter() - t
                    spent[1] += 1

            setattr(plugin, name, timed)
        dsk, out, expected = make_graph(args.tasks, next(runs))
        client.get(dsk, out)
        scheduler.remove_plugin(name=plugin_module.PLUGIN_NAME)
        plugin.log.close()
    # The cluster closed: every plugin's log is closed and complete.
    logs = [os.path.join(events, f) for f in os.listdir(events) if f.endswith(".jsonl")]
    size = sum(os.path.getsize(f) for f in logs)
    lines = sum(sum(1 for _ in open(f)) for f in logs)
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(f"median without the plugin {off:.2f} s, with {on:.2f} s: ratio {on / off:.3f}")
    print(f"hooks: {spent[1]} calls, {1e6 * spent[0] / len(dsk):.2f} us per task on the scheduler's thread "
          f"({100 * spent[0] / on:.2f}% of a run with the plugin)")
    print(f"writer thread: {statistics.median(writer_cpu):.2f} s CPU per run "
          f"({1e6 * statistics.median(writer_cpu) / len(dsk):.1f} us per task)")
    print(f"task logs: {len(logs)} files, {lines} lines, {size / 1e6:.1f} MB "
          f"({size / max(1, lines):.0f} bytes per line)")
    if args.grademl:
        log = max(logs, key=os.path.getsize)
        db = os.path.join(events, "import.db")
        t0 = time.perf_counter()
        out = subprocess.run([args.grademl, "--db", db, "import", log], capture_output=True, text=True, check=True)
        dt = time.perf_counter() - t0
        print(f"grademl import of {os.path.basename(log)} ({os.path.getsize(log) / 1e6:.1f} MB): {dt:.2f} s; "
              f"{out.stdout.splitlines()[0]}")
    shutil.rmtree(events, ignore_errors=True)


if __name__ == "__main__":
    main()
