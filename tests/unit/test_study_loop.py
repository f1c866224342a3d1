"""The study loop with a stand-in for the measurement (a unit test of the search room only;
tests/integration/test_optimize_real.py runs it on the real vLLM server)."""


import json

import optuna
import pytest
from fastapi.testclient import TestClient
from optuna.trial import TrialState

from fakes import Quiet, fake_measurement
from tuner.engine import ServerOptions
from tuner.errors import MetricsError, ServerDiedError, ServerStartError, TunerError
from tuner.replay import LoadSpec
from tuner.outputs.report import answer_text, k_by_batch_size_text, outcome_dict
from tuner.study.loop import OptimizeSettings, optimize
from tuner.plan.space import SearchSpace
from tuner.study import loop as study_module
from tuner.decide.slo import parse_slos
from tuner.store import NOT_MEASURED, ResultStore, open_database, optuna_storage
from tuner.measure.trial import MeasureSettings
from tuner.web import create_app
from tuner.workload import Request, Workload


@pytest.fixture
def setup(tmp_path, db_url):
    url = db_url
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
        return [fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0))]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    space = SearchSpace(methods=("ngram",), ks=(1, 2, 3, 4, 5, 6, 7, 8))  # 9 configs > 4 trials
    answer = optimize("m", workload, space, settings, store, optuna_storage(url),
                      OptimizeSettings(trials=4, seed=1, strategy="tpe"), Quiet()).answer
    assert measured[0] == "baseline"
    assert len(measured) == 4 == len(set(measured))  # no config measured twice
    assert [r.status for r in store.trials()] == ["complete"] * 4
    assert answer.best.tokens_per_s == max(100.0 + int(label.split("k=")[1]) * 10
                                           for label in measured[1:])


def test_a_study_s_noise_is_the_rule_every_later_reading_decides_under(setup, monkeypatch):
    from tuner.decide.verdict import best_from_store

    url, store, workload, settings = setup
    monkeypatch.setattr(study_module, "measure_config_at_loads",
                        lambda model, spec, workload, settings, progress: [fake_measurement(spec, 120.0 if spec else 100.0)])
    space = SearchSpace(methods=("ngram",), ks=(2,))
    outcome = optimize("m", workload, space, settings, store, optuna_storage(url),
                       OptimizeSettings(trials=2, strategy="grid", noise=0.3), Quiet())
    assert outcome.verdict.kind == "off"  # 1.2x is within --noise 0.3
    (later,) = best_from_store(store)  # tuner best, the dashboard, drift: the study's own 0.3
    assert later.kind == "off" and later.label == outcome.verdict.label
    (overridden,) = best_from_store(store, noise=0.05)  # tuner best --noise 0.05
    assert overridden.kind == "config" and overridden.label == "ngram k=2"


def test_too_many_failed_requests_fail_the_trial_and_the_study_goes_on(setup, monkeypatch):
    url, store, workload, settings = setup

    def measure(model, spec, workload, settings, progress):
        return [fake_measurement(spec, 120.0, failed=3 if spec and spec.k == 2 else 0)]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    space = SearchSpace(methods=("ngram",), ks=(1, 2))
    storage = optuna_storage(url)
    grid = OptimizeSettings(trials=5, strategy="grid")
    answer = optimize("m", workload, space, settings, store, storage, grid, Quiet()).answer
    rows = store.trials()
    assert [r.status for r in rows] == ["complete", "complete", "failed"]
    assert rows[2].failure_cause == "3 of 10 requests failed (3 x HTTP 500)"
    assert answer.best.label == "ngram k=1"
    # A rerun has nothing left to measure.
    monkeypatch.setattr(study_module, "measure_config_at_loads", lambda *a: pytest.fail("remeasured"))
    optimize("m", workload, space, settings, store, storage, grid, Quiet())
    assert len(store.trials()) == 3


# A synthetic host for the guided search: tokens/s = R0 * tau(k) / (1 + c k), exactly the model's
# form, with acceptance profiles per drafter. The guided search must find the true best while
# measuring few configs.
PROFILES = {"good": [0.8, 0.65, 0.5, 0.4, 0.3, 0.22, 0.15, 0.1], "weak": [0.4, 0.2, 0.1, 0.05, 0.02, 0.01, 0.0, 0.0]}
COST = {"good": 0.12, "weak": 0.12, None: 0.05}


