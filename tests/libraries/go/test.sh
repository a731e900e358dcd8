#!/usr/bin/env bash
# go-redsync against $RUVIO_BIN, then the same tests against redis-server. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"
[[ -n "${RUVIO_BIN:-}" && -x "$RUVIO_BIN" ]] || { echo "RUVIO_BIN must name the ruvio binary" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is required (apt-get install redis-server)" >&2; exit 1; }
go mod download
echo "== go-redsync against ruvio"
LIBRARY_TARGET=ruvio go test -count=1 -v ./... 2>&1 | grep -E "^(=== RUN|--- |PASS|FAIL|ok)|_test.go" 
echo "== go-redsync against redis-server"
LIBRARY_TARGET=redis go test -count=1 -v ./... 2>&1 | grep -E "^(=== RUN|--- |PASS|FAIL|ok)|_test.go"
