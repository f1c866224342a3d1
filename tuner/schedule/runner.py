"""Running queued jobs: each is `tuner run-request` of its stored study request, as a child process,
one at a time per GPU set.

A job's GPU set is ``--gpus`` of its schedule ("0,1"), passed on to the child's ``--gpus``; no
set means every GPU of the host, so such a job shares with every other. Jobs start in queue order,
and a job never jumps ahead of an earlier one that waits for the same GPUs.

Stopping sends SIGINT to a job's process group: `tuner optimize` then stops its vLLM server and
exits with completed trials stored, and the same study name resumes it later.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import UsageError
from tuner.plan.request import StudyRequest
from tuner.study.child_process import Child, Orphan, start_child, stop_children, tuner_argv
from tuner.schedule.outcome import study_outcome
from tuner.store import Database, JobRow

log = logging.getLogger("tuner.serve")

INTERRUPTED = 130  # `tuner optimize` after Ctrl-C / SIGTERM


def gpu_set(gpus: str | None) -> frozenset[str] | None:
    """None: every GPU."""
    if not gpus:
        return None
    return frozenset(g.strip() for g in gpus.split(",") if g.strip())


def overlaps(a: str | None, b: str | None) -> bool:
    set_a, set_b = gpu_set(a), gpu_set(b)
    return set_a is None or set_b is None or bool(set_a & set_b)


@dataclass
class RunningJob:
    job: JobRow
    process: Child
    stopping: bool = False


class JobRunner:
    def __init__(self, database: Database, log_dir: Path, noise: float = 0.05):
        self.jobs = database.jobs
        self.results = database.results
        self.db_url = database.url
        self.log_dir = log_dir
        self.noise = noise
        self.running: dict[int, RunningJob] = {}

    def request_file(self, job: JobRow) -> Path:
        """The job's request as its child reads it: on this service's database, its servers'
        logs beside the job logs unless the schedule named a folder."""
        if job.request is None or "before_requests" in job.request:
            given = " ".join((job.request or {}).get("before_requests", []))
            raise UsageError(f"job {job.id} of {job.schedule_name!r} was stored by an older tuner as "
                             f"`tuner optimize {given}`; remove the schedule and add it again with those options")
        request = StudyRequest.from_json(job.request, f"job {job.id} of {job.schedule_name!r}")
        run = request.run if request.run.log_dir else request.run.model_copy(
            update={"log_dir": (self.log_dir / "servers").absolute()})
        path = self.log_dir / f"job-{job.id}.request.json"
        path.write_text(request.model_copy(update={"db": self.db_url, "run": run}).model_dump_json(indent=1))
        return path

    def start_ready(self) -> list[JobRow]:
        """Start every queued job whose GPUs are free and not wanted by an earlier queued job."""
        started = []
        taken = [r.job.gpus for r in self.running.values()]  # running, or queued ahead and waiting
        for job in self.jobs.jobs(status=("queued",)):
            if not any(overlaps(job.gpus, other) for other in taken) and self._start(job):
                started.append(job)
            taken.append(job.gpus)
        return started

    def _start(self, job: JobRow) -> bool:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"job-{job.id}-{time.strftime('%Y%m%d-%H%M%S')}.log"
        if not self.jobs.claim(job.id, str(log_path)):
            return False  # another process took it
        try:
            argv = tuner_argv("run-request", str(self.request_file(job)))
        except UsageError as exc:  # a job that cannot run is failed with the reason, not retried
            self.jobs.finish(job.id, "failed", None, None, str(exc))
            log.warning("job %d failed before it started: %s", job.id, exc)
            return False
        if job.gpus:
            argv += ["--gpus", job.gpus]  # its servers see only these, and wait until they are free
        process = start_child(argv, log_path, append=True)
        self.jobs.set_pid(job.id, process.pid)
        self.running[job.id] = RunningJob(self.jobs.job(job.id), process)
        log.info("job %d (%s, %s) started: pid %d, log %s", job.id, job.schedule_name, job.reason,
                 process.pid, log_path)
        return True

    def poll(self) -> list[JobRow]:
        """Record the jobs that ended; returns them as stored."""
        ended = []
        for job_id, running in list(self.running.items()):
            code = running.process.poll()
            if code is None:
                continue
            del self.running[job_id]
            ended.append(self._record_end(running, code))
        return ended

    def _record_end(self, running: RunningJob, code: int) -> JobRow:
        job = running.job
        if code == 0:
            outcome = self._outcome(job)
            self.jobs.finish(job.id, "finished", code, outcome.kind if outcome else None,
                             outcome.detail if outcome else None)
        elif running.stopping or code in (INTERRUPTED, -signal.SIGINT):
            self.jobs.finish(job.id, "interrupted", code)
        else:
            self.jobs.finish(job.id, "failed", code, None, _last_error(job.log_path))
        ended = self.jobs.job(job.id)
        log.info("job %d ended: %s%s", job.id, ended.status,
                 f", {ended.outcome}: {ended.outcome_detail}" if ended.outcome else "")
        return ended

    def _outcome(self, job: JobRow):
        mine = self.results.trials(study_name=job.study_name)
        if not mine:
            return None
        history = self.results.trials(model=mine[0].model, workload_type=mine[0].workload_type)
        return study_outcome(job.study_name, history, self.noise, self.results.study_rules())

    def stop_all(self, grace_s: float = 120.0) -> None:
        """SIGINT every running job (its server is stopped, its study kept), SIGKILL after grace."""
        by_pid = {running.process.pid: running for running in self.running.values()}
        for running in by_pid.values():
            running.stopping = True
        stop_children([running.process for running in by_pid.values()], grace_s,
                      on_kill=lambda child: log.warning(
                          "job %d did not stop within %.0f s; killing its process group",
                          by_pid[child.pid].job.id, grace_s))
        self.poll()

    def stop_leftovers(self, grace_s: float = 120.0) -> None:
        """Jobs marked running by a service that died without stopping them: if the child is
        still alive (the same pid running this job's study), stop it before it is resumed,
        the way ``stop_all`` stops the running jobs."""
        left: dict[int, JobRow] = {}
        for job in self.jobs.jobs(status=("running",)):
            if job.id in self.running or not job.pid or not _is_job_process(job):
                continue
            log.warning("job %d: its process %d outlived the previous service; stopping it", job.id, job.pid)
            left[job.pid] = job
        stop_children([Orphan(pid) for pid in left], grace_s,
                      on_kill=lambda orphan: log.warning(
                          "job %d did not stop within %.0f s; killing its process group",
                          left[orphan.pid].id, grace_s))


def _is_job_process(job: JobRow) -> bool:
    """The pid may have been reused: only a process whose command line names this job's request."""
    try:
        cmdline = Path(f"/proc/{job.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"run-request" in cmdline and any(arg.endswith(f"job-{job.id}.request.json".encode())
                                             for arg in cmdline)


def _last_error(log_path: str | None) -> str | None:
    """The `error:` sentence `tuner optimize` printed, else its last line."""
    if not log_path:
        return None
    try:
        lines = [line.strip() for line in Path(log_path).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return None
    errors = [line for line in lines if line.startswith("error:")]
    return (errors or lines or [None])[-1]
