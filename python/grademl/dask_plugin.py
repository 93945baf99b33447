"""grademl's Dask scheduler plugin: records every task a `dask.distributed` scheduler ran,
without any change to the user's program.

`grademl run` names this module in Dask's `distributed.scheduler.preload` configuration
(the environment variable DASK_DISTRIBUTED__SCHEDULER__PRELOAD, merged with the user's own
list; grademl.auto.dask also adds it where a program passes its own preload list), so that
every scheduler started under the run imports it and calls `dask_setup(scheduler)`, which
adds a SchedulerPlugin.

The plugin never holds the scheduler: its hooks only append compact tuples to a deque (a
few hundred nanoseconds); a background thread turns them into lines of a task log,
"<GRADEML_EVENTS_DIR>/dask-<pid>-<n>.jsonl", every half second, and when the scheduler
closes or the process exits. grademl imports the log when the run ends
(src/importers/dask/, docs/engines.md describes the format and the mapping). Every hook is
guarded: an exception switches the plugin off (GRADEML_DEBUG=1 says why) and never reaches
the scheduler; what was logged until then stays importable.

The log is JSON lines. The first is an object, {"format": "grademl-dask", "version": 2,
...}; the others are arrays whose first element says what they are:
  ["w", address, host, pid, name, nthreads, time_delay, t]   a worker joined
  ["x", address, time_delay, t]                              a worker left
  ["d", key, [dependency keys]]                              a task's dependencies (update_graph)
  ["t", key, prefix, state, worker, nbytes, type, thread, sent, done, [[action, start, stop, source], ...], error]
                  a task finished: state "memory" or "erred"; sent: when the scheduler gave it to
                  the worker (processing), done: when it heard back; startstops as the worker
                  reported them (compute and transfer shifted by the worker's scheduler_delay);
                  or state "cancelled": a task released while a worker had it (its future
                  cancelled, its client gone), done: when the scheduler released it; no startstops
  ["n", count]                                               records dropped (the buffer was full)
  ["e", t]                                                   the end: the log was closed (version 2)
Times are the scheduler's clock (distributed.metrics.time, seconds since the epoch). A log of
version 2 without its end record was cut short: its process was killed, or the plugin lost
its file (below).

The log's descriptor lives inside the user's scheduler process, which may close descriptors
it does not know of (a daemon's os.closerange) and open its own files under the same
numbers: it is kept at a high number (F_DUPFD_CLOEXEC), and before every write the plugin
checks (os.fstat: device and inode) that it is still the file it opened. Once it is not (or in
a forked child), the log stops for good, its descriptor never touched again, not even closed.
"""
import collections
import itertools
import json
import os
import socket
import sys
import threading
import time

PLUGIN_NAME = "grademl-dask"
MODULE_NAME = "grademl.dask_plugin"
FORMAT = "grademl-dask"
VERSION = 2
# The log's descriptor is moved to at least this number (and below half the process's limit).
HIGH_FD = 4096

# Records waiting for the writer, at most: beyond it they are counted and dropped (the
# writer cannot keep up, e.g. a stalled disk), so memory stays bounded.
MAX_PENDING = 1_000_000
FLUSH_INTERVAL_S = 0.5
# The text of an erred task's exception, at most.
MAX_ERROR_CHARS = 300

_log_numbers = itertools.count()
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, default=str).encode


def _debug(msg):
    if os.environ.get("GRADEML_DEBUG"):
        try:
            print(f"grademl.dask_plugin: {msg}", file=sys.stderr)
        except Exception:
            pass


def _text(value):
    return value if isinstance(value, str) else str(value)


