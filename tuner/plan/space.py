"""The search space: which (method, draft, k, method fields) configurations a study may try.

Each configuration is a set of Optuna parameters with a conditional structure: ``method`` first
("off" is the no-speculation baseline), then ``<method>.draft`` where the method takes a
checkpoint, ``<method>.k`` where k is swept, ``ngram.lookup`` for ngram, and ``<method>.verify``
(fixed or adaptive) for a drafter where the study asks for vLLM's adaptive verification.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import optuna

from tuner.engine import SpecConfig
from tuner.engine.checkpoints import Checkpoint, missing_local
from tuner.engine.spec_config import ADAPTIVE_FIELD, NEEDS_DRAFT
from tuner.errors import UsageError

BASELINE = "off"
# Block drafters: k is the checkpoint's trained block size, not a free knob.
FIXED_K = frozenset({"dflash", "dspark"})
DEFAULT_KS = (1, 2, 3, 4, 5)
DEFAULT_NGRAM_LOOKUP = ((2, 4),)  # vLLM's own default (5, 5) rarely matches in short prompts
# Drafters whose draft logits vLLM's adaptive verification reads (enable_adaptive_verification:
# it sizes each request's verification budget, up to k, from the drafter's confidence); ngram and
# suffix have no logits.
ADAPTIVE_METHODS = frozenset({"draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark"})
VERIFY_MODES = ("fixed", "adaptive")


def parse_ks(text: str) -> tuple[int, ...]:
    """'1-8' or '2,4,6' (or a mix: '1-3,6') -> sorted distinct ks."""
    ks: set[int] = set()
    try:
        for part in text.replace(" ", "").split(","):
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                ks.update(range(low, high + 1))
            elif part:
                ks.add(int(part))
    except ValueError:
        raise UsageError(f"--k {text!r} is not a k range; write it like 1-8 or 2,4,6") from None
    if not ks or min(ks) < 1:
        raise UsageError(f"--k {text!r} must name ks >= 1, like 1-8 or 2,4,6")
    return tuple(sorted(ks))


def parse_lookup(text: str) -> tuple[int, int]:
    """'2-4' -> (prompt_lookup_min, prompt_lookup_max)."""
    try:
        low, high = (int(x) for x in text.split("-", 1))
    except ValueError:
        raise UsageError(f"ngram lookup {text!r} must be MIN-MAX, like 2-4") from None
    if not 1 <= low <= high:
        raise UsageError(f"ngram lookup {text!r} needs 1 <= MIN <= MAX")
    return low, high


@dataclass(frozen=True)
class Candidate:
    """One point of the space: Optuna params and the config they stand for (None = baseline)."""

    params: dict[str, Any]
    spec: SpecConfig | None

    @property
    def label(self) -> str:
        return self.spec.label if self.spec else "baseline"


@dataclass(frozen=True)
class SearchSpace:
    methods: tuple[str, ...] = ("ngram",)
    ks: tuple[int, ...] = DEFAULT_KS
    drafts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # method -> checkpoints
    fixed_k: dict[str, int] = field(default_factory=dict)  # block drafters: method -> k
    ngram_lookup: tuple[tuple[int, int], ...] = DEFAULT_NGRAM_LOOKUP
    adaptive: bool = False  # each drafter also with vLLM's adaptive verification

    def __post_init__(self) -> None:
        for method in self.methods:
            if method in NEEDS_DRAFT and not self.drafts.get(method):
                raise UsageError(f"method '{method}' needs a draft checkpoint: pass "
                                 f"--draft {method}=PATH_OR_NAME (or --draft PATH with one such method)")
            if method in FIXED_K and method not in self.fixed_k:
                raise UsageError(f"method '{method}' has its k fixed by the checkpoint's block size, "
                                 "which cannot be read here (no config.json with block_size): set it "
                                 f"in the study file ([space.fixed_k] {method} = K)")
        for method in self.drafts:
            if method not in self.methods:
                raise UsageError(f"--draft names method '{method}', which is not among --method")
        if self.adaptive and not self.adaptive_methods:
            raise UsageError("--adaptive-verification needs a drafter among --method (one of "
                             f"{', '.join(sorted(ADAPTIVE_METHODS))}); ngram and suffix have no draft "
                             "logits for it to read")

    @property
    def adaptive_methods(self) -> tuple[str, ...]:
        """The methods whose configs are tried with and without adaptive verification."""
        return tuple(m for m in self.methods if m in ADAPTIVE_METHODS) if self.adaptive else ()

    def to_dict(self) -> dict[str, Any]:
        return {"methods": list(self.methods), "ks": list(self.ks),
                "drafts": {m: list(d) for m, d in self.drafts.items()},
                "fixed_k": dict(self.fixed_k),
                "ngram_lookup": [f"{lo}-{hi}" for lo, hi in self.ngram_lookup],
                **({"adaptive_verification": True} if self.adaptive else {})}

    def _ks(self, method: str) -> tuple[int, ...]:
        return (self.fixed_k[method],) if method in FIXED_K else self.ks

    def _spec(self, method: str, params: dict[str, Any]) -> SpecConfig:
        extra: dict[str, Any] = {}
        if method == "ngram":
            low, high = parse_lookup(params["ngram.lookup"])
            extra = {"prompt_lookup_min": low, "prompt_lookup_max": high}
        if params.get(f"{method}.verify") == "adaptive":
            extra = {**extra, ADAPTIVE_FIELD: True}
        return SpecConfig(method, params[f"{method}.k"], draft_model=params.get(f"{method}.draft"),
                          extra=extra)

    def candidates(self) -> list[Candidate]:
        """Every configuration, baseline first, in a stable order."""
        found = [Candidate({"method": BASELINE}, None)]
        for method in self.methods:
            drafts = self.drafts.get(method) or (None,)
            lookups = [f"{lo}-{hi}" for lo, hi in self.ngram_lookup] if method == "ngram" else [None]
            verifies = VERIFY_MODES if method in self.adaptive_methods else (None,)
            for draft in drafts:
                for lookup in lookups:
                    for verify in verifies:
                        for k in self._ks(method):
                            params: dict[str, Any] = {"method": method}
                            if draft is not None:
                                params[f"{method}.draft"] = draft
                            if lookup is not None:
                                params["ngram.lookup"] = lookup
                            if verify is not None:
                                params[f"{method}.verify"] = verify
                            params[f"{method}.k"] = k
                            found.append(Candidate(params, self._spec(method, params)))
        return found

    def suggest(self, trial: optuna.Trial) -> Candidate:
        """Define-by-run: the same params as ``candidates``, drawn by the study's sampler."""
        method = trial.suggest_categorical("method", [BASELINE, *self.methods])
        if method == BASELINE:
            return Candidate({"method": BASELINE}, None)
        params: dict[str, Any] = {"method": method}
        if self.drafts.get(method):
            params[f"{method}.draft"] = trial.suggest_categorical(f"{method}.draft", list(self.drafts[method]))
        if method == "ngram":
            params["ngram.lookup"] = trial.suggest_categorical(
                "ngram.lookup", [f"{lo}-{hi}" for lo, hi in self.ngram_lookup])
        if method in self.adaptive_methods:
            params[f"{method}.verify"] = trial.suggest_categorical(f"{method}.verify", list(VERIFY_MODES))
        params[f"{method}.k"] = trial.suggest_categorical(f"{method}.k", list(self._ks(method)))
        return Candidate(params, self._spec(method, params))


