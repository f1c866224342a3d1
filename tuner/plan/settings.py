"""What a study is asked to decide under: its search settings and rules (``OptimizeSettings``),
its name, and the --time-limit read as seconds. The study loop (``tuner.study.loop``) runs under
them; planning (``tuner.plan.study_plan``) builds them from flags and the study file."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.decide.answer import DEFAULT_NOISE
from tuner.decide.output_check import NEAR_TIE_MARGIN
from tuner.decide.slo import Slo
from tuner.errors import UsageError

STRATEGIES = ("guided", "tpe", "grid")
DEFAULT_Z = 1.28  # guided: "plausibly better" is a one-sided 90 % bound


@dataclass(frozen=True)
class OptimizeSettings:
    trials: int = 20  # most configurations measured (server restarts), baseline included
    noise: float = DEFAULT_NOISE
    seed: int = 0
    strategy: str = "guided"
    slos: tuple[Slo, ...] = ()
    warm_start: bool = True
    name: str | None = None  # the Optuna study; default "model | workload type | load"
    z: float = DEFAULT_Z  # guided: how many standard deviations count as "plausibly better"
    # A worker joining a study others run (`tuner worker`): it leaves their running trials alone
    # (only stale ones are failed), and the creator alone measures the final k by batch size.
    join: bool = False
    # Share of greedy requests a config may change and still be chosen (GPUs may flip near-ties);
    # allow_output_change: chosen whatever it changed, with a warning.
    max_output_change: float = 0.0
    allow_output_change: bool = False
    # A divergence where the baseline's top two candidates were closer than this in
    # log-probability is a numeric near-tie, not a change (tuner/decide/output_check.py).
    near_tie_margin: float = NEAR_TIE_MARGIN
    # Server arguments of production, kept in the answer's `vllm serve` line (--deploy-arg).
    deploy_args: tuple[str, ...] = ()
    # --time-limit: no server start whose trial would end later than this after the run began.
    time_limit_s: float | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise UsageError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.trials < 1:
            raise UsageError(f"--trials must be >= 1, got {self.trials}")
        if not 0 <= self.max_output_change <= 1:
            raise UsageError(f"--max-output-change must be between 0 and 1, got {self.max_output_change}")
        if self.time_limit_s is not None and self.time_limit_s <= 0:
            raise UsageError(f"--time-limit must be more than 0 seconds, got {self.time_limit_s}")
        if self.near_tie_margin < 0:
            raise UsageError(f"--near-tie-margin must be >= 0 (0: every divergence is a change), "
                             f"got {self.near_tie_margin}")

    @property
    def output_rule(self) -> float | None:
        """The allowed share of changed greedy requests; None: any (--allow-output-change)."""
        return None if self.allow_output_change else self.max_output_change


def study_name(model: str, workload_type: str, load_label: str) -> str:
    return f"{model} | {workload_type} | {load_label}"


_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def parse_time_limit(text: str | int | float) -> float:
    """Seconds from "600", "600s", "10m" or "1.5h" (a study file may give a number)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(s|m|min|h)?\s*", str(text))
        if match is None:
            raise UsageError(f"--time-limit must be a duration like 600, 600s, 10m or 1h, got {text!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or ""]
    if seconds <= 0:
        raise UsageError(f"--time-limit must be more than 0 seconds, got {text!r}")
    return seconds
