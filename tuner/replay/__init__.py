"""Replay: send a workload to a running server and time every request."""

from tuner.replay.client import LoadSpec, RequestResult, replay
from tuner.replay.summary import Percentiles, ReplaySummary, summarize

__all__ = ["LoadSpec", "Percentiles", "ReplaySummary", "RequestResult", "replay", "summarize"]
