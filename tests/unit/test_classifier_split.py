"""The classifier's held-out set split by source (issue 48): what makes it a test of new sources."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "classifier"


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines()]


def build_script():
    path = ROOT / "scripts" / "build_classifier_data.py"
    spec = importlib.util.spec_from_file_location("build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def body(row: dict) -> str:
    return json.dumps(row.get("messages") or row.get("prompt"))


def test_every_source_is_wholly_in_training_or_wholly_held_out():
    train, held = rows("train_by_source.jsonl"), rows("heldout_by_source.jsonl")
    assert not {r["source"] for r in train} & {r["source"] for r in held}
    # Held-out phrasings are used nowhere in training, and no held-out prompt is a training one.
    assert not {r["template"] for r in train} & {r["template"] for r in held}
    assert not {body(r) for r in train} & {body(r) for r in held}
    kinds = {"code", "chat", "summarization", "math", "translation", "rag"}
    assert {r["type"] for r in held} == kinds


def test_a_third_of_the_held_out_prompts_are_a_sources_own_text():
    held = rows("heldout_by_source.jsonl")
    build = build_script()
    verbatim = [r for r in held if r["template"] in build.VERBATIM_TEMPLATES]
    assert len(verbatim) * 3 >= len(held)
    assert {r["source"] for r in verbatim} <= build.VERBATIM_SOURCES


def test_chat_hard_negatives_have_no_text_to_transform():
    # docs/classifier.md: chat is the default; the hard negatives are single questions or requests.
    build = build_script()
    assert all("\n" not in text and len(text) < 200 for text in build.CHAT_HARD)
    # None of the prompts the tests keep as known misses is trained on.
    assert "How many days should I spend in Rome?" not in build.CHAT_HARD
