"""Fit the workload-type model and export its weights into the package.

    .venv/bin/python scripts/train_classifier.py

Reads benchmarks/data/classifier/train.jsonl (made by scripts/build_classifier_data.py; the
held-out file is not read here) and writes tuner/workload/type_model.npz: the labels, the hashed
feature columns that have weights, their weights (float16) and the biases. Deterministic: the
same data gives the same file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.workload.model import Request  # noqa: E402
from tuner.workload.type_model import WEIGHTS, features, request_view  # noqa: E402

TRAIN = ROOT / "benchmarks" / "data" / "classifier" / "train.jsonl"
C = 50.0  # weak regularisation: the features are l2-normalised, the set is small and clean


def labelled_requests(path: Path) -> tuple[list[Request], list[str]]:
    """The labelled file's requests (without their type) and their true types."""
    requests, truths = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        row = json.loads(line)
        messages = tuple(row["messages"]) if "messages" in row else None
        requests.append(Request(line=number, prompt=row.get("prompt"), messages=messages))
        truths.append(row["type"])
    return requests, truths


def main() -> None:
    requests, truths = labelled_requests(TRAIN)
    matrix = features([request_view(r) for r in requests])
    model = LogisticRegression(C=C, max_iter=3000, class_weight="balanced")
    model.fit(matrix, truths)
    weights = model.coef_.T  # features x labels
    columns = np.flatnonzero(np.abs(weights).max(axis=1) > 1e-4)
    np.savez_compressed(WEIGHTS, labels=np.array(model.classes_, dtype=str),
                        columns=columns.astype(np.int32),
                        weights=weights[columns].astype(np.float16),
                        bias=model.intercept_.astype(np.float32))
    print(f"{WEIGHTS.relative_to(ROOT)}: {len(truths)} prompts, {len(columns)} weighted columns, "
          f"{WEIGHTS.stat().st_size / 1e6:.1f} MB; train accuracy {model.score(matrix, truths):.3f}")


if __name__ == "__main__":
    main()
