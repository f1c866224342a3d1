"""--time-limit: the rule that refuses a server start, and the study loop stopping on it (a unit
test of the search room with a stand-in measurement; tests/integration/test_optimize_real.py
runs it on the real vLLM server)."""

import functools

import pytest

from fakes import Quiet, fake_measurement
from tuner.errors import UsageError
from tuner.engine import ServerOptions
from tuner.outputs.report import outcome_dict
from tuner.study.loop import OptimizeSettings, optimize
from tuner.plan.space import SearchSpace
from tuner.study import loop as study_module
from tuner.plan.study_plan import plan_study
from tuner.plan.settings import parse_time_limit
from tuner.study.time_limit import TimeLimit
from tuner.store import ResultStore, open_database, optuna_storage
from tuner.measure.trial import MeasureSettings
from tuner.workload import Request, Workload


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("text, seconds", [("600", 600), ("600s", 600), ("10m", 600), ("1.5h", 5400), (90, 90)])
def test_a_time_limit_reads_seconds_minutes_and_hours(text, seconds):
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["ten minutes", "-5", "0", "10 days"])
def test_a_time_limit_that_is_no_duration_is_refused_in_one_sentence(text):
    with pytest.raises(UsageError, match="--time-limit must be"):
        parse_time_limit(text)


def test_the_study_file_key_and_the_flag_give_the_limit_the_flag_winning(tmp_path):
    study = tmp_path / "study.toml"
    study.write_text('time_limit = "10m"\n')
    assert plan_study(study).options.time_limit_s == 600
    assert plan_study(study, time_limit="90s").options.time_limit_s == 90
    assert plan_study().options.time_limit_s is None


def test_the_first_start_is_always_made_then_only_one_that_ends_in_time():
    clock = Clock()
    limit = TimeLimit(250, clock=clock)
    clock.now += 400  # even past the limit: without a measured trial there is no answer
    assert limit.allows_start() and not limit.reached
    limit = TimeLimit(250, clock=clock)
    with limit.trial():
        clock.now += 100
    assert limit.allows_start()  # 100 s gone + 100 s for the longest trial <= 250
    with limit.trial():
        clock.now += 60
    assert limit.longest_trial_s == 100
    assert not limit.allows_start() and limit.reached  # 160 + 100 > 250
    # Counted from the command's start: checks before the study (25 s on the H200) use it up too.
    begun_earlier = TimeLimit(250, clock=clock, began=clock.now - 60)
    with begun_earlier.trial():
        clock.now += 100
    assert begun_earlier.elapsed_s() == 160 and not begun_earlier.allows_start()  # 160 + 100 > 250
    unlimited = TimeLimit(None, clock=clock)
    with unlimited.trial():
        clock.now += 10_000
    assert unlimited.allows_start()


def test_the_study_stops_starting_servers_at_the_limit_and_the_same_command_goes_on(tmp_path, db_url, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(study_module, "TimeLimit", functools.partial(TimeLimit, clock=clock))
    measured = []

    def measure(model, spec, workload, settings, progress):
        clock.now += 100  # every trial, its server's start included, takes 100 s
        measured.append(spec.label if spec else "baseline")
        return [fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0))]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "x"}\n')
    workload = Workload(path=path, type="code", requests=(Request(line=1, prompt="x"),))
    settings = MeasureSettings(server=ServerOptions(log_dir=tmp_path))
    store, storage = ResultStore(open_database(db_url)), optuna_storage(db_url)
    space = SearchSpace(methods=("ngram",), ks=(1, 2, 3))
    limited = OptimizeSettings(strategy="grid", name="s", time_limit_s=250)
    outcome = optimize("m", workload, space, settings, store, storage, limited, Quiet())
    assert measured == ["baseline", "ngram k=1"]  # a third would have ended at 300 s
    assert outcome.time_limit_reached and outcome.restarts == 2 and outcome.elapsed_s == 200
    assert outcome.verdict.label == "ngram k=1"  # the best of what was measured
    assert outcome_dict(outcome)["time_limit_reached"] is True

    again = optimize("m", workload, space, settings, store, storage,
                     OptimizeSettings(strategy="grid", name="s"), Quiet())
    assert measured == ["baseline", "ngram k=1", "ngram k=2", "ngram k=3"]  # nothing measured twice
    assert not again.time_limit_reached and again.verdict.label == "ngram k=3"
