#!/usr/bin/env bash
# Failover speed: time from kill -9 of the primary to the first durable grant answered by the new primary, Ruvio with
# three `ruvio coordinator`s vs Redis with three redis-sentinels, same run, same machine, same down-after.
#
#   Ruvio: primary + 2 replicas (appendonly yes, appendfsync always), three coordinators (quorum 2,
#          down-after-milliseconds 1000, durability-replicas 1); the grant is CLIENT DURABILITY REPLICAS 1 + LEASE,
#          answered with a token once a replica fsynced it.
#   Redis: redis-server primary + 2 replicas (appendonly yes, appendfsync always), three redis-sentinels (quorum 2,
#          down-after-milliseconds 1000); the grant is SET NX PX + WAIT 1 200 answered >= 1.
#
# Both sides: failover-timeout 10000. The driver (crates/ruvio-coordinator/examples/failover_time.rs) makes one
# durable grant on the primary, sends it SIGKILL, then asks the sentinels/coordinators (rotating, every 10 ms)
# `SENTINEL get-master-addr-by-name` until one names another node and a durable grant there succeeds: the client
# side of rediscovery is a 10 ms poll, so the figure is the servers' time. Every repetition starts from fresh
# processes and data folders; Ruvio and Redis alternate.
#
# Usage: bench/failover.sh      (env: REPS=5, RUVIO_BIN to use a given binary, KEEP_LOGS=dir to keep the
#                                 coordinators' and sentinels' logs)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
if [ -n "${RUVIO_BIN:-}" ]; then RUVIO=$RUVIO_BIN; else cargo build --release -q -p ruvio; RUVIO=target/release/ruvio; fi
cargo build --release -q -p ruvio-coordinator --example failover_time
DRIVER=target/release/examples/failover_time
. bench/lib.sh
bench_init

P0=7541; P1=7542; P2=7543; S0=27541; S1=27542; S2=27543

COORD_PASS=bench-coordinator-secret

start_coordinators() { # primary port
  local s
  for s in $S0 $S1 $S2; do
    mkdir -p "$BENCH_WORK/c$s"
    cat >"$BENCH_WORK/c$s/coordinator.conf" <<EOF
port $s
bind 127.0.0.1
dir $BENCH_WORK/c$s
coordinator-peers 127.0.0.1:$S0 127.0.0.1:$S1 127.0.0.1:$S2
sentinel monitor mymaster 127.0.0.1 $1 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 10000
sentinel durability-replicas mymaster 1
sentinel auth-user mymaster coordinator
sentinel auth-pass mymaster $COORD_PASS
sentinel sentinel-user coordinators
sentinel sentinel-pass bench-peer-secret
EOF
    "$RUVIO" coordinator --config "$BENCH_WORK/c$s/coordinator.conf" >"$BENCH_WORK/c$s/log" 2>&1 &
    BENCH_PIDS+=("$!")
  done
}

start_sentinels() { # primary port
  local s
  for s in $S0 $S1 $S2; do
    mkdir -p "$BENCH_WORK/s$s"
    cat >"$BENCH_WORK/s$s/sentinel.conf" <<EOF
port $s
bind 127.0.0.1
dir $BENCH_WORK/s$s
sentinel monitor mymaster 127.0.0.1 $1 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 10000
EOF
    redis-sentinel "$BENCH_WORK/s$s/sentinel.conf" >"$BENCH_WORK/s$s/log" 2>&1 &
    BENCH_PIDS+=("$!")
  done
}

# until: CMD... succeeds (bounded: 60 s)
until_ok() { for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done; echo "timed out: $*" >&2; return 1; }
replica_up() { redis-cli -p "$1" info replication 2>/dev/null | grep -q 'master_link_status:up'; }
# Every coordinator reports both replicas in the durability set.
coordinators_ready() {
  local s g
  for s in $S0 $S1 $S2; do
    g=$(redis-cli -p $s info coordinator 2>/dev/null | grep '^group0:' || true)
    [[ $g == *"127.0.0.1:$P1"* && $g == *"127.0.0.1:$P2"* && $g == *durability_set=*";"* ]] || return 1
  done
}
# Every sentinel knows the two replicas and the two other sentinels.
sentinels_ready() {
  local s m
  for s in $S0 $S1 $S2; do
    m=$(redis-cli -p $s sentinel master mymaster 2>/dev/null | tr -d '\r' | paste - - | tr '\t' '=')
    grep -qx 'num-slaves=2' <<<"$m" && grep -qx 'num-other-sentinels=2' <<<"$m" || return 1
  done
}

