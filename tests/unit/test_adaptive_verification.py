"""vLLM's adaptive verification as a dimension of the space (issue 47, item 3), and vLLM's refusals
that the tuner knows before a start: stand-ins for vLLM here (unit tests of the plan, measure,
study and decide rooms); tests/integration/test_adaptive_verification_real.py asks the real one."""

from datetime import datetime, timezone

import optuna
import pytest

from fakes import Quiet, fake_measurement
from tuner.engine import ServerOptions, SpecConfig
from tuner.errors import RefusedAtStart, UsageError
from tuner.decide.adaptive import adaptive_notes
from tuner.measure import trial as trial_module
from tuner.measure.trial import MeasureSettings, measure_config_at_loads
from tuner.plan import checks as checks_module
from tuner.plan.checks import check_space
from tuner.plan.space import SearchSpace
from tuner.plan.study_plan import plan_study
from tuner.store import ResultStore, TrialRow, open_database, optuna_storage
from tuner.study import loop as study_module
from tuner.study.loop import OptimizeSettings, optimize
from tuner.workload import Request, Workload

ADAPTIVE = "enable_adaptive_verification"


def test_each_drafter_is_tried_fixed_and_adaptive_and_ngram_only_fixed():
    space = SearchSpace(methods=("eagle3", "ngram"), ks=(2, 3), drafts={"eagle3": ("/d",)}, adaptive=True)
    labels = [c.label for c in space.candidates()]
    assert labels == ["baseline", "eagle3 k=2 draft=/d", "eagle3 k=3 draft=/d", "eagle3 k=2 adaptive draft=/d",
                      "eagle3 k=3 adaptive draft=/d", "ngram k=2", "ngram k=3"]
    adaptive = [c.spec.to_vllm() for c in space.candidates() if c.spec and c.spec.adaptive_verification]
    assert adaptive == [{"method": "eagle3", "model": "/d", "num_speculative_tokens": k, ADAPTIVE: True} for k in (2, 3)]
    # The sampler draws the same params, and they give the same config.
    for candidate in space.candidates():
        drawn = space.suggest(optuna.trial.FixedTrial(candidate.params))
        assert drawn.params == candidate.params and drawn.label == candidate.label
    # Without the flag nothing changes: no verify parameter, so stored studies resume as they were.
    plain = SearchSpace(methods=("eagle3",), ks=(2,), drafts={"eagle3": ("/d",)})
    assert [c.params for c in plain.candidates()][1] == {"method": "eagle3", "eagle3.draft": "/d", "eagle3.k": 2}


def test_the_flag_and_the_study_file_ask_for_it_and_a_space_without_a_drafter_is_refused(tmp_path):
    assert plan_study(methods=["mtp"], k="2", adaptive_verification=True).space.adaptive
    study = tmp_path / "study.toml"
    study.write_text('[space]\nmethods = ["mtp"]\nadaptive_verification = true\n')
    assert plan_study(study).space.adaptive
    assert not plan_study(study, adaptive_verification=False).space.adaptive  # the flag wins
    with pytest.raises(UsageError, match="needs a drafter among --method"):
        plan_study(methods=["ngram"], adaptive_verification=True)


def test_a_vllm_without_the_field_is_refused_before_anything_starts(monkeypatch):
    monkeypatch.setattr(checks_module, "installed_vllm_schema",
                        lambda: {"methods": ["mtp", "ngram"], "fields": ["method", "num_speculative_tokens"]})
    space = SearchSpace(methods=("mtp",), ks=(2,), adaptive=True)
    with pytest.raises(UsageError, match="installed vLLM has no adaptive verification.*drop --adaptive-verification"):
        check_space(space, "org/model")  # a hub name: nothing local to check before vLLM
    assert check_space(SearchSpace(methods=("mtp",), ks=(2,)), "org/model") is not None  # without it: fine


def workload(tmp_path):
    path = tmp_path / "code.jsonl"
    path.write_text('{"prompt": "x"}\n')
    return Workload(path=path, type="code", requests=(Request(line=1, prompt="x"),))


