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

The log is JSON lines. The first is an object, {"format": "grademl-dask", "version": 1,
...}; the others are arrays whose first element says what they are:
  ["w", address, host, pid, name, nthreads, time_delay, t]   a worker joined
  ["x", address, time_delay, t]                              a worker left
  ["d", key, [dependency keys]]                              a task's dependencies (update_graph)
  ["t", key, prefix, state, worker, nbytes, type, thread, sent, done, [[action, start, stop, source], ...], error]
                  a task finished: state "memory" or "erred"; sent: when the scheduler gave it to
                  the worker (processing), done: when it heard back; startstops as the worker
                  reported them (compute and transfer shifted by the worker's scheduler_delay)
  ["n", count]                                               records dropped (the buffer was full)
Times are the scheduler's clock (distributed.metrics.time, seconds since the epoch).
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
VERSION = 1

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


class TaskLog:
    """The writer side: a deque the hooks append to, and a daemon thread that drains it into
    the log file. Thread-safe: deque.append and popleft are atomic."""

    def __init__(self, path, header):
        self.path = path
        self.queue = collections.deque()
        self.dropped = 0
        self.failed = False
        self.cpu_s = 0.0  # CPU time the writer spent (its thread's), for the benchmark
        self._lock = threading.Lock()  # one drain at a time (thread, close, atexit)
        self._stop = threading.Event()
        self._file = open(path, "w", encoding="ascii", buffering=1 << 16)
        self._file.write(_encode(header) + "\n")
        self._file.flush()
        self._thread = threading.Thread(target=self._run, name="grademl-dask-log", daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(FLUSH_INTERVAL_S):
            self.drain()

    def drain(self):
        with self._lock:
            if self.failed or self._file is None:
                self.queue.clear()
                return
            started = time.thread_time()
            try:
                lines = []
                popleft = self.queue.popleft
                for _ in range(len(self.queue)):
                    try:
                        lines.extend(_lines(popleft()))
                    except Exception as e:  # one record that cannot be written: counted, skipped
                        self.dropped += 1
                        _debug(f"a record was not logged: {e!r}")
                    if len(lines) >= 4096:
                        self._file.write("\n".join(lines) + "\n")
                        lines = []
                if self.dropped:
                    n, self.dropped = self.dropped, 0
                    lines.append(_encode(["n", n]))
                if lines:
                    self._file.write("\n".join(lines) + "\n")
                self._file.flush()
                self.cpu_s += time.thread_time() - started
            except Exception as e:  # a full disk, ...: stop logging, keep what was written
                self.failed = True
                self.queue.clear()
                _debug(f"task log {self.path} disabled: {e!r}")

    def close(self):
        self._stop.set()
        self.drain()
        with self._lock:
            try:
                if self._file is not None:
                    self._file.close()
            except Exception:
                pass
            self._file = None


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
    sent = {}  # key -> when it went to processing (only tasks processing now)
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
                    sent[key] = now()  # the earliest the task can have started
                elif start == "processing":
                    t_sent = sent.pop(key, None)
                    if (finish == "memory" or finish == "erred") and not self.off:
                        ts = tasks.get(key)
                        item = ("t", key, ts.prefix.name if ts is not None else None, finish, kwargs.get("worker"),
                                kwargs.get("nbytes"), kwargs.get("typename"), kwargs.get("thread"), t_sent, now(),
                                kwargs.get("startstops"), kwargs.get("exception_text"))
                        if len(queue) < MAX_PENDING:
                            append(item)
                        else:
                            log.dropped += 1
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

    path = os.path.join(events_dir, f"dask-{os.getpid()}-{next(_log_numbers)}.jsonl")
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
    return TaskLog(path, header)


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
