"""Drift from live metrics: a REAL Prometheus (Debian's package, `make prometheus`) scrapes a
REAL vLLM server that serves the tuned model name with a worse draft than the one tuned; the
`tuner serve` drift check must see the lower acceptance and queue a re-tune, recording why.
The per-type query is checked on the same Prometheus against exporters of vLLM's counters
(prometheus_client, as vLLM itself), whose scrape targets carry a workload_type label."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from tuner.engine import ServerOptions, SpecConfig
from tuner.engine.server import VllmServer, free_port, port_is_free
from tuner.metrics.prometheus import PrometheusSource
from tuner.metrics.scrape import ACCEPTED, DRAFT_TOKENS, DRAFTS
from tuner.schedule.drift import DriftWatch, Reference, references
from tuner.store import JobStore, ResultStore, ScheduleRow, open_database

from .serve_process import ServeProcess, small_workload, wait_for
from reference_study import ENV, ROOT, SERVER_ARGS

pytestmark = pytest.mark.integration

# --allow-output-change: this test is about drift, and on the CPU build a freshly trained tiny
# draft can flip a near-tie of the greedy output (seen: 1 of 10 requests at token 55), which would
# keep speculation off and leave no tuned acceptance to drift from.
TUNED = ["--method", "draft_model", "--k", "3", "--trials", "2", "--warmup", "1", "--allow-output-change",
         *SERVER_ARGS]


def prometheus_binary() -> str:
    for candidate in (os.environ.get("TUNER_PROMETHEUS_BIN"), ROOT / ".tools/prometheus/usr/bin/prometheus",
                      shutil.which("prometheus")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    pytest.fail("no prometheus binary: run `make prometheus` (make test does it first)")


@pytest.fixture
def prometheus(tmp_path) -> Iterator[tuple[str, Path]]:
    """A Prometheus on a free loopback port; the test writes its scrape config, then reloads."""
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs: []\n")
    with (tmp_path / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [prometheus_binary(), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for("Prometheus", lambda: not port_is_free(port), 60, process)
        yield f"http://127.0.0.1:{port}", config
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def scrape(prometheus_url: str, config: Path, target: str, **more: tuple[str, dict[str, str]]) -> None:
    """Scrape ``target`` (job vllm), and each job of ``more``: name=(target, its target labels)."""
    jobs = {"vllm": (target, {}), **more}
    config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n" + "".join(
        f"  - job_name: {name}\n    static_configs: [{{targets: ['{where}'], labels: {json.dumps(labels)}}}]\n"
        for name, (where, labels) in jobs.items()))
    assert httpx.post(prometheus_url + "/-/reload", timeout=30).status_code == 200


def traffic(base_url: str, model: str, workload: Path, stop: threading.Event) -> None:
    """Production traffic: the tuned workload's requests, over and over."""
    requests = [json.loads(line) for line in workload.read_text().splitlines()]
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            for request in requests:
                if stop.is_set():
                    return
                client.post(f"{base_url}/v1/completions", json={
                    "model": model, "prompt": request["prompt"], "max_tokens": request["max_tokens"],
                    "temperature": 0})


