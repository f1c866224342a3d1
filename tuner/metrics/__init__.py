"""Acceptance figures from vLLM's Prometheus counters."""

from tuner.metrics.acceptance import Acceptance, acceptance_between
from tuner.metrics.latency import ServerLatency, latency_between
from tuner.metrics.scrape import SpecCounters, parse_counters, scrape_counters

__all__ = ["Acceptance", "ServerLatency", "SpecCounters", "acceptance_between", "latency_between",
           "parse_counters", "scrape_counters"]
