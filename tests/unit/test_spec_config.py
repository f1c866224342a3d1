import json

import pytest

from tuner.engine import SpecConfig
from tuner.errors import UsageError


def test_to_vllm_always_names_method_and_k():
    spec = SpecConfig("draft_model", 3, draft_model="/m/draft", extra={"draft_tensor_parallel_size": 1})
    assert spec.to_vllm() == {"method": "draft_model", "num_speculative_tokens": 3,
                              "model": "/m/draft", "draft_tensor_parallel_size": 1}
    assert json.loads(spec.to_json()) == spec.to_vllm()
    assert spec.label == "draft_model k=3 draft=/m/draft"


def test_round_trip_from_json():
    text = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'
    spec = SpecConfig.from_json(text)
    assert spec.method == "ngram" and spec.k == 4 and spec.extra == {"prompt_lookup_max": 4}
    assert SpecConfig.from_vllm(spec.to_vllm()) == spec


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda: SpecConfig("ngram", 0), "must be an integer >= 1"),
        (lambda: SpecConfig("ngram", True), "must be an integer >= 1"),
        (lambda: SpecConfig("draft_model", 2), "needs a draft checkpoint"),
        (lambda: SpecConfig("ngram", 2, draft_model="x"), "takes no draft checkpoint"),
        (lambda: SpecConfig("", 2), "needs a 'method'"),
        (lambda: SpecConfig.from_json("{nope"), "--spec is not valid JSON"),
        (lambda: SpecConfig.from_json("[1]"), "must be a JSON object"),
        (lambda: SpecConfig.from_json('{"method": "ngram"}'), "needs 'num_speculative_tokens'"),
    ],
)
def test_bad_configs_say_why(build, reason):
    with pytest.raises(UsageError, match=None) as info:
        build()
    assert reason in str(info.value)
