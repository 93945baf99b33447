#!/usr/bin/env bash
# `grademl query` over the synthetic 1M-phase, 10M-sample run (query_scale_bench.cpp writes
# it into STORE first when STORE does not exist): wall time, user CPU and peak RSS of
# typical queries with the default limits, and the least --max-memory each needs (found in
# steps of 32 MiB). docs/query.md, "Limits", quotes the figures.
#
#   bench/query_scale_bench.sh BUILD_DIR [STORE] [GRADEML]
#
# GRADEML: another binary to measure the same way (e.g. an older build, for before/after).
set -euo pipefail
build=${1:?usage: query_scale_bench.sh BUILD_DIR [STORE] [GRADEML]}
store=${2:-/tmp/grademl_query_scale_bench.db}
grademl=${3:-$build/grademl}
if [ ! -e "$store" ]; then
  "$build/bench/query_scale_bench" "$store"
fi
queries=(
  "SELECT * FROM phases"
  "SELECT * FROM phases ORDER BY name DESC"
  "SELECT leaf_type, count(*), sum(duration_s) FROM phases GROUP BY leaf_type"
  "SELECT json_group_array(name) FROM phases"
  "SELECT count(*) FROM samples"
  "SELECT metric, avg(value) FROM samples GROUP BY metric"
)
for q in "${queries[@]}"; do
  stats=$( { /usr/bin/time -f "%e %U %M" "$grademl" --db "$store" query "$q" --csv --timeout 0 >/dev/null; } 2>&1 | tail -1)
  read -r wall user rss <<<"$stats"
  least="-"
  if "$grademl" query --help 2>/dev/null | grep -q -- --max-memory; then
    for ((mib = 32; mib <= 4096; mib += 32)); do
      if "$grademl" --db "$store" query "$q" --csv --timeout 0 --max-memory "${mib}M" >/dev/null 2>&1; then
        least="${mib} MiB"
        break
      fi
    done
  fi
  printf '%-75s %6.2f s wall %6.2f s user %5d MiB peak RSS  needs --max-memory %s\n' "$q" "$wall" "$user" \
    "$((rss / 1024))" "$least"
done
