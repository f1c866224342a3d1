import pytest

from tuner.errors import UsageError
from tuner.plan.study_plan import plan_study

STUDY = """
trials = 7
noise = 0.02
[space]
methods = ["ngram", "draft_model"]
k = [2, 4]
ngram_lookup = ["2-4", "3-5"]
[space.drafts]
draft_model = ["/models/draft"]
[server]
args = ["--max-model-len=4096"]
[load]
mode = "rate"
rate = 2.5
"""


def test_study_file_is_read(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    plan = plan_study(path)
    assert plan.space.methods == ("ngram", "draft_model")
    assert plan.space.ks == (2, 4)
    assert plan.space.ngram_lookup == ((2, 4), (3, 5))
    assert plan.space.drafts == {"draft_model": ("/models/draft",)}
    assert plan.server_args == ["--max-model-len=4096"]
    assert (plan.load.mode, plan.load.rate) == ("rate", 2.5)
    assert (plan.options.trials, plan.options.noise) == (7, 0.02)
    assert len(plan.space.candidates()) == 1 + 2 * 2 + 2


def test_flags_win_over_the_file(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    plan = plan_study(path, methods=["ngram"], k="1-3", trials=3, load="concurrency", concurrency=4)
    assert plan.space.methods == ("ngram",) and plan.space.ks == (1, 2, 3)
    assert plan.options.trials == 3 and plan.load.label == "concurrency 4"


def test_defaults_without_a_file():
    plan = plan_study()
    assert plan.space.methods == ("ngram",) and plan.space.ks == (1, 2, 3, 4, 5)
    assert plan.options.trials == 20 and plan.load.label == "concurrency 1"


def test_a_true_or_false_key_is_read_and_anything_else_there_is_one_sentence(tmp_path):
    # allow_output_change = true once crashed the shape check (no check for booleans).
    path = tmp_path / "study.toml"
    path.write_text("allow_output_change = true\n")
    assert plan_study(path).options.allow_output_change is True
    path.write_text('allow_output_change = "yes"\n')
    with pytest.raises(UsageError, match="allow_output_change must be true or false"):
        plan_study(path)


@pytest.mark.parametrize(("text", "reason"), [
    ("trails = 3", "unknown key 'trails' in the top level"),
    ("[space]\nmethod = ['ngram']", "unknown key 'method' in [space]"),
    ("[space", "not valid TOML"),
])
def test_bad_study_files(tmp_path, text, reason):
    path = tmp_path / "study.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=reason.replace("[", r"\[")):
        plan_study(path)


def test_missing_study_file(tmp_path):
    with pytest.raises(UsageError, match="no such study file"):
        plan_study(tmp_path / "none.toml")


def test_load_levels_strategy_and_slos_from_flags_and_file(tmp_path):
    plan = plan_study(None, methods=["ngram"], concurrency="1,4,16", strategy="tpe",
                      slos=["tpot_p99_ms<=40"])
    assert [load.label for load in plan.loads] == ["concurrency 1", "concurrency 4", "concurrency 16"]
    assert plan.options.strategy == "tpe" and plan.options.slos[0].limit_s == 0.04
    path = tmp_path / "study.toml"
    path.write_text('strategy = "grid"\nslo = ["ttft_p99_ms<=500"]\n[load]\nconcurrency = [2, 8]\n')
    plan = plan_study(path)
    assert [load.concurrency for load in plan.loads] == [2, 8]
    assert plan.options.strategy == "grid" and plan.options.slos[0].metric == "ttft_p99"
    rates = plan_study(None, load="rate", rate="1,4")
    assert [load.label for load in rates.loads] == ["Poisson 1 req/s", "Poisson 4 req/s"]


@pytest.mark.parametrize("flags, message", [
    ({"concurrency": "1,x"}, "--concurrency '1,x' must be a number or a list like 1,4,16"),
    ({"strategy": "bayes"}, "--strategy must be one of guided, tpe, grid"),
    ({"slos": ["tpot<40"]}, "--slo 'tpot<40' is not a latency target"),
])
def test_bad_load_strategy_or_slo_is_one_sentence(flags, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_study(None, **flags)
