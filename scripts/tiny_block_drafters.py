"""Tiny block-parallel drafters (DFlash, DSpark) and an MTP target, in the layouts vLLM loads.

Everything here is built locally from the project's tokenizer and training tokens (no downloads),
with fixed step counts and seeds, so the same checkpoints come out on every machine.

- ``make_qwen3_target``: a ``Qwen3ForCausalLM`` (4 layers, hidden 256) trained like
  ``make_tiny_models.py`` trains its Llama. Not needed for DFlash: the drafters are Qwen3-style,
  but vLLM feeds them any target that exposes aux hidden states, the project's Llama included.
- ``make_dflash``: a DFlash drafter (``DFlashDraftModel``, vLLM ``qwen3_dflash.py``) distilled
  from the target's own hidden states and logits. Serves on the CPU build.
- ``make_dspark``: a DSpark drafter (``Qwen3DSparkModel``, vLLM ``qwen3_dspark.py``): the DFlash
  backbone plus a low-rank Markov head. vLLM 0.32 runs DSpark only in its V2 model runner, which
  needs Triton with a CPU backend: the CPU build refuses it at start (docs/lab/block-drafters.md).
- ``make_mtp_target``: a MiMo-style target (``MiMoForCausalLM``: Qwen2 layers, the Llama
  target's weights, plus one MTP layer under ``model.mtp_layers.0``), served with ``method: mtp``
  (vLLM ``mimo_mtp.py``). Serves.

The drafters are trained on the target's own greedy continuations of corpus prefixes: at
temperature 0 that is exactly the text the server drafts over.

The forward passes below are the ones vLLM runs (read from its model code), so that what is
trained here is what the server computes:

DFlash, one drafting step (vLLM ``v1/spec_decode/dflash.py``): the target has verified up to
position p-1 and sampled the bonus token x_p. The drafter's KV cache holds, for every position
< p, K/V projected from ``c = hidden_norm(fc(concat(aux hidden states)))`` (no input layernorm;
``k_norm`` and RoPE on K). Its queries are ``[x_p, MASK, ..., MASK]`` (1 + k tokens) at positions
p..p+k; they attend to all that context and to each other (non-causal). The query at p+j
(j = 1..k) proposes token p+j through the (shared) target ``lm_head``.

DSpark (vLLM ``v1/worker/gpu/spec_decode/dspark/speculator.py``, ``sample_from_anchor`` true, the
native layout): k queries ``[x_p, MASK, ...]`` at p..p+k-1; the query at p+j proposes token
p+j+1, with ``markov_w2 @ markov_w1[previous token]`` added to its logits, left to right.

Usage: python scripts/tiny_block_drafters.py --models .models [--only dflash,mtp-target,...]
       [--target target|qwen3-target] [--random]
(reads the tokenizer from MODELS/target; the drafters are for MODELS/target, the project's
Llama, unless --target says otherwise).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

SEED = 1234
SEQ_LEN = 128
BATCH = 16

# Qwen3 target: the same size and training recipe as make_tiny_models.py's Llama target.
QWEN3_TARGET = dict(layers=4, hidden=256, heads=4, head_dim=64, intermediate=768, steps=200)

# Drafters.
MASK_TOKEN_ID = 0  # <|endoftext|>: the tokenizer has no spare token; it is never a bonus
# token of a running request (generation stops on it), so its embedding row can be the mask's.
DFLASH_K = 4  # mask queries per block (block of 1 + k); serve with num_speculative_tokens = k
DSPARK_K = 4  # block of k queries (anchor + k-1 masks); serve with num_speculative_tokens = k
DRAFT_LAYERS = 2
MARKOV_RANK = 32
DRAFT_STEPS = 400  # fixed, about 60-90 s each on 2 cores
DRAFT_BATCH = 8  # windows of SEQ_LEN per step
ANCHORS = 16  # blocks trained per window and step
POOL_WINDOWS = 512  # corpus prefixes continued greedily by the target (the drafters' training text)
POOL_PREFIX = 48  # tokens of corpus text before the target's own continuation

# MTP (MiMo-style) target.
# The same shape as make_tiny_models.py's Llama target, whose weights its layers take.
MTP_TARGET = dict(layers=4, hidden=256, heads=4, intermediate=768, steps=200, mtp_steps=150)


# ----------------------------------------------------------------------------------------
# Shared pieces
# ----------------------------------------------------------------------------------------

def _rms(x, weight, eps):
    """RMSNorm as vLLM computes it (x * rsqrt(mean(x^2) + eps) * weight, no offset)."""
    import torch.nn.functional as F

    return F.rms_norm(x, (x.shape[-1],), weight, eps)


_ROPE_CACHE: dict = {}


def _rope(x, positions, theta: float):
    """Neox-style rotary embedding (vLLM's default for these layers); x: [B, heads, L, d],
    positions: [B, L]."""
    import torch

    dim = x.shape[-1]
    key = (dim, theta)
    if key not in _ROPE_CACHE:
        inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        freqs = torch.arange(4096, dtype=torch.float32)[:, None] * inv
        emb = torch.cat([freqs, freqs], -1)
        _ROPE_CACHE[key] = (emb.cos(), emb.sin())
    cos, sin = (t[positions][:, None] for t in _ROPE_CACHE[key])  # [B, 1, L, d]
    half = dim // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def _batches(tokens, steps: int, seq_len: int = SEQ_LEN, batch: int = BATCH):
    """The same fixed-seed random windows make_tiny_models.py trains on."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    for _ in range(steps):
        starts = torch.randint(0, len(tokens) - seq_len - 1, (batch,), generator=generator)
        yield torch.stack([tokens[s:s + seq_len] for s in starts])


def _save_tokenizer(tokenizer_or_dir, out: Path) -> None:
    # A served target folder needs its tokenizer. vLLM gives a drafter the target's tokenizer,
    # so a drafter folder does not; a copy only keeps it self-contained (skipped if the target
    # folder has none).
    from transformers import AutoTokenizer

    tok = tokenizer_or_dir
    if isinstance(tok, (str, Path)):
        try:
            tok = AutoTokenizer.from_pretrained(str(tok))
        except (OSError, ValueError):
            return
    tok.save_pretrained(out)


def _train_causal_lm(model, tokens, steps: int, name: str):
    """make_tiny_models.py's plain training loop (AdamW 3e-3, batch 16 x 128, fixed steps)."""
    import torch

    torch.manual_seed(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    started = time.monotonic()
    model.train()
    loss = None
    for step, x in enumerate(_batches(tokens, steps), 1):
        loss = model(input_ids=x, labels=x).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"  {name}: step {step}, loss {loss.item():.2f}", flush=True)
    print(f"  {name}: {steps} steps in {time.monotonic() - started:.0f} s, loss {loss.item():.2f}")
    model.eval()
    return model


# ----------------------------------------------------------------------------------------
# Qwen3 target
# ----------------------------------------------------------------------------------------

def make_qwen3_target(out_dir, tokenizer, tokens, eos_id: int):
    """A tiny Qwen3ForCausalLM trained like make_tiny_models.py's Llama target (same size, steps,
    seed and windows); saved in bf16 with the tokenizer, returned in fp32."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = Path(out_dir)
    c = QWEN3_TARGET
    torch.manual_seed(SEED)
    config = Qwen3Config(
        vocab_size=len(tokenizer) if tokenizer is not None else 2048,
        hidden_size=c["hidden"], intermediate_size=c["intermediate"],
        num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
        num_key_value_heads=c["heads"], head_dim=c["head_dim"],
        max_position_embeddings=1024, bos_token_id=eos_id, eos_token_id=eos_id,
        tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    model = _train_causal_lm(Qwen3ForCausalLM(config), tokens, c["steps"], "qwen3-target")
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    if tokenizer is not None:
        _save_tokenizer(tokenizer, out)
    return model.float()


# ----------------------------------------------------------------------------------------
# Target features for the block drafters
# ----------------------------------------------------------------------------------------

def _load_target(target_dir):
    import torch
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32)
    target.eval()
    for p in target.parameters():
        p.requires_grad_(False)
    return target


def _target_layer_ids(target) -> list[int]:
    # Every target layer's output (DFlash's "target_layer_ids" count layers from 0 and mean the
    # layer's output; vLLM captures it as aux hidden state id + 1, before the final norm).
    return list(range(target.config.num_hidden_layers))


def _target_features(target, x, layer_ids):
    """Pre-norm outputs of the given target layers (what vLLM's aux hidden states are: hidden +
    residual after the layer) concatenated, and the target's final (normed) hidden states; the
    caller turns only the positions it needs into logits (the full-vocab head is the costly part).
    """
    import torch

    captured = {}
    hooks = []
    for i in layer_ids:
        def hook(_module, _inputs, output, i=i):
            captured[i] = output[0] if isinstance(output, tuple) else output
        hooks.append(target.model.layers[i].register_forward_hook(hook))
    try:
        with torch.no_grad():
            final = target.model(input_ids=x).last_hidden_state
    finally:
        for h in hooks:
            h.remove()
    return torch.cat([captured[i] for i in layer_ids], dim=-1), final


def _teacher_logp(target, final, index):
    """The target's log-probabilities at positions ``index`` ([B, N]) of ``final`` ([B, S, H])."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        rows = torch.gather(final, 1, index[..., None].expand(-1, -1, final.shape[-1]))
        return F.log_softmax(target.lm_head(rows).float(), dim=-1)


def _greedy_pool(target, tokens, windows: int = POOL_WINDOWS, prefix: int = POOL_PREFIX):
    """Windows of SEQ_LEN tokens: ``prefix`` tokens of the corpus, then the target's own greedy
    continuation. At temperature 0 the server drafts over exactly such text (the target's greedy
    output after a real prompt), so the drafter learns the continuations it will be asked for."""
    import torch

    generator = torch.Generator().manual_seed(SEED + 3)
    starts = torch.randint(0, len(tokens) - prefix - 1, (windows,), generator=generator)
    prompts = torch.stack([tokens[s:s + prefix] for s in starts])
    out = []
    with torch.no_grad():
        for chunk in prompts.split(128):
            ids = target.generate(
                input_ids=chunk, attention_mask=torch.ones_like(chunk), do_sample=False,
                max_new_tokens=SEQ_LEN - prefix, min_new_tokens=SEQ_LEN - prefix,
                pad_token_id=target.config.eos_token_id)
            out.append(ids[:, :SEQ_LEN])
    return torch.cat(out)


def _pool_batches(pool, steps: int, batch: int):
    import torch

    generator = torch.Generator().manual_seed(SEED + 4)
    for _ in range(steps):
        yield pool[torch.randint(0, len(pool), (batch,), generator=generator)]


# ----------------------------------------------------------------------------------------
# The DFlash / DSpark backbone (vLLM's DFlashQwen3Model) in plain torch
# ----------------------------------------------------------------------------------------

class _BlockDrafter:
    """Parameters named as in the checkpoint vLLM loads (``layers.N.*``, ``fc``, ``hidden_norm``,
    ``norm``, ``embed_tokens``, and for DSpark ``markov_head.*``). The target's ``lm_head`` is
    shared (not in the file); the embedding is the target's with a learned mask row."""

    def __init__(self, target, layer_ids, num_layers: int, markov_rank: int | None):
        import torch
        from torch import nn

        cfg = target.config
        self.hidden = h = cfg.hidden_size
        self.heads = cfg.num_attention_heads
        self.head_dim = getattr(cfg, "head_dim", None) or h // self.heads
        self.kv_heads = self.heads
        self.inter = cfg.intermediate_size
        self.eps = cfg.rms_norm_eps
        self.theta = float((getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0))
        self.num_layers = num_layers
        self.layer_ids = list(layer_ids)
        width = self.heads * self.head_dim
        g = torch.Generator().manual_seed(SEED)

        def linear(out_f, in_f, scale=1.0):
            return nn.Parameter(torch.randn(out_f, in_f, generator=g) * in_f ** -0.5 * scale)

        self.embed = target.get_input_embeddings().weight.detach().clone()
        self.lm_head = target.get_output_embeddings().weight.detach()
        p = {
            # The mask row starts as the mean embedding and is learned.
            "mask_embedding": nn.Parameter(self.embed.mean(0).clone()),
            "fc.weight": linear(h, h * len(self.layer_ids)),
            "hidden_norm.weight": nn.Parameter(torch.ones(h)),
            "norm.weight": nn.Parameter(torch.ones(h)),
        }
        for i in range(num_layers):
            n = f"layers.{i}."
            p[n + "input_layernorm.weight"] = nn.Parameter(torch.ones(h))
            p[n + "post_attention_layernorm.weight"] = nn.Parameter(torch.ones(h))
            p[n + "self_attn.q_proj.weight"] = linear(width, h)
            p[n + "self_attn.k_proj.weight"] = linear(width, h)
            p[n + "self_attn.v_proj.weight"] = linear(width, h)
            p[n + "self_attn.o_proj.weight"] = linear(h, width, 0.5)
            p[n + "self_attn.q_norm.weight"] = nn.Parameter(torch.ones(self.head_dim))
            p[n + "self_attn.k_norm.weight"] = nn.Parameter(torch.ones(self.head_dim))
            p[n + "mlp.gate_proj.weight"] = linear(self.inter, h)
            p[n + "mlp.up_proj.weight"] = linear(self.inter, h)
            p[n + "mlp.down_proj.weight"] = linear(h, self.inter, 0.5)
        if markov_rank:
            # Markov bias starts at zero (w2 = 0): the head first learns the parallel draft.
            p["markov_head.markov_w1.weight"] = nn.Parameter(
                torch.randn(self.embed.shape[0], markov_rank, generator=g) * 0.1)
            p["markov_head.markov_w2.weight"] = nn.Parameter(
                torch.zeros(self.embed.shape[0], markov_rank))
        self.p = p

    def parameters(self):
        return list(self.p.values())

    def _heads(self, x):
        b, length, _ = x.shape
        return x.view(b, length, -1, self.head_dim).transpose(1, 2)

    def forward(self, feats, block_ids, block_pos, anchor_pos, block_of):
        """feats: [B, S, nL*H] target aux features (positions 0..S-1); block_ids / block_pos:
        [B, Q] query tokens (MASK_TOKEN_ID at mask slots) and positions; anchor_pos: [B, Q] the
        anchor p of each query's block (it sees context < p); block_of: [B, Q] block index.
        Returns the backbone's final hidden states [B, Q, H]."""
        import torch
        import torch.nn.functional as F

        p = self.p
        b, s, _ = feats.shape
        ctx = _rms(feats @ p["fc.weight"].T, p["hidden_norm.weight"], self.eps)  # [B, S, H]
        ctx_pos = torch.arange(s).expand(b, s)
        emb = self.embed[block_ids]
        is_mask = (block_ids == MASK_TOKEN_ID).unsqueeze(-1)
        hs = torch.where(is_mask, p["mask_embedding"].expand_as(emb), emb)
        # Attention mask [B, 1, Q, S + Q]: context strictly before the block's anchor, and every
        # query of the same block (non-causal inside the block).
        sees_ctx = ctx_pos[:, None, :] < anchor_pos[:, :, None]
        sees_blk = block_of[:, :, None] == block_of[:, None, :]
        mask = torch.cat([sees_ctx, sees_blk], dim=-1)[:, None]
        residual = hs
        for i in range(self.num_layers):
            n = f"layers.{i}."
            x = _rms(residual, p[n + "input_layernorm.weight"], self.eps)
            q = self._heads(x @ p[n + "self_attn.q_proj.weight"].T)
            k = self._heads(x @ p[n + "self_attn.k_proj.weight"].T)
            v = self._heads(x @ p[n + "self_attn.v_proj.weight"].T)
            q = _rope(_rms(q, p[n + "self_attn.q_norm.weight"], self.eps), block_pos, self.theta)
            k = _rope(_rms(k, p[n + "self_attn.k_norm.weight"], self.eps), block_pos, self.theta)
            # Context K/V: the layer's own k/v projections of the normed context states.
            ck = self._heads(ctx @ p[n + "self_attn.k_proj.weight"].T)
            cv = self._heads(ctx @ p[n + "self_attn.v_proj.weight"].T)
            ck = _rope(_rms(ck, p[n + "self_attn.k_norm.weight"], self.eps), ctx_pos, self.theta)
            att = F.scaled_dot_product_attention(
                q, torch.cat([ck, k], 2), torch.cat([cv, v], 2), attn_mask=mask)
            att = att.transpose(1, 2).reshape(b, -1, self.heads * self.head_dim)
            residual = residual + att @ p[n + "self_attn.o_proj.weight"].T
            x = _rms(residual, p[n + "post_attention_layernorm.weight"], self.eps)
            mlp = F.silu(x @ p[n + "mlp.gate_proj.weight"].T) * (x @ p[n + "mlp.up_proj.weight"].T)
            residual = residual + mlp @ p[n + "mlp.down_proj.weight"].T
        return _rms(residual, p["norm.weight"], self.eps)

    def logits(self, hidden):
        return hidden @ self.lm_head.T

    def markov_bias(self, prev_ids):
        w1, w2 = self.p["markov_head.markov_w1.weight"], self.p["markov_head.markov_w2.weight"]
        return w1[prev_ids] @ w2.T

    def state_dict(self):
        import torch

        sd = {k: v.detach().clone() for k, v in self.p.items() if k != "mask_embedding"}
        # The drafter ships its own embedding (the target's, mask row learned); vLLM keeps it
        # because it differs from the target's (has_own_embed_tokens).
        embed = self.embed.clone()
        embed[MASK_TOKEN_ID] = self.p["mask_embedding"].detach()
        sd["embed_tokens.weight"] = embed
        return {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}


def _make_blocks(x, k: int, anchors: int, generator, sample_from_anchor: bool, low: int = 1):
    """Pick ``anchors`` anchor positions p >= ``low`` per sequence and lay out the query blocks
    vLLM builds: [x_p, MASK * n] at positions p.., n = k (DFlash) or k - 1 (DSpark)."""
    import torch

    b, s = x.shape
    n_query = k if sample_from_anchor else k + 1
    # The target's distribution for each predicted token must be inside the window: p + k <= s.
    anchor = torch.randint(low, s - k, (b, anchors), generator=generator)
    offs = torch.arange(n_query)
    pos = (anchor[:, :, None] + offs).reshape(b, -1)
    ids = torch.full((b, anchors, n_query), MASK_TOKEN_ID, dtype=torch.long)
    ids[:, :, 0] = torch.gather(x, 1, anchor)
    block_of = torch.arange(anchors)[None, :, None].expand(b, anchors, n_query).reshape(b, -1)
    anchor_q = anchor[:, :, None].expand(b, anchors, n_query).reshape(b, -1)
    return ids.reshape(b, -1), pos, anchor_q, block_of, anchor, n_query


def _train_block_drafter(target, tokens, kind: str):
    """Distil a DFlash or DSpark drafter from the target: KL(target || draft) on every predicted
    slot of every block, the target's distribution at the position before the predicted token."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(SEED)
    dspark = kind == "dspark"
    k = DSPARK_K if dspark else DFLASH_K
    layer_ids = _target_layer_ids(target)
    drafter = _BlockDrafter(target, layer_ids, DRAFT_LAYERS, MARKOV_RANK if dspark else None)
    optimizer = torch.optim.AdamW(drafter.parameters(), lr=3e-3, weight_decay=0.01)
    generator = torch.Generator().manual_seed(SEED + 1)
    started = time.monotonic()
    loss = None
    pool = _greedy_pool(target, tokens)
    print(f"  {kind}: {len(pool)} greedy windows in {time.monotonic() - started:.0f} s", flush=True)
    for step, x in enumerate(_pool_batches(pool, DRAFT_STEPS, DRAFT_BATCH), 1):
        feats, final = _target_features(target, x, layer_ids)
        # Anchors where the server drafts: in the target's own continuation, after the prompt.
        ids, pos, anchor_q, block_of, anchor, n_query = _make_blocks(
            x, k, ANCHORS, generator, sample_from_anchor=dspark, low=POOL_PREFIX)
        hidden = drafter.forward(feats, ids, pos, anchor_q, block_of)
        b = x.shape[0]
        hidden = hidden.view(b, ANCHORS, n_query, -1)
        if dspark:
            # Query j (position p+j, j = 0..k-1) proposes token p+j+1: the target's at p+j.
            pred = hidden
        else:
            # Mask query j = 1..k (position p+j) proposes token p+j: the target's at p+j-1.
            pred = hidden[:, :, 1:]
        teacher_at = anchor[:, :, None] + torch.arange(k)
        logits = drafter.logits(pred)
        teacher = _teacher_logp(target, final, teacher_at.reshape(b, -1)).view(b, ANCHORS, k, -1)
        if dspark:
            # The Markov head sees the previous token: the anchor first, then what the target
            # itself would have said (greedy), which is what an accepted draft token is.
            greedy = teacher.argmax(-1)
            prev = torch.cat([torch.gather(x, 1, anchor)[..., None], greedy[..., :-1]], dim=-1)
            logits = logits + drafter.markov_bias(prev)
        logp = F.log_softmax(logits.float(), dim=-1)
        loss = F.kl_div(logp.flatten(0, 2), teacher.flatten(0, 2), log_target=True,
                        reduction="batchmean")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            with torch.no_grad():
                agree = (logp.argmax(-1) == teacher.argmax(-1)).float().mean(dim=(0, 1))
            print(f"  {kind}: step {step}, loss {loss.item():.2f}, "
                  f"top-1 agreement by slot {[round(a, 2) for a in agree.tolist()]}", flush=True)
    print(f"  {kind}: {DRAFT_STEPS} steps in {time.monotonic() - started:.0f} s, "
          f"loss {loss.item():.2f}")
    return drafter


def _qwen3_draft_config(target, num_layers: int) -> dict:
    """The Qwen3 fields of the drafter: the target's width (the lm_head and embedding are the
    target's), its own depth."""
    cfg = target.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    theta = float((getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0))
    return {
        "model_type": "qwen3",
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_attention_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.rms_norm_eps,
        "vocab_size": cfg.vocab_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "rope_parameters": {"rope_type": "default", "rope_theta": theta},
        "attention_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "dtype": "bfloat16",
        "target_hidden_size": cfg.hidden_size,
        "num_target_layers": cfg.num_hidden_layers,
    }


def _save_drafter(out: Path, config: dict, drafter, target_dir) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(drafter.state_dict(), str(out / "model.safetensors"), metadata={"format": "pt"})
    _save_tokenizer(target_dir, out)


def _make_block_drafter(kind: str, out_dir, target_dir, tokens, train: bool, markov_rank, fields) -> object:
    """Train (or, with ``train`` false, initialise) a block drafter of ``kind`` and save it with
    the Qwen3 draft config plus ``fields(target)``."""
    target = _load_target(target_dir)
    if train:
        drafter = _train_block_drafter(target, tokens, kind)
    else:
        drafter = _BlockDrafter(target, _target_layer_ids(target), DRAFT_LAYERS, markov_rank)
    config = _qwen3_draft_config(target, DRAFT_LAYERS)
    config.update(fields(target))
    _save_drafter(Path(out_dir), config, drafter, target_dir)
    return drafter


def make_dflash(out_dir, target_dir, tokens, train: bool = True):
    """A DFlash drafter for the target in ``target_dir`` (native z-lab layout, which vLLM's
    ``DFlashDraftModel`` loads). Serve with
    ``{"method": "dflash", "model": out_dir, "num_speculative_tokens": DFLASH_K}``."""
    return _make_block_drafter("dflash", out_dir, target_dir, tokens, train, None, lambda target: {
        "architectures": ["DFlashDraftModel"],
        # vLLM reads the mask token and the target layers here (aux ids = target_layer_ids + 1).
        "dflash_config": {"mask_token_id": MASK_TOKEN_ID,
                          "target_layer_ids": _target_layer_ids(target)},
        # As in z-lab checkpoints: vLLM does not read it for DFlash (k is num_speculative_tokens),
        # the tuner does: the drafter was trained for k = block_size - 1.
        "block_size": DFLASH_K + 1,
    })


def make_dspark(out_dir, target_dir, tokens, train: bool = True):
    """A DSpark drafter (``Qwen3DSparkModel``, anchor-as-first-prediction layout). Serve with
    ``{"method": "dspark", "model": out_dir, "num_speculative_tokens": DSPARK_K}``."""
    return _make_block_drafter("dspark", out_dir, target_dir, tokens, train, MARKOV_RANK, lambda target: {
        "architectures": ["Qwen3DSparkModel"],
        "mask_token_id": MASK_TOKEN_ID,
        # vLLM defaults num_speculative_tokens to block_size (then dspark_block_size).
        "block_size": DSPARK_K,
        "dspark_block_size": DSPARK_K,
        "target_layer_ids": _target_layer_ids(target),
        "dspark_target_layer_ids": _target_layer_ids(target),
        "markov_rank": MARKOV_RANK,
        "markov_head_type": "vanilla",
        "sample_from_anchor": True,
        "dspark_bonus_anchor": False,
        "use_aux_hidden_state": True,
        "enable_confidence_head": False,
    })


# ----------------------------------------------------------------------------------------
# MTP: a MiMo-style target (Qwen2 layers + one MTP layer in the same checkpoint)
# ----------------------------------------------------------------------------------------

class _MiMoMTPLayer:
    """vLLM ``mimo_mtp.py``'s layer, parameters named as in the checkpoint
    (``model.mtp_layers.0.*``; vLLM maps the decoder parts onto ``mtp_block``). At position t it
    sees the target's pre-norm last hidden state h_t and the embedding of token t+1 (zeroed at
    position 0), and its output, through the target's lm_head, proposes token t+2."""

    PREFIX = "model.mtp_layers.0."

    def __init__(self, target):
        import torch
        from torch import nn

        cfg = target.config
        h, self.heads = cfg.hidden_size, cfg.num_attention_heads
        self.head_dim = h // self.heads
        self.eps = cfg.rms_norm_eps
        self.theta = float((getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0))
        g = torch.Generator().manual_seed(SEED + 2)

        def linear(out_f, in_f, scale=1.0):
            return nn.Parameter(torch.randn(out_f, in_f, generator=g) * in_f ** -0.5 * scale)

        inter = cfg.intermediate_size
        self.p = {
            "token_layernorm.weight": nn.Parameter(torch.ones(h)),
            "hidden_layernorm.weight": nn.Parameter(torch.ones(h)),
            "input_proj.weight": linear(h, 2 * h),  # [hidden state ; embedding] -> H
            "final_layernorm.weight": nn.Parameter(torch.ones(h)),
            "input_layernorm.weight": nn.Parameter(torch.ones(h)),
            "post_attention_layernorm.weight": nn.Parameter(torch.ones(h)),
            # Qwen2 attention: q/k/v carry biases (vLLM's Qwen2 layer always has them).
            "self_attn.q_proj.weight": linear(h, h),
            "self_attn.q_proj.bias": nn.Parameter(torch.zeros(h)),
            "self_attn.k_proj.weight": linear(h, h),
            "self_attn.k_proj.bias": nn.Parameter(torch.zeros(h)),
            "self_attn.v_proj.weight": linear(h, h),
            "self_attn.v_proj.bias": nn.Parameter(torch.zeros(h)),
            "self_attn.o_proj.weight": linear(h, h, 0.5),
            "mlp.gate_proj.weight": linear(inter, h),
            "mlp.up_proj.weight": linear(inter, h),
            "mlp.down_proj.weight": linear(h, inter, 0.5),
        }
        self.embed = target.get_input_embeddings().weight.detach()
        self.lm_head = target.get_output_embeddings().weight.detach()

    def parameters(self):
        return list(self.p.values())

    def forward(self, hidden, next_ids):
        """hidden: [B, L, H] target pre-norm last hidden states at positions 0..L-1; next_ids:
        [B, L] the token after each position. Returns logits for the token two ahead."""
        import torch
        import torch.nn.functional as F

        p = self.p
        b, length, _ = hidden.shape
        pos = torch.arange(length).expand(b, length)
        emb = self.embed[next_ids] * (pos != 0).unsqueeze(-1)  # vLLM zeroes position 0
        x = torch.cat([_rms(hidden, p["hidden_layernorm.weight"], self.eps),
                       _rms(emb, p["token_layernorm.weight"], self.eps)], dim=-1)
        residual = x @ p["input_proj.weight"].T
        y = _rms(residual, p["input_layernorm.weight"], self.eps)

        def heads(t):
            return t.view(b, length, self.heads, self.head_dim).transpose(1, 2)

        q = heads(y @ p["self_attn.q_proj.weight"].T + p["self_attn.q_proj.bias"])
        k = heads(y @ p["self_attn.k_proj.weight"].T + p["self_attn.k_proj.bias"])
        v = heads(y @ p["self_attn.v_proj.weight"].T + p["self_attn.v_proj.bias"])
        q, k = _rope(q, pos, self.theta), _rope(k, pos, self.theta)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        att = att.transpose(1, 2).reshape(b, length, -1)
        residual = residual + att @ p["self_attn.o_proj.weight"].T
        y = _rms(residual, p["post_attention_layernorm.weight"], self.eps)
        mlp = F.silu(y @ p["mlp.gate_proj.weight"].T) * (y @ p["mlp.up_proj.weight"].T)
        residual = residual + mlp @ p["mlp.down_proj.weight"].T
        return _rms(residual, p["final_layernorm.weight"], self.eps) @ self.lm_head.T

    def state_dict(self):
        import torch

        return {self.PREFIX + k: v.detach().to(torch.bfloat16).contiguous()
                for k, v in self.p.items()}


def make_mtp_target(out_dir, tokenizer, tokens, eos_id: int, train: bool = True, base=None):
    """A MiMo-style target: ``MiMoForCausalLM`` = Qwen2 layers plus one MTP layer distilled to
    propose token t+2. Served as its own drafter with ``{"method": "mtp", "num_speculative_tokens":
    1}`` (vLLM turns the same checkpoint into ``MiMoMTPModel`` and shares the target's embedding
    and lm_head). With ``base``, a trained Llama of the same shape (the project's target), its
    layers are that Llama's weights (Qwen2 is Llama with q/k/v biases, here zero): the same model
    without a minute of training; without it, the layers are trained like the Llama target."""
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file, save_file
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    c = MTP_TARGET
    torch.manual_seed(SEED)
    config = Qwen2Config(
        vocab_size=len(tokenizer) if tokenizer is not None else 2048,
        hidden_size=c["hidden"], intermediate_size=c["intermediate"],
        num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
        num_key_value_heads=c["heads"], max_position_embeddings=1024,
        bos_token_id=eos_id, eos_token_id=eos_id, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    target = Qwen2ForCausalLM(config)
    if base is not None:
        missing, unexpected = target.load_state_dict(base.state_dict(), strict=False)
        assert not unexpected and all(k.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias"))
                                      for k in missing), (missing, unexpected)
        with torch.no_grad():
            for name, prm in target.named_parameters():
                if name in missing:
                    prm.zero_()
    elif train:
        target = _train_causal_lm(target, tokens, c["steps"], "mtp-target")
    target.eval()
    for prm in target.parameters():
        prm.requires_grad_(False)
    mtp = _MiMoMTPLayer(target)
    if train:
        torch.manual_seed(SEED)
        optimizer = torch.optim.AdamW(mtp.parameters(), lr=3e-3, weight_decay=0.01)
        last = target.config.num_hidden_layers - 1
        started = time.monotonic()
        loss = None
        # The target's own greedy continuations, as for the block drafters.
        pool = _greedy_pool(target, tokens)
        for step, x in enumerate(_pool_batches(pool, c["mtp_steps"], DRAFT_BATCH), 1):
            feats, final = _target_features(target, x, [last])  # pre-norm last layer
            # Position t: (h_t, token t+1) -> the target's distribution for token t+2 (at t+1).
            logits = mtp.forward(feats[:, :-1], x[:, 1:])
            logp = F.log_softmax(logits.float(), dim=-1)
            index = torch.arange(1, x.shape[1]).expand(x.shape[0], -1)
            teacher = _teacher_logp(target, final, index)
            loss = F.kl_div(logp.flatten(0, 1), teacher.flatten(0, 1), log_target=True,
                            reduction="batchmean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 50 == 0:
                agree = (logp.argmax(-1) == teacher.argmax(-1)).float().mean().item()
                print(f"  mtp: step {step}, loss {loss.item():.2f}, top-1 agreement {agree:.2f}",
                      flush=True)
        print(f"  mtp: {c['mtp_steps']} steps in {time.monotonic() - started:.0f} s, "
              f"loss {loss.item():.2f}")
    out.mkdir(parents=True, exist_ok=True)
    target.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    # The MTP layer goes into the target's own file (as MiMo ships it); vLLM's MiMoForCausalLM
    # skips model.mtp_layers.*, its MiMoMTP loads only them (plus embed_tokens / lm_head).
    weights = load_file(str(out / "model.safetensors"))
    weights.update(mtp.state_dict())
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((out / "config.json").read_text())
    # model_type stays "qwen2" (transformers has no "mimo"); vLLM picks the class by
    # architectures, and SpeculativeConfig turns MiMoForCausalLM into mimo_mtp with
    # n_predict = num_nextn_predict_layers.
    cfg["architectures"] = ["MiMoForCausalLM"]
    cfg["num_nextn_predict_layers"] = 1
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    if tokenizer is not None:
        _save_tokenizer(tokenizer, out)
    return target


# ----------------------------------------------------------------------------------------
# __main__
# ----------------------------------------------------------------------------------------

def _tokens_like_make_tiny_models(tokenizer):
    """make_tiny_models.py's training tokens: equal shares of code and prose."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from make_tiny_models import corpus

    code, prose = corpus()
    code_ids = tokenizer("\n".join(code))["input_ids"]
    prose_ids = tokenizer("\n".join(prose))["input_ids"]
    share = min(len(code_ids), len(prose_ids))
    return torch.tensor(code_ids[:share] + prose_ids[:share], dtype=torch.long)


def _llama_target(folder: Path):
    """make_tiny_models.py's trained Llama target, in float32."""
    import torch
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(str(folder), torch_dtype=torch.float32)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=Path(".models"))
    parser.add_argument("--only", default="qwen3-target,dflash,dspark,mtp-target",
                        help="comma-separated subset to build")
    # The project's Llama target serves DFlash on the CPU build (vLLM only needs aux hidden
    # states from the target), so the drafters are for it by default: one target for every
    # method the tuner compares. --target qwen3-target builds them for the Qwen3 target.
    parser.add_argument("--target", default="target",
                        help="folder under --models the drafters are built for")
    parser.add_argument("--random", action="store_true", help="drafters with untrained weights")
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    tokenizer = AutoTokenizer.from_pretrained(str(args.models / "target"))
    tokens = _tokens_like_make_tiny_models(tokenizer)
    print(f"training on {len(tokens)} tokens")
    only = set(args.only.split(","))
    timings = {}
    target_dir = args.models / args.target
    for name, build in (
        ("qwen3-target", lambda: make_qwen3_target(args.models / "qwen3-target", tokenizer, tokens,
                                                   tokenizer.eos_token_id)),
        ("dflash", lambda: make_dflash(args.models / "dflash", target_dir, tokens,
                                       train=not args.random)),
        ("dspark", lambda: make_dspark(args.models / "dspark", target_dir, tokens,
                                       train=not args.random)),
        ("mtp-target", lambda: make_mtp_target(args.models / "mtp-target", tokenizer, tokens,
                                               tokenizer.eos_token_id, not args.random,
                                               base=_llama_target(args.models / "target"))),
    ):
        if name in only:
            started = time.monotonic()
            build()
            timings[name] = round(time.monotonic() - started, 1)
    print(json.dumps({"built_s": timings}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
