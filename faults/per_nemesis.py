#!/usr/bin/env python3
"""Per-nemesis table of a fault-suite phase: operations attempted and acknowledged, and failovers, counted in the
window from each nemesis's start to the next one's start (its fault and the healing after it).

    python3 faults/per_nemesis.py faults/results/<run>/<phase>

Combined nemeses (`a+b`) are counted under "mixed". Reads history.jsonl.gz; prints a Markdown table."""
import collections
import gzip
import json
import sys


def main(phase_dir: str) -> None:
    rows = collections.defaultdict(lambda: {"faults": 0, "attempted": 0, "acknowledged": 0, "failovers": 0})
    current = "(before the first fault)"
    with gzip.open(f"{phase_dir}/history.jsonl.gz", "rt") as f:
        ops = [json.loads(line) for line in f]
    ops.sort(key=lambda o: o["inv"])
    for op in ops:
        if op["workload"] == "nemesis":
            if op["kind"] == "nemesis-start":
                current = "mixed" if "+" in op["value"] else op["value"]
                rows[current]["faults"] += 1
            elif op["kind"] == "failover":
                rows[current]["failovers"] += 1
            continue
        rows[current]["attempted"] += 1
        rows[current]["acknowledged"] += op["status"] == "ok"
    print("| nemesis | faults | ops attempted | ops acknowledged | failovers |")
    print("|---|---:|---:|---:|---:|")
    for name in sorted(rows):
        r = rows[name]
        print(f"| {name} | {r['faults']} | {r['attempted']:,} | {r['acknowledged']:,} | {r['failovers']} |")


if __name__ == "__main__":
    main(sys.argv[1])
