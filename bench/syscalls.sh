#!/usr/bin/env bash
# What each server asks of the kernel per request under redis-benchmark (issue 33's CPU goal): ruvio and Debian's
# redis-server, started fresh with the same flags, take the same tests in turn; for every invocation `perf stat`
# counts, on the server process only, its CPU time (task-clock, in ns: no clock-tick rounding), context switches, all
# system calls, and the ones a request batch makes (socket reads and writes, epoll_wait, and clock_nanosleep: the
# pause a loaded Ruvio worker takes before it waits, crates/ruvio-server/src/workers.rs). Printed per round and test:
# each figure per 1,000 requests, and CPU ns per request with the ratio ruvio / redis-server.
#
# Usage: bench/syscalls.sh [requests-per-test]      (needs perf with tracepoints, redis-server, redis-benchmark)
#   TESTS="spop lpush" (default: spop lpush zadd zpopmin, in that order, so ZPOPMIN drains what ZADD built),
#   ROUNDS (default 3), PIPELINE (default 16), RUVIO_BIN, RUVIO_PORT / REDIS_PORT (default 7451 / 7452).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-300000}
TESTS=(${TESTS:-spop lpush zadd zpopmin})
ROUNDS=${ROUNDS:-3}
PIPELINE=${PIPELINE:-16}
RUVIO=${RUVIO_BIN:-target/release/ruvio}
RUVIO_PORT=${RUVIO_PORT:-7451}
REDIS_PORT=${REDIS_PORT:-7452}
command -v perf >/dev/null || { echo "needs perf" >&2; exit 2; }
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
[ -x "$RUVIO" ] || cargo build --release -p ruvio
. bench/lib.sh
bench_init

EVENTS=task-clock,context-switches,raw_syscalls:sys_enter
SYSCALLS=(recvfrom read sendto write epoll_wait clock_nanosleep)
for s in "${SYSCALLS[@]}"; do EVENTS+=",syscalls:sys_enter_$s"; done
perf stat -e "$EVENTS" -- true >/dev/null 2>&1 || { echo "perf cannot read the syscall tracepoints here (try as root)" >&2; exit 2; }

# measure PORT PID TEST -> "cpu_ns_per_request ctxsw syscalls recv send epoll nanosleep" (the last six per 1,000)
measure() {
  perf stat -x, -e "$EVENTS" -p "$2" -o "$BENCH_WORK/stat" -- \
    redis-benchmark -p "$1" -t "$3" -P "$PIPELINE" -c 50 -n "$N" -r 100000 -q >/dev/null 2>&1
  awk -F, -v n="$N" '
    $3 == "task-clock" {cpu = $1 * 1e6 / n}
    $3 == "context-switches" {cs = $1}
    $3 == "raw_syscalls:sys_enter" {all = $1}
    $3 ~ /sys_enter_(recvfrom|read)$/ {rd += $1}
    $3 ~ /sys_enter_(sendto|write)$/ {wr += $1}
    $3 ~ /sys_enter_epoll_wait$/ {ep = $1}
    $3 ~ /sys_enter_clock_nanosleep$/ {ns = $1}
    END {k = 1000 / n; printf "%.0f %.1f %.1f %.1f %.1f %.1f %.1f", cpu, cs * k, all * k, rd * k, wr * k, ep * k, ns * k}' "$BENCH_WORK/stat"
}

echo "ruvio $($RUVIO --version | awk '{print $2}') vs redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2); -P $PIPELINE -c 50 -n $N -r 100000; per 1,000 requests unless said; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-10s %-6s %8s %7s %8s %8s %8s %8s %9s %9s\n' round test server cpu_ns/req ratio ctxsw syscalls reads writes epoll_wait nanosleep
for r in $(seq "$ROUNDS"); do
  start_both "$RUVIO_PORT" "$REDIS_PORT" --appendonly no
  for t in "${TESTS[@]}"; do
    read -r rc rcs rall rrd rwr rep rns <<<"$(measure "$RUVIO_PORT" "$RUVIO_PID" "$t")"
    read -r dc dcs dall drd dwr dep dns <<<"$(measure "$REDIS_PORT" "$REDIS_PID" "$t")"
    printf '%-5s %-10s %-6s %8s %7.2f %8s %8s %8s %8s %9s %9s\n' "$r" "$t" ruvio "$rc" "$(echo "$rc / $dc" | bc -l)" "$rcs" "$rall" "$rrd" "$rwr" "$rep" "$rns"
    printf '%-5s %-10s %-6s %8s %7s %8s %8s %8s %8s %9s %9s\n' "$r" "$t" redis "$dc" "" "$dcs" "$dall" "$drd" "$dwr" "$dep" "$dns"
  done
  stop_servers
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
