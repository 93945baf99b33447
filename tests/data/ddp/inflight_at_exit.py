"""Two gloo ranks where rank 0 leaves an asynchronous all_reduce in flight and returns from
its program at once, and rank 1 joins that all_reduce only DELAY_S later: rank 0's gloo
worker thread completes the collective while rank 0's interpreter is already exiting. A
Python callback on that collective's future (grademl's, timing it) then runs on the worker
thread at exit; it must never abort the process (tests/e2e/ddp_test.cpp).

    inflight_at_exit.py OUT_DIR DELAY_S            launches both ranks, waits for them

Each rank is this script with RANK set. Rank 1 writes OUT_DIR/rank1.json with the
all_reduce's result; the launcher writes OUT_DIR/exit_codes.json with both ranks' exit codes
(negative: killed by that signal) and exits 0 only when both exited 0.
"""
import json
import os
import socket
import subprocess
import sys
import time


def launch(out_dir, delay_s):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), out_dir, str(delay_s)], env=env))
    codes = [p.wait() for p in procs]
    with open(os.path.join(out_dir, "exit_codes.json"), "w") as f:
        json.dump(codes, f)
    return 0 if codes == [0, 0] else 1


def rank_main(out_dir, delay_s):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.full((4,), float(rank + 1))
    if rank == 0:
        dist.all_reduce(t, async_op=True)  # never waited for
        return 0
    time.sleep(delay_s)
    dist.all_reduce(t)
    with open(os.path.join(out_dir, "rank1.json"), "w") as f:
        json.dump({"sum": t.tolist()}, f)
    return 0


if __name__ == "__main__":
    if "RANK" in os.environ:
        sys.exit(rank_main(sys.argv[1], float(sys.argv[2])))
    sys.exit(launch(sys.argv[1], float(sys.argv[2])))
