"""More drafters for the GPU step-cost table, beside ``../shared/gpu/mkmodel.py``'s models.

``python benchmarks/gpu_models.py /root/models`` (after mkmodel.py, which writes ``target``, an
8B-shaped config with no weights, and ``draft``, 1B-shaped) adds, with random bf16 weights drawn
on the GPU (acceptance is set by ``rejection_sample_method: "synthetic"``, so weights only cost
their steps):

- ``draft-250m``: a Llama of about 0.25 B parameters (hidden 1024, 12 layers), for draft_model;
- ``eagle3-8b``: an EAGLE-3 head sized for the 8B target (one layer of the target's width, ``fc``
  over three aux hidden states, a draft vocabulary of the target's 32000 tokens), in the layout
  vLLM's ``llama_eagle3.py`` loads (as scripts/tiny_eagle3.py writes it for the tiny target);
- ``dflash-8b``: a DFlash block drafter (``DFlashDraftModel``, vLLM ``qwen3_dflash.py``): two
  Qwen3 layers of the target's width (its heads, KV heads, head_dim, MLP), ``fc`` over two target
  layers' hidden states, its own embedding, the target's ``lm_head``; block size 8, so the tuner
  runs it at k = 7 (the first block slot is the anchor). Serve with ``method: "dflash"``;
- ``dspark-8b``: a DSpark block drafter (``Qwen3DSparkModel``, vLLM ``qwen3_dspark.py``): the same
  backbone plus a rank-32 Markov head; block size 8, k = 8. ``method: "dspark"``, which vLLM
  0.26.0 runs only on Model Runner V2 (it switches to it by itself for dspark).

The block drafters are in the native layout scripts/tiny_block_drafters.py writes for the tiny
target (docs/lab/block-drafters.md), scaled to the target's config. As many target layers feed them
as they have layers: vLLM 0.26.0 sizes a DSpark ``fc`` by its layer count (no ``dflash_config``),
0.32 by its target layers.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

GEN = torch.Generator(device="cuda").manual_seed(0)


def rand(*shape: int) -> torch.Tensor:
    return (torch.randn(*shape, device="cuda", generator=GEN) * 0.02).to(torch.bfloat16).cpu()


def ones(n: int) -> torch.Tensor:
    return torch.ones(n, dtype=torch.bfloat16)


def llama_weights(hidden: int, inter: int, layers: int, kv_dim: int, vocab: int) -> dict[str, torch.Tensor]:
    w = {"model.embed_tokens.weight": rand(vocab, hidden), "model.norm.weight": ones(hidden),
         "lm_head.weight": rand(vocab, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}."
        w |= {p + "input_layernorm.weight": ones(hidden), p + "post_attention_layernorm.weight": ones(hidden),
              p + "self_attn.q_proj.weight": rand(hidden, hidden), p + "self_attn.k_proj.weight": rand(kv_dim, hidden),
              p + "self_attn.v_proj.weight": rand(kv_dim, hidden), p + "self_attn.o_proj.weight": rand(hidden, hidden),
              p + "mlp.gate_proj.weight": rand(inter, hidden), p + "mlp.up_proj.weight": rand(inter, hidden),
              p + "mlp.down_proj.weight": rand(hidden, inter)}
    return w


def tokenizer_files(source: Path, out: Path) -> None:
    for f in source.iterdir():
        if f.name != "config.json" and f.suffix in (".json", ".txt", ".model"):
            shutil.copy(f, out / f.name)


def draft_250m(models: Path, target: dict) -> dict:
    out = models / "draft-250m"
    out.mkdir(parents=True, exist_ok=True)
    hidden, inter, layers, heads, kv = 1024, 4096, 12, 16, 4
    config = {**target, "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hidden // heads}
    weights = llama_weights(hidden, inter, layers, kv * hidden // heads, target["vocab_size"])
    save_file(weights, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer_files(models / "target", out)
    return {"name": out.name, "params": sum(t.numel() for t in weights.values())}


def eagle3_8b(models: Path, target: dict) -> dict:
    out = models / "eagle3-8b"
    out.mkdir(parents=True, exist_ok=True)
    hidden, inter, vocab = target["hidden_size"], target["intermediate_size"], target["vocab_size"]
    width = target["num_attention_heads"] * target["head_dim"]
    kv_width = target["num_key_value_heads"] * target["head_dim"]
    aux = [2, target["num_hidden_layers"] // 2, target["num_hidden_layers"] - 3]
    w = {"midlayer.input_layernorm.weight": ones(hidden), "midlayer.hidden_norm.weight": ones(hidden),
         "midlayer.post_attention_layernorm.weight": ones(hidden),
         "midlayer.self_attn.q_proj.weight": rand(width, 2 * hidden),
         "midlayer.self_attn.k_proj.weight": rand(kv_width, 2 * hidden),
         "midlayer.self_attn.v_proj.weight": rand(kv_width, 2 * hidden),
         "midlayer.self_attn.o_proj.weight": rand(hidden, width),
         "midlayer.mlp.gate_proj.weight": rand(inter, hidden), "midlayer.mlp.up_proj.weight": rand(inter, hidden),
         "midlayer.mlp.down_proj.weight": rand(hidden, inter), "fc.weight": rand(hidden, 3 * hidden),
         "norm.weight": ones(hidden), "lm_head.weight": rand(vocab, hidden),
         "d2t": torch.zeros(vocab, dtype=torch.int64), "t2d": torch.ones(vocab, dtype=torch.bool)}
    save_file(w, str(out / "model.safetensors"))
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": hidden,
              "intermediate_size": inter, "num_attention_heads": target["num_attention_heads"],
              "num_key_value_heads": target["num_key_value_heads"], "head_dim": target["head_dim"],
              "num_hidden_layers": 1, "hidden_act": "silu", "rms_norm_eps": target["rms_norm_eps"],
              "rope_theta": target["rope_theta"], "max_position_embeddings": target["max_position_embeddings"],
              "vocab_size": vocab, "draft_vocab_size": vocab, "target_hidden_size": hidden,
              "eagle_aux_hidden_state_layer_ids": aux, "bos_token_id": target["bos_token_id"],
              "eos_token_id": target["eos_token_id"], "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer_files(models / "target", out)
    return {"name": out.name, "params": sum(t.numel() for n, t in w.items() if n not in ("d2t", "t2d"))}


# The block drafters (DFlash, DSpark), as scripts/tiny_block_drafters.py lays them out.
DRAFT_LAYERS = 2  # the tiny drafters' depth
BLOCK_SIZE = 8  # one pass of 8 queries: DFlash anchor + 7 masks (k = 7); DSpark's anchor predicts too (k = 8)
MARKOV_RANK = 32  # DSpark's low-rank Markov head, as the tiny one


def feature_layers(layers: int, n: int) -> list[int]:
    """n target layers spread from 1 to L-3 (0-based, "output of layer i"; vLLM reads aux hidden
    state i + 1), as z-lab's DFlash checkpoints spread theirs; a target of under 5 layers gets n
    adjacent ones."""
    low = min(1, layers - n)
    high = min(layers - 1, max(layers - 3, low + n - 1))
    return [low + round(i * (high - low) / max(1, n - 1)) for i in range(n)]


def qwen3_draft_config(target: dict) -> dict:
    """The Qwen3 fields of a block drafter: the target's width and attention shape, its own depth."""
    hidden = target["hidden_size"]
    return {"model_type": "qwen3", "hidden_size": hidden, "intermediate_size": target["intermediate_size"],
            "num_hidden_layers": DRAFT_LAYERS, "num_attention_heads": target["num_attention_heads"],
            "num_key_value_heads": target["num_key_value_heads"], "head_dim": target["head_dim"],
            "hidden_act": "silu", "rms_norm_eps": target["rms_norm_eps"], "vocab_size": target["vocab_size"],
            "max_position_embeddings": target["max_position_embeddings"],
            "rope_parameters": {"rope_type": "default", "rope_theta": float(target["rope_theta"])},
            "attention_bias": False, "tie_word_embeddings": False, "bos_token_id": target["bos_token_id"],
            "eos_token_id": target["eos_token_id"], "dtype": "bfloat16", "target_hidden_size": hidden,
            "num_target_layers": target["num_hidden_layers"]}


