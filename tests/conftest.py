"""Shared fixtures: paths of the repository, its workloads and the tiny models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
MODELS = Path(os.environ.get("TUNER_TINY_MODELS", ROOT / ".models"))


@pytest.fixture(scope="session")
def tiny_models() -> Path:
    """The models made by scripts/make_tiny_models.py (`make models`)."""
    if not (MODELS / "STAMP").exists():
        pytest.fail(f"no tiny models in {MODELS}: run `make models` (make test does it first)")
    return MODELS
