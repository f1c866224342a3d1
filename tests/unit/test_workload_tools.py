import importlib.util
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from tuner.errors import UsageError
from tuner.workload import Request, load_workload
from tuner.workload.classify import TYPES, classify, split_workload
from tuner.workload.sample import ks_distance, output_lengths, sample_workload
from tuner.outputs.workload import stats_table
from tuner.workload.stats import char_lengths, stats_dict, workload_stats

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / ".models" / "target"


def write(tmp_path: Path, objs: list[dict], name: str = "w.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def user(text: str, system: str | None = None) -> list[dict]:
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": text}]


def chat(text: str, system: str | None = None) -> dict:
    return {"messages": user(text, system)}


# ---------------------------------------------------------------- stats

SMALL = [
    {"prompt": "abcd", "max_tokens": 10, "output_tokens": 5, "arrival_s": 0, "type": "code"},
    {"messages": user("cdef", system="ab"), "output_tokens": 15, "arrival_s": 1, "type": "chat"},
    {"prompt": "x" * 10, "max_tokens": 20, "arrival_s": 2, "type": "code"},
    {"messages": user("hello"), "arrival_s": 3},
    {"prompt": "y" * 20, "output_tokens": 25, "arrival_s": 10},
]


def test_stats_counts_lengths_and_arrivals(tmp_path):
    stats = workload_stats(load_workload(write(tmp_path, SMALL, name="mix.jsonl")))
    assert stats.type == "mix" and stats.requests == 5
    assert (stats.chat, stats.completion, stats.chat_share) == (2, 3, 0.4)
    assert stats.types == {"code": 2, "chat": 1}

    # chars: 4, "ab" + "cdef" = 6, 10, 5, 20 -> sorted 4 5 6 10 20 (linear interpolation)
    p = stats.prompt
    assert stats.prompt_unit == "chars"
    assert (p.count, p.min, p.p50, p.max) == (5, 4, 6, 20)
    assert p.p90 == pytest.approx(16.0) and p.p99 == pytest.approx(19.6)
    assert p.mean == pytest.approx(9.0)

    o = stats.output  # 5 15 25
    assert (o.count, o.min, o.p50, o.max, o.mean) == (3, 5, 15, 25, 15)
    assert o.p90 == pytest.approx(23.0) and o.p99 == pytest.approx(24.8)
    assert (stats.output_tokens_given, stats.only_max_tokens, stats.no_output_length) == (3, 1, 1)

    a = stats.arrivals  # 0 1 2 3 10: four gaps in 10 s
    assert stats.missing_arrivals == 0
    assert a.span_s == 10 and a.rate_per_s == pytest.approx(0.4)
    assert a.bucket_s == pytest.approx(1.0)
    assert a.bucket_rates == pytest.approx([1, 1, 1, 1, 0, 0, 0, 0, 0, 1])
    # gaps 1 1 1 7: mean 2.5, population variance 6.75
    assert a.gap_cv == pytest.approx(math.sqrt(6.75) / 2.5)


def test_stats_without_arrivals_or_outputs(tmp_path):
    objs = [{"prompt": "ab", "arrival_s": 0}, {"prompt": "abcd", "max_tokens": 4}]
    stats = workload_stats(load_workload(write(tmp_path, objs)))
    assert stats.arrivals is None and stats.missing_arrivals == 1
    assert stats.output is None and (stats.only_max_tokens, stats.no_output_length) == (1, 1)
    assert stats.types == {} and stats.chat_share == 0
    text = render(stats)
    assert "missing on 1 of 2 lines" in text and "no line gives output_tokens" in text


def test_stats_poisson_gaps_have_cv_near_one(tmp_path):
    rng = np.random.default_rng(1)
    times = np.cumsum(rng.exponential(0.5, 2000))
    objs = [{"prompt": "p", "arrival_s": float(t)} for t in times]
    a = workload_stats(load_workload(write(tmp_path, objs))).arrivals
    assert a.gap_cv == pytest.approx(1.0, abs=0.1)
    assert a.rate_per_s == pytest.approx(2.0, rel=0.1)
    assert sum(r * a.bucket_s for r in a.bucket_rates) == pytest.approx(2000)


def test_stats_table_and_json(tmp_path):
    stats = workload_stats(load_workload(write(tmp_path, SMALL)))
    data = json.loads(json.dumps(stats_dict(stats)))
    assert data["chat_share"] == 0.4 and data["prompt_unit"] == "chars"
    assert data["prompt"]["p50"] == 6 and data["arrivals"]["rate_per_s"] == 0.4
    text = render(stats)
    assert "prompt length (chars)" in text and "0.40 requests/s" in text
    assert "1 give only max_tokens, 1 neither" in text


def render(stats) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(stats_table(stats))
    return console.export_text()


@pytest.mark.skipif(not (TARGET / "tokenizer.json").exists(), reason="no tiny target model")
def test_stats_in_tokens_with_the_real_tokenizer(tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(TARGET)
    objs = [{"prompt": "hello there"},
            {"messages": user("hello there", system="Be brief.")}]
    stats = workload_stats(load_workload(write(tmp_path, objs)), tokenizer=str(TARGET))
    assert stats.prompt_unit == "tokens"
    plain = len(tok("hello there")["input_ids"])
    # the chat goes through the model's template ("role: content" lines + "assistant:")
    chat = len(tok("system: Be brief.\nuser: hello there\nassistant:")["input_ids"])
    assert plain == 4 and chat > plain
    assert (stats.prompt.min, stats.prompt.max) == (plain, chat)
    chars = workload_stats(load_workload(write(tmp_path, objs))).prompt
    assert chars.max == len("Be brief.") + len("hello there")


def test_stats_bad_tokenizer_is_a_usage_error(tmp_path):
    workload = load_workload(write(tmp_path, SMALL))
    with pytest.raises(UsageError, match="--tokenizer .*missing: not a folder"):
        workload_stats(workload, tokenizer=str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="cannot load a tokenizer"):
        workload_stats(workload, tokenizer=str(tmp_path / "empty"))


# ---------------------------------------------------------------- sample

def trace(tmp_path: Path, n: int = 100, gap: float = 0.5, seed: int = 3) -> Path:
    """A skewed workload: log-normal prompt and output lengths, evenly spaced arrivals."""
    rng = np.random.default_rng(seed)
    prompts = np.maximum(1, rng.lognormal(4, 1.2, n)).astype(int)
    outputs = np.maximum(1, rng.lognormal(3.5, 1.0, n)).astype(int)
    objs = [{"id": f"r{i}", "prompt": "x" * int(p), "max_tokens": 512, "output_tokens": int(o),
             "arrival_s": round(i * gap, 3)} for i, (p, o) in enumerate(zip(prompts, outputs))]
    return write(tmp_path, objs, name="trace.jsonl")


def test_sample_size_ids_and_determinism(tmp_path):
    workload = load_workload(trace(tmp_path))
    first = sample_workload(workload, 10, seed=0)
    assert len(first) == 10
    ids = {r.id for r in first}
    assert len(ids) == 10 and ids <= {r.id for r in workload.requests}
    assert first == sample_workload(workload, 10, seed=0)
    assert [r.id for r in first] != [r.id for r in sample_workload(workload, 10, seed=1)]
    # one request from each block of 10 consecutive arrivals
    assert [int(r.id[1:]) // 10 for r in first] == list(range(10))


def test_sample_scales_arrivals_to_keep_the_rate(tmp_path):
    workload = load_workload(trace(tmp_path, n=100, gap=0.5))  # 2 requests/s
    by_id = {r.id: r for r in workload.requests}
    sample = sample_workload(workload, 20, seed=4)
    assert sample[0].arrival_s == 0
    first = by_id[sample[0].id].arrival_s
    for r in sample:
        assert r.arrival_s == pytest.approx((by_id[r.id].arrival_s - first) * 20 / 100)
        assert r.output_tokens == by_id[r.id].output_tokens and r.line == by_id[r.id].line
    rate = (len(sample) - 1) / sample[-1].arrival_s  # one over the mean gap, as in stats
    assert rate == pytest.approx(2.0, rel=0.15)


def test_sample_matches_lengths_better_than_plain_random(tmp_path):
    workload = load_workload(trace(tmp_path, n=300, seed=7))
    requests = list(workload.requests)
    prompts = np.array(char_lengths(requests), dtype=float)
    outputs = output_lengths(requests)

    def distance(picked: list[Request]) -> float:
        return max(ks_distance(char_lengths(picked), prompts),
                   ks_distance(output_lengths(picked), outputs))

    ours, plain = [], []
    for seed in range(10):
        ours.append(distance(sample_workload(workload, 20, seed)))
        idx = np.random.default_rng(seed).choice(len(requests), 20, replace=False)
        plain.append(distance([requests[i] for i in idx]))
    assert np.mean(ours) < np.mean(plain)
    assert max(ours) <= np.median(plain)


def test_sample_edges(tmp_path):
    workload = load_workload(trace(tmp_path, n=5))
    assert sample_workload(workload, 5, seed=0) == list(workload.requests)
    assert sample_workload(workload, 50, seed=0) == list(workload.requests)
    with pytest.raises(UsageError, match="at least 1"):
        sample_workload(workload, 0, seed=0)

    no_arrivals = load_workload(write(tmp_path, [{"prompt": f"p{i}"} for i in range(9)]))
    sample = sample_workload(no_arrivals, 3, seed=0)
    assert [(r.line - 1) // 3 for r in sample] == [0, 1, 2]  # file order, one per block of 3
    assert all(r.arrival_s is None for r in sample)


def test_ks_distance():
    assert ks_distance([1, 2, 3], [1, 2, 3]) == 0
    assert ks_distance([1, 2], [3, 4]) == 1
    assert ks_distance([1, 2, 3, 4], [1, 2]) == pytest.approx(0.5)
    assert ks_distance([], [1]) == 1 and ks_distance([float("nan")], []) == 0


# ---------------------------------------------------------------- classify

@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (chat("Summarize the following article in three sentences:\n\nThe council voted..."),
         "summarization"),
        (chat("Please translate this into French: where is the station?"), "translation"),
        (chat("Bonjour", system="You are a translator. Reply in English."), "translation"),
        (chat("Solve for x: 3x + 5 = 20"), "math"),
        (chat("What is 17 * 23?"), "math"),
        ({"prompt": "Compute $\\frac{3}{4} + \\frac{1}{8}$ ="}, "math"),
        ({"prompt": "def add(a, b):\n    return "}, "code"),
        (chat("Write a SQL query that lists users older than 30"), "code"),
        (chat("Context:\n[doc 1] The tower is 330 m tall.\n\nQuestion: How tall is it?"), "rag"),
        ({"prompt": "def f():\n    return 1"}, "code"),
        (chat("Can you summarize the main ideas of Stoic philosophy?"), "chat"),
        ({"prompt": "Once upon a time"}, "other"),
        ({"prompt": "def add(a, b):\n    return ", "type": "autocomplete"}, "autocomplete"),
    ],
)
def test_classify_one_case_per_type(tmp_path, line, expected):
    (request,) = load_workload(write(tmp_path, [line])).requests
    assert classify(request) == expected


# Cases the cue rules got right and the learned classifier gets wrong: very short prompts whose
# material is a fragment (its training material is whole articles, passages and functions).
# Strict: a model that gets one right again fails here, so the list stays true (docs/lab/classifier.md).
@pytest.mark.xfail(strict=True, reason="known miss of the learned classifier (docs/lab/classifier.md)")
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (chat("Answer based on the provided documents only.\n\nWho founded it?"), "rag"),
        (chat("Fix this bug:\n```python\nprint(x\n```"), "code"),
        (chat("How many days should I spend in Rome?"), "chat"),
    ],
)
def test_known_misses_on_fragments(tmp_path, line, expected):
    (request,) = load_workload(write(tmp_path, [line])).requests
    assert classify(request) == expected


