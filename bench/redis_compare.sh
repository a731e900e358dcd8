#!/usr/bin/env bash
# Runs redis-benchmark against ruvio and Debian's redis-server in the same run, with the same client count,
# pipeline depth, key space and value size, and prints Ruvio/Redis per test. Then loads 1M small keys into each
# and compares resident memory. Next to the throughput it prints each server's CPU time per request (user + system,
# from /proc/PID/stat, median over the rounds): on a machine where the load generator shares the cores, that says
# how much work each server does for the same request, whatever the client could drive.
#
# Usage: bench/redis_compare.sh [requests-per-test]   (needs redis-server, redis-benchmark, redis-cli)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-300000}
ROUNDS=${ROUNDS:-3}
CLIENTS=50
KEYSPACE=100000
VALUE=3
RUVIO=${RUVIO_BIN:-target/release/ruvio}
RUVIO_PORT=7411
REDIS_PORT=7412
# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
[ -x "$RUVIO" ] || cargo build --release -p ruvio
. bench/lib.sh
bench_init

bench() { # port pid pipeline -> CSV lines "test,rps,server-cpu-us-per-request", one redis-benchmark run per test
  local t before after
  for t in set get incr mset; do
    before=$(cpu_ticks "$2")
    redis-benchmark -p "$1" -t $t -n "$N" -c $CLIENTS -P "$3" -r $KEYSPACE -d $VALUE --csv 2>/dev/null |
      awk -F, 'NR>1 {gsub(/"/,""); printf "%s,%s", $1, $2}'
    after=$(cpu_ticks "$2")
    echo ",$(us_per_op "$before" "$after" "$N")"
  done
}

# Persistence off on both sides: this compares the request path, not the disk.
start_both $RUVIO_PORT $REDIS_PORT --appendonly no
echo "redis-benchmark: -n $N -c $CLIENTS -r $KEYSPACE -d $VALUE, best of $ROUNDS rounds; ruvio $($RUVIO --version | awk '{print $2}') vs redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2)"
printf '%-16s %9s %14s %14s %8s %12s %12s\n' test pipeline ruvio_rps redis_rps ratio ruvio_cpu_us redis_cpu_us
for P in 1 16; do
  : >"$BENCH_WORK/ruvio.csv"; : >"$BENCH_WORK/redis.csv"
  # Rounds alternate between the servers so neither always runs on a warmer (or busier) machine.
  for _ in $(seq "$ROUNDS"); do
    bench $RUVIO_PORT "$RUVIO_PID" $P >>"$BENCH_WORK/ruvio.csv"
    bench $REDIS_PORT "$REDIS_PID" $P >>"$BENCH_WORK/redis.csv"
  done
  best() { awk -F, -v t="$2" '$1==t && $2>m {m=$2} END {print m}' "$1"; }
  cpu() { awk -F, -v t="$2" '$1==t {print $3}' "$1" | median; }
  for test in SET GET INCR "MSET (10 keys)"; do
    a=$(best "$BENCH_WORK/ruvio.csv" "$test"); b=$(best "$BENCH_WORK/redis.csv" "$test")
    printf '%-16s %9s %14.0f %14.0f %8.2f %12.2f %12.2f\n' "$test" "$P" "$a" "$b" "$(echo "$a / $b" | bc -l)" \
      "$(cpu "$BENCH_WORK/ruvio.csv" "$test")" "$(cpu "$BENCH_WORK/redis.csv" "$test")"
  done
done

# Memory: 1M keys "key:%07d" -> 3-byte value, loaded with redis-cli --pipe, RSS measured after loading.
python3 - "$BENCH_WORK/load.txt" <<'PY'
import sys
with open(sys.argv[1], "wb") as f:
    for i in range(1_000_000):
        k = b"key:%07d" % i
        f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\nxxx\r\n" % (len(k), k))
PY
for p in $RUVIO_PORT $REDIS_PORT; do
  redis-cli -p $p flushall >/dev/null
  redis-cli -p $p --pipe <"$BENCH_WORK/load.txt" >/dev/null
done
rss() { ps -o rss= -p "$1" | tr -d ' '; }
r1=$(rss "$RUVIO_PID"); r2=$(rss "$REDIS_PID")
printf '%-16s %9s %14s %14s %8.2f\n' "rss_1M_keys_kB" "-" "$r1" "$r2" "$(echo "$r1 / $r2" | bc -l)"
printf 'dbsize: ruvio=%s redis=%s\n' "$(redis-cli -p $RUVIO_PORT dbsize)" "$(redis-cli -p $REDIS_PORT dbsize)"
