"""Measuring one configuration: a fresh vLLM server, warm-up, replays, /metrics, marks and the
greedy reference (``tuner.measure.trial``)."""
