#!/usr/bin/env bash
# The single test command for ruvio.
#
#   bash scripts/test.sh
#
# 1. installs what the tests need (as root: redis-server + redis-tools from apt; always: the
#    pinned Python packages in tests/python/.venv and the pinned npm packages in tests/node),
# 2. builds the workspace and runs the Rust tests (cargo build/test --release --workspace --all-features),
# 3. runs the black-box compatibility suites against a started `ruvio` binary:
#    pytest tests/python, then `node --test` in tests/node,
# 4. runs each client package's own tests (clients/*/test.sh), the Redis lock libraries' proofs
#    (tests/libraries/*/test.sh) and the cross-language conformance corpus
#    (scripts/conformance.sh prints one table: corpus cases x languages),
# 5. runs the fault suite's quick run (scripts/faults.sh --quick, docs/faults.md; needs root).
#
# Environment:
#   RUVIO_BIN=/path/to/ruvio   binary under test (default: target/release/ruvio)
#   RUVIO_TEST_TARGET=redis    validate the black-box suites against Debian's redis-server
#                              instead; the cargo steps are skipped (explicitly announced)
#   PYTEST_ARGS="..."          extra arguments for pytest (e.g. "-x -k pubsub")
#
# Any failure, or any missing tool, fails the script: nothing is skipped quietly.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

TARGET="${RUVIO_TEST_TARGET:-ruvio}"
VENV="$REPO/tests/python/.venv"

step() { printf '\n==> %s\n' "$*"; }
die() { printf 'scripts/test.sh: error: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------------------------------
step "system packages"
if [ "$(id -u)" = "0" ] && have apt-get; then
  export DEBIAN_FRONTEND=noninteractive
  apt_ok=0
  for attempt in 1 2 3; do
    if apt-get update && apt-get install -y --no-install-recommends redis-server redis-tools redis-sentinel faketime; then
      apt_ok=1
      break
    fi
    echo "apt-get failed (attempt $attempt), retrying in 5 s" >&2
    sleep 5
  done
  if [ "$apt_ok" != 1 ]; then
    echo "WARNING: apt-get update/install failed; continuing only if the tools are already present" >&2
  fi
  if ! have node || ! have npm; then
    apt-get install -y --no-install-recommends nodejs npm || die "could not install nodejs/npm"
  fi
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    apt-get install -y --no-install-recommends python3-venv || die "could not install python3-venv"
  fi
else
  echo "not root (or no apt-get): not installing system packages"
fi

for tool in redis-server redis-sentinel redis-cli redis-benchmark python3 node npm; do
  have "$tool" || die "required tool '$tool' is missing (run as root to install it, or install it)"
done
if [ "$TARGET" != "redis" ]; then
  have cargo || die "required tool 'cargo' is missing"
fi
echo "redis-cli: $(redis-cli --version)"
echo "node: $(node --version), npm: $(npm --version), python: $(python3 --version 2>&1)"

# ---------------------------------------------------------------------------------------
step "python test dependencies (tests/python/requirements.txt -> $VENV)"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" || die "python3 -m venv failed"
fi
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -r tests/python/requirements.txt

step "node test dependencies (tests/node)"
(
  cd tests/node
  if [ -f package-lock.json ]; then
    npm ci --no-audit --no-fund
  else
    npm install --no-audit --no-fund
  fi
)

# ---------------------------------------------------------------------------------------
if [ "$TARGET" = "redis" ]; then
  step "RUVIO_TEST_TARGET=redis: SKIPPING cargo build/test; black-box suites run against redis-server"
else
  step "cargo build --release --workspace"
  cargo build --release --workspace

  step "cargo test --workspace --release --all-features"
  # --all-features: the client's async (tokio) API and its tests are behind a feature.
  cargo test --workspace --release --all-features

  export RUVIO_BIN="${RUVIO_BIN:-$REPO/target/release/ruvio}"
  [ -x "$RUVIO_BIN" ] || die "ruvio binary not found at $RUVIO_BIN after the build"
fi

# ---------------------------------------------------------------------------------------
step "python black-box suite (pytest tests/python, target: $TARGET)"
# shellcheck disable=SC2086
"$VENV/bin/python" -m pytest tests/python -q ${PYTEST_ARGS:-}

step "node black-box suite (node --test in tests/node, target: $TARGET)"
(
  cd tests/node
  timeout 600 node --test ./*.test.mjs
)

if [ "$TARGET" != "redis" ]; then
  # ---------------------------------------------------------------------------------------
  # Each client package has its own test script (it installs its ecosystem's packages and runs its suite against
  # $RUVIO_BIN, failing when a tool is missing).
  for client_tests in clients/*/test.sh; do
    [ -e "$client_tests" ] || continue
    step "client: bash $client_tests"
    bash "$client_tests"
  done

  # Existing Redis lock libraries (node-redlock, go-redsync, Redisson) run unchanged against ruvio, then against
  # redis-server.
  for lib_tests in tests/libraries/*/test.sh; do
    step "library proof: bash $lib_tests (ruvio, then redis-server)"
    bash "$lib_tests"
  done

  step "conformance corpus: every client's runner (bash scripts/conformance.sh)"
  bash scripts/conformance.sh
  step "conformance script self-test (it must fail on failed, missing and unknown cases)"
  bash conformance/selftest.sh

  # The fault suite's quick run (docs/faults.md): a cluster in a private network namespace under kill -9, pauses,
  # partitions, clock jumps and a full disk; every checker must pass for durable grants.
  step "fault suite (bash scripts/faults.sh --quick)"
  bash scripts/faults.sh --quick
fi

step "all tests passed"
