"""More drafters for the GPU step-cost table, beside ``../shared/gpu/mkmodel.py``'s models.

``python benchmarks/gpu_models.py /root/models`` (after mkmodel.py, which writes ``target``, an
8B-shaped config with no weights, and ``draft``, 1B-shaped) adds, with random bf16 weights drawn
on the GPU (acceptance is set by ``rejection_sample_method: "synthetic"``, so weights only cost
their steps):

- ``draft-250m``: a Llama of about 0.25 B parameters (hidden 1024, 12 layers), for draft_model;
- ``eagle3-8b``: an EAGLE-3 head sized for the 8B target (one layer of the target's width, ``fc``
  over three aux hidden states, a draft vocabulary of the target's 32000 tokens), in the layout
  vLLM's ``llama_eagle3.py`` loads (as scripts/tiny_eagle3.py writes it for the tiny target).
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


def main() -> None:
    models = Path(sys.argv[1] if len(sys.argv) > 1 else "/root/models")
    target = json.loads((models / "target" / "config.json").read_text())
    for made in (draft_250m(models, target), eagle3_8b(models, target)):
        print(f"{made['name']}: {made['params'] / 1e9:.2f} B parameters")


if __name__ == "__main__":
    main()
