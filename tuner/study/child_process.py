"""The one way a tuner process starts another: `python -m tuner.cli COMMAND ...` in a session of
its own, its output in a log file, stopped through its process group.

Helper workers of `tuner optimize --workers`, jobs of `tuner serve` (and those a dead service
left running) and runs started from the dashboard all go through here. A child in its own session
has its own process group, which its vLLM server joins: a signal to that group reaches the child
and its server, and nothing else.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tuner.engine.server import process_group_alive

Child = subprocess.Popen[bytes]


def tuner_argv(command: str, *args: str) -> list[str]:
    """This interpreter, so the child runs in the same environment (venv) as its parent."""
    return [sys.executable, "-m", "tuner.cli", command, *args]


def start_child(argv: Sequence[str], log_path: Path, append: bool = False) -> Child:
    """Start ``argv`` with stdout and stderr in ``log_path`` and no stdin (it never prompts)."""
    with log_path.open("ab" if append else "wb") as log:
        return subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def signal_group(pgid: int, sig: int) -> None:
    """Signal a child's process group; one already gone is not an error."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


class Orphan:
    """A tuner child that an earlier process started and left behind (a `tuner serve` that died):
    not this process's to reap, so it is waited for by watching its process group, server and all.
    It has what ``stop_children`` uses of a Child."""

    POLL_S = 0.5

    def __init__(self, pid: int):
        self.pid = pid

    def wait(self, timeout: float | None = None) -> None:
        """Until the whole group is gone; TimeoutExpired after ``timeout`` seconds. Without a
        timeout (after SIGKILL) it returns at once: there is nothing to reap, and a server stuck
        in the GPU driver must not hold up the caller."""
        deadline = time.monotonic() + (timeout or 0.0)
        while process_group_alive(self.pid):
            if timeout is None:
                return
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"process group {self.pid}", timeout)
            time.sleep(self.POLL_S)


def stop_children(children: Sequence[Child | Orphan], grace_s: float,
                  on_kill: Callable[[Child | Orphan], None] | None = None) -> None:
    """SIGINT every group at once, then SIGKILL the ones still alive ``grace_s`` later.

    SIGINT, not SIGTERM first: `tuner optimize` takes it as Ctrl-C, stops its vLLM server and
    keeps its finished trials, so the same study resumes later. ``on_kill`` hears of each child
    about to be killed (to log it)."""
    for child in children:
        signal_group(child.pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            if on_kill is not None:
                on_kill(child)
            signal_group(child.pid, signal.SIGKILL)
            child.wait()
