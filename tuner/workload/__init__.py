"""Workloads: the captured traffic that a measurement replays.

Also here: ``capture`` (the recording proxy), ``importers``, ``stats``, ``sample`` and
``classify`` (``tuner workload split``); import those modules directly.
"""

from tuner.workload.loader import load_workload
from tuner.workload.model import Request, Workload
from tuner.workload.writer import request_line, write_line, write_workload

__all__ = ["Request", "Workload", "load_workload", "request_line", "write_line", "write_workload"]
