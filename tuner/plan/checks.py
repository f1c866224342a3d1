"""Checks made before any server starts: can this space work with the installed vLLM and
these checkpoints? Each problem is one sentence naming the cause and the fix; a check that
cannot be made (a hub checkpoint not in the local cache) is one warning line, never silence."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.engine import SpecConfig
from tuner.engine.spec_config import ADAPTIVE_FIELD
from tuner.engine.gpus import parse_gpus, split_gpus
from tuner.engine.checkpoints import BLOCK_METHODS, Checkpoint, missing_local
from tuner.engine.installed import gives_aux_hidden_states, installed_vllm_schema
from tuner.errors import UsageError
from tuner.plan.space import FIXED_K, SearchSpace
from tuner.store import RunOrigin

# Fields that make two configs the same model (a renamed local copy still matches).
IDENTITY = ("architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "intermediate_size", "vocab_size")
AUX_METHODS = frozenset({"eagle3", *BLOCK_METHODS})


def check_target(model: str) -> None:
    """A target given as a path must be there (a hub name is vLLM's to resolve)."""
    if missing_local(model):
        raise UsageError(f"--model '{model}' does not exist; pass the path of a model folder or a hub name")


def check_space(space: SearchSpace, model: str, extra_fields: set[str] = frozenset()) -> list[str]:
    """Raise UsageError for the first thing in the space that cannot work; return the warnings
    (checks that could not be made) for the caller to show."""
    check_target(model)
    target = Checkpoint.find(model)
    warnings = []
    if not target.readable and any(space.drafts.values()):
        warnings.append(f"warning: the target '{model}' has no config.json here or in the local hub "
                        "cache, so the drafts' fit to it was not checked")
    for method, drafts in space.drafts.items():
        for draft in drafts:
            if missing_local(draft):
                raise UsageError(f"the {method} draft '{draft}' does not exist; "
                                 "pass the path of a checkpoint folder or a hub name")
            found = Checkpoint.find(draft)
            if not found.readable:
                warnings.append(f"warning: the {method} draft '{draft}' has no config.json here or in "
                                "the local hub cache (the tuner never downloads), so its fit to the "
                                "target was not checked")
                continue
            if target.readable:
                warnings += check_draft(method, found, target)
    if "mtp" in space.methods:
        mtp = Checkpoint.find(space.drafts["mtp"][0]) if space.drafts.get("mtp") else target
        if mtp.readable:
            check_mtp(mtp, space.ks)
        else:
            warnings.append(f"warning: '{mtp.name}' has no config.json here or in the local hub cache, "
                            "so whether it carries MTP layers was not checked")
    # Last: reading the installed vLLM imports it in a child process (seconds).
    schema = installed_vllm_schema()
    if schema is not None:
        unknown = [m for m in space.methods if m not in schema["methods"]]
        if unknown:
            raise UsageError(f"method '{unknown[0]}' is not known to the installed vLLM "
                             f"(it knows: {', '.join(schema['methods'])}); drop it or upgrade vLLM")
        if space.adaptive and ADAPTIVE_FIELD not in schema["fields"]:
            raise UsageError("the installed vLLM has no adaptive verification (enable_adaptive_verification: "
                             "vLLM 0.28 and later for dspark, 0.30 for the other drafters); upgrade vLLM "
                             "or drop --adaptive-verification")
        bad_fields = sorted(extra_fields - set(schema["fields"]))
        if bad_fields:
            raise UsageError(f"'{bad_fields[0]}' is not a speculative-config field of the installed vLLM")
    return warnings


def _a(method: str) -> str:
    return f"an {method}" if method[0] in "aeiou" else f"a {method}"


def check_config(config: SpecConfig | None, model: str) -> list[str]:
    """The same checks for one configuration (``tuner measure``); None: the baseline."""
    if config is None:
        check_target(model)
        return []
    fixed = {config.method: config.k} if config.method in FIXED_K else {}
    drafts = {config.method: (config.draft_model,)} if config.draft_model else {}
    return check_space(SearchSpace(methods=(config.method,), ks=(config.k,), drafts=drafts, fixed_k=fixed),
                       model)


def check_draft(method: str, draft: Checkpoint, target: Checkpoint) -> list[str]:
    """Raise UsageError where ``draft`` cannot serve as ``method``'s drafter over ``target``."""
    name, model = draft.name, target.name
    inferred = draft.method
    # EAGLE-1 heads and MTP checkpoints often carry plain architecture names: only drafters that
    # name themselves (EAGLE-3, DFlash, DSpark, speculators) are matched against the method.
    if inferred != method and (inferred is not None or method in AUX_METHODS):
        if inferred:
            raise UsageError(f"the {method} draft '{name}' is a drafter for --method {inferred}, not "
                             f"{method}; pass it as --method {inferred} or pick {_a(method)} checkpoint")
        plain = ", ".join(draft.architectures) or "no architectures"
        raise UsageError(f"the {method} draft '{name}' is a plain model ({plain}), not {_a(method)} "
                         f"drafter; pass it as --method draft_model or pick {_a(method)} checkpoint")
    warnings = check_verifier(draft, target)
    if method == "draft_model":
        draft_vocab, target_vocab = draft.get("vocab_size"), target.get("vocab_size")
        if draft_vocab and target_vocab and draft_vocab != target_vocab:
            raise UsageError(f"the draft '{name}' has vocabulary size {draft_vocab} but the target "
                             f"'{model}' has {target_vocab}; a draft_model must share the "
                             "target's tokenizer")
    if method in AUX_METHODS:
        check_target_gives_hidden_states(method, target)
        check_hidden_size(method, draft, target)
        check_aux_layers(method, draft, target)
        check_vocabulary(method, draft, target)
    if method in BLOCK_METHODS:
        check_block_drafter(method, draft)
    return warnings


def check_verifier(draft: Checkpoint, target: Checkpoint) -> list[str]:
    """The target a speculators checkpoint names must be this target: their configs are compared
    (a local copy under another folder name passes)."""
    verifier = draft.verifier
    named = verifier.get("name_or_path")
    if not named:
        return []
    resolved = Checkpoint.find(named)
    if resolved.readable:
        differ = [key for key in IDENTITY if resolved.get(key) != target.get(key)]
        if differ:
            key = differ[0]
            raise UsageError(f"the draft '{draft.name}' was trained for '{named}', not for "
                             f"'{target.name}' ({key}: {resolved.get(key)} there, {target.get(key)} "
                             "here); pick a draft made for this target")
        return []
    architectures = verifier.get("architectures")
    if architectures and target.architectures and list(architectures) != target.architectures:
        raise UsageError(f"the draft '{draft.name}' was trained for '{named}' ({', '.join(architectures)}), "
                         f"not for '{target.name}' ({', '.join(target.architectures)}); pick a draft "
                         "made for this target")
    return [f"warning: the draft '{draft.name}' names its target '{named}', whose config.json is not "
            "here or in the local hub cache, so only the architecture names were compared"]


def check_hidden_size(method: str, draft: Checkpoint, target: Checkpoint) -> None:
    wanted, have = draft.get("target_hidden_size") or draft.get("hidden_size"), target.get("hidden_size")
    if wanted and have and wanted != have:
        raise UsageError(f"the {method} draft '{draft.name}' expects a target with hidden size "
                         f"{wanted} but '{target.name}' has {have}; it was made for another model: "
                         "pick a drafter trained for this target")


def check_aux_layers(method: str, draft: Checkpoint, target: Checkpoint) -> None:
    """The target layers whose hidden states the drafter reads: inside the target, distinct, and
    as many as its ``fc`` takes."""
    layers = target.num_layers
    if not layers:
        return
    ids = draft.aux_layer_ids
    where = f"the {method} draft '{draft.name}'"
    if ids is None and method == "eagle3":
        default = sorted({2, layers // 2, layers - 3})
        if len(default) < 3 or min(default) < 0:
            raise UsageError(f"{where} has no eagle_aux_hidden_state_layer_ids, and vLLM's default "
                             f"layers for a {layers}-layer target (2, {layers // 2}, {layers - 3}) "
                             "collide; add \"eagle_aux_hidden_state_layer_ids\": three distinct ids "
                             f"in 0..{layers} to its config.json")
        ids = default
    if ids is None:
        return
    outside = [i for i in ids if not 0 <= i <= layers]
    if outside:
        raise UsageError(f"{where} reads the hidden state of layer {outside[0]}, outside the target's "
                         f"layers 0..{layers} ('{target.name}' has {layers}); it was made for a deeper "
                         "model: pick a drafter trained for this target")
    if len(set(ids)) != len(ids):
        raise UsageError(f"{where} names the aux layers {ids}, with repeats; vLLM collects each layer "
                         "once and the drafter then gets fewer hidden states than it expects: make "
                         "the ids in its config.json distinct")
    fc = draft.tensor_shapes.get("fc.weight")
    hidden = target.get("hidden_size")
    if method == "eagle3" and fc and hidden and fc[1] != len(ids) * hidden:
        raise UsageError(f"{where} takes {fc[1] // hidden if fc[1] % hidden == 0 else fc[1] / hidden} "
                         f"hidden states in its fc layer but names {len(ids)} aux layers ({ids}); set "
                         "eagle_aux_hidden_state_layer_ids to as many layers as it was trained on")


def check_vocabulary(method: str, draft: Checkpoint, target: Checkpoint) -> None:
    """A draft vocabulary smaller than the target's must map into it (``d2t``, ``t2d``)."""
    import numpy as np

    target_vocab = target.get("vocab_size")
    if not target_vocab:
        return
    where = f"the {method} draft '{draft.name}'"
    head_vocab = draft.get("vocab_size")
    if head_vocab and head_vocab != target_vocab:
        raise UsageError(f"{where} has vocabulary size {head_vocab} but the target '{target.name}' has "
                         f"{target_vocab}; it was made for another tokenizer: pick a drafter trained "
                         "for this target")
    draft_vocab = draft.get("draft_vocab_size") or target_vocab
    lm_head = draft.tensor_shapes.get("lm_head.weight")
    if lm_head and lm_head[0] != draft_vocab:
        raise UsageError(f"{where} says draft_vocab_size {draft_vocab} but its lm_head has {lm_head[0]} "
                         "rows; set draft_vocab_size in its config.json to the lm_head's rows")
    if draft_vocab == target_vocab:
        return
    d2t = draft.tensor("d2t")
    if d2t is None:
        if "d2t" in draft.tensor_shapes or not draft.tensor_shapes:
            return  # present but unreadable here, or no weights to read: the server will say
        raise UsageError(f"{where} drafts from {draft_vocab} tokens of the target's {target_vocab} but "
                         "has no d2t map from draft to target token ids; use a checkpoint with its "
                         "d2t tensor")
    mapped = np.arange(len(d2t)) + d2t
    if len(d2t) != draft_vocab or mapped.min() < 0 or mapped.max() >= target_vocab or len(set(mapped.tolist())) != len(mapped):
        raise UsageError(f"{where}'s d2t map does not map its {draft_vocab} draft tokens onto distinct "
                         f"ids of the target's {target_vocab}-token vocabulary; the head was made for "
                         "another tokenizer: pick a drafter trained for this target")
    t2d = draft.tensor("t2d")
    if t2d is not None and (len(t2d) != target_vocab or not t2d[mapped].all() or t2d.sum() != draft_vocab):
        raise UsageError(f"{where}'s t2d mask disagrees with its d2t map (the {draft_vocab} tokens d2t "
                         "names must be exactly those t2d marks); rebuild the maps from one token list")


def check_block_drafter(method: str, draft: Checkpoint) -> None:
    if draft.block_k is None:
        raise UsageError(f"the {method} draft '{draft.name}' has no block_size in its config.json, so "
                         "its k is unknown; use a checkpoint that states the block size it was trained for")


def check_target_gives_hidden_states(method: str, target: Checkpoint) -> None:
    """EAGLE-3 and the block drafters read the target's intermediate hidden states: its model class
    in the installed vLLM must hand them out (Llama, Qwen and most others do; GPT-2 does not)."""
    for architecture in target.architectures[:1]:
        if gives_aux_hidden_states(architecture) is False:
            raise UsageError(f"the target '{target.name}' ({architecture}) does not hand its hidden "
                             f"states to a drafter in the installed vLLM, which {method} reads; pick "
                             "another method (ngram, draft_model) or a target that does")


def check_mtp(checkpoint: Checkpoint, ks: tuple[int, ...]) -> None:
    """MTP drafts with the model's own multi-token-prediction layers: it must have some, and a k
    beyond their number must be a multiple of it (vLLM reuses the layers in turn)."""
    text = checkpoint.get("text_config") or {}
    layers = next((v for v in (checkpoint.get("num_nextn_predict_layers"), checkpoint.get("mtp_num_hidden_layers"),
                               text.get("num_nextn_predict_layers"), text.get("mtp_num_hidden_layers"))
                   if isinstance(v, int)), 0)
    if layers < 1:
        raise UsageError(f"'{checkpoint.name}' carries no MTP layers (no num_nextn_predict_layers in its "
                         "config.json), so method mtp has nothing to draft with; drop --method mtp or "
                         "use a model trained with MTP layers (DeepSeek-V3, MiMo, Qwen3-Next, GLM-4.5, ...)")
    bad = [k for k in ks if k > layers and k % layers]
    if bad:
        raise UsageError(f"'{checkpoint.name}' has {layers} MTP layers, and vLLM needs a larger k to be a "
                         f"multiple of that: drop k = {', '.join(map(str, bad))} from --k")


# A closed loop of C clients over fewer than this many requests per client is mostly ramp-up
# and tail, and its replays disagree far more than at concurrency 1 (docs/lab/gpu.md).
MIN_REQUESTS_PER_CLIENT = 4


def check_loads(requests: int, loads) -> list[str]:
    """A warning per closed-loop level the workload is too short for (figures would be noisy)."""
    return [f"warning: the workload has {requests} requests, {requests / load.concurrency:.1f} per client "
            f"at {load.label}: that replay is mostly ramp-up and tail, so its tokens/s is noisy; give "
            f"at least {MIN_REQUESTS_PER_CLIENT * load.concurrency} requests or more --repeats"
            for load in loads
            if load.mode == "concurrency" and load.concurrency > 1
            and requests < MIN_REQUESTS_PER_CLIENT * load.concurrency]


# Whether the installed vLLM's rejection sampler can run the synthetic acceptance that
# --synthetic-acceptance asks for: on the CPU build it cannot (its sampler kernels assert against
# it, and the engine dies at the first verification, after a server start). Asked of the kernel
# itself, so a build that learns it passes.
def check_synthetic_acceptance() -> None:
    """Refuse --synthetic-acceptance where the installed vLLM cannot run the synthetic sampler,
    before any server starts (a vLLM that cannot be asked is let through: the server will say)."""
    from tuner.engine.installed import synthetic_sampler_refusal

    if refused := synthetic_sampler_refusal():
        raise UsageError(f"--synthetic-acceptance cannot run on the installed vLLM ({refused}: its engine "
                         "would die at the first request); drop --synthetic-acceptance, or run the "
                         "what-if study on a GPU host's vLLM")


def local_gpu_sets(url: str, workers: int, join: bool, gpus: str | None) -> Sequence[tuple[int, ...] | None]:
    """The GPUs of each of this host's ``workers`` (None: the host's), once the study's database
    is one they can share."""
    if (workers > 1 or join) and url.startswith("sqlite"):
        raise UsageError("several workers on one study need a database they can share: SQLite "
                         "is one file on one host and locks under concurrent writers; pass "
                         "--db postgresql://USER@HOST/DB")
    if workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    owned = parse_gpus(gpus)
    return split_gpus(owned, workers) if owned else [None] * workers


def check_same_origin(origins: Sequence[RunOrigin], here: RunOrigin, join: bool) -> None:
    """Refuse to resume (or join) a study whose figures were measured elsewhere: another host,
    GPU or workload file would be compared and pooled with them as if alike. A helper worker
    (``join``) may be on another host, never on another GPU or workload."""
    for before in origins:
        if before.workload_hash != here.workload_hash:
            what = (f"another version of the workload ({before.workload_file} then, "
                    f"{here.workload_file} now, different contents)")
        elif before.gpu_name and here.gpu_name and before.gpu_name != here.gpu_name:
            what = f"another GPU ({before.gpu_name}, this host has {here.gpu_name})"
        elif not join and before.host != here.host:
            what = f"another host ({before.host}, this is {here.host})"
        else:
            continue
        raise UsageError(f"this study's trials were measured on {what}, and its figures would be "
                         "compared with this run's as if alike; give a new --name to start a study "
                         "here, or resume it where it ran")


def check_same_vllm(origins: Sequence[RunOrigin], version: str | None) -> None:
    """Refuse a run whose server reports another vLLM than the study's earlier runs measured."""
    before = sorted({o.vllm_version for o in origins if o.vllm_version})
    if version and before and version not in before:
        raise UsageError(f"this study's trials were measured with vLLM {' and '.join(before)}, and this "
                         f"host's server runs vLLM {version}: their figures do not compare; give a new "
                         "--name to start a study with this vLLM, or resume it with the one it ran")
