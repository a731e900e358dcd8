#!/usr/bin/env bash
# The Node.js client's whole test suite, on every Node.js it supports: installs what it needs (npm ci from the
# committed package-lock.json; redis-server and redis-sentinel for the failover tests and openssl for the TLS test's
# certificate; Node.js 18 builds from the npm registry, see scripts/install-node.sh), builds with tsc, and runs,
# against $RUVIO_BIN:
#
#   runtime                         node:test suite   test/compat.mjs   conformance (scripts/conformance.sh)
#   the machine's node (20)         yes               yes               yes
#   Node.js 18.20.8 (last 18)       yes               yes               yes
#   Node.js 18.0.0 (engines floor)  -  (1)            yes (2)           yes
#
#   (1) node 18.0 has no `node --test` and node:test has no before/after hooks before 18.8;
#   (2) through --experimental-loader, since module.register arrived in 18.19.
#
# Every lane runs even when an earlier one failed; the script ends with one line per lane and exits non-zero when
# any lane failed. Never skips. NODE18_VERSIONS overrides the Node.js 18 builds (space-separated; a build below
# 18.19 runs the floor lane).
set -euo pipefail
cd "$(dirname "$0")"
here="$(pwd)"
repo="$(cd ../.. && pwd)"

fail() { echo "clients/node/test.sh: $*" >&2; exit 1; }

[ -n "${RUVIO_BIN:-}" ] || fail "RUVIO_BIN is not set (the ruvio binary the tests start, e.g. target/release/ruvio)"
[ -x "$RUVIO_BIN" ] || fail "RUVIO_BIN=$RUVIO_BIN is not an executable file"
RUVIO_BIN="$(realpath "$RUVIO_BIN")"
export RUVIO_BIN

command -v node >/dev/null || fail "node is not installed (the machine's Node.js, 18.19 or later, runs the tooling)"
command -v npm >/dev/null || fail "npm is not installed"
command -v python3 >/dev/null || fail "python3 is not installed (scripts/conformance.sh needs it)"
# module.register (the snippet and packaging tests' resolve hook) came with Node.js 18.19 / 20.6.
node -e 'process.exit(typeof require("node:module").register === "function" ? 0 : 1)' ||
  fail "the machine's node $(node --version) is too old for the test tooling: Node.js 18.19 or later (20 recommended)"

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

# The runtimes: the machine's node, then the Node.js 18 builds (installed into a private cache, never on PATH).
runtimes=("$(command -v node)")
for v in ${NODE18_VERSIONS:-18.20.8 18.0.0}; do
  n18="$(bash scripts/install-node.sh "$v")" || fail "could not install Node.js $v"
  runtimes+=("$n18")
done

lanes=()
passed=0
failed=0
lane() { # lane <name> <command...>: runs one lane, records its result, never stops the script
  local name="$1"
  shift
  local started=$SECONDS
  echo
  echo "==== $name"
  if "$@"; then
    lanes+=("pass  $name ($((SECONDS - started)) s)")
    passed=$((passed + 1))
  else
    lanes+=("FAIL  $name (exit $?, $((SECONDS - started)) s)")
    failed=$((failed + 1))
  fi
}

conformance() { # conformance <node>: the corpus through conformance/runners/node.sh on that node
  local log report ran status=0
  log="$(mktemp "${TMPDIR:-/tmp}/ruvio-node-conformance.XXXXXX")"
  report="$log.version"
  if (cd "$repo" && CONFORMANCE_ONLY=node RUVIO_NODE="$1" RUVIO_NODE_REPORT="$report" bash scripts/conformance.sh >"$log" 2>&1); then
    grep -E '^node: |^conformance: all' "$log"
    ran="$(cat "$report" 2>/dev/null || true)"
    if [ "$ran" != "$("$1" --version)" ]; then
      echo "the launcher ran on '${ran:-nothing}', not on $("$1" --version)"
      status=1
    fi
  else
    cat "$log"
    status=1
  fi
  rm -f "$log" "$report"
  return "$status"
}

for n in "${runtimes[@]}"; do
  v="$("$n" --version)"
  if "$n" -e 'process.exit(typeof require("node:module").register === "function" ? 0 : 1)'; then
    lane "node $v: node:test suite" "$n" --test --test-concurrency=1 test/*.test.mjs
    lane "node $v: test/compat.mjs" "$n" test/compat.mjs
  else
    lane "node $v: test/compat.mjs (--experimental-loader)" "$n" --no-warnings --experimental-loader ./test/snippets/hooks.mjs test/compat.mjs
  fi
  lane "node $v: conformance corpus" conformance "$n"
done
node scripts/build.mjs # the conformance launcher rebuilt dist/ with each runtime; leave the machine's build

echo
echo "==== clients/node on ${#runtimes[@]} runtimes"
printf '%s\n' "${lanes[@]}"
echo "clients/node: $passed passed, $failed failed"
[ "$failed" = 0 ]
