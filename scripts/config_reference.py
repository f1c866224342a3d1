"""The generated reference pages: `tuner optimize`'s flags with their study-file keys and
environment variables (docs/reference/study-file.md), and every command's options
(docs/reference/cli.md), read from the Typer app and `tuner/plan/study_plan.py`'s KEYS, and
the keys of the stored study request (docs/reference/study-request.md), read from its model.

    .venv/bin/python scripts/config_reference.py          # the study-file table, on stdout
    .venv/bin/python scripts/config_reference.py --cli    # the CLI reference, on stdout
    .venv/bin/python scripts/config_reference.py --write  # all three, into their pages

Each page holds its generated part between `<!-- NAME:start -->` and `<!-- NAME:end -->`
markers (`config-reference` and `cli-reference`); the prose around them is written by hand.
tests/unit/test_readme.py checks that the pages hold exactly this output, so a new flag, command
or study key shows up as a failing test.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click
import typer.main

from tuner.cli import app
from tuner.plan.request import StudyRequest
from tuner.plan.study_plan import KEYS

# optimize's parameter -> the study-file key that sets the same thing (tuner/plan/study_plan.py's
# plan_study: the flag wins over the file). Tables that only group keys are not settings.
STUDY_KEY_OF_PARAM = {
    "method": "space.methods", "draft": "space.drafts", "k": "space.k",
    "ngram_lookup": "space.ngram_lookup", "adaptive_verification": "space.adaptive_verification",
    "trials": "trials", "time_limit": "time_limit", "noise": "noise",
    "strategy": "strategy", "slo": "slo", "max_output_change": "max_output_change",
    "allow_output_change": "allow_output_change", "near_tie_margin": "near_tie_margin",
    "server_cmd": "server.cmd",
    "server_arg": "server.args", "deploy_arg": "server.deploy_args", "load": "load.mode",
    "concurrency": "load.concurrency", "rate": "load.rate", "time_scale": "load.time_scale",
}
GROUPS = {"space", "server", "load", "drafts"}


def study_keys() -> list[str]:
    """Every settable study-file key, dotted by its table: 'space.k', 'trials'."""
    keys = [f"{section}.{key}" if section else key
            for section, allowed in KEYS.items() for key in sorted(allowed)]
    return [k for k in keys if k not in GROUPS or "." in k]


def optimize_command() -> click.Command:
    return typer.main.get_command(app).commands["optimize"]  # type: ignore[attr-defined]


def env_var(param: click.Parameter, help_text: str) -> str:
    """The option's envvar, or the one its help names ('(env TUNER_DB; ...)')."""
    if getattr(param, "envvar", None):
        return str(param.envvar)
    found = re.search(r"env (TUNER_[A-Z_]+)", help_text)
    return found.group(1) if found else ""


def first_sentence(text: str) -> str:
    """The help's first sentence, less the '(env X; ' the environment column already says."""
    text = re.sub(r"\s*\(env TUNER_[A-Z_]+\)", "", text)
    text = re.sub(r"\(env TUNER_[A-Z_]+;\s*", "(", text)
    sentence = re.split(r"(?<=\.)\s", " ".join(text.split()), maxsplit=1)[0].rstrip(".")
    return sentence.replace("|", "\\|")


