#!/usr/bin/env bash
# What an endpoint lock (Ruvio.AspNetCore.DistributedLock's RuvioLockAttribute / RequireRuvioLock) adds to a request:
# the sample app (clients/dotnet/examples/Ruvio.AspNetCore.Sample, Release build) serves the same trivial handler at
# /bench/plain/{id} and, behind an endpoint lock (LEASE + RELEASE: two round trips to ruvio on loopback), at
# /bench/locked/{id}. One client alternates the two on one keep-alive connection each, so both see the same machine
# at the same moment; prints p50/p90/p99 of each and the p50 difference (the goal: <= 1 ms).
#
# Usage: RUVIO=target/release/ruvio bash bench/aspnet_endpoint_lock.sh [requests-per-side] [rounds]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
RUVIO="${RUVIO:-${RUVIO_BIN:-$root/target/release/ruvio}}"
RUVIO="$(cd "$(dirname "$RUVIO")" && pwd)/$(basename "$RUVIO")"
REQUESTS="${1:-5000}"
ROUNDS="${2:-3}"
source "$root/bench/lib.sh"
bench_init

dotnet build -c Release "$root/clients/dotnet/examples/Ruvio.AspNetCore.Sample" -o "$BENCH_WORK/sample" >&2

rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
hport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_ruvio "$rport" --appendonly no
wait_ready "$rport"
dotnet "$BENCH_WORK/sample/Ruvio.AspNetCore.Sample.dll" --urls "http://127.0.0.1:$hport" \
  --ConnectionStrings:Ruvio "127.0.0.1:$rport" --Instance bench --Logging:LogLevel:Default Warning \
  >"$BENCH_WORK/sample.log" 2>&1 &
BENCH_PIDS+=("$!")
for _ in $(seq 600); do curl -fs "http://127.0.0.1:$hport/stats" >/dev/null && break; sleep 0.1; done
echo "ruvio port $rport, sample app port $hport, $REQUESTS requests per side per round, $ROUNDS rounds, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

before=$(redis-cli -p "$rport" INFO stats | tr -d '\r' | awk -F: '/^total_commands_processed/ {print $2}')
python3 - "$hport" "$REQUESTS" "$ROUNDS" <<'PY'
import http.client, statistics, sys, time
port, n, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(len(xs) * p))]
plain_c = http.client.HTTPConnection("127.0.0.1", port)
locked_c = http.client.HTTPConnection("127.0.0.1", port)
def get(c, path):
    t = time.perf_counter_ns()
    c.request("GET", path)
    r = c.getresponse(); r.read()
    if r.status != 200: raise SystemExit(f"{path}: {r.status}")
    return (time.perf_counter_ns() - t) / 1e6
for i in range(500):  # warm-up: JIT, connection pools
    get(plain_c, f"/bench/plain/{i % 64}"); get(locked_c, f"/bench/locked/{i % 64}")
diffs = []
for rnd in range(rounds):
    plain, locked = [], []
    for i in range(n):
        plain.append(get(plain_c, f"/bench/plain/{i % 64}"))
        locked.append(get(locked_c, f"/bench/locked/{i % 64}"))
    p50p, p50l = statistics.median(plain), statistics.median(locked)
    diffs.append(p50l - p50p)
    print(f"round {rnd + 1}: plain p50 {p50p:.3f} ms p90 {pct(plain, .9):.3f} p99 {pct(plain, .99):.3f} | "
          f"locked p50 {p50l:.3f} ms p90 {pct(locked, .9):.3f} p99 {pct(locked, .99):.3f} | added p50 {p50l - p50p:.3f} ms")
print(f"median added p50 over {rounds} rounds: {statistics.median(diffs):.3f} ms (goal <= 1 ms)")
PY
# The guarded side really took and released a lock per request (LEASE + RELEASE reached ruvio).
after=$(redis-cli -p "$rport" INFO stats | tr -d '\r' | awk -F: '/^total_commands_processed/ {print $2}')
echo "ruvio commands per guarded request: $(echo "($after - $before) / ($REQUESTS * $ROUNDS + 500)" | bc -l | cut -c1-5) (LEASE + RELEASE = 2)"
