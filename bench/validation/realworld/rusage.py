#!/usr/bin/python3
"""Runs a command and records, as ground truth, the CPU time of everything below it from
the kernel (getrusage(RUSAGE_CHILDREN) once the command has been waited for: it counts every
descendant that was reaped, whichever process reaped it) and the peak PSS of its process
tree (truth.py, tree=True). Exits with the command's exit status.

    rusage.py ROLE -- CMD [ARG...]       writes $GRADEML_TRUTH_DIR/ROLE-<pid>.json
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truth  # noqa: E402

if len(sys.argv) < 4 or sys.argv[2] != "--":
    sys.exit("usage: rusage.py ROLE -- CMD [ARG...]")
truth.start(sys.argv[1], tree=True)
rc = subprocess.call(sys.argv[3:])
truth.finish(rc if rc >= 0 else 128 - rc)
