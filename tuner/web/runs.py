"""Tuning runs started from the dashboard: the form becomes a ``StudyRequest`` here (refused with
its sentence before anything starts), and the study runs as `tuner run-request` in a child process.

The only thing the dashboard can change, so it is the only route behind the operator's token.
A run writes to the dashboard's own database and its output to a log file; the study itself
takes the CLI's path (interrupt and resume included), nothing is re-implemented here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field

from tuner.plan.request import StudyRequest
from tuner.plan.study_plan import build_request, check_request
from tuner.study.child_process import Child, start_child, stop_children, tuner_argv


class RunRequest(BaseModel):
    """What `tuner optimize` needs; paths are on the dashboard's host."""

    workload: str = Field(description="Workload JSONL on the dashboard's host")
    model: str
    study: str | None = Field(None, description="TOML study file (space, server args, load)")
    name: str | None = Field(None, description="Study name; a new name warm-starts from the last study")
    trials: int | None = Field(None, ge=1)
    methods: list[str] = Field(default_factory=list, description="Methods to try (ngram, draft_model, "
                               "eagle3, dflash, dspark, mtp); empty: the study file's, or those of the drafts")
    drafts: list[str] = Field(default_factory=list, description="Draft checkpoints: PATH (its method is "
                              "read from its config) or METHOD=PATH")
    k: str | None = Field(None, description="k values of chain drafters, like 1-6 or 2,4")

    def study_request(self, db_url: str) -> StudyRequest:
        """The study this form asks for, checked as `tuner optimize` checks it."""
        request = build_request(Path(self.study) if self.study else None, workload=self.workload,
                                model=self.model, db=db_url, name=self.name, trials=self.trials,
                                methods=self.methods or None, drafts=self.drafts or None, k=self.k)
        check_request(request)
        return request


@dataclass
class Run:
    id: int
    request: StudyRequest
    log_path: Path
    process: Child
    started_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def view(self) -> dict:
        code = self.process.poll()
        status = "running" if code is None else ("finished" if code == 0 else f"exited with {code}")
        return {"id": self.id, "pid": self.process.pid, "request": self.request.to_json(), "status": status,
                "exit_code": code, "started_at": self.started_at, "log": str(self.log_path)}


class RunLauncher:
    def __init__(self, db_url: str, log_dir: Path):
        self.db_url = db_url
        self.log_dir = log_dir
        self.runs: list[Run] = []

    def start(self, request: RunRequest) -> Run:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        run_id = len(self.runs) + 1
        log_path = self.log_dir / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{run_id}.log"
        study = request.study_request(self.db_url)
        request_path = log_path.with_suffix(".request.json")
        request_path.write_text(study.model_dump_json(indent=1))
        self.runs.append(Run(run_id, study, log_path, start_child(tuner_argv("run-request", str(request_path)), log_path)))
        return self.runs[-1]

    def stop_all(self, grace_s: float = 30.0) -> None:
        """SIGINT (the study stops after tearing its server down and can be resumed), then SIGKILL."""
        stop_children([r.process for r in self.runs if r.process.poll() is None], grace_s)
