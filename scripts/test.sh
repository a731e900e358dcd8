#!/usr/bin/env bash
# The single test command for ruvio.
#
#   bash scripts/test.sh
#
# 1. installs what the tests need (as root: redis-server, redis-tools, tcl, chromium (the /locks page test) from apt; always: the pinned Python packages
#    in tests/python/.venv and the pinned npm packages in tests/node); where crates.io or PyPI cannot be reached it
#    builds from the vendored crates and installs the vendored wheels (scripts/lib/toolchains.sh, ../shared/vendor),
# 2. builds the workspace and runs the Rust tests (cargo build/test --release --workspace --all-features),
# 3. runs the black-box compatibility suites against a started `ruvio` binary:
#    pytest tests/python, then `node --test` in tests/node,
# 4. runs each client package's own tests (clients/*/test.sh), the Redis lock libraries' proofs
#    (tests/libraries/*/test.sh) and the cross-language conformance corpus
#    (scripts/conformance.sh prints one table: corpus cases x languages),
# 5. runs units of Redis's own test suite against ruvio (scripts/redis-suite.sh --check, docs/redis-suite.md) and the
#    fault suite's quick run (scripts/faults.sh --quick, docs/faults.md; needs root and Go),
# 6. prints a table of every part: passed, FAILED, or skipped with the reason, and a closing
#    "N passed, N failed, N skipped" line.
#
# A part is skipped only when its toolchain or registry does not exist on this kind of machine (Go, the Go module
# proxy, Maven Central, the .NET SDK; scripts/lib/toolchains.sh decides by trying the ordinary tool), never because it
# failed. A part that fails does not stop the others; the script exits non-zero when any part failed.
#
# Environment:
#   RUVIO_BIN=/path/to/ruvio   binary under test (default: target/release/ruvio)
#   RUVIO_TEST_TARGET=redis    validate the black-box suites against Debian's redis-server
#                              instead; the cargo steps are skipped (explicitly announced)
#   RUVIO_OFFLINE=1            build from the vendored crates and install the vendored wheels even if the registries
#                              answer
#   PYTEST_ARGS="..."          extra arguments for pytest (e.g. "-x -k pubsub")
#
# A missing tool fails the script: nothing is skipped quietly.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

TARGET="${RUVIO_TEST_TARGET:-ruvio}"
VENV="$REPO/tests/python/.venv"

step() { printf '\n==> %s\n' "$*"; }
die() { printf 'scripts/test.sh: error: %s\n' "$*" >&2; print_parts; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

# Every part's outcome, for the closing table: "name<TAB>passed|FAILED|skipped<TAB>reason or seconds".
PARTS=()
# part NAME COMMAND...: runs one part; a failure is recorded and the run goes on.
part() {
  local name="$1" started=$SECONDS rc=0
  shift
  step "$name: $*"
  "$@" || rc=$?
  if [ "$rc" = 0 ]; then
    PARTS+=("$name	passed	$((SECONDS - started)) s")
  else
    PARTS+=("$name	FAILED	exit $rc after $((SECONDS - started)) s")
    printf '\n==> %s FAILED (exit %s)\n' "$name" "$rc" >&2
  fi
}
# skip_part NAME REASON: a part whose toolchain or registry this kind of machine does not have.
skip_part() {
  step "$1: SKIPPED: $2"
  PARTS+=("$1	skipped	$2")
}
# part_unless_missing NAME MISSING-REASON COMMAND...: skips when the reason is non-empty, else runs the part.
part_unless_missing() {
  local name="$1" missing="$2"
  shift 2
  if [ -n "$missing" ]; then skip_part "$name" "$missing"; else part "$name" "$@"; fi
}
print_parts() {
  [ "${#PARTS[@]}" -gt 0 ] || return 0
  local line name result why passed=0 failed=0 skipped=0
  printf '\n==> what ran on this machine\n\n'
  printf '%-56s %-8s %s\n' "part" "result" "detail"
  printf '%-56s %-8s %s\n' "----" "------" "------"
  for line in "${PARTS[@]}"; do
    IFS=$'\t' read -r name result why <<<"$line"
    printf '%-56s %-8s %s\n' "$name" "$result" "$why"
    case "$result" in passed) passed=$((passed + 1)) ;; FAILED) failed=$((failed + 1)) ;; *) skipped=$((skipped + 1)) ;; esac
  done
  printf '\n%s passed, %s failed, %s skipped\n' "$passed" "$failed" "$skipped"
  [ "$failed" = 0 ]
}

# shellcheck source=lib/toolchains.sh
source "$REPO/scripts/lib/toolchains.sh"

# ---------------------------------------------------------------------------------------
step "system packages"
if [ "$(id -u)" = "0" ] && have apt-get; then
  export DEBIAN_FRONTEND=noninteractive
  apt_ok=0
  for attempt in 1 2 3; do
    if apt-get update && apt-get install -y --no-install-recommends redis-server redis-tools redis-sentinel faketime tcl chromium; then
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