def test_lower_live_acceptance_triggers_a_retune(tmp_path, tiny_models, prometheus):
    db = f"sqlite:///{tmp_path / 'tuner.db'}"
    target = str(tiny_models / "target")
    workload = small_workload(tmp_path)
    tuned = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "optimize", "--workload", str(workload), "--model", target,
         "--draft", str(tiny_models / "draft"), "--db", db, "--log-dir", str(tmp_path / "logs"), *TUNED],
        capture_output=True, text=True, env=ENV, timeout=600)
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    added = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "schedule", "add", "--name", "code", "--cron", "0 3 1 1 *",
         "--workload", str(workload), "--model", target, "--db", db, "--draft", str(tiny_models / "draft"),
         *TUNED], capture_output=True, text=True, env=ENV, timeout=120)
    assert added.returncode == 0, added.stderr
    engine = open_database(db)
    jobs = JobStore(engine)
    # As `tuner serve` finds it: with the study's stored rules (here: output change allowed).
    (ref,) = references(ResultStore(engine), [jobs.schedule("code")])
    assert ref.config_label.startswith("draft_model")

    prometheus_url, prometheus_config = prometheus
    options = ServerOptions(server_args=[a.split("=", 1)[1] for a in SERVER_ARGS], log_dir=tmp_path / "prod",
                            env={"VLLM_CPU_KVCACHE_SPACE": ENV["VLLM_CPU_KVCACHE_SPACE"]})
    drift_args = ("--prometheus", prometheus_url, "--drift-margin", "0.1", "--drift-for", "8",
                  "--drift-every", "2", "--drift-window", "10")

    def production(draft: str, check) -> int:
        """Serve the tuned model name with ``draft`` under steady traffic, Prometheus scraping it,
        while `tuner serve` watches; returns the service's exit code after SIGTERM."""
        stop = threading.Event()
        with VllmServer(target, SpecConfig("draft_model", 3, str(tiny_models / draft)), options) as prod:
            scrape(prometheus_url, prometheus_config, prod.base_url.removeprefix("http://"))
            sender = threading.Thread(target=traffic, args=(prod.base_url, target, workload, stop), daemon=True)
            sender.start()
            serve = ServeProcess(db, tmp_path / "jobs", *drift_args)
            try:
                check(serve)
            finally:
                stop.set()
                code = serve.terminate() if serve.process.poll() is None else serve.process.returncode
                if serve.process.poll() is None:
                    serve.kill_everything()
                sender.join(60)
            return code

    def live_figures_seen(serve: ServeProcess) -> None:
        # Long enough for the hold time to pass twice over once the figures exist.
        wait_for("live figures in Prometheus", lambda: PrometheusSource(prometheus_url, 10).read().get(target),
                 90, serve.process)
        time.sleep(20)

    # Control: production runs the tuned draft, so its acceptance matches and nothing drifts.
    assert production("draft", live_figures_seen) == 0
    assert jobs.drift_events() == []
    assert jobs.jobs() == []

    # Production now serves the same model name with the weak draft.
    events = []
    code = production("draft-weak", lambda serve: events.extend(
        wait_for("a drift event", lambda: jobs.drift_events(), 180, serve.process)))
    assert code == 0
    event = events[0]
    assert event.live_model_name == target and event.tuned_study == ref.study_name
    assert event.tuned_acceptance_length == pytest.approx(ref.length)
    assert event.live_acceptance_length < 0.9 * ref.length and event.live_acceptance_rate < 0.9 * ref.rate
    assert event.held_s >= 8
    retune = jobs.job(event.job_id)
    assert retune.reason == "drift" and retune.schedule_name == "code"
    assert "stayed below the tuned draft_model" in retune.detail
    assert f"re-tune queued as job {retune.id}" in event.note
    # The re-tune started at once and was stopped with the service: it resumes on the next start.
    assert retune.status in ("interrupted", "queued")


def counters(model_name: str, accepted_per_draft: float, stop: threading.Event) -> str:
    """An exporter of vLLM's spec-decode counters (k = 3) on a free port, counting up while
    ``stop`` is unset; returns its host:port. Text format, as vLLM's /metrics answers
    (prometheus_client's own server would offer OpenMetrics, which escapes the colons)."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

    registry = CollectorRegistry()
    made = {name: Counter(name.removesuffix("_total"), "vLLM's", ["engine", "model_name"], registry=registry)
            .labels(engine="0", model_name=model_name) for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED)}

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
        return [generate_latest(registry)]

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def count() -> None:
        while not stop.wait(0.1):
            made[DRAFTS].inc()
            made[DRAFT_TOKENS].inc(3)
            made[ACCEPTED].inc(accepted_per_draft)
        server.shutdown()

    threading.Thread(target=count, daemon=True).start()
    return f"127.0.0.1:{server.server_port}"


def test_live_acceptance_is_read_per_workload_type(prometheus):
    """Code and chat behind one served model name, their targets labelled by type; a third
    target without the label. Each type is compared with its own reference."""
    prometheus_url, prometheus_config = prometheus
    stop = threading.Event()
    try:
        code, chat, plain = (counters("llama", 2.4, stop), counters("llama", 1.2, stop),
                             counters("other", 1.5, stop))
        scrape(prometheus_url, prometheus_config, plain, code=(code, {"workload_type": "code"}),
               chat=(chat, {"workload_type": "chat"}))
        source = PrometheusSource(prometheus_url, 10)
        live = wait_for("live figures of three series", lambda: (
            seen if len((seen := source.read()).get("llama", {})) == 2 and "other" in seen else None), 30)
    finally:
        stop.set()
    assert set(live["other"]) == {""}
    for workload_type, rate, length in (("code", 0.8, 3.4), ("chat", 0.4, 2.2)):
        assert live["llama"][workload_type].rate == pytest.approx(rate, rel=0.05)
        assert live["llama"][workload_type].length == pytest.approx(length, rel=0.05)

    def ref(id: int, workload_type: str, rate: float, length: float) -> Reference:
        schedule = ScheduleRow(id, workload_type, "0 2 * * *", "UTC", "llama", "/w", workload_type, [], None,
                               None, True, datetime.now(timezone.utc), None)
        return Reference(schedule, f"{workload_type} study", "ngram k=3", rate, length)

    watch, now = DriftWatch(margin=0.15, hold_s=0), datetime.now(timezone.utc)
    assert watch.check(now, [ref(1, "code", 0.8, 3.4), ref(2, "chat", 0.4, 2.2)], live) == []
    # Chat tuned higher than it now runs: drift of chat alone.
    found = watch.check(now, [ref(1, "code", 0.8, 3.4), ref(2, "chat", 0.6, 2.8)], live)
    assert [(f.reference.schedule.workload_type, f.live_type) for f in found] == [("chat", "chat")]
