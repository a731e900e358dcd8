#!/usr/bin/env bash
# Restart time with 1M keys, ruvio vs Debian's redis-server on the same data and disk, and the worst client
# latency while ruvio compacts those 1M keys.
#
#   1. 1M SETs ("key:%07d" -> 16 bytes, loaded with redis-cli --pipe) into each server (appendonly yes,
#      appendfsync everysec; redis-server with aof-use-rdb-preamble no so its AOF is commands, like ruvio's log).
#   2. Restart both from the command log: time from process start until a GET is answered (not -LOADING).
#   3. Compact: ruvio BGREWRITEAOF (snapshot), redis-server BGREWRITEAOF with the RDB preamble; measure ruvio's
#      worst SET latency during its rewrite (crates/ruvio/examples/latency_probe.rs).
#   4. Restart both from the snapshot and time it again.
#
# Usage: bench/restart.sh [keys]   (needs redis-server, redis-cli)
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${1:-1000000}
RUVIO=${RUVIO_BIN:-target/release/ruvio}
RUVIO_PORT=${RUVIO_PORT:-7431}
REDIS_PORT=${REDIS_PORT:-7432}
# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
[ -x "$RUVIO" ] || cargo build --release -p ruvio
cargo build --release -q -p ruvio --example latency_probe
PROBE=${CARGO_TARGET_DIR:-target}/release/examples/latency_probe
work=$(mktemp -d "${BENCH_DIR:-/tmp}/ruvio-bench-restart.XXXXXX")
ruvio_pid=""; redis_pid=""
cleanup() {
  for p in $ruvio_pid $redis_pid; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/ruvio" "$work/redis"

start_ruvio() { "$RUVIO" --port $RUVIO_PORT --dir "$work/ruvio" --appendfsync everysec --loglevel warning >>"$work/ruvio.log" 2>&1 & ruvio_pid=$!; }
start_redis() {
  redis-server --port $REDIS_PORT --dir "$work/redis" --save '' --appendonly yes --appendfsync everysec \
    --aof-use-rdb-preamble "$1" --loglevel warning >>"$work/redis.log" 2>&1 & redis_pid=$!
}
# Seconds from now until the server answers a GET (LOADING and refused connections count as not ready).
time_until_ready() { # port start_ns
  while :; do
    out=$(redis-cli -p "$1" exists key:0000000 2>&1 || true)
    case "$out" in *LOADING*|*refused*|"") sleep 0.005 ;; *) break ;; esac
  done
  echo "scale=3; ($(date +%s%N) - $2) / 1000000000" | bc -l
}
wait_ready() { time_until_ready "$1" "$(date +%s%N)" >/dev/null; }
stop() { # pid
  kill "$1"; wait "$1" 2>/dev/null || true
}

python3 - "$work/load.txt" "$KEYS" <<'PY'
import sys
n = int(sys.argv[2])
with open(sys.argv[1], "wb") as f:
    for i in range(n):
        k = b"key:%07d" % i
        f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$16\r\nvalue-%010d\r\n" % (len(k), k, i))
PY

start_ruvio; start_redis no; wait_ready $RUVIO_PORT; wait_ready $REDIS_PORT
redis-cli -p $RUVIO_PORT --pipe <"$work/load.txt" >/dev/null
redis-cli -p $REDIS_PORT --pipe <"$work/load.txt" >/dev/null
sleep 1.5
stop $ruvio_pid; stop $redis_pid
echo "ruvio $($RUVIO --version | awk '{print $2}') vs redis-server $(redis-server --version | awk '{print $3}'), $KEYS keys"
echo "log sizes: ruvio $(du -sb "$work/ruvio" | cut -f1) bytes, redis $(du -sb "$work/redis" | cut -f1) bytes"

t0=$(date +%s%N); start_ruvio; r=$(time_until_ready $RUVIO_PORT "$t0")
t0=$(date +%s%N); start_redis no; s=$(time_until_ready $REDIS_PORT "$t0")
printf 'restart from the command log:  ruvio %6.3f s   redis-server %6.3f s   ratio (redis/ruvio) %.2f\n' "$r" "$s" "$(echo "$s / $r" | bc -l)"
[ "$(redis-cli -p $RUVIO_PORT dbsize)" = "$KEYS" ] || { echo "ruvio lost keys: $(redis-cli -p $RUVIO_PORT dbsize)"; exit 1; }

# Compaction under a probing client.
"$PROBE" $RUVIO_PORT 6 >"$work/probe.txt" &
probe=$!
sleep 0.5
redis-cli -p $RUVIO_PORT bgrewriteaof >/dev/null
while [ "$(redis-cli -p $RUVIO_PORT info persistence | tr -d '\r' | awk -F: '$1=="aof_rewrite_in_progress" {print $2}')" = 1 ]; do sleep 0.05; done
wait $probe
read -r max p99 over count <"$work/probe.txt"
rewrite_ms=$(redis-cli -p $RUVIO_PORT info persistence | tr -d '\r' | awk -F: '$1=="aof_last_rewrite_time_ms" {print $2}')
printf 'ruvio rewrite of %s keys: %s ms; client SET latency meanwhile: max %s ms, p99 %s ms, %s of %s over 50 ms\n' "$KEYS" "$rewrite_ms" "$max" "$p99" "$over" "$count"
# The probe's writes went to the new log file; compact once more so both servers restart from a snapshot alone.
redis-cli -p $RUVIO_PORT bgrewriteaof >/dev/null
while [ "$(redis-cli -p $RUVIO_PORT info persistence | tr -d '\r' | awk -F: '$1=="aof_rewrite_in_progress" {print $2}')" = 1 ]; do sleep 0.05; done
keys_before=$(redis-cli -p $RUVIO_PORT dbsize)
redis-cli -p $REDIS_PORT config set aof-use-rdb-preamble yes >/dev/null
redis-cli -p $REDIS_PORT bgrewriteaof >/dev/null
while [ "$(redis-cli -p $REDIS_PORT info persistence | tr -d '\r' | awk -F: '$1=="aof_rewrite_in_progress" {print $2}')" = 1 ]; do sleep 0.05; done
sleep 0.5
stop $ruvio_pid; stop $redis_pid

t0=$(date +%s%N); start_ruvio; r=$(time_until_ready $RUVIO_PORT "$t0")
t0=$(date +%s%N); start_redis yes; s=$(time_until_ready $REDIS_PORT "$t0")
printf 'restart from the snapshot:     ruvio %6.3f s   redis-server %6.3f s   ratio (redis/ruvio) %.2f\n' "$r" "$s" "$(echo "$s / $r" | bc -l)"
[ "$(redis-cli -p $RUVIO_PORT dbsize)" = "$keys_before" ] || { echo "ruvio lost keys after the rewrite"; exit 1; }
