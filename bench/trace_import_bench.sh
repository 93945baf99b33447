#!/usr/bin/env bash
# Whole trace import speed (`make bench`, section 8; docs/PERFORMANCE.md): `grademl import`
# (parse, sort, model, store into a fresh SQLite database) against Python's json.load merely
# parsing the SAME uncompressed file, in the same run: the shared Kineto traces
# (../shared/traces/kineto or $GRADEML_SHARED_TRACES/kineto, decompressed to a temp dir).
# CPU seconds (user + sys) of each side's process, best of REPEAT (the machine may be shared:
# CPU time is the honest figure), and grademl's peak RSS against the file's size.
# usage: bench/trace_import_bench.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
PY=/usr/bin/python3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPEAT=${REPEAT:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
shared=${GRADEML_SHARED_TRACES:-$ROOT/../shared/traces}
if [ ! -d "$shared/kineto" ]; then
  echo "(no shared traces at $shared/kineto: nothing to measure)"
  exit 0
fi
for f in "$shared"/kineto/*.json.gz; do zcat "$f" > "$TMP/$(basename "$f" .gz)"; done

printf "%-36s %7s %9s %12s %12s %7s %12s\n" file MB events "import CPU s" "json.load s" ratio "import RSS"
for f in "$TMP"/*.json; do
  best_g=1e9 best_p=1e9 rss=0 events=0
  for _ in $(seq "$REPEAT"); do
    rm -f "$TMP/bench.db"*
    out=$( { /usr/bin/time -f "%U %S %M" "$BUILD/grademl" --db "$TMP/bench.db" import "$f" > "$TMP/out"; } 2>&1 | tail -1)
    events=$(sed -n 's/.*: \([0-9]*\) events.*/\1/p' "$TMP/out")
    read -r g rss < <(echo "$out" | awk '{print $1 + $2, $3 / 1024}')
    out=$( { /usr/bin/time -f "%U %S" $PY -c "import json, sys; json.load(open(sys.argv[1], 'rb'))" "$f"; } 2>&1 | tail -1)
    p=$(echo "$out" | awk '{print $1 + $2}')
    best_g=$(awk -v a="$g" -v b="$best_g" 'BEGIN{print (a < b) ? a : b}')
    best_p=$(awk -v a="$p" -v b="$best_p" 'BEGIN{print (a < b) ? a : b}')
  done
  mb=$(stat -c %s "$f" | awk '{printf "%.1f", $1 / 1048576}')
  ratio=$(awk -v p="$best_p" -v g="$best_g" 'BEGIN{printf "%.2fx", (g > 0) ? p / g : 0}')
  printf "%-36s %7s %9s %12s %12s %7s %9.1f MB\n" "$(basename "$f")" "$mb" "$events" "$best_g" "$best_p" "$ratio" "$rss"
done
