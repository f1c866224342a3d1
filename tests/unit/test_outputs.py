"""One output interface for every command: `--format table|json`, with `--json` kept as its
alias; JSON alone on stdout, notes on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUNER = [sys.executable, "-m", "tuner.cli"]


def tuner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*TUNER, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("command", [["workload", "stats", "workloads/code.jsonl"], ["schedule", "list"]])
def test_format_json_is_the_json_alias_and_table_is_the_default(command, tmp_path):
    extra = ["--db", f"sqlite:///{tmp_path / 'jobs.db'}"] if command[0] == "schedule" else []
    if extra:  # an empty but existing database: schedule list reads, never creates
        assert tuner("db", "upgrade", *extra).returncode == 0
    as_format, as_alias = tuner(*command, *extra, "--format", "json"), tuner(*command, *extra, "--json")
    assert as_format.returncode == 0, as_format.stderr
    assert json.loads(as_format.stdout) == json.loads(as_alias.stdout)
    table = tuner(*command, *extra)
    assert table.returncode == 0
    with pytest.raises(json.JSONDecodeError):
        json.loads(table.stdout or "not json")


def test_format_and_json_that_disagree_are_refused_in_one_sentence():
    result = tuner("workload", "stats", "workloads/code.jsonl", "--format", "table", "--json")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --json and --format table disagree; give one of them"


def test_an_unknown_format_is_refused_by_the_option_itself():
    result = tuner("workload", "stats", "workloads/code.jsonl", "--format", "yaml")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--format" in result.stderr and len(result.stderr.strip().splitlines()) == 1
