"""Bad input to `tuner measure` ends in one clear sentence and exit code 2, before any server starts."""

import subprocess
import sys
from pathlib import Path

import pytest

TUNER = [sys.executable, "-m", "tuner.cli"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*TUNER, *args], capture_output=True, text=True, cwd=cwd, timeout=60)


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "code.jsonl"
    path.write_text('{"prompt": "x"}\n')
    return path


def assert_user_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    for fragment in fragments:
        assert fragment in result.stderr


def test_bad_workload_line_names_file_and_line(tmp_path):
    bad = tmp_path / "chat.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": "x", "arrival_s": -1}\n')
    result = run("measure", "--workload", str(bad), "--model", "m", cwd=tmp_path)
    assert_user_error(result, f"{bad}:2: 'arrival_s' must be a number of seconds >= 0")
    assert not (tmp_path / ".tuner").exists()  # no server was started, no log written


def test_missing_workload(tmp_path):
    result = run("measure", "--workload", str(tmp_path / "nope.jsonl"), "--model", "m", cwd=tmp_path)
    assert_user_error(result, "nope.jsonl: no such file")


@pytest.mark.parametrize(("args", "fragment"), [
    (["--spec", "{bad"], "--spec is not valid JSON"),
    (["--spec", '{"method": "ngram", "num_speculative_tokens": 2}', "--k", "3"], "not both"),
    (["--method", "ngram"], "needs --k"),
    (["--k", "3"], "--draft and --k need --method"),
    (["--method", "draft_model", "--k", "3"], "needs a draft checkpoint"),
    (["--load", "rate"], "--load rate needs --rate"),
    (["--server-cmd", "vllm serve", "--method", "ngram", "--k", "2"], "no {model} placeholder"),
])
def test_bad_options(good, tmp_path, args, fragment):
    result = run("measure", "--workload", str(good), "--model", "m", *args, cwd=tmp_path)
    assert_user_error(result, fragment)


def test_server_command_not_found(good, tmp_path):
    result = run("measure", "--workload", str(good), "--model", "m",
                 "--server-cmd", "no-such-vllm-binary serve {model}", cwd=tmp_path)
    assert_user_error(result, "'no-such-vllm-binary' was not found")


def test_workload_not_utf8_names_file_line_and_fix(tmp_path):
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    sentence = f"{bad}:2: byte 0xe9 at column 16 is not UTF-8 (invalid continuation byte); save the file as UTF-8"
    assert_user_error(run("measure", "--workload", str(bad), "--model", "m", cwd=tmp_path), sentence)
    assert_user_error(run("workload", "stats", str(bad), cwd=tmp_path), sentence)
    imported = run("workload", "import", str(bad), "--from", "vllm-custom", "--out", str(tmp_path / "o.jsonl"),
                   cwd=tmp_path)
    assert_user_error(imported, sentence)
