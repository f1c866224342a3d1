"""The fault suite runs vLLM as users do, the engine core in a process of its own: it kills it."""

import pytest

from engine_layout import VARIABLE


@pytest.fixture(autouse=True)
def engine_in_its_own_process(monkeypatch):
    monkeypatch.setenv(VARIABLE, "1")
