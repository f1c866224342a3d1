"""Which GPUs a vLLM server may use, and waiting until they are really free before it starts.

A worker owns a set of GPUs (``--gpus 0,1``); each server it starts takes the first T of them,
T being the server's tensor parallel size, and sees only those (``CUDA_VISIBLE_DEVICES``).
A worker runs one server at a time, so two servers never share a GPU as long as the workers
of one host own disjoint sets (``split_gpus``).

GPU indices are nvidia-smi's (NVML's). ``cuda_env`` also sets ``CUDA_DEVICE_ORDER=PCI_BUS_ID``:
CUDA's default order is "fastest first", which on a host with mixed GPUs differs from NVML's
PCI bus order, and then ``CUDA_VISIBLE_DEVICES=1`` and NVML's GPU 1 would be different cards.

On machines without an NVIDIA GPU (or without ``nvidia-ml-py``) the free-memory wait is skipped;
``wait_until_free`` then returns a note for the caller to print once (``note_once``).
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable
from typing import Any

from tuner.errors import TunerError, UsageError

MIB = 1024 * 1024

# vLLM's spellings (vllm/engine/arg_utils.py: "--tensor-parallel-size", "-tp"); its
# FlexibleArgumentParser also turns underscores in long options into dashes.
_TP_LONG = re.compile(r"--tensor[-_]parallel[-_]size")
_TP_SHORT = "-tp"
_NUMBER = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() also passes "²", which int() refuses

NO_NVML_NOTE = ("no NVIDIA GPU (NVML unavailable): GPU placement and the free-memory wait "
                "are skipped")


class GpuBusyError(TunerError):
    """A GPU the next server needs was still in use when the wait ran out."""

    transient = True


def parse_gpus(text: str | None) -> tuple[int, ...] | None:
    """``"0,1"`` -> ``(0, 1)``; ``None`` or ``""`` -> ``None`` (no placement: the host default)."""
    if text is None or not text.strip():
        return None
    parts = [part.strip() for part in text.split(",")]
    if not all(_NUMBER.fullmatch(part) for part in parts):  # refuses "-1", "" and "1.5"
        raise UsageError(f"--gpus {text!r} is not a list of GPU indices; "
                         "write it like --gpus 0,1 (the numbers nvidia-smi shows)")
    gpus = tuple(int(part) for part in parts)
    if len(set(gpus)) != len(gpus):
        raise UsageError(f"--gpus {text!r} names a GPU twice; list each GPU once, like --gpus 0,1")
    return gpus


def tensor_parallel_size(server_args: list[str]) -> int:
    """The ``--tensor-parallel-size`` (or ``-tp``) in the server arguments; 1 without one.

    The last one wins, as in argparse. Abbreviations argparse would also accept
    (``--tensor-parallel``) and values set in a ``--config`` file are not seen.
    """
    size = 1
    for i, arg in enumerate(server_args):
        name, has_value, value = arg.partition("=")
        if not (_TP_LONG.fullmatch(name) or name == _TP_SHORT):
            continue
        if not has_value:
            if i + 1 >= len(server_args):
                raise UsageError(f"{name} has no value in the server arguments; "
                                 f"give it a number, like {name} 2")
            value = server_args[i + 1]
        if not _NUMBER.fullmatch(value) or int(value) < 1:
            raise UsageError(f"{name} {value!r} is not a number of GPUs; "
                             f"give it a whole number >= 1, like {name} 2")
        size = int(value)
    return size


def place(gpus: tuple[int, ...] | None, server_args: list[str]) -> tuple[int, ...] | None:
    """The GPUs one server takes: the first T of the worker's, T its tensor parallel size."""
    if gpus is None:
        return None
    size = tensor_parallel_size(server_args)
    if size > len(gpus):
        owned = ",".join(map(str, gpus))
        raise UsageError(f"--tensor-parallel-size {size} needs {size} GPUs but this worker owns "
                         f"{len(gpus)} (--gpus {owned}): give it more or lower the size")
    return gpus[:size]


