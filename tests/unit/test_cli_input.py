"""Bad input to `tuner measure` ends in one clear sentence and exit code 2, before any server starts."""

import os
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


# Bad option values, tried as a new user would: every one is refused with exit code 2 and one
# sentence naming the option, before any server starts (the server command does not exist, so a
# run that got that far says so) and without creating a database. "{w}": a good workload, "{d}":
# the folder the command runs in, "{db}": an existing, up-to-date database there.
NO_VLLM = ["--server-cmd", "/nonexistent/vllm {model}", "--log-dir", "{d}/logs"]
MEASURE = ["measure", "--workload", "{w}", "--model", "m", *NO_VLLM]
OPTIMIZE = ["optimize", "--workload", "{w}", "--model", "m", *NO_VLLM, "--db", "sqlite:///{d}/o.db",
            "--method", "ngram", "--k", "2"]
SCHEDULE = ["schedule", "add", "--name", "n", "--cron", "0 2 * * *", "--workload", "{w}", "--model", "m"]
UNREACHABLE_PG = "postgresql://u@127.0.0.1:1/d"
BAD_VALUES = {
    # measure: ranges, units and kinds of its numbers, paths
    "measure --rate inf": ([*MEASURE, "--load", "rate", "--rate", "inf"], "--rate"),
    "measure --time-scale nan": ([*MEASURE, "--time-scale", "nan"], "--time-scale"),
    "measure --max-tokens 0": ([*MEASURE, "--max-tokens", "0"], "--max-tokens"),
    "measure --request-timeout 0": ([*MEASURE, "--request-timeout", "0"], "--request-timeout"),
    "measure --request-timeout nan": ([*MEASURE, "--request-timeout", "nan"], "--request-timeout"),
    "measure --start-timeout -1": ([*MEASURE, "--start-timeout", "-1"], "--start-timeout"),
    "measure --download-timeout -1": ([*MEASURE, "--download-timeout", "-1"], "--download-timeout"),
    "measure --retry-wait nan": ([*MEASURE, "--retry-wait", "nan"], "--retry-wait"),
    "measure --seed -1": ([*MEASURE, "--load", "rate", "--rate", "1", "--seed", "-1"], "--seed"),
    "measure --synthetic-acceptance 2": ([*MEASURE, "--method", "ngram", "--k", "2", "--synthetic-acceptance", "2"],
                                         "--synthetic-acceptance"),
    "measure --synthetic-acceptance x": ([*MEASURE, "--synthetic-acceptance", "x"], "--synthetic-acceptance"),
    "measure --model missing path": ([*MEASURE[:4], "/nonexistent/model", *NO_VLLM], "--model '/nonexistent/model' does not exist"),
    "measure --log-dir a file": ([*MEASURE[:5], "--server-cmd", "/nonexistent/vllm {model}", "--log-dir", "{w}"], "--log-dir"),
    "measure --k x": ([*MEASURE, "--method", "ngram", "--k", "x"], "--k"),
    "measure --concurrency x": ([*MEASURE, "--concurrency", "x"], "--concurrency"),
    # optimize
    "optimize --concurrency ''": ([*OPTIMIZE, "--concurrency", ""], "--concurrency"),
    "optimize --rate inf": ([*OPTIMIZE, "--load", "rate", "--rate", "inf"], "--rate"),
    "optimize --time-scale 0": ([*OPTIMIZE, "--time-scale", "0"], "--time-scale"),
    "optimize --trials 0": ([*OPTIMIZE, "--trials", "0"], "--trials"),
    "optimize --noise -1": ([*OPTIMIZE, "--noise", "-1"], "--noise"),
    "optimize --noise nan": ([*OPTIMIZE, "--noise", "nan"], "--noise"),
    "optimize --near-tie-margin nan": ([*OPTIMIZE, "--near-tie-margin", "nan"], "--near-tie-margin"),
    "optimize --gpu-free-timeout -1": ([*OPTIMIZE, "--gpu-free-timeout", "-1"], "--gpu-free-timeout"),
    "optimize --heartbeat 0": ([*OPTIMIZE, "--heartbeat", "0"], "--heartbeat"),
    "optimize --max-tokens 0": ([*OPTIMIZE, "--max-tokens", "0"], "--max-tokens"),
    "optimize --seed -1": ([*OPTIMIZE, "--seed", "-1"], "--seed"),
    "optimize --write-config in a missing folder": ([*OPTIMIZE, "--write-config", "{d}/nodir/spec.json"],
                                                    "--write-config"),
    "optimize --model missing path": ([*OPTIMIZE[:4], "/nonexistent/model", *OPTIMIZE[5:]],
                                      "--model '/nonexistent/model' does not exist"),
    # database URLs of other kinds, a driver not installed, a typo, a server that is down
    "optimize --db mysql (no driver)": ([*OPTIMIZE, "--db", "mysql://u@h/d"], "mysql://u@h/d"),
    "optimize --db sqlite:/typo": ([*OPTIMIZE, "--db", "sqlite:/{d}/typo.db"], "sqlite:/"),
    "optimize --db server down": ([*OPTIMIZE, "--db", UNREACHABLE_PG], "127.0.0.1"),
    "db upgrade --db in a missing folder": (["db", "upgrade", "--db", "sqlite:///{d}/nodir/x.db"], "nodir"),
    "db upgrade --db mysql": (["db", "upgrade", "--db", "mysql://u@h/d"], "mysql://u@h/d"),
    # read-only commands never create a database
    "best --db not there": (["best", "--db", "sqlite:///{d}/new.db"], "no results database at sqlite:///"),
    "best, no tuner.db here": (["best"], "no results database at sqlite:///tuner.db"),
    "best --db mysql": (["best", "--db", "mysql://u@h/d"], "mysql://u@h/d"),
    "best --db sqlite:/typo": (["best", "--db", "sqlite:/{d}/typo.db"], "sqlite:/"),
    "best --noise -1": (["best", "--noise", "-1"], "--noise"),
    "schedule list --db not there": (["schedule", "list", "--db", "sqlite:///{d}/new.db"], "no results database"),
    "schedule remove --db not there": (["schedule", "remove", "x", "--db", "sqlite:///{d}/new.db"], "no results database"),
    "schedule run-now --db not there": (["schedule", "run-now", "x", "--db", "sqlite:///{d}/new.db"], "no results database"),
    "dashboard --db mysql": (["dashboard", "--db", "mysql://u@h/d"], "mysql://u@h/d"),
    "dashboard --port 70000": (["dashboard", "--db", "{db}", "--port", "70000"], "--port"),
    "dashboard --port -1": (["dashboard", "--db", "{db}", "--port", "-1"], "--port"),
    "serve --db mysql": (["serve", "--db", "mysql://u@h/d"], "mysql://u@h/d"),
    "serve --port 70000": (["serve", "--db", "{db}", "--port", "70000"], "port = 70000"),
    "serve --prometheus not a URL": (["serve", "--db", "{db}", "--prometheus", "prometheus:9090"], "prometheus"),
    "serve --drift-for nan": (["serve", "--db", "{db}", "--drift-for", "nan"], "drift_for"),
    "worker --db mysql": (["worker", "--study", "s", "--db", "mysql://u@h/d"], "mysql://u@h/d"),
    "worker --heartbeat 0": (["worker", "--study", "s", "--db", UNREACHABLE_PG, "--heartbeat", "0"], "--heartbeat"),
    "worker --gpus a": (["worker", "--study", "s", "--db", UNREACHABLE_PG, "--gpus", "a"], "--gpus"),
    "capture --duration nan": (["capture", "--upstream", "http://127.0.0.1:1", "--out", "{d}/c.jsonl",
                                "--listen", "127.0.0.1:0", "--duration", "nan"], "--duration"),
    "workload split --out a file": (["workload", "split", "{w}", "--out", "{w}"], "--out"),
    "workload sample --seed -1": (["workload", "sample", "{w}", "--n", "1", "--out", "{d}/s.jsonl", "--seed", "-1"],
                                  "--seed"),
    # a schedule's optimize options are checked as `tuner optimize` checks them, not at 02:00
    "schedule add --model missing path": ([*SCHEDULE[:-1], "/nonexistent/model"], "--model '/nonexistent/model'"),
    "schedule add --k 0": ([*SCHEDULE, "--method", "ngram", "--k", "0"], "--k '0'"),
    "schedule add --concurrency 0": ([*SCHEDULE, "--concurrency", "0"], "--concurrency"),
    "schedule add --db mysql": ([*SCHEDULE, "--db", "mysql://u@h/d"], "mysql://u@h/d"),
}


