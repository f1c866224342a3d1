"""Turn datasets the user already has into workload files; nothing is downloaded.

Formats (``FORMATS``):

- ``sharegpt``: one JSON array of ``{"id", "conversations": [{"from", "value"}, ...]}``
  (``role``/``content`` keys and ``user``/``assistant`` speakers are accepted too). As in
  vLLM's ShareGPT dataset, the first human turn is the prompt (after the system turn, when one
  precedes it) and the first reply after it gives the output length. Entries without a
  non-empty human turn or reply are skipped and counted, not reported as errors. Without a
  tokenizer the output length is an approximation: about 4 characters per English token,
  ``max(1, round(len(reply) / 4))``; with one it is the reply's token count.
- ``spec-bench``: Spec-Bench's ``question.jsonl``; the first turn is the prompt, the category
  picks the workload type (``SPEC_BENCH_TYPES``). It has no output lengths.
- ``vllm-custom``: the JSONL of ``vllm bench serve --dataset-name custom``: ``prompt`` and an
  optional ``output_tokens`` per line.
- ``openai-batch``: OpenAI Batch API input JSONL (``/v1/chat/completions`` and
  ``/v1/completions`` lines).

Imports carry no timing: no request gets ``arrival_s``, so the replay paces them itself.
Every problem is reported as ``FILE:LINE: reason`` in one WorkloadError.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from tuner.errors import UsageError, WorkloadError
from tuner.workload.loader import MAX_PROBLEMS, _is_int, _is_number, not_utf8
from tuner.workload.model import Request
from tuner.workload.tokens import load_tokenizer
from tuner.workload.writer import write_workload

FORMATS = ("sharegpt", "spec-bench", "vllm-custom", "openai-batch")

_MT_BENCH = ("writing", "roleplay", "reasoning", "extraction", "stem", "humanities")
SPEC_BENCH_TYPES = {
    "coding": "code", "math": "math", "math_reasoning": "math",
    "summarization": "summarization", "translation": "translation", "rag": "rag",
    "qa": "chat", **{category: "chat" for category in _MT_BENCH},
}

# ShareGPT speakers; chatgpt/bing/bard replies occur in the original ShareGPT dumps.
_SHAREGPT_ROLES = {
    "human": "user", "user": "user", "system": "system",
    "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
    "bing": "assistant", "bard": "assistant",
}
_BATCH_URLS = ("/v1/chat/completions", "/v1/completions")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
# A spec-bench category becomes a file name; keep it to one plain path component.
_TYPE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class _Bad(Exception):
    """One source record cannot be imported; the message is the reason."""


Convert = Callable[[int, Any], Request | None]  # None: a record skipped on purpose


def import_workload(
    fmt: str,
    source: Path,
    workload_type: str | None = None,
    tokenizer: str | None = None,
    *,
    report: Callable[[str], None] | None = None,
) -> dict[str, list[Request]]:
    """Read ``source`` in format ``fmt``; returns the requests grouped by workload type.

    Only spec-bench (without ``workload_type``) gives several groups. ``tokenizer`` is a local
    tokenizer folder that counts ShareGPT reply tokens. ``report`` receives notes that are not
    errors (skipped ShareGPT entries); by default they go to stderr.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown import format '{fmt}'; choose one of: {', '.join(FORMATS)}")
    if tokenizer is not None and fmt != "sharegpt":
        raise UsageError("--tokenizer only applies to --from sharegpt (the other formats "
                         "carry their own output lengths or none)")
    source = Path(source)
    text = _read(source)
    problems: list[str] = []
    records, convert = _reader(fmt, source, text, problems, workload_type, tokenizer)

    requests: list[Request] = []
    skipped = 0
    for line, obj in records:
        try:
            request = convert(line, obj)
        except _Bad as exc:
            problems.append(f"{source}:{line}: {exc}")
            continue
        if request is None:
            skipped += 1
        else:
            requests.append(request)

    if not problems and not requests:
        reason = f" ({skipped} entries skipped, see above)" if skipped else ""
        problems.append(f"{source}:1: no request could be imported{reason}")
    if skipped:
        (report or _to_stderr)(
            f"{source}: skipped {skipped} ShareGPT entries without a non-empty human turn "
            "and a reply after it")
    if problems:
        _raise(source, problems)
    return _group(requests)


