"""How well `tuner workload split` guesses workload types on labelled prompts it was not trained on.

    .venv/bin/python benchmarks/classifier_accuracy.py [FILE] [--min-confidence P]
        [--weights NPZ] [--min-overall 0.9] [--min-type 0.8]

FILE defaults to benchmarks/data/classifier/heldout.jsonl, the held-out split that
scripts/train_classifier.py never reads (lines: ``type`` plus ``prompt`` or ``messages``). A
Spec-Bench question file (lines with ``category``, such as
benchmarks/data/spec_bench_questions.jsonl) is read through the product's own importer instead.
Every request's own type is cleared first, since a line's type always wins. A request sent to
``mixed`` (below the confidence threshold) counts as a miss in the recall; how many went there
is printed beside it. Prints overall accuracy, per-type recall, the confusion table and, per
source, the misses.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from tuner.errors import TunerError
from tuner.workload.classify import DEFAULT_MIN_CONFIDENCE, MIXED, TYPES, guess_all
from tuner.workload.importers import import_workload
from tuner.workload.model import Request
from tuner.workload.type_model import TypeModel

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "benchmarks" / "data" / "classifier" / "heldout.jsonl"


def labelled(path: Path) -> list[tuple[str, str, Request]]:
    """(true type, source, request without its type) for every line of the file."""
    first = json.loads(path.read_text(encoding="utf-8").split("\n", 1)[0])
    if "category" in first:  # a Spec-Bench question file
        return [(truth, "spec-bench", replace(r, type=None))
                for truth, requests in import_workload("spec-bench", path).items()
                for r in requests]
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        row = json.loads(line)
        messages = tuple(row["messages"]) if "messages" in row else None
        rows.append((row["type"], row.get("source", "?"),
                     Request(line=number, prompt=row.get("prompt"), messages=messages)))
    return rows


def measure(path: Path, min_confidence: float = DEFAULT_MIN_CONFIDENCE, weights: Path | None = None
            ) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """(true type, guessed type) counts, and (source, true type) counts of the misses."""
    rows = labelled(path)
    model = TypeModel.load(weights) if weights is not None else None  # None: the shipped model
    guesses = guess_all([r for _, _, r in rows], min_confidence, model=model)
    pairs: Counter[tuple[str, str]] = Counter()
    misses: Counter[tuple[str, str]] = Counter()
    for (truth, source, _), guess in zip(rows, guesses, strict=True):
        # A completion that is not a known task is "other"; the labelled sets call that chat.
        kind = "chat" if guess.type == "other" else guess.type
        pairs[truth, kind] += 1
        if kind != truth:
            misses[source, truth] += 1
    return pairs, misses


def report(pairs: Counter[tuple[str, str]], misses: Counter[tuple[str, str]]
           ) -> tuple[float, dict[str, float]]:
    truths = [t for t in TYPES if any(k[0] == t for k in pairs)]
    guesses = [t for t in TYPES if any(k[1] == t for k in pairs)]
    total = sum(pairs.values())
    right = sum(n for (t, g), n in pairs.items() if t == g)
    mixed = sum(n for (_, g), n in pairs.items() if g == MIXED)
    recall = {t: pairs[t, t] / sum(n for (tt, _), n in pairs.items() if tt == t) for t in truths}
    print(f"overall accuracy: {right}/{total} = {right / total:.1%} "
          f"({mixed} sent to {MIXED}, counted as misses)")
    print(f"per-type recall ({MIXED} counts as a miss):")
    for t in truths:
        n = sum(pairs[t, g] for g in guesses)
        print(f"  {t:<14} {pairs[t, t]:>4}/{n:<4} {recall[t]:.1%}   {MIXED}: {pairs[t, MIXED]}")
    width = max(len(g) for g in guesses) + 1
    print("confusion (rows: true type, columns: guessed type):")
    print(" " * 15 + "".join(f"{g:>{width}}" for g in guesses))
    for t in truths:
        print(f"  {t:<13}" + "".join(f"{pairs[t, g]:>{width}}" for g in guesses))
    if misses:
        print("misses per source:")
        for (source, truth), n in sorted(misses.items()):
            print(f"  {source:<40} {truth:<14} {n}")
    return right / total, recall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--min-confidence", type=float, default=DEFAULT_MIN_CONFIDENCE,
                        help="below this probability a request goes to mixed")
    parser.add_argument("--weights", type=Path, default=None,
                        help="an experiment's weights (scripts/train_classifier.py --out); "
                             "default: the package's own model")
    parser.add_argument("--min-overall", type=float, default=None,
                        help="exit 1 when overall accuracy is below this fraction")
    parser.add_argument("--min-type", type=float, default=None,
                        help="exit 1 when any type's recall is below this fraction")
    args = parser.parse_args()
    try:
        pairs, misses = measure(args.file, args.min_confidence, args.weights)
    except (TunerError, OSError, json.JSONDecodeError, KeyError) as exc:
        print(f"error: cannot measure {args.file}: {exc}", file=sys.stderr)
        return 2
    overall, recall = report(pairs, misses)
    failed = (args.min_overall is not None and overall < args.min_overall) or \
        (args.min_type is not None and min(recall.values()) < args.min_type)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
