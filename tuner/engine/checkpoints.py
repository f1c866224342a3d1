"""What a model or drafter checkpoint says about itself, read from its files without loading it.

A checkpoint is a local folder or a hub name. A hub name is read from the local hub cache only
(the tuner never downloads): when its config is not there, ``config`` is None and the callers say
that their check was skipped.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

# speculators' algorithm names -> vLLM's method (as vLLM's speculators loader maps them).
SPECULATORS_METHODS = {"eagle3": "eagle3", "peagle": "eagle3", "eagle": "eagle", "dflash": "dflash",
                       "dflash2": "dflash", "dspark": "dspark", "mlp_speculator": "mlp_speculator"}
BLOCK_METHODS = frozenset({"dflash", "dspark"})


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _hub_cached(name: str, filename: str) -> Path | None:
    """``filename`` of hub repo ``name`` from the local hub cache, or None."""
    try:
        from huggingface_hub import try_to_load_from_cache
        found = try_to_load_from_cache(name, filename)
    except Exception:  # not a valid repo id, or no hub client: nothing cached either way
        return None
    return Path(found) if isinstance(found, str) else None


def looks_local(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or Path(name).expanduser().exists()


def missing_local(name: str) -> bool:
    """A path (not a hub name) that names nothing on this host."""
    return looks_local(name) and not Path(name).expanduser().exists()


@dataclass(frozen=True)
class Checkpoint:
    """``name`` as the user gave it; ``folder`` where its files were found (None: not readable
    offline)."""

    name: str
    folder: Path | None

    @classmethod
    def find(cls, name: str) -> Checkpoint:
        path = Path(name).expanduser()
        if (path / "config.json").is_file():
            return cls(name, path)
        cached = _hub_cached(name, "config.json") if not looks_local(name) else None
        return cls(name, cached.parent if cached else None)

    @cached_property
    def config(self) -> dict | None:
        return _read_json(self.folder / "config.json") if self.folder else None

    @property
    def readable(self) -> bool:
        return self.config is not None

    def get(self, key: str, default: Any = None) -> Any:
        """A key of the config, or of the layer config a speculators checkpoint nests it in."""
        config = self.config or {}
        if key in config:
            return config[key]
        return (config.get("transformer_layer_config") or {}).get(key, default)

    @property
    def speculators(self) -> dict:
        return (self.config or {}).get("speculators_config") or {}

    @property
    def architectures(self) -> list[str]:
        return list(self.get("architectures") or [])

    @property
    def num_layers(self) -> int | None:
        return self.get("num_hidden_layers")

    # --- drafters -------------------------------------------------------------------------

    @property
    def method(self) -> str | None:
        """The speculative method this drafter is for, as ``vllm serve <speculator>`` infers it:
        speculators' algorithm first, then the architecture, and for a checkpoint not readable
        here its name (``...EAGLE3...``); None for a plain model (a draft_model) or no clue."""
        algorithm = (self.config or {}).get("speculators_model_type") or self.speculators.get("algorithm")
        if algorithm in SPECULATORS_METHODS:
            return SPECULATORS_METHODS[algorithm]
        names = " ".join(self.architectures).lower()
        for needle, method in (("eagle3", "eagle3"), ("dspark", "dspark"), ("dflash", "dflash"),
                               ("eagle", "eagle"), ("medusa", "medusa"), ("mtp", "mtp")):
            if needle in names:
                return method
        if (self.config or {}).get("model_type") in ("medusa", "mlp_speculator"):
            return self.config["model_type"]
        if self.config is None:  # not readable here: the name, as vLLM guesses it too
            name = self.name.lower()
            for needle, method in (("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark"),
                                   ("eagle-", "eagle")):
                if needle in name:
                    return method
        return None

    @property
    def block_size(self) -> int | None:
        """A block drafter's trained block size (DFlash, DSpark), from its config."""
        config = self.config or {}
        for table in (config, config.get("dflash_config") or {}, config.get("transformer_layer_config") or {}):
            for key in ("block_size", "dspark_block_size"):
                if isinstance(table.get(key), int) and not isinstance(table.get(key), bool):
                    return table[key]
        return None

    @property
    def proposal_k(self) -> int | None:
        """The k a speculators checkpoint was trained for (its first proposal method's)."""
        methods = self.speculators.get("proposal_methods") or []
        k = methods[0].get("speculative_tokens") if methods and isinstance(methods[0], dict) else None
        return k if isinstance(k, int) and k >= 1 else None

    @property
    def verifier(self) -> dict:
        """The target a speculators checkpoint names: ``name_or_path`` and ``architectures``."""
        return self.speculators.get("verifier") or {}

    @property
    def aux_layer_ids(self) -> list[int] | None:
        """Target layers whose hidden states the drafter reads (EAGLE-3, DFlash, DSpark)."""
        config = self.config or {}
        for value in (config.get("eagle_aux_hidden_state_layer_ids"),
                      (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids"),
                      config.get("aux_hidden_state_layer_ids")):
            if value:
                return list(value)
        dflash = (config.get("dflash_config") or {}).get("target_layer_ids") or config.get("dspark_target_layer_ids")
        return [i + 1 for i in dflash] if dflash else None  # DFlash counts from 0 = after layer 1

    @cached_property
    def tensor_shapes(self) -> dict[str, list[int]]:
        """Tensor name -> shape over the checkpoint's safetensors files, read from their headers."""
        shapes: dict[str, list[int]] = {}
        for path in sorted(self.folder.glob("*.safetensors")) if self.folder else ():
            try:
                with path.open("rb") as handle:
                    (size,) = struct.unpack("<Q", handle.read(8))
                    header = json.loads(handle.read(size))
            except (OSError, ValueError, struct.error):
                continue
            shapes.update({name: info["shape"] for name, info in header.items() if name != "__metadata__"})
        return shapes

    def tensor(self, name: str):
        """One tensor as a numpy array (the small vocabulary maps), or None."""
        for path in sorted(self.folder.glob("*.safetensors")) if self.folder else ():
            try:
                from safetensors import safe_open
                with safe_open(str(path), framework="numpy") as handle:
                    if name in handle.keys():
                        return handle.get_tensor(name)
            except Exception:  # an unreadable file is reported by the server; nothing to check here
                continue
        return None

    @property
    def block_k(self) -> int | None:
        """The k a block drafter runs at: a speculators checkpoint's trained k; else DSpark drafts
        its whole block, and DFlash's first block position is the anchor (the token already
        sampled), so a block of n drafts n - 1 (z-lab's b16 checkpoints run at k = 15)."""
        if self.proposal_k is not None:
            return self.proposal_k
        size = self.block_size
        if size is None:
            return None
        if self.method == "dflash" and not (self.config or {}).get("sample_from_anchor", False):
            return size - 1
        return size