def world(spec, concurrency=1):
    base = 100.0 * concurrency ** 0.5
    if spec is None:
        return base, None
    drafter = "good" if spec.draft_model == "good" else "weak" if spec.draft_model else None
    profile = PROFILES[drafter or "weak"][:spec.k]
    cost = COST[drafter] * (1 + 0.5 * (concurrency - 1))  # verifying k tokens costs more in a big batch
    return base * (1 + sum(profile)) / (1 + cost * spec.k), profile


def true_best(space):
    return max(world(c.spec)[0] for c in space.candidates())


SYNTHETIC_SPACE = SearchSpace(methods=("ngram", "draft_model"), ks=tuple(range(1, 9)),
                              drafts={"draft_model": ("good", "weak")})


@pytest.fixture
def synthetic_host(monkeypatch):
    """Trials measure ``world`` instead of a server; returns the labels measured, in order."""
    measured = []

    def measure(model, spec, workload, settings, progress):
        measured.append(spec.label if spec else "baseline")
        tps, profile = world(spec)
        return [fake_measurement(spec, tps, per_position=profile)]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    return measured


def test_guided_finds_the_best_with_a_fraction_of_the_restarts(setup, synthetic_host):
    url, store, workload, settings = setup
    measured = synthetic_host
    space = SYNTHETIC_SPACE
    outcome = optimize("m", workload, space, settings, store, optuna_storage(url),
                       OptimizeSettings(trials=30, noise=0.02), Quiet())
    grid = len(space.candidates())
    assert grid == 25
    assert measured[:4] == ["baseline", "ngram k=8", "draft_model k=8 draft=good", "draft_model k=8 draft=weak"]
    assert outcome.restarts == len(measured) <= grid // 4
    # Within the run-to-run noise (2 % without repeats) of the true best, by the stop rule.
    assert outcome.answer.best.tokens_per_s >= true_best(space) / 1.02
    rows = store.trials()
    predicted = [r for r in rows if r.predicted_tokens_per_s is not None]
    assert predicted and all(r.proposal_reason for r in predicted)
    # The world has the model's own form: once fitted, predictions are exact.
    assert all(r.predicted_tokens_per_s == pytest.approx(r.tokens_per_s, rel=0.01) for r in predicted)


def test_guided_warm_start_measures_the_previous_best_first_and_little_else(setup, synthetic_host):
    url, store, workload, settings = setup
    measured = synthetic_host
    space = SYNTHETIC_SPACE
    first = optimize("m", workload, space, settings, store, optuna_storage(url),
                     OptimizeSettings(trials=30, noise=0.02), Quiet())
    cold = len(measured)
    measured.clear()
    # Another study (`--name nightly`) of the same model, workload type and load.
    second = optimize("m", workload, space, settings, store, optuna_storage(url),
                      OptimizeSettings(trials=30, noise=0.02, name="nightly"), Quiet())
    assert measured[:2] == ["baseline", first.answer.winner.label]
    assert len(measured) < cold
    assert second.answer.winner.label == first.answer.winner.label


def test_the_warm_start_takes_the_winner_the_previous_study_named_under_its_own_targets(setup, monkeypatch):
    url, store, workload, settings = setup
    measured = []

    def measure(model, spec, workload, settings, progress):
        measured.append(spec.label if spec else "baseline")
        tps, profile = world(spec)
        return [fake_measurement(spec, tps, per_position=profile, tpot=0.01 + 0.001 * (spec.k if spec else 0))]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    space = SearchSpace(methods=("draft_model",), ks=tuple(range(1, 7)), drafts={"draft_model": ("good",)})
    first = optimize("m", workload, space, settings, store, optuna_storage(url),
                     OptimizeSettings(trials=10, strategy="grid", slos=parse_slos(["tpot_p99_ms<=38"])), Quiet())
    fastest = max((r for r in store.trials() if r.config), key=lambda r: r.tokens_per_s)
    assert first.answer.winner.label != fastest.label  # the target excluded the fastest
    measured.clear()
    optimize("m", workload, space, settings, store, optuna_storage(url),
             OptimizeSettings(trials=3, name="nightly"), Quiet())
    assert measured[:2] == ["baseline", first.answer.winner.label]


