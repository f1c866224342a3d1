"""Make the tiny models the demo and the tests serve, without any network access.

Trains, on text every Python install carries (the standard library's code and the prose of
its documentation topics and licence texts):
  - a byte-level BPE tokenizer (vocab 2048) with a plain chat template,
  - a target Llama (4 layers, hidden 256),
  - a draft Llama for method draft_model (1 layer, hidden 128, same tokenizer),
  - a weaker draft of the same shape (40 steps of plain training, no distillation),
  - an EAGLE-3 head for the target, trained on its hidden states (scripts/tiny_eagle3.py),
  - a DFlash drafter for the target, and a DSpark one with untrained weights, and a MiMo-style
    target (the target's weights in Qwen2 layers) carrying an MTP layer
    (scripts/tiny_block_drafters.py, docs/lab/block-drafters.md),
so that acceptance really differs between code and chat traffic.

The result goes to OUT (default .models/) and is reused while these scripts are unchanged; --only
makes a subset (`make demo` makes the four models it serves). Each finished model is also kept in
a cache outside the checkout, by the fingerprint of these scripts ($TUNER_MODELS_CACHE, default
~/.cache/specdec-tuner/tiny-models; "off" keeps none): a fresh clone on a machine that made the
same models before copies them instead of training for minutes again, as pip reuses its wheels.
Usage: python scripts/make_tiny_models.py [--out .models] [--only target,eagle3,...] [--force]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_block_drafters import make_dflash, make_dspark, make_mtp_target  # noqa: E402

VOCAB = 2048
SEQ_LEN = 128
SEED = 1234
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
MODELS = {
    # name: (layers, hidden, heads, intermediate, training steps)
    "target": (4, 256, 4, 768, 200),
    "draft": (1, 128, 2, 384, 250),  # distillation loss 0.07 at 250 steps, 0.06 at 400
    # A second, worse draft (trained briefly on the text, not distilled): searches over drafts
    # of different quality (benchmarks/search_efficiency.py) need one.
    "draft-weak": (1, 128, 2, 384, 40),
}


def corpus() -> tuple[list[str], list[str]]:
    """Code (stdlib sources) and prose (pydoc topics, licence texts), in a fixed order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    code = []
    for path in sorted(stdlib.glob("*.py")):
        try:
            code.append(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    import pydoc_data.topics

    prose = [pydoc_data.topics.topics[key] for key in sorted(pydoc_data.topics.topics)]
    for path in sorted(Path("/usr/share/common-licenses").glob("*")):
        if path.is_file():
            prose.append(path.read_text(encoding="utf-8", errors="ignore"))
    return code, prose


def train_tokenizer(texts: list[str], out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>",
                                   bos_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def train_model(name: str, tokens, out: Path, eos_id: int, teacher=None):
    """Train one model for its number of steps. With a ``teacher``, the model is distilled from the
    teacher's next-token distribution, so that it proposes what the target would say."""
    import torch
    import torch.nn.functional as F
    from transformers import LlamaConfig, LlamaForCausalLM

    layers, hidden, heads, intermediate, steps = MODELS[name]
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=hidden, intermediate_size=intermediate,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=1024, bos_token_id=eos_id, eos_token_id=eos_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    generator = torch.Generator().manual_seed(SEED)
    batch, step, started = 16, 0, time.monotonic()
    model.train()
    # A fixed number of steps (not a time budget): the same models on every machine, so that
    # acceptance, and whether speculation pays, does not depend on how busy the trainer was.
    while step < steps:
        starts = torch.randint(0, len(tokens) - SEQ_LEN - 1, (batch,), generator=generator)
        x = torch.stack([tokens[s:s + SEQ_LEN] for s in starts])
        if teacher is None:
            loss = model(input_ids=x, labels=x).loss
        else:
            with torch.no_grad():
                target_logp = F.log_softmax(teacher(input_ids=x).logits, dim=-1)
            logp = F.log_softmax(model(input_ids=x).logits, dim=-1)
            loss = F.kl_div(logp.flatten(0, 1), target_logp.flatten(0, 1), log_target=True,
                            reduction="batchmean")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 50 == 0:
            print(f"  {name}: step {step}, loss {loss.item():.2f}", flush=True)
    print(f"  {name}: {step} steps in {time.monotonic() - started:.0f} s, loss {loss.item():.2f}")
    model.eval()
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    return model.float()


def scripts_fingerprint() -> str:
    """What made the models: this script and its tiny_*.py helpers."""
    here = Path(__file__).resolve().parent
    sources = [Path(__file__).resolve(), *sorted(here.glob("tiny_*.py"))]
    return hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]


def models_cache(fingerprint: str) -> Path | None:
    setting = os.environ.get("TUNER_MODELS_CACHE", "")
    if setting.lower() == "off":
        return None
    root = Path(setting) if setting else Path.home() / ".cache" / "specdec-tuner" / "tiny-models"
    try:
        (root / fingerprint).mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: train as before
        return None
    return root / fingerprint


ALL = ("target", "draft", "draft-weak", "eagle3", "dflash", "dspark", "mtp-target")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".models"))
    parser.add_argument("--only", default=",".join(ALL),
                        help=f"comma-separated models to make (default: all of {', '.join(ALL)})")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args()
    wanted = [name for name in ALL if name in args.only.split(",")]
    if unknown := set(args.only.split(",")) - set(ALL):
        parser.error(f"unknown model {sorted(unknown)[0]!r}; choose from {', '.join(ALL)}")

    fingerprint = scripts_fingerprint()

    # Each model folder records the fingerprint it was made with (BUILT): `make demo` makes the
    # four it serves, `make test` then only the rest. STAMP, which the tests read, is written once
    # every model is up to date.
    def up_to_date(name: str) -> bool:
        built = args.out / name / "BUILT"
        return built.exists() and built.read_text().strip() == fingerprint

    def done(name: str) -> None:
        (args.out / name / "BUILT").write_text(fingerprint + "\n")

    cache = models_cache(fingerprint)
    if cache is not None and not args.force:
        for name in wanted:
            if not up_to_date(name) and (cache / name / "BUILT").exists():
                shutil.copytree(cache / name, args.out / name, dirs_exist_ok=True)
                print(f"  {name}: copied from {cache}")

    def keep(name: str) -> None:
        """Into the cache whole or not at all: copied beside it, then renamed."""
        if cache is None or (cache / name).exists():
            return
        partial = cache / f".{name}.{os.getpid()}"
        shutil.copytree(args.out / name, partial)
        try:
            partial.rename(cache / name)
        except OSError:  # another run put it there first
            shutil.rmtree(partial, ignore_errors=True)

    missing = [name for name in wanted if args.force or not up_to_date(name)]
    if not missing:
        for name in wanted:
            keep(name)
        if all(up_to_date(name) for name in ALL):  # every model copied: stamp as training would
            (args.out / "STAMP").write_text(fingerprint + "\n")
        print(f"tiny models in {args.out} are up to date ({', '.join(wanted)})")
        return 0

    import torch
    from tiny_eagle3 import make_eagle3_head  # imports torch: not needed when every model is copied

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    random.seed(SEED)
    code, prose = corpus()
    print(f"corpus: {sum(map(len, code)) / 1e6:.1f} MB code, {sum(map(len, prose)) / 1e6:.1f} MB prose")
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer_dir = args.out / "target"
    have_target = "target" not in missing and up_to_date("target")
    if have_target:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    else:
        tokenizer = train_tokenizer(code + prose, tokenizer_dir)
    # Equal shares of code and prose tokens, so the models know both kinds of text.
    code_ids = tokenizer("\n".join(code))["input_ids"]
    prose_ids = tokenizer("\n".join(prose))["input_ids"]
    share = min(len(code_ids), len(prose_ids))
    tokens = torch.tensor(code_ids[:share] + prose_ids[:share], dtype=torch.long)
    print(f"training on {len(tokens)} tokens; making {', '.join(missing)}")
    if have_target:
        from transformers import LlamaForCausalLM

        # As train_model returns it: the saved bfloat16 weights, in float32.
        target = LlamaForCausalLM.from_pretrained(str(tokenizer_dir), torch_dtype=torch.float32).eval()
    else:
        target = train_model("target", tokens, tokenizer_dir, tokenizer.eos_token_id)
        tokenizer.save_pretrained(tokenizer_dir)
        done("target")
        keep("target")
    builders = {
        "draft": lambda out: train_model("draft", tokens, out, tokenizer.eos_token_id, teacher=target),
        "draft-weak": lambda out: train_model("draft-weak", tokens, out, tokenizer.eos_token_id),
        "eagle3": lambda out: print(f"  eagle3: {make_eagle3_head(out, target, tokens)}"),
        "dflash": lambda out: make_dflash(out, tokenizer_dir, tokens),
        # vLLM 0.32's CPU build cannot serve DSpark (its V2 model runner needs Triton): a
        # checkpoint that loads is enough to show the server's cause, so its weights are not trained.
        "dspark": lambda out: make_dspark(out, tokenizer_dir, tokens, train=False),
        "mtp-target": lambda out: make_mtp_target(out, tokenizer, tokens, tokenizer.eos_token_id, base=target),
    }
    for name in missing:
        if name == "target":
            continue
        builders[name](args.out / name)
        if name in MODELS:
            tokenizer.save_pretrained(args.out / name)
        done(name)
        keep(name)
    if all(up_to_date(name) for name in ALL):
        (args.out / "STAMP").write_text(fingerprint + "\n")
    print(json.dumps({name: str((args.out / name).resolve()) for name in wanted}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
