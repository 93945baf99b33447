"""Issue 16's figures in one run, each against its peer measured in the same run:

  1. the small-op MLP loop (bench/mlp_digits.py): plain, under `grademl run` (default: fine
     phases within a 1% budget), `--deep`, `--auto-detail ops` (every operator of every
     iteration) and torch.profiler, alternating, ROUNDS rounds; training-loop ratios;
  2. the overhead grademl reports for the default runs (report --json: fine_sampling) against
     the measured training-loop ratio, in percentage points;
  3. --deep's per-operator shares against tracing every iteration (--auto-detail ops);
  4. Python start-up: `grademl run -- python3 -c pass` against `grademl run --no-auto`;
  5. the fixed cost of a run: `grademl run --no-report -- /bin/true` against /bin/true.

    /usr/bin/python3 bench/xsp_bench.py [--grademl build/grademl] [--rounds 5] [--epochs 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
MLP = os.path.join(HERE, "mlp_digits.py")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return r.stdout


def loop_json(out):
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.exit(f"no JSON line in: {out[-500:]}")


def report(grademl, db):
    return json.loads(run([grademl, "--db", db, "report", "--json"]))


def op_shares_all(rep):
    """Self time per operator name over the training iterations of a run that traced every
    operator, as shares of the operators' total."""
    phases = rep["phases"]
    by_id = {p["id"]: p for p in phases}
    leaf = lambda p: p["type"].rsplit("/", 1)[-1]
    child_ops = {}
    for p in phases:
        if leaf(p) == "op" and p["parent"] in by_id and leaf(by_id[p["parent"]]) == "op":
            child_ops[p["parent"]] = child_ops.get(p["parent"], 0) + (p["end_ns"] - p["start_ns"])

    def in_train_iteration(p):
        q = p
        while q is not None:
            if leaf(q) == "iteration":
                return q.get("tags", {}).get("mode", "train") == "train"
            q = by_id.get(q["parent"])
        return False

    totals = {}
    for p in phases:
        if leaf(p) == "op" and in_train_iteration(p):
            self_ns = (p["end_ns"] - p["start_ns"]) - child_ops.get(p["id"], 0)
            totals[p["name"]] = totals.get(p["name"], 0) + self_ns
    s = sum(totals.values())
    return {k: v / s for k, v in totals.items()} if s else {}