def test_slo_makes_fast_configs_infeasible_and_the_answer_respects_it(setup, monkeypatch):
    url, store, workload, settings = setup

    def measure(model, spec, workload, settings, progress):
        tps, profile = world(spec)
        # TPOT p99 (3x the mean here) grows with k: k >= 3 breaks a 40 ms p99 target.
        return [fake_measurement(spec, tps, per_position=profile, tpot=0.01 + 0.001 * (spec.k if spec else 0))]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    space = SearchSpace(methods=("draft_model",), ks=tuple(range(1, 7)), drafts={"draft_model": ("good",)})
    slos = parse_slos(["tpot_p99_ms<=38"])
    outcome = optimize("m", workload, space, settings, store, optuna_storage(url),
                       OptimizeSettings(trials=10, strategy="grid", slos=slos), Quiet())
    answer = outcome.answer
    assert answer.winner.config["num_speculative_tokens"] <= 2
    assert all(slo.met(answer.winner) for slo in slos)
    unconstrained = max(store.trials(), key=lambda r: r.tokens_per_s)
    assert unconstrained.config["num_speculative_tokens"] > 2  # the target really bound
    run = store.study_runs(outcome.study_name)[-1]
    assert run["slos"] == ["tpot_p99_ms<=38"] and run["pareto_front"]["concurrency 1"]


def test_one_k_at_every_load_is_not_started_again_as_a_k_by_batch_size(setup, monkeypatch):
    url, store, workload, settings = setup
    starts = []

    def measure(model, spec, workload, settings, progress):
        starts.append(spec)
        # The step cost does not grow with the batch here: the same k wins at every load.
        tps, profile = world(spec)
        return [fake_measurement(spec, tps, per_position=profile, load=load.label) for load in settings.loads]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    loads = (LoadSpec("concurrency", 1), LoadSpec("concurrency", 8))
    multi = MeasureSettings(load=loads[0], extra_loads=loads[1:], server=settings.server)
    space = SearchSpace(methods=("draft_model",), ks=(1, 2, 4, 8), drafts={"draft_model": ("good",)})
    outcome = optimize("m", workload, space, multi, store, optuna_storage(url),
                       OptimizeSettings(trials=10, strategy="grid", noise=0.01), Quiet())
    schedule = outcome.k_by_batch_size
    assert len({level.k for level in schedule.levels}) == 1 and schedule.levels[0].k > 0
    assert not schedule.needs_own_server and outcome.k_by_batch_size_rows is None
    assert len(starts) == len(space.candidates())  # no start of its own
    assert outcome.verdict.kind == "config" and outcome.verdict.label == outcome.single[0].label
    assert "not started again" in k_by_batch_size_text(outcome)


def test_several_loads_give_a_k_by_batch_size_measured_against_the_best_single_k(setup, monkeypatch):
    url, store, workload, settings = setup
    starts = []

    def measure(model, spec, workload, settings, progress):
        starts.append(spec)
        result = []
        for load in settings.loads:
            if spec is not None and "num_speculative_tokens_per_batch_size" in spec.extra:
                ranges = spec.extra["num_speculative_tokens_per_batch_size"]
                k = next(k for lo, hi, k in ranges if lo <= load.concurrency <= hi or hi == ranges[-1][1])
                spec_here = type(spec)(spec.method, max(k, 1), spec.draft_model) if k else None
            else:
                spec_here = spec
            tps, profile = world(spec_here, load.concurrency)
            result.append(fake_measurement(spec, tps, per_position=profile, load=load.label))
        return result

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    loads = (LoadSpec("concurrency", 1), LoadSpec("concurrency", 4), LoadSpec("concurrency", 16))
    multi = MeasureSettings(load=loads[0], extra_loads=loads[1:], server=settings.server)
    space = SearchSpace(methods=("draft_model",), ks=(1, 2, 3, 4, 6, 8), drafts={"draft_model": ("good",)})
    outcome = optimize("m", workload, space, multi, store, optuna_storage(url),
                       OptimizeSettings(trials=10, strategy="grid", noise=0.01), Quiet())
    ks = [level.k for level in outcome.k_by_batch_size.levels]
    assert ks[0] > ks[1] > ks[2] >= 0  # verification costs more in bigger batches: k falls with load
    config = outcome.k_by_batch_size.config()
    ranges = config["num_speculative_tokens_per_batch_size"]
    assert ranges[0][0] == 1 and config["num_speculative_tokens"] == ks[0]
    assert [r.load for r in outcome.k_by_batch_size_rows] == [load.label for load in loads]
    assert {r.kind for r in outcome.k_by_batch_size_rows} == {"k_by_batch_size"}
    assert len(starts) == len(space.candidates()) + 1  # one start per config, plus its own
    single = {r.load: r.tokens_per_s for r in outcome.single}
    own = {r.load: r.tokens_per_s for r in outcome.k_by_batch_size_rows}
    assert all(own[label] >= single[label] * 0.999 for label in single)
    assert sum(own.values()) > sum(single.values())
    assert outcome.verdict.kind == "k_by_batch_size" and outcome.verdict.deployed == config

    # --json and /api/model: the key "k_by_batch_size", and "schedule" as its deprecated alias
    printed = outcome_dict(outcome)
    assert printed["kind"] == "k_by_batch_size" and printed["k_by_batch_size"]["config"] == config
    assert printed["schedule"] == printed["k_by_batch_size"]
    view = TestClient(create_app(url)).get("/api/model", params={"model": "m", "type": "code"}).json()
    assert view["kind"] == "k_by_batch_size" and view["k_by_batch_size"]["config"] == config
    assert view["schedule"] == view["k_by_batch_size"]


