#!/usr/bin/env bash
# Lists, sets and sorted sets (issue 33), ruvio against Debian's redis-server in the same run:
#
# 1. Memory: each server is started fresh, its RSS read, a data set loaded with redis-cli --pipe, its RSS read
#    again; (after - before) / elements. Six data sets:
#      list-1M / set-1M / zset-1M: one key of 1,000,000 elements ("value:%06d"; sorted sets "member:%06d" with
#                                  score i)
#      lists-100k / sets-100k / zsets-100k: 100,000 keys of 10 elements each (1,000,000 elements)
#    Both with each type's redis.conf limits (list-max-listpack-size -2, set-max-intset-entries 512,
#    zset-max-listpack-entries 128 / -value 64), persistence off.
# 2. Throughput with redis-benchmark -t T -P 16 -c 50 -n N -r 100000 for T in lpush rpush lpop rpop sadd spop zadd
#    zpopmin lrange_100 (one invocation per test, in that order, so the pops take what the pushes left), over
#    ROUNDS rounds, with each server's CPU time per request (user + system, its CPU clock in ns read around the
#    invocation: cpu_ns in bench/lib.sh; lrange_100's invocation includes the LPUSH that redis-benchmark runs first
#    to fill the list, so its CPU figure is over both). Each test runs on both servers back to back, which one first
#    alternating from test to test and round to round, so the two measurements of a pair meet the same period of a
#    noisy machine (this VM's cost per request moves 10-25% over seconds: docs/benchmarks.md). The ratios are taken
#    pair by pair and the median over the rounds printed (`ratio`, `cpu_ratio`); beside them, each server's best
#    requests/s and median CPU over the rounds and the ratios of those (`best/best`, `med/med`), which compare
#    figures from different periods of the machine. Five rounds by default: a pair misses a goal it usually meets in
#    up to one round in seven here, so the median of three pairs missed some goal in one run in four to seven, of five
#    pairs in one in twelve to twenty (bench/pooled.py pools the pairs of several DETAIL=1 runs and prints those odds).
# 3. The sorted-set rate limiter: MULTI; ZADD; ZREMRANGEBYSCORE; ZCARD; EXEC per check, 50 clients, 1000 users,
#    1 s window (crates/ruvio-server/examples/rate_limiter.rs), checks/s and server CPU per check over ROUNDS rounds
#    (which server goes first alternating from round to round); ratios as in 2.
#
# Placement: both servers run on cpu0 and redis-benchmark and the rate-limiter driver on cpu1 (on a machine with two
# or more CPUs; BENCH_SERVER_CPUS / BENCH_CLIENT_CPUS choose others, set empty for none): see bench/lib.sh.
#
# Usage: bench/collections.sh [requests-per-test]   (needs redis-server, redis-benchmark, redis-cli, python3, bc)
#        PARTS="memory throughput ratelimit" (the default: all three) runs only the parts named, e.g. PARTS=memory for
#        the memory table alone (it does not depend on timing, so it can be measured on a loaded machine); TESTS="lpush
#        rpop" narrows the throughput part to those redis-benchmark tests. RUVIO_PORT / REDIS_PORT (default 7431 / 7432)
#        move the servers off the default ports, so two checkouts can run it one after the other without colliding.
#        DETAIL=1 also prints every round (each pair) of the throughput and rate-limiter parts.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-400000}
PARTS=${PARTS:-memory throughput ratelimit}
part() { [[ " $PARTS " == *" $1 "* ]]; }
ROUNDS=${ROUNDS:-5}
SECONDS_RL=${SECONDS_RL:-10}
CLIENTS=50
RUVIO=${RUVIO_BIN:-target/release/ruvio}
RL_DRIVER=${RL_DRIVER:-target/release/examples/rate_limiter}
RUVIO_PORT=${RUVIO_PORT:-7431}
REDIS_PORT=${REDIS_PORT:-7432}
FLAGS=(--appendonly no)
# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
[ -x "$RUVIO" ] || cargo build --release -p ruvio
! part ratelimit || [ -x "$RL_DRIVER" ] || cargo build --release -p ruvio-server --example rate_limiter
. bench/lib.sh
bench_init
# Both servers on cpu0, the load generators on cpu1: at times the two vCPUs of this machine differ by up to 30% for
# the server's role, for either server (bench/lib.sh).
pin_by_default

