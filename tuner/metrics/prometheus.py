"""Live acceptance per served model and workload type, read from a Prometheus server.

PromQL over vLLM's spec-decode counters, summed per ``model_name`` (the served model name) and
``workload_type`` (a label the operator puts on the scrape target; see docs/guide/drift.md):

    rate   = increase(accepted tokens) / increase(draft tokens)
    length = 1 + increase(accepted tokens) / increase(drafts)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tuner.errors import TunerError
from tuner.metrics.scrape import ACCEPTED, DRAFT_TOKENS, DRAFTS

TYPE_LABEL = "workload_type"  # on the scrape target (Prometheus' scrape config), value = the tuned type


@dataclass(frozen=True)
class LiveAcceptance:
    rate: float
    length: float


# model_name -> workload_type label ("" where the series has none) -> figures
Live = dict[str, dict[str, LiveAcceptance]]


def queries(window_s: float) -> dict[str, str]:
    w = f"[{max(1, round(window_s))}s]"

    def total(metric: str) -> str:
        return f"sum by (model_name, {TYPE_LABEL}) (increase({metric}{w}))"

    return {"rate": f"{total(ACCEPTED)} / {total(DRAFT_TOKENS)}",
            "length": f"1 + {total(ACCEPTED)} / {total(DRAFTS)}"}


class PrometheusSource:
    """Live acceptance per model_name and workload_type from a Prometheus server
    (prometheus-api-client)."""

    def __init__(self, url: str, window_s: float):
        from prometheus_api_client import PrometheusConnect

        self.url = url
        self.window_s = window_s
        self.client = PrometheusConnect(url=url, disable_ssl=True)

    def read(self) -> Live:
        values: dict[tuple[str, str], dict[str, float]] = {}
        for name, query in queries(self.window_s).items():
            try:
                result = self.client.custom_query(query=query)
            except Exception as exc:  # the client raises its own, requests' and JSON errors
                raise TunerError(f"cannot query Prometheus at {self.url} ({exc.__class__.__name__}: "
                                 f"{exc}); check --prometheus") from None
            for series in result:
                value = float(series["value"][1])
                if math.isfinite(value):
                    labels = series["metric"]
                    key = (labels.get("model_name", ""), labels.get(TYPE_LABEL, ""))
                    values.setdefault(key, {})[name] = value
        live: Live = {}
        for (model, workload_type), v in values.items():
            if "rate" in v and "length" in v:
                live.setdefault(model, {})[workload_type] = LiveAcceptance(v["rate"], v["length"])
        return live
