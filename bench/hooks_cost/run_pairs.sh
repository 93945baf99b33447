#!/bin/bash
# usage: bench/hooks_cost/run_pairs.sh ROUNDS
# bench/mlp_digits.py --epochs 5: plain vs `grademl run --no-report` vs `--no-report --deep`,
# alternating; prints one JSON line per child (train_cpu_s is the figure), then the medians.
R=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
G=$R/build/grademl
S=$R/bench/mlp_digits.py
cd "$W" || exit 1
for _ in $(seq "${1:-7}"); do
  echo "plain $(/usr/bin/python3 "$S" --epochs 5 | tail -1)"
  echo "run $("$G" run --no-report -- /usr/bin/python3 "$S" --epochs 5 2>/dev/null | tail -1)"
  echo "deep $("$G" run --no-report --deep -- /usr/bin/python3 "$S" --epochs 5 2>/dev/null | tail -1)"
done | tee "$W/rows.txt"
/usr/bin/python3 - "$W/rows.txt" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, js = line.split(" ", 1)
    rows.setdefault(mode, []).append(json.loads(js)["train_cpu_s"])
base = statistics.median(rows["plain"])
for mode, v in rows.items():
    r = [x / y for x, y in zip(v, rows["plain"])]
    print(f"{mode:6} train_cpu_s median {statistics.median(v):.4f} s  {statistics.median(v) / base:.3f}x  "
          f"rounds {min(r):.3f}-{max(r):.3f}  n={len(v)}")
PY
