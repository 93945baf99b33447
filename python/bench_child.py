"""Runs a benchmark's child interpreter, shared by bench_phase.py and bench_auto.py.

With the native library, an instrumented process hands its event memory to a collector over
<GRADEML_EVENTS_DIR>/events.sock, and with no collector listening it disables itself. A
listening socket stands in for the collector here: the child's memory waits in its backlog,
never read, so 'enabled' figures measure the enabled writer.
"""
import os
import socket
import subprocess
import sys
import tempfile


def run_child(code, env, collector):
    """Runs `sys.executable -c code` with `env`; `collector`: listen on the events socket."""
    with tempfile.TemporaryDirectory() as d:
        listener = None
        if collector:
            env = dict(env, GRADEML_EVENTS_DIR=d)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            listener.bind(os.path.join(d, "events.sock"))
            listener.listen(64)
        try:
            return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        finally:
            if listener is not None:
                listener.close()
