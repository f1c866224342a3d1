"""Faults a tuner meets at night, on the REAL vLLM server (CPU build, tiny models).

Each case asserts: the seconds from the fault to a recorded, readable cause; completed trials
lost (0); vLLM processes left (0); ports left bound (0); and that the study goes on where that
makes sense. Each case also appends its figures to test-artifacts/faults.jsonl (docs/lab/reliability.md
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

from engine_layout import own_process
from fakes import Quiet
from tuner.engine import ServerOptions
from tuner.engine.server import VllmServer, port_is_free
from tuner.errors import ServerStartError
from tuner.replay import LoadSpec
from tuner.study.loop import OptimizeSettings, optimize
from tuner.plan.space import SearchSpace
from tuner.store import NOT_MEASURED, ResultStore, open_database, optuna_storage
from tuner.measure.trial import MeasureSettings
from tuner.workload import load_workload

from integration.serve_process import small_workload, wait_for
from reference_study import ENV, ROOT, SERVER_ARGS


pytestmark = pytest.mark.integration
ARGS = [a.split("=", 1)[1] for a in SERVER_ARGS]
ARTIFACTS = ROOT / "test-artifacts"


@dataclass
class Figures:
    case: str
    seconds_to_cause: float
    cause: str
    completed_lost: int | None  # None: the case runs no study, so there is no trial to lose
    servers_left: int
    ports_left: int
    goes_on: str


def report(figures: Figures) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    with (ARTIFACTS / "faults.jsonl").open("a") as out:
        out.write(json.dumps(asdict(figures)) + "\n")
    print(f"\n{figures}")
    assert figures.completed_lost in (0, None) and figures.servers_left == 0 and figures.ports_left == 0, figures


def completed_lost(reported: dict[str, tuple], rows) -> int:
    """Of the trials the tuner reported complete (label -> (tokens/s, finished at)), how many
    the database no longer holds as complete with those figures."""
    kept = {(r.label, r.tokens_per_s, r.finished_at) for r in rows if r.status == "complete"}
    return sum((label, *figures) not in kept for label, figures in reported.items())


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
    """vLLM's engine process (it renames itself VLLM::EngineCore; the kernel keeps 15 letters)."""
    return wait_for("the engine process", lambda: next(
        (p for p in watch.seen.values() if p.is_running() and "EngineCor" in p.name()), None), 60)


class Injector(Quiet):
    """Runs each fault once, at the third answered request of the measured replay (not the
    warm-up) of the trial with its label: ``faults`` maps labels to functions."""

    def __init__(self, faults: dict, after: int = 3):
        self.faults, self.after = faults, after
        self.current, self.armed, self.answered, self.fired_at = None, False, 0, {}
        self.completed: dict[str, tuple] = {}  # what the tuner reported complete, as it reported it

    def trial_finished(self, row):
        if row.status == "complete":
            self.completed[row.label] = (row.tokens_per_s, row.finished_at)

    def trial_started(self, number, label, *args):
        self.current = label

    def start_replay(self, description, total):
        self.armed = self.current in self.faults and "warm" not in description and self.current not in self.fired_at
        self.answered = 0

    def request_done(self, result):
        if self.armed:
            self.answered += 1
            if self.answered == self.after:
                self.armed, self.fired_at[self.current] = False, time.time()
                self.faults[self.current]()


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


def test_faults_during_one_study(tmp_path, tiny_models, engine_in_its_own_process):
    """One grid study, baseline, ngram k=2 and 4, suffix k=2, while another connection holds a read
    transaction on its SQLite database throughout (WAL: the reader must not block the writer):

    - ngram k=2: the engine process is SIGKILLed mid-replay;
    - ngram k=4: the engine is stopped (SIGSTOP) mid-replay, so the stream stalls and requests
      time out after --request-timeout (5 s); the stalled server is still stopped;
    - suffix k=2: this vLLM build lacks the method's package (arctic_inference): the server exits
      at start.

    Each failed trial has its cause, the baseline is kept, and the study goes on to the end."""
    db_path = tmp_path / "t.db"
    db = f"sqlite:///{db_path}"
    open_database(db)
    reader = sqlite3.connect(db_path)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM tuner_trials").fetchall()  # a read snapshot, held throughout
    watch = Watch()
    injector = Injector({"ngram k=2": lambda: engine_of(watch).send_signal(signal.SIGKILL),
                         "ngram k=4": lambda: engine_of(watch).send_signal(signal.SIGSTOP)})
    started = time.time()
    try:
        store = study(tmp_path, tiny_models, db, SearchSpace(methods=("ngram", "suffix"), ks=(2, 4)), injector,
                      request_timeout_s=5.0)
    finally:
        reader.rollback()
        reader.close()
    watch.stop()
    left, ports = watch.left(), ports_left(tmp_path / "logs")
    lost = completed_lost(injector.completed, store.trials())
    assert "baseline" in injector.completed  # there was something to lose
    rows = {r.label: r for r in store.trials()}
    assert rows["baseline"].status == "complete"
    killed, stalled, exited = rows["ngram k=2"], rows["ngram k=4"], rows["suffix k=2"]
    # The config's own failure, not a passing /metrics fault (which would be retried): its server
    # died with its engine, or was still answering errors when the replay ended.
    assert killed.status == "failed", killed.failure_cause
    assert "died during the replay" in killed.failure_cause or "requests failed" in killed.failure_cause
    assert stalled.status == "failed" and "requests failed" in stalled.failure_cause, stalled.failure_cause
    assert "timed out" in stalled.failure_cause.lower() or "timeout" in stalled.failure_cause.lower()
    assert exited.status == "failed" and "arctic" in exited.failure_cause.lower(), exited.failure_cause
    assert rows["suffix k=4"].status == "failed"  # the study went on to its last config
    report(Figures("engine SIGKILLed mid-replay", round(finished_after(killed, injector.fired_at["ngram k=2"]), 1),
                   killed.failure_cause[:120], lost, left, ports, "yes: the next configs were measured"))
    report(Figures("stream stalls mid-request (engine SIGSTOPped, --request-timeout 5)",
                   round(finished_after(stalled, injector.fired_at["ngram k=4"]), 1), stalled.failure_cause[:120],
                   lost, left, ports, "yes: the next configs were tried"))
    report(Figures("server exits at start (suffix without arctic_inference)",
                   round(exited.finished_at.timestamp() - stalled.finished_at.timestamp(), 1),
                   exited.failure_cause[:120], lost, left, ports, "yes: suffix k=4 was tried next"))
    report(Figures("database held by a long reader", round(time.time() - started, 1),
                   "no fault: every trial stored while the reader held its snapshot", lost, left, ports,
                   "yes: the writer was never blocked"))


