"""Replay: send a workload to a running server and time every request."""

from tuner.replay.client import LoadSpec, RequestResult, first_different_token, replay
from tuner.replay.summary import Percentiles, ReplaySummary, summarize

__all__ = ["LoadSpec", "Percentiles", "ReplaySummary", "RequestResult", "first_different_token", "replay",
           "summarize"]
