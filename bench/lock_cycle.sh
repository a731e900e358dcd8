#!/usr/bin/env bash
# Lock cycle benchmark, Ruvio vs Debian's redis-server, in one run with the same load driver, clients and keys.
#
#   Ruvio:  LEASE key ttl            -> token;  RELEASE key token
#   Redis:  SET key token NX PX ttl  -> OK;     EVALSHA <compare-and-delete> 1 key token
#
# Each of the CLIENTS connections runs cycles on random keys out of KEYS for DURATION seconds, one request in flight
# (the way a worker takes a lock); a cycle whose acquire is refused (key held by another client) counts as a cycle
# of one round trip. Prints cycles/s, p50/p99/p99.9 cycle latency, the server's and the driver's CPU time per
# cycle and the Ruvio/Redis ratios, for a low-contention key space (KEYS) and a contended one (HOT_KEYS). The
# driver is one thread: `driver_cap` is the ratio it could drive at most, at 100% of a core, whatever the server.
#
# Usage: bench/lock_cycle.sh            (env: CLIENTS=50 KEYS=10000 HOT_KEYS=20 DURATION=10 ROUNDS=3)
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

# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
cargo build --release -q -p ruvio
cargo build --release -q -p ruvio-server --example lock_cycle
. bench/lib.sh
bench_init

# Persistence off on both sides: this compares the request path, not the disk.
start_both $RUVIO_PORT $REDIS_PORT --appendonly no

run() { # port mode keys pid -> the driver's fields plus the server's and the driver's CPU time per cycle
  local before after out driver cycles
  before=$(cpu_ticks "$4")
  driver=$(cpu_seconds "$BENCH_WORK/driver.out" "$DRIVER" --port "$1" --mode "$2" --clients "$CLIENTS" --keys "$3" \
    --seconds "$DURATION" --ttl $TTL)
  after=$(cpu_ticks "$4")
  out=$(cat "$BENCH_WORK/driver.out")
  cycles=$(field "$out" cycles)
  echo "$out cpu_us=$(us_per_op "$before" "$after" "$cycles") driver_us=$(echo "$driver * 1000000 / $cycles" | bc -l)"
}

# Runs alternate between the servers, ROUNDS times, and each figure is the median of its rounds: on a shared
# machine a single 10 s run of one server can land on a busy moment.
ROUNDS=${ROUNDS:-3}

echo "lock cycle: $CLIENTS clients, ${DURATION}s per run, median of $ROUNDS alternating runs, ttl ${TTL} ms; ruvio $($RUVIO --version | awk '{print $2}') vs redis $(redis-server --version | awk '{print $3}' | cut -d= -f2)"
printf '%-8s %-6s %12s %10s %8s %8s %9s %8s %9s %10s\n' keys server cycles_per_s refused p50_us p99_us p999_us cpu_us \
  driver_us driver_cap
for K in $KEYS $HOT_KEYS; do
  runs_ruvio=(); runs_redis=()
  for _ in $(seq "$ROUNDS"); do
    runs_ruvio+=("$(run $RUVIO_PORT ruvio "$K" "$RUVIO_PID")")
    runs_redis+=("$(run $REDIS_PORT redis "$K" "$REDIS_PID")")
  done
  declare -A med=()
  for name in ruvio redis; do
    declare -n runs="runs_$name"
    for f in cycles_per_sec refused p50_us p99_us p999_us cpu_us driver_us; do
      med[$name.$f]=$(for out in "${runs[@]}"; do field "$out" $f; done | tr '\n' ' ' | median)
    done
    unset -n runs
    cap=""
    [ "$name" = redis ] && cap=$(printf '%.2f' "$(echo "1000000 / ${med[redis.driver_us]} / ${med[redis.cycles_per_sec]}" | bc -l)")
    printf '%-8s %-6s %12s %10s %8s %8s %9s %8.1f %9.1f %10s\n' "$K" "$name" "${med[$name.cycles_per_sec]}" "${med[$name.refused]}" \
      "${med[$name.p50_us]}" "${med[$name.p99_us]}" "${med[$name.p999_us]}" "${med[$name.cpu_us]}" "${med[$name.driver_us]}" "$cap"
  done
  printf '%-8s %-6s %12.2f %10s %8s %8.2f %9s\n' "$K" "ratio" \
    "$(echo "${med[ruvio.cycles_per_sec]} / ${med[redis.cycles_per_sec]}" | bc -l)" "" "" \
    "$(echo "${med[ruvio.p99_us]} / ${med[redis.p99_us]}" | bc -l)" ""
  unset med
done
echo "(ratio: throughput ruvio/redis, higher is better; p99 ruvio/redis, lower is better;"
echo " cpu_us, driver_us: the server's and the load driver's CPU time, user + system, per cycle;"
echo " driver_cap: the ruvio/redis ratio the one-threaded driver at 100% of a core would allow)"
