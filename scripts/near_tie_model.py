"""A tiny target whose greedy output speculation really changes on the CPU build: made from the
project's target in seconds (no training), for the test of the greedy-output check
(tests/integration/test_greedy_divergence_real.py).

vLLM's CPU build verifies k drafts in one forward pass of k+1 tokens, where plain decoding runs
one. In bfloat16 both give the same logits bit for bit (measured 2026-12-06: 16 requests, 40
exact ties among 1024 tokens, none flipped). In float32 they differ in the last bits (1024
tokens: 38 % of the top-2 log-probabilities differed, by up to 2.4e-6), but a trained model has
no ties that close. This model makes them: every odd token's ``lm_head`` row is its even
neighbour's plus noise of about one float32 step of a logit, so at every generated token the two
twins lead within ~1e-6 of each other and which one wins depends on the pass's shape. Served
with ``--dtype float32`` (the checkpoint is float32), a speculative config's greedy output parts
from the baseline's at a near-tie the tuner can locate and classify.

Usage: python scripts/near_tie_model.py [--target .models/target] [--out .models/near-tie]
The result is reused while this script and the target are unchanged (BUILT holds their
fingerprint).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
from pathlib import Path

SEED = 1234
# Noise on the twin rows: a logit is h . w with |h| ~ 14 after the final norm, so the twins'
# logits differ by about 14 * SIGMA ~ 5e-7, one float32 step at a logit of 5.
SIGMA = 3.5e-8
COPIED = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def fingerprint(target: Path) -> str:
    source = Path(__file__).resolve().read_bytes()
    built = (target / "BUILT").read_bytes() if (target / "BUILT").exists() else (target / "model.safetensors").read_bytes()
    return hashlib.sha256(source + built).hexdigest()[:16]


def make_near_tie(target: Path, out: Path) -> Path:
    """OUT: the target with twin ``lm_head`` rows, in float32; made again only when stale."""
    stamp = fingerprint(target)
    if (out / "BUILT").exists() and (out / "BUILT").read_text().strip() == stamp:
        return out
    import json

    import torch
    from safetensors.torch import load_file, save_file

    tensors = {name: t.float() for name, t in load_file(str(target / "model.safetensors")).items()}
    head = tensors["lm_head.weight"]
    generator = torch.Generator().manual_seed(SEED)
    head[1::2] = head[0::2] + SIGMA * torch.randn(head[0::2].shape, generator=generator)
    partial = out.with_name(f".{out.name}.{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    save_file({name: t.contiguous() for name, t in tensors.items()}, str(partial / "model.safetensors"),
              metadata={"format": "pt"})
    config = json.loads((target / "config.json").read_text())
    config["dtype"] = "float32"
    config.pop("torch_dtype", None)
    (partial / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for name in COPIED:
        if (target / name).exists():
            shutil.copy(target / name, partial / name)
    (partial / "BUILT").write_text(stamp + "\n")
    shutil.rmtree(out, ignore_errors=True)
    try:
        partial.rename(out)
    except OSError:  # another process put it there first
        shutil.rmtree(partial, ignore_errors=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, default=Path(".models/target"))
    parser.add_argument("--out", type=Path, default=Path(".models/near-tie"))
    args = parser.parse_args()
    print(make_near_tie(args.target, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
