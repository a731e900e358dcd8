#!/usr/bin/env bash
# Conformance launcher for the Go client (clients/go): runs its runner, TestConformance in clients/go's test tree,
# which reads the corpus from $CONFORMANCE_DIR and writes $CONFORMANCE_RESULTS (see conformance/README.md).
# Run from the repository root by scripts/conformance.sh; exits non-zero only when the runner could not run.
set -euo pipefail
: "${CONFORMANCE_DIR:?}" "${CONFORMANCE_RESULTS:?}" "${RUVIO_ADDR:?}" "${RUVIO_BIN:?}"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi
command -v go >/dev/null || { echo "conformance/runners/go.sh: 'go' (>= 1.21) is missing" >&2; exit 1; }
# The runner works from clients/go: make the paths it is given absolute first.
CONFORMANCE_DIR="$(realpath -m "$CONFORMANCE_DIR")"
CONFORMANCE_RESULTS="$(realpath -m "$CONFORMANCE_RESULTS")"
RUVIO_BIN="$(realpath -m "$RUVIO_BIN")"
export CONFORMANCE_DIR CONFORMANCE_RESULTS RUVIO_BIN
cd clients/go
go test -count=1 -run '^TestConformance$' -v . >"${CONFORMANCE_RESULTS}.log" 2>&1 || {
  status=$?
  # Failed cases do not fail the test in this mode: a non-zero exit means the runner itself broke.
  tail -50 "${CONFORMANCE_RESULTS}.log" >&2
  exit "$status"
}
grep -E '^\s+conformance_test.go:[0-9]+: conformance:' "${CONFORMANCE_RESULTS}.log" || true
test -s "$CONFORMANCE_RESULTS" || { echo "conformance/runners/go.sh: the runner wrote no results" >&2; exit 1; }
