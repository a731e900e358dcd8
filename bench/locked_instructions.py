#!/usr/bin/env python3
"""Atomic read-modify-write instructions (x86 `lock`-prefixed, and `xchg` with memory) executed per request, by
object and function, from a callgrind dump written with --dump-instr=yes (bench/ir-per-request.sh with LOCKED=1).

Each one costs this VM about 6 ns where a plain load and store cost under 1 (bench/idle_cost.sh), a cost callgrind's
instruction count does not show.

Usage: locked_instructions.py DUMP REQUESTS [TOP]
"""
import collections
import re
import subprocess
import sys


def executed(dump):
    """(object, address) -> times executed, and the function each address is in."""
    counts, function_of = collections.Counter(), {}
    obj = fn = None
    call_cost_line = False
    for line in open(dump):
        if line.startswith('ob='):
            obj = line[3:].strip()
        elif line.startswith('fn='):
            fn = line[3:].strip()
        elif line.startswith('calls='):
            call_cost_line = True  # the next line is the call's inclusive cost, not an instruction's own
        elif line.startswith('0x'):
            if call_cost_line:
                call_cost_line = False
                continue
            fields = line.split()
            if len(fields) >= 3:
                key = (obj, int(fields[0], 16))
                counts[key] += int(fields[2])
                function_of[key] = fn
    return counts, function_of


def locked_addresses(obj):
    text = subprocess.run(['objdump', '-d', '--no-show-raw-insn', obj], capture_output=True, text=True).stdout
    found = set()
    for line in text.splitlines():
        m = re.match(r'\s*([0-9a-f]+):\s+(\S+)(.*)', line)
        if m and (m.group(2) == 'lock' or (m.group(2) == 'xchg' and '(' in m.group(3))):
            found.add(int(m.group(1), 16))
    return found


def main():
    dump, requests = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    counts, function_of = executed(dump)
    total = 0.0
    for obj in sorted({o for o, _ in counts}):
        locked = locked_addresses(obj)
        per_fn = collections.Counter()
        for (o, addr), n in counts.items():
            if o == obj and addr in locked:
                per_fn[function_of[(o, addr)]] += n
        if not per_fn:
            continue
        here = sum(per_fn.values()) / requests
        total += here
        print(f'  {obj}: {here:.2f}')
        for fn, n in per_fn.most_common(top):
            print(f'    {n / requests:6.2f}  {fn[:140]}')
    print(f'  locked instructions per request: {total:.2f}')


if __name__ == '__main__':
    main()
