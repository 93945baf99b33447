#!/usr/bin/python3
"""GradeML's cost figures, each against a peer measured in the same run, machine-readable.

  bench/cost.py --build build --full  --out bench/results.json   (make bench: every figure)
  bench/cost.py --build build --quick --out build/bench-check.json --check bench/results.json
                                                                 (make bench-check, <= 3 min)
  bench/cost.py --render bench/results.json docs/PERFORMANCE.md  (the figures' table in the docs)

Each result: name, what, figure, unit, peer, peer_figure, ratio (figure / peer_figure: lower is
better), goal (the ratio aimed at, or null), command. --check fails (exit 1) when a ratio is more
than 1.5x the baseline's ratio of the same name; a figure over the threshold is measured once
more first and the better of the two kept (a regression stays, a noisy moment does not).
Ratios use CPU time (user + sys of the child) where the work is CPU, wall time for start-up.
Only the standard library; /usr/bin/python3 (Debian's, with torch and sklearn for the loop).
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
THRESHOLD = 1.5

PHASES_PY = """import sys, time, grademl
n, pause = int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.03
for i in range(n):
    with grademl.phase("p", i=i):
        pass
    if i % 10000 == 9999:
        time.sleep(pause)  # lets the store keep up: no phase is dropped
"""


def run_cpu(cmd, limit=600, stdout=subprocess.DEVNULL, env=None):
    """CPU seconds (user + sys) of `cmd` and its waited-for children, wall seconds, exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=stdout, stderr=subprocess.DEVNULL, timeout=limit, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, p.returncode


def peak_rss_mb(cmd):
    """Peak RSS of `cmd` in MB (ru_maxrss of a fresh waited child)."""
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        try:
            os.execv(cmd[0], cmd)
        finally:
            os._exit(127)
    _, _, ru = os.wait4(pid, 0)
    return ru.ru_maxrss / 1024


def sig(x, digits=6):
    return float(f"{x:.{digits}g}")


def result(name, what, figure, unit, peer, peer_figure, goal, command, **extra):
    r = {"name": name, "what": what, "figure": sig(figure), "unit": unit, "peer": peer,
         "peer_figure": sig(peer_figure) if peer_figure is not None else None,
         "ratio": sig(figure / peer_figure, 4) if peer_figure else None, "goal": goal, "command": command}
    r.update(extra)
    return r


