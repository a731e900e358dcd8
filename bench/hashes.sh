#!/usr/bin/env bash
# Hashes, ruvio against Debian's redis-server in the same run:
#
# 1. Memory per field: each server is started fresh, its RSS read, a data set loaded with redis-cli --pipe, its RSS
#    read again; (after - before) / fields. Two data sets of 1M fields each:
#      small: 100,000 hashes "user:%06d" of 10 fields "field:N" -> "value:%05d"   (packed: listpack)
#      large:   1,000 hashes "big:%04d" of 1,000 fields "field:%04d" -> "v%06d"  (hashtable)
#    Both servers run with hash-max-listpack-entries 128 / -value 64 (redis.conf's values; redis-server's built-in
#    entries default is 512), so both pack the same hashes.
# 2. Throughput with redis-benchmark, same client count, pipeline depth and key space against each, best of ROUNDS,
#    with each server's CPU time per request (user + system from /proc/PID/stat, median over the rounds):
#      HSET big / HGET big:   one hash "myhash", fields element:<random of 100000> (redis-benchmark's own hset test)
#      HSET small / HGET small / HINCRBY small: keys h:<random of 100000>, fields f:<random of 100000>
#    Persistence is off on both sides (--appendonly no): this compares the request path, not the disk.
#
# Usage: bench/hashes.sh [requests-per-test]   (needs redis-server, redis-benchmark, redis-cli, python3, bc)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
ROUNDS=${ROUNDS:-3}
CLIENTS=50
KEYSPACE=100000
RUVIO=${RUVIO_BIN:-target/release/ruvio}
RUVIO_PORT=7421
REDIS_PORT=7422
LIMITS=(--hash-max-listpack-entries 128 --hash-max-listpack-value 64 --appendonly no)
# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
[ -x "$RUVIO" ] || cargo build --release -p ruvio
. bench/lib.sh
bench_init

rss() { ps -o rss= -p "$1" | tr -d ' '; }
used_memory() { redis-cli -p "$1" info memory | awk -F: '$1 == "used_memory" {print $2}' | tr -d '\r'; }

echo "ruvio $($RUVIO --version | awk '{print $2}') vs redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2)"

