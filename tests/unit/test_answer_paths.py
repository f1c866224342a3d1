"""The answer on the paths a GPU user takes beside the demo's: several loads with latency
targets, the k-by-batch-size schedule's own rules, what-if studies, other loads' greedy
references, counting starts, nightly regressions and figures of zero. The deciding rooms are
pure functions over stored rows (tested on rows here); the study loop runs with a stand-in for
the measurement (tests/integration runs it on the real vLLM server)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from fakes import Quiet, fake_measurement
from test_report import row
from tuner.engine import ServerOptions
from tuner.errors import ServerStartError, TunerError
from tuner.replay import LoadSpec, RequestResult
from tuner.schedule.outcome import study_outcome
from tuner.study.loop import OptimizeSettings, optimize
from tuner.plan.space import SearchSpace
from tuner.study import loop as study_module
from tuner.decide.answer import choose
from tuner.decide.k_by_batch_size import k_by_batch_size_beats_single, tune_k_by_batch_size
from tuner.decide.slo import parse_slos
from tuner.study.loop import _k_by_batch_size_record
from tuner.decide.verdict import StudyRules, best_verdicts, study_verdict
from tuner.store import NOT_MEASURED, ResultStore, open_database, optuna_storage
from tuner.measure.trial import MeasureSettings
from tuner.web import create_app
from tuner.workload import Request, Workload

C1, C32 = "concurrency 1", "concurrency 32"
LOADS = (LoadSpec("concurrency", 1), LoadSpec("concurrency", 32))
NGRAM4 = {"method": "ngram", "num_speculative_tokens": 4}
TARGET = parse_slos(["tpot_p99_ms<=40"])


def timed(r, tpot_p99_s: float):
    return replace(r, tpot_p99_s=tpot_p99_s, greedy_match_rate=1.0 if r.config else None)


def baseline_breaks_at_32_speculation_at_1() -> list:
    """The baseline meets a 40 ms p99 TPOT at concurrency 1 only, ngram k=4 at 32 only."""
    return [timed(row(0, None, 100.0, load=C1), 0.020), timed(row(0, None, 400.0, load=C32), 0.060),
            timed(row(1, NGRAM4, 150.0, load=C1), 0.050), timed(row(1, NGRAM4, 600.0, load=C32), 0.030)]


def test_several_loads_where_no_single_config_meets_the_targets_name_none_and_no_deploy_line():
    """Before: "keep speculation off: the baseline is the fastest single config" with a line
    that breaks the target at 32."""
    verdict = study_verdict(baseline_breaks_at_32_speculation_at_1(), StudyRules(slos=TARGET))
    assert verdict.kind == "none" and verdict.serve_command() is None and verdict.deployed is None
    assert verdict.headline.startswith("no single configuration meets tpot_p99_ms<=40 at every load of "
                                       "concurrency 1,concurrency 32; the closest is ")
    assert verdict.recommended == "no configuration meets the targets"


def test_there_the_measured_k_by_batch_size_schedule_is_the_answer():
    """k = 0 at concurrency 1 and k = 4 at 32 meets the target at both; measured on its own
    server, it is deployed."""
    rows = baseline_breaks_at_32_speculation_at_1()
    schedule = tune_k_by_batch_size(rows, LOADS, slos=TARGET)
    assert [level.k for level in schedule.levels] == [0, 4] and schedule.needs_own_server
    config = schedule.config()
    measured = [replace(timed(row(-1, config, tps, load=load), tpot), kind="k_by_batch_size", label="ngram k by batch size")
                for tps, load, tpot in ((101.0, C1, 0.021), (590.0, C32, 0.031))]
    rules = StudyRules(slos=TARGET, k_by_batch_size=_k_by_batch_size_record(schedule, measured, None))
    verdict = study_verdict(rows + measured, rules)
    assert verdict.kind == "k_by_batch_size" and verdict.deployed == config
    assert "the only configuration measured that meets the targets at every load" in verdict.headline
    assert "num_speculative_tokens_per_batch_size" in verdict.serve_command()
    # Its own server broke the target at 32: nothing meets the targets at every load.
    broke = [measured[0], replace(measured[1], tpot_p99_s=0.045)]
    rules = StudyRules(slos=TARGET, k_by_batch_size=_k_by_batch_size_record(schedule, broke, None))
    verdict = study_verdict(rows + broke, rules)
    assert verdict.kind == "none" and "the k-by-batch-size schedule, measured on its own server, broke" in verdict.headline


def test_a_schedule_is_made_only_of_a_drafter_that_meets_the_targets_at_every_level():
    """Before: where neither the baseline nor the drafter met the target at a level, k = 0 was
    put there, a schedule that breaks the target by construction."""
    rows = [timed(row(0, None, 100.0, load=C1), 0.020), timed(row(0, None, 400.0, load=C32), 0.060),
            timed(row(1, NGRAM4, 150.0, load=C1), 0.020), timed(row(1, NGRAM4, 600.0, load=C32), 0.050)]
    assert tune_k_by_batch_size(rows, LOADS, slos=TARGET) is None


def test_keep_speculation_off_says_the_configs_broke_a_target_not_that_none_completed():
    rows = [timed(row(0, None, 100.0), 0.020), timed(row(1, NGRAM4, 150.0), 0.050)]
    answer = choose(rows, slos=TARGET)
    assert answer.keep_speculation_off
    assert answer.verdict == ("keep speculation off: of the 1 speculative configuration that completed, "
                              "1 broke tpot_p99_ms<=40 (the closest, ngram k=4)")
    assert choose(rows[:1]).verdict == "keep speculation off: no speculative configuration completed"


def test_one_noise_rule_against_the_baseline_over_several_loads():
    """The best single config 6 % above the baseline with a 4 % spread at each load is within
    the 5 % noise plus the spread, as `choose` decides at one load. Before: 1.06 > 1.05, deployed."""
    def spread(r):
        return replace(r, repeats=3, tokens_per_s_mad=r.tokens_per_s * 0.04)

    rows = [spread(r) for r in (row(0, None, 100.0, load=C1), row(0, None, 400.0, load=C32),
                                row(1, NGRAM4, 106.0, load=C1), row(1, NGRAM4, 424.0, load=C32))]
    assert choose([r for r in rows if r.load == C1]).keep_speculation_off  # the rule at one load
    verdict = study_verdict(rows, StudyRules(noise=0.05))
    assert verdict.kind == "off" and verdict.serve_command() == "vllm serve m"
    # Without the spread, 6 % is beyond the noise.
    tight = [replace(r, tokens_per_s_mad=0.0) for r in rows]
    assert study_verdict(tight, StudyRules(noise=0.05)).kind == "config"


def test_a_schedule_deploys_only_when_faster_than_the_best_single_config_beyond_the_noise():
    k2 = {"method": "ngram", "num_speculative_tokens": 2}
    single = [replace(row(1, k2, t, load=load), repeats=3, tokens_per_s_mad=t * 0.03)
              for t, load in ((150.0, C1), (500.0, C32))]
    slightly = [replace(r, kind="k_by_batch_size", tokens_per_s=r.tokens_per_s * 1.01) for r in single]
    clearly = [replace(r, kind="k_by_batch_size", tokens_per_s=r.tokens_per_s * 1.2) for r in single]
    assert k_by_batch_size_beats_single(slightly, single, noise=0.05) is False  # before: True (1.01 > 1)
    assert k_by_batch_size_beats_single(clearly, single, noise=0.05) is True
    assert k_by_batch_size_beats_single(clearly[:1], single, noise=0.05) is None  # not measured at 32


def test_a_baseline_at_zero_tokens_per_s_is_one_sentence_not_a_traceback():
    rows = [row(0, None, 0.0), row(1, NGRAM4, 150.0)]
    with pytest.raises(TunerError, match=r"the baseline generated no output tokens at concurrency 1 \(0 tokens/s\)"):
        choose(rows)


def test_nightly_regressed_is_judged_by_the_study_s_own_noise():
    """A study run with --noise 0.2 that names the same config 10 % slower is within its noise.
    Before: the service's 0.05 called it regressed."""
    from datetime import datetime, timezone

    def study(name, tps, day):
        return [replace(row(0, None, 100.0), study_name=name, finished_at=datetime(2026, 12, day, tzinfo=timezone.utc)),
                replace(row(1, NGRAM4, tps), study_name=name, finished_at=datetime(2026, 12, day, tzinfo=timezone.utc))]

    history = study("old", 200.0, 1) + study("new", 180.0, 2)
    rules = {"old": {"noise": 0.2}, "new": {"noise": 0.2}}
    outcome = study_outcome("new", history, 0.05, rules)
    assert outcome.kind == "unchanged", outcome
    assert study_outcome("new", history, 0.05, {"old": {"noise": 0.05}, "new": {"noise": 0.05}}).kind == "regressed"