def block_weights(target: dict, features: int) -> dict[str, torch.Tensor]:
    """The DFlash backbone's tensors, named as in the checkpoint (no ``model.`` prefix: vLLM adds
    it and stacks q/k/v and gate/up). Its own embedding, as the tiny drafters ship (vLLM keeps
    one that differs from the target's); no ``lm_head``: vLLM shares the target's."""
    hidden, inter, vocab = target["hidden_size"], target["intermediate_size"], target["vocab_size"]
    head_dim = target["head_dim"]
    width, kv = target["num_attention_heads"] * head_dim, target["num_key_value_heads"] * head_dim
    w = {"embed_tokens.weight": rand(vocab, hidden), "fc.weight": rand(hidden, features * hidden),
         "hidden_norm.weight": ones(hidden), "norm.weight": ones(hidden)}
    for i in range(DRAFT_LAYERS):
        p = f"layers.{i}."
        w |= {p + "input_layernorm.weight": ones(hidden), p + "post_attention_layernorm.weight": ones(hidden),
              p + "self_attn.q_proj.weight": rand(width, hidden), p + "self_attn.k_proj.weight": rand(kv, hidden),
              p + "self_attn.v_proj.weight": rand(kv, hidden), p + "self_attn.o_proj.weight": rand(hidden, width),
              p + "self_attn.q_norm.weight": ones(head_dim), p + "self_attn.k_norm.weight": ones(head_dim),
              p + "mlp.gate_proj.weight": rand(inter, hidden), p + "mlp.up_proj.weight": rand(inter, hidden),
              p + "mlp.down_proj.weight": rand(hidden, inter)}
    return w


