#!/usr/bin/env bash
# What a request costs against what a request batch costs (one read and one write of a pipelining client), for
# Ruvio and redis-server side by side: issue 33's CPU goal is set at pipeline 16, where the batch's share decides.
#
# Usage: bash bench/batch-cost.sh [requests]   (RUVIO_BIN: the ruvio binary; needs valgrind, redis-benchmark)
#
# 1. Instructions (callgrind, deterministic): each server runs under `valgrind --tool=callgrind` and serves
#    `redis-benchmark -t spop -c 50 -r 100000` at -P 1, 4, 16 and 64 (REQUESTS/10 requests each, 32,000 at least);
#    printed: user-space instructions per request at each depth, and the fit I(P) = per_batch / P + per_request
#    from -P 1 and -P 64. At -P 16 also: instruction-cache misses per batch as callgrind simulates them (a
#    32 KiB 8-way L1i, Zen's; the kernel's own code, which also evicts, is not simulated) and the code the server
#    runs in every batch (64-byte lines executed at least once per batch on average, connection set-up included).
# 2. CPU time (/proc/PID/stat user and system ticks, 10 ms each): each server fresh, REQUESTS SPOPs at -P 16 and
#    then at -P 64; printed: user and system ns per request, the server's voluntary context switches (its idle
#    waits) and the same fit in nanoseconds. The load generator shares the 2 cores; run it more than once.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${1:-1000000}
RUVIO=${RUVIO_BIN:-target/release/ruvio}
PORT=${PORT:-7445}
. bench/lib.sh
bench_init
if redis-cli -p "$PORT" ping >/dev/null 2>&1; then echo "port $PORT is taken (set PORT)" >&2; exit 1; fi
CG_N=$(( N / 10 > 32000 ? N / 10 : 32000 ))

# valgrind_cmd ruvio|redis: sets CMD to that server's command line as bench/lib.sh's start_ruvio / start_redis
# run it (its own data folder), for valgrind to start.
valgrind_cmd() {
  mkdir -p "$BENCH_WORK/$1"
  case $1 in
    ruvio) CMD=("$RUVIO" --port "$PORT" --dir "$BENCH_WORK/$1" --loglevel warning --appendonly no) ;;
    redis) CMD=(redis-server --port "$PORT" --dir "$BENCH_WORK/$1" --save '' --loglevel warning --appendonly no) ;;
  esac
}
# Under valgrind a server takes seconds to answer, longer than lib.sh's wait_ready allows.
valgrind_ready() { for _ in $(seq 600); do [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done; return 1; }
# fit P1 P2 COST1 COST2: per-batch and per-request parts of cost(P) = per_batch / P + per_request.
fit() { python3 -c "import sys; p,q,a,b=map(float,sys.argv[1:]); f=(a-b)/(1/p-1/q); print(f'per batch {f:.0f}, per request {b-f/q:.0f}')" "$@"; }

# code_per_batch DUMP BATCHES: simulated L1i misses per batch and the code lines run in every batch.
code_per_batch() {
  python3 - "$1" "$2" <<'PY'
import collections, sys
path, batches = sys.argv[1], int(sys.argv[2])
lines, events, addr, in_call = collections.Counter(), None, 0, False
for l in open(path, errors="replace"):
    if l.startswith("events:"):
        events = l.split()[1:]
    elif l.startswith(("summary:", "totals:")):
        i1_misses = int(l.split()[1 + events.index("I1mr")])
    elif l.startswith("calls="):
        in_call = True
    elif l.startswith("0x") or l[:1] in "+-*":
        p = l.split()
        if p[0].startswith("0x"):
            addr = int(p[0], 16)
        elif p[0][0] in "+-":
            addr += int(p[0])
        if in_call:  # the cost line of a call: inclusive, the callee's own lines count themselves
            in_call = False
        elif len(p) >= 3:
            lines[addr >> 6] += int(p[2])
hot = [k for k, v in lines.items() if v >= batches]
print(f"L1i misses per batch {i1_misses / batches:.0f}; code run in every batch {len(hot)} lines "
      f"({len(hot) * 64 // 1024} KiB) on {len({k >> 6 for k in hot})} pages")
PY
}

echo "== instructions per request (callgrind, $CG_N SPOPs per depth)"
for s in ruvio redis; do
  valgrind_cmd "$s"
  valgrind --tool=callgrind --cache-sim=yes --I1=32768,8,64 --D1=49152,12,64 --LL=1048576,16,64 --dump-instr=yes \
    --compress-strings=no --compress-pos=no --callgrind-out-file="$BENCH_WORK/cg.$s.%p" "${CMD[@]}" >"$BENCH_WORK/$s.vg.log" 2>&1 &
  vg=$!; BENCH_PIDS+=("$vg")
  valgrind_ready
  line="$s"; declare -A ir=()
  for p in 1 4 16 64; do
    callgrind_control -z "$vg" >/dev/null
    redis-benchmark -p "$PORT" -n "$CG_N" -c 50 -P "$p" -r 100000 -q -t spop >/dev/null 2>&1
    callgrind_control -d "p$p" "$vg" >/dev/null
    f=$(ls -t "$BENCH_WORK"/cg.$s.$vg* | head -1)
    ir[$p]=$(grep -h '^totals:\|^summary:' "$f" | head -1 | awk -v n="$CG_N" '{printf "%.0f", $2 / n}')
    line="$line  -P $p: ${ir[$p]}"
    [ "$p" = 16 ] && code=$(code_per_batch "$f" $((CG_N / 16)))
  done
  echo "$line  ($(fit 1 64 "${ir[1]}" "${ir[64]}") instructions)"
  echo "$s  -P 16: $code"
  kill "$vg"; wait "$vg" 2>/dev/null || true
done

echo "== CPU per request ($N SPOPs per depth, a fresh server each)"
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }
waits() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}'; }
tick_ns=$(( 1000000000 / $(getconf CLK_TCK) ))
for s in ruvio redis; do
  if [ "$s" = ruvio ]; then start_ruvio "$PORT" --appendonly no; else start_redis "$PORT" --appendonly no; fi
  pid=$LAST_PID
  wait_ready "$PORT"
  line="$s"; declare -A ns=()
  for p in 16 64; do
    read -r u0 s0 < <(ticks "$pid"); w0=$(waits "$pid")
    redis-benchmark -p "$PORT" -n "$N" -c 50 -P "$p" -r 100000 -q -t spop >/dev/null 2>&1
    read -r u1 s1 < <(ticks "$pid"); w1=$(waits "$pid")
    user=$(( (u1 - u0) * tick_ns / N )); sys=$(( (s1 - s0) * tick_ns / N ))
    ns[$p]=$(( user + sys ))
    line="$line  -P $p: user $user + system $sys = ${ns[$p]} ns, $((w1 - w0)) idle waits"
  done
  echo "$line  ($(fit 16 64 "${ns[16]}" "${ns[64]}") ns)"
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
