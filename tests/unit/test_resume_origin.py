"""A study resumed (or joined) where its figures were not measured is refused before anything
is measured or pooled: another workload file, GPU, host or vLLM. The study loop runs with a
stand-in for the measurement, on SQLite and on PostgreSQL."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fakes import Quiet, fake_measurement
from tuner.engine import ServerOptions
from tuner.errors import UsageError
from tuner.measure.trial import MeasureSettings
from tuner.plan.space import SearchSpace
from tuner.store import Database
from tuner.study import loop as study_module
from tuner.study.loop import OptimizeSettings, optimize
from tuner.workload import Request, Workload

SPACE = SearchSpace(methods=("ngram",), ks=(2, 4))


@pytest.fixture
def study(tmp_path, db_url, monkeypatch):
    path = tmp_path / "code.jsonl"
    path.write_text('{"prompt": "x"}\n')
    workload = Workload(path=path, type="code", requests=(Request(line=1, prompt="x"),))
    database = Database.open(db_url)
    calls, version = [], {"now": "0.32.0"}

    def measure(model, spec, workload, settings, progress):
        calls.append(spec.label if spec else "baseline")
        m = fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0))
        return [replace(m, server=replace(m.server, vllm_version=version["now"]))]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)

    def run(trials: int, join: bool = False):
        settings = MeasureSettings(server=ServerOptions(log_dir=tmp_path))
        return optimize("m", workload, SPACE, settings, database.results, database.optuna(),
                        OptimizeSettings(trials=trials, strategy="grid", name="s", join=join), Quiet())

    return run, path, calls, version, database.results


def test_a_resume_with_an_edited_workload_is_refused_before_any_start(study):
    run, path, calls, _, store = study
    run(trials=2)
    path.write_text('{"prompt": "y"}\n')
    calls.clear()
    with pytest.raises(UsageError, match=r"measured on another version of the workload \(code.jsonl then, "
                                         r"code.jsonl now, different contents\)"):
        run(trials=3)
    assert calls == []


def test_a_resume_on_another_gpu_or_host_is_refused_and_a_helper_may_join_from_another_host(study, monkeypatch):
    run, _, calls, _, _ = study
    monkeypatch.setattr(study_module, "gpu_name", lambda: "NVIDIA H200")
    run(trials=2)
    calls.clear()
    monkeypatch.setattr(study_module, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    with pytest.raises(UsageError, match=r"another GPU \(NVIDIA H200, this host has NVIDIA H100 80GB HBM3\)"):
        run(trials=3)
    monkeypatch.setattr(study_module, "gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(study_module.platform, "node", lambda: "other-host")
    with pytest.raises(UsageError, match=r"another host \(.+, this is other-host\)"):
        run(trials=3)
    assert calls == []
    run(trials=3, join=True)  # a helper worker on another host with the same GPU measures on
    assert calls == ["ngram k=4"]


def test_a_resume_with_another_vllm_keeps_nothing_its_server_measured(study):
    run, _, calls, version, store = study
    run(trials=2)
    version["now"] = "0.34.0"
    with pytest.raises(UsageError, match=r"measured with vLLM 0.32.0, and this host's server runs vLLM 0.34.0"):
        run(trials=3)
    assert calls[-1] == "ngram k=4"  # one start told which vLLM ran; its figures were not kept
    k4 = [r for r in store.trials() if r.label == "ngram k=4"]
    assert [r.status for r in k4] == ["interrupted"] and k4[0].tokens_per_s is None
    version["now"] = "0.32.0"
    assert run(trials=3).verdict.label == "ngram k=4"  # the same vLLM again: it goes on
