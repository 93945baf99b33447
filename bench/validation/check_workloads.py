#!/usr/bin/python3
"""Shows that each validation workload uses the resource it claims, without GradeML.

Sizes each task of workloads.py to about SECONDS (from `workloads.py calibrate`), runs it
on its own and samples, every 5 ms, the scheduler state (R running or runnable, S sleeping,
D uninterruptible: waiting for the disk) and kernel wait channel of its main process from
/proc, the CPU time of all its processes, and the bytes moved on loopback (/proc/net/dev).
Prints one line per task; Python's start-up (~30-50 ms of R) is included.

    check_workloads.py [SECONDS]        (default 1.5)
"""
import collections
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "workloads.py")
NET_RATE = 16.0  # MiB/s
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def lo_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                v = rest.split()
                return int(v[0]) + int(v[8])
    return 0


def children_of(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def sample(pid):
    """(state, wchan, utime+stime ticks) of pid and its descendants."""
    rows, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                stat = f.read()
            with open(f"/proc/{p}/wchan") as f:
                wchan = f.read().strip() or "0"
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        try:
            with open(f"/proc/{p}/schedstat") as f:  # ns on a CPU, ns waiting for one
                on_cpu, runq = (int(x) for x in f.read().split()[:2])
        except (OSError, ValueError):
            on_cpu = runq = 0
        rows.append((p, fields[0], wchan, (int(fields[11]), int(fields[12])), on_cpu, runq,
                     int(fields[7]), int(fields[21]) * PAGE))
        todo += children_of(p)
    return rows


def check(task, extra):
    states, wchans = collections.Counter(), collections.Counter()
    cpu, sched, faults, rss = {}, (0, 0), 0, 0
    lo0, t0 = lo_bytes(), time.perf_counter()
    proc = subprocess.Popen([sys.executable, WORKLOADS, task] + extra, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None:
        for p, state, wchan, ticks, on_cpu, runq, minflt, rss_bytes in sample(proc.pid):
            if p == proc.pid:  # the workload's main process
                sched, faults, rss = (on_cpu, runq), minflt, max(rss, rss_bytes)
                states[state] += 1
                if state in "SD":
                    wchans[wchan] += 1
            cpu[p] = ticks
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    err = proc.stderr.read()
    if proc.returncode != 0:
        sys.exit(f"{task} failed ({proc.returncode}): {err}")
    n = sum(states.values()) or 1
    st = " ".join(f"{s} {100 * c / n:.0f}%" for s, c in states.most_common())
    wc = ", ".join(f"{w} {100 * c / n:.0f}%" for w, c in wchans.most_common(2))
    user = sum(u for u, _ in cpu.values()) / TICK
    system = sum(k for _, k in cpu.values()) / TICK
    cores = (user + system) / wall
    on, rq = (100 * x / 1e9 / wall for x in sched)
    print(f"{task:11s} {wall:5.2f} s  cpu {cores:4.2f} cores (user {user:.2f} s, sys {system:.2f} s)  main process: on a CPU {on:3.0f}%, runnable {rq:3.0f}%, "
          f"blocked {max(0, 100 - on - rq):3.0f}%  states {st:14s} waits in: {wc or '-'}"
          f"  lo {(lo_bytes() - lo0) / 2**20:.0f} MiB  page faults {faults / wall / 1000:.0f}k/s"
          f"  peak RSS {rss / 2**20:.0f} MiB")


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
    rates = json.loads(subprocess.run([sys.executable, WORKLOADS, "calibrate"], check=True,
                                      capture_output=True, text=True).stdout)
    print(f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; rates: {json.dumps(rates)}")
    print("# states of the workload's main process, sampled every 5 ms (on a CPU/runnable from schedstat); cpu = all its processes")
    per_s = {"cpu": rates["cpu_mit_per_s"], "disk": rates["disk_mib_per_s"], "mem": rates["mem_mib_per_s"],
             "net": NET_RATE, "sleep": 1.0}
    for kind, rate in per_s.items():
        check(f"{kind}:{rate * seconds:.4g}", ["--rate", str(NET_RATE)] if kind == "net" else [])


if __name__ == "__main__":
    main()