rss() { ps -o rss= -p "$1" | tr -d ' '; }
# summarize_pairs TEST RUVIO_RATE REDIS_RATE RUVIO_CPU REDIS_CPU < PAIRS: one table row for TEST from lines
# "TEST,..." holding one round's pair each (the arguments are the columns of the two rates and the two CPU figures):
# best rates, the median of the pairs' rate ratios, the best/best ratio, median CPU of each, the median of the pairs'
# CPU ratios, the median/median ratio.
summarize_pairs() {
  awk -F, -v t="$1" -v ra="$2" -v rb="$3" -v ca="$4" -v cb="$5" '
    function median(v, n,   i, j, x) {  # v[1..n], sorted in place
      for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
      return v[int((n + 1) / 2)]
    }
    $1 == t {
      n++; rr[n] = $ra / $rb; cr[n] = $ca / $cb; a[n] = $ca; b[n] = $cb
      if ($ra > besta) besta = $ra; if ($rb > bestb) bestb = $rb
    }
    END {
      ma = median(a, n); mb = median(b, n)
      printf "%-11s %11.0f %11.0f %7.3f %7.3f %9.2f %9.2f %9.3f %7.3f\n", t, besta, bestb, median(rr, n), besta / bestb, ma, mb, median(cr, n), ma / mb
    }'
}
# in_turn ROUND INDEX: ruvio first when ROUND + INDEX is even, redis-server first otherwise.
in_turn() { if (( ($1 + $2) % 2 == 0 )); then echo ruvio redis; else echo redis ruvio; fi; }

echo "ruvio $($RUVIO --version | awk '{print $2}') vs redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2); servers on cpus ${BENCH_SERVER_CPUS:-any}, load generators on ${BENCH_CLIENT_CPUS:-any}; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- memory ------------------------------------------------------------------------------------------------------
if part memory; then
python3 - "$BENCH_WORK" <<'PY'
import sys
work = sys.argv[1]
def cmd(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out
def big(name, make):
    with open(f"{work}/{name}.txt", "wb") as f:
        for chunk in range(1000):
            f.write(cmd(make(range(chunk * 1000, chunk * 1000 + 1000))))
def small(name, make):
    with open(f"{work}/{name}.txt", "wb") as f:
        for k in range(100_000):
            f.write(cmd(make(k, range(10))))
big("list-1M", lambda r: [b"RPUSH", b"biglist"] + [b"value:%06d" % i for i in r])
big("set-1M", lambda r: [b"SADD", b"bigset"] + [b"value:%06d" % i for i in r])
big("zset-1M", lambda r: [b"ZADD", b"bigzset"] + [x for i in r for x in (b"%d" % i, b"member:%06d" % i)])
small("lists-100k", lambda k, r: [b"RPUSH", b"list:%06d" % k] + [b"value:%05d" % ((k * 10 + i) % 100_000) for i in r])
small("sets-100k", lambda k, r: [b"SADD", b"set:%06d" % k] + [b"value:%05d" % ((k * 10 + i) % 100_000) for i in r])
small("zsets-100k", lambda k, r: [b"ZADD", b"zset:%06d" % k] + [x for i in r for x in (b"%d" % i, b"member:%d" % i)])
PY

printf '\n%-11s %9s %14s %14s %8s %22s\n' dataset elements ruvio_B_elem redis_B_elem ratio encoding_ruvio/redis
for set in list-1M set-1M zset-1M lists-100k sets-100k zsets-100k; do
  start_both $RUVIO_PORT $REDIS_PORT "${FLAGS[@]}"
  sleep 0.5
  r0=$(rss "$RUVIO_PID"); d0=$(rss "$REDIS_PID")
  for p in $RUVIO_PORT $REDIS_PORT; do redis-cli -p $p --pipe <"$BENCH_WORK/$set.txt" >/dev/null; done
  sleep 0.5
  r1=$(rss "$RUVIO_PID"); d1=$(rss "$REDIS_PID")
  case $set in
    list-1M) key=biglist ;; set-1M) key=bigset ;; zset-1M) key=bigzset ;;
    lists-100k) key=list:000001 ;; sets-100k) key=set:000001 ;; zsets-100k) key=zset:000001 ;;
  esac
  for p in $RUVIO_PORT $REDIS_PORT; do
    [ "$(redis-cli -p $p dbsize)" -gt 0 ] || { echo "load failed on port $p" >&2; exit 1; }
  done
  enc="$(redis-cli -p $RUVIO_PORT object encoding $key)/$(redis-cli -p $REDIS_PORT object encoding $key)"
  a=$(echo "($r1 - $r0) * 1024 / 1000000" | bc -l); b=$(echo "($d1 - $d0) * 1024 / 1000000" | bc -l)
  printf '%-11s %9s %14.1f %14.1f %8.2f %22s\n' $set 1000000 "$a" "$b" "$(echo "$a / $b" | bc -l)" "$enc"
  stop_servers
done
fi

# ---- throughput ------------------------------------------------------------------------------------------------------
if part throughput; then
TESTS=(${TESTS:-lpush rpush lpop rpop sadd spop zadd zpopmin lrange_100})
bench() { # port pid test -> CSV line "test,rps,server-cpu-us-per-request"
  local port=$1 pid=$2 t=$3 before after rows
  before=$(cpu_ns "$pid")
  on_client_cpus redis-benchmark -p "$port" -n "$N" -c $CLIENTS -P 16 -r 100000 --csv -t "$t" 2>/dev/null >"$BENCH_WORK/one.csv"
  after=$(cpu_ns "$pid")
  rows=$(($(wc -l <"$BENCH_WORK/one.csv") - 1))
  # The last row is the test itself (lrange_100's first row is the LPUSH that fills the list).
  echo "$t,$(tail -1 "$BENCH_WORK/one.csv" | awk -F, '{gsub(/"/,""); print $2}'),$(us_per_op_ns "$before" "$after" $((N * rows)))"
}

