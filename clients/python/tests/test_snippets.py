"""The product post's Python snippets (examples/lease.py, examples/semaphore.py), verbatim, run against a real
server and checked to behave as their comments say.

The snippets connect to 127.0.0.1:6379. So that the suite never fights over port 6379 with anything else on the
machine, each run replaces exactly one token, the port number ``6379``, with the test server's port; everything
else runs as written. A separate test checks the files against the post itself (shared/product), byte for byte.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict

import pytest

import ruvio
from servers import Server

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"


def run_snippet(name: str, port: int) -> Dict[str, Any]:
    source = (EXAMPLES / name).read_text()
    assert source.count("6379") == 1, "the snippet should name the port exactly once"
    ns: Dict[str, Any] = {"__name__": "__snippet__"}
    exec(compile(source.replace("6379", str(port)), str(EXAMPLES / name), "exec"), ns)
    ns["r"].close()
    return ns


def test_lease_snippet_holds_then_releases(own_server: Server) -> None:
    ns = run_snippet("lease.py", own_server.port)
    # token -> you hold it
    assert isinstance(ns["token"], int) and ns["token"] > 0
    # True -> released
    assert ns["released"] is True
    r = ruvio.Ruvio("127.0.0.1", own_server.port)
    assert r.lock_info("job:nightly-report") is None  # really released
    r.close()


def test_lease_snippet_none_when_someone_else_holds_it(own_server: Server) -> None:
    other = ruvio.Ruvio("127.0.0.1", own_server.port)
    theirs = other.lease("job:nightly-report", 30_000)
    assert theirs is not None
    ns = run_snippet("lease.py", own_server.port)
    # None -> someone else holds it
    assert ns["token"] is None
    assert "released" not in ns
    info = other.lock_info("job:nightly-report")
    assert info is not None and [h.token for h in info.holders] == [theirs]
    # False if the token no longer matches
    assert other.release("job:nightly-report", theirs) is True
    assert other.release("job:nightly-report", theirs) is False
    other.close()


def test_semaphore_snippet_slot_then_release(own_server: Server) -> None:
    ns = run_snippet("semaphore.py", own_server.port)
    # 1700000000123 -> a slot, this is your token
    assert isinstance(ns["token"], int) and ns["token"] > 0
    r = ruvio.Ruvio("127.0.0.1", own_server.port)
    assert r.lock_info("upstream:billing") is None  # released: the last holder left
    r.close()


def test_semaphore_snippet_none_when_all_slots_taken(own_server: Server) -> None:
    other = ruvio.Ruvio("127.0.0.1", own_server.port)
    tokens = [other.semaphore("upstream:billing", 8, 15_000) for _ in range(8)]
    assert all(isinstance(t, int) for t in tokens)
    ns = run_snippet("semaphore.py", own_server.port)
    # None -> all 8 slots are taken
    assert ns["token"] is None
    info = other.lock_info("upstream:billing")
    assert info is not None and len(info.holders) == 8
    other.close()


def _post() -> Path:
    # The post lives beside the repository (../shared), or where RUVIO_SHARED_DIR says.
    bases = [HERE.parents[2] / ".." / "shared"] + ([Path(os.environ["RUVIO_SHARED_DIR"])] if os.environ.get("RUVIO_SHARED_DIR") else [])
    for base in bases:
        p = base / "product" / "fencing-tokens-with-lease.md"
        if p.is_file():
            return p
    pytest.skip("shared/product/fencing-tokens-with-lease.md not found beside the repository: cannot compare "
                "the examples with the post (the snippets themselves ran in the tests above)")


def test_examples_are_the_posts_snippets_verbatim() -> None:
    text = _post().read_text()
    blocks = re.findall(r"(?ms)^import ruvio\n\n.*?(?=\n\n|\Z)", text)
    blocks = [b.rstrip("\n") + "\n" for b in blocks]
    assert (EXAMPLES / "lease.py").read_text() in blocks
    assert (EXAMPLES / "semaphore.py").read_text() in blocks


@pytest.mark.parametrize("name", ["lock_helper.py", "asyncio_lock.py", "commands.py"])
def test_examples_run(own_server: Server, name: str) -> None:
    import subprocess
    import sys

    env = dict(os.environ, RUVIO_PORT=str(own_server.port))
    out = subprocess.run([sys.executable, str(EXAMPLES / name)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    expected = {"lock_helper.py": "released: released", "asyncio_lock.py": "done with token",
                "commands.py": "'data': 'ruvio is up'"}[name]
    assert expected in out.stdout, out.stdout


def readme_first_python_block() -> str:
    text = (HERE.parent / "README.md").read_text()
    m = re.search(r"```python\n(.*?)```", text, re.S)
    assert m, "README.md has no python example"
    return m.group(1)


def test_readme_first_example_runs_from_the_readme_text(own_server: Server) -> None:
    # The README's first example, taken from the README itself (so the README cannot drift from what works); only
    # the port is replaced, as for the snippets above.
    source = readme_first_python_block()
    assert source.count("6379") == 1
    ns: Dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(source.replace("6379", str(own_server.port)), "README.md", "exec"), ns)
    ns["r"].close()
    assert isinstance(ns["token"], int) and ns["released"] is True
