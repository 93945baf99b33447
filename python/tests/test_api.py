import os
import threading
import unittest

from _fake import Recorder, disable, use_recorder  # noqa: F401  (sets sys.path)

import grademl


class ApiTest(unittest.TestCase):
    def setUp(self):
        self.r = use_recorder()

    def tearDown(self):
        disable()

    def test_nesting_and_tags(self):
        with grademl.phase("train", epoch=3):
            with grademl.phase("step", i=1, lr=0.5):
                pass
            with grademl.phase("step"):
                pass
        self.assertEqual(self.r.phases(), [
            ("train", None, {"epoch": "3"}, 0, None),
            ("step", None, {"i": "1", "lr": "0.5"}, 1, "train"),
            ("step", None, {}, 1, "train"),
        ])
        # train epoch step i lr 0.5: each once; the int values 3 and 1 are not interned
        self.assertEqual(sorted(self.r.ids), sorted(["train", "epoch", "step", "i", "lr", "0.5"]))
        self.assertTrue(grademl.enabled())

    def test_interned_once(self):
        calls = []
        orig = self.r.intern
        self.r.intern = lambda s: calls.append(s) or orig(s)
        for _ in range(5):
            with grademl.phase("x"):
                pass
        self.assertEqual(calls, ["x"])

    def test_exception_closes_phase(self):
        with self.assertRaises(ValueError):
            with grademl.phase("boom"):
                raise ValueError()
        self.assertEqual(self.r.events, [("begin", "boom", None), ("end",)])

    def test_phase_type(self):
        with grademl.phase("load", phase_type="io", path="a"):
            pass
        self.assertEqual(self.r.phases(), [("load", "io", {"path": "a"}, 0, None)])

    def test_decorators(self):
        @grademl.phase("load", k=1)
        def load(x):
            return x + 1

        @grademl.phase
        def bare(x):
            with grademl.phase("inner"):
                return x * 2

        self.assertEqual(load(1), 2)
        self.assertEqual(bare(2), 4)
        self.assertEqual(bare.__name__, "bare")
        qual = "ApiTest.test_decorators.<locals>.bare"
        self.assertEqual(self.r.phases(), [
            ("load", None, {"k": "1"}, 0, None),
            (qual, None, {}, 0, None),
            ("inner", None, {}, 1, qual),
        ])

    def test_decorator_exception(self):
        @grademl.phase
        def f():
            raise KeyError()

        with self.assertRaises(KeyError):
            f()
        self.assertEqual(len(self.r.phases()), 1)

    def test_begin_end_instant_counter_flow(self):
        grademl.begin("a", x=1)
        grademl.instant("mark")
        grademl.counter("loss", 2)
        grademl.flow_out(7)
        grademl.flow_in(7)
        grademl.end()
        self.assertEqual(self.r.events, [
            ("begin", "a", None), ("tag", "x", "1"), ("instant", "mark"),
            ("counter", "loss", 2.0), ("flow_out", 7), ("flow_in", 7), ("end",),
        ])

    def test_threads(self):
        def work():
            with grademl.phase("t"):
                pass

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(self.r.count("name", "t"), 4)