def test_a_refusal_known_before_a_start_starts_no_server(tmp_path, monkeypatch):
    reason = "Model Runner V1 does not support: adaptive draft verification (vLLM runs Model Runner V1 here: no Triton)"
    asked = []
    monkeypatch.setattr(trial_module, "refused_at_start",
                        lambda method, adaptive: asked.append((method, adaptive)) or (reason if adaptive else None))

    def no_server(*args, **kwargs):
        raise AssertionError("a server was started")

    monkeypatch.setattr(trial_module, "VllmServer", no_server)
    spec = SpecConfig("eagle3", 3, draft_model="/d", extra={ADAPTIVE: True})
    settings = MeasureSettings(server=ServerOptions(log_dir=tmp_path))
    with pytest.raises(RefusedAtStart) as refused:
        measure_config_at_loads("m", spec, workload(tmp_path), settings)
    assert str(refused.value) == f"not started: the installed vLLM refuses eagle3 k=3 adaptive draft=/d at start: {reason}"
    assert not refused.value.transient and asked == [("eagle3", True)]
    # A --server-cmd may run another vLLM than the installed one: only its start can say.
    elsewhere = MeasureSettings(server=ServerOptions(log_dir=tmp_path, server_cmd="ssh gpu vllm serve {model}"))
    with pytest.raises(AssertionError, match="a server was started"):
        measure_config_at_loads("m", spec, workload(tmp_path), elsewhere)
    assert asked == [("eagle3", True)]


def test_a_refused_config_is_stored_failed_and_costs_no_start_nor_a_trial_of_the_budget(tmp_path, db_url, monkeypatch):
    reason = "Model Runner V1 does not support: adaptive draft verification"
    measured = []

    def measure(model, spec, workload, settings, progress):
        if spec is not None and spec.adaptive_verification:
            raise RefusedAtStart(f"not started: {reason}", cause=reason)
        measured.append(spec.label if spec else "baseline")
        return [fake_measurement(spec, 130.0 if spec else 100.0)]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    # 5 configs, the 2 adaptive ones (tried last in the grid) refused: a budget of 4 trials still
    # reaches both, as neither spends a start.
    space = SearchSpace(methods=("mtp",), ks=(2, 3), adaptive=True)
    store = ResultStore(open_database(db_url))
    outcome = optimize("m", workload(tmp_path), space, MeasureSettings(server=ServerOptions(log_dir=tmp_path)),
                       store, optuna_storage(db_url), OptimizeSettings(trials=4, strategy="grid"), Quiet())
    assert measured == ["baseline", "mtp k=2", "mtp k=3"]
    assert outcome.restarts == 3
    failed = [r for r in store.trials() if r.status == "failed"]
    assert [r.label for r in failed] == ["mtp k=2 adaptive", "mtp k=3 adaptive"]
    assert all(reason in r.failure_cause for r in failed)
    assert f"mtp with adaptive verification was not measured: not started: {reason}" in outcome.verdict.notes


def row(config, tokens_per_s, status="complete", cause=None, load="concurrency 1"):
    label = "baseline" if config is None else SpecConfig.from_vllm(config).label
    return TrialRow(study_name="s", model="m", workload_type="code", load=load, optuna_trial_number=0,
                    config=config, label=label, status=status, failure_cause=cause, server_log_path=None,
                    tokens_per_s=tokens_per_s, tpot_p50_s=None, ttft_p50_s=None, acceptance_rate=None,
                    mean_acceptance_length=None, per_position=None,
                    finished_at=datetime(2026, 12, 6, tzinfo=timezone.utc), vllm_version="0.34.0", host="h",
                    server_args=[])


def test_the_answer_holds_adaptive_verification_against_the_drafter_s_best_fixed_k():
    e3 = {"method": "eagle3", "model": "/d"}
    rows = [row(None, 100.0), *(row({**e3, "num_speculative_tokens": k}, t) for k, t in ((2, 150.0), (3, 160.0))),
            row({**e3, "num_speculative_tokens": 3, ADAPTIVE: True}, 176.0),
            row({**e3, "num_speculative_tokens": 2, ADAPTIVE: True}, 150.0),
            row({"method": "mtp", "num_speculative_tokens": 2}, 120.0),
            row({"method": "mtp", "num_speculative_tokens": 2, ADAPTIVE: True}, None, "failed", "vLLM said no")]
    assert adaptive_notes(rows) == [
        "adaptive verification, eagle3 k=3 adaptive draft=/d at concurrency 1: 176 tok/s against 160 for its "
        "best fixed k=3 (1.10x)",
        "mtp with adaptive verification was not measured: vLLM said no"]
    assert adaptive_notes(rows[:3]) == []  # not asked: nothing said
