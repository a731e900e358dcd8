"""Fixtures: real ruvio servers started from $RUVIO_BIN (the suite fails, never skips, when it is missing)."""

from __future__ import annotations

import uuid
from typing import Iterator

import pytest

from servers import Server, ruvio_bin, start_ruvio


def pytest_sessionstart(session: pytest.Session) -> None:
    ruvio_bin()  # raises: RUVIO_BIN unset or not executable fails the whole run loudly


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """One ruvio shared by tests that only use their own keys."""
    s = start_ruvio()
    yield s
    s.stop()


@pytest.fixture()
def own_server() -> Iterator[Server]:
    """A ruvio for this test alone (to pause, restart or kill)."""
    s = start_ruvio()
    yield s
    s.stop()


@pytest.fixture()
def key() -> str:
    """A key no other test uses."""
    return f"pytest:{uuid.uuid4().hex[:12]}"