def _open_high(path):
    """A new file's descriptor, close-on-exec, moved to a high number: (fd, (st_dev, st_ino))."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        import fcntl
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        limit = soft if 0 < soft < (1 << 30) else 1 << 20
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, max(3, min(HIGH_FD, limit // 2)))
        os.close(fd)
        fd = high
    except Exception as e:  # no room up there: the number open() gave, checked all the same
        _debug(f"task log descriptor left at {fd}: {e!r}")
    st = os.fstat(fd)
    return fd, (st.st_dev, st.st_ino)


class TaskLog:
    """The writer side: a deque the hooks append to, and a daemon thread that drains it into
    the log file through a descriptor of its own, checked before every write (see the module's
    comment). Thread-safe: deque.append and popleft are atomic."""

    def __init__(self, path, header, clock=time.time):
        self.path = path
        self.queue = collections.deque()
        self.dropped = 0
        self.failed = False
        self.lost = False    # the descriptor no longer is the log's (or a forked child): stopped
        self.unwritten = 0   # records not logged since it stopped
        self.cpu_s = 0.0     # CPU time the writer spent (its thread's), for the benchmark
        self._clock = clock
        self._lock = threading.Lock()  # one drain at a time (thread, close, atexit)
        self._stop = threading.Event()
        self._pid = os.getpid()
        self._fd, self._id = _open_high(path)
        self._closed = False
        try:
            if not self._write(_encode(header) + "\n"):
                raise OSError(f"the descriptor of {path} changed at once")
        except BaseException:
            if not self.lost:
                os.close(self._fd)
            raise
        self._thread = threading.Thread(target=self._run, name="grademl-dask-log", daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(FLUSH_INTERVAL_S):
            self.drain()

    def _ours(self):
        """Whether the descriptor still is the file this log opened, in the process that
        opened it; once not, never again."""
        if self.lost:
            return False
        st = None
        if os.getpid() == self._pid:
            try:
                st = os.fstat(self._fd)
            except OSError:
                pass
        if st is None or (st.st_dev, st.st_ino) != self._id:
            self.lost = True
            _debug(f"task log {self.path}: its descriptor {self._fd} is no longer the log's; logging stopped")
            return False
        return True

    def _write(self, text):
        """Writes `text`, the descriptor checked before each write; False once it is lost."""
        view = memoryview(text.encode("ascii"))
        while view:
            if not self._ours():
                return False
            view = view[os.write(self._fd, view):]
        return True

    def drain(self):
        with self._lock:
            self._drain(False)

    def _drain(self, end):
        """What the queue holds as lines (then the end record when `end`); the lock held."""
        if self.failed or self.lost or self._closed:
            self.unwritten += len(self.queue)
            self.queue.clear()
            return
        started = time.thread_time()
        try:
            lines = []
            batch = 0  # records in `lines`
            popleft = self.queue.popleft
            for _ in range(len(self.queue)):
                try:
                    lines.extend(_lines(popleft()))
                    batch += 1
                except Exception as e:  # one record that cannot be written: counted, skipped
                    self.dropped += 1
                    _debug(f"a record was not logged: {e!r}")
                if len(lines) >= 4096:
                    if not self._write("\n".join(lines) + "\n"):
                        break
                    lines, batch = [], 0
            else:
                if self.dropped:
                    n, self.dropped = self.dropped, 0
                    lines.append(_encode(["n", n]))
                if end:
                    lines.append(_encode(["e", self._clock()]))
                if not lines or self._write("\n".join(lines) + "\n"):
                    batch = 0
            if self.lost:  # stopped for good: what was not written is counted
                self.unwritten += batch + len(self.queue)
                self.queue.clear()
            self.cpu_s += time.thread_time() - started
        except Exception as e:  # a full disk, ...: stop logging, keep what was written
            self.failed = True
            self.queue.clear()
            _debug(f"task log {self.path} disabled: {e!r}")

    def close(self):
        """The last records and the end record, then the descriptor closed -- unless it is no
        longer the log's. Once only."""
        self._stop.set()
        with self._lock:
            if self._closed:
                return
            self._drain(True)
            self._closed = True
            try:
                if self._ours():
                    os.close(self._fd)
            except Exception:
                pass


def _lines(record):
    """The log lines of one record appended by a hook (in the writer thread)."""
    kind = record[0]
    if kind == "t":
        _, key, prefix, state, worker, nbytes, typename, thread, t_sent, t_done, startstops, error = record
        ss = []
        for s in startstops or ():
            try:
                ss.append([s["action"], s["start"], s["stop"], s.get("source")])
            except Exception:
                continue
        if state != "erred":
            error = None
        elif error is not None:
            error = _text(error)[:MAX_ERROR_CHARS]
        return (_encode(["t", _text(key), prefix, state, worker, nbytes, typename, thread, t_sent, t_done, ss,
                         error]),)
    if kind == "d":
        out = []
        for key, deps in record[1].items():
            if deps:
                out.append(_encode(["d", _text(key), [_text(d) for d in deps]]))
        return out
    return (_encode(list(record)),)


class GrademlSchedulerPlugin:
    """Built on distributed's SchedulerPlugin by make_plugin (distributed is only imported
    when a scheduler runs this module)."""


