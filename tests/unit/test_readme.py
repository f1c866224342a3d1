"""The README is for users: short, without dated history, and every `tuner` command and flag it
shows exists. The generated reference pages (docs/reference/study-file.md, docs/reference/cli.md)
are what scripts/config_reference.py makes, every relative link of README.md and docs/ reaches a
file (and its #anchor a heading), and no guide page quotes a dated measurement."""

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
DOCS = ROOT / "docs"
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
    assert len(README.splitlines()) <= 200
    assert "2026-" not in README


@pytest.fixture(scope="module")
def config_reference():
    """scripts/config_reference.py, which is a script, not a package module."""
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated_part(page: Path, name: str) -> str:
    shown = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", page.read_text(), re.S)
    assert shown, f"{page.relative_to(ROOT)} lacks the {name} markers"
    return shown.group(1)


def test_the_configuration_reference_is_the_generated_one(config_reference):
    shown = generated_part(config_reference.STUDY_FILE_PAGE, "config-reference")
    assert shown == config_reference.markdown(), "run scripts/config_reference.py --write"


def test_the_cli_reference_is_the_generated_one(config_reference):
    shown = generated_part(config_reference.CLI_PAGE, "cli-reference")
    assert shown == config_reference.cli_markdown(), "run scripts/config_reference.py --write"
    for name in ("measure", "optimize", "best", "workload import", "schedule add", "db upgrade"):
        assert re.search(rf"^## tuner {name}$", shown, re.M), f"no section for tuner {name}"


def test_the_study_request_reference_is_the_generated_one(config_reference):
    shown = generated_part(config_reference.REQUEST_PAGE, "request-reference")
    assert shown == config_reference.request_markdown(), "run scripts/config_reference.py --write"
    for key in ("space.ks", "loads.concurrency", "rules.slos", "run.repeats", "server.deploy_args", "db"):
        assert f"| `{key}` |" in shown, f"no row for {key}"


def test_every_study_key_has_a_row(config_reference):
    keys_shown = {row[1].strip("`") for row in config_reference.rows()}
    assert set(config_reference.study_keys()) <= keys_shown


MARKDOWN_FILES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the file's headings: lower case, punctuation but - and _ dropped,
    spaces as -, a repeated one numbered (-1, -2)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    anchors: set[str] = set()
    for title in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def relative_links(path: Path) -> list[str]:
    """Every link target of the file that is not a URL or a mail address, code blocks and inline
    code left out."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("path", MARKDOWN_FILES, ids=[str(p.relative_to(ROOT)) for p in MARKDOWN_FILES])
def test_every_relative_link_reaches_a_file_and_heading(path):
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_docs_index_links_every_page():
    index = DOCS / "index.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in relative_links(index)}
    pages = {p.resolve() for p in DOCS.rglob("*.md")} - {index.resolve()}
    assert not pages - linked, f"docs/index.md does not link {sorted(str(p.relative_to(ROOT)) for p in pages - linked)}"


def test_no_guide_page_quotes_a_dated_measurement():
    """Dated figures and run logs belong in docs/lab/; a guide links the lab page."""
    dated = [f"{p.relative_to(ROOT)}: {m}" for p in sorted((DOCS / "guide").rglob("*.md"))
             for m in re.findall(r"\b20\d\d-\d\d-\d\d\b", p.read_text())]
    assert not dated, dated
