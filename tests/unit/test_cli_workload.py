"""`tuner workload ...` and `tuner capture` through the real command line: output files, and
bad input as one sentence with exit code 2."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tuner.workload import load_workload
from tuner.workload.classify import guess_all

TUNER = [sys.executable, "-m", "tuner.cli"]
ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*TUNER, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def assert_user_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("error: ")
    assert fragment in result.stderr


def test_import_writes_a_loadable_file_and_names_bad_lines(tmp_path: Path) -> None:
    source = tmp_path / "custom.jsonl"
    source.write_text('{"prompt": "a", "output_tokens": 5}\n{"prompt": "b"}\n')
    out = tmp_path / "out" / "w.jsonl"
    result = run("workload", "import", str(source), "--from", "vllm-custom", "--out", str(out),
                 "--type", "code", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    loaded = load_workload(out)
    assert [(r.prompt, r.output_tokens, r.type) for r in loaded.requests] == [("a", 5, "code"), ("b", None, "code")]
    source.write_text('{"prompt": "a"}\n{"output_tokens": 5}\n')
    assert_user_error(run("workload", "import", str(source), "--from", "vllm-custom", "--out", str(out),
                          cwd=tmp_path), f"{source}:2:")
    assert_user_error(run("workload", "import", str(source), "--from", "csv", "--out", str(out), cwd=tmp_path),
                      "unknown import format 'csv'")


def test_stats_sample_and_split_on_the_library(tmp_path: Path) -> None:
    stats = run("workload", "stats", str(ROOT / "workloads" / "rag.jsonl"), "--json", cwd=tmp_path)
    assert stats.returncode == 0, stats.stderr
    figures = json.loads(stats.stdout)
    assert figures["requests"] == 48 and figures["chat_share"] == 1.0

    sample = tmp_path / "s.jsonl"
    result = run("workload", "sample", str(ROOT / "workloads" / "code.jsonl"), "--n", "12", "--seed", "3",
                 "--out", str(sample), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(load_workload(sample)) == 12
    assert_user_error(run("workload", "sample", str(ROOT / "workloads" / "code.jsonl"), "--n", "0",
                          "--out", str(sample), cwd=tmp_path), "at least 1")

    mixed = tmp_path / "mixed.jsonl"
    lines = [json.loads(x) for t in ("code", "summarization") for x in
             (ROOT / "workloads" / f"{t}.jsonl").read_text().splitlines()[:5]]
    lines[0]["type"] = "special"  # a line's own type wins
    mixed.write_text("".join(json.dumps({k: v for k, v in x.items() if k != "arrival_s"}) + "\n" for x in lines))
    result = run("workload", "split", str(mixed), "--out", str(tmp_path / "split"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    counts = {p.stem: len(load_workload(p)) for p in (tmp_path / "split").glob("*.jsonl")}
    # The files follow the classifier's guesses (its accuracy is benchmarks/classifier_accuracy.py's
    # job); most of these ten are guessed right, and the labelled line keeps its own type.
    guesses = Counter(g.type for g in guess_all(load_workload(mixed).requests))
    assert counts == dict(guesses) and counts["special"] == 1
    assert counts.get("code", 0) >= 4 and counts.get("summarization", 0) >= 3


def test_capture_bad_options(tmp_path: Path) -> None:
    out = str(tmp_path / "c.jsonl")
    assert_user_error(run("capture", "--upstream", "localhost:8000", "--out", out, cwd=tmp_path),
                      "--upstream must be an http(s) URL")
    assert_user_error(run("capture", "--upstream", "http://127.0.0.1:1", "--out", out, "--redact", "(",
                          cwd=tmp_path), "--redact '(' is not a valid regular expression")
    assert_user_error(run("capture", "--upstream", "http://127.0.0.1:1", "--out", out, "--listen", "nope",
                          cwd=tmp_path), "--listen must be HOST:PORT")
