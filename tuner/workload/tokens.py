"""A local tokenizer, for lengths in tokens; nothing is downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.errors import UsageError


def load_tokenizer(path: str) -> Any:
    """transformers' tokenizer from a local model folder, or a UsageError naming the fix."""
    if not Path(path).is_dir():  # a hub name would be downloaded
        raise UsageError(f"--tokenizer {path}: not a folder; pass the local folder of a model "
                         "with tokenizer files (nothing is downloaded)")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UsageError("--tokenizer needs the transformers package (vLLM installs it); "
                         "leave --tokenizer out to count characters") from None
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # transformers raises many types for a bad folder
        raise UsageError(f"--tokenizer {path}: cannot load a tokenizer from it "
                         f"({exc.__class__.__name__}); pass a model folder with tokenizer files") from None
