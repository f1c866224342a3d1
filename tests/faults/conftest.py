"""The fault suite runs vLLM as users do: the engine core in a process of its own, which it kills."""

import pytest


@pytest.fixture(autouse=True)
def engine_in_its_own_process(monkeypatch):
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
