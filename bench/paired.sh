#!/usr/bin/env bash
# Paired comparison of builds (and redis-server) under redis-benchmark: each round starts every server fresh, in
# turn, and runs the named tests in order against it (-P 16 or $PIPELINE, -c 50 or $CLIENTS, -r 100000, N requests
# each), so the builds meet the same periods of a noisy machine. Prints each round, then per test the median over the
# rounds of requests/s, of the server's CPU per request (user + system: its CPU clock in ns, cpu_ns in bench/lib.sh)
# and of redis-benchmark's p50 latency.
#
# Usage: ROUNDS=6 N=300000 [PIPELINE=16] [CLIENTS=50] bash bench/paired.sh BIN [BIN ...] [redis] -- TEST [TEST ...]
#   BIN is a ruvio binary (e.g. a copy of target/release/ruvio of each commit); "redis" is Debian's redis-server,
#   and the ratios are against it when it is named. Persistence off on both (--appendonly no).
#   Example (docs/benchmarks.md): ROUNDS=6 N=300000 bash bench/paired.sh /tmp/ruvio-before /tmp/ruvio-after redis -- zadd
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
N=${N:-300000}
PORT=${PORT:-17450}
PIPELINE=${PIPELINE:-16}
CLIENTS=${CLIENTS:-50}
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ $# -gt 1 ] && [ ${#bins[@]} -gt 0 ] || { echo "usage: bench/paired.sh BIN [BIN ...] [redis] -- TEST [TEST ...]" >&2; exit 2; }
shift
tests=("$@")
. bench/lib.sh
bench_init
# As bench/collections.sh: servers on cpu0, redis-benchmark on cpu1.
pin_by_default
out="$BENCH_WORK/rounds.txt"

for r in $(seq "$ROUNDS"); do
  for b in "${bins[@]}"; do
    if [ "$b" = redis ]; then start_redis "$PORT" --appendonly no; else RUVIO=$b start_ruvio "$PORT" --appendonly no; fi
    pid=$LAST_PID
    wait_ready "$PORT"
    line="$r $b"
    for t in "${tests[@]}"; do
      c0=$(cpu_ns "$pid")
      result=$(on_client_cpus redis-benchmark -p "$PORT" -t "$t" -P "$PIPELINE" -c "$CLIENTS" -n "$N" -r 100000 -q 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -1)
      rps=$(echo "$result" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
      p50=$(echo "$result" | sed -nE 's/.*p50=([0-9.]+) msec.*/\1/p')
      c1=$(cpu_ns "$pid")
      # lrange_100 runs an LPUSH fill first: its CPU is over both halves.
      n=$N; [ "$t" = lrange_100 ] && n=$((2 * N))
      line="$line $t=${rps%.*}/$(( (c1 - c0) / n ))/${p50:-0}"
    done
    echo "round $line" | tee -a "$out"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done

python3 - "$out" <<'PY'
import collections, statistics, sys
rps, cpu, p50 = collections.defaultdict(list), collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, _, binary, *cells = line.split()
    for cell in cells:
        test, figures = cell.split("=")
        r, c, p = figures.split("/")
        rps[(binary, test)].append(int(r or 0))
        cpu[(binary, test)].append(int(c))
        p50[(binary, test)].append(float(p))
binaries = list(dict.fromkeys(b for b, _ in rps))
print(f"\n{'test':<11} {'server':<40} {'median rps':>11} {'median CPU ns/req':>18} {'vs redis':>9} {'p50 ms':>7}  CPU ns/req per round")
for test in dict.fromkeys(t for _, t in rps):
    redis = statistics.median(cpu[("redis", test)]) if ("redis", test) in cpu else None
    for b in binaries:
        c = statistics.median(cpu[(b, test)])
        ratio = f"{c / redis:.2f}" if redis else "-"
        print(f"{test:<11} {b[-40:]:<40} {statistics.median(rps[(b, test)]):>11.0f} {c:>18.0f} {ratio:>9} {statistics.median(p50[(b, test)]):>7.3f}  {cpu[(b, test)]}")
PY
