"""`tuner optimize --time-limit`: an answer by a given time. The study starts no server whose
trial would end after the limit, judged by the longest trial of this run; the answer is then
the best of what was measured, and the same command goes on with the study."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

@dataclass
class TimeLimit:
    """Whether another server start fits before ``seconds`` have passed since ``began`` (a
    ``clock`` reading; default: when this was made).
    The first start of a run is always made (before it, nothing says how long one takes, and
    without a measured baseline there is no answer); with no limit every start fits."""

    seconds: float | None
    clock: Callable[[], float] = time.monotonic
    began: float | None = None
    longest_trial_s: float | None = None
    reached: bool = False  # a start was refused

    def __post_init__(self) -> None:
        if self.began is None:
            self.began = self.clock()

    def elapsed_s(self) -> float:
        return self.clock() - self.began

    def allows_start(self) -> bool:
        if self.seconds is None or self.longest_trial_s is None:
            return True
        if self.elapsed_s() + self.longest_trial_s <= self.seconds:
            return True
        self.reached = True
        return False

    @contextmanager
    def trial(self) -> Iterator[None]:
        """Times one trial, its server's start and stop included."""
        started = self.clock()
        try:
            yield
        finally:
            self.longest_trial_s = max(self.longest_trial_s or 0.0, self.clock() - started)
