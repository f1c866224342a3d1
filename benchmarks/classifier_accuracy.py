"""How well `tuner workload split` guesses workload types on labelled public traffic.

The set is imported with the product's own importer (``--from spec-bench``: the category gives
the true type through ``SPEC_BENCH_TYPES``); each request's ``type`` is then cleared, because a
line's own type always wins, and the classifier guesses it again. Prints overall accuracy,
per-type recall and the confusion table (rows: true type, columns: guessed type).

    .venv/bin/python benchmarks/classifier_accuracy.py [FILE] [--min-overall 0.9]

FILE defaults to benchmarks/data/spec_bench_questions.jsonl (see docs/classifier.md).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from tuner.errors import UsageError, WorkloadError
from tuner.workload.classify import TYPES, classify
from tuner.workload.importers import import_workload

DEFAULT = Path(__file__).resolve().parent / "data" / "spec_bench_questions.jsonl"


def measure(path: Path) -> Counter[tuple[str, str]]:
    """(true type, guessed type) counts over the labelled file."""
    pairs: Counter[tuple[str, str]] = Counter()
    for truth, requests in import_workload("spec-bench", path).items():
        for request in requests:
            pairs[truth, classify(replace(request, type=None))] += 1
    return pairs


def report(pairs: Counter[tuple[str, str]]) -> tuple[float, dict[str, float]]:
    truths = [t for t in TYPES if any(k[0] == t for k in pairs)]
    guesses = [t for t in TYPES if any(k[1] == t for k in pairs)]
    total = sum(pairs.values())
    right = sum(n for (t, g), n in pairs.items() if t == g)
    recall = {t: pairs[t, t] / sum(n for (tt, _), n in pairs.items() if tt == t) for t in truths}
    print(f"overall accuracy: {right}/{total} = {right / total:.1%}")
    print("per-type recall:")
    for t in truths:
        n = sum(pairs[t, g] for g in guesses)
        print(f"  {t:<14} {pairs[t, t]:>4}/{n:<4} {recall[t]:.1%}")
    width = max(len(g) for g in guesses) + 1
    print("confusion (rows: true type, columns: guessed type):")
    print(" " * 15 + "".join(f"{g:>{width}}" for g in guesses))
    for t in truths:
        print(f"  {t:<13}" + "".join(f"{pairs[t, g]:>{width}}" for g in guesses))
    return right / total, recall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--min-overall", type=float, default=None,
                        help="exit 1 when overall accuracy is below this fraction")
    args = parser.parse_args()
    try:
        pairs = measure(args.file)
    except (UsageError, WorkloadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    overall, _ = report(pairs)
    return 1 if args.min_overall is not None and overall < args.min_overall else 0


if __name__ == "__main__":
    sys.exit(main())
