#!/usr/bin/env bash
# Throughput with persistence on: ruvio vs Debian's redis-server in the same run, both with appendonly yes and the
# same appendfsync, data folders on the same disk. For appendfsync always and everysec, with 1 and 50 clients:
#   - SET (redis-benchmark, no pipelining),
#   - lock acquire+release cycles with the driver of bench/lock_cycle.sh (crates/ruvio-server/examples/lock_cycle.rs,
#     one event loop, one request in flight per client, random keys out of 10000): LEASE/RELEASE on ruvio, the
#     Redis idiom SET NX PX + compare-and-delete EVALSHA on redis-server.
# Prints ops/s for each and the ruvio/redis ratio.
#
# Usage: bench/persistence.sh [SET-requests-per-run] [lock-seconds]   (needs redis-server, redis-benchmark, redis-cli)
#   REPEAT=N (runs per figure, default 3), POLICIES="always everysec", CLIENT_COUNTS="1 50" narrow or widen a run,
#   e.g. REPEAT=9 POLICIES=always CLIENT_COUNTS=50 bench/persistence.sh 60000 3 for the issue's target alone.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
LOCK_SECS=${2:-5}
RUVIO=${RUVIO_BIN:-target/release/ruvio}
RUVIO_PORT=${RUVIO_PORT:-7421}
REDIS_PORT=${REDIS_PORT:-7422}
# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
[ -x "$RUVIO" ] || cargo build --release -p ruvio
cargo build --release -q -p ruvio-server --example lock_cycle
LOCK_DRIVER=${CARGO_TARGET_DIR:-target}/release/examples/lock_cycle
. bench/lib.sh
bench_init

set_rps() { # port clients requests
  redis-benchmark -p "$1" -t set -n "$3" -c "$2" -r 100000 -d 16 --csv 2>/dev/null | awk -F, 'NR>1 {gsub(/"/,""); print $2}'
}
# Each figure is the median of REPEAT runs, ruvio and redis-server alternating, so a busy moment on a shared
# machine hits both sides alike.
REPEAT=${REPEAT:-3}
pair() { # command-for-ruvio command-for-redis -> "ruvio_median redis_median"
  local a="" b=""
  for _ in $(seq "$REPEAT"); do a="$a $($1)"; b="$b $($2)"; done
  echo "$(echo $a | median) $(echo $b | median)"
}

echo "ruvio $($RUVIO --version | awk '{print $2}') vs redis-server $(redis-server --version | awk '{print $3}'); disk: $(df -P "$BENCH_WORK" | awk 'NR==2 {print $1}')"
echo "figures: ops/s, median of $REPEAT alternating runs; acquire+release counts one acquire and one release as one op"
printf '%-10s %-15s %7s %12s %12s %7s\n' fsync test clients ruvio_ops redis_ops ratio
for fsync in ${POLICIES:-always everysec}; do
  start_both $RUVIO_PORT $REDIS_PORT --appendonly yes --appendfsync "$fsync"
  for c in ${CLIENT_COUNTS:-1 50}; do
    n=$N
    # One client under always is one fsync per write: keep that run short.
    [ "$fsync" = always ] && [ "$c" = 1 ] && n=$(( N / 20 ))
    read -r r s < <(pair "set_rps $RUVIO_PORT $c $n" "set_rps $REDIS_PORT $c $n")
    printf '%-10s %-15s %7s %12.0f %12.0f %7.2f\n' "$fsync" SET "$c" "$r" "$s" "$(echo "$r / $s" | bc -l)"
    read -r r s < <(pair "lock_cycles_per_sec $RUVIO_PORT ruvio $c $LOCK_SECS" "lock_cycles_per_sec $REDIS_PORT redis $c $LOCK_SECS")
    printf '%-10s %-15s %7s %12.0f %12.0f %7.2f\n' "$fsync" acquire+release "$c" "$r" "$s" "$(echo "$r / $s" | bc -l)"
  done
  stop_servers
done