# The study loop with a stand-in for the measurement.

def study_parts(url: str, tmp_path):
    """A database, a one-request workload and a folder for the study loop."""
    path = tmp_path / "code.jsonl"
    path.write_text('{"prompt": "x"}\n')
    workload = Workload(path=path, type="code", requests=(Request(line=1, prompt="x"),))
    return url, ResultStore(open_database(url)), workload, tmp_path


@pytest.fixture
def setup(tmp_path):
    return study_parts(f"sqlite:///{tmp_path / 'tuner.db'}", tmp_path)


@pytest.fixture
def shared_setup(tmp_path, db_url):
    """``setup`` on SQLite and on the PostgreSQL that helper workers share a study on."""
    return study_parts(db_url, tmp_path)


def at_loads(settings, figures, spec, **kwargs):
    return [fake_measurement(spec, figures[load.label], load=load.label, **kwargs) for load in settings.loads]


def schedule_study(setup, monkeypatch, schedule_measure):
    """ngram k=4 wins at concurrency 1 and k=2 at 4: the schedule needs its own server, which
    ``schedule_measure`` measures."""
    url, store, workload, tmp_path = setup
    loads = (LoadSpec("concurrency", 1), LoadSpec("concurrency", 4))
    figures = {None: {C1: 100.0, "concurrency 4": 300.0}, 2: {C1: 150.0, "concurrency 4": 420.0},
               4: {C1: 190.0, "concurrency 4": 330.0}}

    def measure(model, spec, workload, settings, progress):
        if spec is not None and "num_speculative_tokens_per_batch_size" in spec.extra:
            return schedule_measure(settings, spec)
        return at_loads(settings, figures[spec.k if spec else None], spec)

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    settings = MeasureSettings(load=loads[0], extra_loads=loads[1:], server=ServerOptions(log_dir=tmp_path))
    return optimize("m", workload, SearchSpace(methods=("ngram",), ks=(2, 4)), settings, store,
                    optuna_storage(url), OptimizeSettings(trials=5, strategy="grid", noise=0.02), Quiet())


