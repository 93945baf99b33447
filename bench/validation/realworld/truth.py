"""Ground truth recorded by a real-world-shaped workload about itself, from the kernel and
independently of GradeML (bench/validation/realworld, docs/validation.md).

A workload calls `truth.start(role)` first. From then on:
  - a sampler thread reads /proc/self/smaps_rollup (and, with tree=True, that of every
    descendant, found through /proc/PID/task/TID/children) every SAMPLE_S seconds and keeps
    the peak Pss and Rss of the process alone and of its tree (sums taken at one moment);
  - `truth.count(key, n)` counts what the program did (epochs, iterations by mode...);
  - `truth.finish()`, the program's last statement, writes
    $GRADEML_TRUTH_DIR/<role>-<pid>.json: pid, ppid, role, argv, getrusage(RUSAGE_SELF) and
    getrusage(RUSAGE_CHILDREN) user+system seconds, the peaks, the counts; then it flushes
    stdout and stderr and leaves with os._exit, so that no CPU is spent after the truth was
    taken. (The interpreter's own teardown after atexit handlers costs 0.2-0.3 s of CPU for a
    program that imported torch or scikit-learn here: a truth taken at atexit misses it.)
    A forked worker writes it from multiprocessing's exit finalizers (worker_init), after
    which multiprocessing itself leaves with os._exit. atexit writes it as a fallback when
    the program ends some other way (an exception: the workload then fails anyway).

Nothing is written when GRADEML_TRUTH_DIR is not set. Only the standard library is used.
"""
import atexit
import json
import os
import resource
import sys
import threading

SAMPLE_S = 0.1  # smaps_rollup of a process holding torch costs about 1 ms here

_state = None


def _rollup(pid):
    """(Pss, Rss) in bytes from /proc/PID/smaps_rollup, or None when it is gone."""
    pss = rss = None
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    pss = int(line.split()[1]) * 1024
                elif line.startswith(b"Rss:"):
                    rss = int(line.split()[1]) * 1024
    except OSError:
        return None
    return (pss, rss) if pss is not None and rss is not None else None


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


class _Truth:
    def __init__(self, role, tree):
        self.role, self.tree = role, tree
        self.pid = os.getpid()
        self.counts = {}
        self.peak = {"self_pss": 0, "self_rss": 0, "tree_pss": 0, "tree_rss_sum": 0, "tree_processes": 1}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.written = False
        self.sample()
        self.thread = threading.Thread(target=self.loop, name="truth-sampler", daemon=True)
        self.thread.start()

    def sample(self):
        me = _rollup(self.pid)
        if me is None:
            return
        with self.lock:
            self.peak["self_pss"] = max(self.peak["self_pss"], me[0])
            self.peak["self_rss"] = max(self.peak["self_rss"], me[1])
        if self.tree:
            pss, rss, n = me[0], me[1], 1
            for kid in _descendants(self.pid):
                r = _rollup(kid)
                if r:
                    pss, rss, n = pss + r[0], rss + r[1], n + 1
            with self.lock:
                if pss > self.peak["tree_pss"]:
                    self.peak["tree_pss"], self.peak["tree_processes"] = pss, n
                self.peak["tree_rss_sum"] = max(self.peak["tree_rss_sum"], rss)

    def loop(self):
        while not self.stop.wait(SAMPLE_S):
            self.sample()

    def write(self):
        if self.written or os.getpid() != self.pid:
            return
        self.written = True
        self.stop.set()
        self.sample()
        directory = os.environ.get("GRADEML_TRUTH_DIR")
        if not directory:
            return
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        doc = {"pid": self.pid, "ppid": os.getppid(), "role": self.role, "argv": sys.argv,
               "cpu_self_s": me.ru_utime + me.ru_stime, "user_self_s": me.ru_utime, "sys_self_s": me.ru_stime,
               "cpu_children_s": kids.ru_utime + kids.ru_stime, "maxrss_self_bytes": me.ru_maxrss * 1024,
               "counts": self.counts, **{f"peak_{k}" + ("" if k == "tree_processes" else "_bytes"): v
                                         for k, v in self.peak.items()}}
        path = os.path.join(directory, f"{self.role}-{self.pid}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(path + ".tmp", path)


def start(role, tree=False):
    """Starts recording this process's truth (tree=True: also its descendants' memory)."""
    global _state
    _state = _Truth(role, tree)
    atexit.register(_state.write)
    return _state


def finish(code=0):
    """Writes the truth and ends the process at once (see above)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if _state is not None:
        _state.write()
    os._exit(code)


def count(key, n=1):
    if _state is not None:
        _state.counts[key] = _state.counts.get(key, 0) + n


def worker_init(role="dataloader_worker"):
    """For a forked worker (DataLoader worker_init_fn): its own truth, written by
    multiprocessing's exit finalizers (forked workers leave through os._exit, not atexit)."""
    import multiprocessing.util
    global _state
    _state = _Truth(role, False)
    multiprocessing.util.Finalize(None, _state.write, exitpriority=100)
