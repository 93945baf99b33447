#!/usr/bin/python3
"""Validation of the what-if levers by really applying them (issue 12):

    bench/validation/levers.py [--grademl PATH] [--quick] [--repeat N] [--only NAME]
                               [--json FILE] [--check] [-v]

For each case, a workload is recorded under `grademl run` as it was written (the baseline),
`grademl whatif` predicts the makespan with the lever, and the workload is run again under
`grademl run` with the lever really applied; baseline and applied runs alternate so that
they share the machine's noise. Cases:

  threads      lever_crunch.py: pure-Python CPU work in 1 process  -> `#P:threads=2`,
               applied: the same work split among 2 processes (multiprocessing)
  num_workers  lever_loader.py: a torch DataLoader loading in the main process
               (num_workers=0, an expensive __getitem__) -> `#P:num_workers=2`,
               applied: num_workers=2

The levers assume perfect scaling (threads) and workers with cores of their own
(num_workers), so their savings are upper bounds: the check is that the measured saving
(median over repeats) is at most the predicted saving plus a margin of max(0.3 s, 10% of the
baseline). The prediction error against the applied run is reported, not checked: on a
machine shared with other work it is as noisy as the machine.

Also reports whether `grademl report` raised the issue that names the lever
(`underused_cores`, or `data_wait` with a num_workers change): it does only when the host
had idle cores during the baseline, which a busy machine may not have.

Exit status: 0, or 1 with --check when a bound does not hold, or on a harness error
(grademl or a workload failing). The num_workers case is skipped (with a message) when torch
is missing, and fails when CI=true.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"
MARGIN_S, MARGIN_FRACTION = 0.3, 0.10


class HarnessError(Exception):
    pass


def sh(cmd, env, verbose=False):
    if verbose:
        print("  $ " + " ".join(cmd), file=sys.stderr)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise HarnessError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return p.stdout


def record(grademl, cmd, env, verbose):
    """Runs cmd under grademl; returns (run duration, the top process's phase id, issues)."""
    sh([grademl, "run", "--"] + cmd, env, verbose)
    report = json.loads(sh([grademl, "report", "--json"], env, verbose))
    process = next((p["id"] for p in report["phases"] if p["type"] == "run/process"), None)
    if process is None:
        raise HarnessError(f"no process phase in the run of {' '.join(cmd)}")
    return report["run"]["duration_s"], process, report.get("issues", [])


def predict(grademl, change, env, verbose):
    w = json.loads(sh([grademl, "whatif", "--json", change], env, verbose))
    return w["baseline_s"], w["predicted_s"], [c["note"] for c in w.get("changes", [])]


def torch_available():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


def cases(quick):
    work = 150 if quick else 400
    samples = 320 if quick else 640
    crunch = os.path.join(HERE, "lever_crunch.py")
    loader = os.path.join(HERE, "lever_loader.py")
    return [
        {"name": "threads", "lever": "threads=2", "issue": "underused_cores",
         "baseline": [PY, crunch, "1", str(work)], "applied": [PY, crunch, "2", str(work)]},
        {"name": "num_workers", "lever": "num_workers=2", "issue": "data_wait", "needs_torch": True,
         "baseline": [PY, loader, "0", str(samples)], "applied": [PY, loader, "2", str(samples)]},
    ]


def run_case(grademl, case, repeat, env, verbose):
    rows = []
    issue_seen = 0
    for i in range(repeat):
        base_s, process, issues = record(grademl, case["baseline"], env, verbose)
        change = f"#{process}:{case['lever']}"
        replay_s, predicted_s, notes = predict(grademl, change, env, verbose)
        if any(x["kind"] == case["issue"] and case["lever"].split("=")[0] in x.get("change", "") for x in issues):
            issue_seen += 1
        applied_s, _, _ = record(grademl, case["applied"], env, verbose)
        rows.append({"baseline_s": base_s, "replay_s": replay_s, "predicted_s": predicted_s,
                     "applied_s": applied_s, "predicted_saving_s": replay_s - predicted_s,
                     "measured_saving_s": base_s - applied_s})
        if verbose:
            print(f"  {case['name']} #{i + 1}: baseline {base_s:.2f} s, predicted {predicted_s:.2f} s, "
                  f"applied {applied_s:.2f} s", file=sys.stderr)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    margin = max(MARGIN_S, MARGIN_FRACTION * med["baseline_s"])
    return {
        "name": case["name"], "change": f"#P:{case['lever']}", "repeats": rows, "median": med,
        "margin_s": margin, "bound_holds": med["measured_saving_s"] <= med["predicted_saving_s"] + margin,
        "error_pct": 100 * abs(med["predicted_s"] - med["applied_s"]) / med["applied_s"],
        "issue_raised": f"{issue_seen}/{repeat}", "note": notes[0] if notes else "",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grademl", default=os.path.join(ROOT, "build", "grademl"))
    ap.add_argument("--quick", action="store_true", help="smaller workloads, threads case only, 2 repeats")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--only", default=None, help="threads or num_workers")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--check", action="store_true", help="exit 1 when a bound does not hold")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    repeat = args.repeat or (2 if args.quick else 3)
    grademl = os.path.abspath(args.grademl)
    if not os.access(grademl, os.X_OK):
        print(f"levers.py: {grademl}: no grademl binary (build it first)", file=sys.stderr)
        return 1
    results, failed = [], False
    with tempfile.TemporaryDirectory(prefix="grademl_levers_") as tmp:
        env = dict(os.environ, GRADEML_DB=os.path.join(tmp, "levers.db"))
        for case in cases(args.quick):
            if args.only and case["name"] != args.only:
                continue
            if args.quick and not args.only and case["name"] != "threads":
                continue
            if case.get("needs_torch") and not torch_available():
                msg = f"levers.py: {case['name']}: torch is missing"
                if os.environ.get("CI") == "true":
                    print(msg + " (CI=true: failing)", file=sys.stderr)
                    return 1
                print(msg + ": skipped", file=sys.stderr)
                continue
            try:
                results.append(run_case(grademl, case, repeat, env, args.verbose))
            except (HarnessError, subprocess.TimeoutExpired) as e:
                print(f"levers.py: {case['name']}: {e}", file=sys.stderr)
                return 1
    print(f"Levers applied for real (medians of {repeat} runs each; bound: measured saving <= predicted "
          f"saving + max({MARGIN_S} s, {MARGIN_FRACTION:.0%} of the baseline))")
    print(f"{'case':<12} {'change':<16} {'baseline':>9} {'predicted':>9} {'applied':>9} "
          f"{'pred.saving':>11} {'meas.saving':>11} {'error':>6}  bound  issue")
    for r in results:
        m = r["median"]
        print(f"{r['name']:<12} {r['change']:<16} {m['baseline_s']:>8.2f}s {m['predicted_s']:>8.2f}s "
              f"{m['applied_s']:>8.2f}s {m['predicted_saving_s']:>10.2f}s {m['measured_saving_s']:>10.2f}s "
              f"{r['error_pct']:>5.0f}%  {'holds' if r['bound_holds'] else 'FAILS'}  {r['issue_raised']}")
        failed |= not r["bound_holds"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "grademl.levers/1", "results": results}, f, indent=2)
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
