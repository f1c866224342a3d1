"""The rich table of `tuner workload stats` (its JSON is ``tuner.workload.stats.stats_dict``)."""

from __future__ import annotations

from rich.table import Table

from tuner.workload.classify import MIXED
from tuner.workload.stats import Distribution, WorkloadStats


def _num(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def _dist(d: Distribution) -> str:
    return (f"min {_num(d.min)}  p50 {_num(d.p50)}  p90 {_num(d.p90)}  p99 {_num(d.p99)}  "
            f"max {_num(d.max)}  mean {d.mean:.1f}")


def stats_table(stats: WorkloadStats) -> Table:
    table = Table(title=f"{stats.path} | {stats.type} ({stats.requests} requests)",
                  title_justify="left")
    table.add_column("figure")
    table.add_column("value")
    table.add_row("chat / completion", f"{stats.chat} / {stats.completion} "
                                       f"({stats.chat_share:.0%} chat)")
    if stats.types:
        types = ", ".join(f"{k} {v}" for k, v in sorted(stats.types.items()))
        table.add_row("per-line type", types)
    guessed = stats.classified.guessed
    if guessed:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(guessed.items()) if k != MIXED)
        table.add_row("guessed type (split)", kinds or "-")
        table.add_row(f"{MIXED} (confidence < {stats.classified.min_confidence:g})",
                      f"{stats.classified.mixed} of {sum(guessed.values())} unlabelled lines")
    table.add_row(f"prompt length ({stats.prompt_unit})", _dist(stats.prompt))
    if stats.output is not None:
        table.add_row(f"output tokens ({stats.output_tokens_given} lines)", _dist(stats.output))
    else:
        table.add_row("output tokens", "no line gives output_tokens")
    if stats.context_mix:
        unit = "tokens" if stats.prompt_unit == "tokens" else "tokens, from characters / 4"
        table.add_row(f"context length mix ({unit}: prompt + output)", "  ".join(
            f"{b['from']}-{b['to'] - 1}: {b['requests']} ({b['share']:.0%})" for b in stats.context_mix))
    if stats.only_max_tokens or stats.no_output_length:
        table.add_row("without output_tokens", f"{stats.only_max_tokens} give only max_tokens, "
                                               f"{stats.no_output_length} neither")
    a = stats.arrivals
    if a is None:
        table.add_row("arrivals", f"missing on {stats.missing_arrivals} of {stats.requests} lines; "
                                  "--load trace needs them on every line")
        return table
    table.add_row("arrival span", f"{a.span_s:.2f} s")
    table.add_row("mean rate", "-" if a.rate_per_s is None else f"{a.rate_per_s:.2f} requests/s")
    if a.bucket_rates:
        rates = " ".join(f"{r:.2f}" for r in a.bucket_rates)
        table.add_row(f"requests/s per {a.bucket_s:.2f} s bucket", rates)
    if a.gap_cv is not None:
        # a band around 1, since a few dozen Poisson gaps rarely give exactly 1
        shape = "bursty" if a.gap_cv > 1.2 else "paced" if a.gap_cv < 0.8 else "Poisson-like"
        table.add_row("gap CV", f"{a.gap_cv:.2f} ({shape}; 1 = Poisson, > 1 bursty)")
    return table
