#!/usr/bin/env bash
# StackExchange.Redis 3.4.35 (LockTake/LockExtend/LockRelease, RESP3, its serviceName= Sentinel mode against three
# ruvio coordinators) and DistributedLock.Redis 1.1.1 (lock, semaphore) run unchanged against $RUVIO_BIN and against
# redis-server. Needs the .NET 10 SDK, RUVIO_BIN and redis-server: missing any of them is a failure, never a skip.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
fail() { echo "tests/libraries/dotnet/test.sh: FAIL: $*" >&2; exit 1; }
command -v dotnet >/dev/null || fail "dotnet is not on PATH (install the .NET 10 SDK)"
[ -n "${RUVIO_BIN:-}" ] || fail "RUVIO_BIN is not set"
[ -x "$RUVIO_BIN" ] || fail "RUVIO_BIN=$RUVIO_BIN is not executable"
command -v redis-server >/dev/null || fail "redis-server is not installed (apt-get install redis-server)"
RUVIO_BIN="$(cd "$(dirname "$RUVIO_BIN")" && pwd)/$(basename "$RUVIO_BIN")"
export RUVIO_BIN DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

# DistributedLock's semaphore needs sorted sets. Ask the binary under test whether it has ZADD.
dir="$(mktemp -d)"; port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$RUVIO_BIN" --port "$port" --dir "$dir" --appendonly no >/dev/null 2>&1 & pid=$!
zadd=""
for _ in $(seq 1 100); do
  zadd="$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf '*4\r\n$4\r\nZADD\r\n$10\r\nzadd:probe\r\n$1\r\n1\r\n$1\r\na\r\n' >&3 && head -c 40 <&3) 2>/dev/null || true)"
  [ -n "$zadd" ] && break; sleep 0.05
done
kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"
filter=()
if [[ "$zadd" != :* ]]; then
  echo "################################################################################################" >&2
  echo "## NOTE: $RUVIO_BIN has no sorted sets (ZADD answered: ${zadd%%$'\r'*})." >&2
  echo "## DistributedLockTests.Semaphore_slots (RedisDistributedSemaphore) is LEFT OUT of this run until" >&2
  echo "## sorted sets land (issue 33). It is NOT counted as passed." >&2
  echo "################################################################################################" >&2
  filter=(--filter "Needs!=SortedSets")
fi
cd "$here"
dotnet test Ruvio.LibraryProof.csproj -c Release "${filter[@]}" --logger "console;verbosity=normal"
