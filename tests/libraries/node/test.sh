#!/usr/bin/env bash
# node-redlock and ioredis's sentinels option (sentinel.test.js: ruvio coordinators) against $RUVIO_BIN, then the same tests against redis-server (proof the tests are the library's).
# Installs the pinned packages with `npm ci`. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"
[[ -n "${RUVIO_BIN:-}" && -x "$RUVIO_BIN" ]] || { echo "RUVIO_BIN must name the ruvio binary" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is required (apt-get install redis-server)" >&2; exit 1; }
npm ci --no-audit --no-fund >/dev/null
command -v redis-sentinel >/dev/null || { echo "redis-sentinel is required (apt-get install redis-sentinel)" >&2; exit 1; }
echo "== node-redlock and ioredis sentinels against ruvio"
LIBRARY_TARGET=ruvio node --test
echo "== node-redlock and ioredis sentinels against redis-server (and redis-sentinel)"
LIBRARY_TARGET=redis node --test
