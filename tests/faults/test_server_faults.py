"""Faults a tuner meets at night, on the REAL vLLM server (CPU build, tiny models).

Each case asserts: the seconds from the fault to a recorded, readable cause; completed trials
lost (0); vLLM processes left (0); ports left bound (0); and that the study goes on where that
makes sense. Each case also appends its figures to test-artifacts/faults.jsonl (docs/reliability.md
is filled from that file).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
import pytest

from fakes import Quiet
from tuner.engine import ServerOptions
from tuner.engine.server import VllmServer, port_is_free
from tuner.errors import ServerStartError
from tuner.replay import LoadSpec
from tuner.search import OptimizeSettings, SearchSpace, optimize
from tuner.store import ResultStore, open_database, optuna_storage
from tuner.trial import MeasureSettings
from tuner.workload import load_workload

from integration.serve_process import small_workload, wait_for
from integration.test_optimize_real import ENV, ROOT, SERVER_ARGS

pytestmark = pytest.mark.integration
ARGS = [a.split("=", 1)[1] for a in SERVER_ARGS]
ARTIFACTS = ROOT / "test-artifacts"


@dataclass
class Figures:
    case: str
    seconds_to_cause: float
    cause: str
    completed_lost: int
    servers_left: int
    ports_left: int
    goes_on: str


def report(figures: Figures) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    with (ARTIFACTS / "faults.jsonl").open("a") as out:
        out.write(json.dumps(asdict(figures)) + "\n")
    print(f"\n{figures}")
    assert figures.completed_lost == 0 and figures.servers_left == 0 and figures.ports_left == 0, figures


class Watch:
    """Every vLLM process under ``root`` (a pid; this test process by default) while the case runs."""

    def __init__(self, root: int | None = None):
        self.root = root or os.getpid()
        self.seen: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            try:
                for p in psutil.Process(self.root).children(recursive=True):
                    if p.pid not in self.seen and "vllm" in " ".join(p.cmdline()).lower():
                        self.seen[p.pid] = p
            except psutil.Error:
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def left(self, grace_s: float = 30.0) -> int:
        """vLLM processes still alive ``grace_s`` after the case ended."""
        deadline = time.monotonic() + grace_s
        while True:
            alive = [p for p in self.seen.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
            if not alive or time.monotonic() > deadline:
                return len(alive)
            time.sleep(0.5)


def ports_left(log_dir: Path) -> int:
    ports = {int(m.group(1)) for p in log_dir.glob("*.log") if (m := re.search(r"-(\d+)\.log$", p.name))}
    return sum(not port_is_free(port) for port in ports)


def engine_of(watch: Watch) -> psutil.Process:
    return wait_for("the engine process", lambda: next(
        (p for p in watch.seen.values() if p.is_running() and "EngineCore" in p.name()), None), 60)


class Injector(Quiet):
    """Runs ``fault`` once, at the third answered request of the measured replay (not the
    warm-up) of the trial labelled ``label``."""

    def __init__(self, label: str, fault, after: int = 3):
        self.label, self.fault, self.after = label, fault, after
        self.current, self.armed, self.answered, self.fired_at = None, False, 0, None

    def trial_started(self, number, label, *args):
        self.current = label

    def start_replay(self, description, total):
        self.armed = self.current == self.label and "warm" not in description and self.fired_at is None

    def request_done(self, result):
        if self.armed:
            self.answered += 1
            if self.answered == self.after:
                self.armed, self.fired_at = False, time.time()
                self.fault()


def study(tmp_path, models: Path, db: str, space: SearchSpace, progress, **measure) -> ResultStore:
    store = ResultStore(open_database(db))
    settings = MeasureSettings(load=LoadSpec("concurrency", 2), warmup=1,
                               server=ServerOptions(server_args=ARGS, log_dir=tmp_path / "logs",
                                                    env={"VLLM_CPU_KVCACHE_SPACE": ENV["VLLM_CPU_KVCACHE_SPACE"]}),
                               **measure)
    optimize(str(models / "target"), load_workload(small_workload(tmp_path, requests=16, max_tokens=48)), space,
             settings, store, optuna_storage(db), OptimizeSettings(trials=10, strategy="grid"), progress)
    return store


def finished_after(row, t0: float) -> float:
    return row.finished_at.timestamp() - t0


def test_a_server_that_exits_at_start(tmp_path, tiny_models):
    """A method this vLLM build lacks (suffix needs arctic_inference): the trial fails with the
    server's own error; the baseline measured before it stays. Missing drafts and unknown
    config keys never reach a server: they are refused before any start."""
    db = f"sqlite:///{tmp_path / 't.db'}"
    watch = Watch()
    started = time.time()
    store = study(tmp_path, tiny_models, db, SearchSpace(methods=("suffix",), ks=(2,)), Quiet())
    watch.stop()
    rows = {r.label: r for r in store.trials()}
    failed = rows["suffix k=2"]
    assert failed.status == "failed" and "arctic" in failed.failure_cause.lower(), failed.failure_cause
    report(Figures("server exits at start (suffix without arctic_inference)",
                   round(finished_after(failed, started) - (rows["baseline"].finished_at.timestamp() - started), 1),
                   failed.failure_cause[:120], int(rows["baseline"].status != "complete"), watch.left(),
                   ports_left(tmp_path / "logs"), "yes: the baseline is kept; the study ends normally"))
    for args, expected in ((["--method", "draft_model", "--draft", str(tmp_path / "no-draft"), "--k", "2"],
                            "does not exist"),
                           (["--spec", '{"method": "ngram", "num_speculative_tokens": 2, "bogus_key": 1}'],
                            "'bogus_key' is not a speculative-config field")):
        t0 = time.time()
        result = subprocess.run([sys.executable, "-m", "tuner.cli", "measure", "--workload",
                                 str(ROOT / "workloads/code.jsonl"), "--model", str(tiny_models / "target"),
                                 "--log-dir", str(tmp_path / "refused"), *args],
                                capture_output=True, text=True, env=ENV, timeout=120)
        assert result.returncode == 2 and expected in result.stderr, result.stderr
        assert not (tmp_path / "refused").exists()  # no server was started
        report(Figures(f"refused before start ({expected})", round(time.time() - t0, 1),
                       result.stderr.strip()[:120], 0, 0, 0, "n/a: refused before any server"))


def test_a_server_killed_mid_replay(tmp_path, tiny_models):
    """SIGKILL of the engine process during the measured replay of ngram k=2: that trial fails
    with a cause, the baseline before it is kept, and k=4 after it is measured."""
    db = f"sqlite:///{tmp_path / 't.db'}"
    watch = Watch()
    injector = Injector("ngram k=2", lambda: engine_of(watch).send_signal(signal.SIGKILL))
    store = study(tmp_path, tiny_models, db, SearchSpace(methods=("ngram",), ks=(2, 4)), injector)
    watch.stop()
    rows = {r.label: r for r in store.trials()}
    killed = rows["ngram k=2"]
    assert killed.status == "failed" and killed.failure_cause, killed
    assert rows["baseline"].status == rows["ngram k=4"].status == "complete"
    report(Figures("engine SIGKILLed mid-replay", round(finished_after(killed, injector.fired_at), 1),
                   killed.failure_cause[:120], 0, watch.left(), ports_left(tmp_path / "logs"),
                   "yes: the next config (ngram k=4) was measured"))


def test_a_stream_that_stalls_mid_request(tmp_path, tiny_models):
    """The engine is stopped (SIGSTOP) mid-replay: requests time out after --request-timeout,
    the trial fails with that cause, and the stalled server is still stopped (SIGKILL after its
    grace period)."""
    db = f"sqlite:///{tmp_path / 't.db'}"
    watch = Watch()
    stopped = []

    def stall():
        engine = engine_of(watch)
        engine.send_signal(signal.SIGSTOP)
        stopped.append(engine)

    injector = Injector("ngram k=2", stall)
    store = study(tmp_path, tiny_models, db, SearchSpace(methods=("ngram",), ks=(2,)), injector,
                  request_timeout_s=5.0)
    watch.stop()
    stalled = {r.label: r for r in store.trials()}["ngram k=2"]
    assert stalled.status == "failed" and "requests failed" in stalled.failure_cause, stalled.failure_cause
    assert "timed out" in stalled.failure_cause.lower() or "timeout" in stalled.failure_cause.lower()
    report(Figures("stream stalls mid-request (engine SIGSTOPped, --request-timeout 5)",
                   round(finished_after(stalled, injector.fired_at), 1), stalled.failure_cause[:120], 0,
                   watch.left(), ports_left(tmp_path / "logs"), "yes: the study ends normally with the baseline"))


def test_a_server_that_never_becomes_ready(tmp_path, tiny_models):
    watch = Watch()
    options = ServerOptions(server_args=ARGS, log_dir=tmp_path / "logs", start_timeout_s=3,
                            env={"VLLM_CPU_KVCACHE_SPACE": ENV["VLLM_CPU_KVCACHE_SPACE"]})
    t0 = time.time()
    with pytest.raises(ServerStartError, match="did not become ready within 3 s") as raised:
        VllmServer(str(tiny_models / "target"), None, options).start()
    seconds = time.time() - t0
    watch.stop()
    report(Figures("never ready (--start-timeout 3)", round(seconds, 1), str(raised.value)[:120], 0,
                   watch.left(), ports_left(tmp_path / "logs"), "yes: a start failure fails only its trial"))


def test_the_port_is_taken_between_choosing_and_binding(tmp_path, tiny_models):
    """Another program binds the chosen port before vLLM does: the start is tried again on a new
    port, and the server comes up."""
    watch = Watch()
    options = ServerOptions(server_args=ARGS, log_dir=tmp_path / "logs",
                            env={"VLLM_CPU_KVCACHE_SPACE": ENV["VLLM_CPU_KVCACHE_SPACE"]})
    server = VllmServer(str(tiny_models / "target"), None, options)
    chosen = server.port
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", chosen))
    squatter.listen()
    t0 = time.time()
    try:
        with server:
            assert server.port != chosen
            seconds = time.time() - t0
            first_log = sorted((tmp_path / "logs").glob(f"*-{chosen}.log"))[0].read_text(errors="replace")
            assert "address already in use" in first_log.lower()
    finally:
        squatter.close()
    watch.stop()
    report(Figures("port taken before vLLM binds it", round(seconds, 1),
                   f"port {chosen} in use: started again on {server.port}", 0, watch.left(),
                   ports_left(tmp_path / "logs"), "yes: the server started on another port"))


def test_an_unwritable_log_folder_and_a_long_reader(tmp_path, tiny_models):
    """The log folder cannot be created: one sentence, exit 2, no server. Then a study runs while
    another connection holds a read transaction on its SQLite database the whole time (WAL:
    the reader does not block the writer)."""
    workload = small_workload(tmp_path)
    not_a_folder = Path("/etc/hostname") / "logs"
    t0 = time.time()
    result = subprocess.run([sys.executable, "-m", "tuner.cli", "optimize", "--workload", str(workload),
                             "--model", str(tiny_models / "target"), "--db", f"sqlite:///{tmp_path / 'u.db'}",
                             "--log-dir", str(not_a_folder), "--k", "2", *SERVER_ARGS],
                            capture_output=True, text=True, env=ENV, timeout=300)
    assert result.returncode == 2 and "cannot create the log folder" in result.stderr, result.stderr
    report(Figures("log folder not writable", round(time.time() - t0, 1), result.stderr.strip()[:120], 0, 0, 0,
                   "stops: rerun with a writable --log-dir resumes the study"))

    db_path = tmp_path / "t.db"
    db = f"sqlite:///{db_path}"
    open_database(db)
    reader = sqlite3.connect(db_path)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM tuner_trials").fetchall()  # holds a read snapshot throughout
    watch = Watch()
    t0 = time.time()
    try:
        store = study(tmp_path, tiny_models, db, SearchSpace(methods=("ngram",), ks=(2,)), Quiet())
    finally:
        reader.rollback()
        reader.close()
    watch.stop()
    assert [r.status for r in store.trials()] == ["complete", "complete"]
    report(Figures("database held by a long reader", round(time.time() - t0, 1), "no fault: both trials stored",
                   0, watch.left(), ports_left(tmp_path / "logs"), "yes: the study was not slowed by locks"))


def test_the_tuner_killed_mid_study_resumes(tmp_path, tiny_models):
    """SIGKILL of `tuner optimize` (its process group) while ngram k=2 runs: its server goes too;
    the same command then reruns only that trial, and the baseline's figures are untouched."""
    db = f"sqlite:///{tmp_path / 't.db'}"
    command = [sys.executable, "-m", "tuner.cli", "optimize", "--workload", str(small_workload(tmp_path)),
               "--model", str(tiny_models / "target"), "--db", db, "--log-dir", str(tmp_path / "logs"),
               "--method", "ngram", "--k", "2,4", "--strategy", "grid", "--warmup", "1", *SERVER_ARGS]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV,
                             start_new_session=True)
    watch = Watch(first.pid)
    try:
        store = ResultStore(open_database(db))
        wait_for("ngram k=2 to start its server", lambda: any(
            r.label == "ngram k=2" and r.status == "running" for r in store.trials()) and any(
            "ngram" in " ".join(p.cmdline()) for p in watch.seen.values() if p.is_running()), 300, first)
        before = {r.label: (r.tokens_per_s, r.finished_at) for r in store.trials() if r.status == "complete"}
        t0 = time.time()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    watch.stop()
    left = watch.left()
    server_gone_s = time.time() - t0
    again = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    rows = store.trials()
    assert [(r.label, r.status) for r in rows] == [("baseline", "complete"), ("ngram k=2", "interrupted"),
                                                   ("ngram k=2", "complete"), ("ngram k=4", "complete")]
    assert {r.label: (r.tokens_per_s, r.finished_at) for r in rows if r.status == "complete"
            and r.label in before} == before  # earlier figures untouched
    interrupted = rows[1]
    report(Figures("tuner SIGKILLed mid-study, then rerun", round(server_gone_s, 1),
                   interrupted.failure_cause or "", len(before) - sum(r.label in before and r.status == "complete"
                                                                      for r in rows),
                   left, ports_left(tmp_path / "logs"), "yes: the rerun measured only ngram k=2 again, then k=4"))
