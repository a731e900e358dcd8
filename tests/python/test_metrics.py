"""The Prometheus endpoint (metrics-port): scraped over HTTP from a real server and parsed with the reference
Python parser (prometheus_client), after real lock traffic."""

from __future__ import annotations

import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import _free_port

pytestmark = pytest.mark.ruvio_only


def scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    samples: dict = {}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("ruvio_"), family.name
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_metrics_endpoint_reports_commands_locks_and_clients(server_factory) -> None:
    mport = _free_port()
    srv = server_factory("--metrics-port", str(mport))
    r = srv.client()
    assert r.config_get("metrics-port") == {"metrics-port": str(mport)}
    t = r.execute_command("LEASE", "job", 30000)
    assert r.execute_command("RENEW", "job", t, 30000) == 1
    s = r.execute_command("SEMAPHORE", "sem", 2, 30000)
    r.set("str", "v")
    with pytest.raises(Exception):
        r.execute_command("LEASE", "str", 1000)  # WRONGTYPE: an error of LEASE
    # A waiter granted after ~200 ms.
    waited = {}

    def wait() -> None:
        w = srv.client()
        waited["token"] = w.execute_command("LEASE", "job", 30000, "WAIT", 5000)
        w.close()

    th = threading.Thread(target=wait)
    th.start()
    time.sleep(0.2)
    assert r.execute_command("RELEASE", "job", t) == 1
    th.join(10)
    assert waited["token"] > t
    assert r.execute_command("RELEASE", "sem", s) == 1

    m = scrape(mport)
    assert m[("ruvio_commands_total", (("cmd", "lease"),))] == 3
    assert m[("ruvio_command_errors_total", (("cmd", "lease"),))] == 1
    assert m[("ruvio_commands_total", (("cmd", "config|get"),))] >= 1
    assert m[("ruvio_command_duration_seconds_count", (("cmd", "lease"),))] == 3
    assert m[("ruvio_command_duration_seconds_bucket", (("cmd", "lease"), ("le", "+Inf")))] == 3
    assert m[("ruvio_lock_grants_total", (("kind", "lease"),))] == 2
    assert m[("ruvio_lock_grants_total", (("kind", "semaphore"),))] == 1
    assert m[("ruvio_lock_renewals_total", (("kind", "lease"),))] == 1
    assert m[("ruvio_lock_releases_total", (("kind", "lease"),))] == 1
    assert m[("ruvio_lock_releases_total", (("kind", "semaphore"),))] == 1
    assert m[("ruvio_lock_waits_total", (("kind", "lease"),))] == 1
    assert m[("ruvio_lock_wait_seconds_count", ())] == 1
    assert 0.1 < m[("ruvio_lock_wait_seconds_sum", ())] < 5
    assert m[("ruvio_lock_wait_seconds_bucket", (("le", "0.1"),))] == 0
    assert m[("ruvio_lock_wait_seconds_bucket", (("le", "1.0"),))] == 1
    assert m[("ruvio_connected_clients", ())] >= 1
    assert m[("ruvio_memory_rss_bytes", ())] > 1_000_000
    assert m[("ruvio_keys", (("db", "db0"),))] == 2  # "str" and the waiter's "job"
    assert m[("ruvio_is_primary", ())] == 1
    assert m[("ruvio_durable_waits_total", ())] == 0 and m[("ruvio_not_durable_total", ())] == 0
    r.close()


def test_metrics_are_off_by_default(server) -> None:
    r = server.client()
    assert r.config_get("metrics-port") == {"metrics-port": "0"}
    r.close()


def test_coordinator_metrics_endpoint(server_factory, tmp_path) -> None:
    import subprocess

    from test_operations import ruvio_bin, stop

    # The node lets the coordinator in (coordinator-pass) and the coordinator logs in as its built-in user, as
    # docs/coordinator.md sets a group up: otherwise the coordinator is refused the write lease and says so (WARN).
    primary = server_factory("--coordinator-pass", "metrics-secret")
    cport, mport = _free_port(), _free_port()
    conf = tmp_path / "coordinator.conf"
    conf.write_text(f"port {cport}\nbind 127.0.0.1\ndir {tmp_path}\ncoordinator-peers 127.0.0.1:{cport}\n"
                    f"sentinel monitor mymaster 127.0.0.1 {primary.port} 1\n"
                    "sentinel auth-user mymaster coordinator\nsentinel auth-pass mymaster metrics-secret\n"
                    f"metrics-port {mport}\n")
    log = open(tmp_path / "coordinator.log", "wb")
    proc = subprocess.Popen([ruvio_bin(), "coordinator", "--config", str(conf)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                m = scrape(mport)
                if m.get(("ruvio_coordinator_is_leader", ())) == 1:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "coordinator.log").read_text()
            time.sleep(0.2)
        assert m[("ruvio_coordinator_raft_role", (("role", "leader"),))] == 1
        assert m[("ruvio_coordinator_raft_term", ())] >= 1
        assert m[("ruvio_coordinator_members", ())] == 1
        assert m[("ruvio_coordinator_epoch", (("group", "mymaster"),))] == 0
        assert m[("ruvio_coordinator_primary", (("group", "mymaster"), ("primary", f"127.0.0.1:{primary.port}")))] == 1
        assert ("ruvio_coordinator_last_failover_epoch", (("group", "mymaster"),)) not in m, "no failover yet"
    finally:
        stop(proc)
        log.close()
    # Log hygiene: a clean start says nothing alarming, +monitor names the quorum, SIGTERM is acknowledged.
    text = (tmp_path / "coordinator.log").read_text()
    assert " WARN " not in text and " ERROR " not in text, text
    assert f"+monitor master mymaster 127.0.0.1 {primary.port} quorum 1" in text, text
    assert text.rstrip().endswith("received SIGTERM, shutting down"), text
    assert proc.returncode == 0
