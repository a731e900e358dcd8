# Helpers shared by the bench scripts (sourced, not run): a temporary folder, servers started in the background and
# stopped when the script exits, readiness checks, medians and CPU time.
#
# Needs RUVIO (the ruvio binary) set before start_ruvio is called.
#
# Placement: with BENCH_SERVER_CPUS set (a taskset CPU list, e.g. 0), start_ruvio and start_redis start the server
# on those CPUs, and `on_client_cpus CMD...` runs a load generator on BENCH_CLIENT_CPUS. On the 2-vCPU machine the two
# vCPUs are not alike, at times: the same server spent 11-14 us per rate-limiter check on cpu0 and 15-18 on cpu1,
# redis-server and Ruvio alike (bench/placement.sh; docs/benchmarks.md, "Which vCPU the server runs on"), so unpinned,
# the vCPU the scheduler picked for each server in a round could decide more than the servers did.

BENCH_PIDS=()

# Creates $BENCH_WORK and arranges for every started server to be stopped and the folder removed on exit.
bench_init() {
  BENCH_WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/ruvio-bench.XXXXXX")
  trap bench_cleanup EXIT
}

bench_cleanup() {
  local p
  for p in "${BENCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  BENCH_PIDS=()
  rm -rf "$BENCH_WORK"
}

# server_pin: the command prefix that puts a server on BENCH_SERVER_CPUS (empty when unset). taskset execs the
# server, so $! stays the server's pid.
server_pin() { [ -z "${BENCH_SERVER_CPUS:-}" ] || echo taskset -c "$BENCH_SERVER_CPUS"; }
# on_client_cpus CMD...: CMD on BENCH_CLIENT_CPUS when set.
on_client_cpus() { if [ -n "${BENCH_CLIENT_CPUS:-}" ]; then taskset -c "$BENCH_CLIENT_CPUS" "$@"; else "$@"; fi; }

# start_ruvio PORT [flags...]: ruvio with its own data folder; the pid is left in LAST_PID.
start_ruvio() {
  local port=$1; shift
  rm -rf "$BENCH_WORK/ruvio-$port"; mkdir -p "$BENCH_WORK/ruvio-$port"
  $(server_pin) "$RUVIO" --port "$port" --dir "$BENCH_WORK/ruvio-$port" --loglevel warning "$@" >"$BENCH_WORK/ruvio-$port.log" 2>&1 &
  LAST_PID=$!; BENCH_PIDS+=("$LAST_PID")
}

# start_redis PORT [flags...]: Debian's redis-server with its own data folder, no RDB snapshots.
start_redis() {
  local port=$1; shift
  rm -rf "$BENCH_WORK/redis-$port"; mkdir -p "$BENCH_WORK/redis-$port"
  $(server_pin) redis-server --port "$port" --dir "$BENCH_WORK/redis-$port" --save '' --loglevel warning "$@" >"$BENCH_WORK/redis-$port.log" 2>&1 &
  LAST_PID=$!; BENCH_PIDS+=("$LAST_PID")
}

# start_both RUVIO_PORT REDIS_PORT [flags...]: ruvio and redis-server with the same flags (Redis names), both ready;
# their pids in RUVIO_PID and REDIS_PID.
start_both() {
  local rport=$1 dport=$2; shift 2
  start_ruvio "$rport" "$@"; RUVIO_PID=$LAST_PID
  start_redis "$dport" "$@"; REDIS_PID=$LAST_PID
  wait_ready "$rport" "$dport"
}

# stop_servers: stops everything started so far (the work folder stays).
stop_servers() {
  local p
  for p in "${BENCH_PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  BENCH_PIDS=()
}

# wait_ready PORT...: until each answers PING (bounded: 10 s each).
wait_ready() {
  local p
  for p in "$@"; do
    for _ in $(seq 100); do [ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  done
}

# median: of the numbers on stdin (whitespace separated).
median() { tr -s ' \t' '\n\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# cpu_ticks PID: user + system CPU time of a process so far, in clock ticks (getconf CLK_TCK per second).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# us_per_op TICKS_BEFORE TICKS_AFTER OPS: CPU microseconds per operation between two cpu_ticks readings.
us_per_op() { echo "($2 - $1) * 1000000 / $(getconf CLK_TCK) / $3" | bc -l; }

# cpu_ns PID: user + system CPU time of a process so far, in nanoseconds: the process's CPU clock (clock_gettime on
# the clock id Linux makes from the pid, ended threads included). cpu_ticks rounds to whole ticks (10 ms): +-2.5% of
# a 400,000-request redis-benchmark test's server CPU; this does not round.
cpu_ns() { python3 -c 'import sys, time; pid = int(sys.argv[1]); print(time.clock_gettime_ns(((~pid) << 3) | 2))' "$1"; }

# us_per_op_ns NS_BEFORE NS_AFTER OPS: CPU microseconds per operation between two cpu_ns readings.
us_per_op_ns() { echo "($2 - $1) / 1000 / $3" | bc -l; }

# field OUTPUT KEY: the value of KEY in a driver's "key=value key=value ..." output line.
field() { echo "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1==k {print $2}'; }

# pin_by_default: on a machine with two or more CPUs, servers on cpu0 and load generators on cpu1 unless
# BENCH_SERVER_CPUS / BENCH_CLIENT_CPUS are set (set empty: no pinning). See "Placement" above.
pin_by_default() {
  if [ "$(nproc)" -ge 2 ]; then
    export BENCH_SERVER_CPUS=${BENCH_SERVER_CPUS-0} BENCH_CLIENT_CPUS=${BENCH_CLIENT_CPUS-1}
  fi
}

# cpu_seconds OUT CMD...: runs CMD with its stdout in the file OUT (stderr in OUT.err) and prints the CPU time it
# took itself, user + system, in seconds: for a load generator, whose own cost can cap what it measures.
cpu_seconds() {
  local out=$1 t TIMEFORMAT='%U %S'
  shift
  t=$( { time "$@" >"$out" 2>"$out.err"; } 2>&1 )
  echo "$t" | awk '{print $1 + $2}'
}

# lock_cycles_per_sec PORT MODE CLIENTS SECONDS: acquire+release cycles/s from the lock-cycle driver
# (crates/ruvio-server/examples/lock_cycle.rs, path in LOCK_DRIVER; MODE ruvio or redis), random keys out of 10000.
lock_cycles_per_sec() {
  "$LOCK_DRIVER" --port "$1" --mode "$2" --clients "$3" --keys 10000 --seconds "$4" |
    tr ' ' '\n' | awk -F= '$1 == "cycles_per_sec" {print $2}'
}
