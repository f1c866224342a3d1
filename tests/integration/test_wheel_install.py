"""A regular install works: the wheel, installed alone into a fresh virtualenv, creates its
database (the Alembic migrations ship inside the package) and tunes, from a folder outside the
repository.

Offline: the wheel is built with the repository's own setuptools (no build isolation) and
installed without dependencies; the fresh virtualenv sees the dependencies through a .pth file
that names the repository virtualenv's site-packages. A path line in a .pth file only adds that
folder to sys.path; the .pth files inside it (the repository's editable install) are not run, so
`tuner` can only come from the wheel, which the first test asserts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.pool import NullPool

from tuner.store.db import VERSION_TABLE, current_revision, head_revision
from tuner.store.models import Base

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# No PYTHONPATH: it would put a checkout back on the path and hide what this test is about.
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
       "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
       "HF_HUB_OFFLINE": "1"}


class FreshInstall:
    def __init__(self, venv: Path, cwd: Path):
        self.venv, self.cwd = venv, cwd
        self.python = venv / "bin" / "python"
        self.tuner = venv / "bin" / "tuner"
        self.site = Path(subprocess.run(
            [self.python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True).stdout.strip())

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in args], cwd=self.cwd, env=ENV, capture_output=True,
                              text=True, timeout=timeout)


def check(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, (
        f"{done.args} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> FreshInstall:
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    check(subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                          "-w", tmp / "dist", ROOT], capture_output=True, text=True, timeout=300))
    (wheel,) = (tmp / "dist").glob("specdec_tuner-*.whl")
    venv = tmp / "venv"
    # Without pip of its own (faster): the repository's pip installs into it.
    check(subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv],
                         capture_output=True, text=True, timeout=120))
    check(subprocess.run([*pip, "--python", venv / "bin" / "python", "install", "--no-deps",
                          "--no-index", wheel], capture_output=True, text=True, timeout=300))
    cwd = tmp / "elsewhere"
    cwd.mkdir()
    install = FreshInstall(venv, cwd)
    (install.site / "repo-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return install


def test_tuner_is_imported_from_the_wheel_with_its_migrations(fresh):
    code = ("import json, sys, tuner, alembic, tuner.store.db as db; print(json.dumps("
            "[tuner.__file__, alembic.__file__, str(db.MIGRATIONS_DIR), sys.path]))")
    done = check(fresh.run(fresh.python, "-c", code))
    tuner_file, alembic_file, migrations, path = json.loads(done.stdout)
    assert Path(tuner_file).is_relative_to(fresh.site), tuner_file
    assert Path(migrations).is_relative_to(fresh.site)
    assert sorted(p.name for p in (Path(migrations) / "versions").glob("*.py")) == sorted(
        p.name for p in (ROOT / "tuner" / "store" / "migrations" / "versions").glob("*.py"))
    assert (Path(migrations) / "script.py.mako").is_file()  # `alembic revision` needs it
    # The dependencies come from the repository's virtualenv, the checkout itself never.
    assert Path(alembic_file).is_relative_to(sysconfig.get_path("purelib"))
    assert str(ROOT) not in path


def test_installed_tuner_creates_the_database_and_tunes_from_elsewhere(fresh, tiny_models):
    url = f"sqlite:///{fresh.cwd / 'tuner.db'}"
    done = check(fresh.run(fresh.tuner, "db", "upgrade", "--db", url))
    assert "schema up to date" in done.stdout
    engine = create_engine(url, poolclass=NullPool)
    assert current_revision(engine) == head_revision()
    assert set(inspect(engine).get_table_names()) - {VERSION_TABLE} == set(Base.metadata.tables)

    # Nothing tuned yet: one sentence with the fix, not a traceback.
    empty = fresh.run(fresh.tuner, "best", "--db", url)
    assert empty.returncode != 0
    assert "run `tuner optimize` first" in empty.stderr and "Traceback" not in empty.stderr

    # The baseline alone (--trials 1): one real vLLM server, started by the installed command.
    workload = fresh.cwd / "code.jsonl"
    workload.write_text("".join(line + "\n" for line in
                                (ROOT / "workloads" / "code.jsonl").read_text().splitlines()[:8]))
    check(fresh.run(fresh.tuner, "optimize", "--workload", workload,
                    "--model", tiny_models / "target", "--concurrency", "2", "--trials", "1",
                    "--db", url, "--log-dir", fresh.cwd / "logs", "--server-arg=--enforce-eager",
                    "--server-arg=--max-model-len=1024", "--json", timeout=300))
    (best,) = json.loads(check(fresh.run(fresh.tuner, "best", "--json", "--db", url)).stdout)
    assert best["baseline"]["tokens_per_s"] > 0
