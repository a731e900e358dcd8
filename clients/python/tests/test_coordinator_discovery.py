"""The client's own Sentinel discovery (`ruvio.sentinel.Sentinel`) against three `ruvio coordinator`s watching a
Ruvio primary and two replicas: it finds the primary, and after kill -9 of the primary the same client object
finds the new one and writes there."""

from __future__ import annotations

import os
import time
from typing import Iterator, List, Tuple

import pytest

import ruvio
from ruvio.sentinel import Sentinel
from servers import Server, _tempdir, free_port, ruvio_bin, start_ruvio

SERVICE = "mymaster"


def wait_until(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except (ruvio.ConnectionError, ruvio.TimeoutError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


COORD_PASS = "test-coordinator-secret"


@pytest.fixture()
def group() -> Iterator[Tuple[List[Server], List[Server]]]:
    # The nodes enable the built-in `coordinator` user the coordinators log in as (coordination commands).
    primary = start_ruvio("--appendonly", "yes", "--coordinator-pass", COORD_PASS)
    replicas = [start_ruvio("--appendonly", "yes", "--coordinator-pass", COORD_PASS, "--replicaof", f"127.0.0.1 {primary.port}") for _ in range(2)]
    ports = [free_port() for _ in range(3)]
    coords = []
    for port in ports:
        d = _tempdir("ruvio-py-coordinator-")
        conf = os.path.join(d, "coordinator.conf")
        with open(conf, "w") as f:
            f.write(f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                    f"coordinator-peers {' '.join(f'127.0.0.1:{p}' for p in ports)}\n"
                    f"sentinel monitor {SERVICE} 127.0.0.1 {primary.port} 2\n"
                    f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                    f"sentinel durability-replicas {SERVICE} 1\n"
                    f"sentinel auth-user {SERVICE} coordinator\nsentinel auth-pass {SERVICE} {COORD_PASS}\n"
                    "sentinel sentinel-user coordinators\nsentinel sentinel-pass test-peer-secret\n")
        coords.append(Server([ruvio_bin(), "coordinator", "--config", conf], port, d).start())
    nodes = [primary, *replicas]
    try:
        yield nodes, coords
    finally:
        for s in (*coords, *nodes):
            s.stop()


def durability_set(sent: ruvio.Ruvio) -> List[str]:
    info = sent.execute_command("INFO", "coordinator")
    text = info.decode() if isinstance(info, bytes) else str(info)
    group = next((line for line in text.splitlines() if line.startswith("group0:")), "")
    return group.split("durability_set=", 1)[-1].split(",", 1)[0].split(";") if "durability_set=" in group else []


def port_of(r: ruvio.Ruvio) -> int:
    reply = r.execute_command("CONFIG", "GET", "port")
    value = reply.get(b"port", reply.get("port")) if isinstance(reply, dict) else reply[1]
    return int(value)


def test_discovery_through_coordinators_follows_a_kill9_failover(group: Tuple[List[Server], List[Server]]) -> None:
    nodes, coords = group
    primary, replicas = nodes[0], nodes[1:]
    for c in coords:
        sent = ruvio.Ruvio("127.0.0.1", c.port, protocol=2)
        wait_until(lambda: len(sent.execute_command("SENTINEL", "REPLICAS", SERVICE)) == 2, 60,
                   "every coordinator to know both replicas")
        # Durable writes count only replicas in the coordinators' durability set (docs/replication.md).
        wait_until(lambda: all(f"127.0.0.1:{x.port}" in durability_set(sent) for x in replicas), 60,
                   "both replicas in every coordinator's durability set")
        sent.close()
    # ... and the primary counts them once a majority of the coordinators' write leases name them (durable=1).
    direct = ruvio.Ruvio("127.0.0.1", primary.port)
    wait_until(lambda: str(direct.execute_command("INFO", "replication")).count("durable=1") == 2, 60,
               "the primary to count both replicas for durable writes")
    direct.close()
    s = Sentinel([("127.0.0.1", c.port) for c in coords])
    assert s.discover_primary(SERVICE) == ("127.0.0.1", primary.port)
    r = s.primary_for(SERVICE, command_timeout=2.0, connect_timeout=1.0, durability_replicas=1)
    # A durable grant (as the README shows): answered once a replica holds it.
    token = r.lease("job:nightly-report", 30_000)
    assert isinstance(token, int)
    assert r.set("before", "1") is True
    assert port_of(r) == primary.port

    primary.kill9()
    deadline = time.monotonic() + 60
    errors = 0
    while True:
        try:
            assert r.set("after", "2") is True
            break
        except (ruvio.ConnectionError, ruvio.TimeoutError, ruvio.ResponseError) as e:
            # A durable connection's write is refused (-NOREPLICAS, nothing ran) until the remaining replica follows
            # the new primary and the coordinators count it again; -READONLY until the client finds the new primary.
            if isinstance(e, ruvio.ResponseError) and not isinstance(e, ruvio.ReadOnlyError) and e.code != "NOREPLICAS":
                raise
            errors += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    new = port_of(r)
    assert new in (replicas[0].port, replicas[1].port)
    assert s.discover_primary(SERVICE) == ("127.0.0.1", new)
    assert r.get("before") == b"1"
    assert r.get("after") == b"2"
    info = r.lock_info("job:nightly-report")  # the durable grant survived the failover, with its token
    assert info is not None and [h.token for h in info.holders] == [token]
    r.close()
