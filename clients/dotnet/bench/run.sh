#!/usr/bin/env bash
# Side-by-side lock-cycle benchmark of Ruvio.Client (see BENCHMARKS.md). Starts ruvio ($RUVIO_BIN) and redis-server
# on free loopback ports, builds bench/Ruvio.Bench in Release, runs it.
# Usage: RUVIO_BIN=target/release/ruvio bash clients/dotnet/bench/run.sh [seconds per measurement] [callers] [rounds]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
fail() { echo "clients/dotnet/bench/run.sh: FAIL: $*" >&2; exit 1; }
command -v dotnet >/dev/null || fail "dotnet is not on PATH"
command -v redis-server >/dev/null || fail "redis-server is not installed"
[ -x "${RUVIO_BIN:-}" ] || fail "RUVIO_BIN must point at the ruvio binary"
work="$(mktemp -d)"; pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rp="$(free)"; sp="$(free)"
"$RUVIO_BIN" --port "$rp" --dir "$work/ruvio" --appendonly no --loglevel warning >/dev/null 2>&1 & pids+=($!)
redis-server --port "$sp" --bind 127.0.0.1 --dir "$work" --save "" --appendonly no --loglevel warning >/dev/null 2>&1 & pids+=($!)
for p in "$rp" "$sp"; do
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break; sleep 0.05; done
done
dotnet build "$here/Ruvio.Bench/Ruvio.Bench.csproj" -c Release -v quiet -nologo >&2
dotnet "$here/Ruvio.Bench/bin/Release/net10.0/Ruvio.Bench.dll" "127.0.0.1:$rp" "127.0.0.1:$sp" "${1:-5}" "${2:-50}" "${3:-3}"
