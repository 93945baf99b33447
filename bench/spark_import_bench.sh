#!/usr/bin/env bash
# Spark event log import speed (`make bench`, section 9; docs/PERFORMANCE.md): the Spark
# importer in process (build/bench/spark_import_bench: read, parse, records, the model handed
# to a RunBuilder; no store) against Python's json module merely parsing the same log line by
# line (json.loads on each line), in the same run: the largest shared log
# (../shared/traces/spark/app-20200706201101-0003, or $GRADEML_SHARED_TRACES/spark), its
# rolling-directory 4.2 log, and a synthetic Spark 3-shaped log of SYNTH_MB (default 100) MB.
# MB/s per core: bytes over CPU time, best of REPEAT (small logs are imported many times per
# repeat). Peak RSS is each side's own process's. usage: bench/spark_import_bench.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
PY=/usr/bin/python3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPEAT=${REPEAT:-3}
SYNTH_MB=${SYNTH_MB:-100}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

shared=${GRADEML_SHARED_TRACES:-$ROOT/../shared/traces}/spark
logs=()
if [ -d "$shared" ]; then
  logs+=("$shared/app-20200706201101-0003" "$shared/application_1516285256255_0012")
else
  echo "(no shared Spark logs at $shared: only the synthetic log)"
fi
$PY "$ROOT/bench/make_synthetic_spark_log.py" "$TMP/synthetic_${SYNTH_MB}MB.log" "$SYNTH_MB"
logs+=("$TMP/synthetic_${SYNTH_MB}MB.log")

printf "%-34s %8s %8s %13s %12s %8s %11s %11s\n" log MB events "grademl MB/s" "python MB/s" ratio "grademl RSS" "python RSS"
for f in "${logs[@]}"; do
  size=$(stat -c %s "$f")
  # Small logs are read many times so that each timed repeat takes a while.
  inner=$(( size < 10000000 ? 100000000 / size + 1 : 1 ))
  best=1e30
  rss=0
  for _ in $(seq "$REPEAT"); do
    read -r _ bytes events phases cpu _ peak < <("$BUILD/bench/spark_import_bench" --repeat "$inner" "$f")
    best=$($PY -c "print(min($best, $cpu))")
    rss=$peak
  done
  read -r py_cpu py_rss < <($PY - "$f" "$REPEAT" "$inner" <<'PY'
import json, resource, sys, time
path, repeat, inner = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read().splitlines()
best = 1e30
for _ in range(repeat):
    t = time.process_time()
    for _ in range(inner):
        for line in data:
            json.loads(line)
    best = min(best, (time.process_time() - t) / inner)
print(best, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
PY
)
  $PY - "$(basename "$f")" "$bytes" "$events" "$best" "$py_cpu" "$rss" "$py_rss" <<'PY'
import sys
name, size, events, cpu, py, rss, py_rss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
mb = size / 1e6
print(f"{name:34s} {mb:8.2f} {events:8d} {mb / cpu:13.0f} {mb / py:12.0f} {py / cpu:7.1f}x {rss / 1024:9.0f}MB {py_rss / 1024:9.0f}MB")
PY
done
echo "(MB/s per core: log bytes / CPU seconds of one import, best of $REPEAT; grademl: the whole importer without the store; python: json.loads per line only.)"
