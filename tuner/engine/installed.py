"""What the serving host has: the installed vLLM's speculative-config schema and the GPU."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

# Read in a child process: importing vLLM takes seconds and pulls in torch, which the tuner
# itself does not need.
# SpeculativeMethod's values: a Literal, or a Union of Literals (flattened).
_FLAT_TYPES = r"""
def flat(tp):
    args = typing.get_args(tp)
    return [a for x in args for a in (flat(x) if typing.get_args(x) else [x])] if args else [tp]
"""
_INTROSPECT = r"""
import dataclasses, json, typing
from vllm.config import speculative
""" + _FLAT_TYPES + r"""
print(json.dumps({"methods": sorted(set(flat(speculative.SpeculativeMethod))),
                  "fields": sorted(f.name for f in dataclasses.fields(speculative.SpeculativeConfig))}))
"""


def cache_file() -> Path:
    """Where the answers of the probes below are kept between runs ($TUNER_CACHE_DIR, else the
    user's cache folder)."""
    folder = os.environ.get("TUNER_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specdec-tuner"
    return Path(folder) / "vllm-probes.json"


def _installed_vllm_key() -> str | None:
    """Names the installed vLLM without importing it: its package file and when it was written, so
    that an upgrade or a reinstall is a new key. None where no vLLM is installed."""
    try:
        spec = importlib.util.find_spec("vllm")
        origin = spec.origin if spec else None
        return f"{sys.executable}|{origin}|{os.stat(origin).st_mtime_ns}" if origin else None
    except (ImportError, ValueError, OSError):
        return None


def _probe(name: str, code: str, *args: str):
    """What ``code`` prints (JSON) in a child process that imports vLLM, or None. Importing vLLM
    costs 10-15 s on a CPU host, and every tuner command asks: an answer for the same installed
    vLLM is read from the cache file instead (only answers, never a failure, are kept)."""
    key = _installed_vllm_key()
    entry = f"{name}({','.join(args)})"
    path = cache_file()
    try:
        cached = json.loads(path.read_text()).get(key, {}) if key else {}
    except (OSError, ValueError, AttributeError):
        cached = {}
    if entry in cached:
        return cached[entry]
    try:
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        answer = json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        return None
    if key and answer is not None:
        _remember(path, key, entry, answer)
    return answer


def _remember(path: Path, key: str, entry: str, answer) -> None:
    try:
        known = json.loads(path.read_text())
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    known[key] = {**(known.get(key) if isinstance(known.get(key), dict) else {}), entry: answer}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(known, indent=1))
        os.replace(scratch, path)  # whole or not at all, also beside another tuner writing it
    except OSError:
        pass  # a read-only home: the probe runs again next time


@lru_cache(maxsize=1)
def installed_vllm_schema() -> dict[str, list[str]] | None:
    """Methods and SpeculativeConfig fields of the vLLM installed beside the tuner, or None."""
    return _probe("schema", _INTROSPECT)


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
    return _probe("aux_hidden_states", _AUX_SUPPORT, architecture)


_SYNTHETIC_SAMPLER = r"""
import json
from vllm.platforms import current_platform
refused = None
if current_platform.is_cpu():
    try:
        from vllm.utils import cpu_triton_utils as cpu
        cpu._rejection_greedy_sample_kernel_impl(None, None, None, None, None, None, 1, SYNTHETIC_MODE=True)
    except AssertionError as exc:
        refused = str(exc) or "its sampler asserts against synthetic mode"
    except Exception:
        pass
print(json.dumps({"refused": refused}))
"""


_PER_REQUEST_SPEC_METRICS = r"""
import dataclasses, json
from vllm.config.observability import ObservabilityConfig
print(json.dumps(any(f.name == "per_request_spec_decode_metrics" for f in dataclasses.fields(ObservabilityConfig))))
"""


# vLLM decides which model runner a server uses inside VllmConfig, which needs the model; but where
# it has no Triton (the CPU build) or VLLM_USE_V2_MODEL_RUNNER=0 it is always Model Runner V1, and
# which speculative features V1 refuses is vLLM's own list, asked here of every method with and
# without adaptive verification (the other inputs of that list set to a plain single-GPU server).
_RUNNER_V1 = r"""
import dataclasses, json, types, typing
from vllm import envs
from vllm.config import speculative
from vllm.config.vllm import VllmConfig
from vllm.triton_utils import HAS_TRITON
forced = envs.VLLM_USE_V2_MODEL_RUNNER
why = "VLLM_USE_V2_MODEL_RUNNER=0" if forced is False else None if forced or HAS_TRITON else "this vLLM has no Triton"
""" + _FLAT_TYPES + r"""
adaptive = any(f.name == "enable_adaptive_verification" for f in dataclasses.fields(speculative.SpeculativeConfig))
refused = {}
for method in sorted(set(flat(speculative.SpeculativeMethod))) if why else ():
    for verify in ("fixed", "adaptive") if adaptive else ("fixed",):
        ns = types.SimpleNamespace
        config = ns(parallel_config=ns(prefill_context_parallel_size=1, pipeline_parallel_size=1,
                                       enable_batch_sharded_sampling=False),
                    scheduler_config=ns(async_scheduling=False), model_config=None,
                    speculative_config=ns(method=method, enable_adaptive_verification=verify == "adaptive"),
                    _dflash_needs_multi_kv_group=lambda: False, _is_dflash_candidate_draft=lambda: False)
        unsupported = VllmConfig._get_v1_model_runner_unsupported_features(config)
        if unsupported:
            refused[f"{method} {verify}"] = "Model Runner V1 does not support: " + ", ".join(unsupported)
print(json.dumps({"why_v1": why, "refused": refused}))
"""


def refused_at_start(method: str, adaptive: bool) -> str | None:
    """vLLM's own reason for refusing this speculative method (with adaptive verification or not)
    at start, where the installed vLLM can only run Model Runner V1; None where it would start it
    or cannot be asked (vLLM's layout changed: the start itself then says). Asked once, cached."""
    # The environment variable goes into the cache key: it changes the answer.
    answer = _probe("runner_v1", _RUNNER_V1, os.environ.get("VLLM_USE_V2_MODEL_RUNNER", ""))
    if not isinstance(answer, dict) or not answer.get("why_v1"):
        return None
    reason = answer.get("refused", {}).get(f"{method} {'adaptive' if adaptive else 'fixed'}")
    return f"{reason} (vLLM runs Model Runner V1 here: {answer['why_v1']})" if reason else None


def per_request_spec_metrics() -> bool:
    """Whether the installed vLLM reports each request's acceptance in its response
    (``--per-request-spec-decode-metrics``, vLLM >= 0.29); asked once and cached."""
    return _probe("per_request_spec_metrics", _PER_REQUEST_SPEC_METRICS) is True


def synthetic_sampler_refusal() -> str | None:
    """Why the installed vLLM's sampler refuses synthetic acceptance (the CPU build asserts
    against it at the first request), asked of its kernel once and cached; None where it runs
    or vLLM cannot be asked."""
    answer = _probe("synthetic_sampler", _SYNTHETIC_SAMPLER)
    return answer.get("refused") if isinstance(answer, dict) else None