def drafts_by_method(methods: tuple[str, ...], drafts: list[str]) -> dict[str, tuple[str, ...]]:
    """``--draft METHOD=PATH`` goes to METHOD; ``--draft PATH`` to the method its checkpoint is
    for, as ``vllm serve`` infers it (speculators' algorithm, then the architecture). A plain model
    is a draft_model unless the one named method taking drafts is another (the preflight then
    says whether it fits); a checkpoint not readable here goes to that one method."""
    takers = [m for m in methods if m in (*NEEDS_DRAFT, *FIXED_K)]
    result: dict[str, list[str]] = {}
    for draft in drafts:
        method, sep, path = draft.partition("=")
        if sep and method in (*NEEDS_DRAFT, *FIXED_K, "mtp"):
            result.setdefault(method, []).append(path)
            continue
        if missing_local(draft):
            raise UsageError(f"--draft {draft!r} does not exist; pass the path of a checkpoint "
                             "folder or a hub name")
        found = Checkpoint.find(draft)
        plain = "draft_model" if found.readable and found.method is None else None
        if found.method or (plain and (plain in methods or not takers)):
            result.setdefault(found.method or plain, []).append(draft)
        elif len(takers) == 1:
            result.setdefault(takers[0], []).append(draft)
        elif not takers:
            raise UsageError(f"--draft {draft!r}: its config.json is not here or in the local hub "
                             "cache, so its method cannot be told; add --method (e.g. --method eagle3)")
        else:
            raise UsageError(f"--draft {draft!r}: say which method it is for, like "
                             f"--draft draft_model={draft} (methods taking drafts: {', '.join(takers) or 'none'})")
    return {m: tuple(d) for m, d in result.items()}


def block_ks(drafts: dict[str, tuple[str, ...]], configured: dict[str, int]) -> dict[str, int]:
    """Each block drafter's k, read from its checkpoint's block size; ``configured`` (the study
    file's [space.fixed_k]) stands in only where the checkpoint cannot be read here."""
    ks = dict(configured)
    for method in FIXED_K & set(drafts):
        read = {d: k for d in drafts[method] if (k := Checkpoint.find(d).block_k) is not None}
        if len(set(read.values())) > 1:
            raise UsageError(f"the {method} drafts have different block sizes ({read}); k is fixed by "
                             "the block size, so tune them in separate studies")
        if read:
            k = next(iter(read.values()))
            if method in configured and configured[method] != k:
                raise UsageError(f"[space.fixed_k] sets {method} = {configured[method]}, but its "
                                 f"checkpoint was trained for k = {k}; drop the fixed_k entry")
            ks[method] = k
    return ks


def proposal_ks(drafts: dict[str, tuple[str, ...]], ks: tuple[int, ...]) -> tuple[int, ...]:
    """The default k range, reaching the k a speculators checkpoint was trained for: its
    ``proposal_methods`` are the prior for k."""
    trained = [k for method, paths in drafts.items() if method not in FIXED_K for d in paths
               if (k := Checkpoint.find(d).proposal_k)]
    return tuple(range(1, max(trained) + 1)) if trained and max(trained) > max(ks) else ks