def write_imported(groups: dict[str, list[Request]], out: Path) -> dict[Path, int]:
    """Write the groups of ``import_workload``; returns each written file and its count.

    One group goes to the file ``out`` (or to ``out/<type>.jsonl`` when ``out`` is an existing
    folder); several go to ``out/<type>.jsonl`` each.
    """
    if not groups:
        raise UsageError("nothing to write: no request was imported")
    out = Path(out)
    if len(groups) == 1:
        ((workload_type, requests),) = groups.items()
        path = out / f"{workload_type}.jsonl" if out.is_dir() else out
        return {path: write_workload(path, requests)}
    if (out.exists() and not out.is_dir()) or out.suffix == ".jsonl":
        raise UsageError(f"{out}: the import splits into {len(groups)} workload types "
                         f"({', '.join(groups)}); pass a folder for --out, or --type for one file")
    return {out / f"{t}.jsonl": write_workload(out / f"{t}.jsonl", rs) for t, rs in groups.items()}


# --- reading -------------------------------------------------------------------------------


def _to_stderr(note: str) -> None:
    print(note, file=sys.stderr)


def _read(source: Path) -> str:
    data = b""
    try:
        data = source.read_bytes()
        return data.decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"{source}: no such file; pass the path of the file to import") from None
    except IsADirectoryError:
        raise UsageError(f"{source}: is a folder; pass the path of the file to import") from None
    except UnicodeDecodeError as exc:
        raise UsageError(not_utf8(source, data, exc)) from None
    except OSError as exc:
        raise UsageError(
            f"{source}: cannot be read ({exc.strerror}); check its permissions") from None


def _reader(
    fmt: str, source: Path, text: str, problems: list[str],
    workload_type: str | None, tokenizer: str | None,
) -> tuple[Iterator[tuple[int, Any]], Convert]:
    """The records of ``text`` and the function that turns one into a Request."""
    if fmt == "sharegpt":
        convert = partial(_from_sharegpt, workload_type or "chat", _output_counter(tokenizer))
        return _array_records(source, text, problems), convert
    if fmt == "spec-bench":
        return _jsonl_records(source, text, problems), partial(_from_spec_bench, workload_type)
    # These formats say nothing about their traffic: the source file's name is the type,
    # as the loader takes it from a workload's file name.
    default_type = workload_type or source.stem
    if fmt == "vllm-custom":
        return _jsonl_records(source, text, problems), partial(_from_vllm_custom, default_type)
    return _jsonl_records(source, text, problems), partial(_from_openai_batch, default_type)


def _jsonl_records(source: Path, text: str, problems: list[str]) -> Iterator[tuple[int, Any]]:
    # split("\n"), not splitlines(): U+2028 and friends are valid inside JSON strings.
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            yield number, json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(f"{source}:{number}: invalid JSON ({exc.msg} at column {exc.colno})")


class _Lines:
    """Line numbers of increasing offsets in one text, counted as they go (files can be large)."""

    def __init__(self, text: str):
        self.text, self.offset, self.line = text, 0, 1

    def at(self, offset: int) -> int:
        self.line += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.line


def _array_records(source: Path, text: str, problems: list[str]) -> Iterator[tuple[int, Any]]:
    """Each element of a top-level JSON array with the line it starts on.

    A syntax error ends the walk: nothing after it can be located reliably.
    """
    decoder, lines = json.JSONDecoder(), _Lines(text)

    def syntax(msg: str, offset: int) -> None:
        exc = json.JSONDecodeError(msg, text, offset)
        problems.append(f"{source}:{exc.lineno}: invalid JSON ({exc.msg} at column {exc.colno})")

    pos = _JSON_SPACE.match(text, 0).end()
    if not text.startswith("[", pos):
        problems.append(f"{source}:{lines.at(pos)}: expected a JSON array '[' of conversation "
                        "objects (a ShareGPT file is one array, not JSON lines)")
        return
    pos = _JSON_SPACE.match(text, pos + 1).end()
    closed = text.startswith("]", pos)
    while not closed:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            syntax(exc.msg, exc.pos)
            return
        yield lines.at(pos), obj
        pos = _JSON_SPACE.match(text, end).end()
        if text.startswith(",", pos):
            pos = _JSON_SPACE.match(text, pos + 1).end()
        elif text.startswith("]", pos):
            closed = True
        else:
            syntax("Expecting ',' delimiter or ']'", pos)
            return
    pos = _JSON_SPACE.match(text, pos + 1).end()
    if pos < len(text):
        syntax("Extra data after the array", pos)