def test_a_schedule_whose_requests_failed_is_not_deployed(setup, monkeypatch):
    """Before: its own server's run skipped the failed-request check every trial has, and a
    schedule that lost half its requests was deployed on the figures of the rest."""
    outcome = schedule_study(setup, monkeypatch, lambda settings, spec: at_loads(
        settings, {C1: 200.0, "concurrency 4": 450.0}, spec, failed=5))
    store = setup[1]
    (schedule,) = {r.status for r in store.trials() if r.kind == "k_by_batch_size"}
    assert schedule == "failed"
    assert outcome.k_by_batch_size_rows is None and outcome.verdict.kind == "config"


def test_a_measured_schedule_is_deployed_after_a_helper_worker_joined_the_study(shared_setup, monkeypatch):
    """A helper worker's run (--workers, `tuner worker`) is the study's latest and stores no
    schedule. Before: the verdict read the latest run's record and deployed the single config."""
    from tuner.decide.verdict import best_from_store

    faster = lambda settings, spec: at_loads(settings, {C1: 200.0, "concurrency 4": 460.0}, spec)  # noqa: E731
    outcome = schedule_study(shared_setup, monkeypatch, faster)
    assert outcome.verdict.kind == "k_by_batch_size"
    url, store, workload, tmp_path = shared_setup
    loads = (LoadSpec("concurrency", 1), LoadSpec("concurrency", 4))
    settings = MeasureSettings(load=loads[0], extra_loads=loads[1:], server=ServerOptions(log_dir=tmp_path))
    optimize("m", workload, SearchSpace(methods=("ngram",), ks=(2, 4)), settings, store, optuna_storage(url),
             OptimizeSettings(trials=5, strategy="grid", noise=0.02, join=True), Quiet())
    assert len(store.study_runs(outcome.study_name)) == 2
    (best,) = best_from_store(store)
    assert best.kind == "k_by_batch_size" and best.deployed == outcome.verdict.deployed
    view = TestClient(create_app(url)).get("/api/model", params={"model": "m", "type": "code"}).json()
    assert view["kind"] == "k_by_batch_size" and view["k_by_batch_size"]["config"] == best.deployed


