"""Client for check_dask_two_hosts.sh: runs on simulated host 0 against a scheduler there and
one worker on host 1, and checks that the work really ran on host 1.

Usage: dask_two_hosts_client.py SCHEDULER_ADDRESS WORKER_IP WORKER_HOSTNAME
Exit status 0 when every check passes, 1 otherwise.
"""

import operator
import socket
import sys
import time

from distributed import Client


def square(x):
    return x * x


def main():
    scheduler, worker_ip, worker_hostname = sys.argv[1:4]
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    start = time.monotonic()
    client = Client(scheduler, timeout=60)
    client.wait_for_workers(1, timeout=60)
    print(f"connected to {scheduler} from {socket.gethostname()} with 1 worker "
          f"after {time.monotonic() - start:.1f} s", flush=True)

    # 16 squares, then a pairwise tree of sums: 16 + 15 = 31 tasks with data dependencies.
    futures = client.map(square, range(16))
    level = futures
    while len(level) > 1:
        level = [client.submit(operator.add, level[i], level[i + 1])
                 for i in range(0, len(level), 2)]
    total = level[0].result(timeout=60)
    expected = sum(i * i for i in range(16))
    print(f"sum of squares 0..15 = {total} (expected {expected})", flush=True)
    check(total == expected, "result")

    info = client.scheduler_info()
    workers = info["workers"]
    print("scheduler:", info["address"], flush=True)
    for address, w in workers.items():
        print(f"worker: {address} host={w.get('host')} name={w.get('name')} "
              f"nthreads={w.get('nthreads')}", flush=True)
    check(len(workers) == 1, "exactly one worker")
    check(all(w.get("host") == worker_ip for w in workers.values()),
          f"worker address on {worker_ip}")

    hostnames = client.run(socket.gethostname)
    print("client.run(socket.gethostname):", hostnames, flush=True)
    check(sorted(hostnames.values()) == [worker_hostname],
          f"worker's hostname is {worker_hostname}")
    scheduler_hostname = client.run_on_scheduler(socket.gethostname)
    print("scheduler hostname:", scheduler_hostname, "client hostname:", socket.gethostname(),
          flush=True)
    check(scheduler_hostname == socket.gethostname() != worker_hostname,
          "scheduler and client on another host than the worker")

    holders = {a for addrs in client.who_has(futures).values() for a in addrs}
    print("squares held by:", sorted(holders), flush=True)
    check(bool(holders) and all(a.startswith(f"tcp://{worker_ip}:") for a in holders),
          f"results held on {worker_ip}")
    print(f"client done in {time.monotonic() - start:.1f} s", flush=True)
    try:
        client.shutdown()  # stops the scheduler and the worker (through its nanny)
    except Exception as e:  # the harness cleans up anyway
        print("shutdown:", e, flush=True)
    if failures:
        print("FAILED:", "; ".join(failures), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
