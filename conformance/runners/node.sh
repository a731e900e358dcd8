#!/usr/bin/env bash
# Launcher of the Node.js conformance runner (clients/node/test/conformance/runner.mjs); see conformance/README.md.
# Run from the repository root with CONFORMANCE_DIR, RUVIO_ADDR, RUVIO_BIN and CONFORMANCE_RESULTS set.
set -euo pipefail
cd "$(dirname "$0")/../../clients/node"
if [ ! -d node_modules/typescript ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
node scripts/build.mjs >&2
exec node test/conformance/runner.mjs
