#!/usr/bin/env bash
# Cross-language conformance: runs every client's runner against the corpus and prints one table.
#
#   RUVIO_BIN=/abs/path/to/ruvio bash scripts/conformance.sh
#
# Starts one ruvio (RUVIO_BIN) on a free loopback port with a fresh temporary --dir, runs every launcher
# conformance/runners/<lang>.sh from the repository root with CONFORMANCE_DIR, RUVIO_ADDR, RUVIO_BIN and
# CONFORMANCE_RESULTS set (conformance/README.md, section 7), and prints a table: rows are the corpus's case ids,
# columns the languages, cells pass / FAIL / missing. A language whose toolchain or registry this kind of machine
# does not have (scripts/lib/toolchains.sh: Go, Maven Central, the .NET SDK) gets no column and is named as not run.
# Exits non-zero when any cell is FAIL or missing, when a launcher exits non-zero, when a runner reports a case the
# corpus does not have, or when there is no launcher.
#
# Environment:
#   RUVIO_BIN            the server binary (required; nothing is built here)
#   CONFORMANCE_DIR      corpus folder (default: conformance/ of this repository)
#   CONFORMANCE_RUNNERS  folder of launchers (default: conformance/runners of this repository)
#   CONFORMANCE_ONLY     comma-separated languages to run (default: every launcher)
#   CONFORMANCE_TIMEOUT  seconds one launcher may take, builds included (default 1800); past it, it is killed
#                        and counts as broken
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

