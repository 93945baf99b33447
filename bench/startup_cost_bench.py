#!/usr/bin/python3
"""Fixed cost of `grademl run` and Python start-up under it (issue 26), each against its peer
in the same run: alternating pairs of the plain command and the same under
`grademl run --no-report`, medians of the pair differences, wall time and CPU time (the
children's rusage: grademl's own CPU plus the workload's, minus the plain workload's).

  bench/startup_cost_bench.py [--pairs N] [--grademl PATH] [--before PATH] [--db PATH] [--json]

--before: another grademl binary (e.g. a build of main) measured in the same rounds, each
round then plain, before, after; its store is a separate one.

Defaults: 15 pairs of each, build/grademl, a store in a fresh temporary directory. About
10 s on a loaded 2-core machine. Goals: fixed cost <= 5 ms, Python start-up <= +5 ms.
"""
import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one(argv, env):
    t = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env)
    _, status, ru = os.wait4(pid, 0)
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def pairs(n, plain, binaries, env):
    """binaries: [(name, grademl, db, env)]. Each round runs plain, then each binary."""
    unders = [(name, [g, "--db", db, "run", "--no-report", "--"] + plain, e) for name, g, db, e in binaries]
    for _, under, e in unders:
        one(under, e)  # warm: the store created, the page cache filled
    wall = {name: [] for name, _, _ in unders}
    cpu = {name: [] for name, _, _ in unders}
    for _ in range(n):
        a = one(plain, env)
        for name, under, e in unders:
            b = one(under, e)
            if a[2] != b[2]:
                raise SystemExit(f"exit codes differ: {a[2]} plain, {b[2]} under grademl")
            wall[name].append((b[0] - a[0]) * 1e3)
            cpu[name].append((b[1] - a[1]) * 1e3)
    out = {}
    for name, _, _ in unders:
        q = statistics.quantiles(wall[name], n=4)
        out[name] = {"wall_ms": statistics.median(wall[name]), "wall_q1_ms": q[0], "wall_q3_ms": q[2],
                     "cpu_ms": statistics.median(cpu[name]), "pairs": n}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--grademl", default=os.path.join(HERE, "..", "build", "grademl"))
    ap.add_argument("--before", default="")
    ap.add_argument("--before-python-dir", default="", help="GRADEML_PYTHON_DIR for --before's runs")
    ap.add_argument("--db", default="")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="grademl-startup-")
    try:
        db = args.db or os.path.join(tmp, "grademl.db")
        env = dict(os.environ)
        binaries = [("grademl", os.path.abspath(args.grademl), db, env)]
        if args.before:
            before_env = dict(env)
            if args.before_python_dir:
                before_env["GRADEML_PYTHON_DIR"] = args.before_python_dir
            binaries.insert(0, ("before", os.path.abspath(args.before), os.path.join(tmp, "before.db"), before_env))
        results = {
            "fixed_cost": pairs(args.pairs, ["/bin/true"], binaries, env),
            "python_startup": pairs(args.pairs, ["/usr/bin/python3", "-c", "pass"], binaries, env),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results))
        return
    for what, by_binary in results.items():
        for name, r in by_binary.items():
            print(f"{what} ({name}): +{r['wall_ms']:.1f} ms wall (quartiles {r['wall_q1_ms']:.1f}.."
                  f"{r['wall_q3_ms']:.1f}), +{r['cpu_ms']:.1f} ms CPU, median of {r['pairs']} pairs")


if __name__ == "__main__":
    main()
