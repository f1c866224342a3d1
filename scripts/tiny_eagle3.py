"""An EAGLE-3 head for the tiny Llama target, trained on the target's own hidden states.

The checkpoint has the layout public EAGLE-3 heads use and vLLM's ``llama_eagle3.py`` loads:
``config.json`` (``LlamaForCausalLMEagle3``, ``draft_vocab_size``, ``eagle_aux_hidden_state_layer_ids``)
and ``model.safetensors`` with ``midlayer.*``, ``fc``, ``norm``, ``lm_head`` and the ``d2t``/``t2d``
maps of a draft vocabulary smaller than the target's. The target's embedding is shared (no
``embed_tokens`` in the file).

The forward below is the one vLLM runs (read from ``llama_eagle3.py``): the layer sees the
normed token embedding beside the normed hidden state (2H into q/k/v), residuals as vLLM's fused
RMSNorm adds them, and the head's pre-norm output is the hidden state of its next step.

Training follows EAGLE-3's "training-time test": step 0 sees, at position p, the embedding of
token p+1 and ``fc`` of the target's three aux hidden states at p, and learns the target's
distribution for token p+2; step j sees its own step j-1 output from position p-1 instead,
attending to step-0 keys up to p-j and to each later step's key on the diagonal, which is
exactly what the query of the j-th drafted token sees in vLLM's KV cache.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

AUX_LAYERS = (1, 2, 3)  # hidden states after these many target layers (0 = the embedding)
DRAFT_VOCAB = 1024  # the most frequent target tokens; d2t/t2d map them back
TTT_STEPS = 3  # unrolled drafting steps, so positions 1 and 2 accept too
STEPS = 200  # loss 0.10 at 200 steps, 0.08 at 300
SEQ_LEN = 96
BATCH = 16
SEED = 1234


def _rms(x, weight, eps):
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(variance + eps)).to(x.dtype) * weight


def _rope(x, positions, theta: float):
    """Neox-style rotary embedding (vLLM's and transformers' Llama); x: [B, heads, L, d]."""
    dim = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freqs = positions.float()[:, None] * inv[None, :]
    cos, sin = torch.cat([freqs, freqs], -1).cos(), torch.cat([freqs, freqs], -1).sin()
    half = dim // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class Eagle3Head:
    """Parameters named as in the checkpoint; the methods below are one drafting step, in vLLM's order."""

    def __init__(self, target, draft_ids):
        cfg = target.config
        hidden, inter = cfg.hidden_size, cfg.intermediate_size
        self.heads, self.head_dim = cfg.num_attention_heads, cfg.head_dim
        self.eps = cfg.rms_norm_eps
        self.theta = float((getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0))
        width = self.heads * self.head_dim
        g = torch.Generator().manual_seed(SEED)

        def linear(out_features, in_features):
            return nn.Parameter(torch.randn(out_features, in_features, generator=g) * in_features ** -0.5)

        self.p = {
            "midlayer.input_layernorm.weight": nn.Parameter(torch.ones(hidden)),
            "midlayer.hidden_norm.weight": nn.Parameter(torch.ones(hidden)),
            "midlayer.post_attention_layernorm.weight": nn.Parameter(torch.ones(hidden)),
            "midlayer.self_attn.q_proj.weight": linear(width, 2 * hidden),
            "midlayer.self_attn.k_proj.weight": linear(width, 2 * hidden),
            "midlayer.self_attn.v_proj.weight": linear(width, 2 * hidden),
            "midlayer.self_attn.o_proj.weight": nn.Parameter(torch.zeros(hidden, width)),
            "midlayer.mlp.gate_proj.weight": linear(inter, hidden),
            "midlayer.mlp.up_proj.weight": linear(inter, hidden),
            "midlayer.mlp.down_proj.weight": nn.Parameter(torch.zeros(hidden, inter)),
            "fc.weight": linear(hidden, hidden * len(AUX_LAYERS)),
            # Start from the target's own output layer: the head's hidden state is meant to be
            # what the target's last layer would have produced one token later.
            "norm.weight": nn.Parameter(target.model.norm.weight.detach().float().clone()),
            "lm_head.weight": nn.Parameter(target.lm_head.weight.detach().float()[draft_ids].clone()),
        }

    def parameters(self):
        return list(self.p.values())

    def attend_inputs(self, embeds, hidden):
        """The layer's input (normed embedding beside normed hidden) and its residual."""
        p = self.p
        x = torch.cat([_rms(embeds, p["midlayer.input_layernorm.weight"], self.eps),
                       _rms(hidden, p["midlayer.hidden_norm.weight"], self.eps)], dim=-1)
        return x, hidden

    def qkv(self, x, positions):
        p, (b, length, _) = self.p, x.shape

        def split(t):
            return t.view(b, length, self.heads, self.head_dim).transpose(1, 2)

        q = split(x @ p["midlayer.self_attn.q_proj.weight"].T)
        k = split(x @ p["midlayer.self_attn.k_proj.weight"].T)
        v = split(x @ p["midlayer.self_attn.v_proj.weight"].T)
        return _rope(q, positions, self.theta), _rope(k, positions, self.theta), v

    def finish(self, attn, residual):
        """o_proj, the MLP and the final norm; returns (pre-norm hidden state, logits)."""
        p = self.p
        b, _, length, _ = attn.shape
        h = attn.transpose(1, 2).reshape(b, length, -1) @ p["midlayer.self_attn.o_proj.weight"].T
        residual = h + residual
        h = _rms(residual, p["midlayer.post_attention_layernorm.weight"], self.eps)
        h = (F.silu(h @ p["midlayer.mlp.gate_proj.weight"].T) * (h @ p["midlayer.mlp.up_proj.weight"].T)
             ) @ p["midlayer.mlp.down_proj.weight"].T
        prenorm = h + residual
        logits = _rms(prenorm, p["norm.weight"], self.eps) @ p["lm_head.weight"].T
        return prenorm, logits


