"""The README is for users: short, without dated history, and every `tuner` command and flag it
shows exists; its configuration reference is the one scripts/config_reference.py generates."""

import importlib.util
import re
import shlex
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from tuner.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
ROOT_COMMAND = typer.main.get_command(app)


def code_block_commands() -> list[list[str]]:
    """Every `tuner ...` line of the README's code blocks, continuation lines joined, comments off."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", README, flags=re.S | re.M)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith("tuner "):
                commands.append(shlex.split(line)[1:])
    return commands


def resolve(words: list[str]) -> tuple[list[str], object]:
    """The subcommand path the words name, and its click command."""
    path, command = [], ROOT_COMMAND
    for word in words:
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        path.append(word)
        command = sub
    return path, command


def option_names(command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)}


COMMANDS = code_block_commands()


def test_the_readme_shows_the_main_commands():
    shown = {" ".join(resolve(words)[0]) for words in COMMANDS}
    for name in ("measure", "optimize", "best", "capture", "worker", "serve", "dashboard",
                 "workload import", "schedule add", "db upgrade"):
        assert name in shown


@pytest.mark.parametrize("words", COMMANDS, ids=[" ".join(w[:2]) for w in COMMANDS])
def test_every_command_and_flag_shown_exists(words):
    path, command = resolve(words)
    assert path and not hasattr(command, "commands"), f"`tuner {' '.join(words[:2])}` is no command"
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    known = option_names(command)
    if path == ["schedule", "add"]:  # the options after its own go to `tuner optimize`
        known |= option_names(ROOT_COMMAND.commands["optimize"])
    flags = {w.split("=", 1)[0] for w in words if w.startswith("--")}
    assert flags <= known, f"tuner {' '.join(path)} has no {sorted(flags - known)}"


def test_the_readme_is_short_and_has_no_dated_history():
    assert len(README.splitlines()) <= 250
    assert "2026-" not in README


@pytest.fixture(scope="module")
def config_reference():
    """scripts/config_reference.py, which is a script, not a package module."""
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_is_the_generated_one(config_reference):
    shown = re.search(r"<!-- config-reference:start -->\n(.*?)<!-- config-reference:end -->", README, re.S)
    assert shown, "README.md lacks the config-reference markers"
    assert shown.group(1) == config_reference.markdown(), "run scripts/config_reference.py and paste its table"


def test_every_study_key_has_a_row(config_reference):
    keys_shown = {row[1].strip("`") for row in config_reference.rows()}
    assert set(config_reference.study_keys()) <= keys_shown
