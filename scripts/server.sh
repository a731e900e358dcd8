#!/usr/bin/env bash
# Runs the server, building it first: the README's one server command on every kind of machine.
#
#   bash scripts/server.sh [ruvio flags...]      e.g. bash scripts/server.sh --port 6380 --appendfsync always
#
# Where crates.io is reachable this is `cargo run --release -- FLAGS`; where it is not (or RUVIO_OFFLINE=1), the build
# uses the vendored crates (scripts/lib/toolchains.sh writes .cargo/config.toml for it).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# shellcheck source=lib/toolchains.sh
source scripts/lib/toolchains.sh
command -v cargo >/dev/null 2>&1 || { echo "scripts/server.sh: cargo is missing (install a Rust toolchain)" >&2; exit 1; }
ruvio_cargo_source || exit 1
exec cargo run --release -- "$@"
