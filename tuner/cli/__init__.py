"""The ``tuner`` command: parse options, call one function, print the result. The app and its
error handling are in ``app``, the options in ``options``, the commands in ``study`` (measure,
optimize, worker, best), ``traffic`` (capture, workload) and ``service`` (schedules, serve,
dashboard, db)."""

from tuner.cli import study, traffic, service  # noqa: F401,I001  (each registers its commands, in --help order)
from tuner.cli.app import app, main

__all__ = ["app", "main"]
