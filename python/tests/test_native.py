"""Against the real libgrademl.so (build*/libgrademl.so under the repository root, or
$GRADEML_TEST_LIBRARY): skipped, with a message, when it is not built."""
import glob
import os
import shutil
import socket
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
import unittest

from _ci import requires, skip_or_fail

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYDIR)


def _find_library():
    p = os.environ.get("GRADEML_TEST_LIBRARY")
    if p and os.path.isfile(p):
        return p
    libs = sorted(glob.glob(os.path.join(REPO, "build*", "libgrademl.so")), key=os.path.getmtime, reverse=True)
    return libs[0] if libs else None


LIB = _find_library()
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def _ext_dir(tmp):
    """A directory holding libgrademl.so and the extension: the build's, or a copy with
    the extension compiled here (gcc); None when neither is possible."""
    if os.path.isfile(os.path.join(os.path.dirname(LIB), "_grademl_native" + SUFFIX)):
        return os.path.dirname(LIB)
    cc = shutil.which("gcc") or shutil.which("cc")
    inc = sysconfig.get_paths().get("include")
    if not cc or not inc or not os.path.isfile(os.path.join(inc, "Python.h")):
        return None
    shutil.copy(LIB, tmp)
    r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-I" + inc, os.path.join(PYDIR, "grademl", "_native.c"),
                        "-o", os.path.join(tmp, "_grademl_native" + SUFFIX), "-ldl"], capture_output=True, text=True)
    return tmp if r.returncode == 0 else None


SCRIPT = r"""
import os, sys, grademl
print("native", grademl._native, "enabled", grademl.enabled())
with grademl.phase("warm", k=1):
    pass
@grademl.phase
def f(i):
    grademl.counter("c", i)
for i in range(200000):
    with grademl.phase("p", i=i % 7):
        f(i)
for i in range(200000):
    with grademl.phase("q"):
        grademl.instant("x")
# Lone surrogates never raise (shown escaped); NUL is refused, as without grademl.
with grademl.phase("bad \udcff name", k="\ud800"):
    grademl.instant("\udcff")
try:
    grademl.phase("a\x00b")
    print("nul accepted")
except ValueError as e:
    print("nul refused:", e)
print("done")
"""


class Collector:
    """Stands in for grademl's collector: listens on <dir>/events.sock and keeps the event
    memories that writers send (SCM_RIGHTS)."""

    def __init__(self, d):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.bind(os.path.join(d, "events.sock"))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.fds = []
        self.stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with c:
                c.settimeout(5)
                try:
                    _, fds, _, _ = socket.recv_fds(c, 1, 4)
                    self.fds.extend(fds)
                except OSError:
                    pass

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()

    def headers(self):
        """(pid, next_chunk, dropped) of each memory received."""
        out = []
        for fd in self.fds:
            h = os.pread(fd, 64, 0)
            if h[:8] == b"GRDMLEV1":
                pid, = struct.unpack_from("<i", h, 16)
                next_chunk, dropped = struct.unpack_from("<QQ", h, 40)
                out.append((pid, next_chunk, dropped))
        return out


TORCH_SCRIPT = r"""
import torch
from torch.utils.data import DataLoader, TensorDataset
import numpy as np, grademl
ds = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
m = torch.nn.Linear(4, 2); opt = torch.optim.SGD(m.parameters(), lr=0.1)
for workers in (0, 2):
    for _ in range(2):
        for x, y in DataLoader(ds, batch_size=4, num_workers=workers):
            opt.zero_grad(); torch.nn.functional.cross_entropy(m(x), y).backward(); opt.step()
with torch.no_grad():
    m(torch.randn(1, 4))
print("ok", grademl.enabled(), getattr(torch.nn.Module.__call__, "_grademl_wrapped", False))
"""


