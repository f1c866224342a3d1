"""Acceptance figures from vLLM's Prometheus counters."""

from tuner.metrics.acceptance import Acceptance, acceptance_between
from tuner.metrics.scrape import SpecCounters, parse_counters, scrape_counters

__all__ = ["Acceptance", "SpecCounters", "acceptance_between", "parse_counters", "scrape_counters"]
