#!/usr/bin/env bash
# Redis 7.0.15's own test suite as an oracle for Ruvio (issue 33).
#
#   bash scripts/redis-suite.sh [--check] [UNIT...]      run units against a fresh ruvio each, print per unit
#                                                        "Ruvio passes X of the Y tests redis-server passes";
#                                                        --check fails when a unit falls below tests/redis-suite/baseline.txt
#   bash scripts/redis-suite.sh --record [UNIT...]       run units against Debian's redis-server and write its passing
#                                                        lists to tests/redis-suite/passing/ (what CI compares with)
#
# Units default to those in tests/redis-suite/baseline.txt. Each unit runs against a fresh server with the same
# flags for both sides (external-server mode, one client, tags needing DEBUG, replication or maxmemory left out;
# see the suite's README). A test counts for Ruvio only if redis-server passes it too, by name (names that repeat
# in a unit are counted as many times as they repeat). What is left out and why: docs/redis-suite.md.
#
# Environment:
#   RUVIO_BIN=/path/to/ruvio      binary under test (default: target/release/ruvio)
#   REDIS_TESTS=/path             the suite (default: ../shared/redis-tests next to the repository)
#   REDIS_SUITE_TIMEOUT=seconds   per unit (default 900)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUITE_DIR="$REPO/tests/redis-suite"
BASELINE="$SUITE_DIR/baseline.txt"
PASSING="$SUITE_DIR/passing"
RUVIO_BIN="${RUVIO_BIN:-$REPO/target/release/ruvio}"
REDIS_TESTS="${REDIS_TESTS:-$(cd "$REPO/.." && pwd)/shared/redis-tests}"
UNIT_TIMEOUT="${REDIS_SUITE_TIMEOUT:-900}"
# The flags both sides run with (the suite's README).
FLAGS=(--singledb --durable --clients 1 --tags -needs:debug --tags -needs:repl --tags -needs:config-maxmemory)

die() { printf 'redis-suite: error: %s\n' "$*" >&2; exit 1; }

mode=ruvio
check=0
units=()
for a in "$@"; do
  case "$a" in
    --record) mode=redis ;;
    --check) check=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) units+=("$a") ;;
  esac
done
if [ ${#units[@]} -eq 0 ]; then
  mapfile -t units < <(grep -v '^#' "$BASELINE" | awk 'NF {print $1}')
fi

command -v tclsh >/dev/null || die "tclsh is missing (Debian package tcl)"
[ -d "$REDIS_TESTS/tests" ] || die "no test suite at $REDIS_TESTS"
if [ "$mode" = redis ]; then
  command -v redis-server >/dev/null || die "redis-server is missing"
else
  [ -x "$RUVIO_BIN" ] || die "no ruvio binary at $RUVIO_BIN (build it or set RUVIO_BIN)"
fi

WORK="$(mktemp -d /tmp/redis-suite.XXXXXX)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill -9 "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
# The harness writes under tests/tmp: always run a writable copy.
cp -r "$REDIS_TESTS" "$WORK/suite"
chmod -R u+w "$WORK/suite"
# unit/acl and unit/acl-v2 tag their first server block external:skip because their tests change users (the
# default user included), which would spoil a shared external server for the units after them. Each unit here
# runs against a fresh server of its own, so that first block is run (on both sides); the later blocks need
# start-up configuration (aclfile, user lines) that external mode cannot give and stay skipped.
for f in acl acl-v2; do
  sed -i '1s/^start_server {tags {"acl external:skip"}} {$/start_server {tags {"acl"}} {/' "$WORK/suite/tests/unit/$f.tcl"
done

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_server() {
  local port="$1" dir="$2"
  mkdir -p "$dir"
  if [ "$mode" = redis ]; then
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no >"$dir/server.log" 2>&1 &
  else
    "$RUVIO_BIN" --port "$port" --dir "$dir" >"$dir/server.log" 2>&1 &
  fi
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "the server did not start on port $port (log: $(tail -5 "$dir/server.log"))"
}

stop_server() {
  # A unit can leave a script looping (the busy-script tests): a server that does not stop on SIGTERM within 5 s
  # is killed.
  kill "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

# Names of the tests a run passed, one a line (colour codes and timings removed).
passed_tests() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" | sed -n 's/^\[ok\]: \(.*\) ([0-9]* ms)$/\1/p'
}

failures=0
for unit in "${units[@]}"; do
  port="$(free_port)"
  dir="$WORK/data-${unit//\//-}"
  out="$WORK/out-${unit//\//-}.txt"
  start_server "$port" "$dir"
  (cd "$WORK/suite" && timeout "$UNIT_TIMEOUT" tclsh tests/test_helper.tcl --host 127.0.0.1 --port "$port" "${FLAGS[@]}" --single "unit/$unit") >"$out" 2>&1 || true
  stop_server
  list="$PASSING/${unit//\//-}.txt"
  if [ "$mode" = redis ]; then
    mkdir -p "$PASSING"
    {
      echo "# Tests of unit/$unit that redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') passes, made by:"
      echo "#   bash scripts/redis-suite.sh --record $unit"
      echo "# (redis-server --port P --save '' --appendonly no; tclsh tests/test_helper.tcl --host 127.0.0.1 --port P ${FLAGS[*]} --single unit/$unit)"
      passed_tests "$out" | sort
    } >"$list"
    echo "$unit: redis-server passes $(grep -vc '^#' "$list") tests (written to ${list#"$REPO"/})"
    continue
  fi
  [ -f "$list" ] || die "no passing list for $unit ($list): run --record first"
  # Multiset intersection: a name redis-server passes n times counts at most n times.
  x="$(comm -12 <(passed_tests "$out" | sort) <(grep -v '^#' "$list" | sort) | wc -l)"
  y="$(grep -vc '^#' "$list")"
  line="$unit: Ruvio passes $x of the $y tests redis-server passes"
  base="$(awk -v u="$unit" '$1 == u {print $2}' "$BASELINE")"
  if [ -n "$base" ] && [ "$x" -lt "$base" ]; then
    line="$line (BELOW the baseline $base)"
    [ "$check" = 1 ] && failures=$((failures + 1))
  elif [ -n "$base" ]; then
    line="$line (baseline $base)"
  fi
  echo "$line"
  if [ -n "${REDIS_SUITE_SHOW_MISSING:-}" ]; then
    comm -13 <(passed_tests "$out" | sort) <(grep -v '^#' "$list" | sort) | sed 's/^/    not passed: /'
  fi
done

if [ "$failures" -gt 0 ]; then
  die "$failures unit(s) below the baseline"
fi
