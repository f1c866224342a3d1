"""Workloads: the captured traffic that a measurement replays."""

from tuner.workload.loader import load_workload
from tuner.workload.model import Request, Workload

__all__ = ["Request", "Workload", "load_workload"]
