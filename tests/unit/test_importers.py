import json
from pathlib import Path

import pytest

from tuner.errors import UsageError, WorkloadError
from tuner.workload import load_workload
from tuner.workload.importers import FORMATS, import_workload, write_imported

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / ".models" / "target"


def write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def problems(fmt: str, source: Path, **kwargs) -> list[str]:
    with pytest.raises(WorkloadError) as info:
        import_workload(fmt, source, **kwargs)
    return info.value.problems


def turn(speaker: str, text: str) -> dict[str, str]:
    return {"from": speaker, "value": text}


# --- sharegpt --------------------------------------------------------------------------------


def test_sharegpt_takes_first_human_turn_and_reply(tmp_path):
    entries = [
        {"id": "a1", "conversations": [turn("system", "Be brief."), turn("human", "Hi there"),
                                       turn("gpt", "x" * 40), turn("human", "more"),
                                       turn("gpt", "y" * 400)]},
        # role/content keys and user/assistant speakers; a leading gpt turn is not the prompt
        {"conversations": [{"role": "assistant", "content": "welcome"},
                           {"role": "user", "content": "Q?"},
                           {"role": "assistant", "content": "ab"}]},
        {"id": 7, "conversations": [turn("human", "no reply")]},
        {"id": "b", "conversations": [turn("gpt", "only a reply")]},
        {"id": "c", "conversations": []},
    ]
    source = tmp_path / "sg.json"
    source.write_text(json.dumps(entries, indent=2))
    notes: list[str] = []
    groups = import_workload("sharegpt", source, report=notes.append)

    assert list(groups) == ["chat"]
    first, second = groups["chat"]
    assert first.messages == ({"role": "system", "content": "Be brief."},
                              {"role": "user", "content": "Hi there"})
    assert first.output_tokens == 10 and first.id == "a1" and first.type == "chat"
    assert first.line == 2 and first.arrival_s is None and first.max_tokens is None
    assert second.messages == ({"role": "user", "content": "Q?"},)
    assert second.output_tokens == 1  # max(1, round(2 / 4))
    assert second.id == "chat-2"
    assert notes == [f"{source}: skipped 3 ShareGPT entries without a non-empty human turn "
                     "and a reply after it"]

    out = tmp_path / "out" / "chat.jsonl"
    assert write_imported(groups, out) == {out: 2}
    loaded = load_workload(out)
    assert [(r.id, r.messages, r.output_tokens) for r in loaded.requests] == [
        ("a1", first.messages, 10), ("chat-2", second.messages, 1)]


def test_sharegpt_type_option_and_compact_file(tmp_path):
    source = tmp_path / "sg.json"
    entry = {"conversations": [turn("human", "a"), turn("gpt", "bbbb")]}
    source.write_text(json.dumps([entry, entry]))
    groups = import_workload("sharegpt", source, workload_type="support", report=lambda _: None)
    assert [(r.id, r.type, r.line) for r in groups["support"]] == [
        ("support-1", "support", 1), ("support-2", "support", 1)]


def test_sharegpt_output_tokens_from_local_tokenizer(tmp_path):
    if not TOKENIZER.is_dir():
        pytest.skip("no local tokenizer; run `make models`")
    from transformers import AutoTokenizer

    reply = "The quick brown fox jumps over the lazy dog. " * 3
    source = tmp_path / "sg.json"
    entry = {"conversations": [turn("human", "Tell me"), turn("gpt", reply)]}
    source.write_text(json.dumps([entry]))
    (request,) = import_workload("sharegpt", source, tokenizer=str(TOKENIZER))["chat"]
    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
    expected = len(tokenizer(reply, add_special_tokens=False)["input_ids"])
    assert request.output_tokens == expected
    assert expected != max(1, round(len(reply) / 4))  # the tokenizer, not the estimate, counted


def test_sharegpt_tokenizer_must_be_a_local_folder(tmp_path):
    source = tmp_path / "sg.json"
    source.write_text("[]")
    with pytest.raises(UsageError, match="not a folder"):
        import_workload("sharegpt", source, tokenizer="Qwen/Qwen3-8B")


