"""Bad input, fuzzed (hypothesis): workload files, study files and `tuner optimize` options.

Every generated input either loads or ends in one clear sentence: `FILE:LINE: reason` for a
workload, `FILE: reason` for a study file, and `error: ...` with exit code 2 for the command, never
a traceback, and never a database written for input that was refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tuner.cli import app
from tuner.errors import UsageError, WorkloadError
from tuner.plan.study_plan import plan_study
from tuner.workload import load_workload

FIELDS = ["prompt", "messages", "max_tokens", "temperature", "top_p", "seed", "arrival_s", "id",
          "output_tokens", "type", "ignore_eos", "extra"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8)
messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "robot", 3]),
                                           "content": st.text(max_size=20) | st.integers()}), max_size=3)
request_objects = st.dictionaries(st.sampled_from(FIELDS), json_values | messages, max_size=6)
lines = st.one_of(request_objects.map(json.dumps), json_values.map(json.dumps), st.text(max_size=40),
                  st.just(""), st.just('{"prompt": "ok"}'))
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(st.lists(lines, max_size=8))
def test_every_workload_file_loads_or_names_its_bad_lines(tmp_path_factory, file_lines):
    path = tmp_path_factory.mktemp("w") / "fuzz.jsonl"
    path.write_text("\n".join(file_lines), encoding="utf-8")
    try:
        workload = load_workload(path)
    except WorkloadError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert re.match(rf"{re.escape(str(path))}(:\d+: \S|: \.\.\. and \d+ more)", problem), problem
        return
    assert all(r.prompt is not None or r.messages is not None for r in workload.requests)


toml_scalars = st.one_of(st.integers(-5, 100), st.floats(-1, 10, allow_nan=False),
                         st.sampled_from(["1-6", "2,4", "ngram", "draft_model", "guided", "grid", "tpe", "bogus",
                                          "concurrency", "rate", "trace", "tpot_p99_ms<=40", "x<=y", "", "0-0"]),
                         st.booleans())
toml_values = st.one_of(toml_scalars, st.lists(toml_scalars, max_size=3))
SECTIONS = {"": ["trials", "noise", "strategy", "slo", "typo"], "space": ["methods", "k", "ngram_lookup", "fixed_k"],
            "server": ["cmd", "args"], "load": ["mode", "concurrency", "rate", "time_scale"]}


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)  # numbers, and strings (JSON escapes are valid TOML basic strings)


@st.composite
def study_files(draw) -> str:
    if draw(st.booleans()):
        return draw(st.text(max_size=60))  # anything at all, mostly not TOML
    out = []
    for section, keys in SECTIONS.items():
        chosen = draw(st.lists(st.sampled_from(keys), unique=True, max_size=3))
        if section and chosen:
            out.append(f"[{section}]")
        out += [f"{key} = {toml_value(draw(toml_values))}" for key in chosen]
    return "\n".join(out) + "\n"


@SETTINGS
@given(study_files())
def test_every_study_file_plans_or_is_refused_in_one_sentence(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("s") / "study.toml"
    path.write_text(text, encoding="utf-8")
    try:
        plan_study(path)
    except UsageError as exc:
        message = str(exc)
        assert message and "\n" not in message and "Traceback" not in message
        if message.startswith(str(path)):
            assert re.match(rf"{re.escape(str(path))}: \S", message)


OPTIONS = {
    "--k": st.sampled_from(["1-6", "0", "6-1", "a", "1,,2", "3", "-2", "1-100"]),
    "--concurrency": st.sampled_from(["1", "0", "-1", "1,4", "x", "", "1.5"]),
    "--rate": st.sampled_from(["1", "0", "-3", "inf", "nan", "x"]),
    "--load": st.sampled_from(["concurrency", "rate", "trace", "burst"]),
    "--trials": st.sampled_from(["0", "1", "-4", "x", "3"]),
    "--noise": st.sampled_from(["0.05", "-1", "2", "x"]),
    "--strategy": st.sampled_from(["guided", "grid", "tpe", "random"]),
    "--slo": st.sampled_from(["tpot_p99_ms<=40", "tpot<=40", "ttft_p50_s<=0", "x", "e2e_p99_ms<=-1"]),
    "--method": st.sampled_from(["ngram", "draft_model", "eagle9", "suffix", ""]),
    "--ngram-lookup": st.sampled_from(["2-4", "4-2", "0-1", "x"]),
    "--repeats": st.sampled_from(["1", "0", "-1", "3"]),
    "--warmup": st.sampled_from(["0", "-1", "2"]),
    "--max-tokens": st.sampled_from(["0", "-5", "16"]),
    "--time-scale": st.sampled_from(["1", "0", "-1"]),
    "--workers": st.sampled_from(["1", "0", "2"]),
    "--gpus": st.sampled_from(["0", "0,0", "a", "-1"]),
}
NO_SERVER = "the server command '/nonexistent/vllm' was not found"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(sorted(OPTIONS)), unique=True, min_size=1, max_size=4).flatmap(
    lambda names: st.tuples(*[st.tuples(st.just(n), OPTIONS[n]) for n in names])))
def test_every_optimize_option_set_runs_or_is_refused_before_anything_is_written(tmp_path_factory, chosen):
    folder = tmp_path_factory.mktemp("cli")
    workload = folder / "code.jsonl"
    workload.write_text('{"prompt": "def f():", "max_tokens": 8}\n')
    db = folder / "tuner.db"
    args = ["optimize", "--workload", str(workload), "--model", "m", "--db", f"sqlite:///{db}",
            "--log-dir", str(folder / "logs"), "--server-cmd", "/nonexistent/vllm {model}"]
    for name, value in chosen:
        args += [f"{name}={value}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, (args, result.output, result.exception)
    assert "Traceback" not in result.output
    if NO_SERVER in result.output:
        return  # every option was accepted: the run reached the (missing) server
    # Refused input: one sentence, and no database was created for it.
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    usage = "Usage:" in result.output or "Invalid value" in result.output
    assert errors or usage, result.output
    assert not db.exists() or usage is False and _database_untouched(db), (args, result.output)


def _database_untouched(db: Path) -> bool:
    """A refusal that came after the database was opened must not have stored a study."""
    import sqlite3

    with sqlite3.connect(db) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "tuner_study_runs" not in tables:
            return True
        return connection.execute("SELECT COUNT(*) FROM tuner_study_runs").fetchone()[0] == 0
