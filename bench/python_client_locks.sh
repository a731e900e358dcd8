#!/usr/bin/env bash
# Lock cycles through the Python client (clients/python, package ruvio) against Ruvio, and through redis-py (the
# best-liked Python Redis client) doing the Redis lock pattern against Debian's redis-server, in the same run:
#
#   ruvio:    t = r.lease(key, ttl)                     -> token;  r.release(key, t)
#   redis-py: r.set(key, tok, nx=True, px=ttl)          -> True;   r.evalsha(<compare-and-delete>, 1, key, tok)
#
# CLIENTS callers (threads sharing one client, then asyncio tasks sharing one client) on random keys out of KEYS,
# DURATION seconds per run, ROUNDS alternating runs per flavour, medians. Prints cycles/s, p50/p99 cycle latency,
# the server's CPU per cycle, the client process's CPU per cycle, and ruvio/redis ratios. In Python the client
# process is normally the bottleneck (one interpreter, the GIL): client_us per cycle says how much each client
# library costs, which is what "this client should not be the bottleneck" compares.
#
# Usage: bench/python_client_locks.sh     (env: RUVIO_BIN, CLIENTS=50 KEYS=10000 DURATION=10 ROUNDS=3)
# Needs redis-server and python3 (3.9+); makes clients/python/.venv with the package and redis-py (pinned).
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-10000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
TTL=10000
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
RUVIO_PORT=${RUVIO_PORT:-$(free_port)}
REDIS_PORT=${REDIS_PORT:-$(free_port)}
if [ -z "${RUVIO_BIN:-}" ]; then
  # Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
  . "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/toolchains.sh" && ruvio_cargo_source || exit 1
  cargo build --release -q -p ruvio
  RUVIO_BIN=target/release/ruvio
fi
RUVIO=$RUVIO_BIN
VENV=clients/python/.venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# Offline machines install the vendored wheels and build the client without isolation (scripts/lib/toolchains.sh).
. scripts/lib/toolchains.sh && ruvio_pip_source || exit 1
no_isolation=()
if [ "$RUVIO_PIP_OFFLINE" = 1 ]; then
  no_isolation=(--no-build-isolation)
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q hatchling editables
fi
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -r clients/python/requirements-bench.txt
"$VENV/bin/python" -m pip install --disable-pip-version-check -q "${no_isolation[@]}" -e clients/python
DRIVER=(env PYTHONUNBUFFERED=1 "$VENV/bin/python" clients/python/bench/lock_cycle.py)

. bench/lib.sh
bench_init
start_both $RUVIO_PORT $REDIS_PORT --appendonly no
# Make sure each port is served by the server started here (not by something else already listening there).
kill -0 "$RUVIO_PID" && kill -0 "$REDIS_PID" || { echo "a server did not start (port taken?)" >&2; exit 1; }
[ "$(redis-cli -p $RUVIO_PORT --raw HELLO 2 | sed -n 2p)" = ruvio ] || { echo "port $RUVIO_PORT is not our ruvio" >&2; exit 1; }
[ "$(redis-cli -p $REDIS_PORT --raw HELLO 2 | sed -n 2p)" = redis ] || { echo "port $REDIS_PORT is not our redis-server" >&2; exit 1; }

run() { # client flavor port pid
  local before after out cycles
  before=$(cpu_ticks "$4")
  out=$("${DRIVER[@]}" --client "$1" --flavor "$2" --port "$3" --clients "$CLIENTS" --keys "$KEYS" --seconds "$DURATION" --ttl $TTL)
  after=$(cpu_ticks "$4")
  cycles=$(field "$out" cycles)
  echo "$out server_us=$(us_per_op "$before" "$after" "$cycles") client_us=$(echo "$(field "$out" client_cpu_s) * 1000000 / $cycles" | bc -l)"
}

echo "python client lock cycle: $CLIENTS callers, ${DURATION}s per run, median of $ROUNDS alternating runs, ttl ${TTL} ms;" \
  "ruvio $($RUVIO --version | awk '{print $2}') + ruvio-py vs redis $(redis-server --version | awk '{print $3}' | cut -d= -f2) + redis-py $("$VENV/bin/python" -c 'import redis; print(redis.__version__)'); python $("$VENV/bin/python" -c 'import platform; print(platform.python_version())')"
printf '%-8s %-9s %12s %8s %9s %9s %10s %10s\n' flavor client cycles_per_s refused p50_us p99_us server_us client_us
for FL in sync asyncio; do
  runs_ruvio=(); runs_redis=()
  for _ in $(seq "$ROUNDS"); do
    runs_ruvio+=("$(run ruvio "$FL" $RUVIO_PORT "$RUVIO_PID")")
    runs_redis+=("$(run redis-py "$FL" $REDIS_PORT "$REDIS_PID")")
  done
  declare -A med=()
  for name in ruvio redis; do
    declare -n runs="runs_$name"
    for f in cycles_per_sec refused p50_us p99_us server_us client_us; do
      med[$name.$f]=$(for out in "${runs[@]}"; do field "$out" $f; done | tr '\n' ' ' | median)
    done
    unset -n runs
    printf '%-8s %-9s %12s %8s %9s %9s %10.1f %10.1f\n' "$FL" "$([ $name = ruvio ] && echo ruvio-py || echo redis-py)" \
      "${med[$name.cycles_per_sec]}" "${med[$name.refused]}" "${med[$name.p50_us]}" "${med[$name.p99_us]}" \
      "${med[$name.server_us]}" "${med[$name.client_us]}"
  done
  printf '%-8s %-9s %12.2f %8s %9.2f %9.2f %10.2f %10.2f\n' "$FL" ratio \
    "$(echo "${med[ruvio.cycles_per_sec]} / ${med[redis.cycles_per_sec]}" | bc -l)" "" \
    "$(echo "${med[ruvio.p50_us]} / ${med[redis.p50_us]}" | bc -l)" \
    "$(echo "${med[ruvio.p99_us]} / ${med[redis.p99_us]}" | bc -l)" \
    "$(echo "${med[ruvio.server_us]} / ${med[redis.server_us]}" | bc -l)" \
    "$(echo "${med[ruvio.client_us]} / ${med[redis.client_us]}" | bc -l)"
  unset med
done
echo "(ratio ruvio/redis: cycles_per_s higher is better; latency, server_us and client_us lower is better."
echo " server_us: the server's CPU (user + system) per cycle; client_us: the Python client process's CPU per cycle)"
