"""Print the README's configuration reference: `tuner optimize` flag, study-file key, environment
variable and meaning, read from the Typer app and `tuner/search/plan.py`'s KEYS.

    .venv/bin/python scripts/config_reference.py      # the markdown table, as in README.md

tests/unit/test_readme.py checks that README.md holds exactly this output between the
`config-reference` markers, so a new flag or study key shows up as a failing test.
"""

from __future__ import annotations

import re
import sys

import click
import typer.main

from tuner.cli import app
from tuner.search.plan import KEYS

# optimize's parameter -> the study-file key that sets the same thing (tuner/search/plan.py's
# plan_study: the flag wins over the file). Tables that only group keys are not settings.
STUDY_KEY_OF_PARAM = {
    "method": "space.methods", "draft": "space.drafts", "k": "space.k",
    "ngram_lookup": "space.ngram_lookup", "trials": "trials", "time_limit": "time_limit", "noise": "noise",
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


if __name__ == "__main__":
    sys.stdout.write(markdown())
