#!/usr/bin/python3
"""Workloads with a known bottleneck, for GradeML's analysis validation suite.

Each workload consumes one resource, and its amount of work is a parameter, so that
"half the work" is half the number (see docs/validation.md).

    workloads.py TASK [TASK...]        run the tasks one after the other
    workloads.py calibrate [SECONDS]   print the machine's rates (JSON) for sizing tasks
    workloads.py serve                 a paced TCP server for `net` tasks (prints its port)

Tasks (AMOUNT is a number, fractions allowed):
    cpu:MIT     pure-Python compute: MIT million iterations of an integer recurrence (1 core)
    disk:MIB    write MIB MiB in 1 MiB chunks with O_DIRECT, fsync after each (buffered where
                O_DIRECT is refused), delete the file at the end
    mem:MIB     map and touch MIB MiB of anonymous memory, one byte per page, in 64 MiB
                chunks, holding at most --hold MiB at a time (then freeing and going on)
    net:MIB     receive MIB MiB over loopback TCP from a server that paces its sending at
                --rate MiB/s (the server of --port, or one forked for this task)
    sleep:S     sleep S seconds (waiting)

Options (anywhere on the line):
    --rate MIBS   net: the server's sending rate in MiB/s (default 20)
    --port PORT   net: use the `serve` server on 127.0.0.1:PORT instead of forking one
    --dir DIR     disk: where to write (default: the current directory)
    --hold MIB    mem: most memory held at once (default 512; capped at 25% of MemAvailable)
    --touch FILE  create FILE once every task is done (a workflow step's declared output)

Each task prints one line to stderr: what it did, its wall time, and its user/system CPU.
Only Python's standard library is used.
"""
import json
import mmap
import os
import socket
import sys
import threading
import time

MIB = 1 << 20
CHUNK = MIB                # disk write size (each one fsync'ed)
NET_CHUNK = 64 * 1024      # server send size
MEM_CHUNK = 64 * MIB       # mem map size


def cpu(mit):
    """Integer linear-congruential recurrence: pure interpreter work, no memory traffic."""
    x = 1
    for _ in range(int(mit * 1_000_000)):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    return x


