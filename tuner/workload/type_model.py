"""The learned part of the workload-type classifier: text features and a linear model.

A request is read as the text a person would look at to tell its job: the system prompt's
start and the last user message, of which a long one (an article, retrieved documents) keeps
only its first and last ``ENDS`` characters, where instructions sit. That text is hashed into
word 1-2-grams and character 3-4-grams (scikit-learn's ``HashingVectorizer``: no vocabulary to
ship, the same hash at training and at run time) plus a few shape tokens (length, lines, digits,
code fences). The first and the last line of the user message, where a request's instruction
sits, are hashed a second time into blocks of their own (word 1-2-grams and character
3-4-grams, each normalised on its own), so that an instruction weighs the same beside a long
article as beside a short one (docs/lab/classifier.md, issue 48). All is scored by a
multinomial logistic regression whose weights ship in ``type_model.npz`` beside this file. The
shipped weights are issue 32's (built from benchmarks/data/classifier/train.jsonl, before the
instruction-line blocks: they have no weight there); scripts/train_classifier.py now fits on
train_by_source.jsonl. docs/lab/classifier.md says from what.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from tuner.workload.model import Request

WEIGHTS = Path(__file__).with_name("type_model.npz")
# Characters kept at each end of a long message, and of the system prompt. The hashing is pure
# Python per character, so these bound the cost of a request (docs/lab/classifier.md, speed).
ENDS = 256
SYSTEM_CHARS = 256
WORD_FEATURES = 2 ** 18
CHAR_FEATURES = 2 ** 18
LINE_FEATURES = 2 ** 16
LINE_CHARS = 200  # kept of the first line's start and the last line's end
_LINES = "\x1e"  # separates the view from its instruction lines
_NO_DIGITS = str.maketrans("", "", "0123456789")


def _texts(request: Request) -> tuple[str, str]:
    """(system prompt, last user message); a completions prompt counts as the user text."""
    if request.messages is None:
        return "", request.prompt or ""
    system = "\n".join(m.get("content") or "" for m in request.messages if m.get("role") == "system")
    users = [m.get("content") or "" for m in request.messages if m.get("role") == "user"]
    return system, users[-1] if users else request.messages[-1].get("content") or ""


def _bucket(value: int, edges: Sequence[int]) -> int:
    return sum(value >= edge for edge in edges)


def view(system: str, user: str) -> str:
    """The text the model reads: the ends of the messages and shape tokens."""
    ends = user if len(user) <= 2 * ENDS else f"{user[:ENDS]}\n…\n{user[-ENDS:]}"
    lines = user.count("\n") + 1
    digits = (len(ends) - len(ends.translate(_NO_DIGITS))) * 10 // max(1, len(ends))
    shape = (f"zlen{_bucket(len(user), (80, 200, 500, 1200, 3000, 8000))} "
             f"zlines{_bucket(lines, (2, 4, 10, 30))} zdigits{digits} "
             f"{'zfence' if '```' in user else ''} {'zsystem' if system else ''}")
    written = [line for line in user.splitlines() if line.strip()] or [""]
    instruction = f"{written[0][:LINE_CHARS]}\n{written[-1][-LINE_CHARS:]}"
    return f"{system[:SYSTEM_CHARS]}\n{ends}\n{shape}{_LINES}{instruction}"


def request_view(request: Request) -> str:
    return view(*_texts(request))


@functools.cache
def _vectorizers() -> tuple[object, object, object, object]:
    from sklearn.feature_extraction.text import HashingVectorizer

    def word_grams(columns: int) -> object:
        return HashingVectorizer(n_features=columns, ngram_range=(1, 2), alternate_sign=False,
                                 token_pattern=r"(?u)\b\w+\b|[^\w\s]", norm="l2")

    def char_grams(columns: int) -> object:
        return HashingVectorizer(n_features=columns, analyzer="char_wb", ngram_range=(3, 4),
                                 alternate_sign=False, norm="l2")

    return (word_grams(WORD_FEATURES), char_grams(CHAR_FEATURES), word_grams(LINE_FEATURES),
            char_grams(LINE_FEATURES))


def features(texts: Sequence[str]) -> csr_matrix:
    """Rows of hashed features for ``view`` texts (word block, character block, then the
    instruction lines' word and character blocks)."""
    from scipy.sparse import hstack

    words, chars, line_words, line_chars = _vectorizers()
    parts = [text.partition(_LINES) for text in texts]
    main, instructions = [p[0] for p in parts], [p[2] for p in parts]
    return hstack([words.transform(main), chars.transform(main),  # type: ignore[attr-defined]
                   line_words.transform(instructions),  # type: ignore[attr-defined]
                   line_chars.transform(instructions)], format="csr")  # type: ignore[attr-defined]


class TypeModel:
    """Linear scores over the hashed features; ``probabilities`` is the softmax per request."""

    def __init__(self, labels: Sequence[str], columns: np.ndarray, weights: np.ndarray,
                 bias: np.ndarray):
        self.labels = tuple(labels)
        # Only the hashed columns training saw have weights; the rest are zero and not shipped.
        self.dense = np.zeros((WORD_FEATURES + CHAR_FEATURES + 2 * LINE_FEATURES, len(labels)),
                              dtype=np.float32)
        self.dense[columns] = weights
        self.bias = bias.astype(np.float32)

    @classmethod
    def load(cls, path: Path = WEIGHTS) -> TypeModel:
        with np.load(path, allow_pickle=False) as data:
            return cls([str(x) for x in data["labels"]], data["columns"],
                       data["weights"].astype(np.float32), data["bias"])

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        scores = features(texts) @ self.dense + self.bias
        scores -= scores.max(axis=1, keepdims=True)
        exp = np.exp(scores)
        return exp / exp.sum(axis=1, keepdims=True)


@functools.cache
def shipped_model() -> TypeModel:
    """The model in the package, loaded once per process."""
    return TypeModel.load()
