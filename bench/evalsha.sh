#!/usr/bin/env bash
# EVALSHA throughput and server CPU per request: ruvio vs Debian's redis-server in the same run, alternating, with
# the lock libraries' release script (compare-and-delete) that every Redis lock client sends with EVALSHA:
#   if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end
# driven by redis-benchmark (random keys out of 10000, about half of them set to the token first, so both branches
# run), without pipelining and with -P 16. Since issue 34 (item 7) a script never runs on its client's I/O thread
# (a looping one starved that thread's clients); this measures what the hand-off to the script thread costs.
# Prints requests/s, server CPU microseconds per request (user + system, from /proc) and the ruvio/redis ratio.
#
# Usage: bench/evalsha.sh [requests-per-run]   REPEAT=N (default 3), CLIENTS="20", PIPELINES="1 16"
#   RUVIO_BIN=path to measure another build (for example one of an older commit).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
RUVIO=${RUVIO_BIN:-target/release/ruvio}
RUVIO_PORT=${RUVIO_PORT:-7431}
REDIS_PORT=${REDIS_PORT:-7432}
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
[ -x "$RUVIO" ] || cargo build --release -p ruvio
. bench/lib.sh
bench_init

SCRIPT="if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
REPEAT=${REPEAT:-3}

# run PORT PID CLIENTS PIPELINE -> "rps cpu_us_per_request"
run() {
  local port=$1 pid=$2 c=$3 p=$4 sha t0 t1 rps
  sha=$(redis-cli -p "$port" script load "$SCRIPT")
  # Half of the keys hold the token, so the release deletes some and answers 0 for the others.
  redis-benchmark -p "$port" -n 5000 -c 10 -r 10000 -q set "key:__rand_int__" tok >/dev/null 2>&1
  t0=$(cpu_ticks "$pid")
  rps=$(redis-benchmark -p "$port" -n "$N" -c "$c" -P "$p" -r 10000 --csv evalsha "$sha" 1 "key:__rand_int__" tok \
    2>/dev/null | awk -F, 'NR>1 {gsub(/"/,""); print $2}')
  t1=$(cpu_ticks "$pid")
  echo "$rps $(us_per_op "$t0" "$t1" "$N")"
}

echo "ruvio $($RUVIO --version | awk '{print $2}') vs redis-server $(redis-server --version | awk '{print $3}'); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "figures: medians of $REPEAT alternating runs of $N EVALSHA each; cpu = server user+system microseconds per request"
printf '%-8s %-9s %12s %12s %7s %10s %10s\n' clients pipeline ruvio_rps redis_rps ratio ruvio_cpu redis_cpu
start_both $RUVIO_PORT $REDIS_PORT --appendonly no
for c in ${CLIENTS:-20}; do
  for p in ${PIPELINES:-1 16}; do
    ra="" rc="" sa="" sc=""
    for _ in $(seq "$REPEAT"); do
      read -r x y < <(run $RUVIO_PORT "$RUVIO_PID" "$c" "$p"); ra="$ra $x"; rc="$rc $y"
      read -r x y < <(run $REDIS_PORT "$REDIS_PID" "$c" "$p"); sa="$sa $x"; sc="$sc $y"
    done
    r=$(echo $ra | median); s=$(echo $sa | median)
    printf '%-8s %-9s %12.0f %12.0f %7.2f %10.1f %10.1f\n' "$c" "$p" "$r" "$s" "$(echo "$r / $s" | bc -l)" \
      "$(echo $rc | median)" "$(echo $sc | median)"
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
