#!/usr/bin/env bash
# Runs the Java client's whole test suite against a real ruvio ($RUVIO_BIN), plus the Sentinel discovery tests
# against Debian's redis-server/redis-sentinel, then checks that the installed artifact works in a fresh project.
# Exits non-zero on any failure; never skips.
set -euo pipefail
cd "$(dirname "$0")"

if [ -z "${RUVIO_BIN:-}" ] || [ ! -x "${RUVIO_BIN}" ]; then
  echo "clients/java/test.sh: RUVIO_BIN must point at an executable ruvio binary (got '${RUVIO_BIN:-}')" >&2
  exit 1
fi
export RUVIO_BIN="$(cd "$(dirname "$RUVIO_BIN")" && pwd)/$(basename "$RUVIO_BIN")"

need_pkgs=()
command -v java >/dev/null || need_pkgs+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need_pkgs+=(maven)
command -v redis-server >/dev/null || need_pkgs+=(redis-server)
command -v redis-sentinel >/dev/null || need_pkgs+=(redis-sentinel)
command -v openssl >/dev/null || need_pkgs+=(openssl)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}"
  else
    echo "clients/java/test.sh: missing ${need_pkgs[*]} (install them: apt-get install -y ${need_pkgs[*]})" >&2
    exit 1
  fi
fi

# The whole suite (JUnit 5 via Surefire), the jar, and the install into the local Maven repository.
mvn -B -q install

# The installed artifact in a fresh project: compile and run the product post's snippet against a fresh server.
bash "$(pwd)/examples/fresh-project.sh"
echo "clients/java: all tests passed"
