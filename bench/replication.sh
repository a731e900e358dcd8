#!/usr/bin/env bash
# Durable lock grants, Ruvio vs the best Redis 7.0 can do for the same guarantee, in one run, same driver and disk.
#
#   Ruvio: primary + 1 replica, both appendonly yes + appendfsync always; clients send CLIENT DURABILITY REPLICAS 1,
#          then LEASE / RELEASE (each answered once the replica fsynced it).
#   Redis: primary + 1 replica, both appendonly yes + appendfsync always; SET NX PX + WAIT 1 0, compare-and-delete
#          EVALSHA + WAIT 1 0. (Redis 7.0 has no WAITAOF: WAIT only says the replica *received* the write, not that
#          it fsynced it, so Redis's side gives a weaker guarantee than Ruvio's here.)
#
# Prints cycles/s, p50/p99 of one cycle (grant + release), server CPU per cycle (primary + replica), for 1 and 50
# clients, the ratios, and the floor the target is measured against: one fsync on this disk (dd oflag=dsync) plus one
# loopback round trip (a non-durable LEASE on an idle Ruvio). Then asynchronous replication under
# `redis-benchmark -t set -P 16`: how far the replica lags (in records) while the primary is loaded.
#
# Usage: bench/replication.sh     (env: DURATION=10 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
RUVIO=${RUVIO_BIN:-target/release/ruvio}
DRIVER=target/release/examples/lock_cycle
RP=7431; RR=7432; DP=7433; DR=7434

# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
cargo build --release -q -p ruvio
cargo build --release -q -p ruvio-server --example lock_cycle
. bench/lib.sh
bench_init

start_ruvio $RP --appendonly yes --appendfsync always; RUVIO_P=$LAST_PID
start_ruvio $RR --appendonly yes --appendfsync always --replicaof "127.0.0.1 $RP"; RUVIO_R=$LAST_PID
start_redis $DP --appendonly yes --appendfsync always; REDIS_P=$LAST_PID
start_redis $DR --appendonly yes --appendfsync always --replicaof 127.0.0.1 $DP; REDIS_R=$LAST_PID
wait_ready $RP $RR $DP $DR
for p in $RR $DR; do
  for _ in $(seq 100); do redis-cli -p $p info replication | grep -q 'master_link_status:up' && break; sleep 0.1; done
done

run() { # port mode clients pid pid -> driver fields + cpu_us (both servers) per cycle
  local b1 b2 a1 a2 out cycles
  b1=$(cpu_ticks "$4"); b2=$(cpu_ticks "$5")
  "$DRIVER" --port "$1" --mode "$2" --clients "$3" --keys 10000 --seconds "$DURATION" --ttl 10000 --durable 1 >"$BENCH_WORK/d.out"
  a1=$(cpu_ticks "$4"); a2=$(cpu_ticks "$5")
  out=$(cat "$BENCH_WORK/d.out"); cycles=$(field "$out" cycles)
  echo "$out cpu_us=$(us_per_op "$((b1 + b2))" "$((a1 + a2))" "$cycles")"
}