class Bench:
    def __init__(self, build, tmp, pairs):
        self.g = os.path.join(build, "grademl")
        self.build = build
        self.tmp = tmp
        self.pairs = pairs
        self.runs = {}

    def phase_run(self, n, db=None):
        """A store holding one run of `n` tagged phases recorded through the Python API (at
        `db`, default one in the temporary directory)."""
        if n in self.runs:
            return self.runs[n]
        script = os.path.join(self.tmp, "phases.py")
        with open(script, "w") as f:
            f.write(PHASES_PY)
        db = db or os.path.join(self.tmp, f"p{n}.db")
        # Every phase must be in the store, or the figures are of a smaller run: past the
        # store's backlog grademl drops phases (and says so); then record again, slower.
        pause = 0.03
        while True:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(db + suffix):
                    os.remove(db + suffix)
            subprocess.run([self.g, "--db", db, "run", "--no-report", "--", PY, script, str(n), str(pause)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=900)
            stored = int(subprocess.run(["sqlite3", db, "select count(*) from phases where name = 'p'"],
                                        capture_output=True, text=True, check=True).stdout)
            if stored == n:
                break
            if pause > 1:
                raise RuntimeError(f"{db}: {stored} of {n} phases stored, even with {pause} s pauses")
            pause *= 2
        self.runs[n] = db
        return db

    def best_cpu(self, cmd, peer, before=None):
        """A measurement: the least CPU seconds of `cmd` and of `peer` over alternating pairs
        (`before()` runs ahead of each of cmd's runs)."""
        def measure():
            best_g = best_p = float("inf")
            for _ in range(self.pairs):
                best_p = min(best_p, run_cpu(peer)[0])
                if before:
                    before()
                best_g = min(best_g, run_cpu(cmd)[0])
            return best_g, best_p
        return measure

    # Reports and export of a run of n phases vs sqlite3 reading every phase row (CPU, best of pairs).
    def reports(self, n):
        db = self.phase_run(n)
        label = f"{n // 1000}k" if n < 1000000 else f"{n // 1000000}M"
        out = []
        peer_cmd = ["sqlite3", db, "SELECT * FROM phases"]
        cases = [("report_json", "report --json", [self.g, "--db", db, "report", "--json"], 2.0),
                 ("report_text", "report (terminal text)", [self.g, "--db", db, "report"], 1.5),
                 ("export_perfetto", "export --perfetto", [self.g, "--db", db, "export", "--perfetto",
                                                          os.path.join(self.tmp, "x.json")], 1.5)]
        for key, what, cmd, goal in cases:
            measure = self.best_cpu(cmd, peer_cmd)  # bound to this case's command
            g, p = measure()
            out.append((result(f"{key}_{label}", f"{what}, run of {n:,} phases (Python API), CPU s", g, "s",
                               "sqlite3 reading every phase row", p, goal,
                               " ".join(shlex.quote(c) for c in cmd)), measure))
            if n >= 1000000:
                rss = peak_rss_mb(cmd)
                out.append((result(f"{key}_{label}_peak_rss", f"{what}, run of {n:,} phases: peak RSS MB", rss, "MB",
                                   None, None, None, " ".join(shlex.quote(c) for c in cmd), goal_mb=1536), None))
        return out

    # grademl run -- python3 -c pass vs python3 -c pass, wall, median of alternating pairs.
    def python_start(self):
        db = os.path.join(self.tmp, "s.db")
        plain = [PY, "-c", "pass"]
        graded = [self.g, "--db", db, "run", "--no-report", "--"] + plain

        def measure():
            a, b = [], []
            for i in range(max(11, 2 * self.pairs + 1)):
                pa = run_cpu(plain)[1]
                gb = run_cpu(graded)[1]
                if i:
                    a.append(pa)
                    b.append(gb)
            return statistics.median(b), statistics.median(a)
        g, p = measure()
        return [(result("python_start", "grademl run -- python3 -c pass, wall s (median of pairs)", g, "s",
                        "python3 -c pass", p, None, " ".join(graded), added_ms=round(1000 * (g - p), 2),
                        goal_added_ms=5), measure)]

    # Fixed cost: what grademl run adds to /bin/true, against a Python start as the yardstick.
    def fixed_cost(self):
        db = os.path.join(self.tmp, "f.db")
        graded = [self.g, "--db", db, "run", "--no-report", "--", "/bin/true"]

        def measure():
            added, py = [], []
            for i in range(max(11, 2 * self.pairs + 1)):
                t = run_cpu(["/bin/true"])[1]
                gt = run_cpu(graded)[1]
                pt = run_cpu([PY, "-c", "pass"])[1]
                if i:
                    added.append(gt - t)
                    py.append(pt)
            return max(statistics.median(added), 1e-4), statistics.median(py)
        g, p = measure()
        return [(result("fixed_cost", "what grademl run adds to /bin/true, wall s (median of pairs)", g, "s",
                        "python3 -c pass (a yardstick for this machine's process start)", p, None, " ".join(graded),
                        added_ms=round(1000 * g, 2), goal_added_ms=5), measure)]

    # The small-op PyTorch loop: training time under grademl vs plain (median of alternating pairs).
    def small_op_loop(self, epochs, modes):
        script = os.path.join(ROOT, "bench", "mlp_digits.py")
        db = os.path.join(self.tmp, "t.db")
        cmds = {"plain": [PY, script, "--epochs", str(epochs)],
                "default": [self.g, "--db", db, "run", "--no-report", "--", PY, script, "--epochs", str(epochs)],
                "deep": [self.g, "--db", db, "run", "--no-report", "--deep", "--", PY, script, "--epochs", str(epochs)],
                "profiler": [PY, script, "--epochs", str(epochs), "--profiler"]}

        def train_s(cmd):
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            for line in reversed(p.stdout.splitlines()):
                if line.startswith("{"):
                    figures = json.loads(line)
                    return figures.get("train_cpu_s", figures["train_s"])
            raise RuntimeError(f"{cmd}: no figures (exit {p.returncode}): {p.stderr[-300:]}")

        def measure_all():
            times = {m: [] for m in ["plain"] + modes}
            for _ in range(self.pairs):
                for m in ["plain"] + modes:
                    times[m].append(train_s(cmds[m]))
            return {m: statistics.median(v) for m, v in times.items()}

        goals = {"default": 1.02, "deep": 1.05, "profiler": None}
        med = measure_all()
        out = []
        for m in modes:
            def measure(m=m):
                again = measure_all()
                return again[m], again["plain"]
            out.append((result(f"small_op_loop_{m}", f"small-op PyTorch loop (bench/mlp_digits.py, {epochs} epoch(s)), "
                               f"training loop's CPU s: {'grademl run' + (' --deep' if m == 'deep' else '') if m != 'profiler' else 'torch.profiler'}",
                               med[m], "s", "the plain loop", med["plain"], goals[m], " ".join(cmds[m])), measure))
        return out

    # One hooked outermost nn.Module call (python/bench_hooks.py): thread CPU ns, hooked vs the same call plain.
    def hooked_call(self):
        lib = os.path.join(self.build, "libgrademl.so")
        cmd = [PY, os.path.join(ROOT, "python", "bench_hooks.py"), "--pairs=1", "--calls-only", lib]

        def measure():
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=os.path.join(ROOT, "python"))
            for line in p.stdout.splitlines():
                if line.strip().startswith("outermost forward"):
                    inner = line[line.index("(") + 1:line.index(")")]
                    plain = float(inner.split("plain")[1].split("ns")[0])
                    hooked = float(inner.split("hooked")[1].split("ns")[0])
                    return hooked * 1e-9, plain * 1e-9
            raise RuntimeError(f"bench_hooks.py printed no figures (exit {p.returncode}): {p.stderr[-300:]}")
        g, p = measure()
        return [(result("hooked_forward", "an outermost nn.Module call with grademl's hooks (python/bench_hooks.py), thread CPU s",
                        g, "s", "the same call without hooks", p, None, " ".join(cmd[:-1]) + " build/libgrademl.so",
                        added_ns=round(1e9 * (g - p), 1)), measure)]

    # Whole import of a Chrome/Kineto trace vs json.load of the same file (CPU, best of pairs).
    def trace_import(self, size_mb):
        trace = os.path.join(self.tmp, f"trace{size_mb}.json")
        if not os.path.exists(trace):
            subprocess.run([PY, os.path.join(ROOT, "bench", "make_synthetic_trace.py"), trace, str(size_mb)],
                           check=True, stdout=subprocess.DEVNULL)
        peer = [PY, "-c", "import json, sys; json.load(open(sys.argv[1]))", trace]
        db = os.path.join(self.tmp, "imp.db")

        def fresh_store():
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(db + suffix):
                    os.unlink(db + suffix)
        measure = self.best_cpu([self.g, "--db", db, "import", trace], peer, before=fresh_store)
        g, p = measure()
        return [(result(f"import_{size_mb}mb", f"grademl import of a {size_mb} MB synthetic Kineto trace, CPU s", g, "s",
                        "json.load of the same file", p, 0.5, f"grademl --db DB import {trace}"), measure)]


    # The analyses on two run shapes once far slower than their size warrants (a what-if of
    # 1M phases; the summary of a chain of 2,000 nested processes), vs indexing the same run,
    # in one process (CPU, least of 3): the speed bounds that were asserted in unit tests.
    def analysis_shapes(self):
        exe = os.path.join(self.build, "bench", "analysis_shapes_bench")
        what = {"whatif_1m_phases": "what-if type:iteration*0.5 of a run of 1,000,024 phases, CPU s",
                "summary_deep_chain": "run summary of a chain of 2,000 nested processes, 200 RSS samples each, CPU s"}
        peers = {"whatif_1m_phases": "model::Run::Index of the same run",
                 "summary_deep_chain": "one sweep of the same samples in time order"}

        def measure_all():
            p = subprocess.run([exe, "3"], capture_output=True, text=True, check=True, timeout=600)
            return {r["name"]: r for r in (json.loads(line) for line in p.stdout.splitlines() if line.strip())}
        first = measure_all()
        out = []
        for name, r in first.items():
            def measure(name=name):
                again = measure_all()[name]
                return again["figure"], again["peer_figure"]
            out.append((result(name, what[name], r["figure"], "s", peers[name], r["peer_figure"],
                               None, "build/bench/analysis_shapes_bench 3"), measure))
        return out


