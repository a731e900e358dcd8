#!/usr/bin/env bash
# The long variant of the kill -9 durability tests, for manual runs: hundreds of kill -9 cycles under concurrent
# SET/INCR/LEASE load for each appendfsync policy. Checks after every restart: under always every acknowledged
# write and lease is there; under every policy what survives is a prefix of what ran and no fencing token repeats.
#
# Usage: bench/kill9-soak.sh [cycles]   (default 300; the CI tests run 20)
set -euo pipefail
cd "$(dirname "$0")/.."
export RUVIO_KILL9_CYCLES=${1:-300}
# Offline machines build from the vendored crates (scripts/lib/toolchains.sh).
. scripts/lib/toolchains.sh && ruvio_cargo_source || exit 1
exec cargo test --release -p ruvio --test persistence kill9 -- --test-threads 1 --nocapture