def test_a_missing_draft_and_refusals_before_any_start(tmp_path, tiny_models):
    """A missing draft is refused before any start, by `tuner measure` and `tuner optimize` alike
    (the preflight); an unknown config key reaches vLLM, which exits at start, and its own error
    is the cause. An unwritable log folder is refused before any server starts: one sentence,
    exit 2."""
    missing = tmp_path / "no-draft"
    cases = {
        "refused before start: missing draft (tuner measure)": (
            ["measure", "--method", "draft_model", "--draft", str(missing), "--k", "2"], 2, "does not exist"),
        "refused before start: missing draft (tuner optimize)": (
            ["optimize", "--method", "draft_model", "--draft", str(missing), "--k", "2",
             "--db", f"sqlite:///{tmp_path / 'd.db'}"], 2, "does not exist"),
        "server exits at start: unknown config key (tuner measure)": (
            ["measure", "--spec", '{"method": "ngram", "num_speculative_tokens": 2, "bogus_key": 1}'], 1,
            "bogus_key"),
        "refused before start: log folder not writable": (
            ["optimize", "--k", "2", "--db", f"sqlite:///{tmp_path / 'u.db'}", "--log-dir", "/etc/hostname/logs"],
            2, "cannot create the log folder"),
    }
    for number, (case, (args, code, expected)) in enumerate(cases.items()):
        log_dir = tmp_path / f"logs-{number}"
        extra = [] if "--log-dir" in args else ["--log-dir", str(log_dir)]
        # Every vLLM process the command starts, whatever its arguments: a server left behind
        # by any case is counted, not only one that names the missing draft.
        watch = Watch()
        t0 = time.time()
        result = subprocess.run([sys.executable, "-m", "tuner.cli", *args, "--workload",
                                 str(small_workload(tmp_path)), "--model", str(tiny_models / "target"),
                                 *extra, *SERVER_ARGS], capture_output=True, text=True, env=ENV, timeout=300)
        seconds = time.time() - t0
        watch.stop()
        assert result.returncode == code and expected in result.stderr, (case, result.stderr)
        started = list(log_dir.glob("*.log")) if log_dir.exists() else []
        assert bool(started) == (code == 1), case  # only the cases that exit at start started a server
        # The watch saw the server of each case that started one: it would count it if it stayed.
        # (A probe of the installed vLLM, which any command may run, is watched and counted too.)
        assert code != 1 or watch.seen, case
        report(Figures(case, round(seconds, 1), result.stderr.strip().splitlines()[-1][:120], None, watch.left(),
                       ports_left(log_dir) if started else 0,
                       "stops: the same command works once the input is fixed"))


def test_a_server_that_never_becomes_ready(tmp_path, tiny_models):
    watch = Watch()
    options = ServerOptions(server_args=ARGS, log_dir=tmp_path / "logs", start_timeout_s=3,
                            env={"VLLM_CPU_KVCACHE_SPACE": ENV["VLLM_CPU_KVCACHE_SPACE"]})
    t0 = time.time()
    with pytest.raises(ServerStartError, match="did not become ready within 3 s") as raised:
        VllmServer(str(tiny_models / "target"), None, options).start()
    seconds = time.time() - t0
    watch.stop()
    report(Figures("never ready (--start-timeout 3)", round(seconds, 1), str(raised.value)[:120], None,
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
                   f"port {chosen} in use: started again on {server.port}", None, watch.left(),
                   ports_left(tmp_path / "logs"), "yes: the server started on another port"))


