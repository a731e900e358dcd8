#!/usr/bin/env bash
# The Python client's whole test suite:
#   bash clients/python/test.sh          (RUVIO_BIN=/abs/path/to/ruvio must be set)
#
# 1. checks the tools the tests start (redis-server, redis-sentinel: installed with apt-get when root, else it fails),
# 2. makes clients/python/.venv and installs the pinned test dependencies (requirements-test.txt) and the package,
# 3. runs pytest (every test starts its own real servers), mypy --strict on the package,
# 4. builds the wheel and sdist with `python -m build`, installs the wheel into a fresh virtual environment and runs
#    the product post's snippet with it against a real ruvio.
# Any failure or missing tool fails the script; nothing is skipped quietly.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
die() { printf 'clients/python/test.sh: error: %s\n' "$*" >&2; exit 1; }
step() { printf '\n==> [python client] %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }

[ -n "${RUVIO_BIN:-}" ] || die "RUVIO_BIN is not set (point it at the ruvio binary, e.g. target/release/ruvio)"
[ -x "$RUVIO_BIN" ] || die "RUVIO_BIN=$RUVIO_BIN is not an executable file"
RUVIO_BIN="$(cd "$(dirname "$RUVIO_BIN")" && pwd)/$(basename "$RUVIO_BIN")"
export RUVIO_BIN

step "system tools"
need=()
have redis-server || need+=(redis-server)
have redis-sentinel || need+=(redis-sentinel)
have openssl || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && have apt-get; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null || true
    apt-get install -y -q --no-install-recommends "${need[@]}" || die "apt-get install ${need[*]} failed"
  else
    die "missing ${need[*]} (run as root to install them with apt-get)"
  fi
fi
for t in redis-server redis-sentinel openssl python3; do have "$t" || die "required tool '$t' is missing"; done
python3 -c 'import sys; assert sys.version_info >= (3, 9), sys.version' || die "Python 3.9 or newer is needed"

step "virtual environment (.venv) with the pinned test dependencies"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv || die "python3 -m venv failed (install python3-venv)"
fi
# Where PyPI cannot be reached (scripts/lib/toolchains.sh exports PIP_NO_INDEX/PIP_FIND_LINKS and RUVIO_PIP_OFFLINE=1),
# pip installs from the vendored wheels and the client is built without isolation: the backend (hatchling, editables)
# is installed into .venv first instead of into a throw-away build environment fetched from an index.
# shellcheck source=../../scripts/lib/toolchains.sh
source "$HERE/../../scripts/lib/toolchains.sh"
if [ -z "${RUVIO_PIP_OFFLINE:-}" ]; then ruvio_pip_source || die "no package index and no vendored wheels"; fi
build_isolation=()
build_flags=()
if [ "${RUVIO_PIP_OFFLINE:-0}" = 1 ]; then
  build_isolation=(--no-build-isolation)
  build_flags=(--no-isolation)
  .venv/bin/python -m pip install --disable-pip-version-check -q hatchling editables
fi
.venv/bin/python -m pip install --disable-pip-version-check -q -r requirements-test.txt
.venv/bin/python -m pip install --disable-pip-version-check -q "${build_isolation[@]}" -e .

step "pytest (RUVIO_BIN=$RUVIO_BIN)"
# shellcheck disable=SC2086
.venv/bin/python -m pytest -q -p no:cacheprovider tests ${PYTEST_ARGS:-}

step "mypy --strict (package)"
.venv/bin/python -m mypy --strict src/ruvio

step "python -m build, then the wheel in a fresh virtual environment runs the product post's snippet"
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
.venv/bin/python -m build "${build_flags[@]}" --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; die "python -m build failed"; }
ls "$WORK"/dist/ruvio-*.whl "$WORK"/dist/ruvio-*.tar.gz >/dev/null || die "build did not produce a wheel and an sdist"
python3 -m venv "$WORK/fresh"
"$WORK/fresh/bin/python" -m pip install --disable-pip-version-check -q "$WORK"/dist/ruvio-*.whl
"$WORK/fresh/bin/python" - "$WORK/dist" <<'PY'
import sys, tarfile, zipfile, glob
whl = glob.glob(sys.argv[1] + "/ruvio-*.whl")[0]
names = zipfile.ZipFile(whl).namelist()
assert "ruvio/py.typed" in names and "ruvio/asyncio/__init__.py" in names, names
sdist = glob.glob(sys.argv[1] + "/ruvio-*.tar.gz")[0]
assert any(n.endswith("src/ruvio/py.typed") for n in tarfile.open(sdist).getnames())
print("wheel and sdist contents ok")
PY
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$RUVIO_BIN" --port "$PORT" --dir "$WORK/data" --loglevel warning >"$WORK/ruvio.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done
cd "$WORK"  # so that the installed wheel, not the source tree, is imported
sed "s/6379/$PORT/" "$HERE/examples/lease.py" > snippet_lease.py
printf '\nassert isinstance(token, int) and released is True\nimport ruvio.asyncio, ruvio.sentinel\nprint("snippet ran with", ruvio.__file__)\n' >> snippet_lease.py
"$WORK/fresh/bin/python" snippet_lease.py | tee "$WORK/snippet.out"
grep -q "$WORK/fresh" "$WORK/snippet.out" || die "the snippet did not use the installed wheel"

step "python client: all passed"