def test_a_study_at_several_loads_warm_starts_from_the_previous_one(setup, monkeypatch):
    url, store, workload, settings = setup
    measured = []

    def measure(model, spec, workload, settings, progress):
        if spec is None or "num_speculative_tokens_per_batch_size" not in spec.extra:
            measured.append(spec.label if spec else "baseline")
        figures = [world(spec, load.concurrency) for load in settings.loads]
        return [fake_measurement(spec, tps, per_position=profile, load=load.label)
                for (tps, profile), load in zip(figures, settings.loads)]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    loads = (LoadSpec("concurrency", 1), LoadSpec("concurrency", 4))
    multi = MeasureSettings(load=loads[0], extra_loads=loads[1:], server=settings.server)
    first = optimize("m", workload, SYNTHETIC_SPACE, multi, store, optuna_storage(url),
                     OptimizeSettings(trials=30, noise=0.02), Quiet())
    cold = len(measured)
    measured.clear()
    optimize("m", workload, SYNTHETIC_SPACE, multi, store, optuna_storage(url),
             OptimizeSettings(trials=30, noise=0.02, name="nightly"), Quiet())
    # The previous best single config over both levels comes right after the baseline, and the
    # previous study's profiles spare the drafters' runs at their highest k.
    assert measured[:2] == ["baseline", first.single[0].label]
    assert len(measured) < cold


class Phases(Quiet):
    def __init__(self):
        self.said = []

    def phase(self, description):
        self.said.append(description)


def test_a_transient_fault_is_not_measured_and_the_next_run_measures_it(setup, monkeypatch):
    url, store, workload, settings = setup
    calls, host_faulty = [], True

    def measure(model, spec, workload, settings, progress):
        calls.append(spec.label if spec else "baseline")
        if host_faulty and spec and spec.k == 2:
            raise ServerStartError("port 8000 was taken by another program", transient=True)
        return [fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0))]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    space, storage = SearchSpace(methods=("ngram",), ks=(1, 2)), optuna_storage(url)
    for strategy in ("grid", "guided"):
        calls.clear()
        host_faulty, name = True, f"{strategy} study"
        options = OptimizeSettings(trials=5, strategy=strategy, name=name, warm_start=False)
        first = optimize("m", workload, space, settings, store, storage, options, Quiet())
        rows = store.trials(study_name=name)
        assert sorted(calls) == ["baseline", "ngram k=1", "ngram k=2"]  # not retried in the same run
        assert sorted(r.status for r in rows) == ["complete", "complete", NOT_MEASURED]
        assert first.verdict.label == "ngram k=1"  # never the not-measured config's result
        assert any("ngram k=2 was not measured, for a fault of the host (port 8000" in n
                   for n in first.verdict.notes), first.verdict.notes
        calls.clear()
        host_faulty = False
        second = optimize("m", workload, space, settings, store, storage, options, Quiet())
        assert calls == ["ngram k=2"]
        assert second.verdict.label == "ngram k=2" and not second.verdict.notes


