import pytest

from tuner.errors import UsageError
from tuner.search.plan import plan_study

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
