"""The study loop with a stand-in for the measurement (a unit test of the search room only;
tests/integration/test_optimize_real.py runs it on the real vLLM server)."""

from pathlib import Path

import pytest
from optuna.trial import TrialState

from tuner.engine import ServerOptions
from tuner.replay import Percentiles, ReplaySummary
from tuner.search import OptimizeSettings, SearchSpace, optimize
from tuner.search import study as study_module
from tuner.store import ResultStore, open_database, optuna_storage
from tuner.trial import MeasureSettings, Measurement, NoProgress, RunResult, ServerRecord
from tuner.workload import Request, Workload


class Quiet(NoProgress):
    def trial_started(self, *args):
        pass

    def trial_finished(self, row):
        pass


def fake_measurement(spec, tokens_per_s, failed=0):
    p = Percentiles(0.01, 0.01, 0.02, 0.03)
    summary = ReplaySummary(requests=10, completed=10 - failed, failed=failed, duration_s=1.0,
                            output_tokens=int(tokens_per_s), output_tokens_per_s=tokens_per_s,
                            requests_per_s=10.0, ttft=p, tpot=p, e2e=p,
                            errors=(f"{failed} x HTTP 500",) if failed else ())
    server = ServerRecord(command=["vllm"], log_path="/tmp/x.log", startup_s=1.0, pid=1, port=1,
                          vllm_version="0.32.0")
    run = RunResult(repeat=0, summary=summary, acceptance=None,
                    server_generation_tokens=int(tokens_per_s), requests=[])
    return Measurement(model="m", workload_path="w.jsonl", workload_type="code",
                       spec=spec.to_vllm() if spec else None, load="concurrency 1", warmup_requests=0,
                       server=server, runs=[run], host="h", started_at="", finished_at="")


@pytest.fixture
def setup(tmp_path):
    url = f"sqlite:///{tmp_path / 't.db'}"
    path = tmp_path / "code.jsonl"
    path.write_text('{"prompt": "x"}\n')
    workload = Workload(path=path, type="code", requests=(Request(line=1, prompt="x"),))
    settings = MeasureSettings(server=ServerOptions(log_dir=tmp_path))
    return url, ResultStore(open_database(url)), workload, settings


def test_tpe_branch_measures_distinct_configs_baseline_first(setup, monkeypatch):
    url, store, workload, settings = setup
    measured = []

    def measure(model, spec, workload, settings, progress):
        measured.append(spec.label if spec else "baseline")
        return fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0))

    monkeypatch.setattr(study_module, "measure_config", measure)
    space = SearchSpace(methods=("ngram",), ks=(1, 2, 3, 4, 5, 6, 7, 8))  # 9 configs > 4 trials
    answer = optimize("m", workload, space, settings, store, optuna_storage(url),
                      OptimizeSettings(trials=4, seed=1), Quiet())
    assert measured[0] == "baseline"
    assert len(measured) == 4 == len(set(measured))  # no config measured twice
    assert [r.status for r in store.trials()] == ["complete"] * 4
    assert answer.best.tokens_per_s == max(100.0 + int(label.split("k=")[1]) * 10
                                           for label in measured[1:])


def test_too_many_failed_requests_fail_the_trial_and_the_study_goes_on(setup, monkeypatch):
    url, store, workload, settings = setup

    def measure(model, spec, workload, settings, progress):
        return fake_measurement(spec, 120.0, failed=3 if spec and spec.k == 2 else 0)

    monkeypatch.setattr(study_module, "measure_config", measure)
    space = SearchSpace(methods=("ngram",), ks=(1, 2))
    storage = optuna_storage(url)
    answer = optimize("m", workload, space, settings, store, storage, OptimizeSettings(trials=5), Quiet())
    rows = store.trials()
    assert [r.status for r in rows] == ["complete", "complete", "failed"]
    assert rows[2].failure_cause == "3 of 10 requests failed (3 x HTTP 500)"
    assert answer.best.label == "ngram k=1"
    # A rerun has nothing left to measure.
    monkeypatch.setattr(study_module, "measure_config", lambda *a: pytest.fail("remeasured"))
    optimize("m", workload, space, settings, store, storage, OptimizeSettings(trials=5), Quiet())
    assert len(store.trials()) == 3
