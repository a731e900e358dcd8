#!/usr/bin/env bash
# Lock cycle benchmark, Ruvio vs Debian's redis-server, in one run with the same load driver, clients and keys.
#
#   Ruvio:  LEASE key ttl            -> token;  RELEASE key token
#   Redis:  SET key token NX PX ttl  -> OK;     EVALSHA <compare-and-delete> 1 key token
#
# Each of the CLIENTS connections runs cycles on random keys out of KEYS for DURATION seconds, one request in flight
# (the way a worker takes a lock); a cycle whose acquire is refused (key held by another client) counts as a cycle
# of one round trip. Prints cycles/s, p50/p99/p99.9 cycle latency and the Ruvio/Redis ratios, for a low-contention
# key space (KEYS) and a contended one (HOT_KEYS).
#
# Usage: bench/lock_cycle.sh            (env: CLIENTS=50 KEYS=10000 HOT_KEYS=20 DURATION=10)
# Needs redis-server and cargo; builds target/release/ruvio and the driver (crates/ruvio-server/examples/lock_cycle.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-10000}
HOT_KEYS=${HOT_KEYS:-20}
DURATION=${DURATION:-10}
TTL=10000
RUVIO=${RUVIO_BIN:-target/release/ruvio}
DRIVER=target/release/examples/lock_cycle
RUVIO_PORT=7421
REDIS_PORT=7422

cargo build --release -q -p ruvio
cargo build --release -q -p ruvio-server --example lock_cycle
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Persistence off on both sides: this compares the request path, not the disk.
"$RUVIO" --port $RUVIO_PORT --dir "$work/ruvio" --appendonly no --loglevel warning >"$work/ruvio.log" 2>&1 &
pids+=($!)
redis-server --port $REDIS_PORT --dir "$work" --save '' --appendonly no --loglevel warning >"$work/redis.log" 2>&1 &
pids+=($!)
for p in $RUVIO_PORT $REDIS_PORT; do
  for _ in $(seq 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
done

field() { echo "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1==k {print $2}'; }
run() { # port mode keys
  "$DRIVER" --port "$1" --mode "$2" --clients "$CLIENTS" --keys "$3" --seconds "$DURATION" --ttl $TTL
}

echo "lock cycle: $CLIENTS clients, ${DURATION}s per run, ttl ${TTL} ms; ruvio $($RUVIO --version | awk '{print $2}') vs redis $(redis-server --version | awk '{print $3}' | cut -d= -f2)"
printf '%-8s %-6s %12s %10s %8s %8s %9s\n' keys server cycles_per_s refused p50_us p99_us p999_us
for K in $KEYS $HOT_KEYS; do
  r=$(run $RUVIO_PORT ruvio "$K")
  d=$(run $REDIS_PORT redis "$K")
  for pair in "ruvio:$r" "redis:$d"; do
    name=${pair%%:*}; out=${pair#*:}
    printf '%-8s %-6s %12s %10s %8s %8s %9s\n' "$K" "$name" "$(field "$out" cycles_per_sec)" "$(field "$out" refused)" \
      "$(field "$out" p50_us)" "$(field "$out" p99_us)" "$(field "$out" p999_us)"
  done
  printf '%-8s %-6s %12.2f %10s %8s %8.2f %9s\n' "$K" "ratio" \
    "$(echo "$(field "$r" cycles_per_sec) / $(field "$d" cycles_per_sec)" | bc -l)" "" "" \
    "$(echo "$(field "$r" p99_us) / $(field "$d" p99_us)" | bc -l)" ""
done
echo "(ratio: throughput ruvio/redis, higher is better; p99 ruvio/redis, lower is better)"
