"""grademl's Dask scheduler plugin (grademl/dask_plugin.py) and the preload merging of
grademl/auto/dask.py: the pure merging rules, the log a real in-process cluster writes, and
that a failing hook or a failing disk switch the plugin off without touching the program."""
import json
import os
import shutil
import tempfile
import unittest

from _ci import requires

import grademl.dask_plugin as plugin_module
from grademl.auto.dask import merge_preloads, without_plugin

try:
    import dask
    import distributed  # noqa: F401
except Exception:  # pragma: no cover
    dask = None

# In CI a missing dask / distributed fails these tests instead of skipping them (_ci.py).
OURS = "grademl.dask_plugin"


class MergePreloadsTest(unittest.TestCase):
    def test_added_once_at_the_end(self):
        self.assertEqual(merge_preloads([], []), ([OURS], []))
        self.assertEqual(merge_preloads("a", ()), (["a", OURS], []))
        self.assertEqual(merge_preloads(("a", "b"), ["--x"]), (["a", "b", OURS], ["--x"]))
        self.assertEqual(merge_preloads(["a", OURS], []), (["a", OURS], []))

    def test_per_preload_argv_gets_an_empty_entry(self):
        self.assertEqual(merge_preloads(["a"], [["--x"]]), (["a", OURS], [["--x"], []]))
        # Already listed (grademl's environment variable) but the user's argv is one short.
        self.assertEqual(merge_preloads(["a", OURS, "b"], [["1"], ["2"]]), (["a", OURS, "b"], [["1"], [], ["2"]]))

    def test_the_yaml_preloads_grademl_replaced_come_back_first(self):
        yaml = lambda: (["y1", "y2"], None)  # noqa: E731  (the user's argv stands)
        self.assertEqual(merge_preloads([OURS], [], yaml), (["y1", "y2", OURS], []))
        self.assertEqual(merge_preloads([OURS], [["a"], ["b"]], yaml), (["y1", "y2", OURS], [["a"], ["b"], []]))
        # grademl set the argv too ([]): the YAML's comes back with its preloads.
        yaml_argv = lambda: (["y1", "y2"], [["a"], ["b"]])  # noqa: E731
        self.assertEqual(merge_preloads([OURS], [], yaml_argv), (["y1", "y2", OURS], [["a"], ["b"], []]))
        self.assertEqual(merge_preloads([OURS], [], lambda: (["y"], ["--v"])), (["y", OURS], ["--v"]))
        # A list that is not grademl's alone was chosen by the user: left as it is.
        self.assertEqual(merge_preloads(["u", OURS], [], yaml), (["u", OURS], []))

    def test_without_plugin(self):
        self.assertEqual(without_plugin(["a", OURS], [["x"], []]), (["a"], [["x"]]))
        self.assertEqual(without_plugin(OURS, ["--x"]), ([], ["--x"]))
        self.assertEqual(without_plugin(["a"], []), (["a"], []))


class _Prefix:
    name = "inc"


class _Task:
    prefix = _Prefix()
    processing_on = None
    who_wants = ()
    waiters = ()


class _Worker:
    address = "tcp://127.0.0.1:9"


class _RaisingTasks:
    def get(self, key):
        raise RuntimeError("boom")


class _FakeScheduler:
    """What the plugin touches of a scheduler."""

    def __init__(self, tasks=None):
        self.tasks = tasks if tasks is not None else {}
        self.workers = {}
        self.plugins = {}
        self.address = "tcp://127.0.0.1:1"

    def add_plugin(self, plugin, name=None):
        self.plugins[name] = plugin

    def remove_plugin(self, name=None):
        del self.plugins[name]


def _read_log(directory):
    logs = sorted(f for f in os.listdir(directory) if f.startswith("dask-") and f.endswith(".jsonl"))
    records = []
    for name in logs:
        with open(os.path.join(directory, name)) as f:
            records.extend(json.loads(line) for line in f if line.strip())
    return records


