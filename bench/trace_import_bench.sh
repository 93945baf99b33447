#!/usr/bin/env bash
# Whole trace import speed (`make bench`, section 8; docs/PERFORMANCE.md): `grademl import`
# (parse, sort, model, store into a fresh SQLite database) against Python's json.load merely
# parsing the SAME uncompressed file, in the same run: the shared Kineto traces
# (../shared/traces/kineto or $GRADEML_SHARED_TRACES/kineto, decompressed to a temp dir).
# CPU seconds (user + sys) of each side's process over REPEAT alternating pairs (grademl, then
# json.load): the median and the best of each side (the machine may be shared: CPU time is
# the honest figure), the ratio of the medians (import / json.load: the goal is <= 0.5), and
# grademl's peak RSS. FILES (a space-separated list of names without .json.gz, e.g.
# "gpu_train_control") limits the traces: `REPEAT=5 FILES=gpu_train_control` takes ~5 s.
# usage: bench/trace_import_bench.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
PY=/usr/bin/python3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPEAT=${REPEAT:-3}
FILES=${FILES:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
shared=${GRADEML_SHARED_TRACES:-$ROOT/../shared/traces}
if [ ! -d "$shared/kineto" ]; then
  echo "(no shared traces at $shared/kineto: nothing to measure)"
  exit 0
fi
for f in "$shared"/kineto/*.json.gz; do
  name=$(basename "$f" .json.gz)
  if [ -n "$FILES" ] && [[ " $FILES " != *" $name "* ]]; then continue; fi
  zcat "$f" > "$TMP/$name.json"
done
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf "%-36s %6s %8s %15s %15s %9s %9s\n" file MB events "import CPU s" "json.load s" "ratio" "RSS"
printf "%-36s %6s %8s %15s %15s %9s %9s\n" "" "" "" "median (best)" "median (best)" "of medians" ""
for f in "$TMP"/*.json; do
  [ -e "$f" ] || continue
  gs=() ps=() rss=0 events=0
  for _ in $(seq "$REPEAT"); do
    rm -f "$TMP/bench.db"*
    out=$( { /usr/bin/time -f "%U %S %M" "$BUILD/grademl" --db "$TMP/bench.db" import "$f" > "$TMP/out"; } 2>&1 | tail -1)
    events=$(sed -n 's/.*: \([0-9]*\) events.*/\1/p' "$TMP/out")
    read -r g rss < <(echo "$out" | awk '{print $1 + $2, $3 / 1024}')
    out=$( { /usr/bin/time -f "%U %S" $PY -c "import json, sys; json.load(open(sys.argv[1], 'rb'))" "$f"; } 2>&1 | tail -1)
    gs+=("$g")
    ps+=("$(echo "$out" | awk '{print $1 + $2}')")
  done
  mg=$(printf "%s\n" "${gs[@]}" | median)
  mp=$(printf "%s\n" "${ps[@]}" | median)
  bg=$(printf "%s\n" "${gs[@]}" | sort -g | head -1)
  bp=$(printf "%s\n" "${ps[@]}" | sort -g | head -1)
  mb=$(stat -c %s "$f" | awk '{printf "%.1f", $1 / 1048576}')
  ratio=$(awk -v p="$mp" -v g="$mg" 'BEGIN{printf "%.2f", (p > 0) ? g / p : 0}')
  printf "%-36s %6s %8s %15s %15s %9s %6.1f MB\n" "$(basename "$f")" "$mb" "$events" "$mg ($bg)" "$mp ($bp)" "$ratio" "$rss"
done
echo "(ratio: grademl import CPU / json.load CPU, medians of $REPEAT alternating pairs; goal <= 0.5)"
