#!/usr/bin/env bash
# GradeML's benchmarks, one command: `make bench` (or bench/run_all.sh BUILD_DIR).
# Every figure is compared with a peer measured in the same run. Copy the output into
# docs/PERFORMANCE.md with the date and machine.
set -euo pipefail
BUILD=${1:-build}
GRADEML=$BUILD/grademl
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PAIRS=${PAIRS:-4}
ITER=${ITER:-6000000000}   # about 7 s of one core here

echo "# GradeML benchmarks — $(date -u +%Y-%m-%d), $(nproc) cores, $(uname -r)"
echo

echo "## 1. Monitor cost: 10 Hz while following a tree of 201 processes (200 sleeping children)"
for secs in 5 20; do
  "$GRADEML" --db "$TMP/m$secs.db" run --no-report --interval 100ms -- "$BUILD/tests/spawn_sleepers" 200 "$secs"
  "$GRADEML" --db "$TMP/m$secs.db" report --json > "$TMP/m$secs.json"
done
$PY - "$TMP/m5.json" "$TMP/m20.json" <<'PY'
import json, sys
short, long = (json.load(open(f)) for f in sys.argv[1:3])
def figures(r):
    return r["run"]["duration_s"], r["run"]["monitor_cpu_seconds"]
n = sum(1 for p in long["phases"] if p["type"].endswith("process"))
(d1, c1), (d2, c2) = figures(short), figures(long)
print(f"processes followed: {n}")
print(f"whole run of {d2:.1f} s: grademl used {c2:.3f} s CPU = {100 * c2 / d2:.3f}% of one core (start-up included)")
print(f"steady state ({d1:.1f} s vs {d2:.1f} s runs): {1000 * (c2 - c1) / (d2 - d1):.2f} ms/s = "
      f"{100 * (c2 - c1) / (d2 - d1):.3f}% of one core (goal <= 0.5%)")
PY
echo

for threads in 1 $(nproc); do
  echo "## 2. Makespan of fixed CPU work ($threads thread(s), $ITER iterations each): plain vs under grademl run, alternating, $PAIRS pairs"
  : > "$TMP/times"
  for i in $(seq "$PAIRS"); do
    a=$(date +%s%N); "$BUILD/bench/cpu_work" "$ITER" "$threads"; b=$(date +%s%N)
    "$GRADEML" --db "$TMP/w.db" run --no-report -- "$BUILD/bench/cpu_work" "$ITER" "$threads"; c=$(date +%s%N)
    echo "$((b - a)) $((c - b))" >> "$TMP/times"
  done
  $PY - "$TMP/times" <<'PY'
import statistics, sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
plain = [a / 1e9 for a, _ in rows]; graded = [b / 1e9 for _, b in rows]
ratios = [g / p for p, g in zip(plain, graded)]
print(f"plain median {statistics.median(plain):.3f} s; under grademl median {statistics.median(graded):.3f} s")
print(f"makespan ratio: median {statistics.median(ratios):.4f}, min {min(ratios):.4f}, max {max(ratios):.4f} (goal <= 1.01)")
PY
  echo
done

echo "## 3. Fixed cost per run: grademl run -- /bin/true vs /bin/true, alternating, 10 pairs"
: > "$TMP/fixed"
for i in $(seq 10); do
  a=$(date +%s%N); /bin/true; b=$(date +%s%N)
  "$GRADEML" --db "$TMP/f.db" run --no-report -- /bin/true; c=$(date +%s%N)
  echo "$((b - a)) $((c - b))" >> "$TMP/fixed"
done
$PY - "$TMP/fixed" <<'PY'
import statistics, sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
extra = [(g - p) / 1e6 for p, g in rows]
print(f"start-up + finish added by grademl: median {statistics.median(extra):.1f} ms (min {min(extra):.1f}, max {max(extra):.1f})")
PY
echo

echo "## 4. Hot path: /proc reads and parsing (Google Benchmark)"
"$BUILD/bench/proc_parse_bench" --benchmark_min_time=0.2 2>/dev/null | grep -E "^BM_|Benchmark"