class DisabledTest(unittest.TestCase):
    def setUp(self):
        disable()

    def test_noops(self):
        self.assertFalse(grademl.enabled())
        with grademl.phase("x", a=1) as p:
            self.assertIsNotNone(p)
        grademl.begin("x")
        grademl.end()
        grademl.instant("x")
        grademl.counter("x", 1.0)
        grademl.flow_out(1)
        grademl.flow_in(1)

        def f():
            return 3

        self.assertIs(grademl.phase(f), f)  # bare decorator returns the function itself
        self.assertIs(grademl.phase("n")(f), f)

    def test_import_without_env(self):
        import subprocess
        import sys

        env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEML_")}
        env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        out = subprocess.run([sys.executable, "-c",
                              "import grademl\nwith grademl.phase('x'): pass\nprint(grademl.enabled())"],
                             env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "False")

    def test_missing_library(self):
        import subprocess
        import sys
        import tempfile

        here = os.path.dirname(os.path.abspath(__file__))
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, GRADEML_EVENTS_DIR=d, GRADEML_LIBRARY="/nonexistent/libgrademl.so",
                       GRADEML_AUTO="1",
                       PYTHONPATH=os.pathsep.join([os.path.join(here, ".."),
                                                   os.path.join(here, "..", "grademl", "_autoload")]))
            out = subprocess.run([sys.executable, "-c",
                                  "import grademl, sys\nwith grademl.phase('x'): pass\n"
                                  "print(grademl.enabled(), 'sitecustomize' in sys.modules)"],
                                 env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split()[0], "False")

    def test_the_users_own_sitecustomize_still_runs(self):
        # grademl's autoload shadows sitecustomize on PYTHONPATH and chains to the next one.
        import subprocess
        import sys
        import tempfile

        here = os.path.dirname(os.path.abspath(__file__))
        with tempfile.TemporaryDirectory() as d:
            user = os.path.join(d, "user")
            os.mkdir(user)
            with open(os.path.join(user, "sitecustomize.py"), "w") as f:
                f.write("import builtins\nbuiltins.USER_SITE_RAN = __file__\n")
            env = dict(os.environ, GRADEML_EVENTS_DIR=d, GRADEML_LIBRARY="/nonexistent/libgrademl.so",
                       GRADEML_AUTO="1", GRADEML_AUTO_FORCE="1",
                       PYTHONPATH=os.pathsep.join([os.path.join(here, ".."),
                                                   os.path.join(here, "..", "grademl", "_autoload"), user]))
            out = subprocess.run([sys.executable, "-c",
                                  "import builtins, sys, grademl.auto\n"
                                  "print(getattr(builtins, 'USER_SITE_RAN', None), grademl.auto._installed, "
                                  "'importlib.util' in sys.modules, 'threading' in sys.modules)"],
                                 env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.split(),
                             [os.path.join(user, "sitecustomize.py"), "True", "False", "False"], out.stderr)


if __name__ == "__main__":
    unittest.main()


class NamesTest(unittest.TestCase):
    """NUL is refused and lone surrogates accepted the same way with and without grademl;
    auto-instrumentation never raises."""

    def _each_mode(self, body):
        for mode in ("disabled", "recorder"):
            with self.subTest(mode=mode):
                r = use_recorder() if mode == "recorder" else disable()
                try:
                    body(r)
                finally:
                    disable()

    def test_nul_refused_everywhere(self):
        def body(_):
            for call in (lambda: grademl.phase("a\0b"), lambda: grademl.phase("a", k="v\0"),
                         lambda: grademl.phase("a", phase_type="t\0"), lambda: grademl.begin("a\0"),
                         lambda: grademl.instant("a\0"), lambda: grademl.counter("a\0", 1),
                         lambda: grademl.tag("k\0", "v")):
                with self.assertRaises(ValueError) as cm:
                    call()
                self.assertEqual(str(cm.exception), "grademl: a name or tag cannot contain a NUL character")
        self._each_mode(body)

    def test_refused_phase_leaves_nothing_open(self):
        r = use_recorder()
        try:
            with self.assertRaises(ValueError):
                grademl.begin("ok", k="bad\0")
            self.assertEqual(r.events, [])
        finally:
            disable()

    def test_surrogates_never_raise(self):
        def body(_):
            with grademl.phase("bad \udcff", k="\ud800"):
                grademl.instant("\udcff")
                grademl.tag("\udcff", "x")
        self._each_mode(body)

    def test_auto_instrumentation_escapes_nul_and_goes_on(self):
        r = use_recorder()
        try:
            grademl._begin_typed("mod\0ule", "module", (("k\0", "v"),))
            grademl._end()
            grademl._begin_typed("next", "module")
            grademl._end()
            self.assertEqual(r.phases()[0][0], "mod\\x00ule")
            self.assertEqual(r.phases()[1][0], "next")
        finally:
            disable()
