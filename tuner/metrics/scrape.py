"""Read vLLM's ``/metrics`` text and keep the counters the tuner needs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tuner.errors import MetricsError

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
# Server-side latency histograms, per finished request: the cross-check of the client's own
# timings, which a stalled client (a busy host) can squeeze into one burst.
LATENCY_HISTOGRAMS = {"ttft": "vllm:time_to_first_token_seconds",
                      "tpot": "vllm:request_time_per_output_token_seconds",
                      "e2e": "vllm:e2e_request_latency_seconds"}


@dataclass(frozen=True)
class SpecCounters:
    """Cumulative counter values at one moment, summed over engines.

    ``spec_present`` is False when the server exposes no spec-decode series (no speculation).
    """

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    accepted_per_pos: dict[int, float] = field(default_factory=dict)
    generation_tokens: float = 0.0
    spec_present: bool = False
    # "ttft", "tpot", "e2e" -> (sum of seconds, count of requests) of the server's histograms
    latency: dict[str, tuple[float, float]] = field(default_factory=dict)
    # The same histograms' cumulative buckets: key -> {upper bound (le): requests at or under it}
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)


def parse_counters(text: str) -> SpecCounters:
    """Parse Prometheus exposition text with prometheus_client's own parser."""
    totals: dict[str, float] = defaultdict(float)
    per_pos: dict[int, float] = defaultdict(float)
    sums = {f"{name}_sum": key for key, name in LATENCY_HISTOGRAMS.items()}
    counts = {f"{name}_count": key for key, name in LATENCY_HISTOGRAMS.items()}
    bucket_names = {f"{name}_bucket": key for key, name in LATENCY_HISTOGRAMS.items()}
    latency: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == ACCEPTED_PER_POS:
                    per_pos[int(sample.labels["position"])] += sample.value
                elif sample.name in (DRAFTS, DRAFT_TOKENS, ACCEPTED, GENERATION_TOKENS):
                    totals[sample.name] += sample.value
                elif sample.name in sums:
                    latency[sums[sample.name]][0] += sample.value
                elif sample.name in counts:
                    latency[counts[sample.name]][1] += sample.value
                elif sample.name in bucket_names:
                    buckets[bucket_names[sample.name]][float(sample.labels["le"])] += sample.value
    except (ValueError, KeyError) as exc:
        raise MetricsError(f"the server's /metrics text could not be parsed ({exc})") from None
    spec_present = DRAFTS in totals  # read before the defaultdict lookups below add the key
    return SpecCounters(
        drafts=totals[DRAFTS],
        draft_tokens=totals[DRAFT_TOKENS],
        accepted=totals[ACCEPTED],
        accepted_per_pos=dict(per_pos),
        generation_tokens=totals[GENERATION_TOKENS],
        spec_present=spec_present,
        latency={key: (total, count) for key, (total, count) in latency.items()},
        buckets={key: dict(counts) for key, counts in buckets.items()},
    )


def scrape_counters(base_url: str, timeout_s: float = 10.0) -> SpecCounters:
    try:
        response = httpx.get(f"{base_url}/metrics", timeout=timeout_s)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise MetricsError(f"could not read {base_url}/metrics ({exc}); is the server still up?") from None
    return parse_counters(response.text)
