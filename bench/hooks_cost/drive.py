"""drive.py MODE cmd...: runs cmd with the env of bench_hooks.py's loop child for MODE
(plain|hooked|deep), a listening socket standing in for the collector."""
import os, socket, subprocess, sys, tempfile
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = ROOT + "/python"
lib = os.path.abspath(os.environ.get("GRADEML_LIBRARY_BENCH", os.path.join(ROOT, "build", "libgrademl.so")))
mode, cmd = sys.argv[1], sys.argv[2:]
env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEML_")}
with tempfile.TemporaryDirectory() as d:
    l = None
    if mode != "plain":
        if mode == "loaded": env["GRADEML_AUTO_OFF"] = "1"
        env.update(PYTHONPATH=HERE + "/grademl/_autoload" + os.pathsep + HERE, GRADEML_AUTO="0" if mode == "loaded" else "1", GRADEML_LIBRARY=lib, GRADEML_EVENTS_DIR=d)
        if mode == "deep":
            env["GRADEML_DEEP"] = "1"
        l = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        l.bind(os.path.join(d, "events.sock")); l.listen(64)
    sys.exit(subprocess.run(cmd, env=env).returncode)
