#!/usr/bin/env bash
# Launcher of the Rust client's conformance runner (crates/ruvio-client/tests/conformance; protocol in
# conformance/README.md, section 7). Run by scripts/conformance.sh from the repository root with CONFORMANCE_DIR,
# RUVIO_ADDR, RUVIO_BIN and CONFORMANCE_RESULTS set. Exits non-zero only when the runner could not run.
set -euo pipefail
for v in CONFORMANCE_DIR RUVIO_ADDR RUVIO_BIN CONFORMANCE_RESULTS; do
  if [ -z "${!v:-}" ]; then
    echo "conformance/runners/rust.sh: $v is not set (run bash scripts/conformance.sh)" >&2
    exit 2
  fi
done
# The error catalogue must agree with the server's source; a drift breaks the run (it is not one failed case).
cargo test --release -q -p ruvio-client --test conformance_errors
cargo test --release -q -p ruvio-client --test conformance
