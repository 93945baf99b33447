#!/usr/bin/env bash
# A real PostgreSQL server for the tests (Debian's postgresql package), private to one build:
# its data directory and Unix socket live in DIR, it listens on no TCP address, and it runs
# as the `postgres` user when started by root (PostgreSQL refuses to run as root).
#
#   pg_test_server.sh start DIR   starts it unless it is running (safe to call concurrently)
#   pg_test_server.sh stop DIR    stops it and removes DIR
#   pg_test_server.sh halt DIR    stops it, keeping its data (start brings it back)
#   pg_test_server.sh status DIR  exit 0 when it is running
#
# Tests connect with "postgresql:///DB?host=DIR&user=postgres" (trust authentication on the
# socket only). Settings favour test speed (fsync off): never point it at data you keep.
set -euo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -eq 2 ] || { usage >&2; exit 2; }
cmd=$1
dir=$2

bindir=""
for d in /usr/lib/postgresql/*/bin; do
  [ -x "$d/pg_ctl" ] && bindir=$d
done
if [ -z "$bindir" ]; then
  echo "pg_test_server: no PostgreSQL server installed (apt-get install postgresql)" >&2
  # 3: ctest skips the PostgreSQL tests; under CI=true a missing server fails (docs/testing.md).
  [ "${CI:-}" = true ] && exit 1
  exit 3
fi

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

running() { [ -f "$dir/data/postmaster.pid" ] && as_owner "$bindir/pg_ctl" status -D "$dir/data" >/dev/null 2>&1; }

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    exec 9>"$dir/.lock"
    flock 9
    if running; then exit 0; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      rm -rf "$dir/data"
      as_owner "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    as_owner "$bindir/pg_ctl" start -w -t 60 -D "$dir/data" -l "$dir/server.log" \
      -o "-k $dir -c listen_addresses='' -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=300 -c shared_buffers=64MB" \
      >/dev/null 9>&- || { tail -20 "$dir/server.log" >&2; exit 1; }
    ;;
  stop)
    if [ -d "$dir" ]; then
      exec 9>"$dir/.lock"
      flock 9
      if running; then as_owner "$bindir/pg_ctl" stop -D "$dir/data" -m immediate -w >/dev/null 2>&1 9>&- || true; fi
      rm -rf "$dir"
    fi
    ;;
  halt)
    exec 9>"$dir/.lock"
    flock 9
    if running; then as_owner "$bindir/pg_ctl" stop -D "$dir/data" -m fast -w >/dev/null 2>&1 9>&-; fi
    ;;
  status)
    running
    ;;
  *)
    usage >&2
    exit 2
    ;;
esac