def _raise(source: Path, problems: list[str]) -> None:
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        problems = problems[:MAX_PROBLEMS] + [f"{source}: ... and {more} more"]
    raise WorkloadError(problems)


def _group(requests: list[Request]) -> dict[str, list[Request]]:
    """Requests by type in first-seen order; those without a source id get ``<type>-<n>``."""
    groups: dict[str, list[Request]] = {}
    for request in requests:
        group = groups.setdefault(request.type, [])
        if request.id is None:
            request = replace(request, id=f"{request.type}-{len(group) + 1}")
        group.append(request)
    return groups


# --- field checks shared by the formats -----------------------------------------------------


def _object(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _Bad(f"each {what} must be a JSON object, got {type(obj).__name__}")
    return obj


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad(f"'{name}' must be a non-empty string, got {value!r}")
    return value


def _source_id(obj: dict[str, Any], name: str) -> str | None:
    if name not in obj:
        return None
    if not (isinstance(obj[name], str) and obj[name]) and not _is_int(obj[name]):
        raise _Bad(f"'{name}' must be a non-empty string or an integer, got {obj[name]!r}")
    return str(obj[name])


def _positive(obj: dict[str, Any], name: str, label: str | None = None) -> int | None:
    if name not in obj:
        return None
    if not (_is_int(obj[name]) and obj[name] > 0):
        raise _Bad(f"'{label or name}' must be a positive integer, got {obj[name]!r}")
    return obj[name]


# --- sharegpt -------------------------------------------------------------------------------


def _output_counter(tokenizer: str | None) -> Callable[[str], int]:
    """Output tokens of a reply: counted by a local tokenizer, else about 4 characters each."""
    if tokenizer is None:
        return lambda reply: max(1, round(len(reply) / 4))
    counter = load_tokenizer(tokenizer)
    return lambda reply: max(1, len(counter(reply, add_special_tokens=False)["input_ids"]))


def _sharegpt_turn(index: int, turn: Any) -> tuple[str | None, str]:
    """(chat role or None for an unknown speaker, text) of one conversation turn."""
    if not isinstance(turn, dict):
        raise _Bad(f"'conversations[{index}]' must be an object, got {type(turn).__name__}")
    speaker_key = "from" if "from" in turn else "role"
    text_key = "value" if "value" in turn else "content"
    speaker, text = turn.get(speaker_key), turn.get(text_key)
    if not isinstance(speaker, str):
        raise _Bad(f"'conversations[{index}]' needs a 'from' (or 'role') string, got {speaker!r}")
    if not isinstance(text, str):
        raise _Bad(f"'conversations[{index}].{text_key}' must be a string, got {text!r}")
    return _SHAREGPT_ROLES.get(speaker.lower()), text


def _from_sharegpt(
    workload_type: str, count_tokens: Callable[[str], int], line: int, obj: Any,
) -> Request | None:
    entry = _object(obj, "array element")
    if "conversations" not in entry:
        raise _Bad("'conversations' is missing")
    conversations = entry["conversations"]
    if not isinstance(conversations, list):
        raise _Bad(f"'conversations' must be a list of turns, got {type(conversations).__name__}")
    request_id = _source_id(entry, "id")
    system: str | None = None
    prompt: str | None = None
    for index, turn in enumerate(conversations):
        role, text = _sharegpt_turn(index, turn)
        if prompt is None and role == "system" and system is None:
            system = text
        elif prompt is None and role == "user":
            prompt = text
        elif prompt is not None and role == "assistant":
            if not prompt.strip() or not text.strip():
                return None
            messages = ({"role": "system", "content": system},) if system and system.strip() else ()
            return Request(
                line=line, messages=messages + ({"role": "user", "content": prompt},),
                output_tokens=count_tokens(text), id=request_id, type=workload_type,
            )
    return None  # no human turn, or no reply after it


# --- spec-bench -----------------------------------------------------------------------------


def _from_spec_bench(workload_type: str | None, line: int, obj: Any) -> Request:
    question = _object(obj, "line")
    turns = question.get("turns")
    if not isinstance(turns, list) or not turns:
        raise _Bad(f"'turns' must be a non-empty list of strings, got {turns!r}")
    prompt = _text(turns[0], "turns[0]")
    if workload_type is None:
        category = _text(question.get("category"), "category")
        workload_type = SPEC_BENCH_TYPES.get(category, category)
        if not _TYPE_NAME.fullmatch(workload_type):
            raise _Bad(f"category {category!r} cannot name a workload file; "
                       "use letters, digits, '_', '-' and '.'")
    return Request(
        line=line, messages=({"role": "user", "content": prompt},),
        id=_source_id(question, "question_id"), type=workload_type,
    )


# --- vllm-custom ----------------------------------------------------------------------------


def _from_vllm_custom(workload_type: str, line: int, obj: Any) -> Request:
    row = _object(obj, "line")
    return Request(
        line=line, prompt=_text(row.get("prompt"), "prompt"),
        output_tokens=_positive(row, "output_tokens"), type=workload_type,
    )


# --- openai-batch ---------------------------------------------------------------------------


def _batch_content(index: int, content: Any) -> str:
    """A message's content as one string: text parts are joined with newlines."""
    name = f"body.messages[{index}].content"
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise _Bad(f"'{name}' must be a string or a non-empty list of text parts, got {content!r}")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        if kind != "text":
            raise _Bad(f"'{name}[{j}]' is a {kind!r} part; only text parts can be imported")
        if not isinstance(part.get("text"), str):
            raise _Bad(f"'{name}[{j}].text' must be a string, got {part.get('text')!r}")
        texts.append(part["text"])
    return "\n".join(texts)


def _batch_messages(messages: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(messages, list) or not messages:
        raise _Bad("a /v1/chat/completions body needs 'messages', a non-empty list")
    converted = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _Bad(f"'body.messages[{index}]' must be an object with 'role' and 'content'")
        role = _text(message.get("role"), f"body.messages[{index}].role")
        converted.append({"role": role, "content": _batch_content(index, message.get("content"))})
    return tuple(converted)


def _batch_prompt(prompt: Any) -> str:
    if isinstance(prompt, list):
        raise _Bad("'body.prompt' is a list; only a single string prompt can be imported")
    return _text(prompt, "body.prompt")


def _batch_sampling(body: dict[str, Any]) -> dict[str, Any]:
    """max_tokens, temperature, top_p and seed of a body, checked as the loader checks them."""
    # max_completion_tokens is the newer name of max_tokens; it wins when both are given.
    max_tokens = _positive(body, "max_completion_tokens", "body.max_completion_tokens")
    if max_tokens is None:
        max_tokens = _positive(body, "max_tokens", "body.max_tokens")
    temperature, top_p, seed = body.get("temperature"), body.get("top_p"), body.get("seed")
    if temperature is not None and not (_is_number(temperature) and temperature >= 0):
        raise _Bad(f"'body.temperature' must be a number >= 0, got {temperature!r}")
    if top_p is not None and not (_is_number(top_p) and 0 < top_p <= 1):
        raise _Bad(f"'body.top_p' must be a number in (0, 1], got {top_p!r}")
    if seed is not None and not (_is_int(seed) and seed >= 0):
        raise _Bad(f"'body.seed' must be a non-negative integer, got {seed!r}")
    return {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "seed": seed}


def _from_openai_batch(workload_type: str, line: int, obj: Any) -> Request:
    item = _object(obj, "line")
    url = item.get("url")
    if url not in _BATCH_URLS:
        raise _Bad(f"url {url!r} cannot be replayed; only {' and '.join(_BATCH_URLS)} can")
    if item.get("method", "POST") != "POST":
        raise _Bad(f"'method' must be POST, got {item['method']!r}")
    body = item.get("body")
    if not isinstance(body, dict):
        raise _Bad(f"'body' must be a JSON object, got {type(body).__name__}")
    chat = url == "/v1/chat/completions"
    return Request(
        line=line,
        messages=_batch_messages(body.get("messages")) if chat else None,
        prompt=None if chat else _batch_prompt(body.get("prompt")),
        **_batch_sampling(body),
        id=_source_id(item, "custom_id"), type=workload_type,
    )
