import json
from pathlib import Path

import pytest

from tuner.errors import WorkloadError
from tuner.workload import load_workload, write_workload

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, *lines: str, name: str = "w.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    return info.value.problems


def test_loads_prompt_and_messages_and_takes_type_from_stem(tmp_path):
    path = write(
        tmp_path,
        json.dumps({"prompt": "def f():", "max_tokens": 8, "arrival_s": 0, "id": 7}),
        "",
        json.dumps({"messages": [{"role": "user", "content": "hi"}], "arrival_s": 0.5,
                    "temperature": 0, "top_p": 1, "seed": 3, "output_tokens": 12}),
        name="code.jsonl",
    )
    workload = load_workload(path)
    assert workload.type == "code"
    assert [r.line for r in workload.requests] == [1, 3]
    first, second = workload.requests
    assert first.prompt == "def f():" and not first.is_chat and first.id == "7"
    assert second.is_chat and second.output_tokens == 12 and second.arrival_s == 0.5
    assert workload.has_arrivals
    assert load_workload(path, "refactor").type == "refactor"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"prompt": "x"', "invalid JSON"),
        ('["prompt"]', "must be a JSON object"),
        ('{"max_tokens": 3}', "neither 'prompt'"),
        ('{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}', "both 'prompt' and 'messages'"),
        ('{"prompt": 5}', "'prompt' must be a non-empty string"),
        ('{"messages": []}', "'messages' must be a non-empty list"),
        ('{"messages": [{"role": "user"}]}', "'messages[0].content' must be a string"),
        ('{"prompt": "a", "max_tokens": "8"}', "'max_tokens' must be a positive integer"),
        ('{"prompt": "a", "max_tokens": true}', "'max_tokens' must be a positive integer"),
        ('{"prompt": "a", "output_tokens": 0}', "'output_tokens' must be a positive integer"),
        ('{"prompt": "a", "temperature": -1}', "'temperature' must be a number >= 0"),
        ('{"prompt": "a", "top_p": 1.5}', "'top_p' must be a number in (0, 1]"),
        ('{"prompt": "a", "seed": -2}', "'seed' must be a non-negative integer"),
        ('{"prompt": "a", "arrival_s": -0.1}', "'arrival_s' must be a number of seconds >= 0"),
        ('{"prompt": "a", "arrival_s": "soon"}', "'arrival_s' must be a number"),
        ('{"prompt": "a", "id": [1]}', "'id' must be a string or an integer"),
        ('{"prompt": "a", "max_token": 3}', "unknown field 'max_token'"),
        ('{"prompt": "a", "n": 0}', "'n' must be a positive integer"),
        ('{"prompt": "a", "top_k": -2}', "'top_k' must be an integer >= 0"),
        ('{"prompt": "a", "min_p": 2}', "'min_p' must be a number in [0, 1]"),
        ('{"prompt": "a", "repetition_penalty": 0}', "'repetition_penalty' must be a number > 0"),
        ('{"prompt": "a", "logit_bias": {"x": 1}}', "'logit_bias' must map token ids to numbers"),
        ('{"prompt": "a", "stop_token_ids": [-1]}', "'stop_token_ids' must be a list of token ids"),
        ('{"messages": [{"role": "assistant", "content": null}]}',
         "'messages[0].content' must be a string (null only beside 'tool_calls')"),
        ('{"messages": [{"role": "user", "content": "a", "tool_calls": [{}]}]}',
         "'messages[0].tool_calls' must be a non-empty list of calls on an assistant turn"),
        ('{"prompt": "a", "stop": ["x", 1]}', "'stop' must be a string or a list of strings"),
        ('{"prompt": "a", "presence_penalty": 2.5}', "'presence_penalty' must be a number in [-2, 2]"),
        ('{"prompt": "a", "frequency_penalty": "1"}', "'frequency_penalty' must be a number in [-2, 2]"),
        ('{"prompt": "a", "logprobs": true}', "'logprobs' of a completion request must be an integer"),
        ('{"messages": [{"role": "user", "content": "b"}], "logprobs": 2}', "must be true or false"),
        ('{"messages": [{"role": "user", "content": "b"}], "top_logprobs": 2}', "needs 'logprobs': true"),
        ('{"messages": [{"role": "user", "content": "b"}], "logprobs": true, "top_logprobs": -2}',
         "'top_logprobs' must be an integer >= 0"),
        ('{"prompt": "a", "response_format": "json"}', "'response_format' must be an object"),
        ('{"messages": [{"role": "user", "content": "b"}], "tools": {"type": "function"}}',
         "'tools' must be a list of tool objects"),
        ('{"messages": [{"role": "user", "content": "b"}], "tool_choice": 1}', "'tool_choice' must be"),
        ('{"prompt": "a", "tools": []}', "'tools' is a chat field"),
    ],
)
def test_each_bad_line_is_reported_with_file_and_line(tmp_path, line, reason):
    path = write(tmp_path, '{"prompt": "fine"}', line)
    (problem,) = problems(path)
    assert problem.startswith(f"{path}:2: ")
    assert reason in problem


