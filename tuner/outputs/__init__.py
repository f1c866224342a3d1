"""Where a command's result goes, one way for every command: `--format table` (rich tables and
text on stdout, the default) or `--format json` (one JSON document on stdout); notes and
progress go to stderr either way, so JSON stays parseable. The renderers are
``tuner.outputs.report`` (studies, answers, measurements, schedules) and
``tuner.outputs.workload``."""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console, RenderableType

from tuner.errors import UsageError


class Format(str, enum.Enum):
    table = "table"
    json = "json"


def chosen_format(fmt: Format | None, as_json: bool) -> Format:
    """--format, with --json kept as its alias; the two may not disagree."""
    if as_json and fmt not in (None, Format.json):
        raise UsageError(f"--json and --format {fmt.value} disagree; give one of them")
    return Format.json if as_json else fmt or Format.table


# Piped output (CI logs, `| tee`) gets room for the trials table instead of rich's 80 columns.
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


class Output:
    """One command's output in its chosen format."""

    def __init__(self, fmt: Format) -> None:
        self.format = fmt

    @property
    def json(self) -> bool:
        return self.format is Format.json

    def result(self, data: Callable[[], Any], table: Callable[[], Iterable[RenderableType]]) -> None:
        """The command's result: ``data()`` as JSON, or each of ``table()`` printed."""
        if self.json:
            print(json.dumps(data(), indent=2, default=str))
            return
        for renderable in table():
            console.print(renderable, highlight=False, soft_wrap=True)

    def say(self, text: str) -> None:
        """A line of the result in table form (a count, a path written); JSON leaves it out."""
        if not self.json:
            console.print(text, highlight=False, soft_wrap=True)

    @staticmethod
    def note(text: str) -> None:
        """A warning or remark beside the result: on stderr in every format."""
        err_console.print(text, highlight=False, soft_wrap=True)
