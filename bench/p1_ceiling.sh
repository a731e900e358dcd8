#!/usr/bin/env bash
# How fast could any server be at pipeline depth 1 on this machine? Runs redis-benchmark (SET, GET, INCR, MSET,
# 50 clients, pipeline 1) alternately against ruvio, Debian's redis-server and a server that does no work at all
# (crates/ruvio-server/examples/null_server.rs: one epoll loop, Ruvio's parser, a canned reply per command), and
# prints each one's median requests/s and its ratio to redis-server. Then the same for the lock cycle of
# bench/lock_cycle.sh (LEASE + RELEASE against ruvio and the null server, SET NX PX + EVALSHA against redis-server,
# 50 clients, 10000 keys). With the load generator on the same cores, null/redis is the highest ratio any request
# path can reach here. For redis-benchmark's runs against redis-server it also prints the load generator's own CPU
# time per request (user + system, bash's `time`) and the ratio that one client thread at 100% of a core would
# allow: redis-benchmark is single-threaded, so no server can be served faster than that.
#
# Usage: bench/p1_ceiling.sh [requests-per-run]   (env: ROUNDS=5; needs redis-server, redis-benchmark, cargo)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
ROUNDS=${ROUNDS:-5}
RUVIO=${RUVIO_BIN:-target/release/ruvio}
RUVIO_PORT=7431; REDIS_PORT=7432; NULL_PORT=7433
# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
cargo build --release -q -p ruvio
cargo build --release -q -p ruvio-server --example null_server --example lock_cycle
NULL=${CARGO_TARGET_DIR:-target}/release/examples/null_server
LOCK_DRIVER=${CARGO_TARGET_DIR:-target}/release/examples/lock_cycle
. bench/lib.sh
bench_init
start_both $RUVIO_PORT $REDIS_PORT --appendonly no
"$NULL" $NULL_PORT &
BENCH_PIDS+=($!)
wait_ready $NULL_PORT

rps() { # port test; appends the client's CPU µs per request to $BENCH_WORK/client-PORT-TEST
  local secs
  secs=$(cpu_seconds "$BENCH_WORK/out" redis-benchmark -p "$1" -t "$2" -n "$N" -c 50 -P 1 -r 100000 -d 3 --csv)
  printf '%.2f ' "$(echo "$secs * 1000000 / $N" | bc -l)" >>"$BENCH_WORK/client-$1-$2"
  awk -F, 'NR>1 {gsub(/"/,""); print $2}' "$BENCH_WORK/out"
}
# medians_of_rounds "command for ruvio" "for redis" "for null": ROUNDS alternating runs -> "ruvio redis null" medians.
medians_of_rounds() {
  local a="" b="" c=""
  for _ in $(seq "$ROUNDS"); do a="$a $($1)"; b="$b $($2)"; c="$c $($3)"; done
  echo "$(echo $a | median) $(echo $b | median) $(echo $c | median)"
}
row() { # name ruvio redis null [client_us]
  local client=${5:-} cap=""
  [ -n "$client" ] && cap=$(echo "1000000 / $client / $3" | bc -l)
  printf '%-6s %12.0f %12.0f %12.0f %12.2f %12.2f %12s %12s\n' "$1" "$2" "$3" "$4" "$(echo "$2 / $3" | bc -l)" \
    "$(echo "$4 / $3" | bc -l)" "$client" "${cap:+$(printf '%.2f' "$cap")}"
}

echo "pipeline 1, 50 clients, -n $N, median of $ROUNDS alternating rounds; redis-benchmark on the same $(nproc) cores"
printf '%-6s %12s %12s %12s %12s %12s %12s %12s\n' test ruvio redis null ruvio/redis null/redis client_us client_cap
for t in set get incr mset; do
  row "$t" $(medians_of_rounds "rps $RUVIO_PORT $t" "rps $REDIS_PORT $t" "rps $NULL_PORT $t") \
    "$(median <"$BENCH_WORK/client-$REDIS_PORT-$t")"
done

row lock $(medians_of_rounds "lock_cycles_per_sec $RUVIO_PORT ruvio 50 3" "lock_cycles_per_sec $REDIS_PORT redis 50 3" \
  "lock_cycles_per_sec $NULL_PORT ruvio 50 3")
echo "(lock: acquire+release cycles/s, 3 s runs; the null server answers LEASE and RELEASE with :1 and stores nothing)"
echo "(client_us: redis-benchmark's own CPU per request against redis-server, median; client_cap: the ruvio/redis ratio"
echo " one redis-benchmark thread at 100% of a core would allow, 1e6 / client_us / redis)"
