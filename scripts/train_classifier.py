"""Fit the workload-type model and export its weights into the package.

    .venv/bin/python scripts/train_classifier.py             # fit, write type_model.npz
    .venv/bin/python scripts/train_classifier.py --out /tmp/m.npz   # an experiment's weights
    .venv/bin/python scripts/train_classifier.py --loso      # leave-one-source-out figure

Reads benchmarks/data/classifier/train_by_source.jsonl (made by scripts/build_classifier_data.py;
the held-out file is not read unless ``--with-heldout`` says so) and writes
tuner/workload/type_model.npz: the labels, the hashed feature columns that have weights, their
weights (float16) and the biases. Deterministic: the same data gives the same file.

``--loso`` fits the same model with each training source left out in turn and guesses that
source's prompts with the model that never saw it, through the product's own decision
(``guess_all``: the confidence threshold, ``mixed`` counted as a miss). Sources are data sets or
frameworks (``mathematics_dataset/algebra`` counts as ``mathematics_dataset``). It is the figure
to tune on: the held-out file stays unread. ``--loso --with-heldout`` adds the held-out file's
sources to the loop, for the final report only (docs/lab/classifier.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.workload.classify import guess_all  # noqa: E402
from tuner.workload.model import Request  # noqa: E402
from tuner.workload.type_model import WEIGHTS, TypeModel, features, request_view  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "classifier"
TRAIN = DATA / "train_by_source.jsonl"
HELDOUT = DATA / "heldout_by_source.jsonl"
C = 50.0  # weak regularisation: the features are l2-normalised, the set is small and clean


def labelled_requests(path: Path) -> tuple[list[Request], list[str], list[str]]:
    """The labelled file's requests (without their type), their true types and sources."""
    requests, truths, sources = [], [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        row = json.loads(line)
        messages = tuple(row["messages"]) if "messages" in row else None
        requests.append(Request(line=number, prompt=row.get("prompt"), messages=messages))
        truths.append(row["type"])
        sources.append(row.get("source", "?").split("/")[0])
    return requests, truths, sources


def fit(requests: list[Request], truths: list[str]) -> tuple[TypeModel, np.ndarray, float]:
    """The model, its weighted columns and its accuracy on its own training data."""
    matrix = features([request_view(r) for r in requests])
    model = LogisticRegression(C=C, max_iter=3000, class_weight="balanced")
    model.fit(matrix, truths)
    weights = model.coef_.T  # features x labels
    columns = np.flatnonzero(np.abs(weights).max(axis=1) > 1e-4)
    fitted = TypeModel([str(x) for x in model.classes_], columns,
                       weights[columns].astype(np.float16).astype(np.float32), model.intercept_)
    return fitted, columns, model.score(matrix, truths)


def train(out: Path) -> None:
    requests, truths, _ = labelled_requests(TRAIN)
    model, columns, accuracy = fit(requests, truths)
    np.savez_compressed(out, labels=np.array(model.labels, dtype=str),
                        columns=columns.astype(np.int32),
                        weights=model.dense[columns].astype(np.float16), bias=model.bias)
    print(f"{out}: {len(truths)} prompts, {len(columns)} weighted columns, "
          f"{out.stat().st_size / 1e6:.1f} MB; train accuracy {accuracy:.3f}")


def loso(with_heldout: bool, jobs: int) -> None:
    requests, truths, sources = labelled_requests(TRAIN)
    if with_heldout:
        more = labelled_requests(HELDOUT)
        requests, truths, sources = requests + more[0], truths + more[1], sources + more[2]
    pairs: Counter[tuple[str, str]] = Counter()
    left_outs = sorted(set(sources))

    def fit_without(left_out: str) -> TypeModel:
        keep = [i for i, s in enumerate(sources) if s != left_out]
        return fit([requests[i] for i in keep], [truths[i] for i in keep])[0]

    models = Parallel(n_jobs=jobs)(delayed(fit_without)(s) for s in left_outs)
    for left_out, model in zip(left_outs, models, strict=True):
        out = [i for i, s in enumerate(sources) if s == left_out]
        guesses = guess_all([requests[i] for i in out], model=model)
        right: Counter[tuple[str, bool]] = Counter()
        for i, guess in zip(out, guesses, strict=True):
            kind = "chat" if guess.type == "other" else guess.type
            pairs[truths[i], kind] += 1
            right[truths[i], kind == truths[i]] += 1
        per_type = "  ".join(f"{t} {right[t, True]}/{right[t, True] + right[t, False]}"
                             for t in sorted({truths[i] for i in out}))
        print(f"  left out {left_out:<22} {per_type}", flush=True)
    total = sum(pairs.values())
    right_all = sum(n for (t, g), n in pairs.items() if t == g)
    print(f"leave-one-source-out over {'both files' if with_heldout else TRAIN.name}: "
          f"{right_all}/{total} = {right_all / total:.1%}")
    for kind in sorted({t for t, _ in pairs}):
        n = sum(c for (t, _), c in pairs.items() if t == kind)
        wrong = ", ".join(f"{g} {c}" for (t, g), c in sorted(pairs.items()) if t == kind != g)
        print(f"  {kind:<14} {pairs[kind, kind]:>4}/{n:<4} {pairs[kind, kind] / n:.1%}   "
              f"misread as: {wrong or '-'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loso", action="store_true", help="leave-one-source-out figure")
    parser.add_argument("--with-heldout", action="store_true",
                        help="with --loso: also leave out each held-out source (report only)")
    parser.add_argument("--jobs", type=int, default=2, help="with --loso: fits run at once")
    parser.add_argument("--out", type=Path, default=WEIGHTS,
                        help="where the weights go (default: the package's own model)")
    args = parser.parse_args()
    loso(args.with_heldout, args.jobs) if args.loso else train(args.out)


if __name__ == "__main__":
    main()
