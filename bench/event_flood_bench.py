#!/usr/bin/python3
"""grademl under a flood of empty phases (issue 24): peak RSS of grademl, the time from the
workload's end to grademl's exit, and the phases stored against the phases written.

usage: bench/event_flood_bench.py BUILD_DIR [--lang c|python] [--seconds 10 30 60]
                                  [--rss-cap-mb N] [--keep DIR] [--phases N] [--rate R] [--grademl BIN]

Each run: `grademl --db DIR/g.db run --no-report -- FLOOD SECONDS TRUTH`, where FLOOD is
tests/instrumented_flood (tests/helpers/instrumented_flood.cpp; C: grademl_begin/grademl_end of one name in a tight loop)
or the Python loop below (`with grademl.phase("x"): pass`, Debian's /usr/bin/python3). The
workload writes how many phases it wrote and the wall-clock time it ended to TRUTH.
- peak RSS: grademl's VmHWM (/proc/PID/status, read every 20 ms while it runs) and
  ru_maxrss of wait4 (grademl and the workload, which it reaps: the kernel's figure);
- stop: grademl's exit (wait4 returns) minus the workload's end (TRUTH end_ns);
- stored: phases named "x" of the run in the store; dropped: the root phase's
  grademl.phases_dropped and grademl.events_dropped tags; grademl_cpu_s: grademl's own CPU
  time (the run's monitor_cpu_seconds, getrusage(RUSAGE_SELF) at its end).
--rss-cap-mb: grademl is killed (SIGKILL) when its RSS passes this (a guard for the shared
machine when measuring an unbounded grademl); the row then says so.
"""
import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

PY_FLOOD = r'''
import sys, time
import grademl
secs, truth = float(sys.argv[1]), sys.argv[2]
phase = grademl.phase
n = 0
until = time.monotonic() + secs
while True:
    for _ in range(1024):
        with phase("x"):
            pass
    n += 1024
    if time.monotonic() >= until:
        break
with open(truth, "w") as f:
    f.write(f"phases={n}\nenabled={int(grademl.enabled())}\nend_ns={time.time_ns()}\n")
'''


def read_truth(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                out[k] = int(v)
    except OSError:
        pass
    return out


def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def one_run(build, lang, seconds, cap_mb, workdir, phases=0, grademl=None, rate=0):
    db = os.path.join(workdir, "g.db")
    truth = os.path.join(workdir, "truth")
    if lang == "c":
        workload = [os.path.join(build, "tests/instrumented_flood"), str(seconds), truth, str(phases), str(rate)]
    else:
        script = os.path.join(workdir, "flood.py")
        with open(script, "w") as f:
            f.write(PY_FLOOD)
        workload = ["/usr/bin/python3", script, str(seconds), truth]
    cmd = [grademl or os.path.join(build, "grademl"), "--db", db, "run", "--no-report", "--"] + workload
    t0 = time.time_ns()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    hwm = 0
    capped = False
    rss_at_end = None
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid != 0:
            break
        v = status_kb(p.pid, "VmHWM")
        if v:
            hwm = max(hwm, v)
        rss = status_kb(p.pid, "VmRSS")
        if rss_at_end is None and rss and os.path.exists(truth):
            rss_at_end = rss / 1024
        if cap_mb and rss and rss > cap_mb * 1024 and not capped:
            capped = True
            capped_at = (time.time_ns() - t0) / 1e9
            os.kill(p.pid, signal.SIGKILL)
        time.sleep(0.02)
    t_exit = time.time_ns()
    err = p.stderr.read().decode(errors="replace")
    t = read_truth(truth)
    row = {
        "lang": lang, "seconds": seconds, "rate": rate, "exit": os.waitstatus_to_exitcode(status),
        "written": t.get("phases"), "hwm_mb": hwm / 1024, "maxrss_mb": ru.ru_maxrss / 1024,
        "stop_s": (t_exit - t["end_ns"]) / 1e9 if "end_ns" in t else None,
        "wall_s": (t_exit - t0) / 1e9, "rss_at_workload_end_mb": rss_at_end, "stderr": err.strip().splitlines()[-3:],
    }
    if capped:
        row["killed_by_guard_at_s"] = capped_at
        return row
    con = sqlite3.connect(db)
    run_id = con.execute("SELECT max(id) FROM runs").fetchone()[0]
    row["grademl_cpu_s"] = con.execute("SELECT monitor_cpu_seconds FROM runs WHERE id=?", (run_id,)).fetchone()[0]
    row["stored"] = con.execute("SELECT count(*) FROM phases WHERE run_id=? AND name='x'", (run_id,)).fetchone()[0]
    tags = json.loads(con.execute("SELECT tags FROM phases WHERE run_id=? AND parent_id IS NULL OR parent_id=0",
                                  (run_id,)).fetchone()[0] or "{}")
    if isinstance(tags, list):
        tags = {k: v for k, v in tags}
    row["phases_dropped"] = int(tags.get("grademl.phases_dropped", 0))
    row["events_dropped"] = int(tags.get("grademl.events_dropped", 0))
    row["db_mb"] = os.path.getsize(db) / 2**20
    con.close()
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--lang", choices=["c", "python"], default="c")
    ap.add_argument("--seconds", type=float, nargs="+", default=[10, 30, 60])
    ap.add_argument("--rss-cap-mb", type=int, default=0)
    ap.add_argument("--keep")
    ap.add_argument("--phases", type=int, default=0, help="C only: exactly this many phases (SECONDS is then ignored)")
    ap.add_argument("--rate", type=float, default=0, help="C only: at most this many phases a second")
    ap.add_argument("--grademl", help="the grademl binary to run (default BUILD/grademl)")
    a = ap.parse_args()
    for s in a.seconds:
        with tempfile.TemporaryDirectory(dir=a.keep) as d:
            row = one_run(os.path.abspath(a.build), a.lang, s, a.rss_cap_mb, d, a.phases, a.grademl, a.rate)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    sys.exit(main())
