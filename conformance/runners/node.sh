#!/usr/bin/env bash
# Launcher of the Node.js conformance runner (clients/node/test/conformance/runner.mjs); see conformance/README.md.
# Run from the repository root with CONFORMANCE_DIR, RUVIO_ADDR, RUVIO_BIN and CONFORMANCE_RESULTS set.
# RUVIO_NODE picks the Node.js binary that builds and runs it (default: node on PATH); clients/node/test.sh uses it
# to run the corpus on Node.js 18 as well as on the machine's node.
set -euo pipefail
cd "$(dirname "$0")/../../clients/node"
NODE="${RUVIO_NODE:-node}"
command -v "$NODE" >/dev/null || { echo "conformance/runners/node.sh: no Node.js binary '$NODE'" >&2; exit 1; }
if [ ! -d node_modules/typescript ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
echo "conformance/runners/node.sh: Node.js $("$NODE" --version) ($(command -v "$NODE"))" >&2
# RUVIO_NODE_REPORT (optional): a file to which the version that runs the corpus is appended (test.sh checks it).
if [ -n "${RUVIO_NODE_REPORT:-}" ]; then "$NODE" --version >>"$RUVIO_NODE_REPORT"; fi
"$NODE" scripts/build.mjs >&2
exec "$NODE" test/conformance/runner.mjs
