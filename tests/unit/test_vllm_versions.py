"""The vLLM users run: the speculative-config keys and methods of vLLM 0.26 (the GPU host), 0.32
(the CPU build) and 0.34 (the newest), read from their wheels' source by
scripts/vllm_spec_keys.py into tests/data/vllm-spec-keys.json. Against each, the tuner builds only
keys that vLLM has, and refuses a method it lacks before any server starts."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tuner.engine.server import ServerOptions, VllmServer, synthetic_fields
from tuner.engine.spec_config import SpecConfig
from tuner.errors import UsageError
from tuner.plan import checks
from tuner.plan.space import SearchSpace

ROOT = Path(__file__).resolve().parents[2]
RECORDED = json.loads((ROOT / "tests" / "data" / "vllm-spec-keys.json").read_text())
# Hub names: not read here (their checks are skipped with a warning), so only the schema decides.
DRAFTS = {"draft_model": ("org/draft",), "eagle3": ("org/eagle3-head",), "dflash": ("org/dflash",),
          "dspark": ("org/dspark",), "eagle": ("org/eagle-head",), "medusa": ("org/medusa",)}


def test_the_recorded_key_lists_are_the_three_releases():
    assert sorted(RECORDED) == ["0.26.0", "0.32.0", "0.34.0"]
    newest = RECORDED["0.34.0"]
    # 0.34 dropped these (the list; P-EAGLE and Model Runner V1 go with them).
    for key in ("disable_padded_drafter_batch", "use_heterogeneous_vocab"):
        assert key in RECORDED["0.32.0"]["fields"] and key not in newest["fields"]
    for method in ("custom_class", "medusa", "mlp_speculator"):
        assert method in RECORDED["0.32.0"]["methods"] and method not in newest["methods"]
    assert "enable_adaptive_verification" not in RECORDED["0.26.0"]["fields"]
    assert not RECORDED["0.26.0"]["per_request_spec_decode_metrics"] and newest["per_request_spec_decode_metrics"]


@pytest.mark.parametrize("version", sorted(RECORDED))
def test_every_key_the_tuner_builds_is_one_that_vllm_has(version, monkeypatch):
    schema = RECORDED[version]
    monkeypatch.setattr(checks, "installed_vllm_schema", lambda: schema)
    monkeypatch.setattr(checks, "gives_aux_hidden_states", lambda architecture: None)
    for method in ("ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark", "medusa"):
        fixed = {method: 4} if method in ("dflash", "dspark") else {}
        space = SearchSpace(methods=(method,), ks=(1, 3), drafts={m: d for m, d in DRAFTS.items() if m == method},
                            fixed_k=fixed)
        if method not in schema["methods"]:
            with pytest.raises(UsageError, match=f"method '{method}' is not known to the installed vLLM"):
                checks.check_space(space, "org/target")
            continue
        checks.check_space(space, "org/target")
        for candidate in space.candidates():
            if candidate.spec is None:
                continue
            built = {**candidate.spec.to_vllm(), **synthetic_fields((0.7, 0.5), candidate.spec.k)}
            assert set(built) <= set(schema["fields"]), (version, method, sorted(set(built) - set(schema["fields"])))


def test_per_request_acceptance_is_asked_only_where_vllm_has_it():
    spec = SpecConfig(method="ngram", num_speculative_tokens=3)
    asked = VllmServer("m", spec, ServerOptions(per_request_acceptance=True)).command()
    assert asked[asked.index("--per-request-spec-decode-metrics") + 1] == "summary"
    assert "--per-request-spec-decode-metrics" not in VllmServer("m", spec, ServerOptions()).command()
    # vLLM refuses the flag without speculation: the baseline never gets it.
    assert "--per-request-spec-decode-metrics" not in VllmServer(
        "m", None, ServerOptions(per_request_acceptance=True)).command()


def test_the_version_table_in_the_docs_is_the_generated_one():
    spec = importlib.util.spec_from_file_location("vllm_spec_keys", ROOT / "scripts" / "vllm_spec_keys.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (ROOT / "docs" / "reference" / "vllm-versions.md").read_text()
    shown = page.split("<!-- vllm-versions:start -->\n", 1)[1].split("<!-- vllm-versions:end -->", 1)[0]
    assert shown == module.table(RECORDED), "run scripts/vllm_spec_keys.py --table tests/data/vllm-spec-keys.json"
