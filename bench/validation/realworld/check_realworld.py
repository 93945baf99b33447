#!/usr/bin/python3
"""Real-world-shaped workloads checked against ground truth from the kernel
(docs/validation.md, "Real-world-shaped workloads").

    bench/validation/realworld/check_realworld.py [--grademl PATH] [--only NAME] [--check]
                                                  [--json FILE] [--keep] [--under-load]

Runs each workload under `grademl run` (auto-instrumentation on): cnn.py (a CNN, DataLoader
with num_workers=2 forked workers), lstm.py (an LSTM language model, manual batching),
lbfgs.py (torch.optim.LBFGS with a closure), text/pipeline.yaml (4 stages, one behind
`sh -c 'timeout 60 python3 ...; true'`). Each process of a workload writes its own truth
(truth.py: getrusage, /proc/self/smaps_rollup peaks, what it counted) and the checks compare
`grademl report --json` with it. Each check is printed on its own line: ok, FAILED, or
FAILED with "(needs: HELPER)" when it reads a field that part of issue 12 adds.

The machine's idle cores over each run are measured (/proc/stat) and printed; the checks that
need a quiet machine (underused_cores: grademl rightly names none while other work keeps the
cores busy) are skipped, and say so, when fewer than QUIET_IDLE_CORES were idle, except when
CI=true. --under-load runs each workload beside the end-to-end tests' load (tests/e2e/load.h:
one busy loop per core, 200 short processes a second), to see which checks hold under load.

Tolerances: CPU seconds within max(5%, 0.05 s) of getrusage (0.05 s: five clock ticks of
/proc/PID/stat); peak PSS within 25% (4 MiB for processes under 16 MiB); counts exact.

Exit status: 0 (without --check, or when every check passed); 3 with --check when a check
failed; 1 on a harness error (grademl missing or crashing, a workload failing); 77 when
torch, scikit-learn or pandas is missing (skipped), unless CI=true: then 1.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PY = "/usr/bin/python3"
CPU_REL, CPU_ABS_S, PSS_REL = 0.05, 0.05, 0.25
# A small process's PSS is mostly its share of the interpreter's and libraries' pages, which
# moves with whatever else maps them at the moment each side samples (the workload's own 10 Hz
# sampler, grademl's monitor): a 9 MiB Python process was once read at 13 MiB. Below 16 MiB
# the bound is this many bytes instead of 25%; above, 25% is the larger and governs.
PSS_ABS_BYTES = 4 * 2**20
SKIP = 77
# Idle cores over a run below which the underused_cores checks are skipped (not under CI=true).
QUIET_IDLE_CORES = 0.75

# Which part of issue 12 provides a field the checks read (before the merge, these fail).
NEEDS_PSS = "memory: peak_pss_bytes"
NEEDS_MODE = "python: tags.mode on epoch/iteration"
NEEDS_UNDERUSED = "advice: issues[].kind underused_cores"
NEEDS_RULES = "memory: --rules for single commands"
NEEDS_WRAPPER = "cpu: no double count behind a forking wrapper"

WORKLOADS = {
    # name: (modules it needs, how it is run)
    "cnn": (("torch",), {"argv": ["cnn.py"]}),
    "lstm": (("torch",), {"argv": ["lstm.py", "--threads", "1"], "rules": "lstm_rules.yaml"}),
    "lbfgs": (("torch",), {"argv": ["lbfgs.py", "--threads", "1"]}),
    "text": (("pandas", "sklearn", "scipy"), {"workflow": "text/pipeline.yaml"}),
}


class HarnessError(Exception):
    pass


@dataclass
class Check:
    workload: str
    name: str
    ok: bool
    detail: str
    needs: str = ""  # the part of issue 12 whose field this reads, if any
    skipped: bool = False  # not checked: its premise did not hold (detail says why); counts as passed

    def line(self):
        needs = f" (needs: {self.needs})" if self.needs and not self.ok else ""
        status = "skip  " if self.skipped else "ok    " if self.ok else "FAILED"
        return f"{status} {self.workload:6s} {self.name}: {self.detail}{needs}"


# ---------------------------------------------------------------------------------------
# The report, read
# ---------------------------------------------------------------------------------------

@dataclass
class Report:
    doc: dict
    # Idle cores of the whole machine over the run (/proc/stat, measured by the harness around
    # `grademl run`); None when not measured.
    idle_cores: float = None
    by_id: dict = field(default_factory=dict)
    kids: dict = field(default_factory=dict)

    def __post_init__(self):
        for p in self.doc["phases"]:
            self.by_id[p["id"]] = p
            self.kids.setdefault(p["parent"], []).append(p)

    @property
    def root(self):
        return next(p for p in self.doc["phases"] if p["parent"] is None)

    def kind(self, p):
        return p["type"].rsplit("/", 1)[-1]

    def subtree(self, p):
        out, todo = [], [p]
        while todo:
            q = todo.pop()
            out.append(q)
            todo.extend(self.kids.get(q["id"], []))
        return out

    def process(self, pid, script=None):
        """The process phase of `pid` (when a pid has several, e.g. across an exec, the one
        whose name mentions the script)."""
        cands = [p for p in self.doc["phases"] if p.get("pid") == pid and self.kind(p) == "process"]
        if script:
            named = [p for p in cands if script in p["name"]]
            cands = named or cands
        return cands[-1] if cands else None

    def step(self, name):
        return next((p for p in self.kids.get(self.root["id"], []) if p["name"] == name
                     and self.kind(p) == "step"), None)

    def count(self, kind, under=None, **tags):
        phases = self.subtree(under) if under else self.doc["phases"]
        return sum(1 for p in phases if self.kind(p) == kind
                   and all((p.get("tags") or {}).get(k) == v for k, v in tags.items()))

    def count_not(self, kind, key, value, under=None):
        phases = self.subtree(under) if under else self.doc["phases"]
        return sum(1 for p in phases if self.kind(p) == kind and (p.get("tags") or {}).get(key) != value)

    def issues(self, kind, under):
        ids = {p["id"] for p in self.subtree(under)}
        return [i for i in self.doc.get("issues", []) if i.get("kind") == kind and i.get("phase") in ids]


# ---------------------------------------------------------------------------------------
# Checks: pure functions of the report and the truths
# ---------------------------------------------------------------------------------------

def cpu_check(w, name, measured, truth_s, needs="", rel=CPU_REL):
    if measured is None:
        return Check(w, name, False, f"no phase (truth {truth_s:.2f} s)", needs)
    tol = max(rel * truth_s, CPU_ABS_S)
    return Check(w, name, abs(measured - truth_s) <= tol,
                 f"grademl {measured:.2f} s, getrusage {truth_s:.2f} s "
                 f"({100 * (measured - truth_s) / truth_s if truth_s else 0:+.1f}%, allowed ±{tol:.2f} s)", needs)


def pss_check(w, name, phase, truth_bytes):
    value = phase.get("peak_pss_bytes") if phase else None
    if not isinstance(value, (int, float)):
        return Check(w, name, False, f"no peak_pss_bytes in the report (truth {truth_bytes / 2**20:.0f} MiB)", NEEDS_PSS)
    rss = phase.get("peak_rss_bytes")
    rss_text = f", RSS peak {rss / 2**20:.0f} MiB" if isinstance(rss, (int, float)) else ""
    allowed = max(PSS_REL * truth_bytes, PSS_ABS_BYTES)
    return Check(w, name, abs(value - truth_bytes) <= allowed,
                 f"grademl {value / 2**20:.0f} MiB, smaps_rollup {truth_bytes / 2**20:.0f} MiB "
                 f"({100 * (value - truth_bytes) / truth_bytes:+.0f}%, allowed ±{allowed / 2**20:.1f} MiB"
                 f"{rss_text})", NEEDS_PSS)


def count_check(w, name, got, want, needs=""):
    return Check(w, name, got == want, f"grademl {got}, the program counted {want}", needs)


def underused_check(w, name, report, phase):
    # grademl names under-used cores only while the host's cores sit idle (at least 0.5 of a
    # core over the phase, underused_min_idle_cores): where other work kept the machine busy,
    # saying nothing is right, and the check's premise does not hold. So it is skipped when
    # the machine had fewer than QUIET_IDLE_CORES idle over the run (a quarter core more than
    # grademl asks, as this is an average over the whole run), and said so; never when
    # CI=true, where the machine is the job's own.
    if (report.idle_cores is not None and report.idle_cores < QUIET_IDLE_CORES
            and os.environ.get("CI") != "true"):
        return Check(w, name, True, f"skipped: the machine had {report.idle_cores:.2f} idle cores over the run "
                                    f"(other work beside it); the check needs {QUIET_IDLE_CORES} (CI=true checks anyway)",
                     NEEDS_UNDERUSED, skipped=True)
    found = report.issues("underused_cores", phase) if phase else []
    kinds = sorted({i.get("kind") for i in report.doc.get("issues", []) if phase})
    return Check(w, name, bool(found),
                 f"{len(found)} underused_cores issue(s)" + (f": {found[0].get('text', '')}" if found
                                                            else f" (issue kinds here: {', '.join(map(str, kinds)) or 'none'})"),
                 NEEDS_UNDERUSED)


def process_cpu_checks(w, report, truths):
    """Each process that recorded its truth: its own CPU (self_cpu_seconds)."""
    out = []
    for t in truths:
        p = report.process(t["pid"], os.path.basename(t["argv"][0]) if t["argv"] else None)
        out.append(cpu_check(w, f"CPU of {t['role']} (pid {t['pid']})",
                             p["self_cpu_seconds"] if p else None, t["cpu_self_s"]))
    return out


def check_cnn(report, truths):
    w = "cnn"
    main = next(t for t in truths if t["role"] == "cnn")
    workers = [t for t in truths if t["role"] == "dataloader_worker"]
    proc = report.process(main["pid"], "cnn.py")
    c = main["counts"]
    out = process_cpu_checks(w, report, truths)
    worker_phases = [report.process(t["pid"]) for t in workers]
    # 10% with the kernel's exit records (each worker's own CPU exact whoever reaps it, and
    # the CPU of its exit after the record given to it: docs/process-accounting.md): the
    # issue's 5% held in 10 of 11 runs alone on the loaded 2-core VM (-5.6% to +3.2%), and
    # -8.1% was seen beside other heavy tests; what is short then is in the parent's
    # cpu.unseen_children. 15%
    # without them (run.process_accounting "share_out"): a worker its parent reaps before
    # grademl reads it as a zombie has its last tail estimated from its rate and what the
    # parent's counters grew by; 5-12% of the workers' CPU went to the parent that way
    # (issue 12's closing note). The run's total below stays within 5% either way.
    exact = report.doc.get("run", {}).get("process_accounting") == "exit_records"
    out.append(cpu_check(w, f"CPU of the {len(workers)} forked DataLoader workers together"
                         + ("" if exact else " (shared out: 15%)"),
                         sum(p["self_cpu_seconds"] for p in worker_phases if p) if all(worker_phases) else None,
                         main["cpu_children_s"], rel=0.10 if exact else 0.15))
    out.append(cpu_check(w, "CPU of the whole run (no double count)", report.root["cpu_seconds"],
                         main["cpu_self_s"] + main["cpu_children_s"]))
    out.append(pss_check(w, "peak PSS of the process tree (parent + workers sharing the data set)", proc,
                         main["peak_tree_pss_bytes"]))
    out.append(count_check(w, "epoch phases (train + eval, no duplicates)", report.count("epoch"),
                           c["train_epochs"] + c["eval_epochs"]))
    out.append(count_check(w, "epoch phases with mode=train", report.count("epoch", mode="train"), c["train_epochs"], NEEDS_MODE))
    out.append(count_check(w, "epoch phases with mode=eval", report.count("epoch", mode="eval"), c["eval_epochs"], NEEDS_MODE))
    out.append(count_check(w, "iteration phases with mode=train", report.count("iteration", mode="train"),
                           c["train_iterations"], NEEDS_MODE))
    out.append(count_check(w, "iteration phases with mode=eval", report.count("iteration", mode="eval"),
                           c["eval_iterations"], NEEDS_MODE))
    out.append(count_check(w, "optimizer.step phases", report.count("optimizer_step"), c["train_iterations"]))
    return out


def check_lstm(report, truths):
    w = "lstm"
    main = next(t for t in truths if t["role"] == "lstm")
    proc = report.process(main["pid"], "lstm.py")
    c = main["counts"]
    out = process_cpu_checks(w, report, truths)
    out.append(pss_check(w, "peak PSS", proc, main["peak_self_pss_bytes"]))
    out.append(count_check(w, "optimizer.step phases (train iterations)", report.count("optimizer_step"), c["train_iterations"]))
    out.append(count_check(w, "forward phases not tagged mode=eval (train)", report.count_not("forward", "mode", "eval"),
                           c["train_iterations"]))
    out.append(count_check(w, "forward phases with mode=eval", report.count("forward", mode="eval"), c["eval_iterations"]))
    out.append(count_check(w, "epoch phases from the log rule '| end of epoch N |'", report.count("epoch"),
                           c["train_epochs"], NEEDS_RULES))
    # a single command: the issue may sit on its process or on the run
    out.append(underused_check(w, "single-threaded training on 2 cores: underused_cores", report, report.root))
    return out


def check_lbfgs(report, truths):
    w = "lbfgs"
    main = next(t for t in truths if t["role"] == "lbfgs")
    proc = report.process(main["pid"], "lbfgs.py")
    c = main["counts"]
    out = process_cpu_checks(w, report, truths)
    out.append(pss_check(w, "peak PSS", proc, main["peak_self_pss_bytes"]))
    out.append(count_check(w, "optimizer.step phases", report.count("optimizer_step"), c["optimizer_steps"]))
    out.append(count_check(w, "backward phases (one per closure call)", report.count("backward"), c["closure_calls"]))
    out.append(count_check(w, "forward phases not tagged mode=eval (one per closure call)",
                           report.count_not("forward", "mode", "eval"), c["closure_calls"]))
    out.append(count_check(w, "forward phases with mode=eval", report.count("forward", mode="eval"), c["eval_forwards"]))
    out.append(underused_check(w, "single-threaded LBFGS on 2 cores: underused_cores", report, report.root))
    return out


def check_text(report, truths):
    w = "text"
    by_role = {t["role"]: t for t in truths}
    out = process_cpu_checks(w, report, [t for t in truths if t["role"] != "clean_wrapper"])
    wrap = by_role["clean_wrapper"]
    clean = report.step("clean")
    out.append(cpu_check(w, "CPU of step clean, behind sh -c 'timeout 60 python3 clean.py; true'",
                         clean["cpu_seconds"] if clean else None, wrap["cpu_self_s"] + wrap["cpu_children_s"],
                         NEEDS_WRAPPER))
    out.append(cpu_check(w, "CPU of the whole run (no double count)", report.root["cpu_seconds"],
                         sum(t["cpu_self_s"] for t in truths if t["role"] != "clean") + wrap["cpu_children_s"],
                         NEEDS_WRAPPER))
    for step, role, key in (("generate", "generate", "peak_self_pss_bytes"), ("clean", "clean_wrapper", "peak_tree_pss_bytes"),
                            ("features", "features", "peak_self_pss_bytes"), ("fit", "fit", "peak_self_pss_bytes")):
        out.append(pss_check(w, f"peak PSS of step {step}", report.step(step), by_role[role][key]))
    out.append(count_check(w, "TfidfVectorizer.fit_transform phases", report.count("sklearn.fit_transform", estimator="TfidfVectorizer"), 1))
    out.append(count_check(w, "LogisticRegression.fit phases", report.count("sklearn.fit", estimator="LogisticRegression"), 1))
    out.append(underused_check(w, "step clean (pure-Python pandas apply, one thread): underused_cores", report, clean))
    return out


CHECKS = {"cnn": check_cnn, "lstm": check_lstm, "lbfgs": check_lbfgs, "text": check_text}


# ---------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------

def missing_modules(names):
    """The modules of `names` that /usr/bin/python3 fails to import (really imported: a
    package that is there but broken counts as missing)."""
    code = ("import importlib, sys\nfor n in sys.argv[1:]:\n    try:\n        importlib.import_module(n)\n"
            "    except Exception:\n        print(n)")
    p = subprocess.run([PY, "-c", code] + list(names), capture_output=True, text=True)
    return p.stdout.split() if p.returncode == 0 else list(names)


def cpu_ticks():
    """(idle, total) clock ticks of all CPUs (/proc/stat; idle includes iowait, steal is busy)."""
    with open("/proc/stat") as f:
        v = [float(x) for x in f.readline().split()[1:9]]
    return v[3] + v[4], sum(v)


def run_workload(exe, name, how, workdir, load=None):
    """The run's report, the truths, and the idle cores of the machine over the run."""
    truth_dir = os.path.join(workdir, "truth")
    os.makedirs(truth_dir)
    db = os.path.join(workdir, "grademl.db")
    env = dict(os.environ, GRADEML_TRUTH_DIR=truth_dir, PYTHONDONTWRITEBYTECODE="1")
    if "workflow" in how:
        # a copy, so that the pipeline's data/ is written in the temporary directory
        shutil.copytree(HERE, os.path.join(workdir, "realworld"),
                        ignore=shutil.ignore_patterns("data", "__pycache__"))
        cmd = [exe, "--db", db, "run", "--no-report", os.path.join(workdir, "realworld", how["workflow"])]
    else:
        cmd = [exe, "--db", db, "run", "--no-report"]
        if how.get("rules"):
            cmd += ["--rules", os.path.join(HERE, how["rules"])]
        cmd += ["--", PY, os.path.join(HERE, how["argv"][0])] + how["argv"][1:]
    if load:
        cmd = [load, "--"] + cmd
    log = os.path.join(workdir, "run.log")
    idle0, total0 = cpu_ticks()
    with open(log, "w") as f:
        try:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=workdir, timeout=300)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{name}: still running after 300 s; log {log}")
    idle1, total1 = cpu_ticks()
    idle_cores = (idle1 - idle0) / (total1 - total0) * (os.cpu_count() or 1) if total1 > total0 else None
    if load:
        with open(log) as f:
            for line in f:
                if line.startswith("outside_load: "):
                    print(f"# {name}: {line.strip()}", file=sys.stderr, flush=True)
    if p.returncode != 0:
        with open(log) as f:
            tail = "".join(f.readlines()[-15:])
        if load and p.returncode == 124:
            raise HarnessError(f"{name}: the load beside the run was not real; log:\n{tail}")
        raise HarnessError(f"{name}: `{' '.join(cmd)}` exited {p.returncode}; log:\n{tail}")
    r = subprocess.run([exe, "--db", db, "report", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise HarnessError(f"{name}: grademl report --json exited {r.returncode}: {r.stderr.strip()[-500:]}")
    truths = []
    for fn in sorted(os.listdir(truth_dir)):
        with open(os.path.join(truth_dir, fn)) as f:
            truths.append(json.load(f))
    return json.loads(r.stdout), truths, idle_cores


def find_grademl(arg):
    c = arg or os.path.join(ROOT, "build", "grademl")
    if os.path.isfile(c) and os.access(c, os.X_OK):
        return os.path.abspath(c)
    raise HarnessError(f"grademl not found ({c}); build it with `make build` or pass --grademl PATH")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grademl", help="the grademl binary (default: build/grademl)")
    ap.add_argument("--only", choices=sorted(WORKLOADS), action="append", help="only this workload (repeatable)")
    ap.add_argument("--check", action="store_true", help="exit 3 when a check failed")
    ap.add_argument("--json", help="write every check, report and truth to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--under-load", action="store_true",
                    help="run each workload beside the end-to-end tests' load (one busy loop per core and "
                         "200 short processes a second: tests/helpers/outside_load, built beside grademl)")
    args = ap.parse_args()
    names = args.only or list(WORKLOADS)
    missing = missing_modules(sorted({m for n in names for m in WORKLOADS[n][0]}))
    if missing:
        if os.environ.get("CI") == "true":
            print(f"realworld: FAILED: {PY} lacks {', '.join(missing)} (CI=true: the ML tests must run; "
                  f"scripts/bootstrap installs them)", file=sys.stderr)
            return 1
        print(f"realworld: skipped: {PY} lacks {', '.join(missing)}", file=sys.stderr)
        return SKIP
    workdir = tempfile.mkdtemp(prefix="grademl-realworld-")
    failed, checks, docs = True, [], {}
    try:
        exe = find_grademl(args.grademl)
        load = None
        if args.under_load:
            load = os.path.join(os.path.dirname(exe), "tests", "outside_load")
            if not os.access(load, os.X_OK):
                raise HarnessError(f"--under-load: {load} is not built (ninja -C BUILD outside_load)")
        for name in names:
            d = os.path.join(workdir, name)
            os.makedirs(d)
            print(f"# {name}: running under grademl", file=sys.stderr, flush=True)
            report, truths, idle_cores = run_workload(exe, name, WORKLOADS[name][1], d, load)
            if idle_cores is not None:
                print(f"# {name}: {idle_cores:.2f} of the machine's {os.cpu_count()} cores idle over the run",
                      file=sys.stderr, flush=True)
            try:
                found = CHECKS[name](Report(report, idle_cores), truths)
            except (StopIteration, KeyError) as e:
                raise HarnessError(f"{name}: the truth files are incomplete ({type(e).__name__} {e}); "
                                   f"{len(truths)} file(s) in {d}/truth")
            for c in found:
                print(c.line(), flush=True)
            checks += found
            docs[name] = {"report": report, "truths": truths}
        bad = [c for c in checks if not c.ok]
        pending = sorted({c.needs for c in bad if c.needs})
        skipped = sum(1 for c in checks if c.skipped)
        print(f"# {len(checks) - len(bad) - skipped} of {len(checks)} checks passed" +
              (f", {skipped} skipped (the machine was not quiet)" if skipped else "") +
              (f"; failing checks read fields from: {'; '.join(pending)}" if pending else ""))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"checks": [c.__dict__ for c in checks], **docs}, f, indent=1)
        failed = False
        return 3 if bad and args.check else 0
    except HarnessError as e:
        print(f"realworld: error: {e}", file=sys.stderr)
        return 1
    finally:
        if args.keep or failed:
            print(f"# kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