# The floor: one fsync of a small write on this disk, and one round trip to an idle server.
dd if=/dev/zero of="$BENCH_WORK/dsync" bs=4k count=500 oflag=dsync 2>"$BENCH_WORK/dd.err"
fsync_us=$(awk '/copied/ {for (i=1;i<=NF;i++) if ($i ~ /^s,?$/) s=$(i-1); print s * 1000000 / 500}' "$BENCH_WORK/dd.err" | tr -d ',')
rtt_us=$("$DRIVER" --port $RP --mode ruvio --clients 1 --keys 10000 --seconds 2 --ttl 10000 | tr ' ' '\n' | awk -F= '$1=="p50_us" {print $2 / 2}')
echo "durable lock cycle (grant + release, each durable on 1 replica), ${DURATION}s runs, median of $ROUNDS alternating rounds"
echo "floor: fsync ${fsync_us} us (dd oflag=dsync, 4 KB) + loopback round trip ${rtt_us} us (half a LEASE+RELEASE cycle, idle)"
printf '%-8s %-6s %12s %8s %8s %9s\n' clients server cycles_per_s p50_us p99_us cpu_us
for C in 1 50; do
  runs_ruvio=(); runs_redis=()
  for _ in $(seq "$ROUNDS"); do
    runs_ruvio+=("$(run $RP ruvio $C $RUVIO_P $RUVIO_R)")
    runs_redis+=("$(run $DP redis $C $REDIS_P $REDIS_R)")
  done
  declare -A med=()
  for name in ruvio redis; do
    declare -n runs="runs_$name"
    for f in cycles_per_sec p50_us p99_us cpu_us; do
      med[$name.$f]=$(for out in "${runs[@]}"; do field "$out" $f; done | tr '\n' ' ' | median)
    done
    unset -n runs
    printf '%-8s %-6s %12s %8s %8s %9.1f\n' $C $name "${med[$name.cycles_per_sec]}" "${med[$name.p50_us]}" "${med[$name.p99_us]}" "${med[$name.cpu_us]}"
  done
  printf '%-8s %-6s %12.2f %8.2f %8.2f\n' $C ratio "$(echo "${med[ruvio.cycles_per_sec]} / ${med[redis.cycles_per_sec]}" | bc -l)" \
    "$(echo "${med[ruvio.p50_us]} / ${med[redis.p50_us]}" | bc -l)" "$(echo "${med[ruvio.p99_us]} / ${med[redis.p99_us]}" | bc -l)"
  # A cycle is two durable writes: the target compares one of them (p50 / 2) with the floor.
  printf '%-8s %-6s %12s %8.2f   (ruvio p50 per durable write / (fsync + round trip); target <= 1.5)\n' $C floor "" \
    "$(echo "${med[ruvio.p50_us]} / 2 / ($fsync_us + $rtt_us)" | bc -l)"
  unset med
done
echo "(ratio: throughput ruvio/redis, higher is better; p50/p99 ruvio/redis, lower is better; cpu_us: primary + replica CPU per cycle)"

# Asynchronous replication keeping up with a pipelined load on the primary.
stop_servers
start_ruvio $RP --appendonly no; P=$LAST_PID
start_ruvio $RR --appendonly no --replicaof "127.0.0.1 $RP"
wait_ready $RP $RR
for _ in $(seq 100); do redis-cli -p $RR info replication | grep -q 'master_link_status:up' && break; sleep 0.1; done
redis-benchmark -p $RP -t set -P 16 -n 2000000 -r 100000 -q >"$BENCH_WORK/rb.out" 2>&1 &
RB=$!
max_lag=0; samples=0
while kill -0 $RB 2>/dev/null; do
  p=$(redis-cli -p $RP info replication | awk -F: '/^ruvio_lsn/ {print $2+0}')
  r=$(redis-cli -p $RR info replication | awk -F: '/^ruvio_lsn/ {print $2+0}')
  lag=$((p - r)); [ $lag -gt $max_lag ] && max_lag=$lag; samples=$((samples + 1))
  sleep 0.1
done
for _ in $(seq 100); do
  p=$(redis-cli -p $RP info replication | awk -F: '/^ruvio_lsn/ {print $2+0}')
  r=$(redis-cli -p $RR info replication | awk -F: '/^ruvio_lsn/ {print $2+0}')
  [ "$p" = "$r" ] && break; sleep 0.1
done
echo "async: redis-benchmark -t set -P 16 -n 2000000 on the primary: $(tr '\r' '\n' < "$BENCH_WORK/rb.out" | grep -o 'SET: [0-9.]* requests per second' | tail -1); replica lag sampled every 100 ms: max ${max_lag} records over $samples samples; caught up at LSN $r (primary $p); full syncs served: $(redis-cli -p $RP info replication | awk -F: '/^full_syncs/ {print $2+0}') (1 = only the initial one)"