def render(results_path, doc_path):
    data = json.load(open(results_path))
    lines = ["<!-- cost-results:begin (generated by bench/cost.py --render from bench/results.json: do not edit) -->",
             f"Figures of `{data['command']}` on {data['date']}, {data['machine']}. Ratio: figure / peer, both measured "
             "in the same run (lower is better); `make bench-check` fails when a ratio is more than "
             f"{THRESHOLD}x the one here.", "",
             "| name | what | figure | peer | peer's figure | ratio | goal | command |", "|---|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        fig = f"{r['figure']:.4g} {r['unit']}"
        if "added_ms" in r:
            fig += f" (+{r['added_ms']:.1f} ms)"
        peer_fig = f"{r['peer_figure']:.4g} {r['unit']}" if r.get("peer_figure") is not None else "-"
        ratio = f"{r['ratio']:.3g}x" if r.get("ratio") is not None else "-"
        goal = f"<= {r['goal']}x" if r.get("goal") else (f"<= +{r['goal_added_ms']} ms" if "goal_added_ms" in r else
                                                        (f"<= {r['goal_mb']} MB" if "goal_mb" in r else "-"))
        cmd = r["command"].replace("|", "\\|")
        lines.append(f"| {r['name']} | {r['what']} | {fig} | {r.get('peer') or '-'} | {peer_fig} | {ratio} | {goal} | `{cmd}` |")
    lines.append("<!-- cost-results:end -->")
    text = open(doc_path).read()
    begin, end = text.find("<!-- cost-results:begin"), text.find("<!-- cost-results:end -->")
    block = "\n".join(lines)
    if begin >= 0 and end > begin:
        text = text[:begin] + block + text[end + len("<!-- cost-results:end -->"):]
    else:
        text = text.rstrip("\n") + "\n\n## Cost figures (bench/results.json)\n\n" + block + "\n"
    with open(doc_path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true", help="the short subset (make bench-check)")
    ap.add_argument("--full", action="store_true", help="every figure (make bench)")
    ap.add_argument("--out", help="write the results here (JSON)")
    ap.add_argument("--check", metavar="BASELINE", help="fail when a ratio is over 1.5x the baseline's")
    ap.add_argument("--only", help="comma-separated result names (prefixes) to measure")
    ap.add_argument("--render", nargs=2, metavar=("RESULTS", "DOC"), help="write RESULTS' table into DOC")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--record-phases", nargs=2, metavar=("N", "DB"),
                    help="only record the run of N tagged phases the report figures read into DB")
    args = ap.parse_args()
    if args.render:
        render(*args.render)
        return 0
    build = os.path.abspath(args.build)
    if not os.access(os.path.join(build, "grademl"), os.X_OK):
        print(f"cost.py: no {build}/grademl (build first)", file=sys.stderr)
        return 2
    if not shutil.which("sqlite3"):
        print("cost.py: the sqlite3 command (the peer of the report figures) is missing", file=sys.stderr)
        return 2
    if args.check and not os.path.exists(args.check):
        print(f"cost.py: no baseline {args.check} (make bench writes it)", file=sys.stderr)
        return 2
    os.environ["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", "")
    tmp = tempfile.mkdtemp(prefix="grademl-cost-")
    try:
        b = Bench(build, tmp, args.pairs)
        if args.record_phases:
            n, db = int(args.record_phases[0]), os.path.abspath(args.record_phases[1])
            b.phase_run(n, db)
            print(f"cost.py: {db}: a run of {n} phases, all stored")
            return 0
        # (the names each step's results start with, the step)
        plan = [("report_,export_", lambda: b.reports(100000)), ("python_start", b.python_start),
                ("fixed_cost", b.fixed_cost), ("hooked_", b.hooked_call),
                ("small_op_loop_", lambda: b.small_op_loop(5, ["default", "deep"] + (["profiler"] if args.full else []))),
                ("import_", lambda: b.trace_import(20)), ("whatif_,summary_", b.analysis_shapes)]
        if args.full:
            plan += [("report_,export_", lambda: b.reports(1000000)), ("import_", lambda: b.trace_import(200))]
        results = []
        only = args.only.split(",") if args.only else None
        for prefixes, step in plan:
            if only and not any(p.startswith(o) or o.startswith(p) for p in prefixes.split(",") for o in only):
                continue
            for r, again in step():
                if only and not any(r["name"].startswith(o) for o in only):
                    continue
                results.append([r, again])
                peer = f"{r['peer_figure']:.4g}" if r["peer_figure"] is not None else "-"
                ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
                print(f"{r['name']:32s} {r['figure']:10.4g} {r['unit']:3s} peer {peer:>10} ratio {ratio}", flush=True)
        failed = []
        if args.check:
            base = {r["name"]: r for r in json.load(open(args.check))["results"]}
            for pair in results:
                r, again = pair
                old = base.get(r["name"])
                if old is None or old.get("ratio") is None or r.get("ratio") is None:
                    continue
                limit = THRESHOLD * old["ratio"]
                if r["ratio"] > limit and again is not None:
                    g, p = again()
                    if g / p < r["ratio"]:
                        r["figure"], r["peer_figure"], r["ratio"] = sig(g), sig(p), sig(g / p, 4)
                        r["remeasured"] = True
                verdict = "ok" if r["ratio"] <= limit else "WORSE"
                print(f"check {r['name']:32s} ratio {r['ratio']:.3f} vs baseline {old['ratio']:.3f} (limit {limit:.3f}): {verdict}")
                if verdict != "ok":
                    failed.append(r["name"])
        for r, _ in results:  # commands as a reader would type them
            r["command"] = r["command"].replace(tmp, "$TMP").replace(build + "/", "build/").replace(ROOT + "/", "")
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"command": "make bench" if args.full else "make bench-check",
                           "date": datetime.date.today().isoformat(),
                           "machine": f"{os.cpu_count()} cores, {platform.release()}",
                           "results": [r for r, _ in results]}, f, indent=1)
                f.write("\n")
        if failed:
            print(f"bench-check: {len(failed)} figure(s) more than {THRESHOLD}x worse than bench/results.json: "
                  + ", ".join(failed) + " (a deliberate change of a baseline needs a commit saying why)", file=sys.stderr)
            return 1
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
