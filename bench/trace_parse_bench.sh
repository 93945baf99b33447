#!/usr/bin/env bash
# Chrome-trace parse speed (`make bench`, section 7; docs/PERFORMANCE.md): the streaming
# reader (build/bench/trace_parse_bench: ReadChromeTrace, events handed to a counting
# callback) against Python's json.load on the SAME uncompressed files in the same run: the
# shared Kineto traces (../shared/traces/kineto or $GRADEML_SHARED_TRACES/kineto,
# decompressed to a temp dir) and a synthetic Kineto-shaped trace of SYNTH_MB (default 200)
# MB. MB/s is per core: bytes over the process's CPU time, best of REPEAT; peak RSS of
# each side is its own process's. usage: bench/trace_parse_bench.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
PY=/usr/bin/python3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPEAT=${REPEAT:-3}
SYNTH_MB=${SYNTH_MB:-200}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

shared=${GRADEML_SHARED_TRACES:-$ROOT/../shared/traces}
if [ -d "$shared/kineto" ]; then
  for f in "$shared"/kineto/*.json.gz; do
    zcat "$f" > "$TMP/$(basename "$f" .gz)"
  done
else
  echo "(no shared traces at $shared/kineto: only the synthetic trace)"
fi
$PY "$ROOT/bench/make_synthetic_trace.py" "$TMP/synthetic_${SYNTH_MB}MB.json" "$SYNTH_MB"

printf "%-36s %9s %9s %12s %12s %8s %11s %11s\n" file MB events "grademl MB/s" "python MB/s" ratio "grademl RSS" "python RSS"
total_bytes=0
for f in "$TMP"/*.json; do
  # One process per file and side, so that each peak RSS is that file's.
  read -r _ bytes events cpu mbs wall rss < <("$BUILD/bench/trace_parse_bench" --repeat "$REPEAT" "$f")
  read -r py_cpu py_rss < <($PY - "$f" "$REPEAT" <<'PY'
import json, resource, sys, time
path, repeat = sys.argv[1], int(sys.argv[2])
best = 1e30
for _ in range(repeat):
    t = time.process_time()
    with open(path, "rb") as f:
        doc = json.load(f)
    best = min(best, time.process_time() - t)
    del doc
print(best, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
PY
)
  $PY - "$(basename "$f")" "$bytes" "$events" "$cpu" "$py_cpu" "$rss" "$py_rss" <<'PY'
import sys
name, size, events, cpu, py, rss, py_rss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
mb = size / 1e6
print(f"{name:36s} {mb:9.1f} {events:9d} {mb / cpu:12.0f} {mb / py:12.0f} {py / cpu:7.1f}x {rss / 1024:9.0f}MB {py_rss / 1024:9.0f}MB")
PY
done
echo "(MB/s per core: uncompressed bytes / CPU seconds, best of $REPEAT; goal >= 400 MB/s. RSS: peak of the process.)"