def test_split_sets_the_type_and_keeps_order(tmp_path):
    objs = [{"prompt": "def f():\n    return 1"}, chat("Hi there!"),
            {"prompt": "import os\n"}, {"prompt": "Hello", "type": "greeting"}]
    workload = load_workload(write(tmp_path, objs))
    groups = split_workload(workload)
    kinds = [classify(r) for r in workload.requests]
    assert list(groups) == list(dict.fromkeys(kinds)) and kinds[-1] == "greeting"
    assert [[r.line for r in rs] for rs in groups.values()] == \
        [[i + 1 for i, k in enumerate(kinds) if k == kind] for kind in groups]
    assert all(r.type == kind for kind, rs in groups.items() for r in rs)
    assert set(groups) - {"greeting"} <= set(TYPES)


@pytest.mark.parametrize("kind", ["code", "chat", "summarization", "math", "rag"])
def test_library_workloads_classify_as_their_type(kind):
    path = ROOT / "workloads" / f"{kind}.jsonl"
    if not path.exists():
        pytest.skip(f"{path.name} is not in the library")
    workload = load_workload(path)
    # The library's files were written here and never trained on: a learned classifier gets most,
    # not all, of them (docs/lab/classifier.md lists the misses).
    wrong = [r.label for r in workload.requests if classify(r) != kind]
    assert len(wrong) <= len(workload.requests) // 5, wrong