# ---- memory ------------------------------------------------------------------------------------------------------
python3 - "$BENCH_WORK" <<'PY'
import sys
work = sys.argv[1]
def cmd(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out
with open(f"{work}/small.txt", "wb") as f:
    for h in range(100_000):
        args = [b"HSET", b"user:%06d" % h]
        for i in range(10):
            args += [b"field:%d" % i, b"value:%05d" % ((h * 10 + i) % 100_000)]
        f.write(cmd(args))
with open(f"{work}/large.txt", "wb") as f:
    for h in range(1_000):
        for chunk in range(10):
            args = [b"HSET", b"big:%04d" % h]
            for i in range(chunk * 100, chunk * 100 + 100):
                args += [b"field:%04d" % i, b"v%06d" % (h * 1000 + i)]
            f.write(cmd(args))
PY

printf '\n%-8s %12s %14s %14s %8s %16s %18s\n' dataset fields ruvio_B_field redis_B_field ratio ruvio_encoding redis_used_B_field
for set in small large; do
  start_both $RUVIO_PORT $REDIS_PORT "${LIMITS[@]}"
  sleep 0.5
  r0=$(rss "$RUVIO_PID"); d0=$(rss "$REDIS_PID"); u0=$(used_memory $REDIS_PORT)
  for p in $RUVIO_PORT $REDIS_PORT; do redis-cli -p $p --pipe <"$BENCH_WORK/$set.txt" >/dev/null; done
  sleep 0.5
  r1=$(rss "$RUVIO_PID"); d1=$(rss "$REDIS_PID"); u1=$(used_memory $REDIS_PORT)
  if [ $set = small ]; then key=user:000001; else key=big:0001; fi
  for p in $RUVIO_PORT $REDIS_PORT; do
    n=$(redis-cli -p $p hlen $key)
    [ "$n" -gt 0 ] || { echo "load failed on port $p" >&2; exit 1; }
  done
  fields=1000000
  enc="$(redis-cli -p $RUVIO_PORT object encoding $key)/$(redis-cli -p $REDIS_PORT object encoding $key)"
  a=$(echo "($r1 - $r0) * 1024 / $fields" | bc -l); b=$(echo "($d1 - $d0) * 1024 / $fields" | bc -l)
  printf '%-8s %12s %14.1f %14.1f %8.2f %16s %18.1f\n' $set $fields "$a" "$b" "$(echo "$a / $b" | bc -l)" "$enc" \
    "$(echo "($u1 - $u0) / $fields" | bc -l)"
  stop_servers
done

# ---- throughput ------------------------------------------------------------------------------------------------------
bench() { # port pid pipeline -> CSV lines "test,rps,server-cpu-us-per-request"
  local port=$1 pid=$2 p=$3 before after name
  run() { # name, then redis-benchmark arguments
    name=$1; shift
    before=$(cpu_ticks "$pid")
    redis-benchmark -p "$port" -n "$N" -c $CLIENTS -P "$p" -r $KEYSPACE -d 8 --csv "$@" 2>/dev/null |
      awk -F, -v n="$name" 'NR>1 {gsub(/"/,""); printf "%s,%s", n, $2}'
    after=$(cpu_ticks "$pid")
    echo ",$(us_per_op "$before" "$after" "$N")"
  }
  run "HSET big" -t hset
  run "HGET big" HGET myhash element:__rand_int__
  run "HSET small" HSET h:__rand_int__ f:__rand_int__ value123
  run "HGET small" HGET h:__rand_int__ f:__rand_int__
  run "HINCRBY small" HINCRBY h:__rand_int__ n:__rand_int__ 1
}

start_both $RUVIO_PORT $REDIS_PORT "${LIMITS[@]}"
echo
echo "redis-benchmark: -n $N -c $CLIENTS -r $KEYSPACE, best of $ROUNDS rounds (server CPU: median)"
printf '%-14s %9s %14s %14s %8s %12s %12s\n' test pipeline ruvio_rps redis_rps ratio ruvio_cpu_us redis_cpu_us
for P in 1 16; do
  : >"$BENCH_WORK/ruvio.csv"; : >"$BENCH_WORK/redis.csv"
  # Rounds alternate between the servers so neither always runs on a warmer (or busier) machine.
  for _ in $(seq "$ROUNDS"); do
    bench $RUVIO_PORT "$RUVIO_PID" $P >>"$BENCH_WORK/ruvio.csv"
    bench $REDIS_PORT "$REDIS_PID" $P >>"$BENCH_WORK/redis.csv"
  done
  best() { awk -F, -v t="$2" '$1==t && $2>m {m=$2} END {print m}' "$1"; }
  cpu() { awk -F, -v t="$2" '$1==t {print $3}' "$1" | median; }
  for test in "HSET big" "HGET big" "HSET small" "HGET small" "HINCRBY small"; do
    a=$(best "$BENCH_WORK/ruvio.csv" "$test"); b=$(best "$BENCH_WORK/redis.csv" "$test")
    printf '%-14s %9s %14.0f %14.0f %8.2f %12.2f %12.2f\n' "$test" "$P" "$a" "$b" "$(echo "$a / $b" | bc -l)" \
      "$(cpu "$BENCH_WORK/ruvio.csv" "$test")" "$(cpu "$BENCH_WORK/redis.csv" "$test")"
  done
done
printf 'encodings after the run: myhash ruvio=%s redis=%s (fields: %s / %s)\n' \
  "$(redis-cli -p $RUVIO_PORT object encoding myhash)" "$(redis-cli -p $REDIS_PORT object encoding myhash)" \
  "$(redis-cli -p $RUVIO_PORT hlen myhash)" "$(redis-cli -p $REDIS_PORT hlen myhash)"