def make_plugin(sched, log):
    from distributed.diagnostics.plugin import SchedulerPlugin
    from distributed.metrics import time as now

    tasks = sched.tasks
    sent = {}  # key -> (when it went to processing, its worker's state) (only tasks processing now)
    queue = log.queue
    append = queue.append

    def record(item):
        if len(queue) < MAX_PENDING:
            append(item)
        else:
            log.dropped += 1

    class Plugin(SchedulerPlugin, GrademlSchedulerPlugin):
        name = PLUGIN_NAME

        def __init__(self):
            self.off = False
            self.log = log

        def _disable(self, where, exc):
            # Off for good: out of the scheduler's plugins, so that no hook runs any more.
            self.off = True
            _debug(f"plugin disabled after an error in {where}: {exc!r}")
            try:
                sched.remove_plugin(name=PLUGIN_NAME)
            except Exception:
                pass

        def _worker(self, address):
            ws = sched.workers.get(address)
            if ws is None:
                return
            record(("w", address, ws.host, ws.pid, _text(ws.name), ws.nthreads,
                    getattr(ws, "time_delay", 0), now()))

        async def start(self, scheduler):
            if self.off:
                return
            try:
                for address in list(sched.workers):
                    self._worker(address)
            except Exception as e:
                self._disable("start", e)

        def update_graph(self, scheduler, keys=None, restrictions=None, dependencies=None, **kwargs):
            if self.off:
                return
            try:
                if dependencies:
                    record(("d", dict(dependencies)))  # a shallow copy, in C
            except Exception as e:
                self._disable("update_graph", e)

        # The hot path: called for every transition of every task (about five per task).
        # Only a tuple of references is kept (holding on to the kwargs dict itself costs
        # more: measured); the writer thread formats it.
        def transition(self, key, start, finish, *args, **kwargs):
            try:
                if finish == "processing":
                    # The earliest the task can have started, and where (the worker is gone
                    # from the task by the time it is released).
                    ts = tasks.get(key)
                    sent[key] = (now(), ts.processing_on if ts is not None else None)
                elif start == "processing":
                    t_sent, ws = sent.pop(key, None) or (None, None)
                    if (finish == "memory" or finish == "erred") and not self.off:
                        ts = tasks.get(key)
                        item = ("t", key, ts.prefix.name if ts is not None else None, finish, kwargs.get("worker"),
                                kwargs.get("nbytes"), kwargs.get("typename"), kwargs.get("thread"), t_sent, now(),
                                kwargs.get("startstops"), kwargs.get("exception_text"))
                        if len(queue) < MAX_PENDING:
                            append(item)
                        else:
                            log.dropped += 1
                    elif finish == "released" and not self.off:
                        # Released while a worker had it: cancelled when nobody wants it any
                        # more (its futures cancelled, its client gone), else rescheduled (its
                        # worker left, the task was stolen) and not recorded here.
                        ts = tasks.get(key)
                        if ts is not None and ws is not None and not ts.who_wants and not ts.waiters:
                            record(("t", key, ts.prefix.name, "cancelled", ws.address, None, None, None, t_sent,
                                    now(), None, None))
                elif finish == "erred" and not self.off:
                    # Erred without running (a dependency failed).
                    ts = tasks.get(key)
                    record(("t", key, ts.prefix.name if ts is not None else None, finish, None, None, None, None,
                            None, now(), None, None))
            except Exception as e:
                self._disable("transition", e)

        def add_worker(self, scheduler=None, worker=None):
            if self.off:
                return
            try:
                self._worker(worker)
            except Exception as e:
                self._disable("add_worker", e)

        def remove_worker(self, scheduler=None, worker=None):
            if self.off:
                return
            try:
                ws = sched.workers.get(worker)
                record(("x", worker, getattr(ws, "time_delay", None), now()))
            except Exception as e:
                self._disable("remove_worker", e)

        async def close(self):
            self.off = True  # nothing more is recorded once the log is closed
            try:
                log.close()
            except Exception as e:
                _debug(f"closing the task log failed: {e!r}")

    return Plugin()


def _scheduler_address(scheduler):
    try:
        return scheduler.address
    except Exception:
        return None


def _open_log(scheduler):
    events_dir = os.environ.get("GRADEML_EVENTS_DIR")
    if not events_dir or not os.path.isdir(events_dir):
        return None
    from distributed.metrics import time as now

    header = {
        "format": FORMAT,
        "version": VERSION,
        "scheduler": _scheduler_address(scheduler),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "t": now(),
        "clock": "scheduler",
    }
    try:
        import distributed

        header["distributed"] = distributed.__version__
    except Exception:
        pass
    # A new file: an earlier process of the run with this pid (pids are reused) keeps its log.
    for _ in range(1000):
        path = os.path.join(events_dir, f"dask-{os.getpid()}-{next(_log_numbers)}.jsonl")
        try:
            return TaskLog(path, header, now)
        except FileExistsError:
            continue
    return None


def install(scheduler):
    """Adds the plugin to `scheduler` (once). Returns the plugin, or None when nothing is
    recorded (not under `grademl run`, or an error: never raised)."""
    try:
        for plugin in list(getattr(scheduler, "plugins", {}).values()):
            if isinstance(plugin, GrademlSchedulerPlugin):
                return plugin
        log = _open_log(scheduler)
        if log is None:
            return None
        plugin = make_plugin(scheduler, log)
        scheduler.add_plugin(plugin, name=PLUGIN_NAME)
        import atexit

        atexit.register(log.close)
        return plugin
    except Exception as e:
        _debug(f"not installed: {e!r}")
        return None


def dask_setup(scheduler):
    """Dask's preload entry point (run when the scheduler starts)."""
    install(scheduler)
