"""The fault suite's cases that kill the engine process or the tuner run vLLM as users do, the
engine core in a process of its own (the fixture ``engine_in_its_own_process``); the others keep
the tests' default, the engine in the API server's process (tests/engine_layout.py)."""

import pytest

from engine_layout import VARIABLE


@pytest.fixture
def engine_in_its_own_process(monkeypatch):
    monkeypatch.setenv(VARIABLE, "1")
