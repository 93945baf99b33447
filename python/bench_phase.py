"""Median cost of `with grademl.phase("x"): pass`, enabled and disabled, in microseconds.

    /usr/bin/python3 python/bench_phase.py [path/to/libgrademl.so]

The enabled figure needs libgrademl.so (argument, $GRADEML_LIBRARY, or build*/); it is
measured in a child process with GRADEML_EVENTS_DIR set to a temporary directory where a
socket stands in for grademl's collector (a writer with no collector listening stays
disabled), for the C extension (when built next to the library) and for the ctypes fallback.
"""
import glob
import os
import sys

from bench_child import run_child

HERE = os.path.dirname(os.path.abspath(__file__))
N, REPEAT = 200_000, 9

CHILD = r"""
import statistics, time, sys, grademl
ph = grademl.phase
def run(n):
    t = time.perf_counter_ns()
    for _ in range(n):
        with ph("x"):
            pass
    return (time.perf_counter_ns() - t) / n / 1000
def empty(n):
    t = time.perf_counter_ns()
    for _ in range(n):
        pass
    return (time.perf_counter_ns() - t) / n / 1000
run(10000)
m = statistics.median(run(%d) for _ in range(%d))
e = statistics.median(empty(%d) for _ in range(%d))
print(f"{m:.3f} {e:.3f} {grademl.enabled()} {grademl._native}")
""" % (N, REPEAT, N, REPEAT)


def measure(label, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEML_")}
    env["PYTHONPATH"] = HERE
    env.update(env_extra)
    out = run_child(CHILD, env, collector="GRADEML_LIBRARY" in env)
    if out.returncode != 0:
        print(f"{label:<28} failed: {out.stderr.strip()[-300:]}")
        return
    med, loop, enabled, native = out.stdout.split()
    print(f"{label:<28} {float(med):7.3f} us/phase median (enabled={enabled}, native={native}; "
          f"empty loop {float(loop):.3f} us)")


def main():
    lib = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GRADEML_LIBRARY")
    if not lib:
        libs = sorted(glob.glob(os.path.join(HERE, "..", "build*", "libgrademl.so")), key=os.path.getmtime)
        lib = os.path.abspath(libs[-1]) if libs else None
    measure("disabled (no env)")
    if not lib:
        print("enabled: skipped (no libgrademl.so; pass its path)")
        return
    print(f"library: {lib}")
    measure("enabled, C extension", GRADEML_LIBRARY=lib)
    measure("enabled, ctypes", GRADEML_LIBRARY=lib, GRADEML_CTYPES="1")


if __name__ == "__main__":
    main()
