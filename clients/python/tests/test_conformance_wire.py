"""The conformance corpus's wire vectors (offline) through the runner, when the corpus is in the repository.

The whole corpus (scenarios and guard cases too) runs through `bash scripts/conformance.sh`, which launches
conformance/runners/python.sh; this test keeps the offline part in the client's own suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance_runner import run_decode, run_encode

CORPUS = Path(__file__).resolve().parents[3] / "conformance"


def _cases(name: str) -> list:
    path = CORPUS / "wire" / name
    if not path.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{path} is not in this checkout"))]
    return [pytest.param(c, id=c["id"]) for c in json.loads(path.read_text())["cases"]]


@pytest.mark.parametrize("case", _cases("decode.json"))
def test_decode(case: dict) -> None:
    assert run_decode(case) is None


@pytest.mark.parametrize("case", _cases("encode.json"))
def test_encode(case: dict) -> None:
    assert run_encode(case) is None
