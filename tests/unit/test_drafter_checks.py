"""Preflight checks of EAGLE-3 heads and block drafters against their target, on checkpoint
folders made here (config.json + safetensors, the layout vLLM loads), before any server starts."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from safetensors.numpy import save_file

from tuner.errors import UsageError
from tuner.plan.space import SearchSpace
from tuner.plan.checks import check_space
from tuner.plan.study_plan import plan_study

HIDDEN, LAYERS, VOCAB, DRAFT_VOCAB = 64, 4, 512, 256
TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
          "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 4,
          "intermediate_size": 128, "vocab_size": VOCAB}


def folder(path, config, tensors=None):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    if tensors:
        save_file(tensors, str(path / "model.safetensors"))
    return path


def target(tmp_path, name="target", **changes):
    return folder(tmp_path / name, {**TARGET, **changes})


def eagle3_head(tmp_path, name="head", aux=(1, 2, 3), fc_inputs=3, d2t=None, t2d=None,
                lm_rows=DRAFT_VOCAB, **changes):
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
              "hidden_size": HIDDEN, "num_hidden_layers": 1, "vocab_size": VOCAB,
              "draft_vocab_size": DRAFT_VOCAB, **changes}
    if aux is not None:
        config["eagle_aux_hidden_state_layer_ids"] = list(aux)
    ids = np.arange(0, 2 * DRAFT_VOCAB, 2)  # every other target token
    tensors = {"fc.weight": np.zeros((HIDDEN, fc_inputs * HIDDEN), np.float32),
               "lm_head.weight": np.zeros((lm_rows, HIDDEN), np.float32),
               "d2t": ids - np.arange(DRAFT_VOCAB) if d2t is None else d2t}
    mask = np.zeros(VOCAB, bool)
    mask[ids] = True
    tensors["t2d"] = mask if t2d is None else t2d
    return folder(tmp_path / name, config, {k: v for k, v in tensors.items() if v is not False})


def check(method, draft, model):
    return check_space(SearchSpace(methods=(method,), drafts={method: (str(draft),)}), str(model))


def test_a_head_made_for_this_target_passes_without_warnings(tmp_path):
    assert check("eagle3", eagle3_head(tmp_path), target(tmp_path)) == []


def test_head_hidden_size_differs_from_the_target(tmp_path):
    with pytest.raises(UsageError, match="expects a target with hidden size 64 but .* has 128"):
        check("eagle3", eagle3_head(tmp_path), target(tmp_path, hidden_size=128))


@pytest.mark.parametrize("aux, message", [
    ((1, 2, 9), "layer 9, outside the target's layers 0..4"),
    ((1, 2, 2), r"names the aux layers \[1, 2, 2\], with repeats"),
    (None, r"has no eagle_aux_hidden_state_layer_ids, and vLLM's default layers for a 4-layer "
           r"target \(2, 2, 1\) collide"),
])
def test_aux_layers_outside_the_target_or_colliding(tmp_path, aux, message):
    with pytest.raises(UsageError, match=message):
        check("eagle3", eagle3_head(tmp_path, aux=aux), target(tmp_path))


def test_aux_layer_count_differs_from_what_the_fc_layer_takes(tmp_path):
    with pytest.raises(UsageError, match=r"takes 2 hidden states in its fc layer but names 3"):
        check("eagle3", eagle3_head(tmp_path, fc_inputs=2), target(tmp_path))


@pytest.mark.parametrize("tensors, message", [
    ({"d2t": np.full(DRAFT_VOCAB, VOCAB)}, "d2t map does not map its 256 draft tokens onto distinct ids"),
    ({"d2t": -np.arange(DRAFT_VOCAB)}, "d2t map does not map"),  # every draft token -> target id 0
    ({"t2d": np.ones(VOCAB, bool)}, "t2d mask disagrees with its d2t map"),
    ({"d2t": False, "t2d": False}, "has no d2t map from draft to target token ids"),
    ({"lm_rows": 300}, "says draft_vocab_size 256 but its lm_head has 300 rows"),
])
def test_draft_vocabulary_mapping_inconsistent_with_the_target(tmp_path, tensors, message):
    with pytest.raises(UsageError, match=message):
        check("eagle3", eagle3_head(tmp_path, **tensors), target(tmp_path))


def test_head_for_another_tokenizer(tmp_path):
    with pytest.raises(UsageError, match="vocabulary size 512 but the target .* has 1024"):
        check("eagle3", eagle3_head(tmp_path), target(tmp_path, vocab_size=1024))


def speculator(tmp_path, verifier, **fields):
    return folder(tmp_path / "speculator", {
        "speculators_model_type": "eagle3", "architectures": ["Eagle3Speculator"],
        "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
        "transformer_layer_config": {"model_type": "llama", "hidden_size": HIDDEN, "vocab_size": VOCAB},
        "speculators_config": {"algorithm": "eagle3", "proposal_methods": [{"speculative_tokens": 7}],
                               "verifier": verifier}, **fields})


def test_the_verifier_is_compared_by_config_so_a_renamed_local_copy_passes(tmp_path):
    original = target(tmp_path, "Meta-Llama-3-8B")
    copy = tmp_path / "my-copy"
    shutil.copytree(original, copy)
    head = speculator(tmp_path, {"name_or_path": str(original), "architectures": ["LlamaForCausalLM"]})
    assert check("eagle3", head, copy) == []


def test_a_verifier_that_is_another_model_is_refused(tmp_path):
    other = target(tmp_path, "other", num_hidden_layers=32)
    head = speculator(tmp_path, {"name_or_path": str(other)})
    with pytest.raises(UsageError, match=r"trained for '.*other', not for .*num_hidden_layers: 32 there, 4 here"):
        check("eagle3", head, target(tmp_path))


def test_a_verifier_hub_name_not_in_the_cache_compares_architectures_and_warns(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    head = speculator(tmp_path, {"name_or_path": "meta-llama/Llama-3.1-8B", "architectures": ["LlamaForCausalLM"]})
    (warning,) = check("eagle3", head, target(tmp_path))
    assert warning.startswith("warning:") and "only the architecture names were compared" in warning
    qwen = target(tmp_path, "qwen", architectures=["Qwen3ForCausalLM"])
    with pytest.raises(UsageError, match=r"trained for 'meta-llama/Llama-3.1-8B' \(LlamaForCausalLM\), not for"):
        check("eagle3", head, qwen)


def test_a_hub_drafter_that_cannot_be_read_offline_is_one_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    (warning,) = check("eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", target(tmp_path))
    assert warning == ("warning: the eagle3 draft 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B' has no config.json "
                       "here or in the local hub cache (the tuner never downloads), so its fit to the "
                       "target was not checked")


def test_a_plain_model_passed_as_an_eagle3_head(tmp_path):
    plain = target(tmp_path, "small-llama")
    with pytest.raises(UsageError, match=r"is a plain model \(LlamaForCausalLM\), not an eagle3 drafter"):
        check("eagle3", plain, target(tmp_path))


def block_drafter(tmp_path, method="dflash", **fields):
    return folder(tmp_path / method, {"architectures": ["DFlashDraftModel" if method == "dflash" else "Qwen3DSparkModel"],
                                      "model_type": "qwen3", "hidden_size": HIDDEN, "vocab_size": VOCAB,
                                      "num_hidden_layers": 1, **fields})


def test_a_block_drafter_over_a_target_that_hands_out_no_hidden_states(tmp_path):
    gpt2 = target(tmp_path, "gpt2", architectures=["GPT2LMHeadModel"], model_type="gpt2")
    draft = block_drafter(tmp_path, block_size=4, dflash_config={"target_layer_ids": [0, 2]})
    with pytest.raises(UsageError, match=r"\(GPT2LMHeadModel\) does not hand its hidden states to a drafter"):
        check_space(SearchSpace(methods=("dflash",), drafts={"dflash": (str(draft),)}, fixed_k={"dflash": 3}),
                    str(gpt2))
    # The Llama target does: DFlash drafts over it (docs/lab/block-drafters.md).
    assert check_space(SearchSpace(methods=("dflash",), drafts={"dflash": (str(draft),)}, fixed_k={"dflash": 3}),
                       str(target(tmp_path))) == []


def test_a_block_drafter_without_a_block_size(tmp_path):
    draft = block_drafter(tmp_path, dflash_config={"target_layer_ids": [0, 2]})
    with pytest.raises(UsageError, match="has no block_size in its config.json"):
        check_space(SearchSpace(methods=("dflash",), drafts={"dflash": (str(draft),)}, fixed_k={"dflash": 3}),
                    str(target(tmp_path)))


def test_a_block_drafter_whose_layers_the_target_lacks(tmp_path):
    qwen = target(tmp_path, "qwen", architectures=["Qwen3ForCausalLM"], model_type="qwen3")
    draft = block_drafter(tmp_path, "dspark", block_size=4, dspark_target_layer_ids=[1, 7])
    with pytest.raises(UsageError, match="layer 8, outside the target's layers 0..4"):
        check_space(SearchSpace(methods=("dspark",), drafts={"dspark": (str(draft),)}, fixed_k={"dspark": 4}),
                    str(qwen))


def test_draft_path_alone_infers_the_method_and_a_block_drafter_takes_its_block_size(tmp_path):
    head = eagle3_head(tmp_path)
    draft = target(tmp_path, "draft")
    dflash = block_drafter(tmp_path, block_size=5, dflash_config={"target_layer_ids": [0, 2]})
    plan = plan_study(drafts=[str(head), str(draft), str(dflash)])
    assert plan.space.methods == ("eagle3", "draft_model", "dflash")
    assert plan.space.drafts == {"eagle3": (str(head),), "draft_model": (str(draft),), "dflash": (str(dflash),)}
    # DFlash's first block position is the anchor: a block of 5 drafts 4 tokens.
    assert plan.space.fixed_k == {"dflash": 4}
    assert [c.spec.k for c in plan.space.candidates() if c.spec and c.spec.method == "dflash"] == [4]


def test_a_speculators_checkpoint_s_trained_k_is_the_prior_for_k(tmp_path):
    head = speculator(tmp_path, {"name_or_path": "x"})
    plan = plan_study(drafts=[str(head)])
    assert plan.space.methods == ("eagle3",) and plan.space.ks == tuple(range(1, 8))
    assert plan_study(drafts=[str(head)], k="2,3").space.ks == (2, 3)


def test_a_fixed_k_that_contradicts_the_checkpoint_is_refused(tmp_path):
    dflash = block_drafter(tmp_path, block_size=5)
    study = tmp_path / "study.toml"
    study.write_text("[space]\nmethods = [\"dflash\"]\nfixed_k = { dflash = 7 }\n")
    with pytest.raises(UsageError, match=r"sets dflash = 7, but its checkpoint was trained for k = 4"):
        plan_study(study, drafts=[str(dflash)])


def test_a_draft_adds_its_method_to_the_named_ones(tmp_path):
    head, draft = eagle3_head(tmp_path), target(tmp_path, "draft")
    plan = plan_study(methods=["ngram"], drafts=[str(head), str(draft)])
    assert plan.space.methods == ("ngram", "eagle3", "draft_model")
    # A plain model goes to the one named method taking drafts, and the preflight judges the fit.
    plan = plan_study(methods=["eagle3"], drafts=[str(draft)])
    assert plan.space.drafts == {"eagle3": (str(draft),)}
    with pytest.raises(UsageError, match=r"is a plain model \(LlamaForCausalLM\), not an eagle3 drafter"):
        check_space(plan.space, str(target(tmp_path)))


def test_mtp_needs_a_target_that_carries_mtp_layers(tmp_path):
    with pytest.raises(UsageError, match="carries no MTP layers"):
        check_space(SearchSpace(methods=("mtp",), ks=(1,)), str(target(tmp_path)))
    mimo = target(tmp_path, "mimo", architectures=["MiMoForCausalLM"], num_nextn_predict_layers=2)
    assert check_space(SearchSpace(methods=("mtp",), ks=(1, 2, 4)), str(mimo)) == []
    with pytest.raises(UsageError, match="has 2 MTP layers, .* drop k = 3 from --k"):
        check_space(SearchSpace(methods=("mtp",), ks=(1, 2, 3)), str(mimo))


def test_a_hub_name_not_in_the_cache_is_placed_by_its_name_as_vllm_does(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    plan = plan_study(methods=["ngram"], drafts=["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"])
    assert plan.space.drafts == {"eagle3": ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",)}
    with pytest.raises(UsageError, match="its method cannot be told; add --method"):
        plan_study(methods=["ngram"], drafts=["meta-llama/Llama-3.2-1B-Instruct"])
