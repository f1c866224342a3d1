"""The methods users come for (EAGLE-3, and the block drafters where the CPU build serves them),
tuned end to end on the REAL vLLM server with the drafters `make models` trains."""

from __future__ import annotations

import json

import pytest

from .test_optimize_real import optimize_cmd, run, trials

pytestmark = pytest.mark.integration


def test_optimize_over_ngram_draft_model_and_eagle3_names_a_winner(tmp_path, tiny_models):
    # --draft PATH alone: each checkpoint's method is read from its config (the head's
    # LlamaForCausalLMEagle3 -> eagle3, the plain Llama -> draft_model); ngram is named.
    answer = json.loads(run(optimize_cmd(
        tmp_path, tiny_models, "--method", "ngram", "--method", "draft_model", "--method", "eagle3",
        "--draft", str(tiny_models / "draft"), "--draft", str(tiny_models / "eagle3"),
        "--k", "3", "--strategy", "grid", "--json")).stdout)
    rows = trials(tmp_path)
    assert [r.status for r in rows] == ["complete"] * 4, [r.failure_cause for r in rows]
    by_method = {(r.config or {}).get("method", "baseline"): r for r in rows}
    assert set(by_method) == {"baseline", "ngram", "draft_model", "eagle3"}
    eagle3 = by_method["eagle3"]
    assert eagle3.config == {"method": "eagle3", "model": str(tiny_models / "eagle3"), "num_speculative_tokens": 3}
    # The head was trained on the target's own hidden states: it drafts what the target says.
    assert eagle3.mean_acceptance_length >= 1.5, eagle3.per_position
    assert len(eagle3.per_position) == 3
    assert answer["winner"]["config"] in [r.config for r in rows]  # a measured config, or none
    assert answer["baseline"]["tokens_per_s"] == pytest.approx(by_method["baseline"].tokens_per_s)


def test_a_block_drafter_is_tuned_at_its_trained_block_size(tmp_path, tiny_models):
    """DFlash over the tiny Qwen3 target: k comes from the checkpoint's block size, not a flag."""
    dflash = tiny_models / "dflash"
    if not (dflash / "config.json").exists():
        pytest.fail("make models builds .models/dflash")
    command = optimize_cmd(tmp_path, tiny_models, "--draft", str(dflash), "--json")
    command[command.index("--model") + 1] = str(tiny_models / "qwen3-target")
    answer = json.loads(run(command).stdout)
    rows = trials(tmp_path)
    assert [r.status for r in rows] == ["complete", "complete"], [r.failure_cause for r in rows]
    block = rows[1]
    assert block.config["method"] == "dflash"
    assert block.config["num_speculative_tokens"] == json.loads((dflash / "config.json").read_text())["block_size"] - 1
    assert block.acceptance_rate > 0
    assert answer["server_starts"] == 2  # not swept on k: one trial beside the baseline
