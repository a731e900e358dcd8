"""Memory regressions measured on a fresh server: RSS growth per element, not timing.

Issue 33 asks for a 1M-element list in no more RSS than redis-server takes (14.5-14.6 B/element with Debian's
redis-server 7.0, bench/collections.sh). The list itself takes about 13 B/element (MEMORY USAGE); what the process
grows by beyond that is allocator heap left in holes by the buffers that carried the data in (docs/benchmarks.md,
"The 1M list's RSS"). Loading the list the way bench/collections.sh does (1000 RPUSH of 1000 elements, written as one
stream as redis-cli --pipe writes it) must stay under Redis's figure.
"""

from __future__ import annotations

import socket
import time

import pytest

from helpers import encode, proc_kib, rss_kib

pytestmark = pytest.mark.ruvio_only

ELEMENTS_PER_COMMAND = 1000
COMMANDS = 1000
# redis-server 7.0 grows by 14.5-14.6 B/element for this load (the bar); before the argument vectors were
# reused, ruvio grew by 16.0.
MAX_BYTES_PER_ELEMENT = 14.5
CRLF = b"\r\n"


def _load(port: int, payload: bytes, replies: int, last_reply: bytes | None = None) -> None:
    """Writes the whole payload while reading the replies as they come (as redis-cli --pipe does), so neither side's
    socket buffer fills up and stalls the other."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.setblocking(False)
        sent, got = 0, b""
        view = memoryview(payload)
        deadline = time.monotonic() + 60
        while got.count(CRLF) < replies:
            assert time.monotonic() < deadline, f"{got.count(CRLF)} of {replies} replies"
            progressed = False
            if sent < len(payload):
                try:
                    sent += s.send(view[sent:sent + 65536])
                    progressed = True
                except BlockingIOError:
                    pass
            try:
                chunk = s.recv(65536)
                assert chunk, "server closed the connection"
                got += chunk
                progressed = True
            except BlockingIOError:
                pass
            if not progressed:
                time.sleep(0.001)
        last = got.rstrip(CRLF).rsplit(CRLF, 1)[-1]
        expected = last_reply if last_reply is not None else b":%d" % (COMMANDS * ELEMENTS_PER_COMMAND)
        assert last == expected, got[-200:]


def _rss_growth_per_element(srv, command: str, key: str, last_reply: bytes | None = None) -> float:
    """Loads 1M elements "value:000000".. into `key` with COMMANDS `command`s of ELEMENTS_PER_COMMAND each, as
    bench/collections.sh does; the server's RSS growth per element."""
    payload = b"".join(
        encode(command, key, *[b"value:%06d" % i for i in range(c * ELEMENTS_PER_COMMAND, (c + 1) * ELEMENTS_PER_COMMAND)])
        for c in range(COMMANDS)
    )
    time.sleep(0.2)
    before = rss_kib(srv.pid)
    _load(srv.port, payload, COMMANDS, last_reply)
    time.sleep(0.2)
    return (rss_kib(srv.pid) - before) * 1024 / (COMMANDS * ELEMENTS_PER_COMMAND)


def test_a_1m_element_list_loaded_in_large_rpushes_takes_no_more_rss_than_redis(server_factory):
    # Persistence off, as in bench/collections.sh: the write log's buffers are not what this measures.
    srv = server_factory("--appendonly", "no")
    per_element = _rss_growth_per_element(srv, "RPUSH", "biglist")
    with srv.raw() as c:
        assert c.call("LLEN", "biglist") == COMMANDS * ELEMENTS_PER_COMMAND
        assert c.call("LINDEX", "biglist", "-1") == b"value:%06d" % (COMMANDS * ELEMENTS_PER_COMMAND - 1)
        layout = c.call("MEMORY", "USAGE", "biglist") / (COMMANDS * ELEMENTS_PER_COMMAND)
    assert per_element <= MAX_BYTES_PER_ELEMENT, (
        f"RSS grew by {per_element:.2f} B/element for a list whose layout takes {layout:.2f} B/element")


# redis-server 7.0 grows by 66 B/member for this set (bench/collections.sh); ruvio's members in a vector indexed by
# a table of 4-byte positions take about 27, where the indexmap layout before (a stored hash and an 8-byte index per
# member) took 43.
MAX_SET_BYTES_PER_MEMBER = 33


def test_a_1m_member_set_takes_its_indexed_layout_in_rss(server_factory):
    srv = server_factory("--appendonly", "no")
    per_member = _rss_growth_per_element(srv, "SADD", "bigset", b":%d" % ELEMENTS_PER_COMMAND)
    with srv.raw() as c:
        assert c.call("SCARD", "bigset") == COMMANDS * ELEMENTS_PER_COMMAND
        assert c.call("SMISMEMBER", "bigset", "value:000000", "value:999999", "value:1000000") == [1, 1, 0]
        # Removals move the last member into the hole: every member is still found afterwards.
        assert c.call("SREM", "bigset", *[b"value:%06d" % i for i in range(0, 1000, 2)]) == 500
        assert c.call("SMISMEMBER", "bigset", "value:000001", "value:000002", "value:999998") == [1, 0, 1]
        assert c.call("SCARD", "bigset") == COMMANDS * ELEMENTS_PER_COMMAND - 500
    assert per_member <= MAX_SET_BYTES_PER_MEMBER, f"RSS grew by {per_member:.2f} B/member"


def _thp_mode() -> str | None:
    """The kernel's transparent huge page mode ("always", "madvise", "never"), or None without THP."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return None


def _anon_huge_kib(pid: int) -> int:
    return proc_kib(pid, "smaps_rollup", "AnonHugePages")


def test_a_large_sorted_set_lives_on_huge_pages(server_factory):
    # The big sorted set's tree nodes and members are large blocks, which the binary's allocator maps on transparent
    # huge pages (crates/ruvio-server/src/huge_pages.rs). Under "madvise" only advised memory gets huge pages, so any
    # here are the allocator's doing; under "never" there is nothing to check.
    mode = _thp_mode()
    if mode != "madvise":
        pytest.skip(f"SKIPPED: transparent huge pages are {mode!r} here; the advice is checked only under 'madvise'")
    srv = server_factory("--appendonly", "no")
    members = 200_000
    payload = b"".join(
        encode("ZADD", "bigzset", *[x for i in range(c, c + 1000) for x in (b"%d" % i, b"member:%06d" % i)])
        for c in range(0, members, 1000)
    )
    before = _anon_huge_kib(srv.pid)
    _load(srv.port, payload, members // 1000, b":1000")
    with srv.raw() as c:
        assert c.call("ZCARD", "bigzset") == members
        assert c.call("ZRANGE", "bigzset", "199999", "199999", "WITHSCORES") == [b"member:199999", b"199999"]
        # The nodes move to a fresh block as the set grows: everything is still in order after the moves.
        assert c.call("ZRANK", "bigzset", "member:123456") == 123456
    # 200k nodes of 32 bytes and 200k members: two blocks of several MiB, each with whole aligned huge pages.
    assert _anon_huge_kib(srv.pid) - before >= 4096, f"AnonHugePages {_anon_huge_kib(srv.pid)} kB (before: {before})"