def _aux_hidden(target, x):
    """The target's hidden states after each aux layer (pre-norm, as vLLM collects them) and
    its logits."""
    with torch.no_grad():
        out = target(input_ids=x, output_hidden_states=True)
    return torch.cat([out.hidden_states[i] for i in AUX_LAYERS], dim=-1), out.logits


def _ttt_loss(head, target, x, embed, draft_ids):
    """Loss over TTT_STEPS unrolled drafting steps for one batch of token windows ``x``."""
    aux, logits = _aux_hidden(target, x)
    length = x.shape[1] - 1
    positions = torch.arange(length)
    embeds = embed(x[:, 1:]).detach()  # token p+1 at position p
    # The target's distribution of token p+2 (its logits at p+1), over the draft vocabulary.
    teacher = F.log_softmax(logits[:, 1:, draft_ids].float(), dim=-1)
    hidden = aux[:, :length] @ head.p["fc.weight"].T
    keys, values, total, weights = [], [], 0.0, 0.0
    for step in range(TTT_STEPS):
        inputs, residual = head.attend_inputs(embeds, hidden)
        q, k, v = head.qkv(inputs, positions)
        keys.append(k)
        values.append(v)
        # Query p of step j sees step-0 keys up to p-j and step i's key at p-j+i.
        rows = positions[:, None]
        blocks = [positions[None, :] <= rows - step]
        blocks += [positions[None, :] == rows - step + i for i in range(1, step + 1)]
        mask = torch.cat(blocks, dim=1)
        attn = F.scaled_dot_product_attention(q, torch.cat(keys, 2), torch.cat(values, 2), attn_mask=mask)
        prenorm, draft_logits = head.finish(attn, residual)
        valid = slice(step, length)  # positions with a full prefix at this step
        logp = F.log_softmax(draft_logits[:, valid].float(), dim=-1)
        kl = F.kl_div(logp.flatten(0, 1), teacher[:, valid].flatten(0, 1), log_target=True,
                      reduction="batchmean")
        weight = 0.8 ** step
        total, weights = total + weight * kl, weights + weight
        # The next step's hidden state at p is this step's output at p-1.
        hidden = torch.cat([torch.zeros_like(prenorm[:, :1]), prenorm[:, :-1]], dim=1)
    return total / weights


def make_eagle3_head(out: Path, target, tokens, steps: int = STEPS) -> dict:
    """Train and save the head into ``out``; returns a few training figures."""
    torch.manual_seed(SEED)
    counts = torch.bincount(tokens, minlength=target.config.vocab_size)
    draft_ids = torch.sort(torch.topk(counts, DRAFT_VOCAB).indices).values
    coverage = counts[draft_ids].sum().item() / counts.sum().item()
    head = Eagle3Head(target, draft_ids)
    target.eval()
    embed = target.model.embed_tokens
    optimizer = torch.optim.AdamW(head.parameters(), lr=2e-3, weight_decay=0.0)
    generator = torch.Generator().manual_seed(SEED)
    started = time.monotonic()
    for step in range(1, steps + 1):
        starts = torch.randint(0, len(tokens) - SEQ_LEN - 1, (BATCH,), generator=generator)
        x = torch.stack([tokens[s:s + SEQ_LEN] for s in starts])
        loss = _ttt_loss(head, target, x, embed, draft_ids)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"  eagle3: step {step}, loss {loss.item():.2f}", flush=True)
    seconds = time.monotonic() - started
    print(f"  eagle3: {steps} steps in {seconds:.0f} s, loss {loss.item():.2f}, "
          f"draft vocabulary covers {coverage:.1%} of training tokens")

    out.mkdir(parents=True, exist_ok=True)
    tensors = {name: value.detach().to(torch.bfloat16).contiguous() for name, value in head.p.items()}
    tensors["d2t"] = (draft_ids - torch.arange(DRAFT_VOCAB)).contiguous()  # draft id + d2t = target id
    t2d = torch.zeros(target.config.vocab_size, dtype=torch.bool)
    t2d[draft_ids] = True
    tensors["t2d"] = t2d
    save_file(tensors, str(out / "model.safetensors"))
    cfg = target.config
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": head.theta,
        "max_position_embeddings": cfg.max_position_embeddings,
        "vocab_size": cfg.vocab_size,
        "draft_vocab_size": DRAFT_VOCAB,
        "target_hidden_size": cfg.hidden_size,
        "eagle_aux_hidden_state_layer_ids": list(AUX_LAYERS),
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return {"seconds": round(seconds), "loss": round(loss.item(), 3), "vocab_coverage": round(coverage, 4)}
