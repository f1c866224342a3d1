"""GPU placement and the free-memory wait.

This machine has no GPU, so the wait is driven by a small stand-in for ``pynvml`` (the module
of nvidia-ml-py) that has the same function names; one test runs the real path of this machine.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tuner.engine import gpus
from tuner.engine.gpus import (
    NO_NVML_NOTE,
    GpuBusyError,
    cuda_env,
    note_once,
    parse_gpus,
    place,
    split_gpus,
    tensor_parallel_size,
    wait_until_free,
)
from tuner.errors import TunerError, UsageError

MIB = 1024 * 1024


# --- parse_gpus ---------------------------------------------------------------------------------

def test_parse_gpus_reads_a_list():
    assert parse_gpus("0,1") == (0, 1)
    assert parse_gpus(" 3 , 5 ") == (3, 5)
    assert parse_gpus("7") == (7,)


@pytest.mark.parametrize("text", [None, "", "  "])
def test_parse_gpus_without_a_list_means_no_placement(text):
    assert parse_gpus(text) is None


@pytest.mark.parametrize("text, fragment", [
    ("a", "write it like --gpus 0,1"),
    ("-1", "write it like --gpus 0,1"),
    ("0,,1", "write it like --gpus 0,1"),
    ("²", "write it like --gpus 0,1"),
    ("0,1,0", "names a GPU twice"),
])
def test_parse_gpus_refuses_bad_input_with_the_fix(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        parse_gpus(text)


# --- tensor_parallel_size -----------------------------------------------------------------------

@pytest.mark.parametrize("args, size", [
    ([], 1),
    (["--max-model-len", "512"], 1),
    (["--tensor-parallel-size", "4"], 4),
    (["--tensor-parallel-size=4"], 4),
    (["-tp", "2"], 2),
    (["-tp=2"], 2),
    (["--tensor_parallel_size", "8"], 8),  # vLLM turns underscores into dashes
    (["-tp", "2", "--enforce-eager", "--tensor-parallel-size", "4"], 4),  # the last one wins
    (["--pipeline-parallel-size", "2"], 1),
])
def test_tensor_parallel_size_reads_vllm_spellings(args, size):
    assert tensor_parallel_size(args) == size


@pytest.mark.parametrize("args", [["-tp"], ["-tp", "x"], ["--tensor-parallel-size=0"]])
def test_tensor_parallel_size_refuses_a_bad_value(args):
    with pytest.raises(UsageError, match="like"):
        tensor_parallel_size(args)


# --- place and cuda_env -------------------------------------------------------------------------

def test_place_takes_the_first_t_gpus():
    assert place((2, 3, 5), []) == (2,)
    assert place((2, 3, 5), ["-tp", "2"]) == (2, 3)
    assert place((2, 3), ["--tensor-parallel-size", "2"]) == (2, 3)


def test_place_without_gpus_is_the_host_default():
    assert place(None, ["-tp", "4"]) is None


def test_place_refuses_more_than_the_worker_owns():
    with pytest.raises(UsageError) as error:
        place((0, 1), ["--tensor-parallel-size", "4"])
    assert str(error.value) == ("--tensor-parallel-size 4 needs 4 GPUs but this worker owns 2 "
                                "(--gpus 0,1): give it more or lower the size")


def test_cuda_env():
    assert cuda_env((0, 1)) == {"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert cuda_env(None) == {}


# --- split_gpus ---------------------------------------------------------------------------------

def test_split_gpus_is_disjoint_and_even():
    assert split_gpus(tuple(range(8)), 2) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert split_gpus((0, 1, 2, 3, 4), 3) == [(0, 1), (2, 3), (4,)]
    assert split_gpus((4, 6), 1) == [(4, 6)]
    shares = split_gpus(tuple(range(7)), 4)
    assert sorted(g for share in shares for g in share) == list(range(7))
    assert {len(share) for share in shares} == {1, 2}


def test_split_gpus_refuses_fewer_gpus_than_workers():
    with pytest.raises(UsageError, match="3 workers need at least 3 GPUs but only 2"):
        split_gpus((0, 1), 3)


# --- note_once ----------------------------------------------------------------------------------

def test_note_once_says_a_note_once(monkeypatch):
    monkeypatch.setattr(gpus, "_said", set())
    said: list[str] = []
    for _ in range(3):
        note_once(NO_NVML_NOTE, said.append)
    note_once(None, said.append)
    assert said == [NO_NVML_NOTE]


# --- wait_until_free, with a stand-in NVML ------------------------------------------------------

class FakeNvmlError(Exception):
    pass


class FakeNvml:
    """The pynvml functions the wait calls. ``used[gpu]`` and ``pids[gpu]`` list what each poll
    returns (the last entry repeats); ``calls`` records what was called."""

    NVMLError = FakeNvmlError

    def __init__(self, used: dict[int, list[int]], pids: dict[int, list[list[int]]] | None = None,
                 count: int = 4, init_error: bool = False):
        self.used, self.pids, self.count, self.init_error = used, pids or {}, count, init_error
        self.polls: dict[int, int] = {}
        self.calls: list[str] = []

    def nvmlInit(self):
        self.calls.append("init")
        if self.init_error:
            raise FakeNvmlError("Driver Not Loaded")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetMemoryInfo(self, handle):
        poll = self.polls[handle] = self.polls.get(handle, -1) + 1
        series = self.used[handle]
        return SimpleNamespace(total=80_000 * MIB, used=series[min(poll, len(series) - 1)] * MIB,
                               free=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        series = self.pids.get(handle, [[]])
        pids = series[min(self.polls.get(handle, 0), len(series) - 1)]
        return [SimpleNamespace(pid=pid, usedGpuMemory=None) for pid in pids]


class FakeTime:
    """clock and sleep that move together without real waiting."""

    def __init__(self):
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_wait_returns_when_memory_is_released():
    nvml = FakeNvml(used={1: [30_000, 8_000, 500], 2: [400]}, pids={1: [[4242], [4242], []]})
    fake = FakeTime()
    note = wait_until_free((1, 2), timeout_s=120, poll_s=1.0, nvml=nvml,
                           clock=fake.clock, sleep=fake.sleep)
    assert note is None
    assert fake.slept == [1.0, 1.0]  # two busy polls, free on the third
    assert nvml.calls == ["init", "shutdown"]


def test_wait_waits_for_the_process_to_go_even_when_memory_is_low():
    nvml = FakeNvml(used={0: [200]}, pids={0: [[77], []]})
    fake = FakeTime()
    assert wait_until_free((0,), nvml=nvml, clock=fake.clock, sleep=fake.sleep) is None
    assert fake.slept == [1.0]


def test_wait_times_out_naming_gpu_memory_and_processes():
    nvml = FakeNvml(used={0: [100], 1: [2300]}, pids={1: [[4242, 4243]]})
    fake = FakeTime()
    with pytest.raises(GpuBusyError) as error:
        wait_until_free((0, 1), timeout_s=120, nvml=nvml, clock=fake.clock, sleep=fake.sleep)
    assert isinstance(error.value, TunerError)
    assert str(error.value) == (
        "GPU 1 still holds 2300 MiB (processes 4242, 4243) 120 s after the previous server "
        "stopped; another program is using it, or the old server did not exit: free the GPU "
        "or raise --gpu-free-timeout")
    assert fake.now - 100.0 >= 120
    assert nvml.calls == ["init", "shutdown"]


def test_wait_names_memory_held_without_a_listed_process():
    nvml = FakeNvml(used={3: [5000]})
    fake = FakeTime()
    with pytest.raises(GpuBusyError, match=r"GPU 3 still holds 5000 MiB \(no compute process"):
        wait_until_free((3,), timeout_s=5, nvml=nvml, clock=fake.clock, sleep=fake.sleep)


def test_wait_returns_the_note_when_nvml_cannot_start():
    nvml = FakeNvml(used={0: [0]}, init_error=True)
    assert wait_until_free((0,), nvml=nvml) == NO_NVML_NOTE


def test_wait_returns_the_note_when_nvml_sees_no_gpu():
    nvml = FakeNvml(used={}, count=0)
    assert wait_until_free((0,), nvml=nvml) == NO_NVML_NOTE
    assert nvml.calls == ["init", "shutdown"]


def test_wait_refuses_a_gpu_the_host_does_not_have():
    nvml = FakeNvml(used={0: [0]}, count=2)
    with pytest.raises(UsageError, match="--gpus names GPU 5 but this host has 2"):
        wait_until_free((0, 5), nvml=nvml)
    assert nvml.calls == ["init", "shutdown"]


def test_wait_shuts_nvml_down_when_a_query_fails():
    nvml = FakeNvml(used={0: [0]})
    nvml.nvmlDeviceGetMemoryInfo = lambda handle: (_ for _ in ()).throw(RuntimeError("GPU is lost"))
    with pytest.raises(RuntimeError):
        wait_until_free((0,), nvml=nvml)
    assert nvml.calls == ["init", "shutdown"]


def test_wait_without_placement_touches_no_gpu():
    nvml = FakeNvml(used={})
    assert wait_until_free(None, nvml=nvml) is None
    assert nvml.calls == []


def test_wait_on_this_machine_without_a_gpu_returns_the_note():
    # No stand-in: the real lazy import of pynvml (absent here) or a real nvmlInit (no driver).
    assert wait_until_free((0,), timeout_s=1, poll_s=0.01) == NO_NVML_NOTE
