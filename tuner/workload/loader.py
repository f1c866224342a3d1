"""Load and validate a JSONL workload; every problem is reported as ``FILE:LINE: reason``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuner.errors import WorkloadError
from tuner.workload.model import Request, Workload

FIELDS = (
    "prompt", "messages", "max_tokens", "temperature", "top_p", "top_k", "seed",
    "n", "stop", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs",
    "response_format", "tools", "tool_choice",
    "repetition_penalty", "min_p", "logit_bias", "stop_token_ids",
    "arrival_s", "id", "output_tokens", "type",
)
CHAT_ONLY = ("top_logprobs", "tools", "tool_choice")
MAX_PROBLEMS = 20  # enough to fix a file in one go without flooding the terminal


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_messages(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list of {\"role\": ..., \"content\": ...} objects"
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"'messages[{i}]' must be an object with 'role' and 'content'"
        if not isinstance(message.get("role"), str) or not message["role"]:
            return f"'messages[{i}].role' must be a non-empty string"
        calls = message.get("tool_calls")
        if "tool_calls" in message and not (message["role"] == "assistant" and isinstance(calls, list)
                                            and calls and all(isinstance(c, dict) for c in calls)):
            return f"'messages[{i}].tool_calls' must be a non-empty list of calls on an assistant turn"
        if not isinstance(message.get("content"), str) and not (calls and message.get("content") is None):
            return f"'messages[{i}].content' must be a string (null only beside 'tool_calls')"
        if "tool_call_id" in message and not isinstance(message["tool_call_id"], str):
            return f"'messages[{i}].tool_call_id' must be a string"
    return None


def _check_logprobs(obj: dict[str, Any], chat: bool) -> str | None:
    """The two APIs' logprobs, as vLLM takes them: an int (-1: all) for completions; a bool,
    with ``top_logprobs`` only when it is true, for chat."""
    logprobs = obj.get("logprobs")
    if chat:
        if "logprobs" in obj and not isinstance(logprobs, bool):
            return f"'logprobs' of a chat request must be true or false, got {logprobs!r}"
        top = obj.get("top_logprobs")
        if "top_logprobs" in obj and not (_is_int(top) and top >= -1):
            return f"'top_logprobs' must be an integer >= 0 (or -1 for all), got {top!r}"
        if top and not logprobs:
            return "'top_logprobs' needs 'logprobs': true"
    elif "logprobs" in obj and not (_is_int(logprobs) and logprobs >= -1):
        return f"'logprobs' of a completion request must be an integer >= 0 (or -1 for all), got {logprobs!r}"
    return None


def _check_sampling(obj: dict[str, Any]) -> str | None:
    """n, stop, penalties, response_format and tools (these two opaque beyond their shape)."""
    if "top_k" in obj and not (_is_int(obj["top_k"]) and obj["top_k"] >= -1):
        return f"'top_k' must be an integer >= 0 (0 or -1: off), got {obj['top_k']!r}"
    if "n" in obj and not (_is_int(obj["n"]) and obj["n"] > 0):
        return f"'n' must be a positive integer, got {obj['n']!r}"
    stop = obj.get("stop")
    if "stop" in obj and not (isinstance(stop, str) or
                              (isinstance(stop, list) and all(isinstance(s, str) for s in stop))):
        return f"'stop' must be a string or a list of strings, got {stop!r}"
    if "repetition_penalty" in obj and not (_is_number(obj["repetition_penalty"]) and obj["repetition_penalty"] > 0):
        return f"'repetition_penalty' must be a number > 0, got {obj['repetition_penalty']!r}"
    if "min_p" in obj and not (_is_number(obj["min_p"]) and 0 <= obj["min_p"] <= 1):
        return f"'min_p' must be a number in [0, 1], got {obj['min_p']!r}"
    bias = obj.get("logit_bias")
    if "logit_bias" in obj and not (isinstance(bias, dict) and all(
            str(k).lstrip("-").isdigit() and _is_number(v) and -100 <= v <= 100 for k, v in bias.items())):
        return f"'logit_bias' must map token ids to numbers in [-100, 100], got {bias!r}"
    ids = obj.get("stop_token_ids")
    if "stop_token_ids" in obj and not (isinstance(ids, list) and all(_is_int(i) and i >= 0 for i in ids)):
        return f"'stop_token_ids' must be a list of token ids (integers >= 0), got {ids!r}"
    for name in ("presence_penalty", "frequency_penalty"):
        if name in obj and not (_is_number(obj[name]) and -2 <= obj[name] <= 2):
            return f"'{name}' must be a number in [-2, 2], got {obj[name]!r}"
    form = obj.get("response_format")
    if "response_format" in obj and not (isinstance(form, dict) and isinstance(form.get("type"), str)):
        return f"'response_format' must be an object with a string 'type', got {form!r}"
    tools = obj.get("tools")
    if "tools" in obj and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        return f"'tools' must be a list of tool objects, got {tools!r}"
    choice = obj.get("tool_choice")
    if "tool_choice" in obj and not isinstance(choice, (str, dict)):
        return f"'tool_choice' must be a string or an object, got {choice!r}"
    return None


def check_fields(obj: dict[str, Any]) -> str | None:
    """Return the first problem with one parsed line, or None when it is valid."""
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        return f"unknown field '{unknown[0]}' (known fields: {', '.join(FIELDS)})"
    has_prompt, has_messages = "prompt" in obj, "messages" in obj
    if not has_prompt and not has_messages:
        return "neither 'prompt' (completions API) nor 'messages' (chat API) is given"
    if has_prompt and has_messages:
        return "both 'prompt' and 'messages' are given; keep one"
    if has_prompt and (not isinstance(obj["prompt"], str) or not obj["prompt"]):
        return "'prompt' must be a non-empty string"
    if has_messages and (problem := _check_messages(obj["messages"])):
        return problem
    for name in ("max_tokens", "output_tokens"):
        if name in obj and not (_is_int(obj[name]) and obj[name] > 0):
            return f"'{name}' must be a positive integer, got {obj[name]!r}"
    if "seed" in obj and not (_is_int(obj["seed"]) and obj["seed"] >= 0):
        return f"'seed' must be a non-negative integer, got {obj['seed']!r}"
    if "temperature" in obj and not (_is_number(obj["temperature"]) and obj["temperature"] >= 0):
        return f"'temperature' must be a number >= 0, got {obj['temperature']!r}"
    if "top_p" in obj and not (_is_number(obj["top_p"]) and 0 < obj["top_p"] <= 1):
        return f"'top_p' must be a number in (0, 1], got {obj['top_p']!r}"
    if "arrival_s" in obj and not (_is_number(obj["arrival_s"]) and obj["arrival_s"] >= 0):
        return f"'arrival_s' must be a number of seconds >= 0, got {obj['arrival_s']!r}"
    if "id" in obj and not (isinstance(obj["id"], str) or _is_int(obj["id"])):
        return f"'id' must be a string or an integer, got {obj['id']!r}"
    if "type" in obj and not isinstance(obj["type"], str):
        return f"'type' must be a string, got {obj['type']!r}"
    if not has_messages and (chat_only := [name for name in CHAT_ONLY if name in obj]):
        return f"'{chat_only[0]}' is a chat field; a 'prompt' line cannot have it"
    return _check_logprobs(obj, has_messages) or _check_sampling(obj)


def not_utf8(path: Path, data: bytes, exc: UnicodeDecodeError) -> str:
    """``FILE:LINE:`` and column of the first byte that is not UTF-8, and the fix."""
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1  # in bytes
    return (f"{path}:{line}: byte 0x{data[exc.start]:02x} at column {column} is not UTF-8 "
            f"({exc.reason}); save the file as UTF-8")


# The fields a Request stores in another type than the JSON line's; the rest are kept as they are.
CONVERTED = {
    "messages": tuple,
    "stop": lambda stop: tuple(stop) if isinstance(stop, list) else stop,
    "arrival_s": float,
    "id": str,
    "stop_token_ids": tuple,
}


def _to_request(line: int, obj: dict[str, Any]) -> Request:
    """A checked line (``check_fields``) as a Request; an absent field is None."""
    return Request(line=line, **{name: CONVERTED[name](obj[name]) if name in CONVERTED else obj[name]
                                 for name in FIELDS if name in obj})


def load_workload(path: str | Path, workload_type: str | None = None) -> Workload:
    """Read a JSONL workload. Raises WorkloadError listing every bad line (up to MAX_PROBLEMS).

    The workload type is ``workload_type`` when given, else the file name stem
    (``code.jsonl`` -> ``code``).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise WorkloadError([f"{path}: no such file; pass the path of a JSONL workload"]) from None
    except IsADirectoryError:
        raise WorkloadError([f"{path}: is a folder; pass the path of a JSONL workload file"]) from None
    except UnicodeDecodeError as exc:
        raise WorkloadError([not_utf8(path, data, exc)]) from None
    except OSError as exc:
        raise WorkloadError([f"{path}: cannot be read ({exc.strerror}); check its permissions"]) from None

    problems: list[str] = []
    requests: list[Request] = []
    last_arrival: tuple[int, float] | None = None
    for number, raw in enumerate(text.split("\n"), start=1):  # not splitlines(): U+2028 is text
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{number}: invalid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{path}:{number}: each line must be a JSON object, got {type(obj).__name__}")
            continue
        if problem := check_fields(obj):
            problems.append(f"{path}:{number}: {problem}")
            continue
        request = _to_request(number, obj)
        if request.arrival_s is not None:
            if last_arrival is not None and request.arrival_s < last_arrival[1]:
                problems.append(
                    f"{path}:{number}: 'arrival_s' {request.arrival_s} is before {last_arrival[1]} "
                    f"on line {last_arrival[0]}; arrivals must not decrease"
                )
            last_arrival = (number, request.arrival_s)
        requests.append(request)

    if not problems and not requests:
        problems.append(f"{path}:1: the workload is empty; write one JSON request per line")
    if problems:
        if len(problems) > MAX_PROBLEMS:
            problems = problems[:MAX_PROBLEMS] + [f"{path}: ... and {len(problems) - MAX_PROBLEMS} more"]
        raise WorkloadError(problems)
    return Workload(path=path, type=workload_type or path.stem, requests=tuple(requests))