def test_sharegpt_bad_elements_are_reported_with_their_line(tmp_path):
    source = write(
        tmp_path, "sg.json",
        "[",
        '  {"id": "ok", "conversations": [{"from": "human", "value": "q"},'
        ' {"from": "gpt", "value": "a"}]},',
        '  {"id": "x"},',
        '  "just a string",',
        '  {"conversations": {"from": "human"}},',
        '  {"conversations": [{"from": "human", "value": 5}]},',
        '  {"id": [1], "conversations": []}',
        "]",
    )
    assert problems("sharegpt", source) == [
        f"{source}:3: 'conversations' is missing",
        f"{source}:4: each array element must be a JSON object, got str",
        f"{source}:5: 'conversations' must be a list of turns, got dict",
        f"{source}:6: 'conversations[0].value' must be a string, got 5",
        f"{source}:7: 'id' must be a non-empty string or an integer, got [1]",
    ]


def test_sharegpt_syntax_error_gives_line_and_column(tmp_path):
    source = write(tmp_path, "sg.json",
                   "[", '  {"conversations": []},', '  {"conversations": [}', "]")
    (problem,) = problems("sharegpt", source)
    assert problem.startswith(f"{source}:3: invalid JSON (")
    assert "column 22" in problem


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"conversations": []}\n', ":1: expected a JSON array"),
        ('\n\n[{"conversations": []} {"conversations": []}]',
         ":3: invalid JSON (Expecting ',' delimiter or ']'"),
        ('[]\n\n]', ":3: invalid JSON (Extra data after the array"),
        ("", ":1: expected a JSON array"),
        ("[]", ":1: no request could be imported"),
    ],
)
def test_sharegpt_top_level_shape(tmp_path, text, reason):
    source = tmp_path / "sg.json"
    source.write_text(text)
    (problem,) = problems("sharegpt", source)
    assert problem.startswith(f"{source}{reason}")


def test_sharegpt_all_skipped_is_no_request(tmp_path):
    source = tmp_path / "sg.json"
    source.write_text(json.dumps([{"conversations": [turn("human", "q")]}]))
    notes: list[str] = []
    assert problems("sharegpt", source, report=notes.append) == [
        f"{source}:1: no request could be imported (1 entries skipped, see above)"]
    assert len(notes) == 1


# --- spec-bench ------------------------------------------------------------------------------


def question(qid: int, category: str, first: str = "Q") -> str:
    return json.dumps({"question_id": qid, "category": category, "turns": [first, "follow-up"]})


def test_spec_bench_splits_by_category_into_files(tmp_path):
    source = write(
        tmp_path, "question.jsonl",
        question(81, "writing", "Write a poem"), question(121, "coding", "Sort a list"),
        "", question(200, "math_reasoning"), question(300, "translation"),
        question(301, "qa"), question(302, "math"), question(400, "poetry"),
    )
    groups = import_workload("spec-bench", source)
    assert {t: [r.id for r in rs] for t, rs in groups.items()} == {
        "chat": ["81", "301"], "code": ["121"], "math": ["200", "302"],
        "translation": ["300"], "poetry": ["400"]}
    code = groups["code"][0]
    assert code.messages == ({"role": "user", "content": "Sort a list"},)
    assert code.line == 2 and code.type == "code"
    assert code.output_tokens is None and code.max_tokens is None and code.arrival_s is None

    out = tmp_path / "imported"
    written = write_imported(groups, out)
    assert written == {out / "chat.jsonl": 2, out / "code.jsonl": 1, out / "math.jsonl": 2,
                       out / "translation.jsonl": 1, out / "poetry.jsonl": 1}
    for path, count in written.items():
        workload = load_workload(path)
        assert len(workload) == count and workload.type == path.stem
        assert {r.type for r in workload.requests} == {path.stem}


def test_spec_bench_type_option_gives_one_file(tmp_path):
    source = write(tmp_path, "question.jsonl", question(1, "coding"), question(2, "writing"))
    groups = import_workload("spec-bench", source, workload_type="mixed")
    assert [(r.id, r.type) for r in groups["mixed"]] == [("1", "mixed"), ("2", "mixed")]
    out = tmp_path / "mixed.jsonl"
    assert write_imported(groups, out) == {out: 2}
    assert len(load_workload(out)) == 2


