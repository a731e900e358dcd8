#!/usr/bin/env bash
# Lock cycle over TLS vs plain TCP, on Ruvio and on Debian's redis-server, in one run with the same driver
# (crates/ruvio-server/examples/lock_cycle.rs, `--tls-dir`: rustls, client certificate presented):
#
#   Ruvio:  LEASE key ttl -> token; RELEASE key token                     (port, then tls-port)
#   Redis:  SET key token NX PX ttl -> OK; EVALSHA <compare-and-delete>   (port, then tls-port)
#
# Both servers listen on a plain port and a TLS port at once (tls-auth-clients yes, certificates made fresh by
# scripts/gen-test-certs.sh: P-256 keys, TLS 1.3), persistence off (this compares the request path, not the disk).
# Each of CLIENTS connections runs cycles on random keys out of KEYS for DURATION seconds, one request in flight; the
# four runs alternate, ROUNDS times, and each figure is the median of its rounds. Prints cycles/s and p50/p99 per
# run and, per server, the TLS/plain ratios (the goal for Ruvio: TLS cycle time within 1.3x of plain TCP). Each
# connection makes one handshake at its start (a lock client keeps its connection): CLIENTS handshakes in a run of
# DURATION seconds, latencies are per cycle.
#
# Usage: bench/tls.sh        (env: CLIENTS=50 KEYS=10000 DURATION=10 ROUNDS=3, RUVIO_BIN)
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-10000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
TTL=10000
RUVIO=${RUVIO_BIN:-target/release/ruvio}
DRIVER=target/release/examples/lock_cycle
RUVIO_PORT=7431 RUVIO_TLS=7432 REDIS_PORT=7433 REDIS_TLS=7434

# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. scripts/lib/toolchains.sh && ruvio_cargo_source || exit 1
[ -n "${RUVIO_BIN:-}" ] || cargo build --release -q -p ruvio
cargo build --release -q -p ruvio-server --example lock_cycle
. bench/lib.sh
bench_init
CERTS="$BENCH_WORK/certs"
bash scripts/gen-test-certs.sh "$CERTS"
tls=(--tls-cert-file "$CERTS/server.crt" --tls-key-file "$CERTS/server.key" --tls-ca-cert-file "$CERTS/ca.crt")
start_ruvio $RUVIO_PORT --appendonly no --tls-port $RUVIO_TLS "${tls[@]}"; RUVIO_PID=$LAST_PID
start_redis $REDIS_PORT --appendonly no --tls-port $REDIS_TLS "${tls[@]}"; REDIS_PID=$LAST_PID
wait_ready $RUVIO_PORT $REDIS_PORT

run() { # port mode [tls] -> the driver's fields
  local extra=()
  [ "${3:-}" = tls ] && extra=(--tls-dir "$CERTS")
  "$DRIVER" --port "$1" --mode "$2" --clients "$CLIENTS" --keys "$KEYS" --seconds "$DURATION" --ttl $TTL "${extra[@]}"
}

echo "lock cycle, TLS vs plain TCP: $CLIENTS clients, $KEYS keys, ${DURATION}s per run, median of $ROUNDS alternating runs;"
echo "ruvio $($RUVIO --version | awk '{print $2}') vs redis $(redis-server --version | awk '{print $3}' | cut -d= -f2); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A runs=()
for _ in $(seq "$ROUNDS"); do
  runs[ruvio.plain]+="$(run $RUVIO_PORT ruvio)"$'\n'
  runs[ruvio.tls]+="$(run $RUVIO_TLS ruvio tls)"$'\n'
  runs[redis.plain]+="$(run $REDIS_PORT redis)"$'\n'
  runs[redis.tls]+="$(run $REDIS_TLS redis tls)"$'\n'
done
declare -A med=()
printf '%-6s %-6s %12s %8s %8s\n' server link cycles_per_s p50_us p99_us
for s in ruvio redis; do
  for l in plain tls; do
    for f in cycles_per_sec p50_us p99_us; do
      med[$s.$l.$f]=$(echo "${runs[$s.$l]}" | while read -r line; do if [ -n "$line" ]; then field "$line" $f; fi; done | tr '\n' ' ' | median)
    done
    printf '%-6s %-6s %12s %8s %8s\n' $s $l "${med[$s.$l.cycles_per_sec]}" "${med[$s.$l.p50_us]}" "${med[$s.$l.p99_us]}"
  done
done
echo
printf '%-6s %22s %14s %14s\n' server "cycle_time tls/plain" "p50 tls/plain" "p99 tls/plain"
for s in ruvio redis; do
  printf '%-6s %22.2f %14.2f %14.2f\n' $s \
    "$(echo "${med[$s.plain.cycles_per_sec]} / ${med[$s.tls.cycles_per_sec]}" | bc -l)" \
    "$(echo "${med[$s.tls.p50_us]} / ${med[$s.plain.p50_us]}" | bc -l)" \
    "$(echo "${med[$s.tls.p99_us]} / ${med[$s.plain.p99_us]}" | bc -l)"
done
printf '%-6s %22.2f\n' "ruvio/redis over TLS (throughput)" "$(echo "${med[ruvio.tls.cycles_per_sec]} / ${med[redis.tls.cycles_per_sec]}" | bc -l)"
echo "(cycle_time tls/plain = plain cycles/s over TLS cycles/s: 1.00 means TLS costs nothing; goal for Ruvio <= 1.3)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
