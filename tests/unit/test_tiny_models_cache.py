"""scripts/make_tiny_models.py keeps finished models outside the checkout, by the fingerprint of
the scripts that made them: a fresh clone copies them instead of training again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_tiny_models.py"
ALL = ("target", "draft", "draft-weak", "eagle3", "dflash", "dspark", "mtp-target")


def run(out: Path, cache: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), *args], capture_output=True, text=True,
                          env={**os.environ, "TUNER_MODELS_CACHE": str(cache)}, timeout=300)


def fingerprint() -> str:
    return subprocess.run([sys.executable, "-c", "import make_tiny_models as m; print(m.scripts_fingerprint())"],
                          capture_output=True, text=True, cwd=SCRIPT.parent, check=True).stdout.strip()


def fake_models(folder: Path, stamp: str) -> None:
    for name in ALL:
        (folder / name).mkdir(parents=True)
        (folder / name / "BUILT").write_text(stamp + "\n")
        (folder / name / "weights").write_text(f"{name} weights\n")


def test_a_fresh_checkout_copies_the_models_its_scripts_made_before(tmp_path):
    stamp = fingerprint()
    fake_models(tmp_path / "cache" / stamp, stamp)
    result = run(tmp_path / "out", tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    assert "copied from" in result.stdout and "training on" not in result.stdout
    assert (tmp_path / "out" / "STAMP").read_text().strip() == stamp
    assert (tmp_path / "out" / "eagle3" / "weights").read_text() == "eagle3 weights\n"


def test_models_made_by_other_scripts_are_not_copied_and_finished_ones_are_kept(tmp_path):
    stamp = fingerprint()
    fake_models(tmp_path / "cache" / "0123456789abcdef", "0123456789abcdef")  # older scripts' models
    fake_models(tmp_path / "out", stamp)  # up to date in the checkout, not yet in the cache
    result = run(tmp_path / "out", tmp_path / "cache", "--only", "target,draft")
    assert result.returncode == 0, result.stderr
    assert "copied from" not in result.stdout
    assert sorted(p.name for p in (tmp_path / "cache" / stamp).iterdir()) == ["draft", "target"]
    assert (tmp_path / "cache" / stamp / "draft" / "weights").read_text() == "draft weights\n"
