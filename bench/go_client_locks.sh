#!/usr/bin/env bash
# Lock cycles through the Go client (clients/go) against Ruvio, and through go-redis v9 doing the Redis lock
# pattern against Debian's redis-server, in one run, with the same driver (bench/go_client_locks/main.go):
#
#   Ruvio:  client.Lease(key, ttl) -> token;     client.Release(key, token)
#   Redis:  SET key token NX PX ttl -> OK;       EVALSHA <compare-and-delete> 1 key token
#
# CLIENTS goroutines share one client (pool of CLIENTS connections) and run cycles on random keys out of KEYS for
# DURATION seconds, one request in flight each; a refused acquire counts as a cycle of one round trip. Runs
# alternate between the servers ROUNDS times; each figure is the median. Prints cycles/s, p50/p99 cycle latency,
# the server's CPU time per cycle, the driver's (client's) CPU time per cycle, and the Ruvio/Redis ratios.
#
# Usage: RUVIO_BIN=target/release/ruvio bench/go_client_locks.sh    (env: CLIENTS=50 KEYS=10000 DURATION=10 ROUNDS=3)
# Needs go (>= 1.21; the driver's module fetches go-redis from the Go module proxy) and redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-10000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
TTL=10s
RUVIO=${RUVIO_BIN:-target/release/ruvio}
RUVIO_PORT=${RUVIO_PORT:-7431}
REDIS_PORT=${REDIS_PORT:-7432}
[ -x "$RUVIO" ] || { echo "no ruvio binary at $RUVIO (set RUVIO_BIN or build target/release/ruvio)" >&2; exit 1; }
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi

. bench/lib.sh
bench_init
DRIVER="$BENCH_WORK/go_client_locks"
(cd bench/go_client_locks && go build -o "$DRIVER" .)

# Persistence off on both sides: this compares the request path and the clients, not the disk.
start_both $RUVIO_PORT $REDIS_PORT --appendonly no

run() { # port mode pid -> the driver's fields plus server and driver CPU time per cycle
  local before after out driver cycles
  before=$(cpu_ticks "$3")
  driver=$(cpu_seconds "$BENCH_WORK/driver.out" "$DRIVER" --addr "127.0.0.1:$1" --mode "$2" --clients "$CLIENTS" \
    --keys "$KEYS" --seconds "$DURATION" --ttl $TTL)
  after=$(cpu_ticks "$3")
  out=$(cat "$BENCH_WORK/driver.out")
  cycles=$(field "$out" cycles)
  echo "$out cpu_us=$(us_per_op "$before" "$after" "$cycles") driver_us=$(echo "$driver * 1000000 / $cycles" | bc -l)"
}

echo "go client lock cycle: $CLIENTS goroutines, $KEYS keys, ${DURATION}s per run, median of $ROUNDS alternating runs;" \
  "ruvio $($RUVIO --version | awk '{print $2}') + clients/go vs redis $(redis-server --version | awk '{print $3}' | cut -d= -f2) + go-redis" \
  "$(awk '/redis\/go-redis/ {print $2}' bench/go_client_locks/go.mod | head -1); $(go env GOVERSION)"
runs_ruvio=(); runs_redis=()
for _ in $(seq "$ROUNDS"); do
  runs_ruvio+=("$(run $RUVIO_PORT ruvio "$RUVIO_PID")")
  runs_redis+=("$(run $REDIS_PORT redis "$REDIS_PID")")
done
declare -A med=()
printf '%-14s %12s %9s %8s %8s %9s %10s\n' side cycles_per_s refused p50_us p99_us cpu_us driver_us
for name in ruvio redis; do
  declare -n runs="runs_$name"
  for f in cycles_per_sec refused p50_us p99_us cpu_us driver_us; do
    med[$name.$f]=$(for out in "${runs[@]}"; do field "$out" $f; done | tr '\n' ' ' | median)
  done
  unset -n runs
  label=$([ "$name" = ruvio ] && echo "ruvio+go" || echo "redis+go-redis")
  printf '%-14s %12s %9s %8s %8s %9.1f %10.1f\n' "$label" "${med[$name.cycles_per_sec]}" "${med[$name.refused]}" \
    "${med[$name.p50_us]}" "${med[$name.p99_us]}" "${med[$name.cpu_us]}" "${med[$name.driver_us]}"
done
printf '%-14s %12.2f %9s %8.2f %8.2f %9.2f %10.2f\n' ratio \
  "$(echo "${med[ruvio.cycles_per_sec]} / ${med[redis.cycles_per_sec]}" | bc -l)" "" \
  "$(echo "${med[ruvio.p50_us]} / ${med[redis.p50_us]}" | bc -l)" \
  "$(echo "${med[ruvio.p99_us]} / ${med[redis.p99_us]}" | bc -l)" \
  "$(echo "${med[ruvio.cpu_us]} / ${med[redis.cpu_us]}" | bc -l)" \
  "$(echo "${med[ruvio.driver_us]} / ${med[redis.driver_us]}" | bc -l)"
echo "(ratio: ruvio/redis; throughput higher is better, latency and CPU lower is better;"
echo " cpu_us: the server's CPU time per cycle; driver_us: the Go driver's, i.e. the client's, CPU time per cycle)"