def test_a_fault_of_the_host_at_the_schedule_s_start_is_not_measured(setup, monkeypatch):
    def port_taken(settings, spec):
        raise ServerStartError("port 8000 was taken by another program", transient=True)

    outcome = schedule_study(setup, monkeypatch, port_taken)
    store = setup[1]
    assert [r.status for r in store.trials() if r.kind == "k_by_batch_size"] == [NOT_MEASURED]
    assert outcome.verdict.kind == "config"


def test_a_second_start_over_three_loads_counts_once_against_trials(setup, monkeypatch):
    """--max-repeats: ngram k=2 and k=4 are undecided at every load; with --trials 5 the three
    configs leave two starts, and each second start measures all three loads. Before: the first
    second start counted 3 and left no room for the other."""
    url, store, workload, tmp_path = setup
    loads = tuple(LoadSpec("concurrency", c) for c in (1, 2, 4))
    first = {None: [100.0, 101.0, 99.0], 2: [120.0, 140.0, 130.0], 4: [131.0, 133.0, 132.0]}
    calls = []

    def measure(model, spec, workload, settings, progress):
        calls.append(spec.label if spec else "baseline")
        out = []
        for load in settings.loads:
            one = fake_measurement(spec, 100.0, load=load.label)
            runs = [replace(one.runs[0], repeat=i, summary=replace(one.runs[0].summary, output_tokens_per_s=v))
                    for i, v in enumerate(first[spec.k if spec else None])]
            out.append(replace(one, runs=runs))
        return out

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    settings = MeasureSettings(load=loads[0], extra_loads=loads[1:], server=ServerOptions(log_dir=tmp_path),
                               max_repeats=3)
    optimize("m", workload, SearchSpace(methods=("ngram",), ks=(2, 4)), settings, store, optuna_storage(url),
             OptimizeSettings(trials=5, strategy="grid"), Quiet())
    assert len(calls) == 5 and sorted(calls[3:]) == ["ngram k=2", "ngram k=4"], calls


def greedy(tokens: dict[str, list[int]]) -> list[RequestResult]:
    return [RequestResult(rid, 0.0, ok=True, ttft_s=0.1, e2e_s=1.0, output_tokens=len(ids),
                          text_digest="-".join(map(str, ids)), greedy=True, token_ids=tuple(ids))
            for rid, ids in tokens.items()]


def test_each_load_is_checked_against_the_baseline_s_run_at_that_load(setup, monkeypatch):
    """With --requests-per-client the loads replay different requests (r1 only at 32). Before:
    every load was checked against the first baseline run found, whatever its load, and a
    request the reference lacked could not be checked."""
    url, store, workload, tmp_path = setup
    outputs = {C1: {"r0": [1, 2, 3]}, C32: {"r0": [1, 2, 3], "r1": [4, 5, 6]}}

    def measure(model, spec, workload, settings, progress):
        out = []
        for load in settings.loads:
            tokens = dict(outputs[load.label])
            if spec is not None and load.label == C32:
                tokens["r1"] = [4, 5, 7]  # a real change, at the load the first reference never replayed
            m = fake_measurement(spec, 150.0 if spec else 100.0, load=load.label)
            out.append(replace(m, runs=[replace(m.runs[0], requests=greedy(tokens))]))
        return out

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    settings = MeasureSettings(load=LOADS[0], extra_loads=LOADS[1:], server=ServerOptions(log_dir=tmp_path))
    outcome = optimize("m", workload, SearchSpace(methods=("ngram",), ks=(2,)), settings, store,
                       optuna_storage(url), OptimizeSettings(trials=3, strategy="grid"), Quiet())
    spec_rows = {r.load: r for r in store.trials() if r.config is not None}
    assert spec_rows[C1].greedy_match_rate == 1.0
    assert spec_rows[C32].greedy_match_rate == 0.5
    assert spec_rows[C32].first_divergence["request"] == "r1"
    assert outcome.verdict.kind == "off"  # it changed greedy output at 32: never the answer


# What-if studies (--synthetic-acceptance) beside real ones.

def run_study(setup, monkeypatch, name, speedup, synthetic=None):
    url, store, workload, tmp_path = setup
    monkeypatch.setattr(study_module, "measure_config_at_loads", lambda model, spec, workload, settings, progress: [
        fake_measurement(spec, 100.0 * (speedup if spec else 1.0), per_position=[0.6, 0.4] if spec else None)])
    settings = MeasureSettings(server=ServerOptions(log_dir=tmp_path, synthetic_acceptance=synthetic))
    return optimize("m", workload, SearchSpace(methods=("ngram",), ks=(2,)), settings, store,
                    optuna_storage(url), OptimizeSettings(trials=2, strategy="grid", name=name), Quiet())


