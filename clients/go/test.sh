#!/usr/bin/env bash
# The Go client's whole test suite, against the server binary in $RUVIO_BIN:
#
#   RUVIO_BIN=/abs/path/to/ruvio bash clients/go/test.sh
#
# 1. checks the Go toolchain (>= 1.21; /usr/local/go is used when go is not on PATH) and, as root, installs
#    redis-server and redis-sentinel from apt for the failover tests (fails when they are missing otherwise);
# 2. go mod download, go vet, gofmt;
# 3. go test -race -count=1 ./... (every test starts its own servers; CONFORMANCE_DIR is pointed at the
#    repository's conformance/ corpus when it exists, so the conformance runner runs too);
# 4. builds the product post's snippets, untouched, in a fresh module that uses this one through a replace
#    directive, and runs them against a ruvio on 127.0.0.1:6379 inside a private network namespace (as root).
# Any failure or missing tool fails the script; nothing is skipped quietly.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
cd "$HERE"
die() { printf 'clients/go/test.sh: error: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

[ -n "${RUVIO_BIN:-}" ] || die "RUVIO_BIN is not set: point it at the ruvio binary under test"
[ -f "$RUVIO_BIN" ] && [ -x "$RUVIO_BIN" ] || die "RUVIO_BIN=$RUVIO_BIN is not an executable file"
RUVIO_BIN="$(cd "$(dirname "$RUVIO_BIN")" && pwd)/$(basename "$RUVIO_BIN")"
export RUVIO_BIN

if ! have go && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi
have go || die "the Go toolchain is missing (Go >= 1.21 is needed; Debian's golang-go is too old)"
gov="$(go env GOVERSION)"
case "$gov" in
  go1.2[1-9]*|go1.[3-9][0-9]*|go[2-9]*) ;;
  *) die "Go $gov is too old: the client needs Go >= 1.21" ;;
esac
echo "go: $gov"

if ! have redis-server || ! have redis-sentinel; then
  if [ "$(id -u)" = 0 ] && have apt-get; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q --no-install-recommends redis-server redis-sentinel ||
      die "apt-get install redis-server redis-sentinel failed"
  fi
fi
for tool in redis-server redis-sentinel; do
  have "$tool" || die "'$tool' is missing: the failover tests need it (apt-get install redis-server redis-sentinel)"
done

echo "==> go mod download, go vet, gofmt"
go mod download
go vet ./...
# snippet_test.go keeps the product post's snippets byte for byte, so it is not gofmt-formatted on purpose.
unformatted="$(gofmt -l . | grep -v '^snippet_test.go$' || true)"
[ -z "$unformatted" ] || die "not gofmt-formatted: $unformatted"

echo "==> go test -race ./..."
if [ -z "${CONFORMANCE_DIR:-}" ] && [ -f "$REPO/conformance/README.md" ]; then
  export CONFORMANCE_DIR="$REPO/conformance"
fi
[ -n "${CONFORMANCE_DIR:-}" ] || echo "NOTE: no conformance/ corpus in this checkout: TestConformance is skipped here (scripts/conformance.sh runs it)"
unset RUVIO_ADDR CONFORMANCE_RESULTS
go test -race -count=1 -timeout 20m ./...

echo "==> the product post's snippets, untouched, in a fresh module (replace directive)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/app"
cp testdata/snippet/main.go.txt "$work/app/main.go"
cat >"$work/app/go.mod" <<MOD
module example.com/snippet

go 1.21

require github.com/ruvio/ruvio/clients/go v0.0.0

replace github.com/ruvio/ruvio/clients/go => $HERE
MOD
(cd "$work/app" && go build -o "$work/snippet" .)
if [ "$(id -u)" = 0 ] && have unshare && have ip; then
  out="$(unshare --net bash -c '
    set -e
    ip link set lo up
    "$1" --port 6379 --dir "$2/data" --loglevel warning >"$2/ruvio.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && break; sleep 0.1; done
    "$2/snippet"; status=$?
    kill $pid
    exit $status' _ "$RUVIO_BIN" "$work")"
  [ "$out" = "$(printf 'true\nslot released')" ] || die "the snippet program printed '$out'"
  echo "snippet program: ok ($(echo "$out" | tr '\n' ' '))"
else
  die "running the snippet program needs root, unshare and ip (a private network namespace for port 6379)"
fi
echo "clients/go/test.sh: all passed"
