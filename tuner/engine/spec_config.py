"""The typed speculative config, turned into vLLM's ``--speculative-config`` JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tuner.errors import UsageError

# Methods the tuner knows how to configure. vLLM accepts more (and renames them between
# releases); anything else still reaches vLLM through --spec JSON and fails there if unknown.
METHODS = ("ngram", "draft_model", "eagle", "eagle3", "mtp", "suffix", "dflash", "dspark", "medusa")
# Methods whose drafter is a separate checkpoint that must be named.
NEEDS_DRAFT = frozenset({"draft_model", "eagle", "eagle3", "dflash", "medusa"})
# Methods that take no checkpoint: the draft comes from the prompt or the target itself.
NO_DRAFT = frozenset({"ngram", "suffix"})
# vLLM's adaptive verification (0.28+ for DSpark, 0.30+ for the other drafters).
ADAPTIVE_FIELD = "enable_adaptive_verification"


@dataclass(frozen=True)
class SpecConfig:
    """One speculative configuration: method, draft checkpoint, k and method-specific fields.

    ``extra`` holds any other SpeculativeConfig field (``prompt_lookup_max``, ...), passed as is.
    """

    method: str
    num_speculative_tokens: int
    draft_model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.method, str) or not self.method:
            raise UsageError("the speculative config needs a 'method' (e.g. ngram, draft_model, eagle3)")
        k = self.num_speculative_tokens
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UsageError(f"num_speculative_tokens (k) must be an integer >= 1, got {k!r}")
        if self.method in NEEDS_DRAFT and not self.draft_model:
            raise UsageError(f"method '{self.method}' needs a draft checkpoint: pass --draft PATH_OR_NAME")
        if self.method in NO_DRAFT and self.draft_model:
            raise UsageError(f"method '{self.method}' takes no draft checkpoint: drop --draft")
        reserved = {"method", "num_speculative_tokens", "model"} & set(self.extra)
        if reserved:
            raise UsageError(f"set {sorted(reserved)[0]!r} through the config's own field, not as an extra")

    @property
    def k(self) -> int:
        return self.num_speculative_tokens

    @property
    def adaptive_verification(self) -> bool:
        return bool(self.extra.get(ADAPTIVE_FIELD))

    def to_vllm(self) -> dict[str, Any]:
        """The dict vLLM's SpeculativeConfig takes; ``method`` and k are always explicit."""
        config: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.k}
        if self.draft_model:
            config["model"] = self.draft_model
        config.update(self.extra)
        return config

    def to_json(self) -> str:
        return json.dumps(self.to_vllm(), sort_keys=True)

    @property
    def label(self) -> str:
        draft = f" draft={self.draft_model}" if self.draft_model else ""
        adaptive = " adaptive" if self.adaptive_verification else ""
        return f"{self.method} k={self.k}{adaptive}{draft}"

    @classmethod
    def from_vllm(cls, config: dict[str, Any]) -> SpecConfig:
        """Build from a ``--speculative-config`` dict as vLLM takes it."""
        if not isinstance(config, dict):
            raise UsageError("the speculative config must be a JSON object such as "
                             '{"method": "ngram", "num_speculative_tokens": 4}')
        rest = dict(config)
        method = rest.pop("method", None)
        k = rest.pop("num_speculative_tokens", None)
        if k is None:
            raise UsageError("the speculative config needs 'num_speculative_tokens' (k); "
                             "the tuner always sets it explicitly")
        return cls(method=method, num_speculative_tokens=k, draft_model=rest.pop("model", None),
                   extra=rest)

    @classmethod
    def from_json(cls, text: str) -> SpecConfig:
        try:
            config = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--spec is not valid JSON ({exc.msg} at column {exc.colno}); "
                             'write it like \'{"method": "ngram", "num_speculative_tokens": 4}\'') from None
        return cls.from_vllm(config)
