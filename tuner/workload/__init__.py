"""Workloads: the captured traffic that a measurement replays."""

from tuner.workload.loader import load_workload
from tuner.workload.model import Request, Workload
from tuner.workload.writer import request_line, write_line, write_workload

__all__ = ["Request", "Workload", "load_workload", "request_line", "write_line", "write_workload"]