def op_shares_deep(rep):
    """--deep's per-operator self time per profiled iteration, as measured (the same profiler
    cost as when every iteration is traced), as shares of their sum."""
    deep = rep.get("deep_profile") or {}
    totals = {}
    for group in deep.get("groups", []):
        if group.get("mode", "train") != "train":
            continue
        for op in group.get("operators", []):
            if not op.get("data_wait"):
                totals[op["name"]] = totals.get(op["name"], 0) + op["raw_mean_s"]
    s = sum(totals.values())
    return {k: v / s for k, v in totals.items()} if s else {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grademl", default="build/grademl")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    g = os.path.abspath(args.grademl)
    tmp = tempfile.mkdtemp(prefix="xsp_bench.")
    modes = {
        "plain": lambda db: [PY, MLP, "--epochs", str(args.epochs)],
        "grademl": lambda db: [g, "--db", db, "run", "--no-report", "--", PY, MLP, "--epochs", str(args.epochs)],
        "deep": lambda db: [g, "--db", db, "run", "--no-report", "--deep", "--", PY, MLP, "--epochs", str(args.epochs)],
        "ops_all": lambda db: [g, "--db", db, "run", "--no-report", "--auto-detail", "ops", "--", PY, MLP, "--epochs",
                               str(args.epochs)],
        "profiler": lambda db: [PY, MLP, "--epochs", str(args.epochs), "--profiler"],
    }
    rows = {m: [] for m in modes}
    reports = {m: [] for m in ("grademl", "deep", "ops_all")}
    for i in range(args.rounds):
        for m, cmd in modes.items():
            db = os.path.join(tmp, f"{m}_{i}.db")
            r = loop_json(run(cmd(db)))
            rows[m].append(r)
            if m in reports:
                reports[m].append(report(g, db))
    med = lambda m, k: statistics.median(r[k] for r in rows[m])
    base = med("plain", "train_s")
    print(f"## 1. MLP loop, {args.epochs} epochs, {args.rounds} rounds alternating: training loop medians")
    for m in modes:
        print(f"{m:9s} {med(m, 'train_s'):.3f} s  ratio {med(m, 'train_s') / base:.3f}  "
              f"(per-round ratios: median {statistics.median(r['train_s'] / p['train_s'] for r, p in zip(rows[m], rows['plain'])):.3f})")
    print("goals: grademl <= 1.02, deep <= 1.05")
    print()

    print("## 2. Overhead grademl reports (default runs) vs the measured training-loop ratio")
    diffs = []
    for plain, r, rep in zip(rows["plain"], rows["grademl"], reports["grademl"]):
        fs = rep.get("fine_sampling") or {}
        reported = fs.get("overhead_fraction")
        measured = r["train_s"] / plain["train_s"] - 1  # against the plain run of the same round
        if reported is not None:
            diffs.append(100 * (reported - measured))
            print(f"reported {100 * reported:.2f}%  measured {100 * measured:+.2f}%  "
                  f"(fine phases 1 in {fs.get('every_max')}; recorded {fs.get('recorded_iterations')} of "
                  f"{fs.get('iterations')} iterations)")
    if diffs:
        print(f"difference: median {statistics.median(diffs):+.2f} pp (goal: within 1 pp)")
    print()

    print("## 3. --deep's operator shares vs tracing every iteration (--auto-detail ops), training iterations")
    truth = op_shares_all(reports["ops_all"][-1])
    for rep in reports["deep"][-1:]:
        d = rep.get("deep_profile") or {}
        est = op_shares_deep(rep)
        big = sorted((k for k in truth if truth[k] >= 0.02), key=lambda k: -truth[k])
        worst = 0.0
        for k in big:
            rel = abs(est.get(k, 0.0) - truth[k]) / truth[k]
            worst = max(worst, rel)
            print(f"{k:28s} all {100 * truth[k]:5.1f}%  deep {100 * est.get(k, 0.0):5.1f}%  ({100 * rel:.1f}% off)")
        print(f"worst relative error over operators with >= 2% share: {100 * worst:.1f}% (goal <= 5%)")
        grp = (d.get("groups") or [{}])[0]
        print(f"profiled iterations: {grp.get('profiled')} of {grp.get('iterations')}; profiling cost removed: "
              f"{1000 * d.get('removed_s', 0):.1f} ms ({1e6 * grp.get('mean_cost_s', 0):.0f} us per profiled "
              f"iteration, {grp.get('cost_per_op_us', 0):.1f} us per operator call, "
              f"{grp.get('cost_inside_op_us', 0):.1f} us of it inside operators)")
    print()

    print("## 4. Python start-up under grademl run: auto-instrumented vs --no-auto, 11 alternating runs")
    db = os.path.join(tmp, "startup.db")
    extra, fixed = [], []
    for _ in range(11):
        t0 = time.perf_counter()
        run([g, "--db", db, "run", "--no-report", "--no-auto", "--", PY, "-c", "pass"])
        t1 = time.perf_counter()
        run([g, "--db", db, "run", "--no-report", "--", PY, "-c", "pass"])
        t2 = time.perf_counter()
        extra.append(1000 * ((t2 - t1) - (t1 - t0)))
    print(f"added by the hooks: median {statistics.median(extra):.1f} ms (goal <= 5 ms)")
    print()

    print("## 5. Fixed cost per run: grademl run --no-report -- /bin/true vs /bin/true, 11 alternating runs")
    db = os.path.join(tmp, "fixed.db")
    for _ in range(11):
        t0 = time.perf_counter()
        run(["/bin/true"])
        t1 = time.perf_counter()
        run([g, "--db", db, "run", "--no-report", "--", "/bin/true"])
        t2 = time.perf_counter()
        fixed.append(1000 * ((t2 - t1) - (t1 - t0)))
    print(f"added by grademl: median {statistics.median(fixed):.1f} ms (min {min(fixed):.1f}) (goal <= 5 ms)")


if __name__ == "__main__":
    main()