def test_decreasing_arrival_names_both_lines(tmp_path):
    path = write(tmp_path, '{"prompt": "a", "arrival_s": 2}', '{"prompt": "b", "arrival_s": 1}')
    (problem,) = problems(path)
    assert problem.startswith(f"{path}:2: ")
    assert "before 2.0 on line 1" in problem


def test_every_bad_line_is_listed(tmp_path):
    path = write(tmp_path, "{", '{"prompt": "ok"}', "nope", '{"messages": 1}')
    found = problems(path)
    assert [p.split(": ")[0] for p in found] == [f"{path}:1", f"{path}:3", f"{path}:4"]


def test_empty_file(tmp_path):
    path = write(tmp_path, "", "  ")
    assert problems(path) == [f"{path}:1: the workload is empty; write one JSON request per line"]


def test_missing_file_and_folder(tmp_path):
    assert "no such file" in problems(tmp_path / "missing.jsonl")[0]
    assert "is a folder" in problems(tmp_path)[0]


def test_not_utf8_names_the_line_and_column_of_the_first_bad_byte(tmp_path):
    path = tmp_path / "bin.jsonl"
    # Line 1 is UTF-8 beyond ASCII; line 3 is Latin-1 (é as one byte); line 4 is not reached.
    path.write_bytes('{"prompt": "é"}\n'.encode() + b'\n{"prompt": "caf\xe9"}\n{"prompt": "\xff"}\n')
    assert problems(path) == [f"{path}:3: byte 0xe9 at column 16 is not UTF-8 (invalid continuation byte); "
                              "save the file as UTF-8"]


@pytest.mark.parametrize("name", ["code", "chat"])
def test_shipped_workloads_load(name):
    workload = load_workload(ROOT / "workloads" / f"{name}.jsonl")
    assert workload.type == name
    assert len(workload) >= 40
    assert workload.has_arrivals
    assert all(r.is_chat for r in workload.requests) == (name == "chat")


def test_default_seeds_only_for_sampled_requests_without_one(tmp_path):
    path = write(tmp_path, '{"prompt": "a", "temperature": 0}', '{"prompt": "b", "temperature": 0.7}',
                 '{"prompt": "c", "seed": 9}', '{"prompt": "d"}')
    seeded = load_workload(path).with_default_seeds(100)
    assert [r.seed for r in seeded.requests] == [None, 102, 9, 104]


def test_sampling_output_and_tool_fields_load_and_write_back(tmp_path):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    lines = [
        {"prompt": "a", "top_k": 20, "n": 2, "stop": ["\n\n", "END"], "presence_penalty": 0.5,
         "frequency_penalty": -1, "logprobs": 3, "response_format": {"type": "json_object"},
         "output_tokens": 8},
        {"messages": [{"role": "user", "content": "b"}], "stop": "x", "logprobs": True,
         "top_logprobs": 5, "tools": tools, "tool_choice": {"type": "function", "function": {"name": "f"}}},
    ]
    path = write(tmp_path, *(json.dumps(line) for line in lines))
    first, second = load_workload(path).requests
    assert (first.n, first.stop, first.choices, first.output_tokens) == (2, ("\n\n", "END"), 2, 8)
    assert (first.presence_penalty, first.frequency_penalty, first.logprobs) == (0.5, -1, 3)
    assert first.response_format == {"type": "json_object"}
    assert (second.stop, second.logprobs, second.top_logprobs, second.tools) == ("x", True, 5, tools)
    assert second.choices == 1 and second.tool_choice["function"] == {"name": "f"}
    # The writer keeps every field: a file written back loads to the same requests.
    again = tmp_path / "again.jsonl"
    write_workload(again, load_workload(path).requests)
    assert [json.loads(x) for x in again.read_text().splitlines()] == lines