def tuner_best(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner.cli", "best", "--db", url, *args],
                          capture_output=True, text=True, timeout=120)


def test_a_what_if_study_never_hides_the_real_one_nor_prints_a_deploy_line(setup, monkeypatch):
    """A --synthetic-acceptance study at 2.6x beside a real one at 1.3x of the same model and
    type. Before: `tuner best` and the dashboard named the what-if study with a bare deploy line."""
    url = setup[0]
    real = run_study(setup, monkeypatch, "real", 1.3)
    what_if = run_study(setup, monkeypatch, "what-if", 2.6, synthetic=(0.9, 0.8))
    assert what_if.verdict.what_if == "0.9,0.8" and what_if.verdict.serve_command() is None
    assert what_if.verdict.headline.startswith("what-if (synthetic acceptance 0.9,0.8): ngram k=2: 2.60x")
    assert what_if.verdict.config_json() is None  # --write-config writes nothing from it
    assert best_verdicts([what_if.verdict, real.verdict]) == [real.verdict]

    found = json.loads(tuner_best(url, "--json").stdout)
    assert [(v["study"], v["serve_command"]) for v in found] == [("real", real.verdict.serve_command())]
    text = tuner_best(url).stdout
    assert "ngram k=2: 1.30x" in text and "2.60x" not in text

    page = TestClient(create_app(url)).get("/model", params={"model": "m", "type": "code"})
    winner = page.text.split('<section id="winner">')[1].split("</section>")[0]
    assert "ngram k=2: 1.30x" in winner and "what-if" not in winner and 'id="serve-command"' in winner
    assert "what-if only: ngram k=2" in page.text  # the history shows it, as a what-if


def test_a_what_if_study_is_never_the_drift_reference(setup, monkeypatch):
    """Its acceptance is the synthetic profile it was given. Before: a what-if study alone (or
    faster than the real one) was the reference the production acceptance was checked against."""
    from tuner.schedule.drift import reference

    url, store = setup[0], setup[1]
    run_study(setup, monkeypatch, "what-if", 2.6, synthetic=(0.9, 0.8))
    assert reference(None, store.trials(), store.study_rules()) is None
    run_study(setup, monkeypatch, "real", 1.3)
    assert reference(None, store.trials(), store.study_rules()).study_name == "real"


def test_a_real_study_never_warm_starts_from_a_what_if_one(setup, monkeypatch):
    """Its observations are the synthetic profile's step costs. Before: a new real study of the
    same model, type and load took the what-if study's winner and figures as its prior."""
    from tuner.study.loop import warm_start

    store = setup[1]
    run_study(setup, monkeypatch, "what-if", 2.6, synthetic=(0.9, 0.8))
    candidates = SearchSpace(methods=("ngram",), ks=(2,)).candidates()
    loads = (LoadSpec("concurrency", 1),)
    assert warm_start(store, "m", "code", loads, "new", candidates, 0.05) == ([], [])
    prior, first = warm_start(store, "m", "code", loads, "new", candidates, 0.05, synthetic="0.9,0.8")
    assert prior and [c.label for c in first] == ["ngram k=2"]  # another what-if study of that profile may


def test_a_what_if_study_alone_is_shown_as_what_if_everywhere(setup, monkeypatch):
    url = setup[0]
    run_study(setup, monkeypatch, "what-if", 2.6, synthetic=(0.9, 0.8))
    (found,) = json.loads(tuner_best(url, "--json").stdout)
    assert found["what_if"] == "0.9,0.8" and found["serve_command"] is None and found["deployable"] is False
    assert found["speculative_config"] is None and found["what_if_label"] == "ngram k=2"
    text = tuner_best(url).stdout
    assert "what-if (synthetic acceptance 0.9,0.8)" in text and "vllm serve" not in text
    assert "nothing to deploy from a what-if study" in text
    client = TestClient(create_app(url))
    page = client.get("/model", params={"model": "m", "type": "code"})
    assert 'id="what-if"' in page.text and 'id="serve-command"' not in page.text
    assert "what-if only: ngram k=2" in client.get("/").text
