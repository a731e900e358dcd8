#!/usr/bin/env bash
# Redisson against $RUVIO_BIN, then the same tests against redis-server. Builds with Maven (Redisson and JUnit 5 from
# Maven Central). Exits non-zero on any failure; nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")"
[[ -n "${RUVIO_BIN:-}" && -x "$RUVIO_BIN" ]] || { echo "RUVIO_BIN must name the ruvio binary" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is required (apt-get install redis-server)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "mvn is required (apt-get install maven)" >&2; exit 1; }
command -v java >/dev/null || { echo "java 17 is required" >&2; exit 1; }
mvn -q -B -Dstyle.color=never -DskipTests test-compile
run() {
  echo "== Redisson against $1"
  rm -rf target/surefire-reports
  LIBRARY_TARGET="$1" mvn -q -B -Dstyle.color=never surefire:test -DfailIfNoTests=true
  # Surefire prints nothing with -q on success: show its summary (and fail if no test ran).
  summary=$(cat target/surefire-reports/*.txt | grep -E "^Tests run:")
  echo "$summary"
  if ! grep -q "Tests run: [1-9]" <<<"$summary"; then echo "no Redisson test ran against $1" >&2; exit 1; fi
}
run ruvio
run redis