def accuracy_benchmark():
    """benchmarks/classifier_accuracy.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "classifier_accuracy", ROOT / "benchmarks" / "classifier_accuracy.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_accuracy_on_the_held_out_split():
    # benchmarks/classifier_accuracy.py on the split the model never trained on
    # (docs/lab/classifier.md): the floors, 90 % overall and 80 % for every type.
    bench = accuracy_benchmark()
    pairs, _ = bench.measure(ROOT / "benchmarks" / "data" / "classifier" / "heldout.jsonl")
    total = sum(pairs.values())
    right = sum(n for (truth, guess), n in pairs.items() if truth == guess)
    assert right / total >= 0.9
    for kind in ("code", "chat", "summarization", "math", "translation", "rag"):
        n = sum(c for (truth, _), c in pairs.items() if truth == kind)
        assert pairs[kind, kind] / n >= 0.8, kind


def test_the_accuracy_benchmark_measures_the_weights_it_is_given(tmp_path):
    # benchmarks/classifier_accuracy.py --weights: an experiment's model, without replacing the
    # package's. Weights that always say code: every line is guessed code.
    import numpy as np

    bench = accuracy_benchmark()
    weights = tmp_path / "always_code.npz"
    np.savez_compressed(weights, labels=np.array(["chat", "code"]), columns=np.array([0], np.int32),
                        weights=np.zeros((1, 2), np.float16), bias=np.array([0.0, 5.0], np.float32))
    path = ROOT / "benchmarks" / "data" / "classifier" / "heldout_by_source.jsonl"
    pairs, _ = bench.measure(path, weights=weights)
    assert {guess for _, guess in pairs} == {"code"}
    assert sum(pairs.values()) == len(path.read_text().splitlines())
    shipped, _ = bench.measure(path)
    assert len({guess for _, guess in shipped}) > 1
