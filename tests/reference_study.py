"""One real study that many tests read: `tuner optimize` over every method on the tiny models.

A vLLM start costs 15-30 s on the CI host, and the tests of `tuner optimize`, of the methods, of
repeats, of a config that cannot start and of the dashboard all need the same kind of study on
the same target and workload. They read this one (the session fixture `reference_study` in
tests/conftest.py) instead of starting servers of their own; a test that changes the database
works on a copy (`ReferenceStudy.copy`).

The study: the grid over the baseline, ngram, a draft model, a draft folder without weights
(vLLM fails to load it), the EAGLE-3 head and the DFlash and DSpark drafters at k=3 (the block
drafters at their own block size), each replayed twice on its one server: 6 starts, 1 of which
fails at start; DSpark is refused before a start (the CPU build's vLLM runs Model Runner V1, and
the tuner asks vLLM's own rules first).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from engine_layout import in_process_by_default, own_process

ROOT = Path(__file__).resolve().parent.parent
SERVER_ARGS = ["--server-arg=--enforce-eager", "--server-arg=--max-model-len=1024"]
# The `tuner` commands the tests run start vLLM with the engine in the API server's process, as
# the tests' own servers do (tests/engine_layout.py).
ENV = in_process_by_default({**os.environ, "HF_HUB_OFFLINE": "1",
                             "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")})
REQUESTS = 16


def short_code_workload(folder: Path, requests: int = REQUESTS, max_tokens: int | None = None,
                        kind: str = "code") -> Path:
    """The first requests of the code workload (or of workloads/KIND.jsonl; ``max_tokens``: each
    shortened to that), as FOLDER/KIND.jsonl, so its workload type stays KIND: a replay of a few
    seconds keeps the suite short."""
    lines = (ROOT / "workloads" / f"{kind}.jsonl").read_text().splitlines()[:requests]
    if max_tokens is not None:
        lines = [json.dumps({**json.loads(line), "max_tokens": max_tokens}) for line in lines]
    path = folder / f"{kind}.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def broken_draft(folder: Path, models: Path) -> Path:
    """A draft folder that exists but holds no weights: the preflight passes, vLLM fails loading it."""
    broken = folder / "broken-draft"
    broken.mkdir(exist_ok=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(models / "draft" / name, broken / name)
    return broken


def run_tuner(*args: str, timeout: float = 1500, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``tuner ARGS`` as a user runs it (``env``: its environment, ``ENV`` by default); it must exit 0."""
    result = subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True,
                            text=True, env=env or ENV, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@dataclass(frozen=True)
class ReferenceStudy:
    folder: Path
    models: Path
    workload: Path
    drafts: dict[str, str]  # draft, broken, eagle3, dflash, dspark -> its folder
    answer: dict  # what `tuner optimize --json` printed

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.folder / 'tuner.db'}"

    @property
    def log_dir(self) -> Path:
        return self.folder / "logs"

    def space(self, drafts: tuple[str, ...] | None = None) -> list[str]:
        """The study's flags (``drafts``: only these of its drafts), less --db and --strategy: run
        again with another --name, they make a new study of the same model and workload type."""
        chosen = [self.drafts[name] for name in drafts or self.drafts]
        return ["--workload", str(self.workload), "--model", str(self.models / "target"),
                "--method", "ngram", "--method", "draft_model", "--method", "eagle3",
                *(a for d in chosen for a in ("--draft", d)), "--k", "3",
                "--concurrency", "2", "--repeats", "2", *SERVER_ARGS]

    def copy(self, folder: Path) -> str:
        """A copy of the study's database in ``folder``, for a test that writes to it; its URL."""
        shutil.copy(self.folder / "tuner.db", folder / "tuner.db")
        return f"sqlite:///{folder / 'tuner.db'}"


def make_reference_study(folder: Path, models: Path) -> ReferenceStudy:
    # ngram, draft_model and eagle3 are named; the DFlash and DSpark drafters are passed as
    # --draft PATH alone, and their method is read from their checkpoints.
    drafts = {"draft": str(models / "draft"), "broken": str(broken_draft(folder, models)),
              **{m: str(models / m) for m in ("eagle3", "dflash", "dspark")}}
    study = ReferenceStudy(folder, models, short_code_workload(folder), drafts, answer={})
    # vLLM's default layout, the engine in a process of its own: with the engine in the API
    # server's process this study's trials took about three times as long on 2026-12-03 (the
    # baseline's 168 s against 53 s, in two clean-clone runs of that evening; the first had the
    # GPU payload's niced compression beside it), its replays of 16 long requests most of all.
    result = run_tuner("optimize", *study.space(), "--strategy", "grid", "--db", study.db_url,
                       "--log-dir", str(study.log_dir), "--json", env=own_process(ENV))
    return ReferenceStudy(folder, models, study.workload, drafts, answer=json.loads(result.stdout))