for tool in redis-server redis-sentinel redis-cli redis-benchmark tclsh python3 node npm chromium; do
  have "$tool" || die "required tool '$tool' is missing (run as root to install it, or install it)"
done
if [ "$TARGET" != "redis" ]; then
  have cargo || die "required tool 'cargo' is missing"
fi
echo "redis-cli: $(redis-cli --version)"
echo "node: $(node --version), npm: $(npm --version), python: $(python3 --version 2>&1)"

# ---------------------------------------------------------------------------------------
step "what this machine can build (scripts/lib/toolchains.sh)"
ruvio_pip_source || die "PyPI is not reachable and there are no vendored wheels"
if [ "$TARGET" != "redis" ]; then
  ruvio_cargo_source || die "crates.io is not reachable and there are no vendored crates"
fi
ruvio_detect_toolchains
echo "cargo: ${RUVIO_CARGO_SOURCE:-not used}; pip: $RUVIO_PIP_SOURCE"
echo "go: ${RUVIO_MISSING_GO:-runs}; maven: ${RUVIO_MISSING_MAVEN:-runs}; dotnet: ${RUVIO_MISSING_DOTNET:-runs}"

# Which toolchain a client, a library proof or a conformance column needs, by its folder name.
missing_for() { ruvio_missing_language "$1"; }

# ---------------------------------------------------------------------------------------
step "python test dependencies (tests/python/requirements.txt -> $VENV)"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" || die "python3 -m venv failed"
fi
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -r tests/python/requirements.txt ||
  die "pip could not install tests/python/requirements.txt"

step "node test dependencies (tests/node)"
(
  cd tests/node
  if [ -f package-lock.json ]; then
    npm ci --no-audit --no-fund
  else
    npm install --no-audit --no-fund
  fi
) || die "npm could not install tests/node's packages"

# ---------------------------------------------------------------------------------------
if [ "$TARGET" = "redis" ]; then
  step "RUVIO_TEST_TARGET=redis: SKIPPING cargo build/test; black-box suites run against redis-server"
else
  step "cargo build --release --workspace"
  cargo build --release --workspace || die "cargo build failed: nothing else can run"

  # --all-features: the client's async (tokio) API and its tests are behind a feature.
  part "rust: cargo test --workspace" cargo test --workspace --release --all-features

  export RUVIO_BIN="${RUVIO_BIN:-$REPO/target/release/ruvio}"
  [ -x "$RUVIO_BIN" ] || die "ruvio binary not found at $RUVIO_BIN after the build"
fi

# ---------------------------------------------------------------------------------------
# shellcheck disable=SC2086
part "python black-box suite (tests/python)" "$VENV/bin/python" -m pytest tests/python -q ${PYTEST_ARGS:-}

node_suite() { (cd tests/node && timeout 600 node --test ./*.test.mjs); }
part "node black-box suite (tests/node)" node_suite

if [ "$TARGET" != "redis" ]; then
  # ---------------------------------------------------------------------------------------
  # Each client package has its own test script (it installs its ecosystem's packages and runs its suite against
  # $RUVIO_BIN, failing when a tool is missing); a client whose toolchain this machine lacks is skipped, named.
  for client_tests in clients/*/test.sh; do
    [ -e "$client_tests" ] || continue
    lang="$(basename "$(dirname "$client_tests")")"
    part_unless_missing "client: $lang" "$(missing_for "$lang")" bash "$client_tests"
  done

  # Existing Redis lock libraries (node-redlock, go-redsync, Redisson, StackExchange.Redis...) run unchanged against
  # ruvio, then against redis-server.
  for lib_tests in tests/libraries/*/test.sh; do
    [ -e "$lib_tests" ] || continue
    lang="$(basename "$(dirname "$lib_tests")")"
    part_unless_missing "library proof: $lang" "$(missing_for "$lang")" bash "$lib_tests"
  done

  # The table has a column per language this machine can run and names the others.
  part "conformance corpus (scripts/conformance.sh)" bash scripts/conformance.sh
  part "conformance script self-test" bash conformance/selftest.sh

  # Redis 7.0.15's own test suite as the oracle (docs/redis-suite.md): each unit against a fresh ruvio, compared with
  # the tests redis-server passes (recorded in tests/redis-suite/passing); fails below tests/redis-suite/baseline.txt.
  part "Redis's own test suite (scripts/redis-suite.sh --check)" bash scripts/redis-suite.sh --check

  # The fault suite's quick run (docs/faults.md): a cluster in a private network namespace under kill -9, pauses,
  # partitions, clock jumps and a full disk; every checker must pass for durable grants. It is written in Go.
  part_unless_missing "fault suite --quick (faults/)" "$RUVIO_MISSING_GO" bash scripts/faults.sh --quick
fi

if print_parts; then
  step "all tests that this machine can run passed"
else
  step "SOME TESTS FAILED (see the table above)"
  exit 1
fi
