"""The `vllm serve` line a user can paste: the server arguments of production, not of tuning."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

# Arguments that make a tuning run cheaper or possible here but would change production:
# CUDA graphs off, dummy weights, a shortened context, and what the tuner sets per trial.
TUNING_ONLY_FLAGS = ("--enforce-eager",)
TUNING_ONLY_OPTIONS = ("--load-format", "--max-model-len", "--port", "--host")


def _option(arg: str) -> str:
    return arg.split("=", 1)[0]


def production_args(server_args: Sequence[str], keep: Sequence[str] = ()) -> list[str]:
    """``server_args`` without the tuning-only ones, unless the same argument is in ``keep``
    (marked ``--deploy-arg``). Both ``--opt=value`` and ``--opt value`` forms are understood."""
    kept = set(keep)
    out: list[str] = []
    args = list(server_args)
    i = 0
    while i < len(args):
        arg = args[i]
        name = _option(arg)
        takes_next = name in TUNING_ONLY_OPTIONS and "=" not in arg and i + 1 < len(args)
        group = args[i:i + 2] if takes_next else [arg]
        tuning = name in TUNING_ONLY_FLAGS or name in TUNING_ONLY_OPTIONS
        if not tuning or arg in kept or " ".join(group) in kept:
            out += group
        i += len(group)
    return out


def serve_command(model: str, config: dict[str, Any] | None, args: Sequence[str]) -> str:
    argv = ["vllm", "serve", model]
    if config is not None:
        argv += ["--speculative-config", json.dumps(config, sort_keys=True)]
    return shlex.join(argv + list(args))
