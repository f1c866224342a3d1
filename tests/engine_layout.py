"""Where the tests run vLLM's engine core (vLLM's VLLM_ENABLE_V1_MULTIPROCESSING).

In the API server's process a server starts in 13.5 s instead of 20.6 s on these CPU hosts, with
the same figures in /metrics, and the integration tests start vLLM about 45 times: that is the
suite's default (tests/conftest.py). Tests that kill or stop the engine process, and tests that
run two servers on the 2 cores at once, keep vLLM's own default, the engine in a process of its
own: in the API server's process a server replaying beside another's start fell to 14 tok/s
against 359 alone (the GIL is shared with the HTTP side). A whole run can keep vLLM's default:
VLLM_ENABLE_V1_MULTIPROCESSING=1 make test.
"""

from __future__ import annotations

import os

VARIABLE = "VLLM_ENABLE_V1_MULTIPROCESSING"


def default_to_in_process() -> None:
    os.environ.setdefault(VARIABLE, "0")


def in_process_by_default(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a subprocess (a `tuner` command) whose vLLM servers run the engine in the API
    server's process, unless ``env`` says otherwise."""
    return {VARIABLE: "0", **env}


def own_process(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a subprocess whose vLLM servers run the engine in a process of its own."""
    return {**env, VARIABLE: "1"}


def one_core_per_worker() -> None:
    """`make test` runs the real-server tests that check what a run does two at a time
    (TUNER_TEST_CORE_EACH=1, pytest-xdist). vLLM's CPU build binds its OpenMP threads to every
    core it may use, and two servers spinning on the same two cores slow each other many times
    over: each worker's servers get a core of their own (VLLM_CPU_OMP_THREADS_BIND), which every
    server and `tuner` command the worker starts inherits."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if os.environ.get("TUNER_TEST_CORE_EACH") != "1" or not worker.startswith("gw"):
        return
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", str(cores[int(worker[2:]) % len(cores)]))
