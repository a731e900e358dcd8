#!/usr/bin/env bash
# Lock cycles through the Java client against ruvio (LEASE + RELEASE) and, in the same run, through Jedis (the most
# used Java Redis client) against redis-server (SET NX PX + EVALSHA compare-and-delete), 50 concurrent callers each,
# one caller per key. Prints each side's cycles/s, p50/p99 latency and server CPU per 1000 cycles, and the ratios.
#
# Usage: RUVIO=target/release/ruvio bash bench/java_client_locks.sh [seconds] [callers] [rounds]
# Both servers run with the same flags as bench/lock_cycle.sh (--appendonly no).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
RUVIO="${RUVIO:-${RUVIO_BIN:-$root/target/release/ruvio}}"
RUVIO="$(cd "$(dirname "$RUVIO")" && pwd)/$(basename "$RUVIO")"
SECONDS_PER_RUN="${1:-10}"
CALLERS="${2:-50}"
ROUNDS="${3:-3}"
source "$root/bench/lib.sh"
bench_init

cd "$root/clients/java"
mvn -B -q test-compile dependency:build-classpath -Dmdep.outputFile="$BENCH_WORK/cp.txt" -Dmdep.includeScope=test >&2
CP="target/classes:target/test-classes:$(cat "$BENCH_WORK/cp.txt")"

rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_both "$rport" "$dport" --appendonly no
echo "ruvio pid $RUVIO_PID port $rport; redis-server $(redis-server --version | awk '{print $3}') pid $REDIS_PID port $dport"
echo "$CALLERS callers, $SECONDS_PER_RUN s per run, $ROUNDS rounds (alternating), $(nproc) CPUs"

for round in $(seq "$ROUNDS"); do
  java -cp "$CP" io.ruvio.bench.LockBench ruvio "$rport" "$RUVIO_PID" "$CALLERS" "$SECONDS_PER_RUN" | tee -a "$BENCH_WORK/ruvio.txt"
  java -cp "$CP" io.ruvio.bench.LockBench jedis "$dport" "$REDIS_PID" "$CALLERS" "$SECONDS_PER_RUN" | tee -a "$BENCH_WORK/jedis.txt"
done

python3 - "$BENCH_WORK/ruvio.txt" "$BENCH_WORK/jedis.txt" <<'PY'
import statistics, sys
def load(p):
    rows = []
    for line in open(p):
        d = dict(kv.split("=") for kv in line.split()[1:])
        rows.append({k: float(v) for k, v in d.items()})
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}
r, j = load(sys.argv[1]), load(sys.argv[2])
print("median of rounds        ruvio+java-client   redis+jedis   ratio (ruvio/redis)")
print(f"cycles/s                {r['cycles_per_s']:>17.0f} {j['cycles_per_s']:>13.0f}   {r['cycles_per_s']/j['cycles_per_s']:.2f}")
print(f"p50 latency (us)        {r['p50_us']:>17.0f} {j['p50_us']:>13.0f}   {r['p50_us']/j['p50_us']:.2f}")
print(f"p99 latency (us)        {r['p99_us']:>17.0f} {j['p99_us']:>13.0f}   {r['p99_us']/j['p99_us']:.2f}")
print(f"server CPU ms/1000 cyc  {r['server_cpu_ms_per_1000']:>17.3f} {j['server_cpu_ms_per_1000']:>13.3f}   {r['server_cpu_ms_per_1000']/j['server_cpu_ms_per_1000']:.2f}")
PY
