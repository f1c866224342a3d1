"""What a study will do, from the command line's flags over a TOML study file.

```toml
trials = 12
noise = 0.05
[space]
methods = ["ngram", "draft_model"]
k = "1-6"                      # or [1, 2, 4]
ngram_lookup = ["2-4", "3-5"]
fixed_k = { dflash = 7 }
[space.drafts]
draft_model = ["/models/qwen3-0.6b"]
[server]
cmd = "vllm serve {model}"
args = ["--max-model-len=4096"]
[load]
mode = "concurrency"           # or rate, trace
concurrency = 8
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import UsageError
from tuner.replay import LoadSpec
from tuner.search.answer import DEFAULT_NOISE
from tuner.search.space import DEFAULT_KS, SearchSpace, drafts_by_method, parse_ks, parse_lookup
from tuner.search.study import OptimizeSettings

KEYS = {
    "": {"trials", "noise", "space", "server", "load"},
    "space": {"methods", "k", "ngram_lookup", "fixed_k", "drafts"},
    "server": {"cmd", "args"},
    "load": {"mode", "concurrency", "rate", "time_scale"},
}


@dataclass(frozen=True)
class StudyPlan:
    space: SearchSpace
    load: LoadSpec
    server_cmd: str | None
    server_args: list[str]
    options: OptimizeSettings


def load_study_file(path: Path) -> dict[str, Any]:
    """Read a TOML study file; unknown keys are refused so that a typo is not silently ignored."""
    try:
        with path.open("rb") as handle:
            study = tomllib.load(handle)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such study file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    for section, allowed in KEYS.items():
        table = study.get(section, {}) if section else study
        if not isinstance(table, dict):
            raise UsageError(f"{path}: [{section}] must be a table")
        unknown = sorted(set(table) - allowed)
        if unknown:
            where = f"[{section}]" if section else "the top level"
            raise UsageError(f"{path}: unknown key '{unknown[0]}' in {where} (known: {', '.join(sorted(allowed))})")
    return study


def _ks(value: Any) -> tuple[int, ...]:
    if isinstance(value, list):
        return parse_ks(",".join(str(v) for v in value))
    return parse_ks(str(value))


def plan_study(
    study_file: Path | None = None, *, methods: list[str] | None = None, drafts: list[str] | None = None,
    k: str | None = None, ngram_lookup: list[str] | None = None, load: str | None = None,
    concurrency: int | None = None, rate: float | None = None, time_scale: float | None = None,
    seed: int = 0, server_cmd: str | None = None, server_args: list[str] | None = None,
    trials: int | None = None, noise: float | None = None,
) -> StudyPlan:
    """Flags win over the study file; the file wins over the defaults."""
    study = load_study_file(study_file) if study_file else {}
    space_cfg, server_cfg, load_cfg = (study.get(x, {}) for x in ("space", "server", "load"))
    chosen = tuple(methods or space_cfg.get("methods") or ("ngram",))
    by_method = drafts_by_method(chosen, drafts) if drafts else {
        m: tuple(d) for m, d in space_cfg.get("drafts", {}).items() if m in chosen}
    space = SearchSpace(
        methods=chosen,
        ks=parse_ks(k) if k else _ks(space_cfg["k"]) if "k" in space_cfg else DEFAULT_KS,
        drafts=by_method,
        ngram_lookup=tuple(parse_lookup(x) for x in ngram_lookup or space_cfg.get("ngram_lookup") or ["2-4"]),
        fixed_k=dict(space_cfg.get("fixed_k", {})),
    )
    load_spec = LoadSpec(
        load or load_cfg.get("mode", "concurrency"),  # type: ignore[arg-type]
        concurrency or load_cfg.get("concurrency", 1), rate or load_cfg.get("rate"),
        time_scale or load_cfg.get("time_scale", 1.0), seed,
    )
    options = OptimizeSettings(
        trials=trials or study.get("trials", 20),
        noise=noise if noise is not None else study.get("noise", DEFAULT_NOISE), seed=seed,
    )
    if options.trials < 1:
        raise UsageError(f"--trials must be >= 1, got {options.trials}")
    return StudyPlan(space, load_spec, server_cmd or server_cfg.get("cmd"),
                     list(server_args or server_cfg.get("args", [])), options)
