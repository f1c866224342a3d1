"""Workers on one study, without servers: heartbeats, a stale trial failed and queued again on
both databases, the guided search leaving other workers' configs alone, and the stored command."""

from __future__ import annotations

import time

import optuna
import pytest
from optuna.trial import TrialState

from tuner.propose.guided import GuidedSearch, key_of
from tuner.plan.space import SearchSpace
from tuner.study.workers import (REQUEST_ATTR, fail_stale, has_waiting, heartbeat, pending_keys,
                                  remember_request, stored_request)
from fakes import stored_request as request_json
from tuner.errors import UsageError
from tuner.plan.request import StudyRequest
from tuner.store import ResultStore, open_database, optuna_storage


def test_a_worker_that_stops_beating_has_its_trial_failed_and_queued_again(db_url):
    open_database(db_url)
    storage = optuna_storage(db_url, heartbeat_s=1)
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    params = {"method": "ngram", "k": 3}
    study.enqueue_trial(params)
    dead = study.ask()
    dead.suggest_categorical("method", ["ngram"])
    dead.suggest_int("k", 1, 5)
    with heartbeat(storage, dead):
        assert pending_keys(study) == {key_of(params)}
        assert pending_keys(study, but=dead.number) == set()
    # The heartbeat thread stopped with the block, as if the worker died: after the grace period
    # (3 s) it is stale. SQLite's CURRENT_TIMESTAMP, which Optuna compares with, has whole seconds.
    time.sleep(5)
    store = ResultStore(open_database(db_url))
    assert fail_stale(study, store) == [dead.number]
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states[dead.number] == TrialState.FAIL
    assert has_waiting(study)  # Optuna's RetryHeartbeatStaleTrialCallback queued it again
    retry = study.ask()
    assert retry.suggest_int("k", 1, 5) == 3 and retry.number != dead.number


def test_a_beating_trial_is_left_alone(db_url):
    open_database(db_url)
    storage = optuna_storage(db_url, heartbeat_s=1)
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    trial = study.ask()
    with heartbeat(storage, trial):
        time.sleep(3.5)
        assert fail_stale(study, ResultStore(open_database(db_url))) == []
    study.tell(trial, 1.0)


def test_guided_leaves_configs_other_workers_measure():
    space = SearchSpace(methods=("ngram",), ks=(1, 2, 3))
    candidates = space.candidates()
    guided = GuidedSearch(candidates, noise=0.02)
    baseline = candidates[0]
    # Another worker measures the baseline: this one starts the drafter at its highest k.
    first = guided.propose({}, pending={key_of(baseline.params)})
    assert first.candidate.params["ngram.k"] == 3
    # Both running elsewhere, nothing measured yet: nothing to compare, so wait (None).
    assert guided.propose({}, pending={key_of(baseline.params), key_of(first.candidate.params)}) is None


def test_a_worker_reads_the_study_request_the_creator_stored(db_url):
    """What `tuner worker` runs is the creator's request, read back whole: no options rebuilt."""
    open_database(db_url)
    storage = optuna_storage(db_url)
    request = StudyRequest.model_validate(request_json(k="1-4", concurrency="1,4", slos=["tpot_p99_ms<=40"],
                                                       name="n", db=db_url))
    remember_request(storage, request)
    assert stored_request(storage, "n") == request
    assert stored_request(storage, "other") is None
    # A request this tuner cannot read (a key it does not know) is one sentence, not a guess.
    optuna.load_study(study_name="n", storage=storage).set_user_attr(
        REQUEST_ATTR, {**request.to_json(), "bogus": 1})
    with pytest.raises(UsageError, match="the study 'n' holds no study request this tuner can read"):
        stored_request(storage, "n")


@pytest.mark.parametrize("args,message", [
    (["--workers", "2"], "several workers on one study need a database they can share"),
])
def test_sqlite_is_refused_for_more_than_one_worker(tmp_path, args, message):
    import subprocess
    import sys

    workload = tmp_path / "code.jsonl"
    workload.write_text('{"prompt": "x"}\n')
    result = subprocess.run([sys.executable, "-m", "tuner.cli", "optimize", "--workload", str(workload),
                             "--model", "m", "--db", f"sqlite:///{tmp_path / 't.db'}", *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("error: ")
    assert message in " ".join(result.stderr.split())
    worker = subprocess.run([sys.executable, "-m", "tuner.cli", "worker", "--study", "s",
                             "--db", f"sqlite:///{tmp_path / 't.db'}"], capture_output=True, text=True, timeout=60)
    assert worker.returncode == 2 and "SQLite cannot do safely" in " ".join(worker.stderr.split())


def test_a_worker_needs_a_study_started_by_optimize(postgres_url):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "tuner.cli", "worker", "--study", "missing",
                             "--db", postgres_url], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "no study 'missing' started by `tuner optimize`" in result.stderr
