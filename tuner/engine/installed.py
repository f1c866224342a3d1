"""What the serving host has: the installed vLLM's speculative-config schema and the GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import lru_cache

# Read in a child process: importing vLLM takes seconds and pulls in torch, which the tuner
# itself does not need.
_INTROSPECT = r"""
import dataclasses, json, typing
from vllm.config import speculative
def flat(tp):
    args = typing.get_args(tp)
    return [a for x in args for a in (flat(x) if typing.get_args(x) else [x])] if args else [tp]
print(json.dumps({"methods": sorted(set(flat(speculative.SpeculativeMethod))),
                  "fields": sorted(f.name for f in dataclasses.fields(speculative.SpeculativeConfig))}))
"""


@lru_cache(maxsize=1)
def installed_vllm_schema() -> dict[str, list[str]] | None:
    """Methods and SpeculativeConfig fields of the vLLM installed beside the tuner, or None."""
    try:
        out = subprocess.run([sys.executable, "-c", _INTROSPECT], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        return None


def gpu_name() -> str | None:
    """The first GPU's name where nvidia-smi answers; None on machines without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


_AUX_SUPPORT = r"""
import json, sys
from vllm.model_executor.models.interfaces import supports_eagle3
from vllm.model_executor.models.registry import ModelRegistry
cls = ModelRegistry._try_load_model_cls(sys.argv[1])
print(json.dumps(None if cls is None else bool(supports_eagle3(cls))))
"""


@lru_cache(maxsize=16)
def gives_aux_hidden_states(architecture: str) -> bool | None:
    """Whether the installed vLLM's model class for ``architecture`` hands its intermediate hidden
    states to a drafter (the interface EAGLE-3, DFlash and DSpark read); None where it cannot tell
    (no vLLM here, an architecture it does not know, another vLLM layout)."""
    try:
        out = subprocess.run([sys.executable, "-c", _AUX_SUPPORT, architecture], capture_output=True,
                             text=True, timeout=120, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        return None
