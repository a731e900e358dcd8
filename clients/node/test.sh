#!/usr/bin/env bash
# The Node.js client's whole test suite: installs what it needs (npm ci from the committed package-lock.json,
# redis-server and redis-sentinel for the failover tests, openssl for the TLS test's certificate), builds with tsc, runs every test with node:test against
# $RUVIO_BIN. Exits non-zero on any failure; never skips.
set -euo pipefail
cd "$(dirname "$0")"

fail() { echo "clients/node/test.sh: $*" >&2; exit 1; }

[ -n "${RUVIO_BIN:-}" ] || fail "RUVIO_BIN is not set (the ruvio binary the tests start, e.g. target/release/ruvio)"
[ -x "$RUVIO_BIN" ] || fail "RUVIO_BIN=$RUVIO_BIN is not an executable file"
RUVIO_BIN="$(realpath "$RUVIO_BIN")"
export RUVIO_BIN

command -v node >/dev/null || fail "node is not installed (Node.js 18 or later is needed)"
command -v npm >/dev/null || fail "npm is not installed"
major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$major" -ge 20 ] || fail "the tests need Node.js 20 or later (module.register); found $(node --version)"

missing=()
for tool in redis-server redis-sentinel openssl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-sentinel openssl >/dev/null
  else
    fail "missing ${missing[*]}: install them (apt-get install -y redis-server redis-sentinel openssl) or run as root"
  fi
fi

npm ci --no-audit --no-fund --loglevel=error
node scripts/build.mjs
node --test --test-concurrency=1 test/*.test.mjs
