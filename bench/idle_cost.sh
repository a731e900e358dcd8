#!/usr/bin/env bash
# What a system call, a clock read, an atomic add, a timed sleep and an idle wait ended by another thread cost on this
# machine, in wall time and in CPU time charged to the caller (docs/benchmarks.md, "What an idle wait costs here").
# Needs gcc.
# Usage: bash bench/idle_cost.sh
set -euo pipefail
cd "$(dirname "$0")"
out=$(mktemp /tmp/idle_cost.XXXXXX)
trap 'rm -f "$out"' EXIT
gcc -O2 -pthread idle_cost.c -o "$out"
"$out"