# keep_logs SIDE PREFIX: stops the servers; with KEEP_LOGS=dir, copies the sentinels'/coordinators' logs there first.
keep_logs() {
  stop_servers
  if [ -n "${KEEP_LOGS:-}" ]; then
    local s; mkdir -p "$KEEP_LOGS"
    for s in $S0 $S1 $S2; do cp "$BENCH_WORK/$2$s/log" "$KEEP_LOGS/$1-rep$REP-$s.log"; done
  fi
}

one_ruvio() {
  # coordinator-pass enables the built-in `coordinator` user the coordinators log in as (coordination commands).
  start_ruvio $P0 --appendonly yes --appendfsync always --coordinator-pass "$COORD_PASS"; local primary=$LAST_PID
  start_ruvio $P1 --appendonly yes --appendfsync always --coordinator-pass "$COORD_PASS" --replicaof "127.0.0.1 $P0"
  start_ruvio $P2 --appendonly yes --appendfsync always --coordinator-pass "$COORD_PASS" --replicaof "127.0.0.1 $P0"
  wait_ready $P0 $P1 $P2
  until_ok replica_up $P1; until_ok replica_up $P2
  start_coordinators $P0
  until_ok coordinators_ready
  "$DRIVER" --sentinels $S0,$S1,$S2 --mode ruvio --kill "$primary"
  keep_logs ruvio c; rm -rf "$BENCH_WORK"/ruvio-* "$BENCH_WORK"/c*
}

one_redis() {
  start_redis $P0 --appendonly yes --appendfsync always; local primary=$LAST_PID
  start_redis $P1 --appendonly yes --appendfsync always --replicaof 127.0.0.1 $P0
  start_redis $P2 --appendonly yes --appendfsync always --replicaof 127.0.0.1 $P0
  wait_ready $P0 $P1 $P2
  until_ok replica_up $P1; until_ok replica_up $P2
  start_sentinels $P0
  until_ok sentinels_ready
  "$DRIVER" --sentinels $S0,$S1,$S2 --mode redis --kill "$primary"
  keep_logs redis s; rm -rf "$BENCH_WORK"/redis-* "$BENCH_WORK"/s*
}

echo "failover: kill -9 of the primary -> first durable grant answered by the new primary (down-after-milliseconds 1000)"
printf '%-4s %-6s %9s %12s  %s\n' rep server grant_ms discover_ms detail
ruvio_ms=(); redis_ms=()
for r in $(seq "$REPS"); do
  REP=$r
  out=$(one_ruvio); ruvio_ms+=("$(field "$out" grant_ms)")
  printf '%-4s %-6s %9s %12s  %s\n' "$r" ruvio "$(field "$out" grant_ms)" "$(field "$out" discover_ms)" "$(field "$out" new) $(field "$out" token | sed 's/^/token=/')"
  out=$(one_redis); redis_ms+=("$(field "$out" grant_ms)")
  printf '%-4s %-6s %9s %12s  %s\n' "$r" redis "$(field "$out" grant_ms)" "$(field "$out" discover_ms)" "$(field "$out" new)"
done
rm_=$(echo "${ruvio_ms[@]}" | median); dm=$(echo "${redis_ms[@]}" | median)
rmax=$(printf '%s\n' "${ruvio_ms[@]}" | sort -g | tail -1); dmax=$(printf '%s\n' "${redis_ms[@]}" | sort -g | tail -1)
echo "median: ruvio ${rm_} ms (max ${rmax}), redis-sentinel ${dm} ms (max ${dmax}); ratio ruvio/redis $(echo "$rm_ / $dm" | bc -l | xargs printf '%.2f')"
echo "(target: ruvio <= 2000 ms and ratio <= 0.50)"