def cuda_env(placed: tuple[int, ...] | None) -> dict[str, str]:
    """Environment for a server on ``placed``; empty (inherit the host's) for ``None``."""
    if placed is None:
        return {}
    # PCI_BUS_ID: make CUDA number GPUs as nvidia-smi/NVML do (see the module docstring).
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, placed)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def split_gpus(gpus: tuple[int, ...], workers: int) -> list[tuple[int, ...]]:
    """Split one host's GPUs among ``workers`` local workers: disjoint, sizes differing by <= 1."""
    if workers < 1:
        raise UsageError(f"{workers} workers cannot share GPUs; start at least one worker")
    if len(gpus) < workers:
        raise UsageError(f"{workers} workers need at least {workers} GPUs but only {len(gpus)} "
                         "were given; give more GPUs or start fewer workers")
    base, extra = divmod(len(gpus), workers)
    shares, start = [], 0
    for index in range(workers):
        size = base + (1 if index < extra else 0)  # the first `extra` workers take one more
        shares.append(gpus[start:start + size])
        start += size
    return shares


_said: set[str] = set()


def note_once(message: str | None, printer: Callable[[str], object]) -> None:
    """Print ``message`` the first time this process sees it; ignore ``None``."""
    if message is None or message in _said:
        return
    _said.add(message)
    printer(message)


def _load_nvml() -> Any | None:
    # Lazy: nvidia-ml-py is only useful on GPU hosts, and the tuner must run without it.
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def _usage(nvml: Any, handle: Any) -> tuple[int, list[int]]:
    """(used MiB, pids of compute processes) of one GPU."""
    used_mib = nvml.nvmlDeviceGetMemoryInfo(handle).used // MIB
    try:
        pids = [proc.pid for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle)]
    except nvml.NVMLError:
        pids = []  # some setups (MIG, vGPU) refuse the process list: memory alone decides
    return used_mib, pids


def _describe(gpu: int, used_mib: int, pids: list[int]) -> str:
    if not pids:
        who = "no compute process listed"
    else:
        who = ("process " if len(pids) == 1 else "processes ") + ", ".join(map(str, pids))
    return f"GPU {gpu} still holds {used_mib} MiB ({who})"


def wait_until_free(
    placed: tuple[int, ...] | None,
    timeout_s: float = 120.0,
    poll_s: float = 1.0,
    max_used_mib: int = 1024,
    nvml: Any | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Wait until every placed GPU has no compute process and at most ``max_used_mib`` used.

    A server restarted while the previous one's memory is still being released runs out of
    memory and fails for the wrong reason; this wait comes before every start. Returns ``None``
    once the GPUs are free (at once for ``placed=None``), or a note when there is no NVML here.
    Raises GpuBusyError after ``timeout_s``. ``nvml`` replaces the ``pynvml`` module in tests.
    """
    if placed is None:
        return None
    nvml = nvml if nvml is not None else _load_nvml()
    if nvml is None:
        return NO_NVML_NOTE
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:  # no driver or no GPU: libnvidia-ml is missing or cannot start
        return NO_NVML_NOTE
    try:
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            return NO_NVML_NOTE
        if missing := [gpu for gpu in placed if gpu >= count]:
            raise UsageError(f"--gpus names GPU {missing[0]} but this host has {count} "
                             f"(0-{count - 1}); use the indices nvidia-smi shows")
        # NVML's index i is CUDA_VISIBLE_DEVICES's i because cuda_env sets PCI_BUS_ID order.
        handles = {gpu: nvml.nvmlDeviceGetHandleByIndex(gpu) for gpu in placed}
        deadline = clock() + timeout_s
        while True:
            busy = []
            for gpu, handle in handles.items():
                used_mib, pids = _usage(nvml, handle)
                if pids or used_mib > max_used_mib:
                    busy.append(_describe(gpu, used_mib, pids))
            if not busy:
                return None
            if clock() >= deadline:
                raise GpuBusyError(
                    f"{', '.join(busy)} {timeout_s:g} s after the previous server stopped; "
                    "another program is using it, or the old server did not exit: "
                    "free the GPU or raise --gpu-free-timeout")
            sleep(poll_s)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass  # nothing to release; never hide the real outcome behind a shutdown error
