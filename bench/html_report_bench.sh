#!/usr/bin/env bash
# The HTML report's benchmarks (issue 6; figures in docs/PERFORMANCE.md): `make bench-html`.
#  1. the example workflow (examples/digits) recorded by grademl: report size, and opening
#     time in headless Chromium beside a blank page (goals: under 2 MB, under 2 s);
#  2. the synthetic 1M-phase run: time to render the page, its size, and opening time.
# DIGITS_SCALE=0.2 runs a smaller example; ROUNDS sets the page loads per file (default 5).
set -euo pipefail
BUILD=${1:-build}
GRADEML=$BUILD/grademl
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ROUNDS=${ROUNDS:-5}

echo "# GradeML HTML report benchmarks — $(date -u +%Y-%m-%d), $(nproc) cores, $(chromium --version 2>/dev/null | head -1)"
echo
echo "## 7a. The example workflow's report (DIGITS_SCALE=${DIGITS_SCALE:-1})"
"$GRADEML" --db "$TMP/g.db" run examples/digits/pipeline.yaml > "$TMP/run.log" 2>&1
start=$(date +%s%N)
"$GRADEML" --db "$TMP/g.db" report --html "$TMP/digits.html" 2>/dev/null
echo "grademl report --html (load, analyses, page): $(( ($(date +%s%N) - start) / 1000000 )) ms"
node bench/html_open_bench.mjs --web web --rounds "$ROUNDS" "$TMP/digits.html"
echo
echo "## 7b. The synthetic 1M-phase run (bench/synthetic_run.h)"
"$BUILD/bench/html_report_scale_bench" "$TMP/scale.html"
node bench/html_open_bench.mjs --web web --rounds "$ROUNDS" "$TMP/scale.html"
