"""Faults of the host, not of the config, as the engine room tells them apart (a stand-in server
script plays vLLM's log; tests/integration/test_optimize_real.py takes a real port from real vLLM)."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from fakes import Quiet
from tuner.engine import ServerOptions
from tuner.engine.log_cause import downloading
from tuner.engine.server import VllmServer
from tuner.errors import ServerStartError
from tuner.measure.trial import MeasureSettings, measure_config
from tuner.workload import Request, Workload

STARTED = "(EngineCore pid=7) INFO 12-01 10:00:00 [weight_utils.py:530] Using model weights format ['*.safetensors']"
DONE = "(EngineCore pid=7) INFO 12-01 10:00:09 [weight_utils.py:550] Time spent downloading weights for m: 9.1 seconds"
BAR = "model-00001-of-00004.safetensors:  12%|█▏        | 600M/4.98G [00:10<01:15, 58.1MB/s]"


def fake_server(tmp_path, body: str) -> str:
    script = tmp_path / "fake_vllm.py"
    script.write_text("import sys, time\n" + body)
    return f"{sys.executable} {script} {{model}}"


def start(tmp_path, body: str, **options) -> tuple[ServerStartError, float]:
    server = VllmServer("m", None, ServerOptions(server_cmd=fake_server(tmp_path, body), log_dir=tmp_path / "logs",
                                                 **options))
    started = time.monotonic()
    with pytest.raises(ServerStartError) as raised:
        server.start()
    return raised.value, time.monotonic() - started


def test_the_log_tells_a_download_in_progress():
    assert downloading([STARTED])
    assert not downloading([STARTED, DONE, "INFO Loading weights took 0.3 seconds"])
    assert downloading(["config.json: 100%|██████████| 1.2k/1.2k [00:00<00:00, 5.1MB/s]"])
    assert not downloading(["Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00]"])


def test_download_time_is_not_counted_against_the_start_timeout_and_a_long_one_is_transient(tmp_path):
    body = f"print({STARTED!r}, flush=True)\nwhile True:\n    print({BAR!r}, flush=True)\n    time.sleep(0.2)\n"
    error, took = start(tmp_path, body, start_timeout_s=1.0, download_timeout_s=3.0)
    assert error.transient
    assert "still downloading the model from the hub after 3 s" in str(error)
    assert "huggingface-cli download m" in str(error)
    assert took >= 3.0  # the start timeout (1 s) waited for the download


def test_a_start_that_hangs_after_its_download_is_the_configs_own_timeout(tmp_path):
    body = f"print({STARTED!r}, flush=True)\ntime.sleep(2)\nprint({DONE!r}, flush=True)\ntime.sleep(60)\n"
    error, took = start(tmp_path, body, start_timeout_s=1.0, download_timeout_s=30.0)
    assert not error.transient
    assert "did not become ready within 1 s after 2 s of downloading" in str(error)
    assert 2.5 <= took < 10


def test_a_port_taken_is_transient_and_measure_tries_again_after_a_wait(tmp_path):
    body = 'print("OSError: [Errno 98] Address already in use", flush=True)\nsys.exit(1)\n'
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "x"}\n')
    workload = Workload(path=path, type="code", requests=(Request(line=1, prompt="x"),))
    options = ServerOptions(server_cmd=fake_server(tmp_path, body), log_dir=tmp_path / "logs", port=18999)
    said = []

    class Phases(Quiet):
        def phase(self, description):
            said.append(description)

    started = time.monotonic()
    with pytest.raises(ServerStartError) as raised:
        measure_config("m", None, workload, MeasureSettings(server=options, retries=2, retry_wait_s=0.5), Phases())
    assert raised.value.transient and "Address already in use" in str(raised.value)
    assert len(list((tmp_path / "logs").glob("*.log"))) == 3  # the first start and two retries
    waits = [p for p in said if p.startswith("not the config's fault, trying again in")]
    assert [w.split(" s:")[0].rsplit(" ", 1)[1] for w in waits] == ["0", "1"]  # 0.5 s, then 1 s
    assert time.monotonic() - started >= 1.5


def test_the_reaper_takes_down_a_server_that_ignores_sigterm_when_its_parent_is_killed(tmp_path):
    """vLLM mid-start may not act on SIGTERM; the reaper's group goes anyway once the process
    that started it is SIGKILLed (a stand-in child that ignores SIGTERM and has a child)."""
    pids = tmp_path / "pids"
    stubborn = ("import os, signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)']); "
                f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{c.pid}}'); time.sleep(600)")
    starter = ("import os, subprocess, sys, time; subprocess.Popen([sys.executable, '-m', 'tuner.engine.reaper', "
               f"'--grace', '1', '--parent', str(os.getpid()), '--', sys.executable, '-c', {stubborn!r}], "
               "start_new_session=True); time.sleep(600)")
    parent, server = subprocess.Popen([sys.executable, "-c", starter]), None
    try:
        deadline = time.monotonic() + 30
        while not (pids.exists() and len(pids.read_text().split()) == 2) and time.monotonic() < deadline:
            time.sleep(0.1)
        server, engine = (int(p) for p in pids.read_text().split())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while any(alive(p) for p in (server, engine)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(server) and not alive(engine)
    finally:
        if parent.poll() is None:
            parent.kill()
        if server is not None and alive(server):  # only this test's own group
            os.killpg(os.getpgid(server), signal.SIGKILL)


def test_the_reaper_takes_down_its_server_when_its_parent_died_before_it_started_watching(tmp_path):
    """The tuner SIGKILLed right after it started the reaper, before the reaper's Python had
    read its parent (the fault suite's case): the reaper is told the tuner's pid, finds it
    gone at once and takes its server's group down."""
    pids = tmp_path / "pids"
    stubborn = ("import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"open({str(pids)!r}, 'w').write(str(os.getpid())); time.sleep(600)")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that is no longer this reaper's parent: the tuner, dead already
    reaper = subprocess.Popen([sys.executable, "-m", "tuner.engine.reaper", "--grace", "1", "--parent",
                               str(gone.pid), "--", sys.executable, "-c", stubborn], start_new_session=True)
    server = None
    try:
        assert reaper.wait(30) != 0  # it took its own group down, itself included
        deadline = time.monotonic() + 10
        while not pids.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        server = int(pids.read_text()) if pids.exists() else None
        assert server is None or not alive(server)
    finally:
        if reaper.poll() is None:
            os.killpg(reaper.pid, signal.SIGKILL)
        if server is not None and alive(server):
            os.killpg(os.getpgid(server), signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
