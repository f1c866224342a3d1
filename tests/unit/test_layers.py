"""The rooms follow the pipeline (../shared/DESIGN.md): each module imports only rooms below its
own, so no arrow runs back up. Imports only for type checking are left out: they run nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import tuner

# Top to bottom: launchers and outputs, the study loop, planning, proposing, measuring, deciding,
# the parts a trial is made of, then storage.
ROOMS = ["cli", "web", "schedule", "outputs", "study", "propose", "plan", "measure", "decide",
         "engine", "replay", "metrics", "workload", "store", "errors"]
PACKAGE = Path(tuner.__file__).parent


def room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "tuner" else None


def imported(tree: ast.Module) -> list[tuple[str, int]]:
    """(module, line) of every import of a tuner module, outside ``if TYPE_CHECKING:`` blocks."""
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and getattr(node.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
    return found


def arrows_up() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = room_of(".".join(("tuner", *path.relative_to(PACKAGE).with_suffix("").parts)))
        for module, line in imported(ast.parse(path.read_text())):
            target = room_of(module)
            if source in ROOMS and target in ROOMS and ROOMS.index(target) < ROOMS.index(source):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({source} imports {target})")
    return found


def test_every_module_belongs_to_a_room():
    rooms = {room_of(".".join(("tuner", *p.relative_to(PACKAGE).with_suffix("").parts)))
             for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "__init__.py"}
    assert rooms <= set(ROOMS), sorted(rooms - set(ROOMS))


def test_no_room_imports_one_above_it():
    assert arrows_up() == []


def test_the_check_sees_an_arrow_up(tmp_path, monkeypatch):
    """The check itself can fail: a deciding module that imports the study loop is caught."""
    bad = tmp_path / "tuner"
    (bad / "decide").mkdir(parents=True)
    (bad / "decide" / "rule.py").write_text("from tuner.study.loop import optimize\n"
                                            "from typing import TYPE_CHECKING\n"
                                            "if TYPE_CHECKING:\n    from tuner.measure.trial import Measurement\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", bad)
    assert arrows_up() == ["tuner/decide/rule.py:1 (decide imports study)"]
