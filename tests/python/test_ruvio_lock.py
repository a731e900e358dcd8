"""`ruvio lock NAME --ttl T [--wait W] -- COMMAND...` (as etcdctl lock / consul lock) against a real server: the
command runs holding the lease with its token in RUVIO_FENCING_TOKEN, the exit codes, and a command that outlives a
lock deleted from under it is signalled (SIGTERM, then SIGKILL) while `ruvio lock` exits 4."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_operations import ruvio_bin

pytestmark = pytest.mark.ruvio_only


def lock(srv, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([ruvio_bin(), "lock", "-p", str(srv.port), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def wait_for(pred, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_runs_the_command_holding_the_lease_and_returns_its_status(server, tmp_path: Path) -> None:
    r = server.client()
    out = tmp_path / "token"
    p = lock(server, "job:nightly", "--ttl", "2s", "--",
             "sh", "-c", f'echo "$RUVIO_FENCING_TOKEN" > {out}; sleep 3; exit 7')
    wait_for(lambda: out.exists() and out.read_text().strip() != "")
    token = int(out.read_text())
    info = r.execute_command("LOCKINFO", "job:nightly")
    holders = info[b"holders"] if isinstance(info, dict) else info[5]
    holder = holders[0]
    assert (holder[b"token"] if isinstance(holder, dict) else holder[1]) == token, "the command runs holding the lock"
    assert p.wait(timeout=20) == 7, p.stderr.read()
    # It outlived its 2 s TTL: the lease was renewed meanwhile, then released at the end.
    assert r.execute_command("LOCKINFO", "job:nightly") is None
    r.close()


def test_a_command_outliving_a_deleted_lock_is_signalled_and_lock_exits_4(server, tmp_path: Path) -> None:
    r = server.client()
    marker = tmp_path / "got-term"
    started = tmp_path / "started"
    p = lock(server, "job:deleted", "--ttl", "3s", "--", "sh", "-c",
             f'trap "echo TERM > {marker}; exit 0" TERM; touch {started}; sleep 60 & wait')
    wait_for(started.exists)
    t0 = time.monotonic()
    assert r.delete("job:deleted") == 1  # the lock is gone from under the command
    assert p.wait(timeout=15) == 4
    assert time.monotonic() - t0 < 5, "noticed at the next renewal (TTL/3)"
    assert marker.read_text().strip() == "TERM"
    assert "lost 'job:deleted'" in p.stderr.read()
    r.close()


def test_a_command_ignoring_sigterm_is_killed_after_kill_after(server, tmp_path: Path) -> None:
    r = server.client()
    started = tmp_path / "started"
    p = lock(server, "job:stubborn", "--ttl", "1500ms", "--kill-after", "1s", "--", "sh", "-c",
             f"trap '' TERM; touch {started}; while true; do sleep 0.1; done")
    wait_for(started.exists)
    r.delete("job:stubborn")
    assert p.wait(timeout=15) == 4
    assert "SIGKILL" in p.stderr.read()
    r.close()


def test_held_elsewhere_exits_3_and_wait_queues(server) -> None:
    r = server.client()
    token = r.execute_command("LEASE", "job:busy", 30000)
    p = lock(server, "job:busy", "--ttl", "5s", "--", "true")
    assert p.wait(timeout=10) == 3 and "held by someone else" in p.stderr.read()
    p = lock(server, "job:busy", "--ttl", "5s", "--wait", "10s", "--", "sh", "-c", "exit 0")
    time.sleep(0.3)
    assert p.poll() is None, "waiting in the queue"
    assert r.execute_command("RELEASE", "job:busy", token) == 1
    assert p.wait(timeout=10) == 0
    r.close()


def test_signals_to_ruvio_lock_reach_the_command(server, tmp_path: Path) -> None:
    marker = tmp_path / "got-term"
    started = tmp_path / "started"
    p = lock(server, "job:stop", "--ttl", "5s", "--", "sh", "-c",
             f'trap "echo TERM > {marker}; exit 9" TERM; touch {started}; sleep 60 & wait')
    wait_for(started.exists)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 9, "the command's status"
    assert marker.exists()
    r = server.client()
    assert r.execute_command("LOCKINFO", "job:stop") is None, "released"
    r.close()


def test_bad_usage_and_unstartable_command(server) -> None:
    p = lock(server, "job", "--ttl", "1s")  # no command
    assert p.wait(timeout=10) == 2
    p = lock(server, "job:x", "--ttl", "1s", "--", "/nonexistent/command")
    assert p.wait(timeout=10) == 127
    r = server.client()
    assert r.execute_command("LOCKINFO", "job:x") is None, "released when the command cannot start"
    r.close()
    assert subprocess.run([ruvio_bin(), "lock", "-p", "1", "job", "--ttl", "1s", "--", "true"],
                          capture_output=True, timeout=30).returncode == 5
    assert os.path.exists(ruvio_bin())