def rows() -> list[tuple[str, str, str, str]]:
    """(flag, study key, env var, meaning) for every option a study file or the
    environment can also set, then the study keys without a flag."""
    command = optimize_command()
    params = {p.name: p for p in command.params if p.param_type_name == "option"}
    unknown = set(STUDY_KEY_OF_PARAM) - set(params)
    if unknown:
        raise SystemExit(f"STUDY_KEY_OF_PARAM names options optimize lacks: {sorted(unknown)}")
    stale = set(STUDY_KEY_OF_PARAM.values()) - set(study_keys())
    if stale:
        raise SystemExit(f"STUDY_KEY_OF_PARAM names study keys plan.py lacks: {sorted(stale)}")
    table = []
    for name, param in params.items():
        help_text = param.help or ""
        key, env = STUDY_KEY_OF_PARAM.get(name, ""), env_var(param, help_text)
        if key or env or name == "study_file":
            flag = " / ".join(f"`{o}`" for o in param.opts + param.secondary_opts)
            table.append((flag, f"`{key}`" if key else "", f"`{env}`" if env else "",
                          first_sentence(help_text)))
    mapped = set(STUDY_KEY_OF_PARAM.values())
    for key in study_keys():
        if key not in mapped:
            table.append(("", f"`{key}`", "", "study file only (`[space.fixed_k]`: a block drafter's k "
                          "where its checkpoint does not say)" if key == "space.fixed_k" else "study file only"))
    return table


def markdown() -> str:
    lines = ["| flag (`tuner optimize`) | study file key | environment | meaning |",
             "| --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows()]
    return "\n".join(lines) + "\n"


ROOT = Path(__file__).resolve().parents[1]
STUDY_FILE_PAGE = ROOT / "docs" / "reference" / "study-file.md"
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"
REQUEST_PAGE = ROOT / "docs" / "reference" / "study-request.md"


def _type_name(annotation) -> str:
    return _cell(str(annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
                 .replace("pathlib.", "").replace("NoneType", "None"))


def request_markdown() -> str:
    """Every key of the stored StudyRequest, part by part, with its type, default and meaning."""
    from pydantic import BaseModel

    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                walk(kind, f"{prefix}{name}.")
                continue
            default = "required" if field.is_required() else f"`{field.get_default(call_default_factory=True)!r}`"
            lines.append(f"| `{prefix}{name}` | `{_type_name(kind)}` | {_cell(default)} | "
                         f"{_cell(field.description or '')} |")

    walk(StudyRequest, "")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _commands(command: click.Command, path: tuple[str, ...]):
    """(path, command) for every command under `command`, depth first, in the app's order."""
    subs = getattr(command, "commands", None)
    if subs is None:
        yield path, command
        return
    for name, sub in subs.items():
        yield from _commands(sub, (*path, name))


def cli_markdown() -> str:
    """Every `tuner` command: its help, and a table of its arguments and options."""
    root = typer.main.get_command(app)
    lines: list[str] = []
    for path, command in _commands(root, ("tuner",)):
        lines += [f"## {' '.join(path)}", ""]
        help_text = (command.help or "").strip()
        if help_text:
            paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", help_text) if p.strip()]
            for paragraph in paragraphs:
                lines += [paragraph.replace("\b", "").strip(), ""]
        rows = []
        for param in command.params:
            if param.param_type_name == "argument":
                name = f"`{(param.metavar or param.name or '').upper()}`"
                rows.append((name, "argument" + ("" if param.required else ", optional")))
            elif param.param_type_name == "option" and not getattr(param, "hidden", False):
                names = " / ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
                rows.append((names, _cell(param.help or "")))
        if rows:
            lines += ["| option | meaning |", "| --- | --- |"]
            lines += [f"| {name} | {meaning} |" for name, meaning in rows]
            lines.append("")
    return "\n".join(lines)


def replace_between(text: str, name: str, generated: str) -> str:
    """`text` with the part between `<!-- name:start -->` and `<!-- name:end -->` set to `generated`."""
    pattern = re.compile(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"the page lacks the {name} markers")
    return pattern.sub(lambda m: m.group(1) + generated + m.group(2), text)


def write_pages() -> None:
    for page, name, generated in ((STUDY_FILE_PAGE, "config-reference", markdown()),
                                  (CLI_PAGE, "cli-reference", cli_markdown()),
                                  (REQUEST_PAGE, "request-reference", request_markdown())):
        page.write_text(replace_between(page.read_text(), name, generated))


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write_pages()
    elif "--cli" in sys.argv[1:]:
        sys.stdout.write(cli_markdown())
    else:
        sys.stdout.write(markdown())
