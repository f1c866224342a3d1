"""Checks made before any server starts: can this space work with the installed vLLM and
these checkpoints? Each problem is one sentence naming the cause and the fix."""

from __future__ import annotations

import json
from pathlib import Path

from tuner.engine.installed import installed_vllm_schema
from tuner.errors import UsageError
from tuner.search.space import SearchSpace

def _local_config(checkpoint: str) -> dict | None:
    path = Path(checkpoint) / "config.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _looks_local(checkpoint: str) -> bool:
    return checkpoint.startswith(("/", "./", "../", "~")) or Path(checkpoint).exists()


def check_space(space: SearchSpace, model: str, extra_fields: set[str] = frozenset()) -> None:
    """Raise UsageError for the first thing in the space that cannot work."""
    schema = installed_vllm_schema()
    if schema is not None:
        unknown = [m for m in space.methods if m not in schema["methods"]]
        if unknown:
            raise UsageError(f"method '{unknown[0]}' is not known to the installed vLLM "
                             f"(it knows: {', '.join(schema['methods'])}); drop it or upgrade vLLM")
        bad_fields = sorted(extra_fields - set(schema["fields"]))
        if bad_fields:
            raise UsageError(f"'{bad_fields[0]}' is not a speculative-config field of the installed vLLM")
    target = _local_config(model)
    for method, drafts in space.drafts.items():
        for draft in drafts:
            if _looks_local(draft) and not Path(draft).expanduser().exists():
                raise UsageError(f"the {method} draft '{draft}' does not exist; "
                                 "pass the path of a checkpoint folder or a hub name")
            config = _local_config(str(Path(draft).expanduser()))
            if config is None or target is None:
                continue
            draft_vocab = config.get("vocab_size") or config.get("transformer_layer_config", {}).get("vocab_size")
            if method == "draft_model" and draft_vocab and target.get("vocab_size") and draft_vocab != target["vocab_size"]:
                raise UsageError(f"the draft '{draft}' has vocabulary size {draft_vocab} but the target "
                                 f"'{model}' has {target['vocab_size']}; a draft_model must share the "
                                 "target's tokenizer")
            verifier = (config.get("speculators_config") or {}).get("verifier", {}).get("name_or_path")
            if verifier and Path(verifier).name != Path(model.rstrip("/")).name:
                raise UsageError(f"the draft '{draft}' was trained for '{verifier}', not for '{model}'; "
                                 "pick a draft made for this target")
