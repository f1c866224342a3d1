"""Several workers on one study, on the REAL PostgreSQL of this machine and the REAL vLLM CPU build.

Two workers share one study of six configurations; every configuration is measured exactly
once, and their choice holds up against one worker's own measurement of the same space. Then
one of two workers is SIGKILLed mid-trial: the other reruns that trial, nothing completed is
lost, and no server process outlives the killed worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from tuner.search import choose
from tuner.search.workers import STALE_CAUSE
from tuner.store import ResultStore, open_database

from .serve_process import small_workload, wait_for
from .test_optimize_real import ENV, SERVER_ARGS

pytestmark = pytest.mark.integration

SPACE = ["--method", "ngram", "--strategy", "grid", "--warmup", "1", *SERVER_ARGS]


def optimize(tmp_path: Path, models: Path, db: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "tuner.cli", "optimize", "--workload", str(small_workload(tmp_path)),
            "--model", str(models / "target"), "--db", db, "--log-dir", str(tmp_path / "logs"), *SPACE, *args]


def configs(rows, status: str = "complete") -> Counter:
    return Counter(r.label for r in rows if r.status == status)


def test_two_workers_measure_each_config_once_and_agree_with_one(tmp_path, tiny_models, postgres_url):
    started = time.monotonic()
    two = subprocess.run(optimize(tmp_path, tiny_models, postgres_url, "--k", "1-5", "--workers", "2",
                                  "--name", "two workers"),
                         capture_output=True, text=True, env=ENV, timeout=1200)
    assert two.returncode == 0, two.stderr[-3000:]
    two_s = time.monotonic() - started
    store = ResultStore(open_database(postgres_url))
    rows = store.trials(study_name="two workers")
    assert configs(rows) == Counter({label: 1 for label in configs(rows)}) and len(configs(rows)) == 6
    assert len(rows) == 6, [(r.label, r.status) for r in rows]  # no config started twice
    runs = store.study_runs("two workers")
    assert len(runs) == 2  # the creator and the worker it started, one run each

    started = time.monotonic()
    one = subprocess.run(optimize(tmp_path, tiny_models, postgres_url, "--k", "1-5", "--name", "one worker"),
                         capture_output=True, text=True, env=ENV, timeout=1200)
    assert one.returncode == 0, one.stderr[-3000:]
    print(f"\nwall time of a 6-trial study: {two_s:.0f} s with 2 workers, "
          f"{time.monotonic() - started:.0f} s with 1 ({os.cpu_count()} CPUs)")
    alone_rows = [r for r in store.trials(study_name="one worker") if r.status == "complete"]
    shared = choose(rows, noise=0.05)
    # What two workers measure must be what one measures. Acceptance does not depend on the
    # load (greedy requests, the same prompts): it must agree config by config.
    alone_length = {r.label: r.mean_acceptance_length for r in alone_rows}
    for r in rows:
        if r.mean_acceptance_length is not None:
            assert r.mean_acceptance_length == pytest.approx(alone_length[r.label], rel=0.02), r.label
    # Tokens/s does: two servers at once share two cores, and a trial that overlaps the other
    # worker's server start runs at a fraction of its speed (on a GPU host each worker has its
    # own GPUs). So the choice is held to a loose bar here: the fastest config of the shared
    # study, in one worker's own measurement, is within 25 % of that worker's fastest.
    by_label = {r.label: r.tokens_per_s for r in alone_rows}
    best_alone = max(t for label, t in by_label.items() if label != "baseline")
    print(f"shared study: {[(r.label, round(r.tokens_per_s)) for r in rows]}; one worker: "
          f"{[(label, round(t)) for label, t in by_label.items()]}")
    assert by_label[shared.best.label] >= 0.75 * best_alone, (shared.best.label, by_label)


def test_a_killed_workers_trial_is_rerun_by_the_other(tmp_path, tiny_models, postgres_url):
    logs = tmp_path / "logs"
    logs.mkdir()
    creator = subprocess.Popen(optimize(tmp_path, tiny_models, postgres_url, "--k", "2,4", "--heartbeat", "3",
                                        "--name", "shared"),
                               stdout=(logs / "creator.log").open("wb"), stderr=subprocess.STDOUT, env=ENV,
                               start_new_session=True)
    worker = None
    try:
        store = ResultStore(open_database(postgres_url))
        wait_for("the creator's first trial", lambda: store.trials(study_name="shared"), 120, creator)
        worker = subprocess.Popen([sys.executable, "-m", "tuner.cli", "worker", "--study", "shared",
                                   "--db", postgres_url, "--heartbeat", "3"],
                                  stdout=(logs / "worker.log").open("wb"), stderr=subprocess.STDOUT, env=ENV,
                                  start_new_session=True)

        def worker_server():
            servers = [p for p in psutil.Process(worker.pid).children(recursive=True)
                       if "vllm" in " ".join(p.cmdline())]
            return servers if servers and len(store.study_runs("shared")) == 2 else None

        servers = wait_for("the worker's vLLM server", worker_server, 120, worker)
        running_before = {r.optuna_trial_number for r in store.trials(study_name="shared") if r.status == "running"}
        os.killpg(worker.pid, signal.SIGKILL)  # the worker and its process group, mid-trial
        worker.wait(30)
        gone = wait_for("the killed worker's server to exit",
                        lambda: not [p for p in servers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
                        60)
        assert gone
        assert creator.wait(900) == 0, (logs / "creator.log").read_text()[-3000:]
    finally:
        for process in (creator, worker):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
    rows = store.trials(study_name="shared")
    failed = [r for r in rows if r.status == "failed"]
    assert len(failed) == 1 and failed[0].failure_cause == STALE_CAUSE
    assert failed[0].optuna_trial_number in running_before
    assert configs(rows) == Counter({"baseline": 1, "ngram k=2": 1, "ngram k=4": 1})  # rerun once, nothing lost
    assert failed[0].label in configs(rows)
