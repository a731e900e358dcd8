#!/usr/bin/env bash
# Launcher of the Java conformance runner (clients/java/src/test/java/io/ruvio/ConformanceRunner.java).
# Run from the repository root with CONFORMANCE_DIR, RUVIO_ADDR, RUVIO_BIN and CONFORMANCE_RESULTS set
# (see conformance/README.md). Needs what clients/java/test.sh installs (JDK 17, Maven, the Maven dependencies).
set -euo pipefail
: "${CONFORMANCE_DIR:?}" "${RUVIO_ADDR:?}" "${RUVIO_BIN:?}" "${CONFORMANCE_RESULTS:?}"
cd "$(dirname "$0")/../../clients/java"
mvn -B -q test-compile >&2
exec java -cp target/classes:target/test-classes io.ruvio.ConformanceRunner