def run_cli(args: list[str], cwd: Path) -> tuple[int, str]:
    """The real command: in this process (fast), or, for those that run a service when they accept
    their options, as a process given a minute."""
    unset = {"TUNER_DB": None, "TUNER_CONFIG": None, "TUNER_PORT": None}
    if args[0] in ("dashboard", "serve", "capture"):
        env = {k: v for k, v in os.environ.items() if k not in unset}
        try:
            done = subprocess.run([*TUNER, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("not refused: the command started and ran on")
        return done.returncode, done.stderr
    from typer.testing import CliRunner

    from tuner.cli import app

    before = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner(env=unset).invoke(app, args)
    finally:
        os.chdir(before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return 1, "Traceback: " + repr(result.exception)
    return result.exit_code, result.stderr


@pytest.mark.parametrize(("args", "fragment"), list(BAD_VALUES.values()), ids=list(BAD_VALUES))
def test_bad_option_values_are_refused_in_one_sentence_before_anything_starts(tmp_path, args, fragment):
    workload = tmp_path / "code.jsonl"
    workload.write_text('{"prompt": "def f():", "max_tokens": 8}\n' * 8)
    db = tmp_path / "existing.db"
    if "{db}" in args:
        subprocess.run([*TUNER, "db", "upgrade", "--db", f"sqlite:///{db}"], check=True, capture_output=True,
                       cwd=tmp_path, timeout=60)
    before = set(tmp_path.rglob("*"))
    args = [a.replace("{w}", str(workload)).replace("{d}", str(tmp_path)).replace("{db}", f"sqlite:///{db}")
            for a in args]
    code, stderr = run_cli(args, tmp_path)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert fragment in lines[0]
    assert "was not found" not in lines[0]  # refused before the (missing) server command was tried
    assert set(tmp_path.rglob("*")) == before  # no database, log folder or output file appeared
