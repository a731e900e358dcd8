#!/usr/bin/env bash
# Lock cycles through the Node.js client, in one run:
#   Ruvio:  ruvio-client (clients/node)  LEASE key ttl -> token;  RELEASE key token
#   Redis:  ioredis against redis-server SET key token NX PX ttl -> OK;  EVALSHA <compare-and-delete> 1 key token
# CALLERS (50) concurrent async callers share one client each way (the ecosystem's multiplexed connection), random
# keys out of KEYS, for DURATION seconds per round; ROUNDS rounds alternate the two sides. Prints each round, then medians:
# cycles/s, the ratio Ruvio/Redis, the server's CPU microseconds per cycle and the Node.js process's own CPU per
# cycle (is the client the bottleneck?). ioredis runs with enableAutoPipelining (its fastest setting, batching a
# tick's commands into one write as ruvio-client does); IOREDIS_AUTOPIPELINING=0 runs it without.
#
#   RUVIO=target/release/ruvio bash bench/node_client_locks.sh
#   CALLERS=50 DURATION=10 ROUNDS=3 KEYS=10000 RUVIO=... bash bench/node_client_locks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

RUVIO=${RUVIO:-${RUVIO_BIN:-target/release/ruvio}}
[ -x "$RUVIO" ] || { echo "no ruvio binary at $RUVIO (set RUVIO)" >&2; exit 1; }
RUVIO=$(realpath "$RUVIO")
CALLERS=${CALLERS:-50}
SECONDS_PER_ROUND=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-10000}
RPORT=${RPORT:-7451}
DPORT=${DPORT:-7452}
command -v redis-server >/dev/null || { echo "redis-server is needed" >&2; exit 1; }

( cd clients/node && { [ -d node_modules/ioredis ] || npm ci --no-audit --no-fund --loglevel=error; } && node scripts/build.mjs )

bench_init
start_both "$RPORT" "$DPORT"

# wait_idle PID...: until none of them used more than 5% of a core over half a second (at most 60 s). Ruvio
# compacts its log in the background after a round of a few million lock records; a round of the other side must not
# run against that.
wait_idle() {
  local p a b busy
  for _ in $(seq 120); do
    busy=0
    for p in "$@"; do
      a=$(cpu_ticks "$p"); sleep 0.5; b=$(cpu_ticks "$p")
      [ $((b - a)) -le $(( $(getconf CLK_TCK) / 40 )) ] || busy=1
    done
    [ "$busy" = 0 ] && return 0
  done
  echo "note: servers still busy after 60 s" >&2
}

run() { # mode port pid -> "cycles_per_sec server_cpu_us client_cpu_us"
  local before after out
  wait_idle "$RUVIO_PID" "$REDIS_PID"
  before=$(cpu_ticks "$3")
  out=$(cd clients/node && node bench/lock_cycles.mjs "$1" "$2" "$CALLERS" "$SECONDS_PER_ROUND" "$KEYS")
  after=$(cpu_ticks "$3")
  local cycles rate ccpu
  cycles=$(echo "$out" | tr ' ' '\n' | awk -F= '$1=="cycles"{print $2}')
  rate=$(echo "$out" | tr ' ' '\n' | awk -F= '$1=="cycles_per_sec"{print $2}')
  ccpu=$(echo "$out" | tr ' ' '\n' | awk -F= '$1=="client_cpu_us"{print $2}')
  # The server's CPU over the whole driver run (warm-up included) divided by the counted cycles: an upper bound.
  printf '%s %.2f %s\n' "$rate" "$(us_per_op "$before" "$after" "$cycles")" "$ccpu"
}

printf '%-6s %-22s %12s %14s %14s\n' round side cycles_per_s server_cpu_us node_cpu_us
R=(); D=(); RS=(); DS=(); RC=(); DC=()
for i in $(seq "$ROUNDS"); do
  read -r rate scpu ccpu < <(run ruvio "$RPORT" "$RUVIO_PID")
  printf '%-6s %-22s %12s %14s %14s\n' "$i" "ruvio + ruvio-client" "$rate" "$scpu" "$ccpu"
  R+=("$rate"); RS+=("$scpu"); RC+=("$ccpu")
  read -r rate scpu ccpu < <(run redis "$DPORT" "$REDIS_PID")
  printf '%-6s %-22s %12s %14s %14s\n' "$i" "redis + ioredis" "$rate" "$scpu" "$ccpu"
  D+=("$rate"); DS+=("$scpu"); DC+=("$ccpu")
done
mr=$(echo "${R[@]}" | median); md=$(echo "${D[@]}" | median)
echo
printf 'median cycles/s: ruvio+ruvio-client %s, redis+ioredis %s, ratio %.2f\n' "$mr" "$md" "$(echo "$mr / $md" | bc -l)"
printf 'median server CPU us/cycle: ruvio %s, redis %s\n' "$(echo "${RS[@]}" | median)" "$(echo "${DS[@]}" | median)"
printf 'median Node.js CPU us/cycle: ruvio-client %s, ioredis %s\n' "$(echo "${RC[@]}" | median)" "$(echo "${DC[@]}" | median)"
