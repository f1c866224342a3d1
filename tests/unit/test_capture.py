"""The capture proxy's own rules, against a small stand-in upstream (no vLLM here).

tests/integration/test_capture_real.py is the proof with the real vLLM server behind the proxy.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from tuner.engine.server import free_port
from tuner.errors import UsageError
from tuner.replay.client import request_body
from tuner.workload import load_workload
from tuner.workload.capture import CaptureSettings, parse_listen, recordable, run_capture


def _chunk(text: str | None, usage: dict | None = None, index: int = 0) -> bytes:
    body: dict = {"id": "x", "choices": [] if text is None else [{"index": index, "text": text}]}
    if usage:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


async def _completions(request: web.Request) -> web.StreamResponse:
    """Answers 'a b c' (3 tokens) per choice; waits `delay` seconds first when the prompt says so."""
    body = await request.json()
    if body.get("prompt") == "bad":
        return web.json_response({"error": "bad prompt"}, status=400)
    if match := re.search(r"delay=([\d.]+)", body.get("prompt", "")):
        await asyncio.sleep(float(match.group(1)))
    n = body.get("n", 1)
    usage = {"prompt_tokens": 2, "completion_tokens": 3 * n, "total_tokens": 2 + 3 * n}  # as vLLM: all choices
    if not body.get("stream"):
        return web.json_response({"choices": [{"index": i, "text": "a b c"} for i in range(n)], "usage": usage})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for word in ("a", " b", " c"):
        for index in range(n):
            await response.write(_chunk(word, index=index))
    if (body.get("stream_options") or {}).get("include_usage"):
        await response.write(_chunk(None, usage))
    await response.write(b"data: [DONE]\n\n")
    return response


async def _models(request: web.Request) -> web.Response:
    return web.json_response({"data": [{"id": "m"}]})


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    port = free_port()
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/completions", _completions)
    app.router.add_post("/v1/chat/completions", _completions)
    app.router.add_get("/v1/models", _models)
    runner = web.AppRunner(app)

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    time.sleep(0.3)
    yield f"http://127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


class Capture:
    """run_capture in a thread; ``wait()`` returns its summary once it stopped by itself."""

    def __init__(self, settings: CaptureSettings):
        self.settings = settings
        self.ready = threading.Event()
        self.summary = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "the proxy did not start"
        self.url = f"http://{settings.host}:{settings.port}"

    def _run(self) -> None:
        self.summary = run_capture(self.settings, on_ready=self.ready.set)

    def wait(self):
        self.thread.join(10)
        assert not self.thread.is_alive(), "the proxy did not stop at its cap"
        return self.summary


def settings(upstream: str, out: Path, **kwargs) -> CaptureSettings:
    return CaptureSettings(upstream=upstream, out=out, port=free_port(), **kwargs)


def sse_events(text: str) -> list[str]:
    return [e for e in text.split("\n\n") if e]


def test_stream_passes_through_unchanged_and_usage_is_recorded(upstream: str, tmp_path: Path) -> None:
    out = tmp_path / "cap.jsonl"
    capture = Capture(settings(upstream, out, max_requests=2, workload_type="code"))
    body = {"model": "m", "prompt": "def f():", "max_tokens": 3, "temperature": 0, "stream": True}
    direct = httpx.post(upstream + "/v1/completions", json=body).text
    proxied = httpx.post(capture.url + "/v1/completions", json=body)
    # The client did not ask for usage: the proxy asked upstream for it and dropped it again.
    assert proxied.status_code == 200 and proxied.text == direct
    assert not any('"usage"' in e for e in sse_events(proxied.text))
    asked = {**body, "stream_options": {"include_usage": True}}
    proxied_usage = httpx.post(capture.url + "/v1/completions", json=asked).text
    assert proxied_usage == httpx.post(upstream + "/v1/completions", json=asked).text
    assert '"usage"' in proxied_usage
    summary = capture.wait()
    assert summary.recorded == 2 and summary.stopped_by == "--max-requests reached"
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["output_tokens"] for x in lines] == [3, 3]
    assert lines[0]["prompt"] == "def f():" and lines[0]["type"] == "code" and lines[0]["max_tokens"] == 3
    assert lines[0]["arrival_s"] == 0.0 and lines[1]["arrival_s"] >= 0
    assert len(load_workload(out)) == 2


def test_lines_are_in_arrival_order_even_when_later_requests_finish_first(upstream: str, tmp_path: Path) -> None:
    out = tmp_path / "cap.jsonl"
    capture = Capture(settings(upstream, out, max_requests=2))

    def send(prompt: str) -> None:
        httpx.post(capture.url + "/v1/completions", json={"model": "m", "prompt": prompt}, timeout=10)

    slow = threading.Thread(target=send, args=("slow delay=1.0",))
    slow.start()
    time.sleep(0.3)
    send("fast")  # finishes while the first is still running
    assert out.read_text() == "", "the later request must wait for the earlier one"
    slow.join()
    capture.wait()
    assert [json.loads(x)["prompt"] for x in out.read_text().splitlines()] == ["slow delay=1.0", "fast"]
    load_workload(out)  # arrivals do not decrease


def test_errors_pass_through_and_are_not_recorded(upstream: str, tmp_path: Path) -> None:
    out = tmp_path / "cap.jsonl"
    capture = Capture(settings(upstream, out, max_requests=2))
    bad = httpx.post(capture.url + "/v1/completions", json={"model": "m", "prompt": "bad"})
    assert bad.status_code == 400 and bad.json() == {"error": "bad prompt"}
    assert httpx.get(capture.url + "/v1/models").json() == {"data": [{"id": "m"}]}  # proxied, not recorded
    chat = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert httpx.post(capture.url + "/v1/chat/completions", json=chat).status_code == 200
    summary = capture.wait()
    assert summary.skipped == {"HTTP 400 from upstream": 1}
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["messages"] == [{"role": "user", "content": "hi"}]  # text parts joined


def test_sampling_redaction_and_duration(upstream: str, tmp_path: Path) -> None:
    out = tmp_path / "cap.jsonl"
    capture = Capture(settings(upstream, out, sample=0.5, duration_s=5.0, seed=1,
                               redact=(re.compile(r"\b[\w.]+@[\w.]+\b"),)))
    sent = 0
    for i in range(20):
        try:
            httpx.post(capture.url + "/v1/completions", json={"model": "m", "prompt": f"{i} mail bob@example.com"})
        except httpx.ConnectError:  # a busy host: --duration ended the capture first
            break
        sent += 1
    summary = capture.wait()
    assert summary.stopped_by == "--duration reached"
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sent >= 10 and 1 <= len(lines) <= sent - 1 and summary.skipped["not sampled"] == sent - len(lines)
    assert all(x["prompt"].endswith("mail [redacted]") for x in lines)


def test_bad_options_name_the_fix() -> None:
    with pytest.raises(UsageError, match="--listen must be HOST:PORT"):
        parse_listen("localhost")
    assert parse_listen(":9000") == ("127.0.0.1", 9000)
    with pytest.raises(UsageError, match="--sample"):
        CaptureSettings(upstream="http://x:1", out=Path("o"), sample=0)
    with pytest.raises(UsageError, match="--upstream must be an http"):
        CaptureSettings(upstream="localhost:8000", out=Path("o"))
    fields, why = recordable({"prompt": [1, 2, 3]}, "completion")
    assert fields is None and "token ids" in why


def test_port_in_use_is_one_sentence(upstream: str, tmp_path: Path) -> None:
    capture = Capture(settings(upstream, tmp_path / "a.jsonl", max_requests=1))
    with pytest.raises(UsageError, match="cannot listen on .* pass a free --listen"):
        run_capture(CaptureSettings(upstream=upstream, out=tmp_path / "b.jsonl", port=capture.settings.port))
    httpx.post(capture.url + "/v1/completions", json={"model": "m", "prompt": "x"})
    capture.wait()


def test_n_stop_penalties_logprobs_and_tools_are_recorded(upstream: str, tmp_path: Path) -> None:
    out = tmp_path / "cap.jsonl"
    capture = Capture(settings(upstream, out, max_requests=3))
    completion = {"model": "m", "prompt": "p", "max_tokens": 3, "n": 2, "stop": ["\n\n"], "temperature": 0.8,
                  "seed": 1, "presence_penalty": 0.5, "frequency_penalty": 0.1, "logprobs": 2,
                  "response_format": {"type": "json_object"}, "repetition_penalty": 1.1, "min_p": 0.05,
                  "logit_bias": {"5": -100}, "stop_token_ids": [2], "stream": True}
    proxied = httpx.post(capture.url + "/v1/completions", json=completion).text
    assert proxied == httpx.post(upstream + "/v1/completions", json=completion).text
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "c1", "content": "42"}]
    chat = {"model": "m", "messages": history, "n": 3, "stop": "x",
            "logprobs": True, "top_logprobs": 2, "tools": tools, "tool_choice": "auto"}
    assert httpx.post(capture.url + "/v1/chat/completions", json=chat).json()["usage"]["completion_tokens"] == 9
    # vLLM would refuse this; the workload format does too, so it is skipped with the reason.
    httpx.post(capture.url + "/v1/completions", json={"model": "m", "prompt": "p", "presence_penalty": 7})
    summary = capture.wait()
    first, second = [json.loads(x) for x in out.read_text().splitlines()]
    # output_tokens is per choice: the usage report's 6 (stream) and 9 (chat) tokens over n.
    assert {k: first[k] for k in ("n", "max_tokens", "output_tokens")} == {"n": 2, "max_tokens": 3, "output_tokens": 3}
    assert first["stop"] == ["\n\n"] and first["logprobs"] == 2 and first["presence_penalty"] == 0.5
    assert first["frequency_penalty"] == 0.1 and first["response_format"] == {"type": "json_object"}
    assert (first["repetition_penalty"], first["min_p"], first["logit_bias"], first["stop_token_ids"]) == (
        1.1, 0.05, {"5": -100}, [2])
    assert (second["n"], second["output_tokens"], second["stop"]) == (3, 3, "x")
    assert second["messages"] == history  # the tool call's turn and the tool's answer, as sent
    assert (second["logprobs"], second["top_logprobs"], second["tools"], second["tool_choice"]) == (True, 2, tools, "auto")
    (reason,) = summary.skipped
    assert "'presence_penalty' must be a number in [-2, 2]" in reason
    loaded = load_workload(out).requests
    assert [r.choices for r in loaded] == [2, 3] and loaded[1].tools == tools
    # ... and replayed as captured
    _, body = request_body(loaded[0], "m", 16)
    assert (body["repetition_penalty"], body["min_p"], body["logit_bias"], body["stop_token_ids"]) == (
        1.1, 0.05, {"5": -100}, [2])
    _, body = request_body(loaded[1], "m", 16)
    assert body["messages"] == history


def test_usage_is_asked_for_without_encoding_the_body_again() -> None:
    from tuner.workload.capture import _asking_usage

    body = b'{"prompt": "caf\\u00e9",  "stream": true}\n'
    asked = _asking_usage(body, json.loads(body))
    assert asked.startswith(b'{"prompt": "caf\\u00e9",  "stream": true')  # the client's bytes, kept
    assert json.loads(asked) == {"prompt": "caf\u00e9", "stream": True, "stream_options": {"include_usage": True}}
    options = {"prompt": "x", "stream": True, "stream_options": {"continuous_usage_stats": True}}
    assert json.loads(_asking_usage(json.dumps(options).encode(), options))["stream_options"] == {
        "continuous_usage_stats": True, "include_usage": True}