def write_drafter(models: Path, name: str, weights: dict[str, torch.Tensor], config: dict) -> dict:
    out = models / name
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer_files(models / "target", out)
    return {"name": name, "params": sum(t.numel() for t in weights.values())}


def dflash_8b(models: Path, target: dict) -> dict:
    layers = feature_layers(target["num_hidden_layers"], DRAFT_LAYERS)
    config = {"architectures": ["DFlashDraftModel"], **qwen3_draft_config(target),
              # vLLM reads the mask token and the target layers here. The tokenizer has no spare
              # token: <s> (id 0, as the tiny drafters' mask) only starts prompts.
              "dflash_config": {"mask_token_id": target["bos_token_id"], "target_layer_ids": layers},
              # vLLM does not read it for DFlash (k is num_speculative_tokens); the tuner runs
              # k = block_size - 1, as for z-lab checkpoints.
              "block_size": BLOCK_SIZE}
    return write_drafter(models, "dflash-8b", block_weights(target, len(layers)), config)


def dspark_8b(models: Path, target: dict) -> dict:
    layers = feature_layers(target["num_hidden_layers"], DRAFT_LAYERS)
    vocab = target["vocab_size"]
    weights = block_weights(target, len(layers)) | {
        "markov_head.markov_w1.weight": rand(vocab, MARKOV_RANK),  # previous token -> rank r
        "markov_head.markov_w2.weight": rand(vocab, MARKOV_RANK)}  # rank r -> logit bias
    config = {"architectures": ["Qwen3DSparkModel"], **qwen3_draft_config(target),
              "mask_token_id": target["bos_token_id"],
              # The tuner runs k = block_size; vLLM 0.26.0 refuses k < dspark_block_size.
              "block_size": BLOCK_SIZE, "dspark_block_size": BLOCK_SIZE,
              "target_layer_ids": layers, "dspark_target_layer_ids": layers,
              "markov_rank": MARKOV_RANK, "markov_head_type": "vanilla",
              # Anchor as the first prediction (k queries, not 1 + k): 0.32 reads the first key,
              # 0.26.0 the second.
              "sample_from_anchor": True, "dspark_bonus_anchor": False,
              "use_aux_hidden_state": True, "enable_confidence_head": False}
    return write_drafter(models, "dspark-8b", weights, config)


def main() -> None:
    models = Path(sys.argv[1] if len(sys.argv) > 1 else "/root/models")
    target = json.loads((models / "target" / "config.json").read_text())
    for made in (draft_250m(models, target), eagle3_8b(models, target), dflash_8b(models, target),
                 dspark_8b(models, target)):
        print(f"{made['name']}: {made['params'] / 1e9:.2f} B parameters")


if __name__ == "__main__":
    main()
