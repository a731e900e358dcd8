#!/usr/bin/env bash
# Jepsen-style fault suite (issue 15): docs/faults.md.
#   bash scripts/faults.sh --quick       about five minutes (CI)
#   bash scripts/faults.sh --long N      N minutes (releases: N >= 60)
# Needs root (a private network namespace, nftables), Go, RUVIO_BIN, and Debian's redis-server/redis-sentinel.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

MODE=""; MINUTES=""; EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) MODE=quick; shift ;;
    --long) MODE=long; MINUTES="${2:?--long needs a number of minutes}"; shift 2 ;;
    --only) EXTRA+=(-only "$2"); shift 2 ;;
    *) echo "usage: $0 --quick | --long N [--only PHASE]" >&2; exit 2 ;;
  esac
done
[ -n "$MODE" ] || { echo "usage: $0 --quick | --long N" >&2; exit 2; }
: "${RUVIO_BIN:?RUVIO_BIN must name the ruvio binary to test}"
[ -x "$RUVIO_BIN" ] || { echo "RUVIO_BIN=$RUVIO_BIN is not an executable file" >&2; exit 2; }
RUVIO_BIN=$(readlink -f "$RUVIO_BIN")
[ "$(id -u)" = 0 ] || { echo "faults.sh needs root (network namespace, nftables)" >&2; exit 2; }
if ! command -v nft >/dev/null; then
  echo "nft missing: installing nftables" >&2
  apt-get install -y nftables >/dev/null || { echo "could not install nftables" >&2; exit 2; }
fi
if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]; then
  apt-get install -y faketime >/dev/null 2>&1 || { echo "could not install faketime (the clock nemesis needs it)" >&2; exit 2; }
fi
for b in redis-server redis-sentinel go ip; do
  command -v $b >/dev/null || { echo "$b is missing" >&2; exit 2; }
done
# The nodes run under their own uids: they must be able to run the binary.
case "$RUVIO_BIN" in
  /root/*) echo "RUVIO_BIN under /root is not readable by the nodes' uids; copy it elsewhere" >&2; exit 2 ;;
esac

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=${FAULTS_RESULTS:-$ROOT/faults/results}/$STAMP-$MODE
mkdir -p "$OUT"
BIN="$OUT/faults-harness"
(cd faults && timeout 300 go build -o "$BIN" .)

NS=ruvio-faults-$$
cleanup() {
  local pids
  pids=$(ip netns pids "$NS" 2>/dev/null || true)
  if [ -n "$pids" ]; then
    for p in $pids; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  fi
  ip netns delete "$NS" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up

if [ "$MODE" = quick ]; then
  ARGS=(-quick); LIMIT=900
else
  ARGS=(-minutes "$MINUTES"); LIMIT=$(( MINUTES * 60 * 2 + 900 ))
fi
START=$(date +%s)
set +e
# The harness starts every process itself (they inherit the namespace); hard bound on the whole run.
timeout -k 10 "$LIMIT" ip netns exec "$NS" "$BIN" -bin "$RUVIO_BIN" -out "$OUT" "${ARGS[@]}" "${EXTRA[@]}"
RC=$?
set -e
echo "faults: $MODE run took $(( $(date +%s) - START )) s, exit $RC; results in $OUT"
exit $RC
