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

cd "$here"
dotnet test Ruvio.LibraryProof.csproj -c Release --logger "console;verbosity=normal"