@requires(LIB is not None, "libgrademl.so not built (no build*/libgrademl.so): real-library tests skipped")
class RealLibraryTest(unittest.TestCase):
    def _run(self, script, libdir=None, **extra):
        with tempfile.TemporaryDirectory() as ev:
            collector = Collector(ev)
            env = dict(os.environ, GRADEML_EVENTS_DIR=ev,
                       GRADEML_LIBRARY=os.path.join(libdir, "libgrademl.so") if libdir else LIB,
                       PYTHONPATH=os.pathsep.join([PYDIR, os.path.join(PYDIR, "grademl", "_autoload")]))
            env.pop("GRADEML_AUTO", None)
            env.update(extra)
            r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
            import time
            time.sleep(0.5)  # the last memories in flight
            collector.close()
            memories = collector.headers()
            for fd in collector.fds:
                os.close(fd)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout, memories

    def test_native_extension(self):
        with tempfile.TemporaryDirectory() as tmp:
            libdir = _ext_dir(tmp)
            if libdir is None:
                skip_or_fail(self, "cannot build the extension here (no compiler or Python.h: python3-dev)")
            out, memories = self._run(SCRIPT, libdir)
        self.assertIn("native True enabled True", out)
        self._check_memories(out, memories)

    def _check_memories(self, out, memories):
        self.assertIn("nul refused: grademl: a name or tag cannot contain a NUL character", out)
        self.assertIn("done", out)
        self.assertEqual(len(memories), 1)
        pid, next_chunk, dropped = memories[0]
        self.assertGreater(next_chunk, 100)  # 400,000 phases: about 13 MB of records
        self.assertEqual(dropped, 0)

    def test_ctypes_fallback(self):
        out, memories = self._run(SCRIPT, GRADEML_CTYPES="1")
        self.assertIn("native False enabled True", out)
        self._check_memories(out, memories)

    def test_without_grademl_the_same(self):
        env = dict(os.environ, PYTHONPATH=PYDIR)
        for k in ("GRADEML_EVENTS_DIR", "GRADEML_LIBRARY"):
            env.pop(k, None)
        r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("native False enabled False", r.stdout)
        self.assertIn("nul refused: grademl: a name or tag cannot contain a NUL character", r.stdout)

    def test_auto_torch_with_workers(self):
        try:
            import torch  # noqa: F401
        except Exception:
            skip_or_fail(self, "torch not importable (Debian: python3-torch)")
        with tempfile.TemporaryDirectory() as tmp:
            libdir = _ext_dir(tmp)
            out, memories = self._run(TORCH_SCRIPT, libdir, GRADEML_AUTO="1")
        self.assertIn("ok True True", out)
        self.assertGreaterEqual(len(memories), 1)  # the parent's (workers' when they record)

    def test_loads_after_torch(self):
        """libgrademl.so dlopen'ed after torch, sklearn and pandas (whose libraries take
        glibc's surplus of static TLS): it must still load and record, with the C hooks on.
        An initial-exec TLS variable in the writer failed here ("cannot allocate memory in
        static TLS block")."""
        try:
            import torch, sklearn, pandas  # noqa: F401,E401
        except Exception:
            skip_or_fail(self, "torch, sklearn or pandas not importable (Debian: python3-torch, -sklearn, -pandas)")
        script = ("import torch, sklearn, pandas, grademl, grademl.auto\n"
                  "grademl.auto.install()\n"
                  "m = torch.nn.Linear(2, 1)\n"
                  "m(torch.zeros(2))\n"
                  "print('native', grademl._native, 'enabled', grademl.enabled(), type(torch.nn.Module.__call__).__name__)\n")
        with tempfile.TemporaryDirectory() as tmp:
            libdir = _ext_dir(tmp)
            if libdir is None:
                skip_or_fail(self, "cannot build the extension here (no compiler or Python.h: python3-dev)")
            out, memories = self._run(script, libdir)
        self.assertIn("native True enabled True ModuleCall", out)
        self.assertEqual(len(memories), 1)


if __name__ == "__main__":
    unittest.main()