start_both $RUVIO_PORT $REDIS_PORT "${FLAGS[@]}"
echo
echo "redis-benchmark: -n $N -c $CLIENTS -P 16 -r 100000, $ROUNDS rounds; ratio, cpu_ratio: median of the rounds' ruvio/redis pairs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$BENCH_WORK/ruvio.csv"; : >"$BENCH_WORK/redis.csv"
for r in $(seq "$ROUNDS"); do
  for i in "${!TESTS[@]}"; do
    for side in $(in_turn "$r" "$i"); do
      if [ "$side" = ruvio ]; then
        bench $RUVIO_PORT "$RUVIO_PID" "${TESTS[$i]}" >>"$BENCH_WORK/ruvio.csv"
      else
        bench $REDIS_PORT "$REDIS_PID" "${TESTS[$i]}" >>"$BENCH_WORK/redis.csv"
      fi
    done
  done
done
# Both files hold one line per (round, test) in the same order: pasted, each line is one pair.
paste -d, "$BENCH_WORK/ruvio.csv" "$BENCH_WORK/redis.csv" >"$BENCH_WORK/pairs.csv"
printf '%-11s %11s %11s %7s %7s %9s %9s %9s %7s\n' test ruvio_rps redis_rps ratio best/best ruvio_cpu redis_cpu cpu_ratio med/med
for t in "${TESTS[@]}"; do
  # pairs.csv columns: test, ruvio rps, ruvio cpu, test, redis rps, redis cpu
  summarize_pairs "$t" 2 5 3 6 <"$BENCH_WORK/pairs.csv"
done
if [ -n "${DETAIL:-}" ]; then
  echo "each round: test, ruvio rps / cpu_us, redis rps / cpu_us, the pair's ratios"
  awk -F, '{printf "  %-11s %8.0f / %5.2f   %8.0f / %5.2f   %6.3f / %6.3f\n", $1, $2, $3, $5, $6, $2 / $5, $3 / $6}' "$BENCH_WORK/pairs.csv"
fi
stop_servers
fi

# ---- rate limiter ------------------------------------------------------------------------------------------------------
if part ratelimit; then
start_both $RUVIO_PORT $REDIS_PORT "${FLAGS[@]}"
echo
echo "rate limiter: MULTI ZADD ZREMRANGEBYSCORE ZCARD EXEC, $CLIENTS clients, 1000 users, ${SECONDS_RL}s, $ROUNDS rounds; ratio, cpu_ratio: median of the rounds' pairs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
rl() { # port pid -> "checks_per_sec,cpu_us_per_check"
  local before after out checks
  before=$(cpu_ns "$2")
  out=$(on_client_cpus "$RL_DRIVER" --port "$1" --clients $CLIENTS --users 1000 --seconds "$SECONDS_RL")
  after=$(cpu_ns "$2")
  checks=$(field "$out" checks)
  echo "$(field "$out" checks_per_sec),$(us_per_op_ns "$before" "$after" "$checks")"
}
: >"$BENCH_WORK/rl-ruvio.csv"; : >"$BENCH_WORK/rl-redis.csv"
for r in $(seq "$ROUNDS"); do
  for side in $(in_turn "$r" 0); do
    if [ "$side" = ruvio ]; then
      rl $RUVIO_PORT "$RUVIO_PID" >>"$BENCH_WORK/rl-ruvio.csv"
    else
      rl $REDIS_PORT "$REDIS_PID" >>"$BENCH_WORK/rl-redis.csv"
    fi
  done
done
paste -d, "$BENCH_WORK/rl-ruvio.csv" "$BENCH_WORK/rl-redis.csv" | sed 's/^/ratelimit,/' >"$BENCH_WORK/rl-pairs.csv"
printf '%-11s %11s %11s %7s %7s %9s %9s %9s %7s\n' test ruvio_cps redis_cps ratio best/best ruvio_cpu redis_cpu cpu_ratio med/med
# rl-pairs.csv columns: test, ruvio checks/s, ruvio cpu, redis checks/s, redis cpu
summarize_pairs ratelimit 2 4 3 5 <"$BENCH_WORK/rl-pairs.csv"
if [ -n "${DETAIL:-}" ]; then
  echo "each round: ruvio checks/s / cpu_us, redis checks/s / cpu_us, the pair's ratios"
  awk -F, '{printf "  %8.0f / %5.2f   %8.0f / %5.2f   %6.3f / %6.3f\n", $2, $3, $4, $5, $2 / $4, $3 / $5}' "$BENCH_WORK/rl-pairs.csv"
fi
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
