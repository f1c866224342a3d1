"""Checks made before any server starts, against the installed vLLM and local checkpoints."""

import json

import pytest

from tuner.errors import UsageError
from tuner.plan.space import SearchSpace
from tuner.engine.installed import installed_vllm_schema
from tuner.plan.checks import check_space


def checkpoint(path, **config):
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def test_installed_vllm_is_read_not_hard_coded():
    schema = installed_vllm_schema()
    assert schema is not None, "vLLM is installed in the test environment"
    assert {"ngram", "draft_model", "eagle3", "mtp"} <= set(schema["methods"])
    assert {"num_speculative_tokens", "prompt_lookup_min"} <= set(schema["fields"])


def test_unknown_method_is_refused(tmp_path):
    with pytest.raises(UsageError, match="'lookahead' is not known to the installed vLLM"):
        check_space(SearchSpace(methods=("lookahead",)), "m")


def test_unknown_field_is_refused():
    with pytest.raises(UsageError, match="'disable_by_batch_size' is not a speculative-config field"):
        check_space(SearchSpace(methods=("ngram",)), "m", {"disable_by_batch_size"})


def test_missing_local_draft(tmp_path):
    space = SearchSpace(methods=("draft_model",), drafts={"draft_model": (str(tmp_path / "gone"),)})
    with pytest.raises(UsageError, match="does not exist"):
        check_space(space, "m")


def test_draft_with_another_vocabulary(tmp_path):
    target = checkpoint(tmp_path / "target", vocab_size=2048)
    draft = checkpoint(tmp_path / "draft", vocab_size=32000)
    space = SearchSpace(methods=("draft_model",), drafts={"draft_model": (draft,)})
    with pytest.raises(UsageError, match="vocabulary size 32000 but the target .* has 2048"):
        check_space(space, target)


def test_matching_draft_passes(tmp_path):
    target = checkpoint(tmp_path / "target", vocab_size=2048)
    draft = checkpoint(tmp_path / "draft", vocab_size=2048)
    check_space(SearchSpace(methods=("draft_model", "ngram"), drafts={"draft_model": (draft,)}), target)


def test_a_workload_too_short_for_a_concurrency_level_is_warned_about():
    from tuner.replay import LoadSpec
    from tuner.plan.checks import check_loads
    loads = [LoadSpec("concurrency", 1), LoadSpec("concurrency", 8), LoadSpec("concurrency", 32)]
    (warning,) = check_loads(32, loads)
    assert "1.0 per client at concurrency 32" in warning and "at least 128 requests" in warning
    assert check_loads(128, loads) == [] and check_loads(1, [LoadSpec("rate", rate=2.0)]) == []


def test_the_installed_vllm_is_probed_once_and_then_read_from_the_cache(tmp_path, monkeypatch):
    """Every tuner command asks the installed vLLM; importing it in a child process costs 10-15 s,
    so an answer for the same install is kept in the cache file and read from there."""
    from tuner.engine import installed

    monkeypatch.setenv("TUNER_CACHE_DIR", str(tmp_path))
    children = []
    real_run = installed.subprocess.run
    monkeypatch.setattr(installed.subprocess, "run",
                        lambda argv, **kw: children.append(argv) or real_run(argv, **kw))
    # A child that answers as the schema probe does, without the seconds of importing vLLM.
    answer = 'import json; print(json.dumps({"methods": ["ngram"], "fields": ["method"]}))'
    first = installed._probe("schema", answer)
    assert first == {"methods": ["ngram"], "fields": ["method"]} and len(children) == 1
    assert installed._probe("schema", answer) == first and len(children) == 1
    assert installed.cache_file().parent == tmp_path
    assert installed._installed_vllm_key() in json.loads(installed.cache_file().read_text())
    # Another install of vLLM (here: another key) is probed afresh.
    monkeypatch.setattr(installed, "_installed_vllm_key", lambda: "another vllm")
    assert installed._probe("schema", answer) == first and len(children) == 2


def test_a_failed_probe_is_not_kept(tmp_path, monkeypatch):
    from tuner.engine import installed

    monkeypatch.setenv("TUNER_CACHE_DIR", str(tmp_path))
    assert installed._probe("broken", "raise SystemExit(3)") is None
    assert not installed.cache_file().exists()
