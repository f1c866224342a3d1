"""Sort requests into workload types: the user's own label first, then a learned classifier.

The rules, in the order they apply, so a user can predict the result:

1. A line's own ``type`` field wins, whatever string it holds. ``tuner capture`` writes it from
   the client's ``X-Workload-Type`` header (or from ``--type``), so traffic can carry its label.
2. Otherwise a text classifier (``type_model``: hashed word and character n-grams, a logistic
   regression trained on public labelled prompts; docs/lab/classifier.md) gives each of code, chat,
   summarization, math, translation and rag a probability, from the system prompt and the ends
   of the last user message.
3. When the most likely type's probability is below ``min_confidence`` (default
   ``DEFAULT_MIN_CONFIDENCE``), the request goes to ``mixed`` instead of to a guess: a wrong type
   is a wrong answer, so an unsure request is set apart for the user to label.
4. A completions request (``prompt``) whose type comes out as chat is ``other``: plain text to
   continue, not a conversation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tuner.errors import UsageError
from tuner.workload.model import Request, Workload
from tuner.workload.type_model import TypeModel, request_view, shipped_model

MIXED = "mixed"
TYPES = ("code", "chat", "summarization", "math", "translation", "rag", "other", MIXED)
# Compared at 0, 0.4 and 0.5 on the held-out split (docs/lab/classifier.md): 0.4 sets apart the
# requests the model is most often wrong on while costing under one point of accuracy.
DEFAULT_MIN_CONFIDENCE = 0.4
_BATCH = 2048  # requests scored at once: the sparse matrix of a batch stays small


@dataclass(frozen=True)
class Guess:
    type: str  # what the request is sorted into
    confidence: float | None  # the model's probability of its best type; None for a user label
    labelled: bool  # the type came from the line itself


def check_min_confidence(value: float) -> float:
    if not 0 <= value <= 1:
        raise UsageError(f"--min-confidence must be a probability between 0 and 1, got {value}")
    return value


def guess_all(requests: Sequence[Request], min_confidence: float = DEFAULT_MIN_CONFIDENCE,
              model: TypeModel | None = None) -> list[Guess]:
    """One guess per request, in order; the model (the shipped one unless given: training
    scripts pass theirs) runs once over all unlabelled requests."""
    check_min_confidence(min_confidence)
    guesses: list[Guess | None] = [Guess(r.type, None, True) if r.type is not None else None
                                   for r in requests]
    todo = [i for i, g in enumerate(guesses) if g is None]
    if todo:
        model = model or shipped_model()
        for start in range(0, len(todo), _BATCH):
            chunk = todo[start:start + _BATCH]
            probabilities = model.probabilities([request_view(requests[i]) for i in chunk])
            for i, row in zip(chunk, probabilities, strict=True):
                best = int(row.argmax())
                kind, confidence = model.labels[best], float(row[best])
                if confidence < min_confidence:
                    kind = MIXED
                elif kind == "chat" and not requests[i].is_chat:
                    kind = "other"
                guesses[i] = Guess(kind, confidence, False)
    return [g for g in guesses if g is not None]


def classify(request: Request, min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> str:
    """The request's workload type; see the module docstring for the rules."""
    return guess_all([request], min_confidence)[0].type


def split_requests(requests: Iterable[Request],
                   min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> dict[str, list[Request]]:
    """Requests grouped by type (first appearance order), each with its ``type`` set."""
    requests = list(requests)
    groups: dict[str, list[Request]] = {}
    for request, guess in zip(requests, guess_all(requests, min_confidence), strict=True):
        groups.setdefault(guess.type, []).append(replace(request, type=guess.type))
    return groups


def split_workload(workload: Workload,
                   min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> dict[str, list[Request]]:
    """The workload's requests grouped by `classify`; file order is kept inside a group."""
    return split_requests(workload.requests, min_confidence)


@dataclass(frozen=True)
class TypeCounts:
    labelled: dict[str, int]  # from the lines' own type
    guessed: dict[str, int]  # from the classifier, ``mixed`` included
    min_confidence: float

    @property
    def mixed(self) -> int:
        return self.guessed.get(MIXED, 0)


def type_counts(requests: Sequence[Request],
                min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> TypeCounts:
    guesses = guess_all(requests, min_confidence)
    return TypeCounts(labelled=dict(Counter(g.type for g in guesses if g.labelled)),
                      guessed=dict(Counter(g.type for g in guesses if not g.labelled)),
                      min_confidence=min_confidence)