def test_spec_bench_bad_lines(tmp_path):
    source = write(
        tmp_path, "question.jsonl",
        question(1, "coding"),
        '{"question_id": 2, "category": "writing", "turns": []}',
        '{"question_id": 3, "category": "writing", "turns": ["x"]',
        '{"question_id": 4, "turns": ["x"]}',
        '{"question_id": 5, "category": "../evil", "turns": ["x"]}',
        '[1, 2]',
    )
    found = problems("spec-bench", source)
    assert [p.split(": ", 1)[0] for p in found] == [f"{source}:{n}" for n in (2, 3, 4, 5, 6)]
    assert "'turns' must be a non-empty list" in found[0]
    assert "invalid JSON" in found[1]
    assert "'category' must be a non-empty string" in found[2]
    assert "cannot name a workload file" in found[3]
    assert "each line must be a JSON object, got list" in found[4]


# --- vllm-custom -----------------------------------------------------------------------------


def test_vllm_custom_prompts_and_output_tokens(tmp_path):
    source = write(
        tmp_path, "bench.jsonl",
        json.dumps({"prompt": "def f():", "output_tokens": 64, "extra": "ignored"}),
        json.dumps({"prompt": "hello"}),
    )
    groups = import_workload("vllm-custom", source)
    assert list(groups) == ["bench"]
    first, second = groups["bench"]
    assert (first.prompt, first.output_tokens, first.id, first.line) == (
        "def f():", 64, "bench-1", 1)
    assert (second.prompt, second.output_tokens, second.id, second.is_chat) == (
        "hello", None, "bench-2", False)

    out = tmp_path / "code.jsonl"
    groups = import_workload("vllm-custom", source, workload_type="code")
    assert write_imported(groups, out) == {out: 2}
    loaded = load_workload(out)
    assert [(r.prompt, r.output_tokens, r.type) for r in loaded.requests] == [
        ("def f():", 64, "code"), ("hello", None, "code")]


def test_vllm_custom_bad_lines(tmp_path):
    source = write(
        tmp_path, "bench.jsonl",
        '{"prompt": "ok"}',
        '{"output_tokens": 3}',
        '{"prompt": "a", "output_tokens": 0}',
        '{"prompt": ""}',
        'not json',
        '{"prompt": "a", "output_tokens": "12"}',
    )
    assert problems("vllm-custom", source) == [
        f"{source}:2: 'prompt' must be a non-empty string, got None",
        f"{source}:3: 'output_tokens' must be a positive integer, got 0",
        f"{source}:4: 'prompt' must be a non-empty string, got ''",
        f"{source}:5: invalid JSON (Expecting value at column 1)",
        f"{source}:6: 'output_tokens' must be a positive integer, got '12'",
    ]


def test_problems_are_capped_like_the_loader(tmp_path):
    source = write(tmp_path, "bench.jsonl", *(['{"nope": 1}'] * 25))
    found = problems("vllm-custom", source)
    assert len(found) == 21
    assert found[-1] == f"{source}: ... and 5 more"


# --- openai-batch ----------------------------------------------------------------------------


def batch(custom_id: str, url: str, body: dict) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body})


def test_openai_batch_chat_and_completions(tmp_path):
    source = write(
        tmp_path, "batchinput.jsonl",
        batch("req-1", "/v1/chat/completions", {
            "model": "m", "max_completion_tokens": 100, "temperature": 0.7, "top_p": 0.9, "seed": 4,
            "messages": [{"role": "system", "content": "Be kind."},
                         {"role": "user", "content": [{"type": "text", "text": "Line one"},
                                                      {"type": "text", "text": "Line two"}]}]}),
        batch("req-2", "/v1/completions", {"model": "m", "prompt": "Once upon", "max_tokens": 16}),
    )
    groups = import_workload("openai-batch", source, workload_type="support")
    chat, completion = groups["support"]
    assert chat.messages == ({"role": "system", "content": "Be kind."},
                             {"role": "user", "content": "Line one\nLine two"})
    assert (chat.id, chat.max_tokens, chat.temperature, chat.top_p, chat.seed) == (
        "req-1", 100, 0.7, 0.9, 4)
    assert chat.prompt is None and chat.output_tokens is None and chat.arrival_s is None
    assert (completion.id, completion.prompt, completion.max_tokens, completion.line) == (
        "req-2", "Once upon", 16, 2)

    out = tmp_path / "support.jsonl"
    assert write_imported(groups, out) == {out: 2}
    loaded = load_workload(out)
    assert [(r.id, r.is_chat, r.max_tokens) for r in loaded.requests] == [
        ("req-1", True, 100), ("req-2", False, 16)]
    assert loaded.requests[0].messages == chat.messages