@pytest.mark.parametrize("fault", [ServerDiedError("the vLLM server (baseline) died during the replay"),
                                   MetricsError("could not read /metrics (timed out)")])
def test_a_baseline_that_failed_is_measured_again_by_the_next_run(setup, monkeypatch, fault):
    url, store, workload, settings = setup
    calls, broken = [], True

    def measure(model, spec, workload, settings, progress):
        calls.append(spec.label if spec else "baseline")
        if broken and spec is None:
            raise fault
        return [fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0))]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    space, storage = SearchSpace(methods=("ngram",), ks=(1, 2)), optuna_storage(url)
    with pytest.raises(TunerError, match="baseline") as raised:
        optimize("m", workload, space, settings, store, storage, OptimizeSettings(), Quiet())
    assert calls.count("baseline") == 1
    assert "run the same command again" in str(raised.value) or "rerun" in str(raised.value)
    calls.clear()
    broken = False
    outcome = optimize("m", workload, space, settings, store, storage, OptimizeSettings(), Quiet())
    assert calls[0] == "baseline"
    assert outcome.verdict.answers["concurrency 1"].baseline.tokens_per_s == 100.0


def test_a_trial_another_worker_took_over_is_dropped_with_one_sentence(setup, monkeypatch):
    """Another worker found this trial's heartbeat stale, failed it and queued it again while it
    was measured here: this worker says so and goes on; the queued copy is measured."""
    url, store, workload, settings = setup
    storage, calls = optuna_storage(url), []

    def measure(model, spec, workload, settings, progress):
        calls.append(spec.label if spec else "baseline")
        if spec is not None and calls.count(spec.label) == 1:
            study = optuna.load_study(study_name="taken over", storage=storage)
            (running,) = study.get_trials(states=(TrialState.RUNNING,))
            storage.set_trial_state_values(running._trial_id, TrialState.FAIL)
            study.enqueue_trial(running.params)
        return [fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0))]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    progress = Phases()
    outcome = optimize("m", workload, SearchSpace(methods=("ngram",), ks=(1,)), settings, store, storage,
                       OptimizeSettings(strategy="grid", name="taken over"), progress)
    assert calls == ["baseline", "ngram k=1", "ngram k=1"]
    assert sum("was finished by another worker" in p for p in progress.said) == 1
    assert outcome.verdict.label == "ngram k=1"


def test_with_max_repeats_each_trial_is_told_what_it_must_reach_to_be_chosen(setup, monkeypatch):
    """--max-repeats: a trial replays until the decision is clear, and a config whose interval
    ends below the study's best so far (less the 2 % run noise that ties configs) is no
    contender: the study hands each trial that bar per load (``MeasureSettings.out_of_reach``)."""
    from dataclasses import replace

    url, store, workload, settings = setup
    seen = []

    def measure(model, spec, workload, settings, progress):
        seen.append((spec.label if spec else "baseline", dict(settings.out_of_reach)))
        return [fake_measurement(spec, world(spec)[0], per_position=world(spec)[1])]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    space = SearchSpace(methods=("ngram",), ks=(2, 4))
    grid = OptimizeSettings(trials=5, strategy="grid")
    optimize("m", workload, space, replace(settings, max_repeats=4), store, optuna_storage(url), grid, Quiet())
    measured = {label: tokens for label, tokens in ((r.label, r.tokens_per_s) for r in store.trials())}
    # (The stand-in gives one replay each, which leaves k=2 and k=4 undecided: second starts follow.)
    assert [label for label, _ in seen[:3]] == ["baseline", "ngram k=2", "ngram k=4"]
    assert seen[0][1] == {}  # nothing measured yet: the baseline is measured to its precision
    assert seen[1][1] == {"concurrency 1": pytest.approx(measured["baseline"] * 0.98)}
    best = max(measured["baseline"], measured["ngram k=2"])
    assert seen[2][1] == {"concurrency 1": pytest.approx(best * 0.98)}
    # Without --max-repeats every trial takes --repeats replays: no bar is handed on.
    seen.clear()
    optimize("m", workload, space, settings, store, optuna_storage(url),
             OptimizeSettings(trials=5, strategy="grid", name="fixed repeats"), Quiet())
    assert seen and all(reach == {} for _, reach in seen)