@requires(dask is not None, "dask / distributed not importable with this interpreter (Debian: python3-distributed)")
class PluginTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="grademl-dask-test-")
        self._old = os.environ.get("GRADEML_EVENTS_DIR")
        os.environ["GRADEML_EVENTS_DIR"] = self.dir

    def tearDown(self):
        if self._old is None:
            os.environ.pop("GRADEML_EVENTS_DIR", None)
        else:
            os.environ["GRADEML_EVENTS_DIR"] = self._old
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_real_cluster_logs_every_task_and_its_dependencies(self):
        from dask.distributed import Client, LocalCluster

        with dask.config.set({"distributed.scheduler.preload": [OURS]}), \
                LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            self.assertIn(plugin_module.PLUGIN_NAME, cluster.scheduler.plugins)
            a = dask.delayed(sum, name="a")([1, 2], dask_key_name="a-1")
            b = dask.delayed(lambda x: x * 2)(a, dask_key_name="b-1")
            self.assertEqual(client.compute(b).result(), 6)
        records = _read_log(self.dir)
        self.assertEqual(records[0]["format"], "grademl-dask")
        self.assertEqual(records[0]["version"], 2)
        self.assertEqual(records[0]["pid"], os.getpid())
        kinds = [r[0] for r in records[1:]]
        self.assertEqual(kinds.count("w"), 1)
        tasks = {r[1]: r for r in records[1:] if r[0] == "t"}
        self.assertEqual(sorted(tasks), ["a-1", "b-1"])
        deps = {r[1]: r[2] for r in records[1:] if r[0] == "d"}
        self.assertEqual(deps, {"b-1": ["a-1"]})
        t = tasks["b-1"]
        # key, prefix, state, worker, nbytes, type, thread, sent, done, startstops, error
        self.assertEqual(t[2], "b")
        self.assertEqual(t[3], "memory")
        self.assertTrue(t[4].startswith("inproc://"))
        self.assertEqual(t[6], "int")
        self.assertLessEqual(t[8], t[9])
        self.assertIn("compute", [s[0] for s in t[10]])
        self.assertIsNone(t[11])

    def test_an_erred_task_is_logged_with_its_error(self):
        from dask.distributed import Client, LocalCluster

        def fail(x):
            raise ValueError("planted")

        with dask.config.set({"distributed.scheduler.preload": [OURS]}), \
                LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            bad = dask.delayed(fail)(1, dask_key_name="bad-1")
            after = dask.delayed(lambda x: x)(bad, dask_key_name="after-1")
            with self.assertRaises(ValueError):
                client.compute(after).result()
        tasks = {r[1]: r for r in _read_log(self.dir)[1:] if r[0] == "t"}
        self.assertEqual(tasks["bad-1"][3], "erred")
        self.assertIn("planted", tasks["bad-1"][11])
        self.assertEqual(tasks["after-1"][3], "erred")
        self.assertIsNone(tasks["after-1"][4])  # never ran

    def test_a_failing_hook_switches_the_plugin_off(self):
        scheduler = _FakeScheduler(tasks=_RaisingTasks())
        plugin = plugin_module.install(scheduler)
        self.assertIsNotNone(plugin)
        plugin.transition("k", "waiting", "processing")
        plugin.transition("k", "processing", "memory", worker="w", startstops=[])  # raises inside
        self.assertTrue(plugin.off)
        self.assertNotIn(plugin_module.PLUGIN_NAME, scheduler.plugins)
        plugin.transition("k", "processing", "memory", worker="w")  # still silent
        plugin.log.close()

    def test_a_failing_disk_stops_the_log_not_the_program(self):
        plugin = plugin_module.install(_FakeScheduler(tasks={"k": _Task()}))

        def full(*args):
            raise OSError(28, "No space left on device")

        plugin.log._write = full
        plugin.transition("k", "waiting", "processing")
        plugin.transition("k", "processing", "memory", worker="w", startstops=[])
        plugin.log.drain()
        self.assertTrue(plugin.log.failed)
        plugin.transition("k", "waiting", "processing")
        plugin.transition("k", "processing", "memory", worker="w", startstops=[])
        plugin.log.close()

    def test_a_record_that_cannot_be_written_is_counted_and_skipped(self):
        class Unprintable:
            def __str__(self):
                raise RuntimeError("no text")

        tasks = {"a": _Task(), "b": _Task()}
        plugin = plugin_module.install(_FakeScheduler(tasks=tasks))
        plugin.transition("a", "processing", "memory", worker="w", typename=Unprintable(), startstops=[])
        plugin.transition("b", "processing", "memory", worker="w", startstops=[])
        plugin.log.close()
        records = _read_log(self.dir)
        self.assertEqual([r[1] for r in records[1:] if r[0] == "t"], ["b"])
        self.assertEqual([r for r in records[1:] if r[0] == "n"], [["n", 1]])

    def test_records_beyond_the_bound_are_counted_not_kept(self):
        old = plugin_module.MAX_PENDING
        plugin_module.MAX_PENDING = 3
        try:
            tasks = {f"k{i}": _Task() for i in range(5)}
            plugin = plugin_module.install(_FakeScheduler(tasks=tasks))
            plugin.log._stop.set()  # no background drain during the test
            for key in tasks:
                plugin.transition(key, "waiting", "processing")
                plugin.transition(key, "processing", "memory", worker="w", startstops=[])
            plugin.log.close()
        finally:
            plugin_module.MAX_PENDING = old
        records = _read_log(self.dir)
        self.assertEqual(len([r for r in records[1:] if r[0] == "t"]), 3)
        self.assertEqual([r for r in records[1:] if r[0] == "n"], [["n", 2]])

    def test_the_log_descriptor_is_high_and_close_on_exec(self):
        import fcntl
        import resource

        plugin = plugin_module.install(_FakeScheduler())
        fd = plugin.log._fd
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.assertGreaterEqual(fd, min(plugin_module.HIGH_FD, soft // 2))
        self.assertTrue(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC)
        plugin.log.close()
        with self.assertRaises(OSError):
            os.fstat(fd)  # closed with the log

    def _task_done(self, plugin, key):
        plugin.transition(key, "waiting", "processing")
        plugin.transition(key, "processing", "memory", worker="w", startstops=[])

    def test_a_descriptor_taken_over_is_never_written_nor_closed(self):
        # A daemon-style program closes the log's descriptor and opens a file of its own
        # under the same number (dup2 does both at once): the plugin stops, writes nothing into
        # that file, and leaves it open.
        tasks = {"before": _Task(), "after": _Task()}
        plugin = plugin_module.install(_FakeScheduler(tasks=tasks))
        log = plugin.log
        log._stop.set()  # no background drain during the test
        self._task_done(plugin, "before")
        log.drain()
        own = os.path.join(self.dir, "own.txt")
        with open(own, "wb") as f:
            f.write(b"the program's own bytes\n")
            f.flush()
            os.dup2(f.fileno(), log._fd)
            fd = log._fd
            self._task_done(plugin, "after")
            log.drain()
            self.assertTrue(log.lost)
            self.assertEqual(log.unwritten, 1)
            log.close()  # no end record, and the descriptor is not closed
            self.assertEqual(os.fstat(fd).st_ino, os.fstat(f.fileno()).st_ino)
            os.close(fd)
        with open(own, "rb") as f:
            self.assertEqual(f.read(), b"the program's own bytes\n")
        records = _read_log(self.dir)
        self.assertEqual([r[1] for r in records[1:] if r[0] == "t"], ["before"])
        self.assertEqual([r for r in records[1:] if r[0] == "e"], [])  # cut short: the importer says so

    def test_a_closed_descriptor_stops_the_log_for_good(self):
        tasks = {"a": _Task(), "b": _Task()}
        plugin = plugin_module.install(_FakeScheduler(tasks=tasks))
        log = plugin.log
        log._stop.set()
        fd = log._fd
        os.close(fd)  # os.closerange(3, 65536)
        self._task_done(plugin, "a")
        log.drain()
        self.assertTrue(log.lost)
        # The number used again afterwards: still never touched.
        own = os.path.join(self.dir, "own.txt")
        with open(own, "wb") as f:
            os.dup2(f.fileno(), fd)
            self._task_done(plugin, "b")
            log.drain()
            log.close()
            os.fstat(fd)  # still open
            os.close(fd)
        self.assertEqual(os.path.getsize(own), 0)
        self.assertEqual(log.unwritten, 2)

    def test_a_log_of_an_earlier_process_with_the_same_pid_is_kept(self):
        taken = os.path.join(self.dir, f"dask-{os.getpid()}-{next(plugin_module._log_numbers) + 1}.jsonl")
        with open(taken, "w") as f:
            f.write("an earlier log\n")
        plugin = plugin_module.install(_FakeScheduler())
        self.assertNotEqual(plugin.log.path, taken)
        plugin.log.close()
        with open(taken) as f:
            self.assertEqual(f.read(), "an earlier log\n")

    def test_the_end_record_closes_the_log_once(self):
        plugin = plugin_module.install(_FakeScheduler(tasks={"a": _Task()}))
        self._task_done(plugin, "a")
        plugin.log.close()
        plugin.log.close()
        records = _read_log(self.dir)
        self.assertEqual(records[0]["version"], 2)
        self.assertEqual([r[0] for r in records[1:]], ["t", "e"])
        self.assertGreaterEqual(records[-1][1], records[0]["t"])

    def test_a_forked_child_never_writes_the_parents_log(self):
        tasks = {"parent": _Task(), "child": _Task()}
        plugin = plugin_module.install(_FakeScheduler(tasks=tasks))
        plugin.log._stop.set()
        pid = os.fork()
        if pid == 0:  # the child: what its atexit would do
            try:
                self._task_done(plugin, "child")
                plugin.log.close()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        self._task_done(plugin, "parent")
        plugin.log.close()
        records = _read_log(self.dir)
        self.assertEqual([r[1] for r in records[1:] if r[0] == "t"], ["parent"])
        self.assertEqual(len([r for r in records[1:] if r[0] == "e"]), 1)

    def test_released_while_processing_is_cancelled_only_when_nobody_wants_it(self):
        cancelled, rescheduled = _Task(), _Task()
        rescheduled.who_wants = {"a client"}
        plugin = plugin_module.install(_FakeScheduler(tasks={"c": cancelled, "r": rescheduled}))
        for key, ts in (("c", cancelled), ("r", rescheduled)):
            ts.processing_on = _Worker()
            plugin.transition(key, "waiting", "processing")
            ts.processing_on = None  # the scheduler clears it before the plugin hears of the release
            plugin.transition(key, "processing", "released")
        plugin.log.close()
        tasks = [r for r in _read_log(self.dir)[1:] if r[0] == "t"]
        self.assertEqual(len(tasks), 1)
        key, prefix, state, worker, nbytes, typename, thread, sent, done, startstops, error = tasks[0][1:]
        self.assertEqual((key, prefix, state, worker), ("c", "inc", "cancelled", "tcp://127.0.0.1:9"))
        self.assertLessEqual(sent, done)
        self.assertEqual(startstops, [])

    def test_a_running_task_whose_future_is_cancelled_is_logged(self):
        import time

        from dask.distributed import Client, LocalCluster

        def slow(x):
            time.sleep(x)
            return x

        with dask.config.set({"distributed.scheduler.preload": [OURS]}), \
                LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
            with Client(cluster) as client:
                f = client.submit(slow, 1.5, key="slow-1")
                g = client.submit(slow, 1.5, key="slow-2")
                tasks = cluster.scheduler.tasks
                deadline = time.time() + 30
                while time.time() < deadline and not all(
                        k in tasks and tasks[k].state == "processing" for k in ("slow-1", "slow-2")):
                    time.sleep(0.01)
                before = time.time()
                f.cancel()
                after = time.time()
                del g  # still running when its client closes
            closed = time.time()
        records = {r[1]: r for r in _read_log(self.dir)[1:] if r[0] == "t"}
        self.assertEqual(records["slow-1"][3], "cancelled")
        self.assertTrue(records["slow-1"][4].startswith("inproc://"))
        self.assertLessEqual(records["slow-1"][8], before)
        self.assertGreaterEqual(records["slow-1"][9], before)
        self.assertLessEqual(records["slow-1"][9], after)
        self.assertEqual(records["slow-2"][3], "cancelled")
        self.assertGreaterEqual(records["slow-2"][9], after)
        self.assertLessEqual(records["slow-2"][9], closed)

    def test_nothing_without_an_events_dir(self):
        os.environ.pop("GRADEML_EVENTS_DIR", None)
        scheduler = _FakeScheduler()
        self.assertIsNone(plugin_module.install(scheduler))
        self.assertEqual(scheduler.plugins, {})


if __name__ == "__main__":
    unittest.main()
