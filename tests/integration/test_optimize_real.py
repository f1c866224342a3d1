"""`tuner optimize` and `tuner best` on the REAL vLLM server (CPU build) and the tiny models."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.store import ResultStore, open_database

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SERVER_ARGS = ["--server-arg=--enforce-eager", "--server-arg=--max-model-len=1024"]
ENV = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
       "HF_HUB_OFFLINE": "1"}


def short_code_workload(tmp_path: Path, requests: int = 16, max_tokens: int | None = None) -> Path:
    """The first requests of the code workload (``max_tokens``: each shortened to that): a replay
    of a few seconds keeps the suite short."""
    lines = (ROOT / "workloads" / "code.jsonl").read_text().splitlines()[:requests]
    if max_tokens is not None:
        lines = [json.dumps({**json.loads(line), "max_tokens": max_tokens}) for line in lines]
    path = tmp_path / "code.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def optimize_cmd(tmp_path: Path, models: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "tuner.cli", "optimize",
            "--workload", str(short_code_workload(tmp_path)), "--model", str(models / "target"),
            "--concurrency", "2", "--db", f"sqlite:///{tmp_path / 'tuner.db'}",
            "--log-dir", str(tmp_path / "logs"), *SERVER_ARGS, *args]


def run(command: list[str]) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def trials(tmp_path: Path):
    return ResultStore(open_database(f"sqlite:///{tmp_path / 'tuner.db'}")).trials()


def optuna_states(tmp_path: Path) -> list[TrialState]:
    storage = f"sqlite:///{tmp_path / 'tuner.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    return [t.state for t in study.trials]


def test_optimize_stores_every_trial_and_best_names_the_winner(tmp_path, tiny_models):
    answer = json.loads(run(optimize_cmd(
        tmp_path, tiny_models, "--method", "ngram", "--method", "draft_model",
        "--draft", str(tiny_models / "draft"), "--k", "4", "--strategy", "grid", "--json")).stdout)
    rows = trials(tmp_path)
    assert [r.status for r in rows] == ["complete"] * 3
    assert rows[0].config is None  # the baseline is measured first
    assert sorted((r.config or {}).get("num_speculative_tokens", 0) for r in rows) == [0, 4, 4]
    assert {(r.config or {}).get("method") for r in rows} == {None, "ngram", "draft_model"}
    for r in rows:
        assert r.tokens_per_s > 0 and r.tpot_p50_s > 0 and Path(r.server_log_path).exists()
        assert (r.acceptance_rate is None) == (r.config is None)
    assert optuna_states(tmp_path) == [TrialState.COMPLETE] * 3

    (best,) = json.loads(run([sys.executable, "-m", "tuner.cli", "best", "--json",
                              "--db", f"sqlite:///{tmp_path / 'tuner.db'}"]).stdout)
    assert best["study"] == answer["study"]
    baseline = rows[0].tokens_per_s
    fastest = max((r for r in rows if r.config), key=lambda r: r.tokens_per_s)
    assert best["baseline"]["tokens_per_s"] == pytest.approx(baseline)
    assert best["speedup"] == pytest.approx(fastest.tokens_per_s / baseline)
    argv = shlex.split(best["serve_command"])
    assert argv[:3] == ["vllm", "serve", str(tiny_models / "target")]
    # Tuned with --enforce-eager --max-model-len=1024: the line to paste has neither.
    assert "--enforce-eager" not in argv and not any(a.startswith("--max-model-len") for a in argv)
    assert answer["serve_command"] == best["serve_command"]
    if best["keep_speculation_off"]:
        assert "--speculative-config" not in argv and best["winner"]["config"] is None
    else:
        config = json.loads(argv[argv.index("--speculative-config") + 1])
        assert config == best["winner"]["config"] == fastest.config


def test_interrupted_study_resumes_without_remeasuring(tmp_path, tiny_models):
    command = optimize_cmd(tmp_path, tiny_models, "--method", "ngram", "--k", "2")
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               text=True, env=ENV)
    try:
        for line in process.stderr:  # interrupt once the second trial has started
            if "trial 1" in line:
                break
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 130
    finally:
        if process.poll() is None:
            process.kill()
    first = trials(tmp_path)
    assert [(r.config is None, r.status) for r in first] == [(True, "complete"), (False, "interrupted")]
    baseline_figure = first[0].tokens_per_s

    run(command)
    rows = trials(tmp_path)
    assert [(r.config is None, r.status) for r in rows] == [
        (True, "complete"), (False, "interrupted"), (False, "complete")]
    assert rows[0].tokens_per_s == baseline_figure  # the finished trial was not remeasured
    assert optuna_states(tmp_path) == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]


def test_a_config_that_cannot_start_is_stored_as_failed(tmp_path, tiny_models):
    # A draft folder that exists but holds no weights: vLLM fails while loading it.
    broken = tmp_path / "broken-draft"
    broken.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_models / "draft" / name, broken / name)
    answer = json.loads(run(optimize_cmd(
        tmp_path, tiny_models, "--method", "ngram", "--method", "draft_model",
        "--draft", str(broken), "--k", "2", "--json")).stdout)
    rows = trials(tmp_path)
    assert [r.status for r in rows] == ["complete", "complete", "failed"]
    failed = rows[2]
    assert str(broken) in failed.failure_cause and "exited with code" in failed.failure_cause
    assert failed.tokens_per_s is None
    assert answer["winner"]["label"] in {"baseline", "ngram k=2"}
    assert answer["baseline"]["tokens_per_s"] == pytest.approx(rows[0].tokens_per_s)


def test_repeats_are_stored_with_their_spread_and_the_greedy_check(tmp_path, tiny_models):
    answer = json.loads(run(optimize_cmd(tmp_path, tiny_models, "--method", "ngram", "--k", "2",
                                         "--repeats", "2", "--json")).stdout)
    rows = trials(tmp_path)
    assert [r.status for r in rows] == ["complete", "complete"]
    for r in rows:
        assert r.repeats == 2 and r.tokens_per_s_mad is not None
        low, high = r.tokens_per_s_ci
        assert low <= r.tokens_per_s <= high
    baseline, ngram = rows
    assert baseline.greedy_match_rate is None
    # Every workload request is greedy (temperature 0); the share matching the baseline is stored.
    assert 0.0 <= ngram.greedy_match_rate <= 1.0
    assert answer["baseline"]["repeats"] == 2
    engine = open_database(f"sqlite:///{tmp_path / 'tuner.db'}")
    with engine.connect() as connection:
        runs = connection.exec_driver_sql(
            "SELECT trial_id, repeat, output_tokens_per_s FROM tuner_trial_runs ORDER BY id").fetchall()
    assert [(r[1]) for r in runs] == [0, 1, 0, 1]
    assert all(r[2] > 0 for r in runs)
    # The server's own per-request TPOT histogram, read from the real /metrics around each replay.
    assert all(r.server_tpot_mean_s and r.server_tpot_mean_s > 0 for r in rows)
    with engine.connect() as connection:
        checked = connection.exec_driver_sql(
            "SELECT output_token_ids, greedy_match_rate, first_divergence FROM tuner_trial_runs ORDER BY id").fetchall()
    baseline_tokens = json.loads(checked[0][0])
    # vLLM returned the token ids of the baseline's greedy requests (return_token_ids).
    assert len(baseline_tokens) == 16 and all(len(ids) > 1 for ids in baseline_tokens.values())
    assert [json.loads(r[0] or "null") for r in checked[2:]] == [None, None]  # kept for the baseline only
    run_rates = [r[1] for r in checked[2:]]
    assert all(0.0 <= rate <= 1.0 for rate in run_rates)  # both of ngram's runs were compared
    assert ngram.greedy_match_rate == min(run_rates)
    if ngram.greedy_match_rate < 1:
        assert ngram.first_divergence["request"] in baseline_tokens
        assert isinstance(ngram.first_divergence["token"], int)


def test_a_new_study_warm_starts_from_the_previous_best(tmp_path, tiny_models):
    space = ["--method", "ngram", "--k", "3", "--json"]
    first = json.loads(run(optimize_cmd(tmp_path, tiny_models, *space)).stdout)
    second = json.loads(run(optimize_cmd(tmp_path, tiny_models, *space, "--name", "nightly")).stdout)
    rows = [r for r in trials(tmp_path) if r.study_name == "nightly"]
    assert second["study"] == "nightly" and rows[0].config is None  # the baseline, measured again
    if first["winner"]["config"] is not None:
        assert rows[1].config == first["winner"]["config"]
        assert rows[1].proposal_reason == "warm start: the previous best"
    # The earlier study's acceptance profile stands in for the highest-k run that learns it.
    assert not any((r.proposal_reason or "").startswith("highest k first") for r in rows)
    assert second["server_starts"] == len(rows)
