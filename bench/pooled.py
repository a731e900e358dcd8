#!/usr/bin/env python3
"""Pools the back-to-back pairs of several runs of bench/collections.sh and says how often each of issue 33's speed
goals holds pair by pair, and so how often one run's median over ROUNDS pairs would miss it.

This VM moves a server's cost per request by 10-35% from one round to the next (docs/benchmarks.md), so a goal
judged by one run's median can miss although Ruvio meets it in most pairs. Pooling the pairs of many runs shows
both what the goal's ratio is (the pooled median) and how sure a run of ROUNDS rounds is to show it.

Usage: DETAIL=1 bash bench/collections.sh ... > run1.txt (several times), then
       python3 bench/pooled.py run1.txt run2.txt ...

For each goal: pairs meeting it, the pooled median of the pairs' ratios with its 95% confidence interval (the sign
test's, distribution-free; `*` when the whole interval meets the goal), and P(a run's median misses) for 3, 5 and 7
rounds if pairs missed independently at the pooled rate (a run misses when at least half its pairs do). Then the
chance that a run meets every goal at once under the same assumption, and how many of the given runs did.
"""
import math
import re
import statistics
import sys

TESTS = "lpush rpush lpop rpop sadd spop zadd zpopmin lrange_100".split()
# A pipelined test's DETAIL line: "  lpush  881057 /  0.89  790514 /  1.18  1.115 /  0.752".
PIPELINED = re.compile(r"^\s+(\w+)\s+\d+ /\s+[\d.]+\s+\d+ /\s+[\d.]+\s+([\d.]+) /\s+([\d.]+)$")
# A rate-limiter DETAIL line: "  77683 / 12.72   71386 / 13.87   1.088 /  0.917".
RATE_LIMITER = re.compile(r"^\s+\d+ /\s+[\d.]+\s+\d+ /\s+[\d.]+\s+([\d.]+) /\s+([\d.]+)$")
# A summary line: "lpush  881057  817996  1.055  1.077  0.89  1.18  0.764  0.752" (ratio 3rd, cpu_ratio 7th).
SUMMARY = re.compile(r"^(\w+)\s+\d+\s+\d+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+[\d.]+$")


def goals():
    """(name, kind) -> test of a ratio: throughput at least 1.0, CPU at most 0.9; the rate limiter's throughput."""
    g = {}
    for t in TESTS:
        g[(t, "throughput")] = lambda r: r >= 1.0
        g[(t, "cpu")] = lambda r: r <= 0.9
    g[("ratelimit", "throughput")] = lambda r: r >= 1.0
    return g


def median_bounds(values, confidence=0.95):
    """A distribution-free confidence interval for the median (the sign test's): the k-th smallest and k-th largest
    values, k the largest rank with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2. None when n is too small."""
    v, n = sorted(values), len(values)
    k, below = 0, 0.0
    while True:
        below_next = below + math.comb(n, k) / 2**n
        if below_next > (1 - confidence) / 2:
            break
        k, below = k + 1, below_next
    return (v[k - 1], v[n - k]) if k >= 1 else None


def p_median_misses(p, rounds):
    """A run of `rounds` (odd) pairs misses when (rounds + 1) / 2 or more of them miss."""
    return sum(math.comb(rounds, j) * p**j * (1 - p) ** (rounds - j) for j in range((rounds + 1) // 2, rounds + 1))


def main(paths):
    g = goals()
    pairs = {k: [] for k in g}
    runs_met, runs = 0, 0
    def end_run(summary):
        nonlocal runs, runs_met
        if len(summary) == len(g):
            runs += 1
            runs_met += all(g[k](v) for k, v in summary.items())

    for path in paths:
        summary = {}
        for line in open(path):
            if line.startswith("ruvio ") and " vs redis-server " in line:  # the next run's first line
                end_run(summary)
                summary = {}
            elif m := PIPELINED.match(line):
                if m.group(1) in TESTS:
                    pairs[(m.group(1), "throughput")].append(float(m.group(2)))
                    pairs[(m.group(1), "cpu")].append(float(m.group(3)))
            elif m := RATE_LIMITER.match(line):
                pairs[("ratelimit", "throughput")].append(float(m.group(1)))
            elif m := SUMMARY.match(line):
                summary[(m.group(1), "throughput")] = float(m.group(2))
                if m.group(1) != "ratelimit":
                    summary[(m.group(1), "cpu")] = float(m.group(3))
        end_run(summary)
    print(f"{'goal':24s} {'pairs met':>10s} {'median':>7s} {'95% interval':>15s}  P(run misses) 3 / 5 / 7 rounds")
    every = {3: 1.0, 5: 1.0, 7: 1.0}
    for k, test in g.items():
        vs = pairs[k]
        if not vs:
            continue
        met = sum(test(v) for v in vs)
        p = 1 - met / len(vs)
        for n in every:
            every[n] *= 1 - p_median_misses(p, n)
        ps = " / ".join(f"{p_median_misses(p, n):.3f}" for n in (3, 5, 7))
        bounds = median_bounds(vs)
        interval = f"{bounds[0]:.3f}-{bounds[1]:.3f}" if bounds else "too few"
        # The goal holds with that confidence when the whole interval is on its side.
        sure = "*" if bounds and all(test(b) for b in bounds) else " "
        print(f"{k[0] + ' ' + k[1]:24s} {met:4d} of {len(vs):<3d} {statistics.median(vs):7.3f} {interval:>14s}{sure}  {ps}")
    print("P(a run meets every goal), pairs independent: " + ", ".join(f"{n} rounds {v:.2f}" for n, v in every.items()))
    print(f"runs given that met every goal (their printed medians): {runs_met} of {runs}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