def disk(mib, directory="."):
    """Write with O_DIRECT (no page-cache copy: the process waits on the device), fsync after
    each chunk; buffered writes where the file system refuses O_DIRECT (tmpfs)."""
    buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(CHUNK))
    path = os.path.join(directory, f".grademl-validation-disk-{os.getpid()}-{time.monotonic_ns()}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = os.open(path, flags | getattr(os, "O_DIRECT", 0), 0o644)
    except OSError:
        fd = os.open(path, flags, 0o644)
    try:
        left = -(-int(mib * MIB) // 4096) * 4096  # whole 4 KiB blocks, for O_DIRECT
        while left > 0:
            n = min(left, CHUNK)
            try:
                os.write(fd, buf if n == CHUNK else memoryview(buf)[:n])
            except OSError:  # O_DIRECT accepted at open but not for this write: go buffered
                os.close(fd)
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                os.write(fd, buf if n == CHUNK else memoryview(buf)[:n])
            os.fsync(fd)
            left -= n
    finally:
        os.close(fd)
        os.unlink(path)
        buf.close()


def mem_available_mib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 4096


def mem(mib, hold_mib=512):
    hold = max(MEM_CHUNK, int(min(hold_mib, mem_available_mib() * 0.25) * MIB))
    page = mmap.PAGESIZE
    left = int(mib * MIB)
    held, held_bytes = [], 0
    while left > 0:
        n = min(left, MEM_CHUNK)
        n = max(page, n - n % page)
        if held_bytes + n > hold:
            for m in held:
                m.close()
            held, held_bytes = [], 0
        m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        view = memoryview(m)
        view[::page] = b"\x01" * (n // page)  # one write per page: each one a page fault
        view.release()
        held.append(m)
        held_bytes += n
        left -= n
    for m in held:
        m.close()


def paced_send(conn, nbytes, rate_bps):
    """Send nbytes at rate_bps: chunk i leaves no earlier than t0 + i * chunk / rate."""
    chunk = b"\0" * NET_CHUNK
    t0 = time.monotonic()
    sent = 0
    while sent < nbytes:
        due = t0 + sent / rate_bps
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        n = min(NET_CHUNK, nbytes - sent)
        conn.sendall(chunk[:n] if n < NET_CHUNK else chunk)
        sent += n


def serve_one(conn):
    with conn:
        f = conn.makefile("rb")
        line = f.readline().split()
        if len(line) == 2:
            paced_send(conn, int(line[0]), float(line[1]))
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)  # wait for the client to close


def listen():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s


def serve():
    """Serve `net` clients until killed: one thread per connection, each paced on its own."""
    s = listen()
    print(s.getsockname()[1], flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve_one, args=(conn,), daemon=True).start()


def net(mib, rate_mibs=20.0, port=None):
    nbytes = int(mib * MIB)
    child = None
    if port is None:  # self-contained: fork a server for this one transfer
        s = listen()
        port = s.getsockname()[1]
        child = os.fork()
        if child == 0:
            try:
                conn, _ = s.accept()
                serve_one(conn)
            finally:
                os._exit(0)
        s.close()
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(f"{nbytes} {rate_mibs * MIB}\n".encode())
        buf = bytearray(256 * 1024)
        got = 0
        while got < nbytes:
            n = c.recv_into(buf)
            if n == 0:
                raise SystemExit(f"net: connection closed after {got} of {nbytes} bytes")
            got += n
    if child:
        os.waitpid(child, 0)


def calibrate(seconds=0.4):
    """Rates of cpu (Mit/s), disk (MiB/s) and mem (MiB/s) here, each measured for ~seconds."""
    def rate(fn, unit):
        amount, took = unit, 0.0
        while True:
            t = time.perf_counter()
            fn(amount)
            took = time.perf_counter() - t
            if took >= seconds or amount > unit * 1e4:
                return amount / took
            amount *= max(2.0, min(10.0, 1.2 * seconds / max(took, 1e-3)))
    fn_disk = lambda mib: disk(mib)
    return {"cpu_mit_per_s": rate(cpu, 0.2), "disk_mib_per_s": rate(fn_disk, 4),
            "mem_mib_per_s": rate(mem, 64)}


def main(argv):
    opts = {"--rate": 20.0, "--port": None, "--dir": ".", "--hold": 512.0, "--touch": None}
    tasks = []
    it = iter(argv)
    for a in it:
        if a in opts:
            opts[a] = next(it, None)
            if opts[a] is None:
                raise SystemExit(f"{a} needs a value")
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            tasks.append(a)
    if tasks[:1] == ["serve"]:
        serve()
        return 0
    if tasks[:1] == ["calibrate"]:
        print(json.dumps(calibrate(*(float(x) for x in tasks[1:2]))))
        return 0
    if not tasks:
        print(__doc__, file=sys.stderr)
        return 2
    rate, hold = float(opts["--rate"]), float(opts["--hold"])
    port = int(opts["--port"]) if opts["--port"] else None
    run = {"cpu": cpu, "disk": lambda a: disk(a, opts["--dir"]), "mem": lambda a: mem(a, hold),
           "net": lambda a: net(a, rate, port), "sleep": time.sleep}
    parsed = []
    for t in tasks:
        kind, _, amount = t.partition(":")
        if kind not in run:
            raise SystemExit(f"unknown task '{t}' (expected cpu:, disk:, mem:, net:, sleep:)")
        try:
            parsed.append((kind, float(amount)))
        except ValueError:
            raise SystemExit(f"task '{t}': '{amount}' is not a number")
    for kind, amount in parsed:
        t, c = time.perf_counter(), os.times()
        if amount > 0:
            run[kind](amount)
        c2 = os.times()
        print(f"[workload] {kind}:{amount:g} took {time.perf_counter() - t:.3f} s "
              f"(user {c2.user - c.user:.2f} s, sys {c2.system - c.system:.2f} s)",
              file=sys.stderr, flush=True)
    if opts["--touch"]:
        os.makedirs(os.path.dirname(opts["--touch"]) or ".", exist_ok=True)
        open(opts["--touch"], "w").close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
