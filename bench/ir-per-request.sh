#!/usr/bin/env bash
# User-space instructions per request of one server under callgrind, for the collection tests of bench/collections.sh
# (issue 33): a figure the machine's load does not move, unlike the CPU time collections.sh reads.
#
# Usage: bench/ir-per-request.sh ruvio|redis [requests-per-test]   (RUVIO_BIN: the ruvio binary; needs valgrind,
# callgrind_control, redis-benchmark, redis-cli)
#
# The server runs under `valgrind --tool=callgrind`; for each test the counters are zeroed (`callgrind_control -z`),
# one `redis-benchmark -t T -P 16 -c 50 -n N -r 100000` runs, and the counters are dumped (`callgrind_control -d`).
# The tests run in collections.sh's order on one server, so the pops take what the pushes left. Printed: the test,
# the instructions (Ir) of the whole server process divided by the requests (lrange_100: by twice the requests, its
# LPUSH fill included; ratelimit: per check of collections.sh's sorted-set rate limiter, a MULTI with ZADD,
# ZREMRANGEBYSCORE and ZCARD, 50 clients for 10 s), and the dump file (for `callgrind_annotate --inclusive=yes FILE`),
# kept in $OUT_DIR. TESTS="ratelimit" measures only that.
# The kernel's share of the CPU (read/write system calls, about one of each per 16 requests) is not in the figure.
# LOCKED=1 also counts the atomic read-modify-write instructions each test executed per request, by object and
# function (bench/locked_instructions.py; callgrind then records every instruction's address, --dump-instr=yes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WHICH=${1:?ruvio or redis}
N=${2:-20000}
RUVIO=${RUVIO_BIN:-target/release/ruvio}
PORT=${PORT:-7441}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/ruvio-ir.XXXXXX)}
TESTS=(${TESTS:-lpush rpush lpop rpop sadd spop zadd zpopmin lrange_100})
mkdir -p "$OUT_DIR/data"
if redis-cli -p "$PORT" ping >/dev/null 2>&1; then echo "port $PORT is taken (set PORT)" >&2; exit 1; fi
OUT="$OUT_DIR/callgrind.$WHICH"
case $WHICH in
  ruvio) server=("$RUVIO" --port "$PORT" --dir "$OUT_DIR/data" --loglevel warning --appendonly no) ;;
  redis) server=(redis-server --port "$PORT" --dir "$OUT_DIR/data" --save '' --appendonly no --loglevel warning) ;;
  *) echo "ruvio or redis" >&2; exit 2 ;;
esac
DUMP_INSTR=(); [ -n "${LOCKED:-}" ] && DUMP_INSTR=(--dump-instr=yes)
valgrind --tool=callgrind "${DUMP_INSTR[@]}" --compress-strings=no --compress-pos=no --callgrind-out-file="$OUT.%p" "${server[@]}" >"$OUT_DIR/$WHICH.log" 2>&1 &
VG=$!
trap 'kill $VG 2>/dev/null || true; wait $VG 2>/dev/null || true' EXIT
for _ in $(seq 600); do [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
totals() { grep -h '^totals:\|^summary:' "$1" | head -1 | awk '{print $2}'; }
printf '%-11s %10s  %s\n' test Ir/request dump
i=0
for t in "${TESTS[@]}"; do
  if [ "$t" = ratelimit ]; then
    # collections.sh's rate limiter, its sets kept at the size they have at full speed (about 65 members, a
    # listpack): under callgrind the server serves some 4,000 checks/s, so 70 users instead of 1000 for a 1 s window.
    RL=${RL_DRIVER:-target/release/examples/rate_limiter}
    [ -x "$RL" ] || { echo "no $RL: cargo build --release -p ruvio-server --example rate_limiter" >&2; exit 1; }
    "$RL" --port "$PORT" --users 70 --seconds 8 >/dev/null
    callgrind_control -z "$VG" >/dev/null
    reqs=$("$RL" --port "$PORT" --users 70 --seconds 10 | tr ' ' '\n' | awk -F= '$1=="checks"{print $2}')
  else
    callgrind_control -z "$VG" >/dev/null
    redis-benchmark -p "$PORT" -n "$N" -c 50 -P 16 -r 100000 -q -t "$t" >/dev/null 2>&1
    reqs=$N; [ "$t" = lrange_100 ] && reqs=$((N * 2))
  fi
  callgrind_control -d "$t" "$VG" >/dev/null
  i=$((i + 1))
  f=$(ls -t "$OUT".$VG.* 2>/dev/null | grep -v '\.[0-9]*-' | head -1)
  # Several threads write one file each (callgrind's default is one file per process; keep it that way).
  ir=$(totals "$f")
  printf '%-11s %10.0f  %s\n' "$t" "$(echo "$ir / $reqs" | bc -l)" "$f"
  [ -z "${LOCKED:-}" ] || python3 bench/locked_instructions.py "$f" "$reqs"
  cp "$f" "$OUT_DIR/$WHICH.$t.out"
done