def test_openai_batch_default_type_is_the_source_name(tmp_path):
    source = write(tmp_path, "nightly.jsonl", json.dumps(
        {"url": "/v1/completions", "body": {"prompt": "p"}}))
    (request,) = import_workload("openai-batch", source)["nightly"]
    assert (request.id, request.type, request.prompt) == ("nightly-1", "nightly", "p")


def test_openai_batch_bad_lines(tmp_path):
    chat = "/v1/chat/completions"
    source = write(
        tmp_path, "batch.jsonl",
        batch("ok", chat, {"messages": [{"role": "user", "content": "hi"}]}),
        batch("emb", "/v1/embeddings", {"input": "x"}),
        batch("img", chat, {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": "u"}}]}]}),
        batch("many", "/v1/completions", {"prompt": ["a", "b"]}),
        batch("nomsg", chat, {"prompt": "x"}),
        batch("seed", chat, {"messages": [{"role": "user", "content": "hi"}], "seed": -1}),
        batch("temp", chat, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}),
        json.dumps({"custom_id": "nobody", "url": chat}),
    )
    assert problems("openai-batch", source) == [
        f"{source}:2: url '/v1/embeddings' cannot be replayed; only /v1/chat/completions and "
        "/v1/completions can",
        f"{source}:3: 'body.messages[0].content[1]' is a 'image_url' part; "
        "only text parts can be imported",
        f"{source}:4: 'body.prompt' is a list; only a single string prompt can be imported",
        f"{source}:5: a /v1/chat/completions body needs 'messages', a non-empty list",
        f"{source}:6: 'body.seed' must be a non-negative integer, got -1",
        f"{source}:7: 'body.max_tokens' must be a positive integer, got 0",
        f"{source}:8: 'body' must be a JSON object, got NoneType",
    ]


# --- common ----------------------------------------------------------------------------------


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(UsageError) as info:
        import_workload("alpaca", tmp_path / "x.json")
    assert "unknown import format 'alpaca'" in str(info.value)
    assert all(fmt in str(info.value) for fmt in FORMATS)
    with pytest.raises(UsageError, match="no such file"):
        import_workload("vllm-custom", tmp_path / "missing.jsonl")
    with pytest.raises(UsageError, match="only applies to --from sharegpt"):
        import_workload("vllm-custom", write(tmp_path, "a.jsonl", '{"prompt": "x"}'), tokenizer="t")


def test_empty_jsonl_is_no_request(tmp_path):
    source = write(tmp_path, "empty.jsonl", "", "   ")
    assert problems("vllm-custom", source) == [f"{source}:1: no request could be imported"]


def test_write_imported_destinations(tmp_path):
    source = write(tmp_path, "question.jsonl", question(1, "coding"), question(2, "writing"))
    groups = import_workload("spec-bench", source)
    with pytest.raises(UsageError, match="pass a folder for --out"):
        write_imported(groups, tmp_path / "all.jsonl")
    (tmp_path / "taken").write_text("")
    with pytest.raises(UsageError, match="splits into 2 workload types"):
        write_imported(groups, tmp_path / "taken")
    # one group into an existing folder: the file is named after its type
    folder = tmp_path / "workloads"
    folder.mkdir()
    one = import_workload("spec-bench", source, workload_type="mixed")
    assert write_imported(one, folder) == {folder / "mixed.jsonl": 2}
