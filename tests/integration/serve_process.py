"""`tuner serve` as a subprocess in its own process group, for the service's integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx
import psutil

from tuner.engine.server import free_port

from reference_study import ENV, short_code_workload

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T], timeout_s: float, process: subprocess.Popen | None = None,
             every_s: float = 0.5) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"tuner serve exited with {process.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


def small_workload(tmp_path: Path, requests: int = 10, max_tokens: int = 32) -> Path:
    """The first requests of the code workload, shorter: a job's replay takes seconds."""
    return short_code_workload(tmp_path, requests, max_tokens)


class ServeProcess:
    def __init__(self, db: str, log_dir: Path, *args: str):
        log_dir.mkdir(parents=True, exist_ok=True)
        # A port found free can be taken before the service binds it (a busy client's outgoing
        # connections use the same range): then the service exits saying so, and starts again.
        for _ in range(3):
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.stderr_path = log_dir / f"serve-{self.port}.log"
            with self.stderr_path.open("wb") as err:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "tuner.cli", "serve", "--db", db, "--port", str(self.port),
                     "--log-dir", str(log_dir), *args],
                    stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=ENV,
                    start_new_session=True)
            wait_for("the dashboard to answer or the service to exit",
                     lambda: self.process.poll() is not None or self._answers(), 60)
            if self.process.poll() is None:
                return
            if "address already in use" not in self.log:
                raise AssertionError(f"tuner serve exited with {self.process.returncode}: {self.log[-2000:]}")
        raise AssertionError("tuner serve found its port taken three times")

    def _answers(self) -> bool:
        try:
            self.get("/")
        except httpx.HTTPError:
            return False
        return True

    @property
    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=10)

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def terminate(self, timeout_s: float = 180) -> int:
        """SIGTERM, as systemd or docker stop would send."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def kill_everything(self) -> None:
        """Cleanup after a failed test: the service, its jobs and their servers, by process group."""
        groups = {self.process.pid}
        for child in self.descendants():
            try:
                groups.add(os.getpgid(child.pid))
            except ProcessLookupError:
                pass
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.process.wait(30)
