#!/usr/bin/env bash
# Which CPU a server runs on: the sorted-set rate limiter (crates/ruvio-server/examples/rate_limiter.rs, 50 clients,
# 1000 users) against ruvio and Debian's redis-server, each server pinned in turn to cpu0 (driver on cpu1) and to
# cpu1 (driver on cpu0), moved between runs with taskset, ROUNDS times. Prints per run the checks per second and the
# server's CPU per check (its CPU clock in ns, bench/lib.sh cpu_ns). On the 2-vCPU machine the vCPU the server
# ran on moved its CPU per check by 0-30%, for either server alike, the slower vCPU and the gap changing over
# minutes (docs/benchmarks.md, "Which vCPU the server runs on"): bench/collections.sh and bench/paired.sh therefore
# put both servers on the same CPU.
#
# Usage: bench/placement.sh          ROUNDS (default 2), SECONDS_RUN (default 4), RUVIO_BIN, PORT (default 17470)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(nproc)" -ge 2 ] || { echo "needs two CPUs" >&2; exit 2; }
ROUNDS=${ROUNDS:-2}
SECONDS_RUN=${SECONDS_RUN:-4}
RUVIO=${RUVIO_BIN:-target/release/ruvio}
DRIVER=target/release/examples/rate_limiter
PORT=${PORT:-17470}
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
[ -x "$RUVIO" ] || cargo build --release -p ruvio
[ -x "$DRIVER" ] || cargo build --release -p ruvio-server --example rate_limiter
. bench/lib.sh
bench_init

printf '%-6s %-7s %-10s %12s %14s\n' round server server_cpu checks/s cpu_us/check
for side in ruvio redis; do
  if [ "$side" = ruvio ]; then start_ruvio "$PORT" --appendonly no; else start_redis "$PORT" --appendonly no; fi
  pid=$LAST_PID
  wait_ready "$PORT"
  for r in $(seq "$ROUNDS"); do
    for cpu in 0 1; do
      # Every thread of the server moves (redis-server's background threads, ruvio's I/O and log threads).
      for t in /proc/"$pid"/task/*; do taskset -pc "$cpu" "${t##*/}" >/dev/null; done
      before=$(cpu_ns "$pid")
      out=$(taskset -c $((1 - cpu)) "$DRIVER" --port "$PORT" --clients 50 --users 1000 --seconds "$SECONDS_RUN")
      after=$(cpu_ns "$pid")
      checks=$(field "$out" checks)
      rate=$(field "$out" checks_per_sec)
      printf '%-6s %-7s %-10s %12s %14.2f\n' "$r" "$side" "cpu$cpu" "$rate" "$(us_per_op_ns "$before" "$after" "$checks")"
    done
  done
  stop_servers
done
