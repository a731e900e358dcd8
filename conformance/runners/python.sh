#!/usr/bin/env bash
# Launcher of the Python client's conformance runner (clients/python/tests/conformance_runner.py).
# Run by scripts/conformance.sh from the repository root with CONFORMANCE_DIR, RUVIO_ADDR, RUVIO_BIN and
# CONFORMANCE_RESULTS set (conformance/README.md, section 7). The runner needs only the standard library and the
# client's source, so it runs from clients/python/src without installing anything (Python 3.9 or newer).
set -euo pipefail
: "${CONFORMANCE_DIR:?}" "${RUVIO_ADDR:?}" "${RUVIO_BIN:?}" "${CONFORMANCE_RESULTS:?}"
PY=python3
if [ -x clients/python/.venv/bin/python ]; then PY=clients/python/.venv/bin/python; fi
PYTHONPATH="$PWD/clients/python/src${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" clients/python/tests/conformance_runner.py
