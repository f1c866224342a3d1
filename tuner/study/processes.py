"""The helper workers `tuner optimize --workers N` starts beside itself: each is `tuner worker`,
which reads the study's stored request and runs it (``tuner.study.run.join_study``).
How they share the study (heartbeats, stale trials) is ``tuner.study.workers``'s business; how a
tuner child process is started and stopped is ``tuner.study.child_process``'s.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tuner.study.child_process import Child, signal_group, start_child, tuner_argv
from tuner.errors import UsageError


@contextlib.contextmanager
def helper_workers(name: str, url: str, gpu_sets: Sequence[Sequence[int] | None], heartbeat: int,
                   gpu_free_timeout: float, log_dir: Path,
                   report: Callable[[str], None]) -> Iterator[Callable[[], None]]:
    """`tuner optimize --workers N`: yields what starts the N-1 helpers (the study calls it once
    the study exists, so they find it); on leaving, waits for them to finish their trials."""
    helpers: list[Child] = []
    try:
        yield lambda: helpers.extend(start_workers(name, url, gpu_sets, heartbeat, gpu_free_timeout,
                                                   log_dir, report))
    finally:
        wait_for_workers(helpers)


def start_workers(name: str, url: str, gpu_sets: Sequence[Sequence[int] | None], heartbeat: int,
                  gpu_free_timeout: float, log_dir: Path, report: Callable[[str], None]) -> list[Child]:
    """`tuner worker` processes beside this one, each in its own process group with its log."""
    helpers: list[Child] = []
    if not gpu_sets:
        return helpers
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the log folder {log_dir} ({exc.strerror}); "
                         "pass a writable --log-dir") from None
    for i, gpus in enumerate(gpu_sets, start=1):
        argv = tuner_argv("worker", "--study", name, "--db", url, "--heartbeat", str(heartbeat),
                          "--gpu-free-timeout", str(gpu_free_timeout))
        if gpus:
            argv += ["--gpus", ",".join(map(str, gpus))]
        log_path = log_dir / f"worker-{i}-{os.getpid()}.log"
        helpers.append(start_child(argv, log_path))
        report(f"worker {i} started (pid {helpers[-1].pid}, log {log_path})")
    return helpers


def wait_for_workers(helpers: Sequence[Child]) -> None:
    """Wait for the workers to finish their trials; on Ctrl-C, interrupt them (they resume).
    No SIGKILL: a worker's interrupt stops its server and stores its trial, then it exits."""
    try:
        for helper in helpers:
            helper.wait()
    except KeyboardInterrupt:
        for helper in helpers:
            if helper.poll() is None:
                signal_group(helper.pid, signal.SIGINT)
        for helper in helpers:
            helper.wait()
        raise
