#!/usr/bin/env bash
# Redisson against $RUVIO_BIN, then the same tests against redis-server (RedissonProofTest), plus the "after" code of
# docs/migrating.md against ruvio (MigrationTest: LEASE/IFGT/SEMAPHORE, which redis-server lacks). Builds with Maven
# (Redisson and JUnit 5 from Maven Central; Ruvio's Java client installed from clients/java into the local Maven
# repository). Exits non-zero on any failure; nothing is skipped.
set -euo pipefail
[[ -n "${RUVIO_BIN:-}" && -x "$RUVIO_BIN" ]] || { echo "RUVIO_BIN must name the ruvio binary" >&2; exit 1; }
export RUVIO_BIN="$(cd "$(dirname "$RUVIO_BIN")" && pwd)/$(basename "$RUVIO_BIN")"
cd "$(dirname "$0")"
need_pkgs=()
command -v java >/dev/null || need_pkgs+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need_pkgs+=(maven)
command -v redis-server >/dev/null || need_pkgs+=(redis-server)
command -v redis-sentinel >/dev/null || need_pkgs+=(redis-sentinel)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}"
  else
    echo "tests/libraries/java/test.sh: missing ${need_pkgs[*]} (apt-get install -y ${need_pkgs[*]})" >&2
    exit 1
  fi
fi
MVN=(mvn -q -B -Dstyle.color=never)
"${MVN[@]}" -f ../../../clients/java/pom.xml -DskipTests -Dmaven.javadoc.skip=true install
"${MVN[@]}" -DskipTests test-compile
run() { # run <target> <test classes>
  echo "== Redisson against $1 ($2)"
  rm -rf target/surefire-reports
  LIBRARY_TARGET="$1" "${MVN[@]}" surefire:test -Dtest="$2" -Dsurefire.failIfNoSpecifiedTests=true
  # Surefire prints nothing with -q on success: show its summary, and fail if a class ran no test.
  summary=$(grep -h -E "^Tests run:" target/surefire-reports/*.txt)
  echo "$summary"
  for class in ${2//,/ }; do
    grep -q "Tests run: [1-9].*in dev.ruvio.redissonproof.$class\$" <<<"$summary" \
      || { echo "no $class test ran against $1" >&2; exit 1; }
  done
}
run ruvio RedissonProofTest,MigrationTest
run redis RedissonProofTest