def test_the_tuner_killed_mid_study_resumes(tmp_path, tiny_models):
    """SIGKILL of `tuner optimize` (its process group) while ngram k=2 runs: its server goes too
    (it gets SIGTERM when its parent dies); the same command then reruns only that trial, and the
    baseline's figures are untouched."""
    db = f"sqlite:///{tmp_path / 't.db'}"
    command = [sys.executable, "-m", "tuner.cli", "optimize", "--workload", str(small_workload(tmp_path)),
               "--model", str(tiny_models / "target"), "--db", db, "--log-dir", str(tmp_path / "logs"),
               "--method", "ngram", "--k", "2", "--strategy", "grid", "--warmup", "1", *SERVER_ARGS]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=own_process(ENV), start_new_session=True)
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
    again = subprocess.run(command, capture_output=True, text=True, env=own_process(ENV), timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    rows = store.trials()
    assert [(r.label, r.status) for r in rows] == [("baseline", "complete"), ("ngram k=2", "interrupted"),
                                                   ("ngram k=2", "complete")]
    assert {r.label: (r.tokens_per_s, r.finished_at) for r in rows if r.status == "complete"
            and r.label in before} == before  # earlier figures untouched
    interrupted = rows[1]
    report(Figures("tuner SIGKILLed mid-study, then rerun", round(server_gone_s, 1),
                   interrupted.failure_cause or "", completed_lost(before, rows),
                   left, ports_left(tmp_path / "logs"), "yes: the rerun measured only ngram k=2 again"))


class Completed(Quiet):
    """What the tuner reported complete, as it reported it (label -> (tokens/s, finished at))."""

    def __init__(self):
        self.completed: dict[str, tuple] = {}

    def trial_finished(self, row):
        if row.status == "complete":
            self.completed[row.label] = (row.tokens_per_s, row.finished_at)


def test_a_port_held_by_another_program_is_not_measured_and_the_next_run_measures_it(tmp_path, tiny_models):
    """The baseline is measured first; then --port P while another program holds P: vLLM cannot
    bind it, the start is tried again after a wait, and ngram k=2 is stored as not measured (the
    host's fault, not its own), the baseline's figures untouched; the same study run once P is
    free measures ngram k=2. Every vLLM process of the three runs is watched and counted."""
    db = f"sqlite:///{tmp_path / 't.db'}"
    store = ResultStore(open_database(db))
    workload = load_workload(small_workload(tmp_path, requests=8, max_tokens=16))
    reported = Completed()

    def run(port: int | None, trials: int):
        settings = MeasureSettings(warmup=1, retries=1, retry_wait_s=1.0, server=ServerOptions(
            server_args=ARGS, log_dir=tmp_path / "logs", port=port,
            env={"VLLM_CPU_KVCACHE_SPACE": ENV["VLLM_CPU_KVCACHE_SPACE"]}))
        return optimize(str(tiny_models / "target"), workload, SearchSpace(methods=("ngram",), ks=(2,)),
                        settings, store, optuna_storage(db), OptimizeSettings(trials=trials, name="held port"),
                        reported)

    watch = Watch()
    run(None, trials=1)  # the baseline alone: a completed trial the fault must not touch
    before = dict(reported.completed)
    assert list(before) == ["baseline"]  # there is something to lose
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    port = squatter.getsockname()[1]
    t0 = time.time()
    try:
        held = run(port, trials=2)
    finally:
        squatter.close()
    first_rows = store.trials(study_name="held port")
    assert [(r.label, r.status) for r in first_rows] == [("baseline", "complete"), ("ngram k=2", NOT_MEASURED)]
    row = first_rows[1]
    assert "address already in use" in row.failure_cause.lower(), row.failure_cause
    assert len(list((tmp_path / "logs").glob(f"*-{port}.log"))) == 2  # tried again once
    assert any("ngram k=2 was not measured, for a fault of the host" in note for note in held.verdict.notes), \
        held.verdict.notes
    lost_to_the_fault = completed_lost(before, first_rows)
    outcome = run(None, trials=2)
    watch.stop()
    rows = store.trials(study_name="held port")
    assert [(r.label, r.status) for r in rows] == [("baseline", "complete"), ("ngram k=2", NOT_MEASURED),
                                                   ("ngram k=2", "complete")]
    assert outcome.verdict.answers[rows[0].load].baseline.tokens_per_s == rows[0].tokens_per_s > 0
    assert set(reported.completed) == {"baseline", "ngram k=2"}
    lost = completed_lost(reported.completed, rows)  # every trial reported complete, over the three runs
    assert lost_to_the_fault == 0 and lost == 0, (lost_to_the_fault, lost)
    report(Figures("--port held by another program", round(finished_after(row, t0), 1), row.failure_cause[:120],
                   lost, watch.left(), ports_left(tmp_path / "logs"),
                   "yes: not measured, the baseline kept; the next run measured it"))
