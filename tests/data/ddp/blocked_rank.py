"""A two-rank gloo job whose rank 1 never enters rank 0's all_reduce: both ranks pass a
barrier, then rank 0 calls all_reduce and blocks in it while rank 1 sleeps (or spins)
until the job is stopped from outside (tests/e2e/ddp_test.cpp sends SIGTERM to grademl).

    blocked_rank.py OUT_DIR sleep|spin

Launches both ranks (this script with RANK set) and waits for them. Rank 0 writes
OUT_DIR/call.txt, "TIME PID", with time.time() right before it calls all_reduce (seconds
since the epoch) and its pid; rank 1 writes OUT_DIR/rank1.pid once it stopped taking part.
From the call until the stop, rank 0 was waiting for rank 1.
"""
import os
import socket
import subprocess
import sys
import time


def launch(out_dir, how):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), out_dir, how], env=env))
    return max(abs(p.wait()) for p in procs)


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def rank_main(out_dir, how):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dist.barrier()
    if rank == 0:
        t = torch.ones(1024)
        write(os.path.join(out_dir, "call.txt"), f"{time.time()!r} {os.getpid()}")
        dist.all_reduce(t)  # rank 1 never comes
        return 0
    write(os.path.join(out_dir, "rank1.pid"), str(os.getpid()))
    if how == "spin":
        while True:
            pass
    while True:
        time.sleep(1)


if __name__ == "__main__":
    if "RANK" in os.environ:
        sys.exit(rank_main(sys.argv[1], sys.argv[2]))
    sys.exit(launch(sys.argv[1], sys.argv[2]))