def replays_of(spec, values, load="concurrency 1"):
    """A measurement of ``spec`` whose replays gave ``values`` tokens/s."""
    from dataclasses import replace

    one = fake_measurement(spec, values[0], load=load)
    runs = [replace(one.runs[0], repeat=i, summary=replace(one.runs[0].summary, output_tokens_per_s=v))
            for i, v in enumerate(values)]
    return replace(one, runs=runs)


def test_an_undecided_pair_gets_a_second_start_pooled_with_the_first(setup, monkeypatch):
    """--max-repeats: ngram k=4 (132 +- 1) and k=2 (120, 140, 130) are neither separated nor
    shown equal within the 2 % tolerance. The study starts the less well known one again, pools
    its replays with the first start's, and goes on until the pair is decided (here: shown
    equal, so the smaller k) or --trials allows no more starts, when it says undecided."""
    from dataclasses import replace

    url, store, workload, settings = setup
    first = {"baseline": [100.0, 101.0, 99.0], "ngram k=2": [120.0, 140.0, 130.0], "ngram k=4": [131.0, 133.0, 132.0]}
    second = {"ngram k=2": [130.0, 131.0, 132.0], "ngram k=4": [131.8, 132.0, 132.2]}
    calls = []

    def measure(model, spec, workload, settings, progress):
        label = spec.label if spec else "baseline"
        again = label in calls
        calls.append(label)
        return [replays_of(spec, second[label] if again else first[label])]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    space = SearchSpace(methods=("ngram",), ks=(2, 4))
    precise = replace(settings, max_repeats=3)
    outcome = optimize("m", workload, space, precise, store, optuna_storage(url),
                       OptimizeSettings(trials=5, strategy="grid"), Quiet())
    assert calls == ["baseline", "ngram k=2", "ngram k=4", "ngram k=2", "ngram k=4"]
    assert outcome.restarts == 5
    answer = outcome.answer
    assert answer.winner.label == "ngram k=2" and not answer.undecided  # shown equal: the smaller k
    assert answer.winner.starts == 2 and answer.winner.repeats == 6
    assert sorted(answer.winner.replays) == [120.0, 130.0, 130.0, 131.0, 132.0, 140.0]
    assert answer.winner.tokens_per_s == pytest.approx(130.5)
    assert "winner over 6 runs on 2 servers: median 130.5 tok/s" in answer_text(answer)
    again = [r for r in store.trials() if r.proposal_reason and r.proposal_reason.startswith("second start")]
    assert [r.label for r in again] == ["ngram k=2", "ngram k=4"]
    assert "undecided against ngram k=4 at concurrency 1" in again[0].proposal_reason

    # --trials 4: one start left after the three configs; the pair stays undecided and says so.
    calls.clear()
    tight = optimize("m", workload, space, precise, store, optuna_storage(url),
                     OptimizeSettings(trials=4, strategy="grid", name="tight"), Quiet())
    assert calls == ["baseline", "ngram k=2", "ngram k=4", "ngram k=2"]
    assert tight.restarts == 4
    assert [r.label for r in tight.answer.undecided] and "undecided between" in tight.answer.verdict

    # Without --max-repeats a trial's replays are what the user asked for: no second start.
    calls.clear()
    optimize("m", workload, space, settings, store, optuna_storage(url),
             OptimizeSettings(trials=5, strategy="grid", name="fixed"), Quiet())
    assert calls == ["baseline", "ngram k=2", "ngram k=4"]