die() { printf 'scripts/conformance.sh: error: %s\n' "$*" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || die "python3 is needed (it reads the corpus and prints the table)"
command -v timeout >/dev/null 2>&1 || die "timeout (coreutils) is needed"

[ -n "${RUVIO_BIN:-}" ] || die "RUVIO_BIN is not set (the ruvio binary under test)"
[ -x "$RUVIO_BIN" ] || die "RUVIO_BIN=$RUVIO_BIN is not an executable file"
RUVIO_BIN="$(cd "$(dirname "$RUVIO_BIN")" && pwd)/$(basename "$RUVIO_BIN")"

CORPUS="${CONFORMANCE_DIR:-$REPO/conformance}"
[ -d "$CORPUS" ] || die "CONFORMANCE_DIR=$CORPUS is not a folder"
CORPUS="$(cd "$CORPUS" && pwd)"
RUNNERS="${CONFORMANCE_RUNNERS:-$REPO/conformance/runners}"
[ -d "$RUNNERS" ] || die "no launcher folder $RUNNERS"
RUNNERS="$(cd "$RUNNERS" && pwd)"

# shellcheck source=lib/toolchains.sh
source "$REPO/scripts/lib/toolchains.sh"

launchers=()
not_run=()   # "lang: reason", for languages whose toolchain or registry this kind of machine does not have
for f in "$RUNNERS"/*.sh; do
  [ -e "$f" ] || continue
  lang="$(basename "$f" .sh)"
  if [ -n "${CONFORMANCE_ONLY:-}" ] && [[ ",$CONFORMANCE_ONLY," != *",$lang,"* ]]; then
    continue
  fi
  reason="$(ruvio_missing_language "$lang")"
  if [ -n "$reason" ]; then
    not_run+=("$lang: $reason")
    continue
  fi
  launchers+=("$f")
done
for n in "${not_run[@]}"; do echo "conformance: NOT RUN on this machine: $n"; done
[ "${#launchers[@]}" -gt 0 ] || die "no launcher to run in $RUNNERS${CONFORMANCE_ONLY:+ (CONFORMANCE_ONLY=$CONFORMANCE_ONLY)}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/ruvio-conformance.XXXXXX")"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -CONT "$SERVER_PID" 2>/dev/null || true
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# A free port (released just before the server binds it), then wait until the server answers PING.
start_server() {
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  mkdir -p "$WORK/data"
  "$RUVIO_BIN" --port "$PORT" --dir "$WORK/data" >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  python3 - "$PORT" "$SERVER_PID" <<'PY' || { cat "$WORK/server.log" >&2; die "the server did not start"; }
import os, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("the server exited")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"PING\r\n")
            if s.recv(64).startswith(b"+PONG"):
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.05)
sys.exit("no PONG within 30 s")
PY
}
start_server
echo "conformance: corpus $CORPUS, server $RUVIO_BIN on 127.0.0.1:$PORT (pid $SERVER_PID)"

broken=()
langs=()
for f in "${launchers[@]}"; do
  lang="$(basename "$f" .sh)"
  langs+=("$lang")
  results="$WORK/$lang.results.jsonl"
  : >"$results"
  echo "conformance: running $lang ($f)"
  started=$SECONDS
  set +e
  CONFORMANCE_DIR="$CORPUS" RUVIO_ADDR="127.0.0.1:$PORT" RUVIO_BIN="$RUVIO_BIN" CONFORMANCE_RESULTS="$results" \
    timeout --kill-after=10 "${CONFORMANCE_TIMEOUT:-1800}" bash "$f" >"$WORK/$lang.log" 2>&1
  rc=$?
  [ "$rc" = 124 ] && echo "conformance: $lang took longer than ${CONFORMANCE_TIMEOUT:-1800} s and was stopped" >&2
  set -e
  echo "conformance: $lang finished in $((SECONDS - started)) s (exit $rc)"
  if [ "$rc" != 0 ]; then
    broken+=("$lang")
    echo "---- $lang: launcher exited $rc; last lines of its output ----" >&2
    tail -n 40 "$WORK/$lang.log" >&2
    echo "----" >&2
  fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    cat "$WORK/server.log" >&2
    die "the server died while $lang ran"
  fi
done

set +e
NOT_RUN="$(printf '%s\n' "${not_run[@]}")" python3 - "$CORPUS" "$WORK" "${broken[*]:-}" "${langs[@]}" <<'PY'
import glob, json, os, sys

corpus, work, broken, langs = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4:]
not_run = [line for line in os.environ.get("NOT_RUN", "").splitlines() if line.strip()]

def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)

# The case ids the corpus defines (README section 7): wire and guard ids as they are, scenario ids per protocol.
expected = []
for sub in ("wire", "scenarios", "guard"):
    for path in sorted(glob.glob(os.path.join(corpus, sub, "*.json"))):
        for case in load(path)["cases"]:
            if sub == "scenarios":
                expected += [f'{case["id"]}@resp{p}' for p in case.get("protocols", ["2"])]
            else:
                expected.append(case["id"])
if not expected:
    sys.exit(f"no cases found in {corpus}")
if len(set(expected)) != len(expected):
    sys.exit("the corpus has duplicate case ids")

cells, details, problems = {}, [], []
for lang in langs:
    path = os.path.join(work, f"{lang}.results.jsonl")
    seen = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                case, result = r["case"], r["result"]
            except (ValueError, KeyError, TypeError):
                problems.append(f"{lang}: line {n} of its results is not a valid result: {line.strip()[:200]}")
                continue
            if result not in ("pass", "fail"):
                problems.append(f"{lang}: {case}: result {result!r} is neither pass nor fail")
                result = "fail"
            if case not in expected:
                problems.append(f"{lang}: reported {case!r}, which the corpus does not have")
                continue
            if case in seen and seen[case] != result:
                problems.append(f"{lang}: {case} reported twice with different results")
                result = "fail"
            seen[case] = result if seen.get(case) != "fail" else "fail"
            if result == "fail":
                details.append(f"{lang}  {case}: {r.get('detail', '')}")
    for case in expected:
        cells[(case, lang)] = {"pass": "pass", "fail": "FAIL"}.get(seen.get(case), "missing")

width = max(len(c) for c in expected)
cols = [max(len(l), 7) for l in langs]
print()
print("case".ljust(width) + "  " + "  ".join(l.ljust(w) for l, w in zip(langs, cols)))
print("-" * width + "  " + "  ".join("-" * w for w in cols))
for case in expected:
    print(case.ljust(width) + "  " + "  ".join(cells[(case, l)].ljust(w) for l, w in zip(langs, cols)))
print()
bad = 0
for lang in langs:
    counts = {k: sum(1 for c in expected if cells[(c, lang)] == k) for k in ("pass", "FAIL", "missing")}
    bad += counts["FAIL"] + counts["missing"]
    state = " (launcher failed)" if lang in broken else ""
    print(f"{lang}: {counts['pass']} pass, {counts['FAIL']} FAIL, {counts['missing']} missing of {len(expected)}{state}")
for n in not_run:
    print(f"{n.split(':', 1)[0]}: NOT RUN here ({n.split(':', 1)[1].strip()}); no column")
if details:
    print("\nfailures:")
    for d in details:
        print("  " + d)
for p in problems:
    print("problem: " + p)
if bad or problems or broken:
    print("\nconformance: FAILED")
    sys.exit(1)
print("\nconformance: all cases pass in every language that ran" + (f" ({len(not_run)} not run here, named above)" if not_run else ""))
PY
status=$?
set -e
exit "$status"