def test_a_single_config_undecided_over_the_loads_is_started_again_too():
    """k=4 wins at concurrency 1 and k=2 at 8, each clearly; over both loads (the one config to
    deploy) their geometric means are neither separated nor shown equal: that pair is what a
    second start settles."""
    from dataclasses import replace

    from test_report import row

    from tuner.study.loop import _to_start_again

    k = {n: {"method": "ngram", "num_speculative_tokens": n} for n in (2, 4)}
    c1, c8 = "concurrency 1", "concurrency 8"

    def replayed(r):
        return replace(r, repeats=2, tokens_per_s_mad=r.tokens_per_s * 0.015)

    rows = [replayed(r) for r in (row(0, None, 100.0, load=c1), row(0, None, 400.0, load=c8),
                                  row(1, k[4], 160.0, load=c1), row(1, k[4], 562.0, load=c8),
                                  row(2, k[2], 150.0, load=c1), row(2, k[2], 600.0, load=c8))]
    options = OptimizeSettings()
    again, why = _to_start_again(rows, options, tried=set())
    assert again.config in (k[2], k[4]) and why.endswith("over concurrency 1,concurrency 8")
    assert why.startswith("undecided against ngram k=")
    # Tried once already, or started twice: nothing left to settle.
    assert _to_start_again(rows, options, tried={json.dumps(k[2], sort_keys=True), json.dumps(k[4], sort_keys=True)}) is None
    assert _to_start_again([replace(r, starts=2) for r in rows], options, tried=set()) is None


def test_a_joining_worker_measures_no_config_before_the_baseline_is_complete(postgres_url, tmp_path):
    """Every config's greedy output is checked against the baseline's: a helper worker that
    joins while the creator measures the baseline waits for it instead of measuring a config
    that then has nothing to be checked against (issue 33)."""
    import threading
    import time

    from tuner.study.workers import WAIT_S

    path = tmp_path / "code.jsonl"
    path.write_text('{"prompt": "x"}\n')
    workload = Workload(path=path, type="code", requests=(Request(line=1, prompt="x"),))
    settings = MeasureSettings(server=ServerOptions(log_dir=tmp_path))
    store = ResultStore(open_database(postgres_url))
    events, baseline_may_end = [], threading.Event()

    def measure(model, spec, workload, settings, progress):
        label = spec.label if spec else "baseline"
        events.append(("start", label, time.monotonic()))
        if spec is None:
            baseline_may_end.wait(timeout=60)
        events.append(("end", label, time.monotonic()))
        return [fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0))]

    space = SearchSpace(methods=("ngram",), ks=(2, 4))

    def run(join: bool) -> None:
        optimize("m", workload, space, settings, store, optuna_storage(postgres_url),
                 OptimizeSettings(trials=5, strategy="grid", name="shared", join=join), Quiet(), measure=measure)

    creator = threading.Thread(target=run, args=(False,))
    creator.start()
    deadline = time.monotonic() + 60
    while not events and time.monotonic() < deadline:
        time.sleep(0.1)
    worker = threading.Thread(target=run, args=(True,))
    worker.start()
    time.sleep(WAIT_S + 3)  # the worker has looked at the study and seen configs waiting
    baseline_may_end.set()
    creator.join(timeout=120)
    worker.join(timeout=120)
    ended = next(t for kind, label, t in events if kind == "end" and label == "baseline")
    starts = [(label, t) for kind, label, t in events if kind == "start" and label != "baseline"]
    assert sorted(label for label, _ in starts) == ["ngram k=2", "ngram k=4"]
    assert all(t >= ended for _, t in starts), events


@pytest.mark.parametrize("strategy", ["grid", "tpe"])
def test_no_config_is_measured_after_the_baseline_failed(setup, monkeypatch, strategy):
    """Without a baseline nothing can be compared or checked against its greedy output: every
    strategy stops (the guided one always did), and the next run measures the baseline first and
    then the configs, each checked (issue 33: unchecked trials counted as eligible)."""
    url, store, workload, settings = setup
    calls, broken = [], True

    def measure(model, spec, workload, settings, progress):
        calls.append(spec.label if spec else "baseline")
        if broken and spec is None:
            raise ServerDiedError("the vLLM server (baseline) died during the replay")
        return [fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0))]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    space, storage = SearchSpace(methods=("ngram",), ks=(1, 2)), optuna_storage(url)
    options = OptimizeSettings(trials=5, strategy=strategy)
    with pytest.raises(TunerError, match="baseline"):
        optimize("m", workload, space, settings, store, storage, options, Quiet())
    assert calls == ["baseline"]
    calls.clear()
    broken = False
    outcome = optimize("m", workload, space, settings, store, storage, options, Quiet())
    assert calls[0] == "baseline" and sorted(calls[1:]) == ["ngram k=1", "ngram k=2"]
    assert outcome.verdict.label == "ngram k=2"
